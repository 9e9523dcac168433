"""Hand-ins (tito.grading.handin, issue 44): the layouts `tito grade` and `olympics judge` read (tito's archives, Canvas's
and Moodle's bulk downloads, as folders or as the zip itself), the student id each gets, and every hostile archive
refused for its student only. Nothing here grades: the scripted walk from the kit (tests/test_student_kit.py) grades
hand-ins end to end once."""
from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from tito.isolation import untrusted
from tito.config import TitoError
from tito.grading import classrun, handin

NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
WANTED = {"a_dev.ipynb", "b_dev.ipynb"}


def make_zip(path: Path, files: dict[str, str | bytes], links: tuple = (), encrypted: tuple = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in {**files, **{n: b"x" for n in encrypted}}.items():
            z.writestr(name, data)
        for name, target in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, target)
    data = bytearray(path.read_bytes())
    for name in encrypted:  # zipfile writes no encryption: set the flag in the member's central directory record
        at = data.find(b"PK\x01\x02")
        while at >= 0:
            size = int.from_bytes(data[at + 28:at + 30], "little")
            if data[at + 46:at + 46 + size] == name.encode():
                data[at + 8] |= 0x1
            at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))
    return path


def bomb_zip(path: Path, name: str, size: int = 1 << 30) -> Path:
    """A real zip of one member of `size` zero bytes (1 GiB: about 1 MB on disk), written without compressing a GiB:
    one MiB of zeros deflated once, after a full flush (so each copy stands alone), repeated."""
    block = bytes(1 << 20)
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    data = piece * (size >> 20) + co.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(size >> 20):
        crc = zlib.crc32(block, crc)
    raw = name.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size, len(raw), 0) + raw
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(data), size, len(raw),
                          0, 0, 0, 0, 0, 0) + raw
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(data), 0)
    path.write_bytes(local + data + central + end)
    with zipfile.ZipFile(path) as z:  # what zipfile reads of it: one member of 1 GiB
        assert z.infolist()[0].file_size == size
    return path


