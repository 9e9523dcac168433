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

import datetime as _dt
import math
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

import torch

from tinytorch.benchmarking.benchmark import Benchmark, _error_record, _throughput_metric
from tinytorch.benchmarking.results import (BenchmarkResult, Comparison, json_native, pareto_front_with_ties)
from tinytorch.benchmarking.optimize import RuntimeUnavailableError, quantize_int8, to_runtime
from tinytorch.benchmarking.report import console_table, ensure_output_dir
from tinytorch.profiling.timing import RUNTIMES, CudaUnavailableError, ModelAdapter, adapt, check_device

# %% [markdown]
# ## BenchmarkSuite: everything, with a report
#
# `BenchmarkSuite` runs every benchmark on the same models, then turns the results into the
# files a reader needs. It adds two things `Benchmark` does not have:
#
# - **energy**, from a hardware counter when one is readable, else `latency × power_watts`
#   when you give a power (labelled *estimated*), else unavailable with the reason
#   (`tinytorch.benchmarking.energy`);
# - **the analysis**: every model compared against the first one (the baseline) on every
#   metric, the Pareto set, and the report (`tinytorch.benchmarking.report` writes the files;
#   the suite only assembles what goes in them).
#
# ```
# run_full_benchmark ─> latency ─> accuracy ─> memory ─> throughput ─> energy
#                                     (a failing step is recorded; the others still run)
# generate_report    ─> benchmark_report.md, results.json, results.csv   (atomic writes)
# plot_results / plot_pareto_frontier / plot_latency_distribution ─> PNG files
# ```

