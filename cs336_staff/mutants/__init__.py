"""The bug zoo: realistic wrong implementations, each a small patch of the reference.

One module per graded part (``optim.py``, ``data.py``, ...) defines ``MUTANTS: list[Mutant]``.
``uv run cs336 audit`` applies each in a scratch copy of the repository, runs the public tests
named by the mutant, and fails unless every mutant is caught.

Beside them, ``CONTROLS: list[Control]``: correct rewrites of the same code in another idiom. The
audit runs each against every public and hidden test of its part and fails unless all pass: a
test that rejects a control rejects right code written differently.

And ``HIDDEN_ONLY: list[HiddenOnly]``: realistic bugs that every public test lets through and a
hidden test catches (``cs336_staff/audit/hidden_only.py``). The audit fails unless each passes the
public tests, fails the hidden tests it names, and costs a student at least ``NOTICEABLE`` percent
of the assignment's points under ``rubric.toml``: a hidden test that is a bug's only catch must
weigh enough to be noticed.

A mutant is anchored to code, not to text: it names the function it changes and gives the old and
new code, and the old code is found by comparing syntax trees. Reformatting the reference (``ruff
format``: line breaks, quotes, parentheses, trailing commas) or editing its comments leaves every
mutant applicable; ``tests/staff/test_mutants.py`` proves it on a formatted copy.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Expressions that bind tighter than any operator: spliced in without parentheses.
_ATOMS = (
    ast.Name,
    ast.Constant,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
    ast.GeneratorExp,
)


@dataclass(frozen=True)
class Mutant:
    """A wrong implementation: inside ``function`` of ``file``, the code ``old`` becomes ``new``.

    ``function`` is a qualified name (``to_fp8``, ``AdamW.step``, ``Tokenizer.__init__``).
    ``old`` is one or more whole statements (they must be consecutive in one block of the
    function), or one expression; ``new`` is what replaces it, of the same kind (no statements
    at all deletes the old ones). ``old`` is compared as a syntax tree, so its layout, quotes,
    parentheses and comments need not match the reference's, and it must match exactly once in
    ``function``. The file is patched in place: only the matched statements' (or expression's)
    text changes, and the rest of the file, comments included, stays as it was.

    ``tests`` are the public test paths that must catch it, relative to the repository root;
    ``why`` says what mistake a student would make to write this.
    """

    name: str
    file: str
    function: str
    old: str
    new: str
    why: str
    tests: tuple[str, ...] = field(default_factory=tuple)

    def mutate(self, source: str) -> str:
        """``source`` (the text of ``file``) with the mutation applied; a ValueError saying why it
        cannot be (no such function, ``old`` matched zero or several times, a result that does not compile)."""
        scope = _find_scope(ast.parse(source), self.function, self._where)
        old = _parse(self.old, f"mutant {self.name!r}: its `old`")
        new = _parse(self.new, f"mutant {self.name!r}: its `new`")
        runs = _statement_runs(scope, old)
        spans: list[ast.expr] = []
        expression = _lone_expression(old)
        if expression is not None:  # an expression statement also matches inside larger statements
            matched = {id(run[0].value) for run in runs if isinstance(run[0], ast.Expr)}
            spans = [e for e in _expressions(scope, expression) if id(e) not in matched]
        if len(runs) + len(spans) != 1:
            raise ValueError(
                f"mutant {self.name!r}: its `old` code matches {len(runs) + len(spans)} times in {self._where} "
                "(must be exactly 1); update the mutant to match the current reference"
            )
        if runs:
            mutated = _replace_statements(
                source, scope, runs[0], textwrap.dedent(self.new).strip("\n")
            )
        else:
            mutated = _replace_span(source, spans[0], _expression_text(self.new, new, self.name))
        try:
            compile(mutated, self.file, "exec")
        except SyntaxError as e:
            raise ValueError(
                f"mutant {self.name!r}: the mutated {self.file} does not compile: {e.msg} at line {e.lineno}"
            ) from None
        return mutated

    def apply(self, root: Path) -> None:
        """Patch the copy of the repository at ``root``; fail loudly if the reference moved on."""
        path = root / self.file
        path.write_text(self.mutate(path.read_text()))

    @property
    def _where(self) -> str:
        return f"{self.function} ({self.file})"


@dataclass(frozen=True)
class Control(Mutant):
    """A correct rewrite: patched like a ``Mutant``, but it must PASS every test of its part.

    ``why`` says which idiom it uses instead of the reference's. ``tests`` may stay empty: the audit
    runs the part's public and hidden test files (``cs336_staff.audit.mutants.control_tests``).
    """


@dataclass(frozen=True)
class HiddenOnly(Mutant):
    """A bug only the hidden tests catch: patched like a ``Mutant``, it must PASS every public test of
    its part (and of the parts that use it) and FAIL each hidden test named in ``hidden``.

    ``hidden`` are node ids or node-id prefixes (``tests/hidden/test_<part>.py::test_y`` covers
    all its parametrized cases), each of which must fail. ``tests`` stays empty: the audit runs the
    part's public and hidden test files (``cs336_staff.audit.hidden_only.hidden_only_tests``).
    ``why`` says what mistake a student would make, and why the public twin lets it through.
    """

    hidden: tuple[str, ...] = ()


def _find_scope(tree: ast.Module, qualname: str, where: str) -> ast.AST:
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):  # no definition inside (a lambda is not one)
                continue
            if isinstance(child, _SCOPES):
                name = f"{prefix}{child.name}"
                if name == qualname:
                    found.append(child)
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    if len(found) != 1:
        raise ValueError(
            f"mutant scope {where}: {len(found)} definitions of that name (must be exactly 1)"
        )
    return found[0]


def _parse(code: str, what: str) -> list[ast.stmt]:
    try:
        return ast.parse(textwrap.dedent(code).strip("\n")).body
    except SyntaxError as e:
        raise ValueError(f"{what} is not Python statements or an expression: {e.msg}") from None


def _dump(node: ast.AST) -> str:
    return ast.dump(node)  # without line numbers: layout never matters


def _blocks(scope: ast.AST) -> list[list[ast.stmt]]:
    """Every list of statements in ``scope`` (bodies, ``else`` and ``finally`` blocks, handlers' bodies)."""
    return [
        value
        for node in ast.walk(scope)
        for _, value in ast.iter_fields(node)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt)
    ]


