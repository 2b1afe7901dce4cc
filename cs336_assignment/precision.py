"""Number formats and mixed precision: what bf16, fp16 and fp8 can hold, and how training copes.

Five pieces, in the order the lecture builds them:

1. ``dtype_info``: the range and resolution of a float format follow from its exponent and
   mantissa bits alone (``eps = 2**-mantissa_bits``, ``smallest_normal = 2**(1 - bias)``).
2. ``to_fp8`` / ``from_fp8``: fp8 has so little range that every tensor is *scaled* into it:
   ``scale = amax / fp8_max`` and ``x ≈ x_fp8.float() * scale`` (per tensor, or per row).
3. ``fp8_matmul``: two scaled fp8 operands meet in ``torch._scaled_mm``, which multiplies on fp8
   tensor cores, accumulates in fp32 and applies the two scales on the way out.
4. ``mixed_precision_step``: bf16 compute under autocast, fp32 master weights, gradients and loss.
5. ``DynamicLossScaler``: fp16's small range makes gradients underflow; scaling the loss shifts them
   back into range, and the scale adapts (halve on overflow, double after a run of clean steps),
   exactly as ``torch.amp.GradScaler`` does.

Why ``torch._scaled_mm`` and not the public ``torch.nn.functional.scaled_mm``: the public API is
new (torch 2.15 has it) and its scaling-recipe enum has already been renamed once (``Tensorwise``
became ``TensorWise``), while ``torch._scaled_mm(a, b, scale_a=..., scale_b=..., out_dtype=...)`` is
the call torchao and the fp8 recipes use. In torch 2.15 it also runs on CPU, with per-tensor and
per-row scales, so the same call, with the same layout and scales, is tested on a laptop and on an
H100; no fp32 emulation path is needed.

Deliberately left out: delayed scaling with an amax history (pass a stale ``scale`` to ``to_fp8`` to
see what it risks), block-wise and MX scaling, fp8 weights/gradients in a full training loop
(torchao's ``Float8Linear`` does that), stochastic rounding, and low-precision communication.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

# (exponent bits, mantissa bits) of each format; a sign bit comes on top.
FORMAT_BITS: dict[torch.dtype, tuple[int, int]] = {
    torch.float32: (8, 23),
    torch.float16: (5, 10),
    torch.bfloat16: (8, 7),
    torch.float8_e4m3fn: (4, 3),
    torch.float8_e5m2: (5, 2),
}
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
GRANULARITIES = ("tensor", "row")

# An all-zero tensor has amax 0; flooring amax keeps the scale positive and finite (zeros stay zeros).
AMAX_FLOOR = 1e-12


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
    fp8_max = dtype_info(dtype)["max"]
    if scale is None:
        if granularity == "tensor":
            amax = x32.abs().amax()
        else:
            amax = x32.abs().amax(dim=-1, keepdim=True)
        scale = amax.clamp(min=AMAX_FLOOR) / fp8_max
    else:
        scale = scale.float().to(x32.device)
        expected = () if granularity == "tensor" else (x.shape[0], 1)
        if scale.numel() != (1 if granularity == "tensor" else x.shape[0]):
            raise ValueError(
                f"to_fp8(granularity={granularity!r}) needs a scale of shape {expected}, "
                f"got {tuple(scale.shape)}"
            )
        scale = scale.reshape(expected)
        _check_scale(scale, "to_fp8")
    x_fp8 = (x32 / scale).clamp(-fp8_max, fp8_max).to(dtype)
    return x_fp8, scale
    # END SOLUTION


def from_fp8(
    x_fp8: Tensor, scale: Float[Tensor, "..."], dtype: torch.dtype = torch.float32
) -> Tensor:
    """Decode an fp8 tensor: ``x = x_fp8.float() * scale``, returned in ``dtype``.

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
    - K and N are multiples of 16;
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


