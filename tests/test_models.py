"""Public tests of part 2: ``Linear``, its initialisation, the ``Cruncher`` and ``set_seed``.

Oracles: ``torch.nn.functional.linear`` for the forward pass, the closed-form statistics of a
truncated normal for the initialisation, a composition of ``F.linear`` for the Cruncher, and one
generated snapshot (``fixtures/snapshots/test_models/``) for the Cruncher's forward on fixed weights.
Your modules are built and run by the drivers of ``tests/scenarios/models.py``, which return what
they observed (weights, outputs, gradients, placements, draws after ``set_seed``) for the tests to
check; in grading each runs beside your code as one round trip (see ``tests/boundary.py``).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator
from typing import TypedDict

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import adapters
from tests.scenarios import models as scenario

TRUNC_STD_FACTOR = math.sqrt(
    1 - 2 * 3 * math.exp(-4.5) / math.sqrt(2 * math.pi) / math.erf(3 / math.sqrt(2))
)
"""std of N(0, 1) truncated to [-3, 3] (~0.9866): the std a correct init actually has, in units of sigma."""


class Tolerance(TypedDict, total=False):
    """``rtol`` and ``atol`` of torch.testing.assert_close (neither: its defaults for the dtype)."""

    rtol: float
    atol: float


TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(rtol=1e-5, atol=1e-6),
    torch.float64: Tolerance(rtol=1e-12, atol=1e-12),
    torch.bfloat16: Tolerance(rtol=2e-2, atol=2e-2),
}


def assert_computes_with_its_weights(
    module: str, args: tuple, dtype: torch.dtype = torch.float32
) -> None:
    """Evidence that the module was built and runs: ``module(*args, dtype=dtype)`` on the CPU maps a seeded
    input to the composition of F.linear with its own weights (Linear: x W^T; Cruncher: every
    layers.{i} in order, then final, squeezed), so a module of the right shapes that computes nothing fails."""
    d_in = args[0]  # Linear(d_in, d_out), Cruncher(dim, num_layers)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, d_in, generator=g, dtype=torch.float64).to(dtype)
    run = scenario.forward(module, args, [x], kwargs={"dtype": dtype})
    weights, (out,) = run.weights, run.outputs
    expected = F.linear(x, weights["weight"]) if module == "linear" else f_linear_chain(weights, x)
    assert torch.isfinite(expected).all() and expected.abs().sum() > 0, (
        f"{module}{args} computes {'NaN' if expected.isnan().any() else 0} for a random input: its "
        "weights were never initialised (the tests build modules with uninitialised memory NaN)"
    )
    torch.testing.assert_close(
        out,
        expected,
        **TOLERANCES.get(dtype, {}),
        msg=lambda m: (
            f"{module}{args} (dtype={dtype}) does not compute the composition of F.linear with its own weights:\n{m}"
        ),
    )


@pytest.fixture
def restore_global_rngs() -> Iterator[None]:
    """Tests that seed the global generators put them back as they found them."""
    py, npy, pt = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(py)
    np.random.set_state(npy)
    torch.set_rng_state(pt)


def linear_matches_functional(
    d_in: int,
    d_out: int,
    batch_shape: tuple[int, ...],
    dtype: torch.dtype,
    seed: int,
    transposed: bool = False,
) -> None:
    """Shared by the public and hidden tests: run_linear(weights, x) == F.linear(x, weights).

    With ``transposed``, x is the transpose of a contiguous (..., d_in, batch_shape[-1]) tensor:
    the same shape, but not contiguous (as a transposed or sliced activation is).
    """
    g = torch.Generator().manual_seed(seed)
    weights = torch.randn(d_out, d_in, generator=g, dtype=torch.float64).to(dtype)
    if transposed:
        *outer, last = batch_shape
        x = (
            torch.randn(*outer, d_in, last, generator=g, dtype=torch.float64)
            .to(dtype)
            .transpose(-1, -2)
        )
    else:
        x = torch.randn(*batch_shape, d_in, generator=g, dtype=torch.float64).to(dtype)
    try:
        out = adapters.run_linear(d_in, d_out, weights, x)
    # NotImplementedError is a RuntimeError too: Linear is not written yet, not a view() problem
    except NotImplementedError:
        raise
    except RuntimeError as e:
        if not transposed:
            raise
        pytest.fail(
            f"Linear({d_in}, {d_out}) on a non-contiguous input of shape {tuple(x.shape)} (strides "
            f"{x.stride()}) raised RuntimeError ({e}); inputs may have any strides (a transposed or sliced "
            "activation): flatten with reshape() or use einsum/matmul, not view()",
            pytrace=False,
        )
    expected = F.linear(x, weights)
    assert out.shape == expected.shape, (
        f"Linear({d_in}, {d_out}) on input {tuple(x.shape)} returned shape {tuple(out.shape)}, "
        f"expected {tuple(expected.shape)}: leading dimensions are batch dimensions, the last becomes d_out"
    )
    assert out.dtype == dtype, f"Linear on {dtype} inputs returned {out.dtype}"
    torch.testing.assert_close(
        out,
        expected,
        **TOLERANCES[dtype],
        msg=lambda m: (
            f"Linear({d_in}, {d_out}) differs from F.linear(x, W) (y = x W^T, W is (d_out, d_in)):\n{m}"
        ),
    )


@pytest.mark.parametrize(
    "d_in, d_out, batch_shape, dtype, transposed",
    [
        (3, 5, (), torch.float32, False),
        (16, 8, (4,), torch.float32, False),
        (7, 3, (2, 5), torch.float32, False),
        (8, 16, (3,), torch.float64, False),
        (6, 4, (3, 5), torch.float32, True),
    ],
)
def test_linear_matches_functional_linear(d_in, d_out, batch_shape, dtype, transposed):
    """Linear with loaded weights computes F.linear(x, W) for any leading batch dimensions, and inputs of any strides."""
    linear_matches_functional(d_in, d_out, batch_shape, dtype, seed=0, transposed=transposed)


def test_linear_has_one_weight_of_shape_d_out_by_d_in():
    """Linear(d_in, d_out) has a single trainable parameter `weight` of shape (d_out, d_in) and no bias."""
    layer = scenario.layout("linear", (3, 5))
    params = layer.parameters
    assert list(params) == ["weight"], (
        f"Linear should have exactly one parameter named 'weight' (no bias), got {list(params)}"
    )
    assert params["weight"].shape == (5, 3), (
        f"Linear(d_in=3, d_out=5).weight has shape {params['weight'].shape}; store it as (d_out, d_in) = (5, 3)"
    )
    assert params["weight"].requires_grad, (
        "Linear.weight does not require grad: make it an nn.Parameter"
    )
    assert list(layer.state_dict) == ["weight"], (
        f"Linear's state_dict() has keys {list(layer.state_dict)}, expected only 'weight'"
    )
    assert_computes_with_its_weights("linear", (3, 5))


PLACEMENTS = [("meta", torch.float32), ("meta", torch.bfloat16), ("cpu", torch.float64)]


@pytest.mark.parametrize(
    "device, dtype", PLACEMENTS, ids=[f"{d}-{str(t)[6:]}" for d, t in PLACEMENTS]
)
@pytest.mark.parametrize(
    "module, args", [("linear", (4, 2)), ("cruncher", (4, 2))], ids=["Linear", "Cruncher"]
)
def test_modules_create_every_parameter_on_the_requested_device_and_dtype(
    module, args, device, dtype
):
    """Linear(..., device=, dtype=) and Cruncher(..., device=, dtype=) create every weight there, in that dtype.

    ``device="meta"`` gives tensors with a shape and a dtype but no memory, so any machine can check
    that the device reaches every layer (a model built on the CPU and moved would not fit a GPU
    twice over).
    """
    call = f"{module.capitalize()}({', '.join(map(str, args))}, device={device!r}, dtype={dtype})"
    placed = scenario.layout(module, args, {"device": device, "dtype": dtype}).parameters
    assert placed, f"{call} has no parameters"
    for name, p in placed.items():
        assert (p.device, p.dtype) == (device, dtype), (
            f"{call} created {name!r} (shape {p.shape}) on {p.device!r} in "
            f"{p.dtype}: pass device= and dtype= to torch.empty for the weight, and on to every Linear "
            "the module builds (the final head too)"
        )
    # meta holds no values: the same module, on the CPU
    assert_computes_with_its_weights(module, args, dtype)


#: How far rounding to each dtype may push a weight past 3 std (relative): half an ulp.
ROUNDING = {
    torch.float32: 1e-6,
    torch.float64: 1e-9,
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
}


def check_init_statistics(
    d_in: int, d_out: int, seed: int, dtype: torch.dtype | None = None
) -> None:
    """Shared by the public and hidden tests: the init is TruncNormal(0, sigma, -3 sigma, 3 sigma), in ``dtype``."""
    w = scenario.linear_init(d_in, d_out, seed, dtype)
    want = torch.float32 if dtype is None else dtype
    assert w.shape == (d_out, d_in)
    assert w.dtype == want, f"Linear({d_in}, {d_out}, dtype={want}) has a weight of dtype {w.dtype}"
    w = w.double()
    assert torch.isfinite(w).all() and w.abs().sum() > 0, (
        f"Linear({d_in}, {d_out}, dtype={want}) has weights that were never initialised (all zero, or inf/NaN "
        "from uninitialised memory): the init must fill the weight tensor itself. weight.float() or "
        "weight.to(...) of a non-fp32 tensor is a copy, and filling the copy leaves the weight as torch.empty made it"
    )
    sigma = 1 / math.sqrt(d_in)
    expected_std = TRUNC_STD_FACTOR * sigma
    std, mean, peak = w.std().item(), w.mean().item(), w.abs().max().item()
    assert abs(std / expected_std - 1) < 0.02, (
        f"Linear({d_in}, {d_out}) init has std {std:.5f}; a normal with std 1/sqrt(d_in) = {sigma:.5f} "
        f"truncated at ±3 std has std {expected_std:.5f} (std scales with d_in, the number of inputs, not d_out)"
    )
    assert abs(mean) < 0.01 * sigma, f"Linear init has mean {mean:.2e}, expected ~0"
    assert peak <= 3 * sigma * (1 + ROUNDING[want]), (
        f"Linear({d_in}, {d_out}) init has a weight of magnitude {peak:.5f} > 3 * std = {3 * sigma:.5f}; "
        "truncate at ±3 std (nn.init.trunc_normal_'s a and b are absolute bounds: a=-3*std, b=3*std)"
    )
    assert peak >= 2.9 * sigma, (
        f"Linear init never exceeds {peak:.5f} = {peak / sigma:.2f} std in {w.numel()} draws; "
        "truncation should be at ±3 std, not tighter"
    )


def check_init_truncates(
    d_in: int, d_out: int, seed: int, dtype: torch.dtype | None = None
) -> None:
    """Shared by the public and hidden tests: no probability mass piles up at ±3 std.

    A truncated normal has a density at its bounds like anywhere else: about 0.9 of 320,000 draws
    land within 0.01% of ±3 std. Clamping a normal instead puts every draw beyond the bounds,
    0.27% of them (~860), exactly on them.
    """
    w = scenario.linear_init(d_in, d_out, seed, dtype).double()
    bound = 3 / math.sqrt(d_in)
    assert w.std() > 0.5 / math.sqrt(d_in), (
        f"Linear({d_in}, {d_out}) init has std {w.std():.2e}, far below 1/sqrt(d_in) = {1 / math.sqrt(d_in):.2e}: "
        "the weights were not drawn from the truncated normal"
    )
    near = int((w.abs() >= bound * (1 - 1e-4)).sum())
    # 0.005%: ~20x what truncation gives there, ~1/50 of what clamping gives
    limit = max(16, w.numel() // 20_000)
    assert near <= limit, (
        f"{near} of {w.numel()} initial weights ({100 * near / w.numel():.3f}%) of Linear({d_in}, {d_out}) sit at "
        f"±3 std = ±{bound:.5f}; a truncated normal puts about {w.numel() * 2.7e-6:.1f} there. Clamping normal "
        "draws to ±3 std piles the 0.27% beyond the bounds onto them: truncate instead (redraw the draws out of "
        "range, or sample by inverse CDF as nn.init.trunc_normal_ does)"
    )


def test_linear_init_is_truncated_normal_with_std_inverse_sqrt_d_in():
    """Init weights have std 1/sqrt(d_in) (before truncation), zero mean, and lie within ±3 std."""
    check_init_statistics(d_in=800, d_out=400, seed=0)


def test_linear_init_truncates_rather_than_clamps():
    """Draws beyond ±3 std are redrawn, not clamped: the bounds carry no extra probability mass."""
    check_init_truncates(d_in=800, d_out=400, seed=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64], ids=["bfloat16", "float64"])
def test_linear_init_fills_the_weight_in_every_dtype(dtype):
    """A bfloat16 or float64 Linear gets the same truncated-normal init, drawn into its own weight."""
    check_init_statistics(d_in=800, d_out=400, seed=1, dtype=dtype)


@pytest.mark.parametrize("d_in, d_out, bad", [(0, 3, "d_in"), (4, -1, "d_out")])
def test_linear_rejects_nonpositive_dimensions(d_in, d_out, bad):
    """Linear with a dimension < 1 raises ValueError naming that dimension."""
    with pytest.raises(ValueError, match=bad):
        scenario.layout("linear", (d_in, d_out))


def test_linear_rejects_input_of_wrong_width():
    """Applying Linear(d_in, ...) to an input whose last dimension is not d_in raises ValueError naming d_in."""
    weights = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="d_in"):
        adapters.run_linear(4, 3, weights, torch.zeros(2, 5))


def test_cruncher_state_dict_keys_and_shapes():
    """Cruncher(dim, num_layers) has exactly layers.{i}.weight (dim, dim) and final.weight (1, dim)."""
    shapes = scenario.layout("cruncher", kwargs={"dim": 6, "num_layers": 3}).state_dict
    expected = {
        "layers.0.weight": (6, 6),
        "layers.1.weight": (6, 6),
        "layers.2.weight": (6, 6),
        "final.weight": (1, 6),
    }
    assert shapes == expected, (
        f"Cruncher(dim=6, num_layers=3) state dict is {shapes}, expected {expected}"
    )
    assert_computes_with_its_weights("cruncher", (6, 3))


def state_dict_shapes(module: str, args: tuple) -> dict[str, tuple[int, ...]]:
    """The state_dict of ``Linear(d_in, d_out)`` or ``Cruncher(dim, num_layers)`` as their docstrings define it:
    each key's shape, in order."""
    if module == "linear":
        d_in, d_out = args
        return {"weight": (d_out, d_in)}
    dim, num_layers = args
    return {
        **{f"layers.{i}.weight": (dim, dim) for i in range(num_layers)},
        "final.weight": (1, dim),
    }


