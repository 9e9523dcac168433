"""`tito olympics judge`: measure every student's submission here, in one run, and rank the class.

    python3 -m tito olympics judge SUBMISSIONS_DIR --event EVENT --output-dir OUT [--jobs N] [--rounds R]

`SUBMISSIONS_DIR/<student>/` holds `submission.json` (as `olympics submit` writes it) and the model file
it was made from (the file `submit` recorded, or the folder's only model file), and a baseline file
where the student used their own (else the course's digits CNN).

What is trusted where:
- a student's files are copied (never followed through a link) into a folder of their own and loaded
  only by `tito.olympics.server`, in a bubblewrap sandbox per student: no network, read-only system,
  no view of the other students, the submissions or the course repository, memory/process/CPU limits;
- from the sandbox the judge takes data only (tito.isolation.protocol: arrays and tensors as raw bytes,
  never pickle): the outputs on the test inputs (labels never leave the judge), the weights;
- latency is timed by the judge around each request (k calls of one sample), so code in a file cannot
  touch the clock; every (student, model) pair runs once per round in a fresh random order, on images
  with a noise of the round's own (its seed drawn secretly per run);
- what is timed is what is judged: every timed call's output is read back afterwards and paired with the
  accuracy pass's answer on the same image (`timed_answers`, `claims.timed_consistency`);
- the course's baseline, measured here, is every student's denominator (a student's own is checked by its
  weights and reported apart); a model's size is the library's one definition, `model_file_bytes` of the
  file the sandbox ran (the records the TorchScript loader reads, found by key; an .onnx file's bytes), the same
  figure a submission records, its claims and the size constraint are read against; an .onnx file runs in ONNX Runtime in the measuring sandbox
  (server.OnnxModel: external data, custom operators, odd or huge shapes refused there); accuracy is on
  the public test split or the instructor's `--data` (`load_private_data`);
- a class larger than the memory budget is judged in groups (`_groups`), each group's sandboxes closed
  before the next starts; the course baseline is timed in every sandbox of every round;
- a sandbox may use CPU only while its own request runs (`idle_cpu_check`): one that works between its
  requests is rejected and the round it may have slowed is measured again.
Scores, ranks and the claim check: the library's rules (`tinytorch.benchmarking.olympics`: `judged_figures`,
`rank_judged`, `claim_check`); same-model pairs: `copies`; the submission's claims: `claims`; the boards: `leaderboard`.
"""
from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import os
import re
import secrets
import shutil
import socket
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito.config import TitoError
from tito.isolation import limits as limits_mod
from tito.isolation import protocol, sandbox
from tito.isolation.pool import progress_bar, run_tasks
from tito.isolation.sanitize import clean_text

MODEL_SUFFIXES = (".pt", ".pth", ".ts", ".pt2", ".onnx")
MAX_FILE_MB = 512
LIMITS = dict(memory_mb=6144, processes=64, cpu_seconds=3600, file_mb=8, tmp_mb=64)
TIMEOUTS = {"load": 120.0, "predict": 300.0, "time": 30.0}  # seconds a sandbox may take to answer
STARTUP_S = 600.0  # for the sandbox's own imports, before any student file is read: the judge's time, not theirs
MEMORY_MB = 16384  # settings.ini's olympics_memory_mb: the judge's own memory and every sandbox alive at once
SANDBOX_MB = 400   # what one measuring sandbox is assumed to take before one is measured (measured: docs/performance.md)
MARGIN = 1.25      # on the largest sandbox measured: a later group's models may be larger
STATE_VERSION = 3  # 3: the class in groups (state["groups"])


class StudentError(Exception):
    """What went wrong with one student's files or model: their line in the rejected section."""


@dataclass
class Student:
    name: str
    folder: Path
    submission: Path | None = None                         # its submission JSON
    doc: dict | None = None
    files: dict[str, Path] = field(default_factory=dict)   # role -> the file as submitted
    stage: Path | None = None
    key: str = ""                                          # hash of the files: resume by content
    proc: Any = None
    sock: socket.socket | None = None
    log: Path | None = None
    guard: Any = None
    k: dict[str, int] = field(default_factory=dict)        # calls per timed request, per role
    kinds: dict[str, str] = field(default_factory=dict)    # role -> how its file was loaded
    measured: dict[str, Path] = field(default_factory=dict)  # role -> the file the measuring server loaded
    reported_sha: dict[str, str] = field(default_factory=dict)  # role -> weights hash its own code reported
    cpu: int | None = None                                 # the core its measuring server is timed on
    cpu_mark: float = 0.0                                  # its sandbox's CPU seconds at the last check
    cpu_busy: float = 0.0                                  # CPU seconds inside its own requests since then


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
    """Copy the student's model files into a folder of their own (what the judge sends their measuring sandbox,
    and what a converting sandbox reads)."""
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
    """The judge's staging folder: the server and protocol (the sandbox's only code of tito's), the
    course baseline, and the images accuracy is judged on, the public test split or the instructor's
    `data_file` (inputs go to the sandboxes; labels stay here)."""
    import torch

    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split

    lib = work / "lib"
    lib.mkdir(parents=True)
    here = Path(__file__).resolve().parent
    shutil.copyfile(here / "server.py", lib / "server.py")
    shutil.copyfile(Path(protocol.__file__), lib / "protocol.py")
    course = work / "course"
    course.mkdir()
    base = default_digits_model()
    X, y = load_digits_split("test")
    buf = io.BytesIO()
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(base, X[:1], check_trace=False), buf)  # TorchScript, as every model runs
    (course / "baseline.pt").write_bytes(buf.getvalue())
    for d in (work, lib, course, work / "students"):
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
    for f in (lib / "server.py", lib / "protocol.py", course / "baseline.pt"):
        f.chmod(0o444)
    out = {"X": X.numpy(), "y": y.numpy(), "classes": int(y.max()) + 1,
           "pkg": Path(sys.modules["tinytorch"].__file__).resolve().parent,
           "source": f"the public digits test split ({len(y)} images), which anyone can download: a model that "
                     "memorised the public digits cannot be told from one that learned (only an instructor's held-out "
                     "set, judge --data FILE, can)"}
    if data_file is not None:
        out["X"], out["y"] = load_private_data(data_file, out["classes"])
        out["source"] = f"the instructor's held-out set {Path(data_file).name} ({len(out['y'])} images)"
    return out


