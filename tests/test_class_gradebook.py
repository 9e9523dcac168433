"""The class gradebook (tito.grading.course_dir), formgrader and `tito grades` on a generated class.

Module 19's real assignment template (nbgrader generate_assignment, once), and a class published as
`tito grade` publishes students (tests/fixtures/gradebook_class.py: autograded notebooks and verdicts
generated, nobody graded): one nbgrader course directory with every student, the judge's points as the
autograded scores, written answers pending; hand-graded scores survive a regrade and a changed answer
is flagged; the final table, the per-question table and nbgrader's export; feedback with the hand-graded
points; formgrader over HTTP, and in headless Chromium (skipped, saying why, where none is installed).
"""
import csv
import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import gradebook_class as gc
from fixtures import submissions as subs
from tito.notebooks import nbgrader_glue
from tito.notebooks.student_release import data_files
from tito.grading import course_dir, final_grades, gradebook
from tito.grading.formgrader_server import Formgrader

MODULE = "19_benchmarking"
STUDENTS = ["ann", "bob", "cat"]  # cat (every third) leaves the written answers as released
NB, ANSWER = "systems_thinking_dev", "systems-thinking-answer-a"


@pytest.fixture(scope="module")
def template(course, tmp_path_factory):
    """Module 19's assignment template as a grading run builds it (built once per test run and shared with
    the grading runs of Module 19: subs.templates_built_once); read it, never write into it."""
    nbs = nbgrader_glue.module_assignment_notebooks(course.nbs_dir, MODULE)
    with subs.templates_built_once(tmp_path_factory):
        return gradebook.build_template(tmp_path_factory.mktemp("tpl") / "course", MODULE, nbs, course.course_id, 60,
                                        data_files(course, MODULE))


@pytest.fixture(scope="module")
def klass(course, template, tmp_path_factory):
    """A published class of three, merged into its class gradebook as a grading run does."""
    out = tmp_path_factory.mktemp("grades") / MODULE
    results = gc.publish_class(out, template, MODULE, STUDENTS)
    course_dir.prepare(out, template, MODULE, course.course_id)
    flagged = course_dir.merge(out, MODULE, results)
    return {"out": out, "results": {r.student: r for r in results}, "flagged": flagged}


def _copy(klass, tmp_path) -> Path:
    out = tmp_path / MODULE
    shutil.copytree(klass["out"], out)
    (course_dir.path(out) / "nbgrader_config.py").unlink()  # it names the original course root
    return out


def _with_mallory(out: Path, template: Path):
    """mallory (tests/fixtures/gradebook_class.hostile_result: her written answer attacks formgrader) published
    and merged into the copy of the class at `out`, as `tito grade` does; returns her result."""
    from tito.grading import classrun

    r, files = gc.hostile_result(template, MODULE, "mallory", NB, ANSWER)
    classrun.publish(out, r, files)
    assert course_dir.merge(out, MODULE, [r]) == {"mallory": []}
    return r


def _markup(page: str) -> list[tuple[str, dict]]:
    """Every element of an HTML page: (tag, attributes)."""
    from html.parser import HTMLParser

    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {k: v or "" for k, v in attrs}))

    Tags().feed(page)
    return found


