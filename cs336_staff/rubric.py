"""The rubric: which graded test is worth how many points, under which concept, visible to whom.

The rubric is a TOML file (``rubric.toml`` at the repository root, else one of that name beside
this module)::

    [concepts.optim]                      # every concept is declared once
    title = "Optimizers"
    points = 10                           # shared by its tests (weights below); omit: 1 per test

    [[rules]]                             # rules apply in order; later ones override earlier
    match = ["tests/test_optim.py::*", "tests/hidden/test_optim.py::*"]
    concept = "optim"

    [[rules]]
    match = "tests/hidden/*"
    visibility = "after_due_date"         # visible | hidden | after_due_date | after_published

    [[rules]]
    match = "tests/test_optim.py::test_adamw_matches_torch_reference*"
    weight = 3                            # counts three times as much as its siblings

``match`` patterns are ``fnmatch`` globs on pytest node ids (``*`` also crosses ``/`` and
``::``). A test is *covered* when some rule gives it a concept; ``uncovered()`` lists the graded
tests that are not, and a staff test fails when any is, so new tests cannot silently be worth 0.

Points of a test in a concept with ``points = P``: ``P * weight / sum(weights in the concept)``,
so adding a test re-divides the concept's budget instead of inflating the total.

Deliberately left out: partial credit inside one test, late penalties (Gradescope does those).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
RULE_KEYS = {"match", "concept", "weight", "visibility", "points"}
CONCEPT_KEYS = {"title", "points"}


@dataclass(frozen=True)
class Rule:
    patterns: tuple[str, ...]
    concept: str | None = None
    weight: float | None = None
    visibility: str | None = None
    points: float | None = None  # fixed points for the matched tests (outside the concept budget)

    def matches(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, p) for p in self.patterns)


@dataclass(frozen=True)
class Concept:
    name: str
    title: str
    points: float | None


@dataclass(frozen=True)
class Item:
    """The rubric's verdict on one test."""

    nodeid: str
    concept: str
    points: float
    visibility: str


@dataclass
class Rubric:
    concepts: dict[str, Concept] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    default_visibility: str = "visible"
    source: str = "<memory>"

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: Path) -> Rubric:
        """Parse and validate ``path``; every mistake is a ValueError naming the key and the fix."""
        try:
            data = tomllib.loads(Path(path).read_text())
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"rubric {path}: not valid TOML ({e})") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: dict, source: str = "<memory>") -> Rubric:
        unknown = set(data) - {"concepts", "rules", "default_visibility"}
        if unknown:
            raise ValueError(
                f"rubric {source}: unknown top-level keys {sorted(unknown)}; "
                "use [concepts.NAME], [[rules]] and default_visibility"
            )
        rubric = cls(source=source)
        rubric.default_visibility = _visibility(data.get("default_visibility", "visible"), source)
        for name, spec in data.get("concepts", {}).items():
            bad = set(spec) - CONCEPT_KEYS
            if bad:
                raise ValueError(
                    f"rubric {source}: concept {name!r} has unknown keys {sorted(bad)}; "
                    f"allowed: {sorted(CONCEPT_KEYS)}"
                )
            pts = spec.get("points")
            if pts is not None and (not isinstance(pts, int | float) or pts < 0):
                raise ValueError(
                    f"rubric {source}: concept {name!r} points={pts!r} must be a number >= 0"
                )
            rubric.concepts[name] = Concept(name, spec.get("title", name), pts)
        for i, spec in enumerate(data.get("rules", [])):
            where = f"rubric {source}: rules[{i}]"
            bad = set(spec) - RULE_KEYS
            if bad:
                raise ValueError(
                    f"{where} has unknown keys {sorted(bad)}; allowed: {sorted(RULE_KEYS)}"
                )
            match = spec.get("match")
            if isinstance(match, str):
                match = [match]
            if not match or not all(isinstance(m, str) and m for m in match):
                raise ValueError(f'{where} needs match = "pattern" or a list of node-id patterns')
            concept = spec.get("concept")
            if concept is not None and concept not in rubric.concepts:
                raise ValueError(
                    f"{where} names concept {concept!r}, which is not declared; "
                    f"add [concepts.{concept}] (declared: {sorted(rubric.concepts)})"
                )
            for key in ("weight", "points"):
                v = spec.get(key)
                if v is not None and (not isinstance(v, int | float) or v < 0):
                    raise ValueError(f"{where} {key}={v!r} must be a number >= 0")
            vis = spec.get("visibility")
            rubric.rules.append(
                Rule(
                    patterns=tuple(match),
                    concept=concept,
                    weight=None if spec.get("weight") is None else float(spec["weight"]),
                    visibility=None if vis is None else _visibility(vis, where),
                    points=None if spec.get("points") is None else float(spec["points"]),
                )
            )
        return rubric

    # ----------------------------------------------------------------------------- resolving
    def _fields(self, nodeid: str) -> dict:
        out: dict = {}
        for rule in self.rules:
            if rule.matches(nodeid):
                for key in ("concept", "weight", "visibility", "points"):
                    if getattr(rule, key) is not None:
                        out[key] = getattr(rule, key)
        return out

    def uncovered(self, nodeids: Iterable[str]) -> list[str]:
        """The tests that no rule gives a concept (they would be worth nothing)."""
        return [n for n in nodeids if "concept" not in self._fields(n)]

    def resolve(self, nodeids: Iterable[str]) -> dict[str, Item]:
        """Points, concept and visibility of every test in ``nodeids`` (the full graded set)."""
        nodeids = list(nodeids)
        missing = self.uncovered(nodeids)
        if missing:
            raise ValueError(
                f"rubric {self.source} does not cover {len(missing)} graded test(s), e.g. {missing[:3]}; "
                "add a [[rules]] entry whose match gives them a concept"
            )
        fields = {n: self._fields(n) for n in nodeids}
        weight_sum: dict[str, float] = {}
        for f in fields.values():
            if "points" not in f:
                weight_sum[f["concept"]] = weight_sum.get(f["concept"], 0.0) + f.get("weight", 1.0)
        items = {}
        for n, f in fields.items():
            concept = self.concepts[f["concept"]]
            w = f.get("weight", 1.0)
            if "points" in f:
                pts = f["points"]
            elif concept.points is None:
                pts = w
            else:
                total = weight_sum[concept.name]
                pts = concept.points * w / total if total else 0.0
            items[n] = Item(n, concept.name, pts, f.get("visibility", self.default_visibility))
        return items


def _visibility(value: object, where: str) -> str:
    if value not in VISIBILITIES:
        raise ValueError(f"{where}: visibility={value!r} is not one of {list(VISIBILITIES)}")
    return str(value)


def find_rubric(root: Path) -> Path:
    """``rubric.toml`` at ``root``, else the copy beside this module."""
    for p in (root / "rubric.toml", Path(__file__).with_name("rubric.toml")):
        if p.is_file():
            return p
    raise ValueError(f"no rubric: create {root / 'rubric.toml'} (see cs336_staff/rubric.py)")
