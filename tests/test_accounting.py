"""Resource accounting: every analytic count agrees with what PyTorch itself measures.

Oracles: ``torch.utils.flop_counter.FlopCounterMode`` for FLOPs, the storages autograd saves and
``optimizer.state`` for memory, torch's own dtypes for byte sizes, and the lecture's worked numbers
for the napkin math. The CPU twins of the GPU checks in ``test_accounting_gpu.py`` are marked
"(CPU twin)" in their docstrings. Your counters run on networks described by
``tests.scenarios.accounting.Net`` (see that module): the oracle measures torch's build of the same
description.
"""

from __future__ import annotations

import random
import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import adapters
from tests.scenarios import accounting
from tests.scenarios.accounting import Net, mlp

OPTIMIZERS = ["sgd", "momentum", "adagrad", "rmsprop", "adam", "adamw"]
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 2, "adamw": 2}


def torch_flops(fn, *args, backward: bool = True) -> int:
    """The oracle: FLOPs of fn(*args) (and the backward of its sum) as FlopCounterMode counts them."""
    with FlopCounterMode(display=False) as mode:
        out = fn(*args)
        if backward:
            out.sum().backward()
    return mode.get_total_flops()


def random_dims(seed: int, length: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, 24) for _ in range(length)]


def optimizer_kwargs(name: str) -> dict[str, float]:
    """The hyperparameters the tests give optimizer `name` (from torch.optim or from this package)."""
    return {"lr": 1e-3, **({"momentum": 0.9} if name == "momentum" else {})}


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------

DTYPE_NAMES = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int8": torch.int8,
}


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_bytes_per_element_matches_torch(name: str) -> None:
    """The byte size of each dtype, by name and by torch dtype, is the one torch allocates."""
    dtype = DTYPE_NAMES[name]
    expected = torch.empty(0, dtype=dtype).element_size()
    assert adapters.run_bytes_per_element(name) == expected, f"bytes_per_element({name!r})"
    assert adapters.run_bytes_per_element(dtype) == expected, f"bytes_per_element({dtype})"


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_tensor_memory_bytes_matches_measured_allocation(name: str) -> None:
    """(CPU twin) A fresh tensor's bytes equal the storage the allocator gave it."""
    shape = (3, 5, 7)
    x, measured = accounting.student_measure_allocation(shape, DTYPE_NAMES[name], "cpu")
    assert adapters.run_tensor_memory_bytes(x) == measured, f"{name} tensor of shape {shape}"


def test_tensor_memory_bytes_of_a_view_counts_its_own_elements() -> None:
    """A view's bytes are its numel times its element size, not its (shared) storage."""
    x = torch.zeros(8, 6, dtype=torch.float16)
    assert adapters.run_tensor_memory_bytes(x[::2, :3]) == 4 * 3 * 2


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: torch.tensor(1.5, dtype=torch.float16), 2),
        (lambda: torch.empty(3, 0, dtype=torch.int64), 0),
        (lambda: torch.ones(2, 4, dtype=torch.bool), 8),
        (lambda: torch.zeros(1, 1, dtype=torch.float64), 8),
        (lambda: torch.empty(2, 3, 5, device="meta"), 2 * 3 * 5 * 4),
    ],
    ids=["0-d-fp16", "empty-int64", "bool", "one-element", "meta-device"],
)
def test_tensor_memory_bytes_of_scalars_empty_and_meta_tensors(make, expected: int) -> None:
    """A 0-d tensor costs one element, an empty one nothing, bool one byte each; a meta tensor (no storage) its elements."""
    x = make()
    got = adapters.run_tensor_memory_bytes(x)
    assert got == expected, (
        f"tensor_memory_bytes of a {x.dtype} tensor of shape {tuple(x.shape)} on {x.device} = {got}, expected "
        f"numel {x.numel()} x {x.element_size()} bytes = {expected}"
    )
    three = adapters.run_tensor_memory_bytes(torch.zeros(3, dtype=x.dtype))
    assert three == 3 * x.element_size(), (
        f"3 {x.dtype} elements cost {3 * x.element_size()} bytes, got {three}"
    )


@pytest.mark.parametrize("dtype", ["fp33", "float", torch.Size([2])])
def test_bytes_per_element_rejects_unknown_dtypes(dtype) -> None:
    """An unknown dtype name is a ValueError that names it."""
    with pytest.raises(ValueError, match="dtype"):
        adapters.run_bytes_per_element(dtype)


# --------------------------------------------------------------------------------------------
# FLOPs: analytic against FlopCounterMode
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_matmul_flops_matches_flop_counter_mode(seed: int) -> None:
    """matmul_flops(m, k, n) is what FlopCounterMode counts for an (m, k) @ (k, n) matmul."""
    m, k, n = random_dims(seed, 3)
    a, b = torch.randn(m, k), torch.randn(k, n)
    got, want = adapters.run_matmul_flops(m, k, n), torch_flops(torch.matmul, a, b, backward=False)
    hint = (
        ": you counted m*k*n multiply-adds, but a FLOP is one multiply OR one add, so each term costs 2"
        if got * 2 == want
        else ""
    )
    assert got == want, (
        f"matmul_flops({m}, {k}, {n}) = {got}, FlopCounterMode counts {want} = 2*m*k*n{hint}"
    )


