"""One student's grading, end to end (`grade_one`: the task the class runner hands out).

1. a private work folder gets a copy of the student's files (their notebooks, the assignment's data
   files over anything of the same name) and the judge's plan; the submitted files are only read;
2. the judge (tito.grading.autograder, a process of its own) builds the student's packages, runs the
   host in its sandbox, runs the tests and the feedback, and sends back one result per notebook;
3. here the score is computed by tito's rule: a graded cell earns its points when the judge says
   it passed, nothing else. Written answers (markdown cells with points) are graded by hand:
   pending when written, 0 when left as released;
4. the autograded notebooks (the student's cells with the outputs of their feedback run; each
   graded cell as released, with the judge's verdict as its output), their HTML and result.json are
   returned as a tar, to be published by the caller (which merges them into the class gradebook for
   nbgrader's formgrader: tito.grading.course_dir).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tito.grading import feedback as fb
from tito.grading import gradebook
from tito.grading.feedback import first_line, num
from tito.grading.job import Channel, GradeJob, JudgePlan
from tito.isolation import limits as limits_mod
from tito.isolation import namespaces, process, sandbox, untrusted
from tito.isolation.protocol import ProtocolError, read_frames
from tito.isolation.sanitize import console_line
from tito.notebooks.cells import cell_source, nbgrader_meta
from tito.notebooks.nbfile import atomic_write, read_notebook, write_notebook

TOTAL = "(total)"
GRADING_ERROR = "grading error"
# A status says whose it is. The student's: passed (every graded test passed, no cell of theirs raised), tests
# failed (a graded test failed or a cell of theirs raised), timeout (their code ran past a time limit), refused (a
# file tito will not read as a notebook), missing (not submitted). tito's: grading failed (the sandbox did not
# start, the judge crashed or reported nothing, the task was lost): no grade, and `tito grade` exits 1.
PASSED, TESTS_FAILED, TIMEOUT, REFUSED, MISSING = "passed", "tests failed", "timeout", "refused", "missing"
GRADING_FAILED = "grading failed"
STATUS_ORDER = [GRADING_FAILED, TIMEOUT, TESTS_FAILED, REFUSED, MISSING, PASSED]  # worst first
REASON_CHARS = 2000  # of a reason in grades.csv


@dataclass
class NotebookGrade:
    notebook: str
    score: float
    max_score: float
    status: str          # one of STATUS_ORDER
    reason: str = ""     # empty when every graded test passed and no cell raised
    manual_pending: float = 0.0  # points of written answers awaiting manual grading (in max_score)
    tests: dict = field(default_factory=dict)  # grade_id -> {"ok", "points", "message"} (no time: see feedback.verdicts)


@dataclass
class StudentGrade:
    student: str
    score: float
    max_score: float
    status: str
    reason: str
    notebooks: list[NotebookGrade] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)   # paths relative to the output dir
    seconds: float = 0.0
    sandbox: str = ""             # the sandbox's label (Backend.label): what it enforced, what it went without
    manual_pending: float = 0.0
    seed: int | None = None       # this student's hidden-test seed (classrun.student_seed; never the run's)
    timing: dict = field(default_factory=dict)
    inputs: str = ""              # hash of everything the grade depends on (classrun.student_key)

    def rows(self) -> list[dict]:
        """grades.csv's rows of this student: one per notebook and a TOTAL row; each reason one line of at most
        REASON_CHARS characters (tito.isolation.sanitize.console_line: what a student's code raised included)."""
        out = [{"student": self.student, "notebook": n.notebook, "score": num(n.score),
                "max_score": num(n.max_score), "manual_pending": num(n.manual_pending), "status": n.status,
                "reason": console_line(n.reason, REASON_CHARS), "sandbox": self.sandbox} for n in self.notebooks]
        out.append({"student": self.student, "notebook": TOTAL, "score": num(self.score),
                    "max_score": num(self.max_score), "manual_pending": num(self.manual_pending),
                    "status": self.status, "reason": console_line(self.reason, REASON_CHARS), "sandbox": self.sandbox})
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "StudentGrade":
        nbs = [NotebookGrade(**n) for n in d.get("notebooks", [])]
        return cls(**{**d, "notebooks": nbs})


def grade_one(job: GradeJob) -> tuple[dict, bytes]:
    """Grade one student; returns (StudentGrade as a dict, tar.gz of their output folder).

    Never raises for a problem of the submission; an infrastructure failure is returned as a
    GRADING_FAILED result whose reason starts with GRADING_ERROR, so the class run goes on and `--resume`
    grades that student again.
    """
    t0 = time.perf_counter()
    # not under /tmp: each notebook's process gets a private /tmp, which would hide its scratch folder
    root = Path(job.run.work_root)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"tito-grade-{job.student}-", dir=root))
    try:
        work.chmod(0o755)  # each notebook's uid must reach its own folders below
        staged = Path(tempfile.mkdtemp(prefix="out-", dir=root))
        try:
            result = grade_student(job, work, staged)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(staged, arcname=".")
            return asdict(result), buf.getvalue()
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    except Exception as e:  # noqa: BLE001 - one student's infrastructure failure must not stop the class
        why = f"{GRADING_ERROR}: {type(e).__name__}: {first_line(str(e), 300)}"
        r = StudentGrade(job.student, 0.0, 0.0, GRADING_FAILED, why, [], [], round(time.perf_counter() - t0, 1),
                         job.run.sandbox.label([]))
        return asdict(r), b""
    finally:
        if not os.environ.get("TITO_GRADE_KEEP"):  # set it to look at a student's work folder afterwards
            shutil.rmtree(work, ignore_errors=True)


