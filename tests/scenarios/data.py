"""Drivers of part 4 over your ``get_batch``: many batches under a seed, a batch written into, the
reads a batch makes, the memory it takes, and the baseline loops its speed is compared with.

Each ``@driver`` runs beside your code (see ``tests/boundary.py``: in grading, in the sandboxed
worker, as one call) and returns plain data: batches, start positions, counts, kilobytes. What it
observes is observed in the process that runs your ``get_batch``: the global RNGs it seeds are the
ones your code draws from, the dataset your batch is written into is the one your code indexed, an
array that counts its reads is the one your code reads, and peak memory is that process's own.

``batch_seconds`` is no driver: the test runs it, timing each call of your ``get_batch`` (through
``batch_on_one_thread``) and of the baseline loop (a driver here) as one round trip each, alike.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import torch

import adapters
from tests.boundary import driver, plain_data
from tests.scenarios import OneTorchThread


@driver
def sampled_starts(
    n: int, context_length: int, batch_size: int, num_batches: int, seed: int
) -> np.ndarray:
    """Start positions drawn by get_batch on ``arange(n)`` (where token value = position), from a
    generator seeded with ``seed``, ``num_batches`` batches in a row."""
    torch.manual_seed(seed)  # so even an implementation that ignores `generator` is deterministic
    np.random.seed(seed)
    generator = torch.Generator().manual_seed(seed)
    dataset = np.arange(n, dtype=np.int64)
    starts = []
    for _ in range(num_batches):
        x, _ = adapters.run_get_batch(dataset, batch_size, context_length, "cpu", generator)
        starts.append(x[:, 0].numpy())
    return np.concatenate(starts)


@driver
def batches_without_a_generator(
    seed: int, dataset: np.ndarray, batch_size: int, context_length: int, calls: int
) -> list[torch.Tensor]:
    """``torch.manual_seed(seed)`` (torch's alone), then ``calls`` successive get_batch calls with
    ``generator=None`` (on cpu); the x of each."""
    torch.manual_seed(seed)
    return [
        adapters.run_get_batch(dataset, batch_size, context_length, "cpu")[0] for _ in range(calls)
    ]


@driver
def batches_from_one_generator(
    seed: int, dataset: np.ndarray, batch_size: int, context_length: int, calls: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``calls`` successive get_batch calls (on cpu) with one generator, seeded with ``seed``; each batch."""
    generator = torch.Generator().manual_seed(seed)
    return [
        adapters.run_get_batch(dataset, batch_size, context_length, "cpu", generator)
        for _ in range(calls)
    ]


@plain_data
@dataclass
class Written:
    """What writing into a batch's ``x`` changed: ``y`` (compared with before the write) and the dataset
    your code indexed (compared with a copy taken before the batch)."""

    y_changed: bool
    dataset_changed: bool
    windows: bool  # whether x and y held the dataset's windows (x[b] = dataset[s : s + T], y shifted by one)


@driver
def write_into_x(dataset: np.ndarray, batch_size: int, context_length: int) -> Written:
    """Sample a batch of (a writable copy of) ``dataset`` (seeded generator), add 1 to every entry of
    ``x`` in place, and report what else changed."""
    dataset = np.array(dataset, copy=True)  # writable, whatever the caller passed
    before = dataset.copy()
    x, y = adapters.run_get_batch(
        dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
    )
    windows = window_mismatch(x, y, before) is None
    y_before = y.clone()
    x += 1
    return Written(
        y_changed=not torch.equal(y, y_before),
        dataset_changed=not np.array_equal(dataset, before),
        windows=windows,
    )


def window_mismatch(x: torch.Tensor, y: torch.Tensor, dataset: np.ndarray) -> str | None:
    """Why ``x`` and ``y`` are not a batch of windows of ``dataset`` (its first bad row), or None when
    each row of ``x`` is ``dataset[s : s + T]`` for a valid start ``s`` and the row of ``y`` the same
    window shifted by one. ``dataset`` must hold distinct tokens (a token names its position): then a
    batch of zeros, or of any tokens but the dataset's windows, has a mismatch."""
    if x.dim() != 2 or x.shape != y.shape or x.numel() == 0:
        return (
            f"x and y have shapes {tuple(x.shape)} and {tuple(y.shape)}, expected one (B, T) shape"
        )
    context_length = x.shape[1]
    position = {int(t): i for i, t in enumerate(dataset.tolist())}
    for b, (row_x, row_y) in enumerate(zip(x.tolist(), y.tolist(), strict=True)):
        s = position.get(row_x[0])
        if s is None or s + context_length >= len(dataset):
            return f"x[{b}] starts with {row_x[0]}, which is no valid start's token: the batch must hold the dataset's tokens"
        window = dataset[s : s + context_length + 1].tolist()
        if row_x != window[:-1] or row_y != window[1:]:
            return (
                f"x[{b}], y[{b}] = {row_x}, {row_y}, expected the window dataset[{s}:{s + context_length}] = "
                f"{window[:-1]} and the same shifted by one, {window[1:]}"
            )
    return None


class CountingArray(np.ndarray):
    """An ndarray that counts how often it is indexed (class-level counter ``reads``)."""

    reads = 0

    def __getitem__(self, index):
        CountingArray.reads += 1
        return np.asarray(super().__getitem__(index))


@plain_data
@dataclass
class Reads:
    """How many times get_batch indexed the dataset to sample one batch, and that batch."""

    reads: int
    x: torch.Tensor
    y: torch.Tensor


@driver
def batch_reads(dataset: np.ndarray, shapes: list[tuple[int, int]]) -> list[Reads]:
    """For each ``(batch_size, context_length)`` in ``shapes``, one get_batch call (generator seeded
    with 0) on ``dataset`` seen as an array that counts its reads (``CountingArray``): the count and
    the batch."""
    counted = np.array(dataset, copy=True).view(CountingArray)
    out = []
    for batch_size, context_length in shapes:
        CountingArray.reads = 0
        x, y = adapters.run_get_batch(
            counted, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
        )
        out.append(Reads(CountingArray.reads, x, y))
    return out


# ------------------------------------------------------------------------------------------------
# speed: your get_batch and the baseline loops, each timed by the test as one round trip
# ------------------------------------------------------------------------------------------------


@driver
def batch_on_one_thread(
    dataset: np.ndarray, batch_size: int, context_length: int, generator_seed: int, keep: bool
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Your get_batch (on cpu, its generator seeded ``generator_seed``) with torch on one thread, as
    the baseline loops run: what the speed tests time. Its (x, y) where ``keep``, else nothing: a
    timed round trip carries no batch back (in grading, a batch's bytes sent back cost time in
    proportion to its size, which a student's own run never pays). On two threads of a loaded
    machine, torch's parallel copies wait for the second core (a 1 MB clone took 10 to 25 ms,
    against 0.4 ms on one thread, beside other work), a stall as long as the loop it is compared
    with, which says nothing about whether the batch is read vectorised."""
    generator = torch.Generator().manual_seed(generator_seed)
    with OneTorchThread():
        batch = adapters.run_get_batch(dataset, batch_size, context_length, "cpu", generator)
    return batch if keep else None


@driver
def loop_over_rows(dataset: np.ndarray, starts: np.ndarray, context_length: int) -> None:
    """The windows at ``starts``, read one row at a time in a Python loop: the baseline a vectorised
    get_batch must beat (staff code, timed in the same run). Built and dropped, as
    ``batch_on_one_thread``'s timed batches are."""
    np.stack([np.asarray(dataset[s : s + context_length + 1], dtype=np.int64) for s in starts])


@driver
def loop_over_positions(dataset: np.ndarray, starts: np.ndarray, context_length: int) -> None:
    """The windows at ``starts``, read one token at a time in a Python loop over the positions: the
    baseline a get_batch must beat along the window (staff code, timed in the same run). Built and
    dropped, as ``batch_on_one_thread``'s timed batches are."""
    np.array(
        [[int(dataset[s + t]) for t in range(context_length + 1)] for s in starts], dtype=np.int64
    )


def seconds(fn: Callable[[], object]) -> float:
    """The wall-clock time of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass
class BatchCosts:
    """Seconds per item (a row of a tall batch, or a position of a long window), each over the same
    call for one row of one token (so the round trip to where the code runs cancels out): get_batch's,
    and the Python loop baseline's."""

    get_batch: float
    loop: float
    items: int
    windows: bool  # whether the (untimed) big batch held the dataset's windows


def batch_seconds(
    dataset: np.ndarray, rows: int, context_length: int, seed: int, repeats: int = 5
) -> BatchCosts:
    """Time, as round trips of the same kind, get_batch (``batch_on_one_thread``) on a batch of ``rows``
    windows of ``context_length`` tokens and on a batch of one row of one token, and the baseline loop
    (a driver) on the same two shapes: over the rows (``loop_over_rows``) for a tall batch of one-token
    rows, over the positions (``loop_over_positions``) for one long window. All four in turns, each
    call on its own input, after an untimed warm-up on another; the best of ``repeats`` each. Run by
    the test, never in a driver.

    The baseline's starts come from ``seed`` (the run's); get_batch's generators are seeded 1, 2, ...
    in every run, so the starts your get_batch draws (and whether a wrong range of starts ever leaves
    the dataset) are the same in every run: only the dataset, drawn by the test, is fresh, and each
    call still gets its own starts, so neither a table nor a cache can answer it."""
    if (rows == 1) == (context_length == 1):
        raise ValueError("time either many one-token rows or one long window")
    seeds = iter(range(seed, seed + 2 * repeats + 2))
    generator_seeds = iter(range(1, 2 * repeats + 3))
    loop_fn = loop_over_rows if context_length == 1 else loop_over_positions

    def batch(size: int, length: int, keep: bool = False) -> Callable[[], object]:
        generator_seed = next(generator_seeds)
        return lambda: batch_on_one_thread(dataset, size, length, generator_seed, keep)

    def loop(size: int, length: int) -> Callable[[], object]:
        starts = np.random.default_rng(next(seeds)).integers(0, len(dataset) - length, size)
        return lambda: loop_fn(dataset, starts, length)

    # untimed warm-ups (one-time costs are not speed); the batch kept, to check it holds windows
    x, y = cast(tuple[torch.Tensor, torch.Tensor], batch(rows, context_length, keep=True)())
    loop(rows, context_length)()
    one = big = loop_one = loop_big = float("inf")
    for _ in range(repeats):  # in turns: a stall of the machine hits every kind alike
        one = min(one, seconds(batch(1, 1)))
        big = min(big, seconds(batch(rows, context_length)))
        loop_one = min(loop_one, seconds(loop(1, 1)))
        loop_big = min(loop_big, seconds(loop(rows, context_length)))
    items = max(rows, context_length)
    return BatchCosts(
        get_batch=max(big - one, 0.0) / items,
        loop=max(loop_big - loop_one, 0.0) / items,
        items=items,
        windows=window_mismatch(x, y, dataset) is None,
    )


# ------------------------------------------------------------------------------------------------
# memory, read in the process that runs get_batch
# ------------------------------------------------------------------------------------------------


def _status_kb(key: str) -> int:
    found = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert found is not None, f"no {key} in /proc/self/status"
    return int(found.group(1))


def reset_peak_rss_kb() -> int | None:
    """Reset this process's resident-set high-water mark to its current resident set (Linux's
    ``/proc/self/clear_refs``); return it, in kB, or None where it cannot be reset and read."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _status_kb("VmHWM")
    except (OSError, AttributeError):
        return None


@plain_data
@dataclass
class BatchMemory:
    """A batch and how far the peak memory of the process running get_batch rose while it sampled it."""

    growth_kb: int
    x: torch.Tensor
    y: torch.Tensor


@driver
def peak_rss_growth_kb_of_a_batch(
    path: Path, dtype: str, batch_size: int, context_length: int
) -> BatchMemory | None:
    """The batch get_batch samples from a read-only ``np.memmap`` of the token file at ``path``, and
    the peak-memory growth (kB) of this process meanwhile; None where it cannot be measured."""
    # warm up: what the first call imports or allocates once is not the batch's memory
    adapters.run_get_batch(np.arange(100, dtype=np.uint16), 2, 4, "cpu", torch.Generator())
    memmap = np.memmap(path, dtype=dtype, mode="r")  # mapped, nothing resident yet
    before = reset_peak_rss_kb()
    if before is None:
        return None
    x, y = adapters.run_get_batch(
        memmap, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
    )
    return BatchMemory(_status_kb("VmHWM") - before, x, y)
