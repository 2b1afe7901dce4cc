"""The leftovers check of ``release --check``: nothing in the handout points at what only staff have.

Students get a tree without ``cs336_staff/``, ``tests/hidden/``, ``benchmarks/`` and the staff
dependency group, so text that names them is a dead end at best (a failure message telling them
to run ``uv run cs336 snapshots``) and a door at worst (a pytest option that rewrites snapshots).
Four classes of leftovers, each derived from the repository rather than listed by hand where
possible, each reported as ``file:line: what``:

    paths      a staff-only path: ``tests/hidden``, ``tests/staff``, ``fixtures/hidden``,
               ``benchmarks/``, ``cs336_staff``, ``.ci/``, ``.github/``; a line that is just
               ``/grades/`` or ``/handout/`` (a .gitignore entry for staff tools' output)
    commands   ``cs336 <name>`` for a command the repository's cli.py has and the handout's lacks
               (grade, merge, release, snapshots, audit)
    options    a pytest option the repository's tests/conftest.py registers and the handout's
               does not (``--snapshot-update``)
    imports    an import of a package that only the dropped STAFF-ONLY dependency groups provide
               (ruff, submitit, rustbpe, tomlkit, ...), outside a ``try``/``except ImportError``

Every text file is scanned except ``uv.lock``; prose that merely mentions "hidden tests" is fine.
Limits: a leftover phrased another way (``the staff tool``) or built at run time
(``"cs336_" + "staff"``) goes unseen, and so does a staff-only package imported by a dependency.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from cs336_staff.release.results import Check, Handout

STAFF_PATHS = (
    "tests/hidden",
    "tests/staff",
    "fixtures/hidden",
    "benchmarks/",
    "cs336_staff",
    ".ci/",
    ".github/",
)
STAFF_OUTPUTS = (
    "/grades/",
    "/handout/",
)  # what `cs336 grade` and `cs336 release` write (.gitignore entries)
SKIP = ("uv.lock",)


def _commands(cli: Path) -> set[str]:
    if not cli.is_file():
        return set()
    for node in ast.walk(ast.parse(cli.read_text())):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            names = [
                t.id
                for t in ([node.target] if isinstance(node, ast.AnnAssign) else node.targets)
                if isinstance(t, ast.Name)
            ]
            if "COMMANDS" in names:
                return {
                    k.value
                    for k in node.value.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
    return set()


def _options(conftest: Path) -> set[str]:
    if not conftest.is_file():
        return set()
    return set(re.findall(r"addoption\(\s*[\"'](--[\w-]+)", conftest.read_text()))


def _requirement_names(data: dict) -> set[str]:
    reqs = list(data.get("project", {}).get("dependencies", []))
    for group in data.get("dependency-groups", {}).values():
        reqs += [r for r in group if isinstance(r, str)]
    return {
        re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].strip().lower().replace("-", "_") for r in reqs
    }


def staff_only_packages(repo: Path, root: Path) -> set[str]:
    """Import names of the packages the repository depends on and the handout does not."""
    ours = _requirement_names(tomllib.loads((repo / "pyproject.toml").read_text()))
    theirs = _requirement_names(tomllib.loads((root / "pyproject.toml").read_text()))
    return ours - theirs


def _guarded(node: ast.AST, parents: dict) -> bool:
    """Whether an import sits in a ``try`` that catches ImportError (an optional dependency)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try):
            for h in node.handlers:
                names = (
                    {n.id for n in ast.walk(h.type) if isinstance(n, ast.Name)}
                    if h.type
                    else {"ImportError"}
                )
                if names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
                    return True
    return False


def find_leftovers(repo: Path, handout: Handout) -> list[str]:
    """Every leftover in the handout, as ``file:line: what`` (see the module docstring)."""
    root = handout.root
    commands = _commands(repo / "cs336_assignment" / "cli.py") - _commands(
        root / "cs336_assignment" / "cli.py"
    )
    options = _options(repo / "tests" / "conftest.py") - _options(root / "tests" / "conftest.py")
    packages = staff_only_packages(repo, root)
    patterns = [(re.escape(p), f"names the staff-only path {p!r}") for p in STAFF_PATHS]
    patterns += [
        (rf"^{re.escape(p)}$", f"ignores {p!r}, which only staff tools write")
        for p in STAFF_OUTPUTS
    ]
    patterns += [
        (
            rf"cs336 {re.escape(c)}\b",
            f"names the staff command `cs336 {c}`, which the handout lacks",
        )
        for c in sorted(commands)
    ]
    patterns += [
        (rf"{re.escape(o)}\b", f"names the staff-only pytest option {o}") for o in sorted(options)
    ]
    found = []
    for rel in handout.files:
        if rel in SKIP:
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            for pattern, what in patterns:
                if re.search(pattern, line):
                    found.append(f"{rel}:{i}: {what}: {line.strip()[:100]}")
        if rel.endswith(".py") and packages:
            tree = ast.parse(text)
            parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] in packages and not _guarded(node, parents):
                        found.append(
                            f"{rel}:{node.lineno}: imports {name.split('.')[0]}, a staff-only dependency the handout does not install"
                        )
    return found


def check_leftovers(repo: Path, handout: Handout):

    found = find_leftovers(Path(repo), handout)
    if found:
        return Check("leftovers", False, f"{len(found)} references to what only staff have", found)
    return Check(
        "leftovers",
        True,
        "no staff path, staff command, staff pytest option or staff-only import in the handout",
    )
