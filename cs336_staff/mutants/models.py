"""Mutants of part 2 (``cs336_assignment/models.py``): mistakes students make with Linear and seeding."""

from __future__ import annotations

from cs336_staff.mutants import HiddenOnly, Mutant

FILE = "cs336_assignment/models.py"
TESTS = ("tests/test_models.py",)

SEED_CHECK = """
if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
    raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")"""
"""set_seed's validation, which the set-seed-* mutants weaken."""

MUTANTS = [
    Mutant(
        name="linear-forward-untransposed",
        file=FILE,
        function="Linear.forward",
        old='return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")',
        new='return einsum(x, self.weight, "... d_out, d_out d_in -> ... d_in")',
        why="multiplies by W instead of W^T (the lecture's x @ W with W stored (d_in, d_out))",
        tests=TESTS,
    ),
    Mutant(
        name="linear-init-std-uses-d-out",
        file=FILE,
        function="Linear.__init__",
        old="std = 1.0 / math.sqrt(d_in)",
        new="std = 1.0 / math.sqrt(d_out)",
        why="scales the init by the number of outputs (fan-out) instead of inputs",
        tests=TESTS,
    ),
    Mutant(
        name="linear-trunc-bounds-absolute",
        file=FILE,
        function="Linear.__init__",
        old="nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-TRUNCATION * std, b=TRUNCATION * std)",
        new="nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-TRUNCATION, b=TRUNCATION)",
        why="passes a=-3, b=3 to trunc_normal_, reading them as multiples of std (they are absolute)",
        tests=TESTS,
    ),
    Mutant(
        name="linear-init-variance-as-std",
        file=FILE,
        function="Linear.__init__",
        old="std = 1.0 / math.sqrt(d_in)",
        new="std = 1.0 / d_in",
        why="uses the variance 1/d_in as the standard deviation",
        tests=TESTS,
    ),
    Mutant(
        name="cruncher-keeps-head-dimension",
        file=FILE,
        function="Cruncher.forward",
        old="return self.final(x).squeeze(-1)",
        new="return self.final(x)",
        why="returns (batch, 1) instead of (batch,), which silently broadcasts against a (batch,) target",
        tests=TESTS,
    ),
    Mutant(
        name="set-seed-forgets-numpy",
        file=FILE,
        function="set_seed",
        old="    np.random.seed(seed)\n",
        new="",
        why="seeds torch and random but not NumPy, so data shuffled with np.random differs between runs",
        tests=TESTS,
    ),
    Mutant(
        name="linear-init-clamps-instead-of-truncating",
        file=FILE,
        function="Linear.__init__",
        old="nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-TRUNCATION * std, b=TRUNCATION * std)",
        new="nn.init.normal_(weight, mean=0.0, std=std).clamp_(-TRUNCATION * std, TRUNCATION * std)",
        why=(
            "draws N(0, std) and clamps to ±3 std: the 0.27% of draws beyond the bounds pile up exactly on them "
            "instead of being redrawn, though mean, std and max look right"
        ),
        tests=TESTS,
    ),
    Mutant(
        name="linear-init-fills-an-fp32-copy",
        file=FILE,
        function="Linear.__init__",
        old="nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-TRUNCATION * std, b=TRUNCATION * std)",
        new="nn.init.trunc_normal_(weight.float(), mean=0.0, std=std, a=-TRUNCATION * std, b=TRUNCATION * std)",
        why=(
            "initialises weight.float() (to sample in fp32), which for a bf16 or fp64 layer is a temporary copy: "
            "the layer keeps the uninitialised torch.empty memory (fp32 layers are fine)"
        ),
        tests=TESTS,
    ),
    Mutant(
        name="linear-ignores-device",
        file=FILE,
        function="Linear.__init__",
        old="weight = torch.empty(d_out, d_in, device=device, dtype=dtype)",
        new="weight = torch.empty(d_out, d_in, dtype=dtype)",
        why="honours dtype but creates the weight on the default device, whatever device= says",
        tests=TESTS,
    ),
    Mutant(
        name="cruncher-layers-ignore-device-and-dtype",
        file=FILE,
        function="Cruncher.__init__",
        old="[Linear(dim, dim, device=device, dtype=dtype) for _ in range(num_layers)]",
        new="[Linear(dim, dim) for _ in range(num_layers)]",
        why="accepts device and dtype but does not pass them on to the hidden layers it builds",
        tests=TESTS,
    ),
    Mutant(
        name="cruncher-head-ignores-device-and-dtype",
        file=FILE,
        function="Cruncher.__init__",
        old="self.final = Linear(dim, 1, device=device, dtype=dtype)",
        new="self.final = Linear(dim, 1)",
        why="passes device and dtype to the hidden layers but forgets the final head",
        tests=TESTS,
    ),
    Mutant(
        name="linear-forward-views-input",
        file=FILE,
        function="Linear.forward",
        old='return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")',
        new="return (x.view(-1, d_in) @ self.weight.t()).view(*x.shape[:-1], self.weight.shape[0])",
        why=(
            "flattens the batch dimensions with view(), which fails on a non-contiguous input (a transposed or "
            "sliced activation); reshape() or einsum handles any strides"
        ),
        tests=TESTS,
    ),
    # issue 21's kinds: dimensions of size one and zero, dtypes of intermediates, error types
    Mutant(
        name="cruncher-squeezes-every-size-one-dim",
        file=FILE,
        function="Cruncher.forward",
        old="return self.final(x).squeeze(-1)",
        new="return self.final(x).squeeze()",
        why="squeezes every size-1 dimension, so a batch of one comes back as a 0-d tensor instead of shape (1,)",
        tests=TESTS,
    ),
    Mutant(
        name="linear-forward-flattens-with-inferred-width",
        file=FILE,
        function="Linear.forward",
        old='return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")',
        new="return (x.reshape(-1, d_in) @ self.weight.t()).reshape(*x.shape[:-1], -1)",
        why="flattens the batch and lets reshape infer the width back (-1): an empty batch has nothing to infer it from",
        tests=TESTS,
    ),
    Mutant(
        name="linear-forward-in-float32",
        file=FILE,
        function="Linear.forward",
        old='return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")',
        new='return einsum(x.float(), self.weight.float(), "... d_in, d_out d_in -> ... d_out")',
        why="multiplies in float32 'for accuracy': a float64 or bfloat16 layer returns float32 outputs",
        tests=TESTS,
    ),
    Mutant(
        name="linear-checks-only-the-sign",
        file=FILE,
        function="Linear.__init__",
        old="check_positive_int(d_in=d_in, d_out=d_out)",
        new="""
if d_in <= 0 or d_out <= 0:
    raise ValueError(f"d_in and d_out must be positive, got d_in={d_in}, d_out={d_out}")""",
        why="checks only the sign, so a fractional width reaches torch.empty and fails there with a TypeError",
        tests=TESTS,
    ),
    Mutant(
        name="set-seed-checks-only-the-range",
        file=FILE,
        function="set_seed",
        old=SEED_CHECK,
        new="""
if not 0 <= seed < 2**32:
    raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")""",
        why="checks the range but not the type: 1.5 seeds random and then numpy raises a TypeError, '7' fails the comparison",
        tests=TESTS,
    ),
    Mutant(
        name="set-seed-leaves-the-range-to-numpy",
        file=FILE,
        function="set_seed",
        old=SEED_CHECK,
        new="""
if not isinstance(seed, int) or seed < 0:
    raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")""",
        why="forgets the upper bound: 2**32 seeds random and torch first, then numpy rejects it in its own words",
        tests=TESTS,
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
HIDDEN = "tests/hidden/test_models.py::"

HIDDEN_ONLY = [
    # an accepted input at the edge of its range
    HiddenOnly(
        name="models-seed-zero-rejected",
        file=FILE,
        function="set_seed",
        old="not 0 <= seed < 2**32",
        new="not 0 < seed < 2**32",
        why="checks the seed with `0 < seed`, an off-by-one: set_seed(0), the most common seed there is, "
        "raises (the public tests seed with 1 and 2**32 - 2 at the ends of the range)",
        hidden=(HIDDEN + "test_set_seed_accepts_the_whole_numpy_range[0]",),
    ),
    # documented errors on inputs the public tests do not try
    HiddenOnly(
        name="models-seed-accepts-whole-floats",
        file=FILE,
        function="set_seed",
        old="isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32",
        new="isinstance(seed, bool) or not isinstance(seed, int | float) or seed != int(seed) "
        "or not 0 <= seed < 2**32",
        why="takes a whole float as a seed ('3.0 is 3'): random.seed accepts it and NumPy then fails with a "
        "TypeError, after Python's generator is already seeded (the public tests try 1.5 and '7')",
        hidden=(HIDDEN + "test_set_seed_rejects_other_non_seeds[float-integer]",),
    ),
    HiddenOnly(
        name="models-linear-accepts-whole-float-sizes",
        file=FILE,
        function="Linear.__init__",
        old="check_positive_int(d_in=d_in, d_out=d_out)",
        new="""if isinstance(d_in, float) and d_in.is_integer():
    d_in = int(d_in)
if isinstance(d_out, float) and d_out.is_integer():
    d_out = int(d_out)
check_positive_int(d_in=d_in, d_out=d_out)""",
        why="leniently turns a whole float size into an int before checking it: Linear(3.0, 3) builds a "
        "layer where the contract says ValueError (the public tests try 2.5 and '4')",
        hidden=(HIDDEN + "test_models_documented_errors_other_inputs[linear-float-integer]",),
    ),
]
