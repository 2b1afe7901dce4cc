"""The grading child: lock itself down, then run pytest and report each test through a MAC'd channel.

This file is copied into the sandbox (outside the submission's reach) and run as a script by
``sandbox.py``; it imports only the standard library and pytest, never ``cs336_staff``, because
the staff repository is removed from ``sys.path`` before any student code can be imported.

Order of events (all before pytest imports the first test module, hence before student code):

1. read the spec (JSON, including a fresh random key) from a pipe, then close the pipe;
2. resource limits: RLIMIT_AS (memory), RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_CORE=0, RLIMIT_NPROC;
3. inside a fresh network namespace (made by ``unshare``), bring the loopback device up;
4. if started as root: drop to an unprivileged uid/gid, keeping at most CAP_DAC_READ_SEARCH
   (read-only access to an interpreter installed under a private home), set no_new_privs;
5. remove the staff repository from ``sys.path`` (else a missing student module would silently
   fall back to the reference solution) and run ``pytest.main`` with the reporting plugin.

Records are JSON lines ``{"p": payload, "m": hmac_sha256(key, payload)}`` with a sequence number
in each payload, written to a file descriptor whose path the child never learns. The parent drops
lines whose MAC or sequence is wrong. This defeats forged result files; it does not defeat code
that digs the key out of this process's memory (see THREAT_MODEL.md).

Deliberately left out: seccomp filters, cgroups (the batch scheduler or container provides them).
"""

import ctypes
import hashlib
import hmac
import json
import os
import resource
import sys

_SEQ = [0]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option, arg2=0):
    if _libc().prctl(option, ctypes.c_ulong(arg2), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _loopback_up():
    import fcntl
    import socket
    import struct

    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ifr = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 0x1 | 0x40))  # SIOCSIFFLAGS UP|RUNNING
        s.close()
    except OSError:
        pass


def _keep_read_search_only():
    """After setuid: keep CAP_DAC_READ_SEARCH (bit 2) in every set, ambient included, nothing else."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    bit = 1 << 2
    data = (Data * 2)(Data(bit, bit, bit), Data(0, 0, 0))
    if _libc().capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    _libc().prctl(47, 2, 2, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH


def lock_down(spec):
    lim = spec["limits"]
    for name, value in (("RLIMIT_AS", lim.get("memory_bytes")), ("RLIMIT_FSIZE", lim.get("file_bytes")),
                        ("RLIMIT_CORE", 0), ("RLIMIT_NPROC", lim.get("nproc"))):
        if value is not None:
            resource.setrlimit(getattr(resource, name), (value, value))
    if lim.get("cpu_seconds"):
        cpu = int(lim["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if spec.get("netns"):
        _loopback_up()
    uid = spec.get("uid")
    if uid is not None:
        keep = spec.get("keep_read_search", False)
        if keep:
            _prctl(8, 1)  # PR_SET_KEEPCAPS: keep permitted caps across setuid
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if keep:
            _keep_read_search_only()
        _prctl(1, 9)  # PR_SET_PDEATHSIG = SIGKILL (setuid cleared the one unshare set)
        _prctl(4, 1)  # PR_SET_DUMPABLE: setuid made /proc/self root-owned; the uid is unique to this run
    _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    strip = {os.path.realpath(p) for p in spec.get("strip_paths", [])}
    strip.add(os.path.realpath(os.path.dirname(os.path.abspath(__file__))))
    sys.path[:] = [p for p in sys.path if not p or os.path.realpath(p) not in strip]


class GradePlugin:
    """Reports collection and every test's outcome through the MAC'd records channel."""

    def __init__(self, key, fd, only, output_chars):
        self._key = key
        self._fd = fd
        self._only = None if only is None else set(only)
        self._chars = output_chars
        self._phases = {}
        self._timeouts = {}

    def _emit(self, body):
        _SEQ[0] += 1
        payload = json.dumps({"seq": _SEQ[0], **body}, sort_keys=True)
        mac = hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()
        data = (json.dumps({"p": payload, "m": mac}) + "\n").encode()
        while data:
            data = data[os.write(self._fd, data):]

    def _trunc(self, text):
        n = self._chars
        if len(text) <= n:
            return text
        head = n // 3
        return text[:head] + f"\n[... {len(text) - n} characters cut ...]\n" + text[-(n - head):]

    # -- collection
    def pytest_collectreport(self, report):
        if report.failed:
            self._emit({"event": "collect_error", "nodeid": report.nodeid,
                        "longrepr": self._trunc(str(report.longrepr))})

    def pytest_collection_modifyitems(self, session, config, items):
        if self._only is not None:
            keep = [i for i in items if i.nodeid in self._only]
            dropped = [i for i in items if i.nodeid not in self._only]
            if dropped:
                config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        for i in items:
            m = i.get_closest_marker("timeout")
            if m is not None and m.args and isinstance(m.args[0], (int, float)):
                self._timeouts[i.nodeid] = float(m.args[0])
        self._emit({"event": "collected", "items": [
            {"nodeid": i.nodeid, "markers": sorted({m.name for m in i.iter_markers()})} for i in items]})

    # -- running
    def pytest_runtest_logstart(self, nodeid, location):
        self._phases[nodeid] = []
        self._emit({"event": "start", "nodeid": nodeid, "timeout": self._timeouts.get(nodeid)})

    def pytest_runtest_logreport(self, report):
        self._phases.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid, location):
        reports = self._phases.pop(nodeid, [])
        outcome, text, duration = "passed", "", 0.0
        for r in reports:
            duration += getattr(r, "duration", 0.0) or 0.0
        failed = [r for r in reports if r.failed]
        skipped = [r for r in reports if r.skipped]
        if failed:
            r = failed[0]
            outcome = "failed" if r.when == "call" else "error"
            text = r.longreprtext or ""
            if "from pytest-timeout" in text or "Timeout (>" in text:
                outcome = "timeout"
            for title, content in r.sections:
                text += f"\n----- {title} -----\n{content}"
        elif skipped:
            r = skipped[0]
            outcome = "skipped"
            if hasattr(r, "wasxfail"):
                text = f"xfail: {r.wasxfail}"
            elif isinstance(r.longrepr, tuple) and len(r.longrepr) == 3:
                text = str(r.longrepr[2])
            else:
                text = str(r.longrepr)
        self._emit({"event": "result", "nodeid": nodeid, "outcome": outcome,
                    "output": self._trunc(text), "duration": round(duration, 4)})

    def pytest_sessionfinish(self, session, exitstatus):
        self._emit({"event": "finish", "exitstatus": int(exitstatus)})


def main():
    spec_fd = int(os.environ.pop("CS336_GRADE_SPEC_FD"))
    with os.fdopen(spec_fd, "rb") as f:
        spec = json.loads(f.read().decode())
    lock_down(spec)
    import pytest

    plugin = GradePlugin(bytes.fromhex(spec.pop("key")), spec["records_fd"], spec.get("only"),
                         spec.get("output_chars", 4000))
    args = spec["pytest_args"]
    del spec
    code = pytest.main(args, plugins=[plugin])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main()
