"""Reference answers of the written problems, computed by running the reference code.

``GIVEN`` holds the inputs the problems quote (the writeup renders them with ``#given("name")``,
so a problem and its answer cannot use different inputs); ``compute()`` runs the reference
solution (``cs336_assignment``) and torch on them and returns every number the answer key shows
(``#ans("name")``). Each entry is ``{"value": ..., "text": ...}``: the exact value, and how the
key prints it.

Measured figures (H100 throughput) are not computed here: a problem quotes them as given data,
with where and when they were measured (``benchmarks/README.md``).

    uv run cs336 writeup --answers        # print them
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path

import torch

from cs336_assignment import accounting, precision, tensors
from cs336_assignment.tokenization import (
    ByteTokenizer,
    CharacterTokenizer,
    Tokenizer,
    compression_ratio,
    train_bpe,
)

REPO = Path(__file__).resolve().parents[2]
TRAIN_CORPUS = "fixtures/corpora/multilingual.txt"
EVAL_CORPUS = "fixtures/corpora/mini.txt"
SPECIAL = "<|endoftext|>"
VOCAB_SIZES = (512, 1024, 2048)

# name -> (value, how the problem prints it)
GIVEN: dict[str, tuple[object, str]] = {
    # accounting: the lecture's two napkin questions on another model, token count and cluster than
    # the worked examples the handout's docstrings print (70B on 15T tokens on 1024 H100s at MFU 0.5;
    # 8 H100s hold 40B), so an answer is computed, not copied; and the utilisation of a measured matmul
    "params": (34e9, "34B"),
    "tokens": (4e12, "4T"),
    "gpus": (512, "512"),
    "mfu": (0.45, "0.45"),
    "target_days": (21, "21"),
    "fit_gpus": (24, "24"),
    "gpu_memory": (80e9, "80 GB"),
    "hbm_bandwidth": (3.35e12, "3.35 TB/s"),
    "cruncher_dim": (1024, "1024"),
    "cruncher_layers": (4, "4"),
    "cruncher_batch": (4096, "4096"),
    # measured on one H100 80GB HBM3 (SXM), torch 2.11, 2026-11-22 (benchmarks/README.md)
    "measured_n": (8192, "8192"),
    "measured_bf16": (789e12, "789 TFLOP/s"),
    "measured_fp32": (51.6e12, "51.6 TFLOP/s"),
    "measured_fp8_mm": (1419e12, "1419 TFLOP/s"),
    "measured_fp8_bf16_same_run": (786e12, "786 TFLOP/s"),
    "measured_fp8_eager": (246e12, "246 TFLOP/s"),
    "measured_fp8_fused": (803e12, "803 TFLOP/s"),
    # precision
    "increment": (1e-4, "$10^(-4)$"),
    "steps": (10_000, "10,000"),
    "update": (1e-5, "$10^(-5)$"),
    "fp8_numel": (4096, "4096"),
    "fp8_std": (1e-4, "$10^(-4)$"),
    "fp8_outlier": (10.0, "10"),
    "fp8_rows": (64, "64"),
    # tokenization
    "train_corpus": (TRAIN_CORPUS, TRAIN_CORPUS),
    "eval_corpus": (EVAL_CORPUS, EVAL_CORPUS),
    "vocab_sizes": (list(VOCAB_SIZES), ", ".join(map(str, VOCAB_SIZES))),
}


_H100 = accounting.PEAK_FLOPS["H100-SXM"]
GIVEN["peaks_h100"] = (
    dict(_H100),
    ", ".join(f"{k} {_H100[k] / 1e12:g}" for k in ("fp32", "tf32", "bf16", "fp8")) + " TFLOP/s",
)


def given_texts() -> dict[str, str]:
    return {k: text for k, (_, text) in GIVEN.items()}


def _g(name: str):
    return GIVEN[name][0]


def _sig(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, in plain or scientific notation as fits."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    if 1e-3 <= abs(x) < 1e6:
        return f"{x:.{digits}g}"
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"${mantissa} times 10^({int(exponent)})$"


def _pow2(x: float) -> str:
    """A power of two as ``2^(k)`` (Typst math), with its decimal value; else ``_sig``."""
    k = math.log2(x) if x > 0 else 0.5
    if k != int(k):
        return _sig(x)
    if 0 <= k < 20:
        return f"{x:,.0f}"
    return f"$2^({int(k)}) approx$ {_sig(x)}"


def _entry(value, text: str | None = None) -> dict:
    if isinstance(value, tuple):
        value = list(value)
    if text is None:
        text = str(value) if isinstance(value, int | bool | str | list) else _sig(value)
    return {"value": value, "text": text}


def _tensors() -> dict[str, dict]:
    x = torch.arange(24).view(2, 3, 4)
    y = x.transpose(1, 2)
    z = x[:, 1:, ::2]
    out = {
        "x_strides": _entry(tuple(x.stride()), str(tuple(x.stride()))),
        "y_strides": _entry(tuple(y.stride()), str(tuple(y.stride()))),
        "y_contiguous": _entry(tensors.is_contiguous(tuple(y.shape), tuple(y.stride()))),
        "y_flat": _entry(tensors.flat_index((1, 3, 2), tuple(y.stride()), int(y.storage_offset()))),
        "z_shape": _entry(tuple(z.shape), str(tuple(z.shape))),
        "z_strides": _entry(tuple(z.stride()), str(tuple(z.stride()))),
        "z_offset": _entry(z.storage_offset()),
        "z_flat": _entry(tensors.flat_index((1, 1, 1), tuple(z.stride()), int(z.storage_offset()))),
        "y_view_ok": _entry(tensors.view_or_copy(y, (2, 12))[1]),
        "y_copy_bytes": _entry(tensors.copy_bytes(lambda t: t.reshape(2, 12), y.float())),
    }
    return out


def _accounting() -> dict[str, dict]:
    params, tokens, gpus, mfu = _g("params"), _g("tokens"), _g("gpus"), _g("mfu")
    peak = accounting.peak_flops("H100-SXM", "bf16")
    days = accounting.training_days(params, tokens, gpus, peak, mfu)
    total = accounting.six_nd_flops(params, tokens)
    gpus_needed = total / (_g("target_days") * accounting.SECONDS_PER_DAY * peak * mfu)
    adamw = accounting.bytes_per_param("adamw", "mixed")
    sgd32 = accounting.bytes_per_param("sgd", "fp32")
    fit = accounting.max_trainable_params(_g("fit_gpus"), _g("gpu_memory"), adamw)
    fit_sgd = accounting.max_trainable_params(_g("fit_gpus"), _g("gpu_memory"), sgd32)
    bytes_model = params * adamw
    dim, layers, batch = _g("cruncher_dim"), _g("cruncher_layers"), _g("cruncher_batch")
    dims = [dim] * (layers + 1) + [1]
    n_params = accounting.cruncher_params(dim, layers)
    exact = accounting.linear_chain_flops(batch, dims)
    forward = accounting.linear_chain_flops(batch, dims, backward=False)
    rule = accounting.six_nd_flops(n_params, batch)
    peak32 = accounting.peak_flops("H100-SXM", "fp32")
    n = _g("measured_n")
    ridge = peak / _g("hbm_bandwidth")
    return {
        "total_flops": _entry(total),
        "peak_bf16": _entry(peak, f"{peak / 1e12:g} TFLOP/s"),
        "days": _entry(days, f"{days:.1f}"),
        "days_mfu_035": _entry(
            accounting.training_days(params, tokens, gpus, peak, 0.35),
            f"{accounting.training_days(params, tokens, gpus, peak, 0.35):.1f}",
        ),
        "gpus_needed": _entry(gpus_needed, f"{math.ceil(gpus_needed)}"),
        "bytes_rmsprop_fp32": _entry(accounting.bytes_per_param("rmsprop", "fp32")),
        "bytes_momentum_mixed": _entry(accounting.bytes_per_param("momentum", "mixed")),
        "bytes_sgd_mixed": _entry(accounting.bytes_per_param("sgd", "mixed")),
        "bytes_adamw_mixed": _entry(adamw),
        "bytes_sgd_fp32": _entry(sgd32),
        "fit_params": _entry(fit, f"{fit / 1e9:g}B"),
        "fit_params_sgd": _entry(fit_sgd, f"{fit_sgd / 1e9:g}B"),
        "bytes_model": _entry(bytes_model, f"{bytes_model / 1e12:g} TB"),
        "gpus_model": _entry(math.ceil(bytes_model / _g("gpu_memory"))),
        "cruncher_params": _entry(n_params, f"{n_params:,}"),
        "cruncher_forward": _entry(forward, f"{forward:,}"),
        "cruncher_exact": _entry(exact, f"{exact:,}"),
        "cruncher_6nd": _entry(int(rule), f"{int(rule):,}"),
        "cruncher_ratio": _entry(exact / rule, f"{exact / rule:.4f}"),
        "mfu_bf16": _entry(
            accounting.mfu(_g("measured_bf16"), 1.0, peak),
            f"{accounting.mfu(_g('measured_bf16'), 1.0, peak):.1%}",
        ),
        "mfu_fp32": _entry(
            accounting.mfu(_g("measured_fp32"), 1.0, peak32),
            f"{accounting.mfu(_g('measured_fp32'), 1.0, peak32):.1%}",
        ),
        "peak_fp32": _entry(peak32, f"{peak32 / 1e12:g} TFLOP/s"),
        "matmul_ms_bf16": _entry(
            accounting.matmul_flops(n, n, n) / _g("measured_bf16") * 1e3,
            f"{accounting.matmul_flops(n, n, n) / _g('measured_bf16') * 1e3:.2f} ms",
        ),
        "ridge": _entry(ridge, f"{ridge:.0f} FLOP/byte"),
        "ridge_n": _entry(3 * ridge, f"{3 * ridge:.0f}"),
    }


def _fp8() -> dict[str, dict]:
    n, std, outlier, rows = _g("fp8_numel"), _g("fp8_std"), _g("fp8_outlier"), _g("fp8_rows")
    g = torch.randn(n, generator=torch.Generator().manual_seed(0)) * std
    e4m3 = torch.float8_e4m3fn

    def rel(approx: torch.Tensor, exact: torch.Tensor) -> float:
        return ((approx - exact).norm() / exact.norm()).item()

    raw = g.to(e4m3).float()
    scaled = precision.from_fp8(*precision.to_fp8(g, e4m3))
    spiked = g.clone()
    spiked[0] = outlier
    rest = torch.ones(n, dtype=torch.bool)
    rest[0] = False
    per_tensor = precision.from_fp8(*precision.to_fp8(spiked, e4m3))
    per_row = precision.from_fp8(*precision.to_fp8(spiked.view(rows, -1), e4m3, "row")).flatten()
    cols = n // rows
    out = {
        "raw_zero": _entry(
            (raw == 0).float().mean().item(), f"{(raw == 0).float().mean().item():.1%}"
        ),
        "raw_rel": _entry(rel(raw, g), f"{rel(raw, g):.1%}"),
        "scaled_rel": _entry(rel(scaled, g), f"{rel(scaled, g):.1%}"),
        "tensor_rel": _entry(
            rel(per_tensor[rest], spiked[rest]), f"{rel(per_tensor[rest], spiked[rest]):.1%}"
        ),
        "tensor_zero": _entry(
            (per_tensor[rest] == 0).float().mean().item(),
            f"{(per_tensor[rest] == 0).float().mean().item():.1%}",
        ),
        "row_rel_others": _entry(
            rel(per_row[cols:], spiked[cols:]), f"{rel(per_row[cols:], spiked[cols:]):.1%}"
        ),
        "row_rel_outlier_row": _entry(
            rel(per_row[1:cols], spiked[1:cols]), f"{rel(per_row[1:cols], spiked[1:cols]):.1%}"
        ),
        "scaled_std": _entry(std * 448 / outlier, _sig(std * 448 / outlier, 2)),
    }
    return out


#: The formats of the ranges problem (8.2a): none is a dtype that ``dtype_info`` (or ``torch.finfo``)
#: covers, so the handout's docstrings and tests, which print the torch formats' constants (e4m3's 448,
#: fp16's 65504, bf16's 2**-7), do not answer it. name -> (exponent bits, mantissa bits, IEEE rules):
#: IEEE rules reserve the all-ones exponent for inf and NaN; the OCP microscaling (MX) element
#: formats reserve no code at all.
OTHER_FORMATS: dict[str, tuple[int, int, bool]] = {
    "tf32": (8, 10, True),
    "fp6_e3m2": (3, 2, False),
    "fp4_e2m1": (2, 1, False),
}


def format_values(exponent_bits: int, mantissa_bits: int, ieee: bool) -> list[float]:
    """Every finite non-negative value of a sign-exponent-mantissa format, decoded code by code.

    The decoder is independent of the closed forms the problem asks for (``eps = 2**-m``, ...):
    exponent field 0 is subnormal (``0.mantissa * 2**(1 - bias)``), any other field ``E`` is
    ``1.mantissa * 2**(E - bias)``; with ``ieee``, the all-ones field is inf/NaN and skipped.

    >>> sorted(set(format_values(2, 1, ieee=False)))
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    """
    bias = 2 ** (exponent_bits - 1) - 1
    out = []
    for field in range(2**exponent_bits):
        if ieee and field == 2**exponent_bits - 1:
            continue
        for mantissa in range(2**mantissa_bits):
            fraction = mantissa / 2**mantissa_bits
            if field == 0:
                out.append(fraction * 2.0 ** (1 - bias))
            else:
                out.append((1 + fraction) * 2.0 ** (field - bias))
    return out


def _format_entries(name: str, exponent_bits: int, mantissa_bits: int, ieee: bool) -> dict:
    values = sorted(set(format_values(exponent_bits, mantissa_bits, ieee)))
    bias = 2 ** (exponent_bits - 1) - 1
    normal = min(v for v in values if v >= 2.0 ** (1 - bias))
    eps = min(v for v in values if v > 1.0) - 1.0
    largest = values[-1]
    return {
        f"{name}_max": _entry(largest, f"{largest:g}" if largest < 1e6 else _sig(largest)),
        f"{name}_smallest_normal": _entry(normal, _pow2(normal)),
        f"{name}_eps": _entry(eps, _pow2(eps)),
    }


def _precision() -> dict[str, dict]:
    out = {}
    for name, (e, m, ieee) in OTHER_FORMATS.items():
        out.update(_format_entries(name, e, m, ieee))
    inc, steps = _g("increment"), _g("steps")
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
        acc = torch.zeros((), dtype=dtype)
        step = torch.tensor(inc, dtype=dtype)
        for _ in range(steps):
            acc = acc + step
        out[f"sum_{name}"] = _entry(acc.item(), _sig(acc.item(), 6 if name == "fp32" else 4))
    one = torch.tensor(1.0, dtype=torch.bfloat16)
    out["bf16_one_plus_update"] = _entry((one - _g("update")).item())
    out["bf16_70000"] = _entry(
        torch.tensor(70000.0).bfloat16().item(), f"{torch.tensor(70000.0).bfloat16().item():g}"
    )
    out["fp16_70000"] = _entry(
        str(torch.tensor(70000.0).half().item()), str(torch.tensor(70000.0).half().item())
    )
    out["fp16_1e-8"] = _entry(
        torch.tensor(1e-8).half().item(), f"{torch.tensor(1e-8).half().item():g}"
    )
    out["bf16_1e-8"] = _entry(
        torch.tensor(1e-8).bfloat16().item(), _sig(torch.tensor(1e-8).bfloat16().item())
    )
    out.update(_fp8())
    n = _g("measured_n")
    flops = accounting.matmul_flops(n, n, n)
    matmul_ms = flops / _g("measured_fp8_mm") * 1e3
    pass_ms = n * n * 4 / _g("hbm_bandwidth") * 1e3
    out["fp8_matmul_ms"] = _entry(matmul_ms, f"{matmul_ms:.3f} ms")
    out["fp8_pass_ms"] = _entry(pass_ms, f"{pass_ms:.3f} ms")
    out["fp8_eager_ms"] = _entry(
        flops / _g("measured_fp8_eager") * 1e3, f"{flops / _g('measured_fp8_eager') * 1e3:.2f} ms"
    )
    out["fp8_speedup_mm"] = _entry(
        _g("measured_fp8_mm") / _g("measured_fp8_bf16_same_run"),
        f"{_g('measured_fp8_mm') / _g('measured_fp8_bf16_same_run'):.2f}×",
    )
    out["fp8_speedup_eager"] = _entry(
        _g("measured_fp8_eager") / _g("measured_fp8_bf16_same_run"),
        f"{_g('measured_fp8_eager') / _g('measured_fp8_bf16_same_run'):.2f}×",
    )
    out["fp8_speedup_fused"] = _entry(
        _g("measured_fp8_fused") / _g("measured_fp8_bf16_same_run"),
        f"{_g('measured_fp8_fused') / _g('measured_fp8_bf16_same_run'):.2f}×",
    )
    overhead = flops / _g("measured_fp8_eager") * 1e3 - matmul_ms
    out["fp8_overhead_ms"] = _entry(overhead, f"{overhead:.2f} ms")
    out["fp8_overhead_passes"] = _entry(overhead / pass_ms, f"{overhead / pass_ms:.0f}")
    return out


def _tokenization(repo: Path) -> dict[str, dict]:
    train_path = repo / TRAIN_CORPUS
    train_text = train_path.read_text(encoding="utf-8")
    text = (repo / EVAL_CORPUS).read_text(encoding="utf-8")
    out = {
        "eval_bytes": _entry(len(text.encode("utf-8")), f"{len(text.encode('utf-8')):,}"),
        "eval_chars": _entry(len(text), f"{len(text):,}"),
        "ratio_char": _entry(
            compression_ratio(text, CharacterTokenizer().encode(text)),
            f"{compression_ratio(text, CharacterTokenizer().encode(text)):.2f}",
        ),
        "ratio_byte": _entry(
            compression_ratio(text, ByteTokenizer().encode(text)),
            f"{compression_ratio(text, ByteTokenizer().encode(text)):.2f}",
        ),
    }
    for v in VOCAB_SIZES:
        vocab, merges = train_bpe(train_path, v, [SPECIAL])
        tok = Tokenizer(vocab, merges, [SPECIAL])
        r = compression_ratio(text, tok.encode(text))
        out[f"ratio_bpe_{v}"] = _entry(r, f"{r:.2f}")
        out[f"merges_{v}"] = _entry(len(merges))
        if v == VOCAB_SIZES[-1]:
            r_train = compression_ratio(train_text, tok.encode(train_text))
            out["ratio_bpe_train"] = _entry(r_train, f"{r_train:.2f}")
    return out


def compute(repo: Path = REPO) -> dict[str, dict]:
    """Every reference answer, by name: ``{"value": exact, "text": as printed in the key}``.

    Computed once per repository and process (BPE training and the round-off loops take seconds);
    callers get a copy."""
    return copy.deepcopy(_compute(str(Path(repo).resolve())))


@functools.lru_cache(maxsize=4)
def _compute(repo: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for part in (_tensors(), _accounting(), _precision(), _tokenization(Path(repo))):
        overlap = set(out) & set(part)
        assert not overlap, f"answer names defined twice: {sorted(overlap)}"
        out.update(part)
    return out
