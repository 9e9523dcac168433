"""Measurement on a busy machine (issue 41): the three verdicts' error rates and the median's stability, at three loads.

    python benchmarks/busy_machine.py [--trials 100] [--block 10] [--runs 30] [--json FILE]

Workload: the bundled digits CNN, one image, timed as a model of 10 forward passes ("base"). Beside it, in one
`Benchmark`: the same object under two other names ("same", "same2": two A/A pairs per trial, 200 pairs in 100
trials), a model of 11 passes (+10% work) and one of 30 passes (3x). Each trial is one `Benchmark(...,
measurement_runs=--runs, threads=1, budget_s=3 s x 5 models)`: `tito benchmark`'s defaults (30 samples a look, one
thread, 3 s per model), sampling until every comparison with base is decided or the budget is spent, then
`compare(base, m)` for each m: the verdict a user reads. (The two A/A pairs of a trial share base's samples, so
they are not independent: the rate is still estimated without bias, with a little more spread.)

Loads: quiet (nothing started by this script), 1 busy process per core and 4 per core (`python3 -c 'while True:
pass'`, each killed by its PID), cycled in blocks of --block trials, so drift of the machine during the run falls on
all three alike. The 1-minute load average (os.getloadavg) is recorded at every trial: on a shared machine "quiet"
is only what this script adds.

Per load it prints: the A/A false-positive rate (same called different; <= 7% wanted) and how the rest split
between equivalent and inconclusive; detection of +10% work (called slower; >= 90% wanted); the 3x verdicts (never
equivalent); the base's median per call, CPU time and wall time (median over trials) and their ratio to quiet
(CPU time within 10% wanted); interrupted samples, looks and seconds per trial.

    python benchmarks/busy_machine.py --module-complete 3 [--module 19]

instead runs `tito module complete 19` with the instructor's solutions in a fresh student workspace (as
benchmarks/module_complete.py makes it) three times, forced (`--no-cache`), beside 4 busy processes per core, and
prints each run's exit code, time and load: a correct student must not be told they failed because the machine
was busy.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

from busy import busy_processes  # noqa: E402
from tinytorch.benchmarking.defaults import BUDGET_PER_MODEL_S  # noqa: E402
from tinytorch.benchmarking.digits import default_digits_model, load_digits_split  # noqa: E402
from tinytorch.benchmarking.harness import Benchmark  # noqa: E402

LOADS = {"quiet": 0, "1 busy/core": 1, "4 busy/core": 4}


def models() -> dict:
    cnn = default_digits_model().eval()

    def times(k):
        def f(x):
            for _ in range(k):
                out = cnn(x)
            return out
        return f
    base = times(10)
    return {"base": base, "same": base, "same2": base, "plus10": times(11), "x3": times(30)}


def trial(ms: dict, x: torch.Tensor, runs: int, seed: int, rounds: int | None = None, budget_s: float | None = None) -> dict:
    t0 = time.perf_counter()
    b = Benchmark(ms, measurement_runs=runs, threads=1, seed=seed, rounds=rounds,
                  budget_s=BUDGET_PER_MODEL_S * len(ms) if budget_s is None else budget_s)
    lat = b.run_latency_benchmark(input_shape=tuple(x.shape))
    meta = lat["base"].metadata
    out = {"seconds": time.perf_counter() - t0, "load": os.getloadavg()[0], "looks": b.sequential["latency"]["looks"],
           "base_cpu_ms": statistics.median(meta["cpu_per_call_ms"]) / 10, "base_wall_ms": lat["base"].median / 10,
           "interrupted": sum(r.metadata["interrupted_samples"] for r in lat.values()),
           "taken": sum(r.metadata["samples_taken"] for r in lat.values())}
    for m in ("same", "same2", "plus10", "x3"):
        c = b.compare("base", m)
        out[m] = {"outcome": c.outcome, "winner": c.winner, "ratio": c.ratio, "says_no_difference":
                  "no significant difference" in c.verdict or "no difference" in c.verdict}
    return out


def summary(rows: list[dict], quiet: list[dict] | None) -> dict:
    n = len(rows)
    share = lambda key, pred: sum(pred(r[key]) for r in rows) / n  # noqa: E731
    pairs = lambda pred: sum(pred(r[k]) for r in rows for k in ("same", "same2")) / (2 * n)  # noqa: E731
    cpu, wall = statistics.median(r["base_cpu_ms"] for r in rows), statistics.median(r["base_wall_ms"] for r in rows)
    s = {"trials": n, "aa_pairs": 2 * n, "load_min": min(r["load"] for r in rows), "load_median": statistics.median(r["load"] for r in rows),
         "load_max": max(r["load"] for r in rows),
         "aa_different": pairs(lambda c: c["outcome"] == "different"),
         "aa_equivalent": pairs(lambda c: c["outcome"] == "equivalent"),
         "aa_inconclusive": pairs(lambda c: c["outcome"] == "inconclusive"),
         "plus10_detected": share("plus10", lambda c: c["outcome"] == "different" and c["winner"] == "base"),
         "plus10_ratio": statistics.median(r["plus10"]["ratio"] for r in rows),
         "x3_equivalent": share("x3", lambda c: c["outcome"] == "equivalent"),
         "x3_no_difference": share("x3", lambda c: c["says_no_difference"]),
         "x3_different": share("x3", lambda c: c["outcome"] == "different" and c["winner"] == "base"),
         "base_cpu_ms": cpu, "base_wall_ms": wall,
         "interrupted_share": sum(r["interrupted"] for r in rows) / max(sum(r["taken"] for r in rows), 1),
         "looks_mean": statistics.fmean(r["looks"] for r in rows),
         "seconds_median": statistics.median(r["seconds"] for r in rows)}
    if quiet:
        s["cpu_vs_quiet"] = cpu / statistics.median(r["base_cpu_ms"] for r in quiet)
        s["wall_vs_quiet"] = wall / statistics.median(r["base_wall_ms"] for r in quiet)
    return s


def table(summaries: dict[str, dict]) -> str:
    lines = ["| load (1-min load avg: min / median / max) | trials (A/A pairs) | A/A called different | A/A equivalent / "
             "inconclusive | +10% detected | 3x: different / equivalent / 'no difference' | base median per pass, CPU "
             "(vs quiet) | wall (vs quiet) | samples interrupted | looks, s per trial |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for load, s in summaries.items():
        vs = lambda k: f" ({s[k]:.3f}x)" if k in s else ""  # noqa: E731
        lines.append(
            f"| {load} ({s['load_min']:.1f} / {s['load_median']:.1f} / {s['load_max']:.1f}) | {s['trials']} ({s['aa_pairs']}) | "
            f"{s['aa_different']:.1%} | {s['aa_equivalent']:.0%} / {s['aa_inconclusive']:.0%} | {s['plus10_detected']:.0%} "
            f"(ratio {s['plus10_ratio']:.3f}) | {s['x3_different']:.0%} / {s['x3_equivalent']:.0%} / "
            f"{s['x3_no_difference']:.0%} | {s['base_cpu_ms'] * 1e3:.1f} µs{vs('cpu_vs_quiet')} | "
            f"{s['base_wall_ms'] * 1e3:.1f} µs{vs('wall_vs_quiet')} | {s['interrupted_share']:.1%} | "
            f"{s['looks_mean']:.2f}, {s['seconds_median']:.1f} s |")
    return "\n".join(lines)


def module_complete_busy(module: str, runs: int) -> int:
    "`module complete` with the instructor's solutions, `runs` times (forced), beside 4 busy processes per core."
    import shutil
    import tempfile

    from module_complete import timed_complete  # noqa: E402  (benchmarks/ is this script's folder)
    from tito.config import Course
    from tito.notebooks.student_release import release
    from tito.workspace.start import start

    course = Course.load(ROOT)
    (name,) = course.resolve([module])
    base = Path(tempfile.mkdtemp(prefix="tito-busy-complete-"))
    failed = 0
    try:
        release(course, name, release_dir=base / "release", course_dir=base / "nbgrader")
        mod_dir = start(course, name, base / "ws", force=True, release_dir=base / "release")
        for nb in course.notebooks(name):
            shutil.copy2(nb, mod_dir / nb.name)
        with busy_processes(4) as pids:
            print(f"{len(pids)} busy processes beside `module complete {module}`, load {os.getloadavg()[0]:.1f}", flush=True)
            for i in range(runs):
                r = timed_complete(mod_dir, name.split("_", 1)[0], "--no-cache")
                failed += r["rc"] != 0
                print(f"run {i + 1}: exit {r['rc']}, complete {r['complete']}, {r['seconds']:.0f} s (CPU {r['cpu']:.0f} s), "
                      f"load {r['load'][0]:.1f} -> {r['load'][1]:.1f}" + (f"\n{r['tail']}" if r["rc"] else ""), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{runs - failed} of {runs} runs passed")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=100, help="trials per load, two A/A pairs each (default 100)")
    ap.add_argument("--block", type=int, default=10, help="trials per load before switching to the next (default 10)")
    ap.add_argument("--runs", type=int, default=30, help="samples per model per look (default 30, tito's --runs)")
    ap.add_argument("--json", default=None, help="also write every trial and the summaries here")
    ap.add_argument("--module-complete", type=int, default=0, metavar="RUNS",
                    help="instead: RUNS forced `module complete` runs with the solutions beside 4 busy processes per core")
    ap.add_argument("--module", default="19")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per look (default: Benchmark's)")
    ap.add_argument("--budget", type=float, default=None, help="seconds per trial (default: 3 per model, tito's)")
    ap.add_argument("--loads", default=",".join(LOADS), help="which loads, comma-separated (default: all three)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a kill still ends the busy processes (their `finally`)
    if args.module_complete:
        return module_complete_busy(args.module, args.module_complete)
    torch.set_num_threads(1)
    ms, x = models(), load_digits_split("test")[0][:1]
    loads = {k: v for k, v in LOADS.items() if k in args.loads.split(",")}
    rows: dict[str, list[dict]] = {load: [] for load in loads}
    print(f"machine: {os.cpu_count()} CPUs; load at start {os.getloadavg()}; {args.trials} trials per load in blocks "
          f"of {args.block}; budget {BUDGET_PER_MODEL_S} s x {len(ms)} models", flush=True)
    t0, seed = time.perf_counter(), 0
    while any(len(r) < args.trials for r in rows.values()):
        for load, per_core in loads.items():
            todo = min(args.block, args.trials - len(rows[load]))
            if todo <= 0:
                continue
            with busy_processes(per_core):
                time.sleep(1.0 if per_core else 0.0)  # let the hogs take their share before timing
                for _ in range(todo):
                    rows[load].append(trial(ms, x, args.runs, seed, args.rounds, args.budget))
                    seed += 1
        done = {k: len(v) for k, v in rows.items()}
        print(f"  {time.perf_counter() - t0:7.0f} s: {done}, load {os.getloadavg()[0]:.1f}", flush=True)
        if args.json:  # after every block: a run stopped part-way (a time limit, a kill) keeps what it measured
            write_json(args.json, rows, done)
    summaries = {load: summary(r, rows.get("quiet") if load != "quiet" else None) for load, r in rows.items()}
    print("\n" + table(summaries))
    if args.json:
        write_json(args.json, rows, None)
    return 0


def write_json(path: str, rows: dict[str, list[dict]], partial: dict[str, int] | None) -> None:
    "Every trial so far and the summaries of the loads that have any; `partial`: trials done per load, if unfinished."
    summaries = {load: summary(r, rows.get("quiet") if load != "quiet" and rows.get("quiet") else None)
                 for load, r in rows.items() if r}
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps({"partial": partial, "summaries": summaries, "trials": rows}, indent=1))
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
