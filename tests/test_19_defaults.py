"""The default benchmark as a library (issue 21 point 5): `tinytorch.benchmarking.defaults`, called
directly (no tito): default models and their calibration data, which data fits a user's model, the
runtime rows, the cross-runtime comparisons, the run, and `BenchmarkSuite.record_unavailable`."""
from __future__ import annotations

import json

import pytest
import torch

from tinytorch.benchmarking.defaults import (CALIBRATION_SPLIT, DEFAULT_MODEL_NAMES, calibration_batches,
                                             cross_runtime_comparisons, default_models, digits_misfit,
                                             parse_runtimes, run_default_benchmark, runtime_models,
                                             write_hardware_artifacts)
from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
from tinytorch.benchmarking.optimize import quantize_int8
from tinytorch.benchmarking.report import load_payload
from tinytorch.benchmarking.suite import BenchmarkSuite

FAST = dict(measurement_runs=2, warmup_runs=0, batch_sizes=(1,))


def test_parse_runtimes():
    assert parse_runtimes("eager, onnxruntime,eager") == ("eager", "onnxruntime")
    assert parse_runtimes(["compile"]) == ("compile",)
    for bad in ("", " , ", "eager,tflite", []):
        with pytest.raises(ValueError, match="runtimes: expected a comma-separated list"):
            parse_runtimes(bad)


def test_calibration_comes_from_the_training_split():
    batches = calibration_batches()
    assert [tuple(b.shape) for b in batches] == [(64, 1, 8, 8)] * 4
    assert torch.equal(torch.cat(batches), load_digits_split("train")[0][:256])
    assert not torch.equal(torch.cat(batches)[:64], load_digits_split("test")[0][:64])


def test_default_models():
    models = default_models()
    assert tuple(models) == DEFAULT_MODEL_NAMES
    q = models["digits_cnn_int8"].tinytorch_quantization
    assert q["mode"] == "static" and CALIBRATION_SPLIT in q["calibration"], q
    base, pruned = models["digits_cnn"], models["digits_cnn_pruned50"]
    weights = [m.weight for m in pruned.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    zeros = sum(int((w == 0).sum()) for w in weights) / sum(w.numel() for w in weights)
    assert zeros == pytest.approx(0.5, abs=0.01), f"50% of the weights pruned, got {zeros:.3f}"
    assert not any(bool((m.weight == 0).all()) for m in base.modules() if isinstance(m, torch.nn.Linear)), \
        "pruning must not touch the base model"


def test_digits_misfit_says_why():
    assert digits_misfit(default_digits_model(), (1, 1, 8, 8)) is None
    assert digits_misfit(torch.nn.Linear(20, 3), (1, 4, 5)).startswith("no labelled data fits input shape (1, 4, 5)")
    three = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3))
    assert "is not (batch, 10) class scores" in digits_misfit(three, (1, 1, 8, 8))
    assert digits_misfit(torch.nn.Linear(5, 10), (1, 1, 8, 8)).startswith("the model raised on digits images (RuntimeError")


def test_runtime_models_rows_and_reasons():
    fc = torch.nn.Linear(4, 2)
    rows, missing, refs = runtime_models({"fc": fc}, ["eager"], torch.zeros(1, 4))
    assert list(rows) == ["fc"] and missing == {} and refs == {}, "eager alone keeps the bare model name"
    rows, missing, _ = runtime_models({"fc": fc}, ["eager", "onnxruntime"], torch.zeros(1, 4))
    assert list(rows) == ["fc[eager]", "fc[onnxruntime]"] and rows["fc[onnxruntime]"].kind != rows["fc[eager]"].kind
    q = quantize_int8(torch.nn.Sequential(torch.nn.Linear(4, 4)))  # torch.ao dynamic int8: no ONNX export
    rows, missing, _ = runtime_models({"q": q}, ["eager", "onnxruntime"], torch.zeros(1, 4))
    assert list(rows) == ["q[eager]"] and "does not export to ONNX" in missing["q[onnxruntime]"], missing
    base = default_digits_model()
    q8 = quantize_int8(base, "static", calibration_data=calibration_batches())
    rows, missing, refs = runtime_models({"q8": q8}, ["eager", "onnxruntime"], torch.zeros(1, 1, 8, 8),
                                         onnx_int8={"q8": (base, calibration_batches())})
    assert set(rows) == {"q8[eager]", "q8[onnxruntime]"} and not missing, missing
    assert CALIBRATION_SPLIT in refs["q8[onnxruntime]"], "ORT's own int8 row says what calibrated it"


def test_record_unavailable_and_empty_metrics():
    X, y = torch.randn(12, 3), torch.randint(0, 2, (12,))
    suite = BenchmarkSuite({"a": torch.nn.Linear(3, 2), "b": torch.nn.Linear(3, 2)}, (X, y), progress=False,
                           input_shape=(1, 3), **FAST)
    suite.run_full_benchmark()
    suite.record_unavailable("accuracy", "a", "labels do not fit")
    assert suite.unavailable["accuracy"] == {"a": "labels do not fit"} and set(suite.results["accuracy"]) == {"b"}
    suite.record_unavailable("accuracy", "b", "labels do not fit")
    assert "accuracy" not in suite.results, "a metric with no figure left is dropped (no empty table, no empty plot)"
    suite.record_unavailable("latency", "ghost", "could not run under onnxruntime")
    assert suite.to_payload()["unavailable"]["latency"] == {"ghost": "could not run under onnxruntime"}
    for bad in ("", "  ", None):
        with pytest.raises(ValueError, match="reason"):
            suite.record_unavailable("latency", "a", bad)


