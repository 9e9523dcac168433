"""Run a module source's inline tests and report them as JSON, in children forked from a job server.

    python -m tito.testing.inline_runner --serve [JOBS [PRELOAD,...]]   (driven by tito.testing.job_server)

`run_file(FILE)` executes FILE's code with `__name__ = "__tito_inline__"` (so `if __name__ == "__main__":`
blocks do not fire), then calls, in definition order, every top-level function named
`test_unit_*`, then `test_module` if defined. Each test's own output goes to the job's log. Its summary:

    {"file": str, "ok": bool, "error": str|null,
     "tests": [{"name": str, "status": "passed"|"failed"|"not_implemented",
                "seconds": float, "error": str|null, "origin": str|null}],
     "passed": int, "failed": int, "seconds": float}

`error` on the file is set when the file fails to load ("SyntaxError: ...") or holds no
tests ("no tests found"). A test whose failure is a NotImplementedError reports
"not yet implemented: <qualname>" (co_qualname of the innermost frame that raised it);
others report "<ExceptionType>: <message>". `origin` is the file of that innermost frame (a
stub in another module's file is that module's task, not this one's).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    import ast



def _origin(exc: BaseException) -> str | None:
    """The file of the innermost frame `exc` passed through (where a stub raised, say)."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last.tb_frame.f_code.co_filename if last is not None else None


def _describe(exc: BaseException) -> tuple[str, str]:
    """(status, message) for a test that raised `exc`."""
    if isinstance(exc, NotImplementedError):
        tb = exc.__traceback__
        last = None
        while tb is not None:
            last = tb
            tb = tb.tb_next
        qual = getattr(last.tb_frame.f_code, "co_qualname", last.tb_frame.f_code.co_name) if last else "?"
        return "not_implemented", f"not yet implemented: {qual}"
    msg = str(exc).strip()
    where = ""
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        fr = tb[-1]
        where = f" (at {Path(fr.filename).name}:{fr.lineno} in {fr.name})"
    return "failed", f"{type(exc).__name__}: {msg}{where}" if msg else f"{type(exc).__name__}{where}"


def run_file(path: str | os.PathLike) -> dict:
    path = Path(path).resolve()
    res = {"file": str(path), "ok": False, "error": None, "tests": [], "passed": 0, "failed": 0,
           "seconds": 0.0}
    t0 = time.perf_counter()
    mod = types.ModuleType("__tito_inline__")
    mod.__file__ = str(path)
    ns = mod.__dict__
    ns["__name__"] = "__tito_inline__"
    sys.modules["__tito_inline__"] = mod  # so dataclasses/pickle can find the module
    old_path = list(sys.path)
    sys.path.insert(0, str(path.parent))
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        try:
            code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
            exec(code, ns)
        except BaseException as e:  # noqa: BLE001 - report every load failure
            if isinstance(e, KeyboardInterrupt):
                raise
            traceback.print_exc(file=sys.stderr)
            status, msg = _describe(e)
            res["error"] = f"failed to load: {msg}"
            res["seconds"] = time.perf_counter() - t0
            return res
        names = [n for n, v in ns.items() if n.startswith("test_unit_") and callable(v)
                 and getattr(v, "__module__", None) == "__tito_inline__"]
        if callable(ns.get("test_module")):
            names.append("test_module")
        if not names:
            res["error"] = "no tests found (no test_unit_* functions and no test_module)"
        for name in names:
            t1 = time.perf_counter()
            entry = {"name": name, "status": "passed", "seconds": 0.0, "error": None, "origin": None}
            try:
                ns[name]()
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, KeyboardInterrupt):
                    raise
                traceback.print_exc(file=sys.stderr)
                entry["status"], entry["error"] = _describe(e)
                entry["origin"] = _origin(e)
            entry["seconds"] = round(time.perf_counter() - t1, 4)
            res["tests"].append(entry)
        res["passed"] = sum(t["status"] == "passed" for t in res["tests"])
        res["failed"] = len(res["tests"]) - res["passed"]
        res["ok"] = res["error"] is None and res["failed"] == 0
    finally:
        os.chdir(cwd)
        sys.path[:] = old_path
        res["seconds"] = round(time.perf_counter() - t0, 4)
    return res


