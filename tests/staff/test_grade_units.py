"""Unit checks of intake, rubric and report: no sandbox, no subprocess, milliseconds each."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from cs336_staff.grade import grader, gradescope
from cs336_staff.grade.grader import graded_outcome
from cs336_staff.grade.intake import read_submission, safe_relpath, submission_name
from cs336_staff.grade.limits import Limits, MiB, Watchdog
from cs336_staff.grade.merge import merge_results
from cs336_staff.grade.report import GradeResult, TestResult, write_gradebook
from cs336_staff.grade.spec import SPEC_VERSION, JudgeSpec, SpecError
from cs336_staff.grade.testing import ADAPTERS, GOOD_CALC, make_staff_repo, make_zip
from cs336_staff.rubric import Rubric
from cs336_staff.worker.adapter_rule import is_adapter, read_adapters

pytestmark = pytest.mark.staff


@pytest.mark.parametrize(
    "name",
    ["../x.py", "a/../../x.py", "/etc/passwd", "C:/x.py", "C:\\x.py", "..\\x.py", "a\x00.py"],
)
def test_unsafe_paths_are_refused(name):
    """Anything that could land outside the sandbox maps to None."""
    assert safe_relpath(name) is None


def test_directory_submission_skips_symlinks_and_config(tmp_path):
    """A folder submission: graded files taken, symlinks and conftest.py reported, never followed."""
    sub = tmp_path / "alice"
    (sub / "cs336_assignment").mkdir(parents=True)
    (sub / "cs336_assignment" / "__init__.py").write_text("")
    (sub / "cs336_assignment" / "calc.py").write_text(GOOD_CALC)
    (sub / "adapters.py").write_text(ADAPTERS)
    (sub / "conftest.py").write_text("raise SystemExit")
    os.symlink("/etc/passwd", sub / "cs336_assignment" / "leak.py")
    os.symlink("/etc", sub / "cs336_assignment" / "etcdir")
    os.mkfifo(sub / "cs336_assignment" / "pipe.py")
    intake = read_submission(sub)
    assert intake.error is None
    assert sorted(intake.files) == [
        "adapters.py",
        "cs336_assignment/__init__.py",
        "cs336_assignment/calc.py",
    ]
    text = "\n".join(intake.ignored)
    assert (
        "leak.py: symlink" in text
        and "etcdir/: symlink" in text
        and "pipe.py: not a regular file" in text
    )
    assert "conftest.py: pytest/Python configuration" in text


def test_directory_submission_with_odd_names_and_special_files_is_read_and_reported_escaped(
    tmp_path,
):
    """Names that are not UTF-8 or hold a newline, a socket, a fifo named like a module: reported escaped, never read."""
    import socket

    sub = tmp_path / "bob"
    (sub / "cs336_assignment").mkdir(parents=True)
    (sub / "cs336_assignment" / "calc.py").write_text(GOOD_CALC)
    raw = os.fsencode(sub)
    open(raw + b"/notes-\xff.txt", "wb").write(b"x")
    open(raw + b"/cs336_assignment/mod\xfe.py", "wb").write(b"x = 1")
    (sub / "cs336_assignment" / "two\nlines.py").write_text("x = 1")
    os.mkfifo(sub / "cs336_assignment" / "model.py")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sub / "cs336_assignment" / "sock.py"))
        intake = read_submission(sub)
    assert intake.error is None and sorted(intake.files) == [
        "cs336_assignment/__init__.py",
        "cs336_assignment/calc.py",
    ]
    text = "\n".join(intake.ignored)
    assert (
        "notes-\\xff.txt: name is not printable UTF-8" in text
        and "mod\\xfe.py: name is not" in text
    ), text
    assert "two\\nlines.py: name is not" in text, text
    assert (
        "model.py: not a regular file (a fifo)" in text
        and "sock.py: not a regular file (a socket)" in text
    ), text
    json.dumps(intake.ignored).encode("utf-8")  # every remark is valid UTF-8 text


def test_wrapping_folder_is_unwrapped_and_missing_init_is_supplied(tmp_path):
    """A zip of the folder (not its contents) still works; a missing __init__.py is noted."""
    z = tmp_path / "bob.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("bob-hw/cs336_assignment/calc.py", GOOD_CALC)
        zf.writestr("bob-hw/adapters.py", ADAPTERS)
    intake = read_submission(z)
    assert intake.error is None and "cs336_assignment/calc.py" in intake.files
    assert any("unwrapped" in n for n in intake.notes) and any(
        "__init__.py" in n for n in intake.notes
    )


def test_missing_adapters_falls_back_to_the_staff_copy(tmp_path):
    """Students are not meant to edit adapters.py; a zip without it uses the staff's."""
    staff = tmp_path / "adapters.py"
    staff.write_text(ADAPTERS)
    intake = read_submission(make_zip(tmp_path / "c.zip", {}, adapters=None), staff_adapters=staff)
    assert intake.files["adapters.py"] == ADAPTERS.encode()
    assert any("staff's copy" in n for n in intake.notes)


