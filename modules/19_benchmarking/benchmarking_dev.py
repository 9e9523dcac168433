# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19: Benchmarking — the harness: several models, one protocol
#
# The results notebook built the currency; this one builds the machine that produces it for several
# models under one protocol, so a comparison is fair: `Benchmark` measures latency, top-1 accuracy,
# memory and throughput, every failure recorded with its reason (the suite adds energy and the report).
# Exported as `tinytorch.benchmarking.harness`; the last notebook re-exports it in the public API.
#
# ```
# models ──adapt──> timing core (Module 15) ──> BenchmarkResult ──┐
# data ──EvalData──> top1_correct ───────────> ProportionResult ──┼─> Benchmark.results[metric][model]
# Profiler, serialized_bytes ───────────────> CountResult ───────┘
# ```

# %%
#| default_exp benchmarking.harness

# %%
#| export
from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from tinytorch.benchmarking.results import (
    ALPHA, METRICS, MIN_EFFECT, STATISTICS, MiB, BenchmarkResult, Comparison, CountResult, MetricInfo, ProportionResult,
    TimerReading, as_eval_sets, compare_results, compare_samples, json_native, mcnemar_exact, metric_info,
    precise_timer, serialized_bytes, top1_correct, wilson_interval,
)
from tinytorch.profiling.timing import (positive_int, adapt, machine_load, machine_state,
                                       system_info as _system_info, time_interleaved, time_until_decided)

# %%
import math
import os

import numpy as np


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."

# %%
#| export
class OlympicEvent(Enum):
    "The TorchPerf Olympics events of the capstone (the original course code's five; their rules: the Olympics notebook)."

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
# Drift while you measure is spread over every model by interleaved rounds in a random order (Module 15);
# a sample the operating system interrupted is re-taken, and a latency comparison reads each sample's CPU
# time, which another program cannot inflate. The first two pitfalls, measured:

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.profiling.timing import fixed_threads, time_model

    _cnn, _x = default_digits_model(), load_digits_split("test")[0][:1]
    with fixed_threads(1), torch.inference_mode():  # one thread: other threads' load cannot stall a call
        _fresh = torch.jit.trace(type(_cnn)().eval(), _x)  # a freshly traced copy: its first calls are cold
        _cold = []
        for _ in range(3):
            with precise_timer() as _t:
                _fresh(_x)
            _cold.append(_t.elapsed_ms)
    _warm = time_model(_fresh, _x, warmup=5, samples=30, threads=1)
    print(f"1 thread: first three calls of a freshly traced model: {', '.join(f'{c:.3f}' for c in _cold)} ms; "
          f"after warmup: median {_warm.median_ms:.3f} ms (three single calls: on a busy machine one may be slowed)")
    for _n in sorted({1, torch.get_num_threads()}):
        _s = time_model(_cnn, _x, samples=20, threads=_n)
        print(f"{_n} thread(s): {BenchmarkResult('latency', _s.per_call_ms, unit='ms')}; {_s.calls_per_sample} calls per block")

# %% [markdown]
# ## Benchmark: several models, the same protocol
#
# `run_latency_benchmark` (interleaved rounds: A B C, A B C, …), `run_accuracy_benchmark`, `run_memory_benchmark`
# and `run_throughput_benchmark` put each figure in `results[metric][model]`, one that cannot be had in
# `unavailable` with the reason, and a model that raised in `failures` with its error, while the others still run.
#
# **Your task (medium, 6 points).** Complete the per-model loop of `Benchmark.run_accuracy_benchmark`:
# one top-1 accuracy per model over every labelled sample of every labelled dataset, and a model
# that raises recorded as a failure while the others go on.
#
# - *TODO:* for each model in `self.adapters`, store a `ProportionResult("accuracy", outcomes,
#   unit="fraction", metadata=...)` with `self._store`, and return `{name: result}`.
# - *Approach:* `top1_correct(adapter, dataset)` gives one 0/1 outcome per sample; pool the outcomes
#   of all labelled datasets (in order) into one list, and keep per dataset `{"name", "correct",
#   "count", "accuracy", "wilson_95"}` for `metadata["datasets"]` (how two results are paired sample
#   by sample later). Whatever raises (the model, labels out of range) goes to `self._fail("accuracy", name, e)`.
# - *Example:* datasets of 2 and 4 samples with 1 and 3 right give 4 of 6 = 0.667 (the pooled
#   count), not the mean of 0.5 and 0.75 (0.625).
# - *Hints:* the `try` belongs inside the loop over models, or one broken model stops the
#   rest. Store the outcomes, not the accuracy: the result computes k/n and the Wilson interval.

