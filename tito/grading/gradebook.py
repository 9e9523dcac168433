"""nbgrader glue for grading: the assignment template of a grading run.

nbgrader no longer executes or scores anything here. The template (`nbgrader generate_assignment`
once per run) gives the release version of every cell (graded cells are shown to the student as
released: no hidden test) and a gradebook.db with the assignment's grade cells, from which the
class gradebook is made (tito.grading.course_dir): autograded cells carry tito's score, a written
answer is pending (needs a manual grade) or, left as released, 0.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from tito.notebooks import nbgrader_glue
from tito.notebooks.nbfile import read_notebook

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
    nb = read_notebook(path)
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb.get("cells", [])
            if (c.get("metadata") or {}).get("nbgrader", {}).get("grade_id")}


def max_scores(template_dir: Path, assignment: str) -> dict[str, float]:
    """Notebook name -> its maximum score, from the template's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(template_dir) / 'gradebook.db'}") as gb:
        return {n.name: float(n.max_score) for n in gb.find_assignment(assignment).notebooks}
