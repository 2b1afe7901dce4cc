"""Mutants of part 9 (``cs336_assignment/training.py``): resuming at the wrong step, periodic saves and
logs counted from the wrong step, and batches that are not a function of (seed, step)."""

from __future__ import annotations

from cs336_staff.mutants import Control, Mutant

FILE = "cs336_assignment/training.py"
TESTS = ("tests/test_training.py",)

MUTANTS = [
    Mutant(
        name="training-resume-forgets-the-loaded-step",
        file=FILE,
        function="start_or_resume",
        old="    return load_checkpoint(path, model, optimizer)\n",
        new="    load_checkpoint(path, model, optimizer)\n    return 0\n",
        why="loads the checkpoint but restarts the loop at step 0, training past --steps on replayed batches",
        tests=TESTS,
    ),
    Mutant(
        name="training-resume-replays-the-first-batches",
        file=FILE,
        function="train_loop",
        old="        x, y = get_batch(step)\n",
        new="        x, y = get_batch(step - start_step)\n",
        why="indexes batches from the start of this process, so a resumed run sees batches 0, 1, ... again",
        tests=TESTS,
    ),
    Mutant(
        name="training-batches-seeded-with-seed-plus-step",
        file=FILE,
        function="regression_batch",
        old="x = torch.randn(batch_size, dim, generator=step_generator(seed, step))",
        new="x = torch.randn(batch_size, dim, generator=torch.Generator().manual_seed(seed + step))",
        why="seeds the batch of step t with seed + t: the run with --seed 4 draws the batches of --seed 3 "
        'one step later, so two "independent" runs share almost all their data',
        tests=TESTS,
    ),
    Mutant(
        name="training-batches-ignore-the-seed",
        file=FILE,
        function="regression_batch",
        old="x = torch.randn(batch_size, dim, generator=step_generator(seed, step))",
        new="x = torch.randn(batch_size, dim, generator=torch.Generator().manual_seed(step))",
        why="seeds the batch of step t with t alone: --seed changes the initialisation but every run trains "
        "on the same batches",
        tests=TESTS,
    ),
]

# Resumption of every periodic action (issue 21): counted from the resumed start, not from step 0.
MUTANTS += [
    Mutant(
        name="training-saves-counted-from-the-resumed-step",
        file=FILE,
        function="train_loop",
        old="(done % checkpoint_every == 0 or done == num_steps)",
        new="((done - start_step) % checkpoint_every == 0 or done == num_steps)",
        why="counts --checkpoint-every from the step the run resumed at: resumed at 30 with every 7, it saves "
        "at 37, 44, ... where the uninterrupted run saves at 35, 42, ...",
        tests=TESTS,
    ),
    Mutant(
        name="training-saves-on-the-0-based-step",
        file=FILE,
        function="train_loop",
        old="(done % checkpoint_every == 0 or done == num_steps)",
        new="(step % checkpoint_every == 0 or done == num_steps)",
        why="tests the 0-based step, not the number of steps done: saves after steps 1, 8, 15, ... instead of "
        "7, 14, 21, ...; the final checkpoint is the same, the periodic ones are not",
        tests=TESTS,
    ),
    Mutant(
        name="training-resumed-run-reports-steps-from-its-own-start",
        file=FILE,
        function="train_loop",
        old="            on_step(done, losses[-1])\n",
        new="            on_step(len(losses), losses[-1])\n",
        why="passes on_step the number of steps this process took, so a resumed run logs 'step 4' for step 14 "
        "and the periodic loss lines fall at other steps than in the uninterrupted run",
        tests=TESTS,
    ),
]

