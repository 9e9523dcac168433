"""`tito module start` and `tito module complete` in a student workspace, on the real module 19.

The workspace keeps one notebook (optimize_dev: the graded task `sparsity` is the one under test; its
other tasks are filled with the course's solutions); the rest of the student's package comes from
the course's tinytorch/.
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import submissions as subs
from tito.commands import student
from tito.commands.release import release
from tito.config import TitoError

MODULE = "19_benchmarking"
NOTEBOOK = "optimize_dev.ipynb"
TASK = "optimize-sparsity"
TESTS = ["test_19_optimize.py"]


@pytest.fixture(scope="module")
def released(course, tmp_path_factory):
    base = tmp_path_factory.mktemp("student")
    res = release(course, MODULE, release_dir=base / "release", course_dir=base / "nbg")
    assert not res.leaks
    return base / "release"


def _progress(mod_dir: Path) -> dict:
    return json.loads((mod_dir / student.PROGRESS).read_text())


def test_start_refuses_to_overwrite(course, released, tmp_path):
    ws = tmp_path / "ws"
    dest = student.start(course, MODULE, ws, release_dir=released)
    assert dest == (ws / MODULE).resolve()
    names = sorted(p.name for p in dest.glob("*.ipynb"))
    assert names == sorted(p.name for p in (released / MODULE).glob("*.ipynb")) and NOTEBOOK in names
    marker = json.loads((dest / student.MARKER).read_text())
    assert marker["module"] == MODULE and marker["notebooks"] == [f"{s}.ipynb" for s in course.reading_order(MODULE)]
    assert sorted(marker["notebooks"]) == names and marker["notebooks"][0] == "results_dev.ipynb"
    assert "| 1 | `results_dev.ipynb` |" in (dest / "README.md").read_text()  # the reading order, where the student is
    assert (dest / student.LAUNCHER / "__init__.py").is_file()
    work = dest / NOTEBOOK
    work.write_text(work.read_text().replace("not yet implemented: sparsity", "my own work"))
    with pytest.raises(TitoError, match="refusing to overwrite"):
        student.start(course, MODULE, ws, release_dir=released)
    assert "my own work" in work.read_text()  # untouched
    student.start(course, MODULE, ws, force=True, release_dir=released)
    assert "my own work" not in work.read_text()
    (backup,) = (ws / student.SCRATCH / "backup").iterdir()
    assert "my own work" in (backup / NOTEBOOK).read_text()  # --force keeps the old work


def _workspace(course, released, tmp_path) -> Path:
    dest = student.start(course, MODULE, tmp_path / "ws", release_dir=released)
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

    # 1. the release as it is: the stub is reported by name, nothing is exported
    assert student.complete_workspace(course, MODULE, dest, TESTS) == 1
    out = capsys.readouterr().out
    assert "not yet implemented: sparsity" in out
    last = _progress(dest)["last"]
    assert last["first_failure"].startswith(NOTEBOOK) and "not yet implemented: sparsity" in last["first_failure"]
    assert last["stages"]["inline tests"]["failed"] >= 1 and last["stages"]["inline tests"]["run"] > 1
    assert last["stages"]["integration tests"]["skipped"] == "export did not run"
    assert not (ws / "tinytorch").exists()

    # 2. a wrong sparsity, inline tests emptied: the export carries the student's code and the
    #    course's integration tests fail against it
    wrong = _neuter_tests(subs.replace_stub(_others_solved(blank, course), TASK, "return 0.0  # student: wrong on purpose"))
    subs.save(wrong, nb_path)
    assert student.complete_workspace(course, MODULE, dest, TESTS) == 1
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

    # 3. a correct solution, through the CLI from inside the workspace: everything passes
    subs.save(subs.fill_solution(_others_solved(blank, course), subs.load(course.nbs_dir / MODULE / NOTEBOOK), TASK),
              nb_path)
    p = subprocess.run([sys.executable, "-m", "tito", "module", "complete", "19", "--tests", *TESTS],
                       cwd=dest, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert f"module {MODULE} complete" in p.stdout
    prog = _progress(dest)
    assert prog["completed"] and len(prog["history"]) == 3
    assert prog["last"]["stages"]["integration tests"]["failed"] == 0
    assert prog["last"]["stages"]["integration tests"]["passed"] == it["run"]
    assert "return 0.0" not in exported.read_text()
