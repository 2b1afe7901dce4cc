"""Hidden tests of part 8, precision: other seeds, shapes, input dtypes, scaler corners and bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

import adapters
from tests.scenarios import precision
from tests.scenarios.precision import ScalerRun
from tests.test_precision import (
    E4M3,
    FP8,
    _assert_same_run,
    _fp8_matmul_rel_error,
    _fp8_operands,
    _half_ulp_violations,
    _mixed_step_grad_errors,
    _name,
    _run_scaler,
    _scaler_run,
    assert_close_to_the_product,
    assert_documented_scale,
    documented_scale,
)

E5M2 = torch.float8_e5m2


def documented_fp8(x: Tensor, dtype: torch.dtype, granularity: str) -> tuple[Tensor, Tensor]:
    """Oracle of to_fp8 (hidden: it is a working to_fp8): x_fp8 = cast(clamp(x / scale, -max, max)), documented scale."""
    scale, fp8_max = documented_scale(x, dtype, granularity), torch.finfo(dtype).max
    return (x.float() / scale).clamp(-fp8_max, fp8_max).to(dtype), scale


# --------------------------------------------------------------------------------------------
# dtype_info
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (
            torch.float32,
            {"bits": 32, "exponent_bits": 8, "mantissa_bits": 23, "max": (2 - 2**-23) * 2.0**127},
        ),
        (
            torch.float16,
            {
                "bits": 16,
                "exponent_bits": 5,
                "mantissa_bits": 10,
                "max": 65504.0,
                "smallest_subnormal": 2.0**-24,
            },
        ),
        (
            torch.bfloat16,
            {
                "bits": 16,
                "exponent_bits": 8,
                "mantissa_bits": 7,
                "smallest_normal": 2.0**-126,
                "eps": 2.0**-7,
            },
        ),
        (
            torch.float8_e4m3fn,
            {
                "bits": 8,
                "exponent_bits": 4,
                "mantissa_bits": 3,
                "max": 448.0,
                "smallest_subnormal": 2.0**-9,
            },
        ),
        (
            torch.float8_e5m2,
            {
                "bits": 8,
                "exponent_bits": 5,
                "mantissa_bits": 2,
                "max": 57344.0,
                "smallest_normal": 2.0**-14,
            },
        ),
    ],
    ids=lambda v: _name(v) if isinstance(v, torch.dtype) else "",
)
def test_dtype_info_matches_the_lecture_table(dtype, expected):
    """The lecture's table: field widths, fp16 max 65504, e4m3fn max 448 (no inf), e5m2 max 57344."""
    info = adapters.run_dtype_info(dtype)
    for key, value in expected.items():
        assert info[key] == value, f"{_name(dtype)}: {key} is {info[key]}, expected {value}"


def test_dtype_info_returns_every_key_with_python_numbers():
    """All seven keys are present, bit counts are ints and the rest are floats."""
    info = adapters.run_dtype_info(torch.float8_e5m2)
    keys = {
        "bits",
        "exponent_bits",
        "mantissa_bits",
        "max",
        "smallest_normal",
        "smallest_subnormal",
        "eps",
    }
    assert set(info) == keys, f"keys differ: missing {keys - set(info)}, extra {set(info) - keys}"
    for key in ("bits", "exponent_bits", "mantissa_bits"):
        assert isinstance(info[key], int), f"{key} should be an int"
    for key in keys - {"bits", "exponent_bits", "mantissa_bits"}:
        assert isinstance(info[key], float), f"{key} should be a float"
    assert (info["bits"], info["exponent_bits"], info["mantissa_bits"]) == (8, 5, 2), (
        "float8_e5m2: 8 bits, 5 exponent, 2 mantissa"
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, *FP8], ids=_name)
def test_dtype_info_max_is_the_largest_finite_value(dtype):
    """max is representable, and the next step up (max + ulp) is not finite or saturates back to max."""
    info = adapters.run_dtype_info(dtype)
    ulp = 2.0 ** (math.floor(math.log2(info["max"])) - info["mantissa_bits"])
    vals = torch.tensor([info["max"], info["max"] + ulp], dtype=torch.float64).to(dtype).double()
    assert vals[0].item() == info["max"]
    assert not math.isfinite(vals[1].item()) or vals[1].item() == info["max"], (
        f"{info['max'] + ulp} is finite in {_name(dtype)}"
    )


