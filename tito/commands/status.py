"""`tito status`: per module, what is exported, released and graded, with counts.

exported  the module's sources, their notebooks in nbs/, the package files those notebooks
          export (`#| default_exp`, `#| export NAME`) and the public names (__all__) in them;
released  release/NN_name/ present: notebooks and data files in it;
graded    the latest `tito grade` run (wherever --output-dir put it; build/grades/NN_name/ by default, or
          --grades-dir): students, mean autograded score; with its class gradebook, the final mean
          (autograded + hand-graded points) and the points of written answers still to grade by hand.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tito.grading import classrun, course_dir, final_grades
from tito.grading.per_student import GRADING_FAILED
from tito.notebooks.exports import exported_files
from tito.notebooks.student_release import release_data
from tito.config import Course


@dataclass
class ModuleStatus:
    module: str
    sources: int
    notebooks: int
    exported_files: int
    exported_present: int
    public_names: int
    released: bool
    release_notebooks: int
    release_data_files: int
    graded_students: int
    mean_score: float | None
    max_score: float | None
    grades_dir: str | None = None          # the grading run read (None: none found)
    looked_in: list[str] | None = None     # where it was looked for
    final_mean: float | None = None        # autograded + hand-graded, from the class gradebook
    hand_pending: float | None = None      # points of written answers not yet graded by hand (all students)
    hand_pending_students: int | None = None
    grading_failed: int = 0                # students of the run whose grading failed (tito's failure: no grade)


def module_status(course: Course, module: str, grades_dir: Path | None = None) -> ModuleStatus:
    nbs = course.notebooks(module)
    files = exported_files(nbs, course.lib_dir)
    rel = course.release_dir / module
    rel_nbs = sorted(rel.rglob("*.ipynb")) if rel.is_dir() else []
    rel_data = release_data(rel)
    if grades_dir:
        gdir, looked = Path(grades_dir) / module, [Path(grades_dir) / module]
    else:
        gdir, looked = course_dir.find_run(course.root, module, classrun.default_output_dir(course, module))
    rows = [r for r in classrun.read_csv(gdir / "grades.csv") if r.get("notebook") == classrun.TOTAL] if gdir else []
    totals = [r for r in rows if r.get("status") != GRADING_FAILED]  # no grade: not a 0 in the mean
    final = _final(gdir, module) if gdir else None
    scores = [float(r["score"]) for r in totals]
    maxima = sorted({float(r["max_score"]) for r in totals})
    return ModuleStatus(
        module=module, sources=len(course.sources(module)), notebooks=len(nbs),
        exported_files=len(files), exported_present=sum(1 for f, n in files if f.exists()),
        public_names=sum(n for _, n in files if n > 0),
        released=rel.is_dir() and bool(rel_nbs), release_notebooks=len(rel_nbs), release_data_files=len(rel_data),
        graded_students=len(totals), mean_score=round(sum(scores) / len(scores), 2) if scores else None,
        max_score=maxima[-1] if maxima else None, grades_dir=str(gdir) if gdir else None,
        looked_in=[str(p) for p in looked], grading_failed=len(rows) - len(totals), **(final or {}))


def _final(out_dir: Path, module: str) -> dict | None:
    """final_mean, hand_pending and hand_pending_students from the class gradebook (None without one)."""
    course = course_dir.path(out_dir)
    if not (course / "gradebook.db").is_file():
        return None
    rows = [r for r in final_grades.table(final_grades.read(course, module)) if r["notebook"] == final_grades.TOTAL]
    if not rows:
        return None
    pending = [float(r["pending"]) + float(r["regrade"]) for r in rows]
    return {"final_mean": round(sum(float(r["total"]) for r in rows) / len(rows), 2),
            "hand_pending": sum(pending), "hand_pending_students": sum(1 for p in pending if p)}


def run(args) -> int:
    course = Course.load()
    mods = course.resolve(args.modules)
    rows = [module_status(course, m, Path(args.grades_dir) if args.grades_dir else None) for m in mods]
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
        return 0
    hdr = ("module", "exported", "released", "graded")
    table = []
    for r in rows:
        p = classrun.plural
        exp = (f"{r.exported_present}/{p(r.exported_files, 'file')}, {p(r.public_names, 'public name')} "
               f"({p(r.notebooks, 'notebook')} from {p(r.sources, 'source')})") if r.exported_files else (
            f"no ({p(r.sources, 'source')}, {p(r.notebooks, 'notebook')})")
        rel = (f"yes: {p(r.release_notebooks, 'notebook')}, {p(r.release_data_files, 'data file')}"
               if r.released else "no")
        gr = (f"{classrun.plural(r.graded_students, 'student')}, mean {classrun.num(r.mean_score)}/{classrun.num(r.max_score)}"
              if r.graded_students else "no (looked in " + ", ".join(r.looked_in or []) + ")")
        if r.grading_failed:
            gr += f"; grading FAILED for {classrun.plural(r.grading_failed, 'student')} (not in the mean)"
        if r.final_mean is not None:
            gr += (f"; with hand-graded points mean {classrun.num(r.final_mean)}/{classrun.num(r.max_score)}, "
                   + (f"{classrun.plural(r.hand_pending, 'point')} of written answers to grade "
                      f"({classrun.plural(r.hand_pending_students, 'student')})" if r.hand_pending
                      else "every written answer graded"))
        table.append((r.module, exp, rel, gr))
    w = [max(len(t[i]) for t in table + [hdr]) for i in range(len(hdr))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)))
    print("  ".join("-" * x for x in w))
    for t in table:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(t)))
    return 0