# ---- one student's sandbox --------------------------------------------------------------------

def start(st: Student, work: Path, data: dict, bwrap: str | None, converting: bool = False) -> None:
    """Start the student's sandboxed server (`converting`: the one that may unpickle). The sandbox dies
    with the thread that started it (bwrap --die-with-parent): start the long-lived one from the main
    thread, a converter from the thread that also stops it."""
    judge_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # the measuring sandbox sees no model file: the judge sends the bytes (`send_files`), so a model cannot read
    # weights it does not hold (the course baseline's, or its own file's uncounted records) while it runs; only
    # the converter, which runs no timing, reads the student's files where they are staged
    mounts = {"lib": work / "lib", "tinytorch": data["pkg"], **({"files": st.stage} if converting else {})}
    env = {"PYTHONPATH": "{lib}" + os.pathsep + "{tinytorch}/..", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    spec = sandbox.SandboxSpec(["{python}", "-s", "-P", "{lib}/server.py", str(server_end.fileno())]
                               + (["--trace"] if converting else []), mounts, env,
                               limits=data.get("limits") or sandbox.Limits(**LIMITS))
    st.log = st.stage.parent / f"{st.stage.name}.log"
    name = f"tito-olympics-{os.getpid()}-{st.stage.name}{'-trace' if converting else ''}"
    st.guard = limits_mod.Guard(name, 3072, 64, cpus=1.0) if bwrap else None
    # every measuring sandbox on the same core (the last this process may use; its server moves there once
    # its imports are done, see wait_ready): students are timed on one core, whichever the scheduler would
    # have picked (the two cores here timed one model 1.6x apart)
    st.cpu = None if converting else max(os.sched_getaffinity(0))
    with open(st.log, "ab") as log:
        st.proc = sandbox.start(spec, bwrap, pass_fds=(server_end.fileno(),), stdout=log, stderr=log,
                                cgroups=tuple(st.guard.groups) if st.guard else ())
    server_end.close()
    st.sock = judge_end


def wait_ready(st: Student) -> None:
    """Wait until the sandbox's server has imported torch and the course package, then move it to its core
    (`st.cpu`). Every sandbox starts at once, so this takes a while in a big class (12 of them pinned to one
    core from the start took 29.6 s beside a CPU hog, past the 20 s a test gave each load); a student's time
    limits start after it."""
    try:
        call(st, {"op": "ready", "cpu": st.cpu}, STARTUP_S, "starting the sandbox")
    except StudentError as e:
        raise StudentError(f"{e} (before reading any of the student's files: the machine may be overloaded; "
                           f"run the judge again with --resume)") from None


def load(st: Student, work: Path, data: dict, bwrap: str | None) -> None:
    """Have the student's measuring server (started, `wait_ready`) load both models (baseline: theirs or the
    course's). A file that needs its own code is first converted to TorchScript by a converting sandbox of its own."""
    files = sandbox.inside_path("files", st.stage, bwrap is not None)  # where the converter finds them
    # the course's baseline is every student's denominator; a student's own baseline is loaded beside it, to
    # be checked against it (by weights) and reported apart
    models = {OWN.get(role, role): f"{files}/{role}{p.suffix.lower()}" for role, p in st.files.items()}
    st.measured = {OWN.get(role, role): st.stage / f"{role}{p.suffix.lower()}" for role, p in st.files.items()}
    st.measured["baseline"] = work / "course" / "baseline.pt"
    send_files(st, st.measured, data)
    reply = call(st, {"op": "load", "models": {r: p.name for r, p in st.measured.items()},
                      "sample": list(data["X"].shape[1:]), "classes": data["classes"]},
                 data["timeouts"]["load"], "loading the model files")
    st.kinds = dict(reply["kinds"])
    needs = [r for r in reply.get("needs_code", []) if r in models]
    if needs:
        conv = Student(st.name, st.folder, stage=st.stage)
        try:
            start(conv, work, data, bwrap, converting=True)
            wait_ready(conv)
            call(conv, {"op": "data", "X": protocol.encode(data["X"][:1], refs=None)}, 60, "sending a test image")
            for role in needs:
                got = call(conv, {"op": "trace", "path": models[role]}, data["timeouts"]["load"],
                           f"loading the {role} model file (converted to TorchScript)")
                archive = decode_reply(got.get("torchscript"), {"$b"}, f"the {role} model's TorchScript")
                if not isinstance(archive, bytes) or len(archive) > MAX_FILE_MB * 2**20:
                    raise StudentError(f"{role} model: its conversion to TorchScript sent no archive")
                traced = st.stage / f"{role}.traced.pt"
                traced.write_bytes(archive)
                traced.chmod(0o444)
                st.measured[role] = traced
                sha, kind = got.get("sha256"), got.get("kind")
                if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha):  # reported by the file's own code
                    st.reported_sha[role] = sha
                st.kinds[role] = (f"{kind}, measured as its TorchScript trace" if kind in
                                  ("state dict of DigitsCNN", "pickled module") else "converted to TorchScript")
        finally:
            stop(conv)
        send_files(st, {r: st.measured[r] for r in needs}, data)
        reply = call(st, {"op": "load", "models": {r: st.measured[r].name for r in needs}}, data["timeouts"]["load"],
                     "loading the converted models")
        if reply.get("needs_code"):
            raise StudentError("its converted TorchScript did not load")

    images = fresh_inputs(data["X"], 0, data["noise_seed"])
    call(st, {"op": "data", "X": protocol.encode(images, refs=None)}, 60, "sending the test inputs")


