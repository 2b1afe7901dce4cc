"""A tiny synthetic staff repository and submission builder, for testing the grader quickly.

The grader's own tests must not depend on the real (growing, torch-heavy) suite: they build a
repository with a four-function package (no torch, so its workers start in a fraction of a
second), public and hidden tests (one reading a hidden fixture, one a judge-timed speed check on
inputs drawn fresh per run), tests that hand the worker a file and read one it wrote
(``tmp_path``), one GPU test, a rubric and a rules file (tests/rules.toml), then grade hand-made
hostile submissions against it.

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

BOUNDARY = Path(__file__).resolve().parents[2] / "tests" / "boundary.py"
FRESH = BOUNDARY.with_name("fresh.py")  # the speed tests' per-run seed

GOOD_CALC = '''\
"""A correct implementation."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def scale_file(path, k):
    return [k * int(x) for x in open(path).read().split()]


def sum_below(n):
    return n * (n - 1) // 2


def save_sum(path, a, b):
    with open(path, "w") as f: f.write(str(a + b))  # noqa: E701 - one line, so calc_with can replace it


def feed(tally, xs):
    for x in xs: tally.add(x)  # noqa: E701 - one line, so calc_with can replace it


class RunningMean:
    def __init__(self):
        self.count, self.total = 0, 0.0

    def update(self, x):
        self.count += 1
        self.total += x

    @property
    def mean(self):
        return self.total / self.count
'''

ADAPTERS = """\
from cs336_assignment import calc


def run_add(a, b):
    return calc.add(a, b)


def run_mul(a, b):
    return calc.mul(a, b)


def run_scale_file(path, k):
    return calc.scale_file(path, k)


def run_sum_below(n):
    return calc.sum_below(n)


def run_save_sum(path, a, b):
    return calc.save_sum(path, a, b)


def run_feed(tally, xs):
    return calc.feed(tally, xs)


def get_running_mean_cls():
    return calc.RunningMean
"""

PYPROJECT = """\
[project]
name = "tiny"
version = "0"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
addopts = "-ra --strict-markers"
timeout = 60
markers = ["gpu: needs CUDA", "fp8: fp8", "h100: h100", "slow: slow", "staff: staff"]
"""

CONFTEST = """\
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; none on this machine"))
"""

PUBLIC_TESTS = '''\
import random
import time
from pathlib import Path

import pytest

import adapters
from tests.fresh import replay_hint, run_seed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
def test_add_matches_python(a, b):
    """add agrees with +."""
    assert adapters.run_add(a, b) == a + b


def test_mul_matches_python():
    """mul agrees with *, on ints and floats."""
    assert adapters.run_mul(6, 7) == 42
    assert adapters.run_mul(1.5, 4) == pytest.approx(6.0)


def test_scale_file_reads_fixture():
    """scale_file reads the staff fixture."""
    assert adapters.run_scale_file(FIXTURES / "numbers.txt", 2) == [2, 4, 6]


def test_sum_below_is_faster_than_a_python_loop():
    """sum_below(n) is right and, timed by the test, at least 5x faster than a loop timed in the same run.

    Each of the 3 timed calls gets its own n, drawn fresh per run (CS336_SPEED_SEED replays a run),
    so no table of answers and no cache of earlier calls helps; the best of the 3 counts on both
    sides, so one stall of a loaded machine (tens of ms) decides nothing."""
    rng = random.Random(run_seed())
    ns = [3_000_000 + rng.randrange(1_000_000) for _ in range(3)]
    loops, times = [], []
    for n in ns:
        start = time.perf_counter()
        expected = sum(range(n))
        loops.append(time.perf_counter() - start)
        start = time.perf_counter()
        got = adapters.run_sum_below(n)
        times.append(time.perf_counter() - start)
        assert got == expected
    ours, loop = min(times), min(loops)  # best of 3 on both sides: a stall on either side is not a verdict
    assert ours < loop / 5, f"sum_below took {ours:.3f} s, the loop {loop:.3f} s ({replay_hint()})"


def test_scale_file_of_a_file_the_test_wrote(tmp_path):
    """scale_file reads a file the test wrote; the test reads it again afterwards for the expected answer."""
    path = tmp_path / "numbers.txt"
    path.write_text("4 5 6\\n")
    got = adapters.run_scale_file(path, 3)
    assert got == [3 * int(x) for x in path.read_text().split()]


