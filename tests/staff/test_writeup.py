"""The writeup (cs336_staff/writeup): it builds, deterministically; its problems agree with the rubric;
the answer key's numbers are the reference code's; the handout ships the PDF and never the key."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.parts import load_parts
from cs336_staff.release.build import build
from cs336_staff.release.handout_parts import POINTS_FILE, check_parts, points_json
from cs336_staff.writeup import (
    PDF_NAME,
    _inputs,
    build_pdf,
    check,
    problems,
    query,
    split_boxes,
    written_points,
)
from cs336_staff.writeup.answers import compute

pytestmark = pytest.mark.staff

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def answers() -> dict:
    return compute(REPO)


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    return build(REPO, tmp_path_factory.mktemp("release") / "handout", lock=False)


def test_pdf_is_deterministic_across_processes():
    """Two builds, one in another process, give the same bytes: no timestamp, no system fonts."""
    here = build_pdf(REPO)
    inputs = json.dumps(_inputs(REPO, None, False, None))
    code = (
        "import json, sys, typst; sys.stdout.buffer.write(typst.compile(sys.argv[1], root=sys.argv[2], "
        "sys_inputs=json.loads(sys.stdin.read()), ignore_system_fonts=True, format='pdf'))"
    )
    source = REPO / "writeup"
    there = subprocess.run(
        [sys.executable, "-c", code, str(source / "assignment.typ"), str(source)],
        input=inputs.encode(),
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    assert here.startswith(b"%PDF-") and here == there
    assert b"CreationDate" not in here


def test_problems_agree_with_the_rubric(answers):
    """Parts in rubric order, one code problem each worth the rubric's points, written ones numbered."""
    parts = load_parts(REPO)
    probs = problems(REPO, parts)
    # the key as check() compiles it, on the reference's answers computed once for the module
    key_answers = query(REPO, "answer", key=True, parts=parts, answers=answers)
    assert check(REPO, parts, key_answers) == []
    code = {q["part"]: q["points"] for q in probs if q["kind"] == "code"}
    assert code == {p.key: p.points for p in parts}
    assert [q["number"] for q in probs if q["part"] == "precision"] == [
        "8.1",
        "8.2",
        "8.3",
        "8.4",
        "8.5",
    ]
    written = written_points(REPO, parts)
    assert written["accounting"] > 0 and written["precision"] > 0 and written["tokenization"] > 0


def test_the_lectures_problems_are_posed():
    """Napkin math, MFU, compression ratios, formats, round-off and fp8 are written problems."""
    ids = {q["id"] for q in problems(REPO) if q["kind"] == "written"}
    assert {
        "six-nd",
        "train-time",
        "fit-memory",
        "mfu",
        "compression",
        "formats",
        "roundoff",
        "fp8-scaling",
        "fp8-cost",
    } <= ids


def test_key_numbers_are_the_reference_codes(answers):
    """Every number the key prints is compute()'s, and every computed answer is printed somewhere."""
    shown = query(REPO, "value", key=True, answers=answers)
    assert shown, "the key shows no computed number"
    for v in shown:
        expected = answers[v["name"]]["value"]
        # Typst's JSON may round the last bit
        if isinstance(expected, float) and math.isfinite(expected):
            assert v["value"] == pytest.approx(expected, rel=1e-12, abs=0), v["name"]
        else:
            assert v["value"] == expected, v["name"]
    assert {v["name"] for v in shown} == set(answers), (
        "computed but never shown, or shown but not computed"
    )


