"""Tensors: storage, strides, views and einops. PyTorch itself is the oracle for every answer.

Views come from seeded random chains of transpose, permute, strided slicing, unsqueeze and expand
applied to ``arange`` (distinct values, so reading the wrong storage position shows up).
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import adapters

SEEDS = range(12)
MAX_DIMS = 5


def random_view(
    seed: int, steps: int = 4, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """A base tensor, a view of it made by a random chain of view operations, and the chain as text."""
    rng = random.Random(seed)
    shape = [rng.randint(2, 5) for _ in range(rng.randint(1, 3))]
    base = torch.arange(math.prod(shape)).to(dtype).reshape(shape)
    x, chain = base, [f"arange({math.prod(shape)}).view{tuple(shape)}"]
    for _ in range(steps):
        op = rng.choice(["transpose", "permute", "slice", "unsqueeze", "expand"])
        if op == "transpose" and x.ndim >= 2:
            i, j = rng.sample(range(x.ndim), 2)
            x, text = x.transpose(i, j), f"transpose({i}, {j})"
        elif op == "permute" and x.ndim >= 2:
            perm = list(range(x.ndim))
            rng.shuffle(perm)
            x, text = x.permute(perm), f"permute{tuple(perm)}"
        elif op == "slice" and x.ndim >= 1:
            d = rng.randrange(x.ndim)
            start, step = rng.randint(0, x.shape[d] // 3), rng.randint(1, 2)
            stop = rng.randint(max(start + 1, x.shape[d] - 1), x.shape[d])
            x = x[(slice(None),) * d + (slice(start, stop, step),)]
            text = f"[{':, ' * d}{start}:{stop}:{step}]"
        elif op == "unsqueeze" and x.ndim < MAX_DIMS:
            d = rng.randint(0, x.ndim)
            x, text = x.unsqueeze(d), f"unsqueeze({d})"
        elif op == "expand" and x.ndim < MAX_DIMS:
            d = rng.randint(0, x.ndim)
            sizes = list(x.shape)
            sizes.insert(d, rng.randint(2, 3))
            x, text = x.unsqueeze(d).expand(sizes), f"unsqueeze({d}).expand{tuple(sizes)}"
        else:
            continue
        chain.append(text)
    return base, x, ".".join(chain)


def describe(x: torch.Tensor) -> str:
    return f"shape {tuple(x.shape)}, strides {x.stride()}, storage_offset {x.storage_offset()}"


def storage_position(x: torch.Tensor, index: tuple[int, ...]) -> int:
    """Oracle: where x[index] lives, from the element's address relative to the storage's."""
    return (x[index].data_ptr() - x.untyped_storage().data_ptr()) // x.element_size()


def assert_close(got: torch.Tensor, want: torch.Tensor, what: str, tol: float = 1e-5) -> None:
    """Shapes equal and values within tol; the message says where they differ most and by how much."""
    assert got.shape == want.shape, (
        f"{what}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    )
    diff = (got.double() - want.double()).abs()
    flat = diff.argmax().item() if diff.numel() else 0
    where = []
    for size in reversed(
        diff.shape
    ):  # unravel the flat position (torch.unravel_index is slow to import)
        flat, i = divmod(flat, size)
        where.insert(0, i)
    where = tuple(where)
    assert torch.allclose(got, want, rtol=tol, atol=tol), (
        f"{what}: max |difference| {diff.max().item():.3g} at {where} (got {got[where].item():.6g}, want {want[where].item():.6g})"
    )


def some_indices(x: torch.Tensor, rng: random.Random, k: int = 24) -> list[tuple[int, ...]]:
    every = list(itertools.product(*(range(n) for n in x.shape)))
    return every if len(every) <= k else rng.sample(every, k)


# --------------------------------------------------------------------------------------------
# flat_index and element_at
# --------------------------------------------------------------------------------------------


def test_flat_index_worked_example():
    """x = arange(6).view(2, 3): x[1, 2] is at 1*3 + 2*1 = 5, and an offset of 4 shifts it to 9."""
    got = adapters.run_flat_index((1, 2), (3, 1))
    assert got == 5, f"flat_index((1, 2), strides=(3, 1)) = {got}, expected 1*3 + 2*1 = 5"
    got = adapters.run_flat_index((1, 2), (3, 1), 4)
    assert got == 9, f"flat_index((1, 2), strides=(3, 1), storage_offset=4) = {got}, expected 4 + 1*3 + 2*1 = 9 (add the offset)"
    got = adapters.run_flat_index((), (), 7)
    assert got == 7, f"flat_index((), (), storage_offset=7) = {got}: a 0-d tensor's only element sits at its storage_offset"


@pytest.mark.parametrize("seed", SEEDS)
def test_flat_index_matches_element_addresses_of_random_views(seed):
    """flat_index(i, x.stride(), x.storage_offset()) is where torch actually keeps x[i]."""
    base, x, chain = random_view(seed)
    last = tuple(n - 1 for n in base.shape)  # a view may hold only position 0: the base's last element is not there
    assert adapters.run_flat_index(last, base.stride()) == base.numel() - 1, f"the last element of {tuple(base.shape)}"
    for index in some_indices(x, random.Random(seed)):
        got = adapters.run_flat_index(index, x.stride(), x.storage_offset())
        want = storage_position(x, index)
        assert got == want, (
            f"x = {chain} ({describe(x)}): element {index} is at storage position {want}, got {got}"
        )


def test_flat_index_rejects_index_and_strides_of_different_lengths():
    """One index per stride; anything else is a ValueError naming both."""
    with pytest.raises(ValueError, match=r"\(1, 2\).*\(3, 1, 1\)"):
        adapters.run_flat_index((1, 2), (3, 1, 1))


def test_flat_index_rejects_negative_index():
    """Without a shape a negative index cannot be resolved, so it is a ValueError."""
    with pytest.raises(ValueError, match=r"negative"):
        adapters.run_flat_index((1, -1), (3, 1))


@pytest.mark.parametrize("seed", SEEDS)
def test_element_at_matches_indexing_on_random_views(seed):
    """element_at(x, i) equals x[i] (value and dtype) for transposed, sliced and expanded views."""
    base, x, chain = random_view(seed)
    last = tuple(n - 1 for n in base.shape)  # a view may hold only the value 0: the base's last element is not 0
    assert torch.equal(adapters.run_element_at(base, last), base[last]), f"the last element of {tuple(base.shape)}"
    for index in some_indices(x, random.Random(seed)):
        got = adapters.run_element_at(x, index)
        assert got.dtype == x.dtype, f"element_at returned dtype {got.dtype}, x has {x.dtype}"
        assert got.shape == (), f"element_at must return a 0-d tensor, got shape {tuple(got.shape)}"
        assert torch.equal(got, x[index]), (
            f"x = {chain} ({describe(x)}): x{list(index)} is {x[index].item()}, got {got.item()}"
        )


@pytest.mark.parametrize(
    "make, index",
    [
        (lambda b: b.t(), (2, 1)),
        (lambda b: b[1:, ::2], (0, 1)),
        (lambda b: b[:, 1:2].expand(2, 4), (1, 3)),
        (lambda b: b[1, 2], ()),
        (lambda b: b.t(), (-1, -2)),
    ],
    ids=["transpose", "slice-with-step", "expand", "0-d", "negative-index"],
)
def test_element_at_reads_the_storage_not_the_tensor(make, index):
    """element_at reads storage through the strides; it never calls x[...] (which would hide the point)."""

    class NoIndexing(torch.Tensor):
        def __getitem__(self, item):
            raise AssertionError(
                "element_at must read x's storage at flat_index, not index x itself"
            )

        def __repr__(self, *args, **kwargs):  # torch's repr indexes the tensor
            return f"NoIndexing({describe(self.as_subclass(torch.Tensor))})"

    view = make(torch.arange(6.0).view(2, 3))
    x = view.as_subclass(NoIndexing)  # same storage, strides and offset; indexing it fails
    got = adapters.run_element_at(x, index).as_subclass(torch.Tensor)
    want = view[index]
    assert torch.equal(got, want), (
        f"element_at(x, {index}) with x of {describe(view)} returned {got.item():g}, but x{list(index)} is "
        f"{want.item():g}. The storage is arange(6), so each value is its own storage position: you read "
        f"position {got.item():g} instead of {want.item():g} = storage_offset + sum(index[d] * strides[d]) "
        "(negative indices first resolved against the shape); check the offset and the strides"
    )


def test_element_at_rejects_index_out_of_range():
    """An index past the end of its dimension is a ValueError naming the index and the size."""
    x = torch.arange(6.0).view(2, 3)
    with pytest.raises(ValueError, match=r"index 3 .*size 3"):
        adapters.run_element_at(x, (1, 3))


def test_element_at_rejects_wrong_number_of_indices():
    """An index with the wrong number of entries is a ValueError naming the shape."""
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        adapters.run_element_at(torch.zeros(2, 3), (1,))


# --------------------------------------------------------------------------------------------
# same_storage
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_same_storage_true_for_views_false_for_copies(seed):
    """A view shares its base's storage; clone() and contiguous() of a non-contiguous view do not."""
    base, x, chain = random_view(seed)
    assert adapters.run_same_storage(base, x), (
        f"x = {chain} is a view of base but same_storage said False"
    )
    assert adapters.run_same_storage(x, base), "same_storage must be symmetric"
    assert not adapters.run_same_storage(x, x.clone()), f"x = {chain}: a clone has its own storage"
    if not x.is_contiguous():
        assert not adapters.run_same_storage(x, x.contiguous()), (
            f"x = {chain} ({describe(x)}): contiguous() copied it"
        )


