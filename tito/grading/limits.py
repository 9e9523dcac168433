"""Limits on one student's whole sandbox, where the kernel can enforce them (tito as root).

Per-process limits (address space, file size, CPU: tito.grading.sandbox.Limits) do not stop many
processes from filling the machine together. As root, tito adds:

- a control group (v2, or v1's memory and pids hierarchies) holding all of a student's host
  processes: their memory together and their number together are capped, so one student cannot
  push the machine into swap or the OOM killer while others are graded;
- a size-limited tmpfs as the folder the judge and the host share (the only place the host can
  write that is not its own private /tmp), so a student cannot fill the disk.

Both are best effort: where the machine offers neither (no root, no writable cgroup), `Guard`
reports what it could not apply, and grading goes on with the per-process limits.

    >>> Guard("demo", memory_mb=1024, processes=64).unavailable   # doctest: +SKIP
    []
"""
from __future__ import annotations

import ctypes
import os
import shutil
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class Guard:
    """The cgroup(s) of one student (created at once; `add(pid)`; `close()` removes them); `cpus`: a
    CPU-time cap in cores (the Olympics judge: one core per student model, whatever its threads)."""

    def __init__(self, name: str, memory_mb: int, processes: int, cpus: float | None = None):
        self.groups: list[Path] = []
        self.unavailable: list[str] = []
        if os.geteuid() != 0:
            self.unavailable.append("memory and process caps for the whole sandbox (needs root)")
            return
        if (CGROUP / "cgroup.controllers").is_file():  # v2
            controllers = (CGROUP / "cgroup.controllers").read_text().split()
            if {"memory", "pids"} <= set(controllers):
                cpu = {"cpu.max": f"{int(cpus * 100_000)} 100000"} if cpus else {}
                self._make(CGROUP / name, {"memory.max": f"{memory_mb}M", "memory.swap.max": "0",
                                           "pids.max": str(processes), **cpu})
                if cpus and not (CGROUP / name / "cpu.max").exists():
                    self.unavailable.append("CPU cap for the whole sandbox (the cpu controller is not enabled)")
                return
        v1 = {"memory": {"memory.limit_in_bytes": str(memory_mb << 20)}, "pids": {"pids.max": str(processes)}}
        if cpus:  # the period before the quota: a quota is checked against the current period
            v1["cpu"] = {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": str(int(cpus * 100_000))}
        for hierarchy, settings in v1.items():
            if (CGROUP / hierarchy / "tasks").is_file():
                self._make(CGROUP / hierarchy / name, settings)
            else:
                self.unavailable.append(f"{hierarchy} cap for the whole sandbox (no {hierarchy} cgroup)")

    def _make(self, path: Path, settings: dict[str, str]) -> None:
        try:
            path.mkdir(exist_ok=True)
            for key, value in settings.items():
                if (path / key).exists():
                    _write(path / key, value)
            self.groups.append(path)
        except OSError as e:
            self.unavailable.append(f"cgroup {path}: {e.strerror}")

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

    def close(self) -> None:
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