#: q k^T per batch and head: an einsum that lowers to a bmm over batch x heads.
ATTENTION_SCORES = Net("torch.einsum", before=("bhqd,bhkd->bhqk",))


def count_flops_case(name: str) -> tuple[Net, tuple[torch.Tensor, ...]]:
    """(network, args) of the named case; the network is built inside the test, so a stubbed model fails that test only."""
    g = torch.Generator().manual_seed(0)
    if name == "nn.Linear with bias":
        return Net("linear", (7, 5), bias=True), (torch.randn(3, 7, generator=g),)
    if name == "bias-free Linear on 3-d input":
        return Net("linear", (6, 4)), (torch.randn(2, 3, 6, generator=g),)
    if name == "Cruncher":
        return Net("Cruncher", (8, 3)), (torch.randn(5, 8, generator=g),)
    if name == "einsum attention scores":
        return ATTENTION_SCORES, (
            torch.randn(2, 3, 5, 4, generator=g, requires_grad=True),
            torch.randn(2, 3, 7, 4, generator=g, requires_grad=True),
        )
    seed = int(name.removeprefix("MLP seed "))
    dims = random_dims(seed, 4)
    return Net("mlp", tuple(dims)), (
        torch.randn(random_dims(seed + 10, 1)[0], dims[0], generator=g),
    )


COUNT_FLOPS_CASES = [
    "nn.Linear with bias",
    "bias-free Linear on 3-d input",
    "Cruncher",
    "einsum attention scores",
    "MLP seed 0",
    "MLP seed 1",
    "MLP seed 2",
]


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
@pytest.mark.parametrize("case", COUNT_FLOPS_CASES)
def test_count_flops_matches_flop_counter_mode(case: str, backward: bool) -> None:
    """count_flops agrees exactly with FlopCounterMode on Linear, Cruncher, einsum and random MLPs."""
    net, args = count_flops_case(case)
    expected = torch_flops(accounting.build(net), *args, backward=backward)
    got = accounting.student_count_flops(net, *args, backward=backward)
    assert got == expected, (
        f"{case}, backward={backward}: counted {got}, FlopCounterMode {expected}"
    )


def test_flop_counter_breakdown_matches_flop_counter_mode() -> None:
    """The per-module FLOPs of a Cruncher's training step equal FlopCounterMode's, module by module."""
    net, x = Net("Cruncher", (6, 3)), torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as mode:
        accounting.build(net)(x).sum().backward()
    expected = {name: sum(ops.values()) for name, ops in mode.get_flop_counts().items()}
    [counter] = accounting.student_flop_counter(net, x, backward=[True])
    assert counter["by_module"] == expected
    assert counter["total"] == expected["Global"]


def test_flop_counter_leaves_no_module_hook_installed_after_its_block() -> None:
    """What a FlopCounter installs to track modules (global module hooks, hooks on the model's modules) is
    gone after __exit__, after a block that raised too: the hooks installed are those before the block
    (and the block counted FlopCounterMode's total: the counter did run)."""
    net, x = Net("Cruncher", (6, 2)), torch.randn(4, 6, generator=torch.Generator().manual_seed(2))
    seen = accounting.student_flop_counter_hooks(net, x)
    expected = torch_flops_by_module(net, x, backward=True)["Global"]
    assert seen["total"] == expected, (
        f"the block counted {seen['total']} FLOPs, FlopCounterMode {expected}"
    )
    assert seen["after"] == seen["before"], (
        f"{seen['before']} module hooks were installed before the counter's block, {seen['inside']} inside, "
        f"{seen['after']} after it: __exit__ must remove every hook __enter__ installed (exit the ModuleTracker, "
        "remove each handle), or every later forward pass of every module keeps calling them"
    )
    assert seen["after_a_failed_block"] == seen["before"], (
        f"after a block that raised, {seen['after_a_failed_block']} module hooks were installed, "
        f"{seen['before']} before it: remove them in __exit__ whether or not the block raised"
    )


def torch_flops_by_module(net: Net, x: torch.Tensor, backward: bool) -> dict[str, int]:
    """The oracle per module: FlopCounterMode's counts of one block, model(x) (and its backward)."""
    model = accounting.build(net)
    with FlopCounterMode(display=False) as mode:
        out = model(x)
        if backward:
            out.sum().backward()
    return {name: sum(ops.values()) for name, ops in mode.get_flop_counts().items()}


