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
import math
import statistics
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterator, Sequence

import numpy as np
from scipy import stats as _stats

from tinytorch.profiling.timing import median_ci

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
    assert (r.min, r.max) == (1.0, 5.0)
    assert abs(r.p90 - 4.6) < 1e-12 and abs(r.p99 - 4.96) < 1e-12, "percentiles use linear interpolation"
    assert abs(r.iqr - 2.0) < 1e-12, f"iqr: expected p75 - p25 = 2.0, got {r.iqr}"
    assert abs(r.cv - statistics.stdev(values) / 3.0) < 1e-12
    # Student-t, not z = 1.96: t(0.975, 4) = 2.776
    half = 2.7764451051977987 * statistics.stdev(values) / math.sqrt(5)
    assert r.ci_lower is not None and abs(r.ci_lower - (3 - half)) < 1e-9, \
        f"ci_lower: expected {3 - half:.4f} from Student's t with 4 degrees of freedom, got {r.ci_lower}"
    assert abs(r.ci_upper - (3 + half)) < 1e-9
    # outliers beyond 1.5 IQR
    assert BenchmarkResult("x", [1, 1.1, 1.2, 1.1, 1.0, 9.0]).outliers == 1
    assert r.outliers == 0
    # a single value: no interval, no spread
    one = BenchmarkResult("x", [2.5])
    assert one.std == 0.0 and one.ci_lower is None and one.ci_upper is None
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
    assert total == 199999 * 200000 // 2
    assert isinstance(t.elapsed_ns, int), f"elapsed_ns should be an int of nanoseconds, got {t.elapsed_ns!r}"
    assert 0 < t.elapsed_ns <= outer, "the timed block cannot take longer than the code around it"
    assert abs(t.elapsed_ms - t.elapsed_ns / 1e6) < 1e-9
    # exceptions propagate and the time is still recorded
    try:
        with precise_timer() as failed:
            raise KeyError("boom")
    except KeyError:
        pass
    else:
        raise AssertionError("precise_timer must not swallow exceptions")
    assert failed.elapsed_ns is not None and failed.elapsed_ns >= 0


if __name__ == "__main__":
    test_unit_precise_timer()
