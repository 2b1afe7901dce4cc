"""`cs336 audit` fails when a test of one part executes another part's solution code (cs336_staff/audit/part_reach.py),
measured on the sample repository with a second part whose test calls the first part's function."""

from __future__ import annotations

import textwrap

import pytest

from cs336_staff.audit.mutants import CROSS_PART, audit
from cs336_staff.mutants import Mutant
from cs336_staff.session.warm import WarmPool
from tests.staff.test_release import make_sample_repo

pytestmark = pytest.mark.staff

ARITH = "cs336_assignment/arith.py"
GEO = '''
    """Geometry: a second part of the sample."""


    def area(w: float, h: float) -> float:
        """w times h."""
        # BEGIN SOLUTION
        return w * h
        # END SOLUTION
    '''
GEO_TEST = '''
    from cs336_assignment.arith import add
    from cs336_assignment.geo import area


    def test_area_of_a_square():
        assert area(2.0, 2.0) == 4.0


    def test_area_with_arith():
        """Uses part 1's add: a bug in add would cost geometry points."""
        assert area(add(1.0, 1.0), 2.0) == 4.0
    '''
RUBRIC = """
[concepts.geo]
title = "2. Geometry"
points = 5

[[rules]]
match = "tests/*test_geo*.py::*"
concept = "geo"
"""


@pytest.mark.parametrize(
    "crossing", [True, False], ids=["test-uses-another-part", "each-part-alone"]
)
def test_audit_fails_on_a_test_that_executes_another_parts_solution(tmp_path, crossing):
    """The geometry test that calls arith's add is named, with both parts; without it the audit passes."""
    repo = make_sample_repo(tmp_path / "repo")
    (repo / "cs336_assignment/geo.py").write_text(textwrap.dedent(GEO).lstrip())
    test = textwrap.dedent(GEO_TEST)
    if not crossing:
        test = test[: test.index("\n\ndef test_area_with_arith")] + "\n"
    (repo / "tests/test_geo.py").write_text(test)
    (repo / "rubric.toml").write_text((repo / "rubric.toml").read_text() + RUBRIC)
    mutants = [
        (
            "arith",
            Mutant(
                "add_subtracts",
                ARITH,
                "add",
                "return a + b",
                "return a - b",
                "sign slip",
                ("tests/test_arith.py::test_add_adds", "tests/test_geo.py"),
            ),
        )
    ]
    with WarmPool(light=True) as pool:
        _, baseline = audit(repo, mutants, jobs=1, echo=lambda _: None, pool=pool)
    crossed = [b for b in baseline if b.startswith(CROSS_PART)]
    if crossing:
        assert crossed == [
            CROSS_PART
            + "tests/test_geo.py::test_area_with_arith (part 2, geo) executes add of part 1 "
            "(arith): build that object from torch or given code, or move the test to part 1"
        ], baseline
    else:
        assert crossed == [], baseline
