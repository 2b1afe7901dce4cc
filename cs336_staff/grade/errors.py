"""What a test sees when a call into the worker fails: the submission's own exception, rebuilt, or a
``WorkerError`` about the worker itself.

    the submission raised ValueError("d_in ...")     ValueError with that message (a subclass with the
                                                     submission's class name; the worker's traceback
                                                     goes to the test's output, not into the exception)
    it raised pickle.UnpicklingError, its own class  a subclass of the nearest class the judge trusts
                                                     (builtins, the standard library, torch, numpy)
    it raised SystemExit                             SystemExit (pytest records a failed test)
    it raised KeyboardInterrupt, GeneratorExit       WorkerError (a RuntimeError): never ends the judge
    the worker died (segfault, os._exit, OOM kill)   WorkerCrashed, naming the exit status
    the reply is oversized or malformed              WorkerProtocolError
    the result is not plain data                     NotPlainData
    it left a symlink, a special file or an          WorkerOutputRefused, naming it (``mirror.py``)
    over-size file in its scratch folder
    more than ``max_starts`` workers were needed     WorkerUnavailable

Everything here reads the worker's description as untrusted data: sizes are cut before anything is
kept, class names only select among classes the judge already has, nothing is imported or evaluated.
"""

from __future__ import annotations

import builtins
import json
import sys
from typing import Any

from cs336_staff.grade.limits import Limits

# characters of an exception's message, and of its traceback, kept
MESSAGE_CHARS = Limits.message_chars
NAME_CHARS = 200  # characters of a type name the worker sends


class WorkerError(RuntimeError):
    """Something about the worker, not an exception the submission raised inside a call."""


class WorkerCrashed(WorkerError):
    """The worker process ended while it was running a call."""


class WorkerProtocolError(WorkerError):
    """The worker's reply was too large or not a valid message."""


class WorkerUnavailable(WorkerError):
    """No worker could be started, or too many were needed already."""


class NotPlainData(WorkerError):
    """A call's result was not plain data: an object cannot cross (a driver returns what it observed)."""


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
    return (
        text
        if len(text) <= limit
        else f"{text[: limit // 2]}\n[... {len(text) - limit} characters cut ...]\n{text[-limit // 2 :]}"
    )


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
    return {
        "types": types,
        "args": args if isinstance(args, list) and args_size <= chars else None,
        "message": _clip_text(str(error.get("message", "")), chars),
        "traceback": _clip_text(str(error.get("traceback", "")), chars),
    }


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
    # KeyboardInterrupt would end the judge
    if not issubclass(base, Exception) and base is not SystemExit:
        base, message = (
            WorkerError,
            f"{types[0] if types else 'an exception'} raised in the worker: {message}",
        )
    name = types[0].rpartition(".")[2] if types else base.__name__
    key = (name, base)
    if key not in _REBUILT:
        # FromWorker first: with (base, FromWorker) a base of Exception itself has no consistent MRO
        _REBUILT[key] = type(
            name,
            (FromWorker, base),
            {"__module__": "worker", "__str__": _worker_str, "__init__": _plain_init},
        )
    cls = _REBUILT[key]
    args = error.get("args")
    exc = cls(*args) if isinstance(args, list) and base is not WorkerError else cls(message)
    if (
        str(exc) != message
        and "characters cut ...]" not in message
        and "[... cut ...]" not in message
    ):
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
