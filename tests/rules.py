"""The assignment's rules (tests/rules.toml) and the check that a graded function obeys them.

The check reads source code as text and never imports or runs it: it parses ``adapters.py`` and
``cs336_assignment/**/*.py`` and follows, from each adapter (``run_*``/``get_*``), what its code
reaches: the names it uses (resolving ``import ... as`` aliases, re-exports in ``__init__`` and
``NAME = some.dotted.name`` aliases), the base classes of the classes it uses
(``class Adam(torch.optim.Adam)``), every method of a class it reaches, ``getattr(obj, "name")``
with a literal name, modules named in string constants (``importlib.import_module("cs336_assignment.x")``),
and what each module it reaches runs when it is imported: its module-level calls and assignments to
attributes, and those of its package and of the modules it imports. A module-level import or
``NAME = ...`` on its own reaches nothing: it counts once a reached function uses the name.

A reached name a rule forbids is a *violation*. Besides dotted names, a rule may forbid attribute
names read or written on anything (``frame.f_back``), imports by a name the source does not spell
(``importlib.import_module(name)``), and assigning to the attributes of a library or of the tests
(``torch.stack = ...``). Where the code goes where a reader of the source cannot follow (``getattr``
with a computed name, ``globals()``, unpickling) it is *suspicious* and named, for a person to read.

Given code, the handout's own and unchanged, is never flagged: here, the files that tests/rules.toml
lists under ``[[given]]`` while their code is the handout's (``fingerprint``: formatting and comments
do not count); in grading, code that equals the handout built from the staff's reference.

Your local ``uv run pytest`` prints each violation in the rule's words at the end of the run
(before the per-part table); the graders run the same check on your submission and give no points
to the tests that call an adapter which reaches a violation (``costs`` says which), and so does the
per-part table of your run: it records which adapters each test called (``LocalWarning``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import re
import tomllib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase, translate
from pathlib import Path

RULES_FILE = Path(__file__).with_name("rules.toml")
PACKAGE = "cs336_assignment"
ENTRY_MODULE = "adapters"
#: A rule whose ``part`` is this holds in every part, is stated by its ``short`` in each part's
#: docstring, and costs every test that reaches it, whichever part's code breaks it.
ALL_PARTS = "all"

# What a reference to something outside the submission is (``Ref.kind``).
NAME = "name"  # a dotted name used (called, subclassed, read, returned)
ATTRIBUTE = "attribute"  # an attribute name read or written on anything (``.f_back``)
COMPUTED_IMPORT = (
    "computed import"  # importlib.import_module / __import__ of a name the source does not spell
)
STORE = "store"  # an assignment to (or deletion of) an attribute of a dotted name
IMPORT = "import"  # an import statement: runs the imported modules' top-level code
MEMBER = "member"  # a method's use of its own object (self.name, cls.name): followed by ``reach(members=True)``

#: Builtins the check follows by name (other builtins are not names anyone delegates to).
BUILTINS = {
    "exec",
    "eval",
    "compile",
    "__import__",
    "__builtins__",
    "getattr",
    "setattr",
    "delattr",
    "globals",
    "vars",
}
#: Builtins that are harmless as values and judged only where they are called.
CALLED_ONLY = {"__import__", "getattr", "setattr", "delattr", "globals", "vars"}
IMPORT_FUNCS = {"__import__", "importlib.import_module", "importlib.__import__"}
#: name -> the index of the argument that names an attribute.
ATTRIBUTE_FUNCS = {
    "getattr": 1,
    "setattr": 1,
    "delattr": 1,
    "operator.attrgetter": 0,
    "operator.methodcaller": 0,
}
DUNDER_ACCESS = {"__getattribute__", "__getattr__", "__setattr__", "__delattr__"}
#: Unpickling imports and calls whatever the data names: the check cannot see which.
UNPICKLERS = (
    "pickle.load",
    "pickle.loads",
    "pickle.Unpickler",
    "_pickle",
    "cloudpickle",
    "dill",
    "marshal.load",
    "marshal.loads",
    "shelve.open",
)
_MODULE_NAME = re.compile(rf"^{PACKAGE}(\.\w+)*$")
_ATTRIBUTE_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_CALL_FREE = (ast.Name, ast.Attribute, ast.Constant)
_MAIN_GUARD = re.compile(
    r"Compare\(left=Name\(id='__name__',ctx=Load\(\)\),ops=\[Eq\(\)\],comparators=\[Constant\(value='__main__'\)\]\)$"
)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
NAME_ITERATORS = {"dict", "list", "tuple", "set", "frozenset", "sorted", "iter"}


@functools.cache
def _dotted_pattern(entries: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for dotted names that equal, or lie under, an entry (``*`` in an entry: any part of one name)."""
    alternatives = [
        r"\.".join(re.escape(seg).replace(r"\*", "[^.]*") for seg in e.split(".")) for e in entries
    ]
    return re.compile(rf"(?:{'|'.join(alternatives)})(?:\.|$)" if alternatives else r"(?!)")


def _under(name: str, entries: tuple[str, ...]) -> bool:
    """Whether the dotted ``name`` equals, or lies under, an entry (a segment of an entry may hold ``*``)."""
    return _dotted_pattern(entries).match(name) is not None


