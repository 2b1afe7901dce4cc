"""Bug zoo for part 1 (tensors: storage, strides, views, einops)."""

from __future__ import annotations

from cs336_staff.mutants import Mutant

FILE = "cs336_assignment/tensors.py"
TESTS = ("tests/test_tensors.py",)

MUTANTS = [
    Mutant(
        name="tensors-flat-index-ignores-storage-offset",
        file=FILE,
        old="    return storage_offset + sum(i * s for i, s in zip(index, strides, strict=True))",
        new="    return sum(i * s for i, s in zip(index, strides, strict=True))",
        why="thinks element [0, 0] is always at the start of the storage, forgetting slices like x[1:]",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-element-at-assumes-contiguous-strides",
        file=FILE,
        old="    position = flat_index(resolved, x.stride(), x.storage_offset())",
        new="    position = flat_index(resolved, contiguous_strides(x.shape), x.storage_offset())",
        why="derives the strides from the shape (row-major) instead of asking the view for x.stride()",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-same-storage-compares-tensor-pointers",
        file=FILE,
        old="    return x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()",
        new="    return x.data_ptr() == y.data_ptr()",
        why="compares where each tensor's first element is, which differs for x and x[1:] though they share storage",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-is-contiguous-checks-size-one-dims",
        file=FILE,
        old="        if size != 1\n",
        new="",
        why="requires the row-major stride on every dimension, though torch ignores strides of size-1 dims",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-is-contiguous-forgets-empty-tensors",
        file=FILE,
        old="    if math.prod(shape) == 0:\n        return True\n",
        new="",
        why="forgets that a tensor with no elements is contiguous whatever its strides",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-always-copies",
        file=FILE,
        old="    y = x.reshape(shape)  # a view if possible, else a copy: find out which",
        new="    y = x.contiguous().clone().view(shape)",
        why="plays safe by always copying, paying memory and bandwidth even when a free view exists",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-views-iff-contiguous",
        file=FILE,
        old="    return y, is_view_of(y, x)",
        new="    return y, x.is_contiguous()",
        why="believes only contiguous tensors can be viewed, but e.g. x.t().view(3, 2) or splitting a dim of a slice works",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-claims-view-after-copy",
        file=FILE,
        old="    return y, is_view_of(y, x)",
        new="    return y, True",
        why="trusts reshape to always return a view; it silently copies when the strides do not allow one",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-split-heads-d-heads-order",
        file=FILE,
        old='einops.rearrange(x, "... seq (heads d) -> ... heads seq d", heads=num_heads)',
        new='einops.rearrange(x, "... seq (d heads) -> ... heads seq d", heads=num_heads)',
        why="groups the width as (d heads), so each head gets every num_heads-th feature instead of a block",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-merge-heads-d-heads-order",
        file=FILE,
        old='einops.rearrange(x, "... heads seq d -> ... seq (heads d)")',
        new='einops.rearrange(x, "... heads seq d -> ... seq (d heads)")',
        why="interleaves heads when merging, so merge_heads does not undo split_heads",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-attention-scores-unscaled",
        file=FILE,
        old="    return scores / math.sqrt(q.shape[-1])",
        new="    return scores",
        why="forgets the 1/sqrt(d) scale, so score variance grows with d and softmax saturates",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-attention-scores-scaled-by-d",
        file=FILE,
        old="    return scores / math.sqrt(q.shape[-1])",
        new="    return scores / q.shape[-1]",
        why="scales by 1/d instead of 1/sqrt(d) (the variance of a sum of d unit products is d, its std sqrt(d))",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-contiguous-strides-zero-size",
        file=FILE,
        old="        step *= max(size, 1)",
        new="        step *= size",
        why="multiplies by a size of 0, so every dimension before an empty one gets stride 0 (torch counts 0 as 1)",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-contiguous-strides-column-major",
        file=FILE,
        old="    for size in reversed(shape):\n        strides.append(step)\n        step *= max(size, 1)\n    return tuple(reversed(strides))",
        new="    for size in shape:\n        strides.append(step)\n        step *= max(size, 1)\n    return tuple(strides)",
        why="makes the first dimension move fastest (Fortran order) instead of the last",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-is-view-of-same-storage-only",
        file=FILE,
        old="    return bool(torch.isin(_byte_addresses(y), _byte_addresses(x)).all())",
        new="    return True",
        why="takes sharing a storage for being a view, so base[1] counts as a view of base[0]",
        tests=TESTS,
    ),
]
