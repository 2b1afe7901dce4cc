"""Tensors: storage, strides, views and einops. PyTorch itself is the oracle for every answer.

Views come from seeded random chains of transpose, permute, strided slicing, unsqueeze and expand
applied to ``arange`` (distinct values, so reading the wrong storage position shows up).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import adapters
from tests.not_written import stub_error

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
    assert got.dtype == want.dtype, f"{what}: expected dtype {want.dtype}, got {got.dtype}"
    if not want.numel():  # an empty result: its shape is all there is to compare
        return
    diff = (got.double() - want.double()).abs()
    flat = int(diff.argmax().item())
    position: list[int] = []
    # unravel the flat position (torch.unravel_index is slow to import)
    for size in reversed(diff.shape):
        flat, i = divmod(flat, size)
        position.insert(0, i)
    where = tuple(position)
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
    assert got == 9, (
        f"flat_index((1, 2), strides=(3, 1), storage_offset=4) = {got}, expected 4 + 1*3 + 2*1 = 9 (add the offset)"
    )
    got = adapters.run_flat_index((), (), 7)
    assert got == 7, (
        f"flat_index((), (), storage_offset=7) = {got}: a 0-d tensor's only element sits at its storage_offset"
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_flat_index_matches_element_addresses_of_random_views(seed):
    """flat_index(i, x.stride(), x.storage_offset()) is where torch actually keeps x[i]."""
    base, x, chain = random_view(seed)
    # a view may hold only position 0: the base's last element is not there
    last = tuple(n - 1 for n in base.shape)
    assert adapters.run_flat_index(last, base.stride()) == base.numel() - 1, (
        f"the last element of {tuple(base.shape)}"
    )
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
    # a view may hold only the value 0: the base's last element is not 0
    last = tuple(n - 1 for n in base.shape)
    assert torch.equal(adapters.run_element_at(base, last), base[last]), (
        f"the last element of {tuple(base.shape)}"
    )
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
    for i in [
        index,
        *itertools.product(*(range(n) for n in view.shape)),
    ]:  # the case, then every element
        got = adapters.run_element_at(x, i).as_subclass(torch.Tensor)
        want = view[i]
        assert torch.equal(got, want), (
            f"element_at(x, {i}) with x of {describe(view)} returned {got.item():g}, but x{list(i)} is "
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
    assert_storage_contrasts(adapters.run_same_storage, "same_storage", oracle_same_storage)


def test_same_storage_sees_through_storage_offset():
    """x[1:] starts at a different address than x but lives in the same storage."""
    x = torch.arange(6.0)
    assert x[1:].data_ptr() != x.data_ptr()
    assert adapters.run_same_storage(x, x[1:])
    assert adapters.run_same_storage(x[2:], x[:3])
    assert not adapters.run_same_storage(x, torch.arange(6.0))
    assert_storage_contrasts(adapters.run_same_storage, "same_storage", oracle_same_storage)


# --------------------------------------------------------------------------------------------
# is_view_of
# --------------------------------------------------------------------------------------------


def bytes_read(x: torch.Tensor) -> set[int]:
    """Oracle: the address of every byte x reads, from torch's own indexing (x[i].data_ptr())."""
    size = x.element_size()
    every = itertools.product(*(range(n) for n in x.shape))
    return {x[i].data_ptr() + b for i in every for b in range(size)}


def oracle_same_storage(y: torch.Tensor, x: torch.Tensor) -> bool:
    return y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def oracle_is_view_of(y: torch.Tensor, x: torch.Tensor) -> bool:
    return oracle_same_storage(y, x) and bytes_read(y) <= bytes_read(x)


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
    assert_storage_contrasts(adapters.run_is_view_of, "is_view_of", oracle_is_view_of)


def test_is_view_of_siblings_share_a_storage_but_are_not_views():
    """base[0] and base[1] share base's storage, yet neither reads the other's elements."""
    base = torch.arange(6.0).view(2, 3)
    assert adapters.run_is_view_of(base.t()[1:], base)
    assert not adapters.run_is_view_of(base[1], base[0]), (
        "base[1] and base[0] share a storage but no element: not a view (compare the bytes read, not only the storage)"
    )
    assert not adapters.run_is_view_of(base, base[0]), (
        "base reads more than base[0]: not a view of it"
    )
    assert_storage_contrasts(adapters.run_is_view_of, "is_view_of", oracle_is_view_of)


