"""The fast ``re`` pre-tokenizer gives exactly ``regex``'s GPT-2 pre-tokens.

Staff-only: ``pretokenize.GPT2_REGEX`` is given code (outside any solution region) that spells
``\\p{L}``, ``\\p{N}`` and ``\\s`` out as ranges so the standard library's ``re`` can run the
pattern; these tests lock that rewrite to the ``regex`` original.
"""

from __future__ import annotations

import random

import pytest
import regex

from cs336_assignment.tokenization.pretokenize import GPT2_PATTERN, GPT2_REGEX

pytestmark = pytest.mark.staff

REFERENCE = regex.compile(GPT2_PATTERN)
CONTEXTS = ["{c}", "a{c}b", " {c}", "{c} ", "1{c}2", "  {c}x", "x{c}  y", "'{c}s"]


def _bmp_chars() -> list[str]:
    return [chr(i) for i in range(0x10000) if not 0xD800 <= i < 0xE000]


@pytest.mark.parametrize("context", CONTEXTS)
def test_every_bmp_character_pretokenizes_like_regex(context: str) -> None:
    """Each character below U+10000, alone and between letters, digits and spaces, splits as regex splits it."""
    text = "\x00".join(context.format(c=c) for c in _bmp_chars())
    assert GPT2_REGEX.findall(text) == REFERENCE.findall(text)


def test_random_strings_and_windows_pretokenize_like_regex() -> None:
    """Random mixes of scripts, digits, spaces, punctuation and emoji, whole and through pos/endpos, agree with regex."""
    rng = random.Random(0)
    alphabet = list("ab Z09 \t\n\r'’.,!?-_") + [
        "é",
        "ß",
        "я",
        "中",
        "٣",
        "\u00a0",
        "\u2003",
        "\x1c",
        "😀",
        "𝔘",
    ]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        pos = rng.randint(0, len(text))
        end = rng.randint(pos, len(text))
        assert GPT2_REGEX.findall(text) == REFERENCE.findall(text), repr(text)
        assert GPT2_REGEX.findall(text, pos, end) == REFERENCE.findall(text, pos, end), (
            repr(text),
            pos,
            end,
        )
