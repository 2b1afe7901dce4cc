"""Batches: results written as each submission finishes, reruns skip, interrupted runs resume,
the submitit path works with submitit's own executors, and the CLI ties it together."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re

import pytest

from cs336_assignment.cli import main
from cs336_staff.grade.batch import run_batch
from cs336_staff.grade.grader import make_plan
from cs336_staff.grade.intake import read_submission
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.report import load
from cs336_staff.grade.sandbox import probe
from cs336_staff.grade.testing import calc_with, make_staff_repo, make_zip
from tests.fresh import SEED_ENV

pytestmark = pytest.mark.staff
# no bubblewrap here: grade the synthetic submissions without it
INSECURE = probe(False) is not None
FULL, BOB, TOTAL = (
    11.5,
    8.5,
    13,
)  # every CPU point; mul returning 0 loses mul (2) and the hidden product (1)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch")
    root = make_staff_repo(tmp / "repo")
    subs = tmp / "subs"
    subs.mkdir()
    make_zip(subs / "alice.zip", {})
    make_zip(subs / "bob.zip", {}, calc=calc_with(mul="return 0"))
    plan = make_plan(
        root,
        limits=Limits(test_timeout=5, run_timeout=60),
        cache_dir=tmp / ".cache",
        insecure=INSECURE,
    )
    return {"root": root, "subs": subs, "plan": plan, "tmp": tmp}


def _sorted(subs):
    return sorted(subs.glob("*.zip"))


def test_interrupted_batch_resumes_and_rerun_skips_finished(repo, tmp_path):
    """Ctrl-C after the first submission keeps its result; the rerun grades only the other one."""
    out = tmp_path / "out"

    def interrupt(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(_sorted(repo["subs"]), out, repo["plan"], progress=False, on_result=interrupt)
    assert (out / "alice" / "results.json").is_file() and not (out / "bob").exists()
    rows = run_batch(_sorted(repo["subs"]), out, repo["plan"], progress=False)
    assert [(r["name"], r["skipped"]) for r in rows] == [("alice", True), ("bob", False)]
    assert {r["name"]: r["score"] for r in rows} == {"alice": FULL, "bob": BOB}
    forced = run_batch(_sorted(repo["subs"])[:1], out, repo["plan"], progress=False, force=True)
    assert not forced[0]["skipped"]


def test_changed_submission_is_regraded_without_force(repo, tmp_path):
    """A resubmission with different content under the same name is not skipped."""
    out = tmp_path / "out"
    z = make_zip(tmp_path / "carol.zip", {})
    run_batch([z], out, repo["plan"], progress=False)
    make_zip(z, {}, calc=calc_with(add="return 0"))
    row = run_batch([z], out, repo["plan"], progress=False)[0]
    assert not row["skipped"] and row["score"] == FULL - 4.5  # the three add tests


@pytest.mark.parametrize("executor", ["submitit-debug", "submitit-local"])
def test_submitit_executors_grade_and_write_results(repo, tmp_path, executor):
    """One submitit job per submission (what --executor slurm does), via submitit's test executors."""
    out = tmp_path / "out"
    subs = _sorted(repo["subs"]) if executor == "submitit-debug" else _sorted(repo["subs"])[:1]
    rows = run_batch(subs, out, repo["plan"], executor=executor, progress=False)
    expected = {"alice": FULL, "bob": BOB}
    assert {r["name"]: r["score"] for r in rows} == {s.stem: expected[s.stem] for s in subs}
    assert all(load(out / r["name"]).score == r["score"] for r in rows)


def test_submitit_rerun_submits_no_job_for_what_is_graded(repo, tmp_path):
    """A rerun through submitit skips a graded submission before submitting: no job, no queue wait."""
    out = tmp_path / "out"
    run_batch(
        _sorted(repo["subs"])[:1], out, repo["plan"], executor="submitit-debug", progress=False
    )
    jobs = sorted((out / ".submitit").iterdir())
    rows = run_batch(
        _sorted(repo["subs"])[:1], out, repo["plan"], executor="submitit-debug", progress=False
    )
    assert [(r["name"], r["skipped"], r["score"]) for r in rows] == [("alice", True, FULL)]
    assert sorted((out / ".submitit").iterdir()) == jobs


def test_cli_fail_under_exits_1_naming_what_a_submission_lost(repo, tmp_path, capsys):
    """`--fail-under PERCENT` (CI: 100 on the bundled example) fails the run, naming the tests lost."""
    args = [
        "grade",
        str(repo["subs"]),
        "--out",
        str(tmp_path / "g"),
        "--quiet",
        "--staff-root",
        str(repo["root"]),
        "--test-timeout",
        "5",
        *(["--insecure"] if INSECURE else []),
    ]
    assert main([*args, "--fail-under", "100"]) == 1
    err = capsys.readouterr().err
    assert (
        f"bob got {BOB:.2f} of the {FULL:.2f} points graded here" in err and "alice" not in err
    ), err
    assert "test_mul" in err
    assert main([*args, "--fail-under", str(100 * BOB / FULL)]) == 0  # bob exactly at the bar


