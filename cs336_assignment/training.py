"""The training loop, with seeding, periodic atomic checkpoints and exact resumption.

The loop is the lecture's, five lines per step::

    x, y = get_batch(step)          # data
    loss = loss_fn(model(x), y)     # forward
    loss.backward()                 # backward: fills p.grad for every parameter p
    optimizer.step()                # update:   p <- p - lr * (something of p.grad)
    optimizer.zero_grad(set_to_none=True)

and the task is the lecture's synthetic regression: inputs ``x ~ N(0, I_D)``, targets
``y = x @ true_w`` with ``true_w = [0, 1, ..., D - 1]``, fitted by a ``Cruncher`` (a deep linear
network) under mean squared error. The loss starts near ``E[y^2] = sum_i i^2 = (D-1) D (2D-1) / 6``
and falls towards 0.

Resuming is exact: a run killed at any moment (even mid-save: saves are atomic) and restarted from
its last checkpoint ends with the same bits as a run never interrupted. That needs every piece of
state that influences later steps to be either in the checkpoint (weights, optimizer state, the
iteration) or a pure function of things that are (the batch of step t depends only on
``(seed, t)``, so no data-loader state needs saving).

Deliberately left out: learning-rate schedules, gradient clipping and accumulation, evaluation,
logging to files, mixed precision (see ``precision/mixed.py``), multiple devices.

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: your own code from the earlier parts, torch tensors and autograd, torch.nn.functional's
        losses.
    Not allowed: as in every part: torch.optim's optimizers, torch.nn.Linear or F.linear,
        FlopCounterMode or the profiler, tokenizer libraries, torch.amp.GradScaler, reaching the
        tests or the interpreter's insides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from cs336_assignment.checkpoint import load_checkpoint, save_checkpoint
from cs336_assignment.models import Cruncher, set_seed
from cs336_assignment.optim import AdamW
from cs336_assignment.validation import (
    check_count,
    check_nonnegative,
    check_positive,
    check_positive_int,
)

Batch = tuple[Tensor, Tensor]


@dataclass(frozen=True)
class TrainConfig:
    """One run of the Cruncher on the synthetic regression task.

    ``steps`` is the total number of optimizer steps of the run (a resumed run stops at the same
    ``steps``); ``checkpoint`` (optional) is rewritten atomically every ``checkpoint_every`` steps
    and after the last one; ``resume`` continues from it when it exists. Every field is checked
    here, so a bad value fails before any work starts.

    ``lr`` and ``weight_decay`` (``cs336 train --lr --weight-decay``) are AdamW's: a run of ``steps``
    steps ends with the weights ``torch.optim.AdamW(lr=lr, weight_decay=weight_decay)`` reaches from
    ``set_seed(seed); Cruncher(dim, num_layers)``, step ``t`` on ``regression_batch(t, batch_size, dim,
    seed)`` under mean squared error (up to float rounding).
    """

    steps: int = 300
    dim: int = 16
    num_layers: int = 2
    batch_size: int = 32
    lr: float = 1e-2
    weight_decay: float = 0.0
    seed: int = 0
    checkpoint: Path | None = None
    checkpoint_every: int = 50
    resume: bool = False
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_positive_int(
            steps=self.steps,
            dim=self.dim,
            batch_size=self.batch_size,
            checkpoint_every=self.checkpoint_every,
        )
        check_count(num_layers=self.num_layers, seed=self.seed)
        check_positive(lr=self.lr)
        check_nonnegative(weight_decay=self.weight_decay)
        if self.resume and self.checkpoint is None:
            raise ValueError(
                "resume needs a checkpoint path to resume from; pass --checkpoint PATH"
            )
        if self.checkpoint is not None:
            checkpoint = Path(self.checkpoint)
            object.__setattr__(self, "checkpoint", checkpoint)
            if checkpoint.is_dir():
                example = checkpoint / "ckpt.pt"
                raise ValueError(
                    f"checkpoint {checkpoint} is a directory; give a file path such as {example}"
                )
            if not checkpoint.parent.is_dir():
                raise ValueError(
                    f"checkpoint directory {checkpoint.parent} does not exist; create it first"
                )


def step_generator(seed: int, step: int) -> torch.Generator:
    """A CPU generator for step ``step`` alone, seeded from ``(seed, step)``.

    ``np.random.SeedSequence`` hashes the pair into a well-mixed 64-bit seed, so neighbouring steps
    (and seeds) get unrelated streams. Because each batch is a pure function of ``(seed, step)``,
    resuming at step t needs no data-RNG state in the checkpoint.
    """
    (mixed,) = np.random.SeedSequence([seed, step]).generate_state(1, dtype=np.uint64)
    return torch.Generator().manual_seed(int(mixed))


def regression_batch(
    step: int, batch_size: int, dim: int, seed: int, device: str | torch.device = "cpu"
) -> tuple[Float[Tensor, " batch dim"], Float[Tensor, " batch"]]:
    """The lecture's synthetic data: ``x ~ N(0, I_dim)``, ``y = x @ true_w``, ``true_w = arange(dim)``.

    The batch of step ``step`` is a function of ``(seed, step)`` alone: draw ``x`` from
    ``step_generator(seed, step)``, exactly as ``torch.randn(batch_size, dim, generator=...)`` draws it
    (the tests recompute the run from these batches). Runs with different seeds then train on
    unrelated batches; seeding with ``seed + step`` instead would give ``--seed 4`` the batches of
    ``--seed 3`` one step later (and seeding with ``step`` alone, the same batches).

    >>> x, y = regression_batch(step=0, batch_size=3, dim=4, seed=0)
    >>> x.shape, y.shape, bool(torch.allclose(y, x @ torch.tensor([0., 1., 2., 3.])))
    (torch.Size([3, 4]), torch.Size([3]), True)
    """
    # BEGIN SOLUTION
    true_w = torch.arange(dim, dtype=torch.float32)
    x = torch.randn(batch_size, dim, generator=step_generator(seed, step))
    return x.to(device), (x @ true_w).to(device)
    # END SOLUTION


def train_loop(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    get_batch: Callable[[int], Batch],
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    num_steps: int,
    *,
    start_step: int = 0,
    checkpoint: Path | None = None,
    checkpoint_every: int = 1,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Run optimizer steps ``start_step + 1 .. num_steps``; return their losses.

    Step ``t`` (counting from 0) trains on ``get_batch(t)``. If ``checkpoint`` is given, it is saved
    atomically with iteration ``t + 1`` whenever ``(t + 1) % checkpoint_every == 0`` and after the
    last step, so a run killed at any point loses at most ``checkpoint_every`` steps and resumes
    with ``start_step = load_checkpoint(...)``. ``on_step(t + 1, loss)`` is called after each step
    (progress bars, logging). Both count from step 0, in a resumed run too: resumed at
    ``start_step=30`` with ``checkpoint_every=7``, the run saves at 35, 42, ... (where the
    uninterrupted run saves, not at 37, 44, ...), and ``on_step`` gets 31, 32, ... (not 1, 2, ...).

    Returns:
        The loss of each step run, in order: a list of ``num_steps - start_step`` Python floats
        (``loss.item()``; empty when ``start_step >= num_steps``), never tensors: a loss tensor
        keeps its step's autograd graph alive, a list of them every step's. ``on_step`` gets the
        same float.
    """
    # BEGIN SOLUTION
    losses = []
    model.train()
    for step in range(start_step, num_steps):
        x, y = get_batch(step)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        done = step + 1
        losses.append(loss.item())
        if checkpoint is not None and (done % checkpoint_every == 0 or done == num_steps):
            save_checkpoint(model, optimizer, done, checkpoint)
        if on_step is not None:
            on_step(done, losses[-1])
    return losses
    # END SOLUTION


