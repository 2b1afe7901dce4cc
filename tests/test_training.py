"""Public tests of the training loop, through the ``cs336 train`` command.

``cs336 train`` builds your ``Cruncher`` and ``AdamW`` and saves/loads with your checkpoint code,
so these tests pass once models, optimizers, checkpointing and ``training.py`` all work. The commands
run through ``tests/scenarios/training.py``, which hands back what they printed (stdout and stderr
together; in grading, what your side of the line printed: see ``tests/boundary.py``), and whose
driver ``load_final_state`` reads a checkpoint back with your code.
"""

from __future__ import annotations

import math
import re
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.scenarios import training as scenario
from tests.scenarios.training import load_final_state
from tests.test_checkpoint import assert_state_dicts_equal

# A tiny run: D = 4, so the loss starts near sum(i^2 for i < 4) = 14 and AdamW fits it in ~100 steps.
TINY = ["--dim", "4", "--layers", "2", "--batch-size", "8", "--lr", "0.01", "--seed", "3"]
LOSS_LINE = re.compile(r"step\s+(\d+)/(\d+)\s+loss\s+(\S+)")


def cs336(argv: list[str]) -> scenario.Run:
    """Run `cs336 ARGV` (your command); print here what it printed; return its status and output."""
    run = scenario.cs336(argv)
    sys.stdout.write(run.printed)
    return run


def train(*args: str) -> str:
    """Run `cs336 train ARGS`; fail with the exit status if it is not 0; return what it printed."""
    run = cs336(["train", *args])
    assert run.status == 0, f"`cs336 train {' '.join(args)}` exited with status {run.status}"
    return run.printed


def losses_printed(text: str) -> dict[int, float]:
    return {int(m.group(1)): float(m.group(3)) for m in LOSS_LINE.finditer(text)}


def losses_at_a_negligible_lr(seed: int, steps: int, dim: int) -> list[float]:
    """The step losses of `cs336 train --seed SEED` with a linear model (--layers 0) at --lr 1e-6.

    The weights barely move, and with D = dim the targets (~ ||arange(D)||) dwarf the model's output, so
    the loss of step t is, to within a few percent, a function of the batch of step t alone."""
    printed = train(
        *f"--steps {steps} --dim {dim} --layers 0 --batch-size 4 --lr 1e-6 --seed {seed}".split(),
        *["--log-every", "1"],
    )
    losses = losses_printed(printed)
    assert sorted(losses) == list(range(1, steps + 1)), (
        f"expected a loss line for every step 1..{steps}, got {sorted(losses)}"
    )
    return [losses[t] for t in range(1, steps + 1)]


def assert_batches_unrelated(
    a: list[float], b: list[float], seeds: tuple[int, int], max_shift: int = 3
) -> None:
    """For no shift s in -max_shift..max_shift do the losses b[t] follow a[t + s] within 20% at every step."""
    for s in range(-max_shift, max_shift + 1):
        pairs = [(a[t + s], b[t]) for t in range(len(b)) if 0 <= t + s < len(a)]
        worst = max(abs(math.log(x / y)) for x, y in pairs)
        when = f"{abs(s)} step(s) {'later' if s > 0 else 'earlier'}" if s else "at the same step"
        assert worst > 0.2, (
            f"with the weights held still (--lr 1e-6), every step loss of --seed {seeds[1]} is within "
            f"{math.expm1(worst):.1%} of the loss of --seed {seeds[0]} {when}: the two runs train on the same "
            f"batches{'' if s == 0 else ', shifted'}. "
            "The batch of step t must be a well-mixed function of (seed, t), e.g. drawn from "
            "step_generator(seed, t); seeding it with seed + t (or t alone) makes runs share their data"
        )