@dataclass(frozen=True)
class Rule:
    id: str
    part: str  # the part whose docstring explains it (ALL_PARTS: every part's); it holds in every part
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...]
    says: str
    short: str  # the rule in a few words ("torch.optim's optimizers")
    attributes: tuple[str, ...] = ()  # attribute names (``*`` patterns) forbidden on any object
    computed_imports: bool = False  # importing a module by a name the source does not spell
    outside_stores: bool = False  # assigning to the attributes of a library or of the tests

    @functools.cached_property
    def _patterns(self) -> tuple[re.Pattern[str], re.Pattern[str]]:
        return _dotted_pattern(self.forbidden), _dotted_pattern(self.allowed)

    def forbids(self, name: str) -> bool:
        """Whether the dotted ``name`` is, or lies under, a forbidden entry and not an allowed one."""
        forbidden, allowed = self._patterns
        return forbidden.match(name) is not None and allowed.match(name) is None

    def forbids_ref(self, kind: str, name: str) -> bool:
        """Whether a reference of ``kind`` (NAME, ATTRIBUTE, ...) to ``name`` breaks this rule."""
        if kind == ATTRIBUTE:
            return any(fnmatchcase(name, p) for p in self.attributes)
        if kind == COMPUTED_IMPORT:
            return self.computed_imports
        if kind == STORE:
            return self.outside_stores and self._patterns[1].match(name) is None
        return self.forbids(name)


@dataclass(frozen=True)
class RuleBook:
    may_use: dict[str, str]  # part key -> what it may use, in words
    rules: tuple[Rule, ...]
    given: dict[str, frozenset[str]] = field(
        default_factory=dict
    )  # file -> fingerprints of its given code

    def home_rules(self, part: str) -> list[Rule]:
        return [r for r in self.rules if r.part == part]

    @property
    def watch(self) -> re.Pattern[str] | None:
        """The attribute names some rule forbids, as one pattern (None: none)."""
        patterns = [p for r in self.rules for p in r.attributes]
        return re.compile("|".join(f"(?:{translate(p)})" for p in patterns)) if patterns else None


class RulesError(ValueError):
    """tests/rules.toml cannot be read; the message says where and what to fix."""


_RULE_KEYS = {
    "id",
    "part",
    "forbidden",
    "allowed",
    "says",
    "short",
    "attributes",
    "computed_imports",
    "outside_stores",
}


def load_rules(path: Path = RULES_FILE) -> RuleBook:
    """The rules in ``path`` (tests/rules.toml), checked for the fields every rule needs."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    may_use = {key: str(table.get("may_use", "")) for key, table in data.get("parts", {}).items()}
    rules = []
    for i, raw in enumerate(data.get("rules", [])):
        missing = [k for k in ("id", "part", "forbidden", "says", "short") if k not in raw]
        if missing:
            raise RulesError(f"{path}: [[rules]] number {i + 1} lacks {', '.join(missing)}")
        unknown = sorted(set(raw) - _RULE_KEYS)
        if unknown:
            raise RulesError(
                f"{path}: rule {raw['id']!r} has unknown keys {unknown}; the keys are {sorted(_RULE_KEYS)}"
            )
        if raw["part"] not in may_use and raw["part"] != ALL_PARTS:
            raise RulesError(
                f"{path}: rule {raw['id']!r} names part {raw['part']!r}, which has no [parts.{raw['part']}] table "
                f"(or {ALL_PARTS!r}: every part)"
            )
        rules.append(
            Rule(
                raw["id"],
                raw["part"],
                tuple(raw["forbidden"]),
                tuple(raw.get("allowed", [])),
                raw["says"],
                raw["short"],
                tuple(raw.get("attributes", [])),
                bool(raw.get("computed_imports", False)),
                bool(raw.get("outside_stores", False)),
            )
        )
    given = {}
    for i, raw in enumerate(data.get("given", [])):
        if not isinstance(raw.get("file"), str) or not isinstance(raw.get("fingerprint"), list):
            raise RulesError(
                f'{path}: [[given]] number {i + 1} needs file = "..." and fingerprint = ["..."]'
            )
        given[raw["file"]] = frozenset(raw["fingerprint"])
    return RuleBook(may_use, tuple(rules), given)


# ------------------------------------------------------------------------------------------------
# What the source reaches
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    name: str  # dotted, as resolved in its module (torch.optim.Adam, cs336_assignment.optim.Adam); an attribute name
    line: int
    how: str  # "uses", "subclasses", "names in a string", "assigned", "reads the attribute", ...
    kind: str = NAME


@dataclass
class Node:
    """A function, a class, a module-level name or a module's top-level code (what importing it runs)."""

    key: (
        str  # cs336_assignment.optim.Adam, cs336_assignment.optim.Adam.step, cs336_assignment.optim
    )
    file: str
    line: int
    refs: list[Ref] = field(default_factory=list)
    links: set[str] = field(default_factory=set)  # other nodes it always brings along
    dynamic: list[tuple[str, int]] = field(default_factory=list)  # (what, line)


