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
import contextlib
import copy
import io
import os
import re
import shutil
from pathlib import Path

from tito.config import TitoError
from tito.notebooks.named_stubs import replace_regions
from tito.notebooks.cells import cell_source, nbgrader_meta
from tito.notebooks.nbfile import read_notebook, write_notebook

_EXPORT = re.compile(r"^\s*#\|\s*export[si]?\b[ \t]*([\w.]*)", re.M)
_DEFAULT_EXP = re.compile(r"^\s*#\|\s*default_exp\s+([\w.]+)", re.M)
_STUB_HEAD = 'NotImplementedError("not yet implemented: '


def compiles(source: str) -> str | None:
    """None when `source` (its IPython magics made plain Python) is valid Python; else the error.

    >>> compiles("x = (") is not None, compiles("%time x = 1") is None
    (True, True)
    """
    try:
        ast.parse(without_magics(source))
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
            cell["source"] = without_magics(text)
        else:
            msg = f"your code does not compile ({why}): "
            cell["source"] = replace_regions(cell_source(cell), gid)[0].replace(
                _STUB_HEAD, 'SyntaxError("' + msg.replace('"', "'"))
    return out


_DIRECTIVE = re.compile(r"^\s*#\s*\|")


def with_directives_of(instructor: str, student: str) -> str:
    """The student's cell with the instructor's nbdev directives (`#| export ...`) instead of its
    own: where a cell's code goes is the course's decision, never the submission's (a student's
    `#| export ../../x` would otherwise name a file outside the package).

    >>> with_directives_of("#| export\ndef f(): ...", "#| export ../../x\ndef f(): return 1")
    '#| export\ndef f(): return 1'
    """
    theirs = [l for l in instructor.split("\n") if _DIRECTIVE.match(l)]
    mine = [l for l in student.split("\n") if not _DIRECTIVE.match(l)]
    return "\n".join(theirs + mine)


def without_magics(source: str) -> str:
    """`source` with IPython magics made plain Python for the exported module: `%time STMT` and
    `%timeit STMT` become STMT, other magics and shell lines `pass` (a `%time` left in a solution
    must not make the whole module fail to import). Unchanged when there is none.

    >>> without_magics("def f():\n    %time x = 1\n    return x")
    'def f():\n    x = 1\n    return x'
    """
    if not any(l.lstrip().startswith(("%", "!")) for l in source.split("\n")):
        return source
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return source

    class Plain(ast.NodeTransformer):
        def visit_Expr(self, node):
            call = node.value
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr in ("run_line_magic", "run_cell_magic", "system", "getoutput")):
                args = [a.value for a in call.args if isinstance(a, ast.Constant)]
                if call.func.attr == "run_line_magic" and len(args) == 2 and args[0] in ("time", "timeit"):
                    try:
                        return ast.parse(args[1]).body or ast.Pass()
                    except SyntaxError:
                        return ast.Pass()
                if call.func.attr == "run_cell_magic" and len(args) == 3 and args[0] in ("time", "timeit", "capture"):
                    try:
                        return ast.parse(args[2]).body or ast.Pass()
                    except SyntaxError:
                        return ast.Pass()
                return ast.Pass()
            return node

        def visit_Assign(self, node):  # x = %time f()  ->  x = f()
            call = node.value
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "run_line_magic" and len(call.args) == 2
                    and all(isinstance(a, ast.Constant) for a in call.args) and call.args[0].value in ("time", "timeit")):
                try:
                    node.value = ast.parse(call.args[1].value, mode="eval").body
                except SyntaxError:
                    pass
            return node

    new = ast.fix_missing_locations(Plain().visit(tree))
    head = [l for l in source.split("\n") if _DIRECTIVE.match(l)]
    return "\n".join(head + [ast.unparse(new)])


def exported_module(cell_source: str, default_exp: str | None) -> str | None:
    """Module an nbdev cell exports to (its `#| export NAME` or the notebook's default_exp); None
    when the cell is not exported."""
    m = _EXPORT.search(cell_source)
    if not m:
        return None
    return m.group(1) or default_exp


def default_exp(nb: dict) -> str | None:
    for cell in nb.get("cells", []):
        m = _DEFAULT_EXP.search(cell_source(cell)) if cell.get("cell_type") == "code" else None
        if m:
            return m.group(1)
    return None


def prepare_cell_export_targets(nb_path: Path, lib: Path) -> list[Path]:
    """Give nbdev a file for each module the notebook's cells send code to (`#| export NAME`,
    NAME not its default_exp): nbdev appends such cells to an existing module and fails when the
    file is missing, so a module made only of them (`benchmarking.report`, from suite_dev) would
    never be created. A missing file, or one whose header names this notebook as the file to edit,
    is (re)written as an empty module; another notebook's module is left alone. Returns them."""
    nb_path, written = Path(nb_path), []
    nb = read_notebook(nb_path)
    exp = default_exp(nb)
    targets = {exported_module(cell_source(c), exp) for c in nb.get("cells", []) if c.get("cell_type") == "code"}
    for mod in sorted(t for t in targets if t and t != exp):
        f = Path(lib) / (mod.replace(".", "/") + ".py")
        head = f.read_text(encoding="utf-8").split("\n", 1)[0] if f.exists() else ""
        if f.exists() and not re.search(rf"[ /]{re.escape(nb_path.name)}\.$", head):
            continue
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"# AUTOGENERATED! DO NOT EDIT! File to edit: {os.path.relpath(nb_path, f.parent)}.\n\n"
                     "# %% auto #0\n__all__ = []\n", encoding="utf-8")
        written.append(f)
    return written


def _export(nb_path: Path, lib: Path, nbdev_root: Path) -> None:
    from nbdev.export import nb_export

    prepare_cell_export_targets(nb_path, lib)
    buf = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(nbdev_root)  # nbdev reads [tool.nbdev] from the course's pyproject.toml
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            nb_export(str(nb_path), lib_path=str(lib))
    finally:
        os.chdir(cwd)


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
            _export(nb_path, scratch / "lib", nbdev_root)
            break
        except Exception as e:  # noqa: BLE001 - nbdev raises many kinds; retried with stubs, then reported
            last = e
    else:
        raise TitoError(f"export of {name} failed: {type(last).__name__}: {last}")
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
    limited to the modules a notebook imports, see `needed_modules`.)"""
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


def module_imports(lib: Path) -> dict[str, list[str]]:
    """Course module -> the course modules its source imports (absolute and relative imports), read
    from the package's sources.

    >>> sorted(module_imports(Path("tinytorch")))[:1]   # doctest: +SKIP
    ['tinytorch']
    """
    lib = Path(lib)
    out = {}
    for f in sorted(lib.rglob("*.py")):
        rel = f.relative_to(lib.parent).with_suffix("")
        parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
        name = ".".join(parts)
        package = parts if rel.name == "__init__" else parts[:-1]
        out[name] = sorted(imported_modules(f.read_text(encoding="utf-8"), lib.name, package))
    return out


def imported_modules(source: str, lib: str, package: list[str] | None = None) -> set[str]:
    """The modules of package `lib` that `source` imports (`package`: where `source` lives, for
    relative imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level and package is not None:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # `from pkg import module`
    return {m for m in found if m == lib or m.startswith(lib + ".")}


def needed_modules(graph: dict[str, list[str]], start: set[str]) -> set[str]:
    """`start` and every course module it imports, directly or not, with their packages."""
    seen: set[str] = set()
    todo = [m for m in start if m in graph]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in graph]
        todo += [d for d in graph.get(m, []) if d in graph]
    return seen


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