def test_reference_answers_match_the_lecture(answers):
    """Anchors from the lecture, so a wrong reference (not only a wrong key) fails here."""
    value = {k: v["value"] for k, v in answers.items()}
    # the lecture's method on the writeup's own inputs (34B on 4T tokens, 512 H100s at MFU 0.45; 24 H100s)
    assert value["total_flops"] == pytest.approx(6 * 34e9 * 4e12)
    assert value["days"] == pytest.approx(6 * 34e9 * 4e12 / (512 * 989.5e12 * 0.45 * 86400))
    assert value["fit_params"] == 24 * 80e9 / 16 and value["bytes_adamw_mixed"] == 16
    assert (
        value["bytes_rmsprop_fp32"],
        value["bytes_momentum_mixed"],
        value["bytes_sgd_mixed"],
    ) == (12, 12, 8)
    # formats the handout's dtype_info does not cover (its docstrings print e4m3's 448, fp16's 65504)
    assert value["tf32_max"] == (2 - 2**-10) * 2.0**127 and value["tf32_eps"] == 2**-10
    assert value["tf32_smallest_normal"] == 2.0**-126
    assert (value["fp6_e3m2_max"], value["fp6_e3m2_smallest_normal"], value["fp6_e3m2_eps"]) == (
        28,
        0.25,
        0.25,
    )
    assert (value["fp4_e2m1_max"], value["fp4_e2m1_smallest_normal"], value["fp4_e2m1_eps"]) == (
        6,
        1,
        0.5,
    )
    assert value["mfu_bf16"] == pytest.approx(789 / 989.5)
    # the first layer's dx
    assert value["cruncher_6nd"] - value["cruncher_exact"] == 2 * 4096 * 1024 * 1024
    assert (
        value["ratio_byte"] == 1.0
        and value["ratio_bpe_512"] < value["ratio_bpe_1024"] < value["ratio_bpe_2048"]
    )
    assert (
        value["sum_bf16"] == 2**-5
        and value["sum_fp16"] == 2**-2
        and math.isclose(value["sum_fp32"], 1.0, rel_tol=1e-3)
    )
    assert value["raw_zero"] == 1.0 and value["scaled_rel"] < 0.0625 < value["tensor_rel"]


def test_student_pdf_has_no_answers():
    """Without key=yes nothing of the answers is placed: no <answer>, no <value> in the document."""
    assert query(REPO, "answer") == [] and query(REPO, "value") == []


def test_a_misplaced_problem_is_reported(tmp_path):
    """Dropping a part from the writeup, or doubling a code problem, fails the check."""
    repo = _writeup_repo(tmp_path)
    source = repo / "writeup" / "assignment.typ"
    text = source.read_text()
    start, end = text.index('#part("data")'), text.index('#part("checkpoint")')
    source.write_text(text[:start] + text[end:])
    # the parts and code problems are read from the student PDF: the key (compiled after running
    # the reference for its numbers) is given as answering nothing, a finding of its own, not these
    found = check(repo, key_answers=[])
    assert any("has the parts" in f for f in found) and any(
        "part 4. Data loading: 0 code problems" in f for f in found
    ), found
    source.write_text(
        text.replace(
            "#code-problem[Atomic save and exact load][]", "#code-problem[A][]\n#code-problem[B][]"
        )
    )
    found = check(repo, key_answers=[])
    assert any("part 5. Checkpointing: 2 code problems" in f for f in found), found


