"""One model, one data set, every stack: the same accuracy, sizes and latency from each.

Benchmark, collect_metrics (PerfMetrics), TinyMLPerf and the Olympics all measure through the
one adapter, the one top-1 evaluation, the one timing core and the one set of result types;
this checks that they agree, so no stack quietly defines a quantity its own way.
"""
from __future__ import annotations

import pytest
import torch

from tinytorch.benchmarking.benchmark import Benchmark, ProportionResult, TinyMLPerf
from tinytorch.benchmarking.digits import default_digits_model, digits_loader, load_digits_split
from tinytorch.benchmarking.metrics import collect_metrics
from tinytorch.benchmarking.olympics import generate_submission
from tinytorch.benchmarking.optimize import prune_magnitude
from tinytorch.benchmarking.results import (MiB, compare_results, serialized_bytes, state_dict_tensor_bytes,
                                            top1_correct)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    "Every stack times with torch's current thread count: fix it at 1, so a busy core cannot stall a second thread."
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def setup(one_thread):
    model = default_digits_model()
    X, y = load_digits_split("test")
    with torch.inference_mode():
        hand = int((model(X).argmax(1) == y).sum())  # an independent count: one batch, plain torch
    bench = Benchmark({"cnn": model}, (X, y), measurement_runs=30, warmup_runs=3)
    bench.run_latency_benchmark()
    bench.run_accuracy_benchmark()
    bench.run_memory_benchmark()
    return model, X, y, hand, bench


def test_accuracy_is_the_same_everywhere(setup):
    model, X, y, hand, bench = setup
    b = bench.results["accuracy"]["cnn"]
    assert isinstance(b, ProportionResult) and (b.correct, b.count) == (hand, 450)
    assert sum(top1_correct(model, (X, y))) == hand
    m = collect_metrics(model, digits_loader("test"), repeats=5)
    assert m.accuracy == b.mean and isinstance(m.results["accuracy"], ProportionResult)
    assert m.results["accuracy"].values == b.values, "the same per-sample outcomes, image by image"
    t = TinyMLPerf(random_seed=0).run_standard_benchmark(model, "digits", num_runs=10)
    assert t["accuracy"] == b.mean
    sub = generate_submission(model, prune_magnitude(model, 0.3), "memory_challenge", (X, y), measurement_runs=6)
    acc = sub["measurements"]["baseline"]["accuracy"]
    assert (acc["correct"], acc["count"], acc["accuracy"]) == (hand, 450, b.mean)
    assert acc["wilson_95"] == [b.ci_lower, b.ci_upper]


def test_sizes_have_one_definition_each(setup):
    model, X, y, hand, bench = setup
    disk = bench.results["model_size"]["cnn"]
    assert disk.metadata["bytes"] == serialized_bytes(model)[0] and disk.ci_lower == disk.ci_upper == disk.mean
    m = collect_metrics(model, digits_loader("test"), repeats=5)
    assert m.memory_mb * MiB == state_dict_tensor_bytes(model) == m.results["memory"].metadata["bytes"]
    # the digits CNN holds no buffers: its tensor bytes are its parameters' bytes
    assert state_dict_tensor_bytes(model) == sum(p.numel() * p.element_size() for p in model.parameters())
    assert bench.results["parameter_memory"]["cnn"].metadata["bytes"] == state_dict_tensor_bytes(model)
    sub = generate_submission(model, prune_magnitude(model, 0.3), "memory_challenge", (X, y), measurement_runs=6)
    assert sub["measurements"]["baseline"]["model_size"]["bytes"] == state_dict_tensor_bytes(model)  # the Olympics: state tensor bytes


def test_latency_medians_agree_across_stacks(setup):
    """Each stack's median latency of the same model on the same input, through the one timing
    core. A shared machine is noisy, so the check is loose (a factor of 1.5); what it catches is
    a stack that reports another quantity (a mean, 1/throughput, a batch) under the same name."""
    model, X, y, hand, bench = setup
    before = bench.results["latency"]["cnn"].median
    m = collect_metrics(model, digits_loader("test"), repeats=30)
    t = TinyMLPerf(random_seed=0).run_standard_benchmark(model, "digits", num_runs=30)
    # Benchmark again afterwards: the machine's speed can drift between the runs, so the band is
    # the two Benchmark medians, widened by the factor
    again = Benchmark({"cnn": model}, (X, y), measurement_runs=30, warmup_runs=3)
    after = again.run_latency_benchmark()["cnn"].median
    lo, hi = min(before, after) / 1.5, max(before, after) * 1.5
    for label, median in (("collect_metrics", m.latency_median_ms), ("TinyMLPerf", t["latency_median_ms"])):
        assert lo < median < hi, f"{label} median {median:.4f} ms vs Benchmark's {before:.4f} / {after:.4f} ms"
    # and the comparison machinery treats the PerfMetrics result like any other
    c = compare_results(bench.results["latency"]["cnn"], m.results["latency"], names=("benchmark", "metrics"))
    assert "benchmark" in c.verdict and "metrics" in c.verdict
