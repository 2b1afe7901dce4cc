"""FLOPs measured: a ``TorchDispatchMode`` that counts the matmuls PyTorch actually runs.

The counts of ``flops.py`` are on paper; this counter makes PyTorch itself report them, forward
and backward, so a formula that forgets a gradient (or counts one autograd skips) shows up.

In the models of this course almost every FLOP is in a matmul, so FLOPs are counted for the matmul
family only: ``aten.mm``, ``addmm``, ``bmm`` and ``baddbmm``, which is what ``nn.Linear``,
``torch.matmul``, ``@`` and ``einsum`` lower to by the time an op reaches the dispatcher.

How: ``FlopCounter`` is a ``TorchDispatchMode``; every aten op run inside it (forward *and*
backward, which autograd also dispatches) passes through ``__torch_dispatch__``, where matmuls are
counted and attributed to the modules running at the time (tracked by
``torch.utils.module_tracker.ModuleTracker``, the same tracker ``FlopCounterMode`` uses).

Deliberately left out: convolutions, attention kernels (``scaled_dot_product_attention``), fp8
``_scaled_mm``, and every non-matmul op (elementwise, reductions, softmax: O(size), not
O(size * dim)); ``torch.utils.flop_counter.FlopCounterMode`` covers those. The formulas are
``flops.py``'s.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker

from cs336_assignment.accounting.flops import matmul_flops

aten = torch.ops.aten

MATMUL_FAMILY = (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)
"""The aten ops whose FLOPs are counted (as overload packets: ``aten.mm``, not ``aten.mm.default``)."""


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
    it neither counts nor tracks modules, and its counts stay as the block left them. Nor does it
    leave anything installed: the module hooks it (or its ``ModuleTracker``) installed on
    ``__enter__`` are all removed on ``__exit__``, also when the block raised, so the global module
    hooks and the hooks of every module are as they were before the block.
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
    Counts come from the matmuls' shapes only, never their values: a network and inputs on the
    ``meta`` device count the same as on the CPU, and a size-one dimension (a batch of one, a
    sequence of one) is a size like any other.

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
