# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, systems thinking: questions your own measurements answer
#
# Four questions from a benchmark's first week in production: (a) how many samples buy how much
# certainty, (b) when the clock gets in the way, (c) what a configuration costs in CI time, (d) whether a
# model meets its target with confidence. Each: a function to write, your figures, a written answer.

# %%
from __future__ import annotations

import math
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from tinytorch.benchmarking.harness import Benchmark
from tinytorch.benchmarking.digits import DIGITS_INPUT_SHAPE, DigitsCNN, accuracy_on, default_digits_model, load_digits_split
from tinytorch.benchmarking.olympics import generate_submission, validate_submission
from tinytorch.benchmarking.optimize import prune_magnitude, quantize_int8
from tinytorch.benchmarking.results import precise_timer, wilson_interval
from tinytorch.benchmarking.suite import load_model_file
from tinytorch.benchmarking.tinymlperf import TinyMLPerf
from tinytorch.profiling.timing import measure_timer_overhead_ns, system_info, time_model


def expect_value_error(fn, *args, name: str) -> None:
    """Test helper: `fn(*args)` must raise a ValueError whose message starts with the argument it is about,
    `name`, and a colon (`values: expected ...`), as every error of the module does."""
    try:
        fn(*args)
    except ValueError as e:
        assert str(e).partition(":")[0].strip() == name, (
            f"{fn.__name__}{args}: the error message should start with the argument it is about, {name!r}, then a "
            f"colon ('{name}: expected ...'), got: {e}")
    else:
        raise AssertionError(f"{fn.__name__}{args}: expected a ValueError naming '{name}', got none")


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."

# %% [markdown]
# ## The measurement every question starts from
#
# The timing core on the trained digits CNN and one test image: warmup, then `SAMPLES` timed blocks,
# each long enough for the clock's cost to be under 0.1%. `latency_samples_ms`: per-call times.

# %%
SAMPLES = 160
if __name__ == "__main__":
    model = default_digits_model()
    x_one = load_digits_split("test")[0][:1]
    timing = time_model(model, x_one, warmup=20, samples=SAMPLES)
    latency_samples_ms = timing.per_call_ms
    print(f"{len(latency_samples_ms)} samples, {timing.calls_per_sample} calls per timed block, "
          f"{timing.threads} thread(s); median {timing.median_ms:.4f} ms, "
          f"p90 {np.percentile(latency_samples_ms, 90):.4f} ms, max {max(latency_samples_ms):.4f} ms")

# %% [markdown]
# ## (a) How many samples buy how much certainty?
#
# The 95% confidence interval of a mean from `n` samples with sample standard deviation `s` is
# `mean ± t(0.975, n−1) · s / √n` (after `±`: the *half-width*). Growing `n` shrinks it twice:
# by `1/√n`, and by Student's `t`, large for small `n` (it pays for not knowing the spread).
#
# **Your task (medium, 3 points).** Write `ci_half_width` and `samples_to_shrink`.
#
# - *TODO:* `ci_half_width(values, confidence=0.95)`: the Student-t half-width of the mean's interval.
#   `samples_to_shrink(n, factor=2.0, confidence=0.95)`: the smallest sample count `m` whose half-width
#   is at most `1/factor` of the one at `n`, **assuming the standard deviation stays the same**.
# - *Approach:* the sample standard deviation (it divides by `n − 1`) and the `t` quantile at
#   `(1 + confidence) / 2` with `n − 1` degrees of freedom; for the count, only `t/√n` changes:
#   compute its target once, then try larger counts one by one until one reaches it.
# - *Example:* `ci_half_width([1, 2, 3, 4, 5])` is `2.776 · 1.581 / 2.236 ≈ 1.963`;
#   `samples_to_shrink(5) == 13` (not 20: `t` falls from 2.78 to 2.18 on the way).
# - *Hints:* `statistics` and `scipy.stats.t` have what you need. Reject fewer than 2 values,
#   `n < 2` and `factor ≤ 1` with a `ValueError` whose message starts with the argument's name and a
#   colon (`values: expected at least 2 values`).

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-ci-half-width", "solution": true, "schema_version": 3}
def ci_half_width(values, confidence: float = 0.95) -> float:
    """Half-width of the Student-t confidence interval of the mean of `values`."""
    ### BEGIN SOLUTION
    values = [float(v) for v in values]
    n = len(values)
    if n < 2:
        raise ValueError(f"values: expected at least 2 values for a spread, got {n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence}")
    t = stats.t.ppf((1 + confidence) / 2, n - 1)
    return float(t * statistics.stdev(values) / math.sqrt(n))
    ### END SOLUTION


