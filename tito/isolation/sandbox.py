"""Run untrusted code in a sandbox with resource limits: what to run (`SandboxSpec`, `Limits`), the backend
that isolates it (`Backend`: found, started, what it enforces) and the one registration of the backend every run
uses (`BACKEND`, `registered`: tito.isolation.bubblewrap). Without a sandbox (`--no-sandbox`: `Unsandboxed`) the
same spec runs as a plain process with the same per-process limits.

Resource limits (address space, processes, CPU seconds, file size) are set on the sandbox's first process and
inherited by everything in it. The caller reads the sandbox's standard output (capped) and its exit status.

    >>> spec = SandboxSpec(argv=["{python}", "-c", "print(1)"], mounts={})
    >>> run(spec, timeout=60, box=find()).stdout.strip()   # doctest: +SKIP
    '1'
"""
from __future__ import annotations

import importlib
import os
import resource
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tito.config import TitoError
from tito.isolation import procs, process

UNSANDBOXED = "NONE (--no-sandbox): student code ran unsandboxed"


@dataclass
class Limits:
    """Resource limits of one sandbox (each process in it: memory, file size, CPU; all of them:
    process count).

    >>> Limits(memory_mb=2048).rlimits()[resource.RLIMIT_AS]
    (2147483648, 2147483648)
    """
    memory_mb: int = 6144          # address space per process (RLIMIT_AS)
    processes: int = 256           # processes and threads in the sandbox (RLIMIT_NPROC)
    cpu_seconds: int = 3600        # CPU time per process (RLIMIT_CPU)
    file_mb: int = 64              # largest file a process may write (RLIMIT_FSIZE)
    tmp_mb: int = 512              # size of the private /tmp (tmpfs)
    output_kb: int = 8192          # standard output the host keeps

    def __post_init__(self) -> None:
        for k, v in vars(self).items():
            if not isinstance(v, int) or v <= 0:
                raise TitoError(f"sandbox limit {k}: expected a positive integer, got {v!r}")

    def rlimits(self) -> dict[int, tuple[int, int]]:
        mib = 1024 * 1024
        return {resource.RLIMIT_AS: (self.memory_mb * mib,) * 2,
                resource.RLIMIT_NPROC: (self.processes,) * 2,
                resource.RLIMIT_CPU: (self.cpu_seconds,) * 2,
                resource.RLIMIT_FSIZE: (self.file_mb * mib,) * 2,
                resource.RLIMIT_CORE: (0, 0)}


@dataclass
class SandboxSpec:
    """What to run: `argv` (may use {python} and {name} placeholders for mount paths), read-only
    `mounts` (name -> host folder), environment additions, working directory (inside), host
    folders bound at their own path read-only (`ro`) or writable (`rw`), and the capabilities the
    command keeps as root (`caps`, see module doc; None: it runs as a fresh uid)."""
    argv: list[str]
    mounts: dict[str, Path]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/tmp"
    limits: Limits = field(default_factory=Limits)
    rw: list[Path] = field(default_factory=list)
    ro: list[Path] = field(default_factory=list)
    caps: tuple[str, ...] | None = None
    private_tmp: bool = False  # no shared writable /tmp: each process mounts its own at PRIVATE_TMP
    # its own code makes namespaces (the grading zygote): bwrap's seccomp filter then refuses only the keyrings,
    # else also a user namespace, clone(CLONE_PARENT) and clone3 (tito.isolation.seccomp.STUDENT)
    namespaces: bool = False


@dataclass
class SandboxResult:
    returncode: int | None        # None: killed at the time limit
    stdout: str
    stderr: str
    seconds: float
    truncated: bool = False

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class Backend:
    """How a `SandboxSpec` is run: `launch` (its command line, working folder, environment, files), `inside_path`
    (where a mount appears to it), `label` (grades.csv's `sandbox` column), `failure` (its own words where it
    could not start). `isolated`: whether the command runs apart from the host; `enforces`: what it enforces
    (the whole-sandbox caps it cannot give here: tito.isolation.limits.gaps)."""
    name = UNSANDBOXED
    isolated = False
    home: str | None = None        # HOME inside (None: the host's TMPDIR)
    install_hint = ""
    enforces: tuple[str, ...] = ("per-process limits on memory, processes, CPU time, file size",)

    def argv(self, spec: "SandboxSpec") -> list[str]:
        subst = {"python": sys.executable, **{k: self.inside_path(k, v) for k, v in spec.mounts.items()}}
        return [a.format(**subst) for a in spec.argv]

    def launch(self, spec: "SandboxSpec", uid: int | None = None) -> tuple[list[str], str | None, dict, tuple[int, ...]]:
        """The command line, working folder, environment and the files (descriptors) the command reads at its
        start: `start` passes them in and closes its own copies."""
        return self.argv(spec), spec.cwd, environment(spec, self), ()

    def inside_path(self, name: str, host: Path) -> str:
        return str(Path(host).resolve())

    def label(self, missing: list[str], note: str = "") -> str:
        """What grades.csv's `sandbox` column says: the backend's name, which whole-sandbox protections it went
        without (tito.isolation.limits.gaps) and `note` (limits clamped to what this process was given)."""
        if not self.isolated:
            return self.name
        return self.name + (", WITHOUT: " + ", ".join(missing) if missing else "") + (f"; {note}" if note else "")

    def failure(self, stderr: str) -> str | None:
        return None


