"""Resource accounting, hidden cases: other seeds and shapes, other dtypes, bmm and einsum, edge cases."""

from __future__ import annotations

import random
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import adapters
from tests.scenarios import accounting
from tests.scenarios.accounting import Net
from tests.test_accounting import (
    OPTIMIZER_STATES,
    assert_mean_seconds_of_one_call,
    torch_flops,
    torch_flops_by_module,
)


def random_dims(seed: int, length: int, high: int = 32) -> list[int]:
    rng = random.Random(1000 + seed)
    return [rng.randint(1, high) for _ in range(length)]


# --------------------------------------------------------------------------------------------
# FLOPs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
@pytest.mark.parametrize("seed", range(2))
def test_count_flops_matches_flop_counter_mode_on_bmm_family(seed: int, backward: bool) -> None:
    """einsum (bmm), baddbmm and addmm are counted like FlopCounterMode counts them, backward included."""
    b, h, q, k, d = random_dims(seed, 5, high=9)
    g = torch.Generator().manual_seed(seed)
    cases: dict[str, tuple[Net, *tuple[torch.Tensor, ...]]] = {
        "einsum attention": (
            Net("torch.einsum", before=("bhqd,bhkd->bhqk",)),
            torch.randn(b, h, q, d, generator=g, requires_grad=True),
            torch.randn(b, h, k, d, generator=g, requires_grad=True),
        ),
        "baddbmm": (
            Net("torch.baddbmm"),
            torch.randn(b, q, k, generator=g),
            torch.randn(b, q, d, generator=g, requires_grad=True),
            torch.randn(b, d, k, generator=g, requires_grad=True),
        ),
        "addmm": (
            Net("torch.addmm"),
            torch.randn(q, k, generator=g),
            torch.randn(q, d, generator=g, requires_grad=True),
            torch.randn(d, k, generator=g, requires_grad=True),
        ),
    }
    for name, (net, *args) in cases.items():
        expected = torch_flops(accounting.build(net), *args, backward=backward)
        got = accounting.student_count_flops(net, *args, backward=backward)
        assert got == expected, (
            f"{name} with shapes {[tuple(a.shape) for a in args]}: {got} vs {expected}"
        )


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("seed", range(2))
def test_count_flops_of_deep_mlps_with_bias_in_other_dtypes(seed: int, dtype: torch.dtype) -> None:
    """Deep GELU MLPs with biases (addmm) in float64 and bfloat16 agree with FlopCounterMode."""
    dims = random_dims(seed, 6)
    net = Net("mlp", tuple(dims), activation="gelu", bias=True, dtype=dtype, seed=seed)
    x = torch.randn(3, 5, dims[0], generator=torch.Generator().manual_seed(seed)).to(dtype)
    for backward in (False, True):
        expected = torch_flops(accounting.build(net), x, backward=backward)
        assert accounting.student_count_flops(net, x, backward=backward) == expected


def test_count_flops_of_a_matrix_vector_product() -> None:
    """A vector-matrix product (what a 1-d input to a linear layer lowers to) is counted like FlopCounterMode."""
    layer = Net("linear", (9, 4))
    x = torch.randn(9)
    assert accounting.student_count_flops(layer, x) == torch_flops(accounting.build(layer), x)


def test_count_flops_without_a_gradient_needs_backward_false() -> None:
    """Asking for a backward through an output that needs no gradient is a ValueError."""
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    assert (
        accounting.student_count_flops(Net("torch.matmul"), a, b, backward=False) == 2 * 3 * 4 * 2
    )
    with pytest.raises(ValueError, match="backward=False"):
        accounting.student_count_flops(Net("torch.matmul"), a, b, backward=True)


def test_flop_counter_breakdown_of_nested_modules() -> None:
    """Per-module FLOPs of nested Sequentials, forward then backward, equal FlopCounterMode's."""
    net = Net(
        "sequential",
        seed=3,
        parts=(
            Net("mlp", (8, 12, 6)),
            Net("relu"),
            Net("sequential", parts=(Net("linear", (6, 6), bias=True), Net("mlp", (6, 4, 1)))),
        ),
    )
    x = torch.randn(7, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)
    with FlopCounterMode(display=False) as mode:
        accounting.build(net)(x).sum().backward()
    expected = {name: sum(ops.values()) for name, ops in mode.get_flop_counts().items()}
    # two counters in turn, the second around a forward only: a second use starts from zero
    counter, second = accounting.student_flop_counter(net, x, backward=[True, False])
    assert counter["by_module"] == expected
    assert second["total"] == torch_flops(accounting.build(net), x, backward=False)


