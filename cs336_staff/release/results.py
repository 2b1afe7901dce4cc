"""What the release's steps hand each other: a built ``Handout``, a ``Check`` line, a ``ReleaseError``.

The vocabulary of ``cs336_staff/release/``, in a module of its own that imports nothing of the
release, so that the builder (``build.py``), the checks (``check.py``, ``behaviour.py``,
``leftovers.py``, ``handout_parts.py``) and the command (``__init__.py``) all import it and none
of them imports another to reach it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cs336_staff.markers import Region

#: ``Check.render`` lists at most this many offenders of one check.
SHOW = 12


class ReleaseError(RuntimeError):
    """The handout cannot be built; the message says what to fix."""


class OutDirError(ReleaseError):
    """OUT_DIR cannot take the handout (a file, the repository, not empty without --force): bad input,
    which ``cs336 release`` reports with exit status 2, as every command does."""


@dataclass
class Handout:
    """A built handout: where it is, which files it has, what was stubbed and what was left out."""

    root: Path
    files: list[str] = field(default_factory=list)
    regions: dict[str, list[Region]] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Check:
    """One line of the ``release --check`` report: a check's name, whether it passed, what it found."""

    name: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [
            f"  [{'ok' if self.ok else 'FAIL'}]{' ' * (5 - (2 if self.ok else 4))}{self.name:<10} {self.summary}"
        ]
        shown = self.details[:SHOW]
        lines += [f"           {d}" for d in shown]
        if len(self.details) > SHOW:
            lines.append(f"           ... and {len(self.details) - SHOW} more")
        return "\n".join(lines)
