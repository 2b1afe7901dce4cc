"""The ``>>>`` examples in the reference's docstrings run and print what they claim.

Staff-only: in the handout the examples call stubs, so they are documentation, not tests.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import cs336_assignment

pytestmark = pytest.mark.staff

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(cs336_assignment.__path__, prefix="cs336_assignment.")
    if not info.name.startswith("cs336_assignment.commands")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    """Every ``>>>`` example in the module's docstrings gives the output written under it."""
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed; run `python -m doctest -v {module.__file__}`"
    )
