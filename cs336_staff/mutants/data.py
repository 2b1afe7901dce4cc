"""Mutants of part 4 (``cs336_assignment/data.py``): wrong windows, wrong ranges, unvectorised reads,
the wrong RNG when no generator is given, and a batch whose inputs and targets share memory."""

from __future__ import annotations

from cs336_staff.mutants import Control, HiddenOnly, Mutant

FILE = "cs336_assignment/data.py"
TESTS = ("tests/test_data.py",)
DRAW = "starts = torch.randint(0, num_starts, (batch_size,), generator=generator).numpy()"
DTYPE_CHECK = """if not np.issubdtype(dataset.dtype, np.integer):
    raise ValueError(f"dataset must hold integer token ids, got dtype {dataset.dtype}")"""
READ = (
    "windows = np.asarray(dataset[starts[:, None] + np.arange(context_length + 1)], dtype=np.int64)"
)

MUTANTS = [
    Mutant(
        name="data-never-samples-the-last-start",
        file=FILE,
        function="get_batch",
        old=DRAW,
        new=DRAW.replace("num_starts,", "num_starts - 1,"),
        why="treats randint's exclusive upper bound as inclusive and subtracts one more: start n - T - 1 never appears",
        tests=TESTS,
    ),
    Mutant(
        name="data-starts-run-past-the-end",
        file=FILE,
        function="get_batch",
        old=DRAW,
        new=DRAW.replace("num_starts,", "num_starts + 1,"),
        why="draws starts from [0, n - T] inclusive: the last window's target runs one token past the end",
        tests=TESTS,
    ),
    Mutant(
        name="data-targets-not-shifted",
        file=FILE,
        function="get_batch",
        old="y = torch.from_numpy(windows[:, 1:].copy())",
        new="y = torch.from_numpy(windows[:, :-1].copy())",
        why="returns the inputs as targets (forgets the shift by one)",
        tests=TESTS,
    ),
    Mutant(
        name="data-ignores-the-generator",
        file=FILE,
        function="get_batch",
        old=DRAW,
        new=DRAW.replace(", generator=generator", ""),
        why="samples from the global RNG, so a seeded generator does not make batches reproducible",
        tests=TESTS,
    ),
    Mutant(
        name="data-python-loop-over-the-batch",
        file=FILE,
        function="get_batch",
        old=READ,
        new="windows = np.stack([np.asarray(dataset[s : s + context_length + 1], dtype=np.int64) for s in starts])",
        why="slices one window per row in a Python loop instead of one vectorised fancy index",
        tests=TESTS,
    ),
    Mutant(
        name="data-python-loop-over-positions",
        file=FILE,
        function="get_batch",
        old=READ,
        new=(
            "windows = np.stack([np.asarray(dataset[starts + t], dtype=np.int64) for t in range(context_length + 1)], "
            "axis=1)"
        ),
        why="vectorises over the batch but loops over the window's positions in Python: context_length reads of "
        "the dataset per batch (and on a memmap as many scattered passes) where one fancy index does",
        tests=TESTS,
    ),
    Mutant(
        name="data-copies-the-whole-memmap",
        file=FILE,
        function="get_batch",
        old=READ,
        new="windows = dataset.astype(np.int64)[starts[:, None] + np.arange(context_length + 1)]",
        why="converts the whole dataset to int64 before indexing: reads (and copies) the entire file every batch",
        tests=TESTS,
    ),
    Mutant(
        name="data-keeps-the-dataset-dtype",
        file=FILE,
        function="get_batch",
        old=READ,
        new=READ.replace("dtype=np.int64", "dtype=dataset.dtype"),
        why="returns uint16 tensors (the file's dtype) instead of int64 token ids",
        tests=TESTS,
    ),
    Mutant(
        name="data-short-dataset-not-checked",
        file=FILE,
        function="get_batch",
        old="num_starts < 1",
        new="num_starts < 0",
        why="lets a dataset of exactly context_length tokens through, failing later inside randint",
        tests=TESTS,
    ),
    Mutant(
        name="data-no-generator-means-a-fresh-generator",
        file=FILE,
        function="get_batch",
        old=DRAW,
        new=DRAW.replace(
            "generator=generator)",
            "generator=generator if generator is not None else torch.Generator())",
        ),
        why="with generator=None builds a new torch.Generator(), which always starts from the same default seed: "
        "every call without a generator returns the same batch, and torch.manual_seed changes nothing",
        tests=TESTS,
    ),
    Mutant(
        name="data-no-generator-draws-from-numpy",
        file=FILE,
        function="get_batch",
        old=DRAW,
        new="starts = (torch.randint(0, num_starts, (batch_size,), generator=generator).numpy() "
        "if generator is not None else np.random.randint(0, num_starts, batch_size))",
        why="with generator=None falls back to NumPy's global RNG, so torch.manual_seed does not reproduce the batch",
        tests=TESTS,
    ),
    Mutant(
        name="data-x-and-y-share-memory",
        file=FILE,
        function="get_batch",
        old="x = torch.from_numpy(windows[:, :-1].copy())\ny = torch.from_numpy(windows[:, 1:].copy())",
        new="x = torch.from_numpy(windows)[:, :-1]\ny = torch.from_numpy(windows)[:, 1:]",
        why="returns x and y as overlapping views of one (B, T + 1) array: writing x in place (masking a token, "
        "say) silently changes y, and neither is contiguous",
        tests=TESTS,
    ),
    Mutant(
        name="data-draws-from-a-copy-of-the-generator",
        file=FILE,
        function="get_batch",
        old=DRAW,
        new="local = None if generator is None else torch.Generator().set_state(generator.get_state())\n"
        + DRAW.replace("generator=generator", "generator=local"),
        why="draws from a copy of the generator (so as not to disturb the caller's): the caller's generator "
        "never advances, so successive calls return the same batch",
        tests=TESTS,
    ),
    Mutant(
        name="data-moves-only-x-to-the-device",
        file=FILE,
        function="get_batch",
        old="return x.to(device), y.to(device)",
        new="return x.to(device), y",
        why="moves the inputs to the device and forgets the targets: every CPU test passes, and the loss on "
        "a GPU fails (or, with a CPU fallback, silently runs on two devices)",
        tests=TESTS,
    ),
    Mutant(
        name="data-device-taken-as-a-string",
        file=FILE,
        function="get_batch",
        old="device = torch.device(device)",
        new="device = torch.device(device.strip().lower())",
        why='tidies the device name as a string ("CUDA:0 " from a config file): a torch.device, such as '
        "model.weight.device, has no .strip() and fails with an AttributeError, though the docstring accepts one",
        tests=TESTS,
    ),
    Mutant(
        name="data-squeezes-a-batch-of-one",
        file=FILE,
        function="get_batch",
        old="x = torch.from_numpy(windows[:, :-1].copy())\ny = torch.from_numpy(windows[:, 1:].copy())",
        new="x = torch.from_numpy(windows[:, :-1].copy()).squeeze()\ny = torch.from_numpy(windows[:, 1:].copy()).squeeze()",
        why="squeezes the windows to drop a stray dimension: a batch of one becomes 1-d, and B = T = 1 a 0-d tensor",
        tests=TESTS,
    ),
    Mutant(
        name="data-takes-float-ids-as-tokens",
        file=FILE,
        function="get_batch",
        old=DTYPE_CHECK,
        new="",
        why="never checks the dtype: a float array (a corpus saved with the wrong dtype, or embeddings) is cast "
        "to int64 token ids, 3.7 becoming 3, instead of the documented ValueError",
        tests=TESTS,
    ),
    Mutant(
        name="data-float-ids-are-a-type-error",
        file=FILE,
        function="get_batch",
        old=DTYPE_CHECK,
        new="""if not np.issubdtype(dataset.dtype, np.integer):
    raise TypeError(f"dataset must hold integer token ids, got dtype {dataset.dtype}")""",
        why="raises TypeError for a float dataset (a wrong type of data, it seems) where the contract says "
        "ValueError: a caller catching ValueError misses it",
        tests=TESTS,
    ),
    Mutant(
        name="data-asserts-a-flat-dataset",
        file=FILE,
        function="get_batch",
        old="""if dataset.ndim != 1:
    raise ValueError(
        f"dataset must be a 1-D array of token ids, got shape {dataset.shape}; flatten it first"
    )""",
        new='assert dataset.ndim == 1, "dataset must be a 1-D array of token ids"',
        why="checks the shape with assert: an AssertionError where the contract says ValueError (and no check "
        "at all under python -O)",
        tests=TESTS,
    ),
    Mutant(
        name="data-batch-size-left-to-torch",
        file=FILE,
        function="get_batch",
        old="check_positive_int(batch_size=batch_size, context_length=context_length)",
        new="check_positive_int(context_length=context_length)",
        why="validates context_length but lets batch_size reach torch.randint, which fails with its own "
        "RuntimeError for a negative size and silently accepts a float one",
        tests=TESTS,
    ),
    Mutant(
        name="data-batch-of-one-is-a-view-of-the-dataset",
        file=FILE,
        function="get_batch",
        old=READ,
        new="""if batch_size == 1:  # one window: a slice is enough, no fancy index
    s = int(starts[0])
    whole = torch.as_tensor(dataset).to(torch.int64)  # no copy when the tokens are int64 already
    return whole[s : s + context_length].unsqueeze(0).to(device), whole[s + 1 : s + context_length + 1].unsqueeze(0).to(device)
"""
        + READ,
        why="special-cases a batch of one with slices of the dataset: on an int64 dataset x is a view of it, "
        "so masking a token of x in place rewrites the corpus",
        tests=TESTS,
    ),
]

