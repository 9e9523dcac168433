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
# Energy per inference is what a battery pays for a model. Latency alone does not give it: two models
# of equal latency can draw very different power (one keeps the vector units busy, the other waits on
# memory). The honest figure comes from a **hardware energy counter**:
#
# | counter | where | unit | resolution |
# |---|---|---|---|
# | Intel/AMD RAPL | `/sys/class/powercap/intel-rapl:N/energy_uj` | µJ, wraps at `max_energy_range_uj` | updated about every 1 ms |
# | NVIDIA NVML | `nvmlDeviceGetTotalEnergyConsumption` | mJ since the driver loaded | about every 10–100 ms |
#
# Three details decide whether a reading means anything: the **window** (counters tick every
# millisecond or slower: loop the model for a second or more), the **wrap-around** of RAPL's
# register, and the **idle baseline** (only the energy above the idle draw is the model's). Without a
# counter: an **estimate**, `latency × power_watts`, labelled as one, or `None` with the reason.

# %%
#| default_exp benchmarking.energy

# %%
#| export
from __future__ import annotations

import re
import statistics
import time
from dataclasses import asdict, dataclass, field, replace as _replace
from pathlib import Path
from typing import Any, Callable

from tinytorch.profiling.timing import positive_int, time_callable

# %% [markdown]
# ## RAPL: the CPU package counter
#
# Linux shows RAPL under a powercap root (a parameter, so a test can pass its own folder), one
# folder per zone with `name`, `energy_uj` and `max_energy_range_uj`. Top-level zones
# (`intel-rapl:0`, `intel-rapl:1`, …) are CPU packages; sub-zones (`intel-rapl:0:0`, package 0's
# cores) are parts of one and would count twice; `psys` is the whole platform, overlapping them.
#
# **Your task (medium, 5 points).** Complete `RaplReader._discover`: the zones to count under `self.root`, or the reason there are none.
#
# - *TODO:* fill `self.zones` with a `RaplZone(path, name, max_range_uj)` per zone to count; with
#   none, leave it empty and set `self.unavailable_reason` to why, naming the path: the root when it
#   is missing, the zone folder (`intel-rapl:N`) whose counter does not read, and with no zone at all
#   `f"no readable intel-rapl:N zone under {self.root}"` (tests/test_19_energy.py checks these words).
# - *Approach:* walk the root's entries in sorted order; keep the top-level zones (`_TOP_ZONE`)
#   that have a counter, reading each one's name, range and counter once; then choose among them.
# - *Example:* package-0, its sub-zone core, package-1 and psys → zones package-0 and package-1.
# - *Hints:* no readable counter (no root folder, a counter that does not read, no zone) is the
#   common case (VMs; root-only since Linux 5.10), not an error: record it, never raise. A
#   `PermissionError` deserves its own advice. Without package zones, count all but psys.

# %% nbgrader={"grade": false, "grade_id": "energy-rapl-zones", "solution": true, "schema_version": 3}
#| export
DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"
_TOP_ZONE = re.compile(r"^intel-rapl:\d+$")


@dataclass
class RaplZone:
    "One top-level RAPL zone: its directory, name and counter range."

    path: Path
    name: str
    max_range_uj: int

    def read_uj(self) -> int:
        return int((self.path / "energy_uj").read_text().strip())


class RaplReader:
    """Reads the RAPL package energy counters under a powercap root: `available()` or
    `unavailable_reason`; `read()` gives the raw counters, `delta_j(before, after)` the joules
    between two reads (wrap-around handled by `rapl_delta_uj`).

    >>> RaplReader("/nonexistent").available()
    False
    """

    def __init__(self, root: str | Path = DEFAULT_POWERCAP_ROOT):
        self.root = Path(root)
        self.zones: list[RaplZone] = []
        self.unavailable_reason: str | None = None
        self._discover()

    def _discover(self) -> None:
        ### BEGIN SOLUTION
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
        ### END SOLUTION

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

# %%
# Most machines have no readable counter, so the tests build one whose energy is known exactly: `_fake_powercap`
# writes zones, `_ClockCounter` makes one rise by itself at `idle_w` watts and by `call_uj` per `work()` call, on a
# `_VirtualTime` clock that moves only when the code sleeps or calls `work`, so clock and counter always agree.
import os
import sys
import tempfile
import types