def test_flop_counter_counts_only_its_own_block_on_every_entry() -> None:
    """One FlopCounter entered three times, with the model also trained outside it: each block's counts are that block's alone."""
    net, x = Net("Cruncher", (6, 2)), torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    passes = [True, False, True]
    runs = accounting.student_flop_counter(net, x, backward=passes, same_counter=True)
    for i, (run, with_backward) in enumerate(zip(runs, passes, strict=True), 1):
        expected = torch_flops_by_module(net, x, with_backward)
        what = "forward+backward" if with_backward else "forward only"
        hint = (
            "more than the block ran: reset the counts when the counter is entered (each with block starts "
            "from zero) and stop counting, and tracking modules, when it exits"
            if run["total"] > expected["Global"]
            else "compare with the per-module test above"
        )
        assert run["by_module"] == expected, (
            f"entry {i} of the same counter ({what}), read after the model trained again outside it: counted "
            f"{run['by_module']}, FlopCounterMode counts {expected} for that block alone; {hint}"
        )


@pytest.mark.parametrize("input_requires_grad", [False, True])
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
@pytest.mark.parametrize("seed", range(3))
def test_linear_chain_flops_match_measurement(
    seed: int, backward: bool, input_requires_grad: bool
) -> None:
    """Analytic FLOPs of a linear chain equal the measured ones, with and without an input gradient."""
    dims = random_dims(seed, 2 + seed)
    tokens = random_dims(seed + 100, 1)[0]
    x = torch.randn(tokens, dims[0], requires_grad=input_requires_grad)
    expected = torch_flops(mlp(dims), x, backward=backward)
    got = adapters.run_linear_chain_flops(
        tokens, dims, backward=backward, input_requires_grad=input_requires_grad
    )
    assert got == expected, (
        f"dims={dims}, tokens={tokens}, backward={backward}, input_requires_grad={input_requires_grad}: "
        f"analytic {got}, measured {expected} (ratio {got / expected:.3f})"
    )


def test_two_layer_mlp_trains_at_two_and_a_half_forwards() -> None:
    """A 2-layer MLP fed with data (no input gradient) costs 2.5 forwards to train, not 3."""
    dims, tokens = [16, 16, 16], 8
    forward = adapters.run_linear_chain_flops(tokens, dims, backward=False)
    train = adapters.run_linear_chain_flops(tokens, dims, backward=True, input_requires_grad=False)
    assert forward == 2 * tokens * sum(a * b for a, b in zip(dims, dims[1:], strict=False)), (
        f"forward FLOPs {forward}: 2 x tokens x d_in x d_out per layer"
    )
    assert train == 2.5 * forward, (
        f"training costs {train / forward:.2f} forwards, expected 2.5: each layer's dW costs a forward, and so does "
        "each dx except the first layer's (its input is data: no gradient)"
    )
    measured = accounting.student_count_flops(Net("mlp", tuple(dims)), torch.randn(tokens, dims[0]))
    assert measured == train, f"count_flops measured {measured}, the analytic count is {train}"


def test_six_nd_rule_overcounts_exactly_the_first_input_gradient() -> None:
    """6 x tokens x params is exact when the input needs a gradient and over by 2*t*d0*d1 otherwise."""
    dims, tokens = [12, 20, 8], 10
    net = Net("mlp", tuple(dims))
    rule = 6 * tokens * accounting.num_params(net)
    with_grad = accounting.student_count_flops(
        net, torch.randn(tokens, dims[0], requires_grad=True)
    )
    without = accounting.student_count_flops(net, torch.randn(tokens, dims[0]))
    assert with_grad == rule, (
        f"with an input gradient count_flops gives {with_grad}, the 6ND rule {rule}"
    )
    assert rule - without == 2 * tokens * dims[0] * dims[1], (
        f"without an input gradient count_flops gives {without}: {rule - without} below 6ND, expected "
        f"{2 * tokens * dims[0] * dims[1]} (the first layer's dx, 2 * tokens * d0 * d1, is not computed)"
    )


def test_flop_counts_of_empty_and_one_element_shapes() -> None:
    """A zero-sized matmul costs 0 and a 1x1x1 one 2; a non-integer size is a ValueError; a chain needs two sizes."""
    assert adapters.run_matmul_flops(4, 0, 3) == 0 and adapters.run_matmul_flops(0, 0, 0) == 0
    assert adapters.run_matmul_flops(1, 1, 1) == 2
    with pytest.raises(ValueError, match="integer"):
        adapters.run_matmul_flops(3, 4.0, 2)  # type: ignore[arg-type]  # a float, to be refused
    with pytest.raises(ValueError, match="dims"):
        adapters.run_linear_chain_flops(3, [])


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
@pytest.mark.parametrize(
    "shape", [(1, 6), (1, 1, 6), (4, 6)], ids=["batch-of-one", "batch-and-sequence-of-one", "batch"]
)
def test_count_flops_of_a_batch_of_one(shape: tuple[int, ...], backward: bool) -> None:
    """A batch of one (and a sequence of one) is counted like FlopCounterMode counts it: size-one dimensions are sizes too."""
    net = Net("mlp", (6, 5, 3), bias=True)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    expected = torch_flops(accounting.build(net), x, backward=backward)
    got = accounting.student_count_flops(net, x, backward=backward)
    assert got == expected, (
        f"input of shape {shape}, backward={backward}: counted {got}, FlopCounterMode {expected}"
    )


