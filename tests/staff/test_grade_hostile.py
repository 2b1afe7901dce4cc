"""Hostile submissions get no more than their code earns, harm nothing else, and never stop the batch.

One batch (four at a time, the real ``run_batch`` path) per isolation tier this machine can produce
(``TIERS``: bubblewrap; the container tier inside ``standin``, root without user namespaces as in
Docker; with neither, the unsandboxed fallback) grades every case below against a tiny synthetic
staff repository (``cs336_staff/grade/testing.py``); each test then asserts the concrete outcome of
one case: its score against what its code earns, the victim's score, files that must not exist, the
judge's memory. The classes follow the grading-integrity issue: in-process patching, reading what it
must not, cross-submission sabotage, shared resources, leaks and clocks, batch robustness, plus
crashes and hangs.

A sandboxed tier's batch takes about a minute (its cases wait on timeouts and kills), so both are
long checks (``tests/staff/long_checks.py``): `.ci/run` grades both with ``CS336_LONG_CHECKS=1``,
``uv run pytest`` skips them with that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from cs336_staff.grade import standin
from cs336_staff.grade.container import lock_down
from cs336_staff.grade.limits import Limits, MiB, judge_growth_bound
from cs336_staff.grade.report import GradeResult, load
from cs336_staff.grade.sandbox import probe
from cs336_staff.grade.testing import (
    ADAPTERS,
    GOOD_CALC,
    calc_with,
    grade_batch,
    make_staff_repo,
    make_zip,
)
from tests.staff.long_checks import long_check

pytestmark = [
    pytest.mark.staff,
    pytest.mark.timeout(900),
]  # the module fixture grades a whole batch

SANDBOX = probe(False)
STANDIN = standin.unavailable()
#: The tiers graded here: each that this machine can produce; the unsandboxed fallback only where none can.
TIERS = [
    pytest.param(
        "bubblewrap",
        marks=[
            pytest.mark.skipif(SANDBOX is not None, reason=f"no bubblewrap here: {SANDBOX}"),
            long_check("the hostile batch on bubblewrap"),
        ],
    ),
    pytest.param(
        "container",
        marks=[
            pytest.mark.skipif(STANDIN is not None, reason=f"no container stand-in: {STANDIN}"),
            long_check("the hostile batch on the container tier"),
        ],
    ),
]
if SANDBOX is not None and STANDIN is not None:
    TIERS.append(pytest.param("none"))
MARK = f"cs336-hostile-{uuid.uuid4().hex[:8]}"  # files an attack tries to leave on the host

# -- in-process patching: the worker patches its own process; the tests run elsewhere ------------
PATCH_ASSERTS = calc_with(
    prefix="""
import builtins, math, sys, pytest, _pytest.reports, _pytest.runner
pytest.approx = lambda *a, **k: object.__new__(type("Any", (), {"__eq__": lambda s, o: True}))
math.isclose = lambda *a, **k: True
_pytest.reports.TestReport.from_item_and_call = classmethod(lambda cls, item, call: None)
_pytest.runner.call_and_report = lambda *a, **k: None
class Rewriter:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("tests"):
            raise ImportError("rewritten")
sys.meta_path.insert(0, Rewriter())
for name in list(sys.modules):
    if name.startswith("tests"):
        sys.modules[name].__dict__.clear()
""",
    mul="return 0.5 if isinstance(a, float) else a * b",
)

# -- reading what it must not ---------------------------------------------------------------------
SNOOP = calc_with(
    prefix="""
import glob, os, site, sys
FOUND = []
roots = set()
for sp in site.getsitepackages():
    for pth in glob.glob(os.path.join(sp, "*.pth")):
        roots.update(l.strip() for l in open(pth) if l.strip().startswith("/"))
for p in glob.glob("/proc/*/cmdline"):
    try:
        roots.update(a for a in open(p, "rb").read().decode(errors="replace").split("\\0") if a.startswith("/"))
    except OSError:
        pass
for root in list(roots):
    for rel in ("fixtures/hidden/products.txt", "cs336_assignment/calc.py", "tests/hidden/test_calc.py"):
        for base in (root, os.path.dirname(root), os.path.dirname(os.path.dirname(root))):
            try:
                FOUND.append((rel, open(os.path.join(base, rel)).read()))
            except OSError:
                pass
for secret in ("/etc/shadow", "/etc/passwd", os.path.expanduser("~root/.bash_history")):
    try:
        FOUND.append((secret, open(secret).read()))
    except OSError:
        pass
""",
    mul="return a * b if any(rel == 'fixtures/hidden/products.txt' for rel, _ in FOUND) else -1",
)

# -- cross-submission sabotage and shared resources -----------------------------------------------
SABOTAGE = calc_with(
    prefix=f'''
import glob, os
for pattern in ("/tmp/cs336-grade-*/root", "/tmp/cs336-grade-*/scratch", "/tmp/*/root/submission/cs336_assignment",
                "/tmp/pytest-of-*/*"):
    for d in glob.glob(pattern):
        for name in ("conftest.py", "calc.py"):
            try:
                open(os.path.join(d, name), "w").write("raise SystemExit(1)")
            except OSError:
                pass
for d in ("/tmp", "/var/tmp", "/dev/shm", os.getcwd() + "/.."):
    try:
        open(os.path.join(d, "{MARK}"), "w").write("was here")
    except OSError:
        pass
'''
)

DISK_FLOOD = calc_with(
    prefix="import os",
    mul="""[open(f"flood-{i}.bin", "wb").write(b"x" * (40 << 20)) for i in range(4)]; return a * b""",
)
TMPFS_FLOOD = calc_with(
    mul="""open("/tmp/flood.bin", "wb").write(b"x" * (200 << 20)); return a * b"""
)
MEMORY_FLOOD = calc_with(
    prefix="import os, time",
    mul="""
    kids = [os.fork() for _ in range(3)]
    if 0 in kids:
        x = bytearray(300 << 20); time.sleep(30); os._exit(0)
    time.sleep(30)
    return a * b""",
)
FORK_BOMB = calc_with(
    prefix="import os, time",
    mul="""
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
    time.sleep(30)
    return a * b""",
)
CHANNEL_FLOOD = calc_with(
    prefix="import os, sys",
    mul="""os.write(int(sys.argv[sys.argv.index("--replies") + 1]), b"\\n" * (2 << 20)); return a * b""",
)
HUGE_REPLY = calc_with(mul="return 'x' * (64 << 20)")
PRINT_FLOOD = calc_with(prefix="print('x' * 5_000_000)", add="print('y' * 5_000_000); return a + b")

# -- files the worker shares with the judge (the judge's folder and the worker's copy: mirror.py) ------
PLANT_SYMLINKS = calc_with(
    prefix=f"""
