"""Scenarios of part 2: your ``Linear`` and ``Cruncher`` built, initialised, run and differentiated,
and ``set_seed``.

Each ``@driver`` builds your module through ``adapters`` (by name: ``"linear"`` or ``"cruncher"``),
runs it, and returns what it observed as data: weights, outputs, gradients, where each parameter
lives, numbers drawn. The tests compute their references (``F.linear``, closed-form statistics)
themselves. In grading each driver runs beside your code, as one round trip (see
``tests/boundary.py``); like every driver it starts from the global RNGs seeded with 0, so one that
needs another seed takes it as an argument. Every module is built with uninitialised memory
filled with NaN (``UninitialisedIsNaN``), so a weight your code never initialised is NaN in every
process, never zeros in one run and stale numbers in another.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

import adapters
from tests.boundary import driver, plain_data

#: Your modules, by the names the tests use.
MODULES = {"linear": adapters.get_linear_cls, "cruncher": adapters.get_cruncher_cls}


class UninitialisedIsNaN:
    """While entered, memory that torch hands out uninitialised (``torch.empty``) holds NaN (integers:
    their largest value) instead of whatever this process last freed there (torch's deterministic
    mode, warnings only, with ``fill_uninitialized_memory``); both are put back on exit. A weight
    never initialised then fails the same way in every run: left to chance, it was zeros in one
    process and stale numbers in another, and a test passed it in one and failed it in the other."""

    def __enter__(self) -> None:
        self.state = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.utils.deterministic.fill_uninitialized_memory,  # type: ignore[attr-defined]
        )
        torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
        torch.use_deterministic_algorithms(True, warn_only=True)

    def __exit__(self, *exc_info: object) -> None:
        enabled, warn_only, fill = self.state
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]


def construct(cls: type, args: tuple = (), kwargs: dict | None = None) -> torch.nn.Module:
    """``cls(*args, **kwargs)`` with uninitialised memory NaN. A driver that always builds one
    module names its adapter itself (``construct(adapters.get_linear_cls(), ...)``), so the judge's
    record of what the test reached names that adapter alone, as a student's table does."""
    with UninitialisedIsNaN():
        module: torch.nn.Module = cls(*args, **(kwargs or {}))
        return module


def build(module: str, args: tuple = (), kwargs: dict | None = None) -> torch.nn.Module:
    """Your ``module`` (``"linear"`` or ``"cruncher"``, the driver's first argument) built as
    ``Module(*args, **kwargs)``, with uninitialised memory NaN."""
    return construct(MODULES[module](), args, kwargs)


def as_data(value: object) -> object:
    """What a module returned, as a driver may return it: a tensor detached, anything else by its
    type's name (``"<tuple>"``), which no claim about a tensor accepts."""
    return value.detach() if isinstance(value, torch.Tensor) else f"<{type(value).__name__}>"


