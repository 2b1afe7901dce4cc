"""The judge: a pytest plugin that runs the staff's tests in this trusted process, the submission elsewhere.

Loaded with ``-p cs336_staff.grade.judge --judge SPEC.json`` (``grader.py`` does this, once per
submission, in a subprocess whose working directory is the staff repository). Before any test
module is imported it

* replaces the ``adapters`` module with a proxy whose functions send each call to the worker
  (``remote.py``), and points ``tests.boundary.remote`` there, so ``@student_side`` scenarios run
  in the worker too;
* makes ``cs336_assignment`` unimportable here: a test that reached around the adapters would
  otherwise test the staff's reference instead of the submission;
* orders the run: visible tests first, then hidden ones in a fresh worker, so nothing the worker
  saw of a hidden test's inputs can appear in a visible test's output;
* records each test's outcome, with what the worker printed during it and the adapters and
  scenarios it called (``reached``), as one JSON line in the results file as soon as the test ends
  (a run killed midway keeps what it finished).

The spec (JSON): ``root`` (the staged worker root), ``scratch`` (the folder that holds the judge's
folder with pytest's basetemp, the worker's copy of it and the judge's private temporary folder:
``mirror.py``), ``staff_root``, ``readonly``, ``limits``, ``gpu``, ``jobs``, ``insecure``,
``tier`` (``sandbox.TIERS``), ``results`` (the JSONL file to write), ``only`` (the test ids to run; all if absent) and
``preload`` (modules the worker imports before it says ready; see ``grader.worker_preload``).

Deliberately left out: parallelism inside one submission (the batch runs submissions in parallel).
"""

from __future__ import annotations

import ast
import importlib.abc
import json
import os
import resource
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from cs336_staff.grade import remote as remote_mod
from cs336_staff.grade.limits import Limits
from cs336_staff.grade.mirror import Mirror, layout
from cs336_staff.grade.sandbox import WorkerSpec, start_worker
from cs336_staff.grade.worker import codec

OUTPUT_CHARS = 4000
HIDDEN_PREFIX = "tests/hidden/"


def adapter_names(adapters_file: Path) -> list[str]:
    """The adapters' public functions, read from the source (importing it would import the reference)."""
    tree = ast.parse(adapters_file.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith(("run_", "get_"))]


class AdaptersProxy(types.ModuleType):
    """Stands in for ``adapters`` in the judge: each function sends its call to the worker."""

    def __init__(self, remote: remote_mod.Remote | Tracer, names: list[str]) -> None:
        super().__init__("adapters", "The submission's adapters, called across the sandbox boundary.")
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
    """Records which adapters and scenarios each test called (the judge's own record: the rules
    check, ``grade/delegation.py``, takes the points of a test that reached a forbidden API)."""

    def __init__(self, remote: remote_mod.Remote) -> None:
        self.remote = remote
        self.targets: set[str] = set()

    def call(self, target: str, args: tuple, kwargs: dict) -> Any:
        __tracebackhide__ = True  # a failure shows the test's line and the submission's error
        # a scenario's first argument, when a string, names which student class it drives ("adam")
        self.targets.add(f"{target}#{args[0]}" if args and isinstance(args[0], str) and ":" in target
                         and not target.startswith("adapters:") else target)
        return self.remote.call(target, args, kwargs)

    def take(self) -> list[str]:
        out, self.targets = sorted(self.targets), set()
        return out


