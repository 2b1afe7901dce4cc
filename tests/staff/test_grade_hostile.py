"""Broken and hostile submissions each get a clear graded outcome and never stop the batch.

One batch (two workers, the real ``run_batch`` path) grades every case below against a tiny
synthetic staff repository (``cs336_staff/grade/testing.py``); each test then asserts the outcome
of one case. The synthetic suite: add (3 tests, 1.5 points each, one hidden), mul (2 points),
scale_file (1 point), and one GPU test (pending on CPU). Full marks on CPU are 7.5 of 9.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cs336_staff.grade.batch import run_batch
from cs336_staff.grade.grader import make_plan
from cs336_staff.grade.intake import read_submission
from cs336_staff.grade.report import load
from cs336_staff.grade.sandbox import Limits, Sandbox, namespace_prefix, privilege_plan
from cs336_staff.grade.testing import calc_with, make_staff_repo, make_zip

pytestmark = pytest.mark.staff

FULL = 7.5  # every CPU test passes
NO_MUL = FULL - 2.0  # every CPU test but test_mul_matches_python

SWALLOW = calc_with() + '''
def mul(a, b):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
'''

TAMPER = calc_with(prefix='''
from _pytest.reports import TestReport
_orig = TestReport.from_item_and_call.__func__

def _forced(cls, item, call):
    rep = _orig(cls, item, call)
    rep.outcome, rep.longrepr = "passed", None
    return rep

TestReport.from_item_and_call = classmethod(_forced)
''', add="return 0")

FORGE = calc_with(prefix='''
import json, os
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if target.endswith(".jsonl"):
        for seq in range(1, 4):
            os.write(int(fd), (json.dumps({"p": json.dumps({"seq": seq, "event": "finish"}), "m": "0" * 64}) + "\\n").encode())
''')

FORCE_PASS_CONFTEST = '''
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    rep.outcome, rep.longrepr = "passed", None
'''

PROBE = calc_with(
    add="return a + b if open('/proc/self/net/dev').read().count(':') == 1 else -999",
    mul="return a * b if os.getuid() != 0 and not os.access('tests/test_calc.py', os.W_OK) else -999",
    prefix="import os",
)


def cases() -> dict[str, dict]:
    """name -> {"files": extra zip entries, "calc": calc.py source, ...make_zip kwargs}."""
    return {
        "good": {},
        "traversal": {"files": {"../evil.py": "x = 1", "/tmp/evil_abs.py": "x = 1",
                                "cs336_assignment/../../escape.py": "x = 1"}},
        "symlink": {"symlinks": {"cs336_assignment/secret.py": "/etc/passwd"}},
        "bomb": {"files": {"cs336_assignment/bomb.py": b"#" * (17 * 2**20)}},
        "missing_package": {"calc": None},
        "syntax_error": {"calc": "def add(a, b:\n    return a + b\n"},
        "import_crash": {"calc": calc_with(prefix="raise RuntimeError('boom at import time')")},
        "sys_exit_import": {"calc": calc_with(prefix="import sys; sys.exit(3)")},
        "os_exit_import": {"calc": calc_with(prefix="import os; os._exit(0)")},
        "sys_exit_test": {"calc": calc_with(mul="import sys; sys.exit(3)")},
        "os_exit_test": {"calc": calc_with(mul="import os; os._exit(0)")},
        "infinite_loop": {"calc": calc_with(mul="while True: pass")},
        "swallowed_timeout": {"calc": SWALLOW},
        "runaway_memory": {"calc": calc_with(mul="import mmap; x = [mmap.mmap(-1, 256 * 2**20) for _ in range(48)]")},
        "printing": {"calc": calc_with(prefix="print('x' * 2_000_000)", add="print('y' * 5_000_000); return a + b")},
        "forced_pass_conftest": {
            "calc": calc_with(add="return 0"),
            "files": {"conftest.py": FORCE_PASS_CONFTEST, "tests/conftest.py": FORCE_PASS_CONFTEST,
                      "cs336_assignment/conftest.py": FORCE_PASS_CONFTEST, "pytest.ini": "[pytest]\naddopts = -p no:x\n",
                      "sitecustomize.py": "import os; os._exit(1)", "evil.pth": "import os"}},
        "in_process_tamper": {"calc": TAMPER},
        "forged_records": {"calc": FORGE},
        "reference_fallback": {"files": {}, "calc": None, "extra": True},
        "sandbox_probe": {"calc": PROBE},
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("hostile")
    root = make_staff_repo(tmp / "repo")
    subs = tmp / "subs"
    subs.mkdir()
    paths = []
    for name, spec in cases().items():
        kwargs = {k: v for k, v in spec.items() if k in ("files", "calc", "symlinks")}
        if spec.get("extra"):  # only the package's __init__: calc.py is missing
            kwargs["files"] = {"cs336_assignment/__init__.py": ""}
        paths.append(make_zip(subs / f"{name}.zip", kwargs.pop("files", {}), **kwargs))
    (subs / "corrupt.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    paths.append(subs / "corrupt.zip")
    limits = Limits(test_timeout=2, run_timeout=60, memory_bytes=2**30, watchdog_grace=2, output_chars=2000)
    plan = make_plan(root, device="cpu", limits=limits, jobs=2, cache_dir=tmp / "out" / ".cache")
    rows = run_batch(paths, tmp / "out", plan, jobs=2, progress=False)
    return {"out": tmp / "out", "rows": {r["name"]: r for r in rows}, "tmp": tmp, "root": root}


def result(graded, name):
    assert graded["rows"][name]["status"] != "grader error", graded["rows"][name]
    return load(graded["out"] / name)


def outcome(res, test: str) -> str:
    return next(t.outcome for t in res.tests if t.nodeid.endswith(test))


def test_good_submission_gets_every_cpu_point_and_gpu_pending(graded):
    """The correct package passes every CPU test; the GPU test is pending, not failed."""
    r = result(graded, "good")
    assert (r.status, r.score, r.max_score) == ("ok", FULL, 9.0), r.summary()
    assert outcome(r, "test_add_on_gpu") == "pending"


def test_corrupt_zip_is_rejected_with_a_reason(graded):
    """A zip that cannot be read is rejected; every test is reported not run, score 0."""
    r = result(graded, "corrupt")
    assert r.status == "rejected" and r.score == 0
    assert any("corrupt zip" in n for n in r.notes), r.notes
    assert {t.outcome for t in r.tests} == {"not_run"}


def test_path_traversal_entries_are_ignored_and_nothing_escapes(graded):
    """'../' and absolute entries are never written; the rest of the submission is graded."""
    r = result(graded, "traversal")
    assert r.score == FULL, r.summary()
    assert sum("unsafe path" in i for i in r.ignored) == 3, r.ignored
    tmp = graded["tmp"]
    assert not any(p.exists() for p in (tmp / "evil.py", tmp.parent / "evil.py", Path("/tmp/evil_abs.py")))


def test_symlink_entries_are_ignored(graded):
    """A symlink inside the zip (to /etc/passwd) is not extracted."""
    r = result(graded, "symlink")
    assert r.score == FULL and any("symlink" in i for i in r.ignored), r.ignored


def test_zip_bomb_is_rejected_by_the_uncompressed_cap(graded):
    """More than 16 MiB of graded files once inflated rejects the submission."""
    r = result(graded, "bomb")
    assert r.status == "rejected" and any("zip bomb" in n for n in r.notes), r.notes


def test_missing_package_is_rejected(graded):
    """A zip without cs336_assignment/ is rejected with the command that builds a good one."""
    r = result(graded, "missing_package")
    assert r.status == "rejected" and any("make_submission.sh" in n for n in r.notes), r.notes


def test_syntax_error_fails_every_test_with_the_syntax_error_shown(graded):
    """A syntax error is a collection error: every test errors, showing the SyntaxError."""
    r = result(graded, "syntax_error")
    assert r.score == 0
    ran = [t for t in r.tests if t.outcome != "pending"]
    assert all(t.outcome == "error" and "SyntaxError" in t.output for t in ran), [(t.outcome, t.output[:200]) for t in ran]


def test_import_time_crash_fails_every_test_with_its_message(graded):
    """An exception at import shows the student's own message in every test's output."""
    r = result(graded, "import_crash")
    ran = [t for t in r.tests if t.outcome != "pending"]
    assert r.score == 0 and all("boom at import time" in t.output for t in ran)


def test_sys_exit_at_import_scores_zero_without_stopping_the_batch(graded):
    """sys.exit while importing is a collection error, not a grader crash."""
    r = result(graded, "sys_exit_import")
    assert r.score == 0 and all(t.outcome in ("error", "pending") for t in r.tests)


def test_os_exit_at_import_scores_zero_and_says_why(graded):
    """os._exit while importing kills the test process before collection; reported, score 0."""
    r = result(graded, "os_exit_import")
    assert r.score == 0 and r.status == "crashed"
    assert any("before running any test" in n for n in r.notes), r.notes


def test_sys_exit_in_a_test_fails_only_that_test(graded):
    """SystemExit raised inside a test is that test's failure."""
    r = result(graded, "sys_exit_test")
    assert r.score == NO_MUL and outcome(r, "test_mul_matches_python") == "failed"


