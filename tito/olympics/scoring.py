"""The judge's arithmetic on what it measured: figures and scores with intervals, ranks by the one
significance rule, claims checked against the measurements, students with the same model, the
leaderboard. Plain lists in, plain dicts out (testable without a sandbox); every decision goes
through the library's `is_significant` / `compare_samples` / `compare_results`.

Latency comes in interleaved rounds: each round runs every (student, model) pair once in a fresh
order, and a student's speed-up for the round is baseline time / optimised time of that round:

    round 1:  B.base B.opt  A.opt  C.base A.base C.opt      speedup_A,1 = A.base / A.opt
    round 2:  C.opt  A.base B.opt  A.opt  C.base B.base      (a slow spell hits both halves of a ratio)

(It lives in tito, not in the lesson's library: Module 19 stays under its 8,000-line reading target.)
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from tinytorch.benchmarking.benchmark import OlympicEvent
from tinytorch.benchmarking.olympics import DEFAULT_TOLERANCE, EVENT_RULES, get_event, median_interval, speedup_check
from tinytorch.benchmarking.results import (ProportionResult, bootstrap_interval, compare_results, compare_samples,
                                            is_significant)

JUDGE_SIMILARITY = 0.9999  # cosine of two models' flattened weights at or above which they are "near-identical"




def _median_interval(values: Sequence[float], seed: int) -> tuple[float, float, float]:
    "The median and its bootstrap interval (the library's `median_interval`)."
    return (float(np.median(values)), *median_interval(values, seed))


def judged_figures(record: Mapping[str, Any], event: OlympicEvent | str, seed: int = 0) -> dict[str, Any]:
    """A student's figures from the judge's own measurements. `record` holds, per role ("baseline",
    "optimized"): `round_mean_ms` (one per round, paired by index: the round's request time / its calls), `correct` (0/1 per test sample, same
    order) and `size_bytes` (int). The score has an interval: the bootstrap interval of the median of
    the per-round scores (speed-up events; all-around: the test images resampled too, in pairs, for the
    retention's own uncertainty), Wilson (accuracy), or none (exact sizes).

    >>> r = {"round_mean_ms": {"baseline": [2.0, 2.2, 4.0], "optimized": [1.0, 1.1, 2.0]},
    ...      "correct": {"baseline": [1, 1, 0, 1], "optimized": [1, 1, 0, 1]}, "size_bytes": {"baseline": 800, "optimized": 200}}
    >>> judged_figures(r, "latency_sprint")["score"]["value"]
    2.0
    """
    ev = get_event(event)
    lat, correct, size = record["round_mean_ms"], record["correct"], record["size_bytes"]
    base_t, opt_t = (np.asarray(lat[r], dtype=float) for r in ("baseline", "optimized"))
    if base_t.shape != opt_t.shape or base_t.size < 2 or not (np.all(base_t > 0) and np.all(opt_t > 0)):
        raise ValueError(f"record: expected two equal-length lists of at least 2 positive latencies, "
                         f"got {base_t.size} and {opt_t.size}")
    speedups = base_t / opt_t
    compression = size["baseline"] / size["optimized"]
    tensors = record.get("tensor_bytes") or {}  # the weights' bytes alone: what a claim's sizes are compared with
    tensor_ratio = tensors["baseline"] / tensors["optimized"] if tensors.get("baseline") and tensors.get("optimized") else None
    acc = {r: ProportionResult("accuracy", list(correct[r])) for r in ("baseline", "optimized")}
    a_base, a_opt = acc["baseline"].mean, acc["optimized"].mean
    retention = a_opt / a_base if a_base else None
    sp = _median_interval(speedups, seed)
    rule = EVENT_RULES[ev].score
    if rule == "compression_ratio":
        samples, kind, (v, lo, hi) = [compression], "exact", (compression,) * 3
    elif rule == "accuracy":
        samples, kind = list(correct["optimized"]), "proportion"
        v, lo, hi = a_opt, acc["optimized"].ci_lower, acc["optimized"].ci_upper
    else:
        per_round = {"speedup": speedups, "speedup_x_compression": speedups * compression,
                     "all_around": np.cbrt(speedups * compression * max(retention or 0.0, 0.0))}[rule]
        samples, kind, (v, lo, hi) = per_round.tolist(), "rounds", _median_interval(per_round, seed)
        if rule == "all_around" and a_base:  # one resample of rounds and of image indices (paired), as a submission's
            cb, co = (np.asarray(correct[r], dtype=float) for r in ("baseline", "optimized"))
            lo, hi = bootstrap_interval(lambda s, i: np.median(np.cbrt(s * compression * (
                co[i.astype(int)].mean(1) / cb[i.astype(int)].mean(1))[:, None]), axis=1), [speedups, np.arange(cb.size)], seed=seed)
    return {"speedup": {"value": sp[0], "ci_lower": sp[1], "ci_upper": sp[2],
                        "method": "median over rounds of baseline / optimised time in the same round; bootstrap interval"},
            "compression_ratio": {"value": compression, "tensor_ratio": tensor_ratio,
                                  "method": "baseline / optimised size (`size_bytes`: the judge's TorchScript archives; exact)"},
            "accuracy": {"value": a_opt, "ci_lower": acc["optimized"].ci_lower, "ci_upper": acc["optimized"].ci_upper,
                         "baseline": a_base, "correct": acc["optimized"].correct, "count": acc["optimized"].count},
            "accuracy_retention": {"value": retention},
            "latency_median_ms": {"baseline": float(np.median(base_t)), "optimized": float(np.median(opt_t)),
                                  "optimized_ci": list(median_interval(opt_t, seed))},
            "speedup_rounds": speedups.tolist(),
            "score": {"rule": rule, "description": EVENT_RULES[ev].description, "value": float(v), "ci_lower": lo,
                      "ci_upper": hi, "kind": kind, "samples": samples}}


def score_separable(a: Mapping[str, Any], b: Mapping[str, Any], *, alpha: float = 0.05, min_effect: float = 0.02,
                    seed: int = 0) -> bool:
    """Whether the one significance rule tells two judged scores (`judged_figures(...)["score"]`) apart:
    Mann-Whitney U over per-round scores, McNemar over the same test samples, the effect floor alone
    for exact values; always with the `min_effect` floor."""
    if a["kind"] != b["kind"]:
        raise ValueError(f"b: scores of different kinds ({a['kind']} and {b['kind']}) cannot be compared")
    if a["kind"] == "exact":
        return is_significant(None, b["value"] / a["value"] - 1, alpha, min_effect)
    if a["kind"] == "proportion":
        return compare_results(ProportionResult("accuracy", a["samples"]), ProportionResult("accuracy", b["samples"]),
                               alpha=alpha, min_effect=min_effect, seed=seed).significant
    return compare_samples(a["samples"], b["samples"], higher_is_better=True, better="higher", alpha=alpha,
                           min_effect=min_effect, seed=seed).significant


def rank_judged(scores: Mapping[str, Mapping[str, Any]], **rule: Any) -> dict[str, int]:
    """Ranks (1 = best): 1 + the number of students whose score is higher *and* separable by
    `score_separable` (its `alpha`, `min_effect`); students the rule cannot separate share ranks."""
    names = list(scores)
    return {i: 1 + sum(1 for j in names if j != i and scores[j]["value"] > scores[i]["value"]
                       and score_separable(scores[i], scores[j], **rule)) for i in names}


def _num(value: Any) -> float | None:
    "A claimed figure as a float: None unless it is a real, finite number."
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _at(doc: Any, *keys: str) -> Any:
    "doc[k1][k2]...: None where a level is missing or not an object (a submission is untrusted JSON)."
    for k in keys:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(k)
    return doc


def check_claims(doc: Mapping[str, Any], judged: Mapping[str, Any], hashes: Mapping[str, str], *,
                 alpha: float = 0.05, tolerance: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Each claim of a submission `doc` against the judge's figures: `{"claim", "claimed", "judged",
    "contradicted", "how"}`. A claim is contradicted when it is *more* than the judge measured (an
    honest student who under-claims is not flagged) by more than the tolerance: accuracy (same model,
    same split) and compression (exact) by the effect floor alone; the speed-up, which another machine
    legitimately changes, by the library's `speedup_check` (the interval of the per-round speed-ups
    against the claim, `latency_rel` as its effect floor). Weights: the hashes must match. A claim that
    is not a number is contradicted ("unreadable")."""
    tol = {**DEFAULT_TOLERANCE, **(tolerance or {})}
    out = []

    def claim(name: str, raw: Any, judged_value: float, over: Any, how: str, **extra: Any) -> None:
        value = _num(raw)
        if raw is None:
            return
        if value is None or value <= 0:
            out.append({"claim": name, "claimed": str(raw)[:60], "judged": judged_value, "contradicted": True,
                        "how": "unreadable: not a positive number"})
            return
        out.append({"claim": name, "claimed": value, "judged": judged_value, "contradicted": bool(over(value)),
                    "how": how, **extra})

    for role, sha in hashes.items():
        raw = _at(doc, "models", role, "sha256")
        if raw is not None:
            ok = isinstance(raw, str) and raw == sha
            out.append({"claim": f"{role} weights sha256", "claimed": str(raw)[:64], "judged": sha, "contradicted": not ok,
                        "how": "the file's weights must be the ones the submission was made from"})
    acc = judged["accuracy"]["value"]
    claim("optimized accuracy", _at(doc, "measurements", "optimized", "accuracy", "accuracy"), acc,
          lambda c: c > acc and is_significant(None, c - acc, alpha, tol["accuracy_abs"]),
          f"same model, same test split: at most {tol['accuracy_abs']} above the judged figure")
    # a claim's sizes are its files' (weights plus some overhead, which only lowers a compressed model's
    # ratio): it is compared with the ratio of the weights' bytes where the judge has it
    cr = judged["compression_ratio"].get("tensor_ratio") or judged["compression_ratio"]["value"]
    methods = [_at(doc, "measurements", role, "model_size", "method") for role in ("baseline", "optimized")]
    raw = _at(doc, "improvements", "compression_ratio", "value")
    if raw is not None and (methods[0] != methods[1] or not isinstance(methods[0], str)):
        out.append({"claim": "compression ratio", "claimed": _num(raw), "judged": cr, "contradicted": False,
                    "unchecked": True, "how": f"not checked: the claim divides sizes of two definitions "
                                              f"({str(methods[0])[:60]!r} / {str(methods[1])[:60]!r})"})
    else:
        claim("compression ratio", raw, cr, lambda c: c > cr and is_significant(None, c / cr - 1, alpha, tol["size_rel"]),
              f"at most {tol['size_rel']:.0%} above the judged ratio of the weights' bytes (a file's other bytes "
              "only lower a claim)")
    # the speed-up: the library's rule (`speedup_check`): the claim (its interval's lower end) against the
    # interval of the judged per-round ratios, contradicted beyond the tolerance
    sp, rounds = judged["speedup"]["value"], [r for r in judged.get("speedup_rounds") or [] if r > 0]
    raw = _at(doc, "improvements", "speedup", "value")
    lower = _num(_at(doc, "improvements", "speedup", "ci_lower"))
    if _num(raw) and _num(raw) > 0 and len(rounds) >= 2:
        check = speedup_check(_num(raw), rounds, claimed_lower=lower if lower and lower > 0 else None,
                              tolerance=tol["latency_rel"], alpha=alpha)
        claim("speedup", raw, check["measured"], lambda c: check["contradicted"], check["method"],
              interval=[check["ci_lower"], check["ci_upper"]])
    else:
        claim("speedup", raw, sp, lambda c: c > sp and is_significant(None, c / sp - 1, alpha, tol["latency_rel"]),
              f"more than {tol['latency_rel']:.0%} above the judged speed-up")
    return out


def flat_weights(state: Mapping[str, Any]) -> np.ndarray:
    "Every floating-point (quantized: dequantized) tensor of a state dict, flattened in sorted key order."
    parts = []
    for key in sorted(state):
        values = state[key] if isinstance(state[key], (tuple, list)) else [state[key]]
        for t in values:
            if isinstance(t, torch.Tensor) and (t.is_quantized or t.is_floating_point()):
                parts.append((t.dequantize() if t.is_quantized else t).detach().double().reshape(-1).numpy())
    return np.concatenate(parts) if parts else np.zeros(0)


def layer_signatures(state: Mapping[str, Any], smallest: int = 64) -> list[np.ndarray]:
    """One signature per weight tensor of at least `smallest` elements: its values sorted and scaled to unit
    norm. Whatever the tensor's name, shape, key order or the channels' order, and whatever else the model
    carries, the same weights give the same signature (and a layer scaled by a constant, as ReLU nets allow
    without changing what they compute, too)."""
    sigs = []
    for key in sorted(state):
        values = state[key] if isinstance(state[key], (tuple, list)) else [state[key]]
        for t in values:
            if isinstance(t, torch.Tensor) and (t.is_quantized or t.is_floating_point()) and t.numel() >= smallest:
                v = np.sort((t.dequantize() if t.is_quantized else t).detach().double().reshape(-1).numpy())
                norm = float(np.linalg.norm(v))
                if norm > 0:
                    sigs.append(v / norm)
    return sigs


LAYER_CLOSENESS = 1e-3  # distance of two layers' signatures at or below which they hold the same weights
LAYER_SHARE = 0.9       # the share of a model's weights (in layers of 64+ elements) that must match for "same weights"


def shared_weights(a: Sequence[np.ndarray], b: Sequence[np.ndarray], closeness: float = LAYER_CLOSENESS) -> float:
    """The share of the smaller model's weight elements (`layer_signatures`) whose layer has a match in the
    other model (a signature of the same size within `closeness`): 1.0 for a copy with extra tensors,
    renamed, reshaped, reordered or with permuted channels; an int8 or pruned version of a model: far below."""
    small, big = (a, b) if sum(x.size for x in a) <= sum(x.size for x in b) else (b, a)
    total = sum(x.size for x in small)
    if not total:
        return 0.0
    free = list(big)
    matched = 0
    for x in sorted(small, key=lambda v: -v.size):
        for j, y in enumerate(free):
            if y.size == x.size and float(np.linalg.norm(x - y)) <= closeness:
                matched += x.size
                del free[j]
                break
    return matched / total


def row_signatures(state: Mapping[str, Any], smallest: int = 64) -> list[np.ndarray]:
    """One per weight tensor of 2+ dimensions and at least `smallest` elements: a matrix of its output units
    (rows: `t.reshape(t.shape[0], -1)`), each row's values sorted. Sorting a row undoes any reordering of the
    layer's inputs (the previous layer's units permuted); `unit_distance` matches the rows themselves, which
    undoes a reordering of the layer's own units. Weights only (quantized: dequantized); names and order of
    the state dict do not matter."""
    sigs = []
    for key in sorted(state):
        values = state[key] if isinstance(state[key], (tuple, list)) else [state[key]]
        for t in values:
            if (isinstance(t, torch.Tensor) and (t.is_quantized or t.is_floating_point()) and t.dim() >= 2
                    and t.numel() >= smallest):
                t = (t.dequantize() if t.is_quantized else t).detach().double()
                sigs.append(np.sort(t.reshape(t.shape[0], -1).numpy(), axis=1))
    return sigs


def unit_distance(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """How far apart two models' weights are whatever the order of their hidden units (`row_signatures`): for each
    layer of the smaller model, the layer of the same shape in the other whose rows, paired one to one by an optimal
    assignment (`scipy.optimize.linear_sum_assignment`), differ least: ||A - B_paired|| / max(||A||, ||B||); a layer
    with no such partner counts 1. The mean over layers, weighted by their sizes: 0 for a copy with permuted units,
    about s for a copy whose every weight is scaled by 1 + s * noise, 1 when no layer has a partner."""
    from scipy.optimize import linear_sum_assignment

    small, big = (a, b) if sum(x.size for x in a) <= sum(x.size for x in b) else (b, a)
    total = sum(x.size for x in small)
    if not total:
        return 1.0
    acc = 0.0
    for x in small:
        best = 1.0
        for y in big:
            if y.shape == x.shape:
                cost = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T  # squared row distances
                r, c = linear_sum_assignment(cost)
                norm = max(float(np.linalg.norm(x)), float(np.linalg.norm(y)), 1e-300)
                best = min(best, math.sqrt(max(float(cost[r, c].sum()), 0.0)) / norm)
        acc += x.size * best
    return acc / total


UNIT_DISTANCE = 0.05  # unit-matched weight distance at or below which two students' weights are "the same up to noise"
UNIT_BASELINE_RATIO = 3.0  # ... and only when each is at least this many times farther from the course's baseline


def rank_agreement(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(share of rows with the same top class, share of discordant class pairs): for each row, each pair of
    classes that both models order strictly, the share ordered differently. A monotone transform of a model's
    outputs (softmax, log, scaling, shifting) changes neither; honest optimisations of one baseline order
    0.05-1.3% of pairs differently on the digits test split (int8 vs the fp32 baseline: 0.055%)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    top = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
    da = np.sign(a[:, :, None] - a[:, None, :])
    db = np.sign(b[:, :, None] - b[:, None, :])
    both = da * db
    strict = int(np.count_nonzero(both))
    return top, (int(np.count_nonzero(both < 0)) / strict if strict else 1.0)


RANK_DISCORDANCE = 1e-4  # share of discordant class pairs at or below which two models order their outputs alike


def timed_correct(pass_correct: Sequence[int], right: Sequence[int] | None, seen: Sequence[int] | None) -> list[int]:
    """Per test image, 1 when most of its timed calls answered right (a tie counts as wrong), its accuracy
    pass's answer where no timed call saw it: the judged accuracy is that of the work that was timed, so
    a model that computes something cheaper once its calls are counted past the accuracy pass is judged
    at what it computed when timed.

    >>> timed_correct([1, 1, 0, 1], right=[3, 1, 2, 0], seen=[3, 2, 2, 0])
    [1, 0, 1, 1]
    """
    if not right or not seen or len(right) != len(pass_correct) or len(seen) != len(pass_correct):
        return [int(c) for c in pass_correct]
    return [int(2 * r > n) if n else int(c) for c, r, n in zip(pass_correct, right, seen)]


def timed_consistency(tally: Sequence[int] | None) -> dict[str, Any] | None:
    """Whether a model's timed calls answered as its accuracy pass did on the same images: `tally` counts
    [both right, only the pass right, only the timed call right, neither] over every timed call. The two are
    compared paired (McNemar) with the library's one rule (`compare_results`): `differs` when significant."""
    if not tally or sum(tally) == 0:
        return None
    both, pass_only, timed_only, neither = (int(v) for v in tally)
    pass_ok = [1] * both + [1] * pass_only + [0] * timed_only + [0] * neither
    timed_ok = [1] * both + [0] * pass_only + [1] * timed_only + [0] * neither
    c = compare_results(ProportionResult("accuracy", pass_ok), ProportionResult("accuracy", timed_ok),
                        names=("accuracy pass", "timed calls"))
    n = len(pass_ok)
    return {"calls": n, "pass": sum(pass_ok) / n, "timed": sum(timed_ok) / n, "differs": bool(c.significant),
            "p_value": c.p_value, "method": "every timed call's answer against the accuracy pass's answer on the same "
            "image (each round's own noise); McNemar, the library's significance rule"}


def _standardized(out: np.ndarray) -> np.ndarray:
    "Each row of class scores centred and scaled to unit spread: rescaled or shifted copies look alike."
    o = np.asarray(out, dtype=float)
    o = o - o.mean(axis=1, keepdims=True)
    return o / np.maximum(o.std(axis=1, keepdims=True), 1e-12)


OUTPUT_CLOSENESS = 1e-3  # relative difference of two models' outputs at or below which they are "near-identical"


def similar_models(weights: Mapping[str, tuple], outputs: Mapping[str, np.ndarray] | None = None,
                   threshold: float = JUDGE_SIMILARITY, closeness: float = OUTPUT_CLOSENESS,
                   reference: Sequence[np.ndarray] | None = None) -> list[dict[str, Any]]:
    """Pairs of students whose models look the same: identical weights (hash), near-identical weights
    (cosine of the flattened weights >= `threshold`, same layout), the same weights layer by layer
    (`shared_weights` >= LAYER_SHARE: whatever else a copy carries, however its tensors are named, shaped
    or ordered), near-identical outputs on the test split (||a - b|| / ||a|| <= `closeness` after each row's
    scale and shift: a copy whose channels were permuted, or with noise added, computes the same function),
    or the same top class on every image with the class scores in the same order (`rank_agreement`: at most
    RANK_DISCORDANCE of the pairs differ: a softmax or any other monotone transform of a copy's outputs), or
    the same weights up to the order of their hidden units and a small noise (`unit_distance` <= UNIT_DISTANCE,
    and each of the two at least UNIT_BASELINE_RATIO times farther from `reference`, the course baseline's
    `row_signatures`: what they share is not the course's starting point, which every student begins from).
    `weights`: student -> (sha256, flat_weights(...)[, layer_signatures(...)[, row_signatures(...)]]);
    `outputs`: student -> the model's outputs on the test split. Honest, different optimisations of one baseline differ by a few
    percent (pruned vs int8 digits CNN: about 5% of their outputs, 0.9% of class pairs ordered differently)."""
    names, pairs = sorted(weights), []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (sha_a, wa, *la), (sha_b, wb, *lb) = weights[a], weights[b]
            why = []
            if sha_a == sha_b:
                why.append("identical weights (same sha256)")
            elif wa.shape == wb.shape and wa.size >= 1000:  # a cosine of a few numbers means nothing
                denom = float(np.linalg.norm(wa) * np.linalg.norm(wb))
                cos = float(wa @ wb) / denom if denom else 0.0
                if cos >= threshold:
                    why.append(f"near-identical weights (cosine {cos:.6f} >= {threshold})")
            if sha_a != sha_b and la and lb and sum(x.size for x in la[0]) >= 1000 <= sum(x.size for x in lb[0]):
                share = shared_weights(la[0], lb[0])
                if share >= LAYER_SHARE:
                    why.append(f"the same weights layer by layer ({share:.0%} of the smaller model's weights match, "
                               f">= {LAYER_SHARE:.0%})")
            if sha_a != sha_b and len(la) > 1 and len(lb) > 1 and la[1] and lb[1]:
                d = unit_distance(la[1], lb[1])
                far = min(unit_distance(la[1], reference), unit_distance(lb[1], reference)) if reference else 1.0
                if d <= UNIT_DISTANCE and far >= UNIT_BASELINE_RATIO * d:
                    why.append(f"the same weights up to the hidden units' order and noise (unit-matched distance "
                               f"{d:.3f} <= {UNIT_DISTANCE}; {far:.3f} from the course baseline)")
            if outputs is not None and a in outputs and b in outputs and outputs[a].shape == outputs[b].shape:
                oa, ob = (_standardized(outputs[k]) for k in (a, b))
                rel = float(np.linalg.norm(oa - ob) / max(np.linalg.norm(oa), np.linalg.norm(ob), 1e-12))
                if rel <= closeness:
                    why.append("identical outputs on the test split" if rel == 0 else
                               f"near-identical outputs on the test split (relative difference {rel:.1e})")
                top, discordant = rank_agreement(outputs[a], outputs[b])
                if top == 1.0 and discordant <= RANK_DISCORDANCE and rel > closeness:
                    why.append(f"the same class scores' order on the test split (same top class on every image; "
                               f"{discordant:.1e} of class pairs ordered differently, <= {RANK_DISCORDANCE:g})")
            if why:
                pairs.append({"students": [a, b], "why": why})
    return pairs


def judged_leaderboard(entries: Mapping[str, Mapping[str, Any]], event: OlympicEvent | str,
                       rejected: Mapping[str, str] | None = None, source: str = "", **rule: Any) -> dict[str, Any]:
    """The class's leaderboard from the judge's figures. `entries`: student -> {"figures":
    judged_figures(...), "techniques": [...], "flags": [...], "eligible": bool}; ineligible entries
    (an event rule broken) are listed unranked. Returns {"table": DataFrame, "markdown", "csv", "ranks"}."""
    ev = get_event(event)
    eligible = {s: e["figures"]["score"] for s, e in entries.items() if e.get("eligible", True)}
    ranks = rank_judged(eligible, **rule)
    rows = []
    for s, e in entries.items():
        f, sc = e["figures"], e["figures"]["score"]
        r = ranks.get(s)
        rows.append({"rank": r, "tied": r is not None and list(ranks.values()).count(r) > 1, "participant": s,
                     "score": sc["value"], "ci_lower": sc["ci_lower"], "ci_upper": sc["ci_upper"],
                     "accuracy": f["accuracy"]["value"], "latency_median_ms": f["latency_median_ms"]["optimized"],
                     "size_bytes": e.get("size_bytes"), "speedup": f["speedup"]["value"],
                     "compression_ratio": f["compression_ratio"]["value"],
                     "techniques": "; ".join(e.get("techniques", [])), "flags": "; ".join(e.get("flags", []))})
    cols = ["rank", "tied", "participant", "score", "ci_lower", "ci_upper", "accuracy", "latency_median_ms",
            "size_bytes", "speedup", "compression_ratio", "techniques", "flags"]
    table = pd.DataFrame(rows, columns=cols)
    if rows:
        table = (table.assign(_unranked=table["rank"].isna()).sort_values(["_unranked", "rank", "score"], ascending=[True, True, False])
                 .drop(columns="_unranked").reset_index(drop=True))
    fmt = lambda v, f: "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, f)  # noqa: E731
    md_text = lambda t: re.sub(r"[\x00-\x1f\x7f-\x9f]+", " ", str(t)).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
    md = [f"# TorchPerf Olympics: {ev.value}, judged", "",
          f"Score: {EVENT_RULES[ev].description}. Every model was measured by the judge on one machine in one run "
          "(sizes: the uncompressed bytes of the records the TorchScript loader reads for each model); students tie when the significance rule "
          "cannot separate their scores." + (f" Accuracy was measured on {source}." if source else ""), "",
          "| rank | participant | score | 95% interval | accuracy | latency median (ms) | size (bytes) | techniques | flags |",
          "|---|---|---|---|---|---|---|---|---|"]
    for _, row in table.iterrows():
        rank = "—" if pd.isna(row["rank"]) else f"{int(row['rank'])}{' (tied)' if row['tied'] else ''}"
        md.append(f"| {rank} | {md_text(row['participant'])} | {fmt(row['score'], '.4g')} | [{fmt(row['ci_lower'], '.4g')}, "
                  f"{fmt(row['ci_upper'], '.4g')}] | {row['accuracy']:.2%} | {fmt(row['latency_median_ms'], '.4g')} | "
                  f"{fmt(row['size_bytes'], ',')} | {md_text(row['techniques'])} | {md_text(row['flags'])} |")
    if not rows:
        md.append(f"| — | no model could be judged for {ev.value} | | | | | | | |")
    if rejected:
        md += ["", "## Rejected", ""] + [f"- {md_text(s)}: {md_text(why)}" for s, why in sorted(rejected.items())]
    clean = table.copy()
    for col in ("participant", "techniques", "flags"):
        clean[col] = clean[col].map(lambda t: re.sub(r"[\x00-\x1f\x7f-\x9f]+", " ", str(t)))
    return {"table": table, "markdown": "\n".join(md) + "\n", "csv": clean.to_csv(index=False),
            "ranks": {s: int(r) for s, r in ranks.items()}}


def leaderboard(submissions_dir: Any, event: OlympicEvent | str, output_path: Any = None) -> dict[str, Any]:
    """`tito olympics leaderboard`: rank the valid `*.json` submissions for `event` in `submissions_dir` (overlapping intervals tie):
    `{"table": DataFrame, "markdown", "csv", "invalid": [{"path", "reasons"}]}`; with `output_path`,
    writes `<output_path>.md` and `.csv`."""
    from pathlib import Path

    from tinytorch.benchmarking.olympics import rank_with_ties, validate_submission
    from tinytorch.benchmarking.results import write_atomic

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
        elif doc["event"] == ev.value:
            s, imp = doc["score"], doc["improvements"]
            entries.append({"participant": doc["participant"], "file": f.name, "score": s["value"],
                            "ci_lower": s["ci_lower"], "ci_upper": s["ci_upper"], "speedup": imp["speedup"]["value"],
                            "compression_ratio": imp["compression_ratio"]["value"],
                            "accuracy": doc["measurements"]["optimized"]["accuracy"]["accuracy"],
                            "techniques": ", ".join(doc.get("techniques", []))})
    cols = ["rank", "tied", "participant", "score", "ci_lower", "ci_upper", "speedup", "compression_ratio",
            "accuracy", "techniques", "file"]
    ranks = rank_with_ties([(e["ci_lower"], e["ci_upper"]) for e in entries])
    for e, r in zip(entries, ranks):
        e.update(rank=r, tied=ranks.count(r) > 1)
    table = (pd.DataFrame(entries)[cols].sort_values(["rank", "score"], ascending=[True, False]).reset_index(drop=True)
             if entries else pd.DataFrame(columns=cols))
    md = [f"# TorchPerf Olympics leaderboard: {ev.value}", "", f"Score: {EVENT_RULES[ev].description}.", "",
          "Ranked by self-reported claims, each measured on its author's machine; use `python3 -m tito olympics "
          "judge` to measure every model on one machine.", "",
          "| rank | participant | score | 95% interval | accuracy | techniques |", "|---|---|---|---|---|---|"]
    md += [f"| {row['rank']}{' (tied)' if row['tied'] else ''} | {row['participant']} | {row['score']:.4g} | "
           f"[{row['ci_lower']:.4g}, {row['ci_upper']:.4g}] | {row['accuracy']:.2%} | {row['techniques']} |"
           for _, row in table.iterrows()] or [f"| — | no valid submission for {ev.value} | | | | |"]
    if invalid:
        md += ["", "## Rejected submissions", ""] + [f"- {i['path']}: {'; '.join(i['reasons'])}" for i in invalid]
    out = {"table": table, "markdown": "\n".join(md) + "\n", "csv": table.to_csv(index=False), "invalid": invalid}
    if output_path is not None:
        for ext, key in ((".md", "markdown"), (".csv", "csv")):
            write_atomic(Path(output_path).with_suffix("").with_suffix(ext), out[key])
    return out
