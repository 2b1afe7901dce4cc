"""FLOPs: what a matmul, a linear layer and a training step cost, and a counter that measures it.

A FLOP is one floating-point add or multiply. An ``(m, k) @ (k, n)`` matmul computes ``m * n``
dot products of length ``k``, each ``k`` multiplies and ``k`` adds (``k - 1`` adds would do; like
everyone, we count ``2k``)::

    flops(matmul) = 2 * m * k * n

In the models of this course almost every FLOP is in a matmul, so FLOPs are counted for the matmul
family only: ``aten.mm``, ``addmm``, ``bmm`` and ``baddbmm``, which is what ``nn.Linear``,
``torch.matmul``, ``@`` and ``einsum`` lower to by the time an op reaches the dispatcher.

A linear layer ``y = x W^T`` with ``x`` of shape ``(t, d_in)`` (``t`` tokens) and ``W`` of shape
``(d_out, d_in)`` costs::

    forward            y  = x W^T        2 * t * d_in * d_out
    grad of weight     dW = dy^T x       2 * t * d_in * d_out
    grad of input      dx = dy W         2 * t * d_in * d_out    (only if x needs a gradient)

so a training step costs 3 forwards, ``6 * t * d_in * d_out = 6 * tokens * params``. That rule over-
counts the first layer: its input is data, which needs no gradient, so autograd skips ``dx`` there.
A 2-layer MLP whose input does not require grad trains at ``(2 + 2 + 1) / 2 = 2.5`` forwards, not 3.

Measuring: ``FlopCounter`` is a ``TorchDispatchMode``; every aten op run inside it (forward *and*
backward, which autograd also dispatches) passes through ``__torch_dispatch__``, where matmuls are
counted and attributed to the modules running at the time (tracked by
``torch.utils.module_tracker.ModuleTracker``, the same tracker ``FlopCounterMode`` uses).

Deliberately left out: convolutions, attention kernels (``scaled_dot_product_attention``), fp8
``_scaled_mm``, and every non-matmul op (elementwise, reductions, softmax: O(size), not
O(size * dim)); ``torch.utils.flop_counter.FlopCounterMode`` covers those.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker

from cs336_assignment.validation import check_count

aten = torch.ops.aten

MATMUL_FAMILY = (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)
"""The aten ops whose FLOPs are counted (as overload packets: ``aten.mm``, not ``aten.mm.default``)."""


# --------------------------------------------------------------------------------------------
# Analytic counts
# --------------------------------------------------------------------------------------------


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of an ``(m, k) @ (k, n)`` matmul: ``2 * m * k * n`` (a multiply and an add per term).

    >>> matmul_flops(2, 3, 4)
    48

    A size of 0 is allowed (an empty matmul costs 0 FLOPs).

    Raises:
        ValueError: if a size is negative or not an integer (``2.5``, ``True``); the message names
            the size and says what it must be: "m must be a non-negative integer, got 2.5".
    """
    # BEGIN SOLUTION
    check_count(m=m, k=k, n=n)
    return 2 * m * k * n
    # END SOLUTION


def linear_forward_flops(num_tokens: int, d_in: int, d_out: int) -> int:
    """FLOPs of ``y = x W^T`` for ``num_tokens`` rows of ``x``: ``2 * tokens * d_in * d_out``.

    >>> linear_forward_flops(num_tokens=8, d_in=4, d_out=2)
    128

    Optional helper, not graded: ``linear_chain_flops`` (graded) counts the same layers.
    """
    # BEGIN SOLUTION
    check_count(num_tokens=num_tokens, d_in=d_in, d_out=d_out)
    return matmul_flops(num_tokens, d_in, d_out)
    # END SOLUTION


def linear_backward_flops(num_tokens: int, d_in: int, d_out: int, input_requires_grad: bool = True) -> int:
    """FLOPs of the backward of ``y = x W^T``: ``dW = dy^T x`` always, ``dx = dy W`` only if needed.

    Each is a matmul as large as the forward::

        backward = 2 * tokens * d_in * d_out * (2 if input_requires_grad else 1)

    ``input_requires_grad`` is False for a first layer fed with data: autograd computes no
    gradient nobody asked for.

    >>> linear_backward_flops(8, 4, 2), linear_backward_flops(8, 4, 2, input_requires_grad=False)
    (256, 128)

    Optional helper, not graded: ``linear_chain_flops`` (graded) counts the same layers.
    """
    # BEGIN SOLUTION
    check_count(num_tokens=num_tokens, d_in=d_in, d_out=d_out)
    grad_weight = matmul_flops(d_out, num_tokens, d_in)
    grad_input = matmul_flops(num_tokens, d_out, d_in) if input_requires_grad else 0
    return grad_weight + grad_input
    # END SOLUTION


