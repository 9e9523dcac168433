# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19: Benchmarking
#
# You have profiled models (Module 15) and made them smaller and faster (Modules 16–18).
# Each of those steps ended with a claim: *this version is faster*, *that one uses less
# memory*, *accuracy barely moved*. This module builds the tool that decides whether such a
# claim is true.
#
# A benchmark is an experiment. It has a workload (a model and its data), a protocol (warmup,
# how many repetitions, which threads, which device), measurements with an uncertainty, and a
# conclusion that must survive that uncertainty. By the end of this module you will have built:
#
# - `BenchmarkResult`: raw measurements plus the statistics that describe them;
# - `precise_timer`: the simplest correct way to time a piece of code;
# - `Benchmark` and `BenchmarkSuite`: fair, repeatable comparisons of several models, with
#   significance tests, Pareto fronts, reports and plots;
# - the edge-deployment metrics, standard benchmarks (TinyMLPerf) and the TorchPerf Olympics
#   submission format that the capstone uses.
#
# ```
# Profiler (Module 15) ──> timing core + adapter ──> BenchmarkResult ──> Benchmark ──> BenchmarkSuite
#                                                                           │
#                                                    reports, plots, Pareto, significance, Olympics
# ```
#
# Where the code ends up: `from tinytorch.benchmarking.benchmark import Benchmark, OlympicEvent`.

# %%
#| default_exp benchmarking.benchmark

# %%
#| export
from __future__ import annotations

import contextlib
import datetime as _dt
import io
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats as _stats

from tinytorch.profiling.timing import adapt, median_ci, system_info as _system_info, time_model

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
# ## BenchmarkResult: measurements and what they tell us
#
# Here are ten latency readings (ms) of the same model, taken one after the other:
#
# ```
# 1.21 1.19 1.22 1.20 3.05 1.21 1.18 1.20 1.23 1.19
#                      ^^^^ the OS scheduled something else for 2 ms
# ```
#
# The mean (1.39 ms) is pulled up by one interruption; the median (1.205 ms) is not. That is
# why latency is summarised by the **median and percentiles** (p90, p99 tell you about the
# tail a user feels), while the **mean and its confidence interval** describe averages such as
# accuracy over several datasets.
#
# The confidence interval of a mean from `n` samples is `mean ± t(0.975, n-1) · s / √n`, with
# Student's t, not the normal distribution's 1.96: with 5 samples t is 2.78, so a z-interval
# would claim 30% more certainty than the data give.
#
# | statistic | meaning |
# |---|---|
# | `median`, `p50/p90/p95/p99` | typical and tail values (linear interpolation) |
# | `mean`, `std` | average and sample standard deviation (n−1) |
# | `ci_lower`, `ci_upper` | Student-t 95% interval for the mean (`None` for a single value) |
# | `iqr` | p75 − p25, a robust spread |
# | `cv` | std / mean, the relative noise (`None` when the mean is 0) |
# | `outliers` | values beyond 1.5 × IQR from the quartiles |
#
# **Your task.** Complete `BenchmarkResult.__post_init__` so it validates the values and
# computes every statistic in the table.
#
# - *Approach:* convert to a float numpy array; reject an empty list and any NaN or infinity
#   with a `ValueError` that names `values`; then fill each attribute.
# - *Example:* `BenchmarkResult("latency", [1.0, 2.0, 3.0, 4.0, 5.0], unit="ms")` has
#   `median == 3.0`, `p90 == 4.6`, `iqr == 2.0` and a 95% interval of about (1.04, 4.96).
# - *Hints:* `np.percentile`, `scipy.stats.t.ppf(0.975, n - 1)`, `statistics.stdev`.

