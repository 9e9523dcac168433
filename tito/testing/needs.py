"""Which package modules each test of a pytest file calls, read from its source (no import).

`module complete` runs a test of an integration file as soon as the notebooks exporting what that
test reaches have passed, rather than waiting until every notebook the file names has passed: a
student finishing notebooks 1-3 gets the tests of notebooks 1-3 from a file that also tests notebook 9.

A test's modules: the package modules behind the names its body, its decorators, the file's helper
functions and fixtures it uses (closed over each other) refer to, its own imports, and module names
in strings. A name imported from a facade (`from tinytorch.benchmarking.benchmark import Benchmark`)
counts as the module that defines it (`tinytorch.benchmarking.harness`), followed through plain
re-exports. What module-level statements other than imports and definitions use counts for every test.
"""
from __future__ import annotations

import ast
from pathlib import Path

from tito.notebooks.imports import defining_module


def _imports_in(code: str) -> set[str]:
    """The modules a string of Python code imports, when the string is code (`python -c CODE` in a subprocess, which
    runs the package's code where no import of the test's own shows it); empty for any other string.

    >>> sorted(_imports_in("from p.a import f\\nimport q"))
    ['p.a', 'p.a.f', 'q']
    """
    if "import" not in code:
        return set()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out.update({n.module, *(f"{n.module}.{a.name}" for a in n.names)})
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
    return out


def _names(nodes: list[ast.AST]) -> tuple[set[str], set[str], set[str]]:
    """(names read, modules imported inside, string constants) anywhere under `nodes`; a string that is Python code
    counts by the modules it imports."""
    names, imports, strings = set(), set(), set()
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Name):
                names.add(n.id)
            elif isinstance(n, ast.arg):  # a parameter: a fixture, perhaps one of this file's
                names.add(n.arg)
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                imports.update(f"{n.module}.{a.name}" for a in n.names)
                imports.add(n.module)
            elif isinstance(n, ast.Import):
                imports.update(a.name for a in n.names)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                strings.add(n.value)
                imports |= _imports_in(n.value)
    return names, imports, strings


def test_modules(source: str, files: dict[str, Path],
                 other: dict[str, set[str]] | None = None) -> dict[str, set[str]] | None:
    """{test id (a function `test_x`, or a class `TestX`): the package modules it reaches}, None when the
    source does not parse. `other` maps a module outside the package (`tito.default_benchmark`) to the
    package modules it needs.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / "a.py").write_text("def f(): pass\\n")
    >>> src = "from p.a import f\\nimport pytest\\n@pytest.fixture\\ndef fx():\\n    return f()\\n" \\
    ...       "def test_one(fx):\\n    pass\\ndef test_two():\\n    assert 1\\n"
    >>> test_modules(src, {"p.a": d / "a.py"})
    {'test_one': {'p.a'}, 'test_two': set()}
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    other = other or {}
    imported: dict[str, set[str]] = {}   # a name bound by a module-level import -> the modules behind it
    defs: dict[str, ast.AST] = {}
    common: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                mods = {defining_module(node.module, a.name, files)} if node.module in files or \
                    f"{node.module}.{a.name}" in files else other.get(node.module, set())
                imported[a.asname or a.name] = mods
        elif isinstance(node, ast.Import):
            for a in node.names:
                key = a.asname or a.name.split(".")[0]
                imported[key] = imported.get(key, set()) | ({a.name} if a.name in files else other.get(a.name, set()))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        else:
            common.append(node)

    def direct(nodes: list[ast.AST]) -> tuple[set[str], set[str]]:
        names, imports, strings = _names(nodes)
        mods = {m for n in names for m in imported.get(n, ())}
        mods |= {m for m in imports | strings if m in files}
        mods |= {m for i in imports for m in other.get(i, ())}
        return mods, names

    base, _ = direct(common)
    out = {}
    for name, node in defs.items():
        if not (name.startswith("test_") or (isinstance(node, ast.ClassDef) and name.startswith("Test"))):
            continue
        mods, todo, seen = set(base), [name], set()
        while todo:  # the test, then the helpers and fixtures of this file it uses, and theirs
            n = todo.pop()
            if n in seen or n not in defs:
                continue
            seen.add(n)
            m, names = direct([defs[n]])
            mods |= m
            todo.extend(x for x in names if x in defs)
        out[name] = mods
    return out
