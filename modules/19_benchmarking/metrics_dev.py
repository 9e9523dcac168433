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
# An edge deployment is a budget problem. A microcontroller has a few hundred kilobytes of
# RAM and a fixed power budget; a phone app has a latency target and a battery. Before a model
# ships, someone has to answer, for each candidate version of it (fp32, fp16, bf16, int8):
#
# | question | metric | how we get it |
# |---|---|---|
# | is it still right? | accuracy | measured on labelled data, after conversion |
# | is it fast enough? | latency mean / std / p95 (ms), throughput (samples/s) | measured by the timing core |
# | does it fit? | memory (MB) | the state dict's tensors, by their real dtype sizes |
# | will the battery last? | energy (J) | an energy counter where one exists, else latency × power, labelled estimated |
#
# ```
# model ──to_precision()──> converted model (fp32 | fp16 | bf16 | int8 via torch.ao.quantization)
#                                  │
#        ┌─────────────────────────┼───────────────────────────┬────────────────────────┐
#  evaluate_accuracy         measure_latency_distribution   model_memory_mb        measure_energy
#  (adapter, labels)         (timing core, raw samples)     (state dict bytes)     (counter or estimate)
#        └─────────────────────────┴──────────── PerfMetrics ┴────────────────────────┘
#                                           (every figure with how it was obtained)
# ```
#
# Everything here is measured **after** conversion: an int8 model's accuracy is the int8
# model's accuracy, not the float model's. And every figure carries its method, because "12 mJ"
# read off a RAPL counter and "12 mJ" computed as latency × a datasheet wattage are different
# claims.

# %%
#| default_exp benchmarking.metrics

# %%
#| export
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import torch
from torch import nn

from tinytorch.benchmarking.results import (BenchmarkResult, CountResult, EvalData, ProportionResult,
                                            state_dict_tensor_bytes, state_tensors, top1_correct)
from tinytorch.benchmarking.energy import measure_energy
from tinytorch.benchmarking.optimize import PRECISIONS, cast_precision, quantize_int8
from tinytorch.profiling.timing import adapt, check_device, time_callable, time_model

# %% [markdown]
# ## Memory: count bytes, not parameters
#
# `sum(p.numel() for p in model.parameters())` counts *numbers*. A device stores *bytes*, and
# bytes depend on the dtype: 4 per float32, 2 per float16 or bfloat16, 1 per int8. After int8
# quantization the weights are not even `Parameter`s any more: they sit in quantized tensors
# and packed-parameter tuples inside the `state_dict`, with per-channel scales (float64) and
# zero points (int64) beside them. So the honest memory figure walks the whole `state_dict`,
# opens the packed tuples, and adds `numel × element_size` for every tensor it finds.
#
# For the digits CNN: 6,090 float32 numbers = 24,360 bytes = 0.0232 MB (MB = 2^20 bytes here,
# as in memory datasheets).
#
# `_state_tensors` (given) yields every tensor of a model's state, including the scales and
# zero points of quantized tensors.

# %%
#| export
MB = 2**20


_state_tensors = state_tensors  # results.state_tensors: the one walk over a model's state

# %% [markdown]
# **Your task.** Complete `model_memory_mb(model)`: the total bytes of every tensor in the
# model's state, in MB (2^20 bytes).
#
# - *Approach:* loop over `_state_tensors(model)`; each tensor contributes
#   `numel() × element_size()` bytes; divide the sum by `MB`.
# - *Example:* `nn.Linear(256, 256)` holds 65,792 float32 numbers = 263,168 bytes ≈ 0.251 MB;
#   the same layer in float16 is half of that.
# - *Hints:* do not use `model.parameters()` (it misses buffers and quantized weights).