def test_flop_counter_reentered_around_nested_modules_counts_each_block_alone() -> None:
    """Nested Sequentials, one counter entered four times (forward, forward+backward, ...), trained outside in between."""
    net = Net(
        "sequential",
        seed=4,
        parts=(
            Net("mlp", (5, 9, 7)),
            Net("gelu"),
            Net("sequential", parts=(Net("linear", (7, 3), bias=True),)),
        ),
    )
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(4), requires_grad=True)
    passes = [False, True, False, True]
    runs = accounting.student_flop_counter(net, x, backward=passes, same_counter=True)
    for i, (run, with_backward) in enumerate(zip(runs, passes, strict=True), 1):
        assert run["by_module"] == torch_flops_by_module(net, x, with_backward), f"entry {i}"
        assert run["total"] == run["by_module"]["Global"], f"entry {i}: total is not the Global row"


@pytest.mark.parametrize("seed", range(4))
def test_cruncher_training_flops_match_the_linear_chain_count(seed: int) -> None:
    """A Cruncher's measured training FLOPs equal the linear-chain count [D]*(L+1)+[1] without input grad."""
    batch, dim = random_dims(seed, 2, high=16)
    layers = seed
    net = Net("Cruncher", (dim, layers), seed=seed)
    measured = accounting.student_count_flops(net, torch.randn(batch, dim))
    analytic = adapters.run_linear_chain_flops(batch, [dim] * (layers + 1) + [1])
    assert measured == analytic, f"batch={batch} dim={dim} layers={layers}"
    # 3 forwards of 2*b*d_in*d_out per layer, less the first layer's input gradient
    dims = [dim] * (layers + 1) + [1]
    assert (
        analytic
        == 6 * batch * sum(a * b for a, b in zip(dims, dims[1:], strict=False))
        - 2 * batch * dims[0] * dims[1]
    )


def test_matmul_flops_of_empty_matrices_is_zero() -> None:
    """A matmul with a zero-sized dimension costs nothing; sizes must be integers."""
    assert adapters.run_matmul_flops(0, 5, 7) == 0
    assert adapters.run_matmul_flops(1, 1, 1) == 2
    with pytest.raises(ValueError, match="integer"):
        adapters.run_matmul_flops(2.5, 3, 4)  # type: ignore[arg-type]  # a float, to be refused


def test_linear_chain_flops_rejects_a_single_dimension() -> None:
    """A chain needs at least an input and an output size."""
    with pytest.raises(ValueError, match="dims"):
        adapters.run_linear_chain_flops(4, [8])


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_cruncher_activation_bytes_scale_with_the_dtype(dtype: torch.dtype) -> None:
    """A Cruncher held in bf16/fp16/fp64 saves batch x dim x layers activations of that element size."""
    batch, dim, layers = 5, 12, 4
    net = Net("Cruncher", (dim, layers), dtype=dtype)
    got = accounting.student_activation_bytes(net, torch.randn(batch, dim, dtype=dtype))
    expected = adapters.run_cruncher_activations(
        batch, dim, layers
    ) * adapters.run_bytes_per_element(dtype)
    assert got == expected, f"{dtype}: measured {got}, expected {expected}"


def test_cruncher_activations_of_a_head_only_model() -> None:
    """A Cruncher with no hidden layers saves nothing but its input."""
    assert adapters.run_cruncher_activations(8, 16, 0) == 0
    assert accounting.student_activation_bytes(Net("Cruncher", (16, 0)), torch.randn(8, 16)) == 0
    # and one hidden layer saves its output, batch x dim values (a count of 0 everywhere is not the answer)
    assert adapters.run_cruncher_activations(8, 16, 1) == 8 * 16
    assert (
        accounting.student_activation_bytes(Net("Cruncher", (16, 1)), torch.randn(8, 16))
        == 4 * 8 * 16
    )


def test_gelu_saves_its_input_as_well() -> None:
    """GELU saves its input (the pre-activation) while the next layer saves its output: two storages."""
    dims, batch = [5, 9, 3], 6
    got = accounting.student_activation_bytes(
        Net("mlp", tuple(dims), activation="gelu"), torch.randn(batch, dims[0])
    )
    assert got == 4 * batch * 9 * 2


