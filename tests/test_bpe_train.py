"""BPE training: exact merges by hand, stored results on fixed corpora, special tokens, bad input, speed.

Merges worked out by hand pin the rule down on tiny texts. On the corpora in ``fixtures/corpora/``
(from ``fixtures/make_corpora.py``: a dozen scripts, emoji, code, ``<|endoftext|>`` between
documents and sometimes inside one) and on seeded random texts, the expected merges and vocab are
snapshots: the reference's results, which staff check against an independent trainer. No trainer
ships with the tests; to compare with one on your own texts, write ``train_bpe_slow`` first.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest
import regex

import adapters
from tests.bpe_snapshots import assert_same_bpe, bpe_arrays, explain_bpe, first_difference
from tests.fresh import fresh_corpora, replay_hint
from tests.scenarios import tokenization

CORPORA = Path(__file__).resolve().parents[1] / "fixtures" / "corpora"
EOT = "<|endoftext|>"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
RANDOM_ALPHABET = [*"aab bc\n  é🙂'", "'s", EOT]
RANDOM_SEEDS = range(10)
#: Timed calls of a speed test, each on its own fresh corpus: the best of them counts.
SPEED_CALLS = 5
T = TypeVar("T")


#: Corpora for parallel training, by what a careless cut of the file would break (see ``parallel_corpus``).
PARALLEL_KINDS = {
    "no-special-tokens": "ASCII words and punctuation, lines ending in '.\\n', no special token to cut before",
    "whitespace-runs": "words between runs of spaces, tabs and newlines ('\\n \\t\\n'): a cut after a newline splits a pre-token",
    "multi-byte-words": "words of 2-4 byte characters and single spaces, no newline: a fixed cut falls inside a character",
}


def parallel_corpus(kind: str, seed: int, size: int = 6_000) -> str:
    """About ``size`` bytes of seeded random words and separators of one of the ``PARALLEL_KINDS``.

    Almost every word and whitespace run occurs once, and training runs until no pair is left, so
    every pre-token count shows in the merges: a pre-token split in two by a cut changes them.
    """
    rng = random.Random(f"{kind}-{seed}")
    multi_byte = kind == "multi-byte-words"
    alphabet = "猫犬鳥魚馬牛羊яблокоñéüß🙂🌍" if multi_byte else "abcdefghijklmnopqrstuvwxyz"
    parts, length = [], 0
    while length < size:
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 9)))
        if kind == "whitespace-runs" and rng.random() < 0.3:
            separator = "".join(rng.choice(" \n\t") for _ in range(rng.randint(2, 7)))
        elif kind == "multi-byte-words":
            separator = " "
        else:
            separator = rng.choice([" "] * 6 + [", ", ".\n"])
        parts += [word, separator]
        length += len(word.encode("utf-8")) + len(separator)
    return "".join(parts)


def assert_is_a_trained_vocab(
    vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str]
) -> None:
    """Evidence that training happened (two results of the same garbage agree, trivially): the vocab holds
    the 256 single bytes and the special tokens, and every merge joins two non-empty tokens into one of it."""
    values = set(vocab.values())
    missing = [i for i in range(256) if bytes([i]) not in values]
    assert not missing, (
        f"the vocab lacks the single bytes {missing[:8]}...: it must start from all 256 byte values"
    )
    assert all(t.encode("utf-8") in values for t in special_tokens), (
        "the vocab lacks a special token"
    )
    for a, b in merges:
        assert a and b and a + b in values, (
            f"merge ({a!r}, {b!r}) does not join two tokens into one of the vocab"
        )


def random_case(seed: int) -> tuple[str, int]:
    """A seeded random text over a tiny alphabet (many ties, runs like "aaa", emoji, special tokens) and a vocab size."""
    rng = random.Random(seed)
    text = "".join(rng.choice(RANDOM_ALPHABET) for _ in range(rng.randint(20, 120)))
    return text, 257 + rng.randint(0, 40)


def test_train_bpe_learns_hand_computed_merges(tmp_path: Path) -> None:
    """On "low low low lower lowest<|endoftext|> low" the merges are exactly those worked out below.

    Pre-tokens (the special token only separates): "low" x1, " low" x3, " lower" x1, " lowest" x1.
      1. (l,o)=6 and (o,w)=6 tie; (b"o", b"w") > (b"l", b"o")          -> (o, w)
      2. (l,ow)=6                                                       -> (l, ow)
      3. ( ,low)=5                                                      -> ( , low)
      4. ( low,e)=2                                                     -> ( low, e)
      5. ( lowe,r)=( lowe,s)=(s,t)=1; b"s" > b" lowe"                   -> (s, t)
      6. ( lowe,r)=( lowe,st)=1; b"st" > b"r"                           -> ( lowe, st)
      7. ( lowe,r)=1                                                    -> ( lowe, r)
    Then no pair is left, so vocab_size=300 stops early at 256 + 7 merges + 1 special = 264 ids.
    """
    path = tmp_path / "low.txt"
    path.write_text(f"low low low lower lowest{EOT} low", encoding="utf-8")
    vocab, merges = adapters.run_train_bpe(path, 300, [EOT])
    expected = [
        (b"o", b"w"),
        (b"l", b"ow"),
        (b" ", b"low"),
        (b" low", b"e"),
        (b"s", b"t"),
        (b" lowe", b"st"),
        (b" lowe", b"r"),
    ]
    assert merges == expected, first_difference(merges, expected)
    expected_vocab = (
        {i: bytes([i]) for i in range(256)}
        | {256 + i: a + b for i, (a, b) in enumerate(expected)}
        | {263: EOT.encode()}
    )
    assert_same_bpe((vocab, merges), (expected_vocab, expected))


def test_train_bpe_breaks_ties_toward_the_greater_pair(tmp_path: Path) -> None:
    """ "ba ab": three pairs of count 1; (b,a) > (a,b) > ( ,a) as byte strings, so (b,a) merges first."""
    path = tmp_path / "tie.txt"
    path.write_text("ba ab", encoding="utf-8")
    _, merges = adapters.run_train_bpe(path, 259, [])
    assert merges == [(b"b", b"a"), (b"a", b"b"), (b" ", b"ab")], (
        f"got {merges}: among pairs of equal count the lexicographically GREATER pair of bytes wins"
    )


def test_train_bpe_keeps_carriage_returns(tmp_path: Path) -> None:
    """The corpus is read as bytes: "\\r\\n" and a lone "\\r" survive into the merges (no newline translation).

    "hi\\r\\n\\r\\nhi\\r\\n\\r\\nhi\\r\\r": pre-tokens "hi" x3, "\\r\\n\\r" x2 (a whitespace run leaves its last
    character to what follows), "\\n" x2, "\\r\\r" x1 (at the end).
      1. (h,i)=3                                                        -> (h, i)
      2. (\\r,\\n)=2 and (\\n,\\r)=2 tie; b"\\r" > b"\\n"                        -> (\\r, \\n)
      3. (\\r\\n,\\r)=2                                                     -> (\\r\\n, \\r)
      4. (\\r,\\r)=1                                                      -> (\\r, \\r)
    """
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"hi\r\n\r\nhi\r\n\r\nhi\r\r")
    _, merges = adapters.run_train_bpe(path, 300, [])
    expected = [(b"h", b"i"), (b"\r", b"\n"), (b"\r\n", b"\r"), (b"\r", b"\r")]
    assert merges == expected, (
        f"{first_difference(merges, expected)}. Read the corpus as bytes and decode them (or open it with "
        "newline=''): open(path, encoding='utf-8') translates \\r\\n and \\r into \\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DON'T DON'T DON'T", [(b"O", b"N"), (b"D", b"ON"), (b" ", b"DON")]),
        ("IT'S IT'S IT'S", [(b"I", b"T"), (b" ", b"IT")]),
    ],
)
def test_train_bpe_contractions_are_lowercase_only(tmp_path: Path, text: str, expected) -> None:
    """GPT-2's contraction rule is case-sensitive: "DON'T" pre-tokenizes as DON + ' + T, so (', T) never merges.

    "DON'T DON'T DON'T": pre-tokens "DON" x1, " DON" x2, "'" x3, "T" x3: (D,O)=(O,N)=3 tie, b"O" > b"D"
    -> (O, N); then (D,ON)=3; then ( ,DON)=2; nothing is left. A case-insensitive rule (GPT-4's
    pattern has one) would make "'T" a pre-token and learn (', T).
    """
    path = tmp_path / "shout.txt"
    path.write_bytes(text.encode("utf-8"))
    _, merges = adapters.run_train_bpe(path, 300, [])
    assert merges == expected, (
        f"on {text!r}: {first_difference(merges, expected)}. GPT-2's contractions ('s 't 're 've 'm 'll 'd) "
        "match lowercase only: use the pattern as given, without IGNORECASE"
    )


@pytest.mark.parametrize("kind", list(PARALLEL_KINDS))
def test_train_bpe_in_several_processes_equals_one_process(tmp_path: Path, kind: str) -> None:
    """Training in 2 or 3 processes gives exactly the single-process vocab and merges, wherever the file is cut.

    Corpora without special tokens, with long whitespace runs, and of multi-byte words without
    newlines (see ``PARALLEL_KINDS``); training runs until no pair is left, so a pre-token split by a
    cut shows up in the merges.
    """
    path = tmp_path / f"{kind}.txt"
    path.write_bytes(parallel_corpus(kind, seed=0).encode("utf-8"))
    vocab, merges = adapters.run_train_bpe(path, 10_000, [], num_processes=1)
    assert_is_a_trained_vocab(vocab, merges, [])
    for num_processes in (2, 3):
        assert_same_bpe(
            adapters.run_train_bpe(path, 10_000, [], num_processes=num_processes),
            (vocab, merges),
            f"{kind} ({PARALLEL_KINDS[kind]}) with num_processes={num_processes}; expected: the single-process result. "
            "Cut the file only where no pre-token can cross the cut: before a special token, or at a newline "
            "between two visible ASCII characters (pretokenize.find_chunk_boundaries does this)",
        )


def test_train_bpe_reads_the_file_afresh_each_time(tmp_path: Path) -> None:
    """Training, rewriting the file at the same path, training again: the second result is the new file's.

    "ab ab ab" learns (a,b)=3 then ( ,ab)=2; "cd cd cd" learns (c,d) then ( ,cd).
    """
    path = tmp_path / "corpus.txt"
    path.write_text("ab ab ab", encoding="utf-8")
    first = adapters.run_train_bpe(path, 300, [])[1]
    path.write_text("cd cd cd", encoding="utf-8")
    second = adapters.run_train_bpe(path, 300, [])[1]
    assert first == [(b"a", b"b"), (b" ", b"ab")], first_difference(
        first, [(b"a", b"b"), (b" ", b"ab")]
    )
    assert second == [(b"c", b"d"), (b" ", b"cd")], (
        f"after the file was rewritten, training on it again learned {second}: train_bpe must read the file "
        "each time it is called (no cache of the pre-token counts keyed by the path)"
    )


def test_train_bpe_numbers_special_tokens_in_the_order_given(tmp_path: Path) -> None:
    """Special tokens take the last ids in the order given, even when a later one is longer."""
    path = tmp_path / "pad.txt"
    path.write_text(f"a b<|pad|>ab{EOT}ba", encoding="utf-8")
    vocab, merges = adapters.run_train_bpe(path, 300, ["<|pad|>", EOT])
    ids = sorted(vocab)[-2:]
    last = [vocab[i] for i in ids]
    assert last == [b"<|pad|>", EOT.encode()], (
        f"ids {ids} are {last}; the special tokens get the last ids in the order given (['<|pad|>', EOT]), "
        "whatever order matching them needs"
    )


#: Letters and numbers beyond ASCII, where GPT-2's ``\\p{L}``/``\\p{N}`` and ``\\w``/``\\d`` cut differently:
#: superscripts and subscripts, fractions, Roman and circled numbers, a combining mark, ``_``, and scripts
#: without case whose vowel signs are marks, not letters.
UNICODE_TEXT = "x² + 3½, H₂O snake_case ¼! Ⅻ ① cafe\u0301s naïve देवनागरी ภาษาไทย 中文字 x²y\n"


def test_train_bpe_cuts_unicode_letters_and_numbers_where_gpt2_does(tmp_path: Path) -> None:
    """Trained until no pair is left, every pre-token of GPT-2's pattern is one token and no learned
    token spans two: letters are \\p{L} and numbers \\p{N}, not \\w and \\d (x² is x + ², " 3½" one number,
    a combining mark or a vowel sign no letter, ¼! a number and a punctuation mark)."""
    path = tmp_path / "unicode.txt"
    path.write_text(UNICODE_TEXT, encoding="utf-8", newline="")
    pretokens = {p.encode("utf-8") for p in regex.findall(GPT2_PATTERN, UNICODE_TEXT)}
    _, merges = adapters.run_train_bpe(path, 256 + len(UNICODE_TEXT.encode("utf-8")), [])
    learned = {a + b for a, b in merges}
    spanning = sorted(t for t in learned if not any(t in p for p in pretokens))
    assert not spanning, (
        f"learned {[t.decode('utf-8', errors='replace') for t in spanning[:5]]}, which cross a boundary of "
        "GPT-2's pre-tokens: letters are \\p{L} (no digits, marks or '_'), numbers \\p{N} (², ½ and Ⅻ too), "
        "not \\w and \\d"
    )
    missing = sorted(p for p in pretokens if len(p) > 1 and p not in learned)
    assert not missing, (
        f"trained until no pair was left, yet the pre-tokens "
        f"{[p.decode('utf-8', errors='replace') for p in missing[:5]]} never became tokens: they were cut "
        "where GPT-2's pattern does not cut (numbers are \\p{N}: ' 3½' is one pre-token)"
    )


def test_train_bpe_counts_a_special_token_given_twice_once(tmp_path: Path) -> None:
    """A special token repeated in ``special_tokens`` is one special token at its first place: one id,
    counted once in vocab_size, the same vocab and merges as the list without the repeat."""
    path = tmp_path / "twice.txt"
    path.write_text(f"a b<|pad|>ab{EOT}ba ab ab", encoding="utf-8")
    once = adapters.run_train_bpe(path, 262, [EOT, "<|pad|>"])
    twice = adapters.run_train_bpe(path, 262, [EOT, "<|pad|>", EOT])
    vocab, merges = twice
    assert list(vocab.values()).count(EOT.encode()) == 1, (
        f"{EOT!r}, given twice, has the ids {[i for i, t in vocab.items() if t == EOT.encode()]}: a repeated "
        "special token is one token with one id"
    )
    assert len(vocab) == 262 and len(merges) == 262 - 256 - 2, (
        f"vocab_size 262 with the special tokens {[EOT, '<|pad|>', EOT]} gave {len(vocab)} ids and {len(merges)} "
        "merges: the repeat counts once, so 2 special tokens and 4 merges"
    )
    assert_same_bpe(twice, once)


def test_train_bpe_matches_stored_merges_on_mini_corpus(snapshot) -> None:
    """mini.txt (multilingual, emoji, special tokens) at vocab 400: the stored merges and vocab."""
    vocab, merges = adapters.run_train_bpe(CORPORA / "mini.txt", 400, [EOT])
    snapshot.assert_match("train_bpe_mini_400", bpe_arrays(vocab, merges), explain=explain_bpe)


def test_train_bpe_matches_stored_merges_on_multilingual_corpus_in_two_processes(snapshot) -> None:
    """multilingual.txt (~135 KB) at vocab 300, split over two processes: the stored merges and vocab."""
    vocab, merges = adapters.run_train_bpe(
        CORPORA / "multilingual.txt", 300, [EOT], num_processes=2
    )
    snapshot.assert_match(
        "train_bpe_multilingual_300", bpe_arrays(vocab, merges), explain=explain_bpe
    )


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_train_bpe_matches_stored_merges_on_random_text(
    snapshot, tmp_path: Path, seed: int
) -> None:
    """Seeded random text over a tiny alphabet (many ties, repeats like "aaa", emoji, special tokens): the stored merges."""
    text, vocab_size = random_case(seed)
    path = tmp_path / "random.txt"
    path.write_bytes(text.encode("utf-8"))
    vocab, merges = adapters.run_train_bpe(path, vocab_size, [EOT])
    snapshot.assert_match(
        f"train_bpe_random_{seed}",
        bpe_arrays(vocab, merges),
        explain=lambda got, want: f"text={text!r}: " + explain_bpe(got, want),
    )


def test_train_bpe_never_merges_special_tokens() -> None:
    """With <|endoftext|> between and inside documents, no learned token holds any part of it."""
    vocab, merges = adapters.run_train_bpe(CORPORA / "multilingual.txt", 500, [EOT])
    assert vocab[len(vocab) - 1] == EOT.encode(), "the special token takes the last id"
    assert list(vocab.values()).count(EOT.encode()) == 1
    learned = [a + b for a, b in merges]
    leaked = [t for t in learned if b"<|" in t or b"|>" in t or b"endoftext" in t]
    assert not leaked, (
        f"tokens {leaked[:5]} come from the special token: split the text on special tokens before pre-tokenizing"
    )
    assert len(vocab) == 500


def test_train_bpe_of_an_empty_corpus_has_no_merges(tmp_path: Path) -> None:
    """An empty file gives the 256 bytes and the special tokens, and no merges."""
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    vocab, merges = adapters.run_train_bpe(path, 1000, [EOT])
    assert merges == []
    assert vocab == {i: bytes([i]) for i in range(256)} | {256: EOT.encode()}


@pytest.mark.parametrize(
    ("vocab_size", "special_tokens", "content", "match"),
    [
        (256, [EOT], "hello", "at least 257"),
        (100, [], "hello", "at least 256"),
        (300, [EOT, ""], "hello", "empty"),
        (300, [EOT], "caf\xe9".encode("latin-1"), "not valid UTF-8"),
    ],
    ids=[
        "vocab-without-room-for-special",
        "vocab-below-256",
        "empty-special-token",
        "latin-1-file",
    ],
)
def test_train_bpe_rejects_bad_input(
    tmp_path: Path, vocab_size, special_tokens, content, match
) -> None:
    """Bad arguments and non-UTF-8 files give a ValueError that says what is wrong."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ValueError, match=match):
        adapters.run_train_bpe(path, vocab_size, special_tokens)


def test_train_bpe_on_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    """A corpus path that does not exist is Python's FileNotFoundError (the type a caller catches), naming the file."""
    path = tmp_path / "no-such-corpus.txt"
    with pytest.raises(FileNotFoundError, match="no-such-corpus"):
        adapters.run_train_bpe(path, 300, [EOT])


def pair_table(path: Path, special_tokens: list[str]) -> Counter[bytes]:
    """The pre-tokens of a file and their counts, as UTF-8 byte strings (the table BPE training merges over)."""
    text = path.read_bytes().decode("utf-8")
    pieces = re.split("|".join(map(re.escape, special_tokens)), text) if special_tokens else [text]
    return Counter(
        token.encode("utf-8") for piece in pieces for token in regex.findall(GPT2_PATTERN, piece)
    )


#: How many times faster than recounting every pair after every merge ``train_bpe`` must be.
SPEEDUP = 4


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """``call()`` and the seconds it took, by this process's clock (a driver's or adapter's round trip)."""
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def test_train_bpe_is_several_times_faster_than_recounting_after_every_merge(
    tmp_path: Path,
) -> None:
    """train_bpe(corpus, 600) takes less time than a quarter of its merges' worth of full pair recounts.

    A trainer that recounts after every merge pays one recount per merge (about 1.3 with rewriting
    every word), so this is the docstring's "5x faster than a naive trainer", measured without
    shipping one; the hidden test compares with a naive trainer's results too. The baseline,
    ``tokenization.recount_pairs`` over the corpus's pre-token table, runs where train_bpe runs (in
    grading, beside your code), and both are timed here around one call each: the same conditions.
    The corpora are drawn fresh per run (``tests/fresh.py``: an untimed warm-up of both sides and
    ``SPEED_CALLS`` timed ones, distinct, the size of ``mini.txt``), so the best of the timed calls
    measures the trainer, not a cache of an earlier call; the best of each side counts, so a hiccup
    of the machine on either side decides nothing.
    """
    # enough merges that they, not the one pass of pre-tokenization, decide the time
    vocab_size = 600
    num_merges = vocab_size - 256 - 1
    recounts = round(num_merges / SPEEDUP)
    warmup, *corpora = fresh_corpora(
        tmp_path, 1 + SPEED_CALLS, documents=40, max_sentences=2, salt=1
    )
    # untimed: one-time costs (imports, lazy setup) are not speed
    adapters.run_train_bpe(warmup, vocab_size, [EOT])
    tokenization.recount_pairs(dict(pair_table(warmup, [EOT])), 1)
    ours, baseline = [], []
    for corpus in corpora:
        table = dict(pair_table(corpus, [EOT]))
        baseline.append(timed(partial(tokenization.recount_pairs, table, recounts))[1])
        (vocab, merges), seconds = timed(partial(adapters.run_train_bpe, corpus, vocab_size, [EOT]))
        assert_is_a_trained_vocab(vocab, merges, [EOT])
        ours.append(seconds)
    seconds, floor = min(ours), min(baseline)
    assert seconds <= floor, (
        f"train_bpe took {seconds:.3f} s for {num_merges} merges; recounting every pair after every merge would "
        f"take about {floor * num_merges / recounts:.3f} s ({recounts} recounts took {floor:.3f} s, timed now), "
        f"and train_bpe must be {SPEEDUP}x faster than that: {floor:.3f} s. Update pair counts incrementally "
        f"(only the words that contain the merged pair change) instead of recounting ({replay_hint()})"
    )
