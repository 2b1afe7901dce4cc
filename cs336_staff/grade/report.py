"""Grading outputs: Gradescope ``results.json``, JUnit XML, a per-concept table, the CSV gradebook.

``results.json`` is the source of truth: everything else (JUnit, summary, gradebook, ``cs336
merge``) is derived from it, so a merged result is written by exactly the same code. Its shape
follows Gradescope's autograder specification::

    {"score": 41.5, "execution_time": 73, "output": "...", "stdout_visibility": "hidden",
     "tests": [{"name": "tests/test_optim.py::test_adamw_matches_torch_reference",
                "score": 1.0, "max_score": 1.0, "status": "passed", "output": "",
                "visibility": "visible", "tags": ["optim"],
                "extra_data": {"outcome": "passed", "device": "cpu", "duration": 0.12}}],
     "extra_data": {"status": "ok", "sha256": "...", ...}}

A test's ``status`` is ``passed`` or ``failed`` (what Gradescope accepts) except ``pending`` for a
test this runner could not run (a GPU test on a CPU runner): pending tests are worth 0 until
``cs336 merge`` fills them in from the other runner; and ``not_graded`` for a test that is no part
of the grade (``TestResult.graded``: weight 0 in the rubric, or skipped on this runner for a reason
that is no device's), which is never counted as passed or failed and whose points are left out of
``max_score``; ``gradescope.for_gradescope`` leaves both kinds out of what Gradescope shows, so
nothing that is not graded shows red there. Every test is exactly one of passed, failed, pending and
not graded, and the summary's columns count them so (their sum is the number of tests). The
precise outcome (``timeout``, ``crashed``, ``not_run`` ...) is in the test's ``extra_data.outcome``.

Deliberately left out: HTML reports and uploading to Gradescope (its autograder harness reads
``results.json`` itself).
"""

from __future__ import annotations

import csv
import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from cs336_staff.grade import neutral

OUTPUT_CHARS = 4000
#: The most characters of notes a gradebook row's ``remarks`` shows (whole notes; summary.md has all).
REMARKS_CHARS = 500
#: A failed test's ``outcome``, as the summary says it.
HOW_THEY_ENDED = {
    "failed": "failed a check",
    "error": "errored outside the test body",
    "timeout": "timed out",
    "crashed": "crashed the worker",
    "not_run": "not run",
}
#: A test's ``status`` when it is no part of the grade (``TestResult.graded``).
NOT_GRADED = "not_graded"
#: The summary's columns: every test is in exactly one (``TestResult.status``).
STATUSES = ("passed", "failed", "pending", NOT_GRADED)


@dataclass
class TestResult:
    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: str  # passed failed error timeout crashed skipped pending not_run
    points: float
    max_points: float
    concept: str
    visibility: str
    device: str  # "cpu" or "gpu": the runner that must run it
    output: str = ""
    duration: float = 0.0

    @property
    def graded(self) -> bool:
        """Is this test part of the grade? Not when the rubric gives it no points (weight 0), nor when
        it skipped itself on this runner (a GPU test without a GPU is ``pending`` instead)."""
        return self.outcome == "pending" or (self.max_points > 0 and self.outcome != "skipped")

    @property
    def status(self) -> str:
        """One of ``STATUSES``: ``pending`` and ``not_graded`` are neither passed nor failed."""
        if self.outcome == "pending":
            return "pending"
        if not self.graded:
            return NOT_GRADED
        return "passed" if self.outcome == "passed" else "failed"


