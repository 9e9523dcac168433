# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Energy: reading the hardware's own counters
#
# Energy per inference is what a battery-powered device pays for a model. It cannot be
# computed from latency alone: two models with the same latency can draw very different power
# (one keeps the vector units busy, the other waits on memory). The only honest figure comes
# from a **hardware energy counter**:
#
# | counter | where | unit | resolution |
# |---|---|---|---|
# | Intel/AMD RAPL | `/sys/class/powercap/intel-rapl:N/energy_uj` | µJ, wraps at `max_energy_range_uj` | updated about every 1 ms |
# | NVIDIA NVML | `nvmlDeviceGetTotalEnergyConsumption` | mJ since the driver loaded | about every 10–100 ms |
#
# Three details decide whether a reading means anything:
#
# 1. **Window length.** The counters tick every millisecond or slower, so one 100 µs
#    inference is invisible. We run the model in a loop for a window of at least a second and
#    divide by the number of calls.
# 2. **Wrap-around.** RAPL's counter is a fixed-width register: after `max_energy_range_uj`
#    it starts again from zero. A reading that went *down* has wrapped once:
#    `delta = max_range - before + after`.
# 3. **Idle baseline.** The package draws power even when our model does nothing (other
#    cores, uncore, the OS). We measure the idle power over a window first and subtract
#    `idle_power × window` so the figure is the model's *marginal* energy.
#
# When no counter is readable (most cloud VMs, and RAPL is root-only on Linux ≥ 5.10), the
# only figure we can give is an **estimate**, `latency × power_watts` with a power the user
# supplies, and it is labelled as one. With neither, the energy is `None` and the reason says
# why. Nothing here invents a number.

# %%
#| default_exp benchmarking.energy

# %%
#| export
from __future__ import annotations

import re
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from tinytorch.profiling.timing import time_callable

# %% [markdown]
# ## RAPL: the CPU package counter
#
# The reader finds the top-level RAPL zones under a powercap root (`intel-rapl:0`,
# `intel-rapl:1`, … one per CPU package; their sub-zones `intel-rapl:0:0` are parts of the
# package and would be counted twice). The root is a parameter, so the same code reads the
# real `/sys/class/powercap` or a directory a test writes.

# %%
#| export
DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
_TOP_ZONE = re.compile(r"^intel-rapl:\d+$")


def rapl_delta_uj(before: int, after: int, max_range_uj: int) -> int:
    """Energy (µJ) between two readings of a counter that wraps at `max_range_uj`.

    At most one wrap is assumed, which holds for windows shorter than the wrap period
    (tens of minutes at typical package power).

    >>> rapl_delta_uj(100, 350, 1000), rapl_delta_uj(900, 50, 1000)
    (250, 150)
    """
    if max_range_uj <= 0:
        raise ValueError(f"max_range_uj: expected a positive counter range, got {max_range_uj}")
    if after >= before:
        return after - before
    return max_range_uj - before + after


@dataclass
class RaplZone:
    "One top-level RAPL zone: its directory, name and counter range."

    path: Path
    name: str
    max_range_uj: int

    def read_uj(self) -> int:
        return int((self.path / "energy_uj").read_text().strip())


class RaplReader:
    """Reads the RAPL package energy counters under a powercap root.

    `available()` says whether a counter can be read; `unavailable_reason` says why not.
    `read()` returns the raw counters; `delta_j(before, after)` the energy in joules between
    two reads, wrap-around handled.

    >>> RaplReader("/nonexistent").available()
    False
    """

    def __init__(self, root: str | Path = DEFAULT_POWERCAP_ROOT):
        self.root = Path(root)
        self.zones: list[RaplZone] = []
        self.unavailable_reason: str | None = None
        self._discover()

    def _discover(self) -> None:
        if not self.root.is_dir():
            self.unavailable_reason = f"no RAPL energy counter: {self.root} does not exist on this machine"
            return
        zones = []
        for d in sorted(self.root.iterdir()):
            if not _TOP_ZONE.match(d.name) or not (d / "energy_uj").exists():
                continue
            name = (d / "name").read_text().strip() if (d / "name").exists() else d.name
            try:
                max_range = int((d / "max_energy_range_uj").read_text().strip())
                int((d / "energy_uj").read_text().strip())
            except PermissionError:
                self.unavailable_reason = (f"RAPL counter {d / 'energy_uj'} is not readable by this user "
                                           "(root-only on Linux >= 5.10); run as root or grant read access")
                return
            except (OSError, ValueError) as e:
                self.unavailable_reason = f"RAPL counter {d} could not be read: {type(e).__name__}: {e}"
                return
            zones.append(RaplZone(d, name, max_range))
        # package zones hold the CPU energy; psys (whole platform) overlaps them and is skipped
        packages = [z for z in zones if z.name.startswith("package")]
        self.zones = packages or [z for z in zones if z.name != "psys"]
        if not self.zones:
            self.unavailable_reason = f"no RAPL energy counter: no readable intel-rapl:N zone under {self.root}"

    def available(self) -> bool:
        return bool(self.zones)

    @property
    def counter_name(self) -> str:
        return "RAPL " + "+".join(z.name for z in self.zones)

    def read(self) -> list[int]:
        "Raw counter values (µJ), one per zone."
        if not self.zones:
            raise RuntimeError(self.unavailable_reason or "no RAPL zone")
        return [z.read_uj() for z in self.zones]

    def delta_j(self, before: list[int], after: list[int]) -> float:
        "Joules between two `read()`s, summed over zones, each wrap-around corrected."
        return sum(rapl_delta_uj(b, a, z.max_range_uj) for z, b, a in zip(self.zones, before, after)) / 1e6

