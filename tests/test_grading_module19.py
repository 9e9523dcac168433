"""`tito grade` on the real Module 19: the instructor's solutions get every autograded point (written answers
pending), the release none, each test naming what is missing; the notebooks whose tests time real code keep every
point beside a CPU hog. Apart from tests/test_grading.py (its small course's class) so that `tito test`'s two
xdist workers (one file each) run the two long files side by side. Needs bubblewrap: fails without it.
"""
import csv
import json
import shutil
import subprocess
import sys

import pytest
from fixtures import submissions as subs

from tito.grading import classrun
from tito.grading.per_student import TOTAL
from tito.notebooks import nbgrader_glue


@pytest.fixture(scope="module", autouse=True)
def one_template_per_assignment(tmp_path_factory):
    """Each grading run here copies its assignment template and read-only cache, each built once per test run
    (subs.templates_built_once, subs.warm_caches_built_once): shared with tests/test_class_gradebook.py."""
    with subs.templates_built_once(tmp_path_factory), subs.warm_caches_built_once(tmp_path_factory):
        yield


def _tests(result, notebook: str) -> dict:
    return next(n.tests for n in result.notebooks if n.notebook == notebook)


# the release notebooks "blank" hands in: the one with most graded cells and the one with the written answers (every
# graded cell of every release notebook fails on its stubs: tests/test_lesson.py; 12 of them here cost ~19 CPU-s more)
BLANK = ("results_dev.ipynb", "systems_thinking_dev.ipynb")


@pytest.mark.slow
def test_the_instructors_solutions_get_every_point_of_module_19(course, tmp_path, bwrap, release_19):
    """The solution notebooks score every autograded point (written answers pending for the instructor),
    graded beside three other students (two at once: each student's tests and feedback run side by side, so
    the two cores are shared by four busy processes most of the run; a CPU hog beside the tests that measure
    time: the next test); two release notebooks score 0, each test naming what is missing, the others not
    handed in counting their points in the maximum; a written answer is
    pending manual grading, an unanswered one says so, neither is a failure."""
    module = "19_benchmarking"
    graded = nbgrader_glue.module_assignment_notebooks(course.nbs_dir, module)
    rel = release_19  # read only: built once per test run (tests/shared_fixtures.py)
    assert not rel.leaks
    expected = manual = 0.0
    for nb in graded:
        src = subs.load(nb)
        expected += sum(subs.points(src).values())
        manual += sum(float(c["metadata"]["nbgrader"]["points"]) for c in src["cells"]
                      if c["cell_type"] == "markdown" and c["metadata"].get("nbgrader", {}).get("grade"))
    sub_dir = tmp_path / "subs"
    for nb in graded:
        shutil.copy2(nb, (sub_dir / "solution").mkdir(parents=True, exist_ok=True) or sub_dir / "solution" / nb.name)
        if nb.name in BLANK:
            shutil.copy2(rel.release_dir / nb.name, (sub_dir / "blank").mkdir(exist_ok=True) or sub_dir / "blank" / nb.name)
    # "one" hands in only the systems-thinking release, with one written answer: pending, never a failure
    thinking = json.loads((rel.release_dir / "systems_thinking_dev.ipynb").read_text(encoding="utf-8"))
    written = {c["metadata"]["nbgrader"]["grade_id"]: (i, float(c["metadata"]["nbgrader"]["points"]))
               for i, c in enumerate(thinking["cells"])
               if c["cell_type"] == "markdown" and c["metadata"].get("nbgrader", {}).get("grade")}
    assert len(written) == 4, sorted(written)
    thinking["cells"][written["systems-thinking-answer-a"][0]]["source"] = "Four times the samples halve the interval."
    (sub_dir / "one").mkdir()
    (sub_dir / "one" / "systems_thinking_dev.ipynb").write_text(json.dumps(thinking), encoding="utf-8")
    # "reader" hands in the energy notebook whose measurement reads its test's fake counter instead of measuring
    energy = subs.load(next(nb for nb in graded if nb.name == "energy_dev.ipynb"))
    subs.save(subs.energy_fake_reader(energy), sub_dir / "reader" / "energy_dev.ipynb")
    res = {r.student: r for r in classrun.grade(course, module, sub_dir, tmp_path / "out",
                                                progress=lambda *a, **k: None, jobs=2)}
    sol, blank = res["solution"], res["blank"]
    assert sol.max_score == expected and sol.manual_pending == manual, sol
    assert sol.score == expected - manual and sol.reason == "", sol.reason
    assert blank.score == 0 and blank.max_score == expected and blank.manual_pending == 0
    assert "not yet implemented: " in blank.reason and "test did not pass" not in blank.reason
    assert {n.notebook: n.status for n in blank.notebooks} == {
        nb.stem: "tests failed" if nb.name in BLANK else "missing" for nb in graded}, blank.notebooks
    for gid, (_, points) in written.items():
        assert f"{gid} (0/{points:g}): no written answer" in blank.reason, blank.reason
    one = res["one"]
    assert one.manual_pending == written["systems-thinking-answer-a"][1] and "systems-thinking-answer-a" not in one.reason
    assert f"systems-thinking-answer-b (0/{written['systems-thinking-answer-b'][1]:g}): no written answer" in one.reason
    rows = {(r["student"], r["notebook"]): r for r in csv.DictReader(open(tmp_path / "out" / "grades.csv", newline=""))}
    assert rows[("solution", TOTAL)]["manual_pending"] == f"{manual:g}"
    assert rows[("one", "systems_thinking_dev")]["manual_pending"] == f"{written['systems-thinking-answer-a'][1]:g}"
    # "one" handed in the release's code cells unchanged: their tests failed (the written answers are no failure)
    assert rows[("one", "systems_thinking_dev")]["status"] == "tests failed", rows[("one", "systems_thinking_dev")]
    assert "not yet implemented: " in rows[("one", "systems_thinking_dev")]["reason"]
    assert (tmp_path / "out" / "students" / "blank" / "feedback" / "results_dev.html").is_file()
    reader = _tests(res["reader"], "energy_dev")  # the fake stays in the judge: nothing to read there
    assert not reader["test-energy-counter"]["ok"] and reader["test-energy-rapl-zones"]["ok"], reader


