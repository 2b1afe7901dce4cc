"""The Gradescope autograder, end to end: ``cs336 autograder`` builds the zip, the REAL ``setup.sh`` and
``run_autograder`` run in a whole ``/autograder`` laid out in a temporary folder, as root in a
container without user namespaces (``standin``: bubblewrap fails there as under Docker's default
seccomp profile), so the container tier isolates the worker.

Three uploads, each graded by its own ``run_autograder`` run, like three Gradescope submissions: the
reference (every CPU point), a broken copy (two adapters raise: fewer points), and the broken copy
whose ``adapters.py`` at import tries to overwrite ``results/results.json``, rewrite and add staff
tests under ``source/`` and print the hidden tests (no more than the broken one, no staff file
changed, nothing of the hidden tests in what students see).

``setup.sh`` installs from this machine's warm uv cache (``UV_OFFLINE=1``, this machine's uv). With
``CS336_GRADESCOPE_FRESH=1`` (``.ci/gradescope.sh``, a step of ``.ci/run``) it installs as Gradescope's
image build does, from an empty uv cache with every wheel downloaded (uv itself too, unless
``CS336_GRADESCOPE_UV`` names one: from astral.sh, or from PyPI where astral.sh cannot be reached,
as on this machine and CI), a missing stand-in
fails instead of skipping, and each ``run_autograder``'s seconds go to ``CS336_GRADESCOPE_TIMES``
(a JSON file the script checks against the README's 10 minutes: no test asserts seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cs336_staff.grade import standin
from cs336_staff.grade.autograder import build
from cs336_staff.grade.example import build_example
from tests.staff.long_checks import long_check

pytestmark = [
    pytest.mark.staff,
    pytest.mark.slow,
    pytest.mark.timeout(2400),  # three whole gradings
    long_check("grading in a Gradescope layout"),
]

ROOT = Path(__file__).resolve().parents[2]
STANDIN = standin.unavailable()
UV = shutil.which("uv")
#: Set by .ci/gradescope.sh: setup.sh from an empty uv cache, downloads allowed; nothing may skip.
FRESH = os.environ.get("CS336_GRADESCOPE_FRESH") == "1"
BROKEN = """

def run_flat_index(*args, **kwargs):
    raise NotImplementedError("broken on purpose: flat_index")


def run_matmul_flops(*args, **kwargs):
    raise NotImplementedError("broken on purpose: matmul_flops")
"""
#: Appended to adapters.py, so it runs at its import in every worker (AUTOGRADER: the layout's root).
ATTACK = """
import os as _os
_AG = "AUTOGRADER"
for _path, _text in ((_AG + "/results/results.json", '{"score": 1000, "tests": []}'),
                     (_AG + "/source/tests/test_tensors.py", "def test_free():\\n    pass\\n"),
                     (_AG + "/source/tests/test_free_points.py", "def test_free():\\n    pass\\n"),
                     (_AG + "/source/rubric.toml", "")):
    try:
        with open(_path, "w") as _f:
            _f.write(_text)
        print("ATTACK wrote", _path)
    except OSError as _e:
        print("ATTACK could not write", _path, _e)
for _dir in (_AG + "/source/tests/hidden", _AG + "/source/tests", _AG + "/source"):
    try:
        for _name in _os.listdir(_dir):
            print("ATTACK listed", _name)
            try:
                print("ATTACK read", open(_os.path.join(_dir, _name)).read())
            except OSError:
                pass
    except OSError as _e:
        print("ATTACK could not list", _dir, _e)
for _name in ("test_training.py", "test_tensors.py", "__init__.py"):
    try:
        print("ATTACK read", open(_AG + "/source/tests/hidden/" + _name).read())
    except OSError as _e:
        print("ATTACK could not read", _name, _e)
"""


def with_adapters(src: Path, dest: Path, change) -> Path:
    """A copy of the zip ``src`` whose adapters.py is ``change(old text)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "adapters.py":
                data = change(data.decode()).encode()
            zout.writestr(info, data)
    return dest


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def lay_out(base: Path, zip_path: Path) -> Path:
    """A fresh /autograder as Gradescope builds it: the zip unpacked in source/, run_autograder copied up."""
    root = base / "autograder"
    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        # Gradescope keeps the zip's modes; extractall does not
        (root / "source" / name).chmod(0o755)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    return root


