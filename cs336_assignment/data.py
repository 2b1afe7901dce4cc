"""Data loading for language modelling: random windows of a long token stream.

A tokenized corpus is one long 1-D array of token ids, ``dataset[0 .. n)``. A training batch is
``batch_size`` windows of ``context_length + 1`` consecutive tokens, each starting at a uniformly
random position; the model reads the first ``context_length`` tokens of a window (``x``) and
predicts each next one (``y``, the same window shifted by one)::

    dataset = [t0 t1 t2 t3 t4 t5 t6 t7 t8 t9]            n = 10, context_length = 4
    start s = 3:   x = [t3 t4 t5 t6]   y = [t4 t5 t6 t7]
    valid starts:  s = 0 .. n - context_length - 1       (n - context_length of them)

Corpora are far bigger than RAM, so they live on disk as raw token files opened with
``np.memmap``: indexing a memmap reads only the pages it touches, so a batch costs
``batch_size * (context_length + 1)`` tokens of I/O however large the file is.

Deliberately left out: sampling without replacement / epochs, document boundaries and padding,
multi-worker prefetching (``torch.utils.data.DataLoader``), sharding across ranks.

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: numpy (np.memmap, np.load with mmap_mode), torch tensors and torch.Generator.
    Not allowed: as in every part: torch.optim's optimizers, torch.nn.Linear or F.linear,
        FlopCounterMode or the profiler, tokenizer libraries, torch.amp.GradScaler, reaching the
        tests or the interpreter's insides.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Int
from torch import Tensor

from cs336_assignment.files import atomic_write
from cs336_assignment.validation import check_positive_int


def get_batch(
    dataset: npt.NDArray,
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[Int[Tensor, " batch context"], Int[Tensor, " batch context"]]:
    """Sample ``batch_size`` random windows of ``dataset`` as (inputs, next-token targets).

    Vectorised (graded): the whole batch is read from ``dataset`` with a number of indexing
    operations that does not grow with ``batch_size`` or ``context_length`` (one fancy index,
    ``dataset[starts[:, None] + np.arange(context_length + 1)]``, does it); your own test run
    counts the reads, and the tests time a batch of 16,384 one-token rows and one window of 131,072
    tokens against Python loops over the rows and over the positions, with torch on one thread as
    the loops run (per row and per position, it must be several times cheaper). Never convert the
    whole dataset (``np.array(dataset)``, ``torch.tensor(dataset)``, ``dataset.astype(...)``): on a
    memmap that reads the file into memory, and the tests measure the memory a batch takes.

    Args:
        dataset: 1-D integer array of token ids of any integer dtype, in either byte order (an
            ``np.ndarray`` or a read-only ``np.memmap``; a file written on a big-endian machine
            is ``dtype=">u2"``, which ``torch.from_numpy`` refuses: convert the windows with numpy).
            It is never read whole: only the sampled windows are.
        batch_size: number of windows B, at least 1.
        context_length: tokens per window T, at least 1; ``len(dataset)`` must be at least T + 1.
        device: where the tensors go (``"cpu"``, ``"cuda:0"``, ``"meta"``, ..., a string or a
            ``torch.device``): both ``x`` and ``y`` go there (the tests check placement without a
            GPU on ``"meta"``, which holds shapes and no data). An unknown device fails with
            torch's own error. On CUDA the batch is staged in pinned memory and copied with
            ``non_blocking=True``, so the copy overlaps with work already queued on the GPU.
        generator: the CPU ``torch.Generator`` that draws the start positions (for
            reproducibility): the same seed gives the same batch, and successive calls advance
            it. ``None`` draws from torch's global generator (``torch.randint(...,
            generator=None)``), never NumPy's or a new ``torch.Generator()``: successive calls
            give different batches, and ``torch.manual_seed`` replays them.

    Returns:
        ``(x, y)``, both int64 of shape ``(B, T)`` on ``device`` (2-d also when B or T is 1: a
        batch of one is ``(1, T)``, never squeezed), with, for each row b and a start
        ``s_b`` drawn uniformly from every valid position ``{0, ..., len(dataset) - T - 1}``::

            x[b] = dataset[s_b     : s_b + T]
            y[b] = dataset[s_b + 1 : s_b + T + 1]        # y[b, i] is the token after x[b, i]

    Token ids come back exactly (no overflow: a uint16 65535 or a uint32 2**32 - 1 stays itself;
    never through a float: float32 rounds ids above 2**24, 16,777,217 to 16,777,216).
    ``x`` and ``y`` are new tensors: they share memory neither with each other nor with
    ``dataset``, so writing into ``x`` in place changes nothing else.

    Raises:
        ValueError: if ``batch_size`` or ``context_length`` is not an integer of at least 1, naming
            it (``validation.check_positive_int``): "batch_size must be a positive integer, got 0",
            "context_length must be a positive integer, got 0".
        ValueError: if the dataset is not 1-D: "dataset must be a 1-D array of token ids".
        ValueError: if the dataset does not hold integers: "dataset must hold integer token
            ids, got dtype float32". A float array is never taken as token ids, even when its
            values are whole numbers.
        ValueError: if the dataset is shorter than ``context_length + 1``; the message gives
            both sizes and names ``context_length``: "dataset has 7 tokens but a window needs
            context_length + 1 = 11".
        RuntimeError: torch's own, for an unknown device or CUDA on a machine without it.

    >>> x, y = get_batch(np.arange(10), batch_size=2, context_length=4, device="cpu",
    ...                  generator=torch.Generator().manual_seed(0))
    >>> x.shape, x.dtype, bool((y == x + 1).all())
    (torch.Size([2, 4]), torch.int64, True)
    """
    # BEGIN SOLUTION
    device = torch.device(device)  # an unknown device fails here, with torch's message
    check_positive_int(batch_size=batch_size, context_length=context_length)
    if dataset.ndim != 1:
        raise ValueError(
            f"dataset must be a 1-D array of token ids, got shape {dataset.shape}; flatten it first"
        )
    if not np.issubdtype(dataset.dtype, np.integer):
        raise ValueError(f"dataset must hold integer token ids, got dtype {dataset.dtype}")
    num_starts = len(dataset) - context_length  # valid starts: 0 .. num_starts - 1
    if num_starts < 1:
        raise ValueError(
            f"dataset has {len(dataset)} tokens but a window needs context_length + 1 = "
            f"{context_length + 1}; use a longer dataset or a smaller context_length"
        )
    starts = torch.randint(0, num_starts, (batch_size,), generator=generator).numpy()
    # One fancy index for the whole batch: (B, 1) + (T + 1,) -> (B, T + 1) positions. On a memmap
    # this reads just those tokens; the result is an ordinary in-memory array.
    windows = np.asarray(dataset[starts[:, None] + np.arange(context_length + 1)], dtype=np.int64)
    x = torch.from_numpy(windows[:, :-1].copy())
    y = torch.from_numpy(windows[:, 1:].copy())
    if device.type == "cuda":
        # Page-locked host memory lets the copy run asynchronously with respect to the host.
        x, y = x.pin_memory(), y.pin_memory()
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    return x.to(device), y.to(device)
    # END SOLUTION


def save_tokens(
    path: str | os.PathLike, tokens: npt.ArrayLike, dtype: npt.DTypeLike = np.uint16
) -> Path:
    """Write ``tokens`` to ``path`` as a raw array of ``dtype`` (no header), atomically.

    The format is the one ``load_tokens`` (and nanoGPT-style loaders) memory-map: ``len(tokens)``
    values of ``dtype`` in native byte order. ``uint16`` holds vocabularies of up to 65,536 tokens
    in 2 bytes each; use ``uint32`` beyond that. The file is written next to ``path`` under a
    temporary name and renamed into place, so an interrupted write never leaves a truncated
    ``path`` behind (and never destroys a file already there).

    Raises:
        ValueError: if ``tokens`` is not 1-D integers, or a token id does not fit in ``dtype``.
    """
    path = Path(path)
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype must be an integer type such as np.uint16, got {dtype}")
    array = np.asarray(tokens)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"tokens must be a 1-D sequence of integer ids, got shape {array.shape} of {array.dtype}"
        )
    if array.size:
        info = np.iinfo(dtype)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise ValueError(
                f"token ids span [{low}, {high}] but {dtype} holds only [{info.min}, {info.max}]; "
                "pass a wider dtype (np.uint32 for vocabularies above 65,536)"
            )
    with atomic_write(path) as f:
        array.astype(dtype, copy=False).tofile(f)
    return path


def load_tokens(path: str | os.PathLike, dtype: npt.DTypeLike = np.uint16) -> np.memmap:
    """Memory-map a token file read-only: nothing is read until indexed.

    Two formats: a raw array written by ``save_tokens`` (any name, ``dtype`` says how to read it),
    or a ``.npy`` file such as ``cs336 encode`` writes (its header gives the dtype, which must then
    be an integer type; ``dtype`` is ignored).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is empty, or its size is not a multiple of ``dtype``'s item size
            (a sign it was written with another dtype), or a ``.npy`` file is not 1-D integers.
    """
    path = Path(path)
    dtype = np.dtype(dtype)
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path} is empty; write tokens into it with save_tokens first")
    if path.suffix == ".npy":
        tokens = np.load(path, mmap_mode="r")
        if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(
                f"{path} holds a {tokens.dtype} array of shape {tokens.shape}, not 1-D token ids"
            )
        return tokens
    if size % dtype.itemsize:
        raise ValueError(
            f"{path} has {size} bytes, not a multiple of {dtype}'s {dtype.itemsize}; "
            "was it written with another dtype? Pass the dtype it was saved with"
        )
    return np.memmap(path, dtype=dtype, mode="r")
