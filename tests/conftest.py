"""Shared pytest configuration: snapshots, device markers, seeded generators, repeatable runs, and
the rules check.

At the end of a run, tests/rules.py reads your code (it runs nothing) and prints a line, in the
rule's words, for each graded function that reaches an API tests/rules.toml forbids.

Test files run in the handout's order of parts (tests/progress.py, ``handout_order``), so the first
failures you read are those of the first part.

The device markers (gpu, fp8, h100) and what each needs are defined in tests/devices.py; a test
whose device is missing is skipped with the reason.

Every run draws the same cases: hypothesis is derandomized (the profile "cs336", loaded below), and
each test starts with the global RNGs (random, numpy, torch) seeded with RNG_SEED, so rerunning the
suite never changes a result. To explore other random cases on purpose, pass
``--hypothesis-profile=cs336-random --hypothesis-seed=N``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import settings

from tests import not_written, progress, rules
from tests.devices import skip_reason
from tests.snapshot import Snapshot

#: The global RNGs' seed at the start of every test (grading seeds the sandboxed worker the same way).
RNG_SEED = 0

# Registered and loaded at import, before pytest's --hypothesis-profile option is read, so the option
# can still choose the random profile.
settings.register_profile("cs336", derandomize=True, database=None)
settings.register_profile("cs336-random", derandomize=False, database=None)
settings.load_profile("cs336")


# BEGIN STAFF-ONLY
# Staff regenerate the snapshots from the reference with `uv run cs336 snapshots`, which runs the
# snapshot tests with this option; the handout has neither, so students cannot overwrite them.
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--snapshot-update",
        action="store_true",
        default=False,
        help="(staff) rewrite the .npz snapshots under fixtures/ from the reference instead of comparing",
    )


# END STAFF-ONLY


def pytest_configure(config: pytest.Config) -> None:
    progress.register(config)  # the per-part summary at the end of a run (tests/progress.py)
    not_written.register(config)  # one line for a test that reaches a stub (tests/not_written.py)
    # a line per graded function that reaches a forbidden API, before the summary
    rules.register(config)


def _capability() -> tuple[int, int] | None:
    return torch.cuda.get_device_capability() if torch.cuda.is_available() else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    data = progress.load_points(Path(str(config.rootpath)))
    if data is not None:  # test files run in the handout's order of parts
        progress.handout_order(items, data)
    cap = _capability()
    for item in items:
        reason = skip_reason({m.name for m in item.iter_markers()}, cap)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def seeded_global_rngs() -> Iterator[None]:
    """Each test starts with the global RNGs seeded with RNG_SEED, whatever ran before it; afterwards
    they are put back (tests may seed, and a checkpoint may restore, them)."""
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    random.seed(RNG_SEED)
    np.random.seed(RNG_SEED)
    if torch.cuda.is_available():
        torch.manual_seed(RNG_SEED)  # every device's generator
    else:  # only the CPU's: torch.manual_seed would also queue lazy seeding of devices this machine lacks
        torch.default_generator.manual_seed(RNG_SEED)
    yield
    torch.set_rng_state(states[0])
    np.random.set_state(states[1])
    random.setstate(states[2])


@pytest.fixture
def snapshot(request: pytest.FixtureRequest) -> Snapshot:
    """Compare arrays with ``fixtures/.../<name>.npz``, the reference's outputs stored with the tests."""
    update = False
    # BEGIN STAFF-ONLY
    update = request.config.getoption("--snapshot-update")
    # END STAFF-ONLY
    return Snapshot(Path(str(request.node.fspath)), update)


@pytest.fixture
def generator() -> torch.Generator:
    """A CPU generator seeded with 0, so every test that samples is reproducible."""
    return torch.Generator().manual_seed(0)


@pytest.fixture
def fixtures_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "fixtures"
