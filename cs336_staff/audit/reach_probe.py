"""A pytest plugin that records which solution functions each test executes (for ``cs336 audit``).

Copied into the audit's scratch tree as ``cs336_reach_probe.py`` and loaded with
``-p cs336_reach_probe`` (the scratch tree imports nothing of the staff repository). It reads
``CS336_REACH_FUNCTIONS``, a JSON file ``{"cs336_assignment/optim.py": ["AdamW.step", ...]}``, and
writes ``CS336_REACH_OUT``: ``{nodeid: ["cs336_assignment/optim.py::AdamW.step", ...]}``, the
functions entered while the test ran (setup, call and teardown, in any thread of this process and
in the processes it forks), and those entered by the setup of every fixture the test uses, whenever
that setup ran (a module-scoped fixture is set up once, in the first test that needs it; the tests
after it read what it built).

A profile hook (``sys.setprofile``) sees every call; only the listed functions are kept, matched by
file and ``co_qualname``. A forked child (a ``fork`` multiprocessing pool) inherits the hook and
appends what it enters to a file of its own (it ends with ``os._exit``, so nothing is kept in
memory), read back when the test ends. A function behind ``functools.cache`` or ``lru_cache`` runs
only on its first call, so the probe also counts its cache's calls (``cache_info``) before and after
each test and fixture setup: a test that only hit the cache entered it too. Code run in a process
started otherwise (``spawn``, a subprocess) is not seen.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

_root = Path.cwd().resolve()
_wanted: dict[str, set[str]] = {
    str((_root / rel).resolve()): set(names)
    for rel, names in json.loads(Path(os.environ["CS336_REACH_FUNCTIONS"]).read_text()).items()
}
_rel = {path: Path(path).relative_to(_root).as_posix() for path in _wanted}
_current: set[str] = set()
_reach: dict[str, list[str]] = {}
#: What each fixture's setups entered (by fixture name, over all its setups), and the fixtures being set up.
_by_fixture: dict[str, set[str]] = {}
_open: list[set[str]] = []
#: Where forked children append what they enter, and what this process (when one) has appended.
_children = Path(os.environ["CS336_REACH_OUT"] + ".children")
_parent = os.getpid()
_in_child: set[str] = set()
_paths: dict[str, str] = {}  # module name -> its resolved file ("" when none)


def _profile(frame, event, arg):  # noqa: ANN001, ARG001
    if event == "call":
        code = frame.f_code
        names = _wanted.get(code.co_filename)
        if names is not None and code.co_qualname in names:
            entry = f"{_rel[code.co_filename]}::{code.co_qualname}"
            _current.add(entry)
            for opened in _open:
                opened.add(entry)
            if os.getpid() != _parent and entry not in _in_child:
                _in_child.add(entry)
                with open(
                    _children, "a"
                ) as f:  # one short line: appends from children do not interleave
                    f.write(entry + "\n")


def _cache_calls() -> dict[str, int]:
    """Calls so far (hits and misses) of every ``functools`` cache of the listed functions, by entry."""
    out = {}
    for name, module in list(sys.modules.items()):
        if name not in _paths:  # resolved once per module
            path = getattr(module, "__file__", None)
            _paths[name] = str(Path(path).resolve()) if isinstance(path, str) else ""
        path = _paths[name]
        if path not in _wanted:
            continue
        found = list(vars(module).values())
        found += [v for c in found if isinstance(c, type) for v in vars(c).values()]
        for value in found:
            value = getattr(value, "__func__", value)  # staticmethod, classmethod
            inner = getattr(value, "__wrapped__", None)
            if inner is not None and hasattr(value, "cache_info"):
                info = value.cache_info()
                qualname = getattr(getattr(inner, "__code__", None), "co_qualname", "")
                if qualname in _wanted[path]:
                    out[f"{_rel[path]}::{qualname}"] = info.hits + info.misses
    return out


def _cache_hits(before: dict[str, int]) -> set[str]:
    """The cached functions called since ``before`` (``_cache_calls``)."""
    return {e for e, n in _cache_calls().items() if n > before.get(e, 0)}


def _after_fork() -> None:
    _in_child.clear()


os.register_at_fork(after_in_child=_after_fork)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):  # noqa: ANN001, ARG001
    entered: set[str] = set()
    _open.append(entered)
    calls = _cache_calls()
    try:
        return (yield)
    finally:
        _open.remove(entered)
        entered |= _cache_hits(calls)
        _by_fixture.setdefault(fixturedef.argname, set()).update(entered)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001, ARG001
    _current.clear()
    _children.unlink(missing_ok=True)
    calls = _cache_calls()
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        return (yield)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        _current.update(_cache_hits(calls))
        if _children.is_file():
            _current.update(_children.read_text().split())
            _children.unlink()
        for name in getattr(item, "fixturenames", ()):
            _current.update(_by_fixture.get(name, ()))
        _reach[item.nodeid] = sorted(_current)


def pytest_sessionfinish(session):  # noqa: ANN001, ARG001
    Path(os.environ["CS336_REACH_OUT"]).write_text(json.dumps(_reach, indent=0))
