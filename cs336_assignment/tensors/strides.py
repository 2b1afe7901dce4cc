"""What a tensor is: a pointer into storage plus a shape, strides and an offset.

A PyTorch tensor does not own a grid of numbers. It owns (a reference to) a *storage*, a flat
1-D run of bytes, plus three small pieces of metadata that say how to walk it:

    shape           how many steps along each dimension        x.shape
    strides         how many elements to skip per step         x.stride()
    storage_offset  where element [0, 0, ...] lives            x.storage_offset()

The element ``x[i_0, ..., i_{n-1}]`` lives at storage position

    position = storage_offset + sum_d i_d * stride_d

Worked example. ``x = torch.arange(6).view(2, 3)`` has storage ``[0 1 2 3 4 5]``, shape (2, 3),
strides (3, 1) (a step along a row skips 1 element, a step down a column skips 3) and offset 0:

    x = [[0 1 2]        x[1, 2]  ->  0 + 1*3 + 2*1 = 5
         [3 4 5]]

Operations that only change the metadata are free *views* of the same storage:

    x.t()            shape (3, 2)  strides (1, 3)  offset 0     x.t()[2, 1]      -> 0 + 2*1 + 1*3 = 5
    x[1:, ::2]       shape (1, 2)  strides (3, 2)  offset 3     x[1:, ::2][0, 1] -> 3 + 0*3 + 1*2 = 5
    x[:, :1].expand(2, 4)  shape (2, 4)  strides (3, 0)         every column reads the same element

A tensor is *contiguous* when its strides are the row-major ones (``contiguous_strides``), so its
elements sit in the storage in order with no gaps. ``view`` needs strides it can re-express for
the new shape; when they do not exist (``x.t().view(6)``), the data must be copied (``reshape``
does that silently, ``contiguous()`` does it explicitly), which costs memory and bandwidth.

Deliberately left out: naming dimensions instead of counting them (einops and jaxtyping:
``named_dims.py``), devices and pinned memory, dtype views (``x.view(torch.int32)``) beyond
what ``is_view_of`` needs, non-default memory formats (``channels_last``), autograd's view
tracking (``x._base``), and the exact rules ``reshape`` uses to find view-compatible strides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from jaxtyping import Shaped
from torch import Tensor

from cs336_assignment.validation import check_count


def flat_index(index: Sequence[int], strides: Sequence[int], storage_offset: int = 0) -> int:
    """The storage position of the element at ``index``: ``storage_offset + sum_d index[d] * strides[d]``.

    ``index`` must be non-negative (without a shape there is nothing to count a negative index
    from) and have one entry per stride. ``flat_index((), (), k)`` is ``k``: a 0-d tensor's only
    element sits at its offset.

    >>> flat_index((1, 2), strides=(3, 1))          # x = arange(6).view(2, 3); x[1, 2]
    5
    >>> flat_index((0, 1), strides=(3, 2), storage_offset=3)   # x[1:, ::2][0, 1]
    5

    Raises:
        ValueError: if ``index`` and ``strides`` differ in length; the message shows both as
            tuples: "index (1, 2) has 2 entries but strides (3, 1, 1) has 3".
        ValueError: if an entry of ``index`` is negative; the message says "negative" and shows
            the index.
        ValueError: if ``storage_offset`` is not an integer ``>= 0``; the message names its value
            (``validation.check_count``: "storage_offset must be a non-negative integer, got -3").
    """
    # BEGIN SOLUTION
    if len(index) != len(strides):
        raise ValueError(
            f"index {tuple(index)} has {len(index)} entries but strides {tuple(strides)} has "
            f"{len(strides)}; give one index per dimension"
        )
    if any(i < 0 for i in index):
        raise ValueError(
            f"index {tuple(index)} has a negative entry; flat_index knows no shape to count from "
            "the end, so convert negative indices with the shape first"
        )
    check_count(storage_offset=storage_offset)
    return storage_offset + sum(i * s for i, s in zip(index, strides, strict=True))
    # END SOLUTION


def storage_view(x: Tensor) -> Shaped[Tensor, " n"]:
    """(Given.) The whole storage under ``x`` as a flat 1-D tensor of ``x.dtype``, sharing memory.

    ``storage_view(x)[flat_index(i, x.stride(), x.storage_offset())]`` is ``x[i]``; the storage
    may hold elements ``x`` never reads (a slice, a strided view).

    >>> x = torch.arange(6).view(2, 3)[1:, ::2]
    >>> storage_view(x)
    tensor([0, 1, 2, 3, 4, 5])
    """
    n = x.untyped_storage().nbytes() // x.element_size()
    return torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage(), 0, (n,), (1,))


def element_at(x: Shaped[Tensor, " *dims"], index: Sequence[int]) -> Shaped[Tensor, ""]:
    """``x[index]`` as a 0-d tensor, read from the storage at ``flat_index`` (not by indexing ``x``).

    Works for any view (transposed, sliced with steps, expanded with stride 0) because it uses the
    view's own ``x.stride()`` and ``x.storage_offset()``. Negative entries count from the end of
    their dimension, as in ``x[index]``; use ``storage_view`` to see the storage.

    The result has ``x``'s dtype and shape ``()`` and lives on ``x``'s device: it is an element of
    the storage view, not a value rebuilt with ``torch.tensor(v.item())`` (which lands on the CPU in
    a default dtype, and fails on ``meta``). Any dtype works (bool, int8, bfloat16, ...):
    ``storage_view`` views the storage in ``x.dtype``.

    >>> x = torch.arange(6).view(2, 3)
    >>> element_at(x.t(), (2, 1))
    tensor(5)

    Raises:
        ValueError: if ``index`` does not have one entry per dimension; the message shows the
            index and ``x``'s shape as tuples: "index (1,) has 1 entries but x has 2 dimensions
            (shape (2, 3))".
        ValueError: if an entry is outside ``-size..size-1`` of its dimension (a dimension of
            size 0 has no valid index); the message names the entry and the size:
            "index 3 is out of range for dimension 1 of size 3".
    """
    # BEGIN SOLUTION
    if len(index) != x.ndim:
        raise ValueError(
            f"index {tuple(index)} has {len(index)} entries but x has {x.ndim} dimensions "
            f"(shape {tuple(x.shape)}); give one index per dimension"
        )
    resolved = []
    for d, (i, size) in enumerate(zip(index, x.shape, strict=True)):
        if not -size <= i < size:
            raise ValueError(
                f"index {i} is out of range for dimension {d} of size {size} "
                f"(shape {tuple(x.shape)}); valid indices are {-size}..{size - 1}"
            )
        resolved.append(i + size if i < 0 else i)
    position = flat_index(resolved, x.stride(), int(x.storage_offset()))
    return storage_view(x)[position]
    # END SOLUTION


def same_storage(x: Tensor, y: Tensor) -> bool:
    """True when ``x`` and ``y`` are windows onto the same storage (writing one may change the other).

    Compares the storages' addresses, ``untyped_storage().data_ptr()``, not the tensors' own
    ``data_ptr()`` (which already includes the offset: ``x[1:]`` starts elsewhere but shares).
    Storages of zero bytes have no address (``data_ptr() == 0``), so all empty tensors count as
    sharing one: there is nothing in them to copy or overwrite.

    >>> x = torch.arange(6)
    >>> same_storage(x, x[1:].view(5)), same_storage(x, x.clone())
    (True, False)
    """
    # BEGIN SOLUTION
    return x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    # END SOLUTION


def _byte_addresses(x: Tensor) -> Tensor:
    """Every byte position in ``x``'s storage that ``x`` reads (with repeats, for expanded views)."""
    size = x.element_size()
    n = x.untyped_storage().nbytes() // size
    first = torch.arange(n).as_strided(x.shape, x.stride(), x.storage_offset()).reshape(-1)
    return (first[:, None] * size + torch.arange(size)).reshape(-1)


