"""The judge's side of the line: send one call to the worker, get plain data or an exception back.

``Remote`` owns one worker process at a time (started through a launcher, normally the bubblewrap
sandbox of ``sandbox.py``) and implements ``tests.boundary.Remote``. It never imports submission
code and never unpickles: replies are decoded by ``cs336_staff/worker/codec.py`` into tensors, arrays, numbers,
containers, ``Record``s and ``RemoteObject`` proxies. What can go wrong, and what the test sees:

    the submission raised ValueError("d_in ...")     ValueError with that message (a subclass with the
                                                     submission's class name; the worker's traceback
                                                     goes to the test's output, not into the exception)
    it raised SystemExit                             SystemExit (pytest records a failed test)
    it raised KeyboardInterrupt, GeneratorExit       WorkerError (a RuntimeError): never ends the judge
    the worker died (segfault, os._exit, OOM kill)   WorkerCrashed, naming the exit status; the next
                                                     call starts a fresh worker
    the reply is oversized or malformed              WorkerProtocolError; the worker is restarted
    (a frame, a tensor's claimed size, ...)
    it left a symlink, a special file or an over-size  WorkerOutputRefused, naming it (``mirror.py``)
    file in its scratch folder (or filled it)
    the test timed out mid-call (pytest-timeout)     the timeout's own error; the worker is killed
    more than ``max_starts`` workers were needed     WorkerUnavailable for every later call

Deliberately left out: running several calls at once, and retrying a call (a retried call could
pass by luck; a crash is the submission's failure).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cs336_staff.grade.limits import Limits
from cs336_staff.grade.mirror import Mirror, MirrorRefused
from cs336_staff.worker import bound, channel, codec, rngs
from cs336_staff.worker.write_through import assign_at, write_through

REPLY_LIMIT = Limits.reply_bytes  # bytes in one reply: a flood cannot grow the judge past this
MESSAGE_CHARS = Limits.message_chars  # characters of an exception's message, and of its traceback, kept
NAME_CHARS = 200  # characters of a type name or a repr the worker sends
TAKE_BATCH = 256  # most items of a worker iterator fetched in one round trip
OUTPUT_PER_TEST = 8000  # characters of worker output shown per test (head and tail)
PRINTED_CHARS = 1 << 20  # characters of worker output kept between two takes (head and tail): a test reads them
CONSOLE_LIMIT = 64 << 10  # characters of worker output kept for the whole run (head and tail)
MARK_WAIT = 10.0  # seconds the judge waits for the worker's output mark to come through its reader
KILL_POLL = 0.01  # seconds between the judge's looks for the moment to kill a worker (``call_killed``)


class WorkerError(RuntimeError):
    """Something about the worker, not an exception the submission raised inside a call."""


class WorkerCrashed(WorkerError):
    """The worker process ended while it was running a call."""


class WorkerProtocolError(WorkerError):
    """The worker's reply was too large or not a valid message."""


class WorkerUnavailable(WorkerError):
    """No worker could be started, or too many were needed already."""


class WorkerOutputRefused(WorkerError):
    """A file was not mirrored: the worker left one the judge does not copy back (a symlink, a special
    file, an over-size file), or the judge could not copy a test's file in (the worker's disk is full)."""


class FromWorker(Exception):
    """Mixin of every exception rebuilt from the worker (``except FromWorker`` to tell them apart)."""


def _worker_str(self: BaseException) -> str:
    """``str(e)`` as the worker saw it, where the rebuilt args alone do not say it (see below)."""
    said = self.__dict__.get("worker_str")
    return said if said is not None else super(type(self), self).__str__()


_REBUILT: dict[tuple[str, type], type] = {}


def _clip_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit // 2]}\n[... {len(text) - limit} characters cut ...]\n{text[-limit // 2 :]}"


def bounded_error(error: Any, chars: int = MESSAGE_CHARS) -> dict:
    """The worker's error description, cut to what the judge keeps: megabyte messages on every call
    would otherwise live on in each failed test's report (and grow the judge by gigabytes)."""
    if not isinstance(error, dict):
        return {}
    types = error.get("types")
    types = [str(t)[:NAME_CHARS] for t in types[:64]] if isinstance(types, list) else []
    args = error.get("args")
    try:
        args_size = len(json.dumps(args)) if isinstance(args, list) else 0
    except (TypeError, ValueError, RecursionError):
        args, args_size = None, 0
    return {"types": types, "args": args if isinstance(args, list) and args_size <= chars else None,
            "message": _clip_text(str(error.get("message", "")), chars),
            "traceback": _clip_text(str(error.get("traceback", "")), chars)}


#: Top-level modules whose exception classes the judge may take as a rebuilt exception's base: the
#: standard library's (``sys.stdlib_module_names``) and these, each imported here only if the judge
#: already has it (``pickle.UnpicklingError``, ``json.JSONDecodeError``, ``torch.OutOfMemoryError``).
TRUSTED_PACKAGES = frozenset({"builtins", "torch", "numpy", "regex", "einops"})


