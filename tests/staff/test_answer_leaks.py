"""The writeup's problems ask about other inputs than the docstrings' worked examples, and
``release --check`` (answers) finds a number of the key wherever the handout prints it, in any
form: code, docstrings, doctests, tests, shipped fixtures and the words of assignment.pdf."""

from __future__ import annotations

from pathlib import Path

import pytest

from cs336_staff.release.answer_leaks import (
    _given_numbers,
    check_answer_leaks,
    distinctive,
    leaks,
)
from cs336_staff.release.build import build
from cs336_staff.release.results import Handout
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


@pytest.fixture(scope="module")
def key() -> dict[str, float | tuple[float, ...]]:
    return distinctive(compute(REPO), _given_numbers())


@pytest.fixture(scope="module")
def handout(tmp_path_factory) -> Handout:
    return build(REPO, tmp_path_factory.mktemp("release") / "handout", lock=False)


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


def test_the_real_handout_prints_no_number_of_the_key(handout):
    """release --check's answers check on a freshly built handout, PDF included: it passes."""
    assert (handout.root / "assignment.pdf").is_file()
    result = check_answer_leaks(REPO, handout)
    assert result.ok, result.render()


def test_the_issues_leaks_are_answers_no_more(key):
    """Problem 1.2(a)'s strides and Problem 8.2(a)'s ranges are looked for, and none is what the
    handout's doctests print (strides.py: (6, 3, 1); formats.py: 448, 57344, 2**-7, 65504)."""
    assert key["x_strides"] == (12.0, 4.0, 1.0)
    assert "tf32_max" in key and "tf32_eps" in key
    printed = {448.0, 57344.0, 0.0078125, 65504.0, (6.0, 3.0, 1.0)}
    assert not printed & set(key.values())


#: (answer name, how a handout might print it, the file it sits in).
PLANTED = [
    ("bf16_70000", "x = 70144", "cs336_assignment/a.py"),
    ("bf16_70000", "70144.0", "cs336_assignment/a.py"),
    ("bf16_70000", "70,144 and more", "README.md"),
    ("bf16_70000", "n = 70_144", "cs336_assignment/a.py"),
    ("bf16_70000", "    >>> f()\n    7.0144e4", "cs336_assignment/a.py"),
    ("bf16_70000", "7.0144e+04", "tests/test_a.py"),
    ("bf16_70000", "[1.5, 70144.0]", "fixtures/snapshots/a.json"),
    ("days", "about 41.4 days", "cs336_assignment/a.py"),
    ("days", "4.143e1", "cs336_assignment/a.py"),
    ("sum_bf16", "acc == 0.03125", "tests/test_a.py"),
    ("sum_bf16", "3.125e-2", "cs336_assignment/a.py"),
    ("sum_bf16", "stops at 1/32", "cs336_assignment/a.py"),
    ("sum_bf16", "stops at 2**-5", "cs336_assignment/a.py"),
    ("sum_bf16", "stops at 2^(-5)", "README.md"),
    ("sum_bf16", "stops at 1 / 2**5", "cs336_assignment/a.py"),
    ("tensor_rel", "error 12.6%", "cs336_assignment/a.py"),
    ("tensor_rel", "error 12.56 %", "README.md"),
    ("tensor_rel", "error 0.1256", "cs336_assignment/a.py"),
    ("x_strides", "    >>> x.stride()\n    (12, 4, 1)", "cs336_assignment/a.py"),
    ("x_strides", "assert s == (12,4,1)", "tests/test_a.py"),
    ("x_strides", "strides [12, 4, 1]", "README.md"),
    ("y_strides", "torch.Size([12, 1, 4])", "cs336_assignment/a.py"),
    ("cruncher_params", "N = 4,195,328", "cs336_assignment/a.py"),
    ("cruncher_params", "N = 4_195_328", "cs336_assignment/a.py"),
    ("fit_params", "fits 120B parameters", "cs336_assignment/a.py"),
    ("gpus_needed", "1011 GPUs", "cs336_assignment/a.py"),
]


@pytest.mark.parametrize("name,text,rel", PLANTED, ids=[f"{n}:{t}" for n, t, _ in PLANTED])
def test_a_planted_leak_fails_the_check(tmp_path, key, name, text, rel):
    """Each form a key number may take in a shipped file fails release --check's answers check."""
    assert name in key, f"{name} is not a distinctive answer of the key any more: plant another"
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'"""A module."""\n\n{text}\n', encoding="utf-8")
    result = check_answer_leaks(REPO, Handout(root=tmp_path, files=[rel]))
    assert not result.ok, f"{text!r} ({name} = {key[name]}) in {rel} passed the check"
    assert any(name in d and rel in d for d in result.details), result.details


def _pdf(tmp_path: Path, body: str) -> Path:
    import typst

    source = tmp_path / "doc.typ"
    source.write_text(f"#set page(width: 12cm, height: auto)\n{body}\n", encoding="utf-8")
    out = tmp_path / "assignment.pdf"
    out.write_bytes(typst.compile(str(source), ignore_system_fonts=True, format="pdf"))
    source.unlink()
    return out


@pytest.mark.parametrize(
    "name,body",
    [
        ("x_strides", "The strides of `x` are (12, 4, 1), as `x.stride()` says."),
        ("bf16_70000", "In bf16, 70000 becomes $70144$ (8 significant bits)."),
        ("tensor_rel", "Per-tensor scaling leaves an error of 12.6% on the rest."),
        ("cruncher_exact", "Exactly 94,514,446,336 FLOPs."),
    ],
)
def test_a_leak_in_the_pdfs_words_fails_the_check(tmp_path, key, name, body):
    """The check reads assignment.pdf's text (pdf_text), math and code included."""
    _pdf(tmp_path, body)
    result = check_answer_leaks(REPO, Handout(root=tmp_path, files=[]))
    assert not result.ok and any(
        name in d and "assignment.pdf page 1" in d for d in result.details
    ), result.render()


def test_common_numbers_raise_no_false_alarm(tmp_path):
    """Small whole numbers, powers of two and masks, short fractions and constant shapes are not
    answers, even where the key has them (12 bytes, 255 merges, 0.25, (2, 2, 2))."""
    rel = "cs336_assignment/a.py"
    (tmp_path / "cs336_assignment").mkdir()
    (tmp_path / rel).write_text(
        "0, 1, 2, 7 GPUs, 8 bytes, 12 bytes, 16 bytes, 22, 23, 96, 255, 256, 1024, 4096\n"
        "0.25, 25%, 0.5, 1.0, 100.0%, torch.zeros(2, 2, 2), x[1, 3, 2], 1e-4, 10,000 steps\n"
        "in 34B on 4T tokens on 512 GPUs at MFU 0.45; 989.5 TFLOP/s\n",
        encoding="utf-8",
    )
    _pdf(tmp_path, "Shapes $(2, 2, 2)$, 255 merges, 12 bytes, 25%.")
    result = check_answer_leaks(REPO, Handout(root=tmp_path, files=[rel]))
    assert result.ok, result.render()
