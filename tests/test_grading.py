"""`tito grade` on a class: exact points, every cheat at zero, honest students at full marks.

Exact points come from a small course (tests/fixtures/submissions.py: notebook stats_dev with four
tasks, extra_dev with one task built on stats, hidden tests, a data file), graded once with --jobs 2
for a class of honest, broken and adversarial students (a display hook, an input transformer and
module code that rewrites the grader's reporting, always-equal values, frame peeking, shadowed
builtins and helpers, numpy patches, hard-coded visible answers, reading the reference, snooping
and probing the file system for solution text, writing outside, a memory hog, a fork bomb, the
network, 1 GB of output), then a few again serially and on a Dask LocalCluster. The real Module 19 is graded
in tests/test_grading_module19.py (a file of its own, so that `tito test`'s two workers share the two long runs).
The sandbox tests need bubblewrap and fail without it. Every grading run here copies its assignment template,
built once per test run.
"""
import csv
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fixtures import submissions as subs

from tito.notebooks import nbgrader_glue, regions
from tito.commands import status as status_cmd
from tito.config import Course, TitoError
from tito.grading import classrun
from tito.isolation import sandbox
from tito.isolation import limits as limits_mod
from tito.grading.per_student import TOTAL
from tito.isolation.sandbox import UNSANDBOXED

# what grades.csv's sandbox column says here: "bubblewrap" as root with cgroups, else which protections it lacks
# the label of graded_class's run (--jobs 2): without a cgroup CPU share, cores split by --jobs stand for one
THIS_SANDBOX = sandbox.registered()().label(limits_mod.gaps(cores_split=limits_mod.cpu_split(2) is not None))
from tito.notebooks.named_stubs import enclosing_qualname, replace_regions

CELL_TIMEOUT = 5  # per-cell (and per-test) limit in the class run: each infinite loop costs this much
MODULE = "01_stats"


def _hashes(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module", autouse=True)
def one_template_per_assignment(tmp_path_factory):
    """Each grading run here copies its assignment template and read-only cache, each built once per test run
    (subs.templates_built_once, subs.warm_caches_built_once)."""
    with subs.templates_built_once(tmp_path_factory), subs.warm_caches_built_once(tmp_path_factory):
        yield


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


def _save_student(folder: Path, notebooks: dict[str, dict]) -> None:
    for stem, nb in notebooks.items():
        subs.save(nb, folder / f"{stem}.ipynb")


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, root, bwrap):
    """Release the small course, prepare the class, grade it in one run with --jobs 2."""
    base = tmp_path_factory.mktemp("grading")
    course, rel = subs.stats_course(tmp_path_factory, base / "course", root, cell_timeout=CELL_TIMEOUT)
    assert not rel.leaks, rel.leaks
    stems = ("stats_dev", "extra_dev")
    source = {s: subs.load(course.nbs_dir / MODULE / f"{s}.ipynb") for s in stems}
    blank = {s: subs.load(rel.release_dir / f"{s}.ipynb") for s in stems}
    sub_dir = base / "submissions"
    out = base / "grades" / MODULE
    listener = _Listener()
    students = subs.class_of_students(
        blank, source, [out / "grades.csv", out / "students", sub_dir / "full", sub_dir, course.root / "modules"],
        listener.address)
    for name, (nbs, _) in students.items():
        _save_student(sub_dir / name, nbs)
    # a notebook that is not JSON; extra_dev is honest
    (sub_dir / "corrupt").mkdir()
    (sub_dir / "corrupt" / "stats_dev.ipynb").write_text("{ this is not json")
    subs.save(source["extra_dev"], sub_dir / "corrupt" / "extra_dev.ipynb")
    # a submission that is a link to the instructor's notebook (the solutions): never followed
    (sub_dir / "linker").mkdir()
    (sub_dir / "linker" / "stats_dev.ipynb").symlink_to(course.nbs_dir / MODULE / "stats_dev.ipynb")
    (sub_dir / "linker" / "extra_dev.ipynb").symlink_to(course.nbs_dir / MODULE / "extra_dev.ipynb")
    # bad input: a folder name that is no student id, a non-notebook file, a folder without notebooks
    _save_student(sub_dir / "bad name!", source)
    (sub_dir / "partial" / "notes.txt").write_text("my notes")
    (sub_dir / "nobody-home").mkdir()
    # "full" also records what its notebook's process can see: its own folder, none of the course's
    full_nb = sub_dir / "full" / "stats_dev.ipynb"
    nb = subs.load(full_nb)
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "peek", "metadata": {}, "outputs": [],
                        "source": "import os\nprint('SEEN', [os.path.exists(p) for p in "
                                  f"{[str(sub_dir), str(course.root), str(out.parent), str(root / 'modules'), str(root / 'tinytorch')]!r}], "
                                  "sorted(os.listdir('/grading')), sorted(os.listdir('.')))"})
    subs.save(nb, full_nb)
    before = _hashes(sub_dir)
    t0 = time.perf_counter()
    results = classrun.grade(course, MODULE, sub_dir, out, progress=lambda *a, **k: None, jobs=2)
    seconds = time.perf_counter() - t0
    listener.close()
    return {"course": course, "release": rel, "subs": sub_dir, "out": out, "before": before,
            "results": {r.student: r for r in results}, "students": students, "listener": listener,
            "seconds": seconds, "source": source}


