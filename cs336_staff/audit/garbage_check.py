"""No points for plausible-shape garbage: every test a stub fails, garbage fails too.

    $ uv run cs336 audit --garbage                  # every graded function and class
    $ uv run cs336 audit --garbage --only data      # one part, or one target (get_batch, AdamW)
    $ uv run cs336 audit                            # the bug zoo, then this check

For each graded target F (the function or class an adapter of ``adapters.py`` calls, when students
write some of it: ``cs336_staff/worker/adapter_rule.py`` reads the adapters, ``cs336_staff/markers.py`` the regions), in a
scratch copy of the repository's public tree plus the hidden tests and fixtures:

1. the baseline: every public and hidden test of every part, on the reference, with the reach probe
   (``reach_probe.py``): which tests execute which of F's regions; a test that fails here counts
   for nothing below;
2. the stub: F's regions replaced by the handout's ``raise NotImplementedError`` (``cs336_staff/markers.py``),
   the rest of the reference unchanged, on the tests that reach F: the set S of tests it fails;
3. per flavour of garbage (``garbage.py``: zeros, seeded noise), F replaced by its garbage, on S.

A test of S that garbage passes is a point garbage steals, unless a call of F it made raised. Such a
test checks the error contract ("raises ValueError on bad input", "a Linear rejects an input of
the wrong width" after building one): the garbage raised the reference's own error, so it did the
documented validation, which is work; asking such a test for evidence of computed values would
only duplicate the tests that check values. These tests are listed as ``contract`` and do not fail
the check. The report names, per F and flavour, the stolen tests with the points the rubric gives
them (``rubric.toml``: hidden tests count), sums them per part, and the check fails while any remain.
``ACCEPTED`` lists, each with its reason, the tests garbage may pass by decision: garbage of a model,
an optimizer or ``set_seed`` passing a test of the training loop that grades only the loop's own
work (its overwrite guard, its batch schedule), a test that needs no seeding, a test of
``load_checkpoint``'s errors on a file ``save_checkpoint`` wrote, or a test of a constructor's
bookkeeping (a class's garbage keeps the reference ``__init__``). They are reported, not
counted.

The fix is in the test: add evidence that the work happened (the parameters moved by the
documented amount, the batch holds the dataset's tokens, the output equals the reference). A test
whose one expected answer is the garbage's own value (``False``, ``0``, an empty list) is passed
by it; a function of few possible results (a bool) is a coin under the noise flavour: such tests
should check several answers, of both kinds, each.

Runs come from the audit's warm fork-server (``cs336_staff/session/warm.py``): a run costs its tests. Only tests
that reach F run, so the whole check costs about three runs of the suite. Deliberately left out: a
test that reaches F only in another process (a subprocess, a pool) is not run for F, and a class's
garbage keeps the methods students do not write.
"""

from __future__ import annotations

import ast
import json
import queue
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.audit import part_reach
from cs336_staff.audit.garbage import FLAVOUR_ENV, FLAVOURS, OUT_ENV
from cs336_staff.markers import find_regions
from cs336_staff.parts import PartsError, load_parts
from cs336_staff.rubric import Item, Rubric
from cs336_staff.session.runner import PytestRun, copy_tree, hide_installed
from cs336_staff.session.warm import WarmPool
from cs336_staff.shipped import SHIPPED_DIRS, shipped_sources
from cs336_staff.worker.adapter_rule import read_adapters

#: Why garbage of another part's function may pass a test of the training loop that grades the loop's own work.
_LOOP_ONLY = (
    "grades the training loop's own work ({}), which a model, optimizer or seeding that computes nothing "
    "leaves intact: the loop earned it, and the tests that need the model (loss falls, resumed runs "
    "end where straight ones end and have trained) fail on this garbage"
)
_NO_SEEDING = (
    "needs no seeding ({}): a set_seed that seeds nothing trains as well, and the tests that compare "
    "two runs of one seed (deterministic runs, resumed runs) fail on it"
)

_LOAD_ERRORS = (
    "grades an error of load_checkpoint ({}) on a file save_checkpoint only had to write: the format "
    "is the student's, so the test cannot write it itself, and the error is load_checkpoint's work"
)