def test_same_storage_sees_through_storage_offset():
    """x[1:] starts at a different address than x but lives in the same storage."""
    x = torch.arange(6.0)
    assert x[1:].data_ptr() != x.data_ptr()
    assert adapters.run_same_storage(x, x[1:])
    assert adapters.run_same_storage(x[2:], x[:3])
    assert not adapters.run_same_storage(x, torch.arange(6.0))


# --------------------------------------------------------------------------------------------
# is_view_of
# --------------------------------------------------------------------------------------------


def bytes_read(x: torch.Tensor) -> set[int]:
    """Oracle: the address of every byte x reads, from torch's own indexing (x[i].data_ptr())."""
    size = x.element_size()
    every = itertools.product(*(range(n) for n in x.shape))
    return {x[i].data_ptr() + b for i in every for b in range(size)}


def oracle_is_view_of(y: torch.Tensor, x: torch.Tensor) -> bool:
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    return shares and bytes_read(y) <= bytes_read(x)


@pytest.mark.parametrize("seed", SEEDS)
def test_is_view_of_agrees_with_the_bytes_each_tensor_reads(seed):
    """y is a view of x iff they share a storage and y reads no byte x does not read; clones never are."""
    base, x, chain = random_view(seed)
    cases = {
        "x of base": (x, base),
        "base of x": (base, x),
        "x of itself": (x, x),
        "x[1:] of x": (x[1:], x) if x.ndim else (x, x),
        "x of x[1:]": (x, x[1:]) if x.ndim else (x, x),
        "a clone of x": (x.clone(), x),
    }
    for what, (y, of) in cases.items():
        want = oracle_is_view_of(y, of)
        got = adapters.run_is_view_of(y, of)
        assert got == want, (
            f"x = {chain} ({describe(x)}): is_view_of({what}) should be {want}, got {got}; "
            "same storage is not enough: every byte y reads must be one x reads"
        )


