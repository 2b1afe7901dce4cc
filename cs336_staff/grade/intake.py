"""Submission intake: take only the graded files out of an untrusted zip or directory.

A submission is whatever a student uploads: normally the zip that ``make_submission.sh`` builds
(``cs336_assignment/``, ``adapters.py``, optional ``writeup.pdf``), sometimes a directory. Only
the graded files are taken::

    cs336_assignment/**/*.py      the student's implementation
    adapters.py                   the contract (the staff's copy is used if it is missing)

Everything else is ignored and the report says so. In particular a submission's own
``conftest.py``, ``pytest.ini``, ``pyproject.toml``, ``setup.cfg``, ``tox.ini``,
``sitecustomize.py``/``usercustomize.py``, ``*.pth`` files and ``tests/`` never reach the sandbox:
the tests, fixtures and pytest configuration always come from the staff repository.

Hostile archives are handled without extracting anything to disk: entries are read into memory,
one at a time, through a bounded reader, so

* ``../`` components, absolute paths, drive letters and NUL bytes are refused (entry ignored);
* symlinks (zip entries whose mode says ``S_IFLNK``, or symlinks in a directory) are ignored;
* a zip bomb cannot inflate more than ``max_bytes`` of graded files (the submission is rejected);
* a corrupt zip (bad header, bad CRC) rejects the submission with a clear reason;
* in a directory, special files (fifos, sockets, device nodes) are ignored, and a regular file is
  opened without following a symlink and without blocking, then checked again (``fstat``);
* a name that is not UTF-8, or holds control characters, is reported escaped (``printable``); a
  graded file with such a name is ignored (Python could not import it under that name anyway).
  Every upload gets a result, whatever its names.

Deliberately left out: grading anything but Python (no notebooks, no compiled extensions), and
guessing at arbitrary layouts (only one wrapping top-level folder is unwrapped).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cs336_staff.grade import neutral
from cs336_staff.grade.mirror import file_kind

PACKAGE = "cs336_assignment"
ADAPTERS = "adapters.py"
#: File names that configure pytest or Python itself: never taken from a submission.
CONFIG_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        "pyproject.toml",
        "setup.cfg",
        "tox.ini",
        "setup.py",
        "sitecustomize.py",
        "usercustomize.py",
        ".pytest.ini",
        "noxfile.py",
    }
)
#: Files we expect beside the graded ones and do not mention in the report.
EXPECTED_EXTRAS = frozenset({"writeup.pdf"})
MAX_BYTES = 16 * 2**20  # uncompressed size of all graded files together
MAX_ENTRIES = 20_000
#: Why a file whose name is not printable UTF-8 is not taken.
ODD_NAME = "name is not printable UTF-8 (shown escaped); not taken"


@dataclass
class Intake:
    """What was taken from one submission, what was ignored, and why it may be rejected."""

    name: str
    source: str
    files: dict[str, bytes] = field(default_factory=dict)  # posix relative path -> content
    ignored: list[str] = field(default_factory=list)  # "path: reason", for the report
    notes: list[str] = field(default_factory=list)  # other remarks (fallbacks used)
    error: str | None = None  # set when the submission is rejected as a whole
    sha256: str = ""

    def write_to(self, root: Path) -> None:
        """Materialise the taken files under ``root`` (paths were validated on the way in)."""
        for rel, data in sorted(self.files.items()):
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)


def submission_name(path: Path) -> str:
    """A folder name for ``path``: its stem, with anything but ``[A-Za-z0-9._-]`` replaced.

    >>> submission_name(Path("/uploads/Ada Lovelace (2).zip"))
    'Ada_Lovelace_2_'
    """
    stem = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else path.name
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip(".") or "submission"
    return name[:100]


def printable(name: str) -> str:
    r"""``name`` as one line of valid UTF-8: undecodable bytes as ``\xNN``, control characters escaped.

    >>> printable("notes-\udcff.txt"), printable("a\nb.py"), printable("caf\u00e9.py")
    ('notes-\\xff.txt', 'a\\nb.py', 'café.py')
    """
    return neutral.line(name)


def is_utf8(name: str) -> bool:
    """Whether ``name`` (as ``os`` returns it) was valid UTF-8 on disk (no surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def safe_relpath(name: str) -> str | None:
    """``name`` as a clean relative posix path, or None if it could escape the sandbox.

    >>> safe_relpath("cs336_assignment/optim.py"), safe_relpath("../../etc/passwd")
    ('cs336_assignment/optim.py', None)
    >>> safe_relpath("/etc/passwd"), safe_relpath("C:/x.py"), safe_relpath("./adapters.py")
    (None, None, 'adapters.py')
    """
    if "\x00" in name:
        return None
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return None
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def classify(rel: str) -> str | None:
    """None if ``rel`` is a graded file, else the reason it is ignored."""
    base = rel.rsplit("/", 1)[-1]
    if rel.startswith("__MACOSX/") or "/__pycache__/" in f"/{rel}" or base == ".DS_Store":
        return "editor/OS clutter"
    if base in CONFIG_NAMES or base.endswith(".pth"):
        return "pytest/Python configuration is never taken from a submission (the staff's is used)"
    if rel.startswith("tests/") or rel == "tests":
        return "the submission's tests are ignored (the staff's public and hidden tests are used)"
    if rel == ADAPTERS:
        return None
    if rel.startswith(f"{PACKAGE}/") and rel.endswith(".py"):
        return None
    if rel in EXPECTED_EXTRAS:
        return ""  # expected, not graded by tests, not worth a remark
    return "not a graded file (only cs336_assignment/**/*.py and adapters.py are graded)"


def _unwrap_prefix(paths: list[str]) -> str:
    """The single top-level folder to strip when the student zipped the folder, not its contents."""
    if any(p == ADAPTERS or p.startswith(f"{PACKAGE}/") for p in paths):
        return ""
    tops = {p.split("/", 1)[0] for p in paths if "/" in p and not p.startswith("__MACOSX/")}
    if len(tops) == 1:
        top = tops.pop()
        if any(p.startswith(f"{top}/{PACKAGE}/") for p in paths):
            return f"{top}/"
    return ""


class _Budget:
    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


def _read_zip(path: Path, intake: Intake, max_bytes: int) -> None:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        intake.error = (
            f"corrupt zip: {path.name} is not a readable zip archive ({e}); a submission is the .zip that "
            "`bash make_submission.sh` builds, or a folder with cs336_assignment/ and adapters.py"
        )
        return
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            intake.error = f"zip has {len(infos)} entries (more than {MAX_ENTRIES}); rejected"
            return
        safe: list[tuple[str, zipfile.ZipInfo]] = []
        for info in infos:
            rel = safe_relpath(info.filename)
            if rel is None:
                intake.ignored.append(
                    f"{printable(info.filename)!r}: unsafe path (absolute or '..'); not extracted"
                )
                continue
            if info.is_dir():
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                intake.ignored.append(f"{printable(rel)}: symlink; not extracted")
                continue
            if printable(rel) != rel:
                intake.ignored.append(f"{printable(rel)}: {ODD_NAME}")
                continue
            safe.append((rel, info))
        prefix = _unwrap_prefix([rel for rel, _ in safe])
        if prefix:
            intake.notes.append(f"files were inside the folder {prefix!r}; it was unwrapped")
        budget = _Budget(max_bytes)
        for rel, info in safe:
            rel = rel[len(prefix) :] if prefix and rel.startswith(prefix) else rel
            reason = classify(rel)
            if reason is not None:
                if reason:
                    intake.ignored.append(f"{rel}: {reason}")
                continue
            try:
                with zf.open(info) as f:  # bounded read: never trust the declared size
                    data = f.read(max(budget.left, 0) + 1)
            except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as e:
                intake.error = f"corrupt zip: cannot read {rel} ({e})"
                return
            if not budget.take(len(data)):
                intake.error = (
                    f"graded files exceed {max_bytes // 2**20} MiB uncompressed (at {rel}): "
                    "rejected as a possible zip bomb"
                )
                return
            if rel in intake.files:
                intake.notes.append(f"{rel} appears twice in the zip; the last copy was used")
            intake.files[rel] = data


def _read_dir(path: Path, intake: Intake, max_bytes: int) -> None:
    budget = _Budget(max_bytes)
    entries = 0
    candidates: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        here = Path(dirpath)
        for d in list(dirnames):
            if (here / d).is_symlink():
                intake.ignored.append(
                    f"{printable((here / d).relative_to(path).as_posix())}/: symlink; not followed"
                )
                dirnames.remove(d)
            elif d in ("__pycache__", ".git", ".venv", "node_modules"):
                dirnames.remove(d)
        for fname in filenames:
            entries += 1
            if entries > MAX_ENTRIES:
                intake.error = f"directory has more than {MAX_ENTRIES} files; rejected"
                return
            full = here / fname
            rel = full.relative_to(path).as_posix()
            try:
                mode = full.lstat().st_mode
            except OSError as e:  # gone since the walk listed it
                intake.ignored.append(f"{printable(rel)}: unreadable ({e.strerror})")
                continue
            if stat.S_ISLNK(mode):
                intake.ignored.append(f"{printable(rel)}: symlink; not followed")
            elif not stat.S_ISREG(mode):
                intake.ignored.append(
                    f"{printable(rel)}: not a regular file ({file_kind(mode)}); not read"
                )
            elif not is_utf8(rel) or printable(rel) != rel:
                intake.ignored.append(f"{printable(rel)}: {ODD_NAME}")
            else:
                candidates.append((rel, full))
    prefix = _unwrap_prefix([rel for rel, _ in candidates])
    for rel, full in sorted(candidates):
        rel = rel[len(prefix) :] if prefix and rel.startswith(prefix) else rel
        reason = classify(rel)
        if reason is not None:
            if reason:
                intake.ignored.append(f"{rel}: {reason}")
            continue
        data = _read_regular(full, max(budget.left, 0) + 1)
        if data is None:
            intake.ignored.append(f"{rel}: not a regular file when opened; not read")
            continue
        if not budget.take(len(data)):
            intake.error = f"graded files exceed {max_bytes // 2**20} MiB (at {rel}); rejected"
            return
        intake.files[rel] = data


def _read_regular(path: Path, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``path`` if it is a regular file (no symlink followed, never blocking), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(limit)


def _drop_file_folder_clashes(intake: Intake) -> None:
    """A path that is both a file and a folder (``a.py`` and ``a.py/b.py``) cannot be laid out: drop the file.

    >>> i = Intake("s", "s", files={"cs336_assignment/data.py": b"", "cs336_assignment/data.py/y.py": b""})
    >>> _drop_file_folder_clashes(i); sorted(i.files), i.ignored
    (['cs336_assignment/data.py/y.py'], ['cs336_assignment/data.py: both a file and a folder in the submission; the file was ignored'])
    """
    folders = {rel.rsplit("/", i)[0] for rel in intake.files for i in range(1, rel.count("/") + 1)}
    for rel in sorted(set(intake.files) & folders):
        del intake.files[rel]
        intake.ignored.append(
            f"{rel}: both a file and a folder in the submission; the file was ignored"
        )


def read_submission(
    path: Path, *, staff_adapters: Path | None = None, max_bytes: int = MAX_BYTES
) -> Intake:
    """Read the graded files of the submission at ``path`` (a zip or a directory) into memory.

    Never raises for a bad submission: problems become ``intake.error`` (rejected as a whole) or
    lines of ``intake.ignored`` (that entry only), so one hostile upload cannot stop a batch.
    """
    path = Path(path)
    intake = Intake(name=submission_name(path), source=str(path))
    if path.is_symlink() and not path.exists():
        intake.error = f"{path} is a dangling symlink"
    elif path.is_dir():
        _read_dir(path, intake, max_bytes)
    elif path.is_file():
        _read_zip(path, intake, max_bytes)
    else:
        intake.error = (
            f"{path} does not exist (expected a .zip from make_submission.sh or a directory)"
        )
    _drop_file_folder_clashes(intake)
    if intake.error is None and not any(f.startswith(f"{PACKAGE}/") for f in intake.files):
        intake.error = (
            f"missing package: the submission has no {PACKAGE}/*.py files "
            "(build it with `bash make_submission.sh`, which zips cs336_assignment/ and adapters.py)"
        )
    if intake.error is None:
        if f"{PACKAGE}/__init__.py" not in intake.files:
            intake.files[f"{PACKAGE}/__init__.py"] = b""
            intake.notes.append(f"{PACKAGE}/__init__.py was missing; an empty one was used")
        if ADAPTERS not in intake.files and staff_adapters is not None:
            intake.files[ADAPTERS] = staff_adapters.read_bytes()
            intake.notes.append("adapters.py was missing; the staff's copy was used")
    h = hashlib.sha256()
    for rel in sorted(intake.files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(intake.files[rel]).digest())
    h.update((intake.error or "").encode())
    intake.sha256 = h.hexdigest()
    return intake
