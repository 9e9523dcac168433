"""The Olympics' leaderboards, written: the judged one (`judged_leaderboard`: ranks by the library's
`rank_judged`) and the claims' one (`leaderboard`: self-reported submissions ranked by `rank_with_ties`)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from tinytorch.benchmarking.benchmark import OlympicEvent
from tinytorch.benchmarking.olympics import EVENT_RULES, get_event, rank_judged, rank_with_ties, validate_submission
from tinytorch.benchmarking.results import write_atomic
from tito.isolation.sanitize import csv_cell, md_cell


def judged_leaderboard(entries: Mapping[str, Mapping[str, Any]], event: OlympicEvent | str,
                       rejected: Mapping[str, str] | None = None, source: str = "", run: Mapping[str, Any] | None = None,
                       **rule: Any) -> dict[str, Any]:
    """The class's leaderboard from the judge's figures. `entries`: student -> {"figures":
    judged_figures(...) (with the judge's "audits" and "cost"), "techniques": [...], "flags": [...], "eligible": bool};
    ineligible entries (an event rule broken, an audit failed) are listed unranked; `run`: what the run's inputs were.
    Every text a student wrote is escaped for the format it lands in (`md_cell`, `csv_cell`).
    Returns {"table": DataFrame, "markdown", "csv", "ranks"}."""
    ev = get_event(event)
    eligible = {s: e["figures"]["score"] for s, e in entries.items() if e.get("eligible", True)}
    ranks = rank_judged(eligible, **rule)
    rows = []
    for s, e in entries.items():
        f, sc = e["figures"], e["figures"]["score"]
        r = ranks.get(s)
        rows.append({"rank": r, "tied": r is not None and list(ranks.values()).count(r) > 1, "participant": s,
                     "score": sc["value"], "ci_lower": sc["ci_lower"], "ci_upper": sc["ci_upper"],
                     "accuracy": f["accuracy"]["value"], "latency_median_ms": f["latency_median_ms"]["optimized"],
                     "size_bytes": e.get("size_bytes"), "speedup": f["speedup"]["value"],
                     "compression_ratio": f["compression_ratio"]["value"],
                     "techniques": "; ".join(e.get("techniques", [])), "flags": "; ".join(e.get("flags", []))})
    cols = ["rank", "tied", "participant", "score", "ci_lower", "ci_upper", "accuracy", "latency_median_ms",
            "size_bytes", "speedup", "compression_ratio", "techniques", "flags"]
    table = pd.DataFrame(rows, columns=cols)
    if rows:
        table = (table.assign(_unranked=table["rank"].isna()).sort_values(["_unranked", "rank", "score"], ascending=[True, True, False])
                 .drop(columns="_unranked").reset_index(drop=True))
    fmt = lambda v, f: "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, f)  # noqa: E731
    md = [f"# TorchPerf Olympics: {ev.value}, judged", "",
          f"Score: {EVENT_RULES[ev].description}. Every model was measured by the judge on one machine in one run "
          "(sizes: each model file's bytes as its loader reads them, `model_file_bytes`: a TorchScript archive's records "
          "the loader reads, an .onnx file's bytes; the figure a submission records); students tie when the significance rule "
          "cannot separate their scores." + (f" Accuracy was measured on {source}." if source else ""), "",
          "| rank | participant | score | 95% interval | accuracy | latency median (ms) | size (bytes) | techniques | flags |",
          "|---|---|---|---|---|---|---|---|---|"]
    for _, row in table.iterrows():
        rank = "—" if pd.isna(row["rank"]) else f"{int(row['rank'])}{' (tied)' if row['tied'] else ''}"
        md.append(f"| {rank} | {md_cell(row['participant'])} | {fmt(row['score'], '.4g')} | [{fmt(row['ci_lower'], '.4g')}, "
                  f"{fmt(row['ci_upper'], '.4g')}] | {row['accuracy']:.2%} | {fmt(row['latency_median_ms'], '.4g')} | "
                  f"{fmt(row['size_bytes'], ',')} | {md_cell(row['techniques'])} | {md_cell(row['flags'])} |")
    if not rows:
        md.append(f"| — | no model could be judged for {ev.value} | | | | | | | |")
    if rows:
        md += ["", "## Audits", "", _AUDIT_TEXT.format(**_audit_words(run)), "",
               "| participant | new / met inputs, median call | TEST01: sampled timed outputs = a fresh run | "
               "timed answers = accuracy pass | cost (CPU s, wall s) |", "|---|---|---|---|---|"]
        md += [f"| {md_cell(row['participant'])} | {_audit_cells(entries[row['participant']]['figures'])} |"
               for _, row in table.iterrows()]
    if rejected:
        md += ["", "## Rejected", ""] + [f"- {md_cell(s)}: {md_cell(why)}" for s, why in sorted(rejected.items())]
    clean = table.copy()
    for col in ("participant", "techniques", "flags"):
        clean[col] = clean[col].map(csv_cell)
    return {"table": table, "markdown": "\n".join(md) + "\n", "csv": clean.to_csv(index=False),
            "ranks": {s: int(r) for s, r in ranks.items()}}


_AUDIT_TEXT = ("Run on every student, after MLPerf Inference's compliance tests. *No caching* (TEST04, turned round): "
               "in {audit_requests} secret rounds, up to {audit_calls} of a timed request's images were images no model "
               "had been sent ({audit_pool} held back for this), at secret places among images it had met; per request, "
               "its calls on the new images, each timed by the judge's server, must not be slower than its other calls "
               "(Mann-Whitney over the requests, p < 0.05 shared out over the class, and 2%), else it is judged on the "
               "new-input figure. *TEST01*: a secret sample of each model's timed calls, every class "
               "score, against a fresh instance of the model loaded from the same bytes on the same inputs (relative "
               "difference at most 1e-3), else not ranked. *Secret seeds* (TEST05): the split, every request's images "
               "and noise, each round's order and the audits' places came from one seed drawn secretly for this run. "
               "Each timed request gets its own images, each a newly allocated tensor, drawn without replacement from "
               "the {judged_images} judged images (noise {noise} of their spread each time): a model with k calls a "
               "request meets an image again only after {judged_images}/k of its requests (its k and that count are "
               "in its record). The judge's own process peaked at {judge_peak}.")


def _audit_words(run: Mapping[str, Any] | None) -> dict[str, Any]:
    i = dict((run or {}).get("inputs") or {})
    peak = (run or {}).get("judge_peak_mb")
    return {"audit_requests": i.get("audit_requests", "—"), "audit_calls": i.get("audit_calls", "—"),
            "audit_pool": i.get("audit_pool", "—"), "judged_images": i.get("judged_images", "—"),
            "noise": i.get("noise", "—"), "judge_peak": f"{peak:,.0f} MiB" if isinstance(peak, (int, float)) else "—"}


def _audit_cells(figures: Mapping[str, Any]) -> str:
    "One student's audit figures as the cells of the audits table (numbers the judge measured, nothing a student wrote)."
    a = figures.get("audits") or {}
    nc = (a.get("no_caching") or {}).get("optimized")
    caching = "—" if nc is None else (f"{nc['new_ms']:.4g} / {nc['repeat_ms']:.4g} ms = {nc['ratio']:.2f}x, p = "
                                      f"{nc['p_value']:.2g}: {'FASTER ON REPEATS' if nc['faster_on_repeats'] else 'passed'}")
    t = (a.get("test01") or {}).get("optimized")
    tb = (a.get("test01") or {}).get("baseline")
    test01 = "—" if t is None else (f"{t['sampled'] - t['mismatched']} of {t['sampled']} match (largest difference "
                                    f"{t['max_distance']:.1e}): {'passed' if t['passed'] else 'FAILED'}"
                                    + ("" if tb is None or tb["passed"] else "; the course baseline's FAILED"))
    c = (figures.get("accuracy") or {}).get("timed")
    timed = "—" if c is None else (f"{c['timed']:.1%} of {c['calls']} timed calls right vs {c['pass']:.1%}: "
                                   f"{'DIFFER' if c['differs'] else 'passed'}")
    cost = figures.get("cost") or {}
    spent = "—" if not cost else f"{cost.get('cpu_s', 0):.1f}, {cost.get('wall_s', 0):.1f}"
    return f"{caching} | {test01} | {timed} | {spent}"


def leaderboard(submissions_dir: Any, event: OlympicEvent | str, output_path: Any = None) -> dict[str, Any]:
    """`tito olympics leaderboard`: rank the valid `*.json` submissions for `event` in `submissions_dir` (overlapping intervals tie):
    `{"table": DataFrame, "markdown", "csv", "invalid": [{"path", "reasons"}]}`; with `output_path`,
    writes `<output_path>.md` and `.csv`."""
    ev = get_event(event)
    folder = Path(submissions_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"submissions_dir: not a folder: {folder}")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ValueError(f"submissions_dir: no submission files (*.json) in {folder}")
    entries, invalid = [], []
    for f in files:
        rep = validate_submission(f)
        doc = rep["submission"]
        if not rep["valid"]:
            invalid.append({"path": str(f), "reasons": rep["reasons"]})
        elif doc["event"] == ev.value:
            s, imp = doc["score"], doc["improvements"]
            entries.append({"participant": doc["participant"], "file": f.name, "score": s["value"],
                            "ci_lower": s["ci_lower"], "ci_upper": s["ci_upper"], "speedup": imp["speedup"]["value"],
                            "compression_ratio": imp["compression_ratio"]["value"],
                            "accuracy": doc["measurements"]["optimized"]["accuracy"]["accuracy"],
                            "techniques": ", ".join(doc.get("techniques", []))})
    cols = ["rank", "tied", "participant", "score", "ci_lower", "ci_upper", "speedup", "compression_ratio",
            "accuracy", "techniques", "file"]
    ranks = rank_with_ties([(e["ci_lower"], e["ci_upper"]) for e in entries])
    for e, r in zip(entries, ranks):
        e.update(rank=r, tied=ranks.count(r) > 1)
    table = (pd.DataFrame(entries)[cols].sort_values(["rank", "score"], ascending=[True, False]).reset_index(drop=True)
             if entries else pd.DataFrame(columns=cols))
    md = [f"# TorchPerf Olympics leaderboard: {ev.value}", "", f"Score: {EVENT_RULES[ev].description}.", "",
          "Ranked by self-reported claims, each measured on its author's machine; use `python3 -m tito olympics "
          "judge` to measure every model on one machine.", "",
          "| rank | participant | score | 95% interval | accuracy | techniques |", "|---|---|---|---|---|---|"]
    md += [f"| {row['rank']}{' (tied)' if row['tied'] else ''} | {md_cell(row['participant'])} | {row['score']:.4g} | "
           f"[{row['ci_lower']:.4g}, {row['ci_upper']:.4g}] | {row['accuracy']:.2%} | {md_cell(row['techniques'])} |"
           for _, row in table.iterrows()] or [f"| — | no valid submission for {ev.value} | | | | |"]
    if invalid:
        md += ["", "## Rejected submissions", ""] + [f"- {md_cell(i['path'])}: {md_cell('; '.join(i['reasons']))}" for i in invalid]
    clean = table.copy()
    for col in ("participant", "techniques", "file"):  # a student's text never becomes a spreadsheet formula
        clean[col] = clean[col].map(csv_cell)
    out = {"table": table, "markdown": "\n".join(md) + "\n", "csv": clean.to_csv(index=False), "invalid": invalid}
    if output_path is not None:
        for ext, key in ((".md", "markdown"), (".csv", "csv")):
            write_atomic(Path(output_path).with_suffix("").with_suffix(ext), out[key])
    return out
