"""Run a command as root in a container without user namespaces: the container tier's test bed on a VM.

Docker's default seccomp profile (Gradescope's autograders run in it) forbids the user namespaces
bubblewrap needs while leaving root able to switch uid. On a VM where root lacks CAP_SYS_RESOURCE
(``sysctl user.max_user_namespaces=0`` refused) a faithful stand-in is a user namespace mapping
ids 0-65535 onto themselves (util-linux ``unshare``; Debian's ``uidmap`` package and a
``root:0:65536`` line in ``/etc/subuid`` and ``/etc/subgid``), inside which root holds every
capability of the new namespace, writes 0 to ``/proc/sys/user/max_user_namespaces`` so that no
user namespace can be created any more (bubblewrap fails as in Docker), and can still become
any uid below 65536.

One difference from Docker is undone for the test and one is left: where the grader's Python
lives under a folder other users cannot enter (pyenv under ``/root``), a private mount namespace
puts an enterable ``/root`` over it showing only that Python, as a container image's
``/usr/bin/python3`` would be; and the stand-in may create network namespaces (Docker's profile
refuses them), so a result here says the network was dropped where Gradescope's would say not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

MAP = ("--map-users=0,0,65536", "--map-groups=0,0,65536")
SCRIPT = r"""
set -eu
echo 0 > /proc/sys/user/max_user_namespaces
if [ -n "$CS336_STANDIN_HIDDEN_DIR" ]; then
    keep=/mnt; [ -d /mnt ] || keep=$(mktemp -d)
    mount --bind "$CS336_STANDIN_HIDDEN_DIR/$CS336_STANDIN_KEEP" "$keep"
    mount -t tmpfs -o mode=0755 standin "$CS336_STANDIN_HIDDEN_DIR"
    mkdir -p "$CS336_STANDIN_HIDDEN_DIR/$CS336_STANDIN_KEEP"
    mount --bind "$keep" "$CS336_STANDIN_HIDDEN_DIR/$CS336_STANDIN_KEEP"
fi
exec "$@"
"""


def _closed_ancestor(python: str) -> tuple[str, str] | None:
    """(the folder other users cannot enter, the child of it on the way to Python), if any."""
    prefix = Path(python).resolve().parent.parent
    for parent in reversed(prefix.parents):
        if parent != Path("/") and not parent.stat().st_mode & 0o001:
            child = prefix.relative_to(parent).parts[0]
            return str(parent), child
    return None


@lru_cache(maxsize=1)
def unavailable() -> str | None:
    """None if the stand-in works here; else why not and what to install."""
    if os.geteuid() != 0:
        return "the stand-in needs root"
    if shutil.which("unshare") is None or shutil.which("newuidmap") is None:
        return "needs util-linux's unshare and newuidmap: apt-get install -y uidmap util-linux"
    for f in ("/etc/subuid", "/etc/subgid"):
        lines = Path(f).read_text().splitlines() if Path(f).exists() else []
        if not any(line.startswith(("root:0:65536", "0:0:65536")) for line in lines):
            return f"{f} needs the line root:0:65536"
    try:
        proc = subprocess.run(
            command(["sh", "-c", "unshare --user true 2>/dev/null && exit 7; exit 0"]),
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the stand-in did not start: {e}"
    if proc.returncode != 0:
        return f"the stand-in did not start (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    return None


def command(argv: list[str], python: str = sys.executable) -> list[str]:
    """``argv`` wrapped so that it runs as root in the stand-in (``env`` passes the Python fix-up)."""
    closed = _closed_ancestor(python)
    fix = [
        f"CS336_STANDIN_HIDDEN_DIR={closed[0] if closed else ''}",
        f"CS336_STANDIN_KEEP={closed[1] if closed else ''}",
    ]
    return [
        "unshare",
        "--user",
        *MAP,
        "--mount",
        "--propagation",
        "private",
        "env",
        *fix,
        "sh",
        "-c",
        SCRIPT,
        "standin",
        *argv,
    ]
