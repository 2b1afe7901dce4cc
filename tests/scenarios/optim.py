"""Scenarios of part 3: an optimizer driven over a seeded noisy quadratic, and what it leaves behind.

The plain functions (``trajectory``, ``state_placement``, ``closure_run``, ``resumed_by_state_dict``)
take an optimizer class and plain inputs, run it, and return what they observed: the parameters at
chosen steps, the optimizer's final state, what ``step()`` did to ``.grad`` and to the parameters'
memory. A test calls them with ``torch.optim``'s class (the reference) and calls the ``@driver`` of
the same name prefixed ``student_`` for yours: it looks your class up by name (``"adam"``) and runs
the same function beside your code (one round trip in grading, see ``tests/boundary.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

import adapters
from tests.boundary import driver, plain_data

#: Your optimizers, by the names the tests use.
OPTIMIZERS = {
    "sgd": adapters.get_sgd_cls,
    "adagrad": adapters.get_adagrad_cls,
    "rmsprop": adapters.get_rmsprop_cls,
    "adam": adapters.get_adam_cls,
    "adamw": adapters.get_adamw_cls,
}

SHAPES: dict[str, tuple[int, ...]] = {"weight": (5, 3), "bias": (3,)}


def as_data(value: Any) -> Any:
    """``value`` as a driver may return it: a tensor detached (a copy), a number, string or None as it
    is, anything else by its type's name (``"<list>"``), which no claim about a tensor accepts."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"<{type(value).__name__}>"


@plain_data
@dataclass
class Problem:
    """A seeded noisy quadratic: grad(p) = curvature * (p - target) + noise[t]."""

    init: dict[str, torch.Tensor]
    target: dict[str, torch.Tensor]
    curvature: dict[str, torch.Tensor]
    noise: dict[str, torch.Tensor]  # (steps, *shape)

    @classmethod
    def make(
        cls, seed: int, steps: int, dtype: torch.dtype, shapes: dict[str, tuple[int, ...]] = SHAPES
    ) -> Problem:
        g = torch.Generator().manual_seed(seed)

        def draw(fn, *size):
            return {
                k: fn((*size, *s), generator=g, dtype=torch.float64).to(dtype)
                for k, s in shapes.items()
            }

        init, target = draw(torch.randn), draw(torch.randn)
        curvature = {k: 0.1 + 2 * v for k, v in draw(torch.rand).items()}
        noise = draw(torch.randn, steps)
        return cls(init, target, curvature, noise)

    def params(self) -> dict[str, torch.Tensor]:
        return {k: v.clone().requires_grad_() for k, v in self.init.items()}

    def set_grads(
        self,
        params: dict[str, torch.Tensor],
        t: int,
        skip: frozenset[str] = frozenset(),
        accumulate: bool = False,
    ) -> None:
        """Give each parameter (but those in ``skip``) its gradient at step ``t``: a new ``.grad``
        tensor, or, with ``accumulate``, added into the existing one, as ``backward()`` does."""
        for k, p in params.items():
            if k in skip:
                continue
            grad = self.curvature[k] * (p.detach() - self.target[k]) + self.noise[k][t]
            if accumulate and p.grad is not None:
                p.grad.add_(grad)
            else:
                p.grad = grad


@plain_data
@dataclass
class Trajectory:
    """What one run leaves to compare: the parameters after chosen steps, and the final state."""

    params: dict[int, dict[str, torch.Tensor]]
    """step -> parameter name -> its value after that step."""
    state: dict[str, dict[str, Any]]
    """parameter name -> ``optimizer.state[parameter]`` after the last step, each value ``as_data``."""
    grad_changed: list[tuple[int, str]] = field(default_factory=list)
    """(step, parameter name) for each step() that changed the parameter's ``.grad`` (if watched)."""
    moved: list[tuple[int, str]] = field(default_factory=list)
    """(step, parameter name) for each step() after which the parameter's data lives elsewhere (if watched)."""

    @property
    def final(self) -> dict[str, torch.Tensor]:
        """The parameters after the last step."""
        return self.params[max(self.params)]


def build(
    cls: type[torch.optim.Optimizer],
    params: dict[str, torch.Tensor],
    kwargs: dict,
    groups: list[dict] | None,
):
    """``cls(params, **kwargs)``; ``groups`` (``[{"params": [names], **options}]``) makes param groups."""
    if groups is None:
        return cls(list(params.values()), **kwargs)
    return cls([{**grp, "params": [params[n] for n in grp["params"]]} for grp in groups], **kwargs)


