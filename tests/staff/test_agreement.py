"""`cs336 audit --agreement` on the tiny staff repository, and the implementations it builds here.

One light warm server (the tiny repository needs no torch) runs an implementation that agrees,
one right only on the speed test's inputs of the pinned seed, one whose ``add`` answers otherwise
inside the grading worker (every test of ``add`` must be listed, with both outcomes and the split
run's message), the same as a mutant of ``add`` (run on the tests that enter ``add`` alone, as the
reference's profiled run measures them), and one that hangs (a problem, stopped at the timeout,
its worker with it). The
split runs use ``--split-insecure``: the same judge and crossing, without
bubblewrap, so the check runs wherever the staff tests do. The comparison itself and the list of
implementations of this repository (the zoo, garbage and the corpus), which tests each runs and
which share a tree (``agreement_plan.py``) are checked without a run; the probe that measures what
each test enters, on a tiny tree of its own.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from cs336_assignment.cli import CommandError
from cs336_staff.audit import agreement, agreement_plan, part_reach
from cs336_staff.audit import cli as audit
from cs336_staff.audit.agreement import Implementation, check, compare, implementations
from cs336_staff.audit.agreement_plan import narrowed, plan
from cs336_staff.grade.testing import ADAPTERS, calc_with, make_staff_repo
from cs336_staff.session.runner import Outcome, PytestRun
from cs336_staff.session.warm import WarmPool

pytestmark = [pytest.mark.staff, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
CALC = "cs336_assignment/calc.py"
PUBLIC = ("tests/test_calc.py",)
ADD_TESTS = [
    "tests/test_calc.py::test_add_matches_python[1-2]",
    "tests/test_calc.py::test_add_matches_python[3-4]",
]
#: ``add`` that is right in the student's own process and off by one in the grading worker (which
#: imports its own package, ``cs336_worker``): the kind of submission the check exists to find.
WORKER_ONLY_BUG = "return a + b + ('cs336_worker' in __import__('sys').modules)"
#: The speed tests' seed in both runs, and ``sum_below`` right on the inputs the tiny repository's speed
#: test draws from it (``testing.PUBLIC_TESTS``) and wrong on any other: it passes only where both runs draw them.
SPEED_SEED = 336
_DRAWN = random.Random(SPEED_SEED)
ONLY_THE_SEEDS_INPUTS = f"return n * (n - 1) // 2 if n in {sorted(3_000_000 + _DRAWN.randrange(1_000_000) for _ in range(3))} else -1"
#: The hanging implementation's timeout: long enough to start, short enough to wait for.
HANG_SECONDS = 5.0
#: ``mul`` that never returns: asleep, so that its wait takes no core from the runs checked meanwhile.
HANG = "import time\n    while True:\n        time.sleep(1)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The verdicts of three implementations of the tiny repository, and the report's lines."""
    repo = make_staff_repo(tmp_path_factory.mktemp("agreement") / "repo")
    found = [
        Implementation("reference", "reference", "calc", PUBLIC),
        Implementation(
            "corpus", "seeded", "calc", PUBLIC, {CALC: calc_with(sum_below=ONLY_THE_SEEDS_INPUTS)}
        ),
        Implementation(
            "corpus", "worker-only-bug", "calc", PUBLIC, {CALC: calc_with(add=WORKER_ONLY_BUG)}
        ),
        Implementation(
            "mutant",
            "calc/add-off-in-the-worker",
            "calc",
            PUBLIC,
            {CALC: calc_with(add=WORKER_ONLY_BUG)},
            focus=(f"{CALC}::add",),
            narrow=True,
        ),
        Implementation(
            "mutant",
            "calc/mul-unchanged",
            "calc",
            PUBLIC,
            {CALC: calc_with(mul="return a * b")},
            focus=(f"{CALC}::mul",),
            narrow=True,
        ),
    ]
    hang = Implementation("corpus", "hangs", "calc", PUBLIC, {CALC: calc_with(mul=HANG)})
    lines: list[str] = []
    with WarmPool(light=True) as pool, ThreadPoolExecutor(1) as beside:
        # the hanging one mostly waits for its timeout: checked meanwhile, its lines kept apart
        hanging = beside.submit(
            check, repo, [hang], jobs=1, timeout=HANG_SECONDS, insecure=True, echo=print, pool=pool
        )
        verdicts = check(
            repo, found, jobs=2, insecure=True, speed_seed=SPEED_SEED, echo=lines.append, pool=pool
        )
        (hung,) = hanging.result()
    return {v.implementation.name: v for v in [*verdicts, hung]}, lines, repo


