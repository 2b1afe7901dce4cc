"""The assignment writeup (``assignment.pdf``, shipped) and its answer key (staff only), typeset by Typst.

    $ uv run cs336 writeup out/              # out/assignment.pdf, as the handout ships it
    $ uv run cs336 writeup out/ --key        # also out/answer-key.pdf (staff only; never ship it)
    $ uv run cs336 writeup --answers         # print the reference answers (answers.py)
    $ uv run cs336 writeup --check           # the problem list agrees with the rubric (CI: release --check)

The source is ``writeup/assignment.typ`` (layout and macros in ``writeup/lib.typ``). Problems
and answers sit side by side in it; the answer key is the same source compiled with ``key=yes``,
which shows the answers. What the source does not type by hand it reads from ``sys.inputs``:

    data     the parts (numbers, titles, points, modules, functions, adapters, tests), from
             rubric.toml and the code (``cs336_staff.parts.writeup_data``)
    given    the inputs quoted by the problems (``answers.GIVEN``)
    answers  the key's numbers, computed by running the reference code (``answers.compute``)

The PDF is deterministic: embedded fonts only (no system fonts), no creation date, so the same
sources give the same bytes on every machine. Written problems' points live in the source (the
rubric's loader accepts only tests' points); ``check`` compares the problem list with the rubric:
parts in the same order, one code problem per part worth the part's points, written problems
numbered in order with positive points, and every written problem answered in the key; and it
checks the layout: every problem sits in one box that starts and ends on the same page.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.parts import Part, PartsError, load_parts, writeup_data

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIR = "writeup"
MAIN = "assignment.typ"
PDF_NAME = "assignment.pdf"
KEY_NAME = "answer-key.pdf"


class WriteupError(RuntimeError):
    """The writeup does not build or disagrees with the rubric; the message says where."""


def has_writeup(repo: Path) -> bool:
    return (Path(repo) / SOURCE_DIR / MAIN).is_file()


def _inputs(
    repo: Path, parts: list[Part] | None, key: bool, answers: dict | None
) -> dict[str, str]:
    from cs336_staff.writeup.answers import compute, given_texts

    repo = Path(repo)
    parts = load_parts(repo) if parts is None else parts
    inputs = {
        "data": json.dumps(writeup_data(parts, repo), sort_keys=True),
        "given": json.dumps(given_texts(), sort_keys=True),
        "key": "yes" if key else "no",
    }
    if key:
        inputs["answers"] = json.dumps(
            compute(repo) if answers is None else answers, sort_keys=True
        )
    return inputs


def _typst_error(e: Exception) -> WriteupError:
    message = getattr(e, "message", str(e))
    diagnostic = getattr(e, "diagnostic", "")
    hints = "".join(f"\n  hint: {h}" for h in getattr(e, "hints", []) or [])
    return WriteupError(f"typst: {message}\n{diagnostic}{hints}".rstrip())


def build_pdf(
    repo: Path = REPO,
    *,
    key: bool = False,
    parts: list[Part] | None = None,
    answers: dict | None = None,
) -> bytes:
    """The assignment (or with ``key``, the answer key) as PDF bytes."""
    import typst

    repo = Path(repo)
    try:
        return typst.compile(
            str(repo / SOURCE_DIR / MAIN),
            root=str(repo / SOURCE_DIR),
            sys_inputs=_inputs(repo, parts, key, answers),
            ignore_system_fonts=True,
            format="pdf",
        )
    except (typst.TypstError, RuntimeError) as e:  # query reports compile errors as RuntimeError
        raise _typst_error(e) from None


def query(
    repo: Path,
    label: str,
    *,
    key: bool = False,
    parts: list[Part] | None = None,
    answers: dict | None = None,
) -> list:
    """The values of the metadata elements labelled ``label`` (e.g. ``"problem"``) in the document."""
    import typst

    repo = Path(repo)
    try:
        out = typst.query(
            str(repo / SOURCE_DIR / MAIN),
            f"<{label}>",
            field="value",
            root=str(repo / SOURCE_DIR),
            sys_inputs=_inputs(repo, parts, key, answers),
            ignore_system_fonts=True,
            format="json",
        )
    except (typst.TypstError, RuntimeError) as e:  # query reports compile errors as RuntimeError
        raise _typst_error(e) from None
    return json.loads(out)


def problems(repo: Path = REPO, parts: list[Part] | None = None) -> list[dict]:
    """The assignment's problems in order: ``{kind, part, number, id, points}``."""
    return query(repo, "problem", parts=parts)


def written_points(repo: Path = REPO, parts: list[Part] | None = None) -> dict[str, int]:
    """Part key -> points of its written problems (0 if none), for every part."""
    parts = load_parts(repo) if parts is None else parts
    out = {p.key: 0 for p in parts}
    for prob in problems(repo, parts):
        if prob["kind"] == "written":
            out[prob["part"]] += prob["points"]
    return out


