"""Which files of the repository the handout ships: an allowlist, read by ``release`` and ``audit``.

    cs336_assignment/   every file (``release/build.py`` stubs the .py files' solution regions)
    tests/              the public tests, without tests/hidden/ and tests/staff/
    fixtures/           without fixtures/hidden/
    adapters.py, make_submission.sh, .gitignore

Caches and bytecode never ship. Anything new in the repository stays out until staff add it here.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = "cs336_assignment"
SHIPPED_DIRS: dict[str, tuple[str, ...]] = {
    PACKAGE: (),
    "tests": ("tests/hidden", "tests/staff"),
    "fixtures": ("fixtures/hidden",),
}
SHIPPED_FILES = ("adapters.py", "make_submission.sh", ".gitignore")
JUNK_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".mypy_cache"}
JUNK_SUFFIXES = (".pyc", ".pyo")


def shipped_sources(repo: Path) -> list[str]:
    """Relative posix paths of the repository files the allowlist ships, sorted."""
    out = [f for f in SHIPPED_FILES if (repo / f).is_file()]
    for top, skip in SHIPPED_DIRS.items():
        base = repo / top
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = Path(dirpath).relative_to(repo)
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in JUNK_DIRS
                and (rel_dir / d).as_posix() not in skip
                and not d.endswith(".egg-info")
            )
            out.extend(
                (rel_dir / f).as_posix() for f in sorted(filenames) if not f.endswith(JUNK_SUFFIXES)
            )
    return sorted(out)
