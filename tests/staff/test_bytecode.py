"""The worker's imports come from compiled bytecode (cs336_staff/grade/bytecode.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.grade import bytecode
from cs336_staff.grade.bytecode import STAMP, ensure_compiled
from cs336_staff.grade.grader import _judge_env
from cs336_staff.grade.testing import make_staff_repo

ROOT = Path(__file__).resolve().parents[2]


def test_a_package_folder_is_compiled_once_then_left_alone(tmp_path):
    """The first call writes __pycache__ for every module and a stamp; the next finds the stamp and
    compiles nothing; installing a new package (the folder changes) compiles again."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("X = 1\n")
    # a package's broken file stops nothing
    (tmp_path / "broken.py").write_text("print 'python 2'\n")
    assert ensure_compiled([tmp_path]) == ""
    assert list((tmp_path / "pkg" / "__pycache__").glob("__init__.*.pyc"))
    assert (tmp_path / STAMP).exists()
    # the top folder itself unchanged
    (tmp_path / "pkg" / "__pycache__").rename(tmp_path / "pkg" / "gone")
    ensure_compiled([tmp_path])
    assert not (tmp_path / "pkg" / "__pycache__").exists(), "a stamped folder is not compiled again"
    (tmp_path / "new.py").write_text("Y = 2\n")
    os.utime(tmp_path, ns=((tmp_path / STAMP).stat().st_mtime_ns + 10**9,) * 2)
    ensure_compiled([tmp_path])
    assert (
        list((tmp_path / "__pycache__").glob("new.*.pyc"))
        and (tmp_path / "pkg" / "__pycache__").exists()
    )


def test_a_read_only_install_is_left_alone_with_a_warning(tmp_path, monkeypatch):
    """A folder the grader cannot write (as root, every folder is writable: the check is os.access)."""
    (tmp_path / "m.py").write_text("Z = 3\n")
    monkeypatch.setattr(bytecode.os, "access", lambda path, mode: False)
    warning = ensure_compiled([tmp_path])
    assert "read-only" in warning and "--compile-bytecode" in warning
    assert not (tmp_path / "__pycache__").exists()


@pytest.mark.parametrize("may_write", [True, False])
def test_the_collection_leaves_the_rewritten_tests_for_the_judges_unless_told_not_to(
    tmp_path, may_write
):
    """Collecting a staff tree (once per batch, before grading) writes the tests as pytest rewrote
    them into its __pycache__, where every judge reads them; a grader told to write no bytecode
    (run_autograder) leaves the tree as it found it. A judge never writes any."""
    staff = make_staff_repo(tmp_path / "staff")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not may_write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    collect = "import sys; from pathlib import Path; from cs336_staff.grade.grader import collect_expected; collect_expected(Path(sys.argv[1]))"
    subprocess.run(
        [sys.executable, "-c", collect, str(staff)], check=True, env=env, cwd=ROOT, timeout=300
    )
    rewritten = list((staff / "tests").glob("__pycache__/test_calc.*-pytest-*.pyc"))
    assert bool(rewritten) is may_write, rewritten
    assert _judge_env(False, 1)["PYTHONDONTWRITEBYTECODE"] == "1"
