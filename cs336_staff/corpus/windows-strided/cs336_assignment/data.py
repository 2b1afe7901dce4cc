"""Data loading for language modelling: random windows of a long token stream.

(Corpus entry ``windows-strided``: written from the handout's docstrings. ``get_batch`` takes a
strided window view of the dataset (``sliding_window_view``: no data read) and picks the sampled
rows with one fancy index; the batch becomes one int64 tensor whose two slices are cloned apart;
its checks come first, in the order the docstring lists them, and raise a ``ValueError`` subclass.)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Int
from numpy.lib.stride_tricks import sliding_window_view
from torch import Tensor

from cs336_assignment.files import atomic_write


class BatchError(ValueError):
    """An argument of ``get_batch`` that no batch can be drawn with."""


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BatchError(f"{name} must be a positive integer, got {value!r}")


def get_batch(
    dataset: npt.NDArray,
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[Int[Tensor, " batch context"], Int[Tensor, " batch context"]]:
    """Sample ``batch_size`` random windows of ``dataset`` as (inputs, next-token targets)."""
    _positive("batch_size", batch_size)
    _positive("context_length", context_length)
    if dataset.ndim != 1:
        raise BatchError(f"dataset must be a 1-D array of token ids (its shape is {dataset.shape})")
    if dataset.dtype.kind not in "iu":
        raise BatchError(f"dataset must hold integer token ids, got dtype {dataset.dtype}")
    width = context_length + 1
    if dataset.shape[0] < width:
        raise BatchError(
            f"dataset has {dataset.shape[0]} tokens but a window needs context_length + 1 = {width}"
        )
    target = torch.device(device)
    windows = sliding_window_view(dataset, width)  # (n - T, T + 1), a view: nothing read yet
    starts = torch.randint(windows.shape[0], size=(int(batch_size),), generator=generator)
    batch = torch.from_numpy(
        windows[starts.numpy()].astype(np.int64)
    )  # the only read of the dataset
    x, y = batch[:, :-1].clone(), batch[:, 1:].clone()
    if target.type == "cuda":
        return x.pin_memory().to(target, non_blocking=True), y.pin_memory().to(
            target, non_blocking=True
        )
    return x.to(target), y.to(target)


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
