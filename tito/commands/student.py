"""The student workflow: `tito module start N` and `tito module complete N` in a workspace.

Workspace layout (WORKSPACE defaults to settings.ini workspace_dir, or --workspace DIR):

    WORKSPACE/NN_name/*.ipynb             the student's notebooks (a copy of the release)
    WORKSPACE/NN_name/data/...            data files of the release
    WORKSPACE/NN_name/.tito-workspace.json  marker written by `module start`
    WORKSPACE/NN_name/progress.json       written by `module complete`: counts, first failure, history
    WORKSPACE/tinytorch/                  the student's package, rebuilt by `module complete`:
                                          a copy of the course's tinytorch/ with the modules of
                                          every notebook in the workspace's started modules
                                          re-exported (nbdev) from the student's notebooks
    WORKSPACE/.tito/                      scratch (converted scripts, integration test copies)

`module complete` runs: [1] the inline tests of each of the student's notebooks (converted
to a script with jupytext, run by tito.inline_runner; imports of other modules resolve to
the course package), [2] the export into WORKSPACE/tinytorch, [3] the module's integration
tests (tests/test_NN_*.py copied from the course, run with WORKSPACE first on sys.path, and
cwd = WORKSPACE, so `import tinytorch` is the student's package; a conftest checks that).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

from tito import nbgrader_glue
from tito.config import Course, TitoError
from tito.runners import StageResult, print_table, run_inline, run_pytest

MARKER = ".tito-workspace.json"
PROGRESS = "progress.json"
SCRATCH = ".tito"

_CONFTEST = '''\
"""Written by `tito module complete`: integration tests run against the student's package."""
import sys
from pathlib import Path

import pytest

WORKSPACE = Path({workspace!r})
COURSE_ROOT = Path({root!r})
if str(WORKSPACE) in sys.path:
    sys.path.remove(str(WORKSPACE))
sys.path.insert(0, str(WORKSPACE))
for _name in [m for m in sys.modules if m == "tinytorch" or m.startswith("tinytorch.")]:
    del sys.modules[_name]
import tinytorch  # noqa: E402

if not Path(tinytorch.__file__).resolve().is_relative_to(WORKSPACE.resolve()):
    raise RuntimeError(f"tinytorch imported from {{tinytorch.__file__}}, not from the workspace {{WORKSPACE}}")
if str(COURSE_ROOT) not in sys.path:
    sys.path.append(str(COURSE_ROOT))  # tito itself, for tests that use it


@pytest.fixture(scope="session")
def root() -> Path:
    return COURSE_ROOT


@pytest.fixture(scope="session")
def course():
    from tito.config import Course
    return Course.load(COURSE_ROOT)
'''


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, data: dict) -> None:
    nbgrader_glue.atomic_write(path, json.dumps(data, indent=1) + "\n")


# ---- module start ----------------------------------------------------------------------------

LAUNCHER = "tito"  # the package folder `module start` writes next to the notebooks
_LAUNCHER_INIT = '''\
"""Written by `tito module start`: `python3 -m tito ...` in this folder runs the course's tito.

Your notebooks are in the folder above; this package only forwards to tito (TITO below, or the
nearest `tito` package of a folder above holding settings.ini), so that every command tito prints
works as printed from here. `module start --force` writes it again.
"""
from pathlib import Path as _Path

TITO = _Path({tito!r})


def _find() -> _Path:
    here = _Path(__file__).resolve().parent.parent
    found = [d / "tito" for d in here.parents if (d / "tito" / "cli.py").is_file() and (d / "settings.ini").is_file()]
    for real in [TITO, *found]:
        if (real / "cli.py").is_file() and real != _Path(__file__).resolve().parent:
            return real
    raise ImportError(f"tito: the course's tito package is neither at {{TITO}} nor above {{here}}")


