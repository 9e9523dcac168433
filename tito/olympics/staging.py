"""A class's folders made ready to judge: each student's files found (`find_files`: submission.json and the model
files it names, read as tito.isolation.untrusted reads a student's file), copied into a folder of their own
(`stage`), and the judge's work folder (`prepare_work`: the sandbox's code, the course baseline, the images).
A folder whose name is no usable student id is refused, by grading's rule (`student_folders`).
"""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

from tito.config import TitoError
from tito.isolation import protocol, untrusted
from tito.olympics.records import counted_archive, file_tensors, summarize
from tito.olympics.sandboxes import Student, StudentError


MODEL_SUFFIXES = (".pt", ".pth", ".ts", ".pt2", ".onnx")
MAX_FILE_MB = 512  # a model file, and a submission.json


def student_folders(folder: Path) -> tuple[list[Student], dict[str, str]]:
    """The class's student folders (hidden ones skipped), each a Student with its files found (`find_files`), and
    the rejected ones with why: a folder whose name is no usable student id or is the same id as another's but for
    case or Unicode form (tito.isolation.untrusted: grading's rule), a link, files the judge cannot tell apart."""
    folders = [p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not folders:
        raise TitoError(f"SUBMISSIONS_DIR: no student folders in {folder}", code=2)
    valid, rejected = [], {}
    clash = untrusted.same_ids([p.name for p in folders])
    for p in folders:
        try:
            if why := untrusted.student_id_problem(p.name):
                raise StudentError(f"as a student id, the folder name is {why}; not judged")
            if p.name in clash:
                raise StudentError(f"the same student id as {', '.join(clash[p.name])} but for case or Unicode form "
                                   "(a spreadsheet, a file system or a person would take them for one student); not "
                                   "judged: rename the folders")
            if p.is_symlink():
                raise StudentError("the folder is a symbolic link (links are not followed)")
            st = Student(p.name, p)
            find_files(st)
            valid.append(st)
        except StudentError as e:
            rejected[untrusted.shown(p.name)] = str(e)
        except Exception as e:  # noqa: BLE001 - whatever a submission holds, it is that student's line
            rejected[untrusted.shown(p.name)] = f"unreadable submission ({type(e).__name__}: {str(e)[:200]})"
    return valid, rejected


def regular(path: Path, what: str) -> Path:
    """`path` when it is a regular file (not followed if a link) of at most MAX_FILE_MB; StudentError otherwise."""
    try:
        untrusted.check_file(path, MAX_FILE_MB * untrusted.MB)
    except untrusted.Refused as e:
        raise StudentError(f"{what} " + untrusted.reason(path.name, e)) from None
    return path


def find_files(st: Student) -> None:
    """The submission and the model files of one student's folder; StudentError when they cannot be told."""
    sub = st.submission = st.folder / "submission.json"
    if not sub.exists():
        raise StudentError("no submission.json in the folder")
    try:
        st.doc = untrusted.parse_json(untrusted.read_regular(regular(sub, "submission"), MAX_FILE_MB * untrusted.MB),
                                      what="submission.json is not valid JSON")
    except untrusted.Refused as e:
        raise StudentError(str(e)) from None
    if not isinstance(st.doc, dict):
        raise StudentError("submission.json does not hold a JSON object")
    models = st.doc.get("models") if isinstance(st.doc.get("models"), dict) else {}
    named = {role: models[role].get("file") if isinstance(models.get(role), dict) else None
             for role in ("baseline", "optimized")}
    for role, name in named.items():
        if name is not None:
            if not isinstance(name, str) or Path(name).name != name:
                raise StudentError(f"models.{role}.file: expected a file name in the folder, got {name!r}")
            if not (st.folder / name).exists():
                raise StudentError(f"the submission names {role} model file {name!r}, which is not in the folder")
            st.files[role] = regular(st.folder / name, f"{role} model file")
    if "optimized" not in st.files:
        found = sorted(p for p in st.folder.iterdir() if p.suffix.lower() in MODEL_SUFFIXES
                       and p.name != named.get("baseline"))
        if not found:
            raise StudentError(f"no model file ({', '.join(MODEL_SUFFIXES)}) in the folder")
        if len(found) > 1:
            raise StudentError(f"several model files ({', '.join(p.name for p in found)}) and submission.json "
                               "names none (models.optimized.file)")
        st.files["optimized"] = regular(found[0], "model file")


def stage(st: Student, work: Path, index: int) -> None:
    """Copy the student's model files into a folder of their own (what a converting sandbox reads, and where the
    judge writes the counted copies it sends)."""
    st.stage = work / "students" / f"s{index:04d}"
    st.stage.mkdir(parents=True)
    h = hashlib.sha256()
    for role, p in sorted(st.files.items()):
        dest = st.stage / f"{role}{p.suffix.lower()}"
        try:
            untrusted.copy_regular(p, dest, MAX_FILE_MB * untrusted.MB)
        except untrusted.Refused as e:  # it changed since it was found
            raise StudentError(f"{role} model file " + untrusted.reason(p.name, e)) from None
        dest.chmod(0o444)
        h.update(role.encode() + b"\0" + hashlib.sha256(dest.read_bytes()).digest())
    st.stage.chmod(0o755)
    st.key = h.hexdigest()


def load_private_data(path: Path, classes: int = 10) -> tuple[Any, Any]:
    """`--data FILE`: the instructor's held-out images, an .npz holding `images` (N, 1, 8, 8), floats in
    [0, 1] like the digits split's (pixel / 16), and `labels` (N,), integers 0-9; N at least 30.

        numpy.savez("held_out.npz", images=X.astype("float32"), labels=y)   # X: (N, 1, 8, 8), y: (N,)
    """
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise TitoError(f"--data: no such file {str(path)!r} (expected an .npz with `images` and `labels`)", code=2)
    try:
        with np.load(path, allow_pickle=False) as f:
            X, y = f["images"], f["labels"]
    except (OSError, ValueError, KeyError, EOFError) as e:
        raise TitoError(f"--data: {str(path)!r} is not an .npz with arrays `images` and `labels` "
                        f"({type(e).__name__}: {str(e)[:120]})", code=2) from None
    if X.ndim != 4 or X.shape[1:] != (1, 8, 8) or X.dtype.kind != "f" or not np.isfinite(X).all():
        raise TitoError(f"--data: `images` must be finite floats of shape (N, 1, 8, 8), got {X.dtype} {X.shape}", code=2)
    if y.shape != (X.shape[0],) or y.dtype.kind not in "iu" or (y.size and (y.min() < 0 or y.max() >= classes)):
        raise TitoError(f"--data: `labels` must be N = {X.shape[0]} integers 0-{classes - 1}, got {y.dtype} {y.shape}", code=2)
    if X.shape[0] < 30:
        raise TitoError(f"--data: at least 30 images are needed, got {X.shape[0]}", code=2)
    return np.ascontiguousarray(X, dtype=np.float32), np.ascontiguousarray(y, dtype=np.int64)


def prepare_work(work: Path, data_file: Path | None = None) -> dict[str, Any]:
    """The judge's staging folder: the server, protocol and records modules (the sandbox's only code of tito's), the
    course baseline (as the records its size counts), and the images accuracy is judged on, the public test split
    or the instructor's `data_file` (inputs go to the sandboxes; labels stay here)."""
    import io

    import torch

    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split

    lib = work / "lib"
    lib.mkdir(parents=True)
    here = Path(__file__).resolve().parent
    for src in (here / "server.py", here / "records.py", Path(protocol.__file__)):
        shutil.copyfile(src, lib / src.name)
    course = work / "course"
    course.mkdir()
    base = default_digits_model()
    X, y = load_digits_split("test")
    buf = io.BytesIO()
    with torch.no_grad():
        torch.jit.save(torch.jit.trace(base, X[:1], check_trace=False), buf)  # TorchScript, as every model runs
    (course / "traced.pt").write_bytes(buf.getvalue())
    counted_archive(course / "traced.pt", course / "baseline.pt")
    for d in (work, lib, course, work / "students"):
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
    for f in list(lib.iterdir()) + [course / "baseline.pt"]:
        f.chmod(0o444)
    out = {"X": X.numpy(), "y": y.numpy(), "classes": int(y.max()) + 1,
           "pkg": Path(sys.modules["tinytorch"].__file__).resolve().parent,
           "course_tensors": summarize(file_tensors((course / "baseline.pt").read_bytes())),
           "source": f"the public digits test split ({len(y)} images), which anyone can download: a model that "
                     "memorised the public digits cannot be told from one that learned (only an instructor's held-out "
                     "set, judge --data FILE, can)"}
    if data_file is not None:
        out["X"], out["y"] = load_private_data(data_file, out["classes"])
        out["source"] = f"the instructor's held-out set {Path(data_file).name} ({len(out['y'])} images)"
    return out


def counted_copy(src: Path, dest: Path) -> Path | None:
    """What a measuring process is sent of a model file: the file itself for .onnx (all its bytes count), the
    TorchScript records its size counts (`counted_archive`), or None when the file needs converting first."""
    if src.suffix.lower() == ".onnx":
        return src
    try:
        counted_archive(src, dest)
    except (ValueError, OSError, EOFError, KeyError, __import__("zipfile").BadZipFile):
        dest.unlink(missing_ok=True)
        return None
    dest.chmod(0o444)
    return dest
