"""What ``cs336 audit --agreement`` runs: each implementation's tests, and which share one run.

An implementation differs from the reference in a few places: a mutant in one function, a garbage
target in one function or class, a corpus entry in whole modules (its *focus*). A public test that
never executes its focus runs, under it, exactly the reference's code, so it ends as it does on the
reference, in both runs, and the reference's own runs already compare it. So:

* **Narrowed tests.** A mutant or a garbage function runs only its candidate tests (its part's,
  and those the mutant names) that enter its focus on the reference; a garbage class and a corpus
  entry run all of them. What each test enters is measured once per check, on the reference, by
  ``reach_probe.py`` over every function of the package (fixtures' setups counted for every test
  that uses them, forked children included; ``measure_args``). A focus no test enters (code only a
  process started otherwise would run) keeps every candidate test.
* **Shared trees.** Implementations whose files differ and where no test of one enters the focus
  of another are laid over one scratch copy together, and run once both ways on the union of their
  tests (``plan``): each test then runs the code of the one implementation whose focus it enters,
  and each implementation's verdict is read from its own tests (``restrict``). This trades dozens
  of worker starts for one; the reference runs alone, on every test.

Both rest on one assumption, the one the zoo audit's part reach rests on: a test's outcome depends
only on the code it executes, and on what that code did earlier in the same process. So the members
of a tree share no file (each garbage brings its own copy of the garbage module: its flavour and its
noise generator are its own, not its neighbour's), and both runs run the tests in one order
(``agreement.Runner``), so that a member that carries state from test to test (noise garbage draws
from one generator) meets the same calls in both. Where the assumption fails anyway, a member whose
verdict differs in a shared tree is run again alone (``Runner.check``), and its verdict says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path

from cs336_staff.session.runner import PytestRun

PACKAGE = "cs336_assignment"
#: At most this many tests in one shared tree (a run's timeout must still cover it).
TREE_TESTS = 300


@dataclass(frozen=True)
class Implementation:
    """One implementation to check: its files that differ from the reference, and the tests it runs."""

    kind: str  # reference | mutant | garbage | corpus
    name: str
    part: str  # the part it belongs to, for the per-part times ("all" for the reference of every part)
    tests: tuple[str, ...]  # public test files (or node ids, once narrowed)
    #: relative path -> text, laid over the reference
    files: dict[str, str] = field(default_factory=dict, hash=False)
    problem: str = ""  # why it cannot be run (a mutant that no longer applies)
    #: what it changes, as the probe names functions: ``file::qualname``, or a prefix of such
    #: names ending in ``.`` (a class's methods) or ``::`` (a whole module)
    focus: tuple[str, ...] = ()
    narrow: bool = False  # its tests may be cut to those that enter its focus
    candidates: tuple[str, ...] = ()  # once narrowed: the tests it was narrowed from

    @property
    def label(self) -> str:
        return self.kind if self.kind == "reference" else f"{self.kind} {self.name}"


def every_function(repo: Path) -> dict[str, list[str]]:
    """Every function and method of the package, by file, named as ``co_qualname`` names them."""
    out: dict[str, list[str]] = {}

    def walk(node: ast.AST, prefix: str, names: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                names.append(prefix + child.name)
                walk(child, f"{prefix}{child.name}.<locals>.", names)
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.", names)
            elif not isinstance(child, ast.expr):
                walk(child, prefix, names)

    for path in sorted((Path(repo) / PACKAGE).rglob("*.py")):
        names: list[str] = []
        walk(ast.parse(path.read_text(encoding="utf-8")), "", names)
        if names:
            out[path.relative_to(repo).as_posix()] = names
    return out


def enters(entered: list[str] | set[str], focus: tuple[str, ...]) -> bool:
    """Whether a test that entered ``entered`` enters ``focus`` (names, or prefixes ending ``.``/``::``)."""
    for f in focus:
        if f.endswith((".", "::")):
            if any(e.startswith(f) for e in entered):
                return True
        elif f in entered:
            return True
    return False


def owns(nodeid: str, tests: tuple[str, ...] | list[str]) -> bool:
    """Whether ``nodeid`` is one of ``tests`` (node ids, or files holding it)."""
    return any(nodeid == t or nodeid.startswith(t + "::") for t in tests)


def candidates(tests: tuple[str, ...], reach: dict[str, list[str]]) -> list[str]:
    """The node ids ``tests`` stand for, in the order the reference ran them."""
    return [n for n in reach if owns(n, tests)]


def narrowed(impl: Implementation, reach: dict[str, list[str]]) -> Implementation:
    """``impl`` on the candidate tests that enter its focus (all of them when none does, or when it
    may not be narrowed)."""
    if not impl.narrow or not impl.focus:
        return impl
    hit = [n for n in candidates(impl.tests, reach) if enters(reach[n], impl.focus)]
    return replace(impl, tests=tuple(hit), candidates=impl.tests) if hit else impl


def plan(
    implementations: list[Implementation],
    reach: dict[str, list[str]],
    most: int = TREE_TESTS,
) -> list[list[Implementation]]:
    """The trees to run, each a list of implementations laid over one copy together (see the module
    docstring). The reference and anything with a problem go alone; the rest, largest first, join
    the first tree whose members change other files and none of whose tests enter each other's focus."""
    trees: list[list[Implementation]] = []
    shared: list[tuple[list[Implementation], set[str], set[str], list[tuple[str, ...]]]] = []
    sized = sorted(
        (i for i in implementations if i.kind != "reference" and not i.problem and i.focus),
        key=lambda i: -len(candidates(i.tests, reach)),
    )
    for impl in implementations:
        if impl.kind == "reference" or impl.problem or not impl.focus:
            trees.append([impl])
    for impl in sized:
        mine = set(candidates(impl.tests, reach))
        for members, tests, files, foci in shared:
            if (
                len(tests) + len(mine) <= most
                and not files & set(impl.files)
                and not any(enters(reach[n], impl.focus) for n in tests)
                and not any(enters(reach[n], f) for n in mine for f in foci)
            ):
                members.append(impl)
                tests |= mine
                files |= set(impl.files)
                foci.append(impl.focus)
                break
        else:
            shared.append(([impl], mine, set(impl.files), [impl.focus]))
    order = {id(i): k for k, i in enumerate(implementations)}
    trees += [sorted(members, key=lambda i: order[id(i)]) for members, *_ in shared]
    return trees