def _trusted_class(qualified: str) -> type[BaseException] | None:
    """The exception class ``module.qualname`` names, if the judge already has that module and trusts its
    package (never importing anything: the name is the worker's word); else None."""
    module, _, qualname = qualified.rpartition(".")
    top = module.partition(".")[0]
    if top not in TRUSTED_PACKAGES and top not in sys.stdlib_module_names:
        return None
    if module == "builtins":
        found: Any = builtins
    else:
        found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None) if found is not None else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def rebuild_exception(error: dict, chars: int = MESSAGE_CHARS) -> BaseException:
    """A local exception standing for one the submission raised: its class name, its nearest base class
    the judge trusts (``pickle.UnpicklingError``, ``ValueError``; ``Exception`` for a class of the
    submission's own), its args and its ``str()``. Type and message only: the worker's traceback is
    kept apart (``worker_traceback``), for the test's output, so ``pytest.raises(match=)`` reads what a
    student's own run would show and nothing more."""
    error = bounded_error(error, chars)
    types = [str(t) for t in error.get("types", [])]
    message = str(error.get("message", ""))
    base: type[BaseException] = WorkerError
    for qualified in types:
        candidate = _trusted_class(qualified)
        if candidate is not None:
            base = candidate
            break
    if not issubclass(base, Exception) and base is not SystemExit:  # KeyboardInterrupt would end the judge
        base, message = WorkerError, f"{types[0] if types else 'an exception'} raised in the worker: {message}"
    name = types[0].rpartition(".")[2] if types else base.__name__
    key = (name, base)
    if key not in _REBUILT:
        # FromWorker first: with (base, FromWorker) a base of Exception itself has no consistent MRO
        _REBUILT[key] = type(name, (FromWorker, base), {"__module__": "worker", "__str__": _worker_str,
                                                        "__init__": _plain_init})
    cls = _REBUILT[key]
    args = error.get("args")
    exc = cls(*args) if isinstance(args, list) and base is not WorkerError else cls(message)
    if str(exc) != message and "characters cut ...]" not in message and "[... cut ...]" not in message:
        # args do not always make the message: an OSError keeps its filename outside them
        # ("[Errno 2] No such file or directory: 'ckpt.pt'"), a class may define __str__
        exc.worker_str = message
    exc.worker_traceback = str(error.get("traceback", "")).strip()  # type: ignore[attr-defined]
    return exc


def _plain_init(self: BaseException, *args: Any) -> None:
    """Any args, whatever the base's own ``__init__`` demands (``UnicodeDecodeError`` wants five)."""
    BaseException.__init__(self, *args)


def worker_traceback(exc: BaseException) -> str:
    """The submission's traceback an exception rebuilt from the worker carries ("" for any other)."""
    return str(getattr(exc, "worker_traceback", "") or "") if isinstance(exc, FromWorker) else ""


class OutputTap:
    """Reads the worker's stderr (its stdout too) in a thread; keeps a bounded copy per test and per run."""

    def __init__(self, stream: Any) -> None:
        self._lock = threading.Condition()  # notified whenever output arrives (``take_through`` waits on it)
        self._test: list[str] = []
        self._test_size = 0
        self._test_dropped = 0
        self.head, self.tail, self.dropped = "", "", 0
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for raw in iter(lambda: stream.read1(4096), b""):
            text = raw.decode("utf-8", "replace")
            with self._lock:
                self._keep_console(text)
                if self._test_size < PRINTED_CHARS:
                    self._test.append(text)
                    self._test_size += len(text)
                else:
                    self._test_dropped += len(text)
                    self._test = self._test[-64:]  # keep a tail too
                    self._test.append(text)
                self._lock.notify_all()

    def _keep_console(self, text: str) -> None:
        half = CONSOLE_LIMIT // 2
        if len(self.head) < half:
            take = text[: half - len(self.head)]
            self.head += take
            text = text[len(take) :]
        if text:
            self.tail += text
            if len(self.tail) > half:
                self.dropped += len(self.tail) - half
                self.tail = self.tail[-half:]

    def take(self, through: str | None = None, timeout: float = 0.0, limit: int = OUTPUT_PER_TEST) -> str:
        """What the worker printed since the last ``take``, cut to about ``limit`` characters.

        With ``through`` (a mark the worker wrote after everything a call printed), wait up to
        ``timeout`` seconds for the mark to arrive, so that nothing printed before it is missed;
        the mark itself is left out.
        """
        with self._lock:
            if through is not None:
                self._lock.wait_for(lambda: through in "".join(self._test[-3:]), timeout)
            text, dropped = "".join(self._test), self._test_dropped
            self._test, self._test_size, self._test_dropped = [], 0, 0
        if through is not None:
            text = text.replace(through, "")
        if dropped or len(text) > limit:
            half = limit // 2
            text = f"{text[:half]}\n[... {dropped + max(0, len(text) - limit)} characters cut ...]\n{text[-half:]}"
        return text

    def console(self) -> str:
        with self._lock:
            cut = f"\n[... {self.dropped} characters cut ...]\n" if self.dropped else ""
            return self.head + cut + self.tail

    def join(self, timeout: float = 2.0) -> None:
        self._thread.join(timeout)


