"""Reading a student's submission folder, which is as untrusted as their code.

A folder can hold anything a file system can: a named pipe (reading it blocks for ever), a link to
/dev/zero (reading it never ends), a device, a socket, a notebook of 400 MB, JSON nested 200,000
levels deep (Python's parser raises RecursionError). So, for every file tito reads or copies:

- only regular files are opened, without following links (`O_NOFOLLOW | O_NONBLOCK`: a link or a pipe
  cannot make the open itself wait), and the opened file is checked again (`fstat`) before any read;
- sizes are checked with `stat` before reading (`notebook_mb` per notebook, `folder_mb` for the whole
  folder, MAX_ENTRIES files and folders, MAX_FOLDER_DEPTH levels of folders), and a read never takes more than the cap (a file that grows
  while it is read is refused too);
- a notebook is parsed with a nesting limit (MAX_DEPTH), so no later step recurses without bound, and only
  after its JSON values are counted (MAX_VALUES, on the raw bytes) and before its cells are (MAX_CELLS): 16 MB of
  `{}` would be four million dicts;
- of a parsed notebook tito keeps only what grading reads (`essentials`): each cell's type, text, a cell id and
  an nbgrader grade_id as lookup keys, and its grade/solution flags; no output and no other metadata of the
  submission reaches a later step.

Each problem is a reason (`Refused`) that costs that file only.

    >>> parse_notebook(b'{"cells": [], "metadata": {}}')["cells"]
    []
    >>> parse_notebook(b"[" * 100 + b"]" * 100)   # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    tito.grading.submission.Refused: nested deeper than 64 levels
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tito.notebooks.cells import cell_source, nbgrader_meta

MAX_DEPTH = 64          # JSON nesting of a notebook (a real one: under 10)
MAX_VALUES = 500_000    # JSON objects, arrays and list items of one notebook (Module 19's largest, run: ~10,000)
MAX_CELLS = 2_000       # cells of one notebook (Module 19's largest: under 200)
MAX_ENTRIES = 10_000    # files and folders in one student's folder
MAX_FOLDER_DEPTH = 16   # folders within folders in it
MB = 1 << 20
DEFAULT_NOTEBOOK_MB = 20
DEFAULT_FOLDER_MB = 200
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


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


def parse_notebook(data: bytes) -> dict:
    """A notebook's JSON (a dict with a list of cells, nested at most MAX_DEPTH levels, at most MAX_VALUES
    values and MAX_CELLS cells); raises Refused. Counted before anything is built from it."""
    values = json_values(data)
    if values > MAX_VALUES:
        raise Refused(f"unreadable notebook: about {values:,} JSON values, above the limit of {MAX_VALUES:,}")
    try:
        nb = json.loads(data.decode("utf-8"))
    except RecursionError:  # the C parser stops at the interpreter's recursion limit, safely
        raise Refused(f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused(f"unreadable notebook: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    if json_depth(nb) > MAX_DEPTH:
        raise Refused(f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise Refused("unreadable notebook: ValueError: no cells")
    if not isinstance(nb.get("metadata", {}), dict):
        raise Refused("unreadable notebook: its metadata is not an object")
    if len(nb["cells"]) > MAX_CELLS:
        raise Refused(f"unreadable notebook: {len(nb['cells']):,} cells, above the limit of {MAX_CELLS:,}")
    for i, cell in enumerate(nb["cells"]):
        why = cell_problem(cell)
        if why:
            raise Refused(f"unreadable notebook: cell {i + 1} {why}")
    return nb


_NBGRADER_TYPES = {"grade_id": str, "grade": bool, "solution": bool, "locked": bool, "task": bool,
                   "points": (int, float), "schema_version": int}


def cell_problem(cell) -> str:
    """Why `cell` is not a notebook cell every later step can read (nbformat 4's shapes for the keys
    tito reads; "" when it is one).

    >>> cell_problem({"cell_type": "code", "source": ["x = 1"], "metadata": {"nbgrader": {"grade_id": [1]}}})
    'has an nbgrader grade_id that is not a str'
    """
    if not isinstance(cell, dict):
        return "is not an object"
    src = cell.get("source", "")
    if not isinstance(cell.get("cell_type", ""), str):
        return "has a cell_type that is not a string"
    if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(x, str) for x in src))):
        return "has a source that is neither a string nor a list of strings"
    meta = cell.get("metadata", {})
    if not isinstance(meta, dict) or not isinstance(meta.get("nbgrader", {}) or {}, dict):
        return "has metadata that is not an object"
    for key, kind in _NBGRADER_TYPES.items():
        value = (meta.get("nbgrader") or {}).get(key)
        if value is not None and (not isinstance(value, kind) or (kind != bool and isinstance(value, bool))):
            return f"has an nbgrader {key} that is not a {getattr(kind, '__name__', 'number')}"
    for key in ("id", "execution_count"):
        if key in cell and not isinstance(cell[key], (str, int, type(None))):
            return f"has an {key} of the wrong type"
    return ""


def read_notebook(path: Path, notebook_mb: int = DEFAULT_NOTEBOOK_MB) -> dict:
    """The notebook at `path`, read and parsed as the module doc says, as its `essentials`; raises Refused."""
    return essentials(parse_notebook(read_regular(path, notebook_mb * MB)))


_CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat 4.5's cell id pattern, at most 64 characters
_GRADE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def essentials(nb: dict) -> dict:
    """What grading reads of a parsed submission (`parse_notebook`'s), and nothing else: per cell its type
    (code, markdown or raw), text, `id` (a lookup key, when it is one nbformat allows) and nbgrader `grade_id`
    (a lookup key, when it could name a cell of the course), `grade` and `solution`. No outputs, no notebook or
    cell metadata of the submission: everything the instructor's tools show of a cell, its identity included,
    comes from the course's own notebooks (tito.grading.feedback.autograded_notebook).

    >>> essentials({"metadata": {"widgets": {}}, "cells": [{"cell_type": "code", "id": "x'><b>", "source": ["a"],
    ...     "outputs": [{}], "metadata": {"tito": {"answer_key": "fake"}, "nbgrader": {"grade_id": "t-1"}}}]})
    {'nbformat': 4, 'nbformat_minor': 5, 'metadata': {}, 'cells': [{'cell_type': 'code', 'source': 'a', 'metadata': {'nbgrader': {'grade_id': 't-1'}}}]}
    """
    cells = []
    for cell in nb.get("cells", []):
        kind = cell.get("cell_type")
        out = {"cell_type": kind if kind in ("code", "markdown", "raw") else "raw", "source": cell_source(cell)}
        if isinstance(cell.get("id"), str) and _CELL_ID.fullmatch(cell["id"]):
            out["id"] = cell["id"]
        meta = nbgrader_meta(cell)
        keep = {k: meta[k] for k in ("grade", "solution") if isinstance(meta.get(k), bool)}
        if isinstance(meta.get("grade_id"), str) and _GRADE_ID.fullmatch(meta["grade_id"]):
            keep["grade_id"] = meta["grade_id"]
        out["metadata"] = {"nbgrader": keep} if keep else {}
        cells.append(out)
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


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