# --------------------------------------------------------------------------------------------
# contiguous_strides and is_contiguous
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [(2, 3, 4), (5,), (), (1, 1), (3, 1, 2), (2, 0, 3), (0,), (4, 5, 0, 2)], ids=str
)
def test_contiguous_strides_match_a_fresh_tensor(shape):
    """contiguous_strides(shape) are the strides torch.empty(shape) gets (a size-0 dimension counts as 1); so are
    those of the shape with a leading dimension of 2 (whose stride is the product of all of shape's sizes)."""
    for s in (shape, (2, *shape)):
        want = torch.empty(s).stride()
        got = adapters.run_contiguous_strides(s)
        assert tuple(got) == want, (
            f"contiguous_strides({s}) = {tuple(got)}, torch.empty({s}).stride() = {want}: stride_d is the "
            "product of the sizes after d (row-major; the last dimension moves fastest), with a size 0 counted as 1"
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_is_contiguous_agrees_with_torch_on_random_views(seed):
    """is_contiguous(x.shape, x.stride()) equals x.is_contiguous() for every view in the chain."""
    _, x, chain = random_view(seed)
    fresh = x.contiguous()
    views = [
        x,
        fresh,
        x.unsqueeze(0),
        x.unsqueeze(-1).transpose(0, -1),
        fresh.unsqueeze(0).expand(2, *x.shape),
        fresh.view(-1),
        fresh.unsqueeze(-1).expand(*x.shape, 3),
        fresh.view(-1)[::2],
    ]
    for v in views:
        got = adapters.run_is_contiguous(tuple(v.shape), v.stride())
        assert got == v.is_contiguous(), (
            f"from x = {chain}: {describe(v)} is_contiguous() is {v.is_contiguous()}, got {got}"
        )
    assert_is_contiguous_contrasts()


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
    row_major = torch.empty(
        shape
    ).stride()  # and the same shape, row-major: a fixed answer scores half
    assert adapters.run_is_contiguous(shape, row_major), (
        f"shape {shape}, row-major strides {row_major}: contiguous"
    )
    assert_is_contiguous_contrasts()


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


# Contrasts: a case whose answer a constant or a coin could give (False, zeros, an empty tensor, the 0-d
# strides ()) is checked beside these fixed cases of both answers, so an implementation that returns
# plausible values without computing them fails the test that graded the lucky case; a correct one passes.


def storage_contrasts() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """Pairs (what, y, x): four views of x and four tensors of other storages that read the same byte
    positions as x (so only the storage tells them apart)."""
    base = torch.arange(1.0, 13.0).view(3, 4)
    return [
        ("base.t()[1:] of base", base.t()[1:], base),
        ("base[1] of base", base[1], base),
        ("base.view(int32) of base", base.view(torch.int32), base),
        ("base[:1].expand(3, 4) of base[0]", base[:1].expand(3, 4), base[0]),
        ("base.clone() of base", base.clone(), base),
        ("base.t().contiguous() of base.t()", base.t().contiguous(), base.t()),
        ("base[0].clone() of base", base[0].clone(), base),
        ("a fresh arange(1, 13) of base", torch.arange(1.0, 13.0).view(3, 4), base),
    ]


def assert_storage_contrasts(
    check: Callable[[torch.Tensor, torch.Tensor], bool],
    name: str,
    oracle: Callable[[torch.Tensor, torch.Tensor], bool],
) -> None:
    """``check(y, x) == oracle(y, x)`` on every pair of ``storage_contrasts`` (``check`` is ``name``'s adapter)."""
    for what, y, x in storage_contrasts():
        want = oracle(y, x)
        got = check(y, x)
        assert got == want, f"{name}({what}) should be {want}, got {got}"


def contiguity_contrasts() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Shapes and strides of both answers: four contiguous (size-1 dims with any stride among them), four not."""
    return [
        ((2, 3), (3, 1)),
        ((4, 1, 2), (2, 9, 1)),
        ((3, 2, 2), (4, 2, 1)),
        ((1, 5), (1, 1)),
        ((2, 3), (1, 2)),
        ((3, 4), (0, 1)),
        ((4,), (2,)),
        ((2, 2, 3), (6, 1, 2)),
    ]


def assert_is_contiguous_contrasts() -> None:
    """is_contiguous agrees with torch on every case of ``contiguity_contrasts``."""
    for shape, strides in contiguity_contrasts():
        want = torch.empty_strided(shape, strides).is_contiguous()
        got = adapters.run_is_contiguous(shape, strides)
        assert got == want, (
            f"shape {shape}, strides {strides}: torch says is_contiguous() is {want}, got {got}"
        )


def view_or_copy_contrasts() -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    """Reshapes of both answers, on distinct non-zero values: four views, four copies of tensors that read their
    whole storage (so a copy's byte positions are x's own: only the storage tells it from a view)."""
    x = torch.arange(1.0, 13.0).view(3, 4)
    return [
        (x, (4, 3)),
        (x[:, :2], (3, 2, 1)),
        (x.unsqueeze(0).expand(2, 3, 4), (2, 3, 2, 2)),
        (x.t(), (4, 3, 1)),
        (x.t(), (12,)),
        (x.t(), (2, 6)),
        (x.t(), (3, 4)),
        (x.t().unsqueeze(0), (6, 2)),
    ]


def assert_view_or_copy_contrasts() -> None:
    """``assert_view_or_copy_agrees_with_torch`` on every case of ``view_or_copy_contrasts``."""
    for x, shape in view_or_copy_contrasts():
        assert_view_or_copy_agrees_with_torch(x, shape, f"{describe(x)}, values 1..12 -> {shape}")


def torch_can_view(x: torch.Tensor, shape: tuple[int, ...]) -> bool:
    try:
        x.view(shape)
    except RuntimeError:
        return False
    return True


def assert_view_or_copy_agrees_with_torch(
    x: torch.Tensor, shape: tuple[int, ...], where: str
) -> None:
    """is_view iff x.view(shape) works; values equal x.reshape(shape); views share x's storage, copies are contiguous and separate."""
    y, is_view = adapters.run_view_or_copy(x, shape)
    want_view = torch_can_view(x, shape)
    assert is_view == want_view, (
        f"{where}: x.view(shape) {'works' if want_view else 'raises'}, but is_view={is_view}"
    )
    assert torch.equal(y, x.reshape(shape)), f"{where}: values differ from x.reshape(shape)"
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    if want_view:
        assert shares, (
            f"{where}: a view was possible but the result has its own storage (it copied)"
        )
    else:
        assert not shares and y.is_contiguous(), (
            f"{where}: no view is possible; expected a contiguous copy"
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_view_or_copy_views_exactly_when_torch_view_succeeds(seed):
    """is_view is True iff x.view(shape) works; views share x's storage, copies are contiguous and separate."""
    _, x, chain = random_view(seed)
    for shape in candidate_shapes(tuple(x.shape)):
        assert_view_or_copy_agrees_with_torch(
            x, shape, f"x = {chain} ({describe(x)}), shape {shape}"
        )


def test_view_or_copy_transpose_then_flatten_must_copy():
    """The lecture's example: x.t() cannot be flattened without a copy, x can."""
    x = torch.arange(6.0).view(2, 3)
    y, is_view = adapters.run_view_or_copy(x, (6,))
    assert is_view and y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y, is_view = adapters.run_view_or_copy(x.t(), (6,))
    assert not is_view, "x.t().view(6) raises in torch: the elements are not in storage order"
    assert y.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    assert_view_or_copy_contrasts()


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


# --------------------------------------------------------------------------------------------
# Edges every function must survive: the type of each documented error, sizes of one and zero,
# every dtype, and the device of every returned tensor (checked on ``meta``, which any machine
# has: a tensor there has a device, a dtype and a shape but no memory). Each placement check
# comes with the same call on the CPU, whose values prove the work was done.
# --------------------------------------------------------------------------------------------

#: Dtypes of every kind a storage can hold: 1-byte bool and int, 2-byte bfloat16, 8-byte float.
EDGE_DTYPES = [torch.bool, torch.int8, torch.bfloat16, torch.float64]

#: Where a result that left the input's device usually comes from.
OFF_DEVICE = (
    "compute with torch's own ops on the input (indexing, reshape, einops, @), which keep its device and dtype; "
    "torch.tensor(v.item()), torch.tensor(x.tolist()) and torch.empty/torch.zeros without device= and dtype= "
    "land on the CPU in a default dtype (and fail on meta, which holds no values)"
)


def on_meta(call: Callable[[], torch.Tensor], what: str) -> torch.Tensor:
    """``call()``, whose inputs are on ``meta``; an error torch raises there (reading values, copying them to the
    CPU) fails the test with ``what`` and the usual cause, not torch's bare message."""
    try:
        return call()
    except (RuntimeError, NotImplementedError) as e:
        if stub_error(e) is not None:  # not written yet: reported as such
            raise
        pytest.fail(f"{what} raised {type(e).__name__}: {e}. {OFF_DEVICE}", pytrace=False)


@pytest.mark.parametrize(
    "index, strides, offset, message",
    [
        ((0, 0, 0), (1,), 0, "index (0, 0, 0) has 3 entries but strides (1,) has 1"),
        ((0,), (1,), -2, "storage_offset must be a non-negative integer, got -2"),
        ((1,), (1,), 1.5, "storage_offset must be a non-negative integer, got 1.5"),
        ((2, -3), (4, 1), 0, "negative"),
    ],
    ids=["more-indices-than-strides", "negative-offset", "fractional-offset", "negative-index"],
)
def test_flat_index_raises_value_error_for_each_documented_mistake(index, strides, offset, message):
    """Every Raises entry of flat_index is a ValueError (the type a caller catches) with the documented words."""
    with pytest.raises(ValueError, match=re.escape(message)):
        adapters.run_flat_index(index, strides, offset)


def test_flat_index_of_overlapping_and_repeating_windows():
    """as_strided windows whose rows overlap, and zero strides that repeat an element: the offset is added once."""
    x = torch.arange(40.0).as_strided((3, 4), (3, 2), 5)  # row r starts 3 elements after row r-1
    for index in itertools.product(range(3), range(4)):
        got = adapters.run_flat_index(index, x.stride(), x.storage_offset())
        assert got == storage_position(x, index), (
            f"as_strided((3, 4), (3, 2), 5), index {index}: got {got}"
        )
    got = adapters.run_flat_index((9, 1), (0, 5), 200)
    assert got == 205, (
        f"flat_index((9, 1), strides=(0, 5), storage_offset=200) = {got}, expected 200 + 9*0 + 1*5"
    )


@pytest.mark.parametrize("dtype", EDGE_DTYPES, ids=str)
def test_element_at_keeps_the_dtype_of_x(dtype):
    """element_at reads a strided view of a bool, int8, bfloat16 or float64 storage in x's own dtype."""
    storage = torch.arange(1, 25)
    storage = storage % 3 == 0 if dtype == torch.bool else storage.to(dtype)
    x = storage.view(2, 3, 4).permute(2, 0, 1)[1:, :, ::2]
    for index in itertools.product(*(range(n) for n in x.shape)):
        got = adapters.run_element_at(x, index)
        assert got.dtype == dtype and got.shape == (), (
            f"element_at on a {dtype} view returned a {got.dtype} tensor of shape {tuple(got.shape)}; "
            f"expected a 0-d {dtype} tensor (view the storage in x.dtype, do not rebuild the value)"
        )
        assert torch.equal(got, x[index]), (
            f"{describe(x)}, {dtype}: x{list(index)} is {x[index].item()}, got {got.item()}"
        )


def test_element_at_returns_a_tensor_on_the_device_of_x():
    """element_at of a meta view is a 0-d meta tensor (no .item(), no CPU rebuild); on the CPU it is x[i]."""
    meta = torch.empty(4, 6, device="meta").t()[1:]
    got = on_meta(
        lambda: adapters.run_element_at(meta, (2, 3)), "element_at of a meta float32 view"
    )
    assert (got.device.type, got.dtype, tuple(got.shape)) == ("meta", torch.float32, ()), (
        f"element_at of a meta float32 view returned a tensor on {got.device}, {got.dtype}, shape "
        f"{tuple(got.shape)}: the result lives where x lives (index the storage view). {OFF_DEVICE}"
    )
    cpu = torch.arange(24.0).view(4, 6).t()[1:]
    assert torch.equal(adapters.run_element_at(cpu, (2, 3)), cpu[2, 3])


@pytest.mark.parametrize(
    "make, index",
    [
        (lambda: torch.arange(5.0).view(1, 5, 1), (0, -2, -1)),
        (lambda: torch.arange(8.0).view(2, 4)[:, 3:], (-1, 0)),
        (lambda: torch.arange(1.0, 4.0).view(3, 1).expand(3, 4), (-3, -4)),
        (lambda: torch.arange(1.0, 41.0).as_strided((3, 4), (3, 2), 5), (2, -1)),
    ],
    ids=["size-one-dims", "one-column-slice", "expanded-negative", "overlapping-as-strided"],
)
def test_element_at_reads_size_one_dimensions_and_negative_indices(make, index):
    """Dimensions of size 1 (stride never used to step), indices counted from the end and windows whose rows
    overlap in storage read x[index] (the case, then every index of x, from the start and from the end)."""
    x = make()
    for i in [index, *itertools.product(*(range(-n, n) for n in x.shape))]:
        got = adapters.run_element_at(x, i)
        assert got.shape == () and torch.equal(got, x[i]), (
            f"{describe(x)}: x{list(i)} is {x[i].item()}, got {got}"
        )


@pytest.mark.parametrize(
    "shape, index, message",
    [
        ((2, 3), (-3, 0), "index -3 is out of range for dimension 0 of size 2"),
        ((2, 3), (0, 0, 0), "index (0, 0, 0) has 3 entries but x has 2 dimensions (shape (2, 3))"),
        ((3, 0), (1, 0), "index 0 is out of range for dimension 1 of size 0"),
        ((1,), (1,), "index 1 is out of range for dimension 0 of size 1"),
    ],
    ids=["negative-past-start", "too-many-entries", "empty-dimension", "size-one"],
)
def test_element_at_raises_value_error_for_each_documented_mistake(shape, index, message):
    """Out-of-range entries (negative ones, size-0 and size-1 dimensions) and wrong lengths are ValueErrors with the documented words."""
    with pytest.raises(ValueError, match=re.escape(message)):
        adapters.run_element_at(torch.zeros(shape), index)


def test_element_at_sees_a_write_through_another_view():
    """element_at reads the shared storage: a value written through the base shows through the view."""
    base = torch.zeros(4, 3)
    view = base.t()[:, 1:]
    base[3, 2] = -7.0
    got = adapters.run_element_at(view, (2, 2))
    assert got.item() == -7.0, (
        f"base[3, 2] = -7 is view[2, 2] of base.t()[:, 1:]; element_at read {got.item()}"
    )


def test_same_storage_across_dtype_views_and_disjoint_parts():
    """A dtype view shares the bytes, a conversion does not; disjoint halves still share; empty storages count as one."""
    x = torch.arange(8.0)
    assert adapters.run_same_storage(x, x.view(torch.int32)), (
        "x.view(torch.int32) reinterprets x's own bytes"
    )
    assert not adapters.run_same_storage(x, x.to(torch.float64)), (
        "x.to(float64) converts into a new storage"
    )
    assert adapters.run_same_storage(x[:4], x[4:]), (
        "x[:4] and x[4:] share no element but one storage"
    )
    assert adapters.run_same_storage(torch.zeros(0), torch.empty(3, 0)), (
        "storages of zero bytes have no address (data_ptr() == 0): the docstring counts all empty tensors as sharing one"
    )
    assert_storage_contrasts(adapters.run_same_storage, "same_storage", oracle_same_storage)


def test_is_view_of_across_dtype_views_empty_slices_and_expanded_rows():
    """Byte-level: an int32 view reads x's bytes, the high halves alone are a view but not the reverse;
    an empty slice reads nothing; an expanded row reads one row only."""
    x = torch.arange(4.0, dtype=torch.float64)
    assert adapters.run_is_view_of(x.view(torch.int64), x) and adapters.run_is_view_of(
        x, x.view(torch.int64)
    )
    high = x.view(torch.int32)[1::2]
    assert adapters.run_is_view_of(high, x), "the high 4 bytes of each element are bytes x reads"
    assert not adapters.run_is_view_of(x, high), (
        "x reads all 8 bytes of each element, high only 4: not a view of it"
    )
    base = torch.arange(10.0).view(2, 5)
    assert adapters.run_is_view_of(base[:, 3:3], base[0]), (
        "an empty slice reads no byte, so it is a view"
    )
    assert adapters.run_is_view_of(base[:1].expand(4, 5), base[0])
    assert not adapters.run_is_view_of(base[1:].expand(4, 5), base[0]), (
        "row 1 repeated reads no byte of row 0"
    )
    assert_storage_contrasts(adapters.run_is_view_of, "is_view_of", oracle_is_view_of)


@pytest.mark.parametrize(
    "shape", [[3, 0, 2], torch.Size([1, 4, 1]), (0,)], ids=["list", "torch.Size", "empty"]
)
def test_contiguous_strides_accept_lists_and_torch_size(shape):
    """shape may be a list or a torch.Size (x.shape); sizes 0 and 1 count as 1."""
    want = torch.empty(tuple(shape)).stride()
    got = adapters.run_contiguous_strides(shape)
    assert tuple(got) == want, (
        f"contiguous_strides({shape!r}) = {tuple(got)}, torch.empty gives {want}"
    )


def test_is_contiguous_accepts_torch_size_and_the_strides_tuple():
    """shape may be x.shape (a torch.Size) and strides x.stride(); the answer is x.is_contiguous()."""
    x = torch.zeros(3, 1, 4)
    for v in (x, x.permute(2, 1, 0), x[:, :, ::2], x.expand(2, 3, 1, 4)[1]):
        got = adapters.run_is_contiguous(v.shape, v.stride())
        assert got == v.is_contiguous(), f"{describe(v)}: torch says {v.is_contiguous()}, got {got}"
    assert_is_contiguous_contrasts()


@pytest.mark.parametrize(
    "shape, strides, message",
    [
        ((3,), (3, 1), "shape (3,) has 1 dimensions but strides (3, 1) has 2"),
        ((4, -2), (1, 1), "shape (4, -2) has a negative size"),
    ],
    ids=["more-strides-than-dims", "negative-size"],
)
def test_is_contiguous_raises_value_error_for_each_documented_mistake(shape, strides, message):
    """Both Raises entries of is_contiguous are ValueErrors with the documented words."""
    with pytest.raises(ValueError, match=re.escape(message)):
        adapters.run_is_contiguous(shape, strides)


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: torch.tensor(3.0), (1, 1, 1)),
        (lambda: torch.arange(4.0).view(4, 1).t(), (2, 2)),
        (lambda: torch.zeros(3, 0), (0, 7)),
        (lambda: torch.zeros(3, 0), (-1, 3)),
        (lambda: torch.arange(3.0).view(1, 3).expand(2, 3), (6,)),
        (lambda: torch.arange(3.0).view(1, 3).expand(2, 3), (2, 3, 1)),
    ],
    ids=[
        "0-d",
        "size-one-transpose",
        "empty",
        "empty-infer",
        "expanded-flat",
        "expanded-trailing-one",
    ],
)
def test_view_or_copy_at_size_one_and_empty_agrees_with_torch_view(make, shape):
    """0-d, size-one, empty and expanded tensors: is_view iff x.view(shape) works, values as x.reshape(shape)."""
    x = make()
    assert_view_or_copy_agrees_with_torch(x, shape, f"{describe(x)} -> {shape}")
    assert_view_or_copy_contrasts()


