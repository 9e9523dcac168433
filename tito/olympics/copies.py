"""Copy detection for `tito olympics judge`: pairs of students whose models look the same, by everything the model
file holds and by what the model answers. Forensic thresholds, measured on the course's models (docs/performance.md,
"Olympics judge"), not significance rules: those are the library's (`tinytorch.benchmarking.olympics`).

The weights come as bounded signatures (`records.summarize`), taken in the student's sandbox from every tensor of
the records the model's size counts: parameters and buffers, but also tensors kept in list or dict attributes and
frozen constants. The judge never holds a student's tensors (a 179 MB buffer a model makes when it runs costs the
judge nothing). The answers: outputs on the accuracy pass (the same inputs for every student) and top classes on
a strongly noised probe, where models depart from the course baseline on a few percent of images.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

LAYER_CLOSENESS = 1e-3  # RMS difference of two tensors' normalised sorted values at or below which they are the same weights
LAYER_SHARE = 0.9       # the share of a model's weights (tensors of 64+ elements) that must match for "same weights"
UNIT_DISTANCE = 0.05    # unit-matched weight distance at or below which two students' weights are "the same up to noise"
UNIT_BASELINE_RATIO = 3.0  # ... and only when each is at least this many times farther from the course's baseline
RANK_DISCORDANCE = 1e-4  # share of discordant class pairs at or below which two models order their outputs alike
STRICT_PAIRS = 0.9       # ... judged only when both order at least this share of the class pairs (one-hot scores order 20%)
OUTPUT_CLOSENESS = 1e-3  # relative difference of two models' outputs at or below which they are "near-identical"
DEPARTURES = 20          # probe images where either of two models departs from the course baseline, at least, to judge
DEPARTURE_AGREEMENT = 0.9  # share of those on which the two answer alike at or above which they are "the same mistakes"


def state_summaries(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`records.summarize` of a state dict's tensors (tuples of packed int8 params opened): the course baseline's
    signatures, and a test's."""
    from tito.olympics.records import summarize

    flat = []
    for key in sorted(state):
        values = state[key] if isinstance(state[key], (tuple, list)) else [state[key]]
        for i, t in enumerate(values):
            if hasattr(t, "detach"):
                t = t.detach()
                t = (t.dequantize() if t.is_quantized else t).float().numpy() if (t.is_quantized or t.is_floating_point()) else None
            if t is not None:
                flat.append((f"{key}.{i}", t))
    return summarize(flat)


def _sig_distance(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(x, np.float64) - np.asarray(y, np.float64)) ** 2)))


def shared_weights(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], closeness: float = LAYER_CLOSENESS) -> float:
    """The share of the smaller model's weight elements whose tensor has a match in the other model (a tensor of
    as many elements whose normalised sorted values are within `closeness`): 1.0 for a copy kept under other
    names, in other shapes or orders, with permuted channels or in a list attribute; an int8 or pruned version of a
    model: far below."""
    small, big = (a, b) if sum(t["numel"] for t in a) <= sum(t["numel"] for t in b) else (b, a)
    total = sum(t["numel"] for t in small)
    if not total:
        return 0.0
    free = list(big)
    matched = 0
    for x in sorted(small, key=lambda t: -t["numel"]):
        for j, y in enumerate(free):
            if y["numel"] == x["numel"] and len(y["sig"]) == len(x["sig"]) and _sig_distance(x["sig"], y["sig"]) <= closeness:
                matched += x["numel"]
                del free[j]
                break
    return matched / total


def _unit_rows(t: Mapping[str, Any]) -> np.ndarray:
    """A matrix's `rows` (each unit's sorted values), each scaled to unit norm: a per-channel int8 layer's file holds
    its integers, each row its float row over one scale (red team 42, round 2: read raw, an int8 copy of a
    classmate's model was 0.996 from everything); a unit rescaled through a ReLU compares too."""
    x = np.asarray(t["rows"], np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)


