"""`tito module start` and `tito module complete` in a student workspace, on the real module 19.

The workspace keeps one notebook (optimize_dev: the graded task `sparsity` is the one under test; its
other tasks are filled with the course's solutions); the rest of the student's package comes from
the course's tinytorch/.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import submissions as subs
from tito.testing import kept_server
from tito.workspace import layout
from tito.workspace.complete import complete_workspace
from tito.workspace.start import start
from tito.notebooks.student_release import release
from tito.config import TitoError

MODULE = "19_benchmarking"
NOTEBOOK = "optimize_dev.ipynb"
TASK = "optimize-sparsity"
TESTS = ["test_19_optimize.py"]


@pytest.fixture(scope="module")
def released(release_19):
    assert not release_19.leaks
    return release_19.release_dir


def _progress(mod_dir: Path) -> dict:
    return json.loads((mod_dir / layout.PROGRESS).read_text())


def test_start_refuses_to_overwrite(course, released, tmp_path):
    ws = tmp_path / "ws"
    dest = start(course, MODULE, ws, release_dir=released)
    assert dest == (ws / MODULE).resolve()
    names = sorted(p.name for p in dest.glob("*.ipynb"))
    assert names == sorted(p.name for p in (released / MODULE).glob("*.ipynb")) and NOTEBOOK in names
    marker = json.loads((dest / layout.MARKER).read_text())
    assert marker["module"] == MODULE and marker["notebooks"] == [f"{s}.ipynb" for s in course.reading_order(MODULE)]
    assert sorted(marker["notebooks"]) == names and marker["notebooks"][0] == "results_dev.ipynb"
    assert "| 1 | `results_dev.ipynb` |" in (dest / "README.md").read_text()  # the reading order, where the student is
    assert (dest / layout.LAUNCHER / "__init__.py").is_file()
    work = dest / NOTEBOOK
    work.write_text(work.read_text().replace("not yet implemented: sparsity", "my own work"))
    with pytest.raises(TitoError, match="refusing to overwrite"):
        start(course, MODULE, ws, release_dir=released)
    assert "my own work" in work.read_text()  # untouched
    start(course, MODULE, ws, force=True, release_dir=released)
    assert "my own work" not in work.read_text()
    (backup,) = (ws / layout.SCRATCH / "backup").iterdir()
    assert "my own work" in (backup / NOTEBOOK).read_text()  # --force keeps the old work


def _workspace(course, released, tmp_path) -> Path:
    dest = start(course, MODULE, tmp_path / "ws", release_dir=released)
    for p in dest.glob("*.ipynb"):
        if p.name != NOTEBOOK:
            p.unlink()
    return dest


def _others_solved(blank: dict, course) -> dict:
    "The release notebook with every task but TASK filled with the course's solution."
    source = subs.load(course.nbs_dir / MODULE / NOTEBOOK)
    for grade_id in subs.solution_ids(blank):
        if grade_id != TASK:
            blank = subs.fill_solution(blank, source, grade_id)
    return blank


def _neuter_tests(nb: dict) -> dict:
    """A student who 'fixes' failing inline tests by emptying them."""
    for c in nb["cells"]:
        src = subs._src(c)
        names = re.findall(r"^def (test_unit_\w+)\(", src, re.M)
        if c["cell_type"] == "code" and names:
            c["source"] = "\n".join(f"def {n}():\n    pass\n" for n in names)
            c["metadata"].pop("nbgrader", None)
    return nb


def test_complete_in_workspace(course, released, tmp_path, capsys):
    dest = _workspace(course, released, tmp_path)
    ws = dest.parent
    nb_path = dest / NOTEBOOK
    blank = subs.load(nb_path)

    # 1. the release as it is: the stubs are reported by name, per task; the export still happens
    #    (the package is the student's code as it stands); the integration tests are skipped, saying why
    assert complete_workspace(course, MODULE, dest, TESTS) == 1
    out = capsys.readouterr().out
    assert "not yet implemented: sparsity" in out and "test-optimize-sparsity: 0/2 not attempted" in out
    last = _progress(dest)["last"]
    assert last["first_failure"].startswith(NOTEBOOK) and "not yet implemented: sparsity" in last["first_failure"]
    assert last["stages"]["inline tests"]["failed"] >= 1 and last["stages"]["inline tests"]["run"] > 1
    assert last["notebooks"][NOTEBOOK]["tasks"]["test-optimize-sparsity"]["status"] == "not attempted"
    assert last["integration"]["test_19_optimize.py"]["skipped"] == f"the inline tests of {NOTEBOOK} did not pass"
    assert 'raise NotImplementedError("not yet implemented: sparsity")' in \
        (ws / "tinytorch" / "benchmarking" / "optimize.py").read_text()
    assert not last["complete"]

    # 2. a wrong sparsity, inline tests emptied: the export carries the student's code and the
    #    course's integration tests fail against it
    wrong = _neuter_tests(subs.replace_stub(_others_solved(blank, course), TASK, "return 0.0  # student: wrong on purpose"))
    subs.save(wrong, nb_path)
    assert complete_workspace(course, MODULE, dest, TESTS) == 1
    exported = ws / "tinytorch" / "benchmarking" / "optimize.py"
    assert "return 0.0  # student: wrong on purpose" in exported.read_text()
    assert (ws / "tinytorch" / "benchmarking" / "benchmark.py").read_text() == \
        (course.lib_dir / "benchmarking" / "benchmark.py").read_text()  # the rest: the course's package
    last = _progress(dest)["last"]
    assert last["stages"]["inline tests"]["failed"] == 0 and last["stages"]["export"]["passed"] == 1
    it = last["stages"]["integration tests"]
    assert it["failed"] >= 1 and it["run"] > it["failed"], it
    assert "test_19_optimize" in last["first_failure"]
    assert not _progress(dest)["completed"]

    # 3. a correct solution, through the CLI from inside the workspace: every test passes, but a
    #    --tests subset never records the module complete
    subs.save(subs.fill_solution(_others_solved(blank, course), subs.load(course.nbs_dir / MODULE / NOTEBOOK), TASK),
              nb_path)
    p = subprocess.run([sys.executable, "-m", "tito", "module", "complete", "19", "--tests", *TESTS],
                       cwd=dest, capture_output=True, text=True)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    assert f"module {MODULE} NOT complete: only the test files matching {TESTS[0]} ran" in p.stdout
    assert "test-optimize-sparsity: 2/2 passed" in p.stdout and "0 failed" in p.stdout
    prog = _progress(dest)
    assert not prog["completed"] and not prog["last"]["complete"] and len(prog["history"]) == 3
    assert prog["last"]["stages"]["integration tests"]["failed"] == 0
    assert prog["last"]["stages"]["integration tests"]["passed"] == it["run"]
    assert "return 0.0" not in exported.read_text()


# ---- the incremental, per-task `module complete`, on a three-notebook course ----------------
#
# zeta_dev exports mini_base (square), alpha_dev imports it and exports mini_user (quad = square of
# square), mid_dev exports mini_leaf (neg) and needs nothing. The README's reading order is zeta,
# alpha, mid (not alphabetical). Each notebook appends its name to $MINI_RUNS when it executes:
# a record of executions that does not come from tito.

from tito.workspace import complete as cmpl  # noqa: E402
from tito.commands import export as export_cmd  # noqa: E402
from tito.config import Course  # noqa: E402

MINI = "07_mini"
_RUNS_CELL = '''
# %%
import os
if os.environ.get("MINI_RUNS"):
    with open(os.environ["MINI_RUNS"], "a") as _f:
        _f.write("{name}\\n")
'''
MINI_SRC = {
    "zeta_dev": '''# %%
#| default_exp mini_base
''' + _RUNS_CELL.format(name="zeta") + '''
# %% nbgrader={"grade": false, "grade_id": "square", "solution": true, "schema_version": 3}
#| export
def square(x):
    ### BEGIN SOLUTION
    return x * x
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-square", "locked": true, "points": 3, "schema_version": 3}
def test_unit_square():
    assert square(3) == 9, f"square(3): expected 9, got {square(3)}"
''',
    "alpha_dev": '''# %%
#| default_exp mini_user
''' + _RUNS_CELL.format(name="alpha") + '''
# %%
#| export
from tinytorch.mini_base import square

# %% nbgrader={"grade": false, "grade_id": "quad", "solution": true, "schema_version": 3}
#| export
def quad(x):
    ### BEGIN SOLUTION
    return square(square(x))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-quad", "locked": true, "points": 4, "schema_version": 3}
def test_unit_quad():
    assert quad(2) == 16, f"quad(2): expected 16, got {quad(2)}"
''',
    "mid_dev": '''# %%
#| default_exp mini_leaf
''' + _RUNS_CELL.format(name="mid") + '''
# %% nbgrader={"grade": false, "grade_id": "neg", "solution": true, "schema_version": 3}
#| export
def neg(x):
    ### BEGIN SOLUTION
    return -x
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-neg", "locked": true, "points": 2, "schema_version": 3}
def test_unit_neg():
    assert neg(5) == -5, f"neg(5): expected -5, got {neg(5)}"
''',
}
MINI_TESTS = {
    "test_07_base.py": "from tinytorch.mini_base import square\n\n\ndef test_square():\n    assert square(4) == 16\n",
    "test_07_user.py": "from tinytorch.mini_user import quad\n\n\ndef test_quad():\n    assert quad(3) == 81\n",
    "test_07_leaf.py": "from tinytorch.mini_leaf import neg\n\n\ndef test_neg():\n    assert neg(1) == -1\n",
}
MINI_README = "| # | notebook | step |\n|---|---|---|\n| 1 | `zeta_dev` | a |\n| 2 | `alpha_dev` | b |\n| 3 | `mid_dev` | c |\n"


@pytest.fixture(scope="module")
def mini(root, tmp_path_factory):
    """The three-notebook course, exported and released."""
    d = tmp_path_factory.mktemp("mini")
    shutil.copy2(root / "pyproject.toml", d / "pyproject.toml")
    (d / "settings.ini").write_text(f"[course]\ncourse_id = mini\nmodules = {MINI}\nmodules_dir = modules\n"
                                    "nbs_dir = nbs\nrelease_dir = release\nnbgrader_dir = build/nbgrader\ncell_timeout = 60\n")
    (d / "modules" / MINI).mkdir(parents=True)
    for name, src in MINI_SRC.items():
        (d / "modules" / MINI / f"{name}.py").write_text(src)
    (d / "modules" / MINI / "README.md").write_text(MINI_README)
    (d / "tests").mkdir()
    for name, src in MINI_TESTS.items():
        (d / "tests" / name).write_text(src)
    (d / "tinytorch").mkdir()
    (d / "tinytorch" / "__init__.py").write_text("")
    export_cmd.export(d)
    course = Course.load(d)
    assert not release(course, MINI).leaks
    return course


def _mini_workspace(mini, tmp_path, solved: tuple[str, ...]) -> Path:
    dest = start(mini, MINI, tmp_path / "ws")
    for name in solved:  # the instructor's solution notebook as the student's work
        shutil.copy2(mini.nbs_dir / MINI / f"{name}.ipynb", dest / f"{name}.ipynb")
    return dest


def _complete(mini, dest, capsys, **kw) -> tuple[int, str, dict]:
    rc = cmpl.complete_workspace(mini, MINI, dest, preload=[], **kw)
    return rc, capsys.readouterr().out, _progress(dest)["last"]


def _runs(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _edit_code(nb_path: Path, grade_id: str, old: str, new: str) -> None:
    nb = subs.load(nb_path)
    cell = next(c for c in nb["cells"] if (c["metadata"].get("nbgrader") or {}).get("grade_id") == grade_id)
    src = subs._src(cell)
    assert old in src
    cell["source"] = src.replace(old, new)
    subs.save(nb, nb_path)


def test_complete_runs_only_what_changed(mini, tmp_path, capsys, monkeypatch):
    """Run after run, only what changed runs again; every run after the first is a session of one kept job server
    (tito.testing.kept_server, as a student's runs are), each with its own results."""
    runs = tmp_path / "runs.txt"
    monkeypatch.setenv("MINI_RUNS", str(runs))
    monkeypatch.setenv("TITO_KEEP_SERVER", "120")
    (tmp_path / "run").mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    dest = _mini_workspace(mini, tmp_path, ("zeta_dev", "alpha_dev", "mid_dev"))
    try:
        _runs_only_what_changed(mini, dest, runs, capsys, monkeypatch)
        assert len(kept_server.running(dest.parent)) == 1, "one server kept for every run of the workspace"
    finally:
        for pid in kept_server.running(dest.parent):
            os.kill(pid, signal.SIGKILL)


def _runs_only_what_changed(mini, dest, runs, capsys, monkeypatch):

    # 1. first run: everything runs, per-task points in reading order, complete
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0, out
    assert "the process that imports torch & co for the tests stays 2 min after this run" in out, out
    assert sorted(_runs(runs)) == ["alpha", "mid", "zeta"]
    assert last["complete"] and last["points"] == {"earned": 9.0, "possible": 9.0}
    report = out[out.index("== your notebooks, in reading order"):]
    assert report.index(" 1. zeta_dev.ipynb: passed, 3/3 points") < report.index(" 2. alpha_dev.ipynb") < \
        report.index(" 3. mid_dev.ipynb")
    assert "test-square: 3/3 passed" in out and "test-quad: 4/4 passed" in out
    assert {n: v["executions"] for n, v in last["notebooks"].items()} == {
        "zeta_dev.ipynb": 1, "alpha_dev.ipynb": 1, "mid_dev.ipynb": 1}
    assert all(not v["cached"] and v["passed"] == 1 for v in last["integration"].values()), last["integration"]
    assert last["integration"]["test_07_user.py"]["needs"] == ["alpha_dev.ipynb"]

    # tito's own reading of the files is kept by their hashes (ParseMemo): counted from here on
    parsed = {"notebooks": [], "test files": [], "digests": 0}
    read_nb, needs, digest = cmpl._read_notebook, cmpl.test_modules, cmpl._module_digest
    monkeypatch.setattr(cmpl, "_read_notebook", lambda p, f: parsed["notebooks"].append(p.name) or read_nb(p, f))
    monkeypatch.setattr(cmpl, "test_modules", lambda t, *a: parsed["test files"].append(t) or needs(t, *a))
    monkeypatch.setattr(cmpl, "_module_digest", lambda t: parsed.__setitem__("digests", parsed["digests"] + 1)
                        or digest(t))

    # 2. nothing changed: nothing executes, the results come from the cache, still complete
    rc, out, last = _complete(mini, dest, capsys)
    assert parsed == {"notebooks": [], "test files": [], "digests": 0}, "nothing changed: nothing is parsed again"
    assert rc == 0, out
    assert "stays 2 min" not in out, "said once, by the run that started the server"
    assert len(_runs(runs)) == 3, "a cache hit must not execute the notebook"
    assert all(v["cached"] and v["executions"] == 1 for v in last["notebooks"].values())
    assert all(v["cached"] for v in last["integration"].values()) and last["complete"]
    assert "test-neg: 2/2 passed" in out  # the report still shows every task

    # 3. a markdown edit (a written answer, say) changes no key
    nb = subs.load(dest / "zeta_dev.ipynb")
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "my notes", "id": "notes"})
    subs.save(nb, dest / "zeta_dev.ipynb")
    _complete(mini, dest, capsys)
    assert len(_runs(runs)) == 3
    assert parsed["notebooks"] == ["zeta_dev.ipynb"], "its file changed: read again (its key did not)"
    parsed.update({"notebooks": [], "test files": [], "digests": 0})

    # 4. an edit of the leaf: only it runs again, and only its test file
    _edit_code(dest / "mid_dev.ipynb", "neg", "return -x", "return 0 - x")
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0 and _runs(runs)[3:] == ["mid"]
    assert parsed["notebooks"] == ["mid_dev.ipynb"], "an edited notebook is parsed again, the others are not"
    assert parsed["test files"] == [], "no import of the package changed: the test files' needs are kept"
    assert parsed["digests"] == 1, "the edited module (mini_leaf) is digested again, no other"
    assert [n for n, v in last["integration"].items() if not v["cached"]] == ["test_07_leaf.py"]
    assert last["integration"]["test_07_leaf.py"]["early"], "started beside mid_dev, the one notebook running"

    # 5. an edit of zeta's exported code: zeta and alpha (which imports it) run again, mid does not
    _edit_code(dest / "zeta_dev.ipynb", "square", "return x * x", "return x ** 2")
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0 and sorted(_runs(runs)[4:]) == ["alpha", "zeta"]
    assert {n: v["executions"] for n, v in last["notebooks"].items()} == {
        "zeta_dev.ipynb": 2, "alpha_dev.ipynb": 2, "mid_dev.ipynb": 2}
    assert sorted(n for n, v in last["integration"].items() if not v["cached"]) == ["test_07_base.py", "test_07_user.py"]

    # 6. a --tests subset never records complete, even with every test passing
    rc, out, last = _complete(mini, dest, capsys, tests=["test_07_leaf.py"])
    assert rc == 1 and not last["complete"] and "only the test files matching test_07_leaf.py" in last["partial"][0]
    assert last["stages"]["integration tests"]["failed"] == 0 and list(last["integration"]) == ["test_07_leaf.py"]
    assert "NOT complete" in out

    # 7. --no-cache runs everything again
    _complete(mini, dest, capsys, use_cache=False)
    assert sorted(_runs(runs)[6:]) == ["alpha", "mid", "zeta"]