def mixed_precision_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: tuple[Tensor, Tensor],
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    dtype: torch.dtype = torch.bfloat16,
) -> Float[Tensor, ""]:
    """One training step with low-precision compute and fp32 everything else; returns the loss.

    ::

        zero the gradients
        with autocast(model's device type, dtype):    # matmuls run in bf16, reductions stay fp32
            out = model(x)
        loss = loss_fn(out.float(), y)                 # the loss in fp32, outside autocast
        loss.backward()                                # gradients arrive in fp32 (params are fp32)
        optimizer.step()                               # updates the fp32 master weights
        return loss.detach()                           # no graph: a caller may keep every loss

    The parameters stay fp32 ("master weights"): autocast casts a bf16 copy for each matmul, so an
    update far smaller than the weight (``lr * g < w * 2**-8``) is not rounded away as it would be
    in bf16 weights. The gradients are left on the parameters after the step for inspection; each
    step zeroes them first, so they are this batch's alone. The loss is returned detached: a loop
    that keeps every step's loss (to plot it) must not keep every step's graph and activations.

    ``dtype`` is bfloat16 or float16; float16 has bf16's precision advantage but a far smaller range,
    so real fp16 training also needs a ``DynamicLossScaler``.

    Raises:
        ValueError: if ``dtype`` is neither, naming both allowed dtypes: "mixed_precision_step:
            dtype must be torch.bfloat16 or torch.float16, got torch.float32".
        ValueError: if the model has no parameters.
        ValueError: if a parameter is not fp32, since the step needs fp32 master weights:
            "mixed_precision_step needs fp32 master weights, found parameters in
            ['torch.bfloat16']".
    """
    # BEGIN SOLUTION
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(
            f"mixed_precision_step: dtype must be torch.bfloat16 or torch.float16, got {dtype!r}"
        )
    params = list(model.parameters())
    if not params:
        raise ValueError("mixed_precision_step: the model has no parameters to train")
    low = sorted({str(p.dtype) for p in params if p.dtype != torch.float32})
    if low:
        raise ValueError(
            f"mixed_precision_step needs fp32 master weights, found parameters in {low}; "
            "keep the model in fp32 (model.float()) and let autocast cast the copies"
        )
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=params[0].device.type, dtype=dtype):
        out = model(x)
    loss = loss_fn(out.float(), y)
    loss.backward()
    optimizer.step()
    return loss.detach()
    # END SOLUTION


