"""Hidden tests for tensors: other seeds, longer view chains, other dtypes, and edge cases
(0-d, empty, negative indices, views inside a larger storage, tensors from ``as_strided``).
PyTorch is the oracle throughout.
"""

from __future__ import annotations

import itertools
import math
import random
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import adapters
from tests.test_tensors import (
    assert_is_contiguous_contrasts,
    assert_storage_contrasts,
    assert_view_or_copy_agrees_with_torch,
    assert_view_or_copy_contrasts,
    oracle_is_view_of,
    oracle_same_storage,
    storage_position,
    torch_can_view,
)

SEEDS = range(100, 116)
DTYPES = [torch.float64, torch.int8, torch.bool, torch.bfloat16, torch.int64]
MAX_DIMS = 5


def random_view(
    seed: int, steps: int = 7, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """A chain of views (transpose, permute, strided slices, select, narrow, unsqueeze, expand) of a
    slice of a larger storage, so the storage offset starts non-zero."""
    rng = random.Random(seed)
    shape = [rng.randint(2, 5) for _ in range(rng.randint(1, 4))]
    pad = rng.randint(0, 5)
    storage = torch.arange(math.prod(shape) + pad)
    if dtype == torch.bool:
        storage = storage % 3 == 0
    base = storage.to(dtype)[pad:].view(shape)
    x, chain = base, [f"arange(...)[{pad}:].view{tuple(shape)}"]
    for _ in range(steps):
        op = rng.choice(
            ["transpose", "permute", "slice", "select", "narrow", "unsqueeze", "expand"]
        )
        if op == "transpose" and x.ndim >= 2:
            i, j = rng.sample(range(x.ndim), 2)
            x, text = x.transpose(i, j), f"transpose({i}, {j})"
        elif op == "permute" and x.ndim >= 2:
            perm = list(range(x.ndim))
            rng.shuffle(perm)
            x, text = x.permute(perm), f"permute{tuple(perm)}"
        elif op == "slice" and x.ndim >= 1:
            d = rng.randrange(x.ndim)
            start, step = rng.randint(0, x.shape[d] // 3), rng.randint(1, 3)
            stop = rng.randint(max(start + 1, (x.shape[d] + 1) // 2), x.shape[d])
            x = x[(slice(None),) * d + (slice(start, stop, step),)]
            text = f"[{':, ' * d}{start}:{stop}:{step}]"
        elif op == "select" and x.ndim >= 3:
            d = rng.randrange(x.ndim)
            i = rng.randrange(x.shape[d])
            x, text = x.select(d, i), f"select({d}, {i})"
        elif op == "narrow" and x.ndim >= 1:
            d = rng.randrange(x.ndim)
            start = rng.randint(0, x.shape[d] // 2)
            length = rng.randint((x.shape[d] - start + 1) // 2, x.shape[d] - start)
            x, text = x.narrow(d, start, length), f"narrow({d}, {start}, {length})"
        elif op == "unsqueeze" and x.ndim < MAX_DIMS:
            d = rng.randint(-x.ndim - 1, x.ndim)
            x, text = x.unsqueeze(d), f"unsqueeze({d})"
        elif op == "expand" and x.ndim < MAX_DIMS:
            d = rng.randint(0, x.ndim)
            sizes = list(x.shape)
            sizes.insert(d, rng.randint(2, 4))
            x, text = x.unsqueeze(d).expand(sizes), f"unsqueeze({d}).expand{tuple(sizes)}"
        else:
            continue
        chain.append(text)
    return base, x, ".".join(chain)


def describe(x: torch.Tensor) -> str:
    return f"shape {tuple(x.shape)}, strides {x.stride()}, storage_offset {x.storage_offset()}, dtype {x.dtype}"


def all_indices(x: torch.Tensor, rng: random.Random, k: int = 40) -> list[tuple[int, ...]]:
    every = list(itertools.product(*(range(n) for n in x.shape)))
    return every if len(every) <= k else rng.sample(every, k)


def assert_close(got: torch.Tensor, want: torch.Tensor, what: str, tol: float = 1e-5) -> None:
    assert got.shape == want.shape, (
        f"{what}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    )
    assert got.dtype == want.dtype, f"{what}: expected dtype {want.dtype}, got {got.dtype}"
    diff = (got.double() - want.double()).abs()
    assert torch.allclose(got, want, rtol=tol, atol=tol), (
        f"{what}: max |difference| {diff.max().item():.3g}"
    )


# --------------------------------------------------------------------------------------------
# flat_index and element_at
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_flat_index_matches_element_addresses_of_long_chains(seed):
    """flat_index(i, x.stride(), x.storage_offset()) is where torch keeps x[i], for longer chains."""
    _, x, chain = random_view(seed)
    for index in all_indices(x, random.Random(seed)):
        got = adapters.run_flat_index(index, x.stride(), x.storage_offset())
        want = storage_position(x, index)
        assert got == want, f"x = {chain} ({describe(x)}): element {index} is at {want}, got {got}"


def test_flat_index_of_an_overlapping_as_strided_window():
    """as_strided can make rows overlap in storage; flat_index still finds each element."""
    x = torch.arange(30.0).as_strided((4, 3), (2, 5), 3)
    for index in itertools.product(range(4), range(3)):
        got = adapters.run_flat_index(index, x.stride(), x.storage_offset())
        assert got == storage_position(x, index), f"as_strided((4, 3), (2, 5), 3), index {index}"


def test_flat_index_with_large_offset_and_zero_strides():
    """Zero strides repeat an element; the offset is added once."""
    assert adapters.run_flat_index((5, 2), (0, 7), 1000) == 1014


def test_flat_index_rejects_negative_storage_offset():
    """A storage offset below 0 points before the storage: a ValueError naming it."""
    with pytest.raises(ValueError, match=r"-3"):
        adapters.run_flat_index((0,), (1,), -3)


def test_flat_index_rejects_more_indices_than_strides():
    """Too many indices is as wrong as too few."""
    with pytest.raises(ValueError, match=r"\(0, 0, 0\)"):
        adapters.run_flat_index((0, 0, 0), (1,))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("seed", SEEDS[:6])
def test_element_at_matches_indexing_for_every_dtype(seed, dtype):
    """element_at(x, i) equals x[i] for views of float64, int8, bool, bfloat16 and int64 storages."""
    base, x, chain = random_view(seed, dtype=dtype)
    indices = all_indices(x, random.Random(seed), k=16)
    for flipped in (
        False,
        True,
    ):  # then the same view after its storage is flipped: every answer changes
        if flipped:
            base.copy_(base.logical_not() if dtype == torch.bool else -base)
        for index in indices:
            got = adapters.run_element_at(x, index)
            assert got.dtype == dtype and got.shape == (), (
                f"expected a 0-d {dtype} tensor, got {got.dtype} {tuple(got.shape)}"
            )
            assert torch.equal(got, x[index]), (
                f"x = {chain} ({describe(x)}){', storage flipped' if flipped else ''}: x{list(index)} is "
                f"{x[index].item()}, got {got.item()}"
            )


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_element_at_accepts_negative_indices_like_python(seed):
    """Negative entries count from the end of their dimension, exactly as x[index] does."""
    _, x, chain = random_view(seed)
    for index in all_indices(x, random.Random(seed), k=12):
        neg = tuple(i - n for i, n in zip(index, x.shape, strict=True))
        assert torch.equal(adapters.run_element_at(x, neg), x[neg]), f"x = {chain}: index {neg}"


def test_element_at_on_0d_and_as_strided_tensors():
    """A 0-d tensor takes the empty index; an as_strided window with overlapping rows reads the right cells."""
    storage = torch.arange(20.0)
    assert torch.equal(adapters.run_element_at(storage[7], ()), torch.tensor(7.0))
    x = storage.as_strided((4, 3), (2, 5), 3)  # rows overlap
    for index in itertools.product(range(4), range(3)):
        assert torch.equal(adapters.run_element_at(x, index), x[index]), (
            f"as_strided((4, 3), (2, 5), 3), index {index}"
        )


def test_element_at_sees_writes_through_another_view():
    """element_at reads the shared storage, so a write through one view is visible through another."""
    base = torch.zeros(3, 4)
    view = base.t()[1:]
    base[2, 1] = 42.0
    assert adapters.run_element_at(view, (0, 2)).item() == 42.0


@pytest.mark.parametrize("index", [(2, 0), (0, -4), (-3, 1)], ids=str)
def test_element_at_rejects_each_out_of_range_index(index):
    """Indices outside -size..size-1 in any dimension are a ValueError naming the offending index."""
    x = torch.arange(6.0).view(2, 3)
    bad = index[0] if not -2 <= index[0] < 2 else index[1]
    with pytest.raises(ValueError, match=rf"index {bad}\b"):
        adapters.run_element_at(x, index)


def test_element_at_rejects_any_index_into_an_empty_dimension():
    """A dimension of size 0 has no valid index."""
    with pytest.raises(ValueError, match=r"size 0"):
        adapters.run_element_at(torch.zeros(2, 0), (0, 0))


# --------------------------------------------------------------------------------------------
# same_storage
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_same_storage_agrees_with_storage_pointers(seed):
    """same_storage agrees with untyped_storage().data_ptr() for views, copies and unrelated tensors."""
    base, x, chain = random_view(seed)
    others = [base, x.clone(), x.contiguous(), x.reshape(-1), base.view(-1)[:1], torch.zeros(3)]
    for other in others:
        want = x.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()
        assert adapters.run_same_storage(x, other) == want, (
            f"x = {chain} vs {describe(other)}: want {want}"
        )
    assert_storage_contrasts(adapters.run_same_storage, "same_storage", oracle_same_storage)


def test_same_storage_across_dtype_views():
    """x.view(torch.int32) reinterprets the same bytes: same storage; .to(torch.int32) converts: new storage."""
    x = torch.arange(6.0)
    assert adapters.run_same_storage(x, x.view(torch.int32))
    assert not adapters.run_same_storage(x, x.to(torch.int32))
    assert_storage_contrasts(adapters.run_same_storage, "same_storage", oracle_same_storage)


def test_same_storage_of_disjoint_halves():
    """Two halves that share no element still share the storage."""
    x = torch.arange(10)
    assert adapters.run_same_storage(x[:5], x[5:])
    assert_storage_contrasts(adapters.run_same_storage, "same_storage", oracle_same_storage)


# --------------------------------------------------------------------------------------------
# is_view_of and contiguous_strides
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_is_view_of_agrees_with_bytes_read_on_long_chains(seed):
    """For longer chains, sub-views and slices of the base, is_view_of agrees with the bytes each reads."""
    base, x, chain = random_view(seed)
    flat = base.view(-1)
    for y, of in [(x, base), (base, x), (flat[:3], x), (x, flat[1:]), (x.contiguous(), base)]:
        want = oracle_is_view_of(y, of)
        assert adapters.run_is_view_of(y, of) == want, (
            f"x = {chain}: want {want} for {describe(y)} of {describe(of)}"
        )
    assert_storage_contrasts(adapters.run_is_view_of, "is_view_of", oracle_is_view_of)


def test_is_view_of_counts_bytes_across_dtype_views():
    """A dtype view reads the same bytes (a view both ways); half of each element is a view, not the reverse."""
    x = torch.arange(6.0)
    as_int = x.view(torch.int32)
    assert adapters.run_is_view_of(as_int, x) and adapters.run_is_view_of(x, as_int)
    low_halves = x.view(torch.int16)[::2]
    assert adapters.run_is_view_of(low_halves, x)
    assert not adapters.run_is_view_of(x, low_halves), (
        "x reads both halves of every element, low_halves only one"
    )
    assert_storage_contrasts(adapters.run_is_view_of, "is_view_of", oracle_is_view_of)


def test_is_view_of_an_empty_slice_and_an_expanded_view():
    """An empty slice reads nothing (a view); an expanded row reads only that row."""
    base = torch.arange(12.0).view(3, 4)
    assert adapters.run_is_view_of(base[2:2], base)
    assert adapters.run_is_view_of(base[1:2].expand(5, 4), base[1])
    assert not adapters.run_is_view_of(base[1:2].expand(5, 4), base[0])
    assert_storage_contrasts(adapters.run_is_view_of, "is_view_of", oracle_is_view_of)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=5))
def test_contiguous_strides_match_torch_for_any_shape(shape):
    """For any shape (zeros and ones included, given as a list or torch.Size), the strides of torch.empty."""
    want = torch.empty(shape).stride()
    assert tuple(adapters.run_contiguous_strides(shape)) == want
    assert tuple(adapters.run_contiguous_strides(torch.Size(shape))) == want


# --------------------------------------------------------------------------------------------
# is_contiguous
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_is_contiguous_agrees_with_torch_on_long_chains(seed):
    """is_contiguous(x.shape, x.stride()) equals x.is_contiguous() for every prefix of a long chain."""
    _, x, chain = random_view(seed)
    views = [x, x.contiguous(), x.unsqueeze(-1), x.unsqueeze(0).expand(1, *x.shape), x.reshape(-1)]
    if x.ndim >= 2:
        views.append(x.transpose(0, -1))
    for v in views:
        got = adapters.run_is_contiguous(tuple(v.shape), v.stride())
        assert got == v.is_contiguous(), (
            f"from x = {chain}: {describe(v)} is_contiguous() is {v.is_contiguous()}, got {got}"
        )
    assert_is_contiguous_contrasts()


@st.composite
def shapes_and_strides(draw):
    """Up to 5 dims with many size-1 and size-0 dims; strides row-major, zero, or random."""
    shape = draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 4]), max_size=5).map(tuple))
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(draw(st.sampled_from([step, step, 0, draw(st.integers(1, 30))])))
        step *= max(size, 1)
    return shape, tuple(reversed(strides))


@settings(max_examples=120, deadline=None)
@given(shapes_and_strides())
def test_is_contiguous_agrees_with_torch_on_size_one_zero_and_empty_dims(case):
    """For shapes rich in size-0/size-1 dims and stride-0 dims, is_contiguous agrees with torch."""
    shape, strides = case
    want = torch.empty_strided(shape, strides).is_contiguous()
    assert adapters.run_is_contiguous(shape, strides) == want, (
        f"shape {shape}, strides {strides}: torch says {want}"
    )


def test_is_contiguous_accepts_torch_size():
    """shape may be a torch.Size and strides the tuple from x.stride()."""
    x = torch.zeros(2, 3, 4).transpose(1, 2)
    assert adapters.run_is_contiguous(x.shape, x.stride()) is False
    assert adapters.run_is_contiguous(x.contiguous().shape, x.contiguous().stride()) is True
    assert_is_contiguous_contrasts()


def test_is_contiguous_rejects_negative_size():
    """A negative size is not a shape: a ValueError naming it."""
    with pytest.raises(ValueError, match=r"\(2, -1\)"):
        adapters.run_is_contiguous((2, -1), (1, 1))


def test_is_contiguous_rejects_more_strides_than_dims():
    """One stride per dimension, no more."""
    with pytest.raises(ValueError, match=r"\(4, 1\)"):
        adapters.run_is_contiguous((4,), (4, 1))


# --------------------------------------------------------------------------------------------
# view_or_copy
# --------------------------------------------------------------------------------------------


def candidate_shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Same-numel shapes: flat, trailing 1, -1 in the middle, each dim split, adjacent dims merged, all merged but one."""
    n = math.prod(shape)
    out = [(n,), (*shape, 1), (n, 1), tuple(shape[::-1])]
    if len(shape) >= 2:
        out.append((shape[0], -1))
        out.append((-1, shape[-1]))
    for d, size in enumerate(shape):
        for f in range(2, size):
            if size % f == 0:
                out.append(shape[:d] + (size // f, f) + shape[d + 1 :])
    for d in range(len(shape) - 1):
        out.append(shape[:d] + (-1,) + shape[d + 2 :])
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_view_or_copy_agrees_with_torch_view_on_long_chains(seed):
    """is_view iff x.view(shape) succeeds; the values equal x.reshape(shape); views share, copies do not."""
    _, x, chain = random_view(seed)
    for shape in candidate_shapes(tuple(x.shape)):
        assert_view_or_copy_agrees_with_torch(
            x, shape, f"x = {chain} ({describe(x)}), shape {shape}"
        )
    assert_view_or_copy_contrasts()


def test_view_or_copy_writes_through_a_view():
    """When view_or_copy returns a view, writing to it changes x; a copy leaves x alone."""
    x = torch.zeros(2, 6)[:, :4]  # viewable as (2, 2, 2), not as (8,)
    y, is_view = adapters.run_view_or_copy(x, (2, 2, 2))
    assert is_view
    y[1, 1, 1] = 5.0
    assert x[1, 3].item() == 5.0, "a view must share memory with x"
    z, is_view = adapters.run_view_or_copy(x, (8,))
    assert not is_view
    z.fill_(-1.0)
    assert x.min().item() == 0.0, "a copy must not share memory with x"
    assert_view_or_copy_contrasts()


@pytest.mark.parametrize(
    "x, shape",
    [
        (torch.tensor(7.0), (1, 1)),
        (torch.zeros(2, 0, 3), (0, 5)),
        (torch.arange(1.0, 5.0).view(4, 1).expand(4, 3), (12,)),
        (torch.arange(1.0, 5.0).view(4, 1).expand(4, 3), (2, 2, 3)),
        (torch.arange(1.0, 4.0).view(3, 1).t(), (3,)),
    ],
    ids=["0-d", "empty", "expanded-flat", "expanded-split", "size-1-transpose"],
)
def test_view_or_copy_edge_cases_agree_with_torch_view(x, shape):
    """0-d, empty, expanded and size-1 transposed tensors: is_view iff x.view(shape) succeeds."""
    y, is_view = adapters.run_view_or_copy(x, shape)
    assert is_view == torch_can_view(x, shape), f"{describe(x)} -> {shape}"
    assert torch.equal(y, x.reshape(shape))
    assert_view_or_copy_contrasts()


@pytest.mark.parametrize("shape", [(-1, -1), (-2, -3), (3, -5)], ids=str)
def test_view_or_copy_rejects_invalid_sizes(shape):
    """At most one -1 and no other negative size; the error names the shape."""
    with pytest.raises(ValueError, match=re.escape(str(shape))):
        adapters.run_view_or_copy(torch.zeros(6), shape)


def test_view_or_copy_rejects_uninferable_dim():
    """-1 must divide evenly: 6 elements cannot fill (4, -1)."""
    with pytest.raises(ValueError, match=r"\(4, -1\).*6"):
        adapters.run_view_or_copy(torch.zeros(6), (4, -1))


def test_view_or_copy_rejects_mismatched_numel_of_a_view():
    """The element count check uses x.numel() of the view, not of its storage."""
    with pytest.raises(ValueError, match=r"\(6,\).*3"):
        adapters.run_view_or_copy(torch.zeros(6)[::2], (6,))


# --------------------------------------------------------------------------------------------
# einops
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "batch, seq, heads, d_head",
    [((), 1, 1, 5), ((2, 3), 4, 6, 2), ((1,), 3, 8, 1), ((2,), 6, 4, 3)],
    ids=["one-head", "two-batch-dims", "d_head-1", "plain"],
)
def test_split_heads_matches_reshape_then_transpose_for_more_shapes(batch, seq, heads, d_head):
    """split_heads agrees with view+transpose for no/one/two batch dims, one head and d_head = 1."""
    x = torch.randn(
        *batch, seq, heads * d_head, generator=torch.Generator().manual_seed(7), dtype=torch.float64
    )
    want = x.view(*batch, seq, heads, d_head).transpose(-3, -2)
    assert_close(
        adapters.run_split_heads(x, heads),
        want,
        f"split_heads(x of shape {tuple(x.shape)}, {heads})",
        tol=0,
    )
    assert_close(adapters.run_merge_heads(want), x, "merge_heads(split) vs x", tol=0)


def test_split_heads_of_a_non_contiguous_input():
    """A transposed input (seq and d_model swapped back) splits the same as its contiguous copy."""
    x = torch.randn(
        12, 5, generator=torch.Generator().manual_seed(3)
    ).t()  # (seq=5, d_model=12), strides (1, 5)
    assert_close(
        adapters.run_split_heads(x, 4),
        adapters.run_split_heads(x.contiguous(), 4),
        "non-contiguous x",
        tol=0,
    )
    assert_close(
        adapters.run_split_heads(x, 4),
        x.reshape(5, 4, 3).transpose(0, 1),
        "x of shape (5, 12) in 4 heads",
        tol=0,
    )


@pytest.mark.parametrize("num_heads", [0, -2, 7])
def test_split_heads_rejects_bad_num_heads(num_heads):
    """num_heads must be a positive divisor of d_model; the error names num_heads."""
    with pytest.raises(ValueError, match=rf"num_heads={num_heads}"):
        adapters.run_split_heads(torch.zeros(3, 12), num_heads)


def test_split_heads_rejects_a_vector():
    """A 1-d x has no seq dimension to split."""
    with pytest.raises(ValueError, match=r"\(12,\)"):
        adapters.run_split_heads(torch.zeros(12), 3)


def test_merge_heads_rejects_fewer_than_three_dims():
    """merge_heads needs (... heads seq d_head)."""
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        adapters.run_merge_heads(torch.zeros(4, 3))


@pytest.mark.parametrize(
    "q_shape, k_shape",
    [((3, 1, 7), (3, 4, 7)), ((2, 2, 3, 5, 3), (2, 2, 3, 2, 3)), ((1, 6, 32), (1, 6, 32))],
    ids=["one-query", "two-batch-dims", "d-32"],
)
def test_attention_scores_match_matmul_for_more_shapes(q_shape, k_shape):
    """attention_scores(q, k) == q @ k^T / sqrt(d) in float64, for one query, two batch dims and d = 32."""
    g = torch.Generator().manual_seed(11)
    q = torch.randn(q_shape, generator=g, dtype=torch.float64)
    k = torch.randn(k_shape, generator=g, dtype=torch.float64)
    want = q @ k.transpose(-2, -1) / math.sqrt(q_shape[-1])
    assert_close(adapters.run_attention_scores(q, k), want, f"q {q_shape}, k {k_shape}", tol=1e-10)


def test_attention_scores_have_unit_variance_for_unit_variance_inputs():
    """The 1/sqrt(d) scale keeps scores' variance near 1 when q, k entries have variance 1 (d = 256)."""
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(4, 64, 256, generator=g), torch.randn(4, 64, 256, generator=g)
    scores = adapters.run_attention_scores(q, k)
    # q k^T / sqrt(256)
    torch.testing.assert_close(scores, q @ k.transpose(-1, -2) / 16, rtol=1e-4, atol=1e-4)
    var = scores.var().item()
    assert 0.85 < var < 1.15, (
        f"score variance {var:.3f}; with 1/sqrt(d) it is ~1, without it ~d, with 1/d ~1/d"
    )


def test_attention_scores_rejects_vectors():
    """q and k need (... heads seq d)."""
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        adapters.run_attention_scores(torch.zeros(3, 4), torch.zeros(2, 3, 4))


# --------------------------------------------------------------------------------------------
# Edges on other data: error types and words, size one and zero, dtypes, devices (meta)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: adapters.run_flat_index((0, 1), (2,), 0),
            "index (0, 1) has 2 entries but strides (2,) has 1",
        ),
        (
            lambda: adapters.run_flat_index((), (), -1),
            "storage_offset must be a non-negative integer, got -1",
        ),
        (
            lambda: adapters.run_element_at(torch.zeros(1, 1), (0, -2)),
            "index -2 is out of range for dimension 1 of size 1",
        ),
        (
            lambda: adapters.run_element_at(torch.zeros(0), (0,)),
            "index 0 is out of range for dimension 0 of size 0",
        ),
        (
            lambda: adapters.run_is_contiguous((1, 1), (1,)),
            "shape (1, 1) has 2 dimensions but strides (1,) has 1",
        ),
        (
            lambda: adapters.run_view_or_copy(torch.zeros(2, 0), (-1, 0)),
            "cannot infer the -1 in shape (-1, 0): 0 elements of x",
        ),
        (
            lambda: adapters.run_view_or_copy(torch.zeros(3, 4)[:, :2], (4, 2)),
            "shape (4, 2) holds 8 elements but x (shape (3, 2)) has 6",
        ),
        (
            lambda: adapters.run_split_heads(torch.zeros(1, 1, 6), 4),
            "num_heads=4 must be a positive divisor of the width d_model=6",
        ),
        (
            lambda: adapters.run_attention_scores(torch.zeros(1, 1, 1), torch.zeros(1, 1, 2)),
            "q has head dimension d=1 but k has d=2",
        ),
    ],
    ids=[
        "flat-lengths",
        "flat-offset",
        "element-size-one",
        "element-empty",
        "contiguous-lengths",
        "view-empty-infer",
        "view-numel",
        "split-divisor",
        "scores-d",
    ],
)
def test_documented_errors_are_value_errors_with_their_words_other_inputs(call, message):
    """Every documented error, on other inputs (size-one and empty ones), is a ValueError with the documented words."""
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.parametrize("dtype", [torch.int8, torch.bool, torch.float16], ids=str)
def test_element_at_of_meta_views_keeps_device_and_dtype(dtype):
    """element_at of a meta view of any dtype is a 0-d meta tensor of that dtype; the same view on the CPU reads
    every element (odd and even values, so bool storages hold both answers)."""
    x = torch.empty(3, 5, device="meta", dtype=dtype)[:, ::2].t()
    got = adapters.run_element_at(x, (1, -1))
    assert (got.device.type, got.dtype, tuple(got.shape)) == ("meta", dtype, ()), (
        f"element_at of a meta {dtype} view returned {got.device}, {got.dtype}, {tuple(got.shape)}"
    )
    values = torch.arange(15) % 2 == 1 if dtype == torch.bool else torch.arange(15)
    cpu = values.to(dtype).view(3, 5)[:, ::2].t()
    for index in [(1, -1), *itertools.product(range(3), range(3))]:
        got = adapters.run_element_at(cpu, index)
        assert got.dtype == dtype and torch.equal(got, cpu[index]), (
            f"{describe(cpu)}: x{list(index)} is {cpu[index].item()}, got {got.dtype} {got}"
        )


