"""Hand-ins (tito.grading.handin, issue 44): the layouts `tito grade` and `olympics judge` read (tito's archives, Canvas's
and Moodle's bulk downloads, as folders or as the zip itself), the student id each gets, and every hostile archive
refused for its student only. Nothing here grades: the scripted walk from the kit (tests/test_student_kit.py) grades
hand-ins end to end once."""
from __future__ import annotations

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
    by one, late, resubmitted) and Moodle's folders and flat files, in one folder: each student's id is the archive's
    or the LMS's, and their folder holds the assignment's notebooks only, from their work folder, not the release's
    copies."""
    subs = tmp_path / "subs"
    make_zip(subs / "19_benchmarking-ann.zip", work())
    make_tar(subs / "bob.tar.gz", {"x/a_dev.ipynb": NB.encode()})
    (subs / "cy").mkdir()
    (subs / "cy" / "a_dev.ipynb").write_text(NB)
    make_zip(subs / "leecarol_1001_555_19_benchmarking-carol.zip", work())
    (subs / "smithdan_late_1002_556_a_dev.ipynb").write_text(NB)
    (subs / "smithdan_late_1002_557_b_dev-1.ipynb").write_text(NB)        # a resubmitted file, Canvas-renamed
    make_zip(subs / "Eve Moe_2001_assignsubmission_file_" / "hand-in.zip", work())
    (subs / "Fay Roe_2002_assignsubmission_file_b_dev.ipynb").write_text(NB)
    (subs / "notes.txt").write_text("an instructor's note")
    assert handin.needs_collecting(subs)
    got = handin.collect(subs, tmp_path / "out", WANTED)
    assert got.folder == tmp_path / "out" / "handins" and got.layout == "archive+canvas+folders+moodle"
    assert files_of(got.folder) == {
        "1001": ["a_dev.ipynb", "b_dev.ipynb"], "1002": ["a_dev.ipynb", "b_dev.ipynb"],
        "2001": ["a_dev.ipynb", "b_dev.ipynb"], "2002": ["b_dev.ipynb"],
        "ann": ["a_dev.ipynb", "b_dev.ipynb"], "bob": ["a_dev.ipynb"], "cy": ["a_dev.ipynb"]}
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
    assert sum("no submission.json" in p for p in cap.problems) == 7, cap.problems


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
        handin._write(io.BytesIO(b"x" * 100), tmp_path / "f", 10)


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
