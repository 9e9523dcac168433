"""A job server kept between `tito module complete` runs, so that a run after one edit does not import torch again.

`tito module complete` runs its notebooks and test files in children of a job server that imported torch & co once
(tito.testing.inline_runner.serve): 4.4 CPU-s of the ~9 s a run takes after one edit (docs/performance.md, "Module
complete"). Here the server outlives the run: it listens on a Unix socket in a folder only this user can open, and
each run is a *session*, a child forked from it with the run's environment and log (passed as a file descriptor),
that reads jobs and writes results over the connection exactly as a fresh server does over its pipes. The server
ends after `TITO_KEEP_SERVER` seconds (default KEEP_SECONDS) without a session; `TITO_KEEP_SERVER=0` keeps none.

A server is only reused by a run that would have started the same one (`server_key`): the same Python, the same tito
files, folder, job count and preload list, the same value of every variable the preloaded libraries read as they
are imported, and unchanged package folders (an install or an upgrade changes their modification time). Only
third-party libraries are preloaded, never the student's package: each job imports that afresh.

    >>> conn = connect(Path("ws"), env, jobs=2, preload=None, log_fd=2)     # doctest: +SKIP
    >>> conn.makefile("rb").readline()                                      # doctest: +SKIP
    b'TITO_JOB_RESULT {"ready": true, "preloaded": [...], "seconds": 0.0, "kept": 4242}\\n'
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

KEEP_SECONDS = 900.0  # a student edits and re-runs within minutes; an idle server holds ~0.5 GB
# variables the preloaded libraries (or Python itself) read as they are imported: a server made under other values
# would not be the one this run starts
IMPORT_TIME_VARS = ("PYTHON", "MPL", "OMP_", "MKL", "OPENBLAS", "KMP_", "GOTO", "TORCH", "PYTORCH", "CUDA", "NUMPY",
                    "SCIPY", "ONNX", "ORT_", "LD_", "LC_", "XDG_", "TITO_")
IMPORT_TIME_NAMES = ("HOME", "PATH", "VIRTUAL_ENV", "LANG", "TMPDIR", "TZ")
MAX_HEADER = 1 << 20
TITO_PKG = Path(__file__).resolve().parents[1]


def keep_seconds(env: dict | None = None) -> float:
    """How long a server is kept after its last run: TITO_KEEP_SERVER (seconds; 0: none), else KEEP_SECONDS.

    >>> keep_seconds({"TITO_KEEP_SERVER": "0"}), keep_seconds({})
    (0.0, 900.0)
    """
    raw = (os.environ if env is None else env).get("TITO_KEEP_SERVER", "").strip()
    if not raw:
        return KEEP_SECONDS
    try:
        secs = float(raw)
    except ValueError:
        raise ValueError(f"TITO_KEEP_SERVER must be a number of seconds (0: keep no server), got {raw!r}") from None
    if not secs >= 0 or secs == float("inf"):
        raise ValueError(f"TITO_KEEP_SERVER must be a finite number of seconds >= 0, got {raw!r}")
    return secs


def server_key(cwd: Path, env: dict, jobs: int, preload: list[str] | None) -> str:
    """What makes two runs' servers the same (module doc), as a short hash."""
    from tito.testing.inline_runner import PRELOAD

    def mtime(path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return -1

    import site
    import sysconfig

    # where libraries are installed (PYTHONPATH's folders are in the key by name: the workspace is one, and each run
    # writes into it)
    folders = list(site.getsitepackages()) + [site.getusersitepackages(), sysconfig.get_paths()["stdlib"]]
    tito_files = sorted((str(p.relative_to(TITO_PKG)), p.stat().st_mtime_ns, p.stat().st_size)
                        for p in TITO_PKG.rglob("*.py"))
    seen = {k: v for k, v in env.items() if k in IMPORT_TIME_NAMES or k.startswith(IMPORT_TIME_VARS)}
    what = {"python": sys.executable, "version": sys.version, "tito": str(TITO_PKG), "tito_files": tito_files,
            "cwd": str(Path(cwd).resolve()), "jobs": jobs, "preload": PRELOAD if preload is None else preload,
            "env": sorted(seen.items()), "folders": [(f, mtime(f)) for f in folders]}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:20]


def private_folder() -> Path:
    """This user's folder for server sockets: $XDG_RUNTIME_DIR/tito, else TMPDIR/tito-UID; made 0700, and refused
    (OSError) when it is someone else's or others may enter it (their socket there would get this user's jobs)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = Path(runtime) / "tito" if runtime and os.path.isdir(runtime) else \
        Path(tempfile.gettempdir()) / f"tito-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        base.mkdir(mode=0o700)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(f"{base} is not a folder that only this user can enter (mode {stat.filemode(st.st_mode)}, "
                      f"owner uid {st.st_uid})")
    return base


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time starts, finds or retires the server of `path` (its .lock file)."""
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _connected(path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(path))
        return s
    except OSError:  # no server (ECONNREFUSED: a dead one's socket file; ENOENT: none yet)
        s.close()
        return None