#: Reviewed decisions, not oversights: (target, test function without its parameters) -> why that test
#: may pass on the target's garbage (``ANY``: every target's). Each is listed in the report as accepted.
ANY = "*"
ACCEPTED: dict[tuple[str, str], str] = {
    **{
        (ANY, test): _LOOP_ONLY.format(what)
        for test, what in (
            (
                "test_train_refuses_to_overwrite_an_existing_checkpoint_without_resume",
                "the overwrite guard",
            ),
            (
                "test_train_with_another_seed_draws_other_batches_not_the_same_ones_shifted",
                "the batch schedule",
            ),
            ("test_train_with_other_seeds_draws_unrelated_batches", "the batch schedule"),
        )
    },
    **{
        ("save_checkpoint", test): _LOAD_ERRORS.format(what)
        for test, what in (
            ("test_loading_is_strict_about_a_missing_or_an_extra_buffer", "strict keys"),
            (
                "test_loading_a_checkpoint_whose_keys_differ_from_the_model_fails_naming_them",
                "strict keys",
            ),
            ("test_loading_a_truncated_checkpoint_fails_naming_the_file", "a truncated file"),
        )
    },
    **{
        ("SGD", test): (
            "asks SGD without momentum for the state torch keeps, which is none: a step that does nothing "
            "keeps none too, and the trajectory tests of the same settings catch it"
        )
        for test in (
            "test_optimizer_state_takes_the_parameters_dtype_and_device",
            "test_optimizer_state_placement_other_dtypes_and_devices",
        )
    },
    **{
        (target, test): (
            "grades the given `cs336 account --measure` command's table and plot, which any numbers "
            "fill; matmul_flops and time_matmul are graded by their own tests"
        )
        for target in ("matmul_flops", "time_matmul")
        for test in (
            "test_account_measure_prints_a_row_per_dtype_and_size",
            "test_account_measure_saves_a_png_plot",
        )
    },
    **{
        ("optimizer_state_bytes", test): (
            "has a case whose answer is 0 bytes (plain SGD keeps no state); the other "
            "optimizers' cases of the same test catch a function that answers 0"
        )
        for test in (
            "test_optimizer_state_bytes_on_a_cruncher",
            "test_optimizer_state_bytes_with_scalar_parameters_in_float64",
            "test_optimizer_state_bytes_count_a_scalar_parameters_state_but_no_step",
            "test_optimizer_state_bytes_match_the_analytic_count",
        )
    },
    ("Tokenizer", "test_building_a_tokenizer_leaves_the_callers_vocab_alone"): (
        "grades the constructor alone (it copies the caller's vocab), which the garbage keeps: a class's garbage "
        "runs the reference __init__ and garbles only tensors, so a test of __init__'s own bookkeeping passes"
    ),
    **{
        ("dtype_info", test): (
            "grades fp8_matmul's accuracy against fp64, which any positive fp8 max gives (the scales "
            "adapt to it); dtype_info is graded by its own tests and by the exact-scale checks "
            "of to_fp8's tests (scale == amax / fp8 max)"
        )
        for test in (
            "test_fp8_matmul_relative_error_vs_fp64_below_6_percent",
            "test_fp8_matmul_error_below_6_percent_other_shapes",
        )
    },
    **{
        ("set_seed", test): _NO_SEEDING.format(what)
        for test, what in (
            ("test_train_command_prints_a_falling_loss", "the loss falls"),
            ("test_train_loss_falls_for_other_widths_and_depths", "the loss falls"),
        )
    },
}

GARBAGE_SOURCE = Path(__file__).with_name("garbage.py")
GARBAGE_MODULE = "cs336_garbage"  # its name in the scratch tree
EXTRA_FILES = ("pyproject.toml", "README.md")
HIDDEN_DIRS = tuple(d for skip in SHIPPED_DIRS.values() for d in skip if not d.endswith("staff"))
RUN_TIMEOUT = 900.0  # seconds for one target's run of its reaching tests
PROBLEM_CHARS = 600  # characters of each problem repeated at the end of the report
BASELINE_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Target:
    """A graded function or class: ``name`` defined at the top of ``file``, its solution regions ``regions``."""

    part: str
    name: str
    file: str
    regions: tuple[str, ...]  # qualnames: "get_batch", or "AdamW.__init__", "AdamW.step"
    is_class: bool

    @property
    def methods(self) -> list[str]:
        return sorted(
            {q.split(".")[1] for q in self.regions if q.count(".") >= 1 and "<locals>" not in q}
        )


@dataclass
class Finding:
    """What F's stub and garbage did to the tests that reach F."""

    target: Target
    reached: list[str] = field(default_factory=list)
    stub_fails: list[str] = field(default_factory=list)
    stolen: dict[str, list[str]] = field(default_factory=dict)  # flavour -> tests garbage passes
    accepted: dict[str, list[str]] = field(
        default_factory=dict
    )  # flavour -> passed, by a decision in ACCEPTED
    contract: dict[str, list[str]] = field(
        default_factory=dict
    )  # flavour -> passed having seen only errors
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.stolen.values()) and not self.problems