def test_a_test_file_started_beside_a_notebook_that_fails_is_not_counted(mini, tmp_path, capsys, monkeypatch):
    """A worker idle while zeta's inline tests run starts test_07_base (it needs only zeta) early; zeta fails, so that
    run is thrown away and the file is reported as if it had waited: skipped, naming zeta."""
    monkeypatch.setenv("MINI_RUNS", str(tmp_path / "runs.txt"))
    dest = _mini_workspace(mini, tmp_path, ("zeta_dev", "alpha_dev", "mid_dev"))
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0 and last["integration"]["test_07_base.py"]["passed"] == 1
    _edit_code(dest / "zeta_dev.ipynb", "square", "return x * x", "return x * x + 1")  # wrong: alpha fails at once
    _edit_code(dest / "zeta_dev.ipynb", "test-square", "def test_unit_square():\n",
               "def test_unit_square():\n    import time\n    time.sleep(3)\n")  # zeta fails after alpha: a worker idles
    rc, out, last = _complete(mini, dest, capsys)
    base = last["integration"]["test_07_base.py"]
    assert rc == 1 and base["thrown_away"] and not base["early"], base
    assert base["skipped"] == "the inline tests of zeta_dev.ipynb did not pass" and base["passed"] == base["failed"] == 0
    assert "test_07_base.py: passed" not in out and "test_07_base.py: FAILED" not in out, out


