#!/usr/bin/env bash
# Build cs336-assignment-submission.zip: exactly what the graders run, and nothing else.
#
#   ./make_submission.sh
#
# The zip holds cs336_assignment/ (your code), adapters.py, and writeup.pdf (your written
# answers; the script warns if it is missing). It leaves out caches (__pycache__, *.pyc), hidden
# files, virtualenvs (any directory with a pyvenv.cfg or conda-meta/, whatever its name), data and
# checkpoints (*.bin, *.npy, *.pt, data/, checkpoints/, ...) and any single file over 1 MB, and
# lists what it left out. Then it unpacks the zip into an empty directory and imports adapters.py
# and every module of cs336_assignment/ from there, so a module the zip lacks is caught here, not
# by the graders. It refuses (exit status 1) if that import fails, if writeup.pdf is over its own
# limit of 5 MB (compress it: see the message), or if the zip would exceed 10 MB;
# a refusal renames an earlier cs336-assignment-submission.zip to
# cs336-assignment-submission.zip.stale, since it no longer holds your code. It prints the
# manifest when done.
#
# Python: `uv run python` by default; set CS336_PYTHON=/path/to/python to use another interpreter.
set -euo pipefail
cd "$(dirname "$0")"

if [[ -n "${CS336_PYTHON:-}" ]]; then
    python=("$CS336_PYTHON")
elif command -v uv >/dev/null 2>&1; then
    python=(uv run --quiet python)
else
    echo "make_submission.sh: error: uv not found; install it (pip install uv) or set CS336_PYTHON" >&2
    exit 1
fi

exec "${python[@]}" - <<'EOF'
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path("cs336-assignment-submission.zip")
STALE = Path(f"{OUT}.stale")
MAX_ZIP = 10 * 1024 * 1024
MAX_FILE = 1024 * 1024
MAX_WRITEUP = 5 * 1024 * 1024  # writeup.pdf's own limit: text and a few figures fit in far less
WRITEUP = Path("writeup.pdf")
SKIP_DIRS = {"data", "checkpoints", "ckpts", "runs", "wandb", "outputs", "node_modules", "site-packages"}
SKIP_SUFFIXES = {
    ".so", ".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".npy", ".npz", ".memmap",
    ".pkl", ".pickle", ".h5", ".arrow", ".parquet", ".zip", ".tar", ".gz", ".tgz", ".xz", ".log",
}
IMPORT_CHECK = r"""
import importlib, os, pkgutil, sys, traceback
root = os.path.realpath(sys.argv[1])
sys.path.insert(0, root)
try:
    import adapters
    import cs336_assignment
    for info in pkgutil.walk_packages(cs336_assignment.__path__, "cs336_assignment."):
        importlib.import_module(info.name)
except BaseException:
    traceback.print_exc()
    sys.exit(1)
outside = sorted(
    f"{name} ({m.__file__})" for name, m in list(sys.modules.items())
    if name.split(".")[0] in ("adapters", "cs336_assignment") and getattr(m, "__file__", None)
    and not os.path.realpath(m.__file__).startswith(root + os.sep)
)
if outside:
    print("imported from outside the zip: " + ", ".join(outside), file=sys.stderr)
    sys.exit(1)
"""


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def refuse(message: str) -> None:
    """Stop without a zip; an older zip no longer holds this code, so it must not look current."""
    print(f"make_submission.sh: error: {message}.", file=sys.stderr)
    if OUT.exists():
        os.replace(OUT, STALE)
        print(
            f"make_submission.sh: your previous {OUT} does not hold this code, so it was renamed to {STALE}; "
            "do not upload it. Fix the problem above and run me again.",
            file=sys.stderr,
        )
    else:
        print("make_submission.sh: no zip was written.", file=sys.stderr)
    sys.exit(1)


def is_virtualenv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


if not Path("cs336_assignment").is_dir() or not Path("adapters.py").is_file():
    refuse("cs336_assignment/ or adapters.py is missing next to me; run me from the assignment's root")

