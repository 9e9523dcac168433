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
# The notebooks before this one built a benchmarking library. This one uses it to answer four
# questions an engineer meets the first week a benchmark runs in production. None of them has a
# number you can look up: the answer depends on *your* model on *your* machine, so every figure
# below is measured by a cell in this notebook, and every written answer reasons from those
# cells' variables.
#
# | question | what you measure | what you compute |
# |---|---|---|
# | (a) how many samples buy how much certainty? | a latency distribution of the digits CNN | the Student-t CI half-width at n = 5, 20, 80 and the n that halves it |
# | (b) when does the clock itself get in the way? | the timer's overhead and the model's median | the error of one unblocked reading; the latency where overhead drops below 1% |
# | (c) what does a benchmark configuration cost? | the wall time of two configurations | fixed and per-sample cost; CI minutes for 100 benchmarks a day |
# | (d) does a model meet its target, with confidence? | TinyMLPerf on the digits task, trained and untrained | pass / fail / inconclusive from the accuracy's interval |
#
# Each question has a small function for you to write (with a graded test), a cell that applies
# it to your measurements, and a written answer. Your written answers go in the cells marked
# **Your answer**; they are graded by your instructor, not by a test.
#
# The code in this notebook is not exported to `tinytorch`: it is the lesson's own arithmetic
# on top of the library you built.

# %%
from __future__ import annotations

import math
import statistics

import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy import stats

from tinytorch.benchmarking.benchmark import Benchmark, precise_timer, wilson_interval
from tinytorch.benchmarking.digits import DIGITS_INPUT_SHAPE, DigitsCNN, default_digits_model, load_digits_split
from tinytorch.benchmarking.tinymlperf import TinyMLPerf
from tinytorch.profiling.timing import measure_timer_overhead_ns, system_info, time_model

# %% [markdown]
# ## The measurement every question starts from
#
# One latency distribution of the trained digits CNN on one test image, from the timing core:
# warmup first, then `SAMPLES` timed blocks, each long enough that the clock's own cost is
# under 0.1% of it. `latency_ms` is the list of per-call times, in the order they were taken.

# %%
SAMPLES = 160
if __name__ == "__main__":
    model = default_digits_model()
    x_one = load_digits_split("test")[0][:1]
    timing = time_model(model, x_one, warmup=20, samples=SAMPLES)
    latency_ms = timing.per_call_ms
    print(f"{len(latency_ms)} samples, {timing.calls_per_sample} calls per timed block, "
          f"{timing.threads} thread(s); median {timing.median_ms:.4f} ms, "
          f"p90 {np.percentile(latency_ms, 90):.4f} ms, max {max(latency_ms):.4f} ms")
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.hist(latency_ms, bins=40)
    ax.axvline(timing.median_ms, color="k", linestyle="--", label="median")
    ax.set_xlabel("latency per call (ms)")
    ax.set_ylabel("samples")
    ax.set_title("digits CNN, measured now")
    ax.legend()
    plt.show()

