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
`gaps()` says beforehand what a run on this machine goes without (the backend's `label` says it in
grades.csv).

    >>> Guard("demo", memory_mb=1024, processes=64).unavailable   # doctest: +SKIP
    []
"""
from __future__ import annotations

import contextlib
import os
import queue
import resource
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tito.isolation import procs

if TYPE_CHECKING:
    from tito.isolation.sandbox import Backend, Limits

CGROUP = Path("/sys/fs/cgroup")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


# the whole-sandbox protections, as the console, grades.csv's `sandbox` column and result.json name them
MEMORY = "memory cap of the whole sandbox"
PROCESSES = "process cap of the whole sandbox"
CPU = "equal CPU share"
SCRATCH = "size limit of the scratch folder"
_V1 = {"memory": MEMORY, "pids": PROCESSES, "cpu": CPU}
CAP_SYS_ADMIN = 21


def _has_cap(cap: int) -> bool:
    """Whether this process holds capability `cap` (a container's root may lack CAP_SYS_ADMIN)."""
    eff = procs.own_status("CapEff")
    try:
        return bool(int(eff, 16) >> cap & 1) if eff else os.geteuid() == 0
    except ValueError:
        return os.geteuid() == 0


def gaps(cores_split: bool = False) -> list[str]:
    """The whole-sandbox protections this machine cannot give the current user (module doc);
    `cores_split`: the students graded at once each run on cores of their own (`cpu_split`), which
    is their equal CPU share where no cgroup gives one.

    >>> set(gaps()) <= {MEMORY, PROCESSES, CPU, SCRATCH}
    True
    """
    if os.geteuid() != 0:
        return [MEMORY, PROCESSES] + ([] if cores_split else [CPU]) + [SCRATCH]
    if not _has_cap(CAP_SYS_ADMIN) or not os.access(CGROUP, os.W_OK):
        # root in a container: no CAP_SYS_ADMIN to mount a tmpfs, a read-only /sys/fs/cgroup
        scratch = [] if _has_cap(CAP_SYS_ADMIN) else [SCRATCH]
        if not os.access(CGROUP, os.W_OK) and not os.access(CGROUP / "memory", os.W_OK):
            return [MEMORY, PROCESSES] + ([] if cores_split else [CPU]) + scratch
        return scratch
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


# ---- limits this process is given: what grading may ask for, before it starts ------------------

# what one student's grading needs at least (docs/performance.md, "Limits it is given"): below it, grading is
# refused before it starts rather than failing for every student. Module 19 was graded in full (an honest
# student, 235 of 235 points) under `ulimit -n 64 -u 64 -v 2000000 -f 30000` together (as root: the process
# count is each sandbox's own uid's)
NEED_MEMORY_MB = 1400    # a cgroup's share: a student's sandboxed processes peak at ~0.9 GB together, the judge ~0.5 GB
NEED_ADDRESS_MB = 1024   # address space of one process: the sandbox's imports (torch and the rest) peak at 826 MiB
NEED_PROCESSES = 64      # processes and threads of one student's sandbox
NEED_OPEN_FILES = 64     # descriptors of one process
NEED_FILE_MB = 24        # the largest file grading writes: a copy of a notebook (settings.ini submission_notebook_mb: 20)
NEED_CPU_SECONDS = 600   # CPU seconds of one process (a student's judge grades all their notebooks)

# name, resource, the shell's ulimit flag and its unit in bytes (None: a count), Limits' field and its unit
_RLIMITS = [("address space per process", resource.RLIMIT_AS, "-v", 1024, "memory_mb", 1 << 20),
            ("processes and threads", resource.RLIMIT_NPROC, "-u", None, "processes", 1),
            ("file size", resource.RLIMIT_FSIZE, "-f", 1024, "file_mb", 1 << 20),
            ("CPU time per process", resource.RLIMIT_CPU, "-t", None, "cpu_seconds", 1)]
_UNIT = {"memory_mb": " MiB", "file_mb": " MiB", "processes": "", "cpu_seconds": " s"}


def _limit(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY else value


def _cgroup_paths() -> dict[str, tuple[Path, tuple[str, str]]]:
    """The cgroup folders this process is in, with the files of their limit and usage:
    {"memory": (folder, (limit, usage)), "pids": ...} (v1's hierarchies, or v2's one)."""
    out: dict[str, tuple[Path, tuple[str, str]]] = {}
    for line in procs.own_cgroups():
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "" and (CGROUP / "cgroup.controllers").is_file():  # v2: one hierarchy
            out.setdefault("memory", (CGROUP / rel, ("memory.max", "memory.current")))
            out.setdefault("pids", (CGROUP / rel, ("pids.max", "pids.current")))
        for c in controllers.split(","):
            if c == "memory" and (CGROUP / c).is_dir():
                out[c] = (CGROUP / c / rel, ("memory.limit_in_bytes", "memory.usage_in_bytes"))
            elif c == "pids" and (CGROUP / c).is_dir():
                out[c] = (CGROUP / c / rel, ("pids.max", "pids.current"))
    return out


def _read_number(path: Path) -> int | None:
    try:
        text = path.read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None   # "max": no limit


def _tightest(folder: Path, files: tuple[str, str], unlimited: int = 1 << 60) -> tuple[int, int, Path] | None:
    """(limit, current use, where) of the tightest of `folder` and its ancestors for `files` (limit, usage)."""
    best = None
    for d in [folder, *folder.parents]:
        if not str(d).startswith(str(CGROUP)):
            break
        limit = _read_number(d / files[0])
        if limit is not None and limit < unlimited and (best is None or limit - (_read_number(d / files[1]) or 0) < best[0] - best[1]):
            best = (limit, _read_number(d / files[1]) or 0, d / files[0])
    return best


@dataclass
class Inherited:
    """The limits this process was started with: rlimits (name -> (soft, hard), None: unlimited), the
    cgroup's memory limit and process limit (with what is in use and the file that says so), user tasks."""
    rlimits: dict[str, tuple[int | None, int | None]]
    open_files: tuple[int | None, int | None]
    memory: tuple[int, int, Path] | None       # bytes: limit, in use, the file
    pids: tuple[int, int, Path] | None         # count: limit, in use, the file
    user_tasks: int


def inherited() -> Inherited:
    """Read the limits this process inherits (rlimits; cgroup v1 or v2 memory and pids limits).

    >>> "address space per process" in inherited().rlimits
    True
    """
    groups = _cgroup_paths()
    memory = _tightest(*groups["memory"]) if "memory" in groups else None
    pids = _tightest(*groups["pids"]) if "pids" in groups else None
    return Inherited({name: tuple(_limit(v) for v in resource.getrlimit(which)) for name, which, *_ in _RLIMITS},
                     tuple(_limit(v) for v in resource.getrlimit(resource.RLIMIT_NOFILE)), memory, pids, procs.user_tasks())


@dataclass
class Fit:
    """What grading may ask for here (`fit`): the clamped `limits`, one line per clamp (`clamped`), and
    `refusal`, the sentence saying why grading cannot be done safely and what to change (None: it can)."""
    limits: "Limits"
    clamped: list[str]
    refusal: str | None = None

    def note(self) -> str:
        """The clamps as grades.csv's `sandbox` column and the console say them ("" when none)."""
        return ("clamped to inherited limits: " + "; ".join(self.clamped)) if self.clamped else ""


def _shell(flag: str, value: int, unit: int | None) -> str:
    return f"`ulimit {flag} {value // unit if unit else value}`"


def fit(limits: "Limits", jobs: int, box: "Backend", imports: tuple[str, ...] = (), caps: tuple[str, ...] | None = None,
        what: str = "tito grade", probe: bool = True, given: Inherited | None = None) -> Fit:
    """Clamp each of `limits` to what this process is given, dividing what `jobs` students graded at once
    share (a cgroup's memory and processes; a normal user's process count), and say what was clamped;
    refuse (Fit.refusal) where less is left than one student needs (NEED_*), or where no sandbox starts:
    `probe` starts one with the clamped limits (and `caps`, as the caller's will) and imports `imports` in it.

    >>> from tito.isolation.sandbox import Limits, Unsandboxed
    >>> fit(Limits(), 1, Unsandboxed(), probe=False).refusal is None   # doctest: +SKIP
    True
    """
    from tito.isolation import sandbox

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected a whole number >= 1, got {jobs!r}")
    got = given or inherited()
    new = {k: v for k, v in vars(limits).items()}
    clamped: list[str] = []
    refuse: list[str] = []
    root = os.geteuid() == 0
    for name, _, flag, unit, field_, scale in _RLIMITS:
        soft, hard = got.rlimits[name]
        cap = min((v for v in (soft, hard) if v is not None), default=None)
        if cap is None:
            continue
        per = cap // scale
        why = f"inherited {_shell(flag, cap, unit)}"
        if field_ == "processes" and not root:
            # a normal user's sandboxes share its uid: the limit counts every process of the user, those
            # running now included, and the students graded at once divide what is left
            per = max(0, cap - got.user_tasks) // jobs
            why = f"inherited {_shell(flag, cap, unit)}, {got.user_tasks} in use, {jobs} student(s) at once"
        need = {"memory_mb": NEED_ADDRESS_MB, "processes": NEED_PROCESSES, "file_mb": NEED_FILE_MB, "cpu_seconds": NEED_CPU_SECONDS}[field_]
        need = min(need, new[field_])  # a caller asking for less (the Olympics' 8 MiB files) needs no more
        if per < need:
            refuse.append(f"{name}: {per}{_UNIT[field_]} per sandbox ({why}), below the {need}{_UNIT[field_]} "
                          f"one student needs: raise it (`ulimit {flag} unlimited`"
                          + (", or fewer students at once with --jobs" if field_ == "processes" and not root else "") + ")")
        elif per < new[field_]:
            clamped.append(f"{name} {new[field_]} -> {per}{_UNIT[field_]} ({why})")
            new[field_] = per
    soft, hard = got.open_files
    if soft is not None and soft < NEED_OPEN_FILES:
        if hard is None or hard >= NEED_OPEN_FILES:  # a soft limit any process may raise up to its hard one
            raised = 16 * NEED_OPEN_FILES if hard is None else min(hard, 16 * NEED_OPEN_FILES)
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, resource.RLIM_INFINITY if hard is None else hard))
            clamped.append(f"open files: soft limit raised {soft} -> {raised} (the hard limit allows it)")
        else:
            refuse.append(f"open files: {hard} per process (inherited `ulimit -n {hard}`), below the {NEED_OPEN_FILES} "
                          f"grading needs: raise it (`ulimit -n {NEED_OPEN_FILES}` or more)")
    if got.memory is not None:
        limit, used, where = got.memory
        share = limit // jobs >> 20
        why = f"{where} is {limit >> 20} MiB, {jobs} student(s) at once"
        if share < NEED_MEMORY_MB:
            refuse.append(f"memory: {share} MiB per student ({why}), below the {NEED_MEMORY_MB} MiB one student "
                          f"needs: grade fewer at once (--jobs {max(1, limit // (NEED_MEMORY_MB << 20))}) or raise it")
        elif share < new["memory_mb"]:
            clamped.append(f"memory {new['memory_mb']} -> {share} MiB ({why})")
            new["memory_mb"] = share
    if got.pids is not None:
        limit, used, where = got.pids
        share = max(0, limit - used) // jobs
        why = f"{where} is {limit}, {used} in use, {jobs} student(s) at once"
        if share < NEED_PROCESSES:
            refuse.append(f"processes: {share} per student ({why}), below the {NEED_PROCESSES} one student needs: "
                          "grade fewer at once (--jobs) or raise it")
        elif share < new["processes"]:
            clamped.append(f"processes {new['processes']} -> {share} ({why})")
            new["processes"] = share
    fitted = sandbox.Limits(**new)
    if not refuse and probe and box.isolated:
        problem = sandbox.probe(box, fitted, imports, caps)
        if problem:
            refuse.append(problem)
    refusal = (f"{what} cannot grade safely here, so it grades nobody: " + "; ".join(refuse)) if refuse else None
    return Fit(fitted, clamped, refusal)


def memory_budget(memory_mb: float, given: Inherited | None = None) -> tuple[float, str | None]:
    """`memory_mb` (a budget for everything a run keeps alive at once, e.g. the Olympics judge's groups) within
    the memory the cgroup of this process allows: (the budget, what was clamped or None).

    >>> memory_budget(1024, Inherited({}, (None, None), None, None, 0))
    (1024, None)
    """
    got = given or inherited()
    if got.memory is None or got.memory[0] >> 20 >= memory_mb:
        return memory_mb, None
    limit, _, where = got.memory
    return limit >> 20, f"memory budget {memory_mb:.0f} -> {limit >> 20} MiB ({where} is {limit >> 20} MiB)"
