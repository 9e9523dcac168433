"""Final grades from the class gradebook (tito.grading.course_dir): the judge's points, the hand-graded
points entered in formgrader, what is still pending, per student and notebook and per graded cell; and
the students' feedback pages with the hand-graded points and the graders' comments.

Read through nbgrader's ORM (nbgrader.api's models), one query per table, so a class of hundreds reads
in a moment.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tito.notebooks import nbgrader_glue
from tito.grading import course_dir
from tito.grading.feedback import feedback_html, num
from tito.isolation.sanitize import console_line
from tito.notebooks.cells import nbgrader_meta
from tito.notebooks.nbfile import read_notebook, atomic_write

TOTAL = "(total)"
FIELDS = ["student", "notebook", "autograded", "hand_graded", "extra_credit", "pending", "regrade", "total",
          "max_score", "status"]
# status: complete; pending (written answers await a hand grade); regrade (a hand-graded answer changed since)


@dataclass
class Cell:
    """One graded cell of one student's submission."""
    notebook: str
    name: str
    max_score: float
    written: bool                 # a written answer (markdown), graded by hand
    auto_score: float | None
    manual_score: float | None
    extra_credit: float | None
    needs_manual_grade: bool

    @property
    def score(self) -> float:
        """nbgrader's rule: the hand-graded score where one was entered, else the autograded one."""
        return float(self.manual_score if self.manual_score is not None else (self.auto_score or 0.0))


@dataclass
class Submission:
    student: str
    cells: list[Cell] = field(default_factory=list)
    comments: dict[tuple[str, str], str] = field(default_factory=dict)  # (notebook, cell) -> grader's comment


def read(course: Path, assignment: str, students: list[str] | None = None) -> list[Submission]:
    """Every student's (or only `students`') graded cells and comments in COURSE/gradebook.db, students sorted."""
    from nbgrader.api import (Assignment, BaseCell, Comment, Grade, GradeCell, Notebook, SubmittedAssignment,
                              SubmittedNotebook)

    out: dict[str, Submission] = {}
    with course_dir.open_gradebook(course) as gb:
        db = gb.db
        base = (db.query(SubmittedNotebook.id, SubmittedAssignment.student_id, Notebook.name)
                .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
                .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
                .filter(Assignment.name == assignment))
        if students is not None:
            base = base.filter(SubmittedAssignment.student_id.in_(list(students)))
        nbs = {sid: (student, name) for sid, student, name in base}
        for student, _ in nbs.values():
            out.setdefault(student, Submission(student))
        cells = {c.id: (c.name, float(c.max_score), c.cell_type == "markdown") for c in db.query(GradeCell)}
        for g in db.query(Grade).filter(Grade.notebook_id.in_(list(nbs))) if nbs else []:
            if g.cell_id not in cells:
                continue
            student, notebook = nbs[g.notebook_id]
            name, mx, written = cells[g.cell_id]
            out[student].cells.append(Cell(notebook, name, mx, written, g.auto_score, g.manual_score, g.extra_credit,
                                           bool(g.needs_manual_grade)))
        names = {c.id: c.name for c in db.query(BaseCell)}
        for c in db.query(Comment).filter(Comment.notebook_id.in_(list(nbs))) if nbs else []:
            text = (c.manual_comment or "").strip()
            if text and c.cell_id in names:
                student, notebook = nbs[c.notebook_id]
                out[student].comments[(notebook, names[c.cell_id])] = text
    return [out[s] for s in sorted(out)]


def hand_pending(course: Path, assignment: str, student: str) -> dict[str, float]:
    """notebook -> points of `student`'s written answers the class gradebook still needs graded by hand (pending,
    or to grade again: the answer changed since), as `tito grades` counts them; {} for a student not in it."""
    rows = table(read(course, assignment, [student]))
    return {r["notebook"]: float(r["pending"]) + float(r["regrade"]) for r in rows}


