"""Processes seen from /proc (Linux): the one place tito walks it, to find, count, watch and end processes.

Two walks: `every` (each process of the machine, with one of its /proc files) and `tree` (a process and what
runs below it, by the kernel's children lists). A process that ends, or hides, while it is read is passed
over. The rest are what grading, the Olympics judge and the sandboxes ask of them: a group's members, the
descendants of a process, a uid's processes and threads, a tree's CPU time and memory, this process's peak.
Standard library only: this file runs inside the grading sandbox too (tito.grading.host).

    >>> os.getpid() in {pid for pid, _ in every("stat")}
    True
"""
from __future__ import annotations

import os
import signal
import time
from typing import Callable, Iterator


def read(pid: int | str, name: str) -> str | None:
    """The text of /proc/PID/`name`; None when the process ended or is not this user's to read."""
    try:
        with open(f"/proc/{pid}/{name}", encoding="ascii", errors="replace") as f:
            return f.read()
    except (OSError, ValueError):  # ended while read, or not ours to read
        return None


def every(file: str = "stat") -> Iterator[tuple[int, str]]:
    """(pid, text of /proc/PID/`file`) for every process this one can see."""
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit() and (text := read(name, file)) is not None:
            yield int(name), text


def tree(pid: int, file: str = "stat") -> Iterator[tuple[int, str]]:
    """(pid, text of /proc/PID/`file`) for process `pid` and every process below it (the kernel's children
    lists of each of its threads)."""
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        text = read(p, file)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in (read(f"{p}/task/{t}", "children") or "").split()]
        except OSError:
            continue
        if text is not None:
            yield p, text


def cwd_of(pid: int) -> str | None:
    """The folder process `pid` runs in (a removed folder keeps its old path), None where it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/cwd").removesuffix(" (deleted)")
    except OSError:
        return None


def stat_fields(stat: str) -> list[str]:
    """The fields of a /proc/PID/stat text after the command name: state, ppid, pgrp, ..."""
    return stat.rsplit(")", 1)[1].split() if ")" in stat else []


def group_members(pgid: int) -> list[int]:
    "The processes of process group `pgid`."
    return [pid for pid, stat in every("stat") if len(f := stat_fields(stat)) > 2 and f[2] == str(pgid)]


def descendants(pid: int) -> list[int]:
    """The live (not zombie) processes below `pid` in the process tree (orphans handed to it included)."""
    children: dict[int, list[int]] = {}
    for child, stat in every("stat"):
        f = stat_fields(stat)
        if len(f) > 1 and f[0] != "Z" and f[1].isdigit():
            children.setdefault(int(f[1]), []).append(child)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def uid_of(status: str) -> int | None:
    "The real uid a /proc/PID/status text names."
    line = next((l for l in status.splitlines() if l.startswith("Uid:")), "")
    return int(line.split()[1]) if len(line.split()) > 1 and line.split()[1].isdigit() else None


def user_tasks(uid: int | None = None) -> int:
    """How many processes and threads `uid` (default: ours) runs now."""
    uid = os.geteuid() if uid is None else uid
    n = 0
    for pid, status in every("status"):
        if uid_of(status) == uid:
            n += next((int(l.split()[1]) for l in status.splitlines() if l.startswith("Threads:")), 1)
    return n


def stop_and_kill(members: Callable[[], list[int]]) -> None:
    """Stop, then SIGKILL, the processes `members()` lists, sweeping again until it lists none (a fork loop
    cannot outrun a sweep whose processes are stopped first)."""
    for sig in (signal.SIGSTOP, signal.SIGSTOP, signal.SIGKILL, signal.SIGKILL, signal.SIGKILL):
        found = members()
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def kill_group(pgid: int, spare: int | None = None) -> None:
    """SIGKILL every process of group `pgid` (but `spare`), again until none is left."""
    stop_and_kill(lambda: [p for p in group_members(pgid) if p != spare])


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below `pid` (stopped first), then reap the ones that were this process's children
    (`pid` is this process: it is their subreaper), so none is left even as a zombie."""
    stop_and_kill(lambda: descendants(pid))
    if pid == os.getpid():
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.002)
            except ChildProcessError:
                break


def kill_uid(uid: int) -> int:
    """SIGKILL every process running as `uid` (what a notebook's code left behind, `setsid` or not), stopped first;
    returns how many there were."""
    members = lambda: [pid for pid, status in every("status") if uid_of(status) == uid]  # noqa: E731
    found = len(members())
    stop_and_kill(members)
    return found


def _cpu_s(stat: str) -> float:
    f = stat_fields(stat)
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK") if len(f) >= 15 else 0.0  # utime stime cutime cstime


def tree_cpu_s(pid: int) -> float:
    """CPU seconds used so far by process `pid` and every process below it (all their threads, and the children
    they reaped)."""
    return sum(_cpu_s(stat) for _, stat in tree(pid, "stat"))


def process_cpu_s(pid: int | None) -> float:
    "CPU seconds of one process (all its threads, its reaped children); 0 when it is gone or unknown."
    stat = read(pid, "stat") if pid is not None else None
    return _cpu_s(stat) if stat else 0.0


def tree_pss_mb(pid: int) -> float:
    """Proportional set size (MiB) of process `pid` and every process below it (smaps_rollup: a page shared by
    n processes counts 1/n to each, so a class's torch libraries count once in all)."""
    return sum(int(line.split()[1]) for _, rollup in tree(pid, "smaps_rollup")
               for line in rollup.splitlines() if line.startswith("Pss:")) / 1024


def own_status(key: str) -> str | None:
    "The value of `key` (`VmHWM`, `CapEff`, ...) in this process's /proc/self/status; None where unreadable."
    status = read("self", "status") or ""
    return next((l.split(":", 1)[1].strip() for l in status.splitlines() if l.startswith(f"{key}:")), None)


def peak_rss_mb() -> float:
    "This process at its largest (VmHWM: resident memory's high-water mark), MiB."
    hwm = own_status("VmHWM")
    if hwm and hwm.split()[0].isdigit():
        return int(hwm.split()[0]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def own_cgroups() -> list[str]:
    "The lines of /proc/self/cgroup (`ID:controllers:path`); [] where there are none."
    return (read("self", "cgroup") or "").splitlines()


def sysctl(name: str) -> str | None:
    "The kernel setting `name` (`kernel.unprivileged_userns_clone`), None where it is not readable."
    return (read("sys", name.replace(".", "/")) or "").strip() or None