# %%
#| export
class BenchmarkSuite:
    """Run latency, accuracy, memory, throughput and energy benchmarks and write the report.

    `models`, `datasets` and the protocol arguments are those of `Benchmark`. `power_watts`
    enables an *estimated* energy figure when no hardware counter is readable. `tasks` and
    `references` (dicts keyed by model name) fill the benchmark table.

    >>> # suite = BenchmarkSuite({"fp32": model, "int8": q}, (X_test, y_test), output_dir="out")
    >>> # suite.run_full_benchmark(); print(suite.generate_report())
    """

    def __init__(
        self,
        models: Any,
        datasets: Any = None,
        output_dir: str | Path = "benchmark_results",
        power_watts: float | None = None,
        *,
        warmup_runs: int = 5,
        measurement_runs: int = 10,
        names: Sequence[str] | None = None,
        threads: int | None = None,
        input_shape: Sequence[int] | None = None,
        batch_sizes: Sequence[int] = (1, 8, 32),
        energy_window_s: float = 1.0,
        powercap_root: str | Path = "/sys/class/powercap",
        tasks: dict[str, str] | None = None,
        references: dict[str, str] | None = None,
        progress: bool = True,
        **benchmark_options: Any,
    ):
        if power_watts is not None and (isinstance(power_watts, bool) or not isinstance(power_watts, (int, float))
                                        or power_watts <= 0):
            raise ValueError(f"power_watts: expected a positive number of watts or None, got {power_watts!r}")
        self.benchmark = Benchmark(models, datasets, warmup_runs=warmup_runs, measurement_runs=measurement_runs,
                                   names=names, threads=threads, **benchmark_options)
        self.output_dir = Path(output_dir)
        self.power_watts = power_watts
        self.input_shape = tuple(input_shape) if input_shape is not None else None
        self.batch_sizes = tuple(batch_sizes)
        self.energy_window_s = energy_window_s
        self.powercap_root = powercap_root
        self.tasks = dict(tasks or {})
        self.references = dict(references or {})
        self.progress = progress
        self.comparisons: list[Comparison] = []
        self.pareto: dict[str, Any] | None = None
        self.plot_paths: list[Path] = []
        self.step_errors: dict[str, dict[str, str]] = {}
        self.created: str | None = None

    # the results live in the Benchmark; these are views of them
    @property
    def names(self) -> list[str]:
        return self.benchmark.names

    @property
    def results(self) -> dict[str, dict[str, BenchmarkResult]]:
        return self.benchmark.results

    @property
    def unavailable(self) -> dict[str, dict[str, str]]:
        return self.benchmark.unavailable

    @property
    def failures(self) -> dict[str, dict[str, dict[str, str]]]:
        return self.benchmark.failures

    @property
    def system_info(self) -> dict[str, Any]:
        return self.benchmark.system_info

    def _say(self, text: str) -> None:
        if self.progress:
            print(text, file=sys.stderr, flush=True)

    def run_energy_benchmark(self) -> dict[str, BenchmarkResult]:
        """Energy per inference (J; `metadata["mj_per_call"]` in mJ): measured from a hardware counter, or estimated from the
        median latency and `power_watts`, or unavailable with the reason."""
        from tinytorch.benchmarking.energy import measure_energy

        b = self.benchmark
        x = b._input(self.input_shape)
        out = {}
        for name, a in b.adapters.items():
            lat = b.results.get("latency", {}).get(name)
            if name in b.failures.get("latency", {}):  # the model raised when run: its energy cannot be had either
                b.failures.setdefault("energy", {})[name] = dict(b.failures["latency"][name])
                continue
            if lat is None and self.power_watts is not None:
                self.benchmark._not_available("energy", name, "no latency measurement to base the estimate on")
                continue
            xi = a.to_input(x)

            def call(a=a, xi=xi):
                return a.forward(xi)
            try:
                with a.inference():
                    m = measure_energy(call, power_watts=self.power_watts,
                                       latency_s=lat.median / 1e3 if lat is not None else None,
                                       device=str(a.device), min_window_s=self.energy_window_s,
                                       powercap_root=self.powercap_root, sync=a.sync)
            except Exception as e:  # the model raised while its energy was measured
                b._fail("energy", name, e)
                continue
            if m.joules_per_call is None:
                b._not_available("energy", name, m.reason)
                continue
            values = list(m.window_joules_per_call) or [m.joules_per_call]
            meta = m.to_dict()
            meta["method"] = m.method
            meta["mj_per_call"] = m.joules_per_call * 1e3  # the derived unit, for reading small figures
            b._store("energy", name, BenchmarkResult("energy", values, unit="J", metadata=meta))
            out[name] = b.results["energy"][name]
        return out

    def run_full_benchmark(self) -> dict[str, dict[str, BenchmarkResult]]:
        """Latency, accuracy, memory, throughput and energy for every model, then the comparisons
        against the first model and the latency/accuracy Pareto set. A step that fails as a
        whole (not one model) is recorded for every model and the next step runs.
        Returns `results` (metric -> model -> BenchmarkResult)."""
        b = self.benchmark
        self.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        steps = [("latency", "latency", lambda: b.run_latency_benchmark(self.input_shape)),
                 ("accuracy", "accuracy", b.run_accuracy_benchmark),
                 ("memory", "memory", lambda: b.run_memory_benchmark(self.input_shape)),
                 ("throughput", _throughput_metric(self.batch_sizes[0]) if self.batch_sizes else "throughput",
                  lambda: b.run_throughput_benchmark(self.batch_sizes)),
                 ("energy", "energy", self.run_energy_benchmark)]
        for i, (label, metric, step) in enumerate(steps, start=1):
            self._say(f"[{i}/{len(steps)}] {label} ({len(self.names)} models) ...")
            t0 = time.perf_counter()
            try:
                step()
            except Exception as e:  # e.g. no input shape: every model's figure for this step is missing
                if isinstance(e, NotImplementedError) and str(e).startswith("not yet implemented"):
                    raise  # an unfinished course exercise, not a failed measurement
                self.step_errors[label] = _error_record(e)
                for name in self.names:
                    b._fail(metric, name, e)
            self._say(f"      done in {time.perf_counter() - t0:.1f} s")
        self.compare_all()
        if "latency" in self.results and "accuracy" in self.results:
            self.pareto_frontier(("latency", "accuracy"))
        return self.results

    def compare_all(self, baseline: str | None = None) -> list[Comparison]:
        "Compare every model against `baseline` (default: the first model) on every measured metric."
        baseline = baseline or self.names[0]
        comps = []
        for metric, by_model in self.results.items():
            if baseline not in by_model:
                continue
            for name in self.names:
                if name != baseline and name in by_model:
                    try:
                        comps.append(self.benchmark.compare(baseline, name, metric))
                    except ValueError as e:  # e.g. two accuracies on different samples: no paired test
                        self.step_errors[f"compare {metric}: {baseline} vs {name}"] = _error_record(e)
        self.comparisons = comps
        return comps

    def compare(self, model_a: str, model_b: str, metric: str = "latency", **options: Any) -> Comparison:
        "See `Benchmark.compare`."
        return self.benchmark.compare(model_a, model_b, metric, **options)

    def compare_models(self, metric: str = "latency") -> pd.DataFrame:
        "See `Benchmark.compare_models`."
        return self.benchmark.compare_models(metric)

    def pareto_frontier(self, metrics: Sequence[str] = ("latency", "accuracy")) -> list[str]:
        """The models no other model *significantly* beats on every one of `metrics`.

        Differences that are not significant (the one rule: p < alpha and at least 2%, or 2
        points of accuracy) count as ties, so noise cannot knock a model off the frontier
        (`results.pareto_front_with_ties`). Models without a measured value for some metric are
        left out, and named in `self.pareto["excluded"]`."""
        metrics = list(metrics)
        unknown = [m for m in metrics if m not in self.benchmark.metric_info]
        if not metrics or unknown:
            raise ValueError(f"metrics: expected names from {sorted(self.benchmark.metric_info)}, got {metrics}")
        directions = {m: self.benchmark.metric_info[m].direction for m in metrics}
        measured, excluded = {}, {}
        for name in self.names:
            missing = [m for m in metrics if self.results.get(m, {}).get(name) is None]
            if missing:
                excluded[name] = f"no measured {missing[0]}"
            else:
                measured[name] = {m: self.results[m][name] for m in metrics}
        ties = pareto_front_with_ties(measured, metrics) if measured else {"front": [], "dominated_by": {}, "ties": []}
        points = {n: {m: r.median for m, r in by.items()} for n, by in measured.items()}
        self.pareto = {"metrics": metrics, "directions": directions, "front": ties["front"], "excluded": excluded,
                       "dominated_by": ties["dominated_by"], "ties": ties["ties"],
                       "method": "pareto_front_with_ties: not-significant differences are ties", "points": points}
        return ties["front"]

    # ----- files -----
    def table(self) -> pd.DataFrame:
        "The tidy table: one row per model × metric, every metric (see `Benchmark.compare_models`)."
        frames = [self.benchmark.compare_models(m) for m in self.benchmark._all_metrics()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def to_payload(self) -> dict[str, Any]:
        "Everything measured, as one JSON-ready dict (what results.json holds)."
        from tinytorch.benchmarking.report import SCHEMA

        b = self.benchmark
        table = self.table()
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in table.to_dict(orient="records")] if len(table) else []
        model_info = {}
        for name, a in b.adapters.items():
            q = getattr(a.model, "tinytorch_quantization", None)
            default_ref = f"measured here; {q['path']} ({q['mode']})" if isinstance(q, dict) and "path" in q else "measured here (results.json)"
            model_info[name] = {"kind": a.kind, "class": type(a.model).__name__,
                                "task": self.tasks.get(name, "classification" if "accuracy" in b.results else "—"),
                                "reference": self.references.get(name, default_ref)}
        return json_native({
            "schema": SCHEMA,
            "created": self.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "system_info": b.system_info,
            "protocol": {"warmup_runs": b.warmup_runs, "measurement_runs": b.measurement_runs, "rounds": b.rounds,
                         "threads": b.threads if b.threads is not None else torch.get_num_threads(),
                         "input_shape": list(b.input_shape) if b.input_shape else None,
                         "input_source": b.input_source, "batch_sizes": list(self.batch_sizes),
                         "power_watts": self.power_watts, "seed": b.seed,
                         "datasets": [d.name for d in b.datasets]},
            "models": list(self.names),
            "model_info": model_info,
            "metrics": {m: asdict(i) for m, i in b.metric_info.items() if m in b._all_metrics()},
            "results": {m: {n: r.to_dict() for n, r in by.items()} for m, by in b.results.items()},
            "unavailable": b.unavailable,
            "failures": b.failures,
            "step_errors": self.step_errors,
            "table": rows,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "pareto": {k: v for k, v in self.pareto.items() if k != "points"} if self.pareto else None,
            "plots": [p.name for p in self.plot_paths],
        })

    def generate_report(self) -> str:
        """Write `benchmark_report.md`, `results.json` and `results.csv` into `output_dir`
        (atomically) and return the Markdown. An unwritable `output_dir` raises an OSError naming
        it; the results stay in memory."""
        from tinytorch.benchmarking.report import (CSV_FILE, JSON_FILE, REPORT_FILE, ensure_output_dir,
                                                   render_markdown, save_json, tidy_csv, write_atomic)
        if not self.results and not self.failures and not self.unavailable:
            raise ValueError("generate_report: nothing measured yet; call run_full_benchmark() first")
        out = ensure_output_dir(self.output_dir)
        payload = self.to_payload()
        markdown = render_markdown(payload)
        save_json(payload, out / JSON_FILE)
        from tinytorch.benchmarking.report import TABLE_COLUMNS  # noqa: F401 (columns documented there)
        write_atomic(out / CSV_FILE, tidy_csv(payload["table"]))
        write_atomic(out / REPORT_FILE, markdown)
        return markdown

    @staticmethod
    def load_results(path: str | Path) -> dict[str, dict[str, BenchmarkResult]]:
        """Read `results.json` back into `{metric: {model: BenchmarkResult}}` (equal to the saved ones)."""
        from tinytorch.benchmarking.report import load_payload

        payload = load_payload(path)
        return {m: {n: BenchmarkResult.from_dict(d) for n, d in by.items()} for m, by in payload["results"].items()}

    def _plot(self, make: Callable[[], Path]) -> Path:
        path = make()
        if path not in self.plot_paths:
            self.plot_paths.append(path)
        return path

    def plot_results(self, show: bool = False) -> list[Path]:
        "One PNG per measured metric (median, interval error bars, best model marked)."
        from tinytorch.benchmarking.report import ensure_output_dir, plot_metric

        out = ensure_output_dir(self.output_dir)
        payload = self.to_payload()
        paths = [self._plot(lambda m=m: plot_metric(payload, m, out)) for m in self.results]
        _maybe_show(paths, show)
        return paths

    def plot_pareto_frontier(self, x_metric: str = "latency", y_metric: str = "accuracy", show: bool = False) -> Path:
        "PNG of two metrics with every model labelled and the Pareto frontier drawn."
        from tinytorch.benchmarking.report import ensure_output_dir, plot_pareto

        front = self.pareto_frontier((x_metric, y_metric))
        out = ensure_output_dir(self.output_dir)
        path = self._plot(lambda: plot_pareto(self.to_payload(), x_metric, y_metric, front, out))
        _maybe_show([path], show)
        return path

    def plot_latency_distribution(self, show: bool = False) -> Path:
        "PNG of every latency sample per model."
        from tinytorch.benchmarking.report import ensure_output_dir, plot_distribution

        out = ensure_output_dir(self.output_dir)
        path = self._plot(lambda: plot_distribution(self.to_payload(), "latency", out))
        _maybe_show([path], show)
        return path


