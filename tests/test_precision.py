"""Public tests of part 8, precision: float formats, fp8 scaling and matmul, mixed precision, loss scaling.

Oracles: ``torch.finfo`` for the formats, an fp64 matmul for ``fp8_matmul``, an fp32 step for the
autocast step, ``torch.amp.GradScaler`` for the loss scaler. The ``_helpers`` below are the code
paths shared with ``tests/test_precision_gpu.py``: each GPU check runs the same helper on CUDA that
a test here runs on CPU. Your step and your scaler are driven by the scenarios of
``tests/scenarios/precision.py``.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

import adapters
from tests.scenarios import precision
from tests.scenarios.precision import ScalerRun

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
FORMATS = [torch.float32, torch.float16, torch.bfloat16, *FP8]
E4M3 = torch.float8_e4m3fn


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _assert_close(actual: Tensor, expected: Tensor, rtol: float, atol: float, what: str) -> None:
    """torch.allclose with a message saying where and how far (torch.testing.assert_close would
    import torch.distributed, which costs seconds on a loaded machine)."""
    assert actual.shape == expected.shape, (
        f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
    )
    actual, expected = actual.double(), expected.double()
    bad = (actual - expected).abs() > atol + rtol * expected.abs()
    if bad.any():
        where = bad.nonzero()[0].tolist()
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.numel()} elements differ, first at {where}: "
            f"got {actual[tuple(where)].item():.6g}, expected {expected[tuple(where)].item():.6g} "
            f"(rtol={rtol:g}, atol={atol:g})"
        )


# --------------------------------------------------------------------------------------------
# Helpers shared with the GPU tests (same code, other device)
# --------------------------------------------------------------------------------------------


def _half_ulp_violations(x: Tensor, x_fp8: Tensor, scale: Tensor) -> Tensor:
    """Elements whose fp8 value is further than half an ulp from x / scale, in the scaled domain (all of
    them when the scale is not finite and positive).

    ulp(y) = 2**(floor(log2 |y|) - m), but never below the subnormal spacing 2**(1 - bias - m).
    A relative slack of 2**-20 allows for the fp32 division x / scale being done another way.
    """
    info = torch.finfo(x_fp8.dtype)
    m = round(-math.log2(info.eps))
    y = x.float() / scale.float()
    exponent = torch.floor(torch.log2(y.abs().clamp(min=info.smallest_normal)))
    half_ulp = 0.5 * torch.exp2(exponent - m)
    err = (x_fp8.float() - y).abs()
    # a 0, negative or inf scale fits nothing
    unusable = ~(torch.isfinite(scale.float()) & (scale.float() > 0))
    return (err > half_ulp * (1 + 2**-20) + y.abs() * 2**-20) | unusable.expand_as(err)


def documented_scale(x: Tensor, dtype: torch.dtype, granularity: str) -> Tensor:
    """to_fp8's documented scale, in fp32: max(amax, 1e-12) / fp8_max (448 for e4m3fn, 57344 for e5m2),
    amax over the whole tensor (shape ()) or along each row (shape (rows, 1))."""
    x32 = x.float()
    amax = x32.abs().amax() if granularity == "tensor" else x32.abs().amax(dim=-1, keepdim=True)
    return amax.clamp(min=1e-12) / torch.finfo(dtype).max


def assert_documented_scale(x: Tensor, dtype: torch.dtype, granularity: str, scale: Tensor) -> None:
    """Evidence that to_fp8 scaled by the format's own max: its scale is max(amax, 1e-12) / fp8_max in fp32, exactly."""
    want = documented_scale(x, dtype, granularity)
    assert (
        scale.dtype == torch.float32
        and scale.shape == want.shape
        and torch.equal(scale.cpu(), want.cpu())
    ), (
        f"to_fp8(x, {_name(dtype)}, {granularity!r}) returned a scale {scale.flatten()[:4].tolist()} "
        f"({scale.dtype}, shape {tuple(scale.shape)}), expected max(amax, 1e-12) / {torch.finfo(dtype).max:g} = "
        f"{want.flatten()[:4].tolist()} (fp32, shape {tuple(want.shape)}): divide amax by the format's largest "
        "finite value (dtype_info(dtype)['max'])"
    )


def assert_close_to_the_product(out: Tensor, a: Tensor, b: Tensor) -> None:
    """Evidence that fp8_matmul multiplied: its output is within fp8's 6% (Frobenius) of a @ b in fp64."""
    exact = a.double() @ b.double()
    rel = ((out.double() - exact).norm() / exact.norm()).item()
    assert rel < 0.06, (
        f"fp8_matmul(a, b) is {rel:.1%} away from a @ b (Frobenius): it must return the product"
    )


def _fp8_matmul_rel_error(
    device: str,
    granularity: str,
    shape: tuple[int, int, int],
    seed: int,
    out_dtype: torch.dtype = torch.bfloat16,
) -> float:
    """Frobenius relative error of run_fp8_matmul against an fp64 matmul, for N(0, 1) inputs."""
    g = torch.Generator().manual_seed(seed)
    m, k, n = shape
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    out = adapters.run_fp8_matmul(a.to(device), b.to(device), granularity, out_dtype)
    assert out.dtype == out_dtype and out.shape == (m, n) and out.device.type == device
    ref = a.double() @ b.double()
    return ((out.cpu().double() - ref).norm() / ref.norm()).item()


