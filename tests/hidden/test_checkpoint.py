"""Hidden tests of checkpointing: other optimizers and split points, real files, leftovers, bad files."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import adapters
from tests.test_checkpoint import (
    OPTIMIZERS,
    CrashableModel,
    assert_error_names_file,
    assert_state_dicts_equal,
    make_model,
    resumed_and_uninterrupted,
    train,
)

ALL_OPTIMIZERS = {
    **OPTIMIZERS,
    "adam_amsgrad": lambda params: torch.optim.Adam(params, lr=3e-3, amsgrad=True),
    "rmsprop_centered": lambda params: torch.optim.RMSprop(
        params, lr=1e-3, momentum=0.5, centered=True
    ),
    "adagrad": lambda params: torch.optim.Adagrad(params, lr=1e-2),
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
        ALL_OPTIMIZERS[optimizer], k=k, total=total, target=tmp_path / "c.pt"
    )
    assert_state_dicts_equal(
        resumed.state_dict(), straight.state_dict(), f"resumed ({optimizer}, k={k}) parameters"
    )


def test_saving_does_not_disturb_the_run_being_saved(tmp_path):
    """Saving mid-run and carrying on with the same objects gives the uninterrupted result."""
    straight = make_model(0)
    straight_opt = OPTIMIZERS["adamw"](list(straight.parameters()))
    train(straight, straight_opt, range(8))
    model = make_model(0)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    for step in range(8):
        train(model, opt, range(step, step + 1))
        adapters.run_save_checkpoint(model, opt, step + 1, tmp_path / "ckpt.pt")
    assert_state_dicts_equal(
        model.state_dict(), straight.state_dict(), "parameters after saving every step"
    )
    assert_state_dicts_equal(
        opt.state_dict(), straight_opt.state_dict(), "optimizer state after saving every step"
    )


@pytest.mark.parametrize("iteration", [0, 1, 10**12])
def test_iteration_round_trips_exactly(iteration, tmp_path):
    """Any non-negative iteration, including 0 and 10**12, comes back unchanged as an int."""
    model = make_model(0)
    opt = OPTIMIZERS["sgd_momentum"](list(model.parameters()))
    adapters.run_save_checkpoint(model, opt, iteration, tmp_path / "ckpt.pt")
    loaded = adapters.run_load_checkpoint(tmp_path / "ckpt.pt", model, opt)
    assert loaded == iteration and isinstance(loaded, int), (
        f"loaded {loaded!r}, expected the int {iteration}"
    )


def test_checkpoint_round_trips_through_a_real_binary_file_object(tmp_path):
    """`out`/`src` may be files opened with open(path, 'wb') / open(path, 'rb')."""
    model = make_model(0)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    train(model, opt, range(2))
    path = tmp_path / "ckpt.bin"
    with path.open("wb") as f:
        adapters.run_save_checkpoint(model, opt, 2, f)
    fresh = make_model(1)
    fresh_opt = OPTIMIZERS["adamw"](list(fresh.parameters()))
    with path.open("rb") as f:
        iteration = adapters.run_load_checkpoint(f, fresh, fresh_opt)
    assert iteration == 2
    assert_state_dicts_equal(fresh.state_dict(), model.state_dict(), "model.state_dict()")
    assert_state_dicts_equal(fresh_opt.state_dict(), opt.state_dict(), "optimizer.state_dict()")


def test_saves_leave_no_temporary_files_behind(tmp_path):
    """After successful saves, and after a save that fails midway, the directory holds only the checkpoint."""
    model = CrashableModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for iteration in range(3):
        adapters.run_save_checkpoint(model, opt, iteration, tmp_path / "ckpt.pt")
    model.crash = True
    with pytest.raises(OSError, match="simulated crash"):
        adapters.run_save_checkpoint(model, opt, 3, tmp_path / "ckpt.pt")
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["ckpt.pt"], (
        f"the directory holds {leftovers}: delete the temporary file when a save fails"
    )


def test_a_failed_first_save_creates_no_checkpoint(tmp_path):
    """A save that fails midway with nothing at the path leaves nothing there (no half-written file)."""
    model = CrashableModel()
    model.crash = True
    with pytest.raises(OSError, match="simulated crash"):
        adapters.run_save_checkpoint(
            model, torch.optim.SGD(model.parameters(), lr=0.1), 1, tmp_path / "ckpt.pt"
        )
    assert not (tmp_path / "ckpt.pt").exists(), (
        "a failed save left a (half-written) checkpoint at the path"
    )


def _tensor_dict(path):
    torch.save({"embedding": torch.zeros(3, 2), "step": torch.tensor(5)}, path)


BAD_FILES = {
    "torch-file-that-is-not-a-checkpoint": ("some-tensors.pt", _tensor_dict),
    "empty-file": ("empty-ckpt.pt", lambda path: path.touch()),
    "missing-file": ("never-saved.pt", lambda path: None),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_loading_a_bad_file_fails_naming_the_file(tmp_path, case):
    """A torch file holding something else, a zero-byte file (a crash right after creating it), or no file at all raises an error naming the path."""
    name, make = BAD_FILES[case]
    path = tmp_path / name
    make(path)
    model = make_model(0)
    assert_error_names_file(
        lambda: adapters.run_load_checkpoint(path, model, OPTIMIZERS["adamw"](list(model.parameters()))),
        path,
    )


def test_checkpoint_keeps_buffers_as_well_as_parameters(tmp_path):
    """Buffers (BatchNorm's running statistics) are restored along with the parameters."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train(model, opt, range(3))
    adapters.run_save_checkpoint(model, opt, 3, tmp_path / "ckpt.pt")
    torch.manual_seed(1)
    fresh = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Linear(6, 1))
    adapters.run_load_checkpoint(
        tmp_path / "ckpt.pt", fresh, torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    )
    assert_state_dicts_equal(
        fresh.state_dict(), model.state_dict(), "model.state_dict() with BatchNorm buffers"
    )
