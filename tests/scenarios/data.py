"""Loops of part 4 over your ``get_batch``: many batches under a global seed, a batch written into,
the memory and the time a batch takes.

Everything here runs in the test, in grading too: each ``adapters.run_get_batch`` crosses to your
side of the line and the batch comes back (see ``tests/boundary.py``). The global RNGs a loop seeds
are the ones your code draws from; two tensors your code returns that share memory come back
sharing it; the memory your process uses is read from outside it (``/proc``, by process id).
Only ``batch_reads`` looks inside your process (it hands get_batch an array that counts its reads):
it runs in your own ``uv run pytest``, and grading skips the test that uses it (it grades the same
behaviour by time: ``batch_seconds``, per row of a tall batch and per position of a long window).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import adapters
from tests import boundary


def sampled_starts(
    n: int, context_length: int, batch_size: int, num_batches: int, seed: int
) -> np.ndarray:
    """Start positions drawn by get_batch on ``arange(n)`` (where token value = position)."""
    torch.manual_seed(seed)  # so even an implementation that ignores `generator` is deterministic
    np.random.seed(seed)
    generator = torch.Generator().manual_seed(seed)
    dataset = np.arange(n, dtype=np.int64)
    starts = []
    for _ in range(num_batches):
        x, _ = adapters.run_get_batch(dataset, batch_size, context_length, "cpu", generator)
        starts.append(x[:, 0].numpy())
    return np.concatenate(starts)


def batches_without_a_generator(
    seed: int, dataset: np.ndarray, batch_size: int, context_length: int, calls: int
) -> list[torch.Tensor]:
    """``torch.manual_seed(seed)`` (torch's alone), then ``calls`` successive get_batch calls with
    ``generator=None`` (on cpu); the x of each."""
    torch.manual_seed(seed)
    return [adapters.run_get_batch(dataset, batch_size, context_length, "cpu")[0] for _ in range(calls)]


@dataclass
class Written:
    """What writing into a batch's ``x`` changed: ``y`` (compared with before the write) and the dataset
    (the array passed in, or, seen from the returned tensor, whether ``x`` is a window of it)."""

    y_changed: bool
    dataset_changed: bool
    windows: bool  # whether x and y held the dataset's windows (x[b] = dataset[s : s + T], y shifted by one)


def x_views_the_dataset(x: torch.Tensor, dataset: np.ndarray) -> bool:
    """Whether ``x``'s memory is the dataset's: its storage holds the whole dataset's bytes.

    Seen from the returned tensor alone, so it holds in grading too, where the dataset your code
    indexes is its own copy of the test's array (``torch.from_numpy(dataset)[s : s + T]`` keeps the
    whole dataset as its storage). A dataset of a single window is left out: a copy of that window
    (a view of which ``x`` may be) holds the same bytes.
    """
    storage = x.untyped_storage()
    data = np.ascontiguousarray(dataset)
    if storage.nbytes() != data.nbytes or x.device.type != "cpu" or len(dataset) <= x.shape[-1] + 1:
        return False
    held = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()
    return held == data.tobytes()


def write_into_x(dataset: np.ndarray, batch_size: int, context_length: int) -> Written:
    """Sample a batch (seeded generator), add 1 to every entry of ``x`` in place, and report what else changed."""
    before = dataset.copy()
    x, y = adapters.run_get_batch(dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(0))
    views_dataset = x_views_the_dataset(x, dataset)
    windows = window_mismatch(x, y, dataset) is None
    y_before = y.clone()
    x += 1
    return Written(
        y_changed=not torch.equal(y, y_before),
        dataset_changed=views_dataset or not np.array_equal(dataset, before),
        windows=windows,
    )


def window_mismatch(x: torch.Tensor, y: torch.Tensor, dataset: np.ndarray) -> str | None:
    """Why ``x`` and ``y`` are not a batch of windows of ``dataset`` (its first bad row), or None when
    each row of ``x`` is ``dataset[s : s + T]`` for a valid start ``s`` and the row of ``y`` the same
    window shifted by one. ``dataset`` must hold distinct tokens (a token names its position): then a
    batch of zeros, or of any tokens but the dataset's windows, has a mismatch."""
    if x.dim() != 2 or x.shape != y.shape or x.numel() == 0:
        return f"x and y have shapes {tuple(x.shape)} and {tuple(y.shape)}, expected one (B, T) shape"
    context_length = x.shape[1]
    position = {int(t): i for i, t in enumerate(dataset.tolist())}
    for b, (row_x, row_y) in enumerate(zip(x.tolist(), y.tolist(), strict=True)):
        s = position.get(row_x[0])
        if s is None or s + context_length >= len(dataset):
            return f"x[{b}] starts with {row_x[0]}, which is no valid start's token: the batch must hold the dataset's tokens"
        window = dataset[s : s + context_length + 1].tolist()
        if row_x != window[:-1] or row_y != window[1:]:
            return (f"x[{b}], y[{b}] = {row_x}, {row_y}, expected the window dataset[{s}:{s + context_length}] = "
                    f"{window[:-1]} and the same shifted by one, {window[1:]}")
    return None


class CountingArray(np.ndarray):
    """An ndarray that counts how often it is indexed (class-level counter ``reads``)."""

    reads = 0

    def __getitem__(self, index):
        CountingArray.reads += 1
        return np.asarray(super().__getitem__(index))


def batch_reads(dataset: np.ndarray, batch_size: int, context_length: int) -> int:
    """How many times get_batch indexes ``dataset`` to sample one batch (in one process only: an
    array subclass does not cross to the sandboxed worker; grading skips the tests that use it)."""
    CountingArray.reads = 0
    adapters.run_get_batch(
        dataset.view(CountingArray),
        batch_size,
        context_length,
        "cpu",
        torch.Generator().manual_seed(0),
    )
    return CountingArray.reads


