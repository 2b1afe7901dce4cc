"""The bug zoo: prove that the public tests catch the mistakes students actually make.

``cs336 audit --mutants`` (``cli.py``) runs every mutant of ``cs336_staff/mutants/`` through
``audit`` here; ``cs336 audit`` runs it before the garbage check (``garbage_check.py``).

For each ``Mutant`` (a small patch of the reference, see ``cs336_staff/mutants/__init__.py``) the
audit patches a scratch copy of the repository's public tree (the files the handout ships:
``cs336_assignment/``, ``adapters.py``, public ``tests/`` and ``fixtures/``, plus
``pyproject.toml``), runs ``pytest <mutant.tests> -x -q`` there, and restores the file. Each of the
``--jobs`` workers owns one scratch copy.

The runs are forked from a warm server (``cs336_staff/session/warm.py``) that imported torch, pytest and
hypothesis and took torch's slow lazy imports once, so a mutant costs its tests, not a Python
start-up: the whole zoo runs in a few minutes on two cores instead of most of an hour. The server
never imports the code under test; each child drops the editable install's path to this
repository from ``sys.path``, starts in the scratch copy, and reports any ``cs336_assignment`` or
``adapters`` module it imported from elsewhere (which makes the mutant ``invalid``: the run did
not test the scratch copy). A child that outlives ``--timeout`` is killed with everything it spawned.

The baseline is one run of every public test file the mutants name, on the unmutated copy, in
parallel with the first mutants: a test that fails there does not count as catching anything.
It also records which solution functions each test executes (``reach_probe.py``), and the audit
fails when a test of one part executes a solution function of another (``part_reach.py``; only
the training loop combines parts): then a bug in one part would cost points in another. The same
measurement is the parts' "Also used by" (``cs336_staff/used_by.json``, which ``cs336 parts
--write`` puts in the handout's README): the audit fails when the file disagrees, and
``--write-used-by`` rewrites it. No test
that never executes a function can see a mutant of it, so this stands for running every mutant
against the whole suite, at the cost of one profiled baseline run.

The report gives, per mutant, the tests that caught it and the first line of each failure message
(what a student with that bug would read), and ends with ``caught N of M``. The audit fails
(non-zero exit) if any mutant survives, does not apply (its ``old`` code no longer matches exactly
once in its function), does not parse, names no public test, or if a named test already fails on
the unmutated reference. ``applicability`` (``--dry-run``) runs those checks alone, without tests. SIGINT and SIGTERM stop the children and delete the scratch copies.
Controls (``Control``, a part module's ``CONTROLS``) are the other direction: correct rewrites of
the reference in another idiom, each run (``audit_controls``) against every public and hidden test
of its part (``control_tests``) in a scratch copy that holds the hidden tests too. A control that
fails a test fails the audit ("control X failed test Y: the tests reject a correct
implementation"): that test would cost a student with right code points. Hidden-only bugs
(``HiddenOnly``, a part module's ``HIDDEN_ONLY``) are the exception the zoo cannot hold: bugs that
only a hidden test catches; ``hidden_only.py`` runs them and checks what they cost.
Deliberately left out: generating mutants automatically (mutmut-style operators make mostly
unrealistic bugs) and running the hidden tests against mutants (the zoo proves what the public
suite teaches).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import queue
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.audit import part_reach
from cs336_staff.mutants import Control, HiddenOnly, Mutant
from cs336_staff.parts import PartsError, load_parts
from cs336_staff.session.runner import PytestRun, hide_installed
from cs336_staff.session.warm import KILLED, WarmPool
from cs336_staff.shipped import SHIPPED_DIRS, shipped_sources

REPO = Path(__file__).resolve().parents[2]
EXTRA_FILES = ("pyproject.toml", "README.md")
MUTANT_TIMEOUT = 300.0  # seconds; a mutant's tests normally take a few
CONTROL_TIMEOUT = 900.0  # seconds; a control runs every public and hidden test of its part
HIDDEN_DIRS = ("tests/hidden", "fixtures/hidden")  # what a control's scratch copy adds
BASELINE_TIMEOUT = 1800.0
CROSS_PART = "(cross-part) "  # how a crossing starts among the baseline's lines
USED_BY = "(used-by) "  # how a stale cs336_staff/used_by.json starts among them


@dataclass
class Verdict:
    """What happened to one mutant."""

    part: str
    mutant: Mutant
    status: str  # caught | survived | invalid | inconclusive
    caught_by: list[str] = field(default_factory=list)  # "nodeid: first line of the failure"
    note: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == ("passed" if isinstance(self.mutant, Control) else "caught")

    def render(self, index: int, total: int) -> str:
        w = len(str(total))
        kind = (
            "control "
            if isinstance(self.mutant, Control)
            else "hidden-only "
            if isinstance(self.mutant, HiddenOnly)
            else ""
        )
        head = f"[{index:>{w}}/{total}] {kind}{self.part}/{self.mutant.name}  {self.status.upper()}  ({self.seconds:.1f} s)"
        lines = [head, f"      why: {self.mutant.why}"]
        lines += [f"      {c}" for c in self.caught_by]
        if self.note:
            lines += [f"      {line}" for line in self.note.splitlines()]
        return "\n".join(lines)


def _zoo(only: list[str] | None, kind: str) -> list[tuple[str, Mutant]]:
    """(part, entry) for every entry of the ``kind`` list (MUTANTS, CONTROLS or HIDDEN_ONLY) of the
    zoo's part modules, in a stable order, filtered by ``only`` (names of parts or entries)."""
    import cs336_staff.mutants as zoo

    zoo.all_mutants()  # validates: unique names, importable modules, each list holds its kind
    pairs: dict[str, list[tuple[str, Mutant]]] = {"MUTANTS": [], "CONTROLS": [], "HIDDEN_ONLY": []}
    for info in sorted(pkgutil.iter_modules(zoo.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{zoo.__name__}.{info.name}")
        for k, found in pairs.items():
            found += [(info.name, m) for m in getattr(module, k, [])]
    if only:
        every = [pair for found in pairs.values() for pair in found]
        unknown = sorted(set(only) - {p for p, _ in every} - {m.name for _, m in every})
        if unknown:
            parts = sorted({p for p, _ in every})
            raise CommandError(
                f"--only {', '.join(unknown)} names no part or mutant; parts are {', '.join(parts) or 'none yet'}"
            )
    return [(p, m) for p, m in pairs[kind] if not only or p in only or m.name in only]


def load_mutants(only: list[str] | None = None) -> list[tuple[str, Mutant]]:
    """(part, mutant) for every mutant of ``cs336_staff.mutants``, in a stable order, filtered by ``only``."""
    return _zoo(only, "MUTANTS")


def load_controls(only: list[str] | None = None, repo: Path = REPO) -> list[tuple[str, Mutant]]:
    """(part, control) for every control of ``cs336_staff.mutants``, filtered by ``only``; a control
    that names no tests gets its part's (``control_tests``)."""
    mutants = load_mutants()
    return [
        (p, c if c.tests else replace(c, tests=control_tests(repo, p, mutants)))
        for p, c in _zoo(only, "CONTROLS")
    ]


def control_tests(repo: Path, part: str, mutants: list[tuple[str, Mutant]]) -> tuple[str, ...]:
    """Every public and hidden test file of ``part``: ``tests/test_<part>*.py``,
    ``tests/hidden/test_<part>*.py``, the files its mutants name and their hidden namesakes."""
    repo = Path(repo)
    files = {f"tests/test_{part}.py", f"tests/hidden/test_{part}.py"}
    files |= {p.relative_to(repo).as_posix() for p in repo.glob(f"tests/test_{part}*.py")}
    files |= {p.relative_to(repo).as_posix() for p in repo.glob(f"tests/hidden/test_{part}*.py")}
    named = {t.split("::")[0] for p, m in mutants if p == part for t in m.tests}
    files |= named | {"tests/hidden/" + Path(t).name for t in named}
    return tuple(sorted(f for f in files if (repo / f).is_file()))


def make_scratch(repo: Path, dest: Path, *, hidden: bool = False) -> Path:
    """A copy of the public tree of ``repo`` at ``dest`` (what the handout ships, unstripped);
    with ``hidden``, the hidden tests and fixtures too (``HIDDEN_DIRS``), for controls."""
    extra = [
        p.relative_to(repo).as_posix()
        for d in (HIDDEN_DIRS if hidden else ())
        for p in sorted((repo / d).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    ]
    for rel in [*shipped_sources(repo), *EXTRA_FILES, *extra]:
        if (repo / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo / rel, dest / rel)
    return dest


def _public(test: str) -> bool:
    path = test.split("::")[0]
    hidden = SHIPPED_DIRS["tests"]
    return path.startswith("tests/") and not any(
        path == h or path.startswith(h + "/") for h in hidden
    )


def _hidden(test: str) -> bool:
    return test.split("::")[0].startswith("tests/hidden/")


def _pytest_args(tests: list[str], full: bool) -> list[str]:
    return [*tests, "-q", "-p", "no:randomly", *([] if full else ["-x"])]


def _child_env(jobs: int) -> dict[str, str]:
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def _failures(run: PytestRun) -> list[tuple[str, str]]:
    out = [
        (e["nodeid"], "collection error: " + (e["message"].strip().splitlines() or [""])[-1])
        for e in run.collect_errors
    ]
    out += [(t.nodeid, t.message) for t in run.with_outcome("failed", "error", "xpassed")]
    return out


def verdict(
    part: str,
    mutant,
    run: PytestRun,
    baseline_failures: set[str],
    seconds: float,
    timeout: float = MUTANT_TIMEOUT,
) -> Verdict:
    """Classify a finished run of ``mutant``'s tests."""
    if run.foreign_modules:
        return Verdict(
            part,
            mutant,
            "invalid",
            note="the run imported code from outside its scratch copy, so it tested nothing: "
            + "; ".join(run.foreign_modules),
            seconds=seconds,
        )
    failures = _failures(run)
    caught = [(n, m) for n, m in failures if n not in baseline_failures]
    if caught:
        return Verdict(part, mutant, "caught", [f"{n}: {m}" for n, m in caught], seconds=seconds)
    if failures:
        return Verdict(
            part,
            mutant,
            "inconclusive",
            [f"{n}: {m}" for n, m in failures],
            note="only tests that fail without the mutant too failed; fix the reference or the tests first",
            seconds=seconds,
        )
    if run.returncode == KILLED:
        return Verdict(
            part,
            mutant,
            "caught",
            [f"(the run hung and was killed after {timeout:.0f} s)"],
            seconds=seconds,
        )
    if run.returncode in (4, 70):  # pytest usage error, or the fork-server child itself failed
        return Verdict(
            part,
            mutant,
            "invalid",
            note=f"the test run could not start (exit {run.returncode}):\n{run.tail(8)}",
            seconds=seconds,
        )
    if run.returncode not in (0, 5) and not run.tests:
        return Verdict(
            part,
            mutant,
            "caught",
            [f"pytest crashed (exit {run.returncode}): {run.tail(3)}"],
            seconds=seconds,
        )
    counts: dict[str, int] = {}
    for t in run.tests.values():
        counts[t.outcome] = counts.get(t.outcome, 0) + 1
    tally = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "no test ran"
    return Verdict(
        part,
        mutant,
        "survived",
        note=f"the public tests {', '.join(mutant.tests)} all pass: {tally}",
        seconds=seconds,
    )


def problem(mutant, root: Path) -> str | None:
    """Why ``mutant`` cannot run against the public tree at ``root``, or None if it can: its tests
    must be public and exist, its file must exist, its ``old`` code must match exactly once in its
    function, and the mutated file must parse (``Mutant.mutate``). A control's and a hidden-only
    bug's tests may be hidden; a hidden-only bug names in ``hidden`` the hidden tests that catch it."""
    if isinstance(mutant, HiddenOnly) and (
        not mutant.hidden or not all(_hidden(t) for t in mutant.hidden)
    ):
        return (
            f"hidden {mutant.hidden!r} must name the hidden tests that catch it (tests/hidden/...)"
        )
    if isinstance(mutant, Control | HiddenOnly):
        if not mutant.tests or not all(_public(t) or _hidden(t) for t in mutant.tests):
            return f"tests {mutant.tests!r} must name public or hidden tests (tests/..., not staff)"
    elif not mutant.tests or not all(_public(t) for t in mutant.tests):
        return f"tests {mutant.tests!r} must name public tests (tests/..., not hidden or staff)"
    named = mutant.tests + (mutant.hidden if isinstance(mutant, HiddenOnly) else ())
    missing = [t for t in named if not (root / t.split("::")[0]).exists()]
    if missing:
        return f"named tests do not exist: {', '.join(missing)}"
    path = root / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist in the public tree"
    try:
        mutant.mutate(path.read_text())
    except ValueError as e:
        return str(e)
    return None


def applicability(repo: Path, mutants: list[tuple[str, Mutant]]) -> list[str]:
    """``part/name: problem`` for every mutant that cannot run against ``repo`` (see ``problem``);
    [] when all can. Runs no test: a second or two for the whole zoo."""
    notes = ((part, m, problem(m, Path(repo))) for part, m in mutants)
    return [f"{part}/{m.name}: {note}" for part, m, note in notes if note]


def run_mutant(
    part: str,
    mutant,
    scratch: Path,
    pool: WarmPool,
    *,
    full: bool,
    jobs: int,
    timeout: float = MUTANT_TIMEOUT,
) -> Verdict | tuple[PytestRun, float]:
    """Apply ``mutant`` in ``scratch``, run its tests in a child of ``pool`` and restore the file:
    the run and its seconds, or an ``invalid`` verdict if the mutant cannot be run at all."""
    start = time.monotonic()
    note = problem(mutant, scratch)
    if note:
        return Verdict(part, mutant, "invalid", note=note)
    path = scratch / mutant.file
    original = path.read_text()
    try:
        mutant.apply(scratch)
        run = pool.run(
            scratch,
            _pytest_args(list(mutant.tests), full),
            hide=hide_installed(scratch),
            env=_child_env(jobs),
            timeout=timeout,
        )
    finally:
        path.write_text(original)
    return run, time.monotonic() - start


def _baseline_failures(run: PytestRun) -> list[str]:
    if run.foreign_modules:
        return [
            "(baseline) imported code from outside its scratch copy: "
            + "; ".join(run.foreign_modules)
        ]
    out = [f"{n}: {m}" for n, m in _failures(run)]
    if run.returncode == KILLED:
        out.append(f"(baseline) killed after {BASELINE_TIMEOUT:.0f} s")
    elif not run.tests and run.returncode not in (0, 5):
        out.append(
            f"(baseline) pytest exited {run.returncode} without running a test: {run.tail(3)}"
        )
    return out


def audit(
    repo: Path,
    mutants: list[tuple[str, Mutant]],
    *,
    jobs: int = 2,
    full: bool = False,
    baseline: bool = True,
    timeout: float = MUTANT_TIMEOUT,
    echo=print,
    pool: WarmPool | None = None,
    write_used_by: bool = False,
) -> tuple[list[Verdict], list[str]]:
    """Audit ``mutants`` against the public tree of ``repo``: (one verdict per mutant, baseline failures).

    The baseline's lines include crossings (``CROSS_PART``) and a stale ``USED_BY_FILE``
    (``USED_BY``), or, with ``write_used_by``, it is rewritten from the measurement instead.
    ``pool`` is a warm fork-server to reuse (its owner closes it); by default the audit starts its own."""
    repo = Path(repo).resolve()
    jobs = max(1, min(jobs, len(mutants) or 1))
    root = Path(tempfile.mkdtemp(prefix="cs336-audit-"))
    own_pool, ex = pool is None, None
    try:
        pool = WarmPool() if pool is None else pool
        scratches: queue.Queue[Path] = queue.Queue()
        for i in range(jobs):
            scratches.put(make_scratch(repo, root / f"worker{i}"))
        ex = ThreadPoolExecutor(max_workers=jobs)
        baseline_lines: Future = Future()
        baseline_lines.set_result([])
        tests = sorted(
            {
                t
                for _, m in mutants
                for t in m.tests
                if _public(t) and (repo / t.split("::")[0]).exists()
            }
        )
        if baseline and tests:

            def run_baseline() -> list[str]:
                scratch = scratches.get()
                probe = scratch / f"{part_reach.PROBE_MODULE}.py"
                functions, reach = root / "reach-functions.json", root / "reach.json"
                try:
                    parts = load_parts(repo)
                except PartsError:  # a tree without parts (a sample repository): nothing to cross
                    parts = []
                try:
                    shutil.copyfile(part_reach.PROBE_SOURCE, probe)
                    functions.write_text(json.dumps(part_reach.graded_functions(parts)))
                    env = {
                        **_child_env(jobs),
                        "CS336_REACH_FUNCTIONS": str(functions),
                        "CS336_REACH_OUT": str(reach),
                    }
                    run = pool.run(
                        scratch,
                        [*_pytest_args(tests, full=True), "-p", part_reach.PROBE_MODULE],
                        hide=hide_installed(scratch),
                        env=env,
                        timeout=BASELINE_TIMEOUT,
                    )
                finally:
                    probe.unlink(missing_ok=True)
                    scratches.put(scratch)
                if not reach.is_file() or not parts:
                    return _baseline_failures(run)
                measured = json.loads(reach.read_text())
                lines = [CROSS_PART + line for line in part_reach.crossings(measured, parts)]
                uses, ran = (
                    part_reach.used_by(measured, parts),
                    {n.split("::")[0] for n in measured},
                )
                if write_used_by:
                    echo(f"audit: wrote {part_reach.write_used_by(uses, ran, repo)}")
                else:
                    lines += [USED_BY + line for line in part_reach.used_by_drift(uses, ran, repo)]
                return _baseline_failures(run) + lines

            baseline_lines = ex.submit(run_baseline)

        def task(part: str, mutant) -> Verdict | tuple[PytestRun, float]:
            scratch = scratches.get()
            try:
                return run_mutant(
                    part, mutant, scratch, pool, full=full, jobs=jobs, timeout=timeout
                )
            finally:
                scratches.put(scratch)

        futures = [ex.submit(task, p, m) for p, m in mutants]
        failing = {
            line.split(": ", 1)[0]
            for line in baseline_lines.result()
            if not line.startswith((CROSS_PART, USED_BY))
        }
        verdicts = []
        for i, ((part, mutant), f) in enumerate(zip(mutants, futures, strict=True), 1):
            v = f.result()
            if not isinstance(v, Verdict):
                v = verdict(part, mutant, v[0], failing, v[1], timeout)
            echo(v.render(i, len(mutants)))
            verdicts.append(v)
        return verdicts, baseline_lines.result()
    finally:
        if own_pool and pool is not None:
            pool.close()  # kills any child still running, so the workers return
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(root, ignore_errors=True)


def control_verdict(
    part: str, control: Mutant, run: PytestRun, seconds: float, timeout: float = CONTROL_TIMEOUT
) -> Verdict:
    """Classify a finished run of ``control``'s tests: passed, failed (a test rejects it) or invalid."""
    if run.foreign_modules:
        return Verdict(
            part,
            control,
            "invalid",
            note="the run imported code from outside its scratch copy, so it tested nothing: "
            + "; ".join(run.foreign_modules),
            seconds=seconds,
        )
    reject = f"control {control.name} failed test {{}}: the tests reject a correct implementation"
    failed = [
        f"{reject.format(n)} ({m.strip().splitlines()[0] if m.strip() else ''})"
        for n, m in _failures(run)
    ]
    if run.returncode == KILLED:
        failed.append(reject.format(f"(a run killed after {timeout:.0f} s)"))
    if failed:
        return Verdict(part, control, "failed", failed, seconds=seconds)
    if run.returncode != 0 or not run.tests:
        return Verdict(
            part,
            control,
            "invalid",
            note=f"the test run ended with exit {run.returncode} and no failing test:\n{run.tail(8)}",
            seconds=seconds,
        )
    counts: dict[str, int] = {}
    for t in run.tests.values():
        counts[t.outcome] = counts.get(t.outcome, 0) + 1
    tally = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    return Verdict(
        part, control, "passed", note=f"{len(control.tests)} test files: {tally}", seconds=seconds
    )


def audit_controls(
    repo: Path,
    controls: list[tuple[str, Mutant]],
    *,
    jobs: int = 2,
    timeout: float = CONTROL_TIMEOUT,
    echo=print,
    pool: WarmPool | None = None,
) -> list[Verdict]:
    """Run each control against its tests (public and hidden) in a scratch copy holding the hidden
    tree: one verdict per control. ``pool`` as in ``audit``."""
    return run_with_hidden_tests(
        repo,
        controls,
        lambda part, control, run, seconds: control_verdict(part, control, run, seconds, timeout),
        prefix="cs336-controls-",
        jobs=jobs,
        timeout=timeout,
        echo=echo,
        pool=pool,
    )


def run_with_hidden_tests(
    repo: Path,
    items: list[tuple[str, Mutant]],
    judge: Callable[[str, Mutant, PytestRun, float], Verdict],
    *,
    prefix: str,
    jobs: int,
    timeout: float,
    echo=print,
    pool: WarmPool | None = None,
) -> list[Verdict]:
    """Run each ``(part, mutant)`` against its tests, public and hidden, every one to the end, in
    ``jobs`` scratch copies holding the hidden tree (folders named ``prefix...``); ``judge(part,
    mutant, run, seconds)`` turns each run into its verdict, echoed in order as it comes. The
    controls and the hidden-only bugs (``hidden_only.py``) both run this way."""
    repo = Path(repo).resolve()
    jobs = max(1, min(jobs, len(items) or 1))
    root = Path(tempfile.mkdtemp(prefix=prefix))
    own_pool, ex = pool is None, None
    try:
        pool = WarmPool() if pool is None else pool
        scratches: queue.Queue[Path] = queue.Queue()
        for i in range(jobs):
            scratches.put(make_scratch(repo, root / f"worker{i}", hidden=True))
        ex = ThreadPoolExecutor(max_workers=jobs)

        def task(part: str, mutant: Mutant) -> Verdict | tuple[PytestRun, float]:
            scratch = scratches.get()
            try:
                return run_mutant(
                    part, mutant, scratch, pool, full=True, jobs=jobs, timeout=timeout
                )
            finally:
                scratches.put(scratch)

        futures = [ex.submit(task, p, m) for p, m in items]
        verdicts = []
        for i, ((part, mutant), f) in enumerate(zip(items, futures, strict=True), 1):
            v = f.result()
            if not isinstance(v, Verdict):
                v = judge(part, mutant, v[0], v[1])
            echo(v.render(i, len(items)))
            verdicts.append(v)
        return verdicts
    finally:
        if own_pool and pool is not None:
            pool.close()
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(root, ignore_errors=True)
