"""`tito release MODULE`: nbgrader student release into release/NN_name/, then a leak check."""
from __future__ import annotations

from pathlib import Path

from tito import nbgrader_glue
from tito.config import Course, TitoError


def release(course: Course, module: str, release_dir: Path | None = None,
            course_dir: Path | None = None) -> nbgrader_glue.ReleaseResult:
    """Release `module` (full name) from course.nbs_dir; paths default to settings.ini."""
    notebooks = course.notebooks(module)
    if not notebooks:
        raise TitoError(f"no notebooks in {course.nbs_dir / module}: run `tito export` first")
    return nbgrader_glue.release_module(
        notebooks, module, Path(release_dir or course.release_dir), Path(course_dir or course.nbgrader_dir),
        course.course_id, course.cell_timeout)


def run(args) -> int:
    course = Course.load()
    rc = 0
    for module in course.resolve(args.modules):
        res = release(course, module, args.release_dir, args.nbgrader_dir)
        if res.leaks:
            print(f"release {module} FAILED: {len(res.leaks)} solution line(s) leaked; release removed:")
            for leak in res.leaks:
                print(f"  {leak}")
            rc = 1
            continue
        print(f"release {module}: {len(res.notebooks)} notebook(s), no solution lines in them")
        for nb in res.notebooks:
            try:
                shown = nb.relative_to(course.root)
            except ValueError:
                shown = nb
            print(f"  {shown}")
    return rc
