"""Public tests of checkpointing (through ``adapters.run_save_checkpoint`` / ``run_load_checkpoint``).

The models and optimizers here are torch's own, so these tests depend only on your checkpoint code.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

import adapters
from tests.test_data import error_raised_by

# ----------------------------------------------------------------------------------------------
# helpers (the graders' hidden tests reuse them)
# ----------------------------------------------------------------------------------------------



OPTIMIZERS: dict[str, Callable[[list[nn.Parameter]], torch.optim.Optimizer]] = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9),
}


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of step ``step``: a pure function of the step, independent of any global RNG."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(16, 4, generator=g)
    return x, x.sum(dim=1, keepdim=True) ** 2


def train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: range) -> None:
    for step in steps:
        x, y = batch(step)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def assert_state_dicts_equal(actual: dict, expected: dict, what: str) -> None:
    """Exact equality of two (nested) state dicts, naming the first entry that differs."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), (
            f"{what}: expected a tensor, got {type(actual).__name__}"
        )
        assert actual.shape == expected.shape, (
            f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        )
        assert torch.equal(actual, expected), (
            f"{what} differs: max |diff| = {(actual.double() - expected.double()).abs().max().item():.3g}"
        )
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (
            f"{what}: keys {sorted(map(str, actual)) if isinstance(actual, dict) else actual!r} != {sorted(map(str, expected))}"
        )
        for key in expected:
            assert_state_dicts_equal(actual[key], expected[key], f"{what}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{what}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_state_dicts_equal(a, e, f"{what}[{i}]")
    else:
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"


def resumed_and_uninterrupted(
    make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
    k: int,
    total: int,
    target,
) -> tuple[nn.Module, nn.Module]:
    """Train `total` steps straight; and train `k`, checkpoint to `target`, load into fresh objects, finish."""
    straight = make_model(0)
    straight_opt = make_optimizer(list(straight.parameters()))
    train(straight, straight_opt, range(total))

    first = make_model(0)
    first_opt = make_optimizer(list(first.parameters()))
    train(first, first_opt, range(k))
    adapters.run_save_checkpoint(first, first_opt, k, target)
    if isinstance(target, io.BytesIO):
        target.seek(0)
    resumed = make_model(1)  # a different initialisation: everything must come from the checkpoint
    resumed_opt = make_optimizer(list(resumed.parameters()))
    start = adapters.run_load_checkpoint(target, resumed, resumed_opt)
    assert start == k, (
        f"load_checkpoint returned iteration {start}, but the checkpoint was saved at {k}"
    )
    train(resumed, resumed_opt, range(start, total))
    return resumed, straight


class _ExplodesWhenPickled:
    def __reduce__(self):
        raise OSError("simulated crash in the middle of writing the checkpoint")


class CrashableModel(nn.Module):
    """A model whose state cannot be serialised once ``crash`` is set, so saving it fails midway."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.crash = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)

    def get_extra_state(self):
        return _ExplodesWhenPickled() if self.crash else {}

    def set_extra_state(self, state) -> None:
        pass


def assert_error_names_file(call: Callable[[], object], path: Path) -> None:
    """``call()`` raises an error whose message contains the file's name (any exception type)."""
    err = error_raised_by(call)
    assert path.name in str(err), (
        f"the error does not name the file {path.name}, so the user cannot tell which file is bad: "
        f"{type(err).__name__}: {err}"
    )


LOADED_CODE_RAN: list[str] = []


def _record_code_execution() -> dict:
    LOADED_CODE_RAN.append("ran")
    return {}


class _RunsCodeWhenUnpickled:
    def __reduce__(self):
        return (_record_code_execution, ())


# ----------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_checkpoint_round_trip_restores_model_optimizer_and_iteration(optimizer, tmp_path):
    """After save then load into fresh objects, model and optimizer state dicts are equal and the iteration returns."""
    model = make_model(0)
    opt = OPTIMIZERS[optimizer](list(model.parameters()))
    train(model, opt, range(3))
    path = tmp_path / "ckpt.pt"
    adapters.run_save_checkpoint(model, opt, 3, path)
    fresh = make_model(1)
    fresh_opt = OPTIMIZERS[optimizer](list(fresh.parameters()))
    iteration = adapters.run_load_checkpoint(path, fresh, fresh_opt)
    assert iteration == 3, (
        f"load_checkpoint returned {iteration!r}, the checkpoint was saved at iteration 3"
    )
    assert_state_dicts_equal(fresh.state_dict(), model.state_dict(), "model.state_dict()")
    assert_state_dicts_equal(fresh_opt.state_dict(), opt.state_dict(), "optimizer.state_dict()")


@pytest.mark.parametrize("target", ["path", "str", "file object"])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_resuming_from_a_checkpoint_matches_uninterrupted_training_exactly(
    optimizer, target, tmp_path
):
    """Train 5 steps, checkpoint, load into a fresh model and optimizer, train 7 more: bit-identical to 12 straight."""
    out = {
        "path": tmp_path / "ckpt.pt",
        "str": str(tmp_path / "ckpt.pt"),
        "file object": io.BytesIO(),
    }[target]
    resumed, straight = resumed_and_uninterrupted(OPTIMIZERS[optimizer], k=5, total=12, target=out)
    assert_state_dicts_equal(
        resumed.state_dict(),
        straight.state_dict(),
        f"resumed ({optimizer}) vs uninterrupted parameters",
    )


def test_saving_again_replaces_the_previous_checkpoint(tmp_path):
    """A second save to the same path wins: loading returns the newer iteration and weights."""
    model = make_model(0)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    path = tmp_path / "ckpt.pt"
    adapters.run_save_checkpoint(model, opt, 1, path)
    train(model, opt, range(2))
    adapters.run_save_checkpoint(model, opt, 2, path)
    fresh = make_model(1)
    iteration = adapters.run_load_checkpoint(
        path, fresh, OPTIMIZERS["adamw"](list(fresh.parameters()))
    )
    assert iteration == 2, f"loaded iteration {iteration}, expected the newer checkpoint's 2"
    assert_state_dicts_equal(fresh.state_dict(), model.state_dict(), "model.state_dict()")


def test_a_save_that_fails_midway_leaves_the_previous_checkpoint_intact(tmp_path):
    """Saving is atomic: when serialisation fails mid-save, the checkpoint already at the path still loads."""
    model = CrashableModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path / "ckpt.pt"
    adapters.run_save_checkpoint(model, opt, 7, path)
    saved = {k: v.clone() for k, v in model.linear.state_dict().items()}
    with torch.no_grad():
        model.linear.weight.add_(1.0)
    model.crash = True
    with pytest.raises(OSError, match="simulated crash"):
        adapters.run_save_checkpoint(model, opt, 8, path)
    fresh = CrashableModel()
    try:
        iteration = adapters.run_load_checkpoint(
            path, fresh, torch.optim.SGD(fresh.parameters(), lr=0.1)
        )
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure here means the old checkpoint was destroyed
        pytest.fail(
            f"after a failed save, the previous checkpoint no longer loads ({type(err).__name__}: {err}); "
            "save to a temporary file in the same directory and os.replace it over the path"
        )
    assert iteration == 7, (
        f"after a failed save the checkpoint says iteration {iteration}, expected the previous 7"
    )
    assert_state_dicts_equal(fresh.linear.state_dict(), saved, "the previous checkpoint's weights")


def test_loading_a_truncated_checkpoint_fails_naming_the_file(tmp_path):
    """A checkpoint cut in half (a crash of a non-atomic writer) raises an error that names the file."""
    model = make_model(0)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    train(model, opt, range(1))
    path = tmp_path / "truncated-ckpt.pt"
    adapters.run_save_checkpoint(model, opt, 1, path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert_error_names_file(lambda: adapters.run_load_checkpoint(path, model, opt), path)


def test_loading_a_file_that_is_not_a_checkpoint_fails_naming_the_file(tmp_path):
    """A foreign file (here, text) raises an error that names the file."""
    model = make_model(0)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    path = tmp_path / "notes-not-a-ckpt.txt"
    path.write_text("these are my notes, not a checkpoint\n")
    assert_error_names_file(lambda: adapters.run_load_checkpoint(path, model, opt), path)


def test_loading_never_runs_code_stored_in_the_file(tmp_path):
    """Loading uses weights_only=True: a pickle that would call a function when unpickled is refused."""
    model = make_model(0)
    opt = OPTIMIZERS["adamw"](list(model.parameters()))
    path = tmp_path / "malicious-ckpt.pt"
    torch.save(
        {"model": _RunsCodeWhenUnpickled(), "optimizer": opt.state_dict(), "iteration": 1}, path
    )
    LOADED_CODE_RAN.clear()
    err = error_raised_by(lambda: adapters.run_load_checkpoint(path, model, opt))
    assert not LOADED_CODE_RAN, (
        "loading the checkpoint ran code stored in it: pass weights_only=True to torch.load"
    )
    assert path.name in str(err), (
        f"the error does not name the file {path.name}: {type(err).__name__}: {err}"
    )
