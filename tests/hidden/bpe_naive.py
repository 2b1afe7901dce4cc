"""A naive byte-level BPE trainer, written for the tests and independent of ``cs336_assignment``.

It recounts every pair of every pre-token after every merge: obviously correct, and slow. The
hidden tests use it twice: as the oracle the student's trainer must agree with (same merges, same
vocab), and as the baseline the student's trainer must beat by a wide margin on time; staff tests
use it to check the stored BPE snapshots the public tests compare with. It is a working solution
of ``train_bpe``, so it lives here, under ``tests/hidden/``, which the handout leaves out.
"""

from __future__ import annotations

import os
from collections import Counter

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def pretokens(text: str, special_tokens: list[str]) -> Counter[str]:
    """Pre-token counts of ``text`` after removing special tokens (longest first)."""
    pieces = [text]
    if special_tokens:
        alternatives = "|".join(
            regex.escape(t) for t in sorted(special_tokens, key=len, reverse=True)
        )
        pieces = regex.split(alternatives, text)
    counts: Counter[str] = Counter()
    for piece in pieces:
        counts.update(regex.findall(GPT2_PATTERN, piece))
    return counts


def naive_train_bpe(
    input_path: str | os.PathLike, vocab_size: int, special_tokens: list[str]
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Byte-level BPE by full recount; ties go to the lexicographically greater pair of bytes."""
    with open(input_path, "rb") as f:
        text = f.read().decode("utf-8")
    words = Counter(
        {
            tuple(bytes([b]) for b in p.encode("utf-8")): c
            for p, c in pretokens(text, special_tokens).items()
        }
    )
    merges: list[tuple[bytes, bytes]] = []
    while 256 + len(merges) + len(special_tokens) < vocab_size:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for i in range(len(word) - 1):
                pairs[word[i], word[i + 1]] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda item: (item[1], item[0]))[0]
        merges.append(best)
        new_words: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == best[0] and word[i + 1] == best[1]:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += count
        words = new_words
    tokens = (
        [bytes([i]) for i in range(256)]
        + [a + b for a, b in merges]
        + [t.encode("utf-8") for t in special_tokens]
    )
    return dict(enumerate(tokens)), merges
