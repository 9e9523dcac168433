"""Issue 21, points 2-4: a non-finite or wrong-shaped model output is a failure in every stack (never a
score); one decision rule (`ALPHA`, `MIN_EFFECT`, `decide`); bytes are integers equal to an independent count."""
import subprocess
import sys

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


def test_cli_names_a_non_finite_model(tmp_path):
    class Nan(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 10)

        def forward(self, x):
            return self.lin(x.flatten(1)) * float("nan")

    path = tmp_path / "nanmodel.pt"
    torch.jit.save(torch.jit.script(Nan()), str(path))
    r = subprocess.run([sys.executable, "-m", "tito", "benchmark", "--model", str(path), "--input-shape", "1,1,8,8",
                        "--runs", "2", "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert "failed: accuracy of nanmodel" in r.stderr and "'digits_test'" in r.stderr and "row 0" in r.stderr, r.stderr
    report = (tmp_path / "out" / "benchmark_report.md").read_text()
    assert "non-finite output" in report and "n/a (failed)" in report
