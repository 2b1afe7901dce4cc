"""Each argument check's wording is written once, in ``cs336_assignment/validation.py``, and the
messages the docstrings quote are the messages the code raises.

A part that re-implements a shared check drifts from its wording (and from the tests that match
it); this finds the copy by its message and says which check to call instead. The handout README
promises that a docstring's quoted message is raised word for word, by validation.py's checks for
the shared ones: the last two tests read every quote and find the message that produces it.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import cs336_assignment
from cs336_assignment import validation

pytestmark = pytest.mark.staff

PACKAGE = Path(cs336_assignment.__file__).parent
SHARED = {
    "must be a non-negative integer, got": "check_count",
    "must be a positive integer, got": "check_positive_int",
    "must be a positive number, got": "check_positive",
    "must be a non-negative number, got": "check_nonnegative_number",
    "must be >= 0, got": "check_nonnegative",
    "must be in [0, 1), got": "check_unit_interval",
}


def _raised_messages(path: Path) -> list[tuple[int, str]]:
    """(line, literal text) of every f-string or string passed to a ``raise ValueError(...)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            text = "".join(
                part.value
                for part in ast.walk(node.exc.args[0])
                if isinstance(part, ast.Constant) and isinstance(part.value, str)
            )
            found.append((node.lineno, text))
    return found


def test_shared_check_wordings_are_raised_only_by_validation():
    """No module outside validation.py raises a message that one of its checks words."""
    copies = [
        f"{path.relative_to(PACKAGE.parent)}:{line} raises {fragment!r}: call validation.{check}(...) instead"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "validation.py"
        for line, text in _raised_messages(path)
        for fragment, check in SHARED.items()
        if fragment in text
    ]
    assert not copies, "\n".join(copies)


@pytest.mark.parametrize(("fragment", "check"), sorted(SHARED.items()))
def test_each_shared_wording_belongs_to_a_check(fragment: str, check: str):
    """The table above names real checks, each of which words its message as listed."""
    function = getattr(validation, check)
    bad = ("x", float("nan")) if check == "check_unit_interval" else ()
    with pytest.raises(ValueError, match="^x " + re.escape(fragment)):
        function(*bad) if bad else function(x=-1.5)


# ------------------------------------------------------------------------------------------------
# The messages the docstrings quote are the messages the code raises
# ------------------------------------------------------------------------------------------------

HOLE = object()  # a {value} in a raised f-string: it stands for any text
ELISION = "..."  # in a quoted message: the quote leaves text out there
#: "NAME must be WHAT, got VALUE": the shape of a shared check's message (validation.py words those).
SHARED_SHAPE = re.compile(r"^[A-Za-z_][\w\[\]]* must be .+, got [^=]+$")
#: Ranges that one function alone has, so no shared check words them (the function raises them itself).
OWN_RANGES = ("mfu must be in (0, 1] (a fraction of peak", "seed must be an integer in [0, 2**32)")


def _template(node: ast.expr) -> list | None:
    """A raised message as literal characters and HOLEs (None: not built from strings)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return list(node.value)
    if isinstance(node, ast.JoinedStr):
        out: list = []
        for v in node.values:  # literal parts (Constant) and {}-holes (FormattedValue)
            out += list(str(v.value)) if isinstance(v, ast.Constant) else [HOLE]
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    return None


def _templates() -> list[list]:
    """Every message the package raises, and each shared check's ("NAME must be WHAT, got VALUE")."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        generic = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef) and f.name == "_check"
            for n in ast.walk(f)
        }  # validation's "{name} must be {what}, got {value}": its callers word it
        for node in ast.walk(tree):
            if id(node) in generic:
                continue
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                t = _template(node.exc.args[0])
                if t is not None:
                    out.append(t)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "_check"
                and len(node.args) == 3
                and isinstance(node.args[2], ast.Constant)
            ):
                out.append([HOLE, *f" must be {node.args[2].value!s}, got ", HOLE])
    return out


def _covers(template: list, quote: str) -> bool:
    """Whether ``quote`` (its "..." leaving text out) is a stretch of a message ``template`` raises,
    with at least a quarter of its characters matched by the template's own words (a value, a HOLE,
    cannot stand for the message itself). Whitespace is ignored: a docstring wraps its quotes."""
    template = [t for t in template if t is HOLE or not t.isspace()]
    tokens: list = [
        t
        for part in re.split(r"(\.\.\.)", quote)
        for t in ([ELISION] if part == ELISION else list(part))
        if t is ELISION or not t.isspace()
    ]
    literal = sum(t is not ELISION for t in tokens)
    impossible = -(10**9)

    @functools.cache
    def best(
        i: int, j: int
    ) -> int:  # most quote characters matched literally from here, or impossible
        if j == len(tokens):
            return 0
        if tokens[j] is ELISION:
            return max(best(i, j + 1), best(i + 1, j) if i < len(template) else impossible)
        if i == len(template):
            return impossible
        if template[i] is HOLE:
            return max(best(i + 1, j), best(i, j + 1))
        return 1 + best(i + 1, j + 1) if template[i] == tokens[j] else impossible

    return max(best(i, 0) for i in range(len(template) + 1)) * 4 >= literal


def quoted_messages() -> list[tuple[str, str]]:
    """(where, message) for each double-quoted message of three words or more in a Raises section."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                doc = ast.get_docstring(node) or ""
                if "Raises:" in doc:
                    text = " ".join(doc[doc.index("Raises:") :].split())
                    where = (
                        f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'name', '<module>')}"
                    )
                    out += [
                        (where, q) for q in re.findall(r'"([^"]+)"', text) if len(q.split()) >= 3
                    ]
    return out


def test_every_message_a_docstring_quotes_is_raised_word_for_word():
    """Each quoted message is a stretch of a message the reference raises ("..." may leave text out)."""
    templates = _templates()
    quotes = quoted_messages()
    assert len(quotes) > 50, (
        "the docstrings' Raises sections were not found; update quoted_messages()"
    )
    missing = [
        f"{where}: {q!r}" for where, q in quotes if not any(_covers(t, q) for t in templates)
    ]
    assert not missing, (
        "quoted in a docstring, raised nowhere (fix the quote or the message):\n"
        + "\n".join(missing)
    )


def test_quotes_shaped_like_a_shared_check_are_that_checks_wording():
    """A quote reading "NAME must be WHAT, got VALUE" is a validation.py check's message, as the handout README promises."""
    wordings = [
        t
        for t in _templates()
        if t[0] is HOLE and "".join(x for x in t if x is not HOLE).startswith(" must be ")
    ]
    assert len(wordings) >= 4, "validation.py's _check calls were not found; update _templates()"
    wrong = [
        f"{where}: {q!r}"
        for where, q in quoted_messages()
        if SHARED_SHAPE.match(q)
        and not q.startswith(OWN_RANGES)
        and not any(_covers(t, q) for t in wordings)
    ]
    assert not wrong, (
        "quoted like a shared check but worded otherwise; call the validation.py check whose wording "
        "fits (SHARED above) and quote its message:\n" + "\n".join(wrong)
    )
