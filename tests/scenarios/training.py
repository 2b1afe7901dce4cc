"""Scenarios of the training loop: your ``cs336`` command, watched from outside, and the state its
checkpoints hold.

``cs336`` calls your command and keeps what it printed (``printed_by``), and
``train_killed_at_random`` has your command killed mid-run (``killed_midway``): both are plain
calls of ``adapters.run_cs336`` (see ``tests/boundary.py``). ``load_final_state`` is a driver: it
builds your Cruncher and AdamW beside your code, loads a checkpoint into them with your code and
returns their state dicts; ``initial_state`` builds your Cruncher as ``cs336 train`` does (after
``set_seed``) and returns its weights, the start of the run the tests recompute with torch;
``loop_run`` runs your ``train_loop`` on a torch linear model and optimizer and returns what it
handed back, what it asked for and what it reported, as it did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

import adapters
from tests.boundary import driver, killed_midway, plain_data, printed_by


@dataclass
class Run:
    """What one ``cs336`` command did: its exit status and what it printed (stdout and stderr together)."""

    status: int
    printed: str


def cs336(argv: list[str]) -> Run:
    """Run ``cs336 ARGV`` (``adapters.run_cs336``), keeping what it prints.

    If it raises, what it printed so far is printed before the exception propagates.
    """
    status, printed = printed_by(lambda: adapters.run_cs336(argv))
    return Run(status, printed)


#: The longest wait, in seconds, between the first checkpoint and the kill.
KILL_WINDOW = 0.1


def train_killed_at_random(argv: list[str], checkpoint: Path, seed: int = 0) -> tuple[int, str]:
    """Run ``cs336 ARGV`` in a process of its own; once ``checkpoint`` exists, SIGKILL it at a moment
    drawn from ``seed`` (up to ``KILL_WINDOW`` seconds later), quite possibly in the middle of a save.

    Returns its exit status (``-signal.SIGKILL`` if it was killed) and what it printed.
    """
    after = random.Random(seed).uniform(0.0, KILL_WINDOW)
    return killed_midway("run_cs336", [argv], once_written=checkpoint, after=after)


def train_killed_once_saved(argv: list[str], checkpoint: Path) -> tuple[int, str]:
    """Run ``cs336 ARGV`` in a process of its own; SIGKILL it as soon as it has written ``checkpoint``
    (created or replaced it) since it started. Returns its exit status and what it printed."""
    return killed_midway("run_cs336", [argv], once_written=checkpoint, after=0.0)


@driver
def load_final_state(path: Path, dim: int = 4, layers: int = 2) -> tuple[int, dict, dict]:
    """Build your Cruncher (``dim``, ``layers``) and AdamW, load the checkpoint of ``cs336 train`` at
    ``path`` into them with your code; return the iteration it gave and their state dicts."""
    model = adapters.get_cruncher_cls()(dim, layers)
    # your AdamW takes lr; the adapter's type names only the Optimizer base class
    optimizer = adapters.get_adamw_cls()(model.parameters(), lr=0.01)  # type: ignore[call-arg]
    iteration = adapters.run_load_checkpoint(path, model, optimizer)
    return iteration, model.state_dict(), optimizer.state_dict()


@driver
def initial_state(seed: int, dim: int, layers: int) -> dict:
    """What ``cs336 train --seed SEED`` starts from: ``set_seed(seed)``, then your Cruncher (``dim``,
    ``layers``), as ``train_regression`` builds it; return its state dict."""
    adapters.run_set_seed(seed)
    return adapters.get_cruncher_cls()(dim, layers).state_dict()


@plain_data
@dataclass
class LoopRun:
    """What your ``train_loop`` did in one run: what it returned (the container's type name, each
    value's type name and value as a float), the steps it asked ``get_batch`` for, the calls it made to
    ``on_step`` (the type names and values of both arguments) and the weight it left."""

    returned_type: str
    value_types: list[str]
    value_is_float: list[
        bool
    ]  # isinstance(value, float): a Python float (or a subclass, np.float64)
    values: list[float]
    batches_asked: list[int]
    on_step_types: list[tuple[str, str]]
    on_step_is_int_float: list[bool]
    on_step_calls: list[tuple[int, float]]
    weight: torch.Tensor


@driver
def loop_run(
    weight: torch.Tensor, lr: float, batches: list[tuple[torch.Tensor, torch.Tensor]], start: int
) -> LoopRun:
    """Your ``train_loop`` on ``torch.nn.Linear(D, 1, bias=False)`` loaded with ``weight``, under
    ``torch.optim.SGD(lr=lr)`` and mean squared error, ``get_batch(t)`` giving ``batches[t]``, run from
    ``start_step=start`` to ``num_steps=len(batches)`` with an ``on_step`` that records its calls."""
    model = torch.nn.Linear(weight.shape[1], 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    asked: list[int] = []
    calls: list[tuple[object, object]] = []

    def get_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        asked.append(step)
        return batches[step]

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(out.squeeze(-1), y)

    returned = adapters.run_train_loop(
        model,
        optimizer,
        get_batch,
        loss_fn,
        len(batches),
        start_step=start,
        on_step=lambda step, loss: calls.append((step, loss)),
    )
    return LoopRun(
        returned_type=type(returned).__name__,
        value_types=[type(v).__name__ for v in returned],
        value_is_float=[isinstance(v, float) for v in returned],
        values=[float(v) for v in returned],
        batches_asked=asked,
        on_step_types=[(type(step).__name__, type(loss).__name__) for step, loss in calls],
        on_step_is_int_float=[
            isinstance(step, int) and isinstance(loss, float) for step, loss in calls
        ],
        on_step_calls=[(int(step), float(loss)) for step, loss in calls],  # type: ignore[call-overload,arg-type]
        weight=model.weight.detach().clone(),
    )
