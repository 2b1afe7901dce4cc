"""Delegation: which tests earn no points because the code they reached uses a forbidden API.

The rules and the static check live in ``tests/rules.py`` (students run the same check locally).
The grader applies it to a submission's files, read as text (never imported, here or in the judge):

* which adapters reach a violation: ``tests.rules.check_sources`` over the submission's
  ``adapters.py`` and ``cs336_assignment/**/*.py``;
* which adapters each test reached: the judge's own record of the adapters and drivers the test
  called (``reached`` in its results), a driver standing for every adapter its source
  (``tests/scenarios/``, staff code) names, directly or through its helpers (narrowed to one class
  of a name table such as ``OPTIMIZERS`` when the driver was given that name as its first argument);
* a test that passed earns nothing when it reached an adapter whose violation lies in the code of
  the test's own part (``cs336_assignment/KEY.py`` or ``KEY/``, KEY its rubric concept) or in code
  of no part (``adapters.py``, ``validation.py``, ...): delegation costs points where it is, as a
  bug does, and a test of another part that merely builds the object keeps its points. A rule of
  every part (``part = "all"``: reaching the tests or the interpreter's insides) costs every test
  that reaches it, whichever part's code breaks it: such code can change any test it runs beside;
* given code is never flagged: code of the submission that equals the handout, which the reference
  in ``staff_root`` makes as the release does (``rules_docs.handout_of``), drawing the same finding
  there. A file without solution regions is given only when its whole code equals the handout's
  (or the staff repository's, staff-only blocks kept: the staff's own example is graded too);
  in a file with regions, each top-level statement, and each statement of a function or class
  whose header is unchanged, that equals the handout's (formatting and comments aside).

What the check cannot see is in THREAT_MODEL.md; constructs that hide where code goes (``getattr``
with a computed name, ``globals()``, unpickling) are named in the notes for a person.
"""

from __future__ import annotations

import ast
import difflib
import functools
from pathlib import Path

from cs336_staff.rules_docs import Handout, handout_of
from tests.rules import (
    ALL_PARTS,
    ENTRY_MODULE,
    PACKAGE,
    Given,
    Program,
    Report,
    RuleBook,
    canonical,
    check_sources,
    costs,
    load_rules,
    read_tree,
)

SCENARIOS = "tests/scenarios"
RULES = "tests/rules.toml"


@functools.lru_cache(maxsize=4)
def scenario_adapters(
    staff_root: Path,
) -> tuple[dict[str, frozenset[str]], dict[str, list[dict[str, str]]]]:
    """``module:qualname`` of each scenario function -> the adapters its source reaches; and per
    scenario module, its tables of student classes by name (``STUDENT = {"adam": adapters.get_adam_cls}``),
    so that a scenario called with ``"adam"`` stands for ``get_adam_cls`` alone."""
    files = {
        p.relative_to(staff_root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted((staff_root / SCENARIOS).glob("*.py"))
    }
    program = Program(files)
    out, tables = {}, {}
    for path, text in files.items():
        tables[path.removesuffix(".py").replace("/", ".")] = _tables(text)
    for key, node in program.nodes.items():
        module = node.file.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        if key == module or key.count(".") != module.count(".") + 1:
            continue  # a module's own code, or a method
        reached, _ = program.reach(key)
        names = set()
        for k in reached:
            for ref in program.nodes[k].refs:
                kind, target = program.resolve(ref.name)
                if kind == "unknown" and target.startswith(ENTRY_MODULE + "."):
                    names.add(target.split(".")[1])
        out[f"{module}:{key.removeprefix(module + '.')}"] = frozenset(names)
    return out, tables


def _tables(source: str) -> list[dict[str, str]]:
    """Module-level dicts from string keys to ``adapters.NAME``."""
    out = []
    for stmt in ast.parse(source).body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict) and value.keys:
            table = {}
            for k, v in zip(value.keys, value.values, strict=True):
                if (
                    isinstance(k, ast.Constant)
                    and isinstance(k.value, str)
                    and isinstance(v, ast.Attribute)
                    and isinstance(v.value, ast.Name)
                    and v.value.id == ENTRY_MODULE
                ):
                    table[k.value] = v.attr
            if table and len(table) == len(value.keys):
                out.append(table)
    return out