import numpy as np


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def in_student_process(fn, *args, **kwargs):
    """Test helper: call `fn(*args, **kwargs)` in the process that runs your code (here: this kernel; graded, the
    tests run in a process of their own and `fn` is sent to yours: it may hold no data of the test)."""
    return fn(*args, **kwargs)


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."


def _fake_powercap(root: Path, start_uj: int, max_range_uj: int, more: tuple = ()) -> Path:
    "package-0, its sub-zone core (not to be counted again) and `more` (folder, name, µJ); returns package-0's counter."
    for zone, name, uj in (("intel-rapl:0", "package-0", start_uj), ("intel-rapl:0:0", "core", 0), *more):
        (root / zone).mkdir(parents=True)
        for file, text in (("name", name), ("max_energy_range_uj", max_range_uj), ("energy_uj", uj)):
            (root / zone / file).write_text(f"{text}\n")
    return root / "intel-rapl:0" / "energy_uj"


class _VirtualTime:
    "The tests' clock: `sleep` and each `work()` call move it on; nothing else does."

    def __init__(self, now: float = 1000.0):
        self.now = now

    def perf_counter(self) -> float:
        return self.now

    def perf_counter_ns(self) -> int:
        return round(self.now * 1e9)

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, float(seconds))

    def module(self) -> types.SimpleNamespace:
        "A stand-in for the `time` module (its clocks all this one)."
        return types.SimpleNamespace(perf_counter=self.perf_counter, monotonic=self.perf_counter, time=self.perf_counter,
                                     perf_counter_ns=self.perf_counter_ns, monotonic_ns=self.perf_counter_ns,
                                     time_ns=self.perf_counter_ns, sleep=self.sleep)


def _swap_time(fn: Callable, clock: Any) -> Any:
    "Give the module that defines `fn` the `time` module `clock`; returns the one it had."
    module = sys.modules[fn.__module__]
    old, module.time = module.time, clock
    return old


class _ClockCounter:
    "A fake counter on a `_VirtualTime` clock: the reader's first zone reads it, and `work` is a call of `call_s` seconds."

    def __init__(self, reader: RaplReader, idle_w: float, call_uj: int, clock: _VirtualTime, call_s: float = 2e-4):
        self.zone, self.idle_w, self.call_uj, self.calls = reader.zones[0], idle_w, call_uj, 0
        self.clock, self.call_s, self.t0 = clock, call_s, clock.now
        self.top, self.start_uj = self.zone.max_range_uj, self.zone.read_uj()
        self.zone.read_uj = self.read_uj  # the reader now reads this counter (graded: a callback to the test)

    def read_uj(self) -> int:
        spent = (self.clock.now - self.t0) * self.idle_w * 1e6 + self.calls * self.call_uj
        return int(self.start_uj + spent) % self.top

    def work(self) -> None:
        self.calls += 1
        self.clock.now += self.call_s

