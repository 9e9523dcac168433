"""Run untrusted code in a bubblewrap (`bwrap`) sandbox with resource limits.

The sandbox sees a read-only system (/usr, /bin, /lib*, /etc, the Python installation and the
course's virtual environment; nothing else of the host: no course repository, no home folder,
no other student's files), a private size-limited /tmp (its HOME), the folders given as
`mounts` (read-only) at /grading/<name>, no network (`--unshare-all`: new network, pid, ipc,
uts and user namespaces), and dies with its parent. Resource limits (address space, processes,
CPU seconds, file size) are set on the sandbox's first process and inherited by everything in
it; when tito runs as root the sandbox runs as a fresh unprivileged uid, so that the process
limit is enforced and counts that sandbox's processes only.

The caller reads the sandbox's standard output (capped) and its exit status. The only writable
host folders inside are the `rw` folders of the spec (the grading judge's scratch folder, which
the judge and the host share for the files a test hands over), bound at their own path.

A spec with `caps` (tito as root: the grading host's zygote, the judge) keeps uid 0 inside with
only those capabilities (e.g. CAP_SETUID to start each notebook's process as that notebook's own
unprivileged uid); without them the command itself runs as a fresh uid.

    >>> spec = SandboxSpec(argv=["{python}", "-c", "print(1)"], mounts={})
    >>> run(spec, timeout=60, bwrap=find_bwrap()).stdout.strip()   # doctest: +SKIP
    '1'
"""
from __future__ import annotations

import os
import resource
import shutil
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tito.isolation import process
from tito.isolation.seccomp import keyring_filter
from tito.config import TitoError

INSIDE = "/grading"          # mounts appear at /grading/<name> inside the sandbox
INSTALL_HINT = ("bubblewrap (`bwrap`) is not installed: install it with `sudo apt-get install bubblewrap` "
                "(Debian/Ubuntu; `python3 -m tito` installs it when run as root), or pass --no-sandbox to "
                "grade WITHOUT a sandbox (student code then runs with your permissions)")
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]
PRIVATE_TMP = "/tito-tmp"  # where a grading process mounts its private temporary folder (spec.private_tmp)


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


def find_bwrap() -> str | None:
    """Path of the `bwrap` executable on PATH, or None."""
    return shutil.which("bwrap")


def require_sandbox(no_sandbox: bool) -> str | None:
    """The bwrap path; None when `no_sandbox`. Raises TitoError naming bubblewrap and
    --no-sandbox when bwrap is missing and a sandbox is wanted.

    >>> require_sandbox(True) is None
    True
    """
    if no_sandbox:
        return None
    path = find_bwrap()
    if path is None:
        raise TitoError("tito grade refuses to run student code unsandboxed: " + INSTALL_HINT, code=2)  # refused: 2
    return path


def _python_dirs() -> list[str]:
    out = []
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              str(Path(sys.executable).resolve().parent.parent)}:
        if p and Path(p).exists() and p not in SYSTEM_DIRS and p != "/":
            out.append(p)
    return sorted(out)


def inside_path(name: str, host: Path, sandboxed: bool) -> str:
    """Where mount `name` appears to the command: /grading/<name> in the sandbox, the host path
    without one."""
    return f"{INSIDE}/{name}" if sandboxed else str(Path(host).resolve())


def bound_dirs(spec: SandboxSpec) -> dict[str, str]:
    """Host folders bound read-only into the sandbox -> where they appear inside."""
    out = {d: d for d in _python_dirs()}
    for name, host in sorted(spec.mounts.items()):
        out[str(Path(host).resolve())] = f"{INSIDE}/{name}"
    return out


# run as root, bwrap mounts as root; the sandbox's first process then becomes an unprivileged uid of
# its own (so RLIMIT_NPROC counts this sandbox's processes only) before anything else runs
_DROP = ("import os, sys; u = int(sys.argv[1]); os.setgroups([]); os.setgid(u); os.setuid(u); "
         "os.execv(sys.argv[2], sys.argv[2:])")


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


