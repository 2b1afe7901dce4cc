#!/usr/bin/env bash
# Build cs336-assignment-submission.zip: exactly what the graders run, and nothing else.
#
#   ./make_submission.sh
#
# The zip holds cs336_assignment/ (your code), adapters.py, and writeup.pdf if it exists. It leaves
# out caches (__pycache__, *.pyc), virtualenvs, hidden files, data and checkpoints (*.bin, *.npy,
# *.pt, data/, checkpoints/, ...) and any single file over 1 MB, and lists what it left out.
# It refuses (exit status 1, nothing written) if the package does not import, since the graders
# could not run anything, or if the zip would exceed 10 MB. It prints the manifest when done.
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

if [[ ! -d cs336_assignment || ! -f adapters.py ]]; then
    echo "make_submission.sh: error: cs336_assignment/ or adapters.py is missing next to me; run me from the assignment's root. Nothing was written." >&2
    exit 1
fi

# 1. The package must import: adapters.py and every module of cs336_assignment/.
if ! "${python[@]}" - <<'EOF'
import importlib, pkgutil, sys, traceback
sys.path.insert(0, ".")
try:
    import adapters
    import cs336_assignment
    for info in pkgutil.walk_packages(cs336_assignment.__path__, "cs336_assignment."):
        importlib.import_module(info.name)
except BaseException:
    traceback.print_exc()
    sys.exit(1)
EOF
then
    echo "make_submission.sh: error: your code does not import (traceback above); fix it, then run me again. Nothing was written." >&2
    exit 1
fi

# 2. Zip what is graded, atomically, refusing if too big.
"${python[@]}" - <<'EOF'
import os
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path("cs336-assignment-submission.zip")
MAX_ZIP = 10 * 1024 * 1024
MAX_FILE = 1024 * 1024
SKIP_DIRS = {"venv", "env", "data", "checkpoints", "ckpts", "runs", "wandb", "outputs", "node_modules"}
SKIP_SUFFIXES = {
    ".so", ".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".npy", ".npz", ".memmap",
    ".pkl", ".pickle", ".h5", ".arrow", ".parquet", ".zip", ".tar", ".gz", ".tgz", ".xz", ".log",
}


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def fail(message: str) -> None:
    print(f"make_submission.sh: error: {message}. Nothing was written.", file=sys.stderr)
    sys.exit(1)


files, skipped = [], []  # skipped: data, checkpoints, large files (caches are dropped silently)
for root, dirs, names in os.walk("cs336_assignment"):
    kept = []
    for d in sorted(dirs):
        if d.startswith(".") or d == "__pycache__" or d.endswith(".egg-info"):
            continue
        if d in SKIP_DIRS:
            skipped.append((Path(root, d), "data/checkpoint directory"))
            continue
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
if Path("writeup.pdf").is_file():
    files.append(Path("writeup.pdf"))

fd, tmp = tempfile.mkstemp(prefix=".submission.", suffix=".zip", dir=".")
os.close(fd)
try:
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, path.as_posix())
    size = Path(tmp).stat().st_size
    if size > MAX_ZIP:
        largest = sorted(files, key=lambda p: p.stat().st_size, reverse=True)[:5]
        listing = ", ".join(f"{p} ({mib(p.stat().st_size)})" for p in largest)
        fail(f"the zip would be {mib(size)}, over the {mib(MAX_ZIP)} limit; largest files: {listing}; remove what the graders do not need")
    os.replace(tmp, OUT)
finally:
    Path(tmp).unlink(missing_ok=True)

print(f"Wrote {OUT} ({mib(size)}, {len(files)} files):")
for path in files:
    print(f"  {mib(path.stat().st_size):>10}  {path.as_posix()}")
if not Path("writeup.pdf").is_file():
    print("(no writeup.pdf next to adapters.py; add one if the assignment asks for a writeup)")
if skipped:
    print("Left out:")
    for path, why in skipped:
        print(f"  {path.as_posix()}  ({why})")
EOF
