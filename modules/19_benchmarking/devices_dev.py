# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, target devices: will it run *there*?
#
# You measure on a laptop; you deploy on a microcontroller with 128 KB of SRAM, a Raspberry Pi,
# or a Jetson. You cannot time the model on a device you do not have, but you can answer three
# questions from its datasheet — honestly labelled as estimates:
#
# 1. **Do the weights fit the Flash?** (an MCU executes weights in place from Flash)
# 2. **Do the activations fit the RAM?** (the largest pair of tensors alive at once)
# 3. **How fast could it be at best?** (the roofline bound from peak MAC/s and memory bandwidth)
#
# and you can measure, on the host, the metrics an edge deployment watches: parameter size vs
# file size, startup time, inference time with pre/post-processing, error rate, CPU workload,
# clock, temperature (where a sensor is readable) and FLOPs.
#
# ```
#  TARGET_DEVICES (datasheet figures, each with its source)
#        │                         layer stats (Profiler hooks)
#        ▼                                 │
#  device_fit(model, shape, device) ◀──────┘──> weights vs Flash, activations vs RAM, roofline ms
#  measure_watch_metrics(model, ...) ──> host measurements, each with its method
#  benchmark_table_markdown(rows)    ──> the benchmark table in the course's Markdown format
# ```

# %%
#| default_exp benchmarking.devices

# %%
#| export
from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd
import psutil
import torch
from torch import nn

from tinytorch.benchmarking.hardware import (
    ROOFLINE_METHOD, SWEEP_COLUMNS, TRADEOFF_COLUMNS, estimate_layerwise_stats, measure_memory_bandwidth_gbps,
    measure_peak_gmacs, precision_tradeoff_table, roofline_estimate, save_hardware_artifacts, summarize_hardware, sweep,
)
from tinytorch.benchmarking.hardware_profile import (
    HardwareProfile, build_hardware_profile_table, write_hardware_profile_artifacts,
)
from tinytorch.benchmarking.energy import measure_energy
from tinytorch.benchmarking.metrics import PRECISIONS, check_precision, evaluate_accuracy, model_memory_mb
from tinytorch.benchmarking.results import write_atomic, write_json
from tinytorch.profiling.profiler import Profiler
from tinytorch.profiling.timing import adapt, system_info, time_callable, time_model

# %% [markdown]
# ## The target devices
#
# Each figure carries its source. Clock, RAM and Flash are vendor figures. Peak MAC/s and
# memory bandwidth are rarely printed for MCUs, so they are **derived** from the core's
# documented issue rate and bus width × clock, and say so. They are ceilings for labelled
# estimates, not measurements: real kernels reach a fraction of them.
#
# | device | core | clock | peak fp32 MAC/s | bandwidth | RAM | Flash |
# |---|---|---|---|---|---|---|
# | STM32F446 | Cortex-M4F | 180 MHz | 0.18 G | 0.72 GB/s | 128 KB | 512 KB |
# | STM32F746 | Cortex-M7 | 216 MHz | 0.22 G | 1.7 GB/s | 320 KB | 1 MB |
# | STM32H743 | Cortex-M7 | 480 MHz | 0.48 G | 3.8 GB/s | 1 MB | 2 MB |
# | Raspberry Pi 4 (4 GB) | 4× Cortex-A72 | 1.5 GHz | 24 G | 12.8 GB/s | 4 GB | microSD |
# | Jetson Nano | 128-core Maxwell GPU | 921 MHz | 118 G | 25.6 GB/s | 4 GB | 16 GB eMMC |

# %%
#| export
KB = 2**10


@dataclass(frozen=True)
class TargetDevice:
    """Datasheet figures of a deployment target, each with its source.

    `peak_macs_per_s` maps a precision to a peak rate, or to None where the device has no native
    arithmetic for it. `weights_in_ram` is False for MCUs that execute weights from Flash.
    """

    key: str
    name: str
    processor: str
    clock_mhz: float
    peak_macs_per_s: dict[str, float | None]
    memory_bandwidth_gbps: float
    ram_kb: float
    flash_kb: float | None
    weights_in_ram: bool
    sources: dict[str, str] = field(default_factory=dict)
    cache_kb: float | None = None

    def hardware_profile(self, precision: str = "fp32") -> HardwareProfile:
        "This device as a `HardwareProfile` (for `build_hardware_profile_table`) in `precision`."
        peak = self.peak_macs_per_s.get(check_precision(precision))
        return HardwareProfile(self.name, memory_limit_mb=self.ram_kb / KB, peak_macs_per_s=peak,
                               memory_bandwidth_gbps=self.memory_bandwidth_gbps, cache_kb=self.cache_kb,
                               source="; ".join(f"{k}: {v}" for k, v in self.sources.items()))


