# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19: Benchmarking — 1. Results, the one currency
#
# Every optimisation ends with a claim (*faster*, *smaller*, *accuracy barely moved*). A
# benchmark is the experiment that tests it: a workload, a protocol (warmup, repetitions,
# threads, device), measurements with an uncertainty, and a conclusion that survives it. This
# notebook builds the currency every later one pays in: three result kinds, each knowing its
# statistics and how to compare itself with another:
#
# | kind | example | estimate | interval | comparison |
# |---|---|---|---|---|
# | `BenchmarkResult` (repeated samples) | latency, throughput | median (and mean) | Student-t for the mean, order statistics for the median | ratio of medians, bootstrap interval, Mann–Whitney U |
# | `ProportionResult` (k of n) | top-1 accuracy | k / n | Wilson | difference; McNemar exact, paired bootstrap |
# | `CountResult` (exact) | bytes, MACs, parameters | the value | zero width (no sampling error) | the ratio, effect floor only |
#
# One resampler (`bootstrap_interval`) and one significance rule (`is_significant`: p < α
# **and** an effect above a stated floor) serve them all, so "significant" means the same
# thing in every table, report and leaderboard; and every comparison ends in one of three
# verdicts: different, equivalent (shown to be within the floor), or inconclusive (neither, and why).
#
# ```
# timing core (Module 15) ──> BenchmarkResult ─┐
# top-1 evaluation ─────────> ProportionResult ├─> compare_results() ─> Comparison (ratio, CI, p, verdict)
# byte / MAC counters ──────> CountResult ─────┘                    └──> Pareto set with ties (suite notebook)
# ```
#
# The code ends up in `tinytorch.benchmarking.results`; the capstone's names are re-exported
# by `tinytorch.benchmarking.benchmark`.

# %%
#| default_exp benchmarking.results

# %%
#| export
from __future__ import annotations

import contextlib
import io
import json
import math
import operator
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import torch
from scipy import stats as _stats

from tinytorch.profiling.timing import median_ci

# %%
# The tests' helpers (nothing to fill in here): `grading_rng` draws their random inputs (random seed 0 here,
# a fresh one per grading run), `expect_error` checks an error and its message, `in_student_process` runs a
# check in the process that runs your code (this kernel, here).
import os
import re
import statistics  # the tests' reference statistics
import tempfile

import numpy as np


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."


def in_student_process(fn, *args, **kwargs):
    """Test helper: call `fn(*args, **kwargs)` in the process that runs your code. In this notebook
    that is this kernel; when your work is graded, the tests run in a process of their own and call
    your code in yours, so a test that looks at what your code did to an object asks through this."""
    return fn(*args, **kwargs)


def expect_error(fn, *args, name: str | None = None, error: type = ValueError, says: str | None = None, **kwargs) -> None:
    """Test helper: `fn(*args, **kwargs)` must raise `error` whose message starts with what it is about,
    the argument `name`, before the first colon (`values: expected ...`; several arguments:
    `correct_a, correct_b: ...`); with `says`, the message must also contain that word (e.g. "shape"); a
    library's own error (`json.dumps` refusing NaN) is checked by `says` alone."""
    try:
        fn(*args, **kwargs)
    except error as e:
        msg = str(e).strip("'\"")  # a KeyError's message comes quoted
        subject = msg.partition(":")[0] if ":" in msg else ""
        assert name is None or any(re.match(rf"{re.escape(name)}\b", part.strip()) for part in subject.split(",")), (
            f"{fn.__name__}{args}: the error message should start with the argument it is about, {name!r}, "
            f"then a colon ('{name}: expected ...'), got: {e}")
        assert says is None or says in msg, f"{fn.__name__}{args}: the error should say {says!r}, got: {e}"
    else:
        raise AssertionError(f"{fn.__name__}{args} {kwargs or ''}: expected a {error.__name__} naming {name or says!r}, got none")

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
# The mean (1.39 ms) is pulled up by one interruption; the median (1.205 ms) is not. So latency
# is summarised by the **median and percentiles** (p90, p99: the tail a user feels); the **mean
# and its interval** `mean ± t(0.975, n-1) · s / √n` use Student's t, not the normal 1.96: with
# 5 samples t is 2.78, so a z-interval would claim 30% more certainty than the data give.
#
# | statistic | meaning |
# |---|---|
# | `median`, `p50/p90/p95/p99` | typical and tail values (linear interpolation) |
# | `mean`, `std` | average and sample standard deviation (n−1) |
# | `ci_lower`, `ci_upper` | Student-t 95% interval for the mean (`None` for a single value); the course API's names |
# | `median_ci_lower`, `median_ci_upper` | the median's 95% interval (order statistics, Module 15's `median_ci`): the headline's interval, the one every rule decides on (written for you) |
# | `iqr`, `cv` | p75 − p25 (a robust spread); std / mean (relative noise, `None` when the mean is 0) |
# | `outliers` | how many values (an `int`) lie beyond 1.5 × IQR from the quartiles |
#
# **Errors in this module say what they are about first.** Bad input is a `ValueError` whose
# message starts with the argument's name and a colon, then what was expected:
# `values: expected at least one measurement, got none`. The tests check exactly that (the
# argument's name before the first colon), so `invalid sample` does not pass for an argument `a`.
#
# **Your task (medium, 10 points).** Complete `BenchmarkResult.__post_init__` so it validates the
# values and computes every statistic in the table.
#
# - *Approach:* a float numpy array; an empty list, NaN or infinity is a `ValueError` starting `values:`.
# - *Edge cases:* a single value has `std == 0.0` and no interval (`ci_lower` and `ci_upper` are `None`);
#   `cv` is `None` when the mean is 0; `outliers` is a count (an `int`), not the values themselves.
# - *Example:* for `[1.0, 2.0, 3.0, 4.0, 5.0]`: `median == 3.0`, `p90 == 4.6`, `iqr == 2.0`, interval ≈ (1.04, 4.96);
#   for the ten readings above, `median == 1.205` while `mean ≈ 1.388`, and `outliers == 1`.
# - *Hints:* `np.percentile`, `np.median`, `scipy.stats.t.ppf(0.975, n - 1)`, `arr.std(ddof=1)` (numpy divides
#   by n unless told `ddof=1`).

