"""Plausible-shape garbage: a graded function that returns the right kind of thing, computed from nothing.

``cs336 audit --garbage`` (``garbage_check.py``) copies this file into its scratch tree as
``cs336_garbage.py``, appends ``NAME = cs336_garbage.garbage(NAME, ...)`` to the file that defines
a graded function or class, and loads it as a pytest plugin (``-p cs336_garbage``). The scratch
tree imports nothing of the staff repository, so this module uses only the standard library,
numpy, pytest and torch (only once the code under test imported it: no tensor exists before).

The garbage of a **function** calls the reference on copies of its arguments (so nothing it was
given changes, and the global RNGs are put back: no side effect), then returns the result with
every value replaced (``garble``) by the flavour's garbage of the same kind:

    zeros   a tensor or array: zeros of the same shape, dtype and device; a number: 0 (False);
            a string: ""; bytes: b""
    noise   a tensor or array: seeded noise of the same shape, dtype and device (floats N(0, 1),
            integers uniform between the result's own smallest and largest value, booleans fair
            coins; fewer than 3 values to choose from, widened by 2 either way; never the
            answer itself); a number: a seeded random number other than the reference's; strings and
            bytes: "" and b"" (text noise would only be garbage that fails a test sooner)

Containers keep their type, length and dict keys (the keys are structure, not results): tuples,
lists, dicts, dataclasses, and iterators (garbled lazily). ``None``, dtypes, devices, types and
other objects come back as they are. A floating tensor that required grad still does (a leaf): a
caller's ``backward()`` runs and changes nothing.

The garbage of a **class** changes only the methods students write (those with a solution region,
``methods``), in place, so subclasses and ``isinstance`` see it: ``__init__`` runs the reference
(an object that stored nothing would only crash, not pass as plausible) and then garbles the new
object's tensors (a module's parameters and buffers, other objects' tensor attributes) in place; ``__enter__`` returns the object and ``__exit__`` does nothing; every
other method, properties included, runs on a deep copy of the object and its arguments and returns
the garbled result (the object itself where the reference returned itself). So an optimizer's
``step`` and a tokenizer's ``encode`` change nothing the caller can see.

An error the reference raises propagates unchanged: garbage that checks its inputs as documented
did that part of the work, and the audit does not count a test that saw one of these errors (see
``garbage_check.py``); the plugin records, per test, how many garbage calls returned and raised.
A call made while another garbage call runs (``encode_iterable`` calling ``encode``) runs the
reference, so each value is garbled once.

``HANDWRITTEN`` holds garbage for the functions whose effect is outside their arguments and result,
where a copy cannot contain it: ``set_seed`` (the global RNGs) does nothing, ``save_checkpoint`` (a
file) saves a garbled copy of the model and the optimizer's state at a garbled iteration, and
``train_loop`` (the model, the optimizer, checkpoint files, ``on_step``) trains and saves nothing
and reports a garbage float loss for each step (zeros: 0; noise: between 1 and a few, with no
trend, as an untrained model's), to ``on_step`` and in the list it returns.

Deliberately left out: an open file other than ``io.BytesIO``, and an iterator, are passed as they
are (the reference reads, writes or consumes them, as any implementation would); other arguments
that cannot be copied are passed as they are and reported; references bound before the module's
last line (a module-level table of functions) keep the reference; code run in another process is
not garbage.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import json
import os
import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

FLAVOURS = ("zeros", "noise")
#: The environment variable that picks the flavour of this run, and where the plugin writes its record.
FLAVOUR_ENV, OUT_ENV = "CS336_GARBAGE_FLAVOUR", "CS336_GARBAGE_OUT"
NOISE_SEED = 336
#: Integer noise is drawn between the result's smallest and largest value; closer than this, widened by it.
WIDEN = 2

_local = threading.local()
_calls: dict[str, int] = {"returned": 0, "raised": 0}
_record: dict[str, dict[str, int]] = {}
_problems: list[str] = []


#: The flavour written into a copy of this module that carries its own (the agreement check lays one
#: copy per implementation into a tree, and the worker starts with a fresh environment); None: the
#: environment's, as the garbage audit sets it for each run.
PINNED: str | None = None


def flavour() -> str:
    name = PINNED or os.environ.get(FLAVOUR_ENV, "zeros")
    if name not in FLAVOURS:
        raise ValueError(f"{FLAVOUR_ENV}={name!r}: the flavours are {', '.join(FLAVOURS)}")
    return name


def _torch():  # noqa: ANN202 - torch, if the code under test imported it, else None
    return sys.modules.get("torch")


def _noise() -> tuple[Any, random.Random]:
    if not hasattr(_local, "rng"):
        _local.rng = random.Random(NOISE_SEED)
    if not hasattr(_local, "gen") and _torch() is not None:
        _local.gen = _torch().Generator().manual_seed(NOISE_SEED)
    return getattr(_local, "gen", None), _local.rng


# ------------------------------------------------------------------------------------------------
# Garbled values
# ------------------------------------------------------------------------------------------------


def _garble_tensor(t: Any, kind: str) -> Any:
    torch = _torch()
    if kind == "zeros" or t.device.type == "meta" or t.numel() == 0:
        out = torch.zeros_like(t)
    else:
        gen, _ = _noise()
        src = t.detach()
        if src.dtype == torch.bool:
            out = torch.randint(0, 2, src.shape, generator=gen).bool()
        elif src.is_floating_point() or src.is_complex():
            out = torch.randn(src.shape, generator=gen).to(src.dtype)
        else:  # between the result's own extremes, widened where they leave no choice (one element)
            lo, hi = int(src.min()), int(src.max())
            if hi - lo < WIDEN:
                info = torch.iinfo(src.dtype)
                lo, hi = max(lo - WIDEN, info.min), min(hi + WIDEN, info.max)
            out = torch.randint(lo, hi + 1, src.shape, generator=gen, dtype=torch.int64).to(
                src.dtype
            )
            if torch.equal(out, src.cpu()):  # noise that happens to be the answer is not garbage
                out = torch.where(src.cpu() < hi, src.cpu() + 1, src.cpu() - 1).to(src.dtype)
        out = out.to(src.device)
    out = out.detach()
    if t.requires_grad and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_()
    return out


def _garble_array(a: np.ndarray, kind: str) -> np.ndarray:
    if kind == "zeros" or a.size == 0:
        return np.zeros_like(a)
    gen = np.random.default_rng(_noise()[1].getrandbits(32))
    if a.dtype == np.bool_:
        return gen.integers(0, 2, a.shape).astype(bool)
    if np.issubdtype(a.dtype, np.integer):
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < WIDEN:
            info = np.iinfo(a.dtype)
            lo, hi = max(lo - WIDEN, int(info.min)), min(hi + WIDEN, int(info.max))
        return gen.integers(lo, hi + 1, a.shape).astype(a.dtype)
    if np.issubdtype(a.dtype, np.number):
        return gen.standard_normal(a.shape).astype(a.dtype)
    return np.zeros_like(a)


def _garble_number(x: int | float | bool, kind: str) -> int | float | bool:
    if kind == "zeros":
        return type(x)(0)
    rng = _noise()[1]
    if isinstance(x, bool):
        return rng.random() < 0.5
    out: int | float
    if isinstance(x, int):
        out = rng.randint(-2 * abs(x) - 1, 2 * abs(x) + 1)
    else:
        out = rng.gauss(0.0, max(1.0, abs(x)))
    return out if out != x else out + 1


def garble(value: Any, kind: str | None = None) -> Any:
    """``value`` with every tensor, array, number and string replaced by the flavour's garbage."""
    kind = kind or flavour()
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        return _garble_tensor(value, kind)
    if isinstance(value, np.ndarray):
        return _garble_array(value, kind)
    if isinstance(value, np.generic):
        return (
            type(value)(_garble_number(value.item(), kind))
            if np.issubdtype(value.dtype, np.number)
            else value
        )
    if isinstance(value, (bool, int, float)):
        return _garble_number(value, kind)
    if isinstance(value, str):
        return ""
    if isinstance(value, (bytes, bytearray)):
        return type(value)()
    if isinstance(value, tuple):
        items = [garble(v, kind) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, list):
        return [garble(v, kind) for v in value]
    if isinstance(value, dict):
        out = {k: garble(v, kind) for k, v in value.items()}
        try:
            return type(value)(out)
        except TypeError:  # a defaultdict and the like: a plain dict of the same items
            return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{
                f.name: garble(getattr(value, f.name), kind)
                for f in dataclasses.fields(value)
                if f.init
            },
        )
    if isinstance(value, Iterator):
        return (garble(v, kind) for v in value)
    return value