def test_view_or_copy_view_writes_through_and_copy_does_not():
    """A view returned by view_or_copy shares x's memory; a copy does not."""
    x = torch.zeros(3, 8)[:, 2:6]  # splitting the last dim is a view, flattening is not
    y, is_view = adapters.run_view_or_copy(x, (3, 2, 2))
    assert is_view, f"{describe(x)} -> (3, 2, 2): x.view works, so is_view must be True"
    y[2, 1, 0] = 4.0
    assert x[2, 2].item() == 4.0, "writing the view must change x (they share memory)"
    z, is_view = adapters.run_view_or_copy(x, (12,))
    assert not is_view, f"{describe(x)} -> (12,): x.view raises, so it must be a copy"
    z.fill_(9.0)
    assert x.max().item() == 4.0, "writing the copy changed x: a copy needs a storage of its own"
    assert_view_or_copy_contrasts()


@pytest.mark.parametrize("shape", [(12,), (2, 6)], ids=["copy", "copy-split"])
def test_view_or_copy_returns_a_tensor_on_the_device_and_in_the_dtype_of_x(shape):
    """A copy, like a view, lives on x's device in x's dtype (meta here: any machine can check it); on the CPU the
    same call copies x's values."""
    meta = torch.empty(3, 4, device="meta", dtype=torch.bfloat16).t()
    what = f"view_or_copy of a meta bfloat16 {describe(meta)} to {shape}"
    y, _ = on_meta(lambda: adapters.run_view_or_copy(meta, shape), what)
    assert (y.device.type, y.dtype, tuple(y.shape)) == ("meta", torch.bfloat16, shape), (
        f"{what} returned {y.device}, {y.dtype}, shape {tuple(y.shape)}: a copy, like a view, keeps x's device "
        f"and dtype. {OFF_DEVICE}"
    )
    x = torch.arange(1, 13, dtype=torch.bfloat16).view(3, 4).t()
    assert_view_or_copy_agrees_with_torch(x, shape, f"{describe(x)}, bfloat16 -> {shape}")
    assert_view_or_copy_contrasts()