@dataclass
class GradeResult:
    submission: str
    status: str  # ok crashed timeout rejected error
    tests: list[TestResult]
    execution_time: float = 0.0
    sha256: str = ""
    fingerprint: str = ""
    device: str = "cpu"
    concepts: dict[str, str] = field(default_factory=dict)  # name -> title
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    isolation: dict = field(default_factory=dict)

    @property
    def score(self) -> float:
        return round(sum(t.points for t in self.tests), 2)

    @property
    def max_score(self) -> float:
        """The points at stake: every graded test's (pending ones included), none of a test not graded."""
        return round(sum(t.max_points for t in self.tests if t.graded), 2)

    # ------------------------------------------------------------------------------ tables
    def concept_rows(self) -> list[dict]:
        rows: dict[str, dict] = {}
        for t in self.tests:
            r = rows.setdefault(
                t.concept,
                {
                    "concept": t.concept,
                    "title": self.concepts.get(t.concept, t.concept),
                    "tests": 0,
                    **dict.fromkeys(STATUSES, 0),
                    "score": 0.0,
                    "max": 0.0,
                },
            )
            r["tests"] += 1
            r[t.status] += 1
            r["score"] += t.points
            r["max"] += t.max_points if t.graded else 0.0
        order = {c: i for i, c in enumerate(self.concepts)}  # the parts' order (the rubric's)
        return sorted(
            rows.values(), key=lambda r: (order.get(r["concept"], len(order)), r["title"])
        )

    def summary(self) -> str:
        """A Markdown table: one row per concept, then the total and every remark."""
        lines = [
            f"## {neutral.markdown(self.submission)}: {self.score:g} / {self.max_score:g} ({self.status})",
            "",
        ]
        # why nothing was graded comes first, above a table of zeros (the note stays in the notes too)
        lines += [
            f"**{neutral.markdown(n.splitlines()[0])}**"
            for n in self.notes
            if n.startswith(("rejected: ", "grader error: "))
        ]
        lines += [
            *([""] if len(lines) > 2 else []),
            "| concept | tests | passed | failed | pending | not graded | points |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in self.concept_rows():
            lines.append(
                f"| {r['title']} | {r['tests']} | "
                + " | ".join(str(r[s]) for s in STATUSES)
                + f" | {r['score']:.2f} / {r['max']:.2f} |"
            )
        lines.append(
            f"| **total** | {len(self.tests)} | "
            + " | ".join(str(sum(t.status == s for t in self.tests)) for s in STATUSES)
            + f" | **{self.score:.2f} / {self.max_score:.2f}** |"
        )
        bad: dict[str, int] = {}
        for t in self.tests:
            if t.status == "failed":
                bad[t.outcome] = bad.get(t.outcome, 0) + 1
        if bad:  # how the failed tests ended: an assert (failed), an error around it, a timeout ...
            lines += [
                "",
                "Failed tests, by how they ended: "
                + ", ".join(f"{n} {HOW_THEY_ENDED.get(k, k)}" for k, n in sorted(bad.items())),
            ]
        unused = [t for t in self.tests if t.status == NOT_GRADED]
        if unused:
            zero = sum(t.max_points == 0 for t in unused)
            lines += [
                "",
                f"Not graded: {len(unused)} tests ("
                + ", ".join(
                    x
                    for x in (
                        f"{zero} worth no points in the rubric" if zero else "",
                        f"{len(unused) - zero} skipped on this runner"
                        if len(unused) > zero
                        else "",
                    )
                    if x
                )
                + "); they count neither as passed nor as failed.",
            ]
        for title, items in (("Ignored from the submission", self.ignored), ("Notes", self.notes)):
            if items:
                # a submission's text (the names it uploaded, what it raised): inert in Markdown and HTML
                lines += ["", f"{title}:"] + [
                    f"- {neutral.markdown(x.splitlines()[0] if x else x)}" for x in items[:50]
                ]
        if self.isolation:
            lines += [
                "",
                "Isolation: "
                + "; ".join(f"{k}: {neutral.markdown(str(v))}" for k, v in self.isolation.items()),
            ]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------------------ Gradescope
    def to_gradescope(self) -> dict:
        return {
            "score": self.score,
            "execution_time": round(self.execution_time),
            "output": self.summary(),
            "output_format": "md",
            "test_output_format": "text",
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [
                {
                    "name": t.nodeid,
                    "score": round(t.points, 6),
                    "max_score": round(t.max_points, 6),
                    "status": t.status,
                    # what the submission printed or raised: plain text (test_output_format), no controls
                    "output": neutral.controls(_truncate(t.output, OUTPUT_CHARS)),
                    "visibility": t.visibility,
                    "tags": [t.concept],
                    "extra_data": {
                        "outcome": t.outcome,
                        "device": t.device,
                        "duration": round(t.duration, 4),
                    },
                }
                for t in self.tests
            ],
            "extra_data": {
                "submission": self.submission,
                "status": self.status,
                "max_score": self.max_score,
                "sha256": self.sha256,
                "fingerprint": self.fingerprint,
                "device": self.device,
                "concepts": self.concepts,
                "ignored": self.ignored,
                "notes": self.notes,
                "isolation": self.isolation,
            },
        }

    @classmethod
    def from_gradescope(cls, data: dict) -> GradeResult:
        x = data.get("extra_data", {})
        tests = []
        for t in data["tests"]:
            e = t.get("extra_data", {})
            outcome = e.get("outcome", t.get("status", "failed"))
            tests.append(
                TestResult(
                    nodeid=t["name"],
                    outcome=outcome,
                    points=float(t["score"]) if outcome == "passed" else 0.0,
                    max_points=float(t["max_score"]),
                    concept=(t.get("tags") or ["?"])[0],
                    visibility=t.get("visibility", "visible"),
                    device=e.get("device", "cpu"),
                    output=t.get("output", ""),
                    duration=float(e.get("duration", 0.0)),
                )
            )
        return cls(
            submission=x.get("submission", "?"),
            status=x.get("status", "ok"),
            tests=tests,
            execution_time=float(data.get("execution_time", 0)),
            sha256=x.get("sha256", ""),
            fingerprint=x.get("fingerprint", ""),
            device=x.get("device", "cpu"),
            concepts=x.get("concepts", {}),
            ignored=x.get("ignored", []),
            notes=x.get("notes", []),
            isolation=x.get("isolation", {}),
        )

    # ------------------------------------------------------------------------------ JUnit
    def to_junit(self) -> bytes:
        suites = ET.Element("testsuites")
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=self.submission,
            tests=str(len(self.tests)),
            failures=str(sum(t.status == "failed" and t.outcome == "failed" for t in self.tests)),
            errors=str(sum(t.status == "failed" and t.outcome != "failed" for t in self.tests)),
            skipped=str(sum(t.status in ("pending", NOT_GRADED) for t in self.tests)),
            time=f"{self.execution_time:.3f}",
        )
        for t in self.tests:
            path, _, name = t.nodeid.partition("::")
            case = ET.SubElement(
                suite,
                "testcase",
                classname=path.removesuffix(".py").replace("/", "."),
                name=name or path,
                time=f"{t.duration:.3f}",
            )
            text = _xml_safe(neutral.controls(_truncate(t.output, OUTPUT_CHARS)))
            if t.status == NOT_GRADED:
                ET.SubElement(
                    case,
                    "skipped",
                    message=_xml_safe(neutral.line(f"not graded: {t.output[:200]}")),
                )
            elif t.outcome == "failed":
                ET.SubElement(
                    case,
                    "failure",
                    message=_xml_safe(
                        neutral.line(t.output.splitlines()[-1][:200] if t.output else "failed")
                    ),
                ).text = text
            elif t.outcome in ("error", "timeout", "crashed", "not_run"):
                ET.SubElement(case, "error", message=t.outcome).text = text
            elif t.outcome in ("skipped", "pending"):
                ET.SubElement(
                    case,
                    "skipped",
                    message=_xml_safe(neutral.line(f"{t.outcome}: {t.output[:200]}")),
                )
        ET.indent(suites)
        return ET.tostring(suites, encoding="utf-8", xml_declaration=True)

    # ------------------------------------------------------------------------------ files
    def write(self, folder: Path) -> None:
        """Write junit.xml, summary.md, then results.json last (its presence means "finished")."""
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / "junit.xml", self.to_junit())
        # any text (a name that is not UTF-8, say) is written escaped, never refused: every upload gets a result
        _atomic_write(folder / "summary.md", self.summary().encode("utf-8", "backslashreplace"))
        _atomic_write(
            folder / "results.json",
            json.dumps(self.to_gradescope(), indent=1).encode("utf-8", "backslashreplace"),
        )


