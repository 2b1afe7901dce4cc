"""The staff's fast tokenizer (``fast_bpe.FastTokenizer``) gives exactly the readable ``Tokenizer``'s ids.

Staff-only: ``fast_bpe.py`` is left out of the handout (students write their own encoder), and the
reference ``Tokenizer`` never imports it: the public and hidden tests grade the readable one, while
``cs336 encode`` and the benchmarks use ``FastTokenizer``. Here ``BatchBPE`` and
``FastTokenizer._encode_pretoken`` are checked against the readable ``Tokenizer._encode_pretoken``
word by word (with thresholds lowered so that every code path runs on small inputs: padded buckets,
one-row groups, rows that never merge), on merge lists a trainer would never produce;
``FastTokenizer.encode`` and ``encode_iterable`` against ``Tokenizer``'s on the corpora with several
special-token setups, and on a long text against tiktoken with the fast path proven to have run.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from cs336_assignment.tokenization import Tokenizer, fast_bpe
from cs336_assignment.tokenization.fast_bpe import (
    BatchBPE,
    FastTokenizer,
    fill_cache,
    length_buckets,
)
from cs336_assignment.tokenization.pretokenize import GPT2_REGEX
from tests.hidden.bpe_naive import GPT2_PATTERN, naive_train_bpe

pytestmark = pytest.mark.staff

CORPORA = Path(__file__).resolve().parents[2] / "fixtures" / "corpora"
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    vocab, merges = naive_train_bpe(CORPORA / "multilingual.txt", 600, [EOT])
    return Tokenizer(vocab, merges, [EOT])


def batch_for(tok: Tokenizer, **kwargs) -> BatchBPE:
    """A batch over ``tok``'s merges whose fallback is ``FastTokenizer``'s one-by-one path."""
    fast = FastTokenizer(tok.vocab, tok.merges, tok.special_tokens)
    return BatchBPE(tok._ranks, tok._merged_ids, tok._byte_ids, fast._encode_pretoken, **kwargs)  # noqa: SLF001


def assert_same_as_readable(tok: Tokenizer, batch: BatchBPE, words: list[str]) -> None:
    """The batch and FastTokenizer's one-by-one path give the readable Tokenizer's ids for every word."""
    assert type(tok) is Tokenizer, "compare with the readable Tokenizer, not the fast one"
    got = batch(words)
    assert set(got) == set(words), "the batch must return exactly one entry per distinct word"
    one_by_one = FastTokenizer(tok.vocab, tok.merges, tok.special_tokens)._encode_pretoken  # noqa: SLF001
    for word in words:
        want = tok._encode_pretoken(word)  # noqa: SLF001
        assert got[word] == want, f"{word!r}: batch gives {got[word]}, the readable path {want}"
        assert one_by_one(word) == want, (
            f"{word!r}: FastTokenizer._encode_pretoken differs from the readable path"
        )
        assert all(type(i) is int for i in got[word]), (
            "ids must be Python ints (they go into a list[int])"
        )


def corpus_pretokens() -> list[str]:
    text = "".join(
        (CORPORA / name).read_bytes().decode("utf-8") for name in ("multilingual.txt", "mini.txt")
    )
    return list(
        dict.fromkeys(p for segment in text.split(EOT) for p in GPT2_REGEX.findall(segment))
    )


@pytest.mark.parametrize(("min_rows", "max_bytes"), [(1, 256), (1, 6), (48, 256), (10**9, 256)])
def test_batch_equals_readable_path_on_every_corpus_pretoken(
    tokenizer, min_rows: int, max_bytes: int
) -> None:
    """Every distinct pre-token of the fixture corpora, whichever mix of numpy rounds and fallbacks encodes it."""
    assert_same_as_readable(
        tokenizer, batch_for(tokenizer, min_rows=min_rows, max_bytes=max_bytes), corpus_pretokens()
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
        min_size=1,
        max_size=60,
    )
)
def test_batch_equals_readable_path_on_random_unicode(tokenizer, words: list[str]) -> None:
    """Random words of any script and length (padded rows of mixed lengths, rows that never merge)."""
    assert_same_as_readable(
        tokenizer, batch_for(tokenizer, min_rows=1, max_bytes=48), list(dict.fromkeys(words))
    )


@pytest.mark.parametrize("offset", [0, 40_000], ids=["int16-ids", "int32-ids"])
@pytest.mark.parametrize("seed", range(5))
def test_batch_equals_readable_path_with_hand_made_out_of_order_merges(
    seed: int, offset: int
) -> None:
    """Merges in an order no trainer would learn (a token merged before the merge that makes it) still agree.

    The readable path applies the lowest-rank pair first, one occurrence at a time; so must the batch
    (merging every occurrence of a pair in one round would differ here). Ids above 32,767 (offset)
    make the batch use int32 arrays instead of int16.
    """
    rng = random.Random(seed)
    vocab = {offset + i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    tokens = [b"a", b"b", b"c", b"ab", b"ba", b"aa"]
    for _ in range(40):
        a, b = rng.choice(tokens), rng.choice(tokens)
        if (a, b) not in merges and a + b not in vocab.values():
            merges.append((a, b))
            vocab[offset + len(vocab)] = a + b
            tokens.append(a + b)
    # Tokens used by a merge must be in the vocab: add the helpers that were never made by a merge.
    for extra in (b"ab", b"ba", b"aa"):
        if extra not in vocab.values():
            vocab[offset + len(vocab)] = extra
    merges = [m for m in merges if m[0] in vocab.values() and m[1] in vocab.values()]
    rng.shuffle(merges)
    tok = Tokenizer(vocab, merges)
    batch = batch_for(tok)
    want = np.int16 if offset == 0 else np.int32
    assert {batch.merged_ids.dtype, batch.values.dtype, batch.raw_ranks.dtype} == {np.dtype(want)}
    words = list(
        {"".join(rng.choice("abc") for _ in range(rng.randint(1, 30))) for _ in range(300)}
    )
    assert_same_as_readable(tok, batch_for(tok, min_rows=1), words)


def test_encode_of_a_long_text_takes_the_fast_path_and_matches_tiktoken(
    tokenizer, monkeypatch
) -> None:
    """FastTokenizer encoding a long text batches its new pre-tokens (spied), and the ids are tiktoken's."""
    calls: list[int] = []
    original = BatchBPE.__call__

    def spy(self, words):
        calls.append(len(words))
        return original(self, words)

    monkeypatch.setattr(BatchBPE, "__call__", spy)
    text = (CORPORA / "multilingual.txt").read_bytes().decode("utf-8")
    vocab = tokenizer.vocab
    special = {EOT: tokenizer.encode(EOT)[0]}
    oracle = tiktoken.Encoding(
        name="ours",
        pat_str=GPT2_PATTERN,
        mergeable_ranks={t: i for i, t in vocab.items() if i not in special.values()},
        special_tokens=special,
    )
    fresh = FastTokenizer(dict(vocab), list(tokenizer.merges), [EOT])
    assert fresh.encode(text) == oracle.encode(text, allowed_special="all")
    assert calls and max(calls) >= fast_bpe.MIN_BATCH, (
        f"the fast path did not run (batches: {calls})"
    )