def targets(repo: Path, only: list[str] | None = None) -> list[Target]:
    """Every graded target of ``repo`` (an adapter's target that has solution regions), by part."""
    parts = load_parts(repo)
    adapters = read_adapters((repo / "adapters.py").read_text(encoding="utf-8"))
    names = {a.target for a in adapters.values() if a.target}
    out: dict[str, Target] = {}
    for part in parts:
        for f, qualnames in [*part.functions.items(), *part.optional.items()]:
            tree = ast.parse((repo / f).read_text(encoding="utf-8"))
            classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
            for name in sorted(names):
                mine = tuple(q for q in qualnames if q == name or q.startswith(name + "."))
                if mine and name not in out:
                    out[name] = Target(part.key, name, f, mine, name in classes)
    found = sorted(out.values(), key=lambda t: ([p.key for p in parts].index(t.part), t.name))
    if only:
        known = {t.part for t in found} | {t.name for t in found}
        unknown = sorted(set(only) - known)
        if unknown:
            raise CommandError(
                f"--garbage --only {', '.join(unknown)} names no part or graded target; "
                f"parts are {', '.join(sorted({t.part for t in found}))}"
            )
        found = [t for t in found if t.part in only or t.name in only]
    return found


def stubbed(source: str, target: Target, path: str) -> str:
    """``source`` with ``target``'s regions (only) replaced by the handout's stubs."""
    lines = source.splitlines(keepends=True)
    for r in reversed([r for r in find_regions(source, path) if r.qualname in target.regions]):
        lines[r.begin - 1 : r.end] = [r.stub(path)]
    return "".join(lines)


def with_garbage(source: str, target: Target, module: str = GARBAGE_MODULE) -> str:
    """``source`` with ``target`` rebound to its garbage at the end of the module (``garbage.py``
    imported as ``module``: the agreement check keeps it inside the package, where a submission's code is)."""
    methods = f", methods={target.methods!r}" if target.is_class else ""
    return (
        f"{source.rstrip()}\n\n\nimport {module} as _cs336_garbage  # noqa: E402\n\n"
        f"{target.name} = _cs336_garbage.garbage({target.name}, {target.name!r}{methods})\n"
    )


def make_scratch(repo: Path, dest: Path) -> Path:
    """The public tree of ``repo`` with its hidden tests and fixtures, and the garbage and reach probes."""
    for rel in [*shipped_sources(repo), *EXTRA_FILES]:
        if (repo / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo / rel, dest / rel)
    for d in HIDDEN_DIRS:
        if (repo / d).is_dir():
            copy_tree(repo / d, dest / d)
    shutil.copyfile(GARBAGE_SOURCE, dest / f"{GARBAGE_MODULE}.py")
    shutil.copyfile(part_reach.PROBE_SOURCE, dest / f"{part_reach.PROBE_MODULE}.py")
    return dest


