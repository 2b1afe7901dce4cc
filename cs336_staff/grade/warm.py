"""Warm worker starts: the judge's end of the sandbox's zygote (``cs336_worker/zygote.py``).

A cold worker imports torch again, about 3.5 CPU-seconds, and a one-judge run needs four (the
first, one after each of the two kills in ``test_training.py``, one for the hidden tests). Here the
sandbox's first process is a zygote that imports the preloads once and forks each worker; a worker
is then ready in a fraction of a second. ``WorkerStarts`` is ``Remote``'s launcher:

* bubblewrap and none tiers: one sandbox (``sandbox.launch``) per judge, its zygote forking the
  workers one at a time. Ending a worker SIGKILLs every process of the sandbox's pid namespace
  but the namespace's init and the zygote, in rounds until none is left, or else the whole
  sandbox (a fork bomb that outruns the rounds). A zygote that is not running when a worker is
  wanted (killed, stopped, or the sandbox killed by its watchdog) is replaced by a new sandbox.
* container tier: every worker a cold start (``sandbox.start_worker``): each worker runs as a uid
  never given to another, which a fork cannot change without privilege in the zygote.
* GPU runs (``spec.gpu``) on a machine with an NVIDIA driver: cold starts too, on every tier: a
  process that has touched the CUDA driver must not fork a worker that uses it.

What a forked worker finds is what a fresh sandbox gives: the zygote empties ``/tmp`` and
``/dev/shm`` before each fork, the worker is a new session, and nothing of the submission was
imported before the fork. What it shares with earlier workers of the sandbox is what it shared
before too (the scratch copy, ``mirror.py``), and the sandbox's limits (``limits.Watchdog``) cover
the zygote as well: it counts as one process and its own memory (pages it shares with a worker
are counted once where the proportional figure is read).

``session/warm.py`` is the staff tools' fork-server of whole pytest sessions, trusted and outside any
sandbox; this one runs inside the sandbox, staged as ``cs336_worker``, so it may import nothing of
``cs336_staff`` and shares no code with it.

Deliberately left out: spares (a worker forks in a fraction of a second, and two workers in one
sandbox could not be ended one at a time), and warm starts on the container tier and on GPU runs.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from cs336_staff.grade import container, sandbox
from cs336_staff.grade.limits import namespace_members, sandbox_namespace
from cs336_staff.grade.mirror import Mirror
from cs336_staff.grade.output import OutputTap
from cs336_staff.grade.remote import WorkerProcess
from cs336_staff.grade.spec import JudgeSpec

#: Rounds of SIGKILL that end a worker's processes before the whole sandbox is killed instead.
SWEEP_ROUNDS = 50
#: Seconds between two rounds (the kernel ends the killed ones meanwhile).
SWEEP_PAUSE = 0.002
#: Bytes of one message from the zygote.
MESSAGE_BYTES = 4096
#: Characters of the zygote's own output shown when it ended before forking a worker.
CONSOLE_TAIL = 3000
#: Index of a process's wait status among ``/proc/PID/stat``'s fields after its name (field 52).
ZOMBIE_STATUS_FIELD = 49
#: Seconds a worker that is gone may wait for its zygote's report of how it ended.
REPORT_WAIT = 0.5
#: The NVIDIA driver's control node: where it exists, a GPU run starts its workers cold.
NVIDIA_CONTROL_NODE = "/dev/nvidiactl"
#: Process states of a zygote that can no longer fork (psutil's names).
NOT_SERVING = {
    psutil.STATUS_STOPPED,
    psutil.STATUS_TRACING_STOP,
    psutil.STATUS_ZOMBIE,
    psutil.STATUS_DEAD,
}
STARTS = "forked from the sandbox's zygote, which imported the preloads and never the submission"


class ZygoteGone(RuntimeError):
    """The zygote's socket is closed: the sandbox must be started again."""


def _live(pid: str) -> bool:
    """Whether ``pid`` is a process that has not ended (zombies have)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _inner_pid(pid: str) -> int | None:
    """``pid``'s number in its own (innermost) pid namespace, from ``/proc/PID/status``."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


