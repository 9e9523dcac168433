"""One student's archive opened as hostile: the body of `handin.extract`, run in a child process with its own limits
(tito.grading.handin.extract starts it). Standard library only, so the child starts in a few tens of milliseconds:
a class of 30 archives starts 30 children.

    python -I -S -c "<handin._CHILD>" ROOT ARCHIVE DEST FILES BYTES STREAM

prints one JSON line: {"written": [relative paths], "bytes": n} or {"refused": reason} or {"memory": true}.

What is checked here (handin's module doc says it for the instructor): member names and kinds, the file and byte
budget from declared sizes and again while writing, a zip's end record and central directory size before zipfile
parses it, and for tars every decompressed byte read (headers, skipped `__MACOSX` members and padding included)
against the hand-in's byte cap plus STREAM_SLACK_MB, and no single read above TAR_HEADER_BYTES: a 1 GB GNU long-name
or PAX header, or a skipped member declaring 2 GB, is refused when it is reached, before it is decompressed.
"""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import shutil
import stat
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

HANDIN_FILES = 1_000          # files in one student's hand-in, every archive of it together
STREAM_SLACK_MB = 64          # a tar's headers, padding and skipped members, beyond its members' bytes
TAR_HEADER_BYTES = 1 << 20    # one read of a tar's stream: a GNU long name or PAX header (members are read by MiB)
ZIP_RECORD_BYTES = 4_096      # a zip's central directory: at most this per allowed member (46 + name + extra)


def shown(name: str) -> str:
    "tito.isolation.untrusted.shown, copied: importing that module (the notebook tools) costs each child 0.2 s."
    return name if name.isprintable() else ascii(name)


class Refused(Exception):
    """A hand-in (or one archive of it) tito will not open, with the reason."""


class Budget:
    """What one hand-in may still extract: files and bytes (a plain class: dataclasses costs each child 13 ms).

    >>> b = Budget(2, 10); b.take(1, 4, "x.zip"); (b.files, b.bytes)
    (1, 6)
    """

    def __init__(self, files: int, bytes: int):  # noqa: A002 (the field's name, as before)
        self.files, self.bytes = files, bytes

    def __repr__(self) -> str:
        return f"Budget(files={self.files}, bytes={self.bytes})"

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


def member_parts(name: str) -> list[str]:
    """The path parts of an archive member's name; Refused for a name that is absolute, has a drive, `..`, or a
    NUL. A backslash counts as a separator (zips made on Windows)."""
    if "\0" in name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise Refused(f"a member named {shown(name)!s} is absolute: only relative names are extracted")
    parts = [p for p in re.split(r"[\\/]+", name) if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"a member named {shown(name)} leaves the folder (`..`)")
    return parts


def is_junk(parts: list[str]) -> bool:
    "macOS's resource forks in a zip (`__MACOSX/`, `._name`): not the student's files, skipped."
    return bool(parts) and (parts[0] == "__MACOSX" or parts[-1].startswith("._"))


