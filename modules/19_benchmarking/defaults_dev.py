# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, the default benchmark: the pieces put together
#
# What `tito benchmark` runs with no arguments, built only from what steps 1-8 of the reading order
# export: the digits workload, `optimize`'s int8 and pruning, the runtimes (eager, `torch.compile`,
# ONNX Runtime) and `BenchmarkSuite`. It lives in the library, not in the command line, so anyone can
# run it from Python and the CLI only parses arguments and prints. A library notebook, outside the
# reading order (no tasks): read it to see how the pieces fit.
#
# ```
# digits_cnn ──┬─ quantize_int8 (calibrated on the TRAIN split) ─> digits_cnn_int8
#              └─ prune_magnitude 50% ───────────────────────────> digits_cnn_pruned50
# each model × each runtime ─> rows <model>[<runtime>] ─> BenchmarkSuite ─> report, plots
#                                                        └─> each runtime against eager, model by model
# ```

# %%
#| default_exp benchmarking.defaults

# %%
#| export
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from tinytorch.benchmarking.digits import DIGITS_CLASSES, default_digits_model, digits_loader, load_digits_split
from tinytorch.benchmarking.optimize import RuntimeUnavailableError, prune_magnitude, quantize_int8, to_runtime
from tinytorch.benchmarking.report import CSV_FILE, JSON_FILE, REPORT_FILE, ensure_output_dir
from tinytorch.benchmarking.results import Comparison
from tinytorch.benchmarking.suite import BenchmarkSuite, load_model_file
from tinytorch.profiling.timing import RUNTIMES, ModelAdapter, adapt, check_device

# %% [markdown]
# ## The default models, and the data that calibrates int8
#
# Static int8 needs calibration images to fix its activation ranges. They come from the *training*
# split: calibrating on the test images the accuracy is then measured on would tune the model to
# its exam.

# %%
#| export
DEFAULT_MODEL_NAMES = ("digits_cnn", "digits_cnn_int8", "digits_cnn_pruned50")
CALIBRATION_SPLIT = "digits train split (first 256 images, 4 batches of 64)"
BUDGET_PER_MODEL_S = 3.0  # the default run samples latency until decided, within 3 s per model row


def calibration_batches() -> list[torch.Tensor]:
    """The int8 calibration data (`CALIBRATION_SPLIT`): the first 256 images of the digits *train*
    split in batches of 64, never the test split.

    >>> [tuple(b.shape) for b in calibration_batches()][0]
    (64, 1, 8, 8)
    """
    return list(load_digits_split("train")[0][:256].split(64))


def default_models() -> dict[str, torch.nn.Module]:
    """The bundled models by `DEFAULT_MODEL_NAMES`: the trained digits CNN, its static int8 version
    and its 50%-pruned version (global L1 magnitude).

    >>> list(default_models())
    ['digits_cnn', 'digits_cnn_int8', 'digits_cnn_pruned50']
    """
    base = default_digits_model()
    return {DEFAULT_MODEL_NAMES[0]: base,
            DEFAULT_MODEL_NAMES[1]: quantize_int8(base, mode="static", calibration_data=calibration_batches(),
                                                  calibration_name=CALIBRATION_SPLIT),
            DEFAULT_MODEL_NAMES[2]: prune_magnitude(base, 0.5)}


def digits_misfit(model: Any, input_shape: Sequence[int]) -> str | None:
    """None if the digits test set fits `model` (8×8 single-channel in, 10 class scores out); else
    why not, so its accuracy is unavailable with that reason while its latency is still measured.

    >>> digits_misfit(torch.nn.Linear(20, 3), (1, 4, 5))[:21]
    'no labelled data fits'
    """
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

# %% [markdown]
# ## Every model under every runtime, and each runtime against eager
#
# A row is named `<model>[<runtime>]` (just `<model>` when eager is the only runtime). What a runtime
# cannot run (an int8 torch.ao model on a GPU, a module ONNX cannot export) is unavailable with the
# reason rather than missing. The int8 model's ONNX Runtime row is ONNX Runtime's own static int8,
# calibrated on the same images. "ONNX Runtime is faster" is then a comparison of the same model under
# two runtimes, decided by the one significance rule.

# %%
#| export
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


def _row_name(model: str, runtime: str, runtimes: Sequence[str]) -> str:
    return model if tuple(runtimes) == ("eager",) else f"{model}[{runtime}]"


