"""fp8 vs bf16 matmul throughput, same run: ``torch._scaled_mm`` alone and ``fp8_matmul`` end to end.

For each size n it times, with ``torch.utils.benchmark`` (which synchronises CUDA):

- ``bf16``: ``a @ b`` in bf16, the peer;
- ``fp8 mm``: ``torch._scaled_mm`` on operands quantised once by ``to_fp8`` (per tensor and per
  row), i.e. the tensor-core throughput the lecture's 2x claim is about;
- ``fp8_matmul``: ``cs336_assignment.precision.fp8_matmul`` from bf16 inputs, quantisation included
  (eager, unfused: a few memory-bound passes per operand);
- ``fused``: the same per-tensor quantisation and ``_scaled_mm`` under ``torch.compile`` (CUDA only;
  ``--no-compile`` skips it), checked against ``fp8_matmul``'s output: what fusing the
  memory-bound passes buys, i.e. how much of the tensor-core gain survives quantisation.

and prints TFLOP/s (GFLOP/s on CPU; ``flops = 2 * n**3``) and the ratio to bf16 (above 1 means fp8 is faster).
fp8 tensor cores need compute capability >= 8.9 (Ada, Hopper); without CUDA the script says so and
exits 0. ``--device cpu`` runs it anyway at small sizes as a smoke test: CPU ``_scaled_mm`` is a
reference implementation, so its ratio means nothing.

    uv run python benchmarks/fp8_matmul.py                          # CUDA: 2048, 4096, 8192
    uv run python benchmarks/fp8_matmul.py --device cpu --sizes 256
"""

from __future__ import annotations

import argparse
import operator
from collections.abc import Callable
from functools import partial

import torch
from torch.utils import benchmark

from cs336_assignment.precision import AMAX_FLOOR, fp8_matmul, to_fp8

E4M3 = torch.float8_e4m3fn
# The compiled quantisation may round an element to the neighbouring fp8 value where eager does
# not (seen on an H100, torch 2.11: max |diff| 0.25 at 8192); a wrong formula would be off by far
# more than fp8's relative step, 2**-3.
FUSED_TOLERANCE = 1e-3


def _seconds(fn: Callable[[], object], iters: int) -> float:
    fn()  # warm-up (kernel selection, allocations)
    return (
        benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        .timeit(iters)
        .mean
    )


def _quantise_and_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-tensor fp8_matmul without the input checks, written for torch.compile to fuse.

    Same arithmetic as ``to_fp8`` (fp32, scale = max(amax, floor) / 448, clamp, cast), so the
    result matches ``fp8_matmul(a, b)`` up to rounding; B is quantised as b^T and passed column-major.
    """
    fp8_max = torch.finfo(E4M3).max

    def quantise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x32 = x.float()
        scale = x32.abs().amax().clamp(min=AMAX_FLOOR) / fp8_max
        return (x32 / scale).clamp(-fp8_max, fp8_max).to(E4M3), scale

    a_fp8, scale_a = quantise(a)
    bt_fp8, scale_b = quantise(b.t().contiguous())
    return torch._scaled_mm(
        a_fp8, bt_fp8.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated n (default 2048,4096,8192 on CUDA, 256 on CPU)",
    )
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print(
                "fp8_matmul benchmark: no CUDA device on this machine; nothing to measure (try --device cpu for a smoke run)"
            )
            return 0
        capability = torch.cuda.get_device_capability(device)
        if capability < (8, 9):
            print(
                f"fp8_matmul benchmark: fp8 matmuls need compute capability >= 8.9, this GPU is {capability}"
            )
            return 0
        name = torch.cuda.get_device_name(device)
    else:
        name = "CPU (reference kernels: ratios are not meaningful)"
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([2048, 4096, 8192] if device.type == "cuda" else [256])
    )
    fused = None if device.type != "cuda" or args.no_compile else torch.compile(_quantise_and_mm)
    print(f"{name}, torch {torch.__version__}, {args.iters} timed calls each")
    unit, per = ("TFLOP/s", 1e12) if device.type == "cuda" else ("GFLOP/s", 1e9)
    print(
        f"{'n':>6} {'bf16 ' + unit:>13} {'fp8 mm (tensor)':>16} {'fp8 mm (row)':>13} {'fp8_matmul (tensor)':>20} {'fp8_matmul (row)':>17}"
        + (f" {'fused (tensor)':>15}" if fused else "")
    )
    generator = torch.Generator().manual_seed(0)
    for n in sizes:
        a = torch.randn(n, n, generator=generator).to(device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, generator=generator).to(device=device, dtype=torch.bfloat16)
        flops = 2 * n**3
        base = _seconds(partial(operator.matmul, a, b), args.iters)
        cells = []
        for granularity in ("tensor", "row"):
            a_fp8, scale_a = to_fp8(a, E4M3, granularity)
            bt_fp8, scale_bt = to_fp8(b.t(), E4M3, granularity)
            b_fp8, scale_b = bt_fp8.t(), (scale_bt.t() if granularity == "row" else scale_bt)
            t = _seconds(
                partial(
                    torch._scaled_mm,
                    a_fp8,
                    b_fp8,
                    scale_a=scale_a,
                    scale_b=scale_b,
                    out_dtype=torch.bfloat16,
                ),
                args.iters,
            )
            cells.append(t)
        for granularity in ("tensor", "row"):
            cells.append(_seconds(partial(fp8_matmul, a, b, granularity), args.iters))
        widths: tuple[int, ...] = (16, 13, 20, 17)
        if fused is not None:
            eager = fp8_matmul(a, b).float()
            drift = ((fused(a, b).float() - eager).norm() / eager.norm()).item()
            if drift > FUSED_TOLERANCE:
                print(
                    f"n={n}: the compiled fp8_matmul is {drift:.1e} away from the eager one (relative)"
                )
                return 1
            cells.append(_seconds(partial(fused, a, b), args.iters))
            widths += (15,)
        line = f"{n:>6} {flops / base / per:>13.1f}"
        for t, w in zip(cells, widths, strict=True):
            line += f" {f'{flops / t / per:.1f} ({base / t:.2f}x)':>{w}}"
        print(line)
    print("(x) = fp8 throughput / bf16 throughput in this run; above 1.00 means fp8 is faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
