"""Warm worker starts (``grade/warm.py``, ``worker/zygote.py``): each worker is forked by the sandbox's
zygote, fresh as a cold start would make it, and without a sandbox the machine's ``/tmp`` is never
emptied. The hostile cases (a worker that kills, stops or reads its zygote, or leaves a child behind)
are in ``test_grade_hostile.py``."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cs336_staff.grade import warm
from cs336_staff.grade.errors import WorkerUnavailable
from cs336_staff.grade.judge import make_remote
from cs336_staff.grade.remote import Remote
from cs336_staff.grade.sandbox import probe, stage
from cs336_staff.grade.spec import JudgeSpec, scratch_folders
from cs336_staff.grade.testing import ADAPTERS, calc_with, make_staff_repo
from cs336_staff.grade.warm import STARTS
from cs336_staff.worker.zygote import own_pid_namespace

pytestmark = [pytest.mark.staff, pytest.mark.timeout(120)]

SANDBOX = probe(False)
# seconds the judge would wait for 'ready' without the watch of its process: below the test's timeout
STARTUP_TIMEOUT = 60.0
REAP_WAIT = 10.0  # seconds for the zygote to reap a killed worker, on a loaded machine
#: ``add`` says which worker answered, who its parent is and what it finds in ``/tmp``; ``mul``
#: leaves a file there (and another in the machine's ``/tmp`` named by ``CANARY``, when it can).
CALC = calc_with(
    prefix="import os",
    add="return [os.getpid(), os.getppid(), sorted(os.listdir('/tmp'))]",
    mul="open('/tmp/leftover', 'w').close(); return a * b",
)


def remote_for(tmp_path: Path, tier: str) -> Remote:
    staff = make_staff_repo(tmp_path / "staff")
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir()
    scratch_folders(scratch)
    files = {
        "adapters.py": ADAPTERS,
        "cs336_assignment/__init__.py": "",
        "cs336_assignment/calc.py": CALC,
    }
    stage(root, staff, {name: text.encode() for name, text in files.items()})
    spec = JudgeSpec(
        root=root,
        scratch=scratch,
        staff_root=staff,
        results=tmp_path / "results.jsonl",
        insecure=tier == "none",
        tier=tier,
    )
    return make_remote(spec)


@pytest.fixture
def sandboxed(tmp_path: Path) -> Iterator[Remote]:
    if SANDBOX is not None:
        pytest.skip(f"no bubblewrap here: {SANDBOX}")
    remote = remote_for(tmp_path, "bubblewrap")
    yield remote
    remote.close()


def test_each_worker_is_forked_by_one_zygote_and_finds_tmp_empty(sandboxed: Remote):
    """Two workers in turn: different processes with one parent (the zygote, still serving), and what
    the first left in /tmp is gone for the second, as in a fresh sandbox."""
    first_pid, first_parent, first_tmp = sandboxed.call("adapters:run_add", [1, 2], {})
    assert sandboxed.call("adapters:run_mul", [2, 3], {}) == 6  # leaves /tmp/leftover
    zygote = sandboxed._launch.zygote  # type: ignore[attr-defined]
    sandboxed.restart()
    pid, parent, tmp = sandboxed.call("adapters:run_add", [1, 2], {})
    # /tmp holds only the folders on the way to the mounts (the scratch copy is bound below it here)
    assert (pid != first_pid, parent, tmp) == (True, first_parent, first_tmp), tmp
    assert "leftover" not in tmp
    assert sandboxed._launch.zygote is zygote and zygote.serving()  # type: ignore[attr-defined]
    assert sandboxed.isolation["starts"] == STARTS


def test_the_judge_sees_the_worker_it_forked_and_ends_it(sandboxed: Remote):
    """The worker's pid here is the one the judge reads memory from (``Remote.worker_pids``), not the
    zygote's; after a restart it is gone and the zygote is not."""
    sandboxed.call("adapters:run_add", [1, 2], {})
    worker = sandboxed.worker
    assert worker is not None
    zygote = sandboxed._launch.zygote  # type: ignore[attr-defined]
    zygote_pid = zygote.outer_pid(zygote.ready)
    assert sandboxed.worker_pids()[0] == worker.proc.pid != zygote_pid
    pid, inner = worker.proc.pid, worker.proc.inner  # type: ignore[attr-defined]
    sandboxed.restart()
    assert worker.proc.poll() is not None
    # ended at once; gone from /proc once the zygote reaped it, which it reports
    assert zygote.wait_for(lambda: inner in zygote.exits, REAP_WAIT), zygote.exits
    assert not Path(f"/proc/{pid}/stat").exists()
    assert Path(f"/proc/{zygote_pid}").exists() and zygote.serving()


