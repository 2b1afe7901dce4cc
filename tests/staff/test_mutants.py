"""The bug zoo's anchoring: a mutant finds its code by syntax tree, so formatting never breaks it.

``Mutant.mutate`` on small sources (statements, expressions, deletions, layouts that differ from
the mutant's own, matches that are missing or ambiguous), then the proof on the real zoo: a copy of
the reference run through ``ruff format`` (at the project's line length and at a narrow one, which
rewraps most calls) changes the text of most modules, yet every mutant still applies, and makes
the same program there as on the unformatted reference, so the audit's verdicts carry over.

Controls (correct rewrites): every one applies to the current reference and runs against its part's
public and hidden tests; on the sample repository, a control that a hidden test rejects fails the
audit, which names the control and the test.

Hidden-only bugs (``HiddenOnly``): every one applies and names hidden tests; on the sample repository
the audit passes a bug that the public tests let through and a hidden test catches for at least a
point of 100, and fails one a public test catches, one no hidden test catches, one whose hidden test
weighs too little (saying which weight to raise) and one whose hidden test weighs so much that hidden
tests hold over two thirds of the part.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cs336_staff.audit.hidden_only import (
    NOTICEABLE,
    audit_hidden_only,
    hidden_only_tests,
    load_hidden_only,
)
from cs336_staff.audit.mutants import (
    REPO,
    applicability,
    audit_controls,
    load_controls,
    load_mutants,
    make_scratch,
)
from cs336_staff.mutants import Control, HiddenOnly, Mutant
from cs336_staff.session.warm import WarmPool
from tests.staff.test_release import SAMPLE, make_sample_repo

pytestmark = pytest.mark.staff

SOURCE = textwrap.dedent('''
    import math


    class Box:
        def area(self, w, h):
            """Width times height."""
            if w < 0:  # a negative width is a caller's mistake
                raise ValueError(
                    f"width must be >= 0, got {w}"
                )
            scale = 1
            return (w * h) * scale

        def diagonal(self, w, h):
            return math.sqrt(w * w + h * h)


    def area(w, h):
        return w * h
    ''')


def mutant(function: str, old: str, new: str) -> Mutant:
    return Mutant("m", "box.py", function, old, new, "why", ("tests/test_box.py",))


def test_statements_match_whatever_their_layout_and_the_rest_of_the_file_stays():
    """Old code in another layout (one line, other quotes, no comment) matches; only its statements change."""
    m = mutant("Box.area", "if w < 0: raise ValueError(f'width must be >= 0, got {w}')", "")
    out = m.mutate(SOURCE)
    assert "raise" not in out and "if w < 0" not in out
    assert out == SOURCE.replace(
        SOURCE[SOURCE.index("        if w < 0") : SOURCE.index("        scale = 1")], ""
    )
    two = mutant("Box.area", "scale = 1\nreturn w * h * scale", "return w * h")
    assert "        return w * h\n\n    def diagonal" in two.mutate(SOURCE)


def test_an_expression_is_replaced_in_place_with_parentheses_where_needed():
    """`old` may be a sub-expression; a compound `new` is parenthesised so precedence cannot change."""
    m = mutant("Box.diagonal", "w * w + h * h", "w + h")
    assert "math.sqrt((w + h))" in m.mutate(SOURCE)
    call = mutant("Box.diagonal", "math.sqrt(w * w + h * h)", "abs(w)")
    assert "return abs(w)" in call.mutate(SOURCE)


def test_a_whole_block_deleted_leaves_pass():
    m = mutant("area", "return w * h", "")
    assert "def area(w, h):\n    pass\n" in m.mutate(SOURCE)


@pytest.mark.parametrize(
    ("function", "old", "message"),
    [
        ("Box.area", "return w + h", "matches 0 times in Box.area"),
        ("Box.perimeter", "return w * h", "0 definitions"),
        ("Box.diagonal", "w", "matches 2 times in Box.diagonal"),
        ("Box.area", "if w < 0:", "not Python statements or an expression"),
    ],
    ids=["moved-on", "no-such-function", "ambiguous", "fragment"],
)
def test_a_mutant_that_does_not_apply_says_why(function: str, old: str, message: str):
    with pytest.raises(ValueError, match=message):
        mutant(function, old, "pass").mutate(SOURCE)


def test_a_mutation_that_does_not_compile_is_refused():
    with pytest.raises(ValueError, match="does not compile: 'break' outside loop"):
        mutant("area", "return w * h", "break").mutate(SOURCE)


def _program(source: str) -> str:
    """The syntax tree without docstrings (``ruff format`` re-indents those; nothing else in the tree changes)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            body[:] = body[1:] or [ast.Pass()]  # node.body itself
    return ast.dump(tree)