OWN = {"baseline": "own_baseline"}  # a student's baseline file: checked against the course's, never a denominator

FILE_PART = 32 * 2**20  # bytes of a model file per message (base64 makes it 4/3 of that, under protocol.MAX_FRAME)


def send_files(st: Student, paths: dict[str, Path], data: dict) -> None:
    """Send each model file's bytes to the student's measuring server, in parts, for it to load from memory."""
    for role, path in paths.items():
        raw = path.read_bytes()
        for i in range(0, max(len(raw), 1), FILE_PART):
            call(st, {"op": "file", "role": role, "data": protocol.encode(raw[i:i + FILE_PART], refs=None)},
                 data["timeouts"]["load"], f"sending the {role.replace('_', ' ')} model file")


def stop(st: Student) -> None:
    if st.sock is not None:
        try:
            st.sock.settimeout(1)
            protocol.send(st.sock, {"op": "bye"})
        except OSError:
            pass
        st.sock.close()
        st.sock = None
    if st.proc is not None:
        from tito.isolation import process

        process.kill_group(st.proc)
        st.proc.wait()
        st.proc = None
    if st.guard is not None:
        st.guard.close()
        st.guard = None


def _wait_for_end(st: Student, seconds: float = 1.0) -> None:
    import subprocess

    try:
        if st.proc is not None:
            st.proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:  # the channel broke but the sandbox lives on: stop() ends it
        pass


def _log_tail(st: Student) -> str:
    try:
        text = st.log.read_bytes()[-2000:].decode("utf-8", "replace") if st.log else ""
    except OSError:
        return ""
    lines = [ln for ln in clean_text(text).splitlines() if ln.strip()]
    return f" (its last output: {lines[-1][:300]})" if lines else ""


def call(st: Student, msg: dict, timeout: float, doing: str) -> dict:
    """One request to the student's server; StudentError (the student's fault) on any failure."""
    if st.sock is None:
        raise StudentError(f"{doing}: the sandbox is not running")
    try:
        st.sock.settimeout(timeout)
        protocol.send(st.sock, msg)
        reply = protocol.recv(st.sock)
    except (socket.timeout, TimeoutError):
        raise StudentError(f"{doing}: no answer within {timeout:g} s (the model hangs or is far too slow)") from None
    except (EOFError, ConnectionError, OSError):
        _wait_for_end(st)  # its last words reach the log before it is read
        raise StudentError(f"{doing}: the sandbox ended (the file's code exited, crashed or hit a limit)"
                           f"{_log_tail(st)}") from None
    except protocol.ProtocolError as e:
        raise StudentError(f"{doing}: a malformed answer ({e})") from None
    if not reply.get("ok"):
        raise StudentError(f"{doing}: {clean_text(str(reply.get('error')))[:500]}")
    return reply


ARRAY_TAGS = {"$np"}
STATE_TAGS = {"$d", "$pt", "$qt", "$t", "$dt", "$f"}  # a dict of tensors, tuples of them, dtypes, non-finite floats


def _check_tags(value: Any, allowed: set[str], depth: int = 0) -> None:
    """Refuse any tag outside `allowed` before decoding (sets, dicts with odd keys, named tuples, ...
    cost the judge time and memory and carry nothing a model's outputs or weights need)."""
    if depth > 8:
        raise protocol.ProtocolError("nested deeper than a state dict is")
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