# --------------------------------------------------------------------------------------------
# to_fp8 / from_fp8
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16], ids=_name)
@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_half_ulp_for_mixed_magnitudes_and_input_dtypes(dtype, granularity, in_dtype):
    """Log-uniform magnitudes 1e-6..1e4 mixed within each row, low-precision inputs: error <= half an ulp of x / scale.

    m mantissa bits give spacing 2**(floor(log2|y|) - m); round to nearest is off by at most half of it.
    """
    g = torch.Generator().manual_seed(11)
    mags = 10 ** torch.empty(7, 48).uniform_(-6, 4, generator=g)
    x = (mags * torch.randn(7, 48, generator=g).sign()).to(in_dtype)
    x_fp8, scale = adapters.run_to_fp8(x, dtype, granularity)
    assert scale.dtype == torch.float32, "scales are fp32 whatever the input dtype"
    assert_documented_scale(x, dtype, granularity, scale)
    bad = _half_ulp_violations(x, x_fp8, scale)
    assert not bad.any(), (
        f"{int(bad.sum())} elements off by more than half an ulp ({_name(in_dtype)} input)"
    )
    fmax = torch.finfo(dtype).max
    amax = x_fp8.float().abs().amax(dim=None if granularity == "tensor" else 1)
    assert (amax == fmax).all(), f"amax should map to {fmax}, got {amax.tolist()}"