def _copy_files(folder: Path, data_files: dict[str, Path], dest: Path, wanted: set[str], notebook_mb: int,
                folder_mb: int) -> None:
    """The student's folder (regular files only, never read through a link, hidden names skipped:
    tito.isolation.untrusted; only the graded notebooks `wanted` when the folder is above its caps)
    with the assignment's data files over it."""
    dest.mkdir()
    seen = untrusted.survey(folder, notebook_mb, folder_mb)
    files = [f for f in seen.files if f in wanted] if seen.over else seen.files
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        try:
            untrusted.copy_regular(folder / rel, dest / rel, max(notebook_mb, folder_mb) * untrusted.MB)
        except untrusted.Refused:
            (dest / rel).unlink(missing_ok=True)  # it changed since the survey: left out
    for rel, src in data_files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / rel)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def grade_student(job: GradeJob, work: Path, staged: Path) -> StudentGrade:
    t0 = time.perf_counter()
    run = job.run
    maxima = gradebook.max_scores(run.template, job.assignment)
    sources = {Path(p).stem: Path(p) for p in run.notebooks}
    notebook_mb = run.notebook_mb
    _copy_files(Path(job.folder), run.data_files, work / "files", {f"{n}.ipynb" for n in sources}, notebook_mb,
                run.folder_mb)
    names, unreadable, missing, submitted = [], {}, [], {}
    inputs = work / "judge"
    (inputs / "sources").mkdir(parents=True)
    (inputs / "submitted").mkdir()
    for name in sorted(sources):
        mine = Path(job.folder) / f"{name}.ipynb"
        if not os.path.lexists(mine):
            missing.append(name)
            continue
        try:  # only a regular file, never through a link, size and nesting checked (tito.notebooks.nbfile)
            nb = read_notebook(mine, notebook_mb)
        except untrusted.Refused as e:
            unreadable[name] = untrusted.reason(mine.name, e) + "; not graded"
            continue
        names.append(name)
        submitted[name] = nb
        shutil.copyfile(sources[name], inputs / "sources" / f"{name}.ipynb")
        write_notebook(inputs / "submitted" / f"{name}.ipynb", nb, indent=None)
    shutil.copyfile(run.pyproject, inputs / "pyproject.toml")
    (inputs / "release").mkdir()
    for name in names:  # the cells as released: the feedback shows graded cells so
        shutil.copyfile(run.template / "release" / job.assignment / f"{name}.ipynb",
                        inputs / "release" / f"{name}.ipynb")
    inputs.chmod(0o700)
    frames, judge_note = [], ""
    t_judge = time.perf_counter()
    seen: dict = {}
    if names:  # what reading and copying the student's files took counts in their budget too
        frames, judge_note, seen = run_judge(job, work, names, spent=time.perf_counter() - t0)
    spent = {"prepare_files": round(t_judge - t0, 3), "judge_process": round(time.perf_counter() - t_judge, 3), **seen}
    return compose(job, staged, frames, judge_note, maxima, unreadable, missing, t0, spent, submitted, work / "out")