@functools.cache
def _mutated_program(m: Mutant, source: str) -> str:
    """A digest of ``_program`` of ``m`` applied to ``source``: on the reference's own text, the same
    at every line length, it is computed once."""
    return hashlib.sha256(_program(m.mutate(source)).encode()).hexdigest()


#: Narrower than pyproject.toml's [tool.ruff] line-length (100), at which the reference is already
#: formatted (`ruff format --check` in .ci/run): at these widths ruff must rewrite it.
LINE_LENGTHS = [80, 60]


@pytest.mark.parametrize("line_length", LINE_LENGTHS)
def test_every_mutant_applies_to_a_ruff_formatted_reference_and_makes_the_same_program(
    tmp_path: Path, line_length: int
):
    """`ruff format` rewrites most of the reference's modules at 80 and 60 columns; every mutant (and
    hidden-only bug) still applies there, unchanged in effect."""
    copy = make_scratch(REPO, tmp_path)
    files = sorted(
        p.relative_to(copy).as_posix() for p in (copy / "cs336_assignment").rglob("*.py")
    )
    before = {f: (copy / f).read_text() for f in files}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--no-cache",
            "--quiet",
            "--line-length",
            str(line_length),
            "cs336_assignment",
        ],
        cwd=copy,
        check=True,
    )
    after = {f: (copy / f).read_text() for f in files}
    changed = [f for f in files if after[f] != before[f]]
    # Most modules must be rewritten, or the proof has nothing reformatted to stand on.
    needed = len(files) // 2
    assert len(changed) >= needed, (
        f"ruff format changed only {changed}: the proof needs a reformatted reference"
    )
    mutants = load_mutants()
    assert applicability(copy, mutants) == []
    for _, m in mutants + load_hidden_only():  # hidden-only bugs are anchored the same way
        assert isinstance(m, Mutant)  # load_mutants types its mutants as object
        assert _mutated_program(m, after[m.file]) == _mutated_program(m, before[m.file]), (
            f"{m.name}: the mutated formatted {m.file} is another program than the mutated reference"
        )


def test_every_control_applies_to_the_reference_and_names_public_and_hidden_tests():
    """The zoo has controls; each applies (``--dry-run``'s check) and runs its part's public and hidden test files."""
    controls = load_controls()
    assert controls, "the zoo has no controls: add CONTROLS to cs336_staff/mutants/<part>.py"
    assert applicability(REPO, controls) == []
    for part, c in controls:
        assert isinstance(c, Control)
        public = [t for t in c.tests if not t.startswith("tests/hidden/")]
        hidden = [t for t in c.tests if t.startswith("tests/hidden/")]
        assert public and hidden, (
            f"{c.name}: runs {c.tests}, not both public and hidden tests of {part}"
        )
        assert c.tests == tuple(sorted(set(c.tests)))
    names = {c.name for _, c in controls}
    assert not names & {m.name for _, m in load_mutants()}
    one = sorted(names)[0]
    assert [c.name for _, c in load_controls([one])] == [one] and load_mutants([one]) == []


def test_a_control_that_a_hidden_test_rejects_fails_the_audit_and_names_both(tmp_path: Path):
    """On the sample repository: a correct rewrite passes public and hidden tests; a rewrite that is
    wrong only for negatives passes the public test but fails the hidden one, and the audit says so."""
    repo = make_sample_repo(tmp_path / "repo")
    arith, tests = (
        "cs336_assignment/arith.py",
        # the sample ships no snapshot: its snapshot test is left out
        ("tests/test_arith.py::test_add_adds", "tests/hidden/test_arith.py"),
    )
    good = Control(
        "add-flipped", arith, "add", "return a + b", "return b + a", "operands flipped", tests
    )
    bad = Control("add-abs", arith, "add", "return a + b", "return abs(a) + abs(b)", "wrong", tests)
    original = (repo / arith).read_text()
    lines: list[str] = []
    with WarmPool(light=True) as pool:  # the sample's tests need no torch
        verdicts = audit_controls(
            repo, [("arith", good), ("arith", bad)], jobs=1, echo=lines.append, pool=pool
        )
    assert [v.status for v in verdicts] == ["passed", "failed"], "\n".join(lines)
    assert verdicts[0].ok and not verdicts[1].ok
    assert verdicts[1].caught_by == [
        "control add-abs failed test tests/hidden/test_arith.py::test_add_negative: the tests "
        "reject a correct implementation (AssertionError: assert 3.0 == -3.0)"
    ]
    assert "control arith/add-abs  FAILED" in lines[1]
    assert (repo / arith).read_text() == original, "the audit patched the repository itself"