@pytest.mark.parametrize(
    "make, shape, message",
    [
        (lambda: torch.zeros(6), (2, -1, -1), "shape (2, -1, -1) is invalid"),
        (lambda: torch.zeros(6), (-4, 3), "shape (-4, 3) is invalid"),
        (lambda: torch.zeros(6), (5, -1), "cannot infer the -1 in shape (5, -1): 6 elements of x"),
        (
            lambda: torch.zeros(0, 3),
            (0, -1),
            "cannot infer the -1 in shape (0, -1): 0 elements of x",
        ),
        (lambda: torch.zeros(8)[::2], (8,), "shape (8,) holds 8 elements but x (shape (4,)) has 4"),
    ],
    ids=[
        "two-inferred",
        "below-minus-one",
        "uninferable",
        "empty-uninferable",
        "numel-of-the-view",
    ],
)
def test_view_or_copy_raises_value_error_for_each_documented_mistake(make, shape, message):
    """Each Raises entry of view_or_copy is a ValueError with the documented words (counts are x.numel(), not the storage's)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        adapters.run_view_or_copy(make(), shape)


# (batch dims, seq, heads, d_head): a batch of one, one position, one head, width-one heads
SIZE_ONE_HEADS = [((1,), 1, 1, 4), ((1, 1), 3, 4, 1), ((2,), 1, 2, 3)]
SIZE_ONE_HEADS_IDS = ["batch-1-seq-1-head-1", "d_head-1", "seq-1"]


@pytest.mark.parametrize("batch, seq, heads, d_head", SIZE_ONE_HEADS, ids=SIZE_ONE_HEADS_IDS)
def test_split_and_merge_heads_keep_dimensions_of_size_one_and_zero(batch, seq, heads, d_head):
    """A batch of one, one position, one head and d_head = 1 keep every dimension (no squeeze); so do the same
    input with its sequence or its batch emptied."""
    full = torch.arange(1, 1 + math.prod((*batch, seq, heads * d_head)), dtype=torch.float32)
    full = full.view(*batch, seq, heads * d_head)
    for x in (full, full[..., :0, :], full[:0]):
        want = x.reshape(*x.shape[:-1], heads, d_head).transpose(-3, -2)
        got = adapters.run_split_heads(x, heads)
        assert_close(
            got,
            want,
            f"split_heads(x of shape {tuple(x.shape)}, {heads}) (keep every size-1 and size-0 dimension)",
            tol=0,
        )
        assert_close(
            adapters.run_merge_heads(want), x, f"merge_heads(x of shape {tuple(want.shape)})", tol=0
        )


def test_split_heads_of_a_non_contiguous_input():
    """An input with any strides (here the transpose of a (d_model, seq) tensor) splits like its contiguous copy."""
    x = torch.arange(40.0).view(8, 5).t()  # (seq=5, d_model=8), strides (1, 5)
    want = x.contiguous().view(5, 2, 4).transpose(0, 1)
    assert_close(
        adapters.run_split_heads(x, 2), want, "split_heads of a transposed (5, 8) input", tol=0
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: adapters.run_split_heads(torch.zeros(2, 8), 0),
            "num_heads=0 must be a positive divisor of the width d_model=8",
        ),
        (
            lambda: adapters.run_split_heads(torch.zeros(2, 8), -4),
            "num_heads=-4 must be a positive divisor of the width d_model=8",
        ),
        (lambda: adapters.run_split_heads(torch.zeros(8), 2), "got shape (8,)"),
        (lambda: adapters.run_merge_heads(torch.zeros(2, 5)), "got shape (2, 5)"),
        (
            lambda: adapters.run_attention_scores(torch.zeros(2, 4), torch.zeros(1, 3, 4)),
            "got shapes (2, 4) and (1, 3, 4)",
        ),
        (
            lambda: adapters.run_attention_scores(torch.zeros(1, 3, 2), torch.zeros(1, 3, 6)),
            "q has head dimension d=2 but k has d=6",
        ),
    ],
    ids=[
        "zero-heads",
        "negative-heads",
        "split-a-vector",
        "merge-a-matrix",
        "scores-of-a-matrix",
        "head-dims-differ",
    ],
)
def test_named_dims_raise_value_error_for_each_documented_mistake(call, message):
    """Every Raises entry of split_heads, merge_heads and attention_scores is a ValueError with the documented words."""
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.parametrize(
    "q_shape, k_shape",
    [((1, 1, 1, 1), (1, 1, 1, 1)), ((2, 1, 3), (2, 4, 3)), ((1, 2, 3, 5), (1, 2, 2, 5))],
    ids=["all-ones", "one-query", "batch-1"],
)
def test_attention_scores_keep_dimensions_of_size_one_and_zero(q_shape, k_shape):
    """One query, one key, d = 1 and a batch of one give (... heads q k) with every dimension kept; so does no key at all."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(q_shape, generator=g, dtype=torch.float64)
    k = torch.randn(k_shape, generator=g, dtype=torch.float64)
    for keys in (k, k[..., :0, :]):
        want = q @ keys.transpose(-2, -1) / math.sqrt(q_shape[-1])
        got = adapters.run_attention_scores(q, keys)
        assert_close(got, want, f"attention_scores(q {q_shape}, k {tuple(keys.shape)})", tol=1e-12)