files, skipped = [], []  # skipped: what the graders do not get (caches are dropped silently)
for root, dirs, names in os.walk("cs336_assignment"):
    kept = []
    for d in sorted(dirs):
        path = Path(root, d)
        if d.startswith(".") or d == "__pycache__" or d.endswith(".egg-info"):
            continue
        if is_virtualenv(path):
            skipped.append((path, "a virtualenv (it has pyvenv.cfg or conda-meta/)"))
        elif d in SKIP_DIRS:
            skipped.append((path, "data/checkpoint directory"))
        else:
            kept.append(d)
    dirs[:] = kept
    for name in sorted(names):
        path = Path(root, name)
        if name.startswith(".") or path.suffix in {".pyc", ".pyo"}:
            continue
        if path.suffix.lower() in SKIP_SUFFIXES:
            skipped.append((path, "data/checkpoint file"))
        elif path.is_symlink() or not path.is_file():
            skipped.append((path, "not a regular file"))
        elif path.stat().st_size > MAX_FILE:
            skipped.append((path, f"larger than {mib(MAX_FILE)}: {mib(path.stat().st_size)}"))
        else:
            files.append(path)
files.append(Path("adapters.py"))
has_writeup = WRITEUP.is_file()
if has_writeup and WRITEUP.stat().st_size > MAX_WRITEUP:
    refuse(
        f"{WRITEUP} is {mib(WRITEUP.stat().st_size)}, over its own limit of {mib(MAX_WRITEUP)}. Compress it: "
        f"`gs -sDEVICE=pdfwrite -dPDFSETTINGS=/ebook -o writeup-small.pdf {WRITEUP}` (Ghostscript; or your "
        "editor's \"reduce file size\" export), and save plots as PNG at about 150 dpi rather than vector "
        "graphics with many points or full-resolution photos; then replace writeup.pdf with the smaller file"
    )
if has_writeup:
    files.append(WRITEUP)

fd, tmp = tempfile.mkstemp(prefix=".submission.", suffix=".zip", dir=".")
os.close(fd)
scratch = Path(tempfile.mkdtemp(prefix="cs336-submission-check-"))
try:
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, path.as_posix())
    size = Path(tmp).stat().st_size
    if size > MAX_ZIP:
        largest = sorted(files, key=lambda p: p.stat().st_size, reverse=True)[:5]
        listing = ", ".join(f"{p} ({mib(p.stat().st_size)})" for p in largest)
        refuse(f"the zip would be {mib(size)}, over the {mib(MAX_ZIP)} limit; largest files: {listing}; move what the graders "
               "do not need (data, outputs, notebooks) out of cs336_assignment/")

    # Import the zip's own contents, unpacked in an empty directory, as the graders will.
    with zipfile.ZipFile(tmp) as zf:
        zf.extractall(scratch)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT_CHECK, str(scratch)],
        cwd=scratch, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )
    if check.returncode != 0:
        sys.stderr.write(check.stdout + check.stderr)
        hints = [
            f"{p.as_posix()} is not in the zip ({why}) but the code imports it"
            for p, why in skipped
            if p.suffix == ".py" and re.search(rf"\b{re.escape(p.stem)}\b", check.stderr)
        ]
        refuse(
            "the code in the zip does not import (traceback above), so the graders could not run anything"
            + "".join(f"; {h}" for h in hints)
        )
    os.replace(tmp, OUT)
finally:
    Path(tmp).unlink(missing_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)
STALE.unlink(missing_ok=True)

print(f"Wrote {OUT} ({mib(size)}, {len(files)} files; its contents import on their own):")
for path in files:
    print(f"  {mib(path.stat().st_size):>10}  {path.as_posix()}")
if skipped:
    print("Left out:")
    for path, why in skipped:
        print(f"  {path.as_posix()}  ({why})")
if not has_writeup:
    print(
        "make_submission.sh: WARNING: no writeup.pdf next to adapters.py. The assignment's written answers are "
        "graded from writeup.pdf: without it they get no points. Add it and run me again.",
        file=sys.stderr,
    )
EOF
