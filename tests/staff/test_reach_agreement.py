"""A student's table and grading take a rule break's points from the same tests.

A test that passed but reached code breaking a rule earns nothing, in grading
(``grade/delegation.py``) and in a student's table (``tests/progress.py`` through ``tests/rules.py``).
The two find what a test reached differently: grading from the judge's record, where a driver stands
for every adapter its source names (the worker's own account of what it called is not to be trusted);
a student's run from the adapters the test actually called. They agree exactly when every driver a
public test calls calls every adapter its source names. These checks prove it on every public test
(with the reference), after proving on a sample that ``reach_probe.py`` records what the judge records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.grade.delegation import adapters_reached
from tests.staff.long_checks import long_check
from tests.staff.reach_probe import OUT_ENV

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]

#: One test of each way a test reaches student code: a plain adapter call, a driver, a driver given a
#: class's name ("adam"), ``killed_midway`` beside a driver, and a command run through ``printed_by``.
SAMPLE = [
    "tests/test_tensors.py::test_flat_index_worked_example",
    "tests/test_checkpoint.py::test_checkpoint_round_trip_restores_model_optimizer_and_iteration",
    "tests/test_optim.py::test_optimizer_matches_torch_reference",
    "tests/test_training.py::test_train_killed_with_sigkill_then_resumed_ends_exactly_like_an_uninterrupted_run",
    "tests/test_accounting.py::test_account_answers_the_question_asked",
]


def probe(tmp_path: Path, tests: list[str], *options: str) -> dict[str, dict[str, list[str]]]:
    """Run ``tests`` with ``reach_probe`` (``options``: the judge's, to run them split); its record."""
    out = tmp_path / f"reach{len(list(tmp_path.iterdir()))}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
        + ["-p", "tests.staff.reach_probe", "-p", "no:cs336_progress", *tests],
        cwd=REPO,
        env={**os.environ, OUT_ENV: str(out)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@long_check("running a sample of public tests in one process and split")
def test_the_probe_records_what_the_judge_records(tmp_path: Path) -> None:
    one = probe(tmp_path, SAMPLE)
    split = probe(tmp_path, SAMPLE, "-p", "cs336_staff.grade.judge", "--split")
    assert one.keys() == split.keys() and len(one) >= len(SAMPLE)
    differ = {
        n: (one[n]["targets"], split[n]["targets"])
        for n in one
        if one[n]["targets"] != split[n]["targets"]
    }
    assert not differ, f"the probe's record (left) is not the judge's (right): {differ}"
    assert all(r["targets"] for r in one.values()), "a test of the sample recorded nothing"


@long_check("running every public test with the probe")
def test_every_public_test_reaches_the_same_adapters_locally_and_in_grading(tmp_path: Path) -> None:
    files = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").glob("test_*.py"))
    record = probe(tmp_path, files)
    assert len(record) > 700, f"only {len(record)} tests recorded"
    differ = {}
    for nodeid, r in record.items():
        graded = adapters_reached(r["targets"], REPO)
        if set(r["local"]) != graded:
            differ[nodeid] = {
                "only in the local table": sorted(set(r["local"]) - graded),
                "only in grading": sorted(graded - set(r["local"])),
                "judge's record": r["targets"],
            }
    assert not differ, (
        "a driver names adapters it does not call (grading then counts a rule break there that a "
        "student's table does not), or a test calls an adapter where the judge cannot see it: "
        f"{json.dumps(differ, indent=1)[:4000]}"
    )