def command(spec: SandboxSpec, bwrap: str | None, uid: int | None = None, seccomp_fd: int | None = None) -> list[str]:
    """The full command line: bwrap options + argv (placeholders resolved); argv alone without bwrap.

    As root, `uid` (default: a fresh one) is the uid the command runs as inside the sandbox;
    `seccomp_fd`: an open file bwrap reads the sandbox's seccomp filter from (tito.isolation.seccomp).
    """
    sandboxed = bwrap is not None
    subst = _subst(spec, sandboxed)
    argv = [a.format(**subst) for a in spec.argv]
    if not sandboxed:
        return argv
    root = os.geteuid() == 0
    if root:  # no user namespace: the uid drop below makes the process limit count this sandbox only
        cmd = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
        if spec.caps is not None:
            for cap in spec.caps:
                cmd += ["--cap-add", cap]
        else:
            cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            argv = [sys.executable, "-c", _DROP, str(uid or sandbox_uid()), *argv]
    else:
        cmd = [bwrap, "--unshare-all"]
    cmd += ["--die-with-parent", "--new-session", "--clearenv"]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    for d in SYSTEM_DIRS:
        cmd += ["--ro-bind-try", d, d]
    size = str(spec.limits.tmp_mb * 1024 * 1024)
    if spec.private_tmp:  # /tmp and /dev/shm writable by nobody; each process mounts its own at PRIVATE_TMP
        cmd += ["--dev", "/dev", "--proc", "/proc", "--size", size, "--perms", "0755", "--tmpfs", "/tmp",
                "--perms", "0755", "--dir", PRIVATE_TMP, "--size", size, "--perms", "0755", "--tmpfs", "/dev/shm"]
    else:
        cmd += ["--dev", "/dev", "--proc", "/proc",
                "--size", size, "--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--dir", "/tmp/home",
                # a private /dev/shm for named semaphores (importing joblib warns without one)
                "--size", size, "--perms", "1777", "--tmpfs", "/dev/shm"]
    binds = bound_dirs(spec)
    for d in spec.ro:
        binds[str(Path(d).resolve())] = str(Path(d).resolve())
    rw = [str(Path(d).resolve()) for d in spec.rw]
    parents = sorted({str(a) for inside in [*binds.values(), *rw] for a in Path(inside).parents if str(a) != "/"},
                     key=lambda a: a.count("/"))
    for d in parents:  # bwrap would make them 0700: the sandbox user could not reach the binds
        cmd += ["--perms", "0755", "--dir", d]
    for host, inside in binds.items():
        cmd += ["--ro-bind", host, inside]
    for d in rw:
        cmd += ["--bind", d, d]
    for k, v in sandbox_env(spec, sandboxed, subst).items():
        cmd += ["--setenv", k, v]
    cmd += ["--chdir", spec.cwd, "--"]
    return cmd + argv


def _subst(spec: SandboxSpec, sandboxed: bool) -> dict[str, str]:
    return {"python": sys.executable, **{k: inside_path(k, v, sandboxed) for k, v in spec.mounts.items()}}


