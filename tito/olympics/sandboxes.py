"""One student's sandboxes, seen from the judge: started, spoken to (data only), watched from /proc, stopped.

A measuring sandbox runs `server.py` with one process per model (the course baseline, the student's model, their
own baseline): each has a socket of its own to the judge and a name (`tito-<role>`) the judge finds it by in
/proc. Every request to a student's sandbox goes through `own_request`, which counts the CPU the requested process
uses as that request's, the wall time, and the student's whole cost against their budget (`student_seconds`):
CPU any process of the sandbox uses outside its own requests is the student's too, and `idle_cpu_check` rejects a
sandbox that works between its requests (it would slow whoever is being timed, its own baseline included).
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito.isolation import limits as limits_mod
from tito.isolation import protocol, sandbox
from tito.isolation.procs import process_cpu_s, tree, tree_cpu_s
from tito.isolation.sanitize import clean_text

# each process of a student's sandbox (address space, processes, CPU, file size, its /tmp); the whole sandbox's
# cgroup (as root): its memory together, its processes, one core of CPU time
LIMITS = dict(memory_mb=6144, processes=64, cpu_seconds=3600, file_mb=8, tmp_mb=64)
GROUP_MEMORY_MB, GROUP_PROCESSES, GROUP_CPUS = 3072, 64, 1.0
STARTUP_S = 600.0  # for the sandbox's own imports, before any student file is read: the judge's time, not theirs
# seconds a sandbox may take to answer (`judge_class(timeouts=...)` overrides them): loading a model, its accuracy
# pass, a timed request, the timed calls' outputs, the weights' hash, a request's inputs, an empty request
TIMEOUTS = {"load": 120.0, "predict": 300.0, "time": 30.0, "outputs": 60.0, "hash": 120.0, "stage": 60.0, "empty": 10.0}
FILE_PART = 32 * 2**20  # bytes of a model file per message
IDLE_CPU = (0.03, 0.02)  # a sandbox may use, outside its own requests, 30 ms + 2% of the wall time between checks


class StudentError(Exception):
    """What went wrong with one student's files or model: their line in the rejected section."""


@dataclass
class Student:
    name: str
    folder: Path
    submission: Path | None = None                         # its submission JSON
    doc: dict | None = None
    files: dict[str, Path] = field(default_factory=dict)   # role -> the file as submitted
    stage: Path | None = None
    key: str = ""                                          # hash of the files: resume by content
    proc: Any = None
    socks: dict[str, socket.socket] = field(default_factory=dict)  # one per model process (converter: "convert")
    log: Path | None = None
    guard: Any = None
    k: int = 0                                             # calls per timed request (both models)
    kinds: dict[str, str] = field(default_factory=dict)    # role -> how its file was loaded
    sized: dict[str, Path] = field(default_factory=dict)   # role -> the file its size is read from
    sent: dict[str, Path] = field(default_factory=dict)    # role -> what the measuring process was sent
    tensors: dict[str, Any] = field(default_factory=dict)  # role -> bounded signatures of what its file holds
    reported_sha: dict[str, str] = field(default_factory=dict)  # role -> weights hash its own code reported
    cpu: int | None = None                                 # the core its measuring processes are timed on
    pids: dict[str, int] = field(default_factory=dict)     # model process (role) -> its pid, seen from here
    cpu_mark: float = 0.0                                  # its sandbox's CPU seconds at the last idle check
    cpu_busy: float = 0.0                                  # CPU seconds inside its own requests since then
    cpu_start: float = 0.0                                 # its sandbox's CPU seconds when its imports were done
    cpu_extra: float = 0.0                                 # CPU seconds of its converting sandbox
    wall_s: float = 0.0                                    # seconds the judge waited on its requests
    budget_s: float = float("inf")                         # the most CPU seconds its sandboxes may use


def worker_of(role: str) -> str:
    "The model process a role's requests go to (`fresh:optimized`, a second instance, lives beside `optimized`)."
    return role.split(":")[-1]


