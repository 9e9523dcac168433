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

Every layout but the first is copied into OUTPUT/handins/<student>/ (`tito grade`: the assignment's notebooks only;
the judge: submission.json and its model files only; other files are left out, so nothing else is listed as "not
graded"), and OUTPUT/handins.json records where each student's files came from. Each archive is opened as hostile:

- it is copied first, as a regular file (never through a link) of at most the student's byte cap;
- a zip's member count is read from its end record before zipfile parses its directory;
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
import struct
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import Course, TitoError
from tito.isolation import untrusted
from tito.grading.classrun import plural
from tito.isolation.untrusted import same_ids, student_id_problem
from tito.notebooks.nbfile import atomic_write

HANDIN_FILES = 1_000          # files in one student's hand-in, every archive of it together
BULK_FILES = 200_000          # entries of an LMS's bulk download
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
MODEL_SUFFIXES = (".pt", ".pth", ".ts", ".onnx")
FOLDER = "handins"            # OUTPUT/handins/<student>/
INDEX = "handins.json"        # OUTPUT/handins.json: student -> where their files came from
_MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?P<plugin>file|onlinetext)_(?P<file>.*)$", re.S)
_CANVAS = re.compile(r"^(?P<name>[^_]+)_(?:late_|LATE_)?(?P<id>\d+)_(?P<attachment>\d+)_(?P<file>.+)$", re.S)
_TITO = re.compile(r"^(?P<module>\d+_[A-Za-z0-9]+)-(?P<id>[^/]+?)\.zip$", re.S)
_RESUBMITTED = re.compile(r"^(?P<stem>.+)-\d+(?P<suffix>\.[A-Za-z0-9]+)$")  # Canvas's `name-1.ipynb` on a resubmission


class Refused(Exception):
    """A hand-in (or one archive of it) tito will not open, with the reason."""


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


def identify(name: str, is_dir: bool) -> tuple[str, str, str] | None:
    """(layout, student id, the file's own name) for a top-level entry of SUBMISSIONS, or None when its name says
    nothing (a plain student folder, a stray file). The id is the LMS's where there is one (Canvas's user id,
    Moodle's participant id: what their grade imports key on), never a name a student typed.

    >>> identify("leeann_late_4242_99_19_benchmarking-ann.zip", False)
    ('canvas', '4242', '19_benchmarking-ann.zip')
    >>> identify("Ann Lee_77_assignsubmission_file_", True)
    ('moodle', '77', '')
    >>> identify("19_benchmarking-ann.zip", False), identify("ann.tar.gz", False), identify("notes.txt", False)
    (('archive', 'ann', '19_benchmarking-ann.zip'), ('archive', 'ann', 'ann.tar.gz'), None)
    """
    m = _MOODLE.match(name)
    if m:
        return "moodle", m["id"], m["file"]
    m = _CANVAS.match(name)
    if m and not is_dir:
        return "canvas", m["id"], m["file"]
    if is_dir:
        return None
    m = _TITO.match(name)
    if m:
        return "archive", m["id"], name
    low = name.lower()
    suffix = next((s for s in ARCHIVE_SUFFIXES if low.endswith(s)), None)
    if suffix and len(name) > len(suffix):
        return "archive", name[:-len(suffix)], name
    return None


# ---- opening archives ------------------------------------------------------------------------

@dataclass
class Budget:
    """What one hand-in may still extract: files and bytes."""
    files: int
    bytes: int

    def take(self, files: int, nbytes: int, what: str) -> None:
        self.files -= files
        self.bytes -= nbytes
        if self.files < 0:
            raise Refused(f"{what}: more than {HANDIN_FILES} files in the hand-in")
        if self.bytes < 0:
            raise Refused(f"{what}: more than the hand-in's limit of bytes once unpacked")


def is_archive(path: Path) -> str | None:
    """"zip" or "tar" when `path` (a regular file) starts like one (gzip, bzip2 and xz are read as tar), else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")) or head[257:262] == b"ustar":
        return "tar"
    return None


def _parts(name: str) -> list[str]:
    """The path parts of an archive member's name; Refused for a name that is absolute, has a drive, `..`, or a
    NUL. A backslash counts as a separator (zips made on Windows)."""
    if "\0" in name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise Refused(f"a member named {untrusted.shown(name)!s} is absolute: only relative names are extracted")
    parts = [p for p in re.split(r"[\\/]+", name) if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"a member named {untrusted.shown(name)} leaves the folder (`..`)")
    return parts


def _junk(parts: list[str]) -> bool:
    "macOS's resource forks in a zip (`__MACOSX/`, `._name`): not the student's files, skipped."
    return bool(parts) and (parts[0] == "__MACOSX" or parts[-1].startswith("._"))


def _zip_entries(path: Path) -> int:
    """The member count a zip's end record states, read before zipfile parses the whole directory (a directory of
    millions of entries would take gigabytes); Refused when there is no end record."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - 65_557))
        tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        raise Refused("not a readable zip (no end of central directory)")
    (entries,) = struct.unpack("<H", tail[at + 10:at + 12])
    return entries


