"""Snapshot files: ``.npz`` arrays under ``fixtures/``, the reference solution's outputs.

A test that has no independent oracle compares its outputs to a snapshot::

    def test_cruncher_forward_matches_snapshot(snapshot):
        snapshot.assert_match("cruncher_forward", {"out": out}, rtol=1e-6, atol=1e-6)

The expected arrays of ``tests/test_<module>.py`` live in ``fixtures/snapshots/test_<module>/``.
They were generated from the reference solution, never by hand; if your output differs, the
failure says which array, where and by how much.
"""
# BEGIN STAFF-ONLY
# Staff side: tests under tests/hidden/ keep theirs in fixtures/hidden/snapshots/ (left out of
# the handout). `uv run cs336 snapshots` regenerates every file from the reference (it runs
# `pytest --snapshot-update`, an option only the staff conftest registers); the files are written
# deterministically (fixed zip timestamps, sorted keys), so two runs give the same bytes and
# `uv run cs336 snapshots --check` can tell when the reference and the files disagree.
# END STAFF-ONLY

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
STAFF_HINT = ""
# BEGIN STAFF-ONLY
STAFF_HINT = (
    " (staff: if the reference changed on purpose, regenerate with `uv run cs336 snapshots`)"
)
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
# END STAFF-ONLY


def to_numpy(value) -> np.ndarray:
    """A tensor (any dtype, any device), array or number as a NumPy array; bf16/fp8 become fp32."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
            value = value.float()
        return value.numpy()
    return np.asarray(value)


# BEGIN STAFF-ONLY
def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` byte-for-byte deterministically (sorted names, fixed dates)."""
    import io
    import os
    import zipfile

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


# END STAFF-ONLY
def read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {name: f[name] for name in f.files}


def snapshot_dir(test_file: Path) -> Path:
    """Where the snapshots of ``test_file`` live: ``fixtures/snapshots/<test module>/``."""
    base = ROOT / "fixtures"
    rel = test_file.resolve().relative_to(ROOT / "tests")
    # BEGIN STAFF-ONLY
    import os

    # `cs336 snapshots` writes to a scratch dir
    base = Path(os.environ.get("CS336_SNAPSHOT_DIR", base))
    if rel.parts[0] == "hidden":
        return base / "hidden" / "snapshots" / Path(*rel.parts[1:]).with_suffix("")
    # END STAFF-ONLY
    return base / "snapshots" / rel.with_suffix("")


def describe_mismatch(
    name: str, key: str, actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float
) -> str:
    """A message that says which array diverged, where first, by how much, and what to do."""
    if actual.shape != expected.shape:
        return (
            f"snapshot {name!r}: array {key!r} has shape {actual.shape}, expected {expected.shape}"
        )
    a = actual.astype(np.float64) if actual.dtype.kind in "fc" else actual
    e = expected.astype(np.float64) if expected.dtype.kind in "fc" else expected
    bad = ~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if a.ndim else ()
    diff = np.abs(a - e) if a.dtype.kind in "fciu" else np.zeros(1)
    return (
        f"snapshot {name!r}: array {key!r} differs at {int(bad.sum())} of {a.size} positions; "
        f"first at index {first}: got {a[first]!r}, expected {e[first]!r} "
        f"(max abs diff {float(diff.max()):.3g}, rtol={rtol}, atol={atol}){STAFF_HINT}"
    )


def _all_close(
    got: dict[str, np.ndarray], expected: dict[str, np.ndarray], rtol: float, atol: float
) -> bool:
    return set(got) == set(expected) and all(
        got[k].shape == expected[k].shape
        and np.allclose(
            got[k].astype(np.float64) if got[k].dtype.kind in "fc" else got[k],
            expected[k].astype(np.float64) if expected[k].dtype.kind in "fc" else expected[k],
            rtol=rtol,
            atol=atol,
            equal_nan=True,
        )
        for k in got
    )


class Snapshot:
    """The ``snapshot`` fixture: compare named arrays to a stored ``.npz``, or write it in update mode."""

    def __init__(self, test_file: Path, update: bool):
        self.dir = snapshot_dir(test_file)
        self.update = update

    def assert_match(
        self,
        name: str,
        arrays: dict,
        rtol: float = 1e-6,
        atol: float = 1e-6,
        explain: Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], str] | None = None,
    ) -> None:
        """Fail unless ``arrays`` match the stored ones; ``explain(got, expected)``, if given, writes
        the failure message (for arrays that encode something else, such as BPE merges)."""
        arrays = {k: to_numpy(v) for k, v in arrays.items()}
        path = self.dir / f"{name}.npz"
        # BEGIN STAFF-ONLY
        if self.update:
            write_npz(path, arrays)
            return
        # END STAFF-ONLY
        if not path.exists():
            raise AssertionError(
                f"snapshot file {path.relative_to(ROOT)} is missing from the handout{STAFF_HINT}"
            )
        expected = read_npz(path)
        if explain is not None and not _all_close(arrays, expected, rtol, atol):
            raise AssertionError(explain(arrays, expected))
        if set(expected) != set(arrays):
            raise AssertionError(
                f"snapshot {name!r}: the test produced arrays {sorted(arrays)} but the file has {sorted(expected)}{STAFF_HINT}"
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
