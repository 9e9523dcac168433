"""The student kit (`tito release N --student-kit DIR`, issue 20): what is in it, what is not, and the
student's path through it, every command run as `module start` prints it.

The kit's tito runs here with this venv's python as `python3` (PYTHONPATH = the kit, as its editable
install would make it; TITO_NO_BOOTSTRAP: no .venv of its own, which `python3 -m tito` would create
on first use). The leak check below parses modules/*/*_dev.py itself, independently of the kit
builder's own check.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tito.notebooks import kit as rel
from tito.workspace import layout
from tito.config import Course, TitoError, readme_library
from tito.notebooks.student_release import reading_readme

MODULE = "19_benchmarking"
REGIONS = {"### BEGIN SOLUTION": ("### END SOLUTION", "solution"),
           "### BEGIN HIDDEN TESTS": ("### END HIDDEN TESTS", "hidden")}


@pytest.fixture(scope="module")
def kits(course, tmp_path_factory):
    from shared_fixtures import kit_copy

    base = tmp_path_factory.mktemp("kits")
    return {"15_profiling": rel.build_student_kit(course, "15_profiling", base / "15_profiling"),
            MODULE: kit_copy(course, MODULE, tmp_path_factory, base / MODULE)}


def _env(kit: Path) -> dict:
    env = dict(os.environ, TITO_NO_BOOTSTRAP="1", PYTHONPATH=str(kit), MPLBACKEND="Agg")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # `python3` = this venv's
    env.pop("IN_TEST", None)
    return env


def _tito(kit: Path, cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", "-m", "tito", *args], cwd=cwd, env=_env(kit), capture_output=True, text=True,
                          timeout=timeout)


# ---- what a line of an answer is, read from the sources -------------------------------------------

def _distinctive(line: str) -> bool:
    "At least 12 characters, not a bare `for ...:`/`if ...:` header, and 5 names or numbers."
    return (len(line) >= 12 and not re.match(r"^(for|if|elif|else|while|with|try|except|finally)\b.*:$", line)
            and len(re.findall(r"[A-Za-z_]\w*|\d+(?:\.\d+)?", line)) >= 5)


def source_regions(course: Course) -> dict[str, list[tuple[str | None, str]]]:
    """module -> (region, line) for every line of its *_dev.py; markdown's `# ` taken off."""
    out = {}
    for m in course.modules:
        rows = []
        for src in course.sources(m):
            end = kind = None
            for raw in src.read_text(encoding="utf-8").splitlines():
                s = raw.strip()
                t = s[2:] if s.startswith("# ") else s
                if end is None and t in REGIONS:
                    end, kind = REGIONS[t]
                elif end is not None and t == end:
                    end = kind = None
                else:
                    rows += [(kind, s), (kind, t)]
        out[m] = rows
    return out


def forbidden(course: Course, module: str) -> dict[str, str]:
    """The lines a kit of `module` must not hold: solutions and hidden tests of `module` (and of any
    later module), hidden tests of the earlier ones (their solutions are the kit's reference)."""
    earlier = course.modules[:course.modules.index(module)]
    public, secret = set(), {}
    for m, rows in source_regions(course).items():
        for kind, line in rows:
            if kind is None or (m in earlier and kind == "solution"):
                public.add(line)
            else:
                secret.setdefault(line, f"{m} ({kind})")
    return {k: v for k, v in secret.items() if k not in public and _distinctive(k)}


def grep_kit(kit: Path, lines: dict[str, str]) -> list[str]:
    hits = []
    for f in sorted(p for p in kit.rglob("*") if p.is_file()):
        if f.suffix == ".ipynb":
            nb = json.loads(f.read_text(encoding="utf-8"))
            text = [ln for c in nb["cells"] for ln in "".join(c["source"]).splitlines()]
        else:
            text = f.read_text(encoding="utf-8", errors="replace").splitlines()
        hits += [f"{f.relative_to(kit)}: {ln.strip()!r} from {lines[k]}" for ln in text
                 for k in {ln.strip(), ln.strip().removeprefix("# ")} if k in lines]
    return hits


# ---- the kit's contents --------------------------------------------------------------------------

