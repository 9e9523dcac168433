# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19: Benchmarking — 2. The harness: several models, one protocol
#
# The first notebook built the currency: results that know their statistics and compare
# themselves honestly. This one builds the machine that produces them for several models at
# once, under one protocol, so that a comparison is fair:
#
# - what makes a comparison fair, measured on the digits CNN of the previous notebook;
# - `Benchmark`: latency (interleaved rounds through the timing core), top-1 accuracy, memory
#   and throughput, every figure a result, every failure recorded with its reason.
#
# Later, once energy counters and reports have been built, `BenchmarkSuite` (the suite
# notebook) runs all of these at once and adds energy, comparisons, the Pareto set and the
# report.
#
# ```
# models ──adapt──> timing core (Module 15) ──> BenchmarkResult ──┐
# data ──EvalData──> top1_correct ───────────> ProportionResult ──┼─> Benchmark.results[metric][model]
# Profiler, serialized_bytes ───────────────> CountResult ───────┘
# ```
#
# This is also the module the capstone imports: `from tinytorch.benchmarking.benchmark import
# Benchmark, BenchmarkSuite, BenchmarkResult, TinyMLPerf, OlympicEvent, precise_timer,
# compare_optimization_techniques`.

# %%
#| default_exp benchmarking.benchmark

# %%
#| export
from __future__ import annotations

import dataclasses
import importlib
from enum import Enum
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from tinytorch.benchmarking.results import (
    METRICS, STATISTICS, BenchmarkResult, Comparison, CountResult, MetricInfo, ProportionResult, TimerReading,
    as_eval_sets, compare_results, compare_samples, json_native, mcnemar_exact, metric_info, pareto_front,
    pareto_front_with_ties, precise_timer, serialized_bytes, top1_correct, wilson_interval,
)
from tinytorch.profiling.timing import adapt, system_info as _system_info, time_interleaved

# %% [markdown]
# ## The public API, in one place
#
# The capstone and the later milestones import everything from this module:
#
# ```python
# from tinytorch.benchmarking.benchmark import (Benchmark, BenchmarkResult, BenchmarkSuite, TinyMLPerf,
#                                               OlympicEvent, precise_timer, compare_optimization_techniques)
# ```
#
# The code lives in focused modules (`results`, `suite`, `tinymlperf`, `olympics`); this one
# re-exports their public names. `BenchmarkSuite`, `TinyMLPerf` and
# `compare_optimization_techniques` are loaded on first use (PEP 562's module `__getattr__`),
# because their modules import this one and come later in the reading order.

# %%
#| export
_all_ = ["BenchmarkResult", "ProportionResult", "CountResult", "TimerReading", "precise_timer", "wilson_interval",
         "Comparison", "compare_samples", "compare_results", "mcnemar_exact", "pareto_front", "pareto_front_with_ties",
         "MetricInfo", "METRICS", "STATISTICS", "BenchmarkSuite", "TinyMLPerf", "compare_optimization_techniques"]

_LAZY = {"BenchmarkSuite": "tinytorch.benchmarking.suite",
         "TinyMLPerf": "tinytorch.benchmarking.tinymlperf",
         "compare_optimization_techniques": "tinytorch.benchmarking.olympics"}


def __getattr__(name: str) -> Any:
    "Load `TinyMLPerf` and `compare_optimization_techniques` from their modules on first use."
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# %% [markdown]
# ## The TorchPerf Olympics events
#
# The capstone is a competition with five events. Each one fixes what is optimised and which
# constraints a model must meet to enter; the full rules (and the scoring) come later in this
# module. Here we only name them, because results and submissions refer to events by name.
#
# | event | optimises | must meet |
# |---|---|---|
# | latency sprint | lowest median latency | accuracy ≥ 85% |
# | memory challenge | smallest model | accuracy ≥ 85% |
# | accuracy contest | highest accuracy | latency < 100 ms, model < 10 MB |
# | all-around | balanced score | accuracy ≥ 85% |
# | extreme push | smallest × fastest | accuracy ≥ 80% |

# %%
#| export
class OlympicEvent(Enum):
    """The TorchPerf Olympics events (the capstone competition).

    >>> OlympicEvent("latency_sprint").name
    'LATENCY_SPRINT'
    """

    LATENCY_SPRINT = "latency_sprint"
    MEMORY_CHALLENGE = "memory_challenge"
    ACCURACY_CONTEST = "accuracy_contest"
    ALL_AROUND = "all_around"
    EXTREME_PUSH = "extreme_push"