def connect(cwd: Path, env: dict, jobs: int, preload: list[str] | None, log_fd: int,
            keep: float | None = None) -> socket.socket:
    """A session of the server for these arguments (started, detached, when there is none): the connection, over which
    jobs go and results come as in tito.testing.inline_runner.serve. OSError when no server can be kept here."""
    keep = keep_seconds(env) if keep is None else keep
    if not hasattr(socket, "SO_PEERCRED"):  # macOS: the server could not check that a run is this user's
        raise OSError("this system does not say which user connects to a socket (SO_PEERCRED)")
    path = private_folder() / f"js-{server_key(cwd, env, jobs, preload)}"
    with _locked(path):
        conn = _connected(path)
        if conn is None:
            path.unlink(missing_ok=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(str(path))
                listener.listen(16)
                _start(listener, cwd, env, jobs, preload, keep, path)
            finally:
                listener.close()
            conn = _connected(path)
            if conn is None:
                raise OSError(f"the job server at {path} did not take a connection")
    header = json.dumps({"env": env}).encode()
    socket.send_fds(conn, [len(header).to_bytes(8, "big") + header], [log_fd])
    return conn


def _start(listener: socket.socket, cwd: Path, env: dict, jobs: int, preload: list[str] | None, keep: float,
           path: Path) -> None:
    """The server, detached (a session of its own: this run's end is not its end), listening on `listener`."""
    import subprocess
    import threading

    from tito.testing.inline_runner import PRELOAD

    names = ",".join(PRELOAD if preload is None else preload) or "-"
    argv = [sys.executable, "-m", "tito.testing.kept_server", str(listener.fileno()), str(jobs), names, repr(keep)]
    with open(str(path) + ".log", "w", encoding="utf-8") as log:  # the server's own words; a run's go to its log
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                             pass_fds=(listener.fileno(),), start_new_session=True)
    # this run's child until this run ends: collected if it ends first, so no zombie stays
    threading.Thread(target=p.wait, daemon=True, name="tito-kept-server-reaper").start()


def running(cwd: Path) -> list[int]:
    """The pids of this user's kept servers started for the folder `cwd` (Linux: read from /proc; elsewhere []).
    Their sessions and jobs are forks with the same command line: not counted."""
    parents, want = {}, Path(cwd).resolve()
    proc = Path("/proc")
    for d in proc.iterdir() if proc.is_dir() else ():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if argv[1:3] == [b"-m", b"tito.testing.kept_server"] and Path(os.readlink(d / "cwd")) == want:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone, or another user's
    return sorted(pid for pid, ppid in parents.items() if ppid not in parents)


# ---- the server ---------------------------------------------------------------------------------

def serve(listen_fd: int, jobs: int, preload: list[str], keep: float) -> int:
    """Preload, then fork a session per connection from this user; end when no session has run for `keep` seconds."""
    from tito.testing.inline_runner import preload_for_forks, threads_per_job

    listener = socket.socket(fileno=listen_fd)
    path = Path(listener.getsockname())
    with threads_per_job(jobs) as threads:
        t0 = time.perf_counter()
        loaded = preload_for_forks(preload, "tito kept job server")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
    ready = {"ready": True, "preloaded": loaded, "seconds": round(time.perf_counter() - t0, 3), "kept": os.getpid()}
    sessions: set[int] = set()
    idle_since = time.monotonic()
    listener.settimeout(1.0)
    while True:
        while sessions:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            sessions.discard(pid)
            if not sessions:
                idle_since = time.monotonic()
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if sessions or time.monotonic() - idle_since < keep:
                continue
            conn = _retire(listener, path)
            if conn is None:
                return 0
        pid = _fork_session(conn, listener, jobs, ready)
        if pid is not None:
            sessions.add(pid)


def _retire(listener: socket.socket, path: Path) -> socket.socket | None:
    """Under the lock a run takes to find a server: stop listening (None), unless a run connected meanwhile (its
    connection, to serve)."""
    with _locked(path):
        listener.setblocking(False)
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            path.unlink(missing_ok=True)
            listener.close()
            return None
        listener.settimeout(1.0)
        conn.setblocking(True)
        return conn


def _fork_session(conn: socket.socket, listener: socket.socket, jobs: int, ready: dict) -> int | None:
    """Fork a session for `conn` (only this user's runs: the peer's uid is checked); its pid."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    peer_uid = int.from_bytes(creds[4:8], sys.byteorder)
    if peer_uid != os.getuid():
        conn.close()
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            listener.close()
            code = _session(conn, jobs, ready)
        except BaseException:  # noqa: BLE001 - said in the run's log (fd 2 is the run's by now) or the server's
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    conn.close()
    return pid


def _session(conn: socket.socket, jobs: int, ready: dict) -> int:
    """One run's jobs: its environment and log, then the job loop over the connection."""
    from tito.isolation.process import die_with_parent
    from tito.testing.inline_runner import run_queue

    conn.settimeout(30)  # a run sends its header as it connects
    msg, fds, _, _ = socket.recv_fds(conn, MAX_HEADER + 8, 1)
    size = int.from_bytes(msg[:8], "big") if len(msg) >= 8 else -1
    while 0 <= size <= MAX_HEADER and len(msg) < size + 8:
        more = conn.recv(MAX_HEADER)
        if not more:
            break
        msg += more
    conn.settimeout(None)
    if size < 0 or size > MAX_HEADER or len(fds) != 1 or len(msg) != size + 8:
        for fd in fds:
            os.close(fd)
        return 2
    env = json.loads(msg[8:])["env"]
    os.setsid()
    die_with_parent()  # the server killed: its sessions go, and their jobs with them (each dies with its parent)
    os.dup2(conn.fileno(), 0)
    os.dup2(conn.fileno(), 1)
    os.dup2(fds[0], 2)
    os.close(fds[0])
    conn.close()
    os.environ.clear()
    os.environ.update(env)
    from tito.testing.inline_runner import threads_per_job

    with threads_per_job(jobs):  # the cores divided among the jobs, as a fresh server sets them
        return run_queue(jobs, ready)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: python -m tito.testing.kept_server LISTEN_FD JOBS PRELOAD,... KEEP_SECONDS", file=sys.stderr)
        return 2
    code = serve(int(argv[0]), int(argv[1]), [m for m in argv[2].split(",") if m and m != "-"], float(argv[3]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # torch's teardown would only free what the exit frees


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
