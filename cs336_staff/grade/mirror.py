"""The judge's scratch folder and the worker's copy of it: the judge reads and writes nothing the worker can change.

A test's ``tmp_path`` holds both what the judge prepares for the worker (a corpus, a truncated
checkpoint) and what the worker writes for the judge (a checkpoint, an encoded array, a plot).
Sharing one folder read-write let a worker plant symlinks that the judge's own ``write_text``
followed, answer with a symlink to a hidden test, or empty the judge's corpus before the judge's
reference read it. So the two sides have two folders at one path:

    judge  ``J`` (pytest's basetemp lives here)   only the judge sees it; tests use it as always
    worker ``W``                                   bind-mounted at J's path in the sandbox, so
                                                   every path a test passes means the same file

and around every call the judge copies between them (``Mirror``), in the test folders the call's
arguments name (``Mirror.scopes``: a path, a string, a command line, an ``np.memmap`` inside the
judge's folder; a call that names none costs nothing):

* ``push`` (before a call): every regular file the judge wrote in J is copied to W, and copied
  again whenever the judge changed it or the worker changed, replaced or deleted W's copy. A file
  the judge wrote is the worker's *input*: whatever the worker does to it, the judge's own copy
  (what its reference and asserts read) is untouched, and the worker finds the judge's version
  again at the next call.
* ``pull`` (after a call, whatever its outcome): every regular file the worker created or changed
  in W is copied into J as untrusted data: opened without following a symlink at any component
  (``O_NOFOLLOW`` from a folder descriptor), never blocking, checked to be a regular file after it
  is opened (``fstat``), at most ``file_bytes`` long (checked before and while it is read), read
  once, in chunks, straight to J. A file the worker deleted is deleted from J. A symlink, fifo,
  socket or device node, an over-size file, or more than ``entries`` entries fail the call that
  made them, with a remark that says which and why (``MirrorRefused``).

Only the copy in J is ever read by the judge, so a test reads what the worker wrote with plain
``path.read_bytes()``, locally and in grading alike. Writes into W go through the same
descriptor-relative, no-follow calls (a temporary name created with ``O_EXCL``, then renamed), so
a background process racing the judge in W can make a call fail but never redirect a byte.

A failure to copy a test's file in (the worker filled its own tmpfs, or put a symlink where a
folder was) also fails the call, saying so.

Where the worker cannot have a mount namespace (the container tier, ``container.py``: root in a
container whose seccomp profile forbids namespaces) the two folders take turns at the judge's path
instead (``exchange=True``): they are swapped atomically (``renameat2(RENAME_EXCHANGE)``) after
each push, so during the call the path holds W, and swapped back before each pull, so between
calls (when the judge's test code runs) it holds J again. Their parent is the judge's, which the
worker may enter but not change; J is 0700 and the judge's, so a process the worker left behind
finds nothing it can write at the judge's path between calls, and whatever it keeps open in W is
read only by ``pull``. A function of the test's that the worker calls back mid-call runs with J in
place (``judge_view``).

Deliberately left out: ownership by content (a file the judge wrote stays the judge's until the
judge deletes it; a test that needs the worker to overwrite a file the test wrote must let the
worker write it first), hard links (a pulled file is always a fresh copy), and mirroring during a
call (the worker sees the judge's files as they were when the call began).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import os
import stat
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Bytes copied per read while mirroring (the judge's memory for a copy, whatever the file's size).
CHUNK = 1 << 20
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_PREFIX = ".cs336-mirror-"
#: Values of a call's arguments looked at for paths (a list of a million token ids is not walked to the end;
#: tests pass paths near the top of their arguments).
SCOPE_VALUES = 10_000

#: ``renameat2`` flags and the "relative to the working directory" descriptor (linux/fs.h, fcntl.h).
RENAME_EXCHANGE = 2
AT_FDCWD = -100

Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode: "has this file changed?"


class MirrorRefused(RuntimeError):
    """The worker left something in its scratch folder that the judge does not copy back."""


def layout(scratch: Path) -> tuple[Path, Path, Path]:
    """The judge's folder (basetemp's parent), the worker's copy of it, and the judge's private temp folder."""
    return scratch / "judge", scratch / "worker", scratch / "private"


def exchange_names(a: Path, b: Path) -> None:
    """Swap what the names ``a`` and ``b`` point to, atomically (``renameat2`` with ``RENAME_EXCHANGE``,
    Linux 3.15 and glibc 2.28 on; tmpfs, ext4, xfs, btrfs and overlayfs support it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(
            errno.ENOSYS, f"this C library has no renameat2, so {a} and {b} cannot be swapped"
        )
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"could not swap {a} and {b}: {os.strerror(err)}")