def test_count_flops_on_the_meta_device() -> None:
    """(CPU twin of a device) Counting reads shapes only: a network and inputs on the meta device (no data) count the same."""
    net = Net("mlp", (8, 6, 4))
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(3))
    expected = torch_flops(accounting.build(net), x)
    got = accounting.student_count_flops(net, x, device="meta")
    assert got == expected, (
        f"count_flops on the meta device counted {got}, on the CPU FlopCounterMode counts {expected}: count from "
        "the shapes of the matmuls' arguments, never from their values"
    )


def test_count_flops_without_a_gradient_is_a_value_error() -> None:
    """backward=True through an output that needs no gradient is the documented ValueError (not torch's RuntimeError)."""
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    with pytest.raises(ValueError, match="backward=False"):
        accounting.student_count_flops(Net("torch.mm"), a, b, backward=True)
    assert accounting.student_count_flops(Net("torch.mm"), a, b, backward=False) == 2 * 4 * 3 * 2


@pytest.mark.parametrize("sizes", [(-1, 2, 3), (2, -3, 4), (2, 3, -1)])
def test_matmul_flops_rejects_negative_sizes(sizes: tuple[int, int, int]) -> None:
    """A negative matrix size is a ValueError."""
    with pytest.raises(ValueError, match="non-negative"):
        adapters.run_matmul_flops(*sizes)


# --------------------------------------------------------------------------------------------
# Memory: analytic against measured
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_cruncher_activation_bytes_match_the_analytic_count(seed: int) -> None:
    """The bytes a Cruncher saves for backward are 4 x batch x dim x layers in fp32."""
    batch, dim, layers = random_dims(seed, 2) + [seed + 1]
    net = Net("Cruncher", (dim, layers), seed=seed)
    expected = 4 * batch * dim * layers
    assert adapters.run_cruncher_activations(batch, dim, layers) == batch * dim * layers
    got = accounting.student_activation_bytes(net, torch.randn(batch, dim))
    assert got == expected, (
        f"batch={batch} dim={dim} layers={layers}: measured {got}, expected {expected}"
    )


def test_activation_bytes_of_a_batch_of_one_and_of_nothing_to_save() -> None:
    """A Cruncher on a batch of one saves 1 x dim x layers fp32 values; with no hidden layer it saves nothing."""
    dim, layers = 10, 3
    got = accounting.student_activation_bytes(Net("Cruncher", (dim, layers)), torch.randn(1, dim))
    assert got == 4 * dim * layers, (
        f"batch of one: measured {got} bytes, expected 4 x 1 x {dim} x {layers}"
    )
    assert accounting.student_activation_bytes(Net("Cruncher", (dim, 0)), torch.randn(1, dim)) == 0


def test_activation_bytes_count_a_shared_storage_once() -> None:
    """ReLU saves its output and the next layer saves it again: one storage, counted once."""
    dims, batch = [6, 10, 10, 3], 4
    got = accounting.student_activation_bytes(Net("mlp", tuple(dims)), torch.randn(batch, dims[0]))
    assert got == 4 * batch * (10 + 10), (
        f"measured {got} bytes; each hidden activation is {4 * batch * 10}"
    )


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float64], ids=["bf16", "fp16", "fp64"]
)
def test_activation_bytes_count_each_storage_at_its_dtypes_size(dtype: torch.dtype) -> None:
    """An MLP held in bf16/fp16 (fp64) saves 2 (8) bytes per activation value: a storage costs its own bytes,
    whatever its dtype, not 4 per element as in fp32."""
    dims, batch = [6, 10, 7, 3], 5
    # each hidden activation, saved by ReLU and the next layer: one storage each
    values = batch * (10 + 7)
    got = accounting.student_activation_bytes(
        Net("mlp", tuple(dims), dtype=dtype), torch.randn(batch, dims[0], dtype=dtype)
    )
    expected = values * dtype.itemsize
    hint = (
        ": 4 bytes per value is fp32's size; read the storage's own bytes (t.untyped_storage().nbytes())"
        if got == 4 * values
        else ""
    )
    assert got == expected, (
        f"{dtype}: measured {got} bytes; {values} saved values of {dtype.itemsize} bytes each are {expected}{hint}"
    )