def assert_loss_fell(printed: str, steps: int, factor: float) -> None:
    """Evidence that training happened: the loss printed at step ``steps`` is below the first over ``factor``."""
    losses = losses_printed(printed)
    assert 1 in losses and steps in losses, (
        f"expected `step N/{steps}  loss X` lines for steps 1 and {steps}, got {sorted(losses)}"
    )
    assert losses[steps] < losses[1] / factor, (
        f"loss went from {losses[1]:.4g} (step 1) to {losses[steps]:.4g} (step {steps}): training should cut "
        f"it over {factor:g}x; a run that does not train ends where its resumed twin ends without proving anything"
    )


def assert_same_final_state(actual: Path, expected: Path) -> None:
    """The two checkpoints hold the same iteration, bit-identical parameters and optimizer state."""
    it_a, model_a, opt_a = load_final_state(actual)
    it_e, model_e, opt_e = load_final_state(expected)
    assert it_a == it_e, f"{actual.name} ends at iteration {it_a}, {expected.name} at {it_e}"
    assert_state_dicts_equal(model_a, model_e, f"parameters of {actual.name} vs {expected.name}")
    assert_state_dicts_equal(opt_a, opt_e, f"optimizer state of {actual.name} vs {expected.name}")


#: AdamW moves a weight by at most about 3.2 lr per step ((1 - beta1) / sqrt(1 - beta2)), plus weight decay.
ONE_STEP_BOUND = 5 * float(TINY[TINY.index("--lr") + 1])


def assert_it_trained(path: Path, steps: int, tmp_path: Path) -> None:
    """Evidence that training happened (a run that changes nothing ends where it resumes, trivially): the
    weights in ``path``, a checkpoint of a ``TINY`` run of ``steps`` steps, differ from a run of one step
    less, by at most what one AdamW step moves a weight (both start from the seed's init)."""
    shorter = tmp_path / "one-step-less.pt"
    train("--steps", str(steps - 1), *TINY, "--checkpoint", str(shorter))
    _, trained, _ = load_final_state(path)
    _, before, _ = load_final_state(shorter)
    moved = max((trained[k] - before[k]).abs().max().item() for k in trained)
    assert moved > 0, (
        f"{path.name} holds the weights of a run of one step less: the last step did not train (does the "
        "optimizer step update the parameters, and does the model's output depend on them?)"
    )
    assert moved <= ONE_STEP_BOUND, (
        f"the weights of {path.name} differ from those of a run of one step less by up to {moved:.3g}, more "
        f"than one AdamW step at lr {TINY[TINY.index('--lr') + 1]} can move them: runs of one --seed must "
        "start from the same initial weights (set_seed before building the model)"
    )


def test_train_command_prints_a_falling_loss():
    """`cs336 train` logs the loss as it trains; after 150 steps it is below a hundredth of the first."""
    losses = losses_printed(train("--steps", "150", *TINY))
    assert 1 in losses and 150 in losses, (
        f"expected `step N/150  loss X` lines for steps 1 and 150, got {sorted(losses)}"
    )
    assert losses[150] < losses[1] / 100, (
        f"loss went from {losses[1]:.4g} (step 1) to {losses[150]:.4g} (step 150): it should fall by over 100x"
    )


def test_train_with_another_seed_draws_other_batches_not_the_same_ones_shifted():
    """--seed 3 and --seed 4 train on unrelated batches, not on one sequence shifted by a few steps.

    Observed through the printed losses at a learning rate too small to move the weights: then a
    step's loss measures its batch, and shared batches show up as losses that follow each other.
    """
    a = losses_at_a_negligible_lr(3, 12, 64)
    b = losses_at_a_negligible_lr(4, 12, 64)
    assert_batches_unrelated(a, b, (3, 4))


