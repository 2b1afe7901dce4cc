"""Each argument check's wording is written once, in ``cs336_assignment/validation.py``.

A part that re-implements a shared check drifts from its wording (and from the tests that match
it); this finds the copy by its message and says which check to call instead.
"""

from __future__ import annotations

import ast
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
    "must be >= 0, got": "check_nonnegative",
    "must be in [0, 1), got": "check_unit_interval",
}


def _raised_messages(path: Path) -> list[tuple[int, str]]:
    """(line, literal text) of every f-string or string passed to a ``raise ValueError(...)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            text = "".join(
                part.value for part in ast.walk(node.exc.args[0])
                if isinstance(part, ast.Constant) and isinstance(part.value, str)
            )
            found.append((node.lineno, text))
    return found


def test_shared_check_wordings_are_raised_only_by_validation():
    """No module outside validation.py raises a message that one of its checks words."""
    copies = [
        f"{path.relative_to(PACKAGE.parent)}:{line} raises {fragment!r}: call validation.{check}(...) instead"
        for path in sorted(PACKAGE.rglob("*.py")) if path.name != "validation.py"
        for line, text in _raised_messages(path)
        for fragment, check in SHARED.items() if fragment in text
    ]
    assert not copies, "\n".join(copies)


@pytest.mark.parametrize(("fragment", "check"), sorted(SHARED.items()))
def test_each_shared_wording_belongs_to_a_check(fragment: str, check: str):
    """The table above names real checks, each of which words its message as listed."""
    function = getattr(validation, check)
    bad = ("x", float("nan")) if check == "check_unit_interval" else ()
    with pytest.raises(ValueError, match="^x " + re.escape(fragment)):
        function(*bad) if bad else function(x=-1.5)
