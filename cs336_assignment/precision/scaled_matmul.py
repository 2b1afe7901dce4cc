"""Scaled matmul: two scaled fp8 operands meet in ``torch._scaled_mm``, which multiplies on fp8
tensor cores, accumulates in fp32 and applies the two scales on the way out.

Why ``torch._scaled_mm`` and not the public ``torch.nn.functional.scaled_mm``: the public API is
new (torch 2.15 has it) and its scaling-recipe enum has already been renamed once (``Tensorwise``
became ``TensorWise``), while ``torch._scaled_mm(a, b, scale_a=..., scale_b=..., out_dtype=...)`` is
the call torchao and the fp8 recipes use. In torch 2.15 it also runs on CPU, with per-tensor and
per-row scales, so the same call, with the same layout and scales, is tested on a laptop and on an
H100; no fp32 emulation path is needed.

Deliberately left out: fp8 weights/gradients in a full training loop (torchao's ``Float8Linear``
does that); the quantisation of the operands is ``fp8.py``'s ``to_fp8``.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from cs336_assignment.precision.fp8 import GRANULARITIES, to_fp8


def fp8_matmul(
    a: Float[Tensor, " M K"],
    b: Float[Tensor, " K N"],
    granularity: str = "tensor",
    out_dtype: torch.dtype = torch.bfloat16,
) -> Float[Tensor, " M N"]:
    """``a @ b`` with both operands in float8_e4m3fn, through ``torch._scaled_mm``.

    The layout rules of the fp8 tensor-core kernels (cuBLASLt), honoured here so the same call runs
    on CPU and on an H100:

    - A is row-major (M, K) and B is column-major (K, N): both are stored with K contiguous, so B
      is quantised as the row-major matrix b^T of shape (N, K) and passed as its transpose view;
    - K and N are multiples of 16 (M may be anything, 1 included: a single row stays a (1, N) product);
    - scales are fp32: per tensor, two 0-dim scales; per row ("row"), A gets one scale per row,
      shape (M, 1), and B one per column, shape (1, N), i.e. amax is always taken along K.

    ``_scaled_mm`` accumulates in fp32 and returns ``(a_fp8 * scale_a) @ (b_fp8 * scale_b)`` in
    ``out_dtype``. The product is that one call, on the fp8 operands with both scales, returned as
    is: never a matmul of dequantised copies (``from_fp8(a_fp8, scale_a) @ ...``), which gives the
    same numbers on a CPU but runs no fp8 kernel, and never scales applied to its output afterwards
    (the kernel applies them to its fp32 accumulator before the one rounding to ``out_dtype``). So
    the result equals ``torch._scaled_mm`` on the ``to_fp8`` operands bit for bit. With 3 mantissa bits each operand carries a relative error up to 2**-4 = 6.25%,
    but the errors are independent, so over a sum of K products they average out: for random normal
    inputs the relative error of the product is about 3-4%.

    >>> fp8_matmul(torch.ones(16, 32), torch.ones(32, 16))[0, 0].item()
    32.0

    Raises:
        ValueError: for a ``granularity`` other than "tensor" or "row", naming it: "fp8_matmul
            got granularity='block'; use 'tensor' or 'row'".
        ValueError: if an operand is not 2-D, naming both shapes: "fp8_matmul needs 2-D
            operands, got a of shape (4, 16, 16) and b of shape (16, 16)".
        ValueError: if the inner dimensions differ: "fp8_matmul: inner dimensions differ, a is
            8x32 but b is 16x16".
        ValueError: if K or N is not a multiple of 16: "fp8_matmul needs K and N to be
            multiples of 16 (fp8 tensor-core layout), got K=24, N=16".
        ValueError: if ``out_dtype`` is not bfloat16, float16 or float32, naming ``out_dtype``:
            "fp8_matmul: out_dtype must be bfloat16, float16 or float32, got torch.float8_e4m3fn".
        ValueError: if ``a`` and ``b`` are on different devices.
        ValueError: if an operand is not a high-precision float tensor (as ``to_fp8``, which
            quantises them): "to_fp8 needs a high-precision float tensor, got dtype torch.int64".
    """
    # BEGIN SOLUTION
    if granularity not in GRANULARITIES:
        raise ValueError(f"fp8_matmul got granularity={granularity!r}; use 'tensor' or 'row'")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(
            f"fp8_matmul needs 2-D operands, got a of shape {tuple(a.shape)} and b of shape "
            f"{tuple(b.shape)}; flatten the leading dimensions of a into M first"
        )
    (m, k), (k_b, n) = a.shape, b.shape
    if k != k_b:
        raise ValueError(f"fp8_matmul: inner dimensions differ, a is {m}x{k} but b is {k_b}x{n}")
    if k % 16 or n % 16:
        raise ValueError(
            f"fp8_matmul needs K and N to be multiples of 16 (fp8 tensor-core layout), got K={k}, "
            f"N={n}; pad the operands with zeros"
        )
    if out_dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(
            f"fp8_matmul: out_dtype must be bfloat16, float16 or float32, got {out_dtype!r}"
        )
    if a.device != b.device:
        raise ValueError(f"fp8_matmul: a is on {a.device} but b is on {b.device}")
    # A: (M, K) row-major, scale () or (M, 1).  b^T: (N, K) row-major, scale () or (N, 1).
    a_fp8, scale_a = to_fp8(a, torch.float8_e4m3fn, granularity)
    bt_fp8, scale_bt = to_fp8(b.t(), torch.float8_e4m3fn, granularity)
    b_fp8 = bt_fp8.t()  # (K, N) column-major
    scale_b = scale_bt.t() if granularity == "row" else scale_bt  # () or (1, N)
    return torch._scaled_mm(a_fp8, b_fp8, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
    # END SOLUTION
