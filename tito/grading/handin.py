"""Hand-ins: what students upload, made into the folders `tito grade` and `tito olympics judge` read.

A student hands in one archive, written by `tito module submit N` (`NN_name-<student>.zip`: their graded notebooks
and, when present, the capstone's submission.json and the model files it names). An instructor collects the
archives, or downloads them in bulk from the course's LMS, and gives that to `tito grade` and `olympics judge`.
SUBMISSIONS may be (detected from its entries; each layout may also be the bulk download's zip itself):

    folders    SUBMISSIONS/<student>/*.ipynb, or nbgrader's submitted/<student>/<module>/: read where they are
    archives   SUBMISSIONS/NN_name-<student>.zip (as `module submit` names it) or <student>.zip, .tar, .tar.gz, .tgz
    Canvas     "Download Submissions": files named <name>_[late_]<user id>_<attachment id>_<the file's name>, one
               or more per student (an archive, or the notebooks uploaded one by one); student id = the user id
    Moodle     "Download all submissions": folders <Full Name>_<participant id>_assignsubmission_file_ holding the
               student's files (or, without "in folders", files <Full Name>_<participant id>_assignsubmission_file_
               <the file's name>); student id = the participant id

The LMS is decided once per folder, from all its entries (`folder_layout`): a name only one LMS writes decides, so
a Canvas upload named like a Moodle hand-in is the uploader's Canvas file; names of both LMSs in one folder, or only
names either could have written, are the instructor's error (TitoError). tito's archives and student folders may sit
beside one LMS's download. A Moodle folder's id is read from the right end of its name; a flat Moodle file naming
two participant ids is nobody's; one id under two names (two students', or an LMS's and a tito archive's) is
refused, both named.

Every layout but the first is copied into OUTPUT/handins/<student>/ (`tito grade`: the assignment's notebooks only;
the judge: submission.json and its model files only; other files are left out, so nothing else is listed as "not
graded"), and OUTPUT/handins.json records where each student's files came from. Each archive is opened as hostile, in a child process of its own (tito.grading.unpack) limited to
ARCHIVE_MEMORY_MB of address space, ARCHIVE_CPU_SECONDS of CPU and ARCHIVE_SECONDS of wall-clock time (then killed),
writing no file above the student's byte cap: an archive that needs more is refused ("took longer than N s to open",
"needed more than N MiB to open") and costs only its owner:

- it is copied first, as a regular file (never through a link) of at most the student's byte cap;
- a zip's member count and directory size are read from its end record before zipfile parses its directory
  (at most ZIP_RECORD_BYTES a member);
- a tar's decompressed stream is counted as it is read, headers, padding and skipped `__MACOSX` members included:
  at most the student's byte cap plus STREAM_SLACK_MB, and no header above TAR_HEADER_BYTES (a GNU long name or PAX
  header is read whole), refused before the bytes are decompressed;
- only regular files and folders, with relative names that stay inside (no `..`, no absolute or drive names) and
  no encryption, are extracted: one link, device, `..` or absolute name refuses the whole archive;
- at most HANDIN_FILES files and the student's byte cap (`submission_folder_mb` in settings.ini) in all, counted
  from the declared sizes before anything is written and again while writing (a zip's header may lie);
- archives inside a student's archive are not opened.
A refused archive, a hand-in with no usable student id (grading's rule: tito.isolation.untrusted.student_id_problem), or two
hand-ins whose ids differ only by case or Unicode form are that student's line in problems.txt; the others go on.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import Course, TitoError
from tito.grading.classrun import plural
from tito.grading.unpack import (HANDIN_FILES, STREAM_SLACK_MB, ZIP_RECORD_BYTES, Budget, Refused, is_junk,  # noqa: F401 (re-exported)
                                 member_parts, write_member, zip_entries, is_archive)
from tito.isolation import untrusted
from tito.isolation.untrusted import same_ids, student_id_problem
from tito.notebooks.nbfile import atomic_write

BULK_FILES = 200_000          # entries of an LMS's bulk download
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
MODEL_SUFFIXES = (".pt", ".pth", ".ts", ".onnx")
FOLDER = "handins"            # OUTPUT/handins/<student>/
INDEX = "handins.json"        # OUTPUT/handins.json: student -> where their files came from
LMS_LAYOUTS = ("canvas", "moodle")
_MOODLE_MARK = re.compile(r"_(?P<id>\d+)_assignsubmission_(?:file|onlinetext)_", re.S)  # after the student's name
_MOODLE_DIR = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_assignsubmission_(?:file|onlinetext)_$", re.S)  # id: the right end
_CANVAS = re.compile(r"^(?P<name>[^_]+)_(?:late_|LATE_)?(?P<id>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.S)
_TITO = re.compile(r"^(?P<module>\d+_[A-Za-z0-9]+)-(?P<id>[^/]+?)\.zip$", re.S)
_RESUBMITTED = re.compile(r"^(?P<stem>.+)-\d+(?P<suffix>\.[A-Za-z0-9]+)$")  # Canvas's `name-1.ipynb` on a resubmission


@dataclass
class HandIns:
    """What `collect` made of SUBMISSIONS: the folder to read (`folder`: SUBMISSIONS itself for plain student
    folders, else OUTPUT/handins), the layout found, per student where their files came from, and the report's
    lines for what was not taken."""
    folder: Path
    layout: str
    sources: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# ---- names -----------------------------------------------------------------------------------

def archive_name(module: str, student: str) -> str:
    """The file name `tito module submit` gives a student's hand-in (and `collect` reads the id back from).

    >>> archive_name("19_benchmarking", "ann.lee")
    '19_benchmarking-ann.lee.zip'
    """
    return f"{module}-{student}.zip"


def _lms(name: str, is_dir: bool) -> dict[str, tuple[str, str, str]]:
    """What each LMS would make of the entry `name`: {layout: (student id, the file's own name, the LMS's name of
    the student)}. Both keys when the name fits both (a Canvas upload named like Moodle's); Refused for a Moodle
    file name holding two participant ids (the profile name and the file's name are both the student's: whose
    it is cannot be told). A Moodle folder's id is read from the right end (Moodle writes `_<id>_assignsubmission_
    file_` last; a profile name may hold the same words)."""
    out: dict[str, tuple[str, str, str]] = {}
    if is_dir:
        m = _MOODLE_DIR.match(name)
        if m:
            out["moodle"] = (m["id"], "", m["name"])
        return out
    marks = list(_MOODLE_MARK.finditer(name))
    if len(marks) > 1:
        raise Refused(f"{untrusted.shown(name)}: a Moodle name holding two participant ids "
                      f"({', '.join(m['id'] for m in marks)}): whose hand-in it is cannot be told")
    if marks and marks[0].start() > 0:
        out["moodle"] = (marks[0]["id"], name[marks[0].end():], name[:marks[0].start()])
    m = _CANVAS.match(name)
    if m:
        out["canvas"] = (m["id"], m["file"], m["name"])
    return out


def identify(name: str, is_dir: bool, layout: str | None = None) -> tuple[str, str, str] | None:
    """(layout, student id, the file's own name) for a top-level entry of SUBMISSIONS, or None when its name says
    nothing (a plain student folder, a stray file). The id is the LMS's where there is one (Canvas's user id,
    Moodle's participant id: what their grade imports key on), never a name a student typed. `layout` is the
    folder's LMS ("canvas" or "moodle", decided by `folder_layout` from all its entries): only that LMS's names
    are read as hand-ins of it (a Canvas upload is never read as Moodle's). Refused: see `_lms`.

    >>> identify("leeann_late_4242_99_19_benchmarking-ann.zip", False)
    ('canvas', '4242', '19_benchmarking-ann.zip')
    >>> identify("Ann Lee_77_assignsubmission_file_", True)
    ('moodle', '77', '')
    >>> identify("eve_5151_101_x_4242_assignsubmission_file_.zip", False, "canvas")
    ('canvas', '5151', 'x_4242_assignsubmission_file_.zip')
    >>> identify("19_benchmarking-ann.zip", False), identify("ann.tar.gz", False), identify("notes.txt", False)
    (('archive', 'ann', '19_benchmarking-ann.zip'), ('archive', 'ann', 'ann.tar.gz'), None)
    """
    lms = _lms(name, is_dir)
    for kind in ((layout,) if layout in LMS_LAYOUTS else LMS_LAYOUTS):
        if kind in lms:
            return kind, lms[kind][0], lms[kind][1]
    if is_dir or (layout in LMS_LAYOUTS and lms):
        return None
    m = _TITO.match(name)
    if m:
        return "archive", m["id"], name
    low = name.lower()
    suffix = next((s for s in ARCHIVE_SUFFIXES if low.endswith(s)), None)
    if suffix and len(name) > len(suffix):
        return "archive", name[:-len(suffix)], name
    return None


def folder_layout(entries: list[tuple[str, bool]]) -> str | None:
    """The LMS whose download SUBMISSIONS is ("canvas" or "moodle"), decided from all its top-level entries (name,
    is a folder), or None (tito's archives and student folders only). A name only one LMS writes decides; a name
    both could have written (a Canvas upload named like Moodle's) follows the others. TitoError (the instructor's)
    when names of both LMSs are there, or when nothing tells which LMS wrote a name both could have.

    >>> folder_layout([("bob_4242_99_a.zip", False), ("eve_5151_101_x_4242_assignsubmission_file_.zip", False)])
    'canvas'
    >>> folder_layout([("Ann Lee_77_assignsubmission_file_", True), ("19_benchmarking-cy.zip", False)])
    'moodle'
    """
    only: dict[str, str] = {}  # LMS -> the first name only it writes
    both: list[str] = []
    for name, is_dir in entries:
        try:
            lms = _lms(name, is_dir)
        except Refused:
            lms = {"moodle": ("", "", "")}  # two Moodle ids: still only Moodle writes such a name
        if len(lms) > 1:
            both.append(name)
        elif lms:
            only.setdefault(next(iter(lms)), name)
    if len(only) > 1:
        raise TitoError("SUBMISSIONS holds both a Canvas download's files (e.g. "
                        f"{untrusted.shown(only['canvas'])}) and a Moodle download's (e.g. "
                        f"{untrusted.shown(only['moodle'])}): give tito one LMS's download per folder", code=2)
    if only:
        return next(iter(only))
    if both:
        raise TitoError(f"SUBMISSIONS: {untrusted.shown(both[0])} could be a Canvas or a Moodle download's file and "
                        "nothing else in the folder tells which: rename it to the LMS's own name, or add the rest "
                        "of the download", code=2)
    return None


# ---- opening archives ------------------------------------------------------------------------

# Limits of the child process that opens one student's archive (`extract`): a hostile archive costs its owner only.
ARCHIVE_MEMORY_MB = 1_024     # address space of that child (RLIMIT_AS): tarfile reads a GNU/PAX header whole
ARCHIVE_CPU_SECONDS = 60      # its CPU time (RLIMIT_CPU): decompressing is CPU-bound
ARCHIVE_SECONDS = 120         # its wall-clock time, then it is killed (a loaded machine: more than the CPU time)
_ROOT = Path(__file__).resolve().parents[2]   # the folder holding the `tito` package, for the child's sys.path
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from tito.grading import unpack; sys.exit(unpack.main(sys.argv[2:]))"


def _limits(memory_mb: int, cpu_seconds: int, file_bytes: int):
    "The child's preexec: its rlimits, lowered to what tito itself has (sandbox.within_inherited)."
    import resource

    from tito.isolation.sandbox import within_inherited

    rl = within_inherited({resource.RLIMIT_AS: (memory_mb << 20,) * 2,
                           resource.RLIMIT_CPU: (cpu_seconds, cpu_seconds + 1),  # SIGXCPU at the soft limit
                           resource.RLIMIT_FSIZE: (file_bytes,) * 2,             # no file above the budget
                           resource.RLIMIT_CORE: (0, 0)})

    def setup() -> None:
        for which, value in rl.items():
            resource.setrlimit(which, value)
    return setup


def extract(archive: Path, dest: Path, budget: Budget) -> list[str]:
    """Extract `archive` into the empty folder `dest` as the module doc says, in a child process with its own
    limits (ARCHIVE_MEMORY_MB, ARCHIVE_CPU_SECONDS, ARCHIVE_SECONDS; tito.grading.unpack does the work); the
    relative paths of the files written. Refused (and `dest` emptied) for anything else; `budget` is what the
    hand-in may still take, and what the child wrote is taken from it.

    >>> import tempfile; t = Path(tempfile.mkdtemp()); z = t / "a.zip"
    >>> with zipfile.ZipFile(z, "w") as f: f.writestr("m/a_dev.ipynb", "{}")
    >>> extract(z, t / "out", Budget(10, 1 << 20))
    ['m/a_dev.ipynb']
    """
    import signal
    import subprocess

    from tito.isolation import process

    what = untrusted.shown(archive.name)
    if is_archive(archive) is None:
        raise Refused(f"{what} is not a zip or tar archive")
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-I", "-S", "-c", _CHILD, str(_ROOT), str(archive), str(dest), str(budget.files),
           str(max(0, budget.bytes)), what]
    p = process.start(cmd, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                      preexec=_limits(ARCHIVE_MEMORY_MB, ARCHIVE_CPU_SECONDS, max(0, budget.bytes) + (1 << 20)))
    out = err = b""
    try:
        out, err = p.communicate(timeout=ARCHIVE_SECONDS)
        rc: int | None = p.returncode
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        process.kill_group(p)
    if rc is None:
        p.communicate()
    # Python out of memory before the child's own handler: a MemoryError traceback, or a library it cannot map
    no_memory = rc != 0 and any(w in err[-2000:] for w in (b"MemoryError", b"failed to map segment",
                                                           b"Cannot allocate memory"))
    try:
        got = json.loads(out.decode().strip().splitlines()[-1]) if rc == 0 else {}
    except (ValueError, IndexError, UnicodeDecodeError):
        got = {}
    if "written" not in got:
        shutil.rmtree(dest, ignore_errors=True)
        if "refused" in got:
            raise Refused(str(got["refused"]))
        if rc is None:
            raise Refused(f"{what} took longer than {ARCHIVE_SECONDS} s to open")
        if got.get("memory") or no_memory:
            raise Refused(f"{what} needed more than {ARCHIVE_MEMORY_MB} MiB to open")
        if rc == -signal.SIGXCPU:
            raise Refused(f"{what} took more than {ARCHIVE_CPU_SECONDS} s of CPU time to open")
        raise Refused(f"{what} cannot be unpacked (the process opening it ended with code {rc})")
    budget.take(len(got["written"]), int(got["bytes"]), what)
    return [str(w) for w in got["written"]]


# ---- one student's files ----------------------------------------------------------------------

def _gather(members: list[tuple[Path, str]], raw: Path, budget: Budget, open_archives: bool = True) -> None:
    """Copy each member (a path, and the name the student gave it) into RAW/<k>/: a folder's regular files (its
    archives opened too), an archive unpacked, another file as it is."""
    for k, (path, name) in enumerate(members):
        slot = raw / f"{k:03d}"
        try:
            st = os.lstat(path)
        except OSError as e:
            raise Refused(f"{untrusted.shown(name)} cannot be read: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            seen = untrusted.survey(path, folder_mb=max(1, budget.bytes // untrusted.MB + 1))
            if seen.over:
                raise Refused(f"{untrusted.shown(path.name)}: {seen.over}")
            inner = []
            for rel in seen.files:
                budget.take(1, 0, untrusted.shown(path.name))
                inner.append((path / rel, rel))
            for rel, why in seen.refused.items():  # a link or pipe among the student's files: theirs, not copied
                raise Refused(untrusted.reason(f"{path.name}/{rel}", why))
            tops = [(p, r) for p, r in inner if "/" not in r]
            for p, rel in inner:
                if open_archives and "/" not in rel and is_archive(p):
                    continue
                target = slot.joinpath(*rel.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                size = untrusted.check_file(p, max(0, budget.bytes))
                budget.take(0, size, untrusted.shown(rel))
                untrusted.copy_regular(p, target, size)
            if open_archives:
                for p, rel in tops:
                    if is_archive(p):
                        _unpack(p, slot / f"{rel}.d", budget)
            continue
        if not stat.S_ISREG(st.st_mode):
            raise Refused(untrusted.reason(name, untrusted.what_it_is(st.st_mode) + ", not a regular file: not opened"))
        size = untrusted.check_file(path, max(0, budget.bytes))
        slot.mkdir(parents=True)
        if open_archives and (name.lower().endswith(ARCHIVE_SUFFIXES) or is_archive(path)):
            _unpack(path, slot, budget, shown=name)
        else:
            clean = Path(name.replace("\\", "/")).name or "file"
            budget.take(1, size, untrusted.shown(name))
            untrusted.copy_regular(path, slot / clean, size)


def _unpack(path: Path, dest: Path, budget: Budget, shown: str | None = None) -> None:
    """Copy the archive `path` (a regular file, within the budget), then extract the copy into `dest`."""
    size = untrusted.check_file(path, max(0, budget.bytes))
    with tempfile.TemporaryDirectory(prefix="tito-handin-") as tmp:
        copy = Path(tmp) / (Path(shown or path.name).name or "archive")
        untrusted.copy_regular(path, copy, size)
        dest.mkdir(parents=True, exist_ok=True)
        extract(copy, dest, budget)


def _best_folder(files: list[Path], wanted: set[str]) -> Path | None:
    """The folder holding the most of the `wanted` names (then the shallowest, then the first by name)."""
    by_dir: dict[Path, int] = {}
    for f in files:
        if _wanted_name(f.name, wanted):
            by_dir[f.parent] = by_dir.get(f.parent, 0) + 1
    if not by_dir:
        return None
    return min(by_dir, key=lambda d: (-by_dir[d], len(d.parts), str(d)))


def _wanted_name(name: str, wanted: set[str]) -> str | None:
    """`name` when wanted, or the wanted name of Canvas's resubmission copy (`results_dev-1.ipynb`)."""
    if name in wanted:
        return name
    m = _RESUBMITTED.match(name)
    if m and f"{m['stem']}{m['suffix']}" in wanted:
        return f"{m['stem']}{m['suffix']}"
    return None


def pick_notebooks(raw: Path, wanted: set[str]) -> dict[str, Path]:
    """The assignment's notebooks in a student's unpacked files: from the folder holding most of them (a zip of
    the whole kit also holds the release's blank copies, deeper down; `.ipynb_checkpoints` never count), any
    other wanted name from the shallowest folder holding it."""
    files = sorted(p for p in raw.rglob("*.ipynb") if p.is_file() and ".ipynb_checkpoints" not in p.parts)
    best = _best_folder(files, wanted)
    out: dict[str, Path] = {}
    for f in sorted(files, key=lambda p: (p.parent != best, len(p.parts), str(p))):
        name = _wanted_name(f.name, wanted)
        if name and name not in out:
            out[name] = f
    return out


def pick_capstone(raw: Path) -> dict[str, Path]:
    """The capstone's files in a student's unpacked files: the shallowest submission.json and, from its folder,
    the model files it names (models.<role>.file), or the folder's model files when it names none."""
    subs = sorted((p for p in raw.rglob("submission.json") if p.is_file()), key=lambda p: (len(p.parts), str(p)))
    if not subs:
        return {}
    sub = subs[0]
    out = {"submission.json": sub}
    try:
        doc = json.loads(untrusted.read_regular(sub, 16 * untrusted.MB))
    except (untrusted.Refused, ValueError, RecursionError):
        doc = {}
    models = doc.get("models") if isinstance(doc, dict) and isinstance(doc.get("models"), dict) else {}
    named = [m.get("file") for m in models.values() if isinstance(m, dict) and isinstance(m.get("file"), str)]
    for name in named:
        if Path(name).name == name and (sub.parent / name).is_file():
            out[name] = sub.parent / name
    if len(out) == 1:
        for p in sorted(sub.parent.iterdir()):
            if p.is_file() and p.suffix.lower() in MODEL_SUFFIXES:
                out[p.name] = p
    return out


# ---- the whole folder -------------------------------------------------------------------------

def needs_collecting(source: Path) -> bool:
    """Whether SUBMISSIONS holds hand-ins (archives, an LMS's names) rather than plain student folders: a top-level
    archive or LMS-named entry, or a student folder with an archive and no notebook at its top."""
    if source.is_file():
        return True
    if (source / "submitted").is_dir():
        return False
    for p in source.iterdir():
        if p.name.startswith(".") or p.is_symlink():
            continue
        try:
            if identify(p.name, p.is_dir()) is not None:  # an archive, a Canvas file, a Moodle folder
                return True
        except Refused:  # a Moodle name holding two ids: still an LMS's name
            return True
        if p.is_dir():
            try:
                tops = [q for q in p.iterdir() if not q.is_symlink() and q.is_file()]
            except OSError:
                continue
            if not any(q.suffix == ".ipynb" for q in tops) and any(q.name.lower().endswith(ARCHIVE_SUFFIXES)
                                                                   for q in tops):
                return True
    return False


def _unpack_bulk(archive: Path, dest: Path, member_bytes: int) -> list[str]:
    """An LMS's bulk download (the instructor's file) extracted into `dest`: each member capped at `member_bytes`,
    at most BULK_FILES; a member that is refused (a link, `..`, too large) is left out and its line returned."""
    problems: list[str] = []
    kind = is_archive(archive)
    if kind is None:
        raise TitoError(f"SUBMISSIONS: {archive} is a file but not a zip or tar archive (expected a folder of "
                        "student folders or hand-ins, or an LMS's bulk download)", code=2)
    try:
        if kind == "zip":
            if zip_entries(archive) > BULK_FILES or zip_entries(archive) == 0xFFFF:
                raise TitoError(f"SUBMISSIONS: {archive} holds more than {BULK_FILES} entries", code=2)
            with zipfile.ZipFile(archive) as zf:
                members = [(i, i.filename, i.file_size, stat.S_ISLNK(i.external_attr >> 16) or i.flag_bits & 1)
                           for i in zf.infolist() if not i.is_dir()]
                for info, name, size, bad in members:
                    _bulk_member(dest, name, size, member_bytes, problems, bad,
                                 lambda info=info: zf.open(info))
        else:
            with tarfile.open(archive, mode="r:*") as tf:
                for count, m in enumerate(tf):
                    if count >= BULK_FILES:
                        raise TitoError(f"SUBMISSIONS: {archive} holds more than {BULK_FILES} entries", code=2)
                    if m.isdir():
                        continue
                    _bulk_member(dest, m.name, m.size, member_bytes, problems, not m.isreg() or m.issparse(),
                                 lambda m=m: tf.extractfile(m))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, Refused) as e:
        raise TitoError(f"SUBMISSIONS: {archive} cannot be unpacked ({type(e).__name__}: {e})", code=2) from None
    return problems


def _bulk_member(dest: Path, name: str, size: int, cap: int, problems: list[str], bad: bool, opener) -> None:
    top = next((p for p in re.split(r"[\\/]+", name) if p not in ("", ".")), name)
    try:
        parts = member_parts(name)
        if not parts or is_junk(parts):
            return
        if bad:
            raise Refused(f"{untrusted.shown(name)} is a link, encrypted or not a regular file")
        if size > cap:
            raise Refused(f"{untrusted.shown(name)}: {size / untrusted.MB:.0f} MB, above the limit of "
                          f"{cap / untrusted.MB:.0f} MB")
        with opener() as src:
            write_member(src, dest.joinpath(*parts), size)
    except Refused as e:
        problems.append(f"{untrusted.shown(top)}: in the bulk download: {e}; not graded")


def collect(source: Path, out_dir: Path, wanted: set[str] | None, capstone: bool = False,
            folder_mb: int = untrusted.DEFAULT_FOLDER_MB) -> HandIns:
    """SUBMISSIONS as a folder of student folders (module doc). Plain student folders: SUBMISSIONS itself. Hand-ins
    (archives, an LMS's layout, or a bulk download's zip): OUTPUT/handins/<student>/ rebuilt, holding the
    notebooks named in `wanted` (or, with `capstone`, submission.json and its model files), and
    OUTPUT/handins.json; each problem is a line of the result."""
    source = given = Path(source)
    if not source.exists():
        raise TitoError(f"SUBMISSIONS: {source} does not exist", code=2)
    if not needs_collecting(source):
        return HandIns(source, "folders")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cap = folder_mb * untrusted.MB
    work = Path(tempfile.mkdtemp(prefix=".handins-", dir=out_dir))
    try:
        problems: list[str] = []
        if source.is_file():
            bulk = work / "bulk"
            bulk.mkdir()
            problems += _unpack_bulk(source, bulk, cap)
            source = bulk
            # a bulk zip of one folder (Moodle names its zip's folder after the assignment, some unzip tools add one)
            tops = [p for p in source.iterdir() if not p.name.startswith(".")]
            if len(tops) == 1 and tops[0].is_dir() and identify(tops[0].name, True) is None and \
                    needs_collecting(tops[0]):
                source = tops[0]
        groups: dict[str, list[tuple[Path, str]]] = {}
        names: dict[str, dict[str, str]] = {}  # student id -> {the LMS's name of the student (or the entry's): entry}
        layouts: set[str] = set()
        entries = [p for p in sorted(source.iterdir()) if not p.name.startswith(".")]
        lms = folder_layout([(p.name, p.is_dir()) for p in entries if not p.is_symlink()])
        for p in entries:
            shown = untrusted.shown(p.name)
            if p.is_symlink():
                problems.append(f"{shown}: a symbolic link, not a hand-in; not graded")
                continue
            try:
                found = identify(p.name, p.is_dir(), lms)
                # whose name it is under: the LMS's name of the student, or (tito's archives and folders, whose
                # name is the id) one key for all of them: a student's two archives are one hand-in
                who = _lms(p.name, p.is_dir())[lms][2] if found and found[0] == lms else "\0tito"
            except Refused as e:
                problems.append(f"{e}; not graded")
                continue
            if found is None and p.is_dir():
                found = ("folders", p.name, "")
            if found is None:
                problems.append(f"{shown}: not a hand-in (expected an archive, a student folder, or an LMS's "
                                "download); ignored")
                continue
            layout, sid, own = found
            why = student_id_problem(sid)
            if why:
                problems.append(f"{shown}: the student id {untrusted.shown(sid)!r} is {why}; not graded")
                continue
            layouts.add(layout)
            groups.setdefault(sid, []).append((p, own or p.name))
            names.setdefault(sid, {}).setdefault(who, p.name)
        result = HandIns(out_dir / FOLDER, "+".join(sorted(layouts)) or "empty")
        ids = sorted(groups)
        clash = same_ids(ids)
        two_names = set()
        for sid in ids:  # one id, two students' names (or an LMS's file and tito's archive): whose is it?
            if len(names[sid]) > 1 and sid not in clash:
                two_names.add(sid)
                problems.append(f"{sid}: hand-ins under more than one name for this id ("
                                f"{', '.join(untrusted.shown(n) for n in names[sid].values())}); none is graded: "
                                "the LMS gives each student one name")
        for sid in sorted(clash):
            problems.append(f"{sid}: another hand-in's id differs only in case or Unicode form "
                            f"({', '.join(clash[sid])}); neither is graded: rename one")
        staged = work / FOLDER
        staged.mkdir()
        for sid in ids:
            if sid in clash or sid in two_names:
                continue
            raw = work / "raw" / sid
            raw.mkdir(parents=True)
            budget = Budget(HANDIN_FILES, cap)
            try:
                _gather(groups[sid], raw, budget)
            except Refused as e:
                problems.append(f"{sid}: {e}; not graded")
                continue
            except untrusted.Refused as e:
                problems.append(f"{sid}: {e}; not graded")
                continue
            picked = pick_capstone(raw) if capstone else pick_notebooks(raw, wanted or set())
            if not picked:
                what = "no submission.json" if capstone else "none of the assignment's notebooks"
                problems.append(f"{sid}: {what} in the hand-in "
                                f"({', '.join(untrusted.shown(n) for _, n in groups[sid])}); not graded")
                continue
            (staged / sid).mkdir()
            for name, path in picked.items():
                shutil.copyfile(path, staged / sid / name, follow_symlinks=False)
            result.sources[sid] = [untrusted.shown(n) for _, n in groups[sid]]
        final = out_dir / FOLDER
        old = work / "old"
        if final.exists():
            os.replace(final, old)
        os.replace(staged, final)
        atomic_write(out_dir / INDEX, json.dumps(
            {"source": str(given.resolve()), "layout": result.layout, "students": result.sources,
             "problems": problems}, indent=1) + "\n")
        result.problems = problems
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def for_grading(course: Course, module: str, source: Path, out_dir: Path, progress=print) -> HandIns:
    """`tito grade`'s SUBMISSIONS as a folder `classrun.grade` reads (collect, with the assignment's notebooks)."""
    from tito.grading.classrun import assignment_files
    from tito.notebooks.nbgrader_glue import module_assignment_notebooks

    wanted = assignment_files(course, module, module_assignment_notebooks(course.nbs_dir, module))
    got = collect(source, out_dir, wanted, folder_mb=course.submission_folder_mb)
    if got.layout != "folders":
        progress(f"hand-ins ({got.layout}): {plural(len(got.sources), 'student')} unpacked into {got.folder}"
                 + (f", {plural(len(got.problems), 'hand-in')} not graded (problems.txt)" if got.problems else ""))
    return got
