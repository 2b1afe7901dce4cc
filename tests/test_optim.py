"""Public tests of part 3: the optimizers, with ``torch.optim`` as the oracle.

Each optimizer and its ``torch.optim`` counterpart start from the same parameters and run side by
side on a seeded noisy quadratic: at every step each receives the gradient of its *own* parameters,
``grad = h * (p - target) + noise_t`` (``h`` a per-coordinate curvature, ``noise_t`` fixed by the
seed), so an error in the update rule compounds through the trajectory just as in training. The
parameters are compared at checkpoints along the way; the first checkpoint where they disagree is
reported with the parameter, index and both values. Some runs drive both optimizers the way a
training loop does: gradients zeroed in place (``zero_grad(set_to_none=False)``) and accumulated
into the same ``.grad`` tensor, or ``group["lr"]`` changed between steps by a schedule. Others
check what ``step()`` must leave alone (``p.grad``, the parameter's memory) and where its state
lives (the parameter's dtype and device, checked on ``device="meta"``).

Tolerance: float32 results may differ from torch's by rounding when the same math is written in
another order (``b1 * m + (1 - b1) * g`` instead of ``m.lerp_(g, 1 - b1)``), so float32 runs allow
``1e-6 + 1e-5 * |p|``; float64 runs (hidden tests) allow 1e-6 absolute.

Your optimizer and torch's are driven by the same scenario, ``tests/scenarios/optim.py`` (in
grading too, it runs here and drives your optimizer call by call: see ``tests/boundary.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import adapters
from tests.scenarios import optim as scenario
from tests.scenarios.optim import SHAPES, Problem, Trajectory

OPTIMIZERS: dict[
    str, tuple[Callable[[], type[torch.optim.Optimizer]], type[torch.optim.Optimizer]]
] = {
    "sgd": (adapters.get_sgd_cls, torch.optim.SGD),
    "adagrad": (adapters.get_adagrad_cls, torch.optim.Adagrad),
    "rmsprop": (adapters.get_rmsprop_cls, torch.optim.RMSprop),
    "adam": (adapters.get_adam_cls, torch.optim.Adam),
    "adamw": (adapters.get_adamw_cls, torch.optim.AdamW),
}

TOLERANCES = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=0.0, atol=1e-6)}


def describe(name: str, kwargs: dict) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{OPTIMIZERS[name][1].__name__}({args})"


def assert_stepped_like_torch(name: str, kwargs: dict, problem: Problem, ours: Trajectory, steps: int, **driving) -> None:
    """Evidence that step() did the work (a step that changes nothing leaves every gradient and every
    storage alone, trivially): after ``steps`` steps the parameters are where torch.optim's are."""
    ref = scenario.trajectory(OPTIMIZERS[name][1], problem, kwargs, steps, {steps}, **driving)
    for k, theirs in ref.params[steps].items():
        torch.testing.assert_close(ours.params[steps][k], theirs, **TOLERANCES[theirs.dtype], msg=lambda m, k=k: (
            f"{describe(name, kwargs)}: after {steps} steps, parameter {k!r} is not where torch.optim's is "
            f"(did step() update it by the documented amount?):\n{m}"))


