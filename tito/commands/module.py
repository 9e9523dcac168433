"""`tito module complete N` (and the `module start` stub)."""
from __future__ import annotations

from pathlib import Path

from tito.commands import export as export_cmd
from tito.notebooks.exports import exported_files
from tito.config import Course, TitoError
from tito.testing.runners import StageResult, print_table, run_inline, run_pytest

def complete(course: Course, module: str, src_dir: Path | None = None, lib_dir: Path | None = None,
             tests_dir: Path | None = None) -> int:
    """Inline tests -> export -> integration tests; prints the summary; returns exit code.

    src_dir: folder of the module's *_dev.py (default modules/NN_name);
    lib_dir: the exported package (default tinytorch/);
    tests_dir: integration tests (default tests/). For a student workspace pass theirs.
    """
    src_dir = Path(src_dir or course.modules_dir / module)
    lib_dir = Path(lib_dir or course.lib_dir)
    tests_dir = Path(tests_dir or course.root / "tests")
    stages: list[StageResult] = []

    print(f"[1/3] inline tests of {module} ...", flush=True)
    files = sorted(src_dir.glob("*_dev.py"))
    if not files:
        raise TitoError(f"no *_dev.py sources in {src_dir}")
    inline = run_inline(files, timeout=course.cell_timeout * 3, root=course.root)
    stages.append(inline)

    print("[2/3] export ...", flush=True)
    ex = StageResult("export")
    if inline.ok:
        try:
            d = export_cmd.export(course.root, [module])
            ex.add(True)
            print(f"      {len(d.changed) + len(d.missing)} file(s) written, {len(d.extra)} removed")
        except Exception as e:  # noqa: BLE001
            ex.add(False, f"export failed: {type(e).__name__}: {e}")
    else:
        ex.skipped_reason = "inline tests failed"
    stages.append(ex)

    print("[3/3] integration tests ...", flush=True)
    num = module.split("_", 1)[0]
    targets = sorted(set(tests_dir.glob(f"test_{num}_*.py")) | set(tests_dir.glob(f"integration/test_{num}_*.py")))
    if not ex.ok or ex.skipped_reason:
        it = StageResult("integration tests")
        it.skipped_reason = "export did not run"
    elif not targets:
        it = StageResult("integration tests")
        it.skipped_reason = f"no tests/test_{num}_*.py"
    else:
        it = run_pytest(targets, course.root, name="integration tests")
    stages.append(it)

    _, failed = print_table(stages, f"tito module complete {module}")
    print()
    print("exported files:")
    for f, n in exported_files(sorted((course.nbs_dir / module).glob("*.ipynb")), lib_dir):
        shown = f.relative_to(course.root) if f.is_relative_to(course.root) else f
        print(f"  {shown}  ({n} public names in __all__)" if n >= 0 else f"  {shown}  (missing or no __all__)")
    bad = failed or any(not s.ok for s in stages if not s.skipped_reason) or inline.skipped_reason
    if bad or ex.skipped_reason:
        first = next((f for s in stages for f in s.failures), "see above")
        print(f"\nmodule {module} NOT complete; first failure: {first}")
        return 1
    print(f"\nmodule {module} complete")
    return 0


def run_complete(args) -> int:
    course = Course.load()
    (module,) = course.resolve([args.module])
    return complete(course, module)
