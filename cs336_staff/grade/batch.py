"""Grade many submissions: a local process pool, or one Slurm job each through submitit.

Nothing is lost: each worker writes ``OUT/<name>/results.json`` the moment its submission is
graded (``results.json`` is written last and atomically, so its presence means "finished"). A
rerun skips every submission already graded with the same content and the same plan (tests,
rubric, device), unless ``--force``, without submitting a job for it; so an interrupted batch
resumes where it stopped. The CSV
gradebook is rebuilt from the result folders after every submission.

Executors:

* ``local`` (default): ``--jobs N`` worker processes on this machine, with a tqdm progress bar;
  with ``--jobs 1`` (one submission at a time, in this process) it also shows the submission's
  progress per test (``TestProgress``: ``alice: 12/250 tests`` on the bar, live, on a terminal; a
  plain line per tenth of its tests otherwise).
* ``slurm``: one job per submission through ``submitit.AutoExecutor(cluster="slurm")``; the
  job grades and writes its own folder, so results survive the submitting process.
* ``submitit-local`` / ``submitit-debug``: the same code path through submitit's
  ``LocalExecutor`` (subprocesses) or ``DebugExecutor`` (in-process), to test it without Slurm.

A Slurm job that ends without a result (killed at its time limit, out of memory, cancelled) is
reported with Slurm's state (``TIMEOUT`` ...), and the rerun grades it (``slurm.py``). Ctrl-C
cancels the jobs still queued or running, so the rerun grades each of them once.

Deliberately left out: a scheduler of our own, retries of failed jobs (rerun the command).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import shlex
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from tqdm import tqdm

from cs336_staff.grade import container
from cs336_staff.grade.grader import Plan, SandboxRefused, already_graded, grade_one
from cs336_staff.grade.intake import ADAPTERS, PACKAGE, submission_name
from cs336_staff.grade.report import write_gradebook
from cs336_staff.grade.slurm import JobWatch, SlurmJobEnded, grade_in_slurm_job

EXECUTORS = ("local", "slurm", "submitit-local", "submitit-debug")


def expand(paths: list[Path]) -> list[Path]:
    """Submissions named by ``paths``: a zip, a submission directory, or a folder of them."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir() and not _is_submission_dir(p):
            children = sorted(
                c
                for c in p.iterdir()
                if not c.name.startswith(".") and (c.suffix.lower() == ".zip" or c.is_dir())
            )
            out.extend(children)
        else:
            out.append(p)
    return out


def _is_submission_dir(p: Path) -> bool:
    if (p / PACKAGE).exists() or (p / ADAPTERS).exists():
        return True
    subs = [c for c in p.iterdir() if c.is_dir()]
    return len(subs) == 1 and (subs[0] / PACKAGE).is_dir() and not any(p.glob("*.zip"))


#: Names in OUT/ that belong to the batch, never to a submission's folder.
RESERVED = frozenset({"gradebook.csv", "gradebook.csv.tmp"})


def assign_names(submissions: list[Path]) -> list[tuple[Path, str]]:
    """A distinct folder name for each submission, never one the batch uses itself.

    ``alice``, ``alice-2`` for a clash; a name the batch needs (``gradebook.csv``) or one the
    gradebook would skip (leading ``.`` or ``_``) gets a ``submission-`` prefix.

    >>> [n for _, n in assign_names([Path("a.zip"), Path("a"), Path("gradebook.csv"), Path("_x.zip")])]
    ['a', 'a-2', 'submission-gradebook.csv', 'submission-x']
    """
    taken: set[str] = set()
    out = []
    for s in submissions:
        name = submission_name(s)
        if name in RESERVED or name.startswith((".", "_")):
            name = "submission-" + name.lstrip("._")
        unique, k = name, 1
        while unique.lower() in taken:
            k += 1
            unique = f"{name}-{k}"
        taken.add(unique.lower())
        out.append((s, unique))
    return out


def private_to_the_grader(out: Path, uploads: list[Path]) -> None:
    """On the container tier a worker is another uid of this machine: the output folder (every result)
    and the uploads (other students' code) become the grader's alone (``chmod go-rwx``, folders
    walked without following a symlink), checked by a fresh uid's attempt to open each; where that
    cannot be done grading is refused, saying what to run."""
    out.chmod(0o700)
    closed = 0
    for upload in uploads:
        with contextlib.suppress(OSError):
            for p in [
                upload,
                *(upload.rglob("*") if upload.is_dir() and not upload.is_symlink() else []),
            ]:
                if p == upload or not p.is_symlink():
                    mode = p.stat().st_mode
                    if mode & 0o077:
                        p.chmod(mode & ~0o077 & 0o7777)
                        closed += 1
    if closed:
        print(
            f"cs336 grade: the container tier runs each worker as another user of this machine: "
            f"{closed} of the uploads' files and folders are now readable by the grader alone (chmod go-rwx)",
            file=sys.stderr,
        )
    open_to_all = container.readable_by_others(uploads)
    if open_to_all:
        shown = " ".join(shlex.quote(str(p)) for p in open_to_all[:5])
        more = f" and {len(open_to_all) - 5} more" if len(open_to_all) > 5 else ""
        raise SandboxRefused(
            f"other users of this machine may still read {len(open_to_all)} of the uploads ({shown}{more}), "
            "and on the container tier each submission's worker is another user: make them the "
            f"grader's alone (`chmod -R go-rwx {shown}`, or copy them into a 0700 folder), then rerun"
        )


