"""The rules (tests/rules.toml) as each part's module docstring and the writeup state them, the
handout's given code as the rules see it, and the check that every copy says what the file says,
that the reference obeys it and that the file's ``[[given]]`` record is current.

``cs336 parts --check`` and ``cs336 release --check`` run ``problems`` (through
``cs336_staff.parts.problems``); the writeup reads ``for_part`` through ``parts.writeup_data``, so
it is generated, not copied. The module docstrings are written by hand around a block that must
equal ``docstring_block`` up to line breaks; a failure prints the block to paste.

Given code: ``handout_of`` makes the handout's sources from the reference as the release does
(``markers.handout_text``) and lists what their code draws; the grader exempts a submission's code
equal to it (``grade/delegation.py``), a student's own run the ``[[given]]`` files whose
fingerprint is the handout's (or the staff repository's, for staff's own runs).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from cs336_staff.markers import MarkerError, handout_text
from tests.rules import (
    PACKAGE,
    RULES_FILE,
    RuleBook,
    check_tree,
    findings,
    fingerprint,
    load_rules,
    read_tree,
)

HEADING = "Rules (tests/rules.toml; a test that reaches code breaking one earns no points):"
WIDTH = 100


@dataclass(frozen=True, eq=False)
class Handout:
    """The handout's checked sources (adapters.py, cs336_assignment/**/*.py) as the release makes
    them from the reference: each file's text, whether it had solution regions, and the findings
    its code draws wherever an adapter reaches it (``tests.rules.findings``: (line, what)); and the
    files without regions that the staff repository holds otherwise (its staff-only blocks kept:
    the staff's own example is graded too), with theirs. Never changed once made, and hashed as
    itself (``eq=False``), so what is read of it can be kept per handout (``delegation``)."""

    texts: dict[str, str]
    regions: dict[str, bool]
    drawn: dict[str, list[tuple[int, str]]]
    staff: dict[str, str]
    staff_drawn: dict[str, list[tuple[int, str]]]


def handout_of(reference: dict[str, str], book: RuleBook) -> Handout:
    """The handout of ``reference`` (``tests.rules.read_tree`` of the staff repository); a file
    left out of the handout (staff-only) or whose markers are broken is not given code."""
    texts, regions = {}, {}
    for rel, text in reference.items():
        try:
            shipped, found = handout_text(text, rel, stub=rel.startswith(PACKAGE + "/"))
        except MarkerError:
            continue
        if shipped is not None:
            texts[rel], regions[rel] = shipped, bool(found)
    staff = {
        rel: reference[rel] for rel in texts if not regions[rel] and reference[rel] != texts[rel]
    }
    staff_drawn = {rel: drawn for rel, drawn in findings(reference, book).items() if rel in staff}
    return Handout(texts, regions, findings(texts, book), staff, staff_drawn)


def given_problems(repo: Path, book: RuleBook, path: Path) -> list[str]:
    """Where tests/rules.toml's ``[[given]]`` record disagrees with the handout: every file whose
    given code draws a finding is recorded with the fingerprints of its handout text and of the
    repository's own, and is a file without solution regions (a student's own run exempts whole
    files only); no other file is recorded."""
    reference = read_tree(repo)
    handout = handout_of(reference, book)
    out = []
    for rel in sorted(set(handout.drawn) | set(book.given)):
        drawn = handout.drawn.get(rel, [])
        where = ", ".join(f"{rel}:{line} ({what})" for line, what in sorted(drawn))
        if drawn and handout.regions.get(rel):
            out.append(
                f"given code in {rel}, a file with solution regions, draws {where}: students' own runs would "
                "warn about it; change that code (given code of such files must draw nothing)"
            )
            continue
        both = {fingerprint(handout.texts[rel]), fingerprint(reference[rel])}
        want = sorted(p for p in both if p is not None) if drawn else []
        if not drawn:
            out.append(
                f"{path}: [[given]] names {rel}, whose given code draws nothing: remove that entry"
            )
        elif sorted(book.given.get(rel, ())) != want:
            prints = ", ".join(f'"{p}"' for p in want)
            out.append(
                f"{path}: the given code of {rel} draws {where}; record it (fingerprints of the handout's "
                f'and this repository\'s file):\n\n[[given]]\nfile = "{rel}"\nfingerprint = [{prints}]\n'
            )
    return out


class PartRules(TypedDict):
    """A part's rules in words, as its module docstring and the writeup state them."""

    may_use: str
    may_not: list[str]


def for_part(book: RuleBook, key: str) -> PartRules:
    """What part ``key`` may use, and what it may not: its own rules in full, the others by name."""
    home = book.home_rules(key)
    others = [r.short for r in book.rules if r.part != key]
    may_not = [r.says for r in home]
    if others:
        may_not.append(
            ("and, as in every part: " if home else "as in every part: ") + ", ".join(others)
        )
    return {"may_use": book.may_use.get(key, ""), "may_not": may_not}


def docstring_block(book: RuleBook, key: str) -> str:
    """The block each part's module docstring holds (wrapped at WIDTH, indented by 4 under HEADING)."""
    rules = for_part(book, key)
    lines = [HEADING]
    for label, text in (
        ("May use: ", str(rules["may_use"])),
        ("Not allowed: ", "; ".join(rules["may_not"])),
    ):
        lines += textwrap.wrap(
            label + text + ".", WIDTH, initial_indent="    ", subsequent_indent="        "
        )
    return "\n".join(lines)


def _words(text: str) -> str:
    return " ".join(text.split())


def module_docstring(repo: Path, module: str) -> str:
    """The docstring of a part's module: ``cs336_assignment/KEY.py`` or ``KEY/__init__.py``."""
    path = Path(repo) / (module if module.endswith(".py") else module + "__init__.py")
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True) or ""


def problems(
    repo: Path, parts: list
) -> list[str]:  # parts: cs336_staff.parts.Part (not imported: no cycle)
    """Every way the copies of the rules disagree with tests/rules.toml, and every violation of the reference."""
    repo = Path(repo)
    path = repo / "tests" / RULES_FILE.name
    if not path.is_file():
        return [
            f"{path} is missing: the rules of the assignment (what each part may use) live there"
        ]
    try:
        book = load_rules(path)
    except ValueError as e:
        return [str(e)]
    out = []
    keys = [p.key for p in parts]
    if sorted(book.may_use) != sorted(keys):
        out.append(
            f"{path}: [parts.KEY] tables {sorted(book.may_use)} differ from rubric.toml's parts {sorted(keys)}"
        )
    for p in parts:
        block = docstring_block(book, p.key)
        if _words(block) not in _words(module_docstring(repo, p.module)):
            out.append(
                f"the module docstring of {p.module} does not state the rules of tests/rules.toml; "
                f"end it with:\n\n{block}\n"
            )
    if (repo / "cs336_assignment").is_dir():
        out += given_problems(repo, book, path)
        report = check_tree(repo, book)
        out += [f"the reference breaks a rule: {v.message()}" for v in report.violations]
    return out
