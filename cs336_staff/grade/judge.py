"""The judge: a pytest plugin that runs the staff's tests in this trusted process, the submission elsewhere.

Loaded with ``-p cs336_staff.grade.judge --judge SPEC.json`` (``grader.py`` does this, once per
submission, in a subprocess whose working directory is the staff repository). Before any test
module is imported it

* replaces the ``adapters`` module with a proxy whose functions send each call to the worker
  (``remote.py``), and points ``tests.boundary.remote`` there, so drivers (``@driver``) run in the
  worker too, each as one round trip;
* makes ``cs336_assignment`` unimportable here: a test that reached around the adapters would
  otherwise test the staff's reference instead of the submission;
* orders the run: visible tests first, then hidden ones in a fresh worker, so nothing the worker
  saw of a hidden test's inputs can appear in a visible test's output (where two cores per
  submission are free on the bubblewrap tier, ``grader.run_judges`` gives the hidden tests a judge
  of their own instead, running at the same time: its worker is fresh from the start, and cannot
  reach the other);
* never waits for a worker to start where it can help it: the first one (on bubblewrap and
  without a sandbox, the sandbox's zygote that forks it: ``warm.py``) is launched before this
  process imports the tests' conftest; later workers fork from the zygote in a fraction of a
  second; on the container tier, where every worker starts cold, the fresh ones the run will need
  (the hidden tests' one, and one for each test that may kill the worker, ``may_kill``) start
  ahead, one at a time, while earlier tests run (``Remote.want_spares``); each test's reset of
  the worker's RNGs rides on its first request; and once the results are written the process
  ends without the interpreter's teardown (``pytest_unconfigure``);
* records each test's outcome, with what the worker printed during it, the traceback of an error
  from the submission that failed it, and the adapters and drivers it called (``reached``), as one JSON line in the results file as soon as the test ends
  (a run killed midway keeps what it finished), through the staff tools' one outcome recorder
  (``session/outcomes.py``), adding why a test crashed or timed out.

The spec is a ``spec.JudgeSpec`` (written by the grader as JSON, or built here for ``--split``); its
``scratch`` holds the judge's folder with pytest's basetemp, the worker's copy of it and the
judge's private temporary folder (``mirror.py``, ``spec.scratch_folders``). Its ``tier`` (``sandbox.TIERS``) says how the worker is isolated.

Deliberately left out: parallelism inside one judge (the batch runs submissions in parallel, and
``grader.run_judges`` a submission's visible and hidden tests in two judges).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import inspect
import os
import random
import resource
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from cs336_staff.grade import errors
from cs336_staff.grade import remote as remote_mod
from cs336_staff.grade.bytecode import ensure_compiled
from cs336_staff.grade.mirror import Mirror
from cs336_staff.grade.sandbox import choose_tier, stage
from cs336_staff.grade.spec import (
    HIDDEN_PREFIX,
    JudgeSpec,
    basetemp,
    public_fixtures,
    scratch_folders,
    worker_preload,
)
from cs336_staff.grade.warm import WorkerStarts
from cs336_staff.session.outcomes import Recorder, clip
from cs336_staff.worker import codec
from cs336_staff.worker.adapter_rule import read_adapters

#: The title of the report sections that carry what the worker printed during a test.
WORKER_OUTPUT = "worker output"
#: The title of the report section with the traceback, in the submission's code, of an error that failed a test.
WORKER_TRACEBACK = "traceback in your code (sandboxed worker)"


def _submission_traceback(error: BaseException) -> str:
    """The worker's traceback of the first error rebuilt from it along ``error``'s cause and context chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = errors.worker_traceback(current)
        if found:
            return found
        current = current.__cause__ or current.__context__
    return ""


def adapter_names(adapters_file: Path) -> list[str]:
    """The adapters, read from the source (importing it would import the reference)."""
    return list(read_adapters(adapters_file.read_text()))