def _stamp(st: os.stat_result) -> Stamp:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a fifo"), from its ``st_mode``.

    >>> file_kind(stat.S_IFIFO), file_kind(stat.S_IFLNK)
    ('a fifo', 'a symlink')
    """
    for test, name in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "a special file"


@contextlib.contextmanager
def _open_dir(root: int, rel: str, create: bool = False) -> Iterator[int]:
    """A descriptor of ``root/rel``, every component opened without following a symlink (created if asked)."""
    fd = os.dup(root)
    try:
        for part in [p for p in rel.split("/") if p]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _copy(src_root: int, dst_root: int, rel: str, limit: int | None) -> Stamp:
    """Copy the regular file ``rel`` from one tree to the other, safely on both ends; the source's stamp."""
    folder, _, name = rel.rpartition("/")
    with _open_dir(src_root, folder) as sdir, _open_dir(dst_root, folder, create=True) as ddir:
        src = os.open(name, READ_FLAGS, dir_fd=sdir)
        try:
            st = os.fstat(src)
            if not stat.S_ISREG(st.st_mode):
                raise MirrorRefused(f"{rel} is {file_kind(st.st_mode)}, not a regular file")
            if limit is not None and st.st_size > limit:
                raise MirrorRefused(
                    f"{rel} has {st.st_size} bytes, over the limit of {limit} bytes per file"
                )
            temp = f"{TEMP_PREFIX}{uuid.uuid4().hex[:12]}"
            dst = os.open(temp, WRITE_FLAGS, 0o644, dir_fd=ddir)
            try:
                copied = 0
                while chunk := os.read(src, CHUNK):
                    copied += len(chunk)
                    if limit is not None and copied > limit:  # it grew while being read
                        raise MirrorRefused(
                            f"{rel} grew past the limit of {limit} bytes per file while it was copied"
                        )
                    os.write(dst, chunk)
            except BaseException:
                os.close(dst)
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=ddir)
                raise
            os.close(dst)
            os.replace(temp, name, src_dir_fd=ddir, dst_dir_fd=ddir)
            return _stamp(st)
        finally:
            os.close(src)


def _remove(root: int, rel: str) -> None:
    folder, _, name = rel.rpartition("/")
    with contextlib.suppress(OSError), _open_dir(root, folder) as d:
        os.unlink(name, dir_fd=d)


def _lstat_at(root: int, rel: str) -> os.stat_result | None:
    folder, _, name = rel.rpartition("/")
    try:
        with _open_dir(root, folder) as d:
            return os.stat(name, dir_fd=d, follow_symlinks=False)
    except OSError:
        return None


def _walk(root: int, top: str, limit: int) -> tuple[list[str], dict[str, os.stat_result], int]:
    """Folders and non-folder entries (with their lstat) under ``root/top``; the count of entries seen (stops past ``limit``)."""
    folders: list[str] = []
    entries: dict[str, os.stat_result] = {}
    seen = 0
    try:
        with _open_dir(root, top) as start:
            stack = [(top, os.dup(start))]
    except OSError:
        return folders, entries, seen  # not there (yet): nothing to copy
    while stack:
        rel, fd = stack.pop()
        try:
            if seen > limit:
                continue
            with os.scandir(fd) as it:
                names = [e.name for e in it]
            for name in names:
                seen += 1
                child = f"{rel}/{name}" if rel else name
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        folders.append(child)
                        stack.append((child, os.open(name, DIR_FLAGS, dir_fd=fd)))
                    elif not name.startswith(TEMP_PREFIX):
                        entries[child] = st
        except OSError:
            pass  # replaced or removed meanwhile: the next walk sees what is there
        finally:
            os.close(fd)
    return folders, entries, seen


#: Types that never name a file (skipped at once; a container whose first item is one is skipped whole).
_NOT_PATHS = frozenset({int, float, bool, type(None), bytes, complex})