def compare_with_torch(
    name: str,
    kwargs: dict,
    steps: int,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    groups: list[dict] | None = None,
    shapes: dict[str, tuple[int, ...]] = SHAPES,
    no_grad: frozenset[str] = frozenset(),
    every: int = 100,
    zero_grad_in_place: bool = False,
    lr_schedule: list[float] | None = None,
    first_grad: dict[str, int] | None = None,
    hint: str = "Compare your update with the formula in the class docstring, term by term.",
) -> tuple[Trajectory, Trajectory]:
    """Run ours and torch's optimizer on the same problem; fail at the first checkpoint where they differ.

    Parameters named in ``no_grad`` never get a gradient (their ``.grad`` stays None);
    ``zero_grad_in_place``, ``lr_schedule`` and ``first_grad`` drive both as
    ``scenario.trajectory`` says. ``hint`` ends the failure message. Returns both trajectories
    (ours, torch's) for further checks.
    """
    problem = Problem.make(seed, steps, dtype, shapes)
    checkpoints = {c for c in {1, 2, 10, steps} | set(range(every, steps, every)) if c <= steps}
    if (
        first_grad
    ):  # right after each late parameter's first steps, where a wrong step count shows most
        checkpoints |= {
            c for first in first_grad.values() for c in (first + 1, first + 2) if c <= steps
        }
    driving = dict(
        groups=groups, no_grad=no_grad, zero_grad_in_place=zero_grad_in_place,
        lr_schedule=lr_schedule, first_grad=first_grad,
    )
    ours = scenario.trajectory(OPTIMIZERS[name][0](), problem, kwargs, steps, checkpoints, **driving)
    ref = scenario.trajectory(OPTIMIZERS[name][1], problem, kwargs, steps, checkpoints, **driving)
    tol = TOLERANCES[dtype]
    for step in sorted(checkpoints):
        for k in ref.params[step]:
            a, b = ours.params[step][k], ref.params[step][k]
            if not torch.allclose(a, b, **tol):
                diff = (a - b).abs()
                i = tuple(int(j) for j in torch.nonzero(diff == diff.max())[0])
                pytest.fail(
                    f"{describe(name, kwargs)} on {dtype} (seed {seed}): after step {step}, parameter {k!r} "
                    f"drifted from torch.optim by {diff.max().item():.3g} (tolerance {tol}); at index {i} "
                    f"ours={a[i].item():.9g}, torch={b[i].item():.9g}. {hint}",
                    pytrace=False,
                )
    return ours, ref


# (optimizer, kwargs, steps). Every optimizer runs 1000 steps in a setting that exercises every
# term of its update; shorter runs cover its defaults and the other hyperparameters.
MATCH_CASES = [
    ("sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1}, 1000),
    ("sgd", {}, 200),
    ("sgd", {"lr": 0.1}, 200),
    ("sgd", {"lr": 0.02, "momentum": 0.8, "dampening": 0.3}, 200),
    ("sgd", {"lr": 0.02, "momentum": 0.9, "nesterov": True}, 200),
    (
        "adagrad",
        {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.5, "weight_decay": 0.05},
        1000,
    ),
    ("adagrad", {}, 200),
    ("adagrad", {"lr": 0.1, "eps": 0.1}, 200),
    ("rmsprop", {"lr": 0.003, "alpha": 0.9, "momentum": 0.9, "weight_decay": 0.05}, 1000),
    ("rmsprop", {}, 200),
    ("rmsprop", {"lr": 0.01, "eps": 0.1}, 200),
    ("adam", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-3, "weight_decay": 0.1}, 1000),
    ("adam", {}, 200),
    ("adam", {"lr": 0.03, "betas": (0.5, 0.9)}, 200),
    ("adamw", {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-3, "weight_decay": 0.2}, 1000),
    ("adamw", {}, 200),
    ("adamw", {"lr": 0.01, "weight_decay": 0.0}, 200),
]


@pytest.mark.parametrize(
    "name, kwargs, steps",
    [
        pytest.param(
            *c,
            id=f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items()) or 'defaults'}-{c[2]}steps",
        )
        for c in MATCH_CASES
    ],
)
def test_optimizer_matches_torch_reference(name, kwargs, steps):
    """Ours and torch.optim's counterpart, fed the same seeded problem, keep the same parameters."""
    compare_with_torch(name, kwargs, steps)


# (optimizer, kwargs, number of parameter-sized tensors the class docstring says it keeps)
MEMORY_CASES = [
    ("sgd", {}, 0),
    ("sgd", {"momentum": 0.9}, 1),
    ("adagrad", {}, 1),
    ("rmsprop", {}, 1),
    ("rmsprop", {"momentum": 0.9}, 2),
    ("adam", {}, 2),
    ("adamw", {}, 2),
]


