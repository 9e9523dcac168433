# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, the capstone: the TorchPerf Olympics
#
# You optimise a model, then you *prove* it: a submission is a file that holds every raw
# measurement of your baseline and your optimised model, taken under one protocol on one
# machine, the statistics and improvements derived from them (each with its uncertainty), the
# event's constraint checks and your score, and a fingerprint of both models' weights. Anyone
# can then check it three ways:
#
# ```
# generate_submission ──> submission.json ──> validate_submission   (is it self-consistent? rules met?)
#                                         ──> verify_submission     (does it hold on *my* machine, same model?)
#                                         ──> leaderboard           (ranked, ties where CIs overlap)
# ```
#
# ## The events and their rules
#
# Scores are ratios to the participant's own baseline, measured on the same machine in the
# same run, so submissions from different machines can share a leaderboard.
#
# | event | score (higher wins) | constraints on the optimised model |
# |---|---|---|
# | latency sprint | speedup = median latency baseline / optimised | accuracy ≥ 85% |
# | memory challenge | compression = model size baseline / optimised | accuracy ≥ 85% |
# | accuracy contest | top-1 accuracy of the optimised model | median latency < 100 ms, model size < 10 MB |
# | all-around | geometric mean of speedup, compression and accuracy retention | accuracy ≥ 85% |
# | extreme push | speedup × compression | accuracy ≥ 80% |
#
# *Model size* is the bytes of the serialized `state_dict` (what you would ship; int8 weights
# count one byte each). *Accuracy retention* is accuracy optimised / accuracy baseline.
# Each score carries an interval: speedup from the bootstrap interval of the ratio of median
# latencies; compression is an exact byte count (zero-width interval); accuracy from the
# Wilson interval; combined scores from the bounds of their parts (a conservative interval).

# %%
#| default_exp benchmarking.olympics

# %%
#| export
from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from tinytorch.benchmarking.benchmark import Benchmark, OlympicEvent
from tinytorch.benchmarking.results import (
    STATISTICS, BenchmarkResult, CountResult, ProportionResult, compare_results, compare_samples, pareto_front_with_ties,
    wilson_interval, write_atomic, write_json,
)
from tinytorch.profiling.timing import system_info

# %%
#| export
SUBMISSION_SCHEMA = "tinytorch-olympics-submission"
SUBMISSION_VERSION = 1


@dataclass(frozen=True)
class EventRules:
    "An event's constraints (`(quantity, '>=' or '<', threshold)`) and what its score measures."

    event: OlympicEvent
    constraints: tuple[tuple[str, str, float], ...]
    score: str
    description: str


EVENT_RULES: dict[OlympicEvent, EventRules] = {
    OlympicEvent.LATENCY_SPRINT: EventRules(
        OlympicEvent.LATENCY_SPRINT, (("accuracy", ">=", 0.85),), "speedup",
        "maximise speedup = median latency of the baseline / of the optimised model"),
    OlympicEvent.MEMORY_CHALLENGE: EventRules(
        OlympicEvent.MEMORY_CHALLENGE, (("accuracy", ">=", 0.85),), "compression_ratio",
        "maximise compression = serialized model size of the baseline / of the optimised model"),
    OlympicEvent.ACCURACY_CONTEST: EventRules(
        OlympicEvent.ACCURACY_CONTEST, (("latency_ms", "<", 100.0), ("model_size_mb", "<", 10.0)), "accuracy",
        "maximise top-1 accuracy of the optimised model"),
    OlympicEvent.ALL_AROUND: EventRules(
        OlympicEvent.ALL_AROUND, (("accuracy", ">=", 0.85),), "all_around",
        "maximise the geometric mean of speedup, compression ratio and accuracy retention"),
    OlympicEvent.EXTREME_PUSH: EventRules(
        OlympicEvent.EXTREME_PUSH, (("accuracy", ">=", 0.80),), "speedup_x_compression",
        "maximise speedup × compression ratio"),
}


def get_event(event: OlympicEvent | str) -> OlympicEvent:
    """The `OlympicEvent` for an enum member or its value/name ("memory_challenge", "MEMORY_CHALLENGE").

    >>> get_event("latency_sprint")
    <OlympicEvent.LATENCY_SPRINT: 'latency_sprint'>
    """
    if isinstance(event, OlympicEvent):
        return event
    if isinstance(event, str):
        for e in OlympicEvent:
            if event in (e.value, e.name):
                return e
    raise ValueError(f"event: unknown event {event!r}; expected one of {[e.value for e in OlympicEvent]}")

# %% [markdown]
# ## Checking the constraints
#
# **Your task.** Complete `check_constraints(event, measured)`: for each constraint of the
# event, compare the measured quantity with its threshold and report the outcome.
#
# - *Approach:* look up `EVENT_RULES[event].constraints`; each is `(quantity, op, threshold)`
#   with `op` either `">="` or `"<"`. Return one dict per constraint:
#   `{"quantity", "op", "threshold", "measured", "passed"}`.
# - *Example:* for the memory challenge and `{"accuracy": 0.84}` you get one check with
#   `passed=False`; with `0.85`, `passed=True`.
# - *Hints:* a quantity missing from `measured` (or `None`) cannot pass: `passed=False`, and
#   say so in a `"reason"` entry.

# %% nbgrader={"grade": false, "grade_id": "olympics-check-constraints", "solution": true, "schema_version": 3}
#| export
def check_constraints(event: OlympicEvent | str, measured: Mapping[str, float | None]) -> list[dict[str, Any]]:
    """Check the optimised model's measured quantities against the event's constraints.

    >>> [c["passed"] for c in check_constraints("memory_challenge", {"accuracy": 0.9})]
    [True]
    """
    rules = EVENT_RULES[get_event(event)]
    checks = []
    ### BEGIN SOLUTION
    for quantity, op, threshold in rules.constraints:
        value = measured.get(quantity)
        check = {"quantity": quantity, "op": op, "threshold": threshold, "measured": value}
        if value is None:
            check.update(passed=False, reason=f"{quantity} was not measured")
        elif op == ">=":
            check["passed"] = bool(value >= threshold)
        elif op == "<":
            check["passed"] = bool(value < threshold)
        else:
            raise ValueError(f"event: unknown constraint operator {op!r}")
        checks.append(check)
    ### END SOLUTION
    return checks

# %% nbgrader={"grade": true, "grade_id": "test-olympics-check-constraints", "locked": true, "points": 2, "schema_version": 3}
def test_unit_check_constraints():
    ok = check_constraints(OlympicEvent.MEMORY_CHALLENGE, {"accuracy": 0.85})
    assert len(ok) == 1 and ok[0]["passed"] is True, "accuracy exactly at 85% meets the >= 85% rule"
    bad = check_constraints("extreme_push", {"accuracy": 0.79})
    assert bad[0]["passed"] is False and bad[0]["threshold"] == 0.80, "extreme push needs accuracy >= 80%"
    contest = check_constraints("accuracy_contest", {"latency_ms": 100.0, "model_size_mb": 2.0})
    by_q = {c["quantity"]: c["passed"] for c in contest}
    assert by_q == {"latency_ms": False, "model_size_mb": True}, "latency must be strictly under 100 ms"
    missing = check_constraints("latency_sprint", {})
    assert missing[0]["passed"] is False, "an unmeasured quantity cannot pass"
    assert missing[0].get("reason"), f"a failed check on an unmeasured quantity should say why in 'reason', got {missing[0]}"