_real = _find()
__path__ = [str(_real)]  # tito.cli, tito.__main__, ... are the course's modules
del _Path, _find, _real
'''


def write_launcher(mod_dir: Path) -> Path:
    """MOD_DIR/tito/__init__.py: a package that forwards `tito` to this tito's folder (its __path__),
    so `python3 -m tito ...` works from the student's module folder with any python3, and processes
    tito starts there (`python -m tito.inline_runner`) import the real modules too."""
    real = Path(__file__).resolve().parent.parent
    pkg = Path(mod_dir) / LAUNCHER
    pkg.mkdir(parents=True, exist_ok=True)
    nbgrader_glue.atomic_write(pkg / "__init__.py", _LAUNCHER_INIT.format(tito=str(real)))
    return pkg


def _shown(path: Path) -> str:
    """`path` as a user types it from the current folder: relative when it is below it, quoted if needed."""
    import shlex

    path = Path(path).resolve()
    here = Path.cwd().resolve()
    return shlex.quote(str(path.relative_to(here)) if path.is_relative_to(here) and path != here else str(path))


def start(course: Course, module: str, workspace: Path | None = None, force: bool = False,
          release_dir: Path | None = None, nbgrader_dir: Path | None = None) -> Path:
    """Copy the student release of `module` into WORKSPACE/NN_name; returns that folder.

    Runs `tito release` first when the release is missing (in a student kit the release is part
    of the kit). Refuses (TitoError) when the folder already holds files, unless `force`; with
    `force` the old folder is moved to WORKSPACE/.tito/backup/NN_name-<time>/ first, never
    deleted. The folder gets README.md (the reading order) and the `tito` launcher
    (`write_launcher`). In a kit the workspace is the kit folder itself: the notebooks, the inline
    and the integration tests all import the package `module complete` builds in KIT/tinytorch.
    """
    from tito.commands.release import reading_readme, release

    ws = Path(workspace or course.workspace_dir).resolve()
    if course.kit and ws != course.root.resolve():
        raise TitoError(f"--workspace {ws}: in the student kit the workspace is the kit folder {course.root} "
                        "(your notebooks import the package `module complete` builds there); leave --workspace out")
    rel_root = Path(release_dir or course.release_dir)
    rel = rel_root / module
    if not (rel.is_dir() and any(rel.glob("*.ipynb"))):
        if course.kit:
            raise TitoError(f"this student kit has no release of {module} in {rel}: ask your instructor for the kit "
                            f"of {module} (`tito release {module.split('_', 1)[0]} --student-kit DIR`)")
        print(f"no release of {module} in {rel}: running `tito release {module}` ...", flush=True)
        res = release(course, module, release_dir=rel_root, course_dir=nbgrader_dir)
        if res.leaks:
            raise TitoError(f"release of {module} failed the leak check ({len(res.leaks)} solution lines); "
                            "fix the module before students start it")
    elif not course.kit:
        have = {p.name for p in rel.glob("*.ipynb")}
        want = {p.name for p in course.notebooks(module)}
        if want and have != want:
            print(f"warning: the release in {rel} does not match the course's notebooks "
                  f"(missing: {', '.join(sorted(want - have)) or '-'}; extra: {', '.join(sorted(have - want)) or '-'}); "
                  f"the instructor should run `tito release {module}`", file=sys.stderr)
    dest = ws / module
    if dest.exists() and any(dest.iterdir()):
        if not force:
            raise TitoError(f"{dest} already holds work; refusing to overwrite it "
                            f"(use --force: the old folder is kept under {ws / SCRATCH / 'backup'})")
        backup = ws / SCRATCH / "backup" / f"{module}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S-%f')}"
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(dest), str(backup))
        print(f"moved the old {dest} to {backup}")
    ws.mkdir(parents=True, exist_ok=True)
    tmp = ws / f".{module}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(rel, tmp)
    if not (tmp / "README.md").is_file():  # a release made before releases carried it
        nbgrader_glue.atomic_write(tmp / "README.md", reading_readme(course, module, tmp))
    write_launcher(tmp)
    notebooks = [p.name for p in course.in_reading_order(module, sorted(tmp.glob("*.ipynb")), tmp)]
    _write_json(tmp / MARKER, {"module": module, "course_root": str(course.root), "release": str(rel.resolve()),
                               "started": _now(), "notebooks": notebooks})
    if dest.exists():
        dest.rmdir()  # empty (checked above)
    os.replace(tmp, dest)
    if course.kit:  # the package the notebooks import, with the stubs, until `module complete` exports their code
        build_student_package(course, ws, [nb for d in _started_modules(course, ws) for nb in sorted(d.glob("*.ipynb"))])
    return dest


def run_start(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    dest = start(course, module, Path(args.workspace) if args.workspace else None, args.force)
    nbs = course.in_reading_order(module, sorted(dest.glob("*.ipynb")), dest)
    num = module.split("_", 1)[0]
    print(f"module {module} started in {dest}: {len(nbs)} notebook(s), in reading order (see its README.md):")
    for i, nb in enumerate(nbs, 1):
        print(f"  {i:2d}. {nb.name}")
    go = f"cd {_shown(dest)} && " if dest.resolve() != Path.cwd().resolve() else ""
    jupyter = Path(sys.executable).parent / "jupyter"
    if jupyter.exists():
        print(f"open them:  {go}{jupyter} lab")
    print(f"next: fill in the `raise NotImplementedError(...)` stubs, then run (after each notebook, too: "
          f"{'the next notebooks import your exported code' if course.kit else 'it exports your code'}):")
    print(f"  {go}python3 -m tito module complete {num}")
    return 0


# ---- module complete in a workspace -----------------------------------------------------------

def find_workspace(module: str | None, workspace: Path | None = None, cwd: Path | None = None) -> Path | None:
    """The module folder (holding MARKER) for `module`: from --workspace DIR (the module folder
    or its parent), else the current folder or a parent of it. None when there is none."""
    def ok(d: Path) -> bool:
        if not (d / MARKER).is_file():
            return False
        if module is None:
            return True
        return json.loads((d / MARKER).read_text(encoding="utf-8")).get("module") == module

    if workspace is not None:
        w = Path(workspace).resolve()
        for d in ([w / module] if module else []) + [w]:
            if ok(d):
                return d
        return None
    here = Path(cwd or Path.cwd()).resolve()
    for d in [here, *here.parents]:
        if ok(d):
            return d
        if module and ok(d / module):
            return d / module
    return None


def notebook_to_script(nb: Path, dest: Path) -> Path:
    """The student's notebook as a percent-format script (jupytext; magics commented out)."""
    import jupytext

    note = jupytext.read(nb)
    jupytext.write(note, dest, fmt="py:percent")
    return dest


def build_student_package(course: Course, ws_root: Path, notebooks: list[Path]) -> tuple[Path, list[Path]]:
    """WORKSPACE/tinytorch = copy of the course package + `notebooks` exported over it (nbdev).

    Built in a scratch folder and swapped in with os.replace. Returns (package dir, files written
    by the export of the student's notebooks).
    """
    from nbdev.export import nb_export

    from tito.grading.package import prepare_cell_export_targets

    lib = ws_root / "tinytorch"
    stage = ws_root / SCRATCH / f"pkg-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    shutil.copytree(course.lib_dir, stage / "tinytorch",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    before = {p: p.read_bytes() for p in (stage / "tinytorch").rglob("*.py")}
    for nb in notebooks:  # modules made only of `#| export NAME` cells start empty
        prepare_cell_export_targets(Path(nb), stage / "tinytorch")
    cwd = os.getcwd()
    buf = io.StringIO()
    try:
        os.chdir(course.root)  # nbdev reads [tool.nbdev] from the course's pyproject.toml
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            for nb in notebooks:
                nb_export(str(nb), lib_path=str(stage / "tinytorch"))
    except Exception as e:  # noqa: BLE001 - reported as the export stage's failure
        raise TitoError(f"export of {nb.name} failed: {type(e).__name__}: {e}\n{buf.getvalue()[-2000:]}") from e
    finally:
        os.chdir(cwd)
    written = sorted(p for p in (stage / "tinytorch").rglob("*.py")
                     if before.get(p) != p.read_bytes())
    old = ws_root / SCRATCH / f"old-{os.getpid()}"
    if lib.exists():
        os.replace(lib, old)
    os.replace(stage / "tinytorch", lib)
    shutil.rmtree(stage, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return lib, [lib / p.relative_to(stage / "tinytorch") for p in written]


def _started_modules(course: Course, ws_root: Path) -> list[Path]:
    """Module folders of the workspace holding a marker, in course order."""
    return [ws_root / m for m in course.modules if (ws_root / m / MARKER).is_file()]


def _points(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _kit_export(course: Course, ws_root: Path, mod_dir: Path, notebooks: list[Path]) -> tuple[StageResult, list[Path]]:
    """The export stage run first, in a student kit (see complete_workspace)."""
    print(f"[first] export your code into {ws_root / 'tinytorch'} (in the kit your notebooks import it from there) ...", flush=True)
    ex, written = StageResult("export"), []
    all_nbs = [nb for d in _started_modules(course, ws_root) for nb in sorted(d.glob("*.ipynb"))]
    t0 = time.perf_counter()
    try:
        _, written = build_student_package(course, ws_root, all_nbs + [nb for nb in notebooks if nb not in all_nbs])
        ex.add(True)
    except TitoError as e:
        ex.add(False, str(e).splitlines()[0])
    ex.seconds = time.perf_counter() - t0
    return ex, written


def complete_workspace(course: Course, module: str, mod_dir: Path, tests: list[str] | None = None) -> int:
    """Inline tests -> export into WORKSPACE/tinytorch -> integration tests; records progress.json."""
    ws_root = mod_dir.parent
    scratch = ws_root / SCRATCH
    scratch.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(mod_dir.glob("*.ipynb"))
    if not notebooks:
        raise TitoError(f"no notebooks in {mod_dir}")
    stages: list[StageResult] = []
    # a student kit holds no reference of this module: the notebooks import each other's code from
    # the student's export (KIT/tinytorch), so it is made first, whatever the tests will say
    kit_export = _kit_export(course, ws_root, mod_dir, notebooks) if course.kit else None

    print(f"[1/3] inline tests of your {len(notebooks)} notebook(s) in {mod_dir} ...", flush=True)
    scripts = []
    inline = StageResult("inline tests")
    try:
        for nb in notebooks:
            # next to the notebook, so relative data paths work as in Jupyter; removed afterwards
            scripts.append(notebook_to_script(nb, mod_dir / f".tito_inline_{nb.stem}.py"))
        run_inline(scripts, timeout=course.cell_timeout * 3, stage=inline, root=mod_dir)
    finally:
        for s in scripts:
            s.unlink(missing_ok=True)
    # name failures by notebook, not by the temporary script
    inline.failures = [f.replace(".tito_inline_", "").replace(".py:", ".ipynb:", 1) for f in inline.failures]
    stages.append(inline)

    print(f"[2/3] export your code into {ws_root / 'tinytorch'} ...", flush=True)
    ex = StageResult("export")
    written: list[Path] = []
    if kit_export is not None:
        ex, written = kit_export
    elif inline.ok:
        all_nbs = [nb for d in _started_modules(course, ws_root) for nb in sorted(d.glob("*.ipynb"))]
        if mod_dir not in _started_modules(course, ws_root):
            all_nbs += notebooks
        t0 = time.perf_counter()
        try:
            _, written = build_student_package(course, ws_root, all_nbs)
            ex.add(True)
        except TitoError as e:
            ex.add(False, str(e).splitlines()[0])
        ex.seconds = time.perf_counter() - t0
    else:
        ex.skipped_reason = "inline tests failed"
    stages.append(ex)

    print("[3/3] integration tests against your package ...", flush=True)
    num = module.split("_", 1)[0]
    tests_dir = course.root / "tests"
    targets = sorted(set(tests_dir.glob(f"test_{num}_*.py")) | set(tests_dir.glob(f"integration/test_{num}_*.py")))
    if tests:
        targets = [t for t in targets if any(t.match(p) or t.name == p or t.stem == p for p in tests)]
    if ex.skipped_reason or not ex.ok:
        it = StageResult("integration tests")
        it.skipped_reason = "export did not run"
    elif not targets:
        it = StageResult("integration tests")
        it.skipped_reason = f"no tests/test_{num}_*.py" + (f" matching {tests}" if tests else "")
    else:
        tdir = scratch / "tests"
        if tdir.exists():
            shutil.rmtree(tdir)
        tdir.mkdir(parents=True)
        (tdir / "conftest.py").write_text(_CONFTEST.format(workspace=str(ws_root), root=str(course.root)))
        copies = []
        for t in targets:
            shutil.copy2(t, tdir / t.name)
            copies.append(tdir / t.name)
        it = run_pytest(copies, ws_root, extra=["--rootdir", str(tdir), "-c", os.devnull],
                        name="integration tests")
        it.failures = [f.replace(".tito.tests.", "tests.") for f in it.failures]
    stages.append(it)

    _, failed = print_table(stages, f"tito module complete {module} (workspace {mod_dir})")
    answers = nbgrader_glue.written_answers(notebooks)  # graded by the instructor, not by `complete`
    if answers:
        print(f"written answers: {sum(a.answered for a in answers)} of {len(answers)} written "
              f"({_points(sum(a.points for a in answers))} points, graded by your instructor)")
    if written:
        print("your exported files:")
        for f in written:
            print(f"  {f.relative_to(ws_root)}")
    first = next((f for s in stages for f in s.failures), None)
    done = failed == 0 and all(s.ok for s in stages)
    record = {"module": module, "time": _now(), "complete": done,
              "written_answers": {f"{a.notebook}:{a.grade_id}": a.answered for a in answers},
              "stages": {s.name: {"run": s.run, "passed": s.passed, "failed": s.failed,
                                  "skipped": s.skipped_reason} for s in stages},
              "first_failure": first}
    prog_path = mod_dir / PROGRESS
    prog = json.loads(prog_path.read_text(encoding="utf-8")) if prog_path.exists() else {"module": module,
                                                                                          "history": []}
    prog["last"] = record
    prog["completed"] = bool(prog.get("completed")) or done
    prog["history"] = (prog.get("history") or [])[-49:] + [record]
    _write_json(prog_path, prog)
    if done:
        print(f"\nmodule {module} complete (progress recorded in {prog_path})")
        return 0
    print(f"\nmodule {module} NOT complete; first failure: {first or 'see above'}")
    return 1


def run_complete(args) -> int:
    """`tito module complete N`: in a student workspace (marker found from the current folder or
    --workspace) the student flow; otherwise the course-author flow (tito.commands.module)."""
    course = Course.load()
    (module,) = course.resolve([args.module])
    ws = Path(args.workspace) if getattr(args, "workspace", None) else None
    mod_dir = find_workspace(module, ws)
    if mod_dir is None:
        if ws is not None:
            raise TitoError(f"{ws} is not a workspace of {module} (no {MARKER}; run `tito module start "
                            f"{module.split('_', 1)[0]} --workspace {ws}` first)")
        from tito.commands.module import complete
        return complete(course, module)
    return complete_workspace(course, module, mod_dir, getattr(args, "tests", None))