def test_os_exit_in_a_test_charges_that_test_and_reruns_the_rest(graded):
    """os._exit inside a test: that test crashed; the tests after it still run in a new process."""
    r = result(graded, "os_exit_test")
    assert outcome(r, "test_mul_matches_python") == "crashed"
    assert r.score == NO_MUL and r.status == "crashed", r.summary()


def test_infinite_loop_in_a_test_times_out(graded):
    """pytest-timeout stops an infinite loop; the other tests are graded normally."""
    r = result(graded, "infinite_loop")
    assert outcome(r, "test_mul_matches_python") == "timeout" and r.score == NO_MUL


def test_loop_that_swallows_the_timeout_is_killed_by_the_watchdog(graded):
    """A loop catching BaseException outlives pytest-timeout; the parent's watchdog kills it."""
    r = result(graded, "swallowed_timeout")
    assert outcome(r, "test_mul_matches_python") == "timeout" and r.score == NO_MUL, r.summary()


def test_runaway_memory_fails_that_test_only(graded):
    """Mapping 12 GiB (untouched, so it would succeed unlimited) hits the 1 GiB address-space limit."""
    r = result(graded, "runaway_memory")
    t = next(t for t in r.tests if t.nodeid.endswith("test_mul_matches_python"))
    assert t.outcome == "failed" and r.score == NO_MUL, t.output[-500:]
    assert "Cannot allocate memory" in t.output or "MemoryError" in t.output, t.output[-500:]