# Token ids exactly, whatever the dtype and byte order (issue 31).
MUTANTS += [
    Mutant(
        name="data-reads-ids-through-float32",
        file=FILE,
        function="get_batch",
        old=READ,
        new=READ.replace("dtype=np.int64)", "dtype=np.float32).astype(np.int64)"),
        why="converts the windows through float32: ids above 2**24 come back rounded to another token",
        tests=TESTS,
    ),
    Mutant(
        name="data-converts-windows-with-torch-from-numpy",
        file=FILE,
        function="get_batch",
        old=READ,
        new="windows = torch.from_numpy(np.ascontiguousarray("
        "dataset[starts[:, None] + np.arange(context_length + 1)])).long().numpy()",
        why="converts the windows with torch.from_numpy(...).long(): fine for native arrays, a ValueError "
        "for a big-endian one ('>u2', a file written on another machine)",
        tests=TESTS,
    ),
]

# Controls (issue 31): exact ids whatever the dtype's byte order, converted another way.
CONTROLS = [
    Control(
        name="data-control-windows-astype-little-endian-int64",
        file=FILE,
        function="get_batch",
        old=READ,
        new="windows = dataset[starts[:, None] + np.arange(context_length + 1)].astype('<i8')",
        why="converts the gathered windows with .astype('<i8') instead of np.asarray(..., dtype=np.int64)",
    ),
    Control(
        name="data-control-windows-np-take",
        file=FILE,
        function="get_batch",
        old=READ,
        new="windows = np.take(dataset, starts[:, None] + np.arange(context_length + 1)).astype(np.int64)",
        why="gathers the windows with np.take and converts with astype(np.int64), not fancy indexing "
        "under np.asarray",
    ),
]

# Bugs only hidden tests catch (issue 31, item 4): each must cost a student at least a point of
# 100 (cs336_staff/audit/hidden_only.py); rubric.toml weighs the hidden tests named here so it does.
HIDDEN_ONLY = [
    # a documented error on an input the public tests do not try
    HiddenOnly(
        name="data-sizes-checked-against-zero",
        file=FILE,
        function="get_batch",
        old="check_positive_int(batch_size=batch_size, context_length=context_length)",
        new="""for name, value in (("batch_size", batch_size), ("context_length", context_length)):
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")""",
        why="checks the sizes by hand with `< 0`, an off-by-one: a batch size or a context length of 0 "
        "gives empty tensors instead of the ValueError (the public tests try -1, -2 and 2.0)",
        hidden=(
            "tests/hidden/test_data.py::test_get_batch_rejects_a_batch_size_below_one[0]",
            "tests/hidden/test_data.py::test_get_batch_rejects_a_context_length_below_one[0]",
        ),
    ),
]