def test_sum_saved_to_a_file_reads_back(tmp_path):
    """save_sum writes a + b, as text, to the path it is given; the test reads the file."""
    path = tmp_path / "sum.txt"
    adapters.run_save_sum(path, 20, 22)
    assert path.read_text() == "42"


@pytest.mark.gpu
def test_add_on_gpu():
    """(GPU twin) add agrees with + on the GPU runner."""
    assert adapters.run_add(2, 2) == 4
'''

HIDDEN_TESTS = '''\
from pathlib import Path

import adapters

HIDDEN = Path(__file__).resolve().parents[2] / "fixtures" / "hidden"
SECRET_OPERAND = -918273645  # distinctive: a test checks it never reaches a visible test's output


def test_add_negative():
    """add handles negative numbers."""
    assert adapters.run_add(SECRET_OPERAND, 3) == SECRET_OPERAND + 3


def test_mul_matches_the_hidden_fixture():
    """mul reproduces the products stored in a hidden fixture (read here, in the judge)."""
    for line in (HIDDEN / "products.txt").read_text().splitlines():
        a, b, product = map(int, line.split())
        assert adapters.run_mul(a, b) == product
'''

# -- with ``loops=True``: tests whose drivers run the student's objects over many calls -----------------
LOOP_SCENARIO = '''\
"""Drivers of the running-mean tests: each builds the submission's objects through adapters, runs them,
and returns plain data (in grading, in the worker, as one round trip)."""

import adapters
from tests.boundary import driver


class Tally:
    """A tally the submission's ``feed`` adds to."""

    def __init__(self):
        self.values = []

    def add(self, x):
        if not isinstance(x, (int, float)):
            raise ValueError(f"a tally counts numbers, not {x!r}")
        self.values.append(x)


def drive(cls, xs):
    """The mean after each of ``xs``, given to a fresh ``cls()`` one ``update`` at a time."""
    m = cls()
    means = []
    for x in xs:
        m.update(x)
        means.append(m.mean)
    return means


@driver
def student_means(xs):
    """``drive`` over the submission's RunningMean."""
    return drive(adapters.get_running_mean_cls(), xs)


@driver
def fed(batches):
    """A fresh Tally given to the submission's ``feed`` with each batch in turn: after each, the tally's
    values and the message of the ValueError it raised (None if none)."""
    tally, seen = Tally(), []
    for xs in batches:
        try:
            adapters.run_feed(tally, xs)
            error = None
        except ValueError as e:
            error = str(e)
        seen.append((list(tally.values), error))
    return seen
'''

LOOP_TESTS = '''\
import pytest

from tests.scenarios.mean import drive, fed, student_means


class Reference:
    def __init__(self):
        self.values = []

    def update(self, x):
        self.values.append(x)

    @property
    def mean(self):
        return sum(self.values) / len(self.values)


def test_running_mean_follows_every_update():
    """After each update, mean is the mean of every value so far."""
    xs = [3.0, -1.0, 4.0, 1.5, -9.0, 2.0]
    assert student_means(xs) == pytest.approx(drive(Reference, xs))


def test_feed_adds_every_value_to_the_tests_tally():
    """feed(tally, xs) calls tally.add(x) for each x, in order; the tally's own error comes through feed."""
    (first, error), (second, failure) = fed([[2, 7, 1], [3, "x"]])
    assert first == [2, 7, 1] and error is None
    assert second == [2, 7, 1, 3] and failure is not None and "counts numbers" in failure
