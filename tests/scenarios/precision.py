"""Scenarios of part 8, precision: your mixed-precision step and your loss scaler, driven over steps.

``student_mixed_precision_steps`` takes steps with your ``mixed_precision_step`` on a small GELU MLP
built from given weights, recording what each step did. ``scaler_run`` trains a chain of linear
layers through a loss scaler as a ``ScalerRun`` describes, injecting inf/NaN into chosen gradients,
and records the scale and the parameters after every step; the tests run it with yours
(``student_scaler_run``) and with ``torch.amp.GradScaler`` and compare. Every loop runs in the test;
what your ``mixed_precision_step`` receives (torch's model, optimizer and loss, run under your
autocast) is made on your side by a builder (``mlp_training_setup``: the only ``@student_side``
function here; it builds and observes nothing, see ``tests/boundary.py``). The optimizers your scaler
steps are the test's (``torch_optimizer``): in grading your scaler uses them through a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

import adapters
from tests.boundary import plain_data, student_side

LOSSES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"cross_entropy": F.cross_entropy, "mse": F.mse_loss}
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}


@contextmanager
def no_tf32() -> Iterator[None]:
    """fp32 matmuls in true fp32 (TF32 keeps only 10 mantissa bits, which would blur the reference)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """nn.Linear layers sizes[0] -> ... -> sizes[-1] with a GELU between each two."""
    layers: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        if i:
            layers.append(nn.GELU())
        layers.append(nn.Linear(d_in, d_out))
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------------------
# fp8_matmul
# --------------------------------------------------------------------------------------------


class OpLog(TorchDispatchMode):
    """Record the name of every aten op run inside it (``"aten._scaled_mm"``, ``"aten.mm"``, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.ops.append(str(func._overloadpacket))
        return func(*args, **(kwargs or {}))


def student_fp8_matmul_ops(a: Tensor, b: Tensor, granularity: str, out_dtype: torch.dtype) -> tuple[Tensor, list[str]]:
    """Your ``fp8_matmul(a, b, granularity, out_dtype)``, and the aten ops it ran, in order (``OpLog``).

    Logs only in one process (``uv run pytest``): in grading your code runs in another process,
    where this mode cannot see it, so the test that uses it is not graded there (see its docstring).
    """
    with OpLog() as log:
        out = adapters.run_fp8_matmul(a, b, granularity, out_dtype)
    return out, log.ops


# --------------------------------------------------------------------------------------------
# mixed_precision_step
# --------------------------------------------------------------------------------------------


@plain_data
@dataclass
class MixedStep:
    """What one step did: the loss it returned, the dtypes of the Linear layers' outputs during its
    forward, each parameter after the step and its gradient (None if it has none), by name, and
    the class of the returned loss's ``grad_fn`` (None for a loss detached from its graph)."""

    loss: Tensor
    linear_output_dtypes: list[torch.dtype]
    params: dict[str, Tensor]
    grads: dict[str, Tensor | None]
    loss_grad_fn: str | None = None


@student_side
def mlp_training_setup(sizes: Sequence[int], weights: dict[str, Tensor], param_dtype: torch.dtype,
                       optimizer: str, optimizer_kwargs: dict[str, Any],
                       loss: str) -> tuple[nn.Sequential, torch.optim.Optimizer, Callable[[Tensor, Tensor], Tensor]]:
    """``mlp(sizes)`` loaded with ``weights`` (on their device, cast to ``param_dtype``), torch's
    ``OPTIMIZERS[optimizer]`` over its parameters and the loss function ``LOSSES[loss]``, made on your
    side (your step receives them as arguments). Builds, observes nothing. (fp32 matmuls there are
    true fp32: TF32 is off by default, ``torch.backends.cuda.matmul.allow_tf32``.)"""
    device = next(iter(weights.values())).device
    model = mlp(sizes).to(device)
    model.load_state_dict(weights)
    model.to(param_dtype)
    return model, OPTIMIZERS[optimizer](model.parameters(), **optimizer_kwargs), LOSSES[loss]


def student_mixed_precision_steps(
    sizes: Sequence[int], weights: dict[str, Tensor], x: Tensor, y: Tensor, *,
    loss: str, dtype: torch.dtype, optimizer: str, optimizer_kwargs: dict[str, Any], steps: int = 1,
    param_dtype: torch.dtype = torch.float32,
) -> list[MixedStep]:
    """Call your ``mixed_precision_step(model, optimizer, (x, y), LOSSES[loss], dtype)`` ``steps``
    times on ``mlp_training_setup``'s model, optimizer and loss; return what each step did.

    The dtype of each Linear layer's output is recorded by a forward hook of the test's own
    (called back from your side), the parameters and gradients are read back after each step.
    """
    model, opt, loss_fn = mlp_training_setup(sizes, weights, param_dtype, optimizer, optimizer_kwargs, loss)
    seen: list[torch.dtype] = []

    def record(_module: Any, _inputs: Any, out: Tensor) -> None:
        seen.append(out.dtype)

    hooks = [model[2 * i].register_forward_hook(record) for i in range(len(sizes) - 1)]  # the Linear layers
    records = []
    for _ in range(steps):
        seen.clear()
        out = adapters.run_mixed_precision_step(model, opt, x, y, loss_fn, dtype)
        grad_fn = getattr(out, "grad_fn", None)
        named = list(model.named_parameters())
        records.append(MixedStep(
            loss=out,
            linear_output_dtypes=list(seen),
            params={name: p.detach().clone() for name, p in named},
            grads={name: None if p.grad is None else p.grad.clone() for name, p in named},
            loss_grad_fn=None if grad_fn is None else type(grad_fn).__name__,
        ))
    for hook in hooks:
        hook.remove()
    return records


