"""The behavioural leak check of ``release --check``: no function the handout ships computes a graded one.

The AST leak check (``check.check_leaks``) finds solution code copied out of the regions; it
cannot see a solution written independently, such as the full-recount BPE trainer that once
shipped in ``tests/`` as the tests' oracle (it now lives in ``tests/hidden/bpe_naive.py``). This check asks what a student would
ask: is there a function in the handout I could call instead of writing mine?

1. Record. The reference runs of the public tests load ``io_recorder.py``, which keeps, for each
   ``adapters.run_*``, up to 8 calls with plain arguments and results (``run_train_bpe`` on
   ``fixtures/corpora/mini.txt`` at 400 and its (vocab, merges), ``run_flat_index((1, 2), (3, 1))``
   and 5, ...).
2. Replay. In the stub tree, a script (``REPLAY``) imports every .py module of the handout and
   calls each module-level function whose signature accepts a recorded call's arguments (a
   5-second alarm per call). Adapters whose target is given code (``run_cs336``, the
   measurement helpers) are not replayed: the handout is meant to implement them.
3. Judge. A function that reproduces every recorded call it accepts, at least one, with either
   two different results or one rich result (8+ values: a tensor, a vocabulary) implements that
   graded function: a leak, reported as ``file: function reproduces adapter (k of n calls)``.

Limits: only ``run_*`` adapters with plain arguments are replayed (not the classes behind
``get_*_cls``: a shipped optimizer would go unseen), only module-level functions are candidates
(not methods, lambdas or nested functions), and a leak that needs other arguments (a trainer
returning merges only, or taking a text instead of a path) or whose results differ in form goes
unseen. What it sees it sees reliably: equal outputs on the reference's own inputs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from cs336_staff.release.results import Check
from cs336_staff.session.runner import PytestRun
from cs336_staff.worker.adapter_rule import read_adapters

IO_RECORDER = Path(__file__).with_name("io_recorder.py")
RECORDER_MODULE = "cs336_io_recorder"
CALL_SECONDS = 5

REPLAY = r"""
import importlib, importlib.util, inspect, json, math, pickle, signal, sys, warnings
from pathlib import Path

root = Path.cwd()
recordings_files, files, graded = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
targets = json.loads(sys.argv[4])  # adapter -> the function it calls (cs336_staff/worker/adapter_rule.py)
calls = {}
for f in json.loads(recordings_files):
    with open(f, "rb") as fh:
        for name, items in pickle.load(fh).items():
            calls.setdefault(name, []).extend(items)


class _Absent:  # stands for torch or numpy when no recording needed them
    Tensor = ndarray = type("Never", (), {})


def _late(name):
    return sys.modules.get(name, _Absent)

calls = {a: c[:8] for a, c in calls.items() if targets.get(a) in graded}


def thaw(x):
    if isinstance(x, tuple) and len(x) == 2 and x[0] == "__path__":
        return root / x[1]
    if isinstance(x, tuple) and len(x) == 4 and x[0] == "__tensor__":
        import torch as _torch

        dtype = getattr(_torch, x[1])
        flat = _torch.frombuffer(bytearray(x[3]), dtype=_torch.uint8) if x[3] else _torch.empty(0, dtype=_torch.uint8)
        return flat.view(dtype).reshape(x[2]).clone()
    torch, np = _late("torch"), _late("numpy")
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, (list, tuple)):
        return type(x)(thaw(v) for v in x)
    if isinstance(x, dict):
        return {k: thaw(v) for k, v in x.items()}
    return x


def same(a, b):
    torch, np = _late("torch"), _late("numpy")
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and bool(torch.allclose(a.double(), b.double(), rtol=1e-6, atol=1e-9, equal_nan=True)))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b)
    return type(a) is type(b) and a == b


def size(x):
    torch, np = _late("torch"), _late("numpy")
    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, np.ndarray):
        return x.size
    if isinstance(x, (list, tuple)):
        return sum(size(v) for v in x)
    if isinstance(x, dict):
        return sum(1 + size(v) for v in x.values())
    return 1


def alarm(signum, frame):
    raise TimeoutError