def _path_text(value: Any) -> str | None:
    """The path a call argument names, if it names one: a string, a path, an ``np.memmap``'s file."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        text = os.fspath(value)
        return text if isinstance(text, str) else None
    np = sys.modules.get("numpy")
    if (
        np is not None
        and isinstance(value, np.memmap)
        and isinstance(value.filename, (str, os.PathLike))
    ):
        return os.fspath(value.filename)  # a str or a Path, depending on how it was opened
    return None


def _inside(rel: str, scopes: list[str]) -> bool:
    return any(not s or rel == s or rel.startswith(s + "/") for s in scopes)


@dataclass
class Mirror:
    """Keeps the worker's copy ``worker`` of the judge's folder ``judge`` in step, one call at a time.

    With ``exchange`` the two swap names around each call (see the module's docstring): ``judge``
    is then the path the tests use, which holds the judge's folder except during a call, and
    ``worker`` the other name; ``worker_now`` says where the worker's copy is."""

    judge: Path
    worker: Path
    file_bytes: int
    entries: int
    exchange: bool = False
    # the judge's folder (dev, inode)
    _judge_id: tuple[int, int] | None = field(default=None, init=False, repr=False)
    # rel -> (J stamp, W stamp) at push
    judge_files: dict[str, tuple[Stamp, Stamp]] = field(default_factory=dict)
    # rel -> (W stamp, J stamp) at pull
    worker_files: dict[str, tuple[Stamp, Stamp]] = field(default_factory=dict)
    refused: set[tuple[str, Stamp]] = field(default_factory=set)  # reported once each

    def scopes(self, values: Any) -> list[str]:
        """The folders a call's arguments point into: for each path (a ``Path``, a string, an ``np.memmap``'s
        file) inside the judge's folder, its first two components under it (``tmp/test_name0``, a test's
        ``tmp_path``). Only these are mirrored around the call: a call that names no file costs nothing."""
        found: set[str] = set()
        prefix = str(self.judge) + "/"
        stack, budget = [values], SCOPE_VALUES
        while stack and budget > 0:
            value = stack.pop()
            budget -= 1
            if type(value) in _NOT_PATHS:
                continue
            if isinstance(value, (list, tuple, set, frozenset)):
                if value and type(next(iter(value))) in _NOT_PATHS:
                    continue  # a list of numbers (token ids, shapes) names no file: not walked
                stack.extend(value)
            elif isinstance(value, dict):
                if (
                    value
                    and {type(next(iter(value))), type(next(iter(value.values())))} <= _NOT_PATHS
                ):
                    continue  # a dict of numbers and bytes (a tokenizer's vocab) names no file
                stack.extend(value.keys())
                stack.extend(value.values())
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                stack.extend(getattr(value, f.name, None) for f in dataclasses.fields(value))
            else:
                text = _path_text(value)
                if text is not None and prefix in text:
                    # also "--checkpoint=/path/..." in a command line
                    rel = text[text.index(prefix) + len(prefix) :]
                    parts = [p for p in rel.split("/") if p and p not in (".", "..")][:2]
                    if parts:
                        found.add("/".join(parts))
        return sorted(found)

    def __post_init__(self) -> None:
        if self.exchange:
            st = os.stat(self.judge, follow_symlinks=False)
            self._judge_id = (st.st_dev, st.st_ino)

    @property
    def swapped(self) -> bool:
        """Whether the worker's copy is at the judge's path now (exchange only: a call is under way). Read
        from the folder itself, so an interrupt between a swap and its bookkeeping cannot mislead it."""
        if self._judge_id is None:
            return False
        st = os.stat(self.judge, follow_symlinks=False)
        return (st.st_dev, st.st_ino) != self._judge_id

    def _roots(self) -> tuple[int, int]:
        if self.swapped:
            raise RuntimeError(
                "the judge's folder is not in place: a push or pull while a call holds the worker's copy there"
            )
        return os.open(self.judge, DIR_FLAGS), os.open(self.worker, DIR_FLAGS)

    def worker_now(self) -> Path:
        """Where the worker's copy is now (with ``exchange``, at the judge's path during a call)."""
        return self.judge if self.swapped else self.worker

    def _swap(self, to_worker: bool) -> None:
        if self.exchange and self.swapped != to_worker:
            exchange_names(self.judge, self.worker)

    @contextlib.contextmanager
    def judge_view(self) -> Iterator[None]:
        """The judge's folder in place for what runs inside (a callback of the test's during a call)."""
        was = self.swapped
        self._swap(False)
        try:
            yield
        finally:
            self._swap(was)

    def push(self, scopes: list[str]) -> None:
        """Before a call: the judge's new or changed files in ``scopes`` (and any the worker changed) into the worker's copy."""
        j, w = self._roots()
        problems: list[str] = []
        try:
            folders, files, theirs = [], {}, {}
            for scope in scopes:
                mine = _walk(j, scope, 1 << 62)  # the judge's own tree: trusted, never capped
                folders += [scope, *mine[0]]
                files.update(mine[1])
                theirs.update(_walk(w, scope, self.entries)[1])  # past the cap the pull refuses
            for rel in folders:
                with contextlib.suppress(OSError), _open_dir(w, rel, create=True):
                    pass
            for rel, st in files.items():
                if not stat.S_ISREG(st.st_mode):
                    continue
                jstamp = _stamp(st)
                pulled = self.worker_files.get(rel)
                if pulled is not None and pulled[1] == jstamp:
                    continue  # the worker's own file, unchanged by the judge
                known = self.judge_files.get(rel)
                wst = theirs.get(rel)
                if (
                    known is not None
                    and known[0] == jstamp
                    and wst is not None
                    and _stamp(wst) == known[1]
                ):
                    continue  # both copies as they were
                try:
                    _copy(j, w, rel, None)
                except (
                    OSError
                ) as e:  # the worker filled its disk, or put a symlink where a folder was
                    problems.append(f"{rel}: {e.strerror}")
                    continue
                wst = _lstat_at(w, rel)
                if wst is not None:
                    self.judge_files[rel] = (jstamp, _stamp(wst))
                    self.worker_files.pop(rel, None)
            for rel in [
                r
                for r in (*self.judge_files, *self.worker_files)
                if r not in files and _inside(r, scopes)
            ]:
                _remove(w, rel)  # deleted by the judge
                self.judge_files.pop(rel, None)
                self.worker_files.pop(rel, None)
        finally:
            os.close(j)
            os.close(w)
        if problems:
            raise MirrorRefused(
                "the judge could not copy the test's files into your scratch folder: "
                + "; ".join(problems[:10])
            )
        self._swap(True)  # exchange: the call sees the worker's copy at the judge's path

    def pull(self, scopes: list[str]) -> None:
        """After a call: what the worker wrote in ``scopes``, as untrusted data; MirrorRefused says what was not copied."""
        self._swap(False)  # exchange: the judge's folder back at its path before anything is read
        j, w = self._roots()
        problems: list[str] = []
        try:
            folders, entries, seen = [], {}, 0
            for scope in scopes:
                theirs = _walk(w, scope, self.entries)
                folders += theirs[0]
                entries.update(theirs[1])
                seen += theirs[2]
            if seen > self.entries:
                raise MirrorRefused(
                    f"the scratch folder holds more than {self.entries} files and folders; "
                    "nothing was copied back"
                )
            for rel in folders:
                with contextlib.suppress(OSError), _open_dir(j, rel, create=True):
                    pass
            for rel, st in entries.items():
                wstamp = _stamp(st)
                if rel in self.judge_files:
                    continue  # the judge's input: the judge's copy stands, the next push restores the worker's
                if not stat.S_ISREG(st.st_mode):
                    if self.worker_files.pop(rel, None) is not None:
                        _remove(j, rel)  # its older copy must not look current
                    if (rel, wstamp) not in self.refused:
                        self.refused.add((rel, wstamp))
                        problems.append(
                            f"{rel} is {file_kind(st.st_mode)}; only regular files are copied back"
                        )
                    continue
                pulled = self.worker_files.get(rel)
                if pulled is not None and pulled[0] == wstamp:
                    continue
                try:
                    _copy(w, j, rel, self.file_bytes)
                except (MirrorRefused, OSError) as e:
                    _remove(j, rel)  # never leave an older copy that looks current
                    self.worker_files.pop(rel, None)
                    if (rel, wstamp) not in self.refused:
                        self.refused.add((rel, wstamp))
                        problems.append(
                            str(e) if isinstance(e, MirrorRefused) else f"{rel}: {e.strerror}"
                        )
                    continue
                jst = _lstat_at(j, rel)
                if jst is not None:
                    self.worker_files[rel] = (wstamp, _stamp(jst))
            for rel in [r for r in self.worker_files if r not in entries and _inside(r, scopes)]:
                _remove(j, rel)  # the worker deleted (or renamed) its own file
                del self.worker_files[rel]
        finally:
            os.close(j)
            os.close(w)
        if problems:
            raise MirrorRefused(
                "the judge did not copy back what your code left in its scratch folder: "
                + "; ".join(problems[:10])
                + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
            )
