"""Staff tests of the glue students receive ready-made (outside solution regions, so not graded).

``save_tokens`` / ``load_tokens`` (the token-file format) and the argument checks of ``cs336 train``
(``TrainConfig``) are not the assignment, but they must work and reject bad input clearly.
"""

from __future__ import annotations

import numpy as np
import pytest

from cs336_assignment.cli import main
from cs336_assignment.data import load_tokens, save_tokens

pytestmark = pytest.mark.staff


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_save_then_load_tokens_round_trips_as_a_read_only_memmap(tmp_path, dtype):
    """Tokens written by save_tokens come back identical, memory-mapped and read-only."""
    tokens = np.array([0, 1, 255, 256, 65535, 7], dtype=np.int64)
    path = save_tokens(tmp_path / "train.bin", tokens, dtype)
    loaded = load_tokens(path, dtype)
    assert isinstance(loaded, np.memmap) and not loaded.flags.writeable
    assert loaded.dtype == dtype and path.stat().st_size == tokens.size * np.dtype(dtype).itemsize
    np.testing.assert_array_equal(loaded, tokens)


def test_load_tokens_reads_an_npy_file_read_only_with_its_own_dtype(tmp_path):
    """A .npy token array (what `cs336 encode` writes) is memory-mapped with the dtype in its header."""
    np.save(tmp_path / "tokens.npy", np.array([3, 70000, 5], dtype=np.uint32))
    loaded = load_tokens(tmp_path / "tokens.npy")
    assert (
        isinstance(loaded, np.memmap) and not loaded.flags.writeable and loaded.dtype == np.uint32
    )
    np.testing.assert_array_equal(loaded, [3, 70000, 5])


def test_load_tokens_rejects_an_npy_file_of_floats(tmp_path):
    """A .npy file of floats is not token ids: a ValueError naming the file."""
    np.save(tmp_path / "weights.npy", np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match=r"weights\.npy holds a float32 array"):
        load_tokens(tmp_path / "weights.npy")


def test_save_tokens_replaces_a_file_atomically_and_leaves_no_temporary(tmp_path):
    """Saving over an existing token file replaces it whole; nothing else is left in the directory."""
    save_tokens(tmp_path / "t.bin", [1, 2, 3])
    save_tokens(tmp_path / "t.bin", [4, 5])
    np.testing.assert_array_equal(load_tokens(tmp_path / "t.bin"), [4, 5])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.bin"]


def test_save_tokens_rejects_ids_that_do_not_fit_and_keeps_the_old_file(tmp_path):
    """An id above the dtype's maximum is a ValueError suggesting a wider dtype; the old file survives."""
    save_tokens(tmp_path / "t.bin", [1, 2, 3])
    with pytest.raises(ValueError, match=r"70000.*uint16.*uint32"):
        save_tokens(tmp_path / "t.bin", [1, 70000], np.uint16)
    np.testing.assert_array_equal(load_tokens(tmp_path / "t.bin"), [1, 2, 3])


@pytest.mark.parametrize(
    ("tokens", "dtype", "message"),
    [
        ([-1, 2], np.uint16, r"-1"),
        ([[1, 2]], np.uint16, r"1-D"),
        ([1.5], np.uint16, r"integer"),
        ([1], np.float32, r"dtype"),
    ],
)
def test_save_tokens_rejects_bad_input(tmp_path, tokens, dtype, message):
    """Negative ids, 2-D arrays, floats and a float dtype are ValueErrors that say what is wrong."""
    with pytest.raises(ValueError, match=message):
        save_tokens(tmp_path / "t.bin", tokens, dtype)


def test_load_tokens_rejects_a_size_that_does_not_match_the_dtype(tmp_path):
    """A 3-byte file cannot be uint16 tokens: the error names the file and asks for the right dtype."""
    (tmp_path / "odd.bin").write_bytes(b"abc")
    with pytest.raises(ValueError, match=r"odd\.bin.*dtype"):
        load_tokens(tmp_path / "odd.bin", np.uint16)


def test_load_tokens_rejects_an_empty_file(tmp_path):
    """An empty token file is a ValueError naming it (np.memmap's own error is obscure)."""
    (tmp_path / "empty.bin").touch()
    with pytest.raises(ValueError, match=r"empty\.bin is empty"):
        load_tokens(tmp_path / "empty.bin")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "argument --steps: must be a positive integer, got '0'"),
        (["--dim", "-2"], "argument --dim: must be a positive integer, got '-2'"),
        (["--batch-size", "0"], "argument --batch-size: must be a positive integer"),
        (["--layers", "-1"], "argument --layers: must be an integer >= 0"),
        (["--lr", "0"], "argument --lr: must be a positive number"),
        (["--lr", "nan"], "argument --lr: must be a positive number"),
        (["--weight-decay", "-0.1"], "argument --weight-decay: must be a number >= 0"),
        (["--seed", "-5"], "argument --seed: must be an integer >= 0"),
        (["--resume"], "pass --checkpoint PATH"),
        (
            ["--checkpoint", "ckpt.pt", "--checkpoint-every", "0"],
            "argument --checkpoint-every: must be a positive integer",
        ),
        (["--checkpoint", "no/such/dir/ckpt.pt"], "does not exist; create it first"),
        (["--checkpoint", "."], "is a directory; give a file path"),
    ],
)
def test_train_rejects_bad_arguments_with_a_clear_message(
    args, message, capsys, tmp_path, monkeypatch
):
    """Every bad argument of `cs336 train` exits with status 2 and ends in one error line naming the flag as
    typed and saying what to pass."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\n")[-1]
    assert last.startswith("cs336 train: error:") and message in last, err