# %% [markdown]
# ## (a) How many samples buy how much certainty?
#
# The 95% confidence interval of a mean from `n` samples with sample standard deviation `s` is
#
# ```
# mean ± t(0.975, n−1) · s / √n
#        └──────────────────────┘ the half-width
# ```
#
# Two things shrink it as `n` grows: the `1/√n` (four times the samples, half the width) and
# Student's `t`, which is large for small `n` (it pays for not knowing the true spread) and
# tends to 1.96 as `n` grows. So at small `n` you get *more* than `1/√n` for each extra sample.
#
# ```
# half-width
#   │█
#   │ █▄
#   │   ▀▄▄
#   │      ▀▀▄▄▄▄▄▄
#   │               ▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀──────   ~ 1.96 · s / √n
#   └──────────────────────────────────── n
# ```
#
# **Your task.** Write two functions.
#
# 1. `ci_half_width(values, confidence=0.95)`: the Student-t half-width of the mean's
#    interval from the values.
#    - *Approach:* `n = len(values)`; reject `n < 2` with a `ValueError` naming `values` (one
#      value has no spread); `s` = sample standard deviation (n − 1 in the denominator); the
#      quantile `t((1 + confidence) / 2, n − 1)`; return `t · s / √n`.
#    - *Example:* `ci_half_width([1, 2, 3, 4, 5])` is `2.776 · 1.581 / 2.236 ≈ 1.963`.
#    - *Hints:* `statistics.stdev`, `scipy.stats.t.ppf(q, df)`.
# 2. `samples_to_shrink(n, factor=2.0, confidence=0.95)`: the smallest sample count `m` whose
#    half-width is at most `1/factor` of the half-width at `n`, **assuming the standard
#    deviation stays the same** (so only `t / √n` matters).
#    - *Approach:* compute the target `t(n−1)/√n / factor`, then try `m = n+1, n+2, …` until
#      `t(m−1)/√m` is at or below it.
#    - *Example:* `samples_to_shrink(5) == 13` (not 20: `t` falls from 2.78 to 2.18 on the
#      way); `samples_to_shrink(100)` is 393, close to the `4 × n` of the normal approximation.
#    - *Hints:* a `while` loop is fine; reject `n < 2` and `factor ≤ 1` with a `ValueError`
#      naming the argument.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-ci-half-width", "solution": true, "schema_version": 3}
def ci_half_width(values, confidence: float = 0.95) -> float:
    """Half-width of the Student-t confidence interval of the mean of `values`.

    >>> round(ci_half_width([1.0, 2.0, 3.0, 4.0, 5.0]), 3)
    1.963
    """
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
    """Smallest sample count whose t-interval is `factor` times narrower than at `n`
    (same standard deviation).

    >>> samples_to_shrink(5)
    13
    """
    ### BEGIN SOLUTION
    if n < 2:
        raise ValueError(f"n: expected at least 2 samples, got {n}")
    if factor <= 1:
        raise ValueError(f"factor: expected a shrink factor > 1, got {factor}")
    q = (1 + confidence) / 2

    def width(k: int) -> float:
        return stats.t.ppf(q, k - 1) / math.sqrt(k)

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
    expected = 2.7764451051977987 * statistics.stdev(values) / math.sqrt(5)
    assert isinstance(got, float), f"ci_half_width should return a float, got {type(got).__name__}"
    assert abs(got - expected) < 1e-9, (
        f"ci_half_width([1, 2, 3, 4, 5]): expected {expected:.6f} = t(0.975, 4) * stdev / sqrt(5), got {got}; "
        f"{1.959964 * statistics.stdev(values) / math.sqrt(5):.6f} would mean z = 1.96 was used instead of "
        f"Student's t, {2.7764451 * statistics.pstdev(values) / math.sqrt(5):.6f} the population std (n, not n-1)")
    # against scipy's own interval, on data the function was not written around
    rng = np.random.default_rng(7)
    for n in (2, 9, 40):
        xs = rng.lognormal(0.0, 0.5, size=n).tolist()
        lo, hi = stats.t.interval(0.9, n - 1, loc=np.mean(xs), scale=stats.sem(xs))
        assert abs(ci_half_width(xs, confidence=0.9) - (hi - lo) / 2) < 1e-9, \
            f"ci_half_width(n={n}, confidence=0.9): expected {(hi - lo) / 2:.6f} (scipy.stats.t.interval)"
    for bad in ([], [3.0]):
        try:
            ci_half_width(bad)
        except ValueError as e:
            assert "values" in str(e), f"the error should name 'values', got: {e}"
        else:
            raise AssertionError(f"ci_half_width({bad}) should raise ValueError: fewer than 2 values have no spread")


def test_unit_samples_to_shrink():
    q = 0.975
    w = lambda k: stats.t.ppf(q, k - 1) / math.sqrt(k)  # noqa: E731
    for n in (5, 20, 80):
        m = samples_to_shrink(n)
        assert isinstance(m, (int, np.integer)), f"samples_to_shrink({n}) should return an int, got {m!r}"
        assert w(m) <= w(n) / 2, f"samples_to_shrink({n}) = {m} does not halve the interval: t/sqrt(m) is still above half"
        assert w(m - 1) > w(n) / 2, f"samples_to_shrink({n}) = {m} is not the smallest such count: {m - 1} already halves it"
    assert samples_to_shrink(5) == 13, f"samples_to_shrink(5): expected 13 (t falls as n grows), got {samples_to_shrink(5)}"
    assert samples_to_shrink(5, factor=2.0) < 4 * 5, "small n: less than 4n, because t shrinks too"
    assert samples_to_shrink(10, factor=3.0) > samples_to_shrink(10, factor=2.0), "a larger factor needs more samples"
    for args, name in (((1,), "n"), ((10, 1.0), "factor")):
        try:
            samples_to_shrink(*args)
        except ValueError as e:
            assert name in str(e), f"samples_to_shrink{args}: the error should name '{name}', got: {e}"
        else:
            raise AssertionError(f"samples_to_shrink{args} should raise ValueError")


if __name__ == "__main__":
    test_unit_ci_half_width()
    test_unit_samples_to_shrink()

# %% [markdown]
# Now apply them to your distribution. `half_widths[n]` is the half-width from the first `n`
# samples (what you would have had if you had stopped there); `predicted[n]` scales the
# 80-sample half-width back with `t/√n` alone, as if the spread never changed.

