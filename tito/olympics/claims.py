"""What a submission and its model claim, read against what `tito olympics judge` measured: the submission's
claims (`check_claims`: untrusted JSON read defensively, each claim decided by the library's one-sided
`claim_check` / `speedup_check`), and the timed calls' answers against the accuracy pass's (`timed_correct`,
`timed_consistency`: the library's `compare_results`)."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from tinytorch.benchmarking.olympics import DEFAULT_TOLERANCE, SIZE_METHOD, claim_check, speedup_check
from tinytorch.benchmarking.results import ALPHA, ProportionResult, compare_results


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
                 alpha: float = ALPHA, tolerance: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Each claim of a submission `doc` against the judge's figures: `{"claim", "claimed", "judged",
    "contradicted", "how"}`, each decided as `verify_submission` decides it, by the library's one-sided
    `claim_check`: contradicted when *more* than the judge measured (an honest student who under-claims is
    not flagged) by the tolerance: accuracy (same model, same split) and compression (exact, both of the one
    size definition, `SIZE_METHOD`; a claim of other sizes is not checked) against the judged figure; the speed-up, which another machine legitimately changes, by `speedup_check` (the
    claim against the interval of the per-round speed-ups). Weights: the hashes must match. A claim that
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
          lambda c: claim_check(c, acc, tolerance=tol["accuracy_abs"], relative=False, alpha=alpha),
          f"same model, same test split: at most {tol['accuracy_abs']} above the judged figure")
    # a claim's sizes and the judged ones are one definition (`model_file_bytes` of each model's file)
    cr = judged["compression_ratio"]["value"]
    methods = [_at(doc, "measurements", role, "model_size", "method") for role in ("baseline", "optimized")]
    raw = _at(doc, "improvements", "compression_ratio", "value")
    if raw is not None and (methods[0] != methods[1] or methods[0] != SIZE_METHOD):
        why = (f"divides sizes of two definitions ({str(methods[0])[:60]!r} / {str(methods[1])[:60]!r})" if methods[0] != methods[1]
               else f"divides sizes that are not the model files' bytes ({str(methods[0])[:60]!r}; submission format "
                    f"version {str(_at(doc, 'version'))[:10]}): re-run `tito olympics submit`")
        out.append({"claim": "compression ratio", "claimed": _num(raw), "judged": cr, "contradicted": False,
                    "unchecked": True, "how": f"not checked: the claim {why}"})
    else:
        claim("compression ratio", raw, cr, lambda c: claim_check(c, cr, tolerance=tol["size_rel"], alpha=alpha),
              f"at most {tol['size_rel']:.0%} above the judged ratio of the model files' bytes")
    # the speed-up: the library's rule (`speedup_check`): the claim (its interval's lower end, which may excuse
    # no more than the tolerance) against the interval of the judged per-round ratios, contradicted beyond it
    sp, rounds = judged["speedup"]["value"], [r for r in judged.get("speedup_rounds") or [] if r > 0]
    raw = _at(doc, "improvements", "speedup", "value")
    if _num(raw) and _num(raw) > 0 and len(rounds) >= 2:
        lower = _num(_at(doc, "improvements", "speedup", "ci_lower"))
        check = speedup_check(_num(raw), rounds, claimed_lower=lower if lower and lower > 0 else None,
                              tolerance=tol["latency_rel"], alpha=alpha)
        claim("speedup", raw, check["measured"], lambda c: check["contradicted"], check["method"],
              interval=[check["ci_lower"], check["ci_upper"]])
    else:
        claim("speedup", raw, sp, lambda c: claim_check(c, sp, tolerance=tol["latency_rel"], alpha=alpha),
              f"more than {tol['latency_rel']:.0%} above the judged speed-up")
    return out


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
