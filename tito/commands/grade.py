"""`tito grade MODULE SUBMISSIONS_DIR`: autograde a class with nbgrader, one student at a time.

Submissions layout (student id = folder name), either
    SUBMISSIONS_DIR/<student>/*.ipynb                         one folder per student, or
    SUBMISSIONS_DIR/[submitted/]<student>/<MODULE>/*.ipynb    nbgrader's submitted/ layout.
Only the module's graded notebooks (those with nbgrader cells) are graded; others are ignored.

For each student, in order:
1. a fresh temporary nbgrader course folder gets a copy of the template (generated once per
   run from the module's notebooks: source with solutions and hidden tests, gradebook.db)
   and a copy of that student's notebooks only; the submitted files are read, never written;
2. `nbgrader autograde` runs there (per-cell timeout = settings.ini cell_timeout, or
   --timeout), in its own process group with an overall limit, so a crash, a syntax error
   or an infinite loop costs that student their points, not the class run;
3. `nbgrader generate_feedback` writes the HTML feedback;
4. the parent reads the scores from that folder's gradebook (SQLite) and the failure reasons
   from the autograded notebooks, copies gradebook, autograded notebooks and feedback into
   OUTPUT/students/<student>/, and deletes the temporary folder.
Student code therefore never runs next to another student's files or the class results.

Output (default build/grades/NN_name/):
    grades.csv       student, notebook, score, max_score, status, reason (one row per graded
                     notebook, plus a "(total)" row per student); rewritten atomically, and
                     `--student ID` replaces only that student's rows
    students/<id>/   result.json, gradebook.db, autograded/*.ipynb, feedback/*.html
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
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tito import nbgrader_glue
from tito.config import Course, TitoError

TOTAL = "(total)"
CSV_FIELDS = ["student", "notebook", "score", "max_score", "status", "reason"]
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

    def rows(self) -> list[dict]:
        out = [{"student": self.student, "notebook": n.notebook, "score": _num(n.score),
                "max_score": _num(n.max_score), "status": n.status, "reason": n.reason} for n in self.notebooks]
        out.append({"student": self.student, "notebook": TOTAL, "score": _num(self.score),
                    "max_score": _num(self.max_score), "status": self.status, "reason": self.reason})
        return out


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---- submissions ----------------------------------------------------------------------------

def find_submissions(submissions_dir: Path, assignment: str) -> dict[str, Path]:
    """student id -> folder holding that student's notebooks (see module doc for layouts)."""
    base = Path(submissions_dir)
    if not base.is_dir():
        raise TitoError(f"submissions folder {base} does not exist")
    if (base / "submitted").is_dir():
        base = base / "submitted"
    out: dict[str, Path] = {}
    for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        folder = d / assignment if (d / assignment).is_dir() else d
        if not any(folder.glob("*.ipynb")):
            continue
        if not _STUDENT_ID.match(d.name):
            raise TitoError(f"student folder name {d.name!r} is not a usable student id "
                            "(letters, digits, _ . @ + - only)")
        out[d.name] = folder
    if not out:
        raise TitoError(f"no student folders with notebooks in {submissions_dir} (expected "
                        f"<student>/*.ipynb or submitted/<student>/{assignment}/*.ipynb)")
    return out


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
    nbgrader_glue.write_course_config(dest, course_id, timeout)


# ---- one student ---------------------------------------------------------------------------

def run_isolated(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str]:
    """Run `cmd` in its own process group; on timeout kill the whole group (kernels included).

    Returns (exit code or None on timeout, combined output).
    """
    env = nbgrader_glue._nbgrader_env()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        try:
            rc: int | None = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the kernels nbgrader started, too
            except ProcessLookupError:
                pass
            p.wait()
        log.seek(0)
        text = log.read()
    nbgrader_glue.check_config_loaded(text, cmd[3:])
    return rc, text


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
    """{notebook: (score, max, {grade_id: (score, max)})} from course_dir/gradebook.db; {} if none."""
    from nbgrader.api import Gradebook, MissingEntry

    db = f"sqlite:///{course_dir / 'gradebook.db'}"
    out = {}
    with Gradebook(db) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return out
        for n in sub.notebooks:
            out[n.name] = (float(n.score), float(n.max_score),
                           {g.name: (float(g.score), float(g.max_score)) for g in n.grades})
    return out