def _maybe_show(paths: Sequence[Path], show: bool) -> None:
    if not show:
        return
    try:
        from IPython.display import Image, display
    except ImportError:
        raise RuntimeError("show=True needs IPython (a notebook); the plots were saved to " + ", ".join(map(str, paths))) from None
    for p in paths:
        display(Image(filename=str(p)))

# %%
def test_unit_benchmark_suite():
    import json
    import tempfile
    torch.manual_seed(0)
    X, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    small = torch.nn.Linear(6, 3)
    big = torch.nn.Sequential(torch.nn.Linear(6, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("broken on purpose")

    with tempfile.TemporaryDirectory() as tmp:
        suite = BenchmarkSuite({"small": small, "big": big, "broken": Broken()}, (X, y), output_dir=tmp,
                               power_watts=10.0, warmup_runs=1, measurement_runs=4, batch_sizes=(1, 4),
                               powercap_root=Path(tmp) / "no_powercap", progress=False)
        results = suite.run_full_benchmark()
        for metric in ("latency", "accuracy", "memory", "throughput_bs1", "throughput_bs4", "energy"):
            assert set(results[metric]) == {"small", "big"}, f"{metric}: expected small and big, got {sorted(results[metric])}"
            assert "broken on purpose" in suite.failures[metric]["broken"]["message"], f"{metric}: the failure must be recorded"
        assert set(results["model_size"]) == {"small", "big", "broken"}, "a model that cannot run still has a size on disk"
        energy = results["energy"]["small"]
        assert energy.metadata["method"] == "estimated: latency x power"
        assert abs(energy.median - results["latency"]["small"].median * 10.0 / 1e3) < 1e-12, "estimate = latency (s) x 10 W = J"
        assert energy.unit == "J" and abs(energy.metadata["mj_per_call"] - energy.median * 1e3) < 1e-12
        report = suite.generate_report()
        plots = suite.plot_results() + [suite.plot_pareto_frontier(), suite.plot_latency_distribution()]
        assert all(p.exists() and p.stat().st_size > 0 for p in plots)
        for text in ("small", "big", "broken on purpose", "**Latency (ms)**", "## Pareto set", "## Comparisons",
                     "## Recommendations", "estimated"):
            assert text in report, f"the report should mention {text!r}"
        loaded = BenchmarkSuite.load_results(Path(tmp) / "results.json")
        for metric, by_model in results.items():
            for name, r in by_model.items():
                assert loaded[metric][name].to_dict() == r.to_dict(), f"{metric}/{name} must load back equal"
        rows = (Path(tmp) / "results.csv").read_text().strip().splitlines()
        assert len(rows) == 1 + 3 * len(suite.table()["metric"].unique()), "one CSV row per model x metric"
        assert json.loads((Path(tmp) / "results.json").read_text())["system_info"]["torch"] == torch.__version__


if __name__ == "__main__":
    test_unit_benchmark_suite()

# %%
#| export
DEFAULT_MODEL_NAMES = ("digits_cnn", "digits_cnn_int8", "digits_cnn_pruned50")
CALIBRATION_SPLIT = "digits train split (first 256 images, 4 batches of 64)"


_all_ = ["CudaUnavailableError"]  # defined with the one device check, in the timing core


def check_benchmark_device(device: str | torch.device) -> torch.device:
    """`timing.check_device` for the default benchmark: "cpu" or an available "cuda[:n]"; a
    `CudaUnavailableError` naming CUDA if torch cannot use it.

    >>> check_benchmark_device("cpu")
    device(type='cpu')
    """
    return check_device(device)


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


def _drop_empty_metrics(suite: BenchmarkSuite) -> None:
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
    _drop_empty_metrics(suite)
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
