"""The real repository's grading setup: rubric coverage and the GitHub workflows."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.grade.grader import GPU_MARKERS, collect_expected
from cs336_staff.rubric import Rubric, find_rubric

pytestmark = pytest.mark.staff
ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


@pytest.fixture(scope="module")
def graded_tests(tmp_path_factory):
    collected, errors = collect_expected(ROOT, cache_dir=tmp_path_factory.mktemp("collect"))
    return collected, errors


def test_every_graded_test_of_the_repo_is_covered_by_the_rubric(graded_tests):
    """Every test under tests/ but tests/staff/ gets a concept and points from rubric.toml."""
    collected, _ = graded_tests
    assert collected, "no graded test collected"
    assert not any(n.startswith("tests/staff/") for n in collected)
    rubric = Rubric.load(find_rubric(ROOT))
    missing = rubric.uncovered(collected)
    assert not missing, f"add rules to rubric.toml for {len(missing)} test(s), e.g. {missing[:5]}"
    items = rubric.resolve(collected)
    assert abs(sum(i.points for i in items.values()) - 100) < 1e-2
    assert all(
        i.visibility == "after_published" for n, i in items.items() if n.startswith("tests/hidden/")
    )


def test_graded_tests_collect_against_the_reference(graded_tests):
    """Each graded test module imports against the reference (else its tests would be ungraded)."""
    _, errors = graded_tests
    assert not errors, "\n\n".join(f"{k}:\n{v[-1500:]}" for k, v in errors.items())


def test_every_gpu_test_file_has_tests_the_cpu_runner_grades(graded_tests):
    """A CPU run never reports only pending tests for a concept (every GPU check has a CPU twin)."""
    collected, _ = graded_tests
    rubric = Rubric.load(find_rubric(ROOT)).resolve(collected)
    gpu_concepts = {rubric[n].concept for n, m in collected.items() if GPU_MARKERS & set(m)}
    cpu_concepts = {rubric[n].concept for n, m in collected.items() if not GPU_MARKERS & set(m)}
    assert gpu_concepts <= cpu_concepts


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
def test_workflow_is_valid_for_github_actions(workflow):
    """check-jsonschema's vendored GitHub-workflow schema accepts the file (works offline)."""
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert exe, "check-jsonschema is a staff dependency (uv sync)"
    p = subprocess.run(
        [exe, "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_both_workflows_exist_with_the_jobs_graders_rely_on():
    """ci.yml runs CPU and GPU suites; grade.yml grades on both runners and merges."""
    names = {w.name for w in WORKFLOWS}
    assert {"ci.yml", "grade.yml"} <= names
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    grade = (ROOT / ".github/workflows/grade.yml").read_text()
    assert 'pytest -m "not gpu"' in ci and "pytest -m gpu" in ci and '"3.13"' in ci
    assert "cs336 grade" in grade and "cs336 merge" in grade and "h100" in grade


def test_workflows_start_the_sandbox_under_apparmor_and_are_linted():
    """ubuntu-latest restricts user namespaces: each GitHub-hosted job that grades or runs the staff
    tests loads the .venv bwrap's AppArmor profile first; ci.yml lints the workflows with actionlint."""
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    grade = (ROOT / ".github/workflows/grade.yml").read_text()
    for text in (ci, grade):
        assert text.index(".ci/allow-bwrap.sh") < text.index(
            "uv run " + ("pytest" if text is ci else "cs336 grade")
        )
    assert "--only-group lint actionlint" in ci and (ROOT / ".github/actionlint.yaml").is_file()
    assert (ROOT / ".ci/allow-bwrap.sh").stat().st_mode & 0o111