def is_view_of(y: Tensor, x: Tensor) -> bool:
    """True when ``y`` reads only memory that ``x`` reads: same storage, and every byte of ``y``
    is a byte of ``x``.

    Sharing a storage is not enough: ``base[0]`` and ``base[1]`` share one but neither is a view
    of the other. ``x`` is a view of itself; an empty ``y`` on ``x``'s storage reads nothing and is
    a view. (``_byte_addresses`` lists the bytes each tensor reads.)

    >>> base = torch.arange(6).view(2, 3)
    >>> is_view_of(base.t()[1:], base), is_view_of(base[1], base[0]), is_view_of(base, base[0])
    (True, False, False)
    """
    # BEGIN SOLUTION
    if not same_storage(x, y):
        return False
    return bool(torch.isin(_byte_addresses(y), _byte_addresses(x)).all())
    # END SOLUTION


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides for ``shape``: ``stride_d = prod_{e > d} shape_e`` (the last dimension moves fastest).

    ``shape`` may be a tuple, a list or a ``torch.Size``. A dimension of size 0 counts as size 1
    here, as in ``torch.empty(shape).stride()``.

    >>> contiguous_strides((5, 2, 3))
    (6, 3, 1)
    """
    # BEGIN SOLUTION
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
    # END SOLUTION


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a tensor with this shape and these strides is contiguous, by ``Tensor.is_contiguous()``'s rule.

    The rule: the elements must sit in row-major order with no gaps, so every dimension of size
    greater than 1 must have its ``contiguous_strides`` value. Dimensions of size 1 are ignored
    (their stride is never used to step), a stride-0 (expanded) dimension of size > 1 is not
    contiguous (it reads the same elements again), and a tensor with no elements is contiguous.

    ``shape`` may be a ``torch.Size`` and ``strides`` the tuple ``x.stride()`` returns.

    >>> is_contiguous((3, 2), (2, 1)), is_contiguous((2, 3), (1, 2)), is_contiguous((3, 1), (1, 7))
    (True, False, True)

    Raises:
        ValueError: if ``shape`` and ``strides`` differ in length; the message shows both as
            tuples: "shape (2, 3) has 2 dimensions but strides (1,) has 1".
        ValueError: if a size is negative; the message shows the shape: "shape (2, -1) has a
            negative size".
    """
    # BEGIN SOLUTION
    if len(shape) != len(strides):
        raise ValueError(
            f"shape {tuple(shape)} has {len(shape)} dimensions but strides {tuple(strides)} has "
            f"{len(strides)}; give one stride per dimension"
        )
    if any(size < 0 for size in shape):
        raise ValueError(f"shape {tuple(shape)} has a negative size; sizes must be >= 0")
    if math.prod(shape) == 0:
        return True
    expected = contiguous_strides(shape)
    return all(
        stride == want
        for size, stride, want in zip(shape, strides, expected, strict=True)
        if size != 1
    )
    # END SOLUTION


