"""Named dimensions: say what each axis means instead of counting positions.

(Corpus entry ``heads-by-hand``: written from the handout's docstrings without einops' patterns:
``unflatten``, ``movedim`` and ``reshape`` move the axes, a batched ``@`` takes the dot products,
and the scale is multiplied in as ``rsqrt(d)`` in the inputs' dtype.)
"""

from __future__ import annotations

import einops
import torch  # noqa: F401  (the >>> examples use it)
from jaxtyping import Float
from torch import Tensor


def _shape(x: Tensor) -> tuple[int, ...]:
    return tuple(x.shape)


def split_heads(
    x: Float[Tensor, "... seq d_model"], num_heads: int
) -> Float[Tensor, "... heads seq d_head"]:
    """Split the last dimension into ``num_heads`` heads: ``"... seq (heads d) -> ... heads seq d"``."""
    if x.dim() < 2:
        raise ValueError(f"split_heads needs (... seq d_model), got shape {_shape(x)}")
    width = x.size(-1)
    if not (num_heads > 0 and width % num_heads == 0):
        raise ValueError(
            f"num_heads={num_heads} must be a positive divisor of the width d_model={width}"
        )
    per_head = x.unflatten(-1, (num_heads, width // num_heads))  # ... seq heads d
    return per_head.movedim(-2, -3)  # ... heads seq d


def merge_heads(x: Float[Tensor, "... heads seq d_head"]) -> Float[Tensor, "... seq d_model"]:
    """Undo ``split_heads``: ``"... heads seq d -> ... seq (heads d)"``, so ``d_model = heads * d_head``."""
    if x.dim() < 3:
        raise ValueError(f"merge_heads needs (... heads seq d_head), got shape {_shape(x)}")
    heads, d_head = x.size(-3), x.size(-1)
    seq_first = x.movedim(-3, -2)  # ... seq heads d
    return seq_first.reshape(*seq_first.shape[:-2], heads * d_head)


def attention_scores(
    q: Float[Tensor, "... heads q d"], k: Float[Tensor, "... heads k d"]
) -> Float[Tensor, "... heads q k"]:
    """Scaled dot products ``scores[..., h, i, j] = q[..., h, i, :] . k[..., h, j, :] / sqrt(d)``."""
    if min(q.dim(), k.dim()) < 3:
        raise ValueError(
            f"attention_scores needs (... heads seq d) for both, got shapes {_shape(q)} and {_shape(k)}"
        )
    d = q.size(-1)
    if k.size(-1) != d:
        raise ValueError(f"q has head dimension d={d} but k has d={k.size(-1)}")
    scale = torch.tensor(d, dtype=q.dtype, device=q.device).rsqrt()
    return (q @ k.transpose(-1, -2)) * scale


def mean_over_hidden(x: Float[Tensor, "... d_model"]) -> Float[Tensor, " ..."]:
    """(Given.) The mean of each vector over its hidden dimension: ``reduce(x, "... d -> ...", "mean")``.

    >>> mean_over_hidden(torch.tensor([[1.0, 3.0], [2.0, 4.0]]))
    tensor([2., 3.])
    """
    return einops.reduce(x, "... d -> ...", "mean")