# ---- a job server: import the heavy libraries once, then one fresh process per job ----------

JOB_MARKER = "TITO_JOB_RESULT "
# The last five are what a job's first static int8 quantization (torch.ao's prepare_fx) imports lazily: torch's
# compiler stack (FX records where each node came from through it) and networkx, 1.5 s of CPU in every job that
# quantizes (most of Module 19's notebooks and test files), 1.4 s once here (issue 44: 1.67 -> 0.20 s a job)
PRELOAD = ["numpy", "pandas", "scipy.stats", "torch", "torch.ao.quantization", "matplotlib.pyplot",
           "sklearn.datasets", "pytest", "onnx", "onnxruntime",
           "torch._dynamo", "torch._functorch.aot_autograd", "torch._inductor.codecache", "torch._export", "networkx"]


def run_job(job: dict) -> dict:
    """Run one job in this process and return its result (the server calls it in a fresh child).

    `{"kind": "inline", "file": PATH}`: run_file's summary. `{"kind": "pytest", "args": [...],
    "cwd": DIR}`: `{"exit": pytest's exit code}` (the caller reads the JUnit XML it asked for).
    """
    if job["kind"] == "inline":
        # recorded from before the package's first import (the check below imports it), as a test file's run is
        stop = record_executed(job["record"], job.get("marked")) if job.get("record") else None
        root = job.get("package_root")
        if root:  # the notebook must import the student's package, not whichever one is installed
            import tinytorch

            got = Path(tinytorch.__file__).resolve()
            if not got.is_relative_to(Path(root).resolve()):
                return {"file": job["file"], "ok": False, "tests": [], "passed": 0, "failed": 0, "seconds": 0.0,
                        "error": f"tinytorch was imported from {got}, not from your package {root}"}
        res = run_file(job["file"])
        return {**res, **stop()} if stop else res
    if job["kind"] == "pytest":
        import pytest

        os.chdir(job["cwd"])
        # only the plugins the arguments name: importing every installed one (xdist, anyio, ...) and rewriting
        # their asserts cost each test file 0.3 s
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if not job.get("record"):
            return {"exit": int(pytest.main(list(job["args"])))}
        stop = record_executed(job["record"], job.get("marked"))
        rc = int(pytest.main(list(job["args"])))
        return {"exit": rc, **stop()}
    raise ValueError(f"job kind must be 'inline' or 'pytest', got {job['kind']!r}")


