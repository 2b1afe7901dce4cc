"""Bugs only the hidden tests catch: each must cost a student points that they notice.

A part module of ``cs336_staff/mutants/`` may list, beside its ``MUTANTS`` and ``CONTROLS``,
``HIDDEN_ONLY: list[HiddenOnly]``: realistic bugs that pass every public test and fail a hidden
one (other sizes, dtypes, inputs or configurations than the public twin tries). The zoo cannot
hold them (``mutants.py`` demands a public catch), and left unchecked they go unnoticed: issue 31
found hidden tests that were a bug's only catch at 0.05-0.35 points of 100, a loss a student
reads as rounding. ``cs336 audit --mutants`` runs each (``audit_hidden_only``) in a scratch copy
holding the hidden tree, against every public and hidden test file of its part's concept in
``rubric.toml`` and the public tests of the parts that use it (``cs336_staff/used_by.json``: the
training loop's), every test to the end, and passes it when

* every public test passes (one that fails catches it: it belongs in the zoo's ``MUTANTS``);
* every hidden test named in its ``hidden`` fails (each says which test it keeps honest);
* the hidden tests that fail cost at least ``NOTICEABLE`` percent of the assignment's points, with
  the points ``rubric.toml`` gives them (the run holds every test of the concept, so their shares
  are the ones grading gives). Below that, the verdict names the tests whose weight to raise;
* the part's hidden tests together hold at most ``MOST_HIDDEN`` of its points, so weights raised
  for the first rule cannot let hidden tests outweigh what a student sees.

Deliberately left out: points lost in other concepts (a hidden training test that also fails only
adds to the loss, so the check is a lower bound), and timing (a hung run is ``invalid``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from cs336_staff.audit.mutants import (
    CONTROL_TIMEOUT,
    REPO,
    Verdict,
    _failures,
    _hidden,
    _public,
    _zoo,
    run_with_hidden_tests,
)
from cs336_staff.mutants import HiddenOnly, Mutant
from cs336_staff.rubric import Rubric, find_rubric
from cs336_staff.session.runner import PytestRun
from cs336_staff.session.warm import KILLED, WarmPool

#: The least a hidden-only bug may cost, in percent of the assignment's points (1 point of 100).
#: Why 1: the grade a student reads is out of 100 and moves in whole points; a loss under one point
#: is rounding to them, and they never look for the bug (rubric.toml says how the weights meet it).
NOTICEABLE = 1.0
#: The most of a part's points its hidden tests may hold together: the public tests, which a student
#: runs, keep at least a third (rubric.toml says how the weights stay under it).
MOST_HIDDEN = 2 / 3
USED_BY = "cs336_staff/used_by.json"


def load_hidden_only(only: list[str] | None = None, repo: Path = REPO) -> list[tuple[str, Mutant]]:
    """(part, bug) for every hidden-only bug of ``cs336_staff.mutants``, filtered by ``only``; each
    gets its part's tests (``hidden_only_tests``)."""
    return [(p, replace(h, tests=hidden_only_tests(repo, p))) for p, h in _zoo(only, "HIDDEN_ONLY")]


def concept_files(repo: Path, concept: str) -> list[str]:
    """Every public and hidden test file (``tests/test_*.py``, ``tests/hidden/test_*.py``) whose
    tests ``rubric.toml`` gives to ``concept``."""
    rubric = Rubric.load(find_rubric(Path(repo)))
    out = []
    for path in sorted(
        [*Path(repo).glob("tests/test_*.py"), *Path(repo).glob("tests/hidden/test_*.py")]
    ):
        rel = path.relative_to(repo).as_posix()
        probe = f"{rel}::test"
        if not rubric.uncovered([probe]) and rubric.resolve([probe])[probe].concept == concept:
            out.append(rel)
    return out


def hidden_only_tests(repo: Path, part: str) -> tuple[str, ...]:
    """What a hidden-only bug of ``part`` runs: its concept's public and hidden test files, and the
    public test files that use the part (``USED_BY``)."""
    used_by_file = Path(repo) / USED_BY
    used_by = json.loads(used_by_file.read_text()).get(part, []) if used_by_file.is_file() else []
    files = set(concept_files(repo, part)) | {t for t in used_by if _public(t)}
    return tuple(sorted(f for f in files if (Path(repo) / f).is_file()))


def _names(nodeid: str, test: str) -> bool:
    """Whether ``test`` (a node id, or a prefix of file or function) names ``nodeid``."""
    return nodeid == test or nodeid.startswith((test + "::", test + "["))


