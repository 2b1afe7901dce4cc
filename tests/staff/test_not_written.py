"""A test that reaches a stub is reported in one line (tests/not_written.py), whatever the test did
with the stub's error; other failures keep their traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]

TESTS = '''
import pytest

DOC = "a long docstring line that a traceback would reprint"


def stub(x):
    """{doc}"""
    raise NotImplementedError("Implement stub in cs336_assignment/sample.py")


@pytest.fixture
def built():
    return stub(1)


def test_calls_the_stub():
    assert stub(1) == 2


def test_fixture_calls_the_stub(built):
    assert built == 2


def test_catches_runtime_error_and_explains_something_else():
    try:
        stub(1)
    except RuntimeError as e:  # NotImplementedError is a RuntimeError
        pytest.fail(f"use reshape(), not view(): {{e}}", pytrace=False)


def test_wraps_the_error():
    try:
        stub(1)
    except Exception as e:
        raise AssertionError("the error should name the file") from e


def test_a_real_bug():
    assert 1 + 1 == 3, "a real failure keeps its message"


def test_other_not_implemented_error():
    raise NotImplementedError("torch has no kernel for this dtype")
'''.format(doc="\\n    ".join(["a long docstring line that a traceback would reprint"] * 20))


def run(tmp_path: Path, *args: str) -> str:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "not_written.py").write_text(
        (REPO / "tests" / "not_written.py").read_text()
    )
    (tmp_path / "tests" / "conftest.py").write_text(
        "from tests import not_written\n\n\ndef pytest_configure(config):\n    not_written.register(config)\n"
    )
    (tmp_path / "tests" / "test_sample.py").write_text(textwrap.dedent(TESTS))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["."]\n'
    )
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return proc.stdout


def section(out: str, test: str) -> str:
    """The body of ``test``'s section under FAILURES or ERRORS."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and f" {test} " in line)
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith(("_", "="))), len(lines)
    )
    return "\n".join(lines[start + 1 : end]).strip()


STUB_LINE = "not written yet: Implement stub in cs336_assignment/sample.py"


@pytest.mark.parametrize(
    "test",
    [
        "test_calls_the_stub",
        "test_fixture_calls_the_stub",
        "test_catches_runtime_error_and_explains_something_else",
        "test_wraps_the_error",
    ],
)
def test_a_test_that_reaches_a_stub_is_reported_in_one_line_as_not_written(tmp_path, test):
    """Called directly, from a fixture, caught as a RuntimeError and failed with another message, or
    wrapped in another error: the report is the stub's one line, no docstring, no other advice."""
    out = run(tmp_path)
    assert section(out, test) == STUB_LINE, out
    assert "reshape()" not in out and "a long docstring line" not in out, out


def test_other_failures_keep_their_traceback(tmp_path):
    """A real bug, and a NotImplementedError that is not a stub's, are reported as usual."""
    out = run(tmp_path)
    assert "a real failure keeps its message" in section(out, "test_a_real_bug")
    assert "torch has no kernel" in section(out, "test_other_not_implemented_error")
    assert "not written" not in section(out, "test_other_not_implemented_error")


def test_the_plugin_can_be_turned_off(tmp_path):
    """``-p no:cs336_not_written``: pytest's own report again."""
    out = run(tmp_path, "-p", "no:cs336_not_written")
    assert "not written yet" not in out and "NotImplementedError" in out


def test_release_output_check_flags_misleading_long_or_table_not_last_output():
    """``release --check``'s output check (cs336_staff/release/student_output.py) on made-up outputs."""
    from cs336_staff.release.student_output import MAX_LINES, problems

    table = "==== public progress by part (points) ====\npart passed\ntotal 0.0/10\n"
    good = (
        "==== FAILURES ====\n____ test_a ____\n"
        + STUB_LINE
        + "\n---- Captured stderr call ----\nbar\n==== 1 failed ====\n"
        + table
    )
    assert problems(good) == []
    misleading = good.replace(STUB_LINE, "E   AssertionError: use reshape(), not view()")
    assert any("test_a: reported as" in p for p in problems(misleading))
    assert any(
        "not the last thing" in p
        for p in problems(table + "==== short test summary info ====\nFAILED x\n")
    )
    assert any(f"more than {MAX_LINES}" in p for p in problems("x\n" * (MAX_LINES + 1) + table))
    assert any("no per-part table" in p for p in problems("==== 1 failed ====\n"))
