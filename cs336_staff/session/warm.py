"""A warm fork-server: run many pytest sessions without paying Python's and torch's start-up each time.

A fresh ``python -m pytest`` here spends most of its time before the first test: starting Python,
importing torch, pytest and hypothesis, and then torch's lazy imports on first use (``torch._dynamo``
on the first optimizer step or ``TorchDispatchMode``, ``torch.distributed.tensor`` on the first
``assert_close``, sympy on ``broadcast_shapes``). The staff tools run dozens of sessions (one per
mutant in ``cs336 audit``), so they share that cost instead:

    with WarmPool() as pool:                       # one server process; imports and warms up once
        job = pool.submit(tree, ["tests/test_optim.py", "-x", "-q"], hide=[repo])
        run = job.result()                         # a PytestRun, as from runner.PytestJob

The server (``python -m cs336_staff.session.warm``, started by ``WarmPool``) imports the libraries
the tests use and exercises the lazy paths once, but never imports ``cs336_assignment``,
``adapters`` or the tests. For each request it ``os.fork()``s a child that

  * moves to its own process group (so a timeout kills the child and anything it spawned),
  * sends its output to a file and reads stdin from ``/dev/null``,
  * removes the ``hide`` directories (the staff repository, which the editable install puts on
    ``sys.path``) from ``sys.path`` and drops every module already imported from them,
  * puts the tree first on ``sys.path``, chdirs into it, never writes bytecode,
  * runs ``pytest.main(["-p", "no:cacheprovider", "--rootdir=<tree>", *args])`` with the outcome
    plugin (``outcomes.py``), which writes how every test ended as JSON,
  * records any ``cs336_assignment``/``adapters`` module imported from outside the tree (the
    client treats that as an error: the run did not test the tree).

The child inherits the warm interpreter copy-on-write; nothing it does reaches the server or the
next child. Requests and replies are JSON lines on the server's stdin and stdout; the server kills
a child (``SIGKILL`` to its process group) that outlives its timeout, and kills every child and
exits when its stdin closes or it gets ``SIGINT``/``SIGTERM``. Deliberately left out: Windows
(no ``fork``) and reusing a child for a second session (pytest leaves state behind).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import itertools
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import Future
from pathlib import Path

from cs336_staff.session import outcomes
from cs336_staff.session.runner import KILLED, NOT_INHERITED, PytestRun, read_run

# Imported and warmed up by the server (whatever of these is installed); never the code under test.
WARM_MODULES = (
    "numpy",
    "torch",
    "pytest",
    "hypothesis",
    "einops",
    "jaxtyping",
    "regex",
    "tiktoken",
    "tokenizers",
    "tqdm",
    "pytest_timeout",
    "_pytest.pytester",
    "hypothesis.extra.numpy",
    "torch.testing",
    "torch.utils.flop_counter",
    "torch.utils._python_dispatch",
)
TESTED_PACKAGES = (
    "cs336_assignment",
    "adapters",
    "tests",
    "conftest",
)  # never imported by the server


# ------------------------------------------------------------------------------------------------
# Server side
# ------------------------------------------------------------------------------------------------


def warm_up() -> list[str]:
    """Import ``WARM_MODULES`` and take torch's slow lazy paths once; returns what failed (not fatal)."""
    failed: list[str] = []
    if os.environ.get("CS336_WARM_LIGHT"):  # see WarmPool(light=True)
        import pytest  # noqa: F401

        return failed
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 (an optional library may be missing or broken)
            failed.append(f"{name}: {type(e).__name__}: {e}")
    try:
        # pytest's plugins (hypothesis, timeout, ...)
        for ep in importlib.metadata.entry_points(group="pytest11"):
            try:
                ep.load()
            except Exception as e:  # noqa: BLE001
                failed.append(f"pytest plugin {ep.name}: {e}")
    except Exception as e:  # noqa: BLE001
        failed.append(f"pytest11 entry points: {e}")
    if "torch" not in sys.modules:
        return failed
    import torch

    # OpenMP's thread team does not survive fork(): a child of a server that ever ran a parallel
    # region hangs in its first one. So the server stays single-threaded, and each child sets its own.
    os.environ.setdefault("CS336_WARM_THREADS", str(torch.get_num_threads()))
    torch.set_num_threads(1)
    # restored below: a child starts where a fresh process starts
    rng = torch.random.get_rng_state()

    steps = [
        lambda: importlib.import_module("torch._dynamo"),
        _warm_optimizers,
        _warm_dispatch,
        lambda: torch.testing.assert_close(torch.ones(2), torch.ones(2)),
        lambda: torch.broadcast_shapes((2, 1), (1, 3)),
        lambda: (
            importlib.import_module("torch.distributed.tensor")
            if torch.distributed.is_available()
            else None
        ),
    ]
    for step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001
            failed.append(f"warm-up step: {type(e).__name__}: {e}")
    torch.random.set_rng_state(rng)
    return failed


