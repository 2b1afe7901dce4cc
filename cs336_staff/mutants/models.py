"""Mutants of part 2 (``cs336_assignment/models.py``): mistakes students make with Linear and seeding."""

from __future__ import annotations

from cs336_staff.mutants import Mutant

FILE = "cs336_assignment/models.py"
TESTS = ("tests/test_models.py",)

MUTANTS = [
    Mutant(
        name="linear-forward-untransposed",
        file=FILE,
        old='return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")',
        new='return einsum(x, self.weight, "... d_out, d_out d_in -> ... d_in")',
        why="multiplies by W instead of W^T (the lecture's x @ W with W stored (d_in, d_out))",
        tests=TESTS,
    ),
    Mutant(
        name="linear-init-std-uses-d-out",
        file=FILE,
        old="std = 1.0 / math.sqrt(d_in)",
        new="std = 1.0 / math.sqrt(d_out)",
        why="scales the init by the number of outputs (fan-out) instead of inputs",
        tests=TESTS,
    ),
    Mutant(
        name="linear-trunc-bounds-absolute",
        file=FILE,
        old="a=-TRUNCATION * std, b=TRUNCATION * std",
        new="a=-TRUNCATION, b=TRUNCATION",
        why="passes a=-3, b=3 to trunc_normal_, reading them as multiples of std (they are absolute)",
        tests=TESTS,
    ),
    Mutant(
        name="linear-init-variance-as-std",
        file=FILE,
        old="std = 1.0 / math.sqrt(d_in)",
        new="std = 1.0 / d_in",
        why="uses the variance 1/d_in as the standard deviation",
        tests=TESTS,
    ),
    Mutant(
        name="cruncher-keeps-head-dimension",
        file=FILE,
        old="return self.final(x).squeeze(-1)",
        new="return self.final(x)",
        why="returns (batch, 1) instead of (batch,), which silently broadcasts against a (batch,) target",
        tests=TESTS,
    ),
    Mutant(
        name="set-seed-forgets-numpy",
        file=FILE,
        old="    np.random.seed(seed)\n",
        new="",
        why="seeds torch and random but not NumPy, so data shuffled with np.random differs between runs",
        tests=TESTS,
    ),
]
