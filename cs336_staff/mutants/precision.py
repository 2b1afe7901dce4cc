"""Bug zoo of part 8, precision: wrong fp8 scaling, casts, autocast steps and loss scalers."""

from __future__ import annotations

from cs336_staff.mutants import Control, HiddenOnly, Mutant

PKG = "cs336_assignment/precision"
_TESTS = ("tests/test_precision.py",)

MUTANTS = [
    Mutant(
        name="precision-e4m3fn-max-as-ieee",
        file=f"{PKG}/formats.py",
        function="dtype_info",
        old="        largest = (2.0 - 2.0 ** -(m - 1)) * 2.0 ** (2**e - 1 - bias)",
        new="        largest = (2.0 - 2.0**-m) * 2.0 ** (2**e - 2 - bias)",
        why="treats e4m3fn like an IEEE format with infinities (max 240 instead of 448)",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-scale-inverted",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="        scale = amax.clamp(min=AMAX_FLOOR) / fp8_max",
        new="        scale = fp8_max / amax.clamp(min=AMAX_FLOOR)",
        why="returns the encoding scale (max / amax) where the decode scale (amax / max) is expected",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-no-clamp-before-cast",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="    x_fp8 = (x32 / scale).clamp(-fp8_max, fp8_max).to(dtype)",
        new="    x_fp8 = (x32 / scale).to(dtype)",
        why="relies on the cast to saturate; e5m2 overflows to inf (and older torch gives NaN)",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-rowwise-amax-wrong-axis",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="            amax = x32.abs().amax(dim=-1, keepdim=True)",
        new="            amax = x32.abs().amax(dim=0, keepdim=True)",
        why="takes the row-wise amax over the rows (per column) instead of along each row",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-zero-amax-not-floored",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="        scale = amax.clamp(min=AMAX_FLOOR) / fp8_max",
        new="        scale = amax / fp8_max",
        why="forgets the all-zero tensor: scale 0 and 0 / 0 = NaN",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-autocast-loss-not-fp32",
        file=f"{PKG}/mixed.py",
        function="mixed_precision_step",
        old="    loss = loss_fn(out.float(), y)\n    loss.backward()",
        new="    loss = loss_fn(out, y)\n    loss.backward()",
        why="computes the loss on the bf16 autocast output, so the loss (and its gradient) is bf16",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-no-autocast",
        file=f"{PKG}/mixed.py",
        function="mixed_precision_step",
        old="    with torch.autocast(device_type=params[0].device.type, dtype=dtype):\n        out = model(x)",
        new="    with torch.autocast(device_type=params[0].device.type, dtype=dtype, enabled=False):\n        out = model(x)",
        why="runs the forward in fp32, so nothing is computed in low precision",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-steps-on-inf",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old='        if state["found_inf"]:\n            return None\n        return optimizer.step()',
        new="        return optimizer.step()",
        why="takes the optimizer step even when a gradient overflowed, poisoning the weights with inf/NaN",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-never-backs-off",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.update",
        old="            self._scale = _fp32(self._scale * self.backoff_factor)",
        new="            self._scale = _fp32(self._scale)",
        why="skips the step on overflow but forgets to halve the scale, so it overflows again",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-tracker-not-reset-after-growth",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.update",
        old="""
            if self._growth_tracker == self.growth_interval:
                grown = _fp32(self._scale * self.growth_factor)
                if grown != float("inf"):
                    self._scale = grown
                self._growth_tracker = 0""",
        new="""
            if self._growth_tracker == self.growth_interval:
                grown = _fp32(self._scale * self.growth_factor)
                if grown != float("inf"):
                    self._scale = grown""",
        why="does not restart the count of clean steps after growing the scale",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-matmul-scale-b-not-transposed",
        file=f"{PKG}/scaled_matmul.py",
        function="fp8_matmul",
        old='    scale_b = scale_bt.t() if granularity == "row" else scale_bt  # () or (1, N)',
        new="    scale_b = scale_bt  # () or (1, N)",
        why="passes B's per-column scales as an (N, 1) column instead of a (1, N) row",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-matmul-dequantises",
        file=f"{PKG}/scaled_matmul.py",
        function="fp8_matmul",
        old="    return torch._scaled_mm(a_fp8, b_fp8, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)",
        new=(  # scaled_matmul.py does not import from_fp8: the mutant brings it, as a student would
            "    from cs336_assignment.precision.fp8 import from_fp8\n"
            "    return (from_fp8(a_fp8, scale_a) @ from_fp8(b_fp8, scale_b)).to(out_dtype)"
        ),
        why=(
            "dequantises both operands and multiplies in fp32: the same numbers on a CPU, but no fp8 kernel "
            "ever runs (on an H100 it is an fp32 matmul, slower than bf16)"
        ),
        tests=_TESTS,
    ),
    Mutant(
        name="precision-step-returns-attached-loss",
        file=f"{PKG}/mixed.py",
        function="mixed_precision_step",
        old="    return loss.detach()\n",
        new="    return loss\n",
        why="returns the loss with its graph, so a caller that keeps the losses (a list for plotting) keeps every step's activations alive",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-step-accumulates-gradients",
        file=f"{PKG}/mixed.py",
        function="mixed_precision_step",
        old="    optimizer.zero_grad(set_to_none=True)\n",
        new="",
        why="never zeroes the gradients, so each step adds this batch's gradient to all the previous ones",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-matmul-scales-after-kernel",
        file=f"{PKG}/scaled_matmul.py",
        function="fp8_matmul",
        old="    return torch._scaled_mm(a_fp8, b_fp8, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)",
        new=(
            "    one = torch.ones((), device=a.device)\n"
            "    out = torch._scaled_mm(a_fp8, b_fp8, scale_a=one, scale_b=one, out_dtype=torch.float32)\n"
            "    return (out * scale_a * scale_b).to(out_dtype)"
        ),
        why=(
            "runs the fp8 kernel with unit scales and applies the scales afterwards, in a separate fp32 pass: "
            "an fp32 product in memory and a rounding that differs from the kernel's own epilogue"
        ),
        tests=_TESTS,
    ),
    Mutant(
        name="precision-to-fp8-scales-input-in-place",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="    x_fp8 = (x32 / scale).clamp(-fp8_max, fp8_max).to(dtype)",
        new="    x_fp8 = x32.div_(scale).clamp_(-fp8_max, fp8_max).to(dtype)",
        why="divides in place to save memory; for an fp32 contiguous input x.float() is x itself, so the caller's tensor is overwritten",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-tracker-not-reset-on-backoff",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.update",
        old="""            self._scale = _fp32(self._scale * self.backoff_factor)
            self._growth_tracker = 0""",
        new="""            self._scale = _fp32(self._scale * self.backoff_factor)""",
        why="keeps counting clean steps across an overflow, so the scale grows again sooner than growth_interval clean steps",
        tests=_TESTS,
    ),
    # Issue 21 kinds: fp8 scaling at zero/tiny/huge magnitudes, dtypes of intermediates, devices, error types.
    Mutant(
        name="precision-fp8-floor-on-scale",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="        scale = amax.clamp(min=AMAX_FLOOR) / fp8_max",
        new="        scale = (amax / fp8_max).clamp(min=AMAX_FLOOR)",
        why="floors the scale instead of amax: an all-zero or tiny tensor is scaled by 1e-12, fp8_max times the documented scale",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-floor-added-to-amax",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="        scale = amax.clamp(min=AMAX_FLOOR) / fp8_max",
        new="        scale = (amax + AMAX_FLOOR) / fp8_max",
        why="adds the floor to amax like an epsilon: a tiny amax is shifted rather than floored, and every scale is off",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-amax-in-input-dtype",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="            amax = x32.abs().amax()\n",
        new="            amax = x.abs().amax()\n",
        why="takes the per-tensor amax of the input as given: a bf16 input gets a bf16 scale, not the documented fp32 one",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-scales-in-loss-dtype",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.scale",
        old="        return loss * torch.tensor(self._scale, dtype=torch.float32, device=loss.device)",
        new="        return loss * self._scale",
        why="multiplies by a Python float, which keeps the loss's dtype: an fp16 loss times 2**16 overflows to inf",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-scale-tensor-in-loss-dtype",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.scale",
        old="        return loss * torch.tensor(self._scale, dtype=torch.float32, device=loss.device)",
        new="        return loss * torch.tensor(self._scale, dtype=loss.dtype, device=loss.device)",
        why="makes S in the loss's dtype: for a half loss the product is half and overflows where fp32 would not",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-scale-through-item",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.scale",
        old="        return loss * torch.tensor(self._scale, dtype=torch.float32, device=loss.device)",
        new="        return torch.tensor(loss.item() * self._scale, dtype=torch.float32, requires_grad=loss.requires_grad)",
        why="scales the loss's value as a Python number: a new CPU tensor, off the loss's device and cut from its graph",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-update-without-step",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.update",
        old=(
            "        if not self._per_optimizer:\n            raise RuntimeError(\n"
            '                "No inf checks were recorded prior to update(); call step(optimizer) first"\n'
            "            )\n"
        ),
        new="",
        why="treats update() before any step as a clean step instead of the misuse GradScaler reports (RuntimeError)",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-steps-twice",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old=(
            '        if state is not None and state["stepped"]:\n'
            '            raise RuntimeError("step() has already been called since the last update()")\n'
        ),
        new="",
        why="lets step() run twice before update(), stepping the optimizer twice on one batch",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-from-fp8-decodes-in-target-dtype",
        file=f"{PKG}/fp8.py",
        function="from_fp8",
        old="    return (x_fp8.float() * scale.float()).to(dtype)",
        new="    return x_fp8.to(dtype) * scale.to(dtype)",
        why="multiplies in the output dtype: the scale is rounded to bf16 first and the product rounded again",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-step-squeezes-the-output",
        file=f"{PKG}/mixed.py",
        function="mixed_precision_step",
        old="    loss = loss_fn(out.float(), y)\n",
        new="    loss = loss_fn(out.float().squeeze(), y)\n",
        why="squeezes the model's output (meant for a trailing size-one dimension): a batch of one loses its batch dimension",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-scaler-one-inf-skips-every-optimizer",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old='        if state["found_inf"]:\n            return None\n',
        new='        if any(s["found_inf"] for s in self._per_optimizer.values()):\n            return None\n',
        why="skips an optimizer's step when any optimizer saw an inf/NaN, though only the one whose gradients overflowed must skip",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-to-fp8-rejects-only-inf",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="not torch.isfinite(x32).all()",
        new="torch.isinf(x32).any()",
        why="checks for overflow with isinf, the word the error names first: a NaN input slips through and every value and the scale come back NaN",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-to-fp8-rejects-only-fp8-input",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old="not x.is_floating_point() or x.dtype in FP8_DTYPES",
        new="x.dtype in FP8_DTYPES",
        why="guards only against quantising twice: integer token ids or counts are cast to fp8 without a word, where the docstring promises a ValueError",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-to-fp8-scale-shape-left-to-torch",
        file=f"{PKG}/fp8.py",
        function="to_fp8",
        old=(
            "        if scale.numel() != (1 if granularity == 'tensor' else x.shape[0]):\n"
            '            raise ValueError(f"to_fp8(granularity={granularity!r}) needs a scale of shape {expected}, "\n'
            '                             f"got {tuple(scale.shape)}")'
        ),
        new="",
        why="lets reshape reject a scale of the wrong size: torch's RuntimeError where the docstring promises a ValueError naming both shapes",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-from-fp8-broadcast-left-to-torch",
        file=f"{PKG}/fp8.py",
        function="from_fp8",
        old=(
            "    if not broadcasts:\n"
            '        raise ValueError(f"from_fp8: a scale of shape {tuple(scale.shape)} does not broadcast against x_fp8 of "\n'
            '                         f"shape {tuple(x_fp8.shape)}; pass the scale to_fp8 returned with it")'
        ),
        new="",
        why="leaves a scale that does not fit to the multiplication: torch's RuntimeError about broadcasting, not the documented ValueError",
        tests=_TESTS,
    ),
    Mutant(
        name="precision-fp8-matmul-out-dtype-left-to-torch",
        file=f"{PKG}/scaled_matmul.py",
        function="fp8_matmul",
        old=(
            "    if out_dtype not in (torch.bfloat16, torch.float16, torch.float32):\n"
            '        raise ValueError(f"fp8_matmul: out_dtype must be bfloat16, float16 or float32, got {out_dtype!r}")'
        ),
        new="",
        why="passes out_dtype straight to torch._scaled_mm, which decides on its own what it accepts (its own error, or an fp64 result on some builds)",
        tests=_TESTS,
    ),
]