# the zygote: each notebook's process in namespaces of its own (CAP_SYS_ADMIN: unshare, mount a private
# /tmp) and as its own uid (CAP_SETUID, CAP_SETGID), and the end of what it left running (CAP_KILL);
# the children drop them all with the uid, before any student code runs
HOST_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL")
JUDGE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN")   # the judge: hand each notebook's folders to its uid
# one student's whole judge run at most: its start, then per notebook its set-up and four cell timeouts (tests,
# feedback, rendering); settings.ini student_seconds caps it further
JUDGE_START_S, NOTEBOOK_SETUP_S, NOTEBOOK_TIMEOUTS = 120, 120, 4
JUDGE_FILE_MB = 1024   # the largest file the judge may write (the student's rendered pages)


def run_judge(job: GradeJob, work: Path, names: list[str], spent: float = 0.0) -> tuple[list[dict], str, dict]:
    """Start the student's host sandbox(es) and the judge's sandbox, connected by control channels;
    wait for the judge; return its result frames, a note when it did not finish, and what the
    whole-sandbox limits saw (peak memory, limits the machine could not apply). Where the class run
    split the cores between the students graded at once (RunSettings.cpu_split: no cgroup gives a CPU
    share), all of them run on this student's cores. `spent`: seconds of the student's budget
    (student_seconds) already used on their files."""
    with limits_mod.cpu_slot(job.run.cpu_split) as cpus:
        return _judge_sandboxes(job, work, names, cpus, spent)


def _judge_sandboxes(job: GradeJob, work: Path, names: list[str], cpus: set[int] | None,
                     spent: float) -> tuple[list[dict], str, dict]:
    run, box = job.run, job.run.sandbox
    as_root = os.geteuid() == 0 and box.isolated  # tito gives each notebook's processes a uid of their own
    # one zygote for all notebooks, each notebook's process in namespaces of its own (tito.grading.host:
    # as root under its own uid too), the other notebooks' packages covered; when asked
    # (run.per_notebook) one sandbox per notebook instead
    shared = not (box.isolated and run.per_notebook)
    uids = {n: sandbox.sandbox_uid() for n in names} if as_root else {}
    feedback_uids = {n: sandbox.sandbox_uid() for n in uids}  # each notebook's feedback run: a uid of its own
    for d in ("stage", "scratch"):
        (work / d).mkdir()
        (work / d).chmod(0o755)
    for d in ("out/autograded", "out/feedback"):  # the judge renders there under whichever uid it runs as
        (work / d).mkdir(parents=True)
        (work / d).chmod(0o777)
    limits = run.limits
    env = {"PYTHONPATH": "{hostlib}", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "NBGRADER_EXECUTION": "autograde"}
    groups = [("", work / "stage", work / "scratch")] if shared else \
        [(n, work / "stage" / n, work / "scratch" / n) for n in names]
    channels, host_procs, judge_fds, log = {}, [], [], open(work / "host.log", "ab")
    seen: dict = {}
    guard = limits_mod.Guard(f"tito-{os.getpid()}-{work.name}", limits.memory_mb, 2 * limits.processes + 16) \
        if box.isolated else None
    tmpfs = box.isolated and namespaces.mount_tmpfs(work / "scratch", limits.tmp_mb)
    try:
        for key, stage, scratch in groups:
            stage.mkdir(exist_ok=True)
            scratch.mkdir(exist_ok=True)
            mounts = {"files": work / "files", "stage": stage, "hostlib": run.hostlib,
                      **({"cache": run.cache} if run.cache else {})}
            judge_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            # unsandboxed (--no-sandbox), the notebooks' processes have no private /tmp: their home, cache and copy of
            # the student's files go in this student's scratch folder, removed with it, not in the machine's /tmp
            host_env = env if box.isolated else {**env, "TMPDIR": str(scratch)}
            spec = sandbox.SandboxSpec(["{python}", "-s", "-P", "-m", "tito.grading.host", str(host_end.fileno())],
                                       mounts, host_env, limits=limits, rw=[scratch],
                                       caps=HOST_CAPS if as_root and shared else None, private_tmp=as_root and shared,
                                       namespaces=True)  # each notebook process loads seccomp.STUDENT itself
            host_procs.append(sandbox.start(spec, box, pass_fds=(host_end.fileno(),), stdout=log, stderr=log,
                                            uid=None if shared else uids.get(key),
                                            cgroups=tuple(guard.groups) if guard else (), cpus=cpus))
            host_end.close()
            judge_fds.append(judge_end)
            channels[key] = Channel(judge_end.fileno(), {k: box.inside_path(k, v) for k, v in mounts.items()})
        plan = JudgePlan(str(run.reference), str(run.cache) if run.cache else None, run.lib, box.isolated,
                         run.preimport, limits.tmp_mb, run.imports, job.seed if job.seed is not None else run.seed,
                         names, str(work / "judge"), str(work), job.timeout, str(work / "results.frames"), shared,
                         channels, uids, feedback_uids)
        plan_path = work / "judge" / "plan.json"
        plan_path.write_text(plan.to_json(), encoding="utf-8")
        budget = JUDGE_START_S + len(names) * (NOTEBOOK_TIMEOUTS * job.timeout + NOTEBOOK_SETUP_S)
        # what one student may cost the class run (settings.ini student_seconds), however their code sleeps
        left = run.student_seconds - spent if run.student_seconds is not None else None
        capped = left is not None and left < budget
        budget = max(1.0, min(budget, left)) if left is not None else budget
        spec = sandbox.SandboxSpec(["{python}", "-s", "-P", "-m", "tito.grading.autograder", str(plan_path)], {},
                                   {"PYTHONPATH": f"{run.judgelib}{os.pathsep}{run.reference}", "MPLBACKEND": "Agg",
                                    "TINYTORCH_CACHE": str(run.cache or ""), "PYTHONDONTWRITEBYTECODE": "1"},
                                   cwd=str(work), limits=replace(limits, file_mb=JUDGE_FILE_MB),
                                   # the shared folder again: a bind does not carry the tmpfs mounted on it
                                   rw=[work, work / "scratch"],
                                   ro=[run.judgelib, run.reference] + ([run.cache] if run.cache else []),
                                   caps=JUDGE_CAPS if as_root else None)
        judge = sandbox.start(spec, box, pass_fds=tuple(s.fileno() for s in judge_fds), cpus=cpus)
        for s in judge_fds:
            s.close()
        judge_fds = []
        done = process.finish(judge, budget)
    finally:
        for s in judge_fds:
            s.close()
        for proc in host_procs:
            process.wait(proc, 5)
        log.close()
        if guard:
            peak = guard.peak_mb()
            if peak is not None:
                seen["host_peak_mb"] = round(peak, 1)
            if guard.unavailable:
                seen["limits_not_applied"] = guard.unavailable
            seen["missing"] = [m for m in guard.missing if not (cpus and m == limits_mod.CPU)] + \
                ([] if tmpfs else [limits_mod.SCRATCH])
            if cpus:
                seen["cpu_cores"] = sorted(cpus)
            guard.close()
        if tmpfs:
            namespaces.unmount(work / "scratch")
        elif box.isolated:
            seen.setdefault("limits_not_applied", []).append(
                f"{limits_mod.SCRATCH}: a tmpfs cannot be mounted here (needs root)")
    frames, note = [], ""
    try:
        with open(work / "results.frames", "rb") as f:
            frames = read_frames(f)
    except (OSError, ProtocolError) as e:
        note = f"the judge's results were unreadable: {e}"
    seen["budget_reached"] = bool(done.timed_out)  # the student's code used their time: theirs, not the judge's
    if done.timed_out and capped:
        note = (f"not graded: this student's grading reached its time budget of {run.student_seconds:.0f} s "
                "(student_seconds in settings.ini) before this notebook was done")
    elif done.timed_out:
        note = f"grading stopped: the student's whole run exceeded its limit of {budget:.0f} s"
    elif done.returncode != 0:
        note = f"the judge failed (exit {done.returncode}): {done.tail(3)}"
    return frames, note, seen


