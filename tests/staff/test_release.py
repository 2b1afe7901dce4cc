"""`cs336 release` on a small sample repository: what ships, what is stubbed, and what --check catches."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from cs336_assignment.cli import main
from cs336_staff.markers import MarkerError
from cs336_staff.release.build import build, handout_pyproject
from cs336_staff.release.check import check, check_leaks
from cs336_staff.release.results import ReleaseError
from cs336_staff.session.warm import WarmPool
from cs336_staff.snapshots import regenerate

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]

SAMPLE = {
    "pyproject.toml": (REPO / "pyproject.toml").read_text(),
    "adapters.py": '''
        """Adapters."""

        from cs336_assignment import arith


        # ------------------------------------------------------------------
        # 1. Arithmetic
        # ------------------------------------------------------------------


        def run_add(a: float, b: float) -> float:
            """See cs336_assignment.arith.add."""
            return arith.add(a, b)


        def run_hypot(a: float, b: float) -> float:
            """See cs336_assignment.arith.hypot."""
            return arith.hypot(a, b)
        ''',
    "cs336_assignment/__init__.py": '"""Sample package."""\n',
    "cs336_assignment/arith.py": '''
        """Arithmetic that students write.

        Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
            May use: Python arithmetic and the math module.
            Not allowed: .
        """

        from __future__ import annotations

        import math


        def add(a: float, b: float) -> float:
            """``a + b``."""
            # BEGIN SOLUTION
            return a + b
            # END SOLUTION


        def hypot(a: float, b: float) -> float:
            """``sqrt(a**2 + b**2)``; a ValueError for NaN."""
            if math.isnan(a) or math.isnan(b):
                raise ValueError("hypot of NaN; pass finite numbers")
            # BEGIN SOLUTION
            squares = a * a + b * b
            return math.sqrt(squares)
            # END SOLUTION


        def describe(x: float) -> str:
            """A helper students need not write."""
            return f"{x:.2f}"
        ''',
    "cs336_assignment/notes_staff.py": "# STAFF-ONLY: grading notes\nSECRET = 1\n",
    "tests/__init__.py": "",
    "tests/conftest.py": """
        import pytest

        from tests.snapshot import Snapshot


        def pytest_addoption(parser):
            parser.addoption("--snapshot-update", action="store_true", default=False)


        @pytest.fixture
        def snapshot(request):
            return Snapshot(request.path, request.config.getoption("--snapshot-update"))
        """,
    # The real snapshot module, with torch swapped for a stand-in: the sample's values are NumPy
    # arrays, and every child pytest that skips importing torch saves seconds of CPU.
    "tests/snapshot.py": (REPO / "tests" / "snapshot.py")
    .read_text()
    .replace(
        "\nimport torch\n",
        '\n\n\nclass torch:  # noqa: N801 (stand-in: the sample never makes a tensor)\n    Tensor = type("Tensor", (), {})\n',
        1,
    ),
    "tests/test_arith.py": '''
        import numpy as np
        import pytest

        import adapters


        def test_add_adds():
            """1 + 2 == 3."""
            assert adapters.run_add(1.0, 2.0) == 3.0


        def test_hypot_matches_snapshot(snapshot):
            """hypot on a grid matches the stored values."""
            grid = np.array([adapters.run_hypot(a, 4.0) for a in (0.0, 3.0, 5.0)])
            snapshot.assert_match("hypot", {"grid": grid, "squares": grid**2})


        @pytest.mark.gpu
        def test_add_on_gpu():
            """Needs a GPU."""
            pytest.skip("needs a CUDA GPU")
        ''',
    "tests/hidden/__init__.py": "",
    "tests/hidden/test_arith.py": '''
        import adapters


        def test_add_negative():
            """Hidden: -1 + -2."""
            assert adapters.run_add(-1.0, -2.0) == -3.0
        ''',
    "tests/staff/test_tooling.py": "def test_staff():\n    pass\n",
    "tests/rules.toml": '[parts.arith]\nmay_use = "Python arithmetic and the math module"\n',
    "fixtures/data.txt": "public data\n",
    "fixtures/hidden/secret.txt": "hidden data\n",
    "rubric.toml": """
        [concepts.arith]
        title = "1. Arithmetic"
        points = 5

        [[rules]]
        match = "tests/*test_arith*.py::*"
        concept = "arith"
        """,
    "make_submission.sh": "#!/usr/bin/env bash\n# Zips your cs336_assignment/ into submission.zip; upload that file.\nzip -r submission.zip cs336_assignment\n",
    "cs336_staff/__init__.py": "",
    "benchmarks/bench.py": "print('fast')\n",
    ".ci/run": "uv run pytest\n",
}


def make_sample_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """Write the sample repository (or ``files``) under ``root``; returns ``root``."""
    assert "class torch:" in SAMPLE["tests/snapshot.py"], (
        "tests/snapshot.py no longer has `import torch` on a line of its own"
    )
    for rel, text in (SAMPLE if files is None else files).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    (root / "make_submission.sh").chmod(0o755)
    return root


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return make_sample_repo(tmp_path / "repo")


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_handout_ships_the_allowlist_and_leaves_staff_things_out(sample, tmp_path):
    """Package, adapters, public tests and fixtures ship; hidden, staff, benchmarks, CI and STAFF-ONLY files do not."""
    handout = build(sample, tmp_path / "out", lock=False)
    assert sorted(tree(handout.root)) == [
        "CHANGELOG.md",
        "README.md",
        "adapters.py",
        "cs336_assignment/__init__.py",
        "cs336_assignment/arith.py",
        "fixtures/data.txt",
        "make_submission.sh",
        "pyproject.toml",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/points.json",
        "tests/rules.toml",
        "tests/snapshot.py",
        "tests/test_arith.py",
    ]
    assert handout.left_out == ["cs336_assignment/notes_staff.py"]
    assert (handout.root / "make_submission.sh").stat().st_mode & 0o777 == 0o755


def test_handout_stubs_regions_and_drops_imports_left_unused(sample, tmp_path):
    """Regions become NotImplementedError stubs naming function and file; code outside them stays."""
    handout = build(sample, tmp_path / "out", lock=False)
    arith = (handout.root / "cs336_assignment/arith.py").read_text()
    assert 'raise NotImplementedError("Implement add in cs336_assignment/arith.py")' in arith
    assert 'raise NotImplementedError("Implement hypot in cs336_assignment/arith.py")' in arith
    assert "math.isnan(a)" in arith and "import math" in arith, "code outside regions must stay"
    assert "squares" not in arith and "a + b\n" not in arith
    adapters = (handout.root / "adapters.py").read_text()
    assert adapters == (sample / "adapters.py").read_text()


def test_imports_used_only_by_regions_are_removed(tmp_path):
    """An import only the solution used is dropped, so the handout lints clean."""
    files = dict(SAMPLE)
    files["cs336_assignment/arith.py"] = files["cs336_assignment/arith.py"].replace(
        "if math.isnan(a) or math.isnan(b):", "if a != a or b != b:"
    )
    handout = build(make_sample_repo(tmp_path / "repo", files), tmp_path / "out", lock=False)
    arith = (handout.root / "cs336_assignment/arith.py").read_text()
    assert "import math" not in arith and "from __future__ import annotations" in arith


def test_readme_changelog_and_pyproject_are_generated_for_students(sample, tmp_path):
    """README names each part's module, stubs and tests; pyproject drops the staff group and package."""
    handout = build(sample, tmp_path / "out", lock=False)
    readme = (handout.root / "README.md").read_text()
    assert (
        "| 1. Arithmetic | 5 | `cs336_assignment/arith.py` | `add`, `hypot` | `tests/test_arith.py` | - |"
        in readme
    )
    assert "The assignment has 5 points." in readme and "## How grading works" in readme
    assert "uv run pytest" in readme and "Zips your cs336_assignment/ into submission.zip" in readme
    assert "$" not in readme.replace("$ ", "")
    assert (handout.root / "CHANGELOG.md").read_text().startswith("# Changelog")
    pyproject = tomllib.loads((handout.root / "pyproject.toml").read_text())
    assert set(pyproject["dependency-groups"]) == {"dev"}
    assert pyproject["tool"]["uv"]["default-groups"] == ["dev"]
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [
        "cs336_assignment"
    ]
    assert pyproject["project"]["scripts"] == {"cs336": "cs336_assignment.cli:main"}


