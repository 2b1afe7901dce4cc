"""Grade submissions (tests in a trusted judge, code in a sandboxed worker); write Gradescope results.

    uv run cs336 grade                           # the bundled example (the reference): full marks
    uv run cs336 grade alice.zip bob/ --out grades/
    uv run cs336 grade uploads/ --jobs 2         # every .zip / folder in uploads/, 2 at a time
    uv run cs336 grade uploads/ --executor slurm --device gpu --slurm-partition h100
    uv run cs336 merge grades-cpu/ grades-gpu/ --out grades/
    uv run cs336 grade --fail-under 100          # CI: exit 1 unless the example gets every point graded here

Each submission gets OUT/<name>/ with results.json (Gradescope), junit.xml, summary.md and
console.txt; OUT/gradebook.csv has one row per submission. Rerunning skips submissions already
graded (same content, same tests and rubric) unless --force, so an interrupted batch resumes.

Exit status: 2 for bad arguments (one line, ``cs336 grade: error: ...``); 1 when a submission was
rejected (not a zip from make_submission.sh or a folder with cs336_assignment/, say: it still gets
its results.json, score 0 and the reason, and in a batch every other submission is graded as usual;
the last line names the rejected ones and what to upload), when the grader failed on one, or under
--fail-under; else 0. A single submission's grading shows its progress per test (a live line on a
terminal, a plain line per tenth of the tests otherwise; --quiet: none).
The threat model is in cs336_staff/grade/THREAT_MODEL.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cs336_assignment.cli import CommandError

ROOT = Path(__file__).resolve().parents[2]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "submissions",
        nargs="*",
        type=Path,
        help="zips from make_submission.sh, submission folders, or folders of them "
        "(default: the bundled example, the reference solution)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("grades"), help="output folder (default: grades/)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="submissions graded at once (local executor; the container tier grades one at a time)",
    )
    parser.add_argument(
        "--executor",
        default="local",
        choices=["local", "slurm", "submitit-local", "submitit-debug"],
        help="local process pool, or one submitit job per submission",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "gpu", "auto"],
        help="which tests run here; the others are reported pending (default: cpu)",
    )
    parser.add_argument(
        "--force", action="store_true", help="regrade submissions that already have results"
    )
    parser.add_argument(
        "--rubric", type=Path, default=None, help="rubric TOML (default: rubric.toml)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds for a whole submission (default 1800)"
    )
    parser.add_argument(
        "--test-timeout", type=float, default=120, help="seconds per test (default 120)"
    )
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=8,
        help="memory for a submission's whole worker process tree, GiB (default 8)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="grade without isolation where neither bubblewrap nor the container tier (root) can start "
        "(every result says so)",
    )
    parser.add_argument("--staff-root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary table")
    parser.add_argument("--slurm-partition", default=None)
    parser.add_argument("--slurm-gpus-per-node", type=int, default=None)
    parser.add_argument("--slurm-cpus-per-task", type=int, default=None)
    parser.add_argument("--slurm-mem-gb", type=float, default=None)
    parser.add_argument(
        "--slurm-time-min",
        type=int,
        default=None,
        help="each Slurm job's time limit in minutes (default: --timeout + 10 min); a job "
        "killed at it is reported with Slurm's state TIMEOUT and regraded by a rerun",
    )
    parser.add_argument(
        "--fail-under",
        type=float,
        default=None,
        metavar="PERCENT",
        help="exit 1 if a submission scores under PERCENT of the points graded here (tests "
        "pending for another runner left out); CI grades the bundled example with 100",
    )


def _check(args: argparse.Namespace) -> None:
    if args.jobs < 1:
        raise ValueError(f"--jobs {args.jobs}: must be at least 1")
    for name in ("timeout", "test_timeout", "memory_gb"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)}: must be positive")
    if args.slurm_time_min is not None and args.slurm_time_min < 1:
        raise ValueError(
            f"--slurm-time-min {args.slurm_time_min}: must be at least 1 (Slurm counts minutes)"
        )
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise ValueError(f"--fail-under {args.fail_under}: must be a percentage, 0 to 100")
    if args.rubric is not None and not args.rubric.is_file():
        raise ValueError(
            f"--rubric {args.rubric}: no such file; give a rubric TOML (the default is rubric.toml)"
        )
    missing = [str(p) for p in args.submissions if not p.exists()]
    if missing:
        raise ValueError(f"no such submission: {', '.join(missing)} (give .zip files or folders)")
    if args.out.exists() and not args.out.is_dir():
        raise ValueError(f"--out {args.out} exists and is not a folder; choose another --out")


def _left_out(given: list[Path], submissions: list[Path], out: Path) -> dict[Path, list[str]]:
    """Folder -> the names in it that ``expand`` did not take (a PDF beside the zips, say), but ``out``."""
    taken = {Path(p).resolve() for p in submissions} | {out.resolve()}
    left: dict[Path, list[str]] = {}
    for folder in map(Path, given):
        if folder.resolve() in taken or not folder.is_dir():
            continue
        names = sorted(
            c.name
            for c in folder.iterdir()
            if not c.name.startswith(".") and c.resolve() not in taken
        )
        if names:
            left[folder] = names
    return left


def _pending_note(out: Path, row: dict) -> str:
    """Say what the score leaves out: tests this runner could not run (GPU tests on a CPU runner)."""
    if row["status"].startswith("grader error"):
        return ""
    from cs336_staff.grade.report import load

    pending = [t for t in load(out / row["name"]).tests if t.outcome == "pending"]
    if not pending:
        return ""
    points = sum(t.max_points for t in pending)
    return (
        f"; {points:.2f} points pending: {len(pending)} tests need a GPU runner "
        "(grade there with --device gpu, then `cs336 merge`)"
    )


def run(args: argparse.Namespace) -> int:
    from cs336_staff.grade import neutral
    from cs336_staff.grade.batch import expand, run_batch
    from cs336_staff.grade.example import build_example
    from cs336_staff.grade.grader import SandboxRefused, gpu_available, make_plan
    from cs336_staff.grade.limits import Limits
    from cs336_staff.grade.report import load
    from cs336_staff.grade.sandbox import choose_tier
    from cs336_staff.grade.spec import public_fixtures

    try:
        _check(args)
    except ValueError as e:
        raise CommandError(e) from None
    t0 = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    # never the results of this run (`cs336 grade uploads/ --out uploads/grades/`)
    submissions = [p for p in expand(args.submissions) if p.resolve() != out.resolve()]
    for folder, names in _left_out(args.submissions, submissions, out).items():
        print(
            # an upload's name is its author's text: shown inert (grade/neutral.py)
            f"cs336 grade: skipping {neutral.line(', '.join(names))} in {folder}/: only .zip files "
            "and folders are submissions",
            file=sys.stderr,
        )
    insecure = args.insecure
    if not args.submissions:
        zip_path, how = build_example(args.staff_root, out / "_example")
        print(f"grading the bundled example: the reference solution, {how}", file=sys.stderr)
        submissions = [zip_path]
        tier, why = choose_tier(
            args.staff_root,
            public_fixtures(args.staff_root),
            args.device not in ("cpu",) and gpu_available(),
        )
        if tier is None and not insecure:
            # the staff's own reference is trusted; real submissions are refused instead
            insecure = True
            print(
                f"no sandbox on this machine ({why}); grading the trusted example without one. Real "
                "submissions are refused here unless you pass --insecure.",
                file=sys.stderr,
            )
    if not submissions:
        raise CommandError(
            "no submissions found in the given folders; give .zip files from make_submission.sh, "
            "submission folders, or folders of them"
        )
    limits = Limits(
        test_timeout=args.test_timeout,
        run_timeout=args.timeout,
        memory_bytes=int(args.memory_gb * 2**30),
        threads=None,
    )
    try:
        plan = make_plan(
            args.staff_root,
            rubric_path=args.rubric,
            device=args.device,
            limits=limits,
            jobs=args.jobs,
            cache_dir=out / ".cache",
            insecure=insecure,
            warn=lambda m: print(m, file=sys.stderr),
        )
    except (ValueError, RuntimeError, SandboxRefused) as e:
        raise CommandError(e) from None
    slurm = {
        "slurm_partition": args.slurm_partition,
        "gpus_per_node": args.slurm_gpus_per_node,
        "cpus_per_task": args.slurm_cpus_per_task,
        "mem_gb": args.slurm_mem_gb,
        "timeout_min": args.slurm_time_min,
    }
    try:
        rows = run_batch(
            submissions,
            out,
            plan,
            executor=args.executor,
            # one submission is graded in this process, whatever --jobs, so its progress shows per test
            jobs=1 if len(submissions) == 1 else args.jobs,
            force=args.force,
            progress=not args.quiet,
            slurm=slurm,
        )
    except SandboxRefused as e:
        raise CommandError(e) from None
    except Exception as e:
        # submitit's: sbatch refused the job (no controller, a bad partition ...)
        if type(e).__module__.startswith("submitit"):
            said = [line for line in str(e).splitlines() if line.strip()]
            raise CommandError(
                f"--executor {args.executor}: submitting a job failed: {said[-1] if said else e}"
            ) from None
        raise
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: finished results are kept in {out}/; rerun the same command to resume",
            file=sys.stderr,
        )
        return 130
    if not args.quiet and len(rows) == 1 and not rows[0]["status"].startswith("grader error"):
        print(load(out / rows[0]["name"]).summary())
    for r in rows:
        flag = " (already graded; --force regrades)" if r.get("skipped") else ""
        print(
            f"{r['name']}: {r['score']:g} / {r['max_score']:g}  [{r['status']}]{flag}{_pending_note(out, r)}"
        )
    print(
        f"results in {out}/ (gradebook: {out / 'gradebook.csv'}); {time.perf_counter() - t0:.1f} s"
    )
    if any(r["status"].startswith("grader error") for r in rows):
        return 1
    rejected = [r["name"] for r in rows if r["status"] == "rejected"]
    if rejected:
        why = next((n for n in load(out / rejected[0]).notes if n.startswith("rejected: ")), "")
        why = why.removeprefix("rejected: ")
        if "make_submission.sh" not in why:  # the reason says what to upload, or this does
            why += "; upload the .zip that `bash make_submission.sh` builds (cs336_assignment/ and adapters.py)"
        raise CommandError(
            f"{len(rejected)} of {len(rows)} submissions rejected ({', '.join(rejected[:5])}"
            f"{', ...' if len(rejected) > 5 else ''}; each scored 0): {why}",
            status=1,
        )
    return 1 if args.fail_under is not None and _under(out, rows, args.fail_under) else 0


def _under(out: Path, rows: list[dict], percent: float) -> bool:
    """Say on stderr which submissions score under ``percent`` of the points graded here; any?"""
    from cs336_staff.grade.report import load

    under = False
    for r in rows:
        # graded here: neither pending for another runner nor not graded at all (report.TestResult.graded)
        tests = [t for t in load(out / r["name"]).tests if t.outcome != "pending" and t.graded]
        here, got = sum(t.max_points for t in tests), sum(t.points for t in tests)
        if here and 100 * got / here < percent - 1e-6:
            under = True
            lost = ", ".join(t.nodeid for t in tests if t.outcome != "passed")
            print(
                f"cs336 grade: error: {r['name']} got {got:.2f} of the {here:.2f} points graded here, under "
                f"--fail-under {percent:g}%; not passed: {lost}",
                file=sys.stderr,
            )
    return under
