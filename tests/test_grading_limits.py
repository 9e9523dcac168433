"""Limits tito is given (issue 43): an inherited ulimit, a cgroup's memory or process limit, a container's
seccomp profile. A class of two (an honest student and a blank release) of the small course
(tests/fixtures/submissions.py) is graded in full with every limit clamped, or refused with exit 2 and a
sentence saying what to change; never "failed" for every student. The clamping rules themselves are
checked on stated limits (`fit(..., given=...)`), without a grading run.
"""
import csv
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import submissions as subs

from tito.isolation import limits as limits_mod
from tito.isolation import sandbox

MODULE = "01_stats"
NO_NAMESPACES = Path(__file__).parent / "fixtures" / "no_namespaces.py"
NO_BOX = sandbox.Unsandboxed()  # fit() without a sandbox to probe (what --no-sandbox hands it)


@pytest.fixture(scope="module")
def small_class(tmp_path_factory, root):
    """The small course, released, and a class of two: `honest` (the solutions, 10 points) and `blank`."""
    if sandbox.find() is None:
        pytest.fail(sandbox.registered().install_hint)
    base = tmp_path_factory.mktemp("limits")
    course, rel = subs.stats_course(tmp_path_factory, base / "course", root, cell_timeout=10)
    for stem in ("stats_dev", "extra_dev"):
        subs.save(subs.load(course.nbs_dir / MODULE / f"{stem}.ipynb"), base / "subs" / "honest" / f"{stem}.ipynb")
        subs.save(subs.load(rel.release_dir / f"{stem}.ipynb"), base / "subs" / "blank" / f"{stem}.ipynb")
    return {"course": course.root, "subs": base / "subs", "base": base}