def samples_to_shrink(n: int, factor: float = 2.0, confidence: float = 0.95) -> int:
    """Smallest sample count whose t-interval is `factor` times narrower than at `n`, the
    standard deviation being the same."""
    ### BEGIN SOLUTION
    if n < 2:
        raise ValueError(f"n: expected at least 2 samples, got {n}")
    if factor <= 1:
        raise ValueError(f"factor: expected a shrink factor > 1, got {factor}")
    width = lambda k: stats.t.ppf((1 + confidence) / 2, k - 1) / math.sqrt(k)  # noqa: E731
    target = width(n) / factor
    m = n + 1
    while width(m) > target:
        m += 1
    return m
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-systems-thinking-ci-half-width", "locked": true, "points": 3, "schema_version": 3}
def test_unit_ci_half_width():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    got = ci_half_width(values)
    expected = 1.9632431614775607  # t(0.975, 4) = 2.7764 times stdev 1.5811 over sqrt(5)
    assert isinstance(got, float), f"ci_half_width should return a float, got {type(got).__name__}"
    z, pop, dof = 1.3859038352815105, 1.7559780628827926, 1.8176758475734012  # z = 1.96; population std; t(0.975, 5)
    why = ("; that is z = 1.96 instead of Student's t" if abs(got - z) < 1e-5 else "; that is the population std "
           "(it divides by n; the sample std by n - 1)" if abs(got - pop) < 1e-5 else "; that is t with n = 5 degrees "
           "of freedom: the mean's interval has n - 1 = 4" if abs(got - dof) < 1e-5 else "")
    assert abs(got - expected) < 1e-9, \
        f"ci_half_width([1, 2, 3, 4, 5]): expected {expected:.6f} = t(0.975, 4) * stdev / sqrt(5), got {got}{why}"
    # at 90%: half of scipy.stats.t.interval(0.9, n - 1, loc=mean, scale=sem)'s width
    for xs, want in (([0.5, 2.0], 4.73531363600628), ([1.2, 0.8, 1.5, 2.9, 1.1, 0.7, 1.3, 1.0, 2.2], 0.4409700391154533)):
        got = ci_half_width(xs, confidence=0.9)
        assert abs(got - want) < 1e-9, f"ci_half_width({xs}, confidence=0.9): expected {want:.6f}, got {got}"
    for bad in ([], [3.0]):
        expect_value_error(ci_half_width, bad, name="values")
    ### BEGIN HIDDEN TESTS
    hidden_property("the t interval's half-width for other sample sizes and confidences")
    rng = grading_rng()
    for _ in range(4):
        n, confidence = int(rng.integers(2, 60)), float(rng.uniform(0.8, 0.995))
        xs = rng.normal(rng.uniform(-5, 50), rng.uniform(0.01, 10), size=n).tolist()
        lo, hi = stats.t.interval(confidence, n - 1, loc=np.mean(xs), scale=stats.sem(xs))
        got = ci_half_width(xs, confidence=confidence)
        assert isinstance(got, float) and abs(got - (hi - lo) / 2) < 1e-9 * max(1.0, (hi - lo) / 2), (
            f"ci_half_width(n={n}, confidence={confidence:.4f}): expected {(hi - lo) / 2:.6f} (scipy.stats.t.interval), "
            f"got {got!r}")
    expect_value_error(ci_half_width, [float(rng.normal())], name="values")
    ### END HIDDEN TESTS


def test_unit_samples_to_shrink():
    w = lambda k: stats.t.ppf(0.975, k - 1) / math.sqrt(k)  # noqa: E731
    got = samples_to_shrink(5)
    assert got == 13, (f"samples_to_shrink(5): expected 13, got {got}"
                       + ("; 20 = 4n is the normal approximation, but t falls too as n grows" if got == 20 else ""))
    for n in (20, 80):
        m = samples_to_shrink(n)
        assert isinstance(m, (int, np.integer)), f"samples_to_shrink({n}) should return an int, got {m!r}"
        assert w(m) <= w(n) / 2, f"samples_to_shrink({n}) = {m} does not halve the interval: t/sqrt(m) is still above half"
        assert w(m - 1) > w(n) / 2, f"samples_to_shrink({n}): expected the smallest such count, got {m}: {m - 1} already halves it"
    expect_value_error(samples_to_shrink, 1, name="n")
    expect_value_error(samples_to_shrink, 10, 1.0, name="factor")
    ### BEGIN HIDDEN TESTS
    hidden_property("samples_to_shrink for other sample counts, shrink factors and confidences")
    rng = grading_rng()
    for _ in range(3):
        while True:
            n, factor = int(rng.integers(2, 50)), float(rng.uniform(1.2, 3.0))
            confidence = float(rng.uniform(0.8, 0.99))
            ks = np.arange(n + 1, int(n * factor ** 2 * 3) + 60)
            widths = stats.t.ppf((1 + confidence) / 2, ks - 1) / np.sqrt(ks)
            target = stats.t.ppf((1 + confidence) / 2, n - 1) / math.sqrt(n) / factor
            first = int(np.argmax(widths <= target))
            near = abs(widths[first] - target) <= 1e-9 * target or (first > 0 and abs(widths[first - 1] - target)
                                                                     <= 1e-9 * target)
            if not near:
                break  # no count within rounding of the target: one right answer
        want, got = int(ks[first]), samples_to_shrink(n, factor, confidence)
        assert isinstance(got, (int, np.integer)) and got == want, (
            f"samples_to_shrink({n}, factor={factor:.3f}, confidence={confidence:.3f}): expected {want}, the smallest "
            f"count whose t/sqrt(m) is at most 1/{factor:.3f} of the one at n, got {got!r}"
            + (f"; {round(n * factor ** 2)} = n * factor^2 is the normal approximation, but t falls too as n grows"
               if got == round(n * factor ** 2) else ""))
    expect_value_error(samples_to_shrink, int(rng.integers(-3, 2)), name="n")
    expect_value_error(samples_to_shrink, int(rng.integers(2, 50)), float(rng.uniform(0.1, 1.0)), name="factor")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_ci_half_width()
    test_unit_samples_to_shrink()

