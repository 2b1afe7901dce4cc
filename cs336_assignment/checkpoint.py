"""Checkpointing: everything needed to stop a training run and resume it exactly.

A run's state is more than the weights: the optimizer carries per-parameter state (AdamW's
``exp_avg``, ``exp_avg_sq`` and ``step``), the loop carries its iteration count, and anything
random carries an RNG state. A checkpoint holds all of them::

    {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
     "iteration": int, "rng": {"torch": ..., "numpy": ..., "python": ...}}

Two properties make a checkpoint trustworthy:

* **Atomic saves.** Writing over the previous checkpoint in place means a crash (or a SIGKILL from
  the cluster scheduler) mid-write leaves neither the old checkpoint nor the new one. Instead write
  a temporary file in the same directory, flush and ``fsync`` it, then ``os.replace`` it over the
  target (an atomic rename on POSIX), and ``fsync`` the directory so the rename itself survives a
  power cut. At every instant the path holds either the old checkpoint or the new one.
  ``cs336_assignment.files.atomic_write`` does exactly this; use it.
* **Safe loads.** ``torch.load(..., weights_only=True)`` unpickles only tensors and plain
  containers, so opening a checkpoint from somewhere else cannot run code.

Deliberately left out: sharded / distributed checkpoints, asynchronous saving, keeping the last k
checkpoints, cloud storage.

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: torch.save and torch.load, state_dict() of modules and optimizers, the Python and numpy
        RNG states.
    Not allowed: as in every part: torch.optim's optimizers, torch.nn.Linear or F.linear,
        FlopCounterMode or the profiler, tokenizer libraries, torch.amp.GradScaler, reaching the
        tests or the interpreter's insides.
"""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import numpy as np
import torch

from cs336_assignment.files import atomic_write

CHECKPOINT_KEYS = ("model", "optimizer", "iteration")


def capture_rng_state() -> dict[str, Any]:
    """The global RNG states of torch, numpy and Python's ``random``, as weights_only-loadable values.

    ``torch.load(weights_only=True)`` accepts tensors, numbers, strings, None and lists/tuples/dicts
    of those, but not numpy arrays, so numpy's and Python's Mersenne-Twister keys become int64
    tensors (their 32-bit words fit).
    """
    # legacy=True always gives the tuple; numpy's stubs also allow the dict of legacy=False.
    np_state = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state(legacy=True))
    np_kind, np_key, np_pos, np_has_gauss, np_gauss = np_state
    py_version, py_key, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy": [
            np_kind,
            torch.from_numpy(np_key.astype(np.int64)),
            np_pos,
            np_has_gauss,
            np_gauss,
        ],
        "python": [py_version, torch.tensor(py_key, dtype=torch.int64), py_gauss],
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of ``capture_rng_state``: set torch's, numpy's and Python's global RNGs."""
    torch.set_rng_state(state["torch"])
    np_kind, np_key, np_pos, np_has_gauss, np_gauss = state["numpy"]
    np.random.set_state((np_kind, np_key.numpy().astype(np.uint32), np_pos, np_has_gauss, np_gauss))
    py_version, py_key, py_gauss = state["python"]
    random.setstate((py_version, tuple(py_key.tolist()), py_gauss))


