"""The toolchain: export in sync and idempotent, inline runner, package hygiene, release, autograde."""
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tito.notebooks import nbgrader_glue, regions
from tito.commands import export as export_cmd
from tito.config import TitoError

TINY_SRC = '''\
# %% [markdown]
# # Tiny module

# %%
#| default_exp tiny

# %%
#| export
def double(x):
    "Twice x."
    return 2 * x

def _helper():
    return 1

# %% nbgrader={"grade": false, "grade_id": "triple", "solution": true, "schema_version": 3}
#| export
def triple(x):
    ### BEGIN SOLUTION
    result_of_tripling = 3 * x
    return result_of_tripling
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-triple", "locked": true, "points": 2, "schema_version": 3}
def test_unit_triple():
    assert triple(2) == 6

# %%
def test_unit_double():
    assert double(2) == 4

# %%
if __name__ == "__main__":
    print("DEMO RAN")
    test_unit_double()
'''


@pytest.fixture()
def tiny_course(tmp_path, root):
    """A one-module course in a temp dir, using this repo's pyproject.toml."""
    shutil.copy2(root / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "settings.ini").write_text(
        "[course]\ncourse_id = tiny\nmodules = 01_tiny\nmodules_dir = modules\nnbs_dir = nbs\n"
        "release_dir = release\nnbgrader_dir = build/nbgrader\ncell_timeout = 60\n")
    (tmp_path / "modules" / "01_tiny").mkdir(parents=True)
    (tmp_path / "modules" / "01_tiny" / "tiny_dev.py").write_text(TINY_SRC)
    return tmp_path


