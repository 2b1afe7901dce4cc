"""Scenarios of part 8, precision: your mixed-precision step and your loss scaler, driven over steps.

The ``student_...`` functions are drivers (``tests/boundary.py``): each builds what your code needs
from plain data (torch's model, optimizer and loss for your ``mixed_precision_step``; a chain of
linear layers and torch's optimizers for your ``DynamicLossScaler``), runs your code over the
steps, and returns what each step did as plain data. ``scaler_run``, ``step_results`` and ``clean_steps`` are plain
functions of a scaler class: the drivers call them with yours, the tests with ``torch.amp.GradScaler``,
and compare. ``student_fp8_matmul_ops`` logs the aten ops your ``fp8_matmul`` ran.
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
from tests.boundary import driver, plain_data

LOSSES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "cross_entropy": F.cross_entropy,
    "mse": F.mse_loss,
}
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adamw": torch.optim.AdamW,
}


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


@driver
def student_fp8_matmul_ops(
    a: Tensor, b: Tensor, granularity: str, out_dtype: torch.dtype
) -> tuple[Tensor, list[str]]:
    """Your ``fp8_matmul(a, b, granularity, out_dtype)``, and the aten ops it ran, in order (``OpLog``)."""
    with OpLog() as log:
        out = adapters.run_fp8_matmul(a, b, granularity, out_dtype)
    return out, log.ops


# --------------------------------------------------------------------------------------------
# mixed_precision_step
# --------------------------------------------------------------------------------------------


@plain_data
@dataclass
class MixedStep:
    """What one step did: the loss it returned (detached here; ``loss_requires_grad`` and
    ``loss_grad_fn``, the class name of its ``grad_fn``, say whether yours was), the dtypes of the
    Linear layers' outputs during its forward, and each parameter after the step and its gradient
    (None if it has none), by name."""

    loss: Tensor
    linear_output_dtypes: list[torch.dtype]
    params: dict[str, Tensor]
    grads: dict[str, Tensor | None]
    loss_grad_fn: str | None = None
    loss_requires_grad: bool = False


def mlp_training_setup(
    sizes: Sequence[int],
    weights: dict[str, Tensor],
    param_dtype: torch.dtype,
    optimizer: str,
    optimizer_kwargs: dict[str, Any],
    loss: str,
) -> tuple[nn.Sequential, torch.optim.Optimizer, Callable[[Tensor, Tensor], Tensor]]:
    """``mlp(sizes)`` loaded with ``weights`` (on their device, cast to ``param_dtype``), torch's
    ``OPTIMIZERS[optimizer]`` over its parameters and the loss function ``LOSSES[loss]``. (fp32
    matmuls are true fp32: TF32 is off by default, ``torch.backends.cuda.matmul.allow_tf32``.)"""
    device = next(iter(weights.values())).device
    model = mlp(sizes).to(device)
    model.load_state_dict(weights)
    model.to(param_dtype)
    return model, OPTIMIZERS[optimizer](model.parameters(), **optimizer_kwargs), LOSSES[loss]


def _detached(value: Any) -> Any:
    """A tensor without its autograd history (anything else as it is)."""
    return value.detach() if isinstance(value, Tensor) else value


@driver
def student_mixed_precision_steps(
    sizes: Sequence[int],
    weights: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    *,
    loss: str,
    dtype: torch.dtype,
    optimizer: str,
    optimizer_kwargs: dict[str, Any],
    steps: int = 1,
    param_dtype: torch.dtype = torch.float32,
) -> list[MixedStep]:
    """Call your ``mixed_precision_step(model, optimizer, (x, y), LOSSES[loss], dtype)`` ``steps``
    times on ``mlp_training_setup``'s model, optimizer and loss; return what each step did.

    The dtype of each Linear layer's output is recorded by a forward hook, the parameters and
    gradients are read after each step.
    """
    model, opt, loss_fn = mlp_training_setup(
        sizes, weights, param_dtype, optimizer, optimizer_kwargs, loss
    )
    seen: list[torch.dtype] = []

    def record(_module: Any, _inputs: Any, out: Tensor) -> None:
        seen.append(out.dtype)

    for i in range(len(sizes) - 1):  # the Linear layers
        model[2 * i].register_forward_hook(record)
    records = []
    for _ in range(steps):
        seen.clear()
        out = adapters.run_mixed_precision_step(model, opt, x, y, loss_fn, dtype)
        grad_fn = getattr(out, "grad_fn", None)
        named = list(model.named_parameters())
        records.append(
            MixedStep(
                loss=_detached(out),
                linear_output_dtypes=list(seen),
                params={name: p.detach().clone() for name, p in named},
                grads={
                    name: None if p.grad is None else p.grad.detach().clone() for name, p in named
                },
                loss_grad_fn=None if grad_fn is None else type(grad_fn).__name__,
                loss_requires_grad=bool(getattr(out, "requires_grad", False)),
            )
        )
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


def student_loss_scaler(**kwargs: Any) -> Any:
    """Your ``DynamicLossScaler(**kwargs)`` (called in the drivers below, beside your code)."""
    return adapters.get_loss_scaler_cls()(**kwargs)


def torch_optimizer(
    name: str, params: Sequence[Tensor], kwargs: dict[str, Any]
) -> torch.optim.Optimizer:
    """torch's ``OPTIMIZERS[name]`` over ``params`` (not yours: those are graded in part 3)."""
    return OPTIMIZERS[name](params, **kwargs)