def adapters_reached(targets: list[str], staff_root: Path) -> set[str]:
    """The adapters behind the judge's record of one test's calls (``adapters:NAME`` or a scenario)."""
    scenarios, tables = scenario_adapters(Path(staff_root))
    out = set()
    for t in targets:
        if t.startswith(ENTRY_MODULE + ":"):
            out.add(t.split(":", 1)[1])
            continue
        target, _, key = t.partition("#")
        names = set(scenarios.get(target, frozenset()))
        for table in tables.get(target.split(":")[0], []):
            if key in table and set(table.values()) <= names:
                names = (names - set(table.values())) | {table[key]}
        out |= names
    return out


@functools.lru_cache(maxsize=4)
def staff_rules(staff_root: Path) -> tuple[RuleBook, Handout]:
    """The rules of ``staff_root`` (``tests/rules.toml``; none where it has no such file) and its
    handout, made from the reference on disk (read as text, never imported)."""
    path = staff_root / RULES
    book = load_rules(path) if path.is_file() else RuleBook({}, ())
    return book, handout_of(read_tree(staff_root), book)


def _span(stmt: ast.stmt) -> tuple[int, int]:
    lines = [stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))]
    return min(lines), stmt.end_lineno or stmt.lineno


def _same_header(a: ast.stmt, b: ast.stmt) -> bool:
    """Two functions (or classes) of one name whose decorators, arguments and bases are equal."""
    return (
        type(a) is type(b)
        and isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and all(
            canonical(getattr(a, f, None)) == canonical(getattr(b, f, None))
            for f in a._fields
            if f != "body"
        )
    )


def _unchanged(mine: list[ast.stmt], given: list[ast.stmt]) -> list[tuple[int, int, int, int]]:
    """(first, last line here, first, last line in the handout) of each statement of ``mine`` equal to
    one of ``given`` in the same order; inside a function or class changed only in its body, its
    statements likewise (the code around a solution region)."""
    out = []
    ops = difflib.SequenceMatcher(
        a=[canonical(s) for s in mine], b=[canonical(s) for s in given], autojunk=False
    )
    for tag, i1, i2, j1, j2 in ops.get_opcodes():
        if tag == "equal":
            out += [(*_span(a), *_span(b)) for a, b in zip(mine[i1:i2], given[j1:j2], strict=True)]
        elif tag == "replace":
            for a in mine[i1:i2]:
                b = next((b for b in given[j1:j2] if _same_header(a, b)), None)
                if b is not None:
                    out += _unchanged(a.body, b.body)  # type: ignore[attr-defined]
    return out


@functools.lru_cache(maxsize=256)
def _given_spans(
    text: str, rel: str, handout: Handout
) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, str]]]:
    """The unchanged statements of the submission's ``rel`` (``_unchanged``) and what they draw in the
    handout (or, for a file without solution regions, in the staff repository's own copy). Kept by
    the file's text: a batch's submissions mostly hand the handout's files back unchanged."""
    versions = [(handout.texts[rel], handout.drawn.get(rel, []))] if rel in handout.texts else []
    if rel in handout.staff:
        versions.append((handout.staff[rel], handout.staff_drawn.get(rel, [])))
    for given_text, drawn in versions:
        try:
            mine, given = ast.parse(text), ast.parse(given_text)
        except (SyntaxError, ValueError):
            break
        # no regions: the whole file or nothing
        if handout.regions[rel] or canonical(mine) == canonical(given):
            return _unchanged(mine.body, given.body), drawn
    return [], []


