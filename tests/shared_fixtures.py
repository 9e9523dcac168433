"""What several test files need and only read, built once per test run (issue 43): a release of a module,
a student kit. `tito test` runs pytest-xdist workers, each a process of its own, so a session-scoped
fixture alone would still be built once per worker; `built_once` builds in the run's shared temporary
folder under a file lock, and every worker after the first reads the result.

A test that only reads (the release's notebooks) uses the shared copy; one that writes (a kit a student
starts work in) gets a copy of its own (`kit_copy`), which costs a file copy, not a build.
"""
from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path
from typing import Callable, TypeVar

from filelock import FileLock

T = TypeVar("T")


def shared_root(tmp_path_factory) -> Path:
    """The temporary folder every worker of this test run shares (xdist: the parent of each worker's own)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], T]) -> T:
    """`build(folder)` once per test run for `name` (a new empty folder to build in); its result (pickled
    beside it) for every later caller, in any worker. A build that raises leaves nothing: the next caller
    tries again, and fails the same way, with its own traceback."""
    root = shared_root(tmp_path_factory) / "shared" / name
    root.parent.mkdir(parents=True, exist_ok=True)
    done = root / "result.pickle"
    with FileLock(str(root) + ".lock"):
        if done.is_file():
            return pickle.loads(done.read_bytes())
        if root.exists():
            shutil.rmtree(root)
        root.mkdir()
        result = build(root / "built")
        done.write_bytes(pickle.dumps(result))
        return result


def release_once(course, module: str, tmp_path_factory):
    """`tito release` of `module` (nbgrader's release and the leak check), once per run; read it, never write."""
    from tito.notebooks.student_release import release

    return built_once(tmp_path_factory, f"release-{module}",
                      lambda d: release(course, module, release_dir=d / "release", course_dir=d / "nbgrader"))


def kit_copy(course, module: str, tmp_path_factory, dest: Path):
    """The student kit of `module` (built once per run) copied to `dest`, a kit of the caller's own to work
    in; its KitResult with `dest` and the paths in it moved there."""
    from tito.notebooks import kit as rel

    built = built_once(tmp_path_factory, f"kit-{module}", lambda d: rel.build_student_kit(course, module, d / "kit"))
    if built.leaks:
        return built
    shutil.copytree(built.dest, dest, symlinks=True)
    move = lambda p: dest / Path(p).relative_to(built.dest)  # noqa: E731
    return type(built)(**{**vars(built), "dest": dest, "notebooks": [move(p) for p in built.notebooks],
                          "tests": [move(p) for p in built.tests]})