def test_release_named_stubs_no_hidden_tests_data_locked(graded_class):
    rel = graded_class["release"]
    assert sorted(p.name for p in rel.notebooks) == ["extra_dev.ipynb", "stats_dev.ipynb"]
    assert (rel.release_dir / "data" / "values.txt").read_text() == "1\n2\n3\n4\n"  # data file released
    text = (rel.release_dir / "stats_dev.ipynb").read_text()
    assert 'raise NotImplementedError(\\"not yet implemented: mean\\")' in text
    assert 'raise NotImplementedError(\\"not yet implemented: Summary.spread\\")' in text
    for secret in subs.SECRET_MARKERS + ["END SOLUTION"]:
        assert secret not in text, secret
    cells = json.loads(text)["cells"]
    tests = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    assert len(tests) == 4 and all(c["metadata"]["nbgrader"]["locked"] and c["metadata"]["nbgrader"].get("checksum")
                                   for c in tests)


def test_release_leak_is_caught(graded_class, monkeypatch, tmp_path):
    """If the generated release still held solution lines, nothing is released and they are listed."""
    course = graded_class["course"]
    src = course.nbs_dir / MODULE / "stats_dev.ipynb"
    fake = tmp_path / "gen"
    fake.mkdir()
    shutil.copy2(src, fake / src.name)  # what a broken generate_assignment would produce
    monkeypatch.setattr(nbgrader_glue, "generate_assignment", lambda *a, **k: fake)
    res = nbgrader_glue.release_module([src], MODULE, tmp_path / "rel", tmp_path / "nbg", "stats", 10)
    found = {l.line for l in res.leaks}
    assert {"total_of_the_values = sum(xs)", subs.HIDDEN_TEST_LINE} <= found, found
    assert not (tmp_path / "rel" / MODULE).exists() and not res.notebooks


def test_every_student_gets_exactly_what_their_honest_work_earns(graded_class):
    """Each cheat scores 0 on what it faked; honest parts earn their points, honest students all of them."""
    r = graded_class["results"]
    want = {name: most for name, (_, most) in graded_class["students"].items()} | {
        "corrupt": subs.POINTS["extra-double"], "linker": 0.0}
    assert {name: r[name].score for name in want} == want, {n: (r[n].score, r[n].reason[:300]) for n in want}
    assert all(x.max_score == subs.FULL and x.sandbox == THIS_SANDBOX for x in r.values())
    assert (r["full"].status, r["full"].reason) == ("passed", "")


def _tests(result, notebook: str) -> dict:
    return next(n.tests for n in result.notebooks if n.notebook == notebook)


def test_failed_tests_say_what_was_expected(graded_class):
    r = graded_class["results"]
    assert "not yet implemented: mean" in r["empty"].reason and "not yet implemented: Summary.spread" in r["empty"].reason
    assert r["partial"].score == subs.MEAN_POINTS and "not yet implemented: Summary.spread" in r["partial"].reason
    # hard-coded visible answers pass the visible asserts and fail the hidden ones, which name the property
    # they check (and the visible example that shows the same mistake), nothing more
    hc = _tests(r["hardcoded"], "stats_dev")
    assert all(not t["ok"] and t["message"].startswith("a hidden case failed") for t in hc.values()), hc
    assert hc["test-stats-spread"]["message"].startswith("a hidden case failed: the spread of other lists")
    assert "the visible test shows the same mistake: mean([1, 2, 3]) should be 2.0" in hc["test-stats-mean"]["message"]
    # a hidden region that declares no property says only that a hidden case failed
    assert _tests(r["hardcoded"], "extra_dev")["test-extra-double"]["message"].startswith(
        "a hidden case failed (hidden cases check the same work on other inputs)")
    # a function that reads the test's fake (the callbacks it was handed) instead of measuring finds nothing
    assert not _tests(r["peeker"], "stats_dev")["test-stats-time-it"]["ok"]
    assert r["syntax"].status == "tests failed" and "does not compile" in r["syntax"].reason
    assert r["loop"].status == "timeout" and f"longer than {CELL_TIMEOUT} s" in r["loop"].reason
    assert r["corrupt"].status == "refused" and "unreadable notebook" in r["corrupt"].reason
    # the always-equal values arrive as their data: a float that says it equals everything is its value
    eq = _tests(r["always_equal"], "stats_dev")["test-stats-mean"]["message"]
    assert "should be 2.0, got 0.0" in eq, eq
    assert "MemoryError" in r["hog"].reason, r["hog"].reason
    for name in ("importer", "snooper", "peeker", "shadower", "numpy_patcher", "hook", "tamper"):
        tests = {**_tests(r[name], "stats_dev"), **_tests(r[name], "extra_dev")}
        assert all(not t["ok"] and t["message"] for t in tests.values()), (name, tests)
        assert "test did not pass" not in r[name].reason


