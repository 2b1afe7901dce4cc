"""The assignment's rules (tests/rules.toml) and the check that a graded function obeys them.

The check reads source code as text and never imports or runs it: it parses ``adapters.py`` and
``cs336_assignment/**/*.py`` and follows, from each adapter (``run_*``/``get_*``), what its code
reaches: the names it uses (resolving ``import ... as`` aliases and re-exports in ``__init__``),
the base classes of the classes it uses (``class Adam(torch.optim.Adam)``), every method of a class
it reaches, the module-level code of a module it reaches, ``getattr(module, "name")`` with a
literal name, and modules named in string constants (``importlib.import_module("cs336_assignment.x")``).
A reached name a rule forbids is a *violation*; where the code goes where a reader of the source
cannot follow (``getattr`` with a computed name, ``importlib``, ``__import__``, ``exec``, ``eval``,
``sys.modules``, ``globals()``) it is *suspicious* and named, for a person to read.

Your local ``uv run pytest`` prints each violation in the rule's words at the end of the run
(before the per-part table); the graders run the same check on your submission and give no points
to the tests that call an adapter which reaches a violation.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

RULES_FILE = Path(__file__).with_name("rules.toml")
PACKAGE = "cs336_assignment"
ENTRY_MODULE = "adapters"
#: Calls whose target a reader of the source cannot see: flagged wherever a graded function reaches them.
DYNAMIC_CALLS = {
    "getattr": "getattr with a computed name",
    "__import__": "__import__",
    "exec": "exec",
    "eval": "eval",
    "compile": "compile",
    "globals": "globals()",
    "vars": "vars()",
    "importlib.import_module": "importlib.import_module",
    "importlib.__import__": "importlib.__import__",
    "importlib.util.spec_from_file_location": "importlib.util.spec_from_file_location",
}
DYNAMIC_NAMES = {"sys.modules": "sys.modules"}
_MODULE_NAME = re.compile(rf"^{PACKAGE}(\.\w+)*$")


@dataclass(frozen=True)
class Rule:
    id: str
    part: str  # the part whose docstring explains it; it holds in every part
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...]
    says: str
    short: str  # the rule in a few words ("torch.optim's optimizers")

    def forbids(self, name: str) -> bool:
        """Whether the dotted ``name`` is, or lies under, a forbidden entry and not an allowed one."""

        def under(prefixes: tuple[str, ...]) -> bool:
            return any(name == p or name.startswith(p + ".") for p in prefixes)

        return under(self.forbidden) and not under(self.allowed)


@dataclass(frozen=True)
class RuleBook:
    may_use: dict[str, str]  # part key -> what it may use, in words
    rules: tuple[Rule, ...]

    def home_rules(self, part: str) -> list[Rule]:
        return [r for r in self.rules if r.part == part]


class RulesError(ValueError):
    """tests/rules.toml cannot be read; the message says where and what to fix."""


def load_rules(path: Path = RULES_FILE) -> RuleBook:
    """The rules in ``path`` (tests/rules.toml), checked for the fields every rule needs."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    may_use = {key: str(table.get("may_use", "")) for key, table in data.get("parts", {}).items()}
    rules = []
    for i, raw in enumerate(data.get("rules", [])):
        missing = [k for k in ("id", "part", "forbidden", "says", "short") if k not in raw]
        if missing:
            raise RulesError(f"{path}: [[rules]] number {i + 1} lacks {', '.join(missing)}")
        if raw["part"] not in may_use:
            raise RulesError(f"{path}: rule {raw['id']!r} names part {raw['part']!r}, which has no [parts.{raw['part']}] table")
        rules.append(Rule(raw["id"], raw["part"], tuple(raw["forbidden"]), tuple(raw.get("allowed", [])), raw["says"],
                          raw["short"]))
    return RuleBook(may_use, tuple(rules))


# ------------------------------------------------------------------------------------------------
# What the source reaches
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    name: str  # dotted, as resolved in its module (torch.optim.Adam, cs336_assignment.optim.Adam)
    line: int
    how: str  # "uses", "subclasses", "names in a string"


