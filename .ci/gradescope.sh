#!/usr/bin/env bash
# CI: the Gradescope autograder from scratch, as Gradescope runs it. Builds dist/autograder.zip,
# lays out a whole /autograder in a temporary folder, runs its setup.sh with an empty uv cache (uv,
# Python and every wheel downloaded, as when Gradescope builds the image), then its run_autograder
# on the reference -- as root without user namespaces (cs336_staff/grade/standin.py, the stand-in
# for Gradescope's Docker) where this machine can make one -- and checks that the reference gets
# every point the build says Gradescope grades, within the 10 minutes README promises.
#
#   .ci/gradescope.sh          # needs root, network (PyPI, astral.sh), and for the stand-in
#                              # Debian's uidmap with root:0:65536 in /etc/subuid and /etc/subgid
set -euo pipefail
cd "$(dirname "$0")/.."
limit_s=600

work="$(mktemp -d /tmp/cs336-gradescope-ci-XXXXXX)"
trap 'rm -rf "$work"' EXIT
chmod 711 "$work"  # a worker must pass through it to the venv and the public fixtures

uv run cs336 autograder "$work/dist" | tee "$work/build.txt"
points="$(sed -n 's/.*set the assignment.s Autograder points to \([0-9.]*\)\..*/\1/p' "$work/build.txt")"

root="$work/autograder"
mkdir -p "$root/source" "$root/submission" "$root/results"
uv run python - "$work/dist/autograder.zip" "$root/source" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf:
    zf.extractall(sys.argv[2])
PY
chmod 755 "$root/source/setup.sh" "$root/source/run_autograder"
cp "$root/source/run_autograder" "$root/run_autograder"

env_dir="$work/opt-cs336"
echo "==> setup.sh with an empty uv cache"
(cd "$root/source" && UV_CACHE_DIR="$work/uv-cache" CS336_AUTOGRADER_ENV="$env_dir" bash ./setup.sh)
rm -rf "$work/uv-cache"  # the image keeps the environment, not the cache

uv run python - "$root/submission" <<'PY'
import sys, tempfile, zipfile
from pathlib import Path
from cs336_staff.grade.example import build_example
zip_path, how = build_example(Path("."), Path(tempfile.mkdtemp()))
print(f"the reference, {how}")
zipfile.ZipFile(zip_path).extractall(sys.argv[1])
PY

if [[ $EUID -eq 0 ]]; then  # the stand-in's needs (CI machines are disposable)
    command -v newuidmap >/dev/null || { apt-get update -qq && apt-get install -y -qq uidmap; } || true
    for f in /etc/subuid /etc/subgid; do
        grep -qs '^root:0:65536' "$f" || echo 'root:0:65536' >> "$f"
    done
fi
cmd=(env "CS336_AUTOGRADER_ROOT=$root" "CS336_AUTOGRADER_ENV=$env_dir" "$root/run_autograder")
why="$(uv run python -c 'from cs336_staff.grade import standin; print(standin.unavailable() or "")')"
if [[ -z "$why" ]]; then
    echo "==> run_autograder as root without user namespaces (the stand-in for Gradescope's Docker)"
    mapfile -d '' cmd < <(uv run python -c 'import sys; from cs336_staff.grade import standin; sys.stdout.write("\0".join(standin.command(sys.argv[1:])) + "\0")' "${cmd[@]}")
else
    echo "==> run_autograder here as it is (no stand-in: $why)"
fi
start=$SECONDS
"${cmd[@]}" > "$work/stdout.txt" 2>&1 || { tail -50 "$work/stdout.txt"; exit 1; }
elapsed=$((SECONDS - start))

uv run python - "$root/results/results.json" "$points" "$elapsed" "$limit_s" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
points, elapsed, limit = float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = data["extra_data"]
print(f"run_autograder: {data['score']} / {x.get('max_score')} in {elapsed} s, "
      f"tier {x.get('isolation', {}).get('tier')}, network {x.get('isolation', {}).get('network', '-')}")
if data["score"] != points or x.get("max_score") != points:
    sys.exit(f"the reference must get every CPU point ({points}): {data['output'][-3000:]}")
if elapsed > limit:
    sys.exit(f"run_autograder took {elapsed} s, over the {limit} s README promises")
PY
