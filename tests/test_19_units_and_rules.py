"""Issue 21, points 2-4: a non-finite or wrong-shaped model output is a failure in every stack (never a
score); one decision rule (`ALPHA`, `MIN_EFFECT`, `decide`); bytes are integers equal to an independent count."""
from unittest import mock

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tinytorch.benchmarking.benchmark import Benchmark, TinyMLPerf
from tinytorch.benchmarking.metrics import collect_metrics
from tinytorch.benchmarking.olympics import generate_submission
from tinytorch.benchmarking.results import top1_correct

# upstream TinyTorch's invalid predictions, for one sample of a 10-class task
BAD_OUTPUTS = {"nan": np.full((1, 10), np.nan), "inf 1-D": np.full(10, np.inf), "flat 20": np.ones(20),
               "batch 2 for 1 label": np.ones((2, 5)), "empty": np.array([])}


class Fixed(torch.nn.Module):
    "Returns a fixed output whatever the input (a real parameter, so every stack accepts it)."

    def __init__(self, out):
        super().__init__()
        self.lin, self.out = torch.nn.Linear(64, 10), torch.as_tensor(out, dtype=torch.float32)

    def forward(self, x):
        return self.out.clone()


def _expected(case):
    return ("non-finite", "row 0") if case == "nan" else ("expected output of shape",)


X1, Y1 = torch.randn(1, 1, 8, 8), torch.zeros(1, dtype=torch.long)  # label 0: argmax of all-NaN would be "right"


@pytest.mark.parametrize("case", list(BAD_OUTPUTS))
def test_bad_outputs_fail_in_benchmark_collect_metrics_and_tinymlperf(case):
    m = Fixed(BAD_OUTPUTS[case])
    b = Benchmark({"fixed": m}, [(X1, Y1)], measurement_runs=3, warmup_runs=1, dataset_names=["probe"])
    b.run_accuracy_benchmark()
    assert "fixed" not in b.results.get("accuracy", {}), f"{case}: scored {b.results['accuracy']}"
    msg = b.failures["accuracy"]["fixed"]["message"]
    assert "'fixed'" in msg and "'probe'" in msg and all(w in msg for w in _expected(case)), msg
    with pytest.raises(ValueError, match="Fixed") as e:
        collect_metrics(m, [(X1, Y1)], repeats=3)
    assert "'loader'" in str(e.value) and all(w in str(e.value) for w in _expected(case)), e.value
    q = TinyMLPerf().run_standard_benchmark(m, "digits", num_runs=3, dataset=(X1, Y1))["quality"]
    assert q["value"] is None and "digits" in q["error"] and all(w in q["error"] for w in _expected(case)), q