# %% nbgrader={"grade": false, "grade_id": "metrics-model-memory", "solution": true, "schema_version": 3}
#| export
def model_memory_mb(model: nn.Module) -> float:
    """Memory held by a model's state (parameters, buffers, int8 weights with their scales), in MB.

    Sizes come from each tensor's real dtype, so a float16 model reports half of its float32
    copy and an int8-quantized layer about a quarter.

    >>> round(model_memory_mb(nn.Linear(256, 256)), 4)
    0.251
    """
    ### BEGIN SOLUTION
    total = sum(t.numel() * t.element_size() for t in _state_tensors(model))
    return total / MB
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-metrics-model-memory", "locked": true, "points": 3, "schema_version": 3}
def test_unit_model_memory_mb():
    lin = nn.Linear(256, 256)
    expected = (256 * 256 + 256) * 4 / 2**20
    got = model_memory_mb(lin)
    assert abs(got - expected) < 1e-12, f"Linear(256, 256) in float32: expected {expected} MB, got {got}"
    half = model_memory_mb(lin.to(torch.float16))
    assert abs(half - expected / 2) < 1e-12, f"float16 should halve the memory: expected {expected / 2}, got {half}"
    bn = nn.BatchNorm1d(10)  # 20 parameters + 20 float buffers + 1 int64 counter
    expected_bn = (10 * 4 * 4 + 8) / 2**20
    assert abs(model_memory_mb(bn) - expected_bn) < 1e-12, "buffers count too (running stats, num_batches_tracked)"


if __name__ == "__main__":
    test_unit_model_memory_mb()

# %% [markdown]
# ## Memory budgets
#
# A deployment target gives a hard limit: "the model must fit in 1 MB", "in 256 KB". Given a
# measured footprint and a list of budgets, report which ones it breaks. The keys spell the
# budget: `{"violates_1mb": False, "violates_0.5mb": True}`, so a report can print them as is.
#
# **Your task.** Complete `memory_violations(memory_mb, budgets)`.
#
# - *Approach:* check `memory_mb` is a finite number ≥ 0 and every budget a finite number > 0
#   (a `ValueError` naming the argument otherwise); then for each budget the key is
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
    return {f"violates_{b:g}mb": memory_mb > b for b in budgets}
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-metrics-memory-violations", "locked": true, "points": 3, "schema_version": 3}
def test_unit_memory_violations():
    got = memory_violations(0.75, [0.5, 1, 2])
    expected = {"violates_0.5mb": True, "violates_1mb": False, "violates_2mb": False}
    for key in got:
        if key not in expected and key.endswith(".0mb"):
            raise AssertionError(f"the key must read {key.replace('.0mb', 'mb')}, got {key}: format a whole-number "
                                 "budget without its '.0' (e.g. f'{budget:g}')")
    assert got == expected, f"memory_violations(0.75, [0.5, 1, 2]): expected {expected}, got {got}"
    assert memory_violations(1.0, [1.0]) == {"violates_1mb": False}, "a model exactly at the budget fits"
    assert memory_violations(0.0, []) == {}, "no budgets, no violations"
    for bad_budgets in ([0], [-1], ["1"], [float("nan")], [True]):
        try:
            memory_violations(1.0, bad_budgets)
            raise AssertionError(f"budgets={bad_budgets} should raise ValueError")
        except ValueError as e:
            assert "budgets" in str(e), f"the error should name 'budgets': {e}"
    try:
        memory_violations(-1.0, [1])
        raise AssertionError("a negative memory_mb should raise ValueError")
    except ValueError as e:
        assert "memory_mb" in str(e), f"the error should name 'memory_mb': {e}"


if __name__ == "__main__":
    test_unit_memory_violations()

# %% [markdown]
# ## Real precision conversion
#
# `to_precision` turns a float32 model into the version a device would run:
#
# | precision | conversion | what shrinks |
# |---|---|---|
# | `fp32` | a copy | nothing (the baseline) |
# | `fp16`, `bf16` | `cast_precision` (parameters, buffers; inputs are cast by the adapter) | memory ½ |
# | `int8` | `quantize_int8`: **static** (calibrated) when the model has convolutions, **dynamic** (Linear only) otherwise | weights ¼ |
#
# Not every CPU kernel exists in every dtype. Rather than assume, `to_precision` runs one
# forward pass on an example input: if the converted model raises, you get
# `UnsupportedPrecisionError("precision fp16 is not supported for this model on cpu: …")` with
# torch's own message, never a silent float32 run. int8 kernels from `torch.ao.quantization`
# are CPU kernels, so `int8` on another device is refused up front.

# %%
#| export
_FLOAT_DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


class UnsupportedPrecisionError(RuntimeError):
    "A converted model cannot run on the requested device (the original error is chained)."


