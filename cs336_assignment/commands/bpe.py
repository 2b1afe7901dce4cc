"""Train a byte-level BPE tokenizer on a UTF-8 corpus and save it (GPT-2's file format).

    $ uv run cs336 train-bpe corpus.txt --vocab-size 10000 --special-token '<|endoftext|>' --out tok/
    $ ls tok/
    merges.txt  special_tokens.json  vocab.json

``cs336 encode --tokenizer tok/`` reads the directory back. An existing tokenizer in ``--out`` is
never overwritten unless ``--overwrite`` is given.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_assignment.commands import positive_int
from cs336_assignment.tokenization import train_bpe
from cs336_assignment.tokenization.io import save_bpe

FILES = ("vocab.json", "merges.txt", "special_tokens.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("corpus", type=Path, help="UTF-8 text file to train on")
    parser.add_argument(
        "--vocab-size", type=positive_int, required=True, help="bytes + merges + special tokens"
    )
    parser.add_argument(
        "--special-token",
        action="append",
        default=[],
        metavar="TOKEN",
        help="a special token, e.g. '<|endoftext|>' (repeat for several)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="directory for vocab.json, merges.txt, special_tokens.json",
    )
    parser.add_argument(
        "--num-processes",
        type=positive_int,
        default=None,
        help="pre-tokenization workers (default: one per core for big files)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a tokenizer already in --out"
    )


def run(args: argparse.Namespace) -> int:
    if not args.corpus.is_file():
        raise CommandError(f"corpus {args.corpus} is not a file")
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(
            f"--out {args.out} is a file; give a directory for {', '.join(FILES)} (e.g. tok/)"
        )
    existing = [name for name in FILES if (args.out / name).exists()]
    if existing and not args.overwrite:
        raise CommandError(
            f"{args.out} already holds {', '.join(existing)}; pass --overwrite or choose another --out"
        )
    start = time.perf_counter()
    try:
        vocab, merges = train_bpe(
            args.corpus,
            args.vocab_size,
            args.special_token,
            num_processes=args.num_processes,
            progress=True,
        )
    except ValueError as e:
        raise CommandError(e) from None
    args.out.mkdir(parents=True, exist_ok=True)
    save_bpe(vocab, merges, args.out / "vocab.json", args.out / "merges.txt")
    (args.out / "special_tokens.json").write_text(
        json.dumps(args.special_token, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    longest = max(vocab.values(), key=len, default=b"")
    print(
        f"{len(merges)} merges, vocab of {len(vocab)} in {time.perf_counter() - start:.1f} s -> {args.out}/ "
        f"(longest token: {longest!r})"
    )
    return 0
