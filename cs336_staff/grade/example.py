"""The bundled example submission: the reference solution, packaged as a student would package it.

``cs336 grade`` with no argument grades this, so a newcomer sees a complete full-marks report at
once. When the repository has ``make_submission.sh``, it is run in a scratch copy (so the real
tree is never touched) and its zip is used: the example then also checks the packaging script.
Otherwise the same files are zipped directly.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

ZIP_NAME = "cs336-assignment-submission.zip"


def _zip_directly(root: Path, dest: Path) -> None:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((root / "cs336_assignment").rglob("*.py")):
            if "__pycache__" not in p.parts:
                zf.write(p, p.relative_to(root).as_posix())
        zf.write(root / "adapters.py", "adapters.py")


def build_example(root: Path, dest_dir: Path) -> tuple[Path, str]:
    """Write the reference submission zip into ``dest_dir``; return its path and how it was built."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / ZIP_NAME
    script = root / "make_submission.sh"
    if script.is_file():
        with tempfile.TemporaryDirectory(prefix="cs336-example-") as tmp:
            t = Path(tmp)
            shutil.copytree(
                root / "cs336_assignment",
                t / "cs336_assignment",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
            for name in ("adapters.py", "make_submission.sh", "writeup.pdf"):
                if (root / name).is_file():
                    shutil.copy2(root / name, t / name)
            try:
                p = subprocess.run(
                    ["bash", "make_submission.sh"],
                    cwd=t,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                p = None
                why = str(e)
            made = t / ZIP_NAME
            if p is not None and p.returncode == 0 and made.is_file():
                shutil.move(made, dest)
                return dest, "built by make_submission.sh"
            why = (p.stderr or p.stdout).strip()[-500:] if p is not None else why
        _zip_directly(root, dest)
        return (
            dest,
            f"make_submission.sh failed in a scratch copy ({why}); zipped the same files directly",
        )
    _zip_directly(root, dest)
    return dest, "zipped cs336_assignment/**/*.py and adapters.py (no make_submission.sh yet)"
