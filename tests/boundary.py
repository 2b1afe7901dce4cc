"""The line between the tests and your code, and what may cross it.

When you run ``uv run pytest``, everything runs in one process and this module does nothing:
``adapters.run_...`` and every function marked ``@student_side`` are plain calls.

When the staff grade your submission, the tests run in a trusted *judge* process that never
imports your code. Your code runs in a separate, sandboxed *worker*; each ``adapters`` call is
sent there, and only plain data comes back: numbers, strings, lists, dicts, tensors (with their
shapes, strides and shared storage), numpy arrays, dataclasses. An object your code returns (an
optimizer, a module, a tokenizer) stays on your side, and the test drives it call by call: the
loops of a test (an optimizer over a trajectory) run in the test, and each ``opt.step()`` crosses.
The parameters a test hands your optimizer are the test's own tensors on both sides (their data
and ``.grad`` are kept in step), the global RNGs a test seeds are the ones your code draws from,
and a backward pass through your module's output runs on through your module.

A few scenarios, marked ``@student_side`` in ``tests/scenarios/``, run on your side instead: they
observe what only happens inside your process (memory, the ops your code ran, what a command
prints) and return what they saw.

So: the same tests, the same failure messages, locally and in grading. Nothing here changes what
your code must do.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class Remote(Protocol):
    def call(self, target: str, args: tuple, kwargs: dict) -> Any: ...


#: Set by the grader's judge (never in a student's run): where student-side calls go.
remote: Remote | None = None

#: ``module:qualname`` -> the undecorated scenario, for the worker to run.
SCENARIOS: dict[str, Callable[..., Any]] = {}

#: ``module:qualname`` -> dataclasses that cross the line as themselves.
DATA_TYPES: dict[str, type] = {}


def student_side(fn: F) -> F:
    """Mark a scenario that observes what happens inside the student's process: in grading it runs
    in the sandboxed worker (the rest of a test, loops included, runs in the judge).

    Its arguments and its return value must be plain data (see the module docstring).
    """
    name = f"{fn.__module__}:{fn.__qualname__}"
    SCENARIOS[name] = fn

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if remote is None:
            return fn(*args, **kwargs)
        __tracebackhide__ = True  # a failure shows the test's line and your code's error
        return remote.call(name, args, kwargs)

    return call  # type: ignore[return-value]


def plain_data(cls: type[T]) -> type[T]:
    """Mark a dataclass whose instances cross the line as themselves (both sides import it)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"plain_data needs a dataclass, got {cls!r}")
    DATA_TYPES[f"{cls.__module__}:{cls.__qualname__}"] = cls
    return cls