def garble_in_place(obj: object) -> None:
    """Replace ``obj``'s tensors (a module's parameters and buffers, else its tensor attributes) by garbage."""
    torch = _torch()
    if torch is None:
        return
    with torch.no_grad():
        if isinstance(obj, torch.nn.Module):
            for t in [*obj.parameters(), *obj.buffers()]:
                t.copy_(garble(t))
            return
        for name, value in list(vars(obj).items()):
            if isinstance(value, torch.Tensor):
                setattr(obj, name, garble(value))


# ------------------------------------------------------------------------------------------------
# Copies of what the reference is given
# ------------------------------------------------------------------------------------------------


def _copy(value: Any, memo: dict) -> Any:
    torch = _torch()
    if isinstance(
        value, (list, tuple, dict)
    ):  # element by element: one uncopyable leaf must not spoil the rest
        if isinstance(value, dict):
            return (
                {k: _copy(v, memo) for k, v in value.items()}
                if type(value) is dict
                else copy.deepcopy(value, memo)
            )
        items = [_copy(v, memo) for v in value]
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if torch is not None and isinstance(value, torch.Generator):
        return torch.Generator(value.device).set_state(value.get_state())
    if isinstance(value, io.BytesIO):
        out = io.BytesIO(value.getvalue())
        out.seek(value.tell())
        return out
    try:
        return copy.deepcopy(value, memo)
    except Exception:  # noqa: BLE001 - a tensor that is not a leaf, a lock, an open file
        if torch is not None and isinstance(value, torch.Tensor):
            return value.detach().clone().requires_grad_(value.requires_grad)
        if isinstance(
            value, (io.IOBase, Iterator)
        ):  # an open file, a stream: the reference consumes it, as any would
            return value
        _problems.append(
            f"could not copy a {type(value).__qualname__}: passed to the reference as it is"
        )
        return value


