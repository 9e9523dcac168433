"""tito's own peak memory while grading a hostile class (issue 30; docs/performance.md, "Grading").

Run from the repository root, as root (bubblewrap), once per case, each in a fresh process:

    .venv/bin/python benchmarks/grading_hostile_memory.py honest
    .venv/bin/python benchmarks/grading_hostile_memory.py hostile

Builds the small stats course of the grading tests (tests/fixtures/submissions.py) in a temporary
folder, with the default submission caps, and grades (`--jobs 2`):
- honest: one student with the solution notebooks;
- hostile: that student beside four whose stats_dev.ipynb is a 400 MB notebook, a link to /dev/zero,
  a named pipe and a notebook nested 200,000 levels deep (each with an honest extra_dev.ipynb).
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
    if case not in ("honest", "hostile"):
        raise SystemExit(f"case: expected honest or hostile, got {case!r}")
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
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        results = classrun.grade(course, "01_stats", sub, base / "out", progress=lambda *a, **k: None, jobs=2)
        return {"case": case, "peak_rss_mb_before_grading": round(before),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "seconds": round(time.perf_counter() - t0),
                "output_mb": round(sum(p.stat().st_size for p in (base / "out").rglob("*") if p.is_file()) / 2**20, 2),
                "scores": {r.student: [r.score, r.max_score] for r in results}, "load": os.getloadavg()}
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "hostile")))
