"""A pytest plugin that records every exception a test catches with ``pytest.raises``.

Loaded as ``-p cs336_staff.audit.raises_probe`` with ``CS336_RAISES_OUT=<file.json>``. It wraps
``pytest.raises`` (the context-manager form; the callable form passes through unrecorded) and,
for each exception the block caught, writes the test's node id, its ``match`` pattern, the
exception's type names along its MRO, its message, the *target* (``module:qualname`` of the
outermost traceback frame in ``cs336_assignment/``), where the innermost frame is (``package``,
``tests`` or ``library``) and the reprs of the target call's argument values. ``contracts.py`` checks
the records against the targets' docstrings. It changes no outcome.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

PACKAGE_DIR = os.sep + "cs336_assignment" + os.sep
TESTS_DIR = os.sep + "tests" + os.sep
_RECORDS: list[dict] = []
_CURRENT: dict[str, str] = {"test": ""}
_original = pytest.raises


def _pattern(match) -> str | None:
    if match is None:
        return None
    if isinstance(match, re.Pattern):
        flags = "(?i)" if match.flags & re.IGNORECASE else ""
        return flags + match.pattern
    return str(match)


def _arguments(frame) -> str:
    """The reprs of the call's argument values (not their names), " | "-separated."""
    code = frame.f_code
    n = (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(code.co_flags & 0x04)
        + bool(code.co_flags & 0x08)
    )
    parts = []
    for name in code.co_varnames[:n]:
        if name in frame.f_locals and name != "self":
            try:
                parts.append(repr(frame.f_locals[name])[:2000])
            except Exception:  # noqa: BLE001 - a repr that fails names no value
                parts.append("?")
    return " | ".join(parts)


def _record(exc: BaseException, match) -> None:
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    target, values = None, ""
    for frame in frames:
        if PACKAGE_DIR in frame.f_code.co_filename:
            module = frame.f_globals.get("__name__", "?")
            target = f"{module}:{frame.f_code.co_qualname}"
            values = _arguments(frame)
            break
    innermost = frames[-1].f_code.co_filename if frames else ""
    where = (
        "package" if PACKAGE_DIR in innermost else "tests" if TESTS_DIR in innermost else "library"
    )
    _RECORDS.append(
        {
            "test": _CURRENT["test"],
            "pattern": _pattern(match),
            "exception": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[:2000],
            "target": target,
            "raised_in": where,
            "values": values,
        }
    )


class _Recording:
    def __init__(self, context, match):
        self.context, self.match = context, match

    def __enter__(self):
        return self.context.__enter__()

    def __exit__(self, exc_type, exc, tb):
        handled = self.context.__exit__(exc_type, exc, tb)
        if handled and exc is not None:
            _record(exc, self.match)
        return handled


def _raises(expected_exception, *args, **kwargs):
    if args:
        return _original(expected_exception, *args, **kwargs)
    return _Recording(_original(expected_exception, **kwargs), kwargs.get("match"))


def pytest_configure(config) -> None:
    pytest.raises = _raises  # type: ignore[assignment]  # a recording stand-in, same call forms


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    _CURRENT["test"] = item.nodeid
    return (yield)


def pytest_sessionfinish(session, exitstatus) -> None:
    out = os.environ.get("CS336_RAISES_OUT")
    if out:
        Path(out).write_text(json.dumps(_RECORDS, indent=1))
