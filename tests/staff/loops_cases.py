"""Multi-step tests written as plain bodies, run by ``test_grade_loops.py`` in one process and split.

Each drives the reference through ``adapters`` the way a converted test does; split, every line
that touches a student object crosses to the worker (see ``cs336_staff/grade/WRITING_TESTS.md``).
Not collected on its own (no ``test_`` prefix in its file name).
"""

from __future__ import annotations

import re
import signal

import pytest
import torch

import adapters
from tests.boundary import killed_midway, printed_by, stays_in_the_test


def test_parameters_are_the_tests_own_tensors_across_steps():
    """p.grad set here reaches step(); step()'s update of p shows here; zero_grad keeps p.grad's identity."""
    p = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = adapters.get_sgd_cls()([p], lr=0.5, momentum=0.9)
    p.grad = torch.ones(3)
    opt.step()
    assert p.detach().tolist() == [0.5, -2.5, 2.5]
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad and not grad.any()
    p.grad.add_(torch.ones(3))
    opt.step()
    assert torch.allclose(p.detach(), torch.tensor([0.5 - 0.95, -2.5 - 0.95, 2.5 - 0.95]))
    assert opt.param_groups[0]["params"][0] is p and set(opt.state[p]) == {"momentum_buffer"}
    opt.param_groups[0]["lr"] = 0.0  # a write into the group reaches the optimizer
    before = p.detach().clone()
    opt.step()
    assert torch.equal(p.detach(), before)


def test_a_closure_runs_here_with_grad_enabled_and_its_failure_is_the_tests():
    """step(closure): the closure runs in the test's process under the grad mode step() set; what it raises is raised here."""
    target = torch.tensor([1.0, -2.0])
    p = torch.zeros(2, requires_grad=True)
    opt = adapters.get_adam_cls()([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p - target).pow(2).sum()
        loss.backward()
        return loss

    with torch.no_grad():
        losses = [float(opt.step(closure).detach()) for _ in range(3)]
    assert losses[0] == pytest.approx(5.0) and losses[2] < losses[0]

    def failing():
        raise KeyError("the closure's own failure")

    with pytest.raises(KeyError, match="own failure"):
        opt.step(failing)


def test_backward_through_a_modules_output_reaches_the_input_and_the_weights():
    """A backward pass from a module's output runs through the module: x.grad and weight.grad are set here."""
    torch.manual_seed(0)
    layer = adapters.get_linear_cls()(4, 3)
    w = layer.weight
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1)).requires_grad_()
    upstream = torch.randn(2, 3, generator=torch.Generator().manual_seed(2))
    (layer(x) * upstream).sum().backward()
    torch.testing.assert_close(x.grad, upstream @ w.detach())
    torch.testing.assert_close(w.grad, upstream.T @ x.detach())
    assert dict(layer.named_parameters())["weight"] is w


