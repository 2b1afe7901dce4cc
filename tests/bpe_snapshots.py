"""Trained BPE vocabularies and merges as ``.npz`` snapshot arrays, and back.

The expected results of ``train_bpe`` on fixed inputs are stored as snapshots (the reference's
outputs, checked by staff against an independent trainer); ``tests/snapshot.py`` stores arrays,
so a ``(vocab, merges)`` pair becomes byte strings laid end to end plus their lengths.
"""

from __future__ import annotations

import numpy as np

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


def _pack(tokens: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    data = np.frombuffer(b"".join(tokens), dtype=np.uint8).copy()
    return data, lengths


def _unpack(data: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    raw, out, at = data.astype(np.uint8).tobytes(), [], 0
    for n in lengths.tolist():
        out.append(raw[at : at + n])
        at += n
    return out


def bpe_arrays(vocab: Vocab, merges: Merges) -> dict[str, np.ndarray]:
    """``vocab`` and ``merges`` as arrays a snapshot can store (and compare exactly)."""
    ids = sorted(vocab)
    vocab_bytes, vocab_lengths = _pack([vocab[i] for i in ids])
    merge_bytes, merge_lengths = _pack([t for pair in merges for t in pair])
    return {
        "vocab_ids": np.array(ids, dtype=np.int64),
        "vocab_bytes": vocab_bytes,
        "vocab_lengths": vocab_lengths,
        "merge_bytes": merge_bytes,
        "merge_lengths": merge_lengths,
    }


def bpe_from_arrays(arrays: dict[str, np.ndarray]) -> tuple[Vocab, Merges]:
    """The inverse of ``bpe_arrays``."""
    tokens = _unpack(arrays["vocab_bytes"], arrays["vocab_lengths"])
    vocab = dict(zip(arrays["vocab_ids"].tolist(), tokens, strict=True))
    parts = _unpack(arrays["merge_bytes"], arrays["merge_lengths"])
    return vocab, list(zip(parts[0::2], parts[1::2], strict=True))


def first_difference(ours: Merges, expected: Merges) -> str:
    """Where two merge lists first part ways (or how their lengths differ)."""
    for i, (a, b) in enumerate(zip(ours, expected, strict=False)):
        if a != b:
            agree = f"the {i} merges before it agree" if i else "the very first merge"
            return f"merge {i} is {a!r}, expected {b!r} ({agree})"
    return f"{len(ours)} merges, expected {len(expected)} (the first {min(len(ours), len(expected))} agree)"


def vocab_difference(vocab: Vocab, expected: Vocab) -> str:
    """Which ids two vocabularies disagree on (the first few), and what the first of them holds."""
    wrong = [i for i in sorted(set(vocab) | set(expected)) if vocab.get(i) != expected.get(i)]
    return (
        f"the vocab differs at ids {wrong[:5]}{' and more' if len(wrong) > 5 else ''}: e.g. id {wrong[0]} is "
        f"{vocab.get(wrong[0])!r}, expected {expected.get(wrong[0])!r}. Ids 0-255 are the bytes, then one id "
        "per merge in order, then the special tokens in the order given"
    )


def explain_bpe(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> str:
    """A snapshot failure message about merges and vocab, not about arrays of bytes."""
    vocab, merges = bpe_from_arrays(got)
    want_vocab, want_merges = bpe_from_arrays(expected)
    if merges != want_merges:
        return "train_bpe learned other merges than the reference: " + first_difference(
            merges, want_merges
        )
    return "the merges are right but " + vocab_difference(vocab, want_vocab)


def assert_same_bpe(got: object, expected: tuple[Vocab, Merges], context: str = "") -> None:
    """Fail unless ``got`` is the ``(vocab, merges)`` pair ``expected``, saying where they first differ.

    Use it instead of ``assert got == expected`` on whole training results: pytest explains a failed
    ``==`` with a full diff of both sides wherever ``CI`` is set (GitHub Actions, GitHub Classroom),
    and ``difflib`` takes minutes on two vocabularies of a few hundred similar lines; a property test
    that shrinks a failure pays that on every example it tries. ``context`` (the input, say) ends the
    message.
    """
    want_vocab, want_merges = expected
    where = f" ({context})" if context else ""
    if not (
        isinstance(got, tuple)
        and len(got) == 2
        and isinstance(got[0], dict)
        and isinstance(got[1], list)
    ):
        raise AssertionError(
            f"train_bpe returned a {type(got).__name__}, expected a (vocab dict, merges list) pair{where}"
        )
    vocab, merges = got
    if merges != want_merges:
        raise AssertionError(
            "train_bpe learned other merges than expected: "
            + first_difference(merges, want_merges)
            + where
        )
    if vocab != want_vocab:
        raise AssertionError(
            "the merges are right but " + vocab_difference(vocab, want_vocab) + where
        )
