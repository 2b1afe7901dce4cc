"""`release --check`'s leftovers and behaviour checks, each shown catching what it exists for.

Both run on this repository's real handout: the leftovers check on five planted kinds of staff
references, the behaviour check on the naive BPE trainer put back where it once shipped
(``tests/bpe_naive.py``), replaying calls of the reference's train_bpe and flat_index.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cs336_staff.release import behaviour, io_recorder
from cs336_staff.release.build import PACKAGE, build
from cs336_staff.release.leftovers import find_leftovers
from cs336_staff.session.runner import PytestRun, copy_tree
from tests.util import ROOT

pytestmark = pytest.mark.staff


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    return build(ROOT, tmp_path_factory.mktemp("handout") / "out", lock=False)


def append(path: Path, text: str) -> int:
    """Append ``text`` (one line) to ``path``; returns its line number."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, text]) + "\n")
    return len(lines) + 1


def test_leftovers_check_passes_the_handout_and_names_each_planted_leftover(
    handout, tmp_path
) -> None:
    """Clean as built; then a hidden path, a staff command, a staff pytest option, a staff-only import and a
    .gitignore entry for staff output are each reported."""
    assert find_leftovers(ROOT, handout) == []
    root = tmp_path / "h"
    copy_tree(handout.root, root)
    copy = type(handout)(
        root=root, files=handout.files, regions=handout.regions, left_out=handout.left_out
    )
    planted = {
        append(
            root / "tests/test_data.py", "# helpers shared with tests/hidden/test_data.py"
        ): "tests/test_data.py",
        append(
            root / "tests/snapshot.py", 'HINT = "regenerate with `uv run cs336 snapshots`"'
        ): "tests/snapshot.py",
        append(
            root / "README.md", "Run `uv run pytest --snapshot-update` to refresh them."
        ): "README.md",
        append(root / f"{PACKAGE}/files.py", "import tomlkit  # noqa: E402"): f"{PACKAGE}/files.py",
        append(root / ".gitignore", "/grades/"): ".gitignore",
    }
    append(
        root / f"{PACKAGE}/data.py",
        "try:\n    import submitit\nexcept ImportError:\n    submitit = None",
    )
    found = find_leftovers(ROOT, copy)
    assert [f.split(": ")[0] for f in found] == sorted(
        f"{rel}:{line}" for line, rel in planted.items()
    ), "\n".join(found)
    text = "\n".join(found)
    assert "staff-only path 'tests/hidden'" in text and "staff command `cs336 snapshots`" in text
    assert (
        "pytest option --snapshot-update" in text
        and "imports tomlkit, a staff-only dependency" in text
    )
    assert "submitit" not in text, (
        "an import guarded by `except ImportError` is an optional dependency, not a leftover"
    )


def test_behaviour_check_catches_the_naive_bpe_trainer_where_it_once_shipped(
    handout, tmp_path, monkeypatch
) -> None:
    """Replaying recorded adapter calls, a shipped tests/bpe_naive.py is reported as reproducing run_train_bpe; nothing else is.

    The calls are recorded here, in the format io_recorder writes (the reference runs of release
    --check record them for real; the sample repository's check in test_release.py covers that)."""
    from cs336_assignment.tensors import flat_index
    from cs336_assignment.tokenization import train_bpe

    monkeypatch.setattr(io_recorder, "ROOT", ROOT)
    mini = ROOT / "fixtures/corpora/mini.txt"
    calls: dict[str, list[tuple[Any, dict, Any]]] = {
        "run_train_bpe": [
            (
                io_recorder.plain((mini, 400, ["<|endoftext|>"])),
                {},
                io_recorder.plain(train_bpe(mini, 400, ["<|endoftext|>"])),
            )
        ],
        "run_flat_index": [
            (((1, 2), (3, 1)), {}, flat_index((1, 2), (3, 1))),
            (((1, 2), (3, 1), 4), {}, flat_index((1, 2), (3, 1), 4)),
        ],
    }
    recording = tmp_path / "io.pkl"
    recording.write_bytes(pickle.dumps(calls))
    stubs = tmp_path / "stubs"
    copy_tree(handout.root, stubs)
    shutil.copyfile(ROOT / "tests/hidden/bpe_naive.py", stubs / "tests/bpe_naive.py")
    py = sorted([f for f in handout.files if f.endswith(".py")] + ["tests/bpe_naive.py"])
    graded = {r.qualname.split(".")[0] for regions in handout.regions.values() for r in regions}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            behaviour.REPLAY,
            *behaviour.replay_args([recording], py, graded, stubs),
        ],
        cwd=stubs,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = behaviour.replay_check(
        PytestRun(proc.returncode, [], [], [], {}, proc.stdout + proc.stderr)
    )
    assert not result.ok, result.render()
    assert [d.split(" (")[0] for d in result.details] == [
        "tests/bpe_naive.py: naive_train_bpe reproduces run_train_bpe"
    ], result.render()
