"""A pytest plugin that records how every test ended, for the staff tools that read outcomes.

Loaded into a child pytest as ``-p cs336_outcomes`` (``runner.py`` copies this file to a scratch
directory under that name, so it needs nothing from the staff repository), or handed to
``pytest.main`` by the warm server's children (``warm.py``). Driven by environment
variables:

    CS336_PROBE_OUT           write the results here as JSON when the session ends
    CS336_PROBE_ONLY_FIXTURE  deselect every test that does not use this fixture (e.g. ``snapshot``)
    CS336_PROBE_SHARD         ``k/n``: keep only every n-th test from the k-th on (``n`` children
                              that each collect everything run the suite in parallel)
    CS336_PROBE_HIDE          os.pathsep-separated directories removed from ``sys.path`` before any
                              test code is imported (the staff repository, which the editable
                              install puts on the path, must not satisfy the handout's imports)

For each test it records the outcome (passed, failed, error, skipped, xfailed, xpassed), the
phase, the exception type names along the cause/context chain and inside exception groups (so
a ``NotImplementedError`` re-raised as another error still counts), the first line of the
message, and the test's markers. Deliberately standard library only, and it changes no outcome.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

_HIDE = {os.path.realpath(p) for p in os.environ.get("CS336_PROBE_HIDE", "").split(os.pathsep) if p}
if _HIDE:
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in _HIDE]

_RESULTS: dict = {"collected": [], "collect_errors": [], "deselected": [], "tests": {}}


def reset() -> None:
    """Forget every recorded result (a warm fork-server child runs one session with a fresh record)."""
    _RESULTS.clear()
    _RESULTS.update({"collected": [], "collect_errors": [], "deselected": [], "tests": {}})


def _chain(exc: BaseException | None) -> list[str]:
    """Type names of ``exc``, its causes, contexts and (for groups) members, depth first."""
    out, seen, todo = [], set(), [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out.append(type(e).__name__)
        todo.extend([e.__context__, e.__cause__, *getattr(e, "exceptions", ())])
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _record(item, report, call) -> None:
    entry = _RESULTS["tests"].setdefault(
        report.nodeid,
        {"outcome": "passed", "when": "call", "exc": [], "message": "", "markers": sorted({m.name for m in item.iter_markers()})},
    )
    if entry["outcome"] not in ("passed",):  # keep the first thing that went wrong
        return
    if report.skipped:
        if hasattr(report, "wasxfail"):
            entry.update(outcome="xfailed", when=report.when, message=str(report.wasxfail))
        else:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            entry.update(outcome="skipped", when=report.when, message=reason)
    elif report.failed:
        excinfo = call.excinfo
        exc = excinfo.value if excinfo is not None else None
        entry.update(
            outcome="failed" if report.when == "call" else "error",
            when=report.when,
            exc=_chain(exc),
            message=_first_line(exc) if exc is not None else str(report.longrepr).splitlines()[-1],
        )
    elif report.when == "call" and hasattr(report, "wasxfail"):
        entry.update(outcome="xpassed", message=str(report.wasxfail))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    fixture = os.environ.get("CS336_PROBE_ONLY_FIXTURE")
    shard = os.environ.get("CS336_PROBE_SHARD")  # "k/n": keep every n-th test, starting at the k-th
    keep = [i for i in items if not fixture or fixture in getattr(i, "fixturenames", ())]
    if shard:
        k, n = (int(x) for x in shard.split("/"))
        keep = keep[k::n]
    kept = {id(i) for i in keep}
    drop = [i for i in items if id(i) not in kept]
    if drop:
        config.hook.pytest_deselected(items=drop)
        _RESULTS["deselected"].extend(i.nodeid for i in drop)
    items[:] = keep


def pytest_collectreport(report) -> None:
    if report.failed:
        text = str(report.longrepr)
        _RESULTS["collect_errors"].append({"nodeid": report.nodeid, "message": text[-2000:]})


def pytest_collection_finish(session) -> None:
    _RESULTS["collected"] = [i.nodeid for i in session.items]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _record(item, report, call)
    return report


def pytest_sessionfinish(session, exitstatus) -> None:
    out = os.environ.get("CS336_PROBE_OUT")
    if out:
        _RESULTS["exitstatus"] = int(exitstatus)
        with open(out, "w") as f:
            json.dump(_RESULTS, f, indent=1, sort_keys=True)