def test_pyproject_staff_only_entry_without_value_fails_loudly():
    """A `# STAFF-ONLY` comment with no entry after it is an error naming the line."""
    with pytest.raises(ReleaseError, match=r"pyproject.toml:2:"):
        handout_pyproject("[x]\n# STAFF-ONLY\n")


def test_pyproject_edits_keep_layout_and_handle_multiline_lists_and_emptied_tables():
    """tomlkit edits: a packages list over several lines loses cs336_staff, a table left empty (by one
    entry or by several) goes, comments stay."""
    text = """[project]
name = "x"  # kept comment

[dependency-groups]
dev = ["pytest"]
# STAFF-ONLY: two comment lines
# belong to the marker
staff = [
    "ruff",
]

[tool.uv]
default-groups = ["dev", "staff"]

[tool.hatch.build.targets.wheel]
packages = [
    "cs336_assignment",
    "cs336_staff",
]

[tool.extra]
# STAFF-ONLY
only = 1
# STAFF-ONLY: a second entry of the same table
also = [
    { a = 1 },  # an inline table
]
"""
    out = handout_pyproject(text)
    data = tomllib.loads(out)
    assert data["dependency-groups"] == {"dev": ["pytest"]}
    assert data["tool"]["uv"]["default-groups"] == ["dev"]
    assert data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["cs336_assignment"]
    assert (
        "extra" not in data["tool"]
        and "STAFF-ONLY" not in out
        and "belong to the marker" not in out
    )
    assert 'name = "x"  # kept comment' in out


