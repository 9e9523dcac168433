"""What each side runs for one graded notebook, read from the instructor's source notebook.

The judge never sees the student's code and the host never sees the tests:

- the *judge plan* (trusted, never enters the sandbox): the instructor's setup cells, the import
  statements of the exported cells that bring in libraries or other course modules (the judge
  imports them itself), the names the exported and solution cells define (looked up in the host),
  and the graded test cells with their hidden tests;
- the *host plan*: import the student's exported modules, run the student's non-exported solution
  cells (with the notebook's setup cells before them, which are visible in the release anyway);
- the *feedback cells*: the student's own notebook, every code cell but the graded ones.

Names are read from the instructor's cells, never from the student's: a student's module that
also defines `abs`, `isinstance` or `expect_error` changes nothing in the judge.

    >>> cells = [{"cell_type": "code", "metadata": {}, "source": "#| default_exp stats"},
    ...          {"cell_type": "code", "metadata": {}, "source": "#| export\\nimport math\\ndef mean(xs): return sum(xs) / len(xs)"}]
    >>> [c["kind"] for c in judge_plan({"cells": cells}, "tinytorch")["cells"]]
    ['setup', 'imports', 'names']
"""
from __future__ import annotations

from typing import Any

from tito.notebooks.cells import cell_source, nbgrader_meta, plain_python
from tito.notebooks.exports import default_exp, exported_module, notebook_modules, split_exported
from tito.notebooks.regions import hidden_ranges

def judge_plan(source_nb: dict, lib: str) -> dict:
    """{"modules": [...], "cells": [...]} the judge runs for the source notebook (module doc)."""
    modules = notebook_modules(source_nb, lib)
    exp = default_exp(source_nb)
    cells: list[dict[str, Any]] = []
    for i, cell in enumerate(source_nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        meta, src = nbgrader_meta(cell), cell_source(cell)
        if meta.get("grade") and not meta.get("solution"):
            cells.append({"kind": "test", "index": i, "grade_id": meta.get("grade_id", f"cell-{i}"),
                          "points": float(meta.get("points", 0) or 0), "source": plain_python(src),
                          "hidden": hidden_ranges(src)})
        elif exported_module(src, exp) or meta.get("solution"):
            imports, names = split_exported(src, set(modules))
            if imports:
                cells.append({"kind": "imports", "index": i, "source": imports})
            if names:
                cells.append({"kind": "names", "index": i, "names": names})
        else:
            cells.append({"kind": "setup", "index": i, "source": plain_python(src)})
    return {"modules": modules, "cells": cells}


def host_plan(source_nb: dict, merged_nb: dict, lib: str) -> list[dict]:
    """The cells the host's test process runs to build its namespace (module doc)."""
    modules_seen: set[str] = set()
    exp = default_exp(source_nb)
    loose = any(nbgrader_meta(c).get("solution") and c.get("cell_type") == "code" and not exported_module(cell_source(c), exp)
                for c in source_nb.get("cells", []))
    out: list[dict] = []
    for i, (cell, mine) in enumerate(zip(source_nb.get("cells", []), merged_nb.get("cells", []))):
        if cell.get("cell_type") != "code" or (nbgrader_meta(cell).get("grade") and not nbgrader_meta(cell).get("solution")):
            continue
        mod = exported_module(cell_source(cell), exp)
        if mod:
            if f"{lib}.{mod}" not in modules_seen:
                modules_seen.add(f"{lib}.{mod}")
                out.append({"kind": "import", "module": f"{lib}.{mod}", "index": i})
        elif nbgrader_meta(cell).get("solution"):
            out.append({"kind": "student", "source": cell_source(mine), "index": i})
        elif loose:
            out.append({"kind": "setup", "source": cell_source(cell), "index": i})
    return out


def feedback_cells(student_nb: dict) -> list[dict]:
    """The student's code cells to run for their feedback: all but the graded test cells."""
    out = []
    for i, cell in enumerate(student_nb.get("cells", [])):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = nbgrader_meta(cell)
        if meta.get("grade") and not meta.get("solution"):
            continue
        out.append({"index": i, "source": cell_source(cell)})
    return out
