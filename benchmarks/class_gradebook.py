"""The class gradebook at class scale: a generated class of N students (default 300) of Module 19.

Run from the repository root (in tito's venv):

    .venv/bin/python benchmarks/class_gradebook.py [--students 300] [--out DIR]

Nobody is graded: each student's autograded notebooks and verdicts are generated
(tests/fixtures/gradebook_class.py) and published as `tito grade` publishes a student. Then, timed:
1. the course directory made from the run's template (tito.grading.course_dir.prepare);
2. each student merged into the class gradebook, one call per student as a grading run does after
   publishing each (total and median per student), and a second pass (a regrade of the whole class,
   the hand-graded scores kept);
3. `tito grades`' reading of the gradebook (final table and per-question table for the class);
4. formgrader: the server's start, the list of one notebook's submissions (what its "Manual Grading"
   page asks for, /formgrader/api/submitted_notebooks/...) and one student's grading page with the
   written answers (/formgrader/submissions/<id>/).
Prints one line per figure and the machine's load before and after (the figures are wall times).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fixtures import gradebook_class as gc  # noqa: E402
from tito.notebooks import nbgrader_glue  # noqa: E402
from tito.notebooks.student_release import data_files  # noqa: E402
from tito.config import Course  # noqa: E402
from tito.grading import course_dir, final_grades, gradebook  # noqa: E402
from tito.grading.formgrader_server import Formgrader  # noqa: E402

MODULE = "19_benchmarking"
NB = "systems_thinking_dev"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=300)
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    a = ap.parse_args(argv)
    if a.students < 1:
        ap.error(f"--students must be >= 1, got {a.students}")
    base = Path(a.out or tempfile.mkdtemp(prefix="class-gradebook-"))
    course = Course.load(ROOT)
    print(f"load before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); work folder {base}")
    nbs = nbgrader_glue.module_assignment_notebooks(course.nbs_dir, MODULE)
    t = time.perf_counter()
    tpl = gradebook.build_template(base / "template", MODULE, nbs, course.course_id, 60, data_files(course, MODULE))
    print(f"assignment template (nbgrader generate_assignment, once per run): {time.perf_counter() - t:.1f} s")
    out = base / "grades" / MODULE
    students = [f"s{i:04d}" for i in range(a.students)]
    t = time.perf_counter()
    results = gc.publish_class(out, tpl, MODULE, students)
    print(f"generated and published {len(students)} students: {time.perf_counter() - t:.1f} s (not part of the figures)")
    t = time.perf_counter()
    course_dir.prepare(out, tpl, MODULE, course.course_id)
    print(f"prepare the course directory: {time.perf_counter() - t:.2f} s")
    for label in ("merge", "merge again (a regrade; hand grades kept)"):
        per = []
        t = time.perf_counter()
        for r in results:
            t1 = time.perf_counter()
            course_dir.merge(out, MODULE, [r])
            per.append(time.perf_counter() - t1)
        print(f"{label}: {time.perf_counter() - t:.1f} s for {len(results)} students, "
              f"median {statistics.median(per) * 1e3:.0f} ms per student, max {max(per) * 1e3:.0f} ms")
    t = time.perf_counter()
    subs = final_grades.read(course_dir.path(out), MODULE)
    rows = final_grades.table(subs)
    cols, _ = final_grades.questions(course_dir.path(out), MODULE, subs)
    print(f"read the final grades ({len(rows)} rows, {len(cols) - 2} question columns): {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    with Formgrader(course_dir.path(out)) as fg:
        print(f"formgrader: server up in {time.perf_counter() - t:.1f} s")
        lists, pages = [], []
        for _ in range(3):
            t = time.perf_counter()
            listed = json.loads(fg.get(f"/formgrader/api/submitted_notebooks/{MODULE}/{NB}", timeout=600))
            lists.append(time.perf_counter() - t)
        sid = listed[0]["id"]
        for _ in range(3):
            t = time.perf_counter()
            page = fg.get(f"/formgrader/submissions/{sid}/", timeout=600)
            pages.append(time.perf_counter() - t)
        assert len(listed) == len(students) and b"Answer key and rubric" in page
        print(f"formgrader: list {len(listed)} submissions of {NB} (needs-manual-grade flags, scores): "
              f"{', '.join(f'{x:.2f}' for x in lists)} s; one student's grading page ({len(page) // 1024} KiB, "
              f"4 written answers with their answer keys): {', '.join(f'{x:.2f}' for x in pages)} s")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