def cruncher_weights_and_input(
    dim: int, num_layers: int, seed: int, dtype: torch.dtype = torch.float32
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Weights for a Cruncher from a seeded generator, independent of its own init, and a batch of 5 inputs."""
    g = torch.Generator().manual_seed(seed)
    weights = {
        key: torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) / math.sqrt(dim)
        for key, shape in state_dict_shapes("cruncher", (dim, num_layers)).items()
    }
    x = torch.randn(5, dim, generator=g, dtype=torch.float64).to(dtype)
    return weights, x


def cruncher_forward(
    dim: int,
    num_layers: int,
    weights: dict[str, torch.Tensor],
    inputs: list[torch.Tensor],
    dtype: torch.dtype = torch.float32,
) -> scenario.Forward:
    """Your ``Cruncher(dim=dim, num_layers=num_layers).to(dtype)`` with ``weights`` loaded, run on each of ``inputs``."""
    return scenario.forward(
        "cruncher",
        (),
        inputs,
        kwargs={"dim": dim, "num_layers": num_layers},
        weights=weights,
        cast=dtype,
    )


def test_cruncher_is_a_composition_of_linears():
    """Cruncher.forward applies every layers.{i} in order, then final, and returns shape (batch,)."""
    weights, x = cruncher_weights_and_input(dim=4, num_layers=3, seed=0)
    (out,) = cruncher_forward(4, 3, weights, [x]).outputs
    assert out.shape == (5,), (
        f"Cruncher on a batch of 5 returned shape {tuple(out.shape)}; expected (5,) (squeeze the head's last dim)"
    )
    expected = x
    for i in range(3):
        expected = F.linear(expected, weights[f"layers.{i}.weight"])
    expected = F.linear(expected, weights["final.weight"]).squeeze(-1)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_cruncher_forward_matches_snapshot(snapshot):
    """Cruncher(dim=8, num_layers=3) on fixed weights and inputs gives the stored reference outputs."""
    weights, x = cruncher_weights_and_input(dim=8, num_layers=3, seed=0)
    (out,) = cruncher_forward(8, 3, weights, [x]).outputs
    snapshot.assert_match("cruncher_forward", {"out": out}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, bad",
    [({"dim": 0, "num_layers": 2}, "dim"), ({"dim": 4, "num_layers": -1}, "num_layers")],
)
def test_cruncher_rejects_bad_sizes(kwargs, bad):
    """Cruncher with dim < 1 or num_layers < 0 raises ValueError naming the argument."""
    with pytest.raises(ValueError, match=bad):
        scenario.layout("cruncher", kwargs=kwargs)


#: How often the generators are drawn from before set_seed when its draws are compared with a first
#: run's: a set_seed that seeds nothing then draws other numbers (every driver starts from one state).
DRAWS_BEFORE = 3


def test_set_seed_makes_random_numpy_and_torch_reproducible():
    """After set_seed(s), random, numpy and torch draw the same numbers every time; other seeds differ."""
    first, _ = scenario.seeded_draws(1234, rounds=2)
    (again,) = scenario.seeded_draws(1234, rounds=1, draws_before=DRAWS_BEFORE)
    for name, a, b in zip(("random", "numpy", "torch"), first, again, strict=True):
        assert a == b, (
            f"set_seed(1234) twice gave different first draws from {name} ({a} vs {b}): seed {name} too"
        )
    (other,) = scenario.seeded_draws(4321, rounds=1)
    for name, a, b in zip(("random", "numpy", "torch"), first, other, strict=True):
        assert a != b, (
            f"set_seed(1234) and set_seed(4321) gave the same draw from {name}: the seed must be used"
        )


def test_set_seed_makes_model_init_reproducible():
    """set_seed(s) before building a Cruncher gives identical initial weights."""
    a, b, c = scenario.inits_after_set_seed([7, 7, 8], dim=4, num_layers=2)
    for key in a:
        assert torch.equal(a[key], b[key]), (
            f"{key} differs between two Crunchers built after set_seed(7)"
        )
    assert any(not torch.equal(a[key], c[key]) for key in a), (
        "set_seed(7) and set_seed(8) gave the same initial weights: the init must draw from the seeded RNG"
    )


def test_set_seed_rejects_negative_seed(restore_global_rngs):
    """set_seed(-1) raises ValueError naming the seed (numpy accepts only 0 <= seed < 2**32)."""
    with pytest.raises(ValueError, match="seed"):
        adapters.run_set_seed(-1)


# --------------------------------------------------------------------------------------------
# Edges: sizes of one and zero, the device and dtype of every output, the type and words of every
# documented error, gradients. Placement is checked on ``meta`` (any machine has it), next to the
# same call on the CPU, whose values prove the work was done.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d_in, d_out, batch_shape, dtype",
    [
        (1, 1, (1,), torch.float32),
        (5, 1, (1, 1), torch.float64),
        (1, 4, (3,), torch.float32),
        (8, 4, (1, 3), torch.bfloat16),
    ],
    ids=["one-in-one-out-batch-1", "d_out-1-batch-1x1", "d_in-1", "bfloat16-batch-1"],
)
def test_linear_keeps_dimensions_of_size_one_and_zero(d_in, d_out, batch_shape, dtype):
    """A batch of one, d_in or d_out of 1, and the same with an empty batch in front, keep every dimension:
    (*batch, d_out), in x's dtype."""
    linear_matches_functional(d_in, d_out, batch_shape, dtype, seed=21)
    linear_matches_functional(d_in, d_out, (0, *batch_shape), dtype, seed=21)


def f_linear_chain(weights: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The Cruncher as its docstring defines it, from F.linear: every layers.{i}, then final, squeezed."""
    hidden = sorted(
        (k for k in weights if k.startswith("layers.")), key=lambda k: int(k.split(".")[1])
    )
    for key in hidden:
        x = F.linear(x, weights[key])
    return F.linear(x, weights["final.weight"]).squeeze(-1)


@pytest.mark.parametrize(
    "dim, num_layers", [(3, 2), (1, 1), (4, 0)], ids=["dim-3", "dim-1", "head-only"]
)
def test_cruncher_maps_a_batch_of_one_to_shape_one(dim, num_layers):
    """Cruncher maps (batch, dim) to (batch,) for a batch of one (not a 0-d tensor) and an empty batch, with dim = 1
    and with no hidden layers too."""
    weights, x = cruncher_weights_and_input(dim=dim, num_layers=num_layers, seed=22)
    outputs = cruncher_forward(dim, num_layers, weights, [x[:1], x[:0]]).outputs
    for batch, out in zip((1, 0), outputs, strict=True):
        assert out.shape == (batch,), (
            f"Cruncher(dim={dim}, num_layers={num_layers}) on input of shape {tuple(x[:batch].shape)} returned shape "
            f"{tuple(out.shape)}, expected ({batch},): squeeze only the head's size-1 output dimension "
            "(squeeze(-1)); squeeze() drops every size-1 dimension, the batch of one included"
        )
        torch.testing.assert_close(out, f_linear_chain(weights, x[:batch]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("module", ["linear", "cruncher"])
def test_module_outputs_live_on_the_device_and_in_the_dtype_of_the_module(module, dtype):
    """A module built on ``meta`` returns meta outputs of the right shape and dtype; on the CPU the same
    module returns F.linear's values."""
    args, out_shape = ((4, 3), (2, 5, 3)) if module == "linear" else ((4, 2), (2,))
    x_shape = (2, 5, 4) if module == "linear" else (2, 4)
    meta = {"device": "meta", "dtype": dtype}
    (out,) = scenario.forward(module, args, [torch.empty(x_shape, **meta)], kwargs=meta).outputs
    assert (out.device.type, out.dtype, tuple(out.shape)) == ("meta", dtype, out_shape), (
        f"{module.capitalize()}{args} built with device='meta', dtype={dtype} returned {out.device}, {out.dtype}, "
        f"shape {tuple(out.shape)} on a meta input of shape {x_shape}; expected meta, {dtype}, {out_shape}"
    )
    g = torch.Generator().manual_seed(23)
    weights = {
        k: torch.randn(shape, generator=g).to(dtype)
        for k, shape in state_dict_shapes(module, args).items()
    }
    x = torch.randn(x_shape, generator=g).to(dtype)
    (out,) = scenario.forward(module, args, [x], kwargs={"dtype": dtype}, weights=weights).outputs
    want = F.linear(x, weights["weight"]) if module == "linear" else f_linear_chain(weights, x)
    torch.testing.assert_close(out, want, **TOLERANCES[dtype])


def test_linear_gradients_match_functional_linear():
    """Backpropagating through Linear gives F.linear's gradients for the weight and for a non-contiguous input."""
    g = torch.Generator().manual_seed(24)
    w = torch.randn(2, 5, generator=g, dtype=torch.float64)
    # (3, 4, 5), not contiguous
    x = torch.randn(3, 5, 4, generator=g, dtype=torch.float64).transpose(1, 2)
    upstream = torch.randn(3, 4, 2, generator=g, dtype=torch.float64)
    grads = scenario.gradients("linear", (5, 2), {"weight": w.float()}, x.float(), upstream.float())
    w_ref, x_ref = w.clone().requires_grad_(), x.clone().requires_grad_()
    (F.linear(x_ref, w_ref) * upstream).sum().backward()
    assert grads.params["weight"] is not None, (
        "Linear.weight got no gradient: it must be the nn.Parameter forward uses"
    )
    torch.testing.assert_close(grads.params["weight"], w_ref.grad.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads.input, x_ref.grad.float(), rtol=1e-5, atol=1e-5)


def test_cruncher_gradients_match_the_composition_of_linears():
    """A backward pass through the Cruncher gives every weight, and the input, the gradients of the F.linear chain."""
    weights, x = cruncher_weights_and_input(dim=3, num_layers=2, seed=25)
    upstream = torch.randn(5, generator=torch.Generator().manual_seed(25))
    grads = scenario.gradients("cruncher", (3, 2), weights, x, upstream)
    ref = {k: v.clone().requires_grad_() for k, v in weights.items()}
    x_ref = x.clone().requires_grad_()
    (f_linear_chain(ref, x_ref) * upstream).sum().backward()
    for name, want in ref.items():
        got = grads.params[name]
        assert got is not None, f"{name} got no gradient: every layer must be used in forward"
        torch.testing.assert_close(
            got, want.grad, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"grad of {n}: {m}"
        )
    torch.testing.assert_close(grads.input, x_ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: scenario.layout("linear", (2.5, 3)), "d_in must be a positive integer, got 2.5"),
        (lambda: scenario.layout("linear", ("4", 3)), "d_in must be a positive integer, got '4'"),
        (
            lambda: scenario.layout("cruncher", kwargs={"dim": 0.5, "num_layers": 1}),
            "dim must be a positive integer, got 0.5",
        ),
        (
            lambda: scenario.layout("cruncher", kwargs={"dim": 4, "num_layers": 1.5}),
            "num_layers must be a non-negative integer, got 1.5",
        ),
        (
            lambda: adapters.run_linear(4, 2, torch.zeros(2, 4), torch.zeros(3, 2, 5)),
            "Linear expects inputs whose last dimension is d_in=4, got shape (3, 2, 5)",
        ),
        (
            lambda: adapters.run_linear(4, 2, torch.zeros(2, 4), torch.zeros(())),
            "Linear expects inputs whose last dimension is d_in=4, got shape ()",
        ),
    ],
    ids=[
        "linear-fractional-d_in",
        "linear-string-d_in",
        "cruncher-fractional-dim",
        "cruncher-fractional-layers",
        "batched-wrong-width",
        "0-d-input",
    ],
)
def test_models_raise_value_error_for_each_documented_mistake(build, message):
    """Sizes that are not integers and inputs of the wrong width are ValueErrors with the documented words, not
    a TypeError from torch.empty or a RuntimeError from the matmul."""
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