def check_precision(precision: str) -> str:
    """Return `precision` if it is one of `PRECISIONS`, else raise a ValueError listing them.

    >>> check_precision("bf16")
    'bf16'
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    return precision


_all_ = ["check_device"]  # the one device check lives in the timing core (re-exported here)


def model_precision(model: nn.Module) -> str:
    """The precision a torch model runs in: "int8" for a quantized model, else its float dtype.

    >>> model_precision(nn.Linear(2, 2).half())
    'fp16'
    """
    if getattr(model, "tinytorch_quantization", None) is not None or any(
        ".quantized" in type(m).__module__ for m in model.modules()
    ):
        return "int8"
    dtype = adapt(model).input_dtype()
    if dtype not in _FLOAT_DTYPE_NAMES:
        raise ValueError(f"model: parameters in {dtype}, expected float32, float16 or bfloat16")
    return _FLOAT_DTYPE_NAMES[dtype]


def _first_input(example_input: Any) -> torch.Tensor | None:
    if example_input is None:
        return None
    if isinstance(example_input, torch.Tensor):
        return example_input
    for item in example_input:  # a loader or a list of batches: its first input
        return item[0] if isinstance(item, (tuple, list)) else item
    raise ValueError("example_input: expected a tensor or a non-empty iterable of batches")


def to_precision(
    model: nn.Module,
    precision: str,
    device: str | torch.device = "cpu",
    *,
    calibration_data: Any = None,
    example_input: Any = None,
    int8_mode: str | None = None,
) -> nn.Module:
    """A copy of `model` converted to `precision` and moved to `device`, checked by one forward pass.

    - fp32 / fp16 / bf16: `cast_precision` (the original model is not changed).
    - int8: `quantize_int8`; `int8_mode` defaults to "static" (calibrated on `calibration_data`)
      when the model has convolutions, "dynamic" otherwise. CPU only.
    - A model already in `precision` is returned as is (moved to `device`).
    - With `example_input` (a tensor, or a loader whose first batch is used) the converted model
      runs once; if it raises, `UnsupportedPrecisionError` says which precision and device failed.

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
            raise ValueError("calibration_data: static int8 quantization of a model with convolutions needs "
                             "calibration inputs (a DataLoader or a list of batches), got None")
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

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader

    _base = default_digits_model()
    for _p in PRECISIONS:
        _m = to_precision(_base, _p, calibration_data=digits_loader("train", 64), example_input=digits_loader("test", 8))
        print(f"{_p:5s} {model_memory_mb(_m) * 1024:7.2f} KB  runs as {model_precision(_m)}")

# %%
def test_unit_to_precision():
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    x = torch.randn(4, 64)
    for p, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        m = to_precision(net, p, example_input=x)
        assert next(m.parameters()).dtype == dtype and model_precision(m) == p
        assert abs(model_memory_mb(m) * 2 - model_memory_mb(net)) < 1e-12, f"{p} halves memory"
    assert next(net.parameters()).dtype == torch.float32, "the original model must stay float32"
    q = to_precision(net, "int8", example_input=x)
    assert model_precision(q) == "int8" and q.tinytorch_quantization["mode"] == "dynamic"
    conv = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    try:
        to_precision(conv, "int8")
        raise AssertionError("static int8 without calibration data must fail")
    except ValueError as e:
        assert "calibration_data" in str(e)
    qc = to_precision(conv, "int8", calibration_data=[torch.randn(8, 1, 8, 8)], example_input=torch.randn(2, 1, 8, 8))
    assert qc.tinytorch_quantization["mode"] == "static"
    for bad, arg in ((("fp8", "cpu"), "precision"), (("fp32", "tpu"), "device")):
        try:
            to_precision(net, *bad)
            raise AssertionError(f"{bad} must fail")
        except ValueError as e:
            assert arg in str(e), e

    class Picky(nn.Module):  # a model whose forward refuses half precision, like a missing kernel
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
        def forward(self, x):
            if x.dtype == torch.float16:
                raise RuntimeError("\"addmm\" not implemented for 'Half'")
            return self.lin(x)

    try:
        to_precision(Picky(), "fp16", example_input=torch.randn(1, 4))
        raise AssertionError("a failing fp16 forward must raise UnsupportedPrecisionError")
    except UnsupportedPrecisionError as e:
        assert str(e).startswith("precision fp16 is not supported for this model on cpu:") and "Half" in str(e)


if __name__ == "__main__":
    test_unit_to_precision()

