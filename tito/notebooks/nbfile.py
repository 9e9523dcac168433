"""Notebooks read and written in one place: `read_notebook` (a course's own notebook as it is; a submitted one,
untrusted, with limits), `write_notebook` and `atomic_write` (write, then rename: never half a file), `from_percent`
(a percent-format source made a notebook, jupytext) and `notebook_node` (nbformat's object, for nbclient).

A submitted notebook (a cap in MB given) is read as tito.isolation.untrusted reads a student's file (a regular
file only, its size checked first), parsed only after its JSON values are counted (MAX_VALUES, on the raw bytes)
and with a nesting limit, its cells counted (MAX_CELLS) and checked for the shapes later steps read
(`cell_problem`); of it tito keeps only what grading reads (`essentials`): each cell's type, text, a cell id and an
nbgrader grade_id as lookup keys, and its grade/solution flags; no output and no other metadata of the
submission reaches a later step. Each problem is a `Refused` reason that costs that file only.

    >>> parse_notebook(b'{"cells": [], "metadata": {}}')["cells"]
    []
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tito.isolation.untrusted import MAX_VALUES, MB, Refused, parse_json, read_regular
from tito.notebooks.cells import cell_source, nbgrader_meta

MAX_CELLS = 2_000       # cells of one notebook (Module 19's largest: under 200)


def read_notebook(path: Path, untrusted_mb: int | None = None) -> dict:
    """The notebook at `path`: a course's own file as it is (`untrusted_mb` None), or a submitted one read and
    parsed as the module doc says, as its `essentials` (at most `untrusted_mb` MB); raises Refused for that one."""
    if untrusted_mb is None:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    return essentials(parse_notebook(read_regular(path, untrusted_mb * MB)))


def parse_notebook(data: bytes) -> dict:
    """A notebook's JSON (a dict with a list of cells, at most MAX_VALUES values, MAX_CELLS cells, nested at most
    tito.isolation.untrusted.MAX_DEPTH levels); raises Refused. Counted before anything is built from it."""
    nb = parse_json(data, MAX_VALUES, "unreadable notebook")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Refused("unreadable notebook: ValueError: no cells")
    if not isinstance(nb.get("metadata", {}), dict):
        raise Refused("unreadable notebook: its metadata is not an object")
    if len(nb["cells"]) > MAX_CELLS:
        raise Refused(f"unreadable notebook: {len(nb['cells']):,} cells, above the limit of {MAX_CELLS:,}")
    for i, cell in enumerate(nb["cells"]):
        why = cell_problem(cell)
        if why:
            raise Refused(f"unreadable notebook: cell {i + 1} {why}")
    return nb


_NBGRADER_TYPES = {"grade_id": str, "grade": bool, "solution": bool, "locked": bool, "task": bool,
                   "points": (int, float), "schema_version": int}


def cell_problem(cell) -> str:
    """Why `cell` is not a notebook cell every later step can read (nbformat 4's shapes for the keys
    tito reads; "" when it is one).

    >>> cell_problem({"cell_type": "code", "source": ["x = 1"], "metadata": {"nbgrader": {"grade_id": [1]}}})
    'has an nbgrader grade_id that is not a str'
    """
    if not isinstance(cell, dict):
        return "is not an object"
    src = cell.get("source", "")
    if not isinstance(cell.get("cell_type", ""), str):
        return "has a cell_type that is not a string"
    if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(x, str) for x in src))):
        return "has a source that is neither a string nor a list of strings"
    meta = cell.get("metadata", {})
    if not isinstance(meta, dict) or not isinstance(meta.get("nbgrader", {}) or {}, dict):
        return "has metadata that is not an object"
    for key, kind in _NBGRADER_TYPES.items():
        value = (meta.get("nbgrader") or {}).get(key)
        if value is not None and (not isinstance(value, kind) or (kind != bool and isinstance(value, bool))):
            return f"has an nbgrader {key} that is not a {getattr(kind, '__name__', 'number')}"
    for key in ("id", "execution_count"):
        if key in cell and not isinstance(cell[key], (str, int, type(None))):
            return f"has an {key} of the wrong type"
    return ""


_CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat 4.5's cell id pattern, at most 64 characters
_GRADE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def essentials(nb: dict) -> dict:
    """What grading reads of a parsed submission (`parse_notebook`'s), and nothing else: per cell its type
    (code, markdown or raw), text, `id` (a lookup key, when it is one nbformat allows) and nbgrader `grade_id`
    (a lookup key, when it could name a cell of the course), `grade` and `solution`. No outputs, no notebook or
    cell metadata of the submission: everything the instructor's tools show of a cell, its identity included,
    comes from the course's own notebooks (tito.grading.feedback.autograded_notebook).

    >>> essentials({"metadata": {"widgets": {}}, "cells": [{"cell_type": "code", "id": "x'><b>", "source": ["a"],
    ...     "outputs": [{}], "metadata": {"tito": {"answer_key": "fake"}, "nbgrader": {"grade_id": "t-1"}}}]})
    {'nbformat': 4, 'nbformat_minor': 5, 'metadata': {}, 'cells': [{'cell_type': 'code', 'source': 'a', 'metadata': {'nbgrader': {'grade_id': 't-1'}}}]}
    """
    cells = []
    for cell in nb.get("cells", []):
        kind = cell.get("cell_type")
        out = {"cell_type": kind if kind in ("code", "markdown", "raw") else "raw", "source": cell_source(cell)}
        if isinstance(cell.get("id"), str) and _CELL_ID.fullmatch(cell["id"]):
            out["id"] = cell["id"]
        meta = nbgrader_meta(cell)
        keep = {k: meta[k] for k in ("grade", "solution") if isinstance(meta.get(k), bool)}
        if isinstance(meta.get("grade_id"), str) and _GRADE_ID.fullmatch(meta["grade_id"]):
            keep["grade_id"] = meta["grade_id"]
        out["metadata"] = {"nbgrader": keep} if keep else {}
        cells.append(out)
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder and os.replace."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:  # a failed write leaves no temporary file
        tmp.unlink(missing_ok=True)


def write_notebook(path: Path, nb: dict, indent: int | None = 1, ascii_only: bool = False) -> Path:
    """`nb` as a notebook file at `path`, written atomically (`indent` None: one line, as the judge's inputs)."""
    atomic_write(path, json.dumps(nb, indent=indent, ensure_ascii=ascii_only) + ("\n" if indent is not None else ""))
    return Path(path)


def from_percent(src: Path, out: Path) -> None:
    """Write notebook `out` from the percent-format source `src` (jupytext), keeping `out`'s cell ids if it exists:
    the same result as `jupytext --update --to ipynb -o out src`, with outputs stripped."""
    import jupytext
    from jupytext.combine import combine_inputs_with_outputs

    nb = jupytext.read(src, fmt="py:percent")
    if out.exists():
        nb = combine_inputs_with_outputs(nb, jupytext.read(out, fmt="ipynb"), fmt="py:percent")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    out.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, out, fmt="ipynb")


def notebook_node(path: Path):
    """The notebook at `path` as nbformat's NotebookNode (version 4), for a tool that runs it (nbclient)."""
    import nbformat

    return nbformat.read(path, as_version=4)