def _fp8_operands(a: Tensor, b: Tensor, granularity: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The operands of torch._scaled_mm built through run_to_fp8, in the cuBLASLt layout.

    A row-major (M, K) with scale () or (M, 1); B column-major (K, N), quantised as the row-major
    b^T, with scale () or (1, N).
    """
    a_fp8, scale_a = adapters.run_to_fp8(a, E4M3, granularity)
    bt_fp8, scale_bt = adapters.run_to_fp8(b.t().contiguous(), E4M3, granularity)
    scale_b = scale_bt.t() if granularity == "row" else scale_bt
    return a_fp8, bt_fp8.t(), scale_a, scale_b


def _e4m3_test_values() -> Tensor:
    """Every positive finite e4m3fn value, every midpoint (a rounding tie) and random values, with
    both signs; the largest magnitude is 448, so the per-tensor scale is exactly 1."""
    codes = torch.arange(0, 127, dtype=torch.uint8).view(E4M3).float()
    mids = (codes[1:] + codes[:-1]) / 2
    g = torch.Generator().manual_seed(8)
    rand = torch.exp2(torch.empty(500).uniform_(-11, math.log2(448), generator=g))
    pos = torch.cat([codes, mids, rand])
    return torch.cat([pos, -pos[1:]])


def _e4m3_codes(x: Tensor, device: str) -> Tensor:
    """The bytes of run_to_fp8(x, e4m3fn) computed on ``device``, brought back to the CPU."""
    x_fp8, scale = adapters.run_to_fp8(x.to(device), E4M3)
    assert scale.item() == 1.0
    return x_fp8.cpu().view(torch.uint8)


MLP_SIZES = (32, 64, 10)


def _mlp(seed: int, device: str) -> torch.nn.Module:
    torch.manual_seed(seed)
    return precision.mlp(MLP_SIZES).to(device)


def _mixed_step_grad_errors(device: str, dtype: torch.dtype, seed: int) -> dict[str, float]:
    """Relative gradient error (per parameter, Frobenius) of run_mixed_precision_step against an
    fp32 step of the same model and batch; also checks the dtypes on the way."""
    reference = _mlp(seed, device)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(16, 32, generator=g).to(device)
    y = torch.randint(0, 10, (16,), generator=g).to(device)

    [step] = precision.student_mixed_precision_steps(
        MLP_SIZES,
        reference.state_dict(),
        x,
        y,
        loss="cross_entropy",
        dtype=dtype,
        optimizer="adamw",
        optimizer_kwargs={"lr": 1e-3},
    )
    seen, loss = step.linear_output_dtypes, step.loss
    assert seen == [dtype, dtype], f"Linear outputs under autocast should be {dtype}, got {seen}"
    assert loss.dtype == torch.float32, f"the loss must be computed in fp32, got {loss.dtype}"

    ref_loss = F.cross_entropy(reference(x), y)
    ref_loss.backward()
    errors = {"loss": abs(loss.item() - ref_loss.item()) / abs(ref_loss.item())}
    for name, p_ref in reference.named_parameters():
        p, grad = step.params[name], step.grads[name]
        assert p.dtype == torch.float32, f"master weight {name} must stay fp32, got {p.dtype}"
        assert grad is not None and grad.dtype == torch.float32, f"gradient of {name} must be fp32"
        assert not torch.equal(p, p_ref.detach()), (
            f"{name} was not updated: did the optimizer step?"
        )
        assert p_ref.grad is not None  # torch's own model, after its backward
        errors[name] = ((grad - p_ref.grad).norm() / p_ref.grad.norm()).item()
    return errors


# --------------------------------------------------------------------------------------------
# dtype_info and the lecture's facts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FORMATS, ids=_name)
def test_dtype_info_agrees_with_torch_finfo(dtype):
    """bits, max, smallest normal, eps agree with torch.finfo; exponent/mantissa bits add up."""
    info, fi = adapters.run_dtype_info(dtype), torch.finfo(dtype)
    assert info["bits"] == fi.bits, f"{_name(dtype)}: bits {info['bits']} != finfo {fi.bits}"
    assert info["bits"] == 1 + info["exponent_bits"] + info["mantissa_bits"], (
        "sign + exponent + mantissa != bits"
    )
    assert info["eps"] == fi.eps == 2.0 ** -info["mantissa_bits"], (
        f"{_name(dtype)}: eps {info['eps']} vs finfo {fi.eps}"
    )
    assert info["max"] == fi.max, f"{_name(dtype)}: max {info['max']} != finfo {fi.max}"
    assert info["smallest_normal"] == fi.smallest_normal, (
        f"{_name(dtype)}: smallest_normal {info['smallest_normal']} != finfo {fi.smallest_normal}"
    )


@pytest.mark.parametrize("dtype", FORMATS, ids=_name)
def test_dtype_info_smallest_subnormal_is_the_last_nonzero_value(dtype):
    """smallest_subnormal = smallest_normal * eps survives a cast; half of it rounds (ties to even) to 0."""
    info = adapters.run_dtype_info(dtype)
    tiny = info["smallest_subnormal"]
    assert tiny > 0, f"smallest_subnormal of {_name(dtype)} is {tiny}: the smallest positive value"
    assert tiny == info["smallest_normal"] * info["eps"], (
        "smallest_subnormal should be smallest_normal * 2**-m"
    )
    as_dtype = torch.tensor([tiny, tiny / 2], dtype=torch.float64).to(dtype).double()
    assert as_dtype[0].item() == tiny, f"{tiny} is not representable in {_name(dtype)}"
    assert as_dtype[1].item() == 0.0, f"{tiny / 2} should underflow to 0 in {_name(dtype)}"


def test_dtype_info_predicts_lecture_facts():
    """dtype_info predicts, and torch confirms: 1e-8 underflows in fp16 not bf16, 70000 overflows fp16, 256 + 1 == 256 in bf16."""
    fp16, bf16 = adapters.run_dtype_info(torch.float16), adapters.run_dtype_info(torch.bfloat16)
    # 1e-8 is below half of fp16's smallest subnormal (2**-24 ~ 6e-8): rounds to 0. bf16 has fp32's exponent.
    assert (
        1e-8 < fp16["smallest_subnormal"] / 2
        and torch.tensor(1e-8, dtype=torch.float16).item() == 0.0
    )
    assert 1e-8 > bf16["smallest_normal"] and torch.tensor(1e-8, dtype=torch.bfloat16).item() != 0.0
    # 70000 > fp16 max 65504 (and beyond the rounding threshold 65520): inf.
    assert 70000 > fp16["max"] and torch.tensor(70000.0, dtype=torch.float16).isinf().item()
    # At 256 = 2**8 the bf16 spacing is 2**8 * eps = 2; adding 1 is a tie, which rounds to even (256).
    assert 1 <= 256 * bf16["eps"] / 2
    assert (torch.tensor(256.0, dtype=torch.bfloat16) + 1).item() == 256.0


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.int32, torch.float8_e4m3fnuz, "float16"], ids=str
)
def test_dtype_info_rejects_unsupported_dtype(dtype):
    """A format outside fp32/fp16/bf16/e4m3fn/e5m2 is a ValueError naming the supported ones."""
    with pytest.raises(ValueError, match="supported"):
        adapters.run_dtype_info(dtype)


# --------------------------------------------------------------------------------------------
# to_fp8 / from_fp8
# --------------------------------------------------------------------------------------------


def _wide_range(seed: int, rows: int = 11, cols: int = 64) -> Tensor:
    """Row r has magnitudes around 10**(r - 6): 1e-6 ... 1e4 over the 11 rows, random signs."""
    g = torch.Generator().manual_seed(seed)
    decade = torch.arange(rows, dtype=torch.float32)[:, None] - 6
    mags = 10 ** (decade + torch.rand(rows, cols, generator=g))
    return mags * torch.where(torch.rand(rows, cols, generator=g) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_to_fp8_leaves_its_input_unchanged(granularity):
    """to_fp8 reads x and never writes into it (for an fp32 tensor, x.float() is x itself)."""
    x = torch.randn(16, 32, generator=torch.Generator().manual_seed(9)) * 5
    before = x.clone()
    x_fp8, scale = adapters.run_to_fp8(x, E4M3, granularity)
    assert torch.equal(x, before), (
        f"to_fp8(x, granularity={granularity!r}) changed x: scale a copy (x.float() / scale), not x in place. "
        "For an fp32 tensor x.float() returns x itself, so x.float().div_(scale) overwrites the caller's tensor"
    )
    assert not _half_ulp_violations(before, x_fp8, scale).any(), (
        "and x_fp8 must be x / scale rounded to fp8"
    )
    assert_documented_scale(before, E4M3, granularity, scale)


@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_error_is_within_half_an_ulp(dtype, granularity):
    """Every element of x / scale rounds to the nearest fp8 value: error <= ulp / 2 for magnitudes 1e-6..1e4.

    With m mantissa bits (3 for e4m3, 2 for e5m2) the spacing at y is ulp(y) = 2**(floor(log2|y|) - m),
    so round-to-nearest is off by at most 2**-(m+1) relative (6.25% / 12.5%); below the smallest normal
    the spacing is the subnormal step, which is where a per-tensor scale flushes the small rows.
    """
    x = _wide_range(seed=0)
    x_fp8, scale = adapters.run_to_fp8(x, dtype, granularity)
    assert x_fp8.dtype == dtype and x_fp8.shape == x.shape
    assert_documented_scale(x, dtype, granularity, scale)
    bad = _half_ulp_violations(x, x_fp8, scale)
    assert not bad.any(), (
        f"{int(bad.sum())} elements are further than half an ulp from x / scale, first at "
        f"{bad.nonzero()[0].tolist()}: x={x[bad][0].item():.4g}, scaled={(x / scale)[bad][0].item():.4g}, "
        f"fp8={x_fp8.float()[bad][0].item():.4g}"
    )
    decoded = adapters.run_from_fp8(x_fp8, scale)
    if granularity == "row":
        # each row has its own scale, so every element keeps m bits: relative error <= 2**-(m+1)
        m = round(-math.log2(torch.finfo(dtype).eps))
        rel = ((decoded - x).abs() / x.abs()).max().item()
        assert rel <= 2 ** -(m + 1) * (1 + 1e-5), f"row-wise relative error {rel:.4f} > 2**-{m + 1}"
    else:  # one scale: the largest elements keep m bits (the small ones may flush to subnormals or 0)
        big = x.abs() >= x.abs().max() / 16
        rel = ((decoded - x).abs()[big] / x.abs()[big]).max().item()
        assert rel <= 2 ** -round(-math.log2(torch.finfo(dtype).eps)), (
            f"relative error {rel:.4f} of the largest elements"
        )


@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_maps_amax_exactly_to_format_max(dtype, granularity):
    """scale = amax / max: the largest |x| (per tensor or per row) becomes exactly ±max; scales are fp32 of shape () or (rows, 1)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 32, generator=g) * torch.tensor([1e-3, 1.0, 5.0, 70.0, 1e3, 3e4])[:, None]
    x_fp8, scale = adapters.run_to_fp8(x, dtype, granularity)
    fmax = torch.finfo(dtype).max
    assert scale.dtype == torch.float32, (
        f"scales must be fp32 (what _scaled_mm takes), got {scale.dtype}"
    )
    if granularity == "tensor":
        assert scale.shape == (), f"a per-tensor scale is 0-dim, got shape {tuple(scale.shape)}"
        amax_fp8 = x_fp8.float().abs().amax()
        assert amax_fp8.item() == fmax, f"amax became {amax_fp8.item()}, not the format max {fmax}"
    else:
        assert scale.shape == (6, 1), (
            f"row-wise scales have shape (rows, 1), got {tuple(scale.shape)}"
        )
        amax_fp8 = x_fp8.float().abs().amax(dim=1)
        assert (amax_fp8 == fmax).all(), (
            f"each row's amax should become {fmax}, got {amax_fp8.tolist()}"
        )
    expected_scale = (
        x.abs().amax(dim=None if granularity == "tensor" else 1, keepdim=granularity == "row")
        / fmax
    )
    _assert_close(scale, expected_scale, rtol=1e-6, atol=0, what="scale vs amax / max")