# %% [markdown]
# ## Accuracy, through the adapter
#
# Accuracy is counted the same way for every precision: the adapter puts the model in eval and
# inference mode and casts each input batch to the model's dtype; the prediction is the argmax
# of the output. A model in a different precision than asked for is converted first (int8 of a
# conv net needs `calibration_data`).

# %%
#| export
def _batches(loader: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    n = 0
    for item in loader:
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise ValueError("loader: expected batches of (inputs, labels), got "
                             f"{type(item).__name__}; accuracy needs labels")
        n += 1
        yield item[0], item[1]
    if n == 0:
        raise ValueError("loader: expected at least one (inputs, labels) batch, got none")


def evaluate_accuracy(
    model: nn.Module,
    loader: Iterable,
    device: str | torch.device = "cpu",
    precision: str = "fp32",
    *,
    calibration_data: Any = None,
) -> float:
    """Top-1 accuracy (0..1) of `model` in `precision` on the labelled batches of `loader`.

    >>> from tinytorch.benchmarking.digits import default_digits_model, digits_loader
    >>> evaluate_accuracy(default_digits_model(), digits_loader("test")) > 0.9
    True
    """
    converted = to_precision(model, precision, device, calibration_data=calibration_data)
    flags = top1_correct(converted, EvalData(list(_batches(loader)), "loader"))  # the one top-1 evaluation
    return sum(flags) / len(flags)

# %%
def test_unit_evaluate_accuracy():
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader, load_digits_split, accuracy_on

    model = default_digits_model()
    X, y = load_digits_split("test")
    acc = evaluate_accuracy(model, digits_loader("test", 64))
    assert abs(acc - accuracy_on(model, X, y)) < 1e-6, "batched accuracy must equal whole-set accuracy"
    acc16 = evaluate_accuracy(model, digits_loader("test", 64), precision="bf16")
    assert abs(acc16 - acc) <= 0.02, f"bf16 should keep accuracy within 2 points: {acc:.3f} -> {acc16:.3f}"
    try:
        evaluate_accuracy(model, [X[:4]])
        raise AssertionError("batches without labels must fail")
    except ValueError as e:
        assert "labels" in str(e)


if __name__ == "__main__":
    test_unit_evaluate_accuracy()

# %% [markdown]
# ## Latency: a mean is not enough
#
# An interactive device cares about the slow calls: a 95th percentile (p95) of 40 ms means one
# frame in twenty misses a 25 fps deadline even if the mean is 20 ms. `measure_latency` gives
# the mean; `measure_latency_distribution` gives mean, standard deviation and p95 over
# `repeats` samples. Both go through the project's one timing core (`time_model`): warmup,
# blocks calibrated so the clock's own cost is below 0.1%, garbage collector paused. A sample
# is the mean of one timed block, so with very fast models the tail is the tail of block means.

# %%
#| export
def measure_latency(model: Any, input_tensor: Any, runs: int = 100, warmup: int = 10) -> float:
    """Mean latency (ms) of one forward pass on `input_tensor`, over `runs` timed samples.

    >>> measure_latency(nn.Linear(16, 4), torch.randn(1, 16), runs=5) > 0
    True
    """
    return BenchmarkResult("latency_ms", time_model(model, input_tensor, warmup=warmup, samples=runs).per_call_ms).mean


def _latency_result(model: Any, input_tensor: Any, repeats: int, runs: int, warmup: int) -> tuple[BenchmarkResult, dict]:
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs: expected an int >= 1, got {runs!r}")
    if runs == 1:
        samples = time_model(model, input_tensor, warmup=warmup, samples=repeats)
        per_call = samples.per_call_ms
    else:
        a = adapt(model)
        x = a.to_input(input_tensor)
        with a.inference():
            a.forward(x)
            def run_block() -> None:
                for _ in range(runs):
                    a.forward(x)
            samples = time_callable(run_block, warmup=warmup, samples=repeats, sync=a.sync, device=str(a.device))
        per_call = [v / runs for v in samples.per_call_ms]
    return BenchmarkResult("latency", per_call, unit="ms", metadata=dict(samples.metadata(), method="measured: timing core")), samples.metadata()


def measure_latency_distribution(
    model: Any, input_tensor: Any, repeats: int = 30, runs: int = 1, warmup: int = 10
) -> tuple[float, float, float]:
    """(mean, std, p95) latency in ms of one forward pass, from `repeats` timed samples.

    Each sample times at least `runs` consecutive calls (the timing core may group more so the
    clock's cost stays below 0.1%) and is reported per call.

    >>> mean, std, p95 = measure_latency_distribution(nn.Linear(16, 4), torch.randn(1, 16), repeats=10)
    >>> 0 < mean and std >= 0 and p95 >= mean * 0.5
    True
    """
    r, _ = _latency_result(model, input_tensor, repeats, runs, warmup)
    return r.mean, r.std, r.p95

# %%
def test_unit_measure_latency():
    import time

    small = nn.Sequential(nn.Linear(64, 64))
    big = nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])
    x_small, x_big = torch.randn(8, 64), torch.randn(8, 512)
    # the mean is what the course API reports, and one scheduler stall on a busy machine can inflate
    # a 10-sample mean many times over: compare the best of three means
    t_small = min(measure_latency(small, x_small, runs=10) for _ in range(3))
    t_big = min(measure_latency(big, x_big, runs=10) for _ in range(3))
    assert t_big > t_small, f"~250x the work must take longer: {t_big} vs {t_small} ms"
    mean, std, p95 = measure_latency_distribution(big, x_big, repeats=12)
    assert std >= 0 and p95 > 0 and mean > 0

    class Sleeper(nn.Module):  # a reference of known minimum duration (5 ms per call), not a model stand-in
        def forward(self, x):
            time.sleep(0.005)
            return x

    mean_s, _, _ = measure_latency_distribution(Sleeper(), torch.zeros(1), repeats=3, runs=4, warmup=1)
    assert 5.0 <= mean_s < 15.0, f"with runs=4 the latency is reported per call (~5 ms), got {mean_s:.2f} ms"
    try:
        measure_latency_distribution(big, x_big, runs=0)
        raise AssertionError("runs=0 must fail")
    except ValueError as e:
        assert "runs" in str(e)


