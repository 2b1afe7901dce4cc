"""Train the Cruncher on the lecture's synthetic regression task (y = x @ arange(D)) with AdamW.

Examples:
    uv run cs336 train --steps 300 --dim 16 --layers 2
    uv run cs336 train --steps 2000 --checkpoint runs/ckpt.pt --checkpoint-every 100
    uv run cs336 train --steps 2000 --checkpoint runs/ckpt.pt --checkpoint-every 100 --resume

A run killed at any moment and restarted with the same arguments plus --resume continues from its
last checkpoint and ends with exactly the parameters of a run that was never interrupted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from cs336_assignment.cli import CommandError
from cs336_assignment.commands import count, device, nonnegative_float, positive_float, positive_int
from cs336_assignment.training import TrainConfig, train_regression

_DEFAULTS = TrainConfig()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=_DEFAULTS.steps,
        help="total optimizer steps (default: %(default)s)",
    )
    parser.add_argument(
        "--dim",
        type=positive_int,
        default=_DEFAULTS.dim,
        help="input dimension D (default: %(default)s)",
    )
    parser.add_argument(
        "--layers",
        type=count,
        default=_DEFAULTS.num_layers,
        help="hidden D x D layers (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=_DEFAULTS.batch_size,
        help="examples per step (default: %(default)s)",
    )
    parser.add_argument(
        "--lr",
        type=positive_float,
        default=_DEFAULTS.lr,
        help="AdamW learning rate (default: %(default)s)",
    )
    parser.add_argument(
        "--weight-decay",
        type=nonnegative_float,
        default=_DEFAULTS.weight_decay,
        help="AdamW weight decay (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=count,
        default=_DEFAULTS.seed,
        help="seeds the initialisation and the data (default: %(default)s)",
    )
    parser.add_argument(
        "--device",
        type=device,
        default=_DEFAULTS.device,
        help="torch device this machine has (default: %(default)s)",
    )
    parser.add_argument(
        "--checkpoint", type=Path, metavar="PATH", help="save a checkpoint here (atomically)"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=positive_int,
        default=_DEFAULTS.checkpoint_every,
        metavar="N",
        help="save every N steps and after the last one (default: %(default)s)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from --checkpoint if it exists"
    )
    parser.add_argument(
        "--log-every",
        type=count,
        default=0,
        metavar="N",
        help="print the loss every N steps (default: steps/10)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = TrainConfig(
            steps=args.steps,
            dim=args.dim,
            num_layers=args.layers,
            batch_size=args.batch_size,
            lr=args.lr,
            weight_decay=args.weight_decay,
            seed=args.seed,
            device=args.device,
            checkpoint=args.checkpoint,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
        )
    except (
        ValueError
    ) as err:  # what argparse cannot check alone: --resume without --checkpoint, ...
        raise CommandError(err) from None
    log_every = args.log_every if args.log_every > 0 else max(1, config.steps // 10)
    bar = tqdm(total=config.steps, unit="step", dynamic_ncols=True)

    def on_start(start: int) -> None:
        if start:
            tqdm.write(f"resumed from {config.checkpoint} at step {start}/{config.steps}")
        elif config.resume:
            tqdm.write(f"no checkpoint at {config.checkpoint} yet: starting from step 0")
        bar.update(start)

    def on_step(step: int, loss: float) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.4g}")
        if step % log_every == 0 or step == config.steps or step == 1:
            tqdm.write(f"step {step:>6}/{config.steps}  loss {loss:.6g}")

    try:
        result = train_regression(config, on_start=on_start, on_step=on_step)
    except (
        ValueError
    ) as err:  # a checkpoint in the way (start_or_resume): its message says what to do
        raise CommandError(err) from None
    finally:  # whatever happens (NotImplementedError included) the bar ends its line first, so the
        bar.close()  # error (printed by cs336's main) starts on a line of its own
    if result.losses:
        print(f"done: {config.steps} steps, final loss {result.losses[-1]:.6g}")
    else:
        print(
            f"done: the checkpoint is already at step {result.start_step} >= --steps {config.steps}"
        )
    if config.checkpoint is not None:
        print(f"checkpoint: {config.checkpoint}")
    return 0
