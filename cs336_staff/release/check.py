"""Prove a built handout is what students should get: ``cs336 release --check``.

Twelve checks, each a line of the report, each failure naming the file, test or line:

    contents   the handout has the files students need (make_submission.sh, README, ...)
    imports    ``cs336_assignment``, every module in it, and ``adapters`` import from the handout
    ruff       ``ruff check --select F`` finds nothing in the handout that the reference does not
               have too: no import or variable left unused, no name left undefined by stripping
    collect    pytest collects the same tests in the handout as with the reference, without errors
    stubs      run as students first run it, every test fails with NotImplementedError (anywhere in
               the exception chain); none passes, none fails or errors for another reason; tests
               that need a GPU may skip, and so may tests that also skip with the reference
    output     what that stub run printed is short (at most 5,000 lines), reports each failure as a
               function not written yet, and ends with the per-part table (``student_output.py``)
    reference  the handout with the reference modules dropped in passes every test
    parts      the parts' copies, the writeup's problems and tests/points.json agree with rubric.toml
               and the code; assignment.pdf is a fresh build; no answer key ships (handout_parts.py)
    leaks      no piece of a stripped region appears in any .py file of the handout (AST
               comparison): no compound statement of ``MIN_LEAK_NODES`` AST nodes or more, no
               long one-liner, no pair of consecutive statements (see ``_units``), whether it
               survived stripping, sits in a helper outside the regions, or in a test's oracle;
               pieces that read only imported modules, builtins and their own names are
               library boilerplate, not solution (see ``_library_only``)
    behaviour  no function the handout ships reproduces a graded adapter's recorded calls: a
               solution written independently of the reference (see ``behaviour.py``)
    answers    no distinctive number of the writeup's answer key appears in the handout (code,
               docstrings, tests, fixtures, README, assignment.pdf's words), in any spelling:
               448.0, 4.48e2, 1,011, 79.7%, 2**-7, 1/128, (12,4,1) (``answer_leaks.py``)
    leftovers  no staff path, staff command, staff pytest option or staff-only import in the
               handout (see ``leftovers.py``)

The test runs reuse this repository's Python environment (the handout's dependencies are a subset
of it, since its pyproject.toml only drops entries) and run on scratch copies, so the handout
itself stays pristine. They are forked from a warm server (``warm.py``) that imported torch and
pytest once, and run in parallel with each other and with the static checks. The staff
repository, which the editable install puts on ``sys.path``, is hidden from the children, so the
handout cannot import ``cs336_staff`` or the reference by accident (a child that did would fail
the check). Deliberately left out: a fresh ``uv sync`` of the handout (slow and
networked; ``uv.lock`` is pruned offline from the repository's lock instead).
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from contextlib import nullcontext
from pathlib import Path

from cs336_staff.release import behaviour
from cs336_staff.release.answer_leaks import check_answer_leaks
from cs336_staff.release.build import PACKAGE
from cs336_staff.release.handout_parts import check_parts
from cs336_staff.release.leftovers import check_leftovers
from cs336_staff.release.results import Check, Handout
from cs336_staff.release.student_output import check_output
from cs336_staff.session.runner import PytestRun, copy_tree, hide_installed, merge_runs
from cs336_staff.session.warm import WarmPool

MIN_LEAK_NODES = 8
REQUIRED_IN_HANDOUT = (
    "adapters.py",
    "pyproject.toml",
    "README.md",
    "CHANGELOG.md",
    "make_submission.sh",
    f"{PACKAGE}/__init__.py",
)


def _first(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# ------------------------------------------------------------------------------------------------
# Static checks
# ------------------------------------------------------------------------------------------------


def check_contents(handout: Handout) -> Check:
    missing = [f for f in REQUIRED_IN_HANDOUT if not (handout.root / f).is_file()]
    if missing:
        return Check("contents", False, f"the handout lacks {', '.join(missing)}")
    return Check(
        "contents",
        True,
        f"{len(handout.files)} files; left out as staff-only: {', '.join(handout.left_out) or 'none'}",
    )


_IMPORT_SCRIPT = """
import importlib, pkgutil, sys, os
root = os.path.realpath(sys.argv[1])
import {package}, adapters
names = [m.name for m in pkgutil.walk_packages({package}.__path__, "{package}.")]
for name in names:
    importlib.import_module(name)
bad = [m.__name__ for m in list(sys.modules.values())
       if getattr(m, "__file__", None) and m.__name__.split(".")[0] in ("{package}", "adapters")
       and not os.path.realpath(m.__file__).startswith(root + os.sep)]
if bad:
    raise SystemExit("imported from outside the handout: " + ", ".join(sorted(bad)))
