"""Saving a BPE tokenizer: GPT-2's ``vocab.json`` + ``merges.txt``, which round-trip any bytes.

Token bytes are not always text (a merge can hold half a UTF-8 character, a space, a newline), so
GPT-2 writes each byte as one printable character: bytes that are printable already stay, the
other 68 (controls, space, ...) move to U+0100 and up. ``b" the"`` is written ``"Ġthe"``, ``b"\\n"``
is ``"Ċ"``. A token's string therefore has no spaces, so a merges line is just ``"a b"``.

    vocab.json   {"!": 0, ..., "Ġthe": 262, ..., "<|endoftext|>": 499}
    merges.txt   #version: 0.2          (header line, as GPT-2 and Hugging Face write it)
                 Ġ t
                 h e

>>> BYTE_TO_CHAR[ord(" ")], BYTE_TO_CHAR[ord("\\n")], BYTE_TO_CHAR[ord("a")]
('Ġ', 'Ċ', 'a')

These are the files of GPT-2 and of Hugging Face ``tokenizers``' ByteLevel BPE, so either can read
ours. Deliberately left out: ``tokenizer.json`` (HF's single-file format) and any pre-tokenizer
settings: the pattern is GPT-2's, fixed in ``pretokenize.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MERGES_HEADER = "#version: 0.2"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: printable Latin-1 bytes map to themselves, the rest to U+0100, U+0101, ..."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# For str.translate: each table character to the Latin-1 character of its byte; a character below
# U+0100 that is not in the table to U+FFFF, so that encoding to Latin-1 fails on it.
_TO_LATIN1 = {ord(c): chr(b) for c, b in CHAR_TO_BYTE.items()} | {
    b: "\uffff" for b in range(256) if chr(b) not in CHAR_TO_BYTE
}


def bytes_to_string(token: bytes) -> str:
    """``b" hi"`` -> ``"Ġhi"``: the printable spelling of a token."""
    return "".join(BYTE_TO_CHAR[b] for b in token)


def string_to_bytes(text: str, where: str = "token") -> bytes:
    """``"Ġhi"`` -> ``b" hi"``; a ValueError for a character that is not in GPT-2's table."""
    try:
        # the same as bytes(CHAR_TO_BYTE[c] ...), in C
        return text.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        pass
    try:
        return bytes(CHAR_TO_BYTE[c] for c in text)
    except KeyError as e:
        raise ValueError(
            f"{where} {text!r} has the character {e.args[0]!r}, which is not in GPT-2's byte table; "
            "is this file in GPT-2's vocab.json/merges.txt format?"
        ) from None


def save_bpe(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    vocab_path: str | os.PathLike,
    merges_path: str | os.PathLike,
) -> None:
    """Write ``vocab.json`` and ``merges.txt`` (UTF-8); ``load_bpe`` gives back exactly the same objects."""
    spelled = {bytes_to_string(token): i for i, token in sorted(vocab.items())}
    if len(spelled) != len(vocab):
        seen: dict[bytes, int] = {}
        for i, token in sorted(vocab.items()):
            if token in seen:
                raise ValueError(
                    f"ids {seen[token]} and {i} are both {token!r}; vocab.json maps each token to one id, "
                    "so remove the duplicate (a special token equal to an ordinary token?)"
                )
            seen[token] = i
    Path(vocab_path).write_text(json.dumps(spelled, ensure_ascii=False, indent=0), encoding="utf-8")
    lines = [MERGES_HEADER, *(f"{bytes_to_string(a)} {bytes_to_string(b)}" for a, b in merges)]
    Path(merges_path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_bpe(
    vocab_path: str | os.PathLike, merges_path: str | os.PathLike
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Read the files written by ``save_bpe`` (or GPT-2's own)."""
    spelled = json.loads(Path(vocab_path).read_text(encoding="utf-8"))
    if not isinstance(spelled, dict):
        raise ValueError(
            f"{vocab_path} holds a JSON {type(spelled).__name__}; expected an object {{token: id}}"
        )
    try:  # the fast path: whole strings through str.translate (C); the slow one names a bad token
        vocab = {int(i): s.translate(_TO_LATIN1).encode("latin-1") for s, i in spelled.items()}
    except UnicodeEncodeError:
        vocab = {int(i): string_to_bytes(s, f"{vocab_path}: token") for s, i in spelled.items()}
    lines = Path(merges_path).read_text(encoding="utf-8").split("\n")
    if lines[0].startswith("#version"):
        lines[0] = ""
    pairs = [line.split(" ") for line in lines if line]
    if all(len(pair) == 2 for pair in pairs):
        try:  # the same fast path, token by token
            return vocab, [
                (
                    a.translate(_TO_LATIN1).encode("latin-1"),
                    b.translate(_TO_LATIN1).encode("latin-1"),
                )
                for a, b in pairs
            ]
        except UnicodeEncodeError:
            pass
    merges = []
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(
                f"{merges_path}:{number}: expected two tokens separated by one space, got {line!r}"
            )
        a, b = (string_to_bytes(p, f"{merges_path}:{number}: token") for p in parts)
        merges.append((a, b))
    return vocab, merges
