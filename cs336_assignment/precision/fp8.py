"""fp8 casts: fp8 has so little range that every tensor is *scaled* into it.

``to_fp8`` / ``from_fp8``: ``scale = amax / fp8_max`` and ``x ≈ x_fp8.float() * scale`` (per
tensor, or per row). ``float8_e4m3fn`` (more mantissa) is the format of the forward pass,
``float8_e5m2`` (more range) that of gradients; ``GRANULARITIES`` names the two scale layouts, and
``AMAX_FLOOR`` keeps the scale of an all-zero tensor positive.

Deliberately left out: delayed scaling with an amax history (pass a stale ``scale`` to ``to_fp8`` to
see what it risks), block-wise and MX scaling, and stochastic rounding.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from cs336_assignment.precision.formats import FORMAT_BITS, dtype_info

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
GRANULARITIES = ("tensor", "row")

# An all-zero tensor has amax 0; flooring amax keeps the scale positive and finite (zeros stay zeros).
AMAX_FLOOR = 1e-12


def _check_fp8_dtype(dtype: Any, who: str) -> None:
    if dtype not in FP8_DTYPES:
        raise ValueError(
            f"{who} got dtype {dtype!r}; use torch.float8_e4m3fn (forward: more mantissa) or "
            "torch.float8_e5m2 (gradients: more range)"
        )


def _check_scale(scale: Tensor, who: str) -> None:
    if not torch.isfinite(scale).all() or not (scale > 0).all():
        bad = scale[~(torch.isfinite(scale) & (scale > 0))].flatten()[:3].tolist()
        raise ValueError(
            f"{who}: scale must be finite and positive, got values such as {bad}; "
            "recompute it from a finite amax (scale = amax / fp8_max)"
        )


def to_fp8(
    x: Float[Tensor, "..."],
    dtype: torch.dtype,
    granularity: str = "tensor",
    scale: Float[Tensor, "..."] | None = None,
) -> tuple[Tensor, Float[Tensor, "..."]]:
    """Scale ``x`` into the range of an fp8 format and cast: returns ``(x_fp8, scale)``.

    Decode convention (the scale ``torch._scaled_mm`` takes)::

        scale = max(amax, 1e-12) / fp8_max        # amax = max |x| over the tensor, or over each row
        x_fp8 = cast(clamp(x / scale, -fp8_max, fp8_max))
        x    ≈ x_fp8.float() * scale             # see from_fp8

    so the largest magnitude lands exactly on ``fp8_max`` (448 for e4m3fn, 57344 for e5m2) and every
    element keeps ``mantissa_bits`` bits of precision relative to ``scale`` (down to the subnormals).

    ``granularity="tensor"`` uses one scale (a 0-dim fp32 tensor); ``"row"`` needs a 2-D ``x`` of
    shape (rows, cols) and gives a scale per row, of shape (rows, 1), so one outlier row cannot
    crush the others into the subnormals.

    The scale is fp32 whatever the input's dtype (amax is taken of ``x.float()``), on ``x``'s device.
    The 1e-12 floor is on amax, not on the scale: an all-zero tensor (or row), or one whose amax is
    below 1e-12 (an fp32 subnormal, say), has scale exactly ``1e-12 / fp8_max``; any larger amax,
    however small or huge (up to fp32's max), gives exactly ``amax / fp8_max``.

    ``scale``: quantise with a given (possibly stale) scale instead of this tensor's amax, as
    delayed scaling does. Values then may exceed ``fp8_max``; the explicit clamp makes them
    saturate at ``±fp8_max`` instead of relying on the cast (e4m3fn saturates in recent torch,
    e5m2 overflows to inf, older versions gave NaN).

    Arithmetic is in fp32 (fp8 tensors support few ops on CPU). ``x_fp8`` is contiguous (row-major).
    ``x`` is only read: for an fp32 tensor ``x.float()`` is ``x`` itself, so scale it out of place.

    >>> x_fp8, scale = to_fp8(torch.tensor([[0.5, -448.0, 3.3], [1.0, 2.0, 0.0]]), torch.float8_e4m3fn)
    >>> scale.item(), x_fp8.float().tolist()      # 3.3 rounds to 3.25: 3 mantissa bits
    (1.0, [[0.5, -448.0, 3.25], [1.0, 2.0, 0.0]])
    >>> x_fp8, scale = to_fp8(torch.tensor([[0.5, -448.0, 3.3], [1.0, 2.0, 0.0]]), torch.float8_e4m3fn, "row")
    >>> x_fp8[1].float().tolist(), scale.shape   # row 1 has its own scale, 2 / 448
    ([224.0, 448.0, 0.0], torch.Size([2, 1]))

    Raises:
        ValueError: if ``dtype`` is not an fp8 format; the message names both:
            "to_fp8 got dtype torch.bfloat16; use torch.float8_e4m3fn ... or torch.float8_e5m2".
        ValueError: for a ``granularity`` other than "tensor" or "row", naming it: "to_fp8 got
            granularity='column'; use 'tensor' or 'row'".
        ValueError: if ``x`` is not a high-precision float tensor (integers, or already fp8):
            "to_fp8 needs a high-precision float tensor, got dtype torch.int64".
        ValueError: for ``granularity="row"`` on a tensor that is not 2-D: "to_fp8(granularity=
            'row') needs a 2-D tensor (rows, cols), got shape (2, 4, 16)".
        ValueError: if ``x`` contains inf or NaN (its scale would not be finite): "to_fp8 got a
            tensor containing inf or NaN".
        ValueError: if a given ``scale`` has the wrong number of elements for the granularity
            (one, or one per row), naming the scale and the shapes: "to_fp8(granularity='row')
            needs a scale of shape (4, 1), got (3, 1)".
        ValueError: if a given ``scale`` is not finite and positive: "to_fp8: scale must be
            finite and positive, got values such as [nan]".
    """
    # BEGIN SOLUTION
    _check_fp8_dtype(dtype, "to_fp8")
    if granularity not in GRANULARITIES:
        raise ValueError(f"to_fp8 got granularity={granularity!r}; use 'tensor' or 'row'")
    if not x.is_floating_point() or x.dtype in FP8_DTYPES:
        raise ValueError(f"to_fp8 needs a high-precision float tensor, got dtype {x.dtype}")
    if granularity == "row" and x.ndim != 2:
        raise ValueError(
            f"to_fp8(granularity='row') needs a 2-D tensor (rows, cols), got shape {tuple(x.shape)}; "
            "reshape it to 2-D first"
        )
    x32 = x.float().contiguous()
    if not torch.isfinite(x32).all():
        raise ValueError(
            "to_fp8 got a tensor containing inf or NaN, so its scale would not be finite; "
            "find where the overflow happened upstream"
        )
    if scale is not None:  # a given scale is checked with the other inputs, before any work
        scale = scale.float().to(x32.device)
        expected = () if granularity == "tensor" else (x.shape[0], 1)
        if scale.numel() != (1 if granularity == "tensor" else x.shape[0]):
            raise ValueError(
                f"to_fp8(granularity={granularity!r}) needs a scale of shape {expected}, "
                f"got {tuple(scale.shape)}"
            )
        scale = scale.reshape(expected)
        _check_scale(scale, "to_fp8")
    fp8_max = dtype_info(dtype)["max"]
    if scale is None:
        if granularity == "tensor":
            amax = x32.abs().amax()
        else:
            amax = x32.abs().amax(dim=-1, keepdim=True)
        scale = amax.clamp(min=AMAX_FLOOR) / fp8_max
    x_fp8 = (x32 / scale).clamp(-fp8_max, fp8_max).to(dtype)
    return x_fp8, scale
    # END SOLUTION


def from_fp8(
    x_fp8: Tensor, scale: Float[Tensor, "..."], dtype: torch.dtype = torch.float32
) -> Tensor:
    """Decode an fp8 tensor: ``x = x_fp8.float() * scale``, returned in ``dtype``.

    The product is taken in fp32 and rounded to ``dtype`` once, at the end (never multiplied in
    bf16 or fp16, which would round the scale first and the product again).

    ``scale`` is a 0-dim (per-tensor) scale or one that broadcasts against ``x_fp8`` (per row:
    (rows, 1); per column: (1, cols)); it must be finite and positive.

    Raises:
        ValueError: if ``x_fp8`` is not an fp8 tensor: "from_fp8 needs an fp8 tensor (from
            to_fp8), got dtype torch.float32".
        ValueError: if ``dtype`` is not float32, float16 or bfloat16.
        ValueError: if ``scale`` does not broadcast against ``x_fp8``, naming both shapes:
            "from_fp8: a scale of shape (3, 1) does not broadcast against x_fp8 of shape (4, 16)".
        ValueError: if ``scale`` is not finite and positive: "from_fp8: scale must be finite
            and positive, got values such as [inf]".
    """
    # BEGIN SOLUTION
    if x_fp8.dtype not in FP8_DTYPES:
        raise ValueError(f"from_fp8 needs an fp8 tensor (from to_fp8), got dtype {x_fp8.dtype}")
    if dtype not in FORMAT_BITS or dtype in FP8_DTYPES:
        raise ValueError(f"from_fp8 decodes to float32, float16 or bfloat16, got dtype {dtype!r}")
    broadcasts = scale.ndim <= x_fp8.ndim and all(
        s in (1, d) for s, d in zip(reversed(scale.shape), reversed(x_fp8.shape), strict=False)
    )
    if not broadcasts:
        raise ValueError(
            f"from_fp8: a scale of shape {tuple(scale.shape)} does not broadcast against x_fp8 of "
            f"shape {tuple(x_fp8.shape)}; pass the scale to_fp8 returned with it"
        )
    _check_scale(scale, "from_fp8")
    return (x_fp8.float() * scale.float()).to(dtype)
    # END SOLUTION