if __name__ == "__main__":
    test_unit_measure_latency()

# %% [markdown]
# ## Putting it together: `collect_metrics`
#
# One call measures a model in one precision on one device:
#
# 1. convert (`to_precision`, checked by a forward pass);
# 2. accuracy on every labelled batch of `loader`;
# 3. latency distribution on the first `batch_size` samples of `loader`;
#    throughput = `batch_size / mean latency`;
# 4. memory from the converted model's state;
# 5. energy per forward call: an energy counter (RAPL) where one is readable, else
#    `latency × power_watts`, labelled *estimated*; `None` with the reason if neither.
#
# `latency_multiplier` is for a rough target-device figure: measured latency × the factor
# (for example 8 if the target is known to run this workload 8× slower). The result then says
# `latency_scaled_by=8` and every latency-derived figure is marked scaled. A host energy
# counter says nothing about the target, so with a multiplier energy is only estimated from the
# scaled latency and `power_watts`.

# %%
#| export
@dataclass
class PerfMetrics:
    """The performance of one model in one precision on one device, each figure with its method.

    `methods` says how each figure was obtained ("measured: …" or "estimated: …"); `reasons`
    says why a figure is None. `latency_ms` is the mean (as the course API defines it); on a busy
    machine a few slow samples pull it up, so `latency_median_ms` is given too. Latencies are per
    forward call of `batch_size` samples; with `latency_scaled_by != 1` they are measured latencies
    multiplied by that factor. `memory_mb` is `results.state_dict_tensor_bytes` in MiB.

    The fields are a view: `results` holds the measurements they come from, in the library's one
    currency (`"accuracy"`: a `ProportionResult`, `"latency"`: a `BenchmarkResult` of the
    unscaled per-call samples, `"memory"`: a `CountResult`), so they compare with any other
    result through `compare_results`.
    """

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

    def to_dict(self) -> dict[str, Any]:
        "All fields, JSON-ready (each underlying result as its `to_dict()`)."
        d = {k: v for k, v in asdict(self).items() if k != "results"}
        d["results"] = {k: r.to_dict() for k, r in self.results.items()}
        return d


def _first_samples(loader: Iterable, batch_size: int) -> torch.Tensor:
    parts, n = [], 0
    for X, _ in _batches(loader):
        parts.append(X)
        n += len(X)
        if n >= batch_size:
            break
    X = torch.cat(parts)
    if len(X) < batch_size:
        raise ValueError(f"batch_size: {batch_size} exceeds the {len(X)} samples in loader")
    return X[:batch_size]