def test_what_a_submission_holds_cannot_reach_the_instructor(graded_class):
    """A linked submission is not followed (the link named the solutions); escape codes in a message
    reach neither the terminal nor grades.csv; a script in a student's outputs or markdown does not
    reach the feedback page; a `%time` left in a solution costs nothing."""
    r, out = graded_class["results"], graded_class["out"]
    assert r["linker"].score == 0 and "symbolic link" in r["linker"].reason
    assert "symbolic link" in (out / "problems.txt").read_text()
    assert "somebody_else" in r["ansi"].reason and "\x1b" not in r["ansi"].reason and "\x07" not in r["ansi"].reason
    assert "\x1b" not in (out / "grades.csv").read_text()
    page = (out / "students" / "xss" / "feedback" / "stats_dev.html").read_text()
    # cells the student added: shown as text, outputs as text (the HTML object's text/plain)
    assert "IPython.core.display.HTML object" in page and "My notes &lt;img src=x onerror" in page
    assert "<script>alert(" not in page, "a student's script reached the feedback page"
    assert not re.search(r"<img[^>]*onerror", page), "a student's event handler reached the feedback page"
    assert r["magic"].score == subs.FULL and r["magic"].reason == ""
    # its `%time total_of_the_values = sum(xs)` grades as the plain line, test by test (tito.notebooks.cells.plain_python)
    assert _tests(r["magic"], "stats_dev") == _tests(r["full"], "stats_dev")


