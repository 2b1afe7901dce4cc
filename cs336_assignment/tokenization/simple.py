"""The two simplest tokenizers, and the number that compares all tokenizers: bytes per token.

    CharacterTokenizer: one token per Unicode code point  (vocabulary ~150,000, most never used)
    ByteTokenizer:      one token per UTF-8 byte          (vocabulary 256, but long sequences)

>>> ByteTokenizer().encode("hé")
[104, 195, 169]
>>> compression_ratio("hé", [104, 195, 169])
1.0

Deliberately left out: any learned vocabulary (see ``train.py`` and ``tokenizer.py``).
"""

from __future__ import annotations


class CharacterTokenizer:
    """Tokens are Unicode code points: ``encode(s) = [ord(c) for c in s]``."""

    def encode(self, text: str) -> list[int]:
        """One id per character, the character's code point."""
        # BEGIN SOLUTION
        return [ord(c) for c in text]
        # END SOLUTION

    def decode(self, ids: list[int]) -> str:
        """The inverse of ``encode``: ``"".join(chr(i) for i in ids)``.

        Every id in 0..0x10FFFF decodes, the last code point 0x10FFFF and the surrogates
        0xD800..0xDFFF included (a lone surrogate is a code point, as ``chr`` and ``ord`` have it,
        though no UTF-8 text holds one).

        Raises:
            ValueError: for an id that is no code point (outside 0..0x10FFFF: negative, or 0x110000
                and above); the message names the id in decimal: "id 1114112 is not a Unicode code
                point (0..0x10FFFF)", "id -1 is not ...".
        """
        # BEGIN SOLUTION
        for i in ids:
            if not 0 <= i <= 0x10FFFF:
                raise ValueError(
                    f"id {i} is not a Unicode code point (0..0x10FFFF); was it produced by another tokenizer?"
                )
        return "".join(map(chr, ids))
        # END SOLUTION


class ByteTokenizer:
    """Tokens are the bytes of the UTF-8 encoding: ids 0..255."""

    def encode(self, text: str) -> list[int]:
        """One id per UTF-8 byte."""
        # BEGIN SOLUTION
        return list(text.encode("utf-8"))
        # END SOLUTION

    def decode(self, ids: list[int]) -> str:
        """Bytes back to text; byte sequences that are not UTF-8 become U+FFFD (``errors="replace"``).

        A model can emit any sequence of byte ids, so decoding must never fail on its output.

        Raises:
            ValueError: for an id outside 0..255; the message names the id: "id 256 is not a byte
                (0..255)".
        """
        # BEGIN SOLUTION
        for i in ids:
            if not 0 <= i <= 255:
                raise ValueError(
                    f"id {i} is not a byte (0..255); was it produced by another tokenizer?"
                )
        return bytes(ids).decode("utf-8", errors="replace")
        # END SOLUTION


def compression_ratio(text: str, ids: list[int]) -> float:
    """UTF-8 bytes per token, ``len(text.encode("utf-8")) / len(ids)``: higher means shorter sequences.

    A byte tokenizer scores exactly 1; GPT-2's BPE about 4 on English. Count the *bytes* of the
    UTF-8 encoding, not the characters: "hé" is 3 bytes.

    Raises:
        ValueError: if ``ids`` is empty (bytes per token is undefined); the message says "empty":
            "ids is empty, so bytes per token is undefined".
    """
    # BEGIN SOLUTION
    if len(ids) == 0:
        raise ValueError(
            "ids is empty, so bytes per token is undefined; encode a non-empty text first"
        )
    return len(text.encode("utf-8")) / len(ids)
    # END SOLUTION
