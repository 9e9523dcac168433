"""nbgrader glue for grading: the assignment template, a student's gradebook, the feedback HTML.

nbgrader no longer executes or scores anything here. The template (`nbgrader generate_assignment`
once per run) gives the release version of every cell (graded cells are shown to the student as
released: no hidden test) and a gradebook.db with the assignment's grade cells. Each student's
gradebook is a copy of it with that student's scores written through nbgrader's API, so the
instructor grades the written answers in nbgrader's formgrader as before: autograded cells carry
tito's score, a written answer is pending (needs a manual grade) or, left as released, 0.
"""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

from tito import nbgrader_glue

# a written answer (a markdown cell with `grade`, `solution` and `points`): written and awaiting the
# instructor, or left as released (0, nobody needs to look)
PENDING, UNANSWERED = "pending", "unanswered"


def build_template(template_dir: Path, assignment: str, notebooks: list[Path], course_id: str,
                   timeout: int, data_files: dict[str, Path] | None = None) -> Path:
    """nbgrader course folder with the assignment generated (source, release, gradebook.db)."""
    if template_dir.exists():
        shutil.rmtree(template_dir)
    nbgrader_glue.generate_assignment(template_dir, assignment, notebooks, course_id, timeout, data_files)
    return template_dir


def release_cells(template_dir: Path, assignment: str, name: str) -> dict[str, dict]:
    """grade_id -> the released cell (source without solutions or hidden tests) of notebook `name`."""
    path = Path(template_dir) / "release" / assignment / f"{name}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb.get("cells", [])
            if (c.get("metadata") or {}).get("nbgrader", {}).get("grade_id")}


def max_scores(template_dir: Path, assignment: str) -> dict[str, float]:
    """Notebook name -> its maximum score, from the template's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(template_dir) / 'gradebook.db'}") as gb:
        return {n.name: float(n.max_score) for n in gb.find_assignment(assignment).notebooks}


def write_gradebook(template_dir: Path, dest: Path, assignment: str, student: str,
                    scores: dict[str, dict[str, float | str | None]]) -> Path:
    """DEST = the template's gradebook with `student`'s submission and scores.

    scores: notebook -> grade_id -> points (an autograded cell), or PENDING / UNANSWERED (a written
    answer). Returns DEST.
    """
    from nbgrader.api import Gradebook

    shutil.copy2(Path(template_dir) / "gradebook.db", dest)
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{dest}") as gb:
        # nbgrader's add_submission makes SQLAlchemy warn about its own session use (harmless)
        warnings.filterwarnings("ignore", message=".*not in session.*")
        gb.update_or_create_student(student)
        gb.add_submission(assignment, student)
        for notebook, grades in scores.items():
            for gid, value in grades.items():
                try:
                    grade = gb.find_grade(gid, notebook, assignment, student)
                except Exception:  # noqa: BLE001 - nbgrader's MissingEntry: a cell the template lacks
                    continue
                if value == PENDING:
                    grade.auto_score, grade.needs_manual_grade = None, True
                elif value == UNANSWERED:
                    grade.auto_score, grade.needs_manual_grade = 0.0, False
                else:
                    grade.auto_score, grade.needs_manual_grade = float(value), False
        gb.db.commit()
    return dest