# %% [markdown]
# ## What makes a comparison fair
#
# "Model B is faster than model A" is a claim about two distributions of latencies, measured
# under conditions that must be the same for both. Four things break that most often:
#
# | pitfall | what happens | what the harness does |
# |---|---|---|
# | no warmup | the first calls pay for lazy initialisation, allocator growth, cold caches | `warmup_runs` untimed calls before every timed round |
# | threads differ | torch uses every core by default; another process, or a changed setting, changes the speed | the thread count is fixed for the run and recorded |
# | inputs differ | a different input shape, or data that takes another code path | every model gets the same input tensor |
# | one number each | two medians always differ a little; noise can make either look faster | every timed sample is kept; a significance test decides |
#
# And one thing makes it *unfair over time*: the machine changes while you measure (another
# job starts, the CPU clocks down). Timing all of model A and then all of model B puts that
# drift into the comparison; timing them in **interleaved rounds** (A, B, A, B, …) spreads it
# over both.
#
# Let's see the first two pitfalls on the digits CNN, measured now.

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.profiling.timing import fixed_threads, time_model

    _cnn = default_digits_model()
    _x = load_digits_split("test")[0][:1]
    with torch.inference_mode():
        _fresh = torch.jit.trace(type(_cnn)().eval(), _x)  # a freshly traced copy: its first calls are cold
        _cold = []
        for _ in range(3):
            with precise_timer() as _t:
                _fresh(_x)
            _cold.append(_t.elapsed_ms)
    _warm = time_model(_fresh, _x, warmup=5, samples=20)
    print(f"first three calls of a freshly traced model: {', '.join(f'{c:.3f}' for c in _cold)} ms; "
          f"after warmup: median {_warm.median_ms:.3f} ms")
    for _n in sorted({1, torch.get_num_threads()}):
        _s = time_model(_cnn, _x, samples=20, threads=_n)
        _r = BenchmarkResult("latency", _s.per_call_ms, unit="ms", metadata=_s.metadata())
        print(f"{_n} thread(s): {_r}; {_s.calls_per_sample} calls per timed block")

# %% [markdown]
# ## Benchmark: several models, the same protocol
#
# `Benchmark` holds the models (keyed by name), the evaluation data and the protocol, and runs
# one measurement per metric. Every figure lands in `results[metric][model]` as a
# `BenchmarkResult`; what could not be measured lands in `unavailable[metric][model]` with the
# reason, and a model that raised lands in `failures[metric][model]` with its error, while the
# other models still run.
#
# ```
# models {name: model} ──adapt──> one adapter each (eval, inference_mode, device, input dtype)
# datasets ──> batches of (x, y)  ── the first sample is THE input every model is timed on
#
# run_latency_benchmark     interleaved rounds: A B C, A B C, ...   -> results["latency"]  (ms)
# run_accuracy_benchmark    top-1 over every labelled sample        -> results["accuracy"] (+ Wilson)
# run_memory_benchmark      Profiler + serialized size              -> "memory", "model_size", "parameter_memory"
# run_throughput_benchmark  samples/s per batch size                -> "throughput_bs1", "throughput_bs8", ...
# compare(a, b, metric)     ratio + bootstrap CI + test + verdict
# ```
#
# Datasets can be a torch `DataLoader`, a `Dataset`, or an `(X, y)` pair of tensors or
# arrays; `(X,)` or a bare `X` has no labels: latency and memory still work, accuracy is
# recorded as unavailable.

# %%
#| export
DEFAULT_INPUT_SHAPE = (1, 28, 28)  # the documented default, used only when no dataset has samples


def _throughput_metric(batch_size: int) -> str:
    return f"throughput_bs{batch_size}"


def _error_record(e: BaseException) -> dict[str, str]:
    return {"error_type": type(e).__name__, "message": str(e)}

