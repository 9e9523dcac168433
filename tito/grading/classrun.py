"""The class run: `grade(course, module, submissions)` grades every student, in parallel or on Dask.

Submissions layout (student id = folder name), either
    SUBMISSIONS_DIR/<student>/*.ipynb                         one folder per student, or
    SUBMISSIONS_DIR/[submitted/]<student>/<MODULE>/*.ipynb    nbgrader's submitted/ layout.
A folder whose name is no usable id, a folder without notebooks, a non-notebook file, a notebook
that is not part of the assignment, and anything tito will not read (a pipe, device, socket or link, a
file above its size cap: tito.isolation.untrusted) is a line in the report (and in OUTPUT/problems.txt),
never a crash, a stall or a read.

Once per run: the nbgrader template (release version of every cell, gradebook.db), the course's
reference package as byte code only, the host's code for the sandbox, a read-only cache warmed by
trusted code (the digits model, trained once) and the seed of the hidden tests. Then one task per
student (tito.grading.per_student.grade_one; N at once with --jobs, or on a Dask cluster with
--scheduler). The parent publishes each result as it arrives: OUTPUT/students/<student>/ swapped in
whole, then grades.csv rewritten atomically. `--resume` skips students whose result is published.

Output (default build/grades/NN_name/):
    grades.csv       student, notebook, score, max_score, manual_pending, status, reason, sandbox
                     (one row per graded notebook, plus a "(total)" row per student); `--student
                     ID` replaces only that student's rows
    students/<id>/   result.json (every test's verdict and message), autograded/*.ipynb, feedback/*.html
    nbgrader/        the class's nbgrader course directory: one gradebook.db with every student (judge's
                     points, written answers for formgrader), autograded/<id>/NN_name/ (tito.grading.course_dir)
    problems.txt     submission folders and files that were not graded, one line each
    run.json         the run's secret seed and settings (`--seed` repeats a run's hidden-test inputs; each
                     student's inputs come from it, the student id and their submission: student_seed)
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import tempfile
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tito.config import Course, TitoError
from tito.grading import course_dir, final_grades, gradebook, package
from tito.grading.autograder import PREIMPORT
from tito.grading.job import GradeJob, RunSettings
from tito.grading.per_student import GRADING_ERROR, GRADING_FAILED, HOST_CAPS, TOTAL, StudentGrade, first_line, grade_one, num
from tito.isolation import limits as limits_mod
from tito.isolation import process, sandbox, untrusted
from tito.isolation.pool import default_workers, run_tasks
from tito.isolation.sanitize import console_line
from tito.isolation.untrusted import same_ids, student_id_problem
from tito.notebooks import nbgrader_glue
from tito.notebooks.imports import module_files, package_graph
from tito.notebooks.nbfile import atomic_write

CSV_FIELDS = ["student", "notebook", "score", "max_score", "manual_pending", "status", "reason", "sandbox"]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
HOST_FILES = ["__init__.py", "isolation/__init__.py", "isolation/protocol.py", "isolation/namespaces.py",
              "isolation/procs.py", "isolation/seccomp.py", "grading/__init__.py", "grading/host.py"]


# ---- submissions ----------------------------------------------------------------------------

@dataclass
class Scan:
    """What a submissions folder holds: student id -> notebook folder, and lines for the report."""
    found: dict[str, Path]
    problems: list[str]


def scan_submissions(submissions_dir: Path, assignment: str, wanted: set[str] | None = None,
                     notebook_mb: int = untrusted.DEFAULT_NOTEBOOK_MB,
                     folder_mb: int = untrusted.DEFAULT_FOLDER_MB) -> Scan:
    """Student folders of `submissions_dir` (see module doc for layouts) and problem lines.

    `wanted`: the assignment's notebook file names; other files are reported. Nothing is read:
    entries are looked at with `lstat` (tito.isolation.untrusted: links, pipes, devices and sockets
    are reported, and notebooks above `notebook_mb` and folders above `folder_mb` MB).

    >>> scan_submissions(Path("/nonexistent"), "01_x")   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    tito.config.TitoError: submissions folder /nonexistent does not exist
    """
    shown = untrusted.shown
    base = Path(submissions_dir)
    if not base.is_dir():
        raise TitoError(f"submissions folder {base} does not exist")
    if (base / "submitted").is_dir():
        base = base / "submitted"
    found: dict[str, Path] = {}
    problems: list[str] = []
    for d in sorted(p for p in base.iterdir() if not p.name.startswith(".")):
        if d.is_symlink():  # a link could point at anything the grader may read: never followed
            problems.append(f"{shown(d.name)}: a symbolic link, not a student folder; not graded")
            continue
        if not d.is_dir():
            problems.append(f"{shown(d.name)}: not a student folder (a file in {base}); ignored")
            continue
        folder = d / assignment if (d / assignment).is_dir() and not (d / assignment).is_symlink() else d
        if not any(folder.glob("*.ipynb")):
            problems.append(f"{shown(d.name)}: no notebooks in {shown(str(folder))}; not graded")
            continue
        why = student_id_problem(d.name)
        if why:
            problems.append(f"{d.name!r}: as a student id, the folder name is {why}; not graded")
            continue
        found[d.name] = folder
        seen = untrusted.survey(folder, notebook_mb, folder_mb)
        for rel, why in seen.refused.items():
            if rel.endswith(".ipynb") and "/" not in rel and (wanted is None or rel in wanted):
                why += "; that notebook is not graded"
            problems.append(f"{d.name}: " + untrusted.reason(rel, why))
        if seen.over:
            problems.append(f"{d.name}: {seen.over}: only the graded notebooks are copied into the sandbox")
        for f in seen.files:
            if "/" in f:
                continue
            if not f.endswith(".ipynb"):
                problems.append(f"{d.name}: {shown(f)} is not a notebook; ignored")
            elif wanted is not None and f not in wanted:
                problems.append(f"{d.name}: {shown(f)} is not part of {assignment}; ignored")
    for name, others in same_ids(found).items():  # neither can be told to be the one a grade is for
        problems.append(f"{name}: the same student id as {', '.join(others)} but for case or Unicode form (a "
                        "spreadsheet, a file system or a person would take them for one student); not graded: "
                        "rename the folders")
        del found[name]
    return Scan(found, problems)


def assignment_files(course: Course, module: str, graded: list[Path]) -> set[str]:
    """The notebook file names of the assignment: every notebook handed out, graded cells or not (Module 19's
    defaults_dev and digits_dev hold none), and the graded ones."""
    return {Path(p).name for p in [*graded, *course.notebooks(module)]}


# ---- per run ----------------------------------------------------------------------------------

def tree_hash(d: Path) -> str:
    """sha256 over the relative paths and bytes of every file under `d` ("" if it is missing)."""
    d = Path(d)
    if not d.exists():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        h.update(f.relative_to(d).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _log_reason(log: str) -> str:
    lines = [l.strip() for l in _ANSI.sub("", log).splitlines() if l.strip()]
    errs = [l for l in lines if "[ERROR]" in l or "Error" in l]
    return (errs[-1] if errs else (lines[-1] if lines else "no output"))[:300]



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
    env = {**nbgrader_glue.nbgrader_env(), "TINYTORCH_CACHE": str(cache_dir),
           "PYTHONPATH": str(course.lib_dir.parent)}
    for rel, code in WARMUPS.items():
        if not (course.lib_dir / rel).is_file():
            continue
        done = process.run([sys.executable, "-c", code.format(lib=course.lib_dir.name)], cwd=course.root, env=env,
                           timeout=1800)
        if done.returncode != 0:
            raise TitoError(f"warming the grading cache ({rel}) failed: {_log_reason(done.output)}")
    for p in [cache_dir, *cache_dir.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)  # readable by the sandbox user, written by nobody
    return time.perf_counter() - t0


def work_root() -> Path:
    """Where students' work folders go: never under /tmp, which every notebook's process replaces with a
    private one (the folder it shares with the judge would vanish under it); /var/tmp where it exists."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path(tempfile.gettempdir())
    return base / f"tito-grade-{os.getpid()}"


