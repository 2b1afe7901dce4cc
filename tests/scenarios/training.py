"""Scenarios of the training loop: your ``cs336`` command, in this process or killed in a child, and
the state its checkpoints hold.

Each runs your code (through ``adapters``) and returns plain data: exit statuses, what was printed,
state dicts. ``load_final_state`` runs on the tests' side in grading too, driving your model and
optimizer call by call; the ``@student_side`` ones run beside your code (see ``tests/boundary.py``),
where what they observe happens: what your command prints, a child process killed mid-run.
"""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import adapters
from tests.boundary import plain_data, student_side


@plain_data
@dataclass
class Run:
    """What one ``cs336`` command did: its exit status and what it printed to stdout and stderr."""

    status: int
    out: str
    err: str


@student_side
def cs336(argv: list[str]) -> Run:
    """Run ``cs336 ARGV`` in this process (``adapters.run_cs336``), capturing what it prints.

    If it raises, what it printed so far is printed again before the exception propagates.
    """
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = adapters.run_cs336(argv)
    except BaseException:
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())
        raise
    return Run(status, out.getvalue(), err.getvalue())


@student_side
def train_killed_at_random(
    argv: list[str], checkpoint: Path, log: Path, seed: int = 0
) -> tuple[int, str]:
    """Run ``cs336 ARGV`` in a child process; once ``checkpoint`` exists, SIGKILL it at a random moment.

    The child calls ``adapters.run_cs336`` too (the same door, from the folder that holds your
    ``adapters.py``). Returns its exit status and what it printed (also left in ``log``).
    """
    root = Path(adapters.__file__).resolve().parent
    command = [
        sys.executable,
        "-c",
        "import sys, adapters; sys.exit(adapters.run_cs336(sys.argv[1:]))",
        *argv,
    ]
    env = {**os.environ, "PYTHONPATH": str(root)}
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=root, env=env)
        try:
            while (
                not checkpoint.exists() and proc.poll() is None
            ):  # wait until training is under way
                time.sleep(0.01)
            # then kill it at an arbitrary step, quite possibly in the middle of a save
            time.sleep(random.Random(seed).uniform(0.0, 0.1))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    return proc.returncode, log.read_text()


def load_final_state(path: Path, dim: int = 4, layers: int = 2) -> tuple[int, dict, dict]:
    """Load a checkpoint of ``cs336 train`` into a fresh Cruncher + AdamW; return (iteration, states)."""
    model = adapters.get_cruncher_cls()(dim, layers)
    optimizer = adapters.get_adamw_cls()(model.parameters(), lr=0.01)
    iteration = adapters.run_load_checkpoint(path, model, optimizer)
    return iteration, model.state_dict(), optimizer.state_dict()