def scaler_run(
    make_scaler: Callable[..., Any], kwargs: dict[str, Any], run: ScalerRun
) -> tuple[list[float], list[Tensor]]:
    """Train as ``run`` says with ``make_scaler(**kwargs)``; return the scale after each ``update()``
    and all the parameters (flattened, concatenated) after each step."""
    scaler = make_scaler(**kwargs)
    layers = []
    for (d_in, d_out), weights in zip(pairwise(run.sizes), run.weights, strict=True):
        layer = nn.Linear(d_in, d_out)
        layer.load_state_dict(weights)
        layers.append(layer.to(run.param_dtype))
    model = nn.Sequential(*layers)
    params = [
        [p for i in indices for p in layers[i].parameters()] for _, indices, _ in run.optimizers
    ]
    optimizers = [
        torch_optimizer(name, ps, opt_kwargs)
        for (name, _, opt_kwargs), ps in zip(run.optimizers, params, strict=True)
    ]
    g = torch.Generator().manual_seed(run.seed)
    scales, trained = [], []
    for step in range(run.steps):
        x, y = (
            torch.randn(run.batch, run.sizes[0], generator=g),
            torch.randn(run.batch, run.sizes[-1], generator=g),
        )
        loss = F.mse_loss(model(x.to(run.param_dtype)).float(), y)
        scaler.scale(loss).backward()
        if step in run.inject:
            at, name, index, value = run.inject[step]
            getattr(layers[at], name).grad[index] = value
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


@driver
def student_scaler_run(kwargs: dict[str, Any], run: ScalerRun) -> tuple[list[float], list[Tensor]]:
    """``scaler_run`` with your ``DynamicLossScaler``."""
    return scaler_run(student_loss_scaler, kwargs, run)


class NumberedSGD(torch.optim.SGD):
    """torch's SGD whose ``step()`` returns how many steps it has taken: a value a loss scaler's
    ``step(optimizer)`` hands back (torch's own optimizers return None without a closure)."""

    def __init__(self, params: Sequence[Tensor], lr: float) -> None:
        super().__init__(params, lr=lr)
        self.taken = 0

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        super().step(closure)
        self.taken += 1
        return self.taken


