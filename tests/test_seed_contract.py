"""The seed's documented API (seed 004) as a tested contract.

The seed's own unit tests for BenchmarkResult, precise_timer, Benchmark and BenchmarkSuite,
and the matching parts of its `test_module`, transcribed call for call with the seed's mock
models and dataset dicts. Only the assertions that demand a figure the seed invented (random
accuracy, random energy) are changed: those figures are unavailable here, with a reason.
The TinyMLPerf and compare_optimization_techniques parts are in test_seed_contract_tinymlperf.py.
"""
from __future__ import annotations

import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

# the seed's import line, exactly
from tinytorch.benchmarking.benchmark import (Benchmark, BenchmarkResult, BenchmarkSuite, OlympicEvent, TinyMLPerf,
                                              compare_optimization_techniques, precise_timer)


class MockModel:
    "The seed's mock: a name and a forward() that takes about 1 ms; no parameters()."

    def __init__(self, name):
        self.name = name

    def forward(self, x):
        time.sleep(0.001)  # the seed's stand-in for computation (a test fixture, not a measurement)
        return x


def test_seed_imports_and_events():
    assert OlympicEvent.LATENCY_SPRINT.value == "latency_sprint"
    assert {e.value for e in OlympicEvent} == {"latency_sprint", "memory_challenge", "accuracy_contest",
                                               "all_around", "extreme_push"}
    assert TinyMLPerf.__name__ == "TinyMLPerf" and callable(compare_optimization_techniques)
    import tinytorch.benchmarking.benchmark as bm
    assert {"Benchmark", "BenchmarkResult", "BenchmarkSuite", "TinyMLPerf", "OlympicEvent", "precise_timer",
            "compare_optimization_techniques"} <= set(bm.__all__)
    with pytest.raises(AttributeError, match="no attribute"):
        bm.not_a_name  # noqa: B018


def test_unit_benchmark_result():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    result = BenchmarkResult("test_metric", values)
    assert result.mean == 3.0
    assert abs(result.std - statistics.stdev(values)) < 1e-10
    assert result.median == 3.0
    assert result.min_val == 1.0
    assert result.max_val == 5.0
    assert result.count == 5
    assert result.ci_lower < result.mean < result.ci_upper
    result_dict = result.to_dict()
    assert result_dict["metric_name"] == "test_metric"
    assert result_dict["mean"] == 3.0
    # the seed's docstring example
    r = BenchmarkResult("model_accuracy", [0.95, 0.94, 0.96])
    assert f"Mean: {r.mean:.3f} ± {r.std:.3f}" == "Mean: 0.950 ± 0.010"


def test_unit_precise_timer():
    with precise_timer() as timer:
        time.sleep(0.01)
    assert 0.005 < timer.elapsed < 0.05, f"Expected ~0.01s, got {timer.elapsed}s"
    times = []
    for _ in range(3):
        with precise_timer() as timer:
            time.sleep(0.001)
        times.append(timer.elapsed)
    assert all(0.0005 < t < 0.01 for t in times)
    assert timer.elapsed == timer.elapsed_ns / 1e9


def test_unit_benchmark():
    models = [MockModel("fast_model"), MockModel("slow_model")]
    datasets = [{"data": "test1"}, {"data": "test2"}]
    benchmark = Benchmark(models, datasets, warmup_runs=2, measurement_runs=3)

    latency_results = benchmark.run_latency_benchmark()
    assert len(latency_results) == 2
    assert "fast_model" in latency_results
    assert all(isinstance(result, BenchmarkResult) for result in latency_results.values())
    # the sleep is measured, not invented: at least 1 ms per call
    assert all(r.median >= 1.0 and r.count == 3 for r in latency_results.values())
    assert latency_results["fast_model"].metadata["input_shape"] == [1, 28, 28]  # the seed's default shape

    # changed: the seed invented accuracies for data it did not have; here they are unavailable
    accuracy_results = benchmark.run_accuracy_benchmark()
    assert accuracy_results == {}
    for name in ("fast_model", "slow_model"):
        reason = benchmark.unavailable["accuracy"][name]
        assert "no labelled dataset" in reason and "without array data" in reason

    memory_results = benchmark.run_memory_benchmark()
    assert len(memory_results) == 2
    assert all(result.mean >= 0 for result in memory_results.values())
    assert all("forward-pass peak" in r.method for r in memory_results.values())

    comparison_df = benchmark.compare_models("latency")
    assert len(comparison_df) == 2
    assert "model" in comparison_df.columns
    assert "mean" in comparison_df.columns


def test_seed_how_to_use_block():
    "The seed's 'how to use' block: two models, two dicts that name them, latency."
    baseline_model, optimized_model = MockModel("baseline"), MockModel("optimized")
    benchmark = Benchmark([baseline_model, optimized_model], [{"name": "baseline"}, {"name": "optimized"}])
    results = benchmark.run_latency_benchmark()
    assert set(results) == {"baseline", "optimized"} and all(r.count == 10 for r in results.values())


