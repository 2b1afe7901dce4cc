"""Keep a worker's whole process tree within limits: memory, processes, disk, time.

The sandbox (``sandbox.py``) decides what the worker sees; this module bounds what it may use,
for the whole tree, not per process:

    memory and processes   a cgroup v2 of its own where one can be created (memory.max, pids.max),
                           else a watchdog thread that sums (with psutil) the resident memory of every
                           process in the sandbox's pid namespace (its proportional set size,
                           PSS, once that sum passes the cap: shared pages count once) and counts
                           them, killing the sandbox on a breach (the judge reports why)
    disk                   tmpfs sizes for /tmp and /dev/shm (set by the sandbox); the watchdog
                           also sums the scratch folder (in the container tier, with what the
                           worker's uid put in /tmp, /var/tmp, /dev/shm); RLIMIT_FSIZE caps any one file
    the container tier     (``container.py``) the tree is every process of the worker's own uid:
                           the watchdog counts and kills by uid (``kill_uid``), RLIMIT_NPROC caps it
    a backstop per process RLIMIT_AS (CPU runs only: CUDA maps huge address ranges), RLIMIT_CORE 0
    time                   ``test_timeout`` per test and ``run_timeout`` per submission, enforced
                           by the judge around the worker's calls
    what the judge accepts a reply frame (``reply_bytes``), its JSON part (``tree_bytes``), a tensor or array by its claimed size
                           (``value_bytes``), an exception's text (``message_chars``), a file
                           the worker wrote (``output_file_bytes``, ``output_entries``): each is
                           checked before anything is allocated, and breaking one fails the call

Deliberately left out: CPU-time fairness between concurrent submissions (``--jobs N`` shares the
cores), I/O bandwidth limits.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import stat
import threading
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import psutil

GiB = 1 << 30
MiB = 1 << 20
POLL_SECONDS = 0.1
#: World-writable folders a worker without a private /tmp can store files in (container tier).
SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
#: Copies of one reply the judge may hold at once while it decodes it: the frame, its blobs, the
#: values rebuilt from them. Whatever the worker sends, the judge's own memory stays within its
#: baseline plus ``judge_growth_bound`` (``tests/staff/test_grade_hostile.py`` measures it).
REPLY_COPIES = 3
#: Bytes of Python objects per byte of a reply's JSON part, at worst (``[[],[],...]``: a 56-byte list
#: and an 8-byte pointer per 3 bytes of JSON).
TREE_EXPANSION = 24


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's worker (its whole process tree) and of its tests."""

    memory_bytes: int = 8 * GiB
    #: RLIMIT_AS of each process (None: ``memory_bytes``); importing torch maps ~3 GiB of address space,
    #: so a memory cap below that needs a larger one here
    address_space_bytes: int | None = None
    processes: int = 64
    disk_bytes: int = 2 * GiB  # /tmp + /dev/shm tmpfs, and the scratch folder
    file_bytes: int = 1 * GiB  # RLIMIT_FSIZE: the largest single file
    reply_bytes: int = 512 * MiB  # the largest reply frame the judge reads from the worker
    # the largest JSON part of a reply (strings, numbers, lists; blobs apart)
    tree_bytes: int = 64 * MiB
    # the largest tensor/array the judge rebuilds (element count x element size)
    value_bytes: int = 512 * MiB
    # characters of a worker exception's message (and of its traceback) kept
    message_chars: int = 16_000
    # the largest file the worker writes that the judge copies back
    output_file_bytes: int = 256 * MiB
    output_entries: int = 5_000  # files and folders the judge mirrors between itself and the worker
    threads: int | None = None  # OMP/MKL threads (default: cores / jobs)
    test_timeout: float = 120.0  # seconds per test (the judge's pytest-timeout)
    run_timeout: float = 1800.0  # seconds for one submission's whole judge run


def judge_growth_bound(limits: Limits) -> int:
    """Bytes by which one reply can grow the judge: every size the worker claims is checked against a cap first."""
    return REPLY_COPIES * limits.reply_bytes + TREE_EXPANSION * limits.tree_bytes


def preexec(limits: Limits, gpu: bool, cgroup: Path | None):
    def setup() -> None:
        os.setsid()
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        if not gpu:
            space = limits.address_space_bytes or limits.memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (space, space))

    return setup


