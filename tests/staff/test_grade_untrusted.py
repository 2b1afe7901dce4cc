"""The judge trusts no file and no size the worker made: the mirror, the channel and the codec, in this process.

``mirror.Mirror`` is driven on two plain folders (the judge's and the worker's copy) the way the
judge drives it around each call; the channel and codec with frames a hostile worker could send.
The same attacks against the real sandbox are in ``test_grade_hostile.py``.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest
import torch

from cs336_staff.grade.errors import bounded_error, rebuild_exception, worker_traceback
from cs336_staff.grade.mirror import Mirror, MirrorRefused
from cs336_staff.worker import channel, codec

pytestmark = pytest.mark.staff
SCOPE = [""]  # the whole folder (a call names the folders it touches: test_scopes_...)


@pytest.fixture
def folders(tmp_path):
    judge, worker = tmp_path / "judge", tmp_path / "worker"
    judge.mkdir()
    worker.mkdir()
    return judge, worker, Mirror(judge, worker, file_bytes=1 << 16, entries=100)


def test_judge_files_reach_the_worker_and_worker_files_come_back(folders):
    """A corpus the judge wrote is pushed; a checkpoint the worker wrote in a subfolder is pulled."""
    judge, worker, mirror = folders
    (judge / "t1").mkdir()
    (judge / "t1" / "corpus.txt").write_text("low lower")
    mirror.push(SCOPE)
    assert (worker / "t1" / "corpus.txt").read_text() == "low lower"
    (worker / "t1" / "out").mkdir()
    (worker / "t1" / "out" / "ckpt.pt").write_bytes(b"weights")
    mirror.pull(SCOPE)
    assert (judge / "t1" / "out" / "ckpt.pt").read_bytes() == b"weights"


def test_the_worker_cannot_change_a_file_the_judge_wrote(folders):
    """Emptying the judge's corpus changes the worker's copy only; the next push restores it."""
    judge, worker, mirror = folders
    (judge / "corpus.txt").write_text("ab ab ab")
    mirror.push(SCOPE)
    (worker / "corpus.txt").write_text("")
    mirror.pull(SCOPE)
    assert (judge / "corpus.txt").read_text() == "ab ab ab"
    mirror.push(SCOPE)
    assert (worker / "corpus.txt").read_text() == "ab ab ab"
    (worker / "corpus.txt").unlink()
    os.symlink("/etc/passwd", worker / "corpus.txt")
    mirror.push(SCOPE)
    assert (
        not (worker / "corpus.txt").is_symlink()
        and (worker / "corpus.txt").read_text() == "ab ab ab"
    )


def test_a_symlink_the_worker_leaves_is_never_followed_and_fails_the_call(folders, tmp_path):
    """A 'checkpoint' that is a symlink to a secret: not copied, the call is refused naming it."""
    judge, worker, mirror = folders
    secret = tmp_path / "hidden_test.py"
    secret.write_text("SECRET = 1")
    os.symlink(secret, worker / "ckpt.pt")
    with pytest.raises(MirrorRefused, match="ckpt.pt is a symlink"):
        mirror.pull(SCOPE)
    assert not (judge / "ckpt.pt").exists()
    mirror.pull(SCOPE)  # reported once: later calls are not charged for it again


def test_symlinks_planted_where_the_judge_writes_are_never_followed(folders, tmp_path):
    """A worker that plants symlinks in the judge's next folder: the judge writes in its own folder only."""
    judge, worker, mirror = folders
    outside = tmp_path / "outside.txt"
    (worker / "t2").mkdir()
    os.symlink(outside, worker / "t2" / "corpus.txt")
    os.symlink(tmp_path, worker / "t3")
    (judge / "t2").mkdir()
    (judge / "t2" / "corpus.txt").write_text("judge's")
    (judge / "t3").mkdir()
    (judge / "t3" / "x.txt").write_text("judge's")
    # a folder replaced by a link: that input cannot be given
    with pytest.raises(MirrorRefused, match="t3/x.txt"):
        mirror.push(SCOPE)
    assert not outside.exists() and not (tmp_path / "x.txt").exists()
    assert (
        worker / "t2" / "corpus.txt"
    ).read_text() == "judge's"  # the link was replaced, not followed


