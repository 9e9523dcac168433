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
# plots. With `model_path` it benchmarks a model of yours instead: a TorchScript file or a
# pickled `nn.Module` (`torch.save(model)`), on an `input_shape` you give. Accuracy needs
# labelled data that fits the model; for an 8×8 one-channel, 10-class model that is the
# digits test set, otherwise accuracy is reported as unavailable with the reason.

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
from tinytorch.benchmarking.report import console_table, ensure_output_dir

# %%
#| export
DEFAULT_MODEL_NAMES = ("digits_cnn", "digits_cnn_int8", "digits_cnn_pruned50")


def load_model_file(path: str | Path) -> torch.nn.Module:
    """Load a saved model for benchmarking: TorchScript (`torch.jit.save`) or a pickled
    `nn.Module` (`torch.save(model)`), on the CPU, in eval mode.

    A `state_dict` alone is rejected: it holds weights but no architecture to run. Loading a
    pickle runs code from the file; load only files you trust.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model_path: no such file {str(path)!r}")
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


def default_models() -> dict[str, torch.nn.Module]:
    "The bundled models: the trained digits CNN, its static int8 version and its 50%-pruned version."
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.benchmarking.optimize import prune_magnitude, quantize_int8

    base = default_digits_model()
    calibration = load_digits_split("train")[0][:256].split(64)
    return {
        DEFAULT_MODEL_NAMES[0]: base,
        DEFAULT_MODEL_NAMES[1]: quantize_int8(base, mode="static", calibration_data=calibration),
        DEFAULT_MODEL_NAMES[2]: prune_magnitude(base, 0.5),
    }


def _digits_fit(model: torch.nn.Module, input_shape: Sequence[int]) -> str | None:
    "None if the digits test set fits the model (8x8 single-channel in, 10 scores out); else why not."
    from tinytorch.benchmarking.digits import DIGITS_CLASSES, load_digits_split

    if tuple(input_shape[1:]) != (1, 8, 8):
        return f"no labelled data fits input shape {tuple(input_shape)} (the bundled digits set is (N, 1, 8, 8))"
    X = load_digits_split("test")[0][:2]
    try:
        with torch.inference_mode():
            out = model.eval()(X)
    except Exception as e:  # the model cannot take digits images: no accuracy, latency still measured
        return f"the model raised on digits images ({type(e).__name__}: {e})"
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[1] != DIGITS_CLASSES:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return f"the model's output {shape} is not (batch, {DIGITS_CLASSES}) class scores, so digits labels do not fit"
    return None

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
) -> dict[str, Any]:
    """Benchmark the bundled digits models (or the model in `model_path`) and write the report.

    `threads` defaults to 1: these models are tiny, a second intra-op thread does not speed up
    one 8×8 image, and on a shared machine a busy second core makes torch's thread pool wait
    (we measured a 0.06 ms model at a 95 ms median with 2 threads under load). Pass
    `threads=None` for torch's current count; the count is recorded either way.

    Returns `{"output_dir", "report", "json", "csv", "plots", "models", "results",
    "comparisons", "table", "suite"}`: paths as `Path`, `results` as
    `{metric: {model: BenchmarkResult}}`, `comparisons` as dicts, `table` the printed text.

    >>> # out = run_default_benchmark("benchmark_results", measurement_runs=30)
    >>> # out["report"]  ->  PosixPath('benchmark_results/benchmark_report.md')
    """
    from tinytorch.benchmarking.digits import load_digits_split

    if isinstance(measurement_runs, bool) or not isinstance(measurement_runs, int) or measurement_runs < 2:
        raise ValueError(f"measurement_runs: expected an int >= 2 (a comparison needs two samples), got {measurement_runs!r}")
    out_dir = ensure_output_dir(output_dir)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    test_set = load_digits_split("test")
    no_accuracy_reason = None
    if model_path is None:
        say("building the default models (digits CNN, static int8, 50% pruned) ...")
        models = default_models()
        datasets, shape = [test_set], (tuple(input_shape) if input_shape is not None else None)
        tasks = {n: "image classification (digits 8x8, 10 classes)" for n in models}
        references = {DEFAULT_MODEL_NAMES[0]: "tinytorch.benchmarking.digits.DigitsCNN, trained here",
                      DEFAULT_MODEL_NAMES[1]: f"{models[DEFAULT_MODEL_NAMES[1]].tinytorch_quantization['path']} (static int8)",
                      DEFAULT_MODEL_NAMES[2]: "torch.nn.utils.prune global L1 magnitude, 50%"}
    else:
        if input_shape is None:
            raise ValueError("input_shape: required with model_path, e.g. (1, 1, 8, 8)")
        shape = tuple(int(d) for d in input_shape)
        if not shape or any(d < 1 for d in shape):
            raise ValueError(f"input_shape: expected positive ints such as (1, 1, 8, 8), got {input_shape!r}")
        model = load_model_file(model_path)
        name = Path(model_path).stem
        models = {name: model}
        no_accuracy_reason = _digits_fit(model, shape)
        datasets = [test_set] if no_accuracy_reason is None else None
        tasks = {name: "image classification (digits)" if datasets else "—"}
        references = {name: f"user model {Path(model_path).name}"}
    suite = BenchmarkSuite(models, datasets, output_dir=out_dir, power_watts=power_watts, warmup_runs=warmup_runs,
                           measurement_runs=measurement_runs, threads=threads, input_shape=shape,
                           batch_sizes=batch_sizes, tasks=tasks, references=references, progress=not quiet,
                           dataset_names=["digits_test"] if datasets else None)
    suite.run_full_benchmark()
    if no_accuracy_reason is not None:
        for n in suite.names:
            suite.benchmark.unavailable.setdefault("accuracy", {})[n] = no_accuracy_reason
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
    say(f"\nreport: {out_dir / 'benchmark_report.md'}\nresults: {out_dir / 'results.json'}, {out_dir / 'results.csv'}; "
        f"{len(plots)} plots in {out_dir}")
    return {"output_dir": out_dir, "report": out_dir / "benchmark_report.md", "json": out_dir / "results.json",
            "csv": out_dir / "results.csv", "plots": plots, "models": list(suite.names), "results": suite.results,
            "comparisons": [c.to_dict() for c in suite.comparisons], "table": table, "suite": suite}

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
