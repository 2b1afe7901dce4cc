"""The worker's imports come from compiled bytecode (cs336_staff/grade/bytecode.py)."""

from __future__ import annotations

import os

from cs336_staff.grade import bytecode
from cs336_staff.grade.bytecode import STAMP, ensure_compiled


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