class Unsandboxed(Backend):
    """--no-sandbox: the spec's command as a plain process (its limits still set)."""


BACKEND = "tito.isolation.bubblewrap:Bubblewrap"  # THE registration: the `Backend` subclass every run uses


def registered() -> type:
    """The sandbox every run uses (BACKEND: another backend is a `Backend` subclass with `find`, named there; by
    name, so that a backend's module builds on this one without a circle of imports)."""
    module, name = BACKEND.split(":")
    return getattr(importlib.import_module(module), name)


def find() -> Backend | None:
    """The registered sandbox where it is installed, else None."""
    return registered().find()


def require(no_sandbox: bool, refusal: str = "tito grade refuses to run student code unsandboxed: ") -> Backend:
    """The sandbox (`Unsandboxed` when `no_sandbox`); TitoError (exit 2) with `refusal` and how to install it when
    it is missing and a sandbox is wanted.

    >>> require(True).isolated
    False
    """
    if no_sandbox:
        return Unsandboxed()
    box = find()
    if box is None:
        raise TitoError(refusal + registered().install_hint, code=2)  # refused: 2
    return box


# Sandbox uids: each process of tito hands out the uids of a block of its own, in order, so no two sandboxes of
# a run share a uid (keyrings, RLIMIT_NPROC and kill_uid's sweep are per uid; 24 random bits drew a shared uid
# about once per 300-student run). A block is claimed by binding an abstract socket named after it, which
# the kernel frees when the process ends: two runs at once on this machine never claim the same block.
UID_FIRST, UID_BLOCK = 1 << 20, 1 << 20     # above every account's uid and the usual subuid ranges
UID_BLOCKS = (0xFFFF_FFFE - UID_FIRST) // UID_BLOCK     # 4094 blocks; (uid_t)-1 stays out of reach
_uids: dict = {"next": 0, "end": 0, "claims": []}
_uids_lock = threading.Lock()


def _forget_uids() -> None:
    """In a forked child: its parent's block stays its parent's (and a lock held by a parent's thread is gone)."""
    global _uids, _uids_lock
    _uids, _uids_lock = {"next": 0, "end": 0, "claims": []}, threading.Lock()


os.register_at_fork(after_in_child=_forget_uids)


def _claim_uid_block() -> int:
    """The first uid of a block no other process on this machine holds (its socket kept in _uids)."""
    start = int.from_bytes(os.urandom(2), "big") % UID_BLOCKS
    for i in range(UID_BLOCKS):
        block = (start + i) % UID_BLOCKS
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(f"\0tito-sandbox-uids-{block}")
        except OSError:  # another tito process holds it (or this one, an earlier block)
            s.close()
            continue
        _uids["claims"].append(s)
        return UID_FIRST + block * UID_BLOCK
    raise TitoError(f"no sandbox uids left: all {UID_BLOCKS} blocks of {UID_BLOCK} uids are held by tito processes")


def sandbox_uid() -> int:
    """A fresh unprivileged uid for one sandbox (no account needs to exist for it): never one this process
    handed out before, nor one another tito process on this machine holds (thread-safe; a forked child claims
    a block of its own).

    >>> a, b = sandbox_uid(), sandbox_uid()
    >>> b == a + 1 and a >= UID_FIRST
    True
    """
    with _uids_lock:
        if _uids["next"] >= _uids["end"]:
            _uids["next"] = _claim_uid_block()
            _uids["end"] = _uids["next"] + UID_BLOCK
        uid = _uids["next"]
        _uids["next"] += 1
        return uid


def environment(spec: SandboxSpec, box: Backend) -> dict[str, str]:
    """The environment of the command: a minimal one (PATH with the venv's bin, HOME in /tmp);
    `{name}` in spec.env values becomes the mount's path."""
    subst = {"python": sys.executable, **{k: box.inside_path(k, v) for k, v in spec.mounts.items()}}
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": box.home or os.environ.get("TMPDIR", "/tmp"),
           "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "JUPYTER_PLATFORM_DIRS": "1"}
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    env.update({k: v.format(**subst) for k, v in spec.env.items()})
    return env


