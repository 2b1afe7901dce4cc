"""Hidden tests of data loading: other sizes, seeds and dtypes, generator use, and every bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import adapters
from tests.scenarios import data as scenario
from tests.test_data import (
    DEVICES,
    assert_rows_are_windows,
    assert_uniform_over_valid_starts,
    error_raised_by,
    sampled_starts,
)


@pytest.mark.parametrize(
    ("n", "context_length", "batch_size", "num_batches", "seed"),
    [(25, 1, 32, 100, 1), (100, 37, 128, 50, 2), (13, 11, 7, 10, 3)],
)
def test_get_batch_starts_are_uniform_over_valid_positions_for_other_sizes(
    n, context_length, batch_size, num_batches, seed
):
    """Uniform over {0, ..., n - context_length - 1} and nothing else, for other n, T, B and seeds."""
    starts = sampled_starts(n, context_length, batch_size, num_batches, seed)
    assert starts.size == batch_size * num_batches
    assert_uniform_over_valid_starts(starts, n, context_length)
    dataset = np.arange(n)
    assert_rows_are_windows(
        *adapters.run_get_batch(
            dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(seed)
        ),
        dataset,
    )


@pytest.mark.parametrize(
    ("dtype", "high"),
    [
        (np.uint8, 255),
        (np.uint16, 65535),
        (np.int32, 2**31 - 1),
        (np.uint32, 2**32 - 1),
        (np.int64, 2**40),
    ],
)
def test_get_batch_preserves_token_ids_of_every_integer_dtype(dtype, high):
    """Token ids come back exactly as int64, including the largest value of the dataset's dtype."""
    # T = 6: starts 0 or 1, both see `high`
    dataset = np.array([0, 1, 2, high, 4, 5, 6, 7], dtype=dtype)
    x, y = adapters.run_get_batch(dataset, 16, 6, "cpu", torch.Generator().manual_seed(0))
    assert x.dtype == torch.int64 and y.dtype == torch.int64, (
        f"dtypes {x.dtype}, {y.dtype}; expected int64"
    )
    expected = dataset.astype(np.int64)
    for b, (row_x, row_y) in enumerate(zip(x.numpy(), y.numpy(), strict=True)):
        s = int(row_x[0])
        assert s in (0, 1), f"x[{b}] starts with token {s}, but the only valid starts are 0 and 1"
        np.testing.assert_array_equal(
            row_x, expected[s : s + 6], err_msg=f"x[{b}] (token {high} overflowed?)"
        )
        np.testing.assert_array_equal(
            row_y, expected[s + 1 : s + 7], err_msg=f"y[{b}] (token {high} overflowed?)"
        )


@pytest.mark.parametrize("device", DEVICES)
def test_get_batch_accepts_a_torch_device_object(device):
    """`device` may be a torch.device as well as a string."""
    x, y = adapters.run_get_batch(
        np.arange(30), 3, 4, torch.device(device), torch.Generator().manual_seed(0)
    )
    assert x.device.type == y.device.type == device, (
        f"tensors on {x.device} / {y.device}, expected {device}"
    )
    assert_rows_are_windows(x.cpu(), y.cpu(), np.arange(30))


@pytest.mark.gpu
def test_get_batch_on_cuda_gives_the_cpu_batch():
    """With the same generator seed, the CUDA batch equals the CPU batch."""
    dataset = np.arange(1000, dtype=np.uint16)
    x_cpu, y_cpu = adapters.run_get_batch(dataset, 8, 16, "cpu", torch.Generator().manual_seed(5))
    x_gpu, y_gpu = adapters.run_get_batch(dataset, 8, 16, "cuda", torch.Generator().manual_seed(5))
    assert torch.equal(x_gpu.cpu(), x_cpu) and torch.equal(y_gpu.cpu(), y_cpu)


def test_get_batch_advances_the_generator_over_many_single_row_calls():
    """Ten calls of batch size 1 with one generator: the generator advances each time (starts not all equal)."""
    batches = scenario.batches_from_one_generator(21, np.arange(5_000), 1, 3, calls=10)
    for x, y in batches:
        assert_rows_are_windows(x, y, np.arange(5_000))
    starts = [int(x[0, 0]) for x, _ in batches]
    assert len(set(starts)) > 1, (
        f"ten calls with one generator all started at {starts[0]}: the generator must advance"
    )


@pytest.mark.parametrize(
    ("n", "batch_size", "context_length", "seed"), [(5_000, 1, 1, 11), (300, 32, 50, 12)]
)
def test_get_batch_without_a_generator_follows_torchs_global_rng_for_other_sizes(
    n, batch_size, context_length, seed
):
    """generator=None, other sizes and seeds: torch.manual_seed replays the batches, and they do not repeat."""
    dataset = np.arange(n)
    first = scenario.batches_without_a_generator(seed, dataset, batch_size, context_length, calls=4)
    replay = scenario.batches_without_a_generator(
        seed, dataset, batch_size, context_length, calls=4
    )
    assert all(torch.equal(a, b) for a, b in zip(first, replay, strict=True)), (
        f"torch.manual_seed({seed}) did not replay the batches drawn with generator=None"
    )
    assert len({tuple(x.flatten().tolist()) for x in first}) == len(first), (
        "successive calls with generator=None repeated a batch: draw from torch's global generator"
    )