# %%
if __name__ == "__main__":
    ns = (5, 20, 80)
    half_widths = {n: ci_half_width(latency_ms[:n]) for n in ns}
    mean_at = {n: statistics.fmean(latency_ms[:n]) for n in ns}
    _w = lambda k: stats.t.ppf(0.975, k - 1) / math.sqrt(k)  # noqa: E731
    predicted = {n: half_widths[80] * _w(n) / _w(80) for n in ns}
    needed = {n: samples_to_shrink(n) for n in ns}
    for n in ns:
        print(f"n={n:3d}: mean {mean_at[n]:.4f} ms ± {half_widths[n]:.4f} ms "
              f"({half_widths[n] / mean_at[n]:.2%} of the mean; t/sqrt(n) scaling predicts ± {predicted[n]:.4f}); "
              f"halving it needs n = {needed[n]}")
    _ks = list(range(5, SAMPLES + 1, 5))
    fig, ax = plt.subplots(figsize=(6, 2.8))
    ax.plot(_ks, [ci_half_width(latency_ms[:k]) for k in _ks], "o-", ms=3, label="measured (first n samples)")
    ax.plot(_ks, [half_widths[80] * _w(k) / _w(80) for k in _ks], "--", label="t/√n from n = 80")
    ax.set_xlabel("samples n")
    ax.set_ylabel("95% CI half-width (ms)")
    ax.set_yscale("log")
    ax.legend()
    plt.show()

# %% [markdown]
# **Question (a).** How did the half-width shrink from 5 to 20 to 80 samples, and how close was
# it to the `t/√n` prediction? How many samples would halve the 20-sample interval, and what
# does that say about buying precision with more samples? Why might the measured half-widths
# not follow the prediction exactly?

# %% [markdown] nbgrader={"grade": false, "grade_id": "systems-thinking-answer-a", "solution": true, "schema_version": 3}
# **Your answer.**
#
# ### BEGIN SOLUTION
# *Answer key.* Read `half_widths` against `predicted`, and `max(latency_ms[:n])` against
# `timing.median_ms`. On a quiet run the half-width falls from 5 to 20 samples by more than the
# factor 2 that `1/√n` alone gives, because Student's `t` falls too (`t(4)` is far larger than
# `t(19)`), and from 20 to 80 by close to 2. `needed[20]` is a little under `4 × 20`: each
# halving of the interval costs about four times the samples, so precision is bought with CI
# time, not with cleverness. Where the measured values stray from `predicted`, the cause is in
# the data, not in the formula: the sample standard deviation is itself an estimate, and one
# interruption by the operating system (a sample far above the median; compare the maximum with
# the median) inflates it for every prefix that contains it, so a *longer* prefix can even give
# a *wider* interval. The samples are also not independent draws: the machine drifts (clock
# frequency, other jobs), so later samples can differ systematically from early ones. Both are
# reasons why latency is summarised by the median and percentiles (and the median's
# distribution-free interval, `BenchmarkResult.median_ci`), and why the mean's t-interval is
# kept for quantities without a heavy tail.
# ### END SOLUTION

# %% [markdown]
# ## (b) When does the clock itself get in the way?
#
# Every reading pays for two clock reads: `perf_counter_ns()` before and after. That cost is
# added to the time of whatever ran between them. For a model that runs for a long time it
# vanishes; for a tiny model it can be a large part of one reading. This is why the timing core
# times a *block* of calls and divides:
#
# ```
# one reading:   [clock]──── f ────[clock]                     error ≈ overhead / latency
# a block of k:  [clock]── f ── f ── … ── f ──[clock]          error ≈ overhead / (k · latency)
# ```
#
# **Your task.** Write `calls_per_block(overhead_ns, per_call_ns, max_overhead_fraction=1e-3)`:
# the smallest number of calls `k ≥ 1` per timed block such that `overhead_ns / (k · per_call_ns)`
# is at most `max_overhead_fraction`.
#
# - *Approach:* solve `overhead / (k · per_call) ≤ fraction` for `k` and round up; never
#   return less than 1.
# - *Example:* `calls_per_block(50, 10_000, 1e-3) == 5` (a 50 ns clock, a 10 µs call:
#   5 calls make 50 µs, and 50 ns is 0.1% of it); `calls_per_block(50, 1e8) == 1`.
# - *Hints:* `math.ceil`; reject a non-positive `per_call_ns` and a fraction outside (0, 1)
#   with a `ValueError` naming the argument. A quotient that should be a whole number can land
#   a hair above it in floating point: `9 / (0.03 · 30)` is `10.000000000000002`, so `math.ceil`
#   gives 11 where 10 calls already meet the bound. Check the smaller `k` against the condition
#   itself.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-calls-per-block", "solution": true, "schema_version": 3}
def calls_per_block(overhead_ns: float, per_call_ns: float, max_overhead_fraction: float = 1e-3) -> int:
    """Smallest number of calls per timed block that keeps the clock's overhead under
    `max_overhead_fraction` of the block.

    >>> calls_per_block(50, 10_000, 1e-3)
    5
    """
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
    cases = [((50, 10_000, 1e-3), 5), ((50, 1e8, 1e-3), 1), ((40, 1_000, 0.01), 4),
             ((40, 1_000, 1e-3), 40), ((0, 123, 1e-3), 1), ((30, 7, 1e-3), 4286),
             ((9, 30, 0.03), 10)]  # 9 / (0.03 * 30) is 10.000000000000002 in floating point
    for args, expected in cases:
        got = calls_per_block(*args)
        assert got == expected, (
            f"calls_per_block{args}: expected {expected} (the smallest k >= 1 with "
            f"overhead / (k * per_call) <= fraction), got {got}")
        assert isinstance(got, (int, np.integer)), f"calls_per_block should return an int, got {got!r}"
    for args, name in (((50, 0), "per_call_ns"), ((50, 100, 0.0), "max_overhead_fraction"),
                       ((50, 100, 1.5), "max_overhead_fraction")):
        try:
            calls_per_block(*args)
        except ValueError as e:
            assert name in str(e), f"calls_per_block{args}: the error should name '{name}', got: {e}"
        else:
            raise AssertionError(f"calls_per_block{args} should raise ValueError")


