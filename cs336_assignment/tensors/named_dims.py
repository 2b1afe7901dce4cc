"""Named dimensions: say what each axis means instead of counting positions.

``x.view(b, s, h, d).transpose(1, 2)`` is correct only if the reader remembers which axis is
which. einops patterns name them instead, and one pattern states the whole reshuffle:

    rearrange   move, split and merge axes      "... seq (heads d) -> ... heads seq d"
    einsum      multiply and sum named axes     "... heads q d, ... heads k d -> ... heads q k"
    reduce      sum, mean or max named axes     "... d -> ..."

Axes named on both sides are kept, an axis named only on the left is summed (``einsum``) or
reduced (``reduce``), ``(heads d)`` is one axis made of two, and ``...`` stands for any number of
batch axes. jaxtyping annotations (``Float[Tensor, "... heads seq d"]``) put the same names on
signatures, so the shapes a function takes and returns are part of its documentation.

Deliberately left out: what a view or a copy is (storage and strides: ``strides.py``; einops
returns a view when it can, as ``reshape`` does), the rest of attention (softmax, masks, the
weighted sum of values), einops' ``pack`` / ``unpack`` and layers, and checking jaxtyping
annotations at run time (here the names are documentation, not checks).
"""

from __future__ import annotations

import math

import einops
import torch  # noqa: F401  (the >>> examples use it)
from jaxtyping import Float
from torch import Tensor


def split_heads(
    x: Float[Tensor, "... seq d_model"], num_heads: int
) -> Float[Tensor, "... heads seq d_head"]:
    """Split the last dimension into ``num_heads`` heads: ``"... seq (heads d) -> ... heads seq d"``.

    Head ``h`` gets features ``h * d_head`` to ``(h + 1) * d_head - 1``, with
    ``d_head = d_model / num_heads``, which must be a whole number.

    ``x`` may have any number of batch dimensions (none too) and need not be contiguous. Every
    dimension is kept, those of size 1 or 0 included (a batch of one stays a batch of one), and
    the result has ``x``'s dtype and device.

    >>> split_heads(torch.zeros(2, 5, 12), num_heads=3).shape
    torch.Size([2, 3, 5, 4])

    Raises:
        ValueError: if ``x`` has fewer than 2 dimensions; the message shows its shape as a tuple
            ("got shape (12,)").
        ValueError: if ``num_heads`` is not a positive divisor of ``d_model``; the message names
            both as ``name=value``: "num_heads=5 must be a positive divisor of the width
            d_model=12".
    """
    # BEGIN SOLUTION
    if x.ndim < 2:
        raise ValueError(
            f"x must have at least 2 dimensions (... seq d_model), got shape {tuple(x.shape)}"
        )
    d_model = x.shape[-1]
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(
            f"num_heads={num_heads} must be a positive divisor of the width d_model={d_model} "
            f"(x has shape {tuple(x.shape)}); choose num_heads so that d_model / num_heads is whole"
        )
    return einops.rearrange(x, "... seq (heads d) -> ... heads seq d", heads=num_heads)
    # END SOLUTION


def merge_heads(x: Float[Tensor, "... heads seq d_head"]) -> Float[Tensor, "... seq d_model"]:
    """Undo ``split_heads``: ``"... heads seq d -> ... seq (heads d)"``, so ``d_model = heads * d_head``.

    As in ``split_heads``, dimensions of size 1 or 0 are kept and the result has ``x``'s dtype and
    device.

    >>> merge_heads(torch.zeros(2, 3, 5, 4)).shape
    torch.Size([2, 5, 12])

    Raises:
        ValueError: if ``x`` has fewer than 3 dimensions; the message shows its shape as a tuple
            ("got shape (4, 3)").
    """
    # BEGIN SOLUTION
    if x.ndim < 3:
        raise ValueError(
            f"x must have at least 3 dimensions (... heads seq d_head), got shape {tuple(x.shape)}"
        )
    return einops.rearrange(x, "... heads seq d -> ... seq (heads d)")
    # END SOLUTION


def attention_scores(
    q: Float[Tensor, "... heads q d"], k: Float[Tensor, "... heads k d"]
) -> Float[Tensor, "... heads q k"]:
    """Scaled dot products ``scores[..., h, i, j] = q[..., h, i, :] . k[..., h, j, :] / sqrt(d)``.

    One ``einsum``: ``"... heads q d, ... heads k d -> ... heads q k"``; the ``1/sqrt(d)`` keeps the
    scores' variance near 1 when ``q`` and ``k`` have unit-variance entries. The scores are
    computed and returned in the inputs' dtype, on their device (no cast to float32), and every
    dimension is kept: one query, one key, ``d = 1`` or no keys at all (``k`` of length 0).

    >>> attention_scores(torch.ones(1, 2, 4), torch.ones(1, 3, 4))
    tensor([[[2., 2., 2.],
             [2., 2., 2.]]])

    Raises:
        ValueError: if ``q`` or ``k`` has fewer than 3 dimensions; the message shows both shapes
            as tuples ("got shapes (3, 4) and (2, 3, 4)").
        ValueError: if ``q`` and ``k`` have different head dimensions; the message names both as
            ``d=value``: "q has head dimension d=8 but k has d=4".
    """
    # BEGIN SOLUTION
    if q.ndim < 3 or k.ndim < 3:
        raise ValueError(
            f"q and k need at least 3 dimensions (... heads seq d), got shapes {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q has head dimension d={q.shape[-1]} but k has d={k.shape[-1]} (shapes {tuple(q.shape)} "
            f"and {tuple(k.shape)}); queries and keys must have the same d"
        )
    scores = einops.einsum(q, k, "... heads q d, ... heads k d -> ... heads q k")
    return scores / math.sqrt(q.shape[-1])
    # END SOLUTION


def mean_over_hidden(x: Float[Tensor, "... d_model"]) -> Float[Tensor, " ..."]:
    """(Given.) The mean of each vector over its hidden dimension: ``reduce(x, "... d -> ...", "mean")``.

    >>> mean_over_hidden(torch.tensor([[1.0, 3.0], [2.0, 4.0]]))
    tensor([2., 3.])
    """
    return einops.reduce(x, "... d -> ...", "mean")
