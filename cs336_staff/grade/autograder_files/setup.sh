#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu; the zip is
# unpacked in /autograder/source). It installs uv and the locked environment (uv.lock, the
# project itself left out: the reference and the tests stay only in the source folder, which
# run_autograder locks) where every user may read them, because the worker runs as a uid of its
# own. Written by `cs336 autograder` (cs336_staff/grade/autograder.py).
#
# Environment (all optional):
#   CS336_AUTOGRADER_ENV   where uv, Python and the venv go (default /opt/cs336; made world-readable)
#   CS336_AUTOGRADER_UV    an uv binary to use instead of downloading uv (a quick staff test passes
#                          its own, with UV_CACHE_DIR and UV_OFFLINE=1 to install from a warm cache)
#
# uv comes from astral.sh's installer, as Astral documents; where astral.sh cannot be reached (a
# network that lets only PyPI through, as on our CI runners), from PyPI's uv wheel, the same version.
set -euo pipefail
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
env_dir="${CS336_AUTOGRADER_ENV:-/opt/cs336}"
uv_version="@UV_VERSION@"
python_version="@PYTHON_VERSION@"

mkdir -p "$env_dir"
chmod 755 "$env_dir"
if [[ -n "${CS336_AUTOGRADER_UV:-}" ]]; then
    uv="$CS336_AUTOGRADER_UV"
else
    command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl ca-certificates; }
    if installer="$(curl -LsSf "https://astral.sh/uv/${uv_version}/install.sh")"; then
        env UV_UNMANAGED_INSTALL="$env_dir/bin" sh -c "$installer"
        uv="$env_dir/bin/uv"
    else
        echo "setup.sh: astral.sh could not be reached; installing uv ${uv_version} from PyPI instead" >&2
        pip_python=""  # a Python with pip (not a virtual environment's that has none)
        for candidate in python3 /usr/bin/python3 /usr/local/bin/python3; do
            if command -v "$candidate" >/dev/null && "$candidate" -m pip --version >/dev/null 2>&1; then
                pip_python="$candidate"
                break
            fi
        done
        if [[ -z "$pip_python" ]]; then
            apt-get update -qq && apt-get install -y -qq python3-pip
            pip_python=/usr/bin/python3
        fi
        # --target: uv's wheel unpacked in a folder of its own (no environment changed, so a distribution's
        # "externally managed" marker does not apply; the variable says so to the pip versions that ask)
        PIP_BREAK_SYSTEM_PACKAGES=1 "$pip_python" -m pip install --quiet --disable-pip-version-check \
            --target "$env_dir/uv-from-pypi" "uv==${uv_version}"
        uv="$env_dir/uv-from-pypi/bin/uv"
    fi
fi
export UV_PYTHON_INSTALL_DIR="$env_dir/python" UV_PROJECT_ENVIRONMENT="$env_dir/venv" UV_NO_PROGRESS=1
cd "$source_dir"
"$uv" sync --frozen --no-install-project --python "$python_version"
# What each run would otherwise redo in a container that keeps nothing: compile the environment's
# bytecode, and collect the graded tests (gradescope.py's `prepare`). Without -B, so the tests as
# pytest rewrote them stay in the source tree for every run to read.
"$env_dir/venv/bin/python" -I -c 'import sys, os; sys.path.insert(0, os.getcwd()); from cs336_staff.grade.gradescope import main; sys.exit(main())' \
    prepare --source "$source_dir"
chmod -R a+rX "$env_dir"
"$env_dir/venv/bin/python" -c "import torch, pytest, numpy; print('cs336 autograder environment ready: torch', torch.__version__)"
