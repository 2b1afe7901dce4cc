"""Helpers shared by tests that must run code in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cs336(*args: str, timeout: float = 120, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cs336 ARGS`` in a child Python; re-raise a stub's NotImplementedError in the parent.

    A handout test that shells out must still fail *because the student has not implemented
    something yet*, not with an opaque exit status, so the child's NotImplementedError is re-raised.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    proc = subprocess.run(
        [sys.executable, "-m", "cs336_assignment.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=kwargs.pop("cwd", ROOT), **kwargs,
    )
    if "NotImplementedError" in proc.stderr:
        raise NotImplementedError(proc.stderr.strip().splitlines()[-1])
    if check and proc.returncode != 0:
        raise AssertionError(f"`cs336 {' '.join(args)}` exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc
