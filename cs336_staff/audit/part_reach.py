"""Which part's solution functions each public test executes, and the tests that reach another part.

A part's tests must grade only that part's code, so that a bug costs points only in its own part
(issue 22): a test of part B that executes a solution function of part A would lose B's points to a
bug in A. ``cs336 audit`` records what every test of its baseline run executes (``reach_probe.py``
on the unmutated reference) and fails on any such test. This is the sound reduction of running every
mutant against the whole suite: a test that never executes a function cannot see a mutant of it, so
when no test of B executes A's code, no mutant of A can fail a test of B.

Only ``COMBINING_PARTS`` (the training loop, which puts the parts together and says so) may execute
other parts' code. A test that needs another part's object builds it from torch (``nn.Linear``,
``torch.optim.AdamW``) or from given code (``tests/scenarios/accounting.py``'s ``Cruncher`` twin).
"""

from __future__ import annotations

import json
from pathlib import Path

from cs336_staff.parts import USED_BY_FILE, Part

#: Parts whose tests may run other parts' code: they grade putting the parts together.
COMBINING_PARTS = ("training",)

#: What the audit copies into its scratch tree, and the name the scratch tree loads it by.
PROBE_SOURCE = Path(__file__).with_name("reach_probe.py")
PROBE_MODULE = "cs336_reach_probe"


def graded_functions(parts: list[Part]) -> dict[str, list[str]]:
    """Every solution function, by file: ``{"cs336_assignment/optim.py": ["AdamW.step", ...]}``."""
    out: dict[str, list[str]] = {}
    for part in parts:
        for f, names in [*part.functions.items(), *part.optional.items()]:
            out.setdefault(f, []).extend(names)
    return out


def crossings(reach: dict[str, list[str]], parts: list[Part]) -> list[str]:
    """One line per test that executes a solution function of a part other than its own.

    >>> a = Part("optim", 3, "Optimizers", 12, "cs336_assignment/optim.py", functions={"cs336_assignment/optim.py": ["SGD.step"]},
    ...          tests=["tests/test_optim.py"])
    >>> b = Part("accounting", 7, "Accounting", 10, "cs336_assignment/accounting/", tests=["tests/test_accounting.py"])
    >>> crossings({"tests/test_accounting.py::test_x[ours]": ["cs336_assignment/optim.py::SGD.step"],
    ...            "tests/test_optim.py::test_y": ["cs336_assignment/optim.py::SGD.step"]}, [a, b])
    ['tests/test_accounting.py::test_x[ours] (part 7, accounting) executes SGD.step of part 3 (optim): build that object from torch or given code, or move the test to part 3']
    """
    owner = {
        (f, name): p
        for p in parts
        for f, names in [*p.functions.items(), *p.optional.items()]
        for name in names
    }
    part_of_file = {t: p for p in parts for t in p.tests}
    out = []
    for nodeid, functions in sorted(reach.items()):
        mine = part_of_file.get(nodeid.split("::")[0])
        if mine is None or mine.key in COMBINING_PARTS:
            continue
        for entry in functions:
            f, name = entry.split("::", 1)
            theirs = owner.get((f, name))
            if theirs is not None and theirs.key != mine.key:
                out.append(
                    f"{nodeid} (part {mine.number}, {mine.key}) executes {name} of part {theirs.number} "
                    f"({theirs.key}): build that object from torch or given code, or move the test to part {theirs.number}"
                )
    return out


def used_by(reach: dict[str, list[str]], parts: list[Part]) -> dict[str, list[str]]:
    """Part key -> the public test files of other parts that execute its solution functions (in
    practice the training loop's: ``crossings`` rejects any other).

    >>> a = Part("optim", 3, "Optimizers", 12, "cs336_assignment/optim.py", functions={"cs336_assignment/optim.py": ["SGD.step"]})
    >>> t = Part("training", 9, "Training", 10, "cs336_assignment/training.py", tests=["tests/test_training.py"])
    >>> used_by({"tests/test_training.py::test_a": ["cs336_assignment/optim.py::SGD.step"]}, [a, t])
    {'optim': ['tests/test_training.py'], 'training': []}
    """
    owner = {
        (f, name): p.key
        for p in parts
        for f, names in [*p.functions.items(), *p.optional.items()]
        for name in names
    }
    part_of_file = {t: p.key for p in parts for t in p.tests}
    out: dict[str, set[str]] = {p.key: set() for p in parts}
    for nodeid, functions in reach.items():
        test_file = nodeid.split("::")[0]
        for entry in functions:
            module, _, qualname = entry.partition("::")
            key = owner.get((module, qualname))
            if key is not None and part_of_file.get(test_file) not in (None, key):
                out[key].add(test_file)
    return {k: sorted(v) for k, v in out.items()}


def used_by_drift(measured: dict[str, list[str]], ran: set[str], repo: Path) -> list[str]:
    """Where the stored ``USED_BY_FILE`` disagrees with ``measured``, over the test files that ``ran``."""
    path = Path(repo) / USED_BY_FILE
    stored = json.loads(path.read_text()) if path.is_file() else {}
    out = []
    for key, files in measured.items():
        said = sorted(f for f in stored.get(key, []) if f in ran)
        if said != files:
            out.append(
                f"part {key} is used by {files or 'no other test file'} but {USED_BY_FILE} says {said or 'none'}: "
                "run `uv run cs336 audit --write-used-by`, then `uv run cs336 parts --write`"
            )
    return out


def write_used_by(measured: dict[str, list[str]], ran: set[str], repo: Path) -> Path:
    """Update ``USED_BY_FILE`` with ``measured`` for the test files that ``ran`` (others keep their entries)."""
    path = Path(repo) / USED_BY_FILE
    stored = json.loads(path.read_text()) if path.is_file() else {}
    for key, files in measured.items():
        stored[key] = sorted({f for f in stored.get(key, []) if f not in ran} | set(files))
    path.write_text(json.dumps(dict(sorted(stored.items())), indent=2) + "\n")
    return path