class NoSubmissionImports(importlib.abc.MetaPathFinder):
    """Refuses ``cs336_assignment`` in the judge: the submission is reached only across the boundary."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "cs336_assignment" or fullname.startswith("cs336_assignment."):
            raise ImportError(
                f"the grading judge does not import {fullname}: tests reach the submission only through "
                "`adapters` or a @student_side scenario (tests/scenarios/)"
            )
        return None


def _outcome(reports: list[pytest.TestReport]) -> tuple[str, str, float]:
    duration = sum(getattr(r, "duration", 0.0) or 0.0 for r in reports)
    failed = [r for r in reports if r.failed]
    if failed:
        r = failed[0]
        text = r.longreprtext or ""
        outcome = dict(r.user_properties).get("judge_outcome") or ("failed" if r.when == "call" else "error")
        return outcome, text, duration
    skipped = [r for r in reports if r.skipped]
    if skipped:
        r = skipped[0]
        if hasattr(r, "wasxfail"):
            return "skipped", f"xfail: {r.wasxfail}", duration
        text = str(r.longrepr[2]) if isinstance(r.longrepr, tuple) and len(r.longrepr) == 3 else str(r.longrepr)
        return "skipped", text, duration
    return "passed", "", duration


def _clip(text: str, limit: int = OUTPUT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n[... cut ...]\n" + text[-limit // 2 :]


class Judge:
    def __init__(self, config: pytest.Config, spec: dict) -> None:
        self.config, self.spec = config, spec
        self.results = Path(spec["results"])
        self.only = set(spec["only"]) if spec.get("only") is not None else None
        limits = Limits(**spec.get("limits", {}))
        insecure = bool(spec.get("insecure"))
        judge_dir, worker_dir, _ = scratch_folders(Path(spec["scratch"]))
        # the worker sees its own copy of the judge's folder at the judge's path; without a sandbox
        # there is no mount to do that, so it shares the judge's (and could change it: NOT SANDBOXED);
        # nor on the container tier (no mount namespace), where the folder is handed to its uid per call
        tier = spec.get("tier", "bubblewrap")
        shared = insecure or tier == "container"
        mirror = None if shared else Mirror(judge_dir, worker_dir, limits.output_file_bytes, limits.output_entries)
        worker = WorkerSpec(
            root=Path(spec["root"]), scratch=judge_dir, staff_root=Path(spec["staff_root"]),
            readonly=[Path(p) for p in spec.get("readonly", [])], limits=limits, gpu=bool(spec.get("gpu")),
            jobs=int(spec.get("jobs", 1)), insecure=insecure, tier=tier,
            preload=tuple(spec.get("preload", [])), scratch_source=None if shared else worker_dir,
        )
        self.remote = remote_mod.Remote(lambda: start_worker(worker), reply_limit=limits.reply_bytes,
                                        value_limit=limits.value_bytes, message_chars=limits.message_chars,
                                        mirror=mirror, tree_limit=limits.tree_bytes)
        self.tracer = Tracer(self.remote)
        self._phases: dict[str, list[pytest.TestReport]] = {}
        self._first_hidden: str | None = None
        self._outputs: dict[str, str] = {}

    def install(self, staff_root: Path) -> None:
        sys.meta_path.insert(0, NoSubmissionImports())
        sys.modules["adapters"] = AdaptersProxy(self.tracer, adapter_names(staff_root / "adapters.py"))
        import tests.boundary

        tests.boundary.remote = self.tracer
        codec.use_data_types(tests.boundary.DATA_TYPES)

    def _emit(self, record: dict) -> None:
        with self.results.open("a") as f:
            f.write(json.dumps(record) + "\n")

    # -- collection ------------------------------------------------------------------------
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._emit({"event": "collect_error", "nodeid": report.nodeid, "longrepr": _clip(str(report.longrepr))})

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.only is not None:
            keep = [i for i in items if i.nodeid in self.only]
            config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in self.only])
            items[:] = keep
        items.sort(key=lambda i: i.nodeid.startswith(HIDDEN_PREFIX))  # stable: visible first
        self._first_hidden = next((i.nodeid for i in items if i.nodeid.startswith(HIDDEN_PREFIX)), None)
        self._emit({"event": "collected", "items": [
            {"nodeid": i.nodeid, "markers": sorted({m.name for m in i.iter_markers()})} for i in items]})

    # -- running ---------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if not session.config.option.collectonly and session.items:
            try:
                self.remote.start()  # the worker prepared while the tests were collected
            except remote_mod.WorkerError as e:  # every test will say so too
                self._emit({"event": "note", "text": str(e)})
            if self._first_hidden is not None:
                self.remote.prepare_spare()  # the hidden tests' fresh worker starts while visible ones run

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if item.nodeid == self._first_hidden:
            self.remote.restart()  # a fresh worker for hidden tests: the spare, which has answered no call
            try:
                self.remote.start()
            except remote_mod.WorkerError as e:
                self._emit({"event": "note", "text": str(e)})
        if self.remote.worker is not None:
            try:
                self.remote.reset()  # every test starts from the worker's initial global RNG states
            except remote_mod.WorkerError:
                pass  # the test's own first call will start a fresh worker
        self.remote.take_output()

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self._phases[nodeid] = []
        self.tracer.take()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is not None:  # classify by the exception's type, never by text the worker chose
            if call.excinfo.errisinstance((remote_mod.WorkerCrashed, remote_mod.WorkerUnavailable)):
                report.user_properties.append(("judge_outcome", "crashed"))
            elif call.excinfo.type is pytest.fail.Exception and str(call.excinfo.value).startswith("Timeout"):
                report.user_properties.append(("judge_outcome", "timeout"))
        printed = self.remote.take_output()
        if printed:
            report.sections.append((f"worker output ({call.when})", printed))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._phases.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        reports = self._phases.pop(nodeid, [])
        outcome, text, duration = _outcome(reports)
        for r in reports:
            for title, content in r.sections:
                if title.startswith("worker output") and outcome not in ("passed", "skipped"):
                    text += f"\n----- {title} -----\n{content}"
        self._emit({"event": "result", "nodeid": nodeid, "outcome": outcome, "output": _clip(text),
                    "duration": round(duration, 4), "reached": self.tracer.take()})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.remote.close()
        fresh = sys.modules.get("tests.fresh")
        if fresh is not None and fresh.run_seed.cache_info().currsize:  # a speed test drew its inputs
            self._emit({"event": "note", "text": f"the speed tests' {fresh.replay_hint()}"})
        self._emit({"event": "finish", "exitstatus": int(exitstatus), "isolation": self.remote.isolation,
                    "judge_peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                    "worker_starts": self.remote.starts, "worker_crashes": self.remote.crashes, "console": _clip("\n".join(self.remote.consoles), 64_000)})


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cs336 judge (staff)")
    group.addoption("--judge", default=None, help="grade a submission: path of the judge's JSON spec")
    group.addoption("--split", action="store_true", default=False,
                    help="run the tests as grading does, split: this repository's reference in a sandboxed "
                         "worker, the tests in this process (uv run pytest -p cs336_staff.grade.judge --split)")
    group.addoption("--split-insecure", action="store_true", default=False,
                    help="--split, with the worker run without bubblewrap (implies --split)")


def split_spec(config: pytest.Config) -> dict:
    """A judge spec that grades this repository's own reference (for ``--split``)."""
    from cs336_staff.grade.sandbox import stage

    staff = Path(str(config.rootpath)).resolve()
    base = Path(tempfile.mkdtemp(prefix="cs336-split-"))
    root, scratch = base / "root", base / "scratch"
    root.mkdir()
    scratch.mkdir()
    files = {p.relative_to(staff).as_posix(): p.read_bytes()
             for p in [staff / "adapters.py", *sorted((staff / "cs336_assignment").rglob("*.py"))]
             if "__pycache__" not in p.parts}
    stage(root, staff, files)
    config.option.basetemp = str(basetemp(scratch))  # inside the judge's folder, which the worker sees a copy of
    from cs336_staff.grade.grader import worker_preload

    return {"root": str(root), "scratch": str(scratch), "staff_root": str(staff), "preload": list(worker_preload(staff)),
            "readonly": [str(p) for p in public_fixtures(staff)], "results": str(base / "results.jsonl"),
            "insecure": bool(config.getoption("--split-insecure")), "gpu": True}