@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_all_zero_input_stays_finite(dtype, granularity):
    """An all-zero tensor (and an all-zero row) quantises to zeros with a finite positive scale."""
    x = torch.zeros(4, 16)
    x[2] = torch.linspace(-3, 3, 16)  # one nonzero row; the others are all zero
    for inp in (torch.zeros(4, 16), x):
        x_fp8, scale = adapters.run_to_fp8(inp, dtype, granularity)
        assert torch.isfinite(scale).all() and (scale > 0).all(), (
            f"scale must be finite and positive, got {scale}"
        )
        # 1e-12 / fp8_max for an all-zero tensor or row
        assert_documented_scale(inp, dtype, granularity, scale)
        decoded = adapters.run_from_fp8(x_fp8, scale)
        assert torch.isfinite(decoded).all(), "zeros must not turn into NaN (0 / 0) or inf"
        assert (decoded[inp == 0] == 0).all(), "zeros must decode to zeros"
        assert ((decoded - inp).abs() <= 0.125 * inp.abs() + 1e-6).all(), (
            "the nonzero row must decode close to itself"
        )


#: The amax of a tensor (or of a row) -> its regime: all zeros, an fp32 subnormal and a normal value
#: below the 1e-12 floor, a small value above it, and a magnitude near fp32's largest.
AMAX_EDGES = {
    "zero": 0.0,
    "subnormal": 1e-40,
    "below-floor": 1e-13,
    "above-floor": 3e-10,
    "huge": 3e38,
}


