# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Benchmark reports: Markdown, JSON, CSV and plots
#
# A benchmark is only as useful as what it leaves behind. This notebook turns the results of
# a `BenchmarkSuite` into four kinds of file, all from one JSON-ready *payload* (a plain
# dict), so that every file says the same thing and a saved run can be re-rendered later:
#
# | file | for whom | what it holds |
# |---|---|---|
# | `results.json` | programs | every raw value, every statistic, the system info, failures and reasons |
# | `results.csv` | spreadsheets, pandas | tidy: one row per model × metric |
# | `benchmark_report.md` | people | system info, a table per metric, the benchmark table, Pareto set, comparisons, recommendations |
# | `*.png` | people | one figure per metric with CI error bars, the Pareto plot, latency distributions |
#
# Every file is written atomically (a temporary file in the same directory, then
# `os.replace`), so an interrupted run never leaves half a report. Plots use matplotlib's
# object API with the Agg canvas: nothing is shown, and the user's pyplot state and backend
# are left alone.

# %%
#| default_exp benchmarking.report

# %%
#| export
from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

# %%
#| export
SCHEMA = "tinytorch.benchmark.results/1"
REPORT_FILE, JSON_FILE, CSV_FILE = "benchmark_report.md", "results.json", "results.csv"
TABLE_COLUMNS = ("model", "metric", "unit", "status", "method", "median", "mean", "std", "ci_lower", "ci_upper",
                 "count", "median_ci_lower", "median_ci_upper", "note")


# the one atomic writer and the one JSON writer live with the result types; re-exported here
from tinytorch.benchmarking.results import write_atomic, write_json  # noqa: E402

_all_ = ["write_atomic", "write_json"]


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

# %% [markdown]
# ## JSON and CSV
#
# JSON cannot hold NaN or infinity in a standard way, so the writer refuses them (`allow_nan=False`):
# a figure that cannot be had is `null` with its reason elsewhere in the payload, never a
# made-up number.

# %%
#| export
def save_json(payload: dict[str, Any], path: str | Path) -> Path:
    "Write the payload as indented JSON (atomically); NaN and infinity are refused."
    return write_json(path, payload)


def load_payload(path: str | Path) -> dict[str, Any]:
    """Read a `results.json` written by `save_json`, checking its schema.

    >>> import tempfile
    >>> p = save_json({"schema": SCHEMA, "results": {}}, Path(tempfile.mkdtemp()) / "r.json")
    >>> load_payload(p)["schema"] == SCHEMA
    True
    """
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


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


def tidy_csv(rows: Sequence[dict[str, Any]]) -> str:
    "The tidy table (one row per model × metric) as CSV text; missing values are empty cells."
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(TABLE_COLUMNS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: _csv_value(row.get(k)) for k in TABLE_COLUMNS})
    return buf.getvalue()

# %% [markdown]
# ## The Markdown report
#
# The report renders; it does not measure and it does not compute statistics: every number in
# it comes from the payload. The benchmark table follows the course's format
# (Model | Task | Accuracy | Latency (ms) | Model Size (MB) | Platform | References), and the
# recommendations are derived from the figures and the significance tests, so a
# recommendation never claims a difference the statistics do not support.

