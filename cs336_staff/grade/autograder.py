"""Build the Gradescope autograder: OUT/autograder.zip, uploadable as it is.

    uv run cs336 autograder dist/          # writes dist/autograder.zip and says what to set on Gradescope

The zip holds, at its root, ``setup.sh`` (installs uv and the locked environment at image build
time) and ``run_autograder`` (grades one upload: ``gradescope.py``), then the staff tree grading
needs: ``pyproject.toml``, ``uv.lock``, ``adapters.py``, ``rubric.toml``, ``cs336_assignment/`` (the
reference: never importable by the worker), ``cs336_staff/``, ``tests/`` with ``tests/hidden/``
(``tests/staff/`` left out: never graded) and ``fixtures/`` with ``fixtures/hidden/``.

Before writing anything it collects the graded tests from exactly those files (so a zip whose
tests do not collect is never written) and prints the points Gradescope should expect: the CPU
tests' points. GPU tests are left out of the Gradescope score (Gradescope has no GPU); grade them
on a GPU runner with ``cs336 grade --device gpu`` and add them by hand or as a second assignment.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.grade.grader import make_plan
from cs336_staff.grade.spec import HIDDEN_PREFIX

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).with_name("autograder_files")
#: What of the staff tree goes into the zip (folders recursively, minus caches and tests/staff).
INCLUDE = (
    "pyproject.toml",
    "uv.lock",
    "adapters.py",
    "rubric.toml",
    "cs336_assignment",
    "cs336_staff",
    "tests",
    "fixtures",
)
EXCLUDE_PARTS = frozenset({"__pycache__", ".pytest_cache", ".hypothesis"})
ZIP_NAME = "autograder.zip"
#: uv that setup.sh installs when the build machine's own cannot be asked.
FALLBACK_UV_VERSION = "0.13.9"
DATE = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same tree gives the same zip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "out", type=Path, help=f"folder to write {ZIP_NAME} into (created if missing)"
    )
    parser.add_argument("--staff-root", type=Path, default=ROOT, help=argparse.SUPPRESS)


def staff_files(staff_root: Path) -> list[Path]:
    """The files of ``staff_root`` the autograder needs, sorted (paths relative to ``staff_root``)."""
    files = []
    for name in INCLUDE:
        p = staff_root / name
        if p.is_file():
            files.append(Path(name))
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(staff_root)
                if (
                    f.is_file()
                    and not f.is_symlink()
                    and not EXCLUDE_PARTS & set(rel.parts)
                    and rel.parts[:2] != ("tests", "staff")
                    and f.suffix != ".pyc"
                ):
                    files.append(rel)
        elif name != "fixtures":
            raise FileNotFoundError(
                f"{p} is missing: the autograder needs it (run from the staff repository)"
            )
    return sorted(set(files))


def uv_version() -> str:
    uv = shutil.which("uv")
    try:
        out = (
            subprocess.run([uv, "--version"], capture_output=True, text=True, timeout=30).stdout
            if uv
            else ""
        )
        return out.split()[1]
    except (OSError, subprocess.SubprocessError, IndexError):
        return FALLBACK_UV_VERSION


def script(name: str) -> bytes:
    text = (SCRIPTS / name).read_text()
    text = text.replace("@UV_VERSION@", uv_version())
    text = text.replace("@PYTHON_VERSION@", f"{sys.version_info.major}.{sys.version_info.minor}")
    return text.encode()


def build(staff_root: Path, out: Path) -> tuple[Path, dict]:
    """Write ``out/autograder.zip``; return its path and the points (cpu, gpu, tests, hidden)."""
    staff_root = Path(staff_root).resolve()
    files = staff_files(staff_root)
    with tempfile.TemporaryDirectory(prefix="cs336-autograder-") as tmp:
        tree = Path(tmp) / "source"
        for rel in files:
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(staff_root / rel, tree / rel)
        plan = make_plan(
            tree,
            device="all",
            cache_dir=None,
            insecure=True,
            warn=lambda m: print(m, file=sys.stderr),
        )
    items = plan.items
    facts = {
        "cpu_points": round(sum(i.points for n, i in items.items() if not plan.needs_gpu[n]), 2),
        "gpu_points": round(sum(i.points for n, i in items.items() if plan.needs_gpu[n]), 2),
        "cpu_tests": sum(not plan.needs_gpu[n] for n in items),
        "gpu_tests": sum(plan.needs_gpu[n] for n in items),
        "hidden_cpu_tests": sum(
            n.startswith(HIDDEN_PREFIX) and not plan.needs_gpu[n] for n in items
        ),
    }
    out.mkdir(parents=True, exist_ok=True)
    dest = out / ZIP_NAME
    partial = dest.with_name(dest.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.external_attr = 0o100755 << 16  # executable once unpacked
            zf.writestr(info, script(name))
        for rel in files:
            info = zipfile.ZipInfo(rel.as_posix(), date_time=DATE)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, (staff_root / rel).read_bytes())
    partial.replace(dest)
    return dest, facts


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(
            f"{args.out} is a file; give the folder to write {ZIP_NAME} into (e.g. `cs336 autograder "
            f"{args.out.parent}/`)"
        )
    try:
        dest, facts = build(args.staff_root, args.out)
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        raise CommandError(e) from None
    print(f"{dest}: {dest.stat().st_size / 2**20:.1f} MiB")
    print(
        f"Gradescope grades {facts['cpu_tests']} CPU tests ({facts['hidden_cpu_tests']} of them hidden until "
        f"grades are published): set the assignment's Autograder points to {facts['cpu_points']:g}."
    )
    if facts["gpu_tests"]:
        print(
            f"{facts['gpu_tests']} GPU tests ({facts['gpu_points']:g} points) are left out there (no GPU): grade "
            "them with `cs336 grade --device gpu` on a GPU runner."
        )
    print("Machine: 2.0 CPU, 4.0 GB RAM or more (README, Grading on Gradescope).")
    return 0
