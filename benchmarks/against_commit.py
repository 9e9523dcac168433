"""This tree against an earlier commit, side by side in one run: is anything slower after a change?

    python benchmarks/against_commit.py --base COMMIT [--only benchmark,olympics,grading,complete] [--reps 1]

A restructuring should cost no time. This checks out `--base` into a temporary git worktree and runs
each workload from both trees, alternating which goes first (base, head, head, base, ... so a machine
that slows down or speeds up during the run does not favour one side). Both trees use this tree's
virtual environment (a link to .venv): the same torch and libraries, so only the code differs.

Workloads (each a command run in that tree's root, with that tree's own code and scripts):
    benchmark  `tito benchmark --quiet` (the README's main job: three models, 30 samples each)
    olympics   benchmarks/olympics_judge.py --rounds 10 (the fixture class judged end to end)
    grading    benchmarks/grading_hostile_memory.py honest (one student of the grading tests' course,
               graded end to end: copy, judge, sandboxed host, feedback, scores)
    complete   benchmarks/module_complete.py --edit "" (first run, re-run, forced full run)

For each it prints the median wall time and CPU time (user + system of the whole process tree)
of each side and head / base. CPU time is the steadier figure on a shared machine; the 1-minute
load average before and after is printed because on a busy machine it says as much as the figures.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKLOADS = {
    "benchmark": lambda tmp: [sys.executable, "-m", "tito", "benchmark", "--quiet", "--output-dir", str(tmp / "bench")],
    "olympics": lambda tmp: [sys.executable, "benchmarks/olympics_judge.py", "--rounds", "10"],
    "grading": lambda tmp: [sys.executable, "benchmarks/grading_hostile_memory.py", "honest"],
    "complete": lambda tmp: [sys.executable, "benchmarks/module_complete.py", "--edit", ""],
}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(tree: Path, cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of `cmd` run in `tree`; raises with its output's tail when it fails."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {tree} (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare against, e.g. a tag or a hash")
    ap.add_argument("--only", default=",".join(WORKLOADS), help=f"comma-separated workloads of {sorted(WORKLOADS)}")
    ap.add_argument("--reps", type=int, default=1, help="runs of each side per workload (default 1)")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"--only: unknown workload(s) {unknown}; expected some of {sorted(WORKLOADS)}")
    if args.reps < 1:
        raise SystemExit(f"--reps: expected a positive number of runs, got {args.reps}")
    base = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True)
    if base.returncode != 0:
        raise SystemExit(f"--base: {args.base!r} is not a commit of this repository ({base.stderr.strip()})")

    with tempfile.TemporaryDirectory(prefix="against-") as tmp_s:
        tmp = Path(tmp_s)
        base_tree = tmp / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base_tree), args.base], cwd=ROOT, check=True)
        try:
            (base_tree / ".venv").symlink_to(ROOT / ".venv")
            print(f"head {ROOT} against base {base.stdout.strip()}; load before {os.getloadavg()[0]:.1f}")
            print(f"{'workload':<10} {'base wall':>10} {'head wall':>10} {'ratio':>6} {'base CPU':>9} {'head CPU':>9} {'ratio':>6}")
            for i, name in enumerate(names):
                got: dict[str, list[tuple[float, float]]] = {"base": [], "head": []}
                order = ["base", "head"] if i % 2 == 0 else ["head", "base"]
                for r in range(args.reps):
                    for side in (order if r % 2 == 0 else order[::-1]):
                        work = tmp / f"{name}-{side}-{r}"
                        work.mkdir()
                        tree = base_tree if side == "base" else ROOT
                        got[side].append(run_once(tree, WORKLOADS[name](work)))
                        shutil.rmtree(work, ignore_errors=True)
                med = {s: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for s, v in got.items()}
                print(f"{name:<10} {med['base'][0]:>9.1f}s {med['head'][0]:>9.1f}s {med['head'][0] / med['base'][0]:>6.2f} "
                      f"{med['base'][1]:>8.1f}s {med['head'][1]:>8.1f}s {med['head'][1] / med['base'][1]:>6.2f}", flush=True)
            print(f"load after {os.getloadavg()[0]:.1f}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)


if __name__ == "__main__":
    main()
