"""The judge spec: everything one judge run needs, written by the grader, read by the judge and the worker launcher.

One typed, versioned record, and the only definition of it:

* ``grader.run_judge`` builds one per submission and writes it as JSON beside the run;
* the judge (``judge.py``) reads it back (``--judge SPEC.json``), or builds one itself for
  ``--split`` (this repository's own reference as the submission);
* ``sandbox.start_worker`` starts each of the run's workers from it.

A field added here reaches all three. ``read`` refuses a file written by another version of the
spec (a grader and a judge from different checkouts), naming both versions.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from cs336_staff.grade.limits import Limits
from cs336_staff.grade.mirror import layout

#: Bumped whenever a field is added, removed or changes meaning.
SPEC_VERSION = 2
#: Where the hidden tests live: they run in a fresh worker, after the visible ones or in a judge of their own (grader.run_judges).
HIDDEN_PREFIX = "tests/hidden/"


class SpecError(ValueError):
    """A judge spec file that this judge cannot read (the message says why and what to do)."""


@dataclass(frozen=True)
class JudgeSpec:
    """One judge run: where the submission is staged, what its worker may see, which tests run."""

    root: Path  # the staged worker root (``sandbox.stage``)
    scratch: Path  # the judge's folder, the worker's copy of it, the judge's private one (``scratch_folders``)
    staff_root: Path  # the staff repository whose tests judge
    results: Path  # the JSON-lines file the judge writes outcomes to
    readonly: tuple[Path, ...] = ()  # folders the worker may read (the public fixtures)
    limits: Limits = field(default_factory=Limits)
    gpu: bool = False
    jobs: int = 1  # submissions graded at once (threads are shared out among them)
    insecure: bool = False  # run the worker without any sandbox (refused unless asked for)
    tier: str = "bubblewrap"  # how the worker is isolated: sandbox.TIERS (insecure means "none")
    only: tuple[str, ...] | None = None  # the test ids to run; None: all collected
    preload: tuple[str, ...] = ()  # modules each worker imports before it says ready
    version: int = SPEC_VERSION

    def to_json(self) -> str:
        data = asdict(self)
        for key in ("root", "scratch", "staff_root", "results"):
            data[key] = str(data[key])
        data["readonly"] = [str(p) for p in self.readonly]
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> JudgeSpec:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SpecError(
                f"the judge spec is not JSON ({e}); it is written by `grader.run_judge`"
            ) from None
        version = data.get("version") if isinstance(data, dict) else None
        if version != SPEC_VERSION:
            raise SpecError(
                f"the judge spec has version {version!r}, this judge reads version {SPEC_VERSION}: "
                "grade with the grader of the same checkout as the judge"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(
                f"the judge spec has fields this judge does not know: {', '.join(unknown)}"
            )
        return cls(
            root=Path(data["root"]),
            scratch=Path(data["scratch"]),
            staff_root=Path(data["staff_root"]),
            results=Path(data["results"]),
            readonly=tuple(Path(p) for p in data.get("readonly", ())),
            limits=Limits(**data.get("limits", {})),
            gpu=bool(data.get("gpu", False)),
            jobs=int(data.get("jobs", 1)),
            insecure=bool(data.get("insecure", False)),
            tier=str(data.get("tier", "bubblewrap")),
            only=None if data.get("only") is None else tuple(data["only"]),
            preload=tuple(data.get("preload", ())),
            version=version,
        )

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json())
        return path

    @classmethod
    def read(cls, path: Path) -> JudgeSpec:
        return cls.from_json(Path(path).read_text())


def public_fixtures(staff_root: Path) -> tuple[Path, ...]:
    """The fixtures a worker may read: every entry of fixtures/ but fixtures/hidden."""
    fixtures = staff_root / "fixtures"
    return (
        tuple(sorted(p for p in fixtures.iterdir() if p.name != "hidden"))
        if fixtures.is_dir()
        else ()
    )


def worker_preload(staff_root: Path) -> tuple[str, ...]:
    """Modules each worker imports before it says ready: ``[tool.cs336] grade-worker-preload``."""
    data = tomllib.loads((staff_root / "pyproject.toml").read_text())
    return tuple(data.get("tool", {}).get("cs336", {}).get("grade-worker-preload", []))


def scratch_folders(scratch: Path) -> tuple[Path, Path, Path]:
    """``mirror.layout(scratch)``, created: the judge's folder (pytest's basetemp is its ``tmp``), the
    worker's copy of it, and the judge's private temporary folder (``tempfile``, never shown to the worker)."""
    folders = layout(scratch)
    for p in folders:
        p.mkdir(parents=True, exist_ok=True)
    return folders


def basetemp(scratch: Path) -> Path:
    """pytest's ``--basetemp`` for a judge whose spec names ``scratch``."""
    return layout(scratch)[0] / "tmp"