_ST = "STMicroelectronics {part} datasheet / product page (st.com)"
_DERIVED_MCU = ("derived: {per_cycle} MAC/cycle x clock ({how}); an upper bound, figure approximate")
TARGET_DEVICES: dict[str, TargetDevice] = {
    "stm32f446": TargetDevice(
        "stm32f446", "STM32F446 (Cortex-M4F)", "Arm Cortex-M4 with FPU", 180.0,
        {"fp32": 180e6, "fp16": None, "bf16": None, "int8": 360e6}, 0.72, 128.0, 512.0, False,
        {"clock_mhz": _ST.format(part="STM32F446xC/E"), "ram_kb": _ST.format(part="STM32F446xC/E"),
         "flash_kb": _ST.format(part="STM32F446xE (512 KB variant)"),
         "peak_macs_per_s": _DERIVED_MCU.format(per_cycle="fp32 1 / int8 2",
                                                how="FPU multiply-accumulate; SMLAD dual 16-bit MAC as used by CMSIS-NN")
         + "; fp16/bf16: no native arithmetic on Cortex-M4",
         "memory_bandwidth_gbps": "derived: 32-bit AHB bus x 180 MHz = 0.72 GB/s, figure approximate"}),
    "stm32f746": TargetDevice(
        "stm32f746", "STM32F746 (Cortex-M7)", "Arm Cortex-M7 with FPU", 216.0,
        {"fp32": 216e6, "fp16": None, "bf16": None, "int8": 432e6}, 1.728, 320.0, 1024.0, False,
        {"clock_mhz": _ST.format(part="STM32F745xx/STM32F746xx"), "ram_kb": _ST.format(part="STM32F746xx"),
         "flash_kb": _ST.format(part="STM32F746xG (1 MB variant)"),
         "peak_macs_per_s": _DERIVED_MCU.format(per_cycle="fp32 1 / int8 2", how="pipelined FPU MAC; SMLAD")
         + "; fp16/bf16: no native arithmetic on Cortex-M7",
         "memory_bandwidth_gbps": "derived: 64-bit AXI bus x 216 MHz = 1.73 GB/s, figure approximate"},
        cache_kb=4.0),
    "stm32h743": TargetDevice(
        "stm32h743", "STM32H743 (Cortex-M7)", "Arm Cortex-M7 with double-precision FPU", 480.0,
        {"fp32": 480e6, "fp16": None, "bf16": None, "int8": 960e6}, 3.84, 1024.0, 2048.0, False,
        {"clock_mhz": _ST.format(part="STM32H742xI/G STM32H743xI/G"),
         "ram_kb": _ST.format(part="STM32H743xI") + " (1 MB total, including TCM)",
         "flash_kb": _ST.format(part="STM32H743xI (2 MB variant)"),
         "peak_macs_per_s": _DERIVED_MCU.format(per_cycle="fp32 1 / int8 2", how="pipelined FPU MAC; SMLAD")
         + "; fp16/bf16: no native arithmetic on Cortex-M7",
         "memory_bandwidth_gbps": "derived: 64-bit AXI bus x 480 MHz = 3.84 GB/s, figure approximate"},
        cache_kb=16.0),
    "rpi4": TargetDevice(
        "rpi4", "Raspberry Pi 4 Model B (4 GB)", "Broadcom BCM2711, 4x Arm Cortex-A72", 1500.0,
        {"fp32": 24e9, "fp16": None, "bf16": None, "int8": 48e9}, 12.8, 4 * 1024 * 1024.0, None, True,
        {"clock_mhz": "Raspberry Pi 4 Model B product brief (raspberrypi.com): 1.5 GHz (later boards 1.8 GHz)",
         "ram_kb": "Raspberry Pi 4 Model B product brief: 1/2/4/8 GB LPDDR4-3200 (4 GB model here)",
         "flash_kb": "no on-board flash: boots from a microSD card, size depends on the card",
         "peak_macs_per_s": ("derived: 4 cores x 1.5 GHz x 4 fp32 MAC/cycle (one 128-bit NEON FMA per cycle), "
                             "int8 x2 (widening 16-bit multiply-accumulate); ARMv8.0 has no fp16 arithmetic; "
                             "figure approximate"),
         "memory_bandwidth_gbps": "derived: LPDDR4-3200 on a 32-bit bus = 12.8 GB/s peak, figure approximate"},
        cache_kb=1024.0),
    "jetson_nano": TargetDevice(
        "jetson_nano", "NVIDIA Jetson Nano (4 GB)", "128-core Maxwell GPU + 4x Arm Cortex-A57", 921.0,
        {"fp32": 118e9, "fp16": 236e9, "bf16": None, "int8": None}, 25.6, 4 * 1024 * 1024.0, 16 * 1024 * 1024.0, True,
        {"clock_mhz": "NVIDIA Jetson Nano module data sheet (developer.nvidia.com): GPU up to 921 MHz",
         "peak_macs_per_s": ("NVIDIA Jetson Nano data sheet: 472 GFLOPS fp16 = 236 G MAC/s; fp32 half of that; "
                             "Maxwell (sm_53) has no bf16 and no int8 dot-product instructions"),
         "memory_bandwidth_gbps": "NVIDIA Jetson Nano data sheet: 4 GB 64-bit LPDDR4, 25.6 GB/s",
         "ram_kb": "NVIDIA Jetson Nano data sheet: 4 GB LPDDR4 (shared by CPU and GPU)",
         "flash_kb": "NVIDIA Jetson Nano data sheet: 16 GB eMMC 5.1 (production module; the developer kit uses microSD)"},
        cache_kb=256.0),
}


def get_device(device: str | TargetDevice) -> TargetDevice:
    """A `TargetDevice` by key (see `TARGET_DEVICES`), or the device itself.

    >>> get_device("rpi4").clock_mhz
    1500.0
    """
    if isinstance(device, TargetDevice):
        return device
    if device not in TARGET_DEVICES:
        raise ValueError(f"device: unknown target {device!r}; expected one of {sorted(TARGET_DEVICES)}")
    return TARGET_DEVICES[device]