def test_activation_bytes_of_a_parameterless_function() -> None:
    """Saved tensors of a plain function count; its inputs do not, even when they require grad."""
    x = torch.randn(4, 6, requires_grad=True)
    # t -> exp(t * 2)
    exp_of_2t = Net("chain", parts=(Net("torch.mul", after=(2,)), Net("torch.exp")))
    assert accounting.student_activation_bytes(exp_of_2t, x) == 4 * 4 * 6
    # exp saves its output
    assert accounting.student_activation_bytes(Net("torch.exp"), x) == 4 * 4 * 6
    # sin saves its input, which is not an activation
    assert accounting.student_activation_bytes(Net("torch.sin"), x) == 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_activation_bytes_of_views_in_other_dtypes(dtype: torch.dtype) -> None:
    """Views of one bf16/fp64 activation at three offsets (relu's output, two slices) cost its storage once."""
    batch, width = 5, 12
    net = Net(
        "chain",
        parts=(
            Net("linear", (8, width), dtype=dtype),
            Net("relu"),
            Net("torch.narrow", after=(1, 3, 6)),
            Net("torch.narrow", after=(1, 2, 4)),
            Net("torch.sin"),
        ),
    )
    got = accounting.student_activation_bytes(net, torch.randn(batch, 8, dtype=dtype))
    assert got == batch * width * dtype.itemsize, f"{dtype}: measured {got}"


@pytest.mark.parametrize("name", list(OPTIMIZER_STATES))
def test_optimizer_state_bytes_with_scalar_parameters_in_float64(name: str) -> None:
    """Two 0-d parameters among float64 ones, two steps: every state counts at 8 bytes, no step counter does."""
    net = Net(
        "sequential", dtype=torch.float64, parts=(Net("mlp", (5, 4, 2)), Net("scale"), Net("scale"))
    )
    kwargs = {"lr": 1e-2, **({"momentum": 0.5} if name == "momentum" else {})}
    g = torch.Generator().manual_seed(2)
    inputs = [torch.randn(3, 5, generator=g, dtype=torch.float64) for _ in range(2)]
    measured = accounting.student_optimizer_state_bytes(net, name, kwargs, inputs)
    assert measured == 8 * OPTIMIZER_STATES[name] * accounting.num_params(net)


@pytest.mark.parametrize("name", list(OPTIMIZER_STATES))
def test_optimizer_state_bytes_on_a_cruncher(name: str) -> None:
    """torch's optimizers' state on (torch's twin of) a Cruncher is states-per-parameter x 4 x params after two steps."""
    net = Net("Cruncher", (6, 2), seed=1)
    kwargs = {"lr": 1e-2, **({"momentum": 0.5} if name == "momentum" else {})}
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(3, 6, generator=g) for _ in range(2)]
    measured = accounting.student_optimizer_state_bytes(net, name, kwargs, inputs)
    assert measured == 4 * OPTIMIZER_STATES[name] * accounting.num_params(net)


def test_optimizer_state_bytes_in_bfloat16() -> None:
    """State kept in bf16 (torch Adam on bf16 parameters) is counted at 2 bytes per value."""
    net = Net("mlp", (4, 6, 2), dtype=torch.bfloat16)
    x = torch.randn(3, 4, dtype=torch.bfloat16)
    assert accounting.student_optimizer_state_bytes(net, "adam", {}, [x]) == 2 * 2 * (4 * 6 + 6 * 2)


def test_training_memory_of_nothing_is_zero() -> None:
    """No parameters and no activations need no memory, in any precision."""
    for precision in ("fp32", "mixed"):
        assert adapters.run_training_memory_bytes(0, 0, "adamw", precision) == 0
        # while one fp32 parameter under AdamW is 16 bytes: weight, gradient, two moments (0 is not always the answer)
        assert adapters.run_training_memory_bytes(1, 0, "adamw", "fp32") == 16


@pytest.mark.parametrize("name", ["tf32", "e4m3", "", None])
def test_bytes_per_element_rejects_more_unknown_dtypes(name) -> None:
    """Names that are not storage dtypes (tf32 is a compute mode) are ValueErrors."""
    with pytest.raises(ValueError):
        adapters.run_bytes_per_element(name)


def test_tensor_memory_bytes_of_scalars_and_empty_tensors() -> None:
    """A 0-d tensor costs one element; an empty tensor costs nothing; bool is one byte."""
    assert adapters.run_tensor_memory_bytes(torch.tensor(3.0, dtype=torch.float64)) == 8
    assert adapters.run_tensor_memory_bytes(torch.empty(0, 5)) == 0
    assert adapters.run_tensor_memory_bytes(torch.zeros(3, 3, dtype=torch.bool)) == 9
    assert adapters.run_tensor_memory_bytes(torch.zeros(10).expand(4, 10)) == 4 * 10 * 4


# --------------------------------------------------------------------------------------------
# Napkin math
# --------------------------------------------------------------------------------------------


