"""Run the staff's tests against one submission in a locked-down child process, and survive it.

Layout of one run (``base`` is a fresh directory with an unguessable name inside a 0711 parent,
so other sandboxes cannot list or find it)::

    base/private/records-N.jsonl 0700 dir; one file and one key per child, which inherits only a write fd
    base/grader/_child.py        the child's bootstrap (read-only for the child)
    base/work/                   root of the pytest run (mode 1777: the child may create files,
        cs336_assignment/, adapters.py   but not rename or delete the staff's)
        tests/, fixtures/, pyproject.toml  copied from the staff repository (read-only)
        home/, tmp/              owned by the child's uid; HOME and TMPDIR point here

The child runs under ``unshare --net --pid --fork --kill-child`` when the OS allows (no network; a
pid namespace so every process it forks dies with it), drops root to a random unprivileged uid,
and has RLIMIT_AS / RLIMIT_CPU / RLIMIT_FSIZE limits (see ``_child.py``). The parent enforces
the whole-run timeout and a per-test watchdog (pytest-timeout's signal can be swallowed by
``except BaseException``), keeps only the head and tail of the console output, and reads results
only from its own MAC-checked records file.

Crashes do not lose the rest of the run: when the child dies (``os._exit``, a segfault, a
timeout kill, SIGXCPU), the test that was running is charged with the crash and the tests not yet
run are run again in a new child, up to ``max_crashes`` times.

Deliberately left out: containers, seccomp and cgroups; run the batch inside a container or a
Slurm job with cgroup limits when the threat model needs them (see THREAT_MODEL.md).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cs336_staff.grade.intake import Intake

CHILD = Path(__file__).with_name("_child.py")
GPU_MARKERS = frozenset({"gpu", "fp8", "h100"})
#: pytest plugins loaded explicitly (entry-point autoloading is off: faster, and nothing unexpected).
PLUGINS = ("pytest_timeout", "_hypothesis_pytestplugin")
CANARY_PASS, CANARY_FAIL = "must_pass", "must_fail"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's run (defaults suit the real suite on a 2-core box)."""

    test_timeout: float = 120.0  # seconds per test (pytest-timeout); see watchdog_grace
    run_timeout: float = 900.0  # seconds for the whole submission, all retries included
    memory_bytes: int | None = 8 * 2**30  # RLIMIT_AS; None on GPU runners (CUDA maps huge VAs)
    cpu_seconds: int | None = None  # RLIMIT_CPU; default 2 * run_timeout
    file_bytes: int = 512 * 2**20  # RLIMIT_FSIZE: largest file the child may write
    console_bytes: int = 64 * 2**10  # console output kept (half head, half tail)
    output_chars: int = 4000  # failure message kept per test
    max_crashes: int = 8  # child deaths tolerated before the remaining tests are abandoned
    watchdog_grace: float = 10.0  # the parent kills a test after 1.5 * its timeout + this
    threads: int | None = None  # OMP/MKL threads in the child (None: all cores / jobs)


@dataclass
class Outcome:
    """What happened to one test: ``passed failed error timeout crashed skipped not_run``."""

    outcome: str
    output: str = ""
    duration: float = 0.0
    markers: tuple[str, ...] = ()


@dataclass
class RunResult:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    collected: dict[str, tuple[str, ...]] = field(default_factory=dict)  # nodeid -> markers
    collect_errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    rounds: int = 0
    crashes: int = 0
    timed_out: bool = False
    console: str = ""
    isolation: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------- isolation probes
