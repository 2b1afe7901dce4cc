"""After a test run, a summary of your public progress per part, with points (a pytest plugin).

The graders' points come from the course rubric: each part is worth a number of points, shared by
its tests (public and hidden). This plugin shows what the public tests you just ran say, part by
part, as the very last thing ``uv run pytest`` prints (after pytest's own summary)::

    ======================= public progress by part (points) =======================
    part                                           passed  failed  skipped   points
    1. Tensors: storage, strides, views, einops     52/52       0        0  10.0/10
    ...

A part's points here are its rubric points times the (weighted) share of its public tests that
passed, among those that ran: skipped tests (GPU tests on a machine without one) are left out,
since staff grade them on GPU runners. As in grading, a test that passed but reached code that
breaks the assignment's rules (the ``RULE`` lines above the table, tests/rules.py) earns nothing
here. A part whose public test files did not all run (``uv run pytest tests/test_bpe_train.py``,
``-k flop``) shows ``partial`` instead of points, and a line under the table says how many of its
tests ran and which files did not. This is an estimate: your grade also counts the hidden
tests (other seeds, shapes and dtypes) and, separately, the written problems of assignment.pdf.

Where the points come from: ``tests/points.json``, generated from the course rubric (never edit
it by hand). Only public tests (``tests/test_*.py``) are counted; any other tests that ran (the
staff have more) are counted in one line under the table, not scored.
When tests reach functions you have not written yet (``tests/not_written.py``), a line under the
table says where to start: the first part, in the handout's order, whose tests reach one. Test
files run in that order too (``handout_order``, called from ``tests/conftest.py``).
A public test file that cannot be collected (a syntax error, a failed import) is listed under the
table and its part scores nothing, since none of its tests ran. Nothing is printed when no public
test ran or failed to collect, or with ``--collect-only``; ``-p no:cs336_progress`` turns the
summary off.
"""

from __future__ import annotations

import fnmatch
import json
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.not_written import NOT_WRITTEN

POINTS_FILE = "tests/points.json"
RUBRIC_FILE = "rubric.toml"
PUBLIC_PREFIX = "tests/test_"


def points_from_rubric(rubric: dict) -> dict:
    """What the summary needs from a parsed rubric: parts in order, and the rules that score tests.

    ``{"parts": [{"key", "title", "points"}, ...], "rules": [{"match": [...], "concept"?, "weight"?,
    "points"?}, ...]}``, rules in the rubric's order (later ones override earlier ones, as in
    grading). Visibility-only rules are dropped: they change no points. So are patterns that can
    match no public test (``_may_match_public``): the summary counts public tests only, and the
    handout names no test it does not ship.
    """
    parts = [
        {"key": key, "title": spec.get("title", key), "points": spec.get("points")}
        for key, spec in rubric.get("concepts", {}).items()
    ]
    rules = []
    for rule in rubric.get("rules", []):
        kept = {k: rule[k] for k in ("concept", "weight", "points") if k in rule}
        match = [rule["match"]] if isinstance(rule["match"], str) else list(rule["match"])
        match = [m for m in match if _may_match_public(m)]
        if kept and match:
            rules.append({"match": match, **kept})
    return {"parts": parts, "rules": rules}


def _may_match_public(pattern: str) -> bool:
    """Whether ``pattern`` can match a public test (``tests/test_*.py``, nothing in a subfolder of
    ``tests/``): not when its file part spells out a subfolder before any ``*``."""
    path = pattern.partition("::")[0]
    return "/" not in path.removeprefix("tests/").split("*")[0]


def load_points(root: Path) -> dict | None:
    """The points data of the tree at ``root``: the generated file, else the rubric, else None."""
    generated, rubric = root / POINTS_FILE, root / RUBRIC_FILE
    if generated.is_file():
        return json.loads(generated.read_text(encoding="utf-8"))
    if rubric.is_file():
        return points_from_rubric(tomllib.loads(rubric.read_text(encoding="utf-8")))
    return None


