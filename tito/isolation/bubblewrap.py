"""The grading sandbox as bubblewrap (`bwrap`, Debian package `bubblewrap`) builds it: the one backend that
tito.isolation.sandbox registers. Another isolation (a container runtime, nsjail) is another `Backend` like this
one and its name in `sandbox.BACKEND`; nothing outside tito/isolation names bubblewrap's command.

The sandbox sees a read-only system (/usr, /bin, /lib*, /etc, the Python installation and the
course's virtual environment; nothing else of the host: no course repository, no home folder,
no other student's files), a private size-limited /tmp (its HOME), the folders given as
`mounts` (read-only) at /grading/<name>, no network (`--unshare-all`: new network, pid, ipc,
uts and user namespaces), and dies with its parent. When tito runs as root the sandbox runs as a
fresh unprivileged uid, so that the process limit is enforced and counts that sandbox's processes only;
a spec with `caps` keeps uid 0 inside with only those capabilities. The only writable host folders
inside are the spec's `rw` folders, bound at their own path. No process inside can use the kernel's keyrings
(a seccomp filter: tito.isolation.seccomp; a uid's keys would cross from one test process to the next) nor,
unless the spec says its code makes namespaces, make a user namespace or a process outside its parent's tree
(clone(CLONE_PARENT)); and as
root no two sandboxes of a run share a uid (sandbox.sandbox_uid).

    >>> Bubblewrap("/usr/bin/bwrap").inside_path("files", Path("/x"))
    '/grading/files'
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tito.isolation import procs
from tito.isolation.namespaces import PRIVATE_TMP
from tito.isolation.sandbox import Backend, SandboxSpec, environment, sandbox_uid
from tito.isolation.seccomp import sandbox_filter

INSIDE = "/grading"          # mounts appear at /grading/<name> inside the sandbox
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]
INSTALL_HINT = ("bubblewrap (`bwrap`) is not installed: install it with `sudo apt-get install bubblewrap` "
                "(Debian/Ubuntu; `python3 -m tito` installs it when run as root), or pass --no-sandbox to "
                "grade WITHOUT a sandbox (student code then runs with your permissions)")
# what bubblewrap says where the machine or a container forbids what it needs, and what to change
CONTAINER_ADVICE = (
    "in Docker, start the container with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined "
    "--security-opt systempaths=unconfined` (and `--cap-add SYS_ADMIN` to grade as root in it; Podman: "
    "`--security-opt seccomp=unconfined --security-opt unmask=ALL`), or grade on the host; README: Grading in a container")
USERNS_ADVICE = ("user namespaces are off for normal users on this machine: as root, `sysctl -w kernel.unprivileged_userns_clone=1` "
                 "(Debian) or `sysctl -w user.max_user_namespaces=15000`, or Ubuntu 24.04's "
                 "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; or grade as root")
# run as root, bwrap mounts as root; the sandbox's first process then becomes an unprivileged uid of
# its own (so RLIMIT_NPROC counts this sandbox's processes only) before anything else runs
_DROP = ("import os, sys; u = int(sys.argv[1]); os.setgroups([]); os.setgid(u); os.setuid(u); "
         "os.execv(sys.argv[2], sys.argv[2:])")


@dataclass(frozen=True)
class Bubblewrap(Backend):
    """bubblewrap at `path` (picklable: a Dask task carries it)."""
    path: str = "bwrap"
    name = "bubblewrap"
    isolated = True
    home = "/tmp/home"
    install_hint = INSTALL_HINT
    enforces = ("a read-only system and no course files", "a private /tmp", "no network", "a uid (root) or user "
                "namespace (normal user) of its own", "no kernel keyrings (seccomp)",
                "per-process limits on memory, processes, CPU time, file size")

    @classmethod
    def find(cls) -> "Bubblewrap | None":
        path = shutil.which("bwrap")
        return cls(path) if path else None

    def inside_path(self, name: str, host: Path) -> str:
        return f"{INSIDE}/{name}"

    def launch(self, spec: SandboxSpec, uid: int | None = None) -> tuple[list[str], str | None, dict, tuple[int, ...]]:
        """bwrap's command, and the seccomp filter (no kernel keyrings; unless the spec makes namespaces, no user
        namespace, clone(CLONE_PARENT) or clone3: tito.isolation.seccomp) in a pipe that
        bwrap reads at its start (a few hundred bytes: the pipe's buffer holds them)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        program = sandbox_filter(spec.namespaces)
        if program is None:  # a machine whose calls' numbers the table does not know
            return self.command(spec, uid), None, env, ()
        r, w = os.pipe()
        try:
            os.write(w, program)
            return self.command(spec, uid, r), None, env, (r,)
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)

    def command(self, spec: SandboxSpec, uid: int | None = None, seccomp_fd: int | None = None) -> list[str]:
        """bwrap's options + the spec's argv (placeholders resolved); as root, `uid` (default: a fresh one) is the
        uid the command runs as inside the sandbox; `seccomp_fd`: an open file bwrap reads the sandbox's seccomp
        filter from (every process of the sandbox inherits it, root inside included)."""
        argv = self.argv(spec)
        if os.geteuid() == 0:  # no user namespace: the uid drop below makes the process limit count this sandbox only
            cmd = [self.path, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
            if spec.caps is not None:
                for cap in spec.caps:
                    cmd += ["--cap-add", cap]
            else:
                cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
                argv = [sys.executable, "-c", _DROP, str(uid or sandbox_uid()), *argv]
        else:
            cmd = [self.path, "--unshare-all"]
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
        binds = self.bound_dirs(spec)
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
        for k, v in environment(spec, self).items():
            cmd += ["--setenv", k, v]
        return cmd + ["--chdir", spec.cwd, "--"] + argv

    def bound_dirs(self, spec: SandboxSpec) -> dict[str, str]:
        """Host folders bound read-only into the sandbox -> where they appear inside: the Python installation and
        the spec's mounts."""
        out = {p: p for p in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                                     str(Path(sys.executable).resolve().parent.parent)})
               if p and Path(p).exists() and p not in SYSTEM_DIRS and p != "/"}
        for name, host in sorted(spec.mounts.items()):
            out[str(Path(host).resolve())] = self.inside_path(name, host)
        return out

    def failure(self, stderr: str) -> str | None:
        """Where no sandbox started: bubblewrap's own words and what to change (None: it did not say why)."""
        said = next((line.strip() for line in stderr.splitlines() if line.startswith("bwrap:")), None)
        if said is None:
            return None
        if any(Path(p).exists() for p in ("/.dockerenv", "/run/.containerenv")) or os.environ.get("container"):
            advice = CONTAINER_ADVICE  # Docker, Podman, systemd-nspawn
        elif os.geteuid() != 0 and ("user namespace" in stderr or "uid map" in stderr or "No permissions to creat" in stderr
                                    or procs.sysctl("kernel.unprivileged_userns_clone") == "0"
                                    or procs.sysctl("user.max_user_namespaces") == "0"):
            advice = USERNS_ADVICE
        else:
            advice = ("bubblewrap could not set up its namespaces here (a seccomp filter or a security module forbids "
                      "them, as containers do): " + CONTAINER_ADVICE)
        return f"no sandbox starts here ({said[:300]}): {advice}"

    @staticmethod
    def ensure_installed(log_dir: Path) -> bool:
        """True when `bwrap` is on PATH, installing the Debian package first where we can (root, apt-get; the
        launcher `python3 -m tito` calls this before the course's venv exists: standard library only)."""
        hint = ("tito: bubblewrap (`bwrap`) is missing: `tito grade` and its tests need it; install it with "
                "`sudo apt-get install bubblewrap` (Debian/Ubuntu)")
        if shutil.which("bwrap"):
            return True
        if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
            print(hint, file=sys.stderr)
            return False
        print("tito: installing bubblewrap (the grading sandbox) with apt-get ...", file=sys.stderr, flush=True)
        Path(log_dir).mkdir(exist_ok=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        with open(Path(log_dir) / "tito-bwrap.log", "w", encoding="utf-8") as log:
            for cmds in ([["apt-get", "install", "-y", "bubblewrap"]],
                         [["apt-get", "update"], ["apt-get", "install", "-y", "bubblewrap"]]):
                if all(subprocess.run(c, stdout=log, stderr=subprocess.STDOUT, env=env).returncode == 0 for c in cmds):
                    break
        if shutil.which("bwrap"):
            return True
        print(hint + f" (apt-get failed: see {Path(log_dir) / 'tito-bwrap.log'})", file=sys.stderr)
        return False
