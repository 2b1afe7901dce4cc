"""Multi-step tests written as plain bodies grade the same in one process and split (loops in the judge).

``loops_cases.py`` drives the reference's objects from the test: parameters set and read here
between ``step()`` calls, a closure, a backward pass through a module, seeded global RNGs, a
one-pass iterator, a ``with`` block, what a command printed, a run killed midway. Split, each of those crosses the line as
``cs336_staff/grade/WRITING_TESTS.md`` says; this runs the file both ways in a child pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.worker.write_through import write_through

pytestmark = [pytest.mark.staff, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CASES = "tests/staff/loops_cases.py"
MODES = {"one process": [], "split": ["-p", "cs336_staff.grade.judge", "--split-insecure"]}


@pytest.mark.parametrize("mode", list(MODES))
def test_plain_multi_step_bodies_pass_in_both_modes(mode):
    """Every case passes against the reference, in one process and split (worker without bubblewrap: the
    same crossing, quicker to start)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODES[mode], CASES],
                         cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert run.returncode == 0 and "11 passed" in run.stdout.splitlines()[-1], run.stdout[-4000:] + run.stderr[-2000:]


class _Owner:
    """Stands in for a worker object's proxy: records the operations it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def _op(self, *args) -> None:
        self.sent.append(args)


def test_a_copy_read_from_a_worker_object_writes_items_through_and_refuses_other_mutations():
    """``opt.param_groups[0]["lr"] = x`` assigns in the worker too; ``append``/``update`` on the copy raise."""
    owner = _Owner()
    groups = write_through([{"lr": 1.0, "params": [1, 2]}], lambda path, v: owner._op("assign", path, v),
                           ["param_groups"], "a worker object's")
    groups[0]["lr"] = 0.5
    assert groups == [{"lr": 0.5, "params": [1, 2]}]
    assert owner.sent == [("assign", ["param_groups", 0, "lr"], 0.5)]
    with pytest.raises(TypeError, match="a worker object.s .* would not reach it"):
        groups.append({})
    with pytest.raises(TypeError, match="a worker object.s .* would not reach it"):
        groups[0].update(lr=2.0)