@pytest.mark.parametrize("module", ["15_profiling", MODULE])
def test_no_solution_or_hidden_test_line_anywhere_in_the_kit(course, kits, module, tmp_path):
    kit = kits[module]
    assert not kit.leaks, kit.leaks[:5]
    lines = forbidden(course, module)
    assert len(lines) > 100, "the sources should give many answer lines to look for"
    hits = grep_kit(kit.dest, lines)
    assert not hits, "\n".join(hits[:20])
    # the check can fail: the course's package of this module copied into the kit is caught
    copy = tmp_path / "kit"
    shutil.copytree(kit.dest, copy)
    pkg = "benchmarking" if module == MODULE else "profiling"
    shutil.copytree(course.lib_dir / pkg, copy / "tinytorch" / pkg, dirs_exist_ok=True)
    assert len(grep_kit(copy, lines)) >= 10
    assert rel.scan_kit(copy, rel.forbidden_lines(course, module))  # and so is it by the builder's own check


def _course_copy(course: Course, dest: Path) -> Path:
    "A copy of the course (its files on disk, no .venv/.git/caches), made a git checkout with all added."
    shutil.copytree(course.root, dest, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.pyc", ".tito",
                                                                     ".ipynb_checkpoints", "release"))
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    return dest


def test_kit_builder_refuses_planted_leaks(course, tmp_path):
    """Planted in a copy of the course, each is refused (listed, nothing written): a Latin-1 file
    with a solution line, a zip holding a solution file, a binary with one, a solution line re-spaced;
    an untracked file with a solution line does not go in at all, unless the course is no git checkout."""
    lines = [ln for ln in forbidden(course, "15_profiling") if " = " in ln and "(" in ln and not ln.startswith("#")]
    assert len(lines) >= 5, lines
    c = _course_copy(course, tmp_path / "course")
    (c / "tito" / "latin.py").write_bytes(f"# caf\xe9 notes\n{lines[0]}\n".encode("latin-1"))
    with zipfile.ZipFile(c / "tito" / "fixtures.zip", "w") as z:
        z.write(course.modules_dir / MODULE / "results_dev.py", "results_dev.py")
    (c / "tito" / "blob.bin").write_bytes(b"\0\1" + lines[1].encode() + b"\n")
    (c / "tito" / "squeezed.py").write_text("    " + re.sub(r"\s*([=+*/,-])\s*", r"\1", lines[2]) + "\n")
    subprocess.run(["git", "add", "-A"], cwd=c, check=True)
    (c / "tito" / "untracked.py").write_text(lines[3] + "\n")  # not added: no kit of a git checkout holds it
    (c / "tests" / "test_15_untracked.py").write_text(lines[4] + "\n")
    res = rel.build_student_kit(Course.load(c), "15_profiling", tmp_path / "kit")
    assert not (tmp_path / "kit").exists() and not res.warnings, res.warnings
    leaked = {ln.split(":", 1)[0] for ln in res.leaks}
    assert leaked == {"tito/latin.py", "tito/fixtures.zip", "tito/blob.bin", "tito/squeezed.py"}, res.leaks
    assert any("fixtures.zip: refused, an archive" in ln for ln in res.leaks)
    assert any("blob.bin: refused, a binary file" in ln for ln in res.leaks)
    assert c / "tito" / "cli.py" in rel.tracked_files(c)
    subprocess.run(["git", "rm", "-q", "--cached", "settings.ini"], cwd=c, check=True)
    assert rel.tracked_files(c) is None, "a checkout that does not track the course's settings.ini is not the course's"
    # no git checkout: the untracked files go in (and are caught here), with a warning
    shutil.rmtree(c / ".git")
    for f in ("latin.py", "fixtures.zip", "blob.bin", "squeezed.py"):
        (c / "tito" / f).unlink()
    res = rel.build_student_kit(Course.load(c), "15_profiling", tmp_path / "kit")
    assert {ln.split(":", 1)[0] for ln in res.leaks} == {"tito/untracked.py", "tests/test_15_untracked.py"}, res.leaks
    assert len(res.warnings) == 1 and "not a git checkout" in res.warnings[0]


