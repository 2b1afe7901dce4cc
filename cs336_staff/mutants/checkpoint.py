"""Mutants of part 5 (``cs336_assignment/checkpoint.py``) and of resuming in ``training.py``."""

from __future__ import annotations

from cs336_staff.mutants import Mutant

FILE = "cs336_assignment/checkpoint.py"
TESTS = ("tests/test_checkpoint.py",)

MUTANTS = [
    Mutant(
        name="checkpoint-optimizer-state-not-restored",
        file=FILE,
        old='        optimizer.load_state_dict(state["optimizer"])\n',
        new="",
        why="restores the weights only: AdamW restarts with zero moments and step 0 after a resume",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-saved-in-place",
        file=FILE,
        old="    if not isinstance(out, (str, os.PathLike)):\n        torch.save(state, out)\n        return\n",
        new="    torch.save(state, out)\n    return\n",
        why="torch.save straight to the path: a crash mid-save truncates the previous checkpoint",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-iteration-ignored-on-load",
        file=FILE,
        old='    return int(state["iteration"])',
        new="    return 0",
        why="loads the state but restarts the step count at 0",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-loaded-with-pickle",
        file=FILE,
        old='state = torch.load(src, map_location="cpu", weights_only=True)',
        new='state = torch.load(src, map_location="cpu", weights_only=False)',
        why="loads with weights_only=False: opening someone's checkpoint can run arbitrary code",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-load-error-without-the-file-name",
        file=FILE,
        old='            f"cannot read checkpoint {name}: it is truncated',
        new='            f"cannot read checkpoint: it is truncated',
        why="a corrupt-file error that does not say which file is corrupt",
        tests=TESTS,
    ),
    Mutant(
        name="training-resume-forgets-the-loaded-step",
        file="cs336_assignment/training.py",
        old="    return load_checkpoint(path, model, optimizer)\n",
        new="    load_checkpoint(path, model, optimizer)\n    return 0\n",
        why="loads the checkpoint but restarts the loop at step 0, training past --steps on replayed batches",
        tests=("tests/test_training.py",),
    ),
    Mutant(
        name="training-resume-replays-the-first-batches",
        file="cs336_assignment/training.py",
        old="        x, y = get_batch(step)\n",
        new="        x, y = get_batch(step - start_step)\n",
        why="indexes batches from the start of this process, so a resumed run sees batches 0, 1, ... again",
        tests=("tests/test_training.py",),
    ),
]
