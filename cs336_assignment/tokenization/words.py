"""A word tokenizer, to show why nobody uses one: words it has not seen all become UNK.

Segments are ``\\w+|.`` (a run of word characters, or any single other character), the
vocabulary is every segment of a training corpus (optionally only those seen ``min_count`` times),
and id 0 is reserved for the unknown token. Decoding cannot bring an unknown word back:

>>> tok = WordTokenizer.from_corpus("the cat sat on the mat")
>>> tok.encode("the cat sat on the hat")
[1, 2, 3, 2, 4, 2, 5, 2, 1, 2, 0]
>>> tok.decode(tok.encode("the cat sat on the hat"))
'the cat sat on the <unk>'
>>> round(tok.unk_rate("the cat sat on the hat"), 3)
0.091

Byte-level BPE has no UNK: every string is some sequence of bytes. Deliberately left out: casing
or stemming tricks that shrink the vocabulary; they lower the UNK rate but never to zero.
"""

from __future__ import annotations

from collections import Counter

import regex

WORD_REGEX = regex.compile(r"\w+|.", flags=regex.DOTALL)


class WordTokenizer:
    """Vocabulary of whole words; id 0 is ``unk_token`` for everything else."""

    def __init__(self, words: list[str], unk_token: str = "<unk>") -> None:
        if len(set(words)) != len(words):
            raise ValueError(
                "words contains duplicates; pass each word once (e.g. list(dict.fromkeys(words)))"
            )
        if unk_token in words:
            raise ValueError(f"unk_token {unk_token!r} is also a word; choose another unk_token")
        self.unk_token = unk_token
        self.id_to_word = [unk_token, *words]
        self.word_to_id = {w: i for i, w in enumerate(self.id_to_word)}

    @classmethod
    def from_corpus(cls, text: str, min_count: int = 1, unk_token: str = "<unk>") -> WordTokenizer:
        """Every segment seen at least ``min_count`` times, in order of first appearance."""
        if min_count < 1:
            raise ValueError(f"min_count={min_count} must be at least 1")
        counts = Counter(WORD_REGEX.findall(text))
        return cls([w for w, c in counts.items() if c >= min_count and w != unk_token], unk_token)

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_word)

    def encode(self, text: str) -> list[int]:
        return [self.word_to_id.get(w, 0) for w in WORD_REGEX.findall(text)]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.id_to_word[i] for i in ids)

    def unk_rate(self, text: str) -> float:
        """Fraction of segments of ``text`` that are unknown words."""
        ids = self.encode(text)
        return ids.count(0) / len(ids) if ids else 0.0
