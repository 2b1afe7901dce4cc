"""Memory measured: make PyTorch report the bytes that ``memory.py`` counts on paper.

Activations: ``torch.autograd.graph.saved_tensors_hooks`` calls a hook with every tensor autograd
saves for the backward. Several saved tensors may share one storage (a ReLU saves its output and
the next matmul saves the same tensor as its input), so saved bytes are de-duplicated by storage;
parameters and the inputs of ``fn`` are not activations and are excluded.

The other kinds are read from the tensors themselves: parameters and gradients from the model,
optimizer state from ``optimizer.state`` (``optimizer_state_bytes``). ``measure_training_step``
measures all four kinds during one training step, and ``measure_allocation`` asks the CUDA
allocator what a new tensor took.

Deliberately left out: the formulas (``memory.py``), and the CUDA caching allocator's rounding
and fragmentation (``measure_allocation`` reports what the allocator says, rounding included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from cs336_assignment.accounting.memory import tensor_memory_bytes


def _storage_key(t: Tensor) -> tuple[str, int]:
    """Identify the storage behind ``t`` (shared by all its views)."""
    return str(t.device), t.untyped_storage().data_ptr()


class SavedTensorBytes(torch.autograd.graph.saved_tensors_hooks):
    """Record the storages autograd saves for the backward while active; ``nbytes`` is their total.

    A saved tensor is skipped if its storage belongs to a leaf that requires grad (a parameter,
    or an input that asked for a gradient: it lives anyway) or to a tensor in ``exclude``.
    A saved view keeps its whole storage alive, so it costs the storage's bytes, once: views of
    one storage are the same entry whatever their offsets (``t.data_ptr()`` is where a view's
    first element is, and differs between ``h[:, :4]`` and ``h[:, 4:]``; the storage's
    ``data_ptr()`` does not). Bytes are the storage's own, whatever its dtype.

    >>> layer = torch.nn.Linear(4, 3, bias=False)
    >>> x = torch.ones(2, 4)
    >>> with SavedTensorBytes(exclude=[x]) as saved:
    ...     h = torch.relu(layer(x))
    ...     y = layer(torch.ones(2, 4) + 1)
    >>> saved.nbytes        # relu's output (2*3 floats); the input of the 2nd call (2*4 floats)
    56
    """

    def __init__(self, exclude: Iterable[Tensor] = ()) -> None:
        self._excluded = {_storage_key(t) for t in exclude if isinstance(t, Tensor)}
        self.storages: dict[tuple[str, int], int] = {}
        """storage key -> bytes of that storage, one entry per distinct saved storage."""
        super().__init__(self._pack, self._unpack)

    def _pack(self, t: Tensor) -> Tensor:
        """Called by autograd with each tensor it saves; the tensor itself is what gets stored."""
        # BEGIN SOLUTION
        base = t if t._base is None else t._base
        key = _storage_key(t)
        if not (base.is_leaf and base.requires_grad) and key not in self._excluded:
            self.storages[key] = t.untyped_storage().nbytes()
        return t
        # END SOLUTION

    @staticmethod
    def _unpack(t: Tensor) -> Tensor:
        return t

    # torch annotates saved_tensors_hooks.__enter__ as -> None; this one returns the hooks, as used.
    def __enter__(self) -> SavedTensorBytes:  # type: ignore[override]
        super().__enter__()
        return self

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())


def activation_bytes(fn: Callable[..., Any], *args: Any) -> int:
    """Bytes autograd saves for the backward while running ``fn(*args)``, de-duplicated by storage.

    A saved view keeps, and costs, its whole storage: views of one storage (``h`` and ``h[:, 4:]``)
    count its bytes once, whatever their offsets. Parameters and the tensors in ``args`` are excluded. For the Cruncher this is
    ``bytes_per_element(dtype) * cruncher_activations(batch, dim, num_layers)``: 4 bytes each in
    fp32, 2 with the model and batch in bf16. Under ``torch.autocast`` the bf16 copies autocast makes
    of the weights and of the batch are saved too, and counted: they are real memory (one reason
    mixed-precision training keeps a bf16 copy of the parameters instead of casting every step).

    >>> activation_bytes(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)), torch.ones(3, 4))
    96
    """
    # BEGIN SOLUTION
    with SavedTensorBytes(exclude=args) as saved:
        out = fn(*args)
    del out
    return saved.nbytes
    # END SOLUTION


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the per-parameter state in ``optimizer.state``, read from the tensors themselves.

    Only state tensors shaped like their parameter count (``exp_avg``, ``momentum_buffer``, ...),
    at their own dtype's size (bf16 state is 2 bytes a value). Bookkeeping under the key ``step``
    is O(1) per parameter *tensor*, not per parameter, and is left out, as are non-tensor
    entries. Mind 0-d parameters (a learnable scale): their state is 0-d like them and counts,
    while torch keeps ``step`` as a 0-d tensor too, so only the key tells them apart. The state is
    created lazily, by the first ``step()``.
    """
    # BEGIN SOLUTION
    total = 0
    for param, state in optimizer.state.items():
        for key, value in state.items():
            if key != "step" and isinstance(value, Tensor) and value.shape == param.shape:
                total += tensor_memory_bytes(value)
    return total
    # END SOLUTION


@dataclass(frozen=True)
class TrainingMemory:
    """What one measured training step held, in bytes, by kind (``peak`` only on CUDA)."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    peak: int | None = None
    """``torch.cuda.max_memory_allocated`` during the step (everything allocated, absolute)."""

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations


def measure_training_step(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: Tensor
) -> TrainingMemory:
    """Run two training steps on ``loss = model(x).sum()`` and measure the second, kind by kind.

    The first step creates the gradients and the optimizer state (both lazily allocated). The
    second keeps the gradients allocated (``zero_grad(set_to_none=False)``), so during its forward
    parameters, gradients, state and activations are all alive at once, which is what
    ``training_memory_bytes`` adds up. On CUDA, ``peak`` is the peak allocated memory during that
    second step (it also includes ``x``, whatever else the process holds, and temporaries).
    """
    cuda = x.device.type == "cuda"
    for step in range(2):
        optimizer.zero_grad(set_to_none=False)
        if step == 1 and cuda:
            torch.cuda.synchronize(x.device)
            torch.cuda.reset_peak_memory_stats(x.device)
        saved = SavedTensorBytes(exclude=[x])
        with saved:
            loss = model(x).sum()
        loss.backward()
        del loss
        optimizer.step()
    peak = None
    if cuda:
        torch.cuda.synchronize(x.device)
        peak = torch.cuda.max_memory_allocated(x.device)
    params = list(model.parameters())
    return TrainingMemory(
        parameters=sum(tensor_memory_bytes(p) for p in params),
        gradients=sum(tensor_memory_bytes(p.grad) for p in params if p.grad is not None),
        optimizer_state=optimizer_state_bytes(optimizer),
        activations=saved.nbytes,
        peak=peak,
    )


def measure_allocation(
    make: Callable[[], Tensor], device: torch.device | str
) -> tuple[Tensor, int]:
    """Call ``make()`` and measure the bytes its result took: ``(tensor, bytes)``.

    On CUDA, the change in ``torch.cuda.memory_allocated`` (the caching allocator rounds each block
    up to a multiple of 512 bytes, so sizes that are multiples of 512 come out exact); on CPU, where
    the allocator keeps no statistics, the size of the new tensor's storage.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        x = make()
        torch.cuda.synchronize(device)
        return x, torch.cuda.memory_allocated(device) - before
    x = make()
    return x, x.untyped_storage().nbytes()
