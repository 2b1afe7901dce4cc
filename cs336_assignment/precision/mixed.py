"""The mixed-precision step: bf16 compute under autocast, fp32 master weights, gradients and loss.

``mixed_precision_step`` is one training step: autocast runs the matmuls in a bf16 (or fp16) copy
of the weights, while the weights the optimizer updates, their gradients and the loss stay fp32.

Deliberately left out: low-precision communication, and the loss scaling fp16 also needs
(``loss_scaling.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor


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
    A batch of one example is a batch like any other: the output keeps its batch dimension (no
    squeeze) and the loss is a 0-d fp32 tensor.

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
