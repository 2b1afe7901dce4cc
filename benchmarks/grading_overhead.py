"""Grading overhead: one submission's `cs336 grade` time over the raw `pytest` time on the same tree.

    uv run python benchmarks/grading_overhead.py [--repeats 1] [--one-judge-too]

Both runs use the same tests against the reference: the raw one is `pytest tests --ignore
tests/staff -m "not gpu"` in this tree, one process; the graded one is the reference packaged as a
submission and graded the way every submission is (intake, staging, the judge process running the
tests, the bubblewrap-sandboxed worker answering every adapter and scenario call over the pipe,
hidden tests in a fresh worker, in a judge of their own running beside the visible tests' where
two cores are free; the test collection is cached beforehand, as it is once per batch).
``--one-judge-too`` also grades with every test in one judge, which shows the per-call cost alone.
Each of ``--repeats`` rounds runs the raw, the graded and the one-judge run in turn (a change of
load touches each alike) and prints every time; the ratios take each one's best. Prints both times and their ratio (targets: <= 1.5 with the default judges, issue 12; <= 1.1 with one
judge, issue 28), and the core-seconds each took (user + system CPU of every process it ran, the
sandboxed workers included where a cgroup can count them: ``CpuMeter``; what a batch pays per
submission whatever the cores); no absolute assertion: the machine's load decides the
seconds, the ratio is what matters.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The raw run: the same tests in one pytest process, no grading.
RAW = [
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "tests",
    "--ignore=tests/staff",
]
RAW += ["-m", "not gpu"]
#: As a student's run (and `.ci/run`, and the judge): bytecode written and read, pytest's rewritten tests too.
RAW_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
sys.path.insert(0, str(ROOT))

from cs336_staff.grade.example import build_example  # noqa: E402
from cs336_staff.grade.grader import grade_one, make_plan  # noqa: E402


class CpuMeter:
    """CPU seconds (user + system) of every process this one starts, read before and after a run.

    Grading's sandboxed workers are killed by their judge, never waited for by a parent that counts
    them, so ``RUSAGE_CHILDREN`` leaves out every worker (measured 2026-11-28: 19-23 core-s by
    rusage against 43-50 by a cgroup for the same one-judge grading). Where this process may make a
    cgroup v1 ``cpuacct`` group (root on this VM), it moves itself into one of its own and reads the
    group's usage, which counts every process in it however it ends; elsewhere it falls back to
    rusage and says so.
    """

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.group: Path | None = None
        try:
            group = self.ROOT / f"grading-overhead-{os.getpid()}"
            group.mkdir()
            (group / "cgroup.procs").write_text(str(os.getpid()))
            self.group = group
        except OSError:
            pass
        self.how = "cgroup" if self.group is not None else "rusage, sandboxed workers not counted"

    def read(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def close(self) -> None:
        if self.group is not None:
            with contextlib.suppress(OSError):
                (self.ROOT / "cgroup.procs").write_text(str(os.getpid()))
                self.group.rmdir()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--one-judge-too",
        action="store_true",
        help="also grade with every test in one judge (the visible and hidden tests one after the other)",
    )
    args = ap.parse_args()
    meter = CpuMeter()
    core_seconds = meter.read
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        # collection cached, as in a batch
        plan = make_plan(ROOT, cache_dir=out / ".cache", warn=lambda m: None)
        sub, _ = build_example(ROOT, out / "_example")
        # every test in one judge: the per-call cost alone
        one = dataclasses.replace(plan, judges=1)
        runs: dict[str, list[tuple[float, float]]] = {"raw": [], "graded": [], "one": []}

        def timed(kind: str, run: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            t, c = time.perf_counter(), core_seconds()
            result = run(*args, **kwargs)
            runs[kind].append((time.perf_counter() - t, core_seconds() - c))
            return result

        row: dict[str, Any] = {}
        # each repeat runs all three in turn, so a change of load touches each alike; each one's best counts
        for i in range(args.repeats):
            timed("raw", subprocess.run, RAW, cwd=ROOT, capture_output=True, env=RAW_ENV)
            row = timed("graded", grade_one, sub, f"run{i}", out, plan, force=True)
            if args.one_judge_too:
                timed("one", grade_one, sub, f"one{i}", out, one, force=True)
        for kind, times in runs.items():
            if len(times) > 1:
                print(f"{kind}: " + ", ".join(f"{w:.1f} s ({c:.1f} core-s)" for w, c in times))
        (r, r_cpu), (g, g_cpu) = min(runs["raw"]), min(runs["graded"])
        print(
            f"raw pytest: {r:.1f} s ({r_cpu:.1f} core-s)   cs336 grade (one submission): {g:.1f} s "
            f"({g_cpu:.1f} core-s)   overhead ratio: {g / r:.2f} (target <= 1.5); "
            f"score {row['score']}/{row['max_score']}"
        )
        if runs["one"]:
            g1, c1 = min(runs["one"])
            print(
                f"one judge: {g1:.1f} s ({c1:.1f} core-s)   overhead ratio: {g1 / r:.2f} (target <= 1.1)"
            )
    print(f"core-s: {meter.how}")
    meter.close()


if __name__ == "__main__":
    main()
