"""`tito benchmark`'s printing: the console table and the summary of a default benchmark run.

The domain work (default models, int8 calibration data, runtime models, cross-runtime comparisons,
the run itself, the hardware artifacts) is the library's: `tinytorch.benchmarking.defaults`, which
anyone can call from Python. This file prints what it returns; `run_default_benchmark` here is that
run followed by the printout, which is what the command does.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from tinytorch.benchmarking.defaults import run_default_benchmark as run_library_benchmark
from tinytorch.benchmarking.report import CSV_FILE, JSON_FILE, REPORT_FILE
from tinytorch.benchmarking.results import MiB, results_table
from tinytorch.profiling.timing import interruption_lines, machine_warnings

__all__ = ["console_table", "print_summary", "run_default_benchmark"]


def console_table(payload: dict[str, Any]) -> str:
    "A plain-text comparison table of a results payload (one line per model, `results.results_table`), for printing."
    table = payload.get("table", [])
    present = {r["metric"] for r in table}
    metrics = [m for m in ("accuracy", "latency", "throughput_bs32", "memory", "model_size", "energy") if m in present]
    units = {m: payload["metrics"].get(m, {}).get("unit", "") for m in metrics}
    scale = {m: MiB if u == "bytes" else 1 for m, u in units.items()}  # integer bytes are shown in MiB
    header, rows = ["model"] + [f"{m} ({'MiB' if scale[m] != 1 else units[m]})" for m in metrics], []
    for model in payload["models"]:
        cells = [model]
        for m in metrics:
            r = next((r for r in table if r["model"] == model and r["metric"] == m), None)
            if r is None or r["status"] not in ("measured", "estimated"):
                cells.append(r["status"] if r else "—")
            else:
                cells.append(f"{r['median']:.2%}" if m == "accuracy" else
                             f"{r['median'] / scale[m]:.4g}" + (" (est.)" if r["status"] == "estimated" else ""))
        rows.append(cells)
    return "\n".join(results_table(header, rows, console=True))


def print_summary(out: dict[str, Any], quiet: bool = False) -> str:
    """Print a run of `tinytorch.benchmarking.defaults.run_default_benchmark`: machine warnings and
    failures (to stderr, even when `quiet`: they qualify every figure), then the table, each latency's interrupted
    samples and looks, the three-way verdicts, the cross-runtime comparisons, compile times, unavailable rows and
    where the files are. Returns the table."""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    suite, runtimes, out_dir = out["suite"], out["runtimes"], out["output_dir"]
    for warning in machine_warnings(suite.benchmark.machine_states):
        print(warning, file=sys.stderr, flush=True)
    payload = suite.to_payload()
    table = console_table(payload)
    say("")
    say(table)
    say("\n".join(f"  {line[2:]}" for line in interruption_lines(payload["results"], payload["protocol"].get("sequential"))
                   if line.startswith("- latency")))
    say("\n".join(f"  {c.metric:>10}: {c.verdict}" for c in out["comparisons"]
                  if c.metric in ("latency", "accuracy", "model_size")))
    if out["runtime_comparisons"]:
        say("\ncross-runtime (each runtime against " + ("eager" if "eager" in runtimes else runtimes[0]) + ", same model):")
        say("\n".join(f"  {c.metric:>10}: {c.verdict}" for c in out["runtime_comparisons"]))
    for n, secs in out["compile_seconds"].items():
        say(f"  compile time {n}: " + (f"{secs:.2f} s" if secs is not None else "not recorded") +
            " (first call on the timed input; not part of the latency samples)")
    for row, reason in out["unavailable_models"].items():
        say(f"  {row}: {reason}")
    for metric, by_model in suite.failures.items():  # e.g. a non-finite output: a failure, never a score
        for row, err in by_model.items():
            print(f"failed: {metric} of {row}: {err['error_type']}: {err['message']}", file=sys.stderr)
    say(f"\nreport: {out_dir / REPORT_FILE}\nresults: {out_dir / JSON_FILE}, {out_dir / CSV_FILE}; "
        f"{len(out['plots'])} plots in {out_dir}")
    return table


def run_default_benchmark(output_dir: str | Path = "benchmark_results", measurement_runs: int = 30,
                          quiet: bool = False, model_path: str | Path | None = None,
                          input_shape: Sequence[int] | None = None, **options: Any) -> dict[str, Any]:
    """What `tito benchmark` does: the library's `run_default_benchmark` (same arguments; `options`
    are its keyword-only ones), progress lines printed unless `quiet`, then `print_summary`. Returns
    the library's dict with its comparisons as dicts and the printed `table` added."""
    out = run_library_benchmark(output_dir, measurement_runs, model_path, input_shape,
                                log=None if quiet else (lambda text: print(text, flush=True)), **options)
    table = print_summary(out, quiet)
    return {**out, "comparisons": [c.to_dict() for c in out["comparisons"]],
            "runtime_comparisons": [c.to_dict() for c in out["runtime_comparisons"]], "table": table}
