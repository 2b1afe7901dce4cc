"""Regenerate the ``.npz`` snapshots from the reference, or check the committed ones still match.

    $ uv run cs336 snapshots            # rewrite fixtures/snapshots/ and fixtures/hidden/snapshots/
    $ uv run cs336 snapshots --check    # CI: fail, naming file and array, if any committed file is stale

Both run every test that uses the ``snapshot`` fixture (public and hidden; ``tests/staff/`` is
left out) with ``--snapshot-update`` and ``CS336_SNAPSHOT_DIR`` pointing at a scratch directory, so
nothing under ``fixtures/`` changes until every snapshot test has passed. Then ``--check``
compares each fresh file with the committed one array by array, and the update copies over only
the files whose arrays changed (unchanged files keep their bytes, which ``tests/snapshot.py``
writes deterministically).

Equality is exact (same names, dtypes, shapes and values, NaN equal to NaN): the check runs the
reference on the machine and torch build that generated the files, where the same code gives the
same bits. The tolerances students get live in the tests (``assert_match(..., rtol, atol)``), not
here. A failure still prints the largest difference, so staff can tell drift from a real change.

A committed file that no test writes any more is reported as an orphan (``--prune`` deletes it);
while some snapshot test is skipped (e.g. it needs a GPU) orphans are only warnings, because the
skipped test may be the one that writes them. Deliberately left out: partial regeneration of one
test file (run ``uv run pytest tests/test_<part>.py --snapshot-update`` for that).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from cs336_staff.session.runner import PytestRun, hide_installed, run_pytest

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT_DIRS = ("snapshots", "hidden/snapshots")  # relative to fixtures/ (or CS336_SNAPSHOT_DIR)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed files instead of rewriting them",
    )
    parser.add_argument(
        "--prune", action="store_true", help="also delete committed snapshots that no test writes"
    )
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)


def snapshot_files(base: Path) -> list[str]:
    """Every ``.npz`` under ``base``'s snapshot directories, as sorted posix paths relative to ``base``."""
    out = []
    for d in SNAPSHOT_DIRS:
        if (base / d).is_dir():
            out += [p.relative_to(base).as_posix() for p in (base / d).rglob("*.npz")]
    return sorted(out)


def regenerate(repo: Path, into: Path) -> PytestRun:
    """Run every snapshot test of ``repo`` in update mode, writing the files under ``into``."""
    args = ["-q", "--snapshot-update", "tests", "--ignore=tests/staff"]
    env = {"CS336_SNAPSHOT_DIR": str(into)}
    return run_pytest(repo, args, only_fixture="snapshot", env=env, hide=hide_installed(repo))


def compare_npz(committed: Path, fresh: Path) -> list[str]:
    """How ``committed`` differs from ``fresh``, one line per array (empty if identical)."""
    with np.load(committed, allow_pickle=False) as c, np.load(fresh, allow_pickle=False) as f:
        old, new = {k: c[k] for k in c.files}, {k: f[k] for k in f.files}
    problems = [
        f"array {k!r} is no longer written (the reference writes {sorted(new)})"
        for k in sorted(set(old) - set(new))
    ]
    problems += [
        f"array {k!r} is new (not in the committed file)" for k in sorted(set(new) - set(old))
    ]
    for k in sorted(set(old) & set(new)):
        a, b = old[k], new[k]
        if a.dtype != b.dtype or a.shape != b.shape:
            problems.append(
                f"array {k!r}: committed {a.dtype}{list(a.shape)}, reference now gives {b.dtype}{list(b.shape)}"
            )
        elif not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            bad = a != b
            if a.dtype.kind in "fc":
                bad &= ~(np.isnan(a) & np.isnan(b))
            where = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
            diff = ""
            if a.dtype.kind in "fciu":
                d = np.abs(a.astype(np.float64) - b.astype(np.float64))
                diff = f", max abs diff {float(np.nanmax(d)):.3g}"
            problems.append(
                f"array {k!r} differs at {int(bad.sum())} of {a.size} positions; first at {where}: "
                f"committed {a[where]!r}, reference now {b[where]!r}{diff}"
            )
    return problems


def compare_trees(committed: Path, fresh: Path) -> tuple[list[str], list[str], list[str]]:
    """(changed: "file: problem" lines, new files, orphaned files) between two snapshot trees."""
    old, new = set(snapshot_files(committed)), set(snapshot_files(fresh))
    changed = []
    for rel in sorted(old & new):
        changed += [f"{rel}: {p}" for p in compare_npz(committed / rel, fresh / rel)]
    return changed, sorted(new - old), sorted(old - new)


def _report_run(result: PytestRun) -> tuple[list[str], list[str]]:
    """(failures, skipped) among the snapshot tests of a run."""
    failures = [
        f"{t.nodeid}: {t.outcome}: {t.message}"
        for t in result.with_outcome("failed", "error", "xpassed")
    ]
    failures += [f"cannot collect {e['nodeid']}" for e in result.collect_errors]
    skipped = [t.nodeid for t in result.with_outcome("skipped", "xfailed")]
    return failures, skipped


def run(args: argparse.Namespace) -> int:
    start = time.monotonic()
    repo = Path(args.repo).resolve()
    fixtures = repo / "fixtures"
    scratch = Path(tempfile.mkdtemp(prefix="cs336-snapshots-"))
    try:
        result = regenerate(repo, scratch)
        failures, skipped = _report_run(result)
        n_tests = len(result.collected)
        if failures or (result.returncode not in (0, 5) and not result.tests):
            print(
                f"snapshots: {len(failures)} of {n_tests} snapshot tests fail on the reference; nothing compared or written:"
            )
            for f in failures or [result.tail()]:
                print(f"  {f}")
            return 1
        changed, new, orphans = compare_trees(fixtures, scratch)
        changed_files = sorted({c.split(": ", 1)[0] for c in changed})
        print(
            f"snapshots: {n_tests} snapshot tests wrote {len(snapshot_files(scratch))} files"
            + (
                f" ({len(skipped)} tests skipped: {', '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''})"
                if skipped
                else ""
            )
        )
        orphan_is_error = not skipped
        if args.check:
            for c in changed:
                print(f"  changed  fixtures/{c}")
            for n in new:
                print(f"  missing  fixtures/{n} is written by a test but not committed")
            for o in orphans:
                print(
                    f"  {'orphan' if orphan_is_error else 'warning'}   fixtures/{o} is committed but no test that ran writes it"
                )
            bad = bool(changed or new or (orphans and orphan_is_error))
            took = time.monotonic() - start
            if bad:
                print(
                    f"snapshots --check: FAILED in {took:.0f} s; if the reference changed on purpose, run `uv run cs336 snapshots`"
                )
                return 1
            print(
                f"snapshots --check: all {len(snapshot_files(scratch))} files match the reference exactly ({took:.0f} s)"
            )
            return 0
        for rel in [*changed_files, *new]:
            (fixtures / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(scratch / rel, fixtures / rel)
        print(
            f"snapshots: {len(changed_files)} files rewritten, {len(new)} created, "
            f"{len(snapshot_files(scratch)) - len(changed_files) - len(new)} unchanged"
        )
        for o in orphans:
            if args.prune and orphan_is_error:
                (fixtures / o).unlink()
                print(f"  pruned   fixtures/{o}")
            else:
                why = (
                    "pass --prune to delete it"
                    if orphan_is_error
                    else "kept: a skipped test may write it"
                )
                print(f"  orphan   fixtures/{o} is committed but no test wrote it ({why})")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
