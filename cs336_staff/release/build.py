"""Build the student handout from the reference repository.

The handout is an allowlist, so anything new in the repository stays out until staff add it here:

    cs336_assignment/   every file; .py files with their solution regions stubbed (markers.py)
    adapters.py         as is (the contract)
    tests/              the public tests, without tests/hidden/ and tests/staff/
    fixtures/           without fixtures/hidden/
    make_submission.sh  as is
    .gitignore          as is
    README.md           generated from cs336_staff/templates/README.md; the parts table from
                        rubric.toml and the code (handout_parts.py)
    assignment.pdf      the writeup, typeset from writeup/ (cs336_staff/writeup; its answer key never ships)
    tests/points.json   generated from rubric.toml for the progress summary (tests/progress.py)
    CHANGELOG.md        cs336_staff/templates/CHANGELOG.md, which must have an entry for the version
    pyproject.toml      the repository's, without STAFF-ONLY entries (the ``staff`` dependency
                        group), without the groups and packages those leave dangling
    uv.lock             the repository's, pruned offline to the handout's dependencies by a graph
                        walk (lock.py: same pins, no resolution, so a fresh machine can do it);
                        ``--no-lock`` leaves it out

Left out whatever the allowlist says: ``cs336_staff/``, ``benchmarks/``, ``.ci/``, ``.github/``,
``grades/``, hidden tests and fixtures, plus every file whose first lines hold a ``# STAFF-ONLY``
comment and every ``# BEGIN STAFF-ONLY`` ... ``# END STAFF-ONLY`` block of a .py or .sh file or .gitignore.
Stripping can leave imports that only the solution used; ``ruff check --select F401 --fix`` drops
them from the stripped files (``release --check`` then proves no unused name is left), ``--select
I001`` sorts what is left, and ``ruff format`` formats every shipped .py file, so the handout passes
its own ``ruff check`` and ``ruff format --check``.

The output is deterministic: sorted walks, no timestamps, file modes normalised to 644/755, so two
runs give byte-identical trees. Deliberately left out: packaging the handout as an archive, and
git history (the handout is a fresh tree; staff commit it wherever students clone from).
"""

from __future__ import annotations

import os
import re
import shutil
import string
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import tomlkit
from tomlkit.container import Container
from tomlkit.items import Comment, Table

from cs336_staff.markers import MarkerError, Region, handout_text, has_markers
from cs336_staff.release.handout_parts import extras, readme_values
from cs336_staff.release.lock import prune_lock
from cs336_staff.release.results import Handout, OutDirError, ReleaseError
from cs336_staff.shipped import PACKAGE, SHIPPED_DIRS, shipped_sources

REQUIRED_FILES = ("adapters.py", "pyproject.toml")
STAFF_BLOCK_SUFFIXES = (".py", ".sh", ".gitignore")
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


# ------------------------------------------------------------------------------------------------
# Which files
# ------------------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return 0o755 if path.stat().st_mode & 0o111 else 0o644


def _write(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)


# ------------------------------------------------------------------------------------------------
# pyproject.toml
# ------------------------------------------------------------------------------------------------


def _staff_only_entries(
    doc: Container, text: str, path: str = ""
) -> Iterator[tuple[str, str, list[Comment]]]:
    """(dotted table, key, marker comments) of each ``# STAFF-ONLY`` marked entry of a parsed TOML document.

    The marker is a comment line starting with ``# STAFF-ONLY``; the comment lines right after it
    belong to it, and the ``key = ...`` entry right after them is the entry it marks (``text``, the
    source, only names the marker's line when nothing follows it).
    """
    marker: list[Comment] | None = None
    for key, item in doc.body:
        if isinstance(item, Comment):
            if item.as_string().strip().startswith("# STAFF-ONLY"):
                marker = [item]
            elif marker is not None:
                marker.append(item)
            continue
        # a blank line or a table header
        if marker is not None and (key is None or isinstance(item, Table)):
            line = next(
                i
                for i, ln in enumerate(text.splitlines(), 1)
                if ln.strip() == marker[0].as_string().strip()
            )
            raise ReleaseError(
                f"pyproject.toml:{line}: '# STAFF-ONLY' must be followed by the `key = value` entry it marks"
            )
        if key is None:
            continue
        if marker is not None:
            yield path, key.key, marker
            marker = None
        if isinstance(item, Table):
            yield from _staff_only_entries(item.value, text, f"{path}.{key.key}".lstrip("."))
    if marker is not None:
        line = next(
            i
            for i, ln in enumerate(text.splitlines(), 1)
            if ln.strip() == marker[0].as_string().strip()
        )
        raise ReleaseError(
            f"pyproject.toml:{line}: '# STAFF-ONLY' must be followed by the `key = value` entry it marks"
        )


