"""Files a student handed in, read as the untrusted input they are, and the one rule for a student id.

A folder can hold anything a file system can: a named pipe (reading it blocks for ever), a link to
/dev/zero (reading it never ends), a device, a socket, a file of 400 MB, JSON nested 200,000 levels deep
(Python's parser raises RecursionError). So, for every file grading or the Olympics judge reads or copies:

- only regular files are opened, without following links (`O_NOFOLLOW | O_NONBLOCK`: a link or a pipe
  cannot make the open itself wait), and the opened file is checked again (`fstat`) before any read;
- sizes are checked with `stat` before reading (per file, for the whole folder, MAX_ENTRIES files and
  folders, MAX_FOLDER_DEPTH levels of folders), and a read never takes more than the cap (a file that grows
  while it is read is refused too);
- JSON is parsed only after its values are counted on the raw bytes (`parse_json`: at most `max_values`), with
  a nesting limit (MAX_DEPTH), so no later step recurses without bound.

Each problem is a reason (`Refused`) that costs that file only. A student id (a folder's name, an archive's) is
usable when `student_id_problem` says so, and two ids equal but for case or Unicode form are refused (`same_ids`):
grading and the Olympics judge keep the same rule.

    >>> parse_json(b"[" * 100 + b"]" * 100)   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    tito.isolation.untrusted.Refused: nested deeper than 64 levels
"""
from __future__ import annotations

import json
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import Course

MAX_DEPTH = 64          # JSON nesting (a real notebook: under 10)
MAX_VALUES = 500_000    # JSON objects, arrays and list items of one file (Module 19's largest notebook, run: ~10,000)
MAX_ENTRIES = 10_000    # files and folders in one student's folder
MAX_FOLDER_DEPTH = 16   # folders within folders in it
MB = 1 << 20
DEFAULT_NOTEBOOK_MB, DEFAULT_FOLDER_MB = Course.submission_notebook_mb, Course.submission_folder_mb  # settings.ini's
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*")  # matched whole (fullmatch: no newline at its end)
STUDENT_ID_MAX = 64  # characters of a student id: a folder name, with room for tito's own prefixes, well below NAME_MAX


class Refused(Exception):
    """A file tito will not read, with the reason (the message) a student is shown."""


