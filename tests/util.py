"""Paths and small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import boundary

ROOT = Path(__file__).resolve().parents[1]


def skip_in_grading(why: str) -> None:
    """Skip the calling test in grading, where it would have to look inside the process that runs
    your code (grading trusts nothing observed there). It still runs in your ``uv run pytest``; its
    points go to a graded test of the same behaviour (``rubric.toml``), which ``why`` names."""
    if boundary.remote is not None:
        pytest.skip(f"runs in your own pytest only, not in grading: {why}")
