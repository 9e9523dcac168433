"""`tito bench-quality`: run benchmarks/measurement_quality.py (the timing core vs torch.utils.benchmark)."""
from __future__ import annotations

import sys

from tito.isolation import process
from tito.config import Course


def run(args) -> int:
    course = Course.load()
    script = course.root / "benchmarks" / "measurement_quality.py"
    cmd = [sys.executable, str(script), "--threads", str(args.threads)]
    if args.tooling:
        cmd.append("--tooling")
    if args.output:
        cmd += ["--output", args.output]
    rc = process.wait(process.start(cmd, cwd=course.root, stdout=None, stderr=None), None)
    return 1 if rc is None else rc


def add_parser(sub, lazy) -> None:
    s = sub.add_parser("bench-quality", help="measure the harness itself against torch.utils.benchmark",
                       description="Agreement, overhead, process-to-process reproducibility, time to 1%% "
                                   "precision and memory truth of the timing core, measured side by side "
                                   "with torch.utils.benchmark in one run (several minutes).")
    s.add_argument("--threads", type=int, default=1, help="torch threads for both tools (default 1)")
    s.add_argument("--tooling", action="store_true", help="also time `tito module complete 19` and `tito test`")
    s.add_argument("--output", default=None, help="JSON output (default benchmark_results/measurement_quality.json)")
    s.set_defaults(func=lazy("bench_quality"))
