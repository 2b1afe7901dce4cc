"""Framed messages over a pipe: an 8-byte length, then the message's parts and their sizes.

A frame's payload is the number of parts (4 bytes), each part's size (8 bytes each), then the parts
end to end: the message's JSON tree first, then its byte blobs (``b0``, ``b1``, ... of the codec).
Nothing in it is ever executed (no pickle anywhere): the reader checks that the sizes add up to the
payload exactly before it slices anything, refuses a JSON part over ``tree_limit`` before parsing
it, and hands the blobs on as read-only views of the payload (the codec copies what it keeps). The
reader also refuses a frame longer than its ``limit`` before allocating it, so a flood from the
worker cannot grow the judge; and it reads a frame as its bytes arrive, so a frame that claims more
than it sends costs only what it sent (and the caller's deadline or timeout ends the wait).

Every call is at least two frames, and most are small (a step of an optimizer, a tokenizer's
``encode``): the layout is the cheapest one to write and check in Python, a ``struct`` header and
one ``join`` (a safetensors container with a JSON header of its own cost three times more).

>>> import os
>>> r, w = os.pipe()
>>> send(w, {"op": "ping"}, [b"raw"])
>>> message, blobs = receive(r, limit=1 << 20)
>>> message, [bytes(b) for b in blobs]
({'op': 'ping'}, [b'raw'])
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Sequence

HEADER = struct.Struct("<Q")  # the payload's length
COUNT = struct.Struct("<I")  # the number of parts: the JSON tree, then the blobs
SIZE = struct.Struct("<Q")  # one part's size


class ChannelClosed(EOFError):
    """The other end closed the pipe (the worker exited, or the judge went away)."""


class ChannelError(ValueError):
    """A frame that is too large or not a valid message."""


class ChannelTimeout(TimeoutError):
    """No complete message before the deadline."""


Blob = bytes | bytearray | memoryview


def encode_frame(message: dict, blobs: Sequence[Blob]) -> bytes:
    """One frame: the 8-byte length, the part count and sizes, the JSON tree, the blobs."""
    parts = [json.dumps(message, allow_nan=True, separators=(",", ":")).encode(), *blobs]
    sizes = [part.nbytes if isinstance(part, memoryview) else len(part) for part in parts]
    head = struct.pack(
        f"<QI{len(sizes)}Q", COUNT.size + SIZE.size * len(sizes) + sum(sizes), len(sizes), *sizes
    )
    return b"".join([head, *parts])


def send(fd: int, message: dict, blobs: Sequence[Blob]) -> None:
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
    return (
        f"the message's values take {size} bytes of JSON, over the limit of {limit} bytes "
        "(long strings, such as exception messages, or long lists)"
    )


def receive(
    fd: int, limit: int, deadline: float | None = None, tree_limit: int | None = None
) -> tuple[dict, list[memoryview]]:
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
    # raised here, where no local holds the frame: a kept exception keeps no megabytes
    if problem is not None:
        raise ChannelError(problem)
    return message, blobs


def _parse(payload: bytes, tree_limit: int | None) -> tuple[dict, list[memoryview], str | None]:
    """The message and blobs of one frame's payload, or why it is refused."""
    if len(payload) < COUNT.size:
        return {}, [], f"malformed message: a payload of {len(payload)} bytes has no part count"
    (count,) = COUNT.unpack_from(payload)
    start = COUNT.size + SIZE.size * count
    if count < 1 or start > len(payload):
        return (
            {},
            [],
            f"malformed message: {count} parts do not fit a payload of {len(payload)} bytes",
        )
    sizes = struct.unpack_from(f"<{count}Q", payload, COUNT.size)
    if start + sum(sizes) != len(payload):
        return (
            {},
            [],
            f"malformed message: parts of {sum(sizes)} bytes in a payload of {len(payload) - start}",
        )
    if tree_limit is not None and sizes[0] > tree_limit:
        return {}, [], tree_size_problem(sizes[0], tree_limit)
    view = memoryview(payload)
    parts = []
    for size in sizes:
        parts.append(view[start : start + size])
        start += size
    try:
        # the writer's json.dumps is ASCII: no encoding to detect
        message = json.loads(str(parts[0], "utf-8"))
    except Exception as e:  # not UTF-8, not JSON, nested too deep
        return {}, [], f"malformed message: {type(e).__name__}: {str(e)[:200]}"
    if not isinstance(message, dict):
        return {}, [], "malformed message: not a JSON object"
    return message, parts[1:], None