def start_or_resume(
    config: TrainConfig, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> int:
    """The step to start at: 0 for a fresh run, the checkpoint's iteration for ``config.resume``.

    Resuming when the checkpoint does not exist yet (the run was killed before its first save)
    starts afresh. A fresh run refuses to overwrite an existing checkpoint: that is another run's
    work, to be resumed or moved away deliberately.

    Raises:
        ValueError: for a fresh run (``config.resume`` False) whose checkpoint exists; ``cs336
            train`` prints the message, which must suggest "--resume" (its test looks for it):
            "checkpoint run.pt already exists; pass --resume to continue that run, or ...".
    """
    # BEGIN SOLUTION
    path = config.checkpoint
    if path is None or not path.exists():
        return 0
    if not config.resume:
        raise ValueError(
            f"checkpoint {path} already exists; pass --resume to continue that run, "
            "or delete it / choose another --checkpoint to start a new one"
        )
    return load_checkpoint(path, model, optimizer)
    # END SOLUTION


@dataclass
class TrainResult:
    """What a run leaves behind: the trained model and optimizer, where it started, its losses."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    start_step: int
    losses: list[float]


def train_regression(
    config: TrainConfig,
    on_start: Callable[[int], None] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train a seeded ``Cruncher`` with ``AdamW`` on the regression task, resuming if asked.

    ``on_start(start_step)`` is called once the starting step is known (0, or where the checkpoint
    left off); ``on_step`` as in ``train_loop``.
    """
    set_seed(config.seed)
    model = Cruncher(config.dim, config.num_layers).to(config.device)
    optimizer = AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    start = start_or_resume(config, model, optimizer)
    if on_start is not None:
        on_start(start)

    def get_batch(step: int) -> Batch:
        return regression_batch(step, config.batch_size, config.dim, config.seed, config.device)

    losses = train_loop(
        model,
        optimizer,
        get_batch,
        F.mse_loss,
        config.steps,
        start_step=start,
        checkpoint=config.checkpoint,
        checkpoint_every=config.checkpoint_every,
        on_step=on_step,
    )
    return TrainResult(model, optimizer, start, losses)