def test_same_content_same_hash_and_names_are_sanitised(tmp_path):
    """The content hash ignores zip metadata; folder names never contain path characters."""
    a = read_submission(make_zip(tmp_path / "a.zip", {}))
    b = read_submission(make_zip(tmp_path / "b.zip", {"writeup.pdf": b"%PDF"}))
    assert a.sha256 == b.sha256
    assert submission_name(tmp_path / "../../Ada Lovelace.zip") == "Ada_Lovelace"


RUBRIC = {
    "concepts": {"a": {"points": 10}, "b": {}},
    "rules": [
        {"match": "t/test_a.py::*", "concept": "a"},
        {"match": "t/test_a.py::test_heavy", "weight": 3},
        {"match": "t/test_b.py::*", "concept": "b"},
        {"match": "t/hidden/*", "concept": "b", "visibility": "hidden"},
    ],
}


def test_rubric_splits_concept_points_by_weight():
    """A concept's points are shared by weight; concepts without points give 1 per test."""
    items = Rubric.from_dict(RUBRIC).resolve(
        [
            "t/test_a.py::test_x",
            "t/test_a.py::test_heavy",
            "t/test_b.py::test_y",
            "t/hidden/test_b.py::test_z",
        ]
    )
    assert (
        items["t/test_a.py::test_x"].points == 2.5
        and items["t/test_a.py::test_heavy"].points == 7.5
    )
    assert items["t/test_b.py::test_y"].points == 1.0
    assert items["t/hidden/test_b.py::test_z"].visibility == "hidden"


@pytest.mark.parametrize(
    "bad,match",
    [
        ({"rules": [{"match": "x", "concept": "nope"}]}, "not declared"),
        (
            {
                "concepts": {"a": {}},
                "rules": [{"match": "x", "concept": "a", "visibility": "public"}],
            },
            "visibility",
        ),
        ({"concepts": {"a": {"points": -1}}}, "points"),
        ({"concepts": {"a": {}}, "rules": [{"match": "x", "concpt": "a"}]}, "unknown keys"),
        ({"rules": [{"concept": "a"}]}, "match"),
        ({"rubric": 1}, "unknown top-level"),
    ],
)
def test_rubric_mistakes_are_value_errors_that_name_the_key(bad, match):
    """Every rubric mistake says which key is wrong and what is allowed."""
    with pytest.raises(ValueError, match=match):
        Rubric.from_dict(bad)


def test_uncovered_tests_are_an_error():
    """A graded test no rule gives a concept to cannot be resolved (it would be worth 0)."""
    with pytest.raises(ValueError, match="does not cover 1 graded test"):
        Rubric.from_dict(RUBRIC).resolve(["t/test_c.py::test_new"])


def _result(outcomes: dict[str, tuple[str, str]], status="ok", device="cpu") -> GradeResult:
    tests = [
        TestResult(
            n,
            o,
            1.0 if o == "passed" else 0.0,
            1.0,
            "c",
            "visible",
            d,
            "boom\n" * 3 if o == "failed" else "",
        )
        for n, (o, d) in outcomes.items()
    ]
    return GradeResult(
        "alice", status, tests, 3.0, sha256="abc", device=device, concepts={"c": "Concept"}
    )


