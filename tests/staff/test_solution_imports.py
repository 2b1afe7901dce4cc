"""The reference's solution regions import nothing staff-only: they are the model answer students read.

A solution region (``# BEGIN SOLUTION`` ... ``# END SOLUTION``) is what a student would write, so it
may use the standard library, the handout's dependencies and the handout's own modules, but not
``cs336_staff`` nor a file of ``cs336_assignment/`` marked ``# STAFF-ONLY`` (left out of the
handout, e.g. ``tokenization/fast_bpe.py``, the staff's numpy fast path). ``cs336 release --check``
cannot see this: it drops the staff-only files back in beside the reference. Imports count whether
written ``import``, ``from ... import`` (relative ones resolved) or as a module name in a string
(``importlib.import_module("...")``).
"""

from __future__ import annotations

import ast
import textwrap

import pytest

from cs336_staff.markers import find_regions, is_staff_only
from tests.util import ROOT

pytestmark = pytest.mark.staff

PACKAGE = "cs336_assignment"


def module_name(rel: str) -> str:
    """``cs336_assignment/tokenization/fast_bpe.py`` -> ``cs336_assignment.tokenization.fast_bpe``."""
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def staff_only_modules() -> set[str]:
    """``cs336_staff`` and every module of the package whose file is marked ``# STAFF-ONLY``."""
    found = {"cs336_staff"}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        if is_staff_only(path.read_text(encoding="utf-8")):
            found.add(module_name(path.relative_to(ROOT).as_posix()))
    return found


def imported_modules(nodes: list[ast.stmt], rel: str) -> list[tuple[int, str]]:
    """(line, module) of every import in ``nodes`` (relative imports resolved against ``rel``), and
    of every string constant that looks like a dotted module name (``importlib.import_module``)."""
    package = module_name(rel).split(".")
    if not rel.endswith("__init__.py"):
        package = package[:-1]
    out = []
    for node in (n for stmt in nodes for n in ast.walk(stmt)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            if all(part.isidentifier() for part in node.value.split(".")):
                out.append((node.lineno, node.value))
    return out


def staff_imports_in_regions(source: str, rel: str, staff: set[str]) -> list[str]:
    """``file:line: region of Q imports M`` for each staff-only module imported inside a solution region."""
    found = []
    for region in find_regions(source, rel):
        for line, module in imported_modules(region.statements, rel):
            if any(module == s or module.startswith(s + ".") for s in staff):
                found.append(
                    f"{rel}:{line}: the solution region of {region.qualname} imports {module}"
                )
    return found


def test_fast_bpe_is_staff_only() -> None:
    """The numpy fast path is a STAFF-ONLY file (so it is left out of the handout and counts here)."""
    assert f"{PACKAGE}.tokenization.fast_bpe" in staff_only_modules()


def test_no_solution_region_imports_staff_only_code() -> None:
    """Every region of every module of the package imports neither cs336_staff nor a STAFF-ONLY module."""
    staff = staff_only_modules()
    found = []
    regions = 0
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if is_staff_only(source):
            continue
        rel = path.relative_to(ROOT).as_posix()
        regions += len(find_regions(source, rel))
        found += staff_imports_in_regions(source, rel, staff)
    assert regions > 20, "expected the reference's solution regions; did the package move?"
    assert not found, (
        "solution regions must read as a student's answer, without staff-only code:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize(
    "body",
    [
        "from .fast_bpe import BatchBPE",
        "from . import fast_bpe",
        "import cs336_assignment.tokenization.fast_bpe as fast",
        "from cs336_staff.markers import find_regions",
        "from ..tokenization.fast_bpe import fill_cache",
        'importlib.import_module("cs336_assignment.tokenization.fast_bpe")',
    ],
)
def test_the_check_finds_a_planted_staff_import(body: str) -> None:
    """Each way of importing the fast path (or cs336_staff) inside a region is reported, with its line."""
    source = textwrap.dedent(
        f'''
        def encode(text):
            """Doc."""
            # BEGIN SOLUTION
            {body}
            return text
            # END SOLUTION
        '''
    )
    found = staff_imports_in_regions(
        source, f"{PACKAGE}/tokenization/tokenizer.py", staff_only_modules()
    )
    assert found and found[0].startswith(
        f"{PACKAGE}/tokenization/tokenizer.py:5: the solution region of encode imports"
    )


def test_the_check_allows_ordinary_imports_and_staff_imports_outside_regions() -> None:
    """Imports of the handout's own modules, and a staff import outside any region, are not reported."""
    source = textwrap.dedent(
        '''
        from .fast_bpe import BatchBPE


        def encode(text):
            """Doc."""
            # BEGIN SOLUTION
            from .pretokenize import GPT2_REGEX
            import numpy as np
            return "fast_bpe", GPT2_REGEX, np
            # END SOLUTION
        '''
    )
    assert (
        staff_imports_in_regions(
            source, f"{PACKAGE}/tokenization/tokenizer.py", staff_only_modules()
        )
        == []
    )
