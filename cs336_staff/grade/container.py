"""The container tier: where bubblewrap cannot start but the grader is root, the worker runs as a uid of its own.

Gradescope, Docker and many CI runners grade as root inside a container whose seccomp profile
forbids the user namespaces bubblewrap needs. There the worker is isolated by the kernel's oldest
boundary, the uid:

    identity      each worker process tree runs as a uid no other worker, concurrent or later, ever
                  gets: handed out once from ``UID_RANGES`` by a counter in a root-only state folder
                  (``STATE_DIRS``: /run, so it starts over only at a reboot, which no worker process
                  survives and after which ``sweep`` finds every file an earlier one left), never a
                  uid in /etc/passwd, in another user's /etc/subuid range or owning anything; past the
                  last uid grading stops with an error that says how to start over (``reset-uids``).
                  The judge's own group ``gid`` comes from the same counter. No other groups, its
                  own session and process group, no capabilities (a non-root uid), ``no_new_privs``
                  set (no setuid binary gives it anything), no POSIX message queues
                  (``RLIMIT_MSGQUEUE`` 0), and its own IPC namespace where the kernel allows one
    one at a time the grader grades one submission at a time on this tier, machine-wide
                  (``one_submission_at_a_time``: a lock in the state folder), since two uids share
                  /tmp, the loopback network and (without an IPC namespace) SysV IPC; before each
                  submission and after it, ``sweep`` kills every process of an earlier worker uid,
                  deletes what any of them left in the world-writable folders (found at any depth:
                  ``world_writable_roots``) and their SysV IPC objects, and checks that nothing is
                  left, else grading stops, naming it; each worker's own end (``Claim.release``)
                  does the same for its uid
    files         the staff tree must be unreadable by other users (``probe`` refuses otherwise;
                  ``run_autograder`` makes it 0700); the judge's folder is 0711 with its spec and
                  results 0600, so the worker reaches only the staged submission (group-readable,
                  read-only), its home and its copy of the judge's scratch folder (``mirror.py``:
                  the two swap names around each call, so the judge's own stays the judge's, 0700),
                  which the judge hands over to the worker's uid before each call (``Handover``:
                  directories, and files with one link, found without following symlinks); the
                  batch's output folder is made 0700 and the uploads lose every permission of
                  other users (``batch.private_to_the_grader``), checked by a fresh uid's attempt
                  to open each (``readable_by_others``)
    limits        the same as elsewhere (``limits.py``: cgroup or watchdog, rlimits); the watchdog
                  finds the tree by its uid, so a child that leaves the process group is still
                  counted and killed, and counts the disk use of that uid's files only;
                  ``RLIMIT_NPROC`` caps the uid's processes in the kernel
    network       dropped with a network namespace of its own where the kernel allows it (not under
                  Docker's default seccomp profile, which needs CAP_SYS_ADMIN for it); the result's
                  isolation record says which (abstract unix sockets belong to the network
                  namespace: where there is none of its own, the worker's die with its processes)

Deliberately left out: a private /proc (the worker sees other processes' command lines, never
their files), disk quotas in /tmp (the watchdog samples the uid's leftovers at the top of /tmp,
/var/tmp and /dev/shm), the metadata of shared folders (a worker can set when /tmp last changed;
the next one can read it), files another account made world-writable (written into, never
removed), grading submissions at once (a private /tmp needs the mount namespace Docker refuses).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import pwd
import resource
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cs336_staff.grade.limits import kill_uid, uid_pids

#: uids (and gids) the container tier hands out, each once: first below 65536, so they map inside a
#: container's user namespace of 65536 ids, above the ranges distributions give to users and services;
#: then, where this process's user namespace maps them (not a 65536-id container), a large range
#: far above any account or /etc/subuid range a distribution makes.
UID_RANGE = range(61000, 65000)
HIGH_RANGE = range(1 << 30, (1 << 30) + (1 << 24))
UID_RANGES = (UID_RANGE, HIGH_RANGE)
#: Root-only folders for the uid counter, the claims (one flock-held file per live uid) and the
#: one-submission lock; the first that works is used. /run is emptied at each boot.
STATE_DIRS = ("/run/cs336-grade-uids", "/tmp/cs336-grade-uids")
LOCK_DIRS = STATE_DIRS
TIER = "container"
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
PR_SET_NO_NEW_PRIVS = 38
IPC_RMID = 0
DESCRIPTION = (
    "container tier: a uid of its own never given to another worker (no capabilities, "
    "no_new_privs, own session), one submission at a time with every earlier worker's leftovers "
    "removed, staff files unreadable by permissions, its own copy of the scratch folder swapped "
    "in per call"
)
#: Folders a worker cannot reach or write in: never walked (the world-writable ones under /dev are
#: named in ``DEV_SHARED``).
NOT_WALKED = ("/proc", "/sys", "/dev")
DEV_SHARED = ("/dev/shm", "/dev/mqueue")


def _state_dir() -> Path:
    for d in STATE_DIRS:
        p = Path(d)
        with contextlib.suppress(OSError):
            p.mkdir(mode=0o700, exist_ok=True)
            st = p.lstat()
            if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o077:
                return p
    raise RuntimeError(f"no root-only folder for uid claims among {', '.join(STATE_DIRS)}")


_lock_dir = _state_dir


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _mapped(ids: range, map_file: str) -> bool:
    """Whether this process's user namespace maps every id of ``ids`` (/proc/self/uid_map)."""
    try:
        lines = Path(map_file).read_text().split("\n")
    except OSError:
        return ids is UID_RANGE
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            inside, count = int(parts[0]), int(parts[2])
            if inside <= ids.start and ids.stop <= inside + count:
                return True
    return False