@dataclass
class Module:
    name: str
    file: str
    is_package: bool = False
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted name it stands for
    defs: set[str] = field(default_factory=set)  # top-level names defined here


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_base(node: ast.ImportFrom, module: Module) -> str:
    """The absolute module a ``from ... import`` names (relative ones resolved against ``module``)."""
    base = node.module or ""
    if node.level:
        here = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)] if node.level > 1 else here
        base = ".".join([*here, *([base] if base else [])])
    return base


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Refs(ast.NodeVisitor):
    """Collects what an AST fragment reaches, skipping annotations; nested functions count as part of it."""

    def __init__(self, module: Module, watch: re.Pattern[str] | None) -> None:
        self.module = module
        self.watch = watch
        self.refs: list[Ref] = []
        self.dynamic: list[tuple[str, int]] = []
        self.local: list[
            dict[str, str | None]
        ] = []  # each enclosing function's names: an alias, or None
        self.callees: set[int] = set()
        self.names_only: set[int] = set()  # globals()/vars() calls whose names alone are read

    def dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            for scope in reversed(self.local):
                if node.id in scope:
                    return scope[node.id]
            if node.id in self.module.aliases:
                return self.module.aliases[node.id]
            if node.id in self.module.defs:
                return f"{self.module.name}.{node.id}"
            return node.id if node.id in BUILTINS else None
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def add(self, name: str, line: int, how: str, kind: str = NAME) -> None:
        self.refs.append(Ref(name, line, how, kind))

    def watched(self, attr: str) -> bool:
        return self.watch is not None and self.watch.fullmatch(attr) is not None

    def visit_Name(self, node: ast.Name) -> None:
        name = self.dotted(node)
        if name is None:
            return
        if name in IMPORT_FUNCS and id(node) not in self.callees:
            self.add(name, node.lineno, f"{name} as a value", COMPUTED_IMPORT)
        elif name not in CALLED_ONLY:
            self.add(name, node.lineno, "uses")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain: list[ast.Attribute] = []
        inner: ast.expr = node
        while isinstance(inner, ast.Attribute):
            chain.append(inner)
            inner = inner.value
        name = self.dotted(node)
        for a in (
            chain if name is not None else chain[:1]
        ):  # an unresolved chain's inner links are visited below
            if self.watched(a.attr):
                self.add(
                    a.attr,
                    a.lineno,
                    "assigns the attribute"
                    if a is node and not isinstance(node.ctx, ast.Load)
                    else "reads the attribute",
                    ATTRIBUTE,
                )
        if name is None:
            self.generic_visit(node)
            return
        if not isinstance(node.ctx, ast.Load):
            self.add(
                name,
                node.lineno,
                "assigned" if isinstance(node.ctx, ast.Store) else "deleted",
                STORE,
            )
        for a in chain:
            if (
                a.attr == "__dict__" and (base := self.dotted(a.value)) is not None
            ):  # torch.__dict__["stack"] = ...
                self.add(base, a.lineno, "reached through its __dict__", STORE)
        if name in IMPORT_FUNCS and id(node) not in self.callees:
            self.add(name, node.lineno, f"{name} as a value", COMPUTED_IMPORT)
        else:
            self.add(name, node.lineno, "uses")

    def visit_Call(self, node: ast.Call) -> None:
        self.callees.add(id(node.func))
        func = self.dotted(node.func)
        if func in ATTRIBUTE_FUNCS:
            i = ATTRIBUTE_FUNCS[func]
            names = node.args[i:] if func == "operator.attrgetter" else node.args[i : i + 1]
            if not names or any(_literal(a) is None for a in names):
                self.dynamic.append((f"{func} with a computed name", node.lineno))
            elif (
                func in ("getattr", "setattr", "delattr")
                and (base := self.dotted(node.args[0])) is not None
            ):
                attr = _literal(node.args[1])
                if func == "getattr":
                    self.add(f"{base}.{attr}", node.lineno, "uses (getattr)")
                else:
                    self.add(
                        f"{base}.{attr}",
                        node.lineno,
                        f"{'assigned' if func == 'setattr' else 'deleted'} ({func})",
                        STORE,
                    )
        elif func in IMPORT_FUNCS:
            name = _literal(node.args[0]) if node.args else None
            if name is None or name.startswith("."):
                self.add(func, node.lineno, f"imports a computed name with {func}", COMPUTED_IMPORT)
            else:
                self.add(name, node.lineno, f"names in {func}")
        elif func == "vars" and node.args and (base := self.dotted(node.args[0])) is not None:
            self.add(
                base, node.lineno, "reached through vars()", STORE
            )  # vars(torch)["stack"] = ...
        elif func in ("globals", "vars") and id(node) not in self.names_only:
            self.dynamic.append((f"{func}()", node.lineno))
        elif func is not None and _under(func, UNPICKLERS):
            self.dynamic.append(
                (f"{func} (unpickling imports whatever the data names)", node.lineno)
            )
        elif func in ("torch.load", "torch.serialization.load", "numpy.load"):
            flag = "allow_pickle" if func == "numpy.load" else "weights_only"
            for kw in node.keywords:
                if kw.arg == flag and not (
                    isinstance(kw.value, ast.Constant)
                    and kw.value.value is (flag == "weights_only")
                ):
                    self.dynamic.append(
                        (
                            f"{func} with {flag} not {flag == 'weights_only'} (it unpickles)",
                            node.lineno,
                        )
                    )
        elif (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in DUNDER_ACCESS
            and not any(_literal(a) is not None for a in node.args)
        ):
            self.dynamic.append((f"{node.func.attr} with a computed name", node.lineno))
        self.generic_visit(node)

    def _names_only(self, it: ast.expr) -> None:
        """Mark ``globals()`` iterated for its names (``[n for n in dict(globals()) if ...]``): nothing is looked up."""
        while (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name)
            and it.func.id in NAME_ITERATORS
            and len(it.args) == 1
        ):
            it = it.args[0]
        if (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Attribute)
            and it.func.attr == "keys"
            and not it.args
        ):
            it = it.func.value
        if isinstance(it, ast.Call) and self.dotted(it.func) in ("globals", "vars"):
            self.names_only.add(id(it))

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self._names_only(node.iter)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._names_only(node.iter)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            if _MODULE_NAME.match(node.value):
                self.add(node.value, node.lineno, "names in a string")
            elif _ATTRIBUTE_PATH.fullmatch(
                node.value
            ):  # getattr(frame, "f_back"), attrgetter("f_back.f_locals")
                for attr in node.value.split("."):
                    if self.watched(attr):
                        self.add(attr, node.lineno, "names in a string", ATTRIBUTE)

    def visit_arg(self, node: ast.arg) -> None:  # annotations are not uses
        return

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # nested functions run as part of their enclosing one: their bodies count, their annotations do not
        for d in node.decorator_list:
            self.visit(d)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)
        self.local.append(self._local_aliases(node))
        for stmt in node.body:
            self.visit(stmt)
        self.local.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _local_aliases(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str | None]:
        """A function's own names: one it assigns once, from a dotted name (``t = torch``), stands for
        that name; its parameters and its other names hide the module's names they share (None)."""
        args = fn.args
        assigned: dict[str, list[ast.expr | None]] = {
            a.arg: [None]
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            if a
        }
        declared: set[str] = set()
        for sub in ast.walk(fn):
            if isinstance(sub, (ast.Global, ast.Nonlocal)):
                declared.update(sub.names)
            elif isinstance(sub, ast.Assign):
                for t in sub.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and isinstance(
                            n.ctx, ast.Store
                        ):  # not `torch` in `torch.x = ...`
                            assigned.setdefault(n.id, []).append(sub.value if t is n else None)
            elif isinstance(
                sub,
                (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr),
            ):
                target = sub.optional_vars if isinstance(sub, ast.withitem) else sub.target
                for n in ast.walk(target) if target is not None else []:
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        assigned.setdefault(n.id, []).append(None)
        out: dict[str, str | None] = {}
        for name, values in assigned.items():
            if name not in declared:
                out[name] = (
                    self.dotted(values[0]) if len(values) == 1 and values[0] is not None else None
                )
        return out

    def visit_Import(
        self, node: ast.Import
    ) -> None:  # an import alone delegates nothing; it runs module code
        for a in node.names:
            self.add(a.name, node.lineno, "imports", IMPORT)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _import_base(node, self.module)
        for a in node.names:
            self.add(base if a.name == "*" else f"{base}.{a.name}", node.lineno, "imports", IMPORT)


def _collect(
    module: Module, nodes: Sequence[ast.AST], watch: re.Pattern[str] | None
) -> tuple[list[Ref], list[tuple[str, int]]]:
    v = _Refs(module, watch)
    for n in nodes:
        v.visit(n)
    return v.refs, v.dynamic


def _imports(tree: ast.Module, module: Module) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    module.aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    module.aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = _import_base(node, module)
            for a in node.names:
                if a.name != "*":
                    module.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name


# ------------------------------------------------------------------------------------------------
# Module level: definitions, and what importing a module runs
# ------------------------------------------------------------------------------------------------

_BLOCKS = (
    ast.If,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Match,
    *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists inside a compound statement at module level (not a def's or a class's)."""
    if isinstance(stmt, ast.Match):
        return [c.body for c in stmt.cases]
    out = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if getattr(stmt, f, None)]
    return out + [h.body for h in getattr(stmt, "handlers", [])]


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement that runs at module level: the module's own, and those in its if/try/with/for blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, _BLOCKS):
            for block in _blocks(stmt):
                yield from _module_statements(block)


def _name_targets(stmt: ast.stmt) -> list[str] | None:
    """The names a definition-like assignment binds (``X = ...``, ``A, B = ...``); None when it
    assigns anything else too (an attribute, an item): then it is code that runs, not a definition."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return None
    names = []
    for t in targets:
        for n in (
            [t]
            if isinstance(t, ast.Name)
            else t.elts
            if isinstance(t, (ast.Tuple, ast.List))
            else [None]
        ):
            if isinstance(n, ast.Starred):
                n = n.value
            if not isinstance(n, ast.Name):
                return None
            names.append(n.id)
    return names


def _calls(nodes: list[ast.AST | None]) -> list[ast.AST]:
    """The outermost calls in ``nodes``: what evaluating them runs (a name alone runs nothing)."""
    out: list[ast.AST] = []
    todo = [n for n in nodes if n is not None]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) or (
            isinstance(n, _COMPREHENSIONS) and _calls(list(ast.iter_child_nodes(n)))
        ):
            out.append(n)
        elif not isinstance(n, (ast.Lambda, *_DEFS)):
            todo.extend(ast.iter_child_nodes(n))
    return out


def _runs_at_import(body: list[ast.stmt]) -> list[ast.AST]:
    """The code of a module (or a class body) that importing it runs, beyond binding names: calls,
    assignments to attributes or items, ``with`` blocks entered, imports (which run other modules);
    the decorators' and default values' calls of its functions; class bodies, likewise."""
    out: list[ast.AST] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.append(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += _calls([*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults])
        elif isinstance(stmt, ast.ClassDef):
            out += _calls([*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)])
            out += _runs_at_import(stmt.body)
        elif _name_targets(stmt) is not None:
            out += _calls([getattr(stmt, "value", None)])
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            out += stmt.items
            out += _runs_at_import(stmt.body)
        elif isinstance(stmt, ast.If) and _MAIN_GUARD.match(canonical(stmt.test)):
            # `if __name__ == "__main__":` runs only as a script
            out += _runs_at_import(stmt.orelse)
        elif isinstance(stmt, _BLOCKS):
            head = [getattr(stmt, f, None) for f in ("test", "iter", "subject")]
            out += _calls([*head, *(h.type for h in getattr(stmt, "handlers", []))])
            for block in _blocks(stmt):
                out += _runs_at_import(block)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, _CALL_FREE):
            continue  # a docstring or a bare name runs nothing
        elif isinstance(stmt, (ast.Expr, ast.Raise, ast.Assert, ast.Return)):
            out += _calls([stmt])
        elif not isinstance(stmt, (ast.Pass, ast.Global, ast.Nonlocal, ast.Break, ast.Continue)):
            out.append(stmt)  # an assignment to an attribute or an item, a del: all of it counts
    return out


