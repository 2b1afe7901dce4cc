"""Resource accounting: count FLOPs and bytes on paper, then check the count against PyTorch.

The lecture's discipline, as code: every analytic counter comes with a measured twin that makes
PyTorch itself report the same number, so the counts are exact rather than plausible.

    flops.py            matmul and linear-layer FLOPs, and the 6ND rule, on paper
    flop_counter.py     a TorchDispatchMode that counts the matmul FLOPs PyTorch runs, per module
    memory.py           bytes per dtype, tensor, parameter and activation, and per training run
    measured_memory.py  saved-tensor, optimizer-state and training-step bytes, measured
    napkin.py           training days, the largest trainable model, MFU, a peak-throughput table
                        and a matmul timer

>>> round(training_days(70e9, 15e12, 1024, peak_flops("H100-SXM", "bf16"), mfu=0.5))
144
>>> max_trainable_params(8, 80e9, bytes_per_param("adamw", "mixed")) / 1e9
40.0

Rules (tests/rules.toml; a test that reaches code breaking one earns no points):
    May use: arithmetic; torch tensors, TorchDispatchMode and torch.utils.module_tracker;
        torch.cuda's memory statistics and events.
    Not allowed: FlopCounterMode (torch.utils.flop_counter), the profilers (torch.profiler,
        torch.autograd.profiler) and FLOP-counting libraries may not be used: count the matmuls
        yourself in a TorchDispatchMode; and, as in every part: torch.optim's optimizers,
        torch.nn.Linear or F.linear, tokenizer libraries, torch.amp.GradScaler, reaching the tests
        or the interpreter's insides.
"""

from cs336_assignment.accounting.flop_counter import (
    MATMUL_FAMILY,
    FlopCounter,
    count_flops,
    matmul_family_flops,
)
from cs336_assignment.accounting.flops import (
    linear_backward_flops,
    linear_chain_flops,
    linear_forward_flops,
    linear_train_flops,
    matmul_flops,
    six_nd_flops,
)
from cs336_assignment.accounting.measured_memory import (
    SavedTensorBytes,
    TrainingMemory,
    activation_bytes,
    measure_allocation,
    measure_training_step,
    optimizer_state_bytes,
)
from cs336_assignment.accounting.memory import (
    DTYPES,
    OPTIMIZERS,
    PRECISIONS,
    bytes_per_activation,
    bytes_per_element,
    bytes_per_param,
    cruncher_activations,
    cruncher_params,
    linear_chain_activations,
    optimizer_state_tensors,
    tensor_memory_bytes,
    training_memory_bytes,
)
from cs336_assignment.accounting.napkin import (
    GPU_MEMORY_BYTES,
    PEAK_FLOPS,
    SECONDS_PER_DAY,
    gpu_kind,
    matmul_throughput,
    max_trainable_params,
    mfu,
    peak_flops,
    time_matmul,
    training_days,
)

__all__ = [
    "DTYPES",
    "GPU_MEMORY_BYTES",
    "MATMUL_FAMILY",
    "OPTIMIZERS",
    "PEAK_FLOPS",
    "PRECISIONS",
    "SECONDS_PER_DAY",
    "FlopCounter",
    "SavedTensorBytes",
    "TrainingMemory",
    "activation_bytes",
    "bytes_per_activation",
    "bytes_per_element",
    "bytes_per_param",
    "count_flops",
    "cruncher_activations",
    "cruncher_params",
    "gpu_kind",
    "linear_backward_flops",
    "linear_chain_activations",
    "linear_chain_flops",
    "linear_forward_flops",
    "linear_train_flops",
    "matmul_family_flops",
    "matmul_flops",
    "matmul_throughput",
    "max_trainable_params",
    "measure_allocation",
    "measure_training_step",
    "mfu",
    "optimizer_state_bytes",
    "optimizer_state_tensors",
    "peak_flops",
    "six_nd_flops",
    "tensor_memory_bytes",
    "time_matmul",
    "training_days",
    "training_memory_bytes",
]