# %% [markdown]
# Your distribution: `half_widths[n]` from the first `n` samples; `predicted[n]`, the 80-sample one
# scaled by `t/√n` alone (as if the spread never changed); `needed[n]`, the samples that would halve it.

# %%
if __name__ == "__main__":
    ns = (5, 10, 20, 40, 80, SAMPLES)
    half_widths = {n: ci_half_width(latency_samples_ms[:n]) for n in ns}
    _w = lambda k: stats.t.ppf(0.975, k - 1) / math.sqrt(k)  # noqa: E731
    predicted = {n: half_widths[80] * _w(n) / _w(80) for n in ns}
    needed = {n: samples_to_shrink(n) for n in ns}
    for n in ns:
        mean = statistics.fmean(latency_samples_ms[:n])
        print(f"n={n:3d}: mean {mean:.4f} ms ± {half_widths[n]:.4f} ms ({half_widths[n] / mean:6.2%}; "
              f"t/sqrt(n) predicts ± {predicted[n]:.4f}); halving needs n = {needed[n]:4d}; "
              f"max of the first n: {max(latency_samples_ms[:n]):.4f} ms")

# %% [markdown]
# **Your task (medium, 3 points).** Below, explain from your figures what precision costs.
#
# - *TODO:* How did the half-width shrink from 5 to 20 to 80 samples, against `predicted`? What would
#   halving the 20-sample interval cost? Why might the measured half-widths stray from the prediction?
# - *Hints:* quote your figures; compare the maximum of the first `n` with the median.

# %% [markdown] nbgrader={"grade": true, "grade_id": "systems-thinking-answer-a", "solution": true, "points": 3, "schema_version": 3}
# ### BEGIN SOLUTION
# *Answer key.* From 5 to 20 samples the half-width falls by more than `1/√n`'s factor 2 (`t` falls
# too), then by about 2 per quadrupling; `needed[20]` is a little under `4 × 20`. The data stray from
# `predicted` as `s` is an estimate: an outlier inflates every prefix holding it; drift makes samples dependent.
#
# *Rubric (3 points).*
# - 1 point: the shrinkage read from the student's own figures; the faster-than-`1/√n` fall at small `n` explained by `t`.
# - 1 point: `needed[20]` is about (a little under) 4 × 20: halving the interval costs about four times the samples.
# - 1 point: a reason the data stray from the prediction: an outlier inflating the standard deviation, or drift (samples not independent).
# ### END SOLUTION

# %% [markdown]
# ## (b) When does the clock itself get in the way?
#
# Every reading adds the cost of two clock reads to what ran between them: nothing for a slow model,
# much of one reading for a tiny one. So the timing core times a *block* and divides:
#
# ```
# one reading:   [clock]──── f ────[clock]                     error ≈ overhead / latency
# a block of k:  [clock]── f ── f ── … ── f ──[clock]          error ≈ overhead / (k · latency)
# ```
#
# **Your task (medium, 2 points).** Write `calls_per_block(overhead_ns, per_call_ns, max_overhead_fraction=1e-3)`.
#
# - *TODO:* the smallest `k ≥ 1` calls per timed block with `overhead_ns / (k · per_call_ns) ≤ max_overhead_fraction`.
# - *Approach:* solve the inequality for `k`, round up, never go below 1.
# - *Example:* `calls_per_block(50, 10_000, 1e-3) == 5` (a 50 ns clock, a 10 µs call: 5 calls make
#   50 µs, of which 50 ns is 0.1%); `calls_per_block(50, 1e8) == 1`.
# - *Hints:* reject a non-positive `per_call_ns` and a fraction outside (0, 1) with a
#   `ValueError` starting with the argument's name and a colon. In floating point `9 / (0.03 · 30)` is `10.000000000000002`:
#   rounding up gives 11 where 10 calls meet the bound, so check the count below yours too.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-calls-per-block", "solution": true, "schema_version": 3}
def calls_per_block(overhead_ns: float, per_call_ns: float, max_overhead_fraction: float = 1e-3) -> int:
    """Fewest calls per timed block that keep the clock's overhead under `max_overhead_fraction`."""
    ### BEGIN SOLUTION
    if per_call_ns <= 0:
        raise ValueError(f"per_call_ns: expected a positive time in ns, got {per_call_ns}")
    if overhead_ns < 0:
        raise ValueError(f"overhead_ns: expected a time >= 0 in ns, got {overhead_ns}")
    if not 0 < max_overhead_fraction < 1:
        raise ValueError(f"max_overhead_fraction: expected a number in (0, 1), got {max_overhead_fraction}")
    k = max(1, math.ceil(overhead_ns / (max_overhead_fraction * per_call_ns)))
    while k > 1 and overhead_ns / ((k - 1) * per_call_ns) <= max_overhead_fraction:
        k -= 1  # undo a rounding-up caused by floating point
    return int(k)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-systems-thinking-calls-per-block", "locked": true, "points": 2, "schema_version": 3}