def step_results(make_scaler: Callable[..., Any], infs: list[bool]) -> list[Any]:
    """What ``make_scaler().step(optimizer)`` returned at each step, over one weight under
    ``NumberedSGD`` (lr 0), the gradient inf where ``infs`` says (else 0), ``update()`` after each."""
    scaler = make_scaler()
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = NumberedSGD([weight], lr=0.0)
    scaler.scale(torch.ones(()))  # GradScaler sets its scale up on the first scale()
    returned = []
    for inf in infs:
        weight.grad = torch.full((2,), float("inf") if inf else 0.0)
        returned.append(scaler.step(optimizer))
        scaler.update()
    return returned


@driver
def student_step_results(infs: list[bool]) -> list[Any]:
    """``step_results`` with your ``DynamicLossScaler``."""
    return step_results(student_loss_scaler, infs)


def clean_steps(
    make_scaler: Callable[..., Any], kwargs: dict[str, Any], steps: int, read_after: set[int]
) -> dict[int, float]:
    """``steps`` clean steps of ``make_scaler(**kwargs)`` (a zero gradient, SGD with lr=0): step, update;
    the scale after each step in ``read_after``. The gradient is set once (no backward), and stays 0
    when unscaled (no slow subnormals)."""
    scaler = make_scaler(**kwargs)
    weight = torch.nn.Parameter(torch.ones(2))
    weight.grad = torch.zeros(2)
    optimizer = torch_optimizer("sgd", [weight], {"lr": 0.0})
    scaler.scale(torch.ones(()))  # GradScaler sets its scale up on the first scale()
    scales = {}
    for i in range(steps):
        scaler.step(optimizer)
        scaler.update()
        if i in read_after:
            scales[i] = scaler.get_scale()
    return scales


@driver
def student_clean_steps(
    kwargs: dict[str, Any], steps: int, read_after: set[int]
) -> dict[int, float]:
    """``clean_steps`` with your ``DynamicLossScaler``."""
    return clean_steps(student_loss_scaler, kwargs, steps, read_after)


@driver
def student_scaled_losses(
    kwargs: dict[str, Any], losses: list[Tensor]
) -> tuple[float, list[Tensor]]:
    """Your ``DynamicLossScaler(**kwargs)``: its ``get_scale()``, then ``scale(loss)`` of each loss."""
    scaler = student_loss_scaler(**kwargs)
    scale = scaler.get_scale()
    return scale, [_detached(scaler.scale(loss)) for loss in losses]


@plain_data
@dataclass(frozen=True)
class Raised:
    """An exception your code raised: its class's name, the names of the builtin exception classes
    it is an instance of (``("RuntimeError", "Exception", "BaseException")``), and its message."""

    name: str
    bases: tuple[str, ...]
    message: str

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


@driver
def student_scaler_calls(
    kwargs: dict[str, Any], calls: list[str], param: Tensor, grad: Tensor, lr: float
) -> tuple[list[Raised | None], Tensor]:
    """Make your ``DynamicLossScaler(**kwargs)`` and a parameter ``param`` whose gradient is ``grad``, stepped
    by torch's SGD with ``lr``; call the scaler's methods named in ``calls`` in turn (``"update"``, or
    ``"unscale_"``/``"step"`` of that optimizer). Return what each call raised (None: nothing; a stub's
    NotImplementedError goes through) and the parameter afterwards."""
    scaler = student_loss_scaler(**kwargs)
    p = torch.nn.Parameter(param.clone())
    p.grad = grad.clone()
    optimizer = torch_optimizer("sgd", [p], {"lr": lr})
    outcomes: list[Raised | None] = []
    for call in calls:
        try:
            if call == "update":
                scaler.update()
            elif call == "unscale_":
                scaler.unscale_(optimizer)
            else:
                scaler.step(optimizer)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - what your code raised is the observation
            bases = tuple(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")
            outcomes.append(Raised(type(e).__name__, bases, str(e)))
        else:
            outcomes.append(None)
    return outcomes, p.detach().clone()
