"""The class's nbgrader course directory: one gradebook for every student, in nbgrader's own layout.

Each `tito grade` run writes (or updates) OUTPUT/nbgrader/ (OUTPUT: the run's output folder,
default build/grades/NN_name/), which nbgrader's tools open as they are (`tito formgrader N`,
`nbgrader export`, ...):

    nbgrader_config.py      course root and id; formgrader's page shows each written answer's answer key
    gradebook.db            every student's submission: the judge's points as the autograded scores,
                            written answers pending for the instructor (0 when left as released);
                            hand-graded scores and comments are entered in formgrader and kept by regrades
    source/<assignment>/    the instructor's notebooks (answer keys and rubrics)
    release/<assignment>/   what the students got
    autograded/<student>/<assignment>/*.ipynb
                            tito's autograded notebooks (the student's cells, the judge's verdicts); each
                            written answer's cell carries its answer key in metadata `tito.answer_key`,
                            which formgrader's page shows beside it (students' feedback is made from
                            OUTPUT/students/, never from here)
    .tito/answers/<student>.json
                            each written answer's hash when last merged: a changed answer that already has
                            a hand-graded score keeps it and is flagged for regrading (needs a manual grade)
    feedback/<student>/<assignment>/*.html
                            `tito grades N --feedback`: the feedback with the hand-graded points and comments

Only tito's own process writes here (after each student is published), one student at a time,
through nbgrader's API (nbgrader.api.Gradebook).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path

from tito.notebooks import nbgrader_glue
from tito.config import TitoError
from tito.notebooks.cells import cell_source, nbgrader_meta
from tito.notebooks.nbfile import atomic_write, read_notebook, write_notebook

NAME = "nbgrader"
TEMPLATE = "tito_formgrade"

# formgrader's grading page (nbgrader's template), with the student's markdown sanitized (their answer runs
# no script in the instructor's browser, where a Jupyter token is live) and each written answer's answer key
FORMGRADE_TEMPLATE = r"""{%- extends 'formgrade/index.html.j2' -%}
{% block markdowncell scoped %}
<div class="cell border-box-sizing text_cell rendered">
  {{ self.empty_in_prompt() }}
  {%- if 'nbgrader' in cell.metadata and (cell.metadata.nbgrader.solution or cell.metadata.nbgrader.grade or cell.metadata.nbgrader.task) -%}
  <div class="panel panel-primary nbgrader_cell">
    {{ nbgrader_heading(cell) }}
    <div class="panel-body">
      <div class="text_cell_render border-box-sizing rendered_html">
        {{ cell.source | markdown2html | strip_files_prefix | clean_html }}
      </div>
    </div>
    {%- if cell.metadata.tito and cell.metadata.tito.answer_key -%}
    <div class="panel-body tito-answer-key" style="background: #fcf8e3; border-top: 1px solid #faebcc;">
      <div><strong>Answer key and rubric</strong> (instructor only, from source/{{ resources.assignment_id }}/{{ resources.notebook_id }}.ipynb)</div>
      <div class="text_cell_render border-box-sizing rendered_html">
        {{ cell.metadata.tito.answer_key | markdown2html | clean_html }}
      </div>
    </div>
    {%- endif -%}
    {{ nbgrader_footer(cell) }}
  </div>
  {%- else -%}
  <div class="inner_cell">
    <div class="text_cell_render border-box-sizing rendered_html">
      {{ cell.source | markdown2html | strip_files_prefix | clean_html }}
    </div>
  </div>
  {%- endif -%}
