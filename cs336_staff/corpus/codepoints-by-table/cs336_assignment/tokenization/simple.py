"""The two simplest tokenizers, and the number that compares all tokenizers: bytes per token.

(Corpus entry ``codepoints-by-table``: written from the handout's docstrings. Encoding goes
through ``array`` and ``memoryview`` instead of comprehensions, decoding validates every id
before building anything, with a ``ValueError`` subclass of its own whose constructor takes the
bad id (not a message), and the compression ratio is an exact ``Fraction`` until it is returned.)
"""

from __future__ import annotations

import array
from fractions import Fraction

MAX_CODE_POINT = 0x10FFFF


class UnknownIdError(ValueError):
    """An id the tokenizer never produces; ``.id`` is the first such id."""

    def __init__(self, bad: int, what: str) -> None:
        super().__init__(f"cannot decode id {bad}: it is not {what}")
        self.id = bad


def _first_outside(ids: list[int], high: int) -> int | None:
    return next((i for i in ids if i < 0 or i > high), None)


class CharacterTokenizer:
    """Tokens are Unicode code points: ``encode(s) = [ord(c) for c in s]``."""

    def encode(self, text: str) -> list[int]:
        """One id per character, the character's code point."""
        return array.array("I", text.encode("utf-32-le")).tolist()

    def decode(self, ids: list[int]) -> str:
        """The inverse of ``encode``; an id outside 0..0x10FFFF is an ``UnknownIdError`` (a ``ValueError``)."""
        bad = _first_outside(ids, MAX_CODE_POINT)
        if bad is not None:
            raise UnknownIdError(bad, "a Unicode code point (0..0x10FFFF)")
        return array.array("I", ids).tobytes().decode("utf-32-le", errors="surrogatepass")


class ByteTokenizer:
    """Tokens are the bytes of the UTF-8 encoding: ids 0..255."""

    def encode(self, text: str) -> list[int]:
        """One id per UTF-8 byte."""
        return memoryview(text.encode("utf-8")).tolist()

    def decode(self, ids: list[int]) -> str:
        """Bytes back to text (``errors="replace"``); an id outside 0..255 is an ``UnknownIdError``."""
        bad = _first_outside(ids, 255)
        if bad is not None:
            raise UnknownIdError(bad, "a byte (0..255)")
        return bytearray(ids).decode("utf-8", errors="replace")


def compression_ratio(text: str, ids: list[int]) -> float:
    """UTF-8 bytes per token, ``len(text.encode("utf-8")) / len(ids)``: higher means shorter sequences."""
    if not ids:
        raise ValueError("cannot compute bytes per token: ids is empty")
    return float(Fraction(len(text.encode("utf-8")), len(ids)))