# programs that report on the machine or compile: they cannot run the package's Python code, so a
# test that starts one (platform.processor() runs uname) keeps a complete record of what it ran
SAFE_PROGRAMS = {"uname", "lscpu", "nproc", "getconf", "nvidia-smi", "rocm-smi", "fc-list", "ldconfig", "sysctl",
                 "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "openssl"}


# a Python child whose whole program is one of these (the CPU hog of the tests that must hold on a busy
# machine) imports nothing, so it cannot run the package's code either
SAFE_PYTHON_PROGRAMS = {"while True: pass"}

# programs that run the program they are given (`setsid -f python3 -c ...` starts a process that is not our
# child): judged by that program
WRAPPERS = {"setsid", "nohup"}


def _safe_python_program(code: Any) -> bool:
    """One of SAFE_PYTHON_PROGRAMS, or torch.compile's probe of the CPU's vector instructions (a Python that only
    dlopens a library inductor built: torch's own template, with nothing but a path filled in)."""
    if code in SAFE_PYTHON_PROGRAMS:
        return True
    isa = sys.modules.get("torch._inductor.cpu_vec_isa")  # loaded where the probe can run: the template is there
    template = getattr(getattr(isa, "VecISA", None), "_avx_py_load", None)
    if not (isinstance(code, str) and isinstance(template, str) and template.count("__lib_path__") == 1):
        return False
    head, tail = template.split("__lib_path__")
    return (code.startswith(head) and code.endswith(tail) and len(code) >= len(head) + len(tail)
            and re.fullmatch(r'[^"\\\n]*', code[len(head):len(code) - len(tail)]) is not None)


def spawns_code(event: str, args: tuple) -> str | None:
    """The program an audit event starts, where it might run Python: None for a SAFE_PROGRAMS one, or a Python
    whose `-c` program `_safe_python_program` accepts, either of them run directly or through WRAPPERS."""
    if event in ("os.fork", "os.forkpty", "os.system"):
        return event
    argv = {"subprocess.Popen": lambda: args[0] or args[1], "os.posix_spawn": lambda: args[0],
            "os.exec": lambda: args[0], "os.spawn": lambda: args[1]}.get(event)
    if argv is None:
        return None
    prog = argv()
    prog = prog if isinstance(prog, (str, bytes, os.PathLike)) else (list(prog) or ["?"])[0]
    name = os.path.basename(os.fsdecode(prog)).split()[0] if prog else "?"
    at = 2 if event == "os.spawn" else 1  # where the event's arguments hold the whole argv
    full = list(args[at]) if len(args) > at and isinstance(args[at], (list, tuple)) else []
    while name in WRAPPERS and full:
        full = full[1:]
        while full and os.fsdecode(full[0]).startswith("-"):  # the wrapper's own options
            full = full[1:]
        name = os.path.basename(os.fsdecode(full[0])).split()[0] if full else "?"
    if name.startswith("python") and len(full) == 3 and full[1] == "-c" and _safe_python_program(full[2]):
        return None
    return None if name in SAFE_PROGRAMS else f"{event}: {name}"


class _Mark:
    """AST pass: `_tito_ran_.add("qualname")` as the first statement (after the docstring) of every
    function, on the line of the statement it precedes (tracebacks keep their line numbers)."""

    @staticmethod
    def apply(tree: "ast.Module") -> "ast.Module":
        import ast

        def walk(body: list, prefix: list[str]) -> None:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = ".".join([*prefix, node.name])
                    walk(node.body, [*prefix, node.name, "<locals>"])
                    first = node.body[0]
                    doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                        and isinstance(first.value.value, str)
                    at = node.body[1] if doc and len(node.body) > 1 else first
                    mark = ast.parse(f"_tito_ran_.add({name!r})").body[0]
                    for n in ast.walk(mark):
                        ast.copy_location(n, at)
                        n.end_lineno, n.end_col_offset = at.lineno, at.col_offset
                    node.body.insert(1 if doc else 0, mark)
                elif isinstance(node, ast.ClassDef):
                    walk(node.body, [*prefix, node.name])
                else:  # a def under if/try/with/match/...: the same qualname as tito.workspace.complete._Cut gives it
                    # only statement lists can hold a def (a lambda is an expression, never a FunctionDef): not
                    # every expression node of the package (62,000 of them; 0.5 s of CPU in every job, issue 44)
                    walk([c for _, v in ast.iter_fields(node) if isinstance(v, list) for c in v
                          if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))], prefix)
        walk(tree.body, [])
        return tree