# %% nbgrader={"grade": false, "grade_id": "benchmark-accuracy", "solution": true, "schema_version": 3}
#| export
DEFAULT_INPUT_SHAPE = (1, 28, 28)  # the documented default, used only when no dataset has samples
MAX_LOOKS = 5  # a budgeted run's looks, fixed in advance: ALPHA is spent evenly over them (ALPHA / MAX_LOOKS each)
SEQUENTIAL_METHOD = (f"until decided: looks of measurement_runs samples per model, every model compared with the first "
                     f"at alpha = ALPHA / {MAX_LOOKS} (Bonferroni alpha spending over {MAX_LOOKS} fixed looks: by the union "
                     "bound at most ALPHA of identical models are ever called different); stops when every comparison "
                     "is different or equivalent, after the last look, or at budget_s; reported at the same alpha")


def _throughput_metric(batch_size: int) -> str:
    return f"throughput_bs{batch_size}"


def _error_record(e: BaseException, context: str | None = None) -> dict[str, str]:
    return {"error_type": type(e).__name__, "message": f"{context}: {e}" if context else str(e)}


class Benchmark:
    """Measure several models under one protocol: latency, accuracy, memory, throughput.

    `models`: a list or a dict `{name: model}` of torch modules, TinyTorch-style or forward-only objects,
    or callables (unique names from `names`, the keys, `.name` or the class); `datasets`: what
    `as_eval_sets` takes. `warmup_runs` untimed calls before each round; `measurement_runs` timed
    samples per model in `rounds` interleaved rounds (default `min(30, measurement_runs)`), each round
    in a random order drawn from `seed`; `threads` fixed while timing (default 1: interrupted samples are
    re-taken and timings carry CPU time, which comparisons use; None: torch's current count, unchecked above one).

    `budget_s` (seconds) samples the latency until decided: looks of `measurement_runs` samples are added
    until every model's latency comparison with the first is different or equivalent, by the method in
    `SEQUENTIAL_METHOD` (a fixed number of looks, `MAX_LOOKS`, with Bonferroni alpha spending);
    `sequential["latency"]` records the looks (throughput is timed in one look). Figures: `results[metric][model]`, else
    `unavailable[metric][model] -> reason` or `failures[metric][model] -> {"error_type", "message"}`.

    >>> b = Benchmark({"lin": torch.nn.Linear(4, 3)}, (torch.randn(32, 4), torch.randint(0, 3, (32,))))
    >>> b.run_latency_benchmark()["lin"].unit
    'ms'
    """

    def __init__(self, models: Any, datasets: Any = None, warmup_runs: int = 5, measurement_runs: int = 10,
                 names: Sequence[str] | None = None, *, threads: int | None = 1, rounds: int | None = None,
                 dataset_names: Sequence[str] | None = None, seed: int = 0, batch_size: int = 256,
                 budget_s: float | None = None):
        if isinstance(models, dict):
            if names is not None:
                raise ValueError("names: give names either as the keys of a models dict or as names=[...], not both")
            names, models = list(models.keys()), list(models.values())
        elif not isinstance(models, (list, tuple)):
            raise TypeError(f"models: expected a list of models or a dict {{name: model}}, got {type(models).__name__}")
        if not models:
            raise ValueError("models: expected at least one model, got an empty list")
        if names is not None and len(names) != len(models):
            raise ValueError(f"names: expected one name per model ({len(models)}), got {len(names)}: {list(names)}")
        adapters = [adapt(m, name=(names[i] if names is not None else None)) for i, m in enumerate(models)]
        if names is not None:  # an adapter passed in keeps its runtime, but takes the name it was given here
            adapters = [a if a.name == n else dataclasses.replace(a, name=n) for a, n in zip(adapters, names)]
        got = [a.name for a in adapters]
        if any(not isinstance(n, str) or not n for n in got) or len(set(got)) < len(got):
            raise ValueError(f"names: expected unique non-empty strings, got {got}; pass names=[...]")
        self.warmup_runs = positive_int(warmup_runs, "warmup_runs", 0)
        self.measurement_runs = positive_int(measurement_runs, "measurement_runs", 1)
        rounds = min(30, measurement_runs) if rounds is None else rounds  # one sample a round: load hits all alike
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= measurement_runs:
            raise ValueError(f"rounds: expected an int between 1 and measurement_runs={measurement_runs}, got {rounds!r}")
        if threads is not None:
            positive_int(threads, "threads", 1)
        if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))
                                     or not math.isfinite(budget_s) or budget_s <= 0):
            raise ValueError(f"budget_s: expected a positive number of seconds (or None), got {budget_s!r}")
        self.budget_s, self.sequential = budget_s, {}  # sequential: metric -> the looks of a budgeted run
        self.adapters = {a.name: a for a in adapters}
        self.models, self.names = {n: a.model for n, a in self.adapters.items()}, list(self.adapters)
        self.datasets = as_eval_sets(datasets, dataset_names, positive_int(batch_size, "batch_size", 1))
        self.rounds, self.threads, self.seed = rounds, threads, seed
        self.system_info, self.machine_states = _system_info(), {}  # machine_states: metric -> machine_load() of its rounds
        self.metric_info: dict[str, MetricInfo] = dict(METRICS)
        self.results, self.unavailable, self.failures = {}, {}, {}  # see the class docstring
        self.input_shape, self.input_source = None, None  # set by _input, the one timing input

    # ----- bookkeeping: each figure is in exactly one of results, unavailable, failures -----
    def _store(self, metric: str, name: str, result: BenchmarkResult) -> None:
        result.metadata = json_native(result.metadata)
        self.results.setdefault(metric, {})[name] = result
        self.unavailable.get(metric, {}).pop(name, None)
        self.failures.get(metric, {}).pop(name, None)

    def _fail(self, metric: str, name: str, e: BaseException, context: str | None = None) -> None:
        if isinstance(e, NotImplementedError) and str(e).startswith("not yet implemented"):
            raise e  # an unfinished course exercise, not a failed measurement: say so, loudly
        self.failures.setdefault(metric, {})[name] = _error_record(e, context)
        self._drop(metric, name)

    def _not_available(self, metric: str, name: str, reason: str) -> None:
        self.unavailable.setdefault(metric, {})[name] = reason
        self._drop(metric, name)

    def _drop(self, metric: str, name: str) -> None:  # a metric left with no figure is dropped: no empty table or plot
        if self.results.get(metric, {}).pop(name, None) is not None and not self.results[metric]:
            del self.results[metric]

    def _input(self, input_shape: Sequence[int] | None) -> torch.Tensor:
        """The one input every model is timed on: a seeded tensor of `input_shape`, else the first
        dataset sample, else a seeded tensor of `DEFAULT_INPUT_SHAPE` (the documented (1, 28, 28))."""
        g = torch.Generator().manual_seed(self.seed)
        if input_shape is not None:
            try:
                shape = tuple(int(d) for d in input_shape)
            except (TypeError, ValueError):
                shape = None
            if not shape or any(d < 1 for d in shape):
                raise (TypeError if shape is None else ValueError)(
                    f"input_shape: expected a sequence of positive ints such as (1, 1, 8, 8), got {input_shape!r}")
            x, source = torch.randn(*shape, generator=g), f"seeded standard normal (seed {self.seed})"
        elif (d := next((d for d in self.datasets if d.has_samples), None)) is not None:
            x, source = d.first_samples(1), f"first sample of dataset '{d.name}'"
        else:
            x = torch.randn(*DEFAULT_INPUT_SHAPE, generator=g)
            source = (f"seeded standard normal (seed {self.seed}) of the default input_shape {DEFAULT_INPUT_SHAPE}: "
                      "no dataset has samples")
        self.input_shape, self.input_source = tuple(x.shape), source
        return x

    def _timed_rounds(self, metric: str, x: torch.Tensor, result: Any, looks: bool = False) -> dict[str, BenchmarkResult]:
        """Time every model on `x` in interleaved rounds (a model that raises is recorded, naming the input), with
        `looks` and a `budget_s` until decided; judge the machine. `result(ms, meta)` makes a model's result."""
        before, options = machine_state(), dict(samples=self.measurement_runs, rounds=self.rounds,
                                                 warmup=self.warmup_runs, seed=self.seed, threads=self.threads)
        if self.budget_s is None or not looks:
            out = time_interleaved(self.adapters, x, **options)
        else:
            alpha, base = ALPHA / MAX_LOOKS, self.names[0]

            def decided(got: dict[str, Any], look: int) -> bool:
                ok = {n: result(*v) for n, v in got.items() if not isinstance(v, BaseException)}
                return base not in ok or all(compare_results(ok[base], r, alpha=alpha).outcome != "inconclusive"
                                             for n, r in ok.items() if n != base)
            out, record = time_until_decided(self.adapters, x, decided, budget_s=self.budget_s, looks=MAX_LOOKS, **options)
            self.sequential[metric] = {**record, "alpha_per_look": alpha, "method": SEQUENTIAL_METHOD}
        self.machine_states[metric] = machine_load(before, machine_state())
        for name, got in out.items():
            if isinstance(got, BaseException):
                self._fail(metric, name, got, context=f"input_shape {tuple(x.shape)} ({self.input_source})")
        return {name: result(*got) for name, got in out.items() if not isinstance(got, BaseException)}

    # ----- measurements -----
    def run_latency_benchmark(self, input_shape: Sequence[int] | None = None) -> dict[str, BenchmarkResult]:
        """Latency of one forward pass per model (ms), every model on the same input (the first dataset
        sample, or a seeded standard-normal tensor of `input_shape`), through the timing core."""
        x = self._input(input_shape)

        def result(ms: list[float], meta: dict[str, Any]) -> BenchmarkResult:
            return BenchmarkResult("latency", ms, unit="ms", metadata=dict(
                meta, input_shape=list(x.shape), input_source=self.input_source,
                method="measured: time_model (perf_counter_ns, calibrated blocks, interleaved rounds in random order)"))
        for name, r in self._timed_rounds("latency", x, result, looks=True).items():
            self._store("latency", name, r)
        return dict(self.results.get("latency", {}))

    def run_accuracy_benchmark(self) -> dict[str, BenchmarkResult]:
        """Top-1 accuracy per model over every labelled sample of every labelled dataset: a
        `ProportionResult` of the per-sample outcomes (Wilson interval; `metadata["datasets"]` the
        per-dataset counts). Unlabelled datasets are skipped and named; with none, accuracy is
        unavailable with the reason. A model whose output does not fit the labels is a failure."""
        labelled = [d for d in self.datasets if d.has_labels]
        skipped = {d.name: d.reason or "no labels" for d in self.datasets if not d.has_labels}
        if not labelled:
            reason = "no labelled dataset: accuracy needs (X, y) data" + (f"; {skipped}" if skipped else "; no dataset was given")
            for name in self.names:
                self._not_available("accuracy", name, reason)
            return {}
        meta = {"method": "measured: top-1 over every labelled sample (results.top1_correct)", "skipped_datasets": skipped}
        out = {}
        ### BEGIN SOLUTION
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
            self._store("accuracy", name, ProportionResult("accuracy", outcomes, unit="fraction",
                                                           metadata=dict(meta, datasets=per_dataset)))
            out[name] = self.results["accuracy"][name]
        ### END SOLUTION
        return out

    def run_memory_benchmark(self, input_shape: Sequence[int] | None = None) -> dict[str, BenchmarkResult]:
        """Memory per model, `CountResult`s of integer bytes (also in `metadata["bytes"]`): "memory" (the peak of one
        forward pass, with every field of `Profiler.measure_memory`), "parameter_memory" and "model_size"
        (`results.serialized_bytes`); for forward-only objects and callables only the forward pass's
        peak, the other two unavailable with the reason. Returns the "memory" results."""
        from tinytorch.profiling.profiler import Profiler, forward_peak_bytes

        x = self._input(input_shape)
        shape, ctx = tuple(x.shape), f"input_shape {tuple(x.shape)} ({self.input_source})"
        profiler = Profiler()
        for name, a in self.adapters.items():
            if a.kind in ("compiled", "onnxruntime"):
                self._runtime_memory(name, a, x)
            elif a.kind in ("callable", "forward"):
                reason = (f"{'a plain callable' if a.kind == 'callable' else 'an object with forward() but no parameters()'}: "
                          "its parameters cannot be seen (pass an nn.Module or an object with parameters())")
                self._not_available("parameter_memory", name, reason)
                self._not_available("model_size", name, reason)
                try:
                    peak, method = forward_peak_bytes(a, x)
                except Exception as e:  # the model raised on the input
                    self._fail("memory", name, e, context=ctx)
                    continue
                self._store("memory", name, CountResult("memory", [int(peak)], unit="bytes", metadata={
                    "bytes": int(peak), "method": f"measured: forward-pass peak only ({method}); parameters not visible",
                    "input_shape": list(shape)}))
            else:
                self._store_size(name, a.model, "")
                try:
                    mem = dict(profiler.measure_memory(a.model, shape))
                    params = int(profiler.count_parameters(a.model))
                except Exception as e:  # the model raised inside the Profiler
                    self._fail("memory", name, e, context=ctx)
                    self._fail("parameter_memory", name, e, context=ctx)
                    continue
                meta = {"method": "measured: Profiler.measure_memory", "input_shape": list(shape),
                        "parameters": params, "profiler": mem}
                for metric, key in (("memory", "peak_memory_bytes"), ("parameter_memory", "parameter_memory_bytes")):
                    if mem.get(key) is None:
                        self._not_available(metric, name, f"Profiler.measure_memory gave no {key}: {mem.get('methods')}")
                    else:
                        n = mem[key]  # integer bytes, as the Profiler counted them
                        self._store(metric, name, CountResult(metric, [n], unit="bytes", metadata=dict(meta, bytes=n)))
        return dict(self.results.get("memory", {}))

    def _store_size(self, name: str, module: Any, note: str) -> None:
        try:
            size_bytes, size_method = serialized_bytes(module)
        except Exception as e:  # the module cannot be saved
            self._fail("model_size", name, e)
            return
        self._store("model_size", name, CountResult("model_size", [size_bytes], unit="bytes", metadata={
            "bytes": size_bytes, "method": f"measured: {size_method}{note}"}))

    def _runtime_memory(self, name: str, a: Any, x: torch.Tensor) -> None:
        """Memory of a model that runs outside eager PyTorch (torch.compile, ONNX Runtime): what the
        adapter says cannot be measured is unavailable with its reason; sizes come from the files."""
        for metric in ("memory", "parameter_memory", "model_size"):
            if metric in a.unavailable:
                self._not_available(metric, name, a.unavailable[metric])
        if a.kind == "onnxruntime":
            self._not_available("parameter_memory", name, "an ONNX Runtime session: its weights live in ORT's own "
                                                          "memory, where no Python-side tool can count them")
            if (size := a.info.get("onnx_bytes")) is None:
                self._not_available("model_size", name, "the session was not built from an .onnx file on disk")
            else:
                self._store("model_size", name, CountResult("model_size", [int(size)], unit="bytes", metadata={
                    "bytes": int(size), "method": "measured: bytes of the .onnx file"}))
            return
        module = a.torch_module  # compiled: the module it compiled shares its parameters
        self._store_size(name, module, " (of the module torch.compile wraps)")
        try:
            from tinytorch.profiling.profiler import Profiler
            params = Profiler().measure_memory(module, tuple(x.shape))["parameter_memory_bytes"]
        except Exception as e:  # the wrapped module raised on the input
            self._fail("parameter_memory", name, e, context=f"input_shape {tuple(x.shape)} ({self.input_source})")
            return
        self._store("parameter_memory", name, CountResult("parameter_memory", [params], unit="bytes", metadata={
            "bytes": params, "method": "measured: the compiled module's parameters"}))

    def run_throughput_benchmark(self, batch_sizes: Sequence[int] = (1, 8, 32)) -> dict[str, dict[int, BenchmarkResult]]:
        """Samples per second per model at each batch size, as metrics "throughput_bs{b}": the first
        `b` samples of the first dataset, or a seeded standard-normal batch when there are fewer."""
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
                xb = torch.randn(b, *base.shape[1:], generator=torch.Generator().manual_seed(self.seed))
                source = f"seeded standard normal (only {len(base)} samples available)"
            def result(ms: list[float], meta: dict[str, Any], b: int = int(b), metric: str = metric) -> BenchmarkResult:
                cpu = meta.get("cpu_per_call_ms")  # the same throughput from CPU time: what comparisons read
                return BenchmarkResult(metric, [b / (v / 1e3) for v in ms], unit="samples/s", metadata=dict(
                    meta, batch_size=b, input_shape=list(xb.shape), input_source=source,
                    method="measured: batch_size / per-call latency",
                    cpu_values=None if cpu is None else [b / (v / 1e3) for v in cpu]))
            for name, r in self._timed_rounds(metric, xb, result).items():
                self._store(metric, name, r)
                out.setdefault(name, {})[int(b)] = self.results[metric][name]
        return out

    # ----- analysis -----
    def _all_metrics(self) -> list[str]:
        return list(dict.fromkeys([*self.results, *self.unavailable, *self.failures]))

    def compare_models(self, metric: str = "latency") -> pd.DataFrame:
        """One row per model for `metric` (the tidy table's columns), every figure read from the result
        itself (Student-t, Wilson or zero-width interval); a model without it has status "unavailable"
        or "failed" and the reason in `note`."""
        if metric not in self._all_metrics():
            raise ValueError(f"metric: no '{metric}' measurements; measured metrics are {self._all_metrics()}")
        info = self.metric_info.get(metric)
        rows = []
        for name in self.names:
            row = {"model": name, "metric": metric, "unit": info.unit if info else "", "status": "not run",
                   **dict.fromkeys(("method", "median", "mean", "std", "ci_lower", "ci_upper", "count",
                                    "median_ci_lower", "median_ci_upper", "note"))}
            r = self.results.get(metric, {}).get(name)
            if r is not None:
                row.update(status="estimated" if r.method.startswith("estimated") else "measured", method=r.method,
                           median=r.median, mean=r.mean, std=r.std, ci_lower=r.ci_lower, ci_upper=r.ci_upper,
                           count=r.count, unit=r.unit)
                if r.count >= 2 or type(r) is not BenchmarkResult:
                    row["median_ci_lower"], row["median_ci_upper"] = (float(v) for v in r.median_ci())
            elif (f := self.failures.get(metric, {}).get(name)) is not None:
                row.update(status="failed", note=f"{f['error_type']}: {f['message']}")
            elif name in self.unavailable.get(metric, {}):
                row.update(status="unavailable", note=self.unavailable[metric][name])
            else:
                row["note"] = "this benchmark was not run for this model"
            rows.append(row)
        return pd.DataFrame(rows)

    def compare(self, model_a: str, model_b: str, metric: str = "latency", *, alpha: float = ALPHA,
                min_effect: float = MIN_EFFECT, n_boot: int = 2000, seed: int = 0) -> Comparison:
        """`model_b` against `model_a` on one measured metric, with `compare_results` (Mann-Whitney U
        and a bootstrap ratio b/a for timings, on CPU time where both have it; McNemar for accuracy, the
        ratio for exact values). After a budgeted run of `metric`, `alpha` is at most its per-look alpha
        (`ALPHA / MAX_LOOKS`), the level its stopping rule decided at."""
        alpha = min(alpha, self.sequential.get(metric, {}).get("alpha_per_look", alpha))
        for name, arg in ((model_a, "model_a"), (model_b, "model_b")):
            if name not in self.adapters:
                raise ValueError(f"{arg}: unknown model {name!r}; expected one of {self.names}")
            if self.results.get(metric, {}).get(name) is None:
                why = (self.failures.get(metric, {}).get(name) or self.unavailable.get(metric, {}).get(name)
                       or "not measured yet")
                raise ValueError(f"{arg}: no '{metric}' result for model {name!r} ({why})")
        return compare_results(self.results[metric][model_a], self.results[metric][model_b], names=(model_a, model_b),
                               info=self.metric_info.get(metric), alpha=alpha, min_effect=min_effect, n_boot=n_boot,
                               seed=seed)

