"""What a model file holds, as the Olympics count it: the records its size counts, and every tensor in them.

Two jobs, on two sides of the sandbox wall:
- the judge (`counted_archive`): a TorchScript archive rebuilt from exactly the records `model_file_bytes` counts
  (the library's `counted_records`), streamed record by record; only this copy is sent to a measuring sandbox,
  so bytes the size does not count (extra files, debug records, records nothing refers to) never enter the
  memory of the process that runs the model, not even as freed heap a model could read back;
- the measuring sandbox (`file_tensors`, `summarize`): every tensor the counted records hold (parameters,
  buffers, list and dict attributes, frozen constants: a pickle walk finds their storages and shapes, nothing is
  unpickled), read from the bytes before the model is loaded, and reduced to bounded signatures (`summarize`) that
  are all the judge receives for its copy checks (`tito.olympics.copies`): a student's tensors never take the
  judge's own memory, however large they are.

This file is staged beside the server in every measuring sandbox (it imports only numpy and the library).
"""
from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

MAX_ARCHIVE_MB = 512      # the counted records of one archive, uncompressed: more is refused unread
COPY_CHUNK = 1 << 20      # bytes copied at a time when a record is streamed into the rebuilt archive
METADATA = {"version": rb"\d{1,4}\n?", ".data/version": rb"\d{1,4}\n?", "byteorder": rb"little|big"}

SMALLEST = 64             # a tensor of fewer elements is no fingerprint (a bias, a scale)
MAX_TENSORS = 32          # the largest tensors of a model summarised, at most
SIG_POINTS = 256          # order statistics kept of a tensor's sorted values
MAX_ROWS, ROW_POINTS = 128, 64  # rows kept of a matrix (its output units), order statistics kept of each row


def counted_archive(src: str | Path, dest: str | Path) -> str:
    """Write to `dest` a TorchScript archive holding exactly the records of `src` that `model_file_bytes`
    counts (a record named twice: its larger copy, as counted), in their order, plus the two format records the
    loader needs (`version`, `byteorder`) when they hold what that format allows (a few digits, `little`/`big`),
    rewritten by the judge. Returns how the records were chosen; ValueError for a file that is not a TorchScript
    archive (no code, no constants: a `torch.save` pickle needs the converting sandbox) or whose counted records
    expand past MAX_ARCHIVE_MB.

        counted_archive("submitted.pt", "sent.pt")   # doctest: +SKIP
    """
    from tinytorch.benchmarking.olympics import counted_records

    records, how = counted_records(Path(src))
    if records is None:
        raise ValueError("not a zip archive")
    names = list(records)
    if not names:
        raise ValueError("an empty archive")
    prefix = names[0].split("/", 1)[0] + "/" if "/" in names[0] else ""
    if not any(n.startswith(prefix + "code/") or n == prefix + "constants.pkl" for n in names):
        raise ValueError("a zip archive without TorchScript code")
    if sum(records.values()) > MAX_ARCHIVE_MB * 2**20:
        raise ValueError(f"its counted records expand to more than {MAX_ARCHIVE_MB} MiB")
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as out:
        infos: dict[str, zipfile.ZipInfo] = {}
        for info in z.infolist():  # the larger copy of a name given twice, as counted
            if info.filename in records and info.file_size >= infos.get(info.filename, info).file_size:
                infos[info.filename] = info
        for name in names:
            info = infos[name]
            target = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            with z.open(info) as r, out.open(target, "w", force_zip64=True) as w:
                left = info.file_size
                while left > 0:  # never more than what was counted, whatever the data stream holds
                    chunk = r.read(min(COPY_CHUNK, left))
                    if not chunk:
                        break
                    w.write(chunk)
                    left -= len(chunk)
        for meta, pattern in METADATA.items():
            name = prefix + meta
            info = next((i for i in z.infolist() if i.filename == name and i.file_size <= 8), None)
            if info is not None and re.fullmatch(pattern, data := z.read(info)):
                out.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return how


# ---- the tensors of the counted records (in the sandbox) -------------------------------------

