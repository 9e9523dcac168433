# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The default benchmark: one call, real figures
#
# `run_default_benchmark()` is what `tito benchmark` runs. Without arguments it benchmarks the
# bundled workload, three versions of one model on real data:
#
# | model | what it is |
# |---|---|
# | `digits_cnn` | the `DigitsCNN` trained on scikit-learn's `digits` (Module 19's default workload) |
# | `digits_cnn_int8` | the same network after static int8 quantization, calibrated on 256 training images |
# | `digits_cnn_pruned50` | the same network with the 50% smallest weights (global L1) set to zero |
#
# on the 450 held-out test images, and writes the report, the JSON and CSV results and the
# plots. With `model_path` it benchmarks a model of yours instead: a TorchScript file, a
# pickled `nn.Module` (`torch.save(model)`) or an ONNX file (run by ONNX Runtime), on an
# `input_shape` you give. Accuracy needs labelled data that fits the model; for an 8×8
# one-channel, 10-class model that is the digits test set, otherwise accuracy is reported as
# unavailable with the reason.
#
# ## Where the model will run: runtimes and devices
#
# `runtimes=("eager", "compile", "onnxruntime")` benchmarks every model under each runtime,
# through the same adapter, timing core and statistics, as rows named `<model>[<runtime>]`:
#
# | row | what runs |
# |---|---|
# | `digits_cnn[eager]` | the module in eager PyTorch |
# | `digits_cnn[compile]` | `torch.compile(module)` (inductor); compile time reported apart, in the latency metadata |
# | `digits_cnn[onnxruntime]` | `torch.onnx.export` → ONNX Runtime session |
# | `digits_cnn_int8[onnxruntime]` | ONNX Runtime's own static int8 (`quantize_static`, calibrated on the same training images as the torch.ao int8 model) |
#
# then compares each runtime with eager, model by model (latency: Mann-Whitney U; accuracy:
# McNemar), so "ONNX Runtime is faster" is a tested claim, not a reading. `device="cuda"`
# runs everything on a GPU; what cannot run there (torch.ao int8 kernels are CPU only; ONNX
# Runtime without its CUDA provider) is listed as unavailable with the reason.

# %%
#| default_exp benchmarking.suite

# %%
#| export
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Sequence

import torch

from tinytorch.benchmarking.benchmark import BenchmarkSuite
from tinytorch.benchmarking.optimize import RuntimeUnavailableError, quantize_int8, to_runtime
from tinytorch.benchmarking.report import console_table, ensure_output_dir
from tinytorch.profiling.timing import RUNTIMES, ModelAdapter, adapt

# %%
#| export
DEFAULT_MODEL_NAMES = ("digits_cnn", "digits_cnn_int8", "digits_cnn_pruned50")
CALIBRATION_SPLIT = "digits train split (first 256 images, 4 batches of 64)"


class CudaUnavailableError(ValueError):
    "`device` asks for CUDA on a machine where torch cannot use it."


