"""Timing: every (student, model) pair once per round in a fresh secret order, each request timed by the judge from
outside the sandbox (`timed`), its calls per request calibrated first (`calibrate`), the no-caching audit's new
images at secret places among a request's (`run_rounds`), then each student's TEST01 and copy-check probe
(`after_rounds`).
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

from tito.isolation.pool import progress_bar
from tito.olympics import audits, inputs
from tito.olympics.groups import load_copy_material, save_copy_material, save_state
from tito.olympics.measure import ROLES, predict, timed_answers
from tito.olympics.sandboxes import (TIMEOUTS, Student, StudentError, call, cost, idle_cpu_check, send_file,
                                     stage_images, stop, tree_cpu_s)


EMPTY_REQUESTS = 15    # timed to learn what one request adds (`ipc_overhead_s`)
CALIBRATION_STEPS, CALIBRATION_TRIES = 20, 3  # `calibrate`: doublings at most, the fastest of this many at each
SLOWEST_REQUEST = 5.0  # a timed request takes at most this many times the target, whichever model is slower


def timed(st: Student, role: str, images, timeout: float) -> float:
    """Seconds for one request of `len(images)` single-image calls, each on its own newly allocated tensor (sent
    before the request, not timed), timed here around the request with the library's `precise_timer`
    (perf_counter_ns). One request, one reading: the timing core's block calibration would run a request again,
    on the same inputs, and a request is never repeated."""
    from tinytorch.benchmarking.results import precise_timer

    stage_images(st, role, images)
    with precise_timer() as t:
        call(st, role, {"op": "time", "role": role}, timeout, f"timing the {role} model")
    return t.elapsed_ns / 1e9


def calibrate(st: Student, role: str, target_s: float, timeout: float, most: int, draw, answers=None) -> tuple[int, float]:
    """Calls per request so that one request takes about `target_s` (its first requests warm the model up), at most
    `most`; each step's time is the fastest of CALIBRATION_TRIES (a busy machine's stalls only add). `draw(k)`: the next k
    calibration images; `answers(index)`: the judge reads (and checks) what the timed calls answered. Returns
    (k, seconds per call at k)."""
    answers = answers or (lambda index: None)
    index, imgs = draw(1)
    elapsed = timed(st, role, imgs, timeout)
    answers(index)
    k = 1
    for _ in range(CALIBRATION_STEPS):
        best = math.inf
        for _ in range(CALIBRATION_TRIES):
            index, imgs = draw(k)
            best = min(best, timed(st, role, imgs, timeout))
            answers(index)
        elapsed = best
        if elapsed >= target_s or k >= most:
            break
        k = min(most, max(k * 2, math.ceil(k * 1.2 * target_s / max(elapsed, 1e-6))))
    return k, elapsed / k


def ipc_overhead_s(st: Student) -> float:
    """The median time of an empty request (EMPTY_REQUESTS of them): what each timed request adds."""
    import statistics

    import numpy as np

    return statistics.median(timed(st, "optimized", np.zeros((0, 1, 8, 8), np.float32), TIMEOUTS["empty"])
                             for _ in range(EMPTY_REQUESTS))


def _calibrate_all(alive: list[Student], target_s: float, timeout: float, state: dict, reject, data: dict,
                   plan: inputs.Plan, tallies: dict) -> bool:
    """Calls per request for every student (`calibrate`: the same count for both models, so the per-request overhead
    adds the same per call to both sides of a ratio; at most what makes the slower model's request SLOWEST_REQUEST
    times the target) and the empty request's time; True when a sandbox was rejected for working outside its own
    requests meanwhile (the others' counts may be skewed)."""
    import time

    t0 = time.perf_counter()
    X = data["X"]
    for st in list(alive):
        if st.proc is None:
            continue
        try:
            def draw(k: int, st: Student = st):
                return _calibration_draw(st, k, plan, X, state)

            tally = tallies.setdefault(st.name, {})
            got = {role: calibrate(st, role, target_s, timeout, len(plan.judged), draw,
                                   lambda index, role=role: timed_answers(st, role, data, index,
                                                                          state["static"][st.name]["correct"][role], tally))
                   for role in ROLES}
            k = max(g[0] for g in got.values())
            slowest = max(g[1] for g in got.values())
            st.k = max(1, min(k, int(SLOWEST_REQUEST * target_s / max(slowest, 1e-9))))
            state.setdefault("calls", {})[st.name] = st.k
            state.setdefault("call_s", {})[st.name] = slowest
            state["overhead_s"][st.name] = ipc_overhead_s(st)
        except StudentError as e:
            reject(st, str(e))
    wall, noisy = time.perf_counter() - t0, False
    for st in alive:
        if st.proc is not None and (why := idle_cpu_check(st, wall)):
            reject(st, why)
            noisy = True
    return noisy


def _calibration_draw(st: Student, k: int, plan: inputs.Plan, X, state: dict):
    "The next k calibration images of the student (their own stream position, kept in the state)."
    positions = state.setdefault("calibration_pos", {})
    start_at = positions.get(st.name, 0)
    positions[st.name] = start_at + k
    return plan.stream(X, start_at, k, inputs.CALIBRATION)


def run_rounds(alive: list[Student], rounds: int, target_s: float, state: dict, rejected: dict, state_path: Path,
            data: dict, plan: inputs.Plan, done: int = 0, label: str = "") -> None:
    """Interleaved rounds: each (student, model) pair once per round, in a fresh secret order, both models of a
    student on the same k images of the round (`inputs.Plan.stream`: without replacement from the judged images,
    a noise of their own); in the rounds the plan names, the no-caching audit puts new images (the audit pool's) at
    secret places among a request's images, and compares the calls on them with the request's other calls. Every timed call's answer is read back and paired with the accuracy
    pass's (`timed_answers`); a secret sample keeps full outputs for TEST01. A sandbox that uses CPU outside its
    own requests is rejected and the round it may have slowed is measured again, on images of its own (a round
    is never repeated with the same inputs). `done`: the rounds this group has already finished."""
    import time

    import numpy as np

    X, timeout = data["X"], data["timeouts"]["time"]
    tallies = state.setdefault("timed", {})
    audit = state.setdefault("audit", {})
    samples = state.setdefault("test01", {})

    def reject(st: Student, why: str) -> None:
        rejected[st.name] = state["rejected"][st.name] = why
        stop(st)

    for st in alive:
        st.cpu_mark, st.cpu_busy = (tree_cpu_s(st.proc.pid) if st.proc is not None else 0.0), 0.0
        st.k = state.get("calls", {}).get(st.name, 0)
    if any(not st.k for st in alive):
        for _ in range(3):  # calibrated again when a busy neighbour was found: it may have skewed everyone's k
            if not _calibrate_all(alive, target_s, timeout, state, reject, data, plan, tallies):
                break
        alive[:] = [st for st in alive if st.name not in rejected]
        save_state(state_path, state)
    first = len(state["rounds"]) - done  # this group's rounds are state["rounds"][first:]
    mine = os.sched_getaffinity(0)
    if len(mine) > 1:  # the judge off the core its sandboxes are timed on (restored when the rounds end)
        os.sched_setaffinity(0, mine - {max(mine)})
    bar = progress_bar(sys.stderr.isatty(), "timing rounds" + label)
    if bar is not None:
        bar.start()
        task = bar.add_task("timing rounds", total=rounds, completed=done, failed=len(rejected))
    try:
        while len(state["rounds"]) - first < rounds and alive:
            t0 = time.perf_counter()
            number, attempt = len(state["rounds"]) - first, state["attempts"]
            state["attempts"] = attempt + 1  # a round measured again gets new images: its inputs never repeat
            slots = [s for s, r in enumerate(plan.audit_rounds) if r == number]  # at most one (Plan)
            requests = [(st, role) for st in alive for role in ROLES]
            this: dict[str, dict[str, float]] = {}
            tally: dict[str, dict] = {}  # this round's answers
            audited: dict[str, dict] = {}  # this round's audit figures: kept only with the round
            images: dict[str, tuple] = {}
            sampled = plan.rng(inputs.SAMPLE, attempt)
            for i in plan.rng(inputs.ORDER, attempt).permutation(len(requests)):
                st, role = requests[i]
                if st.name in rejected:
                    continue
                try:
                    if st.name not in images:  # both models of a student: the same images, drawn once a round
                        idx, imgs = plan.stream(X, attempt * st.k, st.k)
                        places = np.zeros(0, int)
                        used = audit.setdefault(st.name, {}).setdefault("slots", [])
                        for slot in (s_ for s_ in slots if s_ not in used):  # the audit: new images at secret places
                            places = plan.audit_places(slot, st.k)
                            new_idx, new_imgs = plan.audit_new(X, slot)
                            idx, imgs = idx.copy(), imgs.copy()
                            idx[places], imgs[places] = new_idx[:len(places)], new_imgs[:len(places)]
                        # about twice TEST01_SAMPLES of its calls over the rounds, whatever its k
                        p_sample = 2 * inputs.TEST01_SAMPLES / max(rounds * st.k, 1)
                        picks = [c for c in range(st.k) if sampled.random() < p_sample and c not in set(places.tolist())]
                        images[st.name] = (idx, imgs, picks, places)
                    idx, imgs, picks, places = images[st.name]
                    seconds = timed(st, role, imgs, timeout)
                    known = np.ones(len(idx), bool)
                    known[places] = False  # an image of the audit pool has no accuracy-pass answer to pair with
                    y_hat, call_ns = timed_answers(st, role, data, idx, state["static"][st.name]["correct"][role],
                                                   tally.setdefault(st.name, {}), known)
                    rows = samples.setdefault(st.name, {}).setdefault(role, [])
                    for c in picks if len(rows) < 4 * inputs.TEST01_SAMPLES else ():  # (image, attempt, call, output)
                        rows.append([int(idx[c]), attempt, c, y_hat[c].astype(float).tolist()])
                except StudentError as e:
                    reject(st, str(e))
                    continue
                this.setdefault(st.name, {})[role] = 1000 * seconds / len(imgs)
                if len(places):  # the audit compares the request's calls on new images with its other calls, each
                    # side by the median call's time in microseconds (one request is one sample of each: its calls
                    # share its moment of the machine's load)
                    mine_ = audited.setdefault(st.name, {}).setdefault(role, {})
                    mine_.setdefault("new", []).append(round(float(np.median(call_ns[places])) / 1000, 3))
                    mine_.setdefault("repeat", []).append(round(float(np.median(np.delete(call_ns, places))) / 1000, 3))
            wall = time.perf_counter() - t0
            noisy = [(st, why) for st in alive if st.name not in rejected and (why := idle_cpu_check(st, wall))]
            for st, why in noisy:
                reject(st, why)
            alive[:] = [st for st in alive if st.name not in rejected]
            for st in alive:  # the audit's images were sent: its slots are used, kept or not
                audit[st.name]["slots"] = sorted(set(audit[st.name]["slots"]) | set(slots))
            for name, roles in tally.items():  # answers are answers, whatever the round's timing: kept
                for role, counts in roles.items():
                    t = tallies.setdefault(name, {}).setdefault(role, [0] * len(counts))
                    t[:] = [a + b for a, b in zip(t, counts)]
            if noisy:  # it may have slowed everyone's timed calls in this round: the round is measured again
                save_state(state_path, state)
                continue
            state["rounds"].append({s: v for s, v in this.items() if s not in rejected})
            for name, roles in audited.items():
                for role, kinds in roles.items():
                    for kind, values in kinds.items():
                        audit[name].setdefault(role, {}).setdefault(kind, []).extend(values)
            save_state(state_path, state)
            if bar is not None:
                bar.update(task, completed=len(state["rounds"]) - first, failed=len(rejected))
    finally:
        os.sched_setaffinity(0, mine)
        if bar is not None:
            bar.stop()


def after_rounds(alive: list[Student], state: dict, rejected: dict, data: dict, plan: inputs.Plan,
                  copies_dir: Path) -> None:
    """Each student's TEST01 (the sampled timed outputs against a fresh instance of each model, loaded again from the
    same bytes, on the same inputs), the copy checks' probe (top classes of the fresh instance on the strongly
    noised set), and what the student cost."""
    import numpy as np

    X = data["X"]
    done = state.setdefault("audited", {})
    for st in alive:
        if st.name in rejected or st.name in done:
            continue
        try:
            result: dict[str, Any] = {}
            for role in ROLES:
                fresh = f"fresh:{role}"
                send_file(st, fresh, st.sent[role], data["timeouts"]["load"])
                call(st, fresh, {"op": "load", "models": {fresh: st.sent[role].name}, "sample": list(X.shape[1:]),
                                 "classes": data["classes"]}, data["timeouts"]["load"], f"loading the {role} model again")
                rows = state.get("test01", {}).get(st.name, {}).get(role, [])
                picked, seen = [], set()
                for index, attempt, c, row in rows:  # one call per image (a fresh instance meets each image once)
                    if index not in seen:
                        seen.add(index)
                        picked.append((attempt, c, row))
                picked = picked[:inputs.TEST01_SAMPLES]
                result[role] = None
                if picked:
                    k = state["calls"][st.name]  # the exact inputs, drawn again from the secret seed
                    images = np.concatenate([plan.stream(X, attempt * k + c, 1)[1] for attempt, c, _ in picked])
                    fresh_out = predict(st, fresh, images, data, f"running the {role} model again (TEST01)", "sampled call",
                                        chunk=k)
                    result[role] = audits.test01(np.asarray([r for _, _, r in picked]), fresh_out)
                if role == "optimized":  # as many probe images as PROBE_SECONDS of its calls allow (at least MIN_PROBE)
                    _, probe = plan.probe(X)
                    per_call = state.get("call_s", {}).get(st.name) or 0.0
                    n = int(min(len(probe), max(inputs.MIN_PROBE, inputs.PROBE_SECONDS / max(per_call, 1e-9))))
                    answers = predict(st, fresh, probe[:n], data, "running the probe",
                                      chunk=state["calls"][st.name]).argmax(axis=1)
                    path = copies_dir / f"{st.name}.json"
                    material = load_copy_material(path) or {}
                    save_copy_material(path, {**material, "probe": answers.astype(int).tolist()})
            done[st.name] = {"test01": result, "cost": cost(st)}
        except StudentError as e:
            rejected[st.name] = state["rejected"][st.name] = str(e)
            stop(st)