def trajectory(
    cls: type[torch.optim.Optimizer],
    problem: Problem,
    kwargs: dict,
    steps: int,
    checkpoints: set[int],
    groups: list[dict] | None = None,
    no_grad: frozenset[str] = frozenset(),
    zero_grad_in_place: bool = False,
    lr_schedule: list[float] | None = None,
    first_grad: dict[str, int] | None = None,
    watch: bool = False,
) -> Trajectory:
    """Run ``cls`` for ``steps`` steps on ``problem``; keep the parameters after each step in ``checkpoints``.

    At step t every parameter not named in ``no_grad`` gets the gradient of the problem at its own
    current value (the others keep ``.grad`` None); a parameter named in ``first_grad`` gets none
    before step ``first_grad[name]`` (counted from 0: a layer unfrozen mid-run). With ``zero_grad_in_place``, each step starts
    with ``optimizer.zero_grad(set_to_none=False)`` and the gradient is added into the zeroed
    ``.grad`` tensor (a training loop's ``zero_grad`` then ``backward``), so ``.grad`` is the same
    tensor at every step. ``lr_schedule[t]`` multiplies each group's initial ``lr`` before step t
    (as ``torch.optim.lr_scheduler.LambdaLR`` sets ``group["lr"]``). The last step is always kept.
    With ``watch``, every step also records whether it changed a ``.grad`` or moved a parameter's data.
    """
    params = problem.params()
    opt = build(cls, params, kwargs, groups)
    base_lrs = [group["lr"] for group in opt.param_groups]
    seen: dict[int, dict[str, torch.Tensor]] = {}
    grad_changed: list[tuple[int, str]] = []
    moved: list[tuple[int, str]] = []
    for t in range(steps):
        if zero_grad_in_place:
            opt.zero_grad(set_to_none=False)
        late = {k for k, first in (first_grad or {}).items() if t < first}
        problem.set_grads(params, t, no_grad | late, accumulate=zero_grad_in_place)
        if lr_schedule is not None:
            for group, base in zip(opt.param_groups, base_lrs, strict=True):
                group["lr"] = base * lr_schedule[t]
        if not watch:
            opt.step()
        else:
            grads = {k: p.grad.clone() for k, p in params.items() if p.grad is not None}
            where = {k: p.data_ptr() for k, p in params.items()}
            opt.step()
            for k, p in params.items():
                if k in grads and (p.grad is None or not torch.equal(p.grad, grads[k])):
                    grad_changed.append((t + 1, k))
                if p.data_ptr() != where[k]:
                    moved.append((t + 1, k))
        if t + 1 in checkpoints or t + 1 == steps:
            seen[t + 1] = {k: p.detach().clone() for k, p in params.items()}
    state = {k: {key: as_data(v) for key, v in opt.state[p].items()} for k, p in params.items()}
    return Trajectory(seen, state, grad_changed, moved)


@driver
def student_trajectory(
    name: str, problem: Problem, kwargs: dict, steps: int, checkpoints: set[int], **driving: Any
) -> Trajectory:
    """Runs ``trajectory`` (same arguments, ``driving`` its keywords) with your optimizer ``name``
    (``"adam"``); returns its Trajectory."""
    return trajectory(OPTIMIZERS[name](), problem, kwargs, steps, checkpoints, **driving)


#: A state entry described as data: a tensor by (dtype, device type, shape), anything else by its type's name.
Placement = tuple[torch.dtype, str, tuple[int, ...]] | str


def state_placement(
    cls: type[torch.optim.Optimizer],
    kwargs: dict,
    shapes: dict[str, tuple[int, ...]],
    dtype: torch.dtype,
    device: str,
    steps: int = 2,
) -> tuple[dict[str, dict[str, Placement]], str | None]:
    """Run ``cls`` ``steps`` steps on parameters of ``shapes`` created on ``device`` in ``dtype``
    (random values and gradients: only where things live matters); describe each parameter's state.

    Returns (parameter name -> state key -> its placement, the error a ``step()`` raised or None):
    a step that fails on state of the wrong dtype or device (``lerp_`` of a float64 gradient into
    a float32 buffer) still leaves the state it created to describe. On ``device="meta"`` tensors
    have a shape and a dtype but no memory, so the values are meaningless and any machine can run it.
    """
    g = torch.Generator().manual_seed(0)

    def draw(shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)

    params = {k: draw(s).requires_grad_() for k, s in shapes.items()}
    opt = cls(list(params.values()), **kwargs)
    error = None
    for _ in range(steps):
        for p in params.values():
            p.grad = draw(tuple(p.shape))
        try:
            opt.step()
        except NotImplementedError:  # not written yet: reported as such, not as a placement problem
            raise
        except Exception as e:  # noqa: BLE001  (reported with the placements, which say why)
            error = f"{type(e).__name__}: {e}"
            break
    placements = {
        k: {
            key: (v.dtype, v.device.type, tuple(v.shape))
            if isinstance(v, torch.Tensor)
            else type(v).__name__
            for key, v in opt.state[p].items()
        }
        for k, p in params.items()
    }
    return placements, error


