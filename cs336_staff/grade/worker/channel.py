"""Framed messages over a pipe: an 8-byte length, then one safetensors file.

The file holds the message's JSON tree as the uint8 tensor ``__msg__`` and its byte blobs as
``b0``, ``b1``, ...: safetensors parses and bounds-checks the container, and nothing in it is ever
executed (no pickle anywhere). The reader refuses a frame longer than its ``limit`` before
allocating it, so a flood from the worker cannot grow the judge.

>>> import os
>>> r, w = os.pipe()
>>> send(w, {"op": "ping"}, [])
>>> receive(r, limit=1 << 20)[0]
{'op': 'ping'}
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

import numpy as np
import safetensors.numpy

HEADER = struct.Struct("<Q")


class ChannelClosed(EOFError):
    """The other end closed the pipe (the worker exited, or the judge went away)."""


class ChannelError(ValueError):
    """A frame that is too large or not a valid message."""


class ChannelTimeout(TimeoutError):
    """No complete message before the deadline."""


def send(fd: int, message: dict, blobs: list[np.ndarray]) -> None:
    arrays = {"__msg__": np.frombuffer(json.dumps(message, allow_nan=True).encode(), dtype=np.uint8)}
    arrays.update({f"b{i}": np.ascontiguousarray(b).reshape(-1).view(np.uint8) for i, b in enumerate(blobs)})
    payload = safetensors.numpy.save(arrays)
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout(f"no complete message in time ({got} of {n} bytes read)")
        chunk = os.readv(fd, [view[got:]])
        if chunk == 0:
            raise ChannelClosed(f"pipe closed after {got} of {n} bytes")
        got += chunk
    return buf


def receive(fd: int, limit: int, deadline: float | None = None) -> tuple[dict, list[np.ndarray]]:
    """One message and its blobs; ChannelError if it is larger than ``limit`` bytes or malformed.

    ``deadline`` (a ``time.monotonic()`` value): ChannelTimeout if the message is not complete by then.
    """
    (length,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if length > limit:
        raise ChannelError(f"a message of {length} bytes exceeds the limit of {limit} bytes")
    payload = bytes(_read_exactly(fd, length, deadline))
    try:
        arrays = safetensors.numpy.load(payload)
        message = json.loads(arrays.pop("__msg__").tobytes())
        blobs = [arrays.pop(f"b{i}") for i in range(len(arrays))]
    except Exception as e:  # any malformed container, JSON or blob numbering
        raise ChannelError(f"malformed message: {type(e).__name__}: {e}") from None
    if not isinstance(message, dict):
        raise ChannelError("malformed message: not a JSON object")
    return message, blobs
