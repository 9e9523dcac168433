"""`tito olympics judge`: measure every student's submission here, in one run, and rank the class.

    python3 -m tito olympics judge SUBMISSIONS_DIR --event EVENT --output-dir OUT [--jobs N] [--rounds R]

`SUBMISSIONS_DIR/<student>/` holds `submission.json` (as `olympics submit` writes it) and the model file
it was made from (the file `submit` recorded, or the folder's only model file), and a baseline file
where the student used their own (else the course's digits CNN).

What is trusted where:
- a student's files are copied (never followed through a link) into a folder of their own and loaded only in a
  bubblewrap sandbox per student (`sandboxes`: no network, read-only system, no view of the other students, the
  submissions or the course repository, memory/process/CPU limits), each model in a process of its own;
- a measuring process is sent only the bytes its model's size counts (`records.counted_archive`: the records the
  TorchScript loader reads, found by key; an .onnx file's bytes); a file that needs its own code is traced to
  TorchScript in a converting sandbox first;
- from the sandbox the judge takes data only (tito.isolation.protocol: arrays as raw bytes, never pickle): outputs
  (labels never leave the judge), weights hashes, bounded signatures of the tensors a file holds;
- every request's inputs are sent with it, each a newly allocated tensor in the sandbox, drawn from one secret seed
  per run (`inputs.Plan`): the order of every round, the images of every request (without replacement from the
  set, a noise of their own each), the audit pool;
- latency is timed by the judge around each request (k calls of one image), so code in a file cannot touch the
  clock; every (student, model) pair runs once per round in a fresh secret order, both models of a student on the
  same images;
- what is timed is what is judged: every timed call's output is read back afterwards and paired with the accuracy
  pass's answer on the same image (`timed_answers`, `claims.timed_consistency`), and the audits (`audits`) check
  that the timed calls are not faster on repeated inputs (TEST04) and answer as a fresh instance does (TEST01);
- the course's baseline, measured here, is every student's denominator (a student's own is checked by its
  weights and reported apart); a model's size is the library's one definition, `model_file_bytes`;
- a class larger than the memory budget is judged in groups (`_groups`), each group's sandboxes closed
  before the next starts; the course baseline is timed in every sandbox of every round;
- a sandbox may use CPU only while its own requests run (`sandboxes.idle_cpu_check`), and at most its budget in all
  (settings.ini `olympics_student_seconds`).
Scores, ranks and the claim check: the library's rules (`tinytorch.benchmarking.olympics`: `judged_figures`,
`rank_judged`, `claim_check`); same-model pairs: `copies`; the submission's claims: `claims`; the boards: `leaderboard`.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tito.config import TitoError
from tito.isolation import limits as limits_mod
from tito.isolation import protocol, sandbox
from tito.isolation.pool import progress_bar, run_tasks
from tito.olympics import audits, inputs
from tito.olympics.records import counted_archive, file_tensors, summarize
from tito.olympics.sandboxes import (LIMITS, Student, StudentError, call, cost, idle_cpu_check, send_file, stage_images,
                                     start, stop, tree_cpu_s, tree_pss_mb, wait_ready)

__all__ = ["judge_class", "verify_files", "run_judge", "load_private_data", "prepare_work", "student_name", "find_files",
           "stage", "load", "group_size", "Student", "StudentError", "tree_pss_mb", "TIMEOUTS"]

MODEL_SUFFIXES = (".pt", ".pth", ".ts", ".pt2", ".onnx")
MAX_FILE_MB = 512
TIMEOUTS = {"load": 120.0, "predict": 300.0, "time": 30.0}  # seconds a sandbox may take to answer
MEMORY_MB = 16384  # settings.ini's olympics_memory_mb: the judge's own memory and every sandbox alive at once
STUDENT_SECONDS = 300.0  # settings.ini's olympics_student_seconds: CPU seconds one student's sandboxes may use
SANDBOX_MB = 400   # what one measuring sandbox is assumed to take before one is measured (measured: docs/performance.md)
MARGIN = 1.25      # on the largest sandbox measured: a later group's models may be larger
STATE_VERSION = 4  # 4: secret inputs, per-model processes, audits (3: the class in groups)
SLOWEST_REQUEST = 5.0  # a timed request takes at most this many times the target, whichever model is slower
OWN = {"baseline": "own_baseline"}  # a student's baseline file: checked against the course's, never a denominator


def student_name(folder_name: str, taken: set[str] | frozenset = frozenset()) -> str:
    """The name a student folder is shown and filed under: itself when it is plain ([A-Za-z0-9._-], at
    most 80 characters), else a cleaned form with a hash of the original, longer where the short one is
    in `taken` (the names already given: a folder named like another's cleaned name must not merge the
    two students), and no control character, markdown or HTML from a name reaches a report or the terminal.

        >>> student_name("ann"), student_name("ann lee")
        ('ann', 'ann_lee-e4959174')
        >>> student_name("ann lee", {"ann_lee-e4959174"})
        'ann_lee-e4959174ae7b937f'
    """
    if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,79}", folder_name):
        return folder_name
    digest = hashlib.sha256(folder_name.encode("utf-8", "surrogateescape")).hexdigest()
    base = re.sub(r"[^A-Za-z0-9._-]", "_", folder_name)[:60].lstrip(".")
    return next(name for name in (f"{base}-{digest[:k]}" for k in (8, 16, 32, 64)) if name not in taken)


# ---- finding and staging the files ------------------------------------------------------------

def _regular(path: Path, what: str) -> Path:
    if path.is_symlink() or not path.is_file():
        raise StudentError(f"{what} {path.name!r} is not a regular file (links are not followed)")
    if path.stat().st_size > MAX_FILE_MB * 2**20:
        raise StudentError(f"{what} {path.name!r} is over {MAX_FILE_MB} MiB")
    return path


def find_files(st: Student) -> None:
    """The submission and the model files of one student's folder; StudentError when they cannot be told."""
    sub = st.submission = st.folder / "submission.json"
    if not sub.exists():
        raise StudentError("no submission.json in the folder")
    try:
        st.doc = json.loads(_regular(sub, "submission").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise StudentError(f"submission.json is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(st.doc, dict):
        raise StudentError("submission.json does not hold a JSON object")
    models = st.doc.get("models") if isinstance(st.doc.get("models"), dict) else {}
    named = {role: models[role].get("file") if isinstance(models.get(role), dict) else None
             for role in ("baseline", "optimized")}
    for role, name in named.items():
        if name is not None:
            if not isinstance(name, str) or Path(name).name != name:
                raise StudentError(f"models.{role}.file: expected a file name in the folder, got {name!r}")
            if not (st.folder / name).exists():
                raise StudentError(f"the submission names {role} model file {name!r}, which is not in the folder")
            st.files[role] = _regular(st.folder / name, f"{role} model file")
    if "optimized" not in st.files:
        found = sorted(p for p in st.folder.iterdir() if p.suffix.lower() in MODEL_SUFFIXES
                       and p.name != named.get("baseline"))
        if not found:
            raise StudentError(f"no model file ({', '.join(MODEL_SUFFIXES)}) in the folder")
        if len(found) > 1:
            raise StudentError(f"several model files ({', '.join(p.name for p in found)}) and submission.json "
                               "names none (models.optimized.file)")
        st.files["optimized"] = _regular(found[0], "model file")


def stage(st: Student, work: Path, index: int) -> None:
    """Copy the student's model files into a folder of their own (what a converting sandbox reads, and where the
    judge writes the counted copies it sends)."""
    st.stage = work / "students" / f"s{index:04d}"
    st.stage.mkdir(parents=True)
    h = hashlib.sha256()
    for role, p in sorted(st.files.items()):
        dest = st.stage / f"{role}{p.suffix.lower()}"
        shutil.copyfile(p, dest, follow_symlinks=False)
        dest.chmod(0o444)
        h.update(role.encode() + b"\0" + hashlib.sha256(dest.read_bytes()).digest())
    st.stage.chmod(0o755)
    st.key = h.hexdigest()


def load_private_data(path: Path, classes: int = 10) -> tuple[Any, Any]:
    """`--data FILE`: the instructor's held-out images, an .npz holding `images` (N, 1, 8, 8), floats in
    [0, 1] like the digits split's (pixel / 16), and `labels` (N,), integers 0-9; N at least 30.

        numpy.savez("held_out.npz", images=X.astype("float32"), labels=y)   # X: (N, 1, 8, 8), y: (N,)
    """
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise TitoError(f"--data: no such file {str(path)!r} (expected an .npz with `images` and `labels`)", code=2)
    try:
        with np.load(path, allow_pickle=False) as f:
            X, y = f["images"], f["labels"]
    except (OSError, ValueError, KeyError, EOFError) as e:
        raise TitoError(f"--data: {str(path)!r} is not an .npz with arrays `images` and `labels` "
                        f"({type(e).__name__}: {str(e)[:120]})", code=2) from None
    if X.ndim != 4 or X.shape[1:] != (1, 8, 8) or X.dtype.kind != "f" or not np.isfinite(X).all():
        raise TitoError(f"--data: `images` must be finite floats of shape (N, 1, 8, 8), got {X.dtype} {X.shape}", code=2)
    if y.shape != (X.shape[0],) or y.dtype.kind not in "iu" or (y.size and (y.min() < 0 or y.max() >= classes)):
        raise TitoError(f"--data: `labels` must be N = {X.shape[0]} integers 0-{classes - 1}, got {y.dtype} {y.shape}", code=2)
    if X.shape[0] < 30:
        raise TitoError(f"--data: at least 30 images are needed, got {X.shape[0]}", code=2)
    return np.ascontiguousarray(X, dtype=np.float32), np.ascontiguousarray(y, dtype=np.int64)


def prepare_work(work: Path, data_file: Path | None = None) -> dict[str, Any]:
    """The judge's staging folder: the server, protocol and records modules (the sandbox's only code of tito's), the
    course baseline (as the records its size counts), and the images accuracy is judged on, the public test split
    or the instructor's `data_file` (inputs go to the sandboxes; labels stay here)."""
    import io

    import torch

    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split

    lib = work / "lib"
    lib.mkdir(parents=True)
    here = Path(__file__).resolve().parent
    for src in (here / "server.py", here / "records.py", Path(protocol.__file__)):
        shutil.copyfile(src, lib / src.name)
    course = work / "course"
    course.mkdir()
    base = default_digits_model()
    X, y = load_digits_split("test")
    buf = io.BytesIO()
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(base, X[:1], check_trace=False), buf)  # TorchScript, as every model runs
    (course / "traced.pt").write_bytes(buf.getvalue())
    counted_archive(course / "traced.pt", course / "baseline.pt")
    for d in (work, lib, course, work / "students"):
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
    for f in list(lib.iterdir()) + [course / "baseline.pt"]:
        f.chmod(0o444)
    out = {"X": X.numpy(), "y": y.numpy(), "classes": int(y.max()) + 1,
           "pkg": Path(sys.modules["tinytorch"].__file__).resolve().parent,
           "course_tensors": summarize(file_tensors((course / "baseline.pt").read_bytes())),
           "source": f"the public digits test split ({len(y)} images), which anyone can download: a model that "
                     "memorised the public digits cannot be told from one that learned (only an instructor's held-out "
                     "set, judge --data FILE, can)"}
    if data_file is not None:
        out["X"], out["y"] = load_private_data(data_file, out["classes"])
        out["source"] = f"the instructor's held-out set {Path(data_file).name} ({len(out['y'])} images)"
    return out


# ---- one student's models ------------------------------------------------------------------------

def _counted_copy(src: Path, dest: Path) -> Path | None:
    """What a measuring process is sent of a model file: the file itself for .onnx (all its bytes count), the
    TorchScript records its size counts (`counted_archive`), or None when the file needs converting first."""
    if src.suffix.lower() == ".onnx":
        return src
    try:
        counted_archive(src, dest)
    except (ValueError, OSError, EOFError, KeyError, __import__("zipfile").BadZipFile):
        dest.unlink(missing_ok=True)
        return None
    dest.chmod(0o444)
    return dest


def load(st: Student, work: Path, data: dict, bwrap: str | None) -> None:
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
        copy = _counted_copy(src, st.stage / f"{role}.sent.pt")
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
            st.tensors[role] = _tensors(reply.get("tensors", {}).get(role))
            if role in reply.get("needs_code", []):
                failed.append(role)
        return failed

    needs += [r for r in load_sent(list(st.sent)) if r != "baseline"]
    if needs:
        conv = Student(st.name, st.folder, stage=st.stage)
        files = sandbox.inside_path("files", st.stage, bwrap is not None)  # where the converter finds them
        try:
            start(conv, work, data, bwrap, converting=True)
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
                copy = _counted_copy(traced, st.stage / f"{role}.traced.sent.pt")
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


ARRAY_TAGS = {"$np"}
SUMMARY_TAGS = {"$np", "$d"}  # a list of {"numel", "shape", "sig", "rows"} with float32 arrays


def _check_tags(value: Any, allowed: set[str], depth: int = 0) -> None:
    """Refuse any tag outside `allowed` before decoding (sets, dicts with odd keys, named tuples, ...
    cost the judge time and memory and carry nothing a model's outputs or signatures need)."""
    if depth > 8:
        raise protocol.ProtocolError("nested deeper than a model's answer is")
    if isinstance(value, list):
        for v in value:
            _check_tags(v, allowed, depth + 1)
    elif isinstance(value, dict):
        tags = [k for k in value if k.startswith("$")]
        if tags:
            if len(value) != 1 or tags[0] not in allowed:
                raise protocol.ProtocolError(f"unexpected value {tags[0]!r}")
            if tags[0] == "$t":
                _check_tags(value["$t"], allowed, depth + 1)
            elif tags[0] == "$d":  # a dict keeps its order this way: string keys only (no hash-collision keys)
                pairs = value["$d"]
                if not isinstance(pairs, list) or not all(isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str)
                                                          for kv in pairs):
                    raise protocol.ProtocolError("a dict with keys that are not names")
                for _, v in pairs:
                    _check_tags(v, allowed, depth + 1)
        else:
            for v in value.values():
                _check_tags(v, allowed, depth + 1)