def _copy_grads(memo: dict) -> None:
    """Give the copied tensors their originals' ``.grad`` (``Parameter.__deepcopy__`` drops it)."""
    torch = _torch()
    if torch is None:
        return
    for original in memo.get(id(memo), []):
        if isinstance(original, torch.Tensor) and original.grad is not None:
            copied = memo.get(id(original))
            if isinstance(copied, torch.Tensor) and copied.grad is None:
                copied.grad = original.grad.detach().clone()


class _Inside:
    """Marks a garbage call in progress; the RNGs it drew from are put back when it ends."""

    def __enter__(self) -> None:
        _local.inside = True
        self.torch = _torch()
        self.states = (
            self.torch.get_rng_state() if self.torch else None,
            np.random.get_state(),
            random.getstate(),
        )

    def __exit__(self, *exc: object) -> None:
        _local.inside = False
        if self.torch is not None:
            self.torch.set_rng_state(self.states[0])
        np.random.set_state(self.states[1])
        random.setstate(self.states[2])


def _inside() -> bool:
    return getattr(_local, "inside", False)


def _call(fn: Callable, args: tuple, kwargs: dict, self: object = None) -> Any:
    """``fn`` on copies of ``self``, ``args`` and ``kwargs``, garbled; errors propagate (and are counted)."""
    memo: dict = {}
    copied_self = _copy(self, memo) if self is not None else None
    args, kwargs = _copy(args, memo), _copy(kwargs, memo)
    _copy_grads(memo)
    try:
        with _Inside():
            result = fn(copied_self, *args, **kwargs) if self is not None else fn(*args, **kwargs)
    except BaseException:
        _calls["raised"] += 1
        raise
    _calls["returned"] += 1
    if self is not None and result is copied_self:
        return self
    return garble(result)