def _table(doc: tomlkit.TOMLDocument, dotted: str):
    node = doc
    for part in dotted.split(".") if dotted else []:
        node = node[part]
    return node


def handout_pyproject(text: str) -> str:
    """The repository's pyproject.toml without its STAFF-ONLY entries and what they leave dangling.

    Edited with tomlkit (comments and layout kept). A comment starting with ``# STAFF-ONLY`` drops
    itself, the comment lines right after it and the ``key = value`` entry they mark (like the
    ``staff = [...]`` dependency group). Dependency groups so dropped disappear from ``[tool.uv]
    default-groups``, wheel packages the handout lacks (``cs336_staff``) from ``[tool.hatch.build.
    targets.wheel] packages``, and a table left empty disappears.
    """
    doc = tomlkit.parse(text)
    entries = list(_staff_only_entries(doc, text))
    groups = set()
    for table, key, comments in entries:
        for comment in comments:  # a comment has no key to delete it by: it renders as nothing
            comment.trivia.indent = comment.trivia.comment = comment.trivia.trail = ""
        del _table(doc, table)[key]
        if table == "dependency-groups":
            groups.add(key)
    uv = doc.get("tool", {}).get("uv", {})
    if "default-groups" in uv:
        kept = [g for g in uv["default-groups"] if g not in groups]
        uv["default-groups"].clear()
        uv["default-groups"].extend(kept)
    wheel = (
        doc.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
    )
    if "packages" in wheel:
        kept = [p for p in wheel["packages"] if p == PACKAGE or not p.startswith("cs336_staff")]
        wheel["packages"].clear()
        wheel["packages"].extend(kept)
    # a table the entries emptied goes too (e.g. [tool.cs336]), once however many entries it had
    for table in dict.fromkeys(table for table, _, _ in entries):
        parent, _, name = table.rpartition(".")
        if table and len(_table(doc, table)) == 0:
            del _table(doc, parent)[name]
    result = tomlkit.dumps(doc).rstrip("\n") + "\n"  # a table dropped last leaves no blank line
    data = tomllib.loads(result)
    left = set(data.get("tool", {}).get("uv", {}).get("default-groups", [])) - set(
        data.get("dependency-groups", {})
    )
    if left:
        raise ReleaseError(
            f"handout pyproject.toml: default-groups names {sorted(left)}, which it does not define"
        )
    return result


# ------------------------------------------------------------------------------------------------
# README.md
# ------------------------------------------------------------------------------------------------


def submit_text(script: Path) -> str:
    """How to submit: the leading comment block of make_submission.sh, under a usage line."""
    if not script.is_file():
        return "Run `bash make_submission.sh` and upload the archive it creates."
    lines = script.read_text().splitlines()
    body = []
    for line in lines[1:] if lines and lines[0].startswith("#!") else lines:
        if not line.startswith("#"):
            break
        body.append(
            line[2:] if line.startswith("# ") else line[1:]
        )  # keep indentation: code stays code
    text = "\n".join(body).strip()
    usage = "```bash\nbash make_submission.sh\n```"
    return f"{usage}\n\n{text}" if text else f"{usage}\n\nThen upload the archive it creates."