def linear_train_flops(num_tokens: int, d_in: int, d_out: int, input_requires_grad: bool = True) -> int:
    """FLOPs of forward plus backward of one linear layer (3 forwards, or 2 without ``dx``).

    >>> linear_train_flops(8, 4, 2) == 3 * linear_forward_flops(8, 4, 2)
    True

    Optional helper, not graded: ``linear_chain_flops`` (graded) counts the same layers.
    """
    # BEGIN SOLUTION
    return linear_forward_flops(num_tokens, d_in, d_out) + linear_backward_flops(
        num_tokens, d_in, d_out, input_requires_grad
    )
    # END SOLUTION


def linear_chain_flops(
    num_tokens: int, dims: Sequence[int], backward: bool = True, input_requires_grad: bool = False
) -> int:
    """FLOPs of a chain of bias-free linear layers ``dims[0] -> dims[1] -> ... -> dims[-1]``.

    Layer ``i`` maps ``dims[i]`` to ``dims[i+1]``. Elementwise activations between layers cost no
    matmul FLOPs. With ``backward``, every layer computes the gradient of its weight, and every
    layer but the first also the gradient of its input (the first one too if
    ``input_requires_grad``). The Cruncher of ``dim`` and ``L`` layers is
    ``dims = [dim] * (L + 1) + [1]``.

    >>> linear_chain_flops(num_tokens=1, dims=[2, 2, 2], backward=False)   # 2 layers of 2*1*2*2
    16
    >>> linear_chain_flops(num_tokens=1, dims=[2, 2, 2])                   # 2.5 forwards
    40

    Raises:
        ValueError: if ``dims`` has fewer than 2 entries; the message names ``dims``: "dims must
            list at least an input and an output size, got [8]".
        ValueError: if a size is negative or not an integer (as ``matmul_flops``).
    """
    # BEGIN SOLUTION
    if len(dims) < 2:
        raise ValueError(f"dims must list at least an input and an output size, got {list(dims)!r}")
    total = 0
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        total += linear_forward_flops(num_tokens, d_in, d_out)
        if backward:
            total += linear_backward_flops(num_tokens, d_in, d_out, input_requires_grad or i > 0)
    return total
    # END SOLUTION


def six_nd_flops(num_params: float, num_tokens: float) -> float:
    """The rule of thumb for a training run: ``6 * params * tokens`` FLOPs.

    2 for the forward (a multiply-add per parameter per token) plus 4 for the backward (gradients
    of weights and of inputs). Exact for a chain of linear layers whose input needs a gradient;
    it over-counts a first layer fed with data by ``2 * tokens * d_in * d_out`` (its ``dx``).

    >>> six_nd_flops(70e9, 15e12)
    6.3e+24

    Graded through ``cs336 account``, which prints it ("= 6.3e+24 FLOPs").
    """
    # BEGIN SOLUTION
    if num_params < 0 or num_tokens < 0:
        raise ValueError(f"num_params and num_tokens must be non-negative, got {num_params!r} and {num_tokens!r}")
    return 6 * num_params * num_tokens
    # END SOLUTION


# --------------------------------------------------------------------------------------------
# Measured counts
# --------------------------------------------------------------------------------------------