def make_tar(path: Path, files: dict[str, bytes], link: tuple[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.SYMTYPE, link[1]
            t.addfile(info)
    return path


def work(m: str = "19_benchmarking") -> dict[str, str]:
    "A student's kit zipped whole: their notebooks, the release's blank copies deeper down, and other files."
    return {f"{m}/a_dev.ipynb": NB, f"{m}/b_dev.ipynb": NB, f"{m}/progress.json": "{}", f"{m}/README.md": "# x",
            f"release/{m}/a_dev.ipynb": "blank", f"{m}/.ipynb_checkpoints/a_dev-checkpoint.ipynb": "old",
            "__MACOSX/._a_dev.ipynb": "fork"}


def files_of(folder: Path) -> dict[str, list[str]]:
    return {d.name: sorted(p.name for p in d.iterdir()) for d in sorted(folder.iterdir())}


def test_every_layout_gets_the_right_student_ids_and_only_the_notebooks(tmp_path):
    """tito's archives (zip, tar.gz, a bare id), a student folder, Canvas's files (an archive, notebooks uploaded one
    by one, late, resubmitted) in one folder, and Moodle's folders and flat files beside a tito archive in another
    (one LMS a folder): each student's id is the archive's or the LMS's, and their folder holds the assignment's notebooks only, from their work folder, not the release's
    copies."""
    subs = tmp_path / "subs"
    make_zip(subs / "19_benchmarking-ann.zip", work())
    make_tar(subs / "bob.tar.gz", {"x/a_dev.ipynb": NB.encode()})
    (subs / "cy").mkdir()
    (subs / "cy" / "a_dev.ipynb").write_text(NB)
    make_zip(subs / "leecarol_1001_555_19_benchmarking-carol.zip", work())
    (subs / "smithdan_late_1002_556_a_dev.ipynb").write_text(NB)
    (subs / "smithdan_late_1002_557_b_dev-1.ipynb").write_text(NB)        # a resubmitted file, Canvas-renamed
    (subs / "notes.txt").write_text("an instructor's note")
    moodle = tmp_path / "moodle"  # one LMS's download per folder (beside tito's archives and student folders)
    make_zip(moodle / "Eve Moe_2001_assignsubmission_file_" / "hand-in.zip", work())
    (moodle / "Fay Roe_2002_assignsubmission_file_b_dev.ipynb").write_text(NB)
    make_zip(moodle / "19_benchmarking-gus.zip", work())
    assert handin.needs_collecting(subs) and handin.needs_collecting(moodle)
    got = handin.collect(subs, tmp_path / "out", WANTED)
    assert got.folder == tmp_path / "out" / "handins" and got.layout == "archive+canvas+folders"
    assert files_of(got.folder) == {
        "1001": ["a_dev.ipynb", "b_dev.ipynb"], "1002": ["a_dev.ipynb", "b_dev.ipynb"],
        "ann": ["a_dev.ipynb", "b_dev.ipynb"], "bob": ["a_dev.ipynb"], "cy": ["a_dev.ipynb"]}
    mgot = handin.collect(moodle, tmp_path / "mout", WANTED)
    assert mgot.layout == "archive+moodle" and mgot.problems == [], mgot.problems
    assert files_of(mgot.folder) == {"2001": ["a_dev.ipynb", "b_dev.ipynb"], "2002": ["b_dev.ipynb"],
                                     "gus": ["a_dev.ipynb", "b_dev.ipynb"]}
    assert (got.folder / "ann" / "a_dev.ipynb").read_text() == NB  # the work, not the release's blank copy
    assert got.problems == ["notes.txt: not a hand-in (expected an archive, a student folder, or an LMS's download); "
                            "ignored"], got.problems
    index = json.loads((tmp_path / "out" / "handins.json").read_text())
    assert index["students"]["1002"] == ["a_dev.ipynb", "b_dev-1.ipynb"]
    # what `tito grade` then reads: every student, no file left over to list as "not graded"
    scan = classrun.scan_submissions(got.folder, "19_benchmarking", WANTED)
    assert sorted(scan.found) == sorted(files_of(got.folder)) and scan.problems == []
    # the judge's view of the same hand-ins: submission.json and the model file it names, nothing else
    make_zip(subs / "19_benchmarking-gil.zip", {"19_benchmarking/submission.json": json.dumps(
        {"models": {"optimized": {"file": "mine.pt"}}}), "19_benchmarking/mine.pt": b"model",
        "19_benchmarking/other.pt": b"not named", **work()})
    cap = handin.collect(subs, tmp_path / "judged", None, capstone=True)
    assert files_of(cap.folder) == {"gil": ["mine.pt", "submission.json"]}
    assert sum("no submission.json" in p for p in cap.problems) == 5, cap.problems


def test_plain_folders_are_read_where_they_are(tmp_path):
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / "a_dev.ipynb").write_text(NB)
    (tmp_path / "subs" / "ann" / "notes.txt").write_text("x")   # classrun reports it, as before
    got = handin.collect(tmp_path / "subs", tmp_path / "out", WANTED)
    assert got.layout == "folders" and got.folder == tmp_path / "subs" and not (tmp_path / "out").exists()
    (tmp_path / "nbg" / "submitted" / "ann" / "m").mkdir(parents=True)
    assert not handin.needs_collecting(tmp_path / "nbg")


@pytest.mark.parametrize("bulk", ["zip", "tar", "zip-in-a-folder"])
def test_a_bulk_download_itself(tmp_path, bulk):
    """The LMS's own zip (Canvas: files at the top; Moodle: one folder per student, all inside one folder) is
    unpacked as the instructor's file, then each student's hand-in as theirs."""
    canvas = {"leecarol_1001_555_19_benchmarking-carol.zip": make_zip(tmp_path / "c.zip", work()).read_bytes(),
              "smithdan_1002_556_a_dev.ipynb": NB.encode()}
    top = "COURSE-Assignment 19-42/" if bulk == "zip-in-a-folder" else ""
    path = tmp_path / f"submissions.{'tar.gz' if bulk == 'tar' else 'zip'}"
    if bulk == "tar":
        make_tar(path, canvas)
    else:
        make_zip(path, {top + k: v for k, v in canvas.items()})
    got = handin.collect(path, tmp_path / "out", WANTED)
    assert files_of(got.folder) == {"1001": ["a_dev.ipynb", "b_dev.ipynb"], "1002": ["a_dev.ipynb"]}, got.problems
    assert got.problems == []


def test_hostile_archives_are_refused_for_their_student_only(tmp_path):
    """`..` names, an absolute name, a link (zip and tar), an encrypted member, 10,000 files, a 1 GB expansion (1 MB
    on disk), bytes that are no archive, a damaged zip, a member whose header understates it: each refused with its
    reason, nothing of it written; the honest student beside them is collected."""
    subs = tmp_path / "subs"
    make_zip(subs / "ok.zip", work())
    make_zip(subs / "dotdot.zip", {"19_benchmarking/../../a_dev.ipynb": NB})
    make_zip(subs / "absolute.zip", {"/etc/a_dev.ipynb": NB})
    make_zip(subs / "windows.zip", {"..\\..\\a_dev.ipynb": NB})
    make_zip(subs / "zlink.zip", {"a_dev.ipynb": NB}, links=[("b_dev.ipynb", "/etc/passwd")])
    make_tar(subs / "tlink.tar.gz", {"a_dev.ipynb": NB.encode()}, link=("b_dev.ipynb", "/etc/passwd"))
    make_tar(subs / "tdotdot.tar.gz", {"../a_dev.ipynb": NB.encode()})
    make_zip(subs / "secret.zip", {"a_dev.ipynb": NB}, encrypted=("b_dev.ipynb",))
    make_zip(subs / "many.zip", {f"f{i}.txt": "" for i in range(10_000)} | {"a_dev.ipynb": NB})
    assert bomb_zip(subs / "bomb.zip", "a_dev.ipynb").stat().st_size < 8 << 20
    (subs / "fake.zip").write_bytes(b"not an archive at all")
    (subs / "cut.zip").write_bytes(make_zip(tmp_path / "x.zip", work()).read_bytes()[:200])
    got = handin.collect(subs, tmp_path / "out", WANTED)
    assert files_of(got.folder) == {"ok": ["a_dev.ipynb", "b_dev.ipynb"]}
    why = {line.split(":", 1)[0]: line for line in got.problems}
    assert sorted(why) == ["absolute", "bomb", "cut", "dotdot", "fake", "many", "secret", "tdotdot", "tlink",
                           "windows", "zlink"], got.problems
    assert all(line.endswith("not graded") for line in got.problems)
    for sid, words in {"dotdot": "leaves the folder", "windows": "leaves the folder", "tdotdot": "leaves the folder",
                       "absolute": "absolute", "zlink": "symbolic link", "tlink": "a link", "secret": "encrypted",
                       "many": "more than 1000 files", "bomb": "limit of bytes", "fake": "not a zip or tar",
                       "cut": "not a readable zip"}.items():
        assert words in why[sid], why[sid]
    # nothing of a refused archive was written anywhere: only the honest student's two notebooks
    assert sorted(p.name for p in (tmp_path / "out").rglob("*.ipynb")) == ["a_dev.ipynb", "b_dev.ipynb"]


def test_a_header_that_understates_its_member_is_caught_while_writing(tmp_path):
    with pytest.raises(handin.Refused, match="more bytes than its header declares"):
        handin.write_member(io.BytesIO(b"x" * 100), tmp_path / "f", 10)


def test_student_ids_follow_grading_and_do_not_collide(tmp_path):
    """An id grading would refuse (a space, too long) and two ids that differ only in case or Unicode form are
    refused, each named; the others are collected."""
    subs = tmp_path / "subs"
    for name in ("Ann.zip", "ann.zip", "ｂｏｂ.zip", "bob.zip", "has space.zip", f"{'x' * 65}.zip", "cy.zip"):
        make_zip(subs / name, {"a_dev.ipynb": NB})
    got = handin.collect(subs, tmp_path / "out", WANTED)
    assert files_of(got.folder) == {"bob": ["a_dev.ipynb"], "cy": ["a_dev.ipynb"]}  # the full-width ｂｏｂ is no id
    text = "\n".join(got.problems)
    assert "Ann: another hand-in's id differs only in case" in text and "ann: another hand-in's id" in text
    assert "ｂｏｂ" in text and "has space" in text and "above the limit of 64" in text, text
    assert set(untrusted.same_ids(["Ann", "ANN", "anne"])) == {"Ann", "ANN"}


def test_a_missing_or_odd_source_is_the_instructors_error(tmp_path):
    with pytest.raises(TitoError, match="does not exist") as e:
        handin.collect(tmp_path / "nope", tmp_path / "out", WANTED)
    assert e.value.code == 2
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(TitoError, match="not a zip or tar archive"):
        handin.collect(tmp_path / "notes.txt", tmp_path / "out", WANTED)


def test_a_link_in_a_student_folder_refuses_that_hand_in(tmp_path):
    subs = tmp_path / "subs"
    make_zip(subs / "ok.zip", {"a_dev.ipynb": NB})
    (subs / "Ann Lee_7_assignsubmission_file_").mkdir()
    (subs / "Ann Lee_7_assignsubmission_file_" / "a_dev.ipynb").symlink_to("/etc/passwd")
    os.mkfifo(subs / "Bo Lee_8_assignsubmission_file_b_dev.ipynb")
    got = handin.collect(subs, tmp_path / "out", WANTED)
    assert files_of(got.folder) == {"ok": ["a_dev.ipynb"]}
    assert [p.split(":", 1)[0] for p in got.problems] == ["7", "8"], got.problems
    assert "symbolic link" in got.problems[0] and "named pipe" in got.problems[1]


# ---- issue 40, round 2: an LMS's names (K) and archive bombs against tito's own process (G, G2, G3, G4) ----------

def test_a_canvas_upload_named_like_moodle_stays_its_uploaders(tmp_path):
    """K: eve (Canvas 5151) uploads blank notebooks named like a Moodle hand-in of bob's id (4242), as a zip and as
    a notebook: the folder is Canvas's (decided from all its names), so they are eve's and bob is graded on his own
    work. In a Moodle download a profile name holding another id (`Eve_4242_assignsubmission_file_`) gives the id
    Moodle wrote last; a flat Moodle file holding two ids is nobody's; both LMSs in one folder, or a name only
    either could have written alone, is the instructor's error; one id under two names is refused, both named."""
    canvas = tmp_path / "canvas"
    make_zip(canvas / "bob_4242_99_19_benchmarking-bob.zip", work())
    make_zip(canvas / "eve_5151_101_x_4242_assignsubmission_file_.zip", {"a_dev.ipynb": "blank", "b_dev.ipynb": "blank"})
    (canvas / "eve_5151_102_a_4242_assignsubmission_onlinetext_.ipynb").write_text("blank")
    got = handin.collect(canvas, tmp_path / "out", WANTED)
    assert got.layout == "canvas" and got.problems == [], got.problems
    assert (got.folder / "4242" / "a_dev.ipynb").read_text() == NB, "bob's own notebook"
    assert got.sources["4242"] == ["19_benchmarking-bob.zip"]
    assert sorted(got.sources["5151"]) == ["a_4242_assignsubmission_onlinetext_.ipynb",
                                           "x_4242_assignsubmission_file_.zip"]
    moodle = tmp_path / "moodle"
    make_zip(moodle / "Bob Lee_4242_assignsubmission_file_" / "hand-in.zip", work())
    make_zip(moodle / "Eve_4242_assignsubmission_file__5151_assignsubmission_file_" / "x.zip", {"a_dev.ipynb": "blank"})
    (moodle / "Eve_5151_assignsubmission_file_b_4242_assignsubmission_file_.ipynb").write_text("blank")
    got = handin.collect(moodle, tmp_path / "mout", WANTED)
    assert got.layout == "moodle" and sorted(got.sources) == ["4242", "5151"]
    assert (got.folder / "4242" / "a_dev.ipynb").read_text() == NB
    assert (got.folder / "5151" / "a_dev.ipynb").read_text() == "blank"
    assert len(got.problems) == 1 and "two participant ids (5151, 4242)" in got.problems[0], got.problems
    # the instructor's errors: two LMSs in one folder; a name either could have written, alone
    (canvas / "Bob Lee_4242_assignsubmission_file_").mkdir()
    with pytest.raises(TitoError, match="both a Canvas download's files .* and a Moodle download's") as e:
        handin.collect(canvas, tmp_path / "out2", WANTED)
    assert e.value.code == 2 and "Bob Lee_4242_assignsubmission_file_" in str(e.value)
    alone = tmp_path / "alone"
    make_zip(alone / "eve_5151_101_x_4242_assignsubmission_file_.zip", {"a_dev.ipynb": "blank"})
    with pytest.raises(TitoError, match="could be a Canvas or a Moodle download's file"):
        handin.collect(alone, tmp_path / "out3", WANTED)
    # one id, two names (two students, or tito's archive beside the LMS's file): nobody's
    two = tmp_path / "two"
    make_zip(two / "bob_4242_99_a.zip", work())
    make_zip(two / "mallory_4242_98_b.zip", {"a_dev.ipynb": "blank"})
    make_zip(two / "cy_4343_97_c.zip", work())
    make_zip(two / "4343.zip", {"a_dev.ipynb": "blank"})
    make_zip(two / "ann.zip", {"a_dev.ipynb": NB})              # one student's two archives: one hand-in
    make_tar(two / "ann.tar.gz", {"b_dev.ipynb": NB.encode()})
    got = handin.collect(two, tmp_path / "out4", WANTED)
    assert files_of(got.folder) == {"ann": ["a_dev.ipynb", "b_dev.ipynb"]}
    why = {line.split(":", 1)[0]: line for line in got.problems}
    assert sorted(why) == ["4242", "4343"] and all("hand-ins under more than one name" in w for w in why.values())
    assert "bob_4242_99_a.zip" in why["4242"] and "mallory_4242_98_b.zip" in why["4242"]
    assert "cy_4343_97_c.zip" in why["4343"] and "4343.zip" in why["4343"]


def tar_header(name: bytes, size: int, typ: bytes) -> bytes:
    "A raw ustar/GNU header (tarfile will not write a 64 MB long name or a member it does not hold)."
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108], h[108:116], h[116:124], h[136:148] = b"0000644\0", b"0000000\0", b"0000000\0", b"00000000000\0"
    h[124:136] = (b"%011o" % size) + b"\0"
    h[156:157] = typ
    h[257:265] = b"ustar  \0"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def pax_record(size: int) -> bytes:
    body = b"comment=" + b"a" * size + b"\n"
    n = len(body) + 8
    while len(str(n)) + 1 + len(body) != n:
        n = len(str(n)) + 1 + len(body)
    return str(n).encode() + b" " + body


