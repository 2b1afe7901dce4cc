"""Scenarios of checkpointing: torch's own models and optimizers, saved and loaded by your code.

A ``Setup`` names a model and a ``torch.optim`` optimizer. ``straight`` trains one without any
checkpoint (the reference). The others train a pair the test built (``build``), save and load it
with your ``adapters.run_save_checkpoint`` / ``run_load_checkpoint``, and return the iteration your
load returned and the ``state_dict()`` of the model and optimizer read back afterwards (a ``State``).
Everything but your save and load runs in the test: in grading the model and the optimizer stay
the test's, and your code gets stand-ins whose every read and call (``model.state_dict()``,
``optimizer.load_state_dict(...)``) runs on the test's objects (``stays_in_the_test``, see
``tests/boundary.py``). Errors your code raises propagate to the test. The
``*_on_random_batches`` pair does the same on batches drawn from the global RNGs of torch, NumPy and
Python (a ``RandomRun``), so a resumed run continues exactly only if the checkpoint carries those
RNGs' states.

Every run here is single-threaded (``OneTorchThread``): some CPU kernels (BatchNorm's, say) sum in
an order that depends on the number of threads, and a resumed run must be bit-identical to the
uninterrupted one.

Where a checkpoint goes (``how``): ``"path"`` (a ``pathlib.Path``), ``"str"`` (the path as a
string), ``"open file"`` (the file at the path, opened ``"wb"`` / ``"rb"`` on your side) or
``"file object"`` (an in-memory ``io.BytesIO`` on your side; the path is then unused).
"""

from __future__ import annotations

import io
import random
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from torch import nn

import adapters
from tests.boundary import plain_data, stays_in_the_test, student_side


class OneTorchThread:
    """While entered, torch runs on one thread in this process; the thread count is put back on exit."""

    def __enter__(self) -> None:
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc_info: object) -> bool:
        torch.set_num_threads(self.threads)
        return False


@plain_data
@dataclass(frozen=True)
class ExplodesWhenPickled:
    """A value that cannot be saved: pickling it (as ``torch.save`` does) raises an OSError.

    It crosses the line as itself, so your save meets it in the model's ``state_dict()`` on your side."""

    why: str = field(default="simulated crash in the middle of writing the checkpoint")

    def __reduce__(self):
        raise OSError(self.why)


class CrashableModel(nn.Module):
    """A model whose state cannot be serialised once ``crash`` is set, so saving it fails midway."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.crash = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)

    def get_extra_state(self):
        return ExplodesWhenPickled() if self.crash else {}

    def set_extra_state(self, state) -> None:
        pass


class MlpWithBuffer(nn.Sequential):
    """The ``mlp`` with one more entry in its state dict, a buffer ``scale`` (no parameter)."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.register_buffer("scale", torch.full((1,), 2.0))


MODELS = {
    "mlp": lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)),
    # The same layers under other names: state dict keys inp.weight, ..., out.bias instead of 0.weight, ...
    "mlp_renamed": lambda: nn.Sequential(
        OrderedDict(inp=nn.Linear(4, 8), act=nn.Tanh(), out=nn.Linear(8, 1))
    ),
    "mlp_with_buffer": MlpWithBuffer,
    "batchnorm": lambda: nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 1)),
    "crashable": CrashableModel,
}


@dataclass(frozen=True)
class Setup:
    """A model (a key of ``MODELS``) and a ``torch.optim`` class (by name) with its options."""

    optimizer: str
    options: dict[str, Any]
    model: str = "mlp"

    def build(self, seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
        """The model initialised from ``seed`` (global RNGs left as they were), and its optimizer."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = MODELS[self.model]()
        return model, getattr(torch.optim, self.optimizer)(model.parameters(), **self.options)


@dataclass
class State:
    """What a run leaves: an iteration and the ``state_dict()`` of its model and of its optimizer."""

    iteration: int
    model: dict[str, Any]
    optimizer: dict[str, Any]


def observe(iteration: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> State:
    return State(iteration, model.state_dict(), optimizer.state_dict())


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of step ``step``: a pure function of the step, independent of any global RNG."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(16, 4, generator=g)
    return x, x.sum(dim=1, keepdim=True) ** 2


def random_batch(draws: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch drawn from the global RNGs of torch, NumPy and Python's ``random`` (as dropout masks,
    shuffles and augmentations are); what each RNG gave is appended to ``draws``."""
    noise, scale, shift = torch.randn(16, 4), float(np.random.rand()), random.random()
    draws.append([float(noise.sum()), scale, shift])
    x = noise * (1 + scale) + shift
    return x, x.sum(dim=1, keepdim=True) ** 2


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    steps: range,
    draws: list[list[float]] | None = None,
) -> None:
    """Train on ``batch(step)`` for each step; or, given ``draws``, on ``random_batch(draws)``."""
    for step in steps:
        x, y = batch(step) if draws is None else random_batch(draws)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


