"""Delegation: which tests earn no points because the code they reached uses a forbidden API.

The rules and the static check live in ``tests/rules.py`` (students run the same check locally).
The grader applies it to a submission's files, read as text (never imported, here or in the judge):

* which adapters reach a violation: ``tests.rules.check_sources`` over the submission's
  ``adapters.py`` and ``cs336_assignment/**/*.py``;
* which adapters each test reached: the judge's own record of the adapters and ``@student_side``
  scenarios the test called (``reached`` in its results), a scenario standing for every adapter its
  source (``tests/scenarios/``, staff code) names, directly or through its helpers;
* a test that passed earns nothing when it reached an adapter whose violation lies in the code of
  the test's own part (``cs336_assignment/KEY.py`` or ``KEY/``, KEY its rubric concept) or in code
  of no part (``adapters.py``, ``validation.py``, ...): delegation costs points where it is, as a
  bug does, and a test of another part that merely builds the object keeps its points.

What the check cannot see is in THREAT_MODEL.md; constructs that hide where code goes
(``importlib``, ``getattr`` with a computed name, ``exec``) are named in the notes for a person.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.rules import ENTRY_MODULE, PACKAGE, Program, Report, RuleBook, check_sources, load_rules

SCENARIOS = "tests/scenarios"
RULES = "tests/rules.toml"


@functools.lru_cache(maxsize=4)
def scenario_adapters(staff_root: Path) -> tuple[dict[str, frozenset[str]], dict[str, list[dict[str, str]]]]:
    """``module:qualname`` of each scenario function -> the adapters its source reaches; and per
    scenario module, its tables of student classes by name (``STUDENT = {"adam": adapters.get_adam_cls}``),
    so that a scenario called with ``"adam"`` stands for ``get_adam_cls`` alone."""
    files = {p.relative_to(staff_root).as_posix(): p.read_text(encoding="utf-8")
             for p in sorted((staff_root / SCENARIOS).glob("*.py"))}
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
                if (isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Attribute)
                        and isinstance(v.value, ast.Name) and v.value.id == ENTRY_MODULE):
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


def part_of(file: str, parts: set[str]) -> str | None:
    """The part whose module holds ``file`` (``cs336_assignment/optim.py`` -> optim); None: no part's."""
    pieces = file.split("/")
    if len(pieces) < 2 or pieces[0] != PACKAGE:
        return None
    key = pieces[1].removesuffix(".py")
    return key if key in parts else None


def check_submission(files: dict[str, bytes], staff_root: Path) -> Report:
    """The rules check over a submission's graded files (bytes as intake read them), with the
    rules of ``staff_root`` (``tests/rules.toml``; none where it has no such file)."""
    path = Path(staff_root) / RULES
    book = load_rules(path) if path.is_file() else RuleBook({}, ())
    sources = {rel: data.decode("utf-8", errors="replace") for rel, data in files.items()
               if rel == "adapters.py" or (rel.startswith(PACKAGE + "/") and rel.endswith(".py"))}
    return check_sources(sources, book)


@functools.lru_cache(maxsize=4)
def adapter_parts(staff_root: Path) -> dict[str, str]:
    """Adapter -> the part whose ``adapters.py`` section holds it (``cs336_staff.parts``); empty for
    a repository without parts (the grader's synthetic one)."""
    from cs336_staff.parts import PartsError, load_parts

    try:
        return {a: p.key for p in load_parts(Path(staff_root)) for a in p.adapters}
    except (PartsError, OSError):
        return {}


def penalties(report: Report, reached: dict[str, list[str]], concept_of: dict[str, str],
              staff_root: Path) -> dict[str, str]:
    """nodeid -> the remark that replaces its output, for each test that loses its points.

    A violation's part is that of the module holding it; in ``adapters.py``, that of the adapter's
    section; elsewhere (``validation.py``, ``cli.py``) none, and then it costs every test reaching it."""
    parts = set(concept_of.values())
    by_adapter = report.by_adapter()
    sections = adapter_parts(Path(staff_root))

    def part(v) -> str | None:  # noqa: ANN001
        file = v.where.split(":")[0]
        return sections.get(v.adapter) if file == f"{ENTRY_MODULE}.py" else part_of(file, parts)

    out = {}
    for nodeid, targets in reached.items():
        concept = concept_of.get(nodeid)
        hits = [v for a in sorted(adapters_reached(targets, staff_root)) for v in by_adapter.get(a, [])
                if part(v) in (concept, None)]
        if hits:
            rules = sorted({v.rule.id for v in hits})
            out[nodeid] = (f"no points: this test reached code that breaks the assignment's rules ({', '.join(rules)}; "
                           "tests/rules.toml):\n" + "\n".join(f"- {v.message()}" for v in hits[:5]))
    return out


def notes(report: Report, files: dict[str, bytes] | None = None, staff_root: Path | None = None) -> list[str]:
    """The results' notes: each violation once per rule and place, then what a person should read
    (left out where the file is the staff's own, byte for byte: the given ``cs336`` dispatch)."""
    out, seen = [], set()
    for v in report.violations:
        if (v.rule.id, v.api, v.where) not in seen:
            seen.add((v.rule.id, v.api, v.where))
            out.append(f"rules: {v.function.removeprefix(PACKAGE + '.')} ({v.where}) uses {v.api}, which rule "
                       f"{v.rule.id} forbids; the tests that reach it in its own part earn no points")
    def given(where: str) -> bool:
        rel = where.split(":")[0]
        staff = Path(staff_root) / rel if staff_root is not None else None
        return files is not None and staff is not None and staff.is_file() and files.get(rel) == staff.read_bytes()

    flagged = sorted({(s.what, s.where) for s in report.suspicious if not given(s.where)})
    out += [f"rules: review {what} at {where}: the static check cannot follow it" for what, where in flagged]
    out += [f"rules: {e}" for e in report.errors]
    return out