def unit_distance(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> float:
    """How far apart two models' weights are whatever the order and scale of their hidden units: for each matrix of
    the smaller model (`rows`: each unit's values sorted, scaled to unit norm: `_unit_rows`), the matrix of the same
    shape in the other whose rows, paired one to one by an optimal assignment (`scipy.optimize.linear_sum_assignment`),
    differ least: ||A - B_paired|| / max(||A||, ||B||); a matrix with no such partner counts 1. The mean over
    matrices, weighted by their sizes: 0 for a copy with permuted units (or its int8 version: 0.006), about s for a
    copy whose every weight is scaled by 1 + s * noise, 1 when no matrix has a partner.

        >>> rows = np.array([[0.0, 1.0], [1.0, 3.0]])
        >>> unit_distance([{"numel": 4, "shape": [2, 2], "rows": rows}], [{"numel": 4, "shape": [2, 2], "rows": 7 * rows[::-1]}])
        0.0
    """
    from scipy.optimize import linear_sum_assignment

    a = [t for t in a if "rows" in t]
    b = [t for t in b if "rows" in t]
    small, big = (a, b) if sum(t["numel"] for t in a) <= sum(t["numel"] for t in b) else (b, a)
    total = sum(t["numel"] for t in small)
    if not total:
        return 1.0
    acc = 0.0
    for tx in small:
        x = _unit_rows(tx)
        best = 1.0
        for ty in big:
            if ty["shape"] != tx["shape"]:
                continue
            y = _unit_rows(ty)
            cost = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T  # squared row distances
            r, c = linear_sum_assignment(cost)
            norm = max(float(np.linalg.norm(x)), float(np.linalg.norm(y)), 1e-300)
            best = min(best, math.sqrt(max(float(cost[r, c].sum()), 0.0)) / norm)
        acc += tx["numel"] * best
    return acc / total


def rank_agreement(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(share of rows with the same top class, share of discordant class pairs): for each row, each pair of
    classes that both models order strictly, the share ordered differently. A monotone transform of a model's
    outputs (softmax, log, scaling, shifting) changes neither; honest optimisations of one baseline order
    0.05-1.3% of pairs differently on the digits test split (int8 vs the fp32 baseline: 0.055%). Scores that order
    under STRICT_PAIRS of the pairs (one-hot answers: a fifth) give a discordance of 1.0: no order to compare."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    top = float(np.mean(a.argmax(axis=1) == b.argmax(axis=1)))
    da = np.sign(a[:, :, None] - a[:, None, :])
    db = np.sign(b[:, :, None] - b[:, None, :])
    both = da * db
    strict = int(np.count_nonzero(both))
    # scores that order few pairs (one-hot, rounded) say nothing of an order: 1.0, never a match
    if strict < STRICT_PAIRS * both.size * (1 - 1 / max(a.shape[1], 1)):
        return top, 1.0
    return top, int(np.count_nonzero(both < 0)) / strict


def _standardized(out: np.ndarray) -> np.ndarray:
    "Each row of class scores centred and scaled to unit spread: rescaled or shifted copies look alike."
    o = np.asarray(out, dtype=float)
    o = o - o.mean(axis=1, keepdims=True)
    return o / np.maximum(o.std(axis=1, keepdims=True), 1e-12)


def departure_agreement(a: Sequence[int], b: Sequence[int], reference: Sequence[int]) -> tuple[float, int]:
    """(share, count): over the probe images where model `a` or `b` answers other than the course baseline
    (`reference`), the share where the two answer alike. Error patterns shared beyond what the common start
    explains: honest versions of the course model agree on 3-36% of their departures, a model and a copy computing
    the same function (its scores scrambled or not) on all of them (docs/performance.md)."""
    a, b, r = (np.asarray(v) for v in (a, b, reference))
    departs = (a != r) | (b != r)
    n = int(departs.sum())
    return (float(np.mean(a[departs] == b[departs])) if n else 0.0), n


def similar_models(models: Mapping[str, Mapping[str, Any]], outputs: Mapping[str, np.ndarray] | None = None,
                   probe: Mapping[str, Sequence[int]] | None = None, reference: Mapping[str, Any] | None = None,
                   closeness: float = OUTPUT_CLOSENESS) -> list[dict[str, Any]]:
    """Pairs of students whose optimized models look the same: `[{"students": [a, b], "why": [...]}]`.
    `models`: student -> {"sha256": weights hash, "tensors": `records.summarize` of everything the file holds};
    `outputs`: student -> outputs on the accuracy pass (the same inputs for all); `probe`: student -> top classes on
    the probe; `reference`: the course baseline's {"tensors", "probe"} and "recipes": [{"name", "sha256", "tensors"}]
    of what the course's recipes make of it (`report.course_recipes`). Two students whose weights are one recipe's
    result (same hash) are not a pair; the weight checks' guard is each student's distance from the nearest of the
    baseline and the recipes' results, and tensors both share with one of those are not "the same weights". Flagged for identical weights (hash); the same
    weights tensor by tensor (>= LAYER_SHARE of the smaller model's elements in tensors whose sorted values match);
    the same weights up to the hidden units' order and noise (`unit_distance` <= UNIT_DISTANCE, each of the two at
    least UNIT_BASELINE_RATIO times farther from the course baseline and its recipes' results: what they share is not the course's
    starting point); outputs within OUTPUT_CLOSENESS after each row's scale and shift; the same top class on every
    image with at most RANK_DISCORDANCE of class pairs ordered differently; the same answers on >= DEPARTURE_AGREEMENT
    of the >= DEPARTURES probe images where either departs from the course baseline (scores scrambled or not)."""
    ref = reference or {}
    names, pairs = sorted(models), []
    far_cache: dict[str, float] = {}
    # the course's weights and what its recipes make of them: shared with a classmate, they are not copied
    starts = ([ref["tensors"]] if ref.get("tensors") else []) + [r["tensors"] for r in ref.get("recipes", []) if r.get("tensors")]
    recipe_of = {r["sha256"]: r["name"] for r in ref.get("recipes", []) if r.get("sha256")}

    def far(s: str) -> float:
        "How far a student's weights are from the nearest course start (the baseline or a recipe's result)."
        if s not in far_cache:
            t = models[s].get("tensors") or []
            far_cache[s] = min([unit_distance(t, r) for r in starts], default=1.0)
        return far_cache[s]

    def course_shared(ta, tb) -> bool:
        "Whether the two share their weights with one course start (each at least LAYER_SHARE of its elements)."
        return any(shared_weights(ta, r) >= LAYER_SHARE and shared_weights(tb, r) >= LAYER_SHARE for r in starts)

    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ma, mb = models[a], models[b]
            ta, tb = ma.get("tensors") or [], mb.get("tensors") or []
            why = []
            same_sha = ma.get("sha256") is not None and ma.get("sha256") == mb.get("sha256")
            if same_sha and ma["sha256"] in recipe_of:
                continue  # both followed one course recipe on the course model: the same weights, the same answers
            if same_sha:
                why.append("identical weights (same sha256)")
            if not same_sha and ta and tb and sum(t["numel"] for t in ta) >= 1000 <= sum(t["numel"] for t in tb):
                share = shared_weights(ta, tb)
                if share >= LAYER_SHARE and not course_shared(ta, tb):
                    why.append(f"the same weights layer by layer ({share:.0%} of the smaller model's weights match, "
                               f">= {LAYER_SHARE:.0%})")
            if not same_sha and ta and tb:
                d = unit_distance(ta, tb)
                if d <= UNIT_DISTANCE and min(far(a), far(b)) >= UNIT_BASELINE_RATIO * d:
                    why.append(f"the same weights up to the hidden units' order and noise (unit-matched distance "
                               f"{d:.3f} <= {UNIT_DISTANCE}; {min(far(a), far(b)):.3f} from the course baseline)")
            if outputs is not None and a in outputs and b in outputs and np.shape(outputs[a]) == np.shape(outputs[b]):
                oa, ob = (_standardized(outputs[k]) for k in (a, b))
                rel = float(np.linalg.norm(oa - ob) / max(np.linalg.norm(oa), np.linalg.norm(ob), 1e-12))
                if rel <= closeness:
                    why.append("identical outputs on the test split" if rel == 0 else
                               f"near-identical outputs on the test split (relative difference {rel:.1e})")
                top, discordant = rank_agreement(outputs[a], outputs[b])
                if top == 1.0 and discordant <= RANK_DISCORDANCE and rel > closeness:
                    why.append(f"the same class scores' order on the test split (same top class on every image; "
                               f"{discordant:.1e} of class pairs ordered differently, <= {RANK_DISCORDANCE:g})")
            if probe is not None and ref.get("probe") is not None and a in probe and b in probe:
                common = min(len(probe[a]), len(probe[b]), len(ref["probe"]))  # a slow model's probe is shorter
                share, n = departure_agreement(probe[a][:common], probe[b][:common], ref["probe"][:common])
                if n >= DEPARTURES and share >= DEPARTURE_AGREEMENT:
                    why.append(f"the same mistakes: the same answers on {share:.0%} of the {n} probe images where "
                               f"either departs from the course baseline (>= {DEPARTURE_AGREEMENT:.0%})")
            if why:
                pairs.append({"students": [a, b], "why": why})
    return pairs