# %% [markdown]
# ## NVML: the GPU counter
#
# On NVIDIA GPUs (Volta and newer) NVML keeps a 64-bit total-energy counter in millijoules;
# it does not wrap in practice. The `pynvml` module (package `nvidia-ml-py`) is imported only
# when the reader is built; tests pass a stand-in module with the same two functions.

# %%
#| export
class NvmlReader:
    """Reads the total-energy counter of one NVIDIA GPU through NVML.

    `nvml` is the `pynvml` module (imported when None).

    >>> r = NvmlReader(nvml=False)
    >>> r.available(), r.unavailable_reason is not None
    (False, True)
    """

    def __init__(self, device_index: int = 0, nvml: Any = None):
        self.device_index = device_index
        self.unavailable_reason: str | None = None
        self._nvml = None
        self._handle = None
        if nvml is False:
            self.unavailable_reason = "NVML disabled"
            return
        if nvml is None:
            try:
                import pynvml as nvml  # type: ignore[no-redef]
            except ImportError:
                self.unavailable_reason = "no NVML: the pynvml module (package nvidia-ml-py) is not installed"
                return
        try:
            nvml.nvmlInit()
            handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
            nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except Exception as e:  # NVMLError has many subclasses; any of them means "no counter"
            self.unavailable_reason = f"NVML energy counter not readable on GPU {device_index}: {type(e).__name__}: {e}"
            return
        self._nvml, self._handle = nvml, handle

    def available(self) -> bool:
        return self._handle is not None

    @property
    def counter_name(self) -> str:
        return f"NVML GPU {self.device_index}"

    def read(self) -> list[int]:
        "The counter in mJ (one value, in a list like `RaplReader.read`)."
        if self._handle is None:
            raise RuntimeError(self.unavailable_reason or "no NVML")
        return [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))]

    def delta_j(self, before: list[int], after: list[int]) -> float:
        return (after[0] - before[0]) / 1e3

# %% [markdown]
# ## measure_energy: measured, estimated, or absent
#
# ```
# counter readable?  ── yes ──> idle window (baseline power) ──> loop fn for ≥ min_window_s
#        │                         joules_per_call = (E_window − P_idle · t_window) / calls
#        no
#        └── power_watts given? ── yes ──> latency × power_watts   ("estimated: latency x power")
#                    └── no ──> None, with the reason
# ```

# %%
#| export
METHOD_RAPL = "measured: RAPL"
METHOD_NVML = "measured: NVML"
METHOD_ESTIMATED = "estimated: latency x power"