def _members(method: ast.FunctionDef | ast.AsyncFunctionDef, cls: str) -> list[Ref]:
    """What ``method`` (of the class ``cls``) uses on its first parameter (``self.x``, ``cls.x``), as MEMBER refs."""
    params = [*method.args.posonlyargs, *method.args.args]
    if not params:
        return []
    me = params[0].arg
    return [
        Ref(f"{cls}.{n.attr}", n.lineno, f"uses {me}.{n.attr}", MEMBER)
        for n in ast.walk(method)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me
    ]


def _private(key: str) -> bool:
    """Whether the last name of ``key`` is private (``_helper``; a dunder is not)."""
    last = key.rpartition(".")[2]
    return last.startswith("_") and not (last.startswith("__") and last.endswith("__"))


def _definitions(m: Module, tree: ast.Module) -> None:
    """The names ``m`` defines at module level; one assigned once from a dotted name is an alias of it."""
    count: dict[str, int] = {}
    for stmt in _module_statements(tree.body):
        if isinstance(stmt, _DEFS):
            m.defs.add(stmt.name)
            m.aliases.pop(stmt.name, None)
        for name in _name_targets(stmt) or []:
            m.defs.add(name)
            m.aliases.pop(name, None)
            count[name] = count.get(name, 0) + 1
    resolver = _Refs(m, None)
    for stmt in _module_statements(tree.body):
        names = _name_targets(stmt)
        value = getattr(stmt, "value", None)
        if (
            isinstance(stmt, ast.AugAssign)
            or not names
            or len(names) != 1
            or count[names[0]] != 1
            or value is None
        ):
            continue
        if (
            isinstance(value, (ast.Name, ast.Attribute))
            and (dotted := resolver.dotted(value)) is not None
        ):
            m.aliases[names[0]] = dotted