def test_an_implementation_that_behaves_alike_in_both_runs_agrees(runs):
    """The tiny repository's own implementation: every public test ends the same (a GPU test skips in both)."""
    verdicts, lines, _ = runs
    reference = verdicts["reference"]
    assert reference.status == "agrees" and reference.ok, "\n".join(lines)
    assert reference.tally == "8 tests: 7 passed, 1 skipped", reference.tally
    assert lines[0].startswith("[1/5] reference  AGREES  8 tests: 7 passed, 1 skipped"), lines[0]


def test_both_runs_draw_the_speed_tests_inputs_from_one_seed(runs):
    """A ``sum_below`` right only on the inputs ``SPEED_SEED`` draws passes the speed test in both runs."""
    verdicts, lines, _ = runs
    seeded = verdicts["seeded"]
    assert seeded.status == "agrees" and seeded.tally == "8 tests: 7 passed, 1 skipped", "\n".join(
        lines
    )


def test_an_implementation_that_differs_split_is_reported_test_by_test(runs):
    """Every test whose outcome differs is listed with both outcomes and the first line of the failure."""
    verdicts, lines, _ = runs
    differs = verdicts["worker-only-bug"]
    assert differs.status == "differs" and not differs.ok
    got = [(d.nodeid, d.one, d.split, d.one_message, d.split_message) for d in differs.differences]
    assert got == [
        (ADD_TESTS[0], "passed", "failed", "", "AssertionError: assert 4 == (1 + 2)"),
        (ADD_TESTS[1], "passed", "failed", "", "AssertionError: assert 8 == (3 + 4)"),
    ]
    report = lines[2]
    assert report.startswith("[3/5] corpus worker-only-bug  DIFFERS"), report
    assert "2 tests end otherwise split than in one process:" in report
    for nodeid in ADD_TESTS:
        assert (
            f"      {nodeid}\n          one process  passed\n          split        failed: AssertionError: assert"
            in report
        )


def test_a_mutant_runs_only_the_tests_that_enter_its_function(runs):
    """A mutant of ``add`` runs the two tests that call it (measured on the reference), and its
    differences are the same as on the whole file."""
    verdicts, lines, _ = runs
    mutant = verdicts["calc/add-off-in-the-worker"]
    assert mutant.implementation.tests == tuple(ADD_TESTS), mutant.implementation.tests
    assert mutant.tally == "2 tests: 2 passed", "\n".join(lines)
    assert [(d.nodeid, d.one, d.split) for d in mutant.differences] == [
        (n, "passed", "failed") for n in ADD_TESTS
    ]


def test_a_mutant_that_its_narrowed_tests_all_pass_is_run_on_all_of_them(runs):
    """A mutant no test it was narrowed to fails (here: no bug at all) is run again alone on every
    candidate test: what catches a zoo mutant may have entered its function unseen."""
    verdicts, lines, _ = runs
    unchanged = verdicts["calc/mul-unchanged"]
    assert unchanged.status == "agrees" and unchanged.tally == "8 tests: 7 passed, 1 skipped", (
        "\n".join(lines)
    )
    assert unchanged.note.startswith(
        f"all 1 tests that enter {CALC}::mul passed: run alone on all"
    ), unchanged.note


def test_a_run_that_hangs_is_stopped_at_its_timeout_and_leaves_no_worker_running(runs):
    """Both runs of an implementation that hangs stop at the timeout and make it a problem (the check
    fails); the split run's judge stops itself first, ending its worker (which, without bubblewrap,
    would outlive a judge killed from outside), so no process of the run is left."""
    verdicts, _, repo = runs
    hung = verdicts["hangs"]
    assert hung.status == "problem" and not hung.ok
    for mode in ("one process", "split"):
        assert any(
            p.startswith(f"{mode}: stopped at its timeout ({HANG_SECONDS:.0f} s)")
            for p in hung.problems
        ), hung.problems
    assert not any("outlived" in p for p in hung.problems), hung.problems
    running = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    assert not [c for c in running if str(repo) in c], (
        "a worker of the tiny repository is still running"
    )


