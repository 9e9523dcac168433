"""Solution stubs that name the function a student has to write.

nbgrader's ClearSolutions replaces every `### BEGIN SOLUTION` ... `### END SOLUTION`
region with one fixed code stub. `NamedClearSolutions` (registered by tito's generated
nbgrader_config.py in place of ClearSolutions) writes

    raise NotImplementedError("not yet implemented: BenchmarkResult.__post_init__")

instead: the qualified name (as Python's `co_qualname` spells it) of the function or
method that encloses the region, so the release, the inline runner and the grading
feedback all say which function is still missing. A region outside any function is
named by its cell's grade_id.

This module is pure (no nbgrader import: nbgrader takes seconds to import, and the grading
judge uses `replace_regions`); the preprocessor itself is tito.notebooks.clear_solutions.
"""
from __future__ import annotations

import ast
import re

STUB_TEMPLATE = 'raise NotImplementedError("not yet implemented: {name}")'
BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
_DEF = re.compile(r"(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)")


def _qualname_ast(source: str, lineno: int) -> str | None:
    """Qualname of the innermost def/class around 1-based line `lineno`, via ast (None if the
    source does not parse or no def/class encloses the line)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    chain: list[ast.AST] = []

    def visit(node: ast.AST, path: list[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if child.lineno <= lineno <= (child.end_lineno or child.lineno):
                    chain[:] = path + [child]
                    visit(child, path + [child])
            else:
                visit(child, path)

    visit(tree, [])
    if not chain:
        return None
    parts = []
    for i, node in enumerate(chain):
        parts.append(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and i < len(chain) - 1:
            parts.append("<locals>")
    return ".".join(parts)


def _qualname_indent(lines: list[str], index: int) -> str | None:
    """Fallback for sources that do not parse: walk up from line `index` by indentation."""
    line = lines[index]
    limit = len(line) - len(line.lstrip())
    found: list[tuple[str, str]] = []
    for prev in reversed(lines[:index]):
        s = prev.strip()
        if not s or s.startswith(("#", "@", ")")):
            continue
        ind = len(prev) - len(prev.lstrip())
        m = _DEF.match(s)
        if ind < limit and m:
            found.append((m.group(1), m.group(2)))
            limit = ind
            if ind == 0:
                break
    if not found:
        return None
    found.reverse()
    parts = []
    for i, (kind, name) in enumerate(found):
        parts.append(name)
        if kind == "def" and i < len(found) - 1:
            parts.append("<locals>")
    return ".".join(parts)


def enclosing_qualname(source: str, lineno: int) -> str | None:
    """Qualified name of the function/method enclosing 1-based line `lineno` of `source`.

    >>> src = "class A:\\n    def f(self):\\n        ### BEGIN SOLUTION\\n        return 1\\n        ### END SOLUTION\\n"
    >>> enclosing_qualname(src, 3)
    'A.f'
    """
    name = _qualname_ast(source, lineno)
    if name is None:
        lines = source.split("\n")
        if 1 <= lineno <= len(lines):
            name = _qualname_indent(lines, lineno - 1)
    return name


def stub_for(source: str, lineno: int, fallback: str) -> str:
    """The named stub line (without indentation) for the region starting at `lineno`."""
    name = enclosing_qualname(source, lineno) or fallback
    return STUB_TEMPLATE.format(name=name.replace('"', "'"))


def replace_regions(source: str, fallback: str) -> tuple[str, int]:
    """`source` with each solution region replaced by its named stub; (new source, regions).

    Raises ValueError on a nested or unterminated region (as nbgrader does).
    """
    lines = source.split("\n")
    out: list[str] = []
    inside = False
    count = 0
    for i, line in enumerate(lines):
        if BEGIN in line:
            if inside:
                raise ValueError("nested BEGIN SOLUTION region")
            inside = True
            count += 1
            indent = re.match(r"\s*", line).group(0)
            out.append(indent + stub_for(source, i + 1, fallback))
        elif END in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("no END SOLUTION for a BEGIN SOLUTION region")
    return "\n".join(out), count