def _row(student: str, notebook: str, cells: list[Cell]) -> dict:
    auto = sum(c.score for c in cells if not c.written)
    hand = sum(c.score for c in cells if c.written and not c.needs_manual_grade)
    extra = sum(c.extra_credit or 0.0 for c in cells)
    pending = sum(c.max_score for c in cells if c.written and c.needs_manual_grade and c.manual_score is None)
    regrade = sum(c.max_score for c in cells if c.needs_manual_grade and c.manual_score is not None)
    status = "regrade" if regrade else "pending" if pending else "complete"
    return {"student": student, "notebook": notebook, "autograded": num(auto), "hand_graded": num(hand),
            "extra_credit": num(extra), "pending": num(pending), "regrade": num(regrade),
            "total": num(auto + hand + extra), "max_score": num(sum(c.max_score for c in cells)), "status": status}


def table(subs: list[Submission]) -> list[dict]:
    """One row per student and notebook (FIELDS) and a TOTAL row per student. A written answer counts in
    `hand_graded` once graded (0 when left as released), in `pending` while it waits for a hand grade and in
    `regrade` when its hand-graded score stands for an answer that changed since (not in the total)."""
    rows = []
    for s in subs:
        by_nb: dict[str, list[Cell]] = {}
        for c in s.cells:
            by_nb.setdefault(c.notebook, []).append(c)
        rows += [_row(s.student, nb, by_nb[nb]) for nb in sorted(by_nb)]
        rows.append(_row(s.student, TOTAL, s.cells))
    return rows


def question_columns(course: Path, assignment: str, subs: list[Submission]) -> list[str]:
    """"notebook:cell" of every graded cell, in the order of the source notebooks."""
    cols = []
    for p in sorted((Path(course) / "source" / assignment).glob("*.ipynb")):
        nb = read_notebook(p)
        for c in nb.get("cells", []):
            meta = (c.get("metadata") or {}).get("nbgrader") or {}
            if meta.get("grade") and meta.get("grade_id"):
                cols.append(f"{p.stem}:{meta['grade_id']}")
    seen = {f"{c.notebook}:{c.name}" for s in subs for c in s.cells}
    return [c for c in cols if c in seen] + sorted(seen - set(cols))


def questions(course: Path, assignment: str, subs: list[Submission]) -> tuple[list[str], list[dict]]:
    """(columns, rows): one row per student, one column per graded cell (its score; "pending" for a written
    answer awaiting a hand grade, "regrade:N" for a changed one), then the total."""
    cols = question_columns(course, assignment, subs)
    rows = []
    for s in subs:
        row = {"student": s.student}
        for c in s.cells:
            key = f"{c.notebook}:{c.name}"
            if c.needs_manual_grade and c.manual_score is None:
                row[key] = "pending"
            elif c.needs_manual_grade:
                row[key] = f"regrade:{num(c.manual_score)}"
            else:
                row[key] = num(c.score + (c.extra_credit or 0.0))
        row["total"] = _row(s.student, TOTAL, s.cells)["total"]
        rows.append(row)
    return ["student", *cols, "total"], rows


def write_csv(path: Path, fields: list[str], rows: list[dict]) -> Path:
    return nbgrader_glue.atomic_write_csv(path, fields, rows)


EXPORT_FIELDS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                 "raw_score", "late_submission_penalty", "score", "max_score"]


def nbgrader_export(course: Path, dest: Path) -> Path:
    """DEST in nbgrader's own export columns and rows (its CsvExportPlugin's: EXPORT_FIELDS, one row per
    assignment and student, 0 for a student without a submission), written as every tito CSV is: each cell
    quoted where needed and escaped for a spreadsheet (nbgrader's plugin joins the values with commas as
    they are, so a comma or a line break in a value would add a column or a row)."""
    from nbgrader.api import MissingEntry

    rows = []
    with course_dir.open_gradebook(course) as gb:
        for a in gb.assignments:
            for st in gb.students:
                row = {"assignment": a.name, "duedate": a.duedate, "student_id": st.id, "last_name": st.last_name,
                       "first_name": st.first_name, "email": st.email, "max_score": a.max_score}
                try:
                    sub = gb.find_submission(a.name, st.id)
                except MissingEntry:
                    row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
                else:
                    penalty = sub.late_submission_penalty
                    row.update(timestamp=sub.timestamp, raw_score=sub.score, late_submission_penalty=penalty,
                               score=max(0.0, sub.score - (penalty or 0.0)))
                rows.append({k: "" if v is None else v if isinstance(v, (int, float)) else str(v)
                             for k, v in row.items()})
    return nbgrader_glue.atomic_write_csv(dest, EXPORT_FIELDS, rows)