@pytest.mark.parametrize("shape", [(37,), (3, 5, 16), (1, 1)])
def test_to_fp8_per_tensor_works_for_any_shape(shape):
    """Per-tensor scaling takes any shape and returns fp8 of that shape and a 0-dim scale."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(shape, generator=g) * 30
    x_fp8, scale = adapters.run_to_fp8(x, E5M2)
    assert x_fp8.shape == x.shape and scale.shape == ()
    assert not _half_ulp_violations(x, x_fp8, scale).any()
    assert_documented_scale(x, E5M2, "tensor", scale)


def test_to_fp8_transposed_input_is_quantised_by_its_logical_rows():
    """A non-contiguous (transposed) input is quantised by its logical rows, like its contiguous copy."""
    g = torch.Generator().manual_seed(13)
    x = torch.randn(32, 16, generator=g) * torch.logspace(-3, 3, 16)[None, :]
    got, got_scale = adapters.run_to_fp8(x.t(), E4M3, "row")
    want, want_scale = documented_fp8(x.t().contiguous(), E4M3, "row")
    assert got_scale.shape == (16, 1) and torch.equal(got_scale, want_scale), (
        "the scales of x.t() must be those of its contiguous copy: max(amax of each logical row, 1e-12) / 448"
    )
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), (
        "x.t()'s fp8 values are not its rows' / scale"
    )


@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_stale_row_scales_saturate_each_row(dtype):
    """Row-wise stale scales: rows that grew saturate at ±max, rows that shrank keep round-to-nearest."""
    g = torch.Generator().manual_seed(14)
    x = torch.randn(6, 32, generator=g)
    _, stale = adapters.run_to_fp8(x, dtype, "row")
    factors = torch.tensor([100.0, 0.1, 3.0, 1.0, 1e4, 0.5])[:, None]
    x_fp8, _ = adapters.run_to_fp8(x * factors, dtype, "row", stale)
    values, fmax = x_fp8.float(), torch.finfo(dtype).max
    assert torch.isfinite(values).all(), "a stale scale must saturate, not overflow"
    for row in (0, 2, 4):
        assert values[row].abs().max().item() == fmax, (
            f"row {row} grew {factors[row].item()}x and should saturate"
        )
    inside = (x * factors / stale).abs() <= fmax
    assert not _half_ulp_violations(
        (x * factors)[inside], x_fp8[inside], stale.expand_as(x)[inside]
    ).any()


def test_to_fp8_rejects_a_scale_of_the_wrong_shape_or_sign():
    """A given scale must match the granularity (one per tensor or one per row) and be positive."""
    x = torch.randn(4, 16)
    with pytest.raises(ValueError, match="scale"):
        adapters.run_to_fp8(x, E4M3, "row", torch.ones(3, 1))
    with pytest.raises(ValueError, match="scale"):
        adapters.run_to_fp8(x, E4M3, "tensor", torch.ones(4, 1))
    with pytest.raises(ValueError, match="finite and positive"):
        adapters.run_to_fp8(x, E4M3, "tensor", torch.tensor(-1.0))


def test_to_fp8_rejects_nan_and_integer_input():
    """NaN anywhere in x and non-float inputs are ValueErrors."""
    with pytest.raises(ValueError, match="inf or NaN"):
        adapters.run_to_fp8(torch.tensor([[0.0, float("nan")], [1.0, 2.0]]), E4M3, "row")
    with pytest.raises(ValueError, match="float"):
        adapters.run_to_fp8(torch.arange(16).reshape(4, 4), E4M3)


def test_from_fp8_rejects_non_fp8_input_and_mismatched_scale():
    """from_fp8 needs an fp8 tensor and a scale that broadcasts against it."""
    # made here: the test grades from_fp8 alone
    x_fp8, scale = torch.randn(4, 16).to(E4M3), torch.full((4, 1), 0.5)
    with pytest.raises(ValueError, match="fp8"):
        adapters.run_from_fp8(x_fp8.float(), scale)
    with pytest.raises(ValueError, match="broadcast"):
        adapters.run_from_fp8(x_fp8, torch.ones(3, 1))
    with pytest.raises(ValueError, match="finite and positive"):
        adapters.run_from_fp8(x_fp8, torch.zeros(4, 1))


# --------------------------------------------------------------------------------------------
# fp8_matmul
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32, torch.float16], ids=_name)
@pytest.mark.parametrize(
    ("shape", "seed"), [((5, 32, 16), 1), ((40, 64, 80), 2), ((128, 16, 32), 3)]
)
@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_error_below_6_percent_other_shapes(granularity, shape, seed, out_dtype):
    """Other shapes (M need not be a multiple of 16), seeds and output dtypes: relative error vs fp64 < 0.06."""
    err = _fp8_matmul_rel_error("cpu", granularity, shape, seed, out_dtype)
    assert err < 0.06, f"{granularity} {shape} -> {_name(out_dtype)}: relative error {err:.4f}"


def test_fp8_matmul_rowwise_isolates_outlier_columns_of_b():
    """Two columns of B scaled by 1e5: per-column scales for B keep the other columns accurate, one scale does not."""
    g = torch.Generator().manual_seed(21)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 32, generator=g)
    b[:, [5, 17]] *= 1e5
    keep = [j for j in range(32) if j not in (5, 17)]
    ref = (a.double() @ b.double())[:, keep]
    errs = {
        gran: (
            (adapters.run_fp8_matmul(a, b, gran).double()[:, keep] - ref).norm() / ref.norm()
        ).item()
        for gran in ("tensor", "row")
    }
    assert errs["row"] < 0.06 and errs["tensor"] > 5 * errs["row"], (
        f"row-wise should isolate B's columns: {errs}"
    )


def test_fp8_matmul_of_zeros_and_bf16_inputs():
    """A zero operand gives an exact zero product; bf16 operands are accepted."""
    g = torch.Generator().manual_seed(22)
    b = torch.randn(32, 16, generator=g)
    for granularity in ("tensor", "row"):
        out = adapters.run_fp8_matmul(torch.zeros(8, 32), b, granularity)
        assert torch.equal(out, torch.zeros(8, 16, dtype=torch.bfloat16)), "0 @ b must be exactly 0"
    a = torch.randn(8, 32, generator=g)
    out = adapters.run_fp8_matmul(a.bfloat16(), b.bfloat16(), "row")
    ref = a.bfloat16().double() @ b.bfloat16().double()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 0.06


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float16], ids=_name)
@pytest.mark.parametrize(("shape", "seed"), [((5, 32, 16), 31), ((48, 96, 64), 32)])
@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_is_one_scaled_mm_bit_for_bit_other_shapes(granularity, shape, seed, out_dtype):
    """Other shapes and seeds: torch._scaled_mm's result on the to_fp8 operands, bit for bit in each out_dtype."""
    g = torch.Generator().manual_seed(seed)
    m, k, n = shape
    a, b = torch.randn(m, k, generator=g) * 4, torch.randn(k, n, generator=g) / 3
    out = adapters.run_fp8_matmul(a, b, granularity, out_dtype)
    a_fp8, b_fp8, sa, sb = _fp8_operands(a, b, granularity)
    expected = torch._scaled_mm(a_fp8, b_fp8, scale_a=sa, scale_b=sb, out_dtype=out_dtype)
    assert out.dtype == out_dtype and torch.equal(out, expected)
    assert_close_to_the_product(out, a, b)


