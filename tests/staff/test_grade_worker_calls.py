"""One call across the judge/worker line, in this process (no sandbox, no subprocess): regressions.

The worker's ``serve_one`` is driven over a pair of pipes with a request the judge would send, and
the judge's ``rebuild_exception`` with the error the worker would describe.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import threading

import pytest
import torch

import tests.boundary as boundary
import tests.scenarios
from cs336_staff.grade.remote import (
    PRINTED_CHARS,
    OutputTap,
    Remote,
    WorkerCrashed,
    WorkerProcess,
    rebuild_exception,
    worker_traceback,
)
from cs336_staff.worker import channel, codec
from cs336_staff.worker.main import Worker
from tests.scenarios import accounting

pytestmark = pytest.mark.staff


def request(head: dict, args: list, kwargs: dict) -> tuple[dict, codec.Encoder]:
    """A request as the judge encodes it."""
    encoder = codec.Encoder()
    message = {**head, "args": encoder.encode(args), "kwargs": encoder.encode(kwargs)}
    return {**message, "storages": encoder.storages}, encoder


def serve(worker: Worker, message: dict, encoder: codec.Encoder):
    """Send one request to ``worker``; return its decoded reply (or raise its error)."""
    requests, replies = os.pipe(), os.pipe()
    worker.requests, worker.replies = requests[0], replies[1]
    try:
        channel.send(requests[1], message, encoder.blobs)
        assert worker.serve_one()
        reply, blobs = channel.receive(replies[0], 1 << 26)
    finally:
        for fd in (*requests, *replies):
            os.close(fd)
    if "error" in reply:
        raise rebuild_exception(reply["error"])
    return codec.Decoder(reply["storages"], blobs, known=encoder.storage_objects,
                         handle=lambda node: f"a handle of a {node['type']}").decode(reply["ok"])


def test_a_scenario_argument_of_a_class_its_own_module_defines_decodes_on_the_first_call(monkeypatch):
    """The worker imports a scenario's module before decoding the arguments, so its @plain_data classes are known."""
    monkeypatch.setattr(codec, "DATA_TYPES", boundary.DATA_TYPES)
    net, x = accounting.Net("mlp", (4, 8, 1)), torch.ones(3, 4)
    target = "tests.scenarios.accounting:student_count_flops"  # a driver whose first argument is a Net
    message = request({"op": "call", "target": target}, [net, x], {"backward": False})
    # a fresh worker has imported neither the scenario module nor, so, its classes
    monkeypatch.setattr(tests.scenarios, "accounting", accounting)
    monkeypatch.delitem(sys.modules, "tests.scenarios.accounting")
    for registry in (boundary.DATA_TYPES, boundary.SCENARIOS):
        for name in [n for n in registry if n.startswith("tests.scenarios.accounting:")]:
            monkeypatch.delitem(registry, name)
    flops = serve(Worker(-1, -1), *message)
    assert flops == 2 * 3 * (4 * 8 + 8 * 1), flops  # count_flops of the Net's mlp, forward only


def describe(e: BaseException) -> dict:
    return Worker(-1, -1).describe(e)


def test_a_rebuilt_os_error_still_names_its_file(tmp_path):
    """open() keeps the file name outside an OSError's args; the rebuilt error's str still names it."""
    try:
        open(tmp_path / "never-saved.pt")
    except OSError as e:
        error = e
    rebuilt = rebuild_exception(describe(error))
    assert isinstance(rebuilt, FileNotFoundError) and rebuilt.args == error.args
    assert str(rebuilt) == str(error) and "never-saved.pt" in str(rebuilt)
    with pytest.raises(FileNotFoundError, match="never-saved"):
        raise rebuilt


def test_a_rebuilt_error_of_a_class_with_its_own_str_reads_as_it_did():
    """An exception class that defines __str__ comes back with that text, not its bare args."""

    class CheckpointError(ValueError):
        def __str__(self) -> str:
            return f"cannot read {self.args[0]}"

    rebuilt = rebuild_exception(describe(CheckpointError("ckpt.pt")))
    assert isinstance(rebuilt, ValueError) and type(rebuilt).__name__ == "CheckpointError"
    assert str(rebuilt) == "cannot read ckpt.pt" and rebuilt.args == ("ckpt.pt",)


