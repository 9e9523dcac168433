"""The judge's outputs: same-model pairs over the whole class (`copy_pairs`), each student's figures, claims,
audits and flags (`student_report`), the leaderboard, per-student JSON and the class plot (`write_report`).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from tito.olympics import audits, inputs
from tito.olympics.groups import load_copy_material
from tito.olympics.measure import ROLES
from tito.olympics.records import file_tensors, summarize
from tito.olympics.sandboxes import Student


def copy_pairs(judged: list[Student], copies_dir: Path, data: dict, plan: inputs.Plan) -> list[dict]:
    """Same-model pairs over the whole class (every group), from each student's copy-check material; the course
    baseline's signatures and probe answers (computed here, from the course's own file) and what the course's
    recipes make of it (`course_recipes`) are the reference."""
    from tito.olympics.copies import similar_models

    models, outputs, probe = {}, {}, {}
    for st in judged:
        m = load_copy_material(copies_dir / f"{st.name}.json")
        if m is None:
            continue
        models[st.name] = {"sha256": m.get("sha256"), "tensors": m.get("tensors", [])}
        if m.get("outputs") is not None:
            outputs[st.name] = m["outputs"]
        if m.get("probe") is not None:
            probe[st.name] = m["probe"]
    _, images = plan.probe(data["X"])
    reference = {"tensors": data["course_tensors"], "probe": _course_answers(images), "recipes": course_recipes()}
    return similar_models(models, outputs, probe, reference)


@functools.lru_cache(maxsize=1)  # the same for every run of one process: made once
def course_recipes() -> list[dict[str, Any]]:
    """What the course's recipes make of the course baseline, as the copy checks see a student's model: each
    recipe's name, the hash of its weights as a measuring sandbox takes it (`state_dict_sha256(model_state(...))`
    of its TorchScript) and the signatures of its file's tensors (`records.summarize`). The recipes are
    deterministic (per-channel int8 weights do not depend on the calibration images; magnitude pruning has no
    randomness): two students who each follow one have the same weights without copying (red team 42, round 2).

        >>> [r["name"] for r in course_recipes()][:2]   # doctest: +SKIP
        ['int8 static', 'int8 dynamic']
    """
    import io

    import torch

    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.benchmarking.olympics import state_dict_sha256
    from tinytorch.benchmarking.optimize import prune_magnitude, quantize_int8
    from tinytorch.benchmarking.results import model_state

    base = default_digits_model().eval()
    calibration = load_digits_split("train")[0][:256].split(64)  # any images: the weights do not depend on them
    recipes = {"int8 static": lambda: quantize_int8(base, "static", calibration_data=calibration),
               "int8 dynamic": lambda: quantize_int8(base),
               "pruned 50%": lambda: prune_magnitude(base, 0.5),
               "pruned 50% + int8 static": lambda: quantize_int8(prune_magnitude(base, 0.5), "static",
                                                                 calibration_data=calibration)}
    out = []
    for name, make in recipes.items():
        buf = io.BytesIO()
        with torch.no_grad():
            torch.jit.save(torch.jit.trace(make().eval(), torch.zeros(1, 1, 8, 8), check_trace=False), buf)
        data = buf.getvalue()
        loaded = torch.jit.load(io.BytesIO(data), map_location="cpu")
        out.append({"name": name, "sha256": state_dict_sha256(model_state(loaded)),
                    "tensors": summarize(file_tensors(data))})
    return out


def _course_answers(images) -> list[int]:
    "The course baseline's top classes on `images` (the judge's own model: it runs here)."
    import torch

    from tinytorch.benchmarking.digits import default_digits_model

    with torch.inference_mode():
        return default_digits_model().eval()(torch.from_numpy(images)).argmax(1).tolist()


def write_report(o, ev, judged: list[Student], state: dict, rejected: dict, out: Path,
            tolerance: dict[str, float] | None = None, source: str = "", plan: inputs.Plan | None = None) -> dict[str, Any]:
    """Figures, claims, audits, flags and the leaderboard from the measurements; everything written atomically."""
    from tinytorch.benchmarking.results import write_atomic, write_json
    from tito.olympics.leaderboard import judged_leaderboard

    entries, records = {}, {}
    same = _same_model_flags(state["pairs"])
    for st in judged:
        try:
            entries[st.name], records[st.name] = _student_report(o, ev, st, state, same.get(st.name, []),
                                                                 tolerance or o.JUDGE_TOLERANCE, len(judged))
        except Exception as e:  # noqa: BLE001 - a submission's content, never the judge's crash
            rejected[st.name] = f"its submission could not be checked ({type(e).__name__}: {str(e)[:200]})"
    run = {"inputs": plan.describe() if plan else {}, "judge_peak_mb": state.get("memory", {}).get("judge_peak_mb"),
           "rounds": len(state["rounds"]), "students": len(entries), "rejected": len(rejected)}
    board = judged_leaderboard(entries, ev, rejected, source=source, run=run)
    write_atomic(out / "leaderboard.md", board["markdown"])
    write_atomic(out / "leaderboard.csv", board["csv"])
    (out / "students").mkdir(exist_ok=True)
    for name, rec in records.items():
        write_json(out / "students" / f"{name}.json", {**rec, "rank": board["ranks"].get(name)})
    write_json(out / "rejected.json", rejected)
    write_json(out / "run.json", run)
    _plot(entries, out / "class.png", ev)
    return {"board": board, "rejected": rejected, "students": records, "pairs": state["pairs"], "run": run}


def _same_model_flags(pairs: list[dict]) -> dict[str, list[str]]:
    """student -> one flag per kind of likeness: "same model as carol, dave (identical weights (same sha256))"."""
    kinds: dict[str, dict[str, list[str]]] = {}
    for p in pairs:
        a, b = p["students"]
        why = p["why"][0].split(" (")[0]  # the strongest reason; the per-student JSON keeps them all
        kinds.setdefault(a, {}).setdefault(why, []).append(b)
        kinds.setdefault(b, {}).setdefault(why, []).append(a)
    return {s: [f"same model as {', '.join(sorted(others))} ({why})" for why, others in k.items()] for s, k in kinds.items()}


def _judged_images(static: dict, tally: dict) -> list[int]:
    """The images a student's figures are judged on: those of the accuracy pass, and those of the audit pool both
    models answered in their timed calls (the first time either model met them)."""
    passed = set(static.get("passed") or range(len(static["correct"]["baseline"])))
    seen = [tally.get(f"{role}:seen") or [] for role in ROLES]
    both = {i for i in range(len(static["correct"]["baseline"]))
            if all(len(s) > i and s[i] > 0 for s in seen)}
    return sorted(passed | both)


def _student_report(o, ev, st: Student, state: dict, same: list[str], tolerance: dict[str, float],
                    students: int) -> tuple[dict, dict]:
    """One student's figures, claims, audits and flags: (leaderboard entry, per-student record)."""
    from tito.isolation.sanitize import plain_text
    from tito.olympics.claims import check_claims, timed_consistency, timed_correct

    static = state["static"][st.name]
    rounds = [r[st.name] for r in state["rounds"] if st.name in r and len(r[st.name]) == 2]
    tally = state.get("timed", {}).get(st.name, {})
    images = _judged_images(static, tally)
    # the judged accuracy is the timed calls' (the timed work is the judged work): per image, the answer most
    # of its timed calls gave; the accuracy pass stands for an image no timed call saw
    correct = {}
    for role in static["correct"]:
        full = timed_correct(static["correct"][role], tally.get(f"{role}:right"), tally.get(f"{role}:seen")) \
            if role in ROLES else static["correct"][role]
        correct[role] = [full[i] for i in images] if role in ROLES else [full[i] for i in static.get("passed", images)]
    record = {"round_mean_ms": {role: [r[role] for r in rounds] for role in ROLES},
              "correct": correct, "size_bytes": static["size_bytes"]}
    flags, eligible = [], True
    # the audits (`audits`): no caching (TEST04 turned round), timed outputs = a fresh instance's (TEST01)
    audit = {"no_caching": {}, "test01": {}}
    done = state.get("audited", {}).get(st.name, {})
    for role in ROLES:
        a = state.get("audit", {}).get(st.name, {}).get(role, {})
        audit["no_caching"][role] = audits.no_caching(a.get("new", []), a.get("repeat", []), students)
        audit["test01"][role] = (done.get("test01") or {}).get(role)
    nc = audit["no_caching"]["optimized"]
    if nc is not None and nc["faster_on_repeats"]:
        # judged on the new-input figure: every timed call of the model as slow as its calls on new inputs
        record["round_mean_ms"]["optimized"] = [v * nc["ratio"] for v in record["round_mean_ms"]["optimized"]]
        flags.append(f"faster on repeated inputs: its calls on images it had never been sent took {nc['ratio']:.2f}x "
                     f"as long as on images it had met (p = {nc['p_value']:.2g}); judged on the new-input figure")
    for role, who in (("optimized", "its"), ("baseline", "the course baseline's")):
        t = audit["test01"][role]
        if t is not None and not t["passed"]:
            eligible = False
            flags.append(f"timed outputs differ from a fresh run: {who} outputs on {t['mismatched']} of {t['sampled']} "
                         f"sampled timed calls are not what a fresh instance computes on the same inputs (largest "
                         f"relative difference {t['max_distance']:.2g} > {t['tolerance']:g}; not ranked)")
    figures = o.judged_figures(record, ev)
    figures["audits"] = audit
    figures["cost"] = done.get("cost")
    # a pickled module's hash comes from its own code (the trace has other keys): it checks the file, not a score
    hashes = {role: static.get("reported_sha256", {}).get(role) or static["sha256"][role] for role in static["sha256"]}
    own = "own_baseline" in static["sha256"]
    hashes["baseline"] = hashes.pop("own_baseline", hashes["baseline"])  # the submission's claim is about its own file
    claims = check_claims(st.doc, figures, hashes, tolerance=tolerance)
    validation = o.validate_submission(st.submission)
    flags += [f"claim contradicted: {c['claim']} claimed {fmt(c['claimed'])}, judged {fmt(c['judged'])}"
              for c in claims if c["contradicted"]]
    flags += [f"claim not checked: {c['claim']} ({c['how'].removeprefix('not checked: ')})" for c in claims if c.get("unchecked")]
    if not validation["valid"]:
        flags.append("submission.json invalid: " + "; ".join(validation["reasons"][:3]))
    if st.doc.get("event") != ev.value:
        flags.append(f"submitted for {str(st.doc.get('event'))[:40]!r}, judged for {ev.value!r}")
    acc = figures["accuracy"]  # the one rule on the judged intervals: an inconclusive constraint is not met
    checks = o.check_constraints(ev, {"accuracy": acc["value"], "latency_median_ms": figures["latency_median_ms"]["optimized"],
                                      "model_size_bytes": static["size_bytes"]["optimized"]},
                                 {"accuracy": (acc["ci_lower"], acc["ci_upper"]),
                                  "latency_median_ms": figures["latency_median_ms"]["optimized_ci"]})
    flags += [f"{'breaks' if c['decision'] == 'fail' else 'is not shown to meet'} the rule {c['quantity']} {c['op']} "
              f"{c['threshold']} (judged {fmt(c['measured'])}; {c.get('basis') or c.get('reason')})" for c in checks if not c["passed"]]
    flags += same
    eligible = eligible and all(c["passed"] for c in checks)
    consistency = timed_consistency(tally.get("optimized"))
    if consistency is not None:
        figures["accuracy"]["timed"] = consistency
        if consistency["differs"]:
            eligible = False
            flags.append(f"answers differ when timed: {consistency['timed']:.1%} of its {consistency['calls']} timed calls "
                         f"right, {consistency['pass']:.1%} of the same images in the accuracy pass (not ranked: the "
                         "timed work must be the judged work)")
    if own:
        accepted = static["sha256"]["own_baseline"] == static["sha256"]["baseline"]
        own_rec = {"accepted": accepted, "size_bytes": static["size_bytes"]["own_baseline"],
                   "accuracy": sum(correct["own_baseline"]) / max(len(correct["own_baseline"]), 1),
                   "compression_ratio_vs_own": static["size_bytes"]["own_baseline"] / static["size_bytes"]["optimized"],
                   "how": "its weights are the course model's: the same denominator" if accepted else
                          "not the course model (its weights differ): reported here only; every ranked figure is "
                          "against the course baseline the judge measured"}
        figures["own_baseline"] = own_rec
        if not accepted:
            flags.append(f"own baseline is not the course model (weights differ; {own_rec['size_bytes']:,} bytes, "
                         f"accuracy {own_rec['accuracy']:.1%}): figures are against the course baseline")
    techniques = st.doc.get("techniques") if isinstance(st.doc.get("techniques"), list) else []
    entry = {"figures": figures, "techniques": [plain_text(t, 200) for t in techniques[:20]],
             "flags": flags, "eligible": eligible, "size_bytes": static["size_bytes"]["optimized"]}
    rec = {"student": st.name, "folder": str(st.folder), "event": ev.value, "figures": figures, "claims": claims,
           "constraints": checks, "flags": flags, "measurements": record, "static": {k: v for k, v in static.items()
                                                                                    if k != "passed"},
           "same_model": [p for p in state["pairs"] if st.name in p["students"]],
           "timing": {"rounds": len(rounds), "ipc_overhead_ms": 1000 * state["overhead_s"].get(st.name, 0.0),
                      "calls_per_request": state.get("calls", {}).get(st.name), "images_judged": len(images),
                      "requests_before_an_image_returns": (len(static.get("passed") or []) // state["calls"][st.name]
                                                           if state.get("calls", {}).get(st.name) else None),
                      "method": "the judge times each request of k single-image calls from outside the sandbox, "
                                "in a process where no code of the student's files runs; ms per call = request time / k"},
           "files": {role: p.name for role, p in st.files.items()}}
    return entry, rec


def fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _plot(entries: dict, path: Path, ev) -> None:
    """The class on the latency / accuracy plane, the Pareto set marked."""
    if not entries:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tinytorch.benchmarking.pareto import pareto_front

    pts = {s: {"latency": e["figures"]["latency_median_ms"]["optimized"], "accuracy": e["figures"]["accuracy"]["value"]}
           for s, e in entries.items()}
    front = set(pareto_front(pts, {"latency": "min", "accuracy": "max"}))
    fig, ax = plt.subplots(figsize=(7, 5))
    for s, p in pts.items():
        on = s in front
        ax.scatter(p["latency"], p["accuracy"], marker="*" if on else "o", s=120 if on else 40,
                   color="tab:red" if on else "tab:blue")
        ax.annotate(s, (p["latency"], p["accuracy"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("median latency of one image (ms), judged")
    ax.set_ylabel("top-1 accuracy, judged")
    ax.set_title(f"TorchPerf Olympics, {ev.value}: the class (stars: the Pareto set)")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