def _statement_runs(scope: ast.AST, old: list[ast.stmt]) -> list[list[ast.stmt]]:
    """Runs of consecutive statements, in any block of ``scope``, whose trees are ``old``'s."""
    if not old:
        return []
    want = [_dump(s) for s in old]
    return [
        block[i : i + len(old)]
        for block in _blocks(scope)
        for i in range(len(block) - len(old) + 1)
        if type(block[i]) is type(old[0]) and [_dump(s) for s in block[i : i + len(old)]] == want
    ]


def _whole_block(scope: ast.AST, run: list[ast.stmt]) -> bool:
    """Whether ``run`` is all of the block it is in (deleting it would leave the block empty)."""
    return any(block == run for block in _blocks(scope))


def _lone_expression(old: list[ast.stmt]) -> ast.expr | None:
    return old[0].value if len(old) == 1 and isinstance(old[0], ast.Expr) else None


def _expressions(scope: ast.AST, expression: ast.expr) -> list[ast.expr]:
    want = _dump(expression)
    return [n for n in ast.walk(scope) if type(n) is type(expression) and _dump(n) == want]


def _expression_text(code: str, new: list[ast.stmt], name: str) -> str:
    expression = _lone_expression(new)
    if expression is None:
        raise ValueError(
            f"mutant {name!r}: its `old` is an expression, so its `new` must be one too"
        )
    text = textwrap.dedent(code).strip()
    return text if isinstance(expression, _ATOMS) else f"({text})"


def _replace_statements(source: str, scope: ast.AST, run: list[ast.stmt], code: str) -> str:
    """``source`` with the statements of ``run`` replaced by ``code``, indented as they were.

    An empty ``code`` deletes them, with their lines when they have them to themselves (or leaves
    ``pass`` when they are the whole block)."""
    if code or _whole_block(scope, run):
        return _replace_span(
            source, run[0], (code or "pass").replace("\n", "\n" + " " * run[0].col_offset), run[-1]
        )
    start, end = _span(source, run[0], run[-1])
    line_start = source.rfind("\n", 0, start) + 1
    line_end = source.find("\n", end) + 1 or len(source)
    rest = source[end:line_end].strip()
    if not source[line_start:start].strip() and (not rest or rest.startswith("#")):
        start, end = line_start, line_end
    return source[:start] + source[end:]


def _replace_span(
    source: str, first: ast.stmt | ast.expr, text: str, last: ast.stmt | ast.expr | None = None
) -> str:
    """``source`` with the text from the start of ``first`` to the end of ``last`` (or of ``first``) replaced."""
    start, end = _span(source, first, first if last is None else last)
    return source[:start] + text + source[end:]


def _span(source: str, first: ast.stmt | ast.expr, last: ast.stmt | ast.expr) -> tuple[int, int]:
    """Indices in ``source`` of the start of ``first`` and the end of ``last``."""
    # ast.parse sets every end position; typeshed allows None for nodes built by hand.
    assert last.end_lineno is not None and last.end_col_offset is not None
    lines = source.splitlines(keepends=True)
    return (
        _offset(lines, first.lineno, first.col_offset),
        _offset(lines, last.end_lineno, last.end_col_offset),
    )


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Index in the text of (1-based line, UTF-8 byte column), as the ``ast`` module reports positions."""
    before = sum(len(line) for line in lines[: lineno - 1])
    return before + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8"))


def all_mutants() -> list[Mutant]:
    """Every mutant, then every control, then every hidden-only bug of every part, in a stable order;
    names are unique, and each list holds its own kind."""
    out: list[Mutant] = []
    controls: list[Mutant] = []
    hidden_only: list[Mutant] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        out.extend(getattr(module, "MUTANTS", []))
        controls.extend(getattr(module, "CONTROLS", []))
        hidden_only.extend(getattr(module, "HIDDEN_ONLY", []))
    for kind, entries, cls in (
        ("MUTANTS", out, Mutant),
        ("CONTROLS", controls, Control),
        ("HIDDEN_ONLY", hidden_only, HiddenOnly),
    ):
        wrong = [m.name for m in entries if type(m) is not cls]
        if wrong:
            raise ValueError(f"{kind} must hold {cls.__name__} entries only, not {wrong}")
    out += controls + hidden_only
    names = [m.name for m in out]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate mutant names: {sorted(dupes)}")
    return out