def test_fifos_sockets_and_oversize_files_are_refused_without_reading(folders):
    """A fifo (which would block a reader) and a sparse file past the cap: refused, never opened for long."""
    judge, worker, mirror = folders
    os.mkfifo(worker / "pipe.bin")
    with open(worker / "sparse.bin", "wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(MirrorRefused) as e:
        mirror.pull(SCOPE)
    assert "pipe.bin is a fifo" in str(
        e.value
    ) and "sparse.bin has 1073741824 bytes, over the limit" in str(e.value)
    assert not (judge / "pipe.bin").exists() and not (judge / "sparse.bin").exists()


def test_too_many_entries_are_refused(folders):
    judge, worker, mirror = folders
    for i in range(150):
        (worker / f"f{i}").write_text("")
    with pytest.raises(MirrorRefused, match="more than 100 files"):
        mirror.pull(SCOPE)


def test_deletions_propagate_both_ways(folders):
    """The worker's atomic replace (temp file, rename) leaves no stray copy; a file the judge deletes goes."""
    judge, worker, mirror = folders
    (worker / "ckpt.tmp").write_bytes(b"1")
    mirror.pull(SCOPE)
    os.replace(worker / "ckpt.tmp", worker / "ckpt.pt")
    mirror.pull(SCOPE)
    assert sorted(p.name for p in judge.iterdir()) == ["ckpt.pt"]
    (judge / "ckpt.pt").unlink()
    mirror.push(SCOPE)
    assert not (worker / "ckpt.pt").exists()


def test_a_worker_file_the_judge_rewrites_becomes_the_judges_input(folders):
    """A test truncating the worker's checkpoint: the truncated bytes are what the worker reads next."""
    judge, worker, mirror = folders
    (worker / "ckpt.pt").write_bytes(b"0123456789")
    mirror.pull(SCOPE)
    (judge / "ckpt.pt").write_bytes(b"01234")
    mirror.push(SCOPE)
    assert (worker / "ckpt.pt").read_bytes() == b"01234"
    (worker / "ckpt.pt").write_bytes(b"rewritten")  # now the judge's input: not copied back
    mirror.pull(SCOPE)
    assert (judge / "ckpt.pt").read_bytes() == b"01234"


def test_a_call_mirrors_only_the_test_folders_its_arguments_name(
    folders: tuple[Path, Path, Mirror],
) -> None:
    """Paths, strings (in a command line too), memmaps and dataclass fields inside the judge's folder name their
    test folder; anything else names none, so a call without files costs no copying."""
    import dataclasses

    import numpy as np

    judge, _, mirror = folders
    (judge / "tmp" / "t0").mkdir(parents=True)
    np.zeros(4, dtype=np.uint16).tofile(judge / "tmp" / "t0" / "tokens.bin")
    memmap = np.memmap(judge / "tmp" / "t0" / "tokens.bin", dtype=np.uint16, mode="r")

    @dataclasses.dataclass
    class Where:
        path: object

    args = [
        judge / "tmp" / "t1" / "a.pt",
        {"k": f"--out={judge}/tmp/t2/x"},
        (Where(str(judge / "tmp" / "t3")),),
        memmap,
    ]
    assert mirror.scopes([args, {}]) == ["tmp/t0", "tmp/t1", "tmp/t2", "tmp/t3"]
    assert mirror.scopes([[1, "x", torch.zeros(2), "/elsewhere/a.pt"], {}]) == []


# -- sizes ------------------------------------------------------------------------------------


def test_a_frame_that_claims_more_than_it_sends_costs_what_it_sent():
    """A header declaring 400 MiB, 64 bytes, then silence: the read times out having allocated ~64 bytes."""
    r, w = os.pipe()
    os.write(w, channel.HEADER.pack(400 << 20) + b"x" * 64)
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(channel.ChannelTimeout, match="64 of 419430400"):
        channel.receive(r, limit=512 << 20, deadline=time.monotonic() + 0.3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    os.close(r)
    os.close(w)
    assert peak < 4 * channel.CHUNK, f"reading 64 bytes of a lying frame peaked at {peak} bytes"


def _frame(payload: bytes) -> tuple[dict, list]:
    """``payload`` sent as one frame (its length prefixed), received with a 1 MiB limit and a 64-byte tree limit."""
    r, w = os.pipe()
    try:
        os.write(w, channel.HEADER.pack(len(payload)) + payload)
        return channel.receive(r, limit=1 << 20, deadline=time.monotonic() + 5, tree_limit=64)
    finally:
        os.close(r)
        os.close(w)


def test_a_frame_whose_parts_do_not_add_up_is_refused_before_anything_is_sliced_or_parsed():
    """Each lie about a frame's parts is a ChannelError (the reply is unusable, the call fails), never an
    allocation by a claimed size: a part count past the payload, sizes summing to more or less than it, a
    JSON part over the tree limit, JSON that is not an object; a well-formed frame round-trips."""
    tree = b'{"ok":1}'
    sizes = struct.pack("<IQQ", 2, len(tree), 3)
    assert _frame(sizes + tree + b"abc")[0] == {"ok": 1}
    assert [bytes(b) for b in _frame(sizes + tree + b"abc")[1]] == [b"abc"]
    lies = {
        "no part count": b"\x01",
        "do not fit": struct.pack("<I", 0xFFFFFFFF)
        + b"\0" * 64,  # four billion sizes: not read, not allocated
        "parts of": struct.pack("<IQQ", 2, len(tree), 1 << 40) + tree + b"abc",
        "parts of 10 bytes in a payload of 12": struct.pack("<IQQ", 2, len(tree), 2)
        + tree
        + b"abcd",
        "0 parts": struct.pack("<I", 0),
        "over the limit of 64 bytes": struct.pack("<IQ", 1, 100) + b"[" * 100,
        "not a JSON object": struct.pack("<IQ", 1, 2) + b"[]",
        "JSONDecodeError": struct.pack("<IQ", 1, 3) + b"{x}",
    }
    for problem, payload in lies.items():
        with pytest.raises(channel.ChannelError, match=problem):
            _frame(payload)


def test_a_stride_zero_tensor_claiming_a_huge_shape_is_refused_before_it_is_built():
    """A 1-element storage viewed as 1.5 Gi elements: refused by the claimed size, not by the storage's."""
    big = torch.zeros(1).expand(3 << 29)
    enc = codec.Encoder()
    tree = enc.encode(big)
    dec = codec.Decoder(enc.storages, enc.blobs, max_value_bytes=16 << 20)
    with pytest.raises(codec.CodecError, match="exceeds the limit of 16777216 bytes per value"):
        dec.decode(tree)
    # uncapped: a cheap view
    assert codec.Decoder(enc.storages, enc.blobs).decode(tree).shape == big.shape


@pytest.mark.parametrize(
    "tree, problem",
    [
        ({"$": "bytes_column", "blob": 0, "lengths": [2, 2]}, "do not add up"),
        ({"$": "bytes_column", "blob": 0, "lengths": [5, -2]}, "do not add up"),
        ({"$": "bytes_column", "blob": 0, "lengths": [1.5, 1.5]}, "do not add up"),
        ({"$": "bytes_column", "blob": 0, "lengths": [True, 2]}, "do not add up"),
        ({"$": "bytes_column", "blob": 1, "lengths": [3]}, "out of range"),
        ({"$": "tuples", "columns": [[1, 2], [1]]}, "of one length"),
        ({"$": "tuples", "columns": []}, "non-empty"),
        ({"$": "tuples", "columns": [{"$": "bytes", "b64": ""}]}, "of one length"),
        ({"$": "dict", "keys": [1, 2], "values": [1]}, "of one length"),
    ],
    ids=[
        "lengths-short",
        "negative-length",
        "float-lengths",
        "bool-length",
        "no-such-blob",
        "uneven-columns",
        "no-columns",
        "column-not-a-list",
        "more-keys-than-values",
    ],
)
def test_columns_whose_parts_do_not_fit_are_refused(tree, problem):
    """A column of bytes whose lengths do not add up to its blob, or columns of unequal lengths, are
    refused before any value is built from them (a hostile reply cannot make the judge slice past a blob
    or pair keys with the wrong values)."""
    with pytest.raises(codec.CodecError, match=problem):
        codec.Decoder([], [b"abc"]).decode(tree)


def test_megabyte_exception_messages_are_cut_in_the_judge():
    """A reply whose message and traceback are megabytes: the rebuilt exception keeps a few thousand characters."""
    error = {
        "types": ["builtins.ValueError"] * 1000,
        "args": ["m" * (4 << 20)],
        "message": "m" * (4 << 20),
        "traceback": "t" * (4 << 20),
    }
    exc = rebuild_exception(error, chars=4000)
    assert isinstance(exc, ValueError)
    assert len(str(exc)) < 5000 and len(worker_traceback(exc)) < 5000
    assert (
        bounded_error(error, 4000)["args"] is None
        and len(bounded_error(error, 4000)["types"]) == 64
    )
