"""Mutants of part 3 (``cs336_assignment/optim.py``): wrong update rules and missing validation."""

from __future__ import annotations

from cs336_staff.mutants import HiddenOnly, Mutant

FILE = "cs336_assignment/optim.py"
TESTS = ("tests/test_optim.py",)

MUTANTS = [
    Mutant(
        name="sgd-momentum-as-ema",
        file=FILE,
        function="SGD.step",
        old="buf.mul_(momentum).add_(grad, alpha=1 - dampening)",
        new="buf.mul_(momentum).add_(grad, alpha=1 - momentum)",
        why="writes momentum as an exponential average (Adam's m) instead of torch's b = mu * b + g",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-weight-decay-ignored",
        file=FILE,
        function="SGD.step",
        old="""
            if weight_decay != 0:
                grad = grad.add(p, alpha=weight_decay)""",
        new="",
        why="accepts weight_decay but never applies it",
        tests=TESTS,
    ),
    Mutant(
        name="adagrad-accumulates-gradient-not-square",
        file=FILE,
        function="AdaGrad.step",
        old='state["sum"].addcmul_(grad, grad, value=1)',
        new='state["sum"].add_(grad.abs())',
        why="accumulates |g| instead of g^2",
        tests=TESTS,
    ),
    Mutant(
        name="adagrad-eps-inside-sqrt",
        file=FILE,
        function="AdaGrad.step",
        old='std = state["sum"].sqrt().add_(eps)',
        new='std = state["sum"].add(eps).sqrt()',
        why="puts eps under the square root (torch adds it after)",
        tests=TESTS,
    ),
    Mutant(
        name="adagrad-ignores-initial-accumulator",
        file=FILE,
        function="AdaGrad.step",
        old='state["sum"] = torch.full_like(p, group["initial_accumulator_value"])',
        new='state["sum"] = torch.zeros_like(p)',
        why="starts the accumulator at 0 whatever initial_accumulator_value says",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-eps-inside-sqrt",
        file=FILE,
        function="RMSProp.step",
        old="avg = square_avg.sqrt().add_(eps)",
        new="avg = square_avg.add(eps).sqrt()",
        why="puts eps under the square root (torch adds it after)",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-alpha-swapped",
        file=FILE,
        function="RMSProp.step",
        old="square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)",
        new="square_avg.mul_(1 - alpha).addcmul_(grad, grad, value=alpha)",
        why="weights the new squared gradient by alpha (0.99) instead of 1 - alpha",
        tests=TESTS,
    ),
    Mutant(
        name="adam-no-bias-correction",
        file=FILE,
        function="Adam.step",
        old="""                step_size = lr / (1 - beta1**t)
                denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)""",
        new="""                step_size = lr
                denom = exp_avg_sq.sqrt().add_(eps)""",
        why="forgets the bias correction of m and v",
        tests=TESTS,
    ),
    Mutant(
        name="adam-eps-inside-bias-corrected-sqrt",
        file=FILE,
        function="Adam.step",
        old="denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)",
        new="denom = (exp_avg_sq.sqrt().add_(eps) / math.sqrt(1 - beta2**t))",
        why="adds eps before dividing by sqrt(1 - b2^t), so eps is scaled up in early steps",
        tests=TESTS,
    ),
    Mutant(
        name="adamw-decay-without-lr",
        file=FILE,
        function="Adam.step",
        old="p.mul_(1 - lr * weight_decay)",
        new="p.mul_(1 - weight_decay)",
        why="decays by weight_decay per step instead of lr * weight_decay",
        tests=TESTS,
    ),
    Mutant(
        name="adamw-decay-after-update",
        file=FILE,
        function="Adam.step",
        old="""
            if weight_decay != 0:
                if self.decoupled_weight_decay:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(p, alpha=weight_decay)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = lr / (1 - beta1**t)
            denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)""",
        new="""
            if weight_decay != 0:
                if not self.decoupled_weight_decay:
                    grad = grad.add(p, alpha=weight_decay)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = lr / (1 - beta1**t)
            denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)
            if self.decoupled_weight_decay:
                p.mul_(1 - lr * weight_decay)""",
        why="applies the decoupled decay after the Adam update instead of before it",
        tests=TESTS,
    ),
    Mutant(
        name="adamw-coupled-decay",
        file=FILE,
        function="Adam.step",
        old="self.decoupled_weight_decay",
        new="False",
        why="implements AdamW as Adam with an L2 penalty added to the gradient",
        tests=TESTS,
    ),
    Mutant(
        name="unit-interval-accepts-one",
        file="cs336_assignment/validation.py",
        function="check_unit_interval",
        old="""    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {name}={value!r}")""",
        new="""    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {name}={value!r}")""",
        why="accepts betas[i] = 1 or alpha = 1 (the bound written <= 1): Adam's bias correction then divides by zero, RMSProp never updates v",
        tests=TESTS,
    ),
    Mutant(
        name="optimizers-skip-eps-validation",
        file=FILE,
        function="Adam.__init__",
        old="check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)",
        new="check_nonnegative(lr=lr, weight_decay=weight_decay)",
        why="forgets to validate eps in Adam/AdamW",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-momentum-buffer-aliases-grad",
        file=FILE,
        function="SGD.step",
        old='buf = state["momentum_buffer"] = grad.detach().clone()',
        new='buf = state["momentum_buffer"] = grad.detach()',
        why=(
            "starts the momentum buffer as p.grad itself (no clone): without weight decay the buffer is the "
            "gradient tensor, so zero_grad(set_to_none=False) and the next backward overwrite the momentum"
        ),
        tests=TESTS,
    ),
    Mutant(
        name="sgd-weight-decay-in-place-on-grad",
        file=FILE,
        function="SGD.step",
        old="grad = grad.add(p, alpha=weight_decay)",
        new="grad = grad.add_(p, alpha=weight_decay)",
        why="adds the weight-decay term to p.grad in place, so step() changes the gradient it was given",
        tests=TESTS,
    ),
    Mutant(
        name="adam-l2-decay-in-place-on-grad",
        file=FILE,
        function="Adam.step",
        old="grad = grad.add(p, alpha=weight_decay)",
        new="grad = grad.add_(p, alpha=weight_decay)",
        why="adds Adam's L2 term to p.grad in place, so step() changes the gradient it was given",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-nesterov-in-place-on-grad",
        file=FILE,
        function="SGD.step",
        old="grad = grad.add(buf, alpha=momentum) if nesterov else buf",
        new="grad = grad.add_(buf, alpha=momentum) if nesterov else buf",
        why="adds Nesterov's look-ahead to p.grad in place, so step() changes the gradient it was given",
        tests=TESTS,
    ),
    Mutant(
        name="adam-state-on-default-dtype-and-device",
        file=FILE,
        function="Adam.step",
        old="""                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)""",
        new="""                    state["exp_avg"] = torch.zeros(p.shape)
                    state["exp_avg_sq"] = torch.zeros(p.shape)""",
        why="creates the moments with torch.zeros(p.shape): fp32 on the CPU whatever the parameter's dtype and device",
        tests=TESTS,
    ),
    Mutant(
        name="adagrad-sum-on-default-dtype",
        file=FILE,
        function="AdaGrad.step",
        old='state["sum"] = torch.full_like(p, group["initial_accumulator_value"])',
        new='state["sum"] = torch.full(p.shape, group["initial_accumulator_value"], device=p.device)',
        why="creates the accumulator with torch.full(p.shape, ...): fp32 whatever the parameter's dtype",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-state-kept-in-fp32",
        file=FILE,
        function="RMSProp.step",
        old='state["square_avg"] = torch.zeros_like(p)',
        new='state["square_avg"] = torch.zeros_like(p, dtype=torch.float32)',
        why="keeps the running average in fp32 'for stability' whatever the parameter's dtype (torch keeps the parameter's)",
        tests=TESTS,
    ),
    Mutant(
        name="adam-state-breaks-on-scalar-parameters",
        file=FILE,
        function="Adam.step",
        old="""                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)""",
        new="""                    state["exp_avg"] = torch.zeros(*p.shape, dtype=p.dtype, device=p.device)
                    state["exp_avg_sq"] = torch.zeros(*p.shape, dtype=p.dtype, device=p.device)""",
        why="unpacks the shape into torch.zeros(*p.shape, ...), which fails on a 0-d parameter (torch.zeros() has no size)",
        tests=TESTS,
    ),
    Mutant(
        name="adam-lr-from-constructor",
        file=FILE,
        function="Adam.step",
        old='lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]',
        new='lr, (beta1, beta2), eps = self.defaults["lr"], group["betas"], group["eps"]',
        why="reads lr from the constructor's defaults instead of the param group, so a scheduler setting group['lr'] has no effect",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-rebinds-parameter-data",
        file=FILE,
        function="SGD.step",
        old="p.add_(grad, alpha=-lr)",
        new="p.data = p.add(grad, alpha=-lr)",
        why="assigns a new tensor to p.data instead of updating p in place: the values match, but the parameter moves to new memory (views, tied weights and anything holding the old storage go stale)",
        tests=TESTS,
    ),
    Mutant(
        name="adam-one-step-count-for-all-parameters",
        file=FILE,
        function="Adam.step",
        old="""                state["step"] += 1
                t = state["step"]""",
        new="""                state["step"] += 1
                t = max(s["step"] for s in self.state.values())""",
        why=(
            "uses one step count for every parameter (the steps taken so far), so a parameter whose gradients "
            "start late (unfrozen mid-run) gets the bias correction of an old one and its first steps are far too small"
        ),
        tests=TESTS,
    ),
    Mutant(
        name="adagrad-lr-decay-counts-optimizer-steps",
        file=FILE,
        function="AdaGrad.step",
        old='clr = lr / (1 + (state["step"] - 1) * lr_decay)',
        new='clr = lr / (1 + (max(s["step"] for s in self.state.values()) - 1) * lr_decay)',
        why="decays the learning rate by the optimizer's step count instead of the parameter's own",
        tests=TESTS,
    ),
    # issue 21's kinds: eps at the edges of magnitude, g^2 in half precision, NaN hyperparameters, resumption
    Mutant(
        name="adam-eps-inside-sqrt",
        file=FILE,
        function="Adam.step",
        old="denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)",
        new="denom = (exp_avg_sq / (1 - beta2**t) + eps).sqrt()",
        why="adds eps under the square root, sqrt(v_hat + eps): invisible for ordinary gradients, off by orders of magnitude for tiny ones",
        tests=TESTS,
    ),
    Mutant(
        name="adam-forgets-eps",
        file=FILE,
        function="Adam.step",
        old="denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)",
        new="denom = exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)",
        why="leaves eps out because gradients are 'never exactly zero': a zero gradient gives 0/0 = NaN",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-forgets-eps",
        file=FILE,
        function="RMSProp.step",
        old="avg = square_avg.sqrt().add_(eps)",
        new="avg = square_avg.sqrt()",
        why="divides by sqrt(v) alone: the first all-zero gradient makes every coordinate 0/0 = NaN",
        tests=TESTS,
    ),
    Mutant(
        name="adam-squares-gradient-in-half",
        file=FILE,
        function="Adam.step",
        old="exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)",
        new="exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)",
        why="forms g * g on its own before scaling it: in float16 any |g| > 256 squares to inf, so v and the step break",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-squares-gradient-in-half",
        file=FILE,
        function="RMSProp.step",
        old="square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)",
        new="square_avg.mul_(alpha).add_(grad**2 * (1 - alpha))",
        why="writes (1 - alpha) * g^2 as grad**2 * (1 - alpha): the square overflows float16 before the scale can shrink it",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-sign-check-lets-nan-through",
        file=FILE,
        function="SGD.__init__",
        old="check_nonnegative(lr=lr, momentum=momentum, weight_decay=weight_decay)",
        new="""
for name, value in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {name}={value!r}")""",
        why="writes the range check as `if value < 0`, which NaN never trips (every comparison with NaN is False)",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-dampening-asserted",
        file=FILE,
        function="SGD.__init__",
        old="""
if not 0.0 <= dampening <= 1.0:
    raise ValueError(f"dampening must be in [0, 1], got dampening={dampening!r}")""",
        new='assert 0.0 <= dampening <= 1.0, f"dampening must be in [0, 1], got dampening={dampening!r}"',
        why="checks dampening with assert: an AssertionError (and no check at all under python -O) where the "
        "docstring promises the ValueError a caller catches, though the words are right",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-nesterov-check-is-a-type-error",
        file=FILE,
        function="SGD.__init__",
        old="""
if nesterov and (momentum <= 0.0 or dampening != 0.0):
    raise ValueError(f"nesterov=True needs momentum > 0 and dampening == 0, got momentum={momentum!r}, "
                     f"dampening={dampening!r}")""",
        new="""
if nesterov and (momentum <= 0.0 or dampening != 0.0):
    raise TypeError(f"nesterov=True needs momentum > 0 and dampening == 0, got momentum={momentum!r}, "
                    f"dampening={dampening!r}")""",
        why="reports a combination of arguments that cannot go together as a TypeError (as Python does for a bad "
        "call), where the docstring promises ValueError: a caller's `except ValueError` misses it",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-alpha-check-lets-nan-through",
        file=FILE,
        function="RMSProp.__init__",
        old='check_unit_interval("alpha", alpha)',
        new="""
if alpha < 0 or alpha >= 1:
    raise ValueError(f"alpha must be in [0, 1), got alpha={alpha!r}")""",
        why="rejects values outside [0, 1) by two comparisons that are both False for NaN, so alpha=nan is accepted",
        tests=TESTS,
    ),
    Mutant(
        name="sgd-momentum-kept-outside-state",
        file=FILE,
        function="SGD.step",
        old="state = self.state[p]",
        new='state = self.__dict__.setdefault("momentum_buffers", {}).setdefault(p, {})',
        why="keeps the momentum buffers in a dict of its own on the optimizer: state_dict() does not save them, so a resumed run restarts momentum",
        tests=TESTS,
    ),
    Mutant(
        name="rmsprop-state-kept-outside-state",
        file=FILE,
        function="RMSProp.step",
        old="state = self.state[p]",
        new='state = self.__dict__.setdefault("averages", {}).setdefault(p, {})',
        why="keeps square_avg and the momentum buffer in a dict of its own: a run resumed from state_dict() starts them again at zero",
        tests=TESTS,
    ),
    Mutant(
        name="adam-bias-corrects-v-before-the-root",
        file=FILE,
        function="Adam.step",
        old="denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2**t)).add_(eps)",
        new="denom = (exp_avg_sq / (1 - beta2**t)).sqrt().add_(eps)",
        why="computes v_hat = v / (1 - b2^t) as a tensor, then its root: at t = 1 that is g^2, inf in float16 for |g| > 256",
        tests=TESTS,
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
HIDDEN_ONLY = [
    # a documented error on an input the public tests do not try
    HiddenOnly(
        name="optim-adam-beta2-checked-with-comparisons",
        file=FILE,
        function="Adam.__init__",
        old='check_unit_interval("betas[1]", betas[1])',
        new="""if betas[1] < 0 or betas[1] >= 1:
    raise ValueError(f"betas[1] must be in [0, 1), got betas[1]={betas[1]!r}")""",
        why="checks beta2 by hand with `< 0 or >= 1`, the NaN trap the docstring names: betas=(0.9, nan) "
        "builds an optimizer whose every step is NaN (the public tests give NaN to beta1, and 1.5, 1.0 "
        "and -0.5 to beta2)",
        hidden=(
            "tests/hidden/test_optim.py::test_optimizer_rejects_nan_and_edge_hyperparameters[adam-beta.*nan]",
        ),
    ),
]
