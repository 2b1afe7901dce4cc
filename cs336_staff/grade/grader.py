"""Grade one submission: intake -> judge run (tests here, submission in a sandboxed worker) -> scores -> files.

The judge (``judge.py``) is a pytest process over the staff repository that never imports the
submission; the submission runs only in the worker it starts (``sandbox.py``). This module stages
the worker's files, starts the judge with a whole-run timeout, reads the outcomes the judge wrote
(one JSON line per test, trusted: the judge is staff code), and scores them with the rubric.
Where two cores per submission are free (bubblewrap tier), the visible and the hidden tests run in
two judges at once (``run_judges``): a judge and its worker take turns, so one pair keeps about one
core busy.

The set of graded tests is collected once per batch by the judge in collect-only mode (no worker,
no submission involved) and cached under ``OUT/.cache/``, beside hypothesis's Unicode tables, built
there once for every judge (``unicode_tables.py``). Every expected test gets a result: a
test the run never reported is an error (its module failed to collect) or ``not_run`` (the run
was cut short), never silently absent.

Device matrix: each test needs the ``cpu`` or the ``gpu`` runner (``gpu``, ``fp8``, ``h100``
markers). ``--device cpu`` runs the CPU tests and reports GPU tests as ``pending``; ``--device
gpu`` runs only the GPU tests; ``all`` (``auto`` on a machine with a GPU) runs everything, and a
GPU test the local GPU cannot run (fp8 on an A100) is pending too. ``cs336 merge`` combines runs.

Deliberately left out: regrade requests and manual adjustments (edit results.json by hand).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cs336_staff.grade import container, delegation, neutral, unicode_tables
from cs336_staff.grade.bytecode import ensure_compiled
from cs336_staff.grade.intake import Intake, read_submission
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.mirror import layout
from cs336_staff.grade.report import GradeResult, TestResult
from cs336_staff.grade.sandbox import choose_tier, find_bwrap, stage, threads_per_job, usable_cores
from cs336_staff.grade.spec import (
    HIDDEN_PREFIX,
    JudgeSpec,
    basetemp,
    public_fixtures,
    worker_preload,
)
from cs336_staff.rubric import Item, Rubric, find_rubric
from cs336_staff.session.outcomes import clip
from cs336_staff.session.runner import PytestJob, events
from tests.devices import DEVICE_MARKERS
from tests.fresh import SEED_ENV, draw_seed

WORKER_OUTPUT = "\n----- worker output -----\n"  # where console.txt turns from the judge's output to the workers'
GRADER_VERSION = "2"
#: The isolation tiers whose concurrent workers cannot reach each other (``run_judges``).
PARALLEL_TIERS = frozenset({"bubblewrap"})
PEAK = "judge_peak_rss_kib"  # a judge process's peak memory, as its finish event reports it

GPU_MARKERS = frozenset(DEVICE_MARKERS)
#: pytest plugins the judge loads explicitly (entry-point autoloading is off).
PLUGINS = ("pytest_timeout", "_hypothesis_pytestplugin", "cs336_staff.grade.judge")


@dataclass(frozen=True)
class Plan:
    """Everything needed to grade a submission (picklable, for process pools and Slurm)."""

    staff_root: Path
    items: dict[str, Item]  # nodeid -> rubric verdict
    needs_gpu: dict[str, bool]
    concepts: dict[str, str]
    device: str = "cpu"  # cpu | gpu | all
    limits: Limits = field(default_factory=Limits)
    jobs: int = 1
    fingerprint: str = ""
    insecure: bool = False  # grade without bubblewrap (every result says so)
    tier: str = "bubblewrap"  # the isolation tier (sandbox.TIERS); "none" when insecure
    preload: tuple[str, ...] = ()  # imported by each worker before it says ready
    # the most judges one submission's tests are split across, cores permitting (run_judges)
    judges: int = 2
    # hypothesis's Unicode tables, built once for every judge (unicode_tables.build); None: each
    # judge builds its own
    hypothesis_home: Path | None = None

    def runs_here(self, nodeid: str) -> bool:
        return self.device == "all" or self.needs_gpu[nodeid] == (self.device == "gpu")


@dataclass
class JudgeRun:
    """What one judge run reported (``outcomes``: nodeid -> (outcome, output, duration))."""

    outcomes: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    # nodeid -> adapters/scenarios it called
    reached: dict[str, list[str]] = field(default_factory=dict)
    collected: dict[str, list[str]] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    isolation: dict[str, str] = field(default_factory=dict)
    timed_out: bool = False
    worker_starts: int = 0
    worker_crashes: int = 0
    console: str = ""


def tree_fingerprint(root: Path) -> str:
    """Hash of everything that decides which tests exist and how they judge: tests/ (and its rules), fixtures, pyproject."""
    h = hashlib.sha256()
    paths = [root / "pyproject.toml", root / "adapters.py", root / "tests" / "rules.toml"]
    for sub in ("tests", "cs336_staff/grade"):
        paths += sorted(
            p
            for p in (root / sub).rglob("*.py")
            if "__pycache__" not in p.parts
            and not p.relative_to(root).as_posix().startswith("tests/staff/")
        )
    for p in paths:
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _judge_env(gpu: bool, threads: int, write_bytecode: bool = False) -> dict[str, str]:
    """The judge's environment. ``write_bytecode``: the collection, before any grading, leaves the
    tests as pytest rewrote them in the staff tree's ``__pycache__`` for every judge to read."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "LD_LIBRARY_PATH",
        "UV_CACHE_DIR",
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "CS336_SPEED_SEED",
    )  # a regrade replays the speed tests' inputs (tests/fresh.py)
    env = {k: os.environ[k] for k in keep if k in os.environ}
    # the staff tree is never written while grading (tests/staff/test_gradescope.py checks every
    # file of it): a judge reads the bytecode there and writes none
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        PYTHONHASHSEED="0",
        NO_COLOR="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
    )
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_judge(
    staff_root: Path,
    files: dict[str, bytes] | None,
    *,
    only: list[str] | None,
    limits: Limits,
    gpu: bool,
    jobs: int = 1,
    insecure: bool = False,
    collect_only: bool = False,
    preload: tuple[str, ...] = (),
    tier: str = "bubblewrap",
    tick: Callable[[int], None] | None = None,
    meanwhile: Callable[[], None] | None = None,
    speed_seed: int | None = None,
    hypothesis_home: Path | None = None,
) -> JudgeRun:
    """Run the judge over ``staff_root``'s tests against the submission ``files`` (None: collect only);
    ``speed_seed`` is the speed tests' ``CS336_SPEED_SEED`` (None: the judge draws its own, or
    inherits the grader's);
    ``tick(n)`` is called from a thread as each ``n`` more tests end (``watch_results``);
    ``meanwhile()`` is called once the judge has collected its tests, while it runs them: the
    grader's own work on the submission (the rules check), which begun earlier would take a core
    from the judge's start or its first worker's (``wait_for_collection``);
    ``hypothesis_home`` is ``unicode_tables.build``'s folder, whose tables are copied into the
    judge's own hypothesis storage (None: the judge builds them)."""
    base = Path(tempfile.mkdtemp(prefix="cs336-grade-"))
    # The container tier's worker (another uid) must reach root/ and scratch/ by name, nothing else.
    base.chmod(0o711 if tier == "container" and not insecure else 0o700)
    try:
        root, scratch = base / "root", base / "scratch"
        root.mkdir()
        scratch.mkdir()
        if files is not None:
            stage(root, staff_root, files)
        results = base / "results.jsonl"
        # the container tier's worker (another uid) may not read what the judge writes
        results.touch(mode=0o600)
        spec = JudgeSpec(
            root=root,
            scratch=scratch,
            staff_root=staff_root,
            results=results,
            readonly=public_fixtures(staff_root),
            limits=limits,
            gpu=gpu,
            jobs=jobs,
            insecure=insecure,
            only=None if only is None else tuple(only),
            preload=tuple(preload),
            tier=tier,
        )
        (base / "spec.json").touch(mode=0o600)
        spec.write(base / "spec.json")
        args = [
            *(a for p in PLUGINS for a in ("-p", p)),
            "--judge",
            str(base / "spec.json"),
            "-c",
            str(staff_root / "pyproject.toml"),
            "--basetemp",
            str(basetemp(scratch)),
            "-q",
            "-rN",
            f"--timeout={limits.test_timeout:g}",
            "--color=no",
            "--continue-on-collection-errors",
            "-p",
            "no:cs336_progress",
            "-p",
            "no:cs336_rules",
        ]
        args += [
            "--ignore",
            str(staff_root / "tests" / "staff"),
        ]  # staff tooling tests: never graded
        args += ["--collect-only", "tests"] if collect_only else ["tests"]
        prefix: list[str] = []
        bwrap = find_bwrap()
        if tier == "bubblewrap" and not insecure and not collect_only and bwrap is not None:
            # The judge sees the machine as it is, except that its scratch folder (its own folder and
            # the worker's copy of it, mirror.py) is a private tmpfs of capped size: a hard disk limit.
            # The worker's copy has a tmpfs of its own, so a worker that fills its disk cannot fill the judge's.
            _, worker_dir, _ = layout(scratch)
            prefix = [
                bwrap,
                "--dev-bind",
                "/",
                "/",
                "--size",
                str(limits.disk_bytes),
                "--tmpfs",
                str(scratch),
                "--size",
                str(limits.disk_bytes),
                "--tmpfs",
                str(worker_dir),
                "--die-with-parent",
                "--",
            ]
        run = JudgeRun()
        # the judge records its own outcomes (a JSON line per test as it ends: see judge.py)
        # the collection (once per batch, before any grading) writes bytecode unless this grader
        # was told to write none (run_autograder: nothing is written into the staff tree there)
        write = collect_only and not sys.dont_write_bytecode
        env = _judge_env(gpu, threads_per_job(limits, jobs), write_bytecode=write)
        if speed_seed is not None:
            env[SEED_ENV] = str(speed_seed)
        # never .hypothesis/ in the staff tree; a fresh one per judge, with the batch's Unicode tables
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(base / "hypothesis")
        unicode_tables.seed(hypothesis_home, base / "hypothesis")
        with watch_results(results, tick):
            job = PytestJob(
                staff_root,
                args,
                outcomes=False,
                inherit_env=False,
                prefix=prefix,
                env=env,
                timeout=limits.run_timeout,
            )
            try:
                if meanwhile is not None:
                    wait_for_collection(results, job)
                    meanwhile()
            finally:
                session = job.result()
        run.console = session.output[-200_000:]
        if session.timed_out:
            run.timed_out = True
            run.notes.append(
                f"the run exceeded its limit of {limits.run_timeout:g} s and was stopped"
            )
        _read_results(results, run)
        return run
    finally:
        shutil.rmtree(base, ignore_errors=True)


