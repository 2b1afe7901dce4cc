"""The line between the tests and your code, and what may cross it.

When you run ``uv run pytest``, everything runs in one process and this module does almost nothing:
``adapters.run_...`` and every *driver* (a function marked ``@driver`` in ``tests/scenarios/``) are
plain calls.

When the staff grade your submission, the tests run in a trusted *judge* process that never imports
your code. Your code runs in a separate, sandboxed *worker*. A test reaches it in one of two ways,
each one round trip that sends plain data and gets plain data back (numbers, strings, lists, dicts,
tensors, numpy arrays, ``@plain_data`` dataclasses):

* an ``adapters.run_...`` call with plain arguments, as in your own run;
* a driver: a short function of the tests' that builds your objects through ``adapters`` (your
  optimizer, your tokenizer, your FLOP counter), runs them, and returns what it observed (the
  parameters after each step, the ids, the counts). It runs in the worker, beside your objects,
  exactly as it runs in your own process; the test then checks what it returned against its own
  reference (``torch.optim``, tiktoken, a formula).

Every driver starts from the global RNGs seeded with ``RNG_SEED`` and leaves its caller's as they
were, in your run and in grading alike, so a test draws the same numbers both ways. An exception your
code raises reaches the test as the same class (by name, and as its nearest builtin, standard-library,
torch or numpy class) with the same message. Two things are watched from outside your process: what
your code prints (``printed_by``), and your code killed mid-run (``killed_midway``: a child process
locally, the sandboxed worker in grading).

So: the same tests, the same outcomes, the same failure messages, locally and in grading. Nothing
here changes what your code must do.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class Remote(Protocol):
    def call(self, target: str, args: tuple, kwargs: dict) -> Any: ...

    def drive(self, target: str, args: tuple, kwargs: dict) -> Any: ...

    def call_killed(
        self, target: str, args: tuple, kwargs: dict, *, once: Callable[[], bool], after: float
    ) -> tuple[Any, bool, str]: ...

    def printed(self) -> str: ...

    def worker_path_stamp(self, path: Path) -> tuple[int, int, int] | None: ...


#: Set by the grader's judge (never in a student's run): where student-side calls go.
remote: Remote | None = None

#: ``module:qualname`` -> what the worker runs for a driver (``run_driver`` of it).
DRIVERS: dict[str, Callable[..., Any]] = {}

#: ``module:qualname`` -> dataclasses that cross the line as themselves.
DATA_TYPES: dict[str, type] = {}

#: The global RNGs' seed at the start of every test and of every driver (tests/conftest.py, the worker).
RNG_SEED = 0


def seed_global_rngs(seed: int = RNG_SEED) -> None:
    """Seed ``random``'s global RNG, and numpy's and torch's where they are imported (every CUDA device's
    too, where there is one)."""
    import random

    random.seed(seed)
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    if np is not None:
        np.random.seed(seed)
    if torch is None:
        return
    if torch.cuda.is_available():
        torch.manual_seed(seed)
    else:  # only the CPU's: torch.manual_seed would also queue lazy seeding of devices this machine lacks
        torch.default_generator.manual_seed(seed)


def run_driver(fn: Callable[..., T], args: tuple | list, kwargs: dict) -> T:
    """Run the driver ``fn`` as every driver runs, in a student's process and in the grading worker alike:
    from global RNGs seeded with ``RNG_SEED`` (put back afterwards, so the caller's draws are its own), and
    refusing a result that is not plain data (``check_plain``)."""
    import random

    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    states = (
        random.getstate(),
        np.random.get_state() if np is not None else None,
        torch.get_rng_state() if torch is not None else None,
    )
    cuda_states = (
        torch.cuda.get_rng_state_all()
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
        else None
    )
    try:
        seed_global_rngs()
        value = fn(*args, **kwargs)
    finally:
        random.setstate(states[0])
        if np is not None:
            np.random.set_state(states[1])
        if torch is not None:
            torch.set_rng_state(states[2])
        if torch is not None and cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
    check_plain(value, f"{fn.__module__}.{fn.__qualname__}")
    return value


def driver(fn: F) -> F:
    """Mark a *driver*: a function in ``tests/scenarios/<part>.py`` that builds your objects through
    ``adapters``, runs them, and returns plain data (numbers, strings, containers, tensors, arrays,
    ``@plain_data`` dataclasses) for the test to check.

    In your own run it is a plain call; in grading it runs in the sandboxed worker beside your code, as
    one round trip, and the test's asserts run on what it returned. Either way it starts from the global
    RNGs seeded with ``RNG_SEED`` and leaves the caller's as they were (``run_driver``).
    """
    name = f"{fn.__module__}:{fn.__qualname__}"

    def run(*args: Any, **kwargs: Any) -> Any:
        return run_driver(fn, args, kwargs)

    DRIVERS[name] = run

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # a failure shows the test's line and your code's error
        if remote is None:
            return run_driver(fn, args, kwargs)
        return remote.drive(name, args, kwargs)

    return call  # type: ignore[return-value]


#: The scalar types that cross the line as themselves.
_SCALARS = (type(None), bool, int, float, complex, str, bytes, slice, Path)


def check_plain(value: Any, what: str, _path: str = "", _depth: int = 0) -> None:
    """Raise TypeError, naming where, unless ``value`` is plain data: None, numbers, strings, bytes, paths,
    lists, tuples, sets, dicts of them, tensors without an autograd history (``.detach()`` them), numpy
    arrays and scalars, torch dtypes, devices and generators, and ``@plain_data`` dataclasses."""
    if _depth > 64:
        raise TypeError(
            f"{what} returned data nested over 64 levels deep{_path and ' at ' + _path}"
        )
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, (list, tuple, set, frozenset)):
        for i, item in enumerate(value):
            check_plain(item, what, f"{_path}[{i}]", _depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            check_plain(key, what, f"{_path} key {key!r}", _depth + 1)
            check_plain(item, what, f"{_path}[{key!r}]", _depth + 1)
        return
    np, torch = (
        sys.modules.get("numpy"),
        sys.modules.get("torch"),
    )  # no value is theirs before they are imported
    if torch is not None and isinstance(value, torch.Tensor):
        if value.grad_fn is not None:
            raise TypeError(
                f"{what} returned a tensor with an autograd history{_path and ' at ' + _path}: "
                "a driver returns data, so .detach() it"
            )
        return
    if torch is not None and isinstance(value, (torch.dtype, torch.device, torch.Generator)):
        return
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if type(value) not in DATA_TYPES.values():
            raise TypeError(
                f"{what} returned a {type(value).__qualname__}{_path and ' at ' + _path}, a dataclass "
                "not marked @plain_data (tests/boundary.py): mark it so that it crosses as itself"
            )
        for f in dataclasses.fields(value):
            check_plain(getattr(value, f.name), what, f"{_path}.{f.name}", _depth + 1)
        return
    raise TypeError(
        f"{what} returned a {type(value).__qualname__}{_path and ' at ' + _path}, which is not plain "
        "data: a driver returns what the test checks (numbers, tensors, containers, @plain_data "
        "dataclasses), never your objects"
    )


def plain_data(cls: type[T]) -> type[T]:
    """Mark a dataclass whose instances cross the line as themselves (both sides import it)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"plain_data needs a dataclass, got {cls!r}")
    DATA_TYPES[f"{cls.__module__}:{cls.__qualname__}"] = cls
    return cls