def test_kit_contents(course, kits):
    kit = kits[MODULE].dest
    release = kit / "release" / MODULE
    assert sorted(p.name for p in release.glob("*.ipynb")) == sorted(p.name for p in course.notebooks(MODULE))
    assert [p.name for p in kits[MODULE].notebooks] == [f"{s}.ipynb" for s in course.reading_order(MODULE)]
    readme = (release / "README.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `(\w+)\.ipynb` \|", readme, re.M)
    assert [n for _, n in rows] == course.reading_order(MODULE)[:len(rows)] and rows[0] == ("1", "results_dev")
    assert {p.name for p in (kit / "tests").glob("test_*.py")} == {p.name for p in rel.kit_tests(course, MODULE)}
    # the modules the tests import from tests/ ship with them (test_19_busy.py imports busy.py), or it cannot collect
    assert (kit / "tests" / "busy.py").read_text() == (course.root / "tests" / "busy.py").read_text()
    # the reference: Module 15's package (a completed prerequisite), none of Module 19's code
    for lib in (kit / "reference" / "tinytorch", kit / "tinytorch"):
        files = sorted(p.relative_to(lib).as_posix() for p in lib.rglob("*.py"))
        assert "profiling/timing.py" in files and "profiling/profiler.py" in files, files
        assert [f for f in files if f.startswith("benchmarking/")] == ["benchmarking/__init__.py"]
        assert (lib / "benchmarking" / "__init__.py").read_text().strip() == ""
        assert "tinytorch.benchmarking" not in (lib / "_modidx.py").read_text()
    assert not (kits["15_profiling"].dest / "tinytorch" / "profiling" / "timing.py").exists()
    assert not any((kit / d).exists() for d in ("modules", "nbs", "build", "benchmarks", "tests/fixtures"))
    # what a student reads names only what the kit holds: test files, and no Module 15 notebook as a prerequisite
    text = (kit / "tests" / "conftest.py").read_text() + (release / "README.md").read_text()
    named = set(re.findall(r"\btest_\w+\.py\b", text))
    assert named <= {p.name for p in (kit / "tests").glob("test_*.py")}, named
    assert not re.search(r"\b(timing|profiling)_dev\b", (release / "README.md").read_text())
    assert "def course()" in (kit / "tests" / "conftest.py").read_text()
    k = Course.load(kit)
    assert k.kit == MODULE and k.modules == [MODULE] and k.workspace_dir == kit and k.lib_dir == kit / "reference" / "tinytorch"
    assert "python3 -m tito module start 19" in (kit / "README.md").read_text()
    with pytest.raises(TitoError, match="not empty"):
        rel.build_student_kit(course, MODULE, kit)


def test_reading_order(course, tmp_path):
    assert course.reading_order(MODULE)[:3] == ["results_dev", "digits_dev", "benchmarking_dev"]
    assert sorted(course.reading_order(MODULE)) == sorted(p.stem for p in course.notebooks(MODULE))
    assert course.reading_order("15_profiling") == ["timing_dev", "profiling_dev"]
    c = Course(root=tmp_path, modules=["01_x"], modules_dir=tmp_path / "modules", nbs_dir=tmp_path / "nbs",
               release_dir=tmp_path / "release")
    (tmp_path / "nbs" / "01_x").mkdir(parents=True)
    for n in ("c", "a", "b"):
        (tmp_path / "nbs" / "01_x" / f"{n}.ipynb").write_text("{}")
    assert c.reading_order("01_x") == ["a", "b", "c"]  # no README: by name
    (tmp_path / "modules" / "01_x").mkdir(parents=True)
    (tmp_path / "modules" / "01_x" / "README.md").write_text("| # | nb |\n|---|---|\n| 2 | `b` | two |\n| 1 | `c` | one |\n")
    assert c.reading_order("01_x") == ["c", "b", "a"]  # the table's numbers, then what it does not name
    assert [p.name for p in c.in_reading_order("01_x", [Path("a.ipynb"), Path(".tito_inline_b.py")])] == \
        [".tito_inline_b.py", "a.ipynb"]
    (tmp_path / "nbs" / "01_x" / "d.ipynb").write_text("{}")  # a library notebook: after the path, in its table's order
    (tmp_path / "modules" / "01_x" / "README.md").write_text(
        "| # | nb |\n|---|---|\n| 2 | `b` | two |\n| 1 | `c` | one |\n\n| goes with | nb |\n|---|---|\n"
        "| beside 2 | `d.ipynb` | lib |\n| beside 1 | `a` | lib |\n")
    assert c.reading_order("01_x") == ["c", "b", "d", "a"] and c.library_notebooks("01_x") == ["d", "a"]
    assert readme_library(tmp_path / "modules" / "01_x" / "README.md") == [("d", 2), ("a", 1)]
    readme = reading_readme(c, "01_x")
    assert "| 1 | `c.ipynb` | one |\n| 2 | `b.ipynb` | two |\n\n" in readme, readme
    assert "| beside 2 | `d.ipynb` | lib |\n| beside 1 | `a.ipynb` | lib |" in readme, readme


