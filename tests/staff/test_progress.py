"""The per-part progress summary (tests/progress.py) on a tiny sample tree, run as students run it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]

RUBRIC = """
[concepts.alpha]
title = "1. Alpha"
points = 10

[concepts.beta]
title = "2. Beta"
points = 6

[[rules]]
match = "tests/*test_alpha*.py::*"
concept = "alpha"

[[rules]]
match = "tests/*test_beta*.py::*"
concept = "beta"

[[rules]]
match = "tests/test_beta.py::test_heavy"
weight = 2

[[rules]]
match = "tests/hidden/*"
visibility = "after_due_date"
"""

FILES = {
    "tests/__init__.py": "",
    "tests/hidden/__init__.py": "",
    "tests/conftest.py": """
        from pathlib import Path

        from tests import not_written, progress


        def pytest_configure(config):
            progress.register(config)
            not_written.register(config)


        def pytest_collection_modifyitems(config, items):
            data = progress.load_points(Path(str(config.rootpath)))
            if data is not None:
                progress.handout_order(items, data)
        """,
    "tests/test_alpha.py": """
        import pytest


        def test_one():
            pass


        def test_two():
            raise NotImplementedError("Implement two in alpha.py")


        @pytest.mark.skip(reason="needs a CUDA GPU")
        def test_gpu():
            pass
        """,
    "tests/test_beta.py": """
        def test_light():
            pass


        def test_heavy():
            raise NotImplementedError("Implement heavy in beta.py")
        """,
    "tests/hidden/test_alpha.py": "def test_hidden():\n    pass\n",
}


def sample(root: Path, rubric: bool = True) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    for name in ("progress.py", "not_written.py"):
        shutil.copyfile(REPO / "tests" / name, root / "tests" / name)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["."]\n'
    )
    if rubric:
        (root / "rubric.toml").write_text(RUBRIC)
    return root


def pytest_out(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }  # the sample needs no installed plugin
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return proc.stdout


def test_table_per_part_with_weighted_points_from_the_rubric(tmp_path):
    """Passed/failed/skipped per part; points = part points x passed weight / weight that ran."""
    out = pytest_out(sample(tmp_path))
    assert "public progress by part (points)" in out, out
    lines = out.splitlines()
    alpha = next(line for line in lines if line.startswith("1. Alpha"))
    beta = next(line for line in lines if line.startswith("2. Beta"))
    assert alpha.split() == [
        "1.",
        "Alpha",
        "1/3",
        "1",
        "1",
        "5.0/10",
    ]  # the skipped test is not counted
    assert beta.split() == ["2.", "Beta", "1/2", "1", "0", "2.0/6"]  # test_heavy weighs 2 of 3
    assert next(line for line in lines if line.startswith("total")).split() == ["total", "7.0/16"]
    assert "Not counted above: 1 other tests" in out
    # the table is the last thing printed: after pytest's short summary and its final counts
    assert (
        out.index("short test summary")
        < out.index("2 failed, 3 passed")
        < out.index("public progress by part")
    )
    assert out.rstrip().splitlines()[-1].startswith("Not counted above"), out[-800:]


def test_table_comes_last_and_names_a_test_file_that_does_not_collect(tmp_path):
    """A public test file that fails to import: the table still ends the output, its part at 0 points,
    the file named under it."""
    root = sample(tmp_path)
    (root / "tests" / "test_beta.py").write_text("import missing_student_module\n")
    out = pytest_out(root)
    assert "error" in out.lower() and "public progress by part" in out, out
    lines = out.splitlines()
    beta = next(line for line in lines if line.startswith("2. Beta"))
    assert beta.split()[-1] == "0.0/6", beta
    assert "tests/test_beta.py" in out[out.index("public progress by part") :], out[-1200:]
    assert out.index("during collection") < out.index("public progress by part"), out[-1200:]


def test_generated_points_file_is_used_without_a_rubric(tmp_path):
    """The handout has tests/points.json and no rubric.toml; the table is the same."""
    from cs336_staff.release.handout_parts import points_json

    root = sample(tmp_path / "a")
    (root / "tests" / "points.json").write_text(points_json(root))
    (root / "rubric.toml").unlink()
    data = json.loads((root / "tests" / "points.json").read_text())
    assert [p["title"] for p in data["parts"]] == ["1. Alpha", "2. Beta"]
    out = pytest_out(root, "tests/test_alpha.py")
    assert (
        "5.0/10" in out
        and "2. Beta" not in out
        and "1 of 2 parts had no public test in this run" in out
    )


def test_the_points_file_keeps_no_pattern_that_names_a_hidden_test():
    """Rules weighing hidden cases (a bug's only catch, rubric.toml) change no public test's points, and the
    handout must not name hidden tests: tests/points.json keeps only the patterns that can match a public test."""
    import tomllib

    from tests.progress import points_from_rubric

    rubric = RUBRIC + textwrap.dedent("""
        [[rules]]
        match = ["tests/hidden/test_beta.py::test_edge[[]0]", "tests/test_beta.py::test_light"]
        weight = 9

        [[rules]]
        match = "tests/hidden/test_alpha.py::test_only_catch"
        weight = 5
        """)
    rules = points_from_rubric(tomllib.loads(rubric))["rules"]
    assert [(r["match"], r.get("weight")) for r in rules] == [
        (["tests/*test_alpha*.py::*"], None),
        (["tests/*test_beta*.py::*"], None),
        (["tests/test_beta.py::test_heavy"], 2),
        (["tests/test_beta.py::test_light"], 9),
    ]


def test_stubs_show_zero_and_nothing_prints_without_points_or_public_tests(tmp_path):
    """All failing: 0.0 per part. No rubric: no table. Only hidden tests, or --collect-only: no table."""
    root = sample(tmp_path / "a")
    (root / "tests" / "test_alpha.py").write_text("def test_x():\n    raise NotImplementedError\n")
    assert "0.0/10" in pytest_out(root, "tests/test_alpha.py")
    assert "public progress" not in pytest_out(root, "tests/hidden")
    assert "public progress" not in pytest_out(root, "--collect-only")
    assert "public progress" not in pytest_out(root, "-p", "no:cs336_progress")
    bare = sample(tmp_path / "b", rubric=False)
    assert "public progress" not in pytest_out(bare)


def test_files_run_in_the_handouts_order_and_the_stub_run_says_where_to_start(tmp_path):
    """With Beta first in the rubric, Beta's file runs first (the hidden folder keeps its place) and the
    line under the table names the first part whose tests reach a function not written yet."""
    root = sample(tmp_path)
    rubric = (root / "rubric.toml").read_text()
    alpha, beta = rubric.index("[concepts.alpha]"), rubric.index("[concepts.beta]")
    rules = rubric.index("[[rules]]")
    swapped = rubric[:alpha] + rubric[beta:rules].replace("2. Beta", "1. Beta")
    (root / "rubric.toml").write_text(
        swapped + rubric[alpha:beta].replace("1. Alpha", "2. Alpha") + rubric[rules:]
    )
    collected = pytest_out(root, "--collect-only", "-q").splitlines()
    files = list(dict.fromkeys(line.split("::")[0] for line in collected if "::" in line))
    assert files == ["tests/hidden/test_alpha.py", "tests/test_beta.py", "tests/test_alpha.py"], (
        collected
    )
    out = " ".join(pytest_out(root).split())
    assert (
        "Where to start: 1. Beta (the first part in the handout's order with functions not written "
        "yet: 1 of its tests reach one, e.g. Implement heavy in beta.py)"
    ) in out, out[-1500:]
    out = " ".join(pytest_out(root, "tests/test_alpha.py").split())
    assert (
        "Where to start: 2. Alpha (the first part in the handout's order, among the parts this run "
        "tested, with functions not written yet"
    ) in out, out[-1500:]
    (root / "tests" / "test_beta.py").write_text("def test_light():\n    pass\n")
    out = " ".join(pytest_out(root).split())
    assert "Where to start: 2. Alpha (the first part in the handout's order with" in out, out[
        -1500:
    ]
    (root / "tests" / "test_alpha.py").write_text("def test_one():\n    pass\n")
    assert "Where to start" not in pytest_out(root)


def test_the_suites_test_files_run_in_the_parts_order():
    """tests/conftest.py orders the public test files as cs336_staff/parts.py lists the parts' files."""
    from cs336_staff.parts import load_parts

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-q",
            *sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py")),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    files = list(
        dict.fromkeys(line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line)
    )
    expected = [f for part in load_parts(REPO) for f in part.tests]
    assert files == expected, proc.stdout[-2000:]


