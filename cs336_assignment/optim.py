"""Optimizers: SGD (with momentum), AdaGrad, RMSProp, Adam and AdamW, written from scratch.

Each class is a ``torch.optim.Optimizer`` subclass that takes torch's keyword names and defaults,
keeps its per-parameter state under torch's names (``step``, ``momentum_buffer``, ``sum``,
``square_avg``, ``exp_avg``, ``exp_avg_sq``), and performs the same update as its ``torch.optim``
counterpart, so torch is the oracle: the tests run both side by side for 1000 steps.

Notation, for one parameter tensor ``p`` with gradient ``g`` at step ``t = 1, 2, ...``
(all operations elementwise)::

    SGD       p -= lr * g
    momentum  b = mu * b + g;                          p -= lr * b
    AdaGrad   G += g^2;                                p -= lr * g / (sqrt(G) + eps)
    RMSProp   v = alpha * v + (1 - alpha) * g^2;       p -= lr * g / (sqrt(v) + eps)
    Adam      m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
              p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

State memory, counted in tensors of the parameter's shape: SGD 0 (1 with momentum), AdaGrad 1,
RMSProp 1 (2 with momentum), Adam and AdamW 2. With fp32 state, Adam therefore needs
``4 + 4 = 8`` bytes of state per parameter, on top of the parameter and its gradient (4 + 4):
16 bytes per parameter in all, the figure ``accounting/memory.py`` uses for AdamW in fp32.

What every class implements (the tests hold each one to its ``torch.optim`` counterpart):

- ``__init__`` validates the hyperparameters *before* anything else (see the class's Raises),
  then calls ``super().__init__(params, defaults)`` with ``defaults`` a dict of every
  hyperparameter under torch's keyword name. ``torch.optim.Optimizer`` then builds
  ``self.param_groups``, where a group's own options override the defaults.
- ``step(closure=None)`` starts with ``loss = _evaluate(closure)`` (the helper above: the closure
  is called once per step, with gradients enabled even under ``torch.no_grad()``), reads each
  hyperparameter from the parameter's group at every step (not from ``__init__``'s arguments:
  a learning-rate scheduler changes ``group["lr"]`` between steps), skips
  parameters whose ``grad`` is None, creates a parameter's state lazily at its first step, under
  torch's names (its step count ``t`` is its own, ``state["step"]``: a parameter whose gradients
  start late, a layer unfrozen mid-run, starts at ``t = 1``; one that never had a gradient is not
  touched, weight decay included), and returns ``loss`` (the closure's value, or None). Everything a step needs from earlier steps lives in ``self.state[p]`` (no attributes or
  dicts of your own), so ``optimizer.state_dict()`` / ``load_state_dict()`` work unchanged and a
  run resumed from a checkpoint continues bit for bit.
- State tensors are made like the parameter (``torch.zeros_like(p)``): its shape, dtype and
  device, a 0-d or an empty parameter's included (``torch.zeros(*p.shape)`` fails on a 0-d one,
  and ``torch.zeros(p.shape)`` is fp32 on the CPU whatever ``p`` is).
- Numeric edges: ``eps`` is added *after* the square root, exactly where each class's formula
  puts it, so an all-zero gradient gives a zero step (``0 / (0 + eps)``, never ``0/0 = NaN``) and a
  tiny one (``|g| ~ 1e-9``, where ``sqrt(v)`` is comparable with ``eps``) the same step as torch's.
  A squared gradient is formed inside the update, ``v.mul_(beta).addcmul_(g, g, value=1 - beta)``,
  as torch does: ``addcmul_`` computes ``(1 - beta) * g * g`` before rounding to the state's dtype,
  whereas ``g * g`` or ``g ** 2`` alone is ``inf`` in float16 for ``|g| > 256`` (float16's largest
  value is 65504). For the same reason Adam takes ``sqrt(v_hat)`` as ``sqrt(v) / sqrt(1 - b2^t)``:
  at ``t = 1``, ``v / (1 - b2)`` is ``g^2`` itself and overflows float16 just the same.
- ``step`` updates each parameter in place (``p.add_``, ``p.addcdiv_``, never ``p.data = ...``),
  so it keeps its memory; it reads ``p.grad`` but never writes into it (``grad.add(p, alpha=wd)``,
  not ``grad.add_``: the caller may still use the gradient); and the state keeps no reference to
  ``p.grad``: a buffer that starts as the gradient starts as a copy (``grad.clone()``), because
  ``zero_grad(set_to_none=False)`` zeroes ``p.grad`` in place and the next ``backward()``
  accumulates into that same tensor.
- A hyperparameter error is a ``ValueError`` whose message names the keyword and its value the
  way the reference writes it, ``f"{name}={value!r}"``: ``"lr must be >= 0, got lr=-0.1"``,
  ``"betas[1] must be in [0, 1), got betas[1]=1.5"``. NaN is out of every range (``not nan >= 0``).
  ``cs336_assignment/validation.py`` has the two checks that word them so: ``check_nonnegative``
  and ``check_unit_interval``.

Deliberately left out (torch has them, these do not): ``maximize``, ``amsgrad``, centered
RMSProp, sparse gradients, complex parameters, tensor-valued learning rates, and the
``foreach``/``fused`` multi-tensor kernels (the loops below visit one tensor at a time, which is
the readable version and the one torch itself runs on CPU).

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: torch tensors and autograd, torch.optim.Optimizer as the base class (param_groups,
        state, state_dict).
    Not allowed: torch.optim's optimizers (torch.optim.SGD, Adagrad, RMSprop, Adam, AdamW, ...,
        their functional forms and their fused kernels such as torch._fused_adamw_) may not be used
        or subclassed: write each update yourself on a torch.optim.Optimizer subclass
        (torch._foreach_* tensor ops are fine); and, as in every part: torch.nn.Linear or F.linear,
        FlopCounterMode or the profiler, tokenizer libraries, torch.amp.GradScaler, reaching the
        tests or the interpreter's insides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from cs336_assignment.validation import check_nonnegative, check_unit_interval

Params = Iterable[Tensor] | Iterable[dict[str, Any]]


def _evaluate(closure: Callable[[], Tensor] | None) -> Tensor | None:
    """Re-evaluate the loss with gradients enabled, as ``torch.optim`` does when given a closure."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class SGD(torch.optim.Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum and L2 weight decay.

    For each parameter ``p`` with gradient ``g`` (``torch.optim.SGD``'s update)::

        g = g + weight_decay * p
        if momentum != 0:
            b = g.clone()                               at the first step (a copy, not p.grad)
            b = momentum * b + (1 - dampening) * g      afterwards
            g = g + momentum * b   if nesterov else   b
        p = p - lr * g

    State memory: none without momentum; one tensor (``momentum_buffer``) with momentum.

    Raises:
        ValueError: if ``lr``, ``momentum`` or ``weight_decay`` is negative or NaN, naming the
            keyword and its value: "lr must be >= 0, got lr=-0.1" (NaN: "got momentum=nan").
        ValueError: if ``dampening`` is outside ``[0, 1]`` or NaN: "dampening must be in [0, 1],
            got dampening=1.5" (NaN: "got dampening=nan").
        ValueError: if ``nesterov`` is requested without momentum or with dampening; the message
            names ``nesterov``: "nesterov=True needs momentum > 0 and dampening == 0".
    """

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        # BEGIN SOLUTION
        check_nonnegative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if not 0.0 <= dampening <= 1.0:
            raise ValueError(f"dampening must be in [0, 1], got dampening={dampening!r}")
        if nesterov and (momentum <= 0.0 or dampening != 0.0):
            raise ValueError(
                f"nesterov=True needs momentum > 0 and dampening == 0, got momentum={momentum!r}, "
                f"dampening={dampening!r}"
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
        )
        super().__init__(params, defaults)
        # END SOLUTION

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        # BEGIN SOLUTION
        loss = _evaluate(closure)
        for group in self.param_groups:
            lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
            weight_decay, nesterov = group["weight_decay"], group["nesterov"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                if momentum != 0:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        buf = state["momentum_buffer"] = grad.detach().clone()
                    else:
                        buf = state["momentum_buffer"]
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                p.add_(grad, alpha=-lr)
        return loss
        # END SOLUTION


class AdaGrad(torch.optim.Optimizer):
    """AdaGrad: divide each coordinate's step by the root of its accumulated squared gradients.

    For each parameter ``p`` with gradient ``g`` at step ``t = 1, 2, ...`` (``torch.optim.Adagrad``)::

        G = initial_accumulator_value                   before the first step
        g = g + weight_decay * p
        G = G + g^2
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(G) + eps)

    ``eps`` is added *after* the square root. Coordinates with large past gradients take small
    steps; the step size only ever shrinks, which is why AdaGrad stalls on long runs.

    State memory: one tensor (``sum``, the accumulator ``G``), plus the integer ``step``.

    Raises:
        ValueError: if ``lr``, ``lr_decay``, ``weight_decay``, ``initial_accumulator_value`` or
            ``eps`` is negative or NaN, naming the keyword and its value: "lr_decay must be >= 0,
            got lr_decay=-0.5" (NaN: "got lr_decay=nan").
    """

    def __init__(
        self,
        params: Params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ) -> None:
        # BEGIN SOLUTION
        check_nonnegative(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        super().__init__(params, defaults)
        # END SOLUTION

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        # BEGIN SOLUTION
        loss = _evaluate(closure)
        for group in self.param_groups:
            lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["sum"] = torch.full_like(p, group["initial_accumulator_value"])
                state["step"] += 1
                grad = p.grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                clr = lr / (1 + (state["step"] - 1) * lr_decay)
                state["sum"].addcmul_(grad, grad, value=1)
                std = state["sum"].sqrt().add_(eps)
                p.addcdiv_(grad, std, value=-clr)
        return loss
        # END SOLUTION


class RMSProp(torch.optim.Optimizer):
    """RMSProp: AdaGrad with an exponential moving average of squared gradients instead of a sum.

    For each parameter ``p`` with gradient ``g`` (``torch.optim.RMSprop``, not centered)::

        v = 0, b = 0                                    before the first step
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g^2
        u = g / (sqrt(v) + eps)                         eps added *after* the square root
        if momentum > 0:  b = momentum * b + u;  u = b
        p = p - lr * u

    Because old gradients decay (``alpha = 0.99`` remembers about the last 100 steps), the step
    size can grow again, unlike AdaGrad's.

    State memory: one tensor (``square_avg``), two with momentum (plus ``momentum_buffer``),
    plus the integer ``step``.

    Raises:
        ValueError: if ``lr``, ``eps``, ``weight_decay`` or ``momentum`` is negative or NaN,
            naming the keyword and its value: "eps must be >= 0, got eps=-1e-08" (NaN: "got
            momentum=nan").
        ValueError: if ``alpha`` is outside ``[0, 1)`` (or NaN): "alpha must be in [0, 1), got
            alpha=1.0" (NaN: "got alpha=nan").
    """

    def __init__(
        self,
        params: Params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
    ) -> None:
        # BEGIN SOLUTION
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay, momentum=momentum)
        check_unit_interval("alpha", alpha)
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        super().__init__(params, defaults)
        # END SOLUTION

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        # BEGIN SOLUTION
        loss = _evaluate(closure)
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            weight_decay, momentum = group["weight_decay"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["square_avg"] = torch.zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = torch.zeros_like(p)
                state["step"] += 1
                grad = p.grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg = state["square_avg"]
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                avg = square_avg.sqrt().add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    p.add_(buf, alpha=-lr)
                else:
                    p.addcdiv_(grad, avg, value=-lr)
        return loss
        # END SOLUTION


class Adam(torch.optim.Optimizer):
    """Adam: momentum on the gradient (first moment) and RMSProp on its square (second moment),
    both bias-corrected for their zero initialisation.

    For each parameter ``p`` with gradient ``g`` at step ``t = 1, 2, ...`` (``torch.optim.Adam``;
    ``b1, b2 = betas``)::

        m = 0, v = 0                                    before the first step
        g = g + weight_decay * p                        L2 penalty, coupled to the gradient
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g^2
        m_hat = m / (1 - b1^t)
        v_hat = v / (1 - b2^t)
        p = p - lr * m_hat / (sqrt(v_hat) + eps)

    In code, ``sqrt(v_hat)`` is ``sqrt(v) / sqrt(1 - b2^t)`` (torch's order): dividing ``v`` first
    gives ``g^2`` at ``t = 1``, which overflows float16 for ``|g| > 256``.

    Without the bias correction the first steps would be ``1 - b1 = 0.1`` times too small in
    ``m`` and use a ``sqrt(1 - b2) ~ 0.03`` times too small ``sqrt(v)``.

    State memory: two tensors (``exp_avg`` = ``m``, ``exp_avg_sq`` = ``v``), plus the integer
    ``step``: 8 bytes of state per fp32 parameter (16 with the parameter and its gradient).

    Raises:
        ValueError: if ``lr``, ``eps`` or ``weight_decay`` is negative or NaN, naming the keyword
            and its value: "weight_decay must be >= 0, got weight_decay=-0.01" (NaN: "got lr=nan").
        ValueError: if either of ``betas`` is outside ``[0, 1)`` (or NaN), naming which beta and
            its value: "betas[1] must be in [0, 1), got betas[1]=1.5" (NaN: "got betas[0]=nan").

    ``AdamW`` below reuses this class with ``decoupled_weight_decay = True``: when that flag is
    set, ``step`` applies AdamW's decoupled decay instead of the L2 penalty.
    """

    decoupled_weight_decay = False

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        # BEGIN SOLUTION
        check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got betas={betas!r}")
        check_unit_interval("betas[0]", betas[0])
        check_unit_interval("betas[1]", betas[1])
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        # END SOLUTION

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:  # type: ignore[override]
        """Update every parameter that has a gradient; parameters whose ``grad`` is None are skipped."""
        # BEGIN SOLUTION
        loss = _evaluate(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                grad = p.grad
                if weight_decay != 0:
                    if self.decoupled_weight_decay:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)  # m = b1 * m + (1 - b1) * g, as torch writes it
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1**t)
                denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
        return loss
        # END SOLUTION


class AdamW(Adam):
    """AdamW: Adam with *decoupled* weight decay (Loshchilov & Hutter), the LLM default.

    Identical to ``Adam`` except that weight decay shrinks the parameter directly, before the Adam
    update, instead of being added to the gradient (``torch.optim.AdamW``)::

        p = p - lr * weight_decay * p                   decoupled: not divided by sqrt(v_hat)
        m, v, m_hat, v_hat as in Adam (with the raw gradient g)
        p = p - lr * m_hat / (sqrt(v_hat) + eps)

    With Adam's coupled L2 penalty the decay is rescaled per coordinate by ``1 / sqrt(v_hat)``,
    so weights with large gradients are barely regularised; decoupling decays every weight at
    the same rate ``lr * weight_decay``. Note the default ``weight_decay=1e-2`` (Adam's is 0).

    State memory: two tensors (``exp_avg``, ``exp_avg_sq``), plus the integer ``step``.

    Raises:
        ValueError: exactly as ``Adam``: if ``lr``, ``eps`` or ``weight_decay`` is negative or NaN
            ("lr must be >= 0, got lr=-0.001"; NaN: "got eps=nan").
        ValueError: exactly as ``Adam``: if either of ``betas`` is outside ``[0, 1)`` or NaN
            ("betas[0] must be in [0, 1), got betas[0]=1.2"; NaN: "got betas[1]=nan").
    """

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