def view_or_copy(x: Tensor, shape: Sequence[int]) -> tuple[Tensor, bool]:
    """``x`` with a new ``shape``: a view sharing ``x``'s storage when its strides allow one,
    otherwise a contiguous copy. Returns ``(tensor, is_view)``.

    ``is_view`` is True exactly when ``x.view(shape)`` would succeed. One entry of ``shape`` may
    be -1, inferred from the others as in ``view``; the number of elements must not change.

    A view shares ``x``'s storage (writing to it changes ``x``); a copy is contiguous and has a
    storage of its own. The values always equal ``x.reshape(shape)``, and either result has
    ``x``'s dtype and lives on ``x``'s device.

    >>> x = torch.arange(6).view(2, 3)
    >>> view_or_copy(x, (3, 2))[1], view_or_copy(x.t(), (6,))[1]
    (True, False)

    Raises:
        ValueError: if ``shape`` has a size below -1 or more than one -1; the message shows the
            shape as a tuple: "shape (3, -5) is invalid".
        ValueError: if ``shape`` holds another number of elements than ``x`` (``x.numel()``, not
            its storage's size); the message shows the shape and both counts: "shape (4, 2) holds
            8 elements but x (shape (2, 3)) has 6".
        ValueError: if the -1 cannot be inferred; the message shows the shape and ``x``'s count:
            "cannot infer the -1 in shape (4, -1): 6 elements of x".
    """
    # BEGIN SOLUTION
    shape = tuple(shape)
    if shape.count(-1) > 1 or any(size < -1 for size in shape):
        raise ValueError(
            f"shape {shape} is invalid: sizes must be >= 0, with at most one -1 to infer"
        )
    known = math.prod(size for size in shape if size != -1)
    if -1 in shape:
        if known == 0 or x.numel() % known != 0:
            raise ValueError(
                f"cannot infer the -1 in shape {shape}: {x.numel()} elements of x "
                f"(shape {tuple(x.shape)}) are not a multiple of {known}"
            )
    elif known != x.numel():
        raise ValueError(
            f"shape {shape} holds {known} elements but x (shape {tuple(x.shape)}) has {x.numel()}; "
            "the product of the new shape must equal x.numel()"
        )
    y = x.reshape(shape)  # a view if possible, else a copy: find out which
    return y, is_view_of(y, x)
    # END SOLUTION


def copy_bytes(op: Callable[[Tensor], Tensor], x: Tensor) -> int:
    """(Given.) Extra memory, in bytes, that ``op(x)`` allocates: 0 for a view, else the result's size.

    >>> x = torch.zeros(4, 8)                                       # float32: 4 bytes each
    >>> copy_bytes(lambda t: t.t(), x), copy_bytes(lambda t: t.t().contiguous(), x)
    (0, 128)
    """
    y = op(x)
    return 0 if is_view_of(y, x) else y.untyped_storage().nbytes()
