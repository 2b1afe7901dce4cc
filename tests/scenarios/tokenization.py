"""Loops of part 6 over your Tokenizer: streams fed from the test's own iterators and advanced in
turns, a tokenizer read back from files.

Everything here runs in the test, in grading too: the tokenizer you built with
``adapters.get_tokenizer`` stays on your side of the line and the test drives it (see
``tests/boundary.py``). An iterator the test hands to your ``encode_iterable`` stays the test's: each
piece is fetched from the test when your code asks for it, so the test sees how much text your
stream has read when each id comes out. Ids drawn one after another are fetched in batches; streams
advanced in turns are advanced a stretch of ids at a time.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import adapters


def encode_iterable(tokenizer: Any, pieces: list[str], *, one_pass: bool = True) -> list[int]:
    """``list(tokenizer.encode_iterable(iter(pieces)))``: the pieces as a one-pass iterator, all ids at once.

    ``one_pass=False`` hands over the list itself: in grading it crosses as one message, where a
    one-pass iterator of the test's costs a round trip per piece (for thousands of tiny pieces).
    """
    return list(tokenizer.encode_iterable(iter(pieces) if one_pass else pieces))


class CountingPieces:
    """A one-pass iterator over ``pieces`` that counts the characters it has handed out (``read``).

    A plain iterator, not a dataclass: in grading it stays the test's, and your code's ``next`` on
    it is answered from here."""

    def __init__(self, pieces: Iterable[str]) -> None:
        self._it = iter(pieces)
        self.read = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        piece = next(self._it)
        self.read += len(piece)
        return piece


@dataclass
class Streamed:
    """What streaming a text through ``encode_iterable`` did: whether it returned a lazy iterator
    (``iter(stream) is stream``; if not, nothing else was read), its first ids, how many characters
    it had read when they came out, and the most characters it held unsettled (read but not yet
    given out as ids) at any point of the ids it gave, measured after each of ``checks`` stretches."""

    lazy: bool
    first: list[int] | None = None
    read_at_first: int | None = None
    most_held: int | None = None


def stream_pieces(
    tokenizer: Any,
    pieces: Iterable[str],
    vocab: dict[int, bytes],
    first: int = 100,
    checks: int = 8,
    stretch: int = 4096,
) -> Streamed:
    """Feed ``pieces`` to ``tokenizer.encode_iterable`` from a counting iterator; take ``first`` ids,
    then ``checks`` stretches of ``stretch`` ids, measuring after each how much text was read but not
    yet given out (an id's length is its entry's in ``vocab``, the test's copy of the vocabulary)."""
    source = CountingPieces(pieces)
    stream = tokenizer.encode_iterable(source)
    if iter(stream) is not stream:
        return Streamed(lazy=False)
    head = list(itertools.islice(stream, first))
    read_at_first = source.read
    lengths = {i: len(t.decode("utf-8", errors="replace")) for i, t in vocab.items()}
    given = sum(
        lengths.get(i, 0) for i in head
    )  # characters, approximately (a split character counts once per part)
    most = source.read - given
    for _ in range(checks):
        ids = list(itertools.islice(stream, stretch))
        given += sum(lengths.get(i, 0) for i in ids)
        most = max(most, source.read - given)
        if len(ids) < stretch:
            break
    return Streamed(lazy=True, first=head, read_at_first=read_at_first, most_held=most)


@dataclass
class TwoStreams:
    """Ids of two ``encode_iterable`` streams: ``after_abandoned``, the second text's stream run to the
    end after a stream over the first was abandoned midway; ``first`` and ``second``, fresh streams
    over the two texts advanced in turns, a stretch of ids each."""

    after_abandoned: list[int]
    first: list[int]
    second: list[int]


#: Ids each stream gives per turn when two are advanced in turns: uneven, so the turns fall
#: everywhere relative to where a stream settles its buffer.
TURNS = (1, 700, 2_000, 333, 3_000)


def abandoned_and_interleaved_streams(
    tokenizer: Any, first: list[str], second: list[str], taken: int
) -> TwoStreams:
    """Take ``taken`` ids from ``tokenizer.encode_iterable(iter(first))`` and drop the stream; encode
    ``second`` through a new stream to the end; then advance fresh streams over both in turns."""
    abandoned = tokenizer.encode_iterable(iter(first))
    list(itertools.islice(abandoned, taken))
    after = list(tokenizer.encode_iterable(iter(second)))
    del abandoned
    streams = [tokenizer.encode_iterable(iter(first)), tokenizer.encode_iterable(iter(second))]
    out: list[list[int]] = [[], []]
    running = [True, True]
    for turn in itertools.cycle(TURNS):
        if not any(running):
            break
        for i, stream in enumerate(streams):
            if running[i]:
                ids = list(itertools.islice(stream, turn))
                out[i] += ids
                running[i] = len(ids) == turn
    return TwoStreams(after, out[0], out[1])


def vocab_after_building(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> dict[int, bytes]:
    """Build ``adapters.get_tokenizer(vocab, merges, special_tokens)``; return the ``vocab`` dict the
    caller passed, as it is afterwards (building a tokenizer must leave it alone). In one process
    only: in grading your code receives a copy of the dict (the tests that use it are skipped there)."""
    adapters.get_tokenizer(vocab, merges, special_tokens)
    return vocab


def from_files(
    tokenizer: Any,
    vocab_path: str | os.PathLike,
    merges_path: str | os.PathLike,
    special_tokens: list[str] | None = None,
) -> Any:
    """``tokenizer.from_files(vocab_path, merges_path, special_tokens)``, the classmethod reached through
    the instance: a tokenizer of your class, read from files."""
    return tokenizer.from_files(vocab_path, merges_path, special_tokens)
