"""`tito module start N`, `tito module complete N` and `tito module submit N`: arguments in, words out; the work is
in tito.workspace (start.py, complete.py, submit.py) and, outside a workspace, tito.commands.module."""
from __future__ import annotations

import sys
from pathlib import Path

from tito.config import Course, TitoError
from tito.workspace.layout import MARKER, find_workspace
from tito.workspace.start import start


def _shown(path: Path) -> str:
    """`path` as a user types it from the current folder: relative when it is below it, quoted if needed."""
    import shlex

    path = Path(path).resolve()
    here = Path.cwd().resolve()
    return shlex.quote(str(path.relative_to(here)) if path.is_relative_to(here) and path != here else str(path))


def run_start(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    dest = start(course, module, Path(args.workspace) if args.workspace else None, args.force)
    nbs = course.in_reading_order(module, sorted(dest.glob("*.ipynb")), dest)
    library = set(course.library_notebooks(module, dest))
    num = module.split("_", 1)[0]
    print(f"module {module} started in {dest}: {len(nbs)} notebook(s), in reading order (see its README.md):")
    for i, nb in enumerate([nb for nb in nbs if nb.stem not in library], 1):
        print(f"  {i:2d}. {nb.name}")
    if lib := [nb.name for nb in nbs if nb.stem in library]:
        print(f"  library notebooks, outside the reading order (no tasks): {', '.join(lib)}")
    go = f"cd {_shown(dest)} && " if dest.resolve() != Path.cwd().resolve() else ""
    jupyter = Path(sys.executable).parent / "jupyter"
    if jupyter.exists():
        print(f"open them:  {go}{jupyter} lab")
    print(f"next: fill in the `raise NotImplementedError(...)` stubs, then run (after each notebook, too: "
          f"{'the next notebooks import your exported code' if course.kit else 'it exports your code'}):")
    print(f"  {go}python3 -m tito module complete {num}")
    return 0


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
    from tito.workspace.complete import complete_workspace

    return complete_workspace(course, module, mod_dir, getattr(args, "tests", None),
                              use_cache=not getattr(args, "no_cache", False))


def run_submit(args) -> int:
    """`tito module submit N`: in a student workspace, check and write the hand-in (tito.workspace.submit)."""
    course = Course.load()
    (module,) = course.resolve([args.module])
    ws = Path(args.workspace) if args.workspace else None
    mod_dir = find_workspace(module, ws)
    if mod_dir is None:
        raise TitoError(f"no workspace of {module} here (no {MARKER} in this folder or above"
                        + (f" or in {ws}" if ws else "") + f"): run `python3 -m tito module start "
                        f"{module.split('_', 1)[0]}` first, then hand in from its folder", code=2)
    from tito.workspace.submit import submit

    if args.complete:
        from tito.workspace.complete import complete_workspace

        complete_workspace(course, module, mod_dir)
        print()
    return submit(course, module, mod_dir, args.student, Path(args.output) if args.output else None)