print(len(names))
"""


def check_imports(run: PytestRun) -> Check:
    """Judge the run of ``_IMPORT_SCRIPT`` (in a child of the warm pool, from the stub tree)."""
    if run.returncode != 0 or run.foreign_modules:
        lines = run.output.strip().splitlines()[-8:] + [
            f"imported from outside the handout: {m}" for m in run.foreign_modules
        ]
        return Check("imports", False, "the handout's package does not import", lines)
    return Check(
        "imports",
        True,
        f"{PACKAGE} and its {run.output.strip().splitlines()[-1]} modules, and adapters, import from the handout",
    )


def _ruff(cwd: Path, paths: list[str]) -> list[dict]:
    """Pyflakes findings (``F`` codes) of ``paths``, minus the codes the project's ruff config ignores."""
    config = (
        tomllib.loads((cwd / "pyproject.toml").read_text())
        if (cwd / "pyproject.toml").is_file()
        else {}
    )
    ignore = config.get("tool", {}).get("ruff", {}).get("lint", {}).get("ignore", [])
    cmd = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--select",
        "F",
        "--output-format",
        "json",
        "--no-cache",
        "--exit-zero",
    ]
    cmd += [f"--ignore={','.join(ignore)}"] if ignore else []
    cmd += paths
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"ruff failed: {proc.stderr}")
    out = json.loads(proc.stdout or "[]")
    for v in out:
        v["file"] = Path(v["filename"]).resolve().relative_to(cwd.resolve()).as_posix()
    return out


def check_ruff(repo: Path, handout: Handout) -> Check:
    py = [f for f in handout.files if f.endswith(".py")]
    ours = _ruff(handout.root, py)
    theirs = {
        (v["file"], v["code"], v["message"])
        for v in _ruff(repo, [f for f in py if (repo / f).is_file()])
    }
    new = [v for v in ours if (v["file"], v["code"], v["message"]) not in theirs]
    old = [v for v in ours if (v["file"], v["code"], v["message"]) in theirs]
    note = (
        f" ({len(old)} already in the reference: {', '.join(sorted({v['code'] + ' ' + v['file'] for v in old}))})"
        if old
        else ""
    )
    if new:
        details = [f"{v['file']}:{v['location']['row']}: {v['code']} {v['message']}" for v in new]
        return Check("ruff", False, f"{len(new)} name problems left by stripping{note}", details)
    return Check(
        "ruff", True, f"no unused or undefined names left by stripping in {len(py)} files{note}"
    )


def _statements(tree: ast.AST):
    return (n for n in ast.walk(tree) if isinstance(n, ast.stmt))


def _size(nodes) -> int:
    return sum(1 for node in nodes for n in ast.walk(node) if not isinstance(n, ast.expr_context))


