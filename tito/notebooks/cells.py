"""A notebook's cells as nbformat-4 JSON dicts, read without nbformat (tito reads submitted notebooks as
plain JSON, with its own size and depth limits): the one place that knows where a cell keeps its text
and its nbgrader metadata.

>>> cell = {"cell_type": "code", "source": ["x = 1\\n", "y = 2"], "metadata": {"nbgrader": {"grade_id": "t"}}}
>>> cell_source(cell), nbgrader_meta(cell)["grade_id"], nbgrader_meta({"metadata": None})
('x = 1\\ny = 2', 't', {})
"""
from __future__ import annotations


def cell_source(cell: dict) -> str:
    "The cell's text (nbformat stores it as one string or a list of lines)."
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else str(s)


def nbgrader_meta(cell: dict) -> dict:
    "The cell's nbgrader metadata, {} when it has none."
    return (cell.get("metadata") or {}).get("nbgrader") or {}
