"""Docs and comments name only files that exist: a renamed or deleted file cannot leave a stale pointer.

Every repository path written in a tracked text file (``tests/staff/test_x.py``, ``cs336_staff/grade/
THREAT_MODEL.md``, ``benchmarks/encode.py``, ...) must exist. Globs (``*``), placeholders
(``<part>``, ``NAME``), URLs and the handout-only files the release generates are not paths to check.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.staff
ROOT = Path(__file__).resolve().parents[2]
TOP = (
    "tests",
    "cs336_staff",
    "cs336_assignment",
    "benchmarks",
    "fixtures",
    "writeup",
    ".ci",
    ".github",
)
ROOTS = "|".join(re.escape(t) for t in TOP)
PATH = re.compile(
    rf"(?<![\w/.-])((?:{ROOTS})/[\w./-]*[\w-]\.(?:py|md|toml|sh|typ|json|txt|yml|npz))"
)
#: Files that exist only in the generated handout, or that benchmark scripts generate (not committed).
GENERATED = ("tests/points.json", "benchmarks/data/")
#: Files that describe synthetic repositories of their own (their paths are not this repository's).
SYNTHETIC = ("tests/staff/", "cs336_staff/grade/testing.py")
PLACEHOLDER = re.compile(r"/[A-Z_]+\.")  # cs336_assignment/KEY.py
TEXT = (".py", ".md", ".toml", ".sh", ".typ", ".yml", ".txt")


def tracked_text_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / f for f in out.splitlines() if f.endswith(TEXT) and (ROOT / f).is_file()]


def test_every_repository_path_named_in_docs_and_comments_exists():
    """Each `tests/...`, `cs336_staff/...`, `benchmarks/...` path written in a tracked file exists."""
    missing = []
    for path in tracked_text_files():
        if path.relative_to(ROOT).as_posix().startswith(SYNTHETIC):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for ref in PATH.findall(line):
                # a.py/b.py
                illustrative = any(part.endswith(".py") for part in ref.split("/")[:-1])
                if (
                    "*" in ref
                    or "<" in ref
                    or ref.startswith(GENERATED)
                    or PLACEHOLDER.search(ref)
                    or illustrative
                ):
                    continue
                if not (ROOT / ref).exists():
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {ref}")
    assert not missing, "stale references to files that do not exist:\n" + "\n".join(missing[:40])
