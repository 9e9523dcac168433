# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, library notebook: the report
#
# Outside the reading order, no tasks: `BenchmarkSuite` (`suite_dev`, step 8) and the default benchmark write their
# results through these functions; read this when you want to know how a payload becomes its four files.

# %%
#| default_exp benchmarking.report

# %% [markdown]
# ## The report: one payload, four files
#
# The report renders; it neither measures nor computes statistics. One JSON-ready payload (`BenchmarkSuite.to_payload`)
# becomes `results.json` (every raw value; a figure that cannot be had is `null` with its reason, never NaN),
# `results.csv` (model × metric), `benchmark_report.md` and PNG plots, each written atomically.

# %%
#| export
import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

# the one atomic writer and the one JSON writer live with the result types; re-exported here
from tinytorch.benchmarking.devices import benchmark_table_markdown
from tinytorch.benchmarking.pareto import pareto_front_with_ties
from tinytorch.benchmarking.results import BenchmarkResult, MiB, compare_results, results_table, write_atomic, write_json
from tinytorch.profiling.timing import interruption_lines, machine_warnings

_all_ = ["write_atomic", "write_json"]
SCHEMA = "tinytorch.benchmark.results/1"
REPORT_FILE, JSON_FILE, CSV_FILE = "benchmark_report.md", "results.json", "results.csv"
TABLE_COLUMNS = ("model", "metric", "unit", "status", "method", "median", "mean", "std", "ci_lower", "ci_upper",
                 "count", "median_ci_lower", "median_ci_upper", "note")


