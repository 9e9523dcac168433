"""A notebook's cells as nbformat-4 JSON dicts, read without nbformat (tito reads submitted notebooks as
plain JSON, with its own size and depth limits): the one place that knows where a cell keeps its text
and its nbgrader metadata.

>>> cell = {"cell_type": "code", "source": ["x = 1\\n", "y = 2"], "metadata": {"nbgrader": {"grade_id": "t"}}}
>>> cell_source(cell), nbgrader_meta(cell)["grade_id"], nbgrader_meta({"metadata": None})
('x = 1\\ny = 2', 't', {})
"""
from __future__ import annotations

import ast
import io
import re
import tokenize

_MAGIC = re.compile(r"^(\s*)[%!]")  # a line or cell magic, or a shell line
_TIMED = re.compile(r"^(\s*)(?:([\w.\[\], ]+?)\s*=\s*)?%(?:time|timeit)\s+(?:-[a-z]\s*\d*\s+)*(.*)$")
CELL_BODY_MAGICS = ("time", "timeit", "capture")  # cell magics whose body is the student's Python



def cell_source(cell: dict) -> str:
    "The cell's text (nbformat stores it as one string or a list of lines)."
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else str(s)


def nbgrader_meta(cell: dict) -> dict:
    "The cell's nbgrader metadata, {} when it has none."
    return (cell.get("metadata") or {}).get("nbgrader") or {}


def plain_python(source: str) -> str:
    """A cell's text as plain Python, line for line (a traceback's line numbers still point into the cell): the one
    way tito reads IPython syntax, for the export, the judge and the inline tests alike. `%time STMT` and
    `%timeit STMT` become STMT (`x = %time f()` becomes `x = f()`); a cell that starts `%%time`, `%%timeit` or
    `%%capture` runs its body, another cell magic (`%%bash`) is no Python and becomes `pass`; every other magic or
    shell line (`!pip ...`) becomes `pass`. A line inside a string or continuing a statement (`     % x)`) is left as
    it is.

    >>> plain_python("def f():\\n    %time x = g()\\n    y = %timeit -n 3 g()\\n    !ls\\n    return x")
    'def f():\\n    x = g()\\n    y = g()\\n    pass\\n    return x'
    """
    lines = source.split("\n")
    # nothing to change unless a line starts with a magic or assigns a timed one: the check below tokenizes the
    # cell, and most cells hold a `%` or a `!=` somewhere (module complete read every cell twice a run: 3 s of CPU)
    if "%time" not in source and not any(_MAGIC.match(line) for line in lines):
        return source
    quoted = _inner_lines("\n".join(re.sub(r"^(\s*)[%!]+", lambda m: " " * len(m.group(0)), line) for line in lines))
    head = lines[0].strip()
    if head.startswith("%%") and 1 not in quoted:
        if head[2:].split(" ")[0] not in CELL_BODY_MAGICS:
            return "\n".join(["pass"] + [""] * (len(lines) - 1))
        lines[0] = "pass"
    out = []
    for i, line in enumerate(lines, 1):
        m = _TIMED.match(line) if i not in quoted else None
        if m and _parses(m.group(3)):
            indent, target, stmt = m.groups()
            out.append(f"{indent}{target} = {stmt}" if target else indent + stmt)
        elif i not in quoted and _MAGIC.match(line):
            out.append(_MAGIC.match(line).group(1) + "pass")
        else:
            out.append(line)
    return "\n".join(out)


def _parses(stmt: str) -> bool:
    try:
        ast.parse(stmt.strip())
        return bool(stmt.strip())
    except SyntaxError:
        return False


def _inner_lines(text: str) -> set[int]:
    """Line numbers (from 1) of the lines that start inside a string spanning lines or inside a statement begun on
    an earlier line (nothing, where `text` does not tokenize)."""
    out, opened, depth, row = set(), [], 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.start[0] != row:  # the first token of a line: inside brackets, it continues a statement
                row = tok.start[0]
                if depth > 0:
                    out.add(row)
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(depth - 1, 0)
            elif tok.type == getattr(tokenize, "FSTRING_START", None):  # Python 3.12: an f-string is several tokens
                opened.append(tok.start[0])
            elif tok.type == getattr(tokenize, "FSTRING_END", None) and opened:
                out.update(range(opened.pop() + 1, tok.end[0] + 1))
            elif tok.type == tokenize.STRING:
                out.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return set()
    return out


def syntax_errors(nb: dict) -> list[dict]:
    """Each code cell of `nb` that does not compile, where a student finds it: the cell's number (1 = the first
    cell of the notebook, as JupyterLab counts), its nbgrader grade id where it has one, the line in the cell, and
    the error (IPython magics read as `plain_python` reads them).

    >>> syntax_errors({"cells": [{"cell_type": "markdown", "source": "# x"},
    ...     {"cell_type": "code", "source": "def f():\\nreturn 1", "metadata": {"nbgrader": {"grade_id": "f"}}}]})
    [{'cell': 2, 'grade_id': 'f', 'line': 2, 'error': 'IndentationError: expected an indented block after function definition on line 1'}]
    """
    out = []
    for i, cell in enumerate(nb.get("cells", []) if isinstance(nb, dict) else [], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = plain_python(cell_source(cell))
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
