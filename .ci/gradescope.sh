#!/usr/bin/env bash
# CI: the Gradescope autograder from scratch, as Gradescope runs it: tests/staff/test_gradescope.py
# with CS336_GRADESCOPE_FRESH=1. It builds autograder.zip (`cs336 autograder`), lays out a whole
# /autograder in a temporary folder, runs the real setup.sh from an empty uv cache (every wheel, and
# uv itself unless CS336_GRADESCOPE_UV names one, downloaded, as when Gradescope builds the image),
# then the real run_autograder on three uploads -- the reference, a broken copy, and a hostile copy
# that attacks results.json, the staff tests and the hidden tests -- as root without user namespaces
# (cs336_staff/grade/standin.py, the stand-in for Gradescope's Docker), so the container tier
# isolates the worker. Nothing may skip. Then it checks the reference's run_autograder against the
# 10 minutes the README promises (a CI check, not a test: tests assert no seconds).
#
#   .ci/gradescope.sh    # needs root and PyPI (uv from astral.sh, else from PyPI, unless CS336_GRADESCOPE_UV=/path/to/uv);
#                        # installs Debian's uidmap and root:0:65536 in /etc/subuid, /etc/subgid if missing
set -euo pipefail
cd "$(dirname "$0")/.."
limit_s=600

if [[ $EUID -ne 0 ]]; then
    echo "gradescope.sh: needs root (run_autograder runs as root, as on Gradescope; the stand-in needs root)" >&2
    exit 2
fi
# the stand-in's needs (CI machines are disposable)
command -v newuidmap >/dev/null || { apt-get update -qq && apt-get install -y -qq uidmap; }
for f in /etc/subuid /etc/subgid; do
    grep -qs '^root:0:65536' "$f" || echo 'root:0:65536' >> "$f"
done

times="$(mktemp /tmp/cs336-gradescope-times-XXXXXX.json)"
trap 'rm -f "$times"' EXIT
start=$SECONDS
CS336_GRADESCOPE_FRESH=1 CS336_GRADESCOPE_TIMES="$times" CS336_LONG_CHECKS=1 \
    uv run pytest -p no:cacheprovider -q -rs tests/staff/test_gradescope.py
echo "gradescope.sh: the whole check took $((SECONDS - start)) s"

uv run python - "$times" "$limit_s" <<'PY'
import json, sys
seconds, limit = json.load(open(sys.argv[1])), float(sys.argv[2])
for what, s in seconds.items():
    print(f"  {what}: {s:.0f} s")
if seconds["run_autograder reference"] > limit:
    sys.exit(f"run_autograder took {seconds['run_autograder reference']:.0f} s on the reference, over the "
             f"{limit:.0f} s the README promises")
PY
