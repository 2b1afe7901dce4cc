"""What the tests demand is written where students read: the docstrings (see cs336_staff/audit/contracts.py).

* Every exception a public or hidden test catches with ``pytest.raises`` has an entry in its
  target's ``Raises:`` section, and the wording the test matches is quoted there.
* Every function with a solution region is reachable from adapters.py through given code, or its
  docstring says it is optional and not graded.

The first check runs those tests against the reference in a child pytest with the
``raises_probe`` plugin (about 20 s); the unit tests below show it failing on planted gaps.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.audit.contracts import (
    OPTIONAL,
    RaisesRecord,
    check_record,
    graded_names,
    raises_entries,
    required_words,
    ungraded_regions,
)
from tests.util import ROOT

pytestmark = pytest.mark.staff


def raising_tests() -> list[str]:
    """Node ids (file::function) of every public and hidden test whose body calls pytest.raises."""
    out = []
    for path in sorted([*ROOT.glob("tests/test_*.py"), *ROOT.glob("tests/hidden/test_*.py")]):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                if any(isinstance(n, ast.Attribute) and n.attr == "raises" for n in ast.walk(node)):
                    out.append(f"{path.relative_to(ROOT).as_posix()}::{node.name}")
    return out


def docstrings_of(target: str) -> str:
    """The docstrings a student reads for ``module:qualname``: the function's, then its classes'."""
    module, qualname = target.split(":")
    obj, chain = importlib.import_module(module), []
    for name in qualname.split("."):
        obj = getattr(obj, name)
        chain.append(obj)
    return "\n\n".join(
        __import__("inspect").cleandoc(o.__doc__)
        for o in reversed(chain)
        if isinstance(getattr(o, "__doc__", None), str)
    )


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[RaisesRecord]:
    out = tmp_path_factory.mktemp("raises") / "raises.json"
    env = {**os.environ, "CS336_RAISES_OUT": str(out)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "cs336_staff.audit.raises_probe",
            "-p",
            "no:cacheprovider",
            *raising_tests(),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"the tests that use pytest.raises fail on the reference:\n{proc.stdout[-3000:]}"
    )
    return [RaisesRecord(**r) for r in json.loads(out.read_text())]


def test_every_error_a_test_matches_is_stated_in_the_raises_section(records) -> None:
    """For each exception a public or hidden test catches, the target's Raises: section has its type and quotes its wording."""
    assert len(records) > 100, (
        f"only {len(records)} caught exceptions recorded; is the probe loaded?"
    )
    problems = set()
    for r in records:
        # the test's own code raised it (a simulated crash): no wording demanded
        if r.raised_in == "tests":
            continue
        assert r.target, (
            f"{r.test}: {r.exception[0]} raised outside cs336_assignment/ ({r.message[:100]!r})"
        )
        problem = check_record(r, docstrings_of(r.target))
        if problem:
            problems.add(f"{r.target} ({r.test}): {problem}")
    assert not problems, "docstrings do not state what these tests demand:\n" + "\n".join(
        sorted(problems)
    )


# -- the checker itself, on planted gaps -------------------------------------------------------

DOC = """Do a thing.

Raises:
    ValueError: if a size is negative; the message names it: "m must be a
        non-negative integer, got -1".
    ValueError: if ``x`` holds inf or NaN.
    KeyError: never, really.

>>> 1
1
"""


def record(pattern: str | None, values: str = "", exc=("ValueError", "Exception")) -> RaisesRecord:
    return RaisesRecord("t::t", pattern, list(exc), "msg", "m:f", "package", values)


def problem(rec: RaisesRecord, doc: str) -> str:
    """What ``check_record`` reports of a record that ``doc`` does not cover."""
    found = check_record(rec, doc)
    assert found is not None, f"{rec.pattern!r} passed against {doc!r}"
    return found


def test_raises_entries_are_parsed_with_their_continuation_lines() -> None:
    """Entries start at `Name:` and absorb deeper lines; the section ends at the first line back at its level."""
    assert raises_entries(DOC) == [
        (
            "ValueError",
            'if a size is negative; the message names it: "m must be a non-negative integer, got -1".',
        ),
        ("ValueError", "if ``x`` holds inf or NaN."),
        ("KeyError", "never, really."),
    ]