def test_an_honest_student_with_stderr_and_warnings_gets_every_point(graded_class):
    r = graded_class["results"]["noisy"]
    assert (r.score, r.reason) == (subs.FULL, ""), r.reason
    ag = json.loads((graded_class["out"] / "students" / "noisy" / "autograded" / "stats_dev.ipynb").read_text())
    streams = [o for c in ag["cells"] for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert streams == [] or all("debug" in "".join(o["text"]) or "warn" in "".join(o["text"]).lower() for o in streams)


def test_grade_outputs(graded_class):
    out, r = graded_class["out"], graded_class["results"]
    rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
    assert list(rows[0]) == ["student", "notebook", "score", "max_score", "manual_pending", "status", "reason",
                             "sandbox"]
    assert {row["manual_pending"] for row in rows} == {"0"}  # the small course has no written answers
    assert {row["sandbox"] for row in rows} == {THIS_SANDBOX}
    totals = {row["student"]: row for row in rows if row["notebook"] == TOTAL}
    assert {k: float(v["score"]) for k, v in totals.items()} == {k: v.score for k, v in r.items()}
    per_nb = [row for row in rows if row["student"] == "partial" and row["notebook"] == "stats_dev"]
    assert per_nb and float(per_nb[0]["score"]) == subs.MEAN_POINTS
    fb = out / "students" / "empty" / "feedback" / "stats_dev.html"
    assert fb.is_file() and "not yet implemented: mean" in fb.read_text()
    for s in ("full", "partial", "syntax", "loop"):
        res = json.loads((out / "students" / s / "result.json").read_text())
        assert (out / "students" / s / "feedback" / "stats_dev.html").is_file(), (s, res)
        assert (out / "nbgrader" / "autograded" / s / MODULE / "stats_dev.ipynb").is_file()
        run_seed = json.loads((out / "run.json").read_text())["seed"]
        wanted = {"stats_dev.ipynb", "extra_dev.ipynb"}
        assert res["score"] == r[s].score and res["seed"] == classrun.student_seed(
            run_seed, s, classrun.submission_hash(graded_class["subs"] / s, wanted))
        for f in (out / "students" / s).rglob("*"):  # the run's secret seed is in run.json only
            assert not f.is_file() or str(run_seed) not in f.read_text(errors="replace"), f
    # grading never modifies the submissions; nothing was written into that folder
    assert _hashes(graded_class["subs"]) == graded_class["before"]
    # the notebook process of "full" saw its own folder and the sandbox's inputs, nothing of the course
    ag = json.loads((out / "students" / "full" / "autograded" / "stats_dev.ipynb").read_text())
    seen = [o for c in subs.added_cells(ag, "print('SEEN'") for o in c["outputs"]]
    assert seen and "SEEN [False, False, False, False, False] ['cache', 'files', 'hostlib', 'stage']" in "".join(
        seen[0]["text"]), seen
    # graded cells show the test as released and the judge's verdict; no hidden test line
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): c for c in ag["cells"]}
    verdict = "".join(cells["test-stats-mean"]["outputs"][0]["text"])
    assert verdict.startswith("test-stats-mean: passed (2 of 2 points)")
    # bad input is a line in the report, not a crash
    problems = (out / "problems.txt").read_text()
    assert "'bad name!': as a student id, the folder name is not usable" in problems
    assert "partial: notes.txt is not a notebook; ignored" in problems
    assert "nobody-home: no notebooks" in problems
    # one class gradebook (nbgrader's layout) with every graded student and the judge's points
    from tito.grading import course_dir, final_grades
    book = {row["student"]: float(row["total"]) for row in final_grades.table(final_grades.read(out / "nbgrader", MODULE))
            if row["notebook"] == final_grades.TOTAL}
    assert book == {k: v.score for k, v in r.items()}
    assert (course_dir.path(out) / "source" / MODULE / "stats_dev.ipynb").is_file()
    st = status_cmd.module_status(graded_class["course"], MODULE, out.parent)
    assert st.released and st.release_notebooks == 2 and st.release_data_files == 1
    assert st.graded_students == len(r) and st.mean_score == round(sum(x.score for x in r.values()) / len(r), 2)


def test_no_solution_text_in_the_sandbox_or_the_feedback(graded_class):
    """A probe that reads every file its sandbox can read finds no solution or hidden-test text, and
    no file handed back to students holds a line of a solution region or a hidden test."""
    out = graded_class["out"]
    ag = json.loads((out / "students" / "probe" / "autograded" / "stats_dev.ipynb").read_text())
    probe = "".join(o.get("text", "") for c in subs.added_cells(ag, "for root, dirs, files in os.walk('/')")
                    for o in c["outputs"])
    assert "PROBE []" in probe, probe[:2000]
    course = graded_class["course"]
    secrets = regions.secret_lines(course.notebooks(MODULE))
    assert secrets
    for student in (out / "students").iterdir():
        submitted = "".join(p.read_text(errors="replace") for p in (graded_class["subs"] / student.name).glob("*"))
        theirs = {s for s in secrets if s in submitted}  # a student who submitted the solution sees it back
        for f in student.rglob("*"):
            if f.is_file() and f.suffix in (".html", ".ipynb", ".json"):
                text = f.read_text(errors="replace")
                leaked = [s for s in set(secrets) - theirs if s in text]
                assert not leaked, (f, leaked[:3])


def test_regrade_one_student(graded_class, tmp_path):
    course = graded_class["course"]
    out, sub_dir = tmp_path / "out", tmp_path / "subs"  # copies: the class run's files stay as graded
    shutil.copytree(graded_class["out"], out)
    shutil.copytree(graded_class["subs"], sub_dir)
    before = {row["student"]: row for row in csv.DictReader(open(out / "grades.csv", newline=""))
              if row["notebook"] == TOTAL}
    for stem in ("stats_dev", "extra_dev"):  # resubmitted: now complete
        shutil.copy2(sub_dir / "full" / f"{stem}.ipynb", sub_dir / "partial" / f"{stem}.ipynb")
    (res,) = classrun.grade(course, MODULE, sub_dir, out, students=["partial"], progress=lambda *a, **k: None, jobs=1)
    assert res.score == subs.FULL
    after = {row["student"]: row for row in csv.DictReader(open(out / "grades.csv", newline=""))
             if row["notebook"] == TOTAL}
    assert float(after["partial"]["score"]) == res.score
    assert {k: v for k, v in after.items() if k != "partial"} == {k: v for k, v in before.items() if k != "partial"}
    with pytest.raises(TitoError, match="nobody"):
        classrun.grade(course, MODULE, sub_dir, out, students=["nobody"])