</div>
{% endblock markdowncell %}
"""

FORMGRADER_CONFIG = '''
# formgrader (`tito formgrader`): its grading page with each written answer's answer key, student HTML sanitized
import nbgrader.server_extensions.formgrader.handlers as _fg
c.HTMLExporter.template_name = {template!r}
c.HTMLExporter.extra_template_basedirs = [_fg.template_path, {templates!r}]
c.HTMLExporter.extra_template_paths = [_fg.template_path]
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {{"clean_html": "tito.isolation.sanitize.clean_html"}}  # tito's one HTML sanitizer
c.Exchange.root = {exchange!r}  # nbgrader's exchange (assignments handed out through JupyterHub): unused by tito
'''


def path(out_dir: Path) -> Path:
    """The course directory of a grading output folder."""
    return Path(out_dir) / NAME


def db_url(course: Path) -> str:
    return f"sqlite:///{Path(course) / 'gradebook.db'}"


@contextmanager
def open_gradebook(course: Path):
    """nbgrader's Gradebook on COURSE/gradebook.db (SQLAlchemy's warnings about nbgrader's own session use
    silenced: harmless)."""
    from nbgrader.api import Gradebook

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in session.*")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        with Gradebook(db_url(course)) as gb:
            yield gb


def is_written(cell: dict) -> bool:
    """A written answer: a markdown cell with nbgrader `grade` and `solution`."""
    return cell.get("cell_type") == "markdown" and bool(nbgrader_meta(cell).get("grade")) and bool(nbgrader_meta(cell).get("solution"))


def answer_keys(source_nb: dict) -> dict[str, str]:
    """grade_id -> the answer key and rubric of each written answer of a source notebook (the cell's text
    without the solution markers)."""
    out = {}
    for c in source_nb.get("cells", []):
        if is_written(c):
            lines = [l for l in cell_source(c).splitlines() if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
            out[nbgrader_meta(c).get("grade_id", "")] = "\n".join(lines).strip()
    return out


def _cells_of(gb, assignment: str) -> dict:
    """notebook -> {"grade": {name: (max_score, cell_type)}, "solution": {names}, "source": {name: checksum}}."""
    try:
        a = gb.find_assignment(assignment)
    except Exception:  # noqa: BLE001 - nbgrader's MissingEntry: no such assignment yet
        return {}
    return {nb.name: {"grade": {c.name: (float(c.max_score), c.cell_type) for c in nb.grade_cells},
                      "solution": sorted(c.name for c in nb.solution_cells),
                      "source": {c.name: c.checksum for c in nb.source_cells}} for nb in a.notebooks}


def prepare(out_dir: Path, template: Path, assignment: str, course_id: str, timeout: int = 300) -> Path:
    """Create or refresh OUTPUT/nbgrader from a grading run's template (nbgrader_glue.generate_assignment's
    course folder): config, source/ and release/ replaced, the gradebook made from the template's or, when
    it exists, its cells brought up to date (scores kept). Returns the course directory.

    Source cells (nbgrader's record of the instructor's cells) are updated or added; they hold no score.
    Raises TitoError when graded cells were added or removed in a notebook that already has submissions
    (nbgrader refuses that too): the hand-graded scores live in that gradebook."""
    course = path(out_dir)
    course.mkdir(parents=True, exist_ok=True)
    write_config(course, course_id, timeout)
    for sub in ("source", "release"):
        dest = course / sub / assignment
        tmp = dest.with_name(f".{assignment}.new-{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(Path(template) / sub / assignment, tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    db = course / "gradebook.db"
    if not db.exists():
        tmp = db.with_name(f".gradebook.db.{os.getpid()}.tmp")
        shutil.copy2(Path(template) / "gradebook.db", tmp)
        os.replace(tmp, db)
        return course
    with open_gradebook(template) as tg:
        want = _cells_of(tg, assignment)
    with open_gradebook(course) as gb:
        have = _cells_of(gb, assignment)
        if want == have:
            return course
        gb.update_or_create_assignment(assignment)
        for name, cells in want.items():
            old = have.get(name)
            submitted = bool(old) and bool(gb.find_notebook(name, assignment).submissions)
            if old and submitted and (set(old["grade"]) != set(cells["grade"]) or old["solution"] != cells["solution"]):
                raise TitoError(
                    f"the graded cells of {name} changed since the class gradebook {course / 'gradebook.db'} was "
                    f"made (added: {', '.join(sorted(set(cells['grade']) - set(old['grade']))) or 'none'}; removed: "
                    f"{', '.join(sorted(set(old['grade']) - set(cells['grade']))) or 'none'}), and it holds submissions "
                    "with their hand-graded scores: restore the cells, or grade into another --output-dir")
            if old and not submitted:
                gb.remove_notebook(name, assignment)
            gb.update_or_create_notebook(name, assignment)
            for cell, (mx, kind) in cells["grade"].items():
                gb.update_or_create_grade_cell(cell, name, assignment, max_score=mx, cell_type=kind)
            for cell in cells["solution"]:
                gb.update_or_create_solution_cell(cell, name, assignment)
            with open_gradebook(template) as tg:
                for c in tg.find_notebook(name, assignment).source_cells:
                    gb.update_or_create_source_cell(c.name, name, assignment, source=c.source, checksum=c.checksum,
                                                    locked=c.locked, cell_type=c.cell_type)
            if not old:  # a notebook new to the assignment: every existing submission gets its rows
                _add_to_submissions(gb, name, assignment)
    return course


def _add_to_submissions(gb, notebook: str, assignment: str) -> None:
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    nb = gb.find_notebook(notebook, assignment)
    for sub in gb.find_assignment(assignment).submissions:
        snb = SubmittedNotebook(notebook=nb, assignment=sub)
        for cell in nb.grade_cells:
            Grade(cell_id=cell.id, notebook=snb)
        for cell in nb.solution_cells:
            Comment(cell_id=cell.id, notebook=snb)
        gb.db.add(snb)
    gb.db.commit()


def write_config(course: Path, course_id: str, timeout: int = 300) -> Path:
    """COURSE/nbgrader_config.py (nbgrader_glue's, with formgrader's page template) and that template."""
    cfg = nbgrader_glue.write_course_config(course, course_id, timeout)
    templates = course / ".tito" / "templates"
    (templates / TEMPLATE).mkdir(parents=True, exist_ok=True)
    atomic_write(templates / TEMPLATE / "index.html.j2", FORMGRADE_TEMPLATE)
    atomic_write(templates / TEMPLATE / "conf.json",
                               json.dumps({"base_template": "formgrade", "mimetypes": {"text/html": True}}) + "\n")
    atomic_write(cfg, cfg.read_text(encoding="utf-8") + FORMGRADER_CONFIG.format(
        template=TEMPLATE, templates=str(templates.resolve()), exchange=str((course / ".tito" / "exchange").resolve())))
    (course / ".tito" / "exchange").mkdir(exist_ok=True)
    return cfg


def _answers_file(course: Path, student: str) -> Path:
    return course / ".tito" / "answers" / f"{student}.json"


def _answer_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


def merge(out_dir: Path, assignment: str, results: list, only_new: bool = False,
          errors: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Bring each published student's result (tito.grading.per_student.StudentGrade, their files in
    OUTPUT/students/<id>/) into the class gradebook and autograded/ folder.

    Autograded cells get the judge's points; a written answer is pending (needs a manual grade) when
    written, 0 when left as released; a hand-graded score already entered is never touched, but when its
    answer changed since the last merge the answer needs grading again and its notebook is flagged.
    only_new: skip students already in the gradebook. Returns student -> the "notebook/grade_id" of each
    answer flagged for regrading. `errors`: when given, a student whose merge fails is left out (their
    gradebook changes rolled back) and recorded there (student -> what failed) instead of raising."""
    course = path(out_dir)
    flagged: dict[str, list[str]] = {}
    if not results:
        return flagged
    released = {p.stem: read_notebook(p) for p in sorted((course / "release" / assignment).glob("*.ipynb"))}
    keys = {p.stem: answer_keys(read_notebook(p))
            for p in sorted((course / "source" / assignment).glob("*.ipynb"))}
    with open_gradebook(course) as gb:
        known = {s.student.id for s in gb.find_assignment(assignment).submissions} if only_new else set()
        for r in results:
            if r.student in known:
                continue
            try:
                flagged[r.student] = _merge_one(gb, course, Path(out_dir), assignment, r, released, keys)
            except Exception as e:  # noqa: BLE001 - one student's files: that student's failure (the caller's)
                if errors is None:
                    raise
                gb.db.rollback()
                errors[r.student] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return flagged