# the notebooks whose graded tests time real code (precise_timer around a spin, a model's latency and its
# compliance decision) and hold the statistics every other verdict rests on
TIMED = ("results_dev.ipynb", "tinymlperf_dev.ipynb")


@pytest.mark.slow
def test_module_19s_timing_tests_pass_for_the_solutions_beside_a_cpu_hog(course, tmp_path, bwrap):
    """The solutions of the notebooks whose graded tests time real code score every point with a CPU hog
    beside the run (jobs 1: the student's tests and feedback and the hog, three busy processes on the
    machine); the whole module's solutions are graded (without a hog) by the test above."""
    module = "19_benchmarking"
    graded = [nb for nb in nbgrader_glue.module_assignment_notebooks(course.nbs_dir, module) if nb.name in TIMED]
    assert [nb.name for nb in graded] == sorted(TIMED)
    expected = sum(sum(subs.points(subs.load(nb)).values()) for nb in graded)
    for nb in graded:
        shutil.copy2(nb, (tmp_path / "subs" / "solution").mkdir(parents=True, exist_ok=True) or
                     tmp_path / "subs" / "solution" / nb.name)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        (sol,) = classrun.grade(course, module, tmp_path / "subs", tmp_path / "out", notebooks=graded,
                                progress=lambda *a, **k: None, jobs=1)
    finally:
        hog.kill()
        hog.wait()
    assert (sol.score, sol.max_score, sol.status, sol.reason) == (expected, expected, "passed", ""), sol.reason