# %% nbgrader={"grade": true, "grade_id": "test-energy-rapl-zones", "locked": true, "points": 5, "schema_version": 3}
def test_unit_rapl_zones():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _fake_powercap(root, 5000, 10**6, (("intel-rapl:1", "package-1", 7000), ("intel-rapl:2", "psys", 1),
                                           ("intel-rapl-mmio:0", "package-0", 2)))
        reader = RaplReader(root)
        got, want = [(z.name, z.max_range_uj) for z in reader.zones], [("package-0", 10**6), ("package-1", 10**6)]
        hint = (" -- intel-rapl:0:0 is part of package-0: counting sub-zones counts their energy twice" if "core" in str(got)
                else " -- psys (the whole platform) overlaps the packages: count the packages" if "psys" in str(got) else "")
        assert got == want, f"zones package-0 (+ core), package-1, psys, mmio: expected (name, range) {want}, got {got}{hint}"
        assert reader.read() == [5000, 7000] and reader.available(), f"expected counters [5000, 7000], got {reader.read()}"
        _fake_powercap(root / "bad", "n/a", 10**6)  # a counter that does not read as a number
        for where, part, why in ((root / "absent", "absent", "no powercap root"), (root / "bad", "intel-rapl:0", "unreadable")):
            try:
                r = RaplReader(where)
            except (OSError, ValueError) as e:
                raise AssertionError(f"{why}: expected an unavailable reader with the reason, got {type(e).__name__}: "
                                     f"{e} -- no readable counter is the common case, not an error") from None
            assert r.zones == [] and part in str(r.unavailable_reason), \
                f"{why}: expected no zones and a reason naming {part!r}, got {r.zones}, {r.unavailable_reason!r}"
    ### BEGIN HIDDEN TESTS
    hidden_property("RAPL zone discovery for other layouts: packages only (no sub-zones, no psys, no mmio), an "
                    "unreadable counter, no package zone, no root")
    rng = grading_rng()

    def zones(root, spec):  # (folder, name, µJ, range); µJ None: no counter file, "n/a": a counter that does not read
        for folder, name, uj, top in spec:
            (root / folder).mkdir(parents=True)
            for file, text in (("name", name), ("max_energy_range_uj", top), ("energy_uj", uj)):
                if text is not None:
                    (root / folder / file).write_text(f"{text}\n")

    def draw():
        return int(rng.integers(0, 10**9)), int(rng.integers(10**9, 2**40))

    with tempfile.TemporaryDirectory() as tmp:
        n = int(rng.integers(1, 4))  # packages, each with sub-zones; psys, mmio and a zone without a counter at random
        spec, want = [], []
        for i in range(n):
            uj, top = draw()
            spec.append((f"intel-rapl:{i}", f"package-{i}", uj, top))
            want.append((f"intel-rapl:{i}", f"package-{i}", top, uj))
            spec += [(f"intel-rapl:{i}:{j}", ("core", "uncore", "dram")[j], *draw()) for j in range(int(rng.integers(0, 3)))]
        extra = [(f"intel-rapl:{n}", "psys", *draw()), ("intel-rapl-mmio:0", "package-0", *draw()),
                 (f"intel-rapl:{n + 1}", f"package-{n + 1}", None, draw()[1])]
        spec += [z for z in extra if rng.random() < 0.6]
        others = ["dram", "uncore", "gpu"][:int(rng.integers(1, 4))]  # no package zone: all but psys
        psys_at = int(rng.integers(0, len(others) + 1))
        flat = [(f"intel-rapl:{i}", name, *draw()) for i, name in enumerate(others[:psys_at] + ["psys"] + others[psys_at:])]
        bad = int(rng.integers(0, n))
        cases = [("packages", spec, want), ("no package zone", flat, [(d, nm, t, u) for d, nm, u, t in flat if nm != "psys"]),
                 ("an unreadable counter", [(d, nm, "n/a" if d == f"intel-rapl:{bad}" else u, t) for d, nm, u, t in spec],
                  f"intel-rapl:{bad}"),
                 ("only psys and sub-zones", [z for z in spec if z[0].count(":") == 2] + [(f"intel-rapl:{n + 2}", "psys", *draw())],
                  "only"), ("no powercap root", [], "absent")]
        for k, (why, layout, expect) in enumerate(cases):
            root = Path(tmp) / f"root{k}" / ("absent" if expect == "absent" else "powercap")
            zones(root, layout)
            what = f"{why}: zones {[(d, nm) for d, nm, *_ in layout]}"
            try:
                r = RaplReader(root)
            except (OSError, ValueError) as e:
                raise AssertionError(f"{what}: expected a reader (with zones or the reason), got {type(e).__name__}: {e}"
                                     " -- no readable counter is the common case, not an error") from None
            got = [(Path(z.path).name, z.name, z.max_range_uj) for z in r.zones]
            if isinstance(expect, list):
                hint = (" -- sub-zones are part of a package: counting them counts their energy twice"
                        if any(d.count(":") == 2 for d, *_ in got) else " -- psys (the whole platform) overlaps the other "
                        "zones" if "psys" in str(got) else "")
                assert got == [e[:3] for e in expect] and r.read() == [e[3] for e in expect], (f"{what}: expected (folder, "
                    f"name, range) {[e[:3] for e in expect]}, counters {[e[3] for e in expect]}, got {got}, "
                    f"{r.read() if r.zones else r.unavailable_reason}{hint}")
            else:
                part = str(root) if expect == "only" else expect
                assert got == [] and part in str(r.unavailable_reason), \
                    f"{what}: expected no zones and a reason naming {part!r}, got {got}, {r.unavailable_reason!r}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_rapl_zones()

