"""Shared by the tests: the repository's root, and ``skip_in_grading`` for a check grading cannot see."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def skip_in_grading(why: str) -> None:
    """Skip the calling test when the staff grade it (your code then runs in another process, where
    ``why`` cannot be observed); in your own ``uv run pytest`` it runs as written. Such a test is
    worth no points (rubric.toml); a graded test checks what grading can see of the same behaviour."""
    import pytest

    from tests import boundary

    if boundary.remote is not None:
        pytest.skip(f"not graded (runs in your own uv run pytest only): {why}")