def _edge_input(in_dtype: torch.dtype) -> Tensor:
    """One row per AMAX_EDGES entry: that amax times evenly spaced values in [-1, 1], in ``in_dtype``."""
    t = torch.linspace(-1, 1, 16)
    return torch.stack([t * torch.tensor(amax) for amax in AMAX_EDGES.values()]).to(in_dtype)


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16], ids=_name)
@pytest.mark.parametrize("granularity", ["tensor", "row"])
@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_scale_floors_amax_as_documented_at_zero_tiny_and_huge(dtype, granularity, in_dtype):
    """scale = max(amax, 1e-12) / fp8_max in fp32, exactly, for an all-zero, subnormal, tiny, small and huge amax.

    Per tensor each regime is its own tensor; per row, one row of each. The floor is on amax, not on
    the scale: an all-zero tensor's scale is 1e-12 / fp8_max, and an amax of 3e-10 is above the floor.
    The fp8 values are x / scale clamped and cast, from that scale.
    """
    x = _edge_input(in_dtype)
    fp8_max = torch.finfo(dtype).max
    floor = torch.tensor(1e-12)
    cases = [
        (name, x[i : i + 1] if granularity == "row" else x[i]) for i, name in enumerate(AMAX_EDGES)
    ]
    if granularity == "row":
        cases.append(("one row of each", x))
    for name, inp in cases:
        x_fp8, scale = adapters.run_to_fp8(inp, dtype, granularity)
        x32 = inp.float()
        amax = x32.abs().amax() if granularity == "tensor" else x32.abs().amax(dim=-1, keepdim=True)
        want = amax.clamp(min=floor) / fp8_max
        assert scale.dtype == torch.float32 and scale.shape == want.shape, (
            f"{name}: scale of dtype {scale.dtype} and shape {tuple(scale.shape)}, expected fp32 of shape "
            f"{tuple(want.shape)} (compute amax and the scale in fp32, whatever the input's dtype)"
        )
        assert torch.equal(scale, want), (
            f"{name} ({in_dtype} input, granularity={granularity!r}): scale {scale.flatten().tolist()}, expected "
            f"max(amax, 1e-12) / {fp8_max:g} = {want.flatten().tolist()}: floor amax at 1e-12, then divide (not "
            "the scale, and not amax + 1e-12)"
        )
        want_fp8 = (x32 / want).clamp(-fp8_max, fp8_max).to(dtype)
        assert x_fp8.shape == inp.shape and torch.equal(
            x_fp8.view(torch.uint8), want_fp8.view(torch.uint8)
        ), f"{name}: the fp8 values are not x / scale clamped to +-{fp8_max:g} and cast"


