# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, hardware analysis: where does the time go?
#
# A latency figure says *how long*; it does not say *why*. Hardware analysis answers the why
# with two numbers per layer — how much arithmetic it does (MACs) and how many bytes it moves
# (weights in, activations out) — and two numbers per machine — how many MACs it can do per
# second and how many bytes per second its memory delivers. Their ratio decides which one
# limits the layer:
#
# ```
#  attainable MAC/s
#      ▲            ______________________ peak compute (MAC/s)
#      │           /
#      │          /   compute-bound: more bandwidth would not help
#      │         /
#      │        /  memory-bound: the layer waits for bytes
#      │       /   (slope = memory bandwidth, bytes/s)
#      └──────┴──────────────────────────▶ arithmetic intensity (MACs per byte moved)
#          ridge point = peak MAC/s ÷ bandwidth
# ```
#
# This is the *roofline model* (Williams, Waterman and Patterson, 2009). Below the ridge point
# a layer is memory-bound; above it, compute-bound. On this notebook's tiny digits CNN, with a
# few hundred bytes of weights per layer, neither roof is near: the measured latency is mostly
# framework overhead, and the analysis shows that too.
#
# What this notebook builds:
#
# - `estimate_layerwise_stats`: MACs and bytes for every layer of any model, from forward hooks
#   (the Module 15 `Profiler`), exact for convolutions, linear layers, pooling, residual adds;
# - `roofline_estimate` and `summarize_hardware`: achieved bandwidth and compute, utilization,
#   and a labelled memory-bound / compute-bound verdict;
# - `sweep` and `precision_tradeoff_table`: real runs of fp32 / fp16 / bf16 / int8 at several
#   batch sizes against deployment constraints;
# - `save_hardware_artifacts`: the CSV tables and two bar charts.

# %%
#| default_exp benchmarking.hardware

# %%
#| export
from __future__ import annotations

import math
import numbers
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader

from tinytorch.benchmarking.metrics import (
    PRECISIONS, UnsupportedPrecisionError, check_device, check_precision, collect_metrics, to_precision,
)
from tinytorch.benchmarking.results import write_atomic, write_json
from tinytorch.profiling.profiler import Profiler
from tinytorch.profiling.timing import system_info, time_callable

# %% [markdown]
# ## Layer by layer, from hooks
#
# The Module 15 `Profiler` registers a forward hook on every leaf module, runs one forward pass
# and records each layer call's output and its MACs (counted by `torch.utils.flop_counter`).
# Nothing about the architecture is assumed: a residual add, a depthwise convolution or a layer
# used twice all show up as they run. For the digits CNN (batch 1, input 1×8×8) the hand
# computation is:
#
# | layer | output | MACs = outputs × (k·k·C_in) | parameter bytes |
# |---|---|---|---|
# | conv1 | 16×8×8 = 1,024 | 1,024 × 9 = 9,216 | (16·9 + 16) × 4 = 640 |
# | conv2 | 32×4×4 = 512 | 512 × 144 = 73,728 | (32·144 + 32) × 4 = 18,560 |
# | classifier | 10 | 10 × 128 = 1,280 | (10·128 + 10) × 4 = 5,160 |
#
# ReLU and max-pool rows add activation bytes but no MACs. A module called twice (the CNN's one
# `pool` and one `relu`) gives one row per call; its parameters are counted at the first call.

# %%
#| export
LAYERWISE_COLUMNS = ("layer", "output_elements", "parameter_bytes", "activation_bytes", "macs")


@dataclass
class LayerEstimate:
    """Compute and memory of one layer call for one batch.

    `activation_bytes` are the bytes of the layer's output; `macs` are multiply-accumulates.
    """

    layer: str
    output_elements: int
    parameter_bytes: int
    activation_bytes: int
    macs: int


