"""`cs336 snapshots [--check]` on the sample repository: regenerate, verify, and catch a modified array."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from cs336_staff.snapshots import add_arguments, compare_npz, compare_trees, run, snapshot_files
from tests.snapshot import write_npz
from tests.staff.test_release import make_sample_repo

pytestmark = pytest.mark.staff

SNAP = "snapshots/test_arith/hypot.npz"


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return run(parser.parse_args(list(argv)))


def test_regenerate_then_check_then_catch_a_modified_array(tmp_path, capsys):
    """Update writes the files; --check passes on them, then fails naming file and array once one value changes."""
    repo = make_sample_repo(tmp_path / "repo")
    assert cli("--repo", str(repo)) == 0
    assert snapshot_files(repo / "fixtures") == [SNAP]
    written = (repo / "fixtures" / SNAP).read_bytes()
    assert "0 files rewritten, 1 created" in capsys.readouterr().out

    assert cli("--repo", str(repo), "--check") == 0
    assert "all 1 files match the reference exactly" in capsys.readouterr().out
    assert (repo / "fixtures" / SNAP).read_bytes() == written, (
        "--check must not touch committed files"
    )

    with np.load(repo / "fixtures" / SNAP) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["squares"] = arrays["squares"].copy()
    arrays["squares"][1] += 1e-12
    write_npz(repo / "fixtures" / SNAP, arrays)
    assert cli("--repo", str(repo), "--check") == 1
    out = capsys.readouterr().out
    assert (
        f"changed  fixtures/{SNAP}: array 'squares' differs at 1 of 3 positions; first at (1,)"
        in out
    )
    assert "'grid'" not in out, "an unchanged array is not reported"

    (repo / "fixtures/snapshots/test_arith/stale.npz").write_bytes(written)
    assert cli("--repo", str(repo)) == 0
    out = capsys.readouterr().out
    assert (
        "1 files rewritten, 0 created" in out
        and "orphan   fixtures/snapshots/test_arith/stale.npz" in out
    )
    assert (repo / "fixtures" / SNAP).read_bytes() == written, (
        "the update restores the reference's bytes"
    )


def test_check_fails_when_a_snapshot_test_fails_on_the_reference(tmp_path, capsys):
    """A snapshot test that fails on the reference stops the tool before it compares or writes anything."""
    repo = make_sample_repo(tmp_path / "repo")
    test = repo / "tests/test_arith.py"
    test.write_text(
        test.read_text().replace(
            '"squares": grid**2})', '"squares": grid**2})\n    assert False, "broken"'
        )
    )
    assert cli("--repo", str(repo), "--check") == 1
    out = capsys.readouterr().out
    assert "1 of 1 snapshot tests fail on the reference" in out and "broken" in out
    assert not (repo / "fixtures/snapshots").exists()


def test_compare_names_dtype_shape_and_key_changes(tmp_path):
    """Dtype, shape, missing and new arrays are each a line naming the array; NaN equals NaN."""
    old, new = tmp_path / "old.npz", tmp_path / "new.npz"
    write_npz(
        old,
        {
            "a": np.zeros(3, np.float32),
            "b": np.ones(2),
            "gone": np.ones(1),
            "nan": np.array([np.nan]),
        },
    )
    write_npz(
        new,
        {
            "a": np.zeros(3, np.float64),
            "b": np.ones(3),
            "added": np.ones(1),
            "nan": np.array([np.nan]),
        },
    )
    assert compare_npz(old, new) == [
        "array 'gone' is no longer written (the reference writes ['a', 'added', 'b', 'nan'])",
        "array 'added' is new (not in the committed file)",
        "array 'a': committed float32[3], reference now gives float64[3]",
        "array 'b': committed float64[2], reference now gives float64[3]",
    ]


def test_compare_trees_reports_new_and_orphaned_files(tmp_path):
    """Files only the reference writes are new; files only committed are orphans; hidden snapshots count."""
    committed, fresh = tmp_path / "c", tmp_path / "f"
    write_npz(committed / "snapshots/t/old.npz", {"x": np.ones(1)})
    write_npz(committed / "hidden/snapshots/t/same.npz", {"x": np.ones(1)})
    write_npz(fresh / "hidden/snapshots/t/same.npz", {"x": np.ones(1)})
    write_npz(fresh / "snapshots/t/new.npz", {"x": np.ones(1)})
    assert compare_trees(committed, fresh) == ([], ["snapshots/t/new.npz"], ["snapshots/t/old.npz"])
    assert Path(committed / "snapshots/t/old.npz").exists()
