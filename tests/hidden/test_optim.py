"""Hidden tests of part 3: float64, other seeds and shapes, param groups, zero and missing gradients,
closures, state_dict round trips and more bad hyperparameters. torch.optim stays the oracle."""

from __future__ import annotations

import pytest
import torch

from tests.test_optim import OPTIMIZERS, Problem, build, compare_with_torch, describe

NAMES = list(OPTIMIZERS)

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
    ours_p, _, _, _ = compare_with_torch(
        name, FULL[name], steps=20, seed=14, shapes=shapes, no_grad=frozenset({"frozen"})
    )
    initial = Problem.make(14, 20, torch.float32, shapes).init["frozen"]
    assert torch.equal(ours_p["frozen"].detach(), initial), (
        f"{describe(name, FULL[name])} changed a parameter whose grad is None; skip such parameters"
    )


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_handles_all_zero_gradients_like_torch(name):
    """A parameter whose gradient is exactly zero moves as torch moves it (weight decay only) and never becomes NaN."""
    ours_cls, torch_cls = OPTIMIZERS[name][0](), OPTIMIZERS[name][1]
    init = torch.linspace(-1, 1, 6)
    ours_p, torch_p = init.clone().requires_grad_(), init.clone().requires_grad_()
    ours, ref = ours_cls([ours_p], **FULL[name]), torch_cls([torch_p], **FULL[name])
    for _ in range(30):
        for p, opt in ((ours_p, ours), (torch_p, ref)):
            p.grad = torch.zeros_like(p)
            opt.step()
    assert not ours_p.isnan().any(), (
        f"{describe(name, FULL[name])} produced NaN from zero gradients (0/0?)"
    )
    torch.testing.assert_close(ours_p.detach(), torch_p.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_step_with_closure_returns_its_loss(name):
    """step(closure) re-evaluates the loss with gradients enabled, steps, and returns that loss."""
    ours_cls, torch_cls = OPTIMIZERS[name][0](), OPTIMIZERS[name][1]
    target = torch.tensor([1.0, -2.0, 3.0])
    results = []
    for cls in (ours_cls, torch_cls):
        p = torch.zeros(3, requires_grad=True)
        opt = cls([p], **FULL[name])

        def closure(p=p, opt=opt):
            opt.zero_grad()
            loss = (p - target).pow(2).sum()
            loss.backward()
            return loss

        with torch.no_grad():
            losses = [opt.step(closure) for _ in range(5)]
        results.append((p.detach(), [float(v.detach()) for v in losses]))
    (ours_p, ours_losses), (torch_p, torch_losses) = results
    assert ours_losses == pytest.approx(torch_losses, rel=1e-5), (
        f"step(closure) returned {ours_losses}, torch {torch_losses}"
    )
    torch.testing.assert_close(ours_p, torch_p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_state_dict_round_trip_resumes_exactly(name):
    """Saving state_dict after k steps and loading it into a fresh optimizer continues bit for bit."""
    cls = OPTIMIZERS[name][0]()
    problem = Problem.make(seed=15, steps=20, dtype=torch.float32)
    straight, resumed = problem.params(), problem.params()
    opt = build(cls, straight, FULL[name], None)
    for t in range(20):
        problem.set_grads(straight, t)
        opt.step()
    opt_a = build(cls, resumed, FULL[name], None)
    for t in range(10):
        problem.set_grads(resumed, t)
        opt_a.step()
    opt_b = build(cls, resumed, FULL[name], None)
    opt_b.load_state_dict(opt_a.state_dict())
    for t in range(10, 20):
        problem.set_grads(resumed, t)
        opt_b.step()
    for k in straight:
        assert torch.equal(straight[k], resumed[k]), (
            f"{describe(name, FULL[name])}: {k!r} differs after resuming from state_dict"
        )


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
        OPTIMIZERS[name][0]()([torch.zeros(2, requires_grad=True)], **kwargs)