def test_attention_scores_of_zero_tiny_and_huge_inputs():
    """Zero queries score 0 against anything; tiny (1e-20) and huge (1e15) float64 entries scale exactly as q k^T / sqrt(d)."""
    g = torch.Generator().manual_seed(2)
    k = torch.randn(3, 5, 16, generator=g, dtype=torch.float64)
    got = adapters.run_attention_scores(torch.zeros(3, 2, 16, dtype=torch.float64), k)
    assert got.shape == (3, 2, 5) and torch.equal(got, torch.zeros(3, 2, 5, dtype=torch.float64)), (
        "attention_scores of all-zero queries must be all zero"
    )
    for scale in (1e-20, 1e15):
        q = torch.randn(3, 2, 16, generator=g, dtype=torch.float64) * scale
        want = q @ k.transpose(-2, -1) / 4.0
        assert_close(
            adapters.run_attention_scores(q, k) / scale,
            want / scale,
            f"queries of magnitude {scale:g}",
            tol=1e-10,
        )


def test_attention_scores_have_unit_variance_for_unit_variance_inputs():
    """With entries of variance 1 the scaled scores have variance ~1 (d = 128): the point of 1/sqrt(d)."""
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(8, 32, 128, generator=g), torch.randn(8, 32, 128, generator=g)
    scores = adapters.run_attention_scores(q, k)
    var = scores.var().item()
    assert 0.85 < var < 1.15, (
        f"score variance {var:.3f}: with 1/sqrt(d) it is ~1, unscaled ~d = 128, with 1/d ~1/128"
    )
    assert_close(
        scores, q @ k.transpose(-2, -1) / math.sqrt(128), "attention_scores vs q @ k^T / sqrt(128)"
    )