def tito_library(dest: Path, files: list[str] | None = None) -> Path:
    """DEST/tito: a copy of tito's code for a sandbox (`files`, relative to the package: only those;
    default: all of it, for the judge), readable by every uid. Returns DEST."""
    here = Path(__file__).resolve().parent.parent
    rels = files or [p.relative_to(here).as_posix() for p in here.rglob("*.py")]
    for rel in rels:
        (dest / "tito" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(here / rel, dest / "tito" / rel)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


def _hash_files(h, files) -> None:
    for f in sorted(Path(p) for p in files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")


def run_key(course: Course, notebooks: list[Path], data: dict[str, Path], seed: int, timeout: int,
            limits: sandbox.Limits) -> str:
    """What a grade depends on besides the student's files: the tests (source notebooks), the reference
    package, the data, tito's grading code, the seed, the limits."""
    h = hashlib.sha256(json.dumps([seed, timeout, asdict(limits), course.student_seconds]).encode())
    _hash_files(h, notebooks)
    _hash_files(h, sorted(course.lib_dir.rglob("*.py")))
    _hash_files(h, data.values())
    _hash_files(h, sorted(Path(__file__).resolve().parent.rglob("*.py")))
    return h.hexdigest()


def submission_hash(folder: Path, wanted: set[str], notebook_mb: int = untrusted.DEFAULT_NOTEBOOK_MB,
                    folder_mb: int = untrusted.DEFAULT_FOLDER_MB) -> str:
    """sha256 of what the student's sandbox gets: the graded notebooks (names and bytes) and every other
    file copied beside them (a notebook may run `answer.py`: changing it alone must draw fresh hidden
    inputs and be graded again). A file tito will not read (tito.isolation.untrusted: not a regular file,
    too large) counts by its reason, unread."""
    h = hashlib.sha256()
    seen = untrusted.survey(folder, notebook_mb, folder_mb)
    others = [] if seen.over else sorted(f for f in seen.files if f not in wanted)
    for name, cap in [*((n, notebook_mb) for n in sorted(wanted)), *((f, folder_mb) for f in others)]:
        path = Path(folder) / name
        if not os.path.lexists(path):
            continue
        try:
            data = untrusted.read_regular(path, cap * untrusted.MB)
        except untrusted.Refused as e:
            data = f"refused: {e}".encode()
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def student_key(run: str, content: str) -> str:
    """The run's key with the hash of the student's graded notebooks: equal keys, equal grades (`--resume`)."""
    return hashlib.sha256(f"{run}\0{content}".encode()).hexdigest()


def student_seed(run_seed: int, student: str, submission: str) -> int:
    """The seed of one student's hidden-test inputs: from the run's secret seed, the student and the
    hash of their submission. Grading the same files again draws the same inputs; a changed submission
    (a resubmission, even under `--resume`) draws fresh ones, so answers harvested from an earlier
    grading are worth nothing; the run's seed cannot be worked back from it (sha256).

    >>> student_seed(7, "ann", "ab") == student_seed(7, "ann", "ab") != student_seed(7, "ann", "ac")
    True
    """
    digest = hashlib.sha256(f"tito-hidden-tests\0{run_seed}\0{student}\0{submission}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # 63 bits: any numpy seed


def published(out_dir: Path) -> dict[str, StudentGrade]:
    """Students whose result is in OUTPUT/students/<id>/result.json (those whose grading failed excluded)."""
    out = {}
    for f in sorted((out_dir / "students").glob("*/result.json")):
        try:
            r = StudentGrade.from_dict(json.loads(f.read_text(encoding="utf-8")))
        except (ValueError, TypeError, KeyError):
            continue
        if not r.reason.startswith(GRADING_ERROR) and not grading_failed(r):
            out[r.student] = r
    return out


def grading_failed(r: StudentGrade) -> bool:
    """Whether tito failed to grade some of `r` (the sandbox did not start, the judge crashed or reported nothing):
    no grade there, as opposed to the student's own failures (tests failed, timeout, refused, missing)."""
    return r.status == GRADING_FAILED or any(n.status == GRADING_FAILED for n in r.notebooks)


def outcome(r: StudentGrade) -> str:
    """One word for the console and the progress bar: "grading failed" (tito's), else "passed" or the student's
    own "tests failed" (a failed test, a raised cell, a timeout, a refused or missing notebook)."""
    if grading_failed(r):
        return GRADING_FAILED
    return "passed" if r.status == "passed" else "tests failed"


def plural(n: int | float, word: str, many: str | None = None) -> str:
    """`n word` with the word in the plural where n is not 1.

    >>> plural(1, "student"), plural(3, "student"), plural(0, "file"), plural(2, "match", "matches")
    ('1 student', '3 students', '0 files', '2 matches')
    """
    return f"{num(n) if isinstance(n, float) else n} {word if n == 1 else (many or word + 's')}"


def closing_line(results: list[StudentGrade], not_graded: int = 0) -> str:
    """The run's last line: how many students were graded, how many of those passed every test, how many
    failed some (theirs), and for how many grading itself failed (tito's; `tito grade` then exits 1).

    >>> ok = StudentGrade("a", 1, 1, "passed", ""); bad = StudentGrade("b", 0, 1, "grading failed", "")
    >>> closing_line([ok, bad], not_graded=1)
    '2 students: 1 graded (1 passed every test, 0 with failed tests); grading FAILED for 1 student (b); 1 line in problems.txt (not graded)'
    """
    kinds = [outcome(r) for r in results]
    failed = [r.student for r, k in zip(results, kinds) if k == GRADING_FAILED]
    graded = len(results) - len(failed)
    line = (f"{plural(len(results), 'student')}: {graded} graded ({kinds.count('passed')} passed every test, "
            f"{kinds.count('tests failed')} with failed tests)")
    if failed:
        shown = ", ".join(failed[:10]) + (", ..." if len(failed) > 10 else "")
        line += f"; grading FAILED for {plural(len(failed), 'student')} ({shown})"
    if not_graded:
        line += f"; {plural(not_graded, 'line')} in problems.txt (not graded)"
    return line


def extract_plain(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract an archive of plain files and folders under `dest`, refusing anything else.

    Python >= 3.11.4 has tarfile's "data" filter; on older ones (Debian 12's 3.11.2) the same
    refusals are checked here first: links, devices and fifos, absolute names and names leaving
    `dest`; files get no special mode bits.
    """
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = Path(dest).resolve()
    members = tar.getmembers()
    for m in members:
        target = (root / m.name).resolve()
        if not (m.isreg() or m.isdir()) or Path(m.name).is_absolute() or not target.is_relative_to(root):
            raise tarfile.TarError(f"refusing archive member {m.name!r}: only plain files and folders under "
                                   f"the destination are extracted")
        m.mode = (m.mode & 0o755) | (0o700 if m.isdir() else 0o600)
        m.uid = m.gid = 0
        m.uname = m.gname = ""
    tar.extractall(dest, members=members)


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
    try:
        if files:
            with tarfile.open(fileobj=io.BytesIO(files), mode="r:gz") as tar:
                extract_plain(tar, new)
        atomic_write(new / "result.json", json.dumps(asdict(result), indent=1) + "\n")
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)  # no half-made folder beside the published ones
        raise
    if dest.exists():
        os.replace(dest, old)
    try:
        os.replace(new, dest)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        if old.exists():
            os.replace(old, dest)  # the earlier result stays published
        raise
    shutil.rmtree(old, ignore_errors=True)
    return dest


def publish_one(out_dir: Path, module: str, job: GradeJob, res: tuple, label: str) -> tuple[StudentGrade, list[str]]:
    """Publish one student's result (their folder, then the class gradebook): (the result, the written answers
    flagged for regrading). Anything that fails on this student's files is this student's failure: the result
    becomes GRADING_FAILED with a GRADING_ERROR reason naming what failed (so `--resume` grades them again), nothing
    of theirs stays half-published, and the class run goes on."""
    try:
        r = StudentGrade.from_dict(res[0])
    except (TypeError, KeyError, ValueError) as e:
        return StudentGrade(job.student, 0.0, 0.0, GRADING_FAILED, f"{GRADING_ERROR}: their result could not be read "
                            f"({type(e).__name__})", sandbox=label), []
    try:
        publish(out_dir, r, res[1])
    except Exception as e:  # noqa: BLE001 - this student's files could not be published: theirs, not the class's
        return _failed(r, f"their files could not be published ({type(e).__name__}: {first_line(str(e))})"), []
    try:
        return r, course_dir.merge(out_dir, module, [r]).get(r.student, [])
    except Exception as e:  # noqa: BLE001 - as above, for the class gradebook; their published folder is withdrawn
        shutil.rmtree(out_dir / "students" / r.student, ignore_errors=True)
        return _failed(r, f"their result could not be added to the class gradebook ({type(e).__name__}: "
                          f"{first_line(str(e))})"), []


def _failed(r: StudentGrade, why: str) -> StudentGrade:
    return StudentGrade(r.student, 0.0, r.max_score, GRADING_FAILED, f"{GRADING_ERROR}: {r.student}: {why}",
                        sandbox=r.sandbox, seed=r.seed, inputs=r.inputs)


def read_csv(path: Path) -> list[dict]:
    """The rows of a grades.csv, each with every CSV_FIELDS key (a column a file from an older
    tito lacks, e.g. manual_pending, reads as "")."""
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [{**dict.fromkeys(CSV_FIELDS, ""), **row} for row in csv.DictReader(f)]


def write_csv(path: Path, rows: list[dict]) -> None:
    """grades.csv: `rows` escaped for a spreadsheet (nbgrader_glue.atomic_write_csv), written atomically."""
    nbgrader_glue.atomic_write_csv(path, CSV_FIELDS, rows)


def as_written(rows: list[dict]) -> list[dict]:
    """`rows` as grades.csv holds them once written (`read_csv` reads the same back)."""
    return nbgrader_glue.csv_rows_as_written(CSV_FIELDS, rows)


def _sort(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["student"], row["notebook"] == TOTAL, row["notebook"]))


def pending_from_gradebook(out_dir: Path, module: str, r: StudentGrade) -> None:
    """Set `r`'s manual_pending (per notebook and in total) to what the class gradebook still needs graded by
    hand, answers graded in formgrader before this regrade excluded, and publish result.json again with it."""
    left = final_grades.hand_pending(course_dir.path(out_dir), module, r.student)
    if not left:
        return
    for n in r.notebooks:
        n.manual_pending = left.get(n.notebook, 0.0)
    r.manual_pending = left.get(TOTAL, sum(n.manual_pending for n in r.notebooks))
    atomic_write(out_dir / "students" / r.student / "result.json", json.dumps(asdict(r), indent=1) + "\n")


def grade(course: Course, module: str, submissions_dir: Path, output_dir: Path | None = None,
          students: list[str] | None = None, timeout: int | None = None,
          notebooks: list[Path] | None = None, progress=print, jobs: int | None = None,
          scheduler: str | None = None, no_sandbox: bool = False, resume: bool = False,
          show_progress: bool = False, limits: sandbox.Limits | None = None,
          seed: int | None = None, per_notebook: bool = False,
          extra_problems: list[str] | None = None) -> list[StudentGrade]:
    """Grade every student in `submissions_dir` (or only `students`); returns their grades. The stages: the
    sandbox and its limits (`_sandbox`), the students (`_students`), what `--resume` keeps (`_resume`), what
    the run says first (`_announce`), the run's shared files (`_prepare`), then one task per student, each
    published as it ends (`_publisher`).

    notebooks: the graded notebooks (default: the module's notebooks with nbgrader cells).
    jobs: students graded at once (default: the CPU cores); scheduler: a Dask scheduler address
    (then the cluster's workers grade). no_sandbox: run student code without a sandbox (refused
    otherwise when it is missing). resume: skip students whose result is already published.
    seed: the run's secret seed of the hidden tests (default: drawn for this run, recorded in run.json
    only); each student's hidden inputs come from it, their id and their submission's content
    (student_seed, recorded in their result.json), so a changed submission gets fresh ones.
    per_notebook: a sandbox per notebook (slower: each imports torch again). extra_problems: lines for
    problems.txt found before (tito.grading.handin: hand-ins that could not be unpacked).

        >>> grade(Course.load(), "19", "subs", jobs=2)      # doctest: +SKIP
        [StudentGrade(student='ann', score=74.0, ...), ...]
    """
    workers = jobs or (1 if scheduler else default_workers())
    box, fitted = _sandbox(course, no_sandbox, limits, 1 if scheduler else workers)
    timeout = int(timeout or course.cell_timeout)
    out_dir = Path(output_dir or default_output_dir(course, module)).resolve()
    nbs = notebooks or nbgrader_glue.module_assignment_notebooks(course.nbs_dir, module)
    if not nbs:
        raise TitoError(f"module {module} has no graded notebooks in {course.nbs_dir / module}")
    scan, found = _students(course, module, Path(submissions_dir), nbs, students, extra_problems)
    out_dir.mkdir(parents=True, exist_ok=True)
    from tito.notebooks.student_release import data_files
    data = data_files(course, module)
    previous = course_dir.read_json_object(out_dir / "run.json")
    if seed is None and resume and isinstance(previous.get("seed"), int):
        seed = previous["seed"]  # the same inputs for an unchanged submission, fresh ones for a changed one
    seed = secrets.randbelow(2**63) if seed is None else int(seed)
    key = run_key(course, nbs, data, seed, timeout, fitted.limits)
    content = {s: submission_hash(folder, {Path(p).name for p in nbs}, course.submission_notebook_mb,
                                  course.submission_folder_mb) for s, folder in found.items()}
    inputs = {s: student_key(key, content[s]) for s in found}
    csv_path = out_dir / "grades.csv"
    results, csv_rows = _resume(out_dir, found, inputs, read_csv(csv_path)) if resume else ([], read_csv(csv_path))
    if resume:
        write_csv(csv_path, csv_rows)
    if scan.problems:
        atomic_write(out_dir / "problems.txt", "\n".join(scan.problems) + "\n")
    elif not students:
        (out_dir / "problems.txt").unlink(missing_ok=True)
    # no cgroup CPU share (a normal user): the students graded at once get cores of their own instead
    split = limits_mod.cpu_split(workers) if box.isolated and not scheduler and limits_mod.CPU in limits_mod.gaps() else None
    label = _announce(progress, box, fitted, split, scan.problems, module, found, results, resume, nbs, timeout,
                      scheduler, workers)
    if not found:
        return results
    run_dir = out_dir / f".run-{os.getpid()}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    try:
        run = _prepare(course, module, out_dir, run_dir, nbs, data, timeout, box, fitted, seed, split, per_notebook,
                       progress, scan, found, results, students)
        atomic_write(out_dir / "run.json", json.dumps(
            {"module": module, "seed": seed, "timeout": timeout, "sandbox": label, "limits": asdict(fitted.limits),
             "clamped": fitted.clamped, "notebooks": [Path(p).name for p in nbs]}, indent=1) + "\n")
        todo = [GradeJob(module, s, str(folder), course.course_id, timeout, run, inputs[s],
                         student_seed(seed, s, content[s])) for s, folder in found.items()]
        on_done = _publisher(out_dir, module, run.template, csv_path, csv_rows, results, label, progress)
        run_tasks(grade_one, todo, on_done, workers=workers, scheduler=scheduler, show_progress=show_progress)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(work_root(), ignore_errors=True)
    return sorted(results, key=lambda r: r.student)


def _sandbox(course: Course, no_sandbox: bool, limits: sandbox.Limits | None,
             jobs: int) -> tuple[sandbox.Backend, limits_mod.Fit]:
    """The sandbox and its limits: the limits this process is given (ulimit, a cgroup, a container) bound what a
    sandbox may ask for, clamped here and said once, or the run refused before it starts (a Dask worker clamps its
    own)."""
    box = sandbox.require(no_sandbox)
    fitted = limits_mod.fit(limits or sandbox.Limits(), jobs, box, tuple(course.grading_preimport or PREIMPORT),
                            caps=HOST_CAPS if box.isolated and os.geteuid() == 0 else None)
    if fitted.refusal:
        raise TitoError(fitted.refusal, code=2)
    return box, fitted


def _students(course: Course, module: str, submissions_dir: Path, nbs: list[Path], students: list[str] | None,
              extra_problems: list[str] | None) -> tuple[Scan, dict[str, Path]]:
    """The submissions folder's students (`students` only, when given: each must be there) and its problems."""
    scan = scan_submissions(submissions_dir, module, assignment_files(course, module, nbs),
                            course.submission_notebook_mb, course.submission_folder_mb)
    scan.problems[:0] = extra_problems or []
    found = dict(scan.found)
    if students:
        unknown = [s for s in students if s not in found]
        if unknown:
            raise TitoError(f"no submission for student(s) {', '.join(unknown)} in {submissions_dir}; "
                            f"found: {', '.join(found) or 'none'}")
        return scan, {s: found[s] for s in students}
    if not found:
        raise TitoError(f"no student folders with notebooks in {submissions_dir} (expected "
                        f"<student>/*.ipynb or submitted/<student>/{module}/*.ipynb)"
                        + ("; " + "; ".join(scan.problems) if scan.problems else ""))
    return scan, found


def _resume(out_dir: Path, found: dict[str, Path], inputs: dict[str, str],
            csv_rows: list[dict]) -> tuple[list[StudentGrade], list[dict]]:
    """--resume: the published results of `found`'s students whose inputs are unchanged (taken out of `found`), and
    grades.csv's rows with theirs restored where the run stopped before writing them."""
    have, results = published(out_dir), []
    in_csv = {row["student"] for row in csv_rows}
    # a student whose regrade could not be published keeps their earlier result: their rows say so again
    stale = {row["student"] for row in csv_rows if row["notebook"] == TOTAL and row["reason"].startswith(GRADING_ERROR)}
    for s in [s for s in found if s in have and have[s].inputs == inputs[s]]:
        if s not in in_csv or s in stale:  # published but the run stopped before grades.csv: recover the rows
            csv_rows = _sort([row for row in csv_rows if row["student"] != s] + as_written(have[s].rows()))
        results.append(have[s])
        del found[s]
    return results, csv_rows


def _announce(progress, box: sandbox.Backend, fitted: limits_mod.Fit, split, problems: list[str], module: str,
              found: dict, results: list, resume: bool, nbs: list[Path], timeout: int, scheduler: str | None,
              workers: int) -> str:
    """What the run says before it grades: what is not graded, what the sandbox goes without, the run in one
    line. Returns the sandbox's label (grades.csv's `sandbox` column)."""
    for line in problems:
        progress(f"  not graded: {line}")
    if not box.isolated:
        progress("!" * 78 + "\n!! NOT SANDBOXED (--no-sandbox): student code runs with your permissions and can "
                 "read the solutions;\n!! grades.csv records this in its sandbox column.\n" + "!" * 78)
    missing = limits_mod.gaps(cores_split=split is not None)
    label = box.label(missing, fitted.note())
    if fitted.clamped:
        progress("sandbox limits " + fitted.note())
    if box.isolated and missing:
        progress("!" * 78 + f"\n!! As this user (uid {os.geteuid()}) the sandbox goes WITHOUT: "
                 + ", ".join(missing) + ";\n!! each process keeps its own limits (memory, CPU time, "
                 "file size). Grade as root for all of them; grades.csv says so in its sandbox column.\n" + "!" * 78)
    progress(f"grading {module}: {plural(len(found), 'student')}" + (f" ({len(results)} already graded)" if resume else "")
             + f", {plural(len(nbs), 'graded notebook')}, per-cell timeout {timeout} s, "
             + (f"Dask scheduler {scheduler}" if scheduler else f"{workers} at once")
             + f", sandbox: {label}")
    return label


def _prepare(course: Course, module: str, out_dir: Path, run_dir: Path, nbs: list[Path], data: dict[str, Path],
             timeout: int, box: sandbox.Backend, fitted: limits_mod.Fit, seed: int, split, per_notebook: bool,
             progress, scan: Scan, found: dict[str, Path], results: list[StudentGrade],
             students: list[str] | None) -> RunSettings:
    """The run's shared files (the nbgrader template, the class gradebook, the reference as byte code, tito's code
    for the sandboxes, the warmed cache) and the settings every student's task carries. A published student the
    class gradebook cannot take is withdrawn and put back into `found`, to be graded again."""
    template = gradebook.build_template(run_dir / "course", module, nbs, course.course_id, timeout, data)
    course_dir.prepare(out_dir, template, module, course.course_id, timeout)  # the class gradebook
    unmerged: dict[str, str] = {}
    course_dir.merge(out_dir, module, list(published(out_dir).values()), only_new=True, errors=unmerged)
    for s, why in unmerged.items():  # withdrawn, as a failed publication is, and graded again
        progress(f"  {s}: could not be added to the class gradebook ({console_line(why, 200)}); graded again")
        shutil.rmtree(out_dir / "students" / s, ignore_errors=True)
        if s in scan.found and s not in found and (not students or s in students):
            found[s] = scan.found[s]
            results[:] = [r for r in results if r.student != s]
    warm = warm_cache(course, run_dir / "cache")
    if warm > 1:
        progress(f"  warmed the read-only cache once for all students in {warm:.1f} s")
    return RunSettings(
        template=template, reference=package.compile_reference(course.lib_dir, run_dir / "reference").parent,
        hostlib=tito_library(run_dir / "hostlib", HOST_FILES), judgelib=tito_library(run_dir / "judgelib"),
        lib=course.lib_dir.name, pyproject=(course.root / "pyproject.toml").resolve(), sandbox=box,
        limits=fitted.limits, seed=seed, notebooks=[Path(p).resolve() for p in nbs],
        preimport=course.grading_preimport or PREIMPORT, imports={m: sorted(d) for m, d in package_graph(
            module_files(course.lib_dir)).items()},
        data_files={rel: Path(src).resolve() for rel, src in data.items()}, work_root=work_root(),
        cache=run_dir / "cache", per_notebook=per_notebook, notebook_mb=course.submission_notebook_mb,
        folder_mb=course.submission_folder_mb, student_seconds=course.student_seconds, cpu_split=split,
        sandbox_note=fitted.note())


def _publisher(out_dir: Path, module: str, template: Path, csv_path: Path, csv_rows: list[dict],
               results: list[StudentGrade], label: str, progress):
    """`on_done` of the run's tasks: publish each student as they finish (their folder, the class gradebook, then
    grades.csv), stopping the run when the template or grades.csv changed while a student's code ran."""
    guard = tree_hash(template)

    def on_done(job: GradeJob, res) -> str:
        nonlocal csv_rows
        if isinstance(res, BaseException):  # the task itself was lost (a Dask worker died)
            res = (asdict(StudentGrade(job.student, 0.0, 0.0, GRADING_FAILED,
                                       f"{GRADING_ERROR}: {type(res).__name__}: {first_line(str(res))}",
                                       sandbox=label)), b"")
        changed = [str(template)] if tree_hash(template) != guard else []
        if read_csv(csv_path) != csv_rows:
            changed.append(str(csv_path))
        if changed:
            raise TitoError(f"grading stopped: {', '.join(changed)} changed while {job.student}'s code ran; "
                            f"inspect {job.folder} before trusting any grade")
        r, flagged = publish_one(out_dir, module, job, res, label)
        for gid in flagged:
            progress(f"  {r.student}: written answer {gid} changed since it was graded by hand: flagged for regrading")
        if r.notebooks:  # what is left to grade by hand is the class gradebook's (a regrade keeps hand grades)
            pending_from_gradebook(out_dir, module, r)
        csv_rows = _sort([row for row in csv_rows if row["student"] != r.student] + as_written(r.rows()))
        write_csv(csv_path, csv_rows)  # after each student: an interrupted run keeps what it graded
        results.append(r)
        progress(f"  {r.student}: {num(r.score)}/{num(r.max_score)} {r.status} ({r.seconds:.0f} s)"
                 + (f", {plural(r.manual_pending, 'point')} of written answers to grade by hand"
                    if r.manual_pending else "")
                 + (f"\n      {console_line(r.reason, 300)}" if r.reason else ""))
        return outcome(r)

    return on_done
