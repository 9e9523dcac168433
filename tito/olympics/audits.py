"""The judge's audits, after MLPerf Inference's compliance tests (mlcommons/inference, compliance/): each is run on
every student, automatically, and its figures are on the leaderboard.

- `no_caching` (TEST04, turned round). TEST04 issues one sample again and again and requires the run not to be
  faster than the normal run. Here, in secret rounds, a timed request of the usual size holds, at secret places,
  images no model has been sent in this run (the audit pool) among images the model has met (with new noise, as
  every timed request's are); the calls on new images must not be slower than the request's other calls, by the
  library's rule (`faster_on_repeats`: Mann-Whitney over the requests, p below ALPHA shared out over the class's
  students (Bonferroni: the chance that any honest student is flagged stays under ALPHA), and at least
  MIN_EFFECT). A request gives one sample of each kind, the median of its calls of that kind, each call timed by the
  judge's server in the model's process (which runs no student Python; from outside, a few calls are mostly the
  channel's time on a busy machine). TorchScript CAN reach a clock (`torch.ops.prim.TimePoint`, with which a model
  finds where a request ends and defers its calls' work to the last one): the server refuses a model whose code
  calls it (`server.REFUSED_OPS`, with file I/O and forked threads), and copies each call's answer as soon as its
  clock stops, so a placeholder filled in by a later call is judged as what it was when returned. The new images sit in requests
  like every other, so a model cannot tell the audit by a request's size. A model slower on new inputs answers
  repeated ones from what it kept of earlier ones: flagged "faster on repeated inputs" and judged on the new-input
  figure (every timed call, as the judge timed it, scaled by the new / met ratio).
- `test01` (TEST01). TEST01 logs a random sample of the outputs in performance mode and requires them to match an
  accuracy-mode run. Here a secret sample of each model's timed calls keeps its full output (every class score, not
  only the top one); after the rounds a fresh instance of the model, loaded again from the same counted bytes,
  answers the same inputs; each output must match (relative difference at most TEST01_TOLERANCE). A mismatch means
  the timed calls answered something other than what the model computes on that input (a cache answering a
  near-repeat with a stored answer, a state that drifts): flagged, and not ranked. A model must be deterministic.
- Secret seeds (TEST05): every draw of a run comes from one seed drawn with `secrets` per run (`inputs.Plan`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tinytorch.benchmarking.olympics import faster_on_repeats
from tinytorch.benchmarking.results import MIN_EFFECT

TEST01_TOLERANCE = 1e-3  # relative difference of a timed output and the fresh instance's (honest models here: 0)
MIN_REQUESTS = 5  # requests of each kind the no-caching audit needs to decide anything


def no_caching(new_us: Sequence[float], repeat_us: Sequence[float], students: int = 1) -> dict[str, Any] | None:
    """The no-caching audit of one model: per request, the median time of its calls (microseconds, each call timed
    by the judge's server around it), on new inputs and on repeated ones; decided by the library's rule at ALPHA /
    `students` (None: fewer than MIN_REQUESTS requests of either kind). A request is one sample: its calls share
    its moment of the machine's load (all of them, as samples, made an honest model "significantly" slower).

        >>> no_caching([40.0, 42, 39, 41, 40, 43, 38, 40, 41, 42], [10.0, 11, 9, 10, 12, 10, 11, 9, 10, 10])["faster_on_repeats"]
        True
    """
    new, rep = [float(v) for v in new_us if v > 0], [float(v) for v in repeat_us if v > 0]
    if len(new) < MIN_REQUESTS or len(rep) < MIN_REQUESTS:
        return None
    rule = faster_on_repeats(new, rep, comparisons=max(int(students), 1))  # the library's rule
    return {"new_ms": float(np.median(new)) / 1000, "repeat_ms": float(np.median(rep)) / 1000, "ratio": rule["ratio"],
            "p_value": rule["p_value"], "alpha": rule["alpha"], "requests": [len(new), len(rep)],
            "faster_on_repeats": rule["faster_on_repeats"],
            "method": "per request, the median time of its calls (each timed by the judge's server in the model's "
                      "process), on inputs never sent before against inputs met before (new noise), requests of one "
                      "size side by side in the same rounds; Mann-Whitney, p < ALPHA / students (Bonferroni) and at "
                      f"least {MIN_EFFECT:.0%} slower (MLPerf TEST04, turned round)"}


def output_distance(timed: np.ndarray, fresh: np.ndarray) -> np.ndarray:
    "Per row: ||timed - fresh|| / ||fresh|| (rows of class scores; a zero row compared absolutely)."
    t, f = np.asarray(timed, dtype=np.float64), np.asarray(fresh, dtype=np.float64)
    return np.linalg.norm(t - f, axis=1) / np.maximum(np.linalg.norm(f, axis=1), 1e-12)


def test01(timed: np.ndarray, fresh: np.ndarray) -> dict[str, Any] | None:
    """TEST01 of one model: its sampled timed outputs against a fresh instance's on the same inputs.

        >>> test01(np.eye(3), np.eye(3))["passed"], test01(np.eye(3), np.eye(3) * 1.5)["mismatched"]
        (True, 3)
    """
    if len(timed) == 0 or np.shape(timed) != np.shape(fresh):
        return None
    d = output_distance(timed, fresh)
    bad = int(np.sum(~(d <= TEST01_TOLERANCE)))
    return {"sampled": int(len(d)), "mismatched": bad, "max_distance": float(np.max(d)), "passed": bad == 0,
            "tolerance": TEST01_TOLERANCE,
            "method": "a secret sample of timed calls, every class score, against a fresh instance of the model "
                      "(loaded again from the same bytes) on the same inputs (MLPerf TEST01)"}