def collect_metrics(
    model: nn.Module,
    loader: Iterable,
    device: str | torch.device = "cpu",
    power_watts: float | None = None,
    precision: str = "fp32",
    latency_multiplier: float = 1.0,
    repeats: int = 30,
    *,
    batch_size: int = 1,
    calibration_data: Any = None,
    calibration_split: str | None = None,
) -> PerfMetrics:
    """Measure accuracy, latency (mean/std/p95), throughput, memory and energy of `model` in `precision`.

    `calibration_data` calibrates static int8 of conv models and must come from a split other
    than `loader` (calibrating on the evaluation data leaks it into the model); without it such a
    conversion raises. `calibration_split` names it (e.g. "digits train split") in
    `methods["int8_calibration"]`.

    >>> from tinytorch.benchmarking.digits import default_digits_model, digits_loader
    >>> m = collect_metrics(default_digits_model(), digits_loader("test"), repeats=5)
    >>> m.accuracy > 0.9 and m.latency_ms > 0 and m.methods["latency_ms"].startswith("measured")
    True
    """
    check_precision(precision)
    dev = check_device(device)
    if not _is_number(latency_multiplier) or latency_multiplier <= 0:
        raise ValueError(f"latency_multiplier: expected a positive number, got {latency_multiplier!r}")
    if power_watts is not None and (not _is_number(power_watts) or power_watts <= 0):
        raise ValueError(f"power_watts: expected a positive number of watts or None, got {power_watts!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: expected an int >= 1, got {batch_size!r}")
    methods: dict[str, str] = {}
    reasons: dict[str, str] = {}
    if precision == "int8" and model_precision(model) != "int8" \
            and any(isinstance(m, _CONV_TYPES) for m in model.modules()):
        if calibration_data is None:
            raise ValueError("calibration_data: static int8 of a model with convolutions needs calibration inputs "
                             "from a split other than `loader` (e.g. digits_loader('train')); calibrating on the "
                             "evaluation data would leak it into the model")
        methods["int8_calibration"] = (f"static int8 calibrated on {calibration_split or 'caller-supplied calibration_data'}"
                                       " (not the evaluation loader)")
    x = _first_samples(loader, batch_size)
    converted = to_precision(model, precision, dev, calibration_data=calibration_data, example_input=x)
    if precision == "int8":
        methods["int8_path"] = converted.tinytorch_quantization["path"] if hasattr(converted, "tinytorch_quantization") else "given int8 model"

    acc_result = ProportionResult("accuracy", top1_correct(converted, EvalData(list(_batches(loader)), "loader")),
                                  unit="fraction", metadata={"method": "measured: top-1 over every labelled batch of loader"})
    accuracy = acc_result.mean
    methods["accuracy"] = acc_result.method

    result, conditions = _latency_result(converted, x, repeats, 1, 10)
    k = float(latency_multiplier)
    scaled = f" x {k:g} (latency_scaled_by={k:g})" if k != 1 else ""
    mean_ms, std_ms, p95_ms = result.mean * k, result.std * k, result.p95 * k
    for key in ("latency_ms", "latency_std_ms", "latency_p95_ms", "latency_median_ms"):
        methods[key] = f"measured: timing core, {result.count} samples of batch {batch_size}{scaled}"
    throughput = batch_size / (mean_ms / 1e3)
    methods["throughput_sps"] = f"derived: batch_size / mean latency{' (scaled)' if k != 1 else ''}"

    memory = model_memory_mb(converted)
    methods["memory_mb"] = "measured: state-dict tensors x element size"
    mem_result = CountResult("memory", [memory], unit="MiB",
                             metadata={"bytes": state_dict_tensor_bytes(converted), "method": methods["memory_mb"]})

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
        methods["energy_j"] = f"estimated: latency x power (latency scaled by {k:g}, {power_watts:g} W)"
    else:
        reasons["energy_j"] = ("latency is scaled to a target device, where a host energy counter does not "
                               "apply; give power_watts for an estimate")
    conditions = dict(conditions, measured_latency_ms=result.mean, measured_latency_p95_ms=result.p95)
    return PerfMetrics(
        accuracy=accuracy, latency_ms=mean_ms, latency_std_ms=std_ms, latency_p95_ms=p95_ms,
        throughput_sps=throughput, memory_mb=memory, energy_j=energy_j, latency_median_ms=result.median * k,
        precision=precision,
        device=str(dev), batch_size=batch_size, latency_scaled_by=k, methods=methods,
        reasons=reasons, conditions=conditions,
        results={"accuracy": acc_result, "latency": result, "memory": mem_result},
    )

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader

    _model = default_digits_model()
    for _p in PRECISIONS:
        _m = collect_metrics(_model, digits_loader("test", 64), precision=_p, repeats=15, power_watts=15.0,
                             calibration_data=digits_loader("train", 64))
        _e = f"{_m.energy_j * 1e6:.1f} µJ ({_m.methods['energy_j']})" if _m.energy_j is not None else f"n/a ({_m.reasons['energy_j']})"
        print(f"{_p:5s} acc {_m.accuracy:.2%}  latency {_m.latency_ms * 1e3:7.1f} µs (p95 {_m.latency_p95_ms * 1e3:7.1f})  "
              f"{_m.memory_mb * 1024:6.2f} KB  energy {_e}")