# What a run computes, against an independent computation of it (issue 31): the options reach AdamW, the
# batches are the documented ones.
MUTANTS += [
    Mutant(
        name="training-ignores-weight-decay",
        file=FILE,
        function="train_regression",
        old="optimizer = AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)",
        new="optimizer = AdamW(model.parameters(), lr=config.lr)",
        why="builds AdamW without passing --weight-decay on, so every run decays its weights by AdamW's "
        "default 0.01 whatever the command line says",
        tests=TESTS,
    ),
    Mutant(
        name="training-ignores-lr",
        file=FILE,
        function="train_regression",
        old="optimizer = AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)",
        new="optimizer = AdamW(model.parameters(), weight_decay=config.weight_decay)",
        why="builds AdamW without passing --lr on, so every run trains at AdamW's default lr 1e-3",
        tests=TESTS,
    ),
    Mutant(
        name="training-true-weights-start-at-1",
        file=FILE,
        function="regression_batch",
        old="true_w = torch.arange(dim, dtype=torch.float32)",
        new="true_w = torch.arange(1, dim + 1, dtype=torch.float32)",
        why="builds the regression's true weights as [1, ..., D] instead of the documented [0, 1, ..., D - 1]: "
        "the loss still falls, the runs still resume exactly, but the task is another one",
        tests=TESTS,
    ),
]

# The values the loop hands back have their documented types (issue 31): Python floats, not loss tensors.
MUTANTS += [
    Mutant(
        name="training-loop-returns-loss-tensors",
        file=FILE,
        function="train_loop",
        old="        losses.append(loss.item())\n",
        new="        losses.append(loss.detach())\n",
        why="keeps each step's loss as a 0-d tensor where floats are documented: `cs336 train` prints it "
        "alike, but every caller that adds, serialises or compares the losses gets tensors",
        tests=TESTS,
    ),
    Mutant(
        name="training-loop-returns-losses-with-their-graphs",
        file=FILE,
        function="train_loop",
        old="        losses.append(loss.item())\n",
        new="        losses.append(loss)\n",
        why="keeps each step's loss tensor with its autograd graph: the list holds every step's graph alive "
        "and hands back tensors where floats are documented",
        tests=TESTS,
    ),
    Mutant(
        name="training-on-step-gets-the-loss-tensor",
        file=FILE,
        function="train_loop",
        old="            on_step(done, losses[-1])\n",
        new="            on_step(done, loss)\n",
        why="passes on_step the step's loss tensor (graph and all) instead of the float it returns",
        tests=TESTS,
    ),
]

# Controls (issue 31): the documented floats, taken another way; a right loop must pass every test.
CONTROLS = [
    Control(
        name="training-control-losses-as-floats-after-the-loop",
        file=FILE,
        function="train_loop",
        old="""for step in range(start_step, num_steps):
    x, y = get_batch(step)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    done = step + 1
    losses.append(loss.item())
    if checkpoint is not None and (done % checkpoint_every == 0 or done == num_steps):
        save_checkpoint(model, optimizer, done, checkpoint)
    if on_step is not None:
        on_step(done, losses[-1])
return losses
""",
        new="""for step in range(start_step, num_steps):
    x, y = get_batch(step)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    done = step + 1
    losses.append(loss.detach())
    if checkpoint is not None and (done % checkpoint_every == 0 or done == num_steps):
        save_checkpoint(model, optimizer, done, checkpoint)
    if on_step is not None:
        on_step(done, float(losses[-1]))
return [float(loss) for loss in losses]
""",
        why="keeps the detached loss tensors while training and converts them with float() at the end "
        "(and for on_step), instead of loss.item() at each step",
    ),
    Control(
        name="training-control-loss-float-from-tolist",
        file=FILE,
        function="train_loop",
        old="losses.append(loss.item())",
        new="losses.append(loss.detach().cpu().tolist())",
        why="takes each loss as a Python float with tensor.tolist() (a 0-d tensor's tolist is a float), "
        "not loss.item()",
    ),
]

# Controls of the options' effect and the regression task (issue 31).
CONTROLS += [
    Control(
        name="training-control-options-as-a-param-group",
        file=FILE,
        function="train_regression",
        old="optimizer = AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)",
        new="""optimizer = AdamW(
    [{"params": list(model.parameters()), "lr": config.lr, "weight_decay": config.weight_decay}]
)""",
        why="passes --lr and --weight-decay as a parameter group's options instead of AdamW's keywords",
    ),
    Control(
        name="training-control-true-weights-from-a-list",
        file=FILE,
        function="regression_batch",
        old="true_w = torch.arange(dim, dtype=torch.float32)",
        new="true_w = torch.tensor([float(i) for i in range(dim)])",
        why="builds the true weights [0, 1, ..., D - 1] from a Python list instead of torch.arange",
    ),
]