@pytest.mark.parametrize("dtype", FP8, ids=_name)
def test_to_fp8_stale_scale_saturates_instead_of_overflowing(dtype):
    """With a stale scale (values grew 10x since), x / scale exceeds max: the clamp saturates at ±max, no inf/NaN."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(8, 32, generator=g)
    _, stale = adapters.run_to_fp8(x, dtype)
    grown = 10 * x
    x_fp8, scale = adapters.run_to_fp8(grown, dtype, "tensor", stale)
    assert torch.equal(scale, stale), "a given scale must be used as is"
    values = x_fp8.float()
    fmax = torch.finfo(dtype).max
    assert torch.isfinite(values).all(), (
        f"{int((~torch.isfinite(values)).sum())} values overflowed to inf/NaN in {_name(dtype)}; clamp to ±max before the cast"
    )
    assert values.max().item() == fmax and values.min().item() == -fmax, (
        "out-of-range values should saturate at ±max"
    )
    inside = (grown / stale).abs() <= fmax
    assert not _half_ulp_violations(grown[inside], x_fp8[inside], stale).any(), (
        "in-range values must still round to nearest"
    )


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16], ids=_name)
def test_from_fp8_decodes_as_fp8_times_scale(out_dtype):
    """from_fp8 returns x_fp8.float() * scale in the requested dtype, for per-tensor and per-row scales."""
    g = torch.Generator().manual_seed(3)
    # any fp8 values and positive scales: from_fp8 alone
    x_fp8 = (torch.randn(5, 16, generator=g) * 100).clamp(-448, 448).to(E4M3)
    scales = {"tensor": torch.tensor(0.37), "row": torch.rand(5, 1, generator=g) + 0.01}
    for granularity, scale in scales.items():
        out = adapters.run_from_fp8(x_fp8, scale, out_dtype)
        assert out.dtype == out_dtype
        assert torch.equal(out, (x_fp8.float() * scale).to(out_dtype)), (
            f"from_fp8 ({granularity}) is not x_fp8 * scale"
        )


def test_to_fp8_and_from_fp8_reject_bad_input():
    """Non-fp8 targets, unknown granularity, non-2-D row input, inf input and non-finite scales are ValueErrors."""
    x = torch.randn(4, 16)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        adapters.run_to_fp8(x, torch.bfloat16)
    with pytest.raises(ValueError, match="granularity"):
        adapters.run_to_fp8(x, E4M3, "column")
    with pytest.raises(ValueError, match="2-D"):
        adapters.run_to_fp8(torch.randn(2, 4, 16), E4M3, "row")
    with pytest.raises(ValueError, match="inf or NaN"):
        adapters.run_to_fp8(torch.tensor([[1.0, float("inf")]]), E4M3)
    with pytest.raises(ValueError, match="finite and positive"):
        adapters.run_to_fp8(x, E4M3, "tensor", torch.tensor(float("nan")))
    x_fp8 = x.to(E4M3)  # from_fp8's input made here: this check grades from_fp8 alone
    with pytest.raises(ValueError, match="finite and positive"):
        adapters.run_from_fp8(x_fp8, torch.tensor(float("inf")))


#: (call, the documented words, the values the message must name): the Raises entries of to_fp8, from_fp8, fp8_matmul.
FP8_DOCUMENTED_ERRORS = [
    (
        lambda: adapters.run_to_fp8(torch.tensor([1.0, float("nan"), -2.0]), torch.float8_e5m2),
        "to_fp8 got a tensor containing inf or NaN",
        (),
    ),
    (
        lambda: adapters.run_to_fp8(torch.ones(3, 16, dtype=torch.int32), E4M3),
        "to_fp8 needs a high-precision float tensor, got dtype",
        ("torch.int32",),
    ),
    (
        lambda: adapters.run_to_fp8(torch.ones(2, 16).to(E4M3), E4M3),
        "to_fp8 needs a high-precision float tensor, got dtype",
        ("torch.float8_e4m3fn",),
    ),
    (
        lambda: adapters.run_to_fp8(torch.randn(5, 16), E4M3, "row", torch.ones(4, 1)),
        "to_fp8(granularity='row') needs a scale of shape (5, 1), got (4, 1)",
        (),
    ),
    (
        lambda: adapters.run_to_fp8(torch.randn(5, 16), E4M3, "tensor", torch.ones(2)),
        "needs a scale of shape",
        ("()", "(2,)"),
    ),
    (
        lambda: adapters.run_to_fp8(torch.randn(5, 16), E4M3, "tensor", torch.tensor(0.0)),
        "to_fp8: scale must be finite and positive",
        (),
    ),
    (
        lambda: adapters.run_from_fp8(torch.ones(2, 16, dtype=torch.bfloat16), torch.tensor(1.0)),
        "from_fp8 needs an fp8 tensor (from to_fp8), got dtype",
        ("torch.bfloat16",),
    ),
    (
        lambda: adapters.run_from_fp8(torch.ones(5, 16).to(E4M3), torch.ones(16, 1)),
        "from_fp8: a scale of shape (16, 1) does not broadcast against x_fp8 of shape (5, 16)",
        (),
    ),
    (
        lambda: adapters.run_from_fp8(torch.ones(5, 16).to(E4M3), torch.full((5, 1), -0.5)),
        "from_fp8: scale must be finite and positive",
        (),
    ),
    (
        lambda: adapters.run_fp8_matmul(
            torch.randn(16, 32), torch.randn(32, 16), "tensor", torch.float64
        ),
        "fp8_matmul: out_dtype must be bfloat16, float16 or float32, got",
        ("torch.float64",),
    ),
    (
        lambda: adapters.run_fp8_matmul(torch.ones(16, 32, dtype=torch.int32), torch.randn(32, 16)),
        "needs a high-precision float tensor, got dtype",
        ("torch.int32",),
    ),
]


@pytest.mark.parametrize(
    ("call", "message", "named"),
    FP8_DOCUMENTED_ERRORS,
    ids=[
        "nan-input",
        "integer-input",
        "fp8-input",
        "row-scale-of-other-rows",
        "tensor-scale-of-two",
        "zero-scale",
        "from-bf16",
        "scale-not-broadcasting",
        "negative-decode-scale",
        "fp64-out",
        "integer-a",
    ],
)
def test_fp8_documented_errors_are_value_errors_with_their_words(call, message, named):
    """Every Raises entry of to_fp8, from_fp8 and fp8_matmul is a ValueError (the type a caller catches, not
    torch's RuntimeError from a reshape or a broadcast, and not a NaN result) with the documented words,
    naming the offending dtype or shape."""
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        call()
    for value in named:
        assert value in str(raised.value), f"the message {str(raised.value)!r} should name {value}"


def _nearest_even_e4m3_codes(x: Tensor) -> Tensor:
    """Oracle: the e4m3fn byte of each |x| <= 448 by round-to-nearest, ties to the even code."""
    codes = torch.arange(0, 127, dtype=torch.uint8)  # 0x7f is NaN; 0..126 are the finite positives
    values = codes.view(E4M3).float()  # increasing with the code
    ax = x.abs().float()
    hi = torch.searchsorted(values, ax).clamp(max=126)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = ax - values[lo], values[hi] - ax
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(take_hi, hi, lo)
    return (code + torch.where(x < 0, 128, 0)).to(torch.uint8)


def test_to_fp8_e4m3_cast_rounds_to_nearest_even():
    """On CPU, to_fp8 (scale 1) gives, byte for byte, round-to-nearest-even of every e4m3 value, midpoint and random value.

    This is the CPU twin of the CUDA-vs-CPU bit-for-bit check; ties (the midpoints) go to the even
    mantissa, and values below half the smallest subnormal 2**-9 flush to ±0.
    """
    x = _e4m3_test_values()
    got, expected = _e4m3_codes(x, "cpu"), _nearest_even_e4m3_codes(x)
    bad = got != expected
    assert not bad.any(), (
        f"{int(bad.sum())} values cast to the wrong byte, e.g. {x[bad][0].item()!r} -> {hex(got[bad][0].item())}, "
        f"expected {hex(expected[bad][0].item())}"
    )


# --------------------------------------------------------------------------------------------
# fp8_matmul
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_relative_error_vs_fp64_below_6_percent(granularity):
    """||fp8 A@B - fp64 A@B|| / ||fp64 A@B|| < 0.06 for N(0, 1) inputs, bf16 output.

    e4m3 keeps 3 mantissa bits: each operand is off by up to 2**-4 = 6.25% (≈2.5% rms); the errors
    are independent and average out over K products, giving ≈3.7% for the product. bf16 output adds
    2**-9. 0.06 leaves room for the spread across seeds without hiding a wrong scale.
    """
    err = _fp8_matmul_rel_error("cpu", granularity, (64, 128, 48), seed=0)
    assert err < 0.06, f"fp8 matmul ({granularity}) relative error {err:.4f} >= 0.06 vs fp64"


def test_fp8_matmul_rowwise_isolates_outlier_rows():
    """Three rows of A scaled by 1e5: per-tensor scaling crushes the other rows (>25% error), row-wise keeps them < 6%.

    With one scale, amax ≈ 4e5 maps to 448, so an N(0, 1) row lands around 1e-3, below e4m3's
    smallest normal 2**-6: only the subnormal step 2**-9 is left, i.e. about one significant bit.
    """
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(64, 128, generator=g), torch.randn(128, 48, generator=g)
    a[:3] *= 1e5
    ref = (a.double() @ b.double())[3:]
    errs = {}
    for granularity in ("tensor", "row"):
        out = adapters.run_fp8_matmul(a, b, granularity).double()[3:]
        errs[granularity] = ((out - ref).norm() / ref.norm()).item()
    assert errs["row"] < 0.06, (
        f"row-wise error on the ordinary rows is {errs['row']:.4f}, expected < 0.06"
    )
    assert errs["tensor"] > 0.25, (
        f"per-tensor error on the ordinary rows is only {errs['tensor']:.4f}: is it really one scale?"
    )
    assert errs["tensor"] > 5 * errs["row"], f"row-wise should win by a wide margin, got {errs}"


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_is_scaled_mm_of_the_fp8_operands(granularity):
    """fp8_matmul equals torch._scaled_mm on the run_to_fp8 operands (A row-major, B column-major) bit for bit, in each out_dtype.

    That product is the dequantised one: with fp32 output the only difference from
    (a_fp8 * sa) @ (b_fp8 * sb) in fp64 is fp32 accumulation over K = 64 products (≈ 64 * 2**-24
    relative at worst). Bit for bit, because the scales go into the kernel, which applies them to
    its fp32 accumulator before the one rounding to out_dtype; scaling the output afterwards rounds
    differently.
    """
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(24, 64, generator=g) * 3, torch.randn(64, 32, generator=g) / 7
    a_fp8, b_fp8, sa, sb = _fp8_operands(a, b, granularity)
    assert a_fp8.is_contiguous() and b_fp8.t().is_contiguous(), (
        "A must be row-major, B column-major"
    )
    out = adapters.run_fp8_matmul(a, b, granularity, torch.float32)
    dequantised = (a_fp8.double() * sa.double()) @ (b_fp8.double() * sb.double())
    atol = 1e-5 * dequantised.abs().max().item()
    _assert_close(
        out, dequantised, rtol=1e-5, atol=atol, what="fp8_matmul vs the dequantised fp64 product"
    )
    for out_dtype in (torch.float32, torch.bfloat16, torch.float16):
        scaled = torch._scaled_mm(a_fp8, b_fp8, scale_a=sa, scale_b=sb, out_dtype=out_dtype)
        ours = adapters.run_fp8_matmul(a, b, granularity, out_dtype)
        assert ours.dtype == out_dtype, (
            f"fp8_matmul(out_dtype={_name(out_dtype)}) returned {ours.dtype}"
        )
        differ = ours != scaled
        assert not differ.any(), (
            f"fp8_matmul ({granularity}, out_dtype={_name(out_dtype)}) differs from torch._scaled_mm on the same "
            f"operands in {int(differ.sum())} of {differ.numel()} elements (max diff "
            f"{(ours.double() - scaled.double()).abs().max().item():.3g}): pass the fp8 operands and both scales "
            "to torch._scaled_mm(..., out_dtype=out_dtype) and return its result as is"
        )
        assert_close_to_the_product(ours, a, b)


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_leaves_its_operands_unchanged(granularity):
    """fp8_matmul quantises copies of a and b and never writes into the operands."""
    g = torch.Generator().manual_seed(10)
    a, b = torch.randn(16, 32, generator=g) * 5, torch.randn(32, 16, generator=g)
    a_before, b_before = a.clone(), b.clone()
    out = adapters.run_fp8_matmul(a, b, granularity)
    assert torch.equal(a, a_before) and torch.equal(b, b_before), (
        f"fp8_matmul(a, b, granularity={granularity!r}) changed {'a' if not torch.equal(a, a_before) else 'b'}: "
        "quantise copies (to_fp8 scales out of place), leave the operands as they were"
    )
    assert_close_to_the_product(out, a_before, b_before)


MATMUL_OPS = (
    "aten.mm",
    "aten.addmm",
    "aten.bmm",
    "aten.baddbmm",
    "aten.matmul",
    "aten.mv",
    "aten.dot",
)


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_multiplies_in_the_fp8_kernel(granularity):
    """fp8_matmul runs torch._scaled_mm once on the fp8 operands and no matmul on dequantised copies.

    On a CPU both give the same numbers (the CPU kernel itself dequantises), so which op runs is
    what tells them apart; on an H100 only _scaled_mm uses the fp8 tensor cores.
    """
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(16, 32, generator=g), torch.randn(32, 16, generator=g)
    out, ops = precision.student_fp8_matmul_ops(a, b, granularity, torch.bfloat16)
    assert_close_to_the_product(out, a, b)
    matmuls = [op for op in ops if op in MATMUL_OPS]
    assert ops.count("aten._scaled_mm") == 1 and not matmuls, (
        f"fp8_matmul ran {ops.count('aten._scaled_mm')} torch._scaled_mm and {matmuls or 'no other matmul'}: it "
        "must multiply the fp8 operands with torch._scaled_mm (one call), not dequantise them (from_fp8) and "
        "multiply in higher precision, which runs no fp8 kernel at all"
    )


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_matmul_of_a_single_row_keeps_its_row(granularity):
    """M = 1 (a batch of one row): the product is (1, N), torch._scaled_mm's result bit for bit, not a squeezed (N,)."""
    g = torch.Generator().manual_seed(12)
    a, b = torch.randn(1, 32, generator=g) * 3, torch.randn(32, 16, generator=g)
    out = adapters.run_fp8_matmul(a, b, granularity, torch.float32)
    a_fp8, b_fp8, sa, sb = _fp8_operands(a, b, granularity)
    expected = torch._scaled_mm(a_fp8, b_fp8, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    assert out.shape == (1, 16), (
        f"a (1, 32) @ b (32, 16) gave shape {tuple(out.shape)}: keep the size-one row"
    )
    assert torch.equal(out, expected), "not torch._scaled_mm of the to_fp8 operands"
    assert_close_to_the_product(out, a, b)


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "granularity", "match"),
    [
        ((4, 16, 16), (16, 16), "tensor", "2-D"),
        ((16,), (16, 16), "tensor", "2-D"),
        ((8, 32), (16, 16), "tensor", "inner dimensions"),
        ((8, 24), (24, 16), "tensor", "multiples of 16"),
        ((8, 32), (32, 20), "row", "multiples of 16"),
        ((8, 32), (32, 16), "block", "granularity"),
    ],
)
def test_fp8_matmul_rejects_bad_operands(a_shape, b_shape, granularity, match):
    """Non-2-D, mismatched or misaligned operands (K, N not multiples of 16) and unknown granularity are ValueErrors."""
    with pytest.raises(ValueError, match=match):
        adapters.run_fp8_matmul(torch.randn(a_shape), torch.randn(b_shape), granularity)