def test_is_view_of_siblings_share_a_storage_but_are_not_views():
    """base[0] and base[1] share base's storage, yet neither reads the other's elements."""
    base = torch.arange(6.0).view(2, 3)
    assert adapters.run_is_view_of(base.t()[1:], base)
    assert not adapters.run_is_view_of(base[1], base[0]), (
        "base[1] and base[0] share a storage but no element: not a view (compare the bytes read, not only the storage)"
    )
    assert not adapters.run_is_view_of(base, base[0]), "base reads more than base[0]: not a view of it"


# --------------------------------------------------------------------------------------------
# contiguous_strides and is_contiguous
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(2, 3, 4), (5,), (), (1, 1), (3, 1, 2), (2, 0, 3), (0,), (4, 5, 0, 2)], ids=str
)
def test_contiguous_strides_match_a_fresh_tensor(shape):
    """contiguous_strides(shape) are the strides torch.empty(shape) gets (a size-0 dimension counts as 1)."""
    want = torch.empty(shape).stride()
    got = adapters.run_contiguous_strides(shape)
    assert tuple(got) == want, (
        f"contiguous_strides({shape}) = {tuple(got)}, torch.empty({shape}).stride() = {want}: stride_d is the "
        "product of the sizes after d (row-major; the last dimension moves fastest), with a size 0 counted as 1"
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_is_contiguous_agrees_with_torch_on_random_views(seed):
    """is_contiguous(x.shape, x.stride()) equals x.is_contiguous() for every view in the chain."""
    _, x, chain = random_view(seed)
    views = [x, x.contiguous(), x.unsqueeze(0), x.unsqueeze(-1).transpose(0, -1)]
    for v in views:
        got = adapters.run_is_contiguous(tuple(v.shape), v.stride())
        assert got == v.is_contiguous(), (
            f"from x = {chain}: {describe(v)} is_contiguous() is {v.is_contiguous()}, got {got}"
        )


@pytest.mark.parametrize(
    "shape, strides",
    [
        ((2, 3), (3, 1)),
        ((3, 2), (1, 3)),
        ((3, 1), (1, 3)),  # size-1 dimension: its stride is never used
        ((1, 3), (7, 1)),
        ((2, 1, 3), (3, 100, 1)),
        ((3, 4), (0, 1)),  # expanded: reads the same row three times
        ((1, 4), (0, 1)),  # expanded along a size-1 dimension
        ((0, 3), (7, 9)),  # no elements
        ((), ()),  # 0-d
        ((4,), (2,)),
    ],
)
def test_is_contiguous_edge_cases_agree_with_torch(shape, strides):
    """Size-1, stride-0, empty and 0-d tensors: the answer is whatever torch.empty_strided says (and True for row-major strides)."""
    want = torch.empty_strided(shape, strides).is_contiguous()
    got = adapters.run_is_contiguous(shape, strides)
    assert got == want, (
        f"shape {shape}, strides {strides}: torch says is_contiguous() is {want}, got {got}"
    )
    row_major = torch.empty(shape).stride()  # and the same shape, row-major: a fixed answer scores half
    assert adapters.run_is_contiguous(shape, row_major), f"shape {shape}, row-major strides {row_major}: contiguous"


@st.composite
def shapes_and_strides(draw):
    """Shapes of up to 4 dims; each stride is either the row-major one (so contiguous cases occur) or random."""
    shape = draw(st.lists(st.integers(0, 3), max_size=4).map(tuple))
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step if draw(st.booleans()) else draw(st.integers(0, 12)))
        step *= max(size, 1)
    return shape, tuple(reversed(strides))