@lru_cache(maxsize=1)
def namespace_prefix() -> tuple[tuple[str, ...], str]:
    """The ``unshare`` command that gives the child no network and its own pid namespace here.

    Returns ``(argv_prefix, description)``; an empty prefix means the OS refused, and the
    description says why (reported in every result as a known limitation).
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), "network NOT isolated: `unshare` (util-linux) is not installed"
    base = ("--net", "--pid", "--fork", "--kill-child")
    tries = [(unshare, *base)] if os.geteuid() == 0 else []
    tries.append((unshare, "--user", "--map-root-user", *base))
    errors = []
    for argv in tries:
        try:
            p = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(str(e))
            continue
        if p.returncode == 0:
            return tuple(argv) + ("--",), "no network (network namespace), own pid namespace"
        errors.append(p.stderr.strip())
    return (), f"network NOT isolated: unshare refused ({'; '.join(errors)[:200]})"


def _reachable_by_others(path: Path) -> bool:
    """Can an unprivileged uid traverse every ancestor of ``path`` and read it?"""
    path = path.resolve()
    for p in [path, *path.parents]:
        try:
            mode = p.stat().st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IROTH)


@lru_cache(maxsize=1)
def privilege_plan() -> tuple[bool, bool, str]:
    """``(drop_root, keep_read_search, description)`` for this interpreter and user."""
    if os.geteuid() != 0:
        return False, False, "runs as the grader's own user (start the grader as root to drop privileges)"
    needed = [Path(sysconfig.get_paths()["stdlib"]), Path(sys.executable), Path(sysconfig.get_paths()["purelib"])]
    if all(_reachable_by_others(p) for p in needed):
        return True, False, "runs as a random unprivileged uid"
    return True, True, ("runs as a random unprivileged uid with read-only access to every file "
                        "(CAP_DAC_READ_SEARCH: the Python install is not world-readable); cannot write outside its sandbox")


# --------------------------------------------------------------------------------- records channel
class RecordReader:
    """Incrementally read and verify one child's records file (a fresh key and file per child).

    A line whose MAC is wrong was not written by the plugin (forged); a sequence number out of
    order was replayed or dropped. Both are collected in ``problems`` and the line is ignored.
    """

    def __init__(self, path: Path, key: bytes) -> None:
        self.path, self.key = path, key
        self.offset = 0
        self.seq = 0
        self.lines = 0
        self.problems: list[str] = []

    def poll(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # only complete lines; a partial one is read next time
        self.offset += end
        good = []
        for raw in data[:end].splitlines():
            self.lines += 1
            try:
                rec = json.loads(raw)
                payload, mac = rec["p"], rec["m"]
                expected = hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()
                if not hmac.compare_digest(expected, str(mac)):
                    self.problems.append(f"records line {self.lines}: bad MAC (forged result record)")
                    continue
                body = json.loads(payload)
            except (ValueError, KeyError, TypeError, AttributeError):
                self.problems.append(f"records line {self.lines}: not a record (garbage in the results channel)")
                continue
            if body.get("seq") != self.seq + 1:
                self.problems.append(f"records line {self.lines}: sequence {body.get('seq')} after {self.seq}")
                continue
            self.seq = body["seq"]
            good.append(body)
        return good


# --------------------------------------------------------------------------------- the sandbox
class _Console:
    """Drain a pipe, keeping at most ``cap`` bytes: the head and the tail."""

    def __init__(self, stream, cap: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.cap = cap
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        half = self.cap // 2
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            room = half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > half:
                self.dropped += len(self.tail) - half
                del self.tail[: len(self.tail) - half]

    def text(self) -> str:
        self.thread.join(timeout=5)
        mid = f"\n[... {self.dropped} bytes of output cut ...]\n" if self.dropped else ""
        return (bytes(self.head).decode(errors="replace") + mid + bytes(self.tail).decode(errors="replace"))


def _secure_parent() -> Path:
    """A 0711 directory (traversable, not listable) holding every sandbox of this user."""
    root = Path(tempfile.gettempdir()) / f"cs336-grade-{os.geteuid()}"
    root.mkdir(mode=0o711, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise RuntimeError(f"{root} exists but is not a directory owned by us; remove it")
    os.chmod(root, 0o711)
    return root


def _copy_readonly(src: Path, dest: Path, ignore: tuple[str, ...] = ()) -> None:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", *ignore),
                    symlinks=False)
    for dirpath, _, filenames in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "was killed"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = {"SIGXCPU": " (CPU-time limit)", "SIGXFSZ": " (file-size limit: too much output?)",
                 "SIGKILL": " (killed: timeout or out of memory)", "SIGSEGV": " (segmentation fault)"}
        return f"died with {name}{extra.get(name, '')}"
    return f"exited with status {code}"


@dataclass
class Sandbox:
    """One submission's sandbox. ``run()`` grades; the directory is removed afterwards."""

    staff_root: Path
    limits: Limits = field(default_factory=Limits)
    gpu: bool = False  # expose CUDA devices (and skip RLIMIT_AS)
    jobs: int = 1

    def _prepare(self, intake: Intake | None) -> tuple[Path, Path, int | None]:
        base = Path(tempfile.mkdtemp(prefix=secrets.token_hex(12), dir=_secure_parent()))
        os.chmod(base, 0o711)
        private = base / "private"
        private.mkdir(mode=0o700)
        grader = base / "grader"
        grader.mkdir(mode=0o755)
        shutil.copyfile(CHILD, grader / "_child.py")
        os.chmod(grader / "_child.py", 0o644)
        work = base / "work"
        work.mkdir()
        os.chmod(work, 0o1777)
        if intake is None:  # trusted run on the reference itself
            _copy_readonly(self.staff_root / "cs336_assignment", work / "cs336_assignment")
            shutil.copyfile(self.staff_root / "adapters.py", work / "adapters.py")
        else:
            intake.write_to(work)
        _copy_readonly(self.staff_root / "tests", work / "tests", ignore=("staff",))
        if (self.staff_root / "fixtures").is_dir():
            _copy_readonly(self.staff_root / "fixtures", work / "fixtures")
        shutil.copyfile(self.staff_root / "pyproject.toml", work / "pyproject.toml")
        drop, _, _ = privilege_plan()
        uid = 2_000_000 + secrets.randbelow(1_000_000) if drop else None
        for sub in ("home", "tmp"):
            (work / sub).mkdir()
            if uid is not None:
                os.chown(work / sub, uid, uid)
        return base, work, uid

    def _env(self, work: Path) -> dict[str, str]:
        threads = self.limits.threads or max(1, (os.cpu_count() or 1) // max(1, self.jobs))
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(work / "home"),
            "TMPDIR": str(work / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "NO_COLOR": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
        if self.gpu:
            for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"):
                if k in os.environ:
                    env[k] = os.environ[k]
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""
        return env

    def _one_round(self, work: Path, uid: int | None, args: list[str], only: list[str] | None,
                   deadline: float, records: Path) -> tuple[int | None, str, str | None, list[dict], list[str]]:
        """Start one child; return (exit code, console, watchdog verdict, verified records, problems)."""
        prefix, _ = namespace_prefix()
        _, keep, _ = privilege_plan()
        lim = self.limits
        key = secrets.token_bytes(32)
        reader = RecordReader(records, key)
        spec = {
            "key": key.hex(),
            "limits": {
                "memory_bytes": None if self.gpu else lim.memory_bytes,
                "cpu_seconds": lim.cpu_seconds or int(2 * lim.run_timeout),
                "file_bytes": lim.file_bytes,
                "nproc": 512 if uid is not None else None,
            },
            "netns": bool(prefix),
            "uid": uid,
            "keep_read_search": keep,
            "strip_paths": [str(self.staff_root.resolve()), str(Path(__file__).resolve().parents[2])],
            "only": only,
            "output_chars": lim.output_chars,
            "pytest_args": args,
        }
        rec_fd = os.open(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        spec["records_fd"] = rec_fd
        spec_r, spec_w = os.pipe()
        data = json.dumps(spec).encode()
        del spec
        env = self._env(work)
        env["CS336_GRADE_SPEC_FD"] = str(spec_r)
        try:
            proc = subprocess.Popen(
                [*prefix, sys.executable, str(work.parent / "grader" / "_child.py")],
                cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(spec_r, rec_fd), start_new_session=True,
            )
        except BaseException:
            os.close(spec_w)
            raise
        finally:
            os.close(spec_r)
            os.close(rec_fd)
        with os.fdopen(spec_w, "wb") as f:  # the spec (< 64 KiB unless `only` is huge) goes through a pipe
            try:
                f.write(data)
            except BrokenPipeError:
                pass
        del data
        console = _Console(proc.stdout, lim.console_bytes)
        verdict = None
        bodies: list[dict] = []
        current: tuple[float, float] | None = None  # (start time, allowed seconds)
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now > deadline:
                    verdict = "run_timeout"
                    break
                for body in reader.poll():
                    bodies.append(body)
                    if body["event"] == "start":
                        current = (now, (body.get("timeout") or lim.test_timeout) * 1.5 + lim.watchdog_grace)
                    elif body["event"] == "result":
                        current = None
                if current is not None and now - current[0] > current[1]:
                    verdict = "test_timeout"
                    break
                try:
                    proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if proc.poll() is None:
                _kill(proc)
            proc.wait()
        bodies.extend(reader.poll())
        return proc.returncode, console.text(), verdict, bodies, reader.problems

    def run(self, intake: Intake | None, run_ids: list[str] | None, *, collect_only: bool = False,
            canary: bool = True) -> RunResult:
        """Run ``run_ids`` (None: every test under tests/) and return what happened to each."""
        result = RunResult()
        _, net_desc = namespace_prefix()
        _, _, priv_desc = privilege_plan()
        result.isolation = {"network": net_desc, "user": priv_desc}
        base, work, uid = self._prepare(intake)
        private = base / "private"
        deadline = time.monotonic() + self.limits.run_timeout
        canary_ids: dict[str, str] = {}
        if canary and not collect_only:
            mod = f"test_{secrets.token_hex(6)}.py"
            fa, fb = f"test_{secrets.token_hex(5)}", f"test_{secrets.token_hex(5)}"
            (work / "tests" / mod).write_text(
                f"def {fa}():\n    assert sum([1, 2]) == 4\n\n\ndef {fb}():\n    assert sum([1, 2]) == 3\n")
            os.chmod(work / "tests" / mod, 0o644)
            canary_ids = {f"tests/{mod}::{fa}": CANARY_FAIL, f"tests/{mod}::{fb}": CANARY_PASS}
        base_args = ["-p", "no:cacheprovider", "-q", "--color=no", "-o", "console_output_style=classic",
                     "--rootdir", str(work), "--basetemp", str(work / "tmp" / "pytest"),
                     f"--timeout={self.limits.test_timeout:g}"]
        for plugin in PLUGINS:
            if importlib.util.find_spec(plugin) is not None:
                base_args += ["-p", plugin]
        if collect_only:
            base_args.append("--collect-only")
        pending: list[str] | None = None if run_ids is None else [*run_ids, *canary_ids]
        consoles = []
        try:
            while True:
                result.rounds += 1
                code, console, verdict, bodies, problems = self._one_round(
                    work, uid, [*base_args, "tests"], pending, deadline, private / f"records-{result.rounds}.jsonl")
                consoles.append(f"===== round {result.rounds}: the test process {_describe_exit(code)} =====\n{console}")
                result.tampered.extend(problems[:5])
                running = None
                finished = False
                for body in bodies:
                    ev = body["event"]
                    if ev == "collected":
                        for item in body["items"]:
                            result.collected[item["nodeid"]] = tuple(item["markers"])
                    elif ev == "collect_error":
                        result.collect_errors[body["nodeid"]] = body["longrepr"]
                    elif ev == "start":
                        running = body["nodeid"]
                    elif ev == "result":
                        result.outcomes[body["nodeid"]] = Outcome(
                            body["outcome"], body["output"], body["duration"],
                            result.collected.get(body["nodeid"], ()))
                        running = None
                    elif ev == "finish":
                        finished = True
                if finished and running is None and verdict is None:
                    break
                # The child died or was killed before the end of its session.
                result.crashes += 1
                tail = console[-1500:]
                if verdict == "run_timeout":
                    result.timed_out = True
                    result.notes.append(f"the whole-run timeout ({self.limits.run_timeout:g} s) expired")
                    if running:
                        result.outcomes[running] = Outcome(
                            "timeout", f"the whole-run timeout ({self.limits.run_timeout:g} s) expired during this test")
                    break
                if running:
                    if verdict == "test_timeout":
                        why = ("the test ran far past its timeout and ignored pytest-timeout's interrupt "
                               "(a swallowed exception?); the grader killed it")
                        result.outcomes[running] = Outcome("timeout", why)
                    else:
                        result.outcomes[running] = Outcome(
                            "crashed", f"the test process {_describe_exit(code)} during this test\n{tail}")
                if collect_only:
                    result.notes.append(f"collection: the test process {_describe_exit(code)}\n{tail}")
                    break
                target = pending if pending is not None else (list(result.collected) or None)
                if target is None:
                    result.notes.append(f"the test process {_describe_exit(code)} before collecting the tests:\n{tail}")
                    break
                remaining = [n for n in target if n not in result.outcomes]
                if not remaining:
                    break
                if running is None and not any(b["event"] == "result" for b in bodies):
                    result.notes.append(f"the test process {_describe_exit(code)} before running any test:\n{tail}")
                    break
                if result.crashes > self.limits.max_crashes:
                    result.notes.append(f"gave up after {result.crashes} crashes of the test process")
                    break
                result.notes.append(f"the test process {_describe_exit(code)}; the {len(remaining)} test(s) "
                                    "not yet run were rerun in a fresh process")
                pending = remaining
        finally:
            result.console = "\n".join(consoles)[-self.limits.console_bytes:]
            shutil.rmtree(base, ignore_errors=True)
        for nid, role in canary_ids.items():
            got = result.outcomes.pop(nid, None)
            result.collected.pop(nid, None)
            if role == CANARY_FAIL and got is not None and got.outcome == "passed":
                result.tampered.append("a canary test that must fail was reported passed: "
                                       "test outcomes are being rewritten in-process")
        return result
