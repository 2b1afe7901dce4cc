"""Character and byte tokenizers, and the compression ratio (UTF-8 bytes per token)."""

from __future__ import annotations

import pytest

import adapters

TEXTS = [
    "hello",
    "",
    "Grüße, Zoë!",
    "猫が寝ています",
    "👨‍👩‍👧‍👦 family, 👍🏽",
    "tabs\tand\nnewlines\r\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_character_tokenizer_ids_are_code_points(text: str) -> None:
    """CharacterTokenizer.encode gives one id per code point (ord), and decode inverts it."""
    tok = adapters.get_character_tokenizer()
    ids = tok.encode(text)
    assert ids == [ord(c) for c in text], f"encode({text!r}) should be the code points"
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode(text + "é")) == text + "é", "decode(encode(s)) must give s back"


def test_character_decode_rejects_ids_that_are_not_code_points() -> None:
    """Decoding an id above 0x10FFFF is a ValueError, not a crash deep in chr()."""
    tok = adapters.get_character_tokenizer()
    with pytest.raises(ValueError, match="1114112"):
        tok.decode([104, 0x110000])


@pytest.mark.parametrize("text", TEXTS)
def test_byte_tokenizer_ids_are_utf8_bytes(text: str) -> None:
    """ByteTokenizer.encode gives the UTF-8 bytes as ints 0..255, and decode inverts it."""
    tok = adapters.get_byte_tokenizer()
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8")), f"encode({text!r}) should be the UTF-8 bytes"
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode(text + "é")) == text + "é", "decode(encode(s)) must give s back"


@pytest.mark.parametrize(
    "ids",
    [[0xE2, 0x82], [104, 0xFF, 105], [0xF0, 0x9F, 0x98], [0x80]],
    ids=["truncated-euro", "invalid-byte", "truncated-emoji", "lone-continuation"],
)
def test_byte_decode_replaces_invalid_utf8(ids: list[int]) -> None:
    """Byte sequences that are not UTF-8 decode to U+FFFD exactly as bytes.decode(errors='replace')."""
    tok = adapters.get_byte_tokenizer()
    expected = bytes(ids).decode("utf-8", errors="replace")
    assert tok.decode(ids) == expected, (
        "invalid UTF-8 must become U+FFFD (errors='replace'), never raise"
    )


def test_byte_decode_rejects_ids_above_255() -> None:
    """A byte tokenizer only knows ids 0..255; anything else is a ValueError naming the id."""
    with pytest.raises(ValueError, match="256"):
        adapters.get_byte_tokenizer().decode([104, 256])


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