def devices_table() -> pd.DataFrame:
    "The target devices as one table, with the source of each figure."
    rows = []
    for d in TARGET_DEVICES.values():
        rows.append({"device": d.key, "name": d.name, "processor": d.processor, "clock_mhz": d.clock_mhz,
                     **{f"peak_{p}_macs_per_s": d.peak_macs_per_s.get(p) for p in PRECISIONS},
                     "memory_bandwidth_gbps": d.memory_bandwidth_gbps, "ram_kb": d.ram_kb, "flash_kb": d.flash_kb,
                     "sources": json.dumps(d.sources)})
    return pd.DataFrame(rows)

# %%
def test_unit_devices():
    for d in TARGET_DEVICES.values():
        assert d.clock_mhz > 0 and d.ram_kb > 0 and d.memory_bandwidth_gbps > 0
        for f in ("clock_mhz", "ram_kb", "flash_kb", "peak_macs_per_s", "memory_bandwidth_gbps"):
            assert d.sources.get(f), f"{d.key}: figure {f} needs a source"
        assert d.peak_macs_per_s["fp32"] > 0
    assert len(devices_table()) == len(TARGET_DEVICES)
    assert get_device("jetson_nano").peak_macs_per_s["fp16"] * 2 == 472e9, "472 GFLOPS fp16 = 236 G MAC/s"
    try:
        get_device("esp32")
        raise AssertionError("an unknown device must fail")
    except ValueError as e:
        assert "esp32" in str(e) and "rpi4" in str(e)


if __name__ == "__main__":
    test_unit_devices()

# %% [markdown]
# ## How much RAM do activations need?
#
# During inference only a few activations are alive at once. In a chain of layers, layer `i`
# reads its input and writes its output, and after that the input can be freed; so the RAM
# needed for activations is at least the largest *input + output* pair along the chain. This is
# what TinyML deployment tools report as the arena size before buffer sharing tricks. (A
# residual block keeps its skip tensor alive in addition, so for such models it is a lower
# bound — the result says "estimated".)
#
# **Your task.** Complete `estimate_peak_activation_bytes(layer_df, input_bytes)`.
#
# - *Approach:* walk the rows in order; the first layer's input is the model input
#   (`input_bytes`), each later layer's input is the previous row's `activation_bytes`; return the
#   largest `input + activation_bytes` over the rows.
# - *Example:* input 256 B and outputs [4096, 4096, 1024] → pairs 4352, 8192, 5120 → 8192.
# - *Hints:* an empty table is a `ValueError` (nothing ran).

# %% nbgrader={"grade": false, "grade_id": "devices-peak-activation", "solution": true, "schema_version": 3}
#| export
def estimate_peak_activation_bytes(layer_df: pd.DataFrame, input_bytes: int) -> int:
    """Largest input + output bytes of one layer call, walking the layers in execution order.

    >>> df = pd.DataFrame({"activation_bytes": [4096, 4096, 1024]})
    >>> estimate_peak_activation_bytes(df, 256)
    8192
    """
    ### BEGIN SOLUTION
    if "activation_bytes" not in getattr(layer_df, "columns", ()):
        raise ValueError("layer_df: expected a table with an 'activation_bytes' column")
    if len(layer_df) == 0:
        raise ValueError("layer_df: expected at least one layer row, got none")
    peak, previous = 0, int(input_bytes)
    for out in layer_df["activation_bytes"]:
        peak = max(peak, previous + int(out))
        previous = int(out)
    return peak
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-devices-peak-activation", "locked": true, "points": 3, "schema_version": 3}
def test_unit_estimate_peak_activation_bytes():
    df = pd.DataFrame({"activation_bytes": [4096, 4096, 1024]})
    assert estimate_peak_activation_bytes(df, 256) == 8192, "relu reads 4096 and writes 4096"
    assert estimate_peak_activation_bytes(pd.DataFrame({"activation_bytes": [10]}), 5000) == 5010, \
        "a large input counts: 5000 in + 10 out"
    assert estimate_peak_activation_bytes(pd.DataFrame({"activation_bytes": [100, 1, 100]}), 1) == 101
    try:
        estimate_peak_activation_bytes(pd.DataFrame({"activation_bytes": []}), 10)
        raise AssertionError("an empty table must raise ValueError")
    except ValueError as e:
        assert "layer_df" in str(e), f"the error should name the argument 'layer_df', got: {e}"


if __name__ == "__main__":
    test_unit_estimate_peak_activation_bytes()

# %% [markdown]
# ## Does the model fit, and how fast could it be?
#
# `device_fit` puts it together for one model on one device, per precision. Weights take
# `parameters × bytes per element` (int8 adds a scale and zero point per channel, not counted
# here); activations scale with the element size too. On an MCU the weights live in Flash and
# activations in RAM; on a Pi or Jetson both live in RAM. The roofline figure uses the device's
# peak for that precision, or is `None` where the device has no native arithmetic for it.

# %%
#| export
_ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}
FIT_COLUMNS = ("device", "precision", "weights_kb", "flash_kb", "fits_flash", "peak_activation_kb", "ram_needed_kb",
               "ram_kb", "fits_ram", "macs", "bytes_moved", "roofline_latency_ms", "bound", "method")


