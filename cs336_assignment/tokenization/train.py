"""Byte-level BPE training, fast: parallel pre-tokenization, then incremental pair counts and a heap.

Same rule as ``train_slow.py`` (read that first); two things make it fast.

1. Pre-tokenization (most of the time on a big corpus) runs on chunks of the file in parallel.
   Chunks are cut only where cutting cannot change a pre-token (``pretokenize.find_chunk_boundaries``);
   each worker returns ``Counter[pre-token]`` for its chunk and the parent adds them up. Memory is
   one chunk per worker plus the table of distinct pre-tokens, never the whole file.

2. Merging never recounts. Each distinct pre-token is a "word": a list of token ids with a
   frequency. We keep

       pair_counts[(x, y)] = sum of freq(w) * (occurrences of x, y in w)
       where[(x, y)]       = ids of words that contain (x, y)   (a list: repeats and stale ids
                             are possible and harmless, a word without (x, y) is skipped cheaply)
       heap                = (-count, tie-break key, x, y), counts possibly too high (stale)

   and merging (x, y) -> z only touches the words in ``where[(x, y)]``. At each occurrence, with
   ``p`` the token before it (already merged, if the previous occurrence was adjacent) and ``n``
   the token after it:

       pair_counts[(p, x)] -= f;  pair_counts[(p, z)] += f
       pair_counts[(y, n)] -= f;  pair_counts[(z, n)] += f

   (for ``x y x y`` the intermediate ``(z, x)`` is added then removed again, leaving ``(z, z)``).
   Only pairs with ``z`` ever go up, and they are new: they get a heap entry when the merge is
   done. Every other count only goes down, so a popped entry whose count is too high is stale:
   it goes back in at its true count (or is dropped at zero). Cost per merge: the words that
   contain the pair, and one heap operation per pair touched.

Ties go to the lexicographically greater pair of byte strings. ``heapq`` pops the smallest entry,
so the key of a token is its bytes inverted (``255 - b``) plus a terminator above every byte,
which reverses the order:

>>> tie_break_key(b"ab") < tie_break_key(b"a")   # b"ab" > b"a", so it must pop first
True

Deliberately left out: a compiled inner loop (Rust/C), and sampling the corpus.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
from collections import Counter, defaultdict
from itertools import pairwise

from tqdm import tqdm

from .pretokenize import check_special_tokens, count_pretokens, find_chunk_boundaries, read_utf8
from .train_slow import check_vocab_size

#: Chunk size for reading the file: bounds the memory of each pre-tokenization worker.
CHUNK_BYTES = 1 << 22
#: With ``num_processes=None``, files smaller than this are pre-tokenized in-process (no pool start-up).
PARALLEL_MIN_BYTES = 1 << 22

_INVERT = bytes(range(255, -1, -1))


def tie_break_key(token: bytes) -> str:
    """A string whose ``<`` order is the reverse of ``token``'s lexicographic order (see module doc)."""
    return token.translate(_INVERT).decode("latin-1") + "\u0100"


def _count_chunk(job: tuple[str, int, int, list[str]]) -> Counter[str]:
    """Worker: pre-token counts of bytes ``[start, end)`` of the file."""
    path, start, end, special_tokens = job
    return count_pretokens(read_utf8(path, start, end), special_tokens)