def test_fill_cache_batches_only_many_new_pretokens_and_respects_the_size_bound(
    tokenizer, monkeypatch
) -> None:
    """A few new pre-tokens are left to the cache's one-by-one path; a full cache is emptied, never overgrown."""
    monkeypatch.setattr(fast_bpe, "MIN_BATCH", 200)
    batch = batch_for(tokenizer)
    words = corpus_pretokens()
    assert len(words) > 2 * fast_bpe.MIN_BATCH, (
        "the fixture corpora should hold enough distinct pre-tokens"
    )
    cache: dict[str, list[int]] = {}
    fill_cache(cache, words[: fast_bpe.MIN_BATCH - 1], batch, max_size=10**6)
    assert cache == {}, "below MIN_BATCH new pre-tokens, fill_cache must leave them to the cache"
    fill_cache(cache, words * 2, batch, max_size=10**6)
    assert len(cache) == len(words)
    cache = {"stale": [0]}
    size = fast_bpe.MIN_BATCH + 10
    fill_cache(cache, words[:size], batch, max_size=size)
    assert "stale" not in cache and len(cache) == size, (
        "a cache that would pass max_size is emptied first"
    )
    assert all(cache[w] == tokenizer._encode_pretoken(w) for w in words[:size])  # noqa: SLF001
    cache = {}
    fill_cache(cache, words, batch, max_size=len(words) - 1)
    assert cache == {}, (
        "more distinct pre-tokens than max_size: batching them would overgrow the cache"
    )