STORAGE_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
                  "BFloat16Storage": "bfloat16", "QInt8Storage": np.int8, "QUInt8Storage": np.uint8,
                  "QInt32Storage": np.int32}  # weights: floating or quantized; integer and bool storages are not


def file_tensors(data: bytes) -> list[tuple[str, np.ndarray]]:
    """Every floating-point or quantized tensor held in the counted records of a TorchScript archive's bytes: one
    per storage, in the shape of the tensor built on it when one view covers the storage whole (else flat);
    quantized storages as their integers. Parameters, buffers, tensors in list or dict attributes and frozen
    constants alike: where the model keeps a tensor does not hide it."""
    from tinytorch.benchmarking.olympics import counted_records, pickle_storages

    records, _ = counted_records(data)
    if not records:
        return []
    names = list(records)
    prefix = names[0].split("/", 1)[0] + "/" if "/" in names[0] else ""
    out = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for pkl, folder in (("data.pkl", "data/"), ("constants.pkl", "constants/")):
            if prefix + pkl not in records:
                continue
            try:
                storages = pickle_storages(z.read(prefix + pkl))
            except (ValueError, IndexError, KeyError, EOFError):
                continue  # a pickle the walk cannot follow: its records count, its tensors are not read
            for key, st in storages.items():
                dtype = STORAGE_DTYPES.get(st["kind"])
                record = prefix + folder + key
                if dtype is None or record not in records:
                    continue
                raw = z.read(record)
                if dtype == "bfloat16":
                    values = (np.frombuffer(raw[:len(raw) // 2 * 2], np.uint16).astype(np.uint32) << 16).view(np.float32)
                else:
                    values = np.frombuffer(raw[:len(raw) // np.dtype(dtype).itemsize * np.dtype(dtype).itemsize], dtype)
                whole = [size for offset, size in st["views"] if offset == 0 and int(np.prod(size)) == values.size]
                out.append((record, values.reshape(whole[0]) if whole and whole[0] else values))
    return out


def _order_statistics(sorted_values: np.ndarray, points: int) -> np.ndarray:
    "`points` evenly spaced order statistics of sorted values (along the last axis); all of them when fewer."
    n = sorted_values.shape[-1]
    if n <= points:
        return sorted_values
    return sorted_values[..., np.round(np.linspace(0, n - 1, points)).astype(int)]


def summarize(tensors: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Bounded signatures of a model's tensors, the judge's copy checks' only view of them: the MAX_TENSORS largest
    with at least SMALLEST elements, each as `numel`, `shape`, `sig` (its values sorted and divided by their root
    mean square, SIG_POINTS order statistics: the same for a copy renamed, reshaped, reordered, its channels
    permuted or scaled) and, for a tensor of 2+ dimensions with at most MAX_ROWS rows, `rows` (each output unit's
    values sorted, ROW_POINTS order statistics: `copies.unit_distance` pairs them one to one). Float32 arrays, at
    most ~1.1 MB in all whatever the model holds."""
    picked = []
    for name, t in tensors:
        a = np.asarray(t.dequantize() if hasattr(t, "is_quantized") and t.is_quantized else t)
        if a.dtype.kind not in "fiu" or a.dtype == np.bool_ or a.size < SMALLEST:
            continue
        picked.append((name, a))
    picked.sort(key=lambda na: -na[1].size)
    out = []
    for name, a in picked[:MAX_TENSORS]:
        v = a.astype(np.float64).reshape(-1)
        if not np.all(np.isfinite(v)):
            v = np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
        rms = float(np.sqrt(np.mean(v * v)))
        if rms == 0:
            continue
        entry = {"numel": int(v.size), "shape": [int(d) for d in a.shape][:8],
                 "sig": _order_statistics(np.sort(v) / rms, SIG_POINTS).astype(np.float32)}
        if a.ndim >= 2 and 1 < a.shape[0] <= MAX_ROWS:
            rows = np.sort(v.reshape(a.shape[0], -1), axis=1)
            entry["rows"] = _order_statistics(rows, ROW_POINTS).astype(np.float32)
        out.append(entry)
    return out