def test_the_check_leaves_the_repository_as_it_was(runs):
    """The implementations are laid over scratch copies: the staff repository's own code is untouched."""
    _, _, repo = runs
    assert "cs336_worker" not in (repo / CALC).read_text()


MUL_TEST = "tests/test_calc.py::test_mul_matches_python"
SCALE_TEST = "tests/test_calc.py::test_scale_file_reads_fixture"
#: A neighbour in a shared tree that leaves state in the process (a flag in its environment, as the
#: garbage module's pinned flavour once did), and an ``add`` that is off by one in the grading worker
#: only where that flag is set: it differs in a tree with the neighbour and agrees alone.
NEIGHBOUR_INIT = "import os\n\nos.environ['CS336_TINY_NEIGHBOUR'] = '1'\n"
OFF_BESIDE_THE_NEIGHBOUR = (
    "return a + b + ('CS336_TINY_NEIGHBOUR' in __import__('os').environ "
    "and 'cs336_worker' in __import__('sys').modules)"
)
#: ``run_mul`` off by one in the grading worker, neighbour or not.
WORKER_ONLY_MUL = ADAPTERS.replace(
    "return calc.mul(a, b)",
    "return calc.mul(a, b) + ('cs336_worker' in __import__('sys').modules)",
)


@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory):
    """One tree of three members, each changing its own file, run as the check runs a shared tree
    (``Runner.check``): the neighbour, an ``add`` that only the neighbour's presence breaks in the
    worker, and a ``run_mul`` off in the worker anyway."""
    base = tmp_path_factory.mktemp("shared")
    repo = make_staff_repo(base / "repo")
    members = [
        Implementation(
            "corpus",
            "off-beside-the-neighbour",
            "calc",
            tuple(ADD_TESTS),
            {CALC: calc_with(add=OFF_BESIDE_THE_NEIGHBOUR)},
        ),
        Implementation(
            "corpus", "mul-off-in-the-worker", "calc", (MUL_TEST,), {"adapters.py": WORKER_ONLY_MUL}
        ),
        Implementation(
            "corpus",
            "neighbour",
            "calc",
            (SCALE_TEST,),
            {"cs336_assignment/__init__.py": NEIGHBOUR_INIT},
        ),
    ]
    with WarmPool(light=True) as pool:
        runner = agreement.Runner(
            repo, pool, base / "runs", 1, insecure=True, speed_seed=SPEED_SEED
        )
        verdicts = runner.check(members, [*ADD_TESTS, MUL_TEST, SCALE_TEST])
    return {v.implementation.name: v for v in verdicts}


def test_a_member_that_differs_only_in_a_shared_tree_is_run_alone_and_counted_so(shared_runs):
    """Its verdict is the alone run's (agrees), saying it differed in the tree, with the tree's
    differences listed under it; the summary names it; the neighbour's own verdict is the tree's."""
    beside, neighbour = shared_runs["off-beside-the-neighbour"], shared_runs["neighbour"]
    assert beside.status == "agrees" and beside.ok and beside.shared == 1, beside.render(1, 1)
    assert beside.tally == "2 tests: 2 passed", beside.tally
    assert beside.note == "differed in a tree of 3 (2 tests, below), agrees alone", beside.note
    assert [(d.nodeid, d.one, d.split) for d in beside.tree_differences] == [
        (n, "passed", "failed") for n in ADD_TESTS
    ]
    report = beside.render(1, 1)
    assert "2 tests ended otherwise split than in one process in the shared tree:" in report
    assert (
        f"      {ADD_TESTS[0]}\n          one process  passed\n          split        failed"
        in report
    )
    assert neighbour.status == "agrees" and neighbour.shared == 3 and not neighbour.note
    assert agreement.findings([beside, neighbour]) == [
        "audit --agreement: differed in a shared tree and agree alone (counted as alone; the "
        "tree's differences are listed with each): corpus off-beside-the-neighbour"
    ]


