"""Linux namespaces, mounts and capabilities through libc (ctypes): how one process inside a sandbox is kept
apart from the others (tito.grading.host's notebook processes), and the mounts tito makes as root.

Standard library only: this file runs inside the grading sandbox (the host imports it there).

- `isolate` (root, CAP_SYS_ADMIN): mount, network, IPC and (where asked) PID namespaces of the process's own,
  a fresh private temporary folder (PRIVATE_TMP) and /dev/shm, some folders covered (`hide`);
- `isolate_unprivileged` (a normal user's sandbox): the same in a user namespace of its own, the shared /tmp
  read-only, a PID namespace of its own (`own_pid_namespace`) where asked, then every capability dropped;
- `become_subreaper`: what the process starts stays below it, double-forked or not;
- `mount_tmpfs`, `unmount`: a size-limited folder (the grading judge's scratch folder, as root).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWPID = \
    0x00020000, 0x08000000, 0x40000000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
_CAP_VERSION_3 = 0x20080522
PRIVATE_TMP = "/tito-tmp"  # where a grading process mounts its private temporary folder (the sandbox's /tmp is nobody's)


def libc():
    return ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    """OSError naming `what` and libc's errno when `rc` is not 0."""
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def become_subreaper() -> None:
    """Make this process the one its orphaned descendants are handed to (Linux), so a process that
    double-forks and calls `setsid` still counts among this process's descendants."""
    libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _hide(c, hide: list[str]) -> None:
    """An empty read-only folder over each of `hide` (a folder this process must not see)."""
    for path in hide:
        if isinstance(path, str) and path.startswith("/") and os.path.isdir(path):
            check(c.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          b"size=4k,mode=0555"), f"hide {path}")


def isolate(tmp_mb: int, hide: list[str] = (), fd: int | None = None) -> None:
    """Before dropping to the notebook's uid (as root, with CAP_SYS_ADMIN): a mount, network and IPC
    namespace of this process's own, with a fresh temporary folder (PRIVATE_TMP, its TMPDIR) and
    /dev/shm, so the processes of two notebooks share no writable folder, socket or shared memory
    (no notebook can hand another the reference of the module graded there). /tmp itself is left
    alone: folders bound under it (a virtual environment in /tmp) stay visible. The folders `hide`
    get an empty read-only folder over them (the feedback run: the tests' scratch folder). With `fd` (the
    role's socket) it also gets a PID namespace of its own (`own_pid_namespace`) with a fresh /proc: it sees
    no other process of the sandbox (a test process's /proc/PID/cmdline, readable by any uid, would hand the
    hidden inputs to the feedback process: red team 49), and whatever it starts (`clone(CLONE_PARENT)`, double
    forks) ends with it. The caller then drops to the notebook's uid."""
    c = libc()
    check(c.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | (CLONE_NEWPID if fd is not None else 0)), "unshare")
    check(c.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    for target, size in ((PRIVATE_TMP.encode(), tmp_mb), (b"/dev/shm", 64)):
        check(c.mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV, f"size={size}m,mode=1777".encode()),
              f"mount tmpfs {target.decode()}")
    _hide(c, list(hide))
    os.environ["TMPDIR"] = PRIVATE_TMP
    if fd is not None:
        own_pid_namespace(fd)


def drop_capabilities() -> None:
    """No capability left, none to regain (a user namespace's first process has them all)."""
    c = libc()
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for caps 0-31 and 32-63: none
    if c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or c.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"dropping capabilities: {os.strerror(err)}")


def isolate_unprivileged(tmp_mb: int, hide: list[str] = (), fd: int | None = None) -> None:
    """`isolate` for a sandbox run by a normal user (no CAP_SYS_ADMIN, one uid for everything): a user
    namespace of this process's own (the same uid) with mount, network and IPC namespaces; the shared
    /tmp read-only, a fresh /dev/shm as its TMPDIR, `hide` covered; then every capability dropped, so
    the student's code can neither undo a mount nor (its mounts locked in any namespace it makes)
    reveal what they cover. Two processes of one notebook then share no writable folder, socket or
    shared memory. With `fd` (the role's socket) it also gets a PID namespace of its own
    (`own_pid_namespace`): it sees no other notebook's process, so it cannot reach that notebook's
    package through /proc/PID/root, and everything it starts ends with it."""
    c = libc()
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | (CLONE_NEWPID if fd is not None else 0)
    check(c.unshare(flags), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
            f.write(text)
    check(c.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    if os.path.ismount("/tmp"):  # what is bound below it (a virtual environment) stays as it is
        check(c.mount(None, b"/tmp", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
              "mount -o remount,ro /tmp")
    check(c.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_mb}m,mode=1777".encode()),
          "mount tmpfs /dev/shm")
    _hide(c, list(hide))
    if fd is not None:
        own_pid_namespace(fd)
    drop_capabilities()
    os.environ["TMPDIR"] = "/dev/shm"


def _exit_as(pid: int) -> None:
    """Reap every child (orphans included) until `pid` ends, then end the same way (a signal's end
    as exit status 128 + its number: pid 1 of a namespace cannot kill itself with it)."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if done == pid:
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def own_pid_namespace(fd: int) -> None:
    """After unshare(CLONE_NEWPID) (and CLONE_NEWNS): this process stays in the zygote's namespace and ends as the new
    namespace's pid 1 ends (with the signal that ended the role, for the zygote's `describe_status`); pid 1
    mounts the namespace's /proc and reaps; the role runs below it, its own process group, and returns here."""
    first = os.fork()
    if first:
        os.close(fd)
        while True:
            try:
                _, status = os.waitpid(first, 0)
                break
            except ChildProcessError:
                os._exit(1)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if code > 128:
            signal.signal(code - 128, signal.SIG_DFL)
            os.kill(os.getpid(), code - 128)
        os._exit(code)
    check(libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    role = os.fork()
    if role:
        os.close(fd)
        drop_capabilities()
        _exit_as(role)
    os.setpgid(0, 0)
    become_subreaper()


def mount_tmpfs(path: Path, size_mb: int) -> bool:
    """Mount a tmpfs of `size_mb` MiB on `path` (as root); False where that is not possible."""
    if os.geteuid() != 0:
        return False
    return libc().mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                        f"size={size_mb}m,mode=0755".encode()) == 0


def unmount(path: Path) -> None:
    libc().umount2(str(path).encode(), MNT_DETACH)
    shutil.rmtree(path, ignore_errors=True)
