"""The zygote: a process in the sandbox that has imported what every worker needs, and forks workers.

A fresh worker imports torch again (seconds of CPU); a judge needs several in a run (the first, one
after each kill or crash, one for the hidden tests). The zygote imports the preloads and the public
boundary once (``main.prepare``), never the submission, and then waits on a socket from the judge
(``grade/warm.py``). Each request carries three pipe ends (requests, replies, output); the zygote
empties the sandbox's private ``/tmp`` and ``/dev/shm`` where they are its own (bubblewrap's
tmpfs: each worker finds them as a fresh sandbox would), forks, and the child becomes a worker on those pipes (``main.serve``, handed in): it imports the
submission there, so nothing of the submission is ever in the zygote.

Messages to the judge, one JSON object per datagram: ``{"ready": pid}`` once, ``{"forked": id,
"pid": pid}`` per request, ``{"exited": pid, "status": wait_status}`` when a worker ends (the judge
describes a crash from it). Pids are the sandbox's own numbers.

The zygote makes itself non-dumpable: its workers run as its uid, and a non-dumpable process can be
neither traced nor read or written through ``/proc`` by them. They can still signal it; the judge
checks it is running before each request and starts a new sandbox when it is not. What a worker can
do to the zygote can only change that submission's own later workers.

Deliberately left out: more than one request at a time (the judge runs one worker per sandbox), and
anything the submission could ask for (the socket is closed in every worker).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import sys
from collections.abc import Callable

#: ``prctl`` options (linux/prctl.h).
PR_SET_DUMPABLE = 4
#: Bytes of one request datagram the zygote reads.
REQUEST_BYTES = 4096
#: Pipe ends per request: requests, replies, output.
FDS_PER_WORKER = 3
#: The sandbox's private temporary folders, emptied before each fork.
PRIVATE_TMP = ("/tmp", "/dev/shm")


def set_dumpable(value: bool) -> None:
    """``prctl(PR_SET_DUMPABLE, value)``; OSError if the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, int(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def mount_points() -> list[str]:
    """Every mount point this process sees (``/proc/self/mountinfo``'s fifth field)."""
    try:
        with open("/proc/self/mountinfo") as f:
            return [line.split()[4] for line in f if len(line.split()) > 4]
    except OSError:
        return []


def empty(folder: str, mounts: list[str]) -> None:
    """Remove everything in ``folder`` (a worker's leftovers) but the mounts in it and the folders on
    the way to them: the scratch copy and the read-only trees are bound below ``/tmp`` when their
    paths on the host are there, and they are not the zygote's to delete."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            path = entry.path
            if any(m == path or m.startswith(path + "/") for m in mounts):
                if path not in mounts and entry.is_dir(follow_symlinks=False):
                    empty(path, mounts)
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)


def _send(sock: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):  # the judge went away: the loop ends at its next read
        sock.send(json.dumps(message).encode())


def own_pid_namespace() -> bool:
    """Whether this process is in a sandbox's pid namespace (bubblewrap's init is its pid 1): only
    there may ``kill(-1)`` end "everything else", which on a machine would be every process."""
    try:
        with open("/proc/1/comm") as f:
            return f.read().strip() == "bwrap" and os.getpid() != 1
    except OSError:
        return False


class Workers:
    """The zygote's one worker at a time, and the end of everything it left behind."""

    def __init__(self, sock: socket.socket, sandboxed: bool) -> None:
        self.sock, self.sandboxed = sock, sandboxed
        self.current: int | None = None

    def end_leftovers(self) -> None:
        """SIGKILL every other process of the sandbox but its init: what the worker started (in one
        step, which a forking tree cannot outrun); without a sandbox, the worker's process group."""
        if self.sandboxed:
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)
        elif self.current is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.current, signal.SIGKILL)

    def reap(self, block: bool = False) -> None:
        """Wait for the workers that ended, tell the judge how each did, and end what the current one
        left (as a cold-started worker's sandbox ends with it). ``block``: end the current one first,
        and wait for it (before the next fork, so no later exit is taken for the new worker's)."""
        if block and self.current is not None:
            self.end_leftovers()
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(self.current, 0)
                self._ended(self.current, status)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._ended(pid, status)

    def _ended(self, pid: int, status: int) -> None:
        if pid == self.current:
            self.end_leftovers()
            self.current = None
        _send(self.sock, {"exited": pid, "status": status})


def _become_worker(
    sock: socket.socket, wakeup: tuple[int, int], fds: list[int], serve: Callable[[int, int], int]
) -> None:
    """In the forked child: drop the zygote's ends, take the request's pipes, be a worker; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wakeup:
            os.close(fd)
        os.setsid()  # its own process group, as a freshly started worker has
        set_dumpable(True)
        requests, replies, output = fds
        # the command line a cold-started worker has (its pipes by number), as the submission sees it
        preloads = [
            a for i, a in enumerate(sys.argv) if a == "--preload" or sys.argv[i - 1] == "--preload"
        ]
        sys.argv = [sys.argv[0], "--requests", str(requests), "--replies", str(replies), *preloads]
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        code = serve(requests, replies)
    except BaseException:  # noqa: BLE001 - reported on the output the judge reads, then gone
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def serve_forks(control: int, sandboxed: bool, serve: Callable[[int, int], int]) -> int:
    """Answer the judge's requests on the socket ``control`` until it closes; each one forks a worker.

    ``sandboxed``: the pid namespace, ``/tmp`` and ``/dev/shm`` are the sandbox's own (bubblewrap):
    what a worker leaves is ended and emptied before the next fork. Never without a sandbox, where
    they are the machine's (and checked here again: ``own_pid_namespace``). Each child runs
    ``serve(requests, replies)`` (``main.serve``) and exits with what it returns.
    """
    sandboxed = sandboxed and own_pid_namespace()
    sock = socket.socket(fileno=control)
    set_dumpable(False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a worker that ends wakes the loop
    workers = Workers(sock, sandboxed)
    _send(sock, {"ready": os.getpid()})
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 512)
        workers.reap()
        if sock.fileno() not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, REQUEST_BYTES, FDS_PER_WORKER)
        except OSError:
            return 0
        if not data:  # the judge closed its end
            return 0
        request = json.loads(data)
        if len(fds) != FDS_PER_WORKER:
            for fd in fds:
                os.close(fd)
            _send(sock, {"refused": request.get("id"), "why": f"{len(fds)} pipe ends"})
            continue
        workers.reap(block=True)
        if sandboxed:
            mounts = mount_points()
            for folder in PRIVATE_TMP:
                empty(folder, mounts)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_worker(sock, (wake_r, wake_w), fds, serve)
        workers.current = pid
        for fd in fds:
            os.close(fd)
        _send(sock, {"forked": request.get("id"), "pid": pid})