def _write(src, dest: Path, limit: int) -> None:
    """Copy the stream `src` to `dest`, at most `limit` bytes (the declared size: a header that lies is caught)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(dest, "xb") as out:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                return
            written += len(chunk)
            if written > limit:
                raise Refused(f"{dest.name}: the member holds more bytes than its header declares")
            out.write(chunk)


def extract(archive: Path, dest: Path, budget: Budget) -> list[str]:
    """Extract `archive` into the empty folder `dest` as the module doc says; the relative paths of the files
    written. Refused (and `dest` emptied) for anything else; `budget` is what the hand-in may still take."""
    what = untrusted.shown(archive.name)
    kind = is_archive(archive)
    if kind is None:
        raise Refused(f"{what} is not a zip or tar archive")
    written: list[str] = []
    try:
        if kind == "zip":
            if _zip_entries(archive) > min(budget.files, HANDIN_FILES) or _zip_entries(archive) == 0xFFFF:
                raise Refused(f"{what}: more than {HANDIN_FILES} files in the hand-in")
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                plan = []
                for info in infos:
                    parts = _parts(info.filename)
                    mode = info.external_attr >> 16
                    if stat.S_ISLNK(mode):
                        raise Refused(f"{what}: {untrusted.shown(info.filename)} is a symbolic link: an archive "
                                      "with links is not opened")
                    if mode and stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                        raise Refused(f"{what}: {untrusted.shown(info.filename)} is {untrusted.what_it_is(mode)}")
                    if info.flag_bits & 0x1:
                        raise Refused(f"{what}: {untrusted.shown(info.filename)} is encrypted")
                    if info.is_dir() or not parts or _junk(parts):
                        continue
                    plan.append((info, parts))
                budget.take(len(plan), sum(i.file_size for i, _ in plan), what)
                for info, parts in plan:
                    with zf.open(info) as src:
                        _write(src, dest.joinpath(*parts), info.file_size)
                    written.append("/".join(parts))
        else:
            with tarfile.open(archive, mode="r:*") as tf:
                count = 0
                for m in tf:
                    count += 1
                    if count > HANDIN_FILES:
                        raise Refused(f"{what}: more than {HANDIN_FILES} files in the hand-in")
                    parts = _parts(m.name)
                    if m.isdir() or not parts:
                        continue
                    if not m.isreg() or m.issparse():
                        kind_of = ("a link" if m.issym() or m.islnk() else "a device" if m.ischr() or m.isblk()
                                   else "a named pipe" if m.isfifo() else "not a regular file")
                        raise Refused(f"{what}: {untrusted.shown(m.name)} is {kind_of}: an archive with "
                                      f"{'links' if 'link' in kind_of else 'such members'} is not opened")
                    if _junk(parts):
                        continue
                    budget.take(1, m.size, what)
                    src = tf.extractfile(m)
                    _write(src, dest.joinpath(*parts), m.size)
                    written.append("/".join(parts))
    except Refused as e:
        shutil.rmtree(dest, ignore_errors=True)
        msg = str(e)
        raise Refused(msg if msg.startswith(what) else f"{what}: {msg}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError) as e:  # a damaged or unsupported archive: that student's
        shutil.rmtree(dest, ignore_errors=True)
        raise Refused(f"{what} cannot be unpacked ({type(e).__name__}: {str(e)[:120]})") from None
    return written


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
        if identify(p.name, p.is_dir()) is not None:  # an archive, a Canvas file, a Moodle folder
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
            if _zip_entries(archive) > BULK_FILES or _zip_entries(archive) == 0xFFFF:
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
        parts = _parts(name)
        if not parts or _junk(parts):
            return
        if bad:
            raise Refused(f"{untrusted.shown(name)} is a link, encrypted or not a regular file")
        if size > cap:
            raise Refused(f"{untrusted.shown(name)}: {size / untrusted.MB:.0f} MB, above the limit of "
                          f"{cap / untrusted.MB:.0f} MB")
        with opener() as src:
            _write(src, dest.joinpath(*parts), size)
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
        layouts: set[str] = set()
        for p in sorted(source.iterdir()):
            if p.name.startswith("."):
                continue
            shown = untrusted.shown(p.name)
            if p.is_symlink():
                problems.append(f"{shown}: a symbolic link, not a hand-in; not graded")
                continue
            found = identify(p.name, p.is_dir())
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
        result = HandIns(out_dir / FOLDER, "+".join(sorted(layouts)) or "empty")
        ids = sorted(groups)
        clash = same_ids(ids)
        for sid in sorted(clash):
            problems.append(f"{sid}: another hand-in's id differs only in case or Unicode form "
                            f"({', '.join(clash[sid])}); neither is graded: rename one")
        staged = work / FOLDER
        staged.mkdir()
        for sid in ids:
            if sid in clash:
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