def test_train_resumed_from_a_checkpoint_ends_exactly_where_an_uninterrupted_run_ends(tmp_path):
    """Train 60 of 120 steps, then `--resume` to 120: the final checkpoint equals a straight 120-step run's."""
    straight, resumed = tmp_path / "straight.pt", tmp_path / "resumed.pt"
    printed = train(
        "--steps", "120", *TINY, "--checkpoint", str(straight), "--checkpoint-every", "40"
    )
    assert_loss_fell(printed, 120, 10)
    train("--steps", "60", *TINY, "--checkpoint", str(resumed), "--checkpoint-every", "25")
    iteration = load_final_state(resumed)[0]
    assert iteration == 60, (
        f"a run of --steps 60 left a checkpoint at iteration {iteration}, not 60"
    )
    train(
        "--steps",
        "120",
        *TINY,
        "--checkpoint",
        str(resumed),
        "--checkpoint-every",
        "25",
        "--resume",
    )
    assert_same_final_state(resumed, straight)
    assert_it_trained(straight, 120, tmp_path)


def test_train_refuses_to_overwrite_an_existing_checkpoint_without_resume(tmp_path):
    """A fresh run pointed at an existing checkpoint exits with an error mentioning --resume and leaves the file alone."""
    path = tmp_path / "ckpt.pt"
    train("--steps", "3", *TINY, "--checkpoint", str(path))
    before = path.read_bytes()
    run = cs336(["train", "--steps", "5", *TINY, "--checkpoint", str(path)])
    assert run.status != 0, "starting a new run over an existing checkpoint should fail"
    assert "--resume" in run.printed, (
        f"the error should suggest --resume, got: {run.printed.strip()[-300:]}"
    )
    assert path.read_bytes() == before, "the existing checkpoint was modified"


def assert_resume_with_no_checkpoint_is_a_fresh_run(tmp_path: Path, steps: int) -> None:
    """`--resume` pointed at a checkpoint that does not exist yet ends where a fresh `steps`-step run ends."""
    fresh, resumed = tmp_path / "fresh.pt", tmp_path / "resumed.pt"
    train("--steps", str(steps), *TINY, "--checkpoint", str(fresh))
    train("--steps", str(steps), *TINY, "--checkpoint", str(resumed), "--resume")
    assert_same_final_state(resumed, fresh)
    assert_it_trained(fresh, steps, tmp_path)


def assert_resume_of_a_finished_run_changes_nothing(tmp_path: Path, steps: int) -> None:
    """A finished `steps`-step run resumed with the same --steps keeps its final state."""
    path, reference = tmp_path / "ckpt.pt", tmp_path / "reference.pt"
    train("--steps", str(steps), *TINY, "--checkpoint", str(path))
    reference.write_bytes(path.read_bytes())
    train("--steps", str(steps), *TINY, "--checkpoint", str(path), "--resume")
    assert_same_final_state(path, reference)
    assert_it_trained(reference, steps, tmp_path)


def test_train_resume_with_no_checkpoint_yet_equals_a_fresh_run(tmp_path):
    """--resume before the checkpoint exists (killed before its first save) trains from step 0, like a fresh run."""
    assert_resume_with_no_checkpoint_is_a_fresh_run(tmp_path, 25)


def test_train_resume_of_a_finished_run_leaves_its_checkpoint_as_it_was(tmp_path):
    """Resuming a run whose checkpoint is already at --steps trains no further."""
    assert_resume_of_a_finished_run_changes_nothing(tmp_path, 15)


def test_train_killed_with_sigkill_then_resumed_ends_exactly_like_an_uninterrupted_run(tmp_path):
    """SIGKILL at a random moment (checkpointing every step), then `--resume`: same final state as a straight run."""
    steps = ["--steps", "200", *TINY]
    straight, killed = tmp_path / "straight.pt", tmp_path / "killed.pt"
    assert_loss_fell(
        train(*steps, "--checkpoint", str(straight), "--checkpoint-every", "1000"), 200, 10
    )

    returncode, output = scenario.train_killed_at_random(
        ["train", *steps, "--checkpoint", str(killed), "--checkpoint-every", "1"], killed
    )
    if "NotImplementedError" in output:
        raise NotImplementedError(output.strip().splitlines()[-1])
    assert returncode in (0, -signal.SIGKILL), (
        f"the run failed before it was killed:\n{output[-3000:]}"
    )
    assert killed.exists(), f"no checkpoint was written before the kill:\n{output[-3000:]}"

    train(*steps, "--checkpoint", str(killed), "--checkpoint-every", "1", "--resume")
    assert_same_final_state(killed, straight)
    assert_it_trained(straight, 200, tmp_path)