# --------------------------------------------------------------------------------------------
# DynamicLossScaler
# --------------------------------------------------------------------------------------------


@plain_data
@dataclass(frozen=True)
class ScalerRun:
    """A small training run through a loss scaler, described as data.

    The model is a chain of ``nn.Linear`` layers ``sizes[0] -> sizes[1] -> ...`` (no activation),
    starting from ``weights`` (one state dict per layer), held in ``param_dtype``. ``optimizers`` are
    (a name in ``OPTIMIZERS``, the indices of the layers it steps, its keyword arguments). Each of
    the ``steps`` draws ``x`` (``batch`` x sizes[0]) and ``y`` (``batch`` x sizes[-1]) from N(0, 1)
    with a generator seeded with ``seed``, then::

        scaler.scale(mse(model(x), y)).backward()
        inject[step] = (layer, "weight" or "bias", index, value): put value into that gradient
        clip = (i, max_norm): scaler.unscale_(optimizer i), clip its layers' gradient norm
        scaler.step(each optimizer); scaler.update(); zero every optimizer's gradients
    """

    sizes: tuple[int, ...]
    weights: tuple[dict[str, Tensor], ...]
    optimizers: tuple[tuple[str, tuple[int, ...], dict[str, Any]], ...]
    steps: int
    seed: int
    batch: int = 16
    inject: dict[int, tuple[int, str, tuple[int, ...], float]] = field(default_factory=dict)
    clip: tuple[int, float] | None = None
    param_dtype: torch.dtype = torch.float32


def torch_grad_scaler(**kwargs: Any) -> torch.amp.GradScaler:
    """The reference: ``torch.amp.GradScaler`` on the CPU."""
    return torch.amp.GradScaler("cpu", **kwargs)


def torch_optimizer(name: str, params: list[Tensor], kwargs: dict[str, Any]) -> torch.optim.Optimizer:
    """torch's ``OPTIMIZERS[name]`` over the test's ``params``. It stays the test's: in grading your scaler
    reads its ``param_groups`` and calls its ``step()`` through a stand-in (``tests/boundary.py``: ``stays_in_the_test``),
    so nothing on your side can change what the step does."""
    return OPTIMIZERS[name](params, **kwargs)


def scaled_backward(scaler: Any, loss: Tensor) -> None:
    """``scaler.scale(loss).backward()``, in two links of the chain rule: the scaler scales a leaf
    copy of the loss, whose gradient (the scale, as the scaler applied it) then flows on through
    the loss's own graph. The same gradients, bit for bit, whichever side of the line the scaler is on."""
    leaf = loss.detach().requires_grad_()
    scaler.scale(leaf).backward()
    loss.backward(leaf.grad)


def scaler_run(make_scaler: Callable[..., Any], kwargs: dict[str, Any], run: ScalerRun) -> tuple[list[float], list[Tensor]]:
    """Train as ``run`` says with ``make_scaler(**kwargs)``; return the scale after each ``update()``
    and all the parameters (flattened, concatenated) after each step.

    The model, the loop and the optimizers (``torch_optimizer``) are the test's.
    """
    scaler = make_scaler(**kwargs)
    layers = []
    for (d_in, d_out), weights in zip(pairwise(run.sizes), run.weights, strict=True):
        layer = nn.Linear(d_in, d_out)
        layer.load_state_dict(weights)
        layers.append(layer.to(run.param_dtype))
    model = nn.Sequential(*layers)
    params = [[p for i in indices for p in layers[i].parameters()] for _, indices, _ in run.optimizers]
    optimizers = [torch_optimizer(name, ps, opt_kwargs)
                  for (name, _, opt_kwargs), ps in zip(run.optimizers, params, strict=True)]
    g = torch.Generator().manual_seed(run.seed)
    scales, trained = [], []
    for step in range(run.steps):
        x, y = torch.randn(run.batch, run.sizes[0], generator=g), torch.randn(run.batch, run.sizes[-1], generator=g)
        loss = F.mse_loss(model(x.to(run.param_dtype)).float(), y)
        scaled_backward(scaler, loss)
        if step in run.inject:
            layer, name, index, value = run.inject[step]
            getattr(layers[layer], name).grad[index] = value
        if run.clip is not None:
            i, max_norm = run.clip
            scaler.unscale_(optimizers[i])
            torch.nn.utils.clip_grad_norm_(params[i], max_norm)
        for optimizer in optimizers:
            scaler.step(optimizer)
        scaler.update()
        for p in model.parameters():  # zero_grad(): every optimizer's gradients, set to None
            p.grad = None
        scales.append(scaler.get_scale())
        trained.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    return scales, trained


def student_scaler_run(kwargs: dict[str, Any], run: ScalerRun) -> tuple[list[float], list[Tensor]]:
    """``scaler_run`` with your ``DynamicLossScaler``, stepping the test's torch optimizers."""
    return scaler_run(adapters.get_loss_scaler_cls(), kwargs, run)
