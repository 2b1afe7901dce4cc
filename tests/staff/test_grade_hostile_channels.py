"""Nothing passes between submissions: a writer and a reader, graded together and in consecutive batches.

The writer records every input its worker is given (the hidden tests' secret operand among them) and
leaves it everywhere a later or concurrent worker of the same machine might look: a sticky folder
three deep in /tmp, a world-writable folder below a root-owned one, /var/tmp, /dev/shm, /run/lock, a
SysV shared memory segment, and a process of its own (its own session, its stdio closed) that keeps
rewriting those files and serves the inputs on an abstract unix socket. The reader looks in every one
of those places, opens the writer's results.json in each batch's output folder and the writer's
upload, and shows all it found in its visible tests' output. Graded together (one batch, two at a
time), then the writer alone and the reader alone in the next batch, per isolation tier
(``test_grade_hostile.TIERS``): the reader's output holds nothing of the writer's, and each open of a
result or an upload failed. The writer's own output shows that each channel was written (where the tier
lets it), so the checks cannot pass for want of a leak to find. On the container tier a batch of
uploads other users could open is refused first, and every worker's uid differs from every other's.
"""

from __future__ import annotations

import json
import shutil
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
from cs336_staff.grade.report import GradeResult, load
from cs336_staff.grade.testing import calc_with, grade_batch, make_staff_repo, make_zip
from tests.staff.long_checks import long_check
from tests.staff.test_grade_hostile import LIMITS, SANDBOX, STANDIN

pytestmark = [pytest.mark.staff, pytest.mark.timeout(900)]

TIERS = [
    pytest.param(
        "bubblewrap",
        marks=[
            pytest.mark.skipif(SANDBOX is not None, reason=f"no bubblewrap here: {SANDBOX}"),
            long_check("the writer and reader batches on bubblewrap"),
        ],
    ),
    pytest.param(
        "container",
        marks=[
            pytest.mark.skipif(STANDIN is not None, reason=f"no container stand-in: {STANDIN}"),
            long_check("the writer and reader batches on the container tier"),
        ],
    ),
]
MARK = f"cs336-channel-{uuid.uuid4().hex[:8]}"
SECRET = "918273645"  # the hidden test's operand (testing.HIDDEN_TESTS)
KEY = 0x0C5336  # the writer's SysV key

WRITER = calc_with(
    prefix=f"""
import ctypes, os, socket, time
MARK, SHARED = {MARK!r}, SHARED_DIR
FILES = ["/tmp/" + MARK + "-deep/a/b/leak", SHARED + "/" + MARK, "/var/tmp/" + MARK,
         "/dev/shm/" + MARK, "/run/lock/" + MARK]
SEEN = []
STARTED = []

def _write_all(text):
    report = []
    for f in FILES:
        try:
            d = os.path.dirname(f)
            if "-deep" in f:
                os.makedirs(d, exist_ok=True)
                for x in (d, os.path.dirname(d), os.path.dirname(os.path.dirname(d))):
                    os.chmod(x, 0o1777)
            with open(f, "w") as fh:
                fh.write(text)
            os.chmod(f, 0o666)
            report.append(f + ": wrote")
        except OSError as e:
            report.append(f + ": " + type(e).__name__)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        shmid = libc.shmget({KEY}, 4096, 0o1000 | 0o666)
        addr = libc.shmat(shmid, None, 0)
        if shmid < 0 or addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "shm")
        data = text.encode()[:4000] + b"\\0"
        ctypes.memmove(addr, data, len(data))
        report.append("sysv: wrote")
    except OSError as e:
        report.append("sysv: " + type(e).__name__)
    return report

def _daemon():
    # the leftover process: its own session, stdio closed, rewriting the files, serving on @MARK
    os.setsid()
    fd = os.open("/dev/null", os.O_RDWR)
    for k in (0, 1, 2):
        os.dup2(fd, k)
    os.closerange(3, 4096)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\\0" + MARK)
    srv.listen(8)
    srv.settimeout(0.1)
    while True:
        try:
            text = open(os.environ.get("HOME", "/tmp") + "/seen").read()
        except OSError:
            text = ""
        if text:
            _write_all(text)
        try:
            conn, _ = srv.accept()
            conn.sendall(text.encode())
            conn.close()
        except OSError:
            pass

def _record(args):
    SEEN.append(args)
    text = MARK + " saw " + repr(SEEN)
    with open(os.environ.get("HOME", "/tmp") + "/seen", "w") as fh:
        fh.write(text)
    report = _write_all(text)
    if not STARTED:
        STARTED.append(1)
        if os.fork() == 0:
            try:
                if os.fork() == 0:
                    _daemon()
            finally:
                os._exit(0)
        os.wait()
        time.sleep(0.3)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0" + MARK)
        s.close()
        report.append("socket: served")
    except OSError as e:
        report.append("socket: " + type(e).__name__)
    return report
""",
    add="""report = _record((a, b)); raise ValueError("writer: " + "; ".join(report))""",
    mul="""_record((a, b)); return a * b""",
)

