"""Public tests of part 2: ``Linear``, its initialisation, the ``Cruncher`` and ``set_seed``.

Oracles: ``torch.nn.functional.linear`` for the forward pass, the closed-form statistics of a
truncated normal for the initialisation, a composition of ``F.linear`` for the Cruncher, and one
generated snapshot (``fixtures/snapshots/test_models/``) for the Cruncher's forward on fixed weights.
Seeded initialisation and ``set_seed`` run in ``tests/scenarios/models.py`` (in grading too, the
global RNGs a test seeds are the ones your code draws from: see ``tests/boundary.py``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

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

TOLERANCES = {
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
}


def assert_computes_with_its_weights(module: str, args: tuple, dtype: torch.dtype = torch.float32) -> None:
    """Evidence that the module was built and runs: ``module(*args, dtype=dtype)`` on the CPU maps a seeded
    input to the composition of F.linear with its own weights (Linear: x W^T; Cruncher: every
    layers.{i} in order, then final, squeezed), so a module of the right shapes that computes nothing fails."""
    model = scenario.MODULES[module]()(*args, dtype=dtype)
    weights = model.state_dict()
    d_in = (weights.get("layers.0.weight", weights.get("final.weight", weights.get("weight")))).shape[-1]
    x = torch.randn(3, d_in, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    expected = x
    if module == "linear":
        expected = F.linear(x, weights["weight"])
    else:
        for i in range(sum(k.startswith("layers.") for k in weights)):
            expected = F.linear(expected, weights[f"layers.{i}.weight"])
        expected = F.linear(expected, weights["final.weight"]).squeeze(-1)
    with torch.no_grad():
        out = model(x)
    assert expected.abs().sum() > 0, f"{module}{args} computes 0 for a random input: its weights were never initialised"
    torch.testing.assert_close(out, expected, **TOLERANCES.get(dtype, {}), msg=lambda m: (
        f"{module}{args} (dtype={dtype}) does not compute the composition of F.linear with its own weights:\n{m}"))


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
    except NotImplementedError:  # a RuntimeError too: Linear is not written yet, not a view() problem
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
    layer = adapters.get_linear_cls()(3, 5)
    params = dict(layer.named_parameters())
    assert list(params) == ["weight"], (
        f"Linear should have exactly one parameter named 'weight' (no bias), got {list(params)}"
    )
    assert params["weight"].shape == (5, 3), (
        f"Linear(d_in=3, d_out=5).weight has shape {tuple(params['weight'].shape)}; store it as (d_out, d_in) = (5, 3)"
    )
    assert params["weight"].requires_grad
    assert list(layer.state_dict()) == ["weight"]
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
    placed = scenario.parameter_placement(module, args, device=device, dtype=dtype)
    assert placed, f"{call} has no parameters"
    for name, (where, got_dtype, shape) in placed.items():
        assert (where, got_dtype) == (device, dtype), (
            f"{call} created {name!r} (shape {shape}) on {where!r} in "
            f"{got_dtype}: pass device= and dtype= to torch.empty for the weight, and on to every Linear "
            "the module builds (the final head too)"
        )
    assert_computes_with_its_weights(module, args, dtype)  # meta holds no values: the same module, on the CPU


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
        adapters.get_linear_cls()(d_in, d_out)


def test_linear_rejects_input_of_wrong_width():
    """Applying Linear(d_in, ...) to an input whose last dimension is not d_in raises ValueError naming d_in."""
    weights = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="d_in"):
        adapters.run_linear(4, 3, weights, torch.zeros(2, 5))


def test_cruncher_state_dict_keys_and_shapes():
    """Cruncher(dim, num_layers) has exactly layers.{i}.weight (dim, dim) and final.weight (1, dim)."""
    model = adapters.get_cruncher_cls()(dim=6, num_layers=3)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
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


def cruncher_with_fixed_weights(
    dim: int, num_layers: int, seed: int, dtype: torch.dtype = torch.float32
):
    """A Cruncher whose weights are loaded from a seeded generator, independent of its own init."""
    g = torch.Generator().manual_seed(seed)
    model = adapters.get_cruncher_cls()(dim=dim, num_layers=num_layers).to(dtype)
    weights = {
        key: torch.randn(tuple(value.shape), generator=g, dtype=torch.float64).to(dtype)
        / math.sqrt(dim)
        for key, value in model.state_dict().items()
    }
    model.load_state_dict(weights)
    x = torch.randn(5, dim, generator=g, dtype=torch.float64).to(dtype)
    return model, weights, x


def test_cruncher_is_a_composition_of_linears():
    """Cruncher.forward applies every layers.{i} in order, then final, and returns shape (batch,)."""
    model, weights, x = cruncher_with_fixed_weights(dim=4, num_layers=3, seed=0)
    out = model(x)
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
    model, _, x = cruncher_with_fixed_weights(dim=8, num_layers=3, seed=0)
    with torch.no_grad():
        out = model(x)
    snapshot.assert_match("cruncher_forward", {"out": out}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, bad",
    [({"dim": 0, "num_layers": 2}, "dim"), ({"dim": 4, "num_layers": -1}, "num_layers")],
)
def test_cruncher_rejects_bad_sizes(kwargs, bad):
    """Cruncher with dim < 1 or num_layers < 0 raises ValueError naming the argument."""
    with pytest.raises(ValueError, match=bad):
        adapters.get_cruncher_cls()(**kwargs)


def test_set_seed_makes_random_numpy_and_torch_reproducible(restore_global_rngs):
    """After set_seed(s), random, numpy and torch draw the same numbers every time; other seeds differ."""
    first, _ = scenario.seeded_draws(1234, rounds=2)
    (again,) = scenario.seeded_draws(1234, rounds=1)
    for name, a, b in zip(("random", "numpy", "torch"), first, again, strict=True):
        assert a == b, (
            f"set_seed(1234) twice gave different first draws from {name} ({a} vs {b}): seed {name} too"
        )
    (other,) = scenario.seeded_draws(4321, rounds=1)
    for name, a, b in zip(("random", "numpy", "torch"), first, other, strict=True):
        assert a != b, (
            f"set_seed(1234) and set_seed(4321) gave the same draw from {name}: the seed must be used"
        )


def test_set_seed_makes_model_init_reproducible(restore_global_rngs):
    """set_seed(s) before building a Cruncher gives identical initial weights."""
    adapters.run_set_seed(7)
    a = adapters.get_cruncher_cls()(dim=4, num_layers=2).state_dict()
    adapters.run_set_seed(7)
    b = adapters.get_cruncher_cls()(dim=4, num_layers=2).state_dict()
    for key in a:
        assert torch.equal(a[key], b[key]), (
            f"{key} differs between two Crunchers built after set_seed(7)"
        )
    adapters.run_set_seed(8)
    c = adapters.get_cruncher_cls()(dim=4, num_layers=2).state_dict()
    assert any(not torch.equal(a[key], c[key]) for key in a), (
        "set_seed(7) and set_seed(8) gave the same initial weights: the init must draw from the seeded RNG"
    )


def test_set_seed_rejects_negative_seed(restore_global_rngs):
    """set_seed(-1) raises ValueError naming the seed (numpy accepts only 0 <= seed < 2**32)."""
    with pytest.raises(ValueError, match="seed"):
        adapters.run_set_seed(-1)
