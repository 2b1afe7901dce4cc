"""Grade one Gradescope upload: what ``run_autograder`` (from ``cs336 autograder``) runs.

Gradescope starts a container from the image ``setup.sh`` built, as root, with the upload in
``/autograder/submission`` (the files of a make_submission.sh zip, or the zip itself), the
autograder zip unpacked in ``/autograder/source``, and takes ``/autograder/results/results.json``.
This module

1. locks the tree down before any student code exists as a process: ``/autograder`` 0711, the
   submission and results folders 0700, the staff tree readable by no other user but for its
   public fixtures (``container.lock_down``); the worker then runs on the container tier (a uid
   of its own), or on bubblewrap where the container allows user namespaces; where neither can
   start grading is refused (results.json says why), never run unsandboxed;
2. grades the upload as ``cs336 grade --device cpu`` would (the same plan, rubric and scores) with
   limits sized for Gradescope's "2.0 CPU, 4.0 GB" machine (``GRADESCOPE_LIMITS``);
3. writes results.json for Gradescope (``for_gradescope``): GPU tests left out of the score
   (Gradescope has no GPU; staff grade them with ``--device gpu``), tests that are not graded
   (``report.TestResult.graded``) left out of its tests (Gradescope would show them red or
   green; the summary counts them in a column of their own), hidden tests shown only after
   grades are published (``after_published``, or ``hidden`` where the rubric says so), and the
   summary students see counting visible tests only. A grader failure still writes a result
   (score 0, the reason) so Gradescope never shows a bare "autograder failed".

``prepare`` (what ``setup.sh`` runs once, at image build) does beforehand what every run would
otherwise do again, in a container whose writes are lost with it: it compiles the environment's
bytecode (``bytecode.ensure_compiled``: some 20 core-seconds that each run paid on Gradescope's
machine) and collects the graded tests into ``source/.cs336-prepared`` (which also leaves the tests
as pytest rewrote them in the staff tree's ``__pycache__``, for every judge to read). A run reads
that collection when it matches the staff tree, and collects again in its own temporary folder
when it does not (nothing under ``source`` is written while grading).

Environment: ``CS336_AUTOGRADER_ROOT`` moves ``/autograder`` (a staff test lays one out in a
temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from cs336_staff.grade import neutral
from cs336_staff.grade.bytecode import ensure_compiled
from cs336_staff.grade.container import lock_down
from cs336_staff.grade.grader import (
    WORKER_OUTPUT,
    SandboxRefused,
    collect_expected,
    collection_file,
    grade_one,
    make_plan,
)
from cs336_staff.grade.intake import ADAPTERS, PACKAGE
from cs336_staff.grade.limits import GiB, Limits
from cs336_staff.grade.report import NOT_GRADED, GradeResult
from cs336_staff.grade.spec import HIDDEN_PREFIX

#: Sized for Gradescope's "2.0 CPU, 4.0 GB RAM" machine: the worker's tree gets 2.5 GiB of memory (its
#: processes may map 8 GiB of address space each: torch maps ~3 GiB at import), the judge (torch,
#: the oracles) the rest; 25 minutes for the run, under Gradescope's 40-minute default.
GRADESCOPE_LIMITS = Limits(
    memory_bytes=int(2.5 * GiB), address_space_bytes=8 * GiB, test_timeout=120.0, run_timeout=1500.0
)
#: The folder of the source tree where ``prepare`` leaves the collection of the graded tests.
PREPARED = ".cs336-prepared"
#: Visibility of a hidden test's result on Gradescope unless the rubric hides it entirely.
HIDDEN_VISIBILITY = "after_published"
STDOUT_HEAD, STDOUT_TAIL = (
    8_000,
    12_000,
)  # characters of console.txt run_autograder prints (staff_console)


def find_upload(submission: Path) -> Path:
    """The folder Gradescope unpacked, or the one zip uploaded into it."""
    if (submission / PACKAGE).exists() or (submission / ADAPTERS).exists():
        return submission
    zips = sorted(submission.glob("*.zip"))
    if len(zips) == 1:
        return zips[0]
    return submission  # intake rejects it with the command that builds a good zip


def for_gradescope(data: dict) -> dict:
    """Our results.json (``report.GradeResult``) as Gradescope should show it (see the module doc)."""
    everything = GradeResult.from_gradescope(data)
    cpu = [t for t in everything.tests if t.device != "gpu"]
    visible = GradeResult(
        everything.submission,
        everything.status,
        [t for t in cpu if t.visibility == "visible"],
        everything.execution_time,
        concepts=everything.concepts,
        ignored=everything.ignored,
        notes=everything.notes,
        isolation=everything.isolation,
    )
    shown = {t.nodeid for t in cpu if t.status != NOT_GRADED}
    tests = []
    for t in data["tests"]:
        if t["name"] not in shown:
            continue
        t = dict(t)
        if t["name"].startswith(HIDDEN_PREFIX) and t.get("visibility") != "hidden":
            t["visibility"] = HIDDEN_VISIBILITY
        tests.append(t)
    gpu = [t for t in everything.tests if t.device == "gpu"]
    hidden = len([t for t in cpu if t.graded]) - len([t for t in visible.tests if t.graded])
    output = visible.summary().replace("## ", "## visible tests of ", 1)
    if hidden:
        output += f"\n{hidden} hidden tests are graded too; their results appear once grades are published.\n"
    if gpu:
        output += (
            f"\n{len(gpu)} GPU tests ({sum(t.max_points for t in gpu):.2f} points) are not graded on Gradescope "
            "(no GPU); the course staff grade them separately.\n"
        )
    return {
        "score": round(sum(float(t["score"]) for t in tests), 2),
        "execution_time": data.get("execution_time", 0),
        "output": output,
        "output_format": "md",  # the summary: a submission's text in it is inert (neutral.markdown)
        "test_output_format": "text",  # each test's output: shown as written, control characters escaped
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            **data.get("extra_data", {}),
            "max_score": round(sum(float(t["max_score"]) for t in tests), 2),
            "gpu_tests_left_out": len(gpu),
        },
    }


def staff_console(text: str) -> str:
    """What run_autograder prints of console.txt: the start of the workers' output (what the submission
    printed at import: the first thing to read when it misbehaves) and the end of the whole console."""
    if len(text) <= STDOUT_HEAD + STDOUT_TAIL:
        return text
    start = text.find(WORKER_OUTPUT)
    head = (
        text[start : start + STDOUT_HEAD]
        if 0 <= start < len(text) - STDOUT_TAIL
        else text[:STDOUT_HEAD]
    )
    return f"{head}\n[... console.txt cut here ...]\n{text[-STDOUT_TAIL:]}"


def staff_stdout(console: Path) -> str:
    """What run_autograder prints of ``console`` (console.txt): ``staff_console`` of it, every control
    character a submission printed shown escaped (``neutral.controls``), for whoever reads the log."""
    return staff_console(neutral.controls(console.read_text(errors="replace")))


def failed(why: str, elapsed: float) -> dict:
    """results.json for a grading that could not happen (Gradescope shows the output; score 0)."""
    return {
        "score": 0.0,
        "execution_time": round(elapsed),
        "output_format": "md",
        "stdout_visibility": "hidden",
        "output": "The autograder could not grade this submission; the course staff have been told:\n\n"
        f"{neutral.markdown(why)}\n",
        "tests": [],
        "extra_data": {"status": "error", "error": neutral.line(why)},
    }


def lock(root: Path) -> None:
    """Permissions before any student code runs (see the module doc, step 1)."""
    root.chmod(0o711)
    for name in ("submission", "results"):
        (root / name).mkdir(exist_ok=True)
        (root / name).chmod(0o700)
    for name in ("run_autograder", "setup.sh"):
        if (root / name).exists():
            (root / name).chmod(0o700)
    lock_down(root / "source")


def _write(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def grade(root: Path, limits: Limits = GRADESCOPE_LIMITS) -> dict:
    start = time.monotonic()
    try:
        lock(root)
        upload = find_upload(root / "submission")
        with tempfile.TemporaryDirectory(prefix="cs336-gradescope-") as tmp:  # 0700, root's
            out = Path(tmp)
            plan = make_plan(
                root / "source",
                device="cpu",
                limits=limits,
                jobs=1,
                cache_dir=collection_cache(root / "source", out),
                warn=lambda m: print(m, file=sys.stderr),
            )
            grade_one(upload, "submission", out, plan, force=True)
            data = json.loads((out / "submission" / "results.json").read_text())
            console = out / "submission" / "console.txt"
            if console.is_file():  # for the staff: Gradescope keeps stdout, hidden from students
                print(staff_stdout(console))
        return for_gradescope(data)
    except SandboxRefused as e:
        return failed(
            f"no isolation for student code on this machine: {e}", time.monotonic() - start
        )
    except Exception as e:  # noqa: BLE001 - a result must be written whatever happened
        return failed(f"{type(e).__name__}: {e}", time.monotonic() - start)


def collection_cache(source: Path, out: Path) -> Path:
    """Where this run finds the collection: ``source/.cs336-prepared`` when ``prepare`` collected this
    very tree there; else a folder of this run's own (``out``), never the source tree."""
    prepared = source / PREPARED
    return prepared if collection_file(source, prepared).is_file() else out / ".cache"