#: name -> (chain, hidden width): slices of the output of nn.Linear(6, 10) that autograd saves.
SAVED_VIEWS = {
    # relu saves its output h; sin saves its input, the view h[:, 4:9], at another offset of h's storage
    "relu output and a slice of it": (
        Net(
            "chain",
            parts=(
                Net("linear", (6, 10)),
                Net("relu"),
                Net("torch.narrow", after=(1, 4, 5)),
                Net("torch.sin"),
            ),
        ),
        10,
    ),
    # only the slice is saved, yet it keeps all of the linear layer's output alive
    "only a slice": (
        Net(
            "chain",
            parts=(Net("linear", (6, 10)), Net("torch.narrow", after=(1, 4, 5)), Net("torch.sin")),
        ),
        10,
    ),
}


@pytest.mark.parametrize("case", SAVED_VIEWS)
def test_activation_bytes_count_a_storage_once_whatever_views_of_it_are_saved(case: str) -> None:
    """A saved view keeps its whole storage alive: views of one activation cost its storage, once, whatever their offsets."""
    net, width = SAVED_VIEWS[case]
    batch = 4
    got = accounting.student_activation_bytes(net, torch.randn(batch, 6))
    storage = 4 * batch * width
    hint = {
        2
        * storage: ": the same storage was counted twice; views at different offsets have different data_ptr()s, "
        "key saved tensors by their storage (t.untyped_storage().data_ptr())",
        storage
        // 2: ": only the view's own elements were counted; a view keeps its whole storage alive "
        "(t.untyped_storage().nbytes())",
    }
    assert got == storage, (
        f"{case}: measured {got} bytes; the saved tensors are views of one fp32 storage of {batch} x {width} "
        f"= {storage} bytes{hint.get(got, '')}"
    )


def test_activation_bytes_exclude_parameters_and_inputs() -> None:
    """A single linear layer saves only its weight and its input, neither of which is an activation."""
    assert (
        accounting.student_activation_bytes(Net("linear", (5, 3), bias=True), torch.randn(4, 5))
        == 0
    )
    # while a hidden layer's output is one: 4 rows x 3 features in fp32 (0 everywhere is not the answer)
    assert (
        accounting.student_activation_bytes(Net("mlp", (5, 3, 2), bias=True), torch.randn(4, 5))
        == 4 * 4 * 3
    )


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_state_bytes_match_the_analytic_count(name: str) -> None:
    """Bytes in optimizer.state after a step are states-per-parameter x 4 x params (fp32)."""
    net = Net("mlp", (7, 5, 3))
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(0))
    measured = accounting.student_optimizer_state_bytes(net, name, optimizer_kwargs(name), [x])
    num_params = accounting.num_params(net)
    assert measured == 4 * OPTIMIZER_STATES[name] * num_params
    analytic = adapters.run_training_memory_bytes(num_params, 0, name, "fp32") - 8 * num_params
    assert analytic == measured, (
        f"{name}: analytic state {analytic} bytes, optimizer.state holds {measured}"
    )


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_state_bytes_count_a_scalar_parameters_state_but_no_step(name: str) -> None:
    """A 0-d parameter's state (0-d like it) counts; torch's 0-d step counters, shaped the same, do not."""
    net = Net("sequential", parts=(Net("mlp", (7, 5, 3)), Net("scale")))
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(0))
    measured = accounting.student_optimizer_state_bytes(net, name, optimizer_kwargs(name), [x])
    num_params = accounting.num_params(net)
    per_param = 4 * OPTIMIZER_STATES[name]
    expected = per_param * num_params
    hint = {
        expected
        - per_param: "the 0-d parameter's state was left out: it is 0-d like its parameter, and counts",
        expected
        + 4: "a 0-d step counter was counted: for a 0-d parameter it has the parameter's shape, so "
        "leave out 'step' by its key",
    }
    assert measured == expected, (
        f"{name} on {num_params} fp32 parameters, one of them 0-d: optimizer_state_bytes = {measured}, "
        f"expected {OPTIMIZER_STATES[name]} x 4 x {num_params} = {expected}; {hint.get(measured, 'see the docstring')}"
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64], ids=["bf16", "fp64"])
def test_optimizer_state_bytes_count_each_state_at_its_dtypes_size(dtype: torch.dtype) -> None:
    """Adam on bf16 (fp64) parameters keeps bf16 (fp64) state: 2 (8) bytes per value, read from the tensors."""
    net = Net("mlp", (7, 5, 3), dtype=dtype)
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(0)).to(dtype)
    measured = accounting.student_optimizer_state_bytes(net, "adam", {"lr": 1e-3}, [x])
    size, num_params = dtype.itemsize, accounting.num_params(net)
    assert measured == 2 * size * num_params, (
        f"Adam on {num_params} {dtype} parameters: optimizer_state_bytes = {measured}, expected "
        f"2 states x {size} bytes x {num_params} = {2 * size * num_params}: take each tensor's own element size "
        "(tensor_memory_bytes), not 4"
    )


