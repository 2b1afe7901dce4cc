"""Compiled bytecode for what the worker imports, so a worker start never compiles torch again.

The worker runs Python with ``-B`` (it writes nothing) over the grader's installed packages, mounted
read-only. ``-B`` still *reads* ``__pycache__``: where the packages were installed without bytecode
(uv installs none unless told to), every worker start compiled torch from source in memory, about
twice the CPU time of an import from bytecode (``import torch``: 3.3-4.1 s user from source against
1.5-1.9 s compiled, this VM under load). ``ensure_compiled`` compiles the installed packages once,
in the grader's process, before any worker starts; a stamp beside them makes later batches free.

Deliberately left out: the submission's own modules and the staged scenarios (small, new for each
submission, and in a folder the worker must not write).
"""

from __future__ import annotations

import compileall
import contextlib
import os
import sysconfig
from pathlib import Path

#: The stamp left in each compiled folder; newer than the folder itself means nothing was installed since.
STAMP = ".cs336-bytecode"


def package_folders() -> list[Path]:
    """The folders of this interpreter's installed packages (the venv's site-packages)."""
    paths = sysconfig.get_paths()
    return sorted({Path(paths[key]) for key in ("purelib", "platlib") if Path(paths[key]).is_dir()})


def ensure_compiled(folders: list[Path] | None = None, workers: int = 1) -> str:
    """Compile every module under ``folders`` (default: ``package_folders()``) that lacks current bytecode.

    Returns a warning for the grader's log, "" when all is well. A folder that cannot be written (a
    read-only install) is left as it is, and the warning says the workers will compile in memory.
    """
    notes = []
    for folder in folders if folders is not None else package_folders():
        stamp = folder / STAMP
        with contextlib.suppress(OSError):
            if stamp.stat().st_mtime_ns >= folder.stat().st_mtime_ns:
                continue
        if not os.access(folder, os.W_OK):
            notes.append(
                f"{folder} is read-only and has no stamp of compiled bytecode: each worker may compile "
                "its imports from source (install with `uv sync --compile-bytecode` to avoid it)"
            )
            continue
        # quiet=2: a package's deliberately broken files (templates, Python 2 examples) say nothing
        compileall.compile_dir(folder, quiet=2, workers=max(1, workers))
        with contextlib.suppress(OSError):
            stamp.touch()
            os.utime(stamp)  # after the folder's own change by the stamp's creation
    return "; ".join(notes)