@pytest.mark.parametrize(
    ("n", "batch_size", "context_length"), [(9, 1, 8), (50, 1, 3), (20, 64, 1)]
)
def test_get_batch_x_and_y_share_no_memory_for_other_sizes(n, batch_size, context_length):
    """A single window, a single row, one-token contexts: writing into x changes neither y nor the dataset."""
    written = scenario.write_into_x(np.arange(n, dtype=np.int64), batch_size, context_length)
    assert written.windows, (
        f"B={batch_size}, T={context_length}: the batch is not windows of the dataset"
    )
    assert not written.y_changed and not written.dataset_changed, (
        f"B={batch_size}, T={context_length}: writing into x changed "
        + " and ".join(
            w for w, c in (("y", written.y_changed), ("the dataset", written.dataset_changed)) if c
        )
    )
    dataset = np.arange(n, dtype=np.int64)
    assert_rows_are_windows(
        *adapters.run_get_batch(
            dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
        ),
        dataset,
    )


def test_get_batch_reads_do_not_grow_with_context_length_either():
    """Vectorised along time too: the number of dataset reads is the same for T = 2 and T = 200."""
    dataset = np.arange(1000, dtype=np.int64)
    short, long = scenario.batch_reads(dataset, [(4, 2), (4, 200)])
    assert short.reads == long.reads, (
        f"{short.reads} dataset reads for T=2 but {long.reads} for T=200: index all positions at once"
    )
    assert_rows_are_windows(long.x, long.y, dataset)


@pytest.mark.parametrize("batch_size", [0, -3])
def test_get_batch_rejects_a_batch_size_below_one(batch_size):
    """batch_size < 1 is a ValueError naming batch_size."""
    with pytest.raises(ValueError, match="batch_size"):
        adapters.run_get_batch(np.arange(100), batch_size, 4, "cpu", torch.Generator())


@pytest.mark.parametrize("context_length", [0, -1])
def test_get_batch_rejects_a_context_length_below_one(context_length):
    """context_length < 1 is a ValueError naming context_length."""
    with pytest.raises(ValueError, match="context_length"):
        adapters.run_get_batch(np.arange(100), 2, context_length, "cpu", torch.Generator())


def test_get_batch_rejects_a_dataset_that_is_not_one_dimensional():
    """A 2-D array is a ValueError about the dataset (it must be one flat stream of tokens)."""
    with pytest.raises(ValueError, match=r"(?i)dataset|1-D|dimension"):
        adapters.run_get_batch(np.arange(100).reshape(10, 10), 2, 4, "cpu", torch.Generator())


def test_get_batch_rejects_a_dataset_of_floats():
    """A float array is a ValueError: token ids are integers."""
    with pytest.raises(ValueError, match=r"(?i)integer|dtype"):
        adapters.run_get_batch(np.arange(100, dtype=np.float32), 2, 4, "cpu", torch.Generator())


def test_get_batch_short_dataset_error_gives_the_sizes():
    """The short-dataset error states how many tokens there are and how many are needed."""
    with pytest.raises(ValueError, match=r"(?s)(?=.*\b7\b)(?=.*\b1[01]\b)"):
        adapters.run_get_batch(np.arange(7), 2, 10, "cpu", torch.Generator())


def test_get_batch_cuda_without_a_gpu_fails_with_torchs_error():
    """Asking for CUDA on a machine without it raises torch's error (not a silent CPU fallback)."""
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the error case needs a machine without it")
    x, y = adapters.run_get_batch(np.arange(100), 2, 4, "cpu", torch.Generator())
    assert_rows_are_windows(x, y, np.arange(100))
    err = error_raised_by(
        lambda: adapters.run_get_batch(np.arange(100), 2, 4, "cuda", torch.Generator())
    )
    assert isinstance(err, (RuntimeError, AssertionError)), (
        f"expected torch's error, got {type(err).__name__}: {err}"
    )


@pytest.mark.parametrize(("n", "batch_size", "context_length"), [(2, 1, 1), (64, 7, 9)])
def test_get_batch_puts_both_tensors_on_a_meta_device_object(n, batch_size, context_length):
    """device=torch.device("meta"): x and y both int64 meta tensors of shape (B, T), a batch of one included
    (and on the CPU the same call gives the dataset's windows)."""
    dataset = np.arange(n, dtype=np.int32)
    x, y = adapters.run_get_batch(
        dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(1)
    )
    assert_rows_are_windows(x, y, dataset)
    x, y = adapters.run_get_batch(
        dataset, batch_size, context_length, torch.device("meta"), torch.Generator().manual_seed(1)
    )
    for name, t in (("x", x), ("y", y)):
        assert (
            t.device.type == "meta"
            and t.dtype == torch.int64
            and t.shape == (batch_size, context_length)
        ), f"{name}: {t.dtype} of shape {tuple(t.shape)} on {t.device}"
