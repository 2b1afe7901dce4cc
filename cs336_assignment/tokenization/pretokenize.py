"""Pre-tokenization: special tokens first, then GPT-2's regex, and where a file may be cut.

BPE never merges across a pre-token boundary, so the trainer and the encoder both see text as

    text --split on special tokens--> segments --GPT-2 regex--> pre-tokens --BPE--> tokens

>>> split_on_special_tokens("a<|endoftext|>b", ["<|endoftext|>"])
['a', '<|endoftext|>', 'b']
>>> GPT2_REGEX.findall("Hello, world!  It's 2024")
['Hello', ',', ' world', '!', ' ', ' It', "'s", ' 2024']

Letters are ``\\p{L}`` (any script) and numbers ``\\p{N}`` (any number, not only 0-9), which is not
what ``\\w`` and ``\\d`` match: a superscript is a number, ``_`` is neither.

>>> GPT2_REGEX.findall("x² + 3½, H₂O snake_case")
['x', '²', ' +', ' 3½', ',', ' H', '₂', 'O', ' snake', '_', 'case']

Special tokens are matched longest first, so with both ``<|a|>`` and ``<|a|><|a|>`` the longer one
wins where it occurs. A file is cut into chunks (for parallel pre-tokenization) only at positions
where cutting cannot change the result: just before a special token that no other special token
straddles, or, in a file without special tokens, just after a newline between two visible ASCII
characters (no GPT-2 pre-token crosses such a newline, and none looks past it).

Deliberately left out: byte-level fallbacks for text that is not UTF-8 (it is an error here), and
any normalization (NFC, lowercasing): GPT-2 does none.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator

import regex

#: GPT-2's pre-tokenization pattern: contractions (lowercase only: it is case-sensitive, so "DON'T" is
#: DON + ' + T), letters, numbers, punctuation (each optionally
#: after one space), then whitespace runs, keeping the last space of a run for the next word.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _bmp_ranges(unicode_class: str) -> str:
    r"""The characters below U+10000 that ``regex`` puts in ``unicode_class`` (e.g. ``\p{L}``), as ``re`` ranges."""
    codes = array("H", range(0x10000))
    # Surrogates cannot be decoded: put NUL there instead, which is in none of our classes.
    codes[0xD800:0xE000] = array("H", [0]) * 0x800
    every_char = codes.tobytes().decode("utf-16-le" if sys.byteorder == "little" else "utf-16-be")
    runs = (m.group() for m in regex.finditer(f"{unicode_class}+", every_char))
    return "".join(
        re.escape(run[0]) + (f"-{re.escape(run[-1])}" if len(run) > 1 else "") for run in runs
    )


@functools.cache
def _bmp_regex() -> re.Pattern[str]:
    r"""``GPT2_PATTERN`` for the standard library's ``re``, for text below U+10000; built on first use (~40 ms).

    ``re`` lacks ``\p{...}`` (and its ``\s`` also matches \x1c-\x1f), so ``\p{L}``, ``\p{N}`` and
    ``\s`` are spelled out as the ranges ``regex`` gives them, for the characters below U+10000
    only: there ``re`` tests a class with one table lookup.
    """
    _L, _N, _S = _bmp_ranges(r"\p{L}"), _bmp_ranges(r"\p{N}"), _bmp_ranges(r"\s")
    return re.compile(
        rf"""'(?:[sdmt]|ll|ve|re)| ?[{_L}]+| ?[{_N}]+| ?[^{_S}{_L}{_N}]+|[{_S}]+(?![^{_S}])|[{_S}]+"""
    )


class _Gpt2Regex:
    r"""``GPT2_PATTERN``, run by the standard library's ``re`` (about twice as fast as ``regex``) where it can be.

    Text whose characters are all below U+10000 goes to ``re`` (``_bmp_regex``: ``\p{L}``, ``\p{N}``
    and ``\s`` spelled out as ranges); text with a character beyond (emoji, rare scripts) goes to
    ``regex``. Either way the pre-tokens are exactly those of ``regex.findall(GPT2_PATTERN)``.
    """

    pattern = GPT2_PATTERN
    _full = regex.compile(GPT2_PATTERN)
    _beyond_bmp = re.compile("[\U00010000-\U0010ffff]")

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[str]:
        """The pre-tokens of ``string[pos:endpos]``."""
        if self._beyond_bmp.search(string, pos, endpos):
            return self._full.findall(string, pos, endpos)
        return _bmp_regex().findall(string, pos, endpos)


GPT2_REGEX = _Gpt2Regex()

# Bytes that are printable, non-space ASCII: a newline between two of them is a safe cut.
_VISIBLE_ASCII = frozenset(range(0x21, 0x7F))


def check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """Return the special tokens without duplicates (first occurrence kept); reject bad ones."""
    out: list[str] = []
    for token in special_tokens or ():
        if not isinstance(token, str):
            raise ValueError(
                f"special token {token!r} is a {type(token).__name__}; pass strings such as '<|endoftext|>'"
            )
        if token == "":
            raise ValueError(
                "special token '' is empty; drop it (an empty token would match between every two characters)"
            )
        if token not in out:
            out.append(token)
    return out