def _snapshot(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


# ---- export -----------------------------------------------------------------------------

def test_export_in_sync(root):
    d = export_cmd.check(root)
    assert d.clean, "run `tito export`:\n" + "\n".join(d.lines())


def test_export_idempotent(root, tmp_path):
    """Export into a temp copy, export again: identical bytes, nothing reported."""
    first = export_cmd.build_export(root, tmp_path)
    before = _snapshot(tmp_path)
    d = export_cmd.export(first.root)
    assert d.clean, d.lines()
    assert _snapshot(tmp_path) == before


def test_tiny_export_roundtrip(tiny_course):
    d = export_cmd.export(tiny_course)
    assert "tinytorch/tiny.py" in d.missing and "nbs/01_tiny/tiny_dev.ipynb" in d.missing
    snap = _snapshot(tiny_course)
    assert export_cmd.export(tiny_course).clean
    assert _snapshot(tiny_course) == snap  # second export writes nothing
    assert export_cmd.check(tiny_course).clean
    code = (tiny_course / "tinytorch" / "tiny.py").read_text()
    assert "__all__ = ['double', 'triple']" in code
    assert "test_unit" not in code and "DEMO RAN" not in code
    assert (tiny_course / "tinytorch" / "__init__.py").read_text().startswith('__version__ = "')
    # a changed source is reported by --check, with the files it affects, and the tree is untouched
    src = tiny_course / "modules" / "01_tiny" / "tiny_dev.py"
    src.write_text(src.read_text().replace("return 2 * x", "return x + x"))
    d = export_cmd.check(tiny_course)
    assert set(d.changed) == {"nbs/01_tiny/tiny_dev.ipynb", "tinytorch/tiny.py"}
    assert _snapshot(tiny_course) == {**snap, "modules/01_tiny/tiny_dev.py": src.read_bytes()}
    # an extra generated file is reported and removed by export
    (tiny_course / "tinytorch" / "stale.py").write_text("x = 1\n")
    assert "tinytorch/stale.py" in export_cmd.check(tiny_course).extra
    export_cmd.export(tiny_course)
    assert not (tiny_course / "tinytorch" / "stale.py").exists()
    assert export_cmd.check(tiny_course).clean


def test_cell_ids_stable(tiny_course):
    export_cmd.export(tiny_course)
    nb = tiny_course / "nbs" / "01_tiny" / "tiny_dev.ipynb"
    ids = [c["id"] for c in json.loads(nb.read_text())["cells"]]
    src = tiny_course / "modules" / "01_tiny" / "tiny_dev.py"
    src.write_text(src.read_text().replace("Twice x.", "Two times x."))
    export_cmd.export(tiny_course)
    assert [c["id"] for c in json.loads(nb.read_text())["cells"]] == ids


# ---- inline runner ----------------------------------------------------------------------

def _run_inline(path: Path) -> tuple[bool, dict]:
    """The file's inline tests as `tito test` runs them (a child of a job server): (stage ok, run_file's summary)."""
    from tito.testing import runners

    st = runners.run_inline([path], timeout=120, root=path.parent, preload=[])
    (res,) = st.details
    return st.ok, res


def test_inline_runner_passes_and_skips_main(tiny_course):
    ok, res = _run_inline(tiny_course / "modules" / "01_tiny" / "tiny_dev.py")
    assert ok and res["ok"]
    assert [t["name"] for t in res["tests"]] == ["test_unit_triple", "test_unit_double"]
    assert res["passed"] == 2 and res["failed"] == 0


def test_inline_runner_reports(tmp_path):
    f = tmp_path / "x_dev.py"
    f.write_text(textwrap.dedent('''
        class Model:
            def forward(self):
                raise NotImplementedError("not yet implemented")
        def test_unit_a():
            Model().forward()
        def test_unit_b():
            assert 1 == 2, "one is not two"
        def test_module():
            pass
    '''))
    ok, res = _run_inline(f)
    assert not ok and not res["ok"]
    by = {t["name"]: t for t in res["tests"]}
    assert list(by) == ["test_unit_a", "test_unit_b", "test_module"]
    assert by["test_unit_a"]["error"] == "not yet implemented: Model.forward"
    assert by["test_unit_b"]["error"].startswith("AssertionError: one is not two")
    assert by["test_module"]["status"] == "passed"

    f.write_text("def helper():\n    return 1\n")
    ok, res = _run_inline(f)
    assert not ok and res["error"].startswith("no tests found")

    f.write_text("import no_such_module_xyz\ndef test_unit_a():\n    pass\n")
    ok, res = _run_inline(f)
    assert not ok and "ModuleNotFoundError" in res["error"]


def test_each_file_forked_from_the_job_server_draws_its_own_random_numbers(tmp_path):
    """numpy.random preloaded in the server (its global generator made there, as scipy.stats and torch make it):
    each child still seeds its generators from the OS, as a fresh process would (Python's random reseeds itself at
    a fork; numpy's is reseeded by tito.testing.inline_runner.preload_for_forks)."""
    from tito.testing import runners

    files = []
    for i in range(2):
        files.append(tmp_path / f"r{i}_dev.py")
        files[-1].write_text("import random, numpy as np\ndef test_unit_draw():\n"
                             f"    open('draw{i}.txt', 'w').write(f'{{random.random()}} {{np.random.rand()}}')\n")
    st = runners.run_inline(files, timeout=120, root=tmp_path, jobs=1, preload=["numpy.random"])
    assert st.ok, st.failures
    (a, b) = [(tmp_path / f"draw{i}.txt").read_text().split() for i in range(2)]
    assert a[0] != b[0] and a[1] != b[1], (a, b)


def test_parallel_stages_report_what_serial_ones_do(tmp_path, monkeypatch):
    """tito test's stages with jobs=2: the same counts and failures, in the files' order, as one after another;
    pytest gets xdist's workers with each file in one worker."""
    from tito.testing import runners

    files = []
    for i, body in enumerate(["def test_unit_a():\n    pass\n", "def test_unit_b():\n    assert 1 == 2, 'one is not two'\n",
                              "import time\ndef test_unit_c():\n    time.sleep(0.3)\n"]):
        files.append(tmp_path / f"m{i}_dev.py")
        files[-1].write_text(body)
    serial = runners.run_inline(files, timeout=120, root=tmp_path, jobs=1, preload=[])  # a tiny course: nothing to preload
    parallel = runners.run_inline(files, timeout=120, root=tmp_path, jobs=2, preload=[])
    assert (parallel.run, parallel.passed, parallel.failed) == (serial.run, serial.passed, serial.failed) == (3, 2, 1)
    assert parallel.failures == serial.failures and "one is not two" in parallel.failures[0]
    assert [d["file"] for d in parallel.details] == [str(f) for f in files]
    import nbformat
    nbs = []
    for i, code in enumerate(["x = 1", "raise ValueError('cell two')", "y = 2"]):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(code)]
        nbs.append(tmp_path / f"n{i}.ipynb")
        nbformat.write(nb, nbs[-1])
    ran = runners.run_notebooks(nbs, 60, root=tmp_path, jobs=2)
    assert (ran.run, ran.failed) == (3, 1) and "cell two" in ran.failures[0], ran.failures
    assert [d["notebook"] for d in ran.details] == [str(p) for p in nbs]
    calls = []
    monkeypatch.setattr(runners.process, "run", lambda cmd, **k: calls.append(cmd) or _Done())
    runners.run_pytest([tmp_path], tmp_path, jobs=2)
    runners.run_pytest([tmp_path], tmp_path, jobs=1)
    assert calls[0][calls[0].index("-n") + 1] == "2" and "loadfile" in calls[0] and "-n" not in calls[1]
    monkeypatch.setenv("TITO_JOBS", "3")
    assert runners.default_jobs() == 3
    monkeypatch.setenv("TITO_JOBS", "zero")
    with pytest.raises(ValueError, match="TITO_JOBS"):
        runners.default_jobs()