READER = calc_with(
    prefix=f"""
import ctypes, os, socket, time
MARK, SHARED, PATHS = {MARK!r}, SHARED_DIR, OPEN_PATHS

def _read(p):
    try:
        if os.path.isdir(p):
            return p + " listed " + repr(os.listdir(p))
        with open(p, "rb") as fh:
            return p + " opened " + repr(fh.read(300))
    except OSError as e:
        return p + ": " + type(e).__name__

def _look():
    found = [_read(p) for p in PATHS]
    for top in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        try:
            names = [n for n in os.listdir(top) if MARK in n]
        except OSError:
            continue
        for name in names:
            found.append(_read(os.path.join(top, name)))
            for d, dirs, files in os.walk(os.path.join(top, name)):
                found += [_read(os.path.join(d, f)) for f in files]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        lines = open("/proc/sysvipc/shm").read().splitlines()[1:]
        for shmid in [int(line.split()[1]) for line in lines]:
            addr = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
            if addr not in (None, ctypes.c_void_p(-1).value):
                found.append("sysv " + str(shmid) + " read " + repr(ctypes.string_at(addr, 200)))
    except OSError as e:
        found.append("sysv: " + type(e).__name__)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect("\\0" + MARK)
        found.append("socket read " + repr(s.recv(4000)))
    except OSError as e:
        found.append("socket: " + type(e).__name__)
    found += [line for line in open("/proc/self/status").read().splitlines() if "NoNewPrivs" in line]
    return found
""",
    add="""raise ValueError("reader found: " + " | ".join(_look()))""",
)


def program(source: str, shared: Path, paths: list[str]) -> str:
    return source.replace("SHARED_DIR", repr(str(shared))).replace("OPEN_PATHS", repr(paths))


def grade(tier: str, root: Path, paths: list[Path], out: Path, work: Path) -> dict | str:
    """One batch (two at a time) on ``tier``: the rows, or on the container tier what the grader said
    when it failed."""
    if tier == "container":
        spec = {
            "root": str(root),
            "paths": [str(p) for p in paths],
            "out": str(out),
            "limits": asdict(LIMITS),
            "jobs": 2,
            "insecure": False,
            "result": str(work / f"{out.name}.json"),
        }
        (work / f"{out.name}-spec.json").write_text(json.dumps(spec))
        cmd = standin.command(
            [sys.executable, "-m", "cs336_staff.grade.testing", str(work / f"{out.name}-spec.json")]
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=800)
        if proc.returncode != 0:
            return proc.stdout[-3000:] + proc.stderr[-3000:]
        batch = json.loads((work / f"{out.name}.json").read_text())
    else:
        batch = grade_batch(root, paths, out, LIMITS, jobs=2, insecure=False)
    assert batch["tier"] == tier, batch["tier"]
    return batch


