"""Grade one submission: intake -> sandboxed run -> outcomes scored by the rubric -> files.

The set of graded tests is not taken from the submission's run (code under test could hide tests
from it): it is collected once per batch, in the same sandbox, against the *reference* solution,
and cached under ``OUT/.cache/``. Every expected test gets a result: a test the submission's run
never reported is an error (its module failed to import: the collection error is shown) or
``not_run`` (the run was cut short), never silently absent.

Device matrix: each test needs the ``cpu`` or the ``gpu`` runner (``gpu``, ``fp8``, ``h100``
markers). ``--device cpu`` runs the CPU tests and reports GPU tests as ``pending``; ``--device
gpu`` runs only the GPU tests; ``all`` (``auto`` on a machine with a GPU) runs everything, and a
GPU test the local GPU cannot run (fp8 on an A100) is pending too. ``cs336 merge`` combines runs.

Deliberately left out: regrade requests and manual adjustments (edit results.json by hand).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from cs336_staff.grade.intake import Intake, read_submission
from cs336_staff.grade.report import GradeResult, TestResult
from cs336_staff.grade.rubric import Item, Rubric, find_rubric
from cs336_staff.grade.sandbox import GPU_MARKERS, Limits, RunResult, Sandbox

GRADER_VERSION = "1"


@dataclass(frozen=True)
class Plan:
    """Everything a worker needs to grade a submission (picklable, for process pools and Slurm)."""

    staff_root: Path
    items: dict[str, Item]  # nodeid -> rubric verdict
    needs_gpu: dict[str, bool]
    concepts: dict[str, str]
    device: str = "cpu"  # cpu | gpu | all
    limits: Limits = field(default_factory=Limits)
    jobs: int = 1
    fingerprint: str = ""

    def runs_here(self, nodeid: str) -> bool:
        return self.device == "all" or self.needs_gpu[nodeid] == (self.device == "gpu")


def tree_fingerprint(root: Path) -> str:
    """Hash of everything that decides which tests exist: tests/, the reference, pyproject.toml."""
    h = hashlib.sha256()
    paths = [root / "pyproject.toml", root / "adapters.py"]
    for sub in ("tests", "cs336_assignment"):
        paths += sorted(p for p in (root / sub).rglob("*.py") if "__pycache__" not in p.parts
                        and not p.relative_to(root).as_posix().startswith("tests/staff/"))
    for p in paths:
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def collect_expected(staff_root: Path, cache_dir: Path | None = None,
                     limits: Limits | None = None) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Graded test ids (-> markers) collected against the reference, and collection errors."""
    fp = tree_fingerprint(staff_root)
    cache = None if cache_dir is None else cache_dir / f"collected-{fp[:16]}.json"
    if cache is not None and cache.is_file():
        data = json.loads(cache.read_text())
        return {k: tuple(v) for k, v in data["collected"].items()}, data["errors"]
    lim = limits or Limits()
    sandbox = Sandbox(staff_root, replace(lim, run_timeout=max(lim.run_timeout, 300)))
    res: RunResult = sandbox.run(None, None, collect_only=True, canary=False)
    collected = {k: v for k, v in res.collected.items() if "staff" not in v}
    if not collected and (res.collect_errors or res.notes):
        raise RuntimeError("collecting the staff tests against the reference failed:\n"
                           + "\n".join([*res.collect_errors.values(), *res.notes, res.console[-3000:]]))
    if cache is not None and not res.collect_errors:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"collected": collected, "errors": res.collect_errors}))
    return collected, res.collect_errors


def gpu_available() -> bool:
    """A cheap check that does not import torch: an NVIDIA driver and device node exist."""
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidiactl").exists()


def make_plan(staff_root: Path, *, rubric_path: Path | None = None, device: str = "cpu",
              limits: Limits | None = None, jobs: int = 1, cache_dir: Path | None = None,
              warn=print) -> Plan:
    """Collect the graded tests, resolve the rubric, fix the device: once per batch."""
    staff_root = Path(staff_root).resolve()
    if device not in ("cpu", "gpu", "auto", "all"):
        raise ValueError(f"device={device!r} must be one of cpu, gpu, auto")
    if device == "auto":
        device = "all" if gpu_available() else "cpu"
    limits = limits or Limits()
    collected, errors = collect_expected(staff_root, cache_dir, limits)
    for nodeid, err in errors.items():
        warn(f"warning: the staff tests in {nodeid} do not even collect against the reference; "
             f"they are not graded:\n{err[-1500:]}")
    rubric = Rubric.load(rubric_path or find_rubric(staff_root))
    items = rubric.resolve(collected)
    needs_gpu = {n: bool(GPU_MARKERS & set(m)) for n, m in collected.items()}
    h = hashlib.sha256()
    for n in sorted(items):
        h.update(f"{n}|{items[n].points}|{items[n].visibility}|{items[n].concept}|{needs_gpu[n]}\n".encode())
    h.update(f"{tree_fingerprint(staff_root)}|{device}|{GRADER_VERSION}".encode())
    return Plan(staff_root, items, needs_gpu, {c.name: c.title for c in rubric.concepts.values()},
                device, limits, jobs, h.hexdigest())


