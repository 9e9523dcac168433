"""`tito test [MODULE...]`: export check, inline tests, notebooks, pytest; one table."""
from __future__ import annotations

import time
from pathlib import Path

from tito.commands import export as export_cmd
from tito.config import Course
from tito.testing.inline_runner import threads_per_job
from tito.testing.runners import StageResult, default_jobs, print_table, run_inline, run_notebooks, run_pytest


REPORT = Path("build") / "test-reports" / "pytest.xml"  # the pytest stage's JUnit XML, kept after the run


def module_test_files(course: Course, module: str) -> list[Path]:
    """pytest files for `module`: tests/**/test_NN_*.py and files naming the module."""
    tests = course.root / "tests"
    num, _, name = module.partition("_")
    out = []
    for p in sorted(tests.rglob("test_*.py")) if tests.exists() else []:
        stem = p.stem
        if stem.startswith(f"test_{num}_") or stem == f"test_{num}" or module in stem or (name and f"_{name}" in stem):
            out.append(p)
    return out


def check_stage(course: Course) -> StageResult:
    st = StageResult("export check")
    t0 = time.perf_counter()
    try:
        d = export_cmd.check(course.root)
        ok, msg = d.clean, "nbs/ or tinytorch/ out of date, run `tito export`: " + "; ".join(d.lines())
    except Exception as e:  # noqa: BLE001 - a broken export is a failed check
        ok, msg = False, f"export failed: {type(e).__name__}: {e}"
    st.seconds = time.perf_counter() - t0
    st.add(ok, msg)
    return st


def run_tests(course: Course, modules: list[str] | None = None, verbose: bool = False,
              jobs: int | None = None) -> int:
    """The four stages, one after another; inside each, `jobs` processes at once (default: `default_jobs()`),
    each with its share of the cores as torch's thread count (`threads_per_job`)."""
    jobs = default_jobs() if jobs is None else jobs
    with threads_per_job(jobs):
        return _run_stages(course, modules, verbose, jobs)


def _run_stages(course: Course, modules: list[str] | None, verbose: bool, jobs: int) -> int:
    limited = bool(modules)
    mods = course.resolve(modules)
    stages = []
    print("[1/4] export check ...", flush=True)
    chk = check_stage(course)
    stages.append(chk)
    if not chk.ok:
        print("export check failed: run `tito export` first (stopping here)")
        print_table(stages, "tito test")
        return 1

    print("[2/4] inline tests ...", flush=True)
    files = [f for m in mods for f in course.sources(m)]
    inline = run_inline(files, timeout=course.cell_timeout * 3, verbose=verbose, root=course.root, jobs=jobs)
    if not files:
        inline.skipped_reason = "no module sources"
    stages.append(inline)

    print("[3/4] notebooks ...", flush=True)
    nbs = [p for m in mods for p in course.notebooks(m)]
    nbst = run_notebooks(nbs, course.cell_timeout, root=course.root, time_limit=course.notebook_time_limit,
                         jobs=jobs)
    if not nbs:
        nbst.skipped_reason = "no notebooks"
    stages.append(nbst)

    print("[4/4] pytest ...", flush=True)
    report = course.root / REPORT
    say = lambda line: print(f"  {line}", flush=True)  # noqa: E731 - tests done of the total, the slowest so far
    if limited:
        targets = sorted({p for m in mods for p in module_test_files(course, m)})
        if targets:
            stages.append(run_pytest(targets, course.root, jobs=jobs, report=report, progress=say))
        else:
            s = StageResult("pytest")
            s.skipped_reason = "no test files for " + ", ".join(mods)
            stages.append(s)
    else:
        stages.append(run_pytest([course.root / "tests"], course.root, jobs=jobs, report=report, progress=say))
    if verbose:
        for s in stages:
            for d in s.details:
                if "output" in d:
                    print(d["output"])
    slowest = stages[-1].slowest
    if slowest:
        print("\nthe ten slowest tests (seconds: setup + call + teardown; JUnit XML: "
              f"{course.shown(report)}):")
        for test, secs in slowest:
            print(f"  {secs:8.1f}  {test}")
    _, failed = print_table(stages, "tito test" + (" " + " ".join(mods) if limited else ""))
    return 1 if failed or not all(s.ok for s in stages) else 0


def run(args) -> int:
    course = Course.load()
    return run_tests(course, args.modules or None, verbose=args.verbose, jobs=args.jobs)