def _warm_optimizers() -> None:
    import torch

    p = torch.nn.Parameter(torch.zeros(3))
    for opt in (
        torch.optim.AdamW([p], lr=1e-3),
        torch.optim.SGD([p], lr=1e-3),
        torch.optim.Adagrad([p], lr=1e-3),
    ):
        p.grad = torch.ones(3)
        opt.step()
        opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(
        torch.randn(2, 4, requires_grad=True), torch.tensor([0, 1])
    )
    loss.backward()


def _warm_dispatch() -> None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    a = torch.randn(2, 2, requires_grad=True)
    with FlopCounterMode(display=False):
        (a @ a).sum().backward()


def _child(job: dict) -> int:
    """In the forked child: run one pytest session (or script) as ``job`` says; returns the exit code."""
    os.setpgid(0, 0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    out = os.open(job["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    cwd = os.path.realpath(job["cwd"])
    hide = [os.path.realpath(h) for h in job.get("hide", [])]
    inside = lambda path, root: path == root or path.startswith(root + os.sep)  # noqa: E731
    for name in NOT_INHERITED:
        os.environ.pop(name, None)
    os.environ.update(job.get("env", {}))
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    os.chdir(cwd)
    # the hidden directories leave sys.path (exactly those: the venv inside the repository stays) and so
    # does every module imported from them and from no directory still on the path (cs336_staff, ...)
    sys.path[:] = [cwd] + [
        p for p in sys.path if p not in ("", ".") and os.path.realpath(p) not in hide
    ]
    kept = [os.path.realpath(p) for p in sys.path]
    for name, module in list(sys.modules.items()):
        file = os.path.realpath(getattr(module, "__file__", None) or "/")
        hidden = any(inside(file, h) for h in hide) and not any(
            inside(file, k) for k in kept if k != cwd
        )
        if name.split(".")[0] in TESTED_PACKAGES or hidden:
            del sys.modules[name]
    importlib.invalidate_caches()
    # a fresh process seeds Python's and numpy's global generators from the OS, not from its parent
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    threads = int(os.environ.get("OMP_NUM_THREADS") or os.environ.get("CS336_WARM_THREADS") or 1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)

    if job["kind"] == "script":
        sys.argv = ["-c", *job["args"]]
        try:
            exec(compile(job["code"], "<warm script>", "exec"), {"__name__": "__main__"})
            code = 0
        except SystemExit as e:
            code = (
                e.code
                if isinstance(e.code, int)
                else (0 if e.code is None else (print(e.code, file=sys.stderr) or 1))
            )
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 1
    else:
        import pytest

        os.environ["CS336_PROBE_OUT"] = job["results"]
        if job.get("only_fixture"):
            os.environ["CS336_PROBE_ONLY_FIXTURE"] = job["only_fixture"]
        sys.argv = ["pytest"]
        # the server imported pytest's plugins (hypothesis, pytest_timeout, ...) before pytest could
        # rewrite their asserts; pytest says so once per plugin, which is no news about the tree
        quiet = [
            "-W",
            "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
        ]
        code = int(
            pytest.main(
                ["-p", "no:cacheprovider", *quiet, f"--rootdir={cwd}", *job["args"]],
                plugins=[outcomes],
            )
        )

    foreign = sorted(
        f"{name} from {path}"
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("cs336_assignment", "adapters")
        and (path := getattr(module, "__file__", None))
        and not inside(os.path.realpath(path), cwd)
    )
    with open(job["foreign"], "w") as f:
        json.dump(foreign, f)
    return code


def _start(job: dict) -> int:
    pid = os.fork()
    if pid:
        try:
            # the child does it too; whichever runs first, a kill finds the group
            os.setpgid(pid, pid)
        except OSError:
            pass
        return pid
    code = 70
    try:
        code = _child(job)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


def serve(fd_in: int = 0, fd_out: int = 1) -> None:
    """The server loop: JSON requests on ``fd_in``, one JSON reply per finished child on ``fd_out``."""
    running: dict[int, tuple[dict, float, float]] = {}  # pid -> (job, started, deadline)
    stopping = False

    def stop(signum, frame):  # noqa: ARG001
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = warm_up()
    os.write(fd_out, (json.dumps({"ready": True, "warm_failures": failed}) + "\n").encode())
    buf = b""
    try:
        while not stopping:
            r, _, _ = select.select([fd_in], [], [], 0.05)
            if r:
                data = os.read(fd_in, 1 << 16)
                if not data:  # the client is done (or gone): whatever still runs is not wanted
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        job = json.loads(line)
                        running[_start(job)] = (
                            job,
                            time.monotonic(),
                            time.monotonic() + job["timeout"],
                        )
            now = time.monotonic()
            for pid, (job, _, deadline) in list(running.items()):
                if now > deadline:
                    _kill(pid)
                    job["killed"] = True
            while running:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid not in running:
                    continue
                job, started, _ = running.pop(pid)
                code = KILLED if job.get("killed") else os.waitstatus_to_exitcode(status)
                _kill(pid, group_only=True)  # anything the child left running in its group
                reply = {
                    "id": job["id"],
                    "returncode": code,
                    "seconds": round(time.monotonic() - started, 3),
                }
                os.write(fd_out, (json.dumps(reply) + "\n").encode())
    finally:
        for pid in running:
            _kill(pid)
        for pid in running:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _kill(pid: int, *, group_only: bool = False) -> None:
    """SIGKILL the child's process group (the child and whatever it spawned), or the child alone
    (never after the child was reaped: ``group_only``, since its pid may be reused by then)."""
    for kill in (os.killpg,) if group_only else (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass


# ------------------------------------------------------------------------------------------------
# Client side
# ------------------------------------------------------------------------------------------------


class WarmJob:
    """A pytest session (or script) running in a child of the server; ``result()`` waits for it.

    Its timeout is enforced in the child (the job's ``timeout``), which reports the run as timed out.
    """

    def __init__(self, future: Future):
        self._future = future

    def result(self) -> PytestRun:
        return self._future.result()


class WarmPool:
    """Client of one warm fork-server; a context manager (closing kills whatever still runs)."""

    def __init__(self, *, light: bool = False, startup_timeout: float = 600):
        """Start the server. ``light`` skips the warm-up (only pytest is imported): for trees whose
        tests do not import torch, such as the staff tools' own sample repositories."""
        self._dir = Path(tempfile.mkdtemp(prefix="cs336-warm-"))
        # the server may cache the libraries' bytecode; its children never write any (see _child)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in (*NOT_INHERITED, "PYTHONDONTWRITEBYTECODE")
        }
        if light:
            env["CS336_WARM_LIGHT"] = "1"
        # a file, not a pipe: a chatty import cannot block the server
        self._err = self._dir / "server-stderr.txt"
        with open(self._err, "wb") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cs336_staff.session.warm"],
                cwd=self._dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Future, dict]] = {}
        self._ids = itertools.count()
        self._ready: Future = Future()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._startup_timeout = startup_timeout
        self.warm_failures: list[str] = []

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            msg = json.loads(line)
            if msg.get("ready"):
                self.warm_failures = msg.get("warm_failures", [])
                self._ready.set_result(True)
                continue
            with self._lock:
                future, job = self._pending.pop(msg["id"])
            try:
                future.set_result(self._collect(job, msg))
            except Exception as e:  # noqa: BLE001
                future.set_exception(e)
        # the server is gone: fail whatever still waits
        err = self._err.read_text(errors="replace") if self._err.exists() else ""
        error = RuntimeError(
            f"the warm pytest server exited ({self._proc.wait()}): {err.strip()[-2000:]}"
        )
        if not self._ready.done():
            self._ready.set_exception(error)
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for future, _ in pending:
            if not future.done():
                future.set_exception(error)

    def _collect(self, job: dict, msg: dict) -> PytestRun:
        output = (
            Path(job["output"]).read_text(errors="replace") if Path(job["output"]).exists() else ""
        )
        if msg["returncode"] == KILLED:
            output += f"\n[killed: ran longer than {job['timeout']:.0f} s]"
        results = Path(job["results"])
        foreign = (
            json.loads(Path(job["foreign"]).read_text()) if Path(job["foreign"]).exists() else []
        )
        run = read_run(msg["returncode"], results if results.exists() else None, output)
        run.foreign_modules = foreign
        run.seconds = msg.get("seconds", 0.0)
        run.timed_out = msg["returncode"] == KILLED
        shutil.rmtree(Path(job["output"]).parent, ignore_errors=True)
        return run

    def submit(
        self,
        cwd: Path,
        args: list[str],
        *,
        hide: list[Path] | tuple[Path, ...] = (),
        only_fixture: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 1800,
        code: str | None = None,
    ) -> WarmJob:
        """Run ``pytest args`` in ``cwd`` in a fresh child (or, with ``code``, exec that script with ``args`` as argv)."""
        if not self._ready.done():
            self._ready.result(timeout=self._startup_timeout)
        self._ready.result()
        i = next(self._ids)
        d = self._dir / f"job{i}"
        d.mkdir()
        job = {
            "id": i,
            "kind": "script" if code is not None else "pytest",
            "code": code,
            "cwd": str(Path(cwd).resolve()),
            "args": [str(a) for a in args],
            "hide": [str(Path(h).resolve()) for h in hide],
            "only_fixture": only_fixture,
            "env": dict(env or {}),
            "timeout": timeout,
            "output": str(d / "output.txt"),
            "results": str(d / "results.jsonl"),
            "foreign": str(d / "foreign.json"),
        }
        future: Future = Future()
        with self._lock:
            self._pending[i] = (future, job)
            assert self._proc.stdin is not None
            self._proc.stdin.write((json.dumps(job) + "\n").encode())
            self._proc.stdin.flush()
        return WarmJob(future)

    def run(self, cwd: Path, args: list[str], **kwargs) -> PytestRun:
        return self.submit(cwd, args, **kwargs).result()

    def close(self) -> None:
        """Stop the server (it kills any child still running) and delete its scratch files."""
        try:
            if self._proc.stdin and not self._proc.stdin.closed:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reader.join(timeout=5)
        shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    # ``-m`` put the server's scratch cwd first on the path: no use to anyone
    here = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
    serve()