def scratch_folders(scratch: Path) -> tuple[Path, Path, Path]:
    """``mirror.layout(scratch)``, created: the judge's folder (pytest's basetemp is its ``tmp``), the
    worker's copy of it, and the judge's private temporary folder (``tempfile``, never shown to the worker)."""
    folders = layout(scratch)
    for p in folders:
        p.mkdir(parents=True, exist_ok=True)
    return folders


def basetemp(scratch: Path) -> Path:
    """pytest's ``--basetemp`` for a judge whose spec names ``scratch``."""
    return layout(scratch)[0] / "tmp"


def public_fixtures(staff_root: Path) -> list[Path]:
    """The fixtures a worker may read: every entry of fixtures/ but fixtures/hidden."""
    fixtures = staff_root / "fixtures"
    return sorted(p for p in fixtures.iterdir() if p.name != "hidden") if fixtures.is_dir() else []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--judge")
    if path:
        spec = json.loads(Path(path).read_text())
    elif config.getoption("--split") or config.getoption("--split-insecure"):
        spec = split_spec(config)
    else:
        return
    judge = Judge(config, spec)
    judge.install(Path(spec["staff_root"]))
    if not config.option.collectonly:
        judge.remote.prepare_spare()  # the first worker starts while the judge collects the tests
    # the judge's own temporary files (tempfile.mkdtemp) go where the worker cannot reach: a test that
    # hands a file to the worker writes it under tmp_path
    private = scratch_folders(Path(spec["scratch"]))[2]
    tempfile.tempdir = str(private)
    os.environ["TMPDIR"] = str(private)
    config.pluginmanager.register(judge, "cs336-judge")
    try:
        from hypothesis import settings

        # derandomize: one submission graded twice draws the same cases, so it gets the same grade
        settings.register_profile("cs336-judge", deadline=None, database=None, derandomize=True)
        settings.load_profile("cs336-judge")
    except ImportError:
        pass