def _child_blocks(s: ast.stmt):
    for name in ("body", "orelse", "finalbody"):
        block = getattr(s, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for sub in [*getattr(s, "handlers", []), *getattr(s, "cases", [])]:
        yield sub.body


def _units(block: list[ast.stmt]):
    """(key, first statement, statements) of every leak-sized unit in ``block`` and the blocks nested
    in it: a compound statement of at least ``MIN_LEAK_NODES`` AST nodes, a one-liner of twice that,
    or two consecutive statements of at least ``MIN_LEAK_NODES + 4``. Short statements and pairs
    (``out = fn(*args)``, ``loss.backward(); optimizer.step()``) are everyday code, not a leak."""
    for i, s in enumerate(block):
        compound = any(True for _ in _child_blocks(s))
        if _size([s]) >= (MIN_LEAK_NODES if compound else 2 * MIN_LEAK_NODES):
            yield ast.dump(s), s, [s]
        if i + 1 < len(block) and _size(block[i : i + 2]) >= MIN_LEAK_NODES + 4:
            yield ast.dump(s) + "\n" + ast.dump(block[i + 1]), s, block[i : i + 2]
        for sub in _child_blocks(s):
            yield from _units(sub)


def _imported_names(tree: ast.AST) -> set[str]:
    """Names that ``import`` statements anywhere in ``tree`` bind (``import a.b`` binds ``a``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {a.asname or a.name.split(".")[0] for a in node.names}
    return out


def _library_only(nodes: list[ast.stmt], imported: set[str]) -> bool:
    """Whether a unit reads nothing but imported modules, builtins, literals and names it binds itself.

    Such a unit computes nothing from the function's inputs or state, so it cannot carry a solution:
    it is library boilerplate that glue code and tests need too, such as choosing a start method
    (``methods = multiprocessing.get_all_start_methods()`` and ``multiprocessing.get_context(...)``)
    or creating a pair of ``torch.cuda.Event(enable_timing=True)``."""
    walked = [n for node in nodes for n in ast.walk(node)]
    bound = {n.id for n in walked if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {n.arg for n in walked if isinstance(n, ast.arg)}
    loaded = {n.id for n in walked if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded <= imported | bound | set(dir(builtins))


def check_leaks(repo: Path, handout: Handout) -> Check:
    """No unit of region code (see ``_units``) may appear in any .py file of the handout, except units
    of library boilerplate (see ``_library_only``)."""
    solution: dict[str, str] = {}  # unit -> where the reference has it
    boilerplate = 0
    for rel, regions in handout.regions.items():
        tree = ast.parse((repo / rel).read_text(), filename=rel)
        imported = _imported_names(tree)
        functions = [
            s for s in _statements(tree) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for r in regions:
            for f in functions:
                block = [
                    s
                    for s in f.body
                    if r.begin < s.lineno and s.end_lineno is not None and s.end_lineno < r.end
                ]
                for key, s, nodes in _units(block):
                    if _library_only(nodes, imported):
                        boilerplate += 1
                    else:
                        solution.setdefault(key, f"{rel}:{s.lineno}")
    leaks = []
    for rel in handout.files:
        if rel.endswith(".py"):
            for key, s, _ in _units(ast.parse((handout.root / rel).read_text(), filename=rel).body):
                if key in solution:
                    leaks.append(
                        f"{rel}:{s.lineno}: `{_first(ast.unparse(s))}` repeats solution code from {solution[key]}"
                    )
    n = sum(len(r) for r in handout.regions.values())
    if leaks:
        return Check(
            "leaks", False, f"{len(leaks)} pieces of stripped regions survive in the handout", leaks
        )
    return Check(
        "leaks",
        True,
        f"no piece of the {n} stripped regions ({len(solution)} pieces; {boilerplate} of library "
        "boilerplate not counted) survives in the handout",
    )


# ------------------------------------------------------------------------------------------------
# Test runs
# ------------------------------------------------------------------------------------------------


def check_collect(stub: PytestRun, ref: PytestRun) -> Check:
    details = [
        f"stubs: cannot collect {e['nodeid']}: {_first(e['message'].splitlines()[-1] if e['message'] else '')}"
        for e in stub.collect_errors
    ]
    details += [
        f"reference: cannot collect {e['nodeid']}: {_first(e['message'].splitlines()[-1] if e['message'] else '')}"
        for e in ref.collect_errors
    ]
    details += [f"stubs: imported from outside the handout: {m}" for m in stub.foreign_modules]
    details += [f"reference: imported from outside the handout: {m}" for m in ref.foreign_modules]
    only_ref = sorted(set(ref.collected) - set(stub.collected))
    only_stub = sorted(set(stub.collected) - set(ref.collected))
    details += [f"collected with the reference only: {t}" for t in only_ref]
    details += [f"collected with the stubs only: {t}" for t in only_stub]
    if not ref.collected and not details:
        details.append("no test collected:\n" + ref.tail())
    if details:
        return Check(
            "collect", False, "collection differs between stubs and reference, or fails", details
        )
    return Check(
        "collect",
        True,
        f"{len(stub.collected)} tests collected in the handout, the same with the reference",
    )


def check_stubs(stub: PytestRun, ref: PytestRun) -> Check:
    ok_ni, skipped, bad = 0, 0, []
    for nodeid in stub.collected:
        t = stub.tests.get(nodeid)
        if t is None:
            bad.append(f"{nodeid}: did not run")
        elif t.not_implemented:
            ok_ni += 1
        elif t.outcome == "skipped" and (
            t.needs_device or (nodeid in ref.tests and ref.tests[nodeid].outcome == "skipped")
        ):
            skipped += 1
        elif t.outcome == "passed":
            bad.append(f"{nodeid}: PASSES against the stubs, so it grades nothing a student writes")
        elif t.outcome == "skipped":
            bad.append(
                f"{nodeid}: skipped against the stubs ({t.message}) but runs with the reference"
            )
        else:
            bad.append(
                f"{nodeid}: {t.outcome} in {t.when} with {t.message or t.outcome} (not NotImplementedError)"
            )
    if bad:
        return Check(
            "stubs",
            False,
            f"{len(bad)} of {len(stub.collected)} tests do not fail with NotImplementedError",
            bad,
        )
    if ok_ni == 0:
        return Check(
            "stubs",
            False,
            f"no test fails with NotImplementedError: all {skipped} skipped, so nothing is graded",
        )
    return Check(
        "stubs",
        True,
        f"all {ok_ni} graded tests fail with NotImplementedError, none passes"
        + (f" ({skipped} skipped: need a GPU or skip with the reference too)" if skipped else ""),
    )


def check_reference(ref: PytestRun) -> Check:
    bad, passed, skipped = [], 0, []
    for nodeid in ref.collected:
        t = ref.tests.get(nodeid)
        if t is None:
            bad.append(f"{nodeid}: did not run")
        elif t.outcome == "passed":
            passed += 1
        elif t.outcome == "skipped":
            skipped.append(t)
        else:
            bad.append(f"{nodeid}: {t.outcome} in {t.when}: {t.message}")
    if bad:
        return Check(
            "reference",
            False,
            f"{len(bad)} of {len(ref.collected)} tests fail with the reference dropped in",
            bad,
        )
    if passed == 0:
        return Check(
            "reference",
            False,
            f"no test passes with the reference: all {len(skipped)} skipped ({'; '.join(sorted({t.message for t in skipped}))})",
        )
    reasons = sorted({t.message for t in skipped})
    extra = f", {len(skipped)} skipped ({'; '.join(reasons)})" if skipped else ""
    return Check("reference", True, f"{passed} tests pass with the reference dropped in{extra}")


def check(
    repo: Path, handout: Handout, *, keep: bool = False, pool: WarmPool | None = None
) -> list[Check]:
    """Run every check on the built ``handout`` of ``repo``; returns one ``Check`` per line of the report.

    The import check and both test runs are children of a warm fork-server (``warm.py``): ``pool``
    if given (its owner closes it), else one started here."""
    repo = Path(repo).resolve()
    checks = [check_contents(handout)]
    scratch = Path(tempfile.mkdtemp(prefix="cs336-release-check-"))
    try:
        stub_tree, ref_tree = scratch / "stubs", scratch / "reference"
        copy_tree(handout.root, stub_tree)
        copy_tree(handout.root, ref_tree)
        # records the adapters' calls for the behaviour check
        recording_env = behaviour.prepare_reference_tree(ref_tree)
        # Drop the reference modules in, file by file, with the staff-only ones the handout left out
        # (the reference may use them, e.g. its numpy fast path for BPE encoding).
        for rel in [*handout.files, *handout.left_out]:
            if rel.startswith(PACKAGE + "/") and rel.endswith(".py"):
                shutil.copyfile(repo / rel, ref_tree / rel)
        hide = sorted({repo, *hide_installed(stub_tree)})
        shards = max(1, min(4, os.cpu_count() or 1))
        threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // (shards + 1)))}
        with WarmPool() if pool is None else nullcontext(pool) as warm:
            # as students run it: its output is checked
            stub_job = warm.submit(stub_tree, [], hide=hide, env=threads)
            # the reference run is the long one: split it across the cores (every child collects
            # everything, then keeps every n-th test), so it does not run on one core at the end
            recordings = [scratch / f"io-{k}.pt" for k in range(shards)]
            ref_jobs = [
                warm.submit(
                    ref_tree,
                    ["-q", "-p", behaviour.RECORDER_MODULE],
                    hide=hide,
                    env={
                        **threads,
                        **recording_env,
                        "CS336_PROBE_SHARD": f"{k}/{shards}",
                        "CS336_IO_OUT": str(recordings[k]),
                    },
                )
                for k in range(shards)
            ]
            imports_job = warm.submit(
                stub_tree,
                [str(stub_tree)],
                hide=hide,
                code=_IMPORT_SCRIPT.format(package=PACKAGE),
                timeout=300,
            )
            checks.append(check_ruff(repo, handout))
            checks.append(check_leaks(repo, handout))
            checks.append(check_parts(repo, handout))
            checks.append(check_leftovers(repo, handout))
            checks.append(check_answer_leaks(repo, handout))
            checks.append(check_imports(imports_job.result()))
            stub, ref = stub_job.result(), merge_runs([j.result() for j in ref_jobs])
            graded = {
                r.qualname.split(".")[0] for regions in handout.regions.values() for r in regions
            }
            py = [f for f in handout.files if f.endswith(".py")]
            replay_job = warm.submit(
                stub_tree,
                behaviour.replay_args([r for r in recordings if r.exists()], py, graded, stub_tree),
                hide=hide,
                code=behaviour.REPLAY,
                timeout=600,
            )
            checks.append(behaviour.replay_check(replay_job.result()))
        checks.append(check_collect(stub, ref))
        checks.append(check_stubs(stub, ref))
        checks.append(check_output(stub.output, handout.files))
        checks.append(check_reference(ref))
    finally:
        if keep:
            print(f"kept the scratch trees in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    order = [
        "contents",
        "imports",
        "ruff",
        "collect",
        "stubs",
        "output",
        "reference",
        "leaks",
        "behaviour",
        "leftovers",
        "answers",
        "parts",
    ]
    return sorted(checks, key=lambda c: order.index(c.name))