# %%
#| export
class Benchmark:
    """Measure several models under one protocol: latency, accuracy, memory, throughput.

    - `models`: a list of torch modules, TinyTorch-style objects (`forward` + `parameters`),
      objects with only `forward`, or callables, or a dict `{name: model}`. Names come from
      `names`, the dict keys, or each model's `.name` (else its class name); they must be unique.
    - `datasets`: evaluation sets in any form `as_eval_sets` takes (a `DataLoader`, a `Dataset`,
      an `(X, y)` pair, a dict `{"X": ..., "y": ...}`), or a list of them; `dataset_names` names
      them. Without labelled data, accuracy is unavailable, with the reason.
    - `warmup_runs`: untimed calls before each timed round; `measurement_runs`: timed samples
      per model, taken in `rounds` interleaved rounds (default `min(5, measurement_runs)`).
    - `threads`: torch threads while timing (None: the current count); recorded.

    Results: `results[metric][model] -> BenchmarkResult`; `unavailable[metric][model] -> reason`;
    `failures[metric][model] -> {"error_type", "message"}`.

    >>> import torch
    >>> X, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    >>> b = Benchmark([torch.nn.Linear(4, 3)], [(X, y)], names=["lin"], measurement_runs=4)
    >>> sorted(b.run_latency_benchmark()), b.results["latency"]["lin"].unit
    (['lin'], 'ms')
    """

    def __init__(
        self,
        models: Any,
        datasets: Any = None,
        warmup_runs: int = 5,
        measurement_runs: int = 10,
        names: Sequence[str] | None = None,
        *,
        threads: int | None = None,
        rounds: int | None = None,
        dataset_names: Sequence[str] | None = None,
        seed: int = 0,
        batch_size: int = 256,
    ):
        if isinstance(models, dict):
            if names is not None:
                raise ValueError("names: give names either as the keys of a models dict or as names=[...], not both")
            names, models = list(models.keys()), list(models.values())
        elif isinstance(models, (list, tuple)):
            models = list(models)
        else:
            raise TypeError(f"models: expected a list of models or a dict {{name: model}}, got {type(models).__name__}")
        if not models:
            raise ValueError("models: expected at least one model, got an empty list")
        if names is not None:
            names = list(names)
            if len(names) != len(models):
                raise ValueError(f"names: expected one name per model ({len(models)}), got {len(names)}: {names}")
        adapters = [adapt(m, name=(names[i] if names is not None else None)) for i, m in enumerate(models)]
        if names is not None:  # an adapter passed in keeps its runtime, but takes the name it was given here
            adapters = [a if a.name == n else dataclasses.replace(a, name=n) for a, n in zip(adapters, names)]
        seen: dict[str, int] = {}
        for a in adapters:
            if not isinstance(a.name, str) or not a.name:
                raise ValueError(f"names: expected non-empty strings, got {a.name!r}")
            seen[a.name] = seen.get(a.name, 0) + 1
        dupes = sorted(n for n, c in seen.items() if c > 1)
        if dupes:
            raise ValueError(f"names: model names must be unique, got duplicates {dupes}; pass names=[...]")
        for value, arg, minimum in ((warmup_runs, "warmup_runs", 0), (measurement_runs, "measurement_runs", 1),
                                    (batch_size, "batch_size", 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f"{arg}: expected an int >= {minimum}, got {value!r}")
        if rounds is None:
            rounds = min(5, measurement_runs)
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= measurement_runs:
            raise ValueError(f"rounds: expected an int between 1 and measurement_runs={measurement_runs}, got {rounds!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads: expected a positive int or None, got {threads!r}")

        self.adapters = {a.name: a for a in adapters}
        self.models = {a.name: a.model for a in adapters}
        self.names = list(self.adapters)
        self.datasets = as_eval_sets(datasets, dataset_names, batch_size)
        self.warmup_runs = int(warmup_runs)
        self.measurement_runs = int(measurement_runs)
        self.rounds = rounds
        self.threads = threads
        self.seed = seed
        self.system_info = _system_info()
        self.metric_info: dict[str, MetricInfo] = dict(METRICS)
        self.results: dict[str, dict[str, BenchmarkResult]] = {}
        self.unavailable: dict[str, dict[str, str]] = {}
        self.failures: dict[str, dict[str, dict[str, str]]] = {}
        self.input_shape: tuple[int, ...] | None = None
        self.input_source: str | None = None

    # ----- bookkeeping -----
    def _store(self, metric: str, name: str, result: BenchmarkResult) -> None:
        result.metadata = json_native(result.metadata)
        self.results.setdefault(metric, {})[name] = result
        self.unavailable.get(metric, {}).pop(name, None)
        self.failures.get(metric, {}).pop(name, None)

    def _fail(self, metric: str, name: str, e: BaseException, context: str | None = None) -> None:
        if isinstance(e, NotImplementedError) and str(e).startswith("not yet implemented"):
            raise e  # an unfinished course exercise, not a failed measurement: say so, loudly
        record = _error_record(e)
        if context:
            record["message"] = f"{context}: {record['message']}"
        self.failures.setdefault(metric, {})[name] = record
        self.results.get(metric, {}).pop(name, None)

    def _not_available(self, metric: str, name: str, reason: str) -> None:
        self.unavailable.setdefault(metric, {})[name] = reason
        self.results.get(metric, {}).pop(name, None)

    def _input(self, input_shape: Sequence[int] | None) -> torch.Tensor:
        """The one input every model is timed on: a seeded tensor of `input_shape`, else the first
        dataset sample, else a seeded tensor of `DEFAULT_INPUT_SHAPE` (the documented (1, 28, 28))."""
        if input_shape is not None:
            try:
                shape = tuple(int(d) for d in input_shape)
            except (TypeError, ValueError):
                raise TypeError(f"input_shape: expected a sequence of positive ints such as (1, 1, 8, 8), got {input_shape!r}") from None
            if not shape or any(d < 1 for d in shape):
                raise ValueError(f"input_shape: expected positive ints such as (1, 1, 8, 8), got {input_shape!r}")
            g = torch.Generator().manual_seed(self.seed)
            x, source = torch.randn(*shape, generator=g), f"seeded standard normal (seed {self.seed})"
        elif any(d.has_samples for d in self.datasets):
            d = next(d for d in self.datasets if d.has_samples)
            x, source = d.first_samples(1), f"first sample of dataset '{d.name}'"
        else:
            g = torch.Generator().manual_seed(self.seed)
            x = torch.randn(*DEFAULT_INPUT_SHAPE, generator=g)
            source = (f"seeded standard normal (seed {self.seed}) of the default input_shape {DEFAULT_INPUT_SHAPE}: "
                      "no dataset has samples")
        self.input_shape, self.input_source = tuple(x.shape), source
        return x

    def _timed_rounds(self, metric: str, x: torch.Tensor) -> dict[str, tuple[list[float], dict[str, Any]]]:
        "Time every model on `x` in interleaved rounds; a model that raises is recorded, naming the input."
        out = time_interleaved(self.adapters, x, samples=self.measurement_runs, rounds=self.rounds,
                               warmup=self.warmup_runs, seed=self.seed, threads=self.threads)
        timed = {}
        for name, got in out.items():
            if isinstance(got, BaseException):
                self._fail(metric, name, got, context=f"input_shape {tuple(x.shape)} ({self.input_source})")
            else:
                timed[name] = got
        return timed

    # ----- measurements -----
    def run_latency_benchmark(self, input_shape: Sequence[int] | None = None) -> dict[str, BenchmarkResult]:
        """Latency of one forward pass per model (ms), every model on the same input.

        The input is the first dataset sample unless `input_shape` is given (then a seeded
        standard-normal tensor). Timing goes through `time_model`: warmup, calibrated blocks,
        device sync, fixed threads; `metadata` holds the conditions (`timed_in_blocks` says
        whether fast models were timed several calls per block).
        """
        x = self._input(input_shape)
        out = {}
        for name, (ms, meta) in self._timed_rounds("latency", x).items():
            meta.update(input_shape=list(x.shape), input_source=self.input_source,
                        method="measured: time_model (perf_counter_ns, calibrated blocks, interleaved rounds)")
            self._store("latency", name, BenchmarkResult("latency", ms, unit="ms", metadata=meta))
            out[name] = self.results["latency"][name]
        return out

    def run_accuracy_benchmark(self) -> dict[str, BenchmarkResult]:
        """Top-1 accuracy per model over every labelled sample of every labelled dataset.

        Each result is a `ProportionResult`: `values` are the per-sample outcomes (1 = right),
        `mean` is the accuracy, `ci_lower/ci_upper` the Wilson interval, `count` the number of
        samples; `metadata["datasets"]` has the per-dataset counts. Datasets without labels are
        skipped (and named); with none, accuracy is unavailable with the reason. A model whose
        output does not fit the labels is a recorded failure.
        """
        labelled = [d for d in self.datasets if d.has_labels]
        skipped = {d.name: d.reason or "no labels" for d in self.datasets if not d.has_labels}
        if not labelled:
            reason = ("no labelled dataset: accuracy needs (X, y) data" +
                      (f"; {skipped}" if skipped else "; no dataset was given"))
            for name in self.names:
                self._not_available("accuracy", name, reason)
            return {}
        out = {}
        for name, a in self.adapters.items():
            try:
                per_dataset, outcomes = [], []
                for d in labelled:
                    flags = top1_correct(a, d)
                    k, n = int(sum(flags)), len(flags)
                    per_dataset.append({"name": d.name, "correct": k, "count": n, "accuracy": k / n,
                                        "wilson_95": list(wilson_interval(k, n))})
                    outcomes.extend(flags)
            except Exception as e:  # wrong output, labels out of range, or the model raised
                self._fail("accuracy", name, e)
                continue
            meta = {"method": "measured: top-1 over every labelled sample (results.top1_correct)",
                    "datasets": per_dataset, "skipped_datasets": skipped}
            self._store("accuracy", name, ProportionResult("accuracy", outcomes, unit="fraction", metadata=meta))
            out[name] = self.results["accuracy"][name]
        return out

    def run_memory_benchmark(self, input_shape: Sequence[int] | None = None) -> dict[str, BenchmarkResult]:
        """Memory per model: peak inference memory, parameter memory and the serialized size.

        Stores three metrics, each a `CountResult` in MiB (exact byte counts, in `metadata`):
        "memory" (peak memory of one forward pass, with every field of `Profiler.measure_memory`),
        "parameter_memory" and "model_size" (bytes of the saved model, `results.serialized_bytes`).
        Objects with only `forward()` and plain callables hide their parameters: their "memory"
        is the forward pass's own peak allocation, and the other two are unavailable with the
        reason. Returns the "memory" results.
        """
        from tinytorch.profiling.profiler import Profiler, forward_peak_bytes

        x = self._input(input_shape)
        shape = tuple(x.shape)
        profiler = Profiler()
        out = {}
        for name, a in self.adapters.items():
            if a.kind in ("compiled", "onnxruntime"):
                self._runtime_memory(name, a, x)
                if name in self.results.get("memory", {}):
                    out[name] = self.results["memory"][name]
                continue
            if a.kind in ("callable", "forward"):
                reason = (f"{'a plain callable' if a.kind == 'callable' else 'an object with forward() but no parameters()'}: "
                          "its parameters cannot be seen (pass an nn.Module or an object with parameters())")
                for metric in ("parameter_memory", "model_size"):
                    self._not_available(metric, name, reason)
                try:
                    peak, method = forward_peak_bytes(a, x)
                except Exception as e:  # the model raised on the input
                    self._fail("memory", name, e, context=f"input_shape {shape} ({self.input_source})")
                    continue
                self._store("memory", name, CountResult("memory", [peak / 2**20], unit="MiB", metadata={
                    "bytes": int(peak), "method": f"measured: forward-pass peak only ({method}); parameters not visible",
                    "input_shape": list(shape)}))
                out[name] = self.results["memory"][name]
                continue
            try:
                size_bytes, size_method = serialized_bytes(a.model)
                self._store("model_size", name, CountResult("model_size", [size_bytes / 2**20], unit="MiB",
                                                            metadata={"bytes": size_bytes, "method": f"measured: {size_method}"}))
            except Exception as e:
                self._fail("model_size", name, e)
            try:
                mem = dict(profiler.measure_memory(a.model, shape))
                params = int(profiler.count_parameters(a.model))
            except Exception as e:  # the model raised inside the Profiler
                ctx = f"input_shape {shape} ({self.input_source})"
                self._fail("memory", name, e, context=ctx)
                self._fail("parameter_memory", name, e, context=ctx)
                continue
            meta = {"method": "measured: Profiler.measure_memory", "input_shape": list(shape),
                    "parameters": params, "profiler": mem}
            for metric, key in (("memory", "peak_memory_mb"), ("parameter_memory", "parameter_memory_mb")):
                value = mem.get(key)
                if value is None:
                    self._not_available(metric, name, f"Profiler.measure_memory gave no {key}: {mem.get('methods')}")
                else:
                    self._store(metric, name, CountResult(metric, [float(value)], unit="MiB",
                                                          metadata=dict(meta, bytes=int(round(float(value) * 2**20)))))
            if "memory" in self.results and name in self.results["memory"]:
                out[name] = self.results["memory"][name]
        return out

    def _runtime_memory(self, name: str, a: Any, x: torch.Tensor) -> None:
        """Memory of a model that runs outside eager PyTorch (torch.compile, ONNX Runtime): what the
        adapter says cannot be measured is unavailable with its reason; sizes come from the files."""
        for metric in ("memory", "parameter_memory", "model_size"):
            if metric in a.unavailable:
                self._not_available(metric, name, a.unavailable[metric])
        if a.kind == "onnxruntime":
            self._not_available("parameter_memory", name, "an ONNX Runtime session: its weights live in ORT's own "
                                                          "memory, where no Python-side tool can count them")
            size = a.info.get("onnx_bytes")
            if size is None:
                self._not_available("model_size", name, "the session was not built from an .onnx file on disk")
            else:
                self._store("model_size", name, CountResult("model_size", [size / 2**20], unit="MiB", metadata={
                    "bytes": int(size), "method": "measured: bytes of the .onnx file"}))
            return
        module = a.torch_module  # compiled: the module it compiled shares its parameters
        try:
            size_bytes, size_method = serialized_bytes(module)
            self._store("model_size", name, CountResult("model_size", [size_bytes / 2**20], unit="MiB", metadata={
                "bytes": size_bytes, "method": f"measured: {size_method} (of the module torch.compile wraps)"}))
            from tinytorch.profiling.profiler import Profiler
            params = Profiler().measure_memory(module, tuple(x.shape))["parameter_memory_mb"]
            self._store("parameter_memory", name, CountResult("parameter_memory", [float(params)], unit="MiB", metadata={
                "bytes": int(round(float(params) * 2**20)), "method": "measured: the compiled module's parameters"}))
        except Exception as e:  # the wrapped module raised on the input
            self._fail("parameter_memory", name, e, context=f"input_shape {tuple(x.shape)} ({self.input_source})")

    def run_throughput_benchmark(self, batch_sizes: Sequence[int] = (1, 8, 32)) -> dict[str, dict[int, BenchmarkResult]]:
        """Samples per second per model at each batch size (one value per timed sample).

        The batch is the first `b` samples of the first dataset, or a seeded standard-normal
        batch of the same sample shape when the data set is smaller (recorded as such).
        Stored as metrics "throughput_bs{b}".
        """
        sizes = list(batch_sizes)
        if not sizes or any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1 for b in sizes):
            raise ValueError(f"batch_sizes: expected positive ints such as (1, 8, 32), got {batch_sizes!r}")
        with_samples = [d for d in self.datasets if d.has_samples]
        if with_samples:
            base = with_samples[0].first_samples(max(sizes))
        elif self.input_shape is not None:
            base = self._input(self.input_shape)
        else:
            raise ValueError("batch_sizes: no dataset and no input shape to build batches from; give a dataset "
                             "or run run_latency_benchmark(input_shape=...) first")
        out: dict[str, dict[int, BenchmarkResult]] = {}
        for b in sizes:
            metric = _throughput_metric(int(b))
            self.metric_info[metric] = metric_info(metric)
            if len(base) >= b:
                xb, source = base[:b], "dataset samples" if with_samples else self.input_source
            else:
                g = torch.Generator().manual_seed(self.seed)
                xb = torch.randn(b, *base.shape[1:], generator=g)
                source = f"seeded standard normal (only {len(base)} samples available)"
            for name, (ms, meta) in self._timed_rounds(metric, xb).items():
                meta.update(batch_size=int(b), input_shape=list(xb.shape), input_source=source,
                            method="measured: batch_size / per-call latency")
                self._store(metric, name, BenchmarkResult(metric, [b / (v / 1e3) for v in ms], unit="samples/s", metadata=meta))
                out.setdefault(name, {})[int(b)] = self.results[metric][name]
        return out

    # ----- analysis -----
    def _all_metrics(self) -> list[str]:
        seen = []
        for table in (self.results, self.unavailable, self.failures):
            for m in table:
                if m not in seen:
                    seen.append(m)
        return seen

    def compare_models(self, metric: str = "latency") -> pd.DataFrame:
        """One row per model for `metric`: model, metric, unit, status, method, median, mean, std,
        ci_lower, ci_upper, count, the median's interval, and a note.

        Every figure is read from the result itself: for latency `ci_lower/ci_upper` is the
        Student-t interval of the mean; for accuracy (a `ProportionResult`) the Wilson interval
        and `count` the number of samples; for sizes (a `CountResult`) a zero-width interval.
        Models without the metric appear with status "unavailable" or "failed" and the reason.
        """
        if metric not in self._all_metrics():
            raise ValueError(f"metric: no '{metric}' measurements; measured metrics are {self._all_metrics()}")
        info = self.metric_info.get(metric)
        rows = []
        for name in self.names:
            row = {"model": name, "metric": metric, "unit": info.unit if info else "", "status": None, "method": None,
                   "median": None, "mean": None, "std": None, "ci_lower": None, "ci_upper": None, "count": None,
                   "median_ci_lower": None, "median_ci_upper": None, "note": None}
            r = self.results.get(metric, {}).get(name)
            if r is not None:
                row.update(status="estimated" if r.method.startswith("estimated") else "measured", method=r.method,
                           median=r.median, mean=r.mean, std=r.std, ci_lower=r.ci_lower, ci_upper=r.ci_upper,
                           count=r.count, unit=r.unit)
                if r.count >= 2 or type(r) is not BenchmarkResult:
                    row["median_ci_lower"], row["median_ci_upper"] = (float(v) for v in r.median_ci())
            elif name in self.failures.get(metric, {}):
                f = self.failures[metric][name]
                row.update(status="failed", note=f"{f['error_type']}: {f['message']}")
            elif name in self.unavailable.get(metric, {}):
                row.update(status="unavailable", note=self.unavailable[metric][name])
            else:
                row.update(status="not run", note="this benchmark was not run for this model")
            rows.append(row)
        return pd.DataFrame(rows)

    def _result_for(self, metric: str, name: str, arg: str) -> BenchmarkResult:
        if name not in self.adapters:
            raise ValueError(f"{arg}: unknown model {name!r}; expected one of {self.names}")
        r = self.results.get(metric, {}).get(name)
        if r is None:
            why = (self.failures.get(metric, {}).get(name) or self.unavailable.get(metric, {}).get(name)
                   or "not measured yet")
            raise ValueError(f"{arg}: no '{metric}' result for model {name!r} ({why})")
        return r

    def compare(self, model_a: str, model_b: str, metric: str = "latency", *, alpha: float = 0.05,
                min_effect: float = 0.02, n_boot: int = 2000, seed: int = 0) -> Comparison:
        """Compare `model_b` against `model_a` on one measured metric, with `compare_results`:

        - repeated measurements (latency, throughput): ratio of medians b/a with a bootstrap
          interval (seeded), Mann-Whitney U;
        - accuracy: McNemar's exact test on the per-sample outcomes of the samples both saw, a
          paired bootstrap, and a difference of at least `min_effect` in absolute accuracy
          (0.02 = 2 points);
        - exact values (memory, model size): the ratio; a difference below `min_effect` is none.

        >>> # b.compare("fp32", "int8")  ->  Comparison(..., verdict="int8 is 1.80× faster than fp32 (p < 0.001)")
        """
        ra, rb = self._result_for(metric, model_a, "model_a"), self._result_for(metric, model_b, "model_b")
        return compare_results(ra, rb, names=(model_a, model_b), info=self.metric_info.get(metric),
                               alpha=alpha, min_effect=min_effect, n_boot=n_boot, seed=seed)

