"""Contracts a student can read: what the tests demand must be written in the docstrings.

Two checks, each run by ``tests/staff/test_contracts.py``:

**Error wording.** A test that matches an error message (``pytest.raises(ValueError, match=...)``)
demands wording; the student only sees the docstring. ``raises_probe.py`` runs every public and
hidden test that uses ``pytest.raises`` against the reference and records, for each raised
exception, the test's pattern, the exception's type and the *target*: the outermost frame of the
traceback inside ``cs336_assignment/``, i.e. the function the test called through an adapter
(for ``Adam(params, lr=-1)`` it is ``Adam.__init__``). ``check_record`` then requires:

- the target's docstring (for a method: the method's and its class's) has a Google-style
  ``Raises:`` section with an entry for the exception's type (or a base class of it);
- the *wording* of the pattern appears in one such entry, verbatim (``required_words``): each
  literal run of the regex, cut at its numbers and trimmed of punctuation (``non-negative``,
  ``inf or NaN``, ``num_heads=``, ``2-D``), case-sensitive unless the pattern says ``(?i)``; for
  an alternation (``dataset|1-D|dimension``) one branch is enough. Numbers are values, not
  wording, and so is a phrase that is a token of the repr of an argument value of the call
  (``nan`` for ``lr=float("nan")``): the entry says in prose which values the message names.

An exception raised by the test's own code (a simulated crash inside a model the test built)
demands nothing of the wording and is not checked. What this does not check: that the values a
message must name are stated (prose, for a reviewer), and tests that catch errors without
``pytest.raises`` (``error_raised_by`` in ``tests/test_data.py`` checks torch's own errors).

**Graded or optional.** Every function with a solution region is either *graded* (reachable
from ``adapters.py`` through code students are given, so the tests can call it whatever the
student writes elsewhere) or says in its docstring that it is optional and not graded
(``OPTIONAL``). ``graded_names`` asks the rules screen's reach analysis (``tests/rules.py``,
the one that decides which adapters reach a forbidden API) over the code the handout ships
(regions stubbed): from each adapter, what a caller can run. A class that is reached brings its
public and dunder methods (what callers and torch call), a method what it uses on ``self``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

try:  # Python 3.11+: the regex parser, to find a pattern's literal text exactly
    import re._constants as sre_constants  # type: ignore[import-not-found]
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from docstring_parser import ParseError
from docstring_parser.google import GoogleParser

from cs336_staff.markers import (
    OPTIONAL,
    find_regions,
    handout_text,
    is_staff_only,
    strip_staff_only,
)
from tests.rules import ENTRY_MODULE, PACKAGE, Program, module_name, read_tree

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------
# Raises sections
# ------------------------------------------------------------------------------------------------


def raises_entries(doc: str) -> list[tuple[str, str]]:
    """``(exception name, entry text)`` of every entry of every ``Raises:`` section of ``doc``.

    Google style, read by ``docstring_parser``: an entry starts with ``Name:`` (or ``A, B:``, one
    entry per name) one level below ``Raises:``; deeper lines continue it (joined with single
    spaces here). A docstring it cannot read is an error naming the fix.
    """
    try:
        # the parser dedents the lines after the first by their common indent: a leading blank line
        # keeps a text that opens with ``Raises:`` (no summary) from losing its entries' indentation
        parsed = GoogleParser().parse("\n" + doc)
    except ParseError as e:
        raise ValueError(
            f"this docstring's sections are not Google style ({e}); fix its indentation:\n{doc}"
        ) from None
    return [
        (name, " ".join((entry.description or "").split()))
        for entry in parsed.raises
        for name in re.split(r"\s*,\s*", (entry.type_name or "").strip())
        if name
    ]


def _literal_runs(items, flags: int) -> list:
    """A requirement tree from a parsed regex: a list of strings (literal runs, all needed) and
    ``("any", [branch, ...])`` alternations (one branch needed)."""
    out: list = []
    run: list[str] = []

    def flush() -> None:
        if run:
            out.append("".join(run))
            run.clear()

    for op, arg in items:
        if op is sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        flush()
        if op is sre_constants.SUBPATTERN:
            out.extend(_literal_runs(arg[-1], flags))
        elif op is sre_constants.BRANCH:
            out.append(("any", [_literal_runs(b, flags) for b in arg[1]]))
        elif op in (
            sre_constants.MAX_REPEAT,
            sre_constants.MIN_REPEAT,
            getattr(sre_constants, "POSSESSIVE_REPEAT", None),
        ):
            low, _, sub = arg
            if low >= 1:  # x+ still demands one x
                out.extend(_literal_runs(sub, flags))
        elif op in (sre_constants.ASSERT,):
            out.extend(_literal_runs(arg[1], flags))
        # IN (character classes), ANY, AT, ASSERT_NOT, GROUPREF: no literal text demanded
    flush()
    return out


_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.]|-[A-Za-z])")
_EDGE = " \t\n,;:()[]{}'\"."


def _pieces(run: str) -> list[str]:
    """The wording of one literal run: the text between its numbers, trimmed of punctuation."""
    return [p.strip(_EDGE) for p in _NUMBER.split(run) if re.search("[A-Za-z]", p)]


def required_words(pattern: str) -> tuple[list, bool]:
    """The wording a message matching ``pattern`` must contain, and whether case is ignored.

    ``(tree, ignorecase)``: ``tree`` lists phrases (each literal run of the regex, cut at its
    numbers, trimmed of punctuation: ``index 3 .*size 3`` needs "index" and "size",
    ``inf or NaN`` needs "inf or NaN") and ``("any", [subtree, ...])`` nodes for alternations."""
    parsed = sre_parse.parse(pattern)
    ignorecase = bool(parsed.state.flags & re.IGNORECASE)

    def words(tree: list) -> list:
        out: list = []
        for node in tree:
            if isinstance(node, tuple):
                out.append(("any", [words(b) for b in node[1]]))
            else:
                out.extend(_pieces(node))
        return out

    return words(_literal_runs(list(parsed), parsed.state.flags)), ignorecase


def _contains(piece: str, text: str, ignorecase: bool) -> bool:
    """``piece`` occurs in ``text``, whitespace runs counting as one space."""
    norm = lambda t: " ".join(t.split())  # noqa: E731
    a, b = norm(piece), norm(text)
    return (a.lower() in b.lower()) if ignorecase else (a in b)


def _is_value(piece: str, values: str, ignorecase: bool) -> bool:
    """``piece`` is (a whole token of) the repr of an argument: an offending value, not wording."""
    flags = re.IGNORECASE if ignorecase else 0
    return re.search(rf"(?<![\w]){re.escape(piece)}(?![\w])", values, flags) is not None


def missing_words(tree: list, text: str, values: str, ignorecase: bool) -> list[str]:
    """Phrases of ``tree`` found neither in ``text`` (the docstring entry) nor among ``values``
    (the reprs of the call's arguments); for an alternation, the shortest list among its branches."""
    missing: list[str] = []
    for node in tree:
        if isinstance(node, tuple):
            options = [missing_words(b, text, values, ignorecase) for b in node[1]]
            missing.extend(min(options, key=len) if options else [])  # type: ignore[arg-type]
        elif not _is_value(node, values, ignorecase) and not _contains(node, text, ignorecase):
            missing.append(node)
    return missing


@dataclass
class RaisesRecord:
    """One exception a test caught with ``pytest.raises``, as ``raises_probe`` records it."""

    test: str
    pattern: str | None
    exception: list[str]  # the raised type's MRO names, most derived first
    message: str
    target: str | None  # "module:qualname" of the outermost frame in cs336_assignment/, or None
    raised_in: str  # "package", "tests" or "library": where the innermost frame is
    values: str = ""  # repr of the target call's arguments


@dataclass
class Finding:
    test: str
    target: str
    problem: str
    details: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.test}: {self.target}: {self.problem}"


