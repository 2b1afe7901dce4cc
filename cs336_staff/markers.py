"""Solution markers: find the ``# BEGIN SOLUTION`` / ``# END SOLUTION`` regions and stub them out.

A region is the part of a function body that students write::

    def get_batch(dataset, batch_size, context_length, device, generator=None):
        \"\"\"Docstring that states the contract.\"\"\"
        # BEGIN SOLUTION
        starts = torch.randint(...)
        return x, y
        # END SOLUTION

``strip_source`` replaces every region (markers included) by one line at the region's indentation,

        raise NotImplementedError("Implement get_batch in cs336_assignment/data.py")

and keeps every other byte. A marker is only a marker when it is a comment token (``tokenize``),
so text in strings and docstrings never counts. The rules, each a ``MarkerError`` naming file
and line when broken:

- a marker is a comment alone on its line, spelled exactly ``# BEGIN SOLUTION`` / ``# END SOLUTION``;
- BEGIN and END alternate: no END without BEGIN, no BEGIN left open, no region inside a region;
- the region sits in a function body, at the body's indentation: its statements are consecutive
  statements of that body (not at module or class level, not inside an ``if``/``for`` block), and
  no statement starts before a marker and ends after it;
- the region holds at least one statement, and not the docstring (the contract stays visible);
- code after the region does not use a name only the region defines (after stripping it would
  be an undefined name);
- nothing follows a function's last region in its body: in the handout that code would sit after
  the stub's ``raise``, unreachable, reading as solution left behind (a half-stub). Code students
  are given goes before the region; code they write goes inside it. Code between two regions of
  one function (parts 1 and 2) is fine: it runs once part 1 is written.

Staff-only text uses two more comment conventions (see ``strip_staff_only``): a file whose first
lines hold a ``# STAFF-ONLY`` comment is left out of the handout, and lines between
``# BEGIN STAFF-ONLY`` and ``# END STAFF-ONLY`` are dropped without a stub.

Deliberately left out: markers in languages other than Python, regions at module level (a
student-written constant belongs in a function), and partial-line regions.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
STAFF_ONLY = "# STAFF-ONLY"
BEGIN_STAFF = "# BEGIN STAFF-ONLY"
END_STAFF = "# END STAFF-ONLY"
#: The phrase a docstring carries when its function has a solution region but no test reaches it
#: (``cs336_staff/audit/contracts.py`` checks it; ``parts.py`` lists those functions as optional).
OPTIONAL = "Optional helper, not graded"
_MARKER_LIKE = re.compile(r"#\s*(BEGIN|END)[\s_-]*SOLUTION", re.IGNORECASE)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Function = ast.FunctionDef | ast.AsyncFunctionDef


class MarkerError(ValueError):
    """A marker that is malformed, unmatched, nested or misplaced; says where and what to do."""

    def __init__(self, path: str, line: int, problem: str):
        self.path, self.line, self.problem = path, line, problem
        super().__init__(f"{path}:{line}: {problem}")


@dataclass
class Region:
    """One solution region: marker lines (1-based), indentation, enclosing function, statements."""

    begin: int
    end: int
    indent: str
    qualname: str
    statements: list[ast.stmt] = field(default_factory=list, repr=False)
    part: int = 1  # 1-based index among the regions of the same function
    parts: int = 1  # how many regions that function has

    def message(self, path: str) -> str:
        """What the stub tells the student: what to implement, and where."""
        which = f" (part {self.part} of {self.parts})" if self.parts > 1 else ""
        return f"Implement {self.qualname}{which} in {path}"

    def stub(self, path: str) -> str:
        """The line that replaces the region."""
        return f"{self.indent}raise NotImplementedError({json.dumps(self.message(path))})\n"


def _marker_comments(source: str, path: str) -> list[tuple[int, int, str]]:
    """Every marker-like comment as (line, column, kind in {"BEGIN", "END"}); validates spelling."""
    out = []
    lines = source.splitlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as e:
        line = getattr(e, "lineno", None) or (e.args[1][0] if len(e.args) > 1 else 1)
        raise MarkerError(
            path, line, f"cannot tokenize the file ({e.args[0]}); fix the syntax first"
        ) from e
    for tok in tokens:
        if tok.type != tokenize.COMMENT or not _MARKER_LIKE.match(tok.string):
            continue
        line, col = tok.start
        text = tok.string.rstrip()
        kind = "BEGIN" if "BEGIN" in text.upper() else "END"
        if lines[line - 1].strip() != tok.string.strip():
            raise MarkerError(
                path,
                line,
                f"marker {text!r} shares its line with code; put it on a line of its own",
            )
        if text not in (BEGIN, END):
            want = BEGIN if kind == "BEGIN" else END
            raise MarkerError(path, line, f"malformed marker {text!r}; write exactly {want!r}")
        out.append((line, col, kind))
    return out


def has_markers(source: str, path: str = "<string>") -> bool:
    """Whether ``source`` holds any solution-marker comment (spelling validated)."""
    return bool(_marker_comments(source, path))


def _pair(markers: list[tuple[int, int, str]], path: str) -> list[tuple[int, int, int]]:
    """(begin line, end line, column) of each region; rejects unmatched and nested markers."""
    regions, open_ = [], None
    for line, col, kind in markers:
        if kind == "BEGIN":
            if open_ is not None:
                raise MarkerError(
                    path,
                    line,
                    f"nested {BEGIN!r}: the region opened at line {open_[0]} is not closed; "
                    f"add {END!r} before this line (regions never nest)",
                )
            open_ = (line, col)
        else:
            if open_ is None:
                raise MarkerError(path, line, f"unmatched {END!r}: no {BEGIN!r} above it")
            if col != open_[1]:
                raise MarkerError(
                    path,
                    line,
                    f"{END!r} at column {col} but its {BEGIN!r} (line {open_[0]}) is at column "
                    f"{open_[1]}; indent both markers like the function body",
                )
            regions.append((open_[0], line, col))
            open_ = None
    if open_ is not None:
        raise MarkerError(path, open_[0], f"unmatched {BEGIN!r}: add {END!r} after the region")
    return regions


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _end(node: ast.stmt) -> int:
    """``node.end_lineno``: ast.parse always sets it (typeshed allows None for nodes built by hand)."""
    assert node.end_lineno is not None
    return node.end_lineno


def _stmt_parent(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST:
    """The nearest enclosing statement (or the module), skipping except handlers and match cases."""
    node = parents[node]
    while not isinstance(node, (ast.stmt, ast.Module)):
        node = parents[node]
    return node


def _qualname(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    names = []
    while node in parents:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.append(node.name)
        node = parents[node]
    return ".".join(reversed(names))


def _bound_names(nodes: Sequence[ast.AST]) -> set[str]:
    """Names these statements bind (assignments, defs, imports, loop/with/except targets)."""
    out: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                out.add(sub.id)
            elif isinstance(sub, (*_FUNCTIONS, ast.ClassDef)):
                out.add(sub.name)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in sub.names)
            elif isinstance(sub, ast.ExceptHandler) and sub.name:
                out.add(sub.name)
            elif isinstance(sub, ast.arg):
                out.add(sub.arg)
    return out


def _loaded_names(nodes: Sequence[ast.AST]) -> list[ast.Name]:
    return [
        s
        for node in nodes
        for s in ast.walk(node)
        if isinstance(s, ast.Name) and isinstance(s.ctx, ast.Load)
    ]


def _check_names_after(
    regions: list[Region], owners: list[_Function], tree: ast.Module, path: str
) -> None:
    """Code left after a region must not use a name only that region defines (it would be undefined)."""
    stripped = {id(s) for r in regions for s in r.statements}
    module_names = _bound_names(
        [s for s in tree.body if not isinstance(s, (*_FUNCTIONS, ast.ClassDef))]
    )
    module_names |= {s.name for s in tree.body if isinstance(s, (*_FUNCTIONS, ast.ClassDef))}
    for r, owner in zip(regions, owners, strict=True):
        kept = [s for s in owner.body if id(s) not in stripped]
        region_only = (
            _bound_names(r.statements)
            - _bound_names(kept)
            - _bound_names([owner.args])
            - module_names
        )
        for name in _loaded_names([s for s in kept if s.lineno > r.end]):
            if name.id in region_only:
                raise MarkerError(
                    path,
                    name.lineno,
                    f"{name.id!r} is defined only inside the region ending at line {r.end}, "
                    "so the handout would use an undefined name; move this line into the region",
                )


def _check_nothing_after_last(regions: list[Region], owners: list[_Function], path: str) -> None:
    """No statement of a function body may follow its last region (it would follow the stub's raise)."""
    last: dict[int, tuple[Region, _Function]] = {}
    for r, owner in zip(regions, owners, strict=True):
        last[id(owner)] = (r, owner)
    for r, owner in last.values():
        after = [s for s in owner.body if s.lineno > r.end]
        if after:
            raise MarkerError(
                path,
                after[0].lineno,
                f"code after the last region of {r.qualname} (which ends at line {r.end}) "
                "would follow the stub's `raise NotImplementedError` in the handout, unreachable, and read as "
                "solution left behind; move it into the region (students write it) or above it (given)",
            )


def find_regions(source: str, path: str = "<string>") -> list[Region]:
    """Every solution region of ``source``, validated (see the module docstring for the rules)."""
    pairs = _pair(_marker_comments(source, path), path)
    if not pairs:
        return []
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise MarkerError(
            path, e.lineno or 1, f"syntax error ({e.msg}); fix it before releasing"
        ) from e
    parents = _parents(tree)
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    regions: list[Region] = []
    owners: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for begin, end, col in pairs:
        inside = [s for s in statements if begin < s.lineno and _end(s) < end]
        inside_ids = {id(s) for s in inside}
        top = [s for s in inside if id(_stmt_parent(s, parents)) not in inside_ids]
        if not top:
            raise MarkerError(
                path,
                begin,
                "empty region: no statement between the markers; delete the markers or put the solution between them",
            )
        containers = [s for s in statements if s.lineno < begin < _end(s)]
        owner = max(containers, key=lambda s: (s.lineno, -_end(s)), default=tree)
        if not isinstance(owner, _FUNCTIONS):
            where = {ast.Module: "at module level", ast.ClassDef: "at class level"}.get(
                type(owner),
                f"inside a block (the {type(owner).__name__.lower()} at line {getattr(owner, 'lineno', '?')})",
            )
            raise MarkerError(
                path,
                begin,
                f"misplaced region {where}; markers must sit directly in a function body, "
                "at the body's indentation, around consecutive statements of that body",
            )
        for s in top:
            if _stmt_parent(s, parents) is not owner:
                raise MarkerError(
                    path,
                    end,
                    f"the region of {owner.name} (from line {begin}) runs out of its body: the statement "
                    f"at line {s.lineno} is not in it; a region must hold whole statements of one function body",
                )
        for s in statements:
            if begin < s.lineno < end < _end(s) or (begin < s.lineno and _end(s) == end):
                raise MarkerError(
                    path,
                    end,
                    f"{END!r} cuts through the statement at line {s.lineno}; "
                    "a region must hold whole statements of one function body",
                )
        if top[0].col_offset != col:
            raise MarkerError(
                path,
                begin,
                f"markers at column {col} but the body's statements start at column "
                f"{top[0].col_offset}; indent the markers like the function body",
            )
        if ast.get_docstring(owner, clean=False) is not None and owner.body[0] in top:
            raise MarkerError(
                path,
                begin,
                f"region of {owner.name} holds its docstring, which would leave the function "
                f"without its contract; put {BEGIN!r} after the docstring",
            )
        regions.append(Region(begin, end, " " * col, _qualname(owner, parents), top))
        owners.append(owner)
    _check_names_after(regions, owners, tree, path)
    _check_nothing_after_last(regions, owners, path)
    by_function: dict[str, list[Region]] = {}
    for r in regions:
        by_function.setdefault(r.qualname, []).append(r)
    for rs in by_function.values():
        for i, r in enumerate(rs, 1):
            r.part, r.parts = i, len(rs)
    return regions


def strip_source(source: str, path: str = "<string>") -> tuple[str, list[Region]]:
    """``source`` with every region replaced by its ``raise NotImplementedError(...)`` stub."""
    regions = find_regions(source, path)
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    last = 0
    for r in regions:
        out.extend(lines[last : r.begin - 1])
        out.append(r.stub(path))
        last = r.end
    out.extend(lines[last:])
    return "".join(out), regions


def handout_text(
    text: str, path: str, *, staff_blocks: bool = True, stub: bool = False
) -> tuple[str | None, list[Region]]:
    """What the handout ships for the source file ``path`` (``release/build.py`` writes it; the
    grader's rules check compares a submission's given code with it): None for a staff-only file;
    otherwise ``text`` without its staff-only blocks (``staff_blocks``: .py, .sh, .gitignore) and,
    with ``stub`` (the package's .py files), with its solution regions stubbed, and those regions.
    (The release then drops the imports stubbing left unused, with ruff: whole lines, never given code.)"""
    if is_staff_only(text):
        return None, []
    if staff_blocks:
        text = strip_staff_only(text, path)
    return strip_source(text, path) if stub else (text, [])


def is_staff_only(text: str, first_lines: int = 3) -> bool:
    """Whether a file is marked staff-only: one of its first lines is a ``# STAFF-ONLY`` comment."""
    return any(line.strip().startswith(STAFF_ONLY) for line in text.splitlines()[:first_lines])


def strip_staff_only(text: str, path: str = "<string>") -> str:
    """``text`` without the lines between ``# BEGIN STAFF-ONLY`` and ``# END STAFF-ONLY`` (inclusive)."""
    out, open_ = [], None
    for i, line in enumerate(text.splitlines(keepends=True), 1):
        s = line.strip()
        if s.startswith(BEGIN_STAFF):
            if open_ is not None:
                raise MarkerError(
                    path,
                    i,
                    f"nested {BEGIN_STAFF!r}: the block opened at line {open_} is not closed",
                )
            open_ = i
        elif s.startswith(END_STAFF):
            if open_ is None:
                raise MarkerError(path, i, f"unmatched {END_STAFF!r}: no {BEGIN_STAFF!r} above it")
            open_ = None
        elif open_ is None:
            out.append(line)
    if open_ is not None:
        raise MarkerError(
            path, open_, f"unmatched {BEGIN_STAFF!r}: add {END_STAFF!r} after the block"
        )
    return "".join(out)
