"""Public tests of checkpointing (through ``adapters.run_save_checkpoint`` / ``run_load_checkpoint``).

The models and optimizers here are torch's own, so these tests depend only on your checkpoint code.
The drivers of ``tests/scenarios/checkpoint.py`` build, train, save and load them beside your code
(see ``tests/boundary.py``) and return the state dicts and iterations they saw; the tests run the
uninterrupted reference runs themselves, and read the checkpoints your code wrote with their own
``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.scenarios import checkpoint as scenario
from tests.scenarios.checkpoint import RandomRun, Setup, State
from tests.test_data import error_raised_by

# ----------------------------------------------------------------------------------------------
# helpers (the graders' hidden tests reuse them)
# ----------------------------------------------------------------------------------------------


OPTIMIZERS: dict[str, Setup] = {
    "adamw": Setup("AdamW", {"lr": 1e-2, "weight_decay": 0.1}),
    "sgd_momentum": Setup("SGD", {"lr": 1e-2, "momentum": 0.9}),
}
CRASHABLE = scenario.CRASHABLE


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


def assert_checkpoint_holds(written: bytes | Path, expected: State, what: str) -> None:
    """The checkpoint (its bytes, or the file at a path), read here with ``torch.load(weights_only=True)``,
    is a dict whose "model" and "optimizer" entries are ``expected``'s state dicts (the format of
    ``cs336_assignment/checkpoint.py``): what a load restores must have been written, not kept aside."""
    data = written.read_bytes() if isinstance(written, Path) else written
    try:
        saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure to read it is the finding
        pytest.fail(
            f"{what}: torch.load(..., weights_only=True) cannot read the checkpoint ({len(data)} "
            f"bytes): {type(err).__name__}: {err}"
        )
    assert isinstance(saved, dict) and {"model", "optimizer"} <= set(saved), (
        f"{what}: the checkpoint holds {type(saved).__name__}"
        f"{' with keys ' + str(sorted(map(str, saved))) if isinstance(saved, dict) else ''}, expected a dict "
        'with the entries "model", "optimizer", "iteration" and "rng"'
    )
    assert_state_dicts_equal(saved["model"], expected.model, f'{what}: its "model"')
    assert_state_dicts_equal(saved["optimizer"], expected.optimizer, f'{what}: its "optimizer"')


def resumed_and_uninterrupted(
    setup: Setup, k: int, total: int, path: Path, how: str = "path"
) -> tuple[State, State]:
    """Train `total` steps straight; and train `k`, checkpoint to `path`, load into fresh objects, finish.
    The checkpoint must hold the state of the run at step `k` (read here)."""
    resumed = scenario.resumed(setup, k, total, path, how)
    assert resumed.iteration == k, (
        f"load_checkpoint returned iteration {resumed.iteration}, but the checkpoint was saved at {k}"
    )
    assert_checkpoint_holds(
        resumed.written, scenario.straight(setup, k), f"the checkpoint saved at step {k}"
    )
    return resumed, scenario.straight(setup, total)


RNG_NAMES = ("torch's global RNG", "NumPy's global RNG", "the global RNG of Python's random")


def assert_same_random_draws(resumed: RandomRun, straight: RandomRun) -> None:
    """After the load, every global RNG gives what it gives in the uninterrupted run, step by step."""
    expected = straight.draws[resumed.first_step :]
    assert len(resumed.draws) == len(expected), (
        f"the resumed run drew {len(resumed.draws)} batches after loading, the uninterrupted run "
        f"{len(expected)} from step {resumed.first_step} on"
    )
    for i, (got, want) in enumerate(zip(resumed.draws, expected, strict=True)):
        for name, g, w in zip(RNG_NAMES, got, want, strict=True):
            assert g == w, (
                f"step {resumed.first_step + i} after resuming: {name} gave {g!r}, the uninterrupted run "
                f"{w!r}. save_checkpoint must save the global RNG states of torch, NumPy and Python's random, and "
                "load_checkpoint restore them, or a resumed run draws other batches (dropout masks, shuffles)"
            )


def assert_load_refused_naming_keys(
    call: Callable[[], object], path: Path, keys: list[str]
) -> None:
    """``call()`` (loading ``path`` into a model whose state dict keys differ) raises the documented
    ValueError naming the file and at least one of ``keys``, the keys the checkpoint and the model
    disagree on."""
    try:
        call()
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - the type is checked below, with a message that says which
        assert isinstance(err, ValueError), (
            f"a checkpoint that does not fit the model should raise the documented ValueError, got "
            f"{type(err).__name__}: {err}"
        )
        assert path.name in str(err) and any(k in str(err) for k in keys), (
            f"the error should name the file {path.name} and the keys that do not match (any of {keys}), "
            f"got {type(err).__name__}: {err}"
        )
        return
    pytest.fail(
        f"loading {path.name} into a model whose state dict keys differ (any of {keys} is missing on one "
        "side) succeeded: load strictly (model.load_state_dict's default strict=True), or the weights the "
        "checkpoint does not name silently keep their initial values"
    )


def assert_error_names_file(
    call: Callable[[], object], path: Path, kind: type[Exception] = ValueError
) -> None:
    """``call()`` raises the documented ``kind`` of error, and its message contains the file's name."""
    err = error_raised_by(call)
    assert isinstance(err, kind), (
        f"loading {path.name} should raise the documented {kind.__name__} (the type a caller catches), "
        f"got {type(err).__name__}: {err}"
    )
    assert path.name in str(err), (
        f"the error does not name the file {path.name}, so the user cannot tell which file is bad: "
        f"{type(err).__name__}: {err}"
    )


