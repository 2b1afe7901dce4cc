"""The cost of one judge/worker round trip, measured in one process: wall time and each side's CPU time.

Starts one worker on this checkout's reference without a sandbox (as ``--split-insecure`` does) and
times two loops against it:

* ``ping``: a request that does nothing in the worker (the line's own cost: frames and codec);
* ``drive``: the optimizer tests' driver (``student_trajectory``) for one AdamW step on the default
  problem, beside the same call made in this process (``local``): what one driver call costs over the
  work it does.

CPU seconds per round trip (the judge's ``time.process_time``, the worker's from ``psutil``) hardly
depend on what else the machine runs, unlike wall time: compare two checkouts by them, in the same
minutes. Run it from the checkout to measure (it imports ``cs336_staff`` from the current folder)::

    uv run python benchmarks/round_trip.py [--trips 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the checkout being measured, not this file's

DEFAULT_TRIPS = 2000  # round trips per timed loop
DEFAULT_ROUNDS = 5  # timed loops per kind (the median and the best are reported)
WARMUP_TRIPS = 200  # untimed round trips first (imports, first allocations)


def start_remote(staff: Path):
    """A ``Remote`` whose worker runs this checkout's reference without a sandbox."""
    from cs336_staff.grade.remote import Remote
    from cs336_staff.grade.sandbox import stage, start_worker
    from cs336_staff.grade.spec import JudgeSpec, scratch_folders, worker_preload

    base = Path(tempfile.mkdtemp(prefix="cs336-round-trip-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)  # the staged tree, when the run ends
    root, scratch = base / "root", base / "scratch"
    root.mkdir()
    scratch_folders(scratch)
    files = {
        p.relative_to(staff).as_posix(): p.read_bytes()
        for p in [staff / "adapters.py", *sorted((staff / "cs336_assignment").rglob("*.py"))]
        if "__pycache__" not in p.parts
    }
    stage(root, staff, files)
    spec = JudgeSpec(
        root=root,
        scratch=scratch,
        staff_root=staff,
        results=base / "results.jsonl",
        preload=worker_preload(staff),
        insecure=True,
        tier="none",
    )
    return Remote(lambda: start_worker(spec, None))


def timed(remote, loop, trips: int) -> tuple[float, float, float]:
    """Wall, judge CPU and worker CPU seconds per round trip of ``loop(trips)``."""
    import psutil

    worker = psutil.Process(remote.worker.proc.pid)
    w0, j0, c0 = time.perf_counter(), time.process_time(), sum(worker.cpu_times()[:2])
    loop(trips)
    w1, j1, c1 = time.perf_counter(), time.process_time(), sum(worker.cpu_times()[:2])
    return (w1 - w0) / trips, (j1 - j0) / trips, (c1 - c0) / trips


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=DEFAULT_TRIPS)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    args = parser.parse_args()

    import torch

    import tests.boundary
    from cs336_staff.worker import codec

    codec.use_data_types(tests.boundary.DATA_TYPES)
    remote = start_remote(Path.cwd().resolve())
    remote.start()
    from tests.scenarios import optim

    problem = optim.Problem.make(0, 1, torch.float32)
    args_of_one_step = ("adamw", problem, {"lr": 0.01, "weight_decay": 0.1}, 1, {1})

    def ping(n: int) -> None:
        for _ in range(n):
            remote._request({"op": "ping"}, [], {})

    def drive(n: int) -> None:
        for _ in range(n):
            remote.drive("tests.scenarios.optim:student_trajectory", args_of_one_step, {})

    def local(n: int) -> None:  # the same driver in this process: the work without the line
        for _ in range(n):
            optim.student_trajectory(*args_of_one_step)

    print(
        f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.trips} round trips each"
    )
    for name, loop in (("ping", ping), ("drive", drive), ("local", local)):
        loop(WARMUP_TRIPS)
        runs = [timed(remote, loop, args.trips) for _ in range(args.rounds)]
        wall, judge, worker = ([r[i] * 1e3 for r in runs] for i in range(3))
        print(
            f"{name}: wall {statistics.median(wall):.3f} ms (best {min(wall):.3f}), CPU judge "
            f"{statistics.median(judge):.3f} ms, worker {statistics.median(worker):.3f} ms per round trip"
        )
    remote.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
