"""What the reports around a grade say: a test that is not graded is neither passed nor failed
(results.json, Gradescope's view of it, summary.md), and every count adds up."""

from __future__ import annotations

import csv
import json
import re

import pytest

from cs336_staff.grade.batch import run_batch
from cs336_staff.grade.grader import make_plan
from cs336_staff.grade.gradescope import for_gradescope
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.report import NOT_GRADED, GradeResult, TestResult, write_gradebook
from cs336_staff.grade.sandbox import probe
from cs336_staff.grade.testing import calc_with, make_staff_repo, make_zip

pytestmark = pytest.mark.staff
INSECURE = probe(False) is not None

SKIPS_HERE = '''

def test_add_of_a_machine_this_runner_is_not():
    """Skips itself on every runner (a check of some other platform)."""
    pytest.skip("needs a platform this runner is not")
'''
WEIGHT_ZERO = "tests/test_calc.py::test_scale_file_reads_fixture"


@pytest.fixture(scope="module")
def ungraded(tmp_path_factory):
    """A submission whose mul is wrong, graded where one test weighs 0 (and fails: it reads a fixture
    through mul's neighbour, broken too) and one test skips itself."""
    tmp = tmp_path_factory.mktemp("ungraded")
    root = make_staff_repo(tmp / "repo")
    with open(root / "tests" / "test_calc.py", "a") as f:
        f.write(SKIPS_HERE)
    with open(root / "rubric.toml", "a") as f:
        f.write(f'\n[[rules]]\nmatch = "{WEIGHT_ZERO}"\nweight = 0\n')
    sub = make_zip(tmp / "sub.zip", {}, calc=calc_with(mul="return 0", scale_file="return []"))
    plan = make_plan(
        root,
        limits=Limits(test_timeout=5, run_timeout=60),
        cache_dir=tmp / ".cache",
        insecure=INSECURE,
    )
    run_batch([sub], tmp / "out", plan, progress=False)
    return tmp / "out" / "sub"


def test_a_test_not_graded_is_neither_passed_nor_failed_and_the_counts_add_up(ungraded):
    """Weight 0 and a skip on this runner: status not_graded in results.json, left out of max_score and of
    what Gradescope shows (nothing red), a column of their own in summary.md whose counts sum to the tests."""
    data = json.loads((ungraded / "results.json").read_text())
    status = {t["name"]: t["status"] for t in data["tests"]}
    skipped = "tests/test_calc.py::test_add_of_a_machine_this_runner_is_not"
    assert status[WEIGHT_ZERO] == status[skipped] == NOT_GRADED, status
    assert status["tests/test_calc.py::test_mul_matches_python"] == "failed"
    graded_max = sum(t["max_score"] for t in data["tests"] if t["status"] != NOT_GRADED)
    assert data["extra_data"]["max_score"] == pytest.approx(graded_max)

    shown = for_gradescope(data)
    names = {t["name"] for t in shown["tests"]}
    assert WEIGHT_ZERO not in names and skipped not in names
    assert shown["extra_data"]["max_score"] == pytest.approx(
        sum(t["max_score"] for t in shown["tests"])
    )
    assert (
        "Not graded: 2 tests (1 worth no points in the rubric, 1 skipped on this runner)"
        in (shown["output"])
    )

    summary = (ungraded / "summary.md").read_text()
    assert "Not graded: 2 tests" in summary, summary
    header = next(line for line in summary.splitlines() if line.startswith("| concept"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[1:6] == ["tests", "passed", "failed", "pending", "not graded"], header
    for line in summary.splitlines():
        if line.startswith("| ") and not line.startswith(("| concept", "|---")):
            cells = [re.sub(r"\*", "", c).strip() for c in line.strip("|").split("|")]
            tests, counts = int(cells[1]), [int(c) for c in cells[2:6]]
            assert sum(counts) == tests, f"the counts of {cells[0]} do not add up: {line}"
    total = next(line for line in summary.splitlines() if line.startswith("| **total**"))
    assert [c.strip() for c in total.strip("|").split("|")][1:6] == [
        str(len(data["tests"])),
        str(sum(s == "passed" for s in status.values())),
        str(sum(s == "failed" for s in status.values())),
        str(sum(s == "pending" for s in status.values())),
        "2",
    ], total


def test_gradebook_and_summary_list_the_parts_in_the_handouts_order(tmp_path):
    """The parts' columns of gradebook.csv and the rows of summary.md follow the rubric's order of
    parts, not the alphabet (10. after 9., Tokenization after Checkpointing)."""
    concepts = {f"k{n}": f"{n}. Part {chr(ord('z') - n)}" for n in (1, 2, 9, 10)}
    tests = [
        TestResult(f"t::{key}", "passed", 1.0, 1.0, key, "visible", "cpu")
        for key in sorted(concepts, reverse=True)
    ]
    GradeResult("alice", "ok", tests, concepts=concepts).write(tmp_path / "alice")
    header = next(csv.reader(write_gradebook(tmp_path).read_text().splitlines()))
    assert [c for c in header if c in concepts] == ["k1", "k2", "k9", "k10"], header
    summary = (tmp_path / "alice" / "summary.md").read_text()
    rows = [line.split("|")[1].strip() for line in summary.splitlines() if line.startswith("| ")]
    assert [r for r in rows if r in concepts.values()] == list(concepts.values()), summary