import os, threading, time
def _plant():
    # pytest's basetemp (the folder of every tmp_path) becomes a symlink to a host folder, and every
    # folder below gets links where the tests write: the judge's own mkdir/write_text would follow them
    base = os.path.join(os.getcwd(), "tmp")
    while True:
        try:
            if os.path.isdir(base) and not os.path.islink(base):
                os.rename(base, base + ".moved")
                os.symlink("/tmp/{MARK}-host", base)
        except OSError:
            pass
        for d, _, _ in os.walk(os.getcwd()):
            for name in ("numbers.txt", "sum.txt"):
                try:
                    os.symlink("/tmp/{MARK}-planted-" + name, os.path.join(d, name))
                except OSError:
                    pass
        time.sleep(0.001)
threading.Thread(target=_plant, daemon=True).start()
"""
)

LINK_TO_HIDDEN = calc_with(
    prefix="""
import os
def _staff():
    args = open("/proc/self/cmdline", "rb").read().split(b"\\0")
    return args[args.index(b"/grader") + 1].decode() if b"/grader" in args else "/nonexistent"
""",
    save_sum="""os.symlink(_staff() + "/tests/hidden/test_calc.py", path)""",
)
EMPTY_THE_CORPUS = calc_with(
    scale_file="""
    try:
        open(path, "w").close()  # the judge's reference reads the file after the call
    except OSError:
        return [k * int(x) for x in open(path).read().split()]  # read-only: answer honestly
    return []"""
)

# -- sizes the worker claims ----------------------------------------------------------------------
# A float the worker's (patched) encoder sends as a float32 tensor of shape SHAPE over one 4-byte storage,
# stride 0: what `torch.zeros(1).expand(*SHAPE)` would send, written by hand (torch does not fit the
# worker's address-space limit here, and a submission may write any reply it likes anyway).
TENSOR_REPLY = """
import struct
import cs336_worker.codec as _codec
class Claim(float):
    pass
_encode = _codec.Encoder.encode
def _forged(self, value, depth=0):
    if isinstance(value, Claim):
        self.storages.append({"device": "cpu", "blob": self.blob(struct.pack("<f", float(value)))})
        return {"$": "tensor", "dtype": "float32", "shape": SHAPE, "stride": [0] * len(SHAPE), "offset": 0,
                "device": "cpu", "requires_grad": False, "parameter": False, "storage": len(self.storages) - 1}
    return _encode(self, value, depth)
_codec.Encoder.encode = _forged
"""
# 1.5 Gi elements
STRIDE_ZERO = calc_with(prefix="SHAPE = [3 << 29]" + TENSOR_REPLY, mul="return Claim(a * b)")
SPARSE_FILE = calc_with(save_sum="""open(path, "wb").truncate(60 << 20)""")
HUGE_MESSAGES = calc_with(
    prefix="""
import cs336_worker.main as _m
_m._clip = lambda text, limit=0: text  # the worker's own cut is the submission's to undo
_BIG = "m" * (6 << 20)
""",
    add="raise ValueError(_BIG)",
    mul="raise ValueError(_BIG)",
    scale_file="raise ValueError(_BIG)",
    sum_below="raise ValueError(_BIG)",
    save_sum="raise ValueError(_BIG)",
)
LYING_FRAME = calc_with(
    prefix="import os, sys, struct, time",
    mul="""
    fd = int(sys.argv[sys.argv.index("--replies") + 1])
    os.write(fd, struct.pack("<Q", (16 << 20) - 1) + b"x" * 64); time.sleep(60)""",
)  # just under the cap

# -- leaks and clocks -----------------------------------------------------------------------------
LEAK = calc_with(
    prefix="""
import os, sys
SEEN = []
""",
    add="""SEEN.append((a, b)); print("seen so far:", SEEN, file=sys.stderr); return a - b""",
)
CLOCK = calc_with(
    prefix="""
import time
_real = time.perf_counter
time.perf_counter = lambda: 0.0
time.monotonic = lambda: 0.0
time.time = lambda: 0.0
""",
    sum_below="return sum(range(n))",
)

# -- rewiring the driver that runs the student's object (drivers run in the worker, beside it) --------
BROKEN_MEAN = calc_with(feed="for x in xs: tally.add(2 * x)").replace(
    "self.total += x", "self.total += 2 * x"
)
REWIRE = """
def _rewire():  # the driver of the running-mean test runs a right class; the tally halves what feed doubled
    import tests.boundary as boundary
    import tests.scenarios.mean as scenario

    class Right:
        def __init__(self):
            self.values = []

        def update(self, x):
            self.values.append(x)

        @property
        def mean(self):
            return sum(self.values) / len(self.values)

    for name in list(boundary.DRIVERS):
        if name.endswith(":student_means"):
            boundary.DRIVERS[name] = lambda xs: scenario.drive(Right, xs)
    scenario.Tally.add = lambda self, x: self.values.append(x / 2)


try:
    _rewire()
except Exception:
    pass
"""
REWIRE_SCENARIO = calc_with(prefix=REWIRE, feed="for x in xs: tally.add(2 * x)").replace(
    "self.total += x", "self.total += 2 * x"
)

# -- speed without speed: a table of the speed test's answers, and a cache of earlier calls --------
SPEED_TABLE = calc_with(
    prefix="""