class Zygote:
    """One sandbox whose first process is a zygote, and the judge's end of its socket."""

    def __init__(self, spec: JudgeSpec) -> None:
        self.spec = spec
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.launched = sandbox.launch(
                spec,
                [
                    "--zygote",
                    str(theirs.fileno()),
                    # bubblewrap's namespaces; without a sandbox they are the machine's
                    *([] if spec.insecure else ["--sandboxed"]),
                    *sandbox.preload_args(spec),
                ],
                (theirs.fileno(),),
            )
        except BaseException:
            self.control.close()
            raise
        finally:
            theirs.close()
        self.isolation = {**self.launched.isolation, "starts": STARTS}
        self.console = OutputTap(self.launched.proc.stdout)  # the zygote's own output
        self._changed = threading.Condition()
        self.ready: int | None = None  # the zygote's pid in the sandbox, once its imports are done
        self.forked: dict[int, int] = {}  # request -> the worker's pid in the sandbox
        self.exits: dict[int, int] = {}  # a worker's pid in the sandbox -> its wait status
        self.closed = False  # the socket is closed: nothing more will be reported
        self._requests = itertools.count()
        self._pids: dict[int, int] = {}  # pid in the sandbox -> pid here
        self._namespace: str | None = None
        self._zygote: psutil.Process | None = None
        threading.Thread(target=self._read, daemon=True, name="zygote-reader").start()

    # -- what the zygote says --------------------------------------------------------------
    def _read(self) -> None:
        while True:
            try:
                data = self.control.recv(MESSAGE_BYTES)
                message = json.loads(data) if data else None
            except (OSError, ValueError):
                message = None
            with self._changed:
                if not isinstance(message, dict):
                    self.closed = True
                    self._changed.notify_all()
                    return
                if isinstance(message.get("ready"), int) and self.ready is None:
                    self.ready = message["ready"]
                if isinstance(message.get("forked"), int) and isinstance(message.get("pid"), int):
                    pid = message["pid"]
                    self.forked[message["forked"]] = pid
                    # a pid the sandbox gives again names the new worker from now on
                    self.exits.pop(pid, None)
                    self._pids.pop(pid, None)
                if isinstance(message.get("exited"), int) and isinstance(
                    message.get("status"), int
                ):
                    self.exits[message["exited"]] = message["status"]
                self._changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate() or self.closed, timeout)

    # -- its processes as this machine numbers them -----------------------------------------
    def namespace(self) -> str | None:
        """The sandbox's pid namespace (None without one: the none tier)."""
        if self._namespace is None and not self.spec.insecure:
            self._namespace = sandbox_namespace(self.launched.proc.pid)
        return self._namespace

    def outer_pid(self, inner: int) -> int | None:
        """The pid here of the sandbox's process ``inner``, if it is still there."""
        namespace = self.namespace()
        if namespace is None:
            return inner if self.spec.insecure else None
        if inner not in self._pids:
            for pid in namespace_members(namespace):
                if _inner_pid(pid) == inner:
                    self._pids[inner] = int(pid)
                    break
        return self._pids.get(inner)

    def serving(self) -> bool:
        """Whether the zygote can fork another worker: its sandbox and it are running, not stopped."""
        if self.closed or self.launched.proc.poll() is not None:
            return False
        if self.ready is None:
            return True  # still importing: a request waits in its socket
        try:
            if self._zygote is None:
                pid = self.outer_pid(self.ready)
                if pid is None:
                    return False
                self._zygote = psutil.Process(pid)
            return self._zygote.is_running() and self._zygote.status() not in NOT_SERVING
        except psutil.Error:
            return False

    # -- workers ---------------------------------------------------------------------------
    def fork(self) -> WorkerProcess:
        """Ask for a worker; it says 'ready' on its reply pipe once forked (after the zygote's imports)."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        request = next(self._requests)
        try:
            socket.send_fds(
                self.control, [json.dumps({"id": request}).encode()], [req_r, rep_w, out_w]
            )
        except OSError as e:
            for fd in (req_w, rep_r, out_r):
                os.close(fd)
            raise ZygoteGone(f"the sandbox's zygote is gone: {e}") from None
        finally:
            for fd in (req_r, rep_w, out_w):
                os.close(fd)
        proc = ForkedProcess(self, request)
        return WorkerProcess(
            proc,
            req_w,
            rep_r,
            OutputTap(os.fdopen(out_r, "rb")),
            self.isolation,
            verdict=lambda: self.launched.watchdog.explain() or proc.unforked(),
        )

    def sweep(self, worker: int | None) -> None:
        """SIGKILL the worker ``worker`` (its pid here, if known) and every process it started: every
        process of the sandbox but its init and the zygote, in rounds; the whole sandbox if some remain."""
        namespace = self.namespace()
        if namespace is None:  # none tier: the worker's group and descendants, as a cold start's
            if worker is not None:
                with contextlib.suppress(psutil.Error):
                    for child in psutil.Process(worker).children(recursive=True):
                        child.kill()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(worker, signal.SIGKILL)
            return
        keep = {self.outer_pid(1), self.outer_pid(self.ready) if self.ready else None}
        if None in keep:  # the zygote is not known yet: nothing here can be told apart from it
            self.close()
            return
        for _ in range(SWEEP_ROUNDS):
            victims = [
                int(p) for p in namespace_members(namespace) if int(p) not in keep and _live(p)
            ]
            if not victims:
                return
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(SWEEP_PAUSE)
        self.close()

    def close(self) -> None:
        """End the whole sandbox (the zygote and every worker) and its watch."""
        proc = self.launched.proc
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)
        self.control.close()
        self.launched.watchdog.stop()
        self.console.join()


def _zombie_status(pid: int) -> int | None:
    """The wait status a zombie ``pid`` left (``/proc/PID/stat``'s 52nd field), None if it is not one."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[ZOMBIE_STATUS_FIELD]) if fields[0] == "Z" else None
    except (OSError, IndexError, ValueError):
        return None


class ForkedProcess:
    """A worker forked by a ``Zygote``, with what ``remote.py`` uses of a ``subprocess.Popen``."""

    def __init__(self, zygote: Zygote, request: int) -> None:
        self.zygote, self.request = zygote, request
        self.returncode: int | None = None
        self.unreported = False  # it ended and nobody could say how (its zygote was gone)
        self._handle: psutil.Process | None = None

    @property
    def inner(self) -> int | None:
        return self.zygote.forked.get(self.request)

    @property
    def pid(self) -> int | None:
        """Its pid here (None before the zygote forked it, or once it is gone without a trace)."""
        inner = self.inner
        return None if inner is None else self.zygote.outer_pid(inner)

    def unforked(self) -> str | None:
        """Why it never started, or why its end says nothing, if its zygote was gone."""
        if self.unreported:
            return "it ended; how is unknown, as its parent (the sandbox's zygote) had ended too"
        if self.inner is not None or not self.zygote.closed:
            return None
        code = self.zygote.launched.proc.poll()
        return (
            f"the sandbox's zygote ended before it forked the worker (status {code}):\n"
            + self.zygote.console.console()[-CONSOLE_TAIL:]
        )

    def poll(self) -> int | None:
        """Its exit code (negative: the signal), or None while it runs: as its zygote reported it,
        else as its zombie shows it (a zygote that is stopped reaps nothing)."""
        if self.returncode is not None:
            return self.returncode
        inner = self.inner
        if inner is not None and inner in self.zygote.exits:
            self.returncode = os.waitstatus_to_exitcode(self.zygote.exits[inner])
            return self.returncode
        if self._handle is None and self.pid is not None:
            with contextlib.suppress(psutil.Error):
                self._handle = psutil.Process(self.pid)
        if self._handle is None:  # not forked yet, or gone before it was seen
            if not self.zygote.serving():
                self.returncode, self.unreported = -signal.SIGKILL, True
            return self.returncode
        with contextlib.suppress(psutil.Error):
            if self._handle.is_running() and self._handle.status() != psutil.STATUS_ZOMBIE:
                return None
        status = _zombie_status(self._handle.pid) if self._handle.is_running() else None
        if (
            status is None
            and inner is not None
            and self.zygote.wait_for(lambda: inner in self.zygote.exits, REPORT_WAIT)
        ):
            status = self.zygote.exits.get(inner)
        if status is None:
            self.returncode, self.unreported = -signal.SIGKILL, True
        else:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("worker", timeout or 0)
            self.zygote.wait_for(
                lambda: self.inner in self.zygote.exits, min(0.05, left) if left else 0.05
            )
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        self.zygote.sweep(self.pid)


class WorkerStarts:
    """``Remote``'s launcher: each call starts a worker, forked from the sandbox's zygote where the
    tier allows it (``one_at_a_time``: ``Remote`` then keeps no spare beside a running worker), else
    a cold start. A zygote that stopped serving is replaced by a new sandbox."""

    def __init__(self, spec: JudgeSpec, mirror: Mirror | None) -> None:
        self.spec, self.mirror = spec, mirror
        # a GPU run where a GPU is starts each worker cold: CUDA's driver state does not survive a
        # fork, and what the preloads import may have touched it
        cuda = spec.gpu and Path(NVIDIA_CONTROL_NODE).exists()
        self.one_at_a_time = not cuda and (spec.insecure or spec.tier != container.TIER)
        self.zygote: Zygote | None = None

    def __call__(self) -> WorkerProcess:
        if not self.one_at_a_time:
            return sandbox.start_worker(self.spec, self.mirror)
        for attempt in range(2):
            if self.zygote is not None and not self.zygote.serving():
                self.zygote.close()
                self.zygote = None
            if self.zygote is None:
                self.zygote = Zygote(self.spec)
            try:
                return self.zygote.fork()
            except ZygoteGone:
                self.zygote.close()
                self.zygote = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