def _check_int(value: Any, arg: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{arg}: expected an int >= {minimum}, got {value!r}")
    return int(value)


def estimate_layerwise_stats(model: nn.Module, batch_size: int = 1,
                             input_shape: Sequence[int] = (1, 8, 8)) -> pd.DataFrame:
    """Per-layer-call output elements, parameter bytes, activation bytes and MACs for one batch.

    `input_shape` is one sample's shape (without the batch). The figures come from forward hooks
    on a real pass (`Profiler.layer_stats`), so any architecture works.

    >>> from tinytorch.benchmarking.digits import DigitsCNN
    >>> df = estimate_layerwise_stats(DigitsCNN(), 1, (1, 8, 8))
    >>> df.set_index("layer").loc["conv2", "macs"]
    73728
    """
    _check_int(batch_size, "batch_size")
    try:
        sample = tuple(int(d) for d in input_shape)
    except TypeError:
        raise ValueError(f"input_shape: expected one sample's shape such as (1, 8, 8), got {input_shape!r}") from None
    if not sample or any(d < 1 for d in sample):
        raise ValueError(f"input_shape: expected positive dimensions such as (1, 8, 8), got {input_shape!r}")
    stats = Profiler().layer_stats(model, (batch_size, *sample))
    if stats.empty:
        raise ValueError("model: no leaf layer ran in the forward pass; layer-wise statistics need "
                         "nn.Module layers (Conv, Linear, ...) called in forward()")
    rows = [LayerEstimate(str(r.layer), int(r.output_elements), int(r.parameter_bytes),
                          int(r.activation_bytes), int(r.macs)) for r in stats.itertuples()]
    df = pd.DataFrame([asdict(r) for r in rows], columns=list(LAYERWISE_COLUMNS))
    df.attrs.update({"batch_size": batch_size, "input_shape": sample,
                     "method": "counted: forward hooks (Profiler.layer_stats, torch.utils.flop_counter)"})
    return df

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import DigitsCNN

    print(estimate_layerwise_stats(DigitsCNN(), batch_size=1, input_shape=(1, 8, 8)).to_string())

# %%
def test_unit_estimate_layerwise_stats():
    from tinytorch.benchmarking.digits import DigitsCNN

    B = 4
    df = estimate_layerwise_stats(DigitsCNN(), B, (1, 8, 8))
    assert list(df.columns) == list(LAYERWISE_COLUMNS)
    rows = df.drop_duplicates("layer").set_index("layer")
    expected = {  # hand computation (see the table above), batch of 4
        "conv1": (B * 16 * 8 * 8, (16 * 9 + 16) * 4, B * 16 * 8 * 8 * 4, B * 16 * 8 * 8 * 9),
        "conv2": (B * 32 * 4 * 4, (32 * 16 * 9 + 32) * 4, B * 32 * 4 * 4 * 4, B * 32 * 4 * 4 * 16 * 9),
        "classifier": (B * 10, (10 * 128 + 10) * 4, B * 10 * 4, B * 10 * 128),
    }
    for layer, (out, pbytes, abytes, macs) in expected.items():
        got = tuple(int(rows.loc[layer, c]) for c in ("output_elements", "parameter_bytes", "activation_bytes", "macs"))
        assert got == (out, pbytes, abytes, macs), f"{layer}: expected {(out, pbytes, abytes, macs)}, got {got}"
    assert int(df["parameter_bytes"].sum()) == 6090 * 4, "all 6,090 parameters counted once"
    assert int(df[df.layer == "pool"]["macs"].sum()) == 0, "pooling does no multiply-accumulates"
    try:
        estimate_layerwise_stats(DigitsCNN(), 0, (1, 8, 8))
        raise AssertionError("batch_size=0 must fail")
    except ValueError as e:
        assert "batch_size" in str(e)


if __name__ == "__main__":
    test_unit_estimate_layerwise_stats()

# %% [markdown]
# ## The roofline estimate
#
# For a piece of work of `macs` multiply-accumulates that moves `bytes_moved` bytes, on a
# machine with `peak_macs_per_s` and `bandwidth_bytes_per_s`:
#
# - compute time `= macs / peak_macs_per_s`; memory time `= bytes_moved / bandwidth_bytes_per_s`;
# - the estimate is the larger of the two (the other overlaps with it);
# - arithmetic intensity `= macs / bytes_moved`; ridge point `= peak / bandwidth`;
#   intensity below the ridge → **memory-bound**, at or above → **compute-bound**.
#
# It is a lower bound: real code adds launch overhead, cache misses, imperfect overlap. So the
# result says `method: "estimated: roofline"`.
#
# **Your task.** Complete `roofline_estimate`.
#
# - *Approach:* validate (macs and bytes ≥ 0, not both 0; peak and bandwidth > 0: a
#   `ValueError` naming the argument); compute the two times in milliseconds, the intensity
#   (`math.inf` when no bytes move), the ridge point and the verdict.
# - *Example:* 1e9 MACs and 1e8 bytes on 1e10 MAC/s and 1e9 B/s: compute 100 ms, memory 100 ms,
#   intensity 10 = ridge 10 → `"compute-bound"`, latency 100 ms.
# - *Hints:* return a dict with keys `latency_ms`, `compute_ms`, `memory_ms`,
#   `arithmetic_intensity`, `ridge_point`, `bound`, `method`.

# %% nbgrader={"grade": false, "grade_id": "hardware-roofline", "solution": true, "schema_version": 3}
#| export
ROOFLINE_METHOD = "estimated: roofline"


def _positive(value: Any, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{arg}: expected a positive number, got {value!r}")
    return float(value)


def roofline_estimate(macs: float, bytes_moved: float, peak_macs_per_s: float,
                      bandwidth_bytes_per_s: float) -> dict[str, Any]:
    """Roofline lower bound on latency, and whether the work is memory- or compute-bound.

    >>> r = roofline_estimate(1e9, 1e8, 1e10, 1e9)
    >>> r["latency_ms"], r["bound"]
    (100.0, 'compute-bound')
    """
    ### BEGIN SOLUTION
    for value, arg in ((macs, "macs"), (bytes_moved, "bytes_moved")):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{arg}: expected a number >= 0, got {value!r}")
    if macs == 0 and bytes_moved == 0:
        raise ValueError("macs, bytes_moved: expected some work, got 0 MACs and 0 bytes")
    peak = _positive(peak_macs_per_s, "peak_macs_per_s")
    bandwidth = _positive(bandwidth_bytes_per_s, "bandwidth_bytes_per_s")
    compute_ms = macs / peak * 1e3
    memory_ms = bytes_moved / bandwidth * 1e3
    intensity = macs / bytes_moved if bytes_moved > 0 else math.inf
    ridge = peak / bandwidth
    return {
        "latency_ms": max(compute_ms, memory_ms),
        "compute_ms": compute_ms,
        "memory_ms": memory_ms,
        "arithmetic_intensity": intensity,
        "ridge_point": ridge,
        "bound": "memory-bound" if intensity < ridge else "compute-bound",
        "method": ROOFLINE_METHOD,
    }
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-hardware-roofline", "locked": true, "points": 4, "schema_version": 3}
def test_unit_roofline_estimate():
    r = roofline_estimate(1e9, 1e8, 1e10, 1e9)
    assert abs(r["compute_ms"] - 100.0) < 1e-9 and abs(r["memory_ms"] - 100.0) < 1e-9, r
    assert r["bound"] == "compute-bound", "intensity equal to the ridge point counts as compute-bound"
    m = roofline_estimate(1e6, 1e8, 1e10, 1e9)  # 0.01 MAC/byte, ridge 10
    assert m["bound"] == "memory-bound" and abs(m["latency_ms"] - 100.0) < 1e-9, f"expected memory-bound, 100 ms: {m}"
    c = roofline_estimate(1e10, 1e3, 1e10, 1e9)
    assert c["bound"] == "compute-bound" and abs(c["latency_ms"] - 1000.0) < 1e-9, f"expected compute-bound, 1000 ms: {c}"
    assert abs(m["arithmetic_intensity"] - 0.01) < 1e-12 and m["ridge_point"] == 10.0, \
        f"expected intensity = MACs / bytes = 0.01 and ridge = peak / bandwidth = 10.0, got {m['arithmetic_intensity']}, {m['ridge_point']}"
    assert m["method"].startswith("estimated"), "a roofline figure is an estimate and must say so"
    assert roofline_estimate(5, 0, 1, 1)["arithmetic_intensity"] == math.inf
    import numpy as np
    assert roofline_estimate(np.int64(1000), np.float64(10.0), 1e6, 1e6)["bound"] == "compute-bound", "numpy numbers work"
    try:
        roofline_estimate(0, 0, 1e6, 1e6)
        raise AssertionError("no work at all must raise ValueError")
    except ValueError:
        pass
    for args, arg in (((1e6, 1e6, 0, 1e9), "peak_macs_per_s"), ((1e6, 1e6, 1e9, -1), "bandwidth_bytes_per_s"),
                      ((-1, 1e6, 1e9, 1e9), "macs")):
        try:
            roofline_estimate(*args)
            raise AssertionError(f"{args} must raise ValueError")
        except ValueError as e:
            assert arg in str(e), f"the error should name {arg!r}: {e}"


if __name__ == "__main__":
    test_unit_roofline_estimate()

# %% [markdown]
# ## The machine's two roofs, measured
#
# A datasheet gives peak figures no program reaches. For the host we measure practical ones
# with the shared timing core:
#
# - **bandwidth**: copying a 64 MB tensor (far larger than any cache) reads and writes 2 × 64 MB;
# - **compute**: a 512×512×512 float32 matrix multiply is 134 million MACs of the best-tuned
#   kernel torch has.
#
# Both are "measured: …" ceilings for *this* machine, and they vary with load — record them with
# the result rather than reusing them.

# %%
#| export
def measure_memory_bandwidth_gbps(size_mb: int = 64, samples: int = 5) -> float:
    """Practical memory bandwidth (GB/s, 1e9 bytes) of this machine: a large tensor copy, timed.

    >>> measure_memory_bandwidth_gbps(size_mb=16, samples=3) > 0
    True
    """
    _check_int(size_mb, "size_mb")
    src = torch.ones(size_mb * 2**20 // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    t = time_callable(lambda: dst.copy_(src), warmup=2, samples=_check_int(samples, "samples"))
    return 2 * src.numel() * 4 / (t.median_ms / 1e3) / 1e9


def measure_peak_gmacs(n: int = 512, samples: int = 5) -> float:
    """Practical float32 compute (GMAC/s) of this machine: an n×n×n matmul, timed.

    >>> measure_peak_gmacs(n=128, samples=3) > 0
    True
    """
    _check_int(n, "n")
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    t = time_callable(lambda: torch.mm(a, b), warmup=2, samples=_check_int(samples, "samples"))
    return n**3 / (t.median_ms / 1e3) / 1e9

# %%
if __name__ == "__main__":
    print(f"this machine: ~{measure_memory_bandwidth_gbps():.1f} GB/s copy bandwidth, "
          f"~{measure_peak_gmacs():.1f} GMAC/s float32 matmul ({torch.get_num_threads()} threads)")

# %% [markdown]
# ## Summarizing a measured run
#
# Given the layer table, a measured latency and the memory bandwidth, `summarize_hardware`
# reports the six figures of the course API:
#
# | key | formula |
# |---|---|
# | `estimated_total_bytes` | Σ parameter_bytes + Σ activation_bytes |
# | `estimated_total_macs` | Σ macs |
# | `achieved_bandwidth_gbps` | total bytes / latency / 1e9 |
# | `configured_memory_bandwidth_gbps` | the bandwidth given |
# | `bandwidth_utilization` | achieved / configured |
# | `achieved_gmacs` | total MACs / latency / 1e9 |
#
# and a verdict. With a compute peak (`peak_gmacs`), the verdict is the roofline's (intensity
# vs ridge point) plus how far the measured latency is from the roofline bound: a run at 2% of
# its roofline is limited by neither roof but by overhead (Python, dispatch, small kernels).
# Without a peak, only the bandwidth side is known, and the verdict says only that.

# %%
#| export
SUMMARY_KEYS = ("estimated_total_bytes", "estimated_total_macs", "achieved_bandwidth_gbps",
                "configured_memory_bandwidth_gbps", "bandwidth_utilization", "achieved_gmacs")


def _require_columns(df: Any, columns: Sequence[str], arg: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{arg}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{arg}: missing column(s) {missing}; expected columns {list(columns)}")


def summarize_hardware(layer_df: pd.DataFrame, latency_ms: float, memory_bandwidth_gbps: float,
                       peak_gmacs: float | None = None) -> dict[str, Any]:
    """Bandwidth and compute achieved by a measured run, with a memory-/compute-bound verdict.

    `layer_df` is `estimate_layerwise_stats` output for the batch that took `latency_ms`.

    >>> df = pd.DataFrame({"layer": ["fc"], "output_elements": [10], "parameter_bytes": [960],
    ...                    "activation_bytes": [40], "macs": [240]})
    >>> s = summarize_hardware(df, latency_ms=0.001, memory_bandwidth_gbps=10.0)
    >>> s["achieved_bandwidth_gbps"], s["bandwidth_utilization"]
    (1.0, 0.1)
    """
    _require_columns(layer_df, LAYERWISE_COLUMNS, "layer_df")
    latency_ms = _positive(latency_ms, "latency_ms")
    bandwidth = _positive(memory_bandwidth_gbps, "memory_bandwidth_gbps")
    total_bytes = int(layer_df["parameter_bytes"].sum() + layer_df["activation_bytes"].sum())
    total_macs = int(layer_df["macs"].sum())
    seconds = latency_ms / 1e3
    achieved_bw = total_bytes / seconds / 1e9
    summary: dict[str, Any] = {
        "estimated_total_bytes": total_bytes,
        "estimated_total_macs": total_macs,
        "achieved_bandwidth_gbps": achieved_bw,
        "configured_memory_bandwidth_gbps": bandwidth,
        "bandwidth_utilization": achieved_bw / bandwidth,
        "achieved_gmacs": total_macs / seconds / 1e9,
    }
    if peak_gmacs is not None:
        roof = roofline_estimate(total_macs, total_bytes, _positive(peak_gmacs, "peak_gmacs") * 1e9, bandwidth * 1e9)
        attained = roof["latency_ms"] / latency_ms
        summary.update({
            "peak_gmacs": float(peak_gmacs),
            "arithmetic_intensity": roof["arithmetic_intensity"],
            "ridge_point": roof["ridge_point"],
            "roofline_latency_ms": roof["latency_ms"],
            "roofline_attainment": attained,
            "verdict": roof["bound"] if attained >= 0.1 else f"overhead-bound (roofline says {roof['bound']})",
            "verdict_method": (f"{ROOFLINE_METHOD}: intensity {roof['arithmetic_intensity']:.3g} MAC/B vs ridge "
                               f"{roof['ridge_point']:.3g} MAC/B; measured latency reaches {attained:.1%} of the "
                               "roofline bound (below 10%: overhead-bound)"),
        })
    else:
        util = summary["bandwidth_utilization"]
        summary["verdict"] = "memory-bound" if util >= 0.5 else "not memory-bound"
        summary["verdict_method"] = (f"measured bandwidth utilization {util:.1%} (memory-bound from 50%); "
                                     "give peak_gmacs for a roofline verdict")
    return summary

# %%
def test_unit_summarize_hardware():
    df = pd.DataFrame({"layer": ["a", "b"], "output_elements": [100, 10], "parameter_bytes": [4000, 400],
                       "activation_bytes": [400, 40], "macs": [2_000_000, 4_000]})
    s = summarize_hardware(df, latency_ms=0.5, memory_bandwidth_gbps=4.0)
    assert all(k in s for k in SUMMARY_KEYS)
    assert s["estimated_total_bytes"] == 4840 and s["estimated_total_macs"] == 2_004_000
    assert abs(s["achieved_bandwidth_gbps"] - 4840 / 0.5e-3 / 1e9) < 1e-12
    assert abs(s["bandwidth_utilization"] - s["achieved_bandwidth_gbps"] / 4.0) < 1e-12
    assert abs(s["achieved_gmacs"] - 2_004_000 / 0.5e-3 / 1e9) < 1e-12
    assert s["verdict"] == "not memory-bound"
    r = summarize_hardware(df, latency_ms=0.5, memory_bandwidth_gbps=4.0, peak_gmacs=1.0)
    # intensity 2,004,000 / 4,840 = 414 MAC/B, far above the ridge 1e9 / 4e9 = 0.25 MAC/B: compute-bound
    assert r["ridge_point"] == 0.25 and r["verdict"] == "compute-bound", r
    slow = summarize_hardware(df, latency_ms=500.0, memory_bandwidth_gbps=4.0, peak_gmacs=1.0)
    assert slow["verdict"].startswith("overhead-bound"), "far from both roofs is overhead-bound"
    try:
        summarize_hardware(df.drop(columns=["macs"]), 1.0, 4.0)
        raise AssertionError("a missing column must fail")
    except ValueError as e:
        assert "macs" in str(e)
    try:
        summarize_hardware(df, 0.0, 4.0)
        raise AssertionError("latency_ms=0 must fail")
    except ValueError as e:
        assert "latency_ms" in str(e)


if __name__ == "__main__":
    test_unit_summarize_hardware()

# %% [markdown]
# ## A real precision sweep
#
# Which precision and batch size should ship? `sweep` runs every combination for real
# (`collect_metrics`: conversion, accuracy on the labelled data, latency distribution, memory,
# energy) and checks each against the deployment constraints:
#
# | constraint | meets it when |
# |---|---|
# | `min_accuracy` | accuracy ≥ value |
# | `max_latency_ms` | mean latency ≤ value |
# | `max_p95_latency_ms` | p95 latency ≤ value |
# | `max_memory_mb` | memory ≤ value |
# | `max_energy_j` | energy per call ≤ value (unknown energy does not meet it) |
#
# `accepted` is True only when every constraint is met; `violations` names the failed ones.
# Where a precision cannot run on this device, `unsupported="raise"` (the default) stops with
# the error, and `unsupported="skip"` leaves it out and records why in `df.attrs["skipped"]`.

# %%
#| export
CONSTRAINTS = {
    "min_accuracy": ("accuracy", ">="),
    "max_latency_ms": ("latency_ms", "<="),
    "max_p95_latency_ms": ("latency_p95_ms", "<="),
    "max_memory_mb": ("memory_mb", "<="),
    "max_energy_j": ("energy_proxy_j", "<="),
}
SWEEP_COLUMNS = ("precision", "batch_size", "accuracy", "latency_ms", "latency_median_ms", "latency_std_ms", "latency_p95_ms",
                 "throughput_sps", "memory_mb", "energy_proxy_j", "energy_method", "latency_scaled_by",
                 "accepted", "violations")


def _check_constraints(constraints: dict[str, float] | None) -> dict[str, float]:
    constraints = dict(constraints or {})
    unknown = [k for k in constraints if k not in CONSTRAINTS]
    if unknown:
        raise ValueError(f"constraints: unknown key(s) {unknown}; expected some of {list(CONSTRAINTS)}")
    for k, v in constraints.items():
        _positive(v, f"constraints[{k!r}]")
    return constraints


def _violations(row: dict[str, Any], constraints: dict[str, float]) -> list[str]:
    failed = []
    for key, limit in constraints.items():
        column, op = CONSTRAINTS[key]
        value = row.get(column)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            failed.append(f"{key} (unknown {column})")
        elif (op == ">=" and value < limit) or (op == "<=" and value > limit):
            failed.append(key)
    return failed


def sweep(
    model: nn.Module,
    loader: Any,
    precisions: Sequence[str] = PRECISIONS,
    batch_sizes: Sequence[int] = (1, 8, 32),
    constraints: dict[str, float] | None = None,
    *,
    device: str = "cpu",
    power_watts: float | None = None,
    latency_multiplier: float = 1.0,
    repeats: int = 20,
    calibration_data: Any = None,
    unsupported: str = "raise",
    calibration_split: str | None = None,
) -> pd.DataFrame:
    """One row per (precision, batch size): measured metrics and whether they meet `constraints`.

    Static int8 of a conv model is calibrated on `calibration_data`, which must come from a split
    other than `loader` (none is taken from it); `calibration_split` names it in `attrs["notes"]`.

    >>> from tinytorch.benchmarking.digits import default_digits_model, digits_loader
    >>> df = sweep(default_digits_model(), digits_loader("test"), ["fp32"], [1], {"min_accuracy": 0.9}, repeats=5)
    >>> bool(df.loc[0, "accepted"])
    True
    """
    precisions = [check_precision(p) for p in precisions]
    if not precisions:
        raise ValueError("precisions: expected at least one of " + str(PRECISIONS))
    batch_sizes = [_check_int(b, "batch_sizes") for b in batch_sizes]
    if not batch_sizes:
        raise ValueError("batch_sizes: expected at least one positive int")
    constraints = _check_constraints(constraints)
    if unsupported not in ("raise", "skip"):
        raise ValueError(f"unsupported: expected 'raise' or 'skip', got {unsupported!r}")
    check_device(device)
    rows, skipped, notes = [], {}, {}
    has_conv = any(isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) for m in model.modules())
    if "int8" in precisions and has_conv:
        if calibration_data is None:  # never the evaluation loader: that would leak the test set into the model
            raise ValueError("calibration_data: static int8 of a model with convolutions needs calibration inputs "
                             "from a split other than `loader` (e.g. digits_loader('train'))")
        notes["int8_calibration"] = (f"static int8 calibrated on {calibration_split or 'caller-supplied calibration_data'}"
                                     " (not the evaluation loader)")
    for precision in precisions:
        try:
            converted = to_precision(model, precision, device, calibration_data=calibration_data,
                                     example_input=loader)
        except UnsupportedPrecisionError as e:
            if unsupported == "raise":
                raise
            skipped[precision] = str(e)
            continue
        for b in batch_sizes:
            m = collect_metrics(converted, loader, device, power_watts, precision, latency_multiplier, repeats,
                                batch_size=b)
            row = {"precision": precision, "batch_size": b, "accuracy": m.accuracy, "latency_ms": m.latency_ms,
                   "latency_median_ms": m.latency_median_ms,
                   "latency_std_ms": m.latency_std_ms, "latency_p95_ms": m.latency_p95_ms,
                   "throughput_sps": m.throughput_sps, "memory_mb": m.memory_mb, "energy_proxy_j": m.energy_j,
                   "energy_method": m.methods.get("energy_j") or f"none: {m.reasons.get('energy_j')}",
                   "latency_scaled_by": m.latency_scaled_by}
            failed = _violations(row, constraints)
            row["accepted"] = not failed
            row["violations"] = ", ".join(failed)
            rows.append(row)
    df = pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))
    df.attrs.update({"skipped": skipped, "constraints": constraints, "device": str(device), "notes": notes})
    return df

# %% [markdown]
# `precision_tradeoff_table` condenses a sweep to one row per precision (means over batch
# sizes, and the share of configurations that met the constraints), fastest first.

# %%
#| export
TRADEOFF_INPUT_COLUMNS = ("precision", "accuracy", "latency_ms", "memory_mb", "energy_proxy_j", "accepted")
TRADEOFF_COLUMNS = ("precision", "accuracy_mean", "latency_ms_mean", "memory_mb_mean", "energy_proxy_j_mean",
                    "accepted_ratio")


def precision_tradeoff_table(sweep_df: pd.DataFrame) -> pd.DataFrame:
    """Per-precision means of a sweep and the fraction accepted, sorted by mean latency.

    >>> df = pd.DataFrame({"precision": ["fp32", "fp32", "int8"], "accuracy": [0.9, 0.9, 0.88],
    ...     "latency_ms": [2.0, 4.0, 1.0], "memory_mb": [1.0, 1.0, 0.3], "energy_proxy_j": [0.1, 0.2, 0.05],
    ...     "accepted": [True, False, True]})
    >>> precision_tradeoff_table(df)[["precision", "latency_ms_mean", "accepted_ratio"]].values.tolist()
    [['int8', 1.0, 1.0], ['fp32', 3.0, 0.5]]
    """
    _require_columns(sweep_df, TRADEOFF_INPUT_COLUMNS, "sweep_df")
    if sweep_df.empty:
        raise ValueError("sweep_df: expected at least one row, got an empty table")
    work = sweep_df[list(TRADEOFF_INPUT_COLUMNS)].copy()
    for c in ("accuracy", "latency_ms", "memory_mb", "energy_proxy_j"):
        work[c] = pd.to_numeric(work[c], errors="coerce")
    work["accepted"] = work["accepted"].astype(bool).astype(float)
    table = work.groupby("precision", sort=False).agg(
        accuracy_mean=("accuracy", "mean"), latency_ms_mean=("latency_ms", "mean"),
        memory_mb_mean=("memory_mb", "mean"), energy_proxy_j_mean=("energy_proxy_j", "mean"),
        accepted_ratio=("accepted", "mean"),
    ).reset_index()
    return table.sort_values("latency_ms_mean", kind="stable").reset_index(drop=True)[list(TRADEOFF_COLUMNS)]

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader

    _df = sweep(default_digits_model(), digits_loader("test", 64), batch_sizes=(1, 32),
                constraints={"min_accuracy": 0.95, "max_memory_mb": 0.015}, repeats=10, power_watts=15.0,
                calibration_data=digits_loader("train", 64), unsupported="skip")
    print(_df.drop(columns=["energy_method"]).to_string())
    print(precision_tradeoff_table(_df).to_string())

# %%
def test_unit_sweep_and_tradeoffs():
    from tinytorch.benchmarking.digits import DigitsCNN, digits_loader

    torch.manual_seed(0)
    model = DigitsCNN()
    df = sweep(model, digits_loader("test", 150), ["fp32", "bf16"], [1, 4],
               {"max_memory_mb": 0.02}, repeats=4, calibration_data=digits_loader("train", 64))
    assert list(df.columns) == list(SWEEP_COLUMNS) and len(df) == 4
    fp32 = df[df.precision == "fp32"].iloc[0]
    bf16 = df[df.precision == "bf16"].iloc[0]
    assert abs(bf16.memory_mb * 2 - fp32.memory_mb) < 1e-12, "bf16 halves the memory"
    # 0.0232 MB in fp32 violates a 0.02 MB budget, 0.0116 MB in bf16 meets it
    assert not fp32.accepted and fp32.violations == "max_memory_mb" and bool(bf16.accepted)
    assert set(df.batch_size) == {1, 4}
    table = precision_tradeoff_table(df)
    assert list(table.columns) == list(TRADEOFF_COLUMNS)
    assert list(table.latency_ms_mean) == sorted(table.latency_ms_mean), "sorted by latency"
    assert table.set_index("precision").loc["bf16", "accepted_ratio"] == 1.0
    try:
        precision_tradeoff_table(df.drop(columns=["energy_proxy_j"]))
        raise AssertionError("a missing column must fail")
    except ValueError as e:
        assert "energy_proxy_j" in str(e), "the error must name the missing column"
    try:
        sweep(model, digits_loader("test"), ["fp32"], [1], {"max_fun": 1.0})
        raise AssertionError("an unknown constraint must fail")
    except ValueError as e:
        assert "max_fun" in str(e)


if __name__ == "__main__":
    test_unit_sweep_and_tradeoffs()

# %% [markdown]
# ## Saving the artifacts
#
# Three CSV tables (UTF-8) and two bar charts (PNG, 180 DPI), each written to a temporary file
# and renamed, so an interrupted run never leaves half a file; plus `system_info.json`, the
# machine the figures came from.

# %%
#| export
HARDWARE_ARTIFACTS = {
    "layerwise_breakdown": "layerwise_breakdown.csv",
    "precision_tradeoffs": "precision_tradeoffs.csv",
    "hardware_summary": "hardware_summary.csv",
    "layerwise_activation_memory": "layerwise_activation_memory.png",
    "layerwise_macs": "layerwise_macs.png",
    "system_info": "system_info.json",
}
PLOT_DPI = 180


def _bar_chart(path: Path, labels: Sequence[str], values: Sequence[float], ylabel: str, title: str) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(4.0, 0.6 * len(labels) + 1.5), 3.2))
    ax = fig.add_subplot()
    ax.bar(range(len(values)), values, color="#4C72B0")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fig.savefig(tmp, dpi=PLOT_DPI, bbox_inches="tight", format="png")
    os.replace(tmp, path)
    return path


