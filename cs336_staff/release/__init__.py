"""Generate the student handout from the reference repository, or prove a fresh one is right.

    $ uv run cs336 release handout/            # write the handout (see build.py for what goes in)
    $ uv run cs336 release handout/ --force    # replace a previous handout there
    $ uv run cs336 release --check             # build in a scratch dir and run every check (CI)

Every ``# BEGIN SOLUTION`` / ``# END SOLUTION`` region of ``cs336_assignment/`` becomes
``raise NotImplementedError("Implement <function> in <file>")``; hidden tests and fixtures, staff
tooling, benchmarks and staff-only files stay out. ``--check`` proves that the handout imports and
lints clean, that every public test fails with NotImplementedError against the stubs and passes
with the reference dropped in, and that no solution statement leaks (see check.py). Marker
mistakes fail with file and line before anything is written.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.markers import MarkerError
from cs336_staff.release.build import build
from cs336_staff.release.results import Handout, OutDirError, ReleaseError

REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out_dir", nargs="?", type=Path, help="where to write the handout (with --check: optional)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="build the handout (in a scratch dir unless OUT_DIR is given) and check it",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace OUT_DIR if it exists and is not empty (its contents are deleted)",
    )
    parser.add_argument(
        "--no-lock",
        dest="lock",
        action="store_false",
        help="leave uv.lock out instead of pruning it offline with uv",
    )
    parser.add_argument(
        "--keep", action="store_true", help="with --check: keep the scratch trees the tests ran in"
    )
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)


def _summary(h: Handout) -> str:
    n = sum(len(r) for r in h.regions.values())
    return f"{len(h.files)} files, {n} solution regions stubbed in {len(h.regions)} files"


def run(args: argparse.Namespace) -> int:
    start = time.monotonic()
    if args.out_dir is None and not args.check:
        raise CommandError("give OUT_DIR (e.g. `uv run cs336 release handout/`), or --check")
    scratch = None
    try:
        if args.out_dir is None:
            scratch = Path(tempfile.mkdtemp(prefix="cs336-handout-"))
            out = scratch / "handout"
        else:
            out = args.out_dir
        handout = build(args.repo, out, force=args.force, lock=args.lock)
        print(
            f"release: wrote {out if scratch is None else 'a scratch handout'} ({_summary(handout)})"
        )
        for w in handout.warnings:
            print(f"release: warning: {w}")
        if not args.check:
            return 0
        from cs336_staff.release.check import check

        checks = check(args.repo, handout, keep=args.keep)
        for c in checks:
            print(c.render())
        failed = [c.name for c in checks if not c.ok]
        took = time.monotonic() - start
        if failed:
            print(f"release --check: FAILED ({', '.join(failed)}) in {took:.0f} s")
            return 1
        print(f"release --check: all {len(checks)} checks passed in {took:.0f} s")
        return 0
    except (MarkerError, ReleaseError) as e:
        raise CommandError(e, status=2 if isinstance(e, OutDirError) else 1) from None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
