"""Models and initialisation: a bias-free ``Linear`` layer, the lecture's deep linear ``Cruncher``,
and ``set_seed``.

The lecture's running example is a stack of linear layers trained on a synthetic regression task::

    x ─ Linear(D, D) ─ ... ─ Linear(D, D) ─ Linear(D, 1) ─ squeeze ─> y   (shape (B,))

A ``Linear`` layer multiplies by a weight matrix ``W`` stored as ``(d_out, d_in)`` (the layout of
``torch.nn.Linear`` and of CS336 assignment 1), so ``y = x W^T``::

    flops(forward) = 2 * B * d_in * d_out

Initialisation. Drawing ``W_ij ~ N(0, 1)`` makes each output a sum of ``d_in`` unit-variance terms,
so outputs grow like ``sqrt(d_in)`` per layer and a deep stack explodes. Scaling by
``1 / sqrt(d_in)`` (Xavier-style, counting *inputs*) keeps every output at unit variance; cutting
the tails at ±3 standard deviations removes the rare huge weights that destabilise early training::

    W_ij ~ TruncNormal(mean=0, std=sigma, lower=-3 sigma, upper=3 sigma),   sigma = 1 / sqrt(d_in)

Deliberately left out: biases, activations (the Cruncher is linear on purpose, to study
initialisation and optimisers in isolation), and fused or low-precision kernels (see
``precision/scaled_matmul.py``).

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: torch tensors and autograd, nn.Module, nn.Parameter, nn.ModuleList, nn.init, einops.
    Not allowed: torch.nn.Linear and torch.nn.functional.linear may not be used, nor their other
        entry points (torch.ops.aten.linear, torch._C._nn.linear, einops' EinMix, ...): store the
        weight as an nn.Parameter and multiply by it yourself (einsum or @); and, as in every part:
        torch.optim's optimizers, FlopCounterMode or the profiler, tokenizer libraries,
        torch.amp.GradScaler, reaching the tests or the interpreter's insides.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor, nn

from cs336_assignment.validation import check_count, check_positive_int

TRUNCATION = 3.0
"""Initial weights are cut at ±TRUNCATION standard deviations."""


class Linear(nn.Module):
    """A linear map without bias: ``y = x W^T`` with ``W`` of shape ``(d_out, d_in)``.

    The weight is a single ``nn.Parameter`` named ``weight`` (so ``state_dict()`` has exactly one
    key, ``"weight"``), initialised from a normal with std ``1 / sqrt(d_in)`` truncated at ±3 std.
    Note that ``nn.init.trunc_normal_(w, std=s, a=..., b=...)`` takes *absolute* bounds ``a``, ``b``,
    not multiples of ``std``: pass ``a=-3 * s, b=3 * s``. Truncating means draws beyond the bounds
    are redrawn (or, equivalently, sampled by inverse CDF, as ``trunc_normal_`` does), not clamped:
    clamping would put the 0.27% of a normal's mass beyond ±3 std exactly on the bounds.

    >>> layer = Linear(4, 3)
    >>> layer.weight.shape
    torch.Size([3, 4])
    >>> layer(torch.ones(2, 5, 4)).shape
    torch.Size([2, 5, 3])

    ``device`` and ``dtype`` place the weight (a float64 or bfloat16 layer has float64 or bfloat16
    weights; ``device="meta"`` allocates nothing). The init fills that weight itself, in its own
    dtype: ``weight.float()`` or ``weight.to(...)`` of a non-fp32 tensor is a copy, and initialising
    a copy leaves the weight as ``torch.empty`` made it.

    Raises:
        ValueError: if ``d_in`` or ``d_out`` is not a positive integer (``2.5`` and ``"3"``
            included: checked before ``torch.empty`` sees them), naming which: "d_in must be a
            positive integer, got 0".
        ValueError: in ``forward``, if the last dimension of the input is not ``d_in`` (a 0-d
            input has none); the message names ``d_in`` and the input's shape: "Linear expects
            inputs whose last dimension is d_in=4, got shape (2, 5)".
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        # BEGIN SOLUTION
        check_positive_int(d_in=d_in, d_out=d_out)
        self.d_in = d_in
        self.d_out = d_out
        std = 1.0 / math.sqrt(d_in)
        weight = torch.empty(d_out, d_in, device=device, dtype=dtype)
        nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-TRUNCATION * std, b=TRUNCATION * std)
        self.weight = nn.Parameter(weight)
        # END SOLUTION

    def forward(self, x: Float[Tensor, " ... d_in"]) -> Float[Tensor, " ... d_out"]:
        """Apply the layer to the last dimension of ``x``; leading dimensions are batch dimensions.

        ``x`` may have any strides (a transposed or sliced activation is not contiguous), so
        flattening it takes ``reshape``, not ``view``; ``einsum`` and ``@`` need neither. Batch
        dimensions of size 1 or 0 are kept (``(0, d_in)`` gives ``(0, d_out)``), and the output has
        the layer's dtype and device: the product is taken in that dtype, not cast to float32.
        """
        # BEGIN SOLUTION
        d_in = self.weight.shape[1]
        if x.shape[-1:] != (d_in,):
            raise ValueError(
                f"Linear expects inputs whose last dimension is d_in={d_in}, got shape {tuple(x.shape)}"
            )
        return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")
        # END SOLUTION

    def extra_repr(self) -> str:
        d_out, d_in = self.weight.shape
        return f"d_in={d_in}, d_out={d_out}"


