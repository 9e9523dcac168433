"""tito's own peak memory while grading a hostile class (issue 30; docs/performance.md, "Grading").

Run from the repository root, as root (bubblewrap), once per case, each in a fresh process:

    .venv/bin/python benchmarks/grading_hostile_memory.py honest
    .venv/bin/python benchmarks/grading_hostile_memory.py hostile
    .venv/bin/python benchmarks/grading_hostile_memory.py bloat

Builds the small stats course of the grading tests (tests/fixtures/submissions.py) in a temporary
folder, with the default submission caps, and grades (`--jobs 2`):
- honest: one student with the solution notebooks;
- hostile: that student beside four whose stats_dev.ipynb is a 400 MB notebook, a link to /dev/zero,
  a named pipe and a notebook nested 200,000 levels deep (each with an honest extra_dev.ipynb);
- bloat (issue 40): that student beside two whose two notebooks are each 16 MB of `{}` cells (four such
  notebooks, under the 20 MB cap) and one whose stats_dev.ipynb holds a 3 MB fenced code block and a 3 MB code
  cell (honest otherwise); then `tito grades --feedback` (a process of its own) and formgrader's page of that
  notebook, each timed, with their peak memory.
Prints one JSON line: the peak resident memory of this process (`ru_maxrss`, which the grading
threads share), the seconds, the size of the output folder and each student's score.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from fixtures import submissions as subs  # noqa: E402
from tito.notebooks.student_release import release  # noqa: E402
from tito.config import Course  # noqa: E402
from tito.grading import classrun  # noqa: E402


def main(case: str) -> dict:
    if case not in ("honest", "hostile", "bloat"):
        raise SystemExit(f"case: expected honest, hostile or bloat, got {case!r}")
    base = Path(tempfile.mkdtemp(prefix="tito-hostile-memory-", dir="/var/tmp"))
    try:
        course = Course.load(subs.make_stats_course(base / "course", ROOT, cell_timeout=10))
        release(course, "01_stats")
        src = {s: subs.load(course.nbs_dir / "01_stats" / f"{s}.ipynb") for s in ("stats_dev", "extra_dev")}
        sub = base / "subs"
        for stem, nb in src.items():
            subs.save(nb, sub / "honest" / f"{stem}.ipynb")
        if case == "hostile":
            for name in ("big", "zero", "pipe", "deep"):
                subs.save(src["extra_dev"], sub / name / "extra_dev.ipynb")
            with open(sub / "big" / "stats_dev.ipynb", "w", encoding="utf-8") as f:  # 400 MB of valid JSON
                f.write('{"cells": [], "metadata": {}, "pad": "')
                for _ in range(400):
                    f.write("x" * (1 << 20))
                f.write('"}')
            (sub / "zero" / "stats_dev.ipynb").symlink_to("/dev/zero")
            os.mkfifo(sub / "pipe" / "stats_dev.ipynb")
            (sub / "deep" / "stats_dev.ipynb").write_text('{"cells": [], "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
        if case == "bloat":
            empty = b'{"metadata": {}, "nbformat": 4, "nbformat_minor": 5, "cells": [' + b"{}, " * (4 << 20) + b"{}]}"
            for name in ("bloat1", "bloat2"):
                for stem in src:
                    (sub / name).mkdir(parents=True, exist_ok=True)
                    (sub / name / f"{stem}.ipynb").write_bytes(empty)  # 16 MB
            block = json.loads(json.dumps(src["stats_dev"]))
            block["cells"].append({"cell_type": "markdown", "id": "block", "metadata": {},
                                   "source": "```python\n" + "x = 1\n" * 500_000 + "```"})
            block["cells"].append({"cell_type": "code", "id": "code", "metadata": {}, "outputs": [],
                                   "execution_count": None, "source": "x = 1\n" * 500_000})
            subs.save(block, sub / "block" / "stats_dev.ipynb")
            subs.save(src["extra_dev"], sub / "block" / "extra_dev.ipynb")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        results = classrun.grade(course, "01_stats", sub, base / "out", progress=lambda *a, **k: None, jobs=2)
        extra = instructor_tools(course.root, base / "out") if case == "bloat" else {}
        return {"case": case, "peak_rss_mb_before_grading": round(before), **extra,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "seconds": round(time.perf_counter() - t0),
                "output_mb": round(sum(p.stat().st_size for p in (base / "out").rglob("*") if p.is_file()) / 2**20, 2),
                "scores": {r.student: [r.score, r.max_score] for r in results}, "load": os.getloadavg()}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def instructor_tools(course_root: Path, out: Path) -> dict:
    """`tito grades 01_stats --feedback` in a process of its own, and formgrader's page of the block student's
    stats_dev: seconds and peak memory of each, and the size of that student's feedback pages."""
    import subprocess
    import urllib.parse

    from tito.grading import course_dir
    from tito.grading.formgrader_server import Formgrader

    env = {**os.environ, "TITO_NO_BOOTSTRAP": "1", "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import resource, runpy, sys; sys.argv = ['tito', 'grades', '01_stats', "
                           f"'--output-dir', {str(out)!r}, '--feedback']\ntry:\n    runpy.run_module('tito', run_name='__main__')\n"
                           "finally:\n    print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"],
                          cwd=course_root, env=env, capture_output=True, text=True, timeout=1800)
    grades_s = time.perf_counter() - t0
    rss = next((int(l.split()[1]) for l in done.stderr.splitlines() if l.startswith("MAXRSS")), None)
    pages = sorted((course_dir.path(out) / "feedback" / "block").rglob("*.html"))
    with Formgrader(course_dir.path(out)) as fg:
        import json as _json
        listed = _json.loads(fg.get("/formgrader/api/submitted_notebooks/01_stats/stats_dev"))
        sid = next(x["id"] for x in listed if x["student"] == "block")
        t1 = time.perf_counter()
        page = fg.get(f"/formgrader/submissions/{urllib.parse.quote(sid)}/", timeout=1800)
        page_s = time.perf_counter() - t1
        import psutil
        server_mb = psutil.Process(fg.proc.pid).memory_info().rss / 2**20
    return {"grades_feedback_exit": done.returncode, "grades_feedback_seconds": round(grades_s, 1),
            "grades_feedback_peak_rss_mb": round(rss / 1024) if rss else None,
            "feedback_page_kb": [round(p.stat().st_size / 1024) for p in pages],
            "formgrader_page_seconds": round(page_s, 2), "formgrader_page_kb": round(len(page) / 1024),
            "formgrader_server_rss_mb": round(server_mb)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "hostile")))
