"""Run pytest in a child process on some tree and read back how every test ended.

The staff tools (``release --check``, ``snapshots``, ``audit``) all need the same thing: run the
tests of a *copy* of the repository (a handout, a scratch copy with a mutant) with this
repository's Python environment, and learn per test whether it passed, failed with which
exception, or was skipped. Exit codes and text output cannot say that, so the child loads
``outcomes.py`` (copied to a scratch directory as ``cs336_outcomes``) which writes JSON.

The child is ``python -m pytest`` with the current interpreter, run from the tree (so the tree's
``cs336_assignment`` comes first on ``sys.path``), with ``-p no:cacheprovider`` and
``PYTHONDONTWRITEBYTECODE=1`` so it leaves no caches or stale bytecode behind. Directories in
``hide`` (the staff repository, which the editable install puts on ``sys.path``) are removed
from the child's path, so the tree cannot silently import the staff copy of anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.devices import DEVICE_MARKERS

OUTCOME_PLUGIN = Path(__file__).with_name("outcomes.py")
INSTALLED_REPO = Path(__file__).resolve().parents[2]  # on sys.path through the editable install
KILLED = -9  # the return code of a session stopped at its timeout
#: What a child pytest never inherits from the staff's environment. ``PYTHONPATH`` and
#: ``PYTEST_ADDOPTS`` would reach past the tree under test. Where ``CI`` or ``BUILD_NUMBER`` is set,
#: pytest explains a failed ``==`` with a full ``difflib`` diff of both sides (minutes for two
#: vocabularies; a garbage run of the BPE tests took 323 s instead of 6) and hypothesis loads
#: another profile; the judge's environment has neither (``grade/grader.py``), so no staff run has.
NOT_INHERITED = ("PYTHONPATH", "PYTEST_ADDOPTS", "CI", "BUILD_NUMBER")


@dataclass
class Outcome:
    """How one test ended (see ``outcomes.py``)."""

    nodeid: str
    outcome: str  # passed | failed | error | skipped | xfailed | xpassed
    when: str = "call"
    exc: list[str] = field(default_factory=list)
    message: str = ""
    markers: list[str] = field(default_factory=list)

    @property
    def not_implemented(self) -> bool:
        """Whether it failed because a stub raised ``NotImplementedError`` (anywhere in the chain)."""
        return self.outcome in ("failed", "error") and "NotImplementedError" in self.exc

    @property
    def needs_device(self) -> bool:
        return any(m in self.markers for m in DEVICE_MARKERS)


@dataclass
class PytestRun:
    """What one child pytest did."""

    returncode: int
    collected: list[str]
    collect_errors: list[dict]
    deselected: list[str]
    tests: dict[str, Outcome]
    output: str
    # tested modules imported from outside the tree
    foreign_modules: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False  # stopped at its timeout (its return code is then KILLED)

    def with_outcome(self, *outcomes: str) -> list[Outcome]:
        return [t for t in self.tests.values() if t.outcome in outcomes]

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


class PytestJob:
    """A child pytest started now (cold: a fresh interpreter); ``result()`` waits for it and parses the outcomes."""

    def __init__(
        self,
        cwd: Path,
        args: list[str],
        *,
        hide: list[Path] | tuple[Path, ...] = (),
        only_fixture: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 1800,
        outcomes: bool = True,
        inherit_env: bool = True,
        prefix: list[str] | tuple[str, ...] = (),
    ):
        """``outcomes=False``: no outcome plugin (the child records its own; ``PytestRun.tests`` stays
        empty); ``inherit_env=False``: the child's environment is ``env`` alone; ``prefix``: a command
        that runs the child (``bwrap ... --``)."""
        if not outcomes and (hide or only_fixture):  # before anything is made: nothing left behind
            raise ValueError(
                "hide and only_fixture are done by the outcome plugin: they need outcomes=True"
            )
        self.cwd, self.timeout = Path(cwd), timeout
        self._scratch = Path(tempfile.mkdtemp(prefix="cs336-session-"))
        self._out = self._scratch / "results.jsonl"
        child_env = (
            {k: v for k, v in os.environ.items() if k not in NOT_INHERITED} if inherit_env else {}
        )
        plugin: list[str] = []
        if outcomes:
            shutil.copyfile(OUTCOME_PLUGIN, self._scratch / "cs336_outcomes.py")
            plugin = ["-p", "cs336_outcomes"]
            child_env.update(
                PYTHONPATH=str(self._scratch),
                PYTHONDONTWRITEBYTECODE="1",
                CS336_PROBE_OUT=str(self._out),
                CS336_PROBE_HIDE=os.pathsep.join(str(Path(p).resolve()) for p in hide),
            )
            if only_fixture:
                child_env["CS336_PROBE_ONLY_FIXTURE"] = only_fixture
        child_env.update(env or {})
        cmd = [
            *prefix,
            sys.executable,
            "-m",
            "pytest",
            *plugin,
            "-p",
            "no:cacheprovider",
            f"--rootdir={self.cwd}",
            *args,
        ]
        self._log = open(self._scratch / "output.txt", "w+", errors="replace")  # noqa: SIM115 (closed in result())
        self._proc = subprocess.Popen(
            cmd,
            cwd=self.cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def running(self) -> bool:
        """Whether the child has not exited yet."""
        return self._proc.poll() is None

    def result(self) -> PytestRun:
        timed_out = False
        try:
            returncode = self._proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            returncode, timed_out = KILLED, True
        self._log.seek(0)
        output = self._log.read()
        self._log.close()
        if timed_out:
            output += f"\n[killed: pytest ran longer than {self.timeout:.0f} s]"
        run = read_run(returncode, self._out if self._out.exists() else None, output)
        run.timed_out = timed_out
        shutil.rmtree(self._scratch, ignore_errors=True)
        return run


def events(results: Path | None) -> list[dict]:
    """The outcome plugin's events, in order (a line cut short by a killed child is dropped)."""
    out = []
    for line in (
        Path(results).read_text(errors="replace").splitlines() if results is not None else []
    ):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def outcome_of(nodeid: str, markers: list[str], phases: list[dict]) -> Outcome:
    """How one test ended, from its phases: the first thing that went wrong (a skip, a failure, an
    unexpected pass), else passed."""
    t = Outcome(nodeid=nodeid, outcome="passed", markers=markers)
    for phase in phases:
        if phase["outcome"] == "skipped":
            if phase["wasxfail"] is not None:
                t.outcome, t.when, t.message = "xfailed", phase["when"], str(phase["wasxfail"])
            else:
                t.outcome, t.when, t.message = "skipped", phase["when"], phase["text"]
            break
        if phase["outcome"] == "failed":
            t.outcome = "failed" if phase["when"] == "call" else "error"
            t.when, t.exc, t.message = phase["when"], phase["exc"], phase["message"]
            break
        if phase["when"] == "call" and phase["wasxfail"] is not None:
            t.outcome, t.message = "xpassed", str(phase["wasxfail"])
            break
    return t