if __name__ == "__main__":
    test_unit_calls_per_block()

# %% [markdown]
# Now measure both sides of the ratio: the clock's overhead, the model's median from the
# blocked distribution above, and, for contrast, single unblocked readings of the same model
# taken with `precise_timer`.

# %%
if __name__ == "__main__":
    overhead_ns = measure_timer_overhead_ns()
    model_median_ns = statistics.median(timing.per_call_ns)
    single_read_error = overhead_ns / model_median_ns          # one unblocked reading
    one_percent_latency_ns = overhead_ns / 0.01                 # overhead < 1% above this latency
    unblocked_ms = []
    with torch.inference_mode():
        model.eval()
        for _ in range(SAMPLES):
            with precise_timer() as _t:
                model(x_one)
            unblocked_ms.append(_t.elapsed_ms)
    print(f"timer overhead: {overhead_ns:.0f} ns per read pair; model median (blocked): {model_median_ns:.0f} ns")
    print(f"one unblocked reading is off by about {single_read_error:.3%} from the clock alone; "
          f"overhead stays under 1% for models slower than {one_percent_latency_ns / 1e3:.1f} µs")
    print(f"unblocked readings: median {statistics.median(unblocked_ms):.4f} ms, "
          f"IQR {np.subtract(*np.percentile(unblocked_ms, [75, 25])):.4f} ms; "
          f"blocked: median {timing.median_ms:.4f} ms, IQR {np.subtract(*np.percentile(latency_ms, [75, 25])):.4f} ms")

# %% [markdown]
# And the block length your function asks for, next to the one the timing core chose (the core
# targets 0.1% with a 2× safety margin, and doubles the block while calibrating, so it may
# choose more):

# %%
if __name__ == "__main__":
    k_needed = calls_per_block(overhead_ns, model_median_ns, 1e-3)
    print(f"calls_per_block: {k_needed}; the timing core used {timing.calls_per_sample} calls per block")

# %% [markdown]
# **Question (b).** How large is the clock's error in one unblocked reading of the digits CNN,
# and above which model latency does it fall below 1%? Compare the unblocked readings with
# the blocked ones: does the clock's overhead explain the difference, and what else does one
# unblocked call pay for? What should a harness do for models below that latency, and above it?

# %% [markdown] nbgrader={"grade": false, "grade_id": "systems-thinking-answer-b", "solution": true, "schema_version": 3}
# **Your answer.**
#
# ### BEGIN SOLUTION
# *Answer key.* `single_read_error = overhead_ns / model_median_ns` is the bias the clock adds to
# one unblocked reading; compare `model_median_ns` with `one_percent_latency_ns` (one hundred
# times the overhead). If the model is slower than that, as the digits CNN is on a typical
# laptop CPU, one reading's clock error is below 1% and `calls_per_block` (`k_needed`) asks for
# few calls per block, in line with `timing.calls_per_sample`; for a model a hundred times faster
# the same clock would be a large part of every reading. The clock's overhead alone rarely
# explains the gap between the unblocked and blocked medians (`unblocked_ms`, `latency_ms`),
# nor the wider spread of single readings: an unblocked call also pays for entering and leaving
# `precise_timer` (Python work, far more than a clock read), runs with colder caches and branch
# predictors than calls in a tight loop, and a sample of one call cannot average out an
# interruption. A gap smaller than the run-to-run noise (compare the two IQRs) means no more than
# that the model is slow enough for single readings. A blocked sample averages these effects, and
# also averages away each call's tail. So: below
# `one_percent_latency_ns`, time blocks of `calls_per_block(...)` calls and divide (what
# `time_model` does), and report that percentiles are over blocks; above it, time calls one by
# one, which keeps per-call percentiles honest.
# ### END SOLUTION