#: Seconds between the grader's looks for the judge's first line (``wait_for_collection``), and
#: the longest it waits for one.
COLLECTION_POLL, COLLECTION_WAIT = 0.05, 120.0


def wait_for_collection(results: Path, job: PytestJob) -> None:
    """Wait until the judge writes its first line to ``results`` (its tests are collected, its first
    worker is ready or nearly), or ends, or ``COLLECTION_WAIT`` seconds pass: until then the judge
    and its first worker each keep a core busy, and the judge's start is what every test waits for
    (two cores, load 1.9 from other work: the judge's conftest import took 3.6 s beside its worker's
    start and the rules check, 1.9 s alone)."""
    deadline = time.monotonic() + COLLECTION_WAIT
    while job.running() and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if results.stat().st_size:
                return
        time.sleep(COLLECTION_POLL)


@contextmanager
def watch_results(results: Path, tick: Callable[[int], None] | None) -> Iterator[None]:
    """While the judge runs, call ``tick(n)`` from a thread each time ``n`` more tests have ended: the
    judge writes a ``result`` line to ``results`` as each test ends (read here as it grows, twice a
    second; a line is counted once it is whole). No ``tick``: nothing is watched."""
    if tick is None:
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        pos, rest = 0, b""
        while True:
            last = stop.wait(0.5)
            try:
                with open(results, "rb") as f:
                    f.seek(pos)
                    data = f.read()
            except OSError:
                data = b""
            pos += len(data)
            *lines, rest = (rest + data).split(b"\n")
            ended = 0
            for line in lines:
                try:
                    ended += json.loads(line).get("event") == "result"
                except (ValueError, AttributeError):
                    continue
            if ended:
                tick(ended)
            if last:
                return

    thread = threading.Thread(target=watch, name="judge-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def run_judges(
    plan: Plan,
    files: dict[str, bytes],
    only: list[str],
    tick: Callable[[int], None] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> JudgeRun:
    """One submission's tests: the visible and the hidden ones in two judges at once where the cores allow, else one judge.
    ``meanwhile()`` is called once, while a judge runs (``run_judge``).

    A judge and its worker take turns (one waits while the other runs), so a pair keeps about one
    core busy: with two cores per submission (``--jobs`` of them), the hidden tests' judge, with a
    fresh worker of its own as before, runs beside the visible tests' instead of after them, and the
    submission is graded in about the time of the longer half. Each half gets half the threads
    (``jobs`` doubled). CPU runs only: GPU tests time kernels, and two judges would share the GPU.
    Bubblewrap tier only (``PARALLEL_TIERS``): there the two workers share no writable folder, no
    network and no IPC, so the hidden tests' worker cannot pass what it is given to the visible
    tests' worker while both run (their output is shown at once). On the container tier two uids
    share /tmp and the loopback network, so the hidden tests wait for the visible ones, as before,
    and no other submission's judge runs on this machine meanwhile (``container.one_submission_at_a_time``).
    """
    visible = [n for n in only if not n.startswith(HIDDEN_PREFIX)]
    hidden = [n for n in only if n.startswith(HIDDEN_PREFIX)]
    # one seed for the submission's speed tests, whichever judge runs them: one line to replay it
    seed = None if os.environ.get(SEED_ENV, "").strip() else draw_seed()

    def judge(tests: list[str], jobs: int, meanwhile: Callable[[], None] | None) -> JudgeRun:
        return run_judge(
            plan.staff_root,
            files,
            only=tests,
            jobs=jobs,
            limits=plan.limits,
            gpu=plan.device != "cpu",
            insecure=plan.insecure,
            preload=plan.preload,
            tier=plan.tier,
            tick=tick,
            meanwhile=meanwhile,
            speed_seed=seed,
            hypothesis_home=plan.hypothesis_home,
        )

    if plan.tier == container.TIER and not plan.insecure:
        # one submission at a time on this machine (its workers share /tmp, loopback and maybe SysV IPC
        # with any other's), with every core, and what earlier workers left removed before and after
        with container.one_submission_at_a_time():
            return judge(only, 1, meanwhile)
    if (
        plan.judges < 2
        or plan.tier not in PARALLEL_TIERS
        or plan.device != "cpu"
        or usable_cores() < 2 * plan.jobs
        or not visible
        or not hidden
    ):
        return judge(only, plan.jobs, meanwhile)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="judge") as ex:
        halves = [
            ex.submit(judge, part, 2 * plan.jobs, work)
            for part, work in ((visible, meanwhile), (hidden, None))
        ]
        return merge_runs([h.result() for h in halves])


