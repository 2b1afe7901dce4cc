"""The loss scaler: fp16's small range makes gradients underflow; scaling the loss shifts them back
into range, and the scale adapts (halve on overflow, double after a run of clean steps), exactly
as ``torch.amp.GradScaler`` does.

Deliberately left out: saving the scaler in a checkpoint (GradScaler's ``state_dict``), and bf16,
whose range is fp32's, so its gradients need no scaling.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from cs336_assignment.validation import check_positive, check_positive_int


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

    With several optimizers, each ``step(optimizer)`` checks that optimizer's own gradients: an inf
    in one skips only its step, while ``update()`` backs off if any of them saw one.
    ``S`` is kept as an fp32 number and ``1 / S`` is rounded to fp32, as GradScaler does.
    Usage, as with GradScaler::

        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    Gradients must be fp32 (fp32 master weights); unscaling fp16 gradients is a ValueError.

    Raises:
        ValueError: from ``__init__``, for a hyperparameter out of range, naming it:
            "init_scale must be a positive number, got 0.0" and "growth_interval must be a positive
            integer, got 0" (``validation.check_positive``, ``check_positive_int``), "growth_factor
            must be > 1.0", "backoff_factor must be in (0, 1)".
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
        check_positive(init_scale=init_scale)
        if not growth_factor > 1.0:
            raise ValueError(
                f"growth_factor must be > 1.0 (the scale grows after clean steps), got {growth_factor}"
            )
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(
                f"backoff_factor must be in (0, 1) (the scale shrinks on overflow), got {backoff_factor}"
            )
        check_positive_int(growth_interval=growth_interval)
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self._scale = _fp32(init_scale)
        self._growth_tracker = 0
        # id(optimizer) -> {"unscaled": bool, "stepped": bool, "found_inf": bool} since the last update()
        self._per_optimizer: dict[int, dict[str, bool]] = {}
        # END SOLUTION

    def scale(self, loss: Tensor) -> Tensor:
        """Return ``loss * S`` (S as an fp32 tensor on the loss's device).

        The product is on the loss's device and keeps its graph. Its dtype is torch's promotion of
        the two: a 0-d fp16 or bf16 loss (the usual) times the 0-d fp32 S comes back fp32, so a half
        loss whose product with S would overflow fp16 (3.0 * 2**16 > 65504) does not.
        """
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