def special_tokens_regex(special_tokens: list[str]) -> regex.Pattern[str] | None:
    """A regex matching any special token, longest first (so overlapping tokens resolve to the longer).

    None when there are no special tokens. Optional helper, not graded: a building block of ``train_bpe`` and
    ``Tokenizer`` (both graded); ``split_on_special_tokens`` below calls it.
    """
    # BEGIN SOLUTION
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("|".join(regex.escape(t) for t in ordered))
    # END SOLUTION


def split_on_special_tokens(text: str, special_tokens: list[str]) -> list[str]:
    """Split ``text`` into ordinary segments and special tokens, keeping both, in order.

    >>> split_on_special_tokens("x<|a|><|a|>y", ["<|a|>", "<|a|><|a|>"])
    ['x', '<|a|><|a|>', 'y']
    """
    pattern = special_tokens_regex(special_tokens)
    if pattern is None:
        return [text] if text else []
    parts: list[str] = []
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            parts.append(text[start : match.start()])
        parts.append(match.group())
        start = match.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def count_pretokens(text: str, special_tokens: list[str]) -> Counter[str]:
    """How often each pre-token occurs in ``text``; special tokens only separate, they are not counted.

    Optional helper, not graded: a building block of ``train_bpe`` (graded).
    """
    # BEGIN SOLUTION
    counts: Counter[str] = Counter()
    pattern = special_tokens_regex(special_tokens)
    segments = [text] if pattern is None else pattern.split(text)
    for segment in segments:
        counts.update(GPT2_REGEX.findall(segment))  # Counter.update on a list runs in C
    return counts
    # END SOLUTION


def read_utf8(path: str | os.PathLike, start: int = 0, end: int | None = None) -> str:
    """Bytes ``[start, end)`` of the file as text; a ValueError naming the offset if not UTF-8."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(end - start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{os.fspath(path)} is not valid UTF-8 (byte {start + e.start}: {e.reason}); "
            "convert it first, e.g. `iconv -f latin1 -t utf-8 in.txt > out.txt`"
        ) from None


def _safe_cut(window: bytes, offset: int, special: list[bytes]) -> bool:
    """True if no special token occurrence in ``window`` covers both ``offset - 1`` and ``offset``."""
    for token in special:
        for k in range(1, len(token)):
            start = offset - k
            if start >= 0 and window.startswith(token, start):
                return False
    return True


def _next_cut(f, position: int, size: int, special: list[bytes], block: int = 1 << 16) -> int:
    """The first safe cut at or after ``position`` (``size`` if there is none)."""
    longest = max((len(t) for t in special), default=1)
    margin = max(longest, 2)
    while position < size:
        # Read [position - margin, position + block + margin) so matches across block edges are seen.
        lo = max(0, position - margin)
        f.seek(lo)
        window = f.read(position + block + margin - lo)
        base = position - lo
        candidates: Iterator[int]
        if special:
            candidates = (
                i for token in special for i in _find_all(window, token, base, base + block)
            )
            for i in sorted(set(candidates)):
                if _safe_cut(window, i, special):
                    return lo + i
        else:
            i = window.find(b"\n", max(base - 1, 1), base + block)
            while i != -1:
                if (
                    i + 1 < len(window)
                    and window[i - 1] in _VISIBLE_ASCII
                    and window[i + 1] in _VISIBLE_ASCII
                ):
                    return lo + i + 1
                i = window.find(b"\n", i + 1, base + block)
        position += block
    return size


def _find_all(data: bytes, needle: bytes, start: int, end: int) -> Iterator[int]:
    """Start positions of ``needle`` in ``data`` that begin in ``[start, end)``."""
    i = data.find(needle, start)
    while i != -1 and i < end:
        yield i
        i = data.find(needle, i + 1)


def find_chunk_boundaries(
    path: str | os.PathLike, special_tokens: list[str], target_chunk_bytes: int
) -> list[int]:
    """Byte offsets ``[0, ..., file_size]`` cutting the file into chunks of about ``target_chunk_bytes``.

    Every cut is safe (see the module docstring): pre-tokenizing the chunks one by one gives the
    same pre-tokens as pre-tokenizing the whole file. A chunk may be much larger than the target
    when no safe cut exists nearby (one huge document, or no newlines).
    """
    if target_chunk_bytes < 1:
        raise ValueError(f"target_chunk_bytes={target_chunk_bytes} must be positive")
    special = [t.encode("utf-8") for t in special_tokens]
    size = os.path.getsize(path)
    bounds = [0]
    with open(path, "rb") as f:
        while bounds[-1] < size:
            cut = _next_cut(f, bounds[-1] + target_chunk_bytes, size, special)
            bounds.append(min(cut, size))
    return bounds