@contextmanager
def global_rngs_seeded(seed: int) -> Iterator[None]:
    """Seed the global RNGs of torch, NumPy and Python's ``random``; put their states back afterwards."""
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])
        random.setstate(states[2])


@dataclass
class RandomRun:
    """A run on ``random_batch``: what the global RNGs gave at each step (``[torch, numpy, python]``),
    from ``first_step`` on, and the ``state_dict()`` of the model at the end."""

    first_step: int
    draws: list[list[float]]
    model: dict[str, Any]


def straight(setup: Setup, total: int) -> State:
    """Train ``total`` steps from seed 0 without any checkpoint (the reference, built and run here)."""
    with OneTorchThread():
        model, optimizer = setup.build(0)
        train(model, optimizer, range(total))
        return observe(total, model, optimizer)


def straight_on_random_batches(setup: Setup, total: int, seed: int = 0) -> RandomRun:
    """Seed the global RNGs with ``seed``, train ``total`` steps on ``random_batch`` (the reference, here)."""
    draws: list[list[float]] = []
    with OneTorchThread(), global_rngs_seeded(seed):
        model, optimizer = setup.build(0)
        train(model, optimizer, range(total), draws)
    return RandomRun(0, draws, model.state_dict())


def build(setup: Setup, seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """``setup.build(seed)``, the test's own pair: the test trains it and reads it back, and in grading
    your save and load get stand-ins of both (torch's optimizers always stay in the test; the model is
    marked with ``stays_in_the_test``)."""
    model, optimizer = setup.build(seed)
    return stays_in_the_test(model), optimizer


# -- what is built on your side of the line (each builds and returns; no observation) --------------------


@student_side
def open_file(path: Path, mode: str) -> IO[bytes]:
    """Builds, observes nothing: ``open(path, mode)`` on your side of the line (the test closes it)."""
    return open(path, mode)  # noqa: SIM115 - the test closes it with `with`


@student_side
def bytes_buffer() -> io.BytesIO:
    """Builds, observes nothing: an empty ``io.BytesIO`` on your side of the line."""
    return io.BytesIO()


class Where:
    """A checkpoint's place (``path``) and how it is handed to your code (``how``, see the module docstring)."""

    def __init__(self, path: Path, how: str) -> None:
        if how not in ("path", "str", "open file", "file object"):
            raise ValueError(f"unknown way to give a checkpoint: {how!r}")
        self.path, self.how, self.buffer = Path(path), how, None

    @contextmanager
    def opened(self, mode: str) -> Iterator[Any]:
        if self.how == "open file":
            with open_file(self.path, mode) as f:
                yield f
        elif self.how == "file object":
            if self.buffer is None:
                self.buffer = bytes_buffer()
            self.buffer.seek(0)
            yield self.buffer
        else:
            yield self.path if self.how == "path" else str(self.path)


# -- runs through your save and load; their loops and observations are the test's -----------------------


def save(setup: Setup, steps: int, iteration: int, path: Path, how: str = "path") -> None:
    """Train ``steps`` steps from seed 0, then save with your code as iteration ``iteration``."""
    with OneTorchThread():
        model, optimizer = build(setup, 0)
        train(model, optimizer, range(steps))
        with Where(path, how).opened("wb") as out:
            adapters.run_save_checkpoint(model, optimizer, iteration, out)


def load_into_fresh(setup: Setup, path: Path, how: str = "path") -> State:
    """Build the setup from another seed (1), load the checkpoint into it with your code; read it back."""
    with OneTorchThread():
        model, optimizer = build(setup, 1)
        with Where(path, how).opened("rb") as src:
            iteration = adapters.run_load_checkpoint(src, model, optimizer)
        return observe(iteration, model, optimizer)


def resumed(setup: Setup, k: int, total: int, path: Path, how: str = "path") -> State:
    """Train ``k`` steps, save, load into a fresh pair (seed 1), train from the loaded iteration to ``total``."""
    with OneTorchThread():
        model, optimizer = build(setup, 0)
        train(model, optimizer, range(k))
        where = Where(path, how)
        with where.opened("wb") as out:
            adapters.run_save_checkpoint(model, optimizer, k, out)
        # a different initialisation: everything must come from the checkpoint
        model, optimizer = build(setup, 1)
        with where.opened("rb") as src:
            start = adapters.run_load_checkpoint(src, model, optimizer)
        train(model, optimizer, range(start, total))
        return observe(start, model, optimizer)


def resumed_on_random_batches(
    setup: Setup, k: int, total: int, path: Path, how: str = "path", seed: int = 0
) -> RandomRun:
    """Seed the global RNGs, train ``k`` steps on ``random_batch``, save; then restart as a new process
    would (the global RNGs seeded with ``seed`` again, a fresh pair from seed 1), load, train to ``total``.

    Returns the draws of the steps after the load, and the final model state.
    """
    where, draws = Where(path, how), []
    with OneTorchThread():
        with global_rngs_seeded(seed):
            model, optimizer = build(setup, 0)
            train(model, optimizer, range(k), [])
            with where.opened("wb") as out:
                adapters.run_save_checkpoint(model, optimizer, k, out)
        with global_rngs_seeded(seed):  # a restarted run seeds its RNGs first, then loads the checkpoint
            model, optimizer = build(setup, 1)
            with where.opened("rb") as src:
                start = adapters.run_load_checkpoint(src, model, optimizer)
            train(model, optimizer, range(start, total), draws)
        return RandomRun(start, draws, model.state_dict())


def saving_every_step(setup: Setup, total: int, path: Path) -> State:
    """Train ``total`` steps from seed 0, saving with your code after each; read the run itself back."""
    with OneTorchThread():
        model, optimizer = build(setup, 0)
        for step in range(total):
            train(model, optimizer, range(step, step + 1))
            adapters.run_save_checkpoint(model, optimizer, step + 1, path)
        return observe(total, model, optimizer)


def saving_every_step_on_random_batches(setup: Setup, total: int, path: Path, seed: int = 0) -> RandomRun:
    """Seed the global RNGs, train ``total`` steps on ``random_batch``, saving with your code after
    each; read the run itself back (its draws and final model), to compare with a run without saves."""
    draws: list[list[float]] = []
    with OneTorchThread(), global_rngs_seeded(seed):
        model, optimizer = build(setup, 0)
        for step in range(total):
            train(model, optimizer, range(step, step + 1), draws)
            adapters.run_save_checkpoint(model, optimizer, step + 1, path)
        return RandomRun(0, draws, model.state_dict())


CRASHABLE = Setup("SGD", {"lr": 0.1}, "crashable")


def crashable_weights(shift: float = 0.0) -> dict[str, torch.Tensor]:
    """The tensors of ``CRASHABLE``'s model from seed 0 with ``shift`` added to its weight (built here)."""
    model, _ = CRASHABLE.build(0)
    with torch.no_grad():
        model.linear.weight.add_(shift)
    return {k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}


def save_crashable(path: Path, iteration: int, *, shift: float = 0.0, crash: bool = False) -> dict:
    """Save a ``CrashableModel`` (seed 0, ``shift`` added to its weight) with an SGD optimizer.

    With ``crash`` its state cannot be pickled, so your save fails midway with an OSError
    ("simulated crash ..."). Returns the weights it saved (``crashable_weights(shift)``).
    """
    model, optimizer = build(CRASHABLE, 0)
    with torch.no_grad():
        model.linear.weight.add_(shift)
    model.crash = crash
    adapters.run_save_checkpoint(model, optimizer, iteration, path)
    return crashable_weights(shift)
