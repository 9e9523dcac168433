"""`tito grade MODULE SUBMISSIONS_DIR`: autograde a class with nbgrader, sandboxed and in parallel.

Submissions layout (student id = folder name), either
    SUBMISSIONS_DIR/<student>/*.ipynb                         one folder per student, or
    SUBMISSIONS_DIR/[submitted/]<student>/<MODULE>/*.ipynb    nbgrader's submitted/ layout.
Only the module's graded notebooks (those with nbgrader cells) are graded. A folder whose name
is no usable id, a folder without notebooks, a non-notebook file or a notebook that is not part
of the assignment is a line in the report (and in OUTPUT/problems.txt), never a crash.

Once per run: the nbgrader template (source with solutions and hidden tests, gradebook.db) and
a read-only cache warmed by trusted code (the digits model, trained once). Then per student,
as one task (`grade_one`; N at once with --jobs, or on a Dask cluster with --scheduler):
1. a fresh temporary nbgrader course folder gets a copy of the template and of that student's
   notebooks; the submitted files are read, never written;
2. `nbgrader autograde` runs in tito's process (tito.nbgrader_run), but its Execute step is
   tito.nbgrader_sandbox:
   each notebook runs in a bubblewrap sandbox (tito.sandbox) against a package holding the
   student's own export of that notebook's module (tito.grading_package), and its graded tests
   run again, with hidden tests, in a separate sandboxed process; a graded cell earns its points
   only when it passes in both;
3. `nbgrader generate_feedback` writes the HTML feedback; scores come from the gradebook,
   failure reasons from the autograded notebooks; the task returns the result and its files.
The parent publishes each result as it arrives: OUTPUT/students/<student>/ swapped in whole,
then grades.csv rewritten atomically. `--resume` skips students whose result is published.

Output (default build/grades/NN_name/):
    grades.csv       student, notebook, score, max_score, manual_pending, status, reason, sandbox
                     (one row per graded notebook, plus a "(total)" row per student); `--student
                     ID` replaces only that student's rows
    students/<id>/   result.json, gradebook.db, autograded/*.ipynb, feedback/*.html
    problems.txt     submission folders and files that were not graded, one line each

Manually graded answers (the written answers: markdown cells with nbgrader `grade`, `solution`
and `points`) are not scored here. Their points are part of `max_score`; `score` is what
autograding gave; `manual_pending` is the points of answers the student wrote that await the
instructor (nbgrader's formgrader, on students/<id>/gradebook.db), so a full solution scores
`max_score - manual_pending`. A pending answer is neither a failure nor a reason; an answer
left as released ("YOUR ANSWER HERE") scores 0 and is named in `reason` ("no written answer").
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tito import nbgrader_glue, sandbox
from tito.config import Course, TitoError

TOTAL = "(total)"
CSV_FIELDS = ["student", "notebook", "score", "max_score", "manual_pending", "status", "reason", "sandbox"]
SANDBOXED = "bubblewrap"
UNSANDBOXED = "NONE (--no-sandbox): student code ran unsandboxed"
GRADING_ERROR = "grading error"
# worst first: a student's status is the worst of their notebooks'
STATUS_ORDER = ["failed", "timeout", "errors", "missing", "graded"]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")


@dataclass
class NotebookGrade:
    notebook: str
    score: float
    max_score: float
    status: str          # graded | errors | timeout | missing | failed
    reason: str = ""     # empty when every graded test passed and no cell raised
    manual_pending: float = 0.0  # points of written answers awaiting manual grading (in max_score)


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
    sandbox: str = SANDBOXED
    manual_pending: float = 0.0

    def rows(self) -> list[dict]:
        out = [{"student": self.student, "notebook": n.notebook, "score": _num(n.score),
                "max_score": _num(n.max_score), "manual_pending": _num(n.manual_pending), "status": n.status,
                "reason": n.reason, "sandbox": self.sandbox} for n in self.notebooks]
        out.append({"student": self.student, "notebook": TOTAL, "score": _num(self.score),
                    "max_score": _num(self.max_score), "manual_pending": _num(self.manual_pending),
                    "status": self.status, "reason": self.reason, "sandbox": self.sandbox})
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "StudentGrade":
        nbs = [NotebookGrade(**n) for n in d.get("notebooks", [])]
        return cls(**{**d, "notebooks": nbs})


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---- submissions ----------------------------------------------------------------------------

@dataclass
class Scan:
    """What a submissions folder holds: student id -> notebook folder, and lines for the report."""
    found: dict[str, Path]
    problems: list[str]


def scan_submissions(submissions_dir: Path, assignment: str, wanted: set[str] | None = None) -> Scan:
    """Student folders of `submissions_dir` (see module doc for layouts) and problem lines.

    `wanted`: the assignment's notebook file names; other files are reported.

    >>> scan_submissions(Path("/nonexistent"), "01_x")   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    tito.config.TitoError: submissions folder /nonexistent does not exist
    """
    base = Path(submissions_dir)
    if not base.is_dir():
        raise TitoError(f"submissions folder {base} does not exist")
    if (base / "submitted").is_dir():
        base = base / "submitted"
    found: dict[str, Path] = {}
    problems: list[str] = []
    for d in sorted(p for p in base.iterdir() if not p.name.startswith(".")):
        if not d.is_dir():
            problems.append(f"{d.name}: not a student folder (a file in {base}); ignored")
            continue
        folder = d / assignment if (d / assignment).is_dir() else d
        if not any(folder.glob("*.ipynb")):
            problems.append(f"{d.name}: no notebooks in {folder}; not graded")
            continue
        if not _STUDENT_ID.match(d.name):
            problems.append(f"{d.name!r}: folder name is not a usable student id (letters, digits, _ . @ + - "
                            "only); not graded")
            continue
        found[d.name] = folder
        for f in sorted(folder.iterdir()):
            if f.name.startswith("."):
                continue
            if f.suffix != ".ipynb":
                problems.append(f"{d.name}: {f.name} is not a notebook; ignored")
            elif wanted is not None and f.name not in wanted:
                problems.append(f"{d.name}: {f.name} is not part of {assignment}; ignored")
    return Scan(found, problems)


def find_submissions(submissions_dir: Path, assignment: str) -> dict[str, Path]:
    """student id -> folder holding that student's notebooks (see module doc for layouts)."""
    found = scan_submissions(submissions_dir, assignment).found
    if not found:
        raise TitoError(f"no student folders with notebooks in {submissions_dir} (expected "
                        f"<student>/*.ipynb or submitted/<student>/{assignment}/*.ipynb)")
    return found