def assert_resumed_saves_on_schedule(tmp_path: Path, resume_at: int, every: int) -> None:
    """A run of `resume_at` steps, resumed with --checkpoint-every `every` and killed once it saved: the
    save fell at a multiple of `every` counted from step 0, holding the uninterrupted run's state there."""
    path, straight = tmp_path / "ckpt.pt", tmp_path / "straight.pt"
    every_n = ["--checkpoint-every", str(every)]
    train("--steps", str(resume_at), *TINY, "--checkpoint", str(path), *every_n)
    before = load_final_state(path)
    argv = ["train", "--steps", "1000000", *TINY, "--checkpoint", str(path), *every_n, "--resume"]
    status, output = scenario.train_killed_once_saved(argv, path)
    if "NotImplementedError" in output:
        raise NotImplementedError(output.strip().splitlines()[-1])
    assert status == -signal.SIGKILL, (
        f"the resumed run ended before its first save was seen:\n{output[-3000:]}"
    )
    iteration, model, _ = load_final_state(path)
    assert iteration > resume_at and iteration % every == 0, (
        f"a run resumed at step {resume_at} with --checkpoint-every {every} saved at iteration {iteration}: "
        f"saves fall at the multiples of {every} counted from step 0, where the uninterrupted run saves, "
        f"not every {every} steps from where this process started ({resume_at + every}, ...)"
    )
    train("--steps", str(iteration), *TINY, "--checkpoint", str(straight), *every_n)
    assert_same_final_state(path, straight)
    changed = [
        not torch.equal(a, b) for a, b in zip(before[1].values(), model.values(), strict=True)
    ]
    assert any(changed), (
        f"the parameters at iteration {iteration} equal those at {resume_at}: the resumed run did not train"
    )


def assert_resumed_logs_like_straight(
    tmp_path: Path, resume_at: int, total: int, every: int
) -> None:
    """A run resumed at `resume_at` prints (--log-every `every`) the loss lines of the uninterrupted
    `total`-step run after `resume_at`: the same step numbers, counted from 0, and the same losses."""
    log_every = ["--log-every", str(every)]
    straight = losses_printed(train("--steps", str(total), *TINY, *log_every))
    path = tmp_path / "ckpt.pt"
    train("--steps", str(resume_at), *TINY, "--checkpoint", str(path))
    resumed = losses_printed(
        train("--steps", str(total), *TINY, "--checkpoint", str(path), "--resume", *log_every)
    )
    expected = {step: loss for step, loss in straight.items() if step > resume_at}
    assert resumed == expected, (
        f"a run resumed at step {resume_at} logged {resumed}, the uninterrupted run {expected} after step "
        f"{resume_at}: on_step gets the step number counted from 0 (t + 1), whatever step the run resumed at"
    )
    assert len(set(straight.values())) > 1, (
        f"every step logged the same loss {straight}: nothing trained"
    )
    # equal logs hold trivially when a step changes nothing
    assert_it_trained(path, total, tmp_path)


def test_a_resumed_run_saves_at_the_steps_an_uninterrupted_run_saves_at(tmp_path):
    """--checkpoint-every 7 counts from step 0 in a resumed run too: resumed at 30, it saves at 35, 42, ...
    (not 37, 44, ...), and each save holds what an uninterrupted run holds at that step."""
    assert_resumed_saves_on_schedule(tmp_path, resume_at=30, every=7)


def test_a_resumed_run_logs_the_steps_and_losses_an_uninterrupted_run_logs(tmp_path):
    """--log-every 4: a run resumed at step 10 prints the loss lines of the uninterrupted run after step 10
    (12, 16, 20 and the last, 22), numbered from step 0 and with the same losses."""
    assert_resumed_logs_like_straight(tmp_path, resume_at=10, total=22, every=4)


