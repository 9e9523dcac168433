"""Energy counters and measure_energy (tinytorch.benchmarking.energy) on counters the tests control."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tinytorch.benchmarking.benchmark import BenchmarkSuite
from tinytorch.benchmarking.energy import (METHOD_ESTIMATED, METHOD_NVML, METHOD_RAPL, EnergyMeasurement, NvmlReader,
                                           RaplReader, measure_energy, rapl_delta_uj)


def make_zone(root: Path, zone: str, name: str, energy: int, max_range: int) -> Path:
    d = root / zone
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    (d / "energy_uj").write_text(f"{energy}\n")
    return d / "energy_uj"


class FakeCounter:
    "Advances a fake RAPL file by a fixed number of µJ per call, wrapping like the hardware."

    def __init__(self, path: Path, start: int, max_range: int, per_call_uj: int):
        self.path, self.value, self.max_range, self.per_call = path, start, max_range, per_call_uj

    def __call__(self, *args):
        self.value = (self.value + self.per_call) % self.max_range
        self.path.write_text(f"{self.value}\n")
        return args[0] if args else None


def test_wrap_around_arithmetic():
    assert rapl_delta_uj(5, 9, 10) == 4
    assert rapl_delta_uj(8, 3, 10) == 5
    assert rapl_delta_uj(0, 0, 10) == 0
    with pytest.raises(ValueError, match="max_range_uj"):
        rapl_delta_uj(1, 2, 0)


def test_reader_sums_packages_and_skips_subzones_and_psys(tmp_path):
    p0 = make_zone(tmp_path, "intel-rapl:0", "package-0", 100, 1000)
    p1 = make_zone(tmp_path, "intel-rapl:1", "package-1", 900, 1000)
    make_zone(tmp_path, "intel-rapl:2", "psys", 0, 1000)
    make_zone(tmp_path, "intel-rapl:0:0", "core", 0, 1000)
    make_zone(tmp_path, "intel-rapl-mmio:0", "package-0", 0, 1000)
    r = RaplReader(tmp_path)
    assert r.available() and r.counter_name == "RAPL package-0+package-1"
    before = r.read()
    p0.write_text("300\n")   # +200
    p1.write_text("50\n")    # wrapped: +100 to the top, +50
    assert r.delta_j(before, r.read()) == pytest.approx(350e-6)


def test_missing_or_empty_powercap(tmp_path):
    assert not RaplReader(tmp_path / "nope").available()
    empty = RaplReader(tmp_path)
    assert not empty.available() and "no readable intel-rapl" in empty.unavailable_reason


def test_measure_energy_rapl_with_wrap_and_idle_baseline(tmp_path):
    path = make_zone(tmp_path, "intel-rapl:0", "package-0", 9_995_000, 10_000_000)
    work = FakeCounter(path, 9_995_000, 10_000_000, per_call_uj=500)
    m = measure_energy(work, powercap_root=tmp_path, min_window_s=0.05, idle_s=0.02, windows=3)
    assert m.method == METHOD_RAPL and not m.estimated
    assert m.joules_per_call == pytest.approx(500e-6, abs=1e-12), "500 µJ per call, wrap included"
    assert m.idle_power_w == 0.0 and len(m.window_joules_per_call) == 3 and m.calls >= 3


def test_idle_baseline_is_subtracted(tmp_path, monkeypatch):
    """The counter rises by itself at 0.5 W (a background draw), and by 1000 µJ per call.
    The idle window measures the 0.5 W; subtracting it leaves 1000 µJ per call.
    The counter file is written on a virtual clock that moves only when the code sleeps or calls, so the
    file and the clock always agree (a writer thread on the real clock fell behind on a busy machine:
    0.00107 J per call measured against 0.001)."""
    import types

    from tinytorch.benchmarking import energy
    path = make_zone(tmp_path, "intel-rapl:0", "package-0", 0, 2**40)
    idle_w, per_call_uj, call_s, t0 = 0.5, 1000, 2e-4, 1000.0
    state = {"now": t0, "calls": 0}

    def write():
        path.write_text(f"{int((state['now'] - t0) * idle_w * 1e6) + state['calls'] * per_call_uj}\n")

    def sleep(seconds):
        state["now"] += max(0.0, float(seconds))
        write()

    def work():
        state["calls"] += 1
        state["now"] += call_s
        write()

    def now():
        return state["now"]

    monkeypatch.setattr(energy, "time", types.SimpleNamespace(
        perf_counter=now, monotonic=now, time=now, sleep=sleep, perf_counter_ns=lambda: round(now() * 1e9),
        monotonic_ns=lambda: round(now() * 1e9), time_ns=lambda: round(now() * 1e9)))
    m = measure_energy(work, powercap_root=tmp_path, min_window_s=0.2, idle_s=0.2)
    assert m.idle_power_w == pytest.approx(idle_w, rel=0.1), f"idle baseline: expected 0.5 W, got {m.idle_power_w}"
    assert m.gross_joules_per_call > m.joules_per_call, "the idle energy in the window was subtracted"
    assert m.gross_joules_per_call == pytest.approx(m.joules_per_call + m.idle_power_w * m.window_s / m.calls)
    assert m.joules_per_call == pytest.approx(per_call_uj * 1e-6, rel=0.05)


def test_estimate_and_none():
    est = measure_energy(lambda: None, power_watts=25.0, latency_s=0.004, powercap_root="/nonexistent")
    assert est.method == METHOD_ESTIMATED and est.joules_per_call == pytest.approx(0.1)
    assert est.power_watts == 25.0 and "estimate" in est.reason
    timed = measure_energy(lambda: sum(range(1000)), power_watts=10.0, powercap_root="/nonexistent")
    assert timed.method == METHOD_ESTIMATED and 0 < timed.latency_s < 0.1
    none = measure_energy(lambda: None, powercap_root="/nonexistent")
    assert none == EnergyMeasurement(None, None, reason=none.reason) and "power_watts" in none.reason


def test_nvml_reader_with_a_stand_in_module():
    class FakeNvml:
        def __init__(self):
            self.mj = 1_000

        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByIndex(self, i):
            return ("gpu", i)

        def nvmlDeviceGetTotalEnergyConsumption(self, handle):
            return self.mj

    fake = FakeNvml()
    r = NvmlReader(1, nvml=fake)
    assert r.available() and r.counter_name == "NVML GPU 1"

    def step():
        fake.mj += 5
    m = measure_energy(step, device="cuda:1", nvml=fake, min_window_s=0.02, idle_s=0.01)
    assert m.method == METHOD_NVML and m.joules_per_call == pytest.approx(5e-3)

    class NoEnergy(FakeNvml):
        def nvmlDeviceGetTotalEnergyConsumption(self, handle):
            raise RuntimeError("Not Supported")
    bad = NvmlReader(0, nvml=NoEnergy())
    assert not bad.available() and "Not Supported" in bad.unavailable_reason


def test_process_can_raise():
    def boom():
        raise KeyError("model failed")
    with pytest.raises(KeyError):
        measure_energy(boom, power_watts=5.0, powercap_root="/nonexistent")


@pytest.mark.parametrize("kwargs", [{"power_watts": -1}, {"windows": 0}, {"min_window_s": 0}])
def test_bad_arguments_are_named(kwargs):
    "Moved from energy_dev's test_module: each bad argument is a ValueError naming it."
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        measure_energy(lambda: None, powercap_root="/nonexistent", **kwargs)


def test_suite_records_measured_energy_from_a_counter(tmp_path):
    """End to end: a model whose forward advances a fake RAPL counter by 2000 µJ per call."""
    root = tmp_path / "powercap"
    path = make_zone(root, "intel-rapl:0", "package-0", 0, 2**32)
    counter = FakeCounter(path, 0, 2**32, per_call_uj=2000)

    class Metered(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            counter()
            return self.lin(x)

    X, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    suite = BenchmarkSuite({"metered": Metered()}, (X, y), output_dir=tmp_path / "out", measurement_runs=2,
                           warmup_runs=1, batch_sizes=(1,), energy_window_s=0.05, powercap_root=root, progress=False)
    suite.run_full_benchmark()
    e = suite.results["energy"]["metered"]
    assert e.metadata["method"] == METHOD_RAPL and e.unit == "J"
    assert e.median == pytest.approx(2e-3), "2000 µJ per call = 2 mJ = 0.002 J"
    assert e.metadata["mj_per_call"] == pytest.approx(2.0)
    assert "energy" in suite.generate_report()


def test_idle_energy_scales_with_the_window_not_the_idle_window(tmp_path):
    """A counter that rises at 5 W by itself and by 300 µJ per call, read through the reader's zone:
    with an idle window three times longer than the measuring window, only idle power x the
    window's own seconds leaves 300 µJ per call (the idle window's joules would take off too much)."""
    import time as _time
    make_zone(tmp_path, "intel-rapl:0", "package-0", 0, 10**12)
    calls, t0 = [0], _time.perf_counter()
    reader = RaplReader(tmp_path)
    reader.zones[0].read_uj = lambda: int((_time.perf_counter() - t0) * 5e6 + calls[0] * 300)

    def work():
        calls[0] += 1
        sum(range(500))
    from tinytorch.benchmarking.energy import _measure_with_counter
    m = _measure_with_counter(reader, METHOD_RAPL, work, lambda: None, 0.05, 0.15, 3)
    assert m.idle_power_w == pytest.approx(5.0, rel=0.01)
    assert m.joules_per_call == pytest.approx(300e-6, rel=0.02)
    assert m.calls == calls[0] - 1 and len(m.window_joules_per_call) == 3


def test_energy_within_the_counters_noise_is_no_figure(tmp_path):
    """A counter that does not move: the energy above idle is 0 J per call, which is no measurement: None with
    the reason, each window's figure kept (a GPU at 122 W idle gave -3.6e-05 J per call for one model in one
    1 s NVML window before this, and the report called another model "inf× more energy-efficient")."""
    make_zone(tmp_path, "intel-rapl:0", "package-0", 123_456, 10**12)
    m = measure_energy(lambda: None, powercap_root=tmp_path, min_window_s=0.05, idle_s=0.02, windows=3)
    assert m.joules_per_call is None and m.method == METHOD_RAPL, m
    assert m.reason.startswith("not measurable") and m.window_joules_per_call == [0.0, 0.0, 0.0], m


def test_every_estimate_uses_the_mean_latency(monkeypatch):
    import tinytorch.benchmarking.energy as energy
    from types import SimpleNamespace
    assert "mean latency" in METHOD_ESTIMATED, "the method string says which statistic the estimate uses"
    # a skewed run: median 1 ms, mean 4 ms; energy adds up over calls, so the mean is the one that applies
    monkeypatch.setattr(energy, "time_callable", lambda fn, **kw: SimpleNamespace(per_call_ms=[1.0, 1.0, 10.0]))
    est = energy.measure_energy(lambda: None, power_watts=10.0, powercap_root="/nonexistent")
    assert est.latency_s == pytest.approx(0.004) and est.joules_per_call == pytest.approx(0.04)
