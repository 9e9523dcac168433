"""`tito grades MODULE`: the final grades from the class gradebook (autograded + hand-graded points).

Reads OUTPUT/nbgrader/gradebook.db of the module's latest grading run (or --output-dir) and writes
    OUTPUT/final_grades.csv     per student and notebook, and a (total) row per student: autograded,
                                hand_graded, extra_credit, pending, regrade, total, max_score, status
    OUTPUT/questions.csv        per student, one column per graded cell ("notebook:grade_id"; hidden tests
                                are part of their cell's score), then the total
    OUTPUT/nbgrader_export.csv  nbgrader's own export columns (its CsvExportPlugin)
and with --feedback the students' feedback pages with the hand-graded points and the graders' comments,
OUTPUT/nbgrader/feedback/<student>/<module>/<notebook>.html: a student whose page cannot be made is named
on stderr, after every other student's pages are written.

Exit codes: 0 the final grades (and pages) are written; 1 they are written, but grading itself failed for some
students of the run (their rows in OUTPUT/grades.csv say "grading failed": no grade to finish; re-run
`tito grade ... --resume`) or some students' feedback pages could not be made; 2 no class gradebook to read.
"""
from __future__ import annotations

import sys
from pathlib import Path

from tito.config import Course, TitoError
from tito.grading import classrun, course_dir, final_grades
from tito.grading.per_student import GRADING_FAILED


def locate(course: Course, module: str, output_dir: str | None) -> Path:
    """The grading output folder of `module`: --output-dir, else its latest run; TitoError when it holds no
    class gradebook."""
    if output_dir:
        out, looked = Path(output_dir), [Path(output_dir)]
    else:
        out, looked = course_dir.find_run(course.root, module, classrun.default_output_dir(course, module))
    if out is None or not (course_dir.path(out) / "gradebook.db").is_file():
        where = ", ".join(str(course_dir.path(p) / "gradebook.db") for p in looked)
        raise TitoError(f"no class gradebook for {module} (looked for {where}): run `python3 -m tito grade "
                        f"{module} SUBMISSIONS` first (or give --output-dir)", code=2)
    return out


def run(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    out = locate(course, module, args.output_dir)
    course_path = course_dir.path(out)
    subs = final_grades.read(course_path, module)
    rows = final_grades.table(subs)
    final_grades.write_csv(out / "final_grades.csv", final_grades.FIELDS, rows)
    cols, qrows = final_grades.questions(course_path, module, subs)
    final_grades.write_csv(out / "questions.csv", cols, qrows)
    final_grades.nbgrader_export(course_path, out / "nbgrader_export.csv")
    totals = [r for r in rows if r["notebook"] == final_grades.TOTAL]
    print(f"{'student':<20} {'autograded':>10} {'by hand':>8} {'pending':>8} {'total':>12}  status")
    for r in totals:
        print(f"{r['student']:<20} {r['autograded']:>10} {r['hand_graded']:>8} {r['pending']:>8} "
              f"{r['total'] + '/' + r['max_score']:>12}  {r['status']}")
    pending = [r for r in totals if r["status"] != "complete"]
    if pending:
        print(f"\n{classrun.plural(len(pending), 'student')} with written answers still to grade by hand (pending) or "
              f"to grade again (regrade: the answer changed since): `python3 -m tito formgrader {module.split('_', 1)[0]}`")
    shown = course.shown(out)
    print(f"\nfinal grades: {shown}/final_grades.csv; per question: {shown}/questions.csv; "
          f"nbgrader's columns: {shown}/nbgrader_export.csv")
    if args.feedback:
        unwritten: dict[str, str] = {}
        pages = final_grades.write_feedback(out, module, subs, unwritten)
        print(f"feedback with the hand-graded points and comments: {classrun.plural(len(pages), 'page')} in "
              f"{shown}/{course_dir.NAME}/feedback/<student>/{module}/")
        if unwritten:  # every other student's pages are written; these students' are not
            print(f"feedback not written for {classrun.plural(len(unwritten), 'student')}: "
                  + ", ".join(sorted(unwritten)), file=sys.stderr)
            for student, why in sorted(unwritten.items()):
                print(f"  {student}: {why}", file=sys.stderr)
    failed = sorted({r["student"] for r in classrun.read_csv(out / "grades.csv") if r["status"] == GRADING_FAILED})
    print(f"{classrun.plural(len(totals), 'student')} in the class gradebook, {len(pending)} with written answers left "
          f"to grade by hand" + (f"; grading itself FAILED for {classrun.plural(len(failed), 'student')} of the run "
                                 f"({', '.join(failed[:10])}{', ...' if len(failed) > 10 else ''}): they have no "
                                 "grade; re-run `tito grade ... --resume` (exit 1)" if failed else ""))
    return 1 if failed or (args.feedback and unwritten) else 0
