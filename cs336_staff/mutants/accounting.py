"""Bug zoo for resource accounting: wrong counters a student might write, each caught by the public tests."""

from __future__ import annotations

from cs336_staff.mutants import Control, HiddenOnly, Mutant

FLOPS = "cs336_assignment/accounting/flops.py"
FLOP_COUNTER = "cs336_assignment/accounting/flop_counter.py"
MEMORY = "cs336_assignment/accounting/memory.py"
MEASURED_MEMORY = "cs336_assignment/accounting/measured_memory.py"
NAPKIN = "cs336_assignment/accounting/napkin.py"
TESTS = ("tests/test_accounting.py",)

MUTANTS = [
    Mutant(
        name="accounting-matmul-flops-mkn",
        file=FLOPS,
        function="matmul_flops",
        old="    return 2 * m * k * n\n",
        new="    return m * k * n\n",
        why="counts a multiply-add as one FLOP instead of two",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-count-flops-ignores-backward",
        file=FLOP_COUNTER,
        function="count_flops",
        old="out.sum().backward()",
        new="total = counter.total\nout.sum().backward()\nreturn total",
        why="reads the counter before the backward ran, so only the forward is counted",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-needless-input-gradient",
        file=FLOPS,
        function="linear_chain_flops",
        old="linear_backward_flops(num_tokens, d_in, d_out, input_requires_grad or i > 0)",
        new="linear_backward_flops(num_tokens, d_in, d_out, True)",
        why="assumes every layer computes dx, including the first one fed with data (3x forward, the 6ND rule)",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-bmm-ignores-batch",
        file=FLOP_COUNTER,
        function="matmul_family_flops",
        old="    return (batch[0] if batch else 1) * matmul_flops(m, k, n)\n",
        new="    return matmul_flops(m, k, n)\n",
        why="treats bmm like mm and forgets to multiply by the batch of matrices",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-addmm-not-counted",
        file=FLOP_COUNTER,
        function="matmul_family_flops",
        old="packet in (aten.addmm, aten.baddbmm)",
        new="packet in ()",
        why="counts mm and bmm only, missing the addmm a Linear with bias lowers to",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-memory-forgets-optimizer-state",
        file=MEMORY,
        function="training_memory_bytes",
        old="    return num_params * bytes_per_param(optimizer, precision) + num_activations * bytes_per_activation(precision)\n",
        new=(
            "    return num_params * (bytes_per_param(optimizer, precision) - 4 * optimizer_state_tensors(optimizer))"
            " + num_activations * bytes_per_activation(precision)\n"
        ),
        why="adds up parameters, gradients and activations but forgets the optimizer state",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-adam-one-state",
        file=MEMORY,
        function="optimizer_state_tensors",
        old='states = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 2, "adamw": 2}',
        new='states = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 1, "adamw": 1}',
        why="remembers Adam's first moment but forgets the second (exp_avg_sq)",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-mixed-precision-without-master-weights",
        file=MEMORY,
        function="bytes_per_param",
        old="        return 2 + 2 + 4 + 4 * states\n",
        new="        return 2 + 2 + 4 * states\n",
        why="counts bf16 parameters and gradients but not the fp32 master copy of the weights",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-activations-not-deduplicated",
        file=MEASURED_MEMORY,
        function="SavedTensorBytes._pack",
        old="            self.storages[key] = t.untyped_storage().nbytes()\n",
        new="            self.storages[(key, len(self.storages))] = t.untyped_storage().nbytes()\n",
        why="adds up every saved tensor, counting a storage saved by two ops (ReLU, then the next matmul) twice",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-activations-count-parameters",
        file=MEASURED_MEMORY,
        function="SavedTensorBytes._pack",
        old="not (base.is_leaf and base.requires_grad) and key not in self._excluded",
        new="key not in self._excluded",
        why="counts the weights autograd saves (as views) as activations",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-training-days-forward-only",
        file=NAPKIN,
        function="training_days",
        old="    total_flops = 6 * num_params * num_tokens\n",
        new="    total_flops = 2 * num_params * num_tokens\n",
        why="budgets the forward pass only (2ND) instead of forward plus backward (6ND)",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-time-matmul-no-warmup",
        file=NAPKIN,
        function="time_matmul",
        old="    for _ in range(warmup):\n        a @ b\n",
        new="",
        why="times the first, cold calls (kernel selection, workspace allocation) along with the steady state",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-six-nd-forward-only",
        file=FLOPS,
        function="six_nd_flops",
        old="    return 6 * num_params * num_tokens",
        new="    return 2 * num_params * num_tokens",
        why="counts the forward pass only (2ND) in the rule of thumb that cs336 account prints",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-flop-counter-not-reset-on-reentry",
        file=FLOP_COUNTER,
        function="FlopCounter.__enter__",
        old="        self.flops.clear()\n",
        new="",
        why="starts from zero only when built, so entering the same counter again adds to the previous block's counts",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-saved-views-keyed-by-data-ptr",
        file=MEASURED_MEMORY,
        function="SavedTensorBytes._pack",
        old="        key = _storage_key(t)\n",
        new="        key = (str(t.device), t.data_ptr())\n",
        why=(
            "identifies a saved tensor by where its first element is (t.data_ptr()), so two views of one "
            "storage at different offsets count the storage twice"
        ),
        tests=TESTS,
    ),
    Mutant(
        name="accounting-state-bytes-skip-scalar-parameters",
        file=MEASURED_MEMORY,
        function="optimizer_state_bytes",
        old='key != "step" and isinstance(value, Tensor) and value.shape == param.shape',
        new="isinstance(value, Tensor) and value.dim() > 0 and value.shape == param.shape",
        why="skips 0-d tensors to leave out torch's 0-d step counters, which also drops the whole state of a 0-d parameter",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-state-bytes-count-step-of-scalar-parameters",
        file=MEASURED_MEMORY,
        function="optimizer_state_bytes",
        old='key != "step" and isinstance(value, Tensor) and value.shape == param.shape',
        new="isinstance(value, Tensor) and value.shape == param.shape",
        why="recognises state by its shape alone, so torch's 0-d step counter of a 0-d parameter passes for state",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-state-bytes-assume-fp32",
        file=MEASURED_MEMORY,
        function="optimizer_state_bytes",
        old="                total += tensor_memory_bytes(value)\n",
        new="                total += 4 * value.numel()\n",
        why="counts 4 bytes per state value, as if every optimizer kept fp32 state whatever the parameters' dtype",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-activations-assume-fp32",
        file=MEASURED_MEMORY,
        function="SavedTensorBytes._pack",
        old="            self.storages[key] = t.untyped_storage().nbytes()\n",
        new="            self.storages[key] = 4 * (t.untyped_storage().nbytes() // t.element_size())\n",
        why="counts the storage's elements at 4 bytes each, as if every activation were fp32: a bf16 model's activations come out twice their size",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-count-flops-seeds-the-backward-on-the-cpu",
        file=FLOP_COUNTER,
        function="count_flops",
        old="            out.sum().backward()\n",
        new="            out.backward(torch.ones(out.shape))\n",
        why="seeds the backward with torch.ones(out.shape), made without device=: on the CPU it counts right, "
        "but for a model on a GPU (or on meta) the gradient seed is on another device and backward fails",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-saved-view-counts-its-own-elements",
        file=MEASURED_MEMORY,
        function="SavedTensorBytes._pack",
        old="            self.storages[key] = t.untyped_storage().nbytes()\n",
        new="            self.storages[key] = t.numel() * t.element_size()\n",
        why="counts a saved view's own elements, though it keeps its whole storage alive",
        tests=TESTS,
    ),
    # Issue 21 kinds: size-one and empty shapes, documented error types, plausible numbers without counting.
    Mutant(
        name="accounting-tensor-bytes-rows-times-row",
        file=MEMORY,
        function="tensor_memory_bytes",
        old="    return x.numel() * bytes_per_element(x.dtype)\n",
        new="    return len(x) * x[0].numel() * bytes_per_element(x.dtype)\n",
        why="counts rows times the size of the first row: a 0-d tensor has no rows and an empty one no first row",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-matmul-flops-accepts-float-sizes",
        file=FLOPS,
        function="matmul_flops",
        old="    check_count(m=m, k=k, n=n)\n",
        new=(
            "    if min(m, k, n) < 0:\n"
            '        raise ValueError(f"sizes must be non-negative, got {(m, k, n)}")\n'
        ),
        why="checks only the sign, so a float size (4.0, 2.5) gives a float FLOP count instead of the documented ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-unknown-optimizer-key-error",
        file=MEMORY,
        function="optimizer_state_tensors",
        old=(
            "    if optimizer not in states:\n"
            '        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {list(OPTIMIZERS)}")\n'
        ),
        new="",
        why="lets the table lookup fail: an unknown optimizer is a KeyError, not the documented ValueError a caller catches",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-count-flops-torch-error-without-gradient",
        file=FLOP_COUNTER,
        function="count_flops",
        old=(
            "            if not (isinstance(out, Tensor) and out.requires_grad):\n"
            "                raise ValueError(\n"
            '                    "backward=True needs fn(*args) to return a tensor that requires grad; "\n'
            '                    "pass backward=False to count the forward only"\n'
            "                )\n"
        ),
        new=(
            "            if not isinstance(out, Tensor):\n"
            "                raise ValueError(\n"
            '                    "backward=True needs fn(*args) to return a tensor that requires grad; "\n'
            '                    "pass backward=False to count the forward only"\n'
            "                )\n"
        ),
        why="leaves an output without a gradient to torch, whose backward raises a RuntimeError, not the documented ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-matmul-counter-squeezes-size-one",
        file=FLOP_COUNTER,
        function="matmul_family_flops",
        old="    *batch, m, k = a.shape\n",
        new="    *batch, m, k = a.squeeze().shape\n",
        why="squeezes size-one dimensions off the operand (meant for a bmm batch of one), so a batch of one row loses its row dimension",
        tests=TESTS,
    ),
]