def test_complete_partial_student(mini, tmp_path, capsys, monkeypatch):
    """zeta not attempted, alpha done (but its test needs zeta's square), mid done: points, statuses,
    mid's integration test runs, the others are skipped with the reason; never complete."""
    monkeypatch.setenv("MINI_RUNS", str(tmp_path / "runs.txt"))
    dest = _mini_workspace(mini, tmp_path, ("alpha_dev", "mid_dev"))
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 1 and not last["complete"] and not _progress(dest)["completed"]
    tasks = {g: t for v in last["notebooks"].values() for g, t in v["tasks"].items()}
    assert tasks["test-square"]["status"] == "not attempted" and "not yet implemented: square" in tasks["test-square"]["message"]
    assert tasks["test-quad"]["status"] == "blocked" and "zeta_dev.ipynb" in tasks["test-quad"]["message"], tasks
    assert tasks["test-neg"] == {"points": 2.0, "earned": 2.0, "status": "passed", "message": None}
    assert last["points"] == {"earned": 2.0, "possible": 9.0}
    it = last["integration"]
    assert it["test_07_leaf.py"]["passed"] == 1 and it["test_07_leaf.py"]["skipped"] is None
    assert it["test_07_base.py"]["skipped"] == "the inline tests of zeta_dev.ipynb did not pass"
    assert it["test_07_user.py"]["skipped"] == "the inline tests of alpha_dev.ipynb did not pass"
    assert "test-square: 0/3 not attempted: not yet implemented: square" in out
    assert "integration test_07_base.py: skipped" in out
    # the export is the student's code as it stands, stub and all
    assert "not yet implemented: square" in (dest.parent / "tinytorch" / "mini_base.py").read_text()
    assert "return -x" in (dest.parent / "tinytorch" / "mini_leaf.py").read_text()