def within_inherited(rlimits: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """`rlimits` lowered to what this process has: asking above an inherited hard limit fails (and
    `preexec_fn` with it, for every student), and an inherited soft limit is the instructor's choice
    (`ulimit -v`); tito.isolation.limits.fit says beforehand what this clamps.

    >>> within_inherited({resource.RLIMIT_CORE: (0, 0)})[resource.RLIMIT_CORE]
    (0, 0)
    """
    out = {}
    for which, (soft, hard) in rlimits.items():
        have_soft, have_hard = resource.getrlimit(which)
        if have_hard != resource.RLIM_INFINITY:
            hard = min(hard, have_hard)
        if have_soft != resource.RLIM_INFINITY:
            hard = min(hard, max(have_soft, 0))
        out[which] = (min(soft, hard), hard)
    return out


def _preexec(limits: Limits):
    rlimits = limits.rlimits()
    if os.geteuid() != 0:
        # RLIMIT_NPROC counts every process and thread of the real uid: a normal user's sandbox shares its
        # uid with the grader, its editor and its other sandboxes, so the cap is what the user runs now plus
        # the sandbox's own allowance (a fork bomb still stops there), not an absolute count that the user's
        # other work has used up (the sandbox: "Creating new namespace failed: Resource temporarily unavailable")
        extra = procs.user_tasks() + limits.processes
        rlimits[resource.RLIMIT_NPROC] = (extra, extra)
    rlimits = within_inherited(rlimits)

    def setup() -> None:
        for which, value in rlimits.items():
            resource.setrlimit(which, value)
    return setup


def start(spec: SandboxSpec, box: Backend, pass_fds: tuple[int, ...] = (), stdout=None, stderr=None,
          uid: int | None = None, cgroups: tuple[Path, ...] = (), cpus: set[int] | None = None):
    """Start `spec` in the sandbox `box` (`Unsandboxed`: directly, with the same limits); returns the Popen of a
    process group that dies with tito. `pass_fds` stay open inside; as root without `caps`, the command runs as
    `uid` (default: a fresh one); it starts inside `cgroups` (folders of control groups: tito.isolation.limits),
    so everything it runs counts there; `cpus`: the cores it (and everything it starts) may run on. A backend's
    own files (bubblewrap: its seccomp filter, no kernel keyrings) are open for the start only."""
    import subprocess

    rlimits = _preexec(spec.limits)

    def setup() -> None:
        for g in cgroups:
            with open(Path(g) / "cgroup.procs", "w") as f:
                f.write("0")  # this process, before it execs the sandbox
        if cpus:
            os.sched_setaffinity(0, cpus)
        rlimits()

    argv, cwd, env, fds = box.launch(spec, uid)
    try:
        return process.start(argv, cwd=cwd, env=env, stdout=stdout if stdout is not None else subprocess.PIPE,
                             stderr=stderr if stderr is not None else subprocess.PIPE, pass_fds=(*pass_fds, *fds),
                             preexec=setup)
    finally:
        for fd in fds:  # the child holds its copies
            os.close(fd)


def run(spec: SandboxSpec, timeout: float, box: Backend) -> SandboxResult:
    """Run `spec` for at most `timeout` seconds (see `start`); the whole process group is killed at
    the limit or when it ends. Standard output is kept up to the spec's output limit."""
    if timeout <= 0:
        raise TitoError(f"sandbox timeout: expected a positive number of seconds, got {timeout}")
    t0 = time.perf_counter()
    done = process.finish(start(spec, box), timeout, cap=spec.limits.output_kb * 1024, t0=t0)
    return SandboxResult(done.returncode, done.stdout, done.stderr[-64 * 1024:], done.seconds, done.truncated)


_PROBE = ("import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
          "print('tito-probe-ok', flush=True)\n")
_PROBED: dict[tuple, str | None] = {}


def probe(box: Backend, limits: Limits, imports: tuple[str, ...] | list[str] = (), caps: tuple[str, ...] | None = None,
          timeout: float = 300) -> str | None:
    """Start one sandbox as grading starts them (`limits`, `caps`) and import `imports` in it: None when it
    works, else why, with what to change (remembered per process: the answer does not change within a run).

    >>> probe(find(), Limits(), ["json"])   # doctest: +SKIP
    """
    key = (box, tuple(sorted(vars(limits).items())), tuple(imports), caps, tuple(resource.getrlimit(r) for r in
           (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE)))
    if key in _PROBED:
        return _PROBED[key]
    spec = SandboxSpec(["{python}", "-s", "-c", _PROBE, *imports], {}, {"OMP_NUM_THREADS": "1"}, limits=limits, caps=caps)
    try:
        res = run(spec, timeout, box)
    except OSError as e:  # the launcher itself could not start (a preexec or exec failure)
        res = SandboxResult(-1, "", f"{type(e).__name__}: {e}", 0.0)
    problem = None
    if res.timed_out:
        problem = f"a sandbox did not start within {timeout:.0f} s"
    elif "tito-probe-ok" not in res.stdout:
        problem = box.failure(res.stderr)
        if problem is None:
            said = [line for line in res.stderr.strip().splitlines() if line.strip()]
            last = said[-1].strip()[:300] if said else f"exit {res.returncode}"
            problem = (f"a sandbox with these limits cannot import {', '.join(imports) or 'Python'} ({last}): "
                       "raise the inherited limits named above, or check that the course's virtual environment works")
    _PROBED[key] = problem
    return problem
