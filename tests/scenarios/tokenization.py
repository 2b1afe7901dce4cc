"""Drivers of part 6: your tokenizers built from plain data, run, and what they gave.

Each ``@driver`` builds your tokenizer from a vocabulary, merges and special tokens (``BPE``), or
names the simple one to build, runs it (encode, decode, streams fed from a counting iterator, files
saved and read back) and returns plain data: ids, decoded text, what a stream had read when its ids
came out. In grading it runs beside your code as one round trip (see ``tests/boundary.py``); the
tests compare what it returned with their oracles (tiktoken, Hugging Face tokenizers, stored merges).

``recount_pairs`` drives none of your code: it is the speed test's yardstick, run where your
``train_bpe`` runs so that both sides of the comparison are timed under the same conditions.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import adapters
from tests.boundary import driver, plain_data

#: Your two simple tokenizers, by the names the tests use.
SIMPLE = {"character": adapters.get_character_tokenizer, "byte": adapters.get_byte_tokenizer}
#: Characters of a file per piece when a driver streams it (``line_groups``).
GROUP_CHARS = 1 << 12


@plain_data
@dataclass
class BPE:
    """What a ``Tokenizer`` is built from: ``vocab``, ``merges`` and ``special_tokens`` (None: none given)."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    special_tokens: list[str] | None = None


def build(bpe: BPE) -> Any:
    """``adapters.get_tokenizer`` of copies of ``bpe``'s data: your tokenizer never holds the test's own
    dicts and lists, in one process as in grading (where it gets copies anyway)."""
    specials = None if bpe.special_tokens is None else list(bpe.special_tokens)
    return adapters.get_tokenizer(dict(bpe.vocab), list(bpe.merges), specials)


@plain_data
@dataclass
class Encoded:
    """``ids = encode(text)`` and ``decoded = decode(ids)``."""

    ids: list[int]
    decoded: str


def _encoded(tokenizer: Any, texts: list[str]) -> list[Encoded]:
    out = []
    for text in texts:
        ids = tokenizer.encode(text)
        out.append(Encoded(ids, tokenizer.decode(ids)))
    return out


@driver
def simple_round_trips(kind: str, texts: list[str]) -> list[Encoded]:
    """Build your ``kind`` tokenizer (``"character"`` or ``"byte"``); encode each text and decode its ids."""
    return _encoded(SIMPLE[kind](), texts)


@driver
def simple_decode(kind: str, ids: list[int]) -> str:
    """Build your ``kind`` tokenizer (``"character"`` or ``"byte"``); return ``decode(ids)``."""
    return SIMPLE[kind]().decode(ids)


@driver
def simple_decode_code_points(kind: str, ids: list[int]) -> list[int]:
    """Build your ``kind`` tokenizer; return the code points of ``decode(ids)`` (as numbers: a string of
    lone surrogates would not cross the line to the tests as it is)."""
    return [ord(c) for c in SIMPLE[kind]().decode(ids)]


@driver
def round_trips(bpe: BPE, texts: list[str]) -> list[Encoded]:
    """Build your Tokenizer from ``bpe``; encode each text and decode its ids (a bad ``bpe`` raises here)."""
    return _encoded(build(bpe), texts)


@driver
def decode(bpe: BPE, ids: list[int]) -> str:
    """Build your Tokenizer from ``bpe``; return ``decode(ids)``."""
    return build(bpe).decode(ids)


class CountingPieces:
    """A one-pass iterator over ``pieces`` that counts how many of them it has handed out (``taken``)."""

    def __init__(self, pieces: Iterable[str]) -> None:
        self._it = iter(pieces)
        self.taken = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        piece = next(self._it)
        self.taken += 1
        return piece


def line_groups(path: Path, chars: int = GROUP_CHARS) -> Iterator[str]:
    """The file's text (UTF-8, newlines as they are), in groups of whole lines of about ``chars`` characters."""
    with open(path, encoding="utf-8", newline="") as f:
        group: list[str] = []
        size = 0
        for line in f:
            group.append(line)
            size += len(line)
            if size >= chars:
                yield "".join(group)
                group, size = [], 0
        if group:
            yield "".join(group)


@plain_data
@dataclass
class Stream:
    """What ``encode_iterable`` gave over a one-pass iterator of pieces.

    ``lazy``: it returned an iterator (``iter(s) is s``), not a list; ``stretches``: the ids taken from
    it, stretch by stretch; ``taken``: how many pieces it had taken from the iterator when each stretch
    ended; ``decoded``: ``decode`` of all those ids; ``whole``: ``encode`` of the whole text, if asked.
    """

    lazy: bool
    stretches: list[list[int]]
    taken: list[int]
    decoded: str
    whole: list[int] | None = None

    @property
    def ids(self) -> list[int]:
        """All the ids taken, in order."""
        return [i for stretch in self.stretches for i in stretch]


