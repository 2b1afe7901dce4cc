"""Tests written with drivers grade the same in one process and split.

``driver_cases.py`` checks properties of the line (a driver's RNGs, copies, the submission's errors,
files, printed output, a kill) against the reference; this runs that file both ways in a child pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.staff, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CASES = "tests/staff/driver_cases.py"
MODES = {"one process": [], "split": ["-p", "cs336_staff.grade.judge", "--split-insecure"]}
#: How many cases driver_cases.py holds (parametrized ones counted once per case).
CASE_COUNT = 7


@pytest.mark.parametrize("mode", list(MODES))
def test_driver_cases_pass_in_both_modes(mode):
    """Every case passes against the reference, in one process and split (the worker without bubblewrap:
    the same crossing, quicker to start)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODES[mode], CASES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0 and f"{CASE_COUNT} passed" in last, (
        run.stdout[-4000:] + run.stderr[-2000:]
    )
