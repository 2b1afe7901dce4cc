"""Bug zoo for part 1 (tensors: storage, strides, views, einops)."""

from __future__ import annotations

from cs336_staff.mutants import Mutant

STRIDES = "cs336_assignment/tensors/strides.py"
NAMED_DIMS = "cs336_assignment/tensors/named_dims.py"
TESTS = ("tests/test_tensors.py",)

MUTANTS = [
    Mutant(
        name="tensors-flat-index-ignores-storage-offset",
        file=STRIDES,
        function="flat_index",
        old="    return storage_offset + sum(i * s for i, s in zip(index, strides, strict=True))",
        new="    return sum(i * s for i, s in zip(index, strides, strict=True))",
        why="thinks element [0, 0] is always at the start of the storage, forgetting slices like x[1:]",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-element-at-assumes-contiguous-strides",
        file=STRIDES,
        function="element_at",
        old="    position = flat_index(resolved, x.stride(), int(x.storage_offset()))",
        new="    position = flat_index(resolved, contiguous_strides(x.shape), int(x.storage_offset()))",
        why="derives the strides from the shape (row-major) instead of asking the view for x.stride()",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-same-storage-compares-tensor-pointers",
        file=STRIDES,
        function="same_storage",
        old="    return x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()",
        new="    return x.data_ptr() == y.data_ptr()",
        why="compares where each tensor's first element is, which differs for x and x[1:] though they share storage",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-is-contiguous-checks-size-one-dims",
        file=STRIDES,
        function="is_contiguous",
        old="all(stride == want for size, stride, want in zip(shape, strides, expected, strict=True) if size != 1)",
        new="all(stride == want for size, stride, want in zip(shape, strides, expected, strict=True))",
        why="requires the row-major stride on every dimension, though torch ignores strides of size-1 dims",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-is-contiguous-forgets-empty-tensors",
        file=STRIDES,
        function="is_contiguous",
        old="    if math.prod(shape) == 0:\n        return True\n",
        new="",
        why="forgets that a tensor with no elements is contiguous whatever its strides",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-always-copies",
        file=STRIDES,
        function="view_or_copy",
        old="    y = x.reshape(shape)  # a view if possible, else a copy: find out which",
        new="    y = x.contiguous().clone().view(shape)",
        why="plays safe by always copying, paying memory and bandwidth even when a free view exists",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-views-iff-contiguous",
        file=STRIDES,
        function="view_or_copy",
        old="    return y, is_view_of(y, x)",
        new="    return y, x.is_contiguous()",
        why="believes only contiguous tensors can be viewed, but e.g. x.t().view(3, 2) or splitting a dim of a slice works",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-claims-view-after-copy",
        file=STRIDES,
        function="view_or_copy",
        old="    return y, is_view_of(y, x)",
        new="    return y, True",
        why="trusts reshape to always return a view; it silently copies when the strides do not allow one",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-split-heads-d-heads-order",
        file=NAMED_DIMS,
        function="split_heads",
        old='einops.rearrange(x, "... seq (heads d) -> ... heads seq d", heads=num_heads)',
        new='einops.rearrange(x, "... seq (d heads) -> ... heads seq d", heads=num_heads)',
        why="groups the width as (d heads), so each head gets every num_heads-th feature instead of a block",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-merge-heads-d-heads-order",
        file=NAMED_DIMS,
        function="merge_heads",
        old='einops.rearrange(x, "... heads seq d -> ... seq (heads d)")',
        new='einops.rearrange(x, "... heads seq d -> ... seq (d heads)")',
        why="interleaves heads when merging, so merge_heads does not undo split_heads",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-attention-scores-unscaled",
        file=NAMED_DIMS,
        function="attention_scores",
        old="    return scores / math.sqrt(q.shape[-1])",
        new="    return scores",
        why="forgets the 1/sqrt(d) scale, so score variance grows with d and softmax saturates",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-attention-scores-scaled-by-d",
        file=NAMED_DIMS,
        function="attention_scores",
        old="    return scores / math.sqrt(q.shape[-1])",
        new="    return scores / q.shape[-1]",
        why="scales by 1/d instead of 1/sqrt(d) (the variance of a sum of d unit products is d, its std sqrt(d))",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-contiguous-strides-zero-size",
        file=STRIDES,
        function="contiguous_strides",
        old="        step *= max(size, 1)",
        new="        step *= size",
        why="multiplies by a size of 0, so every dimension before an empty one gets stride 0 (torch counts 0 as 1)",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-contiguous-strides-column-major",
        file=STRIDES,
        function="contiguous_strides",
        old="    for size in reversed(shape):\n        strides.append(step)\n        step *= max(size, 1)\n    return tuple(reversed(strides))",
        new="    for size in shape:\n        strides.append(step)\n        step *= max(size, 1)\n    return tuple(strides)",
        why="makes the first dimension move fastest (Fortran order) instead of the last",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-is-view-of-same-storage-only",
        file=STRIDES,
        function="is_view_of",
        old="    return bool(torch.isin(_byte_addresses(y), _byte_addresses(x)).all())",
        new="    return True",
        why="takes sharing a storage for being a view, so base[1] counts as a view of base[0]",
        tests=TESTS,
    ),
    # issue 21's kinds: dtypes and devices of returned tensors, error types, dimensions of size one
    Mutant(
        name="tensors-element-at-rebuilds-from-item",
        file=STRIDES,
        function="element_at",
        old="    return storage_view(x)[position]",
        new="    return torch.tensor(storage_view(x)[position].item())",
        why="reads the value out as a Python number and wraps it again: bfloat16 and int8 come back as float32 and int64",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-element-at-rebuilds-on-the-cpu",
        file=STRIDES,
        function="element_at",
        old="    return storage_view(x)[position]",
        new="    return torch.tensor(storage_view(x)[position].item(), dtype=x.dtype)",
        why="keeps the dtype but rebuilds the value with torch.tensor, which lands on the CPU whatever device x is on",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-split-heads-fills-a-default-tensor",
        file=NAMED_DIMS,
        function="split_heads",
        old='    return einops.rearrange(x, "... seq (heads d) -> ... heads seq d", heads=num_heads)',
        new="""    d = d_model // num_heads
    out = torch.empty(*x.shape[:-2], num_heads, x.shape[-2], d)
    for h in range(num_heads):
        out[..., h, :, :] = x[..., h * d : (h + 1) * d]
    return out""",
        why="copies each head into a torch.empty made without device= and dtype=: float32 on the CPU whatever x is",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-attention-scores-in-float32",
        file=NAMED_DIMS,
        function="attention_scores",
        old='    scores = einops.einsum(q, k, "... heads q d, ... heads k d -> ... heads q k")',
        new='    scores = einops.einsum(q.float(), k.float(), "... heads q d, ... heads k d -> ... heads q k")',
        why="computes the scores in float32 'for accuracy' and returns them so: float64 inputs lose precision, bfloat16 ones change dtype",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-flat-index-asserts-the-offset",
        file=STRIDES,
        function="flat_index",
        old="    check_count(storage_offset=storage_offset)",
        new='    assert storage_offset >= 0, f"negative storage_offset {storage_offset}"',
        why="checks the offset with assert: an AssertionError (gone under python -O) instead of the documented ValueError, and 1.5 slips through",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-element-at-raises-index-error",
        file=STRIDES,
        function="element_at",
        old="""
        if not -size <= i < size:
            raise ValueError(
                f"index {i} is out of range for dimension {d} of size {size} "
                f"(shape {tuple(x.shape)}); valid indices are {-size}..{size - 1}"
            )""",
        new="""
        if not -size <= i < size:
            raise IndexError(f"index {i} is out of range for dimension {d} of size {size}")""",
        why="raises IndexError, as Python's own indexing does, where the docstring promises ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-leaves-counts-to-reshape",
        file=STRIDES,
        function="view_or_copy",
        old="""
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
        )""",
        new="",
        why="lets reshape reject a shape of the wrong size: a RuntimeError where the docstring promises ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-merge-heads-squeezes-size-one-dims",
        file=NAMED_DIMS,
        function="merge_heads",
        old='    return einops.rearrange(x, "... heads seq d -> ... seq (heads d)")',
        new='    return einops.rearrange(x, "... heads seq d -> ... seq (heads d)").squeeze()',
        why="squeezes the result to tidy stray size-1 dims: a batch of one or a single position disappears",
        tests=TESTS,
    ),
    Mutant(
        name="tensors-view-or-copy-rebuilds-the-copy-from-a-list",
        file=STRIDES,
        function="view_or_copy",
        old="    y = x.reshape(shape)  # a view if possible, else a copy: find out which",
        new="""
    try:
        y = x.view(shape)
    except RuntimeError:  # the strides allow no view: copy the elements out one by one
        y = torch.tensor(x.reshape(shape).tolist(), dtype=x.dtype)""",
        why="builds the copy from Python numbers with torch.tensor, which lands on the CPU whatever device x is on",
        tests=TESTS,
    ),
]
