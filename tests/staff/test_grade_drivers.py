"""Tests written with drivers grade the same in one process and split.

``driver_cases.py`` checks properties of the line (a driver's RNGs, copies, the submission's errors,
files, printed output, a kill) against the reference; this runs that file both ways, each in a child
pytest, the two at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.staff, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CASES = "tests/staff/driver_cases.py"
MODES = {"one process": [], "split": ["-p", "cs336_staff.grade.judge", "--split-insecure"]}
#: How many cases driver_cases.py holds (parametrized ones counted once per case).
CASE_COUNT = 7


@pytest.fixture(scope="module")
def children(tmp_path_factory) -> Iterator[dict[str, tuple[subprocess.Popen, Path]]]:
    """Both modes' child pytests, started at once (this process only waits on them, so a second core
    runs the other): each mode's process and the folder of its ``stdout`` and ``stderr``."""
    base = tmp_path_factory.mktemp("drivers")
    started: dict[str, tuple[subprocess.Popen, Path]] = {}
    try:
        for i, (mode, extra) in enumerate(MODES.items()):
            logs = base / f"mode-{i}"
            (logs / "tmp").mkdir(parents=True)
            # files, not pipes: a child never blocks on a full pipe while the test waits on the other
            with (logs / "stdout").open("w") as out, (logs / "stderr").open("w") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, CASES],
                    cwd=ROOT,
                    # one thread each, as the audit's parallel runs: two torch processes of two
                    # threads each on two cores spin against each other (no case counts threads)
                    env={
                        **os.environ,
                        "OMP_NUM_THREADS": "1",
                        "MKL_NUM_THREADS": "1",
                        "TMPDIR": str(logs / "tmp"),  # its own, to see what it leaves there
                    },
                    stdout=out,
                    stderr=err,
                )
            started[mode] = (proc, logs)
        yield started
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.mark.parametrize("mode", list(MODES))
def test_driver_cases_pass_in_both_modes(children, mode):
    """Every case passes against the reference, in one process and split (the worker without bubblewrap:
    the same crossing, quicker to start), and the split run removes the folder of its staged tree
    (140 MB a run; the agreement audit makes hundreds)."""
    proc, logs = children[mode]
    returncode = proc.wait(timeout=540)
    stdout, stderr = (logs / "stdout").read_text(), (logs / "stderr").read_text()
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    assert returncode == 0 and f"{CASE_COUNT} passed" in last, stdout[-4000:] + stderr[-2000:]
    left = sorted(p.name for p in (logs / "tmp").glob("cs336-split-*"))
    assert not left, f"the {mode} run left its folder behind in $TMPDIR: {left}"
