"""Notebook kernels forked from a server that imported torch & co once (`tito test`'s notebooks, the lesson's tests).

A kernel nbclient starts imports torch, pandas and scipy.stats itself: 4.2 CPU-s for a kernel that imports them,
1.7 for one that runs `x = 1` (docs/performance.md, "The test command"). Here a kernelspec's command is a small
proxy (`python -P -c "...main(sys.argv[1:])" --proxy SOCKET CONNECTION_FILE`) that asks the server, over a Unix socket
in a private folder, for a kernel: the server forks a child that runs ipykernel with that connection file, in the
proxy's folder, environment and standard streams (passed as file descriptors). The proxy lives as long as the
kernel and is what jupyter_client signals: it hands SIGINT (an interrupt) and SIGTERM to the kernel, and when the
proxy dies (SIGKILL included: the server sees its socket close) the server kills the kernel's process group. Only
third-party libraries are preloaded, never the code a notebook runs.

    >>> with KernelServer() as server:                                  # doctest: +SKIP
    ...     NotebookClient(nb, resources=..., **server.client_args()).execute()
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from tito.testing import wire

KERNEL_NAME = "tito-forked-python3"


def default_preload() -> list[str]:
    """What the server imports: the job server's libraries (tito.testing.inline_runner.PRELOAD) but matplotlib, which
    is left to the kernel (ipykernel picks its inline backend as it starts; a matplotlib imported before would not
    see it), and pytest; then ipykernel."""
    from tito.testing.inline_runner import PRELOAD

    return [m for m in PRELOAD if m.split(".")[0] not in ("matplotlib", "pytest")] + ["ipykernel.kernelapp"]


# `-m` put the server's folder first on sys.path; a kernel's first entry is its own folder (ipykernel adds it as it
# starts), so each kernel drops the server's
_SERVER_DIR: str | None = None
_TMP: dict[int, str] = {}  # kernel pid -> its temporary folder


# ---- the owner's side ----------------------------------------------------------------------

class KernelServer:
    """Start the server (`with KernelServer() as s:`); `s.spec_dir` holds its kernelspec, `s.client_args()` what
    NotebookClient needs to use it. The server ends with this object (or its owner's process)."""

    def __init__(self, preload: list[str] | None = None, env: dict | None = None):
        from tito.isolation import process

        self.dir = Path(tempfile.mkdtemp(prefix="tito-kernels-"))  # mode 0700: only this user reaches the socket
        self.socket = self.dir / "s"
        self.spec_dir = self.dir / "kernels"
        spec = self.spec_dir / KERNEL_NAME
        spec.mkdir(parents=True)
        # the proxy starts in the notebook's folder: -P keeps that folder off its path (a tito.py there would be
        # imported instead), and tito is found where this one is
        here = str(Path(__file__).resolve().parents[2])
        proxy_code = (f"import sys; sys.path.insert(0, {here!r}); from tito.testing.kernels import main; "
                      "sys.exit(main(sys.argv[1:]))")
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-P", "-c", proxy_code, "--proxy", str(self.socket), "{connection_file}"],
            "display_name": "Python 3 (forked by tito)", "language": "python", "interrupt_mode": "signal"}))
        self.log = open(self.dir / "server.log", "w+", encoding="utf-8")  # noqa: SIM115 - closed in close()
        cmd = [sys.executable, "-m", "tito.testing.kernels", "--serve", str(self.socket),
               ",".join(default_preload() if preload is None else preload) or "-"]
        self.p = process.start(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        ready = self.p.stdout.readline()
        if not ready.startswith(b"ready"):
            self.close()
            raise RuntimeError("the kernel server did not start: " + self._log_tail())

    def _log_tail(self) -> str:
        self.log.flush()
        return (self.dir / "server.log").read_text(encoding="utf-8", errors="replace")[-2000:]

    def client_args(self) -> dict:
        """NotebookClient's arguments that make this server fork its kernel: `NotebookClient(nb, **s.client_args())`."""
        return client_args(str(self.spec_dir))

    def close(self) -> None:
        from tito.isolation import process

        try:
            if self.p.stdin and not self.p.stdin.closed:
                self.p.stdin.close()  # the server ends, killing any kernel still running
        except BrokenPipeError:
            pass
        process.wait(self.p, 30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> KernelServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_CLASSES: dict[str, type] = {}


def client_args(spec_dir: str) -> dict:
    """NotebookClient's `kernel_name` and `kernel_manager_class` for the server of `spec_dir` (KernelServer.spec_dir),
    usable in any process: nbclient owns the manager, so it shuts the kernel down as it would its own."""
    if spec_dir not in _CLASSES:
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager
        from traitlets import default

        class ForkedKernelManager(AsyncKernelManager):
            @default("kernel_spec_manager")
            def _kernel_spec_manager_default(self) -> KernelSpecManager:
                return KernelSpecManager(kernel_dirs=[spec_dir])

            @property
            def ipykernel(self) -> bool:  # so nbclient passes ipykernel's arguments (history in memory)
                return True

        _CLASSES[spec_dir] = ForkedKernelManager
    return {"kernel_name": KERNEL_NAME, "kernel_manager_class": _CLASSES[spec_dir]}


# ---- the proxy: what jupyter_client starts as "the kernel" -----------------------------------

def proxy(sock_path: str, connection_file: str, args: list[str]) -> int:
    """Ask the server for a kernel with this process's folder, environment and streams; pass SIGINT and SIGTERM
    on; exit with the kernel's exit code."""
    from tito.isolation.process import die_with_parent

    die_with_parent()  # nbclient gone: this proxy goes, and with it (its socket closing) the kernel
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    wire.send(s, {"connection_file": os.path.abspath(connection_file), "args": args, "cwd": os.getcwd(),
                  "env": dict(os.environ)}, [0, 1, 2])
    lines = s.makefile("rb")
    pid = int(lines.readline())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: _signal(pid, signum))
    said = lines.readline().strip()  # the kernel's exit code, when it ends
    return int(said) if said.lstrip(b"-").isdigit() else 1


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


# ---- the server -------------------------------------------------------------------------------

def serve(sock_path: str, preload: list[str]) -> int:
    """Import `preload`, listen on `sock_path`, fork a kernel per request; end (killing every kernel) when stdin
    closes."""
    import selectors

    from tito.isolation.process import die_with_parent

    die_with_parent()
    global _SERVER_DIR
    _SERVER_DIR = sys.path[0] if sys.path and sys.path[0] == os.getcwd() else None
    from tito.testing.inline_runner import preload_for_forks

    preload_for_forks(preload, "tito kernel server")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    kernels: dict[int, socket.socket] = {}  # kernel pid -> its proxy's connection
    try:
        while True:
            for key, _ in sel.select(timeout=0.05):
                if key.data == "stdin":
                    if not os.read(sys.stdin.fileno(), 4096):
                        return 0
                elif key.data == "accept":
                    conn, _ = listener.accept()
                    pid = _start_kernel(conn, listener, list(kernels.values()))
                    if pid is None:
                        conn.close()
                        continue
                    kernels[pid] = conn
                    sel.register(conn, selectors.EVENT_READ, pid)
                    conn.sendall(f"{pid}\n".encode())
                else:  # a proxy's socket: readable only when it closed (the proxy is gone)
                    sel.unregister(key.fileobj)
                    _kill(key.data)
            while kernels:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                if pid in _TMP:
                    shutil.rmtree(_TMP.pop(pid), ignore_errors=True)
                conn = kernels.pop(pid, None)
                if conn is not None:
                    if conn in (k.fileobj for k in sel.get_map().values()):
                        sel.unregister(conn)
                    try:
                        conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                    except OSError:
                        pass
                    conn.close()
    finally:
        for pid in kernels:
            _kill(pid)
        for pid in list(_TMP):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            shutil.rmtree(_TMP.pop(pid), ignore_errors=True)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _start_kernel(conn: socket.socket, listener: socket.socket, others: list[socket.socket]) -> int | None:
    """Read one request (its streams come as file descriptors) and fork its kernel; the kernel's pid."""
    got = wire.receive(conn, 3)  # a proxy sends its request at once; the server waits 30 s at most
    if got is None:
        return None
    req, fds = got
    # the kernel's temporary files in a folder of its own, removed when it ends (serve): none left in /tmp
    from tito.testing.inline_runner import lasting_caches

    req["env"].update(lasting_caches(req["env"]))  # computed here, with the caller's temporary folder
    req["env"]["TMPDIR"] = tempfile.mkdtemp(prefix="tito-kernel-")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _kernel(req, fds, [listener, conn, *others])
    _TMP[pid] = req["env"]["TMPDIR"]
    for fd in fds:
        os.close(fd)
    return pid


def _kernel(req: dict, fds: list[int], close: list[socket.socket]) -> None:
    """In the forked child: the proxy's streams, folder and environment, then ipykernel; never returns."""
    code = 1
    try:
        os.setsid()  # a group of its own: the server's kill reaches whatever the kernel started
        from tito.isolation.process import die_with_parent

        die_with_parent()  # and the server's end is the kernel's
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for s in close:
            s.close()
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        os.dup2(fds[2], 2)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(req["cwd"])
        if _SERVER_DIR is not None and sys.path[:1] == [_SERVER_DIR]:
            sys.path.pop(0)
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again
        # the kernel's parent is this server, not the process that asked: ipykernel polls the parent it is given
        # and stops when another is its parent (the proxy holds the kernel's lifetime; the server's end ends it too)
        os.environ["JPY_PARENT_PID"] = str(os.getppid())
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if "torch" in sys.modules and threads.isdigit() and int(threads) > 0:
            sys.modules["torch"].set_num_threads(int(threads))
        # (given as an argument too: the preloaded ipykernel read JPY_PARENT_PID as it was imported, in the server)
        argv = ["-f", req["connection_file"], f"--IPKernelApp.parent_handle={os.getppid()}", *req["args"]]
        sys.argv = [sys.executable, *argv]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance(argv=argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    except BaseException:  # noqa: BLE001 - said on the proxy's stderr (nbclient's kernel log)
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--proxy"] and len(argv) >= 3:  # jupyter_client appends the kernel's extra arguments
        return proxy(argv[1], argv[2], argv[3:])
    if argv[:1] == ["--serve"] and len(argv) == 3:
        code = serve(argv[1], [m for m in argv[2].split(",") if m and m != "-"])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # every kernel is ended: torch's teardown would only free what the exit frees
    print("usage: python -m tito.testing.kernels --serve SOCKET PRELOAD,... | --proxy SOCKET CONNECTION_FILE",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