# ---- template course -----------------------------------------------------------------------

def build_template(template_dir: Path, assignment: str, notebooks: list[Path], course_id: str,
                   timeout: int, data_files: dict[str, Path] | None = None) -> Path:
    """nbgrader course folder with the assignment generated (source, release, gradebook.db)."""
    if template_dir.exists():
        shutil.rmtree(template_dir)
    nbgrader_glue.generate_assignment(template_dir, assignment, notebooks, course_id, timeout, data_files)
    return template_dir


def _clone_course(template: Path, dest: Path, course_id: str, timeout: int) -> None:
    shutil.copytree(template, dest, ignore=shutil.ignore_patterns("submitted", "autograded", "feedback",
                                                                 "nbgrader_config.py", "*.db-journal"))
    nbgrader_glue.write_course_config(dest, course_id, timeout, sandboxed_execute=True)


# ---- one student ---------------------------------------------------------------------------

def run_isolated(cmd: list[str], cwd: Path, timeout: float, extra_env: dict | None = None) -> tuple[int | None, str]:
    """Run `cmd` in its own process group; on timeout kill the whole group (sandboxes included).

    Returns (exit code or None on timeout, combined output).
    """
    env = {**nbgrader_glue._nbgrader_env(), **(extra_env or {})}
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True, preexec_fn=_die_with_parent)
        rc = sandbox.wait_then_kill_group(p, timeout)  # the kernels nbgrader started die too
        log.seek(0)
        text = log.read()
    nbgrader_glue.check_config_loaded(text, cmd[2:])
    return rc, text


