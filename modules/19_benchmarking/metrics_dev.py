# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, edge metrics: what a deployment decision needs to know
#
# An edge deployment is a budget problem. For each version of a model (fp32, fp16, bf16, int8): is it
# still right, fast enough (latency mean, std, p95), does it fit (bytes by dtype), will the battery last?
# Each figure carries its method: "12 mJ" off a RAPL counter and latency × a datasheet wattage differ.
#
# ```
# model ──to_precision()──> converted model (fp32 | fp16 | bf16 | int8 via torch.ao.quantization)
#   ├─ evaluate_accuracy  ├─ measure_latency_distribution  ├─ model_memory_mb  ├─ measure_energy
#   └──────────────────────────── collect_metrics ─> PerfMetrics (every figure with its method)
# ```

# %%
#| default_exp benchmarking.metrics

# %%
#| export
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Iterator

import torch
from torch import nn

from tinytorch.benchmarking.energy import measure_energy
from tinytorch.benchmarking.optimize import PRECISIONS, _is_quantized, cast_precision, quantize_int8
from tinytorch.benchmarking.results import (BenchmarkResult, CountResult, EvalData, MiB, ProportionResult, decide,
                                            state_dict_tensor_bytes, state_tensors, top1_correct)
from tinytorch.profiling.timing import adapt, check_device, positive_int, time_callable, time_model

# %%
import os

import numpy as np


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."


def expect_error(fn, *args, name: str, why: str = "", **kwargs) -> None:
    "Test helper: `fn(*args)` must raise a ValueError whose message starts with the argument `name` and a colon."
    try:
        fn(*args, **kwargs)
    except ValueError as e:
        assert ":" in str(e) and name in [s.strip() for s in str(e).partition(":")[0].split(",")], (f"{fn.__name__}"
            f"{args}: the error message should start with the argument it is about, {name!r}, then a colon, got: {e}")
        return
    raise AssertionError(f"{fn.__name__}{args}: expected a ValueError naming {name!r}, got none{why}")

# %% [markdown]
# ## Memory: count bytes, not parameters
#
# `sum(p.numel() for p in model.parameters())` counts *numbers*; a device stores *bytes*: 4 per
# float32, 2 per float16 or bfloat16, 1 per int8. int8 weights are not even `Parameter`s: they
# sit in packed tuples in the `state_dict`, with scales and zero points beside them.
# `_state_tensors` (given) yields every tensor of a model's state, the packed ones opened.
#
# **Your task (easy, 3 points).** Complete `model_memory_mb(model)`: the total bytes of every tensor in the model's
# state, in MB (2^20 bytes, as in memory datasheets): `state_dict_tensor_bytes` in MiB, counted by you here (the
# library's `memory_result` calls `results.state_dict_tensor_bytes`, the one definition of the quantity).
#
# - *Approach:* each tensor from `_state_tensors(model)` contributes `numel() × element_size()`
#   bytes; divide the sum by `MiB` (`results.MiB`).
# - *Example:* `nn.Linear(256, 256)` holds 65,792 float32 numbers = 263,168 bytes ≈ 0.251 MB;
#   the same layer in float16 is half of that.
# - *Hints:* `model.parameters()` misses buffers and quantized weights.

# %% nbgrader={"grade": false, "grade_id": "metrics-model-memory", "solution": true, "schema_version": 3}
#| export
_state_tensors = state_tensors  # results.state_tensors: the one walk over a model's state