def test_training_days_scale_inversely_with_gpus_and_mfu() -> None:
    """Twice the GPUs or twice the MFU halves the days; twice the tokens doubles them."""
    base = adapters.run_training_days(7e9, 1e12, 64, 312e12, 0.4)
    assert adapters.run_training_days(7e9, 1e12, 128, 312e12, 0.4) == pytest.approx(base / 2)
    assert adapters.run_training_days(7e9, 1e12, 64, 312e12, 0.8) == pytest.approx(base / 2)
    assert adapters.run_training_days(7e9, 2e12, 64, 312e12, 0.4) == pytest.approx(base * 2)
    assert adapters.run_training_days(7e9, 1e12, 64, 312e12, 1.0) == pytest.approx(
        6 * 7e9 * 1e12 / (64 * 312e12 * 86400)
    )


@pytest.mark.parametrize(
    ("gpu", "dtype", "expected"),
    [
        ("H100-SXM", "fp8", 1979e12),
        ("H100-PCIe", "bf16", 756.5e12),
        ("A100-SXM", "bf16", 312e12),
        ("A100-PCIe", "fp32", 19.5e12),
        ("H100-SXM", torch.bfloat16, 989.5e12),
        ("A100-SXM", "tf32", 156e12),
    ],
)
def test_peak_flops_are_dense_datasheet_figures(gpu: str, dtype, expected: float) -> None:
    """Peak FLOP/s are the datasheets' dense figures (half the 'with sparsity' ones)."""
    assert adapters.run_peak_flops(gpu, dtype) == expected


def test_max_trainable_params_with_fp32_sgd() -> None:
    """One 80 GB GPU training with plain SGD in fp32 (8 bytes per parameter) holds 10B parameters."""
    assert adapters.run_max_trainable_params(1, 80e9, 8) == pytest.approx(10e9)


@pytest.mark.parametrize(
    "call",
    [
        lambda: adapters.run_mfu(-1.0, 1.0, 1e12),
        lambda: adapters.run_mfu(1.0, 1.0, 0.0),
        lambda: adapters.run_max_trainable_params(0, 80e9, 16),
        lambda: adapters.run_training_days(0, 1e12, 8, 1e15, 0.5),
        lambda: adapters.run_training_days(7e9, 1e12, 8, 1e15, -0.5),
        lambda: adapters.run_peak_flops("h100-sxm", "bf16"),
        lambda: adapters.run_peak_flops("H100-SXM", "fp4"),
    ],
    ids=[
        "negative-flops",
        "zero-peak",
        "zero-gpus",
        "zero-params",
        "negative-mfu",
        "lowercase-gpu",
        "fp4",
    ],
)
def test_more_napkin_math_bad_input(call) -> None:
    """More out-of-range inputs are ValueErrors."""
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize(("warmup", "iters"), [(-1, 3), (2, 0)])
def test_time_matmul_rejects_bad_counts(warmup: int, iters: int) -> None:
    """A negative warm-up or fewer than one timed call is a ValueError."""
    with pytest.raises(ValueError):
        adapters.run_time_matmul(torch.randn(4, 4), torch.randn(4, 4), warmup=warmup, iters=iters)


def test_time_matmul_without_warmup_times_every_call() -> None:
    """With warmup=0, exactly `iters` matmuls run (FlopCounterMode counts them around your call)."""
    start = time.perf_counter()
    seconds, flops = accounting.student_time_matmul_flops(
        torch.randn(5, 3), torch.randn(3, 2), warmup=0, iters=4
    )
    wall = time.perf_counter() - start
    assert flops == 4 * 2 * 5 * 3 * 2, (
        f"time_matmul(warmup=0, iters=4) ran {flops / (2 * 5 * 3 * 2):g} matmuls"
    )
    assert_mean_seconds_of_one_call(seconds, 4, wall)


def test_count_flops_of_a_cruncher_on_a_batch_of_one_and_on_meta() -> None:
    """A Cruncher on a batch of one counts like FlopCounterMode, on the CPU and on the meta device."""
    net, x = (
        Net("Cruncher", (12, 2)),
        torch.randn(1, 12, generator=torch.Generator().manual_seed(9)),
    )
    expected = torch_flops(accounting.build(net), x)
    assert accounting.student_count_flops(net, x) == expected
    assert accounting.student_count_flops(net, x, device="meta") == expected


def test_tensor_memory_bytes_of_fp8_and_meta_tensors() -> None:
    """fp8 is one byte an element; a meta tensor counts its elements; a one-element tensor one element."""
    assert (
        adapters.run_tensor_memory_bytes(torch.empty(5, 7, dtype=torch.float8_e5m2, device="meta"))
        == 35
    )
    assert adapters.run_tensor_memory_bytes(torch.ones(1, dtype=torch.int32)) == 4