def measure_static(st: Student, data: dict) -> dict:
    """Outputs on the test inputs (accuracy here, from labels the sandbox never sees), the weights
    (hash, flattened for the similarity check) and the size of both models."""
    import numpy as np

    from tinytorch.benchmarking.olympics import model_file_bytes, state_dict_sha256
    from tito.olympics.copies import flat_weights, layer_signatures, row_signatures

    n = len(data["y"])
    out = {"correct": {}, "size_bytes": {}, "size_method": {}, "sha256": {}, "reported_sha256": st.reported_sha,
           "kinds": st.kinds}
    arrays = {}
    for role in ("baseline", "optimized") + (("own_baseline",) if "own_baseline" in st.measured else ()):
        what = f"{role.replace('_', ' ')} model"
        got = call(st, {"op": "predict", "role": role}, data["timeouts"]["predict"], f"running the {what}")
        y_hat = checked_outputs(got.get("outputs"), n, data["classes"], what, "test image")
        out["correct"][role] = (y_hat.argmax(axis=1) == data["y"]).astype(int).tolist()
        got = call(st, {"op": "state", "role": role}, 120, f"reading the {what}'s weights")
        state = decode_reply(got.get("state"), STATE_TAGS, f"{what}'s weights")
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise StudentError(f"{what}: its state dict is not a mapping of names")
        try:
            out["sha256"][role] = state_dict_sha256(state)
            weights = (flat_weights(state), layer_signatures(state), row_signatures(state)) if role == "optimized" else None
        except (RuntimeError, ValueError, TypeError) as e:
            raise StudentError(f"{what}: unusable weights ({type(e).__name__}: {str(e)[:200]})") from None
        out["size_bytes"][role], out["size_method"][role] = model_file_bytes(st.measured[role])
        if role == "optimized":
            arrays["weights"], arrays["outputs"] = weights, y_hat.astype(np.float64)
    return out, arrays


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


def timed_answers(st: Student, role: str, data: dict, pass_correct: list[int], tally: dict) -> None:
    """The outputs of every call timed since the last fetch (not timed itself), each checked as the accuracy
    pass's are and paired with the accuracy pass's answer on the same image: `tally[role]` counts
    [both right, only the accuracy pass right, only the timed call right, neither] (the timed work is the
    judged work: a model that changes what it computes once timed shows here)."""
    import numpy as np

    got = call(st, {"op": "outputs"}, 60, f"reading the {role} model's timed answers")
    index = decode_reply(got.get("index"), ARRAY_TAGS, f"the {role} model's timed answers")
    if not isinstance(index, np.ndarray) or index.ndim != 1 or index.dtype.kind not in "iu":
        raise StudentError(f"{role} model: its timed answers came without their images")
    if index.size == 0:
        return
    y_hat = checked_outputs(got.get("outputs"), index.size, data["classes"], f"{role} model (timed calls)", "timed call")
    if index.min() < 0 or index.max() >= len(data["y"]):
        raise StudentError(f"{role} model: its timed answers name images that were not sent")
    timed_ok = y_hat.argmax(axis=1) == data["y"][index]
    pass_ok = np.asarray(pass_correct, dtype=bool)[index]
    t = tally.setdefault(role, [0, 0, 0, 0])
    for i, (a, b) in enumerate(((True, True), (True, False), (False, True), (False, False))):
        t[i] += int(np.sum((pass_ok == a) & (timed_ok == b)))
    # per image, for the judged accuracy (claims.timed_correct): what the timed calls answered on it
    right = tally.setdefault(f"{role}:right", [0] * len(data["y"]))
    seen = tally.setdefault(f"{role}:seen", [0] * len(data["y"]))
    for i, ok in zip(index.tolist(), timed_ok.tolist()):
        seen[i] += 1
        right[i] += int(ok)


# ---- timing -----------------------------------------------------------------------------------

def timed(st: Student, role: str, start: int, count: int, timeout: float) -> float:
    """Seconds for one request of `count` single-image calls, through the timing core (`time_callable`:
    its clock and its block calibration, one sample), timed here around the request. The calibration's
    requests and the sample's each take the next `count` images from `start`: none is seen twice."""
    from tinytorch.profiling.timing import time_callable

    starts = itertools.count(start, max(count, 1))

    def request() -> None:
        call(st, {"op": "time", "role": role, "start": next(starts), "count": count}, timeout, f"timing the {role} model")

    return time_callable(request, warmup=0, samples=1).per_call_ns[0] / 1e9


def calibrate(st: Student, role: str, target_s: float, timeout: float, most: int, answers=None) -> int:
    """Calls per request so that one request takes about `target_s` (its first requests warm the model
    up), at most `most` images; each step's time is the fastest of three (a busy machine's stalls only add).
    `answers()`, after each step: the judge reads (and checks) what the timed calls answered."""
    answers = answers or (lambda: None)
    k, elapsed = 1, timed(st, role, 0, 1, timeout)
    answers()
    for _ in range(20):
        elapsed = min(timed(st, role, 0, k, timeout) for _ in range(3))
        answers()
        if elapsed >= target_s or k >= most:
            break
        k = min(most, max(k * 2, math.ceil(k * 1.2 * target_s / max(elapsed, 1e-6))))
    return k


