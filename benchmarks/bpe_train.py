"""BPE training: our trainer vs HF ``tokenizers`` and ``rustbpe``, wall time and peak RSS, one run each.

    uv run python benchmarks/make_corpus.py                      # once: builds benchmarks/data/
    uv run python benchmarks/bpe_train.py                        # 90 MB and 5 MB, vocab 10,000
    uv run python benchmarks/bpe_train.py --corpus benchmarks/data/corpus-5mb.txt --vocab-size 10000

Each trainer runs in a child process of its own, so its peak RSS (``ru_maxrss`` from ``wait4``) is
its own (Linux starts a spawned child's ``ru_maxrss`` at the parent's RSS high-water mark, so this
parent stays small: it imports no trainer). All three see the same documents: the corpus split at ``<|endoftext|>``. HF ``tokenizers``
uses its ByteLevel pre-tokenizer (GPT-2's regex) and BPE trainer; ``rustbpe`` is given the GPT-2
pattern too. Ours is ``cs336_assignment.tokenization.train_bpe`` with its default process count.
Printed ratios are ours over the peer (lower is better for time and memory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SPECIAL = "<|endoftext|>"
DATA = Path(__file__).resolve().parent / "data"


def _documents(path: Path):
    text = path.read_text(encoding="utf-8")
    return [d for d in text.split(SPECIAL) if d.strip()]


def train_ours(path: Path, vocab_size: int) -> int:
    from cs336_assignment.tokenization import train_bpe

    vocab, merges = train_bpe(path, vocab_size, [SPECIAL])
    return len(vocab)


def train_hf(path: Path, vocab_size: int) -> int:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_documents(path), trainer)
    return tok.get_vocab_size()


def train_rustbpe(path: Path, vocab_size: int) -> int:
    import rustbpe

    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(_documents(path)), vocab_size - 1, pattern=GPT2_PATTERN)
    return tok.vocab_size + 1


TRAINERS = {"ours": train_ours, "hf-tokenizers": train_hf, "rustbpe": train_rustbpe}


def measure(name: str, corpus: Path, vocab_size: int) -> dict:
    """Run one trainer in a child process; return its wall time and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            name,
            "--corpus",
            str(corpus),
            "--vocab-size",
            str(vocab_size),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    assert proc.stdout is not None  # stdout=subprocess.PIPE
    out = proc.stdout.read()
    if status != 0:
        raise RuntimeError(f"{name} failed on {corpus} (status {status})")
    child = json.loads(out.strip().splitlines()[-1])
    return {
        "trainer": name,
        "wall_s": seconds,
        "train_s": child["seconds"],
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "vocab": child["vocab"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, action="append")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        corpus = args.corpus[0]
        start = time.perf_counter()
        vocab = TRAINERS[args.child](corpus, args.vocab_size)
        print(json.dumps({"seconds": time.perf_counter() - start, "vocab": vocab}))
        return
    corpora = args.corpus or [DATA / "corpus-90mb.txt", DATA / "corpus-5mb.txt"]
    for corpus in corpora:
        if not corpus.exists():
            sys.exit(
                f"{corpus} is missing: build it first with `uv run python benchmarks/make_corpus.py`"
            )
        load = os.getloadavg()[0]
        rows = [measure(name, corpus, args.vocab_size) for name in TRAINERS]
        print(
            f"\n{corpus.name} ({corpus.stat().st_size / 1e6:.1f} MB), vocab {args.vocab_size}, {os.cpu_count()} cores, "
            f"load average {load:.2f} before / {os.getloadavg()[0]:.2f} after"
        )
        print(f"{'trainer':<14} {'train s':>8} {'wall s':>8} {'peak RSS MB':>12}")
        for r in rows:
            print(
                f"{r['trainer']:<14} {r['train_s']:>8.2f} {r['wall_s']:>8.2f} {r['peak_rss_mb']:>12.0f}"
            )
        ours = rows[0]
        for peer in rows[1:]:
            print(
                f"ours / {peer['trainer']}: time x{ours['wall_s'] / peer['wall_s']:.2f}, peak RSS x{ours['peak_rss_mb'] / peer['peak_rss_mb']:.2f}"
            )


if __name__ == "__main__":
    main()
