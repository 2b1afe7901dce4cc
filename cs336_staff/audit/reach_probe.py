"""A pytest plugin that records which solution functions each test executes (for ``cs336 audit``).

Copied into the audit's scratch tree as ``cs336_reach_probe.py`` and loaded with
``-p cs336_reach_probe`` (the scratch tree imports nothing of the staff repository). It reads
``CS336_REACH_FUNCTIONS``, a JSON file ``{"cs336_assignment/optim.py": ["AdamW.step", ...]}``, and
writes ``CS336_REACH_OUT``: ``{nodeid: ["cs336_assignment/optim.py::AdamW.step", ...]}``, the
functions entered while the test ran (setup, call and teardown, in any thread of this process).

A profile hook (``sys.setprofile``) sees every call; only the listed functions are kept, matched by
file and ``co_qualname``. Code run in another process (a multiprocessing pool, a subprocess) is not
seen.
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


def _profile(frame, event, arg):  # noqa: ANN001, ARG001
    if event == "call":
        code = frame.f_code
        names = _wanted.get(code.co_filename)
        if names is not None and code.co_qualname in names:
            _current.add(f"{_rel[code.co_filename]}::{code.co_qualname}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001, ARG001
    _current.clear()
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        return (yield)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        _reach[item.nodeid] = sorted(_current)


def pytest_sessionfinish(session):  # noqa: ANN001, ARG001
    Path(os.environ["CS336_REACH_OUT"]).write_text(json.dumps(_reach, indent=0))
