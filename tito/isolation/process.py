"""One way to run a child process, for every launcher in tito (tests, notebooks, nbgrader, the
grading judge and its sandboxes).

`run(cmd, timeout=...)` starts `cmd` in a process group of its own, reads its output (kept up to a
cap, the rest counted and dropped), and when it ends or runs out of time kills the whole group, so
nothing it started outlives it. `start` and `finish` are the two halves, for callers that talk to
the process in between. A child of tito dies with tito (Linux's parent-death signal).

    >>> r = run(["python3", "-c", "print('hi')"], timeout=60)
    >>> (r.returncode, r.stdout.strip(), r.timed_out)
    (0, 'hi', False)
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence


@dataclass
class Finished:
    returncode: int | None   # None: stopped at its time limit
    stdout: str
    stderr: str
    seconds: float
    truncated: bool = False  # more output came than the cap kept

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def tail(self, n: int = 6) -> str:
        return tail(self.output, n)


def tail(text: str, n: int = 6) -> str:
    """The last `n` non-blank lines of `text`."""
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return "\n".join(lines[-n:])


def die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies (PR_SET_PDEATHSIG). Elsewhere (macOS,
    where a student runs `module complete`) there is no such call: the process-group kill still ends it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def start(cmd: Sequence[str | os.PathLike], *, cwd: str | Path | None = None, env: dict | None = None,
          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
          pass_fds: Sequence[int] = (), preexec: Callable[[], None] | None = None) -> subprocess.Popen:
    """Start `cmd` as the leader of a new process group that dies with this process."""
    def setup() -> None:
        die_with_parent()
        if preexec is not None:
            preexec()

    return subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                            start_new_session=True, pass_fds=tuple(pass_fds), preexec_fn=setup)


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait(p: subprocess.Popen, timeout: float | None) -> int | None:
    """Wait up to `timeout` seconds, then kill the process group; the exit code or None (time limit).

    >>> wait(start(["true"]), 10)
    0
    """
    try:
        rc: int | None = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        kill_group(p)
        p.wait()
    return rc


def _read(stream, cap: int, sink: list, over: list) -> None:
    kept = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        if kept < cap:
            sink.append(chunk[:cap - kept])
            kept += len(sink[-1])
        if kept >= cap and len(chunk) and not over:
            over.append(True)


def finish(p: subprocess.Popen, timeout: float | None, cap: int = 8 << 20, t0: float | None = None) -> Finished:
    """Collect the output of `p` (started with pipes) until it ends or `timeout` passes."""
    t0 = time.perf_counter() if t0 is None else t0
    out: list[bytes] = []
    err: list[bytes] = []
    over: list[bool] = []
    readers = [threading.Thread(target=_read, args=(s, cap, sink, over), daemon=True)
               for s, sink in ((p.stdout, out), (p.stderr, err)) if s is not None]
    for r in readers:
        r.start()
    rc = wait(p, timeout)
    for r in readers:
        r.join(timeout=10)
    dec = lambda parts: b"".join(parts).decode("utf-8", "replace")  # noqa: E731
    return Finished(rc, dec(out), dec(err), time.perf_counter() - t0, bool(over))


def run(cmd: Sequence[str | os.PathLike], *, timeout: float | None, cwd: str | Path | None = None,
        env: dict | None = None, cap: int = 8 << 20, pass_fds: Sequence[int] = (),
        preexec: Callable[[], None] | None = None, stdin=subprocess.DEVNULL) -> Finished:
    """Run `cmd` to its end or its time limit (see module doc)."""
    t0 = time.perf_counter()
    p = start(cmd, cwd=cwd, env=env, pass_fds=pass_fds, preexec=preexec, stdin=stdin)
    return finish(p, timeout, cap, t0)

def child_env() -> dict:
    """This environment for a tool tito starts: the venv's bin first on PATH (scripts like nbgrader's
    `alembic`), no IN_TEST, no bytecode files, matplotlib without a display."""
    env = dict(os.environ)
    env.pop("IN_TEST", None)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    env["MPLBACKEND"] = "Agg"
    bindir = str(Path(sys.executable).parent)
    if not env.get("PATH", "").startswith(bindir):
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env