@pytest.mark.parametrize(
    "batch, seq, heads, d_head",
    [((1, 1, 1), 2, 1, 3), ((3,), 1, 6, 1), ((1,), 0, 1, 1)],
    ids=["deep-ones", "seq-1", "all-small"],
)
def test_split_and_merge_heads_keep_size_one_and_zero_dims_other_shapes(batch, seq, heads, d_head):
    """Size-one batch dims, one position, width-one heads and an empty sequence keep every dimension (each shape
    checked with one position more too, so an empty one is paired with one that holds values)."""
    for n in (seq, seq + 1):
        x = torch.randn(
            *batch,
            n,
            heads * d_head,
            generator=torch.Generator().manual_seed(8),
            dtype=torch.float64,
        )
        want = x.view(*batch, n, heads, d_head).transpose(-3, -2)
        assert_close(
            adapters.run_split_heads(x, heads), want, f"split_heads of {tuple(x.shape)}", tol=0
        )
        assert_close(
            adapters.run_merge_heads(want), x, f"merge_heads of {tuple(want.shape)}", tol=0
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_attention_scores_on_meta_keep_dtype_and_size_one_dims(dtype):
    """attention_scores of meta inputs with one query and one key is a meta (..., 1, 1) tensor of the inputs' dtype."""
    q = torch.empty(1, 2, 1, 8, device="meta", dtype=dtype)
    k = torch.empty(1, 2, 1, 8, device="meta", dtype=dtype)
    got = adapters.run_attention_scores(q, k)
    assert (got.device.type, got.dtype, tuple(got.shape)) == ("meta", dtype, (1, 2, 1, 1))
    cpu = adapters.run_attention_scores(
        torch.full((1, 2, 1, 8), 0.5, dtype=dtype), torch.full((1, 2, 1, 8), 2.0, dtype=dtype)
    )
    assert torch.equal(cpu, torch.full((1, 2, 1, 1), 8 / math.sqrt(8), dtype=dtype)), f"got {cpu}"