def read_run(returncode: int, results: Path | None, output: str) -> PytestRun:
    """A ``PytestRun`` from the outcome plugin's events (None if the child never wrote them) and the output."""
    run = PytestRun(
        returncode=returncode,
        collected=[],
        collect_errors=[],
        deselected=[],
        tests={},
        output=output,
    )
    for event in events(results):
        kind = event.get("event")
        if kind == "collected":
            run.collected = [i["nodeid"] for i in event["items"]]
        elif kind == "collect_error":
            run.collect_errors.append({"nodeid": event["nodeid"], "message": event["longrepr"]})
        elif kind == "deselected":
            run.deselected.extend(event["items"])
        elif kind == "result":
            run.tests[event["nodeid"]] = outcome_of(
                event["nodeid"], event["markers"], event["phases"]
            )
    return run


def merge_runs(runs: list[PytestRun]) -> PytestRun:
    """One run from the shards of a suite (``CS336_PROBE_SHARD``): every test of every shard.

    A test that some shard ran counts as run (the others deselected it); the return code is the
    first non-zero one, since pytest's codes do not order."""
    if len(runs) == 1:
        return runs[0]
    ran = {n for r in runs for n in r.collected}
    collected = [n for r in runs for n in r.collected]
    errors = {
        e["nodeid"]: e for r in runs for e in r.collect_errors
    }  # each shard collects everything
    return PytestRun(
        returncode=next((r.returncode for r in runs if r.returncode not in (0,)), 0),
        collected=collected,
        collect_errors=list(errors.values()),
        deselected=sorted({n for r in runs for n in r.deselected} - ran),
        tests={k: v for r in runs for k, v in r.tests.items()},
        output="\n".join(
            f"--- shard {i + 1} of {len(runs)} ---\n{r.output}" for i, r in enumerate(runs)
        ),
        foreign_modules=sorted({m for r in runs for m in r.foreign_modules}),
        seconds=max(r.seconds for r in runs),
    )


def hide_installed(tree: Path) -> list[Path]:
    """What to hide from a child pytest in ``tree``: the editable-installed repository, unless it is ``tree``."""
    return [] if Path(tree).resolve() == INSTALLED_REPO else [INSTALLED_REPO]


def run_pytest(cwd: Path, args: list[str], **kwargs) -> PytestRun:
    """Run pytest on ``cwd`` and wait for it (see ``PytestJob`` for the keyword arguments)."""
    return PytestJob(cwd, args, **kwargs).result()


def copy_tree(src: Path, dst: Path, *, skip: tuple[str, ...] = ()) -> None:
    """Copy ``src`` to ``dst`` without caches and bytecode, or the paths (relative to ``src``) in ``skip``."""
    src = Path(src).resolve()
    junk = shutil.ignore_patterns(
        "__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", ".ruff_cache"
    )

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).resolve().relative_to(src)
        return set(junk(directory, names)) | {n for n in names if (rel / n).as_posix() in skip}

    shutil.copytree(src, dst, ignore=ignore, symlinks=False, dirs_exist_ok=True)