# Documented return values (issue 31): step() hands back what optimizer.step() returned.
MUTANTS += [
    Mutant(
        name="loss-scaler-step-drops-the-optimizers-return-value",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old="        return optimizer.step()\n",
        new="        optimizer.step()\n",
        why="runs optimizer.step() but returns None: a closure's loss (or any optimizer's result) is lost",
        tests=_TESTS,
    ),
    Mutant(
        name="loss-scaler-step-returns-whether-it-stepped",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old="""        if state["found_inf"]:
            return None
        return optimizer.step()
""",
        new="""        if state["found_inf"]:
            return False
        optimizer.step()
        return True
""",
        why="returns whether the step ran (True/False) instead of the optimizer's result, or None when skipped",
        tests=_TESTS,
    ),
]

# Controls (issue 31): step() returns the optimizer's result, or None when skipped, another way.
CONTROLS = [
    Control(
        name="loss-scaler-control-step-conditional-expression",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old="""        if state["found_inf"]:
            return None
        return optimizer.step()
""",
        new="""        result = None if state["found_inf"] else optimizer.step()
        return result
""",
        why="picks the result with a conditional expression instead of an early `return None`",
    ),
    Control(
        name="loss-scaler-control-step-falls-through-to-none",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.step",
        old="""        if state["found_inf"]:
            return None
        return optimizer.step()
""",
        new="""        if not state["found_inf"]:
            return optimizer.step()
        return None
""",
        why="returns optimizer.step() inside `if not found_inf` and None after it",
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
SCALE_UPDATE = """if found_inf:
    self._scale = _fp32(self._scale * self.backoff_factor)
    self._growth_tracker = 0
else:
    self._growth_tracker += 1
    if self._growth_tracker == self.growth_interval:
        grown = _fp32(self._scale * self.growth_factor)
        if grown != float("inf"):
            self._scale = grown
        self._growth_tracker = 0"""
ODD_FACTORS = "tests/hidden/test_precision.py::test_loss_scaler_matches_grad_scaler_odd_factors_and_fp32_ceiling"

HIDDEN_ONLY = [
    # settings the public tests do not use
    HiddenOnly(
        name="precision-loss-scale-kept-in-float64",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.update",
        old=SCALE_UPDATE,
        new=SCALE_UPDATE.replace(
            "_fp32(self._scale * self.backoff_factor)", "self._scale * self.backoff_factor"
        ).replace("_fp32(self._scale * self.growth_factor)", "self._scale * self.growth_factor"),
        why="keeps the scale as a Python float: with factors that are not powers of two it drifts from "
        "GradScaler's fp32 scale, and it grows past fp32's largest value (the public tests use 2 and "
        "0.5 from small scales, which fp32 holds exactly)",
        hidden=(ODD_FACTORS + "[odd-factors]", ODD_FACTORS + "[fp32-ceiling]"),
    ),
    HiddenOnly(
        name="precision-loss-scale-grows-past-fp32",
        file=f"{PKG}/loss_scaling.py",
        function="DynamicLossScaler.update",
        old="""if grown != float("inf"):
    self._scale = grown""",
        new="self._scale = grown",
        why="grows the scale whatever it becomes: past fp32's largest value it is inf, and every later "
        "step is skipped as an overflow (the public tests never grow a scale that far)",
        hidden=(ODD_FACTORS + "[fp32-ceiling]",),
    ),
]