@pytest.mark.parametrize(
    "seed", [2**32, -5, 1.5, "7"], ids=["2**32", "negative", "fractional", "string"]
)
def test_set_seed_raises_value_error_for_seeds_numpy_rejects(seed):
    """Anything but an integer in [0, 2**32) is a ValueError naming the seed, raised before any generator is seeded."""
    with pytest.raises(
        ValueError, match=re.escape(f"seed must be an integer in [0, 2**32), got {seed!r}")
    ):
        changed = scenario.set_seed_rejecting(seed)
        assert not changed, (  # an AssertionError, which pytest.raises(ValueError) lets through
            f"set_seed({seed!r}) reseeded {' and '.join(changed)} although the seed is invalid: check the seed "
            "first, and raise before seeding any generator"
        )


@pytest.mark.parametrize("seed", [1, 2**32 - 2], ids=["low", "high"])
def test_set_seed_is_reproducible_across_numpys_whole_range(seed):
    """set_seed works near both ends of [0, 2**32): twice the same seed, the same draws; the neighbour seed, others."""
    (first,) = scenario.seeded_draws(seed, rounds=1)
    assert scenario.seeded_draws(seed, rounds=1, draws_before=DRAWS_BEFORE) == [first], (
        f"set_seed({seed}) twice gave different draws"
    )
    (other,) = scenario.seeded_draws(seed + 1, rounds=1)
    for name, a, b in zip(("random", "numpy", "torch"), first, other, strict=True):
        assert a != b, (
            f"set_seed({seed}) and set_seed({seed + 1}) gave the same draw from {name}: use the seed"
        )
