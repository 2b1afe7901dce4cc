"""Argument checks shared by every part: each raises ``ValueError`` naming the argument and its value.

Every part checks its sizes, counts and hyperparameters the same way, so the wording a test
matches is written once, here. Keyword arguments name the values, so the message can name them:

>>> check_count(m=2, k=0)
>>> check_count(m=2.5)
Traceback (most recent call last):
    ...
ValueError: m must be a non-negative integer, got 2.5

``bool`` is not an integer here (``True`` is a mistake, not a size of 1), and NaN fails every
range check (``not nan >= 0``). Deliberately left out: type coercion (``"3"`` is an error, not 3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check(values: dict[str, Any], ok: Callable[[Any], bool], what: str) -> None:
    for name, value in values.items():
        if not ok(value):
            raise ValueError(f"{name} must be {what}, got {value!r}")


def check_count(**counts: Any) -> None:
    """Raise ``ValueError`` for the first value that is not an integer ``>= 0`` (a size or a count).

    >>> check_count(num_layers=-1)
    Traceback (most recent call last):
        ...
    ValueError: num_layers must be a non-negative integer, got -1
    """
    _check(counts, lambda value: _is_int(value) and value >= 0, "a non-negative integer")


def check_positive_int(**values: Any) -> None:
    """Raise ``ValueError`` for the first value that is not an integer ``>= 1`` (a width, a number of steps).

    >>> check_positive_int(d_in=0)
    Traceback (most recent call last):
        ...
    ValueError: d_in must be a positive integer, got 0
    """
    _check(values, lambda value: _is_int(value) and value >= 1, "a positive integer")


def check_positive(**values: Any) -> None:
    """Raise ``ValueError`` for the first value that is not a finite number ``> 0`` (seconds, GPUs, FLOP/s).

    >>> check_positive(seconds=0.0)
    Traceback (most recent call last):
        ...
    ValueError: seconds must be a positive number, got 0.0
    """
    _check(values, lambda value: _is_number(value) and 0 < value < math.inf, "a positive number")


def check_nonnegative_number(**values: Any) -> None:
    """Raise ``ValueError`` for the first value that is not a finite number ``>= 0`` (FLOPs, bytes on paper).

    >>> check_nonnegative_number(flops=-1.0)
    Traceback (most recent call last):
        ...
    ValueError: flops must be a non-negative number, got -1.0
    """
    _check(
        values, lambda value: _is_number(value) and 0 <= value < math.inf, "a non-negative number"
    )


def check_nonnegative(**values: float) -> None:
    """Raise ``ValueError`` for the first hyperparameter that is negative or NaN, as torch.optim words it.

    >>> check_nonnegative(lr=-0.1)
    Traceback (most recent call last):
        ...
    ValueError: lr must be >= 0, got lr=-0.1
    """
    for name, value in values.items():
        if not value >= 0.0:
            raise ValueError(f"{name} must be >= 0, got {name}={value!r}")


def check_unit_interval(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``0 <= value < 1`` (an exponential-average coefficient such as a beta).

    >>> check_unit_interval("betas[1]", 1.5)
    Traceback (most recent call last):
        ...
    ValueError: betas[1] must be in [0, 1), got betas[1]=1.5
    """
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {name}={value!r}")
