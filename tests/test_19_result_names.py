"""Issue 21: every public measuring function hands back results whose names say their statistic.

The test calls the library's measuring functions on a small model none of them was written around, walks
every value they return (mapping keys, dataclass fields, DataFrame columns and attrs) and fails on
- a key named `latency_ms` / `max_latency_ms` that is not an alias of the original course code ("seed" in SEED_ALIASES) registered in `results.SEED_ALIASES`
  for that owner (the original course code's bare names are kept for the course material that imports them);
- a measuring function that returns a bare number without being a registered view (for the original course code) of a result function;
- a registered alias that does not equal its explicit field, or names a result function that is missing or
  disagrees with its view.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn

from tinytorch.benchmarking import metrics, results
from tinytorch.benchmarking.results import SEED_ALIASES, BenchmarkResult

BARE = ("latency_ms", "max_latency_ms")


class Wide(nn.Module):
    "A 2-layer MLP over 8x8 inputs with a BatchNorm buffer: a shape no stack was written around."

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 24), nn.BatchNorm1d(24), nn.ReLU(), nn.Linear(24, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@pytest.fixture(scope="module")
def model() -> nn.Module:
    torch.manual_seed(7)
    return Wide().eval()


@pytest.fixture(scope="module")
def loader() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(16, 1, 8, 8, generator=g), torch.randint(0, 10, (16,), generator=g)) for _ in range(2)]


def _alias_names(owner: str) -> set[str]:
    "The bare names SEED_ALIASES allows under `owner` (keys look like 'owner.name' or 'owner.name (note)')."
    out = set()
    for key in SEED_ALIASES:
        path = key.split(" (", 1)[0]
        if path.startswith(owner + "."):
            out.add(path.rsplit(".", 1)[1])
    return out


def _walk(value, path="result", seen=None):
    "Yield (path, key) for every key, field and column reachable from `value`."
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, dict):
        for k, v in value.items():
            yield path, str(k)
            yield from _walk(v, f"{path}[{k!r}]", seen)
    elif isinstance(value, pd.DataFrame):
        for c in value.columns:
            yield path, str(c)
        yield from _walk(dict(value.attrs), f"{path}.attrs", seen)
        for c in value.columns:
            yield from _walk(list(value[c]), f"{path}[{c!r}]", seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield path, f.name
            yield from _walk(getattr(value, f.name), f"{path}.{f.name}", seen)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value[:50]):
            yield from _walk(v, f"{path}[{i}]", seen)


def _bare_keys(value) -> set[str]:
    return {f"{p} -> {k}" for p, k in _walk(value) if k in BARE}


def _assert_named(value, owner: str) -> None:
    allowed = _alias_names(owner)
    bad = sorted(s for s in _bare_keys(value) if s.rsplit(" -> ", 1)[1] not in allowed)
    assert not bad, (f"{owner}: keys named {BARE} that are not registered seed aliases of {owner} in "
                     f"results.SEED_ALIASES (name the statistic: latency_median_ms, latency_mean_ms, ...): {bad[:8]}")


def test_walk_finds_a_bare_name_and_respects_the_registry():
    "The checker itself: it finds a nested bare name and allows exactly the registered ones."
    nested = {"a": [pd.DataFrame({"latency_ms": [1.0]})]}
    assert _bare_keys(nested) == {"result['a'][0] -> latency_ms"}
    with pytest.raises(AssertionError, match="not registered"):
        _assert_named(nested, "nobody")
    assert "latency_ms" in _alias_names("PerfMetrics")


def test_collect_metrics_names_and_carries_its_results(model, loader):
    m = metrics.collect_metrics(model, loader, repeats=8)
    _assert_named(m, "PerfMetrics")
    _assert_named(m.to_dict(), "PerfMetrics")
    assert m.latency_ms == m.latency_mean_ms == pytest.approx(m.results["latency"].mean)
    assert m.latency_median_ms == pytest.approx(m.results["latency"].median)
    assert isinstance(m.results["memory"].values[0], int)
    assert m.results["memory"].values[0] == sum(t.numel() * t.element_size() for t in model.state_dict().values()
                                                if torch.is_tensor(t))


@pytest.mark.parametrize("view, result_fn", [(k.split(".", 1)[1], v) for k, v in SEED_ALIASES.items()
                                             if k.startswith("metrics.")])
def test_every_float_returning_seed_function_is_a_view_of_a_result(view, result_fn, model, loader):
    "A seed function that returns a bare number names the public function returning the result it views."
    fn, res_fn = getattr(metrics, view), getattr(metrics, result_fn)
    assert result_fn in fn.__doc__, f"metrics.{view}'s docstring should name {result_fn}, the result it views"
    x = loader[0][0][:1]
    args = {"measure_latency": (model, x), "measure_latency_distribution": (model, x),
            "evaluate_accuracy": (model, loader), "model_memory_mb": (model,)}[view]
    res = res_fn(*args)
    assert isinstance(res, BenchmarkResult), f"{result_fn} should return a BenchmarkResult, got {type(res).__name__}"
    if view == "evaluate_accuracy":
        assert fn(*args) == pytest.approx(res.mean)
    elif view == "model_memory_mb":
        assert fn(*args) == pytest.approx(res.values[0] / results.MiB)


def test_no_other_public_metrics_function_returns_a_bare_float(model, loader):
    """The metrics module's measuring functions: a float comes only from a registered seed view, or a function
    named for its statistic (`latency_mean_ms`, of which the seed's `measure_latency` is the alias)."""
    views = {k.split(".", 1)[1] for k in SEED_ALIASES if k.startswith("metrics.")}
    x = loader[0][0][:1]
    calls = {"latency_result": (model, x), "accuracy_result": (model, loader), "memory_result": (model,),
             "collect_metrics": (model, loader)}
    for name, args in calls.items():
        assert name not in views
        out = getattr(metrics, name)(*args, **({"repeats": 5} if name == "collect_metrics" else {}))
        assert not isinstance(out, (float, np.floating)), f"metrics.{name} returned a bare float"


def test_profiler_names_its_statistics(model):
    from tinytorch.profiling.profiler import Profiler, quick_profile

    df = Profiler().profile_forward_pass(model, (1, 1, 8, 8), samples=5)
    _assert_named(df, "Profiler")
    assert "latency_median_ms" in df.columns and "operators_sum_ms" in df.attrs
    q = quick_profile(model, torch.randn(1, 1, 8, 8), iterations=5, show=False)
    _assert_named(q, "Profiler")
    assert "latency_median_ms" in q


def test_tinymlperf_result_names(model):
    from tinytorch.benchmarking.tinymlperf import TinyMLPerf

    class Flat(nn.Module):  # anomaly detection takes (1, 640) features
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(640, 640)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

    r = TinyMLPerf(random_seed=0).run_standard_benchmark(Flat().eval(), "anomaly_detection", num_runs=20)
    _assert_named(r, "TinyMLPerf.result")
    for key, explicit in SEED_ALIASES.items():
        if key.startswith("TinyMLPerf.result."):
            bare = key.rsplit(".", 1)[1]
            if r.get(bare) is not None:
                assert r[bare] == pytest.approx(r[explicit]), f"{bare} should equal {explicit}"
    assert r["latency_max_ms"] >= r["latency_p90_ms"] >= r["latency_median_ms"] > 0


def test_hardware_stacks_name_their_statistics(model, loader):
    from tinytorch.benchmarking import devices, hardware, hardware_profile

    roof = hardware.roofline_estimate(1e6, 1e5, 1e9, 1e9)
    _assert_named(roof, "hardware.roofline_estimate")
    assert math.isclose(roof["roofline_bound_ms"], 1.0)
    fit = devices.device_fit(model, (1, 1, 8, 8), "stm32h743")
    _assert_named(fit, "devices.device_fit")
    watch = devices.measure_watch_metrics(model, (1, 1, 8, 8), samples=5, startup_runs=2)
    _assert_named(watch, "devices.measure_watch_metrics")
    unnamed = [k for k in watch if k.endswith("_ms") and not any(s in k for s in ("median", "mean", "_p"))]
    assert not unnamed, f"watch metrics in ms that do not say their statistic: {unnamed}"
    prof = hardware_profile.build_hardware_profile_table(model, (1, 1, 8, 8), samples=5)
    _assert_named(prof, "hardware_profile")
    sw = hardware.sweep(model, loader, precisions=("fp32",), batch_sizes=(1,), repeats=5,
                        constraints={"max_latency_mean_ms": 1e6})
    _assert_named(sw, "hardware.sweep")
    assert (sw["latency_ms"] == sw["latency_mean_ms"]).all()
    _assert_named(hardware.precision_tradeoff_table(sw), "hardware.precision_tradeoff_table")


def test_olympics_names_their_statistics():
    from tinytorch.benchmarking.olympics import EVENT_RULES, OlympicEvent, check_constraints

    quantities = {q for rules in EVENT_RULES.values() for q, _, _ in rules.constraints}
    assert not quantities & set(BARE), f"Olympics constraints on bare latency names: {quantities & set(BARE)}"
    checks = check_constraints(OlympicEvent.ACCURACY_CONTEST, {"accuracy": 0.9, "latency_median_ms": 1.0,
                                                               "model_size_bytes": 10})
    _assert_named(checks, "olympics")
    assert all(c["passed"] for c in checks), checks


def test_accuracy_on_is_the_mean_of_the_result_it_names(model, loader):
    "digits.accuracy_on is a quick float; its docstring names the ProportionResult it is the mean of."
    from tinytorch.benchmarking.digits import accuracy_on

    X, y = loader[0]
    assert "accuracy_result" in accuracy_on.__doc__
    res = metrics.accuracy_result(model, [(X, y)])
    assert accuracy_on(model, X, y) == pytest.approx(res.mean) and res.ci_lower <= res.mean <= res.ci_upper


def test_machine_roofs_are_results_and_the_floats_their_medians(monkeypatch):
    "The roofs the roofline takes are results (one rate per timed sample); the seed-style floats are their medians."
    from types import SimpleNamespace

    from tinytorch.benchmarking import hardware

    bw = hardware.memory_bandwidth_result(size_mb=8, samples=5)
    macs = hardware.peak_gmacs_result(n=128, samples=5)
    for r, unit in ((bw, "GB/s"), (macs, "GMAC/s")):
        assert isinstance(r, BenchmarkResult) and r.unit == unit and r.count == 5 and r.min > 0, (r.unit, r.values)
        assert "measured" in r.metadata["method"]
    # the rates from the timings, by hand: a copy of 8 MiB reads and writes 2 * 8 MiB; a 128^3 matmul is 2**21 MACs
    fake = SimpleNamespace(per_call_ns=[1e6, 2e6, 4e6], threads=1)
    monkeypatch.setattr(hardware, "time_callable", lambda fn, **k: (fn(), fake)[1])
    assert hardware.memory_bandwidth_result(size_mb=8, samples=3).values == pytest.approx(
        [2 * 8 * 2**20 / ns for ns in (1e6, 2e6, 4e6)])  # bytes per ns = GB/s
    assert hardware.peak_gmacs_result(n=128, samples=3).values == pytest.approx([128**3 / ns for ns in (1e6, 2e6, 4e6)])
    monkeypatch.setattr(hardware, "memory_bandwidth_result",
                        lambda size_mb, samples: BenchmarkResult("memory_bandwidth", [1.0, 5.0, 2.0], unit="GB/s"))
    monkeypatch.setattr(hardware, "peak_gmacs_result",
                        lambda n, samples: BenchmarkResult("peak_compute", [7.0, 3.0, 4.0], unit="GMAC/s"))
    assert hardware.measure_memory_bandwidth_gbps() == 2.0 and hardware.measure_peak_gmacs() == 4.0
