"""`tito export`: modules/NN/*_dev.py --jupytext--> nbs/NN/*.ipynb --nbdev--> tinytorch/.

The whole export is built in a scratch copy of the course (pyproject.toml, settings.ini,
modules/, nbs/; the package starts empty), then compared with the real tree:
`export` writes only the files whose bytes differ and removes stale generated files;
`export --check` only reports the differences. Both are deterministic: notebook cell ids
are kept with jupytext's update (combine) logic, outputs are stripped, and
tinytorch.__version__ comes from [project].version in pyproject.toml.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import Course, TitoError
from tito.notebooks.nbfile import from_percent

IGNORE_DIRS = {"__pycache__", ".ipynb_checkpoints"}
# generated trees and the files in them tito owns (compared, written, pruned)
GENERATED = {"nbs": ("*.ipynb", "llms.txt"), "lib": ("*.py",)}


def _copytree(src: Path, dst: Path) -> None:
    if src.exists():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*IGNORE_DIRS), dirs_exist_ok=True)


def _nbdev_export(root: Path, course: Course) -> None:
    from nbdev.config import set_version
    from nbdev.doclinks import nbdev_export

    from tito.notebooks.exports import prepare_cell_export_targets

    course.lib_dir.mkdir(parents=True, exist_ok=True)
    set_version(course.lib_dir, course.version)
    for nb in sorted(course.nbs_dir.rglob("*.ipynb")):  # modules made only of `#| export NAME` cells
        prepare_cell_export_targets(nb, course.lib_dir)
    env_in_test = os.environ.pop("IN_TEST", None)  # nbdev_export is a no-op when IN_TEST is set
    cwd = os.getcwd()
    buf = io.StringIO()
    try:
        os.chdir(root)
        with contextlib.redirect_stdout(buf):
            nbdev_export()
    except Exception as e:
        raise TitoError(f"nbdev export failed: {type(e).__name__}: {e}\n{buf.getvalue()}") from e
    finally:
        os.chdir(cwd)
        if env_in_test is not None:
            os.environ["IN_TEST"] = env_in_test


def build_export(root: Path, work: Path, modules: list[str] | None = None) -> Course:
    """Export course `root` into the empty folder `work` without touching `root`.

    `modules` limits which notebooks are regenerated (the others are taken as they are
    in root/nbs); the package is always exported from every notebook.
    Returns the Course of `work`.
    """
    src = Course.load(root)
    for name in ("pyproject.toml", "settings.ini", "README.md"):
        if (root / name).exists():
            shutil.copy2(root / name, work / name)
    wc = Course.load(work)
    _copytree(src.modules_dir, wc.modules_dir)
    _copytree(src.nbs_dir, wc.nbs_dir)
    for module in src.resolve(modules):
        sources = wc.sources(module)
        nb_dir = wc.nbs_dir / module
        stems = {s.stem for s in sources}
        for old in nb_dir.glob("*.ipynb") if nb_dir.exists() else []:
            if old.stem not in stems:
                old.unlink()  # its source is gone
        for s in sources:
            from_percent(s, nb_dir / (s.stem + ".ipynb"))
    _nbdev_export(work, wc)
    return wc


def _generated_files(course: Course) -> dict[str, Path]:
    """relative path -> absolute path of every generated file in `course`."""
    out = {}
    for key, pats in GENERATED.items():
        base = course.nbs_dir if key == "nbs" else course.lib_dir
        if not base.exists():
            continue
        for pat in pats:
            for p in base.rglob(pat):
                if p.is_file() and not (IGNORE_DIRS & set(p.relative_to(base).parts)):
                    out[p.relative_to(course.root).as_posix()] = p
    return out


@dataclass
class ExportDiff:
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # produced by export, absent in tree
    extra: list[str] = field(default_factory=list)    # in tree, not produced by export

    @property
    def clean(self) -> bool:
        return not (self.changed or self.missing or self.extra)

    def lines(self) -> list[str]:
        return ([f"differs: {p}" for p in self.changed] + [f"missing: {p}" for p in self.missing]
                + [f"extra:   {p}" for p in self.extra])


def diff_trees(real: Course, fresh: Course) -> ExportDiff:
    a, b = _generated_files(real), _generated_files(fresh)
    d = ExportDiff()
    for rel in sorted(set(a) | set(b)):
        if rel not in a:
            d.missing.append(rel)
        elif rel not in b:
            d.extra.append(rel)
        elif a[rel].read_bytes() != b[rel].read_bytes():
            d.changed.append(rel)
    return d


def check(root: Path) -> ExportDiff:
    """Export into a temporary copy and compare with `root`; never touches `root`."""
    with tempfile.TemporaryDirectory(prefix="tito-export-check-") as tmp:
        fresh = build_export(root, Path(tmp))
        return diff_trees(Course.load(root), fresh)


def export(root: Path, modules: list[str] | None = None) -> ExportDiff:
    """Export into `root`: write changed/missing generated files, remove stale ones.

    Returns what was changed (an empty diff means the tree was already in sync).
    """
    real = Course.load(root)
    with tempfile.TemporaryDirectory(prefix="tito-export-") as tmp:
        fresh = build_export(root, Path(tmp), modules)
        d = diff_trees(real, fresh)
        for rel in d.changed + d.missing:
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp_dst = dst.with_name(dst.name + ".tito-tmp")
            shutil.copyfile(Path(tmp) / rel, tmp_dst)
            os.replace(tmp_dst, dst)
        for rel in d.extra:
            (root / rel).unlink()
    return d


def run(args) -> int:
    course = Course.load()
    modules = course.resolve(args.modules) if args.modules else None
    for m in course.resolve(modules):
        if not course.sources(m):
            print(f"warning: no sources in {course.modules_dir.relative_to(course.root) / m}/ (*_dev.py)")
    if args.check:
        d = check(course.root)
        if d.clean:
            print("export check: nbs/ and tinytorch/ are in sync with modules/")
            return 0
        print("export check FAILED: generated files differ from a fresh export "
              "(run `tito export` and commit the result):")
        for line in d.lines():
            print("  " + line)
        return 1
    d = export(course.root, modules)
    if d.clean:
        print("export: nothing changed (nbs/ and tinytorch/ already in sync)")
    else:
        for line in d.lines():
            print("  " + line.replace("differs:", "updated:").replace("missing:", "written:")
                  .replace("extra:  ", "removed:"))
        print(f"export: {len(d.changed) + len(d.missing)} written, {len(d.extra)} removed")
    return 0