def test_an_indentation_slip_names_its_notebook_and_cell_and_stops_only_what_imports_it(mini, tmp_path, capsys,
                                                                                        monkeypatch):
    """A slip in an exported cell: that notebook is reported by notebook, cell number, grade id and line in the cell
    (not a converted script's line), the notebook importing its module is not run and names that cell, and the
    notebook that does not import it passes; its integration test runs too (issue 44)."""
    monkeypatch.setenv("MINI_RUNS", str(tmp_path / "runs.txt"))
    dest = _mini_workspace(mini, tmp_path, ("zeta_dev", "alpha_dev", "mid_dev"))
    _edit_code(dest / "zeta_dev.ipynb", "square", "    return x * x", "      return x * x\n    return x")
    cell = 1 + next(i for i, c in enumerate(subs.load(dest / "zeta_dev.ipynb")["cells"])
                    if (c["metadata"].get("nbgrader") or {}).get("grade_id") == "square")
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 1
    nbs = last["notebooks"]
    assert nbs["mid_dev.ipynb"]["ok"] and nbs["mid_dev.ipynb"]["tasks"]["test-neg"]["status"] == "passed"
    assert last["integration"]["test_07_leaf.py"]["passed"] == 1
    where = f"zeta_dev.ipynb, cell {cell} (grade id square), line 5 of the cell: IndentationError"
    assert f"! does not compile: {where}" in out, out
    assert ".tito_inline_" not in out, out
    assert " 2. alpha_dev.ipynb: NOT RUN" in out and f"not run: it imports tinytorch.mini_base, which zeta_dev.ipynb, " \
        f"cell {cell} (grade id square), line 5 of the cell breaks" in out, out
    assert nbs["alpha_dev.ipynb"]["tasks"]["test-quad"]["status"] == "blocked"
    assert sorted(_runs(tmp_path / "runs.txt")) == ["mid"]  # neither broken notebook ran
    # a slip in a test cell (not exported) stops that notebook alone
    shutil.copy2(mini.nbs_dir / MINI / "zeta_dev.ipynb", dest / "zeta_dev.ipynb")
    _edit_code(dest / "mid_dev.ipynb", "test-neg", "    assert neg(5)", "    x = 1\n  assert neg(5)")
    rc, out, last = _complete(mini, dest, capsys)
    nbs = last["notebooks"]
    assert nbs["zeta_dev.ipynb"]["ok"] and nbs["alpha_dev.ipynb"]["ok"] and not nbs["mid_dev.ipynb"]["ok"]
    assert re.search(r"mid_dev\.ipynb, cell \d+ \(grade id test-neg\), line 3 of the cell: IndentationError", out), out


