"""Memory: a class larger than the judge's memory budget is judged in groups (`in_groups`), each group's sandboxes
closed before the next starts, sized from the largest sandbox measured so far (`note_footprint`); and the judge's
state (`save_state`, the copy checks' material), written atomically for `--resume`.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from tito.isolation.procs import tree_pss_mb
from tito.olympics.sandboxes import Student


SANDBOX_MB = 400   # what one measuring sandbox is assumed to take before one is measured (measured: docs/performance.md)


MARGIN = 1.25      # on the largest sandbox measured: a later group's models may be larger


def note_footprint(state: dict, group: list[Student]) -> None:
    """Record the largest measuring sandbox of `group` (PSS) and the judge's own, the next group's sizes."""
    sizes = [mb for st in group if st.proc is not None and (mb := tree_pss_mb(st.proc.pid)) > 0]  # 0: unreadable
    mem = state.setdefault("memory", {})
    if sizes:
        mem["sandbox_mb"] = max(max(sizes), mem.get("sandbox_mb", 0.0))
    mem["judge_mb"] = max(tree_pss_mb(os.getpid()) - sum(sizes), mem.get("judge_mb", 0.0), 0.0)


def group_size(memory_mb: float, judge_mb: float, sandbox_mb: float, jobs: int) -> int:
    """How many students' sandboxes fit in `memory_mb` beside the judge (`judge_mb`) and the `jobs` converting
    sandboxes a load may start: every sandbox at its measured size times MARGIN; at least one.

        >>> group_size(16384, 500, 250, 2)   # (16384 - 500 - 2 x 312.5) // 312.5
        48
    """
    return max(1, int((memory_mb - judge_mb - jobs * sandbox_mb * MARGIN) // (sandbox_mb * MARGIN)))


def in_groups(valid: list[Student], state: dict, memory_mb: float, jobs: int, state_path: Path):
    """The class in groups that fit the memory budget, in order: (group, index, count of groups so far
    foreseen). A group's sandboxes are started, judged in rounds of their own (the course baseline timed in
    every student's sandbox in every round) and closed before the next group starts. The first group is sized
    from SANDBOX_MB, each later one from the largest sandbox measured so far; groups already formed (kept in
    the state) are kept on --resume, so a resumed group keeps its rounds."""
    by_name = {st.name: st for st in valid}
    groups = state.setdefault("groups", [])
    placed = {n for g in groups for n in g}
    i = 0
    while True:
        rest = [st for st in valid if st.name not in placed]
        mem = state.get("memory", {})
        size = group_size(memory_mb, mem.get("judge_mb", 0.0), mem.get("sandbox_mb", SANDBOX_MB), jobs)
        if i == len(groups):
            if not rest:
                return
            groups.append([st.name for st in rest[:size]])
            placed.update(groups[-1])
            rest = rest[size:]
            save_state(state_path, state)
        yield [by_name[n] for n in groups[i] if n in by_name], i, len(groups) + math.ceil(len(rest) / size)
        i += 1


def group_rounds(group: list[Student], state: dict) -> int:
    "Rounds the group has finished (a round holds the students of one group)."
    names = {st.name for st in group}
    return sum(1 for r in state["rounds"] if names & set(r))


def save_state(state_path: Path, state: dict) -> None:
    from tinytorch.benchmarking.results import write_json

    write_json(state_path, state, indent=None)  # atomic: a crash leaves the last complete state


def save_copy_material(path: Path, material: dict) -> None:
    """One student's copy-check material (weights hash, bounded tensor signatures, accuracy-pass outputs, probe
    answers) in a file of its own, beside the state: written once, read when the whole class is measured."""
    import numpy as np

    from tinytorch.benchmarking.results import write_json

    def plain(v):
        if isinstance(v, np.ndarray):
            return v.astype(float).round(6).tolist()
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    write_json(path, plain(material), indent=None)


def load_copy_material(path: Path) -> dict | None:
    import numpy as np

    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    m["tensors"] = [{**t, "sig": np.asarray(t["sig"], np.float32),
                     **({"rows": np.asarray(t["rows"], np.float32)} if "rows" in t else {})} for t in m.get("tensors", [])]
    if m.get("outputs") is not None:
        m["outputs"] = np.asarray(m["outputs"], np.float32)
    return m
