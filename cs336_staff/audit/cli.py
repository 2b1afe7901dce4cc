"""``cs336 audit``: the staff checks that the public tests grade what they claim (see ``__init__.py``).

    $ uv run cs336 audit                  # the bug zoo, then the garbage check; fails if either does
    $ uv run cs336 audit --only optim     # one part (a module of cs336_staff/mutants/), mutant, control or graded target
    $ uv run cs336 audit --jobs 2 --full  # two at a time; list every catching test, not just the first
    $ uv run cs336 audit --dry-run        # only check that every mutant applies (no tests run)
    $ uv run cs336 audit --mutants        # only the bug zoo (mutants.py, hidden_only.py)
    $ uv run cs336 audit --garbage        # only the garbage check (garbage_check.py)
    $ uv run cs336 audit --agreement      # instead: one process and split agree on every public test (agreement.py)
    $ uv run cs336 audit --write-used-by  # rewrite cs336_staff/used_by.json from the zoo's baseline (part_reach.py)

The bug zoo (``cs336_staff/audit/mutants.py``): every realistic mutant of ``cs336_staff/mutants/``
must fail a public test, every control (a correct rewrite) must pass its part's public and hidden tests, and no part's tests may execute another part's solution functions (the
training loop's excepted; ``part_reach.py``). Every hidden-only bug (``hidden_only.py``) must pass the
public tests and fail hidden ones that cost at least ``hidden_only.NOTICEABLE`` points of 100. The garbage check (``cs336_staff/audit/garbage_check.py``):
zero or noise garbage of a graded function must fail every test its stub fails. SIGINT and SIGTERM
stop the children and delete the scratch copies.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.audit import garbage_check, hidden_only, mutants
from cs336_staff.session.warm import WarmPool


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="mutants run at once (default: %(default)s)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PART",
        help="only this part (e.g. optim) or mutant name; repeatable",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="run every named test instead of stopping at the first failure (-x); with --agreement, "
        "each implementation alone on every test of its part (hours), not only the tests that enter "
        "what it changes",
    )
    parser.add_argument(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help="skip the run of the named tests on the unmutated reference",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds before a mutant's run is killed (default: {mutants.MUTANT_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="only check that every mutant applies and parses; run no tests",
    )
    parser.add_argument(
        "--write-used-by",
        action="store_true",
        help="write what the baseline measured into cs336_staff/used_by.json (the parts' 'Also used by') instead of checking it",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--garbage",
        action="store_true",
        help="only the garbage check (garbage_check.py), not the bug zoo",
    )
    which.add_argument(
        "--mutants", action="store_true", help="only the bug zoo, not the garbage check"
    )
    which.add_argument(
        "--agreement",
        action="store_true",
        help="instead: every public test ends the same in one process and split, on the reference, the "
        "zoo, garbage and the corpus (agreement.py; --timeout is per run, default 900)",
    )
    parser.add_argument("--repo", type=Path, default=mutants.REPO, help=argparse.SUPPRESS)


def _terminate(signum, frame):  # noqa: ARG001
    """Unwind through the checks' cleanup, like Ctrl-C does, and let no later signal cut it short.

    ``timeout`` signals the whole process group and ``uv run`` forwards the signal once more: a second
    exception raised inside the first one's cleanup can leave a future's lock held, and the thread
    pool then waits for ever on its worker (seen: an audit stuck 20 minutes after ``timeout``).
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _terminable() -> Iterator[None]:
    """SIGTERM unwinds through the checks' cleanup (``_terminate``); both signals' handlers are put back."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(args: argparse.Namespace) -> int:
    try:
        with _terminable():
            return _run(args)
    except KeyboardInterrupt:
        print("audit: interrupted; the scratch copies are deleted")
        return 130


def _run(args: argparse.Namespace) -> int:
    if args.agreement:
        from cs336_staff.audit import agreement

        return agreement.run(args)
    if args.garbage:
        return garbage_check.run(args)
    if args.mutants or args.dry_run or args.write_used_by:
        return run_mutants(args)
    # both: --only may name a part, a mutant or a garbage target; each check takes what it knows
    only = set(args.only)
    zoo = (
        mutants.load_mutants()
        + mutants.load_controls(repo=args.repo)
        + hidden_only.load_hidden_only(repo=args.repo)
    )
    mutant_names = {p for p, _ in zoo} | {m.name for _, m in zoo}
    target_names = {t.part for t in garbage_check.targets(args.repo)} | {
        t.name for t in garbage_check.targets(args.repo)
    }
    unknown = sorted(only - mutant_names - target_names)
    if unknown:
        raise CommandError(f"--only {', '.join(unknown)} names no part, mutant or graded target")
    codes = []
    if not only or only & mutant_names:
        codes.append(
            run_mutants(argparse.Namespace(**{**vars(args), "only": sorted(only & mutant_names)}))
        )
    if not only or only & target_names:
        codes.append(
            garbage_check.run(
                argparse.Namespace(**{**vars(args), "only": sorted(only & target_names)})
            )
        )
    return max(codes)


def run_mutants(args: argparse.Namespace) -> int:
    """The bug zoo alone (``--mutants``): its mutants, then its controls, then its hidden-only bugs."""
    start = time.monotonic()
    zoo = mutants.load_mutants(args.only)
    controls = mutants.load_controls(args.only, repo=args.repo)
    bugs = hidden_only.load_hidden_only(args.only, repo=args.repo)
    parts = sorted({p for p, _ in zoo + controls + bugs})
    if args.dry_run:
        problems = mutants.applicability(args.repo, zoo)
        for line in problems:
            print(line)
        print(f"audit --dry-run: {len(zoo) - len(problems)} of {len(zoo)} mutants apply")
        control_problems = mutants.applicability(args.repo, controls)
        for line in control_problems:
            print(f"control {line}")
        print(
            f"audit --dry-run: {len(controls) - len(control_problems)} of {len(controls)} controls apply"
        )
        bug_problems = mutants.applicability(args.repo, bugs)
        for line in bug_problems:
            print(f"hidden-only {line}")
        print(
            f"audit --dry-run: {len(bugs) - len(bug_problems)} of {len(bugs)} hidden-only bugs apply"
        )
        return 1 if problems or control_problems or bug_problems else 0
    print(
        f"audit: {len(zoo)} mutants, {len(controls)} controls and {len(bugs)} hidden-only bugs of "
        f"{len(parts)} parts ({', '.join(parts) or 'none'}), {args.jobs} jobs, public tests only "
        "(controls and hidden-only bugs: public and hidden)",
        flush=True,
    )
    if not zoo and not controls and not bugs:
        print("caught 0 of 0")
        print("audit: no mutants to audit; write cs336_staff/mutants/<part>.py")
        return 1
    verdicts: list[mutants.Verdict] = []
    baseline_failures: list[str] = []
    control_verdicts: list[mutants.Verdict] = []
    control_seconds = 0.0
    bug_verdicts: list[mutants.Verdict] = []
    bug_seconds = 0.0
    try:
        with _terminable(), WarmPool() as pool:
            if zoo:
                verdicts, baseline_failures = mutants.audit(
                    args.repo,
                    zoo,
                    jobs=args.jobs,
                    full=args.full,
                    baseline=args.baseline,
                    timeout=args.timeout or mutants.MUTANT_TIMEOUT,
                    echo=lambda line: print(line, flush=True),
                    pool=pool,
                    write_used_by=args.write_used_by,
                )
            if controls:
                control_start = time.monotonic()
                control_verdicts = mutants.audit_controls(
                    args.repo,
                    controls,
                    jobs=args.jobs,
                    timeout=args.timeout or mutants.CONTROL_TIMEOUT,
                    echo=lambda line: print(line, flush=True),
                    pool=pool,
                )
                control_seconds = time.monotonic() - control_start
            if bugs:
                bug_start = time.monotonic()
                bug_verdicts = hidden_only.audit_hidden_only(
                    args.repo,
                    bugs,
                    jobs=args.jobs,
                    timeout=args.timeout or mutants.CONTROL_TIMEOUT,
                    echo=lambda line: print(line, flush=True),
                    pool=pool,
                )
                bug_seconds = time.monotonic() - bug_start
    except KeyboardInterrupt:
        print("audit: interrupted; the scratch copies are deleted")
        return 130
    for f in baseline_failures:
        if f.startswith(mutants.CROSS_PART):
            print(f"cross-part: {f.removeprefix(mutants.CROSS_PART)}")
        elif f.startswith(mutants.USED_BY):
            print(f"used-by: {f.removeprefix(mutants.USED_BY)}")
        else:
            print(f"baseline: fails without any mutant: {f}")
    by_status: dict[str, list[str]] = {}
    for v in verdicts:
        by_status.setdefault(v.status, []).append(v.mutant.name)
    for status in ("survived", "invalid", "inconclusive"):
        if by_status.get(status):
            print(f"audit: {status}: {', '.join(by_status[status])}")
    for v in control_verdicts:
        if not v.ok:
            for line in v.caught_by or [f"control {v.mutant.name} {v.status}: {v.note}"]:
                print(f"audit: {line}")
    for v in bug_verdicts:
        if not v.ok:
            print(f"audit: hidden-only {v.mutant.name} {v.status}: {v.note.splitlines()[0]}")
    caught = len(by_status.get("caught", []))
    passed = sum(v.ok for v in control_verdicts)
    ok = (
        caught == len(verdicts)
        and not baseline_failures
        and passed == len(control_verdicts)
        and all(v.ok for v in bug_verdicts)
    )
    print(f"audit: {'passed' if ok else 'FAILED'} in {time.monotonic() - start:.0f} s")
    if zoo:
        print(f"caught {caught} of {len(verdicts)}")
    if controls:
        print(
            f"controls: {passed} of {len(control_verdicts)} pass "
            f"({control_seconds:.0f} s, {control_seconds / len(controls):.1f} s per control)"
        )
    if bugs:
        print(hidden_only.summary(bug_verdicts, bug_seconds))
    return 0 if ok else 1