class _RunsCodeWhenUnpickled:
    """Unpickling this creates the (empty) file ``marker``: the test sees whether loading ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


# ----------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_checkpoint_round_trip_restores_model_optimizer_and_iteration(optimizer, tmp_path):
    """After save then load into fresh objects, model and optimizer state dicts are equal and the iteration returns."""
    setup, path = OPTIMIZERS[optimizer], tmp_path / "ckpt.pt"
    scenario.save(setup, 3, 3, path)  # after 3 steps of training
    fresh = scenario.load_into_fresh(setup, path)
    saved = scenario.straight(setup, 3)
    assert_checkpoint_holds(path, saved, f"{path.name}, saved after 3 steps")
    assert fresh.iteration == 3, (
        f"load_checkpoint returned {fresh.iteration!r}, the checkpoint was saved at iteration 3"
    )
    assert_state_dicts_equal(fresh.model, saved.model, "model.state_dict()")
    assert_state_dicts_equal(fresh.optimizer, saved.optimizer, "optimizer.state_dict()")


@pytest.mark.parametrize("target", ["path", "str", "file object"])
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_resuming_from_a_checkpoint_matches_uninterrupted_training_exactly(
    optimizer, target, tmp_path
):
    """Train 5 steps, checkpoint, load into a fresh model and optimizer, train 7 more: bit-identical to 12 straight."""
    resumed, straight = resumed_and_uninterrupted(
        OPTIMIZERS[optimizer], k=5, total=12, path=tmp_path / "ckpt.pt", how=target
    )
    assert_state_dicts_equal(
        resumed.model,
        straight.model,
        f"resumed ({optimizer}) vs uninterrupted parameters",
    )


def test_resuming_restores_the_global_rngs_so_random_batches_continue_exactly(tmp_path):
    """Batches drawn from the global RNGs (torch, NumPy, random): after save, restart and load, each RNG
    continues exactly where the uninterrupted run's does, and the weights end bit-identical."""
    setup = OPTIMIZERS["adamw"]
    resumed = scenario.resumed_on_random_batches(setup, k=4, total=9, path=tmp_path / "ckpt.pt")
    straight = scenario.straight_on_random_batches(setup, total=9)
    assert resumed.first_step == 4, (
        f"load_checkpoint returned {resumed.first_step}, the checkpoint was saved at 4"
    )
    assert_same_random_draws(resumed, straight)
    assert_state_dicts_equal(resumed.model, straight.model, "resumed vs uninterrupted parameters")


