"""The exported package's import graph, read from its sources (nothing imported): the one place tito computes which
course modules a piece of code can reach. Grading keeps only those of the reference (`reach`), `module complete`
keys its cache by them, and its test selection follows a name to the module that defines it (`defining_module`).

An edge is an import (absolute or relative, `from pkg import module` too) or a string naming a module (a lazy
import); importing `a.b.c` reaches its packages `a` and `a.b`.

    >>> graph = {"p": set(), "p.a": {"p.b"}, "p.b": set(), "p.c": set()}
    >>> sorted(reach({"p.a"}, graph))
    ['p', 'p.a', 'p.b']
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Callable, Iterable, Mapping


def module_files(lib_dir: Path) -> dict[str, Path]:
    """{"tinytorch.benchmarking.results": its file, "tinytorch.benchmarking": its __init__.py, ...}."""
    out = {}
    for f in sorted(Path(lib_dir).rglob("*.py")):
        parts = list(f.relative_to(Path(lib_dir).parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def resolve(module: str | None, level: int, package: str | None) -> str:
    """The absolute name of `from <level dots><module> import ...` written in `package`."""
    if not level:
        return module or ""
    parts = (package or "").split(".")
    parts = parts[:len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*parts, *([module] if module else [])])


def named_modules(source: str, known: Mapping | set, package: str | None = None) -> set[str]:
    """The modules of `known` that `source` imports or names in a string (a lazy import), with relative imports
    resolved against `package`; a source that does not parse is read by name.

    >>> sorted(named_modules("from tinytorch.a import b\\nx = 'tinytorch.c'", {"tinytorch.a", "tinytorch.a.b", "tinytorch.c"}))
    ['tinytorch.a', 'tinytorch.a.b', 'tinytorch.c']
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {m for m in re.findall(r"\b\w+(?:\.\w+)+", source) if m in known}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.module, node.level, package)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            out.add(node.value)
    return {m for m in out if m in known}


def package_graph(files: Mapping[str, Path],
                  named: Callable[[str, Mapping | set, str], set[str]] | None = None) -> dict[str, set[str]]:
    """Each module of the package (`module_files`) -> the modules of the package its file names. `named`: what
    reads one file, `named_modules` by default (`module complete` passes one that remembers each file's answer
    by its content's hash)."""
    graph = {}
    for mod, f in files.items():
        pkg = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        graph[mod] = (named or named_modules)(f.read_text(encoding="utf-8"), files, pkg)
    return graph


def reach(start: Iterable[str], graph: Mapping[str, Iterable[str]]) -> set[str]:
    """`start` closed over `graph`, with every parent package (importing a.b.c runs a and a.b)."""
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m in seen or m not in graph:
            continue
        seen.add(m)
        todo.extend(graph[m])
        parts = m.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
    return seen


def defining_module(module: str, name: str, files: Mapping[str, Path], _seen: frozenset = frozenset()) -> str:
    """The package module that defines `name` as `module` exposes it: a submodule, a re-export followed to
    its source, or `module` itself.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.py").write_text("from .b import X\\n"); _ = (d / "b.py").write_text("X = 1\\n")
    >>> defining_module("p.a", "X", {"p.a": d / "a.py", "p.b": d / "b.py"})
    'p.b'
    """
    if f"{module}.{name}" in files:
        return f"{module}.{name}"
    f = files.get(module)
    if f is None or module in _seen:
        return module
    try:
        imports = top_imports(f.read_text(encoding="utf-8"))
    except OSError:
        return module
    package = module if f.name == "__init__.py" else module.rpartition(".")[0]
    for mod, level, names in imports or ():
        src = resolve(mod, level, package)
        for a_name, asname in names:
            if (asname or a_name) == name and src in files:
                return defining_module(src, a_name, files, _seen | {module})
    return module


@functools.lru_cache(maxsize=1024)
def top_imports(text: str) -> tuple[tuple[str | None, int, tuple[tuple[str, str | None], ...]], ...] | None:
    """The module-level `from ... import ...` statements of `text` as (module, level, ((name, asname), ...)); None
    when it does not parse. Parsed once a run: `module complete` follows every name of 17 test files through the
    same package files (230 parses of them a run before, 1.5 s of CPU).

    >>> top_imports("from .a import b as c, d")
    (('a', 1, (('b', 'c'), ('d', None))),)
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return tuple((n.module, n.level, tuple((a.name, a.asname) for a in n.names))
                 for n in tree.body if isinstance(n, ast.ImportFrom))
