# STAFF-ONLY: FastTokenizer, the staff's fast path for cs336 encode and the benchmarks; the handout leaves this file out.
"""BPE on many pre-tokens at once, with numpy: ``FastTokenizer``, the staff's fast ``Tokenizer``.

``FastTokenizer`` (at the end) is the reference ``Tokenizer`` with this fast path; ``cs336 encode``
and the benchmarks use it, while the readable ``Tokenizer`` (what students write) stays as it is in
``tokenizer.py``. ``FastTokenizer._encode_pretoken`` is the one-by-one path: one pre-token at a
time, one merge per turn of a Python loop (7-12 µs per distinct pre-token of English text on our
VM). A long text brings tens of thousands of distinct pre-tokens the cache has not seen; here they
are encoded together, with the same rule and the same ids, in whole-array steps::

    pre-tokens of about the same byte length -> one (rows, width) array of ids, a row each,
                                   short rows padded on the right with an id that never merges
    rank[r, c]                  =  merge rank of the pair (ids[r, c], ids[r, c + 1]), or no_merge
    each round, in every row:      c = argmin(rank[r])  (the leftmost lowest-rank pair),
                                   ids[r, c:c + 2] -> the merged id  (every row loses one column),
                                   re-rank the pairs at c - 1 and c  (the only ones that changed)
    a row whose lowest rank is no_merge is finished, and leaves the array

Every row still in the array merges once per round, so the padding stays on the right and the
array narrows by one column a round. Ranks come from ``searchsorted`` over the sorted pair keys,
except a group's first ones: pairs of raw bytes, read from a 257 x 257 table (byte 256 = padding). Lengths up to 16 bytes get a group each (no padding at
all); longer ones share groups about 1.4x wide (``length_buckets``).

>>> ranks = {(108, 111): 0, (256, 119): 1}             # (l, o) -> "lo" (id 256), (lo, w) -> "low" (257)
>>> batch = BatchBPE(ranks, merged_ids=[256, 257], byte_ids=list(range(256)), encode_one=None, min_rows=1)
>>> result = batch(["low", "lot", "owl"])
>>> result["low"], result["lot"], result["owl"]
([257], [256, 116], [111, 119, 108])

A group is worth numpy rounds only when it has enough rows (each round costs tens of numpy calls,
whatever the row count): smaller groups, and pre-tokens longer than ``MAX_BYTES``, go through
``encode_one`` (the one-by-one path). On the 71,010 distinct pre-tokens of the 5 MB benchmark
corpus the batch takes about half the one-by-one path's time; the rest of a cold ``encode`` (the
regex, hashing 1.2 million pre-tokens) is unchanged. ``tests/staff/test_fast_bpe.py`` checks that
both paths agree with the readable ``Tokenizer``, on random words, on hand-made merge lists and on
the corpora.

Deliberately left out: merging every occurrence of the best pair in one round (fewer rounds for a
run like ``"======"``, but equal to the rule only when no merge outranks the merges that built its
two tokens, which a hand-made merge list need not respect); a hash table instead of
``searchsorted`` for pair ranks (no faster in our A/B runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from itertools import chain, pairwise, repeat

import numpy as np

from .pretokenize import GPT2_REGEX
from .tokenizer import CACHE_SIZE, Tokenizer, _gc_paused

#: Pre-tokens longer than this (in UTF-8 bytes) are encoded one by one.
MAX_BYTES = 256
#: A group of same-length pre-tokens is encoded in numpy rounds when it has at least this many rows.
MIN_ROWS = 48
#: ``FastTokenizer.encode`` works through a long text this many pre-tokens at a time (whole segments
#: between special tokens): the new ones of a window are encoded in one batch.
ENCODE_WINDOW = 1 << 19
#: ``fill_cache`` uses the batch only when at least this many distinct pre-tokens are new.
MIN_BATCH = 1024


def length_buckets(max_bytes: int) -> list[int]:
    """Upper ends of the byte-length buckets: each length up to 16, then about 1.4x wider buckets.

    >>> length_buckets(64)
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 22, 30, 42, 58, 64]
    """
    ends = list(range(1, min(16, max_bytes) + 1))
    while ends[-1] < max_bytes:
        ends.append(min(max_bytes, int(ends[-1] * 1.4)))
    return ends


class BatchBPE:
    """``batch(words)`` is ``{word: encode_one(word) for word in words}``, computed a length at a time.

    ``ranks`` maps a pair of ids to its merge rank; merge ``rank`` makes ``merged_ids[rank]``;
    ``byte_ids[b]`` is the id of the single byte ``b``.
    """

    def __init__(
        self,
        ranks: dict[tuple[int, int], int],
        merged_ids: list[int],
        byte_ids: list[int],
        encode_one: Callable[[str], list[int]] | None,
        min_rows: int = MIN_ROWS,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.no_merge = len(merged_ids)
        self.encode_one = encode_one
        self.min_rows, self.max_bytes = min_rows, max_bytes
        # Key of the pair (a, b): a * base + b. ``pad`` fills short rows; no pair holding it has a rank.
        self.pad = max([*merged_ids, *byte_ids, *(max(pair) for pair in ranks)]) + 1
        self.base = self.pad + 1
        self.bucket_ends = np.asarray(length_buckets(max_bytes))
        # The narrowest integers that hold every id and rank: less memory to move each round.
        dtype = next(
            t
            for t in (np.int16, np.int32, np.int64)
            if max(self.base, self.no_merge) < np.iinfo(t).max
        )
        self.merged_ids = np.asarray(merged_ids, dtype=dtype)
        self.byte_ids = np.asarray(byte_ids, dtype=dtype)
        keys = np.fromiter((a * self.base + b for a, b in ranks), dtype=np.int64, count=len(ranks))
        order = np.argsort(keys)
        # A sentinel key above every real one keeps searchsorted's answer a valid index.
        self.keys = np.append(keys[order], np.iinfo(np.int64).max)
        values = np.fromiter(ranks.values(), dtype=dtype, count=len(ranks))[order]
        # (np.append(x, int) is int64)
        self.values = np.append(values, np.asarray(self.no_merge, dtype=dtype))
        # Ids and first ranks by raw byte (256 = padding): a group starts with table lookups, no search.
        self.raw_ids = np.append(self.byte_ids, np.asarray(self.pad, dtype=dtype))
        raw = np.arange(257)
        self.raw_ranks = self.rank_of(
            self.raw_ids[raw[:, None]], self.raw_ids[raw[None, :]]
        ).ravel()

    def rank_of(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Merge rank of each pair ``(left[i], right[i])``; ``no_merge`` where there is none."""
        query = left.astype(np.int64) * self.base + right
        at = np.searchsorted(self.keys, query)
        return np.where(self.keys[at] == query, self.values[at], self.no_merge)

    def __call__(self, words: list[str]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        encoded = [w.encode("utf-8") for w in words]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        bucket = np.searchsorted(self.bucket_ends, lengths)  # len(bucket_ends) for the longest
        order = np.argsort(bucket, kind="stable")
        cuts = np.flatnonzero(np.diff(bucket[order])) + 1
        word_array = np.array(words, dtype=object)
        for group in np.split(order, cuts):
            if len(group) < self.min_rows or bucket[group[0]] == len(self.bucket_ends):
                if self.encode_one is None:
                    raise ValueError(
                        f"{len(group)} pre-token(s) need encode_one (min_rows={self.min_rows})"
                    )
                out.update((words[i], self.encode_one(words[i])) for i in group.tolist())
                continue
            valid = lengths[group]
            data = np.frombuffer(b"".join([encoded[i] for i in group.tolist()]), dtype=np.uint8)
            raw = np.full((len(group), int(valid.max())), 256, dtype=np.int32)
            # Row r holds its valid[r] bytes on the left, then padding (256: its pairs have no rank).
            row = np.repeat(np.arange(len(group)), valid)
            raw[row, np.arange(len(data)) - np.repeat(np.cumsum(valid) - valid, valid)] = data
            rank = self.raw_ranks.take(raw[:, :-1] * 257 + raw[:, 1:])
            self._merge_rows(self.raw_ids.take(raw), rank, valid, word_array[group], out)
        return out

    def _merge_rows(
        self,
        ids: np.ndarray,
        rank: np.ndarray,
        valid: np.ndarray,
        words: np.ndarray,
        out: dict[str, list[int]],
    ) -> None:
        """Merge every row of ``ids`` (the bytes of ``words``, ``valid`` of them; ``rank`` of their pairs) into ``out``."""
        while True:
            rows, width = ids.shape
            if width == 1:
                out.update(zip(words.tolist(), ids.tolist(), strict=True))
                return
            # Flat indices (row * row length + column) let numpy's take/put skip 2-D fancy indexing.
            start = np.arange(0, rows * (width - 1), width - 1)
            col = rank.argmin(axis=1)
            best = rank.take(start + col)
            active = best < self.no_merge
            if not active.all():
                done = ~active
                finished = ids[done].tolist()
                if (valid[done] < width).any():  # strip the padding
                    finished = [r[:n] for r, n in zip(finished, valid[done].tolist(), strict=True)]
                out.update(zip(words[done].tolist(), finished, strict=True))
                if not active.any():
                    return
                ids, rank, col, best, words, valid = (
                    ids[active],
                    rank[active],
                    col[active],
                    best[active],
                    words[active],
                    valid[active],
                )
                rows = len(ids)
                start = np.arange(0, rows * (width - 1), width - 1)
            # Merge: column col takes the merged id, column col + 1 goes (the rest move left).
            keep = np.ones(rows * width, dtype=bool)
            # row r starts at r * width = start[r] + r
            keep[start + np.arange(rows) + col + 1] = False
            ids = ids.ravel()[keep].reshape(rows, width - 1)
            ids.put(start + col, self.merged_ids.take(best))
            valid = valid - 1
            if width == 2:
                rank = rank[:, :0]
                continue
            # Rank column col goes too (its pair is merged)...
            keep = np.ones(rows * (width - 1), dtype=bool)
            keep[start + col] = False
            rank = rank.ravel()[keep].reshape(rows, width - 2)
            # ... except the pairs beside the merge, (col - 1, col) and (col, col + 1), which are new.
            # Clipped to the row, the two columns may coincide: both still hold a new pair.
            left, right = np.maximum(col - 1, 0), np.minimum(col, width - 3)
            # in ids, rows are width - 1 long
            at_ids = np.concatenate([start + left, start + right])
            # in rank, width - 2
            at_rank = at_ids - np.concatenate([np.arange(rows), np.arange(rows)])
            rank.put(at_rank, self.rank_of(ids.take(at_ids), ids.take(at_ids + 1)))


def fill_cache(
    cache: MutableMapping[str, list[int]], pretokens: Iterable[str], batch: BatchBPE, max_size: int
) -> None:
    """Put the encoding of every distinct pre-token missing from ``cache`` into it, in one batch.

    Does nothing when fewer than ``MIN_BATCH`` are missing (the cache fills them one by one on
    lookup, which is cheaper for a few). A cache that would outgrow ``max_size`` is emptied first;
    when the pre-tokens alone are more than ``max_size``, nothing is batched, so the cache never
    holds more than ``max_size`` entries (its own one-by-one filling keeps that bound).
    """
    distinct = set(pretokens)
    missing = distinct.difference(cache)
    if len(missing) < MIN_BATCH or len(distinct) > max_size:
        return
    if len(cache) + len(missing) > max_size:
        cache.clear()
        missing = distinct
    cache.update(batch(list(missing)))


class FastTokenizer(Tokenizer):
    """``Tokenizer`` with the staff's speed-ups: the same ids, about twice as fast on a long text with a cold cache.

    Used by ``cs336 encode`` (``commands/encode.py`` loads it in a STAFF-ONLY block) and the
    benchmarks. Three overrides, nothing else:

    - ``encode`` works through a long text in windows of ``ENCODE_WINDOW`` pre-tokens (whole
      segments between special tokens) and encodes the window's new pre-tokens in one
      ``BatchBPE`` call before looking every pre-token up (``fill_cache``);
    - ``_encode_pretoken`` (the cache's fallback, and the batch's for small groups) keeps the
      rank of every adjacent pair in a list and, after a merge, recomputes only the two pairs
      beside it; ``min`` and ``index`` scan that list in C;
    - ``_encode_ordinary`` looks the pre-tokens up with ``map`` and ``chain`` (a loop in C).

    ``tests/staff/test_fast_bpe.py`` checks that it gives the readable ``Tokenizer``'s ids.
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
    ) -> None:
        super().__init__(vocab, merges, special_tokens)
        self._batch = BatchBPE(self._ranks, self._merged_ids, self._byte_ids, self._encode_pretoken)

    def _encode_pretoken(self, pretoken: str) -> list[int]:
        """``Tokenizer._encode_pretoken``, with the pair ranks kept in a list and updated beside each merge.

        ``rank[i]`` is the rank of the pair ``(ids[i], ids[i + 1])`` (``no_merge`` if it is none).
        Each round merges the leftmost occurrence of the lowest rank and recomputes only the two
        pairs next to it.
        """
        ranks, no_merge = self._ranks, len(self._merged_ids)
        # map runs these loops in C: ids = [byte_ids[b] for b in ...], rank = [ranks.get(p, no_merge) for p in ...]
        ids = list(map(self._byte_ids.__getitem__, pretoken.encode("utf-8")))
        rank = list(map(ranks.get, pairwise(ids), repeat(no_merge)))
        while rank:
            best = min(rank)
            if best == no_merge:
                break
            i = rank.index(best)
            ids[i : i + 2] = (self._merged_ids[best],)
            del rank[i]
            if i > 0:
                rank[i - 1] = ranks.get((ids[i - 1], ids[i]), no_merge)
            if i < len(rank):
                rank[i] = ranks.get((ids[i], ids[i + 1]), no_merge)
        return ids

    def _encode_ordinary(self, pretokens: Iterable[str], out: list[int]) -> None:
        out.extend(chain.from_iterable(map(self._cache.__getitem__, pretokens)))

    @_gc_paused
    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        # A window of segments: (pre-tokens of the ordinary text, id of the special token after it or None).
        window: list[tuple[list[str], int | None]] = []
        size = start = 0
        matches = self._special_regex.finditer(text) if self._special_regex is not None else ()
        for match in chain(matches, (None,)):
            end, special = (
                (len(text), None)
                if match is None
                else (match.start(), self._special_ids[match.group()])
            )
            window.append((GPT2_REGEX.findall(text, start, end), special))
            size += len(window[-1][0])
            if match is not None:
                start = match.end()
                if size < ENCODE_WINDOW:
                    continue
            # Encode the window's new pre-tokens in one batch, then look every pre-token up.
            fill_cache(
                self._cache, chain.from_iterable(p for p, _ in window), self._batch, CACHE_SIZE
            )
            for pretokens, special_id in window:
                self._encode_ordinary(pretokens, out)
                if special_id is not None:
                    out.append(special_id)
            window, size = [], 0
        return out
