"""Napkin math: how long a training run takes, how big a model fits, and how fast a GPU really is.

Training time. A run of ``N`` parameters on ``D`` tokens costs ``6 N D`` FLOPs (see ``flops.py``);
a cluster of ``G`` GPUs of peak ``F`` FLOP/s delivers ``G * F * MFU`` of them per second, where the
model FLOPs utilisation ``MFU = (FLOPs the model needs / seconds) / peak`` is 0.5 on a good day::

    days = 6 N D / (G * F * MFU * 86400)

The lecture's example: 70B parameters on 15T tokens on 1024 H100s (bf16 dense peak 989.5 TFLOP/s)
at MFU 0.5 takes about 144 days.

Model size. With ``b`` bytes per parameter (16 for AdamW: see ``memory.py``), ``G`` GPUs of ``M``
bytes hold at most ``G * M / b`` parameters, before a single activation: 8 H100s of 80 GB hold 40B.

Peak throughput depends on the dtype: tensor cores run bf16 14.8x faster than fp32 on an H100
SXM. Datasheets often quote "with sparsity" figures (2:4 structured sparsity), twice the dense
ones; ``PEAK_FLOPS`` lists dense figures only.

Deliberately left out: communication between GPUs, memory-bandwidth-bound ops (a roofline
model), power and clock throttling, and GPUs other than A100 and H100.
"""

from __future__ import annotations

import re
import time

import torch
from jaxtyping import Float
from torch import Tensor

from cs336_assignment.accounting.flops import matmul_flops
from cs336_assignment.validation import (
    check_count,
    check_nonnegative_number,
    check_positive,
    check_positive_int,
)

SECONDS_PER_DAY = 60 * 60 * 24

# Dense peak FLOP/s (integer ops/s for int8), from NVIDIA's datasheets, where the tensor-core
# figures marked "with sparsity" are halved to get dense ones:
#   H100: "NVIDIA H100 Tensor Core GPU" datasheet, https://www.nvidia.com/en-us/data-center/h100/
#         (SXM5 and PCIe columns; e.g. BF16 1,979 TFLOPS* SXM -> 989.5 dense)
#   A100: "NVIDIA A100 Tensor Core GPU" datasheet, https://www.nvidia.com/en-us/data-center/a100/
#         (SXM4 and PCIe 80GB have the same compute peaks; no fp8 tensor cores)
# fp64 and fp32 are the non-tensor-core (CUDA core) peaks; tf32 is what fp32 matmuls reach with
# torch.backends.cuda.matmul.allow_tf32 = True.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "H100-SXM": {
        "fp64": 34e12,
        "fp32": 67e12,
        "tf32": 494.5e12,
        "bf16": 989.5e12,
        "fp16": 989.5e12,
        "fp8": 1979e12,
        "int8": 1979e12,
    },
    "H100-PCIe": {
        "fp64": 26e12,
        "fp32": 51e12,
        "tf32": 378e12,
        "bf16": 756.5e12,
        "fp16": 756.5e12,
        "fp8": 1513e12,
        "int8": 1513e12,
    },
    "A100-SXM": {
        "fp64": 9.7e12,
        "fp32": 19.5e12,
        "tf32": 156e12,
        "bf16": 312e12,
        "fp16": 312e12,
        "int8": 624e12,
    },
    "A100-PCIe": {
        "fp64": 9.7e12,
        "fp32": 19.5e12,
        "tf32": 156e12,
        "bf16": 312e12,
        "fp16": 312e12,
        "int8": 624e12,
    },
}

GPU_MEMORY_BYTES: dict[str, float] = {
    "H100-SXM": 80e9,
    "H100-PCIe": 80e9,
    "A100-SXM": 80e9,
    "A100-PCIe": 80e9,
}
"""HBM per GPU, in decimal bytes as the datasheets (and the lecture) count (A100s also came with 40 GB)."""

_DTYPE_ALIASES = {
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    torch.float8_e4m3fn: "fp8",
    torch.float8_e5m2: "fp8",
    torch.float64: "fp64",
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.int8: "int8",
}


def gpu_kind(device_name: str) -> str | None:
    """The ``PEAK_FLOPS`` key for a CUDA device name (``torch.cuda.get_device_name()``), or None.

    >>> gpu_kind("NVIDIA H100 80GB HBM3"), gpu_kind("NVIDIA A100-PCIE-40GB"), gpu_kind("Tesla T4")
    ('H100-SXM', 'A100-PCIe', None)
    """
    name = device_name.upper()
    for chip in ("H100", "A100"):
        if re.search(rf"\b{chip}\b", name.replace("-", " ")):
            if "NVL" in name:  # H100 NVL: a different card, not in the table
                return None
            return f"{chip}-PCIe" if "PCIE" in name else f"{chip}-SXM"
    return None


def peak_flops(gpu: str, dtype: str | torch.dtype) -> float:
    """Dense peak FLOP/s of ``gpu`` (a ``PEAK_FLOPS`` key) at ``dtype`` (a name or torch dtype).

    >>> peak_flops("H100-SXM", "bf16")
    989500000000000.0

    Names are case-sensitive, as in ``PEAK_FLOPS`` (``"h100-sxm"`` is unknown).

    Raises:
        ValueError: for an unknown GPU: "unknown GPU 'H200'; use one of [...]".
        ValueError: for a dtype the GPU has no figure for, naming the dtype and the GPU: "no peak
            figure for dtype 'fp8' on A100-SXM; use one of [...]".
    """
    # BEGIN SOLUTION
    if gpu not in PEAK_FLOPS:
        raise ValueError(f"unknown GPU {gpu!r}; use one of {sorted(PEAK_FLOPS)}")
    name = _DTYPE_ALIASES.get(dtype, dtype)
    table = PEAK_FLOPS[gpu]
    if name not in table:
        raise ValueError(f"no peak figure for dtype {dtype!r} on {gpu}; use one of {sorted(table)}")
    return table[name]
    # END SOLUTION


