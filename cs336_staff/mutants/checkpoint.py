"""Mutants of part 5 (``cs336_assignment/checkpoint.py``): lost state, unsafe or lenient loads, non-atomic saves."""

from __future__ import annotations

from cs336_staff.mutants import Control, HiddenOnly, Mutant

FILE = "cs336_assignment/checkpoint.py"
TESTS = ("tests/test_checkpoint.py",)
# What save_checkpoint puts in the file (mutants that change it start from this).
SAVED_STATE = """
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "iteration": int(iteration),
                "rng": capture_rng_state(),
            }"""

MUTANTS = [
    Mutant(
        name="checkpoint-optimizer-state-not-restored",
        file=FILE,
        function="load_checkpoint",
        old='        optimizer.load_state_dict(state["optimizer"])\n',
        new="",
        why="restores the weights only: AdamW restarts with zero moments and step 0 after a resume",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-saved-in-place",
        file=FILE,
        function="save_checkpoint",
        old="    if not isinstance(out, (str, os.PathLike)):\n        torch.save(state, out)\n        return\n",
        new="    torch.save(state, out)\n    return\n",
        why="torch.save straight to the path: a crash mid-save truncates the previous checkpoint",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-iteration-ignored-on-load",
        file=FILE,
        function="load_checkpoint",
        old='    return int(state["iteration"])',
        new="    return 0",
        why="loads the state but restarts the step count at 0",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-iteration-saved-as-int32-tensor",
        file=FILE,
        function="save_checkpoint",
        old="int(iteration)",
        new="torch.tensor(iteration, dtype=torch.int32)",
        why="keeps the iteration as a tensor like the rest of the state, in int32 'as steps are small': a run past "
        "2**31 steps (a counter of tokens or samples, say) cannot be saved at all",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-loaded-with-pickle",
        file=FILE,
        function="load_checkpoint",
        old='state = torch.load(src, map_location="cpu", weights_only=True)',
        new='state = torch.load(src, map_location="cpu", weights_only=False)',
        why="loads with weights_only=False: opening someone's checkpoint can run arbitrary code",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-load-error-without-the-file-name",
        file=FILE,
        function="load_checkpoint",
        old="""
            raise ValueError(
                f"cannot read checkpoint {name}: it is truncated, corrupt or not a torch checkpoint "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            ) from err""",
        new="""
            raise ValueError(
                f"cannot read checkpoint: it is truncated, corrupt or not a torch checkpoint "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            ) from err""",
        why="a corrupt-file error that does not say which file is corrupt",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-loads-non-strictly",
        file=FILE,
        function="load_checkpoint",
        old='        model.load_state_dict(state["model"])\n',
        new='        model.load_state_dict(state["model"], strict=False)\n',
        why="loads with strict=False to get past a key error: a checkpoint of another model loads without "
        "complaint and leaves the weights it does not name at their initial values",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-rng-not-saved",
        file=FILE,
        function="save_checkpoint",
        old=SAVED_STATE,
        new="""
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "iteration": int(iteration),
            }""",
        why="saves weights, optimizer and iteration but not the RNG states: a resumed run draws other "
        "random batches (dropout masks, shuffles) than the uninterrupted run",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-restores-only-torchs-rng",
        file=FILE,
        function="load_checkpoint",
        old='        restore_rng_state(state["rng"])\n',
        new='        torch.set_rng_state(state["rng"]["torch"])\n',
        why="restores torch's global RNG but not NumPy's or Python's, so whatever a run draws from those "
        "differs after a resume",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-save-switches-the-model-to-eval",
        file=FILE,
        function="save_checkpoint",
        old=SAVED_STATE,
        new="""
            model.eval()  # "a saved model is for inference"
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "iteration": int(iteration),
                "rng": capture_rng_state(),
            }""",
        why="calls model.eval() before saving and never switches back: training goes on with BatchNorm's "
        "running statistics and no dropout, so saving changes the run it saves",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-temporary-name-from-the-global-rng",
        file=FILE,
        function="save_checkpoint",
        old="    with atomic_write(out) as f:\n        torch.save(state, f)\n",
        new="""    tmp = Path(f"{os.fspath(out)}.{random.getrandbits(32):08x}.tmp")  # a fresh temporary name
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
""",
        why="writes its own atomic save with a temporary name drawn from Python's global random: every save "
        "advances the RNG the run's shuffles draw from, so a run with checkpoints differs from one without",
        tests=TESTS,
    ),
]