# --------------------------------------------------------------------------------------------
# mixed_precision_step
# --------------------------------------------------------------------------------------------


def test_mixed_precision_step_keeps_fp32_master_weights_and_gradients_within_3_percent():
    """Autocast step on CPU: Linear outputs bf16, loss/params/grads fp32, gradients within 3% of an fp32 step.

    bf16 keeps 8 significant bits (unit roundoff 2**-8 ≈ 0.4%); the rounding errors of the inputs,
    weights and activations of two layers leave the gradients ≈0.5% off (measured over seeds). 3%
    allows for other shapes and kernels (the same check runs on CUDA) while still failing a
    gradient taken through a bf16 loss or bf16 weights.
    """
    errors = _mixed_step_grad_errors("cpu", torch.bfloat16, seed=0)
    worst = max(errors, key=errors.get)
    assert errors[worst] < 0.03, (
        f"{worst} is {errors[worst]:.4f} away from the fp32 step (relative), expected < 0.03"
    )


def _two_lr0_steps(sizes: tuple[int, ...], seed: int) -> list:
    """Two steps with lr=0 (parameters never move) on one batch, MSE loss, bf16 autocast."""
    torch.manual_seed(seed)
    weights = precision.mlp(sizes).state_dict()
    g = torch.Generator().manual_seed(seed + 1)
    x, y = torch.randn(8, sizes[0], generator=g), torch.randn(8, sizes[-1], generator=g)
    return precision.student_mixed_precision_steps(
        sizes,
        weights,
        x,
        y,
        loss="mse",
        dtype=torch.bfloat16,
        optimizer="sgd",
        optimizer_kwargs={"lr": 0.0},
        steps=2,
    )


def test_mixed_precision_step_returns_a_detached_loss():
    """The returned loss is detached from its graph, so a caller keeping every step's loss keeps no activations alive."""
    for i, step in enumerate(_two_lr0_steps((12, 8, 4), seed=2)):
        assert step.loss_grad_fn is None and not step.loss_requires_grad, (
            f"step {i} returned a loss that still carries its graph (grad_fn={step.loss_grad_fn}): a training loop "
            "that appends it to a list keeps every step's activations in memory; return loss.detach()"
        )
        assert step.loss.shape == () and step.loss.dtype == torch.float32
        assert step.loss.item() > 0 and all(
            g is not None and g.abs().sum() > 0 for g in step.grads.values()
        ), (
            f"step {i} left a loss of {step.loss.item()} and gradients {[None if g is None else 'zero' for g in step.grads.values()]}: "
            "it must compute the loss and backpropagate it"
        )


