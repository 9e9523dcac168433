"""Where a student workspace keeps things (see tito.workspace): its marker, progress, scratch and
conftest, the `tito` launcher beside the notebooks, finding a workspace, and building its package."""
from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from pathlib import Path

from tito.config import Course, TitoError
from tito.notebooks.nbfile import atomic_write

MARKER = ".tito-workspace.json"
PROGRESS = "progress.json"
SCRATCH = ".tito"

CONFTEST = '''\
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


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, data: dict) -> None:
    atomic_write(path, json.dumps(data, indent=1) + "\n")


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
    tito starts there (`python -m tito.testing.inline_runner`) import the real modules too."""
    real = Path(__file__).resolve().parent.parent
    pkg = Path(mod_dir) / LAUNCHER
    pkg.mkdir(parents=True, exist_ok=True)
    atomic_write(pkg / "__init__.py", _LAUNCHER_INIT.format(tito=str(real)))
    return pkg


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
    from tito.notebooks.exports import ExportError, nbdev_export

    lib = ws_root / "tinytorch"
    stage = ws_root / SCRATCH / f"pkg-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    shutil.copytree(course.lib_dir, stage / "tinytorch",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    before = {p: p.read_bytes() for p in (stage / "tinytorch").rglob("*.py")}
    try:
        nbdev_export([Path(nb) for nb in notebooks], stage / "tinytorch", course.root)
    except ExportError as e:  # reported as the export stage's failure
        raise TitoError(f"{e}\n{e.output[-2000:]}") from e
    written = sorted(p for p in (stage / "tinytorch").rglob("*.py")
                     if before.get(p) != p.read_bytes())
    old = ws_root / SCRATCH / f"old-{os.getpid()}"
    if lib.exists():
        os.replace(lib, old)
    os.replace(stage / "tinytorch", lib)
    shutil.rmtree(stage, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return lib, [lib / p.relative_to(stage / "tinytorch") for p in written]


def started_modules(course: Course, ws_root: Path) -> list[Path]:
    """Module folders of the workspace holding a marker, in course order."""
    return [ws_root / m for m in course.modules if (ws_root / m / MARKER).is_file()]


def points(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