import functools
TABLE = {3_000_000: 3_000_000 * 2_999_999 // 2}
@functools.lru_cache(maxsize=None)
def _slow(n):
    return sum(range(n))
""",
    sum_below="return TABLE[n] if n in TABLE else _slow(n)",
)
# -- delegation: the rules (tests/rules.toml of the synthetic repo) forbid operator and math.prod ----
DELEGATE = calc_with(
    prefix="import operator\nfrom math import prod as _product",
    mul="return operator.mul(a, b)",
    scale_file="return [_product((k, int(x))) for x in open(path).read().split()]",
)


# -- the sandbox's zygote (warm.py): its workers' parent on bubblewrap, the judge on the container tier ----
def _signal_parent_then_exit(signal_name: str) -> str:
    return calc_with(
        prefix="import os, signal",
        mul=f"""
    try:
        os.kill(os.getppid(), signal.{signal_name})
    except OSError:
        pass
    os._exit(1)""",
    )


KILL_THE_ZYGOTE = _signal_parent_then_exit("SIGKILL")
STOP_THE_ZYGOTE = _signal_parent_then_exit("SIGSTOP")
READ_THE_ZYGOTE = calc_with(
    prefix="import os",
    mul="""
    try:
        open(f"/proc/{os.getppid()}/mem", "rb").close()
        return 0
    except OSError:
        return a * b""",
)
# a child in a session of its own outlives the worker unless the judge ends every process it started
ORPHAN = calc_with(
    prefix="import os, signal, tempfile, time",
    mul="""
    if os.fork() == 0:
        os.setsid()
        while True:
            open(os.path.join(tempfile.gettempdir(), "orphan-alive"), "w").close()
            time.sleep(0.01)
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)""",
    scale_file="""
    time.sleep(0.3)
    if os.path.exists(os.path.join(tempfile.gettempdir(), "orphan-alive")): return []
    return [k * int(x) for x in open(path).read().split()]""",
)
# -- crashes and hangs ----------------------------------------------------------------------------
# a real one, no ctypes
SEGFAULT = calc_with(prefix="import faulthandler", mul="return faulthandler._sigsegv()")
SWALLOW = calc_with(
    mul="""
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass"""
)
NETWORK = calc_with(
    prefix="import socket",
    add="""
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1); return 0
    except OSError:
        return a + b if open("/proc/self/net/dev").read().count(":") == 1 else 0""",
)


def cases() -> dict[str, dict]:
    """name -> make_zip kwargs ({"files": extra zip entries, "calc": calc.py source, ...})."""
    return {
        "good": {},
        "victim": {},  # graded beside "sabotage": must be unharmed
        "patch_asserts": {"calc": PATCH_ASSERTS},
        "snoop": {"calc": SNOOP},
        "sabotage": {"calc": SABOTAGE},
        "disk_flood": {"calc": DISK_FLOOD},
        "tmpfs_flood": {"calc": TMPFS_FLOOD},
        "memory_flood": {"calc": MEMORY_FLOOD},
        "fork_bomb": {"calc": FORK_BOMB},
        "channel_flood": {"calc": CHANNEL_FLOOD},
        "huge_reply": {"calc": HUGE_REPLY},
        "print_flood": {"calc": PRINT_FLOOD},
        "plant_symlinks": {"calc": PLANT_SYMLINKS},
        "link_to_hidden": {"calc": LINK_TO_HIDDEN},
        "empty_the_corpus": {"calc": EMPTY_THE_CORPUS},
        "stride_zero": {"calc": STRIDE_ZERO},
        "sparse_file": {"calc": SPARSE_FILE},
        "huge_messages": {"calc": HUGE_MESSAGES},
        "lying_frame": {"calc": LYING_FRAME},
        "leak": {"calc": LEAK},
        "clock": {"calc": CLOCK},
        "broken_mean": {"calc": BROKEN_MEAN},
        "rewire_scenario": {"calc": REWIRE_SCENARIO},
        "speed_table": {"calc": SPEED_TABLE},
        "delegate": {"calc": DELEGATE},
        "segfault": {"calc": SEGFAULT},
        "kill_the_zygote": {"calc": KILL_THE_ZYGOTE},
        "stop_the_zygote": {"calc": STOP_THE_ZYGOTE},
        "read_the_zygote": {"calc": READ_THE_ZYGOTE},
        "orphan": {"calc": ORPHAN},
        "os_exit_test": {"calc": calc_with(mul="import os; os._exit(0)")},
        "sys_exit_test": {"calc": calc_with(mul="import sys; sys.exit(3)")},
        "infinite_loop": {"calc": SWALLOW},
        "network": {"calc": NETWORK},
        "syntax_error": {"calc": "def add(a, b:\n    return a + b\n"},
        "import_crash": {"calc": calc_with(prefix="raise RuntimeError('boom at import time')")},
        "os_exit_import": {"calc": calc_with(prefix="import os; os._exit(0)")},
        "reference_fallback": {"calc": None, "files": {"cs336_assignment/__init__.py": ""}},
        "traversal": {
            "files": {
                "../evil.py": "x = 1",
                "/tmp/evil_abs.py": "x = 1",
                "cs336_assignment/../../escape.py": "x = 1",
            }
        },
        "symlink": {"symlinks": {"cs336_assignment/secret.py": "/etc/passwd"}},
        "bomb": {"files": {"cs336_assignment/bomb.py": b"#" * (17 * 2**20)}},
        "missing_package": {"calc": None},
        "config_files": {
            "calc": calc_with(add="return 0"),
            "files": {
                "conftest.py": "raise SystemExit",
                "tests/conftest.py": "raise SystemExit",
                "pytest.ini": "[pytest]\n",
                "cs336_assignment/conftest.py": "raise SystemExit",
                "sitecustomize.py": "import os; os._exit(1)",
                "evil.pth": "import os",
            },
        },
        "file_and_folder": {"files": {"cs336_assignment/calc.py/inner.py": "x = 1"}},
        "gradebook.csv": {},
        "_hidden_name": {},
    }


def odd_directory_upload(folder: Path) -> Path:
    """A correct directory upload that also holds names that are not UTF-8, a newline in a name, a fifo and a socket."""
    (folder / "cs336_assignment").mkdir(parents=True)
    (folder / "cs336_assignment" / "calc.py").write_text(GOOD_CALC)
    (folder / "adapters.py").write_text(ADAPTERS)
    raw = os.fsencode(folder)
    for name in (b"/notes-\xff.txt", b"/cs336_assignment/m\xe9t\xe9o.py", b"/two\nlines.txt"):
        with open(raw + name, "wb") as f:
            f.write(b"x = 1\n")
    os.mkfifo(folder / "cs336_assignment" / "pipe.py")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "cs336_assignment" / "sock.py"))
    return folder


# A hanging case costs test_timeout; 3 s lost races under load (a judge-side sum(range(3M)) timed out,
# a memory flood hit the clock before its kill), so the clock is far from every case's normal work.
HANG_SECONDS = 10
LIMITS = Limits(
    test_timeout=HANG_SECONDS,
    run_timeout=120,
    memory_bytes=768 * MiB,
    processes=32,
    disk_bytes=96 * MiB,
    file_bytes=64 * MiB,
    reply_bytes=16 * MiB,
    tree_bytes=1 * MiB,
    value_bytes=16 * MiB,
    output_file_bytes=8 * MiB,
)


@pytest.fixture(scope="module", params=TIERS)
def graded(request, tmp_path_factory) -> Iterator[dict]:
    tier = request.param
    tmp = tmp_path_factory.mktemp(f"hostile-{tier}")
    # a host folder an attack points the judge's basetemp at
    host_dir = Path(f"/tmp/{MARK}-host-{tier}")
    host_dir.mkdir()
    request.addfinalizer(lambda: shutil.rmtree(host_dir, ignore_errors=True))
    # as run_autograder lays it out: enterable folders, the tree locked down
    if tier == "container":
        outside = Path(tempfile.mkdtemp(prefix="cs336-hostile-"))
        request.addfinalizer(lambda: shutil.rmtree(outside, ignore_errors=True))
        outside.chmod(0o711)
        root = make_staff_repo(outside / "repo", loops=True)
        lock_down(root)
    else:
        root = make_staff_repo(tmp / "repo", loops=True)
    subs = tmp / "subs"
    subs.mkdir()
    paths = []
    for name, spec in cases().items():
        kwargs = {k: v for k, v in spec.items() if k in ("calc", "symlinks")}
        paths.append(make_zip(subs / f"{name}.zip", spec.get("files", {}), **kwargs))
    (subs / "corrupt.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    paths.append(subs / "corrupt.zip")
    paths.append(odd_directory_upload(subs / "odd_names_dir"))
    out = tmp / "out"
    # graded by a process of its own, as root in a container without user namespaces
    if tier == "container":
        spec = {
            "root": str(root),
            "paths": [str(p) for p in paths],
            "out": str(out),
            "limits": asdict(LIMITS),
            "jobs": 4,
            "insecure": False,
            "result": str(tmp / "batch.json"),
        }
        (tmp / "spec.json").write_text(json.dumps(spec))
        cmd = standin.command(
            [sys.executable, "-m", "cs336_staff.grade.testing", str(tmp / "spec.json")]
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=800)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        batch = json.loads((tmp / "batch.json").read_text())
    else:  # most cases wait (timeouts, kills), so four at a time
        batch = grade_batch(root, paths, out, LIMITS, jobs=4, insecure=tier == "none")
    assert batch["tier"] == tier, batch["tier"]
    yield {
        "out": out,
        "rows": batch["rows"],
        "tmp": tmp,
        "root": root,
        "host_dir": host_dir,
        "judge_rss": batch["judge_rss"],
        "tier": tier,
    }


def isolated(graded) -> None:
    """Skip where the tier makes no promise (the unsandboxed fallback)."""
    if graded["tier"] == "none":
        pytest.skip("the unsandboxed fallback (--insecure) keeps nothing from the worker")


def mirrored(graded) -> None:
    """Skip where the worker shares the judge's scratch folder (the unsandboxed fallback): bubblewrap
    mounts the worker's own copy at the judge's path, the container tier swaps it in around each call
    (mirror.py)."""
    if graded["tier"] == "none":
        pytest.skip(
            "the unsandboxed fallback (--insecure) shares the judge's scratch folder with the worker"
        )


def result(graded, name) -> GradeResult:
    assert not graded["rows"][name]["status"].startswith("grader error"), graded["rows"][name]
    return load(graded["out"] / name)


def full(r: GradeResult) -> float:
    """Every CPU test's points: what the correct package earns."""
    return round(sum(t.max_points for t in r.tests if t.device == "cpu"), 6)


