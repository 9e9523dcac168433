"""The Olympics' leaderboards, written: the judged one (`judged_leaderboard`: ranks by the library's
`rank_judged`) and the claims' one (`leaderboard`: self-reported submissions ranked by `rank_with_ties`)."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from tinytorch.benchmarking.benchmark import OlympicEvent
from tinytorch.benchmarking.olympics import EVENT_RULES, get_event, rank_judged, rank_with_ties, validate_submission
from tinytorch.benchmarking.results import write_atomic
from tito.isolation.sanitize import md_cell


def judged_leaderboard(entries: Mapping[str, Mapping[str, Any]], event: OlympicEvent | str,
                       rejected: Mapping[str, str] | None = None, source: str = "", **rule: Any) -> dict[str, Any]:
    """The class's leaderboard from the judge's figures. `entries`: student -> {"figures":
    judged_figures(...), "techniques": [...], "flags": [...], "eligible": bool}; ineligible entries
    (an event rule broken) are listed unranked. Returns {"table": DataFrame, "markdown", "csv", "ranks"}."""
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
    if rejected:
        md += ["", "## Rejected", ""] + [f"- {md_cell(s)}: {md_cell(why)}" for s, why in sorted(rejected.items())]
    clean = table.copy()
    for col in ("participant", "techniques", "flags"):
        clean[col] = clean[col].map(lambda t: re.sub(r"[\x00-\x1f\x7f-\x9f]+", " ", str(t)))
    return {"table": table, "markdown": "\n".join(md) + "\n", "csv": clean.to_csv(index=False),
            "ranks": {s: int(r) for s, r in ranks.items()}}


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
    out = {"table": table, "markdown": "\n".join(md) + "\n", "csv": table.to_csv(index=False), "invalid": invalid}
    if output_path is not None:
        for ext, key in ((".md", "markdown"), (".csv", "csv")):
            write_atomic(Path(output_path).with_suffix("").with_suffix(ext), out[key])
    return out
