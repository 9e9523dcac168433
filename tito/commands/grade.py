"""`tito grade MODULE SUBMISSIONS`: the command line of the class run (tito.grading.classrun).

SUBMISSIONS is a folder of student folders, of hand-in archives (`tito module submit`), an LMS's bulk download
(Canvas, Moodle: a folder or its zip), or nbgrader's submitted/ layout (tito.grading.handin). Exit codes: 0 every
student graded (whatever their scores), 1 grading itself failed for at least one student (no grade for them: the
closing line names them), 2 refused before grading started (bad arguments, no sandbox).
"""
from __future__ import annotations

from pathlib import Path

from tito.config import Course
from tito.grading import course_dir, handin
from tito.isolation import sandbox
from tito.grading.classrun import closing_line, default_output_dir, grade, grading_failed
from tito.grading.per_student import num


def run(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    out = Path(args.output_dir) if args.output_dir else default_output_dir(course, module)
    course_dir.record_run(course.root, module, out)  # `tito status`, `grades` and `formgrader` find it
    limits = sandbox.Limits(memory_mb=args.memory_limit, processes=args.process_limit)
    subs = handin.for_grading(course, module, Path(args.submissions), out, print)
    results = grade(course, module, subs.folder, out, [args.student] if args.student else None,
                    args.timeout, jobs=args.jobs, scheduler=args.scheduler, no_sandbox=args.no_sandbox,
                    resume=args.resume, show_progress=True, limits=limits, seed=args.seed,
                    extra_problems=subs.problems)
    print()
    print(f"{'student':<20} {'score':>12} {'manual':>7}  status")
    for r in results:
        print(f"{r.student:<20} {num(r.score) + '/' + num(r.max_score):>12} {num(r.manual_pending):>7}  {r.status}")
    if any(r.manual_pending for r in results):
        num_ = module.split("_", 1)[0]
        print(f"\nmanual: points of written answers awaiting grading by hand (as the class gradebook has them); they "
              f"are in the maximum, not yet in the score. Grade them with `python3 -m tito formgrader {num_}`, then "
              f"`python3 -m tito grades {num_}`")
    shown = course.shown(out)
    print(f"\ngrades: {shown}/grades.csv; feedback: {shown}/students/<student>/feedback/*.html; class gradebook "
          f"(nbgrader): {shown}/{course_dir.NAME}/")
    problems = 0
    if (out / "problems.txt").exists() and not args.student:
        problems = len((out / "problems.txt").read_text(encoding="utf-8").splitlines())
    if args.no_sandbox:
        print("WARNING: this run was NOT SANDBOXED (--no-sandbox); grades.csv says so in its sandbox column")
    print(closing_line(results, problems))
    if any(grading_failed(r) for r in results):
        import shlex

        again = ["python3", "-m", "tito", "grade", module.split("_", 1)[0], args.submissions, "--resume",
                 *(["--output-dir", args.output_dir] if args.output_dir else [])]
        print(f"grading itself failed for some students (their reason is in grades.csv): fix the cause, then "
              f"`{shlex.join(again)}` grades only them again (exit 1)")
        return 1
    return 0