def test_megabytes_of_printing_are_truncated(graded):
    """7 MB printed at import and in tests: full marks, and every output file stays small."""
    r = result(graded, "printing")
    assert r.score == FULL
    folder = graded["out"] / "printing"
    assert (folder / "results.json").stat().st_size < 200_000
    assert (folder / "console.txt").stat().st_size < 200_000


def test_conftest_forcing_every_test_to_pass_is_ignored(graded):
    """The submission's conftest/pytest.ini/sitecustomize/.pth are never used; wrong add still fails."""
    r = result(graded, "forced_pass_conftest")
    assert r.score == FULL - 4.5, r.summary()  # the three add tests fail
    ignored = "\n".join(r.ignored)
    for name in ("conftest.py", "tests/conftest.py", "cs336_assignment/conftest.py", "pytest.ini",
                 "sitecustomize.py", "evil.pth"):
        assert f"{name}:" in ignored, ignored


def test_in_process_report_rewriting_is_caught_by_the_canary(graded):
    """Monkeypatching pytest to pass everything also passes the must-fail canary: flagged, score 0."""
    r = result(graded, "in_process_tamper")
    assert r.status == "tampered" and r.score == 0
    assert any("canary" in t for t in r.tampered)


def test_forged_result_records_are_rejected(graded):
    """Lines written to the results channel without the key are dropped and flagged."""
    r = result(graded, "forged_records")
    assert r.status == "tampered" and any("bad MAC" in t for t in r.tampered), r.tampered


def test_missing_module_never_falls_back_to_the_reference(graded):
    """Without calc.py the tests fail: the staff's reference is not importable in the sandbox."""
    r = result(graded, "reference_fallback")
    assert r.score == 0, r.summary()


@pytest.mark.skipif(not namespace_prefix()[0], reason="this OS refuses network namespaces")
def test_sandbox_has_no_network_interface_but_loopback(graded):
    """Inside the sandbox /proc/self/net/dev lists only lo (add passes only then)."""
    r = result(graded, "sandbox_probe")
    assert all(t.outcome == "passed" for t in r.tests if "add" in t.nodeid and t.device == "cpu"), r.summary()


@pytest.mark.skipif(not privilege_plan()[0], reason="privileges are dropped only when grading as root")
def test_sandbox_drops_root_and_cannot_modify_the_staff_tests(graded):
    """Student code runs as an unprivileged uid and cannot write to the staff's test files."""
    r = result(graded, "sandbox_probe")
    assert outcome(r, "test_mul_matches_python") == "passed", r.summary()


def test_batch_wrote_a_row_per_submission_in_the_gradebook(graded):
    """The gradebook has one row per submission, hostile ones included."""
    lines = (graded["out"] / "gradebook.csv").read_text().splitlines()
    assert len(lines) == 1 + len(cases()) + 1


def test_infinite_loop_at_import_hits_the_whole_run_timeout(tmp_path):
    """A hang during collection is cut by the whole-run timeout: status timeout, score 0."""
    root = make_staff_repo(tmp_path / "repo")
    z = make_zip(tmp_path / "hang.zip", {}, calc=calc_with(prefix="while True: pass"))
    intake = read_submission(z)
    run = Sandbox(root, Limits(test_timeout=2, run_timeout=4)).run(intake, None)
    assert run.timed_out and not run.outcomes
    payload = json.dumps(run.notes)
    assert "whole-run timeout" in payload