@dataclass
class EnergyMeasurement:
    """Energy per call of a function, or None with the reason.

    `method` is "measured: RAPL", "measured: NVML", "estimated: latency x power" or None.
    For measured figures, `window_joules_per_call` has one value per measuring window and
    `idle_power_w` the baseline that was subtracted.
    """

    joules_per_call: float | None
    method: str | None
    reason: str | None = None
    counter: str | None = None
    idle_power_w: float | None = None
    window_s: float | None = None
    calls: int | None = None
    window_joules_per_call: list[float] = field(default_factory=list)
    gross_joules_per_call: float | None = None
    power_watts: float | None = None
    latency_s: float | None = None

    @property
    def estimated(self) -> bool:
        return self.method == METHOD_ESTIMATED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _measure_with_counter(reader: Any, method: str, fn: Callable[[], Any], sync: Callable[[], None],
                          min_window_s: float, idle_s: float, windows: int) -> EnergyMeasurement:
    # idle baseline: the counter over a window in which this process does nothing
    t0, e0 = time.perf_counter(), reader.read()
    time.sleep(idle_s)
    t1, e1 = time.perf_counter(), reader.read()
    idle_power = reader.delta_j(e0, e1) / (t1 - t0)
    fn()
    sync()  # one untimed call: lazy initialisation stays out of the window
    per_call, gross, total_calls, total_s = [], [], 0, 0.0
    for _ in range(windows):
        calls = 0
        start, e_start = time.perf_counter(), reader.read()
        while True:
            fn()
            calls += 1
            if calls & 7 == 0 or calls < 8:
                sync()
                if time.perf_counter() - start >= min_window_s:
                    break
        sync()
        end, e_end = time.perf_counter(), reader.read()
        window = end - start
        energy = reader.delta_j(e_start, e_end)
        gross.append(energy / calls)
        per_call.append((energy - idle_power * window) / calls)
        total_calls += calls
        total_s += window
    return EnergyMeasurement(
        joules_per_call=statistics.fmean(per_call), method=method, counter=reader.counter_name,
        idle_power_w=idle_power, window_s=total_s / windows, calls=total_calls,
        window_joules_per_call=per_call, gross_joules_per_call=statistics.fmean(gross),
    )


