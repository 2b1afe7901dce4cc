"""What a tensor is: a pointer into storage plus a shape, strides and an offset.

(Corpus entry ``strides-numpy``: written from the handout's docstrings, in numpy. Positions are
numpy dot products and index grids, the element is read by ``as_strided`` at its position,
``view_or_copy`` asks ``view`` and falls back on ``contiguous``, and the mistakes are a
``ValueError`` subclass of this module's own.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from jaxtyping import Shaped
from torch import Tensor


class StrideError(ValueError):
    """A shape, stride, index or offset that describes no element."""


def _ints(values: Sequence[int]) -> np.ndarray:
    return np.asarray(list(values), dtype=np.int64).reshape(-1)


def flat_index(index: Sequence[int], strides: Sequence[int], storage_offset: int = 0) -> int:
    """The storage position of the element at ``index``: ``storage_offset + sum_d index[d] * strides[d]``."""
    index, strides = tuple(index), tuple(strides)
    if len(index) != len(strides):
        raise StrideError(
            f"index {index} has {len(index)} entries but strides {strides} has {len(strides)}"
        )
    if type(storage_offset) is not int or storage_offset < 0:
        raise StrideError(f"storage_offset must be a non-negative integer, got {storage_offset!r}")
    position = _ints(index)
    if (position < 0).any():
        raise StrideError(f"index {index} is negative somewhere; no shape to count it from")
    return storage_offset + int(np.dot(position, _ints(strides)))


def storage_view(x: Tensor) -> Shaped[Tensor, " n"]:
    """(Given.) The whole storage under ``x`` as a flat 1-D tensor of ``x.dtype``, sharing memory."""
    n = x.untyped_storage().nbytes() // x.element_size()
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage(), 0, (n,), (1,))


def element_at(x: Shaped[Tensor, " *dims"], index: Sequence[int]) -> Shaped[Tensor, ""]:
    """``x[index]`` as a 0-d tensor, read from the storage at ``flat_index`` (not by indexing ``x``)."""
    index = tuple(index)
    if len(index) != x.dim():
        raise StrideError(
            f"index {index} has {len(index)} entries but x has {x.dim()} dimensions "
            f"(shape {tuple(x.shape)})"
        )
    sizes = np.asarray(x.shape, dtype=np.int64)
    wanted = _ints(index)
    for d in np.flatnonzero((wanted < -sizes) | (wanted >= sizes)):
        raise StrideError(f"index {index[d]} is out of range for dimension {d} of size {sizes[d]}")
    position = flat_index(
        tuple(int(i) for i in np.where(wanted < 0, wanted + sizes, wanted)),
        x.stride(),
        x.storage_offset(),
    )
    return storage_view(x).as_strided((), (), position)


def same_storage(x: Tensor, y: Tensor) -> bool:
    """True when ``x`` and ``y`` are windows onto the same storage (writing one may change the other)."""
    pointers = {t.untyped_storage().data_ptr() for t in (x, y)}
    return len(pointers) == 1


def _byte_addresses(x: Tensor) -> Tensor:
    """(Given.) Every byte position in ``x``'s storage that ``x`` reads (with repeats, for expanded views)."""
    size = x.element_size()
    n = x.untyped_storage().nbytes() // size
    first = torch.arange(n).as_strided(x.shape, x.stride(), x.storage_offset()).reshape(-1)
    return (first[:, None] * size + torch.arange(size)).reshape(-1)


def _bytes_read(x: Tensor) -> np.ndarray:
    """The byte positions ``x`` reads, as a numpy index grid over its shape."""
    if x.numel() == 0:
        return np.empty(0, dtype=np.int64)
    grid = np.indices(tuple(x.shape), dtype=np.int64).reshape(x.dim(), -1)
    elements = x.storage_offset() + _ints(x.stride()) @ grid
    return np.unique(
        (elements[:, None] * x.element_size() + np.arange(x.element_size())).reshape(-1)
    )


def is_view_of(y: Tensor, x: Tensor) -> bool:
    """True when ``y`` reads only memory that ``x`` reads: same storage, and every byte of ``y`` is a byte of ``x``."""
    if not same_storage(x, y):
        return False
    return bool(np.isin(_bytes_read(y), _bytes_read(x), assume_unique=True).all())


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides for ``shape`` (a dimension of size 0 counts as size 1)."""
    sizes = np.maximum(_ints(shape), 1)
    if sizes.size == 0:
        return ()
    from_here = np.cumprod(sizes[::-1])[::-1]  # from_here[d] = prod(sizes[d:])
    return tuple(int(s) for s in np.append(from_here[1:], 1))


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a tensor with this shape and these strides is contiguous, by ``Tensor.is_contiguous()``'s rule."""
    shape, strides = tuple(shape), tuple(strides)
    if len(shape) != len(strides):
        raise StrideError(
            f"shape {shape} has {len(shape)} dimensions but strides {strides} has {len(strides)}"
        )
    sizes = _ints(shape)
    if (sizes < 0).any():
        raise StrideError(f"shape {shape} has a negative size")
    if (sizes == 0).any():
        return True
    stepped = sizes > 1
    return bool(np.array_equal(_ints(strides)[stepped], _ints(contiguous_strides(shape))[stepped]))


def view_or_copy(x: Tensor, shape: Sequence[int]) -> tuple[Tensor, bool]:
    """``x`` with a new ``shape``: a view sharing ``x``'s storage when its strides allow one, else a contiguous copy."""
    shape = tuple(shape)
    sizes = _ints(shape)
    if (sizes < -1).any() or (sizes == -1).sum() > 1:
        raise StrideError(f"shape {shape} is invalid")
    known = int(np.prod(sizes[sizes != -1]))
    if -1 in shape and (known == 0 or x.numel() % known):
        raise StrideError(f"cannot infer the -1 in shape {shape}: {x.numel()} elements of x")
    if -1 not in shape and known != x.numel():
        raise StrideError(
            f"shape {shape} holds {known} elements but x (shape {tuple(x.shape)}) has {x.numel()}"
        )
    try:
        return x.view(shape), True
    except RuntimeError:  # no strides express the new shape over this storage
        return x.contiguous().view(shape), False


def copy_bytes(op: Callable[[Tensor], Tensor], x: Tensor) -> int:
    """(Given.) Extra memory, in bytes, that ``op(x)`` allocates: 0 for a view, else the result's size."""
    y = op(x)
    return 0 if is_view_of(y, x) else y.untyped_storage().nbytes()