if __name__ == "__main__":
    test_unit_check_constraints()

# %% [markdown]
# ## The fingerprint of a model
#
# `weights_sha256(model)` is the SHA-256 over the model's `state_dict`, entries taken in
# **sorted key order**; for each entry it hashes the key, then every tensor inside it (packed
# int8 weights are tuples of tensors) as dtype, shape and raw bytes. A quantized tensor
# contributes its integer values and its scales and zero points. Anyone with the same weights
# gets the same hash, whatever the framework version's pickle format.

# %%
#| export
def _hash_value(h: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
        if t.is_quantized:
            if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                h.update(f"{t.q_scale()}|{t.q_zero_point()}|".encode())
            else:
                _hash_value(h, t.q_per_channel_scales())
                _hash_value(h, t.q_per_channel_zero_points())
            t = t.int_repr()
        h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, (tuple, list)):
        for v in value:
            _hash_value(h, v)
    else:
        h.update(repr(value).encode())


def weights_sha256(model: nn.Module) -> str:
    """SHA-256 of a model's weights: its state_dict in sorted key order, key + dtype + shape + bytes.

    >>> len(weights_sha256(nn.Linear(2, 2)))
    64
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    h = hashlib.sha256()
    sd = model.state_dict()
    for key in sorted(sd):
        h.update(key.encode() + b"\0")
        _hash_value(h, sd[key])
    return h.hexdigest()

# %% [markdown]
# ## One protocol for both models
#
# Both models go into one `Benchmark`: latency is timed in interleaved rounds (baseline,
# optimised, baseline, …) so a slow patch of the machine hits both, accuracy is counted on
# every labelled sample, and the model size is the serialized byte count. The improvements
# are then derived from those raw values, and nothing else, so a validator can recompute them.

# %%
#| export
_TOL = {"rel_tol": 1e-9, "abs_tol": 1e-12}


def _default_dataset() -> tuple[torch.Tensor, torch.Tensor]:
    from tinytorch.benchmarking.digits import load_digits_split
    return load_digits_split("test")


def _measure_models(models: Mapping[str, nn.Module], dataset: Any, measurement_runs: int, warmup_runs: int,
                    seed: int) -> tuple[dict[str, dict[str, Any]], Benchmark]:
    X, y = dataset
    bench = Benchmark(dict(models), [(X, y)], warmup_runs=warmup_runs, measurement_runs=measurement_runs,
                      seed=seed, dataset_names=["eval"])
    bench.run_latency_benchmark()
    bench.run_accuracy_benchmark()
    bench.run_memory_benchmark()
    raw = {}
    for name in models:
        problems = {m: bench.failures.get(m, {}).get(name) or bench.unavailable.get(m, {}).get(name)
                    for m in ("latency", "accuracy", "model_size") if name not in bench.results.get(m, {})}
        if problems:
            raise RuntimeError(f"model '{name}' could not be measured: {problems}")
        acc = bench.results["accuracy"][name]
        size = bench.results["model_size"][name]
        raw[name] = {
            "latency": bench.results["latency"][name].to_dict(),
            "accuracy": {"correct": acc.correct, "count": acc.count, "accuracy": acc.mean,
                         "wilson_95": [acc.ci_lower, acc.ci_upper], "per_sample_correct": list(acc.values)},
            "model_size": {"bytes": size.metadata["bytes"], "mb": size.metadata["bytes"] / 2**20,
                           "method": size.metadata["method"]},
        }
    return raw, bench


def _improvements(base: Mapping[str, Any], opt: Mapping[str, Any], seed: int) -> dict[str, Any]:
    c = compare_samples(base["latency"]["values"], opt["latency"]["values"], names=("baseline", "optimized"), seed=seed)
    speedup = 1.0 / c.ratio
    size = compare_results(CountResult("model_size", [base["model_size"]["bytes"]], unit="bytes"),
                           CountResult("model_size", [opt["model_size"]["bytes"]], unit="bytes"),
                           names=("baseline", "optimized"))
    comp = 1.0 / size.ratio
    acc = compare_results(ProportionResult("accuracy", base["accuracy"]["per_sample_correct"]),
                          ProportionResult("accuracy", opt["accuracy"]["per_sample_correct"]),
                          names=("baseline", "optimized"), seed=seed)
    acc_a, acc_b = acc.median_a, acc.median_b
    d_lo, d_hi = acc.details["difference_ci"]
    return {
        "speedup": {"value": speedup, "ci_lower": 1.0 / c.ci_upper, "ci_upper": 1.0 / c.ci_lower,
                    "p_value": c.p_value, "significant": c.significant,
                    "method": "median latency ratio, bootstrap 95% CI (seeded), Mann-Whitney U"},
        "compression_ratio": {"value": comp, "ci_lower": comp, "ci_upper": comp, "significant": size.significant,
                              "method": "exact byte counts of the serialized state_dicts (no sampling error); "
                                        "significant when at least 2% apart"},
        "accuracy_delta": {"value": acc_b - acc_a, "ci_lower": d_lo, "ci_upper": d_hi, "p_value": acc.p_value,
                           "significant": acc.significant,
                           "method": "paired bootstrap 95% CI (seeded), McNemar exact test; significant when "
                                     "p < 0.05 and at least 2 points"},
        "accuracy_retention": {"value": acc_b / acc_a if acc_a else None,
                               "ci_lower": 1 + d_lo / acc_a if acc_a else None,
                               "ci_upper": 1 + d_hi / acc_a if acc_a else None},
        "seed": seed,
    }


def _score(event: OlympicEvent, opt: Mapping[str, Any], imp: Mapping[str, Any]) -> dict[str, Any]:
    rule = EVENT_RULES[event].score
    sp, cr, ret = imp["speedup"], imp["compression_ratio"], imp["accuracy_retention"]
    if rule == "speedup":
        v, lo, hi = sp["value"], sp["ci_lower"], sp["ci_upper"]
    elif rule == "compression_ratio":
        v, lo, hi = cr["value"], cr["ci_lower"], cr["ci_upper"]
    elif rule == "accuracy":
        v = opt["accuracy"]["accuracy"]
        lo, hi = opt["accuracy"]["wilson_95"]
    elif rule == "all_around":
        if ret["value"] is None:
            v = lo = hi = None
        else:
            v = (sp["value"] * cr["value"] * ret["value"]) ** (1 / 3)
            lo = (sp["ci_lower"] * cr["ci_lower"] * max(ret["ci_lower"], 0.0)) ** (1 / 3)
            hi = (sp["ci_upper"] * cr["ci_upper"] * ret["ci_upper"]) ** (1 / 3)
    else:  # speedup_x_compression
        v, lo, hi = sp["value"] * cr["value"], sp["ci_lower"] * cr["ci_lower"], sp["ci_upper"] * cr["ci_upper"]
    return {"rule": rule, "description": EVENT_RULES[event].description, "value": v, "ci_lower": lo, "ci_upper": hi,
            "higher_is_better": True}


def _constraint_inputs(opt: Mapping[str, Any]) -> dict[str, float]:
    return {"accuracy": opt["accuracy"]["accuracy"], "latency_ms": opt["latency"]["median"],
            "model_size_mb": opt["model_size"]["mb"]}


def generate_submission(baseline_model: nn.Module, optimized_model: nn.Module, event: OlympicEvent | str,
                        dataset: Any = None, *, participant: str = "anonymous", techniques: Sequence[str] = (),
                        output_path: str | Path | None = None, measurement_runs: int = 30, warmup_runs: int = 5,
                        seed: int = 0, tolerance: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Benchmark both models under one protocol and build (and optionally write) a submission.

    `dataset` is a labelled `(X, y)` pair (default: the bundled digits test split). The
    submission holds the event, participant, techniques, system info, the SHA-256 of each
    model's weights, every raw measurement, the statistics, the improvements with their
    intervals, the constraint checks and the score, plus the tolerance `verify_submission`
    applies (`accuracy_abs`, `latency_rel`, `size_rel`).

    >>> # sub = generate_submission(base, opt, "memory_challenge", output_path="sub.json")
    """
    ev = get_event(event)
    for m, arg in ((baseline_model, "baseline_model"), (optimized_model, "optimized_model")):
        if not isinstance(m, nn.Module):
            raise TypeError(f"{arg}: expected a torch.nn.Module, got {type(m).__name__}")
    if not isinstance(participant, str) or not participant.strip():
        raise ValueError(f"participant: expected a non-empty name, got {participant!r}")
    dataset = _default_dataset() if dataset is None else dataset
    if not (isinstance(dataset, (tuple, list)) and len(dataset) == 2):
        raise ValueError("dataset: expected a labelled (X, y) pair")
    raw, bench = _measure_models({"baseline": baseline_model, "optimized": optimized_model}, dataset,
                                 measurement_runs, warmup_runs, seed)
    imp = _improvements(raw["baseline"], raw["optimized"], seed)
    checks = check_constraints(ev, _constraint_inputs(raw["optimized"]))
    sub = {
        "schema": SUBMISSION_SCHEMA, "version": SUBMISSION_VERSION,
        "event": ev.value, "participant": participant, "techniques": list(techniques),
        "system_info": bench.system_info if isinstance(bench.system_info, dict) else system_info(),
        "protocol": {"measurement_runs": measurement_runs, "warmup_runs": warmup_runs, "seed": seed,
                     "rounds": bench.rounds, "input_shape": list(bench.input_shape or ()),
                     "dataset_samples": int(len(dataset[1])), "benchmark": "tinytorch.benchmarking.benchmark.Benchmark"},
        "models": {"baseline": {"sha256": weights_sha256(baseline_model), "class": type(baseline_model).__name__},
                   "optimized": {"sha256": weights_sha256(optimized_model), "class": type(optimized_model).__name__,
                                 "quantization": getattr(optimized_model, "tinytorch_quantization", None)}},
        "hash_method": "sha256 over state_dict entries in sorted key order: key, dtype, shape, raw bytes",
        "measurements": raw,
        "improvements": imp,
        "constraints": checks,
        "constraints_met": all(c["passed"] for c in checks),
        "score": _score(ev, raw["optimized"], imp),
        "tolerance": dict(tolerance or {"accuracy_abs": 0.01, "latency_rel": 0.5, "size_rel": 0.01}),
    }
    if output_path is not None:
        write_json(output_path, sub, indent=1)
    return sub

