"""What the handout gets from the single source of parts (``cs336_staff/parts.py``), and its check.

At release, beside the stubbed code:

    README.md            its parts table (points, code and written; what to implement, where, which
                         tests) and how grading works, from ``parts.readme_table``
    assignment.pdf       the writeup (``cs336_staff/writeup``), when ``writeup/assignment.typ`` exists
    tests/points.json    what the progress summary (``tests/progress.py``) needs from the rubric: the
                         parts with their points and the rules that give tests their parts

and ``release --check`` adds one line, ``parts``: every copy agrees with its source
(``parts.problems``), the writeup's problems agree with the rubric (``writeup.check``), the
shipped PDF is byte-identical to a fresh build, ``tests/points.json`` is current, and no answer
key (nor the writeup's sources) is in the handout.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from pathlib import Path

from cs336_staff.markers import Region
from cs336_staff.parts import Part, PartsError, load_parts, problems, readme_table
from cs336_staff.release.results import Check, Handout, ReleaseError
from cs336_staff.writeup import (
    KEY_NAME,
    PDF_NAME,
    SOURCE_DIR,
    WriteupError,
    build_pdf,
    check,
    has_writeup,
    query,
    written_points,
)

POINTS_FILE = "tests/points.json"
_STAFF_REPO = Path(__file__).resolve().parents[2]


def _progress_module():
    """The staff repository's ``tests/progress.py`` (the plugin the handout ships), loaded by path."""
    spec = importlib.util.spec_from_file_location(
        "_cs336_progress", _STAFF_REPO / "tests" / "progress.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def points_json(repo: Path) -> str:
    """``tests/points.json`` for the handout of ``repo``: generated from its rubric, never by hand."""
    rubric = tomllib.loads((Path(repo) / "rubric.toml").read_text(encoding="utf-8"))
    data = _progress_module().points_from_rubric(rubric)
    data = {"generated": "from the course rubric when the handout was built; do not edit", **data}
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def _parts(repo: Path, regions: dict[str, list[Region]]) -> list[Part]:
    try:
        return load_parts(repo, regions)
    except PartsError as e:
        raise ReleaseError(str(e)) from None


def readme_values(repo: Path, regions: dict[str, list[Region]]) -> dict[str, str]:
    """The template values of the handout README that come from the parts."""
    parts = _parts(repo, regions)
    written = written_points(repo, parts) if has_writeup(repo) else None
    total_written = sum(written.values()) if written else 0
    code = sum(p.points for p in parts)
    if written:
        writeup = (
            f"`{PDF_NAME}` is the assignment itself: part by part, the lecture's context (definitions and "
            "formulas), a code problem (what to implement, where, which tests grade it) and written "
            f"problems ({total_written} points). Put your written answers in one PDF, `writeup.pdf`, at the "
            "root of this repository, each under its problem's number; `make_submission.sh` includes it."
        )
        points = f"{code:g} points for code and {total_written} for written problems, {code + total_written:g} in all"
    else:
        writeup = "Every part is graded by its tests."
        points = f"{code:g} points"
    return {
        "parts_table": readme_table(parts, students=True, written=written),
        "points": points,
        "code_points": f"{code:g}",
        "writeup": writeup,
    }


def extras(repo: Path, regions: dict[str, list[Region]]) -> dict[str, str | bytes]:
    """The generated files of the handout (relative path -> contents): ``tests/points.json``, ``assignment.pdf``."""
    files: dict[str, str | bytes] = {}
    if (Path(repo) / "rubric.toml").is_file():
        files[POINTS_FILE] = points_json(repo)
    if has_writeup(repo):
        try:
            files[PDF_NAME] = build_pdf(repo, parts=_parts(repo, regions))
        except WriteupError as e:
            raise ReleaseError(f"the writeup does not build: {e}") from None
    return files


def check_parts(repo: Path, handout: Handout) -> Check:
    """The ``parts`` line of ``release --check`` (see the module docstring)."""
    repo = Path(repo)
    details = list(problems(repo))
    try:
        parts = load_parts(repo)
    except PartsError:
        return Check("parts", False, "the parts cannot be read", details)
    root = handout.root
    if (repo / "rubric.toml").is_file():
        shipped = (
            (root / POINTS_FILE).read_text(encoding="utf-8")
            if (root / POINTS_FILE).is_file()
            else None
        )
        if shipped != points_json(repo):
            details.append(
                f"{POINTS_FILE} is {'missing' if shipped is None else 'stale'}; it must be generated from rubric.toml"
            )
    staff_files = [
        f
        for f in handout.files
        if f.startswith(SOURCE_DIR + "/")
        or Path(f).name == KEY_NAME
        or "answer" in Path(f).name.lower()
    ]
    details += [
        f"{f}: the writeup's sources and its answer key are staff-only" for f in staff_files
    ]
    summary = f"{len(parts)} parts, {sum(p.points for p in parts):g} code points"
    if has_writeup(repo):
        details += check(repo, parts)
        pdf = root / PDF_NAME
        try:
            if not pdf.is_file():
                details.append(f"{PDF_NAME} is missing from the handout")
            elif pdf.read_bytes() != build_pdf(repo, parts=parts):
                details.append(
                    f"{PDF_NAME} differs from a fresh build (stale, or the build is not deterministic)"
                )
            leaked = query(repo, "answer", parts=parts) + query(repo, "value", parts=parts)
            if leaked:
                details.append(
                    f"{PDF_NAME} holds {len(leaked)} answer elements; it must be built without key=yes"
                )
            written = sum(written_points(repo, parts).values())
        except WriteupError as e:
            details.append(str(e))
            written = 0
        summary += f", {written} written points in {PDF_NAME}; its problems agree with rubric.toml and the key answers each one"
    if details:
        return Check("parts", False, "the parts, the writeup or their copies disagree", details)
    return Check("parts", True, summary + "; no copy drifted, no key shipped")