def test_cli_grades_a_folder_of_submissions_with_two_jobs(repo, tmp_path, capsys):
    """`cs336 grade FOLDER --jobs 2` grades each zip in it and writes the gradebook."""
    out = tmp_path / "grades"
    code = main(
        [
            "grade",
            str(repo["subs"]),
            "--out",
            str(out),
            "--jobs",
            "2",
            "--quiet",
            "--staff-root",
            str(repo["root"]),
            "--test-timeout",
            "5",
            *(["--insecure"] if INSECURE else []),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert f"alice: {FULL:g} / {TOTAL}  [ok]" in text and f"bob: {BOB:g} / {TOTAL}  [ok]" in text, (
        text
    )
    assert len((out / "gradebook.csv").read_text().splitlines()) == 3


def test_cli_without_arguments_grades_the_bundled_example_with_full_marks(repo, tmp_path, capsys):
    """No argument: the reference packaged (here by a make_submission.sh) gets every CPU point."""
    root = repo["root"]
    (root / "make_submission.sh").write_text(
        "set -e\npython3 -c \"import zipfile, glob\nz = zipfile.ZipFile('cs336-assignment-submission.zip', 'w')\n"
        "[z.write(p) for p in glob.glob('cs336_assignment/**/*.py', recursive=True) + ['adapters.py']]\"\n"
    )
    try:
        code = main(["grade", "--out", str(tmp_path / "g"), "--staff-root", str(root)])
    finally:
        (root / "make_submission.sh").unlink()
    out = capsys.readouterr().out
    assert code == 0 and f"cs336-assignment-submission: {FULL:g} / {TOTAL}  [ok]" in out, out
    assert "| **total** | 10 | 9 | 0 | 1 | 0 |" in out  # tests, passed, failed, pending, not graded


def test_cli_merge_combines_cpu_and_gpu_runs(repo, tmp_path, capsys):
    """`cs336 merge cpu/ gpu/`: the GPU test comes from the GPU run, nothing stays pending."""
    cpu = tmp_path / "cpu"
    run_batch(_sorted(repo["subs"])[:1], cpu, repo["plan"], progress=False)
    gpu = tmp_path / "gpu"
    data = json.loads((cpu / "alice" / "results.json").read_text())
    for t in data["tests"]:  # what a GPU runner would report: its test passed, the CPU ones pending
        gpu_test = t["extra_data"]["device"] == "gpu"
        t["status"] = t["extra_data"]["outcome"] = "passed" if gpu_test else "pending"
        t["score"] = t["max_score"] if gpu_test else 0.0
    (gpu / "alice").mkdir(parents=True)
    (gpu / "alice" / "results.json").write_text(json.dumps(data))
    assert main(["merge", str(cpu), str(gpu), "--out", str(tmp_path / "merged")]) == 0
    merged = load(tmp_path / "merged" / "alice")
    assert merged.score == TOTAL and not any(t.outcome == "pending" for t in merged.tests)


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--jobs", "0"], "--jobs 0"),
        (["/no/such/submission.zip"], "no such submission"),
        (["--timeout", "-1"], "--timeout"),
        (["--fail-under", "101"], "--fail-under"),
        (["--slurm-time-min", "0"], "--slurm-time-min"),
    ],
)
def test_cli_rejects_bad_arguments_with_a_message(argv, match, capsys, tmp_path):
    """Bad options exit 2 with a message naming the option."""
    assert main(["grade", *argv, "--out", str(tmp_path / "o")]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("cores", [1, 2], ids=["one-judge", "two-judges"])
def test_visible_and_hidden_tests_run_in_two_judges_at_once_where_two_cores_are_free(
    repo, tmp_path, monkeypatch, cores
):
    """With two cores per submission the hidden tests' judge runs beside the visible tests' (each with a
    worker of its own, started once); with one, one judge runs both. The grade is the same either way."""
    from cs336_staff.grade import grader

    monkeypatch.setattr(grader, "usable_cores", lambda: cores)
    if INSECURE:  # the two judges need workers that cannot reach each other (grader.PARALLEL_TIERS)
        monkeypatch.setattr(grader, "PARALLEL_TIERS", frozenset({"none"}))
    out = tmp_path / "out"
    # bob loses visible and hidden points
    row = grader.grade_one(_sorted(repo["subs"])[1], "bob", out, repo["plan"], force=True)
    assert row["score"] == BOB
    result = load(out / "bob")
    ran = [t for t in result.tests if t.outcome in ("passed", "failed")]
    assert {t.nodeid.startswith("tests/hidden/") for t in ran} == {True, False}, result.summary()
    console = (out / "bob" / "console.txt").read_text()
    assert ("judge 2 of 2" in console) == (cores == 2), console[-2000:]
    # a summary per judge
    assert len(re.findall(r"^\d+ (?:passed|failed)\b.* in [\d.]+s", console, re.M)) == cores, (
        console[-2000:]
    )
    plan = repo["plan"]
    files = read_submission(
        _sorted(repo["subs"])[1], staff_adapters=plan.staff_root / "adapters.py"
    ).files
    run = grader.run_judges(plan, files, [n for n in plan.items if plan.runs_here(n)])
    assert run.worker_starts == 2, (
        f"{run.worker_starts} workers started: one for the visible tests, one fresh for the hidden ones"
    )


def test_the_container_tier_runs_hidden_tests_after_the_visible_ones_in_one_judge(
    repo, monkeypatch
):
    """Two uids share /tmp and the loopback network: a hidden tests' worker running beside the visible
    tests' could hand it the hidden inputs to print, so the container tier keeps one judge. Where two
    judges run, they share the submission's speed seed."""
    from cs336_staff.grade import container, grader

    calls, seeds, held = [], [], []

    def run_judge(root, files, *, only, speed_seed, **kw):
        calls.append((only, bool(held)))
        seeds.append(speed_seed)
        return grader.JudgeRun()

    @contextlib.contextmanager
    def one_submission_at_a_time():
        # the machine's lock and sweep (test_grade_container.py) are not this test's: no run judged
        # meanwhile by another grader on this machine makes it wait, nor a walk of its /tmp
        held.append(True)
        try:
            yield
        finally:
            held.pop()

    monkeypatch.setattr(grader, "usable_cores", lambda: 8)
    monkeypatch.setattr(grader, "run_judge", run_judge)
    monkeypatch.setattr(container, "one_submission_at_a_time", one_submission_at_a_time)
    monkeypatch.delenv(SEED_ENV, raising=False)
    only = [n for n in repo["plan"].items if repo["plan"].runs_here(n)]
    grader.run_judges(dataclasses.replace(repo["plan"], tier="container", insecure=False), {}, only)
    assert calls == [(only, True)], "one judge, holding the machine's container tier"
    grader.run_judges(
        dataclasses.replace(repo["plan"], tier="bubblewrap", insecure=False), {}, only
    )
    assert len(calls) == 3 and sorted(calls[1][0] + calls[2][0]) == sorted(only)
    # both judges of one submission draw the speed tests' inputs from one seed: one line replays them
    assert None not in seeds and seeds[1] == seeds[2], seeds
    monkeypatch.setenv(SEED_ENV, "7")  # a regrade's seed: every judge inherits it
    grader.run_judges(
        dataclasses.replace(repo["plan"], tier="bubblewrap", insecure=False), {}, only
    )
    assert seeds[3:] == [None, None], seeds


def test_grading_one_submission_shows_its_progress_per_test(repo, tmp_path, capsys):
    """Not on a terminal (a log, CI): a plain line each time another tenth of the tests has ended, up to
    every test; on a terminal the same count lives on the bar (TestProgress, below)."""
    plan = repo["plan"]
    run_batch(_sorted(repo["subs"])[:1], tmp_path / "out", plan, progress=True)
    total = sum(plan.runs_here(n) for n in plan.items)
    seen = [
        (int(k), int(n))
        for k, n in re.findall(
            r"\bgrading alice: (\d+)/(\d+) tests$", capsys.readouterr().err, re.M
        )
    ]
    assert seen and {n for _, n in seen} == {total}, seen
    assert [k for k, _ in seen] == sorted({k for k, _ in seen}) and seen[-1][0] == total, seen
    assert len(seen) <= 10, seen


def test_one_submission_shows_its_progress_per_test_whatever_jobs(repo, tmp_path, capsys):
    """`cs336 grade alice.zip --jobs 2`: one submission is graded in this process, so its progress per
    test shows as with --jobs 1 (a pool of one would hide it)."""
    code = main(
        [
            "grade",
            str(_sorted(repo["subs"])[0]),
            "--out",
            str(tmp_path / "grades"),
            "--jobs",
            "2",
            "--staff-root",
            str(repo["root"]),
            "--test-timeout",
            "5",
            *(["--insecure"] if INSECURE else []),
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert re.search(r"\bgrading alice: \d+/\d+ tests$", err, re.M), err


def test_progress_on_a_terminal_is_one_live_line():
    """On a terminal the submission's count replaces the bar's postfix: one line, updated in place."""
    from io import StringIO

    from tqdm import tqdm

    from cs336_staff.grade.batch import TestProgress

    bar = tqdm(total=1, file=StringIO())
    tick = TestProgress(bar, "alice", 250, live=True)
    tick(3)
    tick(9)
    assert bar.postfix == "alice: 12/250 tests"
    bar.close()
