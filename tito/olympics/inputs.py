"""The images `tito olympics judge` sends, all drawn from one secret seed per run (MLPerf's TEST05: no student can
know the order, the images or the noise a run will use, so none can be prepared for).

The evaluation set (the public test split, or the instructor's `--data`) is split, secretly, in two:
- the *audit pool* A (`audit_pool`): images no model sees before the no-caching audit puts them, in secret rounds,
  at secret places among a timed request's images (`audit_places`): each model meets each once, in a request of
  the usual size, beside images it has met (`audits.no_caching` compares the two kinds of calls); its answer
  counts in the judged accuracy like any timed call's;
- the *judged images* J, the rest: the accuracy pass, then every timed request. A request of k calls takes the next k
  images of an endless stream made of J's images in a fresh secret order each pass, each image with a noise of its
  own (NOISE of the images' spread, drawn per pass); so no image repeats within a request of up to |J| calls, and a
  run of R rounds shows each model each judged image about R * k / |J| times, each time with new noise.
The copy checks' probe (`probe`) runs every image of the set with a strong noise, a few times over.
Every request carries its own images, each a newly allocated tensor in the sandbox (`server`: "stage").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NOISE = 0.08  # of the images' spread: digits' pixels sit on a 1/16 grid; 0.08 x 0.37 = 0.03, half a grid step
PROBE_NOISE = 0.7  # the copy checks' probe: strong enough that models depart from the course baseline on 1-5% of images
PROBE_INPUTS = 1800  # about this many probe inputs (the set's images, several draws of noise each), at most 4x the set
PROBE_SECONDS, MIN_PROBE = 2.0, 200  # a slow model's probe: the first inputs its calls answer in about 2 s, at least 200
AUDIT_REQUESTS = 16  # timed requests per model holding new images in the no-caching audit (at most one a round): with
                     # 16, Mann-Whitney still decides at p < 0.05 / 300 students with a few requests overlapping
AUDIT_CALLS = 16  # new images per such request, at most (fewer when the set is small: a third of it is the pool)
TEST01_SAMPLES = 32  # timed calls per model whose full outputs are checked against a fresh instance (`audits.test01`)

# one stream of random numbers per purpose, all from the run's secret seed
ORDER, STREAM, ACCURACY, AUDIT, CALIBRATION, PROBE, SAMPLE, SLOTS = range(8)


def noisy(X: np.ndarray, seed: list[int], scale: float) -> np.ndarray:
    """`X` plus a normal noise of `scale` times the images' spread, drawn from `seed`."""
    rng = np.random.default_rng(seed)
    return (X + rng.normal(0, scale * float(X.std()), size=X.shape)).astype(np.float32)


@dataclass
class Plan:
    """Which images go where, for an evaluation set of `n` images and a run's `secret` seed.

        >>> p = Plan(450, secret=1234, rounds=12)
        >>> len(p.audit_pool), len(p.judged), p.audit_calls, len(p.audit_rounds)
        (150, 300, 12, 12)
    """
    n: int
    secret: int
    rounds: int
    audit_pool: np.ndarray = field(init=False)
    judged: np.ndarray = field(init=False)
    audit_calls: int = field(init=False)
    audit_rounds: list[int] = field(init=False)  # the rounds whose timed requests hold new images (secret, sorted)

    def __post_init__(self) -> None:
        order = np.random.default_rng([self.secret, AUDIT]).permutation(self.n)
        size = min(self.n // 3, AUDIT_REQUESTS * AUDIT_CALLS)
        self.audit_pool, self.judged = np.sort(order[:size]), np.sort(order[size:])
        slots = min(AUDIT_REQUESTS, self.rounds)
        self.audit_calls = max(1, size // slots)
        chosen = np.random.default_rng([self.secret, SLOTS]).choice(self.rounds, size=slots, replace=False)
        self.audit_rounds = sorted(int(r) for r in chosen)

    def rng(self, *purpose: int) -> np.random.Generator:
        "A generator for one purpose of this run (`ORDER`, round index), from the secret seed."
        return np.random.default_rng([self.secret, *purpose])

    def stream(self, X: np.ndarray, start: int, count: int, purpose: int = STREAM) -> tuple[np.ndarray, np.ndarray]:
        """Images `start` .. `start + count` of the judged images' endless stream for `purpose` (the rounds'
        `STREAM`, `CALIBRATION`): (indices into the set, the noisy images)."""
        J = self.judged
        idx, imgs = [], []
        t = start
        while t < start + count:
            p, i = divmod(t, len(J))
            take = min(len(J) - i, start + count - t)
            perm = np.random.default_rng([self.secret, purpose, p]).permutation(len(J))
            sel = perm[i:i + take]
            noise = noisy(X[J], [self.secret, purpose, p, 1], NOISE)
            idx.append(J[sel])
            imgs.append(noise[sel])
            t += take
        return np.concatenate(idx), np.concatenate(imgs)

    def accuracy_pass(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        "The accuracy pass: every judged image once, in index order, with a noise of its own (the same for everyone)."
        return self.judged, noisy(X[self.judged], [self.secret, ACCURACY], NOISE)

    def audit_new(self, X: np.ndarray, slot: int) -> tuple[np.ndarray, np.ndarray]:
        "The no-caching audit's `slot`-th share of the audit pool: images no model has been sent, with noise."
        order = np.random.default_rng([self.secret, AUDIT, 1]).permutation(len(self.audit_pool))
        sel = self.audit_pool[order[slot * self.audit_calls:(slot + 1) * self.audit_calls]]
        return sel, noisy(X[sel], [self.secret, AUDIT, 2, slot], NOISE)

    def audit_places(self, slot: int, k: int) -> np.ndarray:
        """Where, among a request's k calls, the `slot`-th audit round puts its new images (secret, sorted; at most
        half the calls, so the request's other calls, on images the model met, are its own comparison)."""
        m = min(self.audit_calls, k // 2)
        return np.sort(np.random.default_rng([self.secret, AUDIT, 3, slot]).choice(k, size=m, replace=False))

    def probe(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        "The copy checks' probe: every image of the set, a few draws of a strong noise."
        draws = max(1, min(4, math.ceil(PROBE_INPUTS / max(self.n, 1))))
        idx = np.tile(np.arange(self.n), draws)
        return idx, np.concatenate([noisy(X, [self.secret, PROBE, d], PROBE_NOISE) for d in range(draws)])

    def describe(self, k: dict[str, Any] | None = None) -> dict[str, Any]:
        "What the run's images were, for the report."
        return {"set_images": self.n, "judged_images": int(len(self.judged)), "audit_pool": int(len(self.audit_pool)),
                "audit_requests": len(self.audit_rounds), "audit_calls": self.audit_calls, "noise": NOISE,
                "probe_noise": PROBE_NOISE,
                "method": "one secret seed per run (secrets.randbits) draws the split, every request's images and "
                          "noise, the order of every round and which rounds hold the audits (MLPerf TEST05)"}