def save_checkpoint(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    out: str | os.PathLike | BinaryIO | IO[bytes],
) -> None:
    """Save the model, optimizer, iteration and global RNG states to ``out``.

    The RNG states are those of torch's, NumPy's and Python's ``random`` global generators
    (``capture_rng_state`` gathers them): ``load_checkpoint`` restores them, so that a resumed run
    draws what the uninterrupted run would have drawn. Saving changes nothing in the run it saves:
    the model (its train/eval mode included) and the optimizer are left as they are, and nothing
    is drawn from the global RNGs (``atomic_write`` names its temporary file without them).

    What is written is the dict of the module docstring, with ``torch.save``: ``torch.load(out,
    weights_only=True)`` reads it back, its ``"model"`` and ``"optimizer"`` entries being the two
    ``state_dict()``s as they were when saved (the tests read checkpoints so, besides loading them).

    Args:
        model: its ``state_dict()`` is saved.
        optimizer: its ``state_dict()`` is saved (per-parameter state and hyperparameters).
        iteration: how many training steps are done; ``load_checkpoint`` returns it.
        out: a path, or a binary file object open for writing. A path is written atomically (see the
            module docstring): if saving fails or the process dies midway, a checkpoint already
            at ``out`` is left intact and no temporary file is left behind (except after a kill).
            A file object is written as is: its owner decides what atomicity means.
    """
    # BEGIN SOLUTION
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "iteration": int(iteration),
        "rng": capture_rng_state(),
    }
    if not isinstance(out, (str, os.PathLike)):
        torch.save(state, out)
        return
    with atomic_write(out) as f:
        torch.save(state, f)
    # END SOLUTION


def load_checkpoint(
    src: str | os.PathLike | BinaryIO | IO[bytes],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
) -> int:
    """Restore ``model`` and ``optimizer`` (and the global RNGs, if saved) from ``src``.

    The RNG states ``save_checkpoint`` saved (torch's, NumPy's and Python's ``random``) are
    restored, so a run whose batches draw from those global RNGs (dropout masks, shuffles)
    continues after a resume with exactly the numbers the uninterrupted run draws.

    Args:
        src: a path, or a binary file object positioned at the start of a checkpoint written by
            ``save_checkpoint``. It is loaded with ``weights_only=True``, so it cannot run code.
        model, optimizer: built the same way as the ones that were saved; their state is replaced.

    Returns:
        The ``iteration`` that was saved, as an ``int`` (any non-negative value, 0 and 10**12
        included), so the loop resumes at the step after it.

    Raises:
        FileNotFoundError: naming the path, if ``src`` is a path with no file (a run killed before
            its first save): this type itself, not wrapped into another error, so that a caller
            can catch it and start afresh.
        ValueError: naming the file, if it is truncated, empty, not a checkpoint (text, or a torch
            file holding something else: a model's bare ``state_dict()``, a list of tensors), or
            does not fit ``model`` / ``optimizer``. Loading is strict: a checkpoint whose parameter
            or buffer names differ from the model's does not fit (even with the same shapes), and
            the message then also names the missing or unexpected keys. A ``KeyError`` or a
            ``RuntimeError`` from torch is wrapped into this ValueError (``raise ... from err``).

    A load that fails changes nothing: ``model``, ``optimizer`` and the global RNGs are as they
    were before the call (torch's ``load_state_dict`` copies the entries that fit before it
    raises, so keep what was there and put it back; restore the RNGs only once both loaded). A
    checkpoint without an ``"rng"`` entry (written before RNG states were saved, or by another
    tool) loads like any other and leaves the global RNGs as they are.
    """
    # BEGIN SOLUTION
    path = src if isinstance(src, (str, os.PathLike)) else None
    name = os.fspath(path) if path is not None else getattr(src, "name", repr(src))
    if path is not None and not Path(path).exists():
        raise FileNotFoundError(f"no checkpoint at {name}")
    try:
        state = torch.load(src, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(
            f"cannot read checkpoint {name}: it is truncated, corrupt or not a torch checkpoint "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        ) from err
    missing = [k for k in CHECKPOINT_KEYS if not (isinstance(state, dict) and k in state)]
    if missing:
        raise ValueError(
            f"{name} is not a checkpoint written by save_checkpoint: it lacks {missing}"
        )
    # torch's load_state_dict copies what fits before it raises: keep what was there to put back
    before = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        model.load_state_dict(before[0])
        optimizer.load_state_dict(before[1])
        raise ValueError(
            f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
            f"that saved it did ({err})"
        ) from err
    if "rng" in state:  # last: a load that fails leaves the global RNGs alone
        restore_rng_state(state["rng"])
    return int(state["iteration"])
    # END SOLUTION