def test_saving_every_step_leaves_the_run_as_it_would_be_without_saves(tmp_path):
    """Saving changes nothing in the run it saves: a BatchNorm model on batches from the global RNGs,
    saved after every step, draws the same numbers and ends bit-identical to the run without saves."""
    setup = Setup("AdamW", {"lr": 1e-2}, model="batchnorm")
    saving = scenario.saving_every_step_on_random_batches(setup, 6, tmp_path / "ckpt.pt")
    straight = scenario.straight_on_random_batches(setup, 6)
    for step, (got, want) in enumerate(zip(saving.draws, straight.draws, strict=True)):
        for name, g, w in zip(RNG_NAMES, got, want, strict=True):
            assert g == w, (
                f"step {step} of a run saved after every step: {name} gave {g!r}, {w!r} without saves. "
                "Saving must not draw from the global RNGs (a temporary file name from random.getrandbits, say): "
                "cs336_assignment.files.atomic_write names its file without them"
            )
    assert_state_dicts_equal(
        saving.model,
        straight.model,
        "parameters and BatchNorm statistics after saving every step vs without saves (did saving call "
        "model.eval() or otherwise change the model?)",
    )
    assert_state_dicts_equal(
        scenario.load_into_fresh(setup, tmp_path / "ckpt.pt").model,
        straight.model,
        "the last checkpoint vs the run it saved (parameters and BatchNorm statistics)",
    )


def test_loading_a_checkpoint_whose_keys_differ_from_the_model_fails_naming_them(tmp_path):
    """Loading is strict: the same layers under other names (inp.weight, not 0.weight) is an error naming the keys."""
    path = tmp_path / "mlp-ckpt.pt"
    scenario.save(OPTIMIZERS["adamw"], 1, 1, path)  # keys 0.weight, 0.bias, 2.weight, 2.bias
    renamed = Setup("AdamW", {"lr": 1e-2, "weight_decay": 0.1}, model="mlp_renamed")
    keys = [
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
        "inp.weight",
        "inp.bias",
        "out.weight",
        "out.bias",
    ]
    assert_load_refused_naming_keys(lambda: scenario.load_into_fresh(renamed, path), path, keys)


def test_saving_again_replaces_the_previous_checkpoint(tmp_path):
    """A second save to the same path wins: loading returns the newer iteration and weights."""
    setup, path = OPTIMIZERS["adamw"], tmp_path / "ckpt.pt"
    scenario.save(setup, 0, 1, path)
    scenario.save(setup, 2, 2, path)  # the same run, 2 steps later
    fresh = scenario.load_into_fresh(setup, path)
    assert fresh.iteration == 2, (
        f"loaded iteration {fresh.iteration}, expected the newer checkpoint's 2"
    )
    assert_state_dicts_equal(fresh.model, scenario.straight(setup, 2).model, "model.state_dict()")


def test_a_save_that_fails_midway_leaves_the_previous_checkpoint_intact(tmp_path):
    """Saving is atomic: when serialisation fails mid-save, the checkpoint already at the path still loads."""
    path = tmp_path / "ckpt.pt"
    scenario.save_crashable(path, 7)
    saved, good = scenario.crashable_weights(), path.read_bytes()
    with pytest.raises(OSError, match="simulated crash"):
        scenario.save_crashable(path, 8, shift=1.0, crash=True)  # other weights, unpicklable
    assert path.exists() and path.read_bytes() == good, (
        "a save that failed midway changed the checkpoint already at the path: save to a temporary file "
        "in the same directory and os.replace it over the path only once it is complete"
    )
    try:
        fresh = scenario.load_into_fresh(CRASHABLE, path)
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure here means the old checkpoint was destroyed
        pytest.fail(
            f"after a failed save, the previous checkpoint no longer loads ({type(err).__name__}: {err}); "
            "save to a temporary file in the same directory and os.replace it over the path"
        )
    assert fresh.iteration == 7, (
        f"after a failed save the checkpoint says iteration {fresh.iteration}, expected the previous 7"
    )
    weights = {k: v for k, v in fresh.model.items() if isinstance(v, torch.Tensor)}
    assert_state_dicts_equal(weights, saved, "the previous checkpoint's weights")
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["ckpt.pt"], (
        f"the directory holds {leftovers}: delete the temporary file when a save fails"
    )