def test_unit_benchmark_suite():
    models = [MockModel("efficient_model"), MockModel("accurate_model")]
    datasets = [{"test": "data"}]
    with tempfile.TemporaryDirectory() as tmp_dir:
        suite = BenchmarkSuite(models, datasets, output_dir=tmp_dir, progress=False, energy_window_s=0.05)
        results = suite.run_full_benchmark()
        assert "latency" in results
        assert "memory" in results
        # changed: accuracy and energy are not invented; each model has a reason instead
        for metric in ("accuracy", "energy"):
            assert metric not in results
            assert set(suite.unavailable[metric]) == {"efficient_model", "accurate_model"}
            assert all(isinstance(v, str) and v for v in suite.unavailable[metric].values())
        for metric_results in results.values():
            assert len(metric_results) == 2
            assert all(isinstance(result, BenchmarkResult) for result in metric_results.values())
        report = suite.generate_report()
        assert "Benchmark Report" in report
        assert "System Information" in report
        assert "Recommendations" in report
        assert (Path(tmp_dir) / "benchmark_report.md").exists()


class RealisticModel:
    "The seed's test_module model, minus the random figures: forward takes a known time."

    def __init__(self, name, characteristics):
        self.name = name
        self.characteristics = characteristics

    def forward(self, x):
        time.sleep(self.characteristics.get("base_latency", 0.001))
        if hasattr(x, "shape"):
            temp = np.ones(int(np.prod(x.shape) * self.characteristics.get("memory_factor", 1.0)))
            _ = np.sum(temp)
        return x

    def parameters(self):
        return [np.zeros(self.characteristics.get("param_count", 1000), dtype=np.float32)]


def test_module_integration_scenarios():
    models = [RealisticModel("efficient_model", {"base_latency": 0.001, "memory_factor": 0.5, "param_count": 5000}),
              RealisticModel("accurate_model", {"base_latency": 0.003, "memory_factor": 2.0, "param_count": 20000}),
              RealisticModel("balanced_model", {"base_latency": 0.002, "memory_factor": 1.0, "param_count": 10000})]
    datasets = [{"test_data": f"dataset_{i}"} for i in range(3)]
    with tempfile.TemporaryDirectory() as tmp_dir:
        suite = BenchmarkSuite(models, datasets, output_dir=tmp_dir, progress=False, energy_window_s=0.05,
                               measurement_runs=5, warmup_runs=1)
        results = suite.run_full_benchmark()
        assert "latency" in results and "memory" in results
        assert "accuracy" not in results and len(suite.unavailable["accuracy"]) == len(models)
        assert len(suite.unavailable["energy"]) + len(results.get("energy", {})) == len(models)
        for result_type in results.values():
            assert len(result_type) == len(models)
        for result_type, model_results in results.items():
            for model_name, result in model_results.items():
                assert isinstance(result, BenchmarkResult)
                assert result.count > 0
                assert result.std >= 0
                assert result.ci_lower <= result.mean <= result.ci_upper
        # the sleeps are measured: 1, 3 and 2 ms, in that order
        lat = {n: r.median for n, r in results["latency"].items()}
        assert lat["efficient_model"] < lat["balanced_model"] < lat["accurate_model"]
        # parameter memory is counted from parameters(): 5000 float32 = 20,000 bytes
        assert suite.results["parameter_memory"]["efficient_model"].metadata["bytes"] == 20000
        report = suite.generate_report()
        assert "Benchmark Report" in report and "System Information" in report and "Recommendations" in report

    system_info = {"platform": platform.platform(), "processor": platform.processor(),
                   "python_version": platform.python_version()}
    benchmark = Benchmark(models[:1], datasets[:1])
    assert all(key in benchmark.system_info for key in system_info.keys())


# ---- a TinyTorch-style model: its own Tensor with .data, Linear layers, parameters() ----------

class Tensor:
    def __init__(self, data):
        self.data = np.asarray(data, dtype=np.float32)

    @property
    def shape(self):
        return self.data.shape


class Linear:
    def __init__(self, w):
        self.weight = Tensor(w)

    def forward(self, x):
        assert isinstance(x, Tensor), f"TinyTorch layers take Tensors, got {type(x).__name__}"
        return Tensor(x.data.reshape(len(x.data), -1) @ self.weight.data)


class TinyMLP:
    name = "tiny_mlp"

    def __init__(self, w1, w2):
        self.layers = [Linear(w1), Linear(w2)]

    def forward(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def parameters(self):
        return [layer.weight for layer in self.layers]


def test_tinytorch_style_model_through_benchmark():
    rng = np.random.default_rng(4)
    w1, w2 = rng.standard_normal((6, 8)), rng.standard_normal((8, 3))
    m = TinyMLP(w1, w2)
    X = rng.standard_normal((40, 6)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    hand = int(sum(int(np.argmax(X[i] @ w1.astype(np.float32) @ w2.astype(np.float32))) == y[i] for i in range(40)))
    b = Benchmark(models=[m], datasets=[(X, y)], measurement_runs=6)
    r = b.run_latency_benchmark(input_shape=(1, 6))
    lat = r["tiny_mlp"]
    assert lat.count == len(lat.values) == 6 and lat.min_val <= lat.mean <= lat.max_val and lat.std >= 0
    acc = b.run_accuracy_benchmark()["tiny_mlp"]
    assert acc.correct == hand and acc.count == 40 and acc.mean == pytest.approx(hand / 40)
    mem = b.run_memory_benchmark(input_shape=(1, 6))
    assert b.results["parameter_memory"]["tiny_mlp"].metadata["bytes"] == (48 + 24) * 4
    assert mem["tiny_mlp"].mean > 0
