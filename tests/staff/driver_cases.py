"""Tests written the way every test is now, run by ``test_grade_drivers.py`` in one process and split.

Each uses the reference through ``adapters`` and the parts' drivers (``tests/scenarios/``) and checks a
property of the line itself, which must hold in both modes: a driver's RNGs, plain data and copies
across the line, the submission's exceptions as the test sees them, files under ``tmp_path``, what a
command printed, a run killed midway. Not collected on its own (no ``test_`` prefix in its file name).
"""

from __future__ import annotations

import re
import signal

import pytest
import torch

import adapters
from tests.boundary import killed_midway, printed_by
from tests.scenarios import checkpoint, models, training


def test_a_driver_draws_the_same_numbers_whatever_the_test_drew_before():
    """Every driver starts from the seeded global RNGs, and the test's own draws go on as if it had not run."""
    first = models.seeded_draws(5, rounds=2)
    torch.rand(100)  # the test's own draws reach no driver
    after = torch.get_rng_state()
    assert models.seeded_draws(5, rounds=2) == first
    assert torch.equal(torch.get_rng_state(), after), "a driver changed the test's RNG state"


def test_a_tensor_argument_is_a_copy_and_a_result_is_the_tests_own():
    """The driver's answer is data the test may change; the input it was handed stays the test's."""
    weights = {"weight": torch.ones(4, 3)}
    x = torch.arange(6.0).reshape(2, 3)
    out = models.forward("linear", (3, 4), [x], weights=weights)
    assert torch.equal(weights["weight"], torch.ones(4, 3)) and torch.equal(
        x, torch.arange(6.0).reshape(2, 3)
    )
    out.outputs[0].zero_()  # the test's own copy: nothing on the other side changes with it
    again = models.forward("linear", (3, 4), [x], weights=weights)
    assert torch.equal(again.outputs[0], x @ torch.ones(3, 4))


@pytest.mark.parametrize(
    ("args", "error", "says"),
    [
        ((2.5, 3), ValueError, "d_in must be a positive integer, got 2.5"),
        ((0, 3), ValueError, "d_in"),
    ],
)
def test_the_submissions_error_reaches_pytest_raises_by_class_and_message(args, error, says):
    """A construction error inside a driver: the same class and message as in one process, and nothing else
    for ``match=`` to find (the adapter's own line, the driver's name)."""
    with pytest.raises(error, match=re.escape(says)) as caught:
        models.layout("linear", args)
    assert "layout" not in str(caught.value) and not getattr(caught.value, "__notes__", None)


def test_files_a_driver_writes_under_tmp_path_come_back_and_read_back(tmp_path):
    """A checkpoint saved by the submission's save, inside a driver, is a file of the test's afterwards, and a
    second driver (a fresh load) reads what the test left there."""
    setup = checkpoint.Setup("AdamW", {"lr": 0.01})
    path = tmp_path / "ckpt.pt"
    checkpoint.save(setup, 2, 7, path)
    assert path.is_file() and path.stat().st_size > 0
    assert set(torch.load(path, weights_only=True)) >= {
        "model",
        "optimizer",
    }  # the judge's own safe load
    assert checkpoint.load_into_fresh(setup, path).iteration == 7


def test_what_a_command_prints_comes_back_whole_and_in_order():
    """``printed_by``: every line a command printed (stdout and stderr together), none lost to a cut or a race."""
    status, printed = printed_by(
        lambda: adapters.run_cs336(
            [
                "train",
                "--steps",
                "300",
                "--dim",
                "2",
                "--layers",
                "0",
                "--batch-size",
                "2",
                "--log-every",
                "1",
            ]
        )
    )
    steps = [int(m.group(1)) for m in re.finditer(r"step\s+(\d+)/300\s+loss", printed)]
    assert status == 0 and steps == list(range(1, 301)), printed[-2000:]
    assert printed.rstrip().endswith("final loss " + printed.rstrip().rpartition("final loss ")[2])


def test_a_run_killed_midway_leaves_its_last_checkpoint_and_the_next_call_runs(tmp_path):
    """``killed_midway``: the process is SIGKILLed once its checkpoint exists; the checkpoint is there for
    the test, and the next call runs (split: in a fresh worker)."""
    path = tmp_path / "ckpt.pt"
    argv = [
        "train",
        "--steps",
        "1000000",
        "--dim",
        "2",
        "--layers",
        "0",
        "--checkpoint",
        str(path),
        "--checkpoint-every",
        "1",
    ]
    status, printed = killed_midway("run_cs336", [argv], once_written=path, after=0.05)
    assert status == -signal.SIGKILL and "done:" not in printed, (status, printed[-2000:])
    iteration, _, _ = training.load_final_state(path, dim=2, layers=0)
    assert 0 < iteration < 1_000_000
