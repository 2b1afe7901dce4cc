"""Hidden tests of the training loop: other shapes, seeding, and resuming at the edges."""

from __future__ import annotations

import pytest

from tests.test_training import (
    TINY,
    assert_batches_unrelated,
    assert_it_trained,
    assert_resume_of_a_finished_run_changes_nothing,
    assert_resume_with_no_checkpoint_is_a_fresh_run,
    assert_resumed_logs_like_straight,
    assert_same_final_state,
    load_final_state,
    losses_at_a_negligible_lr,
    losses_printed,
    train,
)


@pytest.mark.parametrize(("dim", "layers"), [(8, 1), (8, 3)])
def test_train_loss_falls_for_other_widths_and_depths(dim, layers):
    """With D = 8 and 1 or 3 hidden layers the loss also falls over 100x in 150 steps."""
    printed = train(*f"--steps 150 --dim {dim} --layers {layers} --batch-size 8 --seed 5".split())
    losses = losses_printed(printed)
    assert losses[150] < losses[1] / 100, (
        f"D={dim}, layers={layers}: loss {losses[1]:.4g} -> {losses[150]:.4g}"
    )


def test_train_with_the_same_seed_is_deterministic_and_another_seed_differs(tmp_path):
    """Two runs with --seed 3 end bit-identical; a run with --seed 4 ends elsewhere."""
    a, b, c = tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / "c.pt"
    train("--steps", "30", *TINY, "--checkpoint", str(a))
    train("--steps", "30", *TINY, "--checkpoint", str(b))
    assert_same_final_state(a, b)
    train("--steps", "30", *[v if v != "3" else "4" for v in TINY], "--checkpoint", str(c))
    _, model_a, _ = load_final_state(a)
    _, model_c, _ = load_final_state(c)
    assert any((model_a[k] != model_c[k]).any() for k in model_a), (
        "--seed 3 and --seed 4 ended with the same weights"
    )
    assert_it_trained(a, 30, tmp_path)


def test_train_resume_before_any_checkpoint_starts_from_scratch(tmp_path):
    """--resume when the checkpoint does not exist yet (killed before its first save) equals a fresh run."""
    assert_resume_with_no_checkpoint_is_a_fresh_run(tmp_path, 40)


def test_train_resume_of_a_finished_run_changes_nothing(tmp_path):
    """Resuming a run whose checkpoint is already at --steps leaves its final state as it was."""
    assert_resume_of_a_finished_run_changes_nothing(tmp_path, 20)


def test_train_resume_with_more_steps_extends_the_run_exactly(tmp_path):
    """A finished 30-step run resumed with --steps 70 ends where a straight 70-step run ends."""
    straight, extended = tmp_path / "straight.pt", tmp_path / "extended.pt"
    train("--steps", "70", *TINY, "--checkpoint", str(straight), "--checkpoint-every", "7")
    train("--steps", "30", *TINY, "--checkpoint", str(extended), "--checkpoint-every", "7")
    train(
        "--steps", "70", *TINY, "--checkpoint", str(extended), "--checkpoint-every", "7", "--resume"
    )
    assert_same_final_state(extended, straight)
    assert_it_trained(straight, 70, tmp_path)


@pytest.mark.parametrize(("seeds", "dim"), [((10, 12), 48), ((0, 1), 80), ((7, 5), 64)])
def test_train_with_other_seeds_draws_unrelated_batches(seeds, dim):
    """Other pairs of seeds (two apart, 0 and 1, a larger one first) and widths: no shared batches at any shift up to 4."""
    a = losses_at_a_negligible_lr(seeds[0], 14, dim)
    b = losses_at_a_negligible_lr(seeds[1], 14, dim)
    assert_batches_unrelated(a, b, seeds, max_shift=4)


def test_a_run_resumed_between_log_lines_logs_the_uninterrupted_runs_lines(tmp_path):
    """Resumed at 9 with --log-every 5 over 26 steps: lines at 10, 15, 20, 25 and 26, with the same losses."""
    assert_resumed_logs_like_straight(tmp_path, resume_at=9, total=26, every=5)