# %%
#| export
def _fmt(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _row(payload: dict[str, Any], model: str, metric: str) -> dict[str, Any] | None:
    for r in payload.get("table", []):
        if r["model"] == model and r["metric"] == metric:
            return r
    return None


def _metric_value(payload: dict[str, Any], model: str, metric: str) -> float | None:
    r = _row(payload, model, metric)
    return None if r is None or r["status"] not in ("measured", "estimated") else r["median"]


def _table_metrics(payload: dict[str, Any]) -> list[str]:
    seen = []
    for r in payload.get("table", []):
        if r["metric"] not in seen:
            seen.append(r["metric"])
    return seen


def _platform(payload: dict[str, Any]) -> str:
    info = payload.get("system_info", {})
    cpu = info.get("cpu_model") or info.get("machine") or "unknown CPU"
    threads = payload.get("protocol", {}).get("threads") or info.get("torch_threads")
    return f"{cpu}, {threads} thread{'s' if threads != 1 else ''}, torch {info.get('torch')}"


def _benchmark_table(payload: dict[str, Any]) -> list[str]:
    lines = ["| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MB)** | **Platform** | **References** |",
             "|---|---|---|---|---|---|---|"]
    platform = payload.get("platform") or _platform(payload)
    for m in payload["models"]:
        info = payload.get("model_info", {}).get(m, {})
        acc = _row(payload, m, "accuracy")
        if acc and acc["status"] == "measured":
            acc_text = f"{acc['median']:.2%} [{acc['ci_lower']:.2%}, {acc['ci_upper']:.2%}]"
        else:
            acc_text = f"n/a ({acc['status'] if acc else 'not run'})"
        lat = _row(payload, m, "latency")
        lat_text = (f"{lat['median']:.4g} (p90 {_fmt(_percentile(payload, m, 'latency', 'p90'))})"
                    if lat and lat["status"] == "measured" else f"n/a ({lat['status'] if lat else 'not run'})")
        size = _metric_value(payload, m, "model_size")
        lines.append(f"| {m} | {info.get('task', '—')} | {acc_text} | {lat_text} | "
                     f"{_fmt(size, 4) if size is not None else 'n/a'} | {platform} | {info.get('reference', '—')} |")
    return lines


def _percentile(payload: dict[str, Any], model: str, metric: str, key: str) -> float | None:
    r = payload.get("results", {}).get(metric, {}).get(model)
    return None if r is None else r.get(key)


def _metric_table(payload: dict[str, Any], metric: str) -> list[str]:
    info = payload.get("metrics", {}).get(metric, {})
    direction = {"min": "lower is better", "max": "higher is better"}.get(info.get("direction"), "")
    lines = [f"### {metric} ({info.get('unit', '')}; {direction})", "",
             "| model | status | median | 95% CI of the median | mean ± std | 95% CI | n | method / note |",
             "|---|---|---|---|---|---|---|---|"]
    for m in payload["models"]:
        r = _row(payload, m, metric)
        if r is None:
            continue
        if r["status"] in ("measured", "estimated"):
            ci = f"[{_fmt(r['ci_lower'])}, {_fmt(r['ci_upper'])}]" if r["ci_lower"] is not None else "—"
            mci = (f"[{_fmt(r['median_ci_lower'])}, {_fmt(r['median_ci_upper'])}]"
                   if r.get("median_ci_lower") is not None else "—")
            lines.append(f"| {m} | {r['status']} | {_fmt(r['median'])} | {mci} | {_fmt(r['mean'])} ± {_fmt(r['std'], 2)} | "
                         f"{ci} | {r['count']} | {r['method'] or ''} |")
        else:
            lines.append(f"| {m} | {r['status']} | — | — | — | — | — | {r['note'] or ''} |")
    lines += ["", "95% CI: for repeated samples, the Student-t interval of the mean, and the median's interval "
              "from order statistics (the one to read for skewed timings); for an accuracy (k of n), the Wilson "
              "interval; for exact counts (bytes), a zero-width interval."]
    return lines


def _recommendations(payload: dict[str, Any]) -> list[str]:
    models, recs = payload["models"], []
    comps = payload.get("comparisons", [])
    baseline = models[0]

    def best(metric: str) -> tuple[str, float] | None:
        info = payload.get("metrics", {}).get(metric)
        vals = {m: v for m in models if (v := _metric_value(payload, m, metric)) is not None}
        if not vals or info is None:
            return None
        pick = min(vals, key=vals.get) if info["direction"] == "min" else max(vals, key=vals.get)
        return pick, vals[pick]

    def verdict(metric: str, other: str) -> str | None:
        for c in comps:
            if c["metric"] == metric and c["model_a"] == baseline and c["model_b"] == other:
                return c["verdict"]
        return None

    for metric, label in (("latency", "lowest latency"), ("accuracy", "highest accuracy"),
                          ("model_size", "smallest model on disk"), ("memory", "lowest peak memory"),
                          ("energy", "least energy per inference")):
        b = best(metric)
        if b is None:
            continue
        name, value = b
        unit = payload["metrics"][metric]["unit"]
        shown = f"{value:.2%}" if metric == "accuracy" else f"{value:.4g} {unit}"
        if name == baseline:
            recs.append(f"- **{label}**: {name} ({shown}), the baseline; no variant beats it.")
        else:
            v = verdict(metric, name)
            recs.append(f"- **{label}**: {name} ({shown})" + (f"; versus {baseline}: {v}." if v else "."))
    for c in comps:
        if c["metric"] == "accuracy" and c["model_a"] == baseline and c["significant"] and c["median_b"] < c["median_a"]:
            recs.append(f"- **accuracy cost**: {c['verdict']}; weigh it against the speed and size gains.")
    pareto = payload.get("pareto")
    if pareto and pareto.get("front"):
        dominated = [m for m in models if m not in pareto["front"] and m not in pareto.get("excluded", {})]
        recs.append(f"- **Pareto set on {', '.join(pareto['metrics'])}**: {', '.join(pareto['front'])}"
                    + (f"; {', '.join(dominated)} {'is' if len(dominated) == 1 else 'are'} dominated "
                       "(another model is at least as good on every metric), so there is no reason to deploy "
                       f"{'it' if len(dominated) == 1 else 'them'} on these metrics." if dominated else "."))
    failed = sorted({m for f in payload.get("failures", {}).values() for m in f})
    if failed:
        recs.append(f"- **failed measurements** for {', '.join(failed)}: fix the errors listed above before "
                    "drawing conclusions about these models.")
    return recs or ["- no recommendation: too few measurements."]


def render_markdown(payload: dict[str, Any]) -> str:
    """The Markdown report for a results payload (see `BenchmarkSuite.to_payload`)."""
    info = payload.get("system_info", {})
    proto = payload.get("protocol", {})
    out = ["# Benchmark Report", "", f"Created {payload.get('created', '—')}. Models: "
           + ", ".join(payload["models"]) + ".", "", "## System Information", "",
           "| field | value |", "|---|---|"]
    out += [f"| {k} | {_fmt(v)} |" for k, v in info.items()]
    out += ["", "## Protocol", "", "| setting | value |", "|---|---|"]
    out += [f"| {k} | {_fmt(v)} |" for k, v in proto.items()]
    out += ["", "## Benchmark table", "", *_benchmark_table(payload), "",
            "Accuracy: top-1 with its Wilson 95% interval. Latency: median (p90) of the timed samples.", "",
            "## Results per metric", ""]
    for metric in _table_metrics(payload):
        out += [*_metric_table(payload, metric), ""]
    failures = payload.get("failures", {})
    if any(failures.values()):
        out += ["## Failures", "", "| metric | model | error |", "|---|---|---|"]
        out += [f"| {metric} | {m} | {f['error_type']}: {f['message']} |"
                for metric, fs in failures.items() for m, f in fs.items()]
        out.append("")
    unavailable = payload.get("unavailable", {})
    if any(unavailable.values()):
        out += ["## Not available", "", "| metric | model | reason |", "|---|---|---|"]
        out += [f"| {metric} | {m} | {reason} |" for metric, us in unavailable.items() for m, reason in us.items()]
        out.append("")
    pareto = payload.get("pareto")
    if pareto:
        out += ["## Pareto set", "", f"Metrics: {', '.join(f'{m} ({d})' for m, d in pareto['directions'].items())}. "
                f"Non-dominated: **{', '.join(pareto['front']) or 'none'}**."]
        if pareto.get("excluded"):
            out.append("Left out (missing a metric): " + "; ".join(f"{m}: {r}" for m, r in pareto["excluded"].items()) + ".")
        out.append("")
    comps = payload.get("comparisons", [])
    if comps:
        out += ["## Comparisons", "", "| metric | a | b | ratio b/a | 95% CI | test | p | verdict |",
                "|---|---|---|---|---|---|---|---|"]
        for c in comps:
            ci = f"[{_fmt(c['ci_lower'])}, {_fmt(c['ci_upper'])}]" if c["ci_lower"] is not None else "—"
            out.append(f"| {c['metric']} | {c['model_a']} | {c['model_b']} | {_fmt(c['ratio'])} | {ci} | {c['test']} | "
                       f"{_fmt(c['p_value'], 3)} | {c['verdict']} |")
        out.append("")
    out += ["## Recommendations", "", *_recommendations(payload), ""]
    plots = payload.get("plots", [])
    if plots:
        out += ["## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots] + [""]
    out.append("Every figure above was measured on this machine unless its status says \"estimated\"; "
               "raw values are in results.json.")
    return "\n".join(out) + "\n"


def console_table(payload: dict[str, Any]) -> str:
    "A plain-text comparison table (one line per model) for printing."
    metrics = [m for m in ("accuracy", "latency", "throughput_bs32", "memory", "model_size", "energy")
               if m in _table_metrics(payload)]
    header = ["model"] + [f"{m} ({payload['metrics'].get(m, {}).get('unit', '')})" for m in metrics]
    rows = []
    for model in payload["models"]:
        cells = [model]
        for m in metrics:
            r = _row(payload, model, m)
            if r is None or r["status"] not in ("measured", "estimated"):
                cells.append(r["status"] if r else "—")
            elif m == "accuracy":
                cells.append(f"{r['median']:.2%}")
            else:
                cells.append(f"{r['median']:.4g}" + (" (est.)" if r["status"] == "estimated" else ""))
        rows.append(cells)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    lines = [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
    return "\n".join(lines)

# %% [markdown]
# ## Plots
#
# One figure per metric: a bar per model at its median (accuracy: the pooled accuracy), error
# bars from the interval in the table (the order-statistic interval of the median where there
# are enough samples, the Wilson interval for accuracy), and the best model marked. The
# Pareto plot draws every model and connects the frontier; the distribution plot shows every
# latency sample per model.

# %%
#| export
def _figure(width: float = 6.4, height: float = 4.2):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _save_figure(fig: Any, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return write_atomic(path, buf.getvalue())


def _interval(r: dict[str, Any]) -> tuple[float, float] | None:
    if r["metric"] == "accuracy" and r["ci_lower"] is not None:
        return r["ci_lower"], r["ci_upper"]
    if r.get("median_ci_lower") is not None:
        return r["median_ci_lower"], r["median_ci_upper"]
    return None


def plot_metric(payload: dict[str, Any], metric: str, output_dir: str | Path) -> Path:
    """Bar chart of one metric (medians, interval error bars, best model in a different colour)."""
    rows = [r for r in payload["table"] if r["metric"] == metric and r["status"] in ("measured", "estimated")]
    if not rows:
        raise ValueError(f"metric: no measured values of '{metric}' to plot")
    info = payload.get("metrics", {}).get(metric, {"unit": "", "direction": "min"})
    names = [r["model"] for r in rows]
    med = np.array([r["median"] for r in rows], dtype=float)
    lows, highs = [], []
    for r, m in zip(rows, med):
        iv = _interval(r)
        lows.append(m - iv[0] if iv else 0.0)
        highs.append(iv[1] - m if iv else 0.0)
    best = int(np.argmin(med) if info["direction"] == "min" else np.argmax(med))
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    colors = ["tab:green" if i == best else "tab:blue" for i in range(len(names))]
    ax.bar(range(len(names)), med, yerr=[np.maximum(lows, 0), np.maximum(highs, 0)], capsize=5, color=colors, alpha=0.85)
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    better = "lower" if info["direction"] == "min" else "higher"
    ax.set_ylabel(f"{metric} ({info['unit']}; {better} is better)")
    estimated = any(r["status"] == "estimated" for r in rows)
    ax.set_title(f"{metric}: best = {names[best]}" + (" (ESTIMATED)" if estimated else ""))
    ax.grid(axis="y", alpha=0.3)
    return _save_figure(fig, Path(output_dir) / f"{metric}.png")


def plot_pareto(payload: dict[str, Any], x_metric: str, y_metric: str, front: Sequence[str],
                output_dir: str | Path) -> Path:
    """Scatter of two metrics, every model labelled, the frontier `front` drawn as a line."""
    pts = {m: (_metric_value(payload, m, x_metric), _metric_value(payload, m, y_metric)) for m in payload["models"]}
    pts = {m: xy for m, xy in pts.items() if None not in xy}
    if not pts:
        raise ValueError(f"x_metric, y_metric: no model has both '{x_metric}' and '{y_metric}'")
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for m, (x, y) in pts.items():
        on = m in front
        ax.scatter([x], [y], s=70, color="tab:red" if on else "tab:gray", zorder=3)
        ax.annotate(m, (x, y), xytext=(5, 5), textcoords="offset points")
    line = sorted((pts[m] for m in front if m in pts), key=lambda p: p[0])
    if len(line) > 1:
        ax.plot([p[0] for p in line], [p[1] for p in line], color="tab:red", alpha=0.6, label="Pareto frontier")
        ax.legend()
    units = payload.get("metrics", {})
    ax.set_xlabel(f"{x_metric} ({units.get(x_metric, {}).get('unit', '')})")
    ax.set_ylabel(f"{y_metric} ({units.get(y_metric, {}).get('unit', '')})")
    ax.set_title(f"Pareto frontier: {x_metric} vs {y_metric}")
    ax.grid(alpha=0.3)
    return _save_figure(fig, Path(output_dir) / f"pareto_{x_metric}_vs_{y_metric}.png")


def plot_distribution(payload: dict[str, Any], metric: str, output_dir: str | Path) -> Path:
    """Every sample of `metric` per model: a box plot with the points over it."""
    res = payload.get("results", {}).get(metric, {})
    names = [m for m in payload["models"] if m in res]
    if not names:
        raise ValueError(f"metric: no samples of '{metric}' to plot")
    data = [res[m]["values"] for m in names]
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.boxplot(data, showfliers=False)
    for i, vals in enumerate(data, start=1):
        jitter = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(1)
        ax.scatter(i + jitter, vals, s=10, alpha=0.6, color="tab:blue")
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20, ha="right")
    ax.set_ylabel(f"{metric} ({payload.get('metrics', {}).get(metric, {}).get('unit', '')})")
    ax.set_title(f"{metric}: every timed sample per model")
    ax.grid(axis="y", alpha=0.3)
    return _save_figure(fig, Path(output_dir) / f"{metric}_distribution.png")

# %% [markdown]
# ## Tests on a hand-made payload

# %%
def _toy_payload() -> dict[str, Any]:
    rows = []
    for model, lat, acc in (("big", 2.0, 0.99), ("small", 1.0, 0.97)):
        rows.append({"model": model, "metric": "latency", "unit": "ms", "status": "measured", "method": "measured",
                     "median": lat, "mean": lat, "std": 0.1, "ci_lower": lat - 0.1, "ci_upper": lat + 0.1, "count": 3,
                     "median_ci_lower": lat - 0.1, "median_ci_upper": lat + 0.1, "note": None})
        rows.append({"model": model, "metric": "accuracy", "unit": "fraction", "status": "measured", "method": "top-1",
                     "median": acc, "mean": acc, "std": 0.0, "ci_lower": acc - 0.01, "ci_upper": min(acc + 0.01, 1.0),
                     "count": 100, "median_ci_lower": None, "median_ci_upper": None, "note": None})
    rows.append({"model": "broken", "metric": "latency", "unit": "ms", "status": "failed", "note": "RuntimeError: boom"})
    return {"schema": SCHEMA, "models": ["big", "small", "broken"], "system_info": {"cpu_model": "test CPU"},
            "metrics": {"latency": {"unit": "ms", "direction": "min", "better": "faster"},
                        "accuracy": {"unit": "fraction", "direction": "max", "better": "more accurate"}},
            "results": {"latency": {"big": {"values": [1.9, 2.0, 2.1], "p90": 2.08},
                                    "small": {"values": [0.9, 1.0, 1.1], "p90": 1.08}}},
            "failures": {"latency": {"broken": {"error_type": "RuntimeError", "message": "boom"}}},
            "table": rows, "comparisons": [], "pareto": {"metrics": ["latency", "accuracy"],
                                                         "directions": {"latency": "min", "accuracy": "max"},
                                                         "front": ["big", "small"], "excluded": {}}}


def test_unit_report_files():
    import tempfile
    payload = _toy_payload()
    md = render_markdown(payload)
    for text in ("| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MB)** | **Platform** | **References** |",
                 "big", "small", "broken", "RuntimeError: boom", "## Pareto set", "## Recommendations", "test CPU"):
        assert text in md, f"the report should contain {text!r}"
    assert "lowest latency**: small" in md and "highest accuracy**: big" in md
    with tempfile.TemporaryDirectory() as tmp:
        p = save_json(payload, Path(tmp) / JSON_FILE)
        assert load_payload(p) == payload, "the JSON must load back equal"
        csv_text = tidy_csv(payload["table"])
        lines = csv_text.strip().splitlines()
        assert lines[0].split(",") == list(TABLE_COLUMNS) and len(lines) == 1 + len(payload["table"])
        paths = [plot_metric(payload, "latency", tmp), plot_metric(payload, "accuracy", tmp),
                 plot_pareto(payload, "latency", "accuracy", ["big", "small"], tmp),
                 plot_distribution(payload, "latency", tmp)]
        for path in paths:
            assert path.exists() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} should be a PNG"
        assert not list(Path(tmp).glob(".*tmp*")), "no temporary files may be left behind"
        try:
            save_json({"x": float("nan")}, Path(tmp) / "bad.json")
            raise AssertionError("NaN must not be written to JSON")
        except ValueError:
            pass
        try:
            load_payload(Path(tmp) / "missing.json")
            raise AssertionError("a missing file must fail")
        except FileNotFoundError as e:
            assert "path" in str(e)
        blocker = Path(tmp) / "file"
        blocker.write_text("x")
        try:
            ensure_output_dir(blocker / "sub")
            raise AssertionError("a directory under a file cannot be created")
        except OSError as e:
            assert "output_dir" in str(e)


if __name__ == "__main__":
    test_unit_report_files()