def check_benchmark_device(device: str | torch.device) -> torch.device:
    """The `torch.device` for "cpu" or "cuda[:n]"; a `CudaUnavailableError` naming CUDA if torch cannot use it.

    >>> check_benchmark_device("cpu")
    device(type='cpu')
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device: expected 'cpu' or 'cuda[:n]', got {device!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or 'cuda[:n]', got {device!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CudaUnavailableError(
                f"device: {str(device)!r} needs CUDA, but CUDA is not available on this machine "
                f"(torch {torch.__version__}, torch.cuda.is_available() is False); use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise CudaUnavailableError(f"device: {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


def parse_runtimes(runtimes: str | Sequence[str]) -> tuple[str, ...]:
    """Runtimes from "eager,compile" or a sequence, checked against `RUNTIMES`, duplicates dropped.

    >>> parse_runtimes("eager, onnxruntime")
    ('eager', 'onnxruntime')
    """
    items = [r.strip() for r in (runtimes.split(",") if isinstance(runtimes, str) else runtimes)]
    items = [r for r in items if r]
    bad = [r for r in items if r not in RUNTIMES]
    if not items or bad:
        raise ValueError(f"runtimes: expected a comma-separated list of {', '.join(RUNTIMES)}, got {runtimes!r}")
    return tuple(dict.fromkeys(items))


def load_model_file(path: str | Path) -> Any:
    """Load a saved model for benchmarking: TorchScript (`torch.jit.save`) or a pickled
    `nn.Module` (`torch.save(model)`), on the CPU, in eval mode; an `.onnx` file is checked with
    `onnx.checker` and returned as its `Path` (`adapt` and `to_runtime` open it in ONNX Runtime).

    A `state_dict` alone is rejected: it holds weights but no architecture to run. Loading a
    pickle runs code from the file; load only files you trust.

    >>> # load_model_file("model.onnx")  ->  PosixPath('model.onnx')
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model_path: no such file {str(path)!r}")
    if path.suffix.lower() == ".onnx":
        import onnx
        try:
            onnx.checker.check_model(str(path))
        except (onnx.checker.ValidationError, onnx.onnx_cpp2py_export.shape_inference.InferenceError) as e:
            raise ValueError(f"model_path: {str(path)!r} is not a valid ONNX model ({e})") from e
        return path
    try:
        with warnings.catch_warnings():  # TorchScript is deprecated upstream, but a user's file may be one
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.load(str(path), map_location="cpu").eval()
    except RuntimeError as jit_error:  # not a TorchScript archive: try a pickled module
        first_error = jit_error
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as e:  # unpickling can raise almost anything; report both attempts
        raise ValueError(f"model_path: {str(path)!r} is neither TorchScript ({first_error.__class__.__name__}) nor a "
                         f"torch.save'd nn.Module ({type(e).__name__}: {e})") from e
    if not isinstance(obj, torch.nn.Module):
        raise TypeError(f"model_path: {str(path)!r} holds a {type(obj).__name__}, expected a saved torch.nn.Module "
                        "(torch.save(model) or TorchScript); a state_dict alone has no architecture")
    return obj.eval()


def _calibration_batches() -> list[torch.Tensor]:
    "The int8 calibration data: the first 256 images of the digits *train* split, never the test split."
    from tinytorch.benchmarking.digits import load_digits_split

    return list(load_digits_split("train")[0][:256].split(64))


def default_models() -> dict[str, torch.nn.Module]:
    "The bundled models: the trained digits CNN, its static int8 version and its 50%-pruned version."
    from tinytorch.benchmarking.digits import default_digits_model
    from tinytorch.benchmarking.optimize import prune_magnitude

    base = default_digits_model()
    return {
        DEFAULT_MODEL_NAMES[0]: base,
        DEFAULT_MODEL_NAMES[1]: quantize_int8(base, mode="static", calibration_data=_calibration_batches(),
                                              calibration_name=CALIBRATION_SPLIT),
        DEFAULT_MODEL_NAMES[2]: prune_magnitude(base, 0.5),
    }


def _digits_fit(model: Any, input_shape: Sequence[int]) -> str | None:
    "None if the digits test set fits the model (8x8 single-channel in, 10 scores out); else why not."
    from tinytorch.benchmarking.digits import DIGITS_CLASSES, load_digits_split

    if tuple(input_shape[1:]) != (1, 8, 8):
        return f"no labelled data fits input shape {tuple(input_shape)} (the bundled digits set is (N, 1, 8, 8))"
    X = load_digits_split("test")[0][:2]
    a = adapt(model)
    try:
        with a.inference():
            out = a.forward(a.to_input(X))
    except Exception as e:  # the model cannot take digits images: no accuracy, latency still measured
        return f"the model raised on digits images ({type(e).__name__}: {e})"
    shape = tuple(getattr(out, "shape", ())) or type(out).__name__
    if not hasattr(out, "shape") or len(out.shape) != 2 or out.shape[1] != DIGITS_CLASSES:
        return f"the model's output {shape} is not (batch, {DIGITS_CLASSES}) class scores, so digits labels do not fit"
    return None


def _row_name(model: str, runtime: str, runtimes: Sequence[str]) -> str:
    return model if tuple(runtimes) == ("eager",) else f"{model}[{runtime}]"