def test_length_buckets_cover_every_length_once() -> None:
    """Every byte length up to max_bytes falls in exactly one bucket; lengths up to 16 get their own."""
    for max_bytes in (1, 8, 16, 64, 256):
        ends = length_buckets(max_bytes)
        assert ends == sorted(set(ends)) and ends[-1] == max_bytes
        assert ends[: min(16, max_bytes)] == list(range(1, min(16, max_bytes) + 1))


def test_batch_without_a_fallback_says_what_it_needs() -> None:
    """A small group with no encode_one is a ValueError naming min_rows, not a silent wrong answer."""
    batch = BatchBPE({(108, 111): 0}, [256], list(range(256)), encode_one=None, min_rows=4)
    with pytest.raises(ValueError, match="min_rows"):
        batch(["lo"])


def test_batch_with_no_merges_gives_the_bytes() -> None:
    """A tokenizer without merges (vocab = the 256 bytes) encodes every word to its bytes, padded rows included."""
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    words = ["a", "héllo", " world", "日本語のテキスト", "x" * 40]
    got = batch_for(tok, min_rows=1)(words)
    assert got == {w: list(w.encode("utf-8")) for w in words}


# Special-token setups: none, the usual one, two that overlap (the longer must win), and tokens
# that never occur in the text next to ones that do.
SPECIAL_SETUPS = {
    "none": [],
    "eot": [EOT],
    "overlapping": [EOT, EOT + EOT, "<|end"],
    "absent-and-present": ["<|pad|>", EOT, " the"],
}


def setup_text(name: str) -> str:
    """A corpus, with doubled end-of-text tokens and a few odd pieces spliced in."""
    text = (CORPORA / name).read_bytes().decode("utf-8")
    return text.replace(EOT, EOT + EOT, 3) + " <|end the  end\r\n\t 😀x" + EOT


@pytest.mark.parametrize("corpus", ["mini.txt", "multilingual.txt"])
@pytest.mark.parametrize("setup", SPECIAL_SETUPS)
def test_fast_tokenizer_gives_the_readable_tokenizers_ids(
    tokenizer, monkeypatch, corpus: str, setup: str
) -> None:
    """encode, encode_iterable and decode of FastTokenizer equal the readable Tokenizer's (batch forced on)."""
    monkeypatch.setattr(fast_bpe, "MIN_BATCH", 16)  # the small corpora still go through the batch
    specials = SPECIAL_SETUPS[setup]
    readable = Tokenizer(tokenizer.vocab, tokenizer.merges, specials)
    fast = FastTokenizer(tokenizer.vocab, tokenizer.merges, specials)
    assert fast.vocab == readable.vocab and fast._special_ids == readable._special_ids  # noqa: SLF001
    text = setup_text(corpus)
    want = readable.encode(text)
    assert fast.encode(text) == want
    assert fast.encode(text) == want, "a second encode (warm cache) must give the same ids"
    pieces = [text[i : i + 997] for i in range(0, len(text), 997)]
    assert list(fast.encode_iterable(pieces)) == want
    assert fast.decode(want) == readable.decode(want)


def test_fast_tokenizer_from_files_and_the_cli_loader(tmp_path, tokenizer) -> None:
    """from_files keeps the subclass, and `cs336 encode`'s loader gives the fast tokenizer."""
    from cs336_assignment.commands.encode import load_tokenizer

    tokenizer.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "special_tokens.json").write_text(f'["{EOT}"]', encoding="utf-8")
    assert (
        type(FastTokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT]))
        is FastTokenizer
    )
    loaded = load_tokenizer(tmp_path)
    assert type(loaded) is FastTokenizer
    text = setup_text("mini.txt")
    assert loaded.encode(text) == tokenizer.encode(text)