def _all_grades(out: Path) -> dict:
    """(student, notebook, cell) -> (hand-graded score, extra credit) of the whole class gradebook."""
    from nbgrader.api import Grade, GradeCell, Notebook, SubmittedAssignment, SubmittedNotebook

    with course_dir.open_gradebook(course_dir.path(out)) as gb:
        q = (gb.db.query(SubmittedAssignment.student_id, Notebook.name, GradeCell.name, Grade.manual_score, Grade.extra_credit)
             .join(SubmittedNotebook, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
             .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
             .join(Grade, Grade.notebook_id == SubmittedNotebook.id).join(GradeCell, GradeCell.id == Grade.cell_id))
        return {(s, n, c): (m, e) for s, n, c, m, e in q}


def _written_points(template) -> dict[str, float]:
    nb = json.loads((template / "source" / MODULE / f"{NB}.ipynb").read_text(encoding="utf-8"))
    return {c["metadata"]["nbgrader"]["grade_id"]: float(c["metadata"]["nbgrader"]["points"])
            for c in nb["cells"] if course_dir.is_written(c)}


def _set_manual(out: Path, student: str, gid: str, score: float, comment: str = "") -> None:
    with course_dir.open_gradebook(course_dir.path(out)) as gb:
        g = gb.find_grade(gid, NB, MODULE, student)
        g.manual_score, g.needs_manual_grade = score, False
        if comment:
            gb.find_comment(gid, NB, MODULE, student).manual_comment = comment
        gb.db.commit()


def test_one_course_directory_with_every_student_in_nbgraders_layout(klass, template):
    course = course_dir.path(klass["out"])
    assert (course / "gradebook.db").is_file() and (course / "nbgrader_config.py").is_file()
    for sub in ("source", "release"):
        assert sorted(p.name for p in (course / sub / MODULE).glob("*.ipynb")) == \
               sorted(p.name for p in (template / sub / MODULE).glob("*.ipynb"))
    subs = {s.student: s for s in final_grades.read(course, MODULE)}
    assert sorted(subs) == STUDENTS
    written = _written_points(template)
    for s in STUDENTS:
        r = klass["results"][s]
        assert sorted(p.stem for p in (course / "autograded" / s / MODULE).glob("*.ipynb")) == \
               sorted(n.notebook for n in r.notebooks)
        # the autograded scores are the judge's points, cell by cell
        judge = {(n.notebook, gid): t["points"] for n in r.notebooks for gid, t in n.tests.items()}
        book = {(c.notebook, c.name): c for c in subs[s].cells}
        assert {k: book[k].score for k in judge} == judge and judge
        for gid, pts in written.items():
            c = book[(NB, gid)]
            if s == "cat":  # left as released: 0, nobody needs to look
                assert (c.auto_score, c.needs_manual_grade) == (0.0, False)
            else:
                assert (c.auto_score, c.needs_manual_grade) == (None, True) and c.max_score == pts
        total = [row for row in final_grades.table([subs[s]]) if row["notebook"] == final_grades.TOTAL][0]
        assert float(total["total"]) == r.score and float(total["max_score"]) == r.max_score
        assert float(total["pending"]) == r.manual_pending
    # the instructor's copy shows each written answer's answer key; the release does not hold it
    ann = json.loads((course / "autograded" / "ann" / MODULE / f"{NB}.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in ann["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == ANSWER)
    assert "Rubric" in cell["metadata"]["tito"]["answer_key"] and gc.answer("ann", ANSWER) in cell["source"]


def test_hand_graded_scores_survive_a_regrade_and_a_changed_answer_is_flagged(klass, template, tmp_path):
    out = _copy(klass, tmp_path)
    course_dir.prepare(out, template, MODULE, "tinytorch")
    other = next(g for g in _written_points(template) if g != ANSWER)
    _set_manual(out, "ann", ANSWER, 2.0, "Right about t.")
    _set_manual(out, "bob", ANSWER, 1.0)
    _set_manual(out, "bob", other, 1.0)
    # regrade: ann unchanged, bob rewrote ANSWER (not `other`), ann passes every test now
    ann, files = gc.student_result(template, MODULE, "ann", full=True)
    from tito.grading import classrun
    classrun.publish(out, ann, files)
    nb_path = out / "students" / "bob" / "autograded" / f"{NB}.ipynb"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == ANSWER:
            c["source"] = "A new answer, after the grade."
    nb_path.write_text(json.dumps(nb), encoding="utf-8")
    flagged = course_dir.merge(out, MODULE, [ann, klass["results"]["bob"]])
    assert flagged == {"ann": [], "bob": [f"{NB}/{ANSWER}"]}
    subs = {s.student: s for s in final_grades.read(course_dir.path(out), MODULE)}
    book = {s: {(c.notebook, c.name): c for c in subs[s].cells} for s in subs}
    assert book["ann"][(NB, ANSWER)].manual_score == 2.0 and not book["ann"][(NB, ANSWER)].needs_manual_grade
    assert subs["ann"].comments[(NB, ANSWER)] == "Right about t."
    assert book["bob"][(NB, ANSWER)].manual_score == 1.0 and book["bob"][(NB, ANSWER)].needs_manual_grade
    assert book["bob"][(NB, other)].manual_score == 1.0 and not book["bob"][(NB, other)].needs_manual_grade
    rows = {(r["student"], r["notebook"]): r for r in final_grades.table(list(subs.values()))}
    assert float(rows[("ann", final_grades.TOTAL)]["autograded"]) == ann.max_score - ann.manual_pending
    assert rows[("bob", NB)]["status"] == "regrade"
    assert float(rows[("bob", NB)]["regrade"]) == _written_points(template)[ANSWER]
    assert float(rows[("ann", final_grades.TOTAL)]["hand_graded"]) == 2.0
    # what the regrade reports as left to grade by hand is the gradebook's: ann's graded answer is not pending
    # (her new result counted every written answer), bob's changed one is (issue 44: the console and grades.csv said 13)
    written = sum(_written_points(template).values())
    assert ann.manual_pending == written
    classrun.pending_from_gradebook(out, MODULE, ann)
    assert ann.manual_pending == written - _written_points(template)[ANSWER] == float(rows[("ann", final_grades.TOTAL)]["pending"])
    assert json.loads((out / "students" / "ann" / "result.json").read_text())["manual_pending"] == ann.manual_pending
    bob = copy.deepcopy(klass["results"]["bob"])
    classrun.pending_from_gradebook(out, MODULE, bob)
    assert bob.manual_pending == written - _written_points(template)[other]  # `other` graded; ANSWER to grade again
    assert {n.notebook: n.manual_pending for n in bob.notebooks}[NB] == bob.manual_pending
    # --resume-like merge of students already in the gradebook changes nothing
    assert course_dir.merge(out, MODULE, [ann], only_new=True) == {}


def test_grades_command_tables_and_feedback(klass, template, tmp_path, root):
    out = _copy(klass, tmp_path)
    course_dir.prepare(out, template, MODULE, "tinytorch")
    _set_manual(out, "ann", ANSWER, 2.0, "Good reading of your own figures.")
    # one of cat's notebooks cannot be read: cat's failure only, named; everyone else gets their pages
    (out / "students" / "cat" / "autograded" / f"{NB}.ipynb").write_text('{"cells": [', encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "tito", "grades", "19", "--output-dir", str(out), "--feedback"],
                       cwd=root, capture_output=True, text=True, env={**os.environ, "TITO_NO_BOOTSTRAP": "1"})
    assert p.returncode == 1 and "feedback not written for 1 student: cat" in p.stderr, p.stderr
    assert f"cat: {NB}.ipynb: its feedback page could not be made (JSONDecodeError" in p.stderr, p.stderr
    pages = {f.relative_to(course_dir.path(out) / "feedback").as_posix() for f in
             (course_dir.path(out) / "feedback").rglob("*.html")}
    n = len(list((template / "release" / MODULE).glob("*.ipynb")))
    assert len(pages) == 3 * n - 1 and f"cat/{MODULE}/{NB}.html" not in pages
    r = klass["results"]["ann"]
    line = next(l for l in p.stdout.splitlines() if l.startswith("ann "))
    assert f"{r.score + 2:g}/{r.max_score:g}" in line and "pending" in line, line
    final = list(csv.DictReader(open(out / "final_grades.csv", newline="")))
    assert list(final[0]) == final_grades.FIELDS
    tot = next(x for x in final if x["student"] == "ann" and x["notebook"] == final_grades.TOTAL)
    assert float(tot["hand_graded"]) == 2 and float(tot["total"]) == r.score + 2
    assert float(tot["pending"]) == r.manual_pending - _written_points(template)[ANSWER]
    q = list(csv.DictReader(open(out / "questions.csv", newline="")))
    graded = {f"{n.notebook}:{gid}" for n in r.notebooks for gid in n.tests} | {f"{NB}:{g}" for g in _written_points(template)}
    assert set(q[0]) - {"student", "total"} == graded
    ann = next(x for x in q if x["student"] == "ann")
    assert ann[f"{NB}:{ANSWER}"] == "2" and ann["total"] == tot["total"]
    assert next(x for x in q if x["student"] == "bob")[f"{NB}:{ANSWER}"] == "pending"
    export = list(csv.DictReader(open(out / "nbgrader_export.csv", newline="")))
    assert {"assignment", "student_id", "raw_score", "score", "max_score"} <= set(export[0])
    assert float(next(x for x in export if x["student_id"] == "ann")["score"]) == r.score + 2
    page = (course_dir.path(out) / "feedback" / "ann" / MODULE / f"{NB}.html").read_text(encoding="utf-8")
    assert "2 of 3 points" in page and "Good reading of your own figures." in page
    assert "Rubric (3 points)" not in page  # the answer key never reaches a student


def test_status_finds_a_run_written_anywhere(klass, course, tmp_path, monkeypatch):
    from tito.commands import status as status_cmd
    out = _copy(klass, tmp_path)
    root = tmp_path / "root"
    shutil.copytree(course.root / "nbs", root / "nbs")
    for f in ("settings.ini", "pyproject.toml"):
        shutil.copy2(course.root / f, root / f)
    from tito.config import Course
    c = Course.load(root)
    st = status_cmd.module_status(c, MODULE)
    assert st.graded_students == 0 and st.looked_in == [str(root / "build" / "grades" / MODULE)]
    classrun_csv = out / "grades.csv"
    from tito.grading import classrun
    classrun.write_csv(classrun_csv, [row for r in klass["results"].values() for row in r.rows()])
    course_dir.record_run(root, MODULE, out)
    st = status_cmd.module_status(c, MODULE)
    assert st.grades_dir == str(out.resolve()) and st.graded_students == 3
    assert st.final_mean == round(sum(r.score for r in klass["results"].values()) / 3, 2)
    assert st.hand_pending == sum(r.manual_pending for r in klass["results"].values()) and st.hand_pending_students == 2


def test_formgrader_lists_and_shows_a_written_answer_with_its_answer_key(klass, template, tmp_path):
    out = _copy(klass, tmp_path)
    course_dir.prepare(out, template, MODULE, "tinytorch")
    # a student's markdown runs no script in the instructor's browser
    path = course_dir.path(out) / "autograded" / "bob" / MODULE / f"{NB}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == ANSWER)
    cell["source"] = "My answer <script>alert('xss')</script><img src=x onerror=alert(1)>"
    path.write_text(json.dumps(nb), encoding="utf-8")
    _with_mallory(out, template)
    with Formgrader(course_dir.path(out)) as fg:
        listed = json.loads(fg.get(f"/formgrader/api/submitted_notebooks/{MODULE}/{NB}"))
        assert sorted(x["student"] for x in listed) == STUDENTS + ["mallory"]
        assert {x["student"]: x["needs_manual_grade"] for x in listed} == {"ann": True, "bob": True, "cat": False,
                                                                            "mallory": True}
        ids = {x["student"]: x["id"] for x in listed}
        page = fg.get(f"/formgrader/submissions/{ids['ann']}/").decode()
        assert gc.answer("ann", ANSWER).replace("'", "&#39;") in page or gc.answer("ann", ANSWER) in page
        assert "Answer key and rubric" in page and "Rubric (3 points)" in page
        bob = fg.get(f"/formgrader/submissions/{ids['bob']}/").decode()
        assert "My answer" in bob and "<script>alert" not in bob and "<img src=x onerror" not in bob  # shown as text
        # mallory's page: her answer's text, no element of hers with an id, a class, a handler or a resource; one
        # answer key box per written answer (the source's), every score box the release's
        page = fg.get(f"/formgrader/submissions/{ids['mallory']}/").decode()
        tags = _markup(page)
        written = _written_points(template)
        assert "My answer." in page and page.count("tito-answer-key") == len(written) == 4
        boxes = [a["id"] for t, a in tags if t == "input" and "score" in a.get("class", "").split()]
        assert sorted(boxes) == sorted(c["metadata"]["nbgrader"]["grade_id"] for c in json.loads(
            (course_dir.path(out) / "release" / MODULE / f"{NB}.ipynb").read_text())["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade"))
        ids_ = [a["id"] for t, a in tags if "id" in a]
        twice = {i for i in ids_ if ids_.count(i) > 1}
        assert twice <= {"notebook", "notebook-container"}, twice  # formgrader's template's own; no score box's
        handlers = [v for t, a in tags for k, v in a.items() if k.startswith("on")]
        assert handlers and all(v.startswith("toggle_name(") for v in handlers), handlers  # formgrader's own only
        assert not [a for t, a in tags if "alert" in a.get("class", "").split()]
        assert not [a for t, a in tags if t == "img" and not a.get("src", "data:").startswith("data:")]
        assert gc.PWNED not in page and "onerror" not in page
    assert fg.proc is None


def _chrome():
    """A headless Chromium driven by selenium, or None with the reason."""
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver:
        return None, ("no Chromium: `apt-get install -y chromium chromium-driver` (Debian) gives /usr/bin/chromium "
                      "and /usr/bin/chromedriver")
    return (binary, driver), ""


def test_grading_a_written_answer_in_a_real_browser(klass, template, tmp_path, root):
    """Headless Chromium opens ann's written answer in formgrader, enters a score and a comment; `tito grades`
    then shows the new total. The page is kept as a PNG ($TITO_SCREENSHOT_DIR too, when set: docs/).
    Then mallory's page (tests/fixtures/gradebook_class.hostile_result: her answer holds elements named after the
    other score boxes, a look-alike answer key box, scripts, a pixel; a forged grade_id and answer key; broken
    notebook metadata): "Full credit" on her answer changes that grade only, no script of hers ran, and the page
    shows one answer key box per written answer."""
    found, why = _chrome()
    if not found:
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    out = _copy(klass, tmp_path)
    course_dir.prepare(out, template, MODULE, "tinytorch")
    _with_mallory(out, template)
    opts = webdriver.ChromeOptions()
    opts.binary_location = found[0]
    opts.page_load_strategy = "eager"  # the page's own DOM, not its CDN scripts (MathJax; no network here)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 f"--user-data-dir={tmp_path / 'chrome-profile'}", "--window-size=1280,1600"):
        opts.add_argument(flag)
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium: never download a driver or a browser
    with Formgrader(course_dir.path(out)) as fg:
        listed = json.loads(fg.get(f"/formgrader/api/submitted_notebooks/{MODULE}/{NB}"))
        sid = next(x["id"] for x in listed if x["student"] == "ann")
        browser = webdriver.Chrome(options=opts, service=Service(executable_path=found[1]))
        try:
            browser.get(fg.url)  # the URL `tito formgrader` prints: logs in (a cookie for the whole server)
            browser.get(f"{fg.base}/formgrader/submissions/{sid}/")
            wait = WebDriverWait(browser, 240)  # a full parallel test run slowed the page past 60 s twice
            score = wait.until(lambda b: b.find_element(By.ID, ANSWER))
            wait.until(lambda b: "Answer key and rubric" in b.page_source)
            # formgrade.js binds a score's view to its field once its grades and comments arrive (an AJAX fetch
            # each): typed before that, an edit is never saved (a full test run's load once gave 240 s of nothing)
            wait.until(lambda b: b.execute_script("return typeof formgrader !== 'undefined' && "
                                                  "formgrader.grades.loaded && formgrader.comments.loaded"))
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", score)
            score.clear()
            score.send_keys("2", Keys.TAB)
            comment = browser.find_element(By.ID, f"{ANSWER}-comment")
            comment.send_keys("Right: t shrinks too at small n.", Keys.TAB)

            def saved(_):
                with course_dir.open_gradebook(course_dir.path(out)) as gb:
                    g = gb.find_grade(ANSWER, NB, MODULE, "ann")
                    c = gb.find_comment(ANSWER, NB, MODULE, "ann")
                    return g.manual_score == 2.0 and c.manual_comment == "Right: t shrinks too at small n."
            wait.until(saved)
            browser.execute_script("document.activeElement.blur();"
                                   "arguments[0].closest('.nbgrader_cell').scrollIntoView({block: 'center'});", score)
            shot = tmp_path / "formgrader_written_answer.png"
            browser.save_screenshot(str(shot))
            # mallory's page: press "Full credit" on her written answer
            before = _all_grades(out)
            mid = next(x["id"] for x in listed if x["student"] == "mallory")
            browser.get(f"{fg.base}/formgrader/submissions/{mid}/")
            box = wait.until(lambda b: b.find_element(By.ID, ANSWER))
            wait.until(lambda b: b.execute_script("return typeof jQuery !== 'undefined' && jQuery.isReady"))
            panel = box.find_element(By.XPATH, "./ancestor::div[contains(concat(' ', @class, ' '), ' nbgrader_cell ')]")
            button = panel.find_element(By.CSS_SELECTOR, "button.full-credit")
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
            button.click()
            points = _written_points(template)[ANSWER]

            def full(_):
                with course_dir.open_gradebook(course_dir.path(out)) as gb:
                    return gb.find_grade(ANSWER, NB, MODULE, "mallory").manual_score == points
            wait.until(full)
            wait.until(lambda b: b.execute_script("return jQuery.active") == 0)  # every save it sent has returned
            pwned = browser.execute_script(f"return typeof {gc.PWNED}")
            keys = len(browser.find_elements(By.CSS_SELECTOR, ".tito-answer-key"))
            alerts = len(browser.find_elements(By.CSS_SELECTOR, ".alert-warning"))
            ids = {gid: len(browser.find_elements(By.ID, gid)) for gid in _written_points(template)}
        finally:
            browser.quit()
    after = _all_grades(out)
    changed = {k: (before[k], after[k]) for k in after if after[k] != before.get(k)}
    assert changed == {("mallory", NB, ANSWER): ((None, None), (points, None))}, changed
    assert pwned == "undefined" and alerts == 0  # no script of hers ran; no look-alike box
    assert keys == 4 and set(ids.values()) == {1}, (keys, ids)  # one answer key box and one score box per answer
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("TITO_SCREENSHOT_DIR"):
        shutil.copy2(shot, Path(os.environ["TITO_SCREENSHOT_DIR"]) / shot.name)
    p = subprocess.run([sys.executable, "-m", "tito", "grades", "19", "--output-dir", str(out)], cwd=root,
                       capture_output=True, text=True, env={**os.environ, "TITO_NO_BOOTSTRAP": "1"})
    assert p.returncode == 0, p.stderr
    r = klass["results"]["ann"]
    line = next(l for l in p.stdout.splitlines() if l.startswith("ann "))
    assert line.split()[2] == "2" and f"{r.score + 2:g}/{r.max_score:g}" in line, line


def test_the_kits_help_lists_only_what_works_in_a_kit():
    import argparse
    from tito.cli import build_parser, hide_kit_refused

    def names(p):
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return sub, {a.dest for a in sub._choices_actions}

    parser = build_parser()
    sub, before = names(parser)
    assert {"grade", "grades", "formgrader", "status", "release"} <= before
    hide_kit_refused(parser)
    _, after = names(parser)
    assert after == before - {"export", "test", "release", "grade", "grades", "formgrader", "status", "bench-quality"}
    assert {"module", "olympics", "benchmark"} <= after
    olympics = names(sub.choices["olympics"])[1]
    assert olympics == {"submit", "validate", "verify"}
    text = parser.format_help()
    assert "formgrader" not in text and "autograde" not in text and "benchmark" in text
    # a hidden command still parses (the kit answers it with its refusal, not argparse's "invalid choice")
    assert parser.parse_args(["grade", "19", "subs"]).command == "grade"


def test_formgrader_command_prints_its_url_and_stops_on_ctrl_c(klass, template, tmp_path, root):
    import re
    import signal
    import urllib.request

    out = _copy(klass, tmp_path)
    course_dir.prepare(out, template, MODULE, "tinytorch")
    # Ctrl-C in a terminal: SIGINT at its default, whatever this run inherited (a suite started with `cmd &` from a
    # script, or under `setsid nohup`, ignores SIGINT, and Python then never raises KeyboardInterrupt)
    p = subprocess.Popen([sys.executable, "-m", "tito", "formgrader", "19", "--output-dir", str(out)], cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "TITO_NO_BOOTSTRAP": "1"},
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        url = None
        for line in p.stdout:
            m = re.search(r"formgrader: (http://127\.0\.0\.1:\d+/formgrader\?token=\w+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "no URL printed"
        base, token = url.split("/formgrader?token=")
        req = urllib.request.Request(f"{base}/formgrader/api/status", headers={"Authorization": f"token {token}"})
        assert json.loads(urllib.request.urlopen(req, timeout=60).read())["status"] is True
        p.send_signal(signal.SIGINT)
        rest = p.communicate(timeout=60)[0]
        assert p.returncode == 0 and "stopping the formgrader" in rest, rest
        with pytest.raises(OSError):  # the server is gone with it
            urllib.request.urlopen(req, timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    bad = subprocess.run([sys.executable, "-m", "tito", "formgrader", "19", "--output-dir", str(tmp_path / "none")],
                         cwd=root, capture_output=True, text=True, env={**os.environ, "TITO_NO_BOOTSTRAP": "1"})
    assert bad.returncode != 0 and "no class gradebook" in bad.stderr and "tito grade" in bad.stderr


def test_notebooks_without_graded_cells_are_part_of_the_assignment(course, tmp_path):
    from tito.grading import classrun
    graded = nbgrader_glue.module_assignment_notebooks(course.nbs_dir, MODULE)
    assert not {"defaults_dev.ipynb", "digits_dev.ipynb"} & {p.name for p in graded}
    wanted = classrun.assignment_files(course, MODULE, graded)
    assert {"defaults_dev.ipynb", "digits_dev.ipynb", f"{NB}.ipynb"} <= wanted
    for name in ("defaults_dev.ipynb", f"{NB}.ipynb", "scratch.ipynb"):
        (tmp_path / "ann").mkdir(exist_ok=True)
        (tmp_path / "ann" / name).write_text("{}")
    assert classrun.scan_submissions(tmp_path, MODULE, wanted).problems == [
        f"ann: scratch.ipynb is not part of {MODULE}; ignored"]
