"""`tito olympics judge`: measure every student's submission here, in one run, and rank the class.

    python3 -m tito olympics judge SUBMISSIONS_DIR --event EVENT --output-dir OUT [--jobs N] [--rounds R]

`SUBMISSIONS_DIR/<student>/` holds `submission.json` (as `olympics submit` writes it) and the model file
it was made from (the file `submit` recorded, or the folder's only model file), and a baseline file
where the student used their own (else the course's digits CNN).

What is trusted where:
- a student's files are copied (never followed through a link) into a folder of their own and loaded
  only by `tito.olympics.server`, in a bubblewrap sandbox per student: no network, read-only system,
  no view of the other students, the submissions or the course repository, memory/process/CPU limits;
- from the sandbox the judge takes data only (tito.grading.protocol: arrays and tensors as raw bytes,
  never pickle): the outputs on the test inputs (labels never leave the judge), the weights;
- latency is timed by the judge around each request (k calls of one sample), so code in a file cannot
  touch the clock; every (student, model) pair runs once per round in a fresh random order.
Scores, ranks, claims and same-model pairs: `tito.olympics.scoring`, on the library's one significance rule.
"""
from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito.config import TitoError
from tito.grading import limits as limits_mod
from tito.grading import protocol, sandbox
from tito.grading.pool import progress_bar, run_tasks
from tito.grading.sanitize import clean_text

MODEL_SUFFIXES = (".pt", ".pth", ".ts", ".pt2", ".onnx")
MAX_FILE_MB = 512
LIMITS = dict(memory_mb=6144, processes=64, cpu_seconds=3600, file_mb=8, tmp_mb=64)
TIMEOUTS = {"load": 120.0, "predict": 300.0, "time": 30.0}  # seconds a sandbox may take to answer
STARTUP_S = 600.0  # for the sandbox's own imports, before any student file is read: the judge's time, not theirs
STATE_VERSION = 1


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


