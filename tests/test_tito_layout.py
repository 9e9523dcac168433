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