def check_record(record: RaisesRecord, docstrings: str) -> str | None:
    """None if ``docstrings`` (the target's, and its class's) state what the test demands; else why not."""
    entries = [
        (name, text) for name, text in raises_entries(docstrings) if name in record.exception
    ]
    if not entries:
        have = sorted({name for name, _ in raises_entries(docstrings)}) or "no Raises: section"
        return (
            f"raises {record.exception[0]} ({record.message[:120]!r}) but its docstring's Raises: section has no "
            f"{record.exception[0]} entry (it has: {have})"
        )
    if record.pattern is None:
        return None
    tree, ignorecase = required_words(record.pattern)
    best = min(
        (missing_words(tree, text, record.values, ignorecase) for _, text in entries), key=len
    )
    if best:
        return (
            f"the test matches {record.pattern!r}, but no {record.exception[0]} entry of its Raises: section "
            f"says {', '.join(repr(w) for w in best)}; state the wording there (message: {record.message[:160]!r})"
        )
    return None


# ------------------------------------------------------------------------------------------------
# Graded or optional
# ------------------------------------------------------------------------------------------------


@dataclass
class Definition:
    module: str  # "cs336_assignment.tensors.strides"
    qualname: str  # "Adam.step"
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    has_region: bool


def _defs(
    body: list[ast.stmt], prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]]:
    """``(qualname, node)`` of every function, method and class in ``body``, nested ones included."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield prefix + node.name, node
            yield from _defs(node.body, f"{prefix}{node.name}.")


def given_code(repo: Path = REPO) -> dict[str, str]:
    """adapters.py and the package as the handout ships them (``markers.handout_text``): a
    ``# STAFF-ONLY`` file (``fast_bpe.py``, whose ``FastTokenizer`` overrides the reference's
    helpers) and ``# BEGIN STAFF-ONLY`` blocks left out, every solution region stubbed."""
    out = {}
    for rel, text in read_tree(repo).items():
        given, _ = handout_text(text, rel, stub=rel.startswith(PACKAGE + "/"))
        if given is not None:
            out[rel] = given
    return out


