"""Mutants of part 9 (``cs336_assignment/training.py``): resuming at the wrong step, and batches that
are not a function of (seed, step)."""

from __future__ import annotations

from cs336_staff.mutants import Mutant

FILE = "cs336_assignment/training.py"
TESTS = ("tests/test_training.py",)

MUTANTS = [
    Mutant(
        name="training-resume-forgets-the-loaded-step",
        file=FILE,
        function="start_or_resume",
        old="    return load_checkpoint(path, model, optimizer)\n",
        new="    load_checkpoint(path, model, optimizer)\n    return 0\n",
        why="loads the checkpoint but restarts the loop at step 0, training past --steps on replayed batches",
        tests=TESTS,
    ),
    Mutant(
        name="training-resume-replays-the-first-batches",
        file=FILE,
        function="train_loop",
        old="        x, y = get_batch(step)\n",
        new="        x, y = get_batch(step - start_step)\n",
        why="indexes batches from the start of this process, so a resumed run sees batches 0, 1, ... again",
        tests=TESTS,
    ),
    Mutant(
        name="training-batches-seeded-with-seed-plus-step",
        file=FILE,
        function="regression_batch",
        old="x = torch.randn(batch_size, dim, generator=step_generator(seed, step))",
        new="x = torch.randn(batch_size, dim, generator=torch.Generator().manual_seed(seed + step))",
        why="seeds the batch of step t with seed + t: the run with --seed 4 draws the batches of --seed 3 "
        "one step later, so two \"independent\" runs share almost all their data",
        tests=TESTS,
    ),
    Mutant(
        name="training-batches-ignore-the-seed",
        file=FILE,
        function="regression_batch",
        old="x = torch.randn(batch_size, dim, generator=step_generator(seed, step))",
        new="x = torch.randn(batch_size, dim, generator=torch.Generator().manual_seed(step))",
        why="seeds the batch of step t with t alone: --seed changes the initialisation but every run trains "
        "on the same batches",
        tests=TESTS,
    ),
]
