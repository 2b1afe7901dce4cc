"""Hidden tests of checkpointing: other optimizers and split points, real files, leftovers, bad files."""

from __future__ import annotations

import pytest
import torch

from tests.scenarios import checkpoint as scenario
from tests.scenarios.checkpoint import Setup
from tests.test_checkpoint import (
    OPTIMIZERS,
    assert_error_names_file,
    assert_load_refused_naming_keys,
    assert_same_random_draws,
    assert_state_dicts_equal,
    resumed_and_uninterrupted,
)

ALL_OPTIMIZERS = {
    **OPTIMIZERS,
    "adam_amsgrad": Setup("Adam", {"lr": 3e-3, "amsgrad": True}),
    "rmsprop_centered": Setup("RMSprop", {"lr": 1e-3, "momentum": 0.5, "centered": True}),
    "adagrad": Setup("Adagrad", {"lr": 1e-2}),
}


@pytest.mark.parametrize(
    ("optimizer", "k", "total"),
    [
        ("adam_amsgrad", 1, 6),
        ("rmsprop_centered", 4, 9),
        ("adagrad", 2, 5),
        ("adamw", 0, 4),
        ("sgd_momentum", 8, 8),
    ],
)
def test_resume_is_exact_for_other_optimizers_and_split_points(optimizer, k, total, tmp_path):
    """Exact resumption for Adam (amsgrad), RMSprop, Adagrad, and at step 0 and at the very end."""
    resumed, straight = resumed_and_uninterrupted(
        ALL_OPTIMIZERS[optimizer], k=k, total=total, path=tmp_path / "c.pt"
    )
    assert_state_dicts_equal(
        resumed.model, straight.model, f"resumed ({optimizer}, k={k}) parameters"
    )


def test_saving_does_not_disturb_the_run_being_saved(tmp_path):
    """Saving mid-run and carrying on with the same objects gives the uninterrupted result."""
    straight = scenario.straight(OPTIMIZERS["adamw"], 8)
    run = scenario.saving_every_step(OPTIMIZERS["adamw"], 8, tmp_path / "ckpt.pt")
    assert_state_dicts_equal(run.model, straight.model, "parameters after saving every step")
    assert_state_dicts_equal(
        run.optimizer, straight.optimizer, "optimizer state after saving every step"
    )
    saved = scenario.load_into_fresh(OPTIMIZERS["adamw"], tmp_path / "ckpt.pt")
    assert saved.iteration == 8, (
        f"the last save was at iteration 8, the file says {saved.iteration}"
    )
    assert_state_dicts_equal(
        saved.model, straight.model, "parameters in the last checkpoint vs the run's"
    )


@pytest.mark.parametrize("iteration", [0, 1, 10**12])
def test_iteration_round_trips_exactly(iteration, tmp_path):
    """Any non-negative iteration, including 0 and 10**12, comes back unchanged as an int."""
    scenario.save(OPTIMIZERS["sgd_momentum"], 0, iteration, tmp_path / "ckpt.pt")
    fresh = scenario.load_into_fresh(OPTIMIZERS["sgd_momentum"], tmp_path / "ckpt.pt")
    loaded = fresh.iteration
    assert loaded == iteration and isinstance(loaded, int), (
        f"loaded {loaded!r}, expected the int {iteration}"
    )
    assert_state_dicts_equal(
        fresh.model, scenario.straight(OPTIMIZERS["sgd_momentum"], 0).model, "the saved parameters"
    )


def test_checkpoint_round_trips_through_a_real_binary_file_object(tmp_path):
    """`out`/`src` may be files opened with open(path, 'wb') / open(path, 'rb')."""
    setup, path = OPTIMIZERS["adamw"], tmp_path / "ckpt.bin"
    scenario.save(setup, 2, 2, path, how="open file")
    fresh = scenario.load_into_fresh(setup, path, how="open file")
    saved = scenario.straight(setup, 2)
    assert fresh.iteration == 2
    assert_state_dicts_equal(fresh.model, saved.model, "model.state_dict()")
    assert_state_dicts_equal(fresh.optimizer, saved.optimizer, "optimizer.state_dict()")