# %% [markdown]
# Three models on the digits test set: the trained CNN, the same CNN doing its work twice
# (same predictions, twice the cost), and an untrained CNN (same cost, chance accuracy).

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import DigitsCNN, default_digits_model, load_digits_split

    class _Twice(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            self.m(x)
            return self.m(x)

    _trained = default_digits_model()
    torch.manual_seed(0)
    _demo = Benchmark({"cnn": _trained, "cnn_twice": _Twice(_trained), "untrained": DigitsCNN().eval()},
                      load_digits_split("test"), warmup_runs=3, measurement_runs=20, threads=1)
    _demo.run_latency_benchmark()
    _demo.run_accuracy_benchmark()
    print(_demo.compare_models("latency")[["model", "median", "ci_lower", "ci_upper", "count"]].to_string(index=False))
    print(_demo.compare_models("accuracy")[["model", "median", "ci_lower", "ci_upper", "count"]].to_string(index=False))
    print(_demo.compare("cnn", "cnn_twice").verdict)
    print(_demo.compare("cnn", "untrained", "accuracy").verdict)

# %%
def test_unit_benchmark_accuracy():
    from torch.utils.data import DataLoader, TensorDataset
    lin = torch.nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(3))  # predicts argmax(x)
    X = torch.eye(3).repeat(2, 1)              # predictions 0 1 2 0 1 2
    y = torch.tensor([0, 1, 2, 1, 1, 0])       # right:      1 1 1 0 1 0  -> 4 of 6
    for data in ((X, y), TensorDataset(X, y), DataLoader(TensorDataset(X, y), batch_size=4), (X.numpy(), y.numpy())):
        b = Benchmark([lin], [data], names=["eye"], measurement_runs=2)
        r = b.run_accuracy_benchmark()["eye"]
        assert isinstance(r, ProportionResult) and (r.correct, r.count) == (4, 6), \
            f"hand count is 4 of 6, got {r.correct} of {r.count}"
        assert abs(r.mean - 4 / 6) < 1e-12 and abs(r.median - 4 / 6) < 1e-12
        assert (r.ci_lower, r.ci_upper) == wilson_interval(4, 6)
        assert r.per_dataset_outcomes() == {"dataset0": [1, 1, 1, 0, 1, 0]}
    # unlabelled data: accuracy is unavailable with a reason, latency still works
    b = Benchmark([lin], [(X,)], names=["eye"], measurement_runs=2)
    assert b.run_accuracy_benchmark() == {} and "no labelled dataset" in b.unavailable["accuracy"]["eye"]
    assert b.run_latency_benchmark()["eye"].count == 2
    # a dict without data (as the course's examples pass datasets): accuracy unavailable, with the reason; latency
    # falls back to the default input shape, and a model that cannot take it fails, naming the shape
    b = Benchmark([lin], [{"name": "baseline"}], names=["eye"], measurement_runs=2)
    assert b.run_accuracy_benchmark() == {} and "without array data" in b.unavailable["accuracy"]["eye"]
    assert b.run_latency_benchmark() == {}
    msg = b.failures["latency"]["eye"]["message"]
    assert msg.startswith("input_shape (1, 28, 28) (seeded standard normal") and "default input_shape" in msg, msg
    # labels that do not fit the model's 3 outputs: a recorded failure naming the problem
    b = Benchmark([lin], [(X, torch.tensor([0, 1, 2, 3, 4, 5]))], names=["eye"], measurement_runs=2)
    assert b.run_accuracy_benchmark() == {}
    assert "labels do not match" in b.failures["accuracy"]["eye"]["message"]
    df = b.compare_models("accuracy")
    assert df.loc[0, "status"] == "failed" and "labels" in df.loc[0, "note"]