def honest_tail() -> bytes:
    "A real member after the attack (what tito would extract next) and the end of the archive."
    return tar_header(b"a_dev.ipynb", len(NB), b"0") + NB.encode().ljust(512, b"\0") + b"\0" * 1024


def zeros_bz2(mib: int) -> bytes:
    "`mib` MiB of zeros as repeated bzip2 streams (one MiB compressed once: a few KB in all)."
    return bz2.compress(bytes(1 << 20), 9) * mib


def test_archive_bombs_cost_only_their_owner(tmp_path):
    """G: a 64 MB GNU long-name header (tarfile reads it whole); G3: a 64 MB PAX comment header; G4: a
    `__MACOSX/._x` member declaring 300 MB, skipped as junk but decompressed to reach the next member (bzip2, as the
    red team sent it); G2: a zip whose end record says 1 entry while its directory holds 100,000. Each is refused
    for its student before tito reads the attack (the header, the skip, the directory), in the child that opens
    it; the honest student beside them is collected."""
    subs = tmp_path / "subs"
    make_zip(subs / "ok.zip", work())
    long_name = 64 << 20
    (subs / "longname.tar.gz").write_bytes(gzip.compress(
        tar_header(b"././@LongLink", long_name, b"L") + b"a" * long_name + honest_tail(), 1))
    rec = pax_record(64 << 20)
    (subs / "pax.tar.gz").write_bytes(gzip.compress(
        tar_header(b"././@PaxHeader", len(rec), b"x") + rec + b"\0" * (-len(rec) % 512) + honest_tail(), 1))
    (subs / "junk.tar.bz2").write_bytes(bz2.compress(tar_header(b"__MACOSX/._x", 300 << 20, b"0")) + zeros_bz2(300)
                                        + bz2.compress(honest_tail()))
    records = b"".join(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0,
                                   0o100644 << 16, 0) + b"%06x" % i for i in range(100_000))
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, 1, 0) + b"a"
    (subs / "cdlie.zip").write_bytes(local + records + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1,
                                                                   len(records), len(local), 0))
    assert max(p.stat().st_size for p in subs.iterdir()) < 8 << 20
    got = handin.collect(subs, tmp_path / "out", WANTED)
    assert files_of(got.folder) == {"ok": ["a_dev.ipynb", "b_dev.ipynb"]}
    why = {line.split(":", 1)[0]: line for line in got.problems}
    assert sorted(why) == ["cdlie", "junk", "longname", "pax"], got.problems
    assert "a tar header of 64 MiB" in why["longname"] and "a tar header of 64 MiB" in why["pax"], got.problems
    assert "MiB once decompressed, headers and skipped members counted" in why["junk"], why["junk"]
    assert "a central directory of 5.0 MiB, more than 1000 files could need" in why["cdlie"], why["cdlie"]