def _merge_one(gb, course: Path, out_dir: Path, assignment: str, r, released: dict, keys: dict) -> list[str]:
    from nbgrader.api import Grade, GradeCell, MissingEntry, Notebook, SubmittedNotebook

    written = _copy_autograded(course, out_dir / "students" / r.student / "autograded", assignment, r.student, keys)
    gb.update_or_create_student(r.student)
    try:
        sub = gb.find_submission(assignment, r.student)
    except MissingEntry:
        sub = gb.add_submission(assignment, r.student)
    before = read_json_object(_answers_file(course, r.student))
    hashes: dict[str, dict[str, str]] = {}
    flagged = []
    tests = {n.notebook: n.tests for n in r.notebooks}
    db = gb.db  # one query per table (nbgrader's lazy relationships cost a query per cell)
    snbs = {snb.id: snb for snb in db.query(SubmittedNotebook).filter(SubmittedNotebook.assignment_id == sub.id)}
    nb_names = {n.id: n.name for n in db.query(Notebook)}
    cells = {c.id: (c.name, c.cell_type) for c in db.query(GradeCell)}
    released_answers: dict[str, dict[str, str]] = {}  # notebook -> grade_id -> the written answer as released
    for g in db.query(Grade).filter(Grade.notebook_id.in_(list(snbs))):
        snb = snbs[g.notebook_id]
        name = nb_names[snb.notebook_id]
        gid, kind = cells[g.cell_id]
        if kind == "markdown":
            rel_ids = released_answers.setdefault(name, {nbgrader_meta(c).get("grade_id"): cell_source(c) for c in
                                                         released.get(name, {}).get("cells", []) if is_written(c)})
            text = written.get(name, {}).get(gid)
            answered = text is not None and gid in rel_ids and text.strip() != rel_ids[gid].strip()
            h = _answer_hash(text) if answered else ""
            hashes.setdefault(name, {})[gid] = h
            old = before.get(name, {}).get(gid)
            if g.manual_score is not None:
                if old is not None and old != h:  # answer changed under a hand-graded score
                    g.needs_manual_grade = True
                    snb.flagged = True
                    flagged.append(f"{name}/{gid}")
                g.auto_score = None if answered else 0.0
            elif answered:
                g.auto_score, g.needs_manual_grade = None, True
            else:
                g.auto_score, g.needs_manual_grade = 0.0, False
        else:
            t = (tests.get(name) or {}).get(gid) or {}
            g.auto_score = float(t.get("points", 0.0) or 0.0)
            g.needs_manual_grade = False
    gb.db.commit()
    dest = _answers_file(course, r.student)
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dest, json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    return flagged