# %% nbgrader={"grade": false, "grade_id": "benchmark-result", "solution": true, "schema_version": 3}
#| export
@dataclass
class BenchmarkResult:
    """Raw measurements of one metric for one model, with the statistics that describe them.

    `values` are kept as given (for latency: milliseconds per call, one per timed sample), so a
    result can be saved, loaded and re-analysed. `metadata` records the conditions.

    >>> r = BenchmarkResult("latency", [1.0, 2.0, 3.0, 4.0, 5.0], unit="ms")
    >>> r.median, r.p90, r.count
    (3.0, 4.6, 5)
    >>> round(r.ci_lower, 3), round(r.ci_upper, 3)
    (1.037, 4.963)
    """

    metric_name: str
    values: list[float]
    unit: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    confidence: float = 0.95

    def __post_init__(self) -> None:
        ### BEGIN SOLUTION
        arr = np.asarray(list(self.values), dtype=float)
        if arr.size == 0:
            raise ValueError(f"values: expected at least one measurement for '{self.metric_name}', got none")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"values: expected finite numbers for '{self.metric_name}', got {list(arr[~np.isfinite(arr)])}")
        self.values = arr.tolist()
        self.count = int(arr.size)
        self.mean = float(arr.mean())
        self.std = float(arr.std(ddof=1)) if self.count > 1 else 0.0
        self.median = float(np.median(arr))
        self.min = float(arr.min())
        self.max = float(arr.max())
        self.p50, self.p90, self.p95, self.p99 = (float(v) for v in np.percentile(arr, [50, 90, 95, 99]))
        q1, q3 = np.percentile(arr, [25, 75])
        self.iqr = float(q3 - q1)
        self.cv = self.std / self.mean if self.mean != 0 else None
        self.outliers = int(np.sum((arr < q1 - 1.5 * self.iqr) | (arr > q3 + 1.5 * self.iqr)))
        if self.count > 1:
            half = float(_stats.t.ppf((1 + self.confidence) / 2, self.count - 1)) * self.std / math.sqrt(self.count)
            self.ci_lower, self.ci_upper = self.mean - half, self.mean + half
        else:
            self.ci_lower = self.ci_upper = None
        ### END SOLUTION

    def median_ci(self) -> tuple[float, float]:
        "Distribution-free 95% interval of the median (order statistics)."
        return median_ci(self.values, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        "Every raw value, every statistic and the metadata, JSON-ready."
        d = {"metric_name": self.metric_name, "unit": self.unit, "values": list(self.values),
             "confidence": self.confidence, "metadata": dict(self.metadata)}
        d.update({k: getattr(self, k) for k in STATISTICS})
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchmarkResult":
        "Rebuild a result from `to_dict()` output; statistics are recomputed from the raw values."
        missing = [k for k in ("metric_name", "values") if k not in d]
        if missing:
            raise ValueError(f"d: missing keys {missing}; expected the output of BenchmarkResult.to_dict()")
        return cls(d["metric_name"], list(d["values"]), unit=d.get("unit", ""),
                   metadata=dict(d.get("metadata", {})), confidence=d.get("confidence", 0.95))

    def __str__(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return (f"{self.metric_name}: median {self.median:.4g}{u} "
                f"(p90 {self.p90:.4g}, mean {self.mean:.4g} ± {self.std:.4g}, n={self.count})")


STATISTICS = ("count", "mean", "std", "median", "min", "max", "p50", "p90", "p95", "p99",
              "iqr", "cv", "outliers", "ci_lower", "ci_upper")

# %% [markdown]
# A demonstration on the ten readings above: the median ignores the interruption, the mean
# does not, and the outlier count flags it.

# %%
if __name__ == "__main__":
    readings = [1.21, 1.19, 1.22, 1.20, 3.05, 1.21, 1.18, 1.20, 1.23, 1.19]
    r = BenchmarkResult("latency", readings, unit="ms")
    print(r)
    print(f"95% CI of the mean: [{r.ci_lower:.3f}, {r.ci_upper:.3f}] ms; outliers: {r.outliers}; cv: {r.cv:.1%}")

# %% nbgrader={"grade": true, "grade_id": "test-benchmark-result", "locked": true, "points": 10, "schema_version": 3}
def test_unit_benchmark_result():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    r = BenchmarkResult("latency", values, unit="ms")
    assert r.count == 5, f"count: expected 5, got {r.count}"
    assert r.mean == 3.0 and r.median == 3.0, "mean and median of 1..5 are both 3"
    assert abs(r.std - statistics.stdev(values)) < 1e-12, "std must be the sample standard deviation (n-1)"
    assert (r.min, r.max) == (1.0, 5.0), f"min/max: expected (1.0, 5.0), got ({r.min}, {r.max})"
    assert abs(r.p90 - 4.6) < 1e-12 and abs(r.p99 - 4.96) < 1e-12, "percentiles use linear interpolation"
    assert abs(r.iqr - 2.0) < 1e-12, f"iqr: expected p75 - p25 = 2.0, got {r.iqr}"
    assert r.cv is not None and abs(r.cv - statistics.stdev(values) / 3.0) < 1e-12, \
        f"cv: expected std / mean = {statistics.stdev(values) / 3.0:.6f}, got {r.cv}"
    # Student-t, not z = 1.96: t(0.975, 4) = 2.776
    half = 2.7764451051977987 * statistics.stdev(values) / math.sqrt(5)
    assert r.ci_lower is not None and abs(r.ci_lower - (3 - half)) < 1e-9, \
        f"ci_lower: expected {3 - half:.4f} from Student's t with 4 degrees of freedom, got {r.ci_lower}"
    assert abs(r.ci_upper - (3 + half)) < 1e-9, f"ci_upper: expected {3 + half:.4f}, got {r.ci_upper}"
    # outliers beyond 1.5 IQR
    spiky = BenchmarkResult("x", [1, 1.1, 1.2, 1.1, 1.0, 9.0])
    assert spiky.outliers == 1, f"outliers: 9.0 lies beyond p75 + 1.5 IQR of the others, expected 1, got {spiky.outliers}"
    assert r.outliers == 0, f"outliers: 1..5 has none beyond 1.5 IQR, got {r.outliers}"
    # a single value: no interval, no spread
    one = BenchmarkResult("x", [2.5])
    assert one.std == 0.0 and one.ci_lower is None and one.ci_upper is None, \
        f"a single value has std 0.0 and no interval (None, None); got std {one.std}, ({one.ci_lower}, {one.ci_upper})"
    assert BenchmarkResult("x", [0.0, 0.0]).cv is None, "cv is undefined when the mean is 0"
    # bad input is rejected with the argument named
    for bad in ([], [1.0, float("nan")], [float("inf")]):
        try:
            BenchmarkResult("x", bad)
        except ValueError as e:
            assert "values" in str(e), f"the error should name 'values', got: {e}"
        else:
            raise AssertionError(f"BenchmarkResult('x', {bad}) should raise ValueError")
    # round trip
    back = BenchmarkResult.from_dict(r.to_dict())
    assert back.to_dict() == r.to_dict(), "from_dict(to_dict()) must give the same result"


if __name__ == "__main__":
    test_unit_benchmark_result()

# %% [markdown]
# ## precise_timer: timing a block of code
#
# Before the full timing core (which repeats, calibrates and synchronizes), here is its
# smallest correct building block: a context manager that reads `time.perf_counter_ns()`
# on entry and exit.
#
# - `perf_counter_ns` is monotonic (never jumps when the wall clock is adjusted) and returns
#   integer nanoseconds, so no precision is lost to floating point on long runs.
# - If the timed code raises, the exception must **propagate**: a failed run that is silently
#   reported as a (very fast) measurement is the worst kind of benchmark bug.
#
# **Your task.** Complete `precise_timer` so that `elapsed_ns` (int) and `elapsed_ms` (float)
# are set when the block ends, whether or not it raised.
#
# - *Approach:* a generator-based context manager: read the clock, `yield` a timer object,
#   read the clock again in a `finally:` block.
# - *Example:* `with precise_timer() as t: sum(range(10**6))` then `t.elapsed_ms` is a few ms.
# - *Hints:* don't catch the exception; `finally` runs either way.

# %% nbgrader={"grade": false, "grade_id": "precise-timer", "solution": true, "schema_version": 3}
#| export
@dataclass
class TimerReading:
    "What `precise_timer` yields; filled in when the block ends."

    elapsed_ns: int | None = None

    @property
    def elapsed_ms(self) -> float | None:
        return None if self.elapsed_ns is None else self.elapsed_ns / 1e6

    @property
    def elapsed_s(self) -> float | None:
        return None if self.elapsed_ns is None else self.elapsed_ns / 1e9


@contextlib.contextmanager
def precise_timer() -> Iterator[TimerReading]:
    """Time the enclosed block with `time.perf_counter_ns`; exceptions propagate.

    >>> with precise_timer() as t:
    ...     _ = sum(range(1000))
    >>> t.elapsed_ns > 0
    True
    """
    ### BEGIN SOLUTION
    reading = TimerReading()
    start = time.perf_counter_ns()
    try:
        yield reading
    finally:
        reading.elapsed_ns = time.perf_counter_ns() - start
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-precise-timer", "locked": true, "points": 5, "schema_version": 3}
def test_unit_precise_timer():
    outer_start = time.perf_counter_ns()
    with precise_timer() as t:
        total = sum(range(200_000))
    outer = time.perf_counter_ns() - outer_start
    assert total == 199999 * 200000 // 2, "the timed block must run exactly once, unchanged"
    assert isinstance(t.elapsed_ns, int), f"elapsed_ns should be an int of nanoseconds, got {t.elapsed_ns!r}"
    assert 0 < t.elapsed_ns <= outer, "the timed block cannot take longer than the code around it"
    assert abs(t.elapsed_ms - t.elapsed_ns / 1e6) < 1e-9, f"elapsed_ms must equal elapsed_ns / 1e6, got {t.elapsed_ms}"
    # exceptions propagate and the time is still recorded
    try:
        with precise_timer() as failed:
            raise KeyError("boom")
    except KeyError:
        pass
    else:
        raise AssertionError("precise_timer must not swallow exceptions")
    assert failed.elapsed_ns is not None and failed.elapsed_ns >= 0, \
        "the time must be recorded even when the block raises (read the clock in a finally: block)"


if __name__ == "__main__":
    test_unit_precise_timer()

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
    from tinytorch.profiling.timing import fixed_threads

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
# ## How sure are we of an accuracy?
#
# An accuracy is a proportion: `k` correct out of `n`. 441/450 = 98.0% sounds precise, but a
# second test set of 450 images from the same source could easily give 97% or 99%. The
# textbook interval `p ± 1.96 √(p(1−p)/n)` (Wald) is poor exactly where good models live,
# near 100%: at 450/450 it has width zero, as if we were certain. The **Wilson score
# interval** fixes that by solving for the proportions that the observed count is
# consistent with:
#
# ```
# center = (p + z²/2n) / (1 + z²/n)
# half   = z / (1 + z²/n) · √( p(1−p)/n + z²/4n² )        z = 1.96 for 95%
# ```
#
# **Your task.** Implement `wilson_interval(correct, n, confidence=0.95)`.
#
# - *Approach:* validate (`n ≥ 1`, `0 ≤ correct ≤ n`, confidence in (0, 1)); `p = correct / n`;
#   `z` from the normal quantile; return `(center − half, center + half)`.
# - *Example:* `wilson_interval(450, 450)` is about `(0.9915, 1.0)`; `wilson_interval(5, 10)`
#   is about `(0.2366, 0.7634)`.
# - *Hints:* `scipy.stats.norm.ppf((1 + confidence) / 2)`; errors are `ValueError`s naming the
#   argument.

# %% nbgrader={"grade": false, "grade_id": "benchmarking-wilson", "solution": true, "schema_version": 3}
#| export
def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion `correct / n` (e.g. an accuracy).

    >>> lo, hi = wilson_interval(5, 10)
    >>> round(lo, 4), round(hi, 4)
    (0.2366, 0.7634)
    """
    ### BEGIN SOLUTION
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n: expected a positive number of samples, got {n!r}")
    if int(correct) != correct or not 0 <= correct <= n:
        raise ValueError(f"correct: expected an int between 0 and n={n}, got {correct!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    p = correct / n
    z = float(_stats.norm.ppf((1 + confidence) / 2))
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-benchmarking-wilson", "locked": true, "points": 5, "schema_version": 3}
def test_unit_wilson_interval():
    lo, hi = wilson_interval(5, 10)
    assert abs(lo - 0.2366) < 1e-4 and abs(hi - 0.7634) < 1e-4, f"wilson_interval(5, 10): expected (0.2366, 0.7634), got {(lo, hi)}"
    lo, hi = wilson_interval(450, 450)
    assert abs(hi - 1.0) < 1e-9 and 0.990 < lo < 0.993, \
        f"a perfect score still has uncertainty: expected about (0.9915, 1.0), got {(lo, hi)}"
    lo, hi = wilson_interval(0, 20)
    assert lo < 1e-9 and 0.15 < hi < 0.17, f"0/20: expected about (0, 0.161), got {(lo, hi)}"
    # agrees with statsmodels' reference formula, written independently here
    k, n, z = 441, 450, 1.959963984540054
    p = k / n
    c = (2 * k + z * z) / (2 * (n + z * z))
    h = z * math.sqrt(z * z + 4 * n * p * (1 - p)) / (2 * (n + z * z))
    lo, hi = wilson_interval(k, n)
    assert abs(lo - (c - h)) < 1e-9 and abs(hi - (c + h)) < 1e-9, f"441/450: expected {(c - h, c + h)}, got {(lo, hi)}"
    wide, narrow = wilson_interval(90, 100), wilson_interval(900, 1000)
    assert (wide[1] - wide[0]) > 2.5 * (narrow[1] - narrow[0]), "10x the samples: the interval is ~3x narrower"
    lo99, hi99 = wilson_interval(90, 100, confidence=0.99)
    assert lo99 < wide[0] and hi99 > wide[1], "a 99% interval is wider than a 95% one"
    for args, arg in (((5, 0), "n"), ((11, 10), "correct"), ((-1, 10), "correct")):
        try:
            wilson_interval(*args)
        except ValueError as e:
            assert arg in str(e), f"the error for wilson_interval{args} should name '{arg}', got: {e}"
        else:
            raise AssertionError(f"wilson_interval{args} should raise ValueError")


if __name__ == "__main__":
    test_unit_wilson_interval()

# %% [markdown]
# ## Is B really faster than A?
#
# Two latency samples, A and B. Three numbers answer the question:
#
# 1. **The effect:** the ratio of medians, `median(B) / median(A)`. Medians, because latency
#    has a long right tail.
# 2. **Its uncertainty:** a bootstrap confidence interval of that ratio. Resample A and B
#    with replacement (a seeded `numpy.random.Generator`, so the interval is reproducible),
#    recompute the ratio a few thousand times, take the 2.5th and 97.5th percentiles.
# 3. **Whether it could be noise:** the Mann–Whitney U test, which asks whether a random value
#    of B tends to be smaller than a random value of A. It makes no normality assumption,
#    which latency (skewed, with outliers) would violate.
#
# A difference is reported only if it is both *statistically significant* (p < 0.05) and
# *large enough to matter* (at least 2%): with thousands of samples, a 0.3% difference can be
# "significant" and still be of no use to anyone.
#
# ```
# A: ▁▂▅█▅▂▁            median 1.00 ms
# B:        ▁▂▅█▅▂▁     median 1.80 ms    ratio 1.80 [1.74, 1.86], p < 0.001
#                                         -> "a is 1.80× faster than b (p < 0.001)"
# ```
#
# **Your task.** Complete `compare_samples`: fill in `median_a`, `median_b`, `ratio`,
# `ci_lower`, `ci_upper`, `p_value` and `significant`; the verdict text is written for you
# from those.
#
# - *Approach:* `np.median`; the bootstrap: `rng = np.random.default_rng(seed)`, draw
#   `n_boot` index arrays for each sample, compute the ratio of the resampled medians,
#   `np.percentile(ratios, [2.5, 97.5])` (for the 95% level `1 − alpha`);
#   `scipy.stats.mannwhitneyu(a, b, alternative="two-sided").pvalue`;
#   significant when `p_value < alpha` and `|ratio − 1| ≥ min_effect`.
# - *Example:* `compare_samples([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05])` has
#   `ratio == 2.0`, `p_value ≈ 0.012`, and the verdict "a is 2.00× faster than b (p = 0.012)".
# - *Hints:* `rng.integers(0, len(a), size=(n_boot, len(a)))` gives all index arrays at once;
#   `np.median(x[idx], axis=1)` the medians of every resample.

# %% nbgrader={"grade": false, "grade_id": "benchmarking-compare", "solution": true, "schema_version": 3}
#| export
@dataclass
class Comparison:
    """The outcome of comparing model `b` against model `a` on one metric.

    `ratio` is `median_b / median_a` with its bootstrap interval; `p_value` comes from `test`;
    `verdict` says in words what the figures support.
    """

    model_a: str
    model_b: str
    metric: str
    median_a: float
    median_b: float
    ratio: float
    ci_lower: float | None
    ci_upper: float | None
    p_value: float | None
    significant: bool
    verdict: str = ""
    test: str = "Mann-Whitney U (two-sided)"
    n_a: int = 0
    n_b: int = 0
    alpha: float = 0.05
    min_effect: float = 0.02
    bootstrap_resamples: int = 0
    seed: int | None = None
    higher_is_better: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _format_p(p: float | None) -> str:
    if p is None:
        return "no test"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _verdict_text(c: Comparison, better: str) -> str:
    if not c.significant:
        return f"no significant difference ({_format_p(c.p_value)}, ratio {c.ratio:.3f})"
    b_wins = (c.ratio > 1) == c.higher_is_better
    winner, loser = (c.model_b, c.model_a) if b_wins else (c.model_a, c.model_b)
    factor = c.ratio if c.ratio >= 1 else (1 / c.ratio if c.ratio > 0 else math.inf)
    return f"{winner} is {factor:.2f}× {better} than {loser} ({_format_p(c.p_value)})"


def compare_samples(
    a: Sequence[float],
    b: Sequence[float],
    *,
    names: tuple[str, str] = ("a", "b"),
    metric: str = "latency",
    higher_is_better: bool = False,
    better: str = "faster",
    alpha: float = 0.05,
    min_effect: float = 0.02,
    n_boot: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare two samples of one metric: ratio of medians (b / a) with a bootstrap interval,
    a Mann-Whitney U p-value, and a verdict.

    A difference counts only when `p < alpha` and the ratio differs from 1 by at least
    `min_effect`. `better` is the word for the winner ("faster", "smaller", ...).

    >>> c = compare_samples([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05])
    >>> c.ratio, c.verdict
    (2.0, 'a is 2.00× faster than b (p = 0.012)')
    """
    a_arr = np.asarray(a, dtype=float)
    b_arr = np.asarray(b, dtype=float)
    for arr, arg in ((a_arr, "a"), (b_arr, "b")):
        if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)):
            raise ValueError(f"{arg}: expected at least 2 finite measurements, got {arr.tolist()!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    if n_boot < 100:
        raise ValueError(f"n_boot: expected at least 100 bootstrap resamples, got {n_boot!r}")
    ### BEGIN SOLUTION
    median_a, median_b = float(np.median(a_arr)), float(np.median(b_arr))
    if median_a == 0:
        raise ValueError("a: its median is 0, so the ratio median(b) / median(a) is undefined")
    ratio = median_b / median_a
    rng = np.random.default_rng(seed)
    boot_a = np.median(a_arr[rng.integers(0, a_arr.size, size=(n_boot, a_arr.size))], axis=1)
    boot_b = np.median(b_arr[rng.integers(0, b_arr.size, size=(n_boot, b_arr.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = boot_b / boot_a
    ratios = ratios[np.isfinite(ratios)]
    ci_lower, ci_upper = (float(v) for v in np.percentile(ratios, [100 * alpha / 2, 100 * (1 - alpha / 2)]))
    p_value = float(_stats.mannwhitneyu(a_arr, b_arr, alternative="two-sided").pvalue)
    significant = bool(p_value < alpha and abs(ratio - 1) >= min_effect)
    ### END SOLUTION
    c = Comparison(names[0], names[1], metric, median_a, median_b, ratio, ci_lower, ci_upper, p_value,
                   significant, n_a=int(a_arr.size), n_b=int(b_arr.size), alpha=alpha, min_effect=min_effect,
                   bootstrap_resamples=n_boot, seed=seed, higher_is_better=higher_is_better)
    c.verdict = _verdict_text(c, better)
    return c

# %% nbgrader={"grade": true, "grade_id": "test-benchmarking-compare", "locked": true, "points": 10, "schema_version": 3}
def test_unit_compare_samples():
    fast = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.02, 0.98]
    slow = [2 * v for v in fast]
    c = compare_samples(fast, slow, names=("fast", "slow"))
    assert c.median_a == statistics.median(fast) and c.median_b == statistics.median(slow), \
        f"median_a/median_b: expected the medians of a and b, got {c.median_a}, {c.median_b}"
    assert abs(c.ratio - 2.0) < 1e-12, f"ratio: expected median(b) / median(a) = 2.0, got {c.ratio}"
    expected_p = _stats.mannwhitneyu(fast, slow, alternative="two-sided").pvalue
    assert abs(c.p_value - expected_p) < 1e-12, f"p_value: expected the two-sided Mann-Whitney U p = {expected_p}, got {c.p_value}"
    assert c.ci_lower is not None and c.ci_lower <= c.ratio <= c.ci_upper, \
        f"the bootstrap interval [{c.ci_lower}, {c.ci_upper}] should contain the observed ratio {c.ratio}"
    assert 1.7 < c.ci_lower and c.ci_upper < 2.3, f"the interval of a clean 2x difference should be near 2, got [{c.ci_lower}, {c.ci_upper}]"
    assert c.significant and c.verdict.startswith("fast is 2.00× faster than slow"), c.verdict
    again = compare_samples(fast, slow, names=("fast", "slow"))
    assert (again.ci_lower, again.ci_upper) == (c.ci_lower, c.ci_upper), "a fixed seed must give the same interval"
    # direction: higher is better (throughput)
    t = compare_samples(fast, slow, names=("x", "y"), higher_is_better=True, better="higher throughput")
    assert t.significant and t.verdict.startswith("y is 2.00× higher throughput than x"), t.verdict
    # identical samples: no difference
    same = compare_samples(fast, list(fast))
    assert not same.significant and same.verdict.startswith("no significant difference"), same.verdict
    # a tiny but 'significant' shift is below the 2% that matters
    rng = np.random.default_rng(1)
    base = 1 + 0.001 * rng.standard_normal(400)
    tiny = compare_samples(base, base * 1.01)
    assert tiny.p_value < 0.05, "a consistent 1% shift over 400 samples is statistically detectable"
    assert not tiny.significant and "no significant difference" in tiny.verdict, \
        f"a 1% difference is below min_effect=2% and must not be reported, got: {tiny.verdict}"
    # overlapping noisy samples: not significant
    noisy = compare_samples([1.0, 1.5, 0.8, 1.2, 0.9], [1.1, 0.85, 1.4, 1.0, 1.3])
    assert not noisy.significant and noisy.p_value > 0.05, \
        f"overlapping samples: expected no significant difference (p > 0.05), got p = {noisy.p_value}"
    for bad_a, arg in (([1.0], "a"), ([1.0, float("nan")], "a")):
        try:
            compare_samples(bad_a, [1.0, 2.0])
        except ValueError as e:
            assert arg in str(e), f"the error should name the argument {arg!r}, got: {e}"
        else:
            raise AssertionError(f"compare_samples({bad_a}, ...) should raise ValueError")


if __name__ == "__main__":
    test_unit_compare_samples()

# %% [markdown]
# ### Comparing accuracies: a paired test
#
# When both models classified the *same* test images, the comparison is paired: what matters
# is the images on which they disagree. **McNemar's exact test** counts `n01` (A right, B
# wrong) and `n10` (A wrong, B right); if the models were equally good, each disagreement
# would go either way with probability ½, so `n10 ~ Binomial(n01 + n10, ½)`. This uses far
# more of the data's structure than comparing two accuracies as if they came from different
# images.

# %%
#| export
def mcnemar_exact(correct_a: Sequence[int | bool], correct_b: Sequence[int | bool]) -> dict[str, Any]:
    """McNemar's exact test on paired per-sample correctness (1 = right, 0 = wrong).

    Returns `{"a_only": n01, "b_only": n10, "p_value": p}`; with no disagreements p is 1.

    >>> mcnemar_exact([1, 1, 1, 0], [1, 0, 0, 0])
    {'a_only': 2, 'b_only': 0, 'p_value': 0.5}
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"correct_a, correct_b: expected two equal-length 1-D sequences of 0/1, "
                         f"got shapes {a.shape} and {b.shape}")
    a_only = int(np.sum(a & ~b))
    b_only = int(np.sum(~a & b))
    n = a_only + b_only
    p = 1.0 if n == 0 else float(_stats.binomtest(b_only, n, 0.5, alternative="two-sided").pvalue)
    return {"a_only": a_only, "b_only": b_only, "p_value": p}

# %% [markdown]
# ## The Pareto frontier
#
# With more than one metric there is rarely a single best model: the int8 model is smaller
# and faster, the float model a little more accurate. A model is **dominated** when another
# is at least as good on every metric and strictly better on one; nobody should deploy a
# dominated model. The models left, the **Pareto frontier**, are the real choices.
#
# ```
# accuracy ↑
#   0.99 |  ● A (2.0 ms)          A, B: on the frontier
#   0.98 |        ● B (1.0 ms)    C: dominated by B (slower AND less accurate)
#   0.97 |              ● C (1.5 ms)
#        +------------------------> latency (lower is better)
# ```
#
# **Your task.** Implement `pareto_front(points, directions)`.
#
# - *Approach:* for each model, check whether any other model dominates it; keep the ones no
#   one dominates, in the input order.
# - *Example:* `pareto_front({"A": {"lat": 2, "acc": .99}, "B": {"lat": 1, "acc": .98},
#   "C": {"lat": 1.5, "acc": .97}}, {"lat": "min", "acc": "max"})` is `["A", "B"]`.
# - *Hints:* turn every "max" metric into a "min" one by negating it; `a` dominates `b` when
#   `all(a <= b)` and `any(a < b)`. Two identical points do not dominate each other. Reject a
#   direction other than "min"/"max" and a model missing a metric with a `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "benchmarking-pareto", "solution": true, "schema_version": 3}
#| export
def pareto_front(points: dict[str, dict[str, float]], directions: dict[str, str]) -> list[str]:
    """The names of the non-dominated points, in input order.

    `points` maps a name to its metric values; `directions` maps each metric to "min" (lower
    is better) or "max" (higher is better).

    >>> pareto_front({"A": {"lat": 2, "acc": .99}, "B": {"lat": 1, "acc": .98},
    ...               "C": {"lat": 1.5, "acc": .97}}, {"lat": "min", "acc": "max"})
    ['A', 'B']
    """
    ### BEGIN SOLUTION
    if not directions:
        raise ValueError("directions: expected at least one metric, got none")
    for metric, d in directions.items():
        if d not in ("min", "max"):
            raise ValueError(f"directions: expected 'min' or 'max' for '{metric}', got {d!r}")
    vectors = {}
    for name, values in points.items():
        missing = [m for m in directions if m not in values or values[m] is None]
        if missing:
            raise ValueError(f"points: '{name}' has no value for {missing}")
        vectors[name] = np.array([values[m] if d == "min" else -values[m] for m, d in directions.items()], dtype=float)
    front = []
    for name, v in vectors.items():
        dominated = any(np.all(w <= v) and np.any(w < v) for other, w in vectors.items() if other != name)
        if not dominated:
            front.append(name)
    return front
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-benchmarking-pareto", "locked": true, "points": 10, "schema_version": 3}
def test_unit_pareto_front():
    pts = {"A": {"lat": 2.0, "acc": 0.99}, "B": {"lat": 1.0, "acc": 0.98}, "C": {"lat": 1.5, "acc": 0.97}}
    got = pareto_front(pts, {"lat": "min", "acc": "max"})
    assert got == ["A", "B"], f"C is slower and less accurate than B: expected ['A', 'B'], got {got}"
    # flipping a direction changes the answer
    assert pareto_front(pts, {"lat": "max", "acc": "max"}) == ["A"], "A has the highest of both"
    # ties: identical points do not dominate each other; equal on one metric, better on the other does
    tie = {"P": {"x": 1, "y": 1}, "Q": {"x": 1, "y": 1}, "R": {"x": 1, "y": 2}}
    assert pareto_front(tie, {"x": "min", "y": "min"}) == ["P", "Q"]
    # three metrics, checked against a brute-force count on a fixed grid of points
    rng = np.random.default_rng(7)
    many = {f"m{i}": {"a": float(rng.integers(0, 5)), "b": float(rng.integers(0, 5)), "c": float(rng.integers(0, 5))}
            for i in range(30)}
    dirs = {"a": "min", "b": "max", "c": "min"}
    sign = {"min": 1, "max": -1}
    def dominated(p, q):  # does q dominate p?
        better_eq = all(sign[d] * q[m] <= sign[d] * p[m] for m, d in dirs.items())
        strictly = any(sign[d] * q[m] < sign[d] * p[m] for m, d in dirs.items())
        return better_eq and strictly
    expected = [n for n, p in many.items() if not any(dominated(p, q) for o, q in many.items() if o != n)]
    assert pareto_front(many, dirs) == expected, "three-metric frontier differs from a brute-force check"
    assert pareto_front({"only": {"x": 3}}, {"x": "min"}) == ["only"]
    for bad_points, bad_dirs, arg in ((pts, {"lat": "lower"}, "directions"), ({"A": {"lat": 1}}, {"lat": "min", "acc": "max"}, "points")):
        try:
            pareto_front(bad_points, bad_dirs)
        except ValueError as e:
            assert arg in str(e), f"the error should name '{arg}', got: {e}"
        else:
            raise AssertionError(f"pareto_front with {bad_dirs} should raise ValueError")


if __name__ == "__main__":
    test_unit_pareto_front()

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
@dataclass(frozen=True)
class MetricInfo:
    "How to read one metric: its unit, whether lower or higher is better, and the word for 'better'."

    unit: str
    direction: str  # "min" or "max"
    better: str

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "max"


METRICS: dict[str, MetricInfo] = {
    "latency": MetricInfo("ms", "min", "faster"),
    "accuracy": MetricInfo("fraction", "max", "more accurate"),
    "memory": MetricInfo("MB", "min", "smaller in peak memory"),
    "model_size": MetricInfo("MB", "min", "smaller"),
    "parameter_memory": MetricInfo("MB", "min", "smaller in parameter memory"),
    "energy": MetricInfo("mJ", "min", "more energy-efficient"),
}


def _throughput_metric(batch_size: int) -> str:
    return f"throughput_bs{batch_size}"


def _labels_tensor(y: Any, arg: str) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
    if t.is_floating_point():
        if not torch.all(t == t.round()):
            raise ValueError(f"{arg}: expected integer class labels, got non-integer values")
        t = t.long()
    if t.ndim != 1:
        raise ValueError(f"{arg}: expected a 1-D tensor of class labels, got shape {tuple(t.shape)}")
    return t.long()


def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "data") and not isinstance(x, np.ndarray):  # TinyTorch-style Tensor
        x = x.data
    return torch.as_tensor(np.array(x))  # a copy: numpy scalars and read-only arrays become normal tensors


class _EvalData:
    "One evaluation set, normalised to batches of (x tensor, y tensor or None)."

    def __init__(self, data: Any, name: str, batch_size: int = 256):
        from torch.utils.data import DataLoader, Dataset

        self.name = name
        self._loader = None
        self._X = self._y = None
        if isinstance(data, DataLoader):
            self._loader = data
        elif isinstance(data, Dataset):
            self._loader = DataLoader(data, batch_size=batch_size, shuffle=False)
        elif isinstance(data, (tuple, list)) and 1 <= len(data) <= 2:
            self._X = _as_tensor(data[0])
            if len(data) == 2 and data[1] is not None:
                self._y = _labels_tensor(data[1], f"datasets['{name}'] labels")
                if len(self._y) != len(self._X):
                    raise ValueError(f"datasets['{name}']: {len(self._X)} inputs but {len(self._y)} labels")
        elif isinstance(data, (torch.Tensor, np.ndarray)):
            self._X = _as_tensor(data)
        else:
            raise TypeError(f"datasets: expected a DataLoader, a Dataset, or an (X, y) pair; "
                            f"'{name}' is a {type(data).__name__}")
        if self._X is not None and (self._X.ndim < 1 or len(self._X) == 0):
            raise ValueError(f"datasets['{name}']: expected at least one sample, got shape {tuple(self._X.shape)}")
        self.batch_size = batch_size

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
        if self._loader is not None:
            for item in self._loader:
                if isinstance(item, (tuple, list)):
                    x = _as_tensor(item[0])
                    y = _labels_tensor(item[1], f"datasets['{self.name}'] labels") if len(item) > 1 else None
                else:
                    x, y = _as_tensor(item), None
                yield x, y
            return
        for i in range(0, len(self._X), self.batch_size):
            yield self._X[i:i + self.batch_size], None if self._y is None else self._y[i:i + self.batch_size]

    @property
    def has_labels(self) -> bool:
        if self._loader is None:
            return self._y is not None
        for _, y in self.batches():
            return y is not None
        return False

    def first_samples(self, n: int) -> torch.Tensor:
        "Up to `n` samples from the start of the set (fewer if the set is smaller)."
        got = []
        count = 0
        for x, _ in self.batches():
            got.append(x[: n - count])
            count += len(got[-1])
            if count >= n:
                break
        if not got:
            raise ValueError(f"datasets['{self.name}']: the data set is empty")
        return torch.cat(got)


def _error_record(e: BaseException) -> dict[str, str]:
    return {"error_type": type(e).__name__, "message": str(e)}


def _output_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, (tuple, list)):
        raise ValueError(f"model output: expected one (batch, classes) tensor of scores, got a {type(out).__name__}")
    return _as_tensor(out).detach().cpu()


def _json_native(value: Any) -> Any:
    "Tuples -> lists, numpy scalars -> Python numbers, recursively (so results reload equal)."
    if isinstance(value, dict):
        return {str(k): _json_native(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_native(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (torch.device, torch.dtype, Path)):
        return str(value)
    return value


def _serialized_bytes(adapter: Any) -> tuple[int, str]:
    module = adapter.torch_module
    if module is not None:
        buf = io.BytesIO()
        if isinstance(module, torch.jit.ScriptModule):
            torch.jit.save(module, buf)
            return len(buf.getvalue()), "bytes of torch.jit.save(model)"
        from tinytorch.benchmarking.optimize import state_dict_bytes
        return state_dict_bytes(module), "bytes of torch.save(model.state_dict())"
    arrays = {name: np.asarray(a) for name, a in adapter.named_parameter_arrays()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return len(buf.getvalue()), "bytes of numpy.savez(parameters)"

# %%
#| export
def _split_runs(total: int, rounds: int) -> list[int]:
    return [total // rounds + (1 if i < total % rounds else 0) for i in range(rounds)]


def _merge_timing_metadata(metas: list[dict[str, Any]], n_values: int) -> dict[str, Any]:
    merged = dict(metas[0])
    merged.update(
        samples=n_values,
        rounds=len(metas),
        calls_per_sample=[m["calls_per_sample"] for m in metas],
        timed_in_blocks=any(m["timed_in_blocks"] for m in metas),
        warmup_calls=sum(m["warmup_calls"] for m in metas),
        timer_overhead_fraction=max(m["timer_overhead_fraction"] for m in metas),
        total_seconds=sum(m["total_seconds"] for m in metas),
        stop_reason=sorted({m["stop_reason"] for m in metas}),
    )
    return merged


class Benchmark:
    """Measure several models under one protocol: latency, accuracy, memory, throughput.

    - `models`: a list of torch modules, TinyTorch-style objects (`forward` + `parameters`) or
      callables, or a dict `{name: model}`. Names come from `names`, the dict keys, or each
      model's `.name` (else its class name); they must be unique.
    - `datasets`: labelled evaluation sets (a `DataLoader`, a `Dataset`, an `(X, y)` pair), or a
      list of them; `dataset_names` names them. Without labels, accuracy is unavailable.
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
        self.datasets = self._normalise_datasets(datasets, dataset_names, batch_size)
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

    @staticmethod
    def _normalise_datasets(datasets: Any, dataset_names: Sequence[str] | None, batch_size: int) -> list[_EvalData]:
        from torch.utils.data import DataLoader, Dataset

        if datasets is None:
            items = []
        elif isinstance(datasets, (DataLoader, Dataset, torch.Tensor, np.ndarray)):
            items = [datasets]
        elif (isinstance(datasets, tuple) and len(datasets) == 2
              and all(isinstance(d, (torch.Tensor, np.ndarray)) for d in datasets)):
            items = [datasets]  # a single (X, y) pair
        elif isinstance(datasets, (list, tuple)):
            items = list(datasets)
        else:
            raise TypeError(f"datasets: expected a DataLoader, a Dataset, an (X, y) pair or a list of them, "
                            f"got {type(datasets).__name__}")
        if dataset_names is not None and len(dataset_names) != len(items):
            raise ValueError(f"dataset_names: expected one name per dataset ({len(items)}), got {len(dataset_names)}")
        names = list(dataset_names) if dataset_names is not None else [
            getattr(d, "name", None) if isinstance(getattr(d, "name", None), str) else f"dataset{i}"
            for i, d in enumerate(items)]
        if len(set(names)) != len(names):
            raise ValueError(f"dataset_names: expected unique names, got {names}")
        return [_EvalData(d, n, batch_size) for d, n in zip(items, names)]

    # ----- bookkeeping -----
    def _store(self, metric: str, name: str, result: BenchmarkResult) -> None:
        result.metadata = _json_native(result.metadata)
        self.results.setdefault(metric, {})[name] = result
        self.unavailable.get(metric, {}).pop(name, None)
        self.failures.get(metric, {}).pop(name, None)

    def _fail(self, metric: str, name: str, e: BaseException) -> None:
        if isinstance(e, NotImplementedError) and str(e).startswith("not yet implemented"):
            raise e  # an unfinished course exercise, not a failed measurement: say so, loudly
        self.failures.setdefault(metric, {})[name] = _error_record(e)
        self.results.get(metric, {}).pop(name, None)

    def _not_available(self, metric: str, name: str, reason: str) -> None:
        self.unavailable.setdefault(metric, {})[name] = reason
        self.results.get(metric, {}).pop(name, None)

    def _input(self, input_shape: Sequence[int] | None) -> torch.Tensor:
        "The one input every model is timed on: the first dataset sample, or a seeded tensor of `input_shape`."
        if input_shape is not None:
            try:
                shape = tuple(int(d) for d in input_shape)
            except (TypeError, ValueError):
                raise TypeError(f"input_shape: expected a sequence of positive ints such as (1, 1, 8, 8), got {input_shape!r}") from None
            if not shape or any(d < 1 for d in shape):
                raise ValueError(f"input_shape: expected positive ints such as (1, 1, 8, 8), got {input_shape!r}")
            g = torch.Generator().manual_seed(self.seed)
            x, source = torch.randn(*shape, generator=g), f"seeded standard normal (seed {self.seed})"
        elif self.datasets:
            x, source = self.datasets[0].first_samples(1), f"first sample of dataset '{self.datasets[0].name}'"
        else:
            raise ValueError("input_shape: no dataset to take the input from; pass input_shape=(1, ...)")
        self.input_shape, self.input_source = tuple(x.shape), source
        return x

    def _timed_rounds(self, metric: str, x: torch.Tensor) -> dict[str, tuple[list[float], dict[str, Any]]]:
        "Time every model on `x` in interleaved rounds; failures are recorded, not raised."
        values: dict[str, list[float]] = {n: [] for n in self.names}
        metas: dict[str, list[dict[str, Any]]] = {n: [] for n in self.names}
        failed: set[str] = set()
        for k in _split_runs(self.measurement_runs, self.rounds):
            for name in self.names:
                if name in failed:
                    continue
                try:
                    s = time_model(self.adapters[name], x, warmup=self.warmup_runs, samples=k,
                                   seed=self.seed, threads=self.threads)
                except Exception as e:  # the model raised: a failed measurement, recorded with its error
                    self._fail(metric, name, e)
                    failed.add(name)
                    continue
                values[name].extend(s.per_call_ms)
                metas[name].append(s.metadata())
        return {n: (values[n], _merge_timing_metadata(metas[n], len(values[n]))) for n in self.names if n not in failed}

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
            meta.update(input_shape=list(x.shape), input_source=self.input_source, interleaved=self.rounds > 1,
                        method="measured: time_model (perf_counter_ns, calibrated blocks, interleaved rounds)")
            self._store("latency", name, BenchmarkResult("latency", ms, unit="ms", metadata=meta))
            out[name] = self.results["latency"][name]
        return out

    def run_accuracy_benchmark(self) -> dict[str, BenchmarkResult]:
        """Top-1 accuracy per model over every labelled sample of every labelled dataset.

        `values` holds one accuracy per dataset; `metadata` the correct and total counts, the
        Wilson 95% interval, per-dataset figures and the per-sample correctness (for paired
        tests). Datasets without labels are skipped (and named); with none, accuracy is
        unavailable. A model whose output does not fit the labels is a recorded failure.
        """
        labelled = [d for d in self.datasets if d.has_labels]
        skipped = [d.name for d in self.datasets if not d.has_labels]
        if not labelled:
            reason = ("no labelled dataset: accuracy needs (X, y) data" +
                      (f"; {skipped} have no labels" if skipped else "; no dataset was given"))
            for name in self.names:
                self._not_available("accuracy", name, reason)
            return {}
        out = {}
        for name, a in self.adapters.items():
            try:
                per_dataset, per_sample = [], {}
                for d in labelled:
                    flags = []
                    with a.inference():
                        for x, y in d.batches():
                            scores = _output_tensor(a.forward(a.to_input(x)))
                            if scores.ndim != 2 or scores.shape[0] != len(y):
                                raise ValueError(
                                    f"model '{name}' on dataset '{d.name}': expected output of shape "
                                    f"({len(y)}, classes) for top-1 accuracy, got {tuple(scores.shape)}")
                            if len(y) and (int(y.min()) < 0 or int(y.max()) >= scores.shape[1]):
                                raise ValueError(
                                    f"dataset '{d.name}': labels range over [{int(y.min())}, {int(y.max())}] but model "
                                    f"'{name}' outputs {scores.shape[1]} classes; labels do not match the model's output")
                            flags.append((scores.argmax(dim=1) == y.cpu()).to(torch.int8))
                    correct_flags = torch.cat(flags).tolist()
                    k, n = int(sum(correct_flags)), len(correct_flags)
                    per_dataset.append({"name": d.name, "correct": k, "count": n, "accuracy": k / n,
                                        "wilson_95": list(wilson_interval(k, n))})
                    per_sample[d.name] = correct_flags
            except Exception as e:  # wrong output, labels out of range, or the model raised
                self._fail("accuracy", name, e)
                continue
            k = sum(p["correct"] for p in per_dataset)
            n = sum(p["count"] for p in per_dataset)
            meta = {"method": "measured: top-1 over every labelled sample", "correct": k, "count": n,
                    "accuracy": k / n, "wilson_95": list(wilson_interval(k, n)), "datasets": per_dataset,
                    "skipped_unlabelled_datasets": skipped, "per_sample_correct": per_sample}
            self._store("accuracy", name, BenchmarkResult("accuracy", [p["accuracy"] for p in per_dataset],
                                                          unit="fraction", metadata=meta))
            out[name] = self.results["accuracy"][name]
        return out

    def run_memory_benchmark(self, input_shape: Sequence[int] | None = None) -> dict[str, BenchmarkResult]:
        """Memory per model through the Profiler, plus the serialized size.

        Stores three metrics: "memory" (peak inference memory, MB, with every field of
        `Profiler.measure_memory` in metadata), "parameter_memory" (MB, with the parameter
        count) and "model_size" (bytes of the serialized model, in MB). Returns the "memory"
        results. Plain callables have no visible parameters: unavailable, with the reason.
        """
        from tinytorch.profiling.profiler import Profiler

        x = self._input(input_shape)
        shape = tuple(x.shape)
        profiler = Profiler()
        out = {}
        for name, a in self.adapters.items():
            if a.kind == "callable":
                reason = "a plain callable: its parameters and memory cannot be seen (pass an nn.Module)"
                for metric in ("memory", "parameter_memory", "model_size"):
                    self._not_available(metric, name, reason)
                continue
            try:
                size_bytes, size_method = _serialized_bytes(a)
                self._store("model_size", name, BenchmarkResult(
                    "model_size", [size_bytes / 2**20], unit="MB",
                    metadata={"bytes": size_bytes, "method": f"measured: {size_method}"}))
            except Exception as e:
                self._fail("model_size", name, e)
            try:
                mem = dict(profiler.measure_memory(a.model, shape))
                params = int(profiler.count_parameters(a.model))
            except Exception as e:  # the model raised inside the Profiler
                self._fail("memory", name, e)
                self._fail("parameter_memory", name, e)
                continue
            meta = {"method": "measured: Profiler.measure_memory", "input_shape": list(shape),
                    "parameters": params, "profiler": mem}
            for metric, key in (("memory", "peak_memory_mb"), ("parameter_memory", "parameter_memory_mb")):
                value = mem.get(key)
                if value is None:
                    self._not_available(metric, name, f"Profiler.measure_memory gave no {key}: {mem.get('methods')}")
                else:
                    self._store(metric, name, BenchmarkResult(metric, [float(value)], unit="MB", metadata=dict(meta)))
            if "memory" in self.results and name in self.results["memory"]:
                out[name] = self.results["memory"][name]
        return out

    def run_throughput_benchmark(self, batch_sizes: Sequence[int] = (1, 8, 32)) -> dict[str, dict[int, BenchmarkResult]]:
        """Samples per second per model at each batch size (one value per timed sample).

        The batch is the first `b` samples of the first dataset, or a seeded standard-normal
        batch of the same sample shape when the data set is smaller (recorded as such).
        Stored as metrics "throughput_bs{b}".
        """
        sizes = list(batch_sizes)
        if not sizes or any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1 for b in sizes):
            raise ValueError(f"batch_sizes: expected positive ints such as (1, 8, 32), got {batch_sizes!r}")
        if self.datasets:
            base = self.datasets[0].first_samples(max(sizes))
        elif self.input_shape is not None:
            base = self._input(self.input_shape)
        else:
            raise ValueError("batch_sizes: no dataset and no input shape to build batches from; give a dataset "
                             "or run run_latency_benchmark(input_shape=...) first")
        out: dict[str, dict[int, BenchmarkResult]] = {}
        for b in sizes:
            metric = _throughput_metric(int(b))
            self.metric_info[metric] = MetricInfo("samples/s", "max", f"higher in throughput (batch {b})")
            if len(base) >= b:
                xb, source = base[:b], "dataset samples" if self.datasets else self.input_source
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
        """One row per model for `metric`: model, metric, unit, status, median, mean, std,
        ci_lower, ci_upper, count, and the median's interval.

        `ci_lower/ci_upper` is the Student-t interval of the mean, except for accuracy, where it
        is the Wilson 95% interval and `count` is the number of labelled samples. Models without
        the metric appear with status "unavailable" or "failed" and the reason in `note`.
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
                method = r.metadata.get("method", "measured")
                row.update(status="estimated" if str(method).startswith("estimated") else "measured", method=method,
                           median=r.median, mean=r.mean, std=r.std, ci_lower=r.ci_lower, ci_upper=r.ci_upper,
                           count=r.count, unit=r.unit)
                if r.count >= 2:
                    row["median_ci_lower"], row["median_ci_upper"] = (float(v) for v in r.median_ci())
                if metric == "accuracy":
                    row["median"] = row["mean"] = r.metadata["accuracy"]
                    row["ci_lower"], row["ci_upper"] = r.metadata["wilson_95"]
                    row["count"] = r.metadata["count"]
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
        """Compare `model_b` against `model_a` on one measured metric.

        - Repeated measurements (latency, throughput): `compare_samples`, i.e. ratio of
          medians b/a with a bootstrap interval (seeded), Mann-Whitney U, verdict.
        - Accuracy: McNemar's exact test on the per-sample correctness of the samples both saw;
          `ratio` is accuracy_b / accuracy_a (paired bootstrap interval) and a difference must
          reach `min_effect` in absolute accuracy (0.02 = 2 points).
        - Single exact values (memory, model size): the ratio, no test; a difference below
          `min_effect` is none.

        >>> # b.compare("fp32", "int8")  ->  Comparison(..., verdict="int8 is 1.80× faster than fp32 (p < 0.001)")
        """
        ra, rb = self._result_for(metric, model_a, "model_a"), self._result_for(metric, model_b, "model_b")
        info = self.metric_info.get(metric, MetricInfo(ra.unit, "min", "better"))
        if metric == "accuracy":
            return self._compare_accuracy(model_a, model_b, ra, rb, alpha, min_effect, n_boot, seed)
        if ra.count >= 2 and rb.count >= 2:
            return compare_samples(ra.values, rb.values, names=(model_a, model_b), metric=metric,
                                   higher_is_better=info.higher_is_better, better=info.better, alpha=alpha,
                                   min_effect=min_effect, n_boot=n_boot, seed=seed)
        ratio = rb.median / ra.median if ra.median else math.inf
        c = Comparison(model_a, model_b, metric, ra.median, rb.median, ratio, None, None, None,
                       significant=abs(ratio - 1) >= min_effect, test="exact values (single measurement each, no test)",
                       n_a=ra.count, n_b=rb.count, alpha=alpha, min_effect=min_effect,
                       higher_is_better=info.higher_is_better)
        c.verdict = (_verdict_text(c, info.better).replace("(no test)", "(single measurement each)") if c.significant
                     else f"no difference (ratio {ratio:.3f}, below {min_effect:.0%})")
        return c

    def _compare_accuracy(self, name_a: str, name_b: str, ra: BenchmarkResult, rb: BenchmarkResult,
                          alpha: float, min_effect: float, n_boot: int, seed: int) -> Comparison:
        pa, pb = ra.metadata["per_sample_correct"], rb.metadata["per_sample_correct"]
        shared = [d for d in pa if d in pb and len(pa[d]) == len(pb[d])]
        if not shared:
            raise ValueError(f"model_b: '{name_a}' and '{name_b}' share no evaluated dataset; a paired accuracy test needs the same samples")
        ca = np.array([v for d in shared for v in pa[d]], dtype=float)
        cb = np.array([v for d in shared for v in pb[d]], dtype=float)
        acc_a, acc_b = float(ca.mean()), float(cb.mean())
        test = mcnemar_exact(ca, cb)
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, ca.size, size=(n_boot, ca.size))
        boot_a, boot_b = ca[idx].mean(axis=1), cb[idx].mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = boot_b / boot_a
        ratios = ratios[np.isfinite(ratios)]
        lo, hi = (float(v) for v in np.percentile(ratios, [100 * alpha / 2, 100 * (1 - alpha / 2)])) if ratios.size else (None, None)
        diff = acc_b - acc_a
        significant = bool(test["p_value"] < alpha and abs(diff) >= min_effect)
        c = Comparison(name_a, name_b, "accuracy", acc_a, acc_b, acc_b / acc_a if acc_a else math.inf, lo, hi,
                       test["p_value"], significant, test="McNemar exact (paired per-sample correctness)",
                       n_a=int(ca.size), n_b=int(cb.size), alpha=alpha, min_effect=min_effect,
                       bootstrap_resamples=n_boot, seed=seed, higher_is_better=True,
                       details={"difference": diff, "a_only_correct": test["a_only"], "b_only_correct": test["b_only"],
                                "datasets": shared})
        if significant:
            winner, loser = (name_b, name_a) if diff > 0 else (name_a, name_b)
            c.verdict = (f"{winner} is {abs(diff) * 100:.1f} points more accurate than {loser} "
                         f"(McNemar {_format_p(test['p_value'])})")
        else:
            c.verdict = (f"no significant difference ({abs(diff) * 100:.1f} points, McNemar {_format_p(test['p_value'])}; "
                         f"{test['a_only']} vs {test['b_only']} disagreements)")
        return c

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
        assert r.metadata["correct"] == 4 and r.metadata["count"] == 6, f"hand count is 4 of 6, got {r.metadata['correct']} of {r.metadata['count']}"
        assert abs(r.median - 4 / 6) < 1e-12
        assert r.metadata["wilson_95"] == list(wilson_interval(4, 6))
        assert r.metadata["per_sample_correct"]["dataset0"] == [1, 1, 1, 0, 1, 0]
    # unlabelled data: accuracy is unavailable with a reason, latency still works
    b = Benchmark([lin], [(X,)], names=["eye"], measurement_runs=2)
    assert b.run_accuracy_benchmark() == {} and "no labelled dataset" in b.unavailable["accuracy"]["eye"]
    assert b.run_latency_benchmark()["eye"].count == 2
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
    assert b.failures["latency"]["broken"] == {"error_type": "RuntimeError", "message": "kaput"}
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
        """Energy per inference (mJ): measured from a hardware counter, or estimated from the
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
            values = [v * 1e3 for v in m.window_joules_per_call] or [m.joules_per_call * 1e3]
            meta = m.to_dict()
            meta["method"] = m.method
            b._store("energy", name, BenchmarkResult("energy", values, unit="mJ", metadata=meta))
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
                    comps.append(self.benchmark.compare(baseline, name, metric))
        self.comparisons = comps
        return comps

    def compare(self, model_a: str, model_b: str, metric: str = "latency", **options: Any) -> Comparison:
        "See `Benchmark.compare`."
        return self.benchmark.compare(model_a, model_b, metric, **options)

    def compare_models(self, metric: str = "latency") -> pd.DataFrame:
        "See `Benchmark.compare_models`."
        return self.benchmark.compare_models(metric)

    def pareto_frontier(self, metrics: Sequence[str] = ("latency", "accuracy")) -> list[str]:
        """The models no other model beats on every one of `metrics` (each metric's direction
        from its definition; values are medians, accuracy the pooled top-1). Models without a
        measured value for some metric are left out, and named in `self.pareto["excluded"]`."""
        metrics = list(metrics)
        unknown = [m for m in metrics if m not in self.benchmark.metric_info]
        if not metrics or unknown:
            raise ValueError(f"metrics: expected names from {sorted(self.benchmark.metric_info)}, got {metrics}")
        directions = {m: self.benchmark.metric_info[m].direction for m in metrics}
        points, excluded = {}, {}
        for name in self.names:
            vals = {}
            for m in metrics:
                r = self.results.get(m, {}).get(name)
                if r is None:
                    excluded[name] = f"no measured {m}"
                    break
                vals[m] = r.metadata["accuracy"] if m == "accuracy" else r.median
            else:
                points[name] = vals
        front = pareto_front(points, directions) if points else []
        self.pareto = {"metrics": metrics, "directions": directions, "front": front, "excluded": excluded,
                       "points": points}
        return front

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
        return _json_native({
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
        assert abs(energy.median - results["latency"]["small"].median * 10.0) < 1e-9, "estimate = latency (ms) x 10 W = mJ"
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

# %% [markdown]
# ## Everything together

# %%
def test_module():
    test_unit_benchmark_result()
    test_unit_precise_timer()
    test_unit_wilson_interval()
    test_unit_compare_samples()
    test_unit_pareto_front()
    test_unit_benchmark_accuracy()
    test_unit_benchmark_latency_and_failures()
    test_unit_benchmark_suite()
    print("Module 19 benchmarking: all tests pass")


if __name__ == "__main__":
    test_module()
