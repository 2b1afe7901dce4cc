"""Matmul throughput measured by ``time_matmul``, checked against ``torch.utils.benchmark`` in the same run.

For each dtype and size, times ``n x n @ n x n`` with ``cs336_assignment.accounting.time_matmul`` and with
torch's own ``torch.utils.benchmark.Timer`` (which also synchronises CUDA), prints both throughputs and
their ratio (ours / torch's; near 1.0 means the warm-up and synchronisation are right, far above 1
means the timer missed work, e.g. an unsynchronised CUDA clock), and the MFU on a known GPU.

    uv run python benchmarks/matmul_throughput.py                     # CPU: 128..1024
    uv run python benchmarks/matmul_throughput.py --sizes 1024,4096,8192 --device cuda
"""

from __future__ import annotations

import argparse

import torch
from torch.utils import benchmark

from cs336_assignment.accounting import DTYPES, gpu_kind, matmul_flops, peak_flops, time_matmul


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated n (default: 128..1024 on CPU, 1024..8192 on CUDA)",
    )
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    device = torch.device(args.device)
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([1024, 2048, 4096, 8192] if device.type == "cuda" else [128, 256, 512, 1024])
    )
    kind = gpu_kind(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    print(
        f"device {device} ({kind or 'no peak figure'}), {args.iters} timed calls, torch {torch.__version__}"
    )
    print(
        f"{'dtype':>6} {'n':>6} {'ours GFLOP/s':>13} {'torch GFLOP/s':>14} {'ratio':>6}"
        + ("    MFU" if kind else "")
    )
    generator = torch.Generator().manual_seed(0)
    for name in args.dtypes.split(","):
        for n in sizes:
            a = torch.randn(n, n, generator=generator).to(device=device, dtype=DTYPES[name])
            b = torch.randn(n, n, generator=generator).to(device=device, dtype=DTYPES[name])
            ours = time_matmul(a, b, warmup=3, iters=args.iters)
            timer = benchmark.Timer(
                stmt="a @ b", globals={"a": a, "b": b}, num_threads=torch.get_num_threads()
            )
            theirs = timer.timeit(args.iters).mean
            flops = matmul_flops(n, n, n)
            line = f"{name:>6} {n:>6} {flops / ours / 1e9:>13.1f} {flops / theirs / 1e9:>14.1f} {theirs / ours:>6.2f}"
            if kind:
                line += f" {flops / ours / peak_flops(kind, name):>6.1%}"
            print(line)


if __name__ == "__main__":
    main()
