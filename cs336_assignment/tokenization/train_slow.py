"""Byte-level BPE training, the slow and obvious way: recount every pair after every merge.

The rule (the same in ``train.py``, which is fast):

    vocab   = {0: b"\\x00", ..., 255: b"\\xff"}
    words   = Counter of pre-tokens, each a tuple of single bytes      (special tokens removed)
    repeat vocab_size - 256 - len(special_tokens) times:
        count[(x, y)] = sum over words w of  freq(w) * (occurrences of x, y adjacent in w)
        best = the pair with the largest count; ties -> the lexicographically greater (x, y)
        merge every non-overlapping occurrence of best, left to right, in every word
        vocab[next id] = x + y
    special tokens get the last ids

Cost per merge is the size of the whole pre-token table, so training is O(merges * table). Fine
for a few hundred merges on a few hundred kilobytes; hopeless for 32k merges on gigabytes.

>>> import tempfile, pathlib
>>> folder = tempfile.TemporaryDirectory()
>>> path = pathlib.Path(folder.name) / "corpus.txt"
>>> _ = path.write_text("low low low lower lowest")
>>> vocab, merges = train_bpe_slow(path, 259, [])
>>> merges   # (l,o) and (o,w) both occur 5 times: the greater pair (o,w) wins the tie
[(b'o', b'w'), (b'l', b'ow'), (b' ', b'low')]
>>> folder.cleanup()

Deliberately left out: parallelism, chunked reading, and any incremental bookkeeping.
"""

from __future__ import annotations

import os
from collections import Counter
from itertools import pairwise

from .pretokenize import check_special_tokens, count_pretokens, read_utf8


def check_vocab_size(vocab_size: int, special_tokens: list[str]) -> None:
    """A vocabulary must hold the 256 bytes and every special token."""
    need = 256 + len(special_tokens)
    if not isinstance(vocab_size, int) or vocab_size < need:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it counts the 256 byte tokens and the "
            f"{len(special_tokens)} special token(s), so it must be at least {need}"
        )


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replace every non-overlapping occurrence of ``pair`` in ``word``, scanning left to right.

    >>> merge_word((b"a", b"a", b"a"), (b"a", b"a"))
    (b'aa', b'a')

    Optional helper, not graded: a step of ``train_bpe_slow``.
    """
    # BEGIN SOLUTION
    out: list[bytes] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
    # END SOLUTION


def train_bpe_slow(
    input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on a UTF-8 file; same contract as ``train.train_bpe`` (see its docstring).

    Optional helper, not graded, and recommended: write it first. It is the obviously correct trainer to compare your
    fast ``train_bpe`` with on any text you like (the tests compare with stored results instead),
    and the slow baseline its speed is measured against.
    """
    # BEGIN SOLUTION
    special_tokens = check_special_tokens(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    text = read_utf8(input_path)
    words: Counter[tuple[bytes, ...]] = Counter()
    for pretoken, count in count_pretokens(text, special_tokens).items():
        words[tuple(bytes([b]) for b in pretoken.encode("utf-8"))] += count

    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) < vocab_size - len(special_tokens):
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in pairwise(word):
                pairs[pair] += count
        if not pairs:
            break  # every pre-token is a single token already
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        merged: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged[merge_word(word, best)] += count
        words = merged

    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges
    # END SOLUTION