def test_job_server_runs_times_out_and_survives_a_crash(tmp_path):
    """Each job in a fresh process: a passing file, one that kills its own process, one that
    outlives its timeout; all three end with a report and the server stays up for the next."""
    files = {"ok": "def test_unit_a():\n    assert 1 + 1 == 2\n",
             "crash": "import os\ndef test_unit_b():\n    os._exit(3)\n",
             "slow": "import time\ndef test_unit_c():\n    time.sleep(60)\n"}
    server = cmpl.JobServer(tmp_path, dict(__import__("os").environ), 2, tmp_path / "server.log", preload=[])
    try:
        for name, src in files.items():
            (tmp_path / f"{name}.py").write_text(src)
            server.submit({"id": name, "kind": "inline", "file": str(tmp_path / f"{name}.py"),
                           "log": str(tmp_path / f"{name}.log"), "result": str(tmp_path / f"{name}.json"),
                           "timeout": 60 if name != "slow" else 2})
        got = {m["id"]: m for m in (server.next(), server.next(), server.next())}
    finally:
        server.close()
    assert got["ok"]["result"]["ok"] and got["ok"]["exit"] == 0 and not got["ok"]["timed_out"]
    assert got["crash"]["result"] is None and got["crash"]["exit"] == 3
    assert got["slow"]["timed_out"] and got["slow"]["result"] is None and got["slow"]["seconds"] < 30
    assert server.p.returncode == 0


