"""A pytest plugin for ``test_reach_agreement.py``: per test, what the judge would record it reached.

Grading takes a test's points for a rule break by what the judge recorded the test called
(``grade/judge.py``'s ``Tracer``: ``adapters:NAME`` for an adapter the test's own code called, the
driver's ``module:qualname`` for a driver, ``#KEY`` added when its first argument is a string, and
``adapters:NAME`` for ``killed_midway``); ``grade/delegation.py`` turns that into adapters, a driver
standing for every adapter its source names. A student's run (``tests/rules.py``'s ``LocalWarning``)
counts the adapters actually called, drivers' calls included. This plugin records both per test:

* in one process (no judge), it records what the judge's ``Tracer`` would: calls of ``adapters``
  outside drivers, drivers (``tests.boundary.run_driver``) and ``killed_midway``; with
  ``LocalWarning``'s own record of the adapters called;
* under the judge (``-p cs336_staff.grade.judge --split``), it reads the judge's own record (its
  results file), to check the first mode's imitation of it.

At the end it writes ``{nodeid: {"local": [...], "targets": [...]}}`` to ``$CS336_REACH_PROBE_OUT``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

OUT_ENV = "CS336_REACH_PROBE_OUT"


class ReachProbe:
    def __init__(self) -> None:
        self.targets: dict[str, set[str]] = {}
        self.test: str | None = None
        self.depth = 0  # > 0 inside a driver: what it calls, the worker runs, unseen by the judge
        self.killed: tuple[Callable, Callable] | None = None

    def _record(self, target: str) -> None:
        if self.test is not None and self.depth == 0:
            self.targets.setdefault(self.test, set()).add(target)

    @pytest.hookimpl(
        tryfirst=True
    )  # before LocalWarning wraps adapters, so both records see each call
    def pytest_collection(self, session: pytest.Session) -> None:
        import tests.boundary as boundary

        if boundary.remote is not None:  # under the judge: its own record is read at the end
            return
        import adapters

        for name, fn in list(vars(adapters).items()):
            if name.startswith(("run_", "get_")) and callable(fn):
                setattr(adapters, name, self._adapter(name, fn))
        run_driver = boundary.run_driver

        def driven(fn: Callable, args: Any, kwargs: dict) -> Any:
            target = f"{fn.__module__}:{fn.__qualname__}"
            self._record(f"{target}#{args[0]}" if args and isinstance(args[0], str) else target)
            self.depth += 1
            try:
                return run_driver(fn, args, kwargs)
            finally:
                self.depth -= 1

        boundary.run_driver = driven
        killed_midway = boundary.killed_midway

        def killed(adapter: str, args: list, **when: Any) -> Any:
            self._record(f"adapters:{adapter}")
            return killed_midway(adapter, args, **when)

        boundary.killed_midway = killed  # type: ignore[assignment]
        self.killed = (killed_midway, killed)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Modules that imported ``killed_midway`` by name before it was wrapped get the wrapper too."""
        if self.killed is None:
            return
        original, wrapper = self.killed
        for module in list(sys.modules.values()):
            if getattr(module, "killed_midway", None) is original:
                module.killed_midway = wrapper  # type: ignore[attr-defined]

    def _adapter(self, name: str, fn: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            self._record(f"adapters:{name}")
            return fn(*args, **kwargs)

        return call

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.test = nodeid

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        self.test = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        judge = session.config.pluginmanager.get_plugin("cs336-judge")
        if judge is not None:  # the judge's own record: a JSON line per test, with what it reached
            for line in Path(judge.spec.results).read_text().splitlines():
                event = json.loads(line) if line.strip() else {}
                if event.get("event") == "result":
                    self.targets[event["nodeid"]] = set(event.get("reached", ()))
        local = getattr(session.config.pluginmanager.get_plugin("cs336_rules"), "reached", {})
        ids = sorted(set(local) | set(self.targets))
        data = {
            n: {"local": sorted(local.get(n, ())), "targets": sorted(self.targets.get(n, ()))}
            for n in ids
        }
        Path(os.environ[OUT_ENV]).write_text(json.dumps(data, indent=1))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ReachProbe(), "cs336_reach_probe")
