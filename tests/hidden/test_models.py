"""Hidden tests of part 2: other seeds, shapes and dtypes, gradients, edge sizes and seeds."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

import adapters
from tests.scenarios import models as scenario
from tests.test_models import (
    DRAWS_BEFORE,
    assert_computes_with_its_weights,
    check_init_statistics,
    check_init_truncates,
    cruncher_forward,
    cruncher_weights_and_input,
    linear_matches_functional,
    restore_global_rngs,  # noqa: F401  (fixture)
)


@pytest.mark.parametrize(
    "d_in, d_out, batch_shape, dtype, seed",
    [
        (1, 1, (), torch.float32, 1),
        (32, 7, (2, 3, 4), torch.float32, 2),
        (5, 9, (6,), torch.float64, 3),
        (9, 5, (2, 2), torch.float64, 4),
        (16, 16, (4,), torch.bfloat16, 5),
    ],
)
def test_linear_matches_functional_linear_other_shapes_and_dtypes(
    d_in, d_out, batch_shape, dtype, seed
):
    """Linear equals F.linear for scalar-free, deep-batch, float64 and bfloat16 inputs."""
    linear_matches_functional(d_in, d_out, batch_shape, dtype, seed)


@pytest.mark.parametrize(
    "d_in, d_out, batch_shape, dtype, seed",
    [
        (5, 2, (7,), torch.float64, 11),
        (9, 4, (2, 3, 6), torch.bfloat16, 12),
        (1, 3, (4,), torch.float32, 13),
    ],
)
def test_linear_matches_functional_linear_on_transposed_inputs(
    d_in, d_out, batch_shape, dtype, seed
):
    """Non-contiguous (transposed) inputs of other shapes and dtypes give F.linear's result."""
    linear_matches_functional(d_in, d_out, batch_shape, dtype, seed, transposed=True)


@pytest.mark.parametrize("d_in, d_out, seed", [(300, 1200, 1), (2000, 100, 2)])
def test_linear_init_statistics_other_shapes(d_in, d_out, seed):
    """The init is TruncNormal(0, 1/sqrt(d_in), ±3 std) for wide and tall layers alike."""
    check_init_statistics(d_in, d_out, seed)


@pytest.mark.parametrize(
    "d_in, d_out, seed, dtype",
    [(300, 1200, 4, None), (2000, 100, 5, torch.float64), (640, 640, 6, None)],
)
def test_linear_init_truncates_rather_than_clamps_other_shapes(d_in, d_out, seed, dtype):
    """Wide, tall and float64 layers: no probability mass piles up at ±3 std."""
    check_init_truncates(d_in, d_out, seed, dtype)


@pytest.mark.parametrize(
    "d_in, d_out, seed, dtype",
    [(1200, 300, 7, torch.bfloat16), (100, 2000, 8, torch.float64), (512, 512, 9, torch.float16)],
)
def test_linear_init_fills_the_weight_other_shapes_and_dtypes(d_in, d_out, seed, dtype):
    """bfloat16, float64 and float16 layers of other shapes get the truncated-normal init in their own weight."""
    check_init_statistics(d_in, d_out, seed, dtype)