def score(nodeid: str, rules: list[dict]) -> dict:
    """The concept, weight and fixed points the rules give ``nodeid`` (the grader's resolution)."""
    out: dict = {}
    for rule in rules:
        if any(fnmatch.fnmatchcase(nodeid, p) for p in rule["match"]):
            out.update({k: v for k, v in rule.items() if k != "match"})
    return out


def handout_order(items: list[pytest.Item], data: dict) -> None:
    """Sort ``items`` in place so that, within each folder, test files run in the handout's order of
    parts (the parts' order in ``data``); a file of no part comes after them. Folders keep their
    order (grading runs the hidden tests apart from the visible ones), and so do the tests of a file
    and the files of one part."""
    order = {p["key"]: i for i, p in enumerate(data["parts"])}
    folders: dict[str, int] = {}
    files: dict[str, tuple[int, int, int]] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        if path not in files:
            folder = folders.setdefault(path.rpartition("/")[0], len(folders))
            concept = score(f"{path}::*", data["rules"]).get("concept")
            files[path] = (folder, order.get(concept, len(order)), len(files))

    def key(item: pytest.Item) -> tuple[int, int, int]:
        return files[item.nodeid.split("::")[0]]

    items.sort(key=key)


@dataclass
class Row:
    """One part's public tests in this run."""

    title: str
    points: float | None
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> passed | failed | skipped
    weights: dict[str, float] = field(default_factory=dict)
    # tests worth fixed points, outside the budget
    fixed: dict[str, float] = field(default_factory=dict)
    # its public test files that failed to collect
    uncollected: list[str] = field(default_factory=list)
    # the first "not written yet" line of its tests, and how many tests reached a function not written
    not_written: str = ""
    stubs: int = 0
    # tests that passed but reached a rule break (no points, as in grading); tests deselected (-k, -m);
    # its public test files of which nothing ran
    rule_breaks: int = 0
    deselected: int = 0
    not_run: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return bool(self.deselected or self.not_run)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def earned(self) -> tuple[float, float] | None:
        """(points earned, points at stake) over the tests that ran; None if none ran."""
        ran = [n for n, o in self.outcomes.items() if o != "skipped"]
        if not ran:
            return None
        budget = [n for n in ran if n not in self.fixed]
        total_w = sum(self.weights[n] for n in budget)
        passed_w = sum(self.weights[n] for n in budget if self.outcomes[n] == "passed")
        stake = (self.points or 0.0) if budget else 0.0
        if self.points is None:  # no budget: one point per unit of weight, as in grading
            stake = total_w
        earned = stake * passed_w / total_w if total_w else 0.0
        earned += sum(
            self.fixed[n] for n in ran if n in self.fixed and self.outcomes[n] == "passed"
        )
        stake += sum(self.fixed[n] for n in ran if n in self.fixed)
        return earned, stake