@dataclass
class WorkerProcess:
    """A started worker: its process, the two pipe ends the judge uses, and its output."""

    proc: subprocess.Popen
    requests: int  # the judge writes requests here
    replies: int  # and reads replies here
    output: OutputTap
    isolation: dict[str, str] = field(default_factory=dict)
    cleanup: Callable[[], None] | None = None  # e.g. stop a resource watchdog
    verdict: Callable[[], str | None] | None = None  # why it was killed, if a watchdog did it
    before_request: Callable[[], None] | None = None  # e.g. hand the scratch folder to the worker's uid
    #: After each test: check now a limit that a poll may miss (the container tier's disk); why it was killed, if it was.
    settle: Callable[[], str | None] | None = None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.cleanup is not None:
            self.cleanup()
        self.output.join()


Launcher = Callable[[], WorkerProcess]


def describe_exit(proc: subprocess.Popen, verdict: str | None = None) -> str:
    code = proc.poll()
    if verdict:
        return verdict
    if code is None:
        return "it stopped answering"
    signum = -code if code < 0 else code - 128 if 128 < code < 160 else None  # bwrap reports 128 + signal
    if signum is not None:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return f"it was killed by {name}" + (" (a segmentation fault)" if name == "SIGSEGV" else "")
    return f"it exited with status {code}"


def _refuse_handle(node: dict) -> Any:
    """A driver's answer holds an object, not data: the worker's failure (``Remote.drive``)."""
    raise codec.CodecError(f"a driver's answer held an object ({str(node.get('type', '?'))[:NAME_CHARS]}), not plain data")


