"""What a Slurm job means to the grader: when it is over, why it ended without a result.

``cs336 grade --executor slurm`` submits one job per submission through submitit (batch.py).
Three things submitit does not do for grading:

* **Job states without ``sacct``.** submitit reads states from ``sacct``, which needs Slurm's
  accounting database; on a cluster without one (a single-node Slurm, many small clusters) every
  state reads UNKNOWN and a job killed before it wrote its result is waited on forever.
  :class:`JobWatch` reads ``squeue``, which needs only slurmctld.
* **A killed job leaves no result.** Slurm ends a job (time limit, ``scancel``) with SIGTERM to
  every process in it; the judge dies of it and grade_one would record that as the submission's
  error. :func:`grade_in_slurm_job` turns the SIGTERM into :class:`SlurmTerminated` instead, so
  nothing is written and the rerun grades the submission again.
* **The failure names Slurm's state** (:class:`SlurmJobEnded`): ``TIMEOUT`` says to raise
  ``--slurm-time-min`` or ``--timeout``.

``.ci/slurm-up.sh`` stands up a single-node Slurm; tests/staff/test_grade_slurm.py grades on it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from cs336_staff.grade.grader import Plan, grade_one


class SlurmTerminated(BaseException):
    """Slurm is ending the job (time limit, scancel): no result, so the rerun grades it again.

    A BaseException, so that neither grade_one (which turns an Exception into a graded error)
    nor submitit (which pickles an Exception as the job's result) records anything.
    """


def grade_in_slurm_job(submission: Path, name: str, out: Path, plan: Plan, force: bool) -> dict:
    """grade_one inside a Slurm job. Slurm ends a job with SIGTERM to every process in it; the judge
    dies of it, and without this handler grade_one would record that as the submission's error."""

    def ended(signum, frame):
        raise SlurmTerminated(f"signal {signal.Signals(signum).name} from Slurm")

    signal.signal(signal.SIGTERM, ended)
    return grade_one(submission, name, out, plan, force)


#: Job states after which a Slurm job has no more to say (``squeue --states=all`` shows them for
#: MinJobAge seconds after the end; after that the job is gone from squeue, which means the same).
SLURM_END_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "CANCELLED",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
    }
)
GONE = "gone from squeue"
#: Seconds between two ``squeue`` calls while waiting for Slurm jobs.
SQUEUE_EVERY_S = 5.0
#: Seconds a job's result file may appear after Slurm says the job ended (a shared filesystem's
#: lag; submitit waits as long).
RESULT_GRACE_S = 15.0


class JobWatch:
    """Which Slurm jobs are over: their result file is there, or ``squeue`` says they ended.

    submitit asks ``sacct``, which needs Slurm's accounting database; on a cluster without one (a
    single-node Slurm, many small clusters) every state reads UNKNOWN, each call prints "accounting
    storage is disabled", and a job killed before it wrote its result is waited on forever.
    ``squeue`` needs only slurmctld.
    """

    def __init__(self) -> None:
        self._last = -SQUEUE_EVERY_S
        self._ended: dict[str, tuple[str, float]] = {}  # job id -> (Slurm's state, when first seen)

    def over(self, jobs: list) -> dict[str, str | None]:
        """``{job_id: None}`` for each job whose result is there, ``{job_id: state}`` for each that
        Slurm ended more than RESULT_GRACE_S ago without one; jobs still running are left out."""
        waiting = [job for job in jobs if not job.paths.result_pickle.exists()]
        self._poll([job.job_id for job in waiting])
        now = time.monotonic()
        out: dict[str, str | None] = {job.job_id: None for job in jobs if job not in waiting}
        for job in waiting:
            state, since = self._ended.get(job.job_id, ("", now))
            if state and now - since >= RESULT_GRACE_S:
                out[job.job_id] = state
        return out

    def _poll(self, job_ids: list[str]) -> None:
        if not job_ids or time.monotonic() - self._last < SQUEUE_EVERY_S:
            return
        self._last = time.monotonic()
        try:
            p = subprocess.run(
                [
                    "squeue",
                    "--states=all",
                    "--noheader",
                    "--format=%i|%T",
                    "--jobs",
                    ",".join(job_ids),
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        known: dict[str, str] | None
        if p.returncode != 0:
            # slurmctld busy or restarting, or every job purged ("Invalid job id")
            known = {} if "Invalid job id" in p.stderr else None
        else:
            known = dict(line.split("|", 1) for line in p.stdout.splitlines() if "|" in line)
        if known is None:
            return
        for j in job_ids:
            state = known.get(j, GONE)
            if (state in SLURM_END_STATES or state == GONE) and j not in self._ended:
                self._ended[j] = (state, time.monotonic())


class SlurmJobEnded(RuntimeError):
    """A Slurm job ended without a result; the message names Slurm's state and what to do."""

    @classmethod
    def of(cls, job, state: str) -> SlurmJobEnded:
        where = f"its log: {job.paths.stderr}"
        if state == "TIMEOUT":
            return cls(
                f"killed by Slurm at the job's time limit (job {job.job_id}, state TIMEOUT) before grading "
                f"finished; rerun with a larger --timeout or --slurm-time-min (finished results are kept); "
                f"{where}"
            )
        return cls(f"Slurm job {job.job_id} ended without a result (state {state}); {where}")
