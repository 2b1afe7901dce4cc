"""Hidden tests of part 3: float64, other seeds and shapes, param groups, zero and missing gradients,
closures, state_dict round trips and more bad hyperparameters. torch.optim stays the oracle."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.scenarios import optim as scenario
from tests.scenarios.optim import Problem
from tests.test_optim import (
    EDGE_SHAPES,
    MEMORY_CASES,
    TOLERANCES,
    TORCH,
    assert_closure_evaluated_like_torch,
    assert_moved,
    assert_stepped_like_torch,
    compare_with_torch,
    describe,
    scaled_problem,
    warmup_then_cosine,
)

NAMES = list(TORCH)

# One setting per optimizer that exercises every term of its update.
FULL = {
    "sgd": {"lr": 0.03, "momentum": 0.7, "weight_decay": 0.05},
    "adagrad": {
        "lr": 0.2,
        "lr_decay": 0.003,
        "initial_accumulator_value": 0.1,
        "weight_decay": 0.02,
        "eps": 1e-3,
    },
    "rmsprop": {"lr": 0.005, "alpha": 0.95, "eps": 1e-4, "momentum": 0.5, "weight_decay": 0.01},
    "adam": {"lr": 0.02, "betas": (0.85, 0.98), "eps": 1e-6, "weight_decay": 0.03},
    "adamw": {"lr": 0.02, "betas": (0.85, 0.98), "eps": 1e-6, "weight_decay": 0.3},
}
ODD_SHAPES = {"scalar": (), "cube": (2, 3, 4), "row": (1, 7)}


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_matches_torch_in_float64(name):
    """In float64, ours and torch.optim agree within 1e-6 after 1000 steps on another seed."""
    compare_with_torch(name, FULL[name], steps=1000, seed=11, dtype=torch.float64, every=250)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_matches_torch_on_odd_shapes(name):
    """Scalar, 3-D and single-row parameters are updated like torch.optim updates them."""
    compare_with_torch(name, FULL[name], steps=150, seed=12, shapes=ODD_SHAPES)


GROUP_OPTIONS = {
    "sgd": [{"lr": 0.1}, {"lr": 0.01, "momentum": 0.9}],
    "adagrad": [{"lr": 0.3}, {"lr": 0.05, "weight_decay": 0.1}],
    "rmsprop": [{"lr": 0.01}, {"lr": 0.001, "momentum": 0.9}],
    "adam": [{"lr": 0.05, "betas": (0.5, 0.9)}, {"lr": 0.005, "weight_decay": 0.1}],
    "adamw": [{"lr": 0.05, "weight_decay": 0.5}, {"lr": 0.005}],
}


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_honours_param_group_options(name):
    """Each param group uses its own hyperparameters (falling back to the constructor's) as in torch."""
    first, second = GROUP_OPTIONS[name]
    groups = [{"params": ["weight"], **first}, {"params": ["bias"], **second}]
    compare_with_torch(name, FULL[name], steps=150, seed=13, groups=groups)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_skips_parameters_without_gradient(name):
    """A parameter whose .grad stays None is left untouched, and the others still match torch."""
    shapes = {"weight": (4, 3), "frozen": (3,)}
    ours, _ = compare_with_torch(
        name, FULL[name], steps=20, seed=14, shapes=shapes, no_grad=frozenset({"frozen"})
    )
    initial = Problem.make(14, 20, torch.float32, shapes).init["frozen"]
    assert torch.equal(ours.final["frozen"], initial), (
        f"{describe(name, FULL[name])} changed a parameter whose grad is None; skip such parameters"
    )


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_handles_all_zero_gradients_like_torch(name):
    """A parameter whose gradient is exactly zero moves as torch moves it (weight decay only) and never becomes NaN."""
    init = torch.linspace(-1, 1, 6)
    zeros = {"p": torch.zeros(6)}
    # grad = 0 * (p - 0) + 0: exactly zero at every step
    problem = Problem(
        init={"p": init}, target=zeros, curvature=zeros, noise={"p": torch.zeros(30, 6)}
    )
    ours = scenario.student_trajectory(name, problem, FULL[name], 30, {30}).final["p"]
    ref = scenario.trajectory(TORCH[name], problem, FULL[name], 30, {30}).final["p"]
    assert not ours.isnan().any(), (
        f"{describe(name, FULL[name])} produced NaN from zero gradients (0/0?)"
    )
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_step_with_closure_returns_its_loss(name):
    """step(closure) re-evaluates the loss with gradients enabled, steps, and returns that loss."""
    target = torch.tensor([1.0, -2.0, 3.0])
    ours = scenario.student_closure_run(name, FULL[name], target, 5)
    ref = scenario.closure_run(TORCH[name], FULL[name], target, 5)
    assert_closure_evaluated_like_torch(name, FULL[name], ours, ref, 5)
    ours_losses = [float(v) for v in ours.returned]
    torch_losses = [float(v) for v in ref.returned]
    assert ours_losses == pytest.approx(torch_losses, rel=1e-5), (
        f"step(closure) returned {ours_losses}, torch {torch_losses}"
    )
    torch.testing.assert_close(ours.param, ref.param, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_state_dict_round_trip_resumes_exactly(name):
    """Saving state_dict after k steps and loading it into a fresh optimizer continues bit for bit."""
    problem = Problem.make(seed=15, steps=20, dtype=torch.float32)
    straight, resumed = scenario.student_resumed_by_state_dict(name, problem, FULL[name], 10, 20)
    for k in straight:
        assert torch.equal(straight[k], resumed[k]), (
            f"{describe(name, FULL[name])}: {k!r} differs after resuming from state_dict"
        )
    torch_run, _ = scenario.resumed_by_state_dict(TORCH[name], problem, FULL[name], 10, 20)
    for k in straight:
        torch.testing.assert_close(
            straight[k],
            torch_run[k],
            rtol=1e-5,
            atol=1e-6,
            msg=lambda m, k=k: (
                f"{describe(name, FULL[name])}: after 20 steps {k!r} is not where torch.optim's is (does step() update it?):\n{m}"
            ),
        )


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_matches_torch_with_in_place_zeroing_in_float64_on_odd_shapes(name):
    """zero_grad(set_to_none=False) and accumulated gradients, float64, scalar/3-D/row parameters: still torch's trajectory."""
    compare_with_torch(
        name,
        FULL[name],
        steps=100,
        seed=16,
        dtype=torch.float64,
        shapes=ODD_SHAPES,
        every=50,
        zero_grad_in_place=True,
    )


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_counts_steps_per_parameter_in_float64_on_odd_shapes(name):
    """A scalar joining at step 4 and a 3-D parameter at step 21, float64: each state starts at its first gradient."""
    compare_with_torch(
        name,
        FULL[name],
        steps=40,
        seed=19,
        dtype=torch.float64,
        shapes=ODD_SHAPES,
        first_grad={"scalar": 3, "cube": 20},
    )


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_follows_a_schedule_on_each_param_group(name):
    """A warm-up-then-cosine schedule applied to two param groups with their own options matches torch."""
    first, second = GROUP_OPTIONS[name]
    groups = [{"params": ["weight"], **first}, {"params": ["bias"], **second}]
    compare_with_torch(
        name, FULL[name], steps=60, seed=17, groups=groups, lr_schedule=warmup_then_cosine(60, 5)
    )


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_step_leaves_odd_shaped_gradients_and_storage_alone(name):
    """With every term on (FULL settings) and scalar/3-D/row parameters, step() neither writes p.grad nor moves p."""
    problem = Problem.make(18, 4, torch.float64, ODD_SHAPES)
    ours = scenario.student_trajectory(
        name, problem, FULL[name], 4, {4}, zero_grad_in_place=True, watch=True
    )
    assert not ours.grad_changed, (
        f"{describe(name, FULL[name])} changed p.grad: {ours.grad_changed}"
    )
    assert not ours.moved, f"{describe(name, FULL[name])} moved parameters: {ours.moved}"
    assert_stepped_like_torch(name, FULL[name], problem, ours, 4, zero_grad_in_place=True)


@pytest.mark.parametrize(
    "dtype, device", [(torch.float16, "meta"), (torch.float32, "meta"), (torch.bfloat16, "cpu")]
)
@pytest.mark.parametrize("name, kwargs, tensors", MEMORY_CASES)
def test_optimizer_state_placement_other_dtypes_and_devices(name, kwargs, tensors, dtype, device):
    """float16 and float32 on the meta device, bfloat16 on the CPU, odd shapes: state is placed as torch places it."""
    ours, error = scenario.student_state_placement(name, kwargs, ODD_SHAPES, dtype, device, steps=3)
    ref, _ = scenario.state_placement(TORCH[name], kwargs, ODD_SHAPES, dtype, device, steps=3)
    for k, theirs in ref.items():
        wanted = {key: v for key, v in theirs.items() if key != "step" and not isinstance(v, str)}
        got = {key: ours[k].get(key) for key in wanted}
        assert got == wanted, (
            f"{describe(name, kwargs)} {dtype} on {device}, {k!r}: {got} vs {wanted}"
        )
    assert error is None, error


NAN = float("nan")
MORE_BAD = [
    ("sgd", {"lr": NAN}, r"lr.*nan"),
    ("sgd", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5, "nesterov": True}, r"nesterov"),
    ("adagrad", {"eps": NAN}, r"eps.*nan"),
    ("rmsprop", {"alpha": 1.5}, r"alpha.*1\.5"),
    ("rmsprop", {"lr": NAN}, r"lr.*nan"),
    ("adam", {"betas": (0.9, NAN)}, r"beta.*nan"),
    ("adam", {"weight_decay": NAN}, r"weight_decay.*nan"),
    ("adamw", {"betas": (1.2, 0.999)}, r"beta.*1\.2"),
    ("adamw", {"lr": -1e-3}, r"lr.*-0\.001"),
]


@pytest.mark.parametrize(
    "name, kwargs, pattern", MORE_BAD, ids=[f"{c[0]}-{c[2]}" for c in MORE_BAD]
)
def test_optimizer_rejects_nan_and_edge_hyperparameters(name, kwargs, pattern):
    """NaN hyperparameters, betas/alpha above 1 and nesterov with dampening raise ValueError naming them."""
    with pytest.raises(ValueError, match=pattern):
        scenario.student_optimizer_built(name, kwargs)


# --------------------------------------------------------------------------------------------
# Edges on other data: zero, tiny and huge gradients, size-one and empty parameters, resumption,
# NaN hyperparameters; each with evidence that the parameters moved
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_zero_then_real_gradients_in_float64_on_edge_shapes(name):
    """float64, size-one and empty parameters, 6 steps of exactly-zero gradients then real ones: torch's trajectory, no NaN."""
    kwargs = {k: v for k, v in FULL[name].items() if k != "weight_decay"}
    shaped = Problem.make(51, 20, torch.float64, EDGE_SHAPES)
    problem = Problem(
        init=shaped.init,
        target=shaped.init,
        curvature=shaped.curvature,
        noise={
            k: torch.cat([torch.zeros(6, *v.shape[1:], dtype=v.dtype), v[6:]])
            for k, v in shaped.noise.items()
        },
    )
    ours, _ = compare_with_torch(
        name, kwargs, steps=20, problem=problem, dtype=torch.float64, every=2
    )
    assert_moved(ours, problem.init, name, kwargs)


@pytest.mark.parametrize("name", ["adagrad", "rmsprop", "adam", "adamw"])
def test_adaptive_optimizer_tiny_gradients_in_float64(name):
    """float64 gradients of magnitude 1e-12 with each optimizer's default eps: the step size follows torch's."""
    problem = scaled_problem(52, 15, torch.float64, scale=1e-12)
    kwargs = {"lr": 0.05}
    ours, _ = compare_with_torch(
        name, kwargs, steps=15, problem=problem, dtype=torch.float64, every=3
    )
    assert_moved(ours, problem.init, name, kwargs)


@pytest.mark.parametrize("name", ["rmsprop", "adam", "adamw"])
def test_adaptive_optimizer_huge_float16_gradients_other_settings(name):
    """float16 gradients of magnitude ~500 with other betas/alpha: no overflow of g^2, torch's trajectory."""
    kwargs = {
        "rmsprop": {"lr": 0.01, "alpha": 0.995},
        "adam": {"lr": 0.01, "betas": (0.8, 0.9995)},
        "adamw": {"lr": 0.01, "betas": (0.8, 0.9995), "weight_decay": 0.1},
    }[name]
    problem = scaled_problem(53, 4, torch.float16, scale=500.0)
    ours, _ = compare_with_torch(
        name,
        kwargs,
        steps=4,
        problem=problem,
        dtype=torch.float16,
        every=1,
        tol=dict(rtol=1e-3, atol=2e-3),
    )
    assert_moved(ours, problem.init, name, kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_resumed_in_float64_ends_where_torch_uninterrupted_ends(name):
    """Resumed from state_dict after 3 of 16 float64 steps: bitwise the uninterrupted run, which is torch's."""
    problem = Problem.make(seed=54, steps=16, dtype=torch.float64, shapes=ODD_SHAPES)
    straight, resumed = scenario.student_resumed_by_state_dict(name, problem, FULL[name], 3, 16)
    ref, _ = scenario.resumed_by_state_dict(TORCH[name], problem, FULL[name], 3, 16)
    for k in straight:
        torch.testing.assert_close(straight[k], ref[k], **TOLERANCES[torch.float64])
        assert not torch.equal(straight[k], problem.init[k]), f"{k!r} never moved"
        assert torch.equal(straight[k], resumed[k]), (
            f"{describe(name, FULL[name])}: {k!r} differs after resuming"
        )


EVEN_MORE_BAD: list[tuple[str, dict[str, Any], str]] = [
    ("sgd", {"weight_decay": NAN}, r"weight_decay.*=nan"),
    ("adagrad", {"initial_accumulator_value": NAN}, r"initial_accumulator_value.*=nan"),
    ("rmsprop", {"momentum": NAN}, r"momentum.*=nan"),
    ("adamw", {"betas": (0.9, NAN)}, r"betas\[1\].*=nan"),
]


@pytest.mark.parametrize(
    "name, kwargs, pattern",
    EVEN_MORE_BAD,
    ids=[f"{c[0]}-{next(iter(c[1]))}" for c in EVEN_MORE_BAD],
)
def test_optimizer_rejects_other_nan_hyperparameters_with_the_documented_words(
    name, kwargs, pattern
):
    """Other NaN hyperparameters: ValueErrors naming the keyword and its value as f"{name}={value!r}"."""
    with pytest.raises(ValueError, match=pattern):
        scenario.student_optimizer_built(name, kwargs)