def test_a_rebuilt_error_whose_args_make_its_message_is_unchanged():
    """When the args alone say it (the usual case), the rebuilt error is just the class and args."""
    rebuilt = rebuild_exception(describe(ValueError("d_in must be positive, got 0")))
    assert str(rebuilt) == "d_in must be positive, got 0" and "worker_str" not in rebuilt.__dict__


class OwnError(Exception):
    """A submission's own exception class: its nearest builtin base is Exception itself."""


@pytest.mark.parametrize("error", [OwnError("bad checkpoint"), pickle.UnpicklingError("not a checkpoint"),
                                   UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")],
                         ids=["own-class", "unpickling", "five-arg-init"])
def test_any_exception_class_is_rebuilt_as_what_a_student_run_raises(error):
    """Every class comes back without an error of its own (a class whose base is Exception once gave
    'Cannot create a consistent method resolution order'), with its name and message, as an instance of
    the nearest class the judge trusts: pytest.raises(pickle.UnpicklingError) works as in one process."""
    rebuilt = rebuild_exception(describe(error))
    assert type(rebuilt).__name__ == type(error).__name__ and str(rebuilt) == str(error)
    nearest = Exception if isinstance(error, OwnError) else type(error)
    assert isinstance(rebuilt, nearest)
    with pytest.raises(nearest, match=re.escape(str(error))):
        raise rebuilt


def test_a_rebuilt_error_carries_no_traceback_a_match_could_find():
    """The worker's traceback (the adapter's own line among it) is kept for the test's output, never as a
    note: pytest.raises(match=) searches notes, and a student's own run has none."""
    def failing_adapter():
        raise ValueError("high <= 0")

    try:
        failing_adapter()
    except ValueError as e:
        rebuilt = rebuild_exception(describe(e))
    assert not getattr(rebuilt, "__notes__", None)
    assert "failing_adapter" in worker_traceback(rebuilt)
    with pytest.raises(AssertionError):  # "failing_adapter" is in the traceback only, not in what match reads
        with pytest.raises(ValueError, match="failing_adapter"):
            raise rebuilt


def test_the_output_a_call_printed_is_taken_whole_once_the_workers_mark_arrives():
    """``OutputTap.take(through=mark)`` waits for the mark the worker writes after a call's output (it
    may arrive after the reply), returns everything before it without the mark, and keeps more than
    a report's cut when asked."""
    read_end, write_end = os.pipe()
    tap = OutputTap(os.fdopen(read_end, "rb"))
    mark = "\n[mark 1]\n"
    os.write(write_end, b"x" * 20_000)
    threading.Timer(0.2, lambda: os.write(write_end, f"tail{mark}".encode())).start()
    text = tap.take(through=mark, timeout=10, limit=PRINTED_CHARS)
    assert text == "x" * 20_000 + "tail"
    os.write(write_end, b"y" * 20_000)
    os.close(write_end)
    tap.join()
    assert "characters cut" in tap.take(), "a report's copy is still cut to OUTPUT_PER_TEST"


def _sleeping_worker(requests: int = -1, replies: int = -1) -> tuple[Remote, WorkerProcess]:
    """A Remote whose current worker is a sleeping process in a session of its own, talked to over the
    pipe ends ``requests`` and ``replies`` (none by default)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    read_end, write_end = os.pipe()
    os.close(write_end)
    worker = WorkerProcess(proc, requests=requests, replies=replies, output=OutputTap(os.fdopen(read_end, "rb")))
    remote = Remote(lambda: worker)
    remote.worker = worker
    return remote, worker


def test_a_call_killed_by_the_judge_reports_the_kill_and_is_not_counted_as_a_crash(monkeypatch):
    """``call_killed``: once ``once()`` holds and ``after`` passed, the worker's process is SIGKILLed; the
    call's crash comes back as (None, killed, printed) and the worker's crash count is unchanged."""
    remote, worker = _sleeping_worker()

    def call(target, args, kwargs):  # a call in flight ends when its worker dies, as _exchange reports it
        worker.proc.wait()
        remote.crashes += 1
        raise WorkerCrashed("the worker running your code ended")

    monkeypatch.setattr(remote, "call", call)
    value, killed, _ = remote.call_killed("adapters:run", (), {}, once=lambda: True, after=0.05)
    assert (value, killed, remote.crashes, worker.proc.returncode) == (None, True, 0, -signal.SIGKILL)


def test_a_call_that_answers_before_its_kill_is_due_keeps_its_worker(monkeypatch):
    """The call returned first: its value stands, nothing is killed."""
    remote, worker = _sleeping_worker()
    monkeypatch.setattr(remote, "call", lambda target, args, kwargs: 3)
    monkeypatch.setattr(remote, "printed", lambda: "printed")
    try:
        assert remote.call_killed("adapters:run", (), {}, once=lambda: False, after=0.0) == (3, False, "printed")
        assert worker.proc.poll() is None
    finally:
        worker.kill()


# -- the judge's objects in the worker: stand-ins (judge_object.py) -----------------------------------


def test_a_judge_objects_stand_in_asks_the_judge_for_every_public_read_call_and_write():
    """Methods the judge listed become calls, other names reads, assignments writes; private names never cross."""
    from cs336_staff.worker.judge_object import JudgeObject

    asked = []
    stand_in = JudgeObject(lambda *request, **kw: asked.append((request, kw)) or "answer", "torch.optim.SGD", ["step"])
    assert stand_in.step(closure=None) == "answer" and stand_in.param_groups == "answer"
    stand_in.defaults = {"lr": 0.1}
    assert asked == [(("call", "step"), {"closure": None}), (("getattr", "param_groups"), {}),
                     (("setattr", "defaults", {"lr": 0.1}), {})]
    with pytest.raises(AttributeError, match="private"):
        stand_in._optimizer_step_pre_hooks  # noqa: B018
    assert "lives in the judge" in repr(stand_in) and len(asked) == 3


def test_a_stand_in_passes_isinstance_as_the_judges_object_and_its_copies_write_through():
    """isinstance(opt, torch.optim.Optimizer) holds for a stand-in of the test's SGD; param_groups[0]["lr"] = x
    reaches the judge's object; other mutations of the copy raise."""
    import torch

    from cs336_staff.worker.judge_object import JudgeObject, imported_class

    asked = []

    def ask(*request):
        asked.append(request)
        return [{"lr": 0.5, "params": []}] if request[0] == "getattr" else None

    stand_in = JudgeObject(ask, "torch.optim.sgd.SGD", ["step"], imported_class("torch.optim.sgd", "SGD"))
    assert isinstance(stand_in, torch.optim.Optimizer) and isinstance(stand_in, torch.optim.SGD)
    assert not isinstance(JudgeObject(ask, "tests.x.Gone", [], imported_class("tests.x", "Gone")), torch.optim.Optimizer)
    groups = stand_in.param_groups
    groups[0]["lr"] = 0.1
    assert asked == [("getattr", "param_groups"), ("assign", "param_groups", [0, "lr"], 0.1)]
    with pytest.raises(TypeError, match="the test's torch.optim.sgd.SGD's list would not reach it"):
        groups.append({})


def test_the_judge_serves_a_stand_in_public_names_only():
    """The judge's side of a stand-in: reads, calls and writes on its object; a private name or an unknown request is refused."""
    import torch

    from cs336_staff.grade.remote import JudgeSide

    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    side = JudgeSide(torch.optim.SGD([p], lr=0.5))
    assert side("getattr", "defaults")["lr"] == 0.5
    side("call", "step")
    assert p.tolist() == [0.5, 0.5]
    side("setattr", "defaults", {"lr": 0.1})
    assert side.obj.defaults == {"lr": 0.1}
    side("assign", "param_groups", [0, "lr"], 0.25)
    assert side.obj.param_groups[0]["lr"] == 0.25
    for request in [("getattr", "__dict__"), ("call", "_cuda_graph_capture_health_check")]:
        with pytest.raises(AttributeError, match="public attributes only"):
            side(*request)
    with pytest.raises(ValueError, match="unknown request"):
        side("delattr", "defaults")


@pytest.mark.parametrize(("name", "raised"), [("ValueError", ValueError), ("KeyError", KeyError),
                                              ("CodecError", RuntimeError), ("SystemExit", RuntimeError)])
def test_a_judge_objects_error_is_raised_in_the_workers_code_as_the_same_builtin(name, raised):
    """load_state_dict's ValueError is a ValueError in the student's code; a class of no builtin name a RuntimeError naming it."""
    from cs336_staff.worker.judge_object import raised_here

    error = raised_here(name, "the message")
    assert type(error) is raised and "the message" in str(error)
    assert name in str(error) or type(error).__name__ == name


def test_rng_states_travel_only_when_changed_since_both_sides_last_agreed():
    """A message carries its sender's state of a global generator only when it changed since the last agreement
    (a draw; not after the other side's state arrived and was taken), and every state after forget() (a fresh worker)."""
    import random

    import torch

    from cs336_staff.worker import rngs

    judge, worker = rngs.Sync(), rngs.Sync()
    with torch.random.fork_rng(devices=[]):
        saved = random.getstate()
        try:
            enc = codec.Encoder()
            first = judge.outgoing(enc)  # nothing agreed yet: every generator's state
            assert set(first) == {"random", "numpy", "torch"}
            worker.incoming(first, enc.blobs)  # (one process here: the states taken are the same ones)
            assert judge.outgoing(codec.Encoder()) is None  # nothing drawn since
            torch.rand(1)
            enc = codec.Encoder()
            node = judge.outgoing(enc)
            assert set(node) == {"torch"}  # only the generator that changed
            worker.incoming(node, enc.blobs)
            assert worker.outgoing(codec.Encoder()) is None  # the worker has what it was sent
            worker.incoming(None, [])  # a message without states changes nothing
            assert worker.outgoing(codec.Encoder()) is None
            random.random()
            assert set(worker.outgoing(codec.Encoder())) == {"random"}
            judge.forget()
            assert set(judge.outgoing(codec.Encoder())) == {"random", "numpy", "torch"}
        finally:
            random.setstate(saved)


def test_randoms_fingerprint_is_its_twister_read_in_place_and_tells_every_change():
    """On CPython the fingerprint of ``random`` is read in place (a tenth of ``getstate()``'s cost, checked
    against it once); equal after the same seed, different after a draw or a gauss cached."""
    import random

    from cs336_staff.worker import rngs

    saved = random.getstate()
    try:
        random.seed(5)
        first = rngs.fingerprints()["random"]
        assert rngs._random_layout_ok, "the in-place read disagreed with getstate(): every message pays getstate()"
        random.seed(5)
        assert rngs.fingerprints()["random"] == first
        random.random()
        assert rngs.fingerprints()["random"] != first
        random.seed(5)
        random.gauss(0.0, 1.0)
        with_gauss = rngs.fingerprints()["random"]
        random.seed(5)
        random.random(), random.random()  # the same twister steps as one gauss, no cached normal
        assert rngs.fingerprints()["random"] != with_gauss
    finally:
        random.setstate(saved)


def test_a_bound_tensors_digest_reads_its_bytes_in_place_and_tells_every_change():
    """``bound._digest`` hashes a contiguous CPU tensor's bytes where they lie, giving the hash of a copy (so the
    receiver's hash of the blob it took matches), tells a write through ``.data`` apart, and falls back to a copy
    for a strided view, a conjugate view and a tensor subclass."""
    import hashlib

    import torch

    from cs336_staff.worker import bound

    def copied(t):
        return hashlib.blake2b(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy(), digest_size=16).digest()

    p = torch.nn.Parameter(torch.arange(15.0).reshape(5, 3))
    assert bound._memory(p) is not None
    assert bound._digest(p) == (torch.float32, (5, 3), copied(p))
    before = bound._digest(p)
    p.data[2, 1] += 1.0  # no version bump: only the bytes tell
    assert bound._digest(p) != before and bound._digest(p)[2] == copied(p)
    assert bound._digest(torch.empty(0, 3))[2] == hashlib.blake2b(b"", digest_size=16).digest()

    class Sub(torch.Tensor):
        pass

    strided, conj = p.detach().t(), torch.tensor([1 + 2j, 3 - 1j]).conj()
    for t in (strided, conj, torch.arange(4.0).as_subclass(Sub)):
        assert bound._memory(t) is None
    assert bound._digest(strided)[2] == copied(strided)
    assert bound._digest(torch.empty(2, device="meta")) == (torch.float32, (2,))
    for storage in (p.untyped_storage(), torch.empty(0).untyped_storage()):  # an argument storage's, read in place too
        assert codec.digest(storage) == hashlib.blake2b(codec.storage_bytes(storage), digest_size=16).digest()


def test_bound_changes_are_written_into_the_receivers_own_tensors_as_copy_would():
    """A change the worker made in place is written into the judge's tensor in place (same memory, same ``.grad``
    object, its version counter bumped as ``copy_`` bumps it); new memory or a new ``.grad`` on the worker's side is
    new memory on the judge's; a change whose bytes do not make its shape is refused and leaves the tensor as it was."""
    import torch

    from cs336_staff.worker import bound

    judge, worker = bound.Bindings(weak=True, limit=1 << 20), bound.Bindings(weak=False)
    p = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    enc = codec.Encoder()
    twin = worker.decode(judge.encode(p, enc), enc.blobs)

    def sync() -> None:
        enc = codec.Encoder()
        judge.apply(worker.changes(enc), [memoryview(b) for b in enc.blobs])

    where, version = p.data_ptr(), p._version
    with torch.no_grad():
        twin.mul_(2.0)
    twin.grad = torch.ones(2, 3)
    sync()
    assert torch.equal(p.detach(), torch.arange(6.0).reshape(2, 3) * 2) and p.data_ptr() == where
    assert p._version > version and torch.equal(p.grad, torch.ones(2, 3))
    grad = p.grad
    twin.grad.add_(1.0)
    sync()
    assert p.grad is grad and torch.equal(grad, torch.full((2, 3), 2.0))
    twin.data = torch.zeros(3, 2, dtype=torch.float64)
    sync()
    assert p.dtype == torch.float64 and p.shape == (3, 2) and p.data_ptr() != where
    before = p.detach().clone()
    enc = codec.Encoder()
    node = bound.encode_dense(torch.ones(3, 2, dtype=torch.float64), enc)
    with pytest.raises(codec.CodecError, match="needs 48 bytes, got 47"):
        judge.apply([[1, {"data": node}]], [enc.blobs[0][:-1]])
    assert torch.equal(p.detach(), before)


def _worker_in_a_thread() -> tuple[Remote, threading.Thread, WorkerProcess]:
    """A Remote whose worker is a ``Worker`` serving in a thread of this process over two pipes (no
    subprocess, no sandbox): a whole request with its callbacks, both sides' code as in grading."""
    requests, replies = os.pipe(), os.pipe()
    worker = Worker(requests[0], replies[1])
    thread = threading.Thread(target=lambda: [None for _ in iter(worker.serve_one, False)], daemon=True)
    thread.start()
    remote, process = _sleeping_worker(requests=requests[1], replies=replies[0])
    return remote, thread, process


def test_a_stand_in_of_the_tests_model_yields_its_parameters_and_returns_itself(monkeypatch):
    """A model passed through ``stays_in_the_test``: ``next(model.parameters())`` works on its stand-in (a
    generator comes back as an iterator over its items, bound to the test's parameters, so an in-place
    change there reaches the test's), ``model.eval()`` returns the same stand-in and switches the test's
    model, and the stand-in passes ``isinstance`` as an ``nn.Module``."""
    import torch

    def uses_the_model(model):
        first = next(model.parameters())
        with torch.no_grad():
            first.add_(1.0)
        return [list(first.shape), model.eval() is model, isinstance(model, torch.nn.Linear)]

    target = "tests.scenarios.checkpoint:uses_the_model"
    monkeypatch.setitem(boundary.SCENARIOS, target, uses_the_model)
    remote, thread, process = _worker_in_a_thread()
    remote.judge_side_objects = boundary.JUDGE_SIDE_OBJECTS
    model = boundary.stays_in_the_test(torch.nn.Linear(2, 3))
    before = model.weight.detach().clone()
    try:
        assert remote.call(target, (model,), {}) == [[3, 2], True, True]
    finally:
        os.close(process.requests)
        thread.join(timeout=10)
        process.proc.kill()
    assert not model.training
    torch.testing.assert_close(model.weight.detach(), before + 1.0)