def test_required_words_keep_wording_and_drop_values() -> None:
    """Literal runs cut at numbers; alternations are alternatives; escapes are literal."""
    assert required_words(r"index 3 .*size 3") == (["index", "size"], False)
    assert required_words(r"num_heads=5.*d_model=12") == (["num_heads=", "d_model="], False)
    assert required_words(r"\(1, 2\).*\(3, 1, 1\)") == ([], False)
    assert required_words(r"(?i)dataset|1-D|dimension") == (
        [("any", [["dataset"], ["1-D"], ["dimension"]])],
        True,
    )
    assert required_words(r"eps.*-1e-08") == (["eps"], False)


def test_the_checker_demands_the_tests_wording_not_a_synonym() -> None:
    """'non-negative' is stated; '>= 0' would not do; a missing word, type or section is reported."""
    assert check_record(record("non-negative"), DOC) is None
    assert check_record(record("inf or NaN"), DOC) is None
    assert "'must be >= 0'" in problem(record("must be >= 0"), DOC)
    assert "'nan or inf'" in problem(record("nan or inf"), DOC), (
        "a phrase must appear as the test writes it"
    )
    assert "no TypeError entry" in problem(record(None, exc=("TypeError", "Exception")), DOC)
    assert "no Raises: section" in problem(record("x"), "Just a docstring.")


def test_values_of_the_call_are_not_wording() -> None:
    """A phrase that is an argument's value (lr=nan) needs no docstring entry; a word that is not, does."""
    assert (
        check_record(
            record(r"lr.*nan", values="[tensor] | nan | 0.9"), DOC.replace("m must", "lr must")
        )
        is None
    )
    assert "'lr'" in problem(record(r"lr.*nan", values="[tensor] | nan"), DOC)


def test_alternations_need_one_branch() -> None:
    """For `dataset|1-D|dimension` one of the words in the entry is enough."""
    doc = "Raises:\n    ValueError: if the dataset is not 1-D.\n"
    assert check_record(record(r"(?i)dataset|1-D|dimension"), doc) is None
    assert "'shape'" in problem(record(r"shape|rank"), doc)


# -- graded or optional ------------------------------------------------------------------------


def test_every_solution_function_is_graded_or_says_it_is_optional() -> None:
    """A function students write is reachable from adapters.py through given code, or says it is optional."""
    silent = [
        f"{d.module}.{d.qualname}" for d, says_optional in ungraded_regions() if not says_optional
    ]
    assert not silent, (
        f"these functions have solution regions but no test can reach them, and their docstrings do not say "
        f"{OPTIONAL!r}: {silent}; give them an adapter and tests, or say they are optional"
    )


def test_no_graded_function_calls_itself_optional() -> None:
    """A function a test reaches through given code must not tell students it is not graded."""
    graded = graded_names()
    wrong = []
    for path in sorted((ROOT / "cs336_assignment").rglob("*.py")):
        module = (
            path.relative_to(ROOT)
            .as_posix()
            .removesuffix(".py")
            .removesuffix("/__init__")
            .replace("/", ".")
        )
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and OPTIONAL in " ".join(
                (ast.get_docstring(node) or "").split()
            ):
                if any(key.startswith(f"{module}:") and key.endswith(node.name) for key in graded):
                    wrong.append(f"{module}.{node.name}")
    assert not wrong, f"graded, yet their docstrings say {OPTIONAL!r}: {wrong}"


def test_reachability_follows_given_code_only(tmp_path: Path) -> None:
    """In a sample package, a helper called only from a solution region is ungraded; one called from given code is graded."""
    (tmp_path / "cs336_assignment").mkdir()
    (tmp_path / "cs336_assignment" / "__init__.py").write_text("")
    (tmp_path / "cs336_assignment" / "m.py").write_text(
        "def helper_a(x):\n    '''A.'''\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n\n\n"
        "def helper_b(x):\n    '''B.'''\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n\n\n"
        "def entry(x):\n    '''Entry.'''\n    y = helper_b(x)\n    # BEGIN SOLUTION\n    return helper_a(y)\n    # END SOLUTION\n"
    )
    (tmp_path / "adapters.py").write_text(
        "from cs336_assignment import m\n\n\ndef run_entry(x):\n    return m.entry(x)\n"
    )
    assert graded_names(tmp_path) == {"cs336_assignment.m:entry", "cs336_assignment.m:helper_b"}
    assert [(d.qualname, ok) for d, ok in ungraded_regions(tmp_path)] == [("helper_a", False)]
