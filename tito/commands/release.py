"""`tito release MODULE`: arguments in, words out; the release is tito.notebooks.student_release, the
student kit (`--student-kit DIR`) tito.notebooks.kit."""
from __future__ import annotations

import sys
from pathlib import Path

from tito.config import Course, TitoError
from tito.notebooks.kit import build_student_kit
from tito.notebooks.student_release import release


def run(args) -> int:
    course = Course.load()
    kit = getattr(args, "student_kit", None)
    if kit:
        mods = course.resolve(args.modules)
        if len(mods) != 1:
            raise TitoError("--student-kit: give one module (a kit is made for one module)", code=2)
        res = build_student_kit(course, mods[0], Path(kit))
        for w in res.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if res.leaks:
            print(f"student kit of {mods[0]} FAILED: {len(res.leaks)} forbidden line(s) or refused file(s); "
                  "nothing written:")
            for leak in res.leaks[:50]:
                print(f"  {leak}")
            return 1
        print(f"student kit of {res.module} in {res.dest}: {len(res.notebooks)} notebook(s) in reading order, "
              f"{len(res.tests)} integration test file(s), reference package of "
              f"{', '.join(res.reference) or 'no earlier module'}; no solution or hidden-test line in any file")
        for i, nb in enumerate(res.notebooks, 1):
            print(f"  {i:2d}. {nb.relative_to(res.dest)}")
        print(f"students: `cd {res.dest} && python3 -m tito module start {res.module.split('_', 1)[0]}`")
        return 0
    rc = 0
    for module in course.resolve(args.modules):
        res = release(course, module, args.release_dir, args.nbgrader_dir)
        if res.leaks:
            print(f"release {module} FAILED: {len(res.leaks)} solution line(s) leaked; release removed:")
            for leak in res.leaks:
                print(f"  {leak}")
            rc = 1
            continue
        print(f"release {module}: {len(res.notebooks)} notebook(s), {len(res.data_files)} data file(s) and "
              f"README.md (the reading order), no solution or hidden-test lines in them")
        for nb in res.notebooks + res.data_files + [res.release_dir / "README.md"]:
            try:
                shown = nb.relative_to(course.root)
            except ValueError:
                shown = nb
            print(f"  {shown}")
    return rc
