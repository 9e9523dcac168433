"""`tito grade` on a hostile class: files that are not files, and students whose processes outlive them.

One class run (--jobs 2, a short per-test timeout) on the small stats course (tests/fixtures/submissions.py)
with low caps in its settings.ini (a notebook of 1 MB, a folder of 2 MB):

- an honest student, graded first, beside a student who leaves detached busy processes behind (double
  fork + `setsid`) at import, in every call and in the feedback run;
- students whose stats_dev.ipynb is a named pipe, a link to /dev/zero, a notebook above the cap, or one
  nested 200,000 levels deep: each has an honest extra_dev.ipynb, which is graded in full;
- a student whose folder is above its cap (an honest notebook beside a big data file): graded in full.

The run must finish, every broken notebook must cost only itself with its reason in grades.csv and
problems.txt, and no process of any student may survive the run. Needs bubblewrap (fails without).
"""
import json
import os
import resource
import threading
from pathlib import Path

import pytest

from fixtures import submissions as subs
from tito.commands.release import release
from tito.config import Course
from tito.grading import classrun, sandbox, submission

CELL_TIMEOUT = 5
MODULE = "01_stats"
EXTRA = subs.POINTS["extra-double"]
STATS = subs.FULL - EXTRA

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


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, root):
    if sandbox.find_bwrap() is None:
        pytest.fail(sandbox.INSTALL_HINT)
    base = tmp_path_factory.mktemp("hostile")
    course_dir = subs.make_stats_course(base / "course", root, cell_timeout=CELL_TIMEOUT)
    with open(course_dir / "settings.ini", "a", encoding="utf-8") as f:
        f.write("submission_notebook_mb = 1\nsubmission_folder_mb = 2\n")
    course = Course.load(course_dir)
    assert (course.submission_notebook_mb, course.submission_folder_mb) == (1, 2)
    rel = release(course, MODULE)
    stems = ("stats_dev", "extra_dev")
    source = {s: subs.load(course.nbs_dir / MODULE / f"{s}.ipynb") for s in stems}
    blank = {s: subs.load(rel.release_dir / f"{s}.ipynb") for s in stems}
    honest_rest = {s: blank[s] for s in stems}
    for gid in ("stats-normalize", "stats-time-it", "extra-double"):
        stem = subs.NOTEBOOKS[gid]
        honest_rest[stem] = subs.fill_solution(honest_rest[stem], source[stem], gid)
    hog = subs._cheat(honest_rest, "", {"stats-mean": "_hog()\nreturn sum(xs) / len(xs)",
                                        "stats-spread": "if _mine():\n    return -1\nreturn max(self.xs) - min(self.xs)"},
                      module_code=HOG)
    hog["stats_dev"] = subs._added_cell(hog["stats_dev"], "_hog()\nprint('hogs started')", "hogcell")
    sub = base / "submissions"
    for name, nbs in {"a-honest": source, "b-hog": hog}.items():
        for stem, nb in nbs.items():
            subs.save(nb, sub / name / f"{stem}.ipynb")
    for name in ("c-pipe", "d-zero", "e-big", "f-deep", "g-bigfolder"):
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
    (sub / "g-bigfolder" / "weights.bin").write_bytes(b"\0" * (3 << 20))
    out = base / "grades" / MODULE
    done: dict = {}

    def grade() -> None:
        done["results"] = classrun.grade(course, MODULE, sub, out, progress=lambda *a, **k: None, jobs=2)

    t = threading.Thread(target=grade, daemon=True)
    t.start()
    t.join(timeout=900)
    assert not t.is_alive(), "the class run did not finish in 15 minutes (a submission stalled it)"
    assert "results" in done
    return {"results": {r.student: r for r in done["results"]}, "out": out, "sub": sub,
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
    ("f-deep", "nested deeper than")])
def test_a_file_that_is_no_notebook_costs_only_itself(hostile, student, why):
    r = hostile["results"][student]
    by_nb = {n.notebook: n for n in r.notebooks}
    assert by_nb["extra_dev"].score == EXTRA and by_nb["extra_dev"].status == "graded"
    assert by_nb["stats_dev"].score == 0 and by_nb["stats_dev"].status == "failed"
    row = _rows(hostile["out"])[(student, "stats_dev")]
    assert why in row["reason"] and row["score"] == "0"
    if student != "f-deep":  # the nesting is found when the notebook is parsed, not in the folder's survey
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
        with pytest.raises(submission.Refused, match=why):
            submission.read_regular(tmp_path / name, 10)
    with pytest.raises(submission.Refused, match="a device"):
        submission.read_regular(Path("/dev/zero"), 10)
    assert submission.read_regular(tmp_path / "ok", 10) == b"x" * 10


def test_parse_notebook_limits_nesting_without_recursion():
    for depth in (65, 900, 200_000):
        with pytest.raises(submission.Refused, match="nested deeper than 64"):
            submission.parse_notebook(b'{"cells": [], "m": ' + b"[" * depth + b"]" * depth + b"}")
    assert submission.parse_notebook(b'{"cells": [], "m": ' + b"[" * 60 + b"]" * 60 + b"}")["cells"] == []
    with pytest.raises(submission.Refused, match="no cells"):
        submission.parse_notebook(b"[]")


def test_survey_stops_at_its_caps(tmp_path):
    d = tmp_path
    for i in range(3):
        (d / f"f{i}.txt").write_bytes(b"x" * (1 << 20))
    deep = d.joinpath(*["n"] * (submission.MAX_FOLDER_DEPTH + 3))
    deep.mkdir(parents=True)
    s = submission.survey(d, notebook_mb=1, folder_mb=2)
    assert "above the folder limit of 2 MB" in s.over
    assert any("nested more than" in why for why in s.refused.values())