# %% nbgrader={"grade": true, "grade_id": "test-benchmark-accuracy", "locked": true, "points": 6, "schema_version": 3}
def test_unit_benchmark_accuracy():
    lin = torch.nn.Linear(3, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(3))  # predicts argmax(x)
    X = torch.eye(3).repeat(2, 1)              # predictions 0 1 2 0 1 2
    y = torch.tensor([0, 1, 2, 1, 1, 0])       # right:      1 1 1 0 1 0  -> 4 of 6

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("broken on purpose")

    b = Benchmark({"broken": Broken(), "eye": lin}, [(X[:2], y[:2]), (X[2:], y[2:])], measurement_runs=2)
    try:
        got = b.run_accuracy_benchmark()
    except NotImplementedError:
        raise
    except Exception as e:
        raise AssertionError("a model that raises is recorded in failures['accuracy'] (continue with the next model); "
                             f"got {type(e).__name__}: {e}") from e
    assert "broken on purpose" in b.failures.get("accuracy", {}).get("broken", {}).get("message", ""), \
        f"expected the broken model's error in failures['accuracy'], got {b.failures.get('accuracy')}"
    assert "eye" in got, ("the models after a failing one must still be measured: the try belongs inside the loop "
                          f"over models; got results for {sorted(got)}")
    r = got["eye"]
    assert isinstance(r, ProportionResult), f"expected a ProportionResult of per-sample outcomes, got {type(r).__name__}"
    assert (r.correct, r.count) == (4, 6), (f"expected 4 of 6 (both datasets pooled: 2 of 2, then 2 of 4), got "
                                            f"{r.correct} of {r.count}" + (" -- only the first dataset was counted"
                                                                          if r.count == 2 else ""))
    assert r.values == [1, 1, 1, 0, 1, 0], f"outcomes in dataset order: expected [1, 1, 1, 0, 1, 0], got {r.values}"
    assert (r.ci_lower, r.ci_upper) == wilson_interval(4, 6), "the interval is the Wilson interval of 4 of 6"
    names = [(d.get("name"), d.get("count"), d.get("correct")) for d in r.metadata.get("datasets", [])]
    assert names == [("dataset0", 2, 2), ("dataset1", 4, 2)], \
        f"metadata['datasets'] lists each dataset's name, count and correct in order: expected " \
        f"[('dataset0', 2, 2), ('dataset1', 4, 2)], got {names}"
    assert b.results["accuracy"]["eye"] is r, "the result is stored in results['accuracy'] (use self._store)"
    b = Benchmark([lin], [(X, torch.tensor([0, 1, 2, 3, 4, 5]))], names=["eye"], measurement_runs=2)
    assert b.run_accuracy_benchmark() == {} and "labels do not match" in b.failures["accuracy"]["eye"]["message"], \
        f"labels the model cannot output are a recorded failure, got {b.failures.get('accuracy')}"
    ### BEGIN HIDDEN TESTS
    hidden_property("accuracy of other models on other data sets: counts over all sets, a model that cannot output "
                    "every label")
    rng = grading_rng()
    torch.manual_seed(int(rng.integers(2**31)))
    k = int(rng.integers(3, 7))  # classes
    good = torch.nn.Linear(k, k)
    other = torch.nn.Linear(k, k, bias=False)
    narrow = torch.nn.Linear(k, k - 1)  # cannot output the label k - 1: its accuracy is a failure
    sets, names = [], []
    for i in range(int(rng.integers(2, 4))):
        n = int(rng.integers(3, 16))
        X = torch.from_numpy(rng.normal(size=(n, k))).float()
        with torch.no_grad():
            logits = torch.cat([good(X), other(X)], dim=1)
        for j in range(n):  # keep every row's top two logits apart, so no model's prediction is a near-tie
            while any(float(v[1] - v[0]) < 1e-3 for v in (logits[j, :k].sort().values[-2:],
                                                           logits[j, k:].sort().values[-2:])):
                X[j] = torch.from_numpy(rng.normal(size=k)).float()
                with torch.no_grad():
                    logits[j] = torch.cat([good(X[j:j + 1]), other(X[j:j + 1])], dim=1)[0]
        y = torch.from_numpy(rng.integers(0, k, size=n))
        if i == 0:
            y[int(rng.integers(n))] = k - 1
        sets.append((X, y))
        names.append(f"set{i}_{int(rng.integers(100, 1000))}")
    unlabelled = int(rng.integers(len(sets) + 1))  # an unlabelled set somewhere: skipped, not counted
    sets.insert(unlabelled, (torch.from_numpy(rng.normal(size=(4, k))).float(),))
    names.insert(unlabelled, "no_labels")
    models = {"good": good, "other": other, "narrow": narrow, "broken": Broken()}
    order = [list(models)[i] for i in rng.permutation(len(models))]
    b = Benchmark({m: models[m] for m in order}, sets, measurement_runs=2, dataset_names=names)
    try:
        got = b.run_accuracy_benchmark()
    except NotImplementedError:
        raise
    except Exception as e:
        raise AssertionError(f"models {order}: a model that raises is recorded in failures['accuracy'] and the "
                             f"others go on; got {type(e).__name__}: {e}") from e
    assert sorted(got) == ["good", "other"], (f"models {order} ('broken' raises, 'narrow' cannot output label "
                                              f"{k - 1}): expected results for ['good', 'other'], got {sorted(got)}")
    fails = sorted(b.failures.get("accuracy", {}))
    assert fails == ["broken", "narrow"], f"expected failures['accuracy'] for ['broken', 'narrow'], got {fails}"
    for m in ("good", "other"):
        per = []
        with torch.no_grad():
            for (X, *y), nm in zip(sets, names):
                if y:
                    per.append((nm, (models[m](X).argmax(dim=1) == y[0]).int().tolist()))
        flags = [v for _, v in per for v in v]
        r = got[m]
        assert isinstance(r, ProportionResult), \
            f"{m}: expected a ProportionResult of per-sample outcomes, got {type(r).__name__}"
        assert (r.correct, r.count) == (sum(flags), len(flags)), (
            f"{m}: expected {sum(flags)} of {len(flags)} (every labelled dataset pooled, the unlabelled one skipped), "
            f"got {r.correct} of {r.count}")
        assert list(r.values) == flags, f"{m}: outcomes in dataset order: expected {flags}, got {r.values}"
        z, n, p = 1.959963984540054, len(flags), sum(flags) / len(flags)
        center = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        wilson = [max(0.0, center - half), min(1.0, center + half)]
        assert np.allclose([r.ci_lower, r.ci_upper], wilson, rtol=0, atol=1e-9), \
            f"{m}: expected the Wilson interval of {sum(flags)} of {n}, {wilson}, got {[r.ci_lower, r.ci_upper]}"
        want = [(nm, len(v), sum(v)) for nm, v in per]
        rows = [(d.get("name"), d.get("count"), d.get("correct")) for d in r.metadata.get("datasets", [])]
        assert rows == want, (f"{m}: metadata['datasets'] lists each labelled dataset's (name, count, correct): "
                              f"expected {want}, got {rows}")
        accs, want = [d.get("accuracy") for d in r.metadata["datasets"]], [sum(v) / len(v) for _, v in per]
        assert np.allclose(accs, want), f"{m}: per-dataset accuracy: expected correct / count = {want}, got {accs}"
        stored = b.results["accuracy"][m]
        assert list(stored.values) == flags, \
            f"{m}: the result is stored in results['accuracy'] (use self._store), got {stored}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_benchmark_accuracy()

