"""The worker: the only process that runs submission code. It answers one call at a time.

Started by the judge (``remote.py``), normally inside the bubblewrap sandbox (``sandbox.py``), with
two pipes: requests arrive on ``--requests`` and replies leave on ``--replies`` (``channel.py``
frames, ``codec.py`` values). Standard output is pointed at standard error before anything is
imported, so nothing the submission prints can land in the reply pipe by accident, and the judge
keeps what is printed for the test that was running.

Requests (all names are resolved here, in the worker; the judge only ever sees data back):

    {"op": "call", "target": "adapters:run_flat_index", ...}     an adapter (in ``adapters.__all__``)
    {"op": "call", "target": "tests.scenarios.optim:fn", ...}    a function marked ``@student_side``
    {"op": "reset"}                                              global RNGs back to their start state
    {"op": "mark", "args": [text]}                               flush stdout/stderr, then write text to
                                                                 stderr (the judge's ``Remote.printed``)
    {"op": "getattr" | "call_handle" | "call_method" | "iter" | "next" | "take" | "len" | "getitem" | "contains"
           | "setattr" | "setitem" | "assign" | "enter" | "exit" | "backward", "handle": id, ...}
                                                                 use an object returned earlier
    every request may also carry "release": [ids]               forget objects the judge dropped
    and "bound": [changes], "unbind": [numbers]                 bound tensors (``bound.py``)
    and "grad_enabled": bool                                    the judge's grad mode, for the call
    and "rngs": states                                          the judge's global RNGs, where changed (``rngs.py``)
    {"op": "return", ...}                                       a callback's result (below)

A judge function passed as an argument (a closure for ``step(closure)``) arrives as a stand-in;
calling it sends ``{"callback": number, "args", "kwargs", "bound"}`` on the reply pipe, then serves
the judge's nested requests until the judge's ``{"op": "return"}``. A judge object (a torch
optimizer of the test's) arrives as a stand-in whose reads and calls are callbacks too
(``judge_object.py``).

Replies: ``{"ok": tree, "storages": [...], "mutated": [[i, blob]], "generators": [[i, blob]], "bound": [...]}``
or ``{"error": {"types": [...], "args": tree, "message": str, "traceback": str}, "bound": [...]}``.

Deliberately left out: running anything the judge names that is neither an adapter nor a
registered scenario, and any defence of this process against the submission (it is the
submission's own process; the judge trusts nothing it says).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from typing import Any

from .adapter_rule import is_adapter

MESSAGE_LIMIT = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
TEXT_LIMIT = 4000
TAKE_LIMIT = 1024  # items of an iterator in one "take"
MARK_BYTES = 200  # bytes of an output mark written


#: The global RNGs' seed at the start of every test, the value tests/conftest.py seeds in a local run.
RNG_SEED = 0


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n[... cut ...]\n" + text[-limit // 2 :]


class Worker:
    def __init__(self, requests: int, replies: int) -> None:
        from . import bound, channel, codec, rngs

        self.rngs = rngs
        self.rng_sync = rngs.Sync()  # the global RNG states this worker and the judge agree on

        self.channel, self.codec = channel, codec
        self.requests, self.replies = requests, replies
        self.handles: dict[int, Any] = {}
        self._rngs: tuple | None = None
        self._ids: dict[int, int] = {}  # id(obj) -> handle, so one object keeps one handle
        self._next = 1
        self.bindings = bound.Bindings(weak=False)
        self._deferred: dict[int, BaseException] = {}  # iterator -> the exception its last "take" met
        self.judge_objects: dict[int, Any] = {}  # the judge's number -> its object's one stand-in

    # -- handles --------------------------------------------------------------------------
    def handle_of(self, obj: Any) -> int:
        key = id(obj)
        if key in self._ids and self.handles.get(self._ids[key]) is obj:
            return self._ids[key]
        handle, self._next = self._next, self._next + 1
        self.handles[handle], self._ids[key] = obj, handle
        return handle

    def deref(self, handle: Any) -> Any:
        if handle not in self.handles:
            raise self.codec.CodecError(f"no object with handle {handle!r} (released, or from an earlier worker)")
        return self.handles[handle]

    # -- global RNGs: each test starts from the same state, as in one process ----------------
    def save_rngs(self) -> None:
        """Seed the global RNGs with RNG_SEED (numpy's and torch's where they were preloaded) and remember them.

        Seeded, not as found: numpy and random seed themselves from the OS at import, so two gradings of
        one submission would otherwise draw different numbers (tests/conftest.py seeds the same way).
        """
        import random

        np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
        random.seed(RNG_SEED)
        if np:
            np.random.seed(RNG_SEED)
        if torch:
            torch.manual_seed(RNG_SEED)
        self._rngs = (random.getstate(), np.random.get_state() if np else None, torch.get_rng_state() if torch else None)

    def restore_rngs(self) -> None:
        import random

        if self._rngs is not None:
            random.setstate(self._rngs[0])
            if self._rngs[1] is not None:
                sys.modules["numpy"].random.set_state(self._rngs[1])
            if self._rngs[2] is not None:
                sys.modules["torch"].set_rng_state(self._rngs[2])

    def import_submission(self) -> None:
        """Import the adapters (so the submission) and the scenarios now, before the first request.

        Sent 'ready' first: this runs while the judge is still busy (collecting, or running visible
        tests for a spare), and the first call waits for it within its test's timeout. A failure is
        left for that call to meet again: a module that failed to import is imported afresh.
        """
        import glob

        names = ["adapters"] + sorted(
            "tests.scenarios." + os.path.basename(p)[:-3]
            for p in glob.glob(os.path.join(os.path.dirname(sys.modules["tests.boundary"].__file__), "scenarios", "*.py"))
            if not os.path.basename(p).startswith("_")
        )
        for name in names:
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - reported by the call that needs it
                pass

    # -- targets --------------------------------------------------------------------------
    def resolve(self, target: str) -> Any:
        module_name, _, name = target.partition(":")
        if module_name == "adapters":
            adapters = importlib.import_module("adapters")
            fn = getattr(adapters, name, None) if is_adapter(name) else None
            if not callable(fn):
                raise AttributeError(f"adapters has no adapter {name!r}")
            return fn
        if module_name.split(".")[:2] == ["tests", "scenarios"]:
            importlib.import_module(module_name)
            boundary = importlib.import_module("tests.boundary")
            fn = boundary.SCENARIOS.get(target)
            if fn is None:
                raise AttributeError(f"{target} is not a function marked @student_side")
            return fn
        raise AttributeError(f"the worker runs adapters and scenarios only, not {target!r}")

    def perform(self, msg: dict, args: list, kwargs: dict) -> Any:
        op = msg.get("op")
        if op == "call":
            return self.resolve(str(msg["target"]))(*args, **kwargs)
        if op == "ping":
            return "pong"
        if op == "mark":  # everything printed so far, then the judge's mark: its reader waits for the mark
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.write(2, str(args[0]).encode("utf-8", "replace")[:MARK_BYTES])
            return None
        if op == "reset":
            self.restore_rngs()
            self.rng_sync.forget()
            self.judge_objects.clear()  # the judge forgets the last test's objects (and callbacks) too
            return None
        obj = self.deref(msg.get("handle"))
        if op == "getattr":
            name = str(msg["name"])
            if name.startswith("__"):
                raise AttributeError(f"special attribute {name} is not reachable from the judge")
            return getattr(obj, name)
        if op == "call_handle":
            return obj(*args, **kwargs)
        if op == "call_method":
            name = str(msg["name"])
            if name.startswith("_"):
                raise AttributeError(f"private method {name} is not reachable from the judge")
            return getattr(obj, name)(*args, **kwargs)
        if op == "iter":
            return iter(obj)
        if op == "next":
            return next(obj)
        if op == "take":  # up to args[0] items of an iterator; [items, exhausted]
            if id(obj) in self._deferred:  # what stopped the last batch, raised where it happened
                raise self._deferred.pop(id(obj))
            items: list = []
            for _ in range(max(1, min(int(args[0]), TAKE_LIMIT))):
                try:
                    items.append(next(obj))
                except StopIteration:
                    return [items, True]
                except BaseException as e:
                    if not items:
                        raise
                    self._deferred[id(obj)] = e
                    break
            return [items, False]
        if op == "len":
            return len(obj)
        if op == "getitem":
            return obj[args[0]]
        if op == "contains":
            return args[0] in obj
        if op == "setattr":
            name = str(msg["name"])
            if name.startswith("__"):
                raise AttributeError(f"special attribute {name} cannot be set from the judge")
            setattr(obj, name, args[0])
            return None
        if op == "setitem":
            obj[args[0]] = args[1]
            return None
        if op == "assign":  # obj.<path[0]>[path[1]]...[path[-1]] = value: a write into a part read earlier
            from .write_through import assign_at

            assign_at(obj, *args)
            return None
        if op == "backward":  # the judge's autograd reached a result of the worker's: go on here
            # From (obj * grad).sum(), not from obj itself: a backward started at a tensor skips the
            # gradient hooks on that tensor that a module tracker (FlopCounterMode's) relies on. The
            # judge sends the grad mode its backward runs under (off); the sum needs it on.
            torch = sys.modules["torch"]
            with torch.enable_grad():
                (obj * args[0]).sum().backward()
            return None
        if op == "enter":
            return obj.__enter__()
        if op == "exit":  # the judge's exception, if any, by its message only; the worker never swallows it
            error = RuntimeError(str(args[0])) if args and args[0] is not None else None
            obj.__exit__(type(error) if error else None, error, None)
            return None
        raise ValueError(f"unknown op {op!r}")

    # -- one request ----------------------------------------------------------------------
    def serve_one(self) -> bool:
        try:
            msg, blobs = self.channel.receive(self.requests, MESSAGE_LIMIT)
        except self.channel.ChannelClosed:
            return False
        self.handle(msg, blobs)
        return True

    def tensor_node(self, t: Any, enc: Any) -> Any:
        """A bound tensor's node, or a result with an autograd history: its values and a handle the
        judge's ``backward`` goes through; None for a plain tensor."""
        node = self.bindings.encode(t, enc)
        if node is None and t.requires_grad and t.grad_fn is not None:
            node = {**enc._tensor(t), "graph": self.handle_of(t)}
        return node

    def incoming(self, msg: dict, blobs: list) -> None:
        """Take what every message from the judge carries: bound-tensor changes, its global RNG states."""
        self.bindings.apply(msg.get("bound", []), blobs)
        self.rng_sync.incoming(msg.get("rngs"), blobs)

    def forget(self, msg: dict) -> None:
        """Drop the objects and bound tensors the judge no longer holds."""
        for h in msg.get("release", []) if isinstance(msg.get("release"), list) else []:
            obj = self.handles.pop(h, None)
            if obj is not None:
                self._ids.pop(id(obj), None)
        self.bindings.drop(msg.get("unbind", []))

    def _grad_mode(self, msg: dict) -> Any:
        """The judge's grad mode (``with torch.no_grad()`` in a test holds for the call too)."""
        torch = sys.modules.get("torch")
        if torch is None or "grad_enabled" not in msg:
            return contextlib.nullcontext()
        return torch.set_grad_enabled(bool(msg["grad_enabled"]))

    def handle(self, msg: dict, blobs: list) -> None:
        """Run one request and send its reply (also used for requests nested in a callback)."""
        self.forget(msg)
        decoder = self.codec.Decoder(msg.get("storages", []), blobs, deref=self.deref,
                                     bound=self.bindings.decode, callback=self.callback,
                                     judge_object=self.judge_object)
        try:
            self.incoming(msg, blobs)
            if msg.get("op") == "call":  # import a scenario's module first: it registers its @plain_data classes
                self.resolve(str(msg["target"]))
            args = decoder.decode(msg.get("args", []))
            kwargs = decoder.decode(msg.get("kwargs", {"$": "dict", "items": []}))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise self.codec.CodecError("args must be a list and kwargs a dict")
            for i in range(len(msg.get("storages", []))):
                decoder.storage(i)  # materialise every argument storage, even unreferenced ones
            before = {i: self.codec.digest(s) for i, s in decoder.storages.items()}
            with self._grad_mode(msg):
                result = self.perform(msg, args, kwargs)
            known = {self.codec.storage_key(s): i for i, s in decoder.storages.items()}
            enc = self.codec.Encoder(known=known, handle_of=self.handle_of, bind=self.tensor_node)
            reply: dict[str, Any] = {"ok": enc.encode(result)}
            mutated = [[i, enc.blob(self.codec.storage_bytes(s))] for i, s in decoder.storages.items()
                       if self.codec.digest(s) != before[i]]
            gens = [[i, enc.blob(g.get_state().numpy())] for i, g in decoder.generators.items()]
            reply.update(storages=enc.storages, mutated=mutated, generators=gens, bound=self.bindings.changes(enc))
            if msg.get("op") != "reset":  # the judge's states, not the worker's start ones, go on
                states = self.rng_sync.outgoing(enc)
                if states is not None:
                    reply["rngs"] = states
            self.channel.send(self.replies, reply, enc.blobs)
        except BaseException as e:  # noqa: BLE001 - every failure of submission code is reported
            error: dict[str, Any] = {"error": self.describe(e)}
            enc = self.codec.Encoder()
            try:  # what the call did to bound tensors and RNGs before it failed still happened
                error["bound"] = self.bindings.changes(enc)
                states = self.rng_sync.outgoing(enc)
                if states is not None:
                    error["rngs"] = states
            except BaseException:  # noqa: BLE001
                enc = self.codec.Encoder()
                error.pop("rngs", None)
                self.rng_sync.forget()  # not sent after all: the next message carries them
            self.channel.send(self.replies, error, enc.blobs)

    def callback(self, number: Any) -> Any:
        """A stand-in for a function of the judge's (a closure): calling it asks the judge to run it.

        While the judge runs it, the judge may send requests of its own (the closure calls
        ``opt.zero_grad()``); they are served here, nested, until the judge's "return".
        """

        def call(*args: Any, **kwargs: Any) -> Any:
            torch = sys.modules.get("torch")
            enc = self.codec.Encoder(handle_of=self.handle_of, bind=self.tensor_node)
            msg: dict[str, Any] = {"callback": number, "args": enc.encode(list(args)), "kwargs": enc.encode(kwargs)}
            if torch is not None:
                msg["grad_enabled"] = torch.is_grad_enabled()
            msg.update(storages=enc.storages, bound=self.bindings.changes(enc))
            states = self.rng_sync.outgoing(enc)
            if states is not None:
                msg["rngs"] = states
            self.channel.send(self.replies, msg, enc.blobs)
            while True:
                reply, blobs = self.channel.receive(self.requests, MESSAGE_LIMIT)
                if reply.get("op") != "return":
                    self.handle(reply, blobs)
                    continue
                self.forget(reply)
                self.incoming(reply, blobs)
                if reply.get("stop"):
                    raise StopIteration
                if "raised" in reply:  # a judge object's own error: the submission's code meets it here
                    from .judge_object import raised_here

                    raise raised_here(str(reply["raised"]), _clip(str(reply.get("error", ""))))
                if "error" in reply:
                    raise RuntimeError(f"the test's function raised {_clip(str(reply['error']))}")
                decoder = self.codec.Decoder(reply.get("storages", []), blobs, deref=self.deref,
                                             bound=self.bindings.decode, callback=self.callback,
                                             judge_object=self.judge_object)
                value = decoder.decode(reply.get("ok"))
                return iter(value) if reply.get("yielded") else value  # a judge object's generator, drawn whole

        return call

    def judge_object(self, node: dict) -> Any:
        """The one stand-in of a judge object (``judge_object.py``); its requests go through ``callback``."""
        number = node.get("id")
        if number not in self.judge_objects:
            from .judge_object import JudgeObject, imported_class

            methods = node.get("methods")
            cls = imported_class(str(node.get("module")), str(node.get("qualname")))
            self.judge_objects[number] = JudgeObject(self.callback(number), str(node.get("type")),
                                                     [str(m) for m in methods] if isinstance(methods, list) else [], cls)
        return self.judge_objects[number]

    def describe(self, e: BaseException) -> dict:
        types = [f"{t.__module__}.{t.__qualname__}" for t in type(e).__mro__]
        try:
            message = _clip(str(e))
        except BaseException:  # noqa: BLE001 - a hostile __str__
            message = f"<{type(e).__name__} whose str() failed>"
        try:  # the submission's frames only: this loop's own frames say nothing to a student
            te = traceback.TracebackException.from_exception(e)
            te.stack = traceback.StackSummary.from_list(
                [f for f in te.stack if not os.path.abspath(f.filename).startswith(HERE)])
            tb = _clip("".join(te.format()), 3 * TEXT_LIMIT)
        except BaseException:  # noqa: BLE001
            tb = ""
        try:
            enc = self.codec.Encoder()
            args = enc.encode(list(e.args))
            if enc.blobs or len(str(args)) > TEXT_LIMIT:  # tensors or huge values: the message only
                args = None
        except BaseException:  # noqa: BLE001 - args that are not plain data: the message only
            args = None
        return {"types": types, "args": args, "message": message, "traceback": tb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the sandboxed worker (started by the judge)")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--replies", type=int, required=True)
    parser.add_argument("--preload", action="append", default=[],
                        help="modules to import before saying ready (their import time is not charged to a test)")
    args = parser.parse_args(argv)
    os.dup2(2, 1)  # stdout -> stderr: a stray print can never reach the reply pipe
    sys.stdout = sys.stderr
    worker = Worker(args.requests, args.replies)
    for name in args.preload:
        importlib.import_module(name)
    import tests.boundary

    worker.codec.use_data_types(tests.boundary.DATA_TYPES)
    worker.save_rngs()

    worker.channel.send(worker.replies, {"ready": {"python": sys.version.split()[0], "pid": os.getpid()}}, [])
    worker.import_submission()
    while worker.serve_one():
        pass
    return 0
