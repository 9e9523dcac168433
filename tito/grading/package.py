"""What a graded notebook runs against: the student's own export of its module, and the test plan.

For one notebook of one student:

* `merged_notebook(source, student)`: the instructor's source notebook with every solution cell
  (nbgrader `solution: true`) replaced by the student's cell of the same grade_id (under the
  instructor's nbdev directives). A cell the
  student deleted becomes the release stub; a cell that does not compile becomes a stub raising
  `SyntaxError("your code does not compile ...")`, so the rest of the module still imports and
  one broken task costs only its own tests. Cells the student added or edited outside solution
  cells are not part of it (the graded structure is the instructor's).
* `build_package(reference_lib, merged, dest)`: DEST/<lib> = a copy of the course's reference
  package whose files exported by this notebook are replaced by the export (nbdev) of the merged
  notebook, the way `tito module complete` builds a workspace package. The reference copy of
  the graded module is therefore not in it; other modules are.
* `compile_reference(lib, dest)`: the reference package as byte code only (legacy `.pyc` files
  beside no sources), which is what a grading sandbox gets: it imports, but no line of a solution
  is readable as text (tracebacks through it show no source either).

    >>> src = {"cells": [{"cell_type": "code", "source": "#| export\\ndef f():\\n    ### BEGIN SOLUTION\\n    return 1\\n    ### END SOLUTION",
    ...         "metadata": {"nbgrader": {"solution": True, "grade_id": "f"}}}]}
    >>> merged_notebook(src, {"cells": []})["cells"][0]["source"].splitlines()[-1]
    '    raise NotImplementedError("not yet implemented: f")'
"""
from __future__ import annotations

import ast
import copy
import re
import shutil
from pathlib import Path

from tito.config import TitoError
from tito.notebooks.cells import cell_source, nbgrader_meta, plain_python
from tito.notebooks.exports import ExportError, nbdev_export
from tito.notebooks.named_stubs import replace_regions
from tito.notebooks.nbfile import write_notebook

_STUB_HEAD = 'NotImplementedError("not yet implemented: '


def compiles(source: str) -> str | None:
    """None when `source` (its IPython magics made plain Python: tito.notebooks.cells.plain_python) is valid Python;
    else the error.

    >>> compiles("x = (") is not None, compiles("%time x = 1") is None
    (True, True)
    """
    try:
        ast.parse(plain_python(source))
    except SyntaxError as e:
        return f"{e.msg} (line {e.lineno})"
    return None


def merged_notebook(source_nb: dict, student_nb: dict) -> dict:
    """The source notebook with the student's solution cells (see module doc)."""
    theirs = {nbgrader_meta(c).get("grade_id"): c for c in student_nb.get("cells", []) if nbgrader_meta(c).get("grade_id")}
    out = copy.deepcopy(source_nb)
    for cell in out.get("cells", []):
        meta = nbgrader_meta(cell)
        if not meta.get("solution") or cell.get("cell_type") != "code":
            continue
        gid = meta.get("grade_id", "this cell")
        mine = theirs.get(gid)
        if mine is None:
            cell["source"] = replace_regions(cell_source(cell), gid)[0]
            continue
        text = with_directives_of(cell_source(cell), cell_source(mine))
        why = compiles(text)
        if why is None:
            cell["source"] = plain_python(text)
        else:
            msg = f"your code does not compile ({why}): "
            cell["source"] = replace_regions(cell_source(cell), gid)[0].replace(
                _STUB_HEAD, 'SyntaxError("' + msg.replace('"', "'"))
    return out


_DIRECTIVE = re.compile(r"^\s*#\s*\|")


def with_directives_of(instructor: str, student: str) -> str:
    r"""The student's cell with the instructor's nbdev directives (`#| export ...`) instead of its
    own: where a cell's code goes is the course's decision, never the submission's (a student's
    `#| export ../../x` would otherwise name a file outside the package).

    >>> with_directives_of("#| export\ndef f(): ...", "#| export ../../x\ndef f(): return 1")
    '#| export\ndef f(): return 1'
    """
    theirs = [l for l in instructor.split("\n") if _DIRECTIVE.match(l)]
    mine = [l for l in student.split("\n") if not _DIRECTIVE.match(l)]
    return "\n".join(theirs + mine)


def build_package(reference_lib: Path, source_nb: dict, merged: dict, name: str, dest: Path,
                  nbdev_root: Path) -> list[str]:
    """DEST/<lib name> = reference package with this notebook's modules exported from `merged`
    (when nbdev cannot export it: from `source_nb` with every solution stubbed).

    `name` is the notebook's file name (nbdev names nothing after it; it only labels the export).
    Returns the replaced files, relative to the package. Raises TitoError when nbdev cannot
    export the notebook even with every solution stubbed.
    """
    reference_lib = Path(reference_lib)
    pkg = Path(dest) / reference_lib.name
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(reference_lib, pkg, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    scratch = Path(dest) / ".export"
    attempts = [merged, merged_notebook(source_nb, {"cells": []})]
    last: Exception | None = None
    for nb in attempts:
        if scratch.exists():
            shutil.rmtree(scratch)
        (scratch / "lib").mkdir(parents=True)
        nb_path = scratch / name
        write_notebook(nb_path, nb, indent=None)
        try:
            nbdev_export([nb_path], scratch / "lib", nbdev_root)
            break
        except ExportError as e:  # retried with stubs, then reported
            last = e
    else:
        raise TitoError(str(last))
    written = sorted(p.relative_to(scratch / "lib").as_posix() for p in (scratch / "lib").rglob("*.py"))
    for rel in written:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(scratch / "lib" / rel, pkg / rel)
        (pkg / rel).with_suffix(".pyc").unlink(missing_ok=True)  # the byte-compiled reference of it
    shutil.rmtree(scratch)
    return written


def compile_reference(lib: Path, dest: Path) -> Path:
    """DEST/<lib name>: the package `lib` as legacy byte code only (`x.pyc` where `x.py` was, no
    sources, no docstrings, no comments, no `__pycache__`), importable by the same Python. Returns the
    package folder. (Byte code can still be disassembled: what a sandbox gets of the reference is
    limited to the modules a notebook imports: tito.notebooks.imports.reach, `prune_package`.)"""
    import compileall

    out = Path(dest) / Path(lib).name
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(lib, out, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    for src in out.rglob("*.py"):
        src.write_text(ast.unparse(_without_docstrings(ast.parse(src.read_text(encoding="utf-8")))) + "\n",
                       encoding="utf-8")
    if not compileall.compile_dir(str(out), quiet=2, legacy=True, force=True):
        raise TitoError(f"byte-compiling the reference package {lib} failed")
    for src in out.rglob("*.py"):
        src.unlink()
    return out


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def prune_package(pkg: Path, keep: set[str], own: list[str]) -> list[str]:
    """Delete from `pkg` (a package folder) every compiled module not in `keep` (the student's own
    modules, sources, are kept anyway); returns the modules removed."""
    removed = []
    lib = pkg.name
    for f in sorted(pkg.rglob("*.pyc")):
        rel = f.relative_to(pkg.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if name not in keep and name not in own and name != lib:
            f.unlink()
            removed.append(name)
    return removed