def test_unit_calls_per_block():
    cases = [((50, 10_000, 1e-3), 5), ((50, 1e8, 1e-3), 1), ((40, 1_000, 0.01), 4), ((40, 1_000, 1e-3), 40),
             ((0, 123, 1e-3), 1), ((30, 7, 1e-3), 4286), ((9, 30, 0.03), 10)]
    for args, expected in cases:
        got = calls_per_block(*args)
        hint = ("; 9 / (0.03 * 30) is 10.000000000000002 in floating point: check k - 1 against the bound"
                if args == (9, 30, 0.03) and got == 11 else "")
        assert got == expected, (f"calls_per_block{args}: expected {expected} (the smallest k >= 1 with "
                                 f"overhead / (k * per_call) <= fraction), got {got}{hint}")
        assert isinstance(got, (int, np.integer)), f"calls_per_block should return an int, got {got!r}"
    expect_value_error(calls_per_block, 50, 0, name="per_call_ns")
    for bad in (0.0, 1.5):
        expect_value_error(calls_per_block, 50, 100, bad, name="max_overhead_fraction")
    ### BEGIN HIDDEN TESTS
    hidden_property("calls per block for other call costs and timer overheads")
    rng = grading_rng()
    for _ in range(12):
        while True:
            overhead, per_call = float(rng.uniform(5, 500)), float(10 ** rng.uniform(0, 7))
            fraction = float(10 ** rng.uniform(-4, -1))
            exact = overhead / (fraction * per_call)
            if abs(exact - round(exact)) > 1e-9 * max(1.0, exact):
                break  # not within rounding of a whole number of calls: one right answer
        want = next(k for k in range(max(1, math.floor(exact) - 2), math.ceil(exact) + 3)
                    if overhead / (k * per_call) <= fraction)
        got = calls_per_block(overhead, per_call, fraction)
        assert isinstance(got, (int, np.integer)) and got == want, (
            f"calls_per_block({overhead:.3f}, {per_call:.3f}, {fraction:.3g}): expected {want} (the smallest k >= 1 "
            f"with overhead / (k * per_call) <= fraction), got {got!r}")
    per_call = float(10 ** rng.uniform(3, 8))
    got = calls_per_block(float(rng.uniform(0, 1)) * per_call * 1e-3, per_call)
    assert got == 1, f"a call long enough for the clock's cost alone: expected 1 call per block, got {got!r}"
    expect_value_error(calls_per_block, 50, -float(rng.uniform(0, 100)), name="per_call_ns")
    bad = float(rng.choice([-1, 1]) * rng.uniform(1, 3))  # below 0 or above 1
    expect_value_error(calls_per_block, 50, 100, bad, name="max_overhead_fraction")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_calls_per_block()

# %% [markdown]
# Now the clock's overhead, the model's blocked median, single unblocked readings for contrast,
# and your block length next to the core's (it aims at 0.1% with a 2× margin).

# %%
if __name__ == "__main__":
    overhead_ns = measure_timer_overhead_ns()
    model_median_ns = statistics.median(timing.per_call_ns)
    single_read_error = overhead_ns / model_median_ns          # one unblocked reading
    one_percent_latency_ns = overhead_ns / 0.01                 # overhead < 1% above this latency
    unblocked_ms = []
    with torch.inference_mode():
        for _ in range(SAMPLES):
            with precise_timer() as _t:
                model(x_one)
            unblocked_ms.append(_t.elapsed_ms)
    iqr = lambda xs: float(np.subtract(*np.percentile(xs, [75, 25])))  # noqa: E731
    print(f"timer overhead: {overhead_ns:.0f} ns per read pair; model median (blocked): {model_median_ns:.0f} ns")
    print(f"one unblocked reading is off by about {single_read_error:.3%} from the clock alone; "
          f"overhead stays under 1% for models slower than {one_percent_latency_ns / 1e3:.1f} µs")
    print(f"unblocked readings: median {statistics.median(unblocked_ms):.4f} ms, IQR {iqr(unblocked_ms):.4f} ms; "
          f"blocked: median {timing.median_ms:.4f} ms, IQR {iqr(latency_samples_ms):.4f} ms")
    k_needed = calls_per_block(overhead_ns, model_median_ns, 1e-3)
    print(f"calls_per_block: {k_needed}; the timing core used {timing.calls_per_sample} calls per block")

# %% [markdown]
# **Your task (medium, 3 points).** Below, say when the clock gets in the way, and what to do.
#
# - *TODO:* The clock's error in one unblocked reading (`single_read_error`), and above which latency
#   it is below 1%? Does it explain the unblocked/blocked gap? What should a harness do below it, and above?
# - *Hints:* compare the two medians and IQRs, and `k_needed` with `timing.calls_per_sample`.

# %% [markdown] nbgrader={"grade": true, "grade_id": "systems-thinking-answer-b", "solution": true, "points": 3, "schema_version": 3}
# ### BEGIN SOLUTION
# *Answer key.* `single_read_error` is the clock's bias on one reading; the digits CNN is usually slower
# than `one_percent_latency_ns`, so it is under 1% and `k_needed` is small, like the core's. The overhead
# rarely explains the unblocked/blocked gap: a single call also pays for entering `precise_timer`, runs
# with colder caches, and cannot average out an interruption (a gap within the IQRs means nothing).
# Below that latency: blocks, percentiles over blocks (`time_model`); above it: calls one by one.
#
# *Rubric (3 points).*
# - 1 point: the clock's error of one reading (`single_read_error`) and the 1% latency, from the student's figures.
# - 1 point: the unblocked/blocked gap is more than clock overhead (timer entry, cold caches, interruptions), or within the noise.
# - 1 point: the policy: blocks (percentiles over blocks) below the 1% latency, single calls above it.
# ### END SOLUTION

