"""Optimizers: SGD (with momentum), AdaGrad, RMSProp, Adam and AdamW, written from scratch.

(Corpus entry ``optim-functional``: written from the handout's docstrings. Every state tensor is
recomputed out of place and stored again in ``self.state[p]`` (``m = b1 * m + (1 - b1) * g``,
never ``m.mul_(...)``), the step count is a plain ``int``, the update is one ``p.sub_``, and a bad
hyperparameter is a ``ValueError`` subclass of this module's own.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

Params = Iterable[Tensor] | Iterable[dict[str, Any]]


def _evaluate(closure: Callable[[], Tensor] | None) -> Tensor | None:
    """Re-evaluate the loss with gradients enabled, as ``torch.optim`` does when given a closure."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class HyperparameterError(ValueError):
    """A hyperparameter outside its range."""


def _at_least_zero(**values: float) -> None:
    for name, value in values.items():
        if not value >= 0:  # NaN is out of range too
            raise HyperparameterError(f"{name} must be >= 0, got {name}={value!r}")


def _in_range(name: str, value: float, *, closed: bool = False) -> None:
    inside = 0 <= value <= 1 if closed else 0 <= value < 1
    if not inside:
        raise HyperparameterError(
            f"{name} must be in [0, 1{']' if closed else ')'}, got {name}={value!r}"
        )


def _with_gradients(optimizer: torch.optim.Optimizer):
    """(group, parameter, gradient, state) for every parameter that has a gradient."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                yield group, p, p.grad, optimizer.state[p]


def _squares(average: Tensor, weight: float, g: Tensor, scale: float) -> Tensor:
    """``weight * average + scale * g^2``, out of place, the square formed inside ``addcmul``."""
    return torch.addcmul(average * weight, g, g, value=scale)


class SGD(torch.optim.Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum and L2 weight decay."""

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        _at_least_zero(lr=lr, momentum=momentum, weight_decay=weight_decay)
        _in_range("dampening", dampening, closed=True)
        if nesterov and not (momentum > 0 and dampening == 0):
            raise HyperparameterError("nesterov=True needs momentum > 0 and dampening == 0")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        loss = _evaluate(closure)
        for group, p, g, state in _with_gradients(self):
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p
            mu = group["momentum"]
            if mu:
                previous = state.get("momentum_buffer")
                buffer = (
                    g.clone() if previous is None else mu * previous + (1 - group["dampening"]) * g
                )
                state["momentum_buffer"] = buffer
                g = g + mu * buffer if group["nesterov"] else buffer
            p.sub_(group["lr"] * g)
        return loss


class AdaGrad(torch.optim.Optimizer):
    """AdaGrad: divide each coordinate's step by the root of its accumulated squared gradients."""

    def __init__(
        self,
        params: Params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ) -> None:
        _at_least_zero(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        loss = _evaluate(closure)
        for group, p, g, state in _with_gradients(self):
            if not state:
                state["step"] = 0
                state["sum"] = torch.full_like(p, group["initial_accumulator_value"])
            state["step"] += 1
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p
            state["sum"] = _squares(state["sum"], 1.0, g, 1.0)
            rate = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
            p.sub_(rate * (g / (state["sum"].sqrt() + group["eps"])))
        return loss


class RMSProp(torch.optim.Optimizer):
    """RMSProp: AdaGrad with an exponential moving average of squared gradients instead of a sum."""

    def __init__(
        self,
        params: Params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
    ) -> None:
        _at_least_zero(lr=lr, eps=eps, weight_decay=weight_decay, momentum=momentum)
        _in_range("alpha", alpha)
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        loss = _evaluate(closure)
        for group, p, g, state in _with_gradients(self):
            if not state:
                state["step"] = 0
                state["square_avg"] = torch.zeros_like(p)
                if group["momentum"] > 0:
                    state["momentum_buffer"] = torch.zeros_like(p)
            state["step"] += 1
            if group["weight_decay"]:
                g = g + group["weight_decay"] * p
            alpha = group["alpha"]
            state["square_avg"] = _squares(state["square_avg"], alpha, g, 1 - alpha)
            update = g / (state["square_avg"].sqrt() + group["eps"])
            if group["momentum"] > 0:
                update = group["momentum"] * state["momentum_buffer"] + update
                state["momentum_buffer"] = update
            p.sub_(group["lr"] * update)
        return loss


class Adam(torch.optim.Optimizer):
    """Adam: bias-corrected first and second moments of the gradient (``AdamW``: decoupled decay)."""

    decoupled_weight_decay = False

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        _at_least_zero(lr=lr, eps=eps, weight_decay=weight_decay)
        for i, beta in enumerate(betas):
            _in_range(f"betas[{i}]", beta)
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        loss = _evaluate(closure)
        for group, p, g, state in _with_gradients(self):
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
            state["step"] += 1
            t, lr, wd = state["step"], group["lr"], group["weight_decay"]
            b1, b2 = group["betas"]
            if self.decoupled_weight_decay:
                p.sub_(lr * wd * p)
            elif wd:
                g = g + wd * p
            state["exp_avg"] = b1 * state["exp_avg"] + (1 - b1) * g
            state["exp_avg_sq"] = _squares(state["exp_avg_sq"], b2, g, 1 - b2)
            denominator = state["exp_avg_sq"].sqrt() / math.sqrt(1 - b2**t) + group["eps"]
            p.sub_((lr / (1 - b1**t)) * (state["exp_avg"] / denominator))
        return loss


class AdamW(Adam):
    """AdamW: Adam with *decoupled* weight decay (Loshchilov & Hutter), the LLM default."""

    decoupled_weight_decay = True

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