def test_a_part_whose_files_did_not_all_run_says_partial_instead_of_points(tmp_path):
    """One of a part's two files run, or -k leaving some tests out: `partial`, how many ran, and which
    file did not; a part that ran whole keeps its points."""
    root = sample(tmp_path)
    (root / "tests" / "test_alpha_more.py").write_text("def test_three():\n    pass\n")
    out = pytest_out(root, "tests/test_alpha.py", "tests/test_beta.py")
    lines = out.splitlines()
    assert next(line for line in lines if line.startswith("1. Alpha")).split()[-1] == "partial", out
    assert next(line for line in lines if line.startswith("2. Beta")).split()[-1] == "2.0/6", out
    flat = " ".join(out.split())
    assert "1. Alpha: partial: 3 tests ran; tests/test_alpha_more.py did not run." in flat, out
    out = " ".join(pytest_out(root, "-k", "one or beta or three").split())
    assert "1. Alpha: partial: 2 of 4 tests ran." in out, out
    whole = pytest_out(root)
    assert "partial" not in whole, whole
    picked = pytest_out(root, "tests/test_alpha.py::test_one", "tests/test_alpha_more.py")
    assert "tests/test_alpha.py (only the tests named)" in " ".join(picked.split()), picked


RULED = {
    "tests/conftest.py": """
        from tests import progress, rules


        def pytest_configure(config):
            progress.register(config)
            rules.register(config)
        """,
    "tests/rules.toml": """
        [parts.alpha]
        may_use = "Python"

        [parts.beta]
        may_use = "Python"

        [[rules]]
        id = "no-prod"
        short = "math.prod"
        part = "alpha"
        forbidden = ["math.prod"]
        says = "math.prod may not be used: multiply yourself"
        """,
    "adapters.py": """
        from cs336_assignment import alpha, beta

        # ----------------------------------------------------------------------------------------
        # 1. Alpha
        # ----------------------------------------------------------------------------------------


        def run_prod(xs):
            return alpha.prod(xs)


        def run_total(xs):
            return alpha.total(xs)


        # ----------------------------------------------------------------------------------------
        # 2. Beta
        # ----------------------------------------------------------------------------------------


        def run_double(x):
            return beta.double(x)
        """,
    "cs336_assignment/__init__.py": "",
    "cs336_assignment/alpha.py": """
        import math


        def prod(xs):
            return math.prod(xs)


        def total(xs):
            return sum(xs)
        """,
    "cs336_assignment/beta.py": "def double(x):\n    return 2 * x\n",
    "tests/test_alpha.py": """
        import adapters


        def test_prod():
            assert adapters.run_prod([2, 3]) == 6


        def test_total():
            assert adapters.run_total([2, 3]) == 5
        """,
    "tests/test_beta.py": "import adapters\n\n\ndef test_double():\n    assert adapters.run_double(4) == 8\n",
}