@pytest.mark.parametrize(
    "module, args, device, dtype",
    [
        ("cruncher", (3, 0), "meta", torch.float16),
        ("cruncher", (5, 4), "meta", torch.float64),
        ("linear", (1, 7), "meta", torch.bfloat16),
        ("cruncher", (2, 1), "cpu", torch.bfloat16),
    ],
)
def test_modules_honour_device_and_dtype_other_sizes(module, args, device, dtype):
    """A head-only and a deep Cruncher, and a 1-input Linear, put every parameter on the device, in the dtype."""
    placed = scenario.layout(module, args, {"device": device, "dtype": dtype}).parameters
    wrong = {
        k: (p.device, p.dtype) for k, p in placed.items() if (p.device, p.dtype) != (device, dtype)
    }
    assert placed and not wrong, (
        f"{module}{args}(device={device!r}, dtype={dtype}): misplaced {wrong}"
    )
    assert_computes_with_its_weights(module, args, dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_linear_init_in_other_dtypes_is_bounded(dtype):
    """A float64 or bfloat16 Linear has weights of that dtype, all within ±3/sqrt(d_in) (up to rounding)."""
    w = scenario.linear_init(256, 64, seed=3, dtype=dtype)
    assert w.dtype == dtype
    slack = 1e-2 if dtype == torch.bfloat16 else 1e-9
    assert w.double().abs().max().item() <= 3 / math.sqrt(256) * (1 + slack)
    assert w.double().std().item() > 0.5 / math.sqrt(256), (
        "the weights were not drawn from the truncated normal"
    )


def test_linear_gradient_matches_functional_linear():
    """Backpropagating through Linear gives the same weight and input gradients as F.linear."""
    g = torch.Generator().manual_seed(6)
    w = torch.randn(3, 4, generator=g)
    x = torch.randn(2, 5, 4, generator=g)
    x_ref = x.clone().requires_grad_()
    w_ref = w.clone().requires_grad_()
    upstream = torch.randn(2, 5, 3, generator=g)
    grads = scenario.gradients("linear", (4, 3), {"weight": w}, x, upstream)
    (F.linear(x_ref, w_ref) * upstream).sum().backward()
    assert grads.params["weight"] is not None, (
        "Linear.weight got no gradient: it must be an nn.Parameter used in forward"
    )
    torch.testing.assert_close(grads.params["weight"], w_ref.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads.input, x_ref.grad, rtol=1e-5, atol=1e-6)


def test_linear_rejects_wrong_width_on_batched_input():
    """A 3-D input whose last dimension is not d_in raises ValueError naming d_in."""
    with pytest.raises(ValueError, match="d_in"):
        adapters.run_linear(3, 2, torch.zeros(2, 3), torch.zeros(4, 3, 2))


def test_cruncher_with_zero_layers_is_just_the_head():
    """Cruncher(dim, 0) has only final.weight and maps (batch, dim) to (batch,)."""
    assert list(scenario.layout("cruncher", (3, 0)).state_dict) == ["final.weight"]
    weights, x = cruncher_weights_and_input(dim=3, num_layers=0, seed=7)
    (out,) = cruncher_forward(3, 0, weights, [x]).outputs
    torch.testing.assert_close(out, F.linear(x, weights["final.weight"]).squeeze(-1))


def test_cruncher_float64_is_a_composition_of_linears():
    """A float64 Cruncher matches the composition of F.linear to float64 precision."""
    weights, x = cruncher_weights_and_input(dim=6, num_layers=4, seed=8, dtype=torch.float64)
    (out,) = cruncher_forward(6, 4, weights, [x], dtype=torch.float64).outputs
    expected = x
    for i in range(4):
        expected = F.linear(expected, weights[f"layers.{i}.weight"])
    expected = F.linear(expected, weights["final.weight"]).squeeze(-1)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_cruncher_gradients_reach_every_layer():
    """A backward pass through the Cruncher gives every parameter a gradient of its own shape."""
    weights, x = cruncher_weights_and_input(dim=4, num_layers=3, seed=9)
    upstream = torch.randn(5, generator=torch.Generator().manual_seed(9))
    grads = scenario.gradients("cruncher", (4, 3), weights, x, upstream)
    for name, grad in grads.params.items():
        shape = weights[name].shape
        assert grad is not None and grad.shape == shape, (
            f"{name} got no gradient of shape {tuple(shape)}"
        )
        assert grad.abs().sum() > 0, f"{name}'s gradient is all zero"


def test_cruncher_forward_matches_snapshot_other_seed(snapshot):
    """Cruncher(dim=5, num_layers=2) on other fixed weights gives the stored reference outputs."""
    weights, x = cruncher_weights_and_input(dim=5, num_layers=2, seed=10)
    (out,) = cruncher_forward(5, 2, weights, [x]).outputs
    snapshot.assert_match("cruncher_forward_seed10", {"out": out}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 2**32 - 1])
def test_set_seed_accepts_the_whole_numpy_range(seed):
    """set_seed works at both ends of [0, 2**32) and is reproducible there."""
    (first,) = scenario.seeded_draws(seed, rounds=1)
    assert scenario.seeded_draws(seed, rounds=1, draws_before=DRAWS_BEFORE) == [first], (
        f"set_seed({seed}) gave other draws after the generators had been drawn from: it must reseed all three"
    )


