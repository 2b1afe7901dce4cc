"""The import graph of the repository has no circle, and the staff packages import only downwards.

Read with ``grimp`` (every ``import``, at the top of a module or inside a function, counts). The
layers, highest first; a module may import from its own layer's package and from lower layers,
never from a higher one, and the modules named in one layer do not import each other:

    cs336_staff:      the commands (audit, snapshots, release, parts_cli) > writeup, grade > parts
                      > mutants, rubric, rules_docs
                      > session (running a pytest session in a child) > shipped, markers, worker
    cs336_staff.audit: cli > agreement > hidden_only > mutants, garbage_check, agreement_plan > part_reach
                       > contracts, garbage, reach_probe, raises_probe
    cs336_staff.release: check > build > handout_parts, behaviour, leftovers, answer_leaks, student_output
                         > results, lock, io_recorder, pdf_text
    cs336_staff.grade:   cli > testing > batch, merge, example, autograder, gradescope > slurm > grader, judge
                         > sandbox > remote, spec, container > errors, output
                         > limits, intake, report, delegation, standin, bytecode, unicode_tables
                         > mirror, neutral

The worker package (``cs336_staff/worker``: the worker, its channel and codec, and the adapter
rule that the judge, the parts and the release ask too) is at the bottom. It runs inside the
sandbox from a read-only copy (as ``cs336_worker``) beside ``tests/boundary.py`` and
``tests/scenarios/`` (``sandbox.stage``): nothing else of the staff repository is there, so those
modules may import only each other, the submission and installed libraries.
"""

from __future__ import annotations

import importlib.util

import grimp
import pytest

pytestmark = pytest.mark.staff

PACKAGES = (
    "cs336_staff",
    "cs336_assignment",
    "tests",
)  # adapters.py is a module, not a package: grimp reads packages
LAYERS = {
    "cs336_staff": (
        grimp.Layer("audit", "snapshots", "release", "parts_cli"),
        grimp.Layer("writeup", "grade"),
        "parts",
        grimp.Layer("mutants", "rubric", "rules_docs"),
        "session",
        grimp.Layer("shipped", "markers", "worker"),
    ),
    "cs336_staff.audit": (
        "cli",
        "agreement",  # builds on the zoo and the garbage check: runs them in one process and split
        "hidden_only",  # the zoo's bugs that only hidden tests catch: runs them like controls
        grimp.Layer("mutants", "garbage_check", "agreement_plan"),
        "part_reach",
        grimp.Layer("contracts", "garbage", "reach_probe", "raises_probe"),
    ),
    "cs336_staff.release": (
        "check",
        "build",
        grimp.Layer("handout_parts", "behaviour", "leftovers", "answer_leaks", "student_output"),
        grimp.Layer("results", "lock", "io_recorder", "pdf_text"),
    ),
    "cs336_staff.grade": (
        "cli",
        "testing",  # the staff tests' synthetic repository and its batch grading (grade_batch)
        grimp.Layer("batch", "merge", "example", "autograder", "gradescope"),
        "slurm",
        grimp.Layer("grader", "judge"),
        "warm",  # forks the workers from the sandbox's zygote
        "sandbox",
        grimp.Layer("remote", "spec", "container"),
        grimp.Layer("errors", "output"),
        grimp.Layer(
            "limits", "intake", "report", "delegation", "standin", "bytecode", "unicode_tables"
        ),
        grimp.Layer("mirror", "neutral"),  # neutral: a submission's text made inert in reports
    ),
}
#: Imports allowed against the layers, each with its reason (none now).
ALLOWED: set[tuple[str, str]] = set()
#: What the sandboxed worker has to import from (``sandbox.stage``): itself and the public boundary.
IN_SANDBOX = ("cs336_staff.worker", "tests.boundary", "tests.scenarios")
SUBMISSION = ("cs336_assignment", "adapters")


def _importable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    # run split, the judge refuses cs336_assignment: the staff graph is still checked
    except ImportError:
        return False


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *filter(_importable, PACKAGES), include_external_packages=False, cache_dir=None
    )


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _chains(route) -> list[tuple[str, ...]]:
    """The import chains of a grimp route (several heads and tails may share a middle)."""
    return [
        (h, *route.middle, t) if route.middle or h != t else (h,)
        for h in route.heads
        for t in route.tails
    ]


def test_the_import_graph_has_no_circle(graph):
    """No module reaches itself through its imports (a circle forces imports inside functions)."""
    circles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                circles.append(" -> ".join((module, *back)))
    assert not circles, (
        "import circles (move what both need into a module below both):\n" + "\n".join(circles)
    )


@pytest.mark.parametrize("container", sorted(LAYERS))
def test_staff_packages_import_only_downwards(graph, container):
    """Each layer of the staff tooling imports from lower layers only (see the module docstring)."""
    illegal = graph.find_illegal_dependencies_for_layers(
        layers=LAYERS[container], containers={container}
    )
    lines = [
        f"{d.importer} imports {d.imported}: " + "; ".join(" -> ".join(chain) for chain in chains)
        for d in sorted(illegal, key=lambda d: (d.importer, d.imported))
        if (chains := [c for r in d.routes for c in _chains(r) if (c[0], c[-1]) not in ALLOWED])
    ]
    assert not lines, (
        f"imports from a lower layer of {container} to a higher one (move the shared part down, "
        "or change the layers in this test's docstring and LAYERS together):\n" + "\n".join(lines)
    )


def test_every_staff_module_has_a_layer(graph):
    """A new module of a layered package is placed in LAYERS, not left out of the check."""
    placed = {
        f"{c}.{name}"
        for c, layers in LAYERS.items()
        for layer in layers
        for name in (layer.module_tails if isinstance(layer, grimp.Layer) else {layer})
    }
    unplaced = sorted(
        m
        for c in ("cs336_staff", "cs336_staff.audit", "cs336_staff.release", "cs336_staff.grade")
        for m in graph.find_children(c)
        if m not in placed
    )
    assert not unplaced, f"modules without a layer in {__name__}.LAYERS: {unplaced}"


def test_the_sandboxed_worker_imports_only_what_is_staged_beside_it(graph):
    """The worker's copy, the boundary and the scenarios import nothing the sandbox does not hold."""
    outside = sorted(
        f"{m} imports {i}"
        for m in graph.modules
        if _under(m, IN_SANDBOX)
        for i in graph.find_modules_directly_imported_by(m)
        if not _under(i, IN_SANDBOX + SUBMISSION) and i != "tests"
    )
    assert not outside, (
        "the worker's sandbox holds only its package, tests/boundary.py and tests/scenarios/:\n"
        + "\n".join(outside)
    )
