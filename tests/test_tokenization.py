"""Character and byte tokenizers, and the compression ratio (UTF-8 bytes per token).

The tokenizers are built and run by the drivers in ``tests/scenarios/tokenization.py``."""

from __future__ import annotations

import pytest

import adapters
from tests.scenarios import tokenization

TEXTS = [
    "hello",
    "",
    "Grüße, Zoë!",
    "猫が寝ています",
    "👨‍👩‍👧‍👦 family, 👍🏽",
    "tabs\tand\nnewlines\r\n",
]


def assert_round_trips(kind: str, text: str, expected: list[int], what: str) -> None:
    """Your ``kind`` tokenizer encodes ``text`` to ``expected`` (``what`` they are) and decodes them back,
    ``text + "é"`` too."""
    encoded, extended = tokenization.simple_round_trips(kind, [text, text + "é"])
    assert encoded.ids == expected, (
        f"encode({text!r}) = {encoded.ids}; it should be {what}: {expected}"
    )
    assert encoded.decoded == text, f"decode({expected}) = {encoded.decoded!r}, expected {text!r}"
    assert extended.decoded == text + "é", "decode(encode(s)) must give s back"


@pytest.mark.parametrize("text", TEXTS)
def test_character_tokenizer_ids_are_code_points(text: str) -> None:
    """CharacterTokenizer.encode gives one id per code point (ord), and decode inverts it."""
    assert_round_trips("character", text, [ord(c) for c in text], "the code points")


def test_character_decode_rejects_ids_that_are_not_code_points() -> None:
    """Decoding an id above 0x10FFFF is a ValueError, not a crash deep in chr()."""
    with pytest.raises(ValueError, match="1114112"):
        tokenization.simple_decode("character", [104, 0x110000])


@pytest.mark.parametrize(
    "ids",
    [[0x10FFFF], [0xD800, 0xDBFF, 0xDC00, 0xDFFF], [0, 0xD7FF, 0xE000, 0xFFFF, 0x10000]],
    ids=["last-code-point", "surrogates", "edges-of-the-surrogates"],
)
def test_character_decode_accepts_every_code_point_up_to_0x10ffff(ids: list[int]) -> None:
    """Every id in 0..0x10FFFF is a code point and decodes to chr(id): the last one, 0x10FFFF, and the
    surrogates 0xD800..0xDFFF included (the bound is inclusive; the docstring says so)."""
    decoded = tokenization.simple_decode_code_points("character", ids)
    assert decoded == ids, (
        f"decode({[hex(i) for i in ids]}) gave the code points {[hex(c) for c in decoded]}: every id in "
        "0..0x10FFFF (inclusive, surrogates too) decodes to chr(id)"
    )


@pytest.mark.parametrize("bad", [-1, -0x110000, 0x110000, 2**32])
def test_character_decode_rejects_negative_ids_and_ids_past_0x10ffff(bad: int) -> None:
    """A negative id, or one past 0x10FFFF, is a ValueError naming the id in decimal (the ids next to it
    decode)."""
    assert tokenization.simple_decode("character", [104, 0x10FFFF]) == "h\U0010ffff"
    with pytest.raises(ValueError, match=rf"(?<![0-9]){bad}(?![0-9])"):
        tokenization.simple_decode("character", [104, bad])


@pytest.mark.parametrize("text", TEXTS)
def test_byte_tokenizer_ids_are_utf8_bytes(text: str) -> None:
    """ByteTokenizer.encode gives the UTF-8 bytes as ints 0..255, and decode inverts it."""
    assert_round_trips("byte", text, list(text.encode("utf-8")), "the UTF-8 bytes")


@pytest.mark.parametrize(
    "ids",
    [[0xE2, 0x82], [104, 0xFF, 105], [0xF0, 0x9F, 0x98], [0x80]],
    ids=["truncated-euro", "invalid-byte", "truncated-emoji", "lone-continuation"],
)
def test_byte_decode_replaces_invalid_utf8(ids: list[int]) -> None:
    """Byte sequences that are not UTF-8 decode to U+FFFD exactly as bytes.decode(errors='replace')."""
    expected = bytes(ids).decode("utf-8", errors="replace")
    assert tokenization.simple_decode("byte", ids) == expected, (
        "invalid UTF-8 must become U+FFFD (errors='replace'), never raise"
    )


def test_byte_decode_rejects_ids_above_255() -> None:
    """A byte tokenizer only knows ids 0..255; anything else is a ValueError naming the id."""
    with pytest.raises(ValueError, match="256"):
        tokenization.simple_decode("byte", [104, 256])


def explain_ratio(text: str, ids: list[int], got: float) -> str:
    """What a wrong compression ratio most likely computed, by comparing it with the usual mistakes."""
    n_bytes, n_chars, n = len(text.encode("utf-8")), len(text), len(ids)
    want = n_bytes / n
    head = f"compression_ratio({text!r}, {n} ids) = {got!r}; expected {n_bytes} UTF-8 bytes / {n} tokens = {want:.6g}"
    mistakes = {
        "len(text) / len(ids): characters per token, but the ratio counts UTF-8 bytes (len(text.encode('utf-8')))": n_chars
        / n,
        "len(ids) / len(UTF-8 bytes): tokens per byte, the ratio upside down (higher must mean shorter sequences)": n
        / n_bytes,
        "len(ids) / len(text): tokens per character, upside down and in characters": n / n_chars,
    }
    for what, value in mistakes.items():
        if value == pytest.approx(got) and value != pytest.approx(want):
            return f"{head}. You computed {what}"
    return head


@pytest.mark.parametrize("text", [t for t in TEXTS if t])
def test_compression_ratio_is_utf8_bytes_per_token(text: str) -> None:
    """compression_ratio = len(UTF-8 bytes) / len(ids): 1 for bytes, bytes-per-char for characters."""
    for ids in (
        list(text.encode("utf-8")),
        [ord(c) for c in text],
    ):  # the two tokenizers' ids, made here
        got = adapters.run_compression_ratio(text, ids)
        assert got == pytest.approx(len(text.encode("utf-8")) / len(ids)), explain_ratio(
            text, ids, got
        )


def test_compression_ratio_of_no_tokens_is_an_error() -> None:
    """With no ids the ratio is undefined: a ValueError, not a ZeroDivisionError."""
    with pytest.raises(ValueError, match="empty"):
        adapters.run_compression_ratio("", [])
