"""The container tier: where bubblewrap cannot start but the grader is root, the worker runs as a uid of its own.

Gradescope, Docker and many CI runners grade as root inside a container whose seccomp profile
forbids the user namespaces bubblewrap needs. There the worker is isolated by the kernel's oldest
boundary, the uid:

    identity      each worker process tree runs as a uid nothing else on the machine uses (claimed
                  from ``UID_RANGE`` under a lock, never a uid in /etc/passwd or one owning a
                  process), with the judge's own group ``gid`` (also claimed) and no other groups,
                  in its own session and process group, with no capabilities (a non-root uid)
    files         the staff tree must be unreadable by other users (``probe`` refuses otherwise;
                  ``run_autograder`` makes it 0700); the judge's folder is 0711 with its spec and
                  results 0600, so the worker reaches only the staged submission (group-readable,
                  read-only), its home and its copy of the judge's scratch folder (``mirror.py``:
                  the two swap names around each call, so the judge's own stays the judge's, 0700),
                  which the judge hands over to the worker's uid before each call (``Handover``:
                  directories, and files with one link, found without following symlinks);
                  /tmp, /var/tmp and /dev/shm stay world-writable,
                  so whatever the uid left there is deleted when the worker ends (``release``), as
                  is what it wrote to the scratch folder if that broke the disk limit
    limits        the same as elsewhere (``limits.py``: cgroup or watchdog, rlimits); the watchdog
                  finds the tree by its uid, so a child that leaves the process group is still
                  counted and killed, and counts the disk use of that uid's files only;
                  ``RLIMIT_NPROC`` caps the uid's processes in the kernel
    network       dropped with a network namespace of its own where the kernel allows it (not under
                  Docker's default seccomp profile, which needs CAP_SYS_ADMIN for it); the result's
                  isolation record says which

Deliberately left out: a private /proc (the worker sees other processes' command lines, never
their files), disk quotas in /tmp (the watchdog samples the uid's leftovers there).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import pwd
import resource
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cs336_staff.grade.limits import kill_uid, owned_entries, uid_pids

#: uids (and gids) the container tier hands out: below 65536, so they map inside a container's
#: user namespace of 65536 ids, and above the ranges distributions give to users and services.
UID_RANGE = range(61000, 65000)
#: Where the claims are locked (root-only); one file per uid, flock-held by the claiming process.
LOCK_DIRS = ("/run/cs336-grade-uids", "/tmp/cs336-grade-uids")
TIER = "container"
CLONE_NEWNET = 0x40000000
DESCRIPTION = (
    "container tier: a uid of its own (no capabilities, own session), staff files "
    "unreadable by permissions, its own copy of the scratch folder swapped in per call"
)


def _lock_dir() -> Path:
    for d in LOCK_DIRS:
        p = Path(d)
        with contextlib.suppress(OSError):
            p.mkdir(mode=0o700, exist_ok=True)
            st = p.stat()
            if st.st_uid == 0 and not st.st_mode & 0o077:
                return p
    raise RuntimeError(f"no root-only folder for uid claims among {', '.join(LOCK_DIRS)}")


def _in_use(uid: int) -> bool:
    """Whether some account or running process already has this uid."""
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return bool(uid_pids(uid))


@dataclass
class Claim:
    """A uid no one else uses, held (flock) until ``release``."""

    uid: int
    _fd: int

    @classmethod
    def take(cls) -> Claim:
        locks = _lock_dir()
        start = (os.getpid() * 7919) % len(UID_RANGE)  # spread concurrent judges over the range
        for i in range(len(UID_RANGE)):
            uid = UID_RANGE[(start + i) % len(UID_RANGE)]
            fd = os.open(locks / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if _in_use(uid):
                os.close(fd)
                continue
            return cls(uid, fd)
        raise RuntimeError(f"every uid in {UID_RANGE.start}-{UID_RANGE.stop - 1} is in use")

    def release(self) -> None:
        """Kill whatever still runs as this uid, delete what it left in the shared folders, free it."""
        if self._fd < 0:
            return
        kill_uid(self.uid)
        remove_leftovers(self.uid)
        os.close(self._fd)
        self._fd = -1


def remove_leftovers(uid: int) -> None:
    """Delete what ``uid`` left at the top of /tmp, /var/tmp and /dev/shm."""
    for p in owned_entries(uid):
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(p.lstat().st_mode):
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()


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


def _unshare_network() -> None:
    """unshare(CLONE_NEWNET) (``os.unshare`` needs Python 3.12)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """Whether this process may give a child a network namespace of its own (not under Docker's seccomp)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _unshare_network()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def become(uid: int, gid: int, processes: int, network: bool):
    """The last steps of the worker's preexec: its own network, the process cap, then the uid."""

    def setup() -> None:
        if network:
            _unshare_network()
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
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
    import json

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

    parser = argparse.ArgumentParser(description="the container tier's permissions on a staff tree")
    parser.add_argument("command", choices=["lock-down"])
    parser.add_argument("staff_root", type=Path)
    args = parser.parse_args()
    lock_down(args.staff_root)
