"""CPU seconds of the rules screen that ``cs336 grade`` runs per submission beside the judge.

    uv run python benchmarks/rules_screen.py [--repeats N] [--profile]

``grade_one``'s ``screen`` runs ``delegation.check_submission`` on the submission's files and
``delegation.read_staff_tables`` on the staff tree. This times both on the reference packaged as a
submission (``build_example``, read by ``read_submission`` as ``grade_one`` reads it): *cold*, the
first screen of this process (what a batch's process pays once: the handout and the staff's tables
are built then), and *warm*, the next submissions of the same process: the reference with one file
changed, the reference again, and the reference with every file that has solution regions changed
(as a student's are: each such file is new to the process, read in full). CPU time of this process (``time.process_time``); ``--profile``
prints cProfile's heaviest functions of the cold and the warm screens (cProfile inflates this
Python-heavy code two to three times: compare entries with each other).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the checkout being measured, not this file's

from cs336_staff.grade import delegation  # noqa: E402
from cs336_staff.grade.example import build_example  # noqa: E402
from cs336_staff.grade.intake import read_submission  # noqa: E402
from cs336_staff.markers import has_markers  # noqa: E402
from tests.rules import Report  # noqa: E402

ROOT = Path(os.getcwd())
#: The file the second submission changes, and the line it adds.
CHANGED, ADDED = "cs336_assignment/__init__.py", b"\nSCREEN_BENCHMARK = 1\n"


def screen(files: dict[str, bytes]) -> Report:
    """What ``grade_one``'s ``screen`` runs."""
    report = delegation.check_submission(files, ROOT)
    delegation.read_staff_tables(ROOT)
    return report


def timed(files: dict[str, bytes], profile: cProfile.Profile | None) -> tuple[float, Report]:
    start = time.process_time()
    if profile is not None:
        profile.enable()
    report = screen(files)
    if profile is not None:
        profile.disable()
    return time.process_time() - start, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="warm screens of each submission")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        zipped, _ = build_example(ROOT, Path(tmp))
        intake = read_submission(zipped, staff_adapters=ROOT / "adapters.py")
    if intake.error is not None:
        sys.exit(f"the reference could not be read as a submission: {intake.error}")
    files = intake.files
    changed = {**files, CHANGED: files.get(CHANGED, b"") + ADDED}
    regions = [
        r for r, data in files.items() if r.endswith(".py") and has_markers(data.decode(), r)
    ]
    cold_profile = cProfile.Profile() if args.profile else None
    warm_profile = cProfile.Profile() if args.profile else None
    cold, report = timed(files, cold_profile)
    warm_changed = [timed(changed, warm_profile)[0] for _ in range(args.repeats)]
    warm_same = [timed(files, warm_profile)[0] for _ in range(args.repeats)]
    # a new text for each file with regions, each time: nothing of them is kept from before
    warm_student = [
        timed({**files, **{r: files[r] + ADDED + b"#%d\n" % i for r in regions}}, warm_profile)[0]
        for i in range(args.repeats)
    ]
    print(
        f"rules screen of the reference ({len(files)} files; {len(report.violations)} violations, "
        f"{len(report.suspicious)} suspicious, {len(report.errors)} errors): cold {cold:.3f} CPU-s, "
        f"warm with {CHANGED} changed {min(warm_changed):.3f} (median "
        f"{sorted(warm_changed)[len(warm_changed) // 2]:.3f}), warm unchanged {min(warm_same):.3f} "
        f"(median {sorted(warm_same)[len(warm_same) // 2]:.3f}), warm with the {len(regions)} files "
        f"with solution regions changed {min(warm_student):.3f} "
        f"(median {sorted(warm_student)[len(warm_student) // 2]:.3f})"
    )
    for name, profile in (("cold", cold_profile), ("warm", warm_profile)):
        if profile is not None:
            print(f"\n--- {name} screen(s), by cumulative time")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