def test_set_seed_rejects_seed_beyond_numpy_range(restore_global_rngs):  # noqa: F811
    """set_seed(2**32) raises ValueError naming the seed."""
    with pytest.raises(ValueError, match="seed"):
        adapters.run_set_seed(2**32)


# --------------------------------------------------------------------------------------------
# Edges on other data: size one and zero, devices and dtypes of outputs, error types and words
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_cruncher_batch_of_one_other_dtypes(dtype):
    """A float64 or bfloat16 Cruncher maps a batch of one to shape (1,) with the F.linear chain's value."""
    weights, x = cruncher_weights_and_input(dim=2, num_layers=3, seed=41, dtype=dtype)
    (out,) = cruncher_forward(2, 3, weights, [x[:1]], dtype=dtype).outputs
    assert out.shape == (1,) and out.dtype == dtype, (
        f"got shape {tuple(out.shape)}, dtype {out.dtype}"
    )
    expected = x[:1]
    for i in range(3):
        expected = F.linear(expected, weights[f"layers.{i}.weight"])
    expected = F.linear(expected, weights["final.weight"]).squeeze(-1)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-12
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "d_in, d_out, batch_shape, dtype",
    [(2, 1, (0, 3), torch.float64), (1, 1, (1, 1, 1), torch.bfloat16), (3, 5, (1,), torch.float32)],
    ids=["empty-outer", "all-ones-bf16", "batch-1"],
)
def test_linear_keeps_size_one_and_zero_dims_other_shapes(d_in, d_out, batch_shape, dtype):
    """Empty and size-one batch dimensions, d_in = d_out = 1, in float64, bfloat16 and float32."""
    linear_matches_functional(d_in, d_out, batch_shape, dtype, seed=42)
    if 0 in batch_shape:  # an empty output holds no values: the same layer on a batch that has some
        linear_matches_functional(d_in, d_out, (2,), dtype, seed=43)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64], ids=str)
def test_cruncher_on_meta_returns_meta_outputs_other_dtypes(dtype):
    """A head-only and a deep Cruncher on meta return meta (batch,) outputs of their dtype, a batch of one included."""
    meta = {"device": "meta", "dtype": dtype}
    for num_layers, batch in ((0, 1), (3, 4)):
        (out,) = scenario.forward(
            "cruncher", (5, num_layers), [torch.empty(batch, 5, **meta)], kwargs=meta
        ).outputs
        assert (out.device.type, out.dtype, tuple(out.shape)) == ("meta", dtype, (batch,)), (
            f"Cruncher(5, {num_layers}) on meta, {dtype}: got {out.device}, {out.dtype}, {tuple(out.shape)}"
        )
        # meta holds no values: the same module, on the CPU
        assert_computes_with_its_weights("cruncher", (5, num_layers), dtype)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: scenario.layout("linear", (3.0, 3)), "d_in must be a positive integer, got 3.0"),
        (
            lambda: scenario.layout("cruncher", kwargs={"dim": 3, "num_layers": "2"}),
            "num_layers must be a non-negative integer, got '2'",
        ),
        (
            lambda: adapters.run_linear(2, 3, torch.zeros(3, 2), torch.zeros(1, 1, 3)),
            "Linear expects inputs whose last dimension is d_in=2, got shape (1, 1, 3)",
        ),
    ],
    ids=["linear-float-integer", "cruncher-string-layers", "wrong-width-size-one-batch"],
)
def test_models_documented_errors_other_inputs(build, message):
    """Other non-integer sizes and a wrong width behind size-one batch dims: ValueErrors with the documented words."""
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


@pytest.mark.parametrize(
    "seed", [2**40, 3.0, -(2**33)], ids=["2**40", "float-integer", "far-negative"]
)
def test_set_seed_rejects_other_non_seeds(seed, restore_global_rngs):  # noqa: F811
    """2**40, 3.0 and -2**33 are ValueErrors naming the seed."""
    with pytest.raises(
        ValueError, match=re.escape(f"seed must be an integer in [0, 2**32), got {seed!r}")
    ):
        adapters.run_set_seed(seed)
