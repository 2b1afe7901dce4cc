"""A test that reaches a function you have not written yet says so in one line (a pytest plugin).

Every function you implement starts as a stub that raises
``NotImplementedError("Implement <function> in <file>")``. A test that reaches one fails, and
instead of a traceback that reprints the stub's whole docstring, its report is one line::

    not written yet: Implement bytes_per_element in cs336_assignment/accounting/memory.py

The stub's error counts wherever it is in the failure: raised by the test's call, by a fixture
(setup), or as the cause or context of another error a test raised while handling it. So a
function not yet written is never reported as some other mistake, and what the test printed
before reaching the stub is left out. Other failures keep pytest's
(short, see ``pyproject.toml``) traceback. ``-p no:cs336_not_written`` turns this off.
"""

from __future__ import annotations

import re
from collections.abc import Generator

import pytest

#: What a stub's NotImplementedError says (the handout's stubs are generated with this message).
STUB_MESSAGE = re.compile(r"^Implement \S+ in \S+")

#: How the one-line report starts; ``release --check`` looks for it in the stubs' output.
NOT_WRITTEN = "not written yet: "


def stub_error(exc: BaseException | None) -> NotImplementedError | None:
    """The stub's NotImplementedError among ``exc``, its causes and contexts, or None.

    >>> stub_error(KeyError("x")) is None
    True
    >>> try:
    ...     try:
    ...         raise NotImplementedError("Implement f in cs336_assignment/models.py")
    ...     except RuntimeError as e:
    ...         raise AssertionError("use reshape(), not view()") from e
    ... except AssertionError as e:
    ...     str(stub_error(e))
    'Implement f in cs336_assignment/models.py'
    """
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NotImplementedError) and STUB_MESSAGE.match(str(e)):
            return e
        todo.extend([e.__cause__, e.__context__, *getattr(e, "exceptions", ())])
    return None


class NotWritten:
    """Rewrites the report of a test that failed on a stub into one line."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.failed and call.excinfo is not None:
            stub = stub_error(call.excinfo.value)
            if stub is not None:
                report.longrepr = NOT_WRITTEN + str(stub).splitlines()[0]
                report.sections = []  # what it printed before reaching the stub (a progress bar) is noise
        return report


def register(config: pytest.Config) -> None:
    """Register the plugin (called from ``tests/conftest.py``)."""
    if not config.pluginmanager.has_plugin("cs336_not_written"):
        config.pluginmanager.register(NotWritten(), "cs336_not_written")