def test_instructor_commands_refuse_in_the_kit(kits):
    kit = kits[MODULE].dest
    for args in (["export"], ["grade", "19", "subs"], ["olympics", "judge", "subs", "--output-dir", "x"]):
        p = _tito(kit, kit, *args, timeout=120)
        assert p.returncode == 2 and "instructor command" in p.stderr and "student kit" in p.stderr, (args, p.stderr)
    assert "module complete 19" in _tito(kit, kit, "export", timeout=120).stderr
    h = _tito(kit, kit, "--help", timeout=120)  # the kit's help lists only what works in the kit
    assert h.returncode == 0 and "module" in h.stdout and "olympics" in h.stdout, h.stdout
    assert not {"formgrader", "autograde", "bench-quality", "grades", "leaderboard", "judge"} & set(
        re.findall(r"[\w-]+", h.stdout)), h.stdout
    o = _tito(kit, kit, "olympics", "--help", timeout=120)
    assert o.returncode == 0 and "verify" in o.stdout and not re.search(r"\b(judge|leaderboard)\b", o.stdout), o.stdout
    assert "submit" in _tito(kit, kit, "module", "--help", timeout=120).stdout
    p = _tito(kit, kit, "module", "start", "19", "--workspace", str(kit / "elsewhere"), timeout=120)
    assert p.returncode == 1 and "workspace is the kit folder" in p.stderr, p.stderr


# ---- the student's path, as printed --------------------------------------------------------------