@dataclass
class Node:
    """A function, a class, a module-level name or a module's top-level code."""

    key: str  # cs336_assignment.optim.Adam, cs336_assignment.optim.Adam.step, cs336_assignment.optim
    file: str
    line: int
    refs: list[Ref] = field(default_factory=list)
    links: set[str] = field(default_factory=set)  # other nodes it always brings along
    dynamic: list[tuple[str, int]] = field(default_factory=list)  # (what, line)


@dataclass
class Module:
    name: str
    file: str
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted name it stands for
    defs: set[str] = field(default_factory=set)  # top-level names defined here


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Refs(ast.NodeVisitor):
    """Collects the dotted names an AST fragment uses, skipping annotations and nested definitions."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.refs: list[Ref] = []
        self.dynamic: list[tuple[str, int]] = []

    def dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.module.aliases:
                return self.module.aliases[node.id]
            if node.id in self.module.defs:
                return f"{self.module.name}.{node.id}"
            return node.id if node.id in DYNAMIC_CALLS else None
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def visit_Name(self, node: ast.Name) -> None:
        name = self.dotted(node)
        if name is not None and name not in DYNAMIC_CALLS:
            self.refs.append(Ref(name, node.lineno, "uses"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.dotted(node)
        if name is None:
            self.generic_visit(node)
        elif name in DYNAMIC_NAMES:
            self.dynamic.append((DYNAMIC_NAMES[name], node.lineno))
        else:
            self.refs.append(Ref(name, node.lineno, "uses"))

    def visit_Call(self, node: ast.Call) -> None:
        func = self.dotted(node.func)
        if func == "getattr" and len(node.args) >= 2:
            base = self.dotted(node.args[0])
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                if base is not None:
                    self.refs.append(Ref(f"{base}.{attr.value}", node.lineno, "uses (getattr)"))
            else:
                self.dynamic.append((DYNAMIC_CALLS["getattr"], node.lineno))
        elif func in DYNAMIC_CALLS and func != "getattr":
            self.dynamic.append((DYNAMIC_CALLS[func], node.lineno))
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and func != "globals":
                self.refs.append(Ref(first.value, node.lineno, f"names in {DYNAMIC_CALLS[func]}"))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _MODULE_NAME.match(node.value):
            self.refs.append(Ref(node.value, node.lineno, "names in a string"))

    def visit_arg(self, node: ast.arg) -> None:  # annotations are not uses
        return

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # nested functions run as part of their enclosing one: their bodies count, their annotations do not
        for d in node.decorator_list:
            self.visit(d)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:  # an import alone delegates nothing; its use does
        return

    visit_ImportFrom = visit_Import


def _collect(module: Module, nodes: list[ast.AST]) -> tuple[list[Ref], list[tuple[str, int]]]:
    v = _Refs(module)
    for n in nodes:
        v.visit(n)
    return v.refs, v.dynamic


def _imports(tree: ast.Module, module: Module, is_package: bool) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    module.aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    module.aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.name.split(".") if is_package else module.name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                base = ".".join([*here, *([base] if base else [])])
            for a in node.names:
                if a.name != "*":
                    module.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name


class Program:
    """The parsed source of a submission (or of the reference): modules, their names, what each reaches."""

    def __init__(self, files: dict[str, str]) -> None:
        self.modules: dict[str, Module] = {}
        self.nodes: dict[str, Node] = {}
        self.errors: list[str] = []
        trees = {}
        for path, text in sorted(files.items()):
            try:
                tree = ast.parse(text, filename=path)
            except SyntaxError as e:
                self.errors.append(f"{path}:{e.lineno}: does not parse ({e.msg}); the rules check could not read it")
                continue
            m = Module(module_name(path), path)
            self.modules[m.name] = m
            trees[m.name] = tree
            _imports(tree, m, path.endswith("__init__.py"))
            for stmt in tree.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    m.defs.add(stmt.name)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                    for t in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                        if isinstance(t, ast.Name):
                            m.defs.add(t.id)
                            m.aliases.pop(t.id, None)
        for name, tree in trees.items():
            self._build(self.modules[name], tree)

    def _add(self, key: str, module: Module, line: int, body: list[ast.AST]) -> Node:
        refs, dynamic = _collect(module, body)
        node = self.nodes.setdefault(key, Node(key, module.file, line))
        node.refs += refs
        node.dynamic += dynamic
        if key != module.name:
            node.links.add(module.name)  # importing the module runs its top-level code
        return node

    def _build(self, m: Module, tree: ast.Module) -> None:
        top = self.nodes.setdefault(m.name, Node(m.name, m.file, 1))
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._add(f"{m.name}.{stmt.name}", m, stmt.lineno, [stmt])
            elif isinstance(stmt, ast.ClassDef):
                key = f"{m.name}.{stmt.name}"
                cls = self._add(key, m, stmt.lineno, [*stmt.decorator_list, *stmt.keywords,
                                                       *(s for s in stmt.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))])
                refs, dynamic = _collect(m, stmt.bases)
                cls.refs += [Ref(r.name, r.line, "subclasses") for r in refs]
                cls.dynamic += dynamic
                for s in stmt.body:
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        method = self._add(f"{key}.{s.name}", m, s.lineno, [s])
                        method.links.add(key)
                        cls.links.add(method.key)  # an instance can call any of its methods
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
            ):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        self._add(f"{m.name}.{t.id}", m, stmt.lineno, [stmt.value] if stmt.value is not None else [])
            elif not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                refs, dynamic = _collect(m, [stmt])
                top.refs += refs
                top.dynamic += dynamic

    def resolve(self, name: str, depth: int = 0) -> tuple[str, str]:
        """("node", key) for the submission's own code, ("module", name) for one of its modules as a
        whole, ("external", name) for anything else (a library's name), ("unknown", name) otherwise."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod not in self.modules:
                continue
            rest = parts[i:]
            if not rest:
                return "module", mod
            m = self.modules[mod]
            if rest[0] in m.defs:
                key = f"{mod}.{rest[0]}"
                if len(rest) > 1 and f"{key}.{rest[1]}" in self.nodes:
                    return "node", f"{key}.{rest[1]}"
                return "node", key
            if rest[0] in m.aliases and depth < 32:
                return self.resolve(".".join([m.aliases[rest[0]], *rest[1:]]), depth + 1)
            return "unknown", name
        if parts[0] in (PACKAGE, ENTRY_MODULE):
            return "unknown", name
        return "external", name

    def entry_points(self) -> list[str]:
        """The adapters: ``run_*``/``get_*`` functions of adapters.py."""
        m = self.modules.get(ENTRY_MODULE)
        if m is None:
            return []
        return sorted(d for d in m.defs if d.startswith(("run_", "get_")) and f"{ENTRY_MODULE}.{d}" in self.nodes)

    def reach(self, start: str) -> tuple[dict[str, str | None], list[tuple[Node, Ref, str]]]:
        """Breadth-first from node ``start``: each reached node with the node it was reached from,
        and every external name reached as (node, ref, resolved name)."""
        parent: dict[str, str | None] = {start: None}
        external: list[tuple[Node, Ref, str]] = []
        queue = deque([start])
        while queue:
            node = self.nodes[queue.popleft()]
            nexts = list(node.links)
            for ref in node.refs:
                kind, target = self.resolve(ref.name)
                if kind == "node":
                    nexts.append(target)
                elif kind == "module":
                    nexts += [f"{target}.{d}" for d in self.modules[target].defs if f"{target}.{d}" in self.nodes]
                    nexts.append(target)
                elif kind == "external":
                    external.append((node, ref, target))
            for n in nexts:
                if n in self.nodes and n not in parent:
                    parent[n] = node.key
                    queue.append(n)
        return parent, external


# ------------------------------------------------------------------------------------------------
# Findings
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    adapter: str  # run_... / get_...
    rule: Rule
    api: str  # the forbidden name reached
    where: str  # file:line
    function: str  # the submission's function or class that uses it
    how: str
    path: tuple[str, ...]  # adapter -> ... -> function

    def message(self) -> str:
        via = " -> ".join(p.removeprefix(f"{PACKAGE}.") for p in self.path)
        return (f"adapters.{self.adapter} reaches {self.api} ({self.how} in {self.function.removeprefix(PACKAGE + '.')}, "
                f"{self.where}; via {via}), which rule {self.rule.id} forbids: {self.rule.says}")


@dataclass(frozen=True)
class Suspicious:
    adapter: str
    what: str
    where: str
    function: str

    def message(self) -> str:
        return (f"adapters.{self.adapter} reaches {self.what} in {self.function.removeprefix(PACKAGE + '.')} ({self.where}): "
                "the rules check cannot see where it leads; a person will read it")


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    suspicious: list[Suspicious] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def by_adapter(self) -> dict[str, list[Violation]]:
        out: dict[str, list[Violation]] = {}
        for v in self.violations:
            out.setdefault(v.adapter, []).append(v)
        return out


def _path(parent: dict[str, str | None], key: str) -> tuple[str, ...]:
    out = [key]
    while parent[out[-1]] is not None:
        out.append(parent[out[-1]])  # type: ignore[arg-type]
    return tuple(reversed(out))


def check_sources(files: dict[str, str], book: RuleBook | None = None, adapters: list[str] | None = None) -> Report:
    """Check ``files`` (relative path -> source: adapters.py and cs336_assignment/**/*.py).

    ``adapters``: the entry points to follow (default: every ``run_*``/``get_*`` of adapters.py).
    """
    book = book or load_rules()
    program = Program(files)
    report = Report(errors=list(program.errors))
    for adapter in adapters if adapters is not None else program.entry_points():
        start = f"{ENTRY_MODULE}.{adapter}"
        if start not in program.nodes:
            continue
        parent, external = program.reach(start)
        seen = set()
        for node, ref, name in external:
            for rule in book.rules:
                if rule.forbids(name) and (rule.id, name, node.key) not in seen:
                    seen.add((rule.id, name, node.key))
                    report.violations.append(Violation(adapter, rule, name, f"{node.file}:{ref.line}", node.key,
                                                       ref.how, _path(parent, node.key)))
        for key in parent:
            node = program.nodes[key]
            for what, line in node.dynamic:
                report.suspicious.append(Suspicious(adapter, what, f"{node.file}:{line}", key))
    return report


def read_tree(root: Path) -> dict[str, str]:
    """adapters.py and cs336_assignment/**/*.py under ``root``, as the check reads them."""
    root = Path(root)
    paths = [root / "adapters.py", *sorted((root / PACKAGE).rglob("*.py"))]
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
            for p in paths if p.is_file() and "__pycache__" not in p.parts}


def check_tree(root: Path) -> Report:
    return check_sources(read_tree(root))


# ------------------------------------------------------------------------------------------------
# Your local run: a line per violation at the end of `uv run pytest`
# ------------------------------------------------------------------------------------------------


class LocalWarning:
    """Prints the violations of the code under test at the end of the run, before the per-part table."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
        try:
            report = check_tree(self.root)
        except (OSError, ValueError) as e:  # a broken rules file must not hide the test results
            terminalreporter.write_line(f"rules check skipped: {e}")
            return
        if not report.violations:
            return
        terminalreporter.section("rules (tests/rules.toml): graded functions that reach a forbidden API", sep="-")
        for v in report.violations:
            terminalreporter.write_line(f"RULE {v.message()}", yellow=True)
        terminalreporter.write_line("grading gives no points to the tests of an adapter that reaches a forbidden API")


def register(config) -> None:  # noqa: ANN001
    config.pluginmanager.register(LocalWarning(Path(__file__).resolve().parents[1]), "cs336_rules")