def test_to_fp8_and_fp8_matmul_leave_low_precision_and_strided_inputs_unchanged():
    """A bf16 input, a transposed view and fp8_matmul's operands are read, never written."""
    g = torch.Generator().manual_seed(33)
    x16 = (torch.randn(8, 32, generator=g) * 7).bfloat16()
    xt = torch.randn(32, 16, generator=g).t()  # (16, 32), not contiguous
    copies = [x16.clone(), xt.clone()]
    adapters.run_to_fp8(x16, E4M3, "row")
    adapters.run_to_fp8(xt, torch.float8_e5m2, "row")
    out = adapters.run_fp8_matmul(xt, xt.t(), "row")
    assert torch.equal(x16, copies[0]) and torch.equal(xt, copies[1])
    assert_close_to_the_product(out, copies[1], copies[1].t())


def test_fp8_matmul_rejects_bad_out_dtype_and_integer_operands():
    """out_dtype must be a 16/32-bit float; integer operands are rejected."""
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    with pytest.raises(ValueError, match="out_dtype"):
        adapters.run_fp8_matmul(a, b, "tensor", torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="float"):
        adapters.run_fp8_matmul(torch.ones(16, 16, dtype=torch.int64), b)


# --------------------------------------------------------------------------------------------
# mixed_precision_step
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "seed"), [(torch.bfloat16, 7), (torch.float16, 3)], ids=["bf16", "fp16"]
)
def test_mixed_precision_step_other_seeds_and_fp16(dtype, seed):
    """bf16 at another seed and fp16 (10 mantissa bits, 8x finer than bf16): gradients within 3% of fp32."""
    errors = _mixed_step_grad_errors("cpu", dtype, seed)
    worst = max(errors, key=errors.get)
    assert errors[worst] < 0.03, f"{worst}: {errors[worst]:.4f}"


def test_mixed_precision_step_returns_the_loss_and_zeroes_old_gradients():
    """The returned loss is the fp32 loss of the batch, and gradients from a previous step are not accumulated."""
    torch.manual_seed(0)
    model = precision.mlp([16, 16])
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    steps = precision.student_mixed_precision_steps(
        [16, 16],
        model.state_dict(),
        x,
        y,
        loss="mse",
        dtype=torch.bfloat16,
        optimizer="sgd",
        optimizer_kwargs={"lr": 0.0},
        steps=2,
    )
    first, second = steps[0].loss, steps[1].loss
    grad_once = steps[0].grads["0.weight"]
    assert first.shape == () and first.dtype == torch.float32
    assert first.item() == second.item(), "with lr=0 the same batch must give the same loss"
    assert torch.equal(steps[1].grads["0.weight"], grad_once), (
        "gradients doubled: zero them at the start of the step"
    )
    ref = F.mse_loss(model(x), y).item()
    assert abs(first.item() - ref) < 0.02 * ref, f"loss {first.item()} vs fp32 {ref}"