def _grade(small_class, ulimits: str, out: str, wrapper: list[str] = ()) -> subprocess.CompletedProcess:
    """`tito grade` of the small class in a shell that set `ulimits` first (as an instructor's batch job would)."""
    cmd = " ".join([*wrapper, sys.executable, "-m", "tito", "grade", MODULE, str(small_class["subs"]), "--jobs", "2",
                    "--output-dir", str(small_class["base"] / out)])
    return subprocess.run(["bash", "-c", f"{ulimits}\nexec {cmd}"], cwd=small_class["course"], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def test_inherited_ulimits_are_clamped_and_the_class_graded_in_full(small_class):
    """ulimit -v 6000000 (the issue's case: every student "failed" in preexec_fn, exit 0), -u 200, -f 50000 and
    -n 64 together: each limit the sandbox asks for is lowered to the inherited one, said once in the console,
    run.json and every grades.csv row; the honest student gets every point."""
    p = _grade(small_class, "ulimit -v 6000000; ulimit -u 200; ulimit -f 50000; ulimit -n 64", "clamped")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    out = small_class["base"] / "clamped"
    rows = {(r["student"], r["notebook"]): r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    assert (rows["honest", "(total)"]["score"], rows["honest", "(total)"]["max_score"]) == ("10", "10")
    assert rows["honest", "(total)"]["status"] == "passed" and rows["blank", "(total)"]["score"] == "0"
    clamps = json.loads((out / "run.json").read_text())["clamped"]
    said = {c.split(" -> ")[0]: c for c in clamps}
    assert said["address space per process 6144"].startswith("address space per process 6144 -> 5859 MiB")
    assert said["file size 64"].startswith("file size 64 -> 48 MiB")
    assert "processes and threads 256" in said and "ulimit -u 200" in said["processes and threads 256"]
    assert "open files" not in " ".join(clamps)  # 64 is enough: nothing changed
    for row in rows.values():
        assert row["sandbox"].endswith("clamped to inherited limits: " + "; ".join(clamps))
    assert p.stdout.count("sandbox limits clamped to inherited limits") == 1


@pytest.mark.parametrize("ulimit, says", [
    ("ulimit -v 500000", "address space per process: 488 MiB per sandbox (inherited `ulimit -v 500000`), below the 1024"),
    ("ulimit -u 20", "processes and threads:"),
    ("ulimit -n 32", "open files: 32 per process (inherited `ulimit -n 32`), below the 64 grading needs: raise it"),
    ("ulimit -f 2000", "file size: 1 MiB per sandbox (inherited `ulimit -f 2000`), below the 24 MiB one student needs"),
])
def test_an_inherited_limit_too_small_for_one_student_is_refused_before_grading(small_class, ulimit, says):
    """Below what one student needs, nobody is graded: exit 2, the limit named with what to change, no output."""
    p = _grade(small_class, ulimit, "refused")
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "tito grade cannot grade safely here, so it grades nobody: " in p.stderr and says in p.stderr
    assert "raise it" in p.stderr and "Traceback" not in p.stderr
    assert not (small_class["base"] / "refused").exists()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the seccomp filter of tests/fixtures/no_namespaces.py is x86_64's")
def test_no_namespaces_as_in_a_container_is_refused_with_the_flags_that_fix_it(small_class, tmp_path):
    """Docker's default seccomp profile forbids new namespaces: bubblewrap cannot start. `tito grade` and
    `tito olympics judge` refuse (exit 2) naming bubblewrap's error and the container flags, before any student."""
    p = _grade(small_class, "", "no-ns", wrapper=[sys.executable, str(NO_NAMESPACES)])
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "no sandbox starts here (bwrap: " in p.stderr and "--security-opt seccomp=unconfined" in p.stderr
    assert not (small_class["base"] / "no-ns").exists()
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    p = subprocess.run([sys.executable, str(NO_NAMESPACES), sys.executable, "-m", "tito", "olympics", "judge",
                        str(tmp_path / "subs"), "--event", "latency_sprint", "--output-dir", str(tmp_path / "judged")],
                       cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=600)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert "tito olympics judge cannot grade safely here" in p.stderr and "seccomp=unconfined" in p.stderr
    assert not (tmp_path / "judged").exists()


# ---- the rules, on stated limits ---------------------------------------------------------------

def _given(rlimits=None, open_files=(None, None), memory=None, pids=None, user_tasks=10):
    names = [name for name, *_ in limits_mod._RLIMITS]
    return limits_mod.Inherited({**dict.fromkeys(names, (None, None)), **(rlimits or {})}, open_files, memory, pids,
                                user_tasks)


def test_a_cgroup_is_divided_among_the_students_graded_at_once():
    """memory.max 8 GiB for 4 at once: 2048 MiB each; for 8 at once: 1024 < 1400, refused with the --jobs that fits."""
    cg = (8 << 30, 1 << 30, Path("/sys/fs/cgroup/x/memory.max"))
    f = limits_mod.fit(sandbox.Limits(), 4, NO_BOX, given=_given(memory=cg))
    assert f.refusal is None and f.limits.memory_mb == 2048 and f.clamped[0].startswith("memory 6144 -> 2048 MiB")
    f = limits_mod.fit(sandbox.Limits(), 8, NO_BOX, given=_given(memory=cg))
    assert f.refusal and "memory: 1024 MiB per student" in f.refusal and "--jobs 5" in f.refusal
    f = limits_mod.fit(sandbox.Limits(), 2, NO_BOX, given=_given(pids=(300, 100, Path("/sys/fs/cgroup/x/pids.max"))))
    assert f.refusal is None and f.limits.processes == 100  # (300 - 100 in use) / 2
    f = limits_mod.fit(sandbox.Limits(), 4, NO_BOX, given=_given(pids=(300, 100, Path("p"))))
    assert f.refusal and "processes: 50 per student" in f.refusal


def test_a_normal_users_process_limit_counts_what_it_runs_and_is_shared(monkeypatch):
    """As a normal user RLIMIT_NPROC counts every process of the user: what is left after those running now is
    divided among --jobs (root's sandboxes each run as a uid of their own: no division)."""
    monkeypatch.setattr(limits_mod.os, "geteuid", lambda: 1000)
    f = limits_mod.fit(sandbox.Limits(), 2, NO_BOX, given=_given({"processes and threads": (300, 300)}, user_tasks=40))
    assert f.limits.processes == 130 and "40 in use, 2 student(s) at once" in f.clamped[0]
    f = limits_mod.fit(sandbox.Limits(), 4, NO_BOX, given=_given({"processes and threads": (300, 300)}, user_tasks=100))
    assert f.refusal and "processes and threads: 50 per sandbox" in f.refusal and "--jobs" in f.refusal
    monkeypatch.setattr(limits_mod.os, "geteuid", lambda: 0)
    f = limits_mod.fit(sandbox.Limits(), 4, NO_BOX, given=_given({"processes and threads": (300, 300)}, user_tasks=100))
    assert f.refusal is None and f.limits.processes == 256


def test_a_sandbox_never_asks_above_an_inherited_limit():
    """The last line of defence (each sandbox's preexec): an rlimit above the inherited hard or soft one is lowered."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    asked = {resource.RLIMIT_FSIZE: (1 << 40, 1 << 40)}
    got = sandbox.within_inherited(asked)[resource.RLIMIT_FSIZE]
    if hard == resource.RLIM_INFINITY and soft == resource.RLIM_INFINITY:
        assert got == (1 << 40, 1 << 40)
    script = ("import resource; from tito.isolation import sandbox; "
              "print(sandbox.within_inherited({resource.RLIMIT_FSIZE: (1 << 40, 1 << 40)})[resource.RLIMIT_FSIZE])")
    p = subprocess.run(["bash", "-c", f"ulimit -f 1000; exec {sys.executable} -c '{script}'"], capture_output=True,
                       text=True, cwd=Path(__file__).parents[1], timeout=120)
    assert p.stdout.strip() == str((1000 * 1024, 1000 * 1024)), p.stderr