def _marked_code(path: str, source: bytes, cache_dir: str | os.PathLike | None):
    """`source` (the file at `path`) compiled with _Mark's marks; with `cache_dir`, kept there by the hash of the
    path, the source, Python's bytecode magic and this file (which holds _Mark), so that the jobs of a run, and
    the next run, parse and compile each module of the package once, not once a job (a module of Module 19's
    package takes 10-60 ms to mark and compile, and most jobs import most of them)."""
    import ast
    import hashlib
    import importlib.util
    import marshal

    def build():
        return compile(_Mark.apply(ast.parse(source, path)), path, "exec", dont_inherit=True)

    if cache_dir is None:
        return build()
    h = hashlib.sha256(importlib.util.MAGIC_NUMBER + _own_source() + os.fsencode(path) + b"\0" + source)
    f = Path(cache_dir) / f"{h.hexdigest()[:40]}.marked"
    try:
        return marshal.loads(f.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):  # not there yet, or cut short: compile it again
        pass
    code = build()
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(code))
        os.replace(tmp, f)  # atomic: two jobs compiling the same module write the same bytes
    except OSError as e:  # a read-only or full disk costs time, not the record
        print(f"tito: marked code not cached ({e})", file=sys.stderr)
    return code


_OWN: list[bytes] = []


def _own_source() -> bytes:
    if not _OWN:
        _OWN.append(Path(__file__).read_bytes())
    return _OWN[0]


def record_executed(root: str | os.PathLike, cache_dir: str | os.PathLike | None = None):
    """Record which functions of the package under `root` run from now on, and whether anything
    starts another process that might run them (whose calls this process cannot see; a program
    of SAFE_PROGRAMS does not count). The package's modules, when imported, are compiled with a
    `_tito_ran_.add("qualname")` at the top of each function (a set add per call of the package's
    own functions only; nothing is written to __pycache__; with `cache_dir`, the marked code is kept
    there: _marked_code). Returns `stop()`, which ends the
    recording and gives `{"executed": {file: [qualname, ...]} | None, "executed_unknown": why |
    None}` ("<module>" for a module that was imported; None where the record is incomplete).

    >>> stop = record_executed("tinytorch"); stop()["executed_unknown"] is None
    True
    """
    import importlib.machinery as mach

    import _posixsubprocess

    roots = tuple({os.path.join(os.path.abspath(root), ""), os.path.join(os.path.realpath(root), "")})
    seen: dict[str, set[str]] = {}
    spawned: list[str] = []

    class Loader(mach.SourceFileLoader):
        def get_code(self, fullname):  # always from the source (or its marked code): never an unmarked .pyc
            return _marked_code(self.path, self.get_data(self.path), cache_dir)

        def exec_module(self, module):
            ran = seen.setdefault(self.path, {"<module>"})
            module.__dict__["_tito_ran_"] = ran
            super().exec_module(module)

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if not name.startswith("tinytorch"):
                return None
            spec = mach.PathFinder.find_spec(name, path, target)
            if spec is None or not str(spec.origin or "").startswith(roots) or not str(spec.origin).endswith(".py"):
                return spec
            spec.loader = Loader(name, spec.origin)
            return spec

    def audit(event, args):
        if not spawned and event.startswith(("os.", "subprocess.")) and (what := spawns_code(event, args)):
            spawned.append(what)

    fork_exec = _posixsubprocess.fork_exec  # multiprocessing's spawn calls it without an audit event

    def fork_exec_spy(*a, **kw):
        if not spawned and (what := spawns_code("os.exec", (a[0] if a else "?",))):
            spawned.append(what.replace("os.exec", "_posixsubprocess.fork_exec"))
        return fork_exec(*a, **kw)

    loaded = [m for m, mod in sys.modules.items() if str(getattr(mod, "__file__", "") or "").startswith(roots)]
    sys.addaudithook(audit)  # cannot be removed: harmless, the job's process ends with the job
    _posixsubprocess.fork_exec = fork_exec_spy
    sys.meta_path.insert(0, Finder)

    def stop() -> dict:
        sys.meta_path.remove(Finder)
        _posixsubprocess.fork_exec = fork_exec
        why = (f"the tests started another process ({spawned[0]})" if spawned else
               f"{loaded[0]} was imported before the recording began" if loaded else None)
        return {"executed": None if why else {f: sorted(q) for f, q in seen.items()}, "executed_unknown": why}

    return stop


