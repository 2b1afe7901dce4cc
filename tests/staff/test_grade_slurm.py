"""A real Slurm grades a batch: the local executor's scores, a job killed at Slurm's time limit
reported as such, and an interrupted batch finished by a rerun that grades only what is missing.

Needs a Slurm cluster this machine submits to (``sbatch`` on PATH, a node up in ``sinfo``):
``sudo .ci/slurm-up.sh`` stands up a single-node one on Debian, and ``.ci/run`` does so before it
runs this file (with CS336_REQUIRE_SLURM=1: fail, not skip). Skipped, with the reason, where there
is none. The repository graded is the synthetic one of cs336_staff/grade/testing.py, so each job
grades in seconds; only the submission that hangs takes long: Slurm counts time limits in minutes,
and slurmctld checks them every 30 s. The last test needs no Slurm (a fake ``squeue``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from cs336_assignment.cli import main
from cs336_staff.grade import slurm
from cs336_staff.grade.batch import run_batch
from cs336_staff.grade.grader import make_plan
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.sandbox import probe
from cs336_staff.grade.testing import calc_with, make_staff_repo, make_zip


def _controllers_refuse() -> str | None:
    """Why no controller can answer, where slurm.conf names them and each refuses a connection on its
    port (``sinfo`` then spends about 10 s retrying before it says so, at every collection of this
    file); None where that cannot be told here (no slurm.conf, a name that does not resolve, no
    answer yet), and ``sinfo`` decides."""
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    try:
        lines = conf.read_text().splitlines()
    except OSError:
        return None
    hosts, port = [], 6817  # Slurm's default SlurmctldPort
    for line in lines:
        key, _, value = line.split("#")[0].strip().partition("=")
        if key.lower() in ("slurmctldhost", "controlmachine"):  # "name" or "name(address)"
            name, _, address = value.strip().partition("(")
            hosts.append(address.rstrip(")").strip() or name.strip())
        elif key.lower() == "slurmctldport" and value.strip().split("-")[0].isdigit():
            port = int(value.strip().split("-")[0])
    if not hosts:
        return None
    for host in hosts:
        try:
            with socket.create_connection((host, port), timeout=2):
                return None
        except ConnectionRefusedError:
            continue
        except OSError:
            return None
    where = ", ".join(f"{h}:{port}" for h in hosts)
    return f"no slurmctld listens at {where} ({conf}): no Slurm cluster to grade on (sudo .ci/slurm-up.sh stands one up)"


def _cluster_missing() -> str | None:
    if shutil.which("sbatch") is None:
        return "no sbatch on PATH, so no Slurm cluster to grade on (sudo .ci/slurm-up.sh stands one up)"
    refused = _controllers_refuse()
    if (
        refused and os.environ.get("CS336_REQUIRE_SLURM") != "1"
    ):  # where required, sinfo has the last word
        return refused
    p = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format=%T"], capture_output=True, text=True, timeout=60
    )
    if p.returncode != 0 or not {"idle", "mixed", "allocated"} & set(p.stdout.split()):
        return f"sinfo shows no node up (is slurmctld running? sudo .ci/slurm-up.sh): {p.stdout}{p.stderr}".strip()
    return None


MISSING = _cluster_missing()
#: Set by .ci/run, which has just stood the cluster up: a missing cluster there fails, never skips.
REQUIRED = os.environ.get("CS336_REQUIRE_SLURM") == "1"
pytestmark = pytest.mark.staff
needs_slurm = pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=MISSING or "")
INSECURE = probe(False) is not None
FULL, BOB = 11.5, 8.5  # as in test_grade_batch.py: every CPU point; mul returning 0 loses 3 of them
SLURM_TIME_MIN = 1  # Slurm's smallest time limit: the hanging job is killed 60-90 s after it starts
# far past the Slurm time limit: Slurm kills first
LIMITS = Limits(test_timeout=600, run_timeout=600)
# the whole flow is ~2 min on an idle 2-core machine; leave room for load
SLURM_TEST_TIMEOUT_S = 600


@pytest.fixture
def batch(tmp_path):
    assert MISSING is None, f"CS336_REQUIRE_SLURM=1 but {MISSING}"
    root = make_staff_repo(tmp_path / "repo")
    subs = tmp_path / "subs"
    subs.mkdir()
    make_zip(subs / "alice.zip", {})
    make_zip(subs / "bob.zip", {}, calc=calc_with(mul="return 0"))
    make_zip(subs / "hang.zip", {}, calc=calc_with(add="while True: pass"))
    return {"root": root, "subs": subs, "tmp": tmp_path}


def _job_folders(out) -> int:
    """How many Slurm jobs the batches in ``out`` submitted (submitit keeps a folder per job id)."""
    return sum(p.is_dir() and p.name.isdigit() for p in (out / ".submitit").iterdir())


def _ours_still_queued(job_name: str) -> list[str]:
    p = subprocess.run(
        ["squeue", "--noheader", "--name", job_name, "--format=%i %T"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return p.stdout.split("\n") if p.stdout.strip() else []


@needs_slurm
@pytest.mark.slow
@pytest.mark.timeout(SLURM_TEST_TIMEOUT_S)
def test_slurm_grades_like_local_reports_its_time_limit_and_resumes(batch, capsys):
    """Interrupt a Slurm batch after its first result, then rerun it through the CLI."""
    root, subs, tmp = batch["root"], batch["subs"], batch["tmp"]
    plan = make_plan(root, limits=LIMITS, cache_dir=tmp / ".cache", insecure=INSECURE)
    graded = sorted(subs.glob("*.zip"))
    local = {
        r["name"]: r["score"] for r in run_batch(graded[:2], tmp / "local", plan, progress=False)
    }
    assert local == {"alice": FULL, "bob": BOB}

    # 1. Ctrl-C once the first submission is graded: its result stays, every other job is cancelled.
    out, job_name = tmp / "slurm", f"cs336-test-{uuid.uuid4().hex[:8]}"

    def interrupt(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(
            graded,
            out,
            plan,
            executor="slurm",
            progress=False,
            on_result=interrupt,
            slurm={"timeout_min": SLURM_TIME_MIN, "slurm_job_name": job_name},
        )
    finished = {p.parent.name for p in out.glob("*/results.json")}
    assert finished and "hang" not in finished, finished
    deadline = time.monotonic() + 60  # a cancelled running job passes through COMPLETING
    while _ours_still_queued(job_name) and time.monotonic() < deadline:
        time.sleep(1)
    assert not _ours_still_queued(job_name), "Ctrl-C left Slurm jobs queued or running"

    # 2. The same batch through `cs336 grade --executor slurm`: a job for each missing one only,
    #    the local executor's scores; the hanging one is killed at the time limit and says so.
    jobs_before = _job_folders(out)
    code = main(
        [
            "grade",
            str(subs),
            "--out",
            str(out),
            "--executor",
            "slurm",
            "--quiet",
            "--slurm-time-min",
            str(SLURM_TIME_MIN),
            "--staff-root",
            str(root),
            "--test-timeout",
            str(LIMITS.test_timeout),
            "--timeout",
            str(LIMITS.run_timeout),
            *(["--insecure"] if INSECURE else []),
        ]
    )
    text = capsys.readouterr().out
    assert code == 1, text  # a submission without a grade is an error of the run
    lines = {line.split(":", 1)[0]: line for line in text.splitlines() if ": " in line}
    for name, score in local.items():
        assert lines[name].startswith(f"{name}: {score:g} / "), text
        assert ("already graded" in lines[name]) == (name in finished), text
    assert (
        "killed by Slurm at the job's time limit" in lines["hang"] and "TIMEOUT" in lines["hang"]
    ), text
    assert _job_folders(out) - jobs_before == 3 - len(finished)  # no job for what was graded
    assert not (out / "hang" / "results.json").exists()
    assert {p.parent.name for p in out.glob("*/results.json")} == {"alice", "bob"}


def _job(tmp_path, job_id, *, result=False):
    folder = tmp_path / job_id
    folder.mkdir()
    if result:
        (folder / "result.pkl").write_bytes(b"")
    return SimpleNamespace(
        job_id=job_id,
        paths=SimpleNamespace(result_pickle=folder / "result.pkl", stderr=folder / "log.err"),
    )


def test_job_watch_reads_squeue_not_sacct(tmp_path, monkeypatch):
    """Runs anywhere (a fake squeue): a result file ends a job; else squeue's end state, or its absence."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text(
        "#!/bin/sh\necho '7|TIMEOUT'\necho '8|RUNNING'\necho '9|COMPLETED'\n"
    )
    (fake / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(slurm, "RESULT_GRACE_S", 0.0)
    jobs = [
        _job(tmp_path, "7"),
        _job(tmp_path, "8"),
        _job(tmp_path, "9", result=True),
        _job(tmp_path, "10"),
    ]
    assert slurm.JobWatch().over(jobs) == {"7": "TIMEOUT", "9": None, "10": slurm.GONE}
    message = str(slurm.SlurmJobEnded.of(jobs[0], "TIMEOUT"))
    assert "killed by Slurm at the job's time limit" in message and "--slurm-time-min" in message