# %% [markdown]
# ## From counter readings to the model's energy
#
# A counter holds a running total: the energy of a stretch of time is the difference of two
# reads, once the register's wrap is undone and the idle draw taken out. The GPU's counter
# (NVML) works the same way. The result type and the loop that runs one window of calls are given.
#
# ```
# idle:    (clock, counter) ── sleep idle_s ── (clock, counter)          -> idle power, W
# window:  (clock, counter) ── fn() × calls ── (clock, counter)          -> J, s, calls
#          gross J per call: all of it;  net J per call: less this window's idle energy
# ```

# %%
#| export
class NvmlReader:
    """Reads the total-energy counter of one NVIDIA GPU through NVML (`nvml`: the `pynvml` module, package
    `nvidia-ml-py`, a stand-in, or False for none): on Volta (2017's V100) and newer a 64-bit count of mJ that does not wrap.
    """

    def __init__(self, device_index: int = 0, nvml: Any = None):
        self.device_index, self.counter_name = device_index, f"NVML GPU {device_index}"
        self.unavailable_reason, self._nvml, self._handle = None, None, None
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

    def read(self) -> list[int]:
        "The counter in mJ (one value, in a list like `RaplReader.read`)."
        if self._handle is None:
            raise RuntimeError(self.unavailable_reason or "no NVML")
        return [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))]

    def delta_j(self, before: list[int], after: list[int]) -> float:
        return (after[0] - before[0]) / 1e3


METHOD_RAPL = "measured: RAPL"
METHOD_NVML = "measured: NVML"
METHOD_ESTIMATED = "estimated: mean latency x power"  # the mean: energy adds up, as a counter's does


@dataclass
class EnergyMeasurement:
    "Joules per call of a function (per window, and the idle baseline taken off), or None with the reason."

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


def _call_for(fn: Callable[[], Any], sync: Callable[[], None], min_window_s: float) -> int:
    "Call `fn` until `min_window_s` seconds have passed (the clock is read every 8 calls); return the count."
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        if calls & 7 == 0 or calls < 8:
            sync()
            if time.perf_counter() - start >= min_window_s:
                break
    sync()
    return calls

# %% [markdown]
# **Your task (hard, 10 points).** Write the counter arithmetic: `rapl_delta_uj` (the energy
# between two reads of a wrapping counter) and the measuring part of `_measure_with_counter`.
#
# - *TODO:* `rapl_delta_uj` returns the µJ counted from `before` to `after`. In
#   `_measure_with_counter` set `idle_power` (W); per window append the net and the gross joules
#   per call to `net` and `gross`; add the calls up in `total_calls`, the window seconds in `total_s`.
# - *Approach:* a reading that went down has passed the top of the register once. Idle power is
#   energy over seconds of a window in which this process sleeps; a measuring window's idle
#   energy scales with that window's *own* length, not `idle_s`.
# - *Example:* `rapl_delta_uj(900, 50, 1000)` is 150 (100 to the top, then 50). At 2 W idle, a 0.5 s
#   window of 1000 calls in which the counter rose by 1.5 J is 0.5 mJ per call net, 1.5 mJ gross.
# - *Hints:* read `time.perf_counter()` next to each counter read (the test hands your module a clock of its own
#   as `time`, so use `time.` as imported); `reader.delta_j(before, after)`
#   gives joules for any reader (RAPL: via `rapl_delta_uj`); `_call_for` runs one window of calls.
# - *Needs first:* `RaplReader._discover` (the test reads a fake powercap through a `RaplReader`).

# %% nbgrader={"grade": false, "grade_id": "energy-counter", "solution": true, "schema_version": 3}
#| export
def rapl_delta_uj(before: int, after: int, max_range_uj: int) -> int:
    """Energy (µJ) between two readings of a counter that wraps at `max_range_uj`.

    At most one wrap is assumed: windows are shorter than the wrap period (tens of minutes).

    >>> rapl_delta_uj(100, 350, 1000), rapl_delta_uj(900, 50, 1000)
    (250, 150)
    """
    if max_range_uj <= 0:
        raise ValueError(f"max_range_uj: expected a positive counter range, got {max_range_uj}")
    ### BEGIN SOLUTION
    if after >= before:
        return after - before
    return max_range_uj - before + after
    ### END SOLUTION