# (function, inputs built from (device, dtype)): every named_dims function that returns a tensor
NAMED_DIMS_CALLS = {
    "split_heads": lambda dev, dt: adapters.run_split_heads(
        torch.ones(2, 3, 8, device=dev, dtype=dt), 4
    ),
    "merge_heads": lambda dev, dt: adapters.run_merge_heads(
        torch.ones(2, 4, 3, 2, device=dev, dtype=dt)
    ),
    "attention_scores": lambda dev, dt: adapters.run_attention_scores(
        torch.ones(2, 3, 4, device=dev, dtype=dt), torch.ones(2, 5, 4, device=dev, dtype=dt)
    ),
}
NAMED_DIMS_RESULTS = {
    "split_heads": ((2, 4, 3, 2), 1.0),
    "merge_heads": ((2, 3, 8), 1.0),
    "attention_scores": ((2, 3, 5), 2.0),  # four products of 1, over sqrt(4)
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("name", NAMED_DIMS_CALLS)
def test_named_dims_return_tensors_on_the_device_and_in_the_dtype_of_their_inputs(name, dtype):
    """split_heads, merge_heads and attention_scores return x's device and dtype (meta here, so any machine can
    check it), and the same call on the CPU returns the right values."""
    shape, value = NAMED_DIMS_RESULTS[name]
    got = on_meta(lambda: NAMED_DIMS_CALLS[name]("meta", dtype), f"{name} of meta {dtype} inputs")
    assert (got.device.type, got.dtype, tuple(got.shape)) == ("meta", dtype, shape), (
        f"{name} of meta {dtype} inputs returned a tensor on {got.device}, {got.dtype}, shape {tuple(got.shape)}; "
        f"expected meta, {dtype}, {shape}: do not cast to float32. {OFF_DEVICE}"
    )
    cpu = NAMED_DIMS_CALLS[name]("cpu", dtype)
    assert cpu.dtype == dtype and torch.equal(cpu, torch.full(shape, value, dtype=dtype)), (
        f"{name} of all-one {dtype} inputs on the CPU: expected all {value} of shape {shape}, got {cpu}"
    )