def test_a_member_that_differs_alone_too_is_counted_as_differing(shared_runs):
    """Run alone again, it differs again: the difference counts, and the verdict says both."""
    mul = shared_runs["mul-off-in-the-worker"]
    assert mul.status == "differs" and not mul.ok, mul.render(1, 1)
    assert mul.note == "differed in a tree of 3 (1 tests, below), differs alone", mul.note
    assert [(d.nodeid, d.one, d.split) for d in mul.differences] == [(MUL_TEST, "passed", "failed")]
    assert agreement.findings([mul, shared_runs["neighbour"]]) == [
        "audit --agreement: differs: corpus mul-off-in-the-worker"
    ]


def _run(
    outcomes: dict[str, tuple[str, str]], collected: list[str] | None = None, errors=()
) -> PytestRun:
    tests = {n: Outcome(n, o, message=m) for n, (o, m) in outcomes.items()}
    return PytestRun(
        0, collected if collected is not None else list(outcomes), list(errors), [], tests, ""
    )


def test_compare_lists_outcome_changes_tests_not_run_and_modules_that_did_not_collect():
    """Same outcomes agree whatever the messages; another outcome, a test one run never finished and a
    module one run could not collect each differ."""
    one = _run(
        {
            "t::a": ("passed", ""),
            "t::b": ("failed", "AssertionError: x"),
            "t::c": ("passed", ""),
            "t::d": ("skipped", "no GPU"),
        }
    )
    split = _run(
        {
            "t::a": ("passed", ""),
            "t::b": ("failed", "AssertionError: y"),
            "t::d": ("skipped", "no GPU"),
            "t::e": ("passed", ""),
        },
        collected=["t::a", "t::b", "t::c", "t::d", "t::e"],
        errors=[{"nodeid": "u.py", "message": "Traceback\nImportError: no module"}],
    )
    got = {d.nodeid: (d.one, d.split, d.split_message) for d in compare(one, split)}
    assert got == {
        "t::c": ("passed", agreement.NOT_RUN, ""),
        "t::e": (agreement.NOT_RUN, "passed", ""),
        "u.py": (agreement.NOT_RUN, "collection error", "ImportError: no module"),
    }


def test_this_repositorys_implementations_of_a_part():
    """``--only tensors``: the reference on the part's tests, the corpus entries that touch it, every mutant
    (each applies) and both garbage flavours of every graded target, with the garbage inside the package."""
    found = implementations(REPO, ["tensors"])
    kinds = [i.kind for i in found]
    assert kinds[0] == "reference" and found[0].tests == ("tests/test_tensors.py",)
    assert (
        kinds.count("corpus") >= 2 and kinds.count("mutant") >= 20 and kinds.count("garbage") >= 20
    )
    assert not [i.label for i in found if i.problem]
    garbage = [i for i in found if i.kind == "garbage"]
    modules = {
        i.label: [rel for rel in i.files if "/cs336_garbage_" in rel] for i in garbage
    }  # each its own copy, inside the package: no state shared with a neighbour in a tree
    assert all(len(m) == 1 and m[0].startswith("cs336_assignment/") for m in modules.values())
    assert len({m[0] for m in modules.values()}) == len(garbage), modules
    for i in garbage[:2]:
        flavour = i.name.split()[0]  # "zeros tensors/attention_scores"
        (module,) = modules[i.label]
        assert f"\nPINNED = {flavour!r}\n" in i.files[module], (
            "the worker gets no environment, and a neighbour may be the other flavour: pin it"
        )
        name = module.removesuffix(".py").replace("/", ".")
        assert any(f"import {name} as" in text for rel, text in i.files.items() if rel != module)
    with pytest.raises(CommandError, match="no-such-part"):
        implementations(REPO, ["no-such-part"])