# %% [markdown]
# ## (c) What does a benchmark configuration cost in CI time?
#
# A CI benchmark's configuration sets how sure its verdict is and how long each run takes: `seconds(n) ≈
# fixed + per_sample · n` (`fixed`: system info, warmup, calibration); two configurations give both.
#
# **Your task (easy, 2 points).** Write `linear_cost(n_a, seconds_a, n_b, seconds_b)`.
#
# - *TODO:* return `(fixed_seconds, seconds_per_sample)` of the line through the two points.
# - *Approach:* the slope from the two points, then the intercept from either one.
# - *Example:* `linear_cost(10, 1.5, 110, 6.5) == (1.0, 0.05)`: 1 s of setup, 50 ms per sample.
# - *Hints:* two equal sample counts give no slope: raise a `ValueError` starting `n_b:`. Return
#   the intercept as measured even if noise makes it slightly negative.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-linear-cost", "solution": true, "schema_version": 3}
def linear_cost(n_a: float, seconds_a: float, n_b: float, seconds_b: float) -> tuple[float, float]:
    """`(fixed_seconds, seconds_per_sample)` of the line through `(n_a, seconds_a)` and `(n_b, seconds_b)`."""
    ### BEGIN SOLUTION
    if n_b == n_a:
        raise ValueError(f"n_b: expected a sample count different from n_a={n_a}, got {n_b}")
    per_sample = (seconds_b - seconds_a) / (n_b - n_a)
    return float(seconds_a - per_sample * n_a), float(per_sample)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-systems-thinking-linear-cost", "locked": true, "points": 2, "schema_version": 3}
def test_unit_linear_cost():
    for args, expected in (((10, 1.5, 110, 6.5), (1.0, 0.05)), ((200, 3.0, 50, 1.5), (1.0, 0.01)),
                           ((1, 0.2, 3, 0.3), (0.15, 0.05))):
        got = linear_cost(*args)
        assert all(abs(g - e) < 1e-12 for g, e in zip(got, expected)), (
            f"linear_cost{args}: expected {expected} = (intercept, slope), whatever the order of the points, got {got}")
    expect_value_error(linear_cost, 5, 1.0, 5, 2.0, name="n_b")
    ### BEGIN HIDDEN TESTS
    hidden_property("the fitted per-item cost and fixed cost from other pairs of measurements")
    rng = grading_rng()
    for _ in range(4):
        n_a, n_b = (int(v) for v in rng.choice(np.arange(2, 500), size=2, replace=False))
        fixed, slope = float(rng.uniform(-0.2, 5)), float(rng.uniform(1e-4, 0.1))
        s_a, s_b = fixed + slope * n_a, fixed + slope * n_b
        want = np.linalg.solve([[1.0, n_a], [1.0, n_b]], [s_a, s_b])  # (intercept, slope)
        got = linear_cost(n_a, s_a, n_b, s_b)
        assert len(got) == 2 and np.allclose(got, want, rtol=1e-7, atol=1e-9), (
            f"linear_cost({n_a}, {s_a:.6f}, {n_b}, {s_b:.6f}): expected (intercept, slope) = "
            f"({want[0]:.6f}, {want[1]:.6f}), got {got}")
    n = int(rng.integers(2, 500))
    expect_value_error(linear_cost, n, float(rng.uniform(1, 2)), n, float(rng.uniform(2, 3)), name="n_b")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_linear_cost()

# %% [markdown]
# The wall time of a one-thread latency `Benchmark`, short and long (median of `REPEATS` interleaved runs);
# then two parts of the fixed cost: `system_info()`, read once, and the clock-overhead probe run every round.
# On a busy machine noise can outweigh the extra samples' cost: a slope near zero or below says so.

# %%
CONFIGS, REPEATS, BENCHMARKS_PER_DAY = {"short": 10, "long": 160}, 7, 100   # CONFIGS: measurement_runs
ROUNDS = 5  # fixed for both configurations, so the per-round costs stay in the fixed part


def median_seconds(*fns):
    "Median wall time of each of `fns` over `REPEATS` interleaved runs (one number for one function)."
    runs = [[] for _ in fns]
    for _, (fn, out) in ((r, p) for r in range(REPEATS) for p in zip(fns, runs)):
        with precise_timer() as t:
            fn()
        out.append(t.elapsed_s)
    return statistics.median(runs[0]) if len(fns) == 1 else [statistics.median(r) for r in runs]