@dataclass(frozen=True)
class _ModuleCode:
    """What one file brings to a ``Program``: its module (names, aliases) and the nodes of its code.
    Made from the file alone (``_module_code``) and never changed after: ``Program`` copies it."""

    module: Module
    nodes: dict[str, Node]

    @classmethod
    def build(cls, m: Module, tree: ast.Module, watch: re.Pattern[str] | None) -> _ModuleCode:
        code = cls(m, {})
        top = code.nodes.setdefault(m.name, Node(m.name, m.file, 1))
        refs, dynamic = _collect(m, _runs_at_import(tree.body), watch)
        top.refs += refs
        top.dynamic += dynamic
        for stmt in _module_statements(tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                code._add(f"{m.name}.{stmt.name}", stmt.lineno, [stmt], watch)
            elif isinstance(stmt, ast.ClassDef):
                key = f"{m.name}.{stmt.name}"
                body = [
                    s
                    for s in stmt.body
                    if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                ]
                node = code._add(
                    key, stmt.lineno, [*stmt.decorator_list, *stmt.keywords, *body], watch
                )
                refs, dynamic = _collect(m, stmt.bases, watch)
                node.refs += [
                    Ref(r.name, r.line, "subclasses", r.kind) if r.kind == NAME else r for r in refs
                ]
                node.dynamic += dynamic
                for s in stmt.body:
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        method = code._add(f"{key}.{s.name}", s.lineno, [s], watch)
                        method.refs += _members(s, key)
                        method.links.add(key)
                        node.links.add(method.key)  # an instance can call any of its methods
            elif (names := _name_targets(stmt)) is not None:
                value = getattr(stmt, "value", None)
                for name in names:
                    code._add(
                        f"{m.name}.{name}", stmt.lineno, [value] if value is not None else [], watch
                    )
        return code

    def _add(self, key: str, line: int, body: list[ast.AST], watch: re.Pattern[str] | None) -> Node:
        refs, dynamic = _collect(self.module, body, watch)
        node = self.nodes.setdefault(key, Node(key, self.module.file, line))
        node.refs += refs
        node.dynamic += dynamic
        if key != self.module.name:
            node.links.add(self.module.name)  # importing the module runs its top-level code
        return node


@functools.lru_cache(maxsize=256)
def _module_code(path: str, text: str, watch: str | None, flags: int) -> _ModuleCode | str:
    """The code of the file ``path`` (``_ModuleCode``), or the error saying it does not parse.

    A function of the file's path and text and of the watched attribute names (``watch``,
    ``flags``: ``RuleBook.watch``) alone, so it is kept by content: every program holding the same
    file, the handout's, the reference's or a submission's unchanged one, reads it once per process.
    The most recent 256 are kept (a batch's submissions each bring their own changed files, read
    once: about 25 kB each, text and nodes).
    """
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        return f"{path}:{e.lineno}: does not parse ({e.msg}); the rules check could not read it"
    m = Module(module_name(path), path, path.endswith("__init__.py"))
    _imports(tree, m)
    _definitions(m, tree)
    return _ModuleCode.build(m, tree, None if watch is None else re.compile(watch, flags))


class Program:
    """The parsed source of a submission (or of the reference): modules, their names, what each reaches.
    Each file's code is read once per process (``_module_code``); ``reach`` keeps its steps, so a
    program is not to be changed once it has been searched."""

    def __init__(self, files: dict[str, str], watch: re.Pattern[str] | None = None) -> None:
        self.modules: dict[str, Module] = {}
        self.nodes: dict[str, Node] = {}
        self.errors: list[str] = []
        self.watch = watch
        self._steps: dict[tuple[str, bool], tuple[list[str], list[tuple[Ref, str]]]] = {}
        # module name -> its file's code (of two files of one name, the last)
        codes: dict[str, _ModuleCode] = {}
        for path, text in sorted(files.items()):
            code = _module_code(
                path,
                text,
                None if watch is None else watch.pattern,
                0 if watch is None else watch.flags,
            )
            if isinstance(code, str):
                self.errors.append(code)
                continue
            m = code.module
            self.modules[m.name] = Module(
                m.name, m.file, m.is_package, dict(m.aliases), set(m.defs)
            )
            codes[m.name] = code
        for name, code in codes.items():  # copied: a program's nodes are its own
            for key, node in code.nodes.items():
                mine = self.nodes.setdefault(key, Node(key, node.file, node.line))
                mine.refs += node.refs
                mine.links |= node.links
                mine.dynamic += node.dynamic
            # importing a module runs its package's __init__ first
            parent = name.rpartition(".")[0]
            if parent in self.modules:
                self.nodes[name].links.add(parent)

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

    def imported(self, name: str) -> list[str]:
        """The top-level code nodes that ``import name`` (or ``from a import b``, as ``a.b``) runs."""
        parts = name.split(".")
        return [
            ".".join(parts[:i])
            for i in range(1, len(parts) + 1)
            if ".".join(parts[:i]) in self.modules
        ]

    def outside(self, node: Node) -> Iterator[tuple[Ref, str]]:
        """What ``node``'s own code reaches outside the submission: (ref, resolved name)."""
        for ref in node.refs:
            if ref.kind in (ATTRIBUTE, COMPUTED_IMPORT):
                yield ref, ref.name
            elif ref.kind in (NAME, STORE):
                kind, target = self.resolve(ref.name)
                if kind == "external":
                    yield ref, target

    def reach(
        self, start: str, members: bool = False
    ) -> tuple[dict[str, str | None], list[tuple[Node, Ref, str]]]:
        """Breadth-first from node ``start``: each reached node with the node it was reached from,
        and every outside name reached as (node, ref, resolved name).

        A class reached brings every method: an instance can call any of them. With ``members``, what
        a caller can run (which functions the tests grade, whatever a student writes elsewhere): a class
        brings its public and dunder methods only, and a method reaches what it uses on its own object
        (``self._helper``)."""
        parent: dict[str, str | None] = {start: None}
        external: list[tuple[Node, Ref, str]] = []
        queue = deque([start])
        while queue:
            node = self.nodes[queue.popleft()]
            nexts, outside = self._step(node, members)
            external += [(node, ref, name) for ref, name in outside]
            for n in nexts:
                if n not in parent:
                    parent[n] = node.key
                    queue.append(n)
        return parent, external

    def _step(self, node: Node, members: bool) -> tuple[list[str], list[tuple[Ref, str]]]:
        """``reach``'s step from ``node``: the nodes it leads to, in order, and what it reaches
        outside (``outside``); worked out once per program, as every adapter's search passes the
        same modules."""
        step = self._steps.get((node.key, members))
        if step is not None:
            return step
        # sorted, as sets are not: the path a finding names is the same in every process
        nexts = [
            n
            for n in sorted(node.links)
            if not (members and n.startswith(node.key + ".") and _private(n))
        ]
        for ref in node.refs:
            if ref.kind == IMPORT:
                nexts += self.imported(ref.name)
                continue
            if ref.kind != NAME and not (members and ref.kind == MEMBER):
                continue
            kind, target = self.resolve(ref.name)
            if kind == "node":
                nexts.append(target)
            elif kind == "module":
                nexts += [
                    f"{target}.{d}"
                    for d in sorted(self.modules[target].defs)
                    if f"{target}.{d}" in self.nodes
                ]
                nexts.append(target)
        step = [n for n in nexts if n in self.nodes], list(self.outside(node))
        self._steps[(node.key, members)] = step
        return step

    def entry_points(self) -> list[str]:
        """The adapters: ``run_*``/``get_*`` functions of adapters.py."""
        m = self.modules.get(ENTRY_MODULE)
        if m is None:
            return []
        return sorted(
            d
            for d in m.defs
            if d.startswith(("run_", "get_")) and f"{ENTRY_MODULE}.{d}" in self.nodes
        )


# ------------------------------------------------------------------------------------------------
# Findings
# ------------------------------------------------------------------------------------------------


def describe(kind: str, name: str) -> str:
    """How a finding names what was reached: ``torch.optim.Adam``, ``.f_back``, ``a module by a computed name``."""
    if kind == ATTRIBUTE:
        return f".{name}"
    if kind == COMPUTED_IMPORT:
        return "a module by a computed name"
    return name


@dataclass(frozen=True)
class Violation:
    adapter: str  # run_... / get_...
    rule: Rule
    api: str  # the forbidden name reached
    where: str  # file:line
    function: str  # the submission's function or class that uses it
    how: str
    path: tuple[str, ...]  # adapter -> ... -> function

    @property
    def what(self) -> str:
        """The finding, without its place: the rule and what it forbids here."""
        return f"{self.rule.id}: {self.api}"

    def message(self) -> str:
        via = " -> ".join(p.removeprefix(f"{PACKAGE}.") for p in self.path)
        return (
            f"adapters.{self.adapter} reaches {self.api} ({self.how} in {self.function.removeprefix(PACKAGE + '.')}, "
            f"{self.where}; via {via}), which rule {self.rule.id} forbids: {self.rule.says}"
        )


@dataclass(frozen=True)
class Suspicious:
    adapter: str
    what: str
    where: str
    function: str

    def message(self) -> str:
        return (
            f"adapters.{self.adapter} reaches {self.what} in {self.function.removeprefix(PACKAGE + '.')} ({self.where}): "
            "the rules check cannot see where it leads; a person will read it"
        )


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


# ------------------------------------------------------------------------------------------------
# Which tests a violation costs (the same decision in grading and in the table of your run)
# ------------------------------------------------------------------------------------------------

_SECTION = re.compile(r"^#\s+(?:(\d+)\.\s+)?(\S.*?)\s*$")
_DEF = re.compile(r"^def\s+(\w+)")


def adapter_sections(
    adapters_source: str,
) -> tuple[dict[str, int | None], list[tuple[int | None, str, int]]]:
    """Adapter name -> the number of its ``adapters.py`` section (None: an unnumbered section), and
    the section headers as (number, text, line). A header is the comment line after a ``# ---`` rule."""
    owner: dict[str, int | None] = {}
    headers: list[tuple[int | None, str, int]] = []
    current: int | None = None
    lines = adapters_source.splitlines()
    for i, line in enumerate(lines):
        if (
            i
            and lines[i - 1].startswith("# ---")
            and (m := _SECTION.match(line))
            and not line.startswith("# ---")
        ):
            current = int(m.group(1)) if m.group(1) else None
            headers.append((current, m.group(2), i + 1))
        elif (m := _DEF.match(line)) and m.group(1).startswith(("run_", "get_")):
            owner[m.group(1)] = current
    return owner, headers


def part_of(file: str, parts: set[str]) -> str | None:
    """The part whose module holds ``file`` (``cs336_assignment/optim.py`` -> optim); None: no part's."""
    pieces = file.split("/")
    if len(pieces) < 2 or pieces[0] != PACKAGE:
        return None
    key = pieces[1].removesuffix(".py")
    return key if key in parts else None


def costs(
    report: Report,
    reached: set[str],
    concept: str | None,
    parts: set[str],
    sections: dict[str, str],
) -> list[Violation]:
    """The violations that take the points of a test of part ``concept`` that reached the adapters
    ``reached`` (``sections``: adapter -> the part of its ``adapters.py`` section).

    A violation costs the tests of the part whose code holds it (its module; in ``adapters.py``, the
    adapter's section), and every test reaching it when it lies in code of no part (``validation.py``,
    ``cli.py``): delegation costs points where it is, as a bug does. A violation of a rule of every
    part (reaching the tests or the interpreter's insides) costs every test, reached or not: such
    code can change any test that runs after it in the same process."""
    by_adapter = report.by_adapter()

    def part(v: Violation) -> str | None:
        file = v.where.split(":")[0]
        return sections.get(v.adapter) if file == f"{ENTRY_MODULE}.py" else part_of(file, parts)

    everywhere = [v for a in sorted(by_adapter) for v in by_adapter[a] if v.rule.part == ALL_PARTS]
    hits = [
        v
        for a in sorted(reached)
        for v in by_adapter.get(a, [])
        if v.rule.part != ALL_PARTS and part(v) in (concept, None)
    ]
    return list(dict.fromkeys(everywhere + hits))


#: (file, line, what) -> whether it lies in given code, unchanged, that draws the same finding there.
Given = Callable[[str, int, str], bool]


def _path(parent: dict[str, str | None], key: str) -> tuple[str, ...]:
    out = [key]
    while parent[out[-1]] is not None:
        out.append(parent[out[-1]])  # type: ignore[arg-type]
    return tuple(reversed(out))


def check_sources(
    files: dict[str, str],
    book: RuleBook | None = None,
    adapters: list[str] | None = None,
    given: Given | None = None,
) -> Report:
    """Check ``files`` (relative path -> source: adapters.py and cs336_assignment/**/*.py).

    ``adapters``: the entry points to follow (default: every ``run_*``/``get_*`` of adapters.py).
    ``given``: what is given code (default: the ``[[given]]`` files of the rules, while unchanged).
    """
    book = book or load_rules()
    exempt = given or given_files(files, book)
    program = Program(files, book.watch)
    report = Report(errors=list(program.errors))
    for adapter in adapters if adapters is not None else program.entry_points():
        start = f"{ENTRY_MODULE}.{adapter}"
        if start not in program.nodes:
            continue
        parent, external = program.reach(start)
        seen = set()
        for node, ref, name in external:
            for rule in book.rules:
                if (
                    rule.forbids_ref(ref.kind, name)
                    and (rule.id, ref.kind, name, node.key) not in seen
                ):
                    seen.add((rule.id, ref.kind, name, node.key))
                    v = Violation(
                        adapter,
                        rule,
                        describe(ref.kind, name),
                        f"{node.file}:{ref.line}",
                        node.key,
                        ref.how,
                        _path(parent, node.key),
                    )
                    if not exempt(node.file, ref.line, v.what):
                        report.violations.append(v)
        for key in parent:
            node = program.nodes[key]
            for what, line in node.dynamic:
                if not exempt(node.file, line, what):
                    report.suspicious.append(Suspicious(adapter, what, f"{node.file}:{line}", key))
    return report


def findings(files: dict[str, str], book: RuleBook) -> dict[str, list[tuple[int, str]]]:
    """file -> (line, what) of every finding its code would draw wherever an adapter reached it
    (the ``what`` of a Violation or a Suspicious): given code's, when ``files`` is the handout."""
    program = Program(files, book.watch)
    out: dict[str, list[tuple[int, str]]] = {}
    for node in program.nodes.values():
        found = [
            (ref.line, f"{rule.id}: {describe(ref.kind, name)}")
            for ref, name in program.outside(node)
            for rule in book.rules
            if rule.forbids_ref(ref.kind, name)
        ]
        found += [(line, what) for what, line in node.dynamic]
        if found:
            out.setdefault(node.file, []).extend(found)
    return out


def canonical(node: object) -> str:
    """Code (an AST, or a list of them) as text, without places, empty fields or the fields newer
    Pythons added: equal for equal code on Python 3.11 to 3.13, whatever its formatting and comments."""
    if isinstance(node, ast.AST):
        fields = [
            f"{f}={canonical(v)}"
            for f in node._fields
            if (v := getattr(node, f, None)) is not None
            and v != []
            and f not in ("kind", "type_comment")
        ]
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(canonical(n) for n in node)}]"
    return repr(node)