class AdaptersProxy(types.ModuleType):
    """Stands in for ``adapters`` in the judge: each function sends its call to the worker."""

    def __init__(self, remote: remote_mod.Remote | Tracer, names: list[str]) -> None:
        super().__init__(
            "adapters", "The submission's adapters, called across the sandbox boundary."
        )
        self.__all__ = list(names)
        for name in names:
            setattr(self, name, self._proxy(remote, name))

    @staticmethod
    def _proxy(remote: remote_mod.Remote | Tracer, name: str):
        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # a failure shows the test's line and the submission's error
            return remote.call(f"adapters:{name}", args, kwargs)

        call.__name__ = call.__qualname__ = name
        return call


class Tracer:
    """Records which adapters and drivers each test called (the judge's own record: the rules check,
    ``grade/delegation.py``, takes the points of a test that reached a forbidden API)."""

    def __init__(self, remote: remote_mod.Remote) -> None:
        self.remote = remote
        self.targets: set[str] = set()

    def call(self, target: str, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True  # a failure shows the test's line and the submission's error
        self.targets.add(target)
        return self.remote.call(target, args, kwargs)

    def drive(self, target: str, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True
        # a driver's first argument, when a string, names which of its module's student classes it runs
        # ("adam": delegation.py's tables), so a rule broken by one optimizer costs that optimizer's tests only
        self.targets.add(f"{target}#{args[0]}" if args and isinstance(args[0], str) else target)
        return self.remote.drive(target, args, kwargs)

    def call_killed(self, target: str, args: tuple, kwargs: dict, **when: Any) -> Any:
        __tracebackhide__ = True
        self.targets.add(target)
        return self.remote.call_killed(target, args, kwargs, **when)

    def printed(self) -> str:
        return self.remote.printed()

    def worker_path_stamp(self, path: Any) -> Any:
        return self.remote.worker_path_stamp(path)

    def take(self) -> list[str]:
        out, self.targets = sorted(self.targets), set()
        return out

    def worker_pids(self) -> list[int]:
        """The worker's processes, for judge-side observations (``Remote.worker_pids``)."""
        return self.remote.worker_pids()


class NoSubmissionImports(importlib.abc.MetaPathFinder):
    """Refuses ``cs336_assignment`` in the judge: the submission is reached only across the boundary."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "cs336_assignment" or fullname.startswith("cs336_assignment."):
            raise ImportError(
                f"the grading judge does not import {fullname}: tests reach the submission only through "
                "`adapters` or a @driver (tests/scenarios/)"
            )
        return None


def may_kill(test: Any) -> bool:
    """Whether a test function may have a run killed midway (``tests.boundary.killed_midway``, which
    kills the worker in grading): its code names that function, or a function that does (of its
    module or of a test module it names, such as a scenario module), at any depth. Read from the
    names in the code, nothing run; the judge starts a spare worker for each such test a module
    ahead (``Judge.pytest_runtest_setup``), and nothing else depends on it."""
    kill = getattr(sys.modules.get("tests.boundary"), "killed_midway", None)
    stack, seen = [inspect.unwrap(test)], set()
    while kill is not None and stack:
        function = stack.pop()
        code = getattr(function, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        names, codes = set(), [code]
        while codes:  # the names of the function's code and of the code nested in it
            c = codes.pop()
            names.update(c.co_names)
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        scopes = [function.__globals__] + [
            vars(v)
            for v in function.__globals__.values()
            if isinstance(v, types.ModuleType) and v.__name__.startswith("tests.")
        ]
        for value in (scope[n] for scope in scopes for n in names if n in scope):
            if value is kill:
                return True
            if isinstance(value, types.FunctionType):
                stack.append(value)
    return False


#: The seed of the judge's global RNGs (random, numpy, torch) at the start of every test.
JUDGE_RNG_SEED = 0


def seed_global_rngs(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global RNGs (those imported here; importing one costs seconds)."""
    random.seed(seed)
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if np is not None:
        np.random.seed(seed)
    if torch is not None:
        # the CPU generator, the one that crosses (torch.manual_seed also queues a lazy CUDA
        # seeding with a stack trace: ~2 ms per test)
        torch.default_generator.manual_seed(seed)


def make_remote(spec: JudgeSpec) -> remote_mod.Remote:
    """The judge's end of ``spec``'s workers (``remote.Remote``), none started yet."""
    limits = spec.limits
    judge_dir, worker_dir, _ = scratch_folders(spec.scratch)
    # the worker sees its own copy of the judge's folder at the judge's path: mounted there by
    # bubblewrap, swapped in around each call on the container tier (no mount namespace there);
    # without a sandbox it shares the judge's (and could change it: NOT SANDBOXED)
    mirror = (
        None
        if spec.insecure
        else Mirror(
            judge_dir,
            worker_dir,
            limits.output_file_bytes,
            limits.output_entries,
            exchange=spec.tier == "container",
        )
    )
    return remote_mod.Remote(
        WorkerStarts(spec, mirror),
        reply_limit=limits.reply_bytes,
        value_limit=limits.value_bytes,
        message_chars=limits.message_chars,
        mirror=mirror,
        tree_limit=limits.tree_bytes,
    )


class Judge:
    def __init__(
        self, config: pytest.Config, spec: JudgeSpec, remote: remote_mod.Remote | None = None
    ) -> None:
        self.config, self.spec = config, spec
        # each test's outcome as it ends, with what the worker printed and what the test reached
        self.recorder = Recorder(
            spec.results,
            sections=(WORKER_OUTPUT, WORKER_TRACEBACK),
            extra=lambda nodeid: {"reached": self.tracer.take()},
        )
        self.only = set(spec.only) if spec.only is not None else None
        self.remote = remote if remote is not None else make_remote(spec)
        self.tracer = Tracer(self.remote)  # the adapters and scenarios each test calls
        self._first_hidden: str | None = None
        self._spares_wanted: dict[str, int] = {}  # nodeid -> the spare workers wanted from it on
        self.exitstatus: int | None = None  # the run's, once it finished
        #: ``--split``'s own folder (its staged tree, scratch and results: 140 MB), removed at the end
        self.owned: Path | None = None
        self.saved_tmp: tuple[str | None, str | None] = (
            None,
            None,
        )  # tempfile's and $TMPDIR before

    def install(self, staff_root: Path) -> None:
        sys.meta_path.insert(0, NoSubmissionImports())
        sys.modules["adapters"] = AdaptersProxy(
            self.tracer, adapter_names(staff_root / "adapters.py")
        )
        import tests.boundary

        tests.boundary.remote = self.tracer
        codec.use_data_types(tests.boundary.DATA_TYPES)

    def pytest_report_header(self, config: pytest.Config) -> str:
        """The isolation tier, first thing in the run's output (``--split`` chooses it as ``cs336 grade`` does)."""
        tier = "none" if self.spec.insecure else self.spec.tier
        return f"cs336 judge: the submission's worker runs on the {tier} tier (sandbox.TIERS)"

    def _emit(self, record: dict) -> None:
        self.recorder.emit(record)

    # -- collection ------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.only is not None:
            keep = [i for i in items if i.nodeid in self.only]
            config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in self.only])
            items[:] = keep
        items.sort(key=lambda i: i.nodeid.startswith(HIDDEN_PREFIX))  # stable: visible first
        first = next((k for k, i in enumerate(items) if i.nodeid.startswith(HIDDEN_PREFIX)), None)
        # a judge of hidden tests alone (grader.run_judges) starts with a fresh worker: nothing to switch
        self._first_hidden = items[first].nodeid if first else None

    # -- running ---------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if not session.config.option.collectonly and session.items:
            try:
                self.remote.start()  # the worker prepared while the tests were collected
            except errors.WorkerError as e:  # every test will say so too
                self._emit({"event": "note", "text": str(e)})
        # The fresh workers the run will need from each test on: the hidden tests' one (until they
        # begin), and one for each test that may kill the worker (may_kill) still to come. They
        # start ahead, one at a time, while earlier tests run (Remote.want_spares).
        killing: dict[Any, bool] = {}
        kills, switch = 0, self._first_hidden is not None
        for item in reversed(session.items):
            function = getattr(item, "function", None)
            if function is not None and function not in killing:
                killing[function] = may_kill(function)
            kills += killing.get(function, False)
            visible = not item.nodeid.startswith(HIDDEN_PREFIX)
            self._spares_wanted[item.nodeid] = kills + (switch and visible)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.nodeid == self._first_hidden:
            self.remote.restart()  # a fresh worker for hidden tests: the spare, which has answered no call
            try:
                self.remote.start()
            except errors.WorkerError as e:
                self._emit({"event": "note", "text": str(e)})
        self.remote.want_spares(self._spares_wanted.get(item.nodeid, 0))
        # Each test starts from one seed on both sides, as in a student's run (tests/conftest.py): the
        # judge's here, the worker's by its reset, so the same submission graded twice draws the same numbers.
        seed_global_rngs(JUDGE_RNG_SEED)
        self.remote.reset()  # every test starts from the worker's initial global RNG states
        self.remote.take_output()

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.tracer.take()  # forget calls made between tests

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        outcome = yield
        try:
            self.remote.settle()  # a limit broken during the test fails this test (makereport: "crashed")
        except errors.WorkerCrashed as e:
            if outcome.excinfo is None:
                outcome.force_exception(e)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        # classify by the exception's type, never by text the worker chose
        if call.excinfo is not None:
            if call.excinfo.errisinstance((errors.WorkerCrashed, errors.WorkerUnavailable)):
                report.user_properties.append(("judge_outcome", "crashed"))
            elif call.excinfo.type is pytest.fail.Exception and str(call.excinfo.value).startswith(
                "Timeout"
            ):
                report.user_properties.append(("judge_outcome", "timeout"))
            traceback = _submission_traceback(call.excinfo.value)
            # the submission's frames, shown with the failure (never inside the exception)
            if traceback:
                report.sections.append((f"{WORKER_TRACEBACK} ({call.when})", traceback))
        printed = self.remote.take_output()
        if printed:
            report.sections.append((f"{WORKER_OUTPUT} ({call.when})", printed))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.exitstatus = int(exitstatus)
        self.remote.close()
        fresh = sys.modules.get("tests.fresh")
        # a speed test drew its inputs
        if fresh is not None and fresh.run_seed.cache_info().currsize:
            self._emit({"event": "note", "text": f"the speed tests' {fresh.replay_hint()}"})
        self._emit(
            {
                "event": "finish",
                "exitstatus": int(exitstatus),
                "isolation": self.remote.isolation,
                "worker_starts": self.remote.starts,
                "worker_crashes": self.remote.crashes,
                "judge_peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "console": clip("\n".join(self.remote.consoles), 64_000),
            }
        )

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Grading (``--judge``): every result is written and the workers are gone, so the process
        ends here, with the run's exit status: the interpreter's teardown that follows (pytest's
        garbage collections, then every module's, torch's among them) took 1-3 s and keeps nothing."""
        if self.owned is not None:  # --split: nothing of the run is read after it
            self.remote.close()  # a run that ended before its session finished
            tempfile.tempdir, tmpdir = self.saved_tmp  # as before the run, outside the folder
            if tmpdir is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = tmpdir
            shutil.rmtree(self.owned, ignore_errors=True)
        if self.exitstatus is None or not config.getoption("--judge"):
            return
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        os._exit(self.exitstatus)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cs336 judge (staff)")
    group.addoption(
        "--judge", default=None, help="grade a submission: path of the judge's JSON spec"
    )
    group.addoption(
        "--split",
        action="store_true",
        default=False,
        help="run the tests as grading does, split: this repository's reference in a sandboxed "
        "worker (on the tier cs336 grade would choose here: bubblewrap, else the container "
        "tier), the tests in this process (uv run pytest -p cs336_staff.grade.judge --split)",
    )
    group.addoption(
        "--split-insecure",
        action="store_true",
        default=False,
        help="--split, with the worker run without bubblewrap (implies --split)",
    )
    group.addoption(
        "--split-root",
        default=None,
        metavar="DIR",
        help="with --split: the worker runs DIR's adapters.py and cs336_assignment/ (another "
        "implementation: a mutant, a corpus entry) instead of this repository's",
    )


def split_tier(staff: Path, insecure: bool) -> str:
    """The isolation tier ``--split`` runs the worker on: chosen as ``cs336 grade`` chooses it
    (``sandbox.choose_tier``: bubblewrap, else the container tier), "none" with ``--split-insecure``;
    a usage error, saying why, where neither sandbox starts."""
    if insecure:
        return "none"
    tier, why = choose_tier(staff, public_fixtures(staff), gpu=True)
    if tier is None:
        raise pytest.UsageError(
            f"--split: no sandbox starts here ({why}). Fix that, or pass --split-insecure "
            "to run the reference's worker without one"
        )
    return tier


def split_spec(config: pytest.Config) -> JudgeSpec:
    """A judge spec that grades this repository's own reference (for ``--split``), or the
    implementation in ``--split-root``, on the tier ``split_tier`` chooses."""
    staff = Path(str(config.rootpath)).resolve()
    source = Path(config.getoption("--split-root") or staff).resolve()
    if not (source / "adapters.py").is_file():
        raise pytest.UsageError(
            f"--split-root {source}: no adapters.py there (an implementation is a folder "
            "with adapters.py and cs336_assignment/)"
        )
    insecure = bool(config.getoption("--split-insecure"))
    ensure_compiled()  # each worker then imports torch from bytecode (bytecode.py)
    tier = split_tier(staff, insecure)
    base = Path(tempfile.mkdtemp(prefix="cs336-split-"))
    # the container tier's worker (another uid) passes through
    base.chmod(0o711 if tier == "container" else 0o700)
    root, scratch = base / "root", base / "scratch"
    root.mkdir()
    scratch.mkdir()
    files = {
        p.relative_to(source).as_posix(): p.read_bytes()
        for p in [source / "adapters.py", *sorted((source / "cs336_assignment").rglob("*.py"))]
        if "__pycache__" not in p.parts
    }
    stage(root, staff, files)
    # inside the judge's folder, which the worker sees a copy of
    config.option.basetemp = str(basetemp(scratch))
    return JudgeSpec(
        root=root,
        scratch=scratch,
        staff_root=staff,
        results=base / "results.jsonl",
        readonly=public_fixtures(staff),
        gpu=True,
        preload=worker_preload(staff),
        insecure=insecure,
        tier=tier,
    )


#: The judge's ``Remote`` when ``pytest_load_initial_conftests`` already launched its first worker.
EARLY_REMOTE = pytest.StashKey[remote_mod.Remote]()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Grading (``--judge``): launch the first worker now, before this process imports the tests'
    conftest (torch, numpy, hypothesis: seconds), so that its imports and the worker's run side by
    side. Whatever fails here fails again in ``pytest_configure``, which reports it."""
    known = early_config.known_args_namespace
    path = getattr(known, "judge", None)
    if not path or getattr(known, "collectonly", False):
        return
    try:
        remote = make_remote(JudgeSpec.read(Path(path)))
    except Exception:  # noqa: BLE001 - reported by pytest_configure
        return
    remote.prepare_spare()
    early_config.stash[EARLY_REMOTE] = remote


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--judge")
    if path:
        spec = JudgeSpec.read(Path(path))
    elif config.getoption("--split") or config.getoption("--split-insecure"):
        spec = split_spec(config)
    else:
        return
    judge = Judge(config, spec, config.stash.get(EARLY_REMOTE, None))
    if not path:  # --split made the folder of its staged tree: removed when the run ends
        judge.owned = spec.root.parent
    judge.install(spec.staff_root)
    if not config.option.collectonly:
        # the first worker starts while the judge collects the tests (with --judge, it started earlier)
        judge.remote.prepare_spare()
    # the judge's own temporary files (tempfile.mkdtemp) go where the worker cannot reach: a test that
    # hands a file to the worker writes it under tmp_path
    private = scratch_folders(spec.scratch)[2]
    judge.saved_tmp = (tempfile.tempdir, os.environ.get("TMPDIR"))
    tempfile.tempdir = str(private)
    os.environ["TMPDIR"] = str(private)
    config.pluginmanager.register(judge, "cs336-judge")
    config.pluginmanager.register(judge.recorder, "cs336-outcomes")
    try:
        from hypothesis import settings

        # derandomize: one submission graded twice draws the same cases, so it gets the same grade
        settings.register_profile("cs336-judge", deadline=None, database=None, derandomize=True)
        settings.load_profile("cs336-judge")
    except ImportError:
        pass
