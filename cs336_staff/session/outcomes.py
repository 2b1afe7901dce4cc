"""The pytest plugin that records how every test ended: one JSON line per event, written as it happens.

The one outcome recorder of the staff tools. Grading's judge registers a ``Recorder`` on its
results file (``grade/judge.py``); every other child session (``runner.py``, which copies this file
to a scratch directory as ``cs336_outcomes`` so it needs nothing from the staff repository, and
the warm server's children, ``warm.py``) gets one from the environment:

    CS336_PROBE_OUT           the JSON-lines file to write
    CS336_PROBE_ONLY_FIXTURE  deselect every test that does not use this fixture (e.g. ``snapshot``)
    CS336_PROBE_SHARD         ``k/n``: keep only every n-th test from the k-th on (``n`` children
                              that each collect everything run the suite in parallel)
    CS336_PROBE_HIDE          os.pathsep-separated directories removed from ``sys.path`` before any
                              test code is imported (the staff repository, which the editable
                              install puts on the path, must not satisfy the handout's imports)

Events: ``collect_error`` (a module that did not collect, its report clipped), ``deselected``,
``collected`` (the test ids to run, with their markers), and for each test as it ends a
``result`` with its markers, its duration and its phases (setup, call, teardown): each phase's
outcome, xfail reason, report text (clipped), the exception type names along the cause/context
chain and inside exception groups (so a ``NotImplementedError`` re-raised as another error still
counts), the first line of the message, and the report's user properties. Consumers interpret the
phases (``runner.read_run``, ``grade/grader.py``); a session killed midway keeps every test it
finished. Deliberately standard library only, and it changes no outcome.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

OUTPUT_CHARS = 4000  # the most of a report's text kept (head and tail)

_HIDE = {os.path.realpath(p) for p in os.environ.get("CS336_PROBE_HIDE", "").split(os.pathsep) if p}
if _HIDE:
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in _HIDE]


def clip(text: str, limit: int = OUTPUT_CHARS) -> str:
    return (
        text
        if len(text) <= limit
        else text[: limit // 2] + "\n[... cut ...]\n" + text[-limit // 2 :]
    )


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


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


class Recorder:
    """Writes the events of one session to ``path`` (see the module docstring).

    ``sections``: report sections whose title starts with one of these are kept with the phase
    (the judge's ``worker output``); ``extra(nodeid)`` adds fields to a test's result (the judge's
    ``reached``); ``only_fixture`` and ``shard`` deselect tests."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        sections: tuple[str, ...] = (),
        only_fixture: str | None = None,
        shard: str | None = None,
        extra: Callable[[str], dict] | None = None,
    ) -> None:
        self.path, self.sections, self.only_fixture, self.shard, self.extra = (
            path,
            sections,
            only_fixture,
            shard,
            extra,
        )
        self._phases: dict[str, list[dict]] = {}

    def emit(self, event: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(event) + "\n")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep = [
            i
            for i in items
            if not self.only_fixture or self.only_fixture in getattr(i, "fixturenames", ())
        ]
        if self.shard:
            k, n = (int(x) for x in self.shard.split("/"))
            keep = keep[k::n]
        kept = {id(i) for i in keep}
        drop = [i for i in items if id(i) not in kept]
        if drop:
            config.hook.pytest_deselected(items=drop)
            self.emit({"event": "deselected", "items": [i.nodeid for i in drop]})
        items[:] = keep

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.emit(
                {
                    "event": "collect_error",
                    "nodeid": report.nodeid,
                    "longrepr": clip(str(report.longrepr)),
                }
            )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.emit(
            {
                "event": "collected",
                "items": [
                    {"nodeid": i.nodeid, "markers": sorted({m.name for m in i.iter_markers()})}
                    for i in session.items
                ],
            }
        )

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self._phases[nodeid] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        # the exception itself: only here
        exc = call.excinfo.value if call.excinfo is not None else None
        self._phases.setdefault(report.nodeid, []).append(
            {"report": report, "exc": exc, "markers": sorted({m.name for m in item.iter_markers()})}
        )
        return report

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        phases: list[dict[str, Any]] = []
        markers: list[str] = []
        duration = 0.0
        # complete now: other plugins' report hooks have run
        for seen in self._phases.pop(nodeid, []):
            report, exc = seen["report"], seen["exc"]
            markers = markers or seen["markers"]
            duration += getattr(report, "duration", 0.0) or 0.0
            phase = {
                "when": report.when,
                "outcome": report.outcome,
                "wasxfail": getattr(report, "wasxfail", None),
                "exc": [],
                "message": "",
                "text": "",
                "properties": {
                    k: v
                    for k, v in report.user_properties
                    if isinstance(v, (str, int, float, bool))
                },
                "sections": [
                    [t, c]
                    for t, c in report.sections
                    if self.sections and t.startswith(self.sections)
                ],
            }
            if report.failed:
                phase["exc"] = _chain(exc)
                phase["message"] = (
                    _first_line(exc) if exc is not None else str(report.longrepr).splitlines()[-1]
                )
                phase["text"] = clip(report.longreprtext or "")
            elif report.skipped:
                phase["text"] = _skip_reason(report)
            phases.append(phase)
        self.emit(
            {
                "event": "result",
                "nodeid": nodeid,
                "markers": markers,
                "phases": phases,
                "duration": round(duration, 4),
                **(self.extra(nodeid) if self.extra is not None else {}),
            }
        )


def pytest_configure(config: pytest.Config) -> None:
    """As ``-p cs336_outcomes`` or a warm child's plugin: a ``Recorder`` on ``CS336_PROBE_OUT``."""
    out = os.environ.get("CS336_PROBE_OUT")
    if out:
        config.pluginmanager.register(
            Recorder(
                out,
                only_fixture=os.environ.get("CS336_PROBE_ONLY_FIXTURE"),
                shard=os.environ.get("CS336_PROBE_SHARD"),
            ),
            "cs336-outcomes",
        )