def load(folder: Path) -> GradeResult:
    return GradeResult.from_gradescope(json.loads((folder / "results.json").read_text()))


def write_gradebook(out: Path) -> Path:
    """``out/gradebook.csv`` from every ``out/*/results.json`` (one row per submission)."""
    results = []
    for d in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        if (d / "results.json").is_file():
            try:
                results.append((d.name, load(d)))
            except (ValueError, KeyError, OSError):
                continue
    # the parts' columns in the parts' order (``concepts`` lists them as the rubric does), then any other
    seen = {t.concept for _, r in results for t in r.tests}
    concepts = [c for c in dict.fromkeys(c for _, r in results for c in r.concepts) if c in seen]
    concepts += sorted(seen - set(concepts))
    path = out / "gradebook.csv"
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "submission",
                "status",
                "score",
                "max_score",
                "percent",
                *concepts,
                "pending",
                "execution_time",
                "sha256",
                "remarks",
            ]
        )
        for name, r in results:
            per = {row["concept"]: row["score"] for row in r.concept_rows()}
            pct = 100 * r.score / r.max_score if r.max_score else 0.0
            remarks = _remarks(name, r.notes)
            w.writerow(
                [  # a name or a remark may be a submission's text: no cell a spreadsheet runs
                    neutral.cell(name),
                    neutral.cell(r.status),
                    f"{r.score:.4g}",
                    f"{r.max_score:.4g}",
                    f"{pct:.1f}",
                    *(f"{per.get(c, 0.0):.4g}" for c in concepts),
                    sum(t.outcome == "pending" for t in r.tests),
                    f"{r.execution_time:.1f}",
                    r.sha256[:12],
                    neutral.cell(remarks),
                ]
            )
    os.replace(tmp, path)
    return path


def _remarks(name: str, notes: list[str], limit: int = REMARKS_CHARS) -> str:
    """A gradebook row's remarks: the first line of each note, whole, those about the grade first (a
    rejection, a rule) and the speed tests' replay seeds last, as many as fit in ``limit`` characters;
    then how many more there are, and where (a note is never cut mid-sentence without saying so)."""
    lines = sorted(
        (n.splitlines()[0] for n in notes if n and n.strip()),
        key=lambda n: n.startswith("the speed tests' "),
    )
    shown: list[str] = []
    for note in lines:
        if len("; ".join([*shown, note])) <= limit:
            shown.append(note)
    if lines and not shown:  # one long note: its start, marked as cut
        shown.append(f"{lines[0][: limit // 2].rstrip()} [...] (whole in {name}/summary.md)")
    if len(lines) > len(shown):
        shown.append(f"{len(lines) - len(shown)} more in {name}/summary.md")
    return "; ".join(shown)


def _truncate(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    head = n // 3
    return text[:head] + f"\n[... {len(text) - n} characters cut ...]\n" + text[-(n - head) :]


def _xml_safe(text: str) -> str:
    return "".join(
        c if c in "\t\n\r" or 0x20 <= ord(c) < 0xD800 or 0xE000 <= ord(c) < 0xFFFE else "?"
        for c in text
    )


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
