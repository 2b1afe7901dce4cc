"""The stored BPE results the public tests compare with agree with an independent trainer.

``cs336 snapshots`` writes them from the reference; the public tests no longer ship a trainer of
their own (it would be a working solution), so this staff test is what keeps the snapshots honest:
each is recomputed by the naive full-recount trainer of ``tests/hidden/bpe_naive.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bpe_snapshots import assert_same_bpe, bpe_arrays, bpe_from_arrays
from tests.hidden.bpe_naive import naive_train_bpe
from tests.snapshot import read_npz, snapshot_dir
from tests.test_bpe_train import CORPORA, EOT, RANDOM_SEEDS, random_case
from tests.util import ROOT

pytestmark = pytest.mark.staff


def stored(test_file: str, name: str):
    return bpe_from_arrays(read_npz(snapshot_dir(ROOT / test_file) / f"{name}.npz"))


CORPUS_CASES = [
    ("tests/test_bpe_train.py", "train_bpe_mini_400", "mini.txt", 400),
    ("tests/test_bpe_train.py", "train_bpe_multilingual_300", "multilingual.txt", 300),
    ("tests/test_tokenizer.py", "train_bpe_multilingual_600", "multilingual.txt", 600),
]


@pytest.mark.parametrize(
    ("test_file", "name", "corpus", "vocab_size"), CORPUS_CASES, ids=[c[1] for c in CORPUS_CASES]
)
def test_corpus_snapshots_equal_the_naive_trainer(
    test_file: str, name: str, corpus: str, vocab_size: int
) -> None:
    """Each stored corpus result is exactly what the naive trainer learns."""
    vocab, merges = stored(test_file, name)
    assert_same_bpe((vocab, merges), naive_train_bpe(CORPORA / corpus, vocab_size, [EOT]), name)


def test_random_text_snapshots_equal_the_naive_trainer(tmp_path: Path) -> None:
    """Each stored random-text result is exactly what the naive trainer learns on that text."""
    for seed in RANDOM_SEEDS:
        text, vocab_size = random_case(seed)
        path = tmp_path / f"random{seed}.txt"
        path.write_bytes(text.encode("utf-8"))
        assert_same_bpe(
            stored("tests/test_bpe_train.py", f"train_bpe_random_{seed}"),
            naive_train_bpe(path, vocab_size, [EOT]),
            f"seed {seed}, text={text!r}",
        )


def test_arrays_round_trip() -> None:
    """bpe_arrays and bpe_from_arrays are inverses, for empty merges and bytes that are not UTF-8."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"\xe2\x82", 257: b"<|endoftext|>"}
    for merges in ([], [(b"\xe2", b"\x82")]):
        assert bpe_from_arrays(bpe_arrays(vocab, merges)) == (vocab, merges)