if __name__ == "__main__":
    config_seconds = dict(zip(CONFIGS, median_seconds(*[
        lambda runs=runs: Benchmark([model], warmup_runs=5, measurement_runs=runs, names=["digits_cnn"], threads=1,
                                    rounds=ROUNDS).run_latency_benchmark(input_shape=DIGITS_INPUT_SHAPE) for runs in CONFIGS.values()])))
    daily_minutes = {name: BENCHMARKS_PER_DAY * s / 60 for name, s in config_seconds.items()}
    for name, runs in CONFIGS.items():
        print(f"{name:5s}: {runs:3d} samples, {config_seconds[name]:.3f} s per benchmark -> "
              f"{daily_minutes[name]:.2f} CI minutes for {BENCHMARKS_PER_DAY} benchmarks a day")
    rounds = ROUNDS
    probe_s, system_info_s = median_seconds(measure_timer_overhead_ns), median_seconds(system_info)
    fixed_s, per_sample_s = linear_cost(CONFIGS["short"], config_seconds["short"], CONFIGS["long"], config_seconds["long"])
    print(f"cost model: {fixed_s:.3f} s fixed + {per_sample_s * 1e3:.3f} ms per sample; of the fixed part, "
          f"system_info() {system_info_s:.4f} s once + {rounds} rounds x clock-overhead probe {probe_s:.4f} s")
    cost_to_halve_s = fixed_s + per_sample_s * samples_to_shrink(20)   # (a) meets (c)
    print(f"halving the 20-sample CI: {samples_to_shrink(20)} samples, about {cost_to_halve_s:.3f} s per benchmark")

# %% [markdown]
# **Your task (hard, 4 points).** Below, cost a CI benchmark from your figures; say what to cut.
#
# - *TODO:* Which part dominates for the digits CNN, fixed or samples? How many CI minutes a day do the
#   two configurations cost, and for a model a thousand times slower? What would you cut first, and never?
# - *Hints:* `fixed_s` against `per_sample_s * CONFIGS["long"]`; `system_info_s` and
#   `rounds * probe_s` against `fixed_s`; `daily_minutes`; `cost_to_halve_s`.

# %% [markdown] nbgrader={"grade": true, "grade_id": "systems-thinking-answer-c", "solution": true, "points": 4, "schema_version": 3}
# ### BEGIN SOLUTION
# *Answer key.* A digits-CNN sample is a block well under a millisecond: the fixed part dominates
# (`system_info_s`, `rounds * probe_s`, the rest warmup and calibration; the core pauses the garbage
# collector, never runs it), so the long configuration costs far less than the ratio of sample counts.
# `daily_minutes` is the bill; `cost_to_halve_s` is nearly free here. A thousand times slower,
# `per_sample_s` grows a thousandfold, `fixed_s` barely: each halving quadruples the bill (a negative
# `fixed_s` is noise). Cut first the benchmarks per change (full matrix nightly), then samples or
# rounds; never warmup, the calibrated block (a cold reading is wrong, not noisy) or interleaving.
#
# *Rubric (4 points).*
# - 1 point: which part dominates, from `fixed_s` and `per_sample_s`, with what the fixed part is made of.
# - 1 point: the CI minutes a day of both configurations, from `daily_minutes`.
# - 1 point: a thousand-times-slower model: cost proportional to `n`, each halving of the interval quadruples the bill.
# - 1 point: what to cut first (benchmarks per change, samples, rounds) and what never (warmup, calibrated blocks, interleaving).
# ### END SOLUTION