def _writeup_repo(tmp_path: Path) -> Path:
    """What the writeup's build reads, copied: the writeup, the rubric, the code, the public tests."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "writeup", repo / "writeup")
    for f in ("rubric.toml", "adapters.py", "pyproject.toml"):
        shutil.copyfile(REPO / f, repo / f)
    shutil.copytree(
        REPO / "cs336_assignment",
        repo / "cs336_assignment",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(
        REPO / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__", "staff")
    )
    shutil.copytree(REPO / "fixtures" / "corpora", repo / "fixtures" / "corpora")
    return repo


def test_written_problem_without_points_does_not_build(tmp_path):
    """Typst itself refuses a written problem whose points are not a positive integer."""
    repo = _writeup_repo(tmp_path)
    source = repo / "writeup" / "assignment.typ"
    source.write_text(source.read_text().replace("points: 3)[", "points: 0)[", 1))
    assert any("points must be a positive integer" in f for f in check(repo))


def test_no_problem_box_splits_across_pages(answers):
    """Every problem is drawn in one box (lib.typ's _box, breakable: false) that starts and ends
    on the same page of assignment.pdf; the answer key's boxes too."""
    assert split_boxes(REPO) == []
    starts = query(REPO, "box-start", key=True, answers=answers)
    ends = query(REPO, "box-end", key=True, answers=answers)
    assert starts == ends and len(starts) == len(problems(REPO)), (starts, ends)


def test_a_split_box_is_reported(tmp_path):
    """Were the boxes breakable, a problem longer than a page would split, and the check says where."""
    repo = _writeup_repo(tmp_path)
    lib = repo / "writeup" / "lib.typ"
    lib.write_text(lib.read_text().replace("breakable: false", "breakable: true"))
    source = repo / "writeup" / "assignment.typ"
    text = source.read_text()
    source.write_text(
        text.replace("Let `x = torch.arange(24)", "#lorem(600) Let `x = torch.arange(24)")
    )
    found = split_boxes(repo)
    assert any(f.startswith("problem 1.2's box runs from page 2 to page ") for f in found), found


def test_test_commands_are_unbroken_in_the_pdf():
    """Each code problem's `uv run pytest ...` command sits on one line of assignment.pdf: in the
    PDF's words it appears whole (a line break would read as a space inside a path)."""
    from cs336_staff.release.pdf_text import pdf_text

    pages = pdf_text(build_pdf(REPO))
    for part in load_parts(REPO):
        command = "uv run pytest " + " ".join(part.tests)
        assert any(command in page for page in pages), (
            f"{command!r} is broken across lines in assignment.pdf (or missing)"
        )


def test_pdf_text_reads_the_writeup():
    """The release check reads the PDF's words (answer_leaks): the reader gets titles, math and code."""
    from cs336_staff.release.pdf_text import pdf_text

    text = " ".join(pdf_text(build_pdf(REPO)))
    assert "Problem 7.1 (code): Counting FLOPs and bytes, on paper and measured" in text
    assert "1.75 ⋅ 2" in text and "= 448)" in text  # math, glyph by glyph
    assert "x = torch.arange(24).view(2, 3, 4)" in text  # inline code


def test_handout_ships_the_pdf_and_points_but_no_key(handout):
    """assignment.pdf is the fresh build, tests/points.json the rubric's, and no key or source ships."""
    root = handout.root
    assert (root / PDF_NAME).read_bytes() == build_pdf(REPO)
    assert (root / POINTS_FILE).read_text() == points_json(REPO)
    assert not (root / "writeup").exists() and not list(root.rglob("*key*"))
    assert check_parts(REPO, handout).ok, check_parts(REPO, handout).render()
    readme = (root / "README.md").read_text()
    assert "| 6. Tokenization | 16 | 4 |" in readme and "## How grading works" in readme


def test_points_file_lists_parts_in_order_with_public_rules(handout):
    """The progress data: parts in rubric order with points; rules that give tests their parts."""
    data = json.loads((handout.root / POINTS_FILE).read_text())
    assert [p["key"] for p in data["parts"]] == [p.key for p in load_parts(REPO)]
    assert all("visibility" not in r for r in data["rules"]) and any(
        r.get("concept") == "optim" for r in data["rules"]
    )


def test_stale_pdf_in_the_handout_is_caught(handout, tmp_path):
    """A shipped PDF that is not today's build fails release --check's parts line."""
    from cs336_staff.release.results import Handout

    copy = tmp_path / "handout"
    shutil.copytree(handout.root, copy)
    (copy / PDF_NAME).write_bytes(b"%PDF-1.7 stale")
    (copy / "answer-key.pdf").write_bytes(b"%PDF-1.7")
    result = check_parts(
        REPO, Handout(root=copy, files=[*handout.files, "answer-key.pdf"], regions=handout.regions)
    )
    assert not result.ok
    assert any("differs from a fresh build" in d for d in result.details)
    assert any(
        "answer-key.pdf: the writeup's sources and its answer key are staff-only" in d
        for d in result.details
    )


def test_text_is_ragged_right():
    """Justified lines stretch their spaces around unbreakable code into wide gaps: the writeup
    sets ragged right, and no source file turns justification back on."""
    lib = (REPO / "writeup" / "lib.typ").read_text()
    assert "set par(justify: false)" in lib
    for source in (REPO / "writeup").glob("*.typ"):
        assert "justify: true" not in source.read_text(), source.name


def test_code_problem_titles_name_only_classes_students_implement():
    """A class of the part's module named in its code problem's title (as a whole word, not as
    "AdamW's ...") has a method in the problem's Implement list: the title promises no class the
    student does not write (Problem 3.1 once said "Adam and AdamW" with AdamW given)."""
    import ast
    import re

    titles = re.findall(
        r"#code-problem\[(.*?)\]\[", (REPO / "writeup" / "assignment.typ").read_text()
    )
    parts = load_parts(REPO)
    assert len(titles) == len(parts)
    for part, title in zip(parts, titles, strict=True):
        module = REPO / part.module
        files = sorted(module.glob("*.py")) if module.is_dir() else [module]
        classes = {
            node.name
            for f in files
            for node in ast.walk(ast.parse(f.read_text()))
            if isinstance(node, ast.ClassDef)
        }
        implemented = {q.split(".")[0] for names in part.functions.values() for q in names}
        for name in classes:
            if re.search(rf"\b{re.escape(name)}\b(?!['’]s)", title):
                assert name in implemented, (
                    f"part {part.key}: the title {title!r} names {name}, which the Implement "
                    f"list does not have ({sorted(implemented)})"
                )