def test_two_releases_are_byte_identical(sample, tmp_path):
    """Deterministic: two runs give the same files with the same bytes and modes."""
    a = build(sample, tmp_path / "a", lock=False).root
    b = build(sample, tmp_path / "b", lock=False).root
    assert tree(a) == tree(b)
    assert [p.stat().st_mode for p in sorted(a.rglob("*"))] == [
        p.stat().st_mode for p in sorted(b.rglob("*"))
    ]


@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv to prune uv.lock")
def test_lock_is_pruned_offline_to_the_handout_dependencies(sample, tmp_path):
    """uv.lock ships without the staff group's packages, with the same pins for the rest."""
    shutil.copyfile(REPO / "uv.lock", sample / "uv.lock")
    lock = (build(sample, tmp_path / "out").root / "uv.lock").read_text()
    assert 'name = "ruff"' not in lock and 'name = "pytest"' in lock


def test_existing_output_is_kept_unless_forced_and_repo_is_never_overwritten(sample, tmp_path):
    """A non-empty OUT_DIR needs --force; the repository itself or its package is refused."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(ReleaseError, match="--force"):
        build(sample, out, lock=False)
    assert (out / "mine.txt").read_text() == "keep me"
    for bad in (sample, sample / "cs336_assignment", tmp_path):
        with pytest.raises(ReleaseError, match="refusing"):
            build(sample, bad, force=True, lock=False)
    build(sample, out, force=True, lock=False)
    assert not (out / "mine.txt").exists() and (out / "adapters.py").exists()


def test_bad_marker_fails_before_anything_is_written(sample, tmp_path):
    """An unmatched marker names file and line, and leaves no partial handout behind."""
    path = sample / "cs336_assignment/arith.py"
    path.write_text(path.read_text().replace("    # END SOLUTION\n", "", 1))
    with pytest.raises(MarkerError, match=r"cs336_assignment/arith.py:\d+: nested"):
        build(sample, tmp_path / "out", lock=False)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


def test_markers_outside_the_package_are_an_error(sample, tmp_path):
    """Solution markers in a shipped test file would ship the solution, so they fail the release."""
    (sample / "tests/test_extra.py").write_text(
        "def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n"
    )
    with pytest.raises(MarkerError, match="tests/test_extra.py:1: solution markers outside"):
        build(sample, tmp_path / "out", lock=False)


def test_check_passes_a_good_handout_and_flags_a_test_that_passes_against_stubs(sample, tmp_path):
    """--check: stubs fail with NotImplementedError, the reference passes; a planted stub-passing test is named."""
    (sample / "tests/test_planted.py").write_text(
        'import adapters\n\n\ndef test_describe_formats():\n    """Tests a helper only."""\n'
        "    from cs336_assignment.arith import describe\n\n    assert describe(1) == '1.00'\n"
    )
    regenerate(sample, sample / "fixtures")  # the reference run needs the sample's snapshot file
    handout = build(sample, tmp_path / "out", lock=False)
    with WarmPool(light=True) as light_pool:  # the sample needs no torch: skip the warm-up
        checks = {c.name: c for c in check(sample, handout, pool=light_pool)}
    assert {n for n, c in checks.items() if not c.ok} == {"stubs"}, "\n".join(
        c.render() for c in checks.values()
    )
    assert checks["stubs"].details == [
        "tests/test_planted.py::test_describe_formats: PASSES against the stubs, so it grades nothing a student writes"
    ]
    assert checks["reference"].summary.startswith("3 tests pass")
    assert checks["collect"].summary.startswith("4 tests collected")


def test_leak_check_finds_solution_code_copied_into_a_public_test(sample, tmp_path):
    """A region's statement pasted into a shipped test file is reported with both locations."""
    (sample / "tests/test_leaky.py").write_text(
        "import math\n\n\ndef oracle(a, b):\n    squares = a * a + b * b\n    return math.sqrt(squares)\n"
    )
    handout = build(sample, tmp_path / "out", lock=False)
    result = check_leaks(sample, handout)
    assert not result.ok
    assert result.details == [
        "tests/test_leaky.py:5: `squares = a * a + b * b` repeats solution code from cs336_assignment/arith.py:25"
    ]


