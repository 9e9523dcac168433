"""`tito module start N`: copy a module's student release into the workspace (tito.workspace)."""
from __future__ import annotations

import datetime as _dt
import os
import shutil
import sys
from pathlib import Path

from tito.config import Course, TitoError
from tito.notebooks.nbfile import atomic_write
from tito.workspace.layout import (MARKER, SCRATCH, build_student_package, now, started_modules, write_json,
                                   write_launcher)


def start(course: Course, module: str, workspace: Path | None = None, force: bool = False,
          release_dir: Path | None = None, nbgrader_dir: Path | None = None) -> Path:
    """Copy the student release of `module` into WORKSPACE/NN_name; returns that folder.

    Runs `tito release` first when the release is missing (in a student kit the release is part
    of the kit). Refuses (TitoError) when the folder already holds files, unless `force`; with
    `force` the old folder is moved to WORKSPACE/.tito/backup/NN_name-<time>/ first, never
    deleted. The folder gets README.md (the reading order) and the `tito` launcher
    (`write_launcher`). In a kit the workspace is the kit folder itself: the notebooks, the inline
    and the integration tests all import the package `module complete` builds in KIT/tinytorch.
    """
    from tito.notebooks.student_release import reading_readme, release

    ws = Path(workspace or course.workspace_dir).resolve()
    if course.kit and ws != course.root.resolve():
        raise TitoError(f"--workspace {ws}: in the student kit the workspace is the kit folder {course.root} "
                        "(your notebooks import the package `module complete` builds there); leave --workspace out")
    rel_root = Path(release_dir or course.release_dir)
    rel = rel_root / module
    if not (rel.is_dir() and any(rel.glob("*.ipynb"))):
        if course.kit:
            raise TitoError(f"this student kit has no release of {module} in {rel}: ask your instructor for the kit "
                            f"of {module} (`tito release {module.split('_', 1)[0]} --student-kit DIR`)")
        print(f"no release of {module} in {rel}: running `tito release {module}` ...", flush=True)
        res = release(course, module, release_dir=rel_root, course_dir=nbgrader_dir)
        if res.leaks:
            raise TitoError(f"release of {module} failed the leak check ({len(res.leaks)} solution lines); "
                            "fix the module before students start it")
    elif not course.kit:
        have = {p.name for p in rel.glob("*.ipynb")}
        want = {p.name for p in course.notebooks(module)}
        if want and have != want:
            print(f"warning: the release in {rel} does not match the course's notebooks "
                  f"(missing: {', '.join(sorted(want - have)) or '-'}; extra: {', '.join(sorted(have - want)) or '-'}); "
                  f"the instructor should run `tito release {module}`", file=sys.stderr)
    dest = ws / module
    if dest.exists() and any(dest.iterdir()):
        if not force:
            raise TitoError(f"{dest} already holds work; refusing to overwrite it "
                            f"(use --force: the old folder is kept under {ws / SCRATCH / 'backup'})")
        backup = ws / SCRATCH / "backup" / f"{module}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(dest), str(backup))
        print(f"moved the old {dest} to {backup}")
    ws.mkdir(parents=True, exist_ok=True)
    tmp = ws / f".{module}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(rel, tmp)
    if not (tmp / "README.md").is_file():  # a release made before releases carried it
        atomic_write(tmp / "README.md", reading_readme(course, module, tmp))
    write_launcher(tmp)
    notebooks = [p.name for p in course.in_reading_order(module, sorted(tmp.glob("*.ipynb")), tmp)]
    write_json(tmp / MARKER, {"module": module, "course_root": str(course.root), "release": str(rel.resolve()),
                               "started": now(), "notebooks": notebooks})
    if dest.exists():
        dest.rmdir()  # empty (checked above)
    os.replace(tmp, dest)
    if course.kit:  # the package the notebooks import, with the stubs, until `module complete` exports their code
        build_student_package(course, ws, [nb for d in started_modules(course, ws) for nb in sorted(d.glob("*.ipynb"))])
    return dest