@pytest.mark.slow
def test_student_path_in_the_kit(course, kits):
    """module start -> the printed `cd X && python3 -m tito module complete 19`, verbatim -> a model of
    the student's own class -> `olympics submit --model mine.pt` from that folder (~2-3 min)."""
    kit = kits[MODULE].dest
    p = _tito(kit, kit, "module", "start", "19", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    listed = re.findall(r"^\s+\d+\. (\S+\.ipynb)$", p.stdout, re.M)
    library = course.library_notebooks(MODULE)
    assert listed == [f"{s}.ipynb" for s in course.reading_order(MODULE) if s not in library] and library
    assert f"outside the reading order (no tasks): {', '.join(f'{s}.ipynb' for s in library)}" in p.stdout
    (cmd,) = [ln.strip() for ln in p.stdout.splitlines() if "module complete" in ln and ln.strip().startswith("cd ")]
    assert cmd == f"cd {MODULE} && python3 -m tito module complete 19", cmd
    mod_dir = kit / MODULE
    assert (mod_dir / "README.md").is_file() and (mod_dir / "tito" / "__init__.py").is_file()
    # before any of the student's code exists, a command reaching a stub names it
    early = _tito(kit, mod_dir, "olympics", "submit", "--runs", "3", timeout=300)
    assert early.returncode == 1 and "not yet implemented" in early.stderr and "Traceback" not in early.stderr, early.stderr

    # the printed command, verbatim, from the folder `module start` ran in: stubs fail by name
    done = subprocess.run(["bash", "-c", cmd], cwd=kit, env=_env(kit), capture_output=True, text=True, timeout=900)
    out = done.stdout
    assert done.returncode == 1 and "No module named" not in out + done.stderr, out[-3000:] + done.stderr[-2000:]
    assert re.search(r"^export\s+1\s+1\s+0", out, re.M), out[-3000:]  # the student's stubs, exported first
    assert "not yet implemented: BenchmarkResult.__post_init__" in out
    assert re.search(r"^integration tests\s+\d+", out, re.M)
    exported = (kit / "tinytorch" / "benchmarking" / "results.py").read_text()
    assert 'raise NotImplementedError("not yet implemented: wilson_interval")' in exported
    assert json.loads((mod_dir / "progress.json").read_text())["last"]["complete"] is False

    # a student who has finished: the course's solutions in their notebooks, exported as `complete` does
    for nb in course.notebooks(MODULE):
        shutil.copy2(nb, mod_dir / nb.name)
    kcourse = Course.load(kit)
    layout.build_student_package(kcourse, kit, kcourse.in_reading_order(MODULE, sorted(mod_dir.glob("*.ipynb"))))
    (mod_dir / "make_mine.py").write_text(MAKE_MINE)
    made = subprocess.run(["python3", "make_mine.py"], cwd=mod_dir, env=_env(kit), capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    sub = _tito(kit, mod_dir, "olympics", "submit", "--model", "mine.pt", "--runs", "5", timeout=600)
    assert sub.returncode == 0, sub.stdout[-2000:] + sub.stderr[-3000:]
    assert "deprecat" not in sub.stderr.lower() and "gpuGetDeviceCount" not in sub.stderr, sub.stderr[-2000:]
    data = json.loads((mod_dir / "submission.json").read_text())  # written where the student is
    assert any("mine.pt" in t for t in data["techniques"]), data["techniques"]


MAKE_MINE = '''\
"""The student's own model class, trained a little and saved as TorchScript (mine.pt, here)."""
import torch
from torch import nn

from tinytorch.benchmarking.digits import load_digits_split


class TinyDigits(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)


torch.manual_seed(0)
x, y = load_digits_split("train")
model = TinyDigits()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(100):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
torch.jit.script(model.eval()).save("mine.pt")
'''


# ---- the hand-in, from the kit to the grade ---------------------------------------------------------

def test_hand_in_walk_from_the_kit_to_the_grade(course, kits, tmp_path):
    """`module submit 19` in a kit writes one archive named for the student, holding the notebooks and the capstone's
    submission.json and the model it names, nothing else; a folder of two such archives and two Canvas-named ones
    (one LMS's download per folder: Moodle's are collected in test_handin), beside a zip with `../` names, one with a link, one of 10,000 files and one expanding to 1 GB, is
    unpacked under the right student ids, no "not graded" file of an honest student, and each hostile archive
    refused for its student only; one student of each kind of hand-in (alice's `module submit` archive, the
    Canvas-named 1001) is graded in full (one notebook's worth: results_dev), the other two unpacked to the same
    files (issue 43: grading identical copies again proved nothing more). The judge takes the capstone files
    from the same hand-ins (issue 44's scripted walk)."""
    from test_handin import bomb_zip, make_zip

    from tito.grading import classrun, handin

    kit = tmp_path / "kit"
    shutil.copytree(kits[MODULE].dest, kit, symlinks=True)  # --force: another test may have started the shared kit
    assert _tito(kit, kit, "module", "start", "19", "--force", timeout=300).returncode == 0
    mod_dir = kit / MODULE
    for nb in course.notebooks(MODULE):  # a student who has finished
        shutil.copy2(nb, mod_dir / nb.name)
    (mod_dir / "mine.pt").write_bytes(b"a model")
    (mod_dir / "submission.json").write_text(json.dumps({"models": {"optimized": {"file": "mine.pt"}}}))
    p = _tito(kit, mod_dir, "module", "submit", "19", timeout=300)
    assert p.returncode == 2 and "--student" in p.stderr, p.stderr  # no id yet: it asks for one
    p = _tito(kit, mod_dir, "module", "submit", "19", "--student", "alice", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    archive = kit / f"{MODULE}-alice.zip"
    assert f"hand-in written: {archive}" in p.stdout and "upload this one file" in p.stdout, p.stdout
    assert "`module complete` has not run here" in p.stdout, p.stdout  # what the quick check says it cannot know
    with zipfile.ZipFile(archive) as z:
        names = sorted(z.namelist())
    assert names == sorted([f"{MODULE}/{nb.name}" for nb in course.notebooks(MODULE)]
                           + [f"{MODULE}/mine.pt", f"{MODULE}/submission.json"]), names
    p = _tito(kit, mod_dir, "module", "submit", "19", timeout=300)  # the id is remembered
    assert p.returncode == 0 and f"{MODULE}-alice.zip" in p.stdout, p.stdout
    assert _tito(kit, mod_dir, "module", "submit", "19", "--student", "bob", timeout=300).returncode == 0

    subs = tmp_path / "class"
    subs.mkdir()
    for who in ("alice", "bob"):
        shutil.copy2(kit / f"{MODULE}-{who}.zip", subs)
    shutil.copy2(archive, subs / f"leecarol_late_1001_555_{MODULE}-carol.zip")        # Canvas's name
    shutil.copy2(archive, subs / f"smithdan_2002_556_{MODULE}-dan.zip")                # Canvas's too: one LMS a folder
    nb_text = (mod_dir / "results_dev.ipynb").read_text()
    make_zip(subs / f"{MODULE}-dotdot.zip", {f"{MODULE}/../../results_dev.ipynb": nb_text})
    make_zip(subs / f"{MODULE}-linker.zip", {f"{MODULE}/results_dev.ipynb": nb_text},
             links=[(f"{MODULE}/digits_dev.ipynb", "/etc/shadow")])
    make_zip(subs / f"{MODULE}-many.zip", {f"{MODULE}/f{i}.txt": "" for i in range(10_000)})
    bomb_zip(subs / f"{MODULE}-bomb.zip", f"{MODULE}/results_dev.ipynb")
    out = tmp_path / "grades"
    got = handin.for_grading(course, MODULE, subs, out, progress=lambda *a: None)
    assert sorted(got.sources) == ["1001", "2002", "alice", "bob"], got.problems
    assert sorted(line.split(":", 1)[0] for line in got.problems) == ["bomb", "dotdot", "linker", "many"], got.problems
    nbs = [course.nbs_dir / MODULE / "results_dev.ipynb"]
    files = lambda who: {p.relative_to(got.folder / who): p.read_bytes()  # noqa: E731
                         for p in sorted((got.folder / who).rglob("*")) if p.is_file()}
    assert files("bob") == files("alice") and files("2002") == files("1001") == files("alice")
    results = classrun.grade(course, MODULE, got.folder, out, notebooks=nbs, jobs=2, progress=lambda *a, **k: None,
                             extra_problems=got.problems, students=["1001", "alice"])
    assert sorted(r.student for r in results) == ["1001", "alice"]
    assert all(r.status == "passed" and r.score == r.max_score > 0 for r in results), [
        (r.student, r.status, r.score, r.max_score, r.reason[:200]) for r in results]
    problems = (out / "problems.txt").read_text().splitlines()
    assert sorted(line.split(":", 1)[0] for line in problems) == ["bomb", "dotdot", "linker", "many"], problems
    # the judge takes the capstone files from the same hand-ins
    cap = handin.collect(subs, tmp_path / "judged", None, capstone=True)
    assert {d.name: sorted(p.name for p in d.iterdir()) for d in cap.folder.iterdir()} == {
        s: ["mine.pt", "submission.json"] for s in ("1001", "2002", "alice", "bob")}


def test_the_modules_tests_import_from_their_folder_travel_with_them(tmp_path):
    """`module complete` and the kit copy the test files and what they import from tests/, transitively; other
    tests, conftest and installed packages stay where they are."""
    from tito.notebooks.kit import test_helpers

    (tmp_path / "test_19_x.py").write_text("import os\nfrom busy import hogs\nimport test_19_y\nimport conftest\n")
    (tmp_path / "busy.py").write_text("def hogs():\n    import load\n")
    (tmp_path / "load.py").write_text("x = 1\n")
    (tmp_path / "unused.py").write_text("")
    (tmp_path / "test_19_y.py").write_text("")
    (tmp_path / "conftest.py").write_text("")
    assert test_helpers([tmp_path / "test_19_x.py"], tmp_path) == [tmp_path / "busy.py", tmp_path / "load.py"]