def test_the_global_rngs_a_test_seeds_are_the_ones_the_code_draws_from():
    """torch.manual_seed here seeds an initialisation there; set_seed there decides the draws here."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        a = adapters.get_linear_cls()(3, 2).weight.detach()
        torch.manual_seed(7)
        b = adapters.get_linear_cls()(3, 2).weight.detach()
    assert torch.equal(a, b)
    with torch.random.fork_rng(devices=[]):
        adapters.run_set_seed(11)
        first = torch.rand(3)
        adapters.run_set_seed(11)
        assert torch.equal(torch.rand(3), first)


def test_a_one_pass_iterator_of_the_tests_feeds_a_stream_drawn_in_batches():
    """A generator of the test's crosses as a one-pass iterator; the stream's ids all come back, in order."""
    tok = adapters.get_tokenizer({i: bytes([i]) for i in range(256)}, [], None)
    pieces = ["hello ", "wörld", "", "!" * 700]
    stream = tok.encode_iterable(piece for piece in pieces)
    assert list(stream) == tok.encode("".join(pieces))


def test_a_context_manager_of_the_workers_counts_what_runs_inside_it():
    """``with`` on a worker object enters and exits it there; calls made inside run inside it."""
    layer = adapters.get_linear_cls()(8, 4)
    counter = adapters.get_flop_counter_cls()()
    with counter:
        layer(torch.ones(5, 8))
    assert counter.total == 2 * 5 * 8 * 4


def test_a_backward_begun_here_fires_the_hooks_on_a_modules_output_there():
    """A sum taken here of a worker module's output: the backward reaches the output through its gradient
    hooks, so the counter's module tracker attributes the backward's matmul to the module, as in one process."""
    layer = adapters.get_linear_cls()(8, 4)
    counter = adapters.get_flop_counter_cls()()
    with counter:
        layer(torch.ones(5, 8)).sum().backward()  # forward 2*5*8*4; the weight's gradient as many
    assert counter.by_module() == {"Global": 2 * 2 * 5 * 8 * 4, "Linear": 2 * 2 * 5 * 8 * 4}, counter.by_module()


def test_a_torch_optimizer_of_the_tests_is_stepped_here_by_a_scaler_there():
    """The test's own SGD handed to a loss scaler crosses as a stand-in: the scaler divides p.grad there,
    the optimizer's step runs here (its hook fires), and a counter reads its state through the stand-in."""
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 8.0)
    opt = torch.optim.SGD([p], lr=0.5, momentum=0.9)
    steps = []
    opt.register_step_pre_hook(lambda *args: steps.append("here"))
    scaler = adapters.get_loss_scaler_cls()(init_scale=8.0)
    scaler.step(opt)
    scaler.update()
    assert steps == ["here"] and torch.equal(p.grad, torch.ones(3)), (steps, p.grad)
    assert torch.equal(p.detach(), torch.full((3,), 0.5)), p
    assert adapters.run_optimizer_state_bytes(opt) == 3 * 4  # one fp32 momentum buffer of 3


def test_a_torch_model_of_the_tests_is_saved_and_loaded_there_and_stays_here(tmp_path):
    """A model passed through ``stays_in_the_test`` crosses as a stand-in, as torch's optimizers do: the
    save there reads this model's state, the load there writes the saved tensors into this very model
    and optimizer (a copy of the model in the worker would leave these zeroed weights as they are)."""
    torch.manual_seed(0)
    model = stays_in_the_test(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    adapters.run_save_checkpoint(model, opt, 7, tmp_path / "ckpt.pt")
    weight = model[0].weight
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    assert adapters.run_load_checkpoint(tmp_path / "ckpt.pt", model, opt) == 7
    assert model[0].weight is weight
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items()), model.state_dict()
    assert int(opt.state_dict()["state"][0]["step"]) == 1


def test_what_a_command_prints_comes_back_whole_and_in_order():
    """``printed_by``: every line a command printed (stdout and stderr together), none lost to a cut or a race."""
    status, printed = printed_by(lambda: adapters.run_cs336(
        ["train", "--steps", "300", "--dim", "2", "--layers", "0", "--batch-size", "2", "--log-every", "1"]))
    steps = [int(m.group(1)) for m in re.finditer(r"step\s+(\d+)/300\s+loss", printed)]
    assert status == 0 and steps == list(range(1, 301)), printed[-2000:]
    assert printed.rstrip().endswith("final loss " + printed.rstrip().rpartition("final loss ")[2])


def test_a_run_killed_midway_leaves_its_last_checkpoint_and_the_next_call_runs(tmp_path):
    """``killed_midway``: the process is SIGKILLed once its checkpoint exists; the checkpoint is
    there for the test, and the next call runs (split: in a fresh worker)."""
    path = tmp_path / "ckpt.pt"
    argv = ["train", "--steps", "1000000", "--dim", "2", "--layers", "0", "--checkpoint", str(path),
            "--checkpoint-every", "1"]
    status, printed = killed_midway("run_cs336", [argv], once_written=path, after=0.05)
    assert status == -signal.SIGKILL and "done:" not in printed, (status, printed[-2000:])
    model = adapters.get_cruncher_cls()(2, 0)
    iteration = adapters.run_load_checkpoint(path, model, adapters.get_adamw_cls()(model.parameters()))
    assert 0 < iteration < 1_000_000
