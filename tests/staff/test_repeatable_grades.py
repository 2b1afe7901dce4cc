"""The same submission always gets the same grade: the judge derandomizes hypothesis, the sandboxed
worker seeds its global RNGs, and the property tests pass on the reference whatever the seed.

A regrade request must reproduce the grade, and a student's rerun must not change their result, so
every random draw a test makes (hypothesis's cases, the global RNGs of the judge and of the worker)
is fixed. The seed sweep runs the property tests with the random profile tests/conftest.py registers
("cs336-random"), so a strategy that can draw a case the oracle treats differently (a special token,
an empty input, a boundary value) shows here under some seed instead of failing a student at random.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.grade.grader import grade_one, make_plan
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.report import load
from cs336_staff.grade.sandbox import probe
from cs336_staff.grade.testing import calc_with, make_staff_repo, make_zip
from tests.staff.long_checks import long_check

pytestmark = pytest.mark.staff
ROOT = Path(__file__).resolve().parents[2]
INSECURE = probe(False) is not None  # no bubblewrap here: grade the synthetic submission without it

#: The test files holding property tests (hypothesis @given), public and hidden.
PROPERTY_TEST_FILES = (
    "tests/test_tokenizer.py",
    "tests/test_tensors.py",
    "tests/hidden/test_tensors.py",
    "tests/hidden/test_tokenization.py",
)
#: Seeds of the sweep: the done-when of issue 22 asks for at least 8.
SEEDS = (1, 2, 3, 5, 8, 13, 21, 34)

# Property tests added to the synthetic repo: an `add` that is wrong on some drawn integers, and a
# `mul` that is wrong when the worker's global RNG says so. Without derandomized hypothesis and
# seeded worker RNGs each grading draws its own cases and coins, and the outcomes differ.
RANDOM_TESTS = '''

from hypothesis import given, settings, strategies as st


@settings(max_examples=3)
@given(a=st.integers(0, 10**9), b=st.integers(0, 10**9))
def test_add_on_drawn_integers(a, b):
    """add agrees with + on drawn integers."""
    assert adapters.run_add(a, b) == a + b


@pytest.mark.parametrize("a", range(4))
def test_mul_small(a):
    """mul agrees with * on small integers."""
    assert adapters.run_mul(a, 3) == 3 * a
'''
COIN_CALC = calc_with(
    prefix="import random",
    add="return a + b + (a % 5 == 3)",
    mul="return a * b + (random.random() < 0.5)",
)


def test_grading_one_submission_twice_gives_identical_outcomes(tmp_path: Path) -> None:
    """Two gradings of a submission whose results hang on hypothesis's draws and on the worker's
    global RNG: the same outcome for every test."""
    root = make_staff_repo(tmp_path / "repo")
    with (root / "tests/test_calc.py").open("a") as f:
        f.write(RANDOM_TESTS)
    sub = make_zip(tmp_path / "coin.zip", {}, calc=COIN_CALC)
    plan = make_plan(
        root,
        limits=Limits(test_timeout=20, run_timeout=120),
        cache_dir=tmp_path / ".cache",
        insecure=INSECURE,
    )
    outcomes = []
    for name in ("first", "second"):
        grade_one(sub, name, tmp_path / "out", plan, force=True)
        outcomes.append({t.nodeid: t.outcome for t in load(tmp_path / "out" / name).tests})
    first, second = outcomes
    assert any(n.endswith("test_add_on_drawn_integers") for n in first), (
        f"the property test did not run: {first}"
    )
    assert {"passed", "failed"} <= set(first.values()), (
        f"the coin submission should pass some tests and fail others: {first}"
    )
    differ = {n: (first[n], second.get(n)) for n in first if first[n] != second.get(n)}
    assert first == second, f"the second grading disagrees with the first: {differ}"


@pytest.mark.slow
@long_check("the property tests under eight seeds")
@pytest.mark.parametrize("seed", SEEDS)
def test_property_tests_pass_on_the_reference_under_any_seed(seed: int) -> None:
    """Every public and hidden property test passes on the reference with random (not derandomized)
    hypothesis under this seed."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "hypothesis",
        "--hypothesis-profile=cs336-random",
        f"--hypothesis-seed={seed}",
        *PROPERTY_TEST_FILES,
    ]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (
        f"seed {seed}: {' '.join(cmd)} failed:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    )
    counts = re.search(r"^=*\s*(\d+) passed(.*) in [\d.]+s", run.stdout, re.M)
    assert counts and "failed" not in counts.group(2) and "error" not in counts.group(2), (
        run.stdout[-2000:]
    )
    assert int(counts.group(1)) >= len(PROPERTY_TEST_FILES), (
        f"too few property tests ran:\n{run.stdout[-2000:]}"
    )


def test_the_property_test_files_list_every_property_test_file() -> None:
    """PROPERTY_TEST_FILES names every public and hidden test file that uses hypothesis's @given."""
    files = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").glob("**/test_*.py")
        if "staff" not in p.parts and "@given(" in p.read_text()
    )
    assert files == sorted(PROPERTY_TEST_FILES), (
        f"add the new file(s) to PROPERTY_TEST_FILES: {files}"
    )