def test_the_corpus_spans_three_parts_and_only_replaces_modules_of_the_reference():
    """At least four entries over at least three parts; each replaces existing modules of one part (a
    submission's files), says in its docstring what idiom it is, and parses."""
    entries = agreement.corpus_entries()
    assert len(entries) >= 4, sorted(entries)
    parts = {i.part for i in implementations(REPO) if i.kind == "corpus"}
    assert len(parts) >= 3 and all("," not in p for p in parts), parts
    for name, files in entries.items():
        for rel, text in files.items():
            assert (REPO / rel).is_file(), f"corpus {name}: {rel} is not a module of the reference"
            assert f"Corpus entry ``{name}``" in (ast.get_docstring(ast.parse(text)) or ""), (
                f"corpus {name}: {rel}"
            )


def test_cs336_audit_agreement_reaches_this_check_and_refuses_an_unknown_name():
    """``cs336 audit --agreement --only NAME`` runs this check (not the zoo), which names what ``--only`` may be."""
    parser = argparse.ArgumentParser()
    audit.add_arguments(parser)
    args = parser.parse_args(["--agreement", "--only", "no-such-part"])
    with pytest.raises(CommandError, match="names no part, mutant, graded target or corpus entry"):
        audit.run(args)


#: What each test of a made-up suite enters: two parts, and a test of ``b`` that also calls ``a.f``.
REACH = {
    "tests/test_a.py::test_f": ["a.py::f"],
    "tests/test_a.py::test_g": ["a.py::g"],
    "tests/test_a.py::test_class": ["a.py::K.__init__", "a.py::K.run"],
    "tests/test_b.py::test_h": ["b.py::h"],
    "tests/test_b.py::test_h_and_f": ["a.py::f", "b.py::h"],
    "tests/test_c.py::test_nothing": [],
}


def _member(name: str, file: str, focus: str, tests: str, narrow: bool = True) -> Implementation:
    return Implementation(
        "mutant", name, file[0], (tests,), {file: name}, focus=(focus,), narrow=narrow
    )


def test_a_mutant_keeps_the_tests_that_enter_its_focus_or_all_when_none_does():
    """Narrowed to the tests entering its function; a class's methods by prefix; a function no test
    enters (code a spawned process runs) keeps every candidate; a member not to narrow keeps its files."""
    assert narrowed(_member("f", "a.py", "a.py::f", "tests/test_a.py"), REACH).tests == (
        "tests/test_a.py::test_f",
    )
    assert agreement_plan.enters(REACH["tests/test_a.py::test_class"], ("a.py::K.",))
    assert not agreement_plan.enters(REACH["tests/test_a.py::test_f"], ("a.py::K.",))
    unseen = _member("z", "a.py", "a.py::z", "tests/test_a.py")
    assert narrowed(unseen, REACH) == unseen
    whole = _member("K", "a.py", "a.py::K.", "tests/test_a.py", narrow=False)
    assert narrowed(whole, REACH) == whole


def test_implementations_share_a_tree_only_where_no_test_of_one_enters_the_others_focus():
    """``g`` of a and ``h`` of b share a tree; ``f`` of a cannot join ``h`` (a test of b enters f) nor
    ``g`` (same file); the reference goes alone; each member's verdict reads only its own tests."""
    reference = Implementation("reference", "reference", "all", ("tests",))
    f = narrowed(_member("f", "a.py", "a.py::f", "tests/test_a.py"), REACH)
    g = narrowed(_member("g", "a.py", "a.py::g", "tests/test_a.py"), REACH)
    h = narrowed(_member("h", "b.py", "b.py::h", "tests/test_b.py"), REACH)
    trees = plan([reference, f, g, h], REACH)
    assert [[m.name for m in t] for t in trees] == [["reference"], ["g", "h"], ["f"]], trees
    shared = trees[1]
    assert agreement_plan.tree_tests(shared, REACH) == [
        "tests/test_a.py::test_g",
        "tests/test_b.py::test_h",
        "tests/test_b.py::test_h_and_f",
    ]
    assert agreement_plan.tree_files(shared) == {"a.py": "g", "b.py": "h"}
    run = _run(
        {
            "tests/test_a.py::test_g": ("passed", ""),
            "tests/test_b.py::test_h": ("failed", "x"),
            "tests/test_b.py::test_h_and_f": ("failed", "x"),
        },
        errors=[{"nodeid": "tests/test_b.py", "message": "ImportError"}],
    )
    mine = agreement_plan.restrict(run, g.tests)
    assert list(mine.tests) == mine.collected == ["tests/test_a.py::test_g"]
    assert mine.collect_errors == []
    assert len(agreement_plan.restrict(run, h.tests).collect_errors) == 1