def test_mixed_precision_step_starts_from_zero_gradients():
    """Each step zeroes the gradients first: a second step on the same batch (lr=0) leaves the same gradients, not twice them."""
    first, second = _two_lr0_steps((12, 8, 4), seed=2)
    for name, grad in first.grads.items():
        again = second.grads[name]
        assert torch.equal(again, grad), (
            f"the gradient of {name} after the second step is {(again.norm() / grad.norm()).item():.3g} times "
            "the first's on the same batch: zero the gradients at the start of every step (optimizer.zero_grad())"
        )


def test_mixed_precision_step_on_a_batch_of_one():
    """A batch of one example: the loss is still a 0-d fp32 tensor, the gradients fp32, and the step moves every parameter."""
    weights = _mlp(3, "cpu").state_dict()
    g = torch.Generator().manual_seed(13)
    x, y = torch.randn(1, 32, generator=g), torch.randint(0, 10, (1,), generator=g)
    [step] = precision.student_mixed_precision_steps(
        MLP_SIZES,
        weights,
        x,
        y,
        loss="cross_entropy",
        dtype=torch.bfloat16,
        optimizer="sgd",
        optimizer_kwargs={"lr": 0.1},
    )
    assert step.loss.shape == () and step.loss.dtype == torch.float32, (
        f"the loss of a batch of one is a {step.loss.dtype} tensor of shape {tuple(step.loss.shape)}, expected 0-d fp32"
    )
    for name, p in step.params.items():
        assert step.grads[name] is not None and step.grads[name].dtype == torch.float32, (
            f"gradient of {name}"
        )
        assert not torch.equal(p, weights[name]), f"{name} did not move: did the optimizer step?"


def test_mixed_precision_step_rejects_bad_dtype_and_low_precision_weights():
    """dtype must be bf16/fp16, and bf16 parameters (no fp32 master weights) are a ValueError."""
    weights = _mlp(0, "cpu").state_dict()
    x, y = torch.randn(4, 32), torch.randint(0, 10, (4,))
    options = {"loss": "cross_entropy", "optimizer": "sgd", "optimizer_kwargs": {"lr": 0.1}}
    with pytest.raises(ValueError, match="bfloat16"):
        precision.student_mixed_precision_steps(
            MLP_SIZES, weights, x, y, dtype=torch.float32, **options
        )
    with pytest.raises(ValueError, match="fp32 master weights"):
        precision.student_mixed_precision_steps(
            MLP_SIZES, weights, x, y, dtype=torch.bfloat16, param_dtype=torch.bfloat16, **options
        )


# --------------------------------------------------------------------------------------------
# DynamicLossScaler
# --------------------------------------------------------------------------------------------


def _scaler_run(steps: int, inject: dict[int, float], seed: int) -> ScalerRun:
    """A tiny model (nn.Linear(8, 4), seeded) trained with AdamW; at step i in ``inject`` that value (inf/NaN) goes into a gradient."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(8, 4)
    return ScalerRun(
        sizes=(8, 4),
        weights=(model.state_dict(),),
        optimizers=(("adamw", (0,), {"lr": 1e-2}),),
        steps=steps,
        seed=seed,
        inject={i: (0, "weight", (i % 4, i % 8), v) for i, v in inject.items()},
    )


def _run_scaler(scaler: str, kwargs: dict, run: ScalerRun) -> tuple[list[float], list[Tensor]]:
    """Train as ``run`` says with your DynamicLossScaler(**kwargs) (``"ours"``) or torch.amp.GradScaler (``"torch"``)."""
    if scaler == "ours":
        return precision.student_scaler_run(kwargs, run)
    return precision.scaler_run(precision.torch_grad_scaler, kwargs, run)


def _assert_same_run(ours, theirs, inject: dict[int, float]) -> None:
    """Step by step: the same scale after update() and bit-identical parameters as GradScaler."""
    for i, (s, t, p, q) in enumerate(zip(ours[0], theirs[0], ours[1], theirs[1], strict=True)):
        what = f"step {i} (injected into a gradient: {inject.get(i)})"
        assert torch.equal(p, q), (
            f"parameters differ from GradScaler's after {what}: max diff "
            f"{(p - q).abs().max().item():.3g} (NaN means a step was taken on an inf/NaN gradient)"
        )
        assert s == t, (
            f"scale after {what} is {s}, GradScaler's is {t}; scales so far: {ours[0][: i + 1]}"
        )


def test_loss_scaler_matches_grad_scaler_with_injected_infs():
    """Over 14 steps with infs/NaN injected, the scale and the parameters equal torch.amp.GradScaler's at every step.

    With growth_interval=3 the scale halves at steps 2, 9 and 10 and doubles after steps 5, 8 and 13.
    """
    kwargs = {
        "init_scale": 2.0**10,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 3,
    }
    inject = {2: float("inf"), 9: float("-inf"), 10: float("nan")}
    run = _scaler_run(14, inject, seed=0)
    ours, theirs = _run_scaler("ours", kwargs, run), _run_scaler("torch", kwargs, run)
    planned = [2.0**k for k in (10, 10, 9, 9, 9, 10, 10, 10, 11, 10, 9, 9, 9, 10)]
    assert theirs[0] == planned, (
        f"GradScaler itself gave {theirs[0]}; this test's plan needs updating"
    )
    _assert_same_run(ours, theirs, inject)


def test_loss_scaler_with_two_optimizers_and_unscale_before_clipping_matches_grad_scaler():
    """Two optimizers (a NaN in one's gradients skips only that one's step) and unscale_ then clipping of the
    other's: the scale and the parameters equal torch.amp.GradScaler's at every step."""
    torch.manual_seed(7)
    first, second = torch.nn.Linear(6, 5), torch.nn.Linear(5, 3)
    run = ScalerRun(
        sizes=(6, 5, 3),
        weights=(first.state_dict(), second.state_dict()),
        optimizers=(("adamw", (0,), {"lr": 1e-2}), ("sgd", (1,), {"lr": 0.05, "momentum": 0.5})),
        steps=6,
        seed=8,
        batch=5,
        inject={2: (0, "weight", (1, 2), float("nan"))},  # only the first optimizer's gradients
        clip=(1, 0.2),  # unscale_ the second optimizer, then clip its layer
    )
    kwargs = {"init_scale": 512.0, "growth_interval": 2}
    ours, theirs = _run_scaler("ours", kwargs, run), _run_scaler("torch", kwargs, run)
    _assert_same_run(ours, theirs, {2: float("nan")})


def test_loss_scaler_step_returns_what_the_optimizer_step_returned_or_none_when_skipped():
    """step(optimizer) hands back what optimizer.step() returned (as GradScaler.step does), and None for a
    step skipped for an inf gradient: checked with an optimizer whose step() returns its step count."""
    infs = [False, True, False, False]
    ours = precision.student_step_results(infs)
    theirs = precision.step_results(precision.torch_grad_scaler, infs)
    assert theirs == [1, None, 2, 3], f"the oracle itself changed: GradScaler gave {theirs}"
    assert ours == theirs, (
        f"step(optimizer) returned {ours} over steps with inf gradients at {infs}; GradScaler returns "
        f"{theirs}: what optimizer.step() returned (return optimizer.step()), None when the step is skipped"
    )


def test_loss_scaler_defaults_and_first_decisions():
    """Defaults are GradScaler's: scale 2**16; an inf halves it and skips the step; a clean step leaves it."""
    initial, _ = precision.student_scaled_losses({}, [])
    assert initial == 2.0**16, (
        f"DynamicLossScaler().get_scale() is {initial}, GradScaler's default init_scale is 2**16"
    )
    run = _scaler_run(3, {0: float("inf")}, seed=1)
    scales, params = _run_scaler("ours", {}, run)
    assert scales == [2.0**15, 2.0**15, 2.0**15], f"expected [2**15] * 3, got {scales}"
    initial = torch.cat([w.flatten() for w in run.weights[0].values()])
    assert torch.equal(params[0], initial), "the step with an inf gradient must be skipped"
    assert not torch.equal(params[1], initial), "a clean step must update the parameters"


