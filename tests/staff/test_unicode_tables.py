"""Hypothesis's Unicode tables, built once per batch and copied into each judge's storage (``grade/unicode_tables.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.grade import unicode_tables

pytestmark = pytest.mark.staff

#: Where hypothesis itself looks for the two tables, under the storage directory of its environment.
WHERE_HYPOTHESIS_LOOKS = (
    "import json; from hypothesis.internal.charmap import charmap_file; "
    "print(json.dumps([str(charmap_file()), str(charmap_file('codec-v2-utf-8'))]))"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    built = unicode_tables.build(tmp_path_factory.mktemp("cache"))
    assert built is not None, "the tables could not be built"
    return built


def test_a_judges_storage_holds_the_tables_where_hypothesis_reads_them(home, tmp_path):
    """Seeded from the batch's build, a judge's fresh storage has both tables at the paths the installed
    hypothesis reads (so its first text strategy reads them instead of walking every code point)."""
    storage = tmp_path / "hypothesis"
    unicode_tables.seed(home, storage)
    out = subprocess.run(
        [sys.executable, "-c", WHERE_HYPOTHESIS_LOOKS],
        env={**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(storage)},
        capture_output=True,
        text=True,
        check=True,
    )
    paths = [Path(p) for p in json.loads(out.stdout)]
    assert all(p.is_file() and p.is_relative_to(storage) for p in paths), paths


def test_a_later_batch_reuses_the_tables_without_building(home, monkeypatch):
    """The tables kept in the cache folder serve the next batch: nothing is run again."""

    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(subprocess, "run", no_build)
    assert unicode_tables.build(home.parent) == home


def test_without_tables_a_judge_builds_its_own(tmp_path, monkeypatch):
    """A build that fails gives None, and seeding with None leaves the judge's storage alone."""

    def failed(*args, **kwargs):
        raise subprocess.CalledProcessError(1, "python")

    monkeypatch.setattr(subprocess, "run", failed)
    assert unicode_tables.build(tmp_path / "cache") is None
    assert list((tmp_path / "cache").iterdir()) == []  # no half-built folder is left
    unicode_tables.seed(None, tmp_path / "storage")
    assert not (tmp_path / "storage").exists()