def test_user_model_run_is_silent_without_log(tmp_path, capsys):
    path = tmp_path / "wide.pt"
    torch.save(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(20, 3)), path)
    out = run_default_benchmark(tmp_path / "o", model_path=path, input_shape=(1, 4, 5), **FAST)
    assert capsys.readouterr() == ("", ""), "the library prints nothing without `log`"
    assert out["models"] == ["wide"] and out["runtimes"] == ("eager",) and out["runtime_comparisons"] == []
    assert out["results"]["latency"]["wide"].count == 2 and "accuracy" not in out["results"]
    payload = json.loads(out["json"].read_text())
    assert payload["unavailable"]["accuracy"]["wide"].startswith("no labelled data fits input shape (1, 4, 5)")
    assert out["results"]["latency"]["wide"].metadata["input_shape"] == [1, 4, 5], "timed on the user's input shape"
    assert "no labelled data fits" in out["suite"].unavailable["accuracy"]["wide"]
    assert load_payload(out["json"])["unavailable"] == payload["unavailable"], "the reason loads back with the results"
    assert out["report"].is_file() and out["csv"].is_file() and all(p.is_file() for p in out["plots"])
    lines = []
    quiet = run_default_benchmark(tmp_path / "o2", model_path=path, input_shape=(1, 4, 5), log=lines.append,
                                  plots=False, **FAST)
    assert lines == ["preparing 1 model(s) under eager on cpu ..."], lines
    assert quiet["plots"] == [] and not list((tmp_path / "o2").glob("*.png")), "plots=False draws nothing"
    assert quiet["report"].is_file() and quiet["json"].is_file() and quiet["csv"].is_file()


def test_default_run_compares_each_runtime_with_eager(tmp_path):
    out = run_default_benchmark(tmp_path / "o", runtimes="eager,onnxruntime", plots=False, **FAST)  # figures only
    rows = [f"{m}[{rt}]" for rt in ("eager", "onnxruntime") for m in DEFAULT_MODEL_NAMES]
    assert out["models"] == rows and out["unavailable_models"] == {}
    pairs = {((c.model_a, c.model_b), c.metric) for c in out["runtime_comparisons"]}
    assert pairs == {((f"{m}[onnxruntime]", f"{m}[eager]"), metric) for m in DEFAULT_MODEL_NAMES
                     for metric in ("latency", "accuracy")}, "each model against itself under eager, nothing else"
    again = cross_runtime_comparisons(out["suite"], DEFAULT_MODEL_NAMES, ("eager", "onnxruntime"), metrics=("latency",))
    assert [(c.model_a, c.model_b) for c in again] == [(f"{m}[onnxruntime]", f"{m}[eager]") for m in DEFAULT_MODEL_NAMES]
    assert cross_runtime_comparisons(out["suite"], ["nobody"], ("eager", "onnxruntime")) == [], "missing pairs are skipped"
    assert "digits_cnn_int8[onnxruntime]" in json.loads(out["json"].read_text())["results"]["latency"]


def test_bad_input_is_named_before_measuring(tmp_path):
    with pytest.raises(ValueError, match="measurement_runs"):
        run_default_benchmark(tmp_path / "a", measurement_runs=1)
    with pytest.raises(ValueError, match="input_shape: required"):
        run_default_benchmark(tmp_path / "b", model_path=tmp_path / "x.pt")
    with pytest.raises(ValueError, match="runtimes"):
        run_default_benchmark(tmp_path / "c", runtimes="eager,tflite")
    for bad in (0, -2.0, float("nan"), float("inf"), "3", True):
        with pytest.raises(ValueError, match="budget_s: expected a positive number of seconds"):
            run_default_benchmark(tmp_path / "c", budget_s=bad)
    for bad in (0, "no", None):
        with pytest.raises(ValueError, match="plots: expected True or False"):
            run_default_benchmark(tmp_path / "c", plots=bad)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError, match="output_dir"):
        run_default_benchmark(blocker / "out")
    with pytest.raises(ValueError, match="input_shape"):
        write_hardware_artifacts(tmp_path / "hw", model_path=tmp_path / "x.pt")
    ts = tmp_path / "ts.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 2)), str(ts))
    with pytest.raises(ValueError, match="model_path: .* is TorchScript"):
        write_hardware_artifacts(tmp_path / "hw", model_path=ts, input_shape=(1, 4))


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "nan", "inf", ""])
def test_tito_benchmark_names_a_bad_budget(bad, capsys):
    "`tito benchmark --budget` takes a positive number of seconds; anything else exits 2 naming the option."
    from tito.cli import main
    with pytest.raises(SystemExit) as e:
        main(["benchmark", "--budget", bad])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--budget" in err and "expected a positive number of seconds" in err, err