def test_complete_reruns_a_test_file_only_when_code_it_executed_changed(mini, tmp_path, capsys, monkeypatch):
    """test_07_two imports mini_base and mini_leaf but calls only square: an edit to neg (a module
    it imports, a function it never calls) leaves it cached, an edit to square runs it again.
    test_07_proc starts a process, so its record is incomplete: it keeps the can-reach rule."""
    monkeypatch.setenv("MINI_RUNS", str(tmp_path / "runs.txt"))
    shutil.copytree(mini.root, tmp_path / "course")
    extra = {"test_07_two.py": "import tinytorch.mini_leaf\nfrom tinytorch.mini_base import square\n\n\n"
                               "def test_two():\n    assert square(5) == 25\n",
             "test_07_proc.py": "import subprocess, sys\nimport tinytorch.mini_leaf\n\n\ndef test_proc():\n"
                                "    assert subprocess.run([sys.executable, '-c', 'pass']).returncode == 0\n",
             "test_07_uname.py": "import platform, subprocess\nimport tinytorch.mini_leaf\n\n\ndef test_uname():\n"
                                 "    assert subprocess.run(['uname']).returncode == 0 and platform.system()\n",
             "test_07_hog.py": "import subprocess, sys\nimport tinytorch.mini_leaf\n\n\ndef test_hog():\n"
                               "    hog = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
                               "    hog.kill()\n    assert hog.wait() != 0\n"}
    for name, src in extra.items():
        (tmp_path / "course" / "tests" / name).write_text(src)
    course = Course.load(tmp_path / "course")
    dest = _mini_workspace(course, tmp_path, ("zeta_dev", "alpha_dev", "mid_dev"))
    rc, out, last = _complete(course, dest, capsys)
    assert rc == 0, out
    assert last["integration"]["test_07_two.py"]["needs"] == ["zeta_dev.ipynb", "mid_dev.ipynb"]
    cache = json.loads((dest.parent / layout.SCRATCH / cmpl.CACHE).read_text())["integration"]
    assert "square" in cache["test_07_two.py"]["executed"]["tinytorch.mini_base"]
    assert "neg" not in cache["test_07_two.py"]["executed"].get("tinytorch.mini_leaf", [])
    assert cache["test_07_proc.py"]["executed"] is None and "another process" in cache["test_07_proc.py"]["executed_unknown"]
    assert cache["test_07_uname.py"]["executed"] is not None, cache["test_07_uname.py"]  # uname runs no Python
    assert cache["test_07_hog.py"]["executed"] is not None, cache["test_07_hog.py"]  # a CPU hog imports nothing

    _edit_code(dest / "mid_dev.ipynb", "neg", "return -x", "return 0 - x")
    rc, out, last = _complete(course, dest, capsys)
    assert rc == 0, out
    assert sorted(n for n, v in last["integration"].items() if not v["cached"]) == ["test_07_leaf.py", "test_07_proc.py"]

    _edit_code(dest / "zeta_dev.ipynb", "square", "return x * x", "return x ** 2")
    rc, out, last = _complete(course, dest, capsys)
    assert rc == 0, out
    assert sorted(n for n, v in last["integration"].items() if not v["cached"]) == [
        "test_07_base.py", "test_07_two.py", "test_07_user.py"]


