"""Edge metrics (Module 19): memory by dtype, real precision conversion (int8 really int8, fp16/bf16
halve memory), accuracy tolerance on digits, latency scaling, energy labels, bad input."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from tinytorch.benchmarking.digits import default_digits_model, digits_loader
from tinytorch.benchmarking.metrics import (
    PerfMetrics, UnsupportedPrecisionError, collect_metrics, evaluate_accuracy, measure_latency,
    measure_latency_distribution, memory_violations, model_memory_mb, model_precision, to_precision,
)

INT8_ACCURACY_TOLERANCE = 0.03  # stated: int8 may lose at most 3 points of top-1 on the digits test split


def _weight_bytes(model: nn.Module) -> int:
    "Bytes of the weight matrices/kernels only, read from the state dict (packed int8 opened)."
    total = 0
    for key, value in model.state_dict().items():
        tensors = value if isinstance(value, tuple) else (value,)
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.dim() >= 2:
                total += t.numel() * t.element_size()
    return total


def test_memory_matches_element_sizes():
    net = nn.Sequential(nn.Linear(300, 200), nn.ReLU(), nn.Linear(200, 10))
    n = sum(p.numel() for p in net.parameters())
    assert model_memory_mb(net) == pytest.approx(n * 4 / 2**20, abs=0)
    for p in ("fp16", "bf16"):
        assert model_memory_mb(to_precision(net, p)) == pytest.approx(n * 2 / 2**20, abs=0)


def test_int8_is_really_int8():
    net = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
    q = to_precision(net, "int8", example_input=torch.randn(2, 512))
    assert model_precision(q) == "int8"
    assert _weight_bytes(net) == 4 * _weight_bytes(q), "int8 weights take exactly a quarter of float32 weights"
    ratio = model_memory_mb(net) / model_memory_mb(q)
    assert 3.5 < ratio <= 4.0, f"with biases and scales the whole model shrinks ~4x, got {ratio:.2f}x"
    qtypes = {t.dtype for v in q.state_dict().values() for t in (v if isinstance(v, tuple) else (v,))
              if isinstance(t, torch.Tensor)}
    assert torch.qint8 in qtypes


def test_static_int8_digits_accuracy_within_tolerance():
    model = default_digits_model()
    loader = digits_loader("test", 64)
    base = evaluate_accuracy(model, loader)
    q = to_precision(model, "int8", calibration_data=digits_loader("train", 64), example_input=loader)
    assert q.tinytorch_quantization["mode"] == "static", "a conv model gets static (calibrated) int8"
    assert any(".quantized" in type(m).__module__ for m in q.modules())
    acc = evaluate_accuracy(q, loader, precision="int8")
    assert acc >= base - INT8_ACCURACY_TOLERANCE, f"int8 {acc:.3f} vs fp32 {base:.3f}"
    assert model_memory_mb(q) < 0.35 * model_memory_mb(model)


def test_half_precisions_run_and_halve_memory():
    model = default_digits_model()
    loader = digits_loader("test", 64)
    base = evaluate_accuracy(model, loader)
    for p in ("fp16", "bf16"):
        m = to_precision(model, p, example_input=loader)
        assert model_memory_mb(m) * 2 == pytest.approx(model_memory_mb(model))
        assert abs(evaluate_accuracy(m, loader, precision=p) - base) <= 0.02


def test_unsupported_precision_is_an_error_not_fp32():
    class NoHalf(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            if x.dtype == torch.bfloat16:
                raise NotImplementedError("kernel missing for BFloat16")
            return self.fc(x)

    with pytest.raises(UnsupportedPrecisionError, match=r"^precision bf16 is not supported for this model on cpu: .*BFloat16"):
        to_precision(NoHalf(), "bf16", example_input=torch.randn(1, 4))


def test_collect_metrics_fields_and_labels():
    model = default_digits_model()
    m = collect_metrics(model, digits_loader("test", 64), power_watts=5.0, repeats=5, batch_size=8)
    assert isinstance(m, PerfMetrics) and m.batch_size == 8
    assert m.throughput_sps == pytest.approx(8 / (m.latency_ms / 1e3))
    assert m.memory_mb == pytest.approx(6090 * 4 / 2**20)
    assert m.energy_j is not None and m.methods["energy_j"] in ("measured: RAPL", "estimated: mean latency x power")
    if m.methods["energy_j"].startswith("estimated"):
        assert m.energy_j == pytest.approx(m.conditions["measured_latency_mean_ms"] / 1e3 * 5.0, rel=1e-9)
    d = m.to_dict()
    assert {"accuracy", "latency_ms", "latency_std_ms", "latency_p95_ms", "throughput_sps", "memory_mb",
            "energy_j", "methods", "latency_scaled_by"} <= set(d)
    scaled = collect_metrics(model, digits_loader("test", 64), power_watts=5.0, latency_multiplier=4.0, repeats=5)
    assert scaled.latency_ms == pytest.approx(4.0 * scaled.conditions["measured_latency_mean_ms"])
    assert scaled.energy_j == pytest.approx(scaled.latency_ms / 1e3 * 5.0)
    assert scaled.methods["energy_j"].startswith("estimated") and "latency_scaled_by=4" in scaled.methods["latency_ms"]


def test_no_energy_without_counter_or_power():
    m = collect_metrics(default_digits_model(), digits_loader("test", 64), repeats=3, latency_multiplier=2.0)
    assert m.energy_j is None and m.reasons["energy_j"]


def test_latency_helpers(monkeypatch):
    lin = nn.Linear(32, 32)
    x = torch.randn(4, 32)
    assert measure_latency(lin, x, runs=5, warmup=1) > 0
    from tinytorch.benchmarking import metrics
    from tinytorch.benchmarking.results import BenchmarkResult
    assert metrics.measure_latency is metrics.latency_mean_ms, "the seed's name is the alias of the function naming its statistic"
    monkeypatch.setattr(metrics, "latency_result", lambda *a, **k: BenchmarkResult("latency", [1.0, 2.0, 6.0], unit="ms"))
    assert measure_latency(lin, x) == metrics.latency_mean_ms(lin, x) == 3.0, "the mean (median 2.0), as the seed documents"
    mean, std, p95 = measure_latency_distribution(lin, x, repeats=8)
    assert mean > 0 and std >= 0 and p95 > 0


def test_batched_accuracy_equals_whole_set_accuracy():
    from tinytorch.benchmarking.digits import accuracy_on, load_digits_split

    model, (X, y) = default_digits_model(), load_digits_split("test")
    assert evaluate_accuracy(model, digits_loader("test", 64)) == pytest.approx(accuracy_on(model, X, y), abs=1e-6)


def test_latency_distribution_with_runs_is_per_call():
    import time

    class Sleeper(nn.Module):  # a reference of known minimum duration (5 ms per call), not a model stand-in
        def forward(self, x):
            time.sleep(0.005)
            return x

    mean, _, p95 = measure_latency_distribution(Sleeper(), torch.zeros(1), repeats=3, runs=4, warmup=1)
    assert 5.0 <= mean < 15.0 and p95 >= 5.0, f"with runs=4 latency is per call (~5 ms), got {mean:.2f} ms"
    with pytest.raises(ValueError, match="runs"):
        measure_latency_distribution(Sleeper(), torch.zeros(1), runs=0)


@pytest.mark.parametrize("budgets", [[0], [-2.5], ["8"], [None]])
def test_memory_violations_rejects_bad_budgets(budgets):
    with pytest.raises(ValueError, match="budgets"):
        memory_violations(1.0, budgets)


def test_memory_violations_keys():
    assert memory_violations(2.0, [1, 2, 4.5]) == {"violates_1mb": True, "violates_2mb": False, "violates_4.5mb": False}


@pytest.mark.parametrize("kwargs,arg", [({"precision": "int4"}, "precision"), ({"device": "npu"}, "device"),
                                        ({"latency_multiplier": -1}, "latency_multiplier"),
                                        ({"batch_size": 0}, "batch_size")])
def test_collect_metrics_bad_input(kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        collect_metrics(default_digits_model(), digits_loader("test", 64), **kwargs)


def test_loader_without_labels():
    with pytest.raises(ValueError, match="labels"):
        evaluate_accuracy(default_digits_model(), [torch.zeros(2, 1, 8, 8)])


@pytest.mark.parametrize("args,arg", [(("int8",), "calibration_data"), (("fp8",), "precision"),
                                      (("fp32", "tpu"), "device"), (("int8", "cuda"), "device")])
def test_to_precision_bad_input(args, arg):
    conv = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    with pytest.raises(ValueError, match=arg):
        to_precision(conv, *args)


def test_collect_metrics_calibration_is_named():
    m = collect_metrics(default_digits_model(), digits_loader("test", 64), precision="int8", repeats=3,
                        calibration_data=digits_loader("train", 64), calibration_split="digits train split")
    assert m.methods["int8_calibration"].startswith("static int8 calibrated on digits train split")
    assert m.methods["int8_path"] and "int8_calibration" not in collect_metrics(
        default_digits_model(), digits_loader("test", 64), repeats=3).methods
    with pytest.raises(ValueError, match="calibration_data.*split"):
        collect_metrics(default_digits_model(), digits_loader("test", 64), precision="int8", repeats=2)


def test_names_say_their_statistic_and_seed_aliases_equal_them():
    from tinytorch.benchmarking.metrics import accuracy_result, latency_result, memory_result
    from tinytorch.benchmarking.results import SEED_ALIASES, BenchmarkResult, CountResult, ProportionResult
    m = collect_metrics(default_digits_model(), digits_loader("test", 64), repeats=4, latency_multiplier=3.0)
    raw = m.results["latency"]
    assert m.latency_mean_ms == m.latency_ms == pytest.approx(3.0 * raw.mean), "latency_ms is the alias of the mean kept from the original course code"
    assert m.conditions["measured_latency_mean_ms"] == raw.mean and "measured_latency_ms" not in m.conditions
    d = m.to_dict()
    assert d["latency_mean_ms"] == d["latency_ms"] and d["memory_bytes"] == m.memory_bytes == 6090 * 4
    assert isinstance(m.memory_bytes, int) and m.memory_mb == m.memory_bytes / 2**20
    m.latency_ms = 7.5  # an alias cannot drift from its field
    assert m.latency_mean_ms == 7.5
    assert SEED_ALIASES["PerfMetrics.latency_ms"] == "latency_mean_ms"
    for seed_fn in ("measure_latency", "evaluate_accuracy", "model_memory_mb", "measure_latency_distribution"):
        assert SEED_ALIASES[f"metrics.{seed_fn}"] in ("latency_result", "accuracy_result", "memory_result")
    # each float function of the original course code is a view of the result the public function returns
    net, x = nn.Linear(16, 4), torch.randn(1, 16)
    lat = latency_result(net, x, repeats=6)
    assert isinstance(lat, BenchmarkResult) and lat.count == 6 and lat.unit == "ms"
    loader = [(torch.eye(4), torch.tensor([0, 1, 2, 3]))]
    acc = accuracy_result(nn.Identity(), loader)
    assert isinstance(acc, ProportionResult) and acc.count == 4 and acc.mean == evaluate_accuracy(nn.Identity(), loader) == 1.0
    mem = memory_result(net)
    assert isinstance(mem, CountResult) and mem.unit == "bytes" and mem.median == (16 * 4 + 4) * 4
    assert model_memory_mb(net) == mem.median / 2**20