def merge_runs(runs: list[JudgeRun]) -> JudgeRun:
    """One JudgeRun of judges that ran disjoint sets of tests (``run_judges``)."""
    out = JudgeRun()
    for i, run in enumerate(runs):
        out.outcomes.update(run.outcomes)
        out.reached.update(run.reached)
        out.collected.update(run.collected)
        out.collect_errors.update(run.collect_errors)
        out.notes += [n for n in run.notes if n not in out.notes]
        peaks = [int(r.isolation[PEAK]) for r in (out, run) if PEAK in r.isolation]
        out.isolation = {**run.isolation, **out.isolation}
        if peaks:  # the bound (limits.judge_growth_bound) holds per judge process: the larger peak is the one to check
            out.isolation[PEAK] = str(max(peaks))
        out.timed_out = out.timed_out or run.timed_out
        out.worker_starts += run.worker_starts
        out.worker_crashes += run.worker_crashes
        out.console += (f"\n===== judge {i + 1} of {len(runs)} =====\n" if i else "") + run.console
    return out


def graded_outcome(phases: list[dict]) -> tuple[str, str]:
    """(outcome, output) of a test from its phases (``session/outcomes.py``): the first failure wins
    (``crashed``/``timeout`` when the judge said so, else ``failed`` in the call, ``error`` around it),
    then the first skip (an xfail is a skip); what the worker printed follows a failure's report."""
    failed = [p for p in phases if p["outcome"] == "failed"]
    skipped = [p for p in phases if p["outcome"] == "skipped"]
    if failed:
        p = failed[0]
        outcome = p["properties"].get("judge_outcome") or (
            "failed" if p["when"] == "call" else "error"
        )
        text = p["text"] + "".join(
            f"\n----- {title} -----\n{content}" for q in phases for title, content in q["sections"]
        )
        return outcome, clip(text)
    if skipped:
        p = skipped[0]
        return "skipped", clip(
            f"xfail: {p['wasxfail']}" if p["wasxfail"] is not None else p["text"]
        )
    return "passed", ""