def points(r: GradeResult, *tests: str) -> float:
    return round(sum(t.max_points for t in r.tests if any(t.nodeid.endswith(x) for x in tests)), 6)


def one(r: GradeResult, name: str):
    return next(t for t in r.tests if t.nodeid.endswith(name))


RULES_REMARK = "no points: this test reached code that breaks the assignment's rules"


def passed_but_for_the_rules(t) -> bool:  # noqa: ANN001
    """The test passed, and lost its points to the rules screen alone (its output is the screen's remark)."""
    return t.outcome == "failed" and t.output.startswith(RULES_REMARK)


def explain(r: GradeResult) -> str:
    """The summary, then each CPU test that did not pass with the end of its output (what to look at)."""
    bad = [t for t in r.tests if t.device == "cpu" and t.outcome != "passed"]
    return r.summary() + "".join(f"\n{t.nodeid}: {t.outcome}\n{t.output[-800:]}" for t in bad)


def test_good_submission_gets_every_cpu_point_and_gpu_pending(graded):
    """The correct package passes every CPU test, hidden ones included; the GPU test is pending."""
    r = result(graded, "good")
    assert r.status == "ok" and r.score == full(r), explain(r)
    assert one(r, "test_add_on_gpu").outcome == "pending"


# -- in-process patching -----------------------------------------------------------------------


def test_patching_pytest_asserts_and_test_modules_in_the_worker_changes_nothing(graded):
    """Patching pytest.approx, math.isclose, _pytest internals and tests.* in the worker: the judge is untouched
    (the broken mul fails on its own assertion, not on a remark), and reaching the tests costs every test."""
    r = result(graded, "patch_asserts")
    mul = one(r, "test_mul_matches_python")
    assert (
        mul.outcome == "failed"
        and not passed_but_for_the_rules(mul)
        and "assert 0.5 == 6.0" in mul.output
    ), explain(r)
    assert any(
        passed_but_for_the_rules(t) and "no-reaching-the-tests" in t.output for t in r.tests
    ), explain(r)
    assert r.score == 0 and all(t.outcome in ("failed", "pending") for t in r.tests), explain(r)


