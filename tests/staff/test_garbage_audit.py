"""`cs336 audit --garbage` on the sample repository, and the garbage it is made of.

The sample's ``add`` has a strong test (``1 + 2 == 3``), a weak one (the result is a float: the
stub fails it, garbage passes it) and a contract check (``None + 1`` raises TypeError: garbage
passes it having seen only the reference's error). The check must name the weak test, for both
flavours, and nothing else. The garbage itself is checked in-process on tensors, containers and a
tiny optimizer.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

from cs336_assignment.cli import CommandError
from cs336_staff.audit import garbage
from cs336_staff.audit.garbage_check import (
    ACCEPTED,
    Target,
    accepted,
    check,
    stubbed,
    summary,
    targets,
    with_garbage,
)
from cs336_staff.session.warm import WarmPool
from tests.staff.test_release import make_sample_repo

pytestmark = pytest.mark.staff

WEAK_TESTS = '''
import pytest

import adapters


def test_add_returns_a_float():
    """Weak: only the type."""
    assert isinstance(adapters.run_add(1.0, 2.0), float)


def test_hypot_3_4_5():
    """Strong."""
    assert adapters.run_hypot(3.0, 4.0) == 5.0


def test_add_of_none_raises():
    """A contract check: the reference's own TypeError."""
    with pytest.raises(TypeError):
        adapters.run_add(None, 1.0)
'''


def test_the_check_names_the_weak_test_and_passes_the_strong_and_the_contract_ones(tmp_path):
    """Only the weak test is stolen, by both flavours; the strong and hidden tests fail on garbage."""
    repo = make_sample_repo(tmp_path / "repo")
    (repo / "tests/test_arith_weak.py").write_text(textwrap.dedent(WEAK_TESTS))
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    with WarmPool(light=True) as pool:  # the sample needs no torch warm-up
        findings, items, problems = check(repo, jobs=2, echo=lambda _: None, pool=pool)
    # the sample has no snapshot file: a test that fails on the reference counts for nothing
    assert problems == [
        "tests/test_arith.py::test_hypot_matches_snapshot: fails on the reference (it counts for nothing here)"
    ]
    by_name = {f.target.name: f for f in findings}
    assert sorted(by_name) == ["add", "hypot"], "describe has no solution region: not a target"
    add = by_name["add"]
    assert add.stub_fails == sorted(
        [
            "tests/test_arith.py::test_add_adds",
            "tests/hidden/test_arith.py::test_add_negative",
            "tests/test_arith_weak.py::test_add_returns_a_float",
            "tests/test_arith_weak.py::test_add_of_none_raises",
        ]
    )
    for kind in garbage.FLAVOURS:
        assert add.stolen[kind] == ["tests/test_arith_weak.py::test_add_returns_a_float"], kind
        assert add.contract[kind] == ["tests/test_arith_weak.py::test_add_of_none_raises"], kind
    assert by_name["hypot"].ok and by_name["hypot"].stub_fails == [
        "tests/test_arith_weak.py::test_hypot_3_4_5"
    ]
    assert not add.ok and add.problems == []
    weak = items["tests/test_arith_weak.py::test_add_returns_a_float"]
    assert summary(findings, items)[0].split() == [
        "arith",
        "1",
        "tests",
        f"{weak.points:.2f}",
        "points",
    ]
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before, (
        "the check never touches the repository"
    )


def test_targets_stub_and_garbage_only_the_target(tmp_path):
    """A target's stub replaces its regions only; its garbage rebinds it at the end of its module."""
    repo = make_sample_repo(tmp_path / "repo")
    (add,) = targets(repo, ["add"])
    assert add == Target("arith", "add", "cs336_assignment/arith.py", ("add",), False)
    source = (repo / add.file).read_text()
    stub = stubbed(source, add, add.file)
    assert 'raise NotImplementedError("Implement add in cs336_assignment/arith.py")' in stub
    assert "squares = a * a + b * b" in stub, "hypot's region stays"
    assert with_garbage(source, add).endswith("add = _cs336_garbage.garbage(add, 'add')\n")
    with pytest.raises(CommandError, match="names no part or graded target"):
        targets(repo, ["nope"])


def test_accepted_passes_are_named_by_target_and_test_function_with_a_reason():
    """A decision in ACCEPTED covers every parametrization of its test, for its target only."""
    seed = Target("models", "set_seed", "cs336_assignment/models.py", ("set_seed",), False)
    adamw = Target("optim", "Adam", "cs336_assignment/optim.py", ("Adam.step",), True)
    test = "tests/hidden/test_training.py::test_train_loss_falls_for_other_widths_and_depths[8-1]"
    assert "seeds nothing" in accepted(seed, test)
    assert accepted(adamw, test) is None
    assert all(reason.strip() for reason in ACCEPTED.values())


@pytest.mark.parametrize("kind", garbage.FLAVOURS)
def test_garble_keeps_shape_dtype_device_and_structure(kind):
    """Tensors and arrays keep shape, dtype and device; containers keep type, length and keys."""
    x, y = torch.arange(12).reshape(3, 4), torch.randn(2, 5, requires_grad=True)
    out = garbage.garble(
        {"x": x, "y": y, "pair": (1.5, "s"), "n": 3, "a": np.ones(4, np.float32), "b": b"ab"}, kind
    )
    assert set(out) == {"x", "y", "pair", "n", "a", "b"}
    assert (out["x"].shape, out["x"].dtype, out["x"].device) == (x.shape, x.dtype, x.device)
    assert out["y"].requires_grad and out["y"].is_leaf and out["y"].shape == y.shape
    assert isinstance(out["pair"], tuple) and out["pair"][1] == "" and out["b"] == b""
    assert out["a"].dtype == np.float32 and out["a"].shape == (4,)
    if kind == "zeros":
        assert not out["x"].any() and out["n"] == 0 and out["pair"][0] == 0.0
    else:
        assert (
            not torch.equal(out["x"], x)
            and out["n"] != 3
            and 0 <= int(out["x"].min())
            and int(out["x"].max()) <= 11
        )
    assert garbage.garble(torch.empty(2, 3, device="meta"), kind).device.type == "meta"


def test_a_garbage_optimizer_step_changes_nothing_and_keeps_the_rngs():
    """A class's written methods run on copies: the parameters and the global RNG are untouched."""

    class Step(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, {"lr": lr})

        def step(self, closure=None):
            torch.rand(1)  # draws from the global RNG: the garbage puts it back
            for group in self.param_groups:
                for p in group["params"]:
                    p.data -= group["lr"] * p.grad
            return 1.0

    garbage.garbage(Step, "Step", methods=["step"])
    w = torch.nn.Parameter(torch.ones(3))
    w.grad = torch.ones(3)
    opt = Step([w])
    rng = torch.get_rng_state()
    assert opt.step() == 0.0
    assert torch.equal(w.detach(), torch.ones(3)) and torch.equal(torch.get_rng_state(), rng)