def _read_results(path: Path, run: JudgeRun) -> None:
    if not path.is_file():
        run.notes.append("the judge wrote no results (see console.txt)")
        return
    for event in events(path):
        kind = event.get("event")
        if kind == "result":
            outcome, output = graded_outcome(event["phases"])
            run.outcomes[event["nodeid"]] = (outcome, output, float(event.get("duration", 0.0)))
            run.reached[event["nodeid"]] = list(event.get("reached", []))
        elif kind == "collected":
            run.collected = {i["nodeid"]: i["markers"] for i in event["items"]}
        elif kind == "collect_error":
            run.collect_errors[event["nodeid"]] = event.get("longrepr", "")
        elif kind == "note":
            run.notes.append(event.get("text", ""))
        elif kind == "finish":
            run.isolation = dict(event.get("isolation", {}))
            # what grading this submission cost the judge (the bound: limits.py)
            if event.get(PEAK):
                run.isolation[PEAK] = str(int(event[PEAK]))
            run.worker_starts = int(event.get("worker_starts", 0))
            run.worker_crashes = int(event.get("worker_crashes", 0))
            if event.get("console"):
                run.console += WORKER_OUTPUT + event["console"]


def collection_file(staff_root: Path, cache_dir: Path) -> Path:
    """Where ``collect_expected`` keeps the collection of ``staff_root`` as it is now, in ``cache_dir``."""
    return cache_dir / f"collected-{tree_fingerprint(staff_root)[:16]}.json"


