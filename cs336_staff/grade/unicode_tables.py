"""Hypothesis's Unicode tables, built once per batch instead of once per judge.

A test that draws text (``st.text()``, ``st.characters()``) needs hypothesis's tables of the Unicode
code points: each category's intervals, and which code points UTF-8 encodes. Hypothesis builds them
on first use (a loop over all 1.1 million code points: about 2 s of CPU) and caches them under its
storage directory, in ``unicode_data/``. A student's run finds them in ``.hypothesis/`` after its
first run; a judge gets a fresh storage directory of its own (``grader.run_judge``: nothing of one
submission's run reaches another's), so every judge built them again, inside the first test that
drew text.

``build`` makes them once, in a child Python with that folder as its storage directory, where the
batch keeps its cache (``OUT/.cache/``, so the next batch finds them too); ``seed`` copies them into
a judge's new storage directory before the judge starts. The tables are derived from the Python
build's ``unicodedata`` and codecs alone, never from a submission or a test, and a judge that gets
none (no cache folder, a build that failed) builds its own as before: nothing depends on them but
the time.

Deliberately left out: codecs other than UTF-8 (no test names one; another is built on first use
as before), and hypothesis's other caches (its example database is off in grading).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: The folder hypothesis keeps its Unicode tables in, under its storage directory.
TABLES = "unicode_data"
#: Builds the tables the judges' text strategies need, in the storage directory of the environment.
BUILD = (
    "from hypothesis.internal.charmap import charmap, intervals_from_codec; "
    "charmap(); intervals_from_codec('utf-8')"
)
#: Seconds the build may take (about 2 s of CPU; a loaded machine may take several times that).
BUILD_TIMEOUT = 300


def build(cache_dir: Path) -> Path | None:
    """A hypothesis storage directory under ``cache_dir`` holding the Unicode tables of the installed
    hypothesis (built now unless an earlier batch left them there), or None if they cannot be built."""
    try:
        version = importlib.metadata.version("hypothesis")
    except importlib.metadata.PackageNotFoundError:
        return None
    home = cache_dir / f"hypothesis-{version}"
    if (home / TABLES).is_dir():
        return home
    staging = cache_dir / f"hypothesis-{version}.building-{os.getpid()}"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(staging)}
        subprocess.run(
            [sys.executable, "-c", BUILD],
            env=env,
            capture_output=True,
            timeout=BUILD_TIMEOUT,
            check=True,
        )
        if not (staging / TABLES).is_dir():
            return None
        with contextlib.suppress(OSError):  # another batch finished first: its tables serve
            staging.rename(home)
        return home if (home / TABLES).is_dir() else None
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def seed(home: Path | None, storage: Path) -> None:
    """Copy the tables of ``home`` (``build``'s folder; None: none) into the new hypothesis storage
    directory ``storage``; where they cannot be copied, the judge builds its own."""
    if home is None:
        return
    with contextlib.suppress(OSError):
        shutil.copytree(home / TABLES, storage / TABLES)