def model_memory_mb(model: nn.Module) -> float:
    """`state_dict_tensor_bytes` in MiB: the model's state (parameters, buffers, int8 weights and scales) by dtype, a view
    of `memory_result`.

    >>> round(model_memory_mb(nn.Linear(256, 256)), 4)
    0.251
    """
    ### BEGIN SOLUTION
    total = sum(t.numel() * t.element_size() for t in _state_tensors(model))
    return total / MiB
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-metrics-model-memory", "locked": true, "points": 3, "schema_version": 3}
def test_unit_model_memory_mb():
    lin, expected = nn.Linear(256, 256), (256 * 256 + 256) * 4 / 2**20
    got = model_memory_mb(lin)
    hint = {expected / 4: " -- that counts numbers; a device stores bytes (element_size())",
            expected * 2**20 / 1e6: " -- that is 10^6 bytes; an MB here is 2^20 (MiB)"}.get(got, "")
    assert abs(got - expected) < 1e-12, f"Linear(256, 256) in float32: expected {expected} MB, got {got}{hint}"
    half = model_memory_mb(lin.to(torch.float16))
    assert abs(half - expected / 2) < 1e-12, f"float16 should halve the memory: expected {expected / 2}, got {half}"
    bn = nn.BatchNorm1d(10)  # 20 parameters + 20 float buffers + 1 int64 counter
    expected_bn, got_bn = (10 * 4 * 4 + 8) / 2**20, model_memory_mb(bn)
    assert abs(got_bn - expected_bn) < 1e-12, (f"BatchNorm1d(10): expected {expected_bn} MB, got {got_bn} -- buffers "
                                                "count too (running stats, num_batches_tracked)")
    ### BEGIN HIDDEN TESTS
    hidden_property("the model memory of another MLP, with or without bias")
    rng = grading_rng()
    a, b, c = (int(v) for v in rng.integers(2, 200, 3))
    bias = bool(rng.random() < 0.5)
    dtype, size = [(torch.float32, 4), (torch.float16, 2), (torch.bfloat16, 2), (torch.float64, 8)][int(rng.integers(0, 4))]
    model = nn.Sequential(nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU(), nn.Linear(b, c, bias=bias)).to(dtype)
    floats = a * b + b + 4 * b + b * c + (c if bias else 0)  # BatchNorm: weight, bias, running mean and var
    want, got = (floats * size + 8) / 2**20, model_memory_mb(model)  # + the int64 num_batches_tracked
    hint = (" -- buffers count too (running stats, num_batches_tracked)" if abs(got - (floats - 2 * b) * size / 2**20) < 1e-12
            else " -- each tensor has its own element size (element_size())" if abs(got - (floats * 4 + 8) / 2**20) < 1e-12
            else " -- that counts numbers; a device stores bytes" if abs(got - (floats + 1) / 2**20) < 1e-12 else "")
    assert abs(got - want) < 1e-12, (f"Linear({a}, {b}), BatchNorm1d({b}), Linear({b}, {c}, bias={bias}) in {dtype}: "
                                     f"expected {want} MB, got {got}{hint}")
    from tinytorch.benchmarking.results import state_dict_tensor_bytes as _ref_bytes
    q = quantize_int8(nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, c)), mode="dynamic")
    want, got = _ref_bytes(q) / 2**20, model_memory_mb(q)
    hint = " -- int8 weights are no Parameters: walk every tensor of the state" if got == 0 else ""
    assert abs(got - want) < 1e-12, (f"int8 (dynamic) Linear({a}, {b}), ReLU, Linear({b}, {c}): expected {want} MB "
                                     f"({a * b + b * c} int8 weights, float32 biases, scales and zero points), got {got}{hint}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_model_memory_mb()

# %% [markdown]
# ## Memory budgets
#
# A target gives hard limits ("fit in 1 MB"): report which budgets a footprint breaks, with keys
# that spell the budget so a report can print them: `{"violates_1mb": False, "violates_0.5mb": True}`.
#
# **Your task (easy, 3 points).** Complete `memory_violations(memory_mb, budgets)`.
#
# - *Approach:* check `memory_mb` is a finite number ≥ 0 and every budget a finite number > 0
#   (otherwise a `ValueError` whose message starts with the argument's name and a colon:
#   `budgets: expected ...`); then each budget gives the key
#   `f"violates_{budget:g}mb"` and the value `memory_mb > budget`.
# - *Example:* `memory_violations(0.75, [0.5, 1, 2])` →
#   `{"violates_0.5mb": True, "violates_1mb": False, "violates_2mb": False}`.
# - *Hints:* a model exactly at the budget fits; `bool` is an `int` in Python, reject it.

# %% nbgrader={"grade": false, "grade_id": "metrics-memory-violations", "solution": true, "schema_version": 3}
#| export
def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def memory_violations(memory_mb: float, budgets: Iterable[float]) -> dict[str, bool]:
    """Which memory budgets (MB) a footprint of `memory_mb` exceeds.

    >>> memory_violations(0.75, [0.5, 1, 2])
    {'violates_0.5mb': True, 'violates_1mb': False, 'violates_2mb': False}
    """
    ### BEGIN SOLUTION
    if not _is_number(memory_mb) or memory_mb < 0:
        raise ValueError(f"memory_mb: expected a finite number >= 0, got {memory_mb!r}")
    if isinstance(budgets, (int, float, str)):
        raise TypeError(f"budgets: expected a list of positive numbers (MB), got {budgets!r}")
    budgets = list(budgets)
    bad = [b for b in budgets if not _is_number(b) or b <= 0]
    if bad:
        raise ValueError(f"budgets: expected positive numbers (MB), got {bad}")
    return {f"violates_{b:g}mb": decide(memory_mb, "<=", b) == "fail" for b in budgets}  # an exact count: plainly
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-metrics-memory-violations", "locked": true, "points": 3, "schema_version": 3}
def test_unit_memory_violations():
    got, at = memory_violations(0.75, [0.5, 1, 2]), memory_violations(1.0, [1.0])
    expected = {"violates_0.5mb": True, "violates_1mb": False, "violates_2mb": False}
    for key in [*got, *at]:
        if key.endswith(".0mb"):
            raise AssertionError(f"the key must read {key.replace('.0mb', 'mb')}, got {key}: format a whole-number "
                                 "budget without its '.0' (e.g. f'{budget:g}')")
    assert got == expected, f"memory_violations(0.75, [0.5, 1, 2]): expected {expected}, got {got}"
    assert at == {"violates_1mb": False}, f"a model exactly at the budget fits: expected {{'violates_1mb': False}}, got {at}"
    assert memory_violations(0.0, []) == {}, "no budgets, no violations"
    for mb, budgets, arg in [(1.0, [0], "budgets"), (1.0, [-1], "budgets"), (1.0, ["1"], "budgets"),
                             (1.0, [float("nan")], "budgets"), (1.0, [True], "budgets"), (-1.0, [1], "memory_mb")]:
        expect_error(memory_violations, mb, budgets, name=arg,
                     why=" -- True is a bool, and a bool is an int in Python: reject it" if budgets[0] is True else "")
    ### BEGIN HIDDEN TESTS
    hidden_property("the violates_<N>mb flags for other footprints and budgets (whole and fractional MiB, at the budget)")
    rng = grading_rng()
    for _ in range(3):
        mb = round(float(rng.uniform(0.05, 64)), 3) if rng.random() < 0.7 else int(rng.integers(1, 64))
        pool = [mb, float(rng.integers(1, 64)), *(int(v) for v in rng.integers(1, 64, 2)),
                *(round(float(v), 3) for v in rng.uniform(0.01, 64, 3))]  # the footprint itself, whole numbers, decimals
        budgets = list({f"{v:g}": v for v in pool}.values())
        budgets = [budgets[i] for i in rng.permutation(len(budgets))]
        want = {f"violates_{v:g}mb": mb > v for v in budgets}
        got = memory_violations(mb, tuple(budgets) if rng.random() < 0.5 else budgets)
        assert got == want, f"memory_violations({mb!r}, {budgets}): expected {want}, got {got}"
    ok = round(float(rng.uniform(0.1, 10)), 2)
    for mb, budgets, arg in [(-round(float(rng.uniform(0.01, 10)), 3), [ok], "memory_mb"), (float("inf"), [ok], "memory_mb"),
                             (True, [ok], "memory_mb"), (ok, [ok, -round(float(rng.uniform(0.01, 10)), 3)], "budgets"),
                             (ok, [ok, 0.0], "budgets"), (ok, [float("inf"), ok], "budgets"), (ok, [ok, False], "budgets")]:
        expect_error(memory_violations, mb, budgets, name=arg)
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_memory_violations()

# %% [markdown]
# ## Real precision conversion
#
# Not every kernel exists in every dtype, so `to_precision` checks its conversion with one forward
# pass: a model that cannot run gives `UnsupportedPrecisionError`, never a silent float32 run.

# %%
#| export
_FLOAT_DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_all_ = ["check_device"]  # the one device check lives in the timing core (re-exported here)


class UnsupportedPrecisionError(RuntimeError):
    "A converted model cannot run on the requested device (the original error is chained)."


def check_precision(precision: str) -> str:
    "Return `precision` if it is one of `PRECISIONS`, else raise a ValueError listing them."
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    return precision


def model_precision(model: nn.Module) -> str:
    "The precision a torch model runs in: 'int8' for a quantized model, else 'fp32', 'fp16' or 'bf16'."
    if _is_quantized(model):
        return "int8"
    dtype = adapt(model).input_dtype()
    if dtype not in _FLOAT_DTYPE_NAMES:
        raise ValueError(f"model: parameters in {dtype}, expected float32, float16 or bfloat16")
    return _FLOAT_DTYPE_NAMES[dtype]


def _first_input(example_input: Any) -> torch.Tensor | None:
    if example_input is None or isinstance(example_input, torch.Tensor):
        return example_input
    for item in example_input:  # a loader or a list of batches: its first input
        return item[0] if isinstance(item, (tuple, list)) else item
    raise ValueError("example_input: expected a tensor or a non-empty iterable of batches")


def to_precision(model: nn.Module, precision: str, device: str | torch.device = "cpu", *,
                 calibration_data: Any = None, example_input: Any = None, int8_mode: str | None = None) -> nn.Module:
    """A copy of `model` in `precision` on `device` (a model already in it as is): fp16 / bf16 by
    `cast_precision`; int8 (CPU) by `quantize_int8`, "static" (on `calibration_data`) with convolutions,
    else "dynamic" (or `int8_mode`). With `example_input` (a tensor or a loader) it runs once.

    >>> to_precision(nn.Linear(8, 2), "bf16").weight.dtype
    torch.bfloat16
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    check_precision(precision)
    dev = check_device(device)
    if precision == "int8" and dev.type != "cpu":
        raise ValueError(f"device: int8 models from torch.ao.quantization run on cpu only, got {device!r}")
    if model_precision(model) == precision:
        converted = model if precision == "int8" else model.to(dev)
    elif precision == "int8":
        if model_precision(model) != "fp32":
            raise ValueError(f"model: int8 quantization starts from a float32 model, got {model_precision(model)}")
        mode = int8_mode or ("static" if any(isinstance(m, _CONV_TYPES) for m in model.modules()) else "dynamic")
        if mode == "static" and calibration_data is None:
            raise ValueError("calibration_data: static int8 of a model with convolutions needs calibration inputs "
                             "(a DataLoader or a list of batches) from a split other than the evaluation data "
                             "(e.g. digits_loader('train')), got None")
        converted = quantize_int8(model, mode=mode, calibration_data=calibration_data)
    else:
        converted = cast_precision(model, precision).to(dev)
    x = _first_input(example_input)
    if x is not None:
        a = adapt(converted)
        try:
            with a.inference():
                a.forward(a.to_input(x))
        except (RuntimeError, NotImplementedError) as e:
            raise UnsupportedPrecisionError(
                f"precision {precision} is not supported for this model on {dev.type}: {e}") from e
    return converted

# %% [markdown]
# ## Accuracy and latency
#
# Accuracy: the library's one top-1 evaluation. Latency: an interactive device cares about the slow
# calls (a p95 of 40 ms misses a 25 fps deadline one frame in twenty even with a 20 ms mean), so
# `measure_latency_distribution` gives mean, std and p95 of `repeats` timing-core samples.

# %%
#| export
def _batches(loader: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    n = 0
    for item in loader:
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise ValueError(f"loader: expected batches of (inputs, labels), got {type(item).__name__}; accuracy needs labels")
        n += 1
        yield item[0], item[1]
    if n == 0:
        raise ValueError("loader: expected at least one (inputs, labels) batch, got none")


def memory_result(model: nn.Module) -> CountResult:
    "The state-dict tensor bytes of `model` (integers) as a `CountResult`; `memory_result(nn.Linear(2, 2)).median` is 24."
    n = state_dict_tensor_bytes(model)
    return CountResult("memory", [n], unit="bytes", metadata={"bytes": n, "method": "measured: state-dict tensors x element size"})


def _top1_result(converted: Any, data: EvalData) -> ProportionResult:
    return ProportionResult("accuracy", top1_correct(converted, data), unit="fraction",
                            metadata={"method": "measured: top-1 over every labelled batch of loader"})


def accuracy_result(model: nn.Module, loader: Iterable, device: str | torch.device = "cpu", precision: str = "fp32",
                    *, calibration_data: Any = None) -> ProportionResult:
    "Top-1 hits of `model` in `precision` on the labelled batches of `loader`, a `ProportionResult` (e.g. `.mean`, `.ci_lower`)."
    converted = to_precision(model, precision, device, calibration_data=calibration_data)
    return _top1_result(converted, EvalData(list(_batches(loader)), "loader"))


def evaluate_accuracy(model: nn.Module, loader: Iterable, device: str | torch.device = "cpu", precision: str = "fp32",
                      *, calibration_data: Any = None) -> float:
    "Top-1 accuracy (0..1): the original course code's float view of `accuracy_result` (same arguments), its `.mean`."
    return accuracy_result(model, loader, device, precision, calibration_data=calibration_data).mean


def latency_mean_ms(model: Any, input_tensor: Any, runs: int = 100, warmup: int = 10) -> float:
    "Mean ms of one forward pass over `runs` samples, `latency_result(...).mean`; the seed's `measure_latency` is this function."
    return latency_result(model, input_tensor, repeats=runs, warmup=warmup).mean


def latency_result(model: Any, input_tensor: Any, repeats: int = 30, runs: int = 1, warmup: int = 10) -> BenchmarkResult:
    "Per-call ms, a `BenchmarkResult` of `repeats` samples of >= `runs` calls (`latency_result(nn.Linear(4, 2), torch.randn(1, 4)).count`: 30)."
    if positive_int(runs, "runs") == 1:
        samples = time_model(model, input_tensor, warmup=warmup, samples=repeats)
    else:  # each timed block holds at least `runs` calls
        a = adapt(model)
        x = a.to_input(input_tensor)
        with a.inference():
            a.forward(x)

            def run_block() -> None:
                for _ in range(runs):
                    a.forward(x)
            samples = time_callable(run_block, warmup=warmup, samples=repeats, sync=a.sync, device=str(a.device))
    return BenchmarkResult("latency", [v / runs for v in samples.per_call_ms], unit="ms",
                           metadata=dict(samples.metadata(), method="measured: timing core"))


def measure_latency_distribution(model: Any, input_tensor: Any, repeats: int = 30, runs: int = 1,
                                 warmup: int = 10) -> tuple[float, float, float]:
    """(mean, std, p95) ms per forward pass: the original course code's tuple view of `latency_result` (same arguments).

    >>> mean, std, p95 = measure_latency_distribution(nn.Linear(16, 4), torch.randn(1, 16), repeats=10)
    """
    r = latency_result(model, input_tensor, repeats, runs, warmup)
    return r.mean, r.std, r.p95


measure_latency = latency_mean_ms  # the original course code's name (results.SEED_ALIASES): the mean
# %% [markdown]
# ## Putting it together: `collect_metrics`
#
# One call: convert; accuracy on every labelled batch of `loader`; latency on the first
# `batch_size` samples; memory of the converted state; energy per call from a counter (RAPL),
# else `latency × power_watts` labelled *estimated*, else `None` with the reason.
# `latency_multiplier` gives a rough target-device figure (measured latency × the factor); a
# host energy counter says nothing about that target, so energy is then only estimated.
#
# **Your task (hard, 8 points).** Complete `collect_metrics` from the latency on: latency, throughput, memory and energy of the converted model, each with its method, returned as a `PerfMetrics`.
#
# - *TODO:* given: `x` (the first `batch_size` samples), `converted`, `acc_result`, `methods`,
#   `reasons`. Time with `latency_result(converted, x, repeats)`; fill every `PerfMetrics`
#   field: `methods` per figure ("measured: …", "derived: …", "estimated: …"; a scaled latency's
#   names `latency_scaled_by=<k>`), `conditions` (timing metadata, unscaled `measured_latency_mean_ms`,
#   `measured_latency_p95_ms`), `results` (accuracy, unscaled latency, memory as a `CountResult`).
# - *Approach:* latency first (each statistic times the multiplier), then throughput, memory, and
#   energy by the three cases above (`measure_energy` on one inference, or the estimate yourself).
# - *Example:* 0.04 ms for a batch of 8 is 200,000 samples/s; ×10 it is 0.4 ms, and without `power_watts` no energy
#   (`None`, its reason naming `power_watts`).
# - *Hints:* what unit is the latency in, and how many samples does one call process? Which model
#   does the device hold? Run the inference for `measure_energy` as `latency_result` does.
# - *Needs first:* `model_memory_mb`.

# %% nbgrader={"grade": false, "grade_id": "metrics-collect", "solution": true, "schema_version": 3}
#| export
@dataclass
class PerfMetrics:
    """One model in one precision on one device, a view of `results` (the measurements); `methods`: how each figure
    was obtained, `reasons`: why one is None. `latency_mean_ms`: the mean per call of `batch_size` samples times
    `latency_scaled_by` (`latency_ms` is its seed alias, always equal); `memory_mb`: `memory_bytes` (integers) in MiB."""

    accuracy: float | None
    latency_ms: float
    latency_std_ms: float
    latency_p95_ms: float
    throughput_sps: float
    memory_mb: float
    energy_j: float | None
    latency_median_ms: float | None = None
    precision: str = "fp32"
    device: str = "cpu"
    batch_size: int = 1
    latency_scaled_by: float = 1.0
    methods: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, Any] = field(default_factory=dict)
    results: dict[str, BenchmarkResult] = field(default_factory=dict, repr=False)
    latency_mean_ms = property(lambda self: self.latency_ms, doc="Mean latency (ms); `latency_ms` is its seed alias.")
    memory_bytes = property(lambda self: int(self.results["memory"].mean) if "memory" in self.results else None)

    def to_dict(self) -> dict[str, Any]:
        "All fields and `latency_mean_ms`, `memory_bytes`, JSON-ready (each underlying result as its `to_dict()`)."
        return {**{k: v for k, v in asdict(self).items() if k != "results"}, "latency_mean_ms": self.latency_mean_ms,
                "memory_bytes": self.memory_bytes, "results": {k: r.to_dict() for k, r in self.results.items()}}


def collect_metrics(model: nn.Module, loader: Iterable, device: str | torch.device = "cpu",
                    power_watts: float | None = None, precision: str = "fp32", latency_multiplier: float = 1.0,
                    repeats: int = 30, *, batch_size: int = 1, calibration_data: Any = None,
                    calibration_split: str | None = None) -> PerfMetrics:
    """Measure accuracy, latency (mean/std/p95), throughput, memory and energy of `model` in `precision`.

    `calibration_data` (static int8 of conv models) must come from a split other than `loader`;
    `calibration_split` names it in `methods["int8_calibration"]`.
    """
    dev = check_device(device)
    if not _is_number(latency_multiplier) or latency_multiplier <= 0:
        raise ValueError(f"latency_multiplier: expected a positive number, got {latency_multiplier!r}")
    if power_watts is not None and (not _is_number(power_watts) or power_watts <= 0):
        raise ValueError(f"power_watts: expected a positive number of watts or None, got {power_watts!r}")
    batch_size = positive_int(batch_size, "batch_size")
    data = EvalData(list(_batches(loader)), "loader")
    x = data.first_samples(batch_size)
    if len(x) < batch_size:
        raise ValueError(f"batch_size: {batch_size} exceeds the {len(x)} samples in loader")
    converted = to_precision(model, precision, dev, calibration_data=calibration_data, example_input=x)
    methods, reasons = {}, {}
    q = getattr(converted, "tinytorch_quantization", None)
    if precision == "int8":
        methods["int8_path"] = q["path"] if q is not None else "given int8 model"
    if converted is not model and q is not None and q.get("mode") == "static":
        methods["int8_calibration"] = (f"static int8 calibrated on {calibration_split or 'caller-supplied calibration_data'}"
                                       " (not the evaluation loader)")

    acc_result = _top1_result(converted, data)  # the one accuracy result, also behind accuracy_result
    methods["accuracy"] = acc_result.method
    ### BEGIN SOLUTION
    result = latency_result(converted, x, repeats)
    k = float(latency_multiplier)
    scaled = f" x {k:g} (latency_scaled_by={k:g})" if k != 1 else ""
    for key in ("latency_ms", "latency_std_ms", "latency_p95_ms", "latency_median_ms"):
        methods[key] = f"measured: timing core, {result.count} samples of batch {batch_size}{scaled}"
    mean_ms = result.mean * k
    methods["throughput_sps"] = f"derived: batch_size / mean latency{' (scaled)' if k != 1 else ''}"
    mem_result = memory_result(converted)  # integer bytes; memory_mb is their view in MiB
    memory, methods["memory_mb"] = mem_result.mean / MiB, mem_result.method

    energy_j: float | None = None
    if k == 1:
        a = adapt(converted)
        xi = a.to_input(x)
        with a.inference():
            em = measure_energy(lambda: a.forward(xi), power_watts=power_watts, latency_s=result.mean / 1e3,
                                device=str(dev), sync=a.sync)
        energy_j = em.joules_per_call
        if energy_j is None:
            reasons["energy_j"] = em.reason or "no energy counter and no power_watts"
        else:
            methods["energy_j"] = em.method
    elif power_watts is not None:
        energy_j = mean_ms / 1e3 * power_watts
        methods["energy_j"] = f"estimated: mean latency x power (latency scaled by {k:g}, {power_watts:g} W)"
    else:
        reasons["energy_j"] = ("latency is scaled to a target device, where a host energy counter does not "
                               "apply; give power_watts for an estimate")
    return PerfMetrics(
        accuracy=acc_result.mean, latency_ms=mean_ms, latency_std_ms=result.std * k, latency_p95_ms=result.p95 * k,
        throughput_sps=batch_size / (mean_ms / 1e3), memory_mb=memory, energy_j=energy_j,
        latency_median_ms=result.median * k, precision=precision, device=str(dev), batch_size=batch_size,
        latency_scaled_by=k, methods=methods, reasons=reasons,
        conditions=dict(result.metadata, measured_latency_mean_ms=result.mean, measured_latency_p95_ms=result.p95),
        results={"accuracy": acc_result, "latency": result, "memory": mem_result})
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-metrics-collect", "locked": true, "points": 8, "schema_version": 3}
def test_unit_collect_metrics():
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader

    def near(got, want):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-9)
    model, test, train = default_digits_model(), digits_loader("test", 64), digits_loader("train", 64)
    m = collect_metrics(model, test, repeats=5, batch_size=8, power_watts=10.0)
    lat, tp = m.results.get("latency"), m.throughput_sps  # the measured samples (unscaled), a BenchmarkResult
    assert isinstance(lat, BenchmarkResult), f"results['latency']: expected the BenchmarkResult timed, got {lat!r}"
    hint = (" -- that is per millisecond: the latency is in ms" if near(tp, 8 / lat.mean) else
            " -- that is calls per second; a call processes 8 samples" if near(tp, 1e3 / lat.mean) else "")
    assert near(tp, 8e3 / lat.mean), f"batch 8, mean {lat.mean:.4g} ms: expected throughput_sps {8e3 / lat.mean:.6g}, got {tp!r}{hint}"
    got, want = (m.latency_ms, m.latency_std_ms, m.latency_p95_ms, m.latency_median_ms), (lat.mean, lat.std, lat.p95, lat.median)
    assert all(map(near, got, want)), f"expected latency mean, std, p95, median {want}, got {got}"
    q = collect_metrics(model, test, precision="int8", repeats=3, calibration_data=train)
    want = model_memory_mb(to_precision(model, "int8", calibration_data=train))
    hint = " -- that is the float32 model's: the device holds the converted one" if near(q.memory_mb, m.memory_mb) else ""
    assert near(q.memory_mb, want) and isinstance(q.results.get("memory"), CountResult), \
        f"int8: expected memory_mb {want:.6g} and results['memory'] a CountResult, got {q.memory_mb!r}, {q.results.get('memory')!r}{hint}"
    for power in (None, 5.0):
        s = collect_metrics(model, test, repeats=3, latency_multiplier=10.0, power_watts=power)
        raw = s.results["latency"]
        got, want = (s.latency_ms, s.latency_p95_ms, s.latency_scaled_by), (10 * raw.mean, 10 * raw.p95, 10.0)
        assert all(map(near, got, want)) and "latency_scaled_by=10" in s.methods.get("latency_ms", ""), \
            f"latency_multiplier 10: expected latency, p95, scaled_by {want} and a method naming latency_scaled_by=10, got {got}, {s.methods}"
        hint = (" -- a host energy counter says nothing about the target device" if power is None else
                " -- the estimate uses the scaled latency" if near(s.energy_j, raw.mean / 1e3 * power) else "")
        ok = "power_watts" in s.reasons.get("energy_j", "") if power is None else near(s.energy_j, s.latency_ms / 1e3 * power)
        assert ok and (s.energy_j is None) == (power is None), (f"latency_multiplier 10, power_watts {power}: expected energy_j "
                                                                f"{'None, a reason naming power_watts' if power is None else 'scaled latency x power'}, got {s.energy_j!r}{hint}")
    ### BEGIN HIDDEN TESTS
    hidden_property("the collected metrics of another model and data set")
    rng = grading_rng()
    f, k = int(rng.integers(4, 33)), int(rng.integers(3, 11))
    lin = nn.Linear(f, k)
    with torch.no_grad():  # whole-number weights, distinct fractional biases: exact logits, no ties in the argmax
        lin.weight.copy_(torch.as_tensor(rng.integers(-3, 4, (k, f)), dtype=torch.float32))
        lin.bias.copy_(torch.arange(k, dtype=torch.float32) / 64)
    loader = [(torch.as_tensor(rng.integers(0, 5, (int(n), f)), dtype=torch.float32), torch.as_tensor(rng.integers(0, k, int(n))))
              for n in rng.integers(4, 17, int(rng.integers(2, 4)))]
    with torch.no_grad():
        hits = torch.cat([lin(x).argmax(1) == y for x, y in loader])
    acc = int(hits.sum()) / hits.numel()
    batch, repeats, scale = int(rng.integers(1, 9)), int(rng.integers(3, 6)), round(float(rng.uniform(1.5, 40)), 1)
    power = round(float(rng.uniform(0.5, 30)), 2)
    for watts in (None, power):
        s = collect_metrics(lin, loader, power_watts=watts, latency_multiplier=scale, repeats=repeats, batch_size=batch)
        what = f"Linear({f}, {k}), batch {batch}, repeats {repeats}, latency_multiplier {scale}, power_watts {watts}"
        raw = s.results.get("latency")
        assert isinstance(raw, BenchmarkResult) and raw.count == repeats, \
            f"{what}: expected results['latency'] the BenchmarkResult of {repeats} timed samples, got {raw!r}"
        got = (s.latency_ms, s.latency_std_ms, s.latency_p95_ms, s.latency_median_ms, s.latency_scaled_by)
        want = (scale * raw.mean, scale * raw.std, scale * raw.p95, scale * raw.median, scale)
        assert all(map(near, got, want)), f"{what}: expected latency mean, std, p95, median, scaled_by {want}, got {got}"
        tp, want = s.throughput_sps, batch * 1e3 / (scale * raw.mean)
        hint = (" -- that is per millisecond: the latency is in ms" if near(tp, want / 1e3) else
                f" -- that is calls per second; a call processes {batch} samples" if batch > 1 and near(tp, want / batch) else
                " -- the throughput follows the scaled latency" if near(tp, want * scale) else "")
        assert near(tp, want), f"{what}: expected throughput_sps {want:.6g}, got {tp!r}{hint}"
        got = (s.memory_mb, s.accuracy, s.batch_size, s.precision, s.device)
        want = ((f * k + k) * 4 / 2**20, acc, batch, "fp32", "cpu")
        assert all(map(near, got[:2], want[:2])) and got[2:] == want[2:] and isinstance(s.results.get("memory"), CountResult), (
            f"{what}: expected memory_mb, accuracy, batch_size, precision, device {want} and results['memory'] a "
            f"CountResult, got {got}, {s.results.get('memory')!r}")
        got = (s.conditions.get("measured_latency_mean_ms"), s.conditions.get("measured_latency_p95_ms"))
        assert all(map(near, got, (raw.mean, raw.p95))), \
            f"{what}: expected conditions measured_latency_mean_ms, _p95_ms (unscaled) {(raw.mean, raw.p95)}, got {got}"
        prefixes = {"latency_ms": "measured", "latency_p95_ms": "measured", "throughput_sps": "derived", "memory_mb": "measured"}
        bad = {key: s.methods.get(key) for key, start in prefixes.items() if not str(s.methods.get(key)).startswith(start)}
        assert not bad and f"latency_scaled_by={scale:g}" in s.methods["latency_ms"], (f"{what}: expected methods "
            f"{prefixes} (by their first word), the latency's naming latency_scaled_by={scale:g}, got {s.methods}")
        if watts is None:
            assert s.energy_j is None and "power_watts" in s.reasons.get("energy_j", ""), (f"{what}: expected energy_j "
                f"None and a reason naming power_watts, got {s.energy_j!r}, {s.reasons} -- a host energy counter says "
                "nothing about the target device")
        else:
            want = scale * raw.mean / 1e3 * watts
            hint = " -- the estimate uses the scaled latency" if near(s.energy_j, raw.mean / 1e3 * watts) else ""
            assert near(s.energy_j, want) and str(s.methods.get("energy_j")).startswith("estimated"), (f"{what}: expected "
                f"energy_j {want:.6g} (scaled latency x power), method 'estimated: ...', got {s.energy_j!r}, "
                f"{s.methods.get('energy_j')!r}{hint}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_collect_metrics()

# %% [markdown]
# ## Everything together: the digits CNN in every precision (int8 calibrated on the *train* split)

# %%
def test_module():
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader
    model, test = default_digits_model(), digits_loader("test", 64)
    by_precision = {p: collect_metrics(model, test, precision=p, repeats=10, power_watts=15.0,
                                       calibration_data=digits_loader("train", 64), calibration_split="digits train split")
                    for p in PRECISIONS}
    for p, m in by_precision.items():
        print(f"{p:5s} acc {m.accuracy:.2%}  latency (mean) {m.latency_mean_ms * 1e3:7.1f} µs (p95 {m.latency_p95_ms * 1e3:7.1f})  "
              f"{m.memory_mb * 1024:6.2f} KB  energy {m.energy_j * 1e6:.1f} µJ ({m.methods['energy_j']})")
        assert m.energy_j is not None and m.methods["energy_j"].startswith(("measured", "estimated")), m.methods
    base, q = by_precision["fp32"], by_precision["int8"]
    assert base.accuracy > 0.9 and q.accuracy >= base.accuracy - 0.03, f"int8 {q.accuracy:.3f} vs fp32 {base.accuracy:.3f}"
    assert q.memory_mb < 0.6 * base.memory_mb, f"int8 should shrink memory: {base.memory_bytes} -> {q.memory_bytes} bytes"


if __name__ == "__main__":
    test_module()
