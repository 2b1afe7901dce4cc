"""Batch scaling: throughput of `--jobs 2` over `--jobs 1` on the same submissions (target >= 1.7x).

    uv run python benchmarks/batch_scaling.py [--submissions 4] [--real]

By default the submissions are copies of the tiny synthetic staff repo's good submission
(``cs336_staff/grade/testing.py``), so the figure measures the grader's own parallelism, not
the suite; ``--real`` grades copies of the reference against the real suite instead (minutes).
Prints both wall times and the speed-up; no absolute assertion.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cs336_staff.grade.batch import run_batch  # noqa: E402
from cs336_staff.grade.example import build_example  # noqa: E402
from cs336_staff.grade.grader import make_plan  # noqa: E402
from cs336_staff.grade.testing import make_staff_repo, make_zip  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submissions", type=int, default=4)
    ap.add_argument(
        "--real", action="store_true", help="grade the reference against the real suite"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        root = ROOT if args.real else make_staff_repo(tmp / "repo")
        subs = tmp / "subs"
        subs.mkdir()
        if args.real:
            src, _ = build_example(ROOT, tmp / "ex")
            for i in range(args.submissions):
                (subs / f"s{i}.zip").write_bytes(src.read_bytes())
        else:
            for i in range(args.submissions):
                make_zip(subs / f"s{i}.zip", {})
        paths = sorted(subs.glob("*.zip"))
        times = {}
        for jobs in (1, 2):
            plan = make_plan(root, jobs=jobs, cache_dir=tmp / ".cache", warn=lambda m: None)
            t = time.perf_counter()
            run_batch(paths, tmp / f"out{jobs}", plan, jobs=jobs, progress=False, force=True)
            times[jobs] = time.perf_counter() - t
        print(
            f"{len(paths)} submissions: --jobs 1 {times[1]:.1f} s, --jobs 2 {times[2]:.1f} s, "
            f"speed-up {times[1] / times[2]:.2f}x (target >= 1.7x)"
        )


if __name__ == "__main__":
    main()
