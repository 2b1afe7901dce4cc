"""Scenarios of part 2: your ``Linear`` initialised under a seed, a backward pass, and ``set_seed``.

Each drives your code through ``adapters`` and returns what it observed: weights, gradients,
numbers drawn. In grading they run on the tests' side of the line and reach your modules call by
call (see ``tests/boundary.py``): the global RNGs a scenario seeds are the ones your code draws
from, and a backward pass through your module's output runs on through your module.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

import adapters
from tests.boundary import driver

#: Your modules, by the names the tests use.
MODULES = {"linear": adapters.get_linear_cls, "cruncher": adapters.get_cruncher_cls}


def linear_init(d_in: int, d_out: int, seed: int, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The weight of a ``Linear(d_in, d_out[, dtype=dtype])`` built right after ``torch.manual_seed(seed)``.

    The global RNGs are put back afterwards.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = adapters.get_linear_cls()(
            d_in, d_out, **({} if dtype is None else {"dtype": dtype})
        )
    return layer.weight.detach()


def parameter_placement(
    module: str, args: tuple, device: str, dtype: torch.dtype
) -> dict[str, tuple[str, torch.dtype, tuple[int, ...]]]:
    """Build your ``module`` (``"linear"`` or ``"cruncher"``) from ``args`` with ``device=`` and ``dtype=``;
    return, for each parameter, the type of its device, its dtype and its shape.

    On ``device="meta"`` nothing is allocated (and nothing crosses but these descriptions).
    """
    model = MODULES[module]()(*args, device=device, dtype=dtype)
    return {name: (p.device.type, p.dtype, tuple(p.shape)) for name, p in model.named_parameters()}


@dataclass
class Gradients:
    """The gradients of ``(module(x) * upstream).sum()``: of each parameter (None if it got none) and of x."""

    params: dict[str, torch.Tensor | None]
    input: torch.Tensor | None


def gradients(
    module: str,
    args: tuple,
    weights: dict[str, torch.Tensor],
    x: torch.Tensor,
    upstream: torch.Tensor,
) -> Gradients:
    """Build your ``module`` (``"linear"`` or ``"cruncher"``) from ``args``, load ``weights``, backpropagate.

    The loss is ``(module(x) * upstream).sum()``, so ``upstream`` is the gradient of the output.
    """
    model = MODULES[module]()(*args)
    model.load_state_dict(weights)
    x = x.detach().clone().requires_grad_()
    (model(x) * upstream).sum().backward()
    return Gradients({name: p.grad for name, p in model.named_parameters()}, x.grad)


def draw_from_every_generator() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), torch.rand(()).item()


@driver
def seeded_draws(seed: int, rounds: int) -> list[tuple[float, float, float]]:
    """Call your ``set_seed(seed)``, then draw from ``random``, numpy and torch ``rounds`` times."""
    adapters.run_set_seed(seed)
    return [draw_from_every_generator() for _ in range(rounds)]