def mfu(flops: float, seconds: float, peak_flops_per_sec: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s as a fraction of peak, ``flops / seconds / peak``.

    A result above 1 means the peak is the wrong one (another dtype's, or the FLOPs over-counted).

    >>> mfu(flops=4e12, seconds=2.0, peak_flops_per_sec=4e12)
    0.5

    Raises:
        ValueError: if ``seconds`` or ``peak_flops_per_sec`` is not a positive number, naming it:
            "seconds must be a positive number, got 0.0".
        ValueError: if ``flops`` is negative (``validation.check_nonnegative_number``): "flops must
            be a non-negative number, got -1.0".
    """
    # BEGIN SOLUTION
    check_positive(seconds=seconds, peak_flops_per_sec=peak_flops_per_sec)
    check_nonnegative_number(flops=flops)
    return flops / seconds / peak_flops_per_sec
    # END SOLUTION


def training_days(
    num_params: float, num_tokens: float, num_gpus: int, peak_flops_per_gpu: float, mfu: float
) -> float:
    """Days to train: ``6 * num_params * num_tokens / (num_gpus * peak * mfu * 86400)``.

    >>> round(training_days(70e9, 15e12, num_gpus=1024, peak_flops_per_gpu=989.5e12, mfu=0.5), 1)
    143.9

    Raises:
        ValueError: if ``num_params``, ``num_tokens``, ``num_gpus`` or ``peak_flops_per_gpu`` is
            not a positive number, naming it: "num_gpus must be a positive number, got -8".
        ValueError: if ``mfu`` is not in (0, 1]; ``cs336 account`` prints this message, and its
            test looks for it: "mfu must be in (0, 1] (a fraction of peak; 0.5 is good), got 1.5".
    """
    # BEGIN SOLUTION
    check_positive(
        num_params=num_params,
        num_tokens=num_tokens,
        num_gpus=num_gpus,
        peak_flops_per_gpu=peak_flops_per_gpu,
    )
    if isinstance(mfu, bool) or not isinstance(mfu, int | float) or not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1] (a fraction of peak; 0.5 is good), got {mfu!r}")
    total_flops = 6 * num_params * num_tokens
    flops_per_day = num_gpus * peak_flops_per_gpu * mfu * SECONDS_PER_DAY
    return total_flops / flops_per_day
    # END SOLUTION


def max_trainable_params(num_gpus: int, bytes_per_gpu: float, bytes_per_param: float) -> float:
    """Largest model whose parameters, gradients and optimizer state fit: ``gpus * bytes / b``.

    >>> max_trainable_params(num_gpus=8, bytes_per_gpu=80e9, bytes_per_param=16)
    40000000000.0

    Raises:
        ValueError: if an argument is not a positive number, naming it (each one, not only the
            divisor): "num_gpus must be a positive number, got 0", "bytes_per_param must be a
            positive number, got 0".
    """
    # BEGIN SOLUTION
    check_positive(num_gpus=num_gpus, bytes_per_gpu=bytes_per_gpu, bytes_per_param=bytes_per_param)
    return num_gpus * bytes_per_gpu / bytes_per_param
    # END SOLUTION


def time_matmul(
    a: Float[Tensor, " m k"], b: Float[Tensor, " k n"], warmup: int = 3, iters: int = 10
) -> float:
    """Mean seconds of one ``a @ b``, after ``warmup`` untimed calls, over ``iters`` timed calls.

    Warm-up pays for one-off costs (kernel selection, cuBLAS workspace, caches). CUDA kernels run
    asynchronously: a host clock read right after ``a @ b`` measures only the launch. So on CUDA,
    synchronise before starting, then time with CUDA events recorded on the stream around the
    calls and wait for the last one; on CPU, ``time.perf_counter`` around the calls is right.
    Exactly ``warmup + iters`` matmuls run (the tests count them).

    Raises:
        ValueError: if the tensors are on different devices, ``warmup`` is not a non-negative
            integer or ``iters`` not a positive one, naming which: "iters must be a positive
            integer, got 0".
    """
    # BEGIN SOLUTION
    if a.device != b.device:
        raise ValueError(f"a and b must be on the same device, got {a.device} and {b.device}")
    check_count(warmup=warmup)
    check_positive_int(iters=iters)
    for _ in range(warmup):
        a @ b
    if a.device.type == "cuda":
        torch.cuda.synchronize(a.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            a @ b
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000 / iters
    start_time = time.perf_counter()
    for _ in range(iters):
        a @ b
    return (time.perf_counter() - start_time) / iters
    # END SOLUTION


def matmul_throughput(
    n: int,
    dtype: torch.dtype,
    device: torch.device | str,
    warmup: int = 3,
    iters: int = 10,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """Time an ``n x n @ n x n`` matmul of ``dtype`` on ``device``: ``(seconds, FLOP/s)``."""
    a = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
    seconds = time_matmul(a, b, warmup=warmup, iters=iters)
    return seconds, matmul_flops(n, n, n) / seconds
