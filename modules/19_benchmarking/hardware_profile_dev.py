# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, hardware profiles: budgets an edge device imposes
#
# The hardware analysis notebook asked *why* a model is as fast as it is. This one asks the
# deployment engineer's questions:
#
# - **Will the batch fit?** A batch of `B` samples of `F` features at `b` bytes each needs
#   `B·F·b` bytes. If the device cannot hold it, halve `B` until it can.
# - **How busy is the device?** Utilization = work used ÷ capacity, between 0 and 1.
# - **Can it keep up with a stream?** A sensor delivering one frame every 20 ms needs every
#   frame processed in under 20 ms: stream utilization = compute time ÷ stream interval.
# - **Which operator is the bottleneck, and is it the cache?**
#
# ```
#  model ──Profiler.profile_forward_pass──> per-operator latency (measured here)      ┐
#        └─estimate_layerwise_stats + roofline on a device spec──> (estimated there)  ├─> profile table
#                                                                                     ┘   ├ operator_profile
#                                                                                         ├ totals
#                                                                                         ├ precision_tradeoffs
#                                                                                         └ edge_constraints
# ```

# %%
#| default_exp benchmarking.hardware_profile

# %%
#| export
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
from torch import nn

from tinytorch.benchmarking.hardware import ROOFLINE_METHOD, estimate_layerwise_stats, roofline_estimate
from tinytorch.benchmarking.results import write_atomic, write_json
from tinytorch.profiling.profiler import Profiler

# %% [markdown]
# ## A device, as the numbers that constrain a model
#
# `HardwareProfile` holds what a budget check needs: the memory available to the model (MB,
# 2^20 bytes), and, when known, peak compute (MAC/s), memory bandwidth (GB/s, 1e9 bytes) and
# the cache size (KB). `source` says where the figures come from — a datasheet, or a
# measurement on this machine.

# %%
#| export
MB = 2**20
KB = 2**10


