"""Public tests of data loading: ``get_batch`` (through ``adapters.run_get_batch``).

The loops that sample many batches, count reads and measure memory are the drivers of
``tests/scenarios/data.py``, which run beside your code (see ``tests/boundary.py``); the speed test
times your ``get_batch`` and a baseline loop there as round trips of the same kind.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

import adapters
from tests.fresh import replay_hint, run_seed
from tests.scenarios import data as scenario
from tests.scenarios.data import sampled_starts

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


# ----------------------------------------------------------------------------------------------
# helpers (the graders' hidden tests reuse them)
# ----------------------------------------------------------------------------------------------


def error_raised_by(call: Callable[[], object]) -> Exception:
    """The exception ``call()`` raises, for tests that accept several exception types.

    A stub's NotImplementedError propagates (it is a RuntimeError, so ``pytest.raises(RuntimeError)``
    would swallow it), and not raising at all fails the test.
    """
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - the caller checks the type and the message
        return err
    pytest.fail("expected an error, but the call returned normally")


def assert_uniform_over_valid_starts(starts: np.ndarray, n: int, context_length: int) -> None:
    """Every start in [0, n - context_length) occurs, none outside, with chi-square far from absurd.

    The bound is the chi-square mean plus 10 standard deviations, sqrt(2 * df): a uniform sampler
    exceeds it with probability below 1e-9, and the generator is fixed, so the test cannot flake.
    """
    num_starts = n - context_length
    assert starts.min() >= 0, f"sampled start {starts.min()} < 0"
    assert starts.max() <= num_starts - 1, (
        f"sampled start {starts.max()} but the last valid start is len(dataset) - context_length - 1 = "
        f"{num_starts - 1}: y would run past the end of the dataset"
    )
    counts = np.bincount(starts, minlength=num_starts)
    never = np.flatnonzero(counts == 0)
    assert never.size == 0, (
        f"starts {never.tolist()[:10]} were never sampled in {starts.size} draws (valid starts are "
        f"0..{num_starts - 1}); is the upper bound of randint off by one?"
    )
    expected = starts.size / num_starts
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    df = num_starts - 1
    bound = df + 10 * np.sqrt(2 * df)
    assert chi2 <= bound, (
        f"start counts are far from uniform: chi-square {chi2:.1f} > {bound:.1f} (df={df}); "
        f"least/most frequent start: {counts.argmin()} ({counts.min()}x) / {counts.argmax()} "
        f"({counts.max()}x), expected {expected:.0f}x each"
    )


# ----------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------


def assert_rows_are_windows(x: torch.Tensor, y: torch.Tensor, dataset: np.ndarray) -> None:
    """Each row of x is dataset[s : s + T] for a valid start s, and y the same window shifted by one
    (``dataset`` of distinct tokens: a batch of zeros fails here)."""
    problem = scenario.window_mismatch(x, y, dataset)
    assert problem is None, problem


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("batch_size", "context_length"), [(1, 1), (4, 8), (16, 3)])
def test_get_batch_returns_int64_batch_by_context_on_device(
    batch_size, context_length, device, generator
):
    """x and y are int64 tensors of shape (batch_size, context_length) on the requested device, holding
    windows of the dataset (a batch of one stays 2-d)."""
    dataset = np.arange(50, dtype=np.uint16)
    x, y = adapters.run_get_batch(dataset, batch_size, context_length, device, generator)
    for name, t in (("x", x), ("y", y)):
        assert isinstance(t, torch.Tensor), (
            f"{name} is a {type(t).__name__}, expected a torch.Tensor"
        )
        assert t.shape == (batch_size, context_length), (
            f"{name}.shape {tuple(t.shape)} != {(batch_size, context_length)}"
            + (
                " (a squeeze() dropped the size-one dimensions: keep the batch 2-d)"
                if t.dim() < 2
                else ""
            )
        )
        assert t.dtype == torch.int64, (
            f"{name}.dtype is {t.dtype}; token ids for embeddings must be int64"
        )
        assert t.device.type == torch.device(device).type, (
            f"{name} is on {t.device}, expected {device}"
        )
    assert_rows_are_windows(x.cpu(), y.cpu(), dataset)
    again = adapters.run_get_batch(
        dataset, batch_size, context_length, device, torch.Generator().manual_seed(0)
    )
    assert torch.equal(again[0], x) and torch.equal(again[1], y), (
        "the same generator seed gave another batch"
    )


@pytest.mark.parametrize("given_as", [str, torch.device], ids=["string", "torch.device"])
@pytest.mark.parametrize(("batch_size", "context_length"), [(1, 1), (3, 5)])
def test_get_batch_puts_x_and_y_on_the_requested_device_also_meta(
    batch_size, context_length, given_as
):
    """CPU twin of the CUDA case: on the "meta" device (shapes, no data) both x and y are int64 meta
    tensors of shape (B, T): every returned tensor goes to ``device``, not only x (and on "cpu" the
    same call gives the dataset's windows: the data a meta tensor cannot show). ``device`` may be a
    string or a ``torch.device`` (what ``model.weight.device`` gives)."""
    # distinct tokens 7 apart, in no order: a token names its position, and no token is another's neighbour
    dataset = (np.random.default_rng(0).permutation(40) * 7 + 3).astype(np.uint16)
    x, y = adapters.run_get_batch(
        dataset, batch_size, context_length, given_as("cpu"), torch.Generator().manual_seed(3)
    )
    assert_rows_are_windows(x, y, dataset)
    x, y = adapters.run_get_batch(
        dataset, batch_size, context_length, given_as("meta"), torch.Generator().manual_seed(3)
    )
    for name, t in (("x", x), ("y", y)):
        assert t.device.type == "meta", (
            f"{name} is on {t.device}, expected the requested device meta: move both x and y with .to(device)"
        )
        assert t.shape == (batch_size, context_length) and t.dtype == torch.int64, (
            f"{name} is {t.dtype} of shape {tuple(t.shape)}, expected int64 of shape {(batch_size, context_length)}"
        )


def test_get_batch_windows_are_consecutive_tokens_and_y_is_x_shifted_by_one(generator):
    """Each row of x is dataset[s : s+T] for some start s, and y is dataset[s+1 : s+T+1]."""
    rng = np.random.default_rng(0)
    # distinct values: a token identifies its position
    dataset = rng.permutation(1000).astype(np.int64)
    position = np.argsort(dataset)
    context_length = 16
    x, y = adapters.run_get_batch(dataset, 32, context_length, "cpu", generator)
    for b, (row_x, row_y) in enumerate(zip(x.numpy(), y.numpy(), strict=True)):
        s = int(position[row_x[0]])
        np.testing.assert_array_equal(
            row_x,
            dataset[s : s + context_length],
            err_msg=f"x[{b}] is not the window dataset[{s}:{s + context_length}]",
        )
        np.testing.assert_array_equal(
            row_y,
            dataset[s + 1 : s + context_length + 1],
            err_msg=f"y[{b}] is not dataset[{s + 1}:{s + context_length + 1}], the window x[{b}] shifted by one",
        )


def test_get_batch_advances_the_generator_it_is_given():
    """Successive calls with one generator give different batches: get_batch draws from it, advancing it."""
    dataset = np.arange(100_000)
    (first, first_y), (second, second_y) = scenario.batches_from_one_generator(
        9, dataset, 8, 4, calls=2
    )
    assert_rows_are_windows(first, first_y, dataset)
    assert_rows_are_windows(second, second_y, dataset)
    assert not torch.equal(first, second), (
        "two calls with the same generator gave the same batch: draw from the generator itself (not from a "
        "copy of it, and without re-seeding it), so that it advances"
    )


def test_get_batch_samples_every_valid_start_uniformly_and_no_other():
    """Starts cover exactly {0, ..., len - context_length - 1}, uniformly (chi-square bound, fixed seed)."""
    n, context_length = 40, 8
    starts = sampled_starts(n, context_length, batch_size=64, num_batches=200, seed=0)
    assert_uniform_over_valid_starts(starts, n, context_length)


def test_get_batch_is_reproducible_with_a_seeded_generator():
    """The same generator seed gives the same batch; another seed gives another batch."""
    dataset = np.arange(10_000)
    a = adapters.run_get_batch(dataset, 8, 4, "cpu", torch.Generator().manual_seed(123))
    b = adapters.run_get_batch(dataset, 8, 4, "cpu", torch.Generator().manual_seed(123))
    c = adapters.run_get_batch(dataset, 8, 4, "cpu", torch.Generator().manual_seed(124))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        "same generator seed, different batches: use `generator`"
    )
    assert not torch.equal(a[0], c[0]), (
        "different generator seeds gave the same batch: use `generator` to sample starts"
    )


def test_get_batch_without_a_generator_draws_from_torchs_global_rng():
    """generator=None draws from torch's global generator: successive calls differ, torch.manual_seed replays them."""
    dataset = np.arange(100_000)
    first = scenario.batches_without_a_generator(4, dataset, 8, 4, calls=3)
    replay = scenario.batches_without_a_generator(4, dataset, 8, 4, calls=3)
    other = scenario.batches_without_a_generator(5, dataset, 8, 4, calls=1)
    assert not torch.equal(first[0], first[1]), (
        "two successive calls with generator=None returned the same batch: draw from torch's global generator "
        "(torch.randint(..., generator=None)), which advances, instead of a new torch.Generator() per call"
    )
    for call, (a, b) in enumerate(zip(first, replay, strict=True)):
        assert torch.equal(a, b), (
            f"after torch.manual_seed(4), call {call} with generator=None gave another batch than the first time: "
            "with no generator, draw from torch's global generator (not NumPy's or Python's), so torch.manual_seed "
            "reproduces the batches"
        )
    assert not torch.equal(first[0], other[0]), (
        "torch.manual_seed(4) and torch.manual_seed(5) gave the same batch with generator=None: the batch must come "
        "from torch's global generator"
    )


@pytest.mark.parametrize(("batch_size", "context_length"), [(8, 16), (1, 5)])
def test_get_batch_returns_x_and_y_that_share_no_memory(batch_size, context_length):
    """x and y are new tensors: writing into x changes neither y nor the dataset (no views of one window
    array, nor of the dataset, a batch of one included), and the batch holds the dataset's windows
    (sharing nothing is easy for a batch of zeros)."""
    dataset = np.random.default_rng(2).permutation(1000).astype(np.int64)
    written = scenario.write_into_x(dataset, batch_size, context_length)
    assert written.windows, (
        "the batch is not windows of the dataset (x[b] = dataset[s : s + T], y[b] the window shifted by one)"
    )
    assert not written.y_changed, (
        "adding 1 to x in place changed y: x and y are views of one (B, T + 1) array; copy them apart "
        "(x = torch.from_numpy(windows[:, :-1].copy()), and y likewise)"
    )
    assert not written.dataset_changed, (
        "adding 1 to x in place changed the dataset: x is a view of it; the batch must be a copy of the windows"
    )
    dataset = np.arange(1000, dtype=np.int64)
    assert_rows_are_windows(
        *adapters.run_get_batch(dataset, 8, 16, "cpu", torch.Generator().manual_seed(0)), dataset
    )


def test_get_batch_reads_from_a_read_only_memmap(tmp_path, generator):
    """A read-only np.memmap of uint16 tokens works and gives the batch an in-memory array gives."""
    # values up to 65535: no int16 overflow
    tokens = (np.arange(5000) * 7919 % 65536).astype(np.uint16)
    path = tmp_path / "tokens.bin"
    tokens.tofile(path)
    memmap = np.memmap(path, dtype=np.uint16, mode="r")
    x, y = adapters.run_get_batch(memmap, 8, 32, "cpu", torch.Generator().manual_seed(1))
    x_ref, y_ref = adapters.run_get_batch(tokens, 8, 32, "cpu", torch.Generator().manual_seed(1))
    assert torch.equal(x, x_ref) and torch.equal(y, y_ref), (
        "a memmap and the same tokens in memory gave different batches"
    )
    assert_rows_are_windows(x, y, tokens)
    assert x.min() >= 0 and x.max() <= 65535, (
        f"token ids outside [0, 65535]: {x.min()}..{x.max()} (uint16 overflow?)"
    )


@pytest.mark.parametrize("dtype", [">u2", ">u4", ">i8", "<u4", "<i8", "<i4"])
def test_get_batch_returns_every_id_exactly_whatever_its_dtype_and_byte_order(dtype):
    """Any integer dtype, in either byte order (">u4" is a big-endian uint32): each id comes back as itself,
    as int64, the largest ones too (2**32 - 1 for uint32; ids above 2**24, which float32 would round)."""
    top = min(int(np.iinfo(np.dtype(dtype)).max), 2**40 + 1)
    # distinct ids counting down from the dtype's largest: odd and even, most above 2**24
    dataset = (top - np.random.default_rng(5).permutation(300)).astype(dtype)
    x, y = adapters.run_get_batch(dataset, 16, 6, "cpu", torch.Generator().manual_seed(4))
    assert x.dtype == torch.int64 and y.dtype == torch.int64, f"x is {x.dtype}, y {y.dtype}: int64"
    assert_rows_are_windows(x, y, dataset)


def test_get_batch_on_a_memmap_does_not_read_the_whole_file(tmp_path):
    """Sampling a batch from a 64 MiB memmapped token file keeps the peak resident memory far below 64 MiB."""
    n = 32 * 1024 * 1024  # uint16 tokens: 64 MiB
    path = tmp_path / "tokens.bin"
    writer = np.memmap(path, dtype=np.uint16, mode="w+", shape=(n,))
    # the token at position i: i mod 65536
    writer[:] = np.tile(np.arange(1 << 16, dtype=np.uint16), n >> 16)
    writer.flush()
    del writer
    measured = scenario.peak_rss_growth_kb_of_a_batch(path, "uint16", 8, 64)
    if measured is None:
        pytest.skip(
            "measures peak memory via /proc/self/clear_refs, which this machine does not offer (Linux only)"
        )
    for b, (row_x, row_y) in enumerate(zip(measured.x.tolist(), measured.y.tolist(), strict=True)):
        window = ((row_x[0] + np.arange(65)) % (1 << 16)).tolist()
        assert row_x == window[:-1] and row_y == window[1:], (
            f"x[{b}], y[{b}] are not a window of the file and its shift by one (its token at position i is i mod 65536)"
        )
    growth_mib = measured.growth_kb / 1024
    assert growth_mib < 16, (
        f"peak memory rose by {growth_mib:.0f} MiB for a batch of 8 x 65 tokens from a 64 MiB file: the whole "
        "file was read or copied (np.array / astype / torch.tensor on the dataset?); index only the windows"
    )


def test_get_batch_indexes_the_dataset_a_constant_number_of_times():
    """Vectorised: indexing the dataset does not happen once per row, nor once per position (no Python loop
    over the batch or over the window). Counted in the process that runs get_batch, with an array that
    counts its reads; the batches counted must be the dataset's windows."""
    dataset = np.arange(1000, dtype=np.int64)
    one, many, short, long = scenario.batch_reads(dataset, [(1, 8), (64, 8), (8, 1), (8, 64)])
    for counted in (one, many, short, long):
        assert_rows_are_windows(counted.x, counted.y, dataset)
    assert many.reads == one.reads, (
        f"the dataset was indexed {one.reads} time(s) for a batch of 1 but {many.reads} times for a batch of "
        "64: build all windows with one fancy index, e.g. dataset[starts[:, None] + np.arange(context_length + 1)]"
    )
    # along time too: a loop over the positions of the window is as much a Python loop as one over the rows
    assert long.reads == short.reads, (
        f"the dataset was indexed {short.reads} time(s) for context_length 1 but {long.reads} times for 64: "
        "index every position of every window at once (starts[:, None] + np.arange(context_length + 1)), not "
        "one position at a time"
    )


#: The big batches the speed tests time: many one-token rows, and one long window. Each is long enough
#: that a Python loop over it costs far more than a round trip and its copies, jitter of a loaded
#: machine included (a loop over 2**14 positions took about 3 ms, within reach of a graded call's
#: jitter under load; over 2**17, 25 ms and more).
SPEED_ROWS = 1 << 14
SPEED_WINDOW = 1 << 17
#: Tokens of the dataset the speed tests draw: room for the long window's starts.
SPEED_DATASET = 1 << 18
#: A vectorised get_batch's extra cost per row (or per position) is at least this many times below a Python loop's.
SPEED_MARGIN = 4


@pytest.mark.parametrize(
    ("rows", "context_length", "item", "advice"),
    [
        (
            SPEED_ROWS,
            1,
            "row",
            "index the dataset once for the whole batch, e.g. "
            "dataset[starts[:, None] + np.arange(context_length + 1)], not once per row",
        ),
        (
            1,
            SPEED_WINDOW,
            "position",
            "read each window as one slice or one fancy index, not token by token in a "
            "loop over the positions",
        ),
    ],
    ids=["per-row", "per-position"],
)
def test_get_batch_costs_far_less_per_row_and_per_position_than_a_python_loop(
    rows, context_length, item, advice
):
    """Vectorised, timed: a batch of 16,384 one-token rows, and one window of 131,072 tokens, each cost
    (over a batch of one token) far less per row, per position, than a Python loop over the rows, the
    positions, run where get_batch runs and timed alike in the same run (the best of 5 each, on a
    dataset drawn per run; get_batch's generator seeds are the same in every run, so whether this
    test passes a wrong range of starts does not depend on the draw). get_batch runs with torch on
    one thread, as the loop does (on two threads of a loaded machine a parallel copy can wait for a
    core as long as the loop takes), and no timed call sends its batch back (in grading that costs
    time by its size): ``scenario.batch_on_one_thread``."""
    seed = run_seed()
    dataset = np.random.default_rng(seed).permutation(SPEED_DATASET).astype(np.uint32)  # distinct
    costs = scenario.batch_seconds(dataset, rows, context_length, seed=seed % 2**31)
    assert costs.windows, (
        "the batch is not windows of the dataset (x[b] = dataset[s : s + T], y shifted by one)"
    )
    assert costs.get_batch * SPEED_MARGIN <= costs.loop, (
        f"get_batch took {costs.get_batch * 1e6:.3f} us per {item} for a batch of {rows} x {context_length}, a "
        f"Python loop over the {item}s {costs.loop * 1e6:.3f} us: {advice} ({replay_hint()})"
    )


def test_get_batch_accepts_a_dataset_of_exactly_context_length_plus_one_tokens(generator):
    """With len(dataset) == context_length + 1 the only valid start is 0."""
    dataset = np.arange(10, 19)
    x, y = adapters.run_get_batch(dataset, 5, 8, "cpu", generator)
    assert torch.equal(x, torch.arange(10, 18).expand(5, 8)), (
        f"expected every row to be 10..17, got\n{x}"
    )
    assert torch.equal(y, torch.arange(11, 19).expand(5, 8)), (
        f"expected every row of y to be 11..18, got\n{y}"
    )


@pytest.mark.parametrize("length", [0, 5, 8])
def test_get_batch_rejects_a_dataset_shorter_than_context_length_plus_one(length, generator):
    """A dataset with fewer than context_length + 1 tokens is a ValueError that says so."""
    with pytest.raises(ValueError, match=r"context_length"):
        adapters.run_get_batch(np.arange(length), 2, 8, "cpu", generator)


@pytest.mark.parametrize(
    ("dataset", "batch_size", "context_length", "match"),
    [
        (np.arange(100), -1, 4, r"batch_size must be a positive integer, got -1"),
        (np.arange(100), 2.0, 4, r"batch_size must be a positive integer"),
        (np.arange(100), 2, -2, r"context_length must be a positive integer, got -2"),
        (np.arange(60).reshape(2, 3, 10), 2, 4, r"dataset must be a 1-D array of token ids"),
        (np.arange(100, dtype=np.float64), 2, 4, r"dataset must hold integer token ids, got dtype"),
        (
            np.linspace(0, 9, 50, dtype=np.float16),
            2,
            4,
            r"dataset must hold integer token ids, got dtype",
        ),
        (np.arange(3), 2, 5, r"(?s)(?=.*\b3 tokens\b)(?=.*context_length \+ 1 = 6\b)"),
    ],
    ids=[
        "negative-batch-size",
        "float-batch-size",
        "negative-context",
        "3-d-dataset",
        "float64-ids",
        "float16-ids",
        "short-dataset",
    ],
)
def test_get_batch_rejects_bad_input_with_a_value_error(dataset, batch_size, context_length, match):
    """Every documented bad input is a ValueError (the type a caller catches) with the documented message:
    a float array is never taken as token ids, however integral its values."""
    with pytest.raises(ValueError, match=match) as raised:
        adapters.run_get_batch(
            dataset, batch_size, context_length, "cpu", torch.Generator().manual_seed(0)
        )
    if "dtype" in match:
        assert str(dataset.dtype) in str(raised.value), (
            f"the message should name the dtype {dataset.dtype}"
        )


def test_get_batch_unknown_device_fails_with_torchs_error(generator):
    """An unknown device string fails with torch's own RuntimeError about the device (where a known one
    gives the dataset's windows)."""
    x, y = adapters.run_get_batch(np.arange(100), 2, 4, "cpu", generator)
    assert_rows_are_windows(x, y, np.arange(100))
    err = error_raised_by(lambda: adapters.run_get_batch(np.arange(100), 2, 4, "tpu9", generator))
    assert isinstance(err, RuntimeError) and "device" in str(err).lower(), (
        f"expected torch's RuntimeError about the device string 'tpu9', got {type(err).__name__}: {err}"
    )