def test_complete_reruns_a_notebook_only_when_code_it_executed_changed(mini, tmp_path, capsys, monkeypatch):
    """Notebooks keep a key by what their inline tests executed, as test files do (issue 44): alpha imports
    mini_base and calls square; a function added to mini_base changes the module's outline (zeta and alpha run
    again), an edit of that function's body, which no test calls, runs nothing, and an edit of square runs zeta and
    alpha again."""
    runs = tmp_path / "runs.txt"
    monkeypatch.setenv("MINI_RUNS", str(runs))
    dest = _mini_workspace(mini, tmp_path, ("zeta_dev", "alpha_dev", "mid_dev"))
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0, out
    cache = json.loads((dest.parent / layout.SCRATCH / cmpl.CACHE).read_text())["inline"]
    assert "square" in cache["alpha_dev.ipynb"]["executed"]["tinytorch.mini_base"], cache["alpha_dev.ipynb"]
    assert "quad" in cache["alpha_dev.ipynb"]["executed"]["tinytorch.mini_user"]
    assert "tinytorch.mini_leaf" not in cache["alpha_dev.ipynb"]["executed"]
    assert any((dest.parent / layout.SCRATCH / "complete" / "marked").glob("*.marked")), "the marked code is kept"

    _edit_code(dest / "zeta_dev.ipynb", "square", "return x * x", "return x * x\n\n\ndef cube(x):\n    return x * x * x")
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0 and sorted(_runs(runs)[3:]) == ["alpha", "zeta"], (_runs(runs), out)

    _edit_code(dest / "zeta_dev.ipynb", "square", "return x * x * x", "return x ** 3")
    rc, out, last = _complete(mini, dest, capsys)
    assert "return x ** 3" in (dest.parent / "tinytorch" / "mini_base.py").read_text(), "the edit was exported"
    assert rc == 0 and _runs(runs)[5:] == [], "no test executed cube: nothing runs again"
    assert all(v["cached"] for v in last["notebooks"].values()) and all(v["cached"] for v in last["integration"].values())

    _edit_code(dest / "zeta_dev.ipynb", "square", "return x * x\n", "return x ** 2\n")
    rc, out, last = _complete(mini, dest, capsys)
    assert rc == 0 and sorted(_runs(runs)[5:]) == ["alpha", "zeta"], (_runs(runs), out)
    assert sorted(n for n, v in last["integration"].items() if not v["cached"]) == ["test_07_base.py", "test_07_user.py"]


def test_executed_hash_changes_only_with_what_ran(tmp_path):
    "A function's body counts when it ran; its signature, decorators and the module's own code always count."
    from tito.workspace.complete import executed_hash

    src = ("import functools\n\nclass A:\n    def ran(self):\n        def inner():\n            return 1\n"
           "        return 2\n\n    def idle(self):\n        return 3\n\n@functools.cache\ndef f(x=1):\n"
           "    return x\n\nN = 4\n")
    path = tmp_path / "m.py"
    ran = {"<module>", "A.ran"}

    def h(text, executed=ran):
        path.write_text(text)
        return executed_hash(path, executed)

    base = h(src)
    assert h(src.replace("return 3", "return 30")) == base  # A.idle never ran
    assert h(src.replace("return 1", "return 10")) == base  # nor did A.ran's inner function
    assert h(src.replace("return 1", "return 10"), ran | {"A.ran.<locals>.inner"}) != h(src, ran | {"A.ran.<locals>.inner"})
    assert h(src + "# a comment\n") == base
    for edit in (("return 2", "return 20"), ("def f(x=1)", "def f(x=2)"), ("@functools.cache\n", ""), ("N = 4", "N = 5"),
                 ("def idle(self)", "def idle(self, y)")):
        assert h(src.replace(*edit)) != base, edit


def test_which_started_programs_could_run_the_packages_code():
    "A test that starts one of these keeps its record of what it executed (None) or falls back to can-reach."
    from tito.testing.inline_runner import spawns_code

    hog = [sys.executable, "-c", "while True: pass"]
    assert spawns_code("subprocess.Popen", (None, hog, None, None)) is None
    assert spawns_code("subprocess.Popen", (None, ["uname", "-m"], None, None)) is None
    for wrapped in (["setsid", "-f", *hog], ["nohup", *hog], ["setsid", "-w", "nohup", *hog]):
        assert spawns_code("subprocess.Popen", (None, wrapped, None, None)) is None, wrapped
    assert spawns_code("os.spawn", (os.P_NOWAIT, hog[0], hog, None)) is None
    for code in ([sys.executable, "-c", "pass"], ["setsid", "-f", sys.executable, "-c", "import tinytorch"],
                 ["nohup", "/bin/sh", "-c", "while true; do :; done"], ["setsid"], [sys.executable, "-m", "tito"]):
        assert spawns_code("subprocess.Popen", (None, code, None, None)) is not None, code
    assert spawns_code("os.fork", ()) == "os.fork"
    assert spawns_code("subprocess.Popen", (None, ["openssl", "sha512", "header.i"], None, None)) is None


