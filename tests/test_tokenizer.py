"""The BPE Tokenizer: tiktoken as the oracle for encode, round trips, streaming, special tokens, files, CLI.

The oracle is a ``tiktoken.Encoding`` built here from the merges BPE training learns on
``fixtures/corpora/multilingual.txt`` at vocab 600 (stored as a snapshot, so the Tokenizer is
graded even before ``train_bpe`` works): mergeable ranks ``{token bytes: id}``, GPT-2's pattern,
the same special tokens. tiktoken applies the lowest-rank merge first, as BPE encoding must.
Your Tokenizer is built from plain data (``tokenization.BPE``: vocab, merges, special tokens) and
run by the drivers in ``tests/scenarios/tokenization.py``; the oracles run here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import cast

import numpy as np
import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import adapters
from tests.bpe_snapshots import bpe_arrays, bpe_from_arrays, explain_bpe, first_difference
from tests.scenarios import tokenization
from tests.snapshot import read_npz, snapshot_dir

CORPORA = Path(__file__).resolve().parents[1] / "fixtures" / "corpora"
EOT = "<|endoftext|>"
VOCAB_SIZE = 600
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TRAINED = "train_bpe_multilingual_600"


def _read(path: Path) -> str:
    """The file's text with its line endings as they are (Path.read_text would turn "\r\n" into "\n")."""
    return path.read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def trained() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Vocab and merges of multilingual.txt at vocab 600, from the stored snapshot (not from your train_bpe)."""
    return bpe_from_arrays(read_npz(snapshot_dir(Path(__file__)) / f"{TRAINED}.npz"))


def test_train_bpe_matches_stored_merges_on_multilingual_corpus_at_600(snapshot) -> None:
    """train_bpe on multilingual.txt at vocab 600 learns the stored merges the other tests here encode with."""
    vocab, merges = adapters.run_train_bpe(CORPORA / "multilingual.txt", VOCAB_SIZE, [EOT])
    snapshot.assert_match(TRAINED, bpe_arrays(vocab, merges), explain=explain_bpe)


@pytest.fixture(scope="module")
def bpe(trained) -> tokenization.BPE:
    """What your Tokenizer is built from in most tests here: the trained vocab and merges, <|endoftext|> special."""
    vocab, merges = trained
    return tokenization.BPE(vocab, merges, [EOT])


@pytest.fixture(scope="module")
def oracle(trained) -> tiktoken.Encoding:
    vocab, _ = trained
    special = {EOT: VOCAB_SIZE - 1}
    ranks = {token: i for i, token in vocab.items() if i not in special.values()}
    return tiktoken.Encoding(
        name="ours", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special
    )


def id_difference(got: list[int], want: list[int], decode: Callable[[list[int]], str]) -> str:
    """Where two id sequences first differ, with the text the ids around there stand for (``decode``: the
    oracle's; ``?`` where it does not know an id)."""

    def text(ids: list[int]) -> str:
        try:
            return repr(decode(ids))
        except Exception:  # an id the oracle does not know: the message must still come out
            return "?"

    n = next(
        (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )
    if n == len(got) == len(want):
        return "the ids are equal"
    return (
        f"{len(got)} ids, expected {len(want)}; first difference at position {n}: got {got[n : n + 5]} "
        f"({text(got[n : n + 5])}), expected {want[n : n + 5]} ({text(want[n : n + 5])}), "
        f"after the text {text(want[max(0, n - 8) : n])}"
    )


def decoding(
    vocab: dict[int, bytes], special_tokens: Iterable[str] = ()
) -> Callable[[list[int]], str]:
    """Decode through ``vocab`` (the test's copy) and the special tokens it lacks at the ids the Tokenizer's
    docstring gives them (after the largest), for failure messages: an unknown id shows as U+FFFD."""
    table = dict(vocab)
    for token in special_tokens:
        if token.encode() not in table.values():
            table[max(table) + 1] = token.encode()
    return lambda ids: b"".join(table.get(i, "\ufffd".encode()) for i in ids).decode(
        "utf-8", errors="replace"
    )


STRINGS = [
    "",
    "Hello, world! It's a test; they'll see.",
    "The cat sat on the warm windowsill and watched the rain.",
    "Der Hund läuft schnell über die grüne Wiese.",
    "今天天气很好，我们去公园散步吧。 猫が窓のそばで寝ています。",
    "Family photo 👨‍👩‍👧‍👦 with grandma 👵🏽 🐕🐕🐕",
    "   leading spaces, trailing spaces   ",
    "a\n\n\nb\n  \n c\t\td\r\n",
    f"one{EOT}two {EOT} three{EOT}{EOT}",
    "numbers 1234567890 3.14159 #497497",
    "def f(x):\n    return x ** 2 + 1",
    "unseen words: xylophone zygote qwertyuiop",
    "DON'T SHOUT: IT'S LOUD, WE'LL HEAR, YOU'RE, I'VE, I'M, HE'D. Don'T mIx 'S",
]


@pytest.mark.parametrize("text", STRINGS)
def test_encode_matches_tiktoken(bpe, oracle, text: str) -> None:
    """encode gives the same ids as tiktoken built from our merges, and decode gives the text back."""
    encoded, extended = tokenization.round_trips(bpe, [text, text + "!"])
    expected = oracle.encode(text, allowed_special="all")
    assert encoded.ids == expected, (
        f"encode({text!r}) = {encoded.ids}, tiktoken gives {expected}: "
        + id_difference(encoded.ids, expected, oracle.decode)
    )
    assert encoded.decoded == text
    assert extended.decoded == text + "!", "decode(encode(s)) must give s back"


@settings(max_examples=60, deadline=None)
@given(text=st.lists(st.text(max_size=20) | st.just(EOT), max_size=4).map("".join))
def test_encode_matches_tiktoken_on_random_unicode(bpe, oracle, text: str) -> None:
    """On arbitrary Unicode (any script, combining marks, controls, now and then <|endoftext|>) encode
    matches tiktoken and round-trips.

    The tokenizer treats <|endoftext|> as its special token wherever it occurs, so the oracle is told to
    do the same (allowed_special="all"); hypothesis also draws the module's string constants, EOT among them.
    """
    (encoded,) = tokenization.round_trips(bpe, [text])
    want = oracle.encode(text, allowed_special="all")
    assert encoded.ids == want, (
        f"encode({text!r}) = {encoded.ids}, tiktoken gives {want}: "
        + id_difference(encoded.ids, want, oracle.decode)
    )
    assert encoded.decoded == text


def test_encode_corpus_round_trips_and_compresses(bpe, oracle) -> None:
    """The whole training corpus: same ids as tiktoken, exact round trip, and well over 1 byte per token (many scripts: ~1.9 at vocab 600)."""
    text = _read(CORPORA / "multilingual.txt")
    (encoded,) = tokenization.round_trips(bpe, [text])
    ids, want = encoded.ids, oracle.encode(text, allowed_special="all")
    assert ids == want, "encode of the corpus differs from tiktoken: " + id_difference(
        ids, want, oracle.decode
    )
    assert encoded.decoded == text, "decode(encode(corpus)) is not the corpus"
    ratio = adapters.run_compression_ratio(text, ids)
    assert ratio == pytest.approx(len(text.encode("utf-8")) / len(ids)) and ratio > 1.5, (
        f"compression ratio {ratio}"
    )


@pytest.mark.parametrize(
    "text", ["DON'T", "IT'S LOUD", "WE'LL, YOU'RE", "Don'T it's", "don't", "I'M 'Sun'"]
)
def test_contractions_are_lowercase_only_as_in_tiktoken(text: str) -> None:
    """GPT-2's pattern is case-sensitive: with merges (', T), (', t), ... in the vocab, "DON'T" still encodes as
    DON + ' + T (the merge (', T) cannot apply across pre-tokens), as tiktoken does; "don't" uses (', t)."""
    pairs = [
        (b"'", b"T"),
        (b"'", b"t"),
        (b"'", b"S"),
        (b"'", b"s"),
        (b"'", b"L"),
        (b"'L", b"L"),
        (b"'", b"R"),
        (b"'R", b"E"),
    ]
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in pairs:
        vocab[len(vocab)] = a + b
    oracle = tiktoken.Encoding(
        name="contractions",
        pat_str=GPT2_PATTERN,
        mergeable_ranks={t: i for i, t in vocab.items()},
        special_tokens={},
    )
    (encoded,) = tokenization.round_trips(tokenization.BPE(vocab, pairs), [text])
    ids, expected = encoded.ids, oracle.encode(text)
    assert ids == expected, (
        f"encode({text!r}) = {[vocab[i] for i in ids]}, tiktoken gives {[vocab[i] for i in expected]}: GPT-2's "
        "contractions ('s 't 're 've 'm 'll 'd) match lowercase only, so \"'T\" is two pre-tokens; use the pattern "
        "as given, without IGNORECASE"
    )


def test_merges_apply_by_rank_not_left_to_right() -> None:
    """With merges [(b,c), (a,b)], "abc" is [a, bc]: the lower-rank (earlier) merge wins even though (a,b) comes first."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"ab"}
    bpe = tokenization.BPE(vocab, [(b"b", b"c"), (b"a", b"b")])
    abc, abd = tokenization.round_trips(bpe, ["abc", "abd"])
    assert abc.ids == [ord("a"), 256], (
        "apply merges in the order they were learned (lowest rank first)"
    )
    assert abd.ids == [257, ord("d")]


@pytest.mark.parametrize(
    ("ids", "expected"),
    [([0xE2, 0x82], "\ufffd"), ([ord("a"), 0xFF, ord("b")], "a\ufffdb"), ([0xF0, 0x9F], "\ufffd")],
    ids=["truncated-euro", "invalid-byte", "half-emoji"],
)
def test_decode_replaces_invalid_utf8(bpe, ids: list[int], expected: str) -> None:
    """Ids whose bytes are not UTF-8 decode to U+FFFD (errors='replace'): a model can emit anything."""
    assert tokenization.decode(bpe, ids) == expected


def test_overlapping_special_tokens_match_longest_first(trained) -> None:
    """With <|endoftext|> and <|endoftext|><|endoftext|> both special, the double one wins where it occurs."""
    vocab, merges = trained
    double = EOT + EOT
    text = f"a{double}b{EOT}c"
    encoded, alone = tokenization.round_trips(
        tokenization.BPE(vocab, merges, [EOT, double]), [text, double]
    )
    ids = encoded.ids
    eot_id = VOCAB_SIZE - 1
    assert eot_id in ids, "the single special token keeps its id"
    double_ids = [i for i in ids if i >= VOCAB_SIZE]
    assert len(double_ids) == 1 and ids.count(eot_id) == 1, (
        f"got {ids}: '<|endoftext|><|endoftext|>' must be ONE token (match special tokens longest first)"
    )
    assert encoded.decoded == text
    assert alone.ids == double_ids and alone.decoded == double, (
        f"'<|endoftext|><|endoftext|>' alone encodes to {alone.ids}, which decode to {alone.decoded!r}: a special "
        "token missing from vocab gets a new id that decodes to it"
    )


def test_special_token_text_without_special_tokens_is_ordinary_text(trained) -> None:
    """A tokenizer without special tokens encodes '<|endoftext|>' as ordinary bytes, never as the special id."""
    vocab, merges = trained
    (encoded,) = tokenization.round_trips(tokenization.BPE(vocab, merges), [f"a{EOT}b"])
    assert VOCAB_SIZE - 1 not in encoded.ids
    assert encoded.decoded == f"a{EOT}b"


def _pieces(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text), rng.randint(0, 40))))
    return [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=False)]


@settings(max_examples=40, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            ["a", "b", " ", "  ", "\n", "'", "l", "s", "🙂", "é", "1", EOT, "<|", "end"]
        ),
        max_size=80,
    ).map("".join),
    seed=st.integers(0, 2**16),
)
def test_encode_iterable_equals_encode_however_the_text_is_cut(bpe, text: str, seed: int) -> None:
    """encode_iterable over any cut of the text into pieces gives exactly encode(whole text).

    Cuts fall inside whitespace runs ("\\n" + "  b"), contractions ("'" + "ll") and special tokens
    ("<|end" + "oftext|>"): encoding piece by piece would get these wrong.
    """
    pieces = _pieces(text, random.Random(seed))
    streamed = tokenization.stream(bpe, pieces, also_encode=True)
    assert streamed.ids == streamed.whole, (
        f"pieces={pieces!r}: encode_iterable gave other ids than encode"
    )
    assert streamed.decoded == text, (
        f"decode(encode_iterable(pieces)) is not the text: pieces={pieces!r}"
    )


#: Special tokens of which one is a prefix of another, and where to end pieces: between the two halves.
NESTED_SPECIALS = {
    "double-endoftext": ([EOT, EOT + EOT], EOT, EOT),
    "endoftext-then-bang": (["<|s|>", "<|s|>!", EOT], "<|s|>", "!"),
}


def pieces_ending_between(left: str, right: str, blocks: int, seed: int) -> list[str]:
    """Seeded text cut into pieces that each end with ``left`` and (but the first) start with ``right``.

    Every piece boundary falls between the halves of ``left + right``, so wherever a streaming encoder
    settles its buffer (after any number of pieces), it holds ``left`` with ``right`` still to come.
    """
    rng = random.Random(seed)
    fillers = [
        "the cat sat",
        " on the mat",
        "\n\n  it's",
        " 猫 🙂",
        f" lone {left} here",
        "'ll  ",
        "12 34",
    ]
    pieces = ["start " + left]
    for _ in range(blocks):
        pieces.append(right + "".join(rng.choice(fillers) for _ in range(rng.randint(1, 4))) + left)
    pieces.append(right + " end")
    return pieces


@pytest.mark.parametrize("case", list(NESTED_SPECIALS))
def test_encode_iterable_equals_encode_when_pieces_end_between_nested_special_tokens(
    trained, case: str
) -> None:
    """With one special token a prefix of another (<|endoftext|>, <|endoftext|><|endoftext|>), pieces that end
    between the halves of the longer one still give exactly encode(whole text), over ~100 KB of text."""
    specials, left, right = NESTED_SPECIALS[case]
    vocab, merges = trained
    pieces = pieces_ending_between(left, right, blocks=3000, seed=0)
    text = "".join(pieces)
    streamed = tokenization.stream(
        tokenization.BPE(vocab, merges, specials), pieces, also_encode=True
    )
    got, want = streamed.ids, streamed.whole
    assert got == want, (
        f"special tokens {specials}, pieces ending between {left!r} and {right!r}: encode_iterable differs from "
        f"encode: {id_difference(got, cast(list[int], want), decoding(vocab, specials))}. A special token at the end of the buffer "
        "may be the start of a longer one: hold back as many characters as the LONGEST special token before "
        "settling it"
    )
    assert streamed.decoded == text, "decode(encode_iterable(pieces)) is not the text"


#: Texts of each kind of pre-token a stream can settle too early when a piece ends inside it.
CUT_KINDS = {
    "contraction-t": "I don't know, it's hers",
    "contraction-ll-ve-re": "they'll go; we've been, you're",
    "numbers": "pi 3.14159 and 2026!",
    "spaces-before-words": "a  word   here",
    "whitespace-runs": "end.\n\n   next\t\tline \n",
    "punctuation": "wait?!... (yes) --",
    "non-latin": "naïve 猫猫 🙂🙂 слово",
    "special-token": f"ab{EOT}cd{EOT}{EOT} e",
}
#: A word of the filler: one id in ``cut_tokenizer``.
FILLER_WORD = " " + "z" * 64
#: Separates the copies of a text in a stream: long enough (16 KiB) that a stream which settles its
#: buffer once it holds that much does so at the end of every piece, and only 258 ids.
FILLER = "\n" + FILLER_WORD * 256 + "\n"


def cut_vocab(texts: list[str]) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A vocabulary whose merges join every adjacent pair of bytes in ``texts`` (so where a pre-token ends
    shows in the ids) and make each word of the filler one id."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []

    def merge(a: bytes, b: bytes) -> None:
        if (a, b) not in merges:
            merges.append((a, b))
            vocab[len(vocab)] = a + b

    for text in texts:
        data = text.encode("utf-8")
        for a, b in zip(data, data[1:], strict=False):
            merge(bytes([a]), bytes([b]))
    z = b"z"
    while len(z) < 64:
        merge(z, z)
        z += z
    merge(b" ", z)
    return vocab, merges


def cut_tokenizer(
    texts: list[str], special_tokens: list[str]
) -> tuple[tokenization.BPE, tiktoken.Encoding]:
    """What your tokenizer over ``cut_vocab(texts)`` is built from, and tiktoken's (the oracle) over the same merges."""
    vocab, merges = cut_vocab(texts)
    specials = {t: len(vocab) + i for i, t in enumerate(special_tokens)}
    oracle = tiktoken.Encoding(
        name="cuts",
        pat_str=GPT2_PATTERN,
        mergeable_ranks={t: i for i, t in vocab.items()},
        special_tokens=specials,
    )
    return tokenization.BPE(vocab, merges, special_tokens), oracle


def pieces_cut_at_every_position(text: str) -> list[str]:
    """Copies of ``text`` between fillers, the k-th copy cut at character k: each piece ends at a cut."""
    pieces = [FILLER]
    for k in range(len(text) + 1):
        pieces[-1] += text[:k]
        pieces.append(text[k:] + FILLER)
    return pieces


@pytest.mark.parametrize("kind", list(CUT_KINDS))
def test_encode_iterable_equals_encode_when_cut_at_every_position(kind: str) -> None:
    """For each kind of pre-token (contractions, numbers, spaces before words, whitespace runs, punctuation,
    other scripts, special tokens), a stream whose pieces end at every position of the text gives exactly
    encode(whole text) (tiktoken's, over the same merges): a stream must not settle a pre-token that the
    next piece could still extend."""
    text = CUT_KINDS[kind]
    assert "z" not in text
    bpe, oracle = cut_tokenizer(list(CUT_KINDS.values()), [EOT])
    pieces = pieces_cut_at_every_position(text)
    got = tokenization.stream(bpe, pieces).ids
    want = oracle.encode("".join(pieces), allowed_special="all")
    if got != want:
        at = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
            min(len(got), len(want)),
        )
        copy = oracle.decode(want[:at]).count(FILLER) - 1
        cut = f"{text[:copy]!r} | {text[copy:]!r}" if 0 <= copy <= len(text) else "?"
        pytest.fail(
            f"{kind}: encode_iterable differs from encode where a piece ended at {cut}: "
            f"{id_difference(got, want, oracle.decode)}. Hold back the end of the buffer that more text could still "
            "change (the last pre-tokens, a possible start of a special token) until the next piece comes"
        )


@pytest.mark.parametrize(
    "ids",
    [
        list(range(300, 556)) + [10, 11],  # the bytes at 300-555, the merges below them
        [556 - 2 * i for i in range(256)] + [1, 3],  # the bytes at even ids, backwards
    ],
    ids=["bytes-above-merges", "bytes-backwards"],
)
def test_vocab_whose_single_byte_ids_are_not_the_byte_values(ids: list[int]) -> None:
    """A vocabulary may number its single bytes otherwise than by their values (from another trainer):
    encode gives the vocabulary's ids, decode reads them back, and a new special token gets an unused id."""
    vocab = dict(zip(ids, [bytes([b]) for b in range(256)] + [b"hi", b" hi"], strict=True))
    byte_id = {t: i for i, t in vocab.items()}
    bpe = tokenization.BPE(vocab, [(b"h", b"i"), (b" ", b"hi")], ["<|sep|>"])
    hi, ok, sep_alone, both = tokenization.round_trips(
        bpe, ["hi hi!\n", "ok", "<|sep|>", "hi hi!\n<|sep|>"]
    )
    want = [byte_id[b"hi"], byte_id[b" hi"], byte_id[b"!"], byte_id[b"\n"]]
    assert hi.ids == want, (
        f"encode('hi hi!\\n') = {hi.ids}, expected the vocabulary's ids {want}: a single byte's id is the id vocab "
        "gives it, not the byte's value (map bytes to ids through the vocabulary)"
    )
    assert ok.ids == [byte_id[b"o"], byte_id[b"k"]] and ok.decoded == "ok", (
        f"encode('ok') = {ok.ids}, which decode to {ok.decoded!r}: decode must look ids up in the vocabulary"
    )
    assert len(sep_alone.ids) == 1, (
        f"the special token '<|sep|>' must encode to one id, got {sep_alone.ids}"
    )
    (sep,) = sep_alone.ids
    assert sep not in vocab, (
        f"the new special token got id {sep}, already taken by {vocab.get(sep)!r}"
    )
    assert both.ids == want + [sep] and both.decoded == "hi hi!\n<|sep|>", (
        f"encode('hi hi!\\n<|sep|>') = {both.ids}, which decode to {both.decoded!r}"
    )


def test_decode_rejects_an_unknown_id_with_a_value_error(bpe) -> None:
    """Decoding an id the vocabulary does not have is a ValueError (not a KeyError) naming the id."""
    with pytest.raises(ValueError, match=r"\b600\b.*not in the vocabulary"):
        tokenization.decode(bpe, [5, 600, 7])
    with pytest.raises(ValueError, match=r"-1\b.*not in the vocabulary"):
        tokenization.decode(bpe, [-1])


@pytest.mark.parametrize(
    ("vocab", "merges", "match"),
    [
        ({i: bytes([i]) for i in range(1, 256)}, [], r"must contain all 256 bytes"),
        ({i: bytes([i]) for i in range(256) if i != ord("a")} | {256: b"a"}, [], None),
        ({i: bytes([i]) for i in range(256)}, [(b"x", b"y")], r"must all be in vocab"),
        (
            {i: bytes([i]) for i in range(256)} | {256: b"ab"},
            [(b"a", b"b"), (b"ab", b"c")],
            r"must all be in vocab",
        ),
    ],
    ids=["missing-byte-0", "byte-a-at-another-id", "unknown-merge", "merge-result-missing"],
)
def test_tokenizer_rejects_bad_vocab_and_merges_with_a_value_error(vocab, merges, match) -> None:
    """A vocab without every single byte, or a merge whose parts or result are not in vocab, is a ValueError
    at construction with the documented message (a vocab whose bytes have other ids is fine)."""
    bpe = tokenization.BPE(vocab, merges)
    if match is None:
        assert tokenization.round_trips(bpe, ["a"])[0].ids == [256]
        return
    with pytest.raises(ValueError, match=match) as raised:
        tokenization.round_trips(bpe, [])
    if merges:
        rank, (a, b) = len(merges) - 1, merges[-1]
        named = f"merge {rank} {(a, b)!r}"
        assert named in str(raised.value) and repr(a + b) in str(raised.value), (
            f"the message should name the merge as {named!r} and its result {a + b!r}, got: {raised.value}"
        )


def test_new_special_tokens_get_ids_that_collide_with_none_when_vocab_ids_have_gaps() -> None:
    """Special tokens missing from vocab get fresh ids, distinct and unused, also when the ids are not 0..n-1.

    The vocab has ids 0-255 and 257-259 (256 is missing, as when a token was removed), so len(vocab)
    is 259: the id of b"abc", not a free one.
    """
    vocab = {i: bytes([i]) for i in range(256)} | {257: b"ab", 258: b" ab", 259: b"abc"}
    merges = [(b"a", b"b"), (b" ", b"ab"), (b"ab", b"c")]
    specials, existing = ["<|a|>", "<|b|>"], set(vocab)
    *alone, ordinary, mixed = tokenization.round_trips(
        tokenization.BPE(vocab, merges, specials), [*specials, "abc ab", "abc<|a|><|b|>"]
    )
    special_ids = [e.ids for e in alone]
    assert all(len(ids) == 1 for ids in special_ids), (
        f"each special token must encode to one id, got {special_ids}"
    )
    (a_id,), (b_id,) = special_ids
    taken = sorted({a_id, b_id} & existing)
    assert a_id != b_id and not taken, (
        f"new special tokens got ids {a_id} and {b_id}; {taken or 'they'} "
        f"{'are already taken in vocab' if taken else 'are the same id'}. Give each new special token an id after "
        "the LARGEST id (max(vocab) + 1, then the next), not len(vocab): ids may have gaps"
    )
    assert ordinary.ids == [259, 258], (
        "the ordinary tokens keep their ids when special tokens are added"
    )
    assert mixed.ids == [259, a_id, b_id] and mixed.decoded == "abc<|a|><|b|>", (
        f"encode('abc<|a|><|b|>') = {mixed.ids}, which decode to {mixed.decoded!r}"
    )


def test_vocab_holding_the_same_bytes_twice_and_a_special_token_given_twice() -> None:
    """The same bytes under two ids: an ordinary token (a byte, a merge's result) encodes to its lowest id, a
    special token to its highest, and every id decodes; a special token given twice is one token, one id."""
    vocab = {i: bytes([i]) for i in range(256)} | {
        256: b"ab",
        257: b"<|e|>",
        300: b"ab",
        301: b"<|e|>",
        302: b"a",
    }
    bpe = tokenization.BPE(vocab, [(b"a", b"b")], ["<|n|>", "<|e|>", "<|n|>", "<|e|>"])
    texts = ["ab", "a", "<|e|>", "<|n|>", "ab<|n|>a<|e|><|n|>"]
    ab, a, e, n, mixed = tokenization.round_trips(bpe, texts)
    assert (ab.ids, a.ids) == ([256], [97]), (
        f"encode('ab') = {ab.ids}, encode('a') = {a.ids}: b'ab' has the ids 256 and 300, b'a' 97 and 302; an "
        "ordinary token encodes to the LOWEST of its ids (keep the first id when inverting vocab, not the last)"
    )
    assert e.ids == [301], (
        f"encode('<|e|>') = {e.ids}: b'<|e|>' has the ids 257 and 301; a special token encodes to the HIGHEST"
    )
    assert n.ids == [303], (
        f"encode('<|n|>') = {n.ids}: the one new special token gets max(vocab) + 1 = 303, once: given twice, "
        "it is one special token with one id"
    )
    assert mixed.ids == [256, 303, 97, 301, 303] and mixed.decoded == texts[-1], (
        f"encode({texts[-1]!r}) = {mixed.ids}, decoded {mixed.decoded!r}; expected [256, 303, 97, 301, 303]"
    )
    every = [256, 300, 257, 301, 302, 97, 303]
    assert tokenization.decode(bpe, every) == "abab<|e|><|e|>aa<|n|>", (
        f"decode({every}) = {tokenization.decode(bpe, every)!r}: every id of the vocab decodes to its bytes"
    )


def test_building_a_tokenizer_leaves_the_callers_vocab_alone(trained) -> None:
    """Adding special tokens that are not in vocab changes the tokenizer's own vocab, not the dict it was given
    (nor the merges and special-token lists it was given)."""
    vocab, merges = trained
    # one new token, shortest first: sorting them longest first (as matching needs) changes their order
    specials = ["<|new|>", EOT]
    changed = tokenization.arguments_changed_by_building(tokenization.BPE(vocab, merges, specials))
    if "vocab" in changed:
        before, after = changed["vocab"]
        added = {i: after[i] for i in set(after) - set(before)}
        pytest.fail(
            f"building a tokenizer changed the vocab dict it was given (added {added}): copy it "
            "(self.vocab = dict(vocab)) before adding special tokens"
        )
    assert not changed, (
        "building a tokenizer changed the lists it was given: "
        + "; ".join(
            f"merges: {first_difference(after, before)}"
            if name == "merges"
            else f"{name} was {before!r}, became {after!r}"
            for name, (before, after) in changed.items()
        )
        + ". Work on a copy (list(...)) of what you sort or extend"
    )


def test_encode_iterable_of_file_lines_equals_encode(bpe, oracle) -> None:
    """Streaming a file line by line ("a\\n" then "  b": whitespace crosses lines) gives encode(whole file)."""
    text = _read(CORPORA / "multilingual.txt")
    streamed = tokenization.stream(bpe, text.splitlines(keepends=True))
    got, want = streamed.ids, oracle.encode(text, allowed_special="all")
    assert got == want, (
        "encode_iterable(lines) differs from encode(text): "
        + id_difference(got, want, oracle.decode)
        + "; a pre-token may continue across a line break (whitespace runs), so hold back the end of each piece"
    )
    assert streamed.decoded == text, "decode(encode_iterable(lines)) is not the file"


def test_encode_iterable_streams_are_independent(bpe, oracle) -> None:
    """Each encode_iterable call has its own buffer: a stream abandoned midway leaves nothing behind for the
    next one, and two streams advanced in turns each give encode() of their own text."""
    text = _read(CORPORA / "multilingual.txt")
    first, second = text[:24_000], text[24_000:48_000]
    streams = tokenization.abandoned_and_interleaved_streams(
        bpe, first.splitlines(keepends=True), second.splitlines(keepends=True), taken=10
    )
    want_first, want_second = (oracle.encode(t, allowed_special="all") for t in (first, second))
    hint = "; keep a stream's unsettled text in a local variable of encode_iterable, not on the tokenizer (self)"
    assert streams.after_abandoned == want_second, (
        "after a stream was abandoned midway, a new stream over another text gave other ids than encode: "
        + id_difference(streams.after_abandoned, want_second, oracle.decode)
        + hint
    )
    assert streams.first == want_first and streams.second == want_second, (
        "two streams advanced in turns gave other ids than encode: "
        + id_difference(
            *(
                (streams.first, want_first)
                if streams.first != want_first
                else (streams.second, want_second)
            ),
            oracle.decode,
        )
        + hint
    )
    assert streams.decoded == (first, second), "decoding a stream's ids does not give its text back"


#: Text an ``encode_iterable`` stream may hold read but not yet given out as ids (1 MiB).
STREAM_BUDGET = 1 << 20
#: Ids taken from the stream of the big file: the first ones, then stretches, after each of which the
#: test measures how much text the stream held.
FIRST_IDS, STRETCH_IDS, STRETCHES = 100, 4096, 8


def test_encode_iterable_is_lazy_with_bounded_memory(bpe, oracle, trained, tmp_path: Path) -> None:
    """Encoding a 3 MB file through encode_iterable never holds more than 1 MB of its text.

    The file is the multilingual corpus repeated, fed in groups of lines from a counting iterator,
    which notes how many groups your stream has taken when the first ids come out and after each
    later stretch of ids: from those, the test works out how much text was read but not yet given
    out as ids.
    """
    corpus = _read(CORPORA / "multilingual.txt")
    path = tmp_path / "big.txt"
    with open(path, "w", encoding="utf-8", newline="") as f:
        for _ in range(24):
            f.write(corpus)
    size = path.stat().st_size
    assert size > 3 * STREAM_BUDGET
    expected_first = oracle.encode(corpus[:2000], allowed_special="all")[:FIRST_IDS]
    streamed = tokenization.stream(bpe, path, [FIRST_IDS] + [STRETCH_IDS] * STRETCHES)
    assert streamed.lazy, "encode_iterable must return a lazy iterator (use yield), not a list"
    first = streamed.stretches[0]
    assert first == expected_first
    # read[k]: the characters in the first k groups of lines, the pieces the driver fed
    read = [0, *itertools.accumulate(map(len, tokenization.line_groups(path)))]
    read_at_first = read[streamed.taken[0]]
    assert read_at_first < STREAM_BUDGET, (
        f"the first {FIRST_IDS} ids came out only after encode_iterable had read {read_at_first / 2**20:.2f} MiB "
        f"of a {size / 2**20:.1f} MiB file: yield the ids of settled text as you read; keep only a small buffer"
    )
    # characters per id, approximately (a character split over two ids counts once per part)
    lengths = {i: len(t.decode("utf-8", errors="replace")) for i, t in trained[0].items()}
    given = itertools.accumulate(sum(lengths.get(i, 0) for i in ids) for ids in streamed.stretches)
    most_held = max(read[taken] - chars for taken, chars in zip(streamed.taken, given, strict=True))
    assert most_held < STREAM_BUDGET, (
        f"encode_iterable held {most_held / 2**20:.2f} MiB of text read but not yet given out as ids, "
        f"on a {size / 2**20:.1f} MiB file; keep only a small buffer"
    )
    decoded = streamed.decoded.rstrip("\ufffd")  # the last id taken may end inside a character
    assert decoded and (corpus * 24).startswith(decoded), (
        f"the ids given decode to {decoded[:40]!r}..., not a start of the file"
    )


@pytest.mark.parametrize(
    "tokens", [[b" ", b"\n"], [b"\xe2\x82", b"\xac"], [b"a b", b"\r\n\t"], [b"#version", b" 0.2"]]
)
def test_saved_files_round_trip_any_bytes(trained, tmp_path: Path, tokens: list[bytes]) -> None:
    """save then from_files gives back the same vocab and merges, even for spaces, newlines and half characters."""
    vocab, merges = trained
    vocab = dict(vocab)
    # Extra merges over awkward bytes: spaces, newlines, split UTF-8, and a look-alike of the header line.
    extra = []
    for token in tokens:
        for a, b in [(token[:1], token[1:])] if len(token) > 1 else []:
            for part in (a, b):
                if part not in vocab.values():
                    vocab[len(vocab)] = part
            extra.append((a, b))
            vocab[len(vocab)] = token
    text = "x" + "".join(t.decode("utf-8", errors="replace") for t in tokens) + EOT
    saved = tokenization.saved_and_loaded(
        tokenization.BPE(vocab, merges + extra, [EOT]), tmp_path, text
    )
    assert saved.loaded_vocab == saved.vocab, (
        "from_files read back another vocab than the one saved"
    )
    assert saved.loaded_merges == merges + extra, (
        "from_files read back other merges than those saved: "
        + first_difference(saved.loaded_merges, merges + extra)
    )
    assert saved.loaded_ids == saved.ids, (
        "the loaded tokenizer encodes the text otherwise than the one saved"
    )
    assert saved.loaded_decoded == text, "the loaded tokenizer does not round-trip the text"


def test_cli_trains_then_encodes_to_a_memmappable_array(tmp_path: Path) -> None:
    """`cs336 train-bpe` then `cs336 encode` give a uint16 .npy whose ids equal Tokenizer.encode of the file."""
    corpus = CORPORA / "mini.txt"
    out = tmp_path / "tok"
    assert (
        adapters.run_cs336(
            [
                "train-bpe",
                str(corpus),
                "--vocab-size",
                "300",
                "--special-token",
                EOT,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert (
        adapters.run_cs336(["train-bpe", str(corpus), "--vocab-size", "300", "--out", str(out)])
        == 2
    ), "must not overwrite a tokenizer"
    npy = tmp_path / "mini.npy"
    assert (
        adapters.run_cs336(["encode", str(corpus), "--tokenizer", str(out), "--out", str(npy)]) == 0
    )
    ids = np.load(npy, mmap_mode="r")
    assert ids.dtype == np.uint16
    vocab, merges = adapters.run_train_bpe(corpus, 300, [EOT])
    (encoded,) = tokenization.round_trips(tokenization.BPE(vocab, merges, [EOT]), [_read(corpus)])
    expected = encoded.ids
    assert ids.tolist() == expected
    npy2 = tmp_path / "mini2.npy"
    assert (
        adapters.run_cs336(
            [
                "encode",
                str(corpus),
                "--tokenizer",
                str(out),
                "--out",
                str(npy2),
                "--num-processes",
                "2",
            ]
        )
        == 0
    )
    assert np.load(npy2).tolist() == expected, (
        "parallel encoding must give the same ids as streaming"
    )


#: Letters and numbers beyond ASCII, where GPT-2's \p{L} (letters of every script) and \p{N} (every number)
#: differ from \w (letters, decimal digits and '_'; marks too in the regex module) and \d (decimal digits).
UNICODE_CLASSES = {
    "superscripts and subscripts": "x² + y² = z², H₂O",
    "fractions and numerals": "½ cup, 3½ cups, ¼! Ⅻ, ⅻ, ① ②",
    "combining marks": "cafe\u0301 vs café, nai\u0308ve",
    "vowel signs of scripts without case": "हिन्दी ที่นี่",
    "scripts without case, other digits": "日本語のテキスト עברית ١٢٣ العربية",
    "underscore and letter-like signs": "snake_case x_1 µm ªº ᵃᵇ",
}


def neighbour_vocab(text: str) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Merges that make every character of ``text`` one token, then join every two neighbouring characters
    that are not whitespace: a pair is joined exactly where no pre-token boundary falls between them (and
    no earlier merge took one of them), so the ids show where the text was cut into pre-tokens."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []

    def merge(a: bytes, b: bytes) -> None:
        if (a, b) not in merges:
            merges.append((a, b))
            vocab[len(vocab)] = a + b

    for char in dict.fromkeys(text):
        data = char.encode("utf-8")
        for k in range(1, len(data)):
            merge(data[:k], data[k : k + 1])
    for a, b in itertools.pairwise(text):
        if not a.isspace() and not b.isspace():
            merge(a.encode("utf-8"), b.encode("utf-8"))
    return vocab, merges


def test_encode_cuts_unicode_letters_and_numbers_where_gpt2_does() -> None:
    r"""Pre-tokenization uses GPT-2's classes: \p{L} is a letter of any script, \p{N} any number (x² is x + ²,
    3½ is one number, a combining accent is not part of the letter before it, '_' is not a letter): encode
    matches tiktoken with GPT-2's pattern on superscripts, fractions, numerals, combining marks, scripts without
    case and '_', over a vocab that merges every two neighbouring characters."""
    wrong = []
    for kind, text in UNICODE_CLASSES.items():
        vocab, merges = neighbour_vocab(text)
        oracle = tiktoken.Encoding(
            name="neighbours",
            pat_str=GPT2_PATTERN,
            mergeable_ranks={t: i for i, t in vocab.items()},
            special_tokens={},
        )
        (encoded,) = tokenization.round_trips(tokenization.BPE(vocab, merges), [text])
        want = oracle.encode(text)
        if encoded.ids != want:
            pieces = [
                vocab[i].decode("utf-8", errors="replace") if i in vocab else "?"
                for i in encoded.ids
            ]
            wrong.append(
                (
                    kind,
                    f"{kind}: encode({text!r}) gives the tokens {pieces}, tiktoken gives "
                    f"{[vocab[i].decode('utf-8') for i in want]} (GPT-2's pre-tokens: {regex.findall(GPT2_PATTERN, text)})",
                )
            )
    assert not wrong, (
        f"encode cuts {', '.join(kind for kind, _ in wrong)} into other pre-tokens than GPT-2's pattern: "
        "\\p{L} is a letter of any script (not a digit, a combining mark or '_'), \\p{N} any number (², ₂, ½, "
        "Ⅻ, ① as well as 0-9), which \\w and \\d are not (\\w also takes digits, '_' and, in the regex module, "
        "marks; \\d only decimal digits): use the pattern as given, with the regex module. With a merge for "
        "every two neighbouring characters, the tokens show where the text was cut:\n  "
        + "\n  ".join(detail for _, detail in wrong)
    )