#: The default problem plus a 0-d parameter (a learnable scale, a temperature): its state is 0-d too.
WITH_SCALAR = {**SHAPES, "scale": ()}


@pytest.mark.parametrize(
    "name, kwargs, tensors", MEMORY_CASES, ids=[f"{c[0]}-{c[2]}" for c in MEMORY_CASES]
)
def test_optimizer_state_matches_torch_names_values_and_memory(name, kwargs, tensors):
    """After 5 steps, each parameter's state, a 0-d parameter's included, has torch's keys and values and the documented tensor count."""
    ours, ref = compare_with_torch(name, kwargs, steps=5, shapes=WITH_SCALAR)
    for k, param in ours.final.items():
        mine, theirs = ours.state[k], ref.state[k]
        assert set(mine) == set(theirs), (
            f"{describe(name, kwargs)}: state of parameter {k!r} has keys {sorted(mine)}, torch names them {sorted(theirs)}"
        )
        for key, value in theirs.items():
            if key == "step":
                assert float(mine[key]) == float(value), (
                    f"{describe(name, kwargs)}: state['step'] is {mine[key]}, expected 5"
                )
            else:
                torch.testing.assert_close(
                    mine[key],
                    value,
                    rtol=1e-5,
                    atol=1e-6,
                    msg=lambda m, key=key, k=k: f"state[{key!r}] of {k!r}: {m}",
                )
        big = [
            key
            for key, v in mine.items()
            if key != "step" and isinstance(v, torch.Tensor) and v.shape == param.shape
        ]
        assert len(big) == tensors, (
            f"{describe(name, kwargs)} keeps {len(big)} tensors of the shape of {k!r}, "
            f"{tuple(param.shape)} ({big}); it needs exactly {tensors}"
        )


# (optimizer, kwargs): every state buffer that could be p.grad itself, and every term a step
# could add to p.grad in place (weight decay, Nesterov's look-ahead)
IN_PLACE_CASES = [
    ("sgd", {"lr": 0.05, "momentum": 0.9}),
    ("sgd", {"lr": 0.02, "momentum": 0.9, "nesterov": True}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1}),
    (
        "adagrad",
        {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.5, "weight_decay": 0.05},
    ),
    ("rmsprop", {"lr": 0.003, "momentum": 0.9, "weight_decay": 0.05}),
    ("adam", {"lr": 0.01, "weight_decay": 0.1}),
    ("adamw", {"lr": 0.05, "weight_decay": 0.2}),
]
IN_PLACE_IDS = [f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}" for c in IN_PLACE_CASES]


@pytest.mark.parametrize("name, kwargs", IN_PLACE_CASES, ids=IN_PLACE_IDS)
def test_optimizer_matches_torch_when_gradients_are_zeroed_in_place(name, kwargs):
    """With zero_grad(set_to_none=False) and each gradient accumulated into the same .grad tensor, ours still follows torch.optim."""
    compare_with_torch(
        name,
        kwargs,
        steps=30,
        zero_grad_in_place=True,
        hint=(
            "Here every step began with zero_grad(set_to_none=False), which zeroes p.grad in place, and the "
            "new gradient was added into that same tensor (as backward() does). A state buffer that *is* "
            "p.grad (e.g. momentum_buffer = grad, without .clone()) is wiped and overwritten by that: "
            "state must hold its own copy."
        ),
    )


@pytest.mark.parametrize("name, kwargs", IN_PLACE_CASES, ids=IN_PLACE_IDS)
def test_optimizer_step_leaves_the_gradient_unchanged(name, kwargs):
    """step() reads p.grad but never writes into it, weight decay and Nesterov momentum included."""
    problem = Problem.make(0, 3, torch.float32)
    ours = scenario.trajectory(OPTIMIZERS[name][0](), problem, kwargs, 3, {3}, watch=True)
    assert not ours.grad_changed, (
        f"{describe(name, kwargs)}: step() changed p.grad of {ours.grad_changed[0][1]!r} at step "
        f"{ours.grad_changed[0][0]}. Compute terms such as grad + weight_decay * p out of place "
        "(grad = grad.add(p, alpha=wd), not grad.add_(...)): the caller may still read the gradient "
        "(logging, clipping, accumulation), and torch.optim leaves it alone."
    )
    assert_stepped_like_torch(name, kwargs, problem, ours, 3)