def runtime_models(models: dict[str, Any], runtimes: Sequence[str], example_input: torch.Tensor, *,
                   device: str | torch.device = "cpu", threads: int | None = None,
                   compile_options: dict[str, Any] | None = None,
                   onnx_int8: dict[str, tuple[torch.nn.Module, Any]] | None = None,
                   ) -> tuple[dict[str, ModelAdapter], dict[str, str], dict[str, str]]:
    """Every model under every runtime: `({row: adapter}, {row: why unavailable}, {row: reference})`.
    `onnx_int8` maps a torch.ao int8 model's name to `(float model, calibration batches)`: its ONNX
    Runtime row is ORT's own static int8.

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


def cross_runtime_comparisons(suite: BenchmarkSuite, models: Sequence[str], runtimes: Sequence[str],
                              metrics: Sequence[str] = ("latency", "accuracy")) -> list[Comparison]:
    """Each model under each runtime against the same model under the first runtime (eager if
    given), per metric, with the one significance rule; pairs with a side missing are skipped.

    >>> [c.verdict for c in cross_runtime_comparisons(suite, ["fc"], ["eager", "onnxruntime"])]  # doctest: +SKIP
    ['fc[onnxruntime] is 3.40× faster than fc[eager] (p < 0.001)', ...]
    """
    base_rt = "eager" if "eager" in runtimes else runtimes[0]
    out = []
    for model in models:
        base = _row_name(model, base_rt, runtimes)
        for rt in [r for r in runtimes if r != base_rt]:
            row = _row_name(model, rt, runtimes)
            out += [suite.compare(row, base, metric) for metric in metrics
                    if base in suite.results.get(metric, {}) and row in suite.results.get(metric, {})]
    return out

# %%
def test_unit_runtimes():
    assert parse_runtimes(["onnxruntime", "eager", "onnxruntime"]) == ("onnxruntime", "eager")
    for bad in ("", "eager,tflite", []):
        try:
            parse_runtimes(bad)
        except ValueError as e:
            assert "runtimes" in str(e), f"the error should name 'runtimes', got: {e}"
        else:
            raise AssertionError(f"parse_runtimes({bad!r}): expected a ValueError naming 'runtimes'")
    rows, missing, _ = runtime_models({"fc": torch.nn.Linear(4, 2)}, ["eager"], torch.zeros(1, 4))
    assert list(rows) == ["fc"] and not missing, f"eager alone keeps the bare name, got {list(rows)}"
    assert digits_misfit(default_digits_model(), (1, 1, 8, 8)) is None
    assert "class scores" in digits_misfit(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3)), (1, 1, 8, 8))


if __name__ == "__main__":
    test_unit_runtimes()

# %% [markdown]
# ## The run
#
# `run_default_benchmark` checks every argument and that `output_dir` is writable before anything is
# measured, builds the rows, runs the suite, records what could not be had (with the reason), compares
# the runtimes and writes the report and plots. It returns everything; printing is the caller's job.
# `write_hardware_artifacts` adds the hardware report (layers, roofline, precision sweep, device fit).

# %%
#| export
def run_default_benchmark(
    output_dir: str | Path = "benchmark_results",
    measurement_runs: int = 30,
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
    log: Callable[[str], Any] | None = None,
    model: Any = None,
    budget_s: float | None = None,
    plots: bool = True,
) -> dict[str, Any]:
    """Benchmark the bundled digits models (or the model in `model_path`: TorchScript, a pickled
    `nn.Module` or an ONNX file, run on `input_shape`) and write the report and plots into `output_dir`.

    `runtimes` ("eager", "compile", "onnxruntime"; a list or "eager,onnxruntime") adds rows
    `<model>[<runtime>]` and cross-runtime comparisons; `device` ("cpu", "cuda[:n]") runs them there;
    `compile_options` go to `torch.compile`. `threads` defaults to 1: one 8×8 image gains nothing from
    a second intra-op thread, and a busy second core makes torch's pool wait (None: torch's count;
    recorded either way). `log` receives progress lines (None: silent; the suite's step lines then
    stay off too). Accuracy is measured where the digits data fits the model, else it is unavailable
    with the reason. `model`: what `load_model_file(model_path)` returned, for a caller that loaded it already.
    `budget_s`: the latency benchmark samples until every row's comparison with the first is decided, within
    that many seconds (`Benchmark`'s `budget_s`; None: `BUDGET_PER_MODEL_S` per row). `plots=False`: no PNGs
    (`"plots"` is `[]`; report, JSON and CSV as ever), for a caller that reads the figures only (a test).

    Returns `{"output_dir", "report", "json", "csv", "plots", "models", "runtimes", "results",
    "comparisons", "runtime_comparisons", "unavailable_models", "compile_seconds", "suite"}` (results as
    `{metric: {model: BenchmarkResult}}`, comparisons as `Comparison`s, `{row: reason}`, `{row: seconds}`).

    >>> out = run_default_benchmark("/tmp/bench", measurement_runs=5)  # doctest: +SKIP
    >>> out["models"], out["report"].name
    (['digits_cnn', 'digits_cnn_int8', 'digits_cnn_pruned50'], 'benchmark_report.md')
    """
    if isinstance(measurement_runs, bool) or not isinstance(measurement_runs, int) or measurement_runs < 2:
        raise ValueError(f"measurement_runs: expected an int >= 2 (a comparison needs two samples), got {measurement_runs!r}")
    if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))
                                 or not budget_s > 0 or budget_s == float("inf")):
        raise ValueError(f"budget_s: expected a positive number of seconds, got {budget_s!r}")
    if not isinstance(plots, bool):
        raise ValueError(f"plots: expected True or False, got {plots!r}")
    runtimes = parse_runtimes(runtimes)
    dev = check_device(device)
    out_dir = ensure_output_dir(output_dir)
    say = log or (lambda text: None)
    test_set = load_digits_split("test")
    misfit, onnx_int8 = None, None
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
        onnx_int8 = {DEFAULT_MODEL_NAMES[1]: (models[DEFAULT_MODEL_NAMES[0]], calibration_batches())}
    else:
        if input_shape is None:
            raise ValueError("input_shape: required with model_path, e.g. (1, 1, 8, 8)")
        shape = tuple(int(d) for d in input_shape)
        if not shape or any(d < 1 for d in shape):
            raise ValueError(f"input_shape: expected positive ints such as (1, 1, 8, 8), got {input_shape!r}")
        model, name = load_model_file(model_path) if model is None else model, Path(model_path).stem
        if isinstance(model, Path):  # an ONNX file: ONNX Runtime runs it (eager and compile need a torch module)
            if set(runtimes) - {"eager", "onnxruntime"}:
                raise ValueError(f"runtimes: an .onnx file runs under onnxruntime only, got {','.join(runtimes)}")
            runtimes = ("onnxruntime",)
        models = {name: model}
        example = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        misfit = digits_misfit(to_runtime(model, runtimes[0], example, threads=threads)
                               if isinstance(model, Path) else model, shape)
        datasets = [test_set] if misfit is None else None
        base_tasks = {name: "image classification (digits)" if datasets else "—"}
        base_refs = {name: f"user model {Path(model_path).name}"}
    say(f"preparing {len(models)} model(s) under {', '.join(runtimes)} on {dev} ...")
    adapters, unavailable_models, runtime_refs = runtime_models(
        models, runtimes, example, device=dev, threads=threads, compile_options=compile_options, onnx_int8=onnx_int8)
    if not adapters:
        raise RuntimeUnavailableError(f"runtimes: no model can run under {', '.join(runtimes)} on {dev}: {unavailable_models}")
    rows = {_row_name(n, rt, runtimes): (n, rt) for rt in runtimes for n in models}
    suite = BenchmarkSuite(adapters, datasets, output_dir=out_dir, power_watts=power_watts, warmup_runs=warmup_runs,
                           measurement_runs=measurement_runs, threads=threads, input_shape=shape,
                           batch_sizes=batch_sizes, tasks={row: base_tasks[n] for row, (n, _) in rows.items()},
                           references={row: runtime_refs.get(row) or (base_refs[n] + ("" if rt == "eager" else f"; run by {rt}"))
                                       for row, (n, rt) in rows.items()},
                           progress=log is not None, dataset_names=["digits_test"] if datasets else None,
                           budget_s=BUDGET_PER_MODEL_S * len(adapters) if budget_s is None else budget_s)
    suite.run_full_benchmark()
    for n in suite.names if misfit is not None else []:
        suite.record_unavailable("accuracy", n, misfit)
    for row, reason in unavailable_models.items():
        for metric in ("latency", "accuracy"):
            suite.record_unavailable(metric, row, reason)
    runtime_comparisons = cross_runtime_comparisons(suite, list(models), runtimes) if len(runtimes) > 1 else []
    compile_seconds = {n: r.metadata.get("compile_seconds") for n, r in suite.results.get("latency", {}).items()
                       if suite.benchmark.adapters[n].kind == "compiled"}
    draw, plots = plots, (suite.plot_results() if plots and suite.results else [])
    if draw and "latency" in suite.results:
        plots.append(suite.plot_latency_distribution())
        second = next((m for m in ("accuracy", "model_size") if m in suite.results), None)
        if second is not None:
            plots.append(suite.plot_pareto_frontier("latency", second))
    suite.generate_report()
    return {"output_dir": out_dir, "report": out_dir / REPORT_FILE, "json": out_dir / JSON_FILE,
            "csv": out_dir / CSV_FILE, "plots": plots, "models": list(suite.names), "runtimes": runtimes,
            "results": suite.results, "comparisons": list(suite.comparisons),
            "runtime_comparisons": runtime_comparisons, "unavailable_models": unavailable_models,
            "compile_seconds": compile_seconds, "suite": suite}


def hardware_model(model_path: str | Path, model: Any = None) -> torch.nn.Module:
    "`model` (loaded from `model_path`; None: load it now) if the hardware analysis can hook its layers, else a ValueError."
    model = load_model_file(model_path) if model is None else model
    if isinstance(model, (Path, torch.jit.ScriptModule)):  # ONNX (a path: ONNX Runtime runs it), TorchScript: no hooks
        kind = ("an ONNX file. Benchmark it without --hardware" if isinstance(model, Path) else
                "TorchScript; save the module with torch.save(model) instead")
        raise ValueError(f"model_path: the hardware analysis needs forward hooks on torch modules; {str(model_path)!r} is {kind}")
    return model


def write_hardware_artifacts(output_dir: str | Path, model_path: str | Path | None = None,
                             input_shape: Sequence[int] | None = None, *, power_watts: float | None = None,
                             repeats: int = 20, model: torch.nn.Module | None = None) -> dict[str, Path]:
    """The hardware report (`devices.write_hardware_report`: layers, roofline, precision sweep, device fit) of the bundled
    digits CNN, or of the saved model in `model_path` (`model`: `hardware_model(model_path)`, if the caller has it) on
    `input_shape`; its precision sweep runs where the digits data fits the model, else it is unavailable with the reason.

    >>> sorted(write_hardware_artifacts("/tmp/hw"))[:2]  # doctest: +SKIP
    ['device_fit', 'hardware_summary']
    """
    from tinytorch.benchmarking.devices import write_default_hardware_artifacts, write_hardware_report

    if model_path is None:
        return write_default_hardware_artifacts(output_dir, power_watts=power_watts, repeats=repeats)
    if input_shape is None:
        raise ValueError("input_shape: required with model_path, e.g. (1, 1, 8, 8)")
    shape = tuple(int(d) for d in input_shape)
    model = (hardware_model(model_path) if model is None else model).cpu()  # on the CPU, wherever a benchmark put it
    reason = digits_misfit(model, shape)
    fits = reason is None
    return write_hardware_report(
        model, digits_loader("test", 64) if fits else None, shape, output_dir, name=Path(model_path).stem,
        task="image classification (digits)" if fits else "—",
        calibration_data=digits_loader("train", 64) if fits else None,
        calibration_split="digits train split" if fits else None, power_watts=power_watts, repeats=repeats,
        sweep_unavailable_reason=reason)

# %%
def test_module():
    "End to end, small: the three default models measured, accuracy on the 450 test images, files written."
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = run_default_benchmark(tmp, measurement_runs=3, warmup_runs=1, batch_sizes=(1,))
        assert out["models"] == list(DEFAULT_MODEL_NAMES), out["models"]
        for name in DEFAULT_MODEL_NAMES:
            assert out["results"]["accuracy"][name].count == 450, "accuracy on every digits test image"
            looks = out["suite"].benchmark.sequential["latency"]["looks"]  # sampled until decided: looks of 3
            assert out["results"]["latency"][name].count == 3 * looks, (looks, out["results"]["latency"][name].count)
        assert all(Path(out[k]).is_file() for k in ("report", "json", "csv")), "the report files must be written"
        assert out["runtime_comparisons"] == [] and out["unavailable_models"] == {}, "eager only: nothing to compare"


if __name__ == "__main__":
    test_module()
