"""Number formats and mixed precision: what bf16, fp16 and fp8 can hold, and how training copes.

Five pieces, in the order the lecture builds them, one module each:

    formats.py        dtype_info: bits, range and resolution of fp32, fp16, bf16 and the two fp8s
    fp8.py            to_fp8 / from_fp8: scale a tensor into fp8's range (per tensor or per row)
    scaled_matmul.py  fp8_matmul: two scaled fp8 operands through torch._scaled_mm
    mixed.py          mixed_precision_step: low-precision compute, fp32 master weights and loss
    loss_scaling.py   DynamicLossScaler: fp16 gradients kept in range, as torch.amp.GradScaler does

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: torch dtypes and finfo, torch.autocast, torch._scaled_mm, torch tensors and autograd.
    Not allowed: torch.amp.GradScaler may not be used: keep the loss scale and make its decisions
        yourself; and, as in every part: torch.optim's optimizers, torch.nn.Linear or F.linear,
        FlopCounterMode or the profiler, tokenizer libraries, reaching the tests or the
        interpreter's insides.
"""

from cs336_assignment.precision.formats import FORMAT_BITS, dtype_info
from cs336_assignment.precision.fp8 import AMAX_FLOOR, FP8_DTYPES, GRANULARITIES, from_fp8, to_fp8
from cs336_assignment.precision.loss_scaling import DynamicLossScaler
from cs336_assignment.precision.mixed import mixed_precision_step
from cs336_assignment.precision.scaled_matmul import fp8_matmul

__all__ = [
    "AMAX_FLOOR",
    "FORMAT_BITS",
    "FP8_DTYPES",
    "GRANULARITIES",
    "DynamicLossScaler",
    "dtype_info",
    "fp8_matmul",
    "from_fp8",
    "mixed_precision_step",
    "to_fp8",
]