#: AdamW's defaults (yours and torch's): what a run that does not pass an option on to AdamW computes.
ADAMW_DEFAULT_LR, ADAMW_DEFAULT_WEIGHT_DECAY = 1e-3, 1e-2


def reference_weights(
    init: dict[str, torch.Tensor],
    seed: int,
    steps: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
) -> dict[str, torch.Tensor]:
    """The run `cs336 train` documents, computed here with torch alone: from the weights ``init`` (the
    Cruncher's state dict: its layers, then the head, applied in that order without bias), ``steps`` steps of
    ``torch.optim.AdamW(lr, weight_decay)`` on the mean squared error, step t on the batch
    ``x = torch.randn(batch_size, D, generator=step_generator(seed, t))``, ``y = x @ arange(D)``."""
    weights = {name: w.detach().clone().requires_grad_() for name, w in init.items()}
    optimizer = torch.optim.AdamW(weights.values(), lr=lr, weight_decay=weight_decay)
    dim = next(iter(init.values())).shape[-1]
    true_w = torch.arange(dim, dtype=torch.float32)
    for step in range(steps):
        # step_generator(seed, step), written out: the test does not import your module
        (mixed,) = np.random.SeedSequence([seed, step]).generate_state(1, dtype=np.uint64)
        x = torch.randn(batch_size, dim, generator=torch.Generator().manual_seed(int(mixed)))
        out = x
        for w in weights.values():
            out = out @ w.T
        loss = torch.nn.functional.mse_loss(out.squeeze(-1), x @ true_w)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {name: w.detach() for name, w in weights.items()}


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in b)


def test_train_applies_the_lr_and_weight_decay_it_is_given(tmp_path):
    """`cs336 train --lr LR --weight-decay WD` computes AdamW(lr=LR, weight_decay=WD) on the documented batches:
    after 8 steps its checkpoint holds the weights torch.optim.AdamW reaches from the seed's initial Cruncher on
    the batches x = randn(batch, D, generator=step_generator(seed, t)), y = x @ arange(D), under MSE
    (checked for weight decay 0 and 0.5, lr 0.02 and 0.05)."""
    seed, steps, dim, layers, batch = 3, 8, 4, 2, 8
    init = scenario.initial_state(seed, dim, layers)
    if all(not w.any() for w in init.values()):
        raise AssertionError(
            f"the initial Cruncher (set_seed({seed}), then Cruncher({dim}, {layers})) has every weight zero: a "
            "stack of zero matrices gets zero gradients, so no lr or weight decay can show in the weights; "
            "initialise Linear as its docstring says (truncated normal)"
        )
    for lr, weight_decay in [(0.02, 0.0), (0.02, 0.5), (0.05, 0.5)]:
        options = f"--lr {lr} --weight-decay {weight_decay}"
        path = tmp_path / f"lr{lr}-wd{weight_decay}.pt"
        train(
            *f"--steps {steps} --dim {dim} --layers {layers} --batch-size {batch} --seed {seed}".split(),
            *options.split(),
            *["--checkpoint", str(path)],
        )
        _, got, _ = load_final_state(path, dim, layers)
        want = reference_weights(init, seed, steps, batch, lr, weight_decay)
        off = max_difference(got, want)
        if off <= 1e-4:
            continue
        explanations = {
            f"AdamW's default weight decay {ADAMW_DEFAULT_WEIGHT_DECAY:g}, not --weight-decay {weight_decay:g}": (
                lr,
                ADAMW_DEFAULT_WEIGHT_DECAY,
            ),
            f"AdamW's default lr {ADAMW_DEFAULT_LR:g}, not --lr {lr:g}": (
                ADAMW_DEFAULT_LR,
                weight_decay,
            ),
            "AdamW's default lr and weight decay, ignoring both options": (
                ADAMW_DEFAULT_LR,
                ADAMW_DEFAULT_WEIGHT_DECAY,
            ),
        }
        hint = next(
            (
                f": they are the weights of a run with {what}; pass both options on to AdamW"
                for what, (lr_, wd_) in explanations.items()
                if max_difference(got, reference_weights(init, seed, steps, batch, lr_, wd_))
                <= 1e-4
            ),
            ": check that each step trains on regression_batch(t, ...) (x drawn from step_generator(seed, t), "
            "y = x @ arange(D)) and that the options reach AdamW",
        )
        raise AssertionError(
            f"`cs336 train {options}` ({steps} steps, --seed {seed}) ended with weights up to {off:.3g} away from "
            f"torch.optim.AdamW(lr={lr}, weight_decay={weight_decay}) run {steps} steps on the documented batches "
            f"from the same initial Cruncher{hint}"
        )