def tree_files(members: list[Implementation]) -> dict[str, str]:
    """Every member's files, laid together (``plan`` puts only members whose files differ in one tree)."""
    out: dict[str, str] = {}
    for m in members:
        for rel, text in m.files.items():
            if rel in out:
                raise ValueError(f"{m.label} and another member of its tree both change {rel}")
            out[rel] = text
    return out


def tree_tests(members: list[Implementation], reach: dict[str, list[str]]) -> list[str]:
    """The tests of a tree: each member's, whole files as files, in the order the reference ran them."""
    if len(members) == 1:
        return list(members[0].tests)
    wanted = {t for m in members for t in m.tests}
    files = {t for t in wanted if "::" not in t}
    ids = [n for n in reach if n in wanted and n.split("::")[0] not in files]
    return sorted(files) + ids


def restrict(run: PytestRun, tests: tuple[str, ...] | list[str]) -> PytestRun:
    """``run`` as seen by the member whose tests are ``tests``: only their outcomes."""
    return replace(
        run,
        collected=[n for n in run.collected if owns(n, tests)],
        collect_errors=[
            e
            for e in run.collect_errors
            if e["nodeid"].split("::")[0] in {t.split("::")[0] for t in tests}
        ],
        tests={n: t for n, t in run.tests.items() if owns(n, tests)},
    )