def compose(job: GradeJob, staged: Path, frames: list[dict], judge_note: str, maxima: dict[str, float],
            unreadable: dict[str, str], missing: list[str], t0: float, spent: dict | None = None,
            submitted: dict[str, dict] | None = None, rendered: Path | None = None) -> StudentGrade:
    """Scores and gradebook from the judge's verdicts, with the feedback the judge rendered
    (`rendered`: its autograded/ and feedback/ folders) (module doc, steps 3-4)."""
    run = job.run
    submitted = submitted or {}
    by_name = {f["notebook"]: f for f in frames if isinstance(f.get("notebook"), str)}
    t_compose = time.perf_counter()
    timing = {**(spent or {}), **{f"judge_{k}": v for k, v in next(
        (f.get("timing", {}) for f in frames if f.get("done")), {}).items()}}
    for sub in ("autograded", "feedback"):
        if rendered is not None and (rendered / sub).is_dir():
            shutil.copytree(rendered / sub, staged / sub)
        else:
            (staged / sub).mkdir(parents=True)
    notebooks, feedback, book = [], [], {}
    for name in sorted(maxima):
        mx = maxima[name]
        if name in unreadable:
            notebooks.append(NotebookGrade(name, 0.0, mx, REFUSED, unreadable[name]))
            continue
        if name in missing:
            notebooks.append(NotebookGrade(name, 0.0, mx, MISSING, "notebook not submitted"))
            continue
        res = by_name.get(name)
        if res is None:
            # the student's time budget ran out (their code), or the judge itself failed (tito's)
            notebooks.append(NotebookGrade(name, 0.0, mx, TIMEOUT if timing.get("budget_reached") else GRADING_FAILED,
                                           judge_note or "the judge reported nothing"))
            continue
        grade, scores = notebook_grade(name, mx, read_notebook(run.source(name)), submitted[name], res,
                                       gradebook.release_cells(run.template, job.assignment, name))
        notebooks.append(grade)
        book[name] = scores
        if (staged / "feedback" / f"{name}.html").is_file():
            feedback.append((Path("students") / job.student / "feedback" / f"{name}.html").as_posix())
    timing["compose"] = round(time.perf_counter() - t_compose, 3)
    score = sum(n.score for n in notebooks)
    mx = sum(n.max_score for n in notebooks)
    worst = min((n.status for n in notebooks), key=STATUS_ORDER.index, default=MISSING)
    reasons = [f"{n.notebook}: {n.reason}" for n in notebooks if n.reason and n.status != MISSING]
    gone = [n.notebook for n in notebooks if n.status == MISSING]
    if gone and len(gone) < len(notebooks):
        reasons.append("not submitted: " + ", ".join(gone))
    elif gone:
        reasons.append("no graded notebook submitted")
    result = StudentGrade(job.student, score, mx, worst, " | ".join(reasons), notebooks, feedback,
                          round(time.perf_counter() - t0, 1),
                          run.sandbox.label(timing.get("missing", limits_mod.gaps()), run.sandbox_note),
                          sum(n.manual_pending for n in notebooks), job.seed, timing, job.inputs)
    atomic_write(staged / "result.json", json.dumps(asdict(result), indent=1) + "\n")
    return result