# Error paths and side effects (issue 31): nothing left installed after __exit__.
MUTANTS += [
    Mutant(
        name="accounting-flop-counter-exit-leaves-the-tracker-hooks",
        file=FLOP_COUNTER,
        function="FlopCounter.__exit__",
        old="        self._tracker.__exit__(*exc)\n",
        new="",
        why="stops counting on __exit__ but never exits its ModuleTracker: its global module hooks stay "
        "installed and run on every later forward pass of every module",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-flop-counter-exit-cleans-up-only-without-an-error",
        file=FLOP_COUNTER,
        function="FlopCounter.__exit__",
        old="        self._tracker.__exit__(*exc)\n",
        new="        if exc[0] is None:\n            self._tracker.__exit__(*exc)\n",
        why="removes the tracker's hooks only when the block ended normally: a block that raised leaves "
        "them installed",
        tests=TESTS,
    ),
]

# Controls (issue 31): hooks removed on __exit__, written another way.
CONTROLS = [
    Control(
        name="accounting-control-flop-counter-exit-in-finally",
        file=FLOP_COUNTER,
        function="FlopCounter.__exit__",
        old="""        super().__exit__(*exc)
        self._tracker.__exit__(*exc)
""",
        new="""        try:
            super().__exit__(*exc)
        finally:
            self._tracker.__exit__(*exc)
""",
        why="exits the ModuleTracker in a finally block, so its hooks go even if leaving the mode raises",
    ),
    Control(
        name="accounting-control-flop-counter-exit-tracker-first",
        file=FLOP_COUNTER,
        function="FlopCounter.__exit__",
        old="""        super().__exit__(*exc)
        self._tracker.__exit__(*exc)
""",
        new="""        self._tracker.__exit__(*exc)
        super().__exit__(*exc)
""",
        why="removes the tracker's module hooks first, then leaves the dispatch mode",
    ),
]