def _not_run(plan: Plan, reason: str) -> dict[str, tuple[str, str]]:
    return {n: ("not_run", reason) for n in plan.items}


def score(plan: Plan, name: str, intake: Intake, run: RunResult | None, elapsed: float) -> GradeResult:
    """Turn a run (or a rejection) into a scored GradeResult covering every expected test."""
    tests = []
    errors = run.collect_errors if run else {}
    aborted = "\n".join(run.notes) if run else ""
    for nodeid, item in plan.items.items():
        device = "gpu" if plan.needs_gpu[nodeid] else "cpu"
        if run is None:
            outcome, output = "not_run", f"the submission was rejected: {intake.error}"
        elif not plan.runs_here(nodeid):
            outcome = "pending"
            output = ("needs a GPU runner: grade with --device gpu there and combine with `cs336 merge`"
                      if device == "gpu" else "graded on the CPU runner; combine with `cs336 merge`")
        elif nodeid in run.outcomes:
            o = run.outcomes[nodeid]
            outcome, output = o.outcome, o.output
            if outcome == "skipped" and device == "gpu":
                outcome = "pending"
                output = f"this runner cannot run it ({o.output}); grade it on a runner that can and merge"
        else:
            module = nodeid.split("::", 1)[0]
            err = next((e for k, e in errors.items() if k == module or module.startswith(k + "/") or k.startswith(module)), None)
            if err is not None:
                outcome, output = "error", f"the test module failed to import (collection error):\n{err}"
            elif aborted:
                outcome, output = "not_run", f"the run was cut short before this test:\n{aborted}"
            else:
                outcome, output = "error", "this test was not collected (was it deselected by the submission?)"
        earned = item.points if outcome == "passed" else 0.0
        tests.append(TestResult(nodeid, outcome, earned, item.points, item.concept, item.visibility,
                                device, output, run.outcomes[nodeid].duration if run and nodeid in run.outcomes else 0.0))
    if run is None:
        status = "rejected"
    elif run.tampered:
        status = "tampered"
    elif run.timed_out:
        status = "timeout"
    elif run.crashes or run.notes:
        status = "crashed"
    else:
        status = "ok"
    notes = list(intake.notes) + (list(run.notes) if run else [f"rejected: {intake.error}"])
    return GradeResult(
        submission=name, status=status, tests=tests, execution_time=elapsed, sha256=intake.sha256,
        fingerprint=plan.fingerprint, device=plan.device, concepts=plan.concepts, ignored=list(intake.ignored),
        notes=notes, tampered=list(run.tampered) if run else [], isolation=run.isolation if run else {})


def finished(folder: Path, sha256: str, fingerprint: str) -> bool:
    """Was this exact submission already graded with this exact plan? (``results.json`` is last.)"""
    try:
        x = json.loads((folder / "results.json").read_text())["extra_data"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return x.get("sha256") == sha256 and x.get("fingerprint") == fingerprint


def grade_one(submission: Path, name: str, out: Path, plan: Plan, force: bool = False) -> dict:
    """Grade ``submission`` into ``out/name/``; return a one-line summary (also for skipped ones)."""
    start = time.monotonic()
    intake = read_submission(Path(submission), staff_adapters=plan.staff_root / "adapters.py")
    folder = out / name
    if not force and finished(folder, intake.sha256, plan.fingerprint):
        x = json.loads((folder / "results.json").read_text())
        return {"name": name, "score": x["score"], "max_score": x["extra_data"].get("max_score", 0.0),
                "status": x["extra_data"]["status"], "skipped": True}
    run = None
    if intake.error is None:
        run_ids = [n for n in plan.items if plan.runs_here(n)]
        sandbox = Sandbox(plan.staff_root, plan.limits, gpu=plan.device != "cpu", jobs=plan.jobs)
        run = sandbox.run(intake, run_ids)
    result = score(plan, name, intake, run, time.monotonic() - start)
    result.write(folder)
    if run is not None and run.console:
        (folder / "console.txt").write_text(run.console)
    return {"name": name, "score": result.score, "max_score": result.max_score, "status": result.status,
            "skipped": False}