def _measure_with_counter(reader: Any, method: str, fn: Callable[[], Any], sync: Callable[[], None],
                          min_window_s: float, idle_s: float, windows: int) -> EnergyMeasurement:
    """Joules per call of `fn` from `reader`'s counter: an idle baseline over `idle_s` seconds, then
    `windows` windows of at least `min_window_s` seconds of calls, each less its own idle energy."""
    fn()
    sync()  # one untimed call: lazy initialisation stays out of the windows
    ### BEGIN SOLUTION
    t0, e0 = time.perf_counter(), reader.read()
    time.sleep(idle_s)
    t1, e1 = time.perf_counter(), reader.read()
    idle_power = reader.delta_j(e0, e1) / (t1 - t0)
    net, gross, total_calls, total_s = [], [], 0, 0.0
    for _ in range(windows):
        start, e_start = time.perf_counter(), reader.read()
        calls = _call_for(fn, sync, min_window_s)
        end, e_end = time.perf_counter(), reader.read()
        energy = reader.delta_j(e_start, e_end)
        gross.append(energy / calls)
        net.append((energy - idle_power * (end - start)) / calls)
        total_calls += calls
        total_s += end - start
    ### END SOLUTION
    return EnergyMeasurement(joules_per_call=statistics.fmean(net), method=method, counter=reader.counter_name,
                             idle_power_w=idle_power, window_s=total_s / windows, calls=total_calls,
                             window_joules_per_call=net, gross_joules_per_call=statistics.fmean(gross))