def test_a_test_that_reaches_a_rule_break_earns_nothing_in_the_table_as_in_grading(tmp_path):
    """math.prod in Alpha's code: the test that reaches it scores 0 (the other Alpha test and Beta's keep
    theirs); a break of a rule of every part (sys._getframe, here in Beta's code) costs every test."""
    root = sample(tmp_path)
    for rel, text in RULED.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    shutil.copyfile(REPO / "tests" / "rules.py", root / "tests" / "rules.py")
    out = pytest_out(root)
    lines = out.splitlines()
    assert "RULE adapters.run_prod reaches math.prod" in out, out
    assert next(line for line in lines if line.startswith("1. Alpha")).split()[2:] == [
        "1/2",
        "1",
        "0",
        "5.0/10",
    ], out
    assert next(line for line in lines if line.startswith("2. Beta")).split()[-1] == "6.0/6", out
    assert "1 tests passed but earn no points here, as in grading" in " ".join(out.split()), out

    with open(root / "tests" / "rules.toml", "a") as f:
        f.write(
            '\n[[rules]]\nid = "no-reaching-the-tests"\nshort = "the interpreter\'s insides"\n'
            'part = "all"\nforbidden = ["sys._getframe"]\nsays = "no frames"\n'
        )
    (root / "cs336_assignment" / "beta.py").write_text(
        "import sys\n\n\ndef double(x):\n    sys._getframe(0)\n    return 2 * x\n"
    )
    out = pytest_out(root)
    lines = out.splitlines()
    assert next(line for line in lines if line.startswith("1. Alpha")).split()[-1] == "0.0/10", out
    assert next(line for line in lines if line.startswith("2. Beta")).split()[-1] == "0.0/6", out