def split_boxes(repo: Path = REPO, parts: list[Part] | None = None) -> list[str]:
    """Every problem box of the student PDF that does not start and end on one page, and every
    problem not drawn in a box (``_box`` in ``lib.typ`` records its first and last page)."""
    try:
        starts = {m["number"]: m["page"] for m in query(repo, "box-start", parts=parts)}
        ends = {m["number"]: m["page"] for m in query(repo, "box-end", parts=parts)}
        numbers = [q["number"] for q in problems(repo, parts)]
    except WriteupError as e:
        return [str(e)]
    out = []
    for n in numbers:
        if n not in starts or n not in ends:
            out.append(
                f"problem {n} is not drawn by lib.typ's _box (no <box-start>/<box-end>): build it with #code-problem or #written"
            )
        elif starts[n] != ends[n]:
            out.append(
                f"problem {n}'s box runs from page {starts[n]} to page {ends[n]}: a problem box must fit on one page "
                "(_box is breakable: false; shorten the problem or split it)"
            )
    return out


def check(
    repo: Path = REPO, parts: list[Part] | None = None, key_answers: list[dict] | None = None
) -> list[str]:
    """Every disagreement between the writeup's problems and the rubric; empty when they agree.

    ``key_answers``: the ``<answer>`` metadata of the key, if the caller compiled it already."""
    repo = Path(repo)
    try:
        parts = load_parts(repo) if parts is None else parts
        probs = problems(repo, parts)
        part_order = [m["key"] for m in query(repo, "part", parts=parts)]
        if key_answers is None:
            key_answers = query(repo, "answer", key=True, parts=parts)
    except (PartsError, WriteupError) as e:
        return [str(e)]
    out = []
    keys = [p.key for p in parts]
    if part_order != keys:
        out.append(
            f"writeup/assignment.typ has the parts {part_order}; rubric.toml has {keys} (same order, each once)"
        )
    by_part: dict[str, list[dict]] = {}
    for prob in probs:
        by_part.setdefault(prob["part"], []).append(prob)
    for p in parts:
        mine = by_part.get(p.key, [])
        code = [q for q in mine if q["kind"] == "code"]
        if len(code) != 1:
            out.append(
                f"part {p.heading}: {len(code)} code problems in the writeup; it needs exactly one (#code-problem)"
            )
        elif code[0]["points"] != p.points:
            out.append(
                f"part {p.heading}: the code problem says {code[0]['points']} points, rubric.toml {p.points:g}"
            )
        numbers = [q["number"] for q in mine]
        expected = [f"{p.number}.{i}" for i in range(1, len(mine) + 1)]
        if numbers != expected:
            out.append(f"part {p.heading}: problems numbered {numbers}, expected {expected}")
    ids = [q["id"] for q in probs if q["kind"] == "written"]
    if len(set(ids)) != len(ids):
        out.append(f"written problem ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    for q in probs:
        if q["kind"] == "written" and not (isinstance(q["points"], int) and q["points"] > 0):
            out.append(
                f"problem {q['number']} ({q['id']}): points must be a positive integer, got {q['points']!r}"
            )
    out += split_boxes(repo, parts)
    answered = [a["id"] for a in key_answers]
    if sorted(answered) != sorted(ids):
        out.append(
            f"the answer key answers {sorted(answered)}, the written problems are {sorted(ids)}"
        )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out_dir",
        nargs="?",
        type=Path,
        help=f"where to write {PDF_NAME} (and with --key {KEY_NAME})",
    )
    parser.add_argument(
        "--key", action="store_true", help=f"also write the staff-only answer key, {KEY_NAME}"
    )
    parser.add_argument(
        "--answers",
        action="store_true",
        help="print the reference answers, computed by the reference code",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the problem list against rubric.toml and the key",
    )
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.out_dir is None and not (args.answers or args.check):
        raise CommandError(
            "give OUT_DIR (e.g. `uv run cs336 writeup out/`), or --answers, or --check"
        )
    if args.out_dir is not None and args.out_dir.exists() and not args.out_dir.is_dir():
        raise CommandError(
            f"{args.out_dir} is a file; give the folder to write {PDF_NAME} into "
            f"(e.g. `uv run cs336 writeup {args.out_dir.parent}/`)"
        )
    if args.key and args.out_dir is None:
        raise CommandError("--key writes the answer key into OUT_DIR: give one (e.g. out/)")
    try:
        if args.answers:
            from cs336_staff.writeup.answers import compute

            for name, entry in compute(args.repo).items():
                print(f"{name:<24} {entry['text']:<28} {entry['value']!r}")
        if args.check:
            found = check(args.repo)
            for line in found:
                print(f"writeup: {line}")
            probs = problems(args.repo)
            written = sum(q["points"] for q in probs if q["kind"] == "written")
            if found:
                return 1
            print(
                f"writeup: {len(probs)} problems agree with rubric.toml ({written} written points); every written problem is answered in the key"
            )
        if args.out_dir is not None:
            args.out_dir.mkdir(parents=True, exist_ok=True)
            (args.out_dir / PDF_NAME).write_bytes(build_pdf(args.repo))
            print(f"writeup: wrote {args.out_dir / PDF_NAME}")
            if args.key:
                (args.out_dir / KEY_NAME).write_bytes(build_pdf(args.repo, key=True))
                print(
                    f"writeup: wrote {args.out_dir / KEY_NAME} (staff only: never put it in the handout)"
                )
    except (WriteupError, PartsError) as e:
        raise CommandError(e, status=1) from None
    return 0