def _assignment_max(course_dir: Path, assignment: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gb:
        return {n.name: float(n.max_score) for n in gb.find_assignment(assignment).notebooks}


def grade_student(template: Path, assignment: str, student: str, folder: Path, out_dir: Path,
                  course_id: str, timeout: int, overall_timeout: float | None = None) -> StudentGrade:
    """Autograde one student's `folder` in a temporary copy of `template`; results to out_dir."""
    t0 = time.perf_counter()
    student_out = out_dir / "students" / student
    with tempfile.TemporaryDirectory(prefix=f"tito-grade-{student}-") as tmp:
        cdir = Path(tmp) / "course"
        _clone_course(template, cdir, course_id, timeout)
        maxima = _assignment_max(cdir, assignment)  # from the copy: the template stays untouched
        wanted = {f"{n}.ipynb" for n in maxima}
        sub = cdir / "submitted" / student / assignment
        sub.mkdir(parents=True)
        submitted, unreadable = [], {}
        for nb in sorted(Path(folder).glob("*.ipynb")):
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
        limit = overall_timeout or max(120.0, 3.0 * timeout * max(1, len(submitted)))
        log = ""
        rc: int | None = 0
        if submitted:
            rc, log = run_isolated([sys.executable, "-m", "nbgrader", "autograde", assignment,
                                    "--student", student, "--force"], cdir, limit)
        book = _read_gradebook(cdir, assignment, student)
        autograded = cdir / "autograded" / student / assignment
        feedback: list[str] = []
        if book:
            frc, flog = run_isolated([sys.executable, "-m", "nbgrader", "generate_feedback", assignment,
                                      "--student", student, "--force"], cdir, 300)
            if frc != 0:
                log += "\n" + flog
        # ---- parent side: collect, then copy into the student's own output folder ----
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
                score, mx, grades = book[name]
                status, reason = analyse_notebook(autograded / fname, grades, timeout)
                notebooks.append(NotebookGrade(stem, score, mx, status, reason))
        staged = Path(tmp) / "out"
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
                              round(time.perf_counter() - t0, 1))
        nbgrader_glue.atomic_write(staged / "result.json", json.dumps(asdict(result), indent=1) + "\n")
        student_out.parent.mkdir(parents=True, exist_ok=True)
        old = student_out.with_name(f".{student}.old-{os.getpid()}")
        if student_out.exists():
            os.replace(student_out, old)
        shutil.copytree(staged, student_out)
        if old.exists():
            shutil.rmtree(old)
    return result


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
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbgrader_glue.atomic_write(path, buf.getvalue())


def default_output_dir(course: Course, module: str) -> Path:
    return course.root / "build" / "grades" / module


def grade(course: Course, module: str, submissions_dir: Path, output_dir: Path | None = None,
          students: list[str] | None = None, timeout: int | None = None,
          notebooks: list[Path] | None = None, progress=print) -> list[StudentGrade]:
    """Grade every student in `submissions_dir` (or only `students`); returns their grades.

    notebooks: the graded notebooks (default: the module's notebooks with nbgrader cells).
    """
    timeout = int(timeout or course.cell_timeout)
    out_dir = Path(output_dir or default_output_dir(course, module)).resolve()
    found = find_submissions(Path(submissions_dir), module)
    if students:
        unknown = [s for s in students if s not in found]
        if unknown:
            raise TitoError(f"no submission for student(s) {', '.join(unknown)} in {submissions_dir}; "
                            f"found: {', '.join(found)}")
        found = {s: found[s] for s in students}
    nbs = notebooks or nbgrader_glue.module_assignment_notebooks(course.nbs_dir, module)
    if not nbs:
        raise TitoError(f"module {module} has no graded notebooks in {course.nbs_dir / module}")
    from tito.commands.release import data_files
    out_dir.mkdir(parents=True, exist_ok=True)
    progress(f"grading {module}: {len(found)} student(s), {len(nbs)} graded notebook(s), "
             f"per-cell timeout {timeout} s")
    results: list[StudentGrade] = []
    with tempfile.TemporaryDirectory(prefix="tito-grade-template-") as tmp:
        template = build_template(Path(tmp) / "course", module, nbs, course.course_id, timeout,
                                  data_files(course, module))
        csv_path = out_dir / "grades.csv"
        # student code runs as this user: it cannot reach the other students' temporary folders
        # (made one at a time, deleted after each), but could look for the template or the
        # results. Both are fingerprinted and checked after every student.
        guarded = {template: tree_hash(template)}
        csv_rows = read_csv(csv_path)
        for student, folder in found.items():
            progress(f"  {student}: autograding ...")
            r = grade_student(template, module, student, folder, out_dir, course.course_id, timeout)
            results.append(r)
            changed = [str(k) for k, v in guarded.items() if (tree_hash(k) if k == template else _stat_print(k)) != v]
            if read_csv(csv_path) != csv_rows:
                changed.append(str(csv_path))
            if changed:
                raise TitoError(f"grading stopped: {', '.join(changed)} changed while {student}'s code ran; "
                                f"inspect {folder} before trusting any grade")
            csv_rows = [row for row in csv_rows if row["student"] != student] + r.rows()
            csv_rows.sort(key=lambda row: (row["student"], row["notebook"] == TOTAL, row["notebook"]))
            write_csv(csv_path, csv_rows)  # after each student: an interrupted run keeps what it graded
            guarded[out_dir / "students" / student] = _stat_print(out_dir / "students" / student)
            progress(f"  {student}: {_num(r.score)}/{_num(r.max_score)} {r.status} ({r.seconds:.0f} s)"
                     + (f"\n      {r.reason[:300]}" if r.reason else ""))
    return results


def run(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    out = Path(args.output_dir) if args.output_dir else default_output_dir(course, module)
    results = grade(course, module, Path(args.submissions), out, [args.student] if args.student else None,
                    args.timeout)
    print()
    print(f"{'student':<20} {'score':>12}  status")
    for r in results:
        print(f"{r.student:<20} {_num(r.score) + '/' + _num(r.max_score):>12}  {r.status}")
    try:
        shown = out.resolve().relative_to(course.root)
    except ValueError:
        shown = out
    print(f"\ngrades: {shown}/grades.csv; feedback: {shown}/students/<student>/feedback/*.html")
    return 0
