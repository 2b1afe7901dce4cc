"""The container tier's parts, one at a time (the whole tier is graded in test_grade_hostile.py).

Each needs root (switching uid, chown): skipped with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cs336_staff.grade import container, standin
from cs336_staff.grade.limits import uid_pids
from cs336_staff.grade.mirror import Mirror, MirrorRefused, layout
from cs336_staff.grade.testing import make_staff_repo

pytestmark = [
    pytest.mark.staff,
    pytest.mark.skipif(os.geteuid() != 0, reason="the container tier needs root (it switches uid)"),
]


@pytest.fixture
def claim():
    c = container.Claim.take()
    yield c
    c.release()


@pytest.fixture
def enterable():
    """A folder other users may pass through (pytest's tmp_path is 0700, as root's folders should be)."""
    base = Path(tempfile.mkdtemp(prefix="cs336-container-test-"))
    base.chmod(0o711)
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=False)


def as_uid(uid: int, *argv: str) -> subprocess.CompletedProcess:
    """Run a system binary as ``uid`` (this machine's Python may live where other users cannot go)."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        preexec_fn=container.become(uid, uid, 16, False),
    )


def check(root: Path, public: list[Path]) -> str | None:
    """``check_staff_hidden`` where a fresh uid can run this Python: here, or inside the stand-in."""
    code = (
        "import json, sys; from pathlib import Path; from cs336_staff.grade import container; "
        "print(json.dumps(container.check_staff_hidden(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])))"
    )
    argv = [sys.executable, "-c", code, str(root), *map(str, public)]
    if standin.unavailable() is None:
        argv = standin.command(argv)
    r = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2]
    )
    assert r.returncode == 0, r.stderr[-2000:]
    why = json.loads(r.stdout.strip().splitlines()[-1])
    if why is not None and "cannot run the grader's Python" in why:
        pytest.skip(f"no stand-in here and this Python is closed to other users: {why}")
    return why


def test_a_claimed_uid_is_unused_and_two_claims_differ(claim):
    """No account and no process has the uid; a second claim while the first is held gets another."""
    other = container.Claim.take()
    try:
        assert claim.uid != other.uid
        assert claim.uid in container.UID_RANGE and not container._in_use(claim.uid)
    finally:
        other.release()


def test_release_kills_the_uids_processes_even_outside_its_process_group(claim):
    """A child that made itself a new session survives killpg; release kills it by uid."""
    proc = subprocess.Popen(
        ["sh", "-c", "setsid sleep 60 & sleep 60"],
        preexec_fn=container.become(claim.uid, claim.uid, 16, False),
    )
    for _ in range(100):
        if len(uid_pids(claim.uid)) >= 2:
            break
        subprocess.run(["sleep", "0.05"])
    assert len(uid_pids(claim.uid)) >= 2
    claim.release()
    proc.wait(timeout=10)
    assert uid_pids(claim.uid) == []


def test_release_deletes_what_the_uid_left_in_tmp(claim):
    """A file the worker's uid made in /tmp is gone after release; root's files stay."""
    r = as_uid(claim.uid, "mktemp", "/tmp/cs336-leftover.XXXXXX")
    left = Path(r.stdout.strip())
    assert r.returncode == 0 and left.exists(), r.stderr
    claim.release()
    assert not left.exists()


def test_hand_over_gives_folders_but_never_follows_a_symlink_or_a_hard_link(claim, tmp_path):
    """The scratch folder and what the judge made in it become the worker's; a symlink to a staff file
    and a hard link to one keep the staff file root's."""
    staff = tmp_path / "staff.txt"
    staff.write_text("secret")
    scratch = tmp_path / "scratch"
    (scratch / "made-by-judge").mkdir(parents=True, mode=0o700)
    (scratch / "made-by-judge" / "input.txt").write_text("x")
    (scratch / "link").symlink_to(staff)
    os.link(staff, scratch / "hard")
    container.hand_over(scratch, claim.uid, claim.uid)
    assert (scratch / "made-by-judge").stat().st_uid == claim.uid
    assert (scratch / "made-by-judge" / "input.txt").stat().st_uid == claim.uid
    assert staff.stat().st_uid == 0