def device_fit(model: nn.Module, input_shape: Sequence[int], device: str | TargetDevice,
               precisions: Sequence[str] = ("fp32", "fp16", "int8")) -> pd.DataFrame:
    """Per precision: do the weights fit Flash, do the activations fit RAM, and the roofline latency.

    `input_shape` includes the batch, e.g. (1, 1, 8, 8). All figures are estimates from the
    layer statistics of a float32 forward pass and the device's datasheet figures.

    >>> from tinytorch.benchmarking.digits import DigitsCNN
    >>> df = device_fit(DigitsCNN(), (1, 1, 8, 8), "stm32f446", ["int8"])
    >>> bool(df.loc[0, "fits_flash"]), bool(df.loc[0, "fits_ram"])
    (True, True)
    """
    dev = get_device(device)
    precisions = [check_precision(p) for p in precisions]
    shape = tuple(input_shape)
    if len(shape) < 2:
        raise ValueError(f"input_shape: expected (batch, *sample_shape) such as (1, 1, 8, 8), got {input_shape!r}")
    layers = estimate_layerwise_stats(model, shape[0], shape[1:])
    n_params = Profiler().count_parameters(model)
    input_elements = math.prod(shape)
    act_fp32 = estimate_peak_activation_bytes(layers, input_elements * 4)
    macs = int(layers["macs"].sum())
    rows = []
    for p in precisions:
        scale = _ELEMENT_BYTES[p] / 4
        weights = n_params * _ELEMENT_BYTES[p]
        peak_act = act_fp32 * scale
        ram_needed = peak_act + (weights if dev.weights_in_ram else 0)
        moved = weights + (int(layers["activation_bytes"].sum()) + input_elements * 4) * scale
        peak = dev.peak_macs_per_s.get(p)
        if peak is None:
            roof, bound = None, f"n/a: no {p} peak for {dev.key} (see its sources)"
        else:
            r = roofline_estimate(macs, moved, peak, dev.memory_bandwidth_gbps * 1e9)
            roof, bound = r["latency_ms"], r["bound"]
        rows.append({
            "device": dev.key, "precision": p, "weights_kb": weights / KB, "flash_kb": dev.flash_kb,
            "fits_flash": (weights / KB <= dev.flash_kb) if (dev.flash_kb is not None and not dev.weights_in_ram) else None,
            "peak_activation_kb": peak_act / KB, "ram_needed_kb": ram_needed / KB, "ram_kb": dev.ram_kb,
            "fits_ram": ram_needed / KB <= dev.ram_kb, "macs": macs, "bytes_moved": int(moved),
            "roofline_latency_ms": roof, "bound": bound,
            "method": (f"estimated: parameters x element size; largest input+output activation pair; "
                       f"{ROOFLINE_METHOD} with {dev.key} datasheet peaks"),
        })
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model

    _m = default_digits_model()
    print(pd.concat([device_fit(_m, (1, 1, 8, 8), k) for k in TARGET_DEVICES]).drop(columns=["method"]).to_string())

# %%
def test_unit_device_fit():
    from tinytorch.benchmarking.digits import DigitsCNN

    df = device_fit(DigitsCNN(), (1, 1, 8, 8), "stm32f446", ["fp32", "fp16", "int8"]).set_index("precision")
    assert abs(df.loc["fp32", "weights_kb"] - 6090 * 4 / 1024) < 1e-9 and df.loc["int8", "weights_kb"] * 4 == df.loc["fp32", "weights_kb"]
    # peak pair: conv1 reads 256 B and writes 4096 B; relu reads 4096 and writes 4096 -> 8192 B = 8 KB
    assert df.loc["fp32", "peak_activation_kb"] == 8.0, df.loc["fp32", "peak_activation_kb"]
    assert df.loc["fp32", "ram_needed_kb"] == 8.0, "on an MCU weights stay in Flash"
    assert df.loc["fp16", "roofline_latency_ms"] is None or pd.isna(df.loc["fp16", "roofline_latency_ms"]), \
        "Cortex-M4 has no fp16 arithmetic: no roofline figure"
    macs = 9216 + 73728 + 1280
    r = roofline_estimate(macs, df.loc["int8", "bytes_moved"], 360e6, 0.72e9)
    assert abs(df.loc["int8", "roofline_latency_ms"] - r["latency_ms"]) < 1e-12
    assert df.loc["int8", "method"].startswith("estimated")
    # a model too big for an MCU: 2M parameters do not fit 512 KB of Flash in fp32, but fit a Pi's RAM
    big = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 10))
    f = device_fit(big, (1, 1024), "stm32f446", ["fp32"]).iloc[0]
    assert not f.fits_flash
    pi = device_fit(big, (1, 1024), "rpi4", ["fp32"]).iloc[0]
    assert pi.fits_flash is None and bool(pi.fits_ram), "a Pi keeps weights in RAM and has no on-board Flash"
    for bad, arg in ((("nano2",), "device"), (("rpi4", ["fp64"]), "precision")):
        try:
            device_fit(big, (1, 1024), *bad)
            raise AssertionError(f"{bad} must fail")
        except ValueError as e:
            assert arg in str(e)


if __name__ == "__main__":
    test_unit_device_fit()

# %% [markdown]
# ## Watch metrics, measured on the host
#
# The course's edge template lists what to watch. What the host can measure, it measures:
#
# | metric | how |
# |---|---|
# | params size (MB) | state-dict tensors × element size |
# | model file size (MB) | `torch.save(model)` to a file, its size on disk |
# | startup time (ms) | `torch.load` of that file + first inference, timed (OS file cache warm) |
# | latency (ms) | the timing core, model forward only |
# | inference time (ms) | pre-processing → model → post-processing, timed together (when given) |
# | accuracy / error rate | labelled loader, through the adapter |
# | CPU workload (%) | `psutil` process CPU time over a timed window of inference |
# | clock (MHz) | `psutil.cpu_freq()` |
# | temperature (°C) | `psutil.sensors_temperatures()`, or `None` with the reason |
# | FLOPs | `Profiler.count_flops` (FLOPs = 2 × MACs) |
# | energy (mWh per inference) | `measure_energy`: counter, else latency × power, else `None` |