LECTURE_BYTES = {  # (bytes per parameter, bytes per activation)
    ("sgd", "fp32"): (4 + 4, 4),
    ("adagrad", "fp32"): (4 + 4 + 4, 4),
    ("adamw", "fp32"): (4 + 4 + 8, 4),
    ("sgd", "mixed"): (2 + 2 + 4, 2),
    ("rmsprop", "mixed"): (2 + 2 + 4 + 4, 2),
    ("adamw", "mixed"): (2 + 2 + 4 + 8, 2),
}


@pytest.mark.parametrize(("optimizer", "precision"), LECTURE_BYTES)
def test_training_memory_bytes_breakdown(optimizer: str, precision: str) -> None:
    """Training bytes = params x (param + grad [+ master] + states) + activations x element size."""
    per_param, per_activation = LECTURE_BYTES[optimizer, precision]
    got = adapters.run_training_memory_bytes(1000, 300, optimizer, precision)
    parts = (
        "fp32: param 4 + grad 4 + 4 per state tensor"
        if precision == "fp32"
        else "mixed: bf16 param 2 + bf16 grad 2 + fp32 master weight 4 + 4 per fp32 state tensor"
    )
    assert got == 1000 * per_param + 300 * per_activation, (
        f"training_memory_bytes(1000 params, 300 activations, {optimizer!r}, {precision!r}) = {got}, expected "
        f"1000 x {per_param} + 300 x {per_activation} = {1000 * per_param + 300 * per_activation} (per parameter, {parts}; "
        f"per activation {per_activation} bytes)"
    )


def test_training_step_memory_matches_training_memory_bytes() -> None:
    """(CPU twin) Parameters, gradients, AdamW state and activations of a Cruncher step add up to the analytic total."""
    batch, dim, layers = 6, 16, 3
    measured = accounting.student_training_step_memory(dim, layers, batch, "cpu")
    num_params = accounting.num_params(Net("Cruncher", (dim, layers)))
    analytic = adapters.run_training_memory_bytes(
        num_params, adapters.run_cruncher_activations(batch, dim, layers), "adamw", "fp32"
    )
    assert measured.peak is None
    assert measured.total == analytic, f"measured {measured}, analytic total {analytic}"


def test_training_memory_of_nothing_is_zero_and_optimizer_state_starts_empty() -> None:
    """No parameters and no activations cost nothing; an optimizer holds no state before its first step, then its states."""
    assert adapters.run_training_memory_bytes(0, 0, "rmsprop", "fp32") == 0
    one = adapters.run_training_memory_bytes(1, 1, "rmsprop", "fp32")
    assert one == 12 + 4, (
        f"training_memory_bytes(1 param, 1 activation, 'rmsprop', 'fp32') = {one}, expected 16: "
        "4 (weight) + 4 (gradient) + 4 (RMSprop's running mean of g^2) per parameter, 4 per fp32 activation"
    )
    net = Net("mlp", (5, 4))
    assert accounting.student_optimizer_state_bytes(net, "adam", {"lr": 1e-3}, []) == 0, (
        "state before any step()"
    )
    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(4))
    got = accounting.student_optimizer_state_bytes(net, "adam", {"lr": 1e-3}, [x])
    assert got == 2 * 4 * 5 * 4, (
        f"after one Adam step on 20 fp32 parameters: {got} bytes, expected 2 x 4 x 20 = 160"
    )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((10, 10, "adamz", "fp32"), "optimizer"),
        ((10, 10, "adam", "fp16"), "precision"),
        ((-1, 10, "adam", "fp32"), "num_params"),
        ((10, -5, "sgd", "mixed"), "num_activations"),
    ],
)
def test_training_memory_bytes_rejects_bad_input(args: tuple, match: str) -> None:
    """Unknown optimizers or precisions and negative counts are ValueErrors naming the culprit."""
    with pytest.raises(ValueError, match=match):
        adapters.run_training_memory_bytes(*args)


# --------------------------------------------------------------------------------------------
# Napkin math
# --------------------------------------------------------------------------------------------


def test_training_days_lecture_example() -> None:
    """70B params on 15T tokens, 1024 H100s at bf16 dense peak and MFU 0.5: about 144 days."""
    peak = adapters.run_peak_flops("H100-SXM", "bf16")
    assert peak == 1979e12 / 2, (
        "the H100 SXM's dense bf16 peak is half the 1979 TFLOP/s 'with sparsity'"
    )
    days = adapters.run_training_days(70e9, 15e12, 1024, peak, 0.5)
    want = 6 * 70e9 * 15e12 / (1024 * peak * 0.5 * 86400)
    hint = {3.0: ": a run costs 6ND FLOPs (forward 2ND + backward 4ND), not 2ND"}
    ratio = round(want / days, 3) if days else 0
    assert days == pytest.approx(want, rel=1e-12), (
        f"training_days(70e9 params, 15e12 tokens, 1024 GPUs, {peak:g} FLOP/s, MFU 0.5) = {days:.4g} days, expected "
        f"6 * N * D / (GPUs * peak * MFU * 86400) = {want:.4g}{hint.get(ratio, '')}"
    )
    assert round(days) == 144