class Progress:
    """Collects the outcome of every public test and prints the per-part table at the end."""

    def __init__(self, data: dict, root: Path | None = None) -> None:
        self.data = data
        self.root = root  # where tests/test_*.py are: a part whose files did not all run is partial
        self.deselected: set[str] = set()  # public tests -k / -m left out
        self.picked: set[str] = (
            set()
        )  # files of which the command line named single tests (FILE::test)
        self.outcomes: dict[str, str] = {}
        self.stubs: dict[str, str] = {}  # nodeid -> the "Implement ..." of the stub it reached
        self.others: set[str] = set()
        self.uncollected: list[str] = []  # public test files that failed to collect
        # set once pytest's summary ran; the table comes after it
        self.exitstatus: int | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        if not nodeid.startswith(PUBLIC_PREFIX):
            self.others.add(nodeid)
            return
        if report.failed:
            self.outcomes[nodeid] = "failed"
            text = str(report.longrepr)
            if text.startswith(NOT_WRITTEN):
                self.stubs.setdefault(nodeid, text.removeprefix(NOT_WRITTEN))
        elif report.skipped and self.outcomes.get(nodeid) != "failed":
            self.outcomes[nodeid] = "skipped"
        elif report.when == "call" and report.passed and nodeid not in self.outcomes:
            self.outcomes[nodeid] = "passed"

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for arg in session.config.args:
            path, sep, _ = str(arg).partition("::")
            if sep and self.root is not None:
                try:
                    self.picked.add(
                        Path(path).resolve().relative_to(self.root.resolve()).as_posix()
                    )
                except ValueError:
                    continue

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected.update(i.nodeid for i in items if i.nodeid.startswith(PUBLIC_PREFIX))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid.startswith(PUBLIC_PREFIX):
            self.uncollected.append(report.nodeid.split("::")[0])

    def rows(self, lost: dict[str, list[str]] | None = None) -> tuple[list[Row], list[str]]:
        """The parts with public tests in this run, in the rubric's order; and unscored tests.
        ``lost``: the tests whose points the rules take (``rules.LocalWarning.lost``)."""
        rows = {p["key"]: Row(p["title"], p["points"]) for p in self.data["parts"]}
        unscored = []
        for nodeid, outcome in self.outcomes.items():
            s = score(nodeid, self.data["rules"])
            row = rows.get(s.get("concept"))
            if row is None:
                unscored.append(nodeid)
                continue
            if outcome == "passed" and nodeid in (lost or {}):
                outcome = "failed"  # as grading has it: no points, the RULE lines say why
                row.rule_breaks += 1
            row.outcomes[nodeid] = outcome
            if nodeid in self.stubs:
                row.stubs += 1
                row.not_written = row.not_written or self.stubs[nodeid]
            row.weights[nodeid] = float(s.get("weight", 1.0))
            if "points" in s:
                row.fixed[nodeid] = float(s["points"])
        for (
            path
        ) in self.uncollected:  # nothing of it ran: the part's points are all at stake, none earned
            row = rows.get(score(f"{path}::*", self.data["rules"]).get("concept"))
            if row is not None:
                row.uncollected.append(path)
        seen = {n.split("::")[0] for n in [*self.outcomes, *self.deselected]} | set(
            self.uncollected
        )
        for nodeid in self.deselected:
            row = rows.get(score(nodeid, self.data["rules"]).get("concept"))
            if row is not None:
                row.deselected += 1
        for path in self.public_files():
            row = rows.get(score(f"{path}::*", self.data["rules"]).get("concept"))
            if row is not None and path not in seen:
                row.not_run.append(path)
            elif row is not None and path in self.picked:
                row.not_run.append(f"{path} (only the tests named)")
        shown = [r for r in rows.values() if r.outcomes or r.uncollected]
        return shown, unscored

    def public_files(self) -> list[str]:
        """The public test files (``tests/test_*.py``) of the tree, as node ids name them."""
        if self.root is None:
            return []
        return sorted(
            p.relative_to(self.root).as_posix() for p in (self.root / "tests").glob("test_*.py")
        )

    def lost(self, config: pytest.Config) -> dict[str, list[str]]:
        """The public tests that passed whose points the rules take (tests/rules.py decides, from the
        adapters each test called), as grading would."""
        rules = config.pluginmanager.get_plugin("cs336_rules")
        if rules is None or not hasattr(rules, "lost"):
            return {}
        passed = {
            n: score(n, self.data["rules"]).get("concept")
            for n, o in self.outcomes.items()
            if o == "passed"
        }
        return rules.lost(passed, [p["key"] for p in self.data["parts"]])

    def pytest_terminal_summary(self, exitstatus: int) -> None:
        self.exitstatus = exitstatus

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Print the table after everything pytest prints (its short summary and final counts)."""
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is None or self.exitstatus is None or config.option.collectonly:
            return
        rows, unscored = self.rows(self.lost(config))
        if not rows:
            return
        width = max(len("part"), *(len(r.title) for r in rows))
        tr.write_sep("=", "public progress by part (points)")
        tr.write_line(
            f"{'part':<{width}}  {'passed':>9}  {'failed':>6}  {'skipped':>7}  {'points':>11}"
        )
        earned_total = stake_total = 0.0
        for r in rows:
            n = len(r.outcomes)
            got = r.earned()
            if r.uncollected:
                got = (0.0, float(r.points or 0))
            if got is None:
                pts = "-"
            elif r.partial and not r.uncollected:  # its points would say more than this run knows
                pts = "partial"
            else:
                earned_total, stake_total = earned_total + got[0], stake_total + got[1]
                pts = f"{got[0]:.1f}/{got[1]:g}"
            line = f"{r.title:<{width}}  {r.count('passed'):>4}/{n:<4}  {r.count('failed'):>6}  {r.count('skipped'):>7}  {pts:>11}"
            tr.write_line(
                line,
                green=got is not None and got[0] == got[1] > 0 and not r.partial,
                red=r.count("failed") > 0 or bool(r.uncollected),
            )
        total = f"{earned_total:.1f}/{stake_total:g}"
        if any(r.partial and not r.uncollected for r in rows):  # the parts that ran whole, if any
            total = f"{total} +partial" if stake_total else "partial"
        tr.write_line(f"{'total':<{width}}  {'':>9}  {'':>6}  {'':>7}  {total:>11}")
        parts = len(self.data["parts"])
        notes = []
        start = next((r for r in rows if r.stubs), None)
        if start is not None:
            # a run of some parts only knows about those: an earlier part may be unwritten too
            among = "" if len(rows) == parts else ", among the parts this run tested,"
            notes.append(
                f"Where to start: {start.title} (the first part in the handout's order{among} with "
                f"functions not written yet: {start.stubs} of its tests reach one, e.g. "
                f"{start.not_written})."
            )
        for r in rows:
            if r.partial and not r.uncollected:
                ran = len(r.outcomes)
                what = (
                    f"{ran} of {ran + r.deselected} tests ran"
                    if r.deselected
                    else f"{ran} tests ran"
                )

                if r.not_run:
                    what += f"; {', '.join(r.not_run)} did not run"
                notes.append(
                    f"{r.title}: partial: {what}. Run all of its tests for its points (and for the "
                    "total): `uv run pytest` with no -k, or with every file of the part."
                )
        breaks = sum(r.rule_breaks for r in rows)
        if breaks:
            notes.append(
                f"{breaks} tests passed but earn no points here, as in grading: they reach code that "
                "breaks the assignment's rules (the RULE lines above)."
            )
        if self.uncollected:
            notes.append(
                f"Could not be collected (see the errors above), so their parts score 0 here: "
                f"{', '.join(self.uncollected)}."
            )
        if len(rows) < parts:
            notes.append(f"{parts - len(rows)} of {parts} parts had no public test in this run.")
        notes.append(
            "Points: each part's rubric points times the share of its public tests that passed, among "
            "those that ran; skipped tests (GPU tests without a GPU) are graded on staff GPU runners. "
            "Your grade also counts hidden tests, and the written problems of assignment.pdf."
        )
        if self.others:
            notes.append(
                f"Not counted above: {len(self.others)} other tests (only tests/test_*.py are public)."
            )
        if unscored:
            notes.append(
                f"{len(unscored)} public tests belong to no part of the rubric, e.g. {unscored[0]}."
            )
        for note in notes:
            for line in textwrap.wrap(note, width=100):
                tr.write_line(line)


def register(config: pytest.Config) -> None:
    """Register the summary (called from ``tests/conftest.py``) if points data is found."""
    data = load_points(Path(str(config.rootpath)))
    if data is not None and not config.pluginmanager.has_plugin("cs336_progress"):
        config.pluginmanager.register(Progress(data, Path(str(config.rootpath))), "cs336_progress")