# %%
def test_unit_collect_metrics():
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader

    model = default_digits_model()
    base = collect_metrics(model, digits_loader("test", 64), repeats=8, power_watts=10.0)
    assert base.accuracy > 0.9 and base.precision == "fp32" and base.latency_scaled_by == 1.0
    assert base.latency_p95_ms >= base.latency_ms * 0.5 and base.throughput_sps > 0
    assert abs(base.throughput_sps - 1 / (base.latency_ms / 1e3)) < 1e-6 * base.throughput_sps
    assert base.energy_j is not None and base.methods["energy_j"].startswith(("measured", "estimated"))
    q = collect_metrics(model, digits_loader("test", 64), precision="int8", repeats=8,
                        calibration_data=digits_loader("train", 64), calibration_split="digits train split")
    assert q.methods["int8_calibration"].startswith("static int8 calibrated on digits train split")
    try:
        collect_metrics(model, digits_loader("test", 64), precision="int8", repeats=2)
        raise AssertionError("static int8 without a separate calibration split must fail")
    except ValueError as e:
        assert "calibration_data" in str(e) and "split" in str(e), e
    assert q.memory_mb < 0.6 * base.memory_mb, f"int8 should shrink memory: {base.memory_mb} -> {q.memory_mb} MB"
    assert q.accuracy >= base.accuracy - 0.03, f"int8 accuracy {q.accuracy:.3f} vs fp32 {base.accuracy:.3f}"
    scaled = collect_metrics(model, digits_loader("test", 64), repeats=8, latency_multiplier=10.0)
    assert scaled.latency_scaled_by == 10.0 and "latency_scaled_by=10" in scaled.methods["latency_ms"]
    assert scaled.energy_j is None and "power_watts" in scaled.reasons["energy_j"]
    assert abs(scaled.latency_ms - 10 * scaled.conditions["measured_latency_ms"]) < 1e-9 * scaled.latency_ms, \
        "latency_ms must be the measured mean x latency_multiplier"
    for kwargs, arg in (({"latency_multiplier": 0}, "latency_multiplier"), ({"precision": "fp64"}, "precision"),
                        ({"device": "gpu"}, "device"), ({"power_watts": -5}, "power_watts")):
        try:
            collect_metrics(model, digits_loader("test", 64), **kwargs)
            raise AssertionError(f"{kwargs} must fail")
        except ValueError as e:
            assert arg in str(e), e


if __name__ == "__main__":
    test_unit_collect_metrics()

# %% [markdown]
# ## Summary
#
# - Memory is bytes by dtype over the whole state (int8 weights, scales and zero points included).
# - Precision is converted for real and checked by a forward pass; an unsupported precision is an
#   error, not a float32 run in disguise.
# - Latency comes from the shared timing core, as a distribution (mean, std, p95).
# - Every figure in `PerfMetrics` records how it was obtained, and scaled or estimated figures
#   say so.

# %%
def test_module():
    test_unit_model_memory_mb()
    test_unit_memory_violations()
    test_unit_to_precision()
    test_unit_evaluate_accuracy()
    test_unit_measure_latency()
    test_unit_collect_metrics()


if __name__ == "__main__":
    test_module()