def run_block(tests: list[str]) -> str:
    """The shell lines that run the tests, comments aligned."""
    lines = [
        ("uv run pytest", "every public test; all fail until you implement the parts"),
        (f"uv run pytest {tests[0] if tests else 'tests/'}", "one part"),
        ("uv run pytest -x -k <name>", "stop at the first failure of the tests matching <name>"),
    ]
    width = max(len(cmd) for cmd, _ in lines) + 2
    return "\n".join(f"{cmd.ljust(width)}# {why}" for cmd, why in lines)


def render_readme(repo: Path, regions: dict[str, list[Region]], tests: list[str]) -> str:
    project = tomllib.loads((repo / "pyproject.toml").read_text()).get("project", {})
    first = next(
        (f"{r.message(f)}" for f in sorted(regions) for r in regions[f]), "Implement ... in ..."
    )
    public = [t for t in tests if Path(t).name.startswith("test_")]
    values = {
        "title": project.get("name", "assignment"),
        "description": project.get("description", ""),
        "python": project.get("requires-python", ""),
        "example": first,
        "run_block": run_block(public),
        **readme_values(repo, regions),  # the parts table, points and writeup (handout_parts.py)
        "submit": submit_text(repo / "make_submission.sh"),
    }
    return string.Template((TEMPLATES / "README.md").read_text()).substitute(values)


def changelog(repo: Path) -> str:
    text = (TEMPLATES / "CHANGELOG.md").read_text()
    version = (
        tomllib.loads((repo / "pyproject.toml").read_text()).get("project", {}).get("version", "")
    )
    if version and not re.search(rf"^##\s+\[?v?{re.escape(version)}\]?(\s|$)", text, re.MULTILINE):
        raise ReleaseError(
            f"cs336_staff/templates/CHANGELOG.md has no '## {version}' entry for the version in pyproject.toml; "
            "say what changed for students before releasing"
        )
    return text


# ------------------------------------------------------------------------------------------------
# Build
# ------------------------------------------------------------------------------------------------


def _check_out_dir(repo: Path, out: Path, force: bool) -> None:
    repo, out = repo.resolve(), out.resolve()
    if out == repo or out in repo.parents:
        raise OutDirError(
            f"refusing to write the handout to {out}: it holds the repository; pick a new directory"
        )
    for top in [*SHIPPED_DIRS, ".git", "cs336_staff"]:
        if out == repo / top or (repo / top) in out.parents:
            raise OutDirError(
                f"refusing to write the handout inside {repo / top}; pick a directory such as {repo / 'handout'}"
            )
    if out.exists() and not out.is_dir():
        raise OutDirError(f"{out} exists and is not a directory; pick another OUT_DIR")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise OutDirError(
            f"{out} exists and is not empty; pass --force to replace it (its contents will be deleted)"
        )


def _ruff(root: Path, args: list[str], files: list[str]) -> None:
    """Run ``ruff ARGS FILES`` in the handout (its own ``[tool.ruff]`` config), raising on failure."""
    if not files:
        return
    cmd = [sys.executable, "-m", "ruff", *args, "--no-cache", "--quiet", *files]
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
    except FileNotFoundError as e:  # pragma: no cover - ruff is a staff dependency
        raise ReleaseError(
            "ruff is needed to tidy the stripped files; `uv sync` the staff group"
        ) from e
    if proc.returncode != 0:
        raise ReleaseError(
            f"ruff {args[0]} failed on the stripped files:\n{proc.stdout}{proc.stderr}"
        )


def _tidy(root: Path, stripped: list[str], shipped: list[str]) -> None:
    """Drop imports only the solution used from the ``stripped`` files and sort what is left, then
    format every ``shipped`` .py file: a stub's long ``raise`` line and the blank lines a removed
    region or STAFF-ONLY block leaves would otherwise fail the handout's own ``ruff check`` and
    ``ruff format --check`` (the reference's files pass both, so the rest are unchanged)."""
    _ruff(root, ["check", "--select", "F401,I001", "--fix", "--exit-zero"], stripped)
    _ruff(root, ["format"], [f for f in shipped if f.endswith(".py")])