signal.signal(signal.SIGALRM, alarm)
candidates = []
for rel in files:
    name = rel[:-3].replace("/", ".").removesuffix(".__init__")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if "/" in rel and not Path(rel).parent.joinpath("__init__.py").exists():
                spec = importlib.util.spec_from_file_location(f"_handout_{len(candidates)}", root / rel)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            else:
                module = importlib.import_module(name)
    except BaseException as err:  # a module that does not import offers no functions to call
        print(f"note: cannot import {rel}: {type(err).__name__}: {err}", file=sys.stderr)
        continue
    for attr, fn in vars(module).items():
        if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not attr.startswith("test"):
            if rel == "adapters.py" or (rel.startswith("cs336_assignment/") and attr in graded):
                continue  # the adapters themselves, and the stubs of the graded functions
            candidates.append((f"{rel}: {attr}", fn))

findings = []
for cand, fn in candidates:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        continue
    for adapter, items in calls.items():
        matched, missed, results = 0, 0, []
        for args, kwargs, result in items:
            try:
                sig.bind(*args, **kwargs)
            except TypeError:
                continue
            result = thaw(result)
            signal.alarm(CALL_SECONDS)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = fn(*thaw(args), **thaw(kwargs))
                ok = same(got, result)
            except BaseException:
                ok = False
            finally:
                signal.alarm(0)
            if ok:
                matched += 1
                if not any(same(result, r) for r in results):
                    results.append(result)
            else:
                missed += 1
                break
        if matched and not missed and (len(results) >= 2 or max(size(r) for r in results) >= 8):
            findings.append({"candidate": cand, "adapter": adapter, "matched": matched, "of": len(items)})
print(json.dumps({"findings": findings, "candidates": len(candidates), "adapters": sorted(calls)}))
""".replace("CALL_SECONDS", str(CALL_SECONDS))


def data_adapters(tree: Path) -> dict[str, str]:
    """The adapters of ``tree`` that take and return data -> the function each calls."""
    adapters = read_adapters((Path(tree) / "adapters.py").read_text())
    return {a.name: a.target for a in adapters.values() if a.takes_data}


def prepare_reference_tree(tree: Path) -> dict[str, str]:
    """Put the recording plugin into a reference tree (load it with ``-p cs336_io_recorder``); the
    environment that tells it what to record, but for ``CS336_IO_OUT``."""
    shutil.copyfile(IO_RECORDER, Path(tree) / f"{RECORDER_MODULE}.py")
    return {"CS336_IO_ADAPTERS": ",".join(data_adapters(tree))}


def replay_args(
    recordings: list[Path], files: list[str], graded: Iterable[str], tree: Path
) -> list[str]:
    """argv for ``REPLAY``: the recording files, the handout's .py files in ``tree``, the graded function
    names, and what each of the tree's data adapters calls."""
    return [
        json.dumps([str(p) for p in recordings]),
        json.dumps(files),
        json.dumps(sorted(graded)),
        json.dumps(data_adapters(tree)),
    ]


def replay_check(run: PytestRun) -> Check:
    """The ``Check`` line of the replay's run (a warm script job in the stub tree)."""

    lines = run.output.strip().splitlines()
    try:
        verdict = json.loads(
            next(line for line in reversed(lines) if line.startswith('{"findings"'))
        )
    except (StopIteration, json.JSONDecodeError):
        return Check(
            "behaviour",
            False,
            "the replay of the recorded adapter calls did not finish",
            lines[-8:],
        )
    found = [
        f"{f['candidate']} reproduces {f['adapter']} ({f['matched']} of {f['of']} recorded calls): a working "
        "solution ships with the handout; move it to tests/hidden/ or a STAFF-ONLY file"
        for f in verdict["findings"]
    ]
    if not verdict["adapters"]:
        return Check(
            "behaviour",
            False,
            "no adapter call was recorded in the reference run; is the io recorder loaded?",
        )
    if found:
        return Check(
            "behaviour", False, f"{len(found)} shipped functions compute a graded function", found
        )
    return Check(
        "behaviour",
        True,
        f"none of the {verdict['candidates']} functions the handout ships reproduces the recorded calls "
        f"of the {len(verdict['adapters'])} graded run_* adapters",
    )