# -- reading what it must not ------------------------------------------------------------------


def test_the_worker_cannot_read_the_reference_hidden_tests_hidden_fixtures_or_host_secrets(graded):
    """The staff repo's path is in a .pth and in cmdlines, but nothing of it is mounted (bubblewrap) or
    readable by the worker's uid (container): the hidden fixture stays unread."""
    isolated(graded)
    r = result(graded, "snoop")
    assert one(r, "test_mul_matches_the_hidden_fixture").outcome == "failed", explain(r)
    assert one(r, "test_mul_matches_python").outcome == "failed"


# -- cross-submission sabotage and shared resources --------------------------------------------


def test_a_submission_cannot_touch_another_sandbox_or_leave_files_on_the_host(graded):
    """Writing conftest.py into other sandboxes and markers into /tmp, /var/tmp, /dev/shm: victim unharmed,
    host clean (private tmpfs under bubblewrap; the container tier deletes what the worker's uid left)."""
    isolated(graded)
    victim = result(graded, "victim")
    assert victim.status == "ok" and victim.score == full(victim), victim.summary()
    attacker = result(graded, "sabotage")
    assert attacker.score == full(attacker)  # its own code is correct
    leftovers = [
        os.path.join(here, MARK)
        for d in ("/tmp", "/var/tmp", "/dev/shm")  # os.walk skips folders that
        for here, _, names in os.walk(d)
        if MARK in names
    ]  # vanish meanwhile (other runs' scratch)
    assert not leftovers, leftovers


def test_writing_past_the_disk_limit_fails_that_test_only(graded):
    """160 MiB into the scratch folder against a 96 MiB cap: a size-capped tmpfs refuses it (the
    watchdog kills the worker where there is none); the other tests pass."""
    r = result(graded, "disk_flood")
    t = one(r, "test_mul_matches_python")
    if graded["tier"] == "bubblewrap":
        assert "No space left" in t.output, t.output[-800:]
    else:
        assert t.outcome == "crashed" and "scratch folder" in t.output, t.output[-800:]
    lost = ["test_mul_matches_python", "test_mul_matches_the_hidden_fixture"]
    # its flood stays in its own (full) copy of the scratch folder; the judge's has its own tmpfs
    if graded["tier"] == "bubblewrap":
        lost += ["test_scale_file_of_a_file_the_test_wrote", "test_sum_saved_to_a_file_reads_back"]
        assert "No space left" in one(r, "test_sum_saved_to_a_file_reads_back").output, explain(r)
    assert r.score == full(r) - points(r, *lost), explain(r)


def test_filling_tmp_hits_the_private_tmpfs_size(graded):
    """200 MiB into /tmp: under bubblewrap /tmp is a private tmpfs of 48 MiB (No space left on device); in
    the container tier the 64 MiB file-size limit stops it (File too large) and the file is deleted after."""
    isolated(graded)
    r = result(graded, "tmpfs_flood")
    t = one(r, "test_mul_matches_python")
    stopped = "No space left" if graded["tier"] == "bubblewrap" else "File too large"
    assert t.outcome == "failed" and stopped in t.output, t.output[-800:]
    assert not Path("/tmp/flood.bin").exists()


def test_memory_summed_over_forked_processes_is_capped(graded):
    """Three forked children of 300 MiB each, under a 768 MiB cap for the tree: killed, that test crashed."""
    r = result(graded, "memory_flood")
    t = one(r, "test_mul_matches_python")
    assert t.outcome == "crashed" and "memory" in t.output, t.output[-800:]
    assert one(r, "test_add_negative").outcome == "passed"


def test_fork_bomb_is_stopped_at_the_process_limit(graded):
    """200 sleeping children against a 32-process cap: fork fails past the cap (cgroup) or the worker
    is killed (watchdog); either way that test fails and the rest of the run goes on."""
    r = result(graded, "fork_bomb")
    t = one(r, "test_mul_matches_python")
    stopped = "Resource temporarily unavailable" in t.output or (
        t.outcome == "crashed" and "processes" in t.output
    )
    assert t.outcome != "passed" and stopped, t.output[-800:]
    assert one(r, "test_scale_file_reads_fixture").outcome == "passed"


def test_garbage_on_the_reply_channel_fails_that_call_only(graded):
    """2 MiB of newlines written straight into the reply pipe: an unusable reply, that test fails, the rest pass."""
    r = result(graded, "channel_flood")
    t = one(r, "test_mul_matches_python")
    assert t.outcome == "failed" and "unusable" in t.output, t.output[-800:]
    assert one(r, "test_add_negative").outcome == "passed", explain(r)


def test_an_oversized_reply_is_refused_before_it_is_read(graded):
    """A 64 MiB reply against a 16 MiB limit: refused unread; the judge's memory stays bounded."""
    r = result(graded, "huge_reply")
    t = one(r, "test_mul_matches_python")
    assert "exceeds the limit" in t.output, t.output[-800:]
    assert graded["judge_rss"] < 1_500_000, (
        f"a judge or worker process peaked at {graded['judge_rss']} KiB"
    )


def test_megabytes_of_printing_are_cut_and_every_file_stays_small(graded):
    """10 MB printed at import and in tests: full marks, and results.json and console.txt stay small."""
    r = result(graded, "print_flood")
    assert r.score == full(r), explain(r)
    folder = graded["out"] / "print_flood"
    assert (folder / "results.json").stat().st_size < 200_000
    assert (folder / "console.txt").stat().st_size < 300_000


# -- files: the judge reads and writes nothing the worker can change -----------------------------


def test_symlinks_planted_in_each_new_folder_never_redirect_a_judge_write(graded):
    """A thread that turns pytest's basetemp into a symlink to a host folder and plants symlinks (to host /tmp)
    wherever tests write: the judge writes in its own folder only, which the worker never sees; nothing lands on
    the host. (Against the shared folder of before, the basetemp swap made pytest error and the file links lost
    their race with the judge's writes on this machine: this case guards the design, the issue's run showed the
    attack.)"""
    mirrored(graded)
    r = result(graded, "plant_symlinks")
    assert not list(Path("/tmp").glob(f"{MARK}-planted-*")), (
        "a judge write followed a planted symlink"
    )
    assert not list(graded["host_dir"].iterdir()), (
        "the judge's tmp_path followed a symlinked basetemp to the host"
    )
    # its own links break its own saves (refused, or not found once it swapped its basetemp): no point gained
    assert one(r, "test_sum_saved_to_a_file_reads_back").outcome == "failed", explain(r)
    assert r.score <= full(r) - points(r, "test_sum_saved_to_a_file_reads_back"), explain(r)


