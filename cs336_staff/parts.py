"""The parts of the assignment, from one source, and the checks that every copy agrees with it.

Where each fact about a part is defined (once):

    key, order, number,     ``rubric.toml``: ``[concepts.KEY]`` tables in handout order, ``title =
    title, points           "N. Title"`` (N counts 1, 2, ... in that order), ``points``
    module                  the key: part ``KEY`` is ``cs336_assignment/KEY.py`` or the package
                            ``cs336_assignment/KEY/`` (one concept per module)
    what to implement       the solution regions of that module (``markers.py``)
    adapters                ``adapters.py``: the functions under the ``# N. Title`` section header
                            of the part's number (a section without a number, such as the given
                            tools, belongs to no part)
    graded tests            the rubric's ``[[rules]]`` that give a test file the part's concept
    written problems        ``writeup/assignment.typ`` (``cs336_staff/writeup``)
    rules (may / may not)   ``tests/rules.toml`` (``cs336_staff/rules_docs.py``: each part's module
                            docstring states them, the writeup reads them, the reference obeys them)

Everything else is generated from these, or checked against them by ``problems()``, which
``cs336 parts --check``, ``cs336 release --check`` and a staff test run:

    README.md               the table between ``<!-- parts:begin -->`` and ``<!-- parts:end -->``
                            (``cs336 parts --write`` regenerates it)
    adapters.py headers     ``# N. Short`` must name an existing part, ``Short`` a prefix of its title
    handout README.md       generated at release (``readme_table(..., students=True)``)
    handout tests/points.json   generated at release from the rubric (``tests/progress.py``)
    assignment.pdf          generated at release: problem numbers, points and deliverables come
                            from here (``writeup_data``); ``cs336_staff.writeup`` checks the PDF

Deliberately left out: splitting one test file between parts by per-test rules (a file belongs to
the part its rules give ``FILE::test``; the grader itself resolves each test).
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cs336_staff import rules_docs
from cs336_staff.markers import OPTIONAL, Region, find_regions, is_staff_only
from cs336_staff.rubric import Rubric
from tests.rules import adapter_sections, load_rules

PACKAGE = "cs336_assignment"
TITLE = re.compile(r"^(\d+)\.\s+(\S.*)$")
README_BEGIN, README_END = "<!-- parts:begin -->", "<!-- parts:end -->"


#: Which other parts' public test files execute each part's solution functions, as ``cs336 audit``
#: measured it (``cs336_staff/audit/part_reach.py``; ``cs336 audit --write-used-by`` writes it, the audit checks it).
#: Without it (a sample repository) a part is used by the test files that name its adapters.
USED_BY_FILE = "cs336_staff/used_by.json"


class PartsError(ValueError):
    """The parts cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class Part:
    key: str
    number: int
    title: str  # without the "N. " prefix
    points: float
    module: str  # "cs336_assignment/optim.py" or "cs336_assignment/tensors/"
    functions: dict[str, list[str]] = field(default_factory=dict)  # file -> graded region qualnames
    optional: dict[str, list[str]] = field(default_factory=dict)  # file -> helpers marked optional
    adapters: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)  # public test files graded under this part
    hidden_tests: list[str] = field(default_factory=list)
    # other parts' public test files that run its code (USED_BY_FILE)
    used_by: list[str] = field(default_factory=list)

    @property
    def heading(self) -> str:
        return f"{self.number}. {self.title}"

    @property
    def points_text(self) -> str:
        return f"{self.points:g}"


# ------------------------------------------------------------------------------------------------
# Reading the sources
# ------------------------------------------------------------------------------------------------


def rubric_path(repo: Path) -> Path:
    return Path(repo) / "rubric.toml"


def module_of(repo: Path, key: str) -> str | None:
    """``cs336_assignment/KEY.py`` or ``cs336_assignment/KEY/``, whichever exists; else None."""
    if (repo / PACKAGE / f"{key}.py").is_file():
        return f"{PACKAGE}/{key}.py"
    if (repo / PACKAGE / key / "__init__.py").is_file():
        return f"{PACKAGE}/{key}/"
    return None


def module_files(repo: Path, module: str) -> list[str]:
    """The .py files of a module (one file, or every file of a package), staff-only files left out."""
    if module.endswith(".py"):
        files = [module]
    else:
        files = sorted(
            p.relative_to(repo).as_posix()
            for p in (repo / module).rglob("*.py")
            if "__pycache__" not in p.parts
        )
    return [f for f in files if not is_staff_only((repo / f).read_text(encoding="utf-8"))]


def _graded_files(rubric: Rubric, files: list[str]) -> dict[str, str]:
    """Test file -> the concept the rubric's rules give its tests (probed as ``FILE::test``)."""
    out = {}
    for f in files:
        concept = None
        for rule in rubric.rules:
            if rule.concept is not None and rule.matches(f"{f}::test"):
                concept = rule.concept
        if concept is not None:
            out[f] = concept
    return out


