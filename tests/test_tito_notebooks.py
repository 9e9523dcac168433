"""tito's notebook toolkit (issue 45): one magic stripper, one region scanner and secret-line rule, one reader with
limits, one package import graph. Fast: no sandbox, no kernel (the class run's `magic` student, graded end to end,
is in test_grading.py)."""
from __future__ import annotations

import json

import pytest

from tito.grading import package, plan
from tito.isolation.untrusted import Refused
from tito.notebooks import regions
from tito.notebooks.cells import plain_python
from tito.notebooks.imports import module_files, package_graph, reach
from tito.notebooks.nbfile import parse_notebook, read_notebook, write_notebook
from tito.workspace.complete import code_text


def _notebook(body: str) -> dict:
    """A course notebook whose solution cell computes `total` with `body` (a line of the student's)."""
    meta = {"nbgrader": {"solution": True, "grade": False, "grade_id": "total", "schema_version": 3}}
    return {"cells": [
        {"cell_type": "code", "metadata": {}, "source": "#| default_exp stats"},
        {"cell_type": "code", "metadata": meta, "source": f"#| export\ndef total(xs):\n    ### BEGIN SOLUTION\n"
                                                          f"{body}\n    return x\n    ### END SOLUTION"},
        {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "t", "points": 1}},
         "source": "%time got = total([1, 2])\nassert got == 3"}]}


def test_a_time_magic_in_a_solution_grades_as_the_plain_line():
    """`%time x = f()` in a solution cell: the export (what the host imports), the judge's plans and the inline
    tests (`module complete`) all run `x = f()`, line for line. Before issue 45 the export made it `x = f()` and the
    inline tests `pass` (so `x` was undefined there while grading passed)."""
    plain, magic = _notebook("    x = sum(xs)"), _notebook("    %time x = sum(xs)")
    source = _notebook("    x = 0")
    assert package.merged_notebook(source, magic) == package.merged_notebook(source, plain)
    assert code_text(magic, "tinytorch") == code_text(plain, "tinytorch")
    assert code_text(magic) == code_text(plain)
    assert plan.judge_plan(magic, "tinytorch") == plan.judge_plan(plain, "tinytorch")
    test = next(c for c in plan.judge_plan(magic, "tinytorch")["cells"] if c["kind"] == "test")
    assert test["source"].splitlines()[0] == "got = total([1, 2])"  # the test's own `%time`, line 1 still


@pytest.mark.parametrize("source, expected", [
    ("y = ('a %s'\n     % x)", "y = ('a %s'\n     % x)"),              # a continuation line is no magic
    ('s = """\n!not a shell line\n"""', 's = """\n!not a shell line\n"""'),  # nor a line of a string
    ("%%time\nx = 1", "pass\nx = 1"), ("%%bash\nls", "pass\n"),         # a timed cell runs, a shell cell does not
    ("x = %timeit -n 3 f()", "x = f()"), ("!pip install x", "pass"),
])
def test_plain_python_keeps_lines_and_strings(source, expected):
    assert plain_python(source) == expected
    assert len(plain_python(source).split("\n")) == len(source.split("\n"))


def test_one_scanner_and_the_secret_rules():
    """The release's leak check and the student kit take secret lines from one scanner; the release checks every
    non-trivial line of a copy of its notebook, the kit (which searches arbitrary files) only distinctive ones."""
    text = "x = 1\n### BEGIN SOLUTION\nreturn float(np.median(samples))\nos.replace(tmp, path)\n### END SOLUTION\n" \
           "    ### BEGIN HIDDEN TESTS\n    assert f(3) == 9\n    ### END HIDDEN TESTS"
    kinds = [(k, marker) for _, k, _, marker in regions.scan(text)]
    assert kinds[0] == (None, False) and kinds[1] == ("solution", True) and kinds[-1] == ("hidden", True)
    assert regions.hidden_ranges(text) == [(6, 8)]
    assert regions.distinctive("return float(np.median(samples))") and not regions.distinctive("os.replace(tmp, path)")
    assert not regions.distinctive("for name in names_of_the_files:")  # a bare header says nothing
    line = "total_of_the_values = sum(xs)"  # an answer in its notebook's copy; too common to search files for
    assert regions.answer_line(line) and not regions.distinctive(line)
    assert not regions.answer_line("# the mean of xs") and not regions.answer_line("finally:")


def test_the_reader_refuses_a_bloated_notebook(tmp_path):
    """A submitted notebook is read with limits (values counted before parsing, cells, nesting); a course's own
    is read as it is; writing is atomic (no temporary file is left)."""
    with pytest.raises(Refused, match="JSON values"):
        parse_notebook(b'{"cells": [' + b"{}," * 600_000 + b"{}]}")
    with pytest.raises(Refused, match="nested deeper"):
        parse_notebook(b'{"cells": [], "m": ' + b"[" * 80 + b"]" * 80 + b"}")
    nb = _notebook("    x = 1")
    write_notebook(tmp_path / "a.ipynb", nb)
    assert read_notebook(tmp_path / "a.ipynb") == nb and [p.name for p in tmp_path.iterdir()] == ["a.ipynb"]
    kept = read_notebook(tmp_path / "a.ipynb", untrusted_mb=1)
    assert all(set(c) <= {"cell_type", "source", "metadata", "id"} for c in kept["cells"])
    (tmp_path / "b.ipynb").symlink_to(tmp_path / "a.ipynb")
    with pytest.raises(Refused, match="symbolic link"):
        read_notebook(tmp_path / "b.ipynb", untrusted_mb=1)


def test_one_import_graph_for_grading_and_module_complete(tmp_path):
    """The graph grading prunes the reference by is the one `module complete` keys its cache by: imports (relative
    too), `from pkg import module`, and a module named in a string (a lazy import)."""
    pkg = tmp_path / "lib"
    (pkg / "sub").mkdir(parents=True)
    for rel, text in {"__init__.py": "", "a.py": "from .sub import b\n", "sub/__init__.py": "",
                      "sub/b.py": "import importlib\nM = 'lib.c'\n", "c.py": "", "d.py": ""}.items():
        (pkg / rel).write_text(text)
    graph = package_graph(module_files(pkg))
    assert reach({"lib.a"}, graph) == {"lib", "lib.a", "lib.sub", "lib.sub.b", "lib.c"}
    assert json.loads(json.dumps({m: sorted(d) for m, d in graph.items()}))  # what RunSettings.imports carries
