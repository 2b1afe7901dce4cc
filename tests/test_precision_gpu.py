"""GPU checks of part 8, precision: the same helpers as tests/test_precision.py, run on CUDA.

Every test here is marked ``gpu`` (``uv run pytest -m gpu`` selects them all); fp8 matmuls need
compute capability >= 8.9 (``fp8``), the throughput check an H100 (``h100``). Without CUDA they skip
with the reason shown; their CPU twins, named in each docstring, run everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.utils import benchmark

from tests.scenarios.precision import no_tf32
from tests.test_precision import (
    _e4m3_codes,
    _e4m3_test_values,
    _fp8_matmul_rel_error,
    _fp8_operands,
    _mixed_step_grad_errors,
)

pytestmark = pytest.mark.gpu


def _cuda_ms(fn: Callable[[], object], iters: int = 20, warmup: int = 5) -> float:
    """Mean milliseconds per call, by torch's own benchmark timer (it synchronises CUDA itself)."""
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    timer.timeit(warmup)
    return timer.timeit(iters).mean * 1e3


def test_bf16_step_on_cuda_within_3_percent_of_fp32():
    """CUDA autocast step: Linear outputs bf16, loss/params/grads fp32, gradients within 3% of an fp32 step without TF32.

    CPU twin: test_mixed_precision_step_keeps_fp32_master_weights_and_gradients_within_3_percent.
    bf16's unit roundoff is 2**-8; the reference must be true fp32, hence TF32 off.
    """
    with no_tf32():  # for the fp32 reference step here (your step runs with torch's default: TF32 off for matmuls)
        errors = _mixed_step_grad_errors("cuda", torch.bfloat16, seed=0)
    worst = max(errors, key=errors.get)
    assert errors[worst] < 0.03, (
        f"{worst} is {errors[worst]:.4f} away from the fp32 step (relative), expected < 0.03"
    )


@pytest.mark.fp8
@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_fp8_scaled_mm_on_cuda_relative_error_below_6_percent(granularity):
    """torch._scaled_mm on fp8 tensor cores, bf16 output: relative error vs fp64 < 0.06 (3 mantissa bits per operand).

    CPU twin: test_fp8_matmul_relative_error_vs_fp64_below_6_percent.
    """
    err = _fp8_matmul_rel_error("cuda", granularity, (256, 512, 256), seed=0)
    assert err < 0.06, (
        f"fp8 matmul ({granularity}) on CUDA: relative error {err:.4f} >= 0.06 vs fp64"
    )


def test_e4m3_casts_on_cuda_equal_cpu_bit_for_bit():
    """to_fp8 to e4m3fn gives the same bytes on CUDA as on CPU, ties and subnormals included.

    CPU twin: test_to_fp8_e4m3_cast_rounds_to_nearest_even.
    """
    x = _e4m3_test_values()
    on_cuda, on_cpu = _e4m3_codes(x, "cuda"), _e4m3_codes(x, "cpu")
    bad = on_cuda != on_cpu
    assert not bad.any(), (
        f"{int(bad.sum())} values cast differently, e.g. {x[bad][0].item()!r}: CUDA {hex(on_cuda[bad][0].item())}, "
        f"CPU {hex(on_cpu[bad][0].item())}"
    )


@pytest.mark.h100
def test_fp8_matmul_throughput_above_bf16_at_8192():
    """At 8192^3 on an H100, torch._scaled_mm on the run_to_fp8 operands beats a bf16 matmul timed in the same run.

    CPU twin: test_fp8_matmul_is_scaled_mm_of_the_fp8_operands (same operands, same call). The
    quantisation is left out of the timing: it is memory-bound and, in training, fused or amortised.
    """
    n = 8192
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    a_fp8, b_fp8, scale_a, scale_b = _fp8_operands(a, b, "tensor")
    bf16_ms = _cuda_ms(lambda: a @ b)
    fp8_ms = _cuda_ms(
        lambda: torch._scaled_mm(
            a_fp8, b_fp8, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16
        )
    )
    tflops = lambda ms: 2 * n**3 / (ms * 1e-3) / 1e12  # noqa: E731
    print(
        f"bf16 {tflops(bf16_ms):.0f} TFLOP/s, fp8 {tflops(fp8_ms):.0f} TFLOP/s, fp8/bf16 = {bf16_ms / fp8_ms:.2f}x"
    )
    assert fp8_ms < bf16_ms, (
        f"fp8 matmul ({fp8_ms:.2f} ms) is not faster than bf16 ({bf16_ms:.2f} ms) at {n}^3: ratio {bf16_ms / fp8_ms:.2f}x"
    )