# %% [markdown]
# ## (d) How many images does a verdict need?
#
# In `tinymlperf` you wrote the verdict: pass when the accuracy's whole Wilson interval clears the target,
# fail below, inconclusive when it straddles it: a question of sample size, as the interval narrows like `1/√n`.
#
# ```
#  n = 450:    [──────── Wilson 95% ────────]      straddles the target: inconclusive
#  n = 4000:           [── Wilson ──]               above it: pass
#  target ─────────────┼───────────────────
# ```
#
# **Your task (medium, 3 points).** Write `images_to_decide(accuracy, target, confidence=0.95, max_n=100_000)`:
# the smallest test-set size `n` at which a model of this accuracy (`k = round(accuracy · n)` correct)
# gets a decided verdict, its Wilson interval wholly on one side of the target; `None` when no
# `n ≤ max_n` decides it (an accuracy equal to the target never does).
#
# - *TODO:* search `n = 1, 2, …, max_n` for the first decided one.
# - *Approach:* the Wilson bounds of every `n` at once (arrays) beat a loop over `wilson_interval`.
# - *Example:* 0.99 against 0.90 is decided at `n = 35`, 0.95 at `n = 127`; 0.5 against 0.5 never is.
# - *Hints:* the normal-approximation formula `n = z² p (1 − p) / d²` is not the Wilson answer;
#   reject `accuracy` or `target` outside [0, 1] with a `ValueError` starting with its name and a colon.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-images-to-decide", "solution": true, "schema_version": 3}
def images_to_decide(accuracy: float, target: float, confidence: float = 0.95, max_n: int = 100_000) -> int | None:
    """The smallest test-set size whose Wilson interval at `accuracy` lies wholly above or below `target`."""
    ### BEGIN SOLUTION
    for value, arg in ((accuracy, "accuracy"), (target, "target")):
        if not 0 <= value <= 1:
            raise ValueError(f"{arg}: expected a proportion in [0, 1], got {value}")
    n = np.arange(1, max_n + 1, dtype=float)
    p = np.round(accuracy * n) / n
    z = stats.norm.ppf((1 + confidence) / 2)
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    decided = np.flatnonzero((center - half >= target) | (center + half < target))
    return int(n[decided[0]]) if decided.size else None
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-systems-thinking-images-to-decide", "locked": true, "points": 3, "schema_version": 3}
def test_unit_images_to_decide():
    # expected: the first n = 1, 2, ... whose 95% Wilson interval of round(acc * n) successes lies on one side of
    # the target (searched with the reference wilson_interval); wald: the normal-approximation formula's n
    for acc, target, expected, wald in ((0.99, 0.90, 35, 5), (0.95, 0.90, 127, 73), (0.80, 0.90, 28, 62),
                                        (0.5, 0.3, 15, 25)):
        got = images_to_decide(acc, target)
        assert got == expected, (f"images_to_decide({acc}, {target}): expected n = {expected}, the first n whose Wilson "
                                 f"interval is on one side of the target; got {got}"
                                 + (" -- that is the normal-approximation formula, not the Wilson search" if got == wald else ""))
    assert images_to_decide(0.5, 0.5) is None, "an accuracy equal to the target is never decided"
    assert images_to_decide(0.91, 0.90, max_n=1000) is None, "1 point above the target needs more than 1000 images"
    small, large = images_to_decide(0.99, 0.90), images_to_decide(0.95, 0.90)
    assert small < large, f"a larger margin is decided sooner: 9 points needs {small}, 5 points {large}"
    for bad, name in (((1.2, 0.9), "accuracy"), ((0.9, -0.1), "target")):
        expect_value_error(images_to_decide, *bad, name=name)
    ### BEGIN HIDDEN TESTS
    hidden_property("the fewest images whose Wilson interval decides other accuracies against other targets")
    rng = grading_rng()
    for _ in range(3):
        target = float(rng.uniform(0.3, 0.9))
        acc = float(np.clip(target + rng.choice([-1, 1]) * rng.uniform(0.04, 0.15), 0.02, 0.995))
        confidence = float(rng.choice([0.9, 0.95, 0.99]))
        expected = None
        for n in range(1, 20_001):  # the definition, one n at a time
            lo, hi = wilson_interval(round(acc * n), n, confidence)
            if lo >= target or hi < target:
                expected = n
                break
        got = images_to_decide(acc, target, confidence=confidence)
        assert got == expected, (f"images_to_decide({acc:.4f}, {target:.4f}, confidence={confidence}): expected n = "
                                 f"{expected}, the first n whose Wilson interval is on one side of the target; got {got}")
        top = int(rng.integers(1, expected))
        got = images_to_decide(acc, target, confidence=confidence, max_n=top)
        assert got is None, (f"images_to_decide({acc:.4f}, {target:.4f}, max_n={top}): decided only at n = {expected}: "
                             f"expected None, got {got}")
    same = float(rng.uniform(0.05, 0.95))
    assert images_to_decide(same, same, max_n=2000) is None, f"accuracy = target = {same:.4f} is never decided"
    expect_value_error(images_to_decide, float(rng.uniform(1.01, 2)), 0.5, name="accuracy")
    expect_value_error(images_to_decide, 0.5, -float(rng.uniform(0.01, 1)), name="target")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_images_to_decide()

# %% [markdown]
# TinyMLPerf on the trained and an untrained CNN; the images a verdict needs at the task's target and
# at a stricter one just below the trained model's accuracy.

# %%
if __name__ == "__main__":
    torch.manual_seed(0)
    perf, compliance = TinyMLPerf(random_seed=0), {}
    for name, m in (("trained", model), ("untrained", DigitsCNN().eval())):
        r = perf.run_standard_benchmark(m, "digits", num_runs=20)
        q, correct = r["quality"], round(r["quality"]["value"] * r["quality"]["n_samples"])
        c = compliance[name] = {"accuracy": q["value"], "correct": correct, "n": q["n_samples"],
                                "target": r["task"]["quality_target"], "tinymlperf": r["compliance"]["overall"],
                                "latency_from_throughput_ms": r["latency"]["latency_from_throughput_ms"],
                                "wilson": wilson_interval(correct, q["n_samples"])}
        print(f"{name:9s}: accuracy {correct}/{c['n']}, Wilson 95% [{c['wilson'][0]:.2%}, {c['wilson'][1]:.2%}], "
              f"target {c['target']:.0%}: TinyMLPerf says {c['tinymlperf']}; latency {c['latency_from_throughput_ms']:.4f} ms (1 / throughput)")
    strict_target = math.floor(compliance["trained"]["accuracy"] * 100) / 100 - 0.01
    for t in (compliance["trained"]["target"], strict_target):
        print(f"trained at target {t:.2f}: decided from n = {images_to_decide(compliance['trained']['accuracy'], t)} images")

# %% [markdown]
# **Your task (medium, 3 points).** Below, judge compliance from your measurements.
#
# - *TODO:* What did TinyMLPerf report for each model, and why? How many images would the stricter
#   target need, against your test set? What does the untrained model's latency say?
# - *Hints:* `compliance[...]["wilson"]` against each target; `images_to_decide`.

# %% [markdown] nbgrader={"grade": true, "grade_id": "systems-thinking-answer-d", "solution": true, "points": 3, "schema_version": 3}
# ### BEGIN SOLUTION
# *Answer key.* Trained passes, untrained fails: each Wilson interval lies on one side of the target.
# At `strict_target` (about a point below the accuracy) a verdict needs more images than the test set
# has: inconclusive; the half-width shrinks like `1/√n`. Equal latencies (the architecture, not the
# weights, sets the work) show why quality gates latency.
#
# *Rubric (3 points).*
# - 1 point: TinyMLPerf's verdict for both models, explained by where the Wilson interval lies.
# - 1 point: the images the stricter target needs (from `images_to_decide`) against the test set, with the `1/√n` reason.
# - 1 point: equal latency of trained and untrained models shows that quality must gate latency.
# ### END SOLUTION

