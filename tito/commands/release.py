"""`tito release MODULE`: nbgrader student release into release/NN_name/, then a leak check.

Data files the notebooks need travel with the release (see `data_files`).
"""
from __future__ import annotations

import configparser
from pathlib import Path

from tito import nbgrader_glue
from tito.config import Course, TitoError

DATA_SECTION = "release_data"


def data_files(course: Course, module: str) -> dict[str, Path]:
    """The data files released with `module`: relative path in the release -> source file.

    Two sources, both optional:
    - everything under `modules/NN_name/data/` keeps its path (`data/...`);
    - settings.ini, section `[release_data]`, key = module name, value = whitespace-separated
      glob patterns relative to the course root; each match goes to `data/<file name>`.

        [release_data]
        19_benchmarking = benchmarks/reference/*.json
    """
    out: dict[str, Path] = {}
    base = course.modules_dir / module / "data"
    if base.is_dir():
        for f in sorted(base.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts and ".ipynb_checkpoints" not in f.parts:
                out[(Path("data") / f.relative_to(base)).as_posix()] = f
    cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    cp.read(course.root / "settings.ini", encoding="utf-8")
    if cp.has_section(DATA_SECTION) and cp.has_option(DATA_SECTION, module):
        for pattern in cp.get(DATA_SECTION, module).split():
            hits = sorted(p for p in course.root.glob(pattern) if p.is_file())
            if not hits:
                raise TitoError(f"settings.ini [{DATA_SECTION}] {module}: {pattern!r} matches no file")
            for f in hits:
                rel = f"data/{f.name}"
                if rel in out and out[rel].resolve() != f.resolve():
                    raise TitoError(f"two data files for {module} would both be released as {rel}: "
                                    f"{out[rel]} and {f}")
                out[rel] = f
    return out


def release(course: Course, module: str, release_dir: Path | None = None,
            course_dir: Path | None = None) -> nbgrader_glue.ReleaseResult:
    """Release `module` (full name) from course.nbs_dir; paths default to settings.ini."""
    notebooks = course.notebooks(module)
    if not notebooks:
        raise TitoError(f"no notebooks in {course.nbs_dir / module}: run `tito export` first")
    return nbgrader_glue.release_module(
        notebooks, module, Path(release_dir or course.release_dir), Path(course_dir or course.nbgrader_dir),
        course.course_id, course.cell_timeout, data_files(course, module))


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
        print(f"release {module}: {len(res.notebooks)} notebook(s), {len(res.data_files)} data file(s), "
              f"no solution or hidden-test lines in them")
        for nb in res.notebooks + res.data_files:
            try:
                shown = nb.relative_to(course.root)
            except ValueError:
                shown = nb
            print(f"  {shown}")
    return rc