def definitions(repo: Path = REPO) -> list[Definition]:
    """Every function, method and class of the package that the handout ships, and whether its own
    body holds a solution region."""
    defs: list[Definition] = []
    for rel, text in read_tree(repo).items():
        if not rel.startswith(PACKAGE + "/") or is_staff_only(text):
            continue
        source = strip_staff_only(text, rel)
        spans = [(r.begin, r.end) for r in find_regions(source, rel)]

        def in_region(s: ast.stmt, spans=spans) -> bool:
            return any(begin < s.lineno and s.end_lineno < end for begin, end in spans)

        for qualname, node in _defs(ast.parse(source).body):
            has = not isinstance(node, ast.ClassDef) and any(in_region(s) for s in node.body)
            defs.append(Definition(module_name(rel), qualname, node, has))
    return defs


def graded_names(repo: Path = REPO) -> set[str]:
    """``module:qualname`` of every definition reachable from adapters.py through given code.

    The reach is the rules screen's (``tests/rules.py``'s ``Program``), over the handout's code,
    asked what a caller can run (``members``): a class reached brings its public and dunder methods
    (what callers and torch call), a method what it calls on ``self``; a function nested in a
    reached one is reached with it."""
    files = given_code(repo)
    program = Program(files)
    reached: set[str] = set()
    for adapter in program.entry_points():
        reached.update(program.reach(f"{ENTRY_MODULE}.{adapter}", members=True)[0])
    out = set()
    for rel, text in files.items():
        if rel.startswith(PACKAGE + "/"):
            module = module_name(rel)
            for qualname, _ in _defs(ast.parse(text).body):
                names = qualname.split(".")
                owner = next(
                    (
                        k
                        for i in range(len(names), 0, -1)
                        if (k := ".".join([module, *names[:i]])) in program.nodes
                    ),
                    None,
                )
                if owner in reached:
                    out.add(f"{module}:{qualname}")
    return out


def ungraded_regions(repo: Path = REPO) -> list[tuple[Definition, bool]]:
    """Every function with a solution region that no test can reach, and whether it says it is optional."""
    graded = graded_names(repo)
    out = []
    for d in definitions(repo):
        if d.has_region and f"{d.module}:{d.qualname}" not in graded:
            doc = ast.get_docstring(d.node) or ""
            out.append((d, OPTIONAL in " ".join(doc.split())))
    return out