def test_torch_compiles_probe_keeps_the_record():
    "torch.compile (inductor) starts a Python that only dlopens a library it built: that Python runs none of ours."
    from torch._inductor.cpu_vec_isa import VecISA

    from tito.testing.inline_runner import spawns_code

    def python(code):
        return spawns_code("subprocess.Popen", (None, [sys.executable, "-c", code], None, None))

    probe = VecISA._avx_py_load
    assert python(probe.replace("__lib_path__", "/tmp/torchinductor_root/73/c73e.so")) is None
    for bad in (probe.replace("__lib_path__", '/tmp/a.so")\nimport tinytorch\nprint("'), probe + "import tinytorch\n",
                "import tinytorch\n" + probe.replace("__lib_path__", "/tmp/a.so"), probe.replace("__lib_path__", "x\\")):
        assert python(bad) is not None, bad


def test_the_students_test_files_read_nothing_of_the_instructors_tree(root):
    """`module complete` runs tests/test_NN_*.py in the student's workspace and kit, which hold no modules/ or nbs/
    (a layout test reading modules/19_benchmarking/hardware_dev.py once failed every honest student there)."""
    files = sorted((root / "tests").glob("test_[0-9][0-9]_*.py"))
    assert len(files) > 10, [f.name for f in files]
    for f in files:
        text = f.read_text(encoding="utf-8")
        for path in ("modules/", "nbs/", '"modules"', '"nbs"'):
            assert path not in text, f"{f.name} reads {path!r}, which a student's workspace does not have"


def test_complete_runs_the_tests_whose_notebooks_passed(mini, tmp_path, capsys, monkeypatch):
    """A test file exercising two notebooks, one of which failed: its test of the notebook that passed runs,
    the other is listed as not run yet, naming the notebook it waits for; the module is not complete."""
    monkeypatch.setenv("MINI_RUNS", str(tmp_path / "runs.txt"))
    copy = tmp_path / "course"
    shutil.copytree(mini.root, copy)
    (copy / "tests" / "test_07_mixed.py").write_text(
        "from tinytorch.mini_base import square\nfrom tinytorch.mini_leaf import neg\n\n\n"
        "def test_square():\n    assert square(3) == 9\n\n\ndef test_neg():\n    assert neg(2) == -2\n")
    course = Course.load(copy)
    dest = _mini_workspace(course, tmp_path, ("alpha_dev", "mid_dev"))  # zeta's square: still a stub
    rc, out, last = _complete(course, dest, capsys, tests=["test_07_mixed.py"])
    mixed = last["integration"]["test_07_mixed.py"]
    assert rc == 1 and not last["complete"]
    assert mixed["skipped"] is None and (mixed["passed"], mixed["failed"]) == (1, 0), mixed
    assert mixed["not_run"] == ("1 of 2 test(s) not run yet: they need zeta_dev.ipynb, whose inline tests did "
                                "not pass"), mixed
    assert "integration test_07_mixed.py: 1 of 1 passed" in out and "they need zeta_dev.ipynb" in out
    assert any("ran only the tests whose notebooks passed" in p for p in last["partial"])


def test_code_a_test_runs_in_a_subprocess_counts_as_what_it_needs(root):
    """A test that imports the student's code only inside `python -c CODE` (the submit-and-judge size test, now in
    test_olympics_cli.py) needs the notebooks that code imports, as an import of its own would: `module complete` says "not run yet"
    until they pass instead of running it early (issue 44)."""
    from tito.testing.needs import test_modules

    files = cmpl.module_files(root / "tinytorch")
    src = ("import subprocess, sys\n\ndef test_in_a_child():\n    code = ('from tinytorch.benchmarking.olympics import x\\n'"
           " 'print(x)')\n    subprocess.run([sys.executable, '-c', code], check=True)\n\n"
           "def test_plain():\n    assert 'from nowhere' != 'import'\n")
    needs = test_modules(src, files)
    assert "tinytorch.benchmarking.olympics" in needs["test_in_a_child"] and needs["test_plain"] == set(), needs
    real = test_modules((root / "tests" / "test_olympics_cli.py").read_text(), files)
    assert "tinytorch.benchmarking.olympics" in real["test_submit_and_the_judge_measure_the_course_baseline_alike"]