@settings(max_examples=100, deadline=None)
@given(shapes_and_strides())
def test_is_contiguous_agrees_with_torch_on_arbitrary_strides(case):
    """For any shape and strides, is_contiguous agrees with torch.empty_strided(...).is_contiguous()."""
    shape, strides = case
    want = torch.empty_strided(shape, strides).is_contiguous()
    assert adapters.run_is_contiguous(shape, strides) == want, (
        f"shape {shape}, strides {strides}: torch says {want}"
    )


def test_is_contiguous_rejects_shape_and_strides_of_different_lengths():
    """One stride per dimension; anything else is a ValueError naming both."""
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(1,\)"):
        adapters.run_is_contiguous((2, 3), (1,))


# --------------------------------------------------------------------------------------------
# view_or_copy
# --------------------------------------------------------------------------------------------


def candidate_shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes with the same number of elements: itself, flat, with a leading 1, reversed, split, merged."""
    out = [shape, (-1,), (math.prod(shape),), (1, *shape), tuple(reversed(shape))]
    for d, size in enumerate(shape):
        for f in range(2, size):
            if size % f == 0:
                out.append(shape[:d] + (f, size // f) + shape[d + 1 :])
    for d in range(len(shape) - 1):
        out.append(shape[:d] + (shape[d] * shape[d + 1],) + shape[d + 2 :])
    return out


def torch_can_view(x: torch.Tensor, shape: tuple[int, ...]) -> bool:
    try:
        x.view(shape)
    except RuntimeError:
        return False
    return True


def assert_view_or_copy_agrees_with_torch(x: torch.Tensor, shape: tuple[int, ...], where: str) -> None:
    """is_view iff x.view(shape) works; values equal x.reshape(shape); views share x's storage, copies are contiguous and separate."""
    y, is_view = adapters.run_view_or_copy(x, shape)
    want_view = torch_can_view(x, shape)
    assert is_view == want_view, (
        f"{where}: x.view(shape) {'works' if want_view else 'raises'}, but is_view={is_view}"
    )
    assert torch.equal(y, x.reshape(shape)), f"{where}: values differ from x.reshape(shape)"
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    if want_view:
        assert shares, f"{where}: a view was possible but the result has its own storage (it copied)"
    else:
        assert not shares and y.is_contiguous(), f"{where}: no view is possible; expected a contiguous copy"


