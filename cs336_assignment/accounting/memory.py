"""Memory on paper: bytes per element, per tensor, per parameter, per activation, per training run.

Every tensor costs ``numel * bytes_per_element``. Training holds four kinds of tensors at once::

    parameters         P values
    gradients          P values (one per parameter)
    optimizer state    k * P values, k tensors per parameter:
                           sgd 0, momentum 1 (velocity), adagrad 1 (sum of g^2),
                           rmsprop 1 (running mean of g^2), adam / adamw 2 (m and v)
    activations        A values: what the forward saves for the backward

Bytes per parameter and per activation, by precision::

    fp32     params 4 + grads 4 + states 4k                       = 8 + 4k   (adamw: 16)
             activations 4
    mixed    params 2 (bf16) + grads 2 (bf16) + master copy 4 (fp32)
             + states 4k (fp32)                                   = 8 + 4k   (adamw: 16)
             activations 2 (bf16: the matmuls run, and save their inputs, in bf16)

Mixed precision does not shrink the per-parameter bill (the fp32 master weights and states
remain); it halves the activations and doubles the matmul throughput.

Activations of a chain of bias-free linear layers: each layer saves its input for ``dW = dy^T x``.
The first layer's input is the batch, which the caller holds anyway, so it is not counted; the
Cruncher (``L`` layers ``dim -> dim``, then ``dim -> 1``) saves ``L`` inputs of ``batch x dim``::

    activations(Cruncher) = batch * dim * num_layers

Deliberately left out: measuring these bytes (``measured_memory.py`` makes PyTorch report them),
temporary buffers (cuBLAS workspaces, gradients of activations in flight), and activation
checkpointing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from cs336_assignment.validation import check_count

DTYPES: dict[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
"""Short dtype names (as used on the command line and in the lecture) -> torch dtypes."""

OPTIMIZERS = ("sgd", "momentum", "adagrad", "rmsprop", "adam", "adamw")
PRECISIONS = ("fp32", "mixed")


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------


def bytes_per_element(dtype: torch.dtype | str) -> int:
    """Bytes of one element of ``dtype``, given as a torch dtype or a name in ``DTYPES``.

    fp32 4, fp16 and bf16 2 (bf16 keeps fp32's 8 exponent bits and cuts the mantissa to 7),
    fp8 (e4m3 and e5m2) 1, int64 8, int32 4, int16 2, int8 and uint8 1, bool 1.

    >>> bytes_per_element("bf16"), bytes_per_element(torch.float8_e4m3fn)
    (2, 1)

    Raises:
        ValueError: for a name not in ``DTYPES`` ("tf32" is a compute mode, not a storage dtype)
            or anything that is neither a name nor a ``torch.dtype`` (``None``, a ``torch.Size``);
            the message names the value and says "dtype": "unknown dtype 'fp33'; use one of
            [...] or a torch.dtype".
    """
    # BEGIN SOLUTION
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(
                f"unknown dtype {dtype!r}; use one of {sorted(DTYPES)} or a torch.dtype"
            )
        dtype = DTYPES[dtype]
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"expected a torch.dtype or a dtype name, got {dtype!r}")
    return dtype.itemsize
    # END SOLUTION


def tensor_memory_bytes(x: Tensor) -> int:
    """Bytes of the elements of ``x``: ``x.numel() * bytes_per_element(x.dtype)``.

    This is the logical size; a view may keep a larger storage alive
    (``x.untyped_storage().nbytes()``). A 0-d tensor costs one element, an empty tensor 0 bytes,
    and a tensor on the ``meta`` device (shape and dtype, no storage) the same as anywhere else.

    >>> tensor_memory_bytes(torch.zeros(4, 8, dtype=torch.float32))
    128
    """
    # BEGIN SOLUTION
    if not isinstance(x, Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    return x.numel() * bytes_per_element(x.dtype)
    # END SOLUTION


# --------------------------------------------------------------------------------------------
# Analytic training memory
# --------------------------------------------------------------------------------------------


def optimizer_state_tensors(optimizer: str) -> int:
    """How many parameter-sized state tensors ``optimizer`` keeps (see the module docstring).

    >>> [optimizer_state_tensors(o) for o in OPTIMIZERS]
    [0, 1, 1, 1, 2, 2]

    Graded through ``cs336 account``, which prints it in its breakdown ("+ 2 fp32 states x 4").

    Raises ``ValueError`` for a name not in ``OPTIMIZERS``.
    """
    # BEGIN SOLUTION
    states = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 2, "adamw": 2}
    if optimizer not in states:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {list(OPTIMIZERS)}")
    return states[optimizer]
    # END SOLUTION


def bytes_per_param(optimizer: str, precision: str) -> int:
    """Training bytes per parameter: parameters, gradients, (master weights,) optimizer state.

    ``fp32``: ``4 + 4 + 4k``; ``mixed``: ``2 + 2 + 4 + 4k`` (bf16 params and grads, fp32 master
    weights and states), with ``k = optimizer_state_tensors(optimizer)``.

    >>> bytes_per_param("adamw", "fp32"), bytes_per_param("adamw", "mixed"), bytes_per_param("sgd", "fp32")
    (16, 16, 8)

    Raises ``ValueError`` for an unknown optimizer or precision.
    """
    # BEGIN SOLUTION
    states = optimizer_state_tensors(optimizer)
    if precision == "fp32":
        return 4 + 4 + 4 * states
    if precision == "mixed":
        return 2 + 2 + 4 + 4 * states
    raise ValueError(f"unknown precision {precision!r}; use one of {list(PRECISIONS)}")
    # END SOLUTION


def bytes_per_activation(precision: str) -> int:
    """Bytes of one saved activation: 4 in ``fp32``, 2 in ``mixed`` (bf16).

    Graded through ``training_memory_bytes`` and ``cs336 account`` ("(2 bytes each)").

    Raises ``ValueError`` for an unknown precision.
    """
    # BEGIN SOLUTION
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; use one of {list(PRECISIONS)}")
    return 4 if precision == "fp32" else 2
    # END SOLUTION


def training_memory_bytes(
    num_params: int, num_activations: int, optimizer: str, precision: str
) -> int:
    """Bytes to train: ``num_params * bytes_per_param + num_activations * bytes_per_activation``.

    >>> training_memory_bytes(num_params=10, num_activations=100, optimizer="adamw", precision="fp32")
    560
    >>> training_memory_bytes(num_params=10, num_activations=100, optimizer="adamw", precision="mixed")
    360

    Raises:
        ValueError: for a negative count, naming it ("num_params must be a non-negative integer,
            got -1"; likewise "num_activations").
        ValueError: for an unknown optimizer or precision, naming which: "unknown optimizer
            'adamz'; use one of [...]", "unknown precision 'fp16'; use one of ['fp32', 'mixed']".
    """
    # BEGIN SOLUTION
    check_count(num_params=num_params, num_activations=num_activations)
    return num_params * bytes_per_param(
        optimizer, precision
    ) + num_activations * bytes_per_activation(precision)
    # END SOLUTION


def cruncher_params(dim: int, num_layers: int) -> int:
    """Parameters of the Cruncher: ``num_layers`` weights ``dim x dim`` plus the ``1 x dim`` head.

    >>> cruncher_params(dim=4, num_layers=2)
    36

    Optional helper, not graded: napkin math to check your understanding (``sum(p.numel() for p in model.parameters())``).
    """
    # BEGIN SOLUTION
    check_count(dim=dim, num_layers=num_layers)
    return dim * dim * num_layers + dim
    # END SOLUTION


def linear_chain_activations(batch: int, dims: Sequence[int]) -> int:
    """Activations saved by a chain of bias-free linear layers ``dims[0] -> ... -> dims[-1]``.

    Each layer saves its input; the first layer's input (the batch itself) is not counted::

        activations = batch * (dims[1] + ... + dims[-2])

    An elementwise activation between layers adds nothing if it saves its output (ReLU: the next
    layer saves that same tensor) and one more ``batch x dims[i]`` if it saves its input (GELU).

    >>> linear_chain_activations(batch=3, dims=[4, 5, 6, 1])
    33

    Optional helper, not graded: ``cruncher_activations`` (graded) is this chain's count for the Cruncher.

    Raises:
        ValueError: if ``dims`` has fewer than 2 entries or a size is negative.
    """
    # BEGIN SOLUTION
    if len(dims) < 2:
        raise ValueError(f"dims must list at least an input and an output size, got {list(dims)!r}")
    check_count(batch=batch, **{f"dims[{i}]": d for i, d in enumerate(dims)})
    return batch * sum(dims[1:-1])
    # END SOLUTION


def cruncher_activations(batch: int, dim: int, num_layers: int) -> int:
    """Activations the Cruncher saves for the backward: ``batch * dim * num_layers``.

    >>> cruncher_activations(batch=3, dim=4, num_layers=2)
    24
    """
    # BEGIN SOLUTION
    check_count(batch=batch, dim=dim, num_layers=num_layers)
    return linear_chain_activations(batch, [dim] * (num_layers + 1) + [1])
    # END SOLUTION
