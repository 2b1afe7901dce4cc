"""One call across the judge/worker line, in this process (no sandbox, no subprocess): regressions.

The worker's ``serve_one`` is driven over a pair of pipes with a request the judge would send, and
the judge's ``rebuild_exception`` with the error the worker would describe.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import signal
import subprocess
import sys
import threading

import pytest

import tests.boundary as boundary
from cs336_staff.grade.errors import (
    NotPlainData,
    WorkerCrashed,
    rebuild_exception,
    worker_traceback,
)
from cs336_staff.grade.output import PRINTED_CHARS, OutputTap
from cs336_staff.grade.remote import Remote, WorkerProcess
from cs336_staff.worker import channel, codec
from cs336_staff.worker.main import Worker

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
    if "not_plain" in reply:
        raise NotPlainData(reply["not_plain"])
    return codec.Decoder(reply["storages"], blobs, known=encoder.storage_objects).decode(
        reply["ok"]
    )


def test_a_driver_argument_of_a_class_its_own_module_defines_decodes_on_the_first_call(monkeypatch):
    """The worker imports a driver's module before decoding the arguments, so its @plain_data classes are known."""
    import torch

    import tests.scenarios
    from tests.scenarios import accounting

    monkeypatch.setattr(codec, "DATA_TYPES", boundary.DATA_TYPES)
    net, x = accounting.Net("mlp", (4, 8, 1)), torch.ones(3, 4)
    # a driver whose first argument is a Net
    target = "tests.scenarios.accounting:student_count_flops"
    message = request({"op": "call", "target": target}, [net, x], {"backward": False})
    # a fresh worker has imported neither the driver's module nor, so, its classes
    monkeypatch.setattr(tests.scenarios, "accounting", accounting)
    monkeypatch.delitem(sys.modules, "tests.scenarios.accounting")
    for registry in (boundary.DATA_TYPES, boundary.DRIVERS):
        for name in [n for n in registry if n.startswith("tests.scenarios.accounting:")]:
            monkeypatch.delitem(registry, name)
    flops = serve(Worker(-1, -1), *message)
    # count_flops of the mlp the Net describes, forward only
    assert flops == 2 * 3 * (4 * 8 + 8 * 1), flops


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


@pytest.mark.parametrize(
    "error",
    [
        OwnError("bad checkpoint"),
        pickle.UnpicklingError("not a checkpoint"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ],
    ids=["own-class", "unpickling", "five-arg-init"],
)
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
    # "failing_adapter" is in the traceback only, not in what match reads
    with pytest.raises(AssertionError):
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
    worker = WorkerProcess(
        proc, requests=requests, replies=replies, output=OutputTap(os.fdopen(read_end, "rb"))
    )
    remote = Remote(lambda: worker)
    remote.worker = worker
    return remote, worker


def test_a_call_killed_by_the_judge_reports_the_kill_and_is_not_counted_as_a_crash(monkeypatch):
    """``call_killed``: once ``once()`` holds and ``after`` passed, the worker's process is SIGKILLed; the
    call's crash comes back as (None, killed, printed) and the worker's crash count is unchanged."""
    remote, worker = _sleeping_worker()

    # a call in flight ends when its worker dies, as _exchange reports it
    def call(target, args, kwargs):
        worker.proc.wait()
        remote.crashes += 1
        raise WorkerCrashed("the worker running your code ended")

    monkeypatch.setattr(remote, "call", call)
    value, killed, _ = remote.call_killed("adapters:run", (), {}, once=lambda: True, after=0.05)
    assert (value, killed, remote.crashes, worker.proc.returncode) == (
        None,
        True,
        0,
        -signal.SIGKILL,
    )


def test_a_call_that_answers_before_its_kill_is_due_keeps_its_worker(monkeypatch):
    """The call returned first: its value stands, nothing is killed."""
    remote, worker = _sleeping_worker()
    monkeypatch.setattr(remote, "call", lambda target, args, kwargs: 3)
    monkeypatch.setattr(remote, "printed", lambda: "printed")
    try:
        assert remote.call_killed("adapters:run", (), {}, once=lambda: False, after=0.0) == (
            3,
            False,
            "printed",
        )
        assert worker.proc.poll() is None
    finally:
        worker.kill()


def test_a_worker_that_ends_while_another_process_holds_its_reply_pipe_is_a_crash_at_once():
    """The worker ends without a reply, but its reply pipe does not close: another process holds
    its write end (a zygote stopped right after forking it, before it closed its copies). The
    judge sees the process end within a poll and reports the crash, not the test's timeout."""
    requests, replies = os.pipe(), os.pipe()
    remote, worker = _sleeping_worker(requests=requests[1], replies=replies[0])
    threading.Timer(0.2, worker.proc.kill).start()
    try:
        with pytest.raises(WorkerCrashed, match="during adapters:run: it was killed by SIGKILL"):
            remote.call("adapters:run", [], {})
        assert remote.worker is None and remote.crashes == 1
    finally:
        for fd in (requests[0], replies[1]):  # the holder's ends; the judge's were closed with it
            os.close(fd)


# -- drivers across a real Worker in a thread ------------------------------------------------------


def _worker_in_a_thread() -> tuple[Remote, threading.Thread, WorkerProcess]:
    """A Remote whose worker is a ``Worker`` serving in a thread of this process over two pipes (no
    subprocess, no sandbox): a whole request, both sides' code as in grading."""
    requests, replies = os.pipe(), os.pipe()
    worker = Worker(requests[0], replies[1])
    thread = threading.Thread(
        target=lambda: [None for _ in iter(worker.serve_one, False)], daemon=True
    )
    thread.start()
    remote, process = _sleeping_worker(requests=requests[1], replies=replies[0])
    return remote, thread, process


def _drive_in_a_thread(monkeypatch, target: str, fn, *args, call: str = "drive"):
    """``fn`` registered as the driver ``target`` and run by a real Worker in a thread through a Remote
    (``call="call"``: as a plain call, without ``run_driver``'s checks, as an adapter runs)."""
    monkeypatch.setitem(
        boundary.DRIVERS,
        target,
        (lambda *a, **k: boundary.run_driver(fn, a, k)) if call == "drive" else fn,
    )
    remote, thread, process = _worker_in_a_thread()
    try:
        return getattr(remote, call)(target, args, {})
    finally:
        os.close(process.requests)
        thread.join(timeout=10)
        process.proc.kill()


def test_a_driver_starts_from_the_seeded_rngs_and_leaves_the_callers_alone(monkeypatch):
    """In grading and in one process alike: the driver draws what a freshly seeded process draws, whatever
    its caller drew before, and the caller's next draw is what it would have been without the driver."""
    import torch

    def draws():
        return torch.rand(3)

    torch.manual_seed(123)
    torch.rand(5)  # the caller's own draws do not reach the driver
    expected_next = torch.get_rng_state()
    graded = _drive_in_a_thread(monkeypatch, "tests.scenarios.models:draws", draws)
    local = boundary.run_driver(draws, (), {})
    assert torch.equal(torch.get_rng_state(), expected_next), (
        "a driver changed its caller's RNG state"
    )
    torch.manual_seed(boundary.RNG_SEED)
    assert torch.equal(graded, local) and torch.equal(local, torch.rand(3))


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (lambda: object(), "object"),
        (lambda: {"model": __import__("torch").nn.Linear(2, 2)}, "Linear"),
        (lambda: __import__("torch").ones(2, requires_grad=True) * 2, "autograd history"),
        (lambda: OwnRecord(1), "not marked @plain_data"),
    ],
    ids=["object", "module-in-a-dict", "graph", "unregistered-dataclass"],
)
def test_an_answer_that_is_not_plain_data_fails_alike_in_both_modes(monkeypatch, answer, says):
    """check_plain refuses it in the driver's own process (the student's, or the worker): a TypeError that
    names what was returned, the same whether the driver ran locally or across the line."""
    with pytest.raises(TypeError, match=says):
        boundary.run_driver(answer, (), {})
    with pytest.raises(TypeError, match=says):
        _drive_in_a_thread(monkeypatch, "tests.scenarios.models:answer", answer)


