"""The writeup's napkin problems ask about other inputs than the docstrings' worked examples, and
``release --check`` (answers) finds an answer of the key wherever the handout spells it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cs336_staff.release.answer_leaks import distinctive, leaks
from cs336_staff.writeup.answers import GIVEN, compute

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]
ACCOUNTING = [
    f"cs336_assignment/accounting/{name}.py" for name in ("__init__", "napkin", "flops", "memory")
]

#: The lecture's worked examples, which the accounting docstrings print: 70B on 15T tokens on 1024
#: H100s at MFU 0.5 takes 143.9 days at 6.3e24 FLOPs; 8 H100s of 80 GB hold 40B.
LECTURE = {
    "days": 6 * 70e9 * 15e12 / (1024 * 989.5e12 * 0.5 * 86400),
    "total_flops": 6.3e24,
    "fit_params": 40e9,
}


def test_the_check_finds_the_lectures_answers_in_the_accounting_docstrings():
    """Were the writeup to ask the lecture's own questions, the check would fail on napkin.py and flops.py."""
    found = leaks(REPO, ACCOUNTING, LECTURE)
    assert any("napkin.py" in f and "'143.9'" in f for f in found), found
    # "about 144 days": rounded, still the answer
    assert any("napkin.py" in f and "'144'" in f for f in found), found
    assert any("flops.py" in f and "'6.3e+24'" in f for f in found), found
    assert any("napkin.py" in f and "40000000000.0" in f for f in found), found


def test_the_writeups_napkin_inputs_differ_from_the_lectures_examples():
    """The problems' model, token count and clusters are not the lecture's (70B, 15T, 1024 GPUs, 8 GPUs)."""
    assert (GIVEN["params"][0], GIVEN["tokens"][0], GIVEN["gpus"][0]) != (70e9, 15e12, 1024)
    assert GIVEN["fit_gpus"][0] != 8


def test_no_answer_of_the_key_appears_in_the_shipped_code_and_docstrings():
    """The check on the repository's shipped package and public tests (release --check runs it on the built handout)."""
    from cs336_staff.release.answer_leaks import _given_numbers

    answers = distinctive(compute(REPO), _given_numbers())
    files = [
        str(p.relative_to(REPO))
        for folder in ("cs336_assignment", "tests")
        for p in (REPO / folder).glob("*.py")
    ]
    files += [str(p.relative_to(REPO)) for p in (REPO / "cs336_assignment").glob("*/*.py")]
    assert leaks(REPO, files, answers) == []
