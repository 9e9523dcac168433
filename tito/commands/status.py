"""`tito status`: per module, what is exported, released and graded, with counts.

exported  the module's sources, their notebooks in nbs/, the package files those notebooks
          export (`#| default_exp`, `#| export NAME`) and the public names (__all__) in them;
released  release/NN_name/ present: notebooks and data files in it;
graded    build/grades/NN_name/grades.csv (or --grades-dir): students, mean total score.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tito.grading import classrun
from tito.commands.module import exported_files
from tito.config import Course


@dataclass
class ModuleStatus:
    module: str
    sources: int
    notebooks: int
    exported_files: int
    exported_present: int
    public_names: int
    released: bool
    release_notebooks: int
    release_data_files: int
    graded_students: int
    mean_score: float | None
    max_score: float | None


def module_status(course: Course, module: str, grades_dir: Path | None = None) -> ModuleStatus:
    nbs = course.notebooks(module)
    files = exported_files(nbs, course.lib_dir)
    rel = course.release_dir / module
    rel_nbs = sorted(rel.rglob("*.ipynb")) if rel.is_dir() else []
    rel_data = [p for p in rel.rglob("*") if p.is_file() and p.suffix != ".ipynb" and p != rel / "README.md"
                ] if rel.is_dir() else []  # the README (reading order) is not a data file
    gdir = Path(grades_dir) / module if grades_dir else classrun.default_output_dir(course, module)
    totals = [r for r in classrun.read_csv(gdir / "grades.csv") if r.get("notebook") == classrun.TOTAL]
    scores = [float(r["score"]) for r in totals]
    maxima = sorted({float(r["max_score"]) for r in totals})
    return ModuleStatus(
        module=module, sources=len(course.sources(module)), notebooks=len(nbs),
        exported_files=len(files), exported_present=sum(1 for f, n in files if f.exists()),
        public_names=sum(n for _, n in files if n > 0),
        released=rel.is_dir() and bool(rel_nbs), release_notebooks=len(rel_nbs), release_data_files=len(rel_data),
        graded_students=len(totals), mean_score=round(sum(scores) / len(scores), 2) if scores else None,
        max_score=maxima[-1] if maxima else None)


def run(args) -> int:
    course = Course.load()
    mods = course.resolve(args.modules)
    rows = [module_status(course, m, Path(args.grades_dir) if args.grades_dir else None) for m in mods]
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
        return 0
    hdr = ("module", "exported", "released", "graded")
    table = []
    for r in rows:
        exp = (f"{r.exported_present}/{r.exported_files} files, {r.public_names} public names "
               f"({r.notebooks} notebooks from {r.sources} sources)") if r.exported_files else (
            f"no ({r.sources} sources, {r.notebooks} notebooks)")
        rel = (f"yes: {r.release_notebooks} notebooks, {r.release_data_files} data files"
               if r.released else "no")
        gr = (f"{r.graded_students} students, mean {classrun.num(r.mean_score)}/{classrun.num(r.max_score)}"
              if r.graded_students else "no")
        table.append((r.module, exp, rel, gr))
    w = [max(len(t[i]) for t in table + [hdr]) for i in range(len(hdr))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)))
    print("  ".join("-" * x for x in w))
    for t in table:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(t)))
    return 0