@lru_cache(maxsize=1)
def usable_ranges() -> tuple[range, ...]:
    """The ranges of ``UID_RANGES`` this process can hand out here (uid and gid both mapped)."""
    return tuple(
        r
        for r in UID_RANGES
        if _mapped(r, "/proc/self/uid_map") and _mapped(r, "/proc/self/gid_map")
    )


@lru_cache(maxsize=1)
def _subordinate() -> tuple[range, ...]:
    """Other users' /etc/subuid and /etc/subgid ranges: in a user namespace of theirs, those ids are theirs."""
    found = []
    for f in ("/etc/subuid", "/etc/subgid"):
        with contextlib.suppress(OSError):
            for line in Path(f).read_text().splitlines():
                parts = line.strip().split(":")
                if len(parts) == 3 and parts[0] not in ("root", "0"):
                    with contextlib.suppress(ValueError):
                        found.append(range(int(parts[1]), int(parts[1]) + int(parts[2])))
    return tuple(found)


def in_ranges(uid: int) -> bool:
    return any(uid in r for r in UID_RANGES)


def _in_use(uid: int) -> bool:
    """Whether some account, some other user's subordinate range or a running process has this uid."""
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    return _subordinate_end(uid) is not None or bool(uid_pids(uid))


def _subordinate_end(uid: int) -> int | None:
    """The end of another user's subordinate range holding ``uid``, if one does."""
    return next((r.stop for r in _subordinate() if uid in r), None)


def _next_uid(state: Path) -> int:
    """The next uid never handed out (the counter of each range advances; none goes back)."""
    with _locked(state / "counter.lock"):
        for r in usable_ranges():
            counter = state / f"next-{r.start}-{r.stop}"
            try:
                uid = max(r.start, int(counter.read_text()))
            except (OSError, ValueError):
                uid = r.start
            while uid < r.stop and _in_use(uid):
                uid = _subordinate_end(uid) or uid + 1  # a whole subordinate range at once
            if uid < r.stop:
                tmp = counter.with_suffix(".tmp")
                tmp.write_text(str(uid + 1))
                os.replace(tmp, counter)
                return uid
            counter.write_text(str(r.stop))
    spans = ", ".join(f"{r.start}-{r.stop - 1}" for r in usable_ranges()) or "none mapped here"
    raise RuntimeError(
        f"every worker uid ({spans}) has been handed out once since {state} was made; a uid is "
        "never given twice, so grading stops: reboot, or run `python -m cs336_staff.grade.container "
        "reset-uids` while no grader runs (it removes what earlier workers left, then starts over)"
    )


