"""Framed messages over a pipe: an 8-byte length, then one safetensors file.

The file holds the message's JSON tree as the byte tensor ``__msg__`` and its byte blobs as
``b0``, ``b1``, ...; the reader parses and bounds-checks it with the safetensors library, and
nothing in it is ever executed (no pickle anywhere). Writing the format is a JSON header and the
bytes end to end, done here so that neither side needs numpy just to talk. The reader refuses a
frame longer than its ``limit`` before allocating it, so a flood from the worker cannot grow the
judge; and it reads a frame as its bytes arrive, so a frame that claims more than it sends costs
only what it sent (and the caller's deadline or timeout ends the wait).

>>> import os
>>> r, w = os.pipe()
>>> send(w, {"op": "ping"}, [b"raw"])
>>> receive(r, limit=1 << 20)
({'op': 'ping'}, [bytearray(b'raw')])
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

import safetensors

HEADER = struct.Struct("<Q")


class ChannelClosed(EOFError):
    """The other end closed the pipe (the worker exited, or the judge went away)."""


class ChannelError(ValueError):
    """A frame that is too large or not a valid message."""


class ChannelTimeout(TimeoutError):
    """No complete message before the deadline."""


Blob = bytes | bytearray | memoryview


def encode_frame(message: dict, blobs: list[Blob]) -> bytes:
    """One frame: the 8-byte length, then a safetensors file of ``__msg__`` (JSON) and the blobs."""
    parts = [json.dumps(message, allow_nan=True).encode(), *blobs]
    header, offset = {}, 0
    for i, part in enumerate(parts):
        size = len(part) if not isinstance(part, memoryview) else part.nbytes
        header["__msg__" if i == 0 else f"b{i - 1}"] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads its header to a multiple of 8
    payload = b"".join([struct.pack("<Q", len(text)), text, *(bytes(p) for p in parts)])
    return HEADER.pack(len(payload)) + payload


def send(fd: int, message: dict, blobs: list[Blob]) -> None:
    view = memoryview(encode_frame(message, blobs))
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: Bytes read per ``read``: a frame's buffer grows with the bytes that actually arrive, never with
#: the length its header claims (a header declaring 400 MiB followed by 64 bytes costs 64 bytes).
CHUNK = 1 << 20


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes:
    __tracebackhide__ = True  # pytest: a timeout while waiting shows the test's line, not this loop
    chunks: list[bytes] = []
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChannelTimeout(f"no complete message in time ({got} of {n} bytes read)")
        chunk = os.read(fd, min(n - got, CHUNK))
        if not chunk:
            raise ChannelClosed(f"pipe closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)  # the chunks and the frame: twice the bytes that arrived, at most


def tree_size_problem(size: int, limit: int) -> str:
    return (f"the message's values take {size} bytes of JSON, over the limit of {limit} bytes "
            "(long strings, such as exception messages, or long lists)")


def receive(fd: int, limit: int, deadline: float | None = None,
            tree_limit: int | None = None) -> tuple[dict, list[bytearray]]:
    """One message and its blobs; ChannelError if it is larger than ``limit`` bytes or malformed.

    ``deadline`` (a ``time.monotonic()`` value): ChannelTimeout if the message is not complete by then.
    ``tree_limit``: the largest JSON part, refused before it is parsed (parsing ``[[],[],...]`` costs
    some twenty times its size in Python objects; raw blobs cost their size).
    """
    __tracebackhide__ = True
    (length,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
    if length > limit:
        raise ChannelError(f"a message of {length} bytes exceeds the limit of {limit} bytes")
    message, blobs, problem = _parse(_read_exactly(fd, length, deadline), tree_limit)
    if problem is not None:  # raised here, where no local holds the frame: a kept exception keeps no megabytes
        raise ChannelError(problem)
    return message, blobs


def _parse(payload: bytes, tree_limit: int | None) -> tuple[dict, list[bytearray], str | None]:
    """The message and blobs of one frame's payload, or why it is refused."""
    try:
        tensors = dict(safetensors.deserialize(payload))
        del payload
        size = len(tensors["__msg__"]["data"]) if "__msg__" in tensors else 0
        if tree_limit is not None and size > tree_limit:
            return {}, [], tree_size_problem(size, tree_limit)
        message = json.loads(bytes(tensors.pop("__msg__")["data"]))
        blobs = [tensors.pop(f"b{i}")["data"] for i in range(len(tensors))]
    except Exception as e:  # any malformed container, JSON or blob numbering
        return {}, [], f"malformed message: {type(e).__name__}: {str(e)[:200]}"
    if not isinstance(message, dict):
        return {}, [], "malformed message: not a JSON object"
    return message, blobs, None