# %% [markdown]
# ## Module 19 summary, and the capstone
#
# Your library measures every figure (or labels it an estimate) with its uncertainty. The capstone, the TorchPerf
# Olympics, takes *your* model, saved as **TorchScript** (code and weights): `torch.save(mine)` stores only a reference
# to the class, which `tito` cannot find for a class defined in this notebook ("Can't get attribute 'TinyDigits'"),
# and an int8 model may not pickle at all (or keep the state dict with the class and call `generate_submission` here).
# Save with `torch.jit.trace(mine.eval(), X[:1]).save("mine.pt")` (or `torch.jit.script(mine).save("mine.pt")`), then:
# ```bash
# python3 -m tito olympics submit --model mine.pt --event memory_challenge --participant YOUR_NAME [--baseline base.pt]
# python3 -m tito olympics verify submission.json --model mine.pt   # does the claim hold here?
# ```
# Both models are timed as TorchScript on one thread in interleaved rounds and sized by the judge's one definition (the
# model file's bytes as its loader reads them, `model_file_bytes`). Below: the digits CNN pruned to 50%, static int8, saved as above and submitted.

# %%
if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mine = quantize_int8(prune_magnitude(model, 0.5), "static", calibration_data=load_digits_split("train")[0][:256].split(64))
        torch.jit.trace(mine.eval(), load_digits_split("test")[0][:1]).save(str(Path(tmp) / "mine.pt"))
        submission = generate_submission(model, load_model_file(Path(tmp) / "mine.pt"), "memory_challenge",
                                         participant="you", measurement_runs=10, output_path=Path(tmp) / "submission.json",
                                         techniques=["magnitude pruning 50%", "static int8: weights and activations"])
        check = validate_submission(Path(tmp) / "submission.json")
    print(f"{submission['event']}: constraints met {submission['constraints_met']}, valid {check['valid']}; "
          + "; ".join(f"{k} {i['value']:.4f} [{i['ci_lower']:.4f}, {i['ci_upper']:.4f}]" for k, i in
                      submission["improvements"].items() if k in ("speedup", "compression_ratio", "accuracy_delta")))

# %% [markdown]
# Everything Module 19 built, importable from one module, the original course code's `tinytorch.benchmarking.benchmark` (the capstone
# and later milestones use it): plain imports of the notebooks' modules, exported from this, the last notebook.

# %%
#| export benchmarking.benchmark
from tinytorch.benchmarking.harness import DEFAULT_INPUT_SHAPE, Benchmark, OlympicEvent
from tinytorch.benchmarking.olympics import compare_optimization_techniques
from tinytorch.benchmarking.pareto import pareto_front, pareto_front_with_ties
from tinytorch.benchmarking.results import (
    METRICS, STATISTICS, BenchmarkResult, Comparison, CountResult, MetricInfo, ProportionResult, TimerReading,
    compare_results, compare_samples, mcnemar_exact, precise_timer, wilson_interval)
from tinytorch.benchmarking.suite import BenchmarkSuite
from tinytorch.benchmarking.tinymlperf import TinyMLPerf

_all_ = ["Benchmark", "BenchmarkResult", "BenchmarkSuite", "TinyMLPerf", "OlympicEvent", "precise_timer",
         "compare_optimization_techniques", "DEFAULT_INPUT_SHAPE", "ProportionResult", "CountResult", "TimerReading",
         "wilson_interval", "Comparison", "compare_samples", "compare_results", "mcnemar_exact", "pareto_front",
         "pareto_front_with_ties", "MetricInfo", "METRICS", "STATISTICS"]

# %%
def test_module():
    "End to end on a fresh measurement: the four questions on the digits CNN (the submission: the cell above)."
    m, (X, y) = default_digits_model(), load_digits_split("test")
    s = time_model(m, X[:1], warmup=5, samples=30)
    lo, hi = stats.t.interval(0.95, 29, loc=np.mean(s.per_call_ms), scale=stats.sem(s.per_call_ms))
    assert abs(ci_half_width(s.per_call_ms) - (hi - lo) / 2) < 1e-9 * max(1.0, hi - lo), "(a): the t half-width"
    assert samples_to_shrink(30) < 4 * 30, "(a): halving needs fewer than 4n samples, since t falls too"
    per_call_ns = statistics.median(s.per_call_ns)
    k = calls_per_block(s.timer_overhead_ns, per_call_ns)
    assert s.timer_overhead_ns / (k * per_call_ns) <= 1e-3, f"(b): {k} calls leave the overhead above 0.1%"
    fixed, per = linear_cost(10, 0.5 + 10 * per_call_ns / 1e9, 80, 0.5 + 80 * per_call_ns / 1e9)
    assert abs(fixed - 0.5) < 1e-9 and abs(per - per_call_ns / 1e9) < 1e-12, f"(c): got {(fixed, per)}"
    acc = accuracy_on(m, X, y)
    assert images_to_decide(acc, 0.90) <= len(y), f"(d): accuracy {acc:.4f} on {len(y)} images is decided against 0.90"


if __name__ == "__main__":
    test_module()