def measure_energy(
    fn: Callable[[], Any],
    *,
    power_watts: float | None = None,
    latency_s: float | None = None,
    device: str = "cpu",
    min_window_s: float = 1.0,
    idle_s: float | None = None,
    windows: int = 1,
    powercap_root: str | Path = DEFAULT_POWERCAP_ROOT,
    nvml: Any = None,
    sync: Callable[[], None] | None = None,
) -> EnergyMeasurement:
    """Energy per call of the zero-argument `fn` (e.g. one model inference), in joules.

    1. A hardware counter (RAPL under `powercap_root` for `device="cpu"`, NVML for a
       `"cuda..."` device) is used when readable: an idle baseline over `idle_s` seconds
       (default `min_window_s`), then `windows` windows of at least `min_window_s` seconds of
       calls; the idle energy is subtracted. `method` is "measured: RAPL"/"measured: NVML".
    2. Otherwise, with `power_watts`, the estimate `latency × power_watts`, with `latency_s`
       if given or else the median of a quick `time_callable` run; method
       "estimated: latency x power".
    3. Otherwise `joules_per_call` is None and `reason` says why.

    Exceptions from `fn` propagate.

    >>> m = measure_energy(lambda: sum(range(1000)), power_watts=15.0, powercap_root="/nonexistent")
    >>> m.method, m.joules_per_call > 0
    ('estimated: latency x power', True)
    >>> measure_energy(lambda: None, powercap_root="/nonexistent").joules_per_call is None
    True
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a zero-argument callable, got {type(fn).__name__}")
    if power_watts is not None and not (isinstance(power_watts, (int, float)) and power_watts > 0):
        raise ValueError(f"power_watts: expected a positive number of watts, got {power_watts!r}")
    if latency_s is not None and not (isinstance(latency_s, (int, float)) and latency_s > 0):
        raise ValueError(f"latency_s: expected a positive number of seconds, got {latency_s!r}")
    if not min_window_s > 0:
        raise ValueError(f"min_window_s: expected a positive number of seconds, got {min_window_s!r}")
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
        raise ValueError(f"windows: expected an int >= 1, got {windows!r}")
    sync = sync or (lambda: None)
    if str(device).startswith("cuda"):
        index = int(str(device).split(":")[1]) if ":" in str(device) else 0
        reader, method = NvmlReader(index, nvml=nvml), METHOD_NVML
    else:
        reader, method = RaplReader(powercap_root), METHOD_RAPL
    if reader.available():
        return _measure_with_counter(reader, method, fn, sync, min_window_s,
                                     min_window_s if idle_s is None else idle_s, windows)
    no_counter = reader.unavailable_reason
    if power_watts is None:
        return EnergyMeasurement(None, None, reason=f"{no_counter}; and no power_watts was given for an estimate")
    if latency_s is None:
        latency_s = time_callable(fn, samples=10, sync=sync).median_ms / 1e3
    return EnergyMeasurement(
        joules_per_call=latency_s * float(power_watts), method=METHOD_ESTIMATED,
        reason=f"estimate, not a measurement: {no_counter}",
        power_watts=float(power_watts), latency_s=latency_s,
    )

# %% [markdown]
# On this machine: which path does `measure_energy` take?

# %%
if __name__ == "__main__":
    import torch
    lin = torch.nn.Linear(256, 256).eval()
    x = torch.randn(1, 256)
    with torch.inference_mode():
        m = measure_energy(lambda: lin(x), power_watts=15.0, min_window_s=0.5)
    print(f"method: {m.method}; joules per call: {m.joules_per_call}; reason: {m.reason}")

# %% [markdown]
# ## Tests on a counter we control
#
# The test builds a powercap directory by hand and a function that advances its counter by
# exactly 1000 µJ per call, starting just below the wrap point, so the expected energy per
# call is known exactly (1 mJ) and a wrap happens inside the window.

# %%
def _fake_powercap(root: Path, start_uj: int, max_range_uj: int) -> Path:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(f"{max_range_uj}\n")
    (zone / "energy_uj").write_text(f"{start_uj}\n")
    sub = root / "intel-rapl:0:0"  # a sub-zone: must not be counted again
    sub.mkdir()
    (sub / "name").write_text("core\n")
    (sub / "max_energy_range_uj").write_text(f"{max_range_uj}\n")
    (sub / "energy_uj").write_text("0\n")
    return zone / "energy_uj"


def test_unit_rapl_reader():
    import tempfile
    assert rapl_delta_uj(10, 30, 100) == 20
    assert rapl_delta_uj(90, 5, 100) == 15, "a counter that went down has wrapped once"
    with tempfile.TemporaryDirectory() as tmp:
        counter = _fake_powercap(Path(tmp), start_uj=999_500, max_range_uj=1_000_000)
        reader = RaplReader(tmp)
        assert reader.available() and [z.name for z in reader.zones] == ["package-0"], \
            "only top-level package zones are read"
        before = reader.read()
        counter.write_text("700\n")  # wrapped: 500 to the top, then 700
        assert abs(reader.delta_j(before, reader.read()) - 1200e-6) < 1e-12
    missing = RaplReader("/nonexistent/powercap")
    assert not missing.available() and "does not exist" in missing.unavailable_reason


if __name__ == "__main__":
    test_unit_rapl_reader()

# %%
def test_unit_measure_energy():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        counter = _fake_powercap(Path(tmp), start_uj=990_000, max_range_uj=1_000_000)
        state = {"uj": 990_000}

        def work():  # each call "uses" exactly 1000 µJ on the fake counter
            state["uj"] = (state["uj"] + 1000) % 1_000_000
            counter.write_text(f"{state['uj']}\n")

        m = measure_energy(work, powercap_root=tmp, min_window_s=0.05, idle_s=0.01, windows=2)
        assert m.method == METHOD_RAPL and m.counter == "RAPL package-0"
        assert m.calls > 10, "the window must hold many calls (the counter wrapped inside it)"
        assert abs(m.joules_per_call - 1e-3) < 1e-9, f"expected 1 mJ per call, got {m.joules_per_call}"
        assert m.idle_power_w == 0.0 and len(m.window_joules_per_call) == 2

    # no counter: the estimate says what it is, or None with a reason
    est = measure_energy(lambda: None, power_watts=10.0, latency_s=0.002, powercap_root="/nonexistent")
    assert est.method == METHOD_ESTIMATED and est.estimated
    assert abs(est.joules_per_call - 0.02) < 1e-12, "latency x power: 2 ms x 10 W = 20 mJ"
    none = measure_energy(lambda: None, powercap_root="/nonexistent")
    assert none.joules_per_call is None and none.method is None and "power_watts" in none.reason

    # NVML through a stand-in module
    class FakeNvml:
        mj = 5_000

        def nvmlInit(self): pass

        def nvmlDeviceGetHandleByIndex(self, i): return i

        def nvmlDeviceGetTotalEnergyConsumption(self, h): return self.mj

    fake = FakeNvml()
    def gpu_work():
        fake.mj += 2  # 2 mJ per call
    g = measure_energy(gpu_work, device="cuda:0", nvml=fake, min_window_s=0.02, idle_s=0.01)
    assert g.method == METHOD_NVML and abs(g.joules_per_call - 2e-3) < 1e-12
    for kwargs, arg in (({"power_watts": -1}, "power_watts"), ({"windows": 0}, "windows"),
                        ({"min_window_s": 0}, "min_window_s")):
        try:
            measure_energy(lambda: None, powercap_root="/nonexistent", **kwargs)
            raise AssertionError(f"{kwargs} should fail")
        except ValueError as e:
            assert arg in str(e)


if __name__ == "__main__":
    test_unit_measure_energy()