# Bugs that only hidden tests caught until the public napkin-math test tried these inputs (issue 31,
# item 4): more only-catches than a third of the part could weigh (rubric.toml), so public twins catch them.
MUTANTS += [
    Mutant(
        name="accounting-peak-flops-ignores-case",
        file=NAPKIN,
        function="peak_flops",
        old="""if gpu not in PEAK_FLOPS:
    raise ValueError(f"unknown GPU {gpu!r}; use one of {sorted(PEAK_FLOPS)}")""",
        new="""gpu = {k.lower(): k for k in PEAK_FLOPS}.get(gpu.lower(), gpu)
if gpu not in PEAK_FLOPS:
    raise ValueError(f"unknown GPU {gpu!r}; use one of {sorted(PEAK_FLOPS)}")""",
        why="matches GPU names case-insensitively to be friendly, where the contract says names are "
        "case-sensitive and 'h100-sxm' is unknown",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-max-params-checks-only-the-divisor",
        file=NAPKIN,
        function="max_trainable_params",
        old="check_positive(num_gpus=num_gpus, bytes_per_gpu=bytes_per_gpu, "
        "bytes_per_param=bytes_per_param)",
        new="check_positive(bytes_per_param=bytes_per_param)",
        why="checks only the argument it divides by: 0 GPUs hold 0 parameters instead of a ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-training-days-checks-only-the-divisors",
        file=NAPKIN,
        function="training_days",
        old="""check_positive(
    num_params=num_params,
    num_tokens=num_tokens,
    num_gpus=num_gpus,
    peak_flops_per_gpu=peak_flops_per_gpu,
)""",
        new="check_positive(num_gpus=num_gpus, peak_flops_per_gpu=peak_flops_per_gpu)",
        why="checks only the arguments it divides by: a model of 0 parameters trains in 0 days instead of "
        "a ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="accounting-mfu-leaves-flops-unchecked",
        file=NAPKIN,
        function="mfu",
        old="check_nonnegative_number(flops=flops)",
        new="",
        why="checks only the arguments it divides by: negative FLOPs give a negative MFU instead of a "
        "ValueError",
        tests=TESTS,
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
HIDDEN = "tests/hidden/test_accounting.py::"

HIDDEN_ONLY = [
    # a documented error on an input the public tests do not try
    HiddenOnly(
        name="accounting-chain-checks-only-for-no-dims",
        file=FLOPS,
        function="linear_chain_flops",
        old="len(dims) < 2",
        new="not dims",
        why="refuses an empty dims list but not a single size: [8] is a chain of no layer and counts 0 "
        "FLOPs instead of a ValueError (the public tests give [])",
        hidden=(HIDDEN + "test_linear_chain_flops_rejects_a_single_dimension",),
    ),
    # accepted inputs at the edge of their range, or in their other documented form
    HiddenOnly(
        name="accounting-peak-flops-takes-names-only",
        file=NAPKIN,
        function="peak_flops",
        old="name = _DTYPE_ALIASES.get(dtype, dtype)",
        new='name = _DTYPE_ALIASES.get(dtype, dtype) if isinstance(dtype, str) else str(dtype).removeprefix("torch.")',
        why="turns a torch dtype into its name with str(): torch.bfloat16 becomes 'bfloat16', which no "
        "table row has, so the documented torch-dtype form is refused (the public tests pass names)",
        hidden=(
            HIDDEN
            + "test_peak_flops_are_dense_datasheet_figures[H100-SXM-dtype4-989500000000000.0]",
        ),
    ),
    HiddenOnly(
        name="accounting-time-matmul-always-warms-up",
        file=NAPKIN,
        function="time_matmul",
        old="""for _ in range(warmup):
    a @ b""",
        new="""for _ in range(max(warmup, 1)):  # at least one warm-up call
    a @ b""",
        why="always warms up at least once: warmup=0 runs one matmul more than the documented warmup + "
        "iters (the public tests warm up 1 and 2 times)",
        hidden=(HIDDEN + "test_time_matmul_without_warmup_times_every_call",),
    ),
]