@driver
def student_state_placement(
    name: str,
    kwargs: dict,
    shapes: dict[str, tuple[int, ...]],
    dtype: torch.dtype,
    device: str,
    steps: int = 2,
) -> tuple[dict[str, dict[str, Placement]], str | None]:
    """Runs ``state_placement`` with your optimizer ``name``; returns its placements and error."""
    return state_placement(OPTIMIZERS[name](), kwargs, shapes, dtype, device, steps)


@plain_data
@dataclass
class ClosureRun:
    """What ``step(closure)`` did: the parameter after the last step, what each call of ``step``
    returned (``as_data``), and, per call of the closure, whether gradients were enabled in it."""

    param: torch.Tensor
    returned: list[Any]
    grad_enabled: list[bool]


def closure_run(
    cls: type[torch.optim.Optimizer], kwargs: dict, target: torch.Tensor, steps: int
) -> ClosureRun:
    """Minimise |p - target|^2 from p = 0 with ``step(closure)`` under ``torch.no_grad()``.

    The closure zeroes the gradients, computes the loss and, where gradients are enabled (as
    ``step`` must enable them), backpropagates it; it records whether they were.
    """
    p = torch.zeros_like(target, requires_grad=True)
    opt = cls([p], **kwargs)
    grad_enabled: list[bool] = []

    def closure():
        grad_enabled.append(torch.is_grad_enabled())
        opt.zero_grad()
        loss = (p - target).pow(2).sum()
        if loss.requires_grad:
            loss.backward()
        return loss

    with torch.no_grad():
        returned = [as_data(opt.step(closure)) for _ in range(steps)]
    return ClosureRun(p.detach().clone(), returned, grad_enabled)


@driver
def student_closure_run(name: str, kwargs: dict, target: torch.Tensor, steps: int) -> ClosureRun:
    """Runs ``closure_run`` with your optimizer ``name``; returns its ClosureRun."""
    return closure_run(OPTIMIZERS[name](), kwargs, target, steps)


def resumed_by_state_dict(
    cls: type[torch.optim.Optimizer], problem: Problem, kwargs: dict, split: int, steps: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``cls`` run ``steps`` steps straight, and run ``split`` steps, then its ``state_dict()``
    loaded into a fresh optimizer over the same parameters for the rest.

    Returns the parameters of both runs: (straight, resumed).
    """
    straight, resumed = problem.params(), problem.params()
    opt = build(cls, straight, kwargs, None)
    for t in range(steps):
        problem.set_grads(straight, t)
        opt.step()
    opt_a = build(cls, resumed, kwargs, None)
    for t in range(split):
        problem.set_grads(resumed, t)
        opt_a.step()
    opt_b = build(cls, resumed, kwargs, None)
    opt_b.load_state_dict(opt_a.state_dict())
    for t in range(split, steps):
        problem.set_grads(resumed, t)
        opt_b.step()
    return (
        {k: v.detach().clone() for k, v in straight.items()},
        {k: v.detach().clone() for k, v in resumed.items()},
    )


@driver
def student_resumed_by_state_dict(
    name: str, problem: Problem, kwargs: dict, split: int, steps: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Runs ``resumed_by_state_dict`` with your optimizer ``name``; returns (straight, resumed)."""
    return resumed_by_state_dict(OPTIMIZERS[name](), problem, kwargs, split, steps)


@driver
def student_optimizer_built(name: str, kwargs: dict) -> None:
    """Builds your optimizer ``name`` over one (2,) parameter with ``kwargs`` (its errors propagate)."""
    OPTIMIZERS[name]()([torch.zeros(2, requires_grad=True)], **kwargs)
