"""`tito module submit N`: the student's hand-in, one archive to upload to the course's LMS.

It checks the work quickly (every notebook reads and every code cell compiles, the stubs left, the written
answers written) and says what the last `module complete` found and whether a notebook changed since (`--complete`
runs it first), then writes WORKSPACE/NN_name-<student>.zip holding NN_name/<notebook>.ipynb for each notebook of
the module and, when the module folder has them, the capstone's submission.json and the model files it names:
nothing else (no progress.json, no README, no package). The student id is the one the instructor asked for
(`--student ID`, remembered in WORKSPACE/.tito/student.json for the next hand-in), under grading's rule
(tito.grading.tito.isolation.untrusted.student_id_problem); `tito grade` reads it back from the archive's name (tito.grading.handin),
or from the LMS's own id when the archive comes through an LMS's bulk download.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import Course, TitoError
from tito.grading import handin
from tito.grading.classrun import plural
from tito.isolation.untrusted import student_id_problem
from tito.notebooks import nbgrader_glue
from tito.notebooks.cells import cell_source, syntax_errors, where
from tito.workspace import layout
from tito.notebooks.nbfile import read_notebook

STUDENT_FILE = "student.json"   # WORKSPACE/.tito/student.json: the id given last time
STUB = 'raise NotImplementedError("not yet implemented'


@dataclass
class Check:
    """What the quick check found (`check`): lines to print, and whether anything stands in the way of full marks."""
    lines: list[str] = field(default_factory=list)
    problems: int = 0


def student_id(ws_root: Path, given: str | None) -> str:
    """The id to name the hand-in for: `given` (checked by grading's rule and remembered), else the one remembered."""
    memo = ws_root / layout.SCRATCH / STUDENT_FILE
    if given is None:
        try:
            given = json.loads(memo.read_text(encoding="utf-8")).get("student")
        except (OSError, ValueError, AttributeError):
            given = None
        if not isinstance(given, str):
            raise TitoError("--student: give the student id your instructor asked for (e.g. your university login), "
                            "once: `python3 -m tito module submit N --student ID`; it is remembered after that",
                            code=2)
    why = student_id_problem(given)
    if why:
        raise TitoError(f"--student: {given!r} is {why}", code=2)
    memo.parent.mkdir(parents=True, exist_ok=True)
    layout.write_json(memo, {"student": given})
    return given


def check(mod_dir: Path, notebooks: list[Path]) -> Check:
    """The quick checks (module doc), with what the last `module complete` said."""
    out = Check()
    stubs: dict[str, int] = {}
    for nb_path in notebooks:
        try:
            nb = read_notebook(nb_path)
        except (OSError, ValueError) as e:
            out.lines.append(f"  ! {nb_path.name} is not a readable notebook ({type(e).__name__}): it will score 0")
            out.problems += 1
            continue
        for err in syntax_errors(nb):
            out.lines.append(f"  ! {where(nb_path.name, err)}: that notebook's tests will fail")
            out.problems += 1
        left = sum(cell_source(c).count(STUB) for c in nb.get("cells", []) if c.get("cell_type") == "code")
        if left:
            stubs[nb_path.name] = left
    if stubs:
        out.lines.append(f"  {plural(sum(stubs.values()), 'stub')} still to fill in: "
                         + ", ".join(f"{n} ({k})" for n, k in stubs.items()))
        out.problems += 1
    answers = nbgrader_glue.written_answers(notebooks)
    if answers:
        done = sum(a.answered for a in answers)
        out.lines.append(f"  written answers: {done} of {len(answers)} written")
        out.problems += done < len(answers)
    last = _last_complete(mod_dir)
    if last is None:
        out.lines.append("  `module complete` has not run here: run it to see your tests' results before you hand in")
        out.problems += 1
        return out
    when = last.get("time", "?")
    pts = last.get("points") or {}
    said = "complete" if last.get("complete") else "NOT complete"
    out.lines.append(f"  last `module complete` ({when}): {said}, {pts.get('earned', '?')} of "
                     f"{pts.get('possible', '?')} points from your inline tests")
    out.problems += not last.get("complete")
    try:
        at = _dt.datetime.fromisoformat(when).timestamp()
    except (TypeError, ValueError):
        at = None
    changed = [p.name for p in notebooks if at is not None and p.stat().st_mtime > at]
    if changed:
        out.lines.append(f"  changed since: {', '.join(changed)}: run `module complete` again to test them")
        out.problems += 1
    return out


def _last_complete(mod_dir: Path) -> dict | None:
    try:
        data = json.loads((mod_dir / layout.PROGRESS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    last = data.get("last") if isinstance(data, dict) else None
    return last if isinstance(last, dict) else None


def capstone_files(mod_dir: Path) -> list[Path]:
    """submission.json of the module folder and the model files it names (models.<role>.file), where present."""
    sub = mod_dir / "submission.json"
    if not sub.is_file():
        return []
    out = [sub]
    try:
        doc = json.loads(sub.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return out
    models = doc.get("models") if isinstance(doc, dict) and isinstance(doc.get("models"), dict) else {}
    for role in ("optimized", "baseline"):
        name = models.get(role, {}).get("file") if isinstance(models.get(role), dict) else None
        if isinstance(name, str) and Path(name).name == name and (mod_dir / name).is_file():
            out.append(mod_dir / name)
    return out


def write_handin(module: str, mod_dir: Path, notebooks: list[Path], student: str, dest_dir: Path) -> tuple[Path, list[str]]:
    """DEST_DIR/NN_name-<student>.zip (written whole, then renamed) with the notebooks and capstone files under
    NN_name/; returns its path and the names it holds."""
    dest = Path(dest_dir) / handin.archive_name(module, student)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    names = []
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for f in [*notebooks, *capstone_files(mod_dir)]:
                z.write(f, f"{module}/{f.name}")
                names.append(f.name)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest, names


def submit(course: Course, module: str, mod_dir: Path, student: str | None, output: Path | None = None) -> int:
    """Check, write the hand-in, say what to do with it; 0 (the archive is written even when checks found
    problems: a partial hand-in still earns its points)."""
    mod_dir = Path(mod_dir).resolve()
    ws_root = mod_dir.parent
    sid = student_id(ws_root, student)
    notebooks = course.in_reading_order(module, sorted(mod_dir.glob("*.ipynb")), mod_dir)
    if not notebooks:
        raise TitoError(f"no notebooks in {mod_dir}: nothing to hand in")
    print(f"checking {plural(len(notebooks), 'notebook')} of {module} (quick checks; `--complete` runs every test "
          "first) ...")
    found = check(mod_dir, notebooks)
    for line in found.lines:
        print(line)
    dest, names = write_handin(module, mod_dir, notebooks, sid, Path(output) if output else ws_root)
    capstone = [n for n in names if not n.endswith(".ipynb")]
    print(f"\nhand-in written: {dest} ({plural(len(names) - len(capstone), 'notebook')}"
          + (f", the capstone's {', '.join(capstone)}" if capstone else ", no capstone submission.json")
          + f"; {dest.stat().st_size / 1024:.0f} KB)")
    print("upload this one file, as it is (do not unpack or rename it), to your course's assignment (Canvas, Moodle, "
          "or as your instructor says); to hand in again, run this again and upload the new file.")
    if found.problems:
        print(f"note: the checks above found {plural(found.problems, 'thing')} to look at first; the file is written "
              "anyway (what you hand in is graded as it is).")
    return 0