def ensure_output_dir(output_dir: str | Path) -> Path:
    "Create `output_dir` if needed and check it is writable; a clear OSError naming it otherwise."
    out = Path(output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write_test{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise OSError(f"output_dir: cannot write to {str(out)!r} ({type(e).__name__}: {e}); "
                      "the measured results are still in memory, choose another output_dir") from e
    return out


def save_json(payload: dict[str, Any], path: str | Path) -> Path:
    "Write the payload as indented JSON (atomically); NaN and infinity are refused."
    return write_json(path, payload)


def load_payload(path: str | Path) -> dict[str, Any]:
    "Read a `results.json` written by `save_json`, checking its schema; a clear error naming `path` otherwise."
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"path: no results file at {str(path)!r}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"path: {str(path)!r} is not valid JSON ({e})") from None
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        raise ValueError(f"path: {str(path)!r} is not a benchmark results file (expected schema {SCHEMA!r})")
    return payload


def tidy_csv(rows: Sequence[dict[str, Any]]) -> str:
    "The tidy table (one row per model × metric) as CSV text; missing values are empty cells."
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(TABLE_COLUMNS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if (v := row.get(k)) is None else repr(v) if isinstance(v, float) else v
                    for k in TABLE_COLUMNS})
    return buf.getvalue()

# %%
#| export
def _fmt(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def _unit_scale(payload: dict[str, Any], metric: str) -> tuple[float, str]:
    unit = payload.get("metrics", {}).get(metric, {}).get("unit", "")  # integer bytes are rendered in MiB
    return (MiB, "MiB") if unit == "bytes" else (1, unit)


def _row(payload: dict[str, Any], model: str, metric: str) -> dict[str, Any] | None:
    return next((r for r in payload.get("table", []) if r["model"] == model and r["metric"] == metric), None)


def _metric_value(payload: dict[str, Any], model: str, metric: str) -> float | None:
    r = _row(payload, model, metric)
    return None if r is None or r["status"] not in ("measured", "estimated") else r["median"]


def _table_metrics(payload: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(r["metric"] for r in payload.get("table", [])))


def _platform(payload: dict[str, Any]) -> str:
    info = payload.get("system_info", {})
    cpu = info.get("cpu_model") or info.get("machine") or "unknown CPU"
    threads = payload.get("protocol", {}).get("threads") or info.get("torch_threads")
    return f"{cpu}, {threads} thread{'s' if threads != 1 else ''}, torch {info.get('torch')}"


def _benchmark_table(payload: dict[str, Any]) -> list[str]:
    k, rows = _unit_scale(payload, "model_size")[0], []  # sizes in MiB, whether stored as bytes or (older files) MiB
    for m in payload["models"]:
        info, acc, lat = payload.get("model_info", {}).get(m, {}), _row(payload, m, "accuracy"), _row(payload, m, "latency")
        p90, size = payload.get("results", {}).get("latency", {}).get(m, {}).get("p90"), _metric_value(payload, m, "model_size")
        rows.append({"model": m, "task": info.get("task", "—"), "platform": payload.get("platform") or _platform(payload),
                     "accuracy": f"{acc['median']:.2%} [{acc['ci_lower']:.2%}, {acc['ci_upper']:.2%}]"
                     if acc and acc["status"] == "measured" else f"n/a ({acc['status'] if acc else 'not run'})",
                     "latency_median_ms": f"{lat['median']:.4g} (p90 {_fmt(p90)})" if lat and lat["status"] == "measured"
                     else f"n/a ({lat['status'] if lat else 'not run'})",
                     "model_size_mb": None if size is None else size / k, "references": info.get("reference", "—")})
    return benchmark_table_markdown(rows).splitlines()


def _metric_table(payload: dict[str, Any], metric: str) -> list[str]:
    info, (k, unit) = payload.get("metrics", {}).get(metric, {}), _unit_scale(payload, metric)
    direction = {"min": "lower is better", "max": "higher is better"}.get(info.get("direction"), "")
    rows = []
    for r in filter(None, (_row(payload, m, metric) for m in payload["models"])):
        if r["status"] in ("measured", "estimated"):
            r = {**r, **{c: r.get(c) / k for c in ("median", "mean", "std", "ci_lower", "ci_upper", "median_ci_lower",
                                                    "median_ci_upper") if r.get(c) is not None}}
            ci = f"[{_fmt(r['ci_lower'])}, {_fmt(r['ci_upper'])}]{' †' * (r['ci_lower'] < 0)}" if r["ci_lower"] is not None else "—"
            mci = (f"[{_fmt(r['median_ci_lower'])}, {_fmt(r['median_ci_upper'])}]"
                   if r.get("median_ci_lower") is not None else "—")
            rows.append([r["model"], r["status"], _fmt(r["median"]), mci, f"{_fmt(r['mean'])} ± {_fmt(r['std'], 2)}", ci,
                         r["count"], r["method"] or ""])
        else:
            rows.append([r["model"], r["status"], "—", "—", "—", "—", "—", r["note"] or ""])
    return [f"### {metric} ({unit}; {direction})", "", *results_table(
        ["model", "status", "median", "95% CI of the median", "mean ± std", "95% CI of the mean", "n", "method / note"], rows),
        "", "The headline is the median with its 95% interval (order statistics): every rule decides on it. The "
        "mean's Student-t interval (ci_lower, ci_upper) is shown beside it; for an accuracy (k of n) the interval is "
        "Wilson's, for exact counts (bytes) zero-width. Timings are wall time per call (what a user waits); "
        "comparisons marked [CPU time] read the timing thread's CPU time per call (what the model costs). †: the "
        "t-interval of the mean reaches below 0, which the quantity cannot: too few or too skewed samples for it; read "
        "the median's interval."]


def _best(payload: dict[str, Any], metric: str, vals: dict[str, float]) -> list[str]:
    "Models no other beats significantly on `metric` (Pareto set with ties of the raw values; else the extreme median)."
    raw = payload.get("results", {}).get(metric, {})
    if all("values" in raw.get(n, {}) for n in vals):
        results = {n: {metric: BenchmarkResult.from_dict({"metric_name": metric, **raw[n]})} for n in vals}
        return pareto_front_with_ties(results, [metric])["front"]
    direction = payload.get("metrics", {}).get(metric, {}).get("direction", "min")
    return [(min if direction == "min" else max)(vals, key=vals.get)]


def _tie_outcome(payload: dict[str, Any], metric: str, tied: list[str]) -> str:
    "What a tie on `metric` is: shown equivalent, or not yet told apart (the comparisons' three verdicts)."
    raw = payload.get("results", {}).get(metric, {})
    if not all("values" in raw.get(n, {}) for n in tied):
        return "not told apart"
    r = {n: BenchmarkResult.from_dict({"metric_name": metric, **raw[n]}) for n in tied}
    outcomes = {compare_results(r[a], r[b]).outcome for i, a in enumerate(tied) for b in tied[i + 1:]}
    return "equivalent" if outcomes == {"equivalent"} else "inconclusive, not yet told apart"


def _recommendations(payload: dict[str, Any]) -> list[str]:
    models, comps, recs = payload["models"], payload.get("comparisons", []), []
    baseline = models[0]
    for metric, label in (("latency", "lowest latency"), ("accuracy", "highest accuracy"),
                          ("model_size", "smallest model on disk"), ("memory", "lowest peak memory"),
                          ("energy", "least energy per inference")):
        info = payload.get("metrics", {}).get(metric)
        vals = {m: v for m in models if (v := _metric_value(payload, m, metric)) is not None}
        if not vals or info is None:
            continue
        best, (k, unit) = _best(payload, metric, vals), _unit_scale(payload, metric)
        shown = ", ".join(f"{n} ({vals[n]:.2%})" if metric == "accuracy" else f"{n} ({vals[n] / k:.4g} {unit})" for n in best)
        shown += f" (tied: {_tie_outcome(payload, metric, best)})" if len(best) > 1 else ""
        if baseline in best:
            recs.append(f"- **{label}**: {shown}, the baseline; no variant beats it significantly.")
            continue
        v = [c["verdict"] for c in comps if c["metric"] == metric and c["model_a"] == baseline and c["model_b"] in best]
        recs.append(f"- **{label}**: {shown}" + (f"; versus {baseline}: {'; '.join(v)}." if v else "."))
    for c in comps:
        if c["metric"] == "accuracy" and c["model_a"] == baseline and c["significant"] and c["median_b"] < c["median_a"]:
            recs.append(f"- **accuracy cost**: {c['verdict']}; weigh it against the speed and size gains.")
    if (pareto := payload.get("pareto")) and pareto.get("front"):
        dominated = [m for m in models if m not in pareto["front"] and m not in pareto.get("excluded", {})]
        is_, it = ("is", "it") if len(dominated) == 1 else ("are", "them")
        recs.append(f"- **Pareto set on {', '.join(pareto['metrics'])}**: {', '.join(pareto['front'])}" + (
            f"; {', '.join(dominated)} {is_} dominated (another model is at least as good on every metric), so "
            f"there is no reason to deploy {it} on these metrics." if dominated else "."))
    if failed := sorted({m for f in payload.get("failures", {}).values() for m in f}):
        recs.append(f"- **failed measurements** for {', '.join(failed)}: fix the errors listed above before "
                    "drawing conclusions about these models.")
    return recs or ["- no recommendation: too few measurements."]


def render_markdown(payload: dict[str, Any]) -> str:
    """The Markdown report for a results payload (see `BenchmarkSuite.to_payload`)."""
    out = ["# Benchmark Report", "", f"Created {payload.get('created', '—')}. Models: "
           + ", ".join(payload["models"]) + ".", *[f"\n> **{w}**" for w in machine_warnings(payload.get("machine_state"))]]
    protocol = {k: v for k, v in payload.get("protocol", {}).items() if k != "sequential"}  # looks: under Samples
    for title, fields in (("System Information", payload.get("system_info", {})), ("Protocol", protocol)):
        out += ["", f"## {title}", "", *results_table(["field" if title.startswith("System") else "setting", "value"],
                                                        [[k, _fmt(v)] for k, v in fields.items()])]
    out += ["", "## Benchmark table", "", *_benchmark_table(payload), "",
            "Accuracy: top-1 with its Wilson 95% interval. Latency: median (p90) of the timed samples.", "",
            "## Results per metric", ""]
    for metric in _table_metrics(payload):
        out += [*_metric_table(payload, metric), ""]
    if samples := interruption_lines(payload.get("results", {}), payload.get("protocol", {}).get("sequential")):
        out += ["## Samples", "", "A sample during which the operating system ran another program (wall time above "
                "the timing thread's CPU time by more than 5%) is interrupted: re-taken, and counted here.", "",
                *samples, ""]
    for title, key, last in (("Failures", "failures", "error"), ("Not available", "unavailable", "reason")):
        entries = payload.get(key, {})
        if any(entries.values()):
            out += [f"## {title}", "", *results_table(["metric", "model", last], [
                [metric, m, f"{v['error_type']}: {v['message']}" if key == "failures" else v]
                for metric, by in entries.items() for m, v in by.items()]), ""]
    if pareto := payload.get("pareto"):
        out += ["## Pareto set", "", f"Metrics: {', '.join(f'{m} ({d})' for m, d in pareto['directions'].items())}. "
                f"Non-dominated: **{', '.join(pareto['front']) or 'none'}**."]
        if pareto.get("excluded"):
            out.append("Left out (missing a metric): " + "; ".join(f"{m}: {r}" for m, r in pareto["excluded"].items()) + ".")
        out.append("")
    if comps := payload.get("comparisons", []):
        out += ["## Comparisons", "", *results_table(["metric", "a", "b", "ratio b/a", "interval", "test", "p", "outcome",
                                                       "verdict"], [
            [c["metric"], c["model_a"], c["model_b"], _fmt(c["ratio"]), f"[{_fmt(c['ci_lower'])}, {_fmt(c['ci_upper'])}] "
             f"({1 - c['alpha']:.0%})" if c["ci_lower"] is not None else "—", c["test"], _fmt(c["p_value"], 3),
             c.get("outcome", "—"), c["verdict"]] for c in comps]), "",
            "Three verdicts: different (p below alpha and an effect of at least the floor), equivalent (the whole "
            "interval within the floor of no difference), inconclusive (neither: more samples would decide).", ""]
    out += ["## Recommendations", "", *_recommendations(payload), ""]
    if payload.get("plots"):
        out += ["## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in payload["plots"]] + [""]
    out.append("Every figure above was measured on this machine unless its status says \"estimated\"; "
               "raw values are in results.json.")
    return "\n".join(out) + "\n"


def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2))
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _save_figure(fig: Any, ax: Any, path: Path, title: str, ylabel: str, grid_axis: str = "y") -> Path:
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(axis=grid_axis, alpha=0.3)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return write_atomic(path, buf.getvalue())


def plot_metric(payload: dict[str, Any], metric: str, output_dir: str | Path) -> Path:
    """Bar chart of one metric (medians, interval error bars, the best, `_best`, in a different colour)."""
    rows = [r for r in payload["table"] if r["metric"] == metric and r["status"] in ("measured", "estimated")]
    if not rows:
        raise ValueError(f"metric: no measured values of '{metric}' to plot")
    info = payload.get("metrics", {}).get(metric, {"unit": "", "direction": "min"})
    k, unit = _unit_scale(payload, metric)
    names, med = [r["model"] for r in rows], np.array([r["median"] for r in rows], dtype=float) / k
    lows, highs = [], []
    for r, m in zip(rows, med):
        iv = ((r["ci_lower"], r["ci_upper"]) if r["metric"] == "accuracy" and r["ci_lower"] is not None else
              (r["median_ci_lower"], r["median_ci_upper"]) if r.get("median_ci_lower") is not None else (m * k, m * k))
        lows.append(max(m - iv[0] / k, 0.0))
        highs.append(max(iv[1] / k - m, 0.0))
    best = _best(payload, metric, dict(zip(names, med)))
    fig, ax = _figure()
    ax.bar(range(len(names)), med, yerr=[lows, highs], capsize=5, alpha=0.85,
           color=["tab:green" if n in best else "tab:blue" for n in names])
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    estimated = " (ESTIMATED)" if any(r["status"] == "estimated" for r in rows) else ""
    return _save_figure(fig, ax, Path(output_dir) / f"{metric}.png", f"{metric}: best = {', '.join(best)}{estimated}",
                        f"{metric} ({unit}; {'lower' if info['direction'] == 'min' else 'higher'} is better)")


def plot_pareto(payload: dict[str, Any], x_metric: str, y_metric: str, front: Sequence[str],
                output_dir: str | Path) -> Path:
    """Scatter of two metrics, every model labelled, the frontier `front` drawn as a line."""
    pts = {m: (_metric_value(payload, m, x_metric), _metric_value(payload, m, y_metric)) for m in payload["models"]}
    pts = {m: xy for m, xy in pts.items() if None not in xy}
    if not pts:
        raise ValueError(f"x_metric, y_metric: no model has both '{x_metric}' and '{y_metric}'")
    fig, ax = _figure()
    for m, (x, y) in pts.items():
        ax.scatter([x], [y], s=70, color="tab:red" if m in front else "tab:gray", zorder=3)
        ax.annotate(m, (x, y), xytext=(5, 5), textcoords="offset points")
    line = sorted((pts[m] for m in front if m in pts), key=lambda p: p[0])
    if len(line) > 1:
        ax.plot([p[0] for p in line], [p[1] for p in line], color="tab:red", alpha=0.6, label="Pareto frontier")
        ax.legend()
    units = payload.get("metrics", {})
    ax.set_xlabel(f"{x_metric} ({units.get(x_metric, {}).get('unit', '')})")
    return _save_figure(fig, ax, Path(output_dir) / f"pareto_{x_metric}_vs_{y_metric}.png",
                        f"Pareto frontier: {x_metric} vs {y_metric}", f"{y_metric} ({units.get(y_metric, {}).get('unit', '')})",
                        grid_axis="both")


def distribution_scale(data: Sequence[Sequence[float]], max_spread: float = 20.0) -> tuple[str, str]:
    """`("log", note)` when the samples span `max_spread`x or more (an 84 ms interruption beside 0.04 ms
    medians flattens a linear axis to a line at 0), the note counting samples over 10x their median.

    >>> distribution_scale([[1.0, 1.1, 0.9, 2000.0]])
    ('log', 'log scale: 1 sample > 10x its median, the largest 1905x')
    """
    values = [v for vals in data for v in vals]
    if len(values) < 2 or min(values) <= 0 or max(values) / min(values) < max_spread:
        return "linear", ""  # also: a log axis cannot show 0 or below
    ratios = [v / float(np.median(vals)) for vals in data for v in vals]
    far = sum(r > 10 for r in ratios)
    return "log", f"log scale: {far} sample{'s' * (far != 1)} > 10x {'its' if far == 1 else 'their'} median, the largest {max(ratios):.0f}x"


def plot_distribution(payload: dict[str, Any], metric: str, output_dir: str | Path) -> Path:
    """Every sample of `metric` per model: a box plot with the points over it, on a log axis
    when a few samples are far from the rest (`distribution_scale`)."""
    res = payload.get("results", {}).get(metric, {})
    names = [m for m in payload["models"] if m in res]
    if not names:
        raise ValueError(f"metric: no samples of '{metric}' to plot")
    data = [res[m]["values"] for m in names]
    scale, note = distribution_scale(data)
    fig, ax = _figure()
    ax.set_yscale(scale)
    ax.boxplot(data, showfliers=False)
    for i, vals in enumerate(data, start=1):
        jitter = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(1)
        ax.scatter(i + jitter, vals, s=10, alpha=0.6, color="tab:blue")
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
    title = f"{metric}: every timed sample per model" + (f"\n({note})" if note else "")
    return _save_figure(fig, ax, Path(output_dir) / f"{metric}_distribution.png", title,
                        f"{metric} ({payload.get('metrics', {}).get(metric, {}).get('unit', '')})")

# %%
def test_module():
    "A payload's files: results.json read back with its schema checked and NaN refused, the tidy CSV, the plot scale."
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = ensure_output_dir(Path(tmp) / "new" / "folder")
        path = save_json({"schema": SCHEMA, "models": ["a"], "note": None}, out / JSON_FILE)
        assert load_payload(path) == {"schema": SCHEMA, "models": ["a"], "note": None}
        (out / "other.json").write_text('{"schema": "another/1"}', encoding="utf-8")
        for bad, write in (("other.json", False), ("nan.json", True)):
            try:
                if write:
                    save_json({"schema": SCHEMA, "median": float("nan")}, out / bad)
                else:
                    load_payload(out / bad)
            except ValueError:
                continue
            raise AssertionError(f"{bad}: must be refused")
        assert not (out / "nan.json").exists(), "a refused payload leaves no file behind"
    header, row = tidy_csv([{"model": "a", "metric": "latency", "median": 0.1, "note": None}]).splitlines()
    assert header.split(",") == list(TABLE_COLUMNS)
    cells = dict(zip(TABLE_COLUMNS, row.split(",")))
    assert cells["median"] == "0.1" and cells["note"] == "" and cells["count"] == "", cells
    assert distribution_scale([[1.0, 1.2, 0.9]]) == ("linear", "")


if __name__ == "__main__":
    test_module()
