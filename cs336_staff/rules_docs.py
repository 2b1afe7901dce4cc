"""The rules (tests/rules.toml) as each part's module docstring and the writeup state them, and the
check that every copy says what the file says and that the reference obeys it.

``cs336 parts --check`` and ``cs336 release --check`` run ``problems`` (through
``cs336_staff.parts.problems``); the writeup reads ``for_part`` through ``parts.writeup_data``, so
it is generated, not copied. The module docstrings are written by hand around a block that must
equal ``docstring_block`` up to line breaks; a failure prints the block to paste.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tests.rules import RULES_FILE, RuleBook, check_tree, load_rules

HEADING = "Rules (tests/rules.toml; a test that reaches code breaking one earns no points):"
WIDTH = 100


def for_part(book: RuleBook, key: str) -> dict[str, object]:
    """What part ``key`` may use, and what it may not: its own rules in full, the others by name."""
    home = book.home_rules(key)
    others = [r.short for r in book.rules if r.part != key]
    may_not = [r.says for r in home]
    if others:
        may_not.append(("and, as in every part: " if home else "as in every part: ") + ", ".join(others))
    return {"may_use": book.may_use.get(key, ""), "may_not": may_not}


def docstring_block(book: RuleBook, key: str) -> str:
    """The block each part's module docstring holds (wrapped at WIDTH, indented by 4 under HEADING)."""
    rules = for_part(book, key)
    lines = [HEADING]
    for label, text in (("May use: ", str(rules["may_use"])), ("Not allowed: ", "; ".join(rules["may_not"]))):  # type: ignore[arg-type]
        lines += textwrap.wrap(label + text + ".", WIDTH, initial_indent="    ", subsequent_indent="        ")
    return "\n".join(lines)


def _words(text: str) -> str:
    return " ".join(text.split())


def module_docstring(repo: Path, module: str) -> str:
    """The docstring of a part's module: ``cs336_assignment/KEY.py`` or ``KEY/__init__.py``."""
    path = Path(repo) / (module if module.endswith(".py") else module + "__init__.py")
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True) or ""


def problems(repo: Path, parts: list) -> list[str]:  # parts: cs336_staff.parts.Part (not imported: no cycle)
    """Every way the copies of the rules disagree with tests/rules.toml, and every violation of the reference."""
    repo = Path(repo)
    path = repo / "tests" / RULES_FILE.name
    if not path.is_file():
        return [f"{path} is missing: the rules of the assignment (what each part may use) live there"]
    try:
        book = load_rules(path)
    except ValueError as e:
        return [str(e)]
    out = []
    keys = [p.key for p in parts]
    if sorted(book.may_use) != sorted(keys):
        out.append(f"{path}: [parts.KEY] tables {sorted(book.may_use)} differ from rubric.toml's parts {sorted(keys)}")
    for p in parts:
        block = docstring_block(book, p.key)
        if _words(block) not in _words(module_docstring(repo, p.module)):
            out.append(f"the module docstring of {p.module} does not state the rules of tests/rules.toml; "
                       f"end it with:\n\n{block}\n")
    if (repo / "cs336_assignment").is_dir():
        report = check_tree(repo)
        out += [f"the reference breaks a rule: {v.message()}" for v in report.violations]
    return out