def start(st: Student, work: Path, data: dict, box: sandbox.Backend, roles: tuple[str, ...] = (),
          converting: bool = False) -> None:
    """Start the student's sandboxed server (in `box`): one process per role in `roles` (measuring), or the
    converting one (which may unpickle). The sandbox dies with the thread that started it: start the long-lived one
    from the main thread, a converter from the thread that also stops it."""
    pairs = {r: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for r in (("convert",) if converting else roles)}
    # the measuring sandbox sees no model file: the judge sends the bytes its size counts (`send_file`), so a model
    # cannot read weights it does not hold while it runs; only the converter, which runs no timing, reads the
    # student's files where they are staged
    mounts = {"lib": work / "lib", "tinytorch": data["pkg"], **({"files": st.stage} if converting else {})}
    env = {"PYTHONPATH": "{lib}" + os.pathsep + "{tinytorch}/..", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    args = (["--trace", str(pairs["convert"][1].fileno())] if converting
            else [f"{r}={pairs[r][1].fileno()}" for r in roles])
    spec = sandbox.SandboxSpec(["{python}", "-s", "-P", "{lib}/server.py", *args], mounts, env,
                               limits=data.get("limits") or sandbox.Limits(**LIMITS))  # as fitted to this process's
    st.log = st.stage.parent / f"{st.stage.name}{'-trace' if converting else ''}.log"
    name = f"tito-olympics-{os.getpid()}-{st.stage.name}{'-trace' if converting else ''}"
    st.guard = limits_mod.Guard(name, GROUP_MEMORY_MB, GROUP_PROCESSES, cpus=GROUP_CPUS) if box.isolated else None
    # every measuring sandbox on the same core (the last this process may use; its processes move there once
    # their imports are done, see wait_ready): students are timed on one core, whichever the scheduler would
    # have picked (the two cores here timed one model 1.6x apart)
    st.cpu = None if converting else max(os.sched_getaffinity(0))
    with open(st.log, "ab") as log:
        st.proc = sandbox.start(spec, box, pass_fds=tuple(p[1].fileno() for p in pairs.values()), stdout=log,
                                stderr=log, cgroups=tuple(st.guard.groups) if st.guard else ())
    for r, (judge_end, server_end) in pairs.items():
        server_end.close()
        st.socks[r] = judge_end


def wait_ready(st: Student) -> None:
    """Wait until the sandbox's processes have imported torch and the course package, move each to its core
    (`st.cpu`) and find their pids; the student's CPU budget starts here. Every sandbox starts at once, so this takes
    a while in a big class (12 of them pinned to one core from the start took 29.6 s beside a CPU hog, past the
    20 s a test gave each load); a student's time limits start after it."""
    try:
        for role in st.socks:
            call(st, role, {"op": "ready", "cpu": st.cpu}, STARTUP_S, "starting the sandbox", count=False)
    except StudentError as e:
        raise StudentError(f"{e} (before reading any of the student's files: the machine may be overloaded; "
                           f"run the judge again with --resume)") from None
    if st.proc is not None:
        names = {f"tito-{r}"[:15]: r for r in st.socks}
        for pid, comm in tree(st.proc.pid, "comm"):
            if comm.strip() in names:
                st.pids[names[comm.strip()]] = pid
        st.cpu_start = st.cpu_mark = tree_cpu_s(st.proc.pid)


def stop(st: Student) -> None:
    for sock in st.socks.values():
        try:
            sock.settimeout(1)
            protocol.send(sock, {"op": "bye"})
        except OSError:
            pass
        sock.close()
    st.socks = {}
    if st.proc is not None:
        from tito.isolation import process

        process.kill_group(st.proc)
        st.proc.wait()
        st.proc = None
    if st.guard is not None:
        st.guard.close()
        st.guard = None


def _wait_for_end(st: Student, seconds: float = 1.0) -> None:
    import subprocess

    try:
        if st.proc is not None:
            st.proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:  # the channel broke but the sandbox lives on: stop() ends it
        pass


def _log_tail(st: Student) -> str:
    try:
        text = st.log.read_bytes()[-2000:].decode("utf-8", "replace") if st.log else ""
    except OSError:
        return ""
    lines = [ln for ln in clean_text(text).splitlines() if ln.strip()]
    return f" (its last output: {lines[-1][:300]})" if lines else ""


def call(st: Student, role: str, msg: dict, timeout: float, doing: str, payload: bytes | memoryview | None = None,
         count: bool = True) -> dict:
    """One request to the process of `role` (and `payload`'s raw bytes after it); StudentError (the student's
    fault) on any failure. `count`: the request's CPU and wall time are the student's (`own_request`)."""
    sock = st.socks.get(worker_of(role))
    if sock is None:
        raise StudentError(f"{doing}: the sandbox is not running")

    def request() -> dict:
        try:
            sock.settimeout(timeout)
            protocol.send(sock, msg if payload is None else {**msg, "nbytes": len(payload)})
            if payload is not None:
                sock.sendall(payload)
            reply = protocol.recv(sock)
        except (socket.timeout, TimeoutError):
            raise StudentError(f"{doing}: no answer within {timeout:g} s (the model hangs or is far too slow)") from None
        except (EOFError, ConnectionError, OSError):
            _wait_for_end(st)  # its last words reach the log before it is read
            raise StudentError(f"{doing}: the sandbox ended (the file's code exited, crashed or hit a limit)"
                               f"{_log_tail(st)}") from None
        except protocol.ProtocolError as e:
            raise StudentError(f"{doing}: a malformed answer ({e})") from None
        if not reply.get("ok"):
            raise StudentError(f"{doing}: {clean_text(str(reply.get('error')))[:500]}")
        return reply

    return own_request(st, worker_of(role), request) if count else request()


def send_file(st: Student, role: str, path: Path, timeout: float) -> None:
    """Send a model file's bytes (only what its size counts: the caller sends `counted_archive`'s copy) to the
    process of `role`, in parts, read from disk a part at a time."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        for i in range(0, max(size, 1), FILE_PART):
            part = f.read(FILE_PART)
            call(st, role, {"op": "file", "role": role}, timeout, f"sending the {role.replace('_', ' ')} model file", part)


def stage_images(st: Student, role: str, images, timeout: float = TIMEOUTS["stage"]) -> None:
    """Send the next request's inputs: each becomes a tensor of its own in the model's process (float32)."""
    import numpy as np

    arr = np.ascontiguousarray(images, dtype=np.float32)
    call(st, role, {"op": "stage", "count": int(arr.shape[0]), "sample": list(arr.shape[1:])}, timeout,
         "sending the inputs", memoryview(arr).cast("B") if arr.size else b"")


def cost(st: Student) -> dict[str, float]:
    "The student's cost so far: CPU seconds of their sandboxes since their imports, seconds the judge waited on them."
    cpu = (tree_cpu_s(st.proc.pid) - st.cpu_start if st.proc is not None else 0.0) + st.cpu_extra
    return {"cpu_s": round(max(cpu, 0.0), 3), "wall_s": round(st.wall_s, 3)}


def own_request(st: Student, worker: str, fn):
    """Run `fn` (a request to the process `worker` of `st`'s sandbox), counting that process's CPU meanwhile as the
    request's and the wall time as the student's; a student past their CPU budget is stopped here."""
    pid = st.pids.get(worker)
    before, t0 = process_cpu_s(pid), time.perf_counter()
    try:
        return fn()
    finally:
        st.wall_s += time.perf_counter() - t0
        if pid is not None:
            st.cpu_busy += process_cpu_s(pid) - before
        if st.proc is not None and st.budget_s < float("inf"):
            spent = cost(st)["cpu_s"]
            if spent > st.budget_s:
                raise StudentError(f"its sandbox used {spent:.1f} s of CPU, over the {st.budget_s:g} s budget a student "
                                   "has (settings.ini olympics_student_seconds): its model is far slower in its timed "
                                   "calls than when it was calibrated, or works between them")


def idle_cpu_check(st: Student, wall_s: float) -> str | None:
    """Why `st`'s sandbox is rejected for working outside its own requests since the last check (None: quiet);
    starts the next check. A process's CPU while others are timed would slow them (a TorchScript fork spinning
    on the measuring core doubled their latencies; the student's own baseline shares that core too)."""
    now = tree_cpu_s(st.proc.pid) if st.proc is not None else st.cpu_mark
    idle, st.cpu_mark, st.cpu_busy = now - st.cpu_mark - st.cpu_busy, now, 0.0
    limit = IDLE_CPU[0] + IDLE_CPU[1] * wall_s
    if idle > limit:
        return (f"its sandbox used {idle:.2f} s of CPU outside its own requests in {wall_s:.1f} s (at most "
                f"{limit:.2f} s allowed): work left running between requests (threads, forked tasks) would slow "
                "the other students' timed calls")
    return None