def what_it_is(mode: int) -> str:
    """A file's kind in words, from its `st_mode`.

    >>> what_it_is(stat.S_IFIFO)
    'a named pipe'
    """
    for test, words in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe"),
                        (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return words
    return "not a regular file"


def shown(name: str) -> str:
    r"""A file name as a report line may show it: as it is when printable, else as Python's
    `ascii` writes it (no newline, escape sequence or control character reaches a terminal or a file).

    >>> print(shown("a\nb.ipynb"))
    'a\nb.ipynb'
    """
    return name if name.isprintable() else ascii(name)


def reason(name: str, why: str | Exception) -> str:
    """One line for a report: `name` (`shown`) and why it was refused.

    >>> reason("a.ipynb", Refused("a named pipe, not a regular file: not opened"))
    'a.ipynb is a named pipe, not a regular file: not opened'
    """
    why, name = str(why), shown(name)
    return f"{name} is {why}" if why.startswith("a ") else f"{name}: {why}"


def check_file(path: Path, max_bytes: int) -> int:
    """The size of `path` when it is a regular file (not followed if a link) of at most `max_bytes`;
    raises Refused with the reason otherwise. Reads nothing."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise Refused(f"cannot be read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{what_it_is(st.st_mode)}, not a regular file: not opened")
    if st.st_size > max_bytes:
        raise Refused(f"{st.st_size / MB:.1f} MB, above the limit of {max_bytes / MB:.0f} MB: not read")
    return st.st_size


def _open_checked(path: Path, max_bytes: int) -> int:
    """An fd of `path` opened as the module doc says (the caller closes it); raises Refused."""
    check_file(path, max_bytes)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:  # ELOOP: it became a link since the check
        raise Refused(f"cannot be opened: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
        os.close(fd)
        raise Refused(f"{what_it_is(st.st_mode)} of {st.st_size / MB:.1f} MB once opened: not read")
    return fd


def _chunks(fd: int, max_bytes: int):
    """The bytes of `fd` in chunks, refusing more than `max_bytes` (a file that grows while read)."""
    total = 0
    try:
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                return
            total += len(chunk)
            if total > max_bytes:
                raise Refused(f"grew above the limit of {max_bytes / MB:.0f} MB while read: not read")
            yield chunk
    except OSError as e:
        raise Refused(f"cannot be read: {e.strerror}") from None


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes` (module doc); raises Refused."""
    fd = _open_checked(path, max_bytes)
    try:
        return b"".join(_chunks(fd, max_bytes))
    finally:
        os.close(fd)


def json_depth(value) -> int:
    """How deeply `value` (parsed JSON) nests lists and dicts, counted without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


_JSON_STRING = re.compile(rb'"[^"]*"')


def json_values(data: bytes) -> int:
    """About how many values parsing `data` (JSON) would build: its objects, arrays and separators outside
    strings, counted on the bytes in linear time (escaped quotes and backslashes dropped first, so a string
    is one `"[^"]*"` match).

    >>> json_values(b'{"cells": [{}, {}, {"a,{[": 1}]}')   # 4 objects, 1 array, 2 commas
    7
    """
    bare = _JSON_STRING.sub(b"", data.replace(b"\\\\", b"").replace(b'\\"', b""))
    return bare.count(b",") + bare.count(b"{") + bare.count(b"[")


def parse_json(data: bytes, max_values: int = MAX_VALUES, what: str = "JSON") -> object:
    """`data` parsed as JSON once its values are counted (at most `max_values`) and its nesting checked (at most
    MAX_DEPTH); raises Refused naming `what` (e.g. "unreadable notebook")."""
    values = json_values(data)
    if values > max_values:
        raise Refused(f"{what}: about {values:,} JSON values, above the limit of {max_values:,}")
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:  # the C parser stops at the interpreter's recursion limit, safely
        raise Refused(f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused(f"{what}: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    if json_depth(value) > MAX_DEPTH:
        raise Refused(f"nested deeper than {MAX_DEPTH} levels")
    return value


@dataclass
class Survey:
    """What a student's folder holds, walked without following links or reading a byte: `files`
    (regular files, relative paths), `refused` (relative path -> reason: every other entry, and
    notebooks above the notebook cap), `total` bytes of the regular files, and `over` (why the
    folder as a whole is above its caps; "" when it is not)."""
    files: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    total: int = 0
    over: str = ""


def survey(folder: Path, notebook_mb: int = DEFAULT_NOTEBOOK_MB, folder_mb: int = DEFAULT_FOLDER_MB) -> Survey:
    """Walk `folder` (module doc; hidden names are skipped) with `lstat` only."""
    out, todo, entries = Survey(), [Path(folder)], 0
    while todo:
        d = todo.pop()
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            out.refused[d.relative_to(folder).as_posix()] = f"cannot be listed: {e.strerror}"
            continue
        for name in names:
            if name.startswith("."):
                continue
            entries += 1
            if entries > MAX_ENTRIES:
                out.over = f"more than {MAX_ENTRIES} files and folders"
                return out
            p = d / name
            rel = p.relative_to(folder).as_posix()
            try:
                st = os.lstat(p)
            except OSError as e:
                out.refused[rel] = f"cannot be read: {e.strerror}"
                continue
            if stat.S_ISDIR(st.st_mode) and rel.count("/") >= MAX_FOLDER_DEPTH:
                out.refused[rel] = f"a folder nested more than {MAX_FOLDER_DEPTH} deep: not copied"
            elif stat.S_ISDIR(st.st_mode):
                todo.append(p)
            elif not stat.S_ISREG(st.st_mode):
                out.refused[rel] = f"{what_it_is(st.st_mode)}, not a regular file: not opened"
            elif name.endswith(".ipynb") and d == Path(folder) and st.st_size > notebook_mb * MB:
                out.refused[rel] = f"{st.st_size / MB:.1f} MB, above the limit of {notebook_mb} MB for a notebook: not read"
            else:
                out.files.append(rel)
                out.total += st.st_size
    if out.total > folder_mb * MB:
        out.over = f"{out.total / MB:.0f} MB of files, above the folder limit of {folder_mb} MB"
    return out


def copy_regular(src: Path, dest: Path, max_bytes: int) -> None:
    """Copy regular file `src` to `dest` (module doc: not followed, checked, at most `max_bytes`)."""
    fd = _open_checked(src, max_bytes)
    try:
        with open(dest, "wb") as out:
            for chunk in _chunks(fd, max_bytes):
                out.write(chunk)
    finally:
        os.close(fd)


def student_id_problem(name: str) -> str | None:
    r"""Why `name` cannot be a student id, or None: letters, digits, _ . @ + -, starting with a letter or digit, at
    most STUDENT_ID_MAX characters, the whole name (grading's rule, and the Olympics judge's).

    >>> student_id_problem("ann.lee@uni"), student_id_problem("ann\n") is not None, student_id_problem("../x") is not None
    (None, True, True)
    """
    if len(name) > STUDENT_ID_MAX:
        return f"{len(name)} characters long, above the limit of {STUDENT_ID_MAX}"
    if not _STUDENT_ID.fullmatch(name):
        return "not usable (letters, digits, _ . @ + - only, starting with a letter or digit)"
    return None


def same_ids(names) -> dict[str, list[str]]:
    """name -> the other names of `names` equal to it once Unicode-normalized (NFKC) and case-folded.

    >>> same_ids(["ann", "Ann", "bob"])
    {'Ann': ['ann'], 'ann': ['Ann']}
    """
    groups: dict[str, list[str]] = {}
    for n in sorted(names):
        groups.setdefault(unicodedata.normalize("NFKC", n).casefold(), []).append(n)
    return {n: [o for o in g if o != n] for g in groups.values() if len(g) > 1 for n in g}