@pytest.mark.parametrize("iteration", [0, 2**33 + 5])
def test_iteration_comes_back_as_the_same_int(iteration, tmp_path):
    """The iteration load returns is the saved one exactly, as an int: 0, and one past 32 bits."""
    scenario.save(OPTIMIZERS["adamw"], 1, iteration, tmp_path / "ckpt.pt")
    fresh = scenario.load_into_fresh(OPTIMIZERS["adamw"], tmp_path / "ckpt.pt")
    loaded = fresh.iteration
    assert loaded == iteration and type(loaded) is int, (
        f"loaded {loaded!r}, expected the int {iteration}"
    )
    # and the state came with it (an iteration of 0 is also what a load that reads nothing returns)
    assert_state_dicts_equal(
        fresh.model, scenario.straight(OPTIMIZERS["adamw"], 1).model, "the saved parameters"
    )


def test_checkpoint_round_trips_through_open_binary_files(tmp_path):
    """`out` / `src` may be files opened with open(path, "wb") / open(path, "rb"): written and read as they are."""
    setup, path = OPTIMIZERS["sgd_momentum"], tmp_path / "ckpt.bin"
    scenario.save(setup, 4, 4, path, how="open file")
    fresh = scenario.load_into_fresh(setup, path, how="open file")
    saved = scenario.straight(setup, 4)
    assert_checkpoint_holds(path, saved, f"{path.name}, written through an open file after 4 steps")
    assert fresh.iteration == 4, (
        f"load_checkpoint returned {fresh.iteration!r}, the checkpoint was saved at 4"
    )
    assert_state_dicts_equal(fresh.model, saved.model, "model.state_dict()")
    assert_state_dicts_equal(fresh.optimizer, saved.optimizer, "optimizer.state_dict()")