def prepare(source: Path) -> str:
    """At image build: compile the environment's bytecode and collect the graded tests (module doc)."""
    warning = ensure_compiled(workers=os.cpu_count() or 1)
    collected, errors = collect_expected(source, source / PREPARED, GRADESCOPE_LIMITS)
    if errors:
        raise RuntimeError(
            f"the staff tests in {', '.join(sorted(errors))} do not collect: fix them before "
            "building the autograder"
        )
    return (
        f"compiled the environment's bytecode{f' ({warning})' if warning else ''}; collected "
        f"{len(collected)} graded tests into {source / PREPARED}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_autograder", description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        choices=["run", "prepare"],
        help="run: grade the upload; prepare: what setup.sh runs once, at image build",
    )
    parser.add_argument(
        "--root", type=Path, default=Path(os.environ.get("CS336_AUTOGRADER_ROOT", "/autograder"))
    )
    parser.add_argument(
        "--source", type=Path, help="prepare: the unpacked autograder zip (default: ROOT/source)"
    )
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(f"cs336 autograder: {prepare((args.source or args.root / 'source').resolve())}")
        return 0
    result = grade(args.root.resolve())
    (args.root / "results").mkdir(exist_ok=True)
    _write(args.root / "results" / "results.json", result)
    print(result["output"])
    print(f"score {result['score']} / {result['extra_data'].get('max_score', '?')}")
    return 0