def given_code(sources: dict[str, str], handout: Handout) -> Given:
    """Whether a finding of ``sources`` lies in given code, unchanged, that draws the same finding in the handout."""

    @functools.cache
    def spans(file: str) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, str]]]:
        return _given_spans(sources[file], file, handout) if file in sources else ([], [])

    def given(file: str, line: int, what: str) -> bool:
        unchanged, drawn = spans(file)
        for first, last, g_first, g_last in unchanged:
            if first <= line <= last:
                return any(
                    g_first <= g_line <= g_last and g_what == what for g_line, g_what in drawn
                )
        return False

    return given


def check_submission(files: dict[str, bytes], staff_root: Path) -> Report:
    """The rules check over a submission's graded files (bytes as intake read them), with the
    rules of ``staff_root``; its given code, unchanged, draws nothing."""
    book, handout = staff_rules(Path(staff_root))
    sources = {
        rel: data.decode("utf-8", errors="replace")
        for rel, data in files.items()
        if rel == "adapters.py" or (rel.startswith(PACKAGE + "/") and rel.endswith(".py"))
    }
    return check_sources(sources, book, given=given_code(sources, handout))


@functools.lru_cache(maxsize=4)
def adapter_parts(staff_root: Path) -> dict[str, str]:
    """Adapter -> the part whose ``adapters.py`` section holds it (``cs336_staff.parts``); empty for
    a repository without parts (the grader's synthetic one)."""
    from cs336_staff.parts import PartsError, load_parts

    try:  # regions={}: the parts' functions are not needed here, and finding them parses every module
        parts = load_parts(Path(staff_root), regions={})
        return {a: p.key for p in parts for a in p.adapters}
    except (PartsError, OSError):
        return {}


def read_staff_tables(staff_root: Path) -> None:
    """Build now what ``penalties`` reads of the staff tree (cached per tree: the parts of the
    adapters, what each scenario reaches), so the grader can do it while a judge runs."""
    adapter_parts(Path(staff_root))
    scenario_adapters(Path(staff_root))


def penalties(
    report: Report, reached: dict[str, list[str]], concept_of: dict[str, str], staff_root: Path
) -> dict[str, str]:
    """nodeid -> the remark that replaces its output, for each test that loses its points.

    A violation's part is that of the module holding it; in ``adapters.py``, that of the adapter's
    section; elsewhere (``validation.py``, ``cli.py``) none, and then it costs every test reaching it.
    A violation of a rule of every part (reaching the tests or the interpreter's insides) costs every
    test of the submission, wherever it is: a driver it rewired could be any later test's."""
    parts = set(concept_of.values())
    sections = adapter_parts(Path(staff_root))
    out = {}
    for nodeid, targets in reached.items():
        hits = costs(
            report,
            adapters_reached(targets, staff_root),
            concept_of.get(nodeid),
            parts,
            sections,
        )
        if hits:
            rules = sorted({v.rule.id for v in hits})
            out[nodeid] = (
                f"no points: this test reached code that breaks the assignment's rules ({', '.join(rules)}; "
                "tests/rules.toml):\n" + "\n".join(f"- {v.message()}" for v in hits[:5])
            )
    return out


def notes(
    report: Report, files: dict[str, bytes] | None = None, staff_root: Path | None = None
) -> list[str]:
    """The results' notes: each violation once per rule and place, then what a person should read.
    Given code is already out of ``report`` (``check_submission``); ``files`` and ``staff_root`` are
    not needed any more and stay for the callers."""
    out, seen = [], set()
    for v in report.violations:
        if (v.rule.id, v.api, v.where) not in seen:
            seen.add((v.rule.id, v.api, v.where))
            costs = (
                "no test of this submission earns points, and a person should read it (code that reaches "
                "the tests can change any of them)"
                if v.rule.part == ALL_PARTS
                else "the tests that reach it in its own part earn no points"
            )
            out.append(
                f"rules: {v.function.removeprefix(PACKAGE + '.')} ({v.where}) uses {v.api}, which rule "
                f"{v.rule.id} forbids; {costs}"
            )
    flagged = sorted({(s.what, s.where) for s in report.suspicious})
    out += [
        f"rules: review {what} at {where}: the static check cannot follow it"
        for what, where in flagged
    ]
    out += [f"rules: {e}" for e in report.errors]
    return out