def _child(job: dict) -> None:
    """In a forked child: output to the job's log, the result to its result file, then _exit."""
    code = 70
    try:
        os.setpgid(0, 0)  # a group of its own, so a timeout kills whatever the job started
        os.environ.update(lasting_caches(os.environ))
        os.environ["TMPDIR"] = tempfile.tempdir = job["tmp"]
        from tito.isolation.process import die_with_parent

        die_with_parent()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the job queue is the server's, not the job's
        fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        res = run_job(job)
        tmp = job["result"] + ".tmp"
        Path(tmp).write_text(json.dumps(res), encoding="utf-8")
        os.replace(tmp, job["result"])
        code = 0
    except BaseException:  # noqa: BLE001 - the server reports a job without a result as crashed
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def lasting_caches(env: dict) -> dict[str, str]:
    """For a process about to get a temporary folder of its own (a job, a forked kernel) that is removed when it ends:
    where the caches libraries keep under the temporary folder, to last between runs, stay. torch's compile cache
    (TORCHINDUCTOR_CACHE_DIR, by default TMPDIR/torchinductor_USER) in a job's folder cost test_19_runtimes 8 CPU-s
    a run, compiling again what the cache held. Only where torch is loaded already (the preload): its default,
    computed as torch does, unless `env` names one."""
    utils = sys.modules.get("torch._inductor.runtime.cache_dir_utils")
    if utils is None or "TORCHINDUCTOR_CACHE_DIR" in env:
        return {}
    return {"TORCHINDUCTOR_CACHE_DIR": utils.default_cache_dir()}


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@contextlib.contextmanager
def threads_per_job(jobs: int) -> Iterator[int]:
    """Inside: processes started get the cores divided among `jobs` of them as their thread count (torch's
    default is every core: two inline-test processes of two threads each on two cores took metrics_dev's tests
    from 5 s alone to 18 s); a count the caller set is kept. Yields the count."""
    threads = max(1, len(os.sched_getaffinity(0)) // max(1, jobs)) if hasattr(os, "sched_getaffinity") else 1
    old = {v: os.environ.get(v) for v in THREAD_VARS}
    for v in THREAD_VARS:
        os.environ.setdefault(v, str(threads))
    try:
        yield int(os.environ["OMP_NUM_THREADS"]) if os.environ["OMP_NUM_THREADS"].isdigit() else threads
    finally:
        for v, val in old.items():
            if val is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = val


def preload_for_forks(names: list[str], who: str) -> list[str]:
    """In a server that forks fresh processes (this job server, tito.testing.kernels'): import `names` (one that fails
    is said on stderr: the child imports it itself, and fails there if it must; torch's compiler stack raises
    RuntimeError, not ImportError, on a Python it does not support); make every child reseed numpy's global generator
    from the OS, as a fresh process does (Python's `random` reseeds itself after a fork); and keep what is loaded out
    of the collector's sight: it lives as long as the server, and a child's collections (pytest runs two at its end)
    then neither walk torch's objects nor write to their pages (-0.8 s of CPU a job). Returns the names loaded."""
    loaded = []
    for name in names:
        try:
            __import__(name)
            loaded.append(name)
        except Exception as e:  # noqa: BLE001 - said, and the child's own import decides
            print(f"{who}: not preloaded: {name} ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
    if "numpy.random" in sys.modules:  # its global generator made here (numpy 2 loads numpy.random when first used)
        os.register_at_fork(after_in_child=sys.modules["numpy.random"].seed)
    import gc

    gc.freeze()
    return loaded


def serve(jobs: int = 2, preload: list[str] | None = None) -> int:
    """Read jobs (one JSON object a line: id, kind, file | args and cwd, log, result, timeout) from
    stdin; run each in a child forked from this process after it imported the `preload` libraries
    (so no job pays for importing torch), at most `jobs` at a time, in the order they came; write
    `JOB_MARKER {"id", "exit", "seconds", "cpu_seconds", "timed_out", "result"}` to stdout as each
    one ends (cpu_seconds: the job's process and the processes it waited for, user + system). Ends
    when stdin is closed and every job has ended. A job that outlives its timeout is killed with
    everything it started. Only third-party libraries are preloaded, never the code under test.
    """
    with threads_per_job(jobs):  # the cores shared among the jobs: two jobs of two threads each on two cores only contend
        return _serve(jobs, preload)


def _serve(jobs: int, preload: list[str] | None) -> int:
    t0 = time.perf_counter()
    loaded = preload_for_forks(PRELOAD if preload is None else preload, "tito job server")
    return run_queue(jobs, {"ready": True, "preloaded": loaded, "seconds": round(time.perf_counter() - t0, 3)})


def run_queue(jobs: int, ready: dict) -> int:
    """serve's loop, in a process that has preloaded what it needs: say `ready`, then run the jobs read from stdin
    (tito.testing.kept_server's sessions run it too, with a socket for stdin and stdout). A line `{"stop": true}`
    ends every job at once (a caller that stops early)."""
    import selectors
    import signal
    from collections import deque

    out = sys.stdout

    def emit(obj: dict) -> None:
        out.write(JOB_MARKER + json.dumps(obj) + "\n")
        out.flush()

    emit(ready)
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ)
    buf, eof, queue, running = b"", False, deque(), {}
    while not (eof and not queue and not running):
        for _ in sel.select(timeout=0.05 if running or not eof else 0):
            try:
                chunk = os.read(sys.stdin.fileno(), 65536)
            except ConnectionResetError:  # a socket's caller that closed with our lines unread: gone, as at its end
                chunk = b""
            if not chunk:
                eof = True
                sel.unregister(sys.stdin.fileno())
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            queue.extend(json.loads(l) for l in lines if l.strip())
        # the caller stopped early ({"stop": true}), or went (its end of the pipe or socket closed with jobs left:
        # killed, its terminal closed): its jobs end, unreported, rather than run on and write results a later run
        # could take for its own
        if any(job.get("stop") for job in queue) or (eof and (queue or running)):
            for pid in running:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            for pid, (job, _, _) in running.items():
                os.waitpid(pid, 0)
                shutil.rmtree(job["tmp"], ignore_errors=True)
            return 0
        while running:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid == 0:
                break
            job, started, killed = running.pop(pid)
            shutil.rmtree(job["tmp"], ignore_errors=True)
            res_path = Path(job["result"])
            code = os.waitstatus_to_exitcode(status)
            res = json.loads(res_path.read_text(encoding="utf-8")) if code == 0 and res_path.exists() else None
            emit({"id": job["id"], "exit": code, "timed_out": killed,
                  "seconds": round(time.perf_counter() - started, 3), "result": res,
                  "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3)})
        now = time.perf_counter()
        for pid, (job, started, killed) in list(running.items()):
            if not killed and now - started > float(job.get("timeout") or 1800):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                running[pid] = (job, started, True)
        while queue and len(running) < jobs:
            job = queue.popleft()
            Path(job["result"]).unlink(missing_ok=True)
            # the job's temporary files (a test's mkdtemp, pytest's tmp_path) in a folder of its own, removed when it
            # ends: nothing a job makes is left in the machine's /tmp
            job["tmp"] = tempfile.mkdtemp(prefix="tito-job-")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(job)
            running[pid] = (job, time.perf_counter(), False)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:  # --serve JOBS [PRELOAD,...]: "-" preloads nothing
        pre = None if len(argv) < 3 else [m for m in argv[2].split(",") if m and m != "-"]
        code = serve(int(argv[1]) if len(argv) > 1 else 2, pre)
        # every job has ended and been reported: the interpreter's teardown of torch & co (0.3 s, which tito waits
        # for) would only free memory the exit frees anyway
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print("usage: python -m tito.testing.inline_runner --serve [JOBS [PRELOAD,...]]", file=sys.stderr)
    return 2

if __name__ == "__main__":
    sys.exit(main())