def test_mixed_precision_steps_in_fp16_with_adamw_return_detached_losses_of_fresh_gradients():
    """fp16 autocast, cross-entropy, AdamW (lr=0): every loss detached, every step's gradients its batch's alone."""
    torch.manual_seed(4)
    sizes = (20, 16, 5)
    weights = precision.mlp(sizes).state_dict()
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(6, 20, generator=g), torch.randint(0, 5, (6,), generator=g)
    steps = precision.student_mixed_precision_steps(
        sizes,
        weights,
        x,
        y,
        loss="cross_entropy",
        dtype=torch.float16,
        optimizer="adamw",
        optimizer_kwargs={"lr": 0.0},
        steps=3,
    )
    for i, step in enumerate(steps):
        assert step.loss_grad_fn is None and not step.loss_requires_grad, (
            f"step {i}: {step.loss_grad_fn}"
        )
        for name, grad in step.grads.items():
            assert torch.equal(grad, steps[0].grads[name]), (
                f"step {i}: gradient of {name} accumulated"
            )


# --------------------------------------------------------------------------------------------
# DynamicLossScaler
# --------------------------------------------------------------------------------------------


def test_loss_scaler_default_growth_after_2000_clean_steps_matches_grad_scaler():
    """With the defaults, 2000 clean steps double the scale to 2**17, at the same step as GradScaler."""
    read_after = {0, 1998, 1999, 2000}
    ours = precision.student_clean_steps({}, 2001, read_after)
    theirs = precision.clean_steps(precision.torch_grad_scaler, {}, 2001, read_after)
    assert theirs == {0: 2.0**16, 1998: 2.0**16, 1999: 2.0**17, 2000: 2.0**17}, (
        f"GradScaler itself gave {theirs}"
    )
    assert ours == theirs, (
        f"scale after steps {sorted(read_after)}: yours {ours}, GradScaler's {theirs}: with the defaults "
        "(growth_interval=2000) the 2000th clean update() doubles the scale"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"init_scale": 1000.0, "growth_factor": 1.7, "backoff_factor": 0.3, "growth_interval": 2},
        {"init_scale": 2.0**126, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 1},
    ],
    ids=["odd-factors", "fp32-ceiling"],
)
def test_loss_scaler_matches_grad_scaler_odd_factors_and_fp32_ceiling(kwargs):
    """Non-power-of-two factors (fp32 rounding of the scale) and a scale that would grow past fp32's max agree with GradScaler."""
    inject = {1: float("inf"), 5: float("nan")}
    run = _scaler_run(9, inject, seed=3)
    ours, theirs = _run_scaler("ours", kwargs, run), _run_scaler("torch", kwargs, run)
    _assert_same_run(ours, theirs, inject)


def _two_optimizer_run(clip: bool) -> ScalerRun:
    """dec(enc(x)): SGD with momentum on the encoder, AdamW on the decoder; an inf in the decoder's bias at step 3."""
    torch.manual_seed(5)
    enc, dec = torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)
    return ScalerRun(
        sizes=(8, 8, 2),
        weights=(enc.state_dict(), dec.state_dict()),
        optimizers=(("sgd", (0,), {"lr": 0.1, "momentum": 0.9}), ("adamw", (1,), {"lr": 1e-2})),
        steps=8,
        seed=6,
        batch=4,
        inject={3: (1, "bias", (0,), float("inf"))},  # only the decoder's optimizer sees it
        clip=(0, 0.05) if clip else None,  # unscale_ the encoder's optimizer, then clip the encoder
    )