@driver
def linear_init(d_in: int, d_out: int, seed: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Builds a ``Linear(d_in, d_out[, dtype=dtype])`` right after ``torch.manual_seed(seed)``; returns its weight."""
    torch.manual_seed(seed)
    layer = construct(
        adapters.get_linear_cls(), (d_in, d_out), {} if dtype is None else {"dtype": dtype}
    )
    # nn.Module's __getattr__ types the weight Tensor | Module; a Linear's is a Parameter.
    return layer.weight.detach().clone()  # type: ignore[operator]


@plain_data
@dataclass
class Parameter:
    """One parameter of a module: where it lives, its dtype and shape, and whether it requires grad."""

    device: str  # the device's type: "cpu", "meta", "cuda"
    dtype: torch.dtype
    shape: tuple[int, ...]
    requires_grad: bool


@plain_data
@dataclass
class Layout:
    """A module's ``named_parameters()`` and the shapes of its ``state_dict()``, each in its order."""

    parameters: dict[str, Parameter]
    state_dict: dict[str, tuple[int, ...]]


@driver
def layout(module: str, args: tuple = (), kwargs: dict | None = None) -> Layout:
    """Builds your ``module`` as ``Module(*args, **kwargs)`` (its errors propagate); returns its Layout.

    On ``device="meta"`` nothing is allocated (and nothing crosses but these descriptions).
    """
    model = build(module, args, kwargs)
    return Layout(
        {
            name: Parameter(p.device.type, p.dtype, tuple(p.shape), p.requires_grad)
            for name, p in model.named_parameters()
        },
        {key: tuple(value.shape) for key, value in model.state_dict().items()},
    )


@plain_data
@dataclass
class Forward:
    """A module's weights (its ``state_dict()``, detached) and its output on each input (``as_data``)."""

    weights: dict[str, torch.Tensor]
    outputs: list[object]


@driver
def forward(
    module: str,
    args: tuple,
    inputs: list[torch.Tensor],
    kwargs: dict | None = None,
    weights: dict[str, torch.Tensor] | None = None,
    cast: torch.dtype | None = None,
) -> Forward:
    """Builds your ``module`` as ``Module(*args, **kwargs)``, then ``.to(cast)`` and ``load_state_dict(weights)``
    where given; returns its weights and its output on each of ``inputs`` (under ``torch.no_grad()``)."""
    model = build(module, args, kwargs)
    if cast is not None:
        model = model.to(cast)
    if weights is not None:
        model.load_state_dict(weights)
    with torch.no_grad():
        outputs = [as_data(model(x)) for x in inputs]
    return Forward({k: v.detach().clone() for k, v in model.state_dict().items()}, outputs)


@plain_data
@dataclass
class Gradients:
    """The gradients of ``(module(x) * upstream).sum()``: of each parameter (None if it got none) and of x."""

    params: dict[str, torch.Tensor | None]
    input: torch.Tensor | None


@driver
def gradients(
    module: str,
    args: tuple,
    weights: dict[str, torch.Tensor],
    x: torch.Tensor,
    upstream: torch.Tensor,
) -> Gradients:
    """Builds your ``module`` from ``args``, loads ``weights``, backpropagates ``(module(x) * upstream).sum()``
    (so ``upstream`` is the gradient of the output); returns the Gradients, detached."""
    model = build(module, args)
    model.load_state_dict(weights)
    x = x.detach().clone().requires_grad_()
    (model(x) * upstream).sum().backward()

    def detached(grad: torch.Tensor | None) -> torch.Tensor | None:
        return None if grad is None else grad.detach()

    return Gradients(
        {name: detached(p.grad) for name, p in model.named_parameters()}, detached(x.grad)
    )


def draw_from_every_generator() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), torch.rand(()).item()


@driver
def seeded_draws(seed: int, rounds: int, draws_before: int = 0) -> list[tuple[float, float, float]]:
    """Draws from ``random``, numpy and torch ``draws_before`` times (a state ``set_seed`` must reset: every
    driver starts from the same one), calls your ``set_seed(seed)``, then returns ``rounds`` more draws."""
    for _ in range(draws_before):
        draw_from_every_generator()
    adapters.run_set_seed(seed)
    return [draw_from_every_generator() for _ in range(rounds)]


@driver
def inits_after_set_seed(
    seeds: list[int], dim: int, num_layers: int
) -> list[dict[str, torch.Tensor]]:
    """For each seed in turn, in one process: calls your ``set_seed(seed)``, then builds a
    ``Cruncher(dim, num_layers)``; returns each one's initial ``state_dict()``, detached."""
    out = []
    for seed in seeds:
        adapters.run_set_seed(seed)
        model = construct(adapters.get_cruncher_cls(), (dim, num_layers))
        out.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    return out


def global_rng_states() -> dict[str, object]:
    """The states of the global RNGs of ``random``, numpy and torch (the CPU's), by name."""
    return {
        "random": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def same_state(a: object, b: object) -> bool:
    """Whether two states of ``global_rng_states`` are equal (numpy's holds an array)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


def changed_since(before: dict[str, object]) -> list[str]:
    """The names of the global RNGs whose state is no longer the one in ``before``."""
    after = global_rng_states()
    return [name for name in before if not same_state(before[name], after[name])]


@driver
def set_seed_rejecting(seed: object) -> list[str]:
    """Calls your ``set_seed(seed)`` for a seed it must reject; returns the names of the global RNGs it
    changed, or, where it raised and changed none, raises its exception again (``[]``: it did nothing)."""
    before = global_rng_states()
    try:
        adapters.run_set_seed(seed)  # type: ignore[arg-type]  # a seed of any type, to be refused
    except Exception:
        if not changed_since(before):
            raise
    return changed_since(before)
