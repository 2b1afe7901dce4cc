"""One source for the parts (cs336_staff/parts.py): the real repository agrees, and drift is caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cs336_staff.parts import PartsError, load_parts, problems, with_readme_block
from cs336_staff.rubric import Rubric

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]


def test_parts_of_the_repository_come_from_rubric_and_code():
    """Nine parts numbered in rubric order, each with its module, regions, public and hidden tests."""
    parts = load_parts(REPO)
    rubric = Rubric.load(REPO / "rubric.toml")
    assert [p.key for p in parts] == list(rubric.concepts)
    assert [p.number for p in parts] == list(range(1, len(parts) + 1))
    assert sum(p.points for p in parts) == sum(c.points for c in rubric.concepts.values())
    by_key = {p.key: p for p in parts}
    assert by_key["tokenization"].module == "cs336_assignment/tokenization/"
    assert by_key["precision"].module == "cs336_assignment/precision/"
    # staff-only
    assert "cs336_assignment/tokenization/fast_bpe.py" not in by_key["tokenization"].functions
    assert by_key["tensors"].module == "cs336_assignment/tensors/"
    assert list(by_key["tensors"].functions) == [
        "cs336_assignment/tensors/named_dims.py",
        "cs336_assignment/tensors/strides.py",
    ]
    assert "flat_index" in by_key["tensors"].functions["cs336_assignment/tensors/strides.py"]
    assert "split_heads" in by_key["tensors"].functions["cs336_assignment/tensors/named_dims.py"]
    assert list(by_key["accounting"].functions) == [
        f"cs336_assignment/accounting/{m}.py"
        for m in ("flop_counter", "flops", "measured_memory", "memory", "napkin")
    ], "one concept per module: counts on paper, their measured twins, napkin math"
    assert by_key["optim"].adapters == [
        "get_sgd_cls",
        "get_adagrad_cls",
        "get_rmsprop_cls",
        "get_adam_cls",
        "get_adamw_cls",
    ]
    assert by_key["training"].adapters == ["run_train_loop"], (
        "the given tools' section (run_cs336, ...) belongs to no part"
    )
    assert by_key["precision"].tests == ["tests/test_precision.py", "tests/test_precision_gpu.py"]
    assert by_key["precision"].hidden_tests == ["tests/hidden/test_precision.py"]
    assert all(p.functions and p.tests for p in parts)


def test_every_copy_agrees_with_the_source():
    """README's table, adapters.py's headers and the modules agree with rubric.toml (CI's guard)."""
    assert problems(REPO) == []


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of what the parts are read from: rubric, adapters, README, the package, the tests and their rules."""
    root = tmp_path / "repo"
    for f in ("rubric.toml", "adapters.py", "README.md", "pyproject.toml", "tests/rules.toml"):
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / f, root / f)
    shutil.copytree(
        REPO / "cs336_assignment",
        root / "cs336_assignment",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for folder in ("tests", "tests/hidden"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for t in (REPO / folder).glob("test_*.py"):
            shutil.copyfile(t, root / folder / t.name)
    return root  # agrees with its source, as test_every_copy_agrees_with_the_source shows for REPO


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_changed_points_make_the_readme_stale_until_rewritten(repo):
    """Points are defined once (rubric.toml); the README's copy is flagged, then regenerated."""
    _edit(repo / "rubric.toml", "points = 16", "points = 17")
    assert problems(repo) == ["README.md's parts table is stale; run `uv run cs336 parts --write`"]
    readme = repo / "README.md"
    readme.write_text(with_readme_block(readme.read_text(), load_parts(repo)))
    assert problems(repo) == []
    assert "| 6. Tokenization | 17 |" in readme.read_text()


def test_adapter_section_naming_another_part_is_flagged(repo):
    """An adapters.py header must be a prefix of its part's title."""
    _edit(repo / "adapters.py", "# 3. Optimizers", "# 3. Optimisers")
    assert any(
        "adapters.py:" in p and "'# 3. Optimisers' should name part 3, 'Optimizers'" in p
        for p in problems(repo)
    )


def test_titles_must_be_numbered_in_order(repo):
    """Swapping two parts' numbers is an error naming the concept and the rule."""
    _edit(repo / "rubric.toml", 'title = "2. Models', 'title = "3. Models')
    with pytest.raises(PartsError, match=r"concepts.models.*must read \"2. Title\""):
        load_parts(repo)


def test_a_module_with_regions_outside_every_part_is_flagged(repo):
    """Solution regions in a module no part claims would be graded by nothing."""
    (repo / "cs336_assignment" / "extra.py").write_text(
        'def f():\n    """Doc."""\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n'
    )
    assert "cs336_assignment/extra.py has solution regions but belongs to no part" in " ".join(
        problems(repo)
    )


def test_a_part_without_a_module_is_an_error(repo):
    """A concept's key names its module."""
    _edit(repo / "rubric.toml", "[concepts.data]", "[concepts.loading]")
    _edit(repo / "rubric.toml", 'concept = "data"', 'concept = "loading"')
    with pytest.raises(PartsError, match="no module cs336_assignment/loading.py"):
        load_parts(repo)