class Cruncher(nn.Module):
    """The lecture's deep linear model: ``num_layers`` ``Linear(dim, dim)`` layers, then ``Linear(dim, 1)``.

    Parameters (the ``state_dict`` keys, in this order)::

        layers.0.weight ... layers.{num_layers-1}.weight    each (dim, dim)
        final.weight                                        (1, dim)

    ``forward`` maps ``(batch, dim)`` to ``(batch,)``: the trailing size-1 dimension of the head
    is squeezed away so the output lines up with a ``(batch,)`` target. Only that one: a batch of
    one gives shape ``(1,)`` (not a 0-d tensor), an empty batch ``(0,)``, ``dim=1`` works too.

    >>> model = Cruncher(dim=4, num_layers=2)
    >>> list(model.state_dict())
    ['layers.0.weight', 'layers.1.weight', 'final.weight']
    >>> model(torch.ones(3, 4)).shape
    torch.Size([3])

    ``num_layers=0`` is allowed: the model is then just the final head. ``device`` and ``dtype`` are
    passed on to every layer, the head included: every parameter is created there, in that dtype.

    Raises:
        ValueError: if ``dim`` is not a positive integer or ``num_layers`` not a non-negative
            one, naming which: "dim must be a positive integer, got 0", "num_layers must be a
            non-negative integer, got -1".
    """

    def __init__(
        self,
        dim: int,
        num_layers: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        # BEGIN SOLUTION
        check_count(num_layers=num_layers)
        check_positive_int(dim=dim)
        self.layers = nn.ModuleList(
            [Linear(dim, dim, device=device, dtype=dtype) for _ in range(num_layers)]
        )
        self.final = Linear(dim, 1, device=device, dtype=dtype)
        # END SOLUTION

    def forward(self, x: Float[Tensor, " batch dim"]) -> Float[Tensor, " batch"]:
        """Apply every layer in turn, then the head, and drop the head's size-1 output dimension."""
        # BEGIN SOLUTION
        for layer in self.layers:
            x = layer(x)
        return self.final(x).squeeze(-1)
        # END SOLUTION


def set_seed(seed: int) -> None:
    """Seed every random number generator a training run draws from: ``random``, NumPy and torch.

    After ``set_seed(s)``, ``random.random()``, ``np.random.rand()`` and ``torch.rand()`` (and
    model initialisation, which draws from torch's default generator) give the same values on
    every run. ``torch.manual_seed`` also seeds every CUDA device.

    Raises:
        ValueError: unless ``seed`` is an integer with ``0 <= seed < 2**32`` (the range NumPy
            accepts; ``1.5``, ``"7"`` and ``2**32`` included), raised before any generator is
            seeded; the message names the seed: "seed must be an integer in [0, 2**32), got -1".
    """
    # BEGIN SOLUTION
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # END SOLUTION
