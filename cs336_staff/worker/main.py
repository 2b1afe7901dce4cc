"""The worker: the only process that runs submission code. It answers one call at a time.

Started by the judge (``remote.py``), normally inside the bubblewrap sandbox (``sandbox.py``), or
forked there by the sandbox's zygote (``zygote.py``, started with ``--zygote``), with two pipes:
requests arrive on ``--requests`` and replies leave on ``--replies`` (``channel.py``
frames, ``codec.py`` values). Standard output is pointed at standard error before anything is
imported, so nothing the submission prints can land in the reply pipe by accident, and the judge
keeps what is printed for the test that was running.

Requests (all names are resolved here, in the worker; the judge only ever sees data back):

    {"op": "call", "target": "adapters:run_flat_index", ...}     an adapter (in ``adapters.__all__``)
    {"op": "call", "target": "tests.scenarios.optim:fn", ...}    a driver (``tests.boundary.driver``):
                                                                 it builds the submission's objects,
                                                                 runs them, returns plain data
    {"op": "mark", "args": [text]}                               flush stdout/stderr, then write text to
                                                                 stderr (the judge's ``Remote.printed``)
    {"op": "ping"}                                               "pong"

A request with ``"reset": true`` (a test's first) puts the global RNGs back to their start state
before anything else, as a student's run seeds them at each test's start.

Replies: ``{"ok": tree, "storages": [...], "mutated": [[i, blob]], "generators": [[i, blob]]}`` (an
argument storage the call wrote into, an argument generator's state: as in one process, the caller's
own tensor and generator see the change), ``{"error": {"types": [...], "args": tree, "message": str,
"traceback": str}}``, or ``{"not_plain": message}`` when the result is not plain data.

Deliberately left out: running anything the judge names that is neither an adapter nor a driver,
objects kept between calls (everything a test needs of an object is observed inside one driver),
and any defence of this process against the submission (it is the submission's own process; the
judge trusts nothing it says).
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
MARK_BYTES = 200  # bytes of an output mark written


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return (
        text
        if len(text) <= limit
        else text[: limit // 2] + "\n[... cut ...]\n" + text[-limit // 2 :]
    )


class Worker:
    def __init__(self, requests: int, replies: int) -> None:
        from . import channel, codec

        self.channel, self.codec = channel, codec
        self.requests, self.replies = requests, replies
        self._rngs: tuple | None = None

    # -- global RNGs: each test starts from the same state, as in one process ----------------
    def save_rngs(self) -> None:
        """Seed the global RNGs as a student's run seeds them at each test's start, and remember them.

        Seeded, not as found: numpy and random seed themselves from the OS at import, so two gradings of
        one submission would otherwise draw different numbers (``tests.boundary.seed_global_rngs``).
        """
        import random

        from tests.boundary import seed_global_rngs

        seed_global_rngs()
        np, torch = (
            sys.modules.get("numpy"),
            sys.modules.get("torch"),
        )  # where preloaded (a torch-free repo has neither)
        self._rngs = (
            random.getstate(),
            np.random.get_state() if np else None,
            torch.get_rng_state() if torch else None,
        )

    def restore_rngs(self) -> None:
        import random

        if self._rngs is not None:
            random.setstate(self._rngs[0])
            if self._rngs[1] is not None:
                sys.modules["numpy"].random.set_state(self._rngs[1])
            if self._rngs[2] is not None:
                sys.modules["torch"].set_rng_state(self._rngs[2])

    def import_submission(self) -> None:
        """Import the adapters (so the submission) and the drivers now, before the first request.

        Sent 'ready' first: this runs while the judge is still busy (collecting, or running visible
        tests for a spare), and the first call waits for it within its test's timeout. A failure is
        left for that call to meet again: a module that failed to import is imported afresh.
        """
        import glob

        boundary = sys.modules["tests.boundary"].__file__
        assert boundary is not None  # imported from its file, tests/boundary.py
        names = ["adapters"] + sorted(
            "tests.scenarios." + os.path.basename(p)[:-3]
            for p in glob.glob(os.path.join(os.path.dirname(boundary), "scenarios", "*.py"))
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
            fn = boundary.DRIVERS.get(target)
            if fn is None:
                raise AttributeError(f"{target} is not a function marked @driver")
            return fn
        raise AttributeError(f"the worker runs adapters and drivers only, not {target!r}")

    def perform(self, msg: dict, args: list, kwargs: dict) -> Any:
        op = msg.get("op")
        if op == "call":
            return self.resolve(str(msg["target"]))(*args, **kwargs)
        if op == "ping":
            return "pong"
        if op == "mark":
            # everything printed so far, then the judge's mark: its reader waits for the mark
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    if stream is not None:  # sys.__stdout__ is None without a console
                        stream.flush()
            os.write(2, str(args[0]).encode("utf-8", "replace")[:MARK_BYTES])
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

    def handle(self, msg: dict, blobs: list) -> None:
        """Run one request and send its reply."""
        decoder = self.codec.Decoder(msg.get("storages", []), blobs)
        try:
            if msg.get("reset"):  # a test's first request: its global RNGs from their start state
                self.restore_rngs()
            # import a driver's module first: it registers its @plain_data classes
            if msg.get("op") == "call":
                self.resolve(str(msg["target"]))
            args = decoder.decode(msg.get("args", []))
            kwargs = decoder.decode(msg.get("kwargs", {"$": "dict", "items": []}))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise self.codec.CodecError("args must be a list and kwargs a dict")
            for i in range(len(msg.get("storages", []))):
                decoder.storage(i)  # materialise every argument storage, even unreferenced ones
            before = {i: self.codec.digest(s) for i, s in decoder.storages.items()}
            result = self.perform(msg, args, kwargs)
        except BaseException as e:  # noqa: BLE001 - every failure of submission code is reported
            self.channel.send(self.replies, {"error": self.describe(e)}, [])
            return
        known = {self.codec.storage_key(s): i for i, s in decoder.storages.items()}
        enc = self.codec.Encoder(known=known)
        try:
            reply: dict[str, Any] = {"ok": enc.encode(result)}
        except (
            self.codec.CodecError
        ) as e:  # not data: the test's mistake or the submission's, never an exception it raised
            self.channel.send(
                self.replies,
                {"not_plain": _clip(f"{msg.get('target', msg.get('op'))} returned {e}")},
                [],
            )
            return
        mutated = [
            [i, enc.blob(self.codec.storage_bytes(s))]
            for i, s in decoder.storages.items()
            if self.codec.digest(s) != before[i]
        ]
        gens = [[i, enc.blob(g.get_state().numpy())] for i, g in decoder.generators.items()]
        reply.update(storages=enc.storages, mutated=mutated, generators=gens)
        self.channel.send(self.replies, reply, enc.blobs)

    def describe(self, e: BaseException) -> dict:
        types = [f"{t.__module__}.{t.__qualname__}" for t in type(e).__mro__]
        try:
            message = _clip(str(e))
        except BaseException:  # noqa: BLE001 - a hostile __str__
            message = f"<{type(e).__name__} whose str() failed>"
        try:  # the submission's frames only: this loop's own frames say nothing to a student
            te = traceback.TracebackException.from_exception(e)
            te.stack = traceback.StackSummary.from_list(
                [f for f in te.stack if not os.path.abspath(f.filename).startswith(HERE)]
            )
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


def prepare(preload: list[str]) -> None:
    """What every worker imports before it runs anything of the submission: the preloads (off the
    tests' clock) and the public boundary. A zygote (``zygote.py``) does this once for all its workers."""
    os.dup2(2, 1)  # stdout -> stderr: a stray print can never reach the reply pipe
    sys.stdout = sys.stderr
    for name in preload:
        importlib.import_module(name)
    import tests.boundary

    from . import codec

    codec.use_data_types(tests.boundary.DATA_TYPES)


def serve(requests: int, replies: int) -> int:
    """Be the worker on these pipes: say ready, import the submission, answer calls until the judge closes."""
    worker = Worker(requests, replies)
    worker.save_rngs()
    worker.channel.send(
        worker.replies, {"ready": {"python": sys.version.split()[0], "pid": os.getpid()}}, []
    )
    worker.import_submission()
    while worker.serve_one():
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the sandboxed worker (started by the judge)")
    parser.add_argument("--requests", type=int, help="the pipe requests arrive on")
    parser.add_argument("--replies", type=int, help="the pipe replies leave on")
    parser.add_argument(
        "--zygote",
        type=int,
        help="instead: a socket on which the judge asks for workers, forked from this process (zygote.py)",
    )
    parser.add_argument(
        "--sandboxed",
        action="store_true",
        help="with --zygote: the pid namespace, /tmp and /dev/shm are the sandbox's own (zygote.py)",
    )
    parser.add_argument(
        "--preload",
        action="append",
        default=[],
        help="modules to import before saying ready (their import time is not charged to a test)",
    )
    args = parser.parse_args(argv)
    if args.zygote is None and (args.requests is None or args.replies is None):
        parser.error("give --requests and --replies, or --zygote")
    prepare(args.preload)
    if args.zygote is not None:
        from . import zygote

        return zygote.serve_forks(args.zygote, args.sandboxed, serve)
    return serve(args.requests, args.replies)
