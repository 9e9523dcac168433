"""Copy detection for `tito olympics judge`: pairs of students whose models look the same (the same weights,
however renamed, reshaped, reordered, permuted or noised; the same outputs, however rescaled). Forensic
thresholds, measured on the course's models (README "Olympics"), not significance rules: those are the
library's (`tinytorch.benchmarking.olympics`)."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import torch

JUDGE_SIMILARITY = 0.9999  # cosine of two models' flattened weights at or above which they are "near-identical"


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
