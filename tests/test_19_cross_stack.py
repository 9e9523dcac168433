"""One model, one data set, every stack: the same accuracy, sizes and latency from each.

Benchmark, collect_metrics (PerfMetrics), TinyMLPerf and the Olympics all measure through the
one adapter, the one top-1 evaluation, the one timing core and the one set of result types;
this checks that they agree, so no stack quietly defines a quantity its own way.
"""
from __future__ import annotations

import io
import statistics

import pytest
import torch

from tinytorch.benchmarking.benchmark import Benchmark, ProportionResult, TinyMLPerf
from tinytorch.benchmarking.digits import default_digits_model, digits_loader, load_digits_split
from tinytorch.benchmarking.metrics import collect_metrics
from tinytorch.benchmarking.olympics import generate_submission, model_file_bytes
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
    # the Olympics: the bytes of the TorchScript file the judge runs, as its loader reads them (`model_file_bytes`)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(model, X[:1], check_trace=False), buf)
    size = sub["measurements"]["baseline"]["model_size"]["bytes"]
    assert abs(size - model_file_bytes(buf.getvalue())[0]) < 0.005 * size  # traced twice here: class names' digits
    assert state_dict_tensor_bytes(model) < size < serialized_bytes(model)[0] + 4_000, "tensors, structure and code"


ROUNDS = 7
BAND = 2 ** 0.5  # halfway (geometrically) between agreement (1x) and twice the work (2x)


def test_latency_medians_agree_across_stacks(setup):
    """Each stack's median latency of the same model on the same input, through the one timing
    core. The stacks are timed in interleaved rounds (Benchmark, collect_metrics, TinyMLPerf, one
    after the other, ROUNDS times) and each stack's figure is the median of its per-round ratios to
    the Benchmark median of the same round, so load that comes and goes (a CPU hog, another test
    run) slows neighbours alike and cancels. What it catches is a stack that reports another
    quantity (a mean, 1/throughput, a batch) under the same name: a control timed in the same
    rounds that runs the model twice must fall outside the band, so the band cannot be too wide
    to see a 2x disagreement."""
    model, X, y, hand, bench = setup
    twice = lambda x: (model(x), model(x))[1]  # noqa: E731  the control: twice the work of one call
    ratios: dict[str, list[float]] = {"collect_metrics": [], "TinyMLPerf": [], "twice (control)": []}
    for _ in range(ROUNDS):
        b = Benchmark({"cnn": model, "twice": twice}, (X, y), measurement_runs=10, warmup_runs=2, rounds=2)
        lat = b.run_latency_benchmark()
        m = collect_metrics(model, digits_loader("test"), repeats=10)
        t = TinyMLPerf(random_seed=0).run_standard_benchmark(model, "digits", num_runs=10)
        base = lat["cnn"].median
        ratios["collect_metrics"].append(m.latency_median_ms / base)
        ratios["TinyMLPerf"].append(t["latency_median_ms"] / base)
        ratios["twice (control)"].append(lat["twice"].median / base)
    got = {k: statistics.median(v) for k, v in ratios.items()}
    shown = {k: [round(r, 2) for r in v] for k, v in ratios.items()}
    for label in ("collect_metrics", "TinyMLPerf"):
        assert 1 / BAND < got[label] < BAND, f"{label}: median ratio to Benchmark {got[label]:.2f}, per round {shown}"
    assert got["twice (control)"] > BAND, f"the 2x control must fall outside the band: {got}, per round {shown}"
    # and the comparison machinery treats the PerfMetrics result like any other
    c = compare_results(bench.results["latency"]["cnn"], m.results["latency"], names=("benchmark", "metrics"))
    assert "benchmark" in c.verdict and "metrics" in c.verdict