def test_submitted_layout(tmp_path):
    (tmp_path / "submitted" / "ann" / "19_benchmarking").mkdir(parents=True)
    (tmp_path / "submitted" / "ann" / "19_benchmarking" / "a.ipynb").write_text("{}")
    (tmp_path / "submitted" / "bob").mkdir()
    (tmp_path / "submitted" / "bob" / "a.ipynb").write_text("{}")
    found = classrun.scan_submissions(tmp_path, "19_benchmarking").found
    assert found == {"ann": tmp_path / "submitted" / "ann" / "19_benchmarking", "bob": tmp_path / "submitted" / "bob"}
    assert classrun.scan_submissions(tmp_path / "submitted" / "ann" / "19_benchmarking", "x").found == {}


def test_cli_grade_and_status_help(root):
    p = subprocess.run([sys.executable, "-m", "tito", "grade", "19", str(root / "no_such_dir")], cwd=root,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "does not exist" in p.stderr  # refused before grading: 2 (README, exit codes)
    p = subprocess.run([sys.executable, "-m", "tito", "status"], cwd=root, capture_output=True, text=True)
    assert p.returncode == 0 and "19_benchmarking" in p.stdout and "public names" in p.stdout


# ---- what the adversaries could not do ------------------------------------------------------------

def test_adversaries_change_nothing_outside_their_sandbox(graded_class):
    out = graded_class["out"]
    assert _hashes(graded_class["subs"]) == graded_class["before"]          # nothing deleted or written
    assert (graded_class["course"].root / "modules" / MODULE / "stats_dev.py").is_file()
    assert graded_class["listener"].connections == []                       # no connection left a sandbox
    rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
    assert [row for row in rows if row["student"] == "writer" and row["notebook"] == TOTAL][0]["score"] == "2"
    ag = json.loads((out / "students" / "writer" / "autograded" / "stats_dev.ipynb").read_text())
    wrote = [o for c in subs.added_cells(ag, "found = known + glob.glob(") for o in c["outputs"]]
    assert "WROTE []" in "".join(wrote[0]["text"]), wrote
    # 1 GB of prints: capped in the graded notebook; the class run went on
    assert (out / "students" / "printer" / "autograded" / "stats_dev.ipynb").stat().st_size < 2_000_000


# ---- serial, parallel, distributed, resume ----------------------------------------------------------

def _rows(path: Path, students: list[str]) -> list[dict]:
    return [row for row in csv.DictReader(open(path, newline="")) if row["student"] in students]


@pytest.fixture(scope="module")
def serial_run(graded_class, tmp_path_factory):
    """QUICK and "hardcoded" graded again one at a time, with the class run's seed (run.json): the same hidden
    inputs, so the same verdicts (test_a_seed_repeats_the_hidden_inputs reads "hardcoded" here)."""
    out = tmp_path_factory.mktemp("serial") / MODULE
    seed = json.loads((graded_class["out"] / "run.json").read_text())["seed"]
    results = classrun.grade(graded_class["course"], MODULE, graded_class["subs"], out, students=QUICK + ["hardcoded"],
                             progress=lambda *a, **k: None, jobs=1, seed=seed)
    return {"out": out, "seed": seed, "results": {r.student: r for r in results}}


def test_jobs_2_equals_serial(graded_class, serial_run):
    both = QUICK + ["hardcoded"]  # the same seed: the hidden cases' verdicts too
    assert _rows(serial_run["out"] / "grades.csv", both) == _rows(graded_class["out"] / "grades.csv", both)


def test_dask_local_cluster_equals_serial(graded_class, serial_run, tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        res = classrun.grade(graded_class["course"], MODULE, graded_class["subs"], tmp_path / "out",
                             students=QUICK, progress=lambda *a, **k: None, scheduler=cluster.scheduler_address)
    assert sorted(r.student for r in res) == sorted(QUICK)
    assert _rows(tmp_path / "out" / "grades.csv", QUICK) == _rows(serial_run["out"] / "grades.csv", QUICK)
    assert all((tmp_path / "out" / "nbgrader" / "autograded" / s / MODULE).is_dir() for s in QUICK)


def test_resume_grades_only_the_rest(graded_class, serial_run, tmp_path, monkeypatch):
    """A run interrupted after publishing a student's files but before grades.csv: --resume recovers the
    rows from result.json and grades nobody twice."""
    out = tmp_path / "out"
    shutil.copytree(serial_run["out"], out)
    rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
    classrun.write_csv(out / "grades.csv", [row for row in rows if row["student"] != "partial"])
    called = []
    monkeypatch.setattr(classrun, "grade_one", lambda job: called.append(job.student) or (_ for _ in ()).throw(
        AssertionError("graded again")))
    res = classrun.grade(graded_class["course"], MODULE, graded_class["subs"], out, students=QUICK,
                         progress=lambda *a, **k: None, resume=True)
    assert called == [] and sorted(r.student for r in res) == sorted(QUICK)
    assert _rows(out / "grades.csv", QUICK) == _rows(serial_run["out"] / "grades.csv", QUICK)


def test_resume_regrades_a_changed_submission_on_fresh_hidden_inputs(graded_class, serial_run, tmp_path):
    """--resume regrades exactly the students whose graded notebooks changed, each on hidden inputs drawn
    afresh (a seed from run.json's, the student and the new files); the unchanged keep theirs."""
    out, sub_dir = tmp_path / "out", tmp_path / "subs"
    shutil.copytree(serial_run["out"], out)
    for s in QUICK:
        shutil.copytree(graded_class["subs"] / s, sub_dir / s)
    for stem in ("stats_dev", "extra_dev"):  # "partial" resubmits the full solution
        shutil.copy2(sub_dir.parent / "subs" / "full" / f"{stem}.ipynb", sub_dir / "partial" / f"{stem}.ipynb")
    before = json.loads((out / "run.json").read_text())["seed"]
    published = {s: json.loads((out / "students" / s / "result.json").read_text()) for s in QUICK}
    res = {r.student: r for r in classrun.grade(graded_class["course"], MODULE, sub_dir, out, students=QUICK,
                                                progress=lambda *a, **k: None, resume=True, jobs=1)}
    assert res["partial"].score == subs.FULL and res["partial"].seed != published["partial"]["seed"]
    assert res["partial"].seed == classrun.student_seed(before, "partial", classrun.submission_hash(
        sub_dir / "partial", {"stats_dev.ipynb", "extra_dev.ipynb"}))
    assert res["partial"].timing != published["partial"]["timing"]  # graded again
    assert [res[s].timing for s in ("full", "syntax")] == [published[s]["timing"] for s in ("full", "syntax")]  # kept
    assert [res[s].seed for s in ("full", "syntax")] == [published[s]["seed"] for s in ("full", "syntax")]
    assert json.loads((out / "run.json").read_text())["seed"] == before


def _hidden_mean_case(seed: int) -> tuple[list, float]:
    """The hidden case of test-stats-mean as the judge draws it from a student's seed (tests/fixtures)."""
    import statistics

    import numpy as np

    rng = np.random.default_rng(seed)
    xs = rng.normal(3, 2, size=int(rng.integers(5, 40))).tolist()
    return xs, statistics.fmean(xs)


def _handed_back(out: Path, student: str) -> str:
    """Everything a student could be handed back: their folder (feedback, autograded notebooks,
    result.json) and their rows of grades.csv (the console prints the same reason)."""
    text = "".join(f.read_text(errors="replace") for f in (out / "students" / student).rglob("*")
                   if f.is_file() and f.suffix in (".html", ".ipynb", ".json"))
    return text + "".join(str(row) for row in _rows(out / "grades.csv", [student]))


def test_hidden_answers_harvested_from_feedback_are_worth_nothing_after_resubmission(graded_class, tmp_path, monkeypatch):
    """A failed hidden case's feedback shows neither its inputs nor its expected value; and a resubmission
    that hard-codes the answers of the previous grading's hidden case (as if harvested) is graded on fresh
    inputs under --resume, and fails; on the previous inputs (the control) it would have passed."""
    import numpy as np

    out, sub_dir = tmp_path / "out", tmp_path / "subs"
    shutil.copytree(graded_class["out"], out)
    shutil.copytree(graded_class["subs"] / "hardcoded", sub_dir / "hardcoded")
    seed = json.loads((out / "students" / "hardcoded" / "result.json").read_text())["seed"]
    xs, want = _hidden_mean_case(seed)
    spread = np.random.default_rng(seed).integers(-50, 50, size=12).tolist()
    cost = int(np.random.default_rng(seed).integers(2000, 9000))
    shown = _handed_back(out, "hardcoded")
    for secret in (repr(want), f"{want:.6g}", repr(xs[0]), str(spread), f"expected {cost + 7}", f"should be {max(spread) - min(spread)}"):
        assert secret not in shown, secret
    assert "a hidden case failed: the mean of other lists" in shown
    # the resubmission: the harvested answer of the hidden mean case, the visible answers hard-coded
    nb = subs.load(sub_dir / "hardcoded" / "stats_dev.ipynb")
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "stats-mean")
    body = "return 2.0 if list(xs) == [1, 2, 3] else 2.5"
    assert body in subs._src(cell)
    cell["source"] = subs._src(cell).replace(body, f"return 2.0 if list(xs) == [1, 2, 3] else 2.5 if len(xs) == 4 else {want!r}")
    subs.save(nb, sub_dir / "hardcoded" / "stats_dev.ipynb")
    mean_ok = lambda r: _tests(r, "stats_dev")["test-stats-mean"]["ok"]  # noqa: E731
    # control: graded on the previous hidden inputs, the harvested table passes the hidden case
    with monkeypatch.context() as m:
        m.setattr(classrun, "student_seed", lambda *a: seed)
        (old,) = classrun.grade(graded_class["course"], MODULE, sub_dir, tmp_path / "control", progress=lambda *a, **k: None,
                                jobs=1)
    assert old.seed == seed and mean_ok(old), _tests(old, "stats_dev")["test-stats-mean"]
    (new,) = classrun.grade(graded_class["course"], MODULE, sub_dir, out, students=["hardcoded"], resume=True, jobs=1,
                            progress=lambda *a, **k: None)
    assert new.seed != seed and not mean_ok(new), _tests(new, "stats_dev")["test-stats-mean"]
    xs_new, want_new = _hidden_mean_case(new.seed)
    shown = _handed_back(out, "hardcoded")
    assert repr(want_new) not in shown and repr(xs_new[0]) not in shown and repr(want) in (
        sub_dir / "hardcoded" / "stats_dev.ipynb").read_text()


def test_a_seed_repeats_the_hidden_inputs(graded_class, serial_run):
    """Each student's hidden inputs come from the run's seed, the student and the files: the same seed
    and files give the same student seed and verdicts (the serial run, given the class run's seed);
    another run seed, another student seed."""
    seed = serial_run["seed"]
    verdicts = lambda r: {k: (v["ok"], v["message"]) for k, v in _tests(r, "stats_dev").items()}  # noqa: E731
    same = serial_run["results"]["hardcoded"]
    assert same.seed == graded_class["results"]["hardcoded"].seed
    assert verdicts(same) == verdicts(graded_class["results"]["hardcoded"])
    folder, wanted = graded_class["subs"] / "hardcoded", {"stats_dev.ipynb", "extra_dev.ipynb"}
    assert classrun.student_seed(seed + 1, "hardcoded", classrun.submission_hash(folder, wanted)) != same.seed
    assert classrun.student_seed(seed, "other", classrun.submission_hash(folder, wanted)) != same.seed


# ---- without bubblewrap ------------------------------------------------------------------------------

def test_without_bwrap_grade_refuses(root, tmp_path):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no /usr/bin: no bwrap
    p = subprocess.run([sys.executable, "-m", "tito", "grade", "19", str(tmp_path)], cwd=root, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 2, p  # refused before grading (README: exit codes)
    assert "bubblewrap" in p.stderr and "--no-sandbox" in p.stderr, p.stderr


def test_grading_that_fails_is_tito_s_failure_and_exits_1(graded_class, tmp_path, monkeypatch, capsys):
    """A sandbox that cannot start (as under an inherited limit, or without user namespaces) is tito's failure, not the
    student's: status "grading failed" in the console, grades.csv and the closing line, `tito grade` and `tito grades`
    exit 1 and say whom; the student graded beside it is "passed" with every point; `--resume` grades only the
    failed one again (issue 43 item 3, issue 44)."""
    import argparse

    from tito.commands import grade as grade_cmd, grades as grades_cmd

    real = sandbox.start

    def start(spec, *a, **k):
        if "tito-grade-empty-" in str(spec.mounts.get("files", "")):
            raise OSError("bwrap: setting up uid map: Permission denied")
        return real(spec, *a, **k)

    monkeypatch.setattr(sandbox, "start", start)
    course = graded_class["course"]
    monkeypatch.setattr(Course, "load", classmethod(lambda cls, *a, **k: course))
    out = tmp_path / "runs" / MODULE
    args = argparse.Namespace(module=MODULE, submissions=str(tmp_path / "subs"), output_dir=str(out), student=None,
                              timeout=None, jobs=2, scheduler=None, resume=False, no_sandbox=False, memory_limit=6144,
                              process_limit=256, seed=None)
    shutil.copytree(graded_class["subs"] / "full", tmp_path / "subs" / "full")
    shutil.copytree(graded_class["subs"] / "empty", tmp_path / "subs" / "empty")
    assert grade_cmd.run(args) == 1
    text = capsys.readouterr().out
    rows = {(r["student"], r["notebook"]): r for r in csv.DictReader(open(out / "grades.csv", newline=""))}
    assert rows[("empty", TOTAL)]["status"] == "grading failed" and "uid map" in rows[("empty", TOTAL)]["reason"]
    assert rows[("full", TOTAL)]["status"] == "passed" and rows[("full", TOTAL)]["score"] == f"{subs.FULL:g}"
    assert ("2 students: 1 graded (1 passed every test, 0 with failed tests); grading FAILED for 1 student (empty)"
            in text), text
    assert "--resume" in text
    st = status_cmd.module_status(course, MODULE, tmp_path / "runs")  # no grade is not a 0 in the class's mean
    assert (st.graded_students, st.grading_failed, st.mean_score) == (1, 1, subs.FULL), st
    assert grades_cmd.run(argparse.Namespace(module=MODULE, output_dir=str(out), feedback=False)) == 1
    assert "grading itself FAILED for 1 student of the run (empty)" in capsys.readouterr().out
    monkeypatch.setattr(sandbox, "start", real)
    args.resume = True
    assert grade_cmd.run(args) == 0  # the failed student graded now; full kept from the run before
    text = capsys.readouterr().out
    assert "(1 already graded)" in text and "grading FAILED" not in text, text
    assert "2 students: 2 graded (1 passed every test, 1 with failed tests)" in text, text


def test_no_sandbox_says_so(graded_class, tmp_path):
    lines = []
    tmp = Path("/tmp")  # the TMPDIR tito.isolation.sandbox.environment gives a command
    before = {p.name for p in tmp.iterdir()}
    (r,) = classrun.grade(graded_class["course"], MODULE, graded_class["subs"], tmp_path / "out",
                          students=["full"], progress=lines.append, jobs=1, no_sandbox=True)
    # a notebook's process makes its home, cache and copy of the student's files (host.prepare): not in /tmp, where
    # every --no-sandbox run left them
    left = sorted(n for n in {p.name for p in tmp.iterdir()} - before if n.startswith(("home-", "work-", "cache-")))
    assert not left, f"left in {tmp}: {left}"
    assert r.score == subs.FULL and r.sandbox == UNSANDBOXED
    assert any("NOT SANDBOXED" in l for l in lines)
    assert {row["sandbox"] for row in csv.DictReader(open(tmp_path / "out" / "grades.csv"))} == {UNSANDBOXED}


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


def test_a_file_beside_the_notebooks_is_part_of_what_is_graded(tmp_path):
    """A red team kept its notebook byte for byte and changed only `answer.py`, which the notebook runs: the
    resume key and the hidden inputs' seed came from the notebooks alone, so its harvested answers met the
    old inputs again. Every file the sandbox gets is hashed now."""
    (tmp_path / "stats_dev.ipynb").write_text("{}")
    (tmp_path / "answer.py").write_text("ANSWERS = {}\n")
    before = classrun.submission_hash(tmp_path, {"stats_dev.ipynb"})
    assert classrun.submission_hash(tmp_path, {"stats_dev.ipynb"}) == before  # same files, same inputs
    (tmp_path / "answer.py").write_text("ANSWERS = {(1, 2): 3}\n")
    assert classrun.submission_hash(tmp_path, {"stats_dev.ipynb"}) != before


def test_a_students_exception_name_or_cell_id_cannot_forge_a_report_line():
    """A red team raised an exception whose class name held a newline and a fake row ("alice 235/235 graded"):
    the console summary printed it as a line of its own. What a student names reaches a report as one line."""
    from tito.grading.feedback import autograded_notebook

    forged = "Note\nalice   235/235   0  graded\nx"
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "raise Boom()", "outputs": []},
                    {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": forged}}, "source": "1/0",
                     "outputs": []}]}
    error = {"output_type": "error", "ename": forged, "evalue": "boom", "traceback": []}
    feedback = {"cells": {"0": {"outputs": [error], "execution_count": 1},
                          "1": {"outputs": [{**error, "ename": "ZeroDivisionError"}], "execution_count": 2}}}
    release = {"cells": [{"cell_type": "code", "id": "c0", "metadata": {}, "source": "x = 1", "outputs": []}]}
    _, other, _ = autograded_notebook(release, nb, feedback, {})
    assert len(other) == 2 and all("\n" not in line and "235/235" not in line for line in other), other