class RemoteObject:
    """A proxy for an object that lives in the worker (a tokenizer, a class, a bound method).

    Attribute reads and writes, calls, iteration, ``len``, ``in``, ``[]`` and ``with`` cross the
    line; the values that come back are plain data or further proxies. A list or dict read from
    an attribute (``opt.param_groups``) is a copy that writes through: ``group["lr"] = x`` on it
    also assigns in the worker's object. ``isinstance`` does not work on a proxy.
    """

    __slots__ = ("_remote", "_id", "_generation", "_type", "_repr", "_methods", "_ahead", "_batch", "__weakref__")

    def __init__(self, remote: Remote, node: dict) -> None:
        self._remote, self._generation = remote, remote.generation
        self._id, self._type = int(node["id"]), str(node.get("type", "?"))[:NAME_CHARS]
        self._repr = str(node.get("repr", ""))[:NAME_CHARS]
        methods = node.get("methods")
        self._methods = (frozenset(m[:NAME_CHARS] for m in methods if isinstance(m, str))
                         if isinstance(methods, list) else frozenset())
        self._ahead: list = []  # items of this iterator fetched but not yet handed out
        self._batch = 0  # how many the next fetch asks for (0: one, by "next")
        weakref.finalize(self, remote._release, self._generation, self._id)

    def _op(self, op: str, *args: Any, **fields: Any) -> Any:
        __tracebackhide__ = True
        return self._remote.op(op, self, args, {}, **fields)

    def __getattr__(self, name: str) -> Any:
        __tracebackhide__ = True
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._methods:  # called in one round trip, not read then called
            return RemoteMethod(self, name)
        return self._op("getattr", name=name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        return self._remote.op("call_handle", self, args, kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        __tracebackhide__ = True
        if name in RemoteObject.__slots__:
            object.__setattr__(self, name, value)
        elif name.startswith("__"):
            raise AttributeError(f"special attribute {name} of a worker object cannot be set")
        else:
            self._op("setattr", value, name=name)

    def __enter__(self) -> Any:
        __tracebackhide__ = True
        return self._op("enter")

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        __tracebackhide__ = True
        self._op("exit", None if error is None else f"{type(error).__name__}: {error}")
        return False  # an exception of the test's is never swallowed by the worker

    def __iter__(self) -> RemoteObject:
        return self._op("iter")

    def __next__(self) -> Any:
        """The next item. Items drawn one after another with no other call between are fetched in
        doubling batches (up to ``TAKE_BATCH``): ``list(stream)`` costs a few round trips, while
        streams advanced in turns still advance one item per call, in order."""
        __tracebackhide__ = True
        if self._ahead:
            return self._ahead.pop(0)
        if self._remote.last_handle != self._id:
            self._batch = 0
        if self._batch == 0:
            self._batch = 1
            return self._op("next")
        self._batch = min(2 * self._batch, TAKE_BATCH)
        items, exhausted = self._op("take", self._batch)
        if not items and exhausted:
            raise StopIteration
        self._ahead = list(items)
        return self._ahead.pop(0)

    def __len__(self) -> int:
        return self._op("len")

    def __getitem__(self, key: Any) -> Any:
        return self._op("getitem", key)

    def __contains__(self, item: Any) -> bool:
        return self._op("contains", item)

    def __setitem__(self, key: Any, value: Any) -> None:
        __tracebackhide__ = True
        self._op("setitem", key, value)

    def __repr__(self) -> str:
        return f"<{self._type} in the worker: {self._repr}>"


_ANCHOR: list = []


def _anchor() -> Any:
    """A leaf that requires grad, so the judge's autograd keeps a node for a worker result."""
    if not _ANCHOR:
        import torch

        _ANCHOR.append(torch.zeros((), requires_grad=True))
    return _ANCHOR[0]


def _through_worker_cls() -> type:
    import torch

    class ThroughWorker(torch.autograd.Function):
        """A worker result in the judge's autograd: backward runs the worker's own backward from it.

        The gradients land on the worker's leaves; those bound to judge tensors (the test's input
        ``x``, parameters read from the model) come back with the reply.
        """

        @staticmethod
        def forward(ctx: Any, anchor: Any, value: Any, worker_tensor: RemoteObject) -> Any:
            ctx.worker_tensor = worker_tensor
            return value.clone()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            ctx.worker_tensor._op("backward", grad)
            return None, None, None

    return ThroughWorker


class _LazyFunction:
    def __getattr__(self, name: str) -> Any:
        cls = _through_worker_cls()
        globals()["_ThroughWorker"] = cls
        return getattr(cls, name)


_ThroughWorker: Any = _LazyFunction()


class RemoteMethod:
    """``obj.method`` of a worker object, not yet called: calling it is one request (``call_method``)."""

    __slots__ = ("_owner", "_name")

    def __init__(self, owner: RemoteObject, name: str) -> None:
        self._owner, self._name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        owner = self._owner
        return owner._remote.op("call_method", owner, args, kwargs, name=self._name)

    def __repr__(self) -> str:
        return f"<method {self._name} of {self._owner!r}>"


class JudgeSide:
    """Serves a worker stand-in's requests on one judge object: public attributes read and set, public
    methods called. Its answers cross as plain data only (``Remote._answer_callback``)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __call__(self, op: str, name: str, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(name, str) or name.startswith("_"):
            raise AttributeError(f"the test's {type(self.obj).__name__} offers the worker public attributes only, "
                                 f"not {name!r}")
        if op == "getattr":
            return getattr(self.obj, name)
        if op == "call":
            return getattr(self.obj, name)(*args, **kwargs)
        if op == "setattr" and len(args) == 1:
            setattr(self.obj, name, args[0])
            return None
        if op == "assign" and len(args) == 2 and isinstance(args[0], list):  # obj.<name>[k1]...[kn] = v
            assign_at(self.obj, [name, *args[0]], args[1])
            return None
        raise ValueError(f"unknown request {op!r} on the test's {type(self.obj).__name__}")


class Remote:
    """One worker at a time; ``call`` is what ``tests.boundary`` and the adapters proxy use."""

    def __init__(self, launch: Launcher, *, max_starts: int = 12, startup_timeout: float = 300.0,
                 reply_limit: int = REPLY_LIMIT, value_limit: int | None = Limits.value_bytes,
                 message_chars: int = MESSAGE_CHARS, mirror: Mirror | None = None,
                 tree_limit: int | None = Limits.tree_bytes) -> None:
        self._launch = launch
        self.max_starts, self.startup_timeout, self.reply_limit = max_starts, startup_timeout, reply_limit
        self.value_limit = value_limit  # the largest tensor/array a reply may claim (codec.check_value_size)
        self.message_chars = message_chars
        self.tree_limit = tree_limit  # the largest JSON part of a reply (channel.tree_size_problem)
        self.mirror: Mirror | None = mirror  # the judge's scratch and the worker's copy of it, synced per call
        self.worker: WorkerProcess | None = None
        self.starts = 0
        self.crashes = 0  # workers that ended badly (crash, timeout, unusable reply)
        self.generation = 0
        self.consoles: list[str] = []
        self.isolation: dict[str, str] = {}
        self.last_crash: str | None = None
        self._pending_release: list[int] = []
        self.last_handle: int | None = None  # the worker object the last request used
        self.bindings = bound.Bindings(weak=True, limit=self.value_limit)
        self._proxies: weakref.WeakValueDictionary[int, RemoteObject] = weakref.WeakValueDictionary()
        self._callbacks: dict[int, Callable] = {}
        self._next_callback = 1
        self._judge_objects: dict[int, tuple[Any, dict]] = {}  # id(obj) -> (obj, its node), until reset
        self.rng_sync = rngs.Sync()  # the global RNG states the judge and the current worker agree on
        self._rng_worker: WorkerProcess | None = None  # the worker they were agreed with
        #: Instances of these cross to the worker as stand-ins (``tests.boundary.JUDGE_SIDE``, set by the judge).
        self.judge_side: list[type | str] = []
        #: Single objects that cross as stand-ins, by id (``tests.boundary.JUDGE_SIDE_OBJECTS``, set by the judge).
        self.judge_side_objects: Mapping[int, Any] = {}
        self._marks = 0  # output marks written so far (``printed``)
        self._spare: Future[WorkerProcess] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-ready")

    # -- lifecycle -----------------------------------------------------------------------
    def _spawn(self) -> WorkerProcess:
        """Launch a worker and wait for its 'ready' (sent once its preloads are imported)."""
        return self._wait_ready(self._launch())

    def _wait_ready(self, worker: WorkerProcess) -> WorkerProcess:
        try:
            msg, _ = channel.receive(worker.replies, 1 << 16, time.monotonic() + self.startup_timeout)
        except (channel.ChannelClosed, channel.ChannelError, channel.ChannelTimeout) as e:
            why = describe_exit(worker.proc) if isinstance(e, channel.ChannelClosed) else str(e)
            worker.kill()
            self._keep_console(worker)
            raise WorkerUnavailable(f"the worker did not start ({why}):\n{worker.output.console()[-3000:]}") from None
        if "ready" not in msg:
            worker.kill()
            raise WorkerUnavailable(f"the worker's first message was not 'ready': {str(msg)[:200]}")
        return worker

    def prepare_spare(self) -> None:
        """Start a worker now and let it get ready in the background for the next ``start``.

        A spare has answered no call, so it is as fresh as one started later: the judge uses one
        for the hidden tests, started while the visible tests run. The process is launched from
        the calling thread (bubblewrap's --die-with-parent follows the thread that forked it);
        only the wait for 'ready' runs in a helper thread.
        """
        if self._spare is None:
            try:
                worker = self._launch()
            except Exception as e:  # noqa: BLE001 - reported when the spare is used
                failed: Future[WorkerProcess] = Future()
                failed.set_exception(WorkerUnavailable(f"the worker did not start: {e}"))
                self._spare = failed
                return
            self._spare = self._pool.submit(self._wait_ready, worker)

    def start(self) -> WorkerProcess:
        """Make a worker current: the spare if one was prepared, else a new one (a call starts one when none is)."""
        if self.starts >= self.max_starts:
            raise WorkerUnavailable(
                f"the worker was started {self.starts} times already (it crashed or timed out each time); "
                "the remaining calls are not run"
            )
        self.starts += 1
        self.generation += 1
        self._pending_release = []
        self._callbacks.clear()
        self.bindings = bound.Bindings(weak=True, limit=self.value_limit)  # a fresh worker has no twins: tensors bind again
        self._proxies = weakref.WeakValueDictionary()
        spare, self._spare = self._spare, None
        worker = spare.result() if spare is not None else self._spawn()
        self.isolation = worker.isolation
        self.worker = worker
        return worker

    def _keep_console(self, worker: WorkerProcess) -> None:
        text = worker.output.console()
        if text:
            self.consoles.append(text)

    def restart(self) -> None:
        """Stop the current worker; the next call starts a fresh one (and old proxies go stale)."""
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.kill()
            self._keep_console(worker)

    def settle(self) -> None:
        """After a test: the limits a poll may miss are checked now (``WorkerProcess.settle``), so the test
        that broke one fails, not the next one or none. WorkerCrashed if one was broken."""
        __tracebackhide__ = True
        worker = self.worker
        why = worker.settle() if worker is not None and worker.settle is not None else None
        if why:
            self.restart()
            self.crashes += 1
            self.last_crash = why
            raise WorkerCrashed(f"the worker running your code was stopped after this test: {why}")

    def close(self) -> None:
        self.restart()
        spare, self._spare = self._spare, None
        if spare is not None:
            with contextlib.suppress(Exception):
                worker = spare.result()
                worker.kill()
                self._keep_console(worker)

    def take_output(self) -> str:
        return self.worker.output.take() if self.worker is not None else ""

    def printed(self) -> str:
        """What the worker printed (stdout and stderr, one stream) since the last take, all of it: the
        worker flushes and writes a mark after it, and the judge's reader waits for the mark."""
        if self.worker is None:
            return ""
        self._marks += 1
        mark = f"\n[cs336 judge: output mark {self._marks}]\n"
        self._request({"op": "mark"}, [mark], {})
        return self.worker.output.take(through=mark, timeout=MARK_WAIT, limit=PRINTED_CHARS) if self.worker is not None else ""

    def worker_path_stamp(self, path: str | os.PathLike) -> tuple[int, int, int] | None:
        """``(inode, mtime_ns, size)`` of the worker's copy of ``path`` (a path in the judge's folder)
        now, mid-call, or None if there is none: an ``lstat``, nothing read. Only the timing of a kill
        may depend on it, never an outcome. (A file the judge wrote is copied in before each call that
        names its folder, which changes this stamp; one the worker wrote stays as it left it.)"""
        where = os.path.abspath(path)
        if self.mirror is not None:
            root = str(self.mirror.judge)
            if where.startswith(root + os.sep):  # container tier: mid-call the worker's copy is at the judge's path
                where = os.path.join(self.mirror.worker_now(), where[len(root) + 1 :])
        try:
            st = os.lstat(where)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def call_killed(self, target: str, args: tuple | list, kwargs: dict, *, once: Callable[[], bool],
                    after: float) -> tuple[Any, bool, str]:
        """Make one call, and SIGKILL the worker running it ``after`` seconds once ``once()`` holds.

        Returns ``(value, killed, printed)``: the call's value (None if killed), whether the judge
        killed it, and what the worker printed meanwhile. Files the worker wrote before the kill are
        pulled as after any call (``mirror.py``); the next call starts a fresh worker. A kill the judge
        ordered is not counted as a crash; an exception of the call propagates as from ``call``.
        """
        __tracebackhide__ = True
        worker = self.worker or self.start()
        lock, done, killed = threading.Lock(), threading.Event(), threading.Event()

        def kill_when_due() -> None:
            while not done.is_set() and not once():
                done.wait(KILL_POLL)
            if done.wait(after):
                return
            with lock:
                if not done.is_set():
                    killed.set()
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(worker.proc.pid, signal.SIGKILL)
                    with contextlib.suppress(ProcessLookupError):
                        worker.proc.kill()

        killer = threading.Thread(target=kill_when_due, daemon=True, name="judge-kill-timer")
        killer.start()
        try:
            value = self.call(target, args, kwargs)
        except WorkerCrashed:
            if not killed.is_set():
                raise
            self.crashes -= 1  # the judge's own kill: the submission did not crash
            return None, True, worker.output.take(limit=PRINTED_CHARS)
        finally:
            with lock:
                done.set()
            killer.join()
        if killed.is_set():  # killed just after it answered: the answer stands, the worker is gone
            self.restart()
            return value, False, worker.output.take(limit=PRINTED_CHARS)
        return value, False, self.printed()

    def worker_pids(self) -> list[int]:
        """The current worker's processes as this machine numbers them (the launcher's and all its
        descendants'), for what the judge reads from outside, such as peak memory in ``/proc``;
        empty when no worker runs. The spare is not among them."""
        import psutil

        if self.worker is None:
            return []
        try:
            root = psutil.Process(self.worker.proc.pid)
            return [root.pid, *(p.pid for p in root.children(recursive=True))]
        except psutil.Error:
            return []

    def _release(self, generation: int, handle: int) -> None:
        if generation == self.generation:
            self._pending_release.append(handle)

    # -- calls ---------------------------------------------------------------------------
    def call(self, target: str, args: tuple | list, kwargs: dict) -> Any:
        __tracebackhide__ = True
        self.last_handle = None
        return self._request({"op": "call", "target": target}, args, kwargs)

    def drive(self, target: str, args: tuple | list, kwargs: dict) -> Any:
        """Run the driver ``target`` (``tests.boundary.driver``) in the worker: one round trip whose answer
        must be plain data (an object handle in it is the worker's failure, not a proxy)."""
        __tracebackhide__ = True
        self.last_handle = None
        return self._request({"op": "call", "target": target}, args, kwargs, plain=True)

    def reset(self) -> None:
        """Between tests: forget the functions and iterators the last test passed (they may be called
        back until then), and put the worker's global RNGs back to their start state (the next call
        brings the judge's own)."""
        self._callbacks.clear()
        self._judge_objects.clear()
        self._request({"op": "reset"}, [], {})
        self.rng_sync.forget()  # the worker went back to its start states: the next call brings the judge's

    def op(self, op: str, obj: RemoteObject, args: tuple | list, kwargs: dict, **fields: Any) -> Any:
        __tracebackhide__ = True
        if obj._generation != self.generation or self.worker is None:
            raise WorkerError(
                f"{obj!r} lived in a worker that has since ended (after a crash or a timeout); "
                "create it again"
            )
        self.last_handle = obj._id
        value = self._request({"op": op, "handle": obj._id, **fields}, args, kwargs)
        if op != "getattr":
            return value
        return write_through(value, lambda path, v: obj._op("assign", path, v), [fields["name"]],
                             "a worker object's")

    def _ref_of(self, value: Any) -> int | None:
        if isinstance(value, RemoteObject):
            if value._generation != self.generation:
                raise WorkerError(f"{value!r} lived in a worker that has since ended; create it again")
            return value._id
        return None

    def _callback(self, fn: Callable) -> int:
        number, self._next_callback = self._next_callback, self._next_callback + 1
        self._callbacks[number] = fn
        return number

    def _judge_side_types(self) -> tuple[type, ...]:
        """``judge_side`` as classes: a ``module:qualname`` entry only once its module is imported (before
        that, no instance of it can exist here)."""
        types = []
        for entry in self.judge_side:
            if isinstance(entry, str):
                module, _, name = entry.partition(":")
                entry = getattr(sys.modules.get(module), name, None)
            if isinstance(entry, type):
                types.append(entry)
        return tuple(types)

    def _judge_object(self, value: Any) -> dict | None:
        """The node of a judge object crossing to the worker (one number per object, until ``reset``), or None."""
        if self.judge_side_objects.get(id(value)) is not value and not isinstance(value, self._judge_side_types()):
            return None
        if id(value) not in self._judge_objects:
            node = {"$": "judge_object", "id": self._callback(JudgeSide(value)), "type": codec._type_name(value),
                    "module": type(value).__module__, "qualname": type(value).__qualname__,
                    "methods": codec._method_names(value)}
            self._judge_objects[id(value)] = (value, node)  # kept: its id stays its own while the test runs
        return self._judge_objects[id(value)][1]

    def _encoder(self, plain: bool = False) -> codec.Encoder:
        """An encoder of what crosses to the worker; ``plain``: data, bound tensors and judge objects only (a
        judge object's answer: ``model.eval()`` returns the model, which crosses as its stand-in again)."""
        if plain:
            return codec.Encoder(ref_of=self._ref_of, bind=self.bindings.encode, judge_object=self._judge_object)
        return codec.Encoder(ref_of=self._ref_of, bind=self.bindings.encode, callback=self._callback,
                             judge_object=self._judge_object)

    def _decoder(self, reply: dict, blobs: list, known: list | None = None, plain: bool = False) -> codec.Decoder:
        return codec.Decoder(reply.get("storages", []), blobs, known=known,
                             handle=_refuse_handle if plain else self._proxy,
                             allow_memmap=False, max_value_bytes=self.value_limit,
                             bound=self.bindings.decode, graph=self._through_worker)

    def _proxy(self, node: dict) -> RemoteObject:
        """The one proxy of a worker object (a handle seen again, e.g. ``iter(generator)``, is the same proxy)."""
        proxy = self._proxies.get(node.get("id"))
        if proxy is None:
            proxy = RemoteObject(self, node)
            self._proxies[proxy._id] = proxy
            with contextlib.suppress(ValueError):  # a proxy of it died since the last request: keep it
                self._pending_release.remove(proxy._id)
        return proxy

    def _through_worker(self, value: Any, handle: Any) -> Any:
        """``value`` (a result computed with autograd in the worker) as the output of a node of the
        judge's autograd graph whose backward sends the gradient to the worker's own graph."""
        import torch

        if not torch.is_grad_enabled():
            return value.requires_grad_(False)
        worker_tensor = self._proxy({"id": handle, "type": "torch.Tensor", "repr": "a result with a graph"})
        return _ThroughWorker.apply(_anchor(), value.detach(), worker_tensor)

    def _outgoing(self, message: dict, encoder: codec.Encoder) -> None:
        """What every message to the worker carries besides its call: bound-tensor changes, releases,
        grad mode, global RNG states."""
        message["bound"] = self.bindings.changes(encoder)
        # a reset puts the worker's states back to its start ones, overwriting any the judge sent with it
        # (and the judge forgets their agreement: its next call carries them all)
        states = self.rng_sync.outgoing(encoder) if message.get("op") != "reset" else None
        if states is not None:
            message["rngs"] = states
        message["unbind"], self.bindings.released = self.bindings.released, []
        message["release"], self._pending_release = self._pending_release, []
        torch = sys.modules.get("torch")
        if torch is not None:
            message["grad_enabled"] = torch.is_grad_enabled()

    def _incoming(self, reply: dict, blobs: list) -> None:
        """Take what every message from the worker carries: bound-tensor changes, global RNG states."""
        self.bindings.apply(reply.get("bound", []), blobs)
        self.rng_sync.incoming(reply.get("rngs"), blobs)

    def _request(self, head: dict, args: tuple | list, kwargs: dict, plain: bool = False) -> Any:
        """One call, with the scratch folders mirrored around it (``mirror.py``) where the judge has a mirror."""
        __tracebackhide__ = True
        scopes = self.mirror.scopes([args, kwargs]) if self.mirror is not None else []
        if not scopes:  # a call that names no file in the judge's folder
            return self._exchange(head, args, kwargs, plain)
        try:
            self.mirror.push(scopes)
        except MirrorRefused as e:
            raise WorkerOutputRefused(f"before {head.get('target') or head['op']}: {e}") from None
        try:
            value = self._exchange(head, args, kwargs, plain)
        except FromWorker:  # the submission's own error: what it left behind is copied back all the same
            self._pull(head, scopes)
            raise
        except BaseException:  # a crash or a timeout: copy back what can be, and report the first failure
            with contextlib.suppress(Exception):
                self._pull(head, scopes)
            raise
        self._pull(head, scopes)
        return value

    def _pull(self, head: dict, scopes: list[str]) -> None:
        __tracebackhide__ = True
        try:
            self.mirror.pull(scopes)
        except MirrorRefused as e:
            raise WorkerOutputRefused(f"after {head.get('target') or head['op']}: {e}") from None

    def _exchange(self, head: dict, args: tuple | list, kwargs: dict, plain: bool = False) -> Any:
        __tracebackhide__ = True
        worker = self.worker or self.start()
        if worker is not self._rng_worker:  # a fresh worker holds its start states, not the agreed ones
            self.rng_sync.forget()
            self._rng_worker = worker
        if worker.before_request is not None:
            worker.before_request()
        encoder = self._encoder()
        message = {**head, "args": encoder.encode(list(args)), "kwargs": encoder.encode(dict(kwargs))}
        message["storages"] = encoder.storages
        self._outgoing(message, encoder)
        what = head.get("target") or f"{head['op']} on a worker object"
        failed: list[BaseException] = []  # exceptions of the judge's own callbacks, raised once the call ends
        try:
            channel.send(worker.requests, message, encoder.blobs)
            while True:
                reply, blobs = channel.receive(worker.replies, self.reply_limit, tree_limit=self.tree_limit)
                if "callback" not in reply:
                    break
                self._answer_callback(worker, reply, blobs, failed)
        except (channel.ChannelClosed, BrokenPipeError):
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(timeout=5)
            why = describe_exit(worker.proc, worker.verdict() if worker.verdict else None)
            printed = worker.output.console()[-1500:]
            self.restart()
            self.crashes += 1
            self.last_crash = why
            raise WorkerCrashed(
                f"the worker running your code ended during {what}: {why}"
                + (f"\nlast output:\n{printed}" if printed.strip() else "")
            ) from None
        except channel.ChannelError as e:
            self.restart()
            self.crashes += 1
            raise WorkerProtocolError(f"the worker's reply to {what} was unusable: {e}") from None
        except BaseException:  # a timeout or interrupt mid-call: the worker's state is unknown
            self.restart()
            self.crashes += 1
            raise
        try:
            self._incoming(reply, blobs)
            if "error" not in reply:
                decoder = self._decoder(reply, blobs, known=encoder.storage_objects, plain=plain)
                value = decoder.decode(reply.get("ok"))
                for index, data in reply.get("mutated", []):
                    target = encoder.storage_objects[index]
                    flat = codec.storage_as_bytes_tensor(target)
                    flat.copy_(codec.bytes_tensor(decoder.blobs[data]).to(flat.device))
                for index, data in reply.get("generators", []):
                    encoder.generators[index].set_state(codec.bytes_tensor(decoder.blobs[data]))
        except Exception as e:  # a malformed reply is the worker's failure, never the judge's
            self.restart()
            raise WorkerProtocolError(f"the worker's reply to {what} could not be decoded: {type(e).__name__}: {e}") from None
        if failed:
            raise failed[0]
        if "error" in reply:
            exc = rebuild_exception(reply["error"] if isinstance(reply["error"], dict) else {}, self.message_chars)
            del reply, blobs  # the raised exception keeps this frame: it must not keep the reply's megabytes
            raise exc
        return value

    def _answer_callback(self, worker: WorkerProcess, reply: dict, blobs: list, failed: list[BaseException]) -> None:
        """Run a function of the judge's the worker called back (a closure), and send its result.

        It runs here, in the judge, under the grad mode the worker had when it called (``step``
        enables grad around its closure). An exception it raises is the test's: the worker is told
        the function failed, and the judge raises the exception itself once the call ends.
        """
        __tracebackhide__ = True
        self._incoming(reply, blobs)
        fn = self._callbacks.get(reply.get("callback"))  # type: ignore[arg-type]
        plain = isinstance(fn, JudgeSide)  # a stand-in's request: data back, and its errors are the worker's
        encoder = self._encoder(plain)
        answer: dict[str, Any] = {"op": "return"}
        try:
            if fn is None:
                raise WorkerError("the worker called a function of the test's after the test that passed it had ended")
            decoder = self._decoder(reply, blobs)
            args, kwargs = decoder.decode(reply.get("args", [])), decoder.decode(reply.get("kwargs", {"$": "dict", "items": []}))
            torch = sys.modules.get("torch")
            mode = torch.set_grad_enabled(bool(reply.get("grad_enabled", True))) if torch is not None else contextlib.nullcontext()
            view = self.mirror.judge_view() if self.mirror is not None else contextlib.nullcontext()
            with mode, view:  # the test's own function sees the judge's folder (mirror.py), not the worker's
                result = fn(*args, **kwargs)
            if plain and isinstance(result, types.GeneratorType):  # model.parameters(): what it yields, drawn
                result, answer["yielded"] = list(result), True    # there from an iterator over the list
            answer["ok"] = encoder.encode(result)
        except StopIteration:  # an iterator of the test's is exhausted: the worker's stand-in stops too
            answer = {"op": "return", "stop": True}
            encoder = self._encoder()
        except Exception as e:
            encoder = self._encoder()
            if plain:  # e.g. load_state_dict's ValueError: raised in the submission's code, which may catch it
                answer.update(raised=type(e).__name__, error=str(e)[:2000])
            else:  # the test's own failure, raised when the call ends
                failed.append(e)
                answer["error"] = f"{type(e).__name__}: {e}"[:2000]
        except BaseException as e:  # noqa: BLE001 - the test's own failure (a timeout), raised when the call ends
            failed.append(e)
            encoder = self._encoder()
            answer["error"] = f"{type(e).__name__}: {e}"[:2000]
        answer["storages"] = encoder.storages
        self._outgoing(answer, encoder)
        channel.send(worker.requests, answer, encoder.blobs)