def test_every_function_is_named_as_the_probe_sees_it(tmp_path):
    """Functions, methods and nested functions by ``co_qualname``, file by file."""
    (tmp_path / "cs336_assignment").mkdir()
    (tmp_path / "cs336_assignment/m.py").write_text(
        "def f():\n    def inner():\n        pass\n\nclass K:\n    def run(self):\n        pass\n"
    )
    assert agreement_plan.every_function(tmp_path) == {
        "cs336_assignment/m.py": ["f", "f.<locals>.inner", "K.run"]
    }


PROBED = """
import multiprocessing

import pytest

from pkg import work


@pytest.fixture(scope="module")
def built():
    return work.build()


def test_first(built):
    assert built == 1


def test_second(built):
    assert built == 1


def test_in_a_forked_pool():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(work.square, [3]) == [9]


def test_none():
    assert True


@pytest.mark.parametrize("k", [1, 2])
def test_cached(k):
    assert work.table() == 2
"""
WORK = (
    "import functools\n\n\ndef build():\n    return 1\n\n\ndef square(x):\n    return x * x\n"
    "\n\n@functools.cache\ndef table():\n    return 2\n"
)


def test_the_probe_counts_a_shared_fixtures_setup_for_every_test_and_forked_children(tmp_path):
    """A module-scoped fixture set up in the first test counts for the second; a function run only in
    a forked pool's child counts for its test; a cached function for every test that calls it, not
    only the first (``encode-contractions-ignore-case`` changes a cached regex)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/work.py").write_text(WORK)
    (tmp_path / "test_probed.py").write_text(PROBED)
    shutil.copyfile(part_reach.PROBE_SOURCE, tmp_path / f"{part_reach.PROBE_MODULE}.py")
    (tmp_path / "functions.json").write_text(
        json.dumps({"pkg/work.py": ["build", "square", "table"]})
    )
    env = {
        **os.environ,
        "CS336_REACH_FUNCTIONS": str(tmp_path / "functions.json"),
        "CS336_REACH_OUT": str(tmp_path / "reach.json"),
        "PYTHONPATH": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
        + ["-p", part_reach.PROBE_MODULE, "test_probed.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "reach.json").read_text()) == {
        "test_probed.py::test_first": ["pkg/work.py::build"],
        "test_probed.py::test_second": ["pkg/work.py::build"],
        "test_probed.py::test_in_a_forked_pool": ["pkg/work.py::square"],
        "test_probed.py::test_none": [],
        "test_probed.py::test_cached[1]": ["pkg/work.py::table"],
        "test_probed.py::test_cached[2]": ["pkg/work.py::table"],
    }


def test_a_difference_in_a_known_weak_test_is_listed_and_not_counted(monkeypatch):
    """A known weak test (each names its issue and exists) differing leaves the verdict "agrees", the
    difference listed with its reason; any other test's difference still counts."""
    for nodeid, reason in agreement.KNOWN_WEAK.items():
        path, name = nodeid.split("::")
        assert f"def {name.split('[')[0]}(" in (REPO / path).read_text(), nodeid
        assert "issue " in reason, reason
    weak = "tests/test_data.py::test_a_speed_test[big]"
    monkeypatch.setitem(agreement.KNOWN_WEAK, weak, "issue 31: its outcome depends on the load")
    impl = Implementation("mutant", "m", "data", ("tests/test_data.py",))
    one = _run({weak: ("passed", ""), "t::a": ("passed", "")})
    split = _run({weak: ("failed", "slow"), "t::a": ("passed", "")})
    v = agreement.verdict(impl, one, split, 10.0)
    assert v.status == "agrees" and [d.nodeid for d in v.weak] == [weak]
    assert "known weak, not counted (issue " in v.render(1, 1)
    split = _run({weak: ("failed", "slow"), "t::a": ("failed", "")})
    assert agreement.verdict(impl, one, split, 10.0).status == "differs"
