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

import ast
import re
from typing import Any

from tito.grading.package import default_exp, exported_module
from tito.notebooks.cells import cell_source, nbgrader_meta

HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
_MAGIC = re.compile(r"^\s*[%!]")


def python_source(source: str) -> str:
    """`source` with IPython magics and shell lines made into `pass` (the judge runs plain Python)."""
    return "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", l) if _MAGIC.match(l) else l for l in source.split("\n"))


def notebook_modules(nb: dict, lib: str) -> list[str]:
    """Full names of the modules the notebook's cells export to, in the order they first appear."""
    exp = default_exp(nb)
    out: list[str] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        mod = exported_module(cell_source(cell), exp)
        if mod and f"{lib}.{mod}" not in out:
            out.append(f"{lib}.{mod}")
    return out


def bound_names(stmt: ast.stmt) -> list[str]:
    """Names a module-level statement binds (definitions, assignments, imports, loop and with
    targets, inside if/try/with blocks too)."""
    out: list[str] = []

    def targets(node) -> None:
        if isinstance(node, ast.Name):
            out.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                targets(e)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.append(stmt.name)
    elif isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            targets(t)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets(stmt.target)
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets(stmt.target)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        out += [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                targets(item.optional_vars)
    for field in ("body", "orelse", "finalbody"):
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for sub in getattr(stmt, field, []) or []:
                out += bound_names(sub)
    for handler in getattr(stmt, "handlers", []) or []:
        for sub in handler.body:
            out += bound_names(sub)
    return out


def split_exported(source: str, own: set[str]) -> tuple[str, list[str]]:
    """(import statements the judge runs itself, names to look up in the host) of an exported cell.

    Imports of libraries and of course modules other than `own` (the notebook's own modules) are
    the judge's; everything else the cell binds is the student's.
    """
    tree = ast.parse(python_source(source))
    imports, names = [], []
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            continue
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module not in own:
            imports.append(ast.unparse(stmt))
        elif isinstance(stmt, ast.Import) and not any(a.name in own for a in stmt.names):
            imports.append(ast.unparse(stmt))
        else:
            names += [n for n in bound_names(stmt) if not (n.startswith("__") and n.endswith("__"))]
    return "\n".join(imports), list(dict.fromkeys(names))


def hidden_ranges(source: str) -> list[tuple[int, int]]:
    """1-based (first, last) line numbers of each hidden-test region, markers included."""
    out, start = [], None
    for i, line in enumerate(source.split("\n"), 1):
        s = line.strip()
        if s.startswith(HIDDEN[0]):
            start = i
        elif s.startswith(HIDDEN[1]) and start is not None:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, len(source.split("\n"))))
    return out


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
                          "points": float(meta.get("points", 0) or 0), "source": python_source(src),
                          "hidden": hidden_ranges(src)})
        elif exported_module(src, exp) or meta.get("solution"):
            imports, names = split_exported(src, set(modules))
            if imports:
                cells.append({"kind": "imports", "index": i, "source": imports})
            if names:
                cells.append({"kind": "names", "index": i, "names": names})
        else:
            cells.append({"kind": "setup", "index": i, "source": python_source(src)})
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