def garbage_function(fn: Callable, name: str) -> Callable:
    """Garbage for the function ``fn`` (see the module docstring)."""
    if name in HANDWRITTEN:
        return HANDWRITTEN[name](fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _inside():
            return fn(*args, **kwargs)
        return _call(fn, args, kwargs)

    return wrapper


def _method(name: str, fn: Callable) -> Callable:
    if name == "__init__":

        @functools.wraps(fn)
        def init(self: object, *args: Any, **kwargs: Any) -> None:
            if _inside():
                return fn(self, *args, **kwargs)
            try:
                fn(self, *args, **kwargs)
            except BaseException:
                _calls["raised"] += 1
                raise
            _calls["returned"] += 1
            garble_in_place(self)
            return None

        return init
    if name == "__enter__":
        return functools.wraps(fn)(lambda self: self)
    if name == "__exit__":
        return functools.wraps(fn)(lambda self, *exc: None)

    @functools.wraps(fn)
    def method(self: object, *args: Any, **kwargs: Any) -> Any:
        if _inside():
            return fn(self, *args, **kwargs)
        return _call(fn, args, kwargs, self=self)

    return method


def garbage_class(cls: type, methods: list[str]) -> type:
    """``cls`` with the ``methods`` students write turned into garbage, in place (see the module docstring)."""
    for name in methods:
        attribute = cls.__dict__.get(name)
        if isinstance(attribute, property) and attribute.fget is not None:
            setattr(
                cls,
                name,
                property(
                    _method(name, attribute.fget), attribute.fset, attribute.fdel, attribute.__doc__
                ),
            )
        elif isinstance(attribute, staticmethod):
            setattr(
                cls,
                name,
                staticmethod(garbage_function(attribute.__func__, f"{cls.__qualname__}.{name}")),
            )
        elif isinstance(attribute, classmethod):
            _problems.append(
                f"{cls.__qualname__}.{name} is a classmethod: left as the reference (hand-write its garbage)"
            )
        elif callable(attribute):
            setattr(cls, name, _method(name, attribute))
        else:
            _problems.append(
                f"{cls.__qualname__}.{name} is not a method of the class: left as the reference"
            )
    return cls


def garbage(obj: Any, name: str, methods: list[str] | None = None) -> Any:
    """Garbage for the graded function or class ``obj`` called ``name``; ``methods``: the class's written methods."""
    if isinstance(obj, type):
        return garbage_class(obj, methods or [])
    return garbage_function(obj, name)


# ------------------------------------------------------------------------------------------------
# Hand-written garbage: effects a copy cannot contain
# ------------------------------------------------------------------------------------------------


def _set_seed(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def set_seed(*args: Any, **kwargs: Any) -> None:
        _calls["returned"] += 1  # seeds nothing

    return set_seed


def _save_checkpoint(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def save_checkpoint(model: Any, optimizer: Any, iteration: int, out: Any) -> None:
        if _inside():
            return fn(model, optimizer, iteration, out)
        memo: dict = {}
        model, optimizer = _copy(model, memo), _copy(optimizer, memo)
        _copy_grads(memo)
        garble_in_place(model)
        for state in optimizer.state.values():
            for key, value in state.items():
                state[key] = garble(value) if isinstance(value, _torch().Tensor) else value
        try:
            with _Inside():
                fn(model, optimizer, garble(iteration), out)
        except BaseException:
            _calls["raised"] += 1
            raise
        _calls["returned"] += 1
        return None

    return save_checkpoint


def _train_loop(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def train_loop(
        model: Any,
        optimizer: Any,
        get_batch: Any,
        loss_fn: Any,
        num_steps: int,
        *,
        start_step: int = 0,
        on_step: Callable[[int, float], None] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        if _inside():
            return fn(
                model, optimizer, get_batch, loss_fn, num_steps, start_step=start_step,
                on_step=on_step, **kwargs,
            )  # fmt: skip
        _calls["returned"] += 1  # trains nothing, saves nothing
        steps = range(start_step + 1, num_steps + 1)
        # zeros: every loss 0; noise: losses of an untrained model, positive and without a trend
        losses = [0.0 if (g := float(garble(1.0))) == 0 else 1.0 + abs(g) for _ in steps]
        for step, loss in zip(steps, losses, strict=True):
            if on_step is not None:
                on_step(step, loss)
        return losses

    return train_loop


#: Graded function name -> a maker of its garbage from the reference.
HANDWRITTEN: dict[str, Callable[[Callable], Callable]] = {
    "set_seed": _set_seed,
    "save_checkpoint": _save_checkpoint,
    "train_loop": _train_loop,
}


# ------------------------------------------------------------------------------------------------
# The pytest plugin: which tests saw garbage returned, and which saw only errors
# ------------------------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ARG001
    _calls.update(returned=0, raised=0)
    try:
        return (yield)
    finally:
        _record[item.nodeid] = dict(_calls)


def pytest_sessionfinish(session: pytest.Session) -> None:  # noqa: ARG001
    out = os.environ.get(OUT_ENV)
    if out:
        Path(out).write_text(
            json.dumps({"calls": _record, "problems": sorted(set(_problems))}, indent=0)
        )
