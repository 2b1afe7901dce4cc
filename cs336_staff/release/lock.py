"""Prune uv.lock to the handout's dependencies, offline and without resolving anything.

The handout's pyproject.toml drops the ``staff`` dependency group, so its lock must drop the
packages only that group needs while keeping every other pin exactly as the repository has it.
Re-resolving (``uv lock --offline``) needs every package's metadata for every Python the lock
covers in the uv cache, which a fresh machine that only ran ``uv sync`` lacks. Pruning is a graph
walk instead: start from the project's dependencies and the dependency groups the handout keeps,
follow each locked package's dependencies (and the extras asked for), and drop what is never
reached, along with the dropped groups' entries in the project's own record.

Worked example (a lock whose staff group alone needs ``ruff``)::

    project deps: torch -> filelock        kept: torch, filelock
    dev group:    pytest -> pluggy         kept: pytest, pluggy
    staff group:  ruff                     dropped: ruff, and the project's ``staff = [...]`` lists

Deliberately left out: markers are not evaluated (a package reached under any marker is kept,
exactly as uv keeps it for other platforms), and nothing is re-hashed or re-downloaded.
"""

from __future__ import annotations

from collections.abc import Iterable

import tomlkit

# (name, version): version only where the lock needs it to disambiguate
Key = tuple[str, str | None]


def _ref(dep: dict) -> Key:
    return (str(dep["name"]), str(dep["version"]) if "version" in dep else None)


def _resolve(ref: Key, by_name: dict[str, list[dict]]) -> list[dict]:
    name, version = ref
    candidates = by_name.get(name, [])
    if version is not None:
        candidates = [p for p in candidates if str(p["version"]) == version]
    if not candidates:
        raise ValueError(
            f"uv.lock names {name}{'==' + version if version else ''} but locks no such package"
        )
    return candidates


def prune_lock(lock_text: str, keep_groups: Iterable[str]) -> str:
    """The lock with only what the project's dependencies and ``keep_groups`` reach.

    ``keep_groups`` are the dependency groups the handout's pyproject.toml still defines; every
    other group disappears from the project's ``dev-dependencies``, ``metadata.requires-dev`` and
    ``default-groups``.
    """
    keep = set(keep_groups)
    doc = tomlkit.parse(lock_text)
    packages = doc["package"]
    by_name: dict[str, list[dict]] = {}
    for pkg in packages:
        by_name.setdefault(str(pkg["name"]), []).append(pkg)
    roots = [
        p for p in packages if "editable" in p.get("source", {}) or "virtual" in p.get("source", {})
    ]
    if not roots:
        raise ValueError("uv.lock has no editable or virtual project entry to start from")

    reached: set[int] = set()
    todo: list[tuple[dict, tuple[str, ...]]] = [(p, ()) for p in roots]
    for root in roots:
        for group, deps in root.get("dev-dependencies", {}).items():
            if group in keep:
                todo += [
                    (pkg, tuple(d.get("extra", ())))
                    for d in deps
                    for pkg in _resolve(_ref(d), by_name)
                ]
    seen_extras: set[tuple[int, str]] = set()
    while todo:
        pkg, extras = todo.pop()
        first = id(pkg) not in reached
        reached.add(id(pkg))
        deps = list(pkg.get("dependencies", [])) if first else []
        for extra in extras:
            if (id(pkg), extra) not in seen_extras:
                seen_extras.add((id(pkg), extra))
                deps += list(pkg.get("optional-dependencies", {}).get(extra, []))
        for d in deps:
            todo += [(target, tuple(d.get("extra", ()))) for target in _resolve(_ref(d), by_name)]

    kept = tomlkit.aot()
    for pkg in packages:
        if id(pkg) in reached:
            kept.append(pkg)
    doc["package"] = kept
    for root in roots:
        for table in (root.get("dev-dependencies"), root.get("metadata", {}).get("requires-dev")):
            if table is not None:
                for group in [g for g in table if g not in keep]:
                    del table[group]
        if "default-groups" in root:
            root["default-groups"] = [g for g in root["default-groups"] if g in keep]
    return tomlkit.dumps(doc)