def test_every_hidden_only_bug_applies_and_names_hidden_tests():
    """Each hidden-only bug applies (``--dry-run``'s check), names the hidden tests that catch it, and runs its
    part's public and hidden test files; no name is shared with a mutant or a control."""
    bugs = load_hidden_only()
    assert bugs, "the zoo has no hidden-only bugs: add HIDDEN_ONLY to cs336_staff/mutants/<part>.py"
    assert applicability(REPO, bugs) == []
    for part, bug in bugs:
        assert isinstance(bug, HiddenOnly) and bug.hidden
        assert all(t.startswith("tests/hidden/") for t in bug.hidden), bug.hidden
        assert any(t.startswith("tests/hidden/") for t in bug.tests), bug.tests
        assert f"tests/test_{part}.py" in bug.tests or part == "tokenization", bug.tests
    names = {b.name for _, b in bugs}
    assert not names & {m.name for _, m in load_mutants() + load_controls()}


#: The sample's public tests without its snapshot test (the sample ships no snapshot), and a rubric whose
#: arithmetic part is 6 of 100 points: each of its three tests (two public, one hidden) is worth 2.
HIDDEN_ONLY_SAMPLE = {
    **SAMPLE,
    "tests/test_arith.py": '''
        import adapters


        def test_add_adds():
            """1 + 2 == 3."""
            assert adapters.run_add(1.0, 2.0) == 3.0


        def test_add_zero():
            """0 + 2 == 2."""
            assert adapters.run_add(0.0, 2.0) == 2.0
        ''',
    "rubric.toml": """
        [concepts.arith]
        title = "1. Arithmetic"
        points = 6

        [concepts.writeup]
        title = "2. Writeup"
        points = 94

        [[rules]]
        match = "tests/*test_arith*.py::*"
        concept = "arith"
        """,
}


def test_a_hidden_only_bug_must_pass_the_public_tests_and_cost_a_noticeable_point(tmp_path: Path):
    """On the sample repository: a bug only the hidden test catches, at 2 points of 100, passes; one a public
    test catches, one nothing catches, and the first again once the hidden test weighs 0.1 (0.29 points) or 5
    (the hidden test holds 5/7 of the part) fail, each saying why."""
    repo = make_sample_repo(tmp_path / "repo", HIDDEN_ONLY_SAMPLE)
    arith, hidden = "cs336_assignment/arith.py", ("tests/hidden/test_arith.py::test_add_negative",)
    tests = hidden_only_tests(repo, "arith")
    assert tests == ("tests/hidden/test_arith.py", "tests/test_arith.py")

    def bug(name: str, new: str) -> tuple[str, Mutant]:
        return "arith", HiddenOnly(name, arith, "add", "return a + b", new, "a bug", tests, hidden)

    bugs = [
        bug("abs", "return abs(a) + abs(b)"),  # right for the public tests' non-negative operands
        bug("subtracts", "return a - b"),  # a public test catches it
        bug("off-at-seven", "return a + b if a != 7 else 0.0"),  # no test tries 7
    ]
    original = (repo / arith).read_text()
    lines: list[str] = []
    with WarmPool(light=True) as pool:  # the sample's tests need no torch
        verdicts = audit_hidden_only(repo, bugs, jobs=1, echo=lines.append, pool=pool)
        assert [v.status for v in verdicts] == ["caught", "public", "survived"], "\n".join(lines)
        caught, public, survived = verdicts
        assert caught.ok and not public.ok and not survived.ok
        assert caught.note == "costs 2.00 points of 100 in grading" and NOTICEABLE <= 2
        assert caught.caught_by[0].startswith(f"{hidden[0]} (2.00 of 100): ")
        assert public.caught_by[0].startswith("tests/test_arith.py::test_add_adds: ")
        assert "move it to MUTANTS" in public.note
        assert survived.note == f"the hidden tests {hidden[0]} pass: they do not catch it"
        assert "hidden-only arith/abs  CAUGHT" in lines[0]

        rubric, weighed = repo / "rubric.toml", (repo / "rubric.toml").read_text()
        rubric.write_text(weighed + f'\n[[rules]]\nmatch = "{hidden[0]}"\nweight = 0.1\n')
        (cheap,) = audit_hidden_only(repo, bugs[:1], jobs=1, echo=lines.append, pool=pool)
        rubric.write_text(weighed + f'\n[[rules]]\nmatch = "{hidden[0]}"\nweight = 5\n')
        (heavy,) = audit_hidden_only(repo, bugs[:1], jobs=1, echo=lines.append, pool=pool)
    assert cheap.status == "cheap" and not cheap.ok, "\n".join(lines)
    assert cheap.note == (
        f"costs 0.29 points of 100 in grading, under the {NOTICEABLE:g} a student notices: "
        f"raise the weight of {hidden[0]} in rubric.toml"
    )
    assert heavy.status == "heavy" and not heavy.ok, "\n".join(lines)
    assert heavy.note.startswith(
        "costs 4.29 points of 100 in grading, but the hidden tests hold 71% of arith (at most 67%)"
    ), heavy.note
    assert (repo / arith).read_text() == original, "the audit patched the repository itself"