def test_first_bad_row_is_named_across_batches():
    class NanOnRow(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(len(x), 3)
            out[x[:, 0] == 6] = float("inf")
            return out

    X = torch.arange(10.0).reshape(10, 1)
    with pytest.raises(ValueError, match=r"model 'NanOnRow' on dataset 'data': non-finite .* row 6"):
        top1_correct(NanOnRow(), DataLoader(TensorDataset(X, torch.zeros(10, dtype=torch.long)), batch_size=4))
    assert top1_correct(torch.nn.Linear(1, 3), (X, torch.zeros(10, dtype=torch.long))) is not None  # finite: scored


def test_anomaly_detection_rejects_non_finite_reconstructions():
    from tinytorch.benchmarking.tinymlperf import TASKS, evaluate_quality
    shape = TASKS["anomaly_detection"].input_shape
    X = torch.randn(8, *shape[1:])
    y = torch.tensor([0, 1] * 4)
    with pytest.raises(ValueError, match="non-finite"):
        evaluate_quality(lambda x: x * float("nan"), "anomaly_detection", (X, y))


def test_olympics_submission_of_a_nan_model_fails():
    X, y = torch.randn(16, 1, 8, 8), torch.zeros(16, dtype=torch.long)
    nan = Fixed(np.full((16, 10), np.nan))
    with pytest.raises(RuntimeError, match=r"optimized.*non-finite.*row 0"):
        generate_submission(Fixed(np.ones((16, 10))), nan, "latency_sprint", (X, y), measurement_runs=3, warmup_runs=1)


def test_cli_names_a_non_finite_model(tmp_path, capsys):
    class Nan(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 10)

        def forward(self, x):
            return self.lin(x.flatten(1)) * float("nan")

    path = tmp_path / "nanmodel.pt"
    torch.jit.save(torch.jit.script(Nan()), str(path))
    from tito.cli import main  # in this process: `module complete` keys this file by what it executed

    main(["benchmark", "--model", str(path), "--input-shape", "1,1,8,8", "--runs", "2", "--output-dir",
          str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "failed: accuracy of nanmodel" in err and "'digits_test'" in err and "row 0" in err, err
    report = (tmp_path / "out" / "benchmark_report.md").read_text()
    assert "non-finite output" in report and "n/a (failed)" in report


# --- one decision rule -------------------------------------------------------------------------------------------
def test_alpha_and_min_effect_are_defined_once_and_used_by_every_default():
    import inspect
    import re
    from pathlib import Path
    from tinytorch.benchmarking import benchmark, optimize, pareto, results
    assert (results.ALPHA, results.MIN_EFFECT) == (0.05, 0.02)
    for fn in (results.is_significant, results.compare_samples, results.compare_results, pareto.pareto_front_with_ties,
               benchmark.Benchmark.compare, optimize.ablate_order):
        p = inspect.signature(fn).parameters
        assert (p["alpha"].default, p["min_effect"].default) == (0.05, 0.02), fn
    src = "".join(p.read_text() for p in Path(results.__file__).parent.glob("*.py"))
    assert not re.findall(r"(?:alpha|min_effect): float = 0\.0[25]", src), "a default typed out again"


@pytest.mark.parametrize("result, op, threshold, want", [
    ((0.86, 0.93), ">=", 0.85, "pass"), ((0.80, 0.90), ">=", 0.85, "inconclusive"), ((0.70, 0.84), ">=", 0.85, "fail"),
    ((0.85, 0.90), ">=", 0.85, "pass"), ((0.85, 0.90), ">", 0.85, "inconclusive"), ((1.0, 2.0), "<", 3.0, "pass"),
    ((1.0, 3.0), "<=", 3.0, "pass"), ((1.0, 3.0), "<", 3.0, "inconclusive"), ((3.5, 4.0), "<=", 3.0, "fail"),
    (0.9, "<", 1.0, "pass"), (1.0, "<", 1.0, "fail"), (1.0, "<=", 1.0, "pass")])
def test_decide(result, op, threshold, want):
    from tinytorch.benchmarking.results import decide
    d = decide(result, op, threshold)
    assert d == want, (result, op, threshold, d, d.basis)
    assert ("decided plainly" in d.basis) == (not isinstance(result, tuple)), d.basis


def test_decide_on_results_uses_their_interval():
    from tinytorch.benchmarking.results import BenchmarkResult, CountResult, ProportionResult, decide
    acc = ProportionResult("accuracy", [1] * 440 + [0] * 10)  # Wilson [0.9596, 0.9879]
    assert [decide(acc, ">=", t) for t in (0.90, 0.97, 0.99)] == ["pass", "inconclusive", "fail"]
    lat = BenchmarkResult("latency", [1.0, 1.2, 0.9, 1.1, 1.0], unit="ms")  # 5 values: the median's interval is the range
    assert decide(lat, "<=", 1.05) == "inconclusive" and decide(lat, "<=", 2.0) == "pass" and decide(lat, "<=", 0.5) == "fail"
    # the headline's interval decides, not the mean's: three interruptions pull the mean's interval past 1.05
    skewed = BenchmarkResult("latency", [1.0 + 0.001 * (i % 9 - 4) for i in range(27)] + [10.0] * 3, unit="ms")
    assert skewed.ci_upper > 1.05 and skewed.median_ci_upper < 1.01, (skewed.ci_upper, skewed.median_ci())
    assert decide(skewed, "<=", 1.05) == "pass", decide(skewed, "<=", 1.05).basis
    assert decide(CountResult("size", [100]), "<", 101).basis.startswith("point value 100")
    assert decide(BenchmarkResult("x", [3.0]), "<", 2.0) == "fail"  # one value: no interval, decided plainly
    for bad, arg in [((acc, "=>", 0.9), "op"), ((acc, ">=", float("nan")), "threshold"), (("x", ">=", 1), "result"),
                     ((float("inf"), "<", 1.0), "result")]:
        with pytest.raises(ValueError, match=arg):
            decide(*bad)


def test_compliance_budget_and_sweep_decide_through_the_rule():
    from tinytorch.benchmarking.hardware import _violations
    from tinytorch.benchmarking.metrics import memory_violations
    from tinytorch.benchmarking.results import BenchmarkResult, ProportionResult
    from tinytorch.benchmarking.tinymlperf import compliance_decision
    acc = ProportionResult("accuracy", [1] * 440 + [0] * 10)
    assert compliance_decision(acc, 0.97) == "inconclusive" and compliance_decision(acc, 0.90, 1.0, 2.0) == "pass"
    assert memory_violations(1.0, [1.0, 0.5]) == {"violates_1mb": False, "violates_0.5mb": True}
    lat = BenchmarkResult("latency", [1.0, 1.2, 0.9, 1.1, 1.0], unit="ms")
    row = {"accuracy": acc.mean, "latency_mean_ms": lat.mean, "memory_mb": 0.2}
    got = _violations(row, {"min_accuracy": 0.97, "max_latency_mean_ms": 1.05, "max_memory_mb": 0.1},
                      {"accuracy": acc, "latency_mean_ms": (lat.ci_lower, lat.ci_upper)})
    assert got[0].startswith("min_accuracy (inconclusive") and got[1].startswith("max_latency_mean_ms (inconclusive"), got
    assert got[2] == "max_memory_mb", got
    assert _violations(row, {"min_accuracy": 0.9, "max_latency_mean_ms": 2.0}, {"accuracy": acc}) == []


def test_report_best_is_the_pareto_set_with_ties(tmp_path):
    from tinytorch.benchmarking.report import plot_metric
    from tinytorch.benchmarking.results import BenchmarkResult
    a = BenchmarkResult("latency", [1.00, 1.02, 0.98, 1.01, 0.99, 1.00], unit="ms")
    b = BenchmarkResult("latency", [0.995, 1.015, 0.985, 1.005, 0.995, 1.0], unit="ms")  # within 2%: a tie
    c = BenchmarkResult("latency", [2.0, 2.1, 1.9, 2.0, 2.05, 1.95], unit="ms")
    rows = [{"model": n, "metric": "latency", "status": "measured", "median": r.median, "ci_lower": r.ci_lower,
             "ci_upper": r.ci_upper} for n, r in zip("abc", (a, b, c))]
    payload = {"table": rows, "metrics": {"latency": {"unit": "ms", "direction": "min"}}, "models": list("abc"),
               "results": {"latency": {n: r.to_dict() for n, r in zip("abc", (a, b, c))}}}
    with mock.patch("tinytorch.benchmarking.report._save_figure") as save:
        plot_metric(payload, "latency", tmp_path)
    assert save.call_args.args[3] == "latency: best = a, b", save.call_args  # a and b tie, c is slower


# --- bytes are integers ------------------------------------------------------------------------------------------
def _models(tmp_path):
    "One small conv model (with batch-norm buffers) as eager, pickled (torch.save(model) reloaded) and TorchScript."
    base = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 10)).eval()
    torch.save(base, tmp_path / "pickled.pt")
    torch.jit.save(torch.jit.script(base), tmp_path / "script.pt")
    from tinytorch.benchmarking.suite import load_model_file
    return {"eager": base, "pickled": load_model_file(tmp_path / "pickled.pt"),
            "torchscript": load_model_file(tmp_path / "script.pt")}


def _independent_sizes(model, tmp_path):
    tensors = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    f = tmp_path / "archive.pt"  # torch names the zip's top folder after the file; "archive" as for a buffer
    if isinstance(model, torch.jit.ScriptModule):
        torch.jit.save(model, f)
    else:
        torch.save(model.state_dict(), f)
    return tensors, len(f.read_bytes())


@pytest.mark.parametrize("kind", ["eager", "pickled", "torchscript"])
def test_sizes_are_integer_bytes_equal_to_an_independent_count(kind, tmp_path):
    from tinytorch.benchmarking.devices import measure_watch_metrics
    from tinytorch.benchmarking.optimize import model_size_bytes
    from tinytorch.benchmarking.results import MiB, serialized_bytes, state_dict_tensor_bytes
    model = _models(tmp_path)[kind]
    tensors, on_disk = _independent_sizes(model, tmp_path)
    assert tensors > 4 * sum(p.numel() for p in model.parameters()), "the buffers (running stats) count too"
    assert state_dict_tensor_bytes(model) == tensors and serialized_bytes(model)[0] == on_disk == model_size_bytes(model)
    X, y = torch.randn(8, 1, 8, 8), torch.arange(8) % 10
    b = Benchmark({kind: model}, [(X, y)], measurement_runs=2, warmup_runs=1)
    b.run_memory_benchmark()
    size = b.results["model_size"][kind]
    assert size.unit == "bytes" and type(size.median) is int and size.median == size.metadata["bytes"] == on_disk
    m = collect_metrics(model, [(X, y)], repeats=3)
    r = m.results["memory"]
    assert r.unit == "bytes" and type(r.median) is int and r.median == tensors and m.memory_mb == tensors / MiB
    if kind != "torchscript":  # the watch metrics need forward hooks
        w = measure_watch_metrics(model, (1, 1, 8, 8), samples=3, startup_runs=2)
        assert w["serialized_bytes"] == on_disk and w["state_dict_tensor_bytes"] == tensors, w


def test_one_mib_constant_and_labels():
    import re
    from pathlib import Path
    import tinytorch.benchmarking as pkg
    from tinytorch.benchmarking import metrics, results
    assert results.MiB == 2**20 and not hasattr(metrics, "MB")
    src = {p.name: p.read_text() for p in Path(pkg.__file__).parent.glob("*.py")}
    assert not [n for n, t in src.items() if re.search(r"^\s*_?MB\s*=", t, re.M)], "MiB is defined once, in results"
    assert not [n for n, t in src.items() if "2**20" in t and n != "results.py"]
    assert "Model Size (MB)" not in src["report.py"]
