"""``vocab.json`` + ``merges.txt`` loading: the fast whole-file path and the error messages of the slow one.

Staff-only: ``tokenization/io.py`` is given code (no solution region), so its tests would pass
against the handout's stubs; the public suite checks the round trip through ``Tokenizer``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cs336_assignment.tokenization.io import bytes_to_string, load_bpe, save_bpe, string_to_bytes

pytestmark = pytest.mark.staff


def write(tmp_path: Path, vocab: dict[str, int], merges: str) -> tuple[Path, Path]:
    (tmp_path / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges, encoding="utf-8")
    return tmp_path / "vocab.json", tmp_path / "merges.txt"


@pytest.mark.parametrize("seed", range(3))
def test_load_gives_back_exactly_what_save_wrote(tmp_path: Path, seed: int) -> None:
    """Random tokens of any bytes (spaces, newlines, half characters) survive save + load, fast path taken."""
    rng = random.Random(seed)
    vocab = {i: bytes([i]) for i in range(256)}
    merges = []
    for _ in range(300):
        a, b = vocab[rng.randrange(len(vocab))], vocab[rng.randrange(len(vocab))]
        if a + b not in vocab.values():
            merges.append((a, b))
            vocab[len(vocab)] = a + b
    save_bpe(vocab, merges, tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert load_bpe(tmp_path / "vocab.json", tmp_path / "merges.txt") == (vocab, merges)
    assert all(string_to_bytes(bytes_to_string(t)) == t for t in vocab.values())


@pytest.mark.parametrize(
    ("vocab", "merges", "message"),
    [
        ({"a b": 0}, "#version: 0.2\n", r"vocab.json: token 'a b' has the character ' '"),
        (
            {"a": 0},
            "#version: 0.2\nĠa b c\n",
            r"merges.txt:2: expected two tokens separated by one space",
        ),
        ({"a": 0}, "#version: 0.2\nĠa\n", r"merges.txt:2: expected two tokens"),
        (
            {"a": 0},
            "#version: 0.2\nĠa b\nx\tz y\n",
            r"merges.txt:3: token 'x\\tz' has the character '\\t'",
        ),
        ({"a": 0}, "Ġa €\n", r"merges.txt:1: token '€' has the character '€'"),
    ],
)
def test_bad_files_name_the_file_line_and_character(
    tmp_path: Path, vocab: dict, merges: str, message: str
) -> None:
    """A file that is not in GPT-2's format is a ValueError that says where and what, not a wrong vocab."""
    with pytest.raises(ValueError, match=message):
        load_bpe(*write(tmp_path, vocab, merges))


def test_vocab_json_that_is_not_an_object_says_so(tmp_path: Path) -> None:
    (tmp_path / "vocab.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "merges.txt").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="holds a JSON list; expected an object"):
        load_bpe(tmp_path / "vocab.json", tmp_path / "merges.txt")
