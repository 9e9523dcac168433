"""`tito grade MODULE SUBMISSIONS_DIR`: the command line of the class run (tito.grading.classrun)."""
from __future__ import annotations

from pathlib import Path

from tito.config import Course
from tito.grading import course_dir
from tito.isolation import sandbox
from tito.grading.classrun import default_output_dir, grade
from tito.grading.per_student import num


def run(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    out = Path(args.output_dir) if args.output_dir else default_output_dir(course, module)
    course_dir.record_run(course.root, module, out)  # `tito status`, `grades` and `formgrader` find it
    limits = sandbox.Limits(memory_mb=args.memory_limit, processes=args.process_limit)
    results = grade(course, module, Path(args.submissions), out, [args.student] if args.student else None,
                    args.timeout, jobs=args.jobs, scheduler=args.scheduler, no_sandbox=args.no_sandbox,
                    resume=args.resume, show_progress=True, limits=limits, seed=args.seed)
    print()
    print(f"{'student':<20} {'score':>12} {'manual':>7}  status")
    for r in results:
        print(f"{r.student:<20} {num(r.score) + '/' + num(r.max_score):>12} {num(r.manual_pending):>7}  {r.status}")
    if any(r.manual_pending for r in results):
        num_ = module.split("_", 1)[0]
        print(f"\nmanual: points of written answers awaiting grading by hand; they are in the maximum, not yet in the "
              f"score. Grade them with `python3 -m tito formgrader {num_}`, then `python3 -m tito grades {num_}`")
    shown = course.shown(out)
    print(f"\ngrades: {shown}/grades.csv; feedback: {shown}/students/<student>/feedback/*.html; class gradebook "
          f"(nbgrader): {shown}/{course_dir.NAME}/")
    if (out / "problems.txt").exists() and not args.student:
        print(f"not graded (see {shown}/problems.txt): "
              f"{len((out / 'problems.txt').read_text(encoding='utf-8').splitlines())} line(s)")
    if args.no_sandbox:
        print("WARNING: this run was NOT SANDBOXED (--no-sandbox); grades.csv says so in its sandbox column")
    return 0