def loop_over_rows(dataset: np.ndarray, starts: np.ndarray, context_length: int) -> np.ndarray:
    """The windows at ``starts``, read one row at a time in a Python loop: the baseline a vectorised
    get_batch must beat (the test's own code, timed in the same run)."""
    return np.stack([np.asarray(dataset[s : s + context_length + 1], dtype=np.int64) for s in starts])


def loop_over_positions(dataset: np.ndarray, starts: np.ndarray, context_length: int) -> np.ndarray:
    """The windows at ``starts``, read one token at a time in a Python loop over the positions: the
    baseline a get_batch must beat along the window (the test's own code, timed in the same run)."""
    return np.array([[int(dataset[s + t]) for t in range(context_length + 1)] for s in starts], dtype=np.int64)


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` timed calls of ``fn`` (a stall on a loaded machine decides nothing)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@dataclass
class BatchCosts:
    """Seconds per item (a row of a tall batch, or a position of a long window): get_batch's extra
    time for the big batch over a batch of one row of one token (so the round trip to your side of
    the line cancels out), and the Python loop baseline's."""

    get_batch: float
    loop: float
    items: int
    windows: bool  # whether the (untimed) big batch held the dataset's windows


def batch_seconds(dataset: np.ndarray, rows: int, context_length: int, seed: int, repeats: int = 5) -> BatchCosts:
    """Time get_batch on a batch of ``rows`` windows of ``context_length`` tokens and on a batch of one
    row of one token, in turns (each call its own generator seed, from ``seed``), and the test's own
    loop on the same shape: over the rows (``loop_over_rows``) for a tall batch of one-token rows,
    over the positions (``loop_over_positions``) for one long window; the best of ``repeats`` each."""
    if (rows == 1) == (context_length == 1):
        raise ValueError("time either many one-token rows or one long window")
    seeds = iter(range(seed, seed + 4 * repeats))

    def batch(size: int, length: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
        return lambda: adapters.run_get_batch(
            dataset, size, length, "cpu", torch.Generator().manual_seed(next(seeds))
        )

    x, y = batch(rows, context_length)()  # untimed warm-up: one-time costs are not speed
    one = big = float("inf")
    for _ in range(repeats):  # in turns: a stall of the machine hits both sizes alike
        one = min(one, best_seconds(batch(1, 1), 1))
        big = min(big, best_seconds(batch(rows, context_length), 1))
    starts = np.random.default_rng(seed).integers(0, len(dataset) - context_length, rows)
    loop_fn = loop_over_rows if context_length == 1 else loop_over_positions
    loop = best_seconds(lambda: loop_fn(dataset, starts, context_length), repeats)
    items = max(rows, context_length)
    return BatchCosts(get_batch=max(big - one, 0.0) / items, loop=loop / items, items=items,
                      windows=window_mismatch(x, y, dataset) is None)


# ------------------------------------------------------------------------------------------------
# memory, read from outside the process that runs get_batch
# ------------------------------------------------------------------------------------------------


def _status_kb(pid: int | str, key: str) -> int:
    return int(
        re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M).group(1)
    )


def student_pids() -> list[int | str] | None:
    """The processes that run your code: this one in a plain ``uv run pytest``; in grading, the
    sandboxed worker's, as the judge names them (None where it cannot)."""
    if boundary.remote is None:
        return ["self"]
    pids = getattr(boundary.remote, "worker_pids", None)
    return list(pids()) if callable(pids) else None


def can_measure_peak_rss() -> bool:
    """Whether the peak memory of the processes running your code can be reset and read (Linux)."""
    pids = student_pids()
    if not pids:
        return False
    try:  # the main process only: a child of your code that exits meanwhile must not make the test skip
        Path(f"/proc/{pids[0]}/clear_refs").write_text("5")
        _status_kb(pids[0], "VmHWM")
    except (OSError, AttributeError):
        return False
    return True


def peak_rss_growth_kb(fn: Callable[[], object]) -> int:
    """How far the resident set's high-water mark of the processes running your code rises while
    ``fn()`` runs (the largest rise among them; Linux only)."""
    pids = student_pids() or []
    before = {}
    for pid in pids:
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current VmRSS
            before[pid] = _status_kb(pid, "VmHWM")
        except (OSError, AttributeError):  # a child that ended meanwhile
            if pid == pids[0]:
                raise
    fn()
    growth = 0
    for pid in before:
        try:
            growth = max(growth, _status_kb(pid, "VmHWM") - before[pid])
        except (OSError, AttributeError):  # the process ended meanwhile
            continue
    return growth


@dataclass
class BatchMemory:
    """A batch and how far the peak memory of the processes running get_batch rose while it sampled it."""

    growth_kb: int
    x: torch.Tensor
    y: torch.Tensor


def peak_rss_growth_kb_of_a_batch(
    path: Path, dtype: str, batch_size: int, context_length: int
) -> BatchMemory | None:
    """The batch get_batch samples from a read-only ``np.memmap`` of the token file at ``path``, and
    the peak-memory growth (kB) of the processes running it meanwhile; None where it cannot be measured."""
    if not can_measure_peak_rss():
        return None
    adapters.run_get_batch(
        np.arange(100, dtype=np.uint16), 2, 4, "cpu", torch.Generator()
    )  # warm up
    memmap = np.memmap(path, dtype=dtype, mode="r")  # mapped, nothing resident yet
    batch: list[tuple[torch.Tensor, torch.Tensor]] = []
    growth = peak_rss_growth_kb(
        lambda: batch.append(adapters.run_get_batch(
            memmap, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
        ))
    )
    return BatchMemory(growth, *batch[0])