@pytest.mark.parametrize("seed", SEEDS)
def test_view_or_copy_views_exactly_when_torch_view_succeeds(seed):
    """is_view is True iff x.view(shape) works; views share x's storage, copies are contiguous and separate."""
    _, x, chain = random_view(seed)
    for shape in candidate_shapes(tuple(x.shape)):
        assert_view_or_copy_agrees_with_torch(x, shape, f"x = {chain} ({describe(x)}), shape {shape}")


def test_view_or_copy_transpose_then_flatten_must_copy():
    """The lecture's example: x.t() cannot be flattened without a copy, x can."""
    x = torch.arange(6.0).view(2, 3)
    y, is_view = adapters.run_view_or_copy(x, (6,))
    assert is_view and y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y, is_view = adapters.run_view_or_copy(x.t(), (6,))
    assert not is_view, "x.t().view(6) raises in torch: the elements are not in storage order"
    assert y.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]


def test_view_or_copy_rejects_shape_with_wrong_number_of_elements():
    """A shape holding a different number of elements is a ValueError naming both counts."""
    with pytest.raises(ValueError, match=r"\(4, 2\).*8.*6"):
        adapters.run_view_or_copy(torch.zeros(2, 3), (4, 2))


# --------------------------------------------------------------------------------------------
# einops: split_heads, merge_heads, attention_scores
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, seq, heads, d_head", [((2,), 5, 3, 4), ((), 7, 2, 8)])
def test_split_heads_matches_reshape_then_transpose(generator, batch, seq, heads, d_head):
    """split_heads(x, h) == x.view(..., seq, h, d).transpose(-3, -2): head i holds features i*d..(i+1)*d-1."""
    x = torch.randn(*batch, seq, heads * d_head, generator=generator)
    want = x.view(*batch, seq, heads, d_head).transpose(-3, -2)
    assert_close(
        adapters.run_split_heads(x, heads),
        want,
        f"split_heads(x, {heads}) vs reshape+transpose (... heads seq d)",
        tol=0,
    )


@pytest.mark.parametrize("batch, seq, heads, d_head", [((2,), 5, 3, 4), ((), 7, 2, 8)])
def test_merge_heads_matches_transpose_then_reshape_and_inverts_split(
    generator, batch, seq, heads, d_head
):
    """merge_heads(x) == x.transpose(-3, -2).reshape(..., seq, h*d), and merge_heads(split_heads(x, h)) == x."""
    x = torch.randn(*batch, heads, seq, d_head, generator=generator)
    want = x.transpose(-3, -2).reshape(*batch, seq, heads * d_head)
    assert_close(
        adapters.run_merge_heads(x),
        want,
        "merge_heads(x) vs transpose+reshape (... seq (heads d))",
        tol=0,
    )
    y = torch.randn(*batch, seq, heads * d_head, generator=generator)
    assert_close(
        adapters.run_merge_heads(adapters.run_split_heads(y, heads)),
        y,
        "merge_heads(split_heads(y)) vs y",
        tol=0,
    )


def test_split_heads_rejects_num_heads_not_dividing_width():
    """num_heads must divide d_model; the error names both."""
    with pytest.raises(ValueError, match=r"num_heads=5.*d_model=12"):
        adapters.run_split_heads(torch.zeros(2, 3, 12), 5)


@pytest.mark.parametrize("batch, heads, q_len, k_len, d", [((2,), 3, 4, 5, 8), ((), 2, 3, 3, 16)])
def test_attention_scores_match_matmul_over_sqrt_d(generator, batch, heads, q_len, k_len, d):
    """attention_scores(q, k) == q @ k.transpose(-2, -1) / sqrt(d)."""
    q = torch.randn(*batch, heads, q_len, d, generator=generator)
    k = torch.randn(*batch, heads, k_len, d, generator=generator)
    want = q @ k.transpose(-2, -1) / math.sqrt(d)
    got = adapters.run_attention_scores(q, k)
    ratio = (got.norm() / want.norm()).item() if got.shape == want.shape else float("nan")
    assert_close(
        got, want, f"attention_scores vs q @ k^T / sqrt(d={d}) (|got|/|want| = {ratio:.4f})"
    )


def test_attention_scores_rejects_mismatched_head_dimension():
    """q and k must share d; the error names both sizes."""
    with pytest.raises(ValueError, match=r"d=8.*d=4"):
        adapters.run_attention_scores(torch.zeros(2, 3, 8), torch.zeros(2, 3, 4))