def matmul_family_flops(func: torch._ops.OpOverload, args: Sequence[Any]) -> int:
    """FLOPs of one aten op call with positional ``args``; 0 for ops outside ``MATMUL_FAMILY``.

    Argument layouts (``self`` is the tensor added in ``addmm``/``baddbmm``, not multiplied)::

        mm(a, b)                  a (m, k)     b (k, n)        2 m k n
        addmm(self, a, b)         a (m, k)     b (k, n)        2 m k n   (the add is not counted)
        bmm(a, b)                 a (B, m, k)  b (B, k, n)     2 B m k n
        baddbmm(self, a, b)       a (B, m, k)  b (B, k, n)     2 B m k n

    Optional helper, not graded: ``FlopCounter`` and ``count_flops`` (graded against ``FlopCounterMode``) need these
    counts, however you compute them.
    """
    # BEGIN SOLUTION
    packet = func._overloadpacket
    if packet in (aten.mm, aten.bmm):
        a, b = args[0], args[1]
    elif packet in (aten.addmm, aten.baddbmm):
        a, b = args[1], args[2]
    else:
        return 0
    *batch, m, k = a.shape
    n = b.shape[-1]
    return (batch[0] if batch else 1) * matmul_flops(m, k, n)
    # END SOLUTION


class FlopCounter(TorchDispatchMode):
    """Count the matmul FLOPs of everything run inside it: in total, per op and per module.

    Modules are named the way ``FlopCounterMode`` names them: the root by its class name, children
    by their path (``"Cruncher.layers.0"``), and ``"Global"`` for everything. In the backward, a
    module's FLOPs are attributed to it too (the tracker hooks the gradients of its inputs and outputs).

    >>> layer = torch.nn.Linear(4, 3, bias=False)
    >>> with FlopCounter() as counter:
    ...     layer(torch.ones(2, 4)).sum().backward()
    >>> counter.total          # forward 2*2*4*3 = 48, grad of weight 48, no grad of input
    96
    >>> counter.by_module()
    {'Global': 96, 'Linear': 96}

    Each ``with`` block starts from zero: entering the counter again forgets the previous counts.
    A counter counts only what runs inside its ``with`` block, on every entry: after ``__exit__``
    it neither counts nor tracks modules, and its counts stay as the block left them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.flops: defaultdict[str, Counter[str]] = defaultdict(Counter)
        """module name -> op name (``"aten.mm"``) -> FLOPs."""
        self._tracker = ModuleTracker()

    def __enter__(self) -> FlopCounter:
        # BEGIN SOLUTION
        self.flops.clear()
        self._tracker.__enter__()
        super().__enter__()
        return self
        # END SOLUTION

    def __exit__(self, *exc: object) -> None:
        # BEGIN SOLUTION
        super().__exit__(*exc)
        self._tracker.__exit__(*exc)
        # END SOLUTION

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        """Run ``func`` and add its FLOPs to every module currently running (``tracker.parents``)."""
        # BEGIN SOLUTION
        out = func(*args, **(kwargs or {}))
        flops = matmul_family_flops(func, args)
        if flops:
            for module in self._tracker.parents:
                self.flops[module][str(func._overloadpacket)] += flops
        return out
        # END SOLUTION

    @property
    def total(self) -> int:
        """Every counted FLOP (the ``"Global"`` row)."""
        return sum(self.flops["Global"].values())

    def by_module(self) -> dict[str, int]:
        """Module name -> FLOPs run while that module (or its backward) was running."""
        return {name: sum(ops.values()) for name, ops in sorted(self.flops.items())}


def count_flops(fn: Callable[..., Tensor], *args: Any, backward: bool = True) -> int:
    """Matmul FLOPs of ``fn(*args)``, plus its backward (of ``fn(*args).sum()``) if ``backward``.

    Both passes run inside one ``FlopCounter``: the backward's matmuls are dispatched like the
    forward's, so forgetting to run it inside the counter silently drops two thirds of the cost.

    >>> layer = torch.nn.Linear(4, 3, bias=False)
    >>> count_flops(layer, torch.ones(2, 4)), count_flops(layer, torch.ones(2, 4), backward=False)
    (96, 48)

    Raises:
        ValueError: if ``backward`` is True but the output does not require grad (nothing to
            differentiate); the message points to the fix: "backward=True needs fn(*args) to
            return a tensor that requires grad; pass backward=False to count the forward only".
    """
    # BEGIN SOLUTION
    with FlopCounter() as counter:
        out = fn(*args)
        if backward:
            if not (isinstance(out, Tensor) and out.requires_grad):
                raise ValueError(
                    "backward=True needs fn(*args) to return a tensor that requires grad; "
                    "pass backward=False to count the forward only"
                )
            out.sum().backward()
    return counter.total
    # END SOLUTION