def test_results_json_follows_gradescope_and_round_trips(tmp_path):
    """results.json has Gradescope's keys; loading it back gives the same scores."""
    r = _result({"t::a": ("passed", "cpu"), "t::b": ("failed", "cpu"), "t::g": ("pending", "gpu")})
    r.write(tmp_path / "alice")
    data = json.loads((tmp_path / "alice" / "results.json").read_text())
    assert data["score"] == 1.0 and data["execution_time"] == 3
    assert {"name", "score", "max_score", "status", "output", "visibility", "tags"} <= set(
        data["tests"][0]
    )
    assert [t["status"] for t in data["tests"]] == ["passed", "failed", "pending"]
    suite = ET.parse(tmp_path / "alice" / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    back = GradeResult.from_gradescope(data)
    assert (back.score, back.max_score) == (r.score, r.max_score)
    rows = (write_gradebook(tmp_path)).read_text().splitlines()
    assert rows[0].startswith("submission,status,score") and rows[1].startswith("alice,ok,1,3")


def test_merge_takes_gpu_tests_from_the_gpu_run_and_the_rest_from_the_cpu_run():
    """Pending tests are filled from the other run; the merged score counts both."""
    cpu = _result({"t::a": ("passed", "cpu"), "t::g": ("pending", "gpu")})
    gpu = _result({"t::a": ("pending", "cpu"), "t::g": ("passed", "gpu")}, device="gpu")
    merged = merge_results(cpu, gpu)
    assert merged.score == 2.0 and not any(t.outcome == "pending" for t in merged.tests)
    crashed = merge_results(cpu, _result({"t::g": ("passed", "gpu")}, status="crashed"))
    assert crashed.status == "crashed" and crashed.score == 2.0  # the worse status stays visible


def test_judge_spec_round_trips_through_its_json_file(tmp_path):
    """What the grader writes is exactly what the judge and the worker launcher read back, every field."""
    spec = JudgeSpec(
        root=tmp_path / "root",
        scratch=tmp_path / "scratch",
        staff_root=tmp_path,
        results=tmp_path / "r.jsonl",
        readonly=(tmp_path / "fixtures" / "a",),
        limits=Limits(memory_bytes=3, threads=2, test_timeout=1.5),
        gpu=True,
        jobs=3,
        insecure=True,
        tier="container",
        only=("tests/test_a.py::test_x",),
        preload=("torch",),
    )
    defaults = JudgeSpec(root=Path("r"), scratch=Path("s"), staff_root=Path("t"), results=Path("x"))
    kept_default = [
        f.name
        for f in dataclasses.fields(JudgeSpec)
        if f.name != "version" and getattr(spec, f.name) == getattr(defaults, f.name)
    ]
    assert not kept_default, (
        f"give {kept_default} a value other than the default here, so a field read back wrong shows"
    )
    assert JudgeSpec.read(spec.write(tmp_path / "spec.json")) == spec
    everything = JudgeSpec(
        root=Path("r"), scratch=Path("s"), staff_root=Path("t"), results=Path("x")
    )
    assert JudgeSpec.from_json(everything.to_json()) == everything


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"version": SPEC_VERSION + 1}, "has version"),
        ({"version": None}, "has version"),
        ({"surprise": 1}, "does not know: surprise"),
    ],
)
def test_judge_spec_from_another_checkout_is_refused_by_name(change, match):
    """A grader and a judge of different versions never half-understand each other."""
    data = json.loads(
        JudgeSpec(
            root=Path("r"), scratch=Path("s"), staff_root=Path("t"), results=Path("x")
        ).to_json()
    )
    data.update(change)
    with pytest.raises(SpecError, match=match):
        JudgeSpec.from_json(json.dumps(data))


def test_adapter_rule_reads_names_and_targets_from_the_code_not_the_docstring():
    """One rule for what an adapter is; its target is what the body uses (the docstring may say anything)."""
    source = '''
from cs336_assignment import models, tensors as t
import cs336_assignment.data as data

def run_a(x):
    """See cs336_assignment.wrong.name."""
    return t.flat_index(x)

def get_b():
    layer = models.Linear(1, 2)
    return models.Other

def run_c():
    return data.get_batch()

def helper():
    return t.flat_index(0)
'''
    adapters = read_adapters(source)
    assert list(adapters) == ["run_a", "get_b", "run_c"]
    assert (adapters["run_a"].module, adapters["run_a"].target, adapters["run_a"].takes_data) == (
        "tensors",
        "flat_index",
        True,
    )
    assert (adapters["get_b"].target, adapters["get_b"].takes_data) == ("Linear", False)
    assert (adapters["run_c"].module, adapters["run_c"].target) == (
        "",
        "",
    )  # not `from cs336_assignment import`
    assert (
        is_adapter("run_x")
        and is_adapter("get_y")
        and not is_adapter("helper")
        and not is_adapter("_run_x")
    )