def hidden_only_verdict(
    part: str, bug: HiddenOnly, run: PytestRun, rubric: Rubric, seconds: float
) -> Verdict:
    """Classify a finished run of ``bug``'s tests: caught (by hidden tests alone, for at least
    ``NOTICEABLE`` percent of the points), public (a public test catches it), survived, cheap, heavy
    (the part's hidden tests hold more than ``MOST_HIDDEN`` of it) or invalid."""
    if run.foreign_modules:
        return Verdict(
            part,
            bug,
            "invalid",
            note="the run imported code from outside its scratch copy, so it tested nothing: "
            + "; ".join(run.foreign_modules),
            seconds=seconds,
        )
    if run.returncode == KILLED or (run.returncode not in (0, 1) and not run.tests):
        return Verdict(
            part,
            bug,
            "invalid",
            note=f"the run hung or could not start (exit {run.returncode}):\n{run.tail(8)}",
            seconds=seconds,
        )
    failures = _failures(run)
    public = [f"{n}: {m}" for n, m in failures if not _hidden(n)]
    if public:
        return Verdict(
            part,
            bug,
            "public",
            public,
            note="a public test catches it: it is an ordinary mutant, move it to MUTANTS",
            seconds=seconds,
        )
    failed = {n: m for n, m in failures if _hidden(n)}
    missed = [t for t in bug.hidden if not any(_names(n, t) for n in failed)]
    # every test of the concept is in the run, so the rubric shares its points as grading does
    items = rubric.resolve([n for n in run.tests if _concept(rubric, n) == part])
    total = sum(c.points or 0.0 for c in rubric.concepts.values()) or 1.0
    points = {n: 100 * items[n].points / total if n in items else 0.0 for n in failed}
    share = sum(points.values())
    lines = [f"{n} ({points[n]:.2f} of 100): {m}" for n, m in failed.items()]
    if missed:
        return Verdict(
            part,
            bug,
            "survived",
            lines,
            note=f"the hidden tests {', '.join(missed)} pass: they do not catch it",
            seconds=seconds,
        )
    cost = f"costs {share:.2f} points of 100 in grading"
    part_points = sum(item.points for item in items.values())
    hidden_points = sum(item.points for n, item in items.items() if _hidden(n))
    if part_points and hidden_points / part_points > MOST_HIDDEN:
        return Verdict(
            part,
            bug,
            "heavy",
            lines,
            note=f"{cost}, but the hidden tests hold {hidden_points / part_points:.0%} of {part} "
            f"(at most {MOST_HIDDEN:.0%}): lower the weights in rubric.toml, or give the bug a public "
            "twin and move it to MUTANTS",
            seconds=seconds,
        )
    if share < NOTICEABLE:
        return Verdict(
            part,
            bug,
            "cheap",
            lines,
            note=f"{cost}, under the {NOTICEABLE:g} a student notices: raise the weight of "
            f"{', '.join(bug.hidden)} in rubric.toml",
            seconds=seconds,
        )
    return Verdict(part, bug, "caught", lines, note=cost, seconds=seconds)


def _concept(rubric: Rubric, nodeid: str) -> str | None:
    return None if rubric.uncovered([nodeid]) else rubric.resolve([nodeid])[nodeid].concept


def audit_hidden_only(
    repo: Path,
    bugs: list[tuple[str, Mutant]],
    *,
    jobs: int = 2,
    timeout: float = CONTROL_TIMEOUT,
    echo=print,
    pool: WarmPool | None = None,
) -> list[Verdict]:
    """Run each hidden-only bug against its tests (public and hidden, every one to the end) in a
    scratch copy holding the hidden tree: one verdict per bug. ``pool`` as in ``mutants.audit``."""
    rubric = Rubric.load(find_rubric(Path(repo).resolve()))

    def judge(part: str, bug: Mutant, run: PytestRun, seconds: float) -> Verdict:
        assert isinstance(bug, HiddenOnly)  # bugs holds HIDDEN_ONLY entries only
        return hidden_only_verdict(part, bug, run, rubric, seconds)

    return run_with_hidden_tests(
        repo,
        bugs,
        judge,
        prefix="cs336-hidden-only-",
        jobs=jobs,
        timeout=timeout,
        echo=echo,
        pool=pool,
    )


def summary(verdicts: list[Verdict], seconds: float) -> str:
    """The last line of the hidden-only check."""
    ok = sum(v.ok for v in verdicts)
    return (
        f"hidden-only: {ok} of {len(verdicts)} pass the public tests and cost at least "
        f"{NOTICEABLE:g} point of 100 in hidden tests, which hold at most {MOST_HIDDEN:.0%} of a "
        f"part ({seconds:.0f} s)"
    )