@dataclass
class Claim:
    """A uid never handed out before, held (flock on its file) until ``release``."""

    uid: int
    _fd: int

    @classmethod
    def take(cls) -> Claim:
        state = _state_dir()
        while True:
            uid = _next_uid(state)
            fd = os.open(state / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return cls(uid, fd)
            except BlockingIOError:  # held by a grader that claims uids otherwise: the next one
                os.close(fd)

    def release(self) -> None:
        """Kill whatever still runs as this uid, delete what it left where others can reach, free it;
        raises if something is left (``clean``)."""
        if self._fd < 0:
            return
        try:
            clean(self.uid)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(_state_dir() / str(self.uid))
            os.close(self._fd)
            self._fd = -1


def held(uid: int) -> bool:
    """Whether a live ``Claim`` holds ``uid`` (its file is flock-held)."""
    try:
        fd = os.open(_state_dir() / str(uid), os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


# -- what a worker can leave where others reach it ------------------------------------------------


#: File systems never walked for world-writable folders: the kernel's, and network ones (a walk of
#: an NFS home would take minutes; a folder there is shared with other machines anyway).
SKIPPED_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "fuse",
    "autofs",
    "9p",
    "ceph",
    "lustre",
    "gpfs",
)


def _skipped_mounts() -> set[str]:
    skipped = set(NOT_WALKED)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2].split(".")[0] in SKIPPED_FS:
                skipped.add(parts[1].replace("\\040", " "))
    return skipped


def _discover_roots() -> list[str]:
    """Every world-writable folder another user can reach, outside other world-writable ones: a walk
    of the machine (but /proc, /sys, /dev and network file systems) through folders others may pass
    (o+x)."""
    found = [d for d in DEV_SHARED if _world_writable(d)]
    skipped = _skipped_mounts()
    stack = ["/"]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as it:
            for entry in it:
                with contextlib.suppress(OSError):
                    if entry.path in skipped or not entry.is_dir(follow_symlinks=False):
                        continue
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if not mode & 0o001:
                        continue  # others cannot pass: nothing below is theirs to reach
                    if mode & 0o002:
                        found.append(entry.path)  # swept at any depth every time
                    else:
                        stack.append(entry.path)
    return sorted(found)


def _world_writable(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and bool(st.st_mode & 0o002) and bool(st.st_mode & 0o001)


@lru_cache(maxsize=1)
def world_writable_roots() -> tuple[str, ...]:
    """The world-writable folders of this machine (``_discover_roots``), found once per boot (the walk
    takes seconds) and kept in the state folder; /tmp, /var/tmp, /dev/shm, /run/lock always."""
    state = _state_dir()
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "unknown"
    cache = state / f"world-writable-{boot}.json"
    try:
        roots = json.loads(cache.read_text())
    except (OSError, ValueError):
        roots = _discover_roots()
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(roots))
        os.replace(tmp, cache)
    always = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
    return tuple(sorted({*roots, *(d for d in always if _world_writable(d))}))


def leftovers(owned: Callable[[int], bool]) -> list[tuple[int, str]]:
    """(uid, path) of what a uid for which ``owned(uid)`` holds made in a world-writable folder, at any
    depth: an entry owned by such a uid in a folder others may write (not followed into if a folder:
    it goes whole), found through every folder others may pass."""
    found = []
    stack = list(world_writable_roots())
    while stack:
        d = stack.pop()
        with contextlib.suppress(OSError), os.scandir(d) as it:
            parent_shared = _world_writable(d)
            for entry in it:
                with contextlib.suppress(OSError):
                    if not parent_shared and not entry.is_dir(follow_symlinks=False):
                        continue  # no one else could make a file here: never stat'ed
                    st = entry.stat(follow_symlinks=False)
                    if owned(st.st_uid) and parent_shared:
                        found.append((st.st_uid, entry.path))
                    elif stat.S_ISDIR(st.st_mode) and st.st_mode & 0o001:
                        stack.append(entry.path)
    return found


SYSV = {"shm": "shmctl", "sem": "semctl", "msg": "msgctl"}


def sysv_objects(owned: Callable[[int], bool]) -> list[tuple[int, str, int]]:
    """(owner uid, kind, id) of the SysV shared memory segments, semaphore sets and message queues
    (of this IPC namespace) that a uid for which ``owned`` holds created or owns."""
    found = []
    for kind in SYSV:
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split(), strict=False))
            with contextlib.suppress(KeyError, ValueError):
                ident = int(
                    row["shmid" if kind == "shm" else f"{kind}id" if kind == "sem" else "msqid"]
                )
                for col in ("uid", "cuid"):
                    if owned(int(row[col])):
                        found.append((int(row[col]), kind, ident))
                        break
    return found