def _die_with_parent() -> None:
    """In the child: SIGKILL when tito dies (a killed `tito grade` leaves no grading behind; the
    sandboxes below die with it through bwrap's --die-with-parent)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _first_line(text: str, limit: int = 200) -> str:
    for line in _ANSI.sub("", text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _error_message(out: dict, timeout: int) -> str:
    ename, evalue = out.get("ename", "Error"), _first_line(out.get("evalue", ""))
    if ename == "CellTimeoutError":
        return f"timed out (cell ran longer than {timeout} s)"
    if ename == "NotImplementedError" and evalue.startswith("not yet implemented"):
        return evalue
    if ename == "NotImplementedError":
        return "not yet implemented" + (f": {evalue}" if evalue else "")
    if ename == "SyntaxError" and not evalue:
        return "SyntaxError"
    return f"{ename}: {evalue}" if evalue else ename


def _cell_label(cell: dict, index: int) -> str:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if meta.get("grade_id"):
        return meta["grade_id"]
    src = cell.get("source", "")
    src = "".join(src) if isinstance(src, list) else src
    first = next((l.strip() for l in src.splitlines() if l.strip() and not l.strip().startswith("#|")), "")
    return f"cell {index}" + (f" ({first[:40]!r})" if first else "")


def analyse_notebook(autograded: Path, grades: dict[str, tuple[float, float]], timeout: int) -> tuple[str, str]:
    """(status, reason) of one autograded notebook from its cell outputs and grade-cell scores."""
    nb = json.loads(Path(autograded).read_text(encoding="utf-8"))
    graded_fail: list[str] = []
    other: list[str] = []
    timed_out = False
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if errors and errors[-1].get("ename") in ("CellTimeoutError", "KeyboardInterrupt"):
            timed_out = True
        if meta.get("grade") and gid in grades:
            got, out_of = grades[gid]
            if got < out_of:
                why = _error_message(errors[-1], timeout) if errors else "test did not pass"
                graded_fail.append(f"{gid} ({_num(got)}/{_num(out_of)}): {why}")
        elif errors:
            other.append(f"{_cell_label(cell, i)}: {_error_message(errors[-1], timeout)}")
    status = "timeout" if timed_out else ("errors" if other else "graded")
    return status, "; ".join(other + graded_fail)


def _read_gradebook(course_dir: Path, assignment: str, student: str):
    """{notebook: (score, max, {grade_id: (score, max)}, {grade_id: (manual state, max)})} from
    course_dir/gradebook.db ({} if none); the last dict holds the manually graded answers
    (nbgrader_glue.manual_state), the one before every other grade cell."""
    from nbgrader.api import Gradebook, MissingEntry

    db = f"sqlite:///{course_dir / 'gradebook.db'}"
    out = {}
    with Gradebook(db) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return out
        for n in sub.notebooks:
            states = {g.name: (nbgrader_glue.manual_state(g), float(g.max_score)) for g in n.grades}
            out[n.name] = (float(n.score), float(n.max_score),
                           {g.name: (float(g.score), float(g.max_score)) for g in n.grades
                            if states[g.name][0] is None},
                           {k: v for k, v in states.items() if v[0] is not None})
    return out


def manual_summary(manual: dict[str, tuple[str, float]]) -> tuple[float, list[str]]:
    """(points awaiting manual grading, reason lines) of one notebook's manually graded answers.

    >>> manual_summary({"answer-a": ("pending", 3.0), "answer-b": ("unanswered", 2.0)})
    (3.0, ['answer-b (0/2): no written answer'])
    """
    pending = sum(mx for state, mx in manual.values() if state == nbgrader_glue.PENDING)
    missing = [f"{gid} (0/{_num(mx)}): no written answer" for gid, (state, mx) in manual.items()
               if state == nbgrader_glue.UNANSWERED and mx > 0]  # a 0-point answer costs nothing
    return float(pending), missing


def _assignment_max(course_dir: Path, assignment: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gb:
        return {n.name: float(n.max_score) for n in gb.find_assignment(assignment).notebooks}



@dataclass
class GradeJob:
    """Everything one student's grading needs (picklable: a Dask task's argument).

    `run` holds the per-run settings shared by every job: template, reference_lib, nbdev_root,
    cache_dir, bwrap (None: unsandboxed), limits (tito.sandbox.Limits fields), driver.
    """
    assignment: str
    student: str
    folder: str
    course_id: str
    timeout: int
    run: dict


def grade_one(job: GradeJob) -> tuple[dict, bytes]:
    """Grade one student; returns (StudentGrade as a dict, tar of their output folder).

    Never raises for a problem of the submission; an infrastructure failure (nbgrader missing,
    disk full) is returned as a "failed" result whose reason starts with GRADING_ERROR, so the
    class run goes on and `--resume` grades that student again.

        >>> result, files = grade_one(job)            # doctest: +SKIP
        >>> result["score"], len(files) > 0
        (5.0, True)
    """
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix=f"tito-grade-{job.student}-") as tmp:
            staged = Path(tmp) / "out"
            result = grade_student(job, Path(tmp), staged)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(staged, arcname=".")
            return asdict(result), buf.getvalue()
    except Exception as e:  # noqa: BLE001 - one student's infrastructure failure must not stop the class
        why = f"{GRADING_ERROR}: {type(e).__name__}: {_first_line(str(e), 300)}"
        r = StudentGrade(job.student, 0.0, 0.0, "failed", why, [], [], round(time.perf_counter() - t0, 1),
                         SANDBOXED if job.run.get("bwrap") else UNSANDBOXED)
        return asdict(r), b""


def grade_student(job: GradeJob, tmp: Path, staged: Path) -> StudentGrade:
    """Autograde one student's notebooks in `tmp` (a fresh copy of the template); their files go
    to `staged` (result.json, gradebook.db, autograded/, feedback/)."""
    t0 = time.perf_counter()
    assignment, student, timeout = job.assignment, job.student, job.timeout
    tmp.chmod(0o711)  # the sandbox user may traverse to the folders bound into the sandbox, not list
    cdir = tmp / "course"
    _clone_course(Path(job.run["template"]), cdir, job.course_id, timeout)
    maxima = _assignment_max(cdir, assignment)  # from the copy: the template stays untouched
    wanted = {f"{n}.ipynb" for n in maxima}
    sub = cdir / "submitted" / student / assignment
    sub.mkdir(parents=True)
    submitted, unreadable = [], {}
    for nb in sorted(Path(job.folder).glob("*.ipynb")):
        if nb.name not in wanted:
            continue
        try:
            nbgrader_glue.write_normalized(nb, sub / nb.name)
            submitted.append(nb.name)
        except (ValueError, OSError) as e:  # not JSON, unreadable: that notebook fails
            unreadable[nb.name] = f"unreadable notebook: {type(e).__name__}: {_first_line(str(e))}"
    # data files the assignment ships (nbgrader copies source files only into the release)
    for f in (cdir / "source" / assignment).rglob("*"):
        rel = f.relative_to(cdir / "source" / assignment)
        if f.is_file() and f.suffix != ".ipynb" and not (sub / rel).exists():
            (sub / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, sub / rel)
    for d in (cdir, cdir / "autograded"):  # the notebook folder is bound read-only into the sandbox
        d.mkdir(exist_ok=True)
        d.chmod(0o711)
    plan = {**job.run, "source_dir": str(cdir / "source" / assignment), "timeout": timeout,
            "scratch": str(tmp / "scratch")}
    (tmp / "scratch").mkdir()
    (tmp / "scratch").chmod(0o711)
    plan_path = tmp / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    limit = max(240.0, 7.0 * timeout * max(1, len(submitted)))
    log = ""
    rc: int | None = 0
    env = {nbgrader_sandbox_env(): str(plan_path)}
    if submitted:  # autograde, then feedback, in one process (tito.nbgrader_run)
        rc, log = run_isolated([sys.executable, "-m", "tito.nbgrader_run", assignment, student], cdir, limit, env)
        steps = dict(re.findall(r"^TITO-NBGRADER (\w+) exit (-?\d+)$", log, re.M))
        if rc is not None:
            rc = int(steps.get("autograde", rc or 1))
    book = _read_gradebook(cdir, assignment, student)
    autograded = cdir / "autograded" / student / assignment
    feedback: list[str] = []
    notebooks: list[NotebookGrade] = []
    for stem in sorted(maxima):  # nbgrader names notebooks without ".ipynb"
        name, fname = stem, stem + ".ipynb"
        if fname in unreadable:
            notebooks.append(NotebookGrade(stem, 0.0, maxima[name], "failed", unreadable[fname]))
        elif fname not in submitted:
            notebooks.append(NotebookGrade(stem, 0.0, maxima[name], "missing", "notebook not submitted"))
        elif name not in book or not (autograded / fname).exists():
            why = ("autograde stopped: the whole run exceeded its limit of "
                   f"{limit:.0f} s" if rc is None else f"autograde failed (exit {rc}): {_log_reason(log)}")
            notebooks.append(NotebookGrade(stem, 0.0, maxima[name], "failed", why))
        else:
            score, mx, grades, manual = book[name]
            status, reason = analyse_notebook(autograded / fname, grades, timeout)
            pending, unanswered = manual_summary(manual)
            reason = "; ".join([r for r in [reason] if r] + unanswered)
            notebooks.append(NotebookGrade(stem, score, mx, status, reason, pending))
    staged.mkdir()
    if (cdir / "gradebook.db").exists():
        shutil.copy2(cdir / "gradebook.db", staged / "gradebook.db")
    if autograded.is_dir():
        shutil.copytree(autograded, staged / "autograded")
    fb = cdir / "feedback" / student / assignment
    if fb.is_dir():
        shutil.copytree(fb, staged / "feedback")
        feedback = sorted((Path("students") / student / "feedback" / p.relative_to(fb)).as_posix()
                          for p in fb.rglob("*.html"))
    score = sum(n.score for n in notebooks)
    mx = sum(n.max_score for n in notebooks)
    worst = min((n.status for n in notebooks), key=STATUS_ORDER.index, default="missing")
    reasons = [f"{n.notebook}: {n.reason}" for n in notebooks if n.reason and n.status != "missing"]
    missing = [n.notebook for n in notebooks if n.status == "missing"]
    if missing and len(missing) < len(notebooks):
        reasons.append("not submitted: " + ", ".join(missing))
    elif missing:
        reasons.append("no graded notebook submitted")
    result = StudentGrade(student, score, mx, worst, " | ".join(reasons), notebooks, feedback,
                          round(time.perf_counter() - t0, 1), SANDBOXED if job.run.get("bwrap") else UNSANDBOXED,
                          sum(n.manual_pending for n in notebooks))
    nbgrader_glue.atomic_write(staged / "result.json", json.dumps(asdict(result), indent=1) + "\n")
    return result


def nbgrader_sandbox_env() -> str:
    from tito.nbgrader_sandbox import PLAN_ENV
    return PLAN_ENV



def tree_hash(d: Path) -> str:
    """sha256 over the relative paths and bytes of every file under `d` ("" if it is missing)."""
    d = Path(d)
    if not d.exists():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        h.update(f.relative_to(d).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _stat_print(d: Path) -> str:
    """Cheap fingerprint of a results folder: relative path, size and mtime of each file."""
    return "\n".join(f"{f.relative_to(d).as_posix()} {f.stat().st_size} {f.stat().st_mtime_ns}"
                     for f in sorted(Path(d).rglob("*")) if f.is_file()) if Path(d).exists() else ""


def _log_reason(log: str) -> str:
    lines = [l.strip() for l in _ANSI.sub("", log).splitlines() if l.strip()]
    errs = [l for l in lines if "[ERROR]" in l or "Error" in l]
    return (errs[-1] if errs else (lines[-1] if lines else "no output"))[:300]


# ---- class run -----------------------------------------------------------------------------

def read_csv(path: Path) -> list[dict]:
    """The rows of a grades.csv, each with every CSV_FIELDS key (a column a file from an older
    tito lacks, e.g. manual_pending, reads as "")."""
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [{**dict.fromkeys(CSV_FIELDS, ""), **row} for row in csv.DictReader(f)]


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbgrader_glue.atomic_write(path, buf.getvalue())


def default_output_dir(course: Course, module: str) -> Path:
    return course.root / "build" / "grades" / module


# trusted warm-ups run once per grading run (course package, cache writable); the sandboxes then
# read the cache: key = a file of the course package, value = the code to run
WARMUPS = {"benchmarking/digits.py": "from {lib}.benchmarking.digits import default_digits_model; "
                                     "default_digits_model()"}


def warm_cache(course: Course, cache_dir: Path) -> float:
    """Fill `cache_dir` ($TINYTORCH_CACHE) with what the notebooks would otherwise compute in every
    sandbox (the digits model: trained once per run); returns the seconds it took."""
    t0 = time.perf_counter()
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = {**nbgrader_glue._nbgrader_env(), "TINYTORCH_CACHE": str(cache_dir),
           "PYTHONPATH": str(course.lib_dir.parent)}
    for rel, code in WARMUPS.items():
        if not (course.lib_dir / rel).is_file():
            continue
        p = subprocess.run([sys.executable, "-c", code.format(lib=course.lib_dir.name)], cwd=course.root, env=env,
                           capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise TitoError(f"warming the grading cache ({rel}) failed: {_log_reason(p.stdout + p.stderr)}")
    for p in [cache_dir, *cache_dir.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)  # readable by the sandbox user, written by nobody
    return time.perf_counter() - t0


def published(out_dir: Path) -> dict[str, StudentGrade]:
    """Students whose result is in OUTPUT/students/<id>/result.json (grading errors excluded)."""
    out = {}
    for f in sorted((out_dir / "students").glob("*/result.json")):
        try:
            r = StudentGrade.from_dict(json.loads(f.read_text(encoding="utf-8")))
        except (ValueError, TypeError, KeyError):
            continue
        if not r.reason.startswith(GRADING_ERROR):
            out[r.student] = r
    return out


def publish(out_dir: Path, result: StudentGrade, files: bytes) -> Path:
    """Swap OUTPUT/students/<id>/ for the files of `result` in one rename; returns that folder."""
    dest = out_dir / "students" / result.student
    dest.parent.mkdir(parents=True, exist_ok=True)
    new = dest.with_name(f".{result.student}.new-{os.getpid()}")
    old = dest.with_name(f".{result.student}.old-{os.getpid()}")
    for d in (new, old):
        if d.exists():
            shutil.rmtree(d)
    new.mkdir()
    if files:
        with tarfile.open(fileobj=io.BytesIO(files), mode="r:gz") as tar:
            tar.extractall(new, filter="data")
    nbgrader_glue.atomic_write(new / "result.json", json.dumps(asdict(result), indent=1) + "\n")
    if dest.exists():
        os.replace(dest, old)
    os.replace(new, dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def _sort(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["student"], row["notebook"] == TOTAL, row["notebook"]))


def grade(course: Course, module: str, submissions_dir: Path, output_dir: Path | None = None,
          students: list[str] | None = None, timeout: int | None = None,
          notebooks: list[Path] | None = None, progress=print, jobs: int | None = None,
          scheduler: str | None = None, no_sandbox: bool = False, resume: bool = False,
          show_progress: bool = False, limits: sandbox.Limits | None = None) -> list[StudentGrade]:
    """Grade every student in `submissions_dir` (or only `students`); returns their grades.

    notebooks: the graded notebooks (default: the module's notebooks with nbgrader cells).
    jobs: students graded at once (default: the CPU cores); scheduler: a Dask scheduler address
    (then the cluster's workers grade). no_sandbox: run student code without bubblewrap (refused
    otherwise when bwrap is missing). resume: skip students whose result is already published.

        >>> grade(Course.load(), "19", "subs", jobs=2)      # doctest: +SKIP
        [StudentGrade(student='ann', score=74.0, ...), ...]
    """
    bwrap = sandbox.require_sandbox(no_sandbox)
    limits = limits or sandbox.Limits()
    timeout = int(timeout or course.cell_timeout)
    out_dir = Path(output_dir or default_output_dir(course, module)).resolve()
    nbs = notebooks or nbgrader_glue.module_assignment_notebooks(course.nbs_dir, module)
    if not nbs:
        raise TitoError(f"module {module} has no graded notebooks in {course.nbs_dir / module}")
    scan = scan_submissions(Path(submissions_dir), module, {Path(p).name for p in nbs})
    found = scan.found
    if students:
        unknown = [s for s in students if s not in found]
        if unknown:
            raise TitoError(f"no submission for student(s) {', '.join(unknown)} in {submissions_dir}; "
                            f"found: {', '.join(found) or 'none'}")
        found = {s: found[s] for s in students}
    elif not found:
        raise TitoError(f"no student folders with notebooks in {submissions_dir} (expected "
                        f"<student>/*.ipynb or submitted/<student>/{module}/*.ipynb)"
                        + ("; " + "; ".join(scan.problems) if scan.problems else ""))
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "grades.csv"
    csv_rows = read_csv(csv_path)
    results: list[StudentGrade] = []
    if resume:
        have = published(out_dir)
        in_csv = {row["student"] for row in csv_rows}
        for s in [s for s in found if s in have]:
            if s not in in_csv:  # published but the run stopped before grades.csv: recover the rows
                csv_rows = _sort(csv_rows + have[s].rows())
            results.append(have[s])
            del found[s]
        write_csv(csv_path, csv_rows)
    if scan.problems:
        nbgrader_glue.atomic_write(out_dir / "problems.txt", "\n".join(scan.problems) + "\n")
        for line in scan.problems:
            progress(f"  not graded: {line}")
    elif not students:
        (out_dir / "problems.txt").unlink(missing_ok=True)
    if bwrap is None:
        progress("!" * 78 + "\n!! NOT SANDBOXED (--no-sandbox): student code runs with your permissions and can "
                 "read the solutions;\n!! grades.csv records this in its sandbox column.\n" + "!" * 78)
    workers = jobs or (1 if scheduler else _default_jobs())
    progress(f"grading {module}: {len(found)} student(s)" + (f" ({len(results)} already graded)" if resume else "")
             + f", {len(nbs)} graded notebook(s), per-cell timeout {timeout} s, "
             + (f"Dask scheduler {scheduler}" if scheduler else f"{workers} at once")
             + (", sandbox: bubblewrap" if bwrap else ", NOT SANDBOXED"))
    if not found:
        return results
    from tito.commands.release import data_files
    run_dir = out_dir / f".run-{os.getpid()}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    try:
        template = build_template(run_dir / "course", module, nbs, course.course_id, timeout,
                                  data_files(course, module))
        warm = warm_cache(course, run_dir / "cache")
        if warm > 1:
            progress(f"  warmed the read-only cache once for all students in {warm:.1f} s")
        run = {"template": str(template), "reference_lib": str(course.lib_dir.resolve()),
               "nbdev_root": str(course.root), "cache_dir": str(run_dir / "cache"), "bwrap": bwrap,
               "limits": asdict(limits), "driver": str(Path(__file__).resolve().parent.parent / "sandbox_driver.py")}
        todo = [GradeJob(module, s, str(folder), course.course_id, timeout, run) for s, folder in found.items()]
        guard = tree_hash(template)

        def on_done(job: GradeJob, res) -> bool:
            nonlocal csv_rows
            if isinstance(res, BaseException):  # the task itself was lost (a Dask worker died)
                res = (asdict(StudentGrade(job.student, 0.0, 0.0, "failed",
                                           f"{GRADING_ERROR}: {type(res).__name__}: {_first_line(str(res))}",
                                           sandbox=SANDBOXED if bwrap else UNSANDBOXED)), b"")
            r = StudentGrade.from_dict(res[0])
            changed = [str(template)] if tree_hash(template) != guard else []
            if read_csv(csv_path) != csv_rows:
                changed.append(str(csv_path))
            if changed:
                raise TitoError(f"grading stopped: {', '.join(changed)} changed while {job.student}'s code ran; "
                                f"inspect {job.folder} before trusting any grade")
            publish(out_dir, r, res[1])
            csv_rows = _sort([row for row in csv_rows if row["student"] != r.student] + r.rows())
            write_csv(csv_path, csv_rows)  # after each student: an interrupted run keeps what it graded
            results.append(r)
            progress(f"  {r.student}: {_num(r.score)}/{_num(r.max_score)} {r.status} ({r.seconds:.0f} s)"
                     + (f", {_num(r.manual_pending)} point(s) of written answers to grade by hand"
                        if r.manual_pending else "")
                     + (f"\n      {r.reason[:300]}" if r.reason else ""))
            return r.status == "failed"

        from tito.grade_pool import run_tasks
        run_tasks(grade_one, todo, on_done, workers=workers, scheduler=scheduler, show_progress=show_progress)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return sorted(results, key=lambda r: r.student)


def _default_jobs() -> int:
    from tito.grade_pool import default_workers
    return default_workers()


def run(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    out = Path(args.output_dir) if args.output_dir else default_output_dir(course, module)
    limits = sandbox.Limits(memory_mb=args.memory_limit, processes=args.process_limit)
    results = grade(course, module, Path(args.submissions), out, [args.student] if args.student else None,
                    args.timeout, jobs=args.jobs, scheduler=args.scheduler, no_sandbox=args.no_sandbox,
                    resume=args.resume, show_progress=True, limits=limits)
    print()
    print(f"{'student':<20} {'score':>12} {'manual':>7}  status")
    for r in results:
        print(f"{r.student:<20} {_num(r.score) + '/' + _num(r.max_score):>12} {_num(r.manual_pending):>7}  {r.status}")
    if any(r.manual_pending for r in results):
        print("\nmanual: points of written answers awaiting manual grading (nbgrader formgrader on "
              "students/<student>/gradebook.db); they are in the maximum, not yet in the score")
    try:
        shown = out.resolve().relative_to(course.root)
    except ValueError:
        shown = out
    print(f"\ngrades: {shown}/grades.csv; feedback: {shown}/students/<student>/feedback/*.html")
    if (out / "problems.txt").exists() and not args.student:
        print(f"not graded (see {shown}/problems.txt): "
              f"{len((out / 'problems.txt').read_text(encoding='utf-8').splitlines())} line(s)")
    if args.no_sandbox:
        print("WARNING: this run was NOT SANDBOXED (--no-sandbox); grades.csv says so in its sandbox column")
    return 0
