"""``Remote.worker_pids``: the processes the judge reads from outside (peak memory in ``/proc``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cs336_staff.grade.remote import Remote, WorkerProcess

#: How long the test waits for the shells to start their children (a wait, left as soon as they are up;
#: generous because a loaded machine may take seconds to schedule them).
START_WAIT_SECONDS = 60

pytestmark = pytest.mark.staff


def comm(pid: int) -> str:
    """A process's name, or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_worker_pids_are_the_launched_process_and_all_its_descendants():
    """The launcher's process (bubblewrap's, on that tier) and every process below it, whose memory the
    judge can read; none once no worker runs."""
    proc = subprocess.Popen(["sh", "-c", "sh -c 'sleep 30 & wait' & wait"], start_new_session=True)
    remote = Remote(launch=lambda: None)  # type: ignore[arg-type,return-value]
    assert remote.worker_pids() == []
    try:
        remote.worker = WorkerProcess(proc, -1, -1, output=None)  # type: ignore[arg-type]
        deadline = time.monotonic() + START_WAIT_SECONDS
        while time.monotonic() < deadline:  # the shells start their children; a forked child is
            pids = remote.worker_pids()  # named `sh` until it has exec'd sleep
            names = {comm(pid) for pid in pids}
            if len(pids) == 3 and "sleep" in names:
                break
            time.sleep(0.05)
        assert pids[0] == proc.pid and len(pids) == 3, pids  # sh, the inner sh, sleep
        assert "sleep" in names, names
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this test started (start_new_session)
        proc.wait()
        remote.worker = None