def count_file_pretokens(
    input_path: str | os.PathLike,
    special_tokens: list[str],
    num_processes: int | None = None,
    progress: bool = False,
) -> Counter[str]:
    """``Counter`` of the pre-tokens of a UTF-8 file, chunk by chunk, in ``num_processes`` processes.

    ``num_processes=None`` uses every core this process may run on (``os.sched_getaffinity``
    where the system has it, else ``os.cpu_count()``) for files of at least ``PARALLEL_MIN_BYTES``,
    and the current process for smaller ones. With ``num_processes > 1`` the file is cut into about four
    chunks per process (at most ``CHUNK_BYTES`` each) so the workers stay evenly busy.

    Optional helper, not graded: the first half of ``train_bpe`` (graded).
    """
    # BEGIN SOLUTION
    size = os.path.getsize(input_path)
    if num_processes is None:
        cores = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1)
        )
        num_processes = cores if size >= PARALLEL_MIN_BYTES else 1
    if num_processes < 1:
        raise ValueError(
            f"num_processes={num_processes} must be at least 1 (or None for one per core)"
        )
    target = (
        CHUNK_BYTES
        if num_processes == 1
        else max(1, min(CHUNK_BYTES, -(-size // (4 * num_processes))))
    )
    bounds = find_chunk_boundaries(input_path, special_tokens, target)
    jobs = [(os.fspath(input_path), lo, hi, special_tokens) for lo, hi in pairwise(bounds)]
    bar = tqdm(total=size, unit="B", unit_scale=True, desc="pre-tokenize", disable=not progress)
    counts: Counter[str] = Counter()
    if num_processes == 1 or len(jobs) <= 1:
        for job in jobs:
            counts.update(_count_chunk(job))
            bar.update(job[2] - job[1])
    else:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        with context.Pool(min(num_processes, len(jobs))) as pool:
            # imap (ordered) rather than imap_unordered: the table is the same, and order is reproducible.
            for job, chunk_counts in zip(jobs, pool.imap(_count_chunk, jobs), strict=True):
                counts.update(chunk_counts)
                bar.update(job[2] - job[1])
    bar.close()
    return counts
    # END SOLUTION


def learn_merges(
    pretoken_counts: dict[str, int], num_merges: int, progress: bool = False
) -> list[tuple[bytes, bytes]]:
    """Up to ``num_merges`` BPE merges of the pre-tokens (fewer if every pre-token becomes one token).

    Optional helper, not graded: the second half of ``train_bpe`` (graded).
    """
    # BEGIN SOLUTION
    # Words: distinct pre-tokens as lists of token ids (a single byte can never merge: skip it).
    words: list[list[int]] = []
    freqs: list[int] = []
    for pretoken, count in pretoken_counts.items():
        data = pretoken.encode("utf-8")
        if len(data) > 1:
            words.append(list(data))
            freqs.append(count)
    del pretoken_counts  # if the caller passed a temporary, its memory goes back now

    pair_counts: defaultdict[tuple[int, int], int] = defaultdict(int)
    where: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
    for w, word in enumerate(words):
        f = freqs[w]
        for pair in pairwise(word):
            pair_counts[pair] += f
            where[pair].append(w)

    token_bytes = [bytes([i]) for i in range(256)]
    keys = [tie_break_key(t) for t in token_bytes]
    heap = [(-c, keys[x] + keys[y], x, y) for (x, y), c in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[bytes, bytes]] = []
    bar = tqdm(total=num_merges, unit="merge", desc="merge", disable=not progress)
    while len(merges) < num_merges and heap:
        neg_count, key, x, y = heapq.heappop(heap)
        pair = (x, y)
        count = pair_counts.get(pair, 0)
        if count != -neg_count:
            # Stale: the count only went down since the push. Re-queue it at its true count.
            if count > 0:
                heapq.heappush(heap, (-count, key, x, y))
            else:
                pair_counts.pop(pair, None)
                where.pop(pair, None)
            continue
        z = len(token_bytes)
        merges.append((token_bytes[x], token_bytes[y]))
        token_bytes.append(token_bytes[x] + token_bytes[y])
        keys.append(tie_break_key(token_bytes[z]))
        bar.update()

        created: set[tuple[int, int]] = set()  # pairs with z: the only counts that go up
        for w in where.pop(pair):
            word = words[w]  # edited in place; list.index finds the candidates at C speed
            f = freqs[w]
            candidates = word.count(x)  # 0 if ``where`` was stale for this word
            i = -1
            while candidates:
                i = word.index(x, i + 1)
                candidates -= 1
                if i + 1 == len(word) or word[i + 1] != y:
                    continue
                if x == y:
                    candidates -= 1  # the y we merge was a candidate x too
                if i > 0:
                    prev = word[i - 1]  # already z if the previous occurrence was adjacent
                    pair_counts[(prev, x)] -= f
                    new = (prev, z)
                    pair_counts[new] += f
                    created.add(new)
                    where[new].append(w)
                if i + 2 < len(word):
                    nxt = word[i + 2]
                    pair_counts[(y, nxt)] -= f
                    new = (z, nxt)
                    pair_counts[new] += f
                    created.add(new)
                    where[new].append(w)
                word[i : i + 2] = (z,)

        # Every occurrence of the pair is merged; overlaps (x x x) may have left garbage in its count.
        del pair_counts[pair]
        for p in created:
            c = pair_counts[p]
            if c > 0:
                heapq.heappush(heap, (-c, keys[p[0]] + keys[p[1]], p[0], p[1]))
            else:  # (z, x) of "x y x y": added, then taken away again
                del pair_counts[p]
                where.pop(p, None)
    bar.close()
    return merges
    # END SOLUTION


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    num_processes: int | None = None,
    progress: bool = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file.

    Returns ``(vocab, merges)``: ``vocab`` maps ids to bytes, with ids 0-255 the single bytes, then
    one id per merge in the order learned, then the special tokens in the order given;
    ``vocab_size`` counts all three, so there are ``vocab_size - 256 - len(special_tokens)`` merges
    (fewer if the corpus runs out of pairs: an empty corpus gives none). A special token given
    twice is one special token, at its first place: one id, counted once in ``vocab_size`` (the
    result is the one of the list without the repeat). ``merges[i] = (a, b)``
    created token ``256 + i = a + b``.

    The corpus is read (on every call: nothing is cached across calls, so a file rewritten at the
    same path trains afresh) as bytes and decoded as UTF-8, with no newline translation: ``\\r\\n`` and a
    lone ``\\r`` take part in merges like any other bytes (``open(path, encoding="utf-8")`` would
    turn both into ``\\n``). Pre-tokenization is GPT-2's regex, after splitting the text on the
    special tokens (which therefore never take part in a merge). Its classes are Unicode's
    (``pretokenize.GPT2_PATTERN``), not ``\\w`` and ``\\d``: a letter ``\\p{L}`` of any script (not a
    digit, a combining mark or ``_``), a number ``\\p{N}`` (``²``, ``½``, ``Ⅻ`` too), so ``"x²"`` is
    ``x + ²`` and ``" 3½"`` one pre-token, as in encoding. The regex is case-sensitive, so
    its contractions (``'s 't 're 've 'm 'll 'd``) match lowercase only and ``"DON'T"`` is
    ``DON + ' + T``. Each merge takes the most frequent adjacent pair of tokens, counted over all
    pre-tokens; ties go to the lexicographically greater ``(a, b)``.

    ``num_processes``: pre-tokenization workers (``None``: one per core for large files, in-process
    for small ones); the result is exactly the same for any number, on any corpus (with or without
    special tokens, long whitespace runs, multi-byte characters). So the file may only be cut where
    no pre-token crosses the cut: before a special token, or at a newline between two visible
    ASCII characters (``pretokenize.find_chunk_boundaries`` finds such cuts); never at a fixed
    offset, which falls inside a word or a character, nor after any newline, which can split a
    whitespace run. ``progress``: show progress bars.

    Speed (graded): training must be at least 5x faster than a trainer that recounts every pair
    after every merge, so update the pair counts incrementally (only the words that contain the
    merged pair change). The hidden test times such a naive trainer in the same run on
    corpora drawn fresh per run (``tests/fresh.py``) at ``vocab_size=500``. The public test cannot ship a trainer, so
    it times ``num_merges`` full recounts of the pair table instead (the naive trainer costs
    about 1.3 of those per merge, since it also rewrites every word) and asks for 4x.

    Raises:
        ValueError: if ``vocab_size`` leaves no room for the 256 bytes and the special tokens;
            the message gives the minimum: "vocab_size=256 is too small ... so it must be at
            least 257".
        ValueError: for an empty special token: "special token '' is empty".
        ValueError: if the file is not UTF-8; the message names the file and says it "is not
            valid UTF-8".
        FileNotFoundError: if ``input_path`` does not exist (Python's own, from reading it: not
            wrapped into another type).
    """
    # BEGIN SOLUTION
    special_tokens = check_special_tokens(special_tokens)
    check_vocab_size(vocab_size, special_tokens)
    num_merges = vocab_size - 256 - len(special_tokens)
    merges = learn_merges(
        count_file_pretokens(input_path, special_tokens, num_processes, progress),
        num_merges,
        progress,
    )
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in merges:
        vocab[len(vocab)] = a + b
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges
    # END SOLUTION