def test_lock_down_leaves_only_the_public_fixtures_to_other_users(claim, enterable):
    """After lock_down, a fresh uid reads the public fixture by path and nothing else: the check agrees."""
    root = make_staff_repo(enterable / "repo")
    public = [root / "fixtures" / "numbers.txt"]
    assert "may read" in (check(root, public) or "")  # as written: world-readable
    container.lock_down(root)
    assert check(root, public) is None
    r = as_uid(claim.uid, "cat", str(public[0]))
    assert r.returncode == 0 and "1 2 3" in r.stdout, r.stderr
    for secret in (
        "fixtures/hidden/products.txt",
        "tests/hidden/test_calc.py",
        "cs336_assignment/calc.py",
    ):
        r = as_uid(claim.uid, "cat", str(root / secret))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (secret, r.stdout)


def test_the_container_tier_is_refused_where_the_worker_could_read_the_staff_tree(enterable):
    """choose_tier never picks the container tier over a world-readable staff tree (it says what to run)."""
    root = make_staff_repo(enterable / "repo")
    why = check(root, [])
    assert why is not None and "lock-down" in why


def test_the_exchanging_mirror_keeps_the_judges_folder_from_the_worker(claim, enterable):
    """The container tier's scratch folders (mirror.py, ``exchange=True``): during a call the worker's uid
    empties its input, writes an answer, answers with a symlink to a root-only file and plants one to a host
    path; after it the judge's input is intact, the answer is copied back, the symlinks are refused unread,
    the judge's own write at the planted name stays in its folder, and the worker can write nothing there."""
    scratch = enterable / "scratch"
    judge, worker, _ = layout(scratch)
    for p in (scratch, judge, worker):
        p.mkdir(mode=0o711 if p == scratch else 0o700)
    secret, host = enterable / "secret.txt", enterable / "host-target.txt"
    secret.write_text("918273645")
    secret.chmod(0o600)
    test_dir = judge / "tmp" / "test_x0"
    test_dir.mkdir(parents=True)
    (test_dir / "input.txt").write_text("the judge's corpus")
    mirror = Mirror(judge, worker, file_bytes=1 << 20, entries=100, exchange=True)
    mirror.push(["tmp/test_x0"])
    assert mirror.swapped and mirror.worker_now() == judge
    container.hand_over(mirror.worker_now(), claim.uid, claim.uid)
    with mirror.judge_view():  # a callback of the test's sees the judge's folder
        assert (judge / "tmp" / "test_x0" / "input.txt").stat().st_uid == 0
    r = as_uid(
        claim.uid,
        "sh",
        "-c",
        f"cd {test_dir} && : > input.txt && echo 42 > answer.txt && "
        f"ln -s {secret} link.txt && ln -s {host} planted.txt",
    )
    assert r.returncode == 0, r.stderr
    with pytest.raises(MirrorRefused, match="symlink"):
        mirror.pull(["tmp/test_x0"])
    assert not mirror.swapped and mirror.worker_now() == worker
    assert (test_dir / "input.txt").read_text() == "the judge's corpus"
    assert (test_dir / "answer.txt").read_text() == "42\n"
    assert not (test_dir / "link.txt").exists() and not (test_dir / "link.txt").is_symlink()
    (test_dir / "planted.txt").write_text("the judge's write")
    assert not host.exists() and not (test_dir / "planted.txt").is_symlink()
    r = as_uid(
        claim.uid, "sh", "-c", f"echo x > {test_dir}/input.txt || echo x > {test_dir}/new.txt"
    )
    assert r.returncode != 0 and "Permission denied" in r.stderr, (r.stdout, r.stderr)
    assert (
        worker / "tmp" / "test_x0" / "input.txt"
    ).read_text() == ""  # the worker's own copy, emptied


