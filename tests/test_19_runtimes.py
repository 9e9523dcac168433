"""Runtimes (issue 15): ONNX Runtime and torch.compile as model adapters, ONNX export and ORT int8,
the CUDA code path (with fakes: no GPU here), and the calibration split."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tinytorch.benchmarking.benchmark import Benchmark
from tinytorch.benchmarking.digits import default_digits_model, digits_loader, load_digits_split
from tinytorch.benchmarking.metrics import collect_metrics
from tinytorch.benchmarking.optimize import RuntimeUnavailableError, quantize_int8, to_onnx, to_runtime
from tinytorch.benchmarking.results import top1_correct
from tinytorch.profiling import timing
from tinytorch.profiling.timing import CudaUnavailableError, adapt, check_device, time_model
from tinytorch.benchmarking.defaults import CALIBRATION_SPLIT, runtime_models
from tito.default_benchmark import run_default_benchmark

ORT_TOLERANCE = 1e-5  # stated: ONNX Runtime logits equal eager logits within 1e-5 (relative to the logit scale)


@pytest.fixture(scope="module")
def digits():
    model = default_digits_model()
    X, y = load_digits_split("test")
    return model, X, y


@pytest.fixture(scope="module")
def ort_fp32(digits):
    model, X, _ = digits
    return to_runtime(model, "onnxruntime", X[:1], threads=1, name="digits_cnn[onnxruntime]")


def test_onnx_export_is_checked_and_recorded(digits, ort_fp32):
    import onnx
    model, X, _ = digits
    path = to_onnx(model, X[:1])
    onnx.checker.check_model(str(path), full_check=True)
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert "torch.onnx.export" in meta["tinytorch_export"] and "onnx.checker" in meta["tinytorch_export"]
    assert ort_fp32.kind == "onnxruntime" and ort_fp32.runtime == "onnxruntime"
    assert ort_fp32.info["providers"] == ["CPUExecutionProvider"] and ort_fp32.info["intra_op_threads"] == 1


def test_ort_outputs_equal_eager_on_the_digits_test_set(digits, ort_fp32):
    model, X, y = digits
    with torch.inference_mode():
        eager = model(X).numpy()
    ort = ort_fp32.forward(ort_fp32.to_input(X))
    scale = max(1.0, float(np.abs(eager).max()))
    err = float(np.abs(ort - eager).max())
    assert err <= ORT_TOLERANCE * scale, f"ORT vs eager: max |diff| {err:.2e} > {ORT_TOLERANCE} x {scale:.1f} on 450 images"
    # top-1 through the one evaluation: the same sample-by-sample outcomes, so the same accuracy
    assert top1_correct(ort_fp32, (X, y)) == top1_correct(model, (X, y))


def test_ort_int8_within_one_point_of_fp32(digits):
    model, X, y = digits
    Xtr, _ = load_digits_split("train")
    q = quantize_int8(model, "static", calibration_data=list(Xtr[:256].split(64)), backend="onnxruntime",
                      calibration_name=CALIBRATION_SPLIT)
    assert q.tinytorch_quantization["backend"] == "onnxruntime"
    assert "digits train split" in q.tinytorch_quantization["calibration"]
    fp32 = sum(top1_correct(model, (X, y))) / len(y)
    int8 = sum(top1_correct(q, (X, y))) / len(y)
    assert abs(int8 - fp32) <= 0.01, f"ORT int8 {int8:.2%} vs fp32 {fp32:.2%}: more than 1 point apart"


def test_compile_time_reported_and_not_in_latency_samples():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    a = to_runtime(net, "compile", name="tiny[compile]")  # the default inductor backend: the real path
    assert a.kind == "compiled" and a.runtime == "compile"
    s = time_model(a, (1, 8), samples=5, warmup=0)
    meta = s.metadata()
    compile_ms = meta["compile_seconds"] * 1e3
    assert meta["recompiles_during_timing"] == 0 and meta["runtime"] == "compile"
    assert compile_ms > 10 * max(s.per_call_ms), (
        f"first call {compile_ms:.1f} ms should dwarf every latency sample (max {max(s.per_call_ms):.3f} ms)")
    with torch.inference_mode():
        x = torch.randn(4, 8)
        assert torch.allclose(a.forward(x), net(x), atol=1e-6)
    # the Benchmark carries it into the latency result's metadata
    b = Benchmark({"tiny[compile]": a, "tiny[eager]": adapt(net, name="tiny[eager]")}, measurement_runs=4, rounds=2, warmup_runs=0)
    lat = b.run_latency_benchmark(input_shape=(1, 8))
    assert lat["tiny[compile]"].metadata["compile_seconds"] is not None
    assert "compile_seconds" not in lat["tiny[eager]"].metadata


def test_recompiling_while_timed_is_refused(monkeypatch):
    a = to_runtime(torch.nn.Linear(4, 2), "compile", compile_options={"backend": "eager"})
    graphs = iter(range(100))
    monkeypatch.setattr(timing, "_compile_counter", lambda: next(graphs))  # a graph built on every call
    with pytest.raises(RuntimeError, match="new graph"):
        time_model(a, (1, 4), samples=2, warmup=0)


def test_cuda_path_moves_model_and_data_and_synchronises(monkeypatch):
    moved, syncs = [], []

    def fake_to_device(obj, device):
        moved.append((type(obj).__name__, str(device)))
        return obj  # stays on the CPU: no GPU here

    monkeypatch.setattr(timing, "to_device", fake_to_device)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # the fake machine has one GPU
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: syncs.append(str(device)))
    a = adapt(torch.nn.Linear(4, 2), device="cuda:0")
    assert a.device == torch.device("cuda", 0) and ("Linear", "cuda:0") in moved
    s = time_model(a, (1, 4), samples=4, warmup=1)
    assert ("Tensor", "cuda:0") in moved, "the input must be moved to the model's device"
    assert len(syncs) >= len(s.per_call_ns) and set(syncs) == {"cuda:0"}, "one sync before each clock read"
    assert s.device == "cuda:0"
    assert check_device("cuda") == torch.device("cuda")
    # what cannot run on a GPU is unavailable with the reason, the rest is moved
    model = default_digits_model()
    q = quantize_int8(model, "static", calibration_data=[torch.zeros(8, 1, 8, 8)])
    rows, missing, _ = runtime_models({"fp32": model, "int8": q}, ["eager", "onnxruntime"], torch.zeros(1, 1, 8, 8),
                                      device="cuda:0")
    assert set(rows) == {"fp32[eager]"} and rows["fp32[eager]"].device.type == "cuda"
    assert missing["int8[eager]"] == "unavailable: CPU only (torch.ao int8 kernels run on the CPU)"
    assert "CUDAExecutionProvider" in missing["fp32[onnxruntime]"], missing["fp32[onnxruntime]"]


def test_no_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(CudaUnavailableError, match="CUDA is not available"):
        check_device("cuda:0")
    with pytest.raises(ValueError, match="device"):
        check_device("tpu")


def test_onnx_file_through_the_default_benchmark(tmp_path, digits):
    model, X, _ = digits
    path = to_onnx(model, X[:1], tmp_path / "cnn.onnx")
    out = run_default_benchmark(tmp_path / "out", measurement_runs=3, warmup_runs=1, quiet=True, model_path=path,
                                input_shape=(1, 1, 8, 8), batch_sizes=(1,), plots=False)  # figures only
    name = "cnn[onnxruntime]"
    assert out["models"] == [name]
    assert out["results"]["latency"][name].count == 3 and out["results"]["accuracy"][name].mean > 0.9
    payload = json.loads(out["json"].read_text())
    assert payload["unavailable"]["memory"][name].startswith("ONNX Runtime allocates")
    assert payload["results"]["model_size"][name]["metadata"]["bytes"] == path.stat().st_size
    with pytest.raises(ValueError, match="runtimes"):
        run_default_benchmark(tmp_path / "o2", measurement_runs=2, quiet=True, model_path=path,
                              input_shape=(1, 1, 8, 8), runtimes="compile")


def test_calibration_never_comes_from_the_evaluation_loader():
    model = default_digits_model()
    with pytest.raises(ValueError, match="calibration_data"):
        collect_metrics(model, digits_loader("test", 64), precision="int8", repeats=2)
    m = collect_metrics(model, digits_loader("test", 64), precision="int8", repeats=2,
                        calibration_data=digits_loader("train", 64), calibration_split="digits train split")
    assert m.methods["int8_calibration"].startswith("static int8 calibrated on digits train split")


def test_runtime_unavailable_reasons():
    q = quantize_int8(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    with pytest.raises(RuntimeUnavailableError, match="does not export to ONNX"):
        to_runtime(q, "onnxruntime", torch.zeros(1, 4))
    with pytest.raises(ValueError, match="runtime"):
        to_runtime(torch.nn.Linear(4, 2), "tensorrt")


def test_benchmark_memory_of_runtime_models(digits, ort_fp32):
    """Through the Python API (not only the CLI): what a runtime cannot measure is unavailable with
    the adapter's reason; sizes come from the .onnx file and from the module torch.compile wraps."""
    from pathlib import Path

    from tinytorch.benchmarking.results import serialized_bytes

    model, X, y = digits
    compiled = adapt(torch.compile(model), name="cnn_compiled")
    b = Benchmark({"ort": ort_fp32, "cmp": compiled}, (X[:32], y[:32]), measurement_runs=2)
    assert b.names == ["ort", "cmp"] and b.adapters["ort"].kind == "onnxruntime", "a given name wins over the adapter's"
    b.run_memory_benchmark()
    assert b.results.get("memory", {}) == {}
    assert b.unavailable["memory"]["ort"] == ort_fp32.unavailable["memory"]
    assert b.unavailable["memory"]["cmp"] == compiled.unavailable["memory"]
    onnx_file = Path(ort_fp32.info["onnx_path"])
    assert b.results["model_size"]["ort"].metadata["bytes"] == onnx_file.stat().st_size
    assert b.results["model_size"]["cmp"].metadata["bytes"] == serialized_bytes(model)[0]
    assert b.results["parameter_memory"]["cmp"].metadata["bytes"] == sum(p.numel() * 4 for p in model.parameters())
    assert "ONNX Runtime" in b.unavailable["parameter_memory"]["ort"]