@pytest.mark.parametrize("loss_dtype", [torch.float16, torch.bfloat16, torch.float32], ids=_name)
def test_loss_scaler_scales_in_fp32_whatever_the_loss_dtype(loss_dtype):
    """scale(loss) multiplies by S as an fp32 tensor: a 0-d fp16 or bf16 loss comes back fp32, so 3.0 x 2**16 is
    196608 where fp16 (max 65504) would have overflowed to inf."""
    _, [scaled] = precision.student_scaled_losses(
        {"init_scale": 2.0**16}, [torch.tensor(3.0, dtype=loss_dtype)]
    )
    assert scaled.shape == () and scaled.dtype == torch.float32, (
        f"scale() of a 0-d {loss_dtype} loss returned {scaled.dtype} of shape {tuple(scaled.shape)}: multiply by "
        "S as an fp32 tensor (torch.tensor(S, dtype=torch.float32)), which promotes a 0-d half loss to fp32"
    )
    assert scaled.item() == 3.0 * 2**16, (
        f"scale() of a {loss_dtype} loss of 3.0 with S = 2**16 gave {scaled.item()}, expected {3.0 * 2**16} "
        "(inf: the product was taken in the loss's half dtype)"
    )


@pytest.mark.parametrize("loss_dtype", [torch.float16, torch.float32], ids=_name)
def test_loss_scaler_scales_a_loss_on_its_own_device(loss_dtype):
    """(CPU twin of the device) scale() of a loss on the meta device is on the meta device: S is made on the loss's device."""
    losses = [torch.tensor(2.0, dtype=loss_dtype), torch.empty((), dtype=loss_dtype, device="meta")]
    _, [on_cpu, scaled] = precision.student_scaled_losses({"init_scale": 1024.0}, losses)
    assert on_cpu.item() == 2048.0, "scale() of 2.0 with S = 1024 on the CPU"
    assert scaled.device.type == "meta" and scaled.dtype == torch.float32, (
        f"scale() of a meta {loss_dtype} loss gave a {scaled.dtype} tensor on {scaled.device}: keep the product on "
        "the loss's device (create S there) and in fp32"
    )


#: The calls of the misuse test, in order, and why each one that must raise RuntimeError must.
SCALER_CALLS = ["update", "unscale_", "unscale_", "step", "step", "unscale_", "update"]
SCALER_MISUSE = {
    0: "update() before any step: nothing to decide from",
    2: "unscale_() twice before update()",
    4: "step() twice before update()",
    5: "unscale_() after step(), before update()",
}


def test_loss_scaler_misuse_is_a_runtime_error_and_fp16_gradients_a_value_error():
    """update() before any step, unscale_() twice or after step(), and step() twice are RuntimeErrors; fp16 gradients a
    ValueError; a clean step divides the gradient by S and steps (the parameter moves by exactly lr * g / S)."""
    raised, p = precision.student_scaler_calls(
        {"init_scale": 2.0**10},
        SCALER_CALLS,
        param=torch.ones(3),
        grad=torch.full((3,), 2.0**10),
        lr=0.5,
    )
    for i, error in enumerate(raised):
        calls = ", ".join(f"{c}()" for c in SCALER_CALLS[: i + 1])
        if i in SCALER_MISUSE:
            assert error is not None and "RuntimeError" in error.bases, (
                f"after {calls}: {SCALER_MISUSE[i]} must raise RuntimeError, as GradScaler does; "
                f"{'it raised nothing' if error is None else f'it raised {error}'}"
            )
        else:
            assert error is None, f"after {calls}: the last call is allowed, yet it raised {error}"
    assert torch.equal(p, torch.full((3,), 0.5)), (
        f"after unscale_ (g = 2**10 / 2**10 = 1) and an SGD step of lr 0.5 the parameter should be 0.5, got {p.tolist()}"
    )
    [error], _ = precision.student_scaler_calls(
        {},
        ["unscale_"],
        param=torch.ones(2, dtype=torch.float16),
        grad=torch.ones(2, dtype=torch.float16),
        lr=0.1,
    )
    assert (
        error is not None and "ValueError" in error.bases and "fp32 master weights" in error.message
    ), (
        f"unscale_() of fp16 gradients must raise ValueError saying 'fp32 master weights'; "
        f"{'it raised nothing' if error is None else f'it raised {error}'}"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"init_scale": 0.0}, "init_scale"),
        ({"init_scale": float("inf")}, "init_scale"),
        ({"growth_factor": 1.0}, "growth_factor"),
        ({"backoff_factor": 1.5}, "backoff_factor"),
        ({"growth_interval": 0}, "growth_interval"),
    ],
)
def test_loss_scaler_rejects_bad_hyperparameters(kwargs, match):
    """Each out-of-range hyperparameter is a ValueError naming it."""
    with pytest.raises(ValueError, match=match):
        precision.student_scaled_losses(kwargs, [])