# Error types (issue 21): the message names the file, but a caller catching the documented type misses it.
MISSING_FILE_CHECK = """    if path is not None and not Path(path).exists():
        raise FileNotFoundError(f"no checkpoint at {name}")
"""
MUTANTS += [
    Mutant(
        name="checkpoint-missing-file-wrapped-in-value-error",
        file=FILE,
        function="load_checkpoint",
        old=MISSING_FILE_CHECK,
        new="",
        why="lets torch.load meet the missing file, so the broad except wraps its FileNotFoundError into the "
        "corrupt-file ValueError: a caller that catches FileNotFoundError to start afresh never sees it",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-missing-file-raises-value-error",
        file=FILE,
        function="load_checkpoint",
        old=MISSING_FILE_CHECK,
        new="""    if path is not None and not Path(path).exists():
        raise ValueError(f"no checkpoint at {name}")
""",
        why="reports a missing file as a bad value: the message is right, the type a caller catches is not",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-not-a-checkpoint-raises-key-error",
        file=FILE,
        function="load_checkpoint",
        old="""        raise ValueError(
            f"{name} is not a checkpoint written by save_checkpoint: it lacks {missing}"
        )""",
        new="""        raise KeyError(
            f"{name} is not a checkpoint written by save_checkpoint: it lacks {missing}"
        )""",
        why="a torch file without the checkpoint's entries raises KeyError (the entry it lacks) instead of "
        "the documented ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-unreadable-file-raises-runtime-error",
        file=FILE,
        function="load_checkpoint",
        old="""
            raise ValueError(
                f"cannot read checkpoint {name}: it is truncated, corrupt or not a torch checkpoint "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            ) from err""",
        new="""
            raise RuntimeError(
                f"cannot read checkpoint {name}: it is truncated, corrupt or not a torch checkpoint "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            ) from err""",
        why="re-raises torch's unpickling failure as a RuntimeError naming the file (the type torch uses), "
        "not the documented ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-mismatch-raises-runtime-error",
        file=FILE,
        function="load_checkpoint",
        old="""
            raise ValueError(
                f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
                f"that saved it did ({err})"
            ) from err""",
        new="""
            raise RuntimeError(
                f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
                f"that saved it did ({err})"
            ) from err""",
        why="keeps load_state_dict's RuntimeError type when adding the file's name to a key mismatch, not "
        "the documented ValueError",
        tests=TESTS,
    ),
]

# Error paths leave nothing changed, and a checkpoint without RNG states loads (issue 31).
MUTANTS += [
    Mutant(
        name="checkpoint-failed-load-keeps-the-half-loaded-model",
        file=FILE,
        function="load_checkpoint",
        old="""        model.load_state_dict(before[0])
        optimizer.load_state_dict(before[1])
""",
        new="",
        why="raises the documented ValueError when the optimizer does not fit, but leaves the model holding "
        "the checkpoint's weights load_state_dict had already copied in",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-rngs-restored-before-the-state-loads",
        file=FILE,
        function="load_checkpoint",
        old="""    before = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
""",
        new="""    before = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    if "rng" in state:
        restore_rng_state(state["rng"])
""",
        why="restores the global RNGs first: a load that then fails has already replaced the caller's RNG "
        "states",
        tests=TESTS,
    ),
    Mutant(
        name="checkpoint-load-needs-the-rng-entry",
        file=FILE,
        function="load_checkpoint",
        old="""    if "rng" in state:  # last: a load that fails leaves the global RNGs alone
        restore_rng_state(state["rng"])
""",
        new="""    restore_rng_state(state["rng"])
""",
        why="reads state['rng'] unconditionally: a checkpoint without RNG states fails with a bare KeyError",
        tests=TESTS,
    ),
]