# %% [markdown]
# ## Everything together
#
# On the digits test set (as two datasets): the trained CNN, the same CNN working twice (same
# predictions, twice the cost), an untrained CNN (same cost, chance accuracy) and one that raises.

# %%
def test_module():
    from tinytorch.benchmarking.digits import DigitsCNN, default_digits_model, load_digits_split

    cnn, (X, y) = default_digits_model(), load_digits_split("test")
    torch.manual_seed(0)
    b = Benchmark({"cnn": cnn, "cnn_twice": lambda x: (cnn(x), cnn(x))[1], "untrained": DigitsCNN().eval(),
                   "broken": lambda x: x.kaput()}, [(X[:200], y[:200]), (X[200:], y[200:])], warmup_runs=3,
                  measurement_runs=20, threads=1, dataset_names=["first", "rest"])
    b.run_latency_benchmark(), b.run_memory_benchmark(), b.run_throughput_benchmark((1, 16))
    acc, metrics = b.run_accuracy_benchmark(), b._all_metrics()
    assert set(metrics) >= {"latency", "accuracy", "memory", "model_size", "parameter_memory", "throughput_bs16"}
    table = pd.concat([b.compare_models(m) for m in metrics])
    assert len(table) == 4 * len(metrics) and "kaput" in b.failures["latency"]["broken"]["message"]
    assert set(table[table["model"] == "cnn"]["status"]) == {"measured"}, "every figure of the trained CNN"
    assert set(table[table["model"] == "broken"]["status"]) <= {"failed", "unavailable"}, "no figure for broken"
    assert acc["cnn"].count == 450 and acc["cnn"].correct == acc["cnn_twice"].correct, "same predictions"
    faster, accurate = b.compare("cnn_twice", "cnn"), b.compare("untrained", "cnn", "accuracy")
    assert faster.winner == "cnn" and accurate.winner == "cnn", (faster.verdict, accurate.verdict)
    print(table[["model", "metric", "status", "median", "median_ci_lower", "median_ci_upper", "count"]].to_string(index=False))
    print(f"{faster.verdict}\n{accurate.verdict}")


if __name__ == "__main__":
    test_module()