def _prune_lock(repo: Path, root: Path) -> None:
    """Write the repository's uv.lock pruned to the handout's groups (lock.py), then let uv confirm it.

    ``uv lock --check --offline`` only compares the lock with the handout's pyproject.toml, so it
    needs no network and no cache (a fresh machine has neither the metadata nor the wheels a
    re-resolution would need).
    """
    groups = tomllib.loads((root / "pyproject.toml").read_text()).get("dependency-groups", {})
    try:
        pruned = prune_lock((repo / "uv.lock").read_text(), groups)
    except ValueError as e:
        raise ReleaseError(
            f"cannot prune uv.lock for the handout: {e}; run `uv lock` in the repository"
        ) from e
    (root / "uv.lock").write_text(pruned)
    (root / "uv.lock").chmod(0o644)
    uv = shutil.which("uv")
    if uv is None:
        return
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "VIRTUAL_ENV" and not (k.startswith("UV_") and k != "UV_CACHE_DIR")
    }
    proc = subprocess.run(
        [uv, "lock", "--check", "--offline", "--quiet"],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if proc.returncode != 0:
        raise ReleaseError(
            "the pruned uv.lock does not match the handout's pyproject.toml (`uv lock --check --offline`); "
            f"is the repository's uv.lock up to date (`uv lock`)?\n{proc.stderr}"
        )


def write_handout(repo: Path, root: Path, *, lock: bool = True) -> Handout:
    """Write the handout of ``repo`` into the empty directory ``root``."""
    repo = Path(repo).resolve()
    for f in REQUIRED_FILES:
        if not (repo / f).is_file():
            raise ReleaseError(f"{repo} has no {f}; is it the assignment repository?")
    handout = Handout(root=root)
    stripped: list[str] = []
    for rel in shipped_sources(repo):
        src = repo / rel
        data = src.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            in_package = rel.endswith(".py") and rel.startswith(PACKAGE + "/")
            shipped, regions = handout_text(
                text, rel, staff_blocks=rel.endswith(STAFF_BLOCK_SUFFIXES), stub=in_package
            )
            if shipped is None:
                handout.left_out.append(rel)
                continue
            if regions:
                handout.regions[rel] = regions
                stripped.append(rel)
            elif rel.endswith(".py") and not in_package and has_markers(shipped, rel):
                raise MarkerError(
                    rel,
                    1,
                    f"solution markers outside {PACKAGE}/ are never stripped; move the code into {PACKAGE}/",
                )
            data = shipped.encode("utf-8")
        _write(root / rel, data, _mode(src))
        handout.files.append(rel)
    if not (repo / "make_submission.sh").is_file():
        handout.warnings.append(
            "make_submission.sh is missing from the repository; the handout has no submission script"
        )
    tests = [f for f in handout.files if f.startswith("tests/") and f.endswith(".py")]
    _write(root / "pyproject.toml", handout_pyproject((repo / "pyproject.toml").read_text()))
    _write(root / "README.md", render_readme(repo, handout.regions, tests))
    _write(root / "CHANGELOG.md", changelog(repo))
    handout.files += ["pyproject.toml", "README.md", "CHANGELOG.md"]
    for rel, content in extras(repo, handout.regions).items():  # tests/points.json, assignment.pdf
        _write(root / rel, content)
        handout.files.append(rel)
    _tidy(root, stripped, handout.files)
    if lock and (repo / "uv.lock").is_file():
        _prune_lock(repo, root)
        handout.files.append("uv.lock")
    handout.files.sort()
    return handout


def build(repo: Path, out: Path, *, force: bool = False, lock: bool = True) -> Handout:
    """Build the handout of ``repo`` at ``out``; atomically replaces an old one only with ``force``."""
    repo, out = Path(repo).resolve(), Path(out).resolve()
    _check_out_dir(repo, out, force)
    partial = out.parent / f".{out.name}.partial"
    old = out.parent / f".{out.name}.old"
    for p in (partial, old):
        if p.exists():
            shutil.rmtree(p)
    partial.mkdir(parents=True)
    try:
        handout = write_handout(repo, partial, lock=lock)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if out.exists():
        out.rename(old)
    partial.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    handout.root = out
    return handout