def sandbox_env(spec: SandboxSpec, sandboxed: bool, subst: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the command: a minimal one (PATH with the venv's bin, HOME in /tmp);
    `{name}` in spec.env values becomes the mount's path."""
    subst = subst if subst is not None else _subst(spec, sandboxed)
    home = "/tmp/home" if sandboxed else os.environ.get("TMPDIR", "/tmp")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp",
           "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "JUPYTER_PLATFORM_DIRS": "1"}
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    env.update({k: v.format(**subst) for k, v in spec.env.items()})
    return env


def user_tasks(uid: int | None = None) -> int:
    """How many processes and threads `uid` (default: ours) runs now, counted from /proc (Linux)."""
    uid = os.geteuid() if uid is None else uid
    n = 0
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:  # ended while read
                continue
    return n


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
        # other work has used up (bwrap: "Creating new namespace failed: Resource temporarily unavailable")
        extra = user_tasks() + limits.processes
        rlimits[resource.RLIMIT_NPROC] = (extra, extra)
    rlimits = within_inherited(rlimits)

    def setup() -> None:
        for which, value in rlimits.items():
            resource.setrlimit(which, value)
    return setup


def start(spec: SandboxSpec, bwrap: str | None, pass_fds: tuple[int, ...] = (), stdout=None, stderr=None,
          uid: int | None = None, cgroups: tuple[Path, ...] = (), cpus: set[int] | None = None):
    """Start `spec` (in bwrap when `bwrap` is a path, else directly with the same limits); returns
    the Popen of a process group that dies with tito. `pass_fds` stay open inside; as root without
    `caps`, the command runs as `uid` (default: a fresh one); it starts inside `cgroups` (folders of
    control groups: tito.isolation.limits), so everything it runs counts there; `cpus`: the cores it
    (and everything it starts) may run on. In bwrap, no process of the sandbox can use the kernel's
    keyrings (tito.isolation.seccomp: a uid's keys would cross from one test process to the next)."""
    import subprocess

    sandboxed = bwrap is not None
    rlimits = _preexec(spec.limits)
    program = keyring_filter() if sandboxed else None
    seccomp_fd = None
    if program is not None:  # bwrap reads the filter from a file descriptor: a pipe holds it (a few hundred bytes)
        seccomp_fd, w = os.pipe()
        os.write(w, program)
        os.close(w)

    def setup() -> None:
        for g in cgroups:
            with open(Path(g) / "cgroup.procs", "w") as f:
                f.write("0")  # this process, before it execs the sandbox
        if cpus:
            os.sched_setaffinity(0, cpus)
        rlimits()

    try:
        return process.start(command(spec, bwrap, uid, seccomp_fd), cwd=spec.cwd if not sandboxed else None,
                             env=sandbox_env(spec, sandboxed) if not sandboxed else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                             stdout=stdout if stdout is not None else subprocess.PIPE,
                             stderr=stderr if stderr is not None else subprocess.PIPE,
                             pass_fds=(*pass_fds, seccomp_fd) if seccomp_fd is not None else pass_fds, preexec=setup)
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)


def run(spec: SandboxSpec, timeout: float, bwrap: str | None) -> SandboxResult:
    """Run `spec` for at most `timeout` seconds (see `start`); the whole process group is killed at
    the limit or when it ends. Standard output is kept up to the spec's output limit."""
    if timeout <= 0:
        raise TitoError(f"sandbox timeout: expected a positive number of seconds, got {timeout}")
    t0 = time.perf_counter()
    done = process.finish(start(spec, bwrap), timeout, cap=spec.limits.output_kb * 1024, t0=t0)
    return SandboxResult(done.returncode, done.stdout, done.stderr[-64 * 1024:], done.seconds, done.truncated)


_PROBE = ("import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
          "print('tito-probe-ok', flush=True)\n")
_PROBED: dict[tuple, str | None] = {}
# what bubblewrap says where the machine or a container forbids what it needs, and what to change
CONTAINER_ADVICE = (
    "in Docker, start the container with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined "
    "--security-opt systempaths=unconfined` (and `--cap-add SYS_ADMIN` to grade as root in it; Podman: "
    "`--security-opt seccomp=unconfined --security-opt unmask=ALL`), or grade on the host; README: Grading in a container")
USERNS_ADVICE = ("user namespaces are off for normal users on this machine: as root, `sysctl -w kernel.unprivileged_userns_clone=1` "
                 "(Debian) or `sysctl -w user.max_user_namespaces=15000`, or Ubuntu 24.04's "
                 "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; or grade as root")


def in_container() -> bool:
    """Whether this process runs in a container (Docker's /.dockerenv, Podman's /run/.containerenv, or
    the `container` variable systemd-nspawn and Podman set)."""
    return any(Path(p).exists() for p in ("/.dockerenv", "/run/.containerenv")) or bool(os.environ.get("container"))


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def sandbox_advice(stderr: str) -> str:
    """What to change where a sandbox could not start, from bubblewrap's words and the machine's settings."""
    if in_container():
        return CONTAINER_ADVICE
    if os.geteuid() != 0 and ("user namespace" in stderr or "uid map" in stderr or "No permissions to creat" in stderr
                              or _sysctl("kernel.unprivileged_userns_clone") == "0"
                              or _sysctl("user.max_user_namespaces") == "0"):
        return USERNS_ADVICE
    return ("bubblewrap could not set up its namespaces here (a seccomp filter or a security module forbids them, as "
            "containers do): " + CONTAINER_ADVICE)


def probe(bwrap: str, limits: Limits, imports: tuple[str, ...] | list[str] = (), caps: tuple[str, ...] | None = None,
          timeout: float = 300) -> str | None:
    """Start one sandbox as grading starts them (`limits`, `caps`) and import `imports` in it: None when it
    works, else why, with what to change (remembered per process: the answer does not change within a run).

    >>> probe(find_bwrap(), Limits(), ["json"])   # doctest: +SKIP
    """
    key = (bwrap, tuple(sorted(vars(limits).items())), tuple(imports), caps, tuple(resource.getrlimit(r) for r in
           (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE)))
    if key in _PROBED:
        return _PROBED[key]
    spec = SandboxSpec(["{python}", "-s", "-c", _PROBE, *imports], {}, {"OMP_NUM_THREADS": "1"}, limits=limits, caps=caps)
    try:
        res = run(spec, timeout, bwrap)
    except OSError as e:  # the launcher itself could not start (a preexec or exec failure)
        res = SandboxResult(-1, "", f"{type(e).__name__}: {e}", 0.0)
    problem = None
    if res.timed_out:
        problem = f"a sandbox did not start within {timeout:.0f} s"
    elif "tito-probe-ok" not in res.stdout:
        said = [line for line in res.stderr.strip().splitlines() if line.strip()]
        bw = [line for line in said if line.startswith("bwrap:")]
        if bw:
            problem = f"no sandbox starts here ({bw[0].strip()[:300]}): {sandbox_advice(res.stderr)}"
        else:
            last = said[-1].strip()[:300] if said else f"exit {res.returncode}"
            problem = (f"a sandbox with these limits cannot import {', '.join(imports) or 'Python'} ({last}): "
                       "raise the inherited limits named above, or check that the course's virtual environment works")
    _PROBED[key] = problem
    return problem