# %% nbgrader={"grade": false, "grade_id": "benchmark-result", "solution": true, "schema_version": 3}
#| export
@dataclass
class BenchmarkResult:
    """Raw measurements of one metric for one model, with the statistics that describe them.

    `values` are kept as given (latency: ms per call, one per timed sample), so a result can be
    saved, loaded and re-analysed; `metadata` records the conditions.

    >>> BenchmarkResult("latency", [1.0, 2.0, 3.0, 4.0, 5.0], unit="ms").p90
    4.6
    """

    metric_name: str
    values: list[float]
    unit: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    confidence: float = 0.95

    kind = "samples"  # repeated samples of a noisy quantity; subclasses: "proportion", "count"

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

    min_val = property(lambda self: self.min, doc="The course API's name for `min`.")
    max_val = property(lambda self: self.max, doc="The course API's name for `max`.")

    @property
    def method(self) -> str:
        "How the values were obtained (`metadata['method']`), e.g. 'measured: …' or 'estimated: …'."
        return str(self.metadata.get("method", "measured"))

    @property
    def ci_method(self) -> str:
        return (f"Student-t {self.confidence:.0%} interval of the mean" if self.count > 1
                else "none: a single value has no interval")

    def median_ci(self) -> tuple[float, float]:
        """The headline's interval: for samples the median's (order statistics, distribution-free), Wilson's for a
        proportion, the value itself for a count. `decide` and every rule decide on it."""
        return median_ci(self.values, self.confidence)

    median_ci_lower = property(lambda self: self.median_ci()[0], doc="The headline (median) interval's lower end.")
    median_ci_upper = property(lambda self: self.median_ci()[1], doc="The headline (median) interval's upper end.")

    def compare(self, other: "BenchmarkResult", **options: Any) -> "Comparison":
        "Compare `other` against this result (see `compare_results`)."
        return compare_results(self, other, **options)

    def to_dict(self) -> dict[str, Any]:
        "Every raw value, every statistic and the metadata, JSON-ready."
        d = {"kind": self.kind, "metric_name": self.metric_name, "unit": self.unit, "values": list(self.values),
             "confidence": self.confidence, "metadata": dict(self.metadata)}
        d.update({k: getattr(self, k) for k in STATISTICS})
        d["median_ci_lower"], d["median_ci_upper"] = self.median_ci()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchmarkResult":
        """Rebuild a result from `to_dict()` output; statistics are recomputed from the raw values.
        Called on `BenchmarkResult`, it returns the kind the dict names (samples, proportion, count)."""
        missing = [k for k in ("metric_name", "values") if k not in d]
        if missing:
            raise ValueError(f"d: missing keys {missing}; expected the output of BenchmarkResult.to_dict()")
        kinds = {c.kind: c for c in (BenchmarkResult, *BenchmarkResult.__subclasses__())}
        target = kinds.get(d.get("kind", "samples"), cls) if cls is BenchmarkResult else cls
        return target(d["metric_name"], list(d["values"]), unit=d.get("unit", ""),
                      metadata=dict(d.get("metadata", {})), confidence=d.get("confidence", 0.95))

    def __str__(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return (f"{self.metric_name}: median {self.median:.4g}{u} "
                f"(p90 {self.p90:.4g}, mean {self.mean:.4g} ± {self.std:.4g}, n={self.count})")


STATISTICS = ("count", "mean", "std", "median", "min", "max", "p50", "p90", "p95", "p99",
              "iqr", "cv", "outliers", "ci_lower", "ci_upper")

# %%
if __name__ == "__main__":  # the ten readings above: the median ignores the interruption, the outlier count flags it
    readings = [1.21, 1.19, 1.22, 1.20, 3.05, 1.21, 1.18, 1.20, 1.23, 1.19]
    r = BenchmarkResult("latency", readings, unit="ms")
    print(r)
    print(f"95% CI of the mean: [{r.ci_lower:.3f}, {r.ci_upper:.3f}] ms; outliers: {r.outliers}; cv: {r.cv:.1%}")

# %% nbgrader={"grade": true, "grade_id": "test-benchmark-result", "locked": true, "points": 10, "schema_version": 3}
def test_unit_benchmark_result():
    # the ten readings above first: one interruption pulls the mean up, but not the median
    readings = [1.21, 1.19, 1.22, 1.20, 3.05, 1.21, 1.18, 1.20, 1.23, 1.19]
    s = BenchmarkResult("latency", readings, unit="ms")
    assert isinstance(s.median, float) and abs(s.median - 1.205) < 1e-9, (
        f"median of the ten readings: expected 1.205 (the middle of the sorted values), got {s.median}"
        + (" -- that is the mean, which the one interruption pulls up"
           if isinstance(s.median, float) and abs(s.median - statistics.fmean(readings)) < 1e-9 else "")
        + (" -- a value read off one rank (off by one, or not interpolated): with ten values the median lies "
           "halfway between the 5th and 6th sorted values" if s.median in readings else ""))
    assert abs(s.mean - statistics.fmean(readings)) < 1e-9, (
        f"mean of the ten readings: expected {statistics.fmean(readings):.4f}, got {s.mean}"
        + (" -- that is the median" if abs(s.mean - 1.205) < 1e-9 else ""))
    assert abs(s.p90 - 1.412) < 1e-9, (
        f"p90 of the ten readings: expected 1.412 (linear interpolation between the 9th and 10th sorted values), "
        f"got {s.p90}" + (" -- a percentile read off one rank (off by one, or not interpolated)"
                          if s.p90 in (1.23, 3.05) else ""))
    assert abs(s.p50 - 1.205) < 1e-9, f"p50 is the median, 1.205, got {s.p50}" + (" -- a percentile read off one rank, not interpolated" if s.p50 in (1.20, 1.21) else "")
    assert isinstance(s.outliers, int) and s.outliers == 1, (
        f"outliers: expected the count 1 (an int: 3.05 lies beyond p75 + 1.5 IQR), got {s.outliers!r}")
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    r = BenchmarkResult("latency", values, unit="ms")
    assert r.count == 5, f"count: expected 5, got {r.count}"
    assert r.mean == 3.0 and r.median == 3.0, "mean and median of 1..5 are both 3"
    assert abs(r.std - statistics.stdev(values)) < 1e-12, (
        f"std: expected the sample standard deviation {statistics.stdev(values):.6f} (divides by n-1), got {r.std}"
        + (" -- that is the population std (it divides by n: numpy's default, ddof=0)" if abs(r.std - statistics.pstdev(values)) < 1e-12 else ""))
    assert (r.min, r.max) == (1.0, 5.0), f"min/max: expected (1.0, 5.0), got ({r.min}, {r.max})"
    assert abs(r.p90 - 4.6) < 1e-12 and abs(r.p99 - 4.96) < 1e-12, (
        f"p90, p99 of 1..5: expected 4.6 and 4.96 (linear interpolation between the closest ranks, numpy's "
        f"default), got {r.p90} and {r.p99}"
        + (" -- a percentile read off one rank (off by one, or not interpolated)" if r.p90 in (4.0, 5.0) else ""))
    assert abs(r.iqr - 2.0) < 1e-12, f"iqr: expected p75 - p25 = 2.0, got {r.iqr}"
    assert r.cv is not None and abs(r.cv - statistics.stdev(values) / 3.0) < 1e-12, \
        f"cv: expected std / mean = {statistics.stdev(values) / 3.0:.6f}, got {r.cv}"
    # Student-t, not z = 1.96: t(0.975, 4) = 2.776
    half, z_half, n_half = (q * statistics.stdev(values) / math.sqrt(5) for q in (2.7764451051977987, 1.959963984540054, 2.5705818356))
    wrong = {3 - z_half: "z = 1.96, the normal quantile; with 5 samples t(0.975, 4) = 2.776", 3 - n_half: "t with n = 5 degrees of freedom; the mean's interval has n - 1 = 4"}
    assert r.ci_lower is not None and abs(r.ci_lower - (3 - half)) < 1e-9, (
        f"ci_lower: expected {3 - half:.4f} from Student's t with 4 degrees of freedom, got {r.ci_lower}"
        + next((f" -- that is {why}" for lo, why in wrong.items() if r.ci_lower is not None and abs(r.ci_lower - lo) < 1e-3), ""))
    assert abs(r.ci_upper - (3 + half)) < 1e-9, f"ci_upper: expected {3 + half:.4f}, got {r.ci_upper}"
    spiky = BenchmarkResult("x", [1, 1.1, 1.2, 1.1, 1.0, 9.0])
    assert spiky.outliers == 1, f"outliers: 9.0 lies beyond p75 + 1.5 IQR of the others, expected 1, got {spiky.outliers}"
    assert r.outliers == 0, f"outliers: 1..5 has none beyond 1.5 IQR, got {r.outliers}"
    one = BenchmarkResult("x", [2.5])
    assert one.std == 0.0 and one.ci_lower is None and one.ci_upper is None, \
        f"a single value has std 0.0 and no interval (None, None); got std {one.std}, ({one.ci_lower}, {one.ci_upper})"
    assert BenchmarkResult("x", [0.0, 0.0]).cv is None, "cv is undefined when the mean is 0"
    for bad in ([], [1.0, float("nan")], [float("inf")]):
        expect_error(BenchmarkResult, "x", bad, name="values")
    assert BenchmarkResult.from_dict(r.to_dict()).to_dict() == r.to_dict(), "from_dict(to_dict()) must give the same result"
    ### BEGIN HIDDEN TESTS
    hidden_property("a BenchmarkResult's statistics for other samples")
    rng = grading_rng()
    n = int(rng.integers(2, 40))
    xs = [round(float(v), 6) for v in float(rng.uniform(0.5, 20)) * rng.lognormal(0.0, 0.3, n)]
    if n >= 6 and rng.random() < 0.6:
        xs[int(rng.integers(0, n))] = round(10 * max(xs), 6)  # an interruption
    r = BenchmarkResult("latency", list(xs), unit="ms")
    ordered = sorted(xs)

    def pct(q):  # linear interpolation between the closest ranks
        pos = (n - 1) * q / 100
        lo = math.floor(pos)
        return ordered[lo] + (ordered[min(lo + 1, n - 1)] - ordered[lo]) * (pos - lo)

    mean, sd, q1, q3 = statistics.fmean(xs), statistics.stdev(xs), pct(25), pct(75)
    half = float(_stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    expected = {"mean": mean, "std": sd, "median": statistics.median(xs), "min": ordered[0], "max": ordered[-1],
                "p50": pct(50), "p90": pct(90), "p95": pct(95), "p99": pct(99), "iqr": q3 - q1, "cv": sd / mean,
                "ci_lower": mean - half, "ci_upper": mean + half}
    hints = {"std": (statistics.pstdev(xs), "that is the population std (it divides by n: numpy's default, ddof=0)"),
             "ci_lower": (mean - 1.959963984540054 * sd / math.sqrt(n), "that is z = 1.96, not Student's t"),
             "ci_upper": (mean + 1.959963984540054 * sd / math.sqrt(n), "that is z = 1.96, not Student's t")}
    for key, want in expected.items():
        got = getattr(r, key, None)
        ok = isinstance(got, (int, float, np.number)) and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
        hint = key in hints and isinstance(got, (int, float, np.number)) and math.isclose(got, hints[key][0], rel_tol=1e-9)
        assert ok, (f"{n} values {xs}: {key} expected {want!r}, got {got!r}"
                    + (f" -- {hints[key][1]}" if hint else "")
                    + (" -- percentiles interpolate linearly between the closest ranks (numpy's default)"
                       if key.startswith("p") or key == "iqr" else ""))
    fence_lo, fence_hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    outliers = sum(1 for v in xs if v < fence_lo or v > fence_hi)
    assert r.count == n and r.outliers == outliers, (
        f"{xs}: expected count {n} and {outliers} outlier(s) beyond [{fence_lo:.6g}, {fence_hi:.6g}] "
        f"(1.5 IQR from the quartiles), got count {r.count}, outliers {r.outliers}")
    assert BenchmarkResult.from_dict(r.to_dict()).to_dict() == r.to_dict(), "from_dict(to_dict()) must give the same result"
    v = round(float(rng.uniform(0.1, 100)), 4)
    one = BenchmarkResult("x", [v])
    assert (one.count, one.std, one.ci_lower, one.ci_upper) == (1, 0.0, None, None) and one.median == v, (
        f"[{v}]: expected count 1, std 0.0, no interval (None, None) and median {v}; got count {one.count}, "
        f"std {one.std}, ({one.ci_lower}, {one.ci_upper}), median {one.median}")
    assert BenchmarkResult("x", [-v, v]).cv is None, f"[-{v}, {v}]: the mean is 0, so cv is undefined (None)"
    bad = xs[:int(rng.integers(1, 7))]
    bad[int(rng.integers(0, len(bad)))] = [float("nan"), float("inf"), float("-inf")][int(rng.integers(0, 3))]
    expect_error(BenchmarkResult, "x", bad, name="values")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_benchmark_result()

# %% [markdown]
# ## precise_timer: timing a block of code
#
# The timing core's smallest block: a context manager reading `time.perf_counter_ns()` on entry
# and exit (monotonic: it never jumps with the wall clock; integer ns: no float rounding). If the
# timed code raises, the exception must **propagate**: a failed run silently reported as a (very
# fast) measurement is the worst kind of benchmark bug.
#
# **Your task (easy, 5 points).** Complete `precise_timer` so that `elapsed_ns` (int) is set when the block
# ends (`elapsed_ms` and `elapsed`, in seconds, are derived from it), whether or not it raised.
#
# - *Approach:* a generator-based context manager that `yield`s a `TimerReading`.
# - *Example:* `with precise_timer() as t: sum(range(10**6))` then `t.elapsed_ms` is a few ms.
# - *Hints:* don't catch the exception; a `finally:` block runs either way.

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

    elapsed = elapsed_s  # seconds, the course API's name


@contextlib.contextmanager
def precise_timer() -> Iterator[TimerReading]:
    """Time the enclosed block with `time.perf_counter_ns` (`t.elapsed_ns` after
    `with precise_timer() as t:`); exceptions propagate."""
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
    ### BEGIN HIDDEN TESTS
    hidden_property("precise_timer's elapsed time around a block of another length")
    rng = grading_rng()
    spin_ns = int(rng.integers(200_000, 2_000_000))  # the block spins at least this long, by construction
    outer_start = time.perf_counter_ns()
    with precise_timer() as outer_t:
        with precise_timer() as t:
            until = time.perf_counter_ns() + spin_ns
            while time.perf_counter_ns() < until:
                pass
    outer = time.perf_counter_ns() - outer_start
    assert isinstance(t.elapsed_ns, int) and spin_ns <= t.elapsed_ns <= outer, (
        f"a block that spins for {spin_ns} ns inside code that took {outer} ns: expected an int elapsed_ns "
        f"between the two, got {t.elapsed_ns!r}")
    assert isinstance(outer_t.elapsed_ns, int) and t.elapsed_ns <= outer_t.elapsed_ns <= outer, (
        f"nested timers: the inner one ({t.elapsed_ns} ns) cannot exceed the outer one ({outer_t.elapsed_ns!r} ns); "
        "each timer keeps its own start time")
    assert math.isclose(t.elapsed_ms, t.elapsed_ns / 1e6) and math.isclose(t.elapsed_s, t.elapsed_ns / 1e9), (
        f"elapsed_ms and elapsed_s must be elapsed_ns / 1e6 and / 1e9, got {t.elapsed_ms}, {t.elapsed_s}")
    kind = [ValueError, RuntimeError, ZeroDivisionError, IndexError][int(rng.integers(0, 4))]
    message = f"failure {int(rng.integers(0, 10**6))}"
    caught = None
    try:
        with precise_timer() as failed:
            raise kind(message)
    except Exception as e:  # noqa: BLE001 - what propagated is what is checked
        caught = e
    assert type(caught) is kind and str(caught) == message, (
        f"a {kind.__name__}({message!r}) raised in the block must propagate unchanged, got {caught!r}")
    assert isinstance(failed.elapsed_ns, int) and failed.elapsed_ns >= 0, (
        f"the time must be recorded when the block raises, got elapsed_ns {failed.elapsed_ns!r}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_precise_timer()

# %% [markdown]
# ## How sure are we of an accuracy?
#
# An accuracy is a proportion, `k` correct of `n`: 441/450 = 98.0% sounds precise, but another
# 450 images from the same source could easily give 97% or 99%. The textbook (Wald) interval
# `p ± 1.96 √(p(1−p)/n)` fails where good models live: at 450/450 it has width zero. The
# **Wilson score interval** solves for the proportions the observed count is consistent with:
#
# ```
# center = (p + z²/2n) / (1 + z²/n)
# half   = z / (1 + z²/n) · √( p(1−p)/n + z²/4n² )        z = 1.96 for 95%
# ```
#
# **Your task (easy, 5 points).** Implement `wilson_interval(correct, n, confidence=0.95)`.
#
# - *Approach:* validate (`n ≥ 1`, `0 ≤ correct ≤ n`, confidence in (0, 1): a `ValueError` starting
#   with the argument's name and a colon, `n: expected ...`); `p = correct / n`; `z` from the normal
#   quantile at `(1 + confidence) / 2` (1.96 only for 95%); `(center − half, center + half)`.
# - *Example:* `wilson_interval(450, 450)` ≈ `(0.9915, 1.0)`; `wilson_interval(5, 10)` ≈ `(0.2366, 0.7634)`.
# - *Hints:* `scipy.stats.norm.ppf((1 + confidence) / 2)`.

# %% nbgrader={"grade": false, "grade_id": "benchmarking-wilson", "solution": true, "schema_version": 3}
#| export
def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion `correct / n` (e.g. an accuracy):
    `wilson_interval(5, 10)` is about `(0.2366, 0.7634)`."""
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
    # the most telling case first: the textbook (Wald) interval collapses to (1, 1) at 450/450
    lo, hi = wilson_interval(450, 450)
    assert abs(hi - 1.0) < 1e-9 and 0.990 < lo < 0.993, (
        f"a perfect score still has uncertainty: expected about (0.9915, 1.0), got {(lo, hi)}"
        + (" -- that is the Wald interval p ± z·sqrt(p(1-p)/n), which has width 0 here; use Wilson's center "
           "and half-width" if abs(lo - 1.0) < 1e-9 else ""))
    lo, hi = wilson_interval(5, 10)
    assert abs(lo - 0.2366) < 1e-4 and abs(hi - 0.7634) < 1e-4, f"wilson_interval(5, 10): expected (0.2366, 0.7634), got {(lo, hi)}"
    lo, hi = wilson_interval(0, 20)
    assert lo < 1e-9 and 0.15 < hi < 0.17, f"0/20: expected about (0, 0.161), got {(lo, hi)}"
    # 441/450: the Wilson score interval at z = 1.959964, computed once by a separate implementation of the formula
    lo, hi = wilson_interval(441, 450)
    want = (0.9624312916450982, 0.9894429622464499)
    assert abs(lo - want[0]) < 1e-9 and abs(hi - want[1]) < 1e-9, f"441/450: expected {want}, got {(lo, hi)}"
    wide, narrow = wilson_interval(90, 100), wilson_interval(900, 1000)
    assert (wide[1] - wide[0]) > 2.5 * (narrow[1] - narrow[0]), "10x the samples: the interval is ~3x narrower"
    lo99, hi99 = wilson_interval(90, 100, confidence=0.99)
    want99 = (0.7962492615283767, 0.953974188298965)  # z = 2.5758, the normal quantile at (1 + 0.99) / 2
    assert abs(lo99 - want99[0]) < 1e-9 and abs(hi99 - want99[1]) < 1e-9, (
        f"wilson_interval(90, 100, confidence=0.99): expected {want99} (wider than the 95% one), got {(lo99, hi99)}"
        + (" -- z does not follow the confidence: it is the normal quantile at (1 + confidence) / 2, 1.96 only for 95%"
           if abs(lo99 - wide[0]) < 1e-12 else ""))
    for args, kwargs, arg in (((5, 0), {}, "n"), ((11, 10), {}, "correct"), ((-1, 10), {}, "correct"),
                              ((5, 10), {"confidence": 1.5}, "confidence")):
        expect_error(wilson_interval, *args, name=arg, **kwargs)
    ### BEGIN HIDDEN TESTS
    hidden_property("the Wilson interval for other counts and sample sizes, small and large")
    rng = grading_rng()
    for _ in range(12):
        n = int(rng.integers(1, 30)) if rng.random() < 0.4 else int(rng.integers(30, 5000))
        k = [0, n, int(rng.integers(0, n + 1)), int(rng.integers(0, n + 1))][int(rng.integers(0, 4))]
        conf = [0.8, 0.9, 0.95, 0.99, round(float(rng.uniform(0.5, 0.999)), 3)][int(rng.integers(0, 5))]
        z = float(_stats.norm.ppf((1 + conf) / 2))
        center = (2 * k + z * z) / (2 * (n + z * z))
        half = z * math.sqrt(z * z + 4 * k * (1 - k / n)) / (2 * (n + z * z))
        want = (max(0.0, center - half), min(1.0, center + half))
        lo, hi = wilson_interval(k, n, confidence=conf)
        wald = k / n - z * math.sqrt(k / n * (1 - k / n) / n)
        assert abs(lo - want[0]) < 1e-9 and abs(hi - want[1]) < 1e-9, (
            f"wilson_interval({k}, {n}, confidence={conf}): expected {want}, got {(lo, hi)}"
            + (" -- that is the Wald interval p ± z·sqrt(p(1-p)/n)" if abs(lo - wald) < 1e-9 else "")
            + (" -- the lower end lies above the upper one: z is the (1 + confidence) / 2 quantile, a positive "
               "number" if lo > hi else "")
            + (" -- z does not follow the confidence: it is the normal quantile at (1 + confidence) / 2"
               if conf != 0.95 and abs(lo - wilson_interval(k, n)[0]) < 1e-12 and abs(want[0] - lo) > 1e-9 else ""))
    n = int(rng.integers(1, 500))
    for args, kwargs, arg in (((0, -int(rng.integers(0, 5))), {}, "n"), ((n + int(rng.integers(1, 5)), n), {}, "correct"),
                              ((-int(rng.integers(1, 5)), n), {}, "correct"),
                              ((0, n), {"confidence": [0.0, 1.0, 1.5, -0.2][int(rng.integers(0, 4))]}, "confidence")):
        expect_error(wilson_interval, *args, name=arg, **kwargs)
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_wilson_interval()

# %% [markdown]
# ## One resampler, one rule
#
# Every comparison asks *how uncertain is the effect?* and *is it real?*, answered once here.
#
# **The resampler.** A bootstrap interval recomputes a statistic on thousands of resamples
# (with replacement, from a seeded generator: reproducible) and keeps the middle `confidence`
# of the results. Two samples are resampled *independently* (latency of A and of B: different
# runs) or *paired* (accuracy of A and B on the *same* images: one set of indices for both, so
# an image's difficulty cancels out).
#
# **The rule.** A difference counts only when `p < alpha` *and* it is at least `min_effect`
# (2% of a ratio, 2 points of accuracy): with thousands of samples a 0.3% change can be
# "significant" and still matter to nobody.
#
# ```
# a: 1.0 1.1 0.9 1.0      resample (seeded)      statistic per resample      percentiles
# b: 2.0 2.1 1.9 2.0  ─>  2000 × (a*, b*)   ─>   median(b*) / median(a*) ─>  2.5% .. 97.5%
# paired: the SAME indices for a* and b* (image k of A is compared with image k of B)
# ```
#
# **Your task (hard, 10 points).** Complete `bootstrap_interval` (the checks on its arguments,
# the resampling and the percentiles) and `is_significant`.
#
# - *Checks:* a `ValueError` starting `samples:` (none, an empty or non-1-D one, unequal lengths when
#   paired), `n_boot` (fewer than 100) or `confidence` (outside (0, 1)).
# - *Approach:* one generator, `np.random.default_rng(seed)`. Independent: one index array of
#   shape `(n_boot, len(sample))` per sample, *in order*; paired: one index array for all. Keep
#   the finite statistics; return the `(1 ± confidence) / 2` percentiles as floats, or
#   `(None, None)` when none is finite. `is_significant`: never below the floor; above it, when
#   there is no p-value (an exact value) or `p_value < alpha`.
# - *Example:* `bootstrap_interval(lambda a: a.mean(axis=1), [[1.0, 1.0, 1.0]])` is `(1.0, 1.0)`;
#   `is_significant(0.001, 0.005)` is False (half a percent is below the 2% floor).
# - *Hints:* `rng.integers(0, n, size=(n_boot, n))`; `x[idx]` with a 2-D `idx` gives one row per
#   resample; `np.isfinite`; `np.percentile(values, [lo, hi])` takes percents (2.5, not 0.025).

# %% nbgrader={"grade": false, "grade_id": "results-resampler-rule", "solution": true, "schema_version": 3}
#| export
def bootstrap_interval(statistic: Callable[..., np.ndarray], samples: Sequence[Sequence[float]], *, paired: bool = False,
                       n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of `statistic` over seeded resamples of `samples`.

    `statistic(*resampled)` gets one `(n_boot, n_i)` array per sample and returns `n_boot` values.
    `paired=True` draws one set of indices for all samples (of equal length). Non-finite
    statistics are dropped; with none left the interval is `(None, None)`.
    """
    ### BEGIN SOLUTION
    arrays = [np.asarray(s, dtype=float) for s in samples]
    if not arrays or any(a.ndim != 1 or a.size == 0 for a in arrays):
        raise ValueError("samples: expected one or more non-empty 1-D sequences of numbers")
    if paired and len({a.size for a in arrays}) != 1:
        raise ValueError(f"samples: a paired bootstrap needs equal lengths, got {[a.size for a in arrays]}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 100:
        raise ValueError(f"n_boot: expected at least 100 bootstrap resamples, got {n_boot!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    rng = np.random.default_rng(seed)
    if paired:
        idx = rng.integers(0, arrays[0].size, size=(n_boot, arrays[0].size))
        resampled = [a[idx] for a in arrays]
    else:
        resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays]
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.asarray(statistic(*resampled), dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None, None
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)
    ### END SOLUTION


ALPHA = 0.05       # the one significance level of every comparison, compliance, constraint, budget and rank
MIN_EFFECT = 0.02  # the smallest effect that counts: 2% for ratios, 2 points for proportions


def is_significant(p_value: float | None, effect: float, alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> bool:
    """The one significance rule: `p_value < alpha` and `|effect| >= min_effect`.

    `effect` is `ratio - 1` for ratios, the difference for proportions; an exact value
    (`p_value=None`) has only the effect floor: `is_significant(None, 0.1)` is True.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    if min_effect < 0:
        raise ValueError(f"min_effect: expected a non-negative number, got {min_effect!r}")
    ### BEGIN SOLUTION
    if abs(effect) < min_effect or (min_effect == 0 and effect == 0):
        return False
    return True if p_value is None else bool(p_value < alpha)
    ### END SOLUTION


class Decision(str):
    "'pass', 'fail' or 'inconclusive' (a str), with `basis`: what it was decided on."
    ops = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def decide(result: Any, op: str, threshold: float) -> Decision:
    """The one rule for a target, budget or constraint: pass when the interval of `result` lies wholly on the
    allowed side of `threshold`, fail when wholly on the other, else inconclusive. The interval is a result's
    headline interval (`median_ci()`: the median's for samples, Wilson's for a proportion), an object's
    `ci_lower`/`ci_upper`, or a `(lo, hi)` pair. A point value (a number, a result without interval) is decided
    plainly, and `basis` says so. `decide((0.80, 0.90), ">=", 0.85)` is 'inconclusive'; `decide(0.9, "<", 1)` 'pass'."""
    if op not in Decision.ops or not isinstance(threshold, (int, float, np.number)) or not math.isfinite(threshold):
        raise ValueError(f"op, threshold: expected one of {list(Decision.ops)} and a finite number, got {op!r}, {threshold!r}")
    pair, cmp = isinstance(result, (tuple, list)) and len(result) == 2, Decision.ops[op]
    lo, hi = (result if pair else result.median_ci() if isinstance(result, BenchmarkResult)
              else (getattr(result, "ci_lower", None), getattr(result, "ci_upper", None)))
    if lo is None or hi is None or lo == hi:
        v = getattr(result, "median", getattr(result, "mean", result)) if lo is None or hi is None else lo
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not math.isfinite(v):
            raise ValueError(f"result: expected a finite number, a (lo, hi) interval or a result, got {result!r}")
        d, d.basis = Decision("pass" if cmp(v, threshold) else "fail"), f"point value {v:g} (no interval): decided plainly"
    else:
        d = Decision("pass" if cmp(lo, threshold) and cmp(hi, threshold) else "inconclusive" if cmp(lo, threshold) or
                     cmp(hi, threshold) else "fail")
        d.basis = f"interval [{lo:.4g}, {hi:.4g}] {op} {threshold:g}"
    return d

# %% nbgrader={"grade": true, "grade_id": "test-results-resampler-rule", "locked": true, "points": 10, "schema_version": 3}
def test_unit_resampler_and_rule():
    # independent resampling: the first sample's draws come first, from one seeded generator
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0, 8.0, 10.0])
    ref = [0.85, 6.0]  # drawn as the rule says (b's indices first would give [0.72375, 6.2025])
    got = bootstrap_interval(lambda x, y: y.mean(axis=1) - x.mean(axis=1), [a, b], n_boot=500, seed=3)
    assert got[0] is not None and np.allclose(got, ref), (
        f"expected the percentile interval {ref} (one rng = default_rng(seed); a's indices drawn first, "
        f"then b's), got {got}")
    # paired: the same indices for both, so b = a + 1 gives a zero-width interval at 1
    lo, hi = bootstrap_interval(lambda x, y: y.mean(axis=1) - x.mean(axis=1), [a, a + 1], paired=True)
    assert abs(lo - 1) < 1e-12 and abs(hi - 1) < 1e-12, (
        f"paired difference of a+1 and a is exactly 1 in every resample, got ({lo}, {hi}): "
        "a paired bootstrap uses the same indices for both samples")
    assert bootstrap_interval(lambda x: x.mean(axis=1) / 0.0, [a]) == (None, None), \
        "no finite statistic (a ratio over zero): the interval is (None, None)"
    assert is_significant(0.01, -0.05), "p < 0.05 and a 5% effect (in either direction) is significant"
    assert not is_significant(0.01, 0.01), "a 1% effect is below the 2% floor, however small p is"
    assert not is_significant(0.06, 0.5), "p = 0.06 is not below alpha = 0.05"
    assert is_significant(None, 0.1) and not is_significant(None, 0.01), \
        "an exact value (p_value None) is significant when the effect reaches the floor"
    for kwargs, arg in (({"samples": [[1.0], [1.0, 2.0]], "paired": True}, "samples"),
                        ({"samples": [[1.0]], "n_boot": 10}, "n_boot")):
        expect_error(bootstrap_interval, lambda x, *r: x.mean(axis=1), name=arg, **kwargs)
    ### BEGIN HIDDEN TESTS
    hidden_property("the resampler and the decision rule with other seeds, resample counts and confidences")
    rng = grading_rng()
    seed, n_boot = int(rng.integers(0, 2**31)), int(rng.integers(100, 600))
    conf = [0.8, 0.9, 0.95, 0.99][int(rng.integers(0, 4))]
    tail = 100 * (1 - conf) / 2
    xa = rng.normal(5, 1, int(rng.integers(3, 15))).round(3)
    xb = rng.normal(6, 2, int(rng.integers(3, 15))).round(3)
    stat = lambda x, y: np.median(y, axis=1) - x.mean(axis=1)  # noqa: E731
    draw = np.random.default_rng(seed)
    ia = draw.integers(0, xa.size, size=(n_boot, xa.size))
    ib = draw.integers(0, xb.size, size=(n_boot, xb.size))
    want = np.percentile(stat(xa[ia], xb[ib]), [tail, 100 - tail])
    got = bootstrap_interval(stat, [xa.tolist(), tuple(xb.tolist())], n_boot=n_boot, seed=seed, confidence=conf)
    assert got[0] is not None and np.allclose(got, want, rtol=1e-9, atol=1e-12), (
        f"independent samples of sizes {xa.size}, {xb.size}, n_boot={n_boot}, seed={seed}, confidence={conf}: expected "
        f"the percentile interval {want.tolist()} (one default_rng(seed); the first sample's indices drawn first, "
        f"then the second's; percentiles {tail:g} and {100 - tail:g}), got {got}")
    # paired: one set of indices for both samples
    m = int(rng.integers(4, 20))
    xp = rng.normal(10, 2, m).round(3)
    yp = (xp * rng.uniform(0.8, 1.2) + rng.normal(0, 0.5, m)).round(3)
    paired_stat = lambda x, y: (y - x).mean(axis=1)  # noqa: E731
    idx = np.random.default_rng(seed).integers(0, m, size=(n_boot, m))
    want = np.percentile(paired_stat(xp[idx], yp[idx]), [tail, 100 - tail])
    got = bootstrap_interval(paired_stat, [xp, yp], paired=True, n_boot=n_boot, seed=seed, confidence=conf)
    assert got[0] is not None and np.allclose(got, want, rtol=1e-9, atol=1e-12), (
        f"paired samples of size {m}, n_boot={n_boot}, seed={seed}, confidence={conf}: expected {want.tolist()} "
        f"(one index array of shape (n_boot, {m}) from default_rng(seed), used for both samples), got {got}")
    # non-finite statistics are dropped before the percentiles
    xs = rng.uniform(1, 9, int(rng.integers(3, 9))).round(3)
    xs[int(rng.integers(0, xs.size))] = 0.0
    bad_value = [np.inf, -np.inf, np.nan][int(rng.integers(0, 3))]
    some_bad = lambda x: np.where(x.min(axis=1) > 0, x.mean(axis=1), bad_value)  # noqa: E731
    values = some_bad(xs[np.random.default_rng(seed).integers(0, xs.size, size=(n_boot, xs.size))])
    want = np.percentile(values[np.isfinite(values)], [tail, 100 - tail])
    got = bootstrap_interval(some_bad, [xs], n_boot=n_boot, seed=seed, confidence=conf)
    assert got[0] is not None and np.allclose(got, want, rtol=1e-9, atol=1e-12), (
        f"a statistic that is {bad_value} for every resample holding the 0 of {xs.tolist()}: expected the interval "
        f"of the finite ones only, {want.tolist()}, got {got}")
    # the rule: significant = p below alpha (or no p at all) and an effect at least the floor
    alpha, floor = float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.005, 0.1))
    for big in (True, False):
        for p in (alpha * float(rng.uniform(0, 0.95)), alpha + (1 - alpha) * float(rng.uniform(0.05, 1)), None):
            effect = floor * float(rng.uniform(1.05, 5) if big else rng.uniform(0, 0.95)) * (1 if rng.random() < 0.5 else -1)
            want = big and (p is None or p < alpha)
            got = is_significant(p, effect, alpha=alpha, min_effect=floor)
            assert got == want, (
                f"is_significant(p_value={p}, effect={effect:.5f}, alpha={alpha:.4f}, min_effect={floor:.4f}): "
                f"expected {want}, got {got}")
    lengths = [int(v) for v in rng.choice(np.arange(1, 12), size=2, replace=False)]
    expect_error(bootstrap_interval, paired_stat, [list(range(lengths[0])), list(range(lengths[1]))], paired=True,
                 name="samples")
    expect_error(bootstrap_interval, lambda x: x.mean(axis=1), [xs], n_boot=int(rng.integers(1, 10)), name="n_boot")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_resampler_and_rule()

# %% [markdown]
# ## Three verdicts, never two
#
# A comparison that is not significant has *not* shown that two models are alike: ten samples
# on a busy laptop may give a ratio of 2.5 with an interval from 0.003 to 8.8, p = 0.1. "No
# significant difference" would be read as "no difference", and it is only "cannot tell yet".
# Absence of evidence is not evidence of absence. So every comparison ends in one of three
# verdicts:
#
# | outcome | when | says |
# |---|---|---|
# | `different` | significant by the one rule (p < α and an effect of at least the floor) | who is better, by how much |
# | `equivalent` | not significant, and the effect's whole interval lies within ± `min_effect` of no difference | shown to be alike: any difference is smaller than the smallest one that counts |
# | `inconclusive` | neither | why: the interval is too wide for this much noise, or reaches past the floor on one side |
#
# "No difference" is 1 for a ratio (`center=1.0`, the interval must lie in [1 − ε, 1 + ε]) and 0
# for a difference of accuracies (`center=0.0`, within ± ε points).
#
# **Your task (easy, 4 points).** Implement `comparison_outcome(significant, interval, min_effect, center)`.
#
# - *TODO:* return `"different"` when `significant`; else `"equivalent"` when the interval
#   `(lo, hi)` lies within `[center - min_effect, center + min_effect]`, its ends included; else
#   `"inconclusive"`, also when there is no interval (`None`, or an end that is `None`).
# - *Approach:* three rules, in that order; the argument checks are written for you.
# - *Example:* `comparison_outcome(False, (0.991, 1.012))` is `"equivalent"`;
#   `comparison_outcome(False, (0.003, 8.8))` is `"inconclusive"`;
#   `comparison_outcome(False, (-0.01, 0.015), center=0.0)` is `"equivalent"`.
# - *Hints:* an interval that *contains* no difference (1, or 0) is not one that stays *close* to
#   it: (0.9, 1.1) contains 1 and also a 10% change. Both ends must be within the band, not just the
#   one on the side of the estimate. Not significant is never enough on its own.
# - *Needs first:* nothing; `compare_samples`, the accuracy comparison and `compare_results` call it.

# %% nbgrader={"grade": false, "grade_id": "results-three-verdicts", "solution": true, "schema_version": 3}
#| export
OUTCOMES = ("different", "equivalent", "inconclusive")


def comparison_outcome(significant: bool, interval: tuple[float | None, float | None] | None,
                       min_effect: float = MIN_EFFECT, center: float = 1.0) -> str:
    """'different' (significant), 'equivalent' (the effect's interval within `center` ± `min_effect`)
    or 'inconclusive' (neither). `interval` is a ratio's (`center` 1) or a difference's (`center` 0).

    >>> comparison_outcome(False, (0.003, 8.8)), comparison_outcome(False, (0.991, 1.012))
    ('inconclusive', 'equivalent')
    """
    if min_effect < 0:
        raise ValueError(f"min_effect: expected a non-negative number, got {min_effect!r}")
    ### BEGIN SOLUTION
    if significant:
        return "different"
    lo, hi = interval if interval is not None else (None, None)
    if lo is None or hi is None:
        return "inconclusive"
    within = center - min_effect <= lo and hi <= center + min_effect
    return "equivalent" if within else "inconclusive"
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-results-three-verdicts", "locked": true, "points": 4, "schema_version": 3}
def test_unit_comparison_outcome():
    got = comparison_outcome(False, (0.003, 8.8))
    contains = comparison_outcome(False, (0.5, 0.9)) != "equivalent"  # equivalent only when the interval holds 1?
    assert got == "inconclusive", (
        f"not significant, ratio interval (0.003, 8.8): expected 'inconclusive', got {got!r}"
        + ("" if got != "equivalent" else " -- the interval contains 1, but also a 10% change (and a 1000x one) either "
           "way: equivalent needs the whole interval within 1 ± 2%" if contains else
           " -- not significant is not equivalent: an interval this wide allows a 1000x difference either way"))
    got = comparison_outcome(False, (0.9, 1.1))
    assert got == "inconclusive", (
        f"not significant, ratio interval (0.9, 1.1): expected 'inconclusive', got {got!r}"
        + (" -- the interval contains 1, but also a 10% change either way: equivalent needs the whole interval within "
           "1 ± 2%" if got == "equivalent" else ""))
    for interval, want, why in (((0.991, 1.012), "equivalent", "the whole interval within 1 ± 2%"),
                                ((0.98, 1.02), "equivalent", "within includes the edges of the band"),
                                ((0.95, 1.01), "inconclusive", "both ends must lie within 1 ± 2%, the lower end is not"),
                                ((0.99, 1.05), "inconclusive", "both ends must lie within 1 ± 2%, the upper end is not"),
                                (None, "inconclusive", "no interval: nothing shows the two alike"),
                                ((None, None), "inconclusive", "no interval: nothing shows the two alike")):
        got = comparison_outcome(False, interval)
        assert got == want, f"not significant, interval {interval}: expected {want!r}, got {got!r} -- {why}"
    got = comparison_outcome(True, (1.5, 2.5))
    assert got == "different", f"significant: expected 'different', got {got!r}"
    for args, want, why in (((False, (-0.01, 0.015), MIN_EFFECT, 0.0), "equivalent",
                             "a difference of accuracies: no difference is 0, the band 0 ± 0.02"),
                            ((False, (-0.03, 0.01), MIN_EFFECT, 0.0), "inconclusive", "the lower end is 3 points down"),
                            ((False, (0.96, 1.04), 0.05), "equivalent", "min_effect=0.05: the band is 1 ± 5%")):
        got = comparison_outcome(*args)
        assert got == want, (f"comparison_outcome{args}: expected {want!r}, got {got!r} -- {why}"
                             + ("; the band is center ± min_effect" if len(args) > 3 or args[2] != MIN_EFFECT else ""))
    expect_error(comparison_outcome, False, (0.99, 1.01), -0.1, name="min_effect")
    ### BEGIN HIDDEN TESTS
    hidden_property("the three verdicts for other intervals, floors and centers (ratios and differences)")
    rng = grading_rng()
    for _ in range(40):
        center = [0.0, 1.0][int(rng.integers(0, 2))]
        eps = float(rng.choice([0.0, 0.01, 0.02, 0.05, 0.1]))
        significant = bool(rng.random() < 0.2)
        kind = int(rng.integers(0, 5))
        if kind == 0:
            interval = None
        elif kind == 1:  # the ends on the band's edges exactly
            interval = (center - eps, center + eps)
        else:
            a, b = sorted(center + rng.normal(0, 2 * eps + 0.01, 2))
            interval = (float(a), float(b)) if kind != 4 else (float(a), None)
        want = ("different" if significant else "inconclusive" if interval is None or None in interval
                else "equivalent" if center - eps <= interval[0] and interval[1] <= center + eps else "inconclusive")
        got = comparison_outcome(significant, interval, eps, center)
        assert got == want, (f"comparison_outcome(significant={significant}, interval={interval}, min_effect={eps}, "
                             f"center={center}): expected {want!r}, got {got!r}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_comparison_outcome()

# %% [markdown]
# ## Is B really faster than A?
#
# Three numbers answer it for two latency samples: **the effect**, the ratio of medians
# `median(B) / median(A)` (medians: latency has a long right tail); **its uncertainty**, a
# bootstrap interval of that ratio; and **whether it could be noise**, the Mann–Whitney U test
# (does a random value of B tend to be smaller than one of A?), which, unlike a t-test, makes
# no normality assumption that skewed latency would violate. The one rule then decides.
#
# **Your task (medium, 10 points).** Complete `compare_samples`: check the arguments (each sample
# at least 2 finite values, `alpha` in (0, 1), `n_boot` ≥ 100: a `ValueError` starting with the argument's
# name and a colon, `a: expected ...`), then fill in `median_a`, `median_b`, `ratio`, `ci_lower`, `ci_upper`, `p_value` and
# `significant`; the verdict text is written for you from those.
#
# - *Approach:* the interval from `bootstrap_interval` at the level `1 − alpha`, with a statistic
#   that gives the ratio of medians of each resample; `scipy.stats`' two-sided Mann–Whitney U;
#   `is_significant` with the effect `ratio − 1`.
# - *Example:* `compare_samples([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05])` has
#   `ratio == 2.0`, `p_value ≈ 0.012`, and the verdict "a is 2.00× faster than b (p = 0.012)".
# - *Hints:* the statistic gets arrays of shape `(n_boot, len(a))` and `(n_boot, len(b))`:
#   `np.median(x, axis=1)` is the median of every resample at once. The two samples may differ in
#   length and be skewed: a ratio of *means* then differs from the ratio of medians, and the test checks it.
# - *Needs first:* `bootstrap_interval` (the ratio's interval).

# %% nbgrader={"grade": false, "grade_id": "benchmarking-compare", "solution": true, "schema_version": 3}
#| export
@dataclass
class Comparison:
    """The outcome of comparing model `b` against model `a` on one metric: `ratio` is `median_b /
    median_a` with its bootstrap interval, `p_value` comes from `test`, `outcome` is one of the three
    verdicts (`comparison_outcome`) with `why`, and `verdict` says it in words."""

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
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT
    bootstrap_resamples: int = 0
    seed: int | None = None
    higher_is_better: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    outcome: str = ""
    why: str = ""

    @property
    def winner(self) -> str | None:
        "The name of the significantly better model, or None when the difference is not significant."
        if not self.significant:
            return None
        b_wins = (self.ratio > 1) == self.higher_is_better
        return self.model_b if b_wins else self.model_a

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _format_p(p: float | None) -> str:
    return "no test" if p is None else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _outcome_why(c: Comparison, lo: float | None, hi: float | None, center: float = 1.0) -> str:
    "Why `c.outcome` holds, from the effect's interval `(lo, hi)` around `center` (1: a ratio, 0: a difference)."
    band, fmt = (f"± {c.min_effect * 100:.0f} points", lambda v: f"{v * 100:+.1f} points") if center == 0 else (
        f"1 ± {c.min_effect:.0%}", lambda v: f"{v:.4g}")
    if c.outcome == "different":
        return f"{_format_p(c.p_value)} below {c.alpha:g} and an effect beyond {band}"
    if lo is None or hi is None:
        return "one measurement each: no interval, so nothing shows the two alike"
    shown, both = f"the interval [{fmt(lo)}, {fmt(hi)}]", lo < center - c.min_effect and hi > center + c.min_effect
    return f"{shown} lies within {band}" if c.outcome == "equivalent" else f"{shown} reaches past {band} " + (
        f"on both sides: too few samples for this much noise (n = {c.n_a} and {c.n_b})" if both else
        f"on one side, and the test ({_format_p(c.p_value)}) shows no difference that counts") + "; more samples would decide"


def _verdict_text(c: Comparison, better: str) -> str:
    if c.outcome == "equivalent":
        return f"{c.model_a} and {c.model_b} are equivalent (ratio {c.ratio:.3f}, {_format_p(c.p_value)}): {c.why}"
    if c.outcome != "different":
        return f"inconclusive between {c.model_a} and {c.model_b} (ratio {c.ratio:.3f}, {_format_p(c.p_value)}): {c.why}"
    winner, loser = (c.model_b, c.model_a) if c.winner == c.model_b else (c.model_a, c.model_b)
    factor = c.ratio if c.ratio >= 1 else (1 / c.ratio if c.ratio > 0 else math.inf)
    return f"{winner} is {factor:.2f}× {better} than {loser} ({_format_p(c.p_value)})"


def compare_samples(a: Sequence[float], b: Sequence[float], *, names: tuple[str, str] = ("a", "b"), metric: str = "latency",
                    higher_is_better: bool = False, better: str = "faster", alpha: float = ALPHA, min_effect: float = MIN_EFFECT,
                    n_boot: int = 2000, seed: int = 0) -> Comparison:
    """Compare two samples of one metric: ratio of medians (b / a) with a bootstrap interval, a
    Mann-Whitney U p-value, and a verdict by `is_significant` (`better` is the winner's word: "faster", ...).

    >>> compare_samples([1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05]).verdict
    'a is 2.00× faster than b (p = 0.012)'
    """
    ### BEGIN SOLUTION
    a_arr = np.asarray(a, dtype=float)
    b_arr = np.asarray(b, dtype=float)
    for arr, arg in ((a_arr, "a"), (b_arr, "b")):
        if arr.ndim != 1 or arr.size < 2 or not np.all(np.isfinite(arr)):
            raise ValueError(f"{arg}: expected at least 2 finite measurements, got {arr.tolist()!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    if n_boot < 100:
        raise ValueError(f"n_boot: expected at least 100 bootstrap resamples, got {n_boot!r}")
    median_a, median_b = float(np.median(a_arr)), float(np.median(b_arr))
    if median_a == 0:
        raise ValueError("a: its median is 0, so the ratio median(b) / median(a) is undefined")
    ratio = median_b / median_a
    ci_lower, ci_upper = bootstrap_interval(lambda x, y: np.median(y, axis=1) / np.median(x, axis=1),
                                            [a_arr, b_arr], n_boot=n_boot, seed=seed, confidence=1 - alpha)
    p_value = float(_stats.mannwhitneyu(a_arr, b_arr, alternative="two-sided").pvalue)
    significant = is_significant(p_value, ratio - 1, alpha, min_effect)
    ### END SOLUTION
    c = Comparison(names[0], names[1], metric, median_a, median_b, ratio, ci_lower, ci_upper, p_value,
                   significant, n_a=int(a_arr.size), n_b=int(b_arr.size), alpha=alpha, min_effect=min_effect,
                   bootstrap_resamples=n_boot, seed=seed, higher_is_better=higher_is_better)
    c.outcome = comparison_outcome(significant, (ci_lower, ci_upper), min_effect)
    c.why = _outcome_why(c, ci_lower, ci_upper)
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
    assert abs(c.p_value - expected_p) < 1e-12, (
        f"p_value: expected the two-sided Mann-Whitney U p = {expected_p}, got {c.p_value}"
        + (" -- that is a t-test, which assumes normal data; latency is skewed"
           if any(math.isclose(c.p_value, _stats.ttest_ind(fast, slow, equal_var=v).pvalue, rel_tol=1e-6) for v in (True, False))
           else ""))
    assert c.ci_lower is not None and c.ci_lower <= c.ratio <= c.ci_upper, \
        f"the bootstrap interval [{c.ci_lower}, {c.ci_upper}] should contain the observed ratio {c.ratio}"
    assert 1.7 < c.ci_lower and c.ci_upper < 2.3, f"the interval of a clean 2x difference should be near 2, got [{c.ci_lower}, {c.ci_upper}]"
    assert c.significant and c.verdict.startswith("fast is 2.00× faster than slow"), f"expected 'fast is 2.00× faster than slow…', got {c.verdict!r}"
    again = compare_samples(fast, slow, names=("fast", "slow"))
    assert (again.ci_lower, again.ci_upper) == (c.ci_lower, c.ci_upper), "a fixed seed must give the same interval"
    # direction: higher is better (throughput)
    t = compare_samples(fast, slow, names=("x", "y"), higher_is_better=True, better="higher throughput")
    assert t.significant and t.verdict.startswith("y is 2.00× higher throughput than x"), f"expected 'y is 2.00× higher throughput than x…', got {t.verdict!r}"
    same = compare_samples(fast, list(fast))
    assert not same.significant and same.winner is None, f"identical samples: expected no winner, got {same.verdict!r}"
    # a tiny but 'significant' shift is below the 2% that matters
    rng = np.random.default_rng(1)
    base = 1 + 0.001 * rng.standard_normal(400)
    tiny = compare_samples(base, base * 1.01)
    assert tiny.p_value < 0.05, "a consistent 1% shift over 400 samples is statistically detectable"
    assert not tiny.significant and tiny.winner is None, \
        f"a 1% difference is below min_effect=2% and must not be reported as a win, got: {tiny.verdict}"
    noisy = compare_samples([1.0, 1.5, 0.8, 1.2, 0.9], [1.1, 0.85, 1.4, 1.0, 1.3])
    assert not noisy.significant and noisy.p_value > 0.05, \
        f"overlapping samples: expected no significant difference (p > 0.05), got p = {noisy.p_value}"
    # unequal, skewed samples (one interruption each): the ratio of medians is not the ratio of means
    a = [1.0, 1.02, 0.98, 1.01, 4.0]
    b = [2.0, 1.96, 2.04, 2.02, 1.98, 2.01, 9.0]
    c = compare_samples(a, b, alpha=0.1, n_boot=300, seed=7)
    want = statistics.median(b) / statistics.median(a)
    assert math.isclose(c.ratio, want, rel_tol=1e-12), (
        f"ratio of {a} and {b}: expected median(b) / median(a) = {want:.6f}, got {c.ratio}"
        + (" -- that is the ratio of means, which the interruptions pull around"
           if math.isclose(c.ratio, statistics.fmean(b) / statistics.fmean(a), rel_tol=1e-9) else "")
        + (" -- that is median(a) / median(b): the ratio is b over a" if math.isclose(c.ratio, 1 / want, rel_tol=1e-9) else ""))
    draw = np.random.default_rng(7)  # bootstrap_interval's draws: a's indices first, then b's
    ia, ib = draw.integers(0, len(a), size=(300, len(a))), draw.integers(0, len(b), size=(300, len(b)))
    ratios = np.median(np.array(b)[ib], axis=1) / np.median(np.array(a)[ia], axis=1)
    ci, ci95 = np.percentile(ratios, [5, 95]), np.percentile(ratios, [2.5, 97.5])
    means = np.percentile(np.array(b)[ib].mean(axis=1) / np.array(a)[ia].mean(axis=1), [5, 95])
    got = [c.ci_lower, c.ci_upper]
    assert c.ci_lower is not None and np.allclose(got, ci, rtol=1e-9), (
        f"interval of {a} and {b} (alpha=0.1, n_boot=300, seed=7): expected the bootstrap interval of the ratio of "
        f"medians {ci.tolist()} (bootstrap_interval at confidence 1 - alpha, with n_boot and seed passed on), got {got}"
        + (" -- that is the interval of the ratio of means" if c.ci_lower is not None
           and np.allclose(got, means, rtol=1e-9) else "")
        + (" -- that is a 95% interval: the level is 1 - alpha" if c.ci_lower is not None
           and np.allclose(got, ci95, rtol=1e-9) else ""))
    welch = _stats.ttest_ind(a, b, equal_var=False).pvalue
    expected_p = _stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
    assert math.isclose(c.p_value, expected_p, rel_tol=1e-9), (
        f"p_value of {a} and {b}: expected the two-sided Mann-Whitney U p = {expected_p:.6g}, got {c.p_value}"
        + (" -- that is a t-test, which assumes normal data" if math.isclose(c.p_value, welch, rel_tol=1e-6)
           or math.isclose(c.p_value, _stats.ttest_ind(a, b).pvalue, rel_tol=1e-6) else ""))
    for bad_a in ([1.0], [1.0, float("nan")]):
        expect_error(compare_samples, bad_a, [1.0, 2.0], name="a")
    expect_error(compare_samples, [1.0, 2.0], [1.0], name="b")
    expect_error(compare_samples, [1.0, 2.0], [1.0, 2.0], alpha=1.5, name="alpha")
    expect_error(compare_samples, [1.0, 2.0], [1.0, 2.0], n_boot=10, name="n_boot")
    ### BEGIN HIDDEN TESTS
    hidden_property("compare decisions (faster, slower, not significant) for other samples, alphas and effect floors")
    rng = grading_rng()
    seed, n_boot = int(rng.integers(0, 2**31)), int(rng.integers(200, 1000))
    alpha, floor = [0.01, 0.05, 0.1][int(rng.integers(0, 3))], [0.01, 0.02, 0.05][int(rng.integers(0, 3))]
    base = float(rng.uniform(0.5, 5))
    for factor, noise in ((float(rng.uniform(1.3, 3)) ** (1 if rng.random() < 0.5 else -1), 0.05),
                          (1 + float(rng.uniform(-0.04, 0.04)), 0.1)):
        a = (base * rng.lognormal(0, noise, int(rng.integers(6, 30)))).round(5)
        b = (base * factor * rng.lognormal(0, noise, int(rng.integers(6, 30)))).round(5)
        higher = bool(rng.random() < 0.5)
        word = "higher throughput" if higher else "faster"
        c = compare_samples(a.tolist(), b.tolist(), names=("base", "new"), higher_is_better=higher, better=word,
                            alpha=alpha, min_effect=floor, n_boot=n_boot, seed=seed)
        med_a, med_b = statistics.median(a.tolist()), statistics.median(b.tolist())
        p = float(_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        draw = np.random.default_rng(seed)
        ia, ib = draw.integers(0, a.size, size=(n_boot, a.size)), draw.integers(0, b.size, size=(n_boot, b.size))
        ci = np.percentile(np.median(b[ib], axis=1) / np.median(a[ia], axis=1), [50 * alpha, 100 - 50 * alpha])
        case = f"a (n={a.size}, median {med_a:.5g}) against b (n={b.size}, median {med_b:.5g})"
        assert math.isclose(c.median_a, med_a, rel_tol=1e-12) and math.isclose(c.median_b, med_b, rel_tol=1e-12), (
            f"{case}: expected median_a {med_a}, median_b {med_b}, got {c.median_a}, {c.median_b}")
        assert math.isclose(c.ratio, med_b / med_a, rel_tol=1e-12), f"{case}: expected ratio {med_b / med_a}, got {c.ratio}"
        assert c.p_value is not None and math.isclose(c.p_value, p, rel_tol=1e-9, abs_tol=1e-15), (
            f"{case}: expected the two-sided Mann-Whitney U p = {p:.6g}, got {c.p_value}")
        assert c.ci_lower is not None and np.allclose([c.ci_lower, c.ci_upper], ci, rtol=1e-9), (
            f"{case}, n_boot={n_boot}, seed={seed}, alpha={alpha}: expected the bootstrap interval of the ratio of "
            f"medians {ci.tolist()} (bootstrap_interval at confidence 1 - alpha, passing n_boot and seed on), got "
            f"[{c.ci_lower}, {c.ci_upper}]")
        significant = abs(med_b / med_a - 1) >= floor and p < alpha
        assert c.significant == significant, (
            f"{case}: ratio {med_b / med_a:.4f}, p = {p:.3g} with alpha={alpha}, min_effect={floor}: expected "
            f"significant={significant}, got {c.significant}")
        if significant:
            winner = "new" if (med_b > med_a) == higher else "base"
            assert c.winner == winner and c.verdict.startswith(f"{winner} is "), (
                f"{case}, higher_is_better={higher}: expected {winner} to win, got the verdict {c.verdict!r}")
    good = [1.0, 2.0, 3.0]
    v = float(rng.uniform(0.5, 5))
    bad = [[v], [v, float("nan")], [float("inf"), v]][int(rng.integers(0, 3))]
    expect_error(compare_samples, bad, good, name="a")
    expect_error(compare_samples, good, bad, name="b")
    expect_error(compare_samples, good, good, alpha=[0.0, 1.0, 1.5][int(rng.integers(0, 3))], name="alpha")
    expect_error(compare_samples, good, good, n_boot=int(rng.integers(1, 100)), name="n_boot")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_compare_samples()

# %% [markdown]
# ### Comparing accuracies: a paired test
#
# When both models classified the *same* images, what matters is where they disagree.
# **McNemar's exact test** counts `n01` (A right, B wrong) and `n10` (A wrong, B right); if the
# models were equally good, each disagreement would go either way with probability ½, so
# `n10 ~ Binomial(n01 + n10, ½)`.
#
# **Your task (easy, 5 points).** Complete `mcnemar_exact`: count the two kinds of
# disagreement and test them with the exact binomial distribution.
#
# - *TODO:* `a_only`, `b_only` and the two-sided `p_value` (1.0 when the models never disagree).
# - *Approach:* only the images where exactly one model is right say which model is better.
# - *Example:* A right on 3 of 4 images, B on 1 of them (one both got right): `a_only == 2`,
#   `b_only == 0`, `p_value == 0.5` (two coin flips both landing on A's side, either side).
# - *Hints:* boolean arrays combine with `&` and `~`; `scipy.stats.binomtest`. The chi-square
#   formula `(|n01 − n10| − 1)² / (n01 + n10)` is poor for the few disagreements good models have.

# %% nbgrader={"grade": false, "grade_id": "results-mcnemar", "solution": true, "schema_version": 3}
#| export
def mcnemar_exact(correct_a: Sequence[int | bool], correct_b: Sequence[int | bool]) -> dict[str, Any]:
    """McNemar's exact test on paired per-sample correctness (1 = right, 0 = wrong): returns
    `{"a_only": n01, "b_only": n10, "p_value": p}`, with p = 1 when there is no disagreement."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"correct_a, correct_b: expected two equal-length 1-D sequences of 0/1, "
                         f"got shapes {a.shape} and {b.shape}")
    ### BEGIN SOLUTION
    a_only = int(np.sum(a & ~b))
    b_only = int(np.sum(~a & b))
    n = a_only + b_only
    p = 1.0 if n == 0 else float(_stats.binomtest(b_only, n, 0.5, alternative="two-sided").pvalue)
    ### END SOLUTION
    return {"a_only": a_only, "b_only": b_only, "p_value": p}

# %% nbgrader={"grade": true, "grade_id": "test-results-mcnemar", "locked": true, "points": 5, "schema_version": 3}
def test_unit_mcnemar_exact():
    # 10 images A alone got right, 2 that B alone got right, 88 both got right
    a = [1] * 10 + [0] * 2 + [1] * 88
    b = [0] * 10 + [1] * 2 + [1] * 88
    got = mcnemar_exact(a, b)
    assert (got["a_only"], got["b_only"]) == (10, 2), (
        f"expected a_only=10, b_only=2 (only the disagreements), got {got['a_only']}, {got['b_only']}")
    exact = _stats.binomtest(2, 12, 0.5).pvalue
    chi2 = float(_stats.chi2.sf((abs(10 - 2) - 1) ** 2 / 12, 1))
    assert abs(got["p_value"] - exact) < 1e-12, (
        f"p_value: expected the exact two-sided binomial p = {exact:.5f}, got {got['p_value']:.5f}"
        + (" -- that is the chi-square approximation" if abs(got["p_value"] - chi2) < 1e-6 else ""))
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]) == {"a_only": 0, "b_only": 0, "p_value": 1.0}, \
        "no disagreement: no evidence either way, p = 1.0"
    got = mcnemar_exact([1, 1, 1, 0], [1, 0, 0, 0])
    assert got == {"a_only": 2, "b_only": 0, "p_value": 0.5}, f"2 vs 0 disagreements: expected a_only 2, b_only 0, p 0.5, got {got}"
    expect_error(mcnemar_exact, [1, 0], [1], name="correct_a")  # different lengths cannot be paired
    ### BEGIN HIDDEN TESTS
    hidden_property("McNemar's test for other discordant counts")
    rng = grading_rng()
    n01, n10 = int(rng.integers(0, 20)), int(rng.integers(1, 20))
    if rng.random() < 0.5:
        n01, n10 = n10, n01
    pairs = [(1, 0)] * n01 + [(0, 1)] * n10 + [(1, 1)] * int(rng.integers(0, 200)) + [(0, 0)] * int(rng.integers(0, 50))
    order = rng.permutation(len(pairs))
    ca, cb = [pairs[i][0] for i in order], [pairs[i][1] for i in order]
    form = int(rng.integers(0, 3))  # ints, booleans or numpy arrays: all are 0/1 outcomes
    if form == 1:
        ca, cb = [bool(v) for v in ca], [bool(v) for v in cb]
    elif form == 2:
        ca, cb = np.array(ca), np.array(cb)
    got = mcnemar_exact(ca, cb)
    exact = float(_stats.binomtest(n10, n01 + n10, 0.5).pvalue)
    chi2 = float(_stats.chi2.sf((abs(n01 - n10) - 1) ** 2 / (n01 + n10), 1))
    assert (got["a_only"], got["b_only"]) == (n01, n10), (
        f"{len(pairs)} paired outcomes with {n01} right by A alone and {n10} by B alone: expected a_only={n01}, "
        f"b_only={n10}, got {got['a_only']}, {got['b_only']}")
    assert math.isclose(got["p_value"], exact, rel_tol=1e-9, abs_tol=1e-15), (
        f"{n01} vs {n10} disagreements: expected the exact two-sided binomial p = {exact:.6g}, got {got['p_value']}"
        + (" -- that is the chi-square approximation" if math.isclose(got["p_value"], chi2, rel_tol=1e-6) else ""))
    same = [int(v) for v in rng.integers(0, 2, size=int(rng.integers(1, 50)))]
    got = mcnemar_exact(same, list(same))
    assert (got["a_only"], got["b_only"], got["p_value"]) == (0, 0, 1.0), (
        f"identical outcomes (no disagreement): expected a_only=0, b_only=0, p_value=1.0, got {got}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_mcnemar_exact()

# %% [markdown]
# ## How to read a metric
#
# 3.2 is good for a latency in ms and bad for an accuracy in percent. `METRICS` holds each
# metric's unit (sizes in integer bytes, shown as `MiB` = 2²⁰ bytes; energy in J per inference), whether lower or higher is
# better, and the word a verdict uses for "better".

# %%
#| export
MiB = 2**20

# SEED_ALIASES: "seed" here means the course's original code (the earlier Module 19 that other course material
# imports), not a random seed. Its bare names are kept for that material, each the alias of one explicit field
# ("<owner>.<name>": "<explicit name>"); every other key names its statistic (latency_median_ms, ...).
SEED_ALIASES: dict[str, str] = {
    "TinyMLPerf.result.mean_latency_ms": "latency_mean_ms",
    "TinyMLPerf.result.std_latency_ms": "latency_std_ms",
    "TinyMLPerf.result.p50_latency_ms": "latency_p50_ms",
    "TinyMLPerf.result.p90_latency_ms": "latency_p90_ms",
    "TinyMLPerf.result.p99_latency_ms": "latency_p99_ms",
    "TinyMLPerf.result.max_latency_ms": "latency_max_ms",
    "TinyMLPerf.result.target_latency_ms": "latency_budget_ms",
    "TinyMLPerf.benchmarks.max_latency_ms": "latency_budget_ms",
    "PerfMetrics.latency_ms": "latency_mean_ms",
    "metrics.measure_latency": "latency_result",
    "metrics.evaluate_accuracy": "accuracy_result",
    "metrics.model_memory_mb": "memory_result",
    "metrics.measure_latency_distribution": "latency_result",
    "Profiler.measure_latency": "latency_median_ms",
    "hardware.sweep.latency_ms": "latency_mean_ms",
    "hardware.precision_tradeoff_table.latency_ms_mean": "latency_mean_ms_mean",
    "hardware_profile.operator_profile.latency_ms (method 'measured: ...')": "latency_median_ms",
    "hardware_profile.operator_profile.latency_ms (method 'estimated: ...')": "roofline_bound_ms",
    "hardware_profile.totals.latency_ms": "operators_sum_ms",
}


@dataclass(frozen=True)
class MetricInfo:
    "How to read one metric: its unit, whether lower or higher is better, and the word for 'better'."

    unit: str
    direction: str  # "min" or "max"
    better: str

    higher_is_better = property(lambda self: self.direction == "max")


METRICS: dict[str, MetricInfo] = {
    "latency": MetricInfo("ms", "min", "faster"),
    "accuracy": MetricInfo("fraction", "max", "more accurate"),
    "memory": MetricInfo("bytes", "min", "smaller in peak memory"),  # integer bytes; reports render MiB
    "model_size": MetricInfo("bytes", "min", "smaller"),  # the model file's bytes (`serialized_bytes`; an .onnx file's)
    "parameter_memory": MetricInfo("bytes", "min", "smaller in parameter memory"),
    "energy": MetricInfo("J", "min", "more energy-efficient"),  # per inference; metadata carries mJ
}


def metric_info(metric: str, unit: str = "") -> MetricInfo:
    "The `MetricInfo` of `metric`; `throughput_bs{b}` metrics are higher-is-better samples/s."
    if metric in METRICS:
        return METRICS[metric]
    if metric.startswith("throughput"):
        return MetricInfo("samples/s", "max", f"higher in throughput{metric[len('throughput'):].replace('_bs', ' (batch ') + ')' if '_bs' in metric else ''}")
    return MetricInfo(unit, "min", "better")

# %% [markdown]
# ## Accuracy and byte counts are results too
#
# The other two kinds of the table at the top are `BenchmarkResult` subclasses, so every table,
# report and the capstone read `mean`, `ci_lower`, `ci_upper`, `count` from any of them. A
# `ProportionResult` keeps the per-sample outcomes (1 = right, 0 = wrong), so two models can be
# paired image by image; its interval is Wilson's (Student's t of 0/1 outcomes gives `[1, 1]`
# at 450/450). A `CountResult` is exact: counting twice gives the same number.
#
# **Your task (easy, 5 points).** Complete `ProportionResult.__post_init__`: reject an empty list
# and anything but 0s and 1s (a `ValueError` starting `values:`); set `count`, `correct`, the estimate
# (`mean`, `median`, `p50`: all `k / n`), `std`, `min`, `max`, the statistics that mean nothing for
# 0/1 outcomes (`p90`, `p95`, `p99`, `iqr`, `cv`: None; `outliers`: 0), and the interval.
#
# - *Approach:* `k = sum`, `n = len`; the interval from your `wilson_interval`; `std` is the
#   sample standard deviation (0.0 for a single outcome).
# - *Example:* `ProportionResult("accuracy", [1, 1, 1, 0])`: `mean == 0.75`, `correct == 3`, `ci_lower ≈ 0.301`.
# - *Hints:* keep `self.values` a list of ints, so two results can be paired outcome by outcome.
# - *Needs first:* `wilson_interval`.

# %% nbgrader={"grade": false, "grade_id": "results-proportion", "solution": true, "schema_version": 3}
#| export
@dataclass
class ProportionResult(BenchmarkResult):
    """`k` successes in `n` trials (e.g. top-1 accuracy), from per-sample outcomes (1 or 0).

    `mean` (and `median`) is `k / n`, `count` is `n`, `correct` is `k`, the interval is Wilson's;
    percentiles of 0/1 outcomes are None. `metadata["datasets"]` (optional) lists `{"name",
    "count"}` in the order the outcomes were concatenated, to pair two results dataset by dataset.
    """

    kind = "proportion"

    def __post_init__(self) -> None:
        ### BEGIN SOLUTION
        arr = np.asarray(list(self.values), dtype=float)
        if arr.size == 0:
            raise ValueError(f"values: expected at least one outcome for '{self.metric_name}', got none")
        if not np.all((arr == 0) | (arr == 1)):
            raise ValueError(f"values: expected per-sample outcomes of 0 or 1 for '{self.metric_name}'")
        self.values = arr.astype(int).tolist()
        self.count = int(arr.size)
        self.correct = int(arr.sum())
        p = self.correct / self.count
        self.mean = self.median = self.p50 = p
        self.std = float(arr.std(ddof=1)) if self.count > 1 else 0.0
        self.min, self.max = float(arr.min()), float(arr.max())
        self.p90 = self.p95 = self.p99 = self.iqr = self.cv = None
        self.outliers = 0
        self.ci_lower, self.ci_upper = wilson_interval(self.correct, self.count, self.confidence)
        ### END SOLUTION

    @property
    def ci_method(self) -> str:
        return f"Wilson score interval ({self.confidence:.0%})"

    def median_ci(self) -> tuple[float, float]:
        "For a proportion the interval of the estimate is the Wilson interval."
        return self.ci_lower, self.ci_upper

    def per_dataset_outcomes(self) -> dict[str, list[int]]:
        "Outcomes split by `metadata['datasets']` (one entry 'all' when there is none)."
        parts = self.metadata.get("datasets") or [{"name": "all", "count": self.count}]
        out, start = {}, 0
        for d in parts:
            out[str(d["name"])] = self.values[start:start + int(d["count"])]
            start += int(d["count"])
        if start != self.count:
            raise ValueError(f"metadata: the datasets' counts add up to {start}, but there are {self.count} outcomes")
        return out

    def __str__(self) -> str:
        return (f"{self.metric_name}: {self.mean:.4g} ({self.correct}/{self.count}, "
                f"Wilson {self.confidence:.0%} [{self.ci_lower:.4g}, {self.ci_upper:.4g}])")


@dataclass
class CountResult(BenchmarkResult):
    "An exact figure (bytes, MACs, parameters): one value (kept an int when given ints), no sampling error, zero-width interval."

    kind = "count"

    def __post_init__(self) -> None:
        arr = np.asarray(list(self.values), dtype=float)
        if arr.size == 0 or not np.all(np.isfinite(arr)):
            raise ValueError(f"values: expected one finite value for '{self.metric_name}', got {list(self.values)!r}")
        if np.any(arr != arr[0]):
            raise ValueError(f"values: an exact count has one value; '{self.metric_name}' got differing values {arr.tolist()}")
        exact = all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in self.values)
        v = int(self.values[0]) if exact else float(arr[0])  # integer bytes stay integers
        self.values = [v] * arr.size
        self.count = int(arr.size)
        self.mean = self.median = self.min = self.max = self.p50 = self.p90 = self.p95 = self.p99 = v
        self.std, self.iqr, self.outliers = 0.0, 0.0, 0
        self.cv = 0.0 if v != 0 else None
        self.ci_lower = self.ci_upper = v

    @property
    def ci_method(self) -> str:
        return "exact value (zero-width interval)"

    def median_ci(self) -> tuple[float, float]:
        return self.mean, self.mean

    def __str__(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return f"{self.metric_name}: {self.mean:.6g}{u} (exact)"

# %% nbgrader={"grade": true, "grade_id": "test-results-proportion", "locked": true, "points": 5, "schema_version": 3}
def test_unit_proportion_result():
    r = ProportionResult("accuracy", [1] * 450, unit="fraction")
    assert (r.ci_lower, r.ci_upper) == wilson_interval(450, 450), (
        f"450/450: expected the Wilson interval {wilson_interval(450, 450)}, got ({r.ci_lower}, {r.ci_upper}); "
        "a Student-t interval of 0/1 outcomes collapses to (1, 1) here")
    r = ProportionResult("accuracy", [1, 1, 1, 0], unit="fraction")
    assert (r.correct, r.count) == (3, 4), f"correct/count: expected (3, 4), got ({r.correct}, {r.count})"
    assert r.mean == r.median == r.p50 == 0.75, f"the estimate k/n = 0.75 is mean, median and p50; got {r.mean}, {r.median}, {r.p50}"
    assert abs(r.std - statistics.stdev([1, 1, 1, 0])) < 1e-12, "std: the sample standard deviation of the outcomes"
    assert (r.min, r.max) == (0.0, 1.0) and r.values == [1, 1, 1, 0] and all(type(v) is int for v in r.values), \
        f"expected min 0.0, max 1.0, the outcomes as Python ints [1, 1, 1, 0], got {r.min}, {r.max}, {r.values!r}"
    assert r.p90 is None and r.p95 is None and r.p99 is None and r.iqr is None and r.cv is None and r.outliers == 0, \
        "percentiles and spreads of 0/1 outcomes mean nothing: None (outliers 0)"
    assert (r.ci_lower, r.ci_upper) == wilson_interval(3, 4), f"3 of 4: expected {wilson_interval(3, 4)}, got {(r.ci_lower, r.ci_upper)}"
    assert ProportionResult("accuracy", [0]).std == 0.0, "a single outcome has std 0.0"
    assert BenchmarkResult.from_dict(r.to_dict()).to_dict() == r.to_dict(), "a proportion survives a round trip"
    ### BEGIN HIDDEN TESTS
    hidden_property("a proportion result (k of n with its Wilson interval) for other outcomes")
    rng = grading_rng()
    n = int(rng.integers(2, 600))
    outcomes = [int(v) for v in rng.random(n) < rng.uniform(0.3, 0.98)]
    form = int(rng.integers(0, 3))  # ints, booleans or floats 0.0/1.0: all are 0/1 outcomes
    given = outcomes if form == 0 else [bool(v) for v in outcomes] if form == 1 else [float(v) for v in outcomes]
    r = ProportionResult("accuracy", given, unit="fraction")
    k = sum(outcomes)
    case = f"{k} right of {n} ({['ints', 'booleans', 'floats'][form]})"
    assert (r.correct, r.count) == (k, n), f"{case}: expected correct={k}, count={n}, got {r.correct}, {r.count}"
    assert all(math.isclose(v, k / n, rel_tol=1e-12) for v in (r.mean, r.median, r.p50)), (
        f"{case}: the estimate k/n = {k / n} is mean, median and p50, got {r.mean}, {r.median}, {r.p50}")
    assert math.isclose(r.std, statistics.stdev(outcomes), rel_tol=1e-9, abs_tol=1e-12), (
        f"{case}: std expected the sample standard deviation of the outcomes {statistics.stdev(outcomes)}, got {r.std}")
    assert (r.min, r.max) == (float(min(outcomes)), float(max(outcomes))), (
        f"{case}: expected min/max {(min(outcomes), max(outcomes))}, got {(r.min, r.max)}")
    values = list(r.values)
    assert values == outcomes and all(type(v) is int for v in values), (
        f"{case}: values must be kept as the list of int outcomes, in order (first ten expected {outcomes[:10]}, "
        f"got {values[:10]}, types {sorted({type(v).__name__ for v in values})})")
    assert (r.p90, r.p95, r.p99, r.iqr, r.cv, r.outliers) == (None, None, None, None, None, 0), (
        f"{case}: percentiles and spreads of 0/1 outcomes mean nothing: expected None (outliers 0), got "
        f"{(r.p90, r.p95, r.p99, r.iqr, r.cv, r.outliers)}")
    want = wilson_interval(k, n)
    assert np.allclose([r.ci_lower, r.ci_upper], want, rtol=1e-12, atol=1e-15), (
        f"{case}: expected the Wilson interval {want}, got ({r.ci_lower}, {r.ci_upper})")
    assert BenchmarkResult.from_dict(r.to_dict()).to_dict() == r.to_dict(), "a proportion survives a round trip"
    v = int(rng.integers(0, 2))
    one = ProportionResult("accuracy", [v])
    assert (one.correct, one.count, one.std, one.mean) == (v, 1, 0.0, float(v)), (
        f"[{v}]: expected correct {v}, count 1, std 0.0, mean {float(v)}; got "
        f"{(one.correct, one.count, one.std, one.mean)}")
    bad = outcomes[:int(rng.integers(1, 9))]
    bad[int(rng.integers(0, len(bad)))] = [2, -1, 0.5, 3][int(rng.integers(0, 4))]
    expect_error(ProportionResult, "accuracy", bad, name="values")
    expect_error(ProportionResult, "accuracy", [], name="values")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_proportion_result()

# %% [markdown]
# ## Comparing any two results
#
# `compare_results(a, b)` picks the comparison of the table at the top that fits the kind of
# result, so a caller never has to know which test applies; every verdict names both models.
#
# **Your task (medium, 5 points).** Complete the dispatch in `compare_results` (below
# `_compare_proportions`): two proportions go to `_compare_proportions`; two sample results with
# at least 2 values each go to `compare_samples` (direction and word from `info`); anything else
# is compared by the ratio of medians alone: set `ratio` (two zero medians: 1; over one zero
# median: infinite with the sign of `b`), `exact` (both are `CountResult`s) and `significant`
# (the one rule, no p-value). *Hint:* every kind is a `BenchmarkResult`: test the exact type.
#
# **Your task (hard, 10 points).** Complete `_compare_proportions`, the paired comparison of
# two accuracies (the `Comparison` and its verdict are built for you).
#
# - *TODO:* pair the outcomes of the datasets both results evaluated with the same number of
#   samples (none: a `ValueError` starting `b:`); set `acc_a`, `acc_b`, `test` (McNemar), `lo, hi`
#   (interval of the ratio), `d_lo, d_hi` (of the difference), `diff` and `significant`.
# - *Approach:* the images are the same for both models, so every resample draws the *same*
#   images for both; the effect is the difference in accuracy.
# - *Example:* 100 images, A right on 90, B on the same 90 and 6 more: `diff == 0.06`, McNemar
#   `p = 0.031`, and every paired resample has B ≥ A, so `d_lo > 0`.
# - *Hints:* `per_dataset_outcomes()`; the resampler's `paired` flag; level `1 − alpha`.
#   Resampled independently, the interval of the difference spans zero even here.
# - *Needs first:* the dispatch in `compare_results` (the task above: this task's test calls `compare_results`),
#   `wilson_interval`, `bootstrap_interval`, `mcnemar_exact`, `ProportionResult`; the dispatch's test also
#   `BenchmarkResult` and `compare_samples`.

# %% nbgrader={"grade": false, "grade_id": "results-compare-proportions", "solution": true, "schema_version": 3}
#| export
def _compare_proportions(ra: ProportionResult, rb: ProportionResult, names: tuple[str, str], alpha: float,
                         min_effect: float, n_boot: int, seed: int) -> Comparison:
    name_a, name_b = names
    ### BEGIN SOLUTION
    pa, pb = ra.per_dataset_outcomes(), rb.per_dataset_outcomes()
    shared = [d for d in pa if d in pb and len(pa[d]) == len(pb[d])]
    if not shared:
        raise ValueError(f"b: '{name_a}' and '{name_b}' share no evaluated dataset of the same size; "
                         "a paired accuracy test needs the same samples")
    ca = np.array([v for d in shared for v in pa[d]], dtype=float)
    cb = np.array([v for d in shared for v in pb[d]], dtype=float)
    acc_a, acc_b = float(ca.mean()), float(cb.mean())
    test = mcnemar_exact(ca, cb)
    lo, hi = bootstrap_interval(lambda x, y: y.mean(axis=1) / x.mean(axis=1), [ca, cb], paired=True,
                                n_boot=n_boot, seed=seed, confidence=1 - alpha)
    d_lo, d_hi = bootstrap_interval(lambda x, y: y.mean(axis=1) - x.mean(axis=1), [ca, cb], paired=True,
                                    n_boot=n_boot, seed=seed, confidence=1 - alpha)
    diff = acc_b - acc_a
    significant = is_significant(test["p_value"], diff, alpha, min_effect)
    ### END SOLUTION
    c = Comparison(name_a, name_b, ra.metric_name, acc_a, acc_b, acc_b / acc_a if acc_a else math.inf, lo, hi,
                   test["p_value"], significant, test="McNemar exact (paired per-sample correctness)",
                   n_a=int(ca.size), n_b=int(cb.size), alpha=alpha, min_effect=min_effect,
                   bootstrap_resamples=n_boot, seed=seed, higher_is_better=True,
                   details={"difference": diff, "difference_ci": [d_lo, d_hi], "a_only_correct": test["a_only"],
                            "b_only_correct": test["b_only"], "datasets": shared})
    c.outcome = comparison_outcome(significant, (d_lo, d_hi), min_effect, center=0.0)
    c.why = _outcome_why(c, d_lo, d_hi, center=0.0)
    winner, loser = (name_b, name_a) if diff > 0 else (name_a, name_b)
    c.verdict = {"different": f"{winner} is {abs(diff) * 100:.1f} points more accurate than {loser} "
                              f"(McNemar {_format_p(test['p_value'])})",
                 "equivalent": f"{name_a} and {name_b} are equally accurate ({diff * 100:+.1f} points, McNemar "
                               f"{_format_p(test['p_value'])}): {c.why}"}.get(
        c.outcome, f"inconclusive between {name_a} and {name_b} ({diff * 100:+.1f} points, McNemar "
                   f"{_format_p(test['p_value'])}; {test['a_only']} vs {test['b_only']} disagreements): {c.why}")
    return c


CPU_SERIES = ("the timing thread's CPU time per call (cpu_per_call_ms): a sample's wall time includes any time the machine "
              "gave the CPU to another program, its CPU time does not, so the comparison holds on a busy machine")


def cpu_series(a: BenchmarkResult, b: BenchmarkResult) -> tuple[BenchmarkResult, BenchmarkResult] | None:
    """Both timings' CPU-time series as results of their own, or None when either has none (then the wall
    times are compared): `metadata["cpu_values"]` (the result's quantity from CPU time), or for a result in
    ms the timing core's `metadata["cpu_per_call_ms"]` (one per sample, read at one thread), where the timing
    core found them comparable (`metadata["cpu_comparable"]`: not a model that waits by design)."""
    cpu = [r.metadata.get("cpu_values", r.metadata.get("cpu_per_call_ms") if r.unit == "ms" else None)
           if type(r) is BenchmarkResult and r.metadata.get("cpu_comparable") else None for r in (a, b)]
    if any(not isinstance(v, list) or len(v) != r.count or r.count < 2 or None in v for v, r in zip(cpu, (a, b))):
        return None
    return tuple(BenchmarkResult(r.metric_name, v, unit=r.unit, metadata={"series": "cpu"}) for v, r in zip(cpu, (a, b)))


def compare_results(a: BenchmarkResult, b: BenchmarkResult, *, names: tuple[str, str] = ("a", "b"),
                    info: MetricInfo | None = None, alpha: float = ALPHA, min_effect: float = MIN_EFFECT, n_boot: int = 2000,
                    seed: int = 0) -> Comparison:
    """Compare result `b` against result `a` of the same metric with the test that fits their kind:
    Mann-Whitney U for samples, McNemar (paired) for proportions, the effect floor alone for exact values.
    Two timings that both carry CPU time per sample are compared on it (`cpu_series`; `details["series"]` and
    the verdict's "[CPU time]" say so)."""
    for r, arg in ((a, "a"), (b, "b")):
        if not isinstance(r, BenchmarkResult):
            raise TypeError(f"{arg}: expected a BenchmarkResult, got {type(r).__name__}")
    info = info or metric_info(a.metric_name, a.unit)
    if (cpu := cpu_series(a, b)) is not None:  # two timings with CPU time per sample: compare what a model costs
        c = compare_results(*cpu, names=names, info=info, alpha=alpha, min_effect=min_effect, n_boot=n_boot, seed=seed)
        c.details["series"], c.verdict = CPU_SERIES, f"{c.verdict} [CPU time]"
        return c
    ### BEGIN SOLUTION
    if isinstance(a, ProportionResult) and isinstance(b, ProportionResult):
        return _compare_proportions(a, b, names, alpha, min_effect, n_boot, seed)
    if type(a) is BenchmarkResult and type(b) is BenchmarkResult and a.count >= 2 and b.count >= 2:
        return compare_samples(a.values, b.values, names=names, metric=a.metric_name,
                               higher_is_better=info.higher_is_better, better=info.better, alpha=alpha,
                               min_effect=min_effect, n_boot=n_boot, seed=seed)
    if a.median == 0:  # a ratio over zero: equal zeros are no difference, anything else is infinitely far
        ratio = 1.0 if b.median == 0 else math.copysign(math.inf, b.median)
    else:
        ratio = b.median / a.median
    exact = isinstance(a, CountResult) and isinstance(b, CountResult)
    significant = is_significant(None, ratio - 1, alpha, min_effect)
    ### END SOLUTION
    c = Comparison(names[0], names[1], a.metric_name, a.median, b.median, ratio, None, None, None,
                   significant=significant,
                   test="exact values (no sampling error, no test)" if exact else "single measurement each (no test)",
                   n_a=a.count, n_b=b.count, alpha=alpha, min_effect=min_effect,
                   higher_is_better=info.higher_is_better)
    c.outcome = comparison_outcome(significant, (ratio, ratio) if exact else None, min_effect)
    c.why = (_outcome_why(c, None, None) if not exact or c.outcome == "different" else
             f"exact values: the ratio {ratio:.3f} is within 1 ± {min_effect:.0%}")
    c.verdict = (_verdict_text(c, info.better).replace("(no test)", "(exact values)" if exact else "(single measurement each)")
                 if c.outcome == "different" else _verdict_text(c, info.better).replace(", no test)", ")"))
    return c

# %% nbgrader={"grade": true, "grade_id": "test-results-compare-proportions", "locked": true, "points": 10, "schema_version": 3}
def test_unit_compare_proportions():
    a = ProportionResult("accuracy", [1] * 90 + [0] * 10)
    b = ProportionResult("accuracy", [1] * 90 + [1] * 6 + [0] * 4)  # right on A's 90 and on 6 more
    c = compare_results(a, b, names=("fp32", "int8"))
    lo, hi = c.details["difference_ci"]
    assert lo is not None and lo > 0, (
        f"difference_ci: every paired resample has int8 >= fp32, so the interval is above 0; got [{lo}, {hi}]"
        + (" -- that is an independent resampling; draw the same images for both models (paired)" if lo < 0 else ""))
    assert abs(c.details["difference"] - 0.06) < 1e-12, f"difference: expected 0.96 - 0.90 = 0.06, got {c.details['difference']}"
    p = _stats.binomtest(6, 6, 0.5).pvalue
    assert abs(c.p_value - p) < 1e-12, f"p_value: expected McNemar's exact p = {p:.4f} (6 vs 0 disagreements), got {c.p_value}"
    assert (c.details["a_only_correct"], c.details["b_only_correct"]) == (0, 6), f"expected 0 and 6, got {c.details}"
    assert c.significant and c.winner == "int8" and "int8" in c.verdict and "fp32" in c.verdict, \
        f"expected a significant win of int8, its verdict naming int8 and fp32, got {c.winner}, {c.verdict!r}"
    ratio_lo, ratio_hi = c.ci_lower, c.ci_upper
    assert ratio_lo is not None and 1 <= ratio_lo <= ratio_hi, f"the ratio's paired interval is at or above 1, got [{ratio_lo}, {ratio_hi}]"
    many_a = ProportionResult("accuracy", [1] * 9000 + [0] * 1000)
    many_b = ProportionResult("accuracy", [1] * 9000 + [1] * 100 + [0] * 900)
    small = compare_results(many_a, many_b)
    assert small.p_value < 0.05 and not small.significant, (
        f"a 1-point gain (p = {small.p_value:.2g}) is below the 2-point floor: not significant; got {small.significant}")
    expect_error(compare_results, a, ProportionResult("accuracy", [1] * 50), name="b")  # 100 against 50 samples: no pairs
    ### BEGIN HIDDEN TESTS
    hidden_property("comparing two proportions for other outcomes, alphas and effect floors")
    rng = grading_rng()
    seed, n_boot = int(rng.integers(0, 2**31)), int(rng.integers(200, 800))
    alpha, floor = [0.01, 0.05, 0.1][int(rng.integers(0, 3))], [0.01, 0.02, 0.05][int(rng.integers(0, 3))]
    ds = [f"set_{c}" for c in rng.permutation(list("abcdefgh"))[:4]]
    sizes = [int(v) for v in rng.integers(30, 150, size=4)]
    acc = float(rng.uniform(0.6, 0.9))
    parts_a = {d: (rng.random(s) < acc).astype(int) for d, s in zip(ds[:3], sizes[:3])}
    shared = ds[1:3]  # the datasets both evaluated with the same number of samples, in the same order
    ca = np.concatenate([parts_a[d] for d in shared])
    cb = ca.copy()
    wrong_a, right_a = np.flatnonzero(ca == 0), np.flatnonzero(ca == 1)
    n10 = int(rng.integers(0, min(25, wrong_a.size) + 1))  # B right where A was wrong
    n01 = int(rng.integers(0, min(25, right_a.size) + 1))  # B wrong where A was right
    cb[rng.choice(wrong_a, n10, replace=False)] = 1
    cb[rng.choice(right_a, n01, replace=False)] = 0
    parts_b = dict(zip(shared, np.split(cb, [sizes[1]])))
    if rng.random() < 0.5:  # B evaluated the first dataset with other samples: it cannot be paired
        parts_b = {ds[0]: (rng.random(sizes[0] + int(rng.integers(1, 20))) < acc).astype(int), **parts_b}
    else:  # B did not evaluate the first dataset, but another one
        parts_b = {**parts_b, ds[3]: (rng.random(sizes[3]) < acc).astype(int)}
    n = ca.size
    diff = (n10 - n01) / n
    if abs(abs(diff) - floor) < 1e-6:
        floor += 0.5 / n  # keep the effect off the floor itself

    def result(parts):
        return ProportionResult("accuracy", [int(v) for p in parts.values() for v in p],
                                metadata={"datasets": [{"name": d, "count": int(len(p))} for d, p in parts.items()]})

    ra, rb = result(parts_a), result(parts_b)
    c = _compare_proportions(ra, rb, ("ref", "cand"), alpha, floor, n_boot, seed)
    case = (f"A on {[(d, len(p)) for d, p in parts_a.items()]}, B on {[(d, len(p)) for d, p in parts_b.items()]} "
            f"({n01} right by A alone, {n10} by B alone on the {n} paired samples)")
    assert list(c.details["datasets"]) == shared, f"{case}: expected to pair the datasets {shared}, got {c.details['datasets']}"
    assert math.isclose(c.median_a, ca.mean(), rel_tol=1e-12) and math.isclose(c.median_b, cb.mean(), rel_tol=1e-12), (
        f"{case}: expected the paired accuracies {ca.mean()}, {cb.mean()}, got {c.median_a}, {c.median_b}")
    assert math.isclose(c.details["difference"], diff, rel_tol=1e-9, abs_tol=1e-12), (
        f"{case}: expected the difference acc_b - acc_a = {diff}, got {c.details['difference']}")
    p = float(_stats.binomtest(n10, n01 + n10, 0.5).pvalue) if n01 + n10 else 1.0
    assert (c.details["a_only_correct"], c.details["b_only_correct"]) == (n01, n10) and math.isclose(c.p_value, p), (
        f"{case}: expected McNemar a_only={n01}, b_only={n10}, p = {p:.6g}; got {c.details['a_only_correct']}, "
        f"{c.details['b_only_correct']}, p = {c.p_value}")
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    q = [50 * alpha, 100 - 50 * alpha]
    want_d = np.percentile(cb[idx].mean(axis=1) - ca[idx].mean(axis=1), q)
    want_r = np.percentile(cb[idx].mean(axis=1) / ca[idx].mean(axis=1), q)
    got_d = c.details["difference_ci"]
    assert got_d[0] is not None and np.allclose(got_d, want_d, rtol=1e-9, atol=1e-12), (
        f"{case}, n_boot={n_boot}, seed={seed}, alpha={alpha}: expected the paired bootstrap interval of the "
        f"difference {want_d.tolist()}, got {got_d}"
        + (" -- that is an independent resampling; draw the same samples for both models (paired)"
           if got_d[0] is not None and np.allclose(got_d, bootstrap_interval(lambda x, y: y.mean(axis=1) - x.mean(axis=1), [ca, cb],
                                                    n_boot=n_boot, seed=seed, confidence=1 - alpha)) else ""))
    assert c.ci_lower is not None and np.allclose([c.ci_lower, c.ci_upper], want_r, rtol=1e-9), (
        f"{case}, n_boot={n_boot}, seed={seed}, alpha={alpha}: expected the paired bootstrap interval of the ratio "
        f"{want_r.tolist()}, got [{c.ci_lower}, {c.ci_upper}]")
    significant = abs(diff) >= floor and p < alpha
    assert c.significant == significant, (
        f"{case}: difference {diff:.4f}, p = {p:.3g} with alpha={alpha}, min_effect={floor:.4f}: expected "
        f"significant={significant}, got {c.significant}")
    other = {d: (rng.random(len(p) + int(rng.integers(1, 10))) < acc).astype(int) for d, p in parts_a.items()}
    expect_error(_compare_proportions, ra, result(other), ("ref", "cand"), alpha, floor, n_boot, seed, name="b")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_compare_proportions()

# %% nbgrader={"grade": true, "grade_id": "test-results-compare-results", "locked": true, "points": 5, "schema_version": 3}
def test_unit_compare_results():
    # the three kinds through one entry point: compare_results picks the test
    lat_a = BenchmarkResult("latency", [1.0, 1.1, 0.9, 1.0, 1.05, 0.95], unit="ms")
    lat_b = BenchmarkResult("latency", [2.0, 2.2, 1.8, 2.0, 2.1, 1.9], unit="ms")
    c = compare_results(lat_a, lat_b, names=("fp32", "fp16"))
    assert c.test.startswith("Mann-Whitney") and c.winner == "fp32", f"samples: expected Mann-Whitney, fp32 faster; got {c.test!r}, {c.verdict!r}"
    acc_a = ProportionResult("accuracy", [1] * 90 + [0] * 10)
    acc_b = ProportionResult("accuracy", [1] * 60 + [0] * 40)
    c = compare_results(acc_a, acc_b, names=("big", "small"))
    assert c.test.startswith("McNemar") and c.winner == "big", (
        f"proportions: expected the paired McNemar comparison, got {c.test!r}"
        + (" -- a ProportionResult is also a BenchmarkResult: test the exact type" if c.test.startswith("Mann") else ""))
    size_a = CountResult("model_size", [1.0], unit="MiB")
    size_b = CountResult("model_size", [0.25], unit="MiB")
    c = compare_results(size_a, size_b, names=("fp32", "int8"))
    assert (c.ratio, c.winner, c.p_value, c.ci_lower) == (0.25, "int8", None, None), (
        f"counts: expected ratio 0.25, int8 smaller, no p-value, no interval; got {(c.ratio, c.winner, c.p_value, c.ci_lower)}")
    assert "exact" in c.test and "exact values" in c.verdict, f"counts are exact values: got {c.test!r}, {c.verdict!r}"
    one = compare_results(BenchmarkResult("latency", [2.0]), BenchmarkResult("latency", [1.0]))
    assert one.ratio == 0.5 and one.p_value is None and "single measurement" in one.test, (
        f"single values: no test, ratio 0.5; got {one.ratio}, {one.test!r}")
    tiny = compare_results(CountResult("model_size", [1.0]), CountResult("model_size", [0.99]))
    assert not tiny.significant, "a 1% smaller count is below the 2% floor: not significant"
    zero = compare_results(CountResult("energy", [0.0]), CountResult("energy", [0.0]))
    assert zero.ratio == 1.0 and not zero.significant, f"two zeros: ratio 1, no difference; got {zero.ratio}"
    inf = compare_results(CountResult("energy", [0.0]), CountResult("energy", [1.0]))
    assert inf.ratio == math.inf, f"1 against 0: an infinite ratio, got {inf.ratio}"
    # the kinds survive a round trip through to_dict / from_dict
    for r in (lat_a, acc_a, size_a):
        back = BenchmarkResult.from_dict(r.to_dict())
        assert type(back) is type(r) and back.to_dict() == r.to_dict(), \
            f"from_dict(to_dict()): expected {type(r).__name__} {r.to_dict()}, got {type(back).__name__} {back.to_dict()}"
    ### BEGIN HIDDEN TESTS
    hidden_property("compare_results on other timing and proportion results")
    rng = grading_rng()
    seed, n_boot = int(rng.integers(0, 2**31)), int(rng.integers(200, 800))
    alpha, floor = [0.01, 0.05, 0.1][int(rng.integers(0, 3))], [0.01, 0.02, 0.05][int(rng.integers(0, 3))]
    opts = dict(alpha=alpha, min_effect=floor, n_boot=n_boot, seed=seed)
    # two sample results: compare_samples, with the metric's direction and the options passed on
    metric, higher = [("latency", False), ("energy", False), ("throughput_bs8", True)][int(rng.integers(0, 3))]
    xa = (rng.uniform(1, 5) * rng.lognormal(0, 0.05, int(rng.integers(5, 20)))).round(5)
    xb = (xa.mean() * rng.uniform(1.3, 2.5) ** (1 if rng.random() < 0.5 else -1)
          * rng.lognormal(0, 0.05, int(rng.integers(5, 20)))).round(5)
    c = compare_results(BenchmarkResult(metric, xa.tolist()), BenchmarkResult(metric, xb.tolist()), names=("p", "q"), **opts)
    ratio = statistics.median(xb.tolist()) / statistics.median(xa.tolist())
    p = float(_stats.mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    assert c.test.startswith("Mann-Whitney") and math.isclose(c.ratio, ratio, rel_tol=1e-12) and math.isclose(c.p_value, p), (
        f"two {metric} samples (n={xa.size}, {xb.size}): expected the Mann-Whitney comparison with ratio {ratio:.6g} and "
        f"p = {p:.4g}, got {c.test!r}, ratio {c.ratio}, p {c.p_value}")
    assert (c.higher_is_better, c.alpha, c.min_effect, c.bootstrap_resamples, c.seed) == (higher, alpha, floor, n_boot, seed), (
        f"{metric}: expected higher_is_better={higher} (from the metric) and alpha, min_effect, n_boot, seed passed on "
        f"{(alpha, floor, n_boot, seed)}; got {(c.higher_is_better, c.alpha, c.min_effect, c.bootstrap_resamples, c.seed)}")
    # two proportions: the paired McNemar comparison
    m = int(rng.integers(20, 200))
    pa, pb = ([int(v) for v in rng.random(m) < rng.uniform(0.5, 0.95)] for _ in range(2))
    c = compare_results(ProportionResult("accuracy", pa), ProportionResult("accuracy", pb), **opts)
    assert c.test.startswith("McNemar"), (
        f"two proportions: expected the paired McNemar comparison, got {c.test!r}"
        + (" -- a ProportionResult is also a BenchmarkResult: test the exact type" if c.test.startswith("Mann") else ""))
    # two exact counts (an exact count may list its one value several times): the ratio alone, no test
    metric, higher = [("model_size", False), ("memory", False), ("throughput_bs4", True)][int(rng.integers(0, 3))]
    va = round(float(rng.uniform(1, 100)), 3)
    vb = round(va * float([rng.uniform(0.3, 3), 1 + rng.uniform(-floor, floor) * 0.9][int(rng.integers(0, 2))]), 3)
    if abs(abs(vb / va - 1) - floor) < 1e-6:
        vb = round(va * (1 + 2 * floor), 3)
    ka, kb = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    c = compare_results(CountResult(metric, [va] * ka), CountResult(metric, [vb] * kb), names=("p", "q"), **opts)
    significant = abs(vb / va - 1) >= floor
    winner = None if not significant else "q" if (vb > va) == higher else "p"
    assert "exact" in c.test and c.p_value is None and c.ci_lower is None and math.isclose(c.ratio, vb / va, rel_tol=1e-12), (
        f"{metric} counts {[va] * ka} and {[vb] * kb}: expected an exact comparison (no test, no interval) with ratio "
        f"{vb / va:.6g}; got {c.test!r}, p {c.p_value}, interval ({c.ci_lower}, {c.ci_upper}), ratio {c.ratio}"
        + (" -- a CountResult is also a BenchmarkResult: test the exact type" if c.test.startswith("Mann") else ""))
    assert c.significant == significant and c.winner == winner, (
        f"{metric} counts {va} and {vb} (ratio {vb / va:.4f}, floor {floor}): expected significant={significant}, "
        f"winner {winner}; got {c.significant}, {c.winner}")
    # one single measurement, or a count against samples: the ratio of medians alone
    single = round(float(rng.uniform(1, 10)), 3)
    c = compare_results(BenchmarkResult("latency", [single]), BenchmarkResult("latency", xb.tolist()), **opts)
    want = statistics.median(xb.tolist()) / single
    assert c.p_value is None and math.isclose(c.ratio, want, rel_tol=1e-12), (
        f"one value {single} against {xb.size} samples: expected no test and the ratio of medians {want:.6g}, got "
        f"{c.test!r}, p {c.p_value}, ratio {c.ratio}")
    c = compare_results(CountResult("latency", [single, single]), BenchmarkResult("latency", xa.tolist()), **opts)
    want = statistics.median(xa.tolist()) / single
    assert c.p_value is None and "exact values" not in c.test and math.isclose(c.ratio, want, rel_tol=1e-12), (
        f"an exact count against {xa.size} samples: expected the ratio of medians {want:.6g}, no test, not 'exact' "
        f"(only two counts are exact); got {c.test!r}, p {c.p_value}, ratio {c.ratio}")
    # zero medians
    sign = 1.0 if rng.random() < 0.5 else -1.0
    c = compare_results(CountResult("energy", [0.0]), CountResult("energy", [sign * single]), **opts)
    assert c.ratio == sign * math.inf, f"{sign * single} against 0: expected the ratio {sign * math.inf}, got {c.ratio}"
    c = compare_results(CountResult("energy", [0.0] * ka), CountResult("energy", [0.0] * kb), **opts)
    assert c.ratio == 1.0 and not c.significant, f"two zeros: expected ratio 1 and no difference, got {c.ratio}, {c.significant}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_compare_results()

# %% [markdown]
# ## One way to read evaluation data, one top-1 evaluation
#
# Evaluation data comes in many shapes (the `EvalData` docstring lists them); `EvalData` turns
# each into batches of `(x, y or None)`, and `top1_correct` runs a model over them once — eval
# mode, `inference_mode`, through the one adapter — returning the per-sample outcomes a
# `ProportionResult` is made of. Every accuracy in the library comes from this function.
#
# **Your task (medium, 15 points).** Complete `EvalData.batches`, `as_eval_sets` and the loop of
# `top1_correct`: every form of data to batches, and one outcome (1 right, 0 wrong) per labelled
# sample, in order, with the checks that stop a wrong model or wrong labels from producing a
# plausible-looking accuracy.
#
# - *TODO:* `batches`: from a loader (items `(x, y)`, `(x,)` or a bare `x`; labels through
#   `_labels_tensor`), or `batch_size` slices of the tensors. `as_eval_sets`: one set or a list
#   (a single `(X, y)` pair of arrays is *one* set), names from `dataset_names`, a `.name`, or
#   `dataset{i}`, unique. `top1_correct`: per batch, run the model, check the output's shape and
#   that the labels fit its classes, collect the outcomes. Labels outside the model's classes are a
#   `ValueError` naming the dataset, the model and its class count, with the words `labels do not match`
#   (the accuracy loop of notebook 3 looks for them); a wrong shape is `checked_output`'s `ValueError`
#   (it starts `model '<name>' on dataset '<name>'` and says `shape`).
# - *Approach:* the adapter feeds (`to_input`) and calls (`forward`) the model; `checked_output`
#   (below, written for you) makes the output a CPU tensor of scores, one row per sample, one column
#   per class, and checks its shape and that it is finite.
# - *Example:* an identity `Linear(2, 2)` on `[1, 0], [0, 1], [1, 0]` with labels `[0, 1, 1]` gives `[1, 1, 0]`.
# - *Hints:* which axis of a `(batch, classes)` array holds the classes? Labels of 10 classes
#   against a model with 3 outputs must fail loudly, not score 30%.
# - *Needs first:* `wilson_interval` and `ProportionResult` (the test scores the outcomes).

# %% nbgrader={"grade": false, "grade_id": "results-top1", "solution": true, "schema_version": 3}
#| export
_INPUT_KEYS = ("X", "x", "inputs", "input", "data", "images", "features")
_LABEL_KEYS = ("y", "labels", "label", "targets", "target")


def _labels_tensor(y: Any, arg: str) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
    if t.is_floating_point() and not torch.all(t == t.round()):
        raise ValueError(f"{arg}: expected integer class labels, got non-integer values")
    if t.ndim != 1:
        raise ValueError(f"{arg}: expected a 1-D tensor of class labels, got shape {tuple(t.shape)}")
    return t.long()


def as_tensor(x: Any) -> torch.Tensor:
    "A torch tensor from a tensor, an array, a nested list or a TinyTorch-style tensor (`.data`)."
    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "data") and not isinstance(x, (np.ndarray, np.generic)):  # TinyTorch-style Tensor
        x = x.data
    return torch.as_tensor(np.array(x))  # a copy: numpy scalars and read-only arrays become normal tensors


def _array_like(v: Any) -> bool:
    "A tensor, an array, a TinyTorch-style tensor, or a (nested) list of numbers."
    return isinstance(v, (torch.Tensor, np.ndarray)) or (
        isinstance(v, (list, tuple)) and len(v) > 0 and isinstance(v[0], (int, float, np.number, list))) or (
        hasattr(v, "data") and hasattr(v, "shape"))


class EvalData:
    """One evaluation set, normalised to batches of `(x tensor, y tensor or None)`.

    Accepts a `DataLoader`, a `Dataset`, `(X, y)`, `(X,)`, a bare `X`, any re-iterable of `(x, y)`
    batches, or a dict with inputs under a key of `_INPUT_KEYS` (`X`, `inputs`, `data`, ...) and
    labels under one of `_LABEL_KEYS` (`y`, `labels`, ...). A dict without array inputs has no
    samples: `has_samples` is False and `reason` says why.
    """

    def __init__(self, data: Any, name: str, batch_size: int = 256):
        from torch.utils.data import DataLoader, Dataset

        self.name, self.batch_size, self.source = name, int(batch_size), data
        self._loader = self._X = self._y = self.reason = None
        if isinstance(data, Mapping):
            x_key = next((k for k in _INPUT_KEYS if k in data and _array_like(data[k])), None)
            if x_key is None:
                self.reason = (f"dataset '{name}' is a dict without array data under any of "
                               f"{', '.join(_INPUT_KEYS)} (keys: {sorted(map(str, data))})")
                return
            y_key = next((k for k in _LABEL_KEYS if k in data and data[k] is not None), None)
            data = (data[x_key], data[y_key]) if y_key else (data[x_key],)
        if isinstance(data, DataLoader):
            self._loader = data
        elif isinstance(data, Dataset):
            self._loader = DataLoader(data, batch_size=batch_size, shuffle=False)
        elif isinstance(data, (tuple, list)) and 1 <= len(data) <= 2 and _array_like(data[0]):
            self._X = as_tensor(data[0])
            if len(data) == 2 and data[1] is not None:
                self._y = _labels_tensor(data[1], f"datasets['{name}'] labels")
                if len(self._y) != len(self._X):
                    raise ValueError(f"datasets['{name}']: {len(self._X)} inputs but {len(self._y)} labels")
        elif isinstance(data, (torch.Tensor, np.ndarray)):
            self._X = as_tensor(data)
        elif hasattr(data, "__iter__") and not isinstance(data, (str, bytes)):
            self._loader = data  # any re-iterable of (x, y) batches, e.g. a list of them
        else:
            raise TypeError(f"datasets: expected a DataLoader, a Dataset, an (X, y) pair, batches of (x, y) or "
                            f"a dict with 'X'/'y' arrays; '{name}' is a {type(data).__name__}")
        if self._X is not None and (self._X.ndim < 1 or len(self._X) == 0):
            raise ValueError(f"datasets['{name}']: expected at least one sample, got shape {tuple(self._X.shape)}")

    has_samples = property(lambda self: self.reason is None)

    def batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
        "Batches of `(x, y)`; `y` is None for unlabelled data. Nothing for a set without samples."
        if self.reason is not None:
            return
        ### BEGIN SOLUTION
        if self._loader is not None:
            for item in self._loader:
                if isinstance(item, (tuple, list)):
                    x = as_tensor(item[0])
                    y = _labels_tensor(item[1], f"datasets['{self.name}'] labels") if len(item) > 1 else None
                else:
                    x, y = as_tensor(item), None
                yield x, y
            return
        for i in range(0, len(self._X), self.batch_size):
            yield self._X[i:i + self.batch_size], None if self._y is None else self._y[i:i + self.batch_size]
        ### END SOLUTION

    @property
    def has_labels(self) -> bool:
        if self._loader is None:
            return self._y is not None
        return next((y is not None for _, y in self.batches()), False)

    def first_samples(self, n: int) -> torch.Tensor:
        "Up to `n` samples from the start of the set (fewer if the set is smaller)."
        got, count = [], 0
        for x, _ in self.batches():
            got.append(x[: n - count])
            count += len(got[-1])
            if count >= n:
                break
        if not got:
            why = f"no samples ({self.reason})" if self.reason else "the data set is empty"
            raise ValueError(f"datasets['{self.name}']: {why}")
        return torch.cat(got)

    def arrays(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        "Every sample as one `(X, y)` pair of tensors (`y` None when unlabelled)."
        pairs = list(self.batches())
        if not pairs:
            raise ValueError(f"datasets['{self.name}']: no samples" + (f" ({self.reason})" if self.reason else ""))
        xs, ys = zip(*pairs)
        return torch.cat(xs), (None if any(y is None for y in ys) else torch.cat(ys))


def as_eval_sets(datasets: Any, dataset_names: Sequence[str] | None = None, batch_size: int = 256) -> list[EvalData]:
    """The one dataset normaliser: one `EvalData` per dataset, from one set in any form `EvalData`
    accepts or a list of them (`None`: none); names from `dataset_names`, a `.name`, or `dataset{i}`."""
    from torch.utils.data import DataLoader, Dataset

    ### BEGIN SOLUTION
    if datasets is None:
        items = []
    elif isinstance(datasets, (DataLoader, Dataset, torch.Tensor, np.ndarray, Mapping, EvalData)):
        items = [datasets]
    elif (isinstance(datasets, tuple) and len(datasets) == 2
          and all(isinstance(d, (torch.Tensor, np.ndarray)) for d in datasets)):
        items = [datasets]  # a single (X, y) pair
    elif isinstance(datasets, (list, tuple)):
        items = list(datasets)
    else:
        raise TypeError(f"datasets: expected a DataLoader, a Dataset, an (X, y) pair, a dict or a list of them, "
                        f"got {type(datasets).__name__}")
    if dataset_names is not None and len(dataset_names) != len(items):
        raise ValueError(f"dataset_names: expected one name per dataset ({len(items)}), got {len(dataset_names)}")
    names = list(dataset_names) if dataset_names is not None else [
        d.name if isinstance(d, EvalData) else
        (getattr(d, "name", None) if isinstance(getattr(d, "name", None), str) else f"dataset{i}")
        for i, d in enumerate(items)]
    if len(set(names)) != len(names):
        raise ValueError(f"dataset_names: expected unique names, got {names}")
    return [d if isinstance(d, EvalData) else EvalData(d, n, batch_size) for d, n in zip(items, names)]
    ### END SOLUTION


def checked_output(out: Any, model: str, dataset: str, rows: int, first_row: int = 0, scores: bool = True) -> torch.Tensor:
    """`out` as a CPU tensor, checked: one row per sample (`rows`), `(rows, classes)` when `scores`, every value
    finite; else a `ValueError` naming the model, the dataset and the first bad row (counted from `first_row`).
    A non-finite output is a failure, never a score: `checked_output(torch.ones(2, 3), "m", "d", 2)` passes."""
    if isinstance(out, (tuple, list)):
        raise ValueError(f"model '{model}' on dataset '{dataset}': expected one tensor, got a {type(out).__name__}")
    t = as_tensor(out).detach().cpu()
    if (t.ndim != 2 if scores else t.ndim < 1) or t.shape[0] != rows or t.numel() == 0:
        raise ValueError(f"model '{model}' on dataset '{dataset}' (rows {first_row}..{first_row + rows - 1}): expected "
                         f"output of shape ({rows}, {'classes' if scores else '...'}), got {tuple(t.shape)}")
    bad = ~torch.isfinite(t.reshape(rows, -1)).all(dim=1) if t.is_floating_point() else torch.zeros(rows, dtype=torch.bool)
    if bad.any():
        i = int(bad.nonzero()[0])
        raise ValueError(f"model '{model}' on dataset '{dataset}': non-finite output (nan/inf) from row "
                         f"{first_row + i}: {t[i].flatten()[:5].tolist()}; a non-finite output cannot be scored")
    return t


def top1_correct(model: Any, data: Any) -> list[int]:
    """Per-sample top-1 outcomes (1 = right) of `model` (anything `adapt` accepts) on every labelled
    sample of `data` (an `EvalData` or anything it accepts), in eval mode under `inference_mode`;
    an output that is not `(batch, classes)` or does not cover the labels' classes is a `ValueError`."""
    from tinytorch.profiling.timing import adapt

    a = adapt(model)
    d = data if isinstance(data, EvalData) else EvalData(data, "data")
    if not d.has_labels:
        raise ValueError(f"data: '{d.name}' has no labels; top-1 accuracy needs (X, y)"
                         + (f" ({d.reason})" if d.reason else ""))
    flags = []
    with a.inference():
        ### BEGIN SOLUTION
        for x, y in d.batches():
            scores = checked_output(a.forward(a.to_input(x)), a.name, d.name, len(y), sum(map(len, flags)))
            if len(y) and (int(y.min()) < 0 or int(y.max()) >= scores.shape[1]):
                raise ValueError(f"dataset '{d.name}': labels range over [{int(y.min())}, {int(y.max())}] but model "
                                 f"'{a.name}' outputs {scores.shape[1]} classes; labels do not match the model's output")
            flags.append((scores.argmax(dim=1) == y.cpu()).to(torch.int8))
        ### END SOLUTION
    if not flags:
        raise ValueError(f"data: '{d.name}' has no samples")
    return torch.cat(flags).tolist()

# %% nbgrader={"grade": true, "grade_id": "test-results-top1", "locked": true, "points": 15, "schema_version": 3}
def test_unit_eval_data_and_top1():
    from torch.utils.data import DataLoader, TensorDataset
    lin = torch.nn.Linear(3, 3, bias=False)
    torch.nn.init.eye_(lin.weight)                         # predicts argmax(x)
    X = torch.eye(3).repeat(2, 1)                          # predictions 0 1 2 0 1 2
    y = torch.tensor([0, 1, 2, 1, 1, 0])                   # right:      1 1 1 0 1 0
    # the most telling case first: 4 samples of 3 classes, so argmax over the wrong axis gives 3 outcomes
    got = top1_correct(lin, (X[:4], y[:4]))
    assert got == [1, 1, 1, 0], (
        f"expected one outcome per sample, [1, 1, 1, 0], got {got}"
        + (" -- that is an argmax over the batch (dim=0); the class is the argmax of each row (dim=1)"
           if len(got) == 3 else ""))
    # eval mode: a model with dropout must give the same outcomes on every call
    drop = torch.nn.Sequential(torch.nn.Dropout(0.9), lin)
    got, training = in_student_process(lambda m, d: (top1_correct(m, d), m.training), drop, (X, y))
    assert got == [1, 1, 1, 0, 1, 0] and training, \
        "dropout active while evaluating: run the model through the adapter's inference() (eval mode), then restore"
    forms = [(X, y), TensorDataset(X, y), DataLoader(TensorDataset(X, y), batch_size=4), (X.numpy(), y.numpy()),
             {"X": X, "y": y}, {"inputs": X.numpy(), "labels": y.tolist()}]
    for data in forms:
        got = top1_correct(lin, data)
        assert got == [1, 1, 1, 0, 1, 0], f"{type(data).__name__}: hand count is 1 1 1 0 1 0, got {got}"
    assert as_eval_sets(None) == [], "None: no sets"
    assert len(as_eval_sets((X, y))) == 1, "a single (X, y) pair of tensors is one set, not two"
    sets = as_eval_sets([(X, y), (X,)], dataset_names=["train", "unlabelled"], batch_size=4)
    assert [d.name for d in sets] == ["train", "unlabelled"] and not sets[1].has_labels, \
        f"expected sets 'train' and 'unlabelled' (no labels), got {[d.name for d in sets]}, labels {sets[1].has_labels}"
    assert [len(x) for x, _ in sets[0].batches()] == [4, 2], "batches of batch_size=4 from 6 samples: 4 and 2"
    got = [d.name for d in as_eval_sets([(X, y), (X, y)])]
    assert got == ["dataset0", "dataset1"], f"unnamed sets: expected ['dataset0', 'dataset1'], got {got}"
    expect_error(as_eval_sets, [(X, y)], dataset_names=["a", "b"], name="dataset_names")
    expect_error(as_eval_sets, [(X, y), (X, y)], dataset_names=["a", "a"], name="dataset_names")
    expect_error(as_eval_sets, 3.5, name="datasets", error=TypeError)
    no_data = as_eval_sets([{"name": "baseline"}])[0]
    assert not no_data.has_samples and not no_data.has_labels and "without array data" in no_data.reason, \
        f"no arrays: expected no samples, no labels, a reason saying 'without array data', got {no_data.reason!r}"
    try:
        top1_correct(lin, (X, torch.tensor([0, 1, 2, 3, 4, 5])))
    except ValueError as e:
        assert "labels do not match" in str(e) and "3" in str(e), (
            f"the error should say 'labels do not match' and the model's 3 classes, got: {e}")
    else:
        raise AssertionError("labels up to 5 with a 3-class model: expected a ValueError, not a low accuracy")
    expect_error(top1_correct, torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0)), (X, y), name="model",
                 says="shape")
    r = ProportionResult("accuracy", top1_correct(lin, (X, y)), unit="fraction")
    assert (r.correct, r.count) == (4, 6) and (r.ci_lower, r.ci_upper) == wilson_interval(4, 6), \
        f"expected 4 of 6, interval {wilson_interval(4, 6)}, got {r.correct} of {r.count}, {(r.ci_lower, r.ci_upper)}"
    ### BEGIN HIDDEN TESTS
    hidden_property("top-1 correct counts of another model on other data (eval mode restored as it was)")
    rng = grading_rng()
    c, d, n = int(rng.integers(3, 8)), int(rng.integers(2, 6)), int(rng.integers(5, 40))
    gen = torch.Generator().manual_seed(int(rng.integers(0, 2**31)))
    model = torch.nn.Linear(d, c)
    with torch.no_grad():
        model.weight.copy_(torch.randn(c, d, generator=gen))
        model.bias.copy_(torch.randn(c, generator=gen))
        Xr = torch.randn(n, d, generator=gen)
        pred = (Xr @ model.weight.T + model.bias).argmax(dim=1)
    yr = torch.where(torch.rand(n, generator=gen) < 0.5, pred, torch.randint(0, c, (n,), generator=gen))
    want = [int(v) for v in (pred == yr)]
    cut = sorted({int(v) for v in rng.integers(1, n, size=2)})
    bs = int(rng.integers(1, n + 1))
    forms = {"(X, y)": (Xr, yr), "TensorDataset": TensorDataset(Xr, yr),
             f"DataLoader(batch_size={bs})": DataLoader(TensorDataset(Xr, yr), batch_size=bs),
             "(X, y) as numpy arrays": (Xr.numpy(), yr.numpy()),
             "a dict": {["X", "inputs", "data", "features"][int(rng.integers(0, 4))]: Xr.numpy(),
                        ["y", "labels", "targets"][int(rng.integers(0, 3))]: yr.tolist()},
             f"a list of (x, y) batches cut at {cut}": [(Xr[a:b], yr[a:b]) for a, b in zip([0] + cut, cut + [n])]}
    for label in rng.permutation(list(forms)):
        got = top1_correct(model, forms[str(label)])
        assert got == want, (
            f"{label}: a random Linear({d}, {c}) on {n} samples: expected the outcomes {want}, got {got}"
            + (" -- that is an argmax over the batch (dim=0); the class is the argmax of each row (dim=1)"
               if isinstance(got, list) and len(got) != n else ""))
    drop = torch.nn.Sequential(torch.nn.Dropout(float(rng.uniform(0.5, 0.95))), model)
    got, training = in_student_process(lambda m, data: (top1_correct(m, data), m.training), drop, (Xr, yr))
    assert got == want and training, (
        f"a model with dropout: expected the eval-mode outcomes {want} and the model back in training mode after; "
        f"got {got}, training={training}")
    k = int(rng.integers(1, 4))
    names = [f"split_{int(i)}" for i in rng.permutation(20)[:k]]
    sets = as_eval_sets([(Xr, yr)] * k, dataset_names=names, batch_size=bs)
    chunks = [bs] * (n // bs) + ([n % bs] if n % bs else [])
    assert [s.name for s in sets] == names and [len(x) for x, _ in sets[-1].batches()] == chunks, (
        f"{k} sets named {names}, batch_size={bs}, {n} samples: expected those names and batches of {chunks}, got "
        f"{[s.name for s in sets]} and {[len(x) for x, _ in sets[-1].batches()]}")
    assert [s.name for s in as_eval_sets([(Xr, yr)] * k)] == [f"dataset{i}" for i in range(k)], \
        f"{k} sets without names: expected dataset0 .. dataset{k - 1}"
    bare = as_eval_sets(DataLoader(Xr, batch_size=bs))[0]  # a loader of bare inputs: unlabelled
    assert not bare.has_labels and [len(x) for x, _ in bare.batches()] == chunks, (
        f"a DataLoader of inputs only (batch_size={bs}): expected no labels and batches of {chunks}")
    expect_error(as_eval_sets, [(Xr, yr)] * k, dataset_names=names + ["extra"], name="dataset_names")
    bad = yr.clone()
    bad[int(rng.integers(0, n))] = [c + int(rng.integers(0, 5)), -1][int(rng.integers(0, 2))]
    try:
        top1_correct(model, (Xr, bad))
    except ValueError as e:
        assert "label" in str(e).lower() and (int(bad.min()) < 0 or str(c) in str(e)), (
            f"labels {bad.tolist()} with a {c}-class model: the error should say that the labels do not fit the "
            f"model's {c} classes, got: {e}")
    else:
        raise AssertionError(f"labels {bad.tolist()} with a {c}-class model: expected a ValueError, not an accuracy")
    flat = torch.nn.Sequential(torch.nn.Linear(d, 1), torch.nn.Flatten(0))
    expect_error(top1_correct, flat, (Xr, yr), name="model", says="shape")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_eval_data_and_top1()

# %% [markdown]
# ## Model size: three quantities, three names
#
# "How big is the model?" has three honest answers, three names: **`serialized_bytes`**, the bytes of the saved model (the
# original course code's "Model Size (MB)", the `model_size` metric; `optimize.model_size_bytes` is only an alias of it),
# tensors plus the container's overhead, which dominates for tiny models; **`state_dict_tensor_bytes`**, every tensor at its
# real element size (what must fit in a device's memory: `memory_result`; your `model_memory_mb` is it in MiB); and
# **`model_file_bytes`**, what a loader reads of a file handed in (the Olympics'). Module 15's `parameter_memory_bytes` is
# a memory figure, not a size: parameters only, buffers counted apart.
#
# The tensor count has a trap. An int8 `Linear` keeps its weight *packed*: the state dict holds
# a tuple `(quantized weight, bias)`, and a quantized tensor stores int8 integers **plus** its
# quantization parameters (one scale and zero point, or one per output channel).
#
# ```
# Linear(256, 128) fp32:  weight 256·128·4 + bias 128·4                      = 131,584 B
# after dynamic int8:     weight 256·128·1 + scale 8 + zero point 8 + bias 128·4 = 33,296 B  (+ the module's own
#                         output scale and zero point, 4 + 8 B)
# ```
#
# **Your task (medium, 10 points).** Complete `_flatten_tensors`: yield every tensor a state
# dict value holds, so that summing `numel() · element_size()` counts the bytes really stored.
#
# - *TODO:* a plain tensor is itself; a quantized tensor is its integers and its quantization
#   parameters; tuples, lists and dicts are opened; anything else holds no tensor bytes.
# - *Approach:* recursion on containers; `value.is_quantized` tells the two tensor kinds apart.
# - *Example:* the 256 → 128 → 10 dynamic int8 MLP has 34,656 bytes of state, against 136,744 in fp32.
# - *Hints:* `torch.int_repr`, `q_scale`/`q_zero_point` (Python numbers: make them 0-d tensors of
#   float64 and int64), `q_per_channel_scales`/`q_per_channel_zero_points`, `value.qscheme()`.

# %% nbgrader={"grade": false, "grade_id": "results-tensor-bytes", "solution": true, "schema_version": 3}
#| export
def _flatten_tensors(value: Any) -> Iterator[torch.Tensor]:
    "Every tensor `value` holds, with a quantized tensor opened into its integers and parameters."
    ### BEGIN SOLUTION
    if isinstance(value, torch.Tensor):
        if value.is_quantized:
            yield torch.int_repr(value)  # the stored integers: element_size() is 1 for int8
            if value.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric,
                                   torch.per_channel_affine_float_qparams):
                yield value.q_per_channel_scales()
                yield value.q_per_channel_zero_points()
            else:
                yield torch.tensor(value.q_scale(), dtype=torch.float64)
                yield torch.tensor(value.q_zero_point(), dtype=torch.int64)
        else:
            yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _flatten_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _flatten_tensors(item)
    ### END SOLUTION


_UNPACK = {"Conv1dPackedParamsBase": "conv1d_unpack", "Conv2dPackedParamsBase": "conv2d_unpack",
           "Conv3dPackedParamsBase": "conv3d_unpack", "LinearPackedParamsBase": "linear_unpack"}


def model_state(model: torch.nn.Module) -> dict[str, Any]:
    """A model's weights: its state dict and, for TorchScript (whose state dict leaves them out), each quantized
    layer's packed int8 `<layer>._packed_params` = (weight, bias). Sizes and hashes of any format start here."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    state = dict(model.state_dict())
    if isinstance(model, torch.jit.ScriptModule):
        for name, sub in model.named_modules():
            packed = getattr(sub, "_packed_params", None)
            if isinstance(packed, torch.ScriptObject):
                kind = packed._type().name()
                if kind not in _UNPACK:
                    raise ValueError(f"model: layer {name!r} keeps its weights in a {kind}, which cannot be read")
                unpack = getattr(torch.ops.quantized, _UNPACK[kind])
                state[f"{name}._packed_params" if name else "_packed_params"] = tuple(unpack(packed))
    return state


def onnx_state(model: Any) -> dict[str, torch.Tensor]:
    """An ONNX model's weights as a state (`model`: an `onnx.ModelProto`, already parsed): every initializer by
    its name and every `Constant` node's tensor as `const:<output>`, each a torch tensor of its own dtype. The
    Olympics hash, count and compare an .onnx file's weights from this, as `model_state` for a torch model.
    Weights kept outside the file (external data) are refused, not read."""
    from onnx import TensorProto, numpy_helper

    state: dict[str, torch.Tensor] = {}
    tensors = [(t.name, t) for t in model.graph.initializer]
    tensors += [(f"const:{n.output[0]}", a.t) for n in model.graph.node if n.op_type == "Constant" and n.output
                for a in n.attribute if a.name == "value"]
    for name, t in tensors:
        if t.data_location == TensorProto.EXTERNAL:
            raise ValueError(f"model: tensor {name!r} keeps its data outside the file (external data), which is not read")
        state[name] = torch.from_numpy(numpy_helper.to_array(t).copy())
    return state


def state_tensors(model: torch.nn.Module | Mapping[str, Any]) -> list[torch.Tensor]:
    """Every tensor of `model_state(model)` (or of a given state, such as one a sandbox sent), with packed int8
    params and quantization params opened."""
    state = model if isinstance(model, Mapping) else model_state(model)
    return [t for v in state.values() for t in _flatten_tensors(v)]


def state_dict_tensor_bytes(model: torch.nn.Module | Mapping[str, Any]) -> int:
    """Bytes of every tensor of `model_state(model)` at real element sizes (int8 weights and their scales included,
    whatever the format; the one tensor-size definition of every stack): 263,168 for a `Linear(256, 256)`."""
    return int(sum(t.numel() * t.element_size() for t in state_tensors(model)))


def serialized_bytes(model: Any) -> tuple[int, str]:
    """`(bytes, method)`: the model size, the bytes of the saved model: `torch.jit.save` for TorchScript,
    `torch.save(state_dict())` for other modules, `numpy.savez(parameters)` for TinyTorch-style objects."""
    buf = io.BytesIO()
    if isinstance(model, torch.jit.ScriptModule):
        torch.jit.save(model, buf)
        return len(buf.getvalue()), "bytes of torch.jit.save(model)"
    if isinstance(model, torch.nn.Module):
        torch.save(model.state_dict(), buf)
        return len(buf.getvalue()), "bytes of torch.save(model.state_dict())"
    params = getattr(model, "parameters", None)
    if not callable(params):
        raise TypeError(f"model: expected an nn.Module or an object with parameters(), got {type(model).__name__}")
    arrays = {f"param_{i}": np.asarray(p.data if hasattr(p, "data") and not isinstance(p, np.ndarray) else p)
              for i, p in enumerate(params())}
    np.savez(buf, **arrays)
    return len(buf.getvalue()), "bytes of numpy.savez(parameters)"

# %% nbgrader={"grade": true, "grade_id": "test-results-tensor-bytes", "locked": true, "points": 10, "schema_version": 3}
def test_unit_state_dict_tensor_bytes():
    import warnings

    mlp = torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    fp32 = sum(p.numel() * 4 for p in mlp.parameters())
    assert state_dict_tensor_bytes(mlp) == fp32, f"fp32: expected {fp32} bytes (sum of numel * 4), got {state_dict_tensor_bytes(mlp)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice
        q = torch.ao.quantization.quantize_dynamic(mlp, {torch.nn.Linear}, dtype=torch.qint8)
    # hand count: int8 weights, fp32 biases, per weight a float64 scale + int64 zero point, per layer the
    # module's own output scale (float32) and zero point (int64)
    expected = (256 * 128 + 128 * 10) * 1 + (128 + 10) * 4 + 2 * (8 + 8) + 2 * (4 + 8)
    got = state_dict_tensor_bytes(q)
    hint = ""
    if got == 2 * (4 + 8):
        hint = " -- the packed (weight, bias) tuples were skipped: open tuples recursively"
    elif got == expected - 2 * (8 + 8):
        hint = " -- the weights' scale and zero point are stored too"
    assert got == expected, f"dynamic int8 MLP: expected {expected} bytes by hand count, got {got}{hint}"
    per_channel = torch.quantize_per_channel(torch.randn(4, 3), torch.ones(4, dtype=torch.float64),
                                             torch.zeros(4, dtype=torch.int64), 0, torch.qint8)
    got = sum(t.numel() * t.element_size() for t in _flatten_tensors({"w": per_channel, "dtype": torch.qint8}))
    assert got == 12 + 4 * 8 + 4 * 8, f"per-channel int8 (4 x 3): expected 12 + 32 + 32 = 76 bytes, got {got}"
    ### BEGIN HIDDEN TESTS
    hidden_property("the tensor bytes of another model, shared tensors counted once")
    rng = grading_rng()
    dims = [int(v) for v in rng.integers(2, 40, size=int(rng.integers(2, 5)))]
    bias = [bool(v) for v in rng.random(len(dims) - 1) < 0.7]
    layers = []
    for i in range(len(dims) - 1):
        layers += [torch.nn.Linear(dims[i], dims[i + 1], bias=bias[i]), torch.nn.ReLU()]
    norm = bool(rng.random() < 0.5)
    if norm:
        layers.append(torch.nn.BatchNorm1d(dims[-1]))  # buffers too, one of them int64
    net = torch.nn.Sequential(*layers)
    dtype = [torch.float32, torch.float64, torch.float16][int(rng.integers(0, 3))]
    plain = sum(t.numel() * t.element_size() for t in net.to(dtype).state_dict().values())
    got = state_dict_tensor_bytes(net)
    assert got == plain, f"an MLP {dims} in {dtype} (batch norm: {norm}): expected {plain} bytes (numel * element_size), got {got}"
    net = net.float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.ao.quantization.quantize_dynamic(net, {torch.nn.Linear}, dtype=torch.qint8)
    expected = sum(dims[i] * dims[i + 1] + 4 * dims[i + 1] * bias[i] + (8 + 8) + (4 + 8) for i in range(len(dims) - 1))
    expected += 4 * 4 * dims[-1] + 8 if norm else 0  # batch norm stays float: 4 float32 vectors and an int64 count
    got = state_dict_tensor_bytes(q)
    assert got == expected, (
        f"dynamic int8 MLP {dims} (biases {bias}, batch norm: {norm}): expected {expected} bytes by hand count "
        f"(int8 weights, a float64 scale and int64 zero point per weight, float32 biases, each layer's own output "
        f"scale and zero point), got {got}")
    shape = tuple(int(v) for v in rng.integers(1, 7, size=2))
    axis = int(rng.integers(0, 2))
    per_channel = torch.quantize_per_channel(torch.randn(shape), torch.from_numpy(rng.uniform(0.01, 1, shape[axis])),
                                             torch.zeros(shape[axis], dtype=torch.int64), axis, torch.qint8)
    qdtype, qsize = [(torch.quint8, 1), (torch.qint8, 1), (torch.qint32, 4)][int(rng.integers(0, 3))]
    per_tensor = torch.quantize_per_tensor(torch.randn(int(rng.integers(1, 20))), float(rng.uniform(0.01, 1)), 0, qdtype)
    half = torch.zeros(int(rng.integers(1, 9)), dtype=torch.float16)
    value = {"w": per_channel, "packed": [(per_tensor, None), {"h": half, "dtype": torch.qint8, "tag": "layer"}], "n": 3}
    want = per_channel.numel() + 16 * shape[axis] + per_tensor.numel() * qsize + 16 + 2 * half.numel()
    got = sum(t.numel() * t.element_size() for t in _flatten_tensors(value))
    assert got == want, (
        f"per-channel int8 {shape} (axis {axis}), per-tensor {qdtype} of {per_tensor.numel()}, float16 of "
        f"{half.numel()} in nested containers: expected {want} bytes (integers, and per scale float64, per zero "
        f"point int64), got {got}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_state_dict_tensor_bytes()

# %% [markdown]
# ## Writing results: JSON-ready, atomically
#
# A benchmark that crashes while writing must not leave half a file that a later run reads as
# complete: readers must see the old file or the whole new one. `write_json`, the one JSON
# writer, makes values JSON-native first and refuses NaN and infinity (not JSON).
#
# **Your task (easy, 5 points).** Complete `json_native` and `write_atomic`.
#
# - *TODO:* `json_native` converts recursively (dict keys become strings); `write_atomic` writes
#   text or bytes to a temporary file next to the target, renames it into place, and never
#   leaves the temporary file behind, even when the write fails.
# - *Approach:* the rename is the only step a reader observes, and on one file system it is atomic.
# - *Example:* `json_native({1: (np.float32(0.5), Path("a"))})` is `{"1": [0.5, "a"]}`.
# - *Hints:* `np.generic.item()`, `os.replace`, `try`/`finally`; the temporary file must be in the
#   target's folder (a rename across file systems is a copy).

# %% nbgrader={"grade": false, "grade_id": "results-writing", "solution": true, "schema_version": 3}
#| export
def json_native(value: Any) -> Any:
    "Tuples -> lists, numpy scalars -> Python numbers, devices/dtypes/paths -> strings, recursively."
    ### BEGIN SOLUTION
    if isinstance(value, dict):
        return {str(k): json_native(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_native(v) for v in value]
    if isinstance(value, BenchmarkResult):  # a result carried in a record is written as its dict
        return json_native(value.to_dict())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (torch.device, torch.dtype, Path)):
        return str(value)
    return value
    ### END SOLUTION


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write text or bytes to `path` atomically: a temporary file in the same folder, then `os.replace`,
    so readers see the old file or the whole new one. Missing parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ### BEGIN SOLUTION
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    ### END SOLUTION
    return path


def write_json(path: str | Path, obj: Any, indent: int = 2) -> Path:
    "Write `obj`, made JSON-native, to `path` atomically; NaN and infinity are refused."
    return write_atomic(path, json.dumps(json_native(obj), indent=indent, allow_nan=False) + "\n")


def results_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, console: bool = False,
                  missing: str = "—") -> list[str]:
    """The one results-table renderer: Markdown lines (`|` escaped) or, with `console`, plain text, each column as wide as
    its widest cell; a cell is `str(value)`, newlines as spaces, None `missing`: `results_table(["a"], [[None]])[2]`: '| — |'."""
    t = [[missing if v is None else str(v).replace("\n", " ") for v in r] for r in [header, *rows]]
    if console:
        w = [max(map(len, col)) for col in zip(*t)]
        return ["  ".join(c.ljust(n) for c, n in zip(r, w)) for r in [t[0], ["-" * n for n in w], *t[1:]]]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in t]
    return [lines[0], "|" + "---|" * len(header), *lines[1:]]

# %% nbgrader={"grade": true, "grade_id": "test-results-writing", "locked": true, "points": 5, "schema_version": 3}
def test_unit_writing():
    got = json_native({1: (np.float32(0.5), Path("a")), "d": [torch.device("cpu"), np.int64(3), np.arange(2)]})
    assert got == {"1": [0.5, "a"], "d": ["cpu", 3, [0, 1]]}, f"expected plain JSON values, got {got!r}"
    assert type(got["d"][1]) is int, f"numpy scalars become Python numbers, got {type(got['d'][1]).__name__}"
    folder = Path(tempfile.mkdtemp())
    target = write_atomic(folder / "sub" / "r.txt", "first")
    assert target.read_text() == "first", "write_atomic creates missing folders and writes the text"
    write_atomic(target, b"\x00second")
    assert target.read_bytes() == b"\x00second", "bytes are written as bytes"

    expect_error(write_json, target, {"bad": float("nan")}, says="JSON")  # NaN is not JSON: refused
    assert target.read_bytes() == b"\x00second", "a refused write leaves the old file as it was"
    with contextlib.suppress(UnicodeEncodeError):  # text that cannot be encoded: the write fails halfway
        write_atomic(target, "third \udcff")
    assert target.read_bytes() == b"\x00second", (
        "a write that fails before its rename must leave the old file as it was: write a temporary file, then rename")
    (folder / "sub" / "taken" / "inside").mkdir(parents=True)
    with contextlib.suppress(OSError):  # a folder cannot be replaced by a file: the rename itself fails
        write_atomic(folder / "sub" / "taken", "fourth")
    left = sorted(p.name for p in target.parent.iterdir())
    assert left == ["r.txt", "taken"], f"no temporary file may be left behind, even when the rename fails; found {left}"
    ### BEGIN HIDDEN TESTS
    hidden_property("results written and read back with other values")
    rng = grading_rng()
    k = int(rng.integers(0, 1000))
    f32 = float(rng.uniform(-10, 10))
    i64 = int(rng.integers(-10**9, 10**9))
    flag = bool(rng.random() < 0.5)
    arr = rng.integers(0, 9, size=(int(rng.integers(1, 4)), int(rng.integers(1, 4))))
    device = ["cpu", "cuda:0", "meta"][int(rng.integers(0, 3))]
    dtype = [torch.float16, torch.int8, torch.float32][int(rng.integers(0, 3))]
    value = {k: (np.float32(f32), Path("runs") / f"r{k}.json"),
             "nested": [{"dtype": dtype, "n": np.int64(i64)}, (np.bool_(flag), arr, np.float64(f32))],
             "device": torch.device(device), "plain": [1, "s", None, 2.5, True]}
    want = {str(k): [float(np.float32(f32)), f"runs/r{k}.json"],
            "nested": [{"dtype": str(dtype), "n": i64}, [flag, arr.tolist(), f32]],
            "device": device, "plain": [1, "s", None, 2.5, True]}
    got = json_native(value)
    assert got == want, f"json_native: expected {want!r}, got {got!r}"
    kinds = [type(got[str(k)][0]), type(got["nested"][0]["n"]), type(got["nested"][1][0])]
    assert kinds == [float, int, bool], (
        f"numpy scalars become Python numbers (float, int, bool), got {[f'{t.__module__}.{t.__qualname__}' for t in kinds]}")
    folder = Path(tempfile.mkdtemp())
    target = folder.joinpath(*[f"d{int(v)}" for v in rng.integers(0, 1000, size=int(rng.integers(1, 4)))],
                             f"result_{k}.json")
    text = "".join(chr(int(v)) for v in rng.integers(0x20, 0x2FF, size=int(rng.integers(1, 200)))) + "\n"
    back = write_atomic(target, text)
    assert Path(back) == target and target.read_bytes() == text.encode("utf-8"), (
        f"write_atomic({target}, text) must create the folders, write the text (UTF-8) and return the path; got "
        f"{back!r}, content {target.read_bytes()[:40]!r}" if target.exists() else f"{target} was not written")
    blob = rng.bytes(int(rng.integers(1, 300)))
    write_atomic(target, blob)
    left = sorted(p.name for p in target.parent.iterdir())
    assert target.read_bytes() == blob and left == [target.name], (
        f"bytes are written as they are, and nothing else is left in the folder; found {left}")
    with contextlib.suppress(ValueError):  # a lone surrogate cannot be encoded: the write fails
        write_atomic(target, text[: int(rng.integers(0, len(text)))] + chr(int(rng.integers(0xD800, 0xE000))))
    left = sorted(p.name for p in target.parent.iterdir())
    assert target.read_bytes() == blob and left == [target.name], (
        f"a write that fails must leave the old file as it was and no temporary file behind; found {left}")
    payload = {"run": k, "latency_ms": [np.float64(f32), np.float32(f32)], "device": torch.device(device)}
    write_json(target, payload)
    written = {"run": k, "latency_ms": [f32, float(np.float32(f32))], "device": device}
    assert json.loads(target.read_text()) == written, f"write_json: expected {written}, read back {target.read_text()!r}"
    expect_error(write_json, target, {"bad": [f32, [float("nan"), float("inf"), -float("inf")][int(rng.integers(0, 3))]]},
                 says="JSON")
    assert json.loads(target.read_text()) == written, "a refused write leaves the old file as it was"
    taken = target.parent / f"taken_{k}"
    (taken / "inside").mkdir(parents=True)
    with contextlib.suppress(OSError):  # a folder cannot be replaced by a file
        write_atomic(taken, text)
    left = sorted(p.name for p in target.parent.iterdir())
    assert left == sorted([target.name, taken.name]), f"no temporary file may be left behind when the rename fails; found {left}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_writing()

# %% [markdown]
# ## Everything together
#
# The notebook's job end to end: latencies from the timing core, an accuracy and a size, compared
# through the one entry point, written atomically as JSON and read back unchanged.

# %%
def test_module():
    from tinytorch.profiling.timing import time_callable

    runs = {"small": [], "large": []}  # five interleaved rounds: a busy spell slows both, not one
    for name, n in [("small", 2_000), ("large", 8_000)] * 5:
        runs[name] += time_callable(lambda n=n: sum(range(n)), samples=6, warmup=2).per_call_ms
    lat = {n: BenchmarkResult("latency", v, unit="ms") for n, v in runs.items()}
    c = compare_results(lat["small"], lat["large"], names=("small", "large"))
    assert c.winner == "small" and c.ratio > 2, f"4x the work should be significantly slower: {c.verdict}"
    lin = torch.nn.Linear(4, 4, bias=False)
    torch.nn.init.eye_(lin.weight)
    X, y = torch.eye(4).repeat(5, 1), torch.tensor([0, 1, 2, 3] * 4 + [1, 1, 1, 1])
    acc = ProportionResult("accuracy", top1_correct(lin, (X, y)))
    assert (acc.correct, acc.count) == (17, 20), f"identity model: 16 + 1 of 20 right, got {acc.correct}/{acc.count}"
    size = CountResult("memory", [state_dict_tensor_bytes(lin)], unit="bytes")  # memory_result's quantity
    path = write_json(Path(tempfile.mkdtemp()) / "results.json",
                      {"latency": lat["small"].to_dict(), "accuracy": acc.to_dict(), "size": size.to_dict()})
    back = {k: BenchmarkResult.from_dict(v) for k, v in json.loads(path.read_text()).items()}
    for k, r in (("latency", lat["small"]), ("accuracy", acc), ("size", size)):
        assert type(back[k]) is type(r) and back[k].to_dict() == r.to_dict(), f"{k} changed on its way through JSON"


if __name__ == "__main__":
    test_module()
