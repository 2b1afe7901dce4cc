"""Napkin math: how long a training run takes, and how large a model fits in memory.

Without arguments, answers the lecture's two questions:
  * 70B parameters on 15T tokens with 1024 H100s (bf16 dense peak) at MFU 0.5: how many days?
  * 8 H100s of 80 GB training with AdamW (16 bytes per parameter): how many parameters fit?
Any argument changes the question. --measure times n x n matmuls on this machine instead.

Examples:
    uv run cs336 account
    uv run cs336 account --params 8B --tokens 1T --gpus 64 --gpu A100-SXM --mfu 0.4
    uv run cs336 account --optimizer sgd --precision fp32 --fit-gpus 1
    uv run cs336 account --measure --sizes 256,512,1024 --plot throughput.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from cs336_assignment.accounting import (
    DTYPES,
    GPU_MEMORY_BYTES,
    OPTIMIZERS,
    PEAK_FLOPS,
    PRECISIONS,
    bytes_per_activation,
    bytes_per_param,
    gpu_kind,
    matmul_throughput,
    max_trainable_params,
    mfu,
    optimizer_state_tensors,
    peak_flops,
    six_nd_flops,
    training_days,
)
from cs336_assignment.cli import CommandError
from cs336_assignment.commands import device, positive_int

_SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_PEAK_DTYPES = sorted({d for table in PEAK_FLOPS.values() for d in table})


def _count(text: str) -> float:
    """Parse ``70e9``, ``70B``, ``15T``, ``1.5M`` into a positive float."""
    text = text.strip()
    scale = _SUFFIXES.get(text[-1:].upper(), 1.0) if text[-1:].isalpha() else 1.0
    number = text[:-1] if scale != 1.0 else text
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number like 70e9 or 70B, got {text!r}"
        ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers like 256,512, got {text!r}"
        ) from None
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"expected positive sizes, got {text!r}")
    return sizes


def _human(x: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    q = parser.add_argument_group("question 1: training time")
    q.add_argument(
        "--params", type=_count, default=70e9, help="model parameters, e.g. 70B (default: 70B)"
    )
    q.add_argument(
        "--tokens", type=_count, default=15e12, help="training tokens, e.g. 15T (default: 15T)"
    )
    q.add_argument(
        "--gpus",
        type=positive_int,
        default=1024,
        help="GPUs training together (default: %(default)s)",
    )
    q.add_argument(
        "--gpu",
        choices=sorted(PEAK_FLOPS),
        default="H100-SXM",
        help="GPU kind (default: %(default)s)",
    )
    q.add_argument(
        "--dtype",
        choices=_PEAK_DTYPES,
        default="bf16",
        help="matmul dtype for the peak (default: %(default)s)",
    )
    q.add_argument(
        "--mfu",
        type=float,
        default=0.5,
        help="model FLOPs utilisation in (0, 1] (default: %(default)s)",
    )
    m = parser.add_argument_group("question 2: largest trainable model")
    m.add_argument(
        "--fit-gpus",
        type=positive_int,
        default=8,
        help="GPUs whose memory holds the model (default: %(default)s)",
    )
    m.add_argument(
        "--memory", type=_count, help="bytes per GPU, e.g. 80G (default: the --gpu's HBM)"
    )
    m.add_argument(
        "--optimizer", choices=OPTIMIZERS, default="adamw", help="optimizer (default: %(default)s)"
    )
    m.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="mixed",
        help="fp32 or mixed (default: %(default)s)",
    )
    t = parser.add_argument_group("measuring this machine")
    t.add_argument(
        "--measure", action="store_true", help="time n x n matmuls in fp32 and bf16 instead"
    )
    t.add_argument(
        "--device",
        type=device,
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="device to time on (default: %(default)s)",
    )
    t.add_argument(
        "--sizes",
        type=_sizes,
        help="matrix sizes n (default: 128..1024 on CPU, 1024..8192 on CUDA)",
    )
    t.add_argument(
        "--iters",
        type=positive_int,
        default=5,
        help="timed matmuls per size (default: %(default)s)",
    )
    t.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="save a plot of throughput against size (needs matplotlib)",
    )


def _napkin(args: argparse.Namespace) -> None:
    peak = peak_flops(args.gpu, args.dtype)
    days = training_days(args.params, args.tokens, args.gpus, peak, args.mfu)
    print("Training time")
    print(
        f"  6 x {_human(args.tokens)} tokens x {_human(args.params)} params = {six_nd_flops(args.params, args.tokens):.3g} FLOPs"
    )
    print(
        f"  {args.gpus} x {args.gpu} at {args.dtype} dense peak {peak / 1e12:g} TFLOP/s, MFU {args.mfu:g}"
    )
    print(f"  -> {days:.1f} days")
    memory = args.memory if args.memory is not None else GPU_MEMORY_BYTES[args.gpu]
    per_param = bytes_per_param(args.optimizer, args.precision)
    states = optimizer_state_tensors(args.optimizer)
    if args.precision == "mixed":
        breakdown = f"bf16 params 2 + bf16 grads 2 + fp32 master 4 + {states} fp32 states x 4"
    else:
        breakdown = f"params 4 + grads 4 + {states} states x 4"
    params = max_trainable_params(args.fit_gpus, memory, per_param)
    print("Largest trainable model")
    print(
        f"  {args.optimizer} in {args.precision} precision: {per_param} bytes/param ({breakdown})"
    )
    print(f"  {args.fit_gpus} x {memory / 1e9:g} GB -> {_human(params)} params ({params:.3g}),")
    print(f"  before activations ({bytes_per_activation(args.precision)} bytes each)")


def _measure(args: argparse.Namespace) -> None:
    device = torch.device(args.device)  # one this machine has (checked as it was parsed)
    kind = gpu_kind(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    sizes = args.sizes or (
        [1024, 2048, 4096, 8192] if device.type == "cuda" else [128, 256, 512, 1024]
    )
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"Matmul throughput on {where} ({kind or 'no peak figure known'}), {args.iters} timed calls per size"
    )
    header = f"{'dtype':>6} {'n':>6} {'ms':>10} {'GFLOP/s':>10}" + ("    MFU" if kind else "")
    print(header)
    generator = torch.Generator().manual_seed(0)
    results: dict[str, list[tuple[int, float]]] = {}
    for name in ("fp32", "bf16"):
        for n in sizes:
            seconds, flops_per_sec = matmul_throughput(
                n, DTYPES[name], device, iters=args.iters, generator=generator
            )
            line = f"{name:>6} {n:>6} {seconds * 1e3:>10.3f} {flops_per_sec / 1e9:>10.1f}"
            if kind:
                line += f" {mfu(flops_per_sec, 1.0, peak_flops(kind, name)):>6.1%}"
            print(line)
            results.setdefault(name, []).append((n, flops_per_sec))
    if args.plot is not None:
        _plot(results, args.plot, where, kind)
        print(f"plot saved to {args.plot}")


def _plot(
    results: dict[str, list[tuple[int, float]]], path: Path, where: str, kind: str | None
) -> None:
    try:
        import matplotlib
    except ImportError:
        raise ValueError(
            "--plot needs matplotlib (a dev dependency of this project), which is not installed: run `uv sync`"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, points in results.items():
        sizes, rates = zip(*points, strict=True)
        (line,) = ax.plot(sizes, [r / 1e9 for r in rates], marker="o", label=name)
        if kind and name in PEAK_FLOPS[kind]:
            ax.axhline(
                PEAK_FLOPS[kind][name] / 1e9,
                color=line.get_color(),
                linestyle="--",
                label=f"{name} peak",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (n x n @ n x n)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"Matmul throughput on {where}")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    try:
        if args.measure:
            _measure(args)
        else:
            _napkin(args)
    except ValueError as err:  # what argparse cannot check alone (--plot without matplotlib, ...)
        raise CommandError(err) from None
    return 0