def _test_files(repo: Path, folder: str) -> list[str]:
    base = repo / folder
    return (
        sorted(p.relative_to(repo).as_posix() for p in base.glob("test_*.py"))
        if base.is_dir()
        else []
    )


def load_parts(repo: Path, regions: dict[str, list[Region]] | None = None) -> list[Part]:
    """The parts of ``repo`` in handout order, assembled from their sources (module docstring).

    ``regions`` (file -> regions, as the release build found them) saves parsing the modules again.
    Raises ``PartsError`` when the rubric's titles are not numbered 1, 2, ... in order, or a part
    has no module.
    """
    repo = Path(repo)
    path = rubric_path(repo)
    if not path.is_file():
        raise PartsError(
            f"{path} is missing: the parts of the assignment and their points are its [concepts.KEY] tables"
        )
    rubric = Rubric.load(path)
    adapters_source = (
        (repo / "adapters.py").read_text(encoding="utf-8")
        if (repo / "adapters.py").is_file()
        else ""
    )
    owner, _ = adapter_sections(adapters_source)
    public, hidden = _test_files(repo, "tests"), _test_files(repo, "tests/hidden")
    graded = _graded_files(rubric, public + hidden)
    sources = {t: (repo / t).read_text(encoding="utf-8") for t in public}
    used_path = repo / USED_BY_FILE
    measured_uses = (
        json.loads(used_path.read_text(encoding="utf-8")) if used_path.is_file() else None
    )
    parts = []
    for i, concept in enumerate(rubric.concepts.values(), 1):
        m = TITLE.match(concept.title)
        if m is None or int(m.group(1)) != i:
            raise PartsError(
                f'{path}: [concepts.{concept.name}] title = {concept.title!r} must read "{i}. Title": '
                "parts are numbered 1, 2, ... in the order their tables appear"
            )
        module = module_of(repo, concept.name)
        if module is None:
            raise PartsError(
                f"{path}: part [concepts.{concept.name}] has no module {PACKAGE}/{concept.name}.py or "
                f"{PACKAGE}/{concept.name}/; a part's key names the module students implement it in"
            )
        functions, optional = {}, {}
        for f in module_files(repo, module):
            source = (repo / f).read_text(encoding="utf-8")
            found = (
                regions[f]
                if regions is not None and f in regions
                else ([] if regions is not None else find_regions(source, f))
            )
            names = list(dict.fromkeys(r.qualname for r in found))
            marked = optional_helpers(source)
            if any(n not in marked for n in names):
                functions[f] = [n for n in names if n not in marked]
            if any(n in marked for n in names):
                optional[f] = [n for n in names if n in marked]
        adapters = [name for name, number in owner.items() if number == i]
        tests = [t for t in public if graded.get(t) == concept.name]
        uses = (
            measured_uses.get(concept.name, [])
            if measured_uses is not None
            else [
                t
                for t in public
                if t not in tests
                and any(re.search(rf"\badapters\.{a}\b", sources[t]) for a in adapters)
            ]
        )
        parts.append(
            Part(
                key=concept.name,
                number=i,
                title=m.group(2),
                points=float(concept.points or 0),
                module=module,
                functions=functions,
                optional=optional,
                adapters=adapters,
                tests=tests,
                hidden_tests=[t for t in hidden if graded.get(t) == concept.name],
                used_by=uses,
            )
        )
    return parts


# ------------------------------------------------------------------------------------------------
# Generated copies
# ------------------------------------------------------------------------------------------------


