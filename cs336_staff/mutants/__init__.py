"""The bug zoo: realistic wrong implementations, each a small patch of the reference.

One module per graded part (``optim.py``, ``data.py``, ...) defines ``MUTANTS: list[Mutant]``.
``uv run cs336 audit`` applies each in a scratch copy of the repository, runs the public tests
named by the mutant, and fails unless every mutant is caught.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    """A wrong implementation: replace the exact text ``old`` (which must occur once) by ``new``.

    ``tests`` are the public test paths that must catch it, relative to the repository root;
    ``why`` says what mistake a student would make to write this.
    """

    name: str
    file: str
    old: str
    new: str
    why: str
    tests: tuple[str, ...] = field(default_factory=tuple)

    def apply(self, root: Path) -> None:
        """Patch the copy of the repository at ``root``; fail loudly if the reference moved on."""
        path = root / self.file
        text = path.read_text()
        count = text.count(self.old)
        if count != 1:
            raise ValueError(
                f"mutant {self.name!r}: its `old` text occurs {count} times in {self.file} (must be exactly 1); "
                "update the mutant to match the current reference"
            )
        path.write_text(text.replace(self.old, self.new))


def all_mutants() -> list[Mutant]:
    """Every mutant of every part, in a stable order."""
    out: list[Mutant] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        out.extend(getattr(module, "MUTANTS", []))
    names = [m.name for m in out]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate mutant names: {sorted(dupes)}")
    return out
