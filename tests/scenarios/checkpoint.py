"""Scenarios of checkpointing: torch's own models and optimizers, saved and loaded by your code.

A ``Setup`` names a model and a ``torch.optim`` optimizer. ``straight`` trains one without any
checkpoint: the reference, which the tests run themselves. The drivers (``@driver``, see
``tests/boundary.py``) build a pair from a seed, train it, save and load it with your
``adapters.run_save_checkpoint`` / ``run_load_checkpoint``, and return plain data: the iteration
your load returned, the ``state_dict()`` of the model and optimizer read back afterwards (a
``State``), the bytes of the checkpoint written, or the numbers the global RNGs gave. In grading a
driver runs beside your code as one call; errors your code raises reach the test with their class
and message. The ``*_on_random_batches`` pair does the same on batches drawn from the global RNGs of
torch, NumPy and Python (a ``RandomRun``), so a resumed run continues exactly only if the checkpoint
carries those RNGs' states. ``load_that_does_not_fit_the_optimizer`` reports what a load that fails
left of the model, the optimizer and the global RNGs; ``load_without_rng`` loads a checkpoint whose
``"rng"`` entry was removed.

Every run here is single-threaded (``OneTorchThread``): some CPU kernels (BatchNorm's, say) sum in
an order that depends on the number of threads, and a resumed run must be bit-identical to the
uninterrupted one.

Where a checkpoint goes (``how``): ``"path"`` (a ``pathlib.Path``), ``"str"`` (the path as a
string), ``"open file"`` (the file at the path, opened ``"wb"`` / ``"rb"``) or ``"file object"`` (an
in-memory ``io.BytesIO``; the path is then unused, so the save and the load happen in one driver).
"""

from __future__ import annotations

import copy
import io
import random
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import adapters
from tests.boundary import driver, plain_data
from tests.scenarios import OneTorchThread


@dataclass(frozen=True)
class ExplodesWhenPickled:
    """A value that cannot be saved: pickling it (as ``torch.save`` does) raises an OSError."""

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


@plain_data
@dataclass(frozen=True)
class Setup:
    """A model (a key of ``MODELS``) and a ``torch.optim`` class (by name) with its options."""

    optimizer: str
    options: dict[str, Any]
    model: str = "mlp"

    def build(self, seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
        """The model initialised from ``seed`` (global RNGs left as they were), and its optimizer."""
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)  # the CPU's only, as fork_rng keeps
            model = MODELS[self.model]()
        return model, getattr(torch.optim, self.optimizer)(model.parameters(), **self.options)


@plain_data
@dataclass
class State:
    """What a run leaves: an iteration and the ``state_dict()`` of its model and of its optimizer;
    for a run that saved, the bytes of the checkpoint it wrote (``written``, else empty)."""

    iteration: int
    model: dict[str, Any]
    optimizer: dict[str, Any]
    written: bytes = b""


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


@plain_data
@dataclass
class RandomRun:
    """A run on ``random_batch``: what the global RNGs gave at each step (``[torch, numpy, python]``),
    from ``first_step`` on, and the ``state_dict()`` of the model at the end."""

    first_step: int
    draws: list[list[float]]
    model: dict[str, Any]


def straight(setup: Setup, total: int) -> State:
    """Train ``total`` steps from seed 0 without any checkpoint: the reference, which a test runs itself."""
    with OneTorchThread():
        model, optimizer = setup.build(0)
        train(model, optimizer, range(total))
        return observe(total, model, optimizer)


def straight_on_random_batches(setup: Setup, total: int, seed: int = 0) -> RandomRun:
    """Seed the global RNGs with ``seed``, train ``total`` steps on ``random_batch``: the reference, which a
    test runs itself (the global RNGs are put back afterwards)."""
    draws: list[list[float]] = []
    with OneTorchThread(), global_rngs_seeded(seed):
        model, optimizer = setup.build(0)
        train(model, optimizer, range(total), draws)
    return RandomRun(0, draws, model.state_dict())