class Cgroup:
    """A cgroup v2 of the worker's own, where this process may create one (else ``create`` is None)."""

    @staticmethod
    @lru_cache(maxsize=1)
    def parent() -> Path | None:
        """The unified hierarchy's root, if it offers memory and pids and this process may write it (root)."""
        base = Path("/sys/fs/cgroup")
        try:
            controllers = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            return None  # no cgroup v2 here (v1 or hybrid): the watchdog does the job
        if {"memory", "pids"} <= controllers and os.access(base, os.W_OK):
            return base
        return None

    @staticmethod
    def create(limits: Limits) -> Path | None:
        parent = Cgroup.parent()
        if parent is None:
            return None
        try:
            subtree = (parent / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(subtree):
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            group = parent / f"cs336-worker-{uuid.uuid4().hex[:12]}"
            group.mkdir()
            (group / "memory.max").write_text(str(limits.memory_bytes))
            with contextlib.suppress(OSError):
                (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(str(limits.processes))
            with contextlib.suppress(OSError):  # an OOM kills the whole tree, not one child
                (group / "memory.oom.group").write_text("1")
            return group
        except OSError:
            return None


def _memory_bytes(process: psutil.Process, *, shared_out: bool) -> int:
    """Resident bytes of ``process`` (``statm``, microseconds to read), or with ``shared_out`` its
    proportional set size (``smaps_rollup``, ~10 ms for a torch process: each shared page shared out)."""
    try:
        return process.memory_full_info().pss if shared_out else process.memory_info().rss
    except (psutil.Error, AttributeError):  # gone, not ours, or no PSS on this kernel
        return 0


def uid_pids(uid: int) -> list[str]:
    """Every live process owned by ``uid`` (the container tier's worker tree, however it forked or
    regrouped); zombies, dead and waiting for a parent (often init) to reap them, are left out."""
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    with open(f"/proc/{pid}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                            pids.append(pid)
    return pids


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` at once: a child that becomes ``uid`` and calls kill(-1).

    kill(-1) reaches every process the caller may signal (all of that uid's but itself), so a tree
    forking as fast as it can cannot outrun it the way a scan of /proc could be outrun.
    """
    for _ in range(3):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        if not uid_pids(uid):
            return
        time.sleep(0.05)


def owned_entries(uid: int) -> list[Path]:
    """What ``uid`` created at the top of the world-writable folders (``SHARED_DIRS``)."""
    found = []
    for d in SHARED_DIRS:
        with contextlib.suppress(OSError), os.scandir(d) as it:
            for entry in it:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        found.append(Path(entry.path))
    return found


def _dir_bytes(root: Path, budget: int = 100_000, owner: int | None = None) -> int:
    """Bytes of the files under ``root`` (only those ``owner`` owns, if given)."""
    total, stack = 0, [str(root)]
    while stack and budget > 0:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as it:
            for entry in it:
                budget -= 1
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        if owner is None or st.st_uid == owner:
                            total += st.st_blocks * 512
    return total


def _owned_bytes(uid: int) -> int:
    total = 0
    for p in owned_entries(uid):
        with contextlib.suppress(OSError):
            st = p.lstat()
            total += _dir_bytes(p) if stat.S_ISDIR(st.st_mode) else st.st_blocks * 512
    return total


def children(pid: int) -> list[str]:
    """``pid``'s child processes (none once it is gone)."""
    with contextlib.suppress(psutil.Error):
        return [str(c.pid) for c in psutil.Process(pid).children()]
    return []


def sandbox_namespace(pid: int, kids: list[str] | None = None) -> str | None:
    """The pid namespace of the sandbox whose process here is ``pid`` (bubblewrap's): that of its
    child, or of ``pid`` itself; None while it is this process's own (no sandbox, or not yet made).
    ``kids``: ``children(pid)``, where the caller has them already."""
    kids = children(pid) if kids is None else kids
    try:
        ns = os.readlink(f"/proc/{kids[0] if kids else pid}/ns/pid")
        return ns if ns != os.readlink("/proc/self/ns/pid") else None
    except OSError:
        return None


def namespace_members(namespace: str) -> list[str]:
    """The pids here of every process in the pid namespace ``namespace`` (zombies included)."""
    # psutil has no namespace query, and its parent walk (children(recursive=True)) reads every
    # process's stat file: 6x the cost of these links at 10 polls a second (measured: 10 ms vs 1.6 ms)
    members = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/pid") == namespace:
                    members.append(pid)
    return members


class Watchdog:
    """Polls the worker's tree; kills it (and says why) when it breaks a limit."""

    def __init__(
        self,
        pid: int,
        limits: Limits,
        scratch: Path,
        cgroup: Path | None,
        uid: int | None = None,
        owner: int | None = None,
    ) -> None:
        self.pid, self.limits, self.scratch, self.cgroup = pid, limits, scratch, cgroup
        self.uid = uid  # container tier: the tree is every process of this uid
        # container tier: the disk used is the files of this uid
        self.owner = uid if owner is None else owner
        self.verdict: str | None = None
        self.disk_breach = False  # killed for what it wrote (the container tier then deletes it)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ns: str | None = None
        self._tick = 0
        self._processes: dict[str, psutil.Process] = {}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.cgroup is not None:
            self._kill()
            for _ in range(50):
                with contextlib.suppress(OSError):
                    self.cgroup.rmdir()
                    break
                time.sleep(0.02)

    def _members(self) -> list[str]:
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                return (self.cgroup / "cgroup.procs").read_text().split()
            return []
        if self.uid is not None:
            return uid_pids(self.uid)
        if self._ns is None:
            kids = children(self.pid)
            self._ns = sandbox_namespace(self.pid, kids)
            if self._ns is None:
                return [str(self.pid), *kids]
        return namespace_members(self._ns)

    def _process(self, pid: str) -> psutil.Process | None:
        """The psutil handle of a member, kept from poll to poll (making one reads its start time)."""
        if pid not in self._processes:
            try:
                self._processes[pid] = psutil.Process(int(pid))
            except psutil.Error:
                return None
        return self._processes[pid]

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        if self.uid is not None:
            kill_uid(self.uid)

    def _breach(self, why: str) -> None:
        self.verdict = f"the sandbox was killed: {why}"
        self._kill()

    def explain(self) -> str | None:
        """Why the worker died, if a limit killed it (read from the cgroup's events on demand)."""
        if self.verdict is None and self.cgroup is not None:
            lim = self.limits
            with contextlib.suppress(OSError, ValueError):
                events = dict(
                    line.split()
                    for line in (self.cgroup / "memory.events").read_text().splitlines()
                )
                if int(events.get("oom_kill", 0)):
                    self.verdict = (
                        f"the sandbox was killed: its processes used more than "
                        f"{lim.memory_bytes / GiB:g} GiB of memory together"
                    )
        return self.verdict

    def _run(self) -> None:
        lim = self.limits
        while not self._stop.wait(POLL_SECONDS):
            self._tick += 1
            if self.cgroup is not None:
                self.explain()  # the cgroup enforces memory and processes itself (fork fails past pids.max)
            else:
                members = self._members()
                if len(members) > lim.processes:
                    self._breach(f"{len(members)} processes, over the limit of {lim.processes}")
                    continue
                # RSS counts a page shared by several processes once per process, so its sum bounds
                # the tree's real use from above: only past the limit is the exact, costly figure
                # needed (PSS shares each page out; smaps_rollup of a torch process takes ~10 ms).
                processes = [self._process(p) for p in members]
                self._processes = {
                    p: self._processes[p] for p in members if p in self._processes
                }  # forget the dead
                used = sum(_memory_bytes(p, shared_out=False) for p in processes if p is not None)
                if used > lim.memory_bytes:
                    used = sum(
                        _memory_bytes(p, shared_out=True) for p in processes if p is not None
                    )
                if used > lim.memory_bytes:
                    self._breach(
                        f"its processes used {used / GiB:.2f} GiB of memory together, over the "
                        f"limit of {lim.memory_bytes / GiB:g} GiB"
                    )
                    continue
            if self._tick % 5 == 0:
                self.check_disk()

    def check_disk(self) -> str | None:
        """Measure what the worker wrote now, kill it if that is over the disk limit; why it was killed, if it was.

        The poll measures every half second, so a burst of writes between two polls of a short test
        would be seen only by chance: the judge also calls this after each test (``settle``), where
        no tmpfs caps the disk (the container tier), so the test that wrote the files is the one
        that fails, every time.
        """
        lim = self.limits
        # the container tier counts only this worker's uid's files: the scratch folder is shared
        # with the judge's next (spare) worker, which must not be killed for this one's
        disk = (
            _dir_bytes(self.scratch)
            if self.owner is None
            else _dir_bytes(self.scratch, owner=self.owner) + _owned_bytes(self.owner)
        )
        if disk > lim.disk_bytes and self.verdict is None:
            self.disk_breach = True
            self._breach(
                f"it wrote {disk / GiB:.2f} GiB to its scratch folder"
                f"{'' if self.owner is None else ' and the shared temporary folders'}, over the limit of "
                f"{lim.disk_bytes / GiB:g} GiB"
            )
        return self.verdict
