"""The training loop on a CUDA GPU: `cs336 train --device cuda` puts the model and every batch there.

Every test here skips with a reason on a machine without CUDA; each has a CPU twin in
``test_training.py`` (named in its docstring) running the same command on the CPU, where a model
and batches on different devices cannot be told apart.
"""

from __future__ import annotations

import pytest

from tests.test_training import TINY, losses_printed, train

pytestmark = pytest.mark.gpu


def test_train_command_on_the_gpu_prints_a_falling_loss_and_saves_a_checkpoint_the_cpu_loads(
    tmp_path,
):
    """`cs336 train --device cuda`: 150 steps train (the loss falls over 100x) only if the model and both
    tensors of every batch are on the GPU (a batch left on the CPU is a device-mismatch error), and the
    checkpoint it saves loads on the CPU. CPU twin: ``test_train_command_prints_a_falling_loss``."""
    path = tmp_path / "gpu.pt"
    losses = losses_printed(
        train("--steps", "150", *TINY, "--device", "cuda", "--checkpoint", str(path))
    )
    assert 1 in losses and 150 in losses, (
        f"expected `step N/150  loss X` lines for steps 1 and 150, got {sorted(losses)}"
    )
    assert losses[150] < losses[1] / 100, (
        f"on the GPU the loss went from {losses[1]:.4g} (step 1) to {losses[150]:.4g} (step 150): it should fall by over 100x"
    )
    on_the_cpu = ["--device", "cpu", "--checkpoint", str(path), "--resume", "--log-every", "1"]
    resumed = losses_printed(train("--steps", "160", *TINY, *on_the_cpu))
    assert min(resumed) == 151, (
        f"resuming the GPU run's checkpoint on the CPU should continue at step 151, logged steps {sorted(resumed)}"
    )