class Where:
    """A checkpoint's place (``path``) and how it is handed to your code (``how``, see the module docstring)."""

    def __init__(self, path: Path, how: str) -> None:
        if how not in ("path", "str", "open file", "file object"):
            raise ValueError(f"unknown way to give a checkpoint: {how!r}")
        self.path, self.how, self.buffer = Path(path), how, io.BytesIO()

    @contextmanager
    def opened(self, mode: str) -> Iterator[Any]:
        if self.how == "open file":
            with open(self.path, mode) as f:
                yield f
        elif self.how == "file object":
            self.buffer.seek(0)
            yield self.buffer
        else:
            yield self.path if self.how == "path" else str(self.path)

    def written(self) -> bytes:
        """The checkpoint's bytes as they are now (a file object's content, or the file's)."""
        return self.buffer.getvalue() if self.how == "file object" else self.path.read_bytes()


def on_disk(how: str) -> str:
    """``how``, refused when it is ``"file object"``: an in-memory file does not outlive its driver."""
    if how == "file object":
        raise ValueError("a file object lives in one driver: save and load it in one (resumed)")
    return how


# -- drivers: built, trained, saved and loaded beside your code; they return what the test checks ------


@driver
def save(setup: Setup, steps: int, iteration: int, path: Path, how: str = "path") -> None:
    """Build the setup from seed 0, train ``steps`` steps, save with your code as iteration ``iteration``."""
    with OneTorchThread():
        model, optimizer = setup.build(0)
        train(model, optimizer, range(steps))
        with Where(path, on_disk(how)).opened("wb") as out:
            adapters.run_save_checkpoint(model, optimizer, iteration, out)


@driver
def load_into_fresh(setup: Setup, path: Path, how: str = "path") -> State:
    """Build the setup from another seed (1), load the checkpoint into it with your code; return what
    your load returned and the pair's state dicts afterwards."""
    with OneTorchThread():
        model, optimizer = setup.build(1)
        with Where(path, on_disk(how)).opened("rb") as src:
            iteration = adapters.run_load_checkpoint(src, model, optimizer)
        return observe(iteration, model, optimizer)


@driver
def resumed(setup: Setup, k: int, total: int, path: Path, how: str = "path") -> State:
    """Train ``k`` steps, save, load into a fresh pair (seed 1), train from the loaded iteration to
    ``total``; return the loaded iteration, the final state dicts and the checkpoint's bytes."""
    with OneTorchThread():
        model, optimizer = setup.build(0)
        train(model, optimizer, range(k))
        where = Where(path, how)
        with where.opened("wb") as out:
            adapters.run_save_checkpoint(model, optimizer, k, out)
        written = where.written()
        # a different initialisation: everything must come from the checkpoint
        model, optimizer = setup.build(1)
        with where.opened("rb") as src:
            start = adapters.run_load_checkpoint(src, model, optimizer)
        train(model, optimizer, range(start, total))
        return State(start, model.state_dict(), optimizer.state_dict(), written)


@driver
def resumed_on_random_batches(
    setup: Setup, k: int, total: int, path: Path, how: str = "path", seed: int = 0
) -> RandomRun:
    """Seed the global RNGs, train ``k`` steps on ``random_batch``, save; then restart as a new process
    would (the global RNGs seeded with ``seed`` again, a fresh pair from seed 1), load, train to ``total``.

    Returns the draws of the steps after the load, and the final model state.
    """
    where = Where(path, how)
    draws: list[list[float]] = []
    with OneTorchThread():
        with global_rngs_seeded(seed):
            model, optimizer = setup.build(0)
            train(model, optimizer, range(k), [])
            with where.opened("wb") as out:
                adapters.run_save_checkpoint(model, optimizer, k, out)
        # a restarted run seeds its RNGs first, then loads the checkpoint
        with global_rngs_seeded(seed):
            model, optimizer = setup.build(1)
            with where.opened("rb") as src:
                start = adapters.run_load_checkpoint(src, model, optimizer)
            train(model, optimizer, range(start, total), draws)
        return RandomRun(start, draws, model.state_dict())


@driver
def saving_every_step(setup: Setup, total: int, path: Path) -> State:
    """Train ``total`` steps from seed 0, saving with your code after each; return the run's own state."""
    with OneTorchThread():
        model, optimizer = setup.build(0)
        for step in range(total):
            train(model, optimizer, range(step, step + 1))
            adapters.run_save_checkpoint(model, optimizer, step + 1, path)
        return observe(total, model, optimizer)