def student_name(folder_name: str) -> str:
    """The name a student folder is shown and filed under: itself when it is plain ([A-Za-z0-9._-], at
    most 80 characters), else a cleaned form with a hash of the original (two folders never collide,
    and no control character, markdown or HTML from a name reaches a report or the terminal)."""
    if re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,79}", folder_name):
        return folder_name
    digest = hashlib.sha256(folder_name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', folder_name)[:60].lstrip('.')}-{digest}"


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
    for role, p in st.files.items():
        if p.suffix.lower() == ".onnx":
            raise StudentError(f"{role} model {p.name!r}: ONNX files are not judged yet; submit TorchScript "
                               "(torch.jit.save) or a state dict")


def stage(st: Student, work: Path, index: int) -> None:
    """Copy the student's model files into a folder of their own (what their sandbox sees)."""
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


def prepare_work(work: Path) -> dict[str, Any]:
    """The judge's staging folder: the server and protocol (the sandbox's only code of tito's), the
    course baseline, and the test split (inputs go to the sandboxes; labels stay here)."""
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
    return {"X": X.numpy(), "y": y.numpy(), "classes": int(y.max()) + 1,
            "pkg": Path(sys.modules["tinytorch"].__file__).resolve().parent}


# ---- one student's sandbox --------------------------------------------------------------------

def start(st: Student, work: Path, data: dict, bwrap: str | None, converting: bool = False) -> None:
    """Start the student's sandboxed server (`converting`: the one that may unpickle). The sandbox dies
    with the thread that started it (bwrap --die-with-parent): start the long-lived one from the main
    thread, a converter from the thread that also stops it."""
    judge_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    mounts = {"lib": work / "lib", "tinytorch": data["pkg"], "files": st.stage, "course": work / "course"}
    env = {"PYTHONPATH": "{lib}" + os.pathsep + "{tinytorch}/..", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    spec = sandbox.SandboxSpec(["{python}", "-s", "-P", "{lib}/server.py", str(server_end.fileno())]
                               + (["--trace"] if converting else []), mounts, env, limits=sandbox.Limits(**LIMITS))
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
    sandboxed = bwrap is not None
    files, course = (sandbox.inside_path(n, d, sandboxed) for n, d in (("files", st.stage), ("course", work / "course")))
    models = {role: f"{files}/{role}{p.suffix.lower()}" for role, p in st.files.items()}
    models.setdefault("baseline", f"{course}/baseline.pt")
    st.measured = {role: st.stage / f"{role}{p.suffix.lower()}" for role, p in st.files.items()}
    st.measured.setdefault("baseline", work / "course" / "baseline.pt")
    reply = call(st, {"op": "load", "models": models}, data["timeouts"]["load"], "loading the model files")
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
                st.measured[role], models[role] = traced, f"{files}/{traced.name}"
                sha, kind = got.get("sha256"), got.get("kind")
                if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha):  # reported by the file's own code
                    st.reported_sha[role] = sha
                st.kinds[role] = (f"{kind}, measured as its TorchScript trace" if kind in
                                  ("state dict of DigitsCNN", "pickled module") else "converted to TorchScript")
        finally:
            stop(conv)
        reply = call(st, {"op": "load", "models": {r: models[r] for r in needs}}, data["timeouts"]["load"],
                     "loading the converted models")
        if reply.get("needs_code"):
            raise StudentError("its converted TorchScript did not load")

    call(st, {"op": "data", "X": protocol.encode(fresh_inputs(data["X"], 0), refs=None)}, 60, "sending the test inputs")


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
        from tito import process

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


_NOT_THE_MODEL = re.compile(r"(\.debug_pkl$|(^|/)traced_inputs|(^|/)\.data/|(^|/)(version|byteorder|\.format_version|"
                            r"\.storage_alignment)$)")


def archive_bytes(path: Path) -> tuple[int, str]:
    """The size of a model as the judge measures it, read from its TorchScript archive's directory
    (nothing is unpickled): the uncompressed bytes of every entry (tensors, constants, the pickled
    structure with its attributes, the code) except debug information and format metadata. Weights
    kept anywhere in the archive count; every model, the baseline included, is such an archive."""
    import zipfile

    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return (sum(i.file_size for i in z.infolist() if not _NOT_THE_MODEL.search(i.filename)),
                    "uncompressed bytes of the TorchScript archive (tensors, constants, structure, code; "
                    "no debug information)")
    return path.stat().st_size, "the file's bytes (not a zip archive)"


def measure_static(st: Student, data: dict) -> dict:
    """Outputs on the test inputs (accuracy here, from labels the sandbox never sees), the weights
    (hash, flattened for the similarity check) and the size of both models."""
    import numpy as np

    from tinytorch.benchmarking.olympics import state_dict_sha256, state_tensor_bytes
    from tito.olympics.scoring import flat_weights

    n = len(data["y"])
    out = {"correct": {}, "size_bytes": {}, "size_method": {}, "tensor_bytes": {}, "sha256": {}, "reported_sha256": st.reported_sha,
           "kinds": st.kinds}
    arrays = {}
    for role in ("baseline", "optimized"):
        what = f"{role} model"
        got = call(st, {"op": "predict", "role": role}, data["timeouts"]["predict"], f"running the {what}")
        y_hat = decode_reply(got.get("outputs"), ARRAY_TAGS, f"{what}'s outputs")
        if not isinstance(y_hat, np.ndarray) or y_hat.dtype.kind != "f":
            raise StudentError(f"{what}: its outputs are not an array of class scores")
        if y_hat.shape != (n, data["classes"]):
            raise StudentError(f"{what}: outputs of shape {tuple(y_hat.shape)}, expected ({n}, {data['classes']}): "
                               f"one score per class for each of the {n} test images")
        bad = np.flatnonzero(~np.isfinite(y_hat).all(axis=1))
        if bad.size:
            raise StudentError(f"{what}: non-finite output (NaN or inf) for test image {int(bad[0])} "
                               f"({bad.size} of {n} rows)")
        out["correct"][role] = (y_hat.argmax(axis=1) == data["y"]).astype(int).tolist()
        got = call(st, {"op": "state", "role": role}, 120, f"reading the {what}'s weights")
        state = decode_reply(got.get("state"), STATE_TAGS, f"{what}'s weights")
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise StudentError(f"{what}: its state dict is not a mapping of names")
        try:
            out["sha256"][role] = state_dict_sha256(state)
            out["tensor_bytes"][role] = state_tensor_bytes(state)  # the submission's size definition
            weights = flat_weights(state) if role == "optimized" else None
        except (RuntimeError, ValueError, TypeError) as e:
            raise StudentError(f"{what}: unusable weights ({type(e).__name__}: {str(e)[:200]})") from None
        out["size_bytes"][role], out["size_method"][role] = archive_bytes(st.measured[role])
        if role == "optimized":
            arrays["weights"], arrays["outputs"] = weights, y_hat.astype(np.float64)
    return out, arrays


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


def calibrate(st: Student, role: str, target_s: float, timeout: float, most: int) -> int:
    """Calls per request so that one request takes about `target_s` (its first requests warm the model
    up), at most `most` images; each step's time is the fastest of three (a busy machine's stalls only add)."""
    k, elapsed = 1, timed(st, role, 0, 1, timeout)
    for _ in range(20):
        elapsed = min(timed(st, role, 0, k, timeout) for _ in range(3))
        if elapsed >= target_s or k >= most:
            break
        k = min(most, max(k * 2, math.ceil(k * 1.2 * target_s / max(elapsed, 1e-6))))
    return k


def fresh_inputs(X, round_index: int):
    """The test images with a tiny noise of their own for each round (1e-3 of the images' spread, the
    same for every student): a model that keeps answers by image (a cache, a lookup table of the
    public test split) meets images it has not seen; a real model's answers do not change."""
    import numpy as np

    rng = np.random.default_rng(1_000_003 + round_index)
    return (X + rng.normal(0, 1e-3 * float(X.std()), size=X.shape)).astype(X.dtype)


def ipc_overhead_s(st: Student) -> float:
    """The median time of an empty request (the timing core, 15 samples): what each timed request adds."""
    from tinytorch.profiling.timing import time_callable

    samples = time_callable(lambda: call(st, {"op": "time", "role": "optimized", "start": 0, "count": 0}, 10,
                                         "timing an empty request"), warmup=1, samples=15)
    return statistics.median(samples.per_call_ns) / 1e9


# ---- the run ----------------------------------------------------------------------------------

def _key(students: list[Student], event: str, rounds: int, target_ms: float, seed: int) -> str:
    h = hashlib.sha256(json.dumps([STATE_VERSION, event, rounds, target_ms, seed]).encode())
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
                timeouts: dict[str, float] | None = None) -> dict[str, Any]:
    """Judge every student folder of `submissions_dir` for `event`; write the leaderboard, per-student
    JSON and the class plot into `output_dir`; return {"board", "rejected", "students", "pairs"}.
    `timeouts` (seconds; TIMEOUTS's keys) bound how long one sandbox may take to load, predict, be timed.

        judge_class("submissions", "latency_sprint", "judged", jobs=4)   # doctest: +SKIP
    """
    from tinytorch.benchmarking import olympics as o

    folder = Path(submissions_dir)
    if not folder.is_dir():
        raise TitoError(f"SUBMISSIONS_DIR: not a folder: {folder}", code=2)
    ev = o.get_event(event)
    bwrap = _check_settings(jobs, rounds, target_ms, no_sandbox)
    folders = [p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not folders:
        raise TitoError(f"SUBMISSIONS_DIR: no student folders in {folder}", code=2)
    rejected: dict[str, str] = {}
    valid = []
    for p in folders:
        st = Student(student_name(p.name), p)
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
                     target_ms=target_ms, seed=seed, timeouts=timeouts)


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
    event = st.doc.get("event") if isinstance(st.doc, dict) else None
    try:
        ev = o.get_event(event)
    except ValueError as e:
        return {"verified": False, "claims": [], "record": None, "reasons": [str(e)]}
    with tempfile.TemporaryDirectory(prefix="tito-verify-") as out:
        # the submission's own tolerance: `submit` measured as the judge does (TorchScript, one thread,
        # interleaved rounds), so on the participant's machine only the load differs, which rounds absorb
        tol = {**o.DEFAULT_TOLERANCE, **(st.doc.get("tolerance") if isinstance(st.doc.get("tolerance"), dict) else {})}
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
              tolerance: dict[str, float] | None = None) -> dict[str, Any]:
    """Stage, load, measure and time the students whose files were found; write the report into `out`
    (claims checked with `tolerance`, default JUDGE_TOLERANCE)."""
    from tinytorch.benchmarking import olympics as o

    out.mkdir(parents=True, exist_ok=True)
    state_path = out / ".judge-state.json"
    work = Path(tempfile.mkdtemp(prefix="tito-olympics-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    work.chmod(0o755)
    try:
        data = prepare_work(work)
        data["timeouts"] = {**TIMEOUTS, **(timeouts or {})}
        for i, st in enumerate(valid):
            stage(st, work, i)
        key = _key(valid, ev.value, rounds, target_ms, seed)
        saved = json.loads(state_path.read_text()) if resume and state_path.is_file() else None
        if saved is not None and saved.get("key") != key:
            print("--resume: the submissions or the settings changed since the saved run; judging from the start",
                  file=sys.stderr)
            saved = None
        state = saved or {"key": key, "static": {}, "rejected": {}, "pairs": [], "rounds": [], "overhead_s": {}}
        rejected.update(state["rejected"])
        valid = [st for st in valid if st.name not in state["rejected"]]
        if len(state["rounds"]) < rounds and valid:
            valid = _load_and_measure(valid, work, data, bwrap, jobs, state, rejected, state_path)
            try:
                _rounds(valid, rounds, target_ms / 1000, seed, state, rejected, state_path, data["timeouts"]["time"],
                        data["X"])
            finally:
                for st in valid:
                    stop(st)
        return _report(o, ev, [st for st in valid if st.name not in rejected], state, rejected, out, tolerance)
    finally:
        for st in valid:
            stop(st)
        shutil.rmtree(work, ignore_errors=True)


def _save(state_path: Path, state: dict) -> None:
    from tinytorch.benchmarking.results import write_json

    write_json(state_path, state, indent=None)  # atomic: a crash leaves the last complete state


def _load_and_measure(valid, work, data, bwrap, jobs, state, rejected, state_path) -> list[Student]:
    """Start every student's sandbox (`jobs` at a time) and take the measurements that need no clock."""
    from tito.olympics.scoring import similar_models

    arrays: dict[str, dict] = {}

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
              show_progress=sys.stderr.isatty(), label="loading models")
    alive = [st for st in valid if st.name not in rejected]
    if arrays:
        state["pairs"] = similar_models({s: (state["static"][s]["sha256"]["optimized"], a["weights"]) for s, a in arrays.items()},
                                        {s: a["outputs"] for s, a in arrays.items()})
    _save(state_path, state)
    return alive


def _rounds(alive: list[Student], rounds: int, target_s: float, seed: int, state: dict, rejected: dict,
            state_path: Path, timeout: float, X) -> None:
    """Interleaved rounds: each (student, model) pair once per round, in a fresh random order, on
    images of the round's own (`fresh_inputs`)."""
    import numpy as np

    for st in list(alive):
        try:
            # a timed request's sample and the timing core's two calibration blocks each get their own images
            # one count for both models: the per-request overhead (the channel, the server's loop) then adds the
            # same per call to both sides of a ratio, and a slow spell while calibrating one cannot leave it at k = 1
            k = max(calibrate(st, role, target_s, timeout, len(X) // 3) for role in ("baseline", "optimized"))
            st.k = dict.fromkeys(("baseline", "optimized"), k)
            state.setdefault("calls", {})[st.name] = k
            state["overhead_s"][st.name] = ipc_overhead_s(st)
        except StudentError as e:
            rejected[st.name] = state["rejected"][st.name] = str(e)
            stop(st)
    alive[:] = [st for st in alive if st.name not in rejected]
    _save(state_path, state)
    rng = np.random.default_rng(seed + len(state["rounds"]))
    total = rounds
    mine = os.sched_getaffinity(0)
    if len(mine) > 1:  # the judge off the core its sandboxes are timed on (restored when the rounds end)
        os.sched_setaffinity(0, mine - {max(mine)})
    bar = progress_bar(sys.stderr.isatty(), "timing rounds")
    if bar is not None:
        bar.start()
        task = bar.add_task("timing rounds", total=total, completed=len(state["rounds"]), failed=len(rejected))
    try:
        while len(state["rounds"]) < rounds and alive:
            images = protocol.encode(fresh_inputs(X, len(state["rounds"]) + 1), refs=None)
            for st in list(alive):  # not timed: the round's images, before any model of the round runs
                try:
                    call(st, {"op": "data", "X": images}, 60, "sending the round's images")
                except StudentError as e:
                    rejected[st.name] = state["rejected"][st.name] = str(e)
                    stop(st)
            alive[:] = [st for st in alive if st.name not in rejected]
            pairs = [(st, role) for st in alive for role in ("baseline", "optimized")]
            this: dict[str, dict[str, float]] = {}
            for i in rng.permutation(len(pairs)):
                st, role = pairs[i]
                if st.name in rejected:
                    continue
                k = st.k[role]
                try:
                    seconds = timed(st, role, int(rng.integers(0, 1 << 30)), k, timeout)
                except StudentError as e:
                    rejected[st.name] = state["rejected"][st.name] = str(e)
                    stop(st)
                    continue
                this.setdefault(st.name, {})[role] = 1000 * seconds / k
            state["rounds"].append({s: v for s, v in this.items() if s not in rejected})
            alive[:] = [st for st in alive if st.name not in rejected]
            _save(state_path, state)
            if bar is not None:
                bar.update(task, completed=len(state["rounds"]), failed=len(rejected))
    finally:
        os.sched_setaffinity(0, mine)
        if bar is not None:
            bar.stop()


def _report(o, ev, judged: list[Student], state: dict, rejected: dict, out: Path,
            tolerance: dict[str, float] | None = None) -> dict[str, Any]:
    """Figures, claims, flags and the leaderboard from the measurements; everything written atomically."""
    from tito.olympics import scoring
    from tinytorch.benchmarking.results import write_atomic, write_json

    entries, records = {}, {}
    same = _same_model_flags(state["pairs"])
    for st in judged:
        try:
            entries[st.name], records[st.name] = _student_report(o, scoring, ev, st, state, same.get(st.name, []),
                                                                 tolerance or JUDGE_TOLERANCE)
        except Exception as e:  # noqa: BLE001 - a submission's content, never the judge's crash
            rejected[st.name] = f"its submission could not be checked ({type(e).__name__}: {str(e)[:200]})"
    board = scoring.judged_leaderboard(entries, ev, rejected)
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


JUDGE_TOLERANCE = {"latency_rel": 3.0}  # judge_class: a speed-up claim is contradicted when over 4x the judged one


def _student_report(o, scoring, ev, st: Student, state: dict, same: list[str],
                    tolerance: dict[str, float]) -> tuple[dict, dict]:
    """One student's figures, claims and flags: (leaderboard entry, per-student record)."""
    static = state["static"][st.name]
    rounds = [r[st.name] for r in state["rounds"] if st.name in r and len(r[st.name]) == 2]
    record = {"round_mean_ms": {role: [r[role] for r in rounds] for role in ("baseline", "optimized")},
              "correct": static["correct"], "size_bytes": static["size_bytes"], "tensor_bytes": static.get("tensor_bytes")}
    figures = scoring.judged_figures(record, ev)
    # a pickled module's hash comes from its own code (the trace has other keys): it checks the file, not a score
    hashes = {role: static.get("reported_sha256", {}).get(role) or static["sha256"][role] for role in static["sha256"]}
    # `submit` times both models as the judge does (TorchScript, one thread, interleaved rounds), but on the
    # student's machine: a class judged on another machine keeps JUDGE_TOLERANCE's floor (before submit timed
    # TorchScript, an honest int8 claim was 2.1x the judged speed-up); `verify` passes the submission's own
    # tolerance. Either way the claim's interval, not its point, must lie above the judged interval
    claims = scoring.check_claims(st.doc, figures, hashes, tolerance=tolerance)
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
    techniques = st.doc.get("techniques") if isinstance(st.doc.get("techniques"), list) else []
    entry = {"figures": figures, "techniques": [clean_text(str(t))[:200] for t in techniques[:20]],
             "flags": flags, "eligible": all(c["passed"] for c in checks), "size_bytes": static["size_bytes"]["optimized"]}
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
