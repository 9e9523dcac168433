"""What a course notebook exports (nbdev's `#| default_exp NAME`, `#| export`, `#| export NAME`): the module each
cell goes to, the modules a notebook writes, the names an exported cell defines and the imports it makes (the judge
runs those itself), the files nbdev needs before it exports, and how many public names each exported file holds
(`tito status`, `module complete`, the student kit).

    >>> cells = [{"cell_type": "code", "source": "#| default_exp stats"},
    ...          {"cell_type": "code", "source": "#| export\\nimport math\\ndef mean(xs): return sum(xs) / len(xs)"}]
    >>> notebook_modules({"cells": cells}, "tinytorch"), split_exported(cells[1]["source"], set())
    (['tinytorch.stats'], ('import math', ['mean']))
"""
from __future__ import annotations

import ast
import contextlib
import io
import os
import re
from pathlib import Path

from tito.notebooks.cells import cell_source, plain_python
from tito.notebooks.nbfile import read_notebook

_EXPORT = re.compile(r"^\s*#\|\s*export[si]?\b[ \t]*([\w.]*)", re.M)
_DEFAULT_EXP = re.compile(r"^\s*#\|\s*default_exp\s+([\w.]+)", re.M)


def default_exp(nb: dict) -> str | None:
    """The notebook's default module (its `#| default_exp NAME`), None without one."""
    for cell in nb.get("cells", []):
        m = _DEFAULT_EXP.search(cell_source(cell)) if cell.get("cell_type") == "code" else None
        if m:
            return m.group(1)
    return None


def exported_module(source: str, default: str | None) -> str | None:
    """Module an nbdev cell (its text) exports to: its `#| export NAME` or the notebook's default module; None
    when the cell is not exported."""
    m = _EXPORT.search(source)
    return (m.group(1) or default) if m else None


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
    tree = ast.parse(plain_python(source))
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


def prepare_cell_export_targets(nb_path: Path, lib: Path) -> list[Path]:
    """Give nbdev a file for each module the notebook's cells send code to (`#| export NAME`,
    NAME not its default_exp): nbdev appends such cells to an existing module and fails when the
    file is missing, so a module made only of them (`benchmarking.pareto`, from suite_dev) would
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


class ExportError(Exception):
    """nbdev could not export a notebook: which one (`notebook`), and nbdev's own output (`output`)."""

    def __init__(self, notebook: Path, error: Exception, output: str):
        super().__init__(f"export of {Path(notebook).name} failed: {type(error).__name__}: {error}")
        self.notebook, self.output = Path(notebook), output


def nbdev_export(notebooks: list[Path], lib: Path, root: Path) -> None:
    """nbdev's export of `notebooks` into the package folder `lib`, run from the course `root` (nbdev reads
    [tool.nbdev] from its pyproject.toml), each module made only of `#| export NAME` cells prepared first; nbdev's
    output is kept off the console. ExportError when it fails."""
    from nbdev.export import nb_export

    buf, cwd, nb = io.StringIO(), os.getcwd(), Path(root)
    try:
        for nb in notebooks:
            prepare_cell_export_targets(Path(nb), lib)
        os.chdir(root)
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            for nb in notebooks:
                nb_export(str(nb), lib_path=str(lib))
    except Exception as e:  # noqa: BLE001 - nbdev raises many kinds: the caller decides (retry, report)
        raise ExportError(nb, e, buf.getvalue()) from e
    finally:
        os.chdir(cwd)


def exported_files(nb_paths: list[Path], lib_dir: Path) -> list[tuple[Path, int]]:
    """(exported file, number of names in its __all__) for each module the notebooks export to:
    each `#| default_exp NAME` and each `#| export NAME`, once."""
    out = []
    for nb in nb_paths:
        for c in read_notebook(nb).get("cells", []):
            src = cell_source(c)
            for mod in [m.group(1) for m in _DEFAULT_EXP.finditer(src)] + [m.group(1) for m in _EXPORT.finditer(src)]:
                f = Path(lib_dir) / (mod.replace(".", "/") + ".py")
                if mod and all(f != g for g, _ in out):
                    out.append((f, count_all(f)))
    return out


def count_all(py: Path) -> int:
    """len(__all__) of a python file, read with ast (-1 if the file or __all__ is missing)."""
    if not py.exists():
        return -1
    for node in ast.parse(py.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            try:
                return len(ast.literal_eval(node.value))
            except ValueError:
                return -1
    return -1
