"""tito's layout (issue 34): one package per job, read from the source, nothing imported.

- no two modules share a file name (two `judge.py` made every traceback and grep ambiguous);
- every `tito` import, also one inside a function (run only on some path), names a module that exists
  and a name that module defines;
- no private name crosses a module: not imported, not read as `module._name`;
- the packages import each other without a circle, so each can be read from the ground up.
"""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

TITO = Path(__file__).resolve().parents[1] / "tito"
ENTRY_POINTS = {"__init__.py", "__main__.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(TITO.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in TITO.rglob("*.py")}


def defined_names(path: Path) -> set[str]:
    """Names bound at the top level of a module (also inside top-level if/try blocks)."""
    names, todo = set(), list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
    return names


def tito_imports(path: Path):
    """(line, module, name or None, alias) for every absolute import of tito in `path`."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "tito":
            for a in node.names:
                yield node.lineno, node.module, a.name, a.asname or a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tito":
                    yield node.lineno, a.name, None, a.asname


def package_of(module: str) -> str:
    """The job a module belongs to: tito.grading.host -> grading; tito.cli -> cli."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tito"


def test_no_two_modules_share_a_name():
    names = Counter(p.name for p in MODULES.values() if p.name not in ENTRY_POINTS)
    assert not [n for n, c in names.items() if c > 1], sorted(
        str(p.relative_to(TITO)) for p in MODULES.values() if names[p.name] > 1)


def test_every_tito_import_resolves():
    wrong = []
    for mod, path in MODULES.items():
        for line, target, name, _ in tito_imports(path):
            where = f"{path.relative_to(TITO.parent)}:{line}"
            if target not in MODULES:
                wrong.append(f"{where}: no module {target}")
            elif name is not None and f"{target}.{name}" not in MODULES and name not in defined_names(MODULES[target]):
                wrong.append(f"{where}: {target} defines no {name}")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_crosses_a_module():
    crossing = []
    for mod, path in MODULES.items():
        imported_modules = set()
        for line, target, name, alias in tito_imports(path):
            if name is not None and name.startswith("_") and not name.startswith("__"):
                crossing.append(f"{path.relative_to(TITO.parent)}:{line}: imports {target}.{name}")
            if name is not None and f"{target}.{name}" in MODULES:
                imported_modules.add(alias)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported_modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                crossing.append(f"{path.relative_to(TITO.parent)}:{node.lineno}: reads {node.value.id}.{node.attr}")
    assert not crossing, "\n".join(crossing)


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for mod, path in MODULES.items():
        here = package_of(mod)
        for _, target, name, _ in tito_imports(path):
            full = f"{target}.{name}" if name is not None and f"{target}.{name}" in MODULES else target
            there = package_of(full)
            if there not in (here, "tito"):
                graph.setdefault(here, set()).add(there)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle's path found by a depth-first walk (empty when the graph has none)."""
    found, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return found


def test_the_circle_finder_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": {"c"}}) == []


def test_packages_import_each_other_without_a_circle():
    graph = package_graph()
    assert {"isolation", "grading", "olympics", "notebooks", "workspace", "commands"} <= set(graph) | {
        t for ts in graph.values() for t in ts}, graph
    assert not circles(graph), circles(graph)
    # the shared ground imports none of the jobs built on it
    assert not graph.get("isolation", set()) - {"config"}, graph.get("isolation")


# ---- one part, one place (issue 45): each rule a checker of (path, source), held against a planted fault ---------

NOTEBOOK_READERS = {("json", "load"), ("json", "loads"), ("nbformat", "read"), ("nbformat", "reads"),
                    ("jupytext", "read"), ("jupytext", "reads")}
_NOTEBOOKISH = __import__("re").compile(r"ipynb|notebook|\bnb\b|\bnb_|_nb\b")


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def notebook_reads(rel: str, source: str) -> list[str]:
    """A notebook read outside tito/notebooks/: nbformat's or jupytext's reader, or json's on a line about a notebook."""
    if rel.startswith("notebooks/"):
        return []
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            pair = (node.func.value.id, node.func.attr)
            if pair in NOTEBOOK_READERS and (pair[0] != "json" or _NOTEBOOKISH.search(lines[node.lineno - 1])):
                out.append(f"{rel}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return out


def proc_walks(rel: str, source: str) -> list[str]:
    """/proc read outside tito/isolation/ (a process's own /proc/self and the GPU driver's entry excepted)."""
    if rel.startswith("isolation/"):
        return []
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
            and __import__("re").search(r"(^|[^\w])/proc(/|$)", n.value)
            and not n.value.startswith(("/proc/self/", "/proc/driver/"))]


def bwrap_mentions(rel: str, source: str) -> list[str]:
    """The sandbox's own tool named outside tito/isolation/ (code, comment or docstring): swapping it must touch
    isolation/ only."""
    if rel.startswith("isolation/"):
        return []
    return [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(source.splitlines(), 1) if "bwrap" in line.lower()]


def _field_defaults(path: Path, cls: str) -> dict[str, object]:
    node = next(n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {s.target.id: s.value.value for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, int)}


SETTINGS = {**_field_defaults(TITO / "config.py", "Course"), **_field_defaults(TITO / "isolation" / "sandbox.py", "Limits")}


def settings_written_twice(rel: str, source: str) -> list[str]:
    """A settings default (a field of config.Course or sandbox.Limits) written again: as a default in Course.load,
    as a command-line option's literal default, or as a constant beside a comment naming settings.ini."""
    tree, out = ast.parse(source), []
    values = set(SETTINGS.values())
    for node in ast.walk(tree):
        if rel == "config.py" and isinstance(node, ast.FunctionDef) and node.name == "load":
            out += [f"{rel}:{n.lineno}: load's default {n.value!r}" for n in ast.walk(node) if isinstance(n, ast.Constant)
                    and (isinstance(n.value, int) and not isinstance(n.value, bool) or str(n.value).isdigit())]
        if (rel == "cli.py" or rel.startswith("commands/")) and isinstance(node, ast.Call) \
                and getattr(node.func, "attr", None) == "add_argument":
            out += [f"{rel}:{node.lineno}: option default {k.value.value!r}" for k in node.keywords if k.arg == "default"
                    and isinstance(k.value, ast.Constant) and k.value.value in values and not isinstance(k.value.value, bool)]
    for i, line in enumerate(source.splitlines(), 1):  # a constant that repeats the default of the setting it names
        m = __import__("re").match(r"\s*[A-Z_]+\s*=\s*([\d_]+)\.?0*\s*#.*settings\.ini(?:'s)?\W+(\w+)", line)
        if m and SETTINGS.get(m.group(2)) == int(m.group(1)):
            out.append(f"{rel}:{i}: {line.strip()}")
    return out


RULES = {"notebook read": notebook_reads, "/proc walk": proc_walks, "bwrap mention": bwrap_mentions,
         "settings default written twice": settings_written_twice}
PLANTED = {  # one fault each rule must catch (and the place where the same code is allowed, where there is one)
    "notebook read": ("grading/x.py", "import json\nnb = json.loads(open('a.ipynb').read())\n", "notebooks/x.py"),
    "/proc walk": ("olympics/x.py", "import os\ndef f(pid):\n    return open(f'/proc/{pid}/stat').read()\n",
                   "isolation/x.py"),
    "bwrap mention": ("grading/x.py", "def f(box):\n    return box  # was the bwrap path\n", "isolation/x.py"),
    "settings default written twice": ("commands/x.py", "def add(s):\n    s.add_argument('--m', type=int, default=6144)\n",
                                       None),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_one_part_one_place(rule):
    """Issue 45: notebooks are read in tito/notebooks/, /proc is walked and the sandbox's tool named in
    tito/isolation/, and a settings default is written once (its dataclass field)."""
    check = RULES[rule]
    found = [hit for path in sorted(TITO.rglob("*.py")) for hit in check(path.relative_to(TITO).as_posix(),
                                                                         path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)
    where, fault, allowed = PLANTED[rule]
    assert check(where, fault), f"the {rule} rule missed its planted fault"
    if allowed:
        assert not check(allowed, fault)
    if rule == "settings default written twice":
        assert check("config.py", "class C:\n    def load(cls):\n        return int(get('cell_timeout', '300'))\n")
        assert check("olympics/x.py", "MEMORY_MB = 16384  # settings.ini's olympics_memory_mb\n")
