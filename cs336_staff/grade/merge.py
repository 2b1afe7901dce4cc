"""Merge a CPU run and a GPU run of the same submissions into one result each.

    uv run cs336 merge grades-cpu/ grades-gpu/ --out grades/

For every submission folder present in either run, each test is taken from the run that was
meant to run it (GPU-marked tests from the GPU run, the others from the CPU run); when that run
has it pending or lacks the submission, the other run's result is used. Scores are recomputed,
and results.json, junit.xml, summary.md and the gradebook are rewritten by the same code as
``cs336 grade``. The merged status is the worse of the two runs' (a crash in either stays visible).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.grade.report import GradeResult, TestResult, load, write_gradebook

SEVERITY = ["ok", "crashed", "timeout", "rejected", "error"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "cpu", type=Path, help="output folder of the CPU run (cs336 grade --device cpu)"
    )
    parser.add_argument(
        "gpu", type=Path, help="output folder of the GPU run (cs336 grade --device gpu)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("grades/merged"),
        help="where to write (default grades/merged)",
    )


def _pick(device: str, cpu: TestResult | None, gpu: TestResult | None) -> TestResult:
    first, second = (gpu, cpu) if device == "gpu" else (cpu, gpu)
    if first is not None and first.outcome != "pending":
        return first
    if second is not None and second.outcome != "pending":
        return second
    return first or second  # type: ignore[return-value]


def merge_results(cpu: GradeResult | None, gpu: GradeResult | None) -> GradeResult:
    """One result from two runs of the same submission (either may be missing)."""
    if cpu is None or gpu is None:
        only = cpu or gpu
        assert only is not None
        only.notes = [
            *only.notes,
            f"merge: no {'GPU' if gpu is None else 'CPU'} run of this submission",
        ]
        return only
    if cpu.sha256 and gpu.sha256 and cpu.sha256 != gpu.sha256:
        note = ["merge: WARNING the CPU and GPU runs graded different versions of this submission"]
    else:
        note = []
    by_c = {t.nodeid: t for t in cpu.tests}
    by_g = {t.nodeid: t for t in gpu.tests}
    tests = []
    for nodeid in list(dict.fromkeys([*by_c, *by_g])):
        c, g = by_c.get(nodeid), by_g.get(nodeid)
        tests.append(_pick((c or g).device, c, g))  # type: ignore[union-attr]
    status = max(cpu.status, gpu.status, key=lambda s: SEVERITY.index(s) if s in SEVERITY else 0)
    return GradeResult(
        submission=cpu.submission,
        status=status,
        tests=tests,
        execution_time=cpu.execution_time + gpu.execution_time,
        sha256=cpu.sha256,
        fingerprint=f"{cpu.fingerprint}+{gpu.fingerprint}",
        device="merged",
        concepts={**gpu.concepts, **cpu.concepts},
        ignored=cpu.ignored,
        notes=[*note, *(f"cpu: {n}" for n in cpu.notes), *(f"gpu: {n}" for n in gpu.notes)],
        isolation={"cpu": cpu.isolation, "gpu": gpu.isolation},
    )


def run(args: argparse.Namespace) -> int:
    for d in (args.cpu, args.gpu):
        if not d.is_dir():
            raise CommandError(f"{d} is not a folder of results (the --out of a `cs336 grade` run)")
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(f"--out {args.out} exists and is not a folder; choose another --out")
    if args.out.resolve() in (args.cpu.resolve(), args.gpu.resolve()):
        raise CommandError(
            f"--out {args.out} is one of the runs being merged (their results would be overwritten); "
            "choose a new folder, e.g. --out final/"
        )
    names = sorted(
        {
            p.parent.name
            for d in (args.cpu, args.gpu)
            for p in d.glob("*/results.json")
            if not p.parent.name.startswith((".", "_"))
        }
    )
    if not names:
        raise CommandError(
            f"no */results.json in {args.cpu} or {args.gpu}; give two --out folders of `cs336 grade`"
        )
    for name in names:
        c = load(args.cpu / name) if (args.cpu / name / "results.json").is_file() else None
        g = load(args.gpu / name) if (args.gpu / name / "results.json").is_file() else None
        merged = merge_results(c, g)
        merged.write(args.out / name)
        pending = sum(t.outcome == "pending" for t in merged.tests)
        print(
            f"{name}: {merged.score:g} / {merged.max_score:g} [{merged.status}]"
            + (f", {pending} still pending" if pending else "")
        )
    write_gradebook(args.out)
    print(f"merged results in {args.out}/ (gradebook: {args.out / 'gradebook.csv'})")
    return 0
