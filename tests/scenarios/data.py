"""Scenarios of part 4: your ``get_batch`` over many batches, under a global seed, counting its reads,
measuring its memory, and written into.

Each runs your code through ``adapters.run_get_batch`` and returns plain data. ``sampled_starts`` and
``batches_without_a_generator`` run on the tests' side in grading too (the global RNGs they seed are
the ones your code draws from: see ``tests/boundary.py``); the ``@student_side`` ones run beside your
code, where what they observe happens: the dataset object it indexes and writes through, the
process whose memory it uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import adapters
from tests.boundary import plain_data, student_side


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


@plain_data
@dataclass
class Written:
    """What writing into a batch's ``x`` changed: ``y`` (compared with before the write) and the dataset."""

    y_changed: bool
    dataset_changed: bool


@student_side
def write_into_x(dataset: np.ndarray, batch_size: int, context_length: int) -> Written:
    """Sample a batch (seeded generator), add 1 to every entry of ``x`` in place, and report what else changed."""
    before = dataset.copy()
    x, y = adapters.run_get_batch(dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(0))
    y_before = y.clone()
    x += 1
    return Written(y_changed=not torch.equal(y, y_before), dataset_changed=not np.array_equal(dataset, before))


class CountingArray(np.ndarray):
    """An ndarray that counts how often it is indexed (class-level counter ``reads``)."""

    reads = 0

    def __getitem__(self, index):
        CountingArray.reads += 1
        return np.asarray(super().__getitem__(index))


@student_side
def batch_reads(dataset: np.ndarray, batch_size: int, context_length: int) -> int:
    """How many times get_batch indexes ``dataset`` to sample one batch."""
    CountingArray.reads = 0
    adapters.run_get_batch(
        dataset.view(CountingArray),
        batch_size,
        context_length,
        "cpu",
        torch.Generator().manual_seed(0),
    )
    return CountingArray.reads


def _status_kb(key: str) -> int:
    return int(
        re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M).group(1)
    )


def peak_rss_growth_kb(fn: Callable[[], object]) -> int:
    """How far the resident set's high-water mark rises while ``fn()`` runs (Linux only)."""
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current VmRSS
    before = _status_kb("VmHWM")
    fn()
    return _status_kb("VmHWM") - before


def can_measure_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        _status_kb("VmHWM")
    except (OSError, AttributeError):
        return False
    return True


@student_side
def peak_rss_growth_kb_of_a_batch(
    path: Path, dtype: str, batch_size: int, context_length: int
) -> int | None:
    """The peak-memory growth (kB) of this process while get_batch samples one batch from a
    read-only ``np.memmap`` of the token file at ``path``; None where it cannot be measured."""
    if not can_measure_peak_rss():
        return None
    adapters.run_get_batch(
        np.arange(100, dtype=np.uint16), 2, 4, "cpu", torch.Generator()
    )  # warm up
    memmap = np.memmap(path, dtype=dtype, mode="r")  # mapped, nothing resident yet
    return peak_rss_growth_kb(
        lambda: adapters.run_get_batch(
            memmap, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
        )
    )