def _remove_sysv(uid: int, objects: list[tuple[str, int]]) -> None:
    """IPC_RMID each object as ``uid`` (its owner may remove it; root in a user namespace may not)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            libc = ctypes.CDLL(None, use_errno=True)
            for kind, ident in objects:
                if kind == "sem":
                    libc.semctl(ident, 0, IPC_RMID)
                else:
                    getattr(libc, SYSV[kind])(ident, IPC_RMID, None)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _remove(paths: list[str]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(os.lstat(p).st_mode):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)


def remove_leftovers(uid: int) -> None:
    """Delete what ``uid`` left in the world-writable folders (any depth) and its SysV IPC objects."""
    _remove([p for _, p in leftovers(lambda u: u == uid)])
    objects = sysv_objects(lambda u: u == uid)
    if objects:
        _remove_sysv(uid, [(k, i) for _, k, i in objects])


def _process_uids(owned: Callable[[int], bool]) -> set[int]:
    """The uids for which ``owned`` holds that own a process."""
    uids = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                u = os.stat(f"/proc/{pid}").st_uid
                if owned(u):
                    uids.add(u)
    return uids


def what_is_left(owned: Callable[[int], bool]) -> list[str]:
    """What of the uids for which ``owned`` holds is still there: processes, files, SysV objects."""
    left = [f"process {pid} of uid {uid}" for uid in _process_uids(owned) for pid in uid_pids(uid)]
    left += [f"{p} (uid {u})" for u, p in leftovers(owned)]
    left += [f"SysV {k} {i} (uid {u})" for u, k, i in sysv_objects(owned)]
    return left


def clean(uid: int) -> None:
    """Kill every process of ``uid``, delete what it left, and check: raises naming what stays."""
    kill_uid(uid)
    remove_leftovers(uid)
    left = what_is_left(lambda u: u == uid)
    if left:
        raise RuntimeError(
            f"worker uid {uid} left what could not be removed: {'; '.join(left[:10])}; no "
            "further submission is graded on this machine until it is gone"
        )


def sweep() -> None:
    """Clean every worker uid (of ``UID_RANGES``) that no live claim holds: its processes, what it left
    in the world-writable folders, its SysV IPC objects; raises naming what stays."""

    def stale(u: int) -> bool:
        return in_ranges(u) and not held(u)

    uids = {u for u, _ in leftovers(stale)} | {u for u, _, _ in sysv_objects(stale)}
    uids |= _process_uids(stale)
    for u in sorted(uids):
        kill_uid(u)
        remove_leftovers(u)
    left = what_is_left(stale)
    if left:
        raise RuntimeError(
            f"earlier workers left what could not be removed: {'; '.join(left[:10])}; grading "
            "stops so that no submission can read it"
        )


@contextlib.contextmanager
def one_submission_at_a_time() -> Iterator[None]:
    """Hold this machine's container tier for one submission: wait for the lock, ``sweep`` before and
    after (two submissions' workers would share /tmp, loopback and SysV IPC if they ran at once)."""
    with _locked(_state_dir() / "grading.lock"):
        sweep()
        try:
            yield
        finally:
            sweep()


def reset_uids() -> None:
    """Start the counter over (``reset-uids``): only after every earlier worker's leftovers are gone."""
    state = _state_dir()
    with _locked(state / "grading.lock"):
        sweep()
        live = [p.name for p in state.iterdir() if p.name.isdigit() and held(int(p.name))]
        if live:
            raise RuntimeError(
                f"uids {', '.join(live)} are still claimed: a grader runs; stop it first"
            )
        for p in state.glob("next-*"):
            p.unlink()


def readable_by_others(paths: Sequence[Path]) -> list[Path]:
    """Those of ``paths`` (uploads: files, or folders and every file below) a fresh uid could open,
    tried for real by a child running as one."""
    targets: list[tuple[Path, str, str]] = []
    for p in paths:
        p = Path(p)
        targets.append((p, "-r", str(p)))
        if p.is_dir() and not p.is_symlink():
            targets.append((p, "-x", str(p)))
            for q in p.rglob("*"):
                if not q.is_symlink():
                    targets.append((p, "-r", str(q)))
    script = 'i=0; while [ $# -gt 0 ]; do [ "$1" "$2" ] && echo $i; i=$((i+1)); shift 2; done'
    claim = Claim.take()
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", script, "probe", *(a for _, t, q in targets for a in (t, q))],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            preexec_fn=become(claim.uid, claim.uid, 8, False),
        )
    finally:
        claim.release()
    hits = {targets[int(i)][0] for i in proc.stdout.split()}
    return [Path(p) for p in paths if Path(p) in hits]