def image_path() -> dict[str, str]:
    """With CS336_GRADESCOPE_FRESH, a PATH without this run's virtual environment, as in Gradescope's image."""
    if not FRESH:
        return {}
    venv = os.environ.get("VIRTUAL_ENV") or sys.prefix
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not d.startswith(venv)]
    return {"PATH": os.pathsep.join(kept)}


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory) -> Iterator[dict]:
    missing = (
        f"no container stand-in here: {STANDIN}"
        if STANDIN is not None
        else "uv is not on PATH (setup.sh reuses this machine's uv and cache)"
        if UV is None and not FRESH
        else None
    )
    if missing is not None:
        (pytest.fail if FRESH else pytest.skip)(missing)
    tmp = tmp_path_factory.mktemp("gradescope")
    zip_path, facts = build(ROOT, tmp / "dist")
    reference, _ = build_example(ROOT, tmp / "example")
    uploads = {
        "reference": reference,
        "broken": with_adapters(reference, tmp / "broken.zip", lambda text: text + BROKEN),
    }
    # Every folder a worker must pass through is enterable, as /autograder and /opt are in the image.
    env_dir = Path(tempfile.mkdtemp(prefix="cs336-gs-env-"))
    env_dir.chmod(0o755)
    bases = []
    results = {}
    if FRESH:  # as Gradescope builds the image: an empty cache, every wheel (and uv, unless given) downloaded
        cache = Path(tempfile.mkdtemp(prefix="cs336-gs-uv-cache-"))
        bases.append(cache)
        setup_env = {
            "UV_CACHE_DIR": str(cache),
            **(
                {"CS336_AUTOGRADER_UV": os.environ["CS336_GRADESCOPE_UV"]}
                if os.environ.get("CS336_GRADESCOPE_UV")
                else {}
            ),
        }
    else:
        assert UV is not None  # else `missing` skipped this fixture above
        setup_env = {"CS336_AUTOGRADER_UV": UV, "UV_OFFLINE": "1"}
    seconds: dict[str, float] = {}
    try:
        for name in ("reference", "broken", "hostile"):
            base = Path(tempfile.mkdtemp(prefix=f"cs336-gs-{name}-"))
            bases.append(base)
            base.chmod(0o711)
            root = lay_out(base, zip_path)
            if name == "hostile":
                uploads[name] = with_adapters(
                    reference,
                    tmp / "hostile.zip",
                    lambda text, root=root: text + BROKEN + ATTACK.replace("AUTOGRADER", str(root)),
                )
            if name == "reference":
                started = time.monotonic()
                setup = subprocess.run(
                    ["bash", str(root / "source" / "setup.sh")],
                    cwd=root / "source",
                    env={
                        **{
                            k: v
                            for k, v in os.environ.items()
                            if not (FRESH and (k.startswith("UV_") or k == "VIRTUAL_ENV"))
                        },
                        "CS336_AUTOGRADER_ENV": str(env_dir),
                        **setup_env,
                        **image_path(),
                    },
                    capture_output=True,
                    text=True,
                    timeout=1800,
                )
                seconds["setup.sh"] = round(time.monotonic() - started, 1)
                assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
            with zipfile.ZipFile(
                uploads[name]
            ) as zf:  # Gradescope unpacks a zip upload into submission/
                zf.extractall(root / "submission")
            before = tree_digest(root / "source")
            started = time.monotonic()
            run = subprocess.run(
                standin.command(
                    [
                        "env",
                        f"CS336_AUTOGRADER_ROOT={root}",
                        f"CS336_AUTOGRADER_ENV={env_dir}",
                        str(root / "run_autograder"),
                    ]
                ),
                capture_output=True,
                text=True,
                timeout=1800,
            )
            seconds[f"run_autograder {name}"] = round(time.monotonic() - started, 1)
            data = json.loads((root / "results" / "results.json").read_text())
            results[name] = {
                "data": data,
                "stdout": run.stdout + run.stderr,
                "rc": run.returncode,
                "source_before": before,
                "source_after": tree_digest(root / "source"),
                "root": root,
            }
        if os.environ.get("CS336_GRADESCOPE_TIMES"):
            Path(os.environ["CS336_GRADESCOPE_TIMES"]).write_text(json.dumps(seconds, indent=1))
        hidden_text = (ROOT / "tests" / "hidden" / "test_training.py").read_text()
        yield {"facts": facts, "results": results, "hidden_text": hidden_text}
    finally:
        for d in [env_dir, *bases]:
            shutil.rmtree(d, ignore_errors=True)


