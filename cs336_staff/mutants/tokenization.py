"""Mutants of the tokenization part: each a mistake students make with BPE, caught by the public tests."""

from __future__ import annotations

from cs336_staff.mutants import Mutant

PKG = "cs336_assignment/tokenization"
TRAIN_TESTS = ("tests/test_bpe_train.py",)
TOKENIZER_TESTS = ("tests/test_tokenizer.py",)

MUTANTS = [
    Mutant(
        name="bpe-ties-to-smaller-pair",
        file=f"{PKG}/train.py",
        old='return token.translate(_INVERT).decode("latin-1") + "\\u0100"',
        new='return token.decode("latin-1") + "\\x00"',
        why="breaks ties toward the lexicographically smaller pair (forgot heapq is a min-heap)",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-merges-across-special-tokens",
        file=f"{PKG}/pretokenize.py",
        old="segments = [text] if pattern is None else pattern.split(text)",
        new="segments = [text]",
        why="pre-tokenizes the text without first splitting it on special tokens, so '<|' and 'endoftext' get merged",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-ignores-pretoken-counts",
        file=f"{PKG}/train.py",
        old="            freqs.append(count)\n",
        new="            freqs.append(1)\n",
        why="counts each distinct pre-token once instead of weighting its pairs by how often it occurs",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="bpe-drops-stale-heap-entries",
        file=f"{PKG}/train.py",
        old="                heapq.heappush(heap, (-count, key, x, y))\n",
        new="                pass\n",
        why="throws away a heap entry whose count went down instead of re-queueing it at its true count",
        tests=TRAIN_TESTS,
    ),
    Mutant(
        name="decode-strict-utf8",
        file=f"{PKG}/tokenizer.py",
        old='return data.decode("utf-8", errors="replace")',
        new='return data.decode("utf-8")',
        why="decodes with errors='strict', so a model's output that splits a character crashes decode",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="special-tokens-not-longest-first",
        file=f"{PKG}/pretokenize.py",
        old="ordered = sorted(special_tokens, key=len, reverse=True)",
        new="ordered = list(special_tokens)",
        why="builds the special-token alternation in the given order, so a shorter token shadows a longer overlapping one",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-merges-leftmost-first",
        file=f"{PKG}/tokenizer.py",
        old="            best = min(rank)\n",
        new="            best = next((r for r in rank if r != no_merge), no_merge)\n",
        why="applies the leftmost mergeable pair first instead of the lowest-rank (earliest learned) merge",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-forgets-left-neighbour-pair",
        file=f"{PKG}/tokenizer.py",
        old="            if i > 0:\n                rank[i - 1] = ranks.get((ids[i - 1], ids[i]), no_merge)\n",
        new="",
        why="after a merge, recomputes the rank of the pair to its right but not of the pair to its left",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="encode-iterable-emits-unsettled-pretokens",
        file=f"{PKG}/tokenizer.py",
        old="settled = GPT2_REGEX.findall(text, start, end)[:-2]",
        new="settled = GPT2_REGEX.findall(text, start, end)",
        why="encodes each buffered piece completely, although the next piece can still change its last pre-tokens",
        tests=TOKENIZER_TESTS,
    ),
    Mutant(
        name="compression-ratio-inverted",
        file=f"{PKG}/simple.py",
        old='return len(text.encode("utf-8")) / len(ids)',
        new='return len(ids) / len(text.encode("utf-8"))',
        why="reports tokens per byte instead of bytes per token",
        tests=("tests/test_tokenization.py",),
    ),
    Mutant(
        name="byte-decode-strict-utf8",
        file=f"{PKG}/simple.py",
        old='return bytes(ids).decode("utf-8", errors="replace")',
        new='return bytes(ids).decode("utf-8")',
        why="the byte tokenizer's decode crashes on byte sequences that are not UTF-8",
        tests=("tests/test_tokenization.py",),
    ),
]