# %% nbgrader={"grade": true, "grade_id": "test-energy-counter", "locked": true, "points": 10, "schema_version": 3}
def test_unit_counter_energy():
    got = rapl_delta_uj(900, 50, 1000)
    assert got == 150, (f"a reading that went down (900 -> 50, range 1000) has wrapped once: expected 150 µJ "
                        f"(100 to the top, then 50), got {got}" + (
                            " -- no wrap-around: after - before is negative when the counter wrapped" if got < 0 else
                            " -- the counter wraps at max_range_uj, not at a register width" if got > 1000 else ""))
    plain = rapl_delta_uj(100, 350, 1000), rapl_delta_uj(7, 7, 1000)
    assert plain == (250, 0), f"without a wrap the energy is after - before: expected (250, 0), got {plain}"

    def measure(idle_w, call_uj, min_s, idle_s, windows, wrap_s, top):
        """One measurement on a fake counter and clock that stay here, in the test: your code reads both (and calls
        `work`) through callbacks, so it learns the counter's figures only by measuring them."""
        clock = _VirtualTime()
        with tempfile.TemporaryDirectory() as tmp:
            _fake_powercap(Path(tmp), start_uj=top - int(idle_w * wrap_s * 1e6), max_range_uj=top)
            reader = RaplReader(tmp)
            counter = _ClockCounter(reader, idle_w=idle_w, call_uj=call_uj, clock=clock)
            real = in_student_process(_swap_time, _measure_with_counter, clock.module())  # your module's `time`
            try:
                m = _measure_with_counter(reader, METHOD_RAPL, counter.work, lambda: None, min_s, idle_s=idle_s,
                                          windows=windows)
            finally:
                in_student_process(_swap_time, _measure_with_counter, real)
            return m, counter.calls

    m, calls = measure(10.0, 100, 0.03, 0.15, 2, 0.06, 10**8)  # wraps in the idle window
    p = m.idle_power_w
    assert p is not None and abs(p - 10.0) < 0.01, (
        f"idle baseline: expected 10 W (the counter rises by itself at 10 W), got {p}" + (
            " -- negative: the counter wrapped during the idle window; take differences with reader.delta_j"
            if p is not None and p < 0 else " -- idle power is the idle window's joules divided by its seconds"))
    j = m.joules_per_call
    assert j is not None and abs(j - 100e-6) < 1e-6, (f"expected 100 µJ per call, got {'None' if j is None else f'{j * 1e6:.1f}'} µJ" + (
        " -- idle baseline not subtracted: the counter also counts the idle power drawn during the window; take "
        "off idle power x that window's seconds" if j is not None and j > 100e-6 else
        " -- too much taken off: a window's idle energy is idle power x that window's seconds (0.03 s here), "
        "not the idle window's joules (0.15 s) subtracted once per window or per run"))
    got = (m.calls, len(m.window_joules_per_call), m.gross_joules_per_call > 1.2 * j, 0.03 <= m.window_s < 1.0)
    assert got == (calls - 1, 2, True, True), (
        f"expected (calls of both windows, 2 windows, gross above net, mean window seconds in [0.03, 1)) = "
        f"({calls - 1}, 2, True, True), got {got}; gross is a window's joules per call before the idle energy is taken off")
    ### BEGIN HIDDEN TESTS
    hidden_property("rapl_delta_uj for other readings and counter ranges, with and without a wrap",
                    like="rapl_delta_uj(900, 50, 1000) is 150")
    rng = grading_rng()
    for i in range(6):
        top = int(rng.integers(10**3, 2**40))
        before, after = sorted(int(v) for v in rng.integers(0, top, 2))[::-1 if i % 2 else 1]  # a wrap every other time
        want, got = (after - before) % top, rapl_delta_uj(before, after, top)
        assert got == want, (f"rapl_delta_uj({before}, {after}, {top}): expected {want}, got {got}" + (
            " -- no wrap-around: after - before is negative when the counter wrapped" if got < 0 else
            " -- the counter wraps at max_range_uj, not at a register width" if got > top else ""))

    idle_w, call_uj, windows = float(rng.uniform(4, 12)), int(rng.integers(80, 300)), int(rng.integers(2, 4))
    min_s, idle_s, top = float(rng.uniform(0.02, 0.04)), float(rng.uniform(0.1, 0.15)), int(rng.integers(10**8, 2**36))
    wrap_s = idle_s * rng.uniform(0.4, 0.9) if rng.random() < 0.5 else idle_s + 0.5 * min_s  # idle window or first window
    what = (f"a counter rising at {idle_w:.3f} W and {call_uj} µJ per call, wrapping at {top} µJ; idle {idle_s:.3f} s, "
            f"{windows} windows of {min_s:.3f} s")

    def problem(m, calls):  # what is wrong with one measurement, or None
        p, j = m.idle_power_w, m.joules_per_call
        if p is None or abs(p - idle_w) >= 0.01 * idle_w:
            hidden_property("the idle power of a counter that wraps during the idle window",
                            like="the visible test's counter at 10 W")
            return f"{what}: expected idle power {idle_w:.3f} W, got {p}" + (
                " -- negative: the counter wrapped; take differences with reader.delta_j" if p is not None and p < 0 else "")
        if j is None or abs(j - call_uj * 1e-6) >= 0.01 * call_uj * 1e-6:
            hidden_property("the net joules per call (each window less its own idle energy) of other counters",
                            like="the visible test's 100 µJ per call")
            return f"{what}: expected {call_uj} µJ per call, got {j if j is None else f'{j * 1e6:.1f}'} µJ" + (
                " -- idle baseline not subtracted: take off idle power x that window's seconds" if j is not None and j > call_uj * 1e-6 else
                " -- too much taken off: a window's idle energy is idle power x that window's seconds")
        got = (m.calls, len(m.window_joules_per_call), m.window_s >= 0.999 * min_s,
               m.gross_joules_per_call is not None and m.gross_joules_per_call - j > 0.9 * idle_w * min_s / m.calls)
        if got != (calls - 1, windows, True, True):
            hidden_property("the calls, windows, mean window seconds and gross joules per call reported for other "
                            "window counts and lengths", like="the visible test's two windows")
            return (f"{what}: expected (calls of all windows, windows, mean window seconds >= {min_s:.3f}, gross above net "
                    f"by at least the idle energy) = ({calls - 1}, {windows}, True, True), got {got} (window_s "
                    f"{m.window_s}, gross {m.gross_joules_per_call}, net {j})")
        return None

    wrong = problem(*measure(idle_w, call_uj, min_s, idle_s, windows, wrap_s, top))
    assert wrong is None, wrong
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_counter_energy()

# %% [markdown]
# ## measure_energy: measured, estimated, or absent
#
# ```
# counter readable? ── yes ──> idle baseline, then windows of ≥ min_window_s of calls, less the idle energy
#        └─ no ──> power_watts given? ── yes ──> mean latency × power_watts ("estimated: mean latency x power")
#                           └─ no ──> None, with the reason
# ```