def _positive(value: Any, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{arg}: expected a positive number, got {value!r}")
    return float(value)


def _positive_int(value: Any, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{arg}: expected an int >= 1, got {value!r}")
    return value


@dataclass
class HardwareProfile:
    """The resource limits of a deployment target.

    >>> HardwareProfile("tiny-mcu", memory_limit_mb=0.25, peak_macs_per_s=1.8e8).memory_limit_mb
    0.25
    """

    name: str
    memory_limit_mb: float
    peak_macs_per_s: float | None = None
    memory_bandwidth_gbps: float | None = None
    cache_kb: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: expected a non-empty string, got {self.name!r}")
        _positive(self.memory_limit_mb, "memory_limit_mb")
        for arg in ("peak_macs_per_s", "memory_bandwidth_gbps", "cache_kb"):
            if getattr(self, arg) is not None:
                _positive(getattr(self, arg), arg)


def estimate_batch_memory_mb(batch_size: int, n_features: int, bytes_per_feature: int = 8) -> float:
    """Memory (MB) of one input batch: batch_size × n_features × bytes_per_feature.

    The default of 8 bytes is float64 (numpy's default); a float32 tensor needs 4.

    >>> estimate_batch_memory_mb(1024, 1024, 4)
    4.0
    """
    return (_positive_int(batch_size, "batch_size") * _positive_int(n_features, "n_features")
            * _positive_int(bytes_per_feature, "bytes_per_feature")) / MB

# %% [markdown]
# ## Fitting the batch to the device
#
# Larger batches use the hardware better, but a batch that does not fit fails outright (or
# swaps, which is worse). The simple policy: start from the batch size you want and halve it
# until the batch fits the memory limit. If even one sample does not fit, no batch size will:
# that is an error for the caller (a smaller model, fewer features, or a bigger device).
#
# **Your task.** Complete `auto_adjust_batch_size`.
#
# - *Approach:* validate `memory_limit_mb` (> 0); `b = batch_size`; while
#   `estimate_batch_memory_mb(b, n_features, bytes_per_feature)` exceeds the limit and `b > 1`,
#   halve `b` (integer division); if `b == 1` still does not fit, raise a `ValueError` that
#   says how much one sample needs and what the limit is.
# - *Example:* 4096 features × 8 bytes = 32 KB per sample; with a 1 MB limit, 100 → 50 → 25
#   (25 × 32 KB = 0.78 MB fits).
# - *Hints:* a batch exactly at the limit fits.

# %% nbgrader={"grade": false, "grade_id": "hardware-profile-auto-batch", "solution": true, "schema_version": 3}
#| export
def auto_adjust_batch_size(batch_size: int, n_features: int, memory_limit_mb: float,
                           bytes_per_feature: int = 8) -> int:
    """The largest of batch_size, batch_size // 2, batch_size // 4, ... whose batch fits memory_limit_mb.

    >>> auto_adjust_batch_size(100, 4096, 1.0)
    25
    """
    ### BEGIN SOLUTION
    limit = _positive(memory_limit_mb, "memory_limit_mb")
    b = _positive_int(batch_size, "batch_size")
    while b > 1 and estimate_batch_memory_mb(b, n_features, bytes_per_feature) > limit:
        b //= 2
    one = estimate_batch_memory_mb(b, n_features, bytes_per_feature)
    if one > limit:
        raise ValueError(f"memory_limit_mb: even a batch of 1 needs {one:.4g} MB "
                         f"({n_features} features x {bytes_per_feature} bytes), more than the {limit:g} MB limit")
    return b
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-hardware-profile-auto-batch", "locked": true, "points": 4, "schema_version": 3}
def test_unit_auto_adjust_batch_size():
    assert auto_adjust_batch_size(100, 4096, 1.0) == 25, "32 KB per sample: 100 -> 50 -> 25 fits 1 MB"
    assert auto_adjust_batch_size(32, 4096, 1.0) == 32, "32 x 32 KB = exactly 1 MB fits"
    assert auto_adjust_batch_size(33, 4096, 1.0) == 16, "33 does not fit; halving gives 16"
    assert auto_adjust_batch_size(7, 10, 100.0) == 7, "a batch that fits is kept"
    assert auto_adjust_batch_size(64, 1024, 0.01, bytes_per_feature=4) == 2, "4 KB per sample in 10.24 KB: 2"
    try:
        auto_adjust_batch_size(8, 2**20, 1.0)  # one sample = 8 MB
        raise AssertionError("a sample larger than the limit must raise ValueError")
    except ValueError as e:
        assert "memory_limit_mb" in str(e), \
            f"the error should name the argument 'memory_limit_mb' (even one sample does not fit it), got: {e}"
    for bad in (0, -1.0):
        try:
            auto_adjust_batch_size(8, 16, bad)
            raise AssertionError(f"memory_limit_mb={bad} must raise ValueError")
        except ValueError as e:
            assert "memory_limit_mb" in str(e), f"the error should name the argument 'memory_limit_mb', got: {e}"


if __name__ == "__main__":
    test_unit_auto_adjust_batch_size()

# %% [markdown]
# ## Utilization
#
# `compute_utilization(used, capacity)` is `used / capacity` clipped to [0, 1]: how much of a
# resource a workload occupies. A capacity that is not positive is a configuration error, not
# a zero; a workload above capacity reads as 1.0 (fully used — check `used > capacity` yourself
# if you need to know by how much).

# %%
#| export
def compute_utilization(used: float, capacity: float) -> float:
    """Fraction (0..1) of `capacity` that `used` occupies.

    >>> compute_utilization(30.0, 120.0)
    0.25
    """
    cap = _positive(capacity, "capacity")
    if isinstance(used, bool) or not isinstance(used, (int, float)) or not math.isfinite(used) or used < 0:
        raise ValueError(f"used: expected a number >= 0, got {used!r}")
    return min(1.0, used / cap)

# %%
def test_unit_compute_utilization():
    assert compute_utilization(30.0, 120.0) == 0.25
    assert compute_utilization(0, 5) == 0.0
    assert compute_utilization(200, 100) == 1.0, "over capacity reads as fully used"
    for used, cap, arg in ((1, 0, "capacity"), (1, -3, "capacity"), (-1, 5, "used"), (1, float("nan"), "capacity")):
        try:
            compute_utilization(used, cap)
            raise AssertionError(f"compute_utilization({used}, {cap}) must fail")
        except ValueError as e:
            assert arg in str(e)


if __name__ == "__main__":
    test_unit_compute_utilization()

# %% [markdown]
# ## The profile table
#
# `build_hardware_profile_table(model, input_shape, ...)` has two modes:
#
# - **measured** (no `device_profile`): every operator (leaf layer call) is timed alone on the
#   input it received in a real pass (`Profiler.profile_forward_pass`, the shared timing core);
#   the whole model is timed too. The sum of operator times is usually *larger* than the model's
#   time for tiny layers (each timed call pays its own dispatch), and smaller for big ones.
# - **estimated** (a `device_profile` with peak MAC/s and bandwidth): each operator's latency is
#   its roofline bound on that device — labelled `estimated: roofline on <device>`.
#
# Operator memory is its parameter bytes plus its output bytes (KB, 2^10 bytes).
# `precision_tradeoffs` is arithmetic on the parameter count (the precision sweep measures the
# converted models). `edge_constraints` compares the largest operator working set with the
# cache, and names the slowest operator.

# %%
#| export
OPERATOR_COLUMNS = ("operator", "latency_ms", "memory_kb", "method")
TOTALS_KEYS = ("latency_ms", "memory_kb", "estimated_bandwidth_mb_s", "stream_utilization")


def _host_cache_kb(level: int = 2) -> float | None:
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(root.glob("index*")):
        try:
            if int((index / "level").read_text().strip()) != level:
                continue
            if (index / "type").read_text().strip() not in ("Unified", "Data"):
                continue
            size = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        factor = {"K": 1, "M": 1024}.get(size[-1:], None)
        if factor is not None and size[:-1].isdigit():
            return float(int(size[:-1]) * factor)
    return None


def build_hardware_profile_table(
    model: nn.Module,
    input_shape: Sequence[int],
    *,
    stream_interval_ms: float | None = None,
    device_profile: HardwareProfile | None = None,
    samples: int = 10,
) -> dict[str, Any]:
    """Operator profile, totals, precision trade-offs and edge constraints for one forward pass.

    `input_shape` includes the batch, e.g. (1, 1, 8, 8). Without `device_profile` operator
    latencies are measured on this machine; with one they are roofline estimates for it.

    >>> from tinytorch.benchmarking.digits import DigitsCNN
    >>> p = build_hardware_profile_table(DigitsCNN(), (1, 1, 8, 8), samples=3)
    >>> list(p)
    ['operator_profile', 'totals', 'precision_tradeoffs', 'edge_constraints']
    """
    shape = tuple(input_shape)
    if len(shape) < 2:
        raise ValueError(f"input_shape: expected (batch, *sample_shape) such as (1, 1, 8, 8), got {input_shape!r}")
    if stream_interval_ms is not None:
        _positive(stream_interval_ms, "stream_interval_ms")
    if device_profile is not None and not isinstance(device_profile, HardwareProfile):
        raise TypeError(f"device_profile: expected a HardwareProfile or None, got {type(device_profile).__name__}")
    if device_profile is None:
        df = Profiler().profile_forward_pass(model, shape, samples=_positive_int(samples, "samples"))
        method = "measured: each operator timed alone on its recorded input (timing core median)"
        latencies = [float(v) for v in df["latency_ms"]]
        model_latency = float(df.attrs["total_latency_ms"])
        cache_kb, cache_source = _host_cache_kb(), "this machine's L2 (sysfs)"
        where = "this machine"
    else:
        if device_profile.peak_macs_per_s is None or device_profile.memory_bandwidth_gbps is None:
            raise ValueError(f"device_profile: '{device_profile.name}' needs peak_macs_per_s and "
                             "memory_bandwidth_gbps for roofline estimates")
        df = estimate_layerwise_stats(model, shape[0], shape[1:])
        method = f"estimated: roofline on {device_profile.name}"
        latencies = [
            roofline_estimate(int(r.macs), int(r.parameter_bytes + r.activation_bytes),
                              device_profile.peak_macs_per_s, device_profile.memory_bandwidth_gbps * 1e9)["latency_ms"]
            for r in df.itertuples()
        ]
        model_latency = None
        cache_kb, cache_source = device_profile.cache_kb, f"{device_profile.name} spec"
        where = device_profile.name
    memory_bytes = [int(p + a) for p, a in zip(df["parameter_bytes"], df["activation_bytes"])]
    ops = pd.DataFrame({"operator": [str(v) for v in df["layer"]], "latency_ms": latencies,
                        "memory_kb": [b / KB for b in memory_bytes], "method": method},
                       columns=list(OPERATOR_COLUMNS))

    total_ms = float(sum(latencies))
    total_bytes = sum(memory_bytes)
    totals: dict[str, Any] = {
        "latency_ms": total_ms,
        "memory_kb": total_bytes / KB,
        "estimated_bandwidth_mb_s": (total_bytes / MB) / (total_ms / 1e3) if total_ms > 0 else None,
        "stream_utilization": (total_ms / stream_interval_ms) if stream_interval_ms is not None else None,
        "latency_method": method,
        "model_latency_ms": model_latency,
        "stream_interval_ms": stream_interval_ms,
    }
    if stream_interval_ms is None:
        totals["stream_utilization_reason"] = "no stream_interval_ms given"

    n_params = Profiler().count_parameters(model)
    precision_tradeoffs = {
        "fp32_memory_kb": n_params * 4 / KB,
        "fp16_memory_kb": n_params * 2 / KB,
        "int8_memory_kb": n_params * 1 / KB,
        "method": "arithmetic: parameter count x bytes per element",
        "note": ("int8 also stores scales and zero points, and whether a precision is faster depends on the "
                 "kernels the target has; measure converted models with the precision sweep"),
    }

    largest = ops.loc[ops["memory_kb"].idxmax()]
    if cache_kb is None:
        cache_sensitivity = f"unknown: no cache size for {where}"
    elif largest.memory_kb <= cache_kb:
        cache_sensitivity = (f"low: the largest operator working set ({largest.operator}, {largest.memory_kb:.1f} KB) "
                             f"fits the {cache_kb:g} KB cache ({cache_source})")
    else:
        cache_sensitivity = (f"high: {largest.operator} needs {largest.memory_kb:.1f} KB, more than the "
                             f"{cache_kb:g} KB cache ({cache_source}); small batches or tiling keep it in cache")
    slow = ops.loc[ops["latency_ms"].idxmax()]
    share = slow.latency_ms / total_ms if total_ms > 0 else 0.0
    bottleneck = f"{slow.operator}: {share:.0%} of operator latency on {where}"
    if device_profile is not None:
        row = df.iloc[int(ops["latency_ms"].idxmax())]
        roof = roofline_estimate(int(row.macs), int(row.parameter_bytes + row.activation_bytes),
                                 device_profile.peak_macs_per_s, device_profile.memory_bandwidth_gbps * 1e9)
        bottleneck += f" ({roof['bound']}, {ROOFLINE_METHOD})"
    return {
        "operator_profile": ops,
        "totals": totals,
        "precision_tradeoffs": precision_tradeoffs,
        "edge_constraints": {"cache_sensitivity": cache_sensitivity, "bottleneck": bottleneck},
    }


# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model

    _p = build_hardware_profile_table(default_digits_model(), (1, 1, 8, 8), stream_interval_ms=20.0)
    print(_p["operator_profile"].to_string())
    print(_p["totals"])
    print(_p["edge_constraints"])

# %%
def test_unit_build_hardware_profile_table():
    from tinytorch.benchmarking.digits import DigitsCNN

    model = DigitsCNN()
    p = build_hardware_profile_table(model, (1, 1, 8, 8), stream_interval_ms=20.0, samples=3)
    ops = p["operator_profile"]
    assert list(ops.columns) == list(OPERATOR_COLUMNS) and len(ops) == 7, "one row per layer call (7 in DigitsCNN)"
    assert (ops["latency_ms"] > 0).all() and ops["method"].iloc[0].startswith("measured")
    conv2 = ops[ops.operator == "conv2"].iloc[0]
    assert abs(conv2.memory_kb - (18560 + 2048) / 1024) < 1e-9, "conv2: weights 18,560 B + output 2,048 B"
    t = p["totals"]
    assert all(k in t for k in TOTALS_KEYS)
    assert abs(t["latency_ms"] - ops["latency_ms"].sum()) < 1e-12
    assert abs(t["stream_utilization"] - t["latency_ms"] / 20.0) < 1e-12
    assert abs(p["precision_tradeoffs"]["fp32_memory_kb"] - 6090 * 4 / 1024) < 1e-9
    assert p["precision_tradeoffs"]["int8_memory_kb"] * 4 == p["precision_tradeoffs"]["fp32_memory_kb"]
    # estimated mode: roofline per operator on a described device
    mcu = HardwareProfile("mcu", memory_limit_mb=0.25, peak_macs_per_s=1e8, memory_bandwidth_gbps=0.5, cache_kb=16)
    e = build_hardware_profile_table(model, (1, 1, 8, 8), device_profile=mcu)
    conv2e = e["operator_profile"].set_index("operator").loc["conv2"]
    expected = max(73728 / 1e8, (18560 + 2048) / 0.5e9) * 1e3
    assert abs(conv2e.latency_ms - expected) < 1e-12 and conv2e.method.startswith("estimated")
    assert e["totals"]["stream_utilization"] is None and "stream_interval_ms" in e["totals"]["stream_utilization_reason"]
    assert e["edge_constraints"]["cache_sensitivity"].startswith("high"), "conv2's 20 KB exceed a 16 KB cache"
    assert e["edge_constraints"]["bottleneck"].startswith("conv2")
    try:
        build_hardware_profile_table(model, (1, 1, 8, 8), device_profile=HardwareProfile("x", 1.0))
        raise AssertionError("a profile without peak figures cannot give estimates")
    except ValueError as err:
        assert "peak_macs_per_s" in str(err)


if __name__ == "__main__":
    test_unit_build_hardware_profile_table()

# %% [markdown]
# ## Writing the profile
#
# `operator_profile.csv` (one row per operator) and `hardware_totals.csv` (one row), UTF-8,
# written atomically; `hardware_profile.json` keeps all four sections together.

# %%
#| export
PROFILE_ARTIFACTS = {"operator_profile": "operator_profile.csv", "hardware_totals": "hardware_totals.csv",
                     "hardware_profile": "hardware_profile.json"}


def write_hardware_profile_artifacts(profile: dict[str, Any], output_dir: str | Path) -> dict[str, Path]:
    """Write a `build_hardware_profile_table` result; returns {artifact name: path}."""
    sections = ("operator_profile", "totals", "precision_tradeoffs", "edge_constraints")
    missing = [k for k in sections if k not in profile] if isinstance(profile, dict) else list(sections)
    if missing:
        raise ValueError(f"profile: missing section(s) {missing}; expected the dict from build_hardware_profile_table")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / v for k, v in PROFILE_ARTIFACTS.items()}
    ops = pd.DataFrame(profile["operator_profile"])
    write_atomic(paths["operator_profile"], ops.to_csv(index=False))
    write_atomic(paths["hardware_totals"], pd.DataFrame([profile["totals"]]).to_csv(index=False))
    everything = {"operator_profile": ops.to_dict(orient="records"),
                  **{k: profile[k] for k in sections[1:]}}
    write_json(paths["hardware_profile"], everything)
    return paths

# %%
def test_unit_write_hardware_profile_artifacts():
    import tempfile

    from tinytorch.benchmarking.digits import DigitsCNN

    mcu = HardwareProfile("mcu", memory_limit_mb=0.25, peak_macs_per_s=1e8, memory_bandwidth_gbps=0.5)
    p = build_hardware_profile_table(DigitsCNN(), (2, 1, 8, 8), device_profile=mcu, stream_interval_ms=50.0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_hardware_profile_artifacts(p, tmp)
        ops = pd.read_csv(paths["operator_profile"], encoding="utf-8")
        assert list(ops.columns) == list(OPERATOR_COLUMNS) and len(ops) == len(p["operator_profile"])
        totals = pd.read_csv(paths["hardware_totals"])
        assert set(TOTALS_KEYS) <= set(totals.columns) and len(totals) == 1
        assert json.loads(paths["hardware_profile"].read_text())["edge_constraints"] == p["edge_constraints"]
    try:
        write_hardware_profile_artifacts({"totals": {}}, "/tmp")
        raise AssertionError("an incomplete profile must fail")
    except ValueError as e:
        assert "operator_profile" in str(e)


if __name__ == "__main__":
    test_unit_write_hardware_profile_artifacts()

# %%
def test_module():
    test_unit_auto_adjust_batch_size()
    test_unit_compute_utilization()
    test_unit_build_hardware_profile_table()
    test_unit_write_hardware_profile_artifacts()


if __name__ == "__main__":
    test_module()