def read_json_object(p: Path) -> dict:
    """The JSON object in file `p`; {} where it is missing, unreadable or not an object."""
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _copy_autograded(course: Path, src: Path, assignment: str, student: str, keys: dict) -> dict[str, dict[str, str]]:
    """COURSE/autograded/STUDENT/ASSIGNMENT/ = the student's autograded notebooks (tito's, rebuilt from the
    release: tito.grading.feedback.autograded_notebook), each written answer's cell with its answer key from
    the source in metadata `tito.answer_key` (any other `tito` metadata dropped: formgrader's page shows an
    answer key box only for tito's own); swapped in whole. Returns notebook -> grade_id -> written answer."""
    dest = course / "autograded" / student / assignment
    tmp = dest.with_name(f".{assignment}.new-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    written: dict[str, dict[str, str]] = {}
    try:
        for p in sorted(Path(src).glob("*.ipynb")) if Path(src).is_dir() else []:
            nb = read_notebook(p)
            for c in nb.get("cells", []):
                if not isinstance(c, dict) or not isinstance(c.get("metadata"), dict):
                    continue
                c["metadata"].pop("tito", None)
                if is_written(c):
                    gid = nbgrader_meta(c).get("grade_id", "")
                    written.setdefault(p.stem, {})[gid] = cell_source(c)
                    key = keys.get(p.stem, {}).get(gid)
                    if key:
                        c["metadata"]["tito"] = {"answer_key": key}
            write_notebook(tmp / p.name, nb, ascii_only=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-made beside the published notebooks
        raise
    old = dest.with_name(f".{assignment}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    return written


# ---- where a module's latest grading run went --------------------------------------------------------

def _runs_file(root: Path) -> Path:
    return Path(root) / "build" / "grades" / "runs.json"


def record_run(root: Path, module: str, out_dir: Path) -> None:
    """Remember OUT_DIR as `module`'s latest grading run (build/grades/runs.json), wherever it is."""
    f = _runs_file(root)
    runs = read_json_object(f)
    runs[module] = str(Path(out_dir).resolve())
    f.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(f, json.dumps(runs, indent=1, sort_keys=True) + "\n")


def find_run(root: Path, module: str, default: Path) -> tuple[Path | None, list[Path]]:
    """(the latest grading run's output folder of `module`, or None; the folders looked in): the one
    build/grades/runs.json names (`tito grade --output-dir` anywhere), else DEFAULT."""
    looked = []
    recorded = read_json_object(_runs_file(root)).get(module)
    for d in ([Path(recorded)] if isinstance(recorded, str) else []) + [Path(default)]:
        if d not in looked:
            looked.append(d)
        if (d / "grades.csv").is_file() or (path(d) / "gradebook.db").is_file():
            return d, looked
    return None, looked
