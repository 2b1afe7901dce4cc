"""`.ci/allow-bwrap.sh`, the workflows' first step before grading: which isolation route it took, told
to the log and to the step's outputs (`route=`, `tier=`), and the fallback to the container tier where
bubblewrap cannot start (inside ``standin``: root without user namespaces, as in Docker).

The AppArmor route itself (a profile loaded for the .venv's bwrap) needs a machine with AppArmor's
user-namespace restriction on, such as GitHub's ubuntu-24.04: not this one (README, On GitHub Actions).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cs336_staff.grade import sandbox, standin

pytestmark = pytest.mark.staff

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "allow-bwrap.sh"
KNOB = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
RESTRICTED = KNOB.exists() and KNOB.read_text().strip() != "0"


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.mark.skipif(
    RESTRICTED,
    reason="AppArmor restricts user namespaces here: the script would load a profile (sudo)",
)
@pytest.mark.skipif(
    sandbox.probe() is not None, reason=f"bubblewrap cannot start here: {sandbox.probe()}"
)
def test_allow_bwrap_reports_the_bubblewrap_tier_where_the_sandbox_starts(tmp_path):
    """No restriction to lift: no profile loaded, route none-needed, tier bubblewrap, exit 0."""
    out = tmp_path / "github_output"
    r = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "GITHUB_OUTPUT": str(out)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert outputs(out) == {"route": "none-needed", "tier": "bubblewrap"}, out.read_text()


@pytest.mark.skipif(
    standin.unavailable() is not None, reason=f"no container stand-in here: {standin.unavailable()}"
)
def test_allow_bwrap_falls_back_to_the_container_tier_only_when_asked(tmp_path):
    """Where bubblewrap cannot start: with --fallback-container the step passes, saying route=failed and
    tier=container (the workflows then grade on that tier); without it the step fails with the reason."""
    tmp_path.chmod(0o755)
    out = tmp_path / "github_output"
    r = subprocess.run(
        standin.command(
            ["env", f"GITHUB_OUTPUT={out}", "bash", str(SCRIPT), "--fallback-container"]
        ),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert outputs(out) == {"route": "failed", "tier": "container"}, out.read_text()
    assert "does not start" in r.stderr
    strict = subprocess.run(
        standin.command(["bash", str(SCRIPT)]),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert strict.returncode == 1 and "does not start" in strict.stderr, (
        strict.stdout + strict.stderr
    )