# %% [markdown]
# ## (c) What does a benchmark configuration cost in CI time?
#
# A benchmark in continuous integration runs on every change. Its configuration (how many
# warmup calls, how many timed samples, how many models) sets how sure its verdict is, and
# also how long every CI run takes. A simple model of the cost has two parts:
#
# ```
# seconds(n) ≈ fixed + per_sample · n
#              │        └ each timed sample (a calibrated block)
#              └ setup: model and system info, warmup, calibration, per round
# ```
#
# Two measured configurations give two equations, enough to solve for both unknowns.
#
# **Your task.** Write `linear_cost(n_a, seconds_a, n_b, seconds_b)` returning
# `(fixed_seconds, seconds_per_sample)` of the line through the two points.
#
# - *Approach:* slope = `(seconds_b − seconds_a) / (n_b − n_a)`; intercept = `seconds_a −
#   slope · n_a`.
# - *Example:* `linear_cost(10, 1.5, 110, 6.5) == (1.0, 0.05)`: one second of setup, 50 ms
#   per sample.
# - *Hints:* the two sample counts must differ (else there is no slope): raise a `ValueError`
#   naming `n_b`. Return the intercept as measured even if noise makes it slightly negative:
#   say so in your answer rather than hiding it.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-linear-cost", "solution": true, "schema_version": 3}
def linear_cost(n_a: float, seconds_a: float, n_b: float, seconds_b: float) -> tuple[float, float]:
    """`(fixed_seconds, seconds_per_sample)` of the straight line through two measured
    configurations `(n_a, seconds_a)` and `(n_b, seconds_b)`.

    >>> linear_cost(10, 1.5, 110, 6.5)
    (1.0, 0.05)
    """
    ### BEGIN SOLUTION
    if n_b == n_a:
        raise ValueError(f"n_b: expected a sample count different from n_a={n_a}, got {n_b}")
    per_sample = (seconds_b - seconds_a) / (n_b - n_a)
    fixed = seconds_a - per_sample * n_a
    return float(fixed), float(per_sample)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-systems-thinking-linear-cost", "locked": true, "points": 2, "schema_version": 3}
def test_unit_linear_cost():
    fixed, per = linear_cost(10, 1.5, 110, 6.5)
    assert abs(fixed - 1.0) < 1e-12 and abs(per - 0.05) < 1e-12, \
        f"linear_cost(10, 1.5, 110, 6.5): expected (1.0, 0.05) = (intercept, slope), got {(fixed, per)}"
    fixed, per = linear_cost(200, 3.0, 50, 1.5)  # points in either order
    assert abs(per - 0.01) < 1e-12 and abs(fixed - 1.0) < 1e-12, \
        f"linear_cost(200, 3.0, 50, 1.5): expected (1.0, 0.01) whatever the order of the points, got {(fixed, per)}"
    fixed, per = linear_cost(1, 0.2, 3, 0.3)
    assert abs(fixed + per * 1 - 0.2) < 1e-12 and abs(fixed + per * 3 - 0.3) < 1e-12, \
        "the line must pass through both measured points"
    try:
        linear_cost(5, 1.0, 5, 2.0)
    except ValueError as e:
        assert "n_b" in str(e), f"the error should name 'n_b', got: {e}"
    else:
        raise AssertionError("linear_cost with two equal sample counts should raise ValueError")


if __name__ == "__main__":
    test_unit_linear_cost()

# %% [markdown]
# Now the measurement: the wall time of a whole latency benchmark of the trained model
# (build the `Benchmark`, run its latency benchmark), for a short and a long configuration. Each configuration runs `REPEATS` times and keeps its median, since one
# wall-clock run on a shared machine is itself a noisy sample.

# %%
CONFIGS = {"short": 10, "long": 80}   # measurement_runs
REPEATS = 3
BENCHMARKS_PER_DAY = 100

if __name__ == "__main__":
    def _benchmark_seconds(runs: int) -> float:
        with precise_timer() as t:
            b = Benchmark([model], warmup_runs=5, measurement_runs=runs, names=["digits_cnn"])
            b.run_latency_benchmark(input_shape=DIGITS_INPUT_SHAPE)
        return t.elapsed_s

    def _probe_seconds() -> float:
        with precise_timer() as t:
            measure_timer_overhead_ns()
        return t.elapsed_s

    def _system_info_seconds() -> float:
        with precise_timer() as t:
            system_info()
        return t.elapsed_s

    config_seconds = {name: statistics.median(_benchmark_seconds(runs) for _ in range(REPEATS))
                      for name, runs in CONFIGS.items()}
    fixed_s, per_sample_s = linear_cost(CONFIGS["short"], config_seconds["short"],
                                        CONFIGS["long"], config_seconds["long"])
    daily_minutes = {name: BENCHMARKS_PER_DAY * s / 60 for name, s in config_seconds.items()}
    for name, runs in CONFIGS.items():
        print(f"{name:5s}: {runs:3d} samples, {config_seconds[name]:.3f} s per benchmark -> "
              f"{daily_minutes[name]:.2f} CI minutes for {BENCHMARKS_PER_DAY} benchmarks a day")
    print(f"cost model: {fixed_s:.3f} s fixed + {per_sample_s * 1e3:.3f} ms per sample")
    # what the fixed part is made of: the Benchmark reads the system information once; the timing
    # core measures the clock's own overhead (2,000 read pairs) at the start of every interleaved
    # round, then warms up and calibrates the block length (the rest of the fixed cost)
    rounds = Benchmark([model], measurement_runs=CONFIGS["short"]).rounds
    probe_s = statistics.median(_probe_seconds() for _ in range(REPEATS))
    system_info_s = statistics.median(_system_info_seconds() for _ in range(REPEATS))
    print(f"system_info() {system_info_s:.4f} s once + {rounds} rounds x clock-overhead probe {probe_s:.4f} s = "
          f"{system_info_s + rounds * probe_s:.4f} s of the {fixed_s:.3f} s fixed cost; warmup and calibration are the rest")
    # (a) meets (c): what would halving the 20-sample interval cost?
    cost_to_halve_s = fixed_s + per_sample_s * needed[20] if "needed" in globals() else None
    if cost_to_halve_s is not None:
        print(f"halving the 20-sample CI needs {needed[20]} samples: about {cost_to_halve_s:.3f} s per benchmark")