def _args(tests: list[str]) -> list[str]:
    return [*tests, "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]


def _failed(run: PytestRun) -> set[str]:
    return {t.nodeid for t in run.with_outcome("failed", "error", "xpassed")} | {
        e["nodeid"] for e in run.collect_errors
    }


def _passed(run: PytestRun) -> set[str]:
    return {t.nodeid for t in run.with_outcome("passed")}


class Check:
    """One garbage check of ``repo``: a baseline, then each target in one of ``jobs`` scratch copies."""

    def __init__(
        self, repo: Path, pool: WarmPool, root: Path, jobs: int, echo: Callable[[str], None]
    ):
        self.repo, self.pool, self.echo = Path(repo).resolve(), pool, echo
        self.scratches: queue.Queue[Path] = queue.Queue()
        for i in range(jobs):
            self.scratches.put(make_scratch(self.repo, root / f"worker{i}"))
        self.root, self.jobs = root, jobs

    def _run(
        self, scratch: Path, tests: list[str], env: dict[str, str], plugins: tuple[str, ...] = ()
    ) -> PytestRun:
        threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} if self.jobs > 1 else {}
        args = _args(tests) + [a for p in plugins for a in ("-p", p)]
        return self.pool.run(
            scratch, args, hide=hide_installed(scratch), env={**threads, **env}, timeout=RUN_TIMEOUT
        )

    def baseline(
        self, test_files: list[str], functions: dict[str, list[str]]
    ) -> tuple[PytestRun, dict[str, list[str]]]:
        """Every test of ``test_files`` on the reference, and what each executed of ``functions``."""
        scratch = self.scratches.get()
        try:
            listed, reach = self.root / "reach-functions.json", self.root / "reach.json"
            listed.write_text(json.dumps(functions))
            env = {"CS336_REACH_FUNCTIONS": str(listed), "CS336_REACH_OUT": str(reach)}
            run = self.pool.run(
                scratch,
                _args(test_files) + ["-p", part_reach.PROBE_MODULE],
                hide=hide_installed(scratch),
                env=env,
                timeout=BASELINE_TIMEOUT,
            )
            return run, (json.loads(reach.read_text()) if reach.is_file() else {})
        finally:
            self.scratches.put(scratch)

    def target(self, target: Target, tests: list[str]) -> Finding:
        """F's stub on ``tests`` (those that reach it), then each flavour of garbage on what the stub fails."""
        start = time.monotonic()
        finding = Finding(target, reached=tests)
        scratch = self.scratches.get()
        path = scratch / target.file
        original = path.read_text(encoding="utf-8")
        try:
            if tests:
                path.write_text(stubbed(original, target, target.file), encoding="utf-8")
                stub = self._run(scratch, tests, {})
                finding.stub_fails = sorted(_failed(stub) & set(tests))
                if stub.timed_out:
                    finding.problems.append(
                        f"the stub's run was killed after {RUN_TIMEOUT:.0f} s: {stub.tail(3)}"
                    )
            for kind in FLAVOURS if finding.stub_fails else ():
                out = scratch / f"garbage-{kind}.json"
                path.write_text(with_garbage(original, target), encoding="utf-8")
                run = self._run(
                    scratch,
                    finding.stub_fails,
                    {FLAVOUR_ENV: kind, OUT_ENV: str(out)},
                    (GARBAGE_MODULE,),
                )
                record = (
                    json.loads(out.read_text()) if out.is_file() else {"calls": {}, "problems": []}
                )
                out.unlink(missing_ok=True)
                if run.timed_out:
                    unfinished = [n for n in finding.stub_fails if n not in run.tests]
                    finding.problems.append(
                        f"{kind}: the run was killed after {RUN_TIMEOUT:.0f} s, {len(run.tests)} tests done"
                        + (
                            f", {len(unfinished)} not, the first {unfinished[0]}"
                            if unfinished
                            else ""
                        )
                        + f": {run.tail(3)}"
                    )
                if not run.tests and run.returncode not in (0, 1):
                    finding.problems.append(
                        f"{kind}: the run could not start (exit {run.returncode}): {run.tail(5)}"
                    )
                finding.problems += [f"{kind}: {p}" for p in record["problems"]]
                passed = sorted(_passed(run))
                calls = record["calls"]
                only_errors = {n for n in passed if calls.get(n, {}).get("raised", 0)}
                finding.stolen[kind] = [
                    n for n in passed if n not in only_errors and not accepted(target, n)
                ]
                finding.accepted[kind] = [
                    n for n in passed if n not in only_errors and accepted(target, n)
                ]
                finding.contract[kind] = sorted(only_errors)
        finally:
            path.write_text(original, encoding="utf-8")
            self.scratches.put(scratch)
        finding.seconds = time.monotonic() - start
        return finding


def accepted(target: Target, nodeid: str) -> str | None:
    """Why ``target``'s garbage may pass the test ``nodeid`` (``ACCEPTED``), or None."""
    test = nodeid.split("::")[-1].split("[")[0]
    return ACCEPTED.get((target.name, test)) or ACCEPTED.get((ANY, test))


def reaching(reach: dict[str, list[str]], target: Target) -> list[str]:
    """The tests whose run executed one of ``target``'s regions."""
    wanted = {f"{target.file}::{q}" for q in target.regions}
    return sorted(n for n, functions in reach.items() if wanted & set(functions))


def check(
    repo: Path,
    only: list[str] | None = None,
    *,
    jobs: int = 2,
    echo: Callable[[str], None] = print,
    pool: WarmPool | None = None,
) -> tuple[list[Finding], dict[str, Item], list[str]]:
    """Run the garbage check on ``repo``: (a finding per target, each test's rubric item, baseline problems)."""
    repo = Path(repo).resolve()
    try:
        parts = load_parts(repo)
    except PartsError as e:
        raise CommandError(e) from None
    found = targets(repo, only)
    wanted = {t.part for t in found}
    test_files = sorted(
        {f for p in parts if p.key in wanted for f in [*p.tests, *p.hidden_tests]}
        | {
            f
            for p in parts
            if p.key in part_reach.COMBINING_PARTS
            for f in [*p.tests, *p.hidden_tests]
        }
    )
    root = Path(tempfile.mkdtemp(prefix="cs336-garbage-"))
    own_pool = pool is None
    try:
        pool = WarmPool() if pool is None else pool
        runner = Check(repo, pool, root, max(1, jobs), echo)
        base, reach = runner.baseline(test_files, part_reach.graded_functions(parts))
        problems = [
            f"{n}: fails on the reference (it counts for nothing here)"
            for n in sorted(_failed(base))
        ]
        if not reach:
            problems.append(
                f"the baseline recorded no reach (exit {base.returncode}): {base.tail(5)}"
            )
        good = set(_passed(base))
        items = Rubric.load(repo / "rubric.toml").resolve(base.collected) if base.collected else {}
        findings: list[Finding] = []
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            futures = [
                ex.submit(runner.target, t, [n for n in reaching(reach, t) if n in good])
                for t in found
            ]
            for i, f in enumerate(futures, 1):
                finding = f.result()
                echo(render(finding, items, i, len(found)))
                findings.append(finding)
        return findings, items, problems
    finally:
        if own_pool and pool is not None:
            pool.close()
        shutil.rmtree(root, ignore_errors=True)