def test_the_child_that_opens_an_archive_has_its_own_memory_and_time(tmp_path, monkeypatch):
    """The child's limits, lowered here: out of memory (a zip directory that fits its byte bound but not 32 MiB),
    or past its wall-clock time (a 200 MB junk member: within
    the byte budget, so only the clock stops it), the archive is refused, named, with nothing of it left; the
    process that called extract goes on. The honest zip opens under the real limits."""
    ok = make_zip(tmp_path / "ok.zip", work())
    assert sorted(handin.extract(ok, tmp_path / "a", handin.Budget(100, 1 << 20))) == [
        "19_benchmarking/.ipynb_checkpoints/a_dev-checkpoint.ipynb", "19_benchmarking/README.md",
        "19_benchmarking/a_dev.ipynb", "19_benchmarking/b_dev.ipynb", "19_benchmarking/progress.json",
        "release/19_benchmarking/a_dev.ipynb"]
    # a central directory of 78,000 records under its 1,000 x 4 KB bound: ~60 MiB of zipfile's objects to parse
    records = b"".join(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0,
                                   0o100644 << 16, 0) + b"%06x" % i for i in range(78_000))
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, 1, 0) + b"a"
    big = tmp_path / "big.zip"
    big.write_bytes(local + records + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(records), len(local), 0))
    with pytest.raises(handin.Refused, match=r"big.zip: more than 1000 files"):  # the real limit: parsed, counted
        handin.extract(big, tmp_path / "b", handin.Budget(1000, 200 << 20))
    monkeypatch.setattr(handin, "ARCHIVE_MEMORY_MB", 32)
    with pytest.raises(handin.Refused, match=r"big.zip needed more than 32 MiB to open"):
        handin.extract(big, tmp_path / "b", handin.Budget(1000, 200 << 20))
    assert not (tmp_path / "b").exists()
    monkeypatch.undo()
    slow = tmp_path / "slow.tar.bz2"
    slow.write_bytes(bz2.compress(tar_header(b"__MACOSX/._x", 200 << 20, b"0")) + zeros_bz2(200)
                     + bz2.compress(honest_tail()))
    monkeypatch.setattr(handin, "ARCHIVE_SECONDS", 0.1)
    with pytest.raises(handin.Refused, match=r"slow.tar.bz2 took longer than 0.1 s to open"):
        handin.extract(slow, tmp_path / "c", handin.Budget(100, 200 << 20))
    assert not (tmp_path / "c").exists()
