"""FLOPs on paper: what a matmul, a linear layer and a training step cost.

A FLOP is one floating-point add or multiply. An ``(m, k) @ (k, n)`` matmul computes ``m * n``
dot products of length ``k``, each ``k`` multiplies and ``k`` adds (``k - 1`` adds would do; like
everyone, we count ``2k``)::

    flops(matmul) = 2 * m * k * n

A linear layer ``y = x W^T`` with ``x`` of shape ``(t, d_in)`` (``t`` tokens) and ``W`` of shape
``(d_out, d_in)`` costs::

    forward            y  = x W^T        2 * t * d_in * d_out
    grad of weight     dW = dy^T x       2 * t * d_in * d_out
    grad of input      dx = dy W         2 * t * d_in * d_out    (only if x needs a gradient)

so a training step costs 3 forwards, ``6 * t * d_in * d_out = 6 * tokens * params``. That rule over-
counts the first layer: its input is data, which needs no gradient, so autograd skips ``dx`` there.
A 2-layer MLP whose input does not require grad trains at ``(2 + 2 + 1) / 2 = 2.5`` forwards, not 3.

Deliberately left out: counting by running the code (``flop_counter.py`` makes PyTorch report
these numbers), the adds of biases (``tokens * d_out``, not a matmul), and layers other than
linear ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from cs336_assignment.validation import check_count


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


def linear_backward_flops(
    num_tokens: int, d_in: int, d_out: int, input_requires_grad: bool = True
) -> int:
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


def linear_train_flops(
    num_tokens: int, d_in: int, d_out: int, input_requires_grad: bool = True
) -> int:
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
        raise ValueError(
            f"num_params and num_tokens must be non-negative, got {num_params!r} and {num_tokens!r}"
        )
    return 6 * num_params * num_tokens
    # END SOLUTION
