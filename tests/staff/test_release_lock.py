"""`prune_lock`: the handout's uv.lock is the repository's minus what only dropped groups reach."""

from __future__ import annotations

import textwrap
import tomllib

import pytest

from cs336_staff.release.lock import prune_lock

LOCK = textwrap.dedent(
    """\
    version = 1
    revision = 3
    requires-python = ">=3.11"

    [[package]]
    name = "proj"
    version = "0.1.0"
    source = { editable = "." }
    default-groups = ["dev", "staff"]
    dependencies = [
        { name = "numpy", version = "2.0", source = { registry = "r" }, marker = "python_full_version < '3.12'" },
        { name = "torch" },
    ]

    [package.dev-dependencies]
    dev = [
        { name = "pytest" },
        { name = "hypothesis", extra = ["numpy"] },
    ]
    staff = [
        { name = "ruff" },
        { name = "pluggy" },
    ]

    [package.metadata.requires-dev]
    dev = [{ name = "pytest" }, { name = "hypothesis" }]
    staff = [{ name = "ruff" }, { name = "pluggy" }]

    [[package]]
    name = "numpy"
    version = "2.0"
    source = { registry = "r" }

    [[package]]
    name = "numpy"
    version = "2.5"
    source = { registry = "r" }

    [[package]]
    name = "torch"
    version = "2.15"
    source = { registry = "r" }
    dependencies = [{ name = "filelock" }]

    [[package]]
    name = "filelock"
    version = "3.0"
    source = { registry = "r" }

    [[package]]
    name = "pytest"
    version = "8.0"
    source = { registry = "r" }
    dependencies = [{ name = "pluggy" }]

    [[package]]
    name = "pluggy"
    version = "1.5"
    source = { registry = "r" }

    [[package]]
    name = "hypothesis"
    version = "6.0"
    source = { registry = "r" }

    [package.optional-dependencies]
    numpy = [{ name = "sortedcontainers" }]
    django = [{ name = "django" }]

    [[package]]
    name = "sortedcontainers"
    version = "2.4"
    source = { registry = "r" }

    [[package]]
    name = "django"
    version = "5.0"
    source = { registry = "r" }

    [[package]]
    name = "ruff"
    version = "0.6"
    source = { registry = "r" }
    """
)


def _names(lock_text: str) -> list[tuple[str, str]]:
    return sorted((p["name"], p["version"]) for p in tomllib.loads(lock_text)["package"])


def test_prune_lock_keeps_what_project_and_kept_groups_reach():
    """Dependencies of kept groups stay (extras asked for too, a package both groups need too); staff-only ones go."""
    pruned = prune_lock(LOCK, ["dev"])
    assert _names(pruned) == [
        ("filelock", "3.0"), ("hypothesis", "6.0"), ("numpy", "2.0"), ("pluggy", "1.5"),
        ("proj", "0.1.0"), ("pytest", "8.0"), ("sortedcontainers", "2.4"), ("torch", "2.15"),
    ]  # fmt: skip
    root = tomllib.loads(pruned)["package"][0]
    assert root["default-groups"] == ["dev"]
    assert set(root["dev-dependencies"]) == {"dev"}
    assert set(root["metadata"]["requires-dev"]) == {"dev"}


def test_prune_lock_with_every_group_kept_drops_only_unreachable_packages():
    """With no group dropped, only packages nothing reaches go (another numpy pin, an extra never asked for)."""
    kept = prune_lock(LOCK, ["dev", "staff"])
    assert _names(kept) == [
        n for n in _names(LOCK) if n not in {("numpy", "2.5"), ("django", "5.0")}
    ]
    assert tomllib.loads(kept)["package"][0]["default-groups"] == ["dev", "staff"]


def test_prune_lock_names_a_dependency_the_lock_lacks():
    """A dangling reference is an error that says which package, not a silently broken lock."""
    broken = LOCK.replace(
        'name = "filelock"\nversion = "3.0"', 'name = "filelock2"\nversion = "3.0"'
    )
    with pytest.raises(ValueError, match="filelock"):
        prune_lock(broken, ["dev"])