'''

LOOP_RUBRIC = """
[concepts.means]
title = "Running means"
points = 2

[[rules]]
match = "tests/test_mean.py::*"
concept = "means"
"""

RULES = """\
[parts.calc]
may_use = "Python's arithmetic"

[[rules]]
id = "no-reaching-the-tests"
short = "reaching the tests or the interpreter's insides"
part = "all"
forbidden = ["tests", "sys.modules", "sys._getframe", "gc", "inspect", "ctypes", "builtins", "exec", "eval"]
attributes = ["f_back", "f_locals", "tb_frame", "__globals__", "__code__"]
computed_imports = true
outside_stores = true
says = "your code may not reach the tests, nor the interpreter's insides through which it could change them"

[[rules]]
id = "no-operator-module"
short = "the operator module"
part = "calc"
forbidden = ["operator", "math.prod"]
says = "operator and math.prod may not be used: multiply yourself"
"""

STAFF_TESTS = """\
import pytest

pytestmark = pytest.mark.staff


def test_staff_only():
    assert True
"""

RUBRIC = """\
[concepts.addition]
title = "Addition"
points = 6

[concepts.products]
title = "Products"

[[rules]]
match = ["tests/test_calc.py::test_add*", "tests/hidden/test_calc.py::test_add*"]
concept = "addition"

[[rules]]
match = ["tests/test_calc.py::test_mul*", "tests/test_calc.py::test_scale*", "tests/test_calc.py::test_sum*",
         "tests/hidden/test_calc.py::test_mul*"]
concept = "products"

[[rules]]
match = "tests/hidden/*"
visibility = "after_due_date"

[[rules]]
match = "tests/test_calc.py::test_mul_matches_python"
weight = 2
"""


def make_staff_repo(root: Path, loops: bool = False) -> Path:
    """Write the synthetic staff repository under ``root`` and return ``root``.

    ``loops``: also tests whose drivers (a scenario module) run ``RunningMean`` and ``feed`` over many calls.
    """
    files = {
        "pyproject.toml": PYPROJECT,
        "adapters.py": ADAPTERS,
        "rubric.toml": RUBRIC,
        "cs336_assignment/__init__.py": "",
        "cs336_assignment/calc.py": GOOD_CALC,
        "tests/__init__.py": "",
        "tests/conftest.py": CONFTEST,
        "tests/test_calc.py": PUBLIC_TESTS,
        "tests/boundary.py": BOUNDARY.read_text(),
        "tests/fresh.py": FRESH.read_text(),
        "tests/rules.toml": RULES,
        "tests/hidden/__init__.py": "",
        "tests/hidden/test_calc.py": HIDDEN_TESTS,
        "tests/staff/__init__.py": "",
        "tests/staff/test_tooling.py": STAFF_TESTS,
        "fixtures/numbers.txt": "1 2 3\n",
        "fixtures/hidden/products.txt": "6 7 42\n-3 5 -15\n",
    }
    if loops:
        files.update(
            {
                "tests/scenarios/__init__.py": "",
                "tests/scenarios/mean.py": LOOP_SCENARIO,
                "tests/test_mean.py": LOOP_TESTS,
                "rubric.toml": RUBRIC + LOOP_RUBRIC,
            }
        )
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def make_zip(
    path: Path,
    files: dict[str, str | bytes],
    *,
    symlinks: dict[str, str] | None = None,
    calc: str | None = GOOD_CALC,
    adapters: str | None = ADAPTERS,
) -> Path:
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


def grade_batch(
    root: Path, paths: list[Path], out: Path, limits, *, jobs: int, insecure: bool
) -> dict:
    """Grade ``paths`` against the staff repo ``root`` with the strongest tier here (``run_batch``):
    the rows by name, the tier, and the peak memory of any judge or worker process (KiB)."""
    import resource

    from cs336_staff.grade.batch import run_batch
    from cs336_staff.grade.grader import make_plan

    plan = make_plan(
        root, device="cpu", limits=limits, jobs=jobs, cache_dir=out / ".cache", insecure=insecure
    )
    rows = run_batch(paths, out, plan, jobs=jobs, progress=False)
    return {
        "rows": {r["name"]: r for r in rows},
        "tier": plan.tier,
        "judge_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m cs336_staff.grade.testing SPEC.json``: ``grade_batch`` in a process of its own (for
    a test that grades inside ``standin``); the spec names root, paths, out, limits, jobs, insecure,
    and the JSON file the result is written to."""
    import json
    import sys

    from cs336_staff.grade.limits import Limits

    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    result = grade_batch(
        Path(spec["root"]),
        [Path(p) for p in spec["paths"]],
        Path(spec["out"]),
        Limits(**spec["limits"]),
        jobs=spec["jobs"],
        insecure=spec["insecure"],
    )
    Path(spec["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
