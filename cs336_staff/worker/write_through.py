"""Copies that write through: a list or dict read from an object on the other side of the line.

The judge reads ``opt.param_groups`` of the student's optimizer (a worker object); the student's
loss scaler reads it of the test's optimizer (a judge object, ``judge_object.py``). Either way the
reader gets a copy, and ``groups[0]["lr"] = 0.1`` must still reach the object, as in one process.
So the copy's item assignment also sends ``assign(path, value)`` to its owner (the path from the
attribute down to the item); every other mutation (``append``, ``update``, ``del``) raises, since it
would change the copy only.

Both sides import this module (the worker from its read-only copy): no import beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ``assign(path, value)``: ``obj.<path[0]>[path[1]]...[path[-1]] = value`` on the owner's side.
Assign = Callable[[list, Any], None]


def _refuse(name: str) -> Callable[..., Any]:
    def refuse(self: _WritesThrough, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{name}() on a copy of {self._whose} {type(self).__mro__[2].__name__} would not reach it; "
            "assign items (x[key] = value), or call a method of the object"
        )

    return refuse


class _WritesThrough:
    """A copy of a list or dict read at ``path``: ``x[k] = v`` also assigns on the owner's side."""

    def __init__(self, assign: Assign, path: list, items: Any, whose: str) -> None:
        super().__init__(items)  # type: ignore[call-arg]
        self._assign, self._path, self._whose = assign, path, whose

    def __setitem__(self, key: Any, value: Any) -> None:
        __tracebackhide__ = True
        if isinstance(self, list) and not isinstance(key, int):
            raise TypeError(f"assign one item at a time into {self._whose} list")
        self._assign([*self._path, key], value)
        super().__setitem__(key, write_through(value, self._assign, [*self._path, key], self._whose))  # type: ignore[misc]


class WriteThroughList(_WritesThrough, list):
    """A list read from an object of the other side: ``x[i] = v`` also assigns there."""


class WriteThroughDict(_WritesThrough, dict):
    """A dict read from an object of the other side: ``x[k] = v`` also assigns there."""


for _cls, _names in ((WriteThroughList, ["append", "extend", "insert", "pop", "remove", "clear", "sort",
                                         "reverse", "__delitem__", "__iadd__"]),
                     (WriteThroughDict, ["update", "pop", "popitem", "clear", "setdefault", "__delitem__", "__ior__"])):
    for _name in _names:
        setattr(_cls, _name, _refuse(_name))


def assign_at(obj: Any, path: Any, value: Any) -> None:
    """``obj.<path[0]>[path[1]]...[path[-1]] = value``: what an ``Assign`` does on the owner's side.

    >>> class Opt: param_groups = [{"lr": 1.0}]
    >>> opt = Opt(); assign_at(opt, ["param_groups", 0, "lr"], 0.5); opt.param_groups
    [{'lr': 0.5}]
    """
    if not isinstance(path, list) or len(path) < 2 or not isinstance(path[0], str) or path[0].startswith("__"):
        raise ValueError(f"bad assignment path {path!r}")
    part = getattr(obj, path[0])
    for key in path[1:-1]:
        part = part[key]
    part[path[-1]] = value


def write_through(value: Any, assign: Assign, path: list, whose: str = "the other side's object's") -> Any:
    """``value`` (read at ``path``) with its plain lists and dicts made write-through to ``assign``.

    >>> sent = []
    >>> groups = write_through([{"lr": 1.0}], lambda path, v: sent.append((path, v)), ["param_groups"])
    >>> groups[0]["lr"] = 0.5
    >>> sent, groups
    ([(['param_groups', 0, 'lr'], 0.5)], [{'lr': 0.5}])
    """
    if type(value) is dict:
        return WriteThroughDict(assign, path, {k: write_through(v, assign, [*path, k], whose) for k, v in value.items()},
                                whose)
    if type(value) is list:
        return WriteThroughList(assign, path, [write_through(v, assign, [*path, i], whose) for i, v in enumerate(value)],
                                whose)
    return value
