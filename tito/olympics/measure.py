"""The measurements that need no clock, and every answer of a sandbox read as data: each student's models loaded in
their sandbox (`load`: sent only the records their size counts, a file that needs its own code converted first),
the accuracy pass, the weights hash and the size (`measure_static`), the outputs of each timed request checked and
paired with the accuracy pass's (`timed_answers`). A sandbox's answer is decoded only when it is made of the tags
expected (`decode_reply`), and checked before it is used (`checked_outputs`, `checked_tensors`).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from tito.isolation import protocol, sandbox
from tito.isolation.pool import run_tasks
from tito.olympics import inputs
from tito.olympics.groups import save_copy_material, save_state
from tito.olympics.sandboxes import (Student, StudentError, call, send_file, stage_images, start, stop, tree_cpu_s,
                                     wait_ready)
from tito.olympics.staging import MAX_FILE_MB, counted_copy


OWN = {"baseline": "own_baseline"}  # a student's baseline file: checked against the course's, never a denominator


ROLES = ("baseline", "optimized")
COPY_OUTPUTS = 2000  # rows of the accuracy pass's outputs kept for the copy checks (tito.olympics.copies)


def load(st: Student, work: Path, data: dict, box: sandbox.Backend) -> None:
    """Have each of the student's measuring processes (started, `wait_ready`) load its model: the course baseline,
    the student's model and their own baseline, each sent only the records its size counts. A file that needs its
    own code is first converted to TorchScript by a converting sandbox of its own."""
    timeout = data["timeouts"]["load"]
    st.sized = {OWN.get(role, role): st.stage / f"{role}{p.suffix.lower()}" for role, p in st.files.items()}
    st.sized["baseline"] = work / "course" / "baseline.pt"
    st.sent = {"baseline": work / "course" / "baseline.pt"}
    needs = []
    for role, src in st.sized.items():
        if role == "baseline":
            continue
        copy = counted_copy(src, st.stage / f"{role}.sent.pt")
        if copy is None:
            needs.append(role)
        else:
            st.sent[role] = copy
    sample, classes = list(data["X"].shape[1:]), data["classes"]

    def load_sent(roles) -> list[str]:
        failed = []
        for role in roles:
            send_file(st, role, st.sent[role], timeout)
            reply = call(st, role, {"op": "load", "models": {role: st.sent[role].name}, "sample": sample,
                                    "classes": classes}, timeout, f"loading the {role.replace('_', ' ')} model file")
            st.kinds.update({r: k for r, k in reply.get("kinds", {}).items() if r not in st.kinds})  # a trace keeps its how
            st.tensors[role] = checked_tensors(reply.get("tensors", {}).get(role))
            if role in reply.get("needs_code", []):
                failed.append(role)
        return failed

    needs += [r for r in load_sent(list(st.sent)) if r != "baseline"]
    if needs:
        conv = Student(st.name, st.folder, stage=st.stage)
        files = box.inside_path("files", st.stage)  # where the converter finds them
        try:
            start(conv, work, data, box, converting=True)
            wait_ready(conv)
            stage_images(conv, "convert", data["X"][:1])
            for role in needs:
                original = st.files["baseline" if role == "own_baseline" else role]
                got = call(conv, "convert", {"op": "trace", "path": f"{files}/{'baseline' if role == 'own_baseline' else role}"
                                                                     f"{original.suffix.lower()}"},
                           timeout, f"loading the {role.replace('_', ' ')} model file (converted to TorchScript)")
                archive = decode_reply(got.get("torchscript"), {"$b"}, f"the {role} model's TorchScript")
                if not isinstance(archive, bytes) or len(archive) > MAX_FILE_MB * 2**20:
                    raise StudentError(f"{role} model: its conversion to TorchScript sent no archive")
                traced = st.stage / f"{role}.traced.pt"
                traced.write_bytes(archive)
                traced.chmod(0o444)
                copy = counted_copy(traced, st.stage / f"{role}.traced.sent.pt")
                if copy is None:
                    raise StudentError(f"{role} model: its conversion to TorchScript is not a TorchScript archive")
                st.sized[role], st.sent[role] = traced, copy
                sha, kind = got.get("sha256"), got.get("kind")
                if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha):  # reported by the file's own code
                    st.reported_sha[role] = sha
                st.kinds[role] = (f"{kind}, measured as its TorchScript trace" if kind in
                                  ("state dict of DigitsCNN", "pickled module") else "converted to TorchScript")
        finally:
            if conv.proc is not None:
                st.cpu_extra += max(tree_cpu_s(conv.proc.pid) - conv.cpu_start, 0.0)
            st.wall_s += conv.wall_s
            stop(conv)
        if load_sent(needs):
            raise StudentError("its converted TorchScript did not load")


ANSWER_DEPTH = 8  # the deepest a model's answer or signature nests
ARRAY_TAGS = {"$np"}


SUMMARY_TAGS = {"$np", "$d"}  # a list of {"numel", "shape", "sig", "rows"} with float32 arrays


def decode_reply(value: Any, allowed: set[str], what: str) -> Any:
    """A value from a sandbox, decoded only if it is made of the `allowed` tags (sets, dicts with odd keys, named
    tuples cost the judge time and memory and carry nothing a model's outputs or signatures need), nested at most
    ANSWER_DEPTH levels; StudentError otherwise."""
    try:
        return protocol.decode(value, refs=None, allowed=allowed, max_depth=ANSWER_DEPTH)
    except (protocol.ProtocolError, ValueError, TypeError, RuntimeError, OverflowError) as e:
        raise StudentError(f"{what}: a malformed answer ({type(e).__name__}: {str(e)[:200]})") from None


def checked_tensors(value: Any) -> list[dict[str, Any]]:
    """The signatures a measuring process sent (`records.summarize`), checked: at most the bounds `summarize` keeps
    (anything else is dropped: a model's copy checks may use less, never more of the judge's memory)."""
    import numpy as np

    from tito.olympics import records

    try:
        got = decode_reply(value, SUMMARY_TAGS, "the model's tensors") if value is not None else []
    except StudentError:
        return []
    out = []
    for t in got[:records.MAX_TENSORS] if isinstance(got, list) else []:
        if not isinstance(t, dict) or not isinstance(t.get("numel"), int) or not isinstance(t.get("shape"), list):
            continue
        sig, rows = t.get("sig"), t.get("rows")
        if not (isinstance(sig, np.ndarray) and sig.ndim == 1 and sig.size <= records.SIG_POINTS and sig.dtype == np.float32):
            continue
        entry = {"numel": t["numel"], "shape": [int(d) for d in t["shape"] if isinstance(d, int)][:8], "sig": sig}
        if isinstance(rows, np.ndarray) and rows.ndim == 2 and rows.shape[0] <= records.MAX_ROWS \
                and rows.shape[1] <= records.ROW_POINTS and rows.dtype == np.float32:
            entry["rows"] = rows
        out.append(entry)
    return out


def checked_outputs(value: Any, n: int, classes: int, what: str, row: str):
    """A sandbox's outputs decoded and checked: an (n, classes) float array with every value finite."""
    import numpy as np

    y_hat = decode_reply(value, ARRAY_TAGS, f"{what}'s outputs")
    if not isinstance(y_hat, np.ndarray) or y_hat.dtype.kind != "f":
        raise StudentError(f"{what}: its outputs are not an array of class scores")
    if y_hat.shape != (n, classes):
        raise StudentError(f"{what}: outputs of shape {tuple(y_hat.shape)}, expected ({n}, {classes}): "
                           f"one score per class for each of the {n} {row}s")
    bad = np.flatnonzero(~np.isfinite(y_hat).all(axis=1))
    if bad.size:
        raise StudentError(f"{what}: non-finite output (NaN or inf) for {row} {int(bad[0])} ({bad.size} of {n} rows)")
    return y_hat


def predict(st: Student, role: str, images, data: dict, doing: str, row: str = "test image", chunk: int | None = None):
    """The model's outputs on `images`, one call each (untimed), checked; in requests of `chunk` calls (a slow model's
    probe in requests as short as its timed ones: each within the timeout, all of it within its budget)."""
    import numpy as np

    chunk = max(int(chunk or len(images)), 1)
    outs = []
    for i in range(0, max(len(images), 1), chunk):
        part = images[i:i + chunk]
        stage_images(st, role, part)
        got = call(st, role, {"op": "predict", "role": role}, data["timeouts"]["predict"], doing)
        outs.append(checked_outputs(got.get("outputs"), len(part), data["classes"], f"{role.replace('_', ' ')} model", row))
    return np.concatenate(outs)


def measure_static(st: Student, data: dict, plan: inputs.Plan) -> tuple[dict, dict]:
    """The accuracy pass (every judged image once, labels read here only), the weights hash (computed in the model's
    process: its tensors never cross) and the size of each model; with the copy checks' material."""
    from tinytorch.benchmarking.olympics import model_file_bytes

    index, images = plan.accuracy_pass(data["X"])
    n = len(data["y"])
    out = {"correct": {}, "size_bytes": {}, "size_method": {}, "sha256": {}, "reported_sha256": st.reported_sha,
           "kinds": st.kinds}
    copy = {}
    for role in ROLES + (("own_baseline",) if "own_baseline" in st.sent else ()):
        what = f"{role.replace('_', ' ')} model"
        y_hat = predict(st, role, images, data, f"running the {what}")
        correct = [0] * n
        for i, ok in zip(index.tolist(), (y_hat.argmax(axis=1) == data["y"][index]).tolist()):
            correct[i] = int(ok)
        out["correct"][role] = correct
        got = call(st, role, {"op": "hash", "role": role}, data["timeouts"]["hash"], f"hashing the {what}'s weights")
        sha = got.get("sha256")
        if not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
            raise StudentError(f"{what}: its weights could not be hashed")
        out["sha256"][role] = sha
        out["size_bytes"][role], out["size_method"][role] = model_file_bytes(st.sized[role])
        if role == "optimized":
            copy = {"sha256": sha, "outputs": y_hat[:COPY_OUTPUTS].astype("float32"), "tensors": st.tensors.get(role, [])}
    out["passed"] = index.tolist()  # the images of the accuracy pass (the others: the audit pool, timed first)
    return out, copy


def timed_answers(st: Student, role: str, data: dict, index, pass_correct: list[int] | None, tally: dict, known=None):
    """The outputs of the request just timed (read after it, not timed), each checked as the accuracy pass's are
    and paired with the accuracy pass's answer on the same image: `tally[role]` counts [both right, only the
    accuracy pass right, only the timed call right, neither] (the timed work is the judged work: a model that
    changes what it computes once timed shows here; an image of the audit pool, which the accuracy pass did not
    see, `known` False, is only counted per image). Returns the outputs (TEST01 keeps a sample of them whole) and each call's time
    as the server read it around the call (the no-caching audit compares calls one by one)."""
    import numpy as np

    got = call(st, role, {"op": "outputs"}, data["timeouts"]["outputs"], f"reading the {role} model's timed answers")
    y_hat = checked_outputs(got.get("outputs"), len(index), data["classes"], f"{role} model (timed calls)", "timed call")
    call_ns = decode_reply(got.get("call_ns"), ARRAY_TAGS, f"the {role} model's call times")
    if not (isinstance(call_ns, np.ndarray) and call_ns.shape == (len(index),) and call_ns.dtype.kind == "i"):
        raise StudentError(f"{role} model: its calls' times came back malformed")
    timed_ok = y_hat.argmax(axis=1) == data["y"][index]
    if pass_correct is not None:
        pass_ok = np.asarray(pass_correct, dtype=bool)[index]
        known = np.ones(len(index), bool) if known is None else np.asarray(known, bool)
        t = tally.setdefault(role, [0, 0, 0, 0])
        for i, (a, b) in enumerate(((True, True), (True, False), (False, True), (False, False))):
            t[i] += int(np.sum(known & (pass_ok == a) & (timed_ok == b)))
    # per image, for the judged accuracy (claims.timed_correct): what the timed calls answered on it
    right = tally.setdefault(f"{role}:right", [0] * len(data["y"]))
    seen = tally.setdefault(f"{role}:seen", [0] * len(data["y"]))
    for i, ok in zip(np.asarray(index).tolist(), timed_ok.tolist()):
        seen[i] += 1
        right[i] += int(ok)
    return y_hat, call_ns


def load_and_measure(valid, work, data, box, jobs, state, rejected, state_path, plan, copies_dir,
                      label: str = "") -> list[Student]:
    """Start every student's sandbox of a group (`jobs` loads at a time) and take the measurements that need no
    clock: the accuracy pass, the weights hash, the sizes, the signatures of what each file holds."""

    def one(st: Student) -> None:
        try:
            load(st, work, data, box)
            if st.name not in state["static"]:
                state["static"][st.name], material = measure_static(st, data, plan)
                save_copy_material(copies_dir / f"{st.name}.json", material)
        except Exception as e:  # noqa: BLE001 - a student's file or answers, never the judge's crash
            why = str(e) if isinstance(e, StudentError) else f"the judge could not use its answers ({type(e).__name__}: {str(e)[:200]})"
            rejected[st.name] = state["rejected"][st.name] = why
            stop(st)

    for st in valid:
        start(st, work, data, box, roles=ROLES + (("own_baseline",) if "baseline" in st.files else ()))
    for st in valid:  # all of them up before any is loaded: their imports no longer share its core with a load
        try:
            wait_ready(st)
        except StudentError as e:
            rejected[st.name] = state["rejected"][st.name] = str(e)
            stop(st)
    run_tasks(one, [st for st in valid if st.name not in rejected], lambda st, _: st.name in rejected, workers=jobs,
              show_progress=sys.stderr.isatty(), label="loading models" + label)
    save_state(state_path, state)
    return [st for st in valid if st.name not in rejected]