# %% [markdown]
# **Question (c).** Which part of the cost dominates for a model as fast as the digits CNN, the
# fixed part or the samples? How many CI minutes a day do the two configurations cost at
# 100 benchmarks a day, and how would the answer change for a model a thousand times slower?
# What would you change in the configuration first, and what must never be cut?

# %% [markdown] nbgrader={"grade": false, "grade_id": "systems-thinking-answer-c", "solution": true, "schema_version": 3}
# **Your answer.**
#
# ### BEGIN SOLUTION
# *Answer key.* Compare `fixed_s` with `per_sample_s * CONFIGS["long"]`. For a model as fast as the
# digits CNN a timed sample is a block well under a millisecond, so the fixed part dominates
# `config_seconds["short"]`, and going to the long configuration costs far less than the ratio
# of sample counts. The decomposition shows where it goes: `system_info_s` (read once per
# `Benchmark`) and `rounds * probe_s` (the clock-overhead probe at the start of every interleaved
# round) against `fixed_s`; warmup calls and the calibration of the block length are the rest
# (the timing core switches the garbage collector off while it times, and never runs it). `daily_minutes` is the CI bill for each
# configuration; with a fixed-cost-dominated model the long configuration (and its tighter
# interval: `cost_to_halve_s` for halving the 20-sample one) is nearly free. For a model a
# thousand times slower, `per_sample_s` grows a thousandfold while `fixed_s` barely moves: cost
# becomes proportional to `n`, and the `samples_to_shrink` arithmetic of (a) turns directly into
# minutes, every halving of the interval quadrupling the bill. A negative or unstable `fixed_s`
# means the two configurations differed by less than the machine's noise: more repeats fix that,
# not a different formula. What to cut first: the number of models and benchmarks on every change
# (run the full matrix nightly), then samples down to the interval width the decision needs, or
# fewer rounds when the fixed per-round cost dominates. What must never be cut: warmup and the
# calibrated block (a cold or overhead-dominated reading is wrong, not merely noisy), and the
# interleaving of the models being compared.
# ### END SOLUTION

# %% [markdown]
# ## (d) Does a model meet its target, with confidence?
#
# A standard benchmark first checks **quality**: MLPerf Tiny only counts a submission's latency
# if its model reaches the task's accuracy target. `TinyMLPerf` checks the measured accuracy
# against the target (pass or fail). But an accuracy measured on 450 images is itself an
# estimate: if it lies close to the target, another 450 images could put it on the other side.
# A careful verdict has three outcomes:
#
# ```
#  target ──────────┼──────────────────────────
#  [── Wilson 95% CI ──]          inconclusive: the interval straddles the target
#                      [──── CI ────]   pass: even the lower bound meets it
#  [─ CI ─]                             fail: even the upper bound misses it
# ```
#
# **Your task.** Write `confident_compliance(correct, n, target, confidence=0.95)` returning
# `"pass"`, `"fail"` or `"inconclusive"`.
#
# - *Approach:* `lo, hi = wilson_interval(correct, n, confidence)` (from the benchmark
#   notebook); `"pass"` if `lo ≥ target`, `"fail"` if `hi < target`, else `"inconclusive"`.
# - *Example:* 450 of 450 against 0.90 passes; 45 of 450 fails; 405 of 450 (exactly 0.90) is
#   inconclusive.
# - *Hints:* reject a `target` outside [0, 1] with a `ValueError` naming `target`;
#   `wilson_interval` already checks `correct` and `n`.