def save_hardware_artifacts(output_dir: str | Path, layer_df: pd.DataFrame, tradeoff_df: pd.DataFrame,
                            summary: dict[str, Any]) -> dict[str, Path]:
    """Write the layer table, the precision trade-offs, the summary, two charts and system info.

    Returns {artifact name: path} with the names of `HARDWARE_ARTIFACTS`.
    """
    _require_columns(layer_df, LAYERWISE_COLUMNS, "layer_df")
    _require_columns(tradeoff_df, TRADEOFF_COLUMNS, "tradeoff_df")
    if not isinstance(summary, dict) or any(k not in summary for k in SUMMARY_KEYS):
        raise ValueError(f"summary: expected the dict from summarize_hardware with keys {list(SUMMARY_KEYS)}")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / v for k, v in HARDWARE_ARTIFACTS.items()}
    write_atomic(paths["layerwise_breakdown"], layer_df.to_csv(index=False))
    write_atomic(paths["precision_tradeoffs"], tradeoff_df.to_csv(index=False))
    write_atomic(paths["hardware_summary"], pd.DataFrame([summary]).to_csv(index=False))
    labels = [f"{i}:{name}" for i, name in enumerate(layer_df["layer"])]
    _bar_chart(paths["layerwise_activation_memory"], labels, [v / 1024 for v in layer_df["activation_bytes"]],
               "activation memory (KB)", "Activation memory per layer call")
    _bar_chart(paths["layerwise_macs"], labels, list(layer_df["macs"]), "MACs", "Multiply-accumulates per layer call")
    write_json(paths["system_info"], system_info())
    return paths

