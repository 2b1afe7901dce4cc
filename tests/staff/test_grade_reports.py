"""What the reports around a grade say: a test that is not graded is neither passed nor failed
(results.json, Gradescope's view of it, summary.md), and every count adds up."""

from __future__ import annotations

import csv
import json
import re

import pytest

from cs336_staff.grade import neutral
from cs336_staff.grade.batch import run_batch
from cs336_staff.grade.grader import make_plan
from cs336_staff.grade.gradescope import for_gradescope, staff_stdout
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


ESC_SEQUENCES = (
    "\x1b[2J\x1b[H\x1b]0;owned\x07"  # clear the screen, home the cursor, retitle the window
)
OSC8 = "\x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07"  # a link that shows other text
IMG = "<img src=x onerror=alert(1)>"
JS_LINK = "[x](javascript:alert(1))"
HOSTILE_CALC = calc_with(
    f"print({ESC_SEQUENCES + OSC8 + IMG + JS_LINK!r})",
    mul=f"raise ValueError({OSC8 + ESC_SEQUENCES + IMG!r})",
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A submission named -2-3 that prints and raises escape sequences, an OSC 8 link and HTML, and
    uploads files named as HTML and a javascript: link (ignored, so named in the report)."""
    tmp = tmp_path_factory.mktemp("hostile")
    root = make_staff_repo(tmp / "repo")
    sub = make_zip(
        tmp / "-2-3.zip",
        {f"{IMG}.txt": "x", f"{JS_LINK}.txt": "x", f"notes\x1b[31m{OSC8}.txt": "x"},
        calc=HOSTILE_CALC,
    )
    plan = make_plan(
        root,
        limits=Limits(test_timeout=5, run_timeout=60),
        cache_dir=tmp / ".cache",
        insecure=INSECURE,
    )
    run_batch([sub], tmp / "out", plan, progress=False)
    return tmp / "out"


def _raw_strings(value):
    """Every string in a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _raw_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _raw_strings(v)


def test_a_submissions_text_is_inert_in_every_report(hostile):
    """No control character in results.json (nor in what Gradescope gets), console.txt or
    run_autograder's stdout: each shows as its escape; no live HTML or link in summary.md or Gradescope's
    Markdown output; each test's output declared plain text; no formula in gradebook.csv."""
    folder = hostile / "-2-3"
    data = json.loads((folder / "results.json").read_text())
    shown = for_gradescope(data)
    for where, value in (("results.json", data), ("Gradescope's results.json", shown)):
        bad = [s for s in _raw_strings(value) if re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", s)]
        assert not bad, f"{where} holds control characters: {bad[:3]!r}"
    mul = next(t for t in data["tests"] if t["name"].endswith("test_mul_matches_python"))
    assert "\\x1b]8;;https://evil.example/\\x07click me" in mul["output"], mul["output"][-800:]
    assert shown["output_format"] == "md" and shown["test_output_format"] == "text"

    console = (folder / "console.txt").read_bytes()
    assert b"\x1b" not in console and b"\x07" not in console
    assert b"\\x1b[2J" in console, console[-2000:]
    stdout = staff_stdout(folder / "console.txt")
    assert "\x1b" not in stdout and "\\x1b]0;owned\\x07" in stdout

    for where, text in (
        ("summary.md", (folder / "summary.md").read_text()),
        ("output", shown["output"]),
    ):
        assert IMG not in text and "<img" not in text, f"{where} holds live HTML:\n{text}"
        assert not re.search(r"(?<!\\)\]\(javascript", text), f"{where} holds a live link:\n{text}"
        assert "\x1b" not in text
        assert "&lt;img src=x onerror=alert(1)&gt;" in text, (
            f"{where} lost the ignored name:\n{text}"
        )
        assert "\\[x\\](javascript:alert(1))" in text, text

    rows = list(csv.reader((hostile / "gradebook.csv").read_text().splitlines()))
    assert rows[1][0] == "'-2-3", rows[1]
    formula = ("=", "+", "-", "@", "\t", "\r")
    assert not [c for row in rows for c in row if c.startswith(formula)], rows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-2-3", "'-2-3"),
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "\\t=1"),
        ("\r=1", "\\r=1"),
        ("alice-2", "alice-2"),
    ],
)
def test_no_gradebook_cell_is_a_formula(text, expected):
    """OWASP's advice on CSV injection: a cell that starts as a formula starts with ' instead; a tab or a
    carriage return is shown escaped, so the cell starts with a backslash."""
    assert neutral.cell(text) == expected


def test_gradebook_remarks_keep_whole_notes_and_say_what_they_leave_out(tmp_path):
    """The remarks cell holds whole notes, the grade's first (a rule before the speed tests' seeds), and
    ends by saying how many more there are and where, instead of stopping mid-sentence."""
    rule = (
        "rules: tensors.strides.same_storage (cs336_assignment/tensors/strides.py:149) uses "
        "torch.profiler.record_function, which rule no-flop-counter-library forbids; the tests that "
        "reach it in its own part earn no points"
    )
    seeds = [
        f"the speed tests' inputs drawn with CS336_SPEED_SEED={n}; set it to replay them"
        for n in (1, 2)
    ]
    tests = [TestResult("t::a", "passed", 1.0, 1.0, "k", "visible", "cpu")]
    GradeResult("alice", "ok", tests, notes=[*seeds, rule, "x" * 400]).write(tmp_path / "alice")
    rows = list(csv.DictReader(write_gradebook(tmp_path).read_text().splitlines()))
    remarks = rows[0]["remarks"]
    assert remarks == f"{rule}; {seeds[0]}; {seeds[1]}; 1 more in alice/summary.md", remarks
    GradeResult("bob", "ok", tests, notes=["y" * 600]).write(tmp_path / "bob")
    rows = list(csv.DictReader(write_gradebook(tmp_path).read_text().splitlines()))
    assert rows[1]["remarks"].endswith("y [...] (whole in bob/summary.md)"), rows[1]["remarks"]


def test_the_summary_says_how_failed_tests_ended():
    """`Failed tests, by how they ended: 2 failed a check, 1 timed out`, not `Failed: 2 failed`."""
    tests = [
        TestResult(f"t::{i}", outcome, 0.0, 1.0, "k", "visible", "cpu")
        for i, outcome in enumerate(["failed", "failed", "timeout", "passed"])
    ]
    summary = GradeResult("alice", "ok", tests).summary()
    assert "Failed tests, by how they ended: 2 failed a check, 1 timed out" in summary, summary


def test_a_rejected_upload_says_why_above_its_table():
    """A rejected upload's summary (what Gradescope shows) gives the reason and what to upload first,
    not only in the notes under a table of zeros."""
    tests = [TestResult("t::a", "not_run", 0.0, 1.0, "k", "visible", "cpu")]
    why = "rejected: corrupt zip: a.pdf is not a readable zip archive; upload the .zip make_submission.sh builds"
    lines = GradeResult("a.pdf", "rejected", tests, notes=[why]).summary().splitlines()
    assert lines[2] == f"**{neutral.markdown(why)}**" and lines[4].startswith("| concept"), lines