def decode_reply(value: Any, allowed: set[str], what: str) -> Any:
    """A value from a sandbox, decoded only if it is made of the `allowed` tags; StudentError otherwise."""
    try:
        _check_tags(value, allowed)
        return protocol.decode(value, refs=None)
    except (protocol.ProtocolError, ValueError, TypeError, RuntimeError, OverflowError) as e:
        raise StudentError(f"{what}: a malformed answer ({type(e).__name__}: {str(e)[:200]})") from None


def _tensors(value: Any) -> list[dict[str, Any]]:
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


ROLES = ("baseline", "optimized")


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
        got = call(st, role, {"op": "hash", "role": role}, 120, f"hashing the {what}'s weights")
        sha = got.get("sha256")
        if not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
            raise StudentError(f"{what}: its weights could not be hashed")
        out["sha256"][role] = sha
        out["size_bytes"][role], out["size_method"][role] = model_file_bytes(st.sized[role])
        if role == "optimized":
            copy = {"sha256": sha, "outputs": y_hat[:2000].astype("float32"), "tensors": st.tensors.get(role, [])}
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

    got = call(st, role, {"op": "outputs"}, 60, f"reading the {role} model's timed answers")
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


# ---- timing -----------------------------------------------------------------------------------

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
    `most`; each step's time is the fastest of three (a busy machine's stalls only add). `draw(k)`: the next k
    calibration images; `answers(index)`: the judge reads (and checks) what the timed calls answered. Returns
    (k, seconds per call at k)."""
    answers = answers or (lambda index: None)
    index, imgs = draw(1)
    elapsed = timed(st, role, imgs, timeout)
    answers(index)
    k = 1
    for _ in range(20):
        best = math.inf
        for _ in range(3):
            index, imgs = draw(k)
            best = min(best, timed(st, role, imgs, timeout))
            answers(index)
        elapsed = best
        if elapsed >= target_s or k >= most:
            break
        k = min(most, max(k * 2, math.ceil(k * 1.2 * target_s / max(elapsed, 1e-6))))
    return k, elapsed / k


def ipc_overhead_s(st: Student) -> float:
    """The median time of an empty request (15 of them): what each timed request adds."""
    import statistics

    import numpy as np

    return statistics.median(timed(st, "optimized", np.zeros((0, 1, 8, 8), np.float32), 10) for _ in range(15))


# ---- the run ----------------------------------------------------------------------------------

def _key(students: list[Student], event: str, rounds: int, target_ms: float, seed: int, data: dict,
         budget: float) -> str:
    h = hashlib.sha256(json.dumps([STATE_VERSION, event, rounds, target_ms, seed, budget]).encode())
    h.update(hashlib.sha256(data["X"].tobytes() + data["y"].tobytes()).digest())
    for st in students:
        h.update(f"{st.name}\0{st.key}\0".encode())
    return h.hexdigest()


def _check_settings(jobs: int, rounds: int, target_ms: float, no_sandbox: bool) -> str | None:
    for name, v, low in (("--jobs", jobs, 1), ("--rounds", rounds, 6)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise TitoError(f"{name}: expected an integer of at least {low}, got {v!r}", code=2)
    if not (isinstance(target_ms, (int, float)) and target_ms > 0):
        raise TitoError(f"target_ms: expected a positive number of milliseconds, got {target_ms!r}", code=2)
    bwrap = sandbox.find_bwrap() if not no_sandbox else None
    if bwrap is None and not no_sandbox:
        raise TitoError("tito olympics loads student model files only in a sandbox: " + sandbox.INSTALL_HINT)
    if no_sandbox:
        print("WARNING: --no-sandbox: student model files are loaded WITHOUT a sandbox; a pickled file's code "
              "runs with your permissions", file=sys.stderr)
    return bwrap


def judge_class(submissions_dir, event: str, output_dir, *, jobs: int = 1, rounds: int = 30, resume: bool = False,
                no_sandbox: bool = False, target_ms: float = 10.0, seed: int = 0,
                timeouts: dict[str, float] | None = None, data_file=None, memory_mb: float = MEMORY_MB,
                student_seconds: float = STUDENT_SECONDS) -> dict[str, Any]:
    """Judge every student folder of `submissions_dir` for `event`; write the leaderboard, per-student
    JSON and the class plot into `output_dir`; return {"board", "rejected", "students", "pairs", "run"}.
    `memory_mb`: the judge's memory budget (settings.ini's olympics_memory_mb), which sets the groups' size;
    `student_seconds`: the CPU seconds one student's sandboxes may use in all (settings.ini's olympics_student_seconds).
    `timeouts` (seconds; TIMEOUTS's keys) bound how long one sandbox may take to load, predict, be timed;
    `data_file`: the instructor's held-out images (`load_private_data`), else the public test split.

        judge_class("submissions", "latency_sprint", "judged", jobs=4)   # doctest: +SKIP
    """
    from tinytorch.benchmarking import olympics as o

    folder = Path(submissions_dir)
    if not folder.is_dir():
        raise TitoError(f"SUBMISSIONS_DIR: not a folder: {folder}", code=2)
    ev = o.get_event(event)
    bwrap = _check_settings(jobs, rounds, target_ms, no_sandbox)
    for name, v in (("memory_mb", memory_mb), ("student_seconds", student_seconds)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise TitoError(f"{name}: expected a positive number, got {v!r}", code=2)
    # the limits this process is given (ulimit, a cgroup, a container): clamped and said, or refused before any sandbox
    fitted = limits_mod.fit(sandbox.Limits(**LIMITS), 1, bwrap, ("torch",), what="tito olympics judge")
    if fitted.refusal:
        raise TitoError(fitted.refusal, code=2)
    memory_mb, budget_note = limits_mod.memory_budget(memory_mb)
    for note in [fitted.note(), budget_note]:
        if note:
            print(f"sandbox limits {note}", file=sys.stderr)
    if data_file is not None:
        load_private_data(data_file)  # a bad file is the instructor's error, told before any sandbox starts
    folders = [p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not folders:
        raise TitoError(f"SUBMISSIONS_DIR: no student folders in {folder}", code=2)
    rejected: dict[str, str] = {}
    valid = []
    taken = {p.name for p in folders if student_name(p.name) == p.name}  # plain names keep themselves
    for p in folders:
        name = student_name(p.name, taken)
        taken.add(name)
        st = Student(name, p)
        try:
            if p.is_symlink():
                raise StudentError("the folder is a symbolic link (links are not followed)")
            find_files(st)
            valid.append(st)
        except StudentError as e:
            rejected[st.name] = str(e)
        except Exception as e:  # noqa: BLE001 - whatever a submission holds, it is that student's line
            rejected[st.name] = f"unreadable submission ({type(e).__name__}: {str(e)[:200]})"
    return run_judge(valid, rejected, ev, Path(output_dir), bwrap, jobs=jobs, rounds=rounds, resume=resume,
                     target_ms=target_ms, seed=seed, timeouts=timeouts, data_file=data_file, memory_mb=memory_mb,
                     student_seconds=student_seconds, limits=fitted.limits)


def verify_files(submission, model_path, baseline_path=None, *, rounds: int = 20, no_sandbox: bool = False,
                 timeouts: dict[str, float] | None = None) -> dict[str, Any]:
    """Verify one submission against the model files it was made from, measured as `judge` measures
    (the files loaded only in a sandbox): {"verified", "claims", "reasons", "record"}."""
    from tinytorch.benchmarking import olympics as o

    bwrap = _check_settings(1, rounds, 10.0, no_sandbox)
    sub = Path(submission)
    if not sub.is_file():
        raise FileNotFoundError(f"path: no submission file at {sub}")
    st = Student("submission", sub.parent, submission=sub)
    try:
        st.doc = json.loads(sub.read_text(encoding="utf-8"))
        for role, p in (("optimized", model_path), ("baseline", baseline_path)):
            if p is not None:
                if not Path(p).exists():
                    raise FileNotFoundError(f"{role} model: no such file {str(p)!r}")
                st.files[role] = _regular(Path(p), f"{role} model file")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return {"verified": False, "claims": [], "record": None, "reasons": [f"not valid JSON: {e}"]}
    except StudentError as e:
        return {"verified": False, "claims": [], "record": None, "reasons": [str(e)]}
    if (problem := o.submission_format_error(st.doc)) is not None:  # e.g. version 2: sizes of another definition
        return {"verified": False, "claims": [], "record": None, "reasons": [problem]}
    event = st.doc.get("event")
    try:
        ev = o.get_event(event)
    except ValueError as e:
        return {"verified": False, "claims": [], "record": None, "reasons": [str(e)]}
    with tempfile.TemporaryDirectory(prefix="tito-verify-") as out:
        # the default tolerance (the file's may only tighten it): `submit` measured as the judge does (TorchScript,
        # one thread, interleaved rounds), so on the participant's machine only the load differs, which rounds absorb
        tol = o.submission_tolerance(st.doc)
        result = run_judge([st], {}, ev, Path(out), bwrap, jobs=1, rounds=rounds, resume=False, target_ms=10.0,
                           seed=0, timeouts=timeouts, tolerance=tol)
    if st.name in result["rejected"]:
        return {"verified": False, "claims": [], "record": None, "reasons": [result["rejected"][st.name]]}
    record = result["students"][st.name]
    validation = o.validate_submission(sub)
    reasons = [f"{c['claim']}: claimed {_fmt(c['claimed'])}, measured {_fmt(c['judged'])}" for c in record["claims"]
               if c["contradicted"]] + [f"validation: {r}" for r in validation["reasons"]]
    return {"verified": not reasons, "claims": record["claims"], "reasons": reasons, "record": record}


def run_judge(valid: list[Student], rejected: dict[str, str], ev, out: Path, bwrap: str | None, *, jobs: int,
              rounds: int, resume: bool, target_ms: float, seed: int, timeouts: dict[str, float] | None,
              tolerance: dict[str, float] | None = None, data_file=None, memory_mb: float = MEMORY_MB,
              student_seconds: float = STUDENT_SECONDS, limits: sandbox.Limits | None = None) -> dict[str, Any]:
    """Stage, load, measure and time the students whose files were found, in groups that fit `memory_mb`
    (`_groups`), each sandbox with `limits` (default LIMITS); audit them, find copies, and write the report into
    `out` (claims checked with `tolerance`, default the library's JUDGE_TOLERANCE)."""
    from tinytorch.benchmarking import olympics as o

    out.mkdir(parents=True, exist_ok=True)
    state_path = out / ".judge-state.json"
    work = Path(tempfile.mkdtemp(prefix="tito-olympics-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    work.chmod(0o755)
    try:
        data = prepare_work(work, data_file)
        data["timeouts"] = {**TIMEOUTS, **(timeouts or {})}
        data["limits"] = limits
        for i, st in enumerate(valid):
            stage(st, work, i)
            st.budget_s = float(student_seconds)
        key = _key(valid, ev.value, rounds, target_ms, seed, data, float(student_seconds))
        saved = json.loads(state_path.read_text()) if resume and state_path.is_file() else None
        if saved is not None and saved.get("key") != key:
            print("--resume: the submissions or the settings changed since the saved run; judging from the start",
                  file=sys.stderr)
            saved = None
        # one secret seed per run (MLPerf TEST05): every draw below comes from it; kept in the state for --resume only
        state = saved or {"key": key, "static": {}, "rejected": {}, "pairs": [], "rounds": [], "overhead_s": {},
                          "secret": secrets.randbits(62), "attempts": 0}
        plan = inputs.Plan(len(data["y"]), state["secret"], rounds)
        copies_dir = out / ".judge-copies"
        copies_dir.mkdir(exist_ok=True)
        rejected.update(state["rejected"])
        valid = [st for st in valid if st.name not in state["rejected"]]
        for group, index, count in _groups(valid, state, memory_mb, jobs, state_path):
            alive = [st for st in group if st.name not in rejected]
            done = _group_rounds(alive, state)
            if not alive or (done >= rounds and all(st.name in state.get("audited", {}) for st in alive)):
                continue
            label = f" (group {index + 1} of {count})" if count > 1 else ""
            try:
                alive = _load_and_measure(alive, work, data, bwrap, jobs, state, rejected, state_path, plan, copies_dir,
                                          label)
                _rounds(alive, rounds, target_ms / 1000, state, rejected, state_path, data, plan, done, label)
                _after_rounds(alive, state, rejected, data, plan, copies_dir)
                _note_footprint(state, alive)  # after its rounds, as large as a sandbox gets: sizes the next group
                _save(state_path, state)
            finally:
                for st in group:
                    stop(st)
        judged = [st for st in valid if st.name not in rejected]
        state["pairs"] = _copy_pairs(judged, copies_dir, data, plan)
        state.setdefault("memory", {})["judge_peak_mb"] = _judge_peak_mb()
        _save(state_path, state)
        return _report(o, ev, judged, state, rejected, out, tolerance, data["source"], plan)
    finally:
        for st in valid:
            stop(st)
        shutil.rmtree(work, ignore_errors=True)


def _judge_peak_mb() -> float:
    "The judge's own process at its largest (VmHWM: resident memory's high-water mark), MiB."
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- memory: the class in groups -------------------------------------------------------------

def _note_footprint(state: dict, group: list[Student]) -> None:
    """Record the largest measuring sandbox of `group` (PSS) and the judge's own, the next group's sizes."""
    sizes = [mb for st in group if st.proc is not None and (mb := tree_pss_mb(st.proc.pid)) > 0]  # 0: unreadable
    mem = state.setdefault("memory", {})
    if sizes:
        mem["sandbox_mb"] = max(max(sizes), mem.get("sandbox_mb", 0.0))
    mem["judge_mb"] = max(tree_pss_mb(os.getpid()) - sum(sizes), mem.get("judge_mb", 0.0), 0.0)


def group_size(memory_mb: float, judge_mb: float, sandbox_mb: float, jobs: int) -> int:
    """How many students' sandboxes fit in `memory_mb` beside the judge (`judge_mb`) and the `jobs` converting
    sandboxes a load may start: every sandbox at its measured size times MARGIN; at least one.

        >>> group_size(16384, 500, 250, 2)   # (16384 - 500 - 2 x 312.5) // 312.5
        48
    """
    return max(1, int((memory_mb - judge_mb - jobs * sandbox_mb * MARGIN) // (sandbox_mb * MARGIN)))


def _groups(valid: list[Student], state: dict, memory_mb: float, jobs: int, state_path: Path):
    """The class in groups that fit the memory budget, in order: (group, index, count of groups so far
    foreseen). A group's sandboxes are started, judged in rounds of their own (the course baseline timed in
    every student's sandbox in every round) and closed before the next group starts. The first group is sized
    from SANDBOX_MB, each later one from the largest sandbox measured so far; groups already formed (kept in
    the state) are kept on --resume, so a resumed group keeps its rounds."""
    by_name = {st.name: st for st in valid}
    groups = state.setdefault("groups", [])
    placed = {n for g in groups for n in g}
    i = 0
    while True:
        rest = [st for st in valid if st.name not in placed]
        mem = state.get("memory", {})
        size = group_size(memory_mb, mem.get("judge_mb", 0.0), mem.get("sandbox_mb", SANDBOX_MB), jobs)
        if i == len(groups):
            if not rest:
                return
            groups.append([st.name for st in rest[:size]])
            placed.update(groups[-1])
            rest = rest[size:]
            _save(state_path, state)
        yield [by_name[n] for n in groups[i] if n in by_name], i, len(groups) + math.ceil(len(rest) / size)
        i += 1


def _group_rounds(group: list[Student], state: dict) -> int:
    "Rounds the group has finished (a round holds the students of one group)."
    names = {st.name for st in group}
    return sum(1 for r in state["rounds"] if names & set(r))


def _save(state_path: Path, state: dict) -> None:
    from tinytorch.benchmarking.results import write_json

    write_json(state_path, state, indent=None)  # atomic: a crash leaves the last complete state


def _save_copy_material(path: Path, material: dict) -> None:
    """One student's copy-check material (weights hash, bounded tensor signatures, accuracy-pass outputs, probe
    answers) in a file of its own, beside the state: written once, read when the whole class is measured."""
    import numpy as np

    from tinytorch.benchmarking.results import write_json

    def plain(v):
        if isinstance(v, np.ndarray):
            return v.astype(float).round(6).tolist()
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    write_json(path, plain(material), indent=None)


def _load_copy_material(path: Path) -> dict | None:
    import numpy as np

    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    m["tensors"] = [{**t, "sig": np.asarray(t["sig"], np.float32),
                     **({"rows": np.asarray(t["rows"], np.float32)} if "rows" in t else {})} for t in m.get("tensors", [])]
    if m.get("outputs") is not None:
        m["outputs"] = np.asarray(m["outputs"], np.float32)
    return m


def _load_and_measure(valid, work, data, bwrap, jobs, state, rejected, state_path, plan, copies_dir,
                      label: str = "") -> list[Student]:
    """Start every student's sandbox of a group (`jobs` loads at a time) and take the measurements that need no
    clock: the accuracy pass, the weights hash, the sizes, the signatures of what each file holds."""

    def one(st: Student) -> None:
        try:
            load(st, work, data, bwrap)
            if st.name not in state["static"]:
                state["static"][st.name], material = measure_static(st, data, plan)
                _save_copy_material(copies_dir / f"{st.name}.json", material)
        except Exception as e:  # noqa: BLE001 - a student's file or answers, never the judge's crash
            why = str(e) if isinstance(e, StudentError) else f"the judge could not use its answers ({type(e).__name__}: {str(e)[:200]})"
            rejected[st.name] = state["rejected"][st.name] = why
            stop(st)

    for st in valid:
        start(st, work, data, bwrap, roles=ROLES + (("own_baseline",) if "baseline" in st.files else ()))
    for st in valid:  # all of them up before any is loaded: their imports no longer share its core with a load
        try:
            wait_ready(st)
        except StudentError as e:
            rejected[st.name] = state["rejected"][st.name] = str(e)
            stop(st)
    run_tasks(one, [st for st in valid if st.name not in rejected], lambda st, _: st.name in rejected, workers=jobs,
              show_progress=sys.stderr.isatty(), label="loading models" + label)
    _save(state_path, state)
    return [st for st in valid if st.name not in rejected]


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


def _rounds(alive: list[Student], rounds: int, target_s: float, state: dict, rejected: dict, state_path: Path,
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
        _save(state_path, state)
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
                _save(state_path, state)
                continue
            state["rounds"].append({s: v for s, v in this.items() if s not in rejected})
            for name, roles in audited.items():
                for role, kinds in roles.items():
                    for kind, values in kinds.items():
                        audit[name].setdefault(role, {}).setdefault(kind, []).extend(values)
            _save(state_path, state)
            if bar is not None:
                bar.update(task, completed=len(state["rounds"]) - first, failed=len(rejected))
    finally:
        os.sched_setaffinity(0, mine)
        if bar is not None:
            bar.stop()


def _after_rounds(alive: list[Student], state: dict, rejected: dict, data: dict, plan: inputs.Plan,
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
                    material = _load_copy_material(path) or {}
                    _save_copy_material(path, {**material, "probe": answers.astype(int).tolist()})
            done[st.name] = {"test01": result, "cost": cost(st)}
        except StudentError as e:
            rejected[st.name] = state["rejected"][st.name] = str(e)
            stop(st)


def _copy_pairs(judged: list[Student], copies_dir: Path, data: dict, plan: inputs.Plan) -> list[dict]:
    """Same-model pairs over the whole class (every group), from each student's copy-check material; the course
    baseline's signatures and probe answers (computed here, from the course's own file) and what the course's
    recipes make of it (`course_recipes`) are the reference."""
    from tito.olympics.copies import similar_models

    models, outputs, probe = {}, {}, {}
    for st in judged:
        m = _load_copy_material(copies_dir / f"{st.name}.json")
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


def _report(o, ev, judged: list[Student], state: dict, rejected: dict, out: Path,
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
    flags += [f"claim contradicted: {c['claim']} claimed {_fmt(c['claimed'])}, judged {_fmt(c['judged'])}"
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
              f"{c['threshold']} (judged {_fmt(c['measured'])}; {c.get('basis') or c.get('reason')})" for c in checks if not c["passed"]]
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


def _fmt(v: Any) -> str:
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
