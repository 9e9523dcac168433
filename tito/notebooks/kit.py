"""The student kit (`tito release MODULE --student-kit DIR`): a standalone student repository with
the release, the integration tests, the reference package of earlier modules and tito, checked line
by line against the solutions and hidden tests before it is written (`scan_kit`)."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import Course, TitoError
from tito.notebooks import regions
from tito.notebooks.cells import cell_source
from tito.notebooks.nbfile import read_notebook
from tito.notebooks.regions import squash
from tito.notebooks.student_release import release
# the set-up's measured size and time, as the launcher (tito/__main__.py, standard library only, imported by nothing)
# says them; tests/test_python_support.py holds the two equal
SETUP_CPU = "~1.8 GB, 2-8 min"
SETUP_CUDA = "~5.9 GB, 8 min or more"

KIT_README = """\
# {title}: student kit

Your copy of the course for Module {num}: the notebooks you fill in, `tito` (the course tool), the
integration tests `module complete` runs, and the reference package of the modules before this one
({prereqs}). There are no solutions in it: the package of this module is the one you export.

## Set up and start (two commands)

```bash
python3 -m tito module start {num}     # first run: creates .venv with the pinned dependencies
cd {module} && python3 -m tito module complete {num}
```

The first run sets up `.venv`: on Linux without an NVIDIA GPU it installs PyTorch's CPU-only build
({cpu}); with an NVIDIA GPU, or `TITO_TORCH=cuda python3 -m tito ...`, PyPI's CUDA build ({cuda}). Both figures are with the packages already downloaded; add the download on a slow network. If
PyTorch's CPU index cannot be reached, tito says so and installs PyPI's build (then delete `.venv` and
run again once it can, or set `TITO_TORCH_INDEX` to a mirror of https://download.pytorch.org/whl/cpu).

The first command copies the notebooks into `{module}/` (its README.md gives the reading order) and
prints what to run next; the second runs your inline tests, exports your code into `tinytorch/`
(where the notebooks and the tests import it from), runs the integration tests and reports. Open the
notebooks with `.venv/bin/jupyter lab {module}` (or any editor using the `.venv/bin/python` kernel);
after you finish a notebook, run `module complete` so the next notebooks can import your code. It
keeps the process that imported torch for 15 minutes after a run, so the next run after an edit is
quick (`TITO_KEEP_SERVER=0` keeps none; it holds about 0.5 GB of memory meanwhile).
In JupyterLab, a notebook's **Validate** button (nbgrader's, in the notebook's toolbar) runs the whole
notebook and says whether any cell fails; nbgrader's instructor tools (formgrader, Create Assignment,
the course and assignment lists) are switched off in this kit.
Every command tito prints works as printed from the folder it names; model paths are relative to
the folder you run in. `python3 -m tito --help` lists the commands of this kit.