class Handover:
    """Makes ``folder`` and what the judge created in it the worker's uid's, before each call.

    Directories are opened one by one with ``O_NOFOLLOW`` relative to their parent's descriptor, so
    a worker that swaps a folder for a symlink mid-walk cannot redirect a chown outside; a regular
    file with more than one link (a hard link to a file elsewhere) is left alone. A folder whose
    mtime has not changed since it was listed (and had settled then: ``SETTLE_NS``, since
    timestamps are coarse) is not listed again, so a call costs one open per folder, not one stat
    per file.
    """

    #: A folder modified this close to its listing is listed again next time (coarse timestamps).
    SETTLE_NS = 100_000_000

    def __init__(self, folder: Path | Callable[[], Path], uid: int, gid: int) -> None:
        self.folder, self.uid, self.gid = (
            folder,
            uid,
            gid,
        )  # a callable: where the folder is now (mirror.worker_now)
        self._listed: dict[
            tuple[int, int], tuple[int, int, list[str]]
        ] = {}  # (dev, ino) -> mtime, when, subdirs

    def _give_files(self, fd: int) -> list[str]:
        subdirs = []
        with os.scandir(fd) as it:
            for entry in it:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.name)
                    elif entry.is_file(follow_symlinks=False):
                        st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                        if st.st_uid != self.uid and st.st_nlink == 1 and stat.S_ISREG(st.st_mode):
                            os.chown(
                                entry.name, self.uid, self.gid, dir_fd=fd, follow_symlinks=False
                            )
        return subdirs

    def __call__(self) -> None:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        folder = self.folder() if callable(self.folder) else self.folder
        try:
            stack = [os.open(folder, flags)]
        except OSError:
            return
        while stack:
            fd = stack.pop()
            try:
                st = os.fstat(fd)
                if st.st_uid != self.uid:
                    os.fchown(fd, self.uid, self.gid)
                key = (st.st_dev, st.st_ino)
                seen = self._listed.get(key)
                if (
                    seen is not None
                    and seen[0] == st.st_mtime_ns
                    and st.st_mtime_ns < seen[1] - self.SETTLE_NS
                ):
                    subdirs = seen[2]
                else:
                    now = time.time_ns()
                    subdirs = self._give_files(fd)
                    self._listed[key] = (st.st_mtime_ns, now, subdirs)
                for name in subdirs:
                    with contextlib.suppress(OSError):
                        stack.append(os.open(name, flags, dir_fd=fd))
            except OSError:
                pass
            finally:
                os.close(fd)


def hand_over(folder: Path, uid: int, gid: int) -> None:
    """``Handover`` once (see there)."""
    Handover(folder, uid, gid)()