def printed_by(fn: Callable[[], T]) -> tuple[T, str]:
    """Call ``fn`` (a call of your code through ``adapters``); return its value and what your code
    printed meanwhile, standard output and standard error together, in the order printed.

    If it raises, what it printed so far is printed here before the exception propagates.
    """
    if remote is None:
        text = io.StringIO()
        try:
            with redirect_stdout(text), redirect_stderr(text):
                value = fn()
        except BaseException:
            sys.stdout.write(text.getvalue())
            raise
        return value, text.getvalue()
    __tracebackhide__ = True
    sys.stdout.write(remote.printed())  # what earlier calls printed is not this call's
    value = fn()  # on an exception, grading shows what your code printed with the failure
    return value, remote.printed()


def _exit_status(value: Any) -> int:
    """The exit status ``sys.exit(value)`` gives."""
    if value is None:
        return 0
    return value if isinstance(value, int) else 1


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of the file at ``path`` from the next (None: no file)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def killed_midway(
    adapter: str, args: list[Any], *, once_written: Path, after: float
) -> tuple[int, str]:
    """Call ``adapters.<adapter>(*args)`` in a process of its own and SIGKILL that process ``after``
    seconds once the file ``once_written`` has been written (created, or replaced as an atomic save
    replaces it) since the call began, if the call has not returned by then.

    Returns the exit status (``-signal.SIGKILL`` if killed, else what ``sys.exit`` of the returned
    value gives) and what the process printed. Locally the process is a child ``python`` started
    from the folder that holds your ``adapters.py``; in grading it is the sandboxed worker, killed by
    the judge (the next call starts a fresh one). Files written before the kill stay, as after a crash.
    """
    if remote is not None:
        __tracebackhide__ = True
        grader = remote
        start = grader.worker_path_stamp(once_written)  # the copy your side of the line sees
        value, killed, printed = grader.call_killed(
            f"adapters:{adapter}",
            tuple(args),
            {},
            once=lambda: grader.worker_path_stamp(once_written) not in (None, start),
            after=after,
        )
        return (-signal.SIGKILL if killed else _exit_status(value)), printed
    import adapters  # here, not at the top: the grading worker imports this module before your code

    root = Path(adapters.__file__).resolve().parent
    command = [
        sys.executable,
        "-c",
        "import json, sys, adapters; sys.exit(getattr(adapters, sys.argv[1])(*json.loads(sys.argv[2])))",
        adapter,
        json.dumps(list(args)),
    ]
    env = {**os.environ, "PYTHONPATH": str(root)}
    start = _stamp(once_written)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env)
        try:
            while _stamp(once_written) in (None, start) and proc.poll() is None:
                time.sleep(0.01)
            try:
                proc.wait(timeout=after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        log.seek(0)
        return proc.returncode, log.read().decode("utf-8", "replace")