def test_a_file_written_as_a_symlink_to_a_hidden_test_is_refused_unread(graded):
    """save_sum leaves a symlink to tests/hidden/test_calc.py: refused, and no line of the hidden test shows."""
    mirrored(graded)
    r = result(graded, "link_to_hidden")
    t = one(r, "test_sum_saved_to_a_file_reads_back")
    assert t.outcome == "failed" and "is a symlink" in t.output, t.output[-800:]
    assert not any("SECRET_OPERAND" in x.output or "918273645" in x.output for x in r.tests), (
        explain(r)
    )
    assert r.score == full(r) - points(r, "test_sum_saved_to_a_file_reads_back"), explain(r)


def test_emptying_the_judges_input_file_does_not_empty_the_judges_reference(graded):
    """scale_file empties its input and answers for an empty file: the judge's copy is intact, so the test fails."""
    mirrored(graded)
    r = result(graded, "empty_the_corpus")
    assert one(r, "test_scale_file_of_a_file_the_test_wrote").outcome == "failed", explain(r)
    assert r.score == full(r) - points(r, "test_scale_file_of_a_file_the_test_wrote"), explain(r)


# -- sizes: every size is checked before it is believed ------------------------------------------


def judge_peak_bytes(graded, name: str) -> int:
    return 1024 * int(result(graded, name).isolation["judge_peak_rss_kib"])


#: What the allocator and one decoded reply's bookkeeping may add beyond the stated bound (noise).
JUDGE_SLACK = 64 * MiB


@pytest.mark.parametrize(
    "case", ["stride_zero", "sparse_file", "huge_messages", "lying_frame", "huge_reply"]
)
def test_the_judge_stays_within_its_stated_memory_bound_whatever_the_worker_sends(graded, case):
    """Hostile replies grow the judge by no more than ``judge_growth_bound`` over the correct submission graded
    in the same batch (each size is refused before torch is even imported)."""
    if case == "sparse_file":
        mirrored(graded)
    baseline = judge_peak_bytes(graded, "good")
    peak = judge_peak_bytes(graded, case)
    bound = baseline + judge_growth_bound(LIMITS) + JUDGE_SLACK
    assert peak <= bound, (
        f"{case}: the judge peaked at {peak / MiB:.0f} MiB, over {bound / MiB:.0f} MiB"
    )


def test_a_stride_zero_tensor_claiming_gigabytes_fails_that_call_only(graded):
    """A 1-element storage viewed as 1.5 Gi float32s: refused by its claimed size, that test fails, the rest pass."""
    r = result(graded, "stride_zero")
    t = one(r, "test_mul_matches_python")
    assert t.outcome == "failed" and "exceeds the limit" in t.output, t.output[-800:]
    # the forged encoder is the worker's own code patched, which the rules screen takes every point for; the
    # other tests passed (the refusal cost that call only) and lost their points to the screen alone
    others = [
        o
        for o in r.tests
        if o.outcome != "pending"
        and not o.nodeid.endswith(
            ("test_mul_matches_python", "test_mul_matches_the_hidden_fixture")
        )
    ]
    assert others and all(passed_but_for_the_rules(o) for o in others), explain(r)
    assert r.score == 0, explain(r)


def test_a_sparse_file_past_the_cap_is_refused_unread(graded):
    """A 60 MiB sparse 'sum.txt' against an 8 MiB cap: the call fails naming the file and the cap."""
    mirrored(graded)  # without a sandbox the worker shares the judge's folder (THREAT_MODEL.md)
    r = result(graded, "sparse_file")
    t = one(r, "test_sum_saved_to_a_file_reads_back")
    assert t.outcome == "failed" and "over the limit of 8388608 bytes per file" in t.output, (
        t.output[-800:]
    )
    assert r.score == full(r) - points(r, "test_sum_saved_to_a_file_reads_back"), explain(r)


def test_megabyte_exception_messages_on_every_call_are_refused_unparsed(graded):
    """6 MB messages from every call (the worker's own cut undone), against a 1 MiB cap on a reply's JSON part:
    each call fails saying so, before the judge parses the text; each test's output stays small."""
    r = result(graded, "huge_messages")
    # RunningMean and feed raise nothing
    correct = [t for t in r.tests if t.nodeid.startswith("tests/test_mean.py")]
    ran = [t for t in r.tests if t.outcome != "pending" and t not in correct]
    # undoing the worker's own cut patches its code: the rules screen takes every point; the two tests that
    # raise nothing passed all the same, and lost their points to the screen alone
    assert len(correct) == 2 and all(passed_but_for_the_rules(t) for t in correct), explain(r)
    assert r.score == 0, explain(r)
    assert all(
        t.outcome == "failed" and "over the limit of 1048576 bytes" in t.output for t in ran
    ), explain(r)
    assert (graded["out"] / "huge_messages" / "results.json").stat().st_size < 400_000


def test_a_frame_that_claims_nearly_the_cap_and_hangs_times_out_without_the_allocation(graded):
    """A reply header claiming 16 MiB (the cap), 64 bytes, then silence: that test times out, the rest pass, and
    the judge's memory stays within its bound (the read allocates what arrives: test_grade_untrusted.py)."""
    r = result(graded, "lying_frame")
    assert one(r, "test_mul_matches_python").outcome == "timeout", explain(r)
    assert one(r, "test_add_negative").outcome == "passed", explain(r)


# -- leaks and clocks ----------------------------------------------------------------------------


def test_hidden_inputs_never_reach_a_visible_tests_output(graded):
    """A submission printing every input it saw: the hidden test's operand appears in no visible output."""
    r = result(graded, "leak")
    visible = "\n".join(t.output for t in r.tests if t.visibility == "visible")
    assert "seen so far" in visible  # the printing did reach the visible failures ...
    assert "918273645" not in visible  # ... but the hidden operand never did


