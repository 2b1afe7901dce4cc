"""Stand-ins for the judge's own objects: a torch optimizer or model the test made, handed to your code.

The reverse of a handle. A test gives a student object one of its own objects to use (your loss
scaler steps the test's ``torch.optim.SGD``; ``optimizer_state_bytes`` reads its state; your
``save_checkpoint`` reads the test's model's ``state_dict()`` and ``load_checkpoint`` loads one into
it). Built in
the worker, that object would run beside the submission, which could rewire it at import (swap
torch's SGD for one that does the scaler's work). So it stays in the judge and crosses as a
stand-in: every public attribute read and method call here asks the judge (a callback, served while
the call waits), which does it on its own object and answers with plain data. Parameters in the
answer are bound tensors (``bound.py``): ``p.grad`` divided in place here is the judge's ``p.grad``
by the time the judge's ``step()`` runs, and the step's update is here when the callback returns.

One stand-in per judge object (``id(optimizer)`` is stable, as the scaler's per-optimizer state
needs). What is read is a copy of the judge's data that writes through: ``optimizer.param_groups[0]
["lr"] = 0.1`` here also assigns in the judge (``write_through.py``; the tensors in it are bound),
and an attribute set here is set there. ``isinstance(stand_in, torch.optim.Optimizer)`` holds as for
the judge's object (its ``__class__`` is the judge object's class, where this process has imported
that class's module). Private and special names (``_x``) are refused, and an error the judge's
object raises is raised here with its message, as a builtin exception of the same name where there
is one (``ValueError`` from ``load_state_dict``).

A method's generator (``model.parameters()``) comes back drawn whole, as an iterator over its items;
a judge object in an answer (``model.eval()`` returns the model) comes back as its stand-in.

Left out: ``type(stand_in)`` is still the stand-in's own class, and nothing crosses but plain data
and stand-ins: a function the judge's object holds (a hook), or a submodule of a model, never does.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable
from typing import Any

from .write_through import write_through

#: Builtin exceptions a judge object's error is raised as here (others: RuntimeError with its name).
RAISED_AS = ("AttributeError", "IndexError", "KeyError", "NotImplementedError", "RuntimeError", "TypeError",
             "ValueError", "ZeroDivisionError")


def raised_here(type_name: str, message: str) -> BaseException:
    """The exception a judge object's ``type_name`` error becomes in the worker."""
    if type_name in RAISED_AS:
        return getattr(builtins, type_name)(message)
    return RuntimeError(f"{type_name}: {message}")


def imported_class(module: str, qualname: str) -> type | None:
    """The class ``module:qualname`` if this process has imported its module (nothing is imported here)."""
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


class JudgeObject:
    """A stand-in for the judge's object; ``ask(op, name, *args)`` sends one request to the judge."""

    __slots__ = ("_ask", "_methods", "_type", "_class")

    def __init__(self, ask: Callable[..., Any], type_name: str, methods: list[str], cls: type | None = None) -> None:
        object.__setattr__(self, "_ask", ask)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_methods", frozenset(methods))
        object.__setattr__(self, "_class", cls)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105 - isinstance() asks this when type(self) does not match
        return object.__getattribute__(self, "_class") or JudgeObject

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"the test's {self._type} lives in the judge: private attribute {name} is not reachable")
        if name in self._methods:
            ask = self._ask

            def method(*args: Any, **kwargs: Any) -> Any:
                return ask("call", name, *args, **kwargs)

            method.__name__ = method.__qualname__ = name
            return method
        ask = self._ask
        return write_through(ask("getattr", name), lambda path, value: ask("assign", path[0], path[1:], value), [name],
                             f"the test's {self._type}'s")

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            raise AttributeError(f"the test's {self._type} lives in the judge: private attribute {name} is not settable")
        self._ask("setattr", name, value)

    def __repr__(self) -> str:
        return f"<the test's {self._type} (it lives in the judge; this stands in for it)>"
