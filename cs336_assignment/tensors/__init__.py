"""Tensors: what a tensor is in memory, then dimensions named instead of counted.

    strides.py      storage, shape, strides and offset: where an element lives, views vs copies,
                    contiguity, and what a copy costs
    named_dims.py   einops rearrange / einsum / reduce and jaxtyping names: split and merge heads,
                    attention scores

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: torch tensors and their methods (shape, stride, storage_offset, view, reshape,
        untyped_storage, ...), einops.
    Not allowed: as in every part: torch.optim's optimizers, torch.nn.Linear or F.linear,
        FlopCounterMode or the profiler, tokenizer libraries, torch.amp.GradScaler, reaching the
        tests or the interpreter's insides.
"""

from .named_dims import attention_scores, mean_over_hidden, merge_heads, split_heads
from .strides import (
    contiguous_strides,
    copy_bytes,
    element_at,
    flat_index,
    is_contiguous,
    is_view_of,
    same_storage,
    storage_view,
    view_or_copy,
)

__all__ = [
    "attention_scores",
    "contiguous_strides",
    "copy_bytes",
    "element_at",
    "flat_index",
    "is_contiguous",
    "is_view_of",
    "mean_over_hidden",
    "merge_heads",
    "same_storage",
    "split_heads",
    "storage_view",
    "view_or_copy",
]
