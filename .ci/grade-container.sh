#!/usr/bin/env bash
# Grade with `cs336 grade` on the container tier: the fallback where bubblewrap cannot start (an
# ubuntu-24.04 runner whose AppArmor still refuses it after .ci/allow-bwrap.sh, a Docker job).
# That tier runs each worker as a uid of its own, so it needs root, a staff tree no other user may
# read but for its public fixtures, and a Python and venv every user may run. A CI checkout (under
# /home/runner, its .venv inside it) has neither, so this lays one out as Gradescope's setup.sh and
# run_autograder do: the checkout's files in $CS336_CONTAINER_ROOT/source (locked down), the locked
# environment in $CS336_CONTAINER_ROOT/env (uv-managed Python where uv can download one), then
# `cs336 grade ARGS...` as root, run from the caller's folder (relative paths mean what they mean
# there); the output folders are handed back to the calling user.
#
#   sudo --preserve-env=PATH,UV_CACHE_DIR .ci/grade-container.sh --out grades-cpu --quiet [cs336 grade arguments]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
caller="$(pwd)"
[[ $EUID -eq 0 ]] || { echo "grade-container: run it as root (sudo): the container tier switches uid" >&2; exit 2; }
command -v uv >/dev/null || { echo "grade-container: uv is not on PATH (sudo --preserve-env=PATH)" >&2; exit 2; }
base="${CS336_CONTAINER_ROOT:-/opt/cs336-grade}"
rm -rf "$base"
mkdir -p "$base/source" "$base/env"
chmod 711 "$base"  # workers pass through to the public fixtures; they list nothing
chmod 755 "$base/env"

# the checkout's files as they are (tracked ones, uncommitted edits included), never its .venv or caches
git -c safe.directory="$repo" -C "$repo" ls-files -z | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$base/source"

python_version="$("$repo/.venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
export UV_PYTHON_INSTALL_DIR="$base/env/python" UV_PROJECT_ENVIRONMENT="$base/env/venv" UV_NO_PROGRESS=1
uv python install "$python_version" || echo "grade-container: no uv-managed Python $python_version (offline?); uv uses one it finds"
(cd "$base/source" && uv sync --locked --no-install-project --python "$python_version")
chmod -R a+rX "$base/env"
python="$base/env/venv/bin/python"
(cd "$base/source" && "$python" -I -B -c 'import sys, os; sys.path.insert(0, os.getcwd())
from cs336_staff.grade.container import lock_down; from pathlib import Path; lock_down(Path(sys.argv[1]))' "$base/source")

set +e
(cd "$caller" && PATH="$base/env/venv/bin:$PATH" PYTHONDONTWRITEBYTECODE=1 "$python" -I -B -c 'import sys; sys.path.insert(0, sys.argv.pop(1))
from cs336_assignment.cli import main; sys.exit(main(sys.argv[1:]))' "$base/source" grade "$@")
rc=$?
set -e
owner="${SUDO_UID:-}"
if [[ -n "$owner" ]]; then  # the results belong to whoever asked for them (actions/upload-artifact reads them)
    prev=""
    for arg in "$@"; do  # --out DIR (as the workflows write it)
        if [[ "$prev" == "--out" ]]; then
            case "$arg" in /*) out="$arg" ;; *) out="$caller/$arg" ;; esac
            chown -R "$owner:${SUDO_GID:-$owner}" "$out" || true
        fi
        prev="$arg"
    done
fi
exit "$rc"