def test_saves_leave_no_temporary_files_behind(tmp_path):
    """After successful saves, and after a save that fails midway, the directory holds only the checkpoint."""
    for iteration in range(3):
        scenario.save_crashable(tmp_path / "ckpt.pt", iteration)
    with pytest.raises(OSError, match="simulated crash"):
        scenario.save_crashable(tmp_path / "ckpt.pt", 3, crash=True)
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["ckpt.pt"], (
        f"the directory holds {leftovers}: delete the temporary file when a save fails"
    )


def test_a_failed_first_save_creates_no_checkpoint(tmp_path):
    """A save that fails midway with nothing at the path leaves nothing there (no half-written file)."""
    with pytest.raises(OSError, match="simulated crash"):
        scenario.save_crashable(tmp_path / "ckpt.pt", 1, crash=True)
    assert not (tmp_path / "ckpt.pt").exists(), (
        "a failed save left a (half-written) checkpoint at the path"
    )


def _tensor_dict(path):
    torch.save({"embedding": torch.zeros(3, 2), "step": torch.tensor(5)}, path)


BAD_FILES = {
    "torch-file-that-is-not-a-checkpoint": ("some-tensors.pt", _tensor_dict, ValueError),
    "torch-file-holding-a-list": (
        "tensor-list.pt",
        lambda path: torch.save([torch.ones(2)], path),
        ValueError,
    ),
    "empty-file": ("empty-ckpt.pt", lambda path: path.touch(), ValueError),
    "missing-file": ("never-saved.pt", lambda path: None, FileNotFoundError),
    "missing-directory": ("no-such-run/ckpt.pt", lambda path: None, FileNotFoundError),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_loading_a_bad_file_fails_naming_the_file(tmp_path, case):
    """A torch file holding something else, a zero-byte file (a crash right after creating it): ValueError;
    no file at all (or no directory): FileNotFoundError; each naming the path."""
    name, make, kind = BAD_FILES[case]
    path = tmp_path / name
    make(path)
    assert_error_names_file(lambda: scenario.load_into_fresh(OPTIMIZERS["adamw"], path), path, kind)


def test_checkpoint_keeps_buffers_as_well_as_parameters(tmp_path):
    """Buffers (BatchNorm's running statistics) are restored along with the parameters."""
    setup = Setup("AdamW", {"lr": 1e-2}, model="batchnorm")
    fresh, saved = resumed_and_uninterrupted(setup, k=3, total=3, path=tmp_path / "ckpt.pt")
    assert_state_dicts_equal(fresh.model, saved.model, "model.state_dict() with BatchNorm buffers")


@pytest.mark.parametrize(
    ("optimizer", "k", "total", "how"),
    [
        ("sgd_momentum", 1, 6, "file object"),
        ("adam_amsgrad", 5, 7, "open file"),
        ("adagrad", 3, 4, "str"),
    ],
)
def test_resume_continues_the_global_rngs_for_other_optimizers_and_targets(
    optimizer, k, total, how, tmp_path
):
    """Other optimizers, split points and targets (file objects, str paths): the global RNGs resume exactly."""
    setup = ALL_OPTIMIZERS[optimizer]
    resumed = scenario.resumed_on_random_batches(setup, k, total, tmp_path / "ckpt.pt", how, seed=7)
    straight = scenario.straight_on_random_batches(setup, total, seed=7)
    assert_same_random_draws(resumed, straight)
    assert_state_dicts_equal(
        resumed.model, straight.model, f"resumed ({optimizer}, k={k}) parameters"
    )


@pytest.mark.parametrize(
    ("saved", "loaded"),
    [("mlp", "mlp_with_buffer"), ("mlp_with_buffer", "mlp")],
    ids=["missing-key", "unexpected-key"],
)
def test_loading_is_strict_about_a_missing_or_an_extra_buffer(saved, loaded, tmp_path):
    """A checkpoint without a buffer the model has, or with one it lacks (same parameters): an error naming `scale`."""
    path = tmp_path / "buffer-ckpt.pt"
    scenario.save(Setup("SGD", {"lr": 0.1}, model=saved), 1, 1, path)
    assert_load_refused_naming_keys(
        lambda: scenario.load_into_fresh(Setup("SGD", {"lr": 0.1}, model=loaded), path),
        path,
        ["scale"],
    )