def test_the_stamp_a_kill_waits_on_is_the_workers_copy_at_rest_and_mid_call(tmp_path):
    """killed_midway compares the stamp of the worker's copy of a file before a call with its stamps during
    it: with the exchanging mirror the copy is at the judge's path mid-call, so that is where the stamp is
    read (reading the judge's folder there made a resumed run's kill fire before its first save)."""
    from cs336_staff.grade.remote import Remote

    judge, worker, _ = layout(tmp_path / "scratch")
    for p in (tmp_path / "scratch", judge, worker):
        p.mkdir(mode=0o700)
    (judge / "tmp").mkdir()
    (judge / "tmp" / "ckpt.pt").write_bytes(b"iteration 30")
    mirror = Mirror(judge, worker, file_bytes=1 << 20, entries=100, exchange=True)
    remote = Remote(lambda: None, mirror=mirror)
    mirror.push(["tmp"])
    mirror.pull(["tmp"])
    at_rest = remote.worker_path_stamp(judge / "tmp" / "ckpt.pt")
    assert at_rest is not None
    mirror.push(["tmp"])  # a call begins: nothing changed, so nothing was copied
    assert mirror.swapped and remote.worker_path_stamp(judge / "tmp" / "ckpt.pt") == at_rest
    # the worker's copy, mid-call
    (judge / "tmp" / "ckpt.pt").write_bytes(b"iteration 35, saved by the worker")
    assert remote.worker_path_stamp(judge / "tmp" / "ckpt.pt") != at_rest
    mirror.pull(["tmp"])


def split_in_standin(repo: Path) -> subprocess.CompletedProcess:
    """``pytest -p cs336_staff.grade.judge --split`` over ``repo``'s public tests, as root without user namespaces."""
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "cs336_staff.grade.judge",
        "--split",
        "-p",
        "no:cacheprovider",
        "-c",
        "pyproject.toml",
        "-rA",
        "tests/test_calc.py",
    ]
    return subprocess.run(
        standin.command(argv), capture_output=True, text=True, timeout=600, cwd=repo
    )


@pytest.mark.skipif(
    standin.unavailable() is not None, reason=f"no container stand-in here: {standin.unavailable()}"
)
def test_split_runs_on_the_container_tier_where_bubblewrap_cannot_start(enterable):
    """Where only the container tier starts, --split chooses it as `cs336 grade` does, says so in its header,
    and the public tests pass across the line (files the test wrote, files the worker wrote); over a staff
    tree other users may read it refuses, saying how to lock it down or to pass --split-insecure."""
    repo = make_staff_repo(enterable / "repo")
    refused = split_in_standin(repo)
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, (
        refused.stdout[-2000:] + refused.stderr[-2000:]
    )
    assert "lock-down" in refused.stderr and "--split-insecure" in refused.stderr, refused.stderr[
        -2000:
    ]
    container.lock_down(repo)
    r = split_in_standin(repo)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "worker runs on the container tier" in r.stdout, r.stdout[:2000]
    assert "PASSED tests/test_calc.py::test_sum_saved_to_a_file_reads_back" in r.stdout, r.stdout[
        -3000:
    ]


def test_a_uid_is_never_handed_out_twice_in_this_process_or_another(claim):
    """Each claim, here or in another process, after a release or not, gets a uid above every earlier one."""
    code = "from cs336_staff.grade import container; c = container.Claim.take(); print(c.uid); c.release()"
    first = claim.uid
    claim.release()
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert r.returncode == 0, r.stderr[-2000:]
    other = int(r.stdout.strip())
    again = container.Claim.take()
    try:
        assert first < other < again.uid, (first, other, again.uid)
    finally:
        again.release()


def test_the_last_uid_of_the_range_is_followed_by_an_error_that_says_how_to_start_over(
    monkeypatch, enterable
):
    """A range of two uids gives two claims; the third is refused, naming reset-uids; reset-uids (no claim
    left, nothing left over) starts over."""
    state = enterable / "state"
    monkeypatch.setattr(container, "STATE_DIRS", (str(state),))
    tiny = range(64990, 64992)
    monkeypatch.setattr(container, "usable_ranges", lambda: (tiny,))
    got = []
    for _ in range(2):
        c = container.Claim.take()
        got.append(c.uid)
        c.release()
    assert got == list(tiny)
    with pytest.raises(RuntimeError, match="reset-uids"):
        container.Claim.take()
    container.reset_uids()
    c = container.Claim.take()
    c.release()
    assert c.uid == tiny.start