# %%
#| export
_TEMP_SENSORS = ("coretemp", "k10temp", "cpu_thermal", "cpu-thermal", "soc_thermal", "acpitz")


def read_temperature_c() -> tuple[float | None, str]:
    """(temperature in °C, where it came from) from psutil, or (None, why not).

    >>> t, how = read_temperature_c()
    >>> t is None or isinstance(t, float)
    True
    """
    reader = getattr(psutil, "sensors_temperatures", None)
    if reader is None:
        return None, "psutil.sensors_temperatures is not available on this platform"
    try:
        sensors = reader()
    except (OSError, RuntimeError) as e:
        return None, f"temperature sensors unreadable: {e}"
    for name in (*_TEMP_SENSORS, *sorted(sensors)):
        for entry in sensors.get(name, []):
            if entry.current is not None and entry.current > -273:
                return float(entry.current), f"measured: psutil sensor {name}/{entry.label or '0'}"
    return None, "no readable temperature sensor (psutil.sensors_temperatures() is empty, common in VMs)"


def _clock_mhz() -> tuple[float | None, str]:
    try:
        f = psutil.cpu_freq()
    except (OSError, NotImplementedError, RuntimeError) as e:
        return None, f"cpu frequency unreadable: {e}"
    if f is None or not f.current:
        return None, "psutil.cpu_freq() reports no frequency on this machine"
    return float(f.current), "measured: psutil.cpu_freq().current (current clock of the CPU)"