def test_leak_check_ignores_library_boilerplate_but_not_code_that_reads_inputs(sample, tmp_path):
    """A piece reading only imports and its own names (a start-method choice) is no leak; one reading the inputs is."""
    choose = (
        "    methods = multiprocessing.get_all_start_methods()\n"
        '    context = multiprocessing.get_context("fork" if "fork" in methods else None)\n'
        "    with context.Pool(2) as pool:\n"
        "        return pool.map(fn, list(items))\n"
    )
    (sample / "cs336_assignment/pool.py").write_text(
        'import multiprocessing\n\n\ndef pool_map(fn, items):\n    """Map in parallel."""\n'
        f"    # BEGIN SOLUTION\n{choose}    # END SOLUTION\n"
    )
    (sample / "tests/test_glue.py").write_text(
        f"import multiprocessing\n\n\ndef run(fn, items):\n{choose}"
    )
    result = check_leaks(sample, build(sample, tmp_path / "out", lock=False))
    assert [d.split(" repeats")[0] for d in result.details] == [
        "tests/test_glue.py:6: `context = multiprocessing.get_context('fork' if 'fork' in methods else None)`",
        "tests/test_glue.py:7: `with context.Pool(2) as pool:`",
    ]


def test_leak_check_passes_the_clean_handout(sample, tmp_path):
    """Nothing of the regions survives stripping; a lone short statement like theirs is not counted."""
    (sample / "tests/test_short.py").write_text(
        "def f(a, b):\n    squares = a * a + b * b\n    return squares\n"
    )
    assert check_leaks(sample, build(sample, tmp_path / "out", lock=False)).ok


def test_stripped_files_pass_the_handouts_own_ruff_format(sample, tmp_path):
    """A stub's ``raise`` line past the line length and the blank lines a dropped import leaves are
    formatted away, so the handout passes the ``ruff format --check`` and ``ruff check`` its
    pyproject configures."""
    (sample / "cs336_assignment/long_names.py").write_text(
        textwrap.dedent(
            """
            import math


            def a_function_whose_name_makes_the_stub_longer_than_one_line(x: float) -> float:
                # BEGIN SOLUTION
                return math.sqrt(x)
                # END SOLUTION
            """
        ).lstrip("\n")
    )
    handout = build(sample, tmp_path / "out", lock=False)
    stub = (handout.root / "cs336_assignment/long_names.py").read_text()
    assert "import math" not in stub and "raise NotImplementedError(\n" in stub, stub
    for args in (["format", "--check", "."], ["check", "cs336_assignment"]):  # the sample's
        proc = subprocess.run(  # own adapters.py is not ruff-check clean; nothing strips it
            [sys.executable, "-m", "ruff", *args, "--no-cache"],
            cwd=handout.root,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cli_requires_out_dir_or_check(capsys):
    """`cs336 release` alone explains what to pass."""
    assert main(["release"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cs336 release: error: give OUT_DIR") and "--check" in err, err


def test_cli_writes_handout_and_reports_marker_errors(sample, tmp_path, capsys):
    """The command writes the handout, and turns a marker error into exit 1 with file:line."""
    assert main(["release", str(tmp_path / "out"), "--repo", str(sample), "--no-lock"]) == 0
    assert "2 solution regions stubbed in 1 files" in capsys.readouterr().out
    (sample / "cs336_assignment/bad.py").write_text("# BEGIN SOLUTION\nX = 1\n# END SOLUTION\n")
    assert main(["release", str(tmp_path / "out2"), "--repo", str(sample), "--no-lock"]) == 1
    err = capsys.readouterr().err
    assert (
        "cs336 release: error: cs336_assignment/bad.py:1: misplaced region at module level" in err
    ), err


def test_check_docstring_lists_exactly_the_checks_it_runs():
    """release --check's docstring says how many checks there are and lists each one the report orders."""
    import re

    from cs336_staff.release import check

    doc = check.__doc__ or ""
    words = {"Six": 6, "Seven": 7, "Eight": 8, "Nine": 9, "Ten": 10, "Eleven": 11, "Twelve": 12}
    said = re.search(r"^(\w+) checks, each a line", doc, re.M)
    listed = re.findall(r"^    (\w+)\s{2,}\S", doc, re.M)
    order = re.findall(
        r'"(\w+)"', re.search(r"order = \[(.*?)\]", Path(check.__file__).read_text(), re.S).group(1)
    )
    assert said and words.get(said.group(1)) == len(listed), (
        f"the docstring says {said and said.group(1)!r} checks and lists {listed}"
    )
    assert sorted(listed) == sorted(order), f"documented {sorted(listed)}, reported {sorted(order)}"