def test_a_zygote_stopped_after_the_judge_looked_costs_one_start_not_the_tests_timeout(
    sandboxed: Remote,
):
    """The zygote is stopped (SIGSTOP, by a worker that just ended) between the judge's check that
    it serves and its fork request: the request waits in a socket nobody reads, and no pipe end ever
    closes. The wait for 'ready' sees the stopped zygote within a poll and says the worker did not
    start; the next start comes from a new sandbox."""
    sandboxed.call("adapters:run_add", [1, 2], {})
    sandboxed.restart()
    starts = sandboxed._launch
    assert isinstance(starts, warm.WorkerStarts) and starts.zygote is not None
    zygote = starts.zygote
    zygote_pid = zygote.outer_pid(zygote.ready) if zygote.ready is not None else None
    assert zygote_pid is not None
    os.kill(zygote_pid, signal.SIGSTOP)
    # seen as ended (never forked), not as silent until the startup timeout ("no complete message")
    sandboxed.startup_timeout = STARTUP_TIMEOUT
    with pytest.raises(WorkerUnavailable, match=r"did not start \(it was killed by SIGKILL\)"):
        sandboxed._wait_ready(zygote.fork())  # past the launcher's check, as in the race
    assert sandboxed.call("adapters:run_mul", [2, 3], {}) == 6
    assert starts.zygote is not zygote and not Path(f"/proc/{zygote_pid}").exists()


def test_without_a_sandbox_the_machines_tmp_is_left_alone(tmp_path: Path):
    """The unsandboxed fallback forks from a zygote too, but /tmp is the machine's: never emptied, and
    the zygote does not take itself for a sandbox's (where it would end every other process)."""
    assert not own_pid_namespace()
    canary = Path("/tmp") / f"cs336-warm-canary-{uuid.uuid4().hex[:8]}"
    canary.write_text("keep")
    remote = remote_for(tmp_path, "none")
    try:
        first = remote.call("adapters:run_add", [1, 2], {})
        remote.restart()
        second = remote.call("adapters:run_add", [1, 2], {})
        assert first[0] != second[0] and first[1] == second[1] == remote._launch.zygote.ready  # type: ignore[attr-defined]
        assert canary.read_text() == "keep"
    finally:
        remote.close()
        canary.unlink()
        Path("/tmp/leftover").unlink(missing_ok=True)
        assert os.path.isdir("/tmp")


@pytest.mark.parametrize(
    "tier, gpu, driver, forks",
    [
        ("bubblewrap", False, False, True),
        ("none", False, False, True),
        ("bubblewrap", True, False, True),  # a GPU run where no GPU is (a split run on a laptop)
        ("bubblewrap", True, True, False),  # CUDA's driver state does not survive a fork
        ("container", False, False, False),  # a uid of its own per worker
    ],
)
def test_which_runs_fork_their_workers(tmp_path, monkeypatch, tier, gpu, driver, forks):
    node = tmp_path / "nvidiactl"
    if driver:
        node.touch()
    monkeypatch.setattr(warm, "NVIDIA_CONTROL_NODE", str(node))
    spec = JudgeSpec(
        root=tmp_path,
        scratch=tmp_path,
        staff_root=tmp_path,
        results=tmp_path / "r.jsonl",
        gpu=gpu,
        insecure=tier == "none",
        tier=tier,
    )
    assert warm.WorkerStarts(spec, None).one_at_a_time is forks