def test_loading_a_truncated_checkpoint_fails_naming_the_file(tmp_path):
    """A checkpoint cut in half (a crash of a non-atomic writer) raises ValueError naming the file."""
    setup, path = OPTIMIZERS["adamw"], tmp_path / "truncated-ckpt.pt"
    scenario.save(setup, 1, 1, path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert_error_names_file(lambda: scenario.load_into_fresh(setup, path), path)


def test_loading_a_file_that_is_not_a_checkpoint_fails_naming_the_file(tmp_path):
    """A foreign file (here, text) raises ValueError naming the file."""
    path = tmp_path / "notes-not-a-ckpt.txt"
    path.write_text("these are my notes, not a checkpoint\n")
    assert_error_names_file(lambda: scenario.load_into_fresh(OPTIMIZERS["adamw"], path), path)


def test_loading_a_torch_file_that_is_not_a_checkpoint_fails_naming_the_file(tmp_path):
    """A model's bare ``state_dict()`` saved with torch.save (a readable torch file, but no "model",
    "optimizer" or "iteration" entry) raises ValueError naming the file, not a KeyError."""
    path = tmp_path / "bare-state-dict.pt"
    model, _ = OPTIMIZERS["adamw"].build(0)
    torch.save(model.state_dict(), path)
    assert_error_names_file(lambda: scenario.load_into_fresh(OPTIMIZERS["adamw"], path), path)


@pytest.mark.parametrize("how", ["path", "str"])
def test_loading_a_missing_file_raises_file_not_found_error_naming_it(how, tmp_path):
    """No file at the path (a run killed before its first save): FileNotFoundError naming the path, the
    type a caller catches to start afresh, not wrapped into another error."""
    path = tmp_path / "never-saved-ckpt.pt"
    with pytest.raises(FileNotFoundError, match=re.escape(path.name)):
        scenario.load_into_fresh(OPTIMIZERS["adamw"], path, how)


def test_loading_never_runs_code_stored_in_the_file(tmp_path):
    """Loading uses weights_only=True: a pickle that would call a function when unpickled is refused."""
    setup, path, marker = OPTIMIZERS["adamw"], tmp_path / "malicious-ckpt.pt", tmp_path / "code-ran"
    _, opt = setup.build(0)
    torch.save(
        {"model": _RunsCodeWhenUnpickled(marker), "optimizer": opt.state_dict(), "iteration": 1},
        path,
    )
    err = error_raised_by(lambda: scenario.load_into_fresh(setup, path))
    assert not marker.exists(), (
        "loading the checkpoint ran code stored in it: pass weights_only=True to torch.load"
    )
    assert path.name in str(err), (
        f"the error does not name the file {path.name}: {type(err).__name__}: {err}"
    )


def test_a_load_that_fails_changes_neither_the_model_nor_the_optimizer_nor_the_rngs(tmp_path):
    """A checkpoint whose model fits but whose optimizer does not (one parameter group, the optimizer two)
    fails with the documented ValueError, and leaves everything as it was: the model (torch's
    load_state_dict had already copied the weights in), the optimizer and the global RNGs (restored only
    once both loaded)."""
    path = tmp_path / "ckpt.pt"
    setup = OPTIMIZERS["adamw"]
    scenario.save(setup, 2, 2, path)
    # evidence that the checkpoint holds the run (failing to load garbage would prove nothing)
    fitting, saved = scenario.load_into_fresh(setup, path), scenario.straight(setup, 2)
    assert fitting.iteration == 2, f"the checkpoint loads as iteration {fitting.iteration}, not 2"
    assert_state_dicts_equal(fitting.model, saved.model, "the checkpoint's model vs the run saved")
    failed = scenario.load_that_does_not_fit_the_optimizer(setup, path, rng_seed=5)
    assert failed.error.startswith("ValueError") and path.name in failed.error, (
        f"loading a checkpoint whose optimizer has another number of parameter groups should raise the "
        f"documented ValueError naming the file, got: {failed.error or 'no error'}"
    )
    assert_state_dicts_equal(
        failed.after.model,
        failed.before.model,
        "the model after a load that failed vs before it (put back what load_state_dict copied in)",
    )
    assert_state_dicts_equal(
        failed.after.optimizer,
        failed.before.optimizer,
        "the optimizer after a failed load vs before it",
    )
    with scenario.global_rngs_seeded(5):
        untouched = scenario.rng_draws()
    assert failed.draws_after == untouched, (
        "after a load that failed, the global RNGs (torch, NumPy, random) were no longer as they were: "
        "restore the saved RNG states only once the model and the optimizer have loaded"
    )


def test_a_checkpoint_without_rng_states_loads_and_leaves_the_rngs_alone(tmp_path):
    """A checkpoint without its "rng" entry (written before RNG states were saved) loads: the model,
    optimizer and iteration come back, and the global RNGs are left as they are (no KeyError)."""
    path = tmp_path / "ckpt.pt"
    setup = OPTIMIZERS["sgd_momentum"]
    scenario.save(setup, 3, 3, path)
    loaded, draws = scenario.load_without_rng(setup, path, rng_seed=7)
    expected = scenario.straight(setup, 3)
    assert loaded.iteration == 3, f"the load returned iteration {loaded.iteration}, expected 3"
    assert_state_dicts_equal(loaded.model, expected.model, "the model loaded vs the run saved")
    assert_state_dicts_equal(
        loaded.optimizer, expected.optimizer, "the optimizer loaded vs the run saved"
    )
    with scenario.global_rngs_seeded(7):
        untouched = scenario.rng_draws()
    assert draws == untouched, (
        "loading a checkpoint without RNG states changed the global RNGs: leave them as they are"
    )
