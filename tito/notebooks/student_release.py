"""`tito release MODULE`'s work: the nbgrader student release into release/NN_name/, then a leak check.

Data files the notebooks need travel with the release (see `data_files`), and a README.md with
the notebooks' reading order.
"""
from __future__ import annotations

import configparser
from pathlib import Path

from tito.notebooks import nbgrader_glue
from tito.config import Course, TitoError, readme_library
from tito.notebooks.nbfile import atomic_write

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


def reading_readme(course: Course, module: str, folder: Path | None = None) -> str:
    """The README.md of a released module folder: the notebooks in reading order, numbered, with the
    step each one is (the table of modules/NN_name/README.md), and the commands to run from there."""
    num = module.split("_", 1)[0]
    steps: dict[str, str] = {}
    title, prereq = f"Module {num}", ""
    src = course.modules_dir / module / "README.md"
    if src.is_file():
        lines = src.read_text(encoding="utf-8").splitlines()
        title = next((ln.lstrip("# ").split(" — ")[0].strip() for ln in lines if ln.startswith("# ")), title)
        at = next((i for i, ln in enumerate(lines) if ln.startswith("Prerequisite")), None)
        while at is not None and at < len(lines) and lines[at].strip():  # the paragraph
            prereq, at = f"{prereq} {lines[at].strip()}".strip(), at + 1
        for ln in lines:
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            if len(cells) >= 3 and (cells[0].isdigit() or cells[0].startswith("beside ")):
                steps[cells[1].strip("`").removesuffix(".ipynb")] = " | ".join(cells[2:])
    readme = course.readme_path(module, folder)
    library = dict(readme_library(readme)) if readme else {}
    order = [s for s in course.reading_order(module, folder) if s not in library]
    rows = [f"| {i} | `{stem}.ipynb` | {steps.get(stem, '')} |" for i, stem in enumerate(order, 1)]
    have = set(course.reading_order(module, folder))
    lib_rows = [f"| beside {n} | `{stem}.ipynb` | {steps.get(stem, '')} |" for stem, n in library.items() if stem in have]
    return "\n".join([
        f"# {title}: your notebooks, in reading order", "",
        "Work through them in this order; each builds on the ones before it." + (f" {prereq}" if prereq else ""),
        "", "| # | notebook | the step in the story (and what you build) |", "|---|---|---|", *rows, "",
        *(["Library notebooks, outside the reading order: complete, no tasks, exported with the others; open one for the",
           "details (\"beside N\": the step it goes with).", "",
           "| goes with | notebook | what it holds |", "|---|---|---|", *lib_rows, ""] if lib_rows else []),
        "Replace each `raise NotImplementedError(\"not yet implemented: ...\")` with your code and run the",
        "cells: the inline tests say what is wrong. From this folder:", "",
        "```bash",
        f"python3 -m tito module complete {num}    # your tests, your export, the integration tests",
        *(["python3 -m tito olympics submit --model mine.pt    # the capstone: your model file, here"]
          if (course.nbs_dir / module / "olympics_dev.ipynb").exists() or "olympics_dev" in order else []),
        "```", ""])


def release_data(release_dir: Path) -> list[Path]:
    """The data files of a release folder: every file but the notebooks and the README (the reading order),
    as `tito release` and `tito status` count them."""
    d = Path(release_dir)
    return sorted(p for p in d.rglob("*") if p.is_file() and p.suffix != ".ipynb" and p != d / "README.md"
                  ) if d.is_dir() else []


def release(course: Course, module: str, release_dir: Path | None = None,
            course_dir: Path | None = None) -> nbgrader_glue.ReleaseResult:
    """Release `module` (full name) from course.nbs_dir; paths default to settings.ini. The release
    also gets README.md with the reading order (`reading_readme`)."""
    notebooks = course.notebooks(module)
    if not notebooks:
        raise TitoError(f"no notebooks in {course.nbs_dir / module}: run `tito export` first")
    res = nbgrader_glue.release_module(
        notebooks, module, Path(release_dir or course.release_dir), Path(course_dir or course.nbgrader_dir),
        course.course_id, course.cell_timeout, data_files(course, module))
    if not res.leaks:
        atomic_write(res.release_dir / "README.md", reading_readme(course, module))
        res.data_files = release_data(res.release_dir)
        res.notebooks = course.in_reading_order(module, res.notebooks)
    return res