NOISE = 0.08  # of the images' spread: digits' pixels sit on a 1/16 grid; 0.08 x 0.37 = 0.03, half a grid step


def fresh_inputs(X, round_index: int, seed: int = 0):
    """The test images with a noise of their own for each round (NOISE of the images' spread, the same for
    every student): a model that keeps answers by image (a cache, a lookup table of the public test split,
    keyed by the images rounded back to the pixels' 1/16 grid: about 20 of 64 pixels round elsewhere) meets
    images it has not seen; a real model's answers barely change (the course's models: within 0.3 points).
    The judge draws `seed` secretly for each run (kept in its state for --resume): no student can compute a
    round's images ahead of time."""
    import numpy as np

    rng = np.random.default_rng([seed, 1_000_003 + round_index])
    return (X + rng.normal(0, NOISE * float(X.std()), size=X.shape)).astype(X.dtype)


def proc_tree(pid: int, read: str):
    """(pid, text of /proc/PID/`read`) for process `pid` and every process below it, read from /proc (the
    sandbox seen from outside); a process that ends or hides while read is passed over."""
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            text = Path(f"/proc/{p}/{read}").read_text()
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
            continue
        yield p, text


def tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by process `pid` and every process below it (all their threads, and the children
    they reaped)."""
    total = 0
    for _, stat in proc_tree(pid, "stat"):
        fields = stat.rsplit(")", 1)[1].split()
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


IDLE_CPU = (0.03, 0.02)  # a sandbox may use, outside its own requests, 30 ms + 2% of the wall time between checks


def own_request(st: Student, fn):
    """Run `fn` (one or more requests to `st`'s sandbox), counting the CPU its sandbox uses meanwhile as its own."""
    before = tree_cpu_s(st.proc.pid) if st.proc is not None else 0.0
    try:
        return fn()
    finally:
        if st.proc is not None:
            st.cpu_busy += tree_cpu_s(st.proc.pid) - before


def idle_cpu_check(st: Student, wall_s: float) -> str | None:
    """Why `st`'s sandbox is rejected for working outside its own requests since the last check (None: quiet);
    starts the next check. Its CPU while others are timed would slow them (a TorchScript fork spinning
    on the measuring core doubled their latencies)."""
    now = tree_cpu_s(st.proc.pid) if st.proc is not None else st.cpu_mark
    idle, st.cpu_mark, st.cpu_busy = now - st.cpu_mark - st.cpu_busy, now, 0.0
    limit = IDLE_CPU[0] + IDLE_CPU[1] * wall_s
    if idle > limit:
        return (f"its sandbox used {idle:.2f} s of CPU outside its own requests in {wall_s:.1f} s (at most "
                f"{limit:.2f} s allowed): work left running between requests (threads, forked tasks) would slow "
                "the other students' timed calls")
    return None


def ipc_overhead_s(st: Student) -> float:
    """The median time of an empty request (the timing core, 15 samples): what each timed request adds."""
    from tinytorch.profiling.timing import time_callable

    samples = time_callable(lambda: call(st, {"op": "time", "role": "optimized", "start": 0, "count": 0}, 10,
                                         "timing an empty request"), warmup=1, samples=15)
    return statistics.median(samples.per_call_ns) / 1e9


# ---- the run ----------------------------------------------------------------------------------

def _key(students: list[Student], event: str, rounds: int, target_ms: float, seed: int, data: dict) -> str:
    h = hashlib.sha256(json.dumps([STATE_VERSION, event, rounds, target_ms, seed]).encode())
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
                timeouts: dict[str, float] | None = None, data_file=None, memory_mb: float = MEMORY_MB) -> dict[str, Any]:
    """Judge every student folder of `submissions_dir` for `event`; write the leaderboard, per-student
    JSON and the class plot into `output_dir`; return {"board", "rejected", "students", "pairs"}.
    `memory_mb`: the judge's memory budget (settings.ini's olympics_memory_mb), which sets the groups' size.
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
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, (int, float)) or not memory_mb > 0:
        raise TitoError(f"memory_mb: expected a positive number of MiB, got {memory_mb!r}", code=2)
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
                     limits=fitted.limits)


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
              limits: sandbox.Limits | None = None) -> dict[str, Any]:
    """Stage, load, measure and time the students whose files were found, in groups that fit `memory_mb`
    (`_groups`), each sandbox with `limits` (default LIMITS); write the report into `out` (claims checked with
    `tolerance`, default the library's JUDGE_TOLERANCE)."""
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
        key = _key(valid, ev.value, rounds, target_ms, seed, data)
        saved = json.loads(state_path.read_text()) if resume and state_path.is_file() else None
        if saved is not None and saved.get("key") != key:
            print("--resume: the submissions or the settings changed since the saved run; judging from the start",
                  file=sys.stderr)
            saved = None
        state = saved or {"key": key, "static": {}, "rejected": {}, "pairs": [], "rounds": [], "overhead_s": {},
                          "noise_seed": secrets.randbits(62)}  # drawn per run: the rounds' images cannot be foreseen
        data["noise_seed"] = state.get("noise_seed", 0)
        rejected.update(state["rejected"])
        valid = [st for st in valid if st.name not in state["rejected"]]
        arrays: dict[str, dict] = {}  # the optimized models' weights and outputs, for the copy checks across groups
        for group, index, count in _groups(valid, state, memory_mb, jobs, state_path):
            alive = [st for st in group if st.name not in rejected]
            done = _group_rounds(alive, state)
            if done >= rounds or not alive:
                continue
            label = f" (group {index + 1} of {count})" if count > 1 else ""
            try:
                alive = _load_and_measure(alive, work, data, bwrap, jobs, state, rejected, state_path, arrays, label)
                _rounds(alive, rounds, target_ms / 1000, seed, state, rejected, state_path, data["timeouts"]["time"],
                        data, done, label)
                _note_footprint(state, alive)  # after its rounds, as large as a sandbox gets: sizes the next group
            finally:
                for st in group:
                    stop(st)
        return _report(o, ev, [st for st in valid if st.name not in rejected], state, rejected, out, tolerance,
                       data["source"])
    finally:
        for st in valid:
            stop(st)
        shutil.rmtree(work, ignore_errors=True)


# ---- memory: the class in groups -------------------------------------------------------------


def tree_pss_mb(pid: int) -> float:
    """Proportional set size (MiB) of process `pid` and every process below it (smaps_rollup: a page shared by
    n processes counts 1/n to each, so a class's torch libraries count once in all)."""
    return sum(int(line.split()[1]) for _, rollup in proc_tree(pid, "smaps_rollup")
               for line in rollup.splitlines() if line.startswith("Pss:")) / 1024


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


def _load_and_measure(valid, work, data, bwrap, jobs, state, rejected, state_path, arrays=None,
                      label: str = "") -> list[Student]:
    """Start every student's sandbox of a group (`jobs` at a time) and take the measurements that need no
    clock; `arrays` gathers the optimized models' weights and outputs across groups (the copy checks)."""
    from tinytorch.benchmarking.digits import default_digits_model
    from tinytorch.benchmarking.results import model_state
    from tito.olympics.copies import row_signatures, similar_models

    arrays = {} if arrays is None else arrays

    def one(st: Student) -> None:
        try:
            load(st, work, data, bwrap)
            if st.name not in state["static"]:
                state["static"][st.name], arrays[st.name] = measure_static(st, data)
        except Exception as e:  # noqa: BLE001 - a student's file or answers, never the judge's crash
            why = str(e) if isinstance(e, StudentError) else f"the judge could not use its answers ({type(e).__name__}: {str(e)[:200]})"
            rejected[st.name] = state["rejected"][st.name] = why
            stop(st)

    for st in valid:
        start(st, work, data, bwrap)
    for st in valid:  # all of them up before any is loaded: their imports no longer share its core with a load
        try:
            wait_ready(st)
        except StudentError as e:
            rejected[st.name] = state["rejected"][st.name] = str(e)
            stop(st)
    run_tasks(one, [st for st in valid if st.name not in rejected], lambda st, _: st.name in rejected, workers=jobs,
              show_progress=sys.stderr.isatty(), label="loading models" + label)
    alive = [st for st in valid if st.name not in rejected]
    if arrays:  # over every group measured in this run; a saved run's pairs of students not measured again stay
        state["pairs"] = [p for p in state["pairs"] if not set(p["students"]) & set(arrays)] + similar_models(
            {s: (state["static"][s]["sha256"]["optimized"], *a["weights"]) for s, a in arrays.items()},
            {s: a["outputs"] for s, a in arrays.items()},
            reference=row_signatures(model_state(default_digits_model())))  # the course's, built here
    _save(state_path, state)
    return alive


def _calibrate_all(alive: list[Student], target_s: float, timeout: float, most: int, state: dict, reject, answers,
                   tallies: dict) -> bool:
    """Calls per request for every student (`calibrate`) and the empty request's time; True when a sandbox was
    rejected for working outside its own requests meanwhile (the others' counts may be skewed)."""
    import time

    t0 = time.perf_counter()
    for st in list(alive):
        if st.proc is None:
            continue
        try:
            # a timed request's sample and the timing core's two calibration blocks each get their own images
            # one count for both models: the per-request overhead (the channel, the server's loop) then adds the
            # same per call to both sides of a ratio, and a slow spell while calibrating one cannot leave it at k = 1
            tally = tallies.setdefault(st.name, {})
            k = own_request(st, lambda: max(calibrate(st, role, target_s, timeout, most, answers(st, role, tally))
                                            for role in ("baseline", "optimized")))
            st.k = dict.fromkeys(("baseline", "optimized"), k)
            state.setdefault("calls", {})[st.name] = k
            state["overhead_s"][st.name] = own_request(st, lambda: ipc_overhead_s(st))
        except StudentError as e:
            reject(st, str(e))
    wall, noisy = time.perf_counter() - t0, False
    for st in alive:
        if st.proc is not None and (why := idle_cpu_check(st, wall)):
            reject(st, why)
            noisy = True
    return noisy


def _rounds(alive: list[Student], rounds: int, target_s: float, seed: int, state: dict, rejected: dict,
            state_path: Path, timeout: float, data: dict, done: int = 0, label: str = "") -> None:
    """Interleaved rounds: each (student, model) pair once per round, in a fresh random order, on
    images of the round's own (`fresh_inputs`). Every timed call's answer is read back and paired with the
    accuracy pass's (`timed_answers`); a sandbox that uses CPU outside its own requests is rejected and the
    round it may have slowed is measured again (`idle_cpu_check`). `done`: the rounds this group (`alive`)
    has already finished; every group's rounds see the same images, round by round."""
    import time

    import numpy as np

    X = data["X"]
    tallies = state.setdefault("timed", {})

    def reject(st: Student, why: str) -> None:
        rejected[st.name] = state["rejected"][st.name] = why
        stop(st)

    def answers(st: Student, role: str, tally: dict):
        return lambda: timed_answers(st, role, data, state["static"][st.name]["correct"][role], tally)

    for st in alive:
        st.cpu_mark, st.cpu_busy = (tree_cpu_s(st.proc.pid) if st.proc is not None else 0.0), 0.0
    for _ in range(3):  # calibrated again when a busy neighbour was found: it may have skewed everyone's k
        if not _calibrate_all(alive, target_s, timeout, len(X) // 3, state, reject, answers, tallies):
            break
    alive[:] = [st for st in alive if st.name not in rejected]
    _save(state_path, state)
    rng = np.random.default_rng(seed + len(state["rounds"]))
    total = rounds
    first = len(state["rounds"]) - done  # this group's rounds are state["rounds"][first:]
    mine = os.sched_getaffinity(0)
    if len(mine) > 1:  # the judge off the core its sandboxes are timed on (restored when the rounds end)
        os.sched_setaffinity(0, mine - {max(mine)})
    bar = progress_bar(sys.stderr.isatty(), "timing rounds" + label)
    if bar is not None:
        bar.start()
        task = bar.add_task("timing rounds", total=total, completed=done, failed=len(rejected))
    try:
        while len(state["rounds"]) - first < rounds and alive:
            t0 = time.perf_counter()
            images = protocol.encode(fresh_inputs(X, len(state["rounds"]) - first + 1, data["noise_seed"]), refs=None)
            for st in list(alive):  # not timed: the round's images, before any model of the round runs
                try:
                    own_request(st, lambda: call(st, {"op": "data", "X": images}, 60, "sending the round's images"))
                except StudentError as e:
                    reject(st, str(e))
            alive[:] = [st for st in alive if st.name not in rejected]
            pairs = [(st, role) for st in alive for role in ("baseline", "optimized")]
            this: dict[str, dict[str, float]] = {}
            tally: dict[str, dict] = {}  # this round's answers: kept only with the round
            for i in rng.permutation(len(pairs)):
                st, role = pairs[i]
                if st.name in rejected:
                    continue
                k = st.k[role]
                try:
                    seconds = own_request(st, lambda: timed(st, role, int(rng.integers(0, 1 << 30)), k, timeout))
                    own_request(st, answers(st, role, tally.setdefault(st.name, {})))
                except StudentError as e:
                    reject(st, str(e))
                    continue
                this.setdefault(st.name, {})[role] = 1000 * seconds / k
            wall = time.perf_counter() - t0
            noisy = [(st, why) for st in alive if st.name not in rejected and (why := idle_cpu_check(st, wall))]
            for st, why in noisy:
                reject(st, why)
            alive[:] = [st for st in alive if st.name not in rejected]
            if noisy:  # it may have slowed everyone's timed calls in this round: the round is measured again
                continue
            state["rounds"].append({s: v for s, v in this.items() if s not in rejected})
            for name, roles in tally.items():
                for role, counts in roles.items():
                    t = tallies.setdefault(name, {}).setdefault(role, [0, 0, 0, 0])
                    t[:] = [a + b for a, b in zip(t, counts)]
            _save(state_path, state)
            if bar is not None:
                bar.update(task, completed=len(state["rounds"]) - first, failed=len(rejected))
    finally:
        os.sched_setaffinity(0, mine)
        if bar is not None:
            bar.stop()


def _report(o, ev, judged: list[Student], state: dict, rejected: dict, out: Path,
            tolerance: dict[str, float] | None = None, source: str = "") -> dict[str, Any]:
    """Figures, claims, flags and the leaderboard from the measurements; everything written atomically."""
    from tinytorch.benchmarking.results import write_atomic, write_json
    from tito.olympics.leaderboard import judged_leaderboard

    entries, records = {}, {}
    same = _same_model_flags(state["pairs"])
    for st in judged:
        try:
            entries[st.name], records[st.name] = _student_report(o, ev, st, state, same.get(st.name, []),
                                                                 tolerance or o.JUDGE_TOLERANCE)
        except Exception as e:  # noqa: BLE001 - a submission's content, never the judge's crash
            rejected[st.name] = f"its submission could not be checked ({type(e).__name__}: {str(e)[:200]})"
    board = judged_leaderboard(entries, ev, rejected, source=source)
    write_atomic(out / "leaderboard.md", board["markdown"])
    write_atomic(out / "leaderboard.csv", board["csv"])
    (out / "students").mkdir(exist_ok=True)
    for name, rec in records.items():
        write_json(out / "students" / f"{name}.json", {**rec, "rank": board["ranks"].get(name)})
    write_json(out / "rejected.json", rejected)
    _plot(entries, out / "class.png", ev)
    return {"board": board, "rejected": rejected, "students": records, "pairs": state["pairs"]}


def _same_model_flags(pairs: list[dict]) -> dict[str, list[str]]:
    """student -> one flag per kind of likeness: "same model as carol, dave (identical weights (same sha256))"."""
    kinds: dict[str, dict[str, list[str]]] = {}
    for p in pairs:
        a, b = p["students"]
        why = p["why"][0].split(" (relative")[0]  # the strongest reason; the per-student JSON keeps them all
        kinds.setdefault(a, {}).setdefault(why, []).append(b)
        kinds.setdefault(b, {}).setdefault(why, []).append(a)
    return {s: [f"same model as {', '.join(sorted(others))} ({why})" for why, others in k.items()] for s, k in kinds.items()}


def _student_report(o, ev, st: Student, state: dict, same: list[str], tolerance: dict[str, float]) -> tuple[dict, dict]:
    """One student's figures, claims and flags: (leaderboard entry, per-student record)."""
    from tito.olympics.claims import check_claims, timed_consistency, timed_correct

    static = state["static"][st.name]
    rounds = [r[st.name] for r in state["rounds"] if st.name in r and len(r[st.name]) == 2]
    tally = state.get("timed", {}).get(st.name, {})
    # the judged accuracy is the timed calls' (the timed work is the judged work): per image, the answer most
    # of its timed calls gave; the accuracy pass stands for an image no timed call saw
    correct = {**static["correct"], **{role: timed_correct(static["correct"][role], tally.get(f"{role}:right"),
                                                           tally.get(f"{role}:seen")) for role in ("baseline", "optimized")}}
    record = {"round_mean_ms": {role: [r[role] for r in rounds] for role in ("baseline", "optimized")},
              "correct": correct, "size_bytes": static["size_bytes"]}
    figures = o.judged_figures(record, ev)
    # a pickled module's hash comes from its own code (the trace has other keys): it checks the file, not a score
    hashes = {role: static.get("reported_sha256", {}).get(role) or static["sha256"][role] for role in static["sha256"]}
    own = "own_baseline" in static["sha256"]
    hashes["baseline"] = hashes.pop("own_baseline", hashes["baseline"])  # the submission's claim is about its own file
    # `submit` times both models as the judge does (TorchScript, one thread, interleaved rounds), but on the
    # student's machine: a class judged on another machine keeps JUDGE_TOLERANCE's floor (before submit timed
    # TorchScript, an honest int8 claim was 2.1x the judged speed-up); `verify` passes the submission's own
    # tolerance. Either way the claim's interval, not its point, must lie above the judged interval
    claims = check_claims(st.doc, figures, hashes, tolerance=tolerance)
    validation = o.validate_submission(st.submission)
    flags = [f"claim contradicted: {c['claim']} claimed {_fmt(c['claimed'])}, judged {_fmt(c['judged'])}"
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
    eligible = all(c["passed"] for c in checks)
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
                   "accuracy": sum(static["correct"]["own_baseline"]) / len(static["correct"]["own_baseline"]),
                   "compression_ratio_vs_own": static["size_bytes"]["own_baseline"] / static["size_bytes"]["optimized"],
                   "how": "its weights are the course model's: the same denominator" if accepted else
                          "not the course model (its weights differ): reported here only; every ranked figure is "
                          "against the course baseline the judge measured"}
        figures["own_baseline"] = own_rec
        if not accepted:
            flags.append(f"own baseline is not the course model (weights differ; {own_rec['size_bytes']:,} bytes, "
                         f"accuracy {own_rec['accuracy']:.1%}): figures are against the course baseline")
    techniques = st.doc.get("techniques") if isinstance(st.doc.get("techniques"), list) else []
    entry = {"figures": figures, "techniques": [clean_text(str(t))[:200] for t in techniques[:20]],
             "flags": flags, "eligible": eligible, "size_bytes": static["size_bytes"]["optimized"]}
    rec = {"student": st.name, "folder": str(st.folder), "event": ev.value, "figures": figures, "claims": claims,
           "constraints": checks, "flags": flags, "measurements": record, "static": static,
           "same_model": [p for p in state["pairs"] if st.name in p["students"]],
           "timing": {"rounds": len(rounds), "ipc_overhead_ms": 1000 * state["overhead_s"].get(st.name, 0.0),
                      "calls_per_request": state.get("calls", {}).get(st.name),
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
    ax.set_ylabel("top-1 accuracy on the test split, judged")
    ax.set_title(f"TorchPerf Olympics, {ev.value}: the class (stars: the Pareto set)")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