# %%
#| export
def measure_energy(fn: Callable[[], Any], *, power_watts: float | None = None, latency_s: float | None = None,
                   device: str = "cpu", min_window_s: float = 1.0, idle_s: float | None = None, windows: int = 1,
                   powercap_root: str | Path = DEFAULT_POWERCAP_ROOT, nvml: Any = None,
                   sync: Callable[[], None] | None = None) -> EnergyMeasurement:
    """Joules per call of the zero-argument `fn` (e.g. one inference): from a readable counter (RAPL under
    `powercap_root` for `device="cpu"`, NVML for "cuda..."): an idle baseline over `idle_s` s (default `min_window_s`),
    then `windows` windows of at least `min_window_s` s of calls, less the idle energy; else, with `power_watts`, the
    mean latency (`latency_s`, or a quick `time_callable` run's mean) × `power_watts`, method "estimated: mean latency
    x power"; else `joules_per_call` is None and `reason` says why. Errors of `fn` propagate.

    >>> measure_energy(lambda: sum(range(1000)), power_watts=15.0, powercap_root="/nonexistent").method
    'estimated: mean latency x power'
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a zero-argument callable, got {type(fn).__name__}")
    for value, arg, unit in ((power_watts, "power_watts", "watts"), (latency_s, "latency_s", "seconds")):
        if value is not None and not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"{arg}: expected a positive number of {unit}, got {value!r}")
    if not min_window_s > 0:
        raise ValueError(f"min_window_s: expected a positive number of seconds, got {min_window_s!r}")
    positive_int(windows, "windows")
    sync = sync or (lambda: None)
    if str(device).startswith("cuda"):
        index = int(str(device).split(":")[1]) if ":" in str(device) else 0
        reader, method = NvmlReader(index, nvml=nvml), METHOD_NVML
    else:
        reader, method = RaplReader(powercap_root), METHOD_RAPL
    if reader.available():
        m = _measure_with_counter(reader, method, fn, sync, min_window_s, min_window_s if idle_s is None else idle_s,
                                  windows)
        if not m.joules_per_call > 0:  # the draw above idle was within the counter's noise: a figure <= 0 is no energy
            return _replace(m, joules_per_call=None, reason=(
                f"not measurable: the energy above idle averaged {m.joules_per_call:.3g} J per call over {windows} "
                f"window(s) (gross {m.gross_joules_per_call:.3g} J per call, idle {m.idle_power_w:.3g} W), within the "
                f"counter's noise; use longer or more windows (window_joules_per_call has each window's figure)"))
        return m
    no_counter = reader.unavailable_reason
    if power_watts is None:
        return EnergyMeasurement(None, None, reason=f"{no_counter}; and no power_watts was given for an estimate")
    if latency_s is None:
        latency_s = statistics.fmean(time_callable(fn, samples=10, sync=sync).per_call_ms) / 1e3
    return EnergyMeasurement(joules_per_call=latency_s * float(power_watts), method=METHOD_ESTIMATED,
                             reason=f"estimate, not a measurement: {no_counter}", power_watts=float(power_watts),
                             latency_s=latency_s)

# %%
if __name__ == "__main__":  # on this machine: which path does measure_energy take?
    import torch
    lin, x = torch.nn.Linear(256, 256).eval(), torch.randn(1, 256)
    with torch.inference_mode():
        m = measure_energy(lambda: lin(x), power_watts=15.0, min_window_s=0.5)
    print(f"method: {m.method}; joules per call: {m.joules_per_call}; reason: {m.reason}")

# %%
def test_module():
    "End to end: measure_energy on a counter that wraps inside a window, and with no counter."
    with tempfile.TemporaryDirectory() as tmp:
        # wraps after 5 calls, and a window would need a million calls to wrap twice
        counter = _fake_powercap(Path(tmp), start_uj=10**9 - 5_000, max_range_uj=10**9)
        work = lambda: counter.write_text(f"{(int(counter.read_text()) + 1000) % 10**9}\n")  # 1 mJ a call  # noqa: E731
        m = measure_energy(work, powercap_root=tmp, min_window_s=0.05, idle_s=0.01, windows=2)
    assert m.method == METHOD_RAPL and m.counter == "RAPL package-0" and m.calls > 10, m
    assert abs(m.joules_per_call - 1e-3) < 1e-9 and m.idle_power_w == 0.0, f"expected 1 mJ per call, got {m}"
    est = measure_energy(lambda: None, power_watts=10.0, latency_s=0.002, powercap_root="/nonexistent")
    assert est.estimated and abs(est.joules_per_call - 0.02) < 1e-12, "latency x power: 2 ms x 10 W = 20 mJ"
    none = measure_energy(lambda: None, powercap_root="/nonexistent")
    assert none.joules_per_call is None and none.method is None and "power_watts" in none.reason


if __name__ == "__main__":
    test_module()