# %% nbgrader={"grade": false, "grade_id": "systems-thinking-confident-compliance", "solution": true, "schema_version": 3}
def confident_compliance(correct: int, n: int, target: float, confidence: float = 0.95) -> str:
    """"pass", "fail" or "inconclusive": the Wilson interval of `correct / n` against `target`.

    >>> confident_compliance(450, 450, 0.90), confident_compliance(405, 450, 0.90)
    ('pass', 'inconclusive')
    """
    ### BEGIN SOLUTION
    if not 0 <= target <= 1:
        raise ValueError(f"target: expected a proportion in [0, 1], got {target}")
    lo, hi = wilson_interval(correct, n, confidence)
    if lo >= target:
        return "pass"
    if hi < target:
        return "fail"
    return "inconclusive"
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-systems-thinking-confident-compliance", "locked": true, "points": 3, "schema_version": 3}
def test_unit_confident_compliance():
    cases = [((450, 450, 0.90), "pass"), ((45, 450, 0.90), "fail"), ((405, 450, 0.90), "inconclusive"),
             ((443, 450, 0.98), "inconclusive"), ((10, 10, 0.90), "inconclusive"), ((1000, 1000, 0.99), "pass")]
    for args, expected in cases:
        lo, hi = wilson_interval(*args[:2])
        got = confident_compliance(*args)
        assert got == expected, (
            f"confident_compliance{args}: expected {expected!r}: the 95% Wilson interval of "
            f"{args[0]}/{args[1]} is [{lo:.4f}, {hi:.4f}] against the target {args[2]}; got {got!r}")
    assert confident_compliance(405, 450, 0.90, confidence=0.5) == "inconclusive", \
        "405/450 is exactly the target: even a narrow 50% interval straddles it"
    assert confident_compliance(420, 450, 0.90, confidence=0.95) == "pass", \
        "420/450: the Wilson lower bound is above 0.90, so it passes"
    assert confident_compliance(420, 450, 0.90, confidence=0.9999) == "inconclusive", \
        "a higher confidence widens the interval: 420/450 against 0.90 becomes inconclusive at 99.99%"
    for bad in (-0.1, 1.5):
        try:
            confident_compliance(400, 450, bad)
        except ValueError as e:
            assert "target" in str(e), f"the error should name 'target', got: {e}"
        else:
            raise AssertionError(f"confident_compliance(400, 450, {bad}) should raise ValueError")


if __name__ == "__main__":
    test_unit_confident_compliance()

# %% [markdown]
# Now the standard benchmark, twice: the trained digits CNN, and the same architecture with
# its initial (seeded, untrained) weights. Same task, same input, same protocol.

# %%
if __name__ == "__main__":
    torch.manual_seed(0)
    untrained = DigitsCNN().eval()
    perf = TinyMLPerf(random_seed=0)
    compliance = {}
    for name, m in (("trained", model), ("untrained", untrained)):
        r = perf.run_standard_benchmark(m, "digits", num_runs=20)
        q = r["quality"]
        correct = round(q["value"] * q["n_samples"])
        target = r["task"]["quality_target"]
        compliance[name] = {
            "accuracy": q["value"], "correct": correct, "n": q["n_samples"], "target": target,
            "tinymlperf": r["compliance"]["overall"], "latency_ms": r["latency"]["latency_from_throughput_ms"],
            "wilson": wilson_interval(correct, q["n_samples"]),
        }
    for name, c in compliance.items():
        lo, hi = c["wilson"]
        print(f"{name:9s}: accuracy {c['accuracy']:.2%} ({c['correct']}/{c['n']}), Wilson 95% [{lo:.2%}, {hi:.2%}], "
              f"target {c['target']:.0%}: TinyMLPerf says {c['tinymlperf']}; latency {c['latency_ms']:.4f} ms")

# %% [markdown]
# And your three-way verdict, at the task's target and at a stricter one placed just below the
# trained model's own accuracy:

# %%
if __name__ == "__main__":
    strict_target = math.floor(compliance["trained"]["accuracy"] * 100) / 100 - 0.01
    verdicts = {name: {t: confident_compliance(c["correct"], c["n"], t) for t in (c["target"], strict_target)}
                for name, c in compliance.items()}
    for name, v in verdicts.items():
        print(f"{name:9s}: " + ", ".join(f"target {t:.2f}: {s}" for t, s in v.items()))

# %% [markdown]
# **Question (d).** What did TinyMLPerf report for each model, and does your confident verdict
# agree? What happens at the stricter target? The untrained model's latency is about the same
# as the trained one's: what does that say about reporting latency without quality? How many
# test images would you want before claiming compliance with a target one point below your
# accuracy?

