# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The suite: every benchmark at once, every model against the baseline, one report
#
# `Benchmark` measures; this notebook turns its measurements into an answer a reader can act on:
# the report, the Pareto sets (which models are worth choosing), `BenchmarkSuite` (every benchmark
# plus energy, every model against the baseline, the Pareto set), and the pieces `tito benchmark` uses.
# The report it writes (one payload: `results.json`, `results.csv`, `benchmark_report.md`, plots): report_dev; what
# `tito benchmark` runs, built from these: defaults_dev (both library notebooks, outside the reading order).

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
from typing import Any, Sequence

import pandas as pd
import torch

from tinytorch.benchmarking.harness import Benchmark, _error_record, _throughput_metric
from tinytorch.benchmarking.energy import measure_energy
from tinytorch.benchmarking.report import (CSV_FILE, JSON_FILE, REPORT_FILE, SCHEMA, ensure_output_dir, load_payload,
                                           plot_distribution, plot_metric, plot_pareto, render_markdown, save_json,
                                           tidy_csv, write_atomic)
from tinytorch.benchmarking.pareto import pareto_front_with_ties
from tinytorch.benchmarking.results import BenchmarkResult, Comparison, json_native

# %%
# The tests' helpers (nothing to fill in here): `grading_rng` draws their random inputs (random seed 0 here,
# a fresh one per grading run), `expect_error` checks an error and its message.
import os
import re

import numpy as np


from tinytorch.benchmarking.results import CountResult, ProportionResult


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."


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

# %%
#| export benchmarking.pareto
from typing import Any, Mapping, Sequence

import numpy as np

from tinytorch.benchmarking.results import ALPHA, MIN_EFFECT, BenchmarkResult, compare_results

# %% [markdown]
# ## The Pareto frontier
#
# With several metrics there is rarely one best model (int8: smaller and faster; float: a
# little more accurate). A model is **dominated** when another is at least as good on every
# metric and strictly better on one; the models left, the **Pareto frontier**, are the choices.
#
# ```
# accuracy ↑
#   0.99 |  ● A (2.0 ms)          A, B: on the frontier
#   0.98 |        ● B (1.0 ms)    C: dominated by B (slower AND less accurate)
#   0.97 |              ● C (1.5 ms)
#        +------------------------> latency (lower is better)
# ```
#
# **Your task (medium, 10 points).** Implement `pareto_front(points, directions)`.
#
# - *Approach:* keep, in input order, each model that no other model dominates.
# - *Example:* the models above with `{"lat": "min", "acc": "max"}` give `["A", "B"]`.
# - *Hints:* turn every "max" metric into a "min" one by negating it; `a` dominates `b` when
#   `all(a <= b)` and `any(a < b)`. Two identical points do not dominate each other. Reject a
#   direction other than "min"/"max" and a model missing a metric with a `ValueError` starting with the
#   argument's name and a colon (`directions: ...`, `points: ...`).