def _zip_directory(path: Path) -> tuple[int, int]:
    """(member count, central directory bytes) as a zip's end record states them, read before zipfile parses the
    directory (whose size, not the count, is what zipfile reads: 8 M records behind a count of 1 would take
    gigabytes); Refused when there is no end record."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - 65_557))
        tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        raise Refused("not a readable zip (no end of central directory)")
    entries, cd_size = struct.unpack("<HI", tail[at + 10:at + 16])
    return entries, cd_size


def zip_entries(path: Path) -> int:
    "The member count a zip's end record states (`_zip_directory`)."
    return _zip_directory(path)[0]


def write_member(src, dest: Path, limit: int) -> None:
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


class _Counted:
    """A tar's decompressed stream that refuses to decompress more than `limit` bytes in all (reads, forward seeks,
    and a backward seek, which decompresses again from the start), checked before each read or seek: a header or
    a skipped member declaring gigabytes is refused before it is decompressed."""

    def __init__(self, f, limit: int):
        self.f, self.limit, self.pos, self.work = f, limit, 0, 0

    def _spend(self, n: int) -> None:
        self.work += n
        if self.work > self.limit:
            raise Refused(f"more than {self.limit >> 20} MiB once decompressed, headers and skipped members counted "
                          "(the hand-in's limit of bytes)")

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.limit - self.work + 1
        if n > TAR_HEADER_BYTES:  # tarfile reads a long-name or PAX header whole, in one read
            raise Refused(f"a tar header of {n >> 20} MiB (at most {TAR_HEADER_BYTES >> 20} MiB)")
        self._spend(n)
        data = self.f.read(n)
        self.pos += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self.pos + offset if whence == 1 else None
        if target is None or target < 0:
            raise OSError("a tar is read from its start")
        self._spend(target - self.pos if target >= self.pos else target)
        self.pos = self.f.seek(target)
        return self.pos

    def tell(self) -> int:
        return self.pos


def _tar_stream(archive: Path):
    "The archive's decompressed bytes (gzip, bzip2, xz, or none), as a file object."
    with open(archive, "rb") as f:
        head = f.read(6)
    for magic, opener in ((b"\x1f\x8b", gzip.open), (b"BZh", bz2.open), (b"\xfd7zXZ\x00", lzma.open)):
        if head.startswith(magic):
            return opener(archive, "rb")
    return open(archive, "rb")


def extract_here(archive: Path, dest: Path, budget: Budget, what: str | None = None) -> list[str]:
    """Extract `archive` into the empty folder `dest` in this process (handin.extract runs it in a child); the
    relative paths of the files written. Refused (and `dest` emptied) for anything else."""
    what = what or shown(archive.name)
    kind = is_archive(archive)
    if kind is None:
        raise Refused(f"{what} is not a zip or tar archive")
    written: list[str] = []
    try:
        if kind == "zip":
            entries, cd_size = _zip_directory(archive)
            if entries > min(budget.files, HANDIN_FILES) or entries == 0xFFFF:
                raise Refused(f"{what}: more than {HANDIN_FILES} files in the hand-in")
            if cd_size > HANDIN_FILES * ZIP_RECORD_BYTES:
                raise Refused(f"{what}: a central directory of {cd_size / (1 << 20):.1f} MiB, more than "
                              f"{HANDIN_FILES} files could need ({HANDIN_FILES * ZIP_RECORD_BYTES / (1 << 20):.1f} MiB)")
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                if len(infos) > min(budget.files, HANDIN_FILES):
                    raise Refused(f"{what}: more than {HANDIN_FILES} files in the hand-in")
                plan = []
                for info in infos:
                    parts = member_parts(info.filename)
                    mode = info.external_attr >> 16
                    if stat.S_ISLNK(mode):
                        raise Refused(f"{what}: {shown(info.filename)} is a symbolic link: an archive "
                                      "with links is not opened")
                    if mode and stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                        kind_of = ("a named pipe" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode)
                                   or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                                   else "not a regular file")
                        raise Refused(f"{what}: {shown(info.filename)} is {kind_of}")
                    if info.flag_bits & 0x1:
                        raise Refused(f"{what}: {shown(info.filename)} is encrypted")
                    if info.is_dir() or not parts or is_junk(parts):
                        continue
                    plan.append((info, parts))
                budget.take(len(plan), sum(i.file_size for i, _ in plan), what)
                for info, parts in plan:
                    with zf.open(info) as src:
                        write_member(src, dest.joinpath(*parts), info.file_size)
                    written.append("/".join(parts))
        else:
            with _tar_stream(archive) as raw, \
                    tarfile.open(fileobj=_Counted(raw, budget.bytes + (STREAM_SLACK_MB << 20)), mode="r:") as tf:
                count = 0
                for m in tf:
                    count += 1
                    if count > HANDIN_FILES:
                        raise Refused(f"{what}: more than {HANDIN_FILES} files in the hand-in")
                    parts = member_parts(m.name)
                    if m.isdir() or not parts:
                        continue
                    if not m.isreg() or m.issparse():
                        kind_of = ("a link" if m.issym() or m.islnk() else "a device" if m.ischr() or m.isblk()
                                   else "a named pipe" if m.isfifo() else "not a regular file")
                        raise Refused(f"{what}: {shown(m.name)} is {kind_of}: an archive with "
                                      f"{'links' if 'link' in kind_of else 'such members'} is not opened")
                    if is_junk(parts):
                        continue
                    budget.take(1, m.size, what)
                    src = tf.extractfile(m)
                    write_member(src, dest.joinpath(*parts), m.size)
                    written.append("/".join(parts))
    except Refused as e:
        shutil.rmtree(dest, ignore_errors=True)
        msg = str(e)
        raise Refused(msg if msg.startswith(what) else f"{what}: {msg}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError, lzma.LZMAError) as e:  # a damaged or unsupported archive: that student's
        shutil.rmtree(dest, ignore_errors=True)
        raise Refused(f"{what} cannot be unpacked ({type(e).__name__}: {str(e)[:120]})") from None
    return written


def main(argv: list[str]) -> int:
    """The child's side: ARCHIVE DEST FILES BYTES WHAT; one JSON line on stdout (module doc)."""
    archive, dest, files, nbytes, what = Path(argv[0]), Path(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    budget = Budget(files, nbytes)
    try:
        written = extract_here(archive, dest, budget, what)
        out = {"written": written, "bytes": nbytes - budget.bytes}
    except Refused as e:
        out = {"refused": str(e)}
    except MemoryError:
        shutil.rmtree(dest, ignore_errors=True)
        out = {"memory": True}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0
