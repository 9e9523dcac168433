"""`tito formgrader MODULE`: nbgrader's formgrader on the module's class gradebook, until Ctrl-C."""
from __future__ import annotations

import time

from tito.commands.grades import locate
from tito.config import Course
from tito.grading import course_dir
from tito.grading.formgrader_server import Formgrader


def run(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    out = locate(course, module, args.output_dir)
    course_dir.write_config(course_dir.path(out), course.course_id, course.cell_timeout)  # its root, if it moved
    fg = Formgrader(course_dir.path(out), args.port)
    print(f"starting nbgrader's formgrader for {module} ({course_dir.path(out)}) ...", flush=True)
    try:
        fg.start()
        print(f"\nformgrader: {fg.url}\n\nOpen it in a browser on this machine (it listens on 127.0.0.1 only): "
              f"Manual Grading -> {module} -> a notebook -> a student. Each written answer shows its answer key and "
              f"rubric; scores and comments are saved as you type.\nThen `python3 -m tito grades "
              f"{module.split('_', 1)[0]}` for the totals. Stop with Ctrl-C (log: {fg.log}).", flush=True)
        while fg.proc is not None and fg.proc.poll() is None:
            time.sleep(0.5)
        print(f"the formgrader stopped (exit {fg.proc.returncode if fg.proc else '?'}; log: {fg.log})")
        return 1
    except KeyboardInterrupt:
        print("\nstopping the formgrader ...", flush=True)
        return 0
    finally:
        fg.stop()