class DynamicLossScaler:
    """Dynamic loss scaling for fp16 training, making the same decisions as ``torch.amp.GradScaler``.

    fp16 gradients below 2**-24 flush to zero. Multiplying the loss by ``S`` multiplies every
    gradient by ``S`` (chain rule), lifting them into range; dividing by ``S`` before the optimizer
    step undoes it. Too large an ``S`` overflows to inf, so ``S`` adapts::

        scale(loss)     -> loss * S
        step(optimizer) -> g <- g / S for every gradient (checked for inf/NaN first);
                           optimizer.step() only if every gradient was finite, else skip the step
        update()        -> if an inf/NaN was found:  S <- S * backoff_factor,  tracker <- 0
                           else: tracker += 1, and when tracker == growth_interval:
                                 S <- S * growth_factor (unless that overflows fp32), tracker <- 0

    ``S`` is kept as an fp32 number and ``1 / S`` is rounded to fp32, as GradScaler does.
    Usage, as with GradScaler::

        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    Gradients must be fp32 (fp32 master weights); unscaling fp16 gradients is a ValueError.

    Raises:
        ValueError: from ``__init__``, for a hyperparameter out of range, naming it:
            "init_scale must be a finite positive number, got 0.0", "growth_factor must be > 1.0",
            "backoff_factor must be in (0, 1)", "growth_interval must be a positive int, got 0".
        ValueError: from ``unscale_`` (and so ``step``), if a gradient is fp16: "Attempting to
            unscale fp16 gradients: keep fp32 master weights (model.float())".
        RuntimeError: on misuse, as GradScaler: ``unscale_`` twice or after ``step`` before the
            next ``update``, ``step`` twice, ``update`` before any ``step``.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        # BEGIN SOLUTION
        if not (0.0 < init_scale < float("inf")):
            raise ValueError(f"init_scale must be a finite positive number, got {init_scale}")
        if not growth_factor > 1.0:
            raise ValueError(
                f"growth_factor must be > 1.0 (the scale grows after clean steps), got {growth_factor}"
            )
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(
                f"backoff_factor must be in (0, 1) (the scale shrinks on overflow), got {backoff_factor}"
            )
        if not (isinstance(growth_interval, int) and growth_interval > 0):
            raise ValueError(f"growth_interval must be a positive int, got {growth_interval!r}")
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self._scale = _fp32(init_scale)
        self._growth_tracker = 0
        # id(optimizer) -> {"unscaled": bool, "stepped": bool, "found_inf": bool} since the last update()
        self._per_optimizer: dict[int, dict[str, bool]] = {}
        # END SOLUTION

    def scale(self, loss: Tensor) -> Tensor:
        """Return ``loss * S`` (S as an fp32 tensor on the loss's device)."""
        # BEGIN SOLUTION
        return loss * torch.tensor(self._scale, dtype=torch.float32, device=loss.device)
        # END SOLUTION

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the optimizer's gradients by S in place and record whether any was inf/NaN.

        Call it explicitly before clipping gradients; ``step`` calls it otherwise.
        """
        # BEGIN SOLUTION
        state = self._per_optimizer.setdefault(
            id(optimizer), {"unscaled": False, "stepped": False, "found_inf": False}
        )
        if state["unscaled"]:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()"
            )
        if state["stepped"]:
            raise RuntimeError("unscale_() is being called after step()")
        grads = [
            p.grad
            for group in optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        if any(g.dtype == torch.float16 for g in grads):
            raise ValueError(
                "Attempting to unscale fp16 gradients: keep fp32 master weights (model.float()) "
                "and compute in fp16 under autocast"
            )
        found_inf = False
        for g in grads:
            found_inf = found_inf or not bool(torch.isfinite(g).all())
            g.mul_(torch.tensor(1.0 / self._scale, dtype=torch.float32, device=g.device))
        state["unscaled"] = True
        state["found_inf"] = found_inf
        # END SOLUTION

    def step(self, optimizer: torch.optim.Optimizer) -> Any:
        """Unscale (unless done already) and run ``optimizer.step()`` unless a gradient was inf/NaN.

        Returns what ``optimizer.step()`` returned, or None when the step was skipped.
        """
        # BEGIN SOLUTION
        state = self._per_optimizer.get(id(optimizer))
        if state is not None and state["stepped"]:
            raise RuntimeError("step() has already been called since the last update()")
        if state is None or not state["unscaled"]:
            self.unscale_(optimizer)
            state = self._per_optimizer[id(optimizer)]
        state["stepped"] = True
        if state["found_inf"]:
            return None
        return optimizer.step()
        # END SOLUTION

    def update(self) -> None:
        """Adapt S from the inf checks since the last update (see the class docstring)."""
        # BEGIN SOLUTION
        if not self._per_optimizer:
            raise RuntimeError(
                "No inf checks were recorded prior to update(); call step(optimizer) first"
            )
        found_inf = any(state["found_inf"] for state in self._per_optimizer.values())
        if found_inf:
            self._scale = _fp32(self._scale * self.backoff_factor)
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self.growth_interval:
                grown = _fp32(self._scale * self.growth_factor)
                if grown != float("inf"):  # never grow past fp32's range
                    self._scale = grown
                self._growth_tracker = 0
        self._per_optimizer = {}
        # END SOLUTION

    def get_scale(self) -> float:
        """The current scale S, as a Python float."""
        # BEGIN SOLUTION
        return self._scale
        # END SOLUTION


def _fp32(value: float) -> float:
    """Round a Python float to the nearest fp32 value (inf if it overflows), as a Python float."""
    return torch.tensor(value, dtype=torch.float32).item()