def sgd_reference(
    weight: torch.Tensor, lr: float, batches: list[tuple[torch.Tensor, torch.Tensor]], start: int
) -> tuple[list[float], torch.Tensor]:
    """The documented loop computed here with torch alone: steps ``start .. len(batches) - 1`` of SGD on
    a bias-free linear model under mean squared error, step t on ``batches[t]``; each step's loss (taken
    before its update) and the final weight."""
    w = weight.clone().requires_grad_()
    optimizer = torch.optim.SGD([w], lr=lr)
    losses = []
    for x, y in batches[start:]:
        loss = torch.nn.functional.mse_loss((x @ w.T).squeeze(-1), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, w.detach()


@pytest.mark.parametrize(("start", "num_steps"), [(0, 5), (3, 7)], ids=["fresh", "resumed"])
def test_train_loop_returns_each_steps_loss_as_a_float_and_steps_from_start_to_num_steps(
    start, num_steps
):
    """`train_loop(..., num_steps, start_step=start)` runs steps start .. num_steps - 1, step t on
    get_batch(t), and returns their losses as Python floats (`loss.item()`, not tensors that keep each
    step's graph alive), the losses torch computes for the same run; on_step gets (t + 1, that float).
    Checked on a torch linear model under torch's SGD, against the same run done here."""
    generator = torch.Generator().manual_seed(31)
    dim, lr = 3, 0.05
    weight = torch.randn(1, dim, generator=generator)
    batches = []
    for _ in range(num_steps):
        x = torch.randn(6, dim, generator=generator)
        batches.append((x, x @ torch.arange(dim, dtype=torch.float32)))
    run = scenario.loop_run(weight, lr, batches, start)
    want_losses, want_weight = sgd_reference(weight, lr, batches, start)
    steps = list(range(start, num_steps))
    assert run.batches_asked == steps, (
        f"train_loop(num_steps={num_steps}, start_step={start}) asked get_batch for steps {run.batches_asked}, "
        f"expected {steps}: step t trains on get_batch(t), for t from start_step up to num_steps - 1"
    )
    assert run.returned_type == "list" and all(run.value_is_float), (
        f"train_loop returned a {run.returned_type} of {sorted(set(run.value_types))}: return a list of Python "
        "floats (loss.item()); a loss tensor keeps its step's autograd graph alive"
    )
    assert run.values == pytest.approx(want_losses, rel=1e-5, abs=1e-7), (
        f"train_loop returned the losses {run.values}, the same run in torch has {want_losses}: each step's "
        "loss, computed on its batch before that step's update"
    )
    assert all(run.on_step_is_int_float) and run.on_step_calls == [
        (t + 1, pytest.approx(loss, rel=1e-5, abs=1e-7))
        for t, loss in zip(steps, want_losses, strict=True)
    ], (
        f"on_step was called with {run.on_step_calls} (types {run.on_step_types}); expected (t + 1, the step's "
        f"loss as a float) for t in {steps}: {[(t + 1, loss) for t, loss in zip(steps, want_losses, strict=True)]}"
    )
    torch.testing.assert_close(
        run.weight,
        want_weight,
        rtol=1e-5,
        atol=1e-6,
        msg=lambda m: (
            f"after the run the weight is not what torch's SGD reaches on the same batches: {m}"
        ),
    )