def runtime_models(models: dict[str, Any], runtimes: Sequence[str], example_input: torch.Tensor, *,
                   device: str | torch.device = "cpu", threads: int | None = None,
                   compile_options: dict[str, Any] | None = None,
                   onnx_int8: dict[str, tuple[torch.nn.Module, Any]] | None = None,
                   ) -> tuple[dict[str, ModelAdapter], dict[str, str], dict[str, str]]:
    """Every model under every runtime: `({row: adapter}, {row: why unavailable}, {row: reference})`.

    Rows are `<model>[<runtime>]` (just `<model>` when `runtimes` is eager alone). A combination
    that cannot run is listed with its reason instead of an adapter. `onnx_int8` maps a torch.ao
    int8 model's name to `(float model, calibration batches)`: under "onnxruntime" that row is
    ONNX Runtime's own static int8 of the float model, calibrated on the same batches.

    >>> rows, missing, refs = runtime_models({"fc": torch.nn.Linear(4, 2)}, ["eager", "onnxruntime"], torch.zeros(1, 4))
    >>> sorted(rows), missing
    (['fc[eager]', 'fc[onnxruntime]'], {})
    """
    rows: dict[str, ModelAdapter] = {}
    missing: dict[str, str] = {}
    refs: dict[str, str] = {}
    for runtime in runtimes:
        for name, model in models.items():
            row = _row_name(name, runtime, runtimes)
            source = model
            try:
                if runtime == "onnxruntime" and onnx_int8 and name in onnx_int8:
                    base, batches = onnx_int8[name]
                    q = quantize_int8(base, "static", calibration_data=batches, backend="onnxruntime",
                                      calibration_name=CALIBRATION_SPLIT)
                    source = Path(q._model_path)
                    refs[row] = f"{q.tinytorch_quantization['path']}; calibrated on {q.tinytorch_quantization['calibration']}"
                rows[row] = to_runtime(source, runtime, example_input, device=device, threads=threads,
                                       compile_options=compile_options, name=row)
            except RuntimeUnavailableError as e:
                missing[row] = str(e)
    return rows, missing, refs


def _apply_runtime_facts(suite: BenchmarkSuite) -> None:
    """Drop metrics that no model could measure (every figure unavailable), so tables and plots
    show no empty metric. What each runtime cannot measure is decided in the Benchmark itself."""
    b = suite.benchmark
    for metric in [m for m, by in b.results.items() if not by]:
        del b.results[metric]


def cross_runtime_comparisons(suite: BenchmarkSuite, models: Sequence[str], runtimes: Sequence[str],
                              metrics: Sequence[str] = ("latency", "accuracy")) -> list[Any]:
    """Each model under each runtime against the same model under the first runtime (eager if
    given), per metric, with the one significance rule. Skips pairs where either side is missing.

    >>> # [c.verdict for c in cross_runtime_comparisons(suite, ["digits_cnn"], ["eager", "onnxruntime"])]
    """
    base_rt = "eager" if "eager" in runtimes else runtimes[0]
    out = []
    for model in models:
        base = _row_name(model, base_rt, runtimes)
        for rt in runtimes:
            row = _row_name(model, rt, runtimes)
            if rt == base_rt:
                continue
            for metric in metrics:
                have = suite.results.get(metric, {})
                if base in have and row in have:
                    out.append(suite.compare(row, base, metric))
    return out

# %% [markdown]
# `run_default_benchmark` checks that `output_dir` can be written *before* it spends minutes
# measuring, then runs the suite, writes the plots and the report, prints the comparison
# table (unless `quiet`) and returns where everything went.