def fingerprint(source: str) -> str | None:
    """The sha256 of ``source``'s code (formatting and comments aside), as ``[[given]]`` records it;
    None when it does not parse."""
    try:
        code = canonical(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError):
        return None
    return hashlib.sha256(code.encode()).hexdigest()


def given_files(files: dict[str, str], book: RuleBook) -> Given:
    """Given code as a student's own run knows it: every line of a ``[[given]]`` file whose code is unchanged."""
    unchanged = {
        f for f, prints in book.given.items() if f in files and fingerprint(files[f]) in prints
    }
    return lambda file, line, what: file in unchanged


def read_tree(root: Path) -> dict[str, str]:
    """adapters.py and cs336_assignment/**/*.py under ``root``, as the check reads them."""
    root = Path(root)
    paths = [root / "adapters.py", *sorted((root / PACKAGE).rglob("*.py"))]
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in paths
        if p.is_file() and "__pycache__" not in p.parts
    }


def check_tree(root: Path, book: RuleBook | None = None) -> Report:
    return check_sources(read_tree(root), book)


# ------------------------------------------------------------------------------------------------
# Your local run: a line per violation at the end of `uv run pytest`
# ------------------------------------------------------------------------------------------------


class LocalWarning:
    """Prints the violations of the code under test at the end of the run, before the per-part table;
    records which adapters each test called (wrapping ``adapters``' functions once collection starts)
    so that the table (tests/progress.py, through ``lost``) gives no points where grading gives none."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reached: dict[str, set[str]] = {}  # nodeid -> the adapters it called
        self._test: str | None = None
        self._report: Report | None = None
        self._error: str | None = None

    def report(self) -> Report | None:
        """The check of the code under test (once per run); None when it could not run."""
        if self._report is None and self._error is None:
            try:
                self._report = check_tree(self.root)
            except (OSError, ValueError) as e:  # a broken rules file must not hide the test results
                self._error = str(e)
        return self._report

    def pytest_collection(self, session) -> None:  # noqa: ANN001
        """Wrap each adapter of ``adapters`` to record the test calling it (drivers call them too). Not
        where ``adapters`` is a stand-in (grading's judge records its own), nor when it does not import
        (the tests that import it say why)."""
        try:
            module = importlib.import_module(ENTRY_MODULE)
        except Exception:  # noqa: BLE001 - reported where the tests import it
            return
        if getattr(module, "__file__", None) is None:
            return
        for name, fn in list(vars(module).items()):
            if name.startswith(("run_", "get_")) and callable(fn) and not hasattr(fn, "_recorded"):
                setattr(module, name, self._recorder(name, fn))

    def _recorder(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            __tracebackhide__ = True
            if self._test is not None:
                self.reached.setdefault(self._test, set()).add(name)
            return fn(*args, **kwargs)

        call._recorded = True  # type: ignore[attr-defined]
        return call

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self._test = nodeid

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        self._test = None

    def lost(self, concepts: dict[str, str | None], parts: list[str]) -> dict[str, list[str]]:
        """nodeid -> the ids of the rules that take its points in grading (``costs``), for the tests
        in ``concepts`` (nodeid -> its part) by the adapters each called; ``parts``: the parts' keys in
        the handout's order (an ``adapters.py`` section ``# N. ...`` is the N-th)."""
        report = self.report()
        if report is None or not report.violations:
            return {}
        adapters = self.root / f"{ENTRY_MODULE}.py"
        source = adapters.read_text(errors="replace") if adapters.is_file() else ""
        owner, _ = adapter_sections(source)
        sections = {a: parts[n - 1] for a, n in owner.items() if n and 0 < n <= len(parts)}
        out = {}
        for nodeid, concept in concepts.items():
            hits = costs(report, self.reached.get(nodeid, set()), concept, set(parts), sections)
            if hits:
                out[nodeid] = sorted({v.rule.id for v in hits})
        return out

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
        report = self.report()
        if report is None:
            terminalreporter.write_line(f"rules check skipped: {self._error}")
            return
        if not report.violations:
            return
        terminalreporter.section(
            "rules (tests/rules.toml): graded functions that reach a forbidden API", sep="-"
        )
        for v in report.violations:
            terminalreporter.write_line(f"RULE {v.message()}", yellow=True)
        terminalreporter.write_line(
            "grading gives no points to the tests of an adapter that reaches a forbidden API "
            "(the table below neither)"
        )


def register(config) -> None:  # noqa: ANN001
    config.pluginmanager.register(LocalWarning(Path(__file__).resolve().parents[1]), "cs336_rules")
