"""Scenarios of the training loop: your ``cs336`` command, watched from outside, and the state its
checkpoints hold.

All of them run on the tests' side of the line (see ``tests/boundary.py``): ``cs336`` calls your
command and keeps what it printed (``printed_by``), ``train_killed_at_random`` has your command
killed mid-run (``killed_midway``), and ``load_final_state`` drives your model and optimizer call
by call to read a checkpoint back.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import adapters
from tests.boundary import killed_midway, printed_by


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


def load_final_state(path: Path, dim: int = 4, layers: int = 2) -> tuple[int, dict, dict]:
    """Load a checkpoint of ``cs336 train`` into a fresh Cruncher + AdamW; return (iteration, states)."""
    model = adapters.get_cruncher_cls()(dim, layers)
    optimizer = adapters.get_adamw_cls()(model.parameters(), lr=0.01)
    iteration = adapters.run_load_checkpoint(path, model, optimizer)
    return iteration, model.state_dict(), optimizer.state_dict()