def _error_row(name: str, e: BaseException) -> dict:
    """The row of a submission whose grading process itself died (grade_one writes a result otherwise)."""
    return {
        "name": name,
        "score": 0.0,
        "max_score": 0.0,
        "status": f"grader error: {type(e).__name__}: {e}",
        "skipped": False,
    }


class TestProgress:
    """One submission's progress per test (``grade_one``'s ``tick``, called from a thread): on a
    terminal, ``NAME: k/N tests`` live on the batch's bar; elsewhere (a log, CI) a plain line each time
    another tenth of the tests has ended, so a log is neither silent for minutes nor flooded."""

    __test__ = False  # not a pytest test class

    def __init__(self, bar: tqdm, name: str, total: int, live: bool) -> None:
        self.bar, self.name, self.total, self.live = bar, name, total, live
        self.done, self.shown = 0, 0
        self._lock = threading.Lock()

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
            line = f"{self.name}: {min(self.done, self.total)}/{self.total} tests"
            if self.live:
                self.bar.set_postfix_str(line[:60])
            elif self.total and 10 * self.done // self.total > 10 * self.shown // self.total:
                self.shown = self.done
                tqdm.write(f"grading {line}", file=sys.stderr)


def run_batch(
    submissions: list[Path],
    out: Path,
    plan: Plan,
    *,
    executor: str = "local",
    jobs: int = 1,
    force: bool = False,
    progress: bool = True,
    slurm: dict | None = None,
    on_result: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Grade every submission into ``out``; return one summary row per submission."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r} must be one of {EXECUTORS}")
    out.mkdir(parents=True, exist_ok=True)
    named = assign_names(submissions)
    if plan.tier == container.TIER and not plan.insecure:
        private_to_the_grader(out, [path for path, _ in named])
    rows: list[dict] = []
    bar = tqdm(total=len(named), desc="grading", unit="sub", disable=not progress, file=sys.stderr)

    def done(row: dict) -> None:
        rows.append(row)
        write_gradebook(out)
        bar.set_postfix_str(
            f"{row['name']}: {row['score']:g}/{row['max_score']:g} {row['status']}"[:60]
        )
        bar.update(1)
        if on_result:
            on_result(row)

    total = sum(plan.runs_here(n) for n in plan.items)
    live = progress and sys.stderr.isatty()
    try:
        if executor == "local" and jobs <= 1:
            for path, name in named:
                tick = TestProgress(bar, name, total, live) if progress else None
                try:
                    done(grade_one(path, name, out, plan, force, tick))
                except Exception as e:  # a grader bug on one submission must not stop the batch
                    done(_error_row(name, e))
        elif executor == "local":
            _run_pool(named, out, plan, jobs, force, done)
        else:
            _run_submitit(named, out, plan, executor, force, done, slurm or {})
    finally:
        bar.close()
    return rows


def _run_pool(named, out, plan, jobs, force, done) -> None:
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
    try:
        futures = {
            pool.submit(grade_one, path, name, out, plan, force): name for path, name in named
        }
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                try:
                    done(f.result())
                except Exception as e:
                    done(_error_row(futures[f], e))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _run_submitit(named, out, plan, executor, force, done, slurm: dict) -> None:
    import submitit

    folder = out / ".submitit" / "%j"
    ex: submitit.Executor
    if executor == "slurm":
        ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
        # use_srun=False: the grader runs in the batch shell, out of reach of the USR2 that submitit has
        # Slurm send a job's steps 90 s before its time limit (to checkpoint and requeue): grading cannot
        # checkpoint, and a USR2 that lands before submitit's handler kills the job (a 1-minute limit).
        params = {
            "timeout_min": int(plan.limits.run_timeout / 60) + 10,
            "slurm_job_name": "cs336-grade",
            "slurm_use_srun": False,
        }
        params.update({k: v for k, v in slurm.items() if v is not None})
        ex.update_parameters(**params)
    elif executor == "submitit-local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=int(plan.limits.run_timeout / 60) + 10)
    else:
        ex = submitit.DebugExecutor(folder=folder)
    jobs = []
    for path, name in named:  # a submission graded before takes no place in a queue (and no job)
        row = None
        if not force:
            with contextlib.suppress(Exception):  # an unreadable zip: its job says why
                row = already_graded(path, name, out, plan)
        if row is not None:
            done(row)
        else:
            jobs.append(
                (
                    ex.submit(
                        grade_in_slurm_job if executor == "slurm" else grade_one,
                        path,
                        name,
                        out,
                        plan,
                        force,
                    ),
                    name,
                )
            )
    watch = JobWatch() if executor == "slurm" else None
    pending = list(jobs)
    try:
        while pending:
            over = (
                watch.over([job for job, _ in pending])
                if watch
                else {job.job_id: None for job, _ in pending if job.done()}
            )
            still = []
            for job, name in pending:
                if job.job_id not in over:
                    still.append((job, name))
                    continue
                try:
                    ended = over[job.job_id]
                    if ended is not None:
                        raise SlurmJobEnded.of(job, ended)
                    done(job.result())
                except Exception as e:
                    done(_error_row(name, e))
            pending = still
            if pending:
                time.sleep(0.5)
    except BaseException:  # Ctrl-C: cancel what is queued or running, so a rerun grades it once
        for job, _ in pending:
            with contextlib.suppress(Exception):
                job.cancel(check=False)
        raise
