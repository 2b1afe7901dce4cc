"""Scenarios of part 6, tokenization: your Tokenizer fed from a one-pass iterator or a file, read back,
and what building one does to the caller's vocabulary.

Each takes a tokenizer you built with ``adapters.get_tokenizer`` (in grading it stays on your side
of the line, and the test holds a handle to it), or builds one, and plain inputs: text pieces, paths. What comes
back is plain data (ids, counts, bytes of memory) or, for ``from_files``, another tokenizer.

``encode_iterable`` runs on the tests' side in grading too: the one-pass iterator it hands your
``encode_iterable`` is the test's own (each piece is fetched from the test when your code asks for
it). The others (``@student_side``) run beside your code: what they observe happens there (the
memory your process traces while streaming a file, the caller's dict after building, your class's
``from_files``), or, for two streams advanced in turns one id at a time over 80,000 characters,
driving them from the test would cost a round trip per id.
"""

from __future__ import annotations

import os
import tracemalloc
from dataclasses import dataclass
from typing import Any

import adapters
from tests.boundary import plain_data, student_side


def encode_iterable(tokenizer: Any, pieces: list[str]) -> list[int]:
    """``list(tokenizer.encode_iterable(iter(pieces)))``: the pieces as a one-pass iterator, all ids at once."""
    return list(tokenizer.encode_iterable(iter(pieces)))


@plain_data
@dataclass
class Streamed:
    """What streaming a file through ``encode_iterable`` did: whether it returned a lazy iterator
    (``iter(stream) is stream``; if not, nothing else was read), its first ids, how many ids it
    gave in all, and the peak of the memory tracemalloc traced meanwhile, in bytes."""

    lazy: bool
    first: list[int] | None = None
    count: int | None = None
    peak: int | None = None


@student_side
def stream_file(tokenizer: Any, path: str | os.PathLike, first: int = 100) -> Streamed:
    """Open ``path`` (UTF-8, newlines as they are) and encode it through ``tokenizer.encode_iterable(f)``
    under tracemalloc, counting the ids as they come without keeping them."""
    with open(path, encoding="utf-8", newline="") as f:
        tracemalloc.start()
        try:
            stream = tokenizer.encode_iterable(f)
            if iter(stream) is not stream:
                return Streamed(lazy=False)
            head = [next(stream) for _ in range(first)]
            count = first + sum(1 for _ in stream)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return Streamed(lazy=True, first=head, count=count, peak=peak)


@plain_data
@dataclass
class TwoStreams:
    """Ids of two ``encode_iterable`` streams: ``after_abandoned``, the second text's stream run to the
    end after a stream over the first was abandoned midway; ``first`` and ``second``, fresh streams
    over the two texts advanced in turns, one id each."""

    after_abandoned: list[int]
    first: list[int]
    second: list[int]


@student_side
def abandoned_and_interleaved_streams(tokenizer: Any, first: list[str], second: list[str], taken: int) -> TwoStreams:
    """Take ``taken`` ids from ``tokenizer.encode_iterable(iter(first))`` and drop the stream; encode
    ``second`` through a new stream to the end; then advance fresh streams over both in turns."""
    abandoned = tokenizer.encode_iterable(iter(first))
    for _ in range(taken):
        next(abandoned)
    after = list(tokenizer.encode_iterable(iter(second)))
    streams = [tokenizer.encode_iterable(iter(first)), tokenizer.encode_iterable(iter(second))]
    out: list[list[int]] = [[], []]
    running = [True, True]
    while any(running):
        for i, stream in enumerate(streams):
            if running[i]:
                try:
                    out[i].append(next(stream))
                except StopIteration:
                    running[i] = False
    return TwoStreams(after, out[0], out[1])


@student_side
def vocab_after_building(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]],
                         special_tokens: list[str] | None = None) -> dict[int, bytes]:
    """Build ``adapters.get_tokenizer(vocab, merges, special_tokens)``; return the ``vocab`` dict the
    caller passed, as it is afterwards (building a tokenizer must leave it alone)."""
    adapters.get_tokenizer(vocab, merges, special_tokens)
    return vocab


@student_side
def from_files(tokenizer: Any, vocab_path: str | os.PathLike, merges_path: str | os.PathLike,
               special_tokens: list[str] | None = None) -> Any:
    """``type(tokenizer).from_files(vocab_path, merges_path, special_tokens)``: a tokenizer of your class, read from files."""
    return type(tokenizer).from_files(vocab_path, merges_path, special_tokens)