def test_max_trainable_params_lecture_example() -> None:
    """8 H100s of 80 GB at 16 bytes per parameter (AdamW) hold 40B parameters."""
    got = adapters.run_max_trainable_params(8, 80e9, 16)
    assert got == pytest.approx(40e9), (
        f"max_trainable_params(8 GPUs, 80e9 bytes, 16 bytes/param) = {got:.4g}, expected 8 * 80e9 / 16 = 4e10"
    )


def test_mfu_is_achieved_flops_over_peak() -> None:
    """MFU = flops / seconds / peak."""
    got = adapters.run_mfu(6e15, 10.0, 1e15)
    assert got == pytest.approx(0.6), (
        f"mfu(6e15 FLOPs, 10 s, peak 1e15 FLOP/s) = {got}, expected 6e15 / 10 / 1e15 = 0.6"
    )


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: adapters.run_training_days(70e9, 15e12, 1024, 989.5e12, 1.5), "mfu"),
        (lambda: adapters.run_training_days(70e9, 15e12, 1024, 989.5e12, 0.0), "mfu"),
        (lambda: adapters.run_training_days(70e9, 15e12, -8, 989.5e12, 0.5), "num_gpus"),
        (lambda: adapters.run_max_trainable_params(8, 80e9, 0), "bytes_per_param"),
        (lambda: adapters.run_mfu(1e12, 0.0, 1e15), "seconds"),
        (lambda: adapters.run_peak_flops("H200", "bf16"), "GPU"),
        (lambda: adapters.run_peak_flops("A100-SXM", "fp8"), "fp8"),
        (lambda: adapters.run_max_trainable_params(0, 40e9, 8), "num_gpus"),
        (lambda: adapters.run_training_days(0, 15e12, 1024, 989.5e12, 0.5), "num_params"),
        (lambda: adapters.run_mfu(-6e15, 10.0, 1e15), "flops"),
        (lambda: adapters.run_peak_flops("a100-sxm", "bf16"), "GPU"),
    ],
    ids=[
        "mfu>1",
        "mfu=0",
        "negative-gpus",
        "zero-bytes",
        "zero-seconds",
        "unknown-gpu",
        "fp8-on-a100",
        "zero-gpus",
        "zero-params",
        "negative-flops",
        "lower-case-gpu",
    ],
)
def test_napkin_math_rejects_bad_input(call, match: str) -> None:
    """Out-of-range MFU, non-positive sizes (every one, not only the divisors), negative FLOPs, unknown GPUs
    (names are case-sensitive) and dtypes are ValueErrors naming the culprit."""
    with pytest.raises(ValueError, match=match):
        call()


def assert_mean_seconds_of_one_call(seconds: float, iters: int, wall: float) -> None:
    """``seconds`` is a positive float that ``iters`` calls fit into ``wall``, the seconds the test's whole
    call took (its timed calls are part of it): the mean of one timed call."""
    assert isinstance(seconds, float) and 0 < seconds < float("inf"), (
        f"time_matmul returned {seconds!r}"
    )
    assert seconds * iters <= wall, (
        f"time_matmul(iters={iters}) says {seconds:.3g} s per call, but the whole call took {wall:.3g} s: return "
        "the mean of one timed call (total / iters), not the total"
    )


def test_time_matmul_warms_up_then_times_each_call() -> None:
    """time_matmul runs warmup + iters matmuls (FlopCounterMode counts them around your call) and returns the mean
    seconds of one."""
    a, b = torch.randn(8, 4), torch.randn(4, 6)
    start = time.perf_counter()
    seconds, flops = accounting.student_time_matmul_flops(a, b, warmup=2, iters=3)
    wall = time.perf_counter() - start
    one = 2 * 8 * 4 * 6  # the FLOPs of one (8, 4) @ (4, 6)
    assert flops == (2 + 3) * one, (
        f"time_matmul(warmup=2, iters=3) ran {flops / one:g} matmuls of (8, 4) @ (4, 6), expected 2 warm-up and "
        "3 timed ones"
    )
    assert_mean_seconds_of_one_call(seconds, 3, wall)


@pytest.mark.parametrize("iters", [1, 16])
def test_time_matmul_returns_the_mean_seconds_of_one_call(iters: int) -> None:
    """time_matmul returns a positive float: the mean of one timed call, so iters times it fits in the call's wall time."""
    g = torch.Generator().manual_seed(iters)
    a, b = torch.randn(96, 64, generator=g), torch.randn(64, 80, generator=g)
    start = time.perf_counter()
    seconds = adapters.run_time_matmul(a, b, warmup=1, iters=iters)
    wall = time.perf_counter() - start
    assert_mean_seconds_of_one_call(seconds, iters, wall)


