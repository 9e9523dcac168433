"""Which package files a course's notebooks export into (`#| default_exp`, `#| export NAME`), and how many
public names each holds: what `tito status`, `module complete` and the student kit count."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tito.notebooks.cells import cell_source
from tito.notebooks.nbfile import read_notebook

# a notebook's default module, and any other module one of its cells sends code to (`#| export NAME`)
_DEFAULT_EXP = re.compile(r"^#\|\s*(?:default_exp|export[si]?)[ \t]+([\w.]+)", re.M)


def exported_files(nb_paths: list[Path], lib_dir: Path) -> list[tuple[Path, int]]:
    """(exported file, number of names in its __all__) for each module the notebooks export to:
    each `#| default_exp NAME` and each `#| export NAME`, once."""
    out = []
    for nb in nb_paths:
        data = read_notebook(nb)
        for c in data.get("cells", []):
            for m in _DEFAULT_EXP.finditer(cell_source(c)):
                f = Path(lib_dir) / (m.group(1).replace(".", "/") + ".py")
                if all(f != g for g, _ in out):
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