@pytest.fixture(scope="module", params=TIERS)
def graded(request) -> Iterator[dict]:
    tier = request.param
    # enterable folders, as a grading machine's may be: only what the grader closes is closed
    outside = Path(tempfile.mkdtemp(prefix="cs336-channels-"))
    request.addfinalizer(lambda: shutil.rmtree(outside, ignore_errors=True))
    outside.chmod(0o711)
    root = make_staff_repo(outside / "repo", loops=True)
    if tier == "container":
        lock_down(root)
    # a world-writable folder below a root-owned one, as a system may have
    shared = Path(tempfile.mkdtemp(prefix=f"{MARK}-sys-"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)
    (shared / "pub").mkdir(mode=0o777)
    (shared / "pub").chmod(0o1777)
    batches = {"together": ["writer", "reader"], "first": ["writer"], "then": ["reader"]}
    outs = {b: outside / f"out-{b}" for b in batches}
    subs = {b: outside / f"subs-{b}" for b in batches}
    secrets = [str(outs[b] / "writer" / "results.json") for b in batches]
    secrets += [str(subs[b] / "writer.zip") for b in batches] + [str(o) for o in outs.values()]
    sources = {
        "writer": program(WRITER, shared / "pub", []),
        "reader": program(READER, shared / "pub", secrets),
    }
    found: dict[str, dict[str, GradeResult]] = {}
    for batch, names in batches.items():
        subs[batch].mkdir(mode=0o755)
        paths = [make_zip(subs[batch] / f"{n}.zip", {}, calc=sources[n]) for n in names]
        for p in paths:
            p.chmod(0o644)
        got = grade(tier, root, paths, outs[batch], outside)
        assert not isinstance(got, str), got
        found[batch] = {n: load(outs[batch] / n) for n in got["rows"]}
    modes = {str(p): p.stat().st_mode & 0o777 for p in [*subs.values(), *outs.values()]}
    modes.update({str(p): p.stat().st_mode & 0o777 for d in subs.values() for p in d.iterdir()})
    yield {"tier": tier, "results": found, "secrets": secrets, "modes": modes, "earlier": secrets}


def output(r: GradeResult, visibility: str = "visible") -> str:
    return "\n".join(t.output for t in r.tests if t.visibility == visibility)


@pytest.mark.parametrize("batch", ["together", "then"])
def test_the_reader_sees_nothing_of_the_writer_and_opens_no_result_or_upload(graded, batch):
    """Graded beside the writer, or in the batch after it: the reader's visible output holds neither the
    writer's mark nor the hidden operand the writer saw, and each result, output folder or upload it tried
    failed to open."""
    seen = output(graded["results"][batch]["reader"])
    assert "reader found" in seen, seen[-2000:]  # the reader ran and reported
    assert SECRET not in seen and f"{MARK} saw" not in seen, seen[-3000:]
    for path in graded["secrets"]:
        assert f"{path}: PermissionError" in seen or f"{path}: FileNotFoundError" in seen, (
            path,
            seen[-3000:],
        )
    assert "socket read" not in seen and "sysv " not in seen.replace("sysv: ", ""), seen[-3000:]


def test_the_writer_did_write_every_channel_its_tier_offers(graded):
    """The control: the writer's visible output says each file, its SysV segment and its socket were
    written (on bubblewrap the folders are its own tmpfs; /var/tmp and /run/lock are not there), and its
    hidden test did hand it the secret operand."""
    writer = graded["results"]["first"]["writer"]
    seen = output(writer)
    assert "sysv: wrote" in seen and "socket: served" in seen, seen[-3000:]
    assert f"/tmp/{MARK}-deep/a/b/leak: wrote" in seen and f"/dev/shm/{MARK}: wrote" in seen, seen[
        -3000:
    ]
    if graded["tier"] == "container":
        for where in ("/var/tmp/", "/run/lock/", "/pub/"):
            assert f"{where}{MARK}: wrote" in seen, (where, seen[-3000:])
    assert any(t.outcome != "passed" for t in writer.tests if t.visibility != "visible")


def test_the_worker_runs_with_no_new_privs(graded):
    """/proc/self/status in the worker says NoNewPrivs: 1 (a setuid binary gives it nothing)."""
    seen = output(graded["results"]["then"]["reader"])
    assert "NoNewPrivs:\t1" in seen, seen[-2000:]


def test_the_uploads_and_the_output_folders_are_the_graders_alone_on_the_container_tier(graded):
    """The container tier's worker is another user of the machine: the output folder becomes 0700 and the
    uploads (0644 in a 0755 folder here) lose every permission of others; in the last batch the reader's
    opens of the earlier batches' results and uploads, all there, were refused."""
    if graded["tier"] != "container":
        pytest.skip("bubblewrap mounts neither the uploads nor the output folder")
    assert {m for p, m in graded["modes"].items() if "/out-" in p} == {0o700}, graded["modes"]
    assert {m for p, m in graded["modes"].items() if p.endswith(".zip")} == {0o600}, graded["modes"]
    seen = output(graded["results"]["then"]["reader"])
    for path in graded["secrets"]:
        if "-then" not in path:
            assert f"{path}: PermissionError" in seen, (path, seen[-3000:])


def test_no_two_workers_share_a_uid_across_batches(graded):
    """Every worker of every submission of every batch ran as a uid of its own."""
    if graded["tier"] != "container":
        pytest.skip("bubblewrap runs every worker as uid 65534 of a user namespace of its own")
    uids = [
        r.isolation["sandbox"].rsplit("uid ", 1)[1]
        for rows in graded["results"].values()
        for r in rows.values()
    ]
    assert len(uids) == 4 and len(set(uids)) == 4, uids