def _points(items: dict[str, Item], tests: list[str] | set[str]) -> float:
    return sum(items[n].points for n in tests if n in items)


def render(f: Finding, items: dict[str, Item], index: int, total: int) -> str:
    w = len(str(total))
    status = "OK" if f.ok else "STEALS" if any(f.stolen.values()) else "PROBLEM"
    lines = [
        f"[{index:>{w}}/{total}] {f.target.part}/{f.target.name}  {status}  ({f.seconds:.1f} s): "
        f"{len(f.reached)} tests reach it, the stub fails {len(f.stub_fails)}"
    ]
    for kind in FLAVOURS:
        stolen = f.stolen.get(kind, [])
        if stolen:
            lines.append(
                f"      {kind} garbage passes {len(stolen)} ({_points(items, stolen):.2f} points):"
            )
            lines += [f"        {n}  ({_points(items, [n]):.3f})" for n in stolen]
        reasons: dict[str, list[str]] = {}
        for n in f.accepted.get(kind, []):
            reasons.setdefault(accepted(f.target, n) or "", []).append(n)
        for reason, tests in reasons.items():
            lines.append(
                f"      {kind} garbage passes {len(tests)} by decision (ACCEPTED: the test {reason}): {', '.join(tests)}"
            )
        if f.contract.get(kind):
            lines.append(
                f"      {kind} garbage passes {len(f.contract[kind])} having raised the reference's error (contract checks): "
                + ", ".join(f.contract[kind])
            )
    lines += [f"      problem: {p}" for p in f.problems]
    return "\n".join(lines)


def summary(findings: list[Finding], items: dict[str, Item]) -> list[str]:
    """Per part whose points are at stake (the tests' part, which for the training loop's tests is not
    the target's): the tests garbage passes that the stub fails (any target, any flavour), and their points."""
    by_part: dict[str, set[str]] = {}
    for f in findings:
        for stolen in f.stolen.values():
            for n in stolen:
                by_part.setdefault(items[n].concept if n in items else f.target.part, set()).add(n)
    lines = [
        f"  {part:<14} {len(tests):>3} tests  {_points(items, tests):6.2f} points"
        for part, tests in by_part.items()
    ]
    every = set().union(*by_part.values()) if by_part else set()
    lines.append(f"  {'total':<14} {len(every):>3} tests  {_points(items, every):6.2f} points")
    return lines


def run(args) -> int:  # noqa: ANN001 - the audit's argparse namespace
    """``cs336 audit --garbage``: print the findings and the per-part summary; 0 when garbage steals nothing."""
    start = time.monotonic()
    found = targets(args.repo, args.only)
    print(
        f"audit --garbage: {len(found)} graded targets, flavours {', '.join(FLAVOURS)}, {args.jobs} jobs, "
        "public and hidden tests",
        flush=True,
    )
    findings, items, problems = check(
        args.repo, args.only, jobs=args.jobs, echo=lambda line: print(line, flush=True)
    )
    for p in problems:
        print(f"baseline: {p}")
    print("points garbage would steal (tests a stub fails and garbage passes), per part:")
    for line in summary(findings, items):
        print(line)
    bad = [f.target.name for f in findings if not f.ok]
    ok = not bad and not problems
    print(
        f"audit --garbage: {'passed' if ok else 'FAILED'} in {time.monotonic() - start:.0f} s"
        + (f"; garbage steals points or could not be checked for: {', '.join(bad)}" if bad else "")
    )
    for f in findings:  # again, last: a log cut to its tail (CI) still says what went wrong
        for problem in f.problems:
            print(f"  {f.target.name}: {problem[:PROBLEM_CHARS]}")
    return 0 if ok else 1