def test_each_parallel_test_process_gets_its_share_of_the_cores(tmp_path, monkeypatch):
    """Inside threads_per_job(jobs), what tito test starts sees cores // jobs threads (at least 1); a count the
    user set is kept; the environment is as it was afterwards."""
    import os

    from tito.testing import runners
    from tito.testing.inline_runner import THREAD_VARS, threads_per_job

    probe = tmp_path / "m_dev.py"
    probe.write_text("import os, torch\ndef test_unit_threads():\n"
                     "    assert torch.get_num_threads() == int(os.environ['WANT']), (torch.get_num_threads(), os.environ['WANT'])\n")
    cores = len(os.sched_getaffinity(0))
    for var in THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    for jobs in (1, 2, 64):
        monkeypatch.setenv("WANT", str(max(1, cores // jobs)))
        with threads_per_job(jobs) as n:
            assert n == max(1, cores // jobs) and os.environ["MKL_NUM_THREADS"] == str(n)
            st = runners.run_inline([probe], timeout=120, root=tmp_path, jobs=jobs, preload=["torch"])
            assert st.failed == 0 and st.passed == 1, st.failures
        assert not any(v in os.environ for v in THREAD_VARS)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with threads_per_job(cores) as n:
        assert n == 3 and os.environ["OMP_NUM_THREADS"] == "3"
    assert os.environ["OMP_NUM_THREADS"] == "3"


class _Done:
    "What process.run hands back, for a pytest that collected nothing."
    output, returncode, timed_out, seconds = "", 5, False, 0.0


# ---- exported package hygiene --------------------------------------------------------------

def _exported_modules(root):
    lib = root / "tinytorch"
    return sorted(".".join(p.relative_to(root).with_suffix("").parts) for p in lib.rglob("*.py")
                  if not p.name.startswith("_"))


def test_import_runs_no_tests(root):
    mods = _exported_modules(root)
    assert "tinytorch.benchmarking.benchmark" in mods
    code = ("import importlib, json, sys\n"
            f"mods = {mods!r}\n"
            "out = {}\n"
            "for m in mods:\n"
            "    mod = importlib.import_module(m)\n"
            "    out[m] = {'all': list(getattr(mod, '__all__', [])),\n"
            "              'tests': [n for n in vars(mod) if n.startswith('test_')]}\n"
            "sys.stderr.write('RESULT' + json.dumps(out))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "", f"importing the package printed: {p.stdout[:500]}"
    res = json.loads(p.stderr.split("RESULT", 1)[1])
    for m, info in res.items():
        assert info["tests"] == [], f"{m} defines test functions {info['tests']}"
        bad = [n for n in info["all"] if n.startswith("_") or n.startswith("test_")]
        assert not bad, f"{m}.__all__ holds non-public names {bad}"


# ---- release and grading ------------------------------------------------------------------

def test_release_19_has_no_solutions(course, release_19):
    res = release_19
    assert not res.leaks, "\n".join(map(str, res.leaks))
    assert res.notebooks and all(p.exists() for p in res.notebooks)
    secrets = regions.secret_lines(course.notebooks("19_benchmarking"))
    assert secrets, "module 19 has no solution regions"
    text = "\n".join(line for p in res.notebooks for _, line in regions.region_lines(p))
    assert not [s for s in secrets if s in text.splitlines()]
    assert 'raise NotImplementedError("not yet implemented: ' in text  # named stubs (nbgrader_named_stubs)
    assert not (course.root / "release" / "tmp").exists()


def test_leak_check_finds_a_leak(tiny_course):
    export_cmd.export(tiny_course)
    src = tiny_course / "nbs" / "01_tiny" / "tiny_dev.ipynb"
    leaky = tiny_course / "leaky.ipynb"
    leaky.write_text(src.read_text().replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""))
    leaks = nbgrader_glue.leak_check([src], [leaky])
    assert any(l.line == "result_of_tripling = 3 * x" for l in leaks)  # any non-trivial line (regions.answer_line)
    assert nbgrader_glue.leak_check([src], [src])  # markers themselves count as leaks


def test_release_unknown_module(course):
    with pytest.raises(TitoError) as e:
        course.resolve(["42"])
    assert "19_benchmarking" in str(e.value) and "15_profiling" in str(e.value)
