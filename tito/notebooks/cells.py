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


def syntax_errors(nb: dict) -> list[dict]:
    """Each code cell of `nb` that does not compile, where a student finds it: the cell's number (1 = the first
    cell of the notebook, as JupyterLab counts), its nbgrader grade id where it has one, the line in the cell, and
    the error (IPython magics and shell lines count as Python `pass`).

    >>> syntax_errors({"cells": [{"cell_type": "markdown", "source": "# x"},
    ...     {"cell_type": "code", "source": "def f():\\nreturn 1", "metadata": {"nbgrader": {"grade_id": "f"}}}]})
    [{'cell': 2, 'grade_id': 'f', 'line': 2, 'error': 'IndentationError: expected an indented block after function definition on line 1'}]
    """
    import re

    out = []
    for i, cell in enumerate(nb.get("cells", []) if isinstance(nb, dict) else [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", ln) for ln in cell_source(cell).split("\n"))
        try:
            compile(src, f"cell {i}", "exec", dont_inherit=True)
        except SyntaxError as e:
            out.append({"cell": i, "grade_id": nbgrader_meta(cell).get("grade_id"), "line": e.lineno,
                        "error": f"{type(e).__name__}: {e.msg}"})
        except ValueError as e:  # a NUL byte
            out.append({"cell": i, "grade_id": nbgrader_meta(cell).get("grade_id"), "line": None,
                        "error": f"{type(e).__name__}: {e}"})
    return out


def where(notebook: str, err: dict) -> str:
    """`syntax_errors`' entry in words: notebook, cell (and grade id), line in the cell, error.

    >>> where("results_dev.ipynb", {"cell": 12, "grade_id": "bench-result", "line": 3, "error": "SyntaxError: x"})
    'results_dev.ipynb, cell 12 (grade id bench-result), line 3 of the cell: SyntaxError: x'
    """
    gid = f" (grade id {err['grade_id']})" if err.get("grade_id") else ""
    line = f", line {err['line']} of the cell" if err.get("line") else ""
    return f"{notebook}, cell {err['cell']}{gid}{line}: {err['error']}"
