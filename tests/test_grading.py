"""Release (named stubs, hidden tests, data files, locked cells) and `tito grade` on a class.

Exact points come from a small two-task course (tests/fixtures/submissions.py: `mean` 2 points,
`Summary.spread` 3 points, one hidden test, one data file), graded once with --jobs 2 for a class
of honest, broken and adversarial submissions (importer, snooper, patcher, writer, looper, memory
hog, fork bomb, network caller, 1 GB printer), then a few of them again serially and on a Dask
LocalCluster. One end-to-end run grades a real module 19 notebook, with the expected points read
from its nbgrader metadata. The sandbox tests need bubblewrap and fail without it.
"""
import csv
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fixtures import submissions as subs
from tito import nbgrader_glue, sandbox
from tito.commands import grade as grade_cmd
from tito.commands import status as status_cmd
from tito.commands.release import release
from tito.config import Course, TitoError
from tito.nbgrader_named_stubs import enclosing_qualname, replace_regions

CELL_TIMEOUT = 5  # per-cell limit in the class run: each infinite loop costs this much


def _hashes(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


# ---- named stubs (pure) -----------------------------------------------------------------------

def test_enclosing_qualname():
    src = ("class A:\n    @property\n    def f(self):\n        ### BEGIN SOLUTION\n        return 1\n"
           "        ### END SOLUTION\n\ndef outer():\n    def inner(x,\n              y):\n"
           "        ### BEGIN SOLUTION\n        pass\n        ### END SOLUTION\n    return inner\n")
    assert enclosing_qualname(src, 4) == "A.f"
    assert enclosing_qualname(src, 12) == "outer.<locals>.inner"  # as co_qualname spells it
    new, n = replace_regions(src, "cell-id")
    assert n == 2 and "BEGIN SOLUTION" not in new and "return 1" not in new
    assert '        raise NotImplementedError("not yet implemented: A.f")' in new.splitlines()
    assert 'raise NotImplementedError("not yet implemented: outer.<locals>.inner")' in new
    # module-level region: named by the cell; a source that does not parse: by indentation
    assert "not yet implemented: cell-id" in replace_regions("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "cell-id")[0]
    assert enclosing_qualname("class B:\n    def g(self):\n        ### BEGIN SOLUTION\n        x = (\n", 3) == "B.g"
    with pytest.raises(ValueError, match="END SOLUTION"):
        replace_regions("def f():\n    ### BEGIN SOLUTION\n    pass\n", "x")


# ---- the class run on the small course -----------------------------------------------------------

@pytest.fixture(scope="session")
def bwrap():
    """The sandbox tests need bubblewrap: they FAIL (never skip) without it, saying how to get it."""
    path = sandbox.find_bwrap()
    if path is None:
        pytest.fail(sandbox.INSTALL_HINT)
    return path


class _Listener:
    """A TCP server on this machine's loopback that records every connection (the network caller's target)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.address = self.sock.getsockname()
        self.connections = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.connections.append(peer)
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


QUICK = ["full", "partial", "syntax"]  # graded again serially, and on a Dask cluster


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, root, bwrap):
    """Release the small course, prepare honest, broken and adversarial submissions, grade them all in
    one run with --jobs 2."""
    base = tmp_path_factory.mktemp("grading")
    course = Course.load(subs.make_stats_course(base / "course", root, cell_timeout=CELL_TIMEOUT))
    rel = release(course, "01_stats")
    assert not rel.leaks, rel.leaks
    src = subs.load(course.nbs_dir / "01_stats" / "stats_dev.ipynb")
    blank = subs.load(rel.release_dir / "stats_dev.ipynb")
    spread_solved = subs.fill_solution(blank, src, "stats-spread")
    students = {
        "full": src,
        "empty": blank,
        "partial": subs.fill_solution(blank, src, "stats-mean"),
        # passes the visible spread test, fails the hidden one (one value -> None)
        "hidden": subs.replace_stub(blank, "stats-spread",
                                    "return max(self.xs) - min(self.xs) if len(self.xs) > 1 else None"),
        "syntax": subs.replace_stub(spread_solved, "stats-mean", subs.SYNTAX_ERROR),
        "loop": subs.replace_stub(spread_solved, "stats-mean", subs.INFINITE_LOOP),
    }
    sub_dir = base / "submissions"
    out = base / "grades" / "01_stats"
    listener = _Listener()
    adversaries = subs.adversarial_submissions(
        blank, src, [out / "grades.csv", out / "students", sub_dir / "full", sub_dir, course.root / "modules"],
        listener.address)
    for name, nb in students.items():
        subs.save(nb, sub_dir / name / "stats_dev.ipynb")
    for name, (nb, _) in adversaries.items():
        subs.save(nb, sub_dir / name / "stats_dev.ipynb")
    (sub_dir / "corrupt").mkdir()
    (sub_dir / "corrupt" / "stats_dev.ipynb").write_text("{ this is not json")
    # bad input: a folder name that is no student id, a non-notebook file, a folder without notebooks
    subs.save(src, sub_dir / "bad name!" / "stats_dev.ipynb")
    (sub_dir / "partial" / "notes.txt").write_text("my notes")
    (sub_dir / "nobody-home").mkdir()
    # "full" also records what its kernel can see: its own folder, none of the course's
    full_nb = sub_dir / "full" / "stats_dev.ipynb"
    nb = subs.load(full_nb)
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "peek", "metadata": {}, "outputs": [],
                        "source": "import os\nprint('SEEN', [os.path.exists(p) for p in "
                                  f"{[str(sub_dir), str(course.root), str(out.parent), str(root / 'modules'), str(root / 'tinytorch')]!r}], "
                                  "sorted(os.listdir('/grading')), sorted(os.listdir('.')))"})
    subs.save(nb, full_nb)
    before = _hashes(sub_dir)
    t0 = time.perf_counter()
    results = grade_cmd.grade(course, "01_stats", sub_dir, out, progress=lambda *a, **k: None, jobs=2)
    seconds = time.perf_counter() - t0
    listener.close()
    return {"course": course, "release": rel, "subs": sub_dir, "out": out, "before": before,
            "results": {r.student: r for r in results}, "adversaries": adversaries, "listener": listener,
            "seconds": seconds}


def test_release_named_stubs_no_hidden_tests_data_locked(graded_class):
    rel = graded_class["release"]
    assert [p.name for p in rel.notebooks] == ["stats_dev.ipynb"]
    assert (rel.release_dir / "data" / "values.txt").read_text() == "1\n2\n3\n4\n"  # data file released
    text = rel.notebooks[0].read_text()
    assert 'raise NotImplementedError(\\"not yet implemented: mean\\")' in text
    assert 'raise NotImplementedError(\\"not yet implemented: Summary.spread\\")' in text
    for secret in ["total_of_the_values", "largest_of_the_values", "hidden test: one value", "BEGIN", "END SOLUTION"]:
        assert secret not in text, secret
    cells = json.loads(text)["cells"]
    tests = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    assert len(tests) == 2 and all(c["metadata"]["nbgrader"]["locked"] and c["metadata"]["nbgrader"].get("checksum")
                                   for c in tests)


def test_release_leak_is_caught(graded_class, monkeypatch, tmp_path):
    """If the generated release still held solution lines, nothing is released and they are listed."""
    course = graded_class["course"]
    src = course.nbs_dir / "01_stats" / "stats_dev.ipynb"
    fake = tmp_path / "gen"
    fake.mkdir()
    shutil.copy2(src, fake / src.name)  # what a broken generate_assignment would produce
    monkeypatch.setattr(nbgrader_glue, "generate_assignment", lambda *a, **k: fake)
    res = nbgrader_glue.release_module([src], "01_stats", tmp_path / "rel", tmp_path / "nbg", "stats", 10)
    found = {l.line for l in res.leaks}
    assert {"total_of_the_values = sum(xs)", subs.HIDDEN_TEST_LINE} <= found, found
    assert not (tmp_path / "rel" / "01_stats").exists() and not res.notebooks


def test_grades_exact(graded_class):
    r = graded_class["results"]
    full_max = subs.MEAN_POINTS + subs.SPREAD_POINTS
    assert set(r) == {"full", "empty", "partial", "hidden", "syntax", "loop", "corrupt"} | set(graded_class["adversaries"])
    assert all(x.max_score == full_max for x in r.values())
    assert all(x.sandbox == grade_cmd.SANDBOXED for x in r.values())
    assert (r["full"].score, r["full"].status, r["full"].reason) == (full_max, "graded", "")
    assert r["empty"].score == 0 and r["empty"].status == "graded"
    assert "not yet implemented: mean" in r["empty"].reason and "not yet implemented: Summary.spread" in r["empty"].reason
    assert r["partial"].score == subs.MEAN_POINTS and "not yet implemented: Summary.spread" in r["partial"].reason
    # the hidden test runs at grading: the visible test passes, the hidden one takes the points
    assert r["hidden"].score == 0 and "hidden test: one value has spread 0" in r["hidden"].reason
    assert r["syntax"].score == subs.SPREAD_POINTS and r["syntax"].status == "errors"
    assert "SyntaxError" in r["syntax"].reason
    assert r["loop"].score == subs.SPREAD_POINTS and r["loop"].status == "timeout"
    assert f"timed out (cell ran longer than {CELL_TIMEOUT} s)" in r["loop"].reason
    assert r["corrupt"].score == 0 and r["corrupt"].status == "failed" and "unreadable notebook" in r["corrupt"].reason


def test_grade_outputs(graded_class):
    out, r = graded_class["out"], graded_class["results"]
    rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
    assert list(rows[0]) == ["student", "notebook", "score", "max_score", "manual_pending", "status", "reason",
                             "sandbox"]
    assert {row["manual_pending"] for row in rows} == {"0"}  # the small course has no written answers
    assert {row["sandbox"] for row in rows} == {grade_cmd.SANDBOXED}
    totals = {row["student"]: row for row in rows if row["notebook"] == grade_cmd.TOTAL}
    assert {k: float(v["score"]) for k, v in totals.items()} == {k: v.score for k, v in r.items()}
    per_nb = [row for row in rows if row["student"] == "partial" and row["notebook"] == "stats_dev"]
    assert per_nb and float(per_nb[0]["score"]) == subs.MEAN_POINTS
    fb = out / "students" / "empty" / "feedback" / "stats_dev.html"
    assert fb.is_file() and "not yet implemented: mean" in fb.read_text()
    for s in ("full", "partial", "syntax", "loop"):
        assert (out / "students" / s / "feedback" / "stats_dev.html").is_file(), s
        assert (out / "students" / s / "gradebook.db").is_file()
        assert json.loads((out / "students" / s / "result.json").read_text())["score"] == r[s].score
    # grading never modifies the submissions; nothing was written into that folder
    assert _hashes(graded_class["subs"]) == graded_class["before"]
    # the kernel of "full" saw its own folder and the sandbox's inputs, nothing of the course or the class
    ag = json.loads((out / "students" / "full" / "autograded" / "stats_dev.ipynb").read_text())
    seen = [o for c in ag["cells"] if c.get("id") == "peek" for o in c["outputs"]]
    assert seen and "SEEN [False, False, False, False, False] ['cache', 'files', 'in', 'pkg'] ['data', 'stats_dev.ipynb']" \
        in "".join(seen[0]["text"]), seen
    # bad input is a line in the report, not a crash
    problems = (out / "problems.txt").read_text()
    assert "'bad name!': folder name is not a usable student id" in problems
    assert "partial: notes.txt is not a notebook; ignored" in problems
    assert "nobody-home: no notebooks" in problems
    st = status_cmd.module_status(graded_class["course"], "01_stats", out.parent)
    assert st.released and st.release_notebooks == 1 and st.release_data_files == 1 and st.public_names == 3
    assert st.graded_students == len(r) and st.mean_score == round(sum(x.score for x in r.values()) / len(r), 2)


def test_regrade_one_student(graded_class, tmp_path):
    course = graded_class["course"]
    out, sub_dir = tmp_path / "out", tmp_path / "subs"  # copies: the class run's files stay as graded
    shutil.copytree(graded_class["out"], out)
    shutil.copytree(graded_class["subs"], sub_dir)
    before = {row["student"]: row for row in csv.DictReader(open(out / "grades.csv", newline=""))
              if row["notebook"] == grade_cmd.TOTAL}
    shutil.copy2(sub_dir / "full" / "stats_dev.ipynb", sub_dir / "partial" / "stats_dev.ipynb")  # resubmitted
    (res,) = grade_cmd.grade(course, "01_stats", sub_dir, out, students=["partial"], progress=lambda *a, **k: None,
                             jobs=1)
    assert res.score == subs.MEAN_POINTS + subs.SPREAD_POINTS
    after = {row["student"]: row for row in csv.DictReader(open(out / "grades.csv", newline=""))
             if row["notebook"] == grade_cmd.TOTAL}
    assert float(after["partial"]["score"]) == res.score
    assert {k: v for k, v in after.items() if k != "partial"} == {k: v for k, v in before.items() if k != "partial"}
    with pytest.raises(TitoError, match="nobody"):
        grade_cmd.grade(course, "01_stats", sub_dir, out, students=["nobody"])


def test_submitted_layout(tmp_path):
    (tmp_path / "submitted" / "ann" / "19_benchmarking").mkdir(parents=True)
    (tmp_path / "submitted" / "ann" / "19_benchmarking" / "a.ipynb").write_text("{}")
    (tmp_path / "submitted" / "bob").mkdir()
    (tmp_path / "submitted" / "bob" / "a.ipynb").write_text("{}")
    found = grade_cmd.find_submissions(tmp_path, "19_benchmarking")
    assert found == {"ann": tmp_path / "submitted" / "ann" / "19_benchmarking", "bob": tmp_path / "submitted" / "bob"}
    with pytest.raises(TitoError, match="no student folders"):
        grade_cmd.find_submissions(tmp_path / "submitted" / "ann" / "19_benchmarking", "x")


# ---- end to end on the real module 19 ------------------------------------------------------------

E2E_NOTEBOOK = "optimize_dev.ipynb"  # the quickest module 19 notebook with a graded task


@pytest.mark.slow
def test_grade_real_module_19(course, tmp_path, bwrap):
    module = "19_benchmarking"
    graded = {p.name: p for p in nbgrader_glue.module_assignment_notebooks(course.nbs_dir, module)}
    assert E2E_NOTEBOOK in graded, f"{E2E_NOTEBOOK} has no graded cells any more: pick another"
    nb = graded[E2E_NOTEBOOK]
    rel = release(course, module, release_dir=tmp_path / "release", course_dir=tmp_path / "nbg")
    assert not rel.leaks
    src = subs.load(nb)
    tasks = subs.solution_ids(src)
    expected = sum(subs.points(src).values())
    # written answers (markdown grade cells) are graded by hand: pending for the solution, which has them
    manual = sum(float(c["metadata"]["nbgrader"]["points"]) for c in src["cells"]
                 if c["cell_type"] == "markdown" and c["metadata"].get("nbgrader", {}).get("grade"))
    assert tasks and expected > 0
    sub_dir = tmp_path / "subs"
    shutil.copy2(nb, (sub_dir / "solution").mkdir(parents=True) or sub_dir / "solution" / E2E_NOTEBOOK)
    shutil.copy2(rel.release_dir / E2E_NOTEBOOK, (sub_dir / "blank").mkdir() or sub_dir / "blank" / E2E_NOTEBOOK)
    res = {r.student: r for r in grade_cmd.grade(course, module, sub_dir, tmp_path / "out", notebooks=[nb],
                                                 progress=lambda *a, **k: None, jobs=2)}
    assert res["solution"].max_score == expected and res["solution"].manual_pending == manual, res["solution"]
    assert res["solution"].score == expected - manual and res["solution"].reason == "", res["solution"]
    assert res["blank"].score == 0 and res["blank"].max_score == expected and res["blank"].manual_pending == 0
    assert "not yet implemented: " in res["blank"].reason
    assert (tmp_path / "out" / "students" / "blank" / "feedback" / E2E_NOTEBOOK.replace(".ipynb", ".html")).is_file()


def test_cli_grade_and_status_help(root):
    p = subprocess.run([sys.executable, "-m", "tito", "grade", "19", str(root / "no_such_dir")], cwd=root,
                       capture_output=True, text=True)
    assert p.returncode == 1 and "does not exist" in p.stderr
    p = subprocess.run([sys.executable, "-m", "tito", "status"], cwd=root, capture_output=True, text=True)
    assert p.returncode == 0 and "19_benchmarking" in p.stdout and "public names" in p.stdout


# ---- adversarial submissions -------------------------------------------------------------------

def test_adversaries_score_only_their_honest_cells(graded_class):
    """Each adversary gets exactly what its honest cells earn (importer and snooper: 0), with a reason."""
    r = graded_class["results"]
    got = {name: r[name].score for name in graded_class["adversaries"]}
    want = {name: most for name, (_, most) in graded_class["adversaries"].items()}
    assert got == want, r
    for name in ("importer", "snooper"):
        assert "test-stats-mean (0/2)" in r[name].reason and "test-stats-spread (0/3)" in r[name].reason, r[name].reason
    assert "replaced standard-library functions (math.isclose" in r["patcher"].reason, r["patcher"].reason
    assert "timed out" in r["loop"].reason and "MemoryError" in r["hog"].reason, (r["loop"], r["hog"])
    assert "test-stats-spread (0/3)" in r["forker"].reason


def test_adversaries_change_nothing_outside_their_sandbox(graded_class):
    out = graded_class["out"]
    assert _hashes(graded_class["subs"]) == graded_class["before"]          # nothing deleted or written
    assert (graded_class["course"].root / "modules" / "01_stats" / "stats_dev.py").is_file()
    assert graded_class["listener"].connections == []                       # no connection left a sandbox
    rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
    assert [row for row in rows if row["student"] == "writer" and row["notebook"] == grade_cmd.TOTAL][0]["score"] == "2"
    ag = json.loads((out / "students" / "writer" / "autograded" / "stats_dev.ipynb").read_text())
    wrote = [o for c in ag["cells"] if c.get("id") == "writer" for o in c["outputs"]]
    assert "WROTE []" in "".join(wrote[0]["text"]), wrote
    # 1 GB of prints: capped in the graded notebook; the class run went on
    assert (out / "students" / "printer" / "autograded" / "stats_dev.ipynb").stat().st_size < 2_000_000


# ---- serial, parallel, distributed, resume ----------------------------------------------------------

def _rows(path: Path, students: list[str]) -> list[dict]:
    return [row for row in csv.DictReader(open(path, newline="")) if row["student"] in students]


@pytest.fixture(scope="module")
def serial_run(graded_class, tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "01_stats"
    grade_cmd.grade(graded_class["course"], "01_stats", graded_class["subs"], out, students=QUICK,
                    progress=lambda *a, **k: None, jobs=1)
    return out


def test_jobs_2_equals_serial(graded_class, serial_run):
    assert _rows(serial_run / "grades.csv", QUICK) == _rows(graded_class["out"] / "grades.csv", QUICK)


def test_dask_local_cluster_equals_serial(graded_class, serial_run, tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        res = grade_cmd.grade(graded_class["course"], "01_stats", graded_class["subs"], tmp_path / "out",
                              students=QUICK, progress=lambda *a, **k: None, scheduler=cluster.scheduler_address)
    assert sorted(r.student for r in res) == sorted(QUICK)
    assert _rows(tmp_path / "out" / "grades.csv", QUICK) == _rows(serial_run / "grades.csv", QUICK)
    assert all((tmp_path / "out" / "students" / s / "gradebook.db").is_file() for s in QUICK)


def test_resume_grades_only_the_rest(graded_class, serial_run, tmp_path, monkeypatch):
    """A run interrupted after publishing a student's files but before grades.csv: --resume recovers the
    rows from result.json and grades nobody twice."""
    out = tmp_path / "out"
    shutil.copytree(serial_run, out)
    rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
    grade_cmd.write_csv(out / "grades.csv", [row for row in rows if row["student"] != "partial"])
    called = []
    monkeypatch.setattr(grade_cmd, "grade_one", lambda job: called.append(job.student) or (_ for _ in ()).throw(
        AssertionError("graded again")))
    res = grade_cmd.grade(graded_class["course"], "01_stats", graded_class["subs"], out, students=QUICK,
                          progress=lambda *a, **k: None, resume=True)
    assert called == [] and sorted(r.student for r in res) == sorted(QUICK)
    assert _rows(out / "grades.csv", QUICK) == _rows(serial_run / "grades.csv", QUICK)


# ---- without bubblewrap ------------------------------------------------------------------------------

def test_without_bwrap_grade_refuses(root, tmp_path):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no /usr/bin: no bwrap
    p = subprocess.run([sys.executable, "-m", "tito", "grade", "19", str(tmp_path)], cwd=root, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 1, p
    assert "bubblewrap" in p.stderr and "--no-sandbox" in p.stderr, p.stderr


def test_no_sandbox_says_so(graded_class, tmp_path):
    lines = []
    (r,) = grade_cmd.grade(graded_class["course"], "01_stats", graded_class["subs"], tmp_path / "out",
                           students=["full"], progress=lines.append, jobs=1, no_sandbox=True)
    assert r.score == subs.MEAN_POINTS + subs.SPREAD_POINTS and r.sandbox == grade_cmd.UNSANDBOXED
    assert any("NOT SANDBOXED" in l for l in lines)
    assert {row["sandbox"] for row in csv.DictReader(open(tmp_path / "out" / "grades.csv"))} == {grade_cmd.UNSANDBOXED}


def test_sandbox_hides_the_host_and_the_network(bwrap, root, tmp_path):
    (tmp_path / "mine").mkdir()
    spec = sandbox.SandboxSpec(["{python}", "-c", (
        "import os, socket\n"
        f"print(os.path.exists({str(root / 'modules')!r}), os.path.exists(os.path.expanduser('~root/.cache')))\n"
        "for p in ('/etc/x', '/grading/mine/x'):\n"
        "    try:\n        open(p, 'w')\n    except OSError as e:\n        print(type(e).__name__)\n"
        "try:\n    socket.create_connection(('127.0.0.1', 22), timeout=2)\nexcept OSError as e:\n"
        "    print('net', type(e).__name__)\n")], {"mine": tmp_path / "mine"})
    res = sandbox.run(spec, 60, bwrap)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "False", "OSError", "OSError", "net", "ConnectionRefusedError"], res.stdout
