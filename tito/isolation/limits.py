"""Limits on one student's whole sandbox, where the kernel can enforce them (tito as root).

Per-process limits (address space, file size, CPU: tito.isolation.sandbox.Limits) do not stop many
processes from filling the machine together. As root, tito adds:

- a control group (v2, or v1's memory and pids hierarchies) holding all of a student's host
  processes: their memory together and their number together are capped, so one student cannot
  push the machine into swap or the OOM killer while others are graded;
- a CPU share: the student's processes form one group of the CPU controller with the same weight as
  every other student's, so a student who starts many busy processes shares the cores with their
  neighbour as one student, not as many (cgroup v2 `cpu.weight`, v1 `cpu.shares`);
- a size-limited tmpfs as the folder the judge and the host share (the only place the host can
  write that is not its own private /tmp), so a student cannot fill the disk.

All are best effort: where the machine offers them not (no root, no writable cgroup), `Guard`
reports what it could not apply, and grading goes on with the per-process limits (address space,
file size, CPU seconds, and RLIMIT_NPROC, which as a normal user counts every process of that user);
`gaps()` says beforehand what a run on this machine goes without, `sandbox_label` how grades.csv
says it.

    >>> Guard("demo", memory_mb=1024, processes=64).unavailable   # doctest: +SKIP
    []
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import threading
import shutil
import signal
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


# the whole-sandbox protections, as the console, grades.csv's `sandbox` column and result.json name them
MEMORY = "memory cap of the whole sandbox"
PROCESSES = "process cap of the whole sandbox"
CPU = "equal CPU share"
SCRATCH = "size limit of the scratch folder"
_V1 = {"memory": MEMORY, "pids": PROCESSES, "cpu": CPU}


def gaps(cores_split: bool = False) -> list[str]:
    """The whole-sandbox protections this machine cannot give the current user (module doc);
    `cores_split`: the students graded at once each run on cores of their own (`cpu_split`), which
    is their equal CPU share where no cgroup gives one.

    >>> set(gaps()) <= {MEMORY, PROCESSES, CPU, SCRATCH}
    True
    """
    if os.geteuid() != 0:
        return [MEMORY, PROCESSES] + ([] if cores_split else [CPU]) + [SCRATCH]
    if (CGROUP / "cgroup.controllers").is_file():  # v2
        have = set((CGROUP / "cgroup.controllers").read_text().split())
        if {"memory", "pids"} <= have:
            subtree = CGROUP / "cgroup.subtree_control"
            return [] if "cpu" in (subtree.read_text().split() if subtree.is_file() else []) else [CPU]
    return [what for hierarchy, what in _V1.items() if not (CGROUP / hierarchy / "tasks").is_file()
            and not (cores_split and what == CPU)]


def cpu_split(jobs: int) -> list[list[int]] | None:
    """The cores this process may use, split into `jobs` disjoint sets (one per student graded at
    once: everything a student runs is pinned to its set, so a student with many busy processes
    slows only themselves); None when there are fewer cores than `jobs` (no equal split).

    >>> cpu_split(10 ** 6) is None
    True
    """
    cores = sorted(os.sched_getaffinity(0))
    if jobs < 1 or jobs > len(cores):
        return None
    return [cores[i::jobs] for i in range(jobs)]


_SLOTS: dict[tuple, "queue.Queue"] = {}
_SLOTS_LOCK = threading.Lock()


@contextlib.contextmanager
def cpu_slot(split: list[list[int]] | None):
    """One free set of `split` (`cpu_split`) for the student graded in this thread, given back at the
    end; None when there is no split."""
    if not split:
        yield None
        return
    key = tuple(tuple(s) for s in split)
    with _SLOTS_LOCK:
        if key not in _SLOTS:
            _SLOTS[key] = queue.Queue()
            for s in split:
                _SLOTS[key].put(set(s))
    cpus = _SLOTS[key].get()
    try:
        yield cpus
    finally:
        _SLOTS[key].put(cpus)


def sandbox_label(missing: list[str]) -> str:
    """What grades.csv's `sandbox` column says: "bubblewrap", or which protections it went without.

    >>> sandbox_label([CPU])
    'bubblewrap, WITHOUT: equal CPU share'
    """
    return "bubblewrap" + (", WITHOUT: " + ", ".join(missing) if missing else "")


class Guard:
    """The cgroup(s) of one student (created at once; `add(pid)`; `close()` kills what is left in
    them and removes them); `cpus`: a CPU-time cap in cores (the Olympics judge: one core per student
    model, whatever its threads). `unavailable`: what could not be applied and why; `missing`: the
    same as protections named by this module's constants."""

    def __init__(self, name: str, memory_mb: int, processes: int, cpus: float | None = None):
        self.groups: list[Path] = []
        self.unavailable: list[str] = []
        self.missing: list[str] = []
        if os.geteuid() != 0:
            self.unavailable.append("memory, process and CPU share for the whole sandbox (needs root)")
            self.missing += [MEMORY, PROCESSES, CPU]
            return
        if (CGROUP / "cgroup.controllers").is_file():  # v2
            controllers = (CGROUP / "cgroup.controllers").read_text().split()
            if {"memory", "pids"} <= set(controllers):
                cpu = {"cpu.weight": "100", **({"cpu.max": f"{int(cpus * 100_000)} 100000"} if cpus else {})}
                self._make(CGROUP / name, {"memory.max": f"{memory_mb}M", "memory.swap.max": "0",
                                           "pids.max": str(processes), **cpu}, [MEMORY, PROCESSES, CPU])
                if self.groups and not (CGROUP / name / "cpu.weight").exists():
                    self.unavailable.append("CPU share for the whole sandbox (the cpu controller is not enabled)")
                    self.missing.append(CPU)
                return
        v1 = {"memory": {"memory.limit_in_bytes": str(memory_mb << 20)}, "pids": {"pids.max": str(processes)},
              "cpu": {"cpu.shares": "1024"}}
        if cpus:  # the period before the quota: a quota is checked against the current period
            v1["cpu"].update({"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": str(int(cpus * 100_000))})
        for hierarchy, settings in v1.items():
            if (CGROUP / hierarchy / "tasks").is_file():
                self._make(CGROUP / hierarchy / name, settings, [_V1[hierarchy]])
            else:
                self.unavailable.append(f"{hierarchy} cap for the whole sandbox (no {hierarchy} cgroup)")
                self.missing.append(_V1[hierarchy])

    def _make(self, path: Path, settings: dict[str, str], what: list[str]) -> None:
        try:
            path.mkdir(exist_ok=True)
            for key, value in settings.items():
                if (path / key).exists():
                    _write(path / key, value)
            self.groups.append(path)
        except OSError as e:
            self.unavailable.append(f"cgroup {path}: {e.strerror}")
            self.missing += what

    def add(self, pid: int) -> None:
        """Put process `pid` (and so everything it starts) in the student's groups."""
        for g in self.groups:
            try:
                _write(g / "cgroup.procs", str(pid))
            except OSError as e:
                self.unavailable.append(f"cgroup {g}: {e.strerror}")

    def peak_mb(self) -> float | None:
        """The most memory the student's processes held together (the memory group's peak), in MiB."""
        for g in self.groups:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                try:
                    return int((g / name).read_text().split()[0]) / 2**20
                except (OSError, ValueError, IndexError):
                    continue
        return None

    def kill(self) -> int:
        """SIGKILL every process still in the student's groups (what escaped every other sweep);
        returns how many there were."""
        found: set[int] = set()
        for _ in range(5):  # a process forking while its group is read: read again
            pids = set()
            for g in self.groups:
                try:
                    pids |= {int(p) for p in (g / "cgroup.procs").read_text().split()}
                except (OSError, ValueError):
                    continue
            if not pids:
                break
            found |= pids
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        return len(found)

    def close(self) -> None:
        """Kill what is left in the groups (`kill`) and remove them."""
        self.kill()
        for g in self.groups:
            for _ in range(50):  # the group empties as its processes are reaped
                try:
                    g.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


def mount_tmpfs(path: Path, size_mb: int) -> bool:
    """Mount a tmpfs of `size_mb` MiB on `path` (as root); False where that is not possible."""
    if os.geteuid() != 0:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", 2 | 4, f"size={size_mb}m,mode=0755".encode()) == 0


def unmount(path: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(str(path).encode(), 2)  # MNT_DETACH
    shutil.rmtree(path, ignore_errors=True)
