"""Snapshot files: ``.npz`` arrays under ``fixtures/`` generated from the reference, never by hand.

A test that has no independent oracle compares its outputs to a snapshot::

    def test_cruncher_forward_matches_snapshot(snapshot):
        snapshot.assert_match("cruncher_forward", {"out": out}, rtol=1e-6, atol=1e-6)

Public tests write to ``fixtures/snapshots/<test module>/<name>.npz``; tests under ``tests/hidden/``
write to ``fixtures/hidden/snapshots/...`` (left out of the handout). Staff regenerate every file
from the reference with ``uv run cs336 snapshots`` (which runs ``pytest --snapshot-update``); the
files are written deterministically (fixed zip timestamps, sorted keys), so two runs give the same
bytes and ``uv run cs336 snapshots --check`` can tell when the reference and the files disagree.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "uv run cs336 snapshots"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def to_numpy(value) -> np.ndarray:
    """A tensor (any dtype, any device), array or number as a NumPy array; bf16/fp8 become fp32."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` byte-for-byte deterministically (sorted names, fixed dates)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
    os.replace(tmp, path)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {name: f[name] for name in f.files}


def snapshot_dir(test_file: Path) -> Path:
    """Where the snapshots of ``test_file`` live (``CS336_SNAPSHOT_DIR`` overrides ``fixtures/``)."""
    base = Path(os.environ.get("CS336_SNAPSHOT_DIR", ROOT / "fixtures"))
    rel = test_file.resolve().relative_to(ROOT / "tests")
    if rel.parts[0] == "hidden":
        return base / "hidden" / "snapshots" / Path(*rel.parts[1:]).with_suffix("")
    return base / "snapshots" / rel.with_suffix("")


def describe_mismatch(name: str, key: str, actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str:
    """A message that says which array diverged, where first, by how much, and what to do."""
    if actual.shape != expected.shape:
        return f"snapshot {name!r}: array {key!r} has shape {actual.shape}, expected {expected.shape}"
    a = actual.astype(np.float64) if actual.dtype.kind in "fc" else actual
    e = expected.astype(np.float64) if expected.dtype.kind in "fc" else expected
    bad = ~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
    diff = np.abs(a - e) if a.dtype.kind in "fciu" else np.zeros(1)
    return (
        f"snapshot {name!r}: array {key!r} differs at {int(bad.sum())} of {a.size} positions; "
        f"first at index {first}: got {a[first]!r}, expected {e[first]!r} "
        f"(max abs diff {float(diff.max()):.3g}, rtol={rtol}, atol={atol}).\n"
        f"If the reference changed on purpose, staff regenerate with `{REGENERATE}`."
    )


class Snapshot:
    """The ``snapshot`` fixture: compare named arrays to a stored ``.npz``, or write it in update mode."""

    def __init__(self, test_file: Path, update: bool):
        self.dir = snapshot_dir(test_file)
        self.update = update

    def assert_match(self, name: str, arrays: dict, rtol: float = 1e-6, atol: float = 1e-6) -> None:
        arrays = {k: to_numpy(v) for k, v in arrays.items()}
        path = self.dir / f"{name}.npz"
        if self.update:
            write_npz(path, arrays)
            return
        if not path.exists():
            raise AssertionError(f"snapshot file {path.relative_to(ROOT)} is missing; staff create it with `{REGENERATE}`")
        expected = read_npz(path)
        if set(expected) != set(arrays):
            raise AssertionError(
                f"snapshot {name!r}: arrays {sorted(arrays)} but the file has {sorted(expected)}; run `{REGENERATE}`"
            )
        for key in sorted(arrays):
            a, e = arrays[key], expected[key]
            if a.shape != e.shape or not np.allclose(
                a.astype(np.float64) if a.dtype.kind in "fc" else a,
                e.astype(np.float64) if e.dtype.kind in "fc" else e,
                rtol=rtol,
                atol=atol,
                equal_nan=True,
            ):
                raise AssertionError(describe_mismatch(name, key, a, e, rtol, atol))