def test_the_worker_runs_with_no_new_privs_and_no_posix_message_queues(claim):
    """become() sets no_new_privs (a setuid binary gives the uid nothing) and RLIMIT_MSGQUEUE 0."""
    r = as_uid(
        claim.uid,
        "grep",
        "-h",
        "NoNewPrivs\\|Max msgqueue",
        "/proc/self/status",
        "/proc/self/limits",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["NoNewPrivs:", "1", "Max", "msgqueue", "size", "0", "0", "bytes"], (
        r.stdout
    )


def leave_everything(uid: int, mark: str, shared: Path) -> None:
    """As ``uid``: files in a sticky folder three deep in /tmp, in ``shared`` (a world-writable folder
    below a root-owned one), /var/tmp and /dev/shm; a SysV segment, semaphore set and queue; a process
    in a session of its own."""
    script = (
        f"mkdir -p /tmp/{mark}/a/b && chmod 1777 /tmp/{mark} /tmp/{mark}/a /tmp/{mark}/a/b && "
        f"echo 918273645 > /tmp/{mark}/a/b/leak && echo 918273645 > {shared}/leak-{mark} && "
        f"echo 918273645 > /var/tmp/{mark} && echo 918273645 > /dev/shm/{mark} && "
        "ipcmk -M 4096 >/dev/null && ipcmk -S 1 >/dev/null && ipcmk -Q >/dev/null && "
        "(setsid sleep 300 >/dev/null 2>&1 &)"
    )
    r = as_uid(uid, "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    for _ in range(100):
        if uid_pids(uid):
            break
        subprocess.run(["sleep", "0.05"])


def left_by(uid: int) -> list[str]:
    return container.what_is_left(lambda u: u == uid)


@pytest.fixture
def shared_below_root(enterable):
    """A world-writable sticky folder below a root-owned 0755 one in /tmp (as a system may have)."""
    top = Path(tempfile.mkdtemp(prefix="cs336-sticky-"))
    top.chmod(0o755)
    (top / "pub").mkdir()
    (top / "pub").chmod(0o1777)
    yield top / "pub"
    subprocess.run(["rm", "-rf", str(top)], check=False)


def test_release_removes_what_the_uid_left_at_any_depth_its_sysv_objects_and_processes(
    claim, shared_below_root
):
    """Everything ``leave_everything`` leaves is found, and gone after release; nothing of root's is touched."""
    mark = f"cs336-left-{claim.uid}"
    (shared_below_root / "roots-own").write_text("stays")
    leave_everything(claim.uid, mark, shared_below_root)
    left = left_by(claim.uid)
    for what in (
        f"/tmp/{mark} ",
        f"{shared_below_root}/leak-{mark}",
        f"/var/tmp/{mark}",
        f"/dev/shm/{mark}",
        "SysV shm",
        "SysV sem",
        "SysV msg",
        "process",
    ):
        assert any(what in x for x in left), (what, left)
    claim.release()
    assert left_by(claim.uid) == []
    assert (shared_below_root / "roots-own").read_text() == "stays"


def test_sweep_removes_what_a_uid_no_claim_holds_left_and_spares_live_claims(
    shared_below_root,
):
    """A grader that died without releasing its uid: the next sweep kills and removes what it left; a
    uid a live claim holds keeps its files."""
    dead, live = container.Claim.take(), container.Claim.take()
    try:
        leave_everything(dead.uid, f"cs336-dead-{dead.uid}", shared_below_root)
        r = as_uid(live.uid, "sh", "-c", f"echo x > /tmp/cs336-live-{live.uid}")
        assert r.returncode == 0, r.stderr
        os.close(dead._fd)  # dies holding it: the flock goes with the process
        dead._fd = -1
        container.sweep()
        assert left_by(dead.uid) == []
        assert Path(f"/tmp/cs336-live-{live.uid}").exists()
    finally:
        live.release()
    assert not Path(f"/tmp/cs336-live-{live.uid}").exists()


def test_uploads_another_uid_could_open_are_named(enterable):
    """A 0644 zip in an enterable folder and a directory upload others may pass are named; a 0600 zip and
    a folder closed to others are not."""
    subs = enterable / "subs"
    (subs / "open_dir" / "cs336_assignment").mkdir(parents=True)
    (subs / "open_dir" / "cs336_assignment" / "calc.py").write_text("x = 1")
    (subs / "open_dir").chmod(0o711)
    (subs / "open.zip").write_bytes(b"PK")
    (subs / "closed.zip").write_bytes(b"PK")
    (subs / "closed.zip").chmod(0o600)
    (subs / "closed_dir").mkdir(mode=0o700)
    (subs / "closed_dir" / "calc.py").write_text("x = 1")
    subs.chmod(0o755)
    paths = [subs / n for n in ("open_dir", "open.zip", "closed.zip", "closed_dir")]
    assert container.readable_by_others(paths) == paths[:2]
