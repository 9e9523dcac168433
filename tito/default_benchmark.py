"""The default benchmark `tito benchmark` runs, built from the library's pieces.

`run_default_benchmark()` benchmarks `digits_cnn` (the trained `DigitsCNN`), `digits_cnn_int8`
(static int8, calibrated on 256 *training* images) and `digits_cnn_pruned50` (50% smallest
weights zeroed, global L1) on the 450 held-out test images. With `model_path` it benchmarks a
model of yours instead (TorchScript, a pickled `nn.Module` or an ONNX file) on an `input_shape`
you give; accuracy is measured where the digits data fits the model, and is unavailable with the
reason otherwise. `runtimes=("eager", "compile", "onnxruntime")` runs every model under each
runtime, as rows `<model>[<runtime>]`, and compares each runtime with eager, model by model, so
"ONNX Runtime is faster" is a tested claim; what cannot run somewhere is unavailable with the
reason. `write_model_hardware_artifacts` writes the hardware report of a saved model
(`tito benchmark --model FILE --hardware`); `console_table` is the table it prints.

This is orchestration, not measurement: every figure comes from `tinytorch.benchmarking`
(`BenchmarkSuite`, the report, `optimize`, `devices`), the code the lesson notebooks build.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from tinytorch.benchmarking.optimize import RuntimeUnavailableError, quantize_int8, to_runtime
from tinytorch.benchmarking.report import CSV_FILE, JSON_FILE, REPORT_FILE, ensure_output_dir
from tinytorch.benchmarking.results import MiB
from tinytorch.benchmarking.suite import BenchmarkSuite, load_model_file
from tinytorch.profiling.timing import RUNTIMES, CudaUnavailableError, ModelAdapter, adapt, check_device, machine_warnings

__all__ = ["DEFAULT_MODEL_NAMES", "CALIBRATION_SPLIT", "CudaUnavailableError",
           "parse_runtimes", "load_model_file", "default_models", "runtime_models", "console_table",
           "cross_runtime_comparisons", "run_default_benchmark", "write_model_hardware_artifacts"]

DEFAULT_MODEL_NAMES = ("digits_cnn", "digits_cnn_int8", "digits_cnn_pruned50")
CALIBRATION_SPLIT = "digits train split (first 256 images, 4 batches of 64)"


def parse_runtimes(runtimes: str | Sequence[str]) -> tuple[str, ...]:
    """Runtimes from "eager,compile" or a sequence, checked against `RUNTIMES`, duplicates dropped.

    >>> parse_runtimes("eager, onnxruntime")
    ('eager', 'onnxruntime')
    """
    items = [r.strip() for r in (runtimes.split(",") if isinstance(runtimes, str) else runtimes)]
    items = [r for r in items if r]
    if not items or any(r not in RUNTIMES for r in items):
        raise ValueError(f"runtimes: expected a comma-separated list of {', '.join(RUNTIMES)}, got {runtimes!r}")
    return tuple(dict.fromkeys(items))


def _calibration_batches() -> list[torch.Tensor]:
    "The int8 calibration data: the first 256 images of the digits *train* split, never the test split."
    from tinytorch.benchmarking.digits import load_digits_split

    return list(load_digits_split("train")[0][:256].split(64))


def default_models() -> dict[str, torch.nn.Module]:
    "The bundled models: the trained digits CNN, its static int8 version and its 50%-pruned version."
    from tinytorch.benchmarking.digits import default_digits_model
    from tinytorch.benchmarking.optimize import prune_magnitude

    base = default_digits_model()
    return {DEFAULT_MODEL_NAMES[0]: base,
            DEFAULT_MODEL_NAMES[1]: quantize_int8(base, mode="static", calibration_data=_calibration_batches(),
                                                  calibration_name=CALIBRATION_SPLIT),
            DEFAULT_MODEL_NAMES[2]: prune_magnitude(base, 0.5)}


def _digits_fit(model: Any, input_shape: Sequence[int]) -> str | None:
    "None if the digits test set fits the model (8x8 single-channel in, 10 scores out); else why not."
    from tinytorch.benchmarking.digits import DIGITS_CLASSES, load_digits_split

    if tuple(input_shape[1:]) != (1, 8, 8):
        return f"no labelled data fits input shape {tuple(input_shape)} (the bundled digits set is (N, 1, 8, 8))"
    a = adapt(model)
    try:
        with a.inference():
            out = a.forward(a.to_input(load_digits_split("test")[0][:2]))
    except Exception as e:  # the model cannot take digits images: no accuracy, latency still measured
        return f"the model raised on digits images ({type(e).__name__}: {e})"
    if not hasattr(out, "shape") or len(out.shape) != 2 or out.shape[1] != DIGITS_CLASSES:
        return (f"the model's output {tuple(getattr(out, 'shape', ())) or type(out).__name__} is not "
                f"(batch, {DIGITS_CLASSES}) class scores, so digits labels do not fit")
    return None


def _row_name(model: str, runtime: str, runtimes: Sequence[str]) -> str:
    return model if tuple(runtimes) == ("eager",) else f"{model}[{runtime}]"


def runtime_models(models: dict[str, Any], runtimes: Sequence[str], example_input: torch.Tensor, *,
                   device: str | torch.device = "cpu", threads: int | None = None,
                   compile_options: dict[str, Any] | None = None,
                   onnx_int8: dict[str, tuple[torch.nn.Module, Any]] | None = None,
                   ) -> tuple[dict[str, ModelAdapter], dict[str, str], dict[str, str]]:
    """Every model under every runtime: `({row: adapter}, {row: why unavailable}, {row: reference})`,
    rows `<model>[<runtime>]` (`<model>` for eager alone). `onnx_int8` maps a torch.ao int8 model's
    name to `(float model, calibration batches)`: its ONNX Runtime row is ORT's own static int8.

    >>> rows, missing, refs = runtime_models({"fc": torch.nn.Linear(4, 2)}, ["eager", "onnxruntime"], torch.zeros(1, 4))
    >>> sorted(rows), missing
    (['fc[eager]', 'fc[onnxruntime]'], {})
    """
    rows: dict[str, ModelAdapter] = {}
    missing: dict[str, str] = {}
    refs: dict[str, str] = {}
    for runtime in runtimes:
        for name, model in models.items():
            row, source = _row_name(name, runtime, runtimes), model
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


def console_table(payload: dict[str, Any]) -> str:
    "A plain-text comparison table of a results payload (one line per model), for printing."
    table = payload.get("table", [])
    present = {r["metric"] for r in table}
    metrics = [m for m in ("accuracy", "latency", "throughput_bs32", "memory", "model_size", "energy") if m in present]
    units = {m: payload["metrics"].get(m, {}).get("unit", "") for m in metrics}
    scale = {m: MiB if u == "bytes" else 1 for m, u in units.items()}  # integer bytes are shown in MiB
    rows = [["model"] + [f"{m} ({'MiB' if scale[m] != 1 else units[m]})" for m in metrics]]
    for model in payload["models"]:
        cells = [model]
        for m in metrics:
            r = next((r for r in table if r["model"] == model and r["metric"] == m), None)
            if r is None or r["status"] not in ("measured", "estimated"):
                cells.append(r["status"] if r else "—")
            else:
                cells.append(f"{r['median']:.2%}" if m == "accuracy" else
                             f"{r['median'] / scale[m]:.4g}" + (" (est.)" if r["status"] == "estimated" else ""))
        rows.append(cells)
    widths = [max(len(str(x)) for x in col) for col in zip(*rows)]
    rows.insert(1, ["-" * w for w in widths])
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)) for cells in rows)


def _drop_empty_metrics(suite: BenchmarkSuite) -> None:
    "Drop metrics no model could measure (every figure unavailable), so tables and plots show no empty metric."
    for metric in [m for m, by in suite.benchmark.results.items() if not by]:
        del suite.benchmark.results[metric]


def cross_runtime_comparisons(suite: BenchmarkSuite, models: Sequence[str], runtimes: Sequence[str],
                              metrics: Sequence[str] = ("latency", "accuracy")) -> list[Any]:
    """Each model under each runtime against the same model under the first runtime (eager if
    given), per metric, with the one significance rule; pairs with a side missing are skipped."""
    base_rt = "eager" if "eager" in runtimes else runtimes[0]
    out = []
    for model in models:
        base = _row_name(model, base_rt, runtimes)
        for rt in [r for r in runtimes if r != base_rt]:
            row = _row_name(model, rt, runtimes)
            out += [suite.compare(row, base, metric) for metric in metrics
                    if base in suite.results.get(metric, {}) and row in suite.results.get(metric, {})]
    return out


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
    """Benchmark the bundled digits models (or the model in `model_path`), write the report and
    plots into `output_dir` (checked writable before any measuring) and print the table.

    `runtimes` ("eager", "compile", "onnxruntime"; a list or "eager,onnxruntime") adds rows
    `<model>[<runtime>]` and cross-runtime comparisons; `device` ("cpu", "cuda[:n]") runs them
    there; `compile_options` go to `torch.compile`. `threads` defaults to 1: one 8×8 image gains
    nothing from a second intra-op thread, and a busy second core makes torch's pool wait
    (`None`: torch's count; recorded either way).

    Returns `{"output_dir", "report", "json", "csv", "plots", "models", "results", "comparisons",
    "runtime_comparisons", "unavailable_models", "compile_seconds", "table", "suite"}` (results as
    `{metric: {model: BenchmarkResult}}`, comparisons as dicts, `{row: reason}`, `{row: seconds}`).
    """
    from tinytorch.benchmarking.digits import load_digits_split

    if isinstance(measurement_runs, bool) or not isinstance(measurement_runs, int) or measurement_runs < 2:
        raise ValueError(f"measurement_runs: expected an int >= 2 (a comparison needs two samples), got {measurement_runs!r}")
    runtimes = parse_runtimes(runtimes)
    dev = check_device(device)
    out_dir = ensure_output_dir(output_dir)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    test_set = load_digits_split("test")
    no_accuracy_reason, onnx_int8 = None, None
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
        model, name = load_model_file(model_path), Path(model_path).stem
        if isinstance(model, Path):  # an ONNX file: ONNX Runtime runs it (eager and compile need a torch module)
            if set(runtimes) - {"eager", "onnxruntime"}:
                raise ValueError(f"runtimes: an .onnx file runs under onnxruntime only, got {','.join(runtimes)}")
            runtimes = ("onnxruntime",)
        models = {name: model}
        example = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        no_accuracy_reason = _digits_fit(to_runtime(model, runtimes[0], example, threads=threads)
                                         if isinstance(model, Path) else model, shape)
        datasets = [test_set] if no_accuracy_reason is None else None
        base_tasks = {name: "image classification (digits)" if datasets else "—"}
        base_refs = {name: f"user model {Path(model_path).name}"}
    say(f"preparing {len(models)} model(s) under {', '.join(runtimes)} on {dev} ...")
    adapters, unavailable_models, runtime_refs = runtime_models(
        models, runtimes, example, device=dev, threads=threads, compile_options=compile_options, onnx_int8=onnx_int8)
    if not adapters:
        raise RuntimeUnavailableError(f"runtimes: no model can run under {', '.join(runtimes)} on {dev}: {unavailable_models}")
    rows = {_row_name(n, rt, runtimes): (n, rt) for rt in runtimes for n in models}
    tasks = {row: base_tasks[n] for row, (n, rt) in rows.items()}
    references = {row: runtime_refs.get(row) or (base_refs[n] + ("" if rt == "eager" else f"; run by {rt}"))
                  for row, (n, rt) in rows.items()}
    suite = BenchmarkSuite(adapters, datasets, output_dir=out_dir, power_watts=power_watts, warmup_runs=warmup_runs,
                           measurement_runs=measurement_runs, threads=threads, input_shape=shape,
                           batch_sizes=batch_sizes, tasks=tasks, references=references, progress=not quiet,
                           dataset_names=["digits_test"] if datasets else None)
    suite.run_full_benchmark()
    _drop_empty_metrics(suite)
    for n in suite.names if no_accuracy_reason is not None else []:
        suite.benchmark.unavailable.setdefault("accuracy", {})[n] = no_accuracy_reason
    for row, reason in unavailable_models.items():
        for metric in ("latency", "accuracy"):
            suite.benchmark.unavailable.setdefault(metric, {})[row] = reason
    runtime_comparisons = cross_runtime_comparisons(suite, list(models), runtimes) if len(runtimes) > 1 else []
    compile_seconds = {n: r.metadata.get("compile_seconds") for n, r in suite.results.get("latency", {}).items()
                       if suite.benchmark.adapters[n].kind == "compiled"}
    plots = suite.plot_results() if suite.results else []
    if "latency" in suite.results:
        plots.append(suite.plot_latency_distribution())
        second = next((m for m in ("accuracy", "model_size") if m in suite.results), None)
        if second is not None:
            plots.append(suite.plot_pareto_frontier("latency", second))
    suite.generate_report()
    for warning in machine_warnings(suite.benchmark.machine_states):  # even with --quiet: it qualifies every figure
        print(warning, file=sys.stderr, flush=True)
    table = console_table(suite.to_payload())
    say("")
    say(table)
    say("\n".join(f"  {c.metric:>10}: {c.verdict}" for c in suite.comparisons
                  if c.metric in ("latency", "accuracy", "model_size")))
    if runtime_comparisons:
        say("\ncross-runtime (each runtime against " + ("eager" if "eager" in runtimes else runtimes[0]) + ", same model):")
        say("\n".join(f"  {c.metric:>10}: {c.verdict}" for c in runtime_comparisons))
    for n, secs in compile_seconds.items():
        say(f"  compile time {n}: " + (f"{secs:.2f} s" if secs is not None else "not recorded") +
            " (first call on the timed input; not part of the latency samples)")
    for row, reason in unavailable_models.items():
        say(f"  {row}: {reason}")
    for metric, by_model in suite.benchmark.failures.items():  # e.g. a non-finite output: a failure, never a score
        for row, err in by_model.items():
            print(f"failed: {metric} of {row}: {err['error_type']}: {err['message']}", file=sys.stderr)
    say(f"\nreport: {out_dir / REPORT_FILE}\nresults: {out_dir / JSON_FILE}, {out_dir / CSV_FILE}; "
        f"{len(plots)} plots in {out_dir}")
    return {"output_dir": out_dir, "report": out_dir / REPORT_FILE, "json": out_dir / JSON_FILE,
            "csv": out_dir / CSV_FILE, "plots": plots, "models": list(suite.names), "results": suite.results,
            "comparisons": [c.to_dict() for c in suite.comparisons],
            "runtime_comparisons": [c.to_dict() for c in runtime_comparisons],
            "unavailable_models": unavailable_models, "compile_seconds": compile_seconds,
            "table": table, "suite": suite}


def write_model_hardware_artifacts(model_path: str | Path, input_shape: Sequence[int], output_dir: str | Path, *,
                                   power_watts: float | None = None, repeats: int = 20) -> dict[str, Path]:
    """The hardware report (`devices.write_hardware_report`: layers, roofline, device fit) for the
    saved model in `model_path` (`tito benchmark --model FILE --hardware`). The precision sweep
    runs where the digits data fits the model, else it is unavailable with the reason. ONNX and
    TorchScript files are refused: layer statistics need forward hooks on torch modules."""
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