@pytest.mark.parametrize("name, kwargs", IN_PLACE_CASES, ids=IN_PLACE_IDS)
def test_optimizer_updates_each_parameter_in_place(name, kwargs):
    """step() updates every parameter in place: its data stays in the same memory."""
    problem = Problem.make(0, 3, torch.float32)
    ours = scenario.trajectory(OPTIMIZERS[name][0](), problem, kwargs, 3, {3}, watch=True)
    assert not ours.moved, (
        f"{describe(name, kwargs)}: after step {ours.moved[0][0]}, the data of {ours.moved[0][1]!r} lives in "
        "new memory. Update parameters in place (p.add_, p.addcdiv_, under torch.no_grad()), not with "
        "p.data = ...: views of the parameter, tied weights and anything else holding its storage would "
        "keep the old values."
    )
    assert_stepped_like_torch(name, kwargs, problem, ours, 3)


STATE_PLACEMENTS = [(torch.float64, "cpu"), (torch.bfloat16, "meta")]


@pytest.mark.parametrize(
    "dtype, device", STATE_PLACEMENTS, ids=[f"{str(d)[6:]}-{v}" for d, v in STATE_PLACEMENTS]
)
@pytest.mark.parametrize(
    "name, kwargs, tensors", MEMORY_CASES, ids=[f"{c[0]}-{c[2]}" for c in MEMORY_CASES]
)
def test_optimizer_state_takes_the_parameters_dtype_and_device(
    name, kwargs, tensors, dtype, device
):
    """Every state tensor torch.optim keeps for a parameter, ours keeps with that parameter's shape, dtype and device.

    On ``device="meta"`` tensors have no memory, so any machine can check the device.
    """
    ours, error = scenario.state_placement(OPTIMIZERS[name][0](), kwargs, WITH_SCALAR, dtype, device)
    ref, _ = scenario.state_placement(OPTIMIZERS[name][1], kwargs, WITH_SCALAR, dtype, device)
    for k, theirs in ref.items():
        for key, where in theirs.items():
            if key == "step" or isinstance(where, str):
                continue
            assert ours[k].get(key) == where, (
                f"{describe(name, kwargs)} on {dtype} parameters on {device!r}: state[{key!r}] of {k!r} is "
                f"{ours[k].get(key)} (dtype, device, shape), torch.optim's is {where}. Create state like the "
                "parameter (torch.zeros_like(p)); torch.zeros(p.shape) is fp32 on the CPU whatever p is."
            )
    assert error is None, (
        f"{describe(name, kwargs)} on {dtype} parameters on {device!r}: step() raised {error}"
    )


def warmup_then_cosine(steps: int, warmup: int) -> list[float]:
    """Learning-rate factors: linear warm-up from 0 over ``warmup`` steps, then a cosine decay to 0."""
    return [
        (t + 1) / warmup
        if t < warmup
        else 0.5 * (1 + math.cos(math.pi * (t - warmup) / (steps - warmup)))
        for t in range(steps)
    ]


@pytest.mark.parametrize("name, kwargs", IN_PLACE_CASES, ids=IN_PLACE_IDS)
def test_optimizer_follows_a_learning_rate_schedule_set_on_its_param_groups(name, kwargs):
    """When group["lr"] changes between steps (as an lr scheduler changes it), ours follows torch.optim."""
    compare_with_torch(
        name,
        kwargs,
        steps=40,
        lr_schedule=warmup_then_cosine(40, warmup=10),
        hint=(
            'Here group["lr"] was changed before every step (warm-up, then cosine decay), as '
            "torch.optim.lr_scheduler does. Read lr, and every hyperparameter, from the parameter's group "
            "inside step(), not from values saved in __init__ (self.lr, self.defaults)."
        ),
    )