def explain(r: dict) -> str:
    d = r["data"]

    def outcome(t: dict) -> str:
        return t.get("extra_data", {}).get("outcome", t["status"])

    bad = sorted(
        (t for t in d["tests"] if outcome(t) != "passed"), key=lambda t: outcome(t) == "skipped"
    )[:5]  # skips last
    return (
        d.get("output", "")[-3000:]
        + "".join(f"\n{t['name']} ({outcome(t)})\n{t['output'][-600:]}" for t in bad)
        + r["stdout"][-2000:]
    )


def test_the_zip_has_setup_and_run_autograder_at_its_root_and_no_staff_tooling_tests(tmp_path):
    """setup.sh and run_autograder at the root (what Gradescope requires), executable; the hidden tests
    and hidden fixtures inside; tests/staff/ and caches left out."""
    zip_path, facts = build(ROOT, tmp_path)
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert {"setup.sh", "run_autograder", "uv.lock", "rubric.toml"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert any(n.startswith("tests/hidden/") for n in names) and any(
        n.startswith("fixtures/hidden/") for n in names
    )
    assert not any(n.startswith("tests/staff/") or "__pycache__" in n for n in names)
    assert facts["cpu_points"] > 0 and facts["hidden_cpu_tests"] > 0


def test_the_reference_gets_every_cpu_point_on_the_container_tier(gradescope):
    """The reference scores every point Gradescope grades (what `cs336 grade` gives it on CPU), the
    worker isolated by the container tier; GPU tests are left out of the score."""
    r = gradescope["results"]["reference"]
    d = r["data"]
    assert r["rc"] == 0, explain(r)
    assert d["extra_data"]["isolation"]["tier"] == "container", d["extra_data"]
    assert d["score"] == d["extra_data"]["max_score"] == gradescope["facts"]["cpu_points"], explain(
        r
    )
    assert not any(t["extra_data"]["device"] == "gpu" for t in d["tests"])
    assert d["extra_data"]["gpu_tests_left_out"] == gradescope["facts"]["gpu_tests"]


def test_hidden_tests_are_shown_only_after_publication(gradescope):
    """Every hidden test's result is after_published (or hidden); the summary students see counts visible tests only."""
    d = gradescope["results"]["reference"]["data"]
    hidden = [t for t in d["tests"] if t["name"].startswith("tests/hidden/")]
    assert hidden and {t["visibility"] for t in hidden} <= {"after_published", "hidden"}
    assert d["stdout_visibility"] == "hidden"
    assert "hidden tests are graded too" in d["output"]


def test_a_broken_submission_gets_fewer_points(gradescope):
    """Two adapters raise: the tests that use them fail, with the submission's own message."""
    ref, broken = (gradescope["results"][n]["data"] for n in ("reference", "broken"))
    assert 0 < broken["score"] < ref["score"], explain(gradescope["results"]["broken"])
    failed = [t for t in broken["tests"] if t["status"] == "failed"]
    assert any("broken on purpose" in t["output"] for t in failed)


def test_a_hostile_submission_gets_no_more_changes_no_staff_file_and_leaks_nothing(gradescope):
    """Overwriting results.json, rewriting and adding staff tests and printing the hidden tests, at
    import in every worker: no more points than the broken submission, every file under source/
    unchanged, results.json ours, and no line of a hidden test in anything a student sees."""
    r = gradescope["results"]["hostile"]
    d = r["data"]
    assert r["rc"] == 0, explain(r)
    assert d["score"] <= gradescope["results"]["broken"]["data"]["score"], explain(r)
    assert d["extra_data"]["isolation"]["tier"] == "container"
    assert r["source_after"] == r["source_before"]
    seen = d["output"] + "".join(t["output"] for t in d["tests"] if t["visibility"] == "visible")
    # the worker's own output reaches run_autograder's stdout (staff only)
    printed = seen + r["stdout"]
    assert "ATTACK could not write" in printed and "ATTACK wrote" not in printed, explain(r)
    secret = [line for line in gradescope["hidden_text"].splitlines() if len(line.strip()) > 30]
    assert secret and not any(line in seen for line in secret)
    assert "ATTACK read" not in seen and "ATTACK listed" not in seen
