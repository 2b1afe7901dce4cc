"""Scenarios of part 3: an optimizer driven over a seeded noisy quadratic, and what it leaves behind.

Each plain function takes an optimizer class (yours, or ``torch.optim``'s) and plain inputs, runs
it, and returns plain data: the parameters at chosen steps and the optimizer's final state. The
``student_...`` twins pick your class through ``adapters`` (and, in grading, run on your side of
the line; see ``tests/boundary.py``). ``tests/test_optim.py`` runs both and compares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import adapters
from tests.boundary import plain_data, student_side

#: Your optimizer classes, by the names the tests use.
STUDENT: dict[str, Callable[[], type[torch.optim.Optimizer]]] = {
    "sgd": adapters.get_sgd_cls,
    "adagrad": adapters.get_adagrad_cls,
    "rmsprop": adapters.get_rmsprop_cls,
    "adam": adapters.get_adam_cls,
    "adamw": adapters.get_adamw_cls,
}

SHAPES: dict[str, tuple[int, ...]] = {"weight": (5, 3), "bias": (3,)}


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
        self, params: dict[str, torch.Tensor], t: int, skip: frozenset[str] = frozenset()
    ) -> None:
        for k, p in params.items():
            if k not in skip:
                p.grad = self.curvature[k] * (p.detach() - self.target[k]) + self.noise[k][t]


@plain_data
@dataclass
class Trajectory:
    """What one run leaves to compare: the parameters after chosen steps, and the final state."""

    params: dict[
        int, dict[str, torch.Tensor]
    ]  # step -> parameter name -> its value after that step
    state: dict[
        str, dict[str, Any]
    ]  # parameter name -> optimizer.state[parameter] after the last step

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
) -> Trajectory:
    """Run ``cls`` for ``steps`` steps on ``problem``; keep the parameters after each step in ``checkpoints``.

    At step t every parameter not named in ``no_grad`` gets the gradient of the problem at its own
    current value (the others keep ``.grad`` None). The last step is always kept.
    """
    params = problem.params()
    opt = build(cls, params, kwargs, groups)
    seen: dict[int, dict[str, torch.Tensor]] = {}
    for t in range(steps):
        problem.set_grads(params, t, no_grad)
        opt.step()
        if t + 1 in checkpoints or t + 1 == steps:
            seen[t + 1] = {k: p.detach().clone() for k, p in params.items()}
    return Trajectory(seen, {k: dict(opt.state[p]) for k, p in params.items()})


@student_side
def student_trajectory(
    name: str,
    problem: Problem,
    kwargs: dict,
    steps: int,
    checkpoints: set[int],
    groups: list[dict] | None = None,
    no_grad: frozenset[str] = frozenset(),
) -> Trajectory:
    """``trajectory`` of your optimizer ``name`` (``"sgd"``, ..., ``"adamw"``)."""
    return trajectory(STUDENT[name](), problem, kwargs, steps, checkpoints, groups, no_grad)


def closure_run(
    cls: type[torch.optim.Optimizer], kwargs: dict, target: torch.Tensor, steps: int
) -> tuple[torch.Tensor, list]:
    """Minimise |p - target|^2 from p = 0 with ``step(closure)`` under ``torch.no_grad()``.

    Returns the final parameter and what each ``step(closure)`` returned.
    """
    p = torch.zeros_like(target, requires_grad=True)
    opt = cls([p], **kwargs)

    def closure():
        opt.zero_grad()
        loss = (p - target).pow(2).sum()
        loss.backward()
        return loss

    with torch.no_grad():
        returned = [opt.step(closure) for _ in range(steps)]
    return p.detach(), returned


@student_side
def student_closure_run(
    name: str, kwargs: dict, target: torch.Tensor, steps: int
) -> tuple[torch.Tensor, list]:
    """``closure_run`` of your optimizer ``name``."""
    return closure_run(STUDENT[name](), kwargs, target, steps)


@student_side
def student_resumed_by_state_dict(
    name: str, problem: Problem, kwargs: dict, split: int, steps: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Your optimizer ``name`` run ``steps`` steps straight, and run ``split`` steps, then its
    ``state_dict()`` loaded into a fresh optimizer over the same parameters for the rest.

    Returns the parameters of both runs: (straight, resumed).
    """
    cls = STUDENT[name]()
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
    return {k: v.detach() for k, v in straight.items()}, {k: v.detach() for k, v in resumed.items()}