# %% [markdown]
# ## Validation: is the file consistent with itself and with the rules?
#
# The validator trusts nothing but the raw values. It rebuilds every statistic from them
# (`BenchmarkResult.from_dict`), recomputes the improvements with the recorded seed (the
# bootstrap is seeded, so the intervals come out identical), re-checks the constraints and
# the score. Any disagreement, a broken rule, a wrong schema or version, or a truncated file
# is a rejection with its reason.

# %%
#| export
def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return math.isclose(float(a), float(b), **_TOL)


def _diff(prefix: str, stored: Mapping[str, Any], fresh: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    return [f"{prefix}.{k}: stored {stored.get(k)!r} but the raw values give {fresh.get(k)!r}"
            for k in keys if not _close(stored.get(k), fresh.get(k))]


def _check_doc(doc: Any) -> list[str]:
    if not isinstance(doc, dict):
        return ["not a submission: the top level is not a JSON object"]
    if doc.get("schema") != SUBMISSION_SCHEMA:
        return [f"schema: expected {SUBMISSION_SCHEMA!r}, got {doc.get('schema')!r}"]
    if doc.get("version") != SUBMISSION_VERSION:
        return [f"version: expected {SUBMISSION_VERSION}, got {doc.get('version')!r}"]
    missing = [k for k in ("event", "participant", "models", "measurements", "improvements", "constraints", "score",
                           "system_info", "protocol") if k not in doc]
    if missing:
        return [f"missing fields: {missing}"]
    reasons = []
    try:
        ev = get_event(doc["event"])
    except ValueError as e:
        return [str(e)]
    for role in ("baseline", "optimized"):
        sha = doc["models"].get(role, {}).get("sha256", "")
        if not (isinstance(sha, str) and len(sha) == 64 and all(ch in "0123456789abcdef" for ch in sha)):
            reasons.append(f"models.{role}.sha256: expected 64 hex digits, got {sha!r}")
    meas = doc["measurements"]
    for role in ("baseline", "optimized"):
        m = meas.get(role)
        if not isinstance(m, dict):
            return reasons + [f"measurements.{role}: missing"]
        try:
            fresh = BenchmarkResult.from_dict(m["latency"]).to_dict()
        except (KeyError, TypeError, ValueError) as e:
            return reasons + [f"measurements.{role}.latency: {e}"]
        reasons += _diff(f"measurements.{role}.latency", m["latency"], fresh, STATISTICS)
        a = m["accuracy"]
        flags = a["per_sample_correct"]
        correct, count = int(sum(flags)), len(flags)
        acc_fresh = {"correct": correct, "count": count, "accuracy": correct / count if count else None}
        reasons += _diff(f"measurements.{role}.accuracy", a, acc_fresh, ("correct", "count", "accuracy"))
        w = wilson_interval(correct, count) if count else (None, None)
        reasons += _diff(f"measurements.{role}.accuracy.wilson_95", dict(enumerate(a["wilson_95"])), dict(enumerate(w)), (0, 1))
        s = m["model_size"]
        reasons += _diff(f"measurements.{role}.model_size", s, {"mb": s["bytes"] / 2**20}, ("mb",))
    if reasons:
        return reasons
    imp = _improvements(meas["baseline"], meas["optimized"], doc["improvements"].get("seed", 0))
    for k in ("speedup", "compression_ratio", "accuracy_delta", "accuracy_retention"):
        reasons += _diff(f"improvements.{k}", doc["improvements"].get(k, {}), imp[k], ("value", "ci_lower", "ci_upper"))
    checks = check_constraints(ev, _constraint_inputs(meas["optimized"]))
    if [c["passed"] for c in checks] != [c.get("passed") for c in doc["constraints"]]:
        reasons.append("constraints: the stored checks disagree with the measurements")
    reasons += _diff("score", doc["score"], _score(ev, meas["optimized"], imp), ("value", "ci_lower", "ci_upper"))
    for c in checks:
        if not c["passed"]:
            reasons.append(f"breaks the {ev.value} rule: {c['quantity']} {c['op']} {c['threshold']} "
                           f"(measured {c['measured']})")
    return reasons


def validate_submission(path: str | Path) -> dict[str, Any]:
    """Check a submission file: schema and version, statistics and improvements recomputed from
    the raw values, the event's constraints and the score.

    Returns `{"valid": bool, "reasons": [...], "path", "submission"}` (`submission` is None
    when the file cannot be read). A missing file raises `FileNotFoundError`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no submission file at {path}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return {"valid": False, "reasons": [f"not valid JSON (truncated or corrupted?): {e}"], "path": str(path),
                "submission": None}
    try:
        reasons = _check_doc(doc)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        reasons = [f"malformed submission: {type(e).__name__}: {e}"]
    return {"valid": not reasons, "reasons": reasons, "path": str(path), "submission": doc if isinstance(doc, dict) else None}

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.benchmarking.optimize import prune_magnitude, quantize_int8

    _base = default_digits_model()
    _opt = quantize_int8(prune_magnitude(_base, 0.5), "static", calibration_data=load_digits_split("train")[0][:256].split(64))
    with tempfile.TemporaryDirectory() as _tmp:
        _sub = generate_submission(_base, _opt, "memory_challenge", participant="demo", measurement_runs=10,
                                   techniques=["prune 50%", "int8 static"], output_path=Path(_tmp) / "s.json")
        print("score", _sub["score"]["value"], "valid:", validate_submission(Path(_tmp) / "s.json")["valid"])

# %% [markdown]
# ## Verification: does the claim hold here?
#
# Validation checks the file; verification checks the *world*. Given the model (and, for the
# speed-up, the baseline), it recomputes the weight hash and re-measures on this machine. The
# tolerance is stated in the submission: accuracy within `accuracy_abs` (absolute), model size
# within `size_rel`, and latency-derived claims within `latency_rel` (relative; a different
# machine is legitimately faster or slower, so this one is loose, and only the latency claims
# the event is scored on count toward the verdict; the others are reported for information).

# %%
#| export
def verify_submission(path: str | Path, model: nn.Module, dataset: Any = None, *, baseline_model: nn.Module | None = None,
                      measurement_runs: int | None = None, tolerance: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Re-measure a submission's optimised `model` (and `baseline_model`, if given) on this machine.

    The submission's protocol (measurement and warmup runs, seed) is reused unless
    `measurement_runs` is given. Returns `{"verified": bool, "checks": [...], "validation": ...}`;
    each check has the claimed and measured values, the tolerance, whether it holds, and whether
    it `counts` toward `verified`: the weight hashes, accuracy, model size, and the latency
    claims the event's score rests on (speed-up for the latency sprint, all-around and extreme
    push). Other latency claims are reported for information.
    """
    report = validate_submission(path)
    doc = report["submission"]
    if doc is None or "models" not in doc:
        return {"verified": False, "checks": [], "validation": report,
                "reasons": ["the submission cannot be read"] + report["reasons"]}
    tol = dict(doc.get("tolerance") or {})
    tol.update(tolerance or {})
    tol = {"accuracy_abs": 0.01, "latency_rel": 0.5, "size_rel": 0.01, **tol}
    checks = []
    sha = weights_sha256(model)
    checks.append({"claim": "optimized weights sha256", "claimed": doc["models"]["optimized"]["sha256"], "measured": sha,
                   "holds": sha == doc["models"]["optimized"]["sha256"]})
    models = {"optimized": model}
    if baseline_model is not None:
        bsha = weights_sha256(baseline_model)
        checks.append({"claim": "baseline weights sha256", "claimed": doc["models"]["baseline"]["sha256"],
                       "measured": bsha, "holds": bsha == doc["models"]["baseline"]["sha256"]})
        models = {"baseline": baseline_model, "optimized": model}
    dataset = _default_dataset() if dataset is None else dataset
    proto = doc.get("protocol", {})
    runs = measurement_runs or int(proto.get("measurement_runs", 20))
    raw, _ = _measure_models(models, dataset, runs, int(proto.get("warmup_runs", 5)), proto.get("seed", 0))
    speed_counts = EVENT_RULES[get_event(doc["event"])].score in ("speedup", "all_around", "speedup_x_compression")
    claimed = doc["measurements"]["optimized"]
    acc, c_acc = raw["optimized"]["accuracy"]["accuracy"], claimed["accuracy"]["accuracy"]
    checks.append({"claim": "optimized accuracy", "claimed": c_acc, "measured": acc, "tolerance": tol["accuracy_abs"],
                   "holds": abs(acc - c_acc) <= tol["accuracy_abs"]})
    size, c_size = raw["optimized"]["model_size"]["bytes"], claimed["model_size"]["bytes"]
    checks.append({"claim": "optimized model size (bytes)", "claimed": c_size, "measured": size,
                   "tolerance": tol["size_rel"], "holds": abs(size - c_size) <= tol["size_rel"] * c_size})
    if baseline_model is not None:
        imp = _improvements(raw["baseline"], raw["optimized"], doc["protocol"].get("seed", 0))
        for key in ("speedup", "compression_ratio"):
            c, m = doc["improvements"][key]["value"], imp[key]["value"]
            rel = tol["latency_rel"] if key == "speedup" else tol["size_rel"]
            checks.append({"claim": key, "claimed": c, "measured": m, "tolerance": rel, "holds": abs(m - c) <= rel * c,
                           "counts": speed_counts if key == "speedup" else True})
    else:
        c, m = claimed["latency"]["median"], raw["optimized"]["latency"]["median"]
        checks.append({"claim": "optimized median latency (ms)", "claimed": c, "measured": m, "tolerance": tol["latency_rel"],
                       "holds": abs(m - c) <= tol["latency_rel"] * c, "counts": False,
                       "note": "absolute latency depends on the machine; pass baseline_model to check the speedup instead"})
    for c in checks:
        c.setdefault("counts", True)
    reasons = [f"{c['claim']}: claimed {c['claimed']}, measured {c['measured']}" for c in checks
               if not c["holds"] and c["counts"]]
    reasons += [f"validation: {r}" for r in report["reasons"]]
    return {"verified": report["valid"] and all(c["holds"] for c in checks if c["counts"]), "checks": checks,
            "validation": report,
            "reasons": reasons, "system_info": system_info()}

# %% [markdown]
# ## The leaderboard, with honest ties
#
# Two entries whose score intervals overlap cannot be told apart by these measurements, so
# they share a rank. The rank of an entry is 1 + the number of entries that are *certainly*
# better: whose interval lies entirely above its own.
#
# ```
# score:   1      2      3      4      5      (higher wins)
# C                          |--●--|          rank 1: nothing lies entirely above it
# A            |----●----|                    rank 2: C is certainly better     } tied
# B               |---●---|                   rank 2: C is certainly better     }
# D  |-●-|                                    rank 4: C, A and B are all above
# ```
#
# **Your task.** Complete `rank_with_ties(intervals)`: given `[(lower, upper), ...]` with
# higher scores better, return each entry's rank.
#
# - *Approach:* for entry i, count the entries j whose lower bound is above i's upper bound.
# - *Example:* `[(5, 6), (5.5, 7), (1, 2)]` → `[1, 1, 3]`.
# - *Hints:* a zero-width interval (an exact score) works the same way; two identical exact
#   scores tie.

# %% nbgrader={"grade": false, "grade_id": "olympics-rank-with-ties", "solution": true, "schema_version": 3}
#| export
def rank_with_ties(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """Ranks (1 = best, higher scores better) where overlapping intervals tie.

    >>> rank_with_ties([(5, 6), (5.5, 7), (1, 2)])
    [1, 1, 3]
    """
    ### BEGIN SOLUTION
    return [1 + sum(1 for lo_j, _ in intervals if lo_j > hi_i) for _, hi_i in intervals]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-olympics-rank-with-ties", "locked": true, "points": 2, "schema_version": 3}
def test_unit_rank_with_ties():
    assert rank_with_ties([(5, 6), (5.5, 7), (1, 2)]) == [1, 1, 3], "overlapping intervals tie; both beat (1, 2)"
    assert rank_with_ties([(1, 1), (3, 3), (2, 2)]) == [3, 1, 2], "exact, distinct scores rank in order"
    assert rank_with_ties([(2, 2), (2, 2)]) == [1, 1], "identical exact scores tie"
    assert rank_with_ties([(0, 10), (4, 5), (6, 7)]) == [1, 2, 1], "(6, 7) is certainly better than (4, 5); (0, 10) ties both"


if __name__ == "__main__":
    test_unit_rank_with_ties()

# %%
#| export
def leaderboard(submissions_dir: str | Path, event: OlympicEvent | str, output_path: str | Path | None = None) -> dict[str, Any]:
    """Rank every valid submission for `event` in `submissions_dir` (`*.json`).

    Returns `{"table": DataFrame, "markdown": str, "csv": str, "invalid": [{"path", "reasons"}]}`;
    entries whose score intervals overlap share a rank and are marked tied. Invalid files are
    listed with their reasons. With `output_path`, writes `<output_path>.md` and `.csv`.
    """
    ev = get_event(event)
    folder = Path(submissions_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"submissions_dir: not a folder: {folder}")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ValueError(f"submissions_dir: no submission files (*.json) in {folder}")
    entries, invalid = [], []
    for f in files:
        rep = validate_submission(f)
        doc = rep["submission"]
        if not rep["valid"]:
            invalid.append({"path": str(f), "reasons": rep["reasons"]})
            continue
        if doc["event"] != ev.value:
            continue
        s = doc["score"]
        entries.append({"participant": doc["participant"], "file": f.name, "score": s["value"],
                        "ci_lower": s["ci_lower"], "ci_upper": s["ci_upper"],
                        "speedup": doc["improvements"]["speedup"]["value"],
                        "compression_ratio": doc["improvements"]["compression_ratio"]["value"],
                        "accuracy": doc["measurements"]["optimized"]["accuracy"]["accuracy"],
                        "techniques": ", ".join(doc.get("techniques", []))})
    cols = ["rank", "tied", "participant", "score", "ci_lower", "ci_upper", "speedup", "compression_ratio",
            "accuracy", "techniques", "file"]
    if entries:
        ranks = rank_with_ties([(e["ci_lower"], e["ci_upper"]) for e in entries])
        for e, r in zip(entries, ranks):
            e["rank"] = r
        for e in entries:
            e["tied"] = sum(1 for o in entries if o["rank"] == e["rank"]) > 1
        table = pd.DataFrame(entries)[cols].sort_values(["rank", "score"], ascending=[True, False]).reset_index(drop=True)
    else:
        table = pd.DataFrame(columns=cols)
    md = [f"# TorchPerf Olympics leaderboard: {ev.value}", "", f"Score: {EVENT_RULES[ev].description}.", "",
          "| rank | participant | score | 95% interval | accuracy | techniques |", "|---|---|---|---|---|---|"]
    for _, row in table.iterrows():
        md.append(f"| {row['rank']}{' (tied)' if row['tied'] else ''} | {row['participant']} | {row['score']:.4g} | "
                  f"[{row['ci_lower']:.4g}, {row['ci_upper']:.4g}] | {row['accuracy']:.2%} | {row['techniques']} |")
    if not entries:
        md.append(f"| — | no valid submission for {ev.value} | | | | |")
    if invalid:
        md += ["", "## Rejected submissions", ""] + [f"- {i['path']}: {'; '.join(i['reasons'])}" for i in invalid]
    buf = io.StringIO()
    table.to_csv(buf, index=False, quoting=csv.QUOTE_MINIMAL)
    out = {"table": table, "markdown": "\n".join(md) + "\n", "csv": buf.getvalue(), "invalid": invalid}
    if output_path is not None:
        base = Path(output_path).with_suffix("")
        write_atomic(base.with_suffix(".md"), out["markdown"])
        write_atomic(base.with_suffix(".csv"), out["csv"])
    return out

# %% [markdown]
# ## Comparing techniques, and ablation
#
# `compare_optimization_techniques(base_model, optimized_models, datasets)` puts the baseline
# and every optimised variant into one `Benchmark`, so their latency (interleaved rounds),
# accuracy (`results.top1_correct` on every labelled sample) and model size (serialized
# bytes) are measured exactly as every other part of the library measures them. Each variant
# is then compared with the baseline through the one comparison, `results.compare_results`:
#
# | improvement | from | interval and test |
# |---|---|---|
# | `speedup` | median latency baseline / variant | bootstrap interval, Mann–Whitney U |
# | `compression_ratio` | serialized bytes baseline / variant | exact (no sampling error), 2% floor |
# | `accuracy_delta` | accuracy variant − baseline (points) | paired bootstrap, McNemar exact |
#
# A figure that cannot be had is `None` with the reason: no labelled data means no accuracy
# (and no accuracy delta); an object with only `forward()` hides its parameters, so it has no
# model size. A model that raises is a failed measurement, its error kept as the reason.
#
# Four recommendations follow, one per deployment situation. Each names a variant only when
# that variant is **significantly** better than the baseline on what the situation cares
# about, and does not lose more than `max_accuracy_drop` accuracy (where accuracy could be
# measured; where it could not, the recommendation says so in `caveat`):
#
# | key | the variant with | also needs |
# |---|---|---|
# | `for_latency_critical` | the largest significant speed-up | |
# | `for_memory_constrained` | the largest significant compression | |
# | `for_accuracy_preservation` | the best accuracy delta | a significant speed-up or compression, measured accuracy |
# | `for_balanced_deployment` | the largest geometric mean of speed-up, compression and accuracy retention | a significant gain, no significant loss in speed or size |
#
# Otherwise the recommendation is `None`, with the reason. The Pareto set over (latency,
# model size, accuracy) counts differences that are not significant as ties.
#
# `optimized_models` is a list of models (named by their `.name`, else their class) or a dict
# `{name: model}`; the baseline is named by its `.name`, else "baseline".
#
# `ablation` applies techniques one after another (prune, then quantize, …) and measures every
# stage, giving the table of deltas from one step to the next.

# %%
#| export
_USE_CASES = {
    "for_latency_critical": ("latency", "speedup", "real-time inference: the lowest latency"),
    "for_memory_constrained": ("model_size", "compression_ratio", "microcontrollers, download size: the smallest model"),
    "for_accuracy_preservation": ("accuracy", "accuracy_delta",
                                  "quality-critical: faster or smaller while keeping the baseline's accuracy"),
    "for_balanced_deployment": (None, "balanced", "general deployment: the best combined gain without a significant loss"),
}


def _first_dataset(datasets: Any) -> tuple[torch.Tensor, torch.Tensor]:
    "The first labelled dataset as `(X, y)` (any form `as_eval_sets` takes); None: the bundled digits test split."
    from tinytorch.benchmarking.results import as_eval_sets

    if datasets is None:
        return _default_dataset()
    sets = as_eval_sets(datasets)
    labelled = [d for d in sets if d.has_labels]
    if not labelled:
        why = "; ".join(d.reason or f"dataset '{d.name}' has no labels" for d in sets) or "no dataset was given"
        raise ValueError(f"datasets: expected a labelled (X, y) dataset or a list of them, got none with labels ({why})")
    X, y = labelled[0].arrays()
    return X, y


def _measured_figure(bench: Benchmark, metric: str, name: str) -> dict[str, Any]:
    "One measured result as a dict (`value` is its median), or `value` None with the reason."
    r = bench.results.get(metric, {}).get(name)
    if r is not None:
        return {"value": r.median, "unit": r.unit, "mean": r.mean, "ci_lower": r.ci_lower, "ci_upper": r.ci_upper,
                "ci_method": r.ci_method, "count": r.count, "method": r.method, "result": r.to_dict()}
    failed = bench.failures.get(metric, {}).get(name)
    if failed is not None:
        return {"value": None, "reason": f"failed: {failed['error_type']}: {failed['message']}"}
    return {"value": None, "reason": bench.unavailable.get(metric, {}).get(name, f"{metric} was not measured")}


def _improvement(bench: Benchmark, base: str, name: str, metric: str, seed: int) -> dict[str, Any]:
    "The variant against the baseline on `metric` (through `compare_results`), or None with the reason."
    for who in (base, name):
        if who not in bench.results.get(metric, {}):
            return {"value": None, "reason": f"no {metric} for '{who}': {_measured_figure(bench, metric, who)['reason']}"}
    try:
        c = bench.compare(base, name, metric, seed=seed)
    except ValueError as e:  # a figure is missing (unavailable or failed), or the results cannot be paired
        return {"value": None, "reason": str(e)}
    common = {"p_value": c.p_value, "significant": c.significant, "verdict": c.verdict, "test": c.test}
    if metric == "accuracy":
        lo, hi = c.details["difference_ci"]
        return {"value": c.details["difference"], "ci_lower": lo, "ci_upper": hi, **common,
                "baseline": c.median_a, "optimized": c.median_b,
                "retention": c.median_b / c.median_a if c.median_a else None,
                "method": "accuracy variant - baseline; paired bootstrap interval, McNemar exact test"}
    inv = lambda v: None if v is None or v == 0 else 1.0 / v  # noqa: E731  (baseline / variant)
    lo, hi = (inv(c.ratio), inv(c.ratio)) if metric == "model_size" else (inv(c.ci_upper), inv(c.ci_lower))
    return {"value": inv(c.ratio), "ci_lower": lo, "ci_upper": hi, **common,
            "baseline": c.median_a, "optimized": c.median_b,
            "method": ("median latency baseline / variant; bootstrap interval, Mann-Whitney U" if metric == "latency"
                       else "serialized bytes baseline / variant: exact counts, significant when at least 2% apart")}


def _gains(imp: Mapping[str, Any]) -> tuple[bool, bool]:
    "(a significant gain in speed or size, a significant loss in speed or size)."
    parts = [imp[k] for k in ("speedup", "compression_ratio") if imp[k]["value"] is not None]
    return (any(p["significant"] and p["value"] > 1 for p in parts),
            any(p["significant"] and p["value"] < 1 for p in parts))


def _recommend(improvements: Mapping[str, Mapping[str, Any]], max_accuracy_drop: float) -> dict[str, dict[str, Any]]:
    "One recommendation per use case: a significantly better variant, or None with the reason."
    recs = {}
    for key, (metric, figure, use_case) in _USE_CASES.items():
        candidates, caveats = [], {}
        for name, imp in improvements.items():
            acc = imp["accuracy_delta"]
            if acc["value"] is not None and acc["value"] < -max_accuracy_drop:
                continue  # loses too much accuracy for any use case
            caveats[name] = None if acc["value"] is not None else f"accuracy not checked: {acc['reason']}"
            gain, loss = _gains(imp)
            if figure in ("speedup", "compression_ratio"):
                f = imp[figure]
                if f["value"] is not None and f["significant"] and f["value"] > 1:
                    candidates.append((f["value"], name, f))
            elif figure == "accuracy_delta":
                if acc["value"] is not None and gain:
                    candidates.append((acc["value"], name, acc))
            elif gain and not loss:
                parts = {k: imp[k]["value"] for k in ("speedup", "compression_ratio") if imp[k]["value"] is not None}
                if acc["value"] is not None and acc.get("retention") is not None:
                    parts["accuracy_retention"] = acc["retention"]
                score = math.prod(parts.values()) ** (1 / len(parts))
                candidates.append((score, name, {"value": score, "parts": parts,
                                                 "method": "geometric mean of the measured ratios"}))
        if candidates:
            value, name, evidence = max(candidates, key=lambda c: c[0])
            if figure == "speedup":
                reason = f"significantly faster than the baseline: {value:.2f}x ({evidence['verdict']})"
            elif figure == "compression_ratio":
                reason = f"significantly smaller than the baseline: {value:.2f}x ({evidence['verdict']})"
            elif figure == "accuracy_delta":
                reason = f"{value * 100:+.1f} accuracy points, with a significant gain in speed or size"
            else:
                reason = f"combined gain {value:.2f} ({', '.join(f'{k} {v:.2f}' for k, v in evidence['parts'].items())})"
            recs[key] = {"model": name, "reason": reason, "use_case": use_case, "metric": metric, figure: value,
                         "evidence": evidence, "caveat": caveats.get(name)}
        else:
            need = {"speedup": "significantly faster", "compression_ratio": "significantly smaller",
                    "accuracy_delta": "significantly faster or smaller with measured accuracy",
                    "balanced": "significantly faster or smaller without being significantly slower or larger"}[figure]
            missing = sorted({imp[f]["reason"] for imp in improvements.values()
                              for f in ((figure,) if figure in ("speedup", "compression_ratio", "accuracy_delta") else ())
                              if imp[f]["value"] is None})
            recs[key] = {"model": None, "use_case": use_case, "metric": metric,
                         "reason": f"no variant is {need} than the baseline while losing at most "
                                   f"{max_accuracy_drop:.0%} accuracy" + (f" ({'; '.join(missing)})" if missing else "")}
    return recs


def compare_optimization_techniques(base_model: Any, optimized_models: Sequence[Any] | Mapping[str, Any],
                                    datasets: Any = None, *, measurement_runs: int = 20, seed: int = 0,
                                    max_accuracy_drop: float = 0.02,
                                    input_shape: Sequence[int] | None = None) -> dict[str, Any]:
    """Measure the baseline and each optimised variant under one protocol (one `Benchmark`) and
    compare every variant with the baseline.

    `optimized_models`: a list of models (named by `.name`, else their class) or a dict
    `{name: model}`; models are anything `Benchmark` accepts. `datasets`: any form `Benchmark`
    accepts (None: the bundled digits test split); without labelled data accuracy is None with
    the reason. `input_shape`: the timing input (default: the first dataset sample).

    Returns `base_model` (its name), `base_metrics` and `optimized_results` (per model: latency,
    accuracy, model_size, memory, each a measured figure or None with the reason),
    `improvements` (per variant: speedup, compression_ratio, accuracy_delta, each with its
    interval and significance, or None with the reason), `efficiency_metrics`,
    `recommendations` (`for_latency_critical`, `for_memory_constrained`,
    `for_accuracy_preservation`, `for_balanced_deployment`: a model or None, with the reason),
    `table` (a DataFrame), `pareto` (names; not-significant differences are ties) and
    `comparisons` (`{name: improvements}`, None for the baseline).

    >>> # res = compare_optimization_techniques(base, [int8_model, pruned_model], [(X, y)])
    >>> # res["recommendations"]["for_memory_constrained"]["model"]  ->  'int8' (or None, with the reason)
    """
    from tinytorch.profiling.timing import model_name

    if isinstance(optimized_models, Mapping):
        variants = dict(optimized_models)
    elif isinstance(optimized_models, (list, tuple)):
        variants = {}
        for i, m in enumerate(optimized_models):
            name = model_name(m, f"optimized_{i}")
            if name in variants:
                raise ValueError(f"optimized_models: model names must be unique, got '{name}' twice; "
                                 "give each a .name or pass a dict {name: model}")
            variants[name] = m
    else:
        raise TypeError("optimized_models: expected a list of models or a dict {name: model}, "
                        f"got {type(optimized_models).__name__}")
    if not variants:
        raise ValueError("optimized_models: expected at least one optimised model, got none")
    own = getattr(base_model, "name", None)
    base = own if isinstance(own, str) and own else "baseline"
    if base in variants:
        raise ValueError(f"optimized_models: the name '{base}' is the base model's; give the variants other names")
    if not 0 <= max_accuracy_drop <= 1:
        raise ValueError(f"max_accuracy_drop: expected a fraction in [0, 1], got {max_accuracy_drop!r}")
    bench = Benchmark({base: base_model, **variants}, _default_dataset() if datasets is None else datasets,
                      warmup_runs=3, measurement_runs=measurement_runs, seed=seed)
    bench.run_latency_benchmark(input_shape)
    bench.run_accuracy_benchmark()
    bench.run_memory_benchmark(input_shape)

    metrics = ("latency", "accuracy", "model_size", "memory")
    measured = {name: {m: _measured_figure(bench, m, name) for m in metrics} for name in bench.names}
    improvements = {name: {"speedup": _improvement(bench, base, name, "latency", seed),
                           "compression_ratio": _improvement(bench, base, name, "model_size", seed),
                           "accuracy_delta": _improvement(bench, base, name, "accuracy", seed)}
                    for name in variants}
    for imp in improvements.values():
        acc = imp["accuracy_delta"]
        imp["accuracy_retention"] = ({"value": acc["retention"], "method": "accuracy variant / baseline"}
                                     if acc["value"] is not None else {"value": None, "reason": acc["reason"]})
    rows, efficiency = [], {}
    for name in bench.names:
        fig = measured[name]
        acc, ms = fig["accuracy"]["value"], fig["latency"]["value"]
        mb = fig["model_size"]["value"]
        imp = improvements.get(name)
        eff = {"accuracy_per_mb": acc / mb if acc is not None and mb else None,
               "accuracy_per_ms": acc / ms if acc is not None and ms else None}
        missing = [fig[m]["reason"] for m in ("accuracy", "model_size", "latency") if fig[m]["value"] is None]
        if missing:
            eff["reason"] = "; ".join(missing)
        if imp is not None:
            efficiency[name] = eff
        rows.append({"model": name, "latency_ms": ms, "model_size_mb": mb, "accuracy": acc,
                     "speedup": imp["speedup"]["value"] if imp else 1.0,
                     "speedup_ci": (imp["speedup"].get("ci_lower"), imp["speedup"].get("ci_upper")) if imp else None,
                     "speedup_significant": imp["speedup"].get("significant") if imp else None,
                     "compression_ratio": imp["compression_ratio"]["value"] if imp else (1.0 if mb else None),
                     "accuracy_retention": imp["accuracy_retention"]["value"] if imp else (1.0 if acc is not None else None),
                     "accuracy_delta": imp["accuracy_delta"]["value"] if imp else (0.0 if acc is not None else None),
                     **eff})
    on_front = [m for m in ("latency", "model_size", "accuracy")
                if all(name in bench.results.get(m, {}) for name in bench.names)]
    if on_front:
        detail = pareto_front_with_ties({n: {m: bench.results[m][n] for m in on_front} for n in bench.names},
                                        on_front, seed=seed)
        detail["metrics"] = on_front
    else:
        detail = {"front": [], "metrics": [], "reason": "no metric was measured for every model"}
    return {
        "base_model": base,
        "base_metrics": measured[base],
        "optimized_results": {name: measured[name] for name in variants},
        "improvements": improvements,
        "efficiency_metrics": efficiency,
        "recommendations": _recommend(improvements, max_accuracy_drop),
        "table": pd.DataFrame(rows),
        "pareto": list(detail["front"]),
        "pareto_detail": detail,
        "comparisons": {base: None, **improvements},
        "protocol": {"measurement_runs": measurement_runs, "seed": seed, "max_accuracy_drop": max_accuracy_drop,
                     "input_shape": list(bench.input_shape or ()), "input_source": bench.input_source},
        "system_info": bench.system_info,
    }


def ablation(base_model: nn.Module, steps: Sequence[tuple[str, Callable[[nn.Module], nn.Module]]], dataset: Any = None,
             *, measurement_runs: int = 20, seed: int = 0) -> pd.DataFrame:
    """Apply `steps` (`[(name, model -> new model), ...]`) cumulatively and measure every stage.

    Returns one row per stage (the baseline first): latency_ms, model_size_mb, accuracy, the
    deltas from the previous stage and the cumulative speed-up and compression.

    >>> # ablation(model, [("prune 50%", lambda m: prune_magnitude(m, 0.5)), ("int8", quantize_int8)])
    """
    if not steps:
        raise ValueError("steps: expected at least one (name, function) step")
    stages = {"baseline": base_model}
    current = base_model
    for i, step in enumerate(steps):
        if not (isinstance(step, (tuple, list)) and len(step) == 2 and callable(step[1])):
            raise ValueError(f"steps[{i}]: expected a (name, function) pair, got {step!r}")
        name, fn = step
        if name in stages:
            raise ValueError(f"steps[{i}]: duplicate step name {name!r}")
        current = fn(current)
        if not isinstance(current, nn.Module):
            raise TypeError(f"steps[{i}] ({name}): expected the function to return an nn.Module, got {type(current).__name__}")
        stages[name] = current
    raw, _ = _measure_models(stages, _first_dataset(dataset), measurement_runs, 3, seed)
    rows, prev = [], None
    base = raw["baseline"]
    for name, r in raw.items():
        row = {"step": name, "latency_ms": r["latency"]["median"], "model_size_mb": r["model_size"]["mb"],
               "accuracy": r["accuracy"]["accuracy"],
               "cumulative_speedup": base["latency"]["median"] / r["latency"]["median"],
               "cumulative_compression": base["model_size"]["bytes"] / r["model_size"]["bytes"]}
        row.update({f"delta_{k}": (row[k] - prev[k]) if prev else 0.0 for k in ("latency_ms", "model_size_mb", "accuracy")})
        if prev is not None:
            prev_raw = raw[prev["step"]]
            row["speedup_vs_previous"] = _improvements(prev_raw, r, seed)["speedup"]["value"]
        else:
            row["speedup_vs_previous"] = 1.0
        rows.append(row)
        prev = row
    return pd.DataFrame(rows)

# %%
def test_unit_compare_optimization_techniques():
    import time as _time

    class Slept:  # a stand-in model: forward() only, its work a short sleep (what is timed is real)
        def __init__(self, name: str, ms: float):
            self.name, self.ms = name, ms

        def forward(self, x):
            _time.sleep(self.ms / 1000)
            return x

    res = compare_optimization_techniques(Slept("base", 1.0), [Slept("fast", 0.5), Slept("same", 1.0)],
                                          [{"test": "data"}], measurement_runs=15)
    assert res["base_model"] == "base" and set(res["improvements"]) == {"fast", "same"}
    fast = res["improvements"]["fast"]
    assert fast["speedup"]["significant"] and fast["speedup"]["value"] > 1.2, fast["speedup"]
    assert fast["accuracy_delta"]["value"] is None and "labelled" in fast["accuracy_delta"]["reason"]
    assert fast["compression_ratio"]["value"] is None and "parameters" in fast["compression_ratio"]["reason"]
    recs = res["recommendations"]
    assert recs["for_latency_critical"]["model"] == "fast" and recs["for_latency_critical"]["caveat"]
    assert recs["for_memory_constrained"]["model"] is None and recs["for_memory_constrained"]["reason"]
    assert recs["for_accuracy_preservation"]["model"] is None, "accuracy was not measured: nothing to preserve"


if __name__ == "__main__":
    test_unit_compare_optimization_techniques()

# %% [markdown]
# ## Entry points for `tito olympics`
#
# The CLI calls these. Without model files they use the bundled defaults, so the whole loop works
# from a fresh clone; with `--model FILE` (and optionally `--baseline FILE`) they benchmark *your*
# model, saved as TorchScript (`torch.jit.save`) or as a pickled module (`torch.save(model)`).
# From Python, the same is `generate_submission(baseline, mine, event, ...)`.
#
# | command | function |
# |---|---|
# | `tito olympics submit [--event E] [--participant P] [--output F] [--model M [--baseline B]]` | `olympics_submit(event, participant, output_path, model_path=M, baseline_path=B)` |
# | `tito olympics validate F` | `validate_submission(F)` → exit 0 when `valid` |
# | `tito olympics verify F [--model M [--baseline B]]` | `olympics_verify(F, model_path=M, baseline_path=B)` → exit 0 when `verified` |
# | `tito olympics leaderboard DIR [--event E]` | `leaderboard(DIR, E)` → print `markdown` |

# %%
#| export
DEFAULT_TECHNIQUES = ("magnitude pruning 50% (global)", "int8 static quantization (calibrated on 256 training images)")


def default_olympics_models() -> tuple[nn.Module, nn.Module]:
    """The default pair: the trained digits CNN and its pruned (50%, global) + int8 static version.

    Deterministic: the same torch version gives the same weights (and the same hashes).
    """
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.benchmarking.optimize import prune_magnitude, quantize_int8

    base = default_digits_model()
    calib = load_digits_split("train")[0][:256].split(64)
    return base, quantize_int8(prune_magnitude(base, 0.5), "static", calibration_data=calib)


def _submission_models(model_path: str | Path | None, baseline_path: str | Path | None
                       ) -> tuple[nn.Module, nn.Module, tuple[str, ...]]:
    "(baseline, optimized, techniques): the bundled pair, or the participant's files (baseline: the digits CNN)."
    if model_path is None:
        if baseline_path is not None:
            raise ValueError("baseline_path: give model_path (your optimized model) as well; "
                             "a baseline alone has nothing to be compared with")
        base, opt = default_olympics_models()
        return base, opt, DEFAULT_TECHNIQUES
    from tinytorch.benchmarking.digits import default_digits_model
    from tinytorch.benchmarking.suite import load_model_file

    loaded = []
    for p, arg in ((model_path, "model_path"), (baseline_path, "baseline_path")):
        if p is None:
            loaded.append(None)
            continue
        m = load_model_file(p)
        if not isinstance(m, nn.Module):
            raise TypeError(f"{arg}: the Olympics hash and verify a torch model's weights; {str(p)!r} is not a "
                            "TorchScript or torch.save'd nn.Module")
        loaded.append(m)
    opt, base = loaded
    techniques = (f"participant model from {Path(model_path).name}",) + (
        (f"participant baseline from {Path(baseline_path).name}",) if baseline_path is not None else ())
    return (base if base is not None else default_digits_model()), opt, techniques


def olympics_submit(event: OlympicEvent | str = "memory_challenge", participant: str = "anonymous",
                    output_path: str | Path = "submission.json", measurement_runs: int = 30, *,
                    model_path: str | Path | None = None, baseline_path: str | Path | None = None) -> dict[str, Any]:
    """Benchmark a baseline against an optimized model for `event` and write the submission.

    Without `model_path`: the bundled pair (`default_olympics_models`). With it: the model in that
    file against `baseline_path` (default: the bundled digits CNN), on the digits test split.

    >>> # olympics_submit("latency_sprint", "ada", "sub.json", model_path="mine.pt")
    """
    base, opt, techniques = _submission_models(model_path, baseline_path)
    return generate_submission(base, opt, event, None, participant=participant, techniques=techniques,
                               output_path=output_path, measurement_runs=measurement_runs)


def olympics_verify(path: str | Path, measurement_runs: int | None = None, *,
                    model_path: str | Path | None = None, baseline_path: str | Path | None = None) -> dict[str, Any]:
    "Verify a submission here: rebuild the bundled models, or load the files it was made from."
    base, opt, _ = _submission_models(model_path, baseline_path)
    return verify_submission(path, opt, None, baseline_model=base, measurement_runs=measurement_runs)

# %%
def test_unit_submission_roundtrip():
    from tinytorch.benchmarking.digits import DigitsCNN, load_digits_split

    X, y = load_digits_split("test")
    base, opt = default_olympics_models()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sub.json"
        sub = generate_submission(base, opt, "memory_challenge", (X, y), participant="t", measurement_runs=8,
                                  output_path=path)
        assert validate_submission(path)["valid"], validate_submission(path)["reasons"]
        assert sub["improvements"]["compression_ratio"]["value"] > 1.5
        doc = json.loads(path.read_text())
        doc["measurements"]["optimized"]["latency"]["values"][0] *= 3
        path.write_text(json.dumps(doc))
        rep = validate_submission(path)
        assert not rep["valid"] and any("latency" in r for r in rep["reasons"]), rep["reasons"]
        path.write_text(path.read_text()[:500])
        assert not validate_submission(path)["valid"], "a truncated file must be rejected"
        torch.manual_seed(0)
        bad = generate_submission(base, DigitsCNN(), "memory_challenge", (X, y), measurement_runs=5,
                                  output_path=Path(tmp) / "bad.json")
        assert not bad["constraints_met"]
        rep = validate_submission(Path(tmp) / "bad.json")
        assert not rep["valid"] and any("breaks" in r for r in rep["reasons"])


if __name__ == "__main__":
    test_unit_submission_roundtrip()