# %%
#| export
def run_default_benchmark(
    output_dir: str | Path = "benchmark_results",
    measurement_runs: int = 30,
    quiet: bool = False,
    model_path: str | Path | None = None,
    input_shape: Sequence[int] | None = None,
    *,
    warmup_runs: int = 5,
    threads: int | None = 1,
    power_watts: float | None = None,
    batch_sizes: Sequence[int] = (1, 8, 32),
    runtimes: str | Sequence[str] = ("eager",),
    device: str | torch.device = "cpu",
    compile_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Benchmark the bundled digits models (or the model in `model_path`) and write the report.

    `runtimes` ("eager", "compile", "onnxruntime"; a list or "eager,onnxruntime") benchmarks
    each model under each runtime as rows `<model>[<runtime>]` and adds the cross-runtime
    comparisons; `device` ("cpu", "cuda[:n]") runs them there (a `CudaUnavailableError`, a
    ValueError, where torch has no CUDA). `compile_options` go to `torch.compile`. `model_path`
    may be TorchScript, a `torch.save`d module or an `.onnx` file (ONNX Runtime only).

    `threads` defaults to 1: these models are tiny, a second intra-op thread does not speed up
    one 8×8 image, and on a shared machine a busy second core makes torch's thread pool wait
    (we measured a 0.06 ms model at a 95 ms median with 2 threads under load). Pass
    `threads=None` for torch's current count; the count is recorded either way.

    Returns `{"output_dir", "report", "json", "csv", "plots", "models", "results",
    "comparisons", "runtime_comparisons", "unavailable_models", "compile_seconds", "table",
    "suite"}`: paths as `Path`, `results` as `{metric: {model: BenchmarkResult}}`, comparisons
    as dicts, `unavailable_models` as `{row: reason}`, `compile_seconds` as `{row: seconds}`
    (first call on the timed input, compilation included), `table` the printed text.

    >>> # out = run_default_benchmark("benchmark_results", measurement_runs=30)
    >>> # out["report"]  ->  PosixPath('benchmark_results/benchmark_report.md')
    """
    from tinytorch.benchmarking.digits import load_digits_split

    if isinstance(measurement_runs, bool) or not isinstance(measurement_runs, int) or measurement_runs < 2:
        raise ValueError(f"measurement_runs: expected an int >= 2 (a comparison needs two samples), got {measurement_runs!r}")
    runtimes = parse_runtimes(runtimes)
    dev = check_benchmark_device(device)
    out_dir = ensure_output_dir(output_dir)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    test_set = load_digits_split("test")
    no_accuracy_reason = None
    onnx_int8 = None
    if model_path is None:
        say("building the default models (digits CNN, static int8, 50% pruned) ...")
        models = default_models()
        datasets, shape = [test_set], (tuple(input_shape) if input_shape is not None else None)
        example = test_set[0][:1]
        base_tasks = {n: "image classification (digits 8x8, 10 classes)" for n in models}
        q = models[DEFAULT_MODEL_NAMES[1]].tinytorch_quantization
        base_refs = {DEFAULT_MODEL_NAMES[0]: "tinytorch.benchmarking.digits.DigitsCNN, trained here",
                     DEFAULT_MODEL_NAMES[1]: f"{q['path']} (static int8; calibrated on {q['calibration']})",
                     DEFAULT_MODEL_NAMES[2]: "torch.nn.utils.prune global L1 magnitude, 50%"}
        onnx_int8 = {DEFAULT_MODEL_NAMES[1]: (models[DEFAULT_MODEL_NAMES[0]], _calibration_batches())}
    else:
        if input_shape is None:
            raise ValueError("input_shape: required with model_path, e.g. (1, 1, 8, 8)")
        shape = tuple(int(d) for d in input_shape)
        if not shape or any(d < 1 for d in shape):
            raise ValueError(f"input_shape: expected positive ints such as (1, 1, 8, 8), got {input_shape!r}")
        model = load_model_file(model_path)
        name = Path(model_path).stem
        if isinstance(model, Path):  # an ONNX file: ONNX Runtime runs it (eager and compile need a torch module)
            if set(runtimes) - {"eager", "onnxruntime"}:
                raise ValueError(f"runtimes: an .onnx file runs under onnxruntime only, got {','.join(runtimes)}")
            runtimes = ("onnxruntime",)
        models = {name: model}
        example = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        no_accuracy_reason = _digits_fit(to_runtime(model, runtimes[0], example, threads=threads) if isinstance(model, Path)
                                         else model, shape)
        datasets = [test_set] if no_accuracy_reason is None else None
        base_tasks = {name: "image classification (digits)" if datasets else "—"}
        base_refs = {name: f"user model {Path(model_path).name}"}
    say(f"preparing {len(models)} model(s) under {', '.join(runtimes)} on {dev} ...")
    adapters, unavailable_models, runtime_refs = runtime_models(
        models, runtimes, example, device=dev, threads=threads, compile_options=compile_options, onnx_int8=onnx_int8)
    if not adapters:
        raise RuntimeUnavailableError(f"runtimes: no model can run under {', '.join(runtimes)} on {dev}: {unavailable_models}")
    tasks, references = {}, {}
    for rt in runtimes:
        for n in models:
            row = _row_name(n, rt, runtimes)
            tasks[row] = base_tasks[n]
            references[row] = runtime_refs.get(row) or (base_refs[n] + ("" if rt == "eager" else f"; run by {rt}"))
    suite = BenchmarkSuite(adapters, datasets, output_dir=out_dir, power_watts=power_watts, warmup_runs=warmup_runs,
                           measurement_runs=measurement_runs, threads=threads, input_shape=shape,
                           batch_sizes=batch_sizes, tasks=tasks, references=references, progress=not quiet,
                           dataset_names=["digits_test"] if datasets else None)
    suite.run_full_benchmark()
    _apply_runtime_facts(suite)
    if no_accuracy_reason is not None:
        for n in suite.names:
            suite.benchmark.unavailable.setdefault("accuracy", {})[n] = no_accuracy_reason
    for row, reason in unavailable_models.items():
        for metric in ("latency", "accuracy"):
            suite.benchmark.unavailable.setdefault(metric, {})[row] = reason
    runtime_comparisons = cross_runtime_comparisons(suite, list(models), runtimes) if len(runtimes) > 1 else []
    compile_seconds = {n: r.metadata.get("compile_seconds") for n, r in suite.results.get("latency", {}).items()
                       if suite.benchmark.adapters[n].kind == "compiled"}
    plots = []
    if suite.results:
        plots += suite.plot_results()
    if "latency" in suite.results:
        plots.append(suite.plot_latency_distribution())
        second = "accuracy" if "accuracy" in suite.results else ("model_size" if "model_size" in suite.results else None)
        if second is not None:
            plots.append(suite.plot_pareto_frontier("latency", second))
    suite.generate_report()
    payload = suite.to_payload()
    table = console_table(payload)
    say("")
    say(table)
    for c in suite.comparisons:
        if c.metric in ("latency", "accuracy", "model_size"):
            say(f"  {c.metric:>10}: {c.verdict}")
    if runtime_comparisons:
        say("\ncross-runtime (each runtime against " + ("eager" if "eager" in runtimes else runtimes[0]) + ", same model):")
        for c in runtime_comparisons:
            say(f"  {c.metric:>10}: {c.verdict}")
    for n, secs in compile_seconds.items():
        say(f"  compile time {n}: " + (f"{secs:.2f} s" if secs is not None else "not recorded") +
            " (first call on the timed input; not part of the latency samples)")
    for row, reason in unavailable_models.items():
        say(f"  {row}: {reason}")
    say(f"\nreport: {out_dir / 'benchmark_report.md'}\nresults: {out_dir / 'results.json'}, {out_dir / 'results.csv'}; "
        f"{len(plots)} plots in {out_dir}")
    return {"output_dir": out_dir, "report": out_dir / "benchmark_report.md", "json": out_dir / "results.json",
            "csv": out_dir / "results.csv", "plots": plots, "models": list(suite.names), "results": suite.results,
            "comparisons": [c.to_dict() for c in suite.comparisons],
            "runtime_comparisons": [c.to_dict() for c in runtime_comparisons],
            "unavailable_models": unavailable_models, "compile_seconds": compile_seconds,
            "table": table, "suite": suite}

# %% [markdown]
# ## The hardware analysis of a model of yours
#
# `tito benchmark --model FILE --input-shape ... --hardware` runs the same analysis as for the
# bundled CNN on your model: layer-wise MACs and bytes (forward hooks, any architecture and
# input shape), the roofline summary from its measured latency, device fit and the watch
# metrics. The precision sweep measures accuracy per precision, so it runs only where labelled
# data fits the model (the digits shape); otherwise it is "unavailable" with the reason.

# %%
#| export
def write_model_hardware_artifacts(model_path: str | Path, input_shape: Sequence[int], output_dir: str | Path, *,
                                   power_watts: float | None = None, repeats: int = 20) -> dict[str, Path]:
    """The hardware report (`devices.write_hardware_report`) for the saved model in `model_path`.

    Where the digits data fits the model (input (N, 1, 8, 8), 10 class scores) the precision
    sweep runs on the test split, int8 calibrated on the train split; otherwise it is unavailable
    with the reason. An `.onnx` file or a TorchScript archive is refused: layer statistics need
    forward hooks on torch modules.

    >>> # write_model_hardware_artifacts("mlp.pt", (1, 3, 32, 32), "benchmark_results/hardware")
    """
    from tinytorch.benchmarking.devices import write_hardware_report
    from tinytorch.benchmarking.digits import digits_loader

    shape = tuple(int(d) for d in input_shape)
    model = load_model_file(model_path)
    if isinstance(model, Path):
        raise ValueError(f"model_path: the hardware analysis needs a PyTorch model (layer statistics come from forward "
                         f"hooks on torch modules); {str(model)!r} is an ONNX file. Benchmark it without --hardware")
    if isinstance(model, torch.jit.ScriptModule):
        raise ValueError(f"model_path: {str(model_path)!r} is TorchScript, and TorchScript modules take no forward "
                         "hooks, which the layer statistics need; save the module with torch.save(model) instead")
    reason = _digits_fit(model, shape)
    fits = reason is None
    return write_hardware_report(
        model, digits_loader("test", 64) if fits else None, shape, output_dir, name=Path(model_path).stem,
        task="image classification (digits)" if fits else "—",
        calibration_data=digits_loader("train", 64) if fits else None,
        calibration_split="digits train split" if fits else None, power_watts=power_watts, repeats=repeats,
        sweep_unavailable_reason=reason)

# %% [markdown]
# On this machine (a short run; `tito benchmark` uses 30 samples per model):

# %%
if __name__ == "__main__":
    import tempfile
    _out = run_default_benchmark(tempfile.mkdtemp(prefix="tinytorch_bench_"), measurement_runs=6, warmup_runs=2,
                                 batch_sizes=(1, 32))
    print(sorted(p.name for p in _out["plots"]))

# %% [markdown]
# ## Tests

# %%
def test_unit_load_model_file():
    import tempfile
    lin = torch.nn.Linear(4, 2).eval()
    with tempfile.TemporaryDirectory() as tmp:
        scripted = Path(tmp) / "m.pt"
        torch.jit.save(torch.jit.script(lin), str(scripted))
        pickled = Path(tmp) / "p.pt"
        torch.save(lin, pickled)
        weights = Path(tmp) / "w.pt"
        torch.save(lin.state_dict(), weights)
        x = torch.randn(3, 4)
        for path in (scripted, pickled):
            m = load_model_file(path)
            assert torch.allclose(m(x), lin(x)), f"{path.name}: the loaded model must compute the same outputs"
        try:
            load_model_file(weights)
            raise AssertionError("a state_dict has no architecture and must be rejected")
        except TypeError as e:
            assert "state_dict" in str(e)
        try:
            load_model_file(Path(tmp) / "missing.pt")
            raise AssertionError("a missing file must fail")
        except FileNotFoundError as e:
            assert "model_path" in str(e)


if __name__ == "__main__":
    test_unit_load_model_file()

# %%
def test_unit_user_model_benchmark():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.pt"
        torch.save(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5)), path)
        out = run_default_benchmark(Path(tmp) / "out", measurement_runs=3, warmup_runs=1, quiet=True,
                                    model_path=path, input_shape=(1, 3, 4), batch_sizes=(2,))
        assert out["models"] == ["mlp"] and out["results"]["latency"]["mlp"].count == 3
        reason = out["suite"].unavailable["accuracy"]["mlp"]
        assert "no labelled data fits" in reason, f"accuracy must be unavailable with a reason, got {reason!r}"
        assert out["report"].exists() and out["json"].exists() and out["csv"].exists()
        assert "no labelled data fits" in out["report"].read_text()
        try:
            run_default_benchmark(Path(tmp) / "out", model_path=path, quiet=True)
            raise AssertionError("model_path without input_shape must fail")
        except ValueError as e:
            assert "input_shape" in str(e)


if __name__ == "__main__":
    test_unit_user_model_benchmark()

# %%
def test_unit_runtime_rows():
    assert parse_runtimes("eager, onnxruntime,eager") == ("eager", "onnxruntime")
    for bad in ("", "eager,tflite", ["compile", "jax"]):
        try:
            parse_runtimes(bad)
            raise AssertionError(f"{bad!r} must be rejected")
        except ValueError as e:
            assert "runtimes" in str(e)
    lin = torch.nn.Linear(4, 3).eval()
    q = quantize_int8(torch.nn.Sequential(torch.nn.Linear(4, 3)))
    rows, missing, _ = runtime_models({"fc": lin, "fc_int8": q}, ("eager", "onnxruntime"), torch.zeros(1, 4))
    assert sorted(rows) == ["fc[eager]", "fc[onnxruntime]", "fc_int8[eager]"]
    assert rows["fc[onnxruntime]"].name == "fc[onnxruntime]" and rows["fc[onnxruntime]"].kind == "onnxruntime"
    assert "does not export to ONNX" in missing["fc_int8[onnxruntime]"], "a torch.ao int8 model has no ORT row"
    alone, _, _ = runtime_models({"fc": lin}, ("eager",), torch.zeros(1, 4))
    assert list(alone) == ["fc"], "eager alone keeps the plain model names"
    try:
        check_benchmark_device("tpu")
        raise AssertionError("an unknown device must be rejected")
    except ValueError as e:
        assert "device" in str(e)


if __name__ == "__main__":
    test_unit_runtime_rows()