# %%
def test_unit_save_hardware_artifacts():
    import tempfile

    from PIL import Image
    from tinytorch.benchmarking.digits import DigitsCNN

    layers = estimate_layerwise_stats(DigitsCNN(), 1, (1, 8, 8))
    summary = summarize_hardware(layers, latency_ms=0.1, memory_bandwidth_gbps=10.0)
    table = pd.DataFrame([{"precision": "fp32", "accuracy_mean": 0.9, "latency_ms_mean": 0.1,
                           "memory_mb_mean": 0.02, "energy_proxy_j_mean": None, "accepted_ratio": 1.0}])
    with tempfile.TemporaryDirectory() as tmp:
        paths = save_hardware_artifacts(Path(tmp) / "hw", layers, table, summary)
        assert set(paths) == set(HARDWARE_ARTIFACTS) and all(p.exists() for p in paths.values())
        back = pd.read_csv(paths["layerwise_breakdown"], encoding="utf-8")
        assert list(back.columns) == list(LAYERWISE_COLUMNS) and back["macs"].sum() == layers["macs"].sum()
        assert list(pd.read_csv(paths["precision_tradeoffs"]).columns) == list(TRADEOFF_COLUMNS)
        assert set(SUMMARY_KEYS) <= set(pd.read_csv(paths["hardware_summary"]).columns)
        for name in ("layerwise_activation_memory", "layerwise_macs"):
            dpi = Image.open(paths[name]).info.get("dpi")
            assert dpi is not None and round(dpi[0]) == PLOT_DPI, f"{name}: expected {PLOT_DPI} DPI, got {dpi}"
        assert not list(Path(tmp, "hw").glob(".*tmp*")), "no temporary files left behind"


if __name__ == "__main__":
    test_unit_save_hardware_artifacts()

# %%
def test_module():
    test_unit_estimate_layerwise_stats()
    test_unit_roofline_estimate()
    test_unit_summarize_hardware()
    test_unit_sweep_and_tradeoffs()
    test_unit_save_hardware_artifacts()


if __name__ == "__main__":
    test_module()