def collect_expected(
    staff_root: Path, cache_dir: Path | None = None, limits: Limits | None = None
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Graded test ids (-> markers), collected by the judge with no submission at all, and collection errors."""
    cache = None if cache_dir is None else collection_file(staff_root, cache_dir)
    if cache is not None and cache.is_file():
        data = json.loads(cache.read_text())
        return {k: tuple(v) for k, v in data["collected"].items()}, data["errors"]
    run = run_judge(
        staff_root, None, only=None, limits=limits or Limits(), gpu=False, collect_only=True
    )
    collected = {
        k: tuple(v)
        for k, v in run.collected.items()
        if "staff" not in v and not k.startswith("tests/staff/")
    }
    if not collected:
        raise RuntimeError(
            "collecting the staff tests failed:\n"
            + "\n".join([*run.collect_errors.values(), *run.notes, run.console[-3000:]])
        )
    if cache is not None and not run.collect_errors:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"collected": collected, "errors": run.collect_errors}))
    return collected, run.collect_errors


def gpu_available() -> bool:
    """A cheap check that does not import torch: an NVIDIA driver and device node exist."""
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidiactl").exists()


class SandboxRefused(RuntimeError):
    """No sandbox can start here and --insecure was not given."""


def make_plan(
    staff_root: Path,
    *,
    rubric_path: Path | None = None,
    device: str = "cpu",
    limits: Limits | None = None,
    jobs: int = 1,
    cache_dir: Path | None = None,
    insecure: bool = False,
    warn=print,
) -> Plan:
    """Collect the graded tests, resolve the rubric, fix the device, check the sandbox: once per batch."""
    staff_root = Path(staff_root).resolve()
    if device not in ("cpu", "gpu", "auto", "all"):
        raise ValueError(f"device={device!r} must be one of cpu, gpu, auto")
    if device == "auto":
        device = "all" if gpu_available() else "cpu"
    tier = "none"
    if not insecure:
        chosen, why = choose_tier(staff_root, public_fixtures(staff_root), device != "cpu")
        if chosen is None:
            raise SandboxRefused(
                f"cannot sandbox the submissions on this machine: {why}. Fix that, or pass "
                "--insecure to grade without a sandbox (every result will say so)"
            )
        if why:
            warn(
                f"bubblewrap cannot start here ({why}); grading on the container tier (each worker a uid never given to another, one submission at a time)"
            )
        tier = chosen
    limits = limits or Limits()
    # before any worker starts: each imports torch from bytecode
    slow_imports = ensure_compiled(workers=jobs)
    if slow_imports:
        warn(f"warning: {slow_imports}")
    collected, errors = collect_expected(staff_root, cache_dir, limits)
    for nodeid, err in errors.items():
        warn(
            f"warning: the staff tests in {nodeid} do not even collect; they are not graded:\n{err[-1500:]}"
        )
    rubric = Rubric.load(rubric_path or find_rubric(staff_root))
    items = rubric.resolve(collected)
    needs_gpu = {n: bool(GPU_MARKERS & set(m)) for n, m in collected.items()}
    h = hashlib.sha256()
    for n in sorted(items):
        h.update(
            f"{n}|{items[n].points}|{items[n].visibility}|{items[n].concept}|{needs_gpu[n]}\n".encode()
        )
    h.update(f"{tree_fingerprint(staff_root)}|{device}|{insecure}|{tier}|{GRADER_VERSION}".encode())
    preload = worker_preload(staff_root)
    return Plan(
        staff_root,
        items,
        needs_gpu,
        {c.name: c.title for c in rubric.concepts.values()},
        device,
        limits,
        jobs,
        h.hexdigest(),
        insecure,
        tier,
        preload,
        # hypothesis's Unicode tables for every judge, kept with the collection's cache
        hypothesis_home=None if cache_dir is None else unicode_tables.build(cache_dir),
    )


def score(
    plan: Plan,
    name: str,
    intake: Intake,
    run: JudgeRun | None,
    elapsed: float,
    error: str | None = None,
    rules: delegation.Report | None = None,
) -> GradeResult:
    """Turn a run (or a rejection, or a grader error) into a scored GradeResult covering every expected
    test; ``rules``: the rules check of the submission, if already made (``delegation.check_submission``)."""
    tests = []
    errors = run.collect_errors if run else {}
    aborted = "\n".join(run.notes) if run and run.timed_out else ""
    if run is None or error is not None:
        rules = None
    elif rules is None:
        rules = delegation.check_submission(intake.files, plan.staff_root)
    forbidden = (
        delegation.penalties(
            rules, run.reached, {n: i.concept for n, i in plan.items.items()}, plan.staff_root
        )
        if rules is not None and run is not None
        else {}
    )
    for nodeid, item in plan.items.items():
        device = "gpu" if plan.needs_gpu[nodeid] else "cpu"
        duration = 0.0
        if error is not None:
            outcome, output = "not_run", f"the grader failed on this submission: {error}"
        elif run is None:
            outcome, output = "not_run", f"the submission was rejected: {intake.error}"
        elif not plan.runs_here(nodeid):
            outcome = "pending"
            output = (
                "needs a GPU runner: grade with --device gpu there and combine with `cs336 merge`"
                if device == "gpu"
                else "graded on the CPU runner; combine with `cs336 merge`"
            )
        elif nodeid in run.outcomes:
            outcome, output, duration = run.outcomes[nodeid]
            if outcome == "skipped" and device == "gpu":
                outcome = "pending"
                output = (
                    f"this runner cannot run it ({output}); grade it on a runner that can and merge"
                )
            elif outcome == "passed" and nodeid in forbidden:
                outcome, output = "failed", forbidden[nodeid]
        else:
            module = nodeid.split("::", 1)[0]
            err = next(
                (e for k, e in errors.items() if k == module or module.startswith(k + "/")), None
            )
            if err is not None:
                outcome, output = "error", f"the test module failed to collect:\n{err}"
            elif aborted:
                outcome, output = "not_run", f"the run was cut short before this test:\n{aborted}"
            else:
                outcome, output = "not_run", "the judge did not report this test (see console.txt)"
        earned = item.points if outcome == "passed" else 0.0
        tests.append(
            TestResult(
                nodeid,
                outcome,
                earned,
                item.points,
                item.concept,
                item.visibility,
                device,
                output,
                duration,
            )
        )
    if error is not None:
        status = "error"
    elif run is None:
        status = "rejected"
    elif run.timed_out:
        status = "timeout"
    elif not run.outcomes and any(t.outcome == "not_run" for t in tests):
        status = "error"  # the judge itself failed: console.txt says why
    elif any(t.outcome == "crashed" for t in tests):
        status = "crashed"
    else:
        status = "ok"
    notes = list(intake.notes)
    if error is not None:
        notes.append(f"grader error: {error}")
    elif run is None:
        notes.append(f"rejected: {intake.error}")
    else:
        notes += run.notes
        notes += delegation.notes(rules, intake.files, plan.staff_root) if rules is not None else []
        if run.worker_crashes:
            notes.append(
                f"the worker had to be restarted {run.worker_crashes} times (after a crash, a timeout "
                "or an unusable reply); the tests that caused it say so"
            )
        if plan.insecure:
            notes.append(
                "NOT SANDBOXED: graded with --insecure; the submission ran as a plain process"
            )
    return GradeResult(
        submission=name,
        status=status,
        tests=tests,
        execution_time=elapsed,
        sha256=intake.sha256,
        fingerprint=plan.fingerprint,
        device=plan.device,
        concepts=plan.concepts,
        ignored=list(intake.ignored),
        notes=notes,
        isolation=run.isolation if run else {},
    )


def finished(folder: Path, sha256: str, fingerprint: str) -> bool:
    """Was this exact submission already graded with this exact plan? (``results.json`` is last.)"""
    try:
        x = json.loads((folder / "results.json").read_text())["extra_data"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (
        x.get("sha256") == sha256
        and x.get("fingerprint") == fingerprint
        and x.get("status") != "error"
    )


def skipped_row(folder: Path, sha256: str, plan: Plan) -> dict | None:
    """The summary row of a submission ``finished`` in ``folder`` (marked skipped), else None."""
    if not finished(folder, sha256, plan.fingerprint):
        return None
    x = json.loads((folder / "results.json").read_text())
    return {
        "name": folder.name,
        "score": x["score"],
        "max_score": x["extra_data"].get("max_score", 0.0),
        "status": x["extra_data"]["status"],
        "skipped": True,
    }


def already_graded(submission: Path, name: str, out: Path, plan: Plan) -> dict | None:
    """:func:`skipped_row` for ``submission`` graded into ``out/name/``, checked without grading it."""
    if not (out / name / "results.json").is_file():
        return None
    return skipped_row(
        out / name,
        read_submission(Path(submission), staff_adapters=plan.staff_root / "adapters.py").sha256,
        plan,
    )


def grade_one(
    submission: Path,
    name: str,
    out: Path,
    plan: Plan,
    force: bool = False,
    tick: Callable[[int], None] | None = None,
) -> dict:
    """Grade ``submission`` into ``out/name/``; always writes a result, even when the grader itself fails.
    ``tick(n)``: called as each ``n`` more of its tests end (``watch_results``), for a progress line."""
    start = time.monotonic()
    folder = out / name
    intake = Intake(name=name, source=str(submission))
    try:
        intake = read_submission(Path(submission), staff_adapters=plan.staff_root / "adapters.py")
        if not force and (row := skipped_row(folder, intake.sha256, plan)) is not None:
            return row
        run, screened = None, []
        if intake.error is None:
            tests = [n for n in plan.items if plan.runs_here(n)]

            def screen() -> None:
                # the rules check reads the code (runs nothing) while the judge runs it; so is
                # what scoring reads of the staff tree built then (once per batch)
                screened.append(delegation.check_submission(intake.files, plan.staff_root))
                delegation.read_staff_tables(plan.staff_root)

            run = run_judges(plan, intake.files, tests, tick, meanwhile=screen)
        rules = screened[0] if screened else None
        result = score(plan, name, intake, run, time.monotonic() - start, rules=rules)
        console = run.console if run is not None else ""
    except Exception as e:  # a grader bug on one submission: that submission still gets a result
        result = score(
            plan, name, intake, None, time.monotonic() - start, error=f"{type(e).__name__}: {e}"
        )
        console = ""
    try:
        result.write(folder)
    except Exception as e:  # a result that cannot be written still leaves one that says why
        result = score(
            plan,
            name,
            intake,
            None,
            time.monotonic() - start,
            error=f"writing the result failed: {type(e).__name__}: {e}",
        )
        result.write(folder)
    if console:
        # what the submission printed is in it: control characters escaped (a reader may cat it)
        (folder / "console.txt").write_bytes(
            neutral.controls(console).encode("utf-8", "backslashreplace")
        )
    return {
        "name": name,
        "score": result.score,
        "max_score": result.max_score,
        "status": result.status,
        "skipped": False,
    }