def notebook_grade(name: str, max_score: float, source: dict, student: dict, res: dict,
                   released: dict[str, dict]) -> tuple[NotebookGrade, dict]:
    """(grade, gradebook scores) of one notebook from the judge's result: tito's rule for the tests
    (tito.grading.feedback.verdicts), pending or unanswered for the written answers."""
    tests = res.get("tests", {}) if isinstance(res.get("tests"), dict) else {}
    verdicts = fb.verdicts(source, tests)
    written = {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c).get("points", 0) or 0) for c in source.get("cells", [])
               if c.get("cell_type") == "markdown" and nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("solution")}
    mine = {nbgrader_meta(c).get("grade_id"): c for c in student.get("cells", []) if isinstance(c, dict) and nbgrader_meta(c).get("grade_id")}
    scores = {gid: v["points"] for gid, v in verdicts.items()}
    failed = [f"{gid} (0/{num(v['max'])}): {console_line(first_line(v['message'], 300), 300)}"
              for gid, v in verdicts.items() if not v["ok"]]
    timed_out = any(not v["ok"] and (v["message"].startswith("timed out") or "took longer than" in v["message"])
                    for v in verdicts.values())
    pending, unanswered = 0.0, []
    for gid, pts in written.items():
        cell, rel = mine.get(gid), released.get(gid)
        answered = cell is not None and rel is not None and cell_source(cell).strip() != cell_source(rel).strip()
        scores[gid] = gradebook.PENDING if answered else gradebook.UNANSWERED
        if answered:
            pending += pts
        elif pts > 0:
            unanswered.append(f"{gid} (0/{num(pts)}): no written answer")
    other = [console_line(e, 300) for e in res.get("cell_errors", []) if isinstance(e, str)][:20]
    setup = [console_line(f"setup: {e}", 300) for e in res.get("setup_errors", [])[:3] if isinstance(e, str)]
    if res.get("grading_failed") is True:  # the judge could not run this notebook (the sandbox did not start)
        status = GRADING_FAILED
    elif timed_out or res.get("feedback_timed_out") is True:
        status = TIMEOUT
    else:
        status = TESTS_FAILED if other or setup or failed else PASSED
    grade = NotebookGrade(name, sum(v["points"] for v in verdicts.values()), max_score, status,
                          "; ".join(other + setup + failed + unanswered), pending,
                          {gid: {k: v[k] for k in ("ok", "points", "message")} for gid, v in verdicts.items()})
    return grade, scores