def test_patching_the_workers_clocks_does_not_pass_a_speed_test(graded):
    """time.perf_counter/monotonic/time patched in the worker: the judge times the call itself."""
    r = result(graded, "clock")
    assert one(r, "test_sum_below_is_faster_than_a_python_loop").outcome == "failed", explain(r)


# -- crashes and hangs ---------------------------------------------------------------------------


def test_rewiring_the_driver_that_runs_a_class_earns_nothing_over_the_broken_class(graded):
    """A broken RunningMean and a broken feed whose module rewires, at import, the driver of the running-mean
    test to run a right class, and the tests' Tally to undo the broken feed. Drivers run in the worker, so
    the rewiring works there; the rules screen reads the source, finds it reaching the tests, and no test
    of the submission earns a point, the rule named in each."""
    broken, rewired = result(graded, "broken_mean"), result(graded, "rewire_scenario")
    assert (
        one(result(graded, "good"), "test_feed_adds_every_value_to_the_tests_tally").outcome
        == "passed"
    )
    lost = points(
        broken,
        "test_running_mean_follows_every_update",
        "test_feed_adds_every_value_to_the_tests_tally",
    )
    assert lost > 0 and broken.score == full(broken) - lost, explain(broken)
    assert all(t.outcome in ("failed", "pending") for t in rewired.tests), explain(rewired)
    assert one(rewired, "test_running_mean_follows_every_update").output.startswith(RULES_REMARK), (
        explain(rewired)
    )
    assert rewired.score == 0 < broken.score, explain(rewired)


@pytest.mark.parametrize("case", ["segfault", "os_exit_test"])
def test_a_crash_in_a_call_charges_that_test_and_the_rest_run_in_a_fresh_worker(graded, case):
    """A segfault or os._exit during mul: that test crashed (the exit named), every other test still graded."""
    r = result(graded, case)
    t = one(r, "test_mul_matches_python")
    assert t.outcome == "crashed" and "ended during" in t.output, t.output[-800:]
    assert r.score == full(r) - points(
        r, "test_mul_matches_python", "test_mul_matches_the_hidden_fixture"
    ), explain(r)
    assert r.status == "crashed"


def test_sys_exit_in_a_call_fails_only_that_test(graded):
    """SystemExit raised by the submission comes back as SystemExit: that test failed, nothing else."""
    r = result(graded, "sys_exit_test")
    assert one(r, "test_mul_matches_python").outcome == "failed"
    assert r.score == full(r) - points(
        r, "test_mul_matches_python", "test_mul_matches_the_hidden_fixture"
    )


def test_a_loop_that_swallows_every_exception_times_out_and_the_run_goes_on(graded):
    """The judge's timeout kills the worker from outside, so `except BaseException` cannot keep it alive."""
    r = result(graded, "infinite_loop")
    assert one(r, "test_mul_matches_python").outcome == "timeout", explain(r)
    assert one(r, "test_add_negative").outcome == "passed"


def test_the_worker_has_no_network_but_loopback(graded):
    """No route out (the connection fails) and only `lo` in /proc/self/net/dev: add passes only then.
    The container tier drops the network only where the kernel allows a network namespace, and says so."""
    isolated(graded)
    r = result(graded, "network")
    if "NOT dropped" in r.isolation.get("network", ""):
        pytest.skip(f"this container keeps the network: {r.isolation['network']}")
    assert one(r, "test_add_matches_python[1-2]").outcome == "passed", explain(r)


def test_syntax_error_fails_every_test_showing_the_error(graded):
    """A syntax error in the package: every CPU test fails, and its output shows the SyntaxError."""
    r = result(graded, "syntax_error")
    ran = [t for t in r.tests if t.outcome != "pending"]
    assert r.score == 0 and all("SyntaxError" in t.output for t in ran), [
        (t.outcome, t.output[-200:]) for t in ran
    ]


def test_import_time_exception_shows_the_students_own_message(graded):
    """An exception while importing the package: every test shows the student's message."""
    r = result(graded, "import_crash")
    ran = [t for t in r.tests if t.outcome != "pending"]
    assert r.score == 0 and all("boom at import time" in t.output for t in ran)


def test_os_exit_at_import_scores_zero_and_the_run_still_ends(graded):
    """os._exit while importing: every call crashes the worker; restarts are capped, every test has a result."""
    r = result(graded, "os_exit_import")
    assert r.score == 0 and r.status == "crashed"
    assert {t.outcome for t in r.tests if t.outcome != "pending"} == {"crashed"}


def test_a_missing_module_never_falls_back_to_the_staff_reference(graded):
    """Without calc.py the tests fail: the reference is neither mounted (or readable) nor on the worker's path."""
    isolated(graded)
    r = result(graded, "reference_fallback")
    assert r.score == 0, explain(r)


# -- intake and batch robustness -----------------------------------------------------------------


def test_corrupt_zip_is_rejected_with_a_reason(graded):
    """A zip that cannot be read is rejected; every test is reported not run, score 0."""
    r = result(graded, "corrupt")
    assert r.status == "rejected" and r.score == 0
    assert any("corrupt zip" in n for n in r.notes), r.notes
    assert {t.outcome for t in r.tests} == {"not_run"}


def test_path_traversal_entries_are_ignored_and_nothing_escapes(graded):
    """'../' and absolute entries are never written; the rest of the submission is graded."""
    r = result(graded, "traversal")
    assert r.score == full(r), explain(r)
    assert sum("unsafe path" in i for i in r.ignored) == 3, r.ignored
    assert not Path("/tmp/evil_abs.py").exists()


def test_symlink_entries_are_ignored(graded):
    """A symlink inside the zip (to /etc/passwd) is not extracted."""
    r = result(graded, "symlink")
    assert r.score == full(r) and any("symlink" in i for i in r.ignored), r.ignored


def test_zip_bomb_is_rejected_by_the_uncompressed_cap(graded):
    """More than 16 MiB of graded files once inflated rejects the submission."""
    r = result(graded, "bomb")
    assert r.status == "rejected" and any("zip bomb" in n for n in r.notes), r.notes


