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

`module complete` (tito.complete) runs: [1] the export into WORKSPACE/tinytorch, [2] the inline
tests of each notebook changed since it last passed (tito.inline_runner; `import tinytorch` is the
student's package), [3] the integration tests (tests/test_NN_*.py copied from the course, run with
WORKSPACE first on sys.path and cwd = WORKSPACE; a conftest checks that) of every notebook that
passed, then a report per notebook and task. WORKSPACE/.tito/complete-cache.json holds the cache.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import os
import shutil
import sys
from pathlib import Path

from tito import nbgrader_glue
from tito.config import Course, TitoError
from tito.runners import StageResult, print_table, run_inline, run_pytest  # noqa: F401

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


def complete_workspace(course: Course, module: str, mod_dir: Path, tests: list[str] | None = None,
                       use_cache: bool = True) -> int:
    """Export -> inline tests (changed notebooks only) -> integration tests -> a report per task;
    records progress.json. See tito.complete."""
    from tito.complete import complete_workspace as run

    return run(course, module, mod_dir, tests, use_cache=use_cache)


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
    return complete_workspace(course, module, mod_dir, getattr(args, "tests", None),
                              use_cache=not getattr(args, "no_cache", False))