# %% [markdown] nbgrader={"grade": false, "grade_id": "systems-thinking-answer-d", "solution": true, "schema_version": 3}
# **Your answer.**
#
# ### BEGIN SOLUTION
# *Answer key.* `compliance["trained"]["tinymlperf"]` should be a pass and
# `compliance["untrained"]["tinymlperf"]` a fail; `verdicts` agrees when the whole Wilson interval
# (`compliance[...]["wilson"]`) lies on one side of the target, which it does for both models at
# the task's target: the trained accuracy is far above it, the untrained one near chance for ten
# classes. At `strict_target`, one to two points below the trained accuracy, the interval from
# 450 images reaches below the target and the verdict becomes "inconclusive": the point estimate
# passes, but the data cannot tell this model from one slightly under the target. The two
# `latency_ms` values are about equal because the architecture, not the weights, sets the work:
# latency reported without its quality check would rank a useless model as fast as the real one,
# which is why MLPerf makes quality a gate before any latency counts. The Wilson half-width
# shrinks like `1/√n`; to resolve a one-point margin the half-width must fall below one point,
# which near this accuracy takes a test set several times larger than 450 images (find the
# smallest such `n` with `wilson_interval` on growing `n` at the same accuracy).
# ### END SOLUTION

# %% [markdown]
# ## Module 19 summary: what you built
#
# | notebook | what it gives you |
# |---|---|
# | `benchmarking_dev` | `BenchmarkResult` (raw values, Student-t CI, percentiles, outliers), `precise_timer`, Wilson intervals, significance tests between two models, the Pareto front, `Benchmark` (interleaved, fixed-thread latency; accuracy; memory; throughput) |
# | `digits_dev` | the workload: real scikit-learn digits data and a small CNN trained deterministically and cached |
# | `metrics_dev` | the edge metrics: memory by real dtype sizes, memory budgets, real precision conversion, latency percentiles, energy measured or labelled as an estimate |
# | `energy_dev` | energy from the hardware's own counters (RAPL, NVML), or an estimate that says so, or nothing with a reason |
# | `hardware_dev` | where the time goes: layer-wise MACs and bytes, the roofline estimate, the machine's measured roofs, a real precision sweep |
# | `hardware_profile_dev` | device budgets: batch memory, utilization, stream deadlines, the bottleneck operator |
# | `devices_dev` | target devices from their datasheets: Flash and RAM fit, roofline bounds per precision, host watch metrics |
# | `optimize_dev` | the optimizations under test: int8 quantization, magnitude pruning, fp16/bf16 casting, each a new model |
# | `tinymlperf_dev` | standard benchmarks: the MLPerf Tiny reference models and quality targets, and compliance reports |
# | `report_dev`, `suite_dev` | `BenchmarkSuite` reports (Markdown, JSON, CSV, plots) and the default benchmark `tito benchmark` runs |
# | `olympics_dev` | the TorchPerf Olympics: events, constraint checks, versioned submissions, validation, verification, leaderboard |
# | `systems_thinking_dev` | this notebook: the statistics, clock, cost and compliance questions, answered from your measurements |
#
# Along the way, one idea recurred: a figure without its uncertainty and its conditions is not a
# result. Every number this module produced came from a measurement on your machine (or says it
# is an estimate and how it was made), with enough samples to say how sure it is.
#
# ## What comes next: the capstone
#
# The TorchPerf Olympics. Pick an event, optimize the digits CNN (or a model of your own) with
# what Modules 16–19 taught, and prove the improvement:
#
# ```bash
# python3 -m tito olympics submit --event latency_sprint --participant YOUR_NAME --output submission.json
# python3 -m tito olympics validate submission.json       # is it self-consistent, are the rules met?
# python3 -m tito olympics verify submission.json         # does the claim hold on this machine?
# python3 -m tito olympics leaderboard submissions/ --event latency_sprint
# ```
#
# A submission holds every raw measurement of your baseline and your optimized model, the
# statistics derived from them and a fingerprint of both models' weights, so anyone can check it.

# %%
def test_module():
    """The four questions end to end on a small fresh measurement (runs without the cells above)."""
    test_unit_ci_half_width()
    test_unit_samples_to_shrink()
    test_unit_calls_per_block()
    test_unit_linear_cost()
    test_unit_confident_compliance()
    m = default_digits_model()
    x = load_digits_split("test")[0][:1]
    s = time_model(m, x, warmup=5, samples=30)
    hw = {n: ci_half_width(s.per_call_ms[:n]) for n in (5, 30)}
    assert all(h >= 0 and math.isfinite(h) for h in hw.values()), f"half-widths must be finite, got {hw}"
    r_lo, r_hi = stats.t.interval(0.95, 29, loc=np.mean(s.per_call_ms), scale=stats.sem(s.per_call_ms))
    assert abs(hw[30] - (r_hi - r_lo) / 2) < 1e-9 * max(1.0, hw[30])
    k = calls_per_block(measure_timer_overhead_ns(), statistics.median(s.per_call_ns))
    assert k >= 1
    X, y = load_digits_split("test")
    with torch.inference_mode():
        correct = int((m(X).argmax(1) == y).sum())
    assert confident_compliance(correct, len(y), 0.90) == "pass", \
        f"the trained digits CNN ({correct}/{len(y)}) should pass the 90% target with confidence"


if __name__ == "__main__":
    test_module()