@dataclasses.dataclass
class OwnRecord:
    x: int


def test_an_adapter_returning_an_object_is_not_an_exception_of_the_submission(monkeypatch):
    """An object in a plain call's result cannot cross: the judge raises NotPlainData (a WorkerError),
    never an exception a test could mistake for one the submission raised (CodecError is a ValueError)."""
    with pytest.raises(NotPlainData, match="not plain data") as caught:
        _drive_in_a_thread(
            monkeypatch,
            "tests.scenarios.models:cls",
            lambda: type("Tokenizer", (), {}),
            call="call",
        )
    assert not isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "text",
    ["\ud83d\ude00", "a\udfff\ud800b", "\ud800", "plain é 😀", "\udcff"],
    ids=["high-then-low", "low-then-high", "lone-high", "no-surrogate", "lone-low"],
)
def test_a_string_crosses_the_line_as_the_same_code_points(text):
    """JSON joins a lone high and a lone low surrogate into one character; a str holding any crosses as
    its code points, so a driver that returns decoded text gives the judge what a student's run shows."""
    assert crossed({text: [text, (text,)]}) == {text: [text, (text,)]}


def crossed(value: object) -> object:
    """``value`` encoded, sent through a pipe as a reply and decoded, as a driver's return crosses."""
    encoder = codec.Encoder()
    tree = encoder.encode(value)
    read, write = os.pipe()
    try:
        channel.send(write, {"ok": tree}, encoder.blobs)
        message, blobs = channel.receive(read, 1 << 24)
    finally:
        os.close(read)
        os.close(write)
    return codec.Decoder([], blobs).decode(message["ok"])


COLUMNS = {
    "vocab": {i: bytes([i % 256]) * (i % 4) for i in range(300)},
    "merges": [(bytes([i]), bytes([i, i])) for i in range(100)],
    "pair-counts": {(bytes([i]), b"x"): i for i in range(40)},
    "ids": list(range(1000)) + [1 << 70],
    "floats": [i / 7 for i in range(50)],
    "floats-not-finite": [float("inf"), float("-inf")] + [0.5] * 30,
    "strs": ["é😀", ""] * 20,
    "strs-with-surrogates": ["\ud800", "a\udfff"] * 20,
    "bools-and-none": [True, False, None] * 10,
    "mixed": [1, "a", b"b", 2.5, (1,), [2]] * 5,
    "tuples-of-two-lengths": [(1,), (1, 2)] * 10,
    "tuples-of-mixed-kinds": [(b"a", 1, "x", None)] * 20,
    "empty-tuples": [()] * 20,
    "nested": [[1, 2], {"k": b"v"}] * 10,
    "int-subclass": [True] * 20,
}


@pytest.mark.parametrize("value", list(COLUMNS.values()), ids=list(COLUMNS))
def test_long_lists_and_dicts_cross_as_the_same_values_types_and_order(value):
    """A long list of one kind and a long dict cross as columns (a tokenizer's vocab and merges: one blob
    of bytes, not a node each); what arrives is equal, item by item of the same type, in the same order."""
    (got,) = crossed([value])
    assert repr(got) == repr(value)
    items = (lambda v: [*v.keys(), *v.values()]) if isinstance(value, dict) else list
    assert [type(v) for v in items(got)] == [type(v) for v in items(value)]
