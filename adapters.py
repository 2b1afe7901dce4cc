"""The only door from the tests to your code.

Every test reaches the assignment through one of these functions. Each is a thin wrapper whose
one-line docstring names the function it calls; you implement that function in
``cs336_assignment/``, not here. Keep the names and parameters of these adapters unchanged: the
graders' hidden tests call them too. (A test checks that every adapter's parameters match what it
calls, so these docstrings cannot drift from the code.)

The sections below follow the parts of the assignment, numbered as in README.md and
assignment.pdf (which list each part's points); the last section holds given tools with nothing to
implement: the ``cs336`` command and the measurement helpers, which run your code, so the tests
reach them through here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import IO, Any, BinaryIO

import numpy.typing as npt
import torch
from jaxtyping import Float, Int
from torch import Tensor

from cs336_assignment import (
    accounting,
    checkpoint,
    cli,
    data,
    models,
    optim,
    precision,
    tensors,
    tokenization,
    training,
)

# --------------------------------------------------------------------------------------------
# 1. Tensors
# --------------------------------------------------------------------------------------------


def run_flat_index(
    index: tuple[int, ...], strides: tuple[int, ...], storage_offset: int = 0
) -> int:
    """See cs336_assignment.tensors.flat_index."""
    return tensors.flat_index(index, strides, storage_offset)


def run_element_at(x: Tensor, index: tuple[int, ...]) -> Tensor:
    """See cs336_assignment.tensors.element_at."""
    return tensors.element_at(x, index)


def run_same_storage(x: Tensor, y: Tensor) -> bool:
    """See cs336_assignment.tensors.same_storage."""
    return tensors.same_storage(x, y)


def run_is_view_of(y: Tensor, x: Tensor) -> bool:
    """See cs336_assignment.tensors.is_view_of."""
    return tensors.is_view_of(y, x)


def run_contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """See cs336_assignment.tensors.contiguous_strides."""
    return tensors.contiguous_strides(shape)


def run_is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """See cs336_assignment.tensors.is_contiguous."""
    return tensors.is_contiguous(shape, strides)


def run_view_or_copy(x: Tensor, shape: tuple[int, ...]) -> tuple[Tensor, bool]:
    """See cs336_assignment.tensors.view_or_copy."""
    return tensors.view_or_copy(x, shape)


def run_split_heads(
    x: Float[Tensor, "... seq d_model"], num_heads: int
) -> Float[Tensor, "... heads seq d_head"]:
    """See cs336_assignment.tensors.split_heads."""
    return tensors.split_heads(x, num_heads)


def run_merge_heads(x: Float[Tensor, "... heads seq d_head"]) -> Float[Tensor, "... seq d_model"]:
    """See cs336_assignment.tensors.merge_heads."""
    return tensors.merge_heads(x)


def run_attention_scores(
    q: Float[Tensor, "... heads q d"], k: Float[Tensor, "... heads k d"]
) -> Float[Tensor, "... heads q k"]:
    """See cs336_assignment.tensors.attention_scores."""
    return tensors.attention_scores(q, k)


# --------------------------------------------------------------------------------------------
# 2. Models and initialisation
# --------------------------------------------------------------------------------------------


def run_linear(
    d_in: int,
    d_out: int,
    weights: Float[Tensor, " d_out d_in"],
    in_features: Float[Tensor, " ... d_in"],
) -> Float[Tensor, " ... d_out"]:
    """See cs336_assignment.models.Linear: load `weights` into a Linear(d_in, d_out) and apply it."""
    layer = models.Linear(d_in, d_out, device=weights.device, dtype=weights.dtype)
    layer.load_state_dict({"weight": weights})
    return layer(in_features)


def get_linear_cls() -> type[torch.nn.Module]:
    """See cs336_assignment.models.Linear."""
    return models.Linear


def get_cruncher_cls() -> type[torch.nn.Module]:
    """See cs336_assignment.models.Cruncher."""
    return models.Cruncher


def run_set_seed(seed: int) -> None:
    """See cs336_assignment.models.set_seed."""
    return models.set_seed(seed)


# --------------------------------------------------------------------------------------------
# 3. Optimizers
# --------------------------------------------------------------------------------------------


def get_sgd_cls() -> type[torch.optim.Optimizer]:
    """See cs336_assignment.optim.SGD."""
    return optim.SGD


def get_adagrad_cls() -> type[torch.optim.Optimizer]:
    """See cs336_assignment.optim.AdaGrad."""
    return optim.AdaGrad


def get_rmsprop_cls() -> type[torch.optim.Optimizer]:
    """See cs336_assignment.optim.RMSProp."""
    return optim.RMSProp


def get_adam_cls() -> type[torch.optim.Optimizer]:
    """See cs336_assignment.optim.Adam."""
    return optim.Adam


def get_adamw_cls() -> type[torch.optim.Optimizer]:
    """See cs336_assignment.optim.AdamW."""
    return optim.AdamW


# --------------------------------------------------------------------------------------------
# 4. Data loading
# --------------------------------------------------------------------------------------------


def run_get_batch(
    dataset: npt.NDArray,
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[Int[Tensor, " batch context"], Int[Tensor, " batch context"]]:
    """See cs336_assignment.data.get_batch."""
    return data.get_batch(dataset, batch_size, context_length, device, generator)


# --------------------------------------------------------------------------------------------
# 5. Checkpointing
# --------------------------------------------------------------------------------------------


def run_save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: str | os.PathLike | BinaryIO | IO[bytes],
) -> None:
    """See cs336_assignment.checkpoint.save_checkpoint."""
    return checkpoint.save_checkpoint(model, optimizer, iteration, out)


def run_load_checkpoint(
    src: str | os.PathLike | BinaryIO | IO[bytes],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
) -> int:
    """See cs336_assignment.checkpoint.load_checkpoint."""
    return checkpoint.load_checkpoint(src, model, optimizer)


# --------------------------------------------------------------------------------------------
# 6. Tokenization
# --------------------------------------------------------------------------------------------


def get_character_tokenizer() -> Any:
    """See cs336_assignment.tokenization.CharacterTokenizer."""
    return tokenization.CharacterTokenizer()


def get_byte_tokenizer() -> Any:
    """See cs336_assignment.tokenization.ByteTokenizer."""
    return tokenization.ByteTokenizer()


def run_compression_ratio(text: str, ids: list[int]) -> float:
    """See cs336_assignment.tokenization.compression_ratio."""
    return tokenization.compression_ratio(text, ids)


def run_train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    **kwargs: Any,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """See cs336_assignment.tokenization.train_bpe."""
    return tokenization.train_bpe(input_path, vocab_size, special_tokens, **kwargs)


def get_tokenizer(
    vocab: dict[int, bytes],
    merges: list[tuple[bytes, bytes]],
    special_tokens: list[str] | None = None,
) -> Any:
    """See cs336_assignment.tokenization.Tokenizer."""
    return tokenization.Tokenizer(vocab, merges, special_tokens)


# --------------------------------------------------------------------------------------------
# 7. Resource accounting
# --------------------------------------------------------------------------------------------


def run_tensor_memory_bytes(x: Tensor) -> int:
    """See cs336_assignment.accounting.tensor_memory_bytes."""
    return accounting.tensor_memory_bytes(x)


def run_matmul_flops(m: int, k: int, n: int) -> int:
    """See cs336_assignment.accounting.matmul_flops."""
    return accounting.matmul_flops(m, k, n)


def run_count_flops(fn: Callable[..., Tensor], *args: Any, backward: bool = True) -> int:
    """See cs336_assignment.accounting.count_flops."""
    return accounting.count_flops(fn, *args, backward=backward)


def run_activation_bytes(fn: Callable[..., Tensor], *args: Any) -> int:
    """See cs336_assignment.accounting.activation_bytes."""
    return accounting.activation_bytes(fn, *args)


def run_training_memory_bytes(
    num_params: int, num_activations: int, optimizer: str, precision: str
) -> int:
    """See cs336_assignment.accounting.training_memory_bytes."""
    return accounting.training_memory_bytes(num_params, num_activations, optimizer, precision)


def run_training_days(
    num_params: float, num_tokens: float, num_gpus: int, peak_flops_per_gpu: float, mfu: float
) -> float:
    """See cs336_assignment.accounting.training_days."""
    return accounting.training_days(num_params, num_tokens, num_gpus, peak_flops_per_gpu, mfu)


def run_max_trainable_params(num_gpus: int, bytes_per_gpu: float, bytes_per_param: float) -> float:
    """See cs336_assignment.accounting.max_trainable_params."""
    return accounting.max_trainable_params(num_gpus, bytes_per_gpu, bytes_per_param)


def run_mfu(flops: float, seconds: float, peak_flops_per_sec: float) -> float:
    """See cs336_assignment.accounting.mfu."""
    return accounting.mfu(flops, seconds, peak_flops_per_sec)


def run_bytes_per_element(dtype: torch.dtype | str) -> int:
    """See cs336_assignment.accounting.bytes_per_element."""
    return accounting.bytes_per_element(dtype)


def run_linear_chain_flops(
    num_tokens: int, dims: list[int], backward: bool = True, input_requires_grad: bool = False
) -> int:
    """See cs336_assignment.accounting.linear_chain_flops."""
    return accounting.linear_chain_flops(num_tokens, dims, backward, input_requires_grad)


def get_flop_counter_cls() -> type:
    """See cs336_assignment.accounting.FlopCounter (a context manager with ``.total`` and ``.by_module()``)."""
    return accounting.FlopCounter


def run_cruncher_activations(batch: int, dim: int, num_layers: int) -> int:
    """See cs336_assignment.accounting.cruncher_activations."""
    return accounting.cruncher_activations(batch, dim, num_layers)


def run_optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """See cs336_assignment.accounting.optimizer_state_bytes."""
    return accounting.optimizer_state_bytes(optimizer)


def run_peak_flops(gpu: str, dtype: str | torch.dtype) -> float:
    """See cs336_assignment.accounting.peak_flops."""
    return accounting.peak_flops(gpu, dtype)


def run_time_matmul(a: Tensor, b: Tensor, warmup: int = 3, iters: int = 10) -> float:
    """See cs336_assignment.accounting.time_matmul."""
    return accounting.time_matmul(a, b, warmup, iters)


# --------------------------------------------------------------------------------------------
# 8. Precision
# --------------------------------------------------------------------------------------------


def run_dtype_info(dtype: torch.dtype) -> dict[str, float | int]:
    """See cs336_assignment.precision.dtype_info."""
    return precision.dtype_info(dtype)


def run_to_fp8(
    x: Tensor, dtype: torch.dtype, granularity: str = "tensor", scale: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """See cs336_assignment.precision.to_fp8 (``scale``: quantise with a given, possibly stale, scale)."""
    return precision.to_fp8(x, dtype, granularity, scale)


def run_from_fp8(x_fp8: Tensor, scale: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """See cs336_assignment.precision.from_fp8."""
    return precision.from_fp8(x_fp8, scale, dtype)


def run_fp8_matmul(
    a: Tensor, b: Tensor, granularity: str = "tensor", out_dtype: torch.dtype = torch.bfloat16
) -> Tensor:
    """See cs336_assignment.precision.fp8_matmul."""
    return precision.fp8_matmul(a, b, granularity, out_dtype)


def run_mixed_precision_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: Tensor,
    y: Tensor,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    dtype: torch.dtype = torch.bfloat16,
) -> Tensor:
    """See cs336_assignment.precision.mixed_precision_step (the batch is the pair (x, y))."""
    return precision.mixed_precision_step(model, optimizer, (x, y), loss_fn, dtype)


def get_loss_scaler_cls() -> type:
    """See cs336_assignment.precision.DynamicLossScaler."""
    return precision.DynamicLossScaler


# --------------------------------------------------------------------------------------------
# 9. Training loop
# --------------------------------------------------------------------------------------------


def run_train_loop(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    get_batch: Callable[[int], tuple[Tensor, Tensor]],
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    num_steps: int,
    **kwargs: Any,
) -> list[float]:
    """See cs336_assignment.training.train_loop."""
    return training.train_loop(model, optimizer, get_batch, loss_fn, num_steps, **kwargs)


# --------------------------------------------------------------------------------------------
# Given tools (nothing to implement here or there)
# --------------------------------------------------------------------------------------------


def run_cs336(argv: list[str]) -> int:
    """See cs336_assignment.cli.main (the ``cs336`` command, run in this process; its exit status)."""
    return cli.main(argv)


def run_measure_allocation(
    make: Callable[[], Tensor], device: torch.device | str
) -> tuple[Tensor, int]:
    """See cs336_assignment.accounting.measure_allocation."""
    return accounting.measure_allocation(make, device)


def run_measure_training_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: Tensor
) -> Any:
    """See cs336_assignment.accounting.measure_training_step."""
    return accounting.measure_training_step(model, optimizer, x)


def run_matmul_throughput(
    n: int,
    dtype: torch.dtype,
    device: torch.device | str,
    warmup: int = 3,
    iters: int = 10,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """See cs336_assignment.accounting.matmul_throughput."""
    return accounting.matmul_throughput(n, dtype, device, warmup, iters, generator)


__all__ = [name for name in dict(globals()) if name.startswith(("run_", "get_"))]
