"""A tiny synthetic staff repository and submission builder, for testing the grader quickly.

The grader's own tests must not depend on the real (growing, torch-heavy) suite: they build a
repository with a three-function package, four public tests, one hidden test, one GPU test and a
rubric, then grade hand-made hostile submissions against it in about a second each.

>>> import tempfile; from pathlib import Path
>>> root = make_staff_repo(Path(tempfile.mkdtemp()))
>>> sorted(p.name for p in root.iterdir())
['adapters.py', 'cs336_assignment', 'fixtures', 'pyproject.toml', 'rubric.toml', 'tests']
"""

from __future__ import annotations

import stat
import textwrap
import zipfile
from pathlib import Path

GOOD_CALC = '''\
"""A correct implementation."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def scale_file(path, k):
    return [k * int(x) for x in open(path).read().split()]
'''

ADAPTERS = '''\
from cs336_assignment import calc


def run_add(a, b):
    return calc.add(a, b)


def run_mul(a, b):
    return calc.mul(a, b)


def run_scale_file(path, k):
    return calc.scale_file(path, k)
'''

PYPROJECT = '''\
[project]
name = "tiny"
version = "0"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
addopts = "-ra --strict-markers"
timeout = 60
markers = ["gpu: needs CUDA", "fp8: fp8", "h100: h100", "slow: slow", "staff: staff"]
'''

CONFTEST = '''\
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; none on this machine"))
'''

PUBLIC_TESTS = '''\
from pathlib import Path

import pytest

import adapters

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
def test_add_matches_python(a, b):
    """add agrees with +."""
    assert adapters.run_add(a, b) == a + b


def test_mul_matches_python():
    """mul agrees with *."""
    assert adapters.run_mul(6, 7) == 42


def test_scale_file_reads_fixture():
    """scale_file reads the staff fixture."""
    assert adapters.run_scale_file(FIXTURES / "numbers.txt", 2) == [2, 4, 6]


@pytest.mark.gpu
def test_add_on_gpu():
    """(GPU twin) add agrees with + on the GPU runner."""
    assert adapters.run_add(2, 2) == 4
'''

HIDDEN_TESTS = '''\
import adapters


def test_add_negative():
    """add handles negative numbers."""
    assert adapters.run_add(-5, 3) == -2
'''

STAFF_TESTS = '''\
import pytest

pytestmark = pytest.mark.staff


def test_staff_only():
    assert True
'''

RUBRIC = '''\
[concepts.addition]
title = "Addition"
points = 6

[concepts.products]
title = "Products"

[[rules]]
match = ["tests/test_calc.py::test_add*", "tests/hidden/test_calc.py::test_add*"]
concept = "addition"

[[rules]]
match = ["tests/test_calc.py::test_mul*", "tests/test_calc.py::test_scale*"]
concept = "products"

[[rules]]
match = "tests/hidden/*"
visibility = "after_due_date"

[[rules]]
match = "tests/test_calc.py::test_mul_matches_python"
weight = 2
'''


def make_staff_repo(root: Path) -> Path:
    """Write the synthetic staff repository under ``root`` and return ``root``."""
    files = {
        "pyproject.toml": PYPROJECT, "adapters.py": ADAPTERS, "rubric.toml": RUBRIC,
        "cs336_assignment/__init__.py": "", "cs336_assignment/calc.py": GOOD_CALC,
        "tests/__init__.py": "", "tests/conftest.py": CONFTEST, "tests/test_calc.py": PUBLIC_TESTS,
        "tests/hidden/__init__.py": "", "tests/hidden/test_calc.py": HIDDEN_TESTS,
        "tests/staff/__init__.py": "", "tests/staff/test_tooling.py": STAFF_TESTS,
        "fixtures/numbers.txt": "1 2 3\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def make_zip(path: Path, files: dict[str, str | bytes], *, symlinks: dict[str, str] | None = None,
             calc: str | None = GOOD_CALC, adapters: str | None = ADAPTERS) -> Path:
    """A submission zip: the good package (``calc``/``adapters`` overridable) plus ``files``."""
    entries: dict[str, str | bytes] = {}
    if calc is not None:
        entries["cs336_assignment/__init__.py"] = ""
        entries["cs336_assignment/calc.py"] = calc
    if adapters is not None:
        entries["adapters.py"] = adapters
    entries.update(files)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def calc_with(prefix: str = "", **bodies: str) -> str:
    """The good ``calc.py`` with module-level ``prefix`` code and some functions' bodies replaced.

    >>> "sys.exit(3)" in calc_with(mul="import sys; sys.exit(3)")
    True
    """
    src = textwrap.dedent(prefix) + "\n" + GOOD_CALC
    for fn, body in bodies.items():
        lines = src.splitlines()
        i = next(k for k, line in enumerate(lines) if line.startswith(f"def {fn}("))
        lines[i + 1] = "    " + body
        src = "\n".join(lines) + "\n"
    return src