@driver
def saving_every_step_on_random_batches(
    setup: Setup, total: int, path: Path, seed: int = 0
) -> RandomRun:
    """Seed the global RNGs, train ``total`` steps on ``random_batch``, saving with your code after
    each; return the run itself (its draws and final model), to compare with a run without saves."""
    draws: list[list[float]] = []
    with OneTorchThread(), global_rngs_seeded(seed):
        model, optimizer = setup.build(0)
        for step in range(total):
            train(model, optimizer, range(step, step + 1), draws)
            adapters.run_save_checkpoint(model, optimizer, step + 1, path)
        return RandomRun(0, draws, model.state_dict())


CRASHABLE = Setup("SGD", {"lr": 0.1}, "crashable")


def build_crashable(seed: int) -> tuple[CrashableModel, torch.optim.Optimizer]:
    """``CRASHABLE.build(seed)``, its model typed as what it is."""
    model, optimizer = CRASHABLE.build(seed)
    assert isinstance(model, CrashableModel)
    return model, optimizer


def crashable_weights(shift: float = 0.0) -> dict[str, torch.Tensor]:
    """The tensors of ``CRASHABLE``'s model from seed 0 with ``shift`` added to its weight."""
    model, _ = build_crashable(0)
    with torch.no_grad():
        model.linear.weight.add_(shift)
    return {k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}


@driver
def save_crashable(path: Path, iteration: int, *, shift: float = 0.0, crash: bool = False) -> None:
    """Save with your code a ``CrashableModel`` (seed 0, ``shift`` added to its weight: the tensors of
    ``crashable_weights(shift)``) with an SGD optimizer.

    With ``crash`` its state cannot be pickled, so your save fails midway with an OSError
    ("simulated crash ...").
    """
    model, optimizer = build_crashable(0)
    with torch.no_grad():
        model.linear.weight.add_(shift)
    model.crash = crash
    adapters.run_save_checkpoint(model, optimizer, iteration, path)


@plain_data
@dataclass
class FailedLoad:
    """What a load that raised left behind: the error (``"Class: message"``, empty if it did not raise),
    the model's and optimizer's state before and after the call, and one draw of each global RNG
    (``rng_draws``) after it."""

    error: str
    before: State
    after: State
    draws_after: list[float]


def rng_draws() -> list[float]:
    """One draw of each global RNG (torch's, NumPy's, Python's), which tells their states apart."""
    return [float(torch.rand(())), float(np.random.rand()), random.random()]


@driver
def load_that_does_not_fit_the_optimizer(setup: Setup, path: Path, rng_seed: int) -> FailedLoad:
    """Build the setup's model (seed 1) with its optimizer over two parameter groups (the checkpoint at
    ``path`` has one), trained a step so it has state; seed the global RNGs with ``rng_seed``; load the
    checkpoint with your code (which should fail); report the error, the states, and the RNGs' next draws."""
    with OneTorchThread():
        model, _ = setup.build(1)
        params = list(model.parameters())
        cls = getattr(torch.optim, setup.optimizer)
        optimizer = cls([{"params": params[:1]}, {"params": params[1:]}], **setup.options)
        train(model, optimizer, range(1))
        before = copy.deepcopy(observe(0, model, optimizer))
        with global_rngs_seeded(rng_seed):
            error = ""
            try:
                adapters.run_load_checkpoint(path, model, optimizer)
            except NotImplementedError:
                raise
            except Exception as err:  # noqa: BLE001 - the test checks the type and message
                error = f"{type(err).__name__}: {err}"
            draws = rng_draws()
        return FailedLoad(error, before, copy.deepcopy(observe(0, model, optimizer)), draws)


@driver
def load_without_rng(setup: Setup, path: Path, rng_seed: int) -> tuple[State, list[float]]:
    """Rewrite the checkpoint at ``path`` without its ``"rng"`` entry (torch.load, del, torch.save), seed
    the global RNGs with ``rng_seed``, load it into the setup built from seed 1 with your code; return
    what your load returned with the state dicts, and the RNGs' next draws."""
    state = torch.load(path, weights_only=True)
    del state["rng"]
    torch.save(state, path)
    with OneTorchThread():
        model, optimizer = setup.build(1)
        with global_rngs_seeded(rng_seed):
            iteration = adapters.run_load_checkpoint(path, model, optimizer)
            draws = rng_draws()
        return observe(iteration, model, optimizer), draws
