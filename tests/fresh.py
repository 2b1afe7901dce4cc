"""Fresh inputs for the speed tests: drawn per run, so speed is the only way to pass them.

A speed test that times one fixed input can be answered without speed: by a table of that input's
answer, or by a cache that makes the second and third timed calls free. So each timed call gets
its own input, generated from a seed drawn once per run, and the test compares the best of them
with a baseline timed in the same run (a margin wide enough that a correct incremental trainer
never fails and a naive one never passes). The seed is in every failure message; set
``CS336_SPEED_SEED`` to that number to replay the same inputs (a regrade does the same).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import secrets
from pathlib import Path
from types import ModuleType

SEED_ENV = "CS336_SPEED_SEED"
#: Seeds are drawn below this (any int replays, but a drawn one fits every generator's seed).
SEED_BOUND = 2**31
MAKE_CORPORA = Path(__file__).resolve().parents[1] / "fixtures" / "make_corpora.py"


@functools.cache
def run_seed() -> int:
    """This run's seed: ``$CS336_SPEED_SEED`` if set, else drawn once per process."""
    value = os.environ.get(SEED_ENV, "").strip()
    if value:
        try:
            return int(value)
        except ValueError:
            raise ValueError(
                f"{SEED_ENV}={value!r} must be an integer (the seed a failure message printed)"
            ) from None
    return draw_seed()


def draw_seed() -> int:
    """A new seed for one run's speed tests (the grader draws one per submission, for all its judges)."""
    return secrets.randbelow(SEED_BOUND)


def replay_hint() -> str:
    return f"inputs drawn with {SEED_ENV}={run_seed()}; set it to replay them"


@functools.cache
def _make_corpora() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_corpora", MAKE_CORPORA)
    assert spec is not None and spec.loader is not None  # a .py file: a spec with a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fresh_corpora(
    folder: Path,
    count: int,
    *,
    documents: int,
    max_sentences: int,
    salt: int,
    extra_special: str | None = None,
) -> list[Path]:
    """``count`` distinct corpora in ``folder``, written by ``fixtures/make_corpora.py`` from seeds
    derived from this run's seed and ``salt`` (a test's own number, so two tests draw different
    corpora). ``extra_special``: a second special token put between some words (every 30th)."""
    paths = []
    for i in range(count):
        seed = (run_seed() * 1_000 + salt * 10 + i) % 2**63
        text = _make_corpora().make_corpus(
            seed=seed, documents=documents, max_sentences=max_sentences
        )
        if extra_special is not None:
            words = text.split(" ")
            text = " ".join(w + extra_special if k % 30 == 29 else w for k, w in enumerate(words))
        path = Path(folder) / f"fresh-{salt}-{i}.txt"
        path.write_text(text, encoding="utf-8", newline="")
        paths.append(path)
    return paths