@pytest.mark.parametrize(
    ("warmup", "iters", "b_device", "match"),
    [
        (3, 0, "cpu", "iters"),
        (-1, 2, "cpu", "warmup"),
        (1.5, 2, "cpu", "warmup"),
        (1, 2, "meta", "device"),
    ],
    ids=["zero-iters", "negative-warmup", "float-warmup", "two-devices"],
)
def test_time_matmul_rejects_bad_input(warmup, iters: int, b_device: str, match: str) -> None:
    """Bad counts and operands on two devices are ValueErrors naming the culprit, raised before anything runs."""
    a, b = torch.ones(4, 4), torch.ones(4, 4, device=b_device)
    with pytest.raises(ValueError, match=match):
        adapters.run_time_matmul(a, b, warmup=warmup, iters=iters)


def test_matmul_throughput_code_path_on_cpu() -> None:
    """(CPU twin) Timing a square matmul gives a positive, finite FLOP/s and an MFU in (0, 1] against it."""
    seconds, flops_per_sec = adapters.run_matmul_throughput(
        64, torch.float32, "cpu", warmup=1, iters=2
    )
    assert 0 < seconds < float("inf") and 0 < flops_per_sec < float("inf")
    assert adapters.run_mfu(2 * 64**3, seconds, flops_per_sec) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# The `cs336 account` command
# --------------------------------------------------------------------------------------------


def test_account_prints_the_lecture_answers() -> None:
    """With no arguments, `cs336 account` answers 143.9 days and 40B parameters, and shows its working."""
    status, out = accounting.cs336(["account"])
    assert status == 0
    for line, source in [
        ("= 6.3e+24 FLOPs", "six_nd_flops(70e9, 15e12): 6 * params * tokens"),
        ("143.9 days", "training_days"),
        ("40B params", "max_trainable_params"),
        ("16 bytes/param", "bytes_per_param('adamw', 'mixed')"),
        ("+ 2 fp32 states x 4)", "optimizer_state_tensors('adamw')"),
        ("(2 bytes each)", "bytes_per_activation('mixed')"),
    ]:
        assert line in out, (
            f"`cs336 account` should print {line!r} (from {source}); it printed:\n{out}"
        )


def test_account_answers_the_question_asked() -> None:
    """Arguments change the question: 8B on 1T tokens, 64 A100s at MFU 0.4; SGD in fp32 on one GPU."""
    argv = [
        "account",
        "--params",
        "8B",
        "--tokens",
        "1T",
        "--gpus",
        "64",
        "--gpu",
        "A100-SXM",
        "--mfu",
        "0.4",
        "--optimizer",
        "sgd",
        "--precision",
        "fp32",
        "--fit-gpus",
        "1",
    ]
    status, out = accounting.cs336(argv)
    assert status == 0
    days = 6 * 8e9 * 1e12 / (64 * 312e12 * 0.4 * 86400)
    for line, source in [
        ("= 4.8e+22 FLOPs", "six_nd_flops(8e9, 1e12)"),
        (f"{days:.1f} days", "training_days"),
        ("8 bytes/param", "bytes_per_param('sgd', 'fp32')"),
        ("+ 0 states x 4)", "optimizer_state_tensors('sgd')"),
        ("10B params", "max_trainable_params"),
        ("(4 bytes each)", "bytes_per_activation('fp32')"),
    ]:
        assert line in out, (
            f"`cs336 account` should print {line!r} (from {source}); it printed:\n{out}"
        )


def test_account_reports_bad_mfu() -> None:
    """An MFU above 1 exits with status 2 and says what is wrong."""
    status, printed = accounting.cs336(["account", "--mfu", "1.5"])
    assert status == 2
    assert "mfu must be in (0, 1]" in printed


def test_account_measure_prints_a_row_per_dtype_and_size() -> None:
    """`--measure` times fp32 and bf16 matmuls at each size and prints one row each."""
    status, out = accounting.cs336(
        ["account", "--measure", "--device", "cpu", "--sizes", "16,32", "--iters", "1"]
    )
    assert status == 0
    rows = [line.split() for line in out.splitlines()]
    assert [(r[0], r[1]) for r in rows if r and r[0] in ("fp32", "bf16")] == [
        ("fp32", "16"),
        ("fp32", "32"),
        ("bf16", "16"),
        ("bf16", "32"),
    ]


def test_account_measure_saves_a_png_plot(tmp_path) -> None:
    """`--measure --plot PATH` writes a PNG of throughput against size."""
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib")
    plot = tmp_path / "plots" / "throughput.png"
    status, out = accounting.cs336(
        [
            "account",
            "--measure",
            "--device",
            "cpu",
            "--sizes",
            "16",
            "--iters",
            "1",
            "--plot",
            str(plot),
        ]
    )
    assert status == 0
    assert f"plot saved to {plot}" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