def remove_files_of(folder: Path, uid: int) -> None:
    """Delete the files ``uid`` owns under ``folder`` (what a worker killed for its disk use wrote), by
    directory file descriptor, never following a symlink."""
    for _, _, files, dfd in os.fwalk(folder, follow_symlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                if os.stat(name, dir_fd=dfd, follow_symlinks=False).st_uid == uid:
                    os.unlink(name, dir_fd=dfd)


def share_read_only(folder: Path, gid: int) -> None:
    """The staged submission: root-owned, readable by the judge's group only (other judges' workers cannot)."""
    for p in [folder, *folder.rglob("*")]:
        os.chown(p, 0, gid, follow_symlinks=False)
        p.chmod(0o750 if p.is_dir() else 0o640)


def _unshare(flags: int) -> None:
    """unshare(2) (``os.unshare`` needs Python 3.12)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _unshare_network() -> None:
    _unshare(CLONE_NEWNET)


def _can_unshare(flags: int) -> bool:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _unshare(flags)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


@lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """Whether this process may give a child a network namespace of its own (not under Docker's seccomp)."""
    return _can_unshare(CLONE_NEWNET)


@lru_cache(maxsize=1)
def ipc_namespace_available() -> bool:
    """Whether this process may give a child an IPC namespace of its own (SysV objects and POSIX
    message queues nobody else sees, gone with its last process); not under Docker's seccomp."""
    return _can_unshare(CLONE_NEWIPC)


def _no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def become(uid: int, gid: int, processes: int, network: bool, ipc: bool = False):
    """The last steps of the worker's preexec: its own network (and IPC namespace), the process cap, no
    POSIX message queues, ``no_new_privs``, then the uid."""

    def setup() -> None:
        flags = (CLONE_NEWNET if network else 0) | (CLONE_NEWIPC if ipc else 0)
        if flags:
            _unshare(flags)
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
        _no_new_privs()
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)

    return setup


def unavailable() -> str | None:
    """None where this tier can run here (root, and switching uid works); else why not."""
    if os.geteuid() != 0:
        return "the grader is not root, so it cannot run the worker as another uid"
    try:
        claim = Claim.take()
    except (OSError, RuntimeError) as e:
        return f"no free uid: {e}"
    try:
        proc = subprocess.run(
            ["/bin/true"],
            preexec_fn=become(claim.uid, claim.uid, 8, False),
            capture_output=True,
            timeout=30,
        )
        if proc.returncode != 0:
            return f"a child could not switch to uid {claim.uid} (exit {proc.returncode})"
    except (OSError, subprocess.SubprocessError) as e:
        return f"a child could not switch to uid {claim.uid}: {e}"
    finally:
        claim.release()
    return None


def lock_down(staff_root: Path) -> None:
    """Set the staff tree's permissions for the container tier: a worker uid may open the public
    fixtures by path (tests hand it those paths) and nothing else; the folders above must let others
    pass (``o+x``), which this does not change."""
    staff_root = Path(staff_root)
    staff_root.chmod(0o711)
    for entry in staff_root.iterdir():
        if not entry.is_symlink():
            entry.chmod(entry.stat().st_mode & 0o700)
    fixtures = staff_root / "fixtures"
    if fixtures.is_dir():
        fixtures.chmod(0o711)
        for entry in fixtures.iterdir():
            if entry.is_symlink():
                continue
            if entry.name == "hidden":
                entry.chmod(entry.stat().st_mode & 0o700)
                continue
            for p in [entry, *(entry.rglob("*") if entry.is_dir() else [])]:
                if not p.is_symlink():
                    p.chmod(p.stat().st_mode | (0o055 if p.is_dir() else 0o044))


def check_staff_hidden(
    staff_root: Path, public: Sequence[Path], python: str = sys.executable
) -> str | None:
    """None if a worker uid can run ``python`` and read the ``public`` fixtures but nothing else of
    ``staff_root``; else what to fix. Tried for real, by a child running as a fresh uid."""
    staff_root = Path(staff_root).resolve()
    secret = [
        staff_root,
        staff_root / "pyproject.toml",
        staff_root / "tests",
        staff_root / "cs336_assignment",
        staff_root / "fixtures" / "hidden",
    ]
    probe = (
        "import sys, os, json, numpy\n"
        "secret, public = json.loads(sys.argv[1])\n"
        "def readable(p):\n"
        "    try:\n"
        "        os.listdir(p) if os.path.isdir(p) else open(p).read(1)\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
        "bad = [p for p in secret if readable(p)] + [p for p in public if not readable(p)]\n"
        "print(json.dumps(bad)); sys.exit(3 if bad else 0)\n"
    )
    claim = Claim.take()
    try:
        arg = json.dumps([[str(p) for p in secret if p.exists()], [str(p) for p in public]])
        proc = subprocess.run(
            [python, "-I", "-c", probe, arg],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": "/"},
            preexec_fn=become(claim.uid, claim.uid, 64, False),
        )
    except (
        OSError
    ) as e:  # the uid may not even execute it (a Python under a 0700 home): the exec itself fails
        proc = subprocess.CompletedProcess([python], 126, "", f"{type(e).__name__}: {e}")
    finally:
        claim.release()
    if proc.returncode == 3:
        return (
            f"other users may read {', '.join(json.loads(proc.stdout))} (a worker would read the reference or "
            f"the hidden tests) or may not read the public fixtures: lock the tree down with "
            f"`python -m cs336_staff.grade.container lock-down {staff_root}` (run_autograder does), and make "
            "the folders above it enterable (chmod o+x)"
        )
    if proc.returncode != 0:
        return (
            f"an unprivileged uid cannot run the grader's Python {python} ({proc.stderr.strip()[-300:]}): install "
            "Python and the venv where every user may read them (setup.sh uses /opt/cs336), or chmod o+rx the path"
        )
    return None


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="the container tier: lock a staff tree down, or start the worker uids over"
    )
    parser.add_argument("command", choices=["lock-down", "reset-uids"])
    parser.add_argument("staff_root", type=Path, nargs="?")
    args = parser.parse_args()
    if args.command == "reset-uids":
        reset_uids()
    elif args.staff_root is None:
        parser.error("lock-down needs the staff tree's folder")
    else:
        lock_down(args.staff_root)
