"""Float formats: a format's range and resolution follow from its exponent and mantissa bits alone.

``FORMAT_BITS`` holds the two bit counts of each format, and ``dtype_info`` derives the rest from
them (``eps = 2**-mantissa_bits``, ``smallest_normal = 2**(1 - bias)``): the same numbers
``torch.finfo`` reports, but computed, so that bf16 (8/7: fp32's range, less precision), fp16 (5/10:
more precision, far less range) and the two fp8 formats can be compared from first principles.

>>> dtype_info(torch.float8_e4m3fn)["max"], dtype_info(torch.float8_e5m2)["max"]
(448.0, 57344.0)

Deliberately left out: float64, integer formats, the ``fnuz`` fp8 variants and MX's ``e8m0``
scale format (``dtype_info`` rejects them), and rounding itself (what a cast does to the bits
between two representable numbers).
"""

from __future__ import annotations

from typing import Any

import torch

# (exponent bits, mantissa bits) of each format; a sign bit comes on top.
FORMAT_BITS: dict[torch.dtype, tuple[int, int]] = {
    torch.float32: (8, 23),
    torch.float16: (5, 10),
    torch.bfloat16: (8, 7),
    torch.float8_e4m3fn: (4, 3),
    torch.float8_e5m2: (5, 2),
}


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_info(dtype: torch.dtype) -> dict[str, float | int]:
    """Bits, range and resolution of a float format, derived from its exponent and mantissa bits.

    Returns a dict of seven keys: ``bits``, ``exponent_bits``, ``mantissa_bits`` (ints) and
    ``max``, ``smallest_normal``, ``smallest_subnormal``, ``eps`` (floats). With ``e`` exponent
    bits and ``m`` mantissa bits, the bias is ``2**(e - 1) - 1`` and::

        bits               = 1 + e + m
        eps                = 2**-m                   # gap between 1.0 and the next float
        smallest_normal    = 2**(1 - bias)           # exponent field 1, mantissa 0
        smallest_subnormal = 2**(1 - bias - m)       # exponent field 0, mantissa ...001
        max                = (2 - 2**-m) * 2**(2**e - 2 - bias)    # IEEE: all-ones exponent is inf/NaN

    ``float8_e4m3fn`` ("finite, NaN") has no infinities: the all-ones exponent holds ordinary numbers
    and only the all-ones mantissa there is NaN, so ``max = (2 - 2**-(m - 1)) * 2**(2**e - 1 - bias)``
    = 1.75 * 2**8 = 448.

    >>> dtype_info(torch.bfloat16)["eps"], dtype_info(torch.float16)["max"]
    (0.0078125, 65504.0)

    The values agree with ``torch.finfo`` (whose ``tiny`` is ``smallest_normal``). Supported: float32,
    float16, bfloat16, float8_e4m3fn, float8_e5m2; anything else is a ValueError.

    Raises:
        ValueError: for any other dtype (float64, int32, float8_e4m3fnuz, a string such as
            ``"float16"``); the message names it and lists the supported formats: "dtype_info got
            torch.float64; supported formats are float32, float16, bfloat16, float8_e4m3fn,
            float8_e5m2".
    """
    # BEGIN SOLUTION
    if dtype not in FORMAT_BITS:
        supported = ", ".join(_dtype_name(d) for d in FORMAT_BITS)
        raise ValueError(f"dtype_info got {dtype!r}; supported formats are {supported}")
    e, m = FORMAT_BITS[dtype]
    bias = 2 ** (e - 1) - 1
    if dtype == torch.float8_e4m3fn:
        largest = (2.0 - 2.0 ** -(m - 1)) * 2.0 ** (2**e - 1 - bias)
    else:
        largest = (2.0 - 2.0**-m) * 2.0 ** (2**e - 2 - bias)
    return {
        "bits": 1 + e + m,
        "exponent_bits": e,
        "mantissa_bits": m,
        "max": largest,
        "smallest_normal": 2.0 ** (1 - bias),
        "smallest_subnormal": 2.0 ** (1 - bias - m),
        "eps": 2.0**-m,
    }
    # END SOLUTION
