"""`cs336 audit` on the sample repository, and the warm fork-server its runs come from.

Caught, surviving, stale and misdirected mutants; the baseline; a hung mutant killed at its
timeout; children that import the scratch copy and never the staff repository; SIGTERM cleaning
up. One light warm server (no torch warm-up: the sample needs none) serves the in-process tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cs336_assignment.cli import CommandError
from cs336_staff.audit.mutants import audit, load_mutants
from cs336_staff.mutants import Mutant
from cs336_staff.session.runner import INSTALLED_REPO
from cs336_staff.session.warm import KILLED, WarmPool
from tests.staff.test_release import make_sample_repo

pytestmark = pytest.mark.staff

ARITH = "cs336_assignment/arith.py"
TESTS = ("tests/test_arith.py::test_add_adds",)
# seconds: inside the first signal's cleanup (later, the audit may be gone)
SECOND_SIGNAL_AFTER = 0.01


@pytest.fixture(scope="module")
def pool():
    with WarmPool(light=True) as p:  # the sample's tests need no torch: skip the warm-up
        yield p


def test_audit_reports_caught_surviving_and_stale_mutants(tmp_path, pool):
    """A caught mutant names its test and message; a survivor and a stale `old` text fail the audit."""
    repo = make_sample_repo(tmp_path / "repo")
    original = (repo / ARITH).read_text()
    mutants = [
        (
            "arith",
            Mutant(
                "add_subtracts", ARITH, "add", "return a + b", "return a - b", "sign slip", TESTS
            ),
        ),
        (
            "arith",
            Mutant(
                "hypot_pow",
                ARITH,
                "hypot",
                "math.sqrt(squares)",
                "squares ** 0.5",
                "equivalent rewrite",
                TESTS,
            ),
        ),
        (
            "arith",
            Mutant(
                "stale", ARITH, "add", "return a * b", "return b", "the reference moved on", TESTS
            ),
        ),
        (
            "arith",
            Mutant(
                "hidden_only",
                ARITH,
                "add",
                "return a + b",
                "return b + a",
                "names a hidden test",
                ("tests/hidden/test_arith.py",),
            ),
        ),
    ]
    # Unannotated (so unchecked) until audit/mutants.py types its mutants and verdicts as Mutant.
    lines = []
    verdicts, baseline = audit(repo, mutants, jobs=2, echo=lines.append, pool=pool)
    assert baseline == []
    status = {v.mutant.name: v.status for v in verdicts}
    assert status == {
        "add_subtracts": "caught",
        "hypot_pow": "survived",
        "stale": "invalid",
        "hidden_only": "invalid",
    }
    caught = verdicts[0]
    assert caught.caught_by == [
        "tests/test_arith.py::test_add_adds: AssertionError: assert -1.0 == 3.0"
    ]
    assert "1 passed" in verdicts[1].note
    assert "matches 0 times" in verdicts[2].note
    assert lines[0].startswith("[1/4] arith/add_subtracts  CAUGHT")
    assert (repo / ARITH).read_text() == original, "the audit never touches the repository"


def test_baseline_failure_makes_a_catch_inconclusive(tmp_path, pool):
    """A test that fails without any mutant does not count as catching one."""
    repo = make_sample_repo(tmp_path / "repo")
    test = repo / "tests/test_arith.py"
    test.write_text(test.read_text().replace("== 3.0", "== 4.0"))
    mutants = [
        (
            "arith",
            Mutant(
                "add_subtracts", ARITH, "add", "return a + b", "return a - b", "sign slip", TESTS
            ),
        )
    ]
    verdicts, baseline = audit(repo, mutants, jobs=1, echo=lambda _: None, pool=pool)
    assert [b.split(":")[0:3] for b in baseline] == [["tests/test_arith.py", "", "test_add_adds"]]
    assert verdicts[0].status == "inconclusive"


def test_a_hung_mutant_is_killed_at_its_timeout_and_counts_as_caught(tmp_path, pool):
    """An infinite loop is a catch (the student's run never finishes), reported as a kill after --timeout."""
    repo = make_sample_repo(tmp_path / "repo")
    mutants = [
        (
            "arith",
            Mutant(
                "add_hangs",
                ARITH,
                "add",
                "return a + b",
                "while True:\n        pass",
                "loops forever",
                TESTS,
            ),
        )
    ]
    start = time.monotonic()
    verdicts, _ = audit(
        repo, mutants, jobs=1, baseline=False, timeout=2, echo=lambda _: None, pool=pool
    )
    assert (verdicts[0].status, verdicts[0].caught_by) == (
        "caught",
        ["(the run hung and was killed after 2 s)"],
    )
    assert time.monotonic() - start < 60


def _tree(root: Path, *, with_package: bool) -> Path:
    if with_package:
        (root / "cs336_assignment").mkdir(parents=True)
        (root / "cs336_assignment/__init__.py").write_text("")
    (root / "tests").mkdir(parents=True)
    (root / "tests/test_where.py").write_text(
        textwrap.dedent("""
        import os

        import cs336_assignment


        def test_package_comes_from_this_tree():
            assert os.path.dirname(os.path.realpath(cs336_assignment.__file__)) == os.path.join(os.getcwd(), "cs336_assignment")
        """)
    )
    return root


def test_children_import_the_tree_and_never_the_hidden_staff_repository(tmp_path, pool):
    """With the staff repository hidden, a tree's own package is imported; without one, the import fails."""
    hide = [INSTALLED_REPO]
    run = pool.run(_tree(tmp_path / "own", with_package=True), ["-q"], hide=hide)
    assert (run.returncode, run.foreign_modules, [t.outcome for t in run.tests.values()]) == (
        0,
        [],
        ["passed"],
    )
    bare = _tree(tmp_path / "bare", with_package=False)
    run = pool.run(bare, ["-q"], hide=hide)
    assert [e["message"].splitlines()[-1] for e in run.collect_errors] == [
        "E   ModuleNotFoundError: No module named 'cs336_assignment'"
    ]
    run = pool.run(bare, ["-q"], hide=[])
    assert run.foreign_modules == [
        f"cs336_assignment from {INSTALLED_REPO / 'cs336_assignment/__init__.py'}"
    ], "unhidden, the editable install's package is imported, and the child must say so"


def test_pool_kills_a_stuck_child_and_runs_scripts(tmp_path, pool):
    """A script job reports its exit code and output; one that outlives its timeout is killed."""
    run = pool.run(
        tmp_path, ["x"], code="import sys; print('argv', sys.argv[1:]); raise SystemExit(3)"
    )
    assert (run.returncode, run.output.strip()) == (3, "argv ['x']")
    run = pool.run(tmp_path, [], code="import time; time.sleep(600)", timeout=1)
    assert run.returncode == KILLED and "killed" in run.output


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads /proc to see whether a process is gone"
)
@pytest.mark.parametrize("signals", [1, 2], ids=["once", "twice-like-timeout-under-uv-run"])
def test_sigterm_kills_the_children_and_deletes_the_scratch_copies(tmp_path, signals):
    """SIGTERM mid-audit, once or twice in a row (``timeout`` signals the process group and ``uv run``
    forwards it again): the exit is 143, the mutant's child is gone, and no scratch directory is left."""
    repo = make_sample_repo(tmp_path / "repo")
    scratch_root, pid_file = tmp_path / "tmp", tmp_path / "pid"
    scratch_root.mkdir()
    hang = f"open({str(pid_file)!r}, 'w').write(str(__import__('os').getpid())); __import__('time').sleep(600)"
    script = textwrap.dedent(f"""
        import signal, sys
        from cs336_staff.audit import cli, mutants
        from cs336_staff.mutants import Mutant
        signal.signal(signal.SIGTERM, cli._terminate)
        m = Mutant("hangs", {ARITH!r}, "add", "return a + b", {hang!r}, "hangs", {TESTS!r})
        mutants.audit({str(repo)!r}, [("arith", m)], jobs=1, baseline=False, echo=print)
        """)
    env = {**os.environ, "TMPDIR": str(scratch_root), "CS336_WARM_LIGHT": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while (
            not (pid_file.exists() and pid_file.read_text())
            and time.monotonic() < deadline
            and proc.poll() is None
        ):
            time.sleep(0.1)
        assert pid_file.exists(), (
            f"the mutant never started: {proc.communicate(timeout=60)[0].decode()[-2000:]}"
        )
        child = int(pid_file.read_text())
        assert _alive(child)
        for i in range(signals):
            # the second lands in the first one's cleanup
            time.sleep(SECOND_SIGNAL_AFTER if i else 0)
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "the mutant's child outlived the audit"
    assert sorted(p.name for p in scratch_root.iterdir()) == [], "scratch copies left behind"


def test_only_filters_by_part_and_rejects_unknown_names():
    """--only keeps the named parts or mutants; an unknown name lists the parts that exist."""
    everything = load_mutants()
    if everything:
        part = everything[0][0]
        assert {p for p, _ in load_mutants([part])} == {part}
    with pytest.raises(CommandError, match="names no part or mutant"):
        load_mutants(["no_such_part_anywhere"])
