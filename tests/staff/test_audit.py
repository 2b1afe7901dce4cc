"""`cs336 audit` on the sample repository: a caught mutant, a surviving one, and one that no longer applies."""

from __future__ import annotations

import pytest

from cs336_staff.audit import audit, load_mutants
from cs336_staff.mutants import Mutant
from tests.staff.test_release import make_sample_repo

pytestmark = pytest.mark.staff

ARITH = "cs336_assignment/arith.py"
TESTS = ("tests/test_arith.py::test_add_adds",)


def test_audit_reports_caught_surviving_and_stale_mutants(tmp_path):
    """A caught mutant names its test and message; a survivor and a stale `old` text fail the audit."""
    repo = make_sample_repo(tmp_path / "repo")
    original = (repo / ARITH).read_text()
    mutants = [
        ("arith", Mutant("add_subtracts", ARITH, "return a + b", "return a - b", "sign slip", TESTS)),
        ("arith", Mutant("hypot_pow", ARITH, "math.sqrt(squares)", "squares ** 0.5", "equivalent rewrite", TESTS)),
        ("arith", Mutant("stale", ARITH, "return a * b", "return b", "the reference moved on", TESTS)),
        ("arith", Mutant("hidden_only", ARITH, "return a + b", "return b + a", "names a hidden test", ("tests/hidden/test_arith.py",))),
    ]
    lines: list[str] = []
    verdicts, baseline = audit(repo, mutants, jobs=2, echo=lines.append)
    assert baseline == []
    status = {v.mutant.name: v.status for v in verdicts}
    assert status == {"add_subtracts": "caught", "hypot_pow": "survived", "stale": "invalid", "hidden_only": "invalid"}
    caught = verdicts[0]
    assert caught.caught_by == ["tests/test_arith.py::test_add_adds: AssertionError: assert -1.0 == 3.0"]
    assert "1 passed" in verdicts[1].note
    assert "occurs 0 times" in verdicts[2].note
    assert lines[0].startswith("[1/4] arith/add_subtracts  CAUGHT")
    assert (repo / ARITH).read_text() == original, "the audit never touches the repository"


def test_baseline_failure_makes_a_catch_inconclusive(tmp_path):
    """A test that fails without any mutant does not count as catching one."""
    repo = make_sample_repo(tmp_path / "repo")
    test = repo / "tests/test_arith.py"
    test.write_text(test.read_text().replace("== 3.0", "== 4.0"))
    mutants = [("arith", Mutant("add_subtracts", ARITH, "return a + b", "return a - b", "sign slip", TESTS))]
    verdicts, baseline = audit(repo, mutants, jobs=1, echo=lambda _: None)
    assert [b.split(":")[0:3] for b in baseline] == [["tests/test_arith.py", "", "test_add_adds"]]
    assert verdicts[0].status == "inconclusive"


def test_only_filters_by_part_and_rejects_unknown_names():
    """--only keeps the named parts or mutants; an unknown name lists the parts that exist."""
    everything = load_mutants()
    if everything:
        part = everything[0][0]
        assert {p for p, _ in load_mutants([part])} == {part}
    with pytest.raises(SystemExit, match="names no part or mutant"):
        load_mutants(["no_such_part_anywhere"])
