"""The judge's side of the line: send one call to the worker, get plain data or an exception back.

``Remote`` owns one worker process at a time (started through a launcher: normally
``warm.WorkerStarts``, which forks it from the bubblewrap sandbox's zygote) and implements ``tests.boundary.Remote``: ``call`` (an adapter) and
``drive`` (a driver) are each one round trip, plain data in and plain data out
(``cs336_staff/worker/codec.py``), with the test's scratch folder mirrored around it
(``mirror.py``). It never imports submission code and never unpickles. What a test sees when a call
fails is in ``errors.py``; the worker's printed output is read by ``output.py``.

Deliberately left out: running several calls at once, objects kept in the worker between calls
(a driver observes everything a test needs of an object in one call), and retrying a call (a
retried call could pass by luck; a crash is the submission's failure).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from cs336_staff.grade.errors import (
    MESSAGE_CHARS,
    FromWorker,
    NotPlainData,
    WorkerCrashed,
    WorkerOutputRefused,
    WorkerProtocolError,
    WorkerUnavailable,
    rebuild_exception,
)
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.mirror import Mirror, MirrorRefused
from cs336_staff.grade.output import PRINTED_CHARS, OutputTap
from cs336_staff.worker import channel, codec

REPLY_LIMIT = Limits.reply_bytes  # bytes in one reply: a flood cannot grow the judge past this
NOT_PLAIN_CHARS = 2000  # characters of the worker's explanation of a result that is not plain data
MARK_WAIT = 10.0  # seconds the judge waits for the worker's output mark to come through its reader
# seconds between the judge's looks for the moment to kill a worker (``call_killed``)
KILL_POLL = 0.01
# seconds between looks at a worker's process while the judge waits for its 'ready' or a reply
READY_POLL = 0.25


class WorkerProc(Protocol):
    """What the judge uses of a worker's process: a ``subprocess.Popen`` (a cold start), or a
    ``warm.ForkedProcess`` (forked by the sandbox's zygote). ``pid`` is None while it is not known."""

    @property
    def pid(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


@dataclass
class WorkerProcess:
    """A started worker: its process, the two pipe ends the judge uses, and its output."""

    proc: WorkerProc
    requests: int  # the judge writes requests here
    replies: int  # and reads replies here
    output: OutputTap
    isolation: dict[str, str] = field(default_factory=dict)
    cleanup: Callable[[], None] | None = None  # e.g. stop a resource watchdog
    verdict: Callable[[], str | None] | None = None  # why it was killed, if a watchdog did it
    # e.g. hand the scratch folder to the worker's uid
    before_request: Callable[[], None] | None = None
    #: After each test: check now a limit that a poll may miss (the container tier's disk); why it was killed, if it was.
    settle: Callable[[], str | None] | None = None
    _ended: bool = field(default=False, repr=False)
    _ending: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def kill(self) -> None:
        """End the worker and close its pipes, once (a spare's ``close`` and its wait for 'ready' may both)."""
        with self._ending:
            if self._ended:
                return
            self._ended = True
        kill_tree(self.proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.cleanup is not None:
            self.cleanup()
        self.output.join()


Launcher = Callable[[], WorkerProcess]


def kill_tree(proc: WorkerProc) -> None:
    """SIGKILL a worker now, with everything it started, not waiting: a process started here (its
    session: bubblewrap's, which takes the sandbox with it), or a forked one (``warm.ForkedProcess``,
    whose ``kill`` ends its processes in the sandbox)."""
    if isinstance(proc, subprocess.Popen):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def describe_exit(proc: WorkerProc, verdict: str | None = None) -> str:
    code = proc.poll()
    if verdict:
        return verdict
    if code is None:
        return "it stopped answering"
    # bwrap reports 128 + signal
    signum = -code if code < 0 else code - 128 if 128 < code < 160 else None
    if signum is not None:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return f"it was killed by {name}" + (" (a segmentation fault)" if name == "SIGSEGV" else "")
    return f"it exited with status {code}"


def _replies_before_ending(worker: WorkerProcess, deadline: float | None = None) -> bool:
    """Wait until the worker's reply pipe has something to read (or its end): True; False if its
    process ended first with the pipe still silent; True at ``deadline`` (``channel.receive`` then
    reports the timeout). Its end alone may close no pipe: a worker forked by a zygote holds the
    pipes' other ends with it for a moment after the fork, and one asked of a zygote that was
    stopped before it forked never exists. Only the process's state (``ForkedProcess.poll``: ended,
    or unforked by a zygote that stopped serving) tells the judge that no reply will come."""
    watch = select.poll()
    watch.register(worker.replies, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        left = READY_POLL if deadline is None else max(0.0, deadline - time.monotonic())
        if watch.poll(min(READY_POLL, left) * 1000):
            return True
        if worker.proc.poll() is not None:
            return bool(watch.poll(0))  # what it wrote before it ended is still read
        if deadline is not None and time.monotonic() >= deadline:
            return True


class Remote:
    """One worker at a time; ``call`` and ``drive`` are what ``tests.boundary`` and the adapters proxy use."""

    def __init__(
        self,
        launch: Launcher,
        *,
        max_starts: int = 12,
        startup_timeout: float = 300.0,
        reply_limit: int = REPLY_LIMIT,
        value_limit: int | None = Limits.value_bytes,
        message_chars: int = MESSAGE_CHARS,
        mirror: Mirror | None = None,
        tree_limit: int | None = Limits.tree_bytes,
    ) -> None:
        self._launch = launch
        self.max_starts, self.startup_timeout, self.reply_limit = (
            max_starts,
            startup_timeout,
            reply_limit,
        )
        # the largest tensor/array a reply may claim (codec.check_value_size)
        self.value_limit = value_limit
        self.message_chars = message_chars
        self.tree_limit = tree_limit  # the largest JSON part of a reply (channel.tree_size_problem)
        # the judge's scratch and the worker's copy of it, synced per call
        self.mirror: Mirror | None = mirror
        self.worker: WorkerProcess | None = None
        self.starts = 0
        self.crashes = 0  # workers that ended badly (crash, timeout, unusable reply)
        self.consoles: list[str] = []
        self.isolation: dict[str, str] = {}
        self.last_crash: str | None = None
        self._marks = 0  # output marks written so far (``printed``)
        self._reset_pending = False  # the next request carries a reset (``reset``)
        # spares, oldest first: each one's process (None if it failed to launch) and its wait for 'ready'
        self._spares: deque[tuple[WorkerProcess | None, Future[WorkerProcess]]] = deque()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="worker-ready")

    # -- lifecycle -----------------------------------------------------------------------
    def _spawn(self) -> WorkerProcess:
        """Launch a worker and wait for its 'ready' (sent once its preloads are imported)."""
        return self._wait_ready(self._launch())

    def _wait_ready(self, worker: WorkerProcess) -> WorkerProcess:
        deadline = time.monotonic() + self.startup_timeout
        try:
            if not _replies_before_ending(worker, deadline):
                raise channel.ChannelClosed("it ended before it said 'ready'")
            msg, _ = channel.receive(worker.replies, 1 << 16, deadline)
        except (channel.ChannelClosed, channel.ChannelError, channel.ChannelTimeout) as e:
            why = describe_exit(worker.proc) if isinstance(e, channel.ChannelClosed) else str(e)
            worker.kill()
            self._keep_console(worker)
            raise WorkerUnavailable(
                f"the worker did not start ({why}):\n{worker.output.console()[-3000:]}"
            ) from None
        if "ready" not in msg:
            worker.kill()
            raise WorkerUnavailable(f"the worker's first message was not 'ready': {str(msg)[:200]}")
        return worker

    def prepare_spare(self) -> None:
        """Start a worker now and let it get ready in the background for the next ``start``.

        A spare has answered no call, so it is as fresh as one started later: the judge uses one
        for the hidden tests, started while the visible tests run. The process is launched from
        the calling thread (bubblewrap's --die-with-parent follows the thread that forked it);
        only the wait for 'ready' runs in a helper thread. Nothing is started while a spare waits.
        """
        if not self._spares and self._may_add_spare():
            self._add_spare()

    def _may_add_spare(self) -> bool:
        """Whether a spare may start now: always, unless the launcher's workers share one sandbox
        (``warm.WorkerStarts.one_at_a_time``, where a worker forks in a fraction of a second): then
        only while no worker runs and no spare waits."""
        if not getattr(self._launch, "one_at_a_time", False):
            return True
        return self.worker is None and not self._spares

    def want_spares(self, count: int) -> None:
        """Aim at ``count`` spares (the judge's count of fresh workers the rest of its run needs),
        started one at a time: another once the last one is ready, so that their start-ups, seconds
        of CPU each, spread over the tests instead of piling onto one. Spares beyond ``count``
        end now, the newest first. Called before each test."""
        while len(self._spares) > count:
            launched, ready = self._spares.pop()
            if launched is not None:
                launched.kill()
            with contextlib.suppress(Exception):
                self._keep_console(ready.result())
        if (
            len(self._spares) < count
            and all(ready.done() for _, ready in self._spares)
            and self._may_add_spare()
        ):
            self._add_spare()

    def _add_spare(self) -> None:
        try:
            worker = self._launch()
        except Exception as e:  # noqa: BLE001 - reported when the spare is used
            failed: Future[WorkerProcess] = Future()
            failed.set_exception(WorkerUnavailable(f"the worker did not start: {e}"))
            self._spares.append((None, failed))
            return
        self._spares.append((worker, self._pool.submit(self._wait_ready, worker)))

    def start(self) -> WorkerProcess:
        """Make a worker current: the spare if one was prepared, else a new one (a call starts one when none is)."""
        if self.starts >= self.max_starts:
            raise WorkerUnavailable(
                f"the worker was started {self.starts} times already (it crashed or timed out each time); "
                "the remaining calls are not run"
            )
        self.starts += 1
        spare = self._spares.popleft()[1] if self._spares else None
        worker = spare.result() if spare is not None else self._spawn()
        self.isolation = worker.isolation
        self.worker = worker
        return worker

    def _keep_console(self, worker: WorkerProcess) -> None:
        text = worker.output.console()
        if text:
            self.consoles.append(text)

    def restart(self) -> None:
        """Stop the current worker; the next call starts a fresh one."""
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.kill()
            self._keep_console(worker)

    def settle(self) -> None:
        """After a test: the limits a poll may miss are checked now (``WorkerProcess.settle``), so the test
        that broke one fails, not the next one or none. WorkerCrashed if one was broken."""
        __tracebackhide__ = True
        worker = self.worker
        why = worker.settle() if worker is not None and worker.settle is not None else None
        if why:
            self.restart()
            self.crashes += 1
            self.last_crash = why
            raise WorkerCrashed(f"the worker running your code was stopped after this test: {why}")

    def close(self) -> None:
        self.restart()
        while self._spares:
            launched, ready = self._spares.popleft()
            if launched is not None:
                launched.kill()  # not waited for: a spare still importing ends now
            with contextlib.suppress(Exception):
                self._keep_console(ready.result())
        close = getattr(self._launch, "close", None)  # a launcher that keeps a sandbox (warm.py)
        if close is not None:
            close()

    def take_output(self) -> str:
        return self.worker.output.take() if self.worker is not None else ""

    def printed(self) -> str:
        """What the worker printed (stdout and stderr, one stream) since the last take, all of it: the
        worker flushes and writes a mark after it, and the judge's reader waits for the mark."""
        if self.worker is None:
            return ""
        self._marks += 1
        mark = f"\n[cs336 judge: output mark {self._marks}]\n"
        self._request({"op": "mark"}, [mark], {})
        return (
            self.worker.output.take(through=mark, timeout=MARK_WAIT, limit=PRINTED_CHARS)
            if self.worker is not None
            else ""
        )

    def worker_path_stamp(self, path: str | os.PathLike) -> tuple[int, int, int] | None:
        """``(inode, mtime_ns, size)`` of the worker's copy of ``path`` (a path in the judge's folder)
        now, mid-call, or None if there is none: an ``lstat``, nothing read. Only the timing of a kill
        may depend on it, never an outcome. (A file the judge wrote is copied in before each call that
        names its folder, which changes this stamp; one the worker wrote stays as it left it.)"""
        where = os.path.abspath(path)
        if self.mirror is not None:
            root = str(self.mirror.judge)
            # container tier: mid-call the worker's copy is at the judge's path
            if where.startswith(root + os.sep):
                where = os.path.join(self.mirror.worker_now(), where[len(root) + 1 :])
        try:
            st = os.lstat(where)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def call_killed(
        self,
        target: str,
        args: tuple | list,
        kwargs: dict,
        *,
        once: Callable[[], bool],
        after: float,
    ) -> tuple[Any, bool, str]:
        """Make one call, and SIGKILL the worker running it ``after`` seconds once ``once()`` holds.

        Returns ``(value, killed, printed)``: the call's value (None if killed), whether the judge
        killed it, and what the worker printed meanwhile. Files the worker wrote before the kill are
        pulled as after any call (``mirror.py``); the next call starts a fresh worker. A kill the judge
        ordered is not counted as a crash; an exception of the call propagates as from ``call``.
        """
        __tracebackhide__ = True
        worker = self.worker or self.start()
        # the next call needs a fresh worker once this one is killed: one starts now if none is
        # (the judge starts one ahead for each test that may kill: Judge.pytest_runtestloop)
        self.prepare_spare()
        lock, done, killed = threading.Lock(), threading.Event(), threading.Event()

        def kill_when_due() -> None:
            while not done.is_set() and not once():
                done.wait(KILL_POLL)
            if done.wait(after):
                return
            with lock:
                if not done.is_set():
                    killed.set()
                    kill_tree(worker.proc)

        killer = threading.Thread(target=kill_when_due, daemon=True, name="judge-kill-timer")
        killer.start()
        try:
            value = self.call(target, args, kwargs)
        except WorkerCrashed:
            if not killed.is_set():
                raise
            self.crashes -= 1  # the judge's own kill: the submission did not crash
            return None, True, worker.output.take(limit=PRINTED_CHARS)
        finally:
            with lock:
                done.set()
            killer.join()
        if killed.is_set():  # killed just after it answered: the answer stands, the worker is gone
            self.restart()
            return value, False, worker.output.take(limit=PRINTED_CHARS)
        return value, False, self.printed()

    def worker_pids(self) -> list[int]:
        """The current worker's processes as this machine numbers them (the launcher's and all its
        descendants'), for what the judge reads from outside, such as peak memory in ``/proc``;
        empty when no worker runs. The spare is not among them."""
        import psutil

        pid = self.worker.proc.pid if self.worker is not None else None
        if pid is None:
            return []
        try:
            root = psutil.Process(pid)
            return [root.pid, *(p.pid for p in root.children(recursive=True))]
        except psutil.Error:
            return []

    # -- calls ---------------------------------------------------------------------------
    def call(self, target: str, args: tuple | list, kwargs: dict) -> Any:
        """Call the adapter ``target`` (``adapters:run_...``) in the worker: one round trip."""
        __tracebackhide__ = True
        return self._request({"op": "call", "target": target}, args, kwargs)

    def drive(self, target: str, args: tuple | list, kwargs: dict) -> Any:
        """Run the driver ``target`` (``tests.boundary.driver``) in the worker: one round trip."""
        __tracebackhide__ = True
        return self._request({"op": "call", "target": target}, args, kwargs)

    def reset(self) -> None:
        """Between tests: the worker's global RNGs go back to their start state (a student's run seeds
        them at each test's start) before it handles the test's first request, which carries the
        reset: no round trip of its own (a test that calls nothing sends nothing). A worker that
        ended since the last test (a limit's kill, a thread of the submission that exited) is
        counted as a crash and replaced now, so the test starts with a fresh one."""
        worker = self.worker
        if worker is not None and worker.proc.poll() is not None:
            self.last_crash = describe_exit(
                worker.proc, worker.verdict() if worker.verdict else None
            )
            self.restart()
            self.crashes += 1
        self._reset_pending = True

    def _request(self, head: dict, args: tuple | list, kwargs: dict) -> Any:
        """One call, with the scratch folders mirrored around it (``mirror.py``) where the judge has a mirror."""
        __tracebackhide__ = True
        mirror = self.mirror
        scopes = mirror.scopes([args, kwargs]) if mirror is not None else []
        if mirror is None or not scopes:  # a call that names no file in the judge's folder
            return self._exchange(head, args, kwargs)
        try:
            mirror.push(scopes)
        except MirrorRefused as e:
            raise WorkerOutputRefused(f"before {head.get('target') or head['op']}: {e}") from None
        try:
            value = self._exchange(head, args, kwargs)
        except FromWorker:
            # the submission's own error: what it left behind is copied back all the same
            self._pull(mirror, head, scopes)
            raise
        except BaseException:
            # a crash or a timeout: copy back what can be, and report the first failure
            with contextlib.suppress(Exception):
                self._pull(mirror, head, scopes)
            raise
        self._pull(mirror, head, scopes)
        return value

    def _pull(self, mirror: Mirror, head: dict, scopes: list[str]) -> None:
        __tracebackhide__ = True
        try:
            mirror.pull(scopes)
        except MirrorRefused as e:
            raise WorkerOutputRefused(f"after {head.get('target') or head['op']}: {e}") from None

    def _exchange(self, head: dict, args: tuple | list, kwargs: dict) -> Any:
        __tracebackhide__ = True
        worker = self.worker or self.start()
        if worker.before_request is not None:
            worker.before_request()
        encoder = codec.Encoder()
        message = {
            **head,
            "reset": self._reset_pending,
            "args": encoder.encode(list(args)),
            "kwargs": encoder.encode(dict(kwargs)),
        }
        message["storages"] = encoder.storages
        what = head.get("target") or head["op"]
        try:
            channel.send(worker.requests, message, encoder.blobs)
            self._reset_pending = False
            if not _replies_before_ending(worker):
                raise channel.ChannelClosed("it ended without a reply")
            reply, blobs = channel.receive(
                worker.replies, self.reply_limit, tree_limit=self.tree_limit
            )
        except (channel.ChannelClosed, BrokenPipeError):
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(timeout=5)
            why = describe_exit(worker.proc, worker.verdict() if worker.verdict else None)
            printed = worker.output.console()[-1500:]
            self.restart()
            self.crashes += 1
            self.last_crash = why
            raise WorkerCrashed(
                f"the worker running your code ended during {what}: {why}"
                + (f"\nlast output:\n{printed}" if printed.strip() else "")
            ) from None
        except channel.ChannelError as e:
            self.restart()
            self.crashes += 1
            raise WorkerProtocolError(f"the worker's reply to {what} was unusable: {e}") from None
        except BaseException:  # a timeout or interrupt mid-call: the worker's state is unknown
            self.restart()
            self.crashes += 1
            raise
        if "not_plain" in reply:
            raise NotPlainData(str(reply["not_plain"])[:NOT_PLAIN_CHARS])
        if "error" in reply:
            exc = rebuild_exception(
                reply["error"] if isinstance(reply["error"], dict) else {}, self.message_chars
            )
            del (
                reply,
                blobs,
            )  # the raised exception keeps this frame: it must not keep the reply's megabytes
            raise exc
        try:
            decoder = codec.Decoder(
                reply.get("storages", []),
                blobs,
                known=encoder.storage_objects,
                allow_memmap=False,
                max_value_bytes=self.value_limit,
            )
            value = decoder.decode(reply.get("ok"))
            for index, data in reply.get("mutated", []):  # an argument tensor the call wrote into
                target = encoder.storage_objects[index]
                flat = codec.storage_as_bytes_tensor(target)
                flat.copy_(codec.bytes_tensor(decoder.blobs[data]).to(flat.device))
            # an argument generator the call drew from
            for index, data in reply.get("generators", []):
                encoder.generators[index].set_state(codec.bytes_tensor(decoder.blobs[data]))
        except Exception as e:  # a malformed reply is the worker's failure, never the judge's
            self.restart()
            raise WorkerProtocolError(
                f"the worker's reply to {what} could not be decoded: {type(e).__name__}: {e}"
            ) from None
        return value