# ---- feedback with the hand-graded points ------------------------------------------------------------


def _note(text: str, n: int) -> dict:
    return {"cell_type": "markdown", "id": f"tito-grader-note-{n}", "metadata": {"tito": {"grader_note": True}},
            "source": text}


def annotated(nb: dict, notebook: str, sub: Submission) -> dict:
    """The autograded notebook with, after each written answer, its hand-graded points and the grader's
    comment, after any other commented cell its comment, and a first cell with the notebook's points."""
    cells = {c.name: c for c in sub.cells if c.notebook == notebook}
    out = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        src = cell.get("source", "")
        cell = {**cell, "source": "".join(src) if isinstance(src, list) else str(src)}
        out.append(cell)
        gid = nbgrader_meta(cell).get("grade_id")
        if not gid:
            continue
        comment = sub.comments.get((notebook, gid))
        c = cells.get(gid)
        lines = []
        if c is not None and c.written:
            if c.needs_manual_grade:
                lines.append(f"**{gid}: awaiting the instructor's grade** (of {num(c.max_score)} points)")
            else:
                lines.append(f"**{gid}: {num(c.score)} of {num(c.max_score)} points** (graded by hand)")
        elif c is not None and c.manual_score is not None:
            lines.append(f"**{gid}: {num(c.score)} of {num(c.max_score)} points** (set by the instructor)")
        if c is not None and c.extra_credit:
            lines.append(f"Extra credit: {num(c.extra_credit)}")
        if comment:
            lines.append("**Grader's comment:** " + comment)
        if lines:
            out.append(_note("\n\n".join(lines), len(out)))
    row = _row(sub.student, notebook, list(cells.values()))
    head = (f"**{notebook}: {row['total']} of {row['max_score']} points** (autograded {row['autograded']}, "
            f"graded by hand {row['hand_graded']}" + (f", extra credit {row['extra_credit']}" if row["extra_credit"] != "0" else "")
            + (f"; {row['pending']} points of written answers still to be graded" if row["pending"] != "0" else "") + ")")
    return {**nb, "cells": [_note(head, 0), *out]}


def write_feedback(out_dir: Path, assignment: str, subs: list[Submission],
                   failed: dict[str, str] | None = None) -> list[Path]:
    """OUTPUT/nbgrader/feedback/<student>/<assignment>/<notebook>.html for every submission, made from the
    student's autograded notebooks (OUTPUT/students/<student>/autograded/, never the instructor's copy with the
    answer keys) with the hand-graded points and comments. A page that cannot be made is that student's
    failure: with `failed` given it is recorded there (student -> a sentence) and every other page is still
    written (each page whole or not at all); without it, it raises."""
    course = course_dir.path(out_dir)
    written = []
    for sub in subs:
        src = Path(out_dir) / "students" / sub.student / "autograded"
        dest = course / "feedback" / sub.student / assignment
        for p in sorted(src.glob("*.ipynb")) if src.is_dir() else []:
            try:
                nb = annotated(read_notebook(p), p.stem, sub)
                html = feedback_html(nb, f"{assignment} / {p.stem} — {sub.student}")
                dest.mkdir(parents=True, exist_ok=True)
                atomic_write(dest / f"{p.stem}.html", html)
            except Exception as e:  # noqa: BLE001 - this student's notebook: their failure, not the class's
                if failed is None:
                    raise
                failed[sub.student] = (f"{p.name}: its feedback page could not be made ({type(e).__name__}: "
                                       f"{console_line(str(e), 200)})")
                continue
            written.append(dest / f"{p.stem}.html")
    return written