@pytest.mark.parametrize("clip", [False, True], ids=["plain", "unscale-then-clip"])
def test_loss_scaler_with_two_optimizers_and_clipping_matches_grad_scaler(clip):
    """Two optimizers (an inf in one skips only that one's step), and unscale_ before clipping, as GradScaler does."""
    kwargs = {"init_scale": 256.0, "growth_interval": 2}
    run = _two_optimizer_run(clip)
    ours, theirs = _run_scaler("ours", kwargs, run), _run_scaler("torch", kwargs, run)
    _assert_same_run(ours, theirs, {3: float("inf")})


def test_loss_scaler_rejects_fp16_gradients():
    """Unscaling fp16 gradients is a ValueError: keep fp32 master weights."""
    run = ScalerRun(  # the parameters, hence their gradients, in fp16
        sizes=(4, 1),
        weights=({"weight": torch.ones(1, 4), "bias": torch.zeros(1)},),
        optimizers=(("sgd", (0,), {"lr": 0.1}),),
        steps=1,
        seed=0,
        param_dtype=torch.float16,
    )
    with pytest.raises(ValueError, match="fp32 master weights"):
        _run_scaler("ours", {}, run)


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_to_fp8_scale_floor_on_fp16_inputs_with_other_edges(granularity):
    """fp16 inputs (their subnormals included), e5m2: scale = max(amax, 1e-12) / 57344 in fp32, exactly, per tensor and per row."""
    t = torch.linspace(-1, 1, 32)
    # zero, an fp16 subnormal, a small normal, near fp16's max
    rows = [
        t * 0.0,
        t * 6e-8,
        t * 2e-5,
        t * 60000.0,
    ]
    x = torch.stack(rows).half()
    inputs = [x] if granularity == "row" else list(x)
    for inp in inputs:
        _, scale = adapters.run_to_fp8(inp, E5M2, granularity)
        x32 = inp.float()
        amax = x32.abs().amax() if granularity == "tensor" else x32.abs().amax(dim=-1, keepdim=True)
        assert scale.dtype == torch.float32 and torch.equal(
            scale, amax.clamp(min=1e-12) / 57344.0
        ), f"scale {scale.flatten().tolist()} for amax {amax.flatten().tolist()}"


def test_loss_scaler_scales_large_half_losses_in_fp32():
    """A bf16 loss of 1e30 and an fp16 loss of 60000 times 2**20: fp32 products, no overflow."""
    losses = [torch.tensor(60000.0, dtype=torch.float16), torch.tensor(1e30, dtype=torch.bfloat16)]
    _, scaled_losses = precision.student_scaled_losses({"init_scale": 2.0**20}, losses)
    for loss, scaled in zip(losses, scaled_losses, strict=True):
        assert scaled.dtype == torch.float32 and scaled.item() == loss.float().item() * 2.0**20


def test_size_one_fp8_matmul_and_mixed_step_in_fp16():
    """A single row times a (32, 32) matrix in bf16 out, per row; an fp16 MSE step on a batch of one: 0-d fp32 loss."""
    g = torch.Generator().manual_seed(40)
    a, b = torch.randn(1, 32, generator=g), torch.randn(32, 32, generator=g)
    out = adapters.run_fp8_matmul(a, b, "row", torch.bfloat16)
    a_fp8, b_fp8, sa, sb = _fp8_operands(a, b, "row")
    assert out.shape == (1, 32)
    assert torch.equal(
        out, torch._scaled_mm(a_fp8, b_fp8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    )
    assert_close_to_the_product(out, a, b)
    torch.manual_seed(41)
    weights = precision.mlp([8, 4]).state_dict()
    x, y = torch.randn(1, 8, generator=g), torch.randn(1, 4, generator=g)
    [step] = precision.student_mixed_precision_steps(
        [8, 4],
        weights,
        x,
        y,
        loss="mse",
        dtype=torch.float16,
        optimizer="sgd",
        optimizer_kwargs={"lr": 0.1},
    )
    assert step.loss.shape == () and step.loss.dtype == torch.float32
    assert not torch.equal(step.params["0.weight"], weights["0.weight"])