def _code(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "-"


def optional_helpers(source: str) -> set[str]:
    """Qualnames of the functions whose docstring says they are optional (``markers.OPTIONAL``).

    >>> src = "def f():\\n    'Optional helper, not graded: g covers it.'\\n\\ndef g():\\n    pass\\n"
    >>> sorted(optional_helpers(src))
    ['f']
    """
    out: set[str] = set()

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and OPTIONAL in " ".join(
                    (ast.get_docstring(child) or "").split()
                ):
                    out.add(name)
                walk(child, name + ".")

    walk(ast.parse(source), "")
    return out


def _what(part: Part) -> str:
    files = part.functions
    required = (
        "; ".join(
            (f"`{Path(f).name}`: " if len(files) > 1 else "") + _code(names)
            for f, names in files.items()
        )
        or "-"
    )
    helpers = [n for names in part.optional.values() for n in names]
    return required + (f" (optional helpers, not graded: {_code(helpers)})" if helpers else "")


def readme_table(
    parts: list[Part], students: bool = False, written: dict[str, int] | None = None
) -> str:
    """The parts as a markdown table: for students (what to implement, where, which tests, points),
    or for the staff README (module, adapters, graded public and hidden tests). ``written``: part key
    -> points of its written problems, a column of the students' table."""
    total = sum(p.points for p in parts)
    if students:
        w = written is not None
        rows = [
            "| Part | Code points |"
            + (" Written points |" if w else "")
            + " Implement in | What to implement | Tests graded under it | Also used by |",
            "| --- | ---: |" + (" ---: |" if w else "") + " --- | --- | --- | --- |",
        ]
        rows += [
            f"| {p.heading} | {p.points_text} |"
            + (f" {written.get(p.key, 0)} |" if written is not None else "")
            + f" `{p.module}` | {_what(p)} | {_code(p.tests)} | {_code(p.used_by)} |"
            for p in parts
        ]
        rows.append(
            f"| total | {total:g} |"
            + (f" {sum(written.values())} |" if written is not None else "")
            + " | | | |"
        )
    else:
        rows = [
            "| part | points | module | adapters | tests (public; hidden) |",
            "| --- | ---: | --- | --- | --- |",
        ]
        rows += [
            f"| {p.heading} | {p.points_text} | `{p.module.removeprefix(PACKAGE + '/')}` | {_code(p.adapters) if p.adapters else '(through `run_cs336`)'} "
            f"| {_code(p.tests)}; {_code(p.hidden_tests)} |"
            for p in parts
        ]
        rows.append(f"| total | {total:g} | | | |")
    return "\n".join(rows)


def readme_block(parts: list[Part]) -> str:
    return (
        f"{README_BEGIN}\n<!-- generated by `uv run cs336 parts --write` from rubric.toml, adapters.py and "
        f"the modules; do not edit -->\n{readme_table(parts)}\n{README_END}"
    )


def with_readme_block(text: str, parts: list[Part]) -> str:
    """``text`` (README.md) with its parts block replaced by the generated one."""
    if text.count(README_BEGIN) != 1 or text.count(README_END) != 1:
        raise PartsError(
            f"README.md needs exactly one {README_BEGIN} ... {README_END} block for the parts table"
        )
    head, rest = text.split(README_BEGIN)
    _, tail = rest.split(README_END)
    return head + readme_block(parts) + tail


def writeup_data(parts: list[Part], repo: Path) -> dict:
    """What the writeup's Typst source reads (as JSON, through ``sys.inputs``)."""
    project = tomllib.loads((Path(repo) / "pyproject.toml").read_text()).get("project", {})
    book = load_rules(Path(repo) / "tests" / "rules.toml")
    return {
        "name": project.get("name", ""),
        "version": project.get("version", ""),
        "description": project.get("description", ""),
        "points": sum(p.points for p in parts),
        "parts": [
            {**asdict(p), "heading": p.heading, "rules": rules_docs.for_part(book, p.key)}
            for p in parts
        ],
    }


# ------------------------------------------------------------------------------------------------
# Drift checks
# ------------------------------------------------------------------------------------------------


def problems(repo: Path, parts: list[Part] | None = None) -> list[str]:
    """Every way the copies disagree with the sources; empty when all agree."""
    repo = Path(repo)
    try:
        parts = load_parts(repo) if parts is None else parts
    except PartsError as e:
        return [str(e)]
    out = []
    by_number = {p.number: p for p in parts}
    adapters_source = (
        (repo / "adapters.py").read_text(encoding="utf-8")
        if (repo / "adapters.py").is_file()
        else ""
    )
    owner, headers = adapter_sections(adapters_source)
    for number, text, line in headers:
        if number is None:
            continue
        part = by_number.get(number)
        if part is None:
            out.append(
                f"adapters.py:{line}: section '# {number}. {text}' names no part (rubric.toml has {len(parts)}); "
                "renumber it, or drop the number if its adapters belong to no part"
            )
        elif not part.title.startswith(text):
            out.append(
                f"adapters.py:{line}: section '# {number}. {text}' should name part {number}, "
                f"'{part.title}' (rubric.toml): use a prefix of that title"
            )
    if "Parts, in the order of the handout" in adapters_source or re.search(
        r"^\s+\d+\.\s.*->\s*cs336_assignment/", adapters_source, re.M
    ):
        out.append(
            "adapters.py's docstring lists the parts again; the list lives in rubric.toml (delete it there)"
        )
    claimed = {f for p in parts for f in (*p.functions, *p.optional)}
    for path in sorted((repo / PACKAGE).rglob("*.py")):
        rel = path.relative_to(repo).as_posix()
        if rel in claimed or "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if not is_staff_only(text) and find_regions(text, rel):
            out.append(
                f"{rel} has solution regions but belongs to no part; add [concepts.{path.stem}] to rubric.toml "
                "or move the code into a part's module"
            )
    for p in parts:
        if not p.tests:
            out.append(
                f"part {p.heading} has no public test file graded under it (rubric.toml [[rules]])"
            )
    # tests/rules.toml: module docstrings state it, the reference obeys it
    out += rules_docs.problems(repo, parts)
    readme = repo / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        try:
            if with_readme_block(text, parts) != text:
                out.append("README.md's parts table is stale; run `uv run cs336 parts --write`")
        except PartsError as e:
            out.append(str(e))
    return out
