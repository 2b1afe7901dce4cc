"""Student-facing subcommands of ``cs336`` (see ``cs336_assignment/cli.py``), and the argument types
they share: argparse checks each flag's value as it parses it, so a bad one ends in argparse's own
one-line error naming the flag as typed (``cs336 account: error: argument --gpus: must be a positive
integer, got '0'``) before any work starts.

>>> positive_int("3"), count("0"), nonnegative_float("0.5")
(3, 0, 0.5)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _number(kind: Callable[[str], float], ok: Callable[[float], bool], what: str):  # noqa: ANN202
    def parse(text: str):  # noqa: ANN202
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = what  # argparse names the type by it when the value does not parse
    return parse


positive_int = _number(int, lambda v: v > 0, "a positive integer")
count = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0, "a positive number")
nonnegative_float = _number(float, lambda v: v >= 0, "a number >= 0")


def device(text: str) -> str:
    """A torch device this machine can use (``cpu``, ``cuda``, ``cuda:1``, ``mps``), as given."""
    import torch

    try:
        dev = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a torch device; use cpu, cuda or cuda:N"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: CUDA is not available here; use cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(
            f"{text}: this machine has {torch.cuda.device_count()} CUDA devices; use cuda:0 "
            f"to cuda:{torch.cuda.device_count() - 1}"
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError(f"{text}: MPS is not available here; use cpu")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise argparse.ArgumentTypeError(f"{text}: use cpu, cuda or cuda:N")
    return text
