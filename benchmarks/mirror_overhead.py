"""Mirror overhead: what copying a test's folder around a call adds, against the call's own round trip.

    uv run python benchmarks/mirror_overhead.py [--calls 200] [--files 3]

The peer, timed in the same run: one empty request and reply through ``channel`` over a pipe to a
thread (the least any call to the worker costs). The figure: ``Mirror.push`` + ``Mirror.pull`` (on tmpfs, as in grading) for
one test folder holding ``--files`` small files that the judge wrote and one the worker rewrites
each call (a checkpoint), and ``Mirror.scopes`` over a call's arguments that name no file (a list
of 10,000 ints). Prints each cost per call and its ratio to the round trip; no absolute assertion.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cs336_staff.grade.mirror import Mirror  # noqa: E402
from cs336_staff.worker import channel  # noqa: E402


def round_trip(calls: int) -> float:
    """Seconds per empty request/reply through two pipes and an echoing thread."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()

    def echo() -> None:
        for _ in range(calls):
            msg, blobs = channel.receive(req_r, 1 << 20)
            channel.send(rep_w, {"ok": None}, [])

    t = threading.Thread(target=echo)
    t.start()
    start = time.perf_counter()
    for _ in range(calls):
        channel.send(req_w, {"op": "call", "args": [], "kwargs": {}}, [])
        channel.receive(rep_r, 1 << 20)
    elapsed = time.perf_counter() - start
    t.join()
    for fd in (req_r, req_w, rep_r, rep_w):
        os.close(fd)
    return elapsed / calls


def mirrored(calls: int, files: int) -> tuple[float, float]:
    """Seconds per call of push + pull for one test folder, and of scopes over file-free arguments."""
    shm = Path("/dev/shm")  # grading keeps both folders on tmpfs
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        judge, worker = Path(tmp) / "judge", Path(tmp) / "worker"
        folder = judge / "tmp" / "test_something0"
        folder.mkdir(parents=True)
        worker.mkdir()
        for i in range(files):
            (folder / f"input{i}.txt").write_bytes(os.urandom(1024))
        mirror = Mirror(judge, worker, file_bytes=1 << 26, entries=5000)
        scopes = mirror.scopes([[folder / "input0.txt", folder / "ckpt.pt"], {}])
        sync = 0.0
        for i in range(calls):
            start = time.perf_counter()
            mirror.push(scopes)
            sync += time.perf_counter() - start
            # the call
            (worker / "tmp" / "test_something0" / "ckpt.pt").write_bytes(
                i.to_bytes(8, "little") * 128
            )
            start = time.perf_counter()
            mirror.pull(scopes)
            sync += time.perf_counter() - start
        sync /= calls
        plain = [list(range(10_000)), {}]
        start = time.perf_counter()
        for _ in range(calls):
            assert not mirror.scopes(plain)
        scan = (time.perf_counter() - start) / calls
    return sync, scan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--files", type=int, default=3)
    args = ap.parse_args()
    peer = round_trip(args.calls)
    sync, scan = mirrored(args.calls, args.files)
    print(f"round trip (peer):             {peer * 1e3:8.3f} ms per call")
    print(
        f"push + pull of one test folder: {sync * 1e3:8.3f} ms per call  ({sync / peer:.1f}x the round trip)"
    )
    print(
        f"scopes of 10,000 file-free args: {scan * 1e3:7.3f} ms per call  ({scan / peer:.1f}x the round trip)"
    )


if __name__ == "__main__":
    main()