if __name__ == "__main__":
    test_unit_benchmark_accuracy()

# %%
def test_unit_benchmark_latency_and_failures():
    w = torch.randn(96, 96)
    one = lambda x: w @ w                       # noqa: E731
    four = lambda x: [w @ w for _ in range(4)]  # noqa: E731
    b = Benchmark([one, four, one], names=["one", "four", "one_again"], warmup_runs=2, measurement_runs=20,
                  threads=1)
    lat = b.run_latency_benchmark(input_shape=(1, 4))
    assert set(lat) == {"one", "four", "one_again"} and all(r.unit == "ms" for r in lat.values())
    meta = lat["one"].metadata
    assert meta["torch_threads"] == 1 and meta["rounds"] == 5 and meta["samples"] == 20 and "timed_in_blocks" in meta
    c = b.compare("four", "one")
    assert c.significant and c.verdict.startswith("one is") and "faster than four" in c.verdict, c.verdict
    assert 2.0 < 1 / c.ratio < 8.0, f"4x the work should be several times slower, ratio {1 / c.ratio:.2f}"
    same = b.compare("one", "one_again")
    assert not same.significant and same.verdict.startswith("no significant difference"), same.verdict
    # a raising model is recorded, the others still run
    def broken(x):
        raise RuntimeError("kaput")
    b = Benchmark([one, broken], names=["ok", "broken"], measurement_runs=2)
    assert list(b.run_latency_benchmark(input_shape=(1, 4))) == ["ok"]
    assert b.failures["latency"]["broken"] == {
        "error_type": "RuntimeError", "message": "input_shape (1, 4) (seeded standard normal (seed 0)): kaput"}
    assert b.compare_models("latency")["status"].tolist() == ["measured", "failed"]
    # bad input: clear errors naming the argument
    for kwargs, arg in (({"models": []}, "models"), ({"models": [one, one]}, "names"),
                        ({"models": [one], "names": ["a", "b"]}, "names"),
                        ({"models": [one], "measurement_runs": 0}, "measurement_runs"),
                        ({"models": [one], "warmup_runs": -1}, "warmup_runs")):
        try:
            Benchmark(**kwargs)
        except ValueError as e:
            assert arg in str(e), f"the error for {kwargs} should name '{arg}': {e}"
        else:
            raise AssertionError(f"Benchmark(**{kwargs}) should raise ValueError")


if __name__ == "__main__":
    test_unit_benchmark_latency_and_failures()

# %% [markdown]
# ## Everything together

# %%
def test_module():
    test_unit_benchmark_accuracy()
    test_unit_benchmark_latency_and_failures()
    print("Module 19 benchmarking: all tests pass")


if __name__ == "__main__":
    test_module()
