"""Staff tests of make_submission.sh, run on temporary trees (never on the repository itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.util import ROOT

pytestmark = pytest.mark.staff

SCRIPT = ROOT / "make_submission.sh"
ZIP = "cs336-assignment-submission.zip"


def scratch_dir(tree: Path) -> Path:
    """The temp folder ``run_script`` gives the script: beside ``tree``, named after it."""
    return tree.with_name(tree.name + "-tmp")


def run_script(tree: Path) -> subprocess.CompletedProcess:
    """Run the script in ``tree`` with a temp folder of its own, so what it leaves there is this
    run's alone."""
    scratch = scratch_dir(tree)
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "CS336_PYTHON": sys.executable, "TMPDIR": str(scratch)}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        ["bash", str(tree / "make_submission.sh")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write(path: Path, content: str | bytes = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small stand-in for a student's checkout: a package, adapters.py, and plenty of clutter."""
    shutil.copy(SCRIPT, tmp_path / "make_submission.sh")
    write(
        tmp_path / "adapters.py",
        "from cs336_assignment import core\nfrom cs336_assignment.sub import helper\n",
    )
    write(tmp_path / "cs336_assignment/__init__.py", '"""Student package."""\n')
    write(tmp_path / "cs336_assignment/core.py", "VALUE = 1\n")
    write(tmp_path / "cs336_assignment/sub/__init__.py")
    write(tmp_path / "cs336_assignment/sub/helper.py", "from cs336_assignment.core import VALUE\n")
    write(tmp_path / "cs336_assignment/vocab.json", '{"a": 0}\n')
    # clutter that must stay out
    write(tmp_path / "cs336_assignment/__pycache__/core.cpython-311.pyc", b"\x00" * 64)
    write(tmp_path / "cs336_assignment/sub/__pycache__/helper.cpython-311.pyc", b"\x00" * 64)
    write(tmp_path / "cs336_assignment/.DS_Store", b"\x00")
    write(tmp_path / "cs336_assignment/.ipynb_checkpoints/core-checkpoint.py", "VALUE = 0\n")
    write(tmp_path / "cs336_assignment/data/tokens.txt", "some corpus\n")
    write(tmp_path / "cs336_assignment/checkpoints/step100.txt", "x\n")
    write(tmp_path / "cs336_assignment/venv/pyvenv.cfg", "home = /usr/bin\n")
    write(tmp_path / "cs336_assignment/venv/lib/site.py", "x\n")
    write(tmp_path / "cs336_assignment/model.pt", b"\x00" * 100)
    write(tmp_path / "cs336_assignment/train_tokens.bin", b"\x00" * 100)
    write(tmp_path / "cs336_assignment/acts.npy", b"\x00" * 100)
    write(tmp_path / "cs336_assignment/huge_notes.txt", b"x" * (2 * 1024 * 1024))
    write(tmp_path / ".venv/lib/python3.11/site-packages/torch/__init__.py", "x\n")
    write(tmp_path / "data/owt_train.bin", b"\x00" * 1000)
    write(tmp_path / "tests/test_core.py", "def test(): pass\n")
    write(tmp_path / "README.md", "# readme\n")
    return tmp_path


def test_zip_holds_only_the_package_adapters_and_writeup(tree):
    """The zip holds the package's source, adapters.py and writeup.pdf, and the manifest lists them."""
    write(tree / "writeup.pdf", b"%PDF-1.4 fake")
    proc = run_script(tree)
    assert proc.returncode == 0, proc.stderr
    names = sorted(zipfile.ZipFile(tree / ZIP).namelist())
    assert names == sorted(
        [
            "adapters.py",
            "writeup.pdf",
            "cs336_assignment/__init__.py",
            "cs336_assignment/core.py",
            "cs336_assignment/sub/__init__.py",
            "cs336_assignment/sub/helper.py",
            "cs336_assignment/vocab.json",
        ]
    ), names
    for name in names:
        assert name in proc.stdout, f"the manifest does not list {name}:\n{proc.stdout}"
    for left_out in (
        "cs336_assignment/data",
        "cs336_assignment/model.pt",
        "cs336_assignment/huge_notes.txt",
    ):
        assert left_out in proc.stdout, (
            f"the report of left-out files does not mention {left_out}:\n{proc.stdout}"
        )
    with zipfile.ZipFile(tree / ZIP) as zf:
        assert zf.read("cs336_assignment/core.py") == b"VALUE = 1\n"


def test_zip_without_a_writeup_is_built_with_a_warning(tree):
    """Without writeup.pdf the zip is still built (exit 0), and a warning on stderr says the written answers get no points."""
    proc = run_script(tree)
    assert proc.returncode == 0, proc.stderr
    assert "writeup.pdf" not in zipfile.ZipFile(tree / ZIP).namelist()
    assert "WARNING: no writeup.pdf" in proc.stderr and "no points" in proc.stderr, proc.stderr
    with_writeup = write(tree / "writeup.pdf", b"%PDF-1.4 fake")
    proc = run_script(tree)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    assert with_writeup.name in zipfile.ZipFile(tree / ZIP).namelist()


def test_refuses_when_the_package_does_not_import(tree):
    """A module that fails to import makes the script exit non-zero, say why, and write nothing."""
    # a syntax error, not imported by adapters.py
    write(tree / "cs336_assignment/sub/broken.py", "def f(:\n")
    proc = run_script(tree)
    assert proc.returncode != 0
    assert "does not import" in proc.stderr and "SyntaxError" in proc.stderr, proc.stderr
    assert not (tree / ZIP).exists(), "a zip was written although the package does not import"
    assert "no zip was written" in proc.stderr, proc.stderr


def test_refusal_renames_a_previous_zip_so_it_cannot_pass_for_current(tree):
    """When the script refuses, an earlier zip is kept, byte for byte, but as .zip.stale, and the message says so."""
    assert run_script(tree).returncode == 0
    before = (tree / ZIP).read_bytes()
    write(tree / "cs336_assignment/core.py", "raise ImportError('missing dependency')\n")
    proc = run_script(tree)
    assert proc.returncode != 0 and "ImportError" in proc.stderr, proc.stderr
    assert not (tree / ZIP).exists(), (
        "after a refusal a zip of older code still looks like the current submission"
    )
    assert (tree / f"{ZIP}.stale").read_bytes() == before, "the previous zip must be kept, renamed"
    assert f"renamed to {ZIP}.stale" in proc.stderr and "do not upload it" in proc.stderr, (
        proc.stderr
    )
    write(tree / "cs336_assignment/core.py", "VALUE = 1\n")
    assert run_script(tree).returncode == 0
    assert (tree / ZIP).exists() and not (tree / f"{ZIP}.stale").exists(), (
        "a good run removes the stale zip"
    )


def test_import_check_runs_on_the_zip_not_the_working_tree(tree):
    """A module left out of the zip (over 1 MB) but imported by adapters.py makes the zip unimportable: refused, and the message names the module."""
    write(tree / "cs336_assignment/tables.py", "TABLE = " + repr("x" * (1100 * 1024)) + "\n")
    write(tree / "adapters.py", "from cs336_assignment import core, tables\n")
    proc = run_script(tree)
    assert proc.returncode != 0, (
        f"the zip lacks tables.py, which adapters.py imports, yet the script succeeded:\n{proc.stdout}"
    )
    assert (
        "does not import" in proc.stderr
        and "cs336_assignment/tables.py is not in the zip" in proc.stderr
    ), proc.stderr
    assert not (tree / ZIP).exists()


def test_virtualenvs_are_found_by_pyvenv_cfg_not_by_name(tree):
    """A virtualenv named myenv (it has pyvenv.cfg) is left out and reported; a subpackage named env is code and ships."""
    write(tree / "cs336_assignment/myenv/pyvenv.cfg", "home = /usr/bin\n")
    for i in range(50):
        write(
            tree / f"cs336_assignment/myenv/lib/python3.11/site-packages/pkg/mod{i}.py", "x = 1\n"
        )
    write(tree / "cs336_assignment/condaenv/conda-meta/history", "x\n")
    write(tree / "cs336_assignment/env/__init__.py", "")
    write(tree / "cs336_assignment/env/rewards.py", "REWARD = 1\n")
    proc = run_script(tree)
    assert proc.returncode == 0, proc.stderr
    names = zipfile.ZipFile(tree / ZIP).namelist()
    assert not [n for n in names if "myenv" in n or "condaenv" in n or "/venv/" in n], names
    assert {"cs336_assignment/env/__init__.py", "cs336_assignment/env/rewards.py"} <= set(names), (
        names
    )
    for env in ("myenv", "condaenv", "venv"):
        assert f"cs336_assignment/{env}  (a virtualenv" in proc.stdout, proc.stdout


def test_refuses_a_zip_over_ten_megabytes(tree):
    """Twelve 0.9 MB (incompressible) files in the package make the zip too big: non-zero exit, a
    message naming the largest files and saying what to move, no zip, no temp file."""
    for i in range(12):
        write(tree / f"cs336_assignment/notes_{i}.txt", os.urandom(900 * 1024))
    proc = run_script(tree)
    assert proc.returncode != 0
    assert (
        "over the 10.00 MiB limit" in proc.stderr
        and "notes_" in proc.stderr
        and "out of cs336_assignment/" in proc.stderr
    ), proc.stderr
    leftovers = sorted(p.name for p in tree.glob("*.zip*")) + sorted(
        p.name for p in tree.glob(".submission.*")
    )
    assert leftovers == [], f"a refused run left {leftovers} behind"
    assert not list(scratch_dir(tree).glob("cs336-submission-check-*")), (
        "the unpacked copy was left behind"
    )


def test_refuses_a_writeup_over_its_own_limit_with_advice_to_compress_it(tree):
    """A 12 MB writeup.pdf is refused by the writeup's own 5 MB limit, named in the message with how
    to compress a PDF; a 4 MB one is packaged."""
    write(tree / "writeup.pdf", os.urandom(12 * 1024 * 1024))
    proc = run_script(tree)
    assert proc.returncode != 0
    assert "writeup.pdf is 12.00 MiB, over its own limit of 5.00 MiB" in proc.stderr, proc.stderr
    assert "Compress it" in proc.stderr and "-dPDFSETTINGS=/ebook" in proc.stderr, proc.stderr
    assert not list(tree.glob("*.zip*"))
    write(tree / "writeup.pdf", os.urandom(4 * 1024 * 1024))
    proc = run_script(tree)
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(tree / ZIP) as zf:
        assert "writeup.pdf" in zf.namelist()


def test_the_writeup_limit_is_stated_where_students_read_it():
    """The script's leading comment (the handout README's "Submitting" section) states the limit
    the code checks."""
    text = SCRIPT.read_text()
    assert "MAX_WRITEUP = 5 * 1024 * 1024" in text
    head = text.split("set -euo pipefail")[0]
    assert "writeup.pdf is over its own\n# limit of 5 MB" in head, head


def test_refuses_without_adapters_py(tree):
    """Run in a tree without adapters.py, the script says where it must run and exits non-zero."""
    (tree / "adapters.py").unlink()
    proc = run_script(tree)
    assert proc.returncode != 0 and "adapters.py" in proc.stderr, proc.stderr


def test_real_package_builds_a_submission(tmp_path):
    """On a copy of this repository's package and adapters.py, the script succeeds and ships every module."""
    shutil.copy(SCRIPT, tmp_path / "make_submission.sh")
    shutil.copy(ROOT / "adapters.py", tmp_path / "adapters.py")
    shutil.copytree(
        ROOT / "cs336_assignment",
        tmp_path / "cs336_assignment",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    proc = run_script(tmp_path)
    assert proc.returncode == 0, proc.stderr
    names = set(zipfile.ZipFile(tmp_path / ZIP).namelist())
    expected = {
        p.relative_to(tmp_path).as_posix() for p in (tmp_path / "cs336_assignment").rglob("*.py")
    }
    assert expected | {"adapters.py"} == names, (
        f"missing: {expected - names}, unexpected: {names - expected - {'adapters.py'}}"
    )