# %% nbgrader={"grade": false, "grade_id": "benchmarking-pareto", "solution": true, "schema_version": 3}
#| export benchmarking.pareto
def pareto_front(points: dict[str, dict[str, float]], directions: dict[str, str]) -> list[str]:
    """The names of the non-dominated points, in input order.

    `points` maps a name to its metric values; `directions` maps each metric to "min" (lower
    is better) or "max" (higher is better).
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
    got = pareto_front(pts, {"lat": "max", "acc": "max"})  # a flipped direction
    assert got == ["A"], f"with latency to maximise A has the highest of both: expected ['A'], got {got}"
    # ties: identical points do not dominate each other; equal on one metric, better on the other does
    tie = {"P": {"x": 1, "y": 1}, "Q": {"x": 1, "y": 1}, "R": {"x": 1, "y": 2}}
    got = pareto_front(tie, {"x": "min", "y": "min"})
    assert got == ["P", "Q"], f"P and Q are equal (neither dominates the other), R is dominated: expected ['P', 'Q'], got {got}"
    # three metrics: r is dominated by p (worse c), u by p (worse a and b); s has the best a, t the best b
    many = {"p": {"a": 1, "b": 3, "c": 2}, "q": {"a": 2, "b": 3, "c": 1}, "r": {"a": 1, "b": 3, "c": 3},
            "s": {"a": 0, "b": 1, "c": 4}, "t": {"a": 2, "b": 4, "c": 2}, "u": {"a": 2, "b": 2, "c": 2}}
    got = pareto_front(many, {"a": "min", "b": "max", "c": "min"})
    assert got == ["p", "q", "s", "t"], f"a min, b max, c min: expected ['p', 'q', 's', 't'] (r and u dominated by p), got {got}"
    got = pareto_front({"only": {"x": 3}}, {"x": "min"})
    assert got == ["only"], f"a single point is its own frontier: expected ['only'], got {got}"
    expect_error(pareto_front, pts, {"lat": "lower"}, name="directions")
    expect_error(pareto_front, {"A": {"lat": 1}}, {"lat": "min", "acc": "max"}, name="points")
    ### BEGIN HIDDEN TESTS
    hidden_property("the Pareto set for other metrics and directions")
    rng = grading_rng()
    metrics = [f"metric_{chr(97 + int(i))}" for i in rng.permutation(8)[:int(rng.integers(1, 5))]]
    dirs = {m: ["min", "max"][int(rng.integers(0, 2))] for m in metrics}
    names = [f"model_{int(i)}" for i in rng.permutation(100)[:int(rng.integers(5, 25))]]  # input order is not sorted order
    shuffled = [metrics[int(i)] for i in rng.permutation(len(metrics))]  # each point lists its metrics in its own order
    pts = {n: {m: 0.5 * float(rng.integers(-3, 4)) for m in shuffled} for n in names}
    twin = names[int(rng.integers(1, len(names)))]
    pts[twin] = dict(pts[names[0]])  # an identical pair: neither dominates the other
    cost = {n: [p[m] if d == "min" else -p[m] for m, d in dirs.items()] for n, p in pts.items()}
    expected = [n for n, c in cost.items()
                if not any(all(x <= y for x, y in zip(o, c)) and any(x < y for x, y in zip(o, c)) for o in cost.values())]
    got = pareto_front(pts, dirs)
    assert got == expected, (
        f"{len(names)} models, directions {dirs}: expected the front {expected} (input order), got {got}"
        + (" -- identical points do not dominate each other" if set(got) < set(expected) and twin not in got else ""))
    wrong = ["lower", "higher", "minimum", "best", "MAX"][int(rng.integers(0, 5))]
    expect_error(pareto_front, pts, {**dirs, metrics[0]: wrong}, name="directions")
    gap = {n: dict(p) for n, p in pts.items()}
    del gap[names[int(rng.integers(0, len(names)))]][metrics[int(rng.integers(0, len(metrics)))]]
    expect_error(pareto_front, gap, dirs, name="points")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_pareto_front()

# %% [markdown]
# ### The Pareto set with ties
#
# `pareto_front` compares exact numbers: a model 0.2 points more accurate and 2% faster
# "dominates" the baseline even when neither difference is significant. `pareto_front_with_ties`
# asks `compare_results` instead: on each metric one model is *significantly* better, or the two
# are **tied**, so models that differ only by noise stay on the frontier together.
#
# ```
#            latency         accuracy         A vs B
# A  1.00 ms ± noise     95.0% of 1000
# B  0.99 ms ± noise     95.2% of 1000   ->  tie (p = 0.6), tie (McNemar p = 0.5)  ->  both on the front
# C  3.00 ms             60.0%           ->  A wins both (significantly)           ->  C dominated by A
# ```
#
# **Your task (hard, 10 points).** Complete `pareto_front_with_ties`; reject an empty `metrics` and
# a model without a result for every metric (a `ValueError` starting `metrics:` or `results:`).
#
# - *Approach:* for every pair of models and every metric keep `compare_results(...).winner` (a
#   name, or None for a tie, recorded as `[a, b, metric]`). `b` is dominated by `a` when `a` won or
#   tied on every metric and won on one. Return the front (input order), `dominated_by` (`b -> a`,
#   the first found), the ties, `alpha` and `min_effect`.
# - *Example:* in the table above the front is `["A", "B"]` and `dominated_by == {"C": "A"}`.
# - *Hints:* compare each pair once (`names[i + 1:]`) and store the outcome under both orders;
#   pass `alpha`, `min_effect` and `seed` on to `compare_results`.
# - *Needs first:* `pareto_front`, and the results notebook's `BenchmarkResult`, `wilson_interval`,
#   `bootstrap_interval`, `compare_samples`, `mcnemar_exact`, `ProportionResult` and `compare_results`.

# %% nbgrader={"grade": false, "grade_id": "results-pareto-ties", "solution": true, "schema_version": 3}
#| export benchmarking.pareto
def pareto_front_with_ties(results: Mapping[str, Mapping[str, BenchmarkResult]], metrics: Sequence[str], *,
                           alpha: float = ALPHA, min_effect: float = MIN_EFFECT, seed: int = 0) -> dict[str, Any]:
    """The non-dominated models when differences that are not significant count as ties.

    `results[model][metric]` is a result. Returns `{"front": [names in input order], "dominated_by":
    {name: dominating name}, "ties": [[a, b, metric], ...], "alpha": ..., "min_effect": ...}`.
    """
    ### BEGIN SOLUTION
    metrics = list(metrics)
    if not metrics:
        raise ValueError("metrics: expected at least one metric name, got none")
    names = list(results)
    for n in names:
        missing = [m for m in metrics if results[n].get(m) is None]
        if missing:
            raise ValueError(f"results: model '{n}' has no result for {missing}")
    outcome: dict[tuple[str, str, str], str | None] = {}  # (a, b, metric) -> winner name or None (tie)
    ties = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for m in metrics:
                c = compare_results(results[a][m], results[b][m], names=(a, b), alpha=alpha,
                                    min_effect=min_effect, seed=seed)
                outcome[(a, b, m)] = outcome[(b, a, m)] = c.winner
                if c.winner is None:
                    ties.append([a, b, m])
    dominated_by = {}
    for b in names:
        for a in names:
            if a == b:
                continue
            wins = [outcome[(a, b, m)] for m in metrics]
            if all(w in (a, None) for w in wins) and any(w == a for w in wins):
                dominated_by[b] = a
                break
    return {"front": [n for n in names if n not in dominated_by], "dominated_by": dominated_by, "ties": ties,
            "alpha": alpha, "min_effect": min_effect}
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-results-pareto-ties", "locked": true, "points": 10, "schema_version": 3}
def test_unit_pareto_front_with_ties():
    noisy = [1.0, 1.3, 0.8, 1.1, 0.9, 1.2, 1.0, 0.95]
    res = {"A": {"latency": BenchmarkResult("latency", noisy), "accuracy": ProportionResult("accuracy", [1] * 950 + [0] * 50)},
           "B": {"latency": BenchmarkResult("latency", [v * 0.99 for v in noisy]),
                 "accuracy": ProportionResult("accuracy", [1] * 952 + [0] * 48)},
           "C": {"latency": BenchmarkResult("latency", [v * 3 for v in noisy]),
                 "accuracy": ProportionResult("accuracy", [1] * 600 + [0] * 400)}}
    exact = pareto_front({n: {"lat": r["latency"].median, "acc": r["accuracy"].mean} for n, r in res.items()},
                         {"lat": "min", "acc": "max"})
    assert exact == ["B"], f"by exact numbers B 'dominates' A: expected pareto_front to give ['B'], got {exact}"
    p = pareto_front_with_ties(res, ["latency", "accuracy"])
    assert p["front"] == ["A", "B"], (
        f"A and B differ by noise only (no significant difference on either metric): both stay on the front; got "
        f"{p['front']} -- a model dominates only when it is significantly better somewhere and never worse")
    assert p["dominated_by"] == {"C": "A"}, f"C is significantly slower and less accurate than A: got {p['dominated_by']}"
    assert ["A", "B", "latency"] in p["ties"] and ["A", "B", "accuracy"] in p["ties"], f"ties: got {p['ties']}"
    assert not any(t[:2] == ["A", "C"] for t in p["ties"]), f"A and C differ significantly: expected no tie, got {p['ties']}"
    res["B"]["latency"] = BenchmarkResult("latency", [v * 0.5 for v in noisy])
    p = pareto_front_with_ties(res, ["latency", "accuracy"])
    assert p["front"] == ["B"] and p["dominated_by"]["A"] == "B", (
        f"B is now twice as fast and tied on accuracy: it dominates A; got front {p['front']}")
    assert (p["alpha"], p["min_effect"]) == (0.05, 0.02), f"expected alpha, min_effect 0.05, 0.02, got {p['alpha']}, {p['min_effect']}"
    expect_error(pareto_front_with_ties, {"A": {"latency": res["A"]["latency"]}}, ["latency", "accuracy"], name="results")
    expect_error(pareto_front_with_ties, res, [], name="metrics")
    ### BEGIN HIDDEN TESTS
    hidden_property("the Pareto set with ties where differences are not significant, for other configurations")
    rng = grading_rng()
    metrics = [str(m) for m in rng.permutation(["latency", "accuracy", "model_size"])[:int(rng.integers(2, 4))]]
    names = [f"cfg_{int(i)}" for i in rng.permutation(50)[:int(rng.integers(3, 6))]]
    level = {n: {m: int(rng.integers(0, 3)) for m in metrics} for n in names}  # 0 best .. 2 worst, on each metric
    if rng.random() < 0.5:
        level[names[1]] = dict(level[names[0]])  # the same on every metric: tied everywhere
    alpha, floor = [0.01, 0.05][int(rng.integers(0, 2))], [0.02, 0.05][int(rng.integers(0, 2))]
    pattern = 1 + 0.03 * rng.standard_normal(10)  # one noise pattern, shuffled per model: equal medians within a level
    base = {lv: rng.permutation(np.arange(300) < right).astype(int) for lv, right in enumerate((285, 240, 180))}
    res = {}
    for n in names:
        jitter = 1 + 0.004 * float(rng.uniform(-1, 1))  # well below the floor: a tie within a level
        outcomes = base[level[n]["accuracy"] if "accuracy" in level[n] else 0].copy()
        i, j = int(rng.choice(np.flatnonzero(outcomes == 1))), int(rng.choice(np.flatnonzero(outcomes == 0)))
        outcomes[i], outcomes[j] = 0, 1  # other samples right, the same accuracy
        res[n] = {"latency": BenchmarkResult("latency", ((1.0, 2.0, 4.0)[level[n].get("latency", 0)] * jitter
                                                        * rng.permutation(pattern)).tolist()),
                  "accuracy": ProportionResult("accuracy", outcomes.tolist()),
                  "model_size": CountResult("model_size", [(1.0, 1.5, 3.0)[level[n].get("model_size", 0)] * jitter])}
    def better(a, b):  # a at least as good everywhere and better somewhere
        return all(level[a][m] <= level[b][m] for m in metrics) and any(level[a][m] < level[b][m] for m in metrics)

    dominated_by = {}
    for b in names:
        first = next((a for a in names if a != b and better(a, b)), None)
        if first is not None:
            dominated_by[b] = first
    front = [n for n in names if n not in dominated_by]
    ties = {(frozenset((names[i], names[j])), m) for i in range(len(names)) for j in range(i + 1, len(names))
            for m in metrics if level[names[i]][m] == level[names[j]][m]}
    got = pareto_front_with_ties({n: {m: res[n][m] for m in metrics} for n in names}, metrics, alpha=alpha,
                                 min_effect=floor, seed=int(rng.integers(0, 1000)))
    table = {n: {m: ["best", "middle", "worst"][level[n][m]] for m in metrics} for n in names}
    assert got["front"] == front and got["dominated_by"] == dominated_by, (
        f"models (in input order) with clearly separated levels per metric (differences within a level are noise) "
        f"{table}: expected the front {front} and dominated_by {dominated_by} (the first dominating model in input "
        f"order), got {got['front']} and {got['dominated_by']}")
    got_ties = {(frozenset(t[:2]), t[2]) for t in got["ties"]}
    assert got_ties == ties, (
        f"{table}: expected the ties {sorted((sorted(p), m) for p, m in ties)}, got {got['ties']}")
    assert (got["alpha"], got["min_effect"]) == (alpha, floor), (
        f"expected alpha {alpha} and min_effect {floor} as passed, got {got['alpha']}, {got['min_effect']}")
    gap = {n: {m: res[n][m] for m in metrics} for n in names}
    del gap[names[int(rng.integers(0, len(names)))]][metrics[int(rng.integers(0, len(metrics)))]]
    expect_error(pareto_front_with_ties, gap, metrics, name="results")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_pareto_front_with_ties()

# %% [markdown]
# ## BenchmarkSuite: everything at once, every model against the baseline
#
# `BenchmarkSuite` wraps a `Benchmark` and adds **energy** (a counter, else `latency × power_watts`
# labelled *estimated*, else unavailable with the reason) and **the analysis**: every model against
# the first (the baseline) on every metric, the Pareto set with ties, and the report (report_dev).
#
# ```
# run_full_benchmark ─> latency ─> accuracy ─> memory ─> throughput ─> energy ─> compare_with_baseline ─> pareto_frontier
# ```
#
# **Your task (medium, 6 points).** Complete `compare_with_baseline(benchmark, baseline)`: compare
# every other model with the baseline on every metric where both have a result, and collect the
# pairs that cannot be compared instead of stopping.
#
# - *TODO:* return `(comparisons, errors)`: the `Comparison`s metric by metric (in the order of `benchmark.results`)
#   and model by model (`benchmark.names`), and `{"compare <metric>: <baseline> vs <model>": {"error_type", "message"}}`.
# - *Approach:* for each metric the baseline has a result for, go over the other models that have
#   one too (a model that failed or was unavailable is recorded already: skip it) and compare it with
#   the baseline through `benchmark.compare`, which picks the test that fits the metric. A `ValueError`
#   from one comparison (accuracies on different samples) becomes an entry in `errors` (`_error_record(e)`).
# - *Example:* models `fp32, int8, broken` (broken failed), latency measured: one comparison, fp32
#   against int8; when int8 takes half the time, ratio 0.5 and a verdict "int8 is 2.00× faster than fp32".
# - *Hints:* `compare(a, b, metric)` reports `b / a`, and the report reads every row as "this
#   model against the baseline". Catch only `ValueError`: anything else is a bug to be seen.

# %% nbgrader={"grade": false, "grade_id": "suite-compare-with-baseline", "solution": true, "schema_version": 3}
#| export
def compare_with_baseline(benchmark: Benchmark, baseline: str | None = None
                          ) -> tuple[list[Comparison], dict[str, dict[str, str]]]:
    """Every model against `baseline` (default: the first model) on every metric both have a result for.

    Returns `(comparisons, errors)`: `Benchmark.compare(baseline, model, metric)` per pair (ratios read
    model / baseline), and `{"compare <metric>: <baseline> vs <model>": error}` per pair that cannot be compared.
    """
    baseline = baseline if baseline is not None else benchmark.names[0]
    if baseline not in benchmark.names:
        raise ValueError(f"baseline: expected one of {benchmark.names}, got {baseline!r}")
    ### BEGIN SOLUTION
    comparisons, errors = [], {}
    for metric, by_model in benchmark.results.items():
        if baseline not in by_model:
            continue
        for name in benchmark.names:
            if name == baseline or name not in by_model:
                continue
            try:
                comparisons.append(benchmark.compare(baseline, name, metric))
            except ValueError as e:  # e.g. two accuracies on different samples: no paired test
                errors[f"compare {metric}: {baseline} vs {name}"] = _error_record(e)
    return comparisons, errors
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-suite-compare-with-baseline", "locked": true, "points": 6, "schema_version": 3}
def test_unit_compare_with_baseline():
    from tinytorch.benchmarking.results import ProportionResult

    b = Benchmark({"fp32": torch.nn.Identity(), "int8": torch.nn.Identity(), "broken": torch.nn.Identity(),
                   "other_data": torch.nn.Identity()}, measurement_runs=2)
    for name, ms in (("fp32", 2.0), ("int8", 1.0), ("other_data", 2.0)):
        b._store("latency", name, BenchmarkResult("latency", [ms * (1 + 0.01 * i) for i in range(12)], unit="ms"))
    b._fail("latency", "broken", RuntimeError("kaput"))
    for name, data in (("fp32", "test"), ("int8", "test"), ("other_data", "elsewhere")):
        b._store("accuracy", name, ProportionResult("accuracy", [1] * 45 + [0] * 5, unit="fraction",
                                                    metadata={"datasets": [{"name": data, "count": 50}]}))
    try:
        comps, errors = compare_with_baseline(b)
    except ValueError as e:
        raise AssertionError("a pair that cannot be compared (accuracies on different samples) goes into errors and "
                             f"the loop goes on; got ValueError: {e}") from e
    got = [(c.metric, c.model_a, c.model_b) for c in comps]
    expected = [("latency", "fp32", "int8"), ("latency", "fp32", "other_data"), ("accuracy", "fp32", "int8")]
    assert ("latency", "int8", "fp32") not in got, (f"expected model_a='fp32' (the baseline), model_b='int8', got "
                                                     "model_a='int8', model_b='fp32' -- call compare(baseline, model, "
                                                     "metric): the ratio must read model / baseline")
    assert not any(a == bb for _, a, bb in got), f"the baseline is not compared with itself: got {got}"
    assert got == expected, f"one comparison per metric and other model with a result: expected {expected}, got {got}"
    assert abs(comps[0].ratio - 0.5) < 1e-9 and comps[0].verdict.startswith("int8 is 2.00× faster than fp32"), \
        f"int8 takes half of fp32's time: expected ratio 0.5 and 'int8 is 2.00× faster ...', got {comps[0].ratio}, " \
        f"{comps[0].verdict!r}"
    assert not any("broken" in k for k in errors), \
        f"a model without a result (it failed) is skipped, not an error: got errors {sorted(errors)}"
    key = "compare accuracy: fp32 vs other_data"
    assert list(errors) == [key], f"expected errors for {[key]}, got {sorted(errors)}"
    assert errors[key]["error_type"] == "ValueError" and "same samples" in errors[key]["message"], \
        f"expected the record of the ValueError ({{'error_type', 'message'}}), got {errors[key]}"
    comps, _ = compare_with_baseline(b, "int8")
    assert [(c.model_a, c.model_b) for c in comps][:2] == [("int8", "fp32"), ("int8", "other_data")], \
        f"with baseline='int8' every comparison starts from int8, got {[(c.model_a, c.model_b) for c in comps]}"
    ### BEGIN HIDDEN TESTS
    hidden_property("the comparison with the baseline for other results")
    from tinytorch.benchmarking.results import CountResult

    rng = grading_rng()
    names = [f"{w}{i}" for i, w in enumerate(rng.permutation(["fp32", "int8", "fp16", "pruned", "onnx", "bf16"])
                                             [:int(rng.integers(3, 6))])]
    b = Benchmark({n: torch.nn.Identity() for n in names}, measurement_runs=2)
    baseline = names[int(rng.integers(len(names)))] if rng.random() < 0.7 else None
    base = baseline or names[0]
    outcomes = rng.random(40) < 0.8
    outcomes[:2] = True
    metrics = list(rng.permutation(["latency", "model_size", "accuracy"]))
    has = {}  # metric -> {model: result or None}
    for mi, metric in enumerate(metrics):
        has[metric] = {}
        for name in names:
            state = ("result" if name == base and mi < 2  # the baseline has at least two metrics
                     else str(rng.choice(["result", "result", "failed", "unavailable"])))
            if state == "failed":
                b._fail(metric, name, RuntimeError(f"{name} broke"))
            elif state == "unavailable":
                b._not_available(metric, name, "not measurable here")
            elif metric == "latency":
                ms = float(rng.uniform(0.5, 5.0))
                samples = ms * rng.lognormal(0.0, 0.05, int(rng.integers(8, 16)))
                r = BenchmarkResult("latency", samples.tolist(), unit="ms")
            elif metric == "model_size":
                r = CountResult("model_size", [float(rng.integers(1_000, 100_000))], unit="B")
            else:
                flip = rng.random(40) < 0.15
                data = str(rng.choice(["test", "test", "other"]))  # accuracies on other data cannot be paired
                r = ProportionResult("accuracy", (outcomes ^ flip).astype(int).tolist(), unit="fraction",
                                     metadata={"datasets": [{"name": data, "count": 40}]})
            if state == "result":
                b._store(metric, name, r)
            has[metric][name] = r if state == "result" else None
    try:
        comps, errors = compare_with_baseline(b, baseline)
    except ValueError as e:
        raise AssertionError("a pair that cannot be compared goes into errors and the loop goes on; "
                             f"got ValueError: {e}") from e
    expected, expected_errors, ratios = [], [], []
    for metric in b.results:  # the order the metrics were first stored in
        rs = has[metric]
        if rs.get(base) is None:
            continue
        for name in names:
            if name == base or rs[name] is None:
                continue
            data = [rs[m].metadata.get("datasets", [{}])[0].get("name") for m in (base, name)]
            if metric == "accuracy" and data[0] != data[1]:
                expected_errors.append(f"compare {metric}: {base} vs {name}")
                continue
            expected.append((metric, base, name))
            va, vb = np.asarray(rs[base].values, float), np.asarray(rs[name].values, float)
            ratios.append(float(np.median(vb) / np.median(va) if metric != "accuracy" else vb.mean() / va.mean()))
    got = [(c.metric, c.model_a, c.model_b) for c in comps]
    assert got == expected, (f"models {names}, baseline {baseline!r}, results per metric "
                             f"{ {m: [n for n, r in rs.items() if r is not None] for m, rs in has.items()} }: expected "
                             f"(metric, baseline, model) {expected}, got {got}")
    got_ratios = [c.ratio for c in comps]
    assert np.allclose(got_ratios, ratios, rtol=1e-9), \
        f"ratios read model / baseline: expected {np.round(ratios, 6).tolist()}, got {np.round(got_ratios, 6).tolist()}"
    assert sorted(errors) == sorted(expected_errors), \
        f"accuracies on different datasets: expected errors for {sorted(expected_errors)}, got {sorted(errors)}"
    assert all(errors[k].get("error_type") == "ValueError" and errors[k].get("message") for k in expected_errors), \
        f"each error is the record of the ValueError ({{'error_type', 'message'}}), got {errors}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_compare_with_baseline()

# %%
#| export
class BenchmarkSuite:
    """Run latency, accuracy, memory, throughput and energy benchmarks and write the report.

    `models`, `datasets` and the protocol arguments are those of `Benchmark`. `power_watts`
    enables an *estimated* energy figure when no hardware counter is readable. `tasks` and
    `references` (dicts keyed by model name) fill the benchmark table.
    """

    def __init__(self, models: Any, datasets: Any = None, output_dir: str | Path = "benchmark_results",
                 power_watts: float | None = None, *, warmup_runs: int = 5, measurement_runs: int = 10,
                 names: Sequence[str] | None = None, threads: int | None = 1,
                 input_shape: Sequence[int] | None = None, batch_sizes: Sequence[int] = (1, 8, 32),
                 energy_window_s: float = 1.0, energy_windows: int = 5, powercap_root: str | Path = "/sys/class/powercap",
                 tasks: dict[str, str] | None = None, references: dict[str, str] | None = None,
                 progress: bool = True, **benchmark_options: Any):
        if power_watts is not None and (isinstance(power_watts, bool) or not isinstance(power_watts, (int, float))
                                        or power_watts <= 0):
            raise ValueError(f"power_watts: expected a positive number of watts or None, got {power_watts!r}")
        self.benchmark = Benchmark(models, datasets, warmup_runs=warmup_runs, measurement_runs=measurement_runs,
                                   names=names, threads=threads, **benchmark_options)
        self.output_dir, self.power_watts = Path(output_dir), power_watts
        self.input_shape = tuple(input_shape) if input_shape is not None else None
        self.batch_sizes, self.energy_window_s, self.powercap_root = tuple(batch_sizes), energy_window_s, powercap_root
        self.energy_windows = energy_windows  # several windows: energy comparisons get a test, not one noisy figure each
        self.tasks, self.references, self.progress = dict(tasks or {}), dict(references or {}), progress
        self.comparisons: list[Comparison] = []
        self.pareto: dict[str, Any] | None = None  # set by pareto_frontier
        self.plot_paths, self.step_errors, self.created = [], {}, None

    # the results live in the Benchmark; these are views of them
    names = property(lambda self: self.benchmark.names)
    results = property(lambda self: self.benchmark.results)
    unavailable = property(lambda self: self.benchmark.unavailable)
    failures = property(lambda self: self.benchmark.failures)
    system_info = property(lambda self: self.benchmark.system_info)

    def record_unavailable(self, metric: str, model: str, reason: str) -> None:
        "Record that `model` has no `metric` figure, and why (a runtime that cannot run it, data that do not fit it)."
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"reason: expected a non-empty explanation, got {reason!r}")
        self.benchmark._not_available(metric, model, reason)

    def run_energy_benchmark(self) -> dict[str, BenchmarkResult]:
        """Energy per inference (J; `metadata["mj_per_call"]` in mJ): measured from a hardware counter, or estimated from the
        median latency and `power_watts`, or unavailable with the reason."""
        b = self.benchmark
        x = b._input(self.input_shape)
        out = {}
        for name, a in b.adapters.items():
            lat = b.results.get("latency", {}).get(name)
            if name in b.failures.get("latency", {}):  # the model raised when run: its energy cannot be had either
                b.failures.setdefault("energy", {})[name] = dict(b.failures["latency"][name])
                continue
            if lat is None and self.power_watts is not None:
                b._not_available("energy", name, "no latency measurement to base the estimate on")
                continue
            xi = a.to_input(x)
            try:
                with a.inference():
                    m = measure_energy(lambda a=a, xi=xi: a.forward(xi), power_watts=self.power_watts,
                                       latency_s=lat.mean / 1e3 if lat is not None else None,
                                       device=str(a.device), min_window_s=self.energy_window_s, windows=self.energy_windows,
                                       powercap_root=self.powercap_root, sync=a.sync)
            except Exception as e:  # the model raised while its energy was measured
                b._fail("energy", name, e)
                continue
            if m.joules_per_call is None:
                b._not_available("energy", name, m.reason)
                continue
            meta = dict(m.to_dict(), method=m.method, mj_per_call=m.joules_per_call * 1e3)  # mJ, for small figures
            values = list(m.window_joules_per_call) or [m.joules_per_call]
            b._store("energy", name, BenchmarkResult("energy", values, unit="J", metadata=meta))
            out[name] = b.results["energy"][name]
        return out

    def run_full_benchmark(self) -> dict[str, dict[str, BenchmarkResult]]:
        """Latency, accuracy, memory, throughput and energy for every model, then the comparisons against the
        first model and the latency/accuracy Pareto set; returns `results` (metric -> model -> result). A step
        that fails as a whole (not one model) is recorded for every model and the next step runs."""
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

    def _say(self, text: str) -> None:
        if self.progress:
            print(text, file=sys.stderr, flush=True)

    def compare_all(self, baseline: str | None = None) -> list[Comparison]:
        "Compare every model against `baseline` (default: the first model) on every measured metric."
        self.comparisons, errors = compare_with_baseline(self.benchmark, baseline)
        self.step_errors.update(errors)
        return self.comparisons

    compare = property(lambda self: self.benchmark.compare, doc="`Benchmark.compare`")
    compare_models = property(lambda self: self.benchmark.compare_models, doc="`Benchmark.compare_models`")

    def pareto_frontier(self, metrics: Sequence[str] = ("latency", "accuracy")) -> list[str]:
        """The models no other model *significantly* beats on every one of `metrics`: differences
        that are not significant count as ties (`results.pareto_front_with_ties`), so noise cannot
        knock a model off the frontier. Models missing a metric are named in `pareto["excluded"]`."""
        metrics = list(metrics)
        unknown = [m for m in metrics if m not in self.benchmark.metric_info]
        if not metrics or unknown:
            raise ValueError(f"metrics: expected names from {sorted(self.benchmark.metric_info)}, got {metrics}")
        measured, excluded = {}, {}
        for name in self.names:
            missing = [m for m in metrics if self.results.get(m, {}).get(name) is None]
            if missing:
                excluded[name] = f"no measured {missing[0]}"
            else:
                measured[name] = {m: self.results[m][name] for m in metrics}
        ties = pareto_front_with_ties(measured, metrics) if measured else {"front": [], "dominated_by": {}, "ties": []}
        self.pareto = {"metrics": metrics, "directions": {m: self.benchmark.metric_info[m].direction for m in metrics},
                       "front": ties["front"], "excluded": excluded, "dominated_by": ties["dominated_by"],
                       "ties": ties["ties"], "method": "pareto_front_with_ties: not-significant differences are ties",
                       "points": {n: {m: r.median for m, r in by.items()} for n, by in measured.items()}}
        return ties["front"]

    # ----- files -----
    def table(self) -> pd.DataFrame:
        "The tidy table: one row per model × metric, every metric (see `Benchmark.compare_models`)."
        frames = [self.benchmark.compare_models(m) for m in self.benchmark._all_metrics()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def to_payload(self) -> dict[str, Any]:
        "Everything measured, as one JSON-ready dict (what results.json holds)."
        b, table = self.benchmark, self.table()
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in table.to_dict(orient="records")] if len(table) else []
        model_info = {}
        for name, a in b.adapters.items():
            q = getattr(a.model, "tinytorch_quantization", None)
            default_ref = (f"measured here; {q['path']} ({q['mode']})" if isinstance(q, dict) and "path" in q
                           else "measured here (results.json)")
            model_info[name] = {"kind": a.kind, "class": type(a.model).__name__,
                                "task": self.tasks.get(name, "classification" if "accuracy" in b.results else "—"),
                                "reference": self.references.get(name, default_ref)}
        return json_native({
            "schema": SCHEMA,
            "created": self.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "system_info": b.system_info, "machine_state": b.machine_states,
            "protocol": {"warmup_runs": b.warmup_runs, "measurement_runs": b.measurement_runs, "rounds": b.rounds,
                         "threads": b.threads if b.threads is not None else torch.get_num_threads(),
                         "input_shape": list(b.input_shape) if b.input_shape else None,
                         "input_source": b.input_source, "batch_sizes": list(self.batch_sizes),
                         "power_watts": self.power_watts, "seed": b.seed, "datasets": [d.name for d in b.datasets],
                         "budget_s": b.budget_s, "sequential": b.sequential},
            "models": list(self.names), "model_info": model_info,
            "metrics": {m: asdict(i) for m, i in b.metric_info.items() if m in b._all_metrics()},
            "results": {m: {n: r.to_dict() for n, r in by.items()} for m, by in b.results.items()},
            "unavailable": b.unavailable, "failures": b.failures, "step_errors": self.step_errors, "table": rows,
            "comparisons": [c.to_dict() for c in self.comparisons],
            "pareto": {k: v for k, v in self.pareto.items() if k != "points"} if self.pareto else None,
            "plots": [p.name for p in self.plot_paths],
        })

    def generate_report(self) -> str:
        """Write `benchmark_report.md`, `results.json` and `results.csv` into `output_dir`
        (atomically) and return the Markdown. An unwritable `output_dir` raises an OSError naming
        it; the results stay in memory."""
        if not self.results and not self.failures and not self.unavailable:
            raise ValueError("generate_report: nothing measured yet; call run_full_benchmark() first")
        out, payload = ensure_output_dir(self.output_dir), self.to_payload()
        markdown = render_markdown(payload)
        save_json(payload, out / JSON_FILE)
        write_atomic(out / CSV_FILE, tidy_csv(payload["table"]))
        write_atomic(out / REPORT_FILE, markdown)
        return markdown

    @staticmethod
    def load_results(path: str | Path) -> dict[str, dict[str, BenchmarkResult]]:
        """Read `results.json` back into `{metric: {model: BenchmarkResult}}` (equal to the saved ones)."""
        payload = load_payload(path)
        return {m: {n: BenchmarkResult.from_dict(d) for n, d in by.items()} for m, by in payload["results"].items()}

    def plot_results(self, show: bool = False) -> list[Path]:
        "One PNG per measured metric (median, interval error bars, best model marked)."
        out, payload = ensure_output_dir(self.output_dir), self.to_payload()
        return self._keep([plot_metric(payload, m, out) for m in self.results], show)

    def plot_pareto_frontier(self, x_metric: str = "latency", y_metric: str = "accuracy", show: bool = False) -> Path:
        "PNG of two metrics with every model labelled and the Pareto frontier drawn."
        front, out = self.pareto_frontier((x_metric, y_metric)), ensure_output_dir(self.output_dir)
        return self._keep([plot_pareto(self.to_payload(), x_metric, y_metric, front, out)], show)[0]

    def plot_latency_distribution(self, show: bool = False) -> Path:
        "PNG of every latency sample per model."
        return self._keep([plot_distribution(self.to_payload(), "latency", ensure_output_dir(self.output_dir))], show)[0]

    def _keep(self, paths: list[Path], show: bool) -> list[Path]:
        "Remember the plots (the report links them); with `show`, display them (IPython)."
        self.plot_paths += [p for p in paths if p not in self.plot_paths]
        if show:
            try:
                from IPython.display import Image, display
            except ImportError:
                raise RuntimeError("show=True needs IPython (a notebook); the plots were saved to "
                                   + ", ".join(map(str, paths))) from None
            for p in paths:
                display(Image(filename=str(p)))
        return paths

# %% [markdown]
# ## A saved model
#
# `load_model_file` opens a model file (TorchScript, a pickled module, ONNX) for a suite, as the default benchmark does.

# %%
#| export
def load_model_file(path: str | Path) -> Any:
    """Load a saved model: TorchScript (`torch.jit.save`) or a pickled `nn.Module`
    (`torch.save(model)`), on the CPU, in eval mode; an `.onnx` file is checked with `onnx.checker`
    and returned as its `Path` (`adapt` opens it in ONNX Runtime). A `state_dict` alone (weights,
    no architecture) is rejected. Unpickling runs code from the file: load only files you trust."""
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

# %% [markdown]
# ## Everything together: a suite with a model that raises, every step, the report re-rendered from its file

# %%
def test_module():
    import tempfile

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("broken on purpose")

    torch.manual_seed(0)
    big = torch.nn.Sequential(torch.nn.Linear(6, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    with tempfile.TemporaryDirectory() as tmp:
        suite = BenchmarkSuite({"small": torch.nn.Linear(6, 3), "big": big, "broken": Broken()},
                               (torch.randn(40, 6), torch.randint(0, 3, (40,))), output_dir=Path(tmp) / "suite",
                               power_watts=10.0, warmup_runs=1, measurement_runs=4, batch_sizes=(1, 4),
                               powercap_root=Path(tmp) / "no_powercap", progress=False)
        results = suite.run_full_benchmark()
        for metric in ("latency", "accuracy", "memory", "throughput_bs4", "energy"):
            assert set(results[metric]) == {"small", "big"}, f"{metric}: expected small and big, got {sorted(results[metric])}"
            assert "broken on purpose" in suite.failures[metric]["broken"]["message"], f"{metric}: the failure is recorded"
        energy = results["energy"]["small"]
        assert energy.metadata["method"] == "estimated: mean latency x power" and energy.unit == "J"
        assert abs(energy.median - results["latency"]["small"].mean * 10.0 / 1e3) < 1e-12, "mean latency (s) x 10 W = J"
        assert {("latency", "big"), ("accuracy", "big")} <= {(c.metric, c.model_b) for c in suite.comparisons}
        suite.plot_pareto_frontier()
        report = suite.generate_report()
        for text in ("broken on purpose", "**Latency (ms)**", "## Pareto set", "## Comparisons", "estimated", "## Plots"):
            assert text in report, f"the report should mention {text!r}"
        assert render_markdown(load_payload(suite.output_dir / JSON_FILE)) == report, "the report re-renders from JSON"
    print("suite: a suite with a failing model, its report and files, end to end")


if __name__ == "__main__":
    test_module()
