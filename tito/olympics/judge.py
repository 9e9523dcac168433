"""`tito olympics judge`: measure every student's submission here, in one run, and rank the class.

    python3 -m tito olympics judge SUBMISSIONS_DIR --event EVENT --output-dir OUT [--jobs N] [--rounds R]

`SUBMISSIONS_DIR/<student>/` holds `submission.json` (as `olympics submit` writes it) and the model file
it was made from (the file `submit` recorded, or the folder's only model file), and a baseline file
where the student used their own (else the course's digits CNN). The run, by job:

1. `staging`: each student folder (its name a student id by grading's rule) is read as untrusted files and copied
   into a folder of its own; the course baseline and the judged images are prepared;
2. `sandboxes`: one sandbox per student, each model in a process of its own (no network, read-only system, no
   view of the other students, the submissions or the course repository, memory/process/CPU limits), spoken to
   with data only (tito.isolation.protocol: arrays as raw bytes, never pickle);
3. `measure`: each model loaded from only the bytes its size counts (`records.counted_archive`; a file that needs
   its own code is traced to TorchScript in a converting sandbox first); the accuracy pass (labels never leave the
   judge), the weights hash, the size (the library's one definition, `model_file_bytes`);
4. `rounds`: latency timed by the judge around each request (k calls of one image each on a tensor of its own),
   every (student, model) pair once per round in a fresh secret order, both models of a student on the same images,
   every request's inputs drawn from one secret seed per run (`inputs.Plan`); every timed call's answer is read back
   and paired with the accuracy pass's, and the audits (`audits`: no caching, TEST01) check that the timed work is
   the judged work; a sandbox may use CPU only while its own requests run, at most its budget in all;
5. `groups`: a class larger than the memory budget is judged in groups, each group's sandboxes closed before the
   next starts; the state is saved for `--resume`;
6. `report`: the course baseline, measured here, is every student's denominator; scores, ranks and the claim check
   are the library's rules (`tinytorch.benchmarking.olympics`); same-model pairs: `copies`; the submission's claims:
   `claims`; the boards: `leaderboard`.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tito.config import Course, TitoError
from tito.isolation import limits as limits_mod
from tito.isolation import sandbox
from tito.isolation.procs import peak_rss_mb
from tito.olympics import inputs
from tito.olympics.groups import group_rounds, in_groups, note_footprint, save_state
from tito.olympics.measure import load_and_measure
from tito.olympics.report import copy_pairs, fmt, write_report
from tito.olympics.rounds import after_rounds, run_rounds
from tito.olympics.sandboxes import LIMITS, TIMEOUTS, Student, StudentError, stop
from tito.olympics.staging import load_private_data, prepare_work, regular, stage, student_folders

MEMORY_MB = Course.olympics_memory_mb              # settings.ini's olympics_memory_mb, by default
STUDENT_SECONDS = Course.olympics_student_seconds  # settings.ini's olympics_student_seconds, by default
STATE_VERSION = 4  # 4: secret inputs, per-model processes, audits (3: the class in groups)


def _key(students: list[Student], event: str, rounds: int, target_ms: float, seed: int, data: dict,
         budget: float) -> str:
    h = hashlib.sha256(json.dumps([STATE_VERSION, event, rounds, target_ms, seed, budget]).encode())
    h.update(hashlib.sha256(data["X"].tobytes() + data["y"].tobytes()).digest())
    for st in students:
        h.update(f"{st.name}\0{st.key}\0".encode())
    return h.hexdigest()


def _check_settings(jobs: int, rounds: int, target_ms: float, no_sandbox: bool) -> sandbox.Backend:
    for name, v, low in (("--jobs", jobs, 1), ("--rounds", rounds, 6)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise TitoError(f"{name}: expected an integer of at least {low}, got {v!r}", code=2)
    if not (isinstance(target_ms, (int, float)) and target_ms > 0):
        raise TitoError(f"target_ms: expected a positive number of milliseconds, got {target_ms!r}", code=2)
    box = sandbox.require(no_sandbox, "tito olympics loads student model files only in a sandbox: ")
    if no_sandbox:
        print("WARNING: --no-sandbox: student model files are loaded WITHOUT a sandbox; a pickled file's code "
              "runs with your permissions", file=sys.stderr)
    return box


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
    box = _check_settings(jobs, rounds, target_ms, no_sandbox)
    for name, v in (("memory_mb", memory_mb), ("student_seconds", student_seconds)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise TitoError(f"{name}: expected a positive number, got {v!r}", code=2)
    # the limits this process is given (ulimit, a cgroup, a container): clamped and said, or refused before any sandbox
    fitted = limits_mod.fit(sandbox.Limits(**LIMITS), 1, box, ("torch",), what="tito olympics judge")
    if fitted.refusal:
        raise TitoError(fitted.refusal, code=2)
    memory_mb, budget_note = limits_mod.memory_budget(memory_mb)
    for note in [fitted.note(), budget_note]:
        if note:
            print(f"sandbox limits {note}", file=sys.stderr)
    if data_file is not None:
        load_private_data(data_file)  # a bad file is the instructor's error, told before any sandbox starts
    valid, rejected = student_folders(folder)
    return run_judge(valid, rejected, ev, Path(output_dir), box, jobs=jobs, rounds=rounds, resume=resume,
                     target_ms=target_ms, seed=seed, timeouts=timeouts, data_file=data_file, memory_mb=memory_mb,
                     student_seconds=student_seconds, limits=fitted.limits)


def verify_files(submission, model_path, baseline_path=None, *, rounds: int = 20, no_sandbox: bool = False,
                 timeouts: dict[str, float] | None = None) -> dict[str, Any]:
    """Verify one submission against the model files it was made from, measured as `judge` measures
    (the files loaded only in a sandbox): {"verified", "claims", "reasons", "record"}."""
    from tinytorch.benchmarking import olympics as o

    box = _check_settings(1, rounds, 10.0, no_sandbox)
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
                st.files[role] = regular(Path(p), f"{role} model file")
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
        result = run_judge([st], {}, ev, Path(out), box, jobs=1, rounds=rounds, resume=False, target_ms=10.0,
                           seed=0, timeouts=timeouts, tolerance=tol)
    if st.name in result["rejected"]:
        return {"verified": False, "claims": [], "record": None, "reasons": [result["rejected"][st.name]]}
    record = result["students"][st.name]
    validation = o.validate_submission(sub)
    reasons = [f"{c['claim']}: claimed {fmt(c['claimed'])}, measured {fmt(c['judged'])}" for c in record["claims"]
               if c["contradicted"]] + [f"validation: {r}" for r in validation["reasons"]]
    return {"verified": not reasons, "claims": record["claims"], "reasons": reasons, "record": record}


def run_judge(valid: list[Student], rejected: dict[str, str], ev, out: Path, box: sandbox.Backend, *, jobs: int,
              rounds: int, resume: bool, target_ms: float, seed: int, timeouts: dict[str, float] | None,
              tolerance: dict[str, float] | None = None, data_file=None, memory_mb: float = MEMORY_MB,
              student_seconds: float = STUDENT_SECONDS, limits: sandbox.Limits | None = None) -> dict[str, Any]:
    """Stage, load, measure and time the students whose files were found, in groups that fit `memory_mb`
    (`in_groups`), each sandbox with `limits` (default LIMITS); audit them, find copies, and write the report into
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
        for group, index, count in in_groups(valid, state, memory_mb, jobs, state_path):
            alive = [st for st in group if st.name not in rejected]
            done = group_rounds(alive, state)
            if not alive or (done >= rounds and all(st.name in state.get("audited", {}) for st in alive)):
                continue
            label = f" (group {index + 1} of {count})" if count > 1 else ""
            try:
                alive = load_and_measure(alive, work, data, box, jobs, state, rejected, state_path, plan, copies_dir,
                                         label)
                run_rounds(alive, rounds, target_ms / 1000, state, rejected, state_path, data, plan, done, label)
                after_rounds(alive, state, rejected, data, plan, copies_dir)
                note_footprint(state, alive)  # after its rounds, as large as a sandbox gets: sizes the next group
                save_state(state_path, state)
            finally:
                for st in group:
                    stop(st)
        judged = [st for st in valid if st.name not in rejected]
        state["pairs"] = copy_pairs(judged, copies_dir, data, plan)
        state.setdefault("memory", {})["judge_peak_mb"] = peak_rss_mb()
        save_state(state_path, state)
        return write_report(o, ev, judged, state, rejected, out, tolerance, data["source"], plan)
    finally:
        for st in valid:
            stop(st)
        shutil.rmtree(work, ignore_errors=True)
