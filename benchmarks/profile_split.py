"""Where a split run spends its time: cProfile of the judge and of every worker it starts.

    uv run python benchmarks/profile_split.py [--out DIR] [--top N] [--] PYTEST_ARGS...
    uv run python benchmarks/profile_split.py -- tests/test_tokenizer.py -k random_unicode

Runs pytest in this process as ``-p cs336_staff.grade.judge --split-insecure`` does (the reference in
a worker without a sandbox, the tests here), with this process under cProfile, and each worker under
cProfile too: the worker's boot line (``sandbox.BOOT``) is wrapped for this run only, so that a
worker writes its statistics every ``DUMP_EVERY`` requests (the judge ends a worker with SIGKILL,
which leaves no chance to write them at exit: the requests after a worker's last dump are not
counted). Writes ``judge.prof`` and ``worker-PID.prof`` under ``--out`` (read them with ``pstats``
or snakeviz) and prints the heaviest functions of each side by cumulative time.

No sandbox: the mirror and the sandbox's own costs are not in these figures (``grading_overhead.py``
has them all, without the breakdown); cProfile inflates Python-heavy code several times over, so
compare entries with each other, not with wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import glob
import os
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the checkout being measured, not this file's

#: Requests between two writes of a worker's statistics.
DUMP_EVERY = 20
#: What the workers' statistics are restricted to when printed (the line, the codec, the drivers).
WORKER_FOCUS = "cs336_worker|scenarios|posix|json"
#: What the judge's statistics are restricted to when printed.
JUDGE_FOCUS = "cs336_staff|posix|json"


def profiled_boot(boot: str, out: Path) -> str:
    """``boot`` (``sandbox.BOOT``: its last statement calls the worker's ``main``), with the worker's
    ``serve_one`` counted and the process profiled, statistics written atomically to ``out``."""
    setup, _, run = boot.rpartition("; ")
    return "\n".join(
        [
            setup,
            "import cProfile, os, cs336_worker.main as m",
            "profile, served, serve_one = cProfile.Profile(), [0], m.Worker.serve_one",
            "def counted(self):",
            "    more = serve_one(self)",
            "    served[0] += 1",
            f"    if served[0] % {DUMP_EVERY} == 0 or not more:",
            "        profile.disable()",
            f"        name = os.path.join({str(out)!r}, f'worker-{{os.getpid()}}.prof')",
            "        profile.dump_stats(name + '.part')",
            "        os.replace(name + '.part', name)",
            "        profile.enable()",
            "    return more",
            "m.Worker.serve_one = counted",
            "profile.enable()",
            run,
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the .prof files")
    parser.add_argument("--top", type=int, default=25, help="entries printed per side")
    parser.add_argument("pytest_args", nargs="*", help="what pytest runs (default: tests)")
    args = parser.parse_args()
    out = (args.out or Path(tempfile.mkdtemp(prefix="cs336-profile-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)

    import pytest

    from cs336_staff.grade import sandbox

    sandbox.BOOT = profiled_boot(sandbox.BOOT, out)
    judge = cProfile.Profile()
    judge.enable()
    status = pytest.main(
        [
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "cs336_staff.grade.judge",
            "--split-insecure",
            *(args.pytest_args or ["tests", "--ignore=tests/staff", "-m", "not gpu"]),
        ]
    )
    judge.disable()
    judge.dump_stats(out / "judge.prof")
    workers = sorted(glob.glob(str(out / "worker-*.prof")))
    print(f"\njudge: {out / 'judge.prof'}")
    pstats.Stats(str(out / "judge.prof")).sort_stats("cumulative").print_stats(
        JUDGE_FOCUS, args.top
    )
    if workers:
        print(f"workers ({len(workers)}): {', '.join(workers)}")
        pstats.Stats(*workers).sort_stats("cumulative").print_stats(WORKER_FOCUS, args.top)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