def _phase(when, outcome, *, text="", wasxfail=None, verdict=None, sections=()):
    return {
        "when": when,
        "outcome": outcome,
        "wasxfail": wasxfail,
        "exc": [],
        "message": "",
        "text": text,
        "properties": {"judge_outcome": verdict} if verdict else {},
        "sections": [list(s) for s in sections],
    }


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        (
            [_phase("setup", "passed"), _phase("call", "passed"), _phase("teardown", "passed")],
            ("passed", ""),
        ),
        (
            [
                _phase("setup", "passed"),
                _phase("call", "failed", text="E boom", sections=[("worker output (call)", "hi")]),
                _phase("teardown", "passed"),
            ],
            ("failed", "E boom\n----- worker output (call) -----\nhi"),
        ),
        ([_phase("setup", "failed", text="fixture")], ("error", "fixture")),
        (
            [_phase("setup", "passed"), _phase("call", "failed", text="T", verdict="timeout")],
            ("timeout", "T"),
        ),
        ([_phase("setup", "skipped", text="needs a GPU")], ("skipped", "needs a GPU")),
        (
            [_phase("setup", "passed"), _phase("call", "skipped", wasxfail="known")],
            ("skipped", "xfail: known"),
        ),
        (
            [_phase("setup", "skipped", text="s"), _phase("teardown", "failed", text="t")],
            ("error", "t"),
        ),  # a failure wins
    ],
)
def test_a_tests_graded_outcome_comes_from_its_recorded_phases(phases, expected):
    """The grader's reading of the outcome recorder: failure first (the judge's verdict if it gave one), then a skip."""
    assert graded_outcome(phases) == expected


def test_a_long_failure_report_is_clipped_with_the_worker_output_at_its_end():
    text, printed = "x" * 10_000, "the worker's last words"
    outcome, output = graded_outcome(
        [_phase("call", "failed", text=text, sections=[("worker output (call)", printed)])]
    )
    assert (
        outcome == "failed"
        and len(output) < 4100
        and output.startswith("x" * 100)
        and output.endswith(printed)
    )


def test_prepare_collects_once_for_every_gradescope_run_until_a_test_changes(tmp_path, monkeypatch):
    """``prepare`` (setup.sh, at image build) compiles the environment's bytecode and leaves the
    collection in source/.cs336-prepared; a run reads it there without collecting, while the staff
    tree is the one collected, and collects in a folder of its own once a test changed."""
    compiled: list[int] = []
    monkeypatch.setattr(
        gradescope, "ensure_compiled", lambda workers: compiled.append(workers) or ""
    )
    source = make_staff_repo(tmp_path / "source")
    said = gradescope.prepare(source)
    assert compiled and "collected 10 graded tests" in said, said
    out = tmp_path / "out"
    assert gradescope.collection_cache(source, out) == source / gradescope.PREPARED

    def no_collecting(*args, **kwargs):
        raise AssertionError("collected again")

    monkeypatch.setattr(grader, "run_judge", no_collecting)
    collected, errors = grader.collect_expected(source, source / gradescope.PREPARED)
    assert len(collected) == 10 and not errors
    test = source / "tests" / "test_calc.py"
    test.write_text(test.read_text() + "\n# changed after the image was built\n")
    assert gradescope.collection_cache(source, out) == out / ".cache"


def test_run_autograder_prints_the_start_of_the_workers_output_and_the_end_of_the_console():
    """console.txt over 20,000 characters: what the submission printed first in its worker (at import) and
    the console's end reach Gradescope's staff-only stdout; the judge's long middle is cut."""
    from cs336_staff.grade.grader import WORKER_OUTPUT
    from cs336_staff.grade.gradescope import STDOUT_HEAD, STDOUT_TAIL, staff_console

    judge, first, last = "j" * 150_000, "printed at import\n" + "a" * 30_000, "b" * 30_000
    shown = staff_console(judge + WORKER_OUTPUT + first + "\n" + last)
    assert (
        "printed at import" in shown
        and shown.endswith("b" * STDOUT_TAIL)
        and "j" * 100 not in shown
    )
    assert len(shown) < STDOUT_HEAD + STDOUT_TAIL + 100
    assert staff_console("short") == "short"


def test_a_burst_of_writes_between_two_polls_is_caught_by_the_check_after_the_test(tmp_path):
    """The watchdog polls the disk every half second; the judge's check after each test (``settle``) sees
    a burst a poll can miss, kills the worker and says why (its thread is not even started here)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        watchdog = Watchdog(proc.pid, Limits(disk_bytes=1 * MiB), tmp_path, cgroup=None)
        (tmp_path / "small.bin").write_bytes(b"x" * 1000)
        assert watchdog.check_disk() is None and proc.poll() is None
        (tmp_path / "flood.bin").write_bytes(b"x" * (2 * MiB))
        why = watchdog.check_disk()
        assert why is not None and "scratch folder" in why and watchdog.disk_breach, why
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()
        proc.wait()
