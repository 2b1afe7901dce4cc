"""A pytest plugin that records what the adapters that take data get and return.

Loaded into the reference runs of ``release --check`` (copied into the tree as ``cs336_io_recorder``)
with ``CS336_IO_OUT=<file>`` and ``CS336_IO_ADAPTERS=<name,name,...>`` (the ``run_*`` adapters, as
``cs336_staff/worker/adapter_rule.py`` says: this file runs in the handout tree, where the staff
repository is hidden, so it is told the names): it wraps each named adapter and, for up to
``MAX_CALLS`` calls per adapter, keeps a copy of the arguments and of the result, when both are
plain data (numbers, strings, bytes, dtypes, tensors and arrays of at most ``MAX_ELEMENTS``
elements, files inside the tree, and lists, tuples and dicts of those; a call with a model, a
callable or a temporary file is skipped). ``behaviour.py`` replays them against every function
the handout ships. Standard library only (torch and numpy are looked at only if the tests
imported them), written with pickle; it changes no outcome.
"""

from __future__ import annotations

import functools
import os
import pickle
import sys
from pathlib import Path

MAX_CALLS = 8
MAX_ELEMENTS = 1 << 16
ROOT = Path.cwd().resolve()
_CALLS: dict[str, list[tuple]] = {}


class _Skip(Exception):
    pass


def plain(x):
    """A detached copy of ``x`` if it is plain data (see the module docstring), else ``_Skip``."""
    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")
    if x is None or isinstance(x, (bool, int, float, str, bytes)):
        return x
    if torch is not None and isinstance(x, (torch.dtype, torch.device)):
        return x
    if torch is not None and isinstance(x, torch.Tensor):
        if x.numel() > MAX_ELEMENTS or x.device.type != "cpu" or type(x) is not torch.Tensor:
            raise _Skip
        # raw bytes, not a pickled tensor: pickled storages go through torch's legacy loader
        # stride 1, whatever x's strides
        flat = torch.empty(x.numel(), dtype=x.dtype).copy_(x.detach().reshape(-1))
        data = flat.view(torch.uint8).numpy().tobytes()
        return ("__tensor__", str(x.dtype).removeprefix("torch."), tuple(x.shape), data)
    if np is not None and isinstance(x, np.ndarray):
        if x.size > MAX_ELEMENTS or type(x) is not np.ndarray or x.dtype == object:
            raise _Skip
        return x.copy()
    if isinstance(x, os.PathLike):
        path = Path(x).resolve()
        if not path.is_relative_to(ROOT):
            raise _Skip  # a temporary file will be gone when the calls are replayed
        return ("__path__", path.relative_to(ROOT).as_posix())
    if isinstance(x, (list, tuple)):
        return type(x)(plain(v) for v in x)
    if isinstance(x, dict):
        return {plain(k): plain(v) for k, v in x.items()}
    raise _Skip


def _wrap(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        calls = _CALLS.setdefault(name, [])
        try:
            recorded = plain((args, kwargs)) if len(calls) < MAX_CALLS else None
        except Exception:  # noqa: BLE001 - not plain (_Skip), or a copy that failed: never fail the test
            recorded = None
        result = fn(*args, **kwargs)
        if recorded is not None:
            try:
                calls.append((recorded[0], recorded[1], plain(result)))
            except Exception:  # noqa: BLE001
                pass
        return result

    return wrapper


def pytest_configure(config) -> None:
    import adapters

    for name in filter(None, os.environ.get("CS336_IO_ADAPTERS", "").split(",")):
        if callable(getattr(adapters, name, None)):
            setattr(adapters, name, _wrap(name, getattr(adapters, name)))


def pytest_sessionfinish(session, exitstatus) -> None:
    out = os.environ.get("CS336_IO_OUT")
    if out:
        with open(out, "wb") as f:
            pickle.dump(_CALLS, f)
