"""Scenarios of part 7, resource accounting: your counters and measurements run on a network.

A network (or a plain torch function) is described by a ``Net``, plain data, so that both sides of
the line build the same one with ``build(net)``: torch's modules only (``nn.Linear``, and torch's
twin of the ``Cruncher``), never your ``models`` or ``optim`` code, so these tests grade your
accounting alone and a bug in another part costs no accounting points.

The ``student_...`` functions are drivers (``tests/boundary.py``): each builds the network from its
``Net``, runs one of your counters (``count_flops``, ``FlopCounter``, ``activation_bytes``,
``optimizer_state_bytes``, ``time_matmul``) or one of the given measurement helpers on it, the
training with torch's optimizers included, and returns what came out as plain data: counts, bytes,
seconds. ``tests/test_accounting.py`` (and ``test_accounting_gpu.py``) compute torch's own counts
(``FlopCounterMode`` on ``build(net)``, formulas) and compare.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import adapters
from tests.boundary import driver, plain_data, printed_by

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU}


@plain_data
@dataclass(frozen=True)
class Net:
    """A network, or a torch function, described as data; ``build`` makes it.

    ``kind``:
        ``"linear"``         ``nn.Linear(*dims, bias=bias)``
        ``"mlp"``            ``mlp(dims, activation, bias)``
        ``"relu"``/``"gelu"``  the activation module
        ``"scale"``          ``Scale()``: multiplies by one learnable number, a 0-d parameter
        ``"sequential"``     ``nn.Sequential`` of ``parts``
        ``"chain"``          a plain function applying ``parts`` (functions) in turn to one tensor
        ``"Cruncher"``       ``Cruncher(*dims)`` below (dim, num_layers): torch's twin of models.Cruncher
        ``"torch.NAME"``     the function ``torch.NAME``, called as ``torch.NAME(*before, *tensors, *after)``
    Modules are built with torch's RNG seeded with ``seed`` and cast to ``dtype``.
    """

    kind: str
    dims: tuple[int, ...] = ()
    activation: str = "relu"
    bias: bool = False
    dtype: torch.dtype = torch.float32
    seed: int = 0
    parts: tuple[Net, ...] = ()
    before: tuple = ()
    after: tuple = ()


def mlp(
    dims: list[int], activation: type[nn.Module] = nn.ReLU, bias: bool = False
) -> nn.Sequential:
    """Linear layers dims[0] -> ... -> dims[-1] (bias-free unless `bias`) with `activation` between them."""
    layers: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        if i:
            layers.append(activation())
        layers.append(nn.Linear(d_in, d_out, bias=bias))
    return nn.Sequential(*layers)


class Scale(nn.Module):
    """Multiply by one learnable number (a gain, a temperature): a module whose parameter is 0-d."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class Cruncher(nn.Module):
    """torch's twin of your ``models.Cruncher``, which the accounting tests count on instead of yours:
    the same module tree (``layers.i``, ``final``), of bias-free ``nn.Linear``, and the same class
    name (FlopCounterMode names the root module by it)."""

    def __init__(
        self,
        dim: int,
        num_layers: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(dim, dim, bias=False, device=device, dtype=dtype) for _ in range(num_layers)]
        )
        self.final = nn.Linear(dim, 1, bias=False, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The composition tests/test_models.py checks yours against: each layers.i, then final, squeezed."""
        out = x
        for i in range(len(self.layers)):
            out = self.layers[i](out)
        return self.final(out).squeeze(-1)


def _function(net: Net) -> Callable[..., torch.Tensor]:
    fn = getattr(torch, net.kind.removeprefix("torch."))
    if not net.before and not net.after:
        return fn
    return lambda *tensors: fn(*net.before, *tensors, *net.after)


def build(net: Net) -> Any:
    """The network (of torch's modules), or the function, ``net`` describes: an ``nn.Module`` or a
    callable, which the caller knows from ``net.kind``."""
    if net.kind.startswith("torch."):
        return _function(net)
    if net.kind == "chain":
        fns = [build(part) for part in net.parts]

        def chain(x: torch.Tensor) -> torch.Tensor:
            for fn in fns:
                x = fn(x)
            return x

        return chain
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(net.seed)  # the CPU's only, as fork_rng keeps
        if net.kind == "linear":
            d_in, d_out = net.dims
            module: nn.Module = nn.Linear(d_in, d_out, bias=net.bias)
        elif net.kind == "mlp":
            module = mlp(list(net.dims), ACTIVATIONS[net.activation], net.bias)
        elif net.kind in ACTIVATIONS:
            module = ACTIVATIONS[net.kind]()
        elif net.kind == "scale":
            module = Scale()
        elif net.kind == "sequential":
            module = nn.Sequential(*(build(part) for part in net.parts))
        elif net.kind == "Cruncher":
            dim, num_layers = net.dims
            return Cruncher(dim, num_layers, dtype=net.dtype)
        else:
            raise ValueError(f"unknown kind of Net: {net.kind!r}")
    return module.to(net.dtype)


def num_params(net: Net) -> int:
    """Parameters of the network (counted on torch's build, on the meta device: no memory, no init)."""
    with torch.device("meta"):
        return sum(p.numel() for p in build(net).parameters())


#: torch's optimizers by the names the tests use ("momentum" is SGD with a momentum buffer).
TORCH_OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "momentum": torch.optim.SGD,
    "adagrad": torch.optim.Adagrad,
    "rmsprop": torch.optim.RMSprop,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
}


def torch_optimizer(
    name: str, params: list[torch.Tensor], kwargs: dict[str, Any]
) -> torch.optim.Optimizer:
    """torch's optimizer ``TORCH_OPTIMIZERS[name]`` (not yours: those are graded in part 3) over ``params``."""
    return TORCH_OPTIMIZERS[name](params, **kwargs)


# --------------------------------------------------------------------------------------------
# FLOPs
# --------------------------------------------------------------------------------------------


@driver
def student_count_flops(
    net: Net, *args: torch.Tensor, backward: bool = True, device: str | None = None
) -> int:
    """Build ``net`` and return your ``count_flops`` of it on ``args`` (network and args moved to ``device`` first,
    if given: ``"meta"`` counts from shapes alone)."""
    fn = build(net)
    if device is not None:
        fn = fn.to(device)
        args = tuple(a.to(device) for a in args)
    return adapters.run_count_flops(fn, *args, backward=backward)


@driver
def student_flop_counter(
    net: Net, x: torch.Tensor, backward: list[bool], same_counter: bool = False
) -> list[dict[str, Any]]:
    """Build ``net`` and use your ``FlopCounter`` once per entry of ``backward``, around ``model(x)`` (and the
    backward of its sum if true); return each block's ``by_module()`` and ``total``.

    By default each block gets a fresh counter. With ``same_counter``, one counter is entered
    again for every block, and the model also trains (forward and backward) outside any counter:
    once before the first block and once after each; each block's counts are read after the run
    that follows it.
    """
    model = build(net)
    counter_cls = adapters.get_flop_counter_cls()

    def outside() -> None:
        model(x).sum().backward()

    shared: Any = counter_cls() if same_counter else None  # your counter (or None): any type
    if same_counter:
        outside()
    runs = []
    for with_backward in backward:
        counter = shared if same_counter else counter_cls()
        with counter:
            if with_backward:
                model(x).sum().backward()
            else:
                model(x)
        if same_counter:
            outside()
        runs.append({"by_module": dict(counter.by_module()), "total": counter.total})
    return runs


def installed_module_hooks(model: torch.nn.Module) -> int:
    """How many module hooks are installed: torch's global ones (``register_module_forward_hook`` and
    the like, the tables of ``torch.nn.modules.module``) and those on ``model``'s modules."""
    tables = vars(torch.nn.modules.module)
    global_hooks = sum(
        len(table)
        for name, table in tables.items()
        if name.startswith("_global_") and "hook" in name and isinstance(table, dict)
    )
    own = sum(
        len(table)
        for module in model.modules()
        for name, table in vars(module).items()
        if name.endswith("hooks") and isinstance(table, dict)
    )
    return global_hooks + own


@driver
def student_flop_counter_hooks(net: Net, x: torch.Tensor) -> dict[str, int]:
    """The module hooks installed (``installed_module_hooks``) before your ``FlopCounter`` is entered, inside
    its block, after a block that ends normally and after one that raises; and the total it counted for
    the normal block (``model(x)`` and its backward)."""
    model = build(net)
    counter = adapters.get_flop_counter_cls()()
    seen = {"before": installed_module_hooks(model)}
    with counter:
        model(x).sum().backward()
        seen["inside"] = installed_module_hooks(model)
    seen["after"] = installed_module_hooks(model)
    seen["total"] = counter.total
    try:
        with adapters.get_flop_counter_cls()():
            model(x)
            raise KeyError("a block that fails")
    except KeyError:
        pass
    seen["after_a_failed_block"] = installed_module_hooks(model)
    return seen


@driver
def student_time_matmul_flops(
    a: torch.Tensor, b: torch.Tensor, warmup: int, iters: int
) -> tuple[float, int]:
    """Your ``time_matmul(a, b, warmup, iters)`` run inside torch's ``FlopCounterMode``: (its seconds, the FLOPs it ran)."""
    with FlopCounterMode(display=False) as mode:
        seconds = adapters.run_time_matmul(a, b, warmup=warmup, iters=iters)
    return seconds, mode.get_total_flops()


@driver
def torch_matmul_seconds(
    n: int, dtype: torch.dtype, device: torch.device | str, warmup: int, iters: int
) -> float:
    """The baseline of a timing check: mean seconds of an ``(n, n) @ (n, n)`` matmul by torch.utils.benchmark
    (which synchronises CUDA itself), after ``warmup`` untimed calls; run beside your code, as your timer is."""
    # a quarter of a second to import: only where a GPU test times
    from torch.utils import benchmark

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    timer = benchmark.Timer(stmt="a @ b", globals={"a": a, "b": b})
    timer.timeit(warmup)
    return timer.timeit(iters).mean


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------


@driver
def student_activation_bytes(net: Net, *args: torch.Tensor) -> int:
    """Build ``net`` and return your ``activation_bytes`` of it on ``args``."""
    return adapters.run_activation_bytes(build(net), *args)


@driver
def student_optimizer_state_bytes(
    net: Net, optimizer: str, kwargs: dict[str, Any], inputs: list[torch.Tensor]
) -> int:
    """Build ``net``, train it one step per input (``model(x).sum()``) with torch's optimizer ``optimizer``
    (``TORCH_OPTIMIZERS``, not yours: those are graded in part 3); return your ``optimizer_state_bytes`` of it."""
    model = build(net)
    opt = torch_optimizer(optimizer, list(model.parameters()), kwargs)
    for x in inputs:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    return adapters.run_optimizer_state_bytes(opt)


@plain_data
@dataclass(frozen=True)
class TrainingMemory:
    """What ``measure_training_step`` reported (its fields and ``total``), and ``baseline``: the
    CUDA memory allocated before the model was built (None on CPU)."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    peak: int | None
    total: int
    baseline: int | None = field(default=None)


def prepare_cuda(device: torch.device) -> None:
    """Empty the allocator's cache and warm up cuBLAS, so later allocator deltas are only our tensors."""
    gc.collect()
    torch.cuda.empty_cache()
    # Allocate the cuBLAS workspace (mm and bmm share it) before anyone takes a baseline.
    torch.ones(64, 64, device=device) @ torch.ones(64, 64, device=device)
    torch.ones(2, 64, 64, device=device) @ torch.ones(2, 64, 64, device=device)
    torch.cuda.synchronize(device)


def cruncher_training_setup(
    dim: int, num_layers: int, device: torch.device | str, seed: int = 0
) -> tuple[Cruncher, torch.optim.Optimizer, int | None]:
    """torch's twin ``Cruncher(dim, num_layers)`` (seeded) with torch's AdamW (foreach=False: the
    multi-tensor kernels would add a parameter-sized temporary); and, on CUDA, the memory allocated
    before the model was built (after ``prepare_cuda``), else None."""
    device_ = torch.device(device)
    baseline = None
    if device_.type == "cuda":
        prepare_cuda(device_)
        baseline = torch.cuda.memory_allocated(device_)
    with torch.random.fork_rng(devices=[device_] if device_.type == "cuda" else []):
        torch.manual_seed(seed)
        model = Cruncher(dim, num_layers, device=device_)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False), baseline


@driver
def student_training_step_memory(
    dim: int, num_layers: int, batch: int, device: torch.device | str, seed: int = 0
) -> TrainingMemory:
    """``measure_training_step`` of torch's twin ``Cruncher(dim, num_layers)`` with torch's AdamW
    (``cruncher_training_setup``) on a seeded ``(batch, dim)`` input; ``total`` is the sum of the four kinds."""
    model, optimizer, baseline = cruncher_training_setup(dim, num_layers, device, seed)
    x = torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed)).to(device)
    m = adapters.run_measure_training_step(model, optimizer, x)
    total = m.parameters + m.gradients + m.optimizer_state + m.activations
    return TrainingMemory(
        m.parameters, m.gradients, m.optimizer_state, m.activations, m.peak, total, baseline
    )


@driver
def student_measure_allocation(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str
) -> tuple[torch.Tensor, int]:
    """``measure_allocation`` of ``torch.empty(shape, dtype, device)``: (the tensor, the bytes measured). On
    CUDA the allocator's cache is emptied and cuBLAS warmed up first (``prepare_cuda``)."""
    if torch.device(device).type == "cuda":
        prepare_cuda(torch.device(device))
    return adapters.run_measure_allocation(
        functools.partial(torch.empty, shape, dtype=dtype, device=device), device
    )


# --------------------------------------------------------------------------------------------
# The cs336 command
# --------------------------------------------------------------------------------------------


def cs336(argv: list[str]) -> tuple[int, str]:
    """Run ``cs336 ARGV`` (``adapters.run_cs336``): (its exit status, what it printed, standard output and
    standard error together; in grading the test reads it from outside your process: ``printed_by``)."""
    return printed_by(lambda: adapters.run_cs336(argv))