@driver
def stream(
    bpe: BPE,
    pieces: list[str] | Path,
    stretches: Sequence[int | None] | None = None,
    also_encode: bool = False,
) -> Stream:
    """Build your Tokenizer from ``bpe``; feed ``encode_iterable`` the ``pieces`` (or a file's
    ``line_groups``) from a counting iterator and take ids in ``stretches`` (None: to the end; the
    default, one stretch of all), noting after each how many pieces it had taken.

    Stops at the first stretch that comes out short (the stream ended). ``also_encode``: also
    ``encode`` the whole text (``Stream.whole``).
    """
    tokenizer = build(bpe)
    source = CountingPieces(line_groups(pieces) if isinstance(pieces, Path) else pieces)
    given = tokenizer.encode_iterable(source)
    lazy = iter(given) is given
    ids = iter(given)
    out: list[list[int]] = []
    taken: list[int] = []
    for size in stretches or [None]:
        out.append(list(itertools.islice(ids, size)))
        taken.append(source.taken)
        if size is None or len(out[-1]) < size:
            break
    decoded = tokenizer.decode([i for stretch in out for i in stretch])
    whole = None
    if also_encode:
        text = "".join(line_groups(pieces)) if isinstance(pieces, Path) else "".join(pieces)
        whole = tokenizer.encode(text)
    return Stream(lazy, out, taken, decoded, whole)


@plain_data
@dataclass
class TwoStreams:
    """Ids of two ``encode_iterable`` streams: ``after_abandoned``, the second text's stream run to the
    end after a stream over the first was abandoned midway; ``first`` and ``second``, fresh streams
    over the two texts advanced in turns, a stretch of ids each; ``decoded``, the decodes of those two."""

    after_abandoned: list[int]
    first: list[int]
    second: list[int]
    decoded: tuple[str, str]


#: Ids each stream gives per turn when two are advanced in turns: uneven, so the turns fall
#: everywhere relative to where a stream settles its buffer.
TURNS = (1, 700, 2_000, 333, 3_000)


@driver
def abandoned_and_interleaved_streams(
    bpe: BPE, first: list[str], second: list[str], taken: int
) -> TwoStreams:
    """Build your Tokenizer from ``bpe``; take ``taken`` ids from a stream over ``first`` and drop it,
    encode ``second`` through a new stream to the end, then advance fresh streams over both in turns."""
    tokenizer = build(bpe)
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
        for i, s in enumerate(streams):
            if running[i]:
                ids = list(itertools.islice(s, turn))
                out[i] += ids
                running[i] = len(ids) == turn
    return TwoStreams(after, out[0], out[1], (tokenizer.decode(out[0]), tokenizer.decode(out[1])))


@driver
def arguments_changed_by_building(bpe: BPE) -> dict[str, tuple[Any, Any]]:
    """Build your Tokenizer from a vocab dict, merges list and special-tokens list of this driver's own
    (copies of ``bpe``'s); return ``{name: (before, after)}`` for each of the three that building changed."""
    vocab, merges = dict(bpe.vocab), list(bpe.merges)
    specials = None if bpe.special_tokens is None else list(bpe.special_tokens)
    before = {
        "vocab": dict(vocab),
        "merges": list(merges),
        "special_tokens": None if specials is None else list(specials),
    }
    adapters.get_tokenizer(vocab, merges, specials)
    after = {"vocab": vocab, "merges": merges, "special_tokens": specials}
    return {name: (before[name], after[name]) for name in before if before[name] != after[name]}


@plain_data
@dataclass
class SavedAndLoaded:
    """A tokenizer saved and read back with ``from_files``: the vocab and encode of the one saved, the
    vocab, merges, encode and decode of the one loaded."""

    vocab: dict[int, bytes]
    ids: list[int]
    loaded_vocab: dict[int, bytes]
    loaded_merges: list[tuple[bytes, bytes]]
    loaded_ids: list[int]
    loaded_decoded: str


@driver
def saved_and_loaded(bpe: BPE, folder: Path, text: str) -> SavedAndLoaded:
    """Build your Tokenizer from ``bpe``, ``save`` it to ``folder``/vocab.json and merges.txt, read it back
    with ``from_files`` (same special tokens); encode ``text`` with both and decode with the loaded one."""
    tokenizer = build(bpe)
    vocab_path, merges_path = folder / "vocab.json", folder / "merges.txt"
    tokenizer.save(vocab_path, merges_path)
    specials = None if bpe.special_tokens is None else list(bpe.special_tokens)
    loaded = tokenizer.from_files(vocab_path, merges_path, specials)
    ids = loaded.encode(text)
    return SavedAndLoaded(
        dict(tokenizer.vocab),
        tokenizer.encode(text),
        dict(loaded.vocab),
        list(loaded.merges),
        ids,
        loaded.decode(ids),
    )


@driver
def from_files_round_trips(
    vocab_path: Path, merges_path: Path, special_tokens: list[str] | None, texts: list[str]
) -> list[Encoded]:
    """Read a tokenizer with your Tokenizer class's ``from_files`` (reached through an instance over the
    256 bytes); encode each text and decode its ids."""
    instance = build(BPE({i: bytes([i]) for i in range(256)}, []))
    return _encoded(instance.from_files(vocab_path, merges_path, special_tokens), texts)


@driver
def recount_pairs(table: dict[bytes, int], recounts: int) -> int:
    """Count every adjacent byte pair of the pre-token table (``{pre-token bytes: count}``) ``recounts``
    times over, as a trainer that recounts after every merge does once per merge; return how many
    distinct pairs there are. Staff code, not yours: the speed tests time it as the baseline."""
    distinct = 0
    for _ in range(recounts):
        pairs: Counter[tuple[int, int]] = Counter()
        for word, count in table.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] += count
        distinct = len(pairs)
    return distinct