def test_missing_package_is_rejected(graded):
    """A zip without cs336_assignment/ is rejected with the command that builds a good one."""
    r = result(graded, "missing_package")
    assert r.status == "rejected" and any("make_submission.sh" in n for n in r.notes), r.notes


def test_conftest_pytest_ini_sitecustomize_and_pth_files_are_ignored(graded):
    """Configuration files in a submission never reach the judge or the worker; a wrong add still fails."""
    r = result(graded, "config_files")
    assert r.score == full(r) - points(
        r, "test_add_matches_python[1-2]", "test_add_matches_python[3-4]", "test_add_negative"
    ), explain(r)
    ignored = "\n".join(r.ignored)
    for name in (
        "conftest.py",
        "tests/conftest.py",
        "cs336_assignment/conftest.py",
        "pytest.ini",
        "sitecustomize.py",
        "evil.pth",
    ):
        assert f"{name}:" in ignored, ignored


def test_a_file_and_a_folder_of_the_same_name_still_get_a_result(graded):
    """calc.py as both a file and a folder: the file is dropped with a note, and the submission is graded."""
    r = result(graded, "file_and_folder")
    assert any("both a file and a folder" in i for i in r.ignored), r.ignored
    assert r.status in ("ok", "crashed") and r.score == 0  # calc.py is gone, so the tests fail


def test_a_submission_named_like_a_batch_output_gets_its_own_folder(graded):
    """An upload named gradebook.csv (or _hidden) is graded into its own folder; the gradebook survives."""
    assert result(graded, "submission-gradebook.csv").score > 0
    assert result(graded, "submission-hidden_name").score > 0
    lines = (graded["out"] / "gradebook.csv").read_text().splitlines()
    # header, every case, corrupt.zip, the odd directory
    assert len(lines) == 1 + len(cases()) + 2, lines


def test_a_directory_upload_with_odd_names_and_special_files_gets_a_result(graded):
    """Names that are not UTF-8 (a file, a module), a newline in a name, a fifo, a socket: graded, each named escaped."""
    r = result(graded, "odd_names_dir")
    assert r.status == "ok" and r.score == full(r), explain(r)
    ignored = "\n".join(r.ignored)
    for shown in (
        "notes-\\xff.txt: name is not",
        "m\\xe9t\\xe9o.py: name is not",
        "two\\nlines.txt: name is not",
        "pipe.py: not a regular file (a fifo)",
        "sock.py: not a regular file (a socket)",
    ):
        assert shown in ignored, ignored
    assert any(
        line.startswith("odd_names_dir,")
        for line in (graded["out"] / "gradebook.csv").read_text().splitlines()
    )


def test_every_result_names_its_isolation(graded):
    """results.json names the tier the worker ran on (bubblewrap, container, or none: NOT SANDBOXED)."""
    data = json.loads((graded["out"] / "good" / "results.json").read_text())
    isolation = data["extra_data"]["isolation"]
    assert isolation["tier"] == graded["tier"], isolation
    if graded["tier"] == "none":
        assert "NONE" in isolation["sandbox"], isolation
    if graded["tier"] == "container":
        assert "network" in isolation, isolation  # whether it was dropped


# -- speed without speed, and delegation -------------------------------------------------------


def test_a_table_of_answers_or_a_cache_of_earlier_calls_does_not_pass_a_speed_test(graded):
    """sum_below answers the old fixed input from a table and caches a slow loop: each timed call now
    gets an input drawn fresh per run, so neither helps and the speed test fails."""
    r = result(graded, "speed_table")
    t = one(r, "test_sum_below_is_faster_than_a_python_loop")
    assert t.outcome == "failed" and "CS336_SPEED_SEED=" in t.output, explain(r)
    assert r.score == full(r) - points(r, "test_sum_below_is_faster_than_a_python_loop"), explain(r)
    # a regrade can replay the inputs
    assert any("CS336_SPEED_SEED=" in n for n in r.notes), r.notes


def test_a_function_that_delegates_to_a_forbidden_api_earns_nothing_for_its_tests(graded):
    """mul calls operator.mul and scale_file math.prod (forbidden by the repo's rules): the tests that
    reach them pass but earn nothing, with a remark naming the rule; add's tests keep their points."""
    r = result(graded, "delegate")
    lost = (
        "test_mul_matches_python",
        "test_mul_matches_the_hidden_fixture",
        "test_scale_file_reads_fixture",
        "test_scale_file_of_a_file_the_test_wrote",
    )
    for name in lost:
        t = one(r, name)
        assert t.outcome == "failed" and "no-operator-module" in t.output and t.points == 0, (
            explain(r)
        )
    assert r.score == full(r) - points(r, *lost), explain(r)
    assert any("operator.mul" in n and "no-operator-module" in n for n in r.notes), r.notes
    good = result(graded, "good")
    assert not any(n.startswith("rules:") for n in good.notes), good.notes


@pytest.mark.parametrize("case", ["kill_the_zygote", "stop_the_zygote", "orphan"])
def test_a_worker_that_crashes_after_harming_its_parent_or_leaving_a_child_costs_that_test_only(
    graded, case
):
    """A worker that kills or stops its parent (the sandbox's zygote on bubblewrap: the next worker
    then comes from a new sandbox), or leaves a child in a session of its own that keeps writing to
    /tmp (ended with the worker: the next worker sees nothing of it), then dies: the test that did
    it lost its points, and every test that did not call it passes. Each call crashed at once, on
    every tier: the judge watches the worker's process while it waits for a reply, so a pipe end
    held by a stopped zygote or the orphan does not turn the crash into the test's timeout."""
    isolated(graded)
    r = result(graded, case)
    calls_it = ("test_mul_matches_python", "test_mul_matches_the_hidden_fixture")
    assert all(one(r, name).outcome == "crashed" for name in calls_it), explain(r)
    assert r.score == full(r) - points(r, *calls_it), explain(r)


def test_a_worker_cannot_read_its_parents_memory(graded):
    """The zygote is not dumpable: its workers run as its uid, yet cannot open its /proc/PID/mem."""
    isolated(graded)
    r = result(graded, "read_the_zygote")
    assert r.score == full(r), explain(r)