Points are all or nothing per task: a task's graded test earns its points when every check in it
passes (your instructor's grading adds hidden checks of the same work); `module complete` shows each
task's points that way.
{capstone}
## Hand in

```bash
cd {module} && python3 -m tito module submit {num} --student YOUR_ID
```

`YOUR_ID` is the id your instructor asked for (letters, digits, `_ . @ + -`; remembered after the first
time). It checks your notebooks quickly (each one reads and compiles, the stubs still to fill in, the
written answers, what the last `module complete` said and whether a notebook changed since;
`--complete` runs every test first), then writes **one file**, `{module}-YOUR_ID.zip`, in this folder:
your notebooks{capstone_files}, and nothing else. Upload that file, unpacked and unrenamed, to the
course's assignment (Canvas, Moodle, or as your instructor says). To hand in again, run it again and
upload the new file.
"""

KIT_CAPSTONE = """
## The capstone

In `{module}/`, save your optimized model as TorchScript (`torch.jit.script(model).save("mine.pt")`, or
`torch.jit.trace`), then `python3 -m tito olympics submit --model mine.pt`, and
`python3 -m tito olympics verify submission.json --model mine.pt` to re-measure the claim. Your
`submission.json` and the model file it names go into your hand-in (below).
"""

KIT_GITIGNORE = ".venv/\n__pycache__/\n*.py[cod]\n*.egg-info/\n.tito/\n.ipynb_checkpoints/\nbenchmark_results/\n"
# commands and sub-commands a kit refuses (instructor machinery: solutions, grading, the course's sources)
KIT_REFUSED = {"export", "test", "release", "grade", "grades", "formgrader", "status", "bench-quality",
               "olympics judge", "olympics leaderboard"}
# a command's one-line help as a kit's `--help` shows it, where the course's names a refused sub-command
KIT_HELP = {"olympics": "the capstone: submit your model, validate and verify a submission"}


@dataclass
class KitResult:
    module: str
    dest: Path
    notebooks: list[Path] = field(default_factory=list)
    reference: list[str] = field(default_factory=list)    # modules whose reference package the kit carries
    tests: list[Path] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)        # "file: line" for each forbidden line found
    warnings: list[str] = field(default_factory=list)     # e.g. the course is not a git checkout


KIT_CONFTEST_END = "# ---- the course repository only: a student kit's conftest ends here"


def kit_conftest(text: str) -> str:
    """The course's tests/conftest.py as a kit holds it: up to the line starting KIT_CONFTEST_END (what
    follows orders the course's own test files for `tito test`, files a kit does not hold).

    >>> kit_conftest("import pytest\\n" + KIT_CONFTEST_END + " (x) ----\\nORDER = {'test_grading.py': 1}\\n")
    'import pytest\\n'
    """
    at = text.find("\n" + KIT_CONFTEST_END)
    return text if at < 0 else text[:at + 1].rstrip("\n") + "\n"


def prerequisites(course: Course, module: str) -> list[str]:
    """The modules before `module` in settings.ini's course order: completed before this one, so
    their reference package (the course's export, i.e. their solutions) may go to its students."""
    return course.modules[:course.modules.index(module)]


def kit_tests(course: Course, module: str) -> list[Path]:
    """The integration tests `module complete` runs for `module` (tests/test_NN_*.py)."""
    num = module.split("_", 1)[0]
    tests = course.root / "tests"
    return sorted(set(tests.glob(f"test_{num}_*.py")) | set(tests.glob(f"integration/test_{num}_*.py")))


def test_helpers(tests: list[Path], tests_dir: Path) -> list[Path]:
    """The modules in `tests_dir` that are neither tests nor conftest and that `tests` import, directly or through
    each other (tests/test_19_busy.py imports tests/busy.py): `module complete` and the kit ship them with the tests,
    or a test file fails to collect in a student's workspace.

    >>> test_helpers([], Path("tests"))
    []
    """
    found: set[Path] = set()
    todo = list(tests)
    while todo:
        try:
            tree = ast.parse(todo.pop().read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue  # a test that cannot be read fails on its own, named by pytest
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        for name in names:
            helper = tests_dir / f"{name}.py"
            if not name.startswith("test_") and name != "conftest" and helper.is_file() and helper not in found:
                found.add(helper)
                todo.append(helper)
    return sorted(found)


def forbidden_lines(course: Course, module: str) -> dict[str, str]:
    """line -> the notebook it comes from, for every secret line a kit of `module` must not hold
    (tito.notebooks.regions: `distinctive`, as a kit is searched file by file): the lines of solution and
    hidden-test regions of the module and of every later module, and of the hidden tests of its prerequisites
    (whose solutions are the reference package the kit carries). Keys are whitespace-free (`squash`)."""
    prereq = set(prerequisites(course, module))
    module_of = {nb: m for m in course.modules for nb in course.notebooks(m)}
    secret = regions.secret_lines(module_of, public=lambda nb, kind: module_of[nb] in prereq and kind == "solution",
                                  label=lambda nb: f"{module_of[nb]}/{nb.name}", rule=regions.distinctive)
    return {squash(k): v for k, v in secret.items()}


# archives by their first bytes (zip, also .whl/.npz/torch.save; gzip; bzip2; xz; 7z; rar; zstd) or a tar header
_ARCHIVE_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"7z\xbc\xaf\x27\x1c", b"Rar!",
                  b"\x28\xb5\x2f\xfd")
_ARCHIVE_SUFFIXES = {".zip", ".whl", ".egg", ".jar", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".7z", ".rar", ".zst", ".npz"}


def _unscannable(root: Path, f: Path, data: bytes) -> str | None:
    """Why the kit refuses the file `f` outright, or None: an archive anywhere (its members cannot be
    checked line by line; ship them unpacked), a binary file (a NUL byte) outside the release's
    declared data files (release/<module>/data/)."""
    if f.suffix.lower() in _ARCHIVE_SUFFIXES or data.startswith(_ARCHIVE_MAGIC) or data[257:262] == b"ustar":
        return "an archive: a kit ships no archive, whose contents the leak check cannot read; unpack it"
    rel = f.relative_to(root).parts
    if b"\0" in data and not (len(rel) > 3 and rel[0] == "release" and rel[2] == "data"):
        return "a binary file outside release/<module>/data/: the leak check cannot read it"
    return None


def scan_kit(root: Path, forbidden: dict[str, str]) -> list[str]:
    """Every `file: line` in the folder `root` (notebooks cell by cell, other files as text, read as
    UTF-8 with undecodable bytes replaced and, when not UTF-8, also as Latin-1) whose whitespace-free
    form (`squash`) is a key of `forbidden`, and every archive or unexpected binary (`_unscannable`)."""
    hits = []
    for f in sorted(Path(root).rglob("*")):
        if not f.is_file() or ".venv" in f.relative_to(root).parts:
            continue
        data = f.read_bytes()
        why = _unscannable(root, f, data)
        if why:
            hits.append(f"{f.relative_to(root)}: refused, {why}")
            continue
        lines = None
        if f.suffix == ".ipynb":
            try:
                lines = [ln for c in read_notebook(f).get("cells", []) for ln in cell_source(c).splitlines()]
            except (UnicodeDecodeError, ValueError, AttributeError, TypeError):
                pass  # not a readable notebook: read as text below
        if lines is None:
            lines = data.decode("utf-8", errors="replace").splitlines()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                lines += data.decode("latin-1").splitlines()
        for ln in lines:
            k = squash(ln)
            src = forbidden.get(k) or (forbidden.get(k[1:]) if k.startswith("#") else None)
            if src:
                hits.append(f"{f.relative_to(root)}: {ln.strip()[:100]!r} (from {src})")
    return hits


def tracked_files(root: Path) -> set[Path] | None:
    """The files git tracks in the course checkout `root` (absolute paths that exist), or None when
    `root` is not a git checkout of the course (git missing, or its settings.ini untracked, as in a
    copy inside another repository). Example: `Path("/c/tito/cli.py") in tracked_files(Path("/c"))`."""
    try:
        p = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    files = {f for f in (root / x for x in os.fsdecode(p.stdout).split("\0") if x) if f.is_file()}
    return files if root / "settings.ini" in files else None


def _copy_tito(course: Course, dest: Path, tracked: set[Path] | None) -> None:
    """DEST = the course's tito/ (the running one if the course has none): its git-tracked files, or
    when `tracked` is None (no git checkout) the whole folder but caches."""
    src = course.root / "tito"
    if tracked is None or not src.is_dir():
        src = src if src.is_dir() else Path(__file__).resolve().parent.parent
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
        return
    for f in sorted(f for f in tracked if f.is_relative_to(src)):
        (dest / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest / f.relative_to(src))


def _reference_package(course: Course, module: str, dest: Path) -> list[str]:
    """DEST = the course package reduced to the files the prerequisites of `module` export (with
    the `__init__.py` of each folder and nbdev's index of those modules only); returns them."""
    from tito.notebooks.exports import exported_files

    lib = course.lib_dir
    keep = {lib / "__init__.py"}
    for m in prerequisites(course, module):
        for f, _ in exported_files(course.notebooks(m), lib):
            keep.add(f)
    for f, _ in exported_files(course.notebooks(module), lib):  # the folders this module exports into
        keep.update(p / "__init__.py" for p in f.parents if p.is_relative_to(lib) and (p / "__init__.py").is_file())
    for f in list(keep):
        keep.update(p / "__init__.py" for p in f.parents if p.is_relative_to(lib) and (p / "__init__.py").is_file())
    for f in sorted(keep):
        if not f.is_file():
            raise TitoError(f"{f} is missing: run `tito export` before making a student kit")
        target = dest / f.relative_to(lib)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    modidx = lib / "_modidx.py"
    if modidx.is_file():  # nbdev's symbol index, restricted to the modules the kit carries
        import ast
        import pprint

        text = modidx.read_text(encoding="utf-8")
        d = ast.literal_eval(text[text.index("d = ") + 4:])
        mods = {".".join((lib.name, *f.relative_to(lib).with_suffix("").parts)) for f in keep}
        d["syms"] = {k: v for k, v in d.get("syms", {}).items() if k in mods}
        (dest / "_modidx.py").write_text("# Autogenerated by nbdev\n\nd = " + pprint.pformat(d, width=120) + "\n",
                                         encoding="utf-8")
    return sorted(str(f.relative_to(lib)) for f in keep)


def _kit_pyproject(course: Course, module: str) -> str:
    text = (course.root / "pyproject.toml").read_text(encoding="utf-8")
    return text.replace('readme = "README.md"', 'readme = "README.md"  # the student kit of ' + module, 1)


def _kit_settings(course: Course, module: str) -> str:
    return "\n".join([
        f"# Student kit of {module}, written by `tito release {module} --student-kit`.",
        "# The workspace is this folder: `module complete` rebuilds tinytorch/ here from",
        "# reference/tinytorch (the modules before this one) and your notebooks.",
        "[course]", f"course_id = {course.course_id}", f"modules = {module}", f"kit = {module}",
        f"prerequisites = {' '.join(prerequisites(course, module))}",
        "modules_dir = modules", "nbs_dir = nbs", "lib_dir = reference/tinytorch", "release_dir = release",
        "nbgrader_dir = .tito/nbgrader", f"cell_timeout = {course.cell_timeout}",
        f"notebook_time_limit = {course.notebook_time_limit}", "workspace_dir = .", ""])


def build_student_kit(course: Course, module: str, dest: Path) -> KitResult:
    """Write the student kit of `module` to DEST (which must not hold files): its release notebooks
    (nbgrader-stripped) with their README in release/NN_name/, tito, the integration tests
    `module complete` runs, the reference package of the prerequisite modules (in reference/ and,
    as the package notebooks import until the student's first export, in tinytorch/), pyproject,
    requirements.lock, settings.ini and a README. From a git checkout only git-tracked files of tito/
    and tests/ go in (otherwise all, with a warning in the result). The kit is built beside DEST and
    moved there only when no file in it holds a forbidden line (`forbidden_lines`, compared without
    whitespace) and none is an archive or an unexpected binary (`scan_kit`); otherwise nothing is
    written and the result lists the lines and files.
    """
    dest = Path(dest).resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise TitoError(f"--student-kit {dest}: the folder exists and is not empty; give a new folder")
    if course.kit:
        raise TitoError("this is a student kit: make kits from the course repository")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="tito-kit-nbgrader-") as nbg:
            res = release(course, module, release_dir=stage / "release", course_dir=Path(nbg))
        if res.leaks:
            return KitResult(module, dest, leaks=[str(x) for x in res.leaks])
        tracked = tracked_files(course.root)
        warnings = [] if tracked is not None else [
            f"{course.root} is not a git checkout: tito/ and the tests are copied whole from disk, untracked "
            "files included; make kits from a git checkout so that only tracked files ship"]
        _copy_tito(course, stage / "tito", tracked)
        tests = [t for t in kit_tests(course, module) if tracked is None or t in tracked]
        tests += test_helpers(tests, course.root / "tests")
        for t in tests + [course.root / "tests" / "conftest.py"]:
            if t.is_file() and (tracked is None or t in tracked):
                (stage / t.relative_to(course.root)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(t, stage / t.relative_to(course.root))
        if (stage / "tests" / "conftest.py").is_file():  # without the part about files the kit does not hold
            kc = stage / "tests" / "conftest.py"
            kc.write_text(kit_conftest(kc.read_text(encoding="utf-8")), encoding="utf-8")
        _reference_package(course, module, stage / "reference" / course.lib_dir.name)
        shutil.copytree(stage / "reference" / course.lib_dir.name, stage / course.lib_dir.name)
        for name in ("requirements.lock",):
            if (course.root / name).is_file():
                shutil.copy2(course.root / name, stage / name)
        (stage / "pyproject.toml").write_text(_kit_pyproject(course, module), encoding="utf-8")
        (stage / "settings.ini").write_text(_kit_settings(course, module), encoding="utf-8")
        (stage / ".gitignore").write_text(KIT_GITIGNORE, encoding="utf-8")
        prereqs = prerequisites(course, module)
        num = module.split("_", 1)[0]
        capstone = "olympics_dev" in course.reading_order(module)
        title = next((ln.lstrip("# ").split(" — ")[0].strip() for ln in
                      (course.modules_dir / module / "README.md").read_text(encoding="utf-8").splitlines()
                      if ln.startswith("# ")), f"Module {num}") if (course.modules_dir / module / "README.md").is_file() \
            else f"Module {num}"
        (stage / "README.md").write_text(KIT_README.format(
            title=title, num=num, module=module,
            prereqs=("Module " + ", ".join(m.split("_", 1)[0] for m in prereqs) + ": `reference/`") if prereqs
            else "none for this module",
            capstone=KIT_CAPSTONE.format(module=module) if capstone else "", cpu=SETUP_CPU, cuda=SETUP_CUDA,
            capstone_files=" and, when you made them, the capstone's `submission.json` and model file" if capstone
            else ""), encoding="utf-8")
        leaks = scan_kit(stage, forbidden_lines(course, module))
        if leaks:
            return KitResult(module, dest, leaks=leaks, warnings=warnings)
        if dest.exists():
            dest.rmdir()
        os.replace(stage, dest)
        stage = None
        rel = dest / "release" / module
        return KitResult(module, dest, course.in_reading_order(module, sorted(rel.glob("*.ipynb"))),
                         [m for m in prereqs], [dest / t.relative_to(course.root) for t in tests],
                         warnings=warnings)
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