def measure_watch_metrics(
    model: nn.Module,
    input_shape: Sequence[int],
    *,
    loader: Iterable | None = None,
    preprocess: Callable[[Any], Any] | None = None,
    postprocess: Callable[[Any], Any] | None = None,
    raw_input: Any = None,
    power_watts: float | None = None,
    samples: int = 20,
    startup_runs: int = 5,
    cpu_window_s: float = 0.5,
) -> dict[str, Any]:
    """The edge watch metrics measurable on this machine, each with its method or reason.

    `input_shape` includes the batch. With `preprocess`/`postprocess`, inference time is timed on
    `raw_input` through preprocess → model → postprocess.

    >>> m = measure_watch_metrics(nn.Linear(8, 2), (1, 8), samples=3, startup_runs=2, cpu_window_s=0.1)
    >>> m["flops"], m["params_size_mb"] > 0
    (32, True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    shape = tuple(input_shape)
    if (preprocess is not None or postprocess is not None) and raw_input is None:
        raise ValueError("raw_input: preprocess/postprocess need the raw input they start from, got None")
    a = adapt(model)
    x = a.make_input(shape)
    out: dict[str, Any] = {}
    methods: dict[str, str] = {}
    reasons: dict[str, str] = {}

    out["params_size_mb"] = model_memory_mb(model)
    methods["params_size_mb"] = "measured: state-dict tensors x element size"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        torch.save(model, path)
        out["model_file_mb"] = path.stat().st_size / 2**20
        methods["model_file_mb"] = "measured: size of torch.save(model) on disk"

        def startup() -> None:
            loaded = torch.load(path, weights_only=False, map_location=a.device)
            la = adapt(loaded)
            with la.inference():
                la.forward(la.to_input(x))

        s = time_callable(startup, warmup=0, samples=startup_runs)
        out["startup_ms"] = s.median_ms
        methods["startup_ms"] = f"measured: median of {len(s.per_call_ns)} x (torch.load + first inference), file in OS cache"

    lat = time_model(model, x, samples=samples)
    out["latency_ms"] = lat.median_ms
    methods["latency_ms"] = "measured: timing core median, model forward only"
    out["throughput_sps"] = shape[0] / (lat.median_ms / 1e3)
    methods["throughput_sps"] = "derived: batch / median latency"

    if preprocess is not None or postprocess is not None:
        pre = preprocess or (lambda v: v)
        post = postprocess or (lambda v: v)
        with a.inference():
            def pipeline() -> Any:
                return post(a.forward(a.to_input(pre(raw_input))))
            pipeline()
            t = time_callable(pipeline, samples=samples, sync=a.sync)
        out["inference_ms"] = t.median_ms
        methods["inference_ms"] = "measured: timing core median of preprocess -> model -> postprocess"
    else:
        out["inference_ms"] = None
        reasons["inference_ms"] = "no preprocess/postprocess given: inference time equals latency_ms"

    if loader is not None:
        acc = evaluate_accuracy(model, loader)
        out["accuracy"], out["error_rate"] = acc, 1.0 - acc
        methods["accuracy"] = methods["error_rate"] = "measured: top-1 on the labelled loader"
    else:
        out["accuracy"] = out["error_rate"] = None
        reasons["accuracy"] = reasons["error_rate"] = "no labelled loader given"

    proc = psutil.Process()
    with a.inference():
        proc.cpu_percent(None)
        w = time_callable(lambda: a.forward(x), samples=3, min_seconds=cpu_window_s, sync=a.sync)
        cpu = proc.cpu_percent(None)
    out["cpu_workload_percent"] = cpu
    out["cpu_workload_percent_of_all_cores"] = cpu / (psutil.cpu_count() or 1)
    methods["cpu_workload_percent_of_all_cores"] = f"derived: cpu_workload_percent / {psutil.cpu_count() or 1} logical cores"
    methods["cpu_workload_percent"] = (f"measured: psutil process cpu_percent over {w.total_seconds:.2f} s of inference "
                                       f"(100 = one core busy; {w.threads} torch threads)")

    out["clock_mhz"], how = _clock_mhz()
    (methods if out["clock_mhz"] is not None else reasons)["clock_mhz"] = how
    out["temperature_c"], how = read_temperature_c()
    (methods if out["temperature_c"] is not None else reasons)["temperature_c"] = how

    out["flops"] = Profiler().count_flops(model, x)
    methods["flops"] = "counted: Profiler.count_flops (torch.utils.flop_counter), FLOPs = 2 x MACs"

    with a.inference():
        em = measure_energy(lambda: a.forward(x), power_watts=power_watts, latency_s=lat.median_ms / 1e3,
                            sync=a.sync)
    out["energy_mwh"] = em.joules_per_call / 3.6 if em.joules_per_call is not None else None
    if em.joules_per_call is None:
        reasons["energy_mwh"] = em.reason or "no energy counter and no power_watts"
    else:
        methods["energy_mwh"] = f"{em.method} (J / 3.6 = mWh per inference)"
    out["methods"], out["reasons"] = methods, reasons
    return out

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, digits_loader

    _w = measure_watch_metrics(default_digits_model(), (1, 1, 8, 8), loader=digits_loader("test"),
                               preprocess=lambda img: torch.as_tensor(img, dtype=torch.float32).div(16.0).reshape(1, 1, 8, 8),
                               postprocess=lambda logits: int(logits.argmax()), raw_input=torch.randint(0, 17, (8, 8)))
    for _k, _v in _w.items():
        if _k not in ("methods", "reasons"):
            print(f"{_k:34s} {_v!r:>26}  {_w['methods'].get(_k) or _w['reasons'].get(_k)}")

# %%
def test_unit_measure_watch_metrics():
    from tinytorch.benchmarking.digits import DigitsCNN, digits_loader

    model = DigitsCNN()
    w = measure_watch_metrics(model, (1, 1, 8, 8), loader=digits_loader("test"), preprocess=lambda v: v / 16.0,
                              raw_input=torch.full((1, 1, 8, 8), 8.0), samples=5, startup_runs=2, cpu_window_s=0.2)
    ref = torch.utils.flop_counter.FlopCounterMode(display=False)
    with ref:
        model(torch.zeros(1, 1, 8, 8))
    assert w["flops"] == ref.get_total_flops(), "FLOPs must agree with torch.utils.flop_counter"
    assert abs(w["params_size_mb"] - 6090 * 4 / 2**20) < 1e-12
    assert w["model_file_mb"] > w["params_size_mb"], "the file adds pickle framing and names to the raw tensors"
    assert w["startup_ms"] > 0 and w["latency_ms"] > 0 and w["inference_ms"] > 0
    assert abs(w["accuracy"] + w["error_rate"] - 1.0) < 1e-12
    assert w["cpu_workload_percent"] >= 0
    assert (w["temperature_c"] is None) == ("temperature_c" in w["reasons"]), "None must come with a reason"
    assert (w["clock_mhz"] is None) == ("clock_mhz" in w["reasons"])
    assert all(k in w["methods"] or k in w["reasons"] for k in w if k not in ("methods", "reasons")), \
        "every figure has a method, every missing one a reason"
    try:
        measure_watch_metrics(model, (1, 1, 8, 8), preprocess=lambda v: v)
        raise AssertionError("preprocess without raw_input must fail")
    except ValueError as e:
        assert "raw_input" in str(e)


if __name__ == "__main__":
    test_unit_measure_watch_metrics()

# %% [markdown]
# ## The benchmark table
#
# Results are shared in one Markdown table format:
#
# `| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MB)** | **Platform** | **References** |`
#
# A missing figure prints as `n/a`, never as a number.

# %%
#| export
BENCHMARK_TABLE_FIELDS = ("model", "task", "accuracy", "latency_ms", "model_size_mb", "platform", "references")


def _cell(value: Any, kind: str = "text") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if kind == "percent":
        return f"{100 * float(value):.1f}%"
    if kind == "number":
        return f"{float(value):.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def benchmark_table_markdown(rows: Iterable[dict[str, Any]]) -> str:
    """Rows as the benchmark table in Markdown (accuracy as a fraction 0..1, printed as %).

    >>> print(benchmark_table_markdown([{"model": "m", "task": "t", "accuracy": 0.9, "latency_ms": 1.5,
    ...     "model_size_mb": 0.02, "platform": "x86 CPU", "references": "-"}]).splitlines()[2])
    | m | t | 90.0% | 1.5 | 0.02 | x86 CPU | - |
    """
    rows = list(rows)
    header = ("| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MB)** | **Platform** "
              "| **References** |")
    lines = [header, "|" + "|".join(["---"] * 7) + "|"]
    for i, r in enumerate(rows):
        missing = [k for k in BENCHMARK_TABLE_FIELDS if k not in r]
        if missing:
            raise ValueError(f"rows[{i}]: missing {missing}; expected keys {list(BENCHMARK_TABLE_FIELDS)}")
        if r["accuracy"] is not None and not 0 <= float(r["accuracy"]) <= 1:
            raise ValueError(f"rows[{i}]: accuracy is a fraction in [0, 1], got {r['accuracy']!r}")
        cells = [_cell(r["model"]), _cell(r["task"]), _cell(r["accuracy"], "percent"), _cell(r["latency_ms"], "number"),
                 _cell(r["model_size_mb"], "number"), _cell(r["platform"]), _cell(r["references"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"

# %%
def test_unit_benchmark_table_markdown():
    md = benchmark_table_markdown([
        {"model": "DigitsCNN fp32", "task": "Image Classification", "accuracy": 0.9844, "latency_ms": 0.0612,
         "model_size_mb": 0.0232, "platform": "x86 CPU | 2 threads", "references": "this repo"},
        {"model": "DigitsCNN int8", "task": "Image Classification", "accuracy": None, "latency_ms": None,
         "model_size_mb": 0.0069, "platform": "x86 CPU", "references": "-"},
    ])
    lines = md.strip().splitlines()
    assert lines[0].startswith("| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MB)**")
    assert len(lines) == 4 and "98.4%" in lines[2] and "0.0612" in lines[2]
    assert "x86 CPU \\| 2 threads" in lines[2], "a | inside a cell must be escaped"
    assert lines[3].count("n/a") == 2, "missing figures print as n/a"
    try:
        benchmark_table_markdown([{"model": "m"}])
        raise AssertionError("a row without the table's fields must fail")
    except ValueError as e:
        assert "task" in str(e)


if __name__ == "__main__":
    test_unit_benchmark_table_markdown()

# %% [markdown]
# ## Everything for one model: the hardware report
#
# `write_hardware_report` runs the whole analysis for a model and writes every artifact:
#
# | file | what |
# |---|---|
# | `layerwise_breakdown.csv`, `layerwise_*.png` | per-layer MACs and bytes (counted) |
# | `sweep.csv`, `precision_tradeoffs.csv` | fp32 / fp16 / bf16 / int8 × batch sizes (measured) |
# | `hardware_summary.csv` | achieved bandwidth and compute vs this machine's measured roofs |
# | `operator_profile.csv`, `hardware_totals.csv`, `hardware_profile.json` | per-operator latency (measured) |
# | `device_fit.csv` | Flash / RAM / roofline on each target device (estimated) |
# | `watch_metrics.json` | the host watch metrics, with methods |
# | `benchmark_table.md` | the benchmark table, one row per precision |
# | `system_info.json` | the machine |
#
# `write_default_hardware_artifacts` does it for the bundled digits CNN: this is what
# `tito benchmark --hardware` runs. For a model of yours (`tito benchmark --model FILE
# --input-shape ... --hardware`) everything but the precision sweep works for any input shape:
# layer statistics come from forward hooks, the roofline summary from the measured fp32 latency,
# device fit and watch metrics from the model itself. The sweep measures *accuracy* per
# precision, so it needs labelled data that fits the model; without it (`loader=None`) it is
# "unavailable" with the reason, in `hardware_summary.csv` and `benchmark_table.md`.

# %%
#| export
def write_hardware_report(
    model: nn.Module,
    loader: Any | None,
    input_shape: Sequence[int],
    output_dir: str | Path,
    *,
    name: str = "model",
    task: str = "Image Classification",
    precisions: Sequence[str] = PRECISIONS,
    batch_sizes: Sequence[int] = (1, 32),
    constraints: dict[str, float] | None = None,
    calibration_data: Any = None,
    power_watts: float | None = None,
    devices: Sequence[str] = tuple(TARGET_DEVICES),
    repeats: int = 20,
    calibration_split: str | None = None,
    sweep_unavailable_reason: str | None = None,
) -> dict[str, Path]:
    """Run the full hardware analysis of `model` and write its artifacts; returns {name: path}.

    `input_shape` is one input batch, e.g. (1, 1, 8, 8), of any shape the model takes.
    Precisions this machine cannot run are skipped and the reason is written into
    `hardware_summary.csv` (`skipped_precisions`). With `loader=None` (no labelled data fits the
    model) the precision sweep is unavailable, with `sweep_unavailable_reason`, and the roofline
    summary uses the model's measured fp32 latency; every other artifact is written as usual.

    >>> # write_hardware_report(my_model, None, (1, 3, 32, 32), "hw", sweep_unavailable_reason="no labels")
    """
    shape = tuple(input_shape)
    if len(shape) < 2 or any(not isinstance(d, int) or d < 1 for d in shape):
        raise ValueError(f"input_shape: expected (batch, *sample_shape) of positive ints such as (1, 1, 8, 8), got {input_shape!r}")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if loader is not None:
        sweep_df = sweep(model, loader, precisions, batch_sizes, constraints, power_watts=power_watts,
                         repeats=repeats, calibration_data=calibration_data, unsupported="skip",
                         calibration_split=calibration_split)
        if sweep_df.empty:
            raise RuntimeError(f"model: no precision of {list(precisions)} ran on this machine: {sweep_df.attrs['skipped']}")
        tradeoffs = precision_tradeoff_table(sweep_df)
        base = sweep_df[(sweep_df.batch_size == min(batch_sizes))].sort_values("precision", key=lambda s: s != "fp32").iloc[0]
        base_latency_ms = float(base.latency_median_ms)
        latency_source = f"sweep: {base.precision}, batch {int(base.batch_size)}, median latency (measured)"
    else:
        reason = "unavailable: " + (sweep_unavailable_reason or "no labelled data fits this model, and the "
                                    "precision sweep measures accuracy per precision")
        sweep_df = pd.DataFrame(columns=list(SWEEP_COLUMNS))
        sweep_df.attrs["skipped"] = {p: reason for p in precisions}
        tradeoffs = pd.DataFrame(columns=list(TRADEOFF_COLUMNS))
        base_latency_ms = time_model(model, shape, samples=repeats).median_ms
        latency_source = f"time_model: fp32, input {shape}, median latency (measured); precision sweep {reason}"
    layers = estimate_layerwise_stats(model, shape[0], shape[1:])
    bandwidth, peak = measure_memory_bandwidth_gbps(), measure_peak_gmacs()
    summary = summarize_hardware(layers, base_latency_ms, bandwidth, peak_gmacs=peak)
    summary.update({
        "latency_source": latency_source,
        "bandwidth_method": "measured: 64 MB tensor copy on this machine",
        "peak_gmacs_method": "measured: 512x512x512 float32 matmul on this machine",
        "skipped_precisions": json.dumps(sweep_df.attrs["skipped"]),
    })
    paths = save_hardware_artifacts(out, layers, tradeoffs, summary)
    paths["sweep"] = write_atomic(out / "sweep.csv", sweep_df.to_csv(index=False))
    profile = build_hardware_profile_table(model, shape, samples=repeats)
    paths.update(write_hardware_profile_artifacts(profile, out))
    fit = pd.concat([device_fit(model, shape, d, [p for p in ("fp32", "fp16", "int8")]) for d in devices],
                    ignore_index=True)
    paths["device_fit"] = write_atomic(out / "device_fit.csv", fit.to_csv(index=False))
    watch = measure_watch_metrics(model, shape, loader=loader, power_watts=power_watts, samples=repeats)
    paths["watch_metrics"] = write_json(out / "watch_metrics.json", watch)
    platform = f"{system_info().get('cpu_model') or 'CPU'} ({torch.get_num_threads()} threads)"
    rows = [{"model": f"{name} {r.precision} (batch {int(r.batch_size)})", "task": task, "accuracy": r.accuracy,
             "latency_ms": r.latency_median_ms, "model_size_mb": r.memory_mb, "platform": platform,
             "references": "measured here (median latency): tinytorch.benchmarking.hardware.sweep"}
            for r in sweep_df.itertuples()]
    if loader is None:
        rows = [{"model": f"{name} fp32 (batch {shape[0]})", "task": task, "accuracy": None,
                 "latency_ms": base_latency_ms, "model_size_mb": model_memory_mb(model), "platform": platform,
                 "references": f"measured here (median latency): time_model; accuracy and precision sweep {reason}"}]
    paths["benchmark_table"] = write_atomic(out / "benchmark_table.md", benchmark_table_markdown(rows))
    return paths


def write_default_hardware_artifacts(output_dir: str | Path, *, repeats: int = 20,
                                     power_watts: float | None = None) -> dict[str, Path]:
    """The hardware report for the bundled digits CNN (trained and cached at first use).

    int8 is calibrated on the training split; accuracy is measured on the 450 test images.
    """
    from tinytorch.benchmarking.digits import DIGITS_INPUT_SHAPE, default_digits_model, digits_loader

    return write_hardware_report(
        default_digits_model(), digits_loader("test", 64), DIGITS_INPUT_SHAPE, output_dir, name="digits_cnn",
        calibration_data=digits_loader("train", 64), calibration_split="digits train split",
        power_watts=power_watts, repeats=repeats,
        constraints={"min_accuracy": 0.95},
    )

# %%
def test_unit_write_hardware_report():
    from tinytorch.benchmarking.digits import DigitsCNN, digits_loader

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_hardware_report(DigitsCNN(), digits_loader("test", 150), (1, 1, 8, 8), tmp,
                                      precisions=["fp32", "int8"], batch_sizes=[1], devices=["stm32f446"],
                                      calibration_data=digits_loader("train", 64), repeats=3)
        expected = {"layerwise_breakdown", "precision_tradeoffs", "hardware_summary", "layerwise_activation_memory",
                    "layerwise_macs", "system_info", "sweep", "operator_profile", "hardware_totals",
                    "hardware_profile", "device_fit", "watch_metrics", "benchmark_table"}
        assert set(paths) == expected and all(p.exists() and p.stat().st_size > 0 for p in paths.values())
        sweep_df = pd.read_csv(paths["sweep"])
        assert set(sweep_df.precision) == {"fp32", "int8"}
        assert "| **Model** |" in paths["benchmark_table"].read_text(encoding="utf-8")


if __name__ == "__main__":
    test_unit_write_hardware_report()

# %%
def test_unit_hardware_report_any_model():
    net = nn.Sequential(nn.Conv1d(3, 8, 5), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 28, 4))  # not an image model
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_hardware_report(net, None, (2, 3, 32), tmp, devices=["stm32f446"], repeats=3,
                                      sweep_unavailable_reason="no labelled data fits input shape (2, 3, 32)")
        assert paths["layerwise_breakdown"].exists() and paths["device_fit"].exists() and paths["watch_metrics"].exists()
        summary = pd.read_csv(paths["hardware_summary"]).iloc[0]
        assert "unavailable: no labelled data fits" in summary["skipped_precisions"]
        assert summary["latency_source"].startswith("time_model")
        layers = pd.read_csv(paths["layerwise_breakdown"])
        assert int(layers["macs"].sum()) == 2 * (8 * 3 * 5 * 28 + 8 * 28 * 4), "MACs counted for this input shape"
        assert "unavailable" in paths["benchmark_table"].read_text(encoding="utf-8")


if __name__ == "__main__":
    test_unit_hardware_report_any_model()

# %%
def test_module():
    test_unit_devices()
    test_unit_estimate_peak_activation_bytes()
    test_unit_device_fit()
    test_unit_measure_watch_metrics()
    test_unit_benchmark_table_markdown()
    test_unit_write_hardware_report()
    test_unit_hardware_report_any_model()


if __name__ == "__main__":
    test_module()