# Controls (issue 31): a failed load changes nothing and a checkpoint without 'rng' loads, written
# another way.
CONTROLS = [
    Control(
        name="checkpoint-control-restores-in-finally",
        file=FILE,
        function="load_checkpoint",
        old="""    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        model.load_state_dict(before[0])
        optimizer.load_state_dict(before[1])
        raise ValueError(
            f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
            f"that saved it did ({err})"
        ) from err
""",
        new="""    loaded = False
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loaded = True
    except (RuntimeError, ValueError, KeyError) as err:
        raise ValueError(
            f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
            f"that saved it did ({err})"
        ) from err
    finally:
        if not loaded:
            model.load_state_dict(before[0])
            optimizer.load_state_dict(before[1])
""",
        why="puts the model and optimizer back in a finally block guarded by a `loaded` flag, instead "
        "of in the except clause",
    ),
    Control(
        name="checkpoint-control-rng-via-get",
        file=FILE,
        function="load_checkpoint",
        old="""    if "rng" in state:
        restore_rng_state(state["rng"])
""",
        new="""    rng = state.get("rng")
    if rng is not None:
        restore_rng_state(rng)
""",
        why="reads the optional RNG states with state.get('rng') and a None check, not `'rng' in state`",
    ),
    Control(
        name="checkpoint-control-rng-in-try-else",
        file=FILE,
        function="load_checkpoint",
        old="""    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        model.load_state_dict(before[0])
        optimizer.load_state_dict(before[1])
        raise ValueError(
            f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
            f"that saved it did ({err})"
        ) from err
    if "rng" in state:
        restore_rng_state(state["rng"])
""",
        new="""    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        model.load_state_dict(before[0])
        optimizer.load_state_dict(before[1])
        raise ValueError(
            f"checkpoint {name} does not fit this model/optimizer; build them exactly as the run "
            f"that saved it did ({err})"
        ) from err
    else:
        if "rng" in state:
            restore_rng_state(state["rng"])
""",
        why="restores the RNG states in the try statement's else block (only after both loads succeeded)",
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
READ = """try:
    state = torch.load(src, map_location="cpu", weights_only=True)
except Exception as err:
    raise ValueError(
        f"cannot read checkpoint {name}: it is truncated, corrupt or not a torch checkpoint "
        f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    ) from err"""
HIDDEN = "tests/hidden/test_checkpoint.py::"

HIDDEN_ONLY = [
    # a documented error on an input the public tests do not try
    HiddenOnly(
        name="checkpoint-wraps-only-the-errors-it-has-seen",
        file=FILE,
        function="load_checkpoint",
        old=READ,
        new="import pickle\n"
        + READ.replace(
            "except Exception as err:",
            "except (RuntimeError, OSError, LookupError, pickle.UnpicklingError) as err:",
        ),
        why="wraps into the ValueError the error types torch raised on the public tests' bad files (a "
        "truncated zip, text, a pickle that runs code) instead of any Exception: a zero-byte file (a "
        "crash right after creating it) escapes as torch's bare EOFError",
        hidden=(HIDDEN + "test_loading_a_bad_file_fails_naming_the_file[empty-file]",),
    ),
    # a situation the public tests do not set up
    HiddenOnly(
        name="checkpoint-first-save-written-in-place",
        file=FILE,
        function="save_checkpoint",
        old="""with atomic_write(out) as f:
    torch.save(state, f)""",
        new="""if not Path(out).exists():  # nothing to protect yet
    with open(out, "wb") as f:
        torch.save(state, f)
    return
with atomic_write(out) as f:
    torch.save(state, f)""",
        why="writes atomically only when a checkpoint is there to protect: a first save that fails "
        "midway leaves a half-written file at the path, which a resume then trips on (the public test "
        "crashes a save over an existing checkpoint)",
        hidden=(HIDDEN + "test_a_failed_first_save_creates_no_checkpoint",),
    ),
]