@pytest.mark.parametrize("name, kwargs", IN_PLACE_CASES, ids=IN_PLACE_IDS)
def test_optimizer_counts_steps_per_parameter_from_its_first_gradient(name, kwargs):
    """A parameter that first gets a gradient at step 16 (a layer unfrozen mid-run) starts its state there, as in torch."""
    compare_with_torch(
        name,
        kwargs,
        steps=30,
        first_grad={"bias": 15},
        hint=(
            "Here 'bias' got no gradient (grad None) during the first 15 steps. Its state, and its step "
            "count t (Adam's bias correction 1 - b^t, AdaGrad's lr_decay), start at its own first gradient: "
            "keep t per parameter in state['step'], not one count for the whole optimizer."
        ),
    )


# (optimizer, bad kwargs, regex the message must match: the keyword and the offending value)
BAD_HYPERPARAMETERS = [
    ("sgd", {"lr": -0.1}, r"lr.*-0\.1"),
    ("sgd", {"momentum": -0.9}, r"momentum.*-0\.9"),
    ("sgd", {"weight_decay": -0.01}, r"weight_decay.*-0\.01"),
    ("sgd", {"dampening": 1.5}, r"dampening.*1\.5"),
    ("sgd", {"nesterov": True}, r"nesterov"),
    ("adagrad", {"lr": -0.1}, r"lr.*-0\.1"),
    ("adagrad", {"lr_decay": -0.5}, r"lr_decay.*-0\.5"),
    ("adagrad", {"weight_decay": -0.01}, r"weight_decay.*-0\.01"),
    ("adagrad", {"initial_accumulator_value": -1.0}, r"initial_accumulator_value.*-1\.0"),
    ("adagrad", {"eps": -1e-10}, r"eps.*-1e-10"),
    ("rmsprop", {"lr": -0.1}, r"lr.*-0\.1"),
    ("rmsprop", {"alpha": -0.5}, r"alpha.*-0\.5"),
    ("rmsprop", {"alpha": 1.0}, r"alpha.*1\.0"),
    ("rmsprop", {"eps": -1e-8}, r"eps.*-1e-08"),
    ("rmsprop", {"weight_decay": -0.01}, r"weight_decay.*-0\.01"),
    ("rmsprop", {"momentum": -0.9}, r"momentum.*-0\.9"),
    ("adam", {"lr": -0.1}, r"lr.*-0\.1"),
    ("adam", {"betas": (1.0, 0.999)}, r"beta.*1\.0"),
    ("adam", {"betas": (0.9, 1.5)}, r"beta.*1\.5"),
    ("adam", {"betas": (-0.1, 0.999)}, r"beta.*-0\.1"),
    ("adam", {"eps": -1e-8}, r"eps.*-1e-08"),
    ("adam", {"weight_decay": -0.01}, r"weight_decay.*-0\.01"),
    ("adamw", {"lr": -0.1}, r"lr.*-0\.1"),
    ("adamw", {"betas": (0.9, 1.0)}, r"beta.*1\.0"),
    ("adamw", {"eps": -1e-8}, r"eps.*-1e-08"),
    ("adamw", {"weight_decay": -0.01}, r"weight_decay.*-0\.01"),
]


@pytest.mark.parametrize(
    "name, kwargs, pattern",
    BAD_HYPERPARAMETERS,
    ids=[f"{c[0]}-{next(iter(c[1]))}={next(iter(c[1].values()))}" for c in BAD_HYPERPARAMETERS],
)
def test_optimizer_rejects_bad_hyperparameter_naming_it(name, kwargs, pattern):
    """A hyperparameter out of range raises ValueError whose message names the keyword and the value."""
    params = [torch.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match=pattern):
        OPTIMIZERS[name][0]()(params, **kwargs)
