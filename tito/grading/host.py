"""The student host: runs INSIDE the grading sandbox, where all of a student's code runs.

    python -s -m tito.grading.host CTL_FD

The *zygote* (this process) imports the heavy libraries once (torch, numpy, scipy, pandas,
IPython), then waits on its control socket (a SOCK_SEQPACKET pair whose other end the judge
holds). For each notebook the judge sends a "spawn" message with one end of a fresh socket pair;
the zygote forks a child that closes the control socket, becomes its own process group, drops to
the notebook's own uid (as root: so no notebook's code can read another notebook's package, which
holds the reference of the module graded there; as a normal user: user, mount, PID, network and IPC
namespaces of its own, the other notebooks' packages covered, `isolate_unprivileged`), and serves one
role on that socket:

- "tests": the judge's calls against the student's code (`Host`): look up a name, call, get an
  attribute, ... Every reply is data or a reference; the judge decides. The namespace is the
  student's exported module(s) of this notebook (and their non-exported solution cells).
- "feedback": the student's notebook, cell by cell, in an in-process IPython shell; each cell's
  outputs go back as they finish (they are shown to the student; they score nothing).

Each child is the subreaper of what its code starts, and ends all of it (double-forked, `setsid` or
not) when a call or a feedback cell ends. The zygote answers "kill" (a child, its process group and
everything below it), "sweep" (every process of a notebook's uid, once the notebook is done) and "status" (how a child ended). It never runs student code. Standard library plus what it pre-imports; tito is on the path as a
read-only mount (no course files).
"""
from __future__ import annotations

import builtins
import contextlib
import dataclasses
import io
import importlib
import itertools
import json
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import types
from typing import Any

from tito.isolation import seccomp
from tito.isolation.namespaces import PRIVATE_TMP, become_subreaper, isolate, isolate_unprivileged
from tito.isolation.procs import kill_descendants, kill_group, kill_uid
from tito.isolation.protocol import (NAMESPACE, Endpoint, Interned, ProtocolError, control_recv, control_send,
                                     decode, encode, send)

MAX_ITER = 1_000_000          # items one `iter` request may materialise
MAX_TEXT = 20_000             # characters of a repr/str sent back
CELL_OUTPUT_CHARS = 200_000   # characters of output kept per feedback cell


# ---- the zygote ---------------------------------------------------------------------------------

JUDGE_GONE = "the judge closed the control channel"


def zygote(ctl_fd: int) -> int:
    ctl = socket.socket(fileno=ctl_fd)
    config, _ = control_recv(ctl, JUDGE_GONE)
    t0 = time.perf_counter()
    failed = []
    for name in config.get("preimport", []):
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a missing library fails the notebooks that need it
            failed.append(f"{name}: {type(e).__name__}: {e}")
    control_send(ctl, {"ready": True, "import_seconds": round(time.perf_counter() - t0, 3), "import_errors": failed})
    ended: dict[int, str] = {}
    while True:
        try:
            msg, fds = control_recv(ctl, JUDGE_GONE)
        except (EOFError, OSError, ValueError):
            return 0
        _reap(ended)
        op = msg.get("op")
        if op == "spawn" and len(fds) == 1:
            pid = os.fork()
            if pid == 0:
                try:
                    ctl.close()
                    child(msg, fds[0])
                finally:
                    os._exit(0)
            os.close(fds[0])
            control_send(ctl, {"pid": pid})
        elif op == "kill":
            pid = int(msg.get("pid", 0))
            if pid > 1:
                kill_descendants(pid)  # what it started, in its group or not (it is their subreaper)
                kill_group(pid)
            _reap(ended, wait_for=pid)
            control_send(ctl, {"killed": pid, "ended": ended.get(pid, "")})
        elif op == "sweep":
            uid = msg.get("uid")
            n = kill_uid(uid) if isinstance(uid, int) and uid > 0 else 0
            _reap(ended)
            control_send(ctl, {"swept": n})
        elif op == "status":
            pid = int(msg.get("pid", 0))
            _reap(ended, wait_for=pid if msg.get("wait") else None)
            control_send(ctl, {"pid": pid, "ended": ended.get(pid, "")})
        else:
            for fd in fds:
                os.close(fd)
            control_send(ctl, {"error": f"unknown control message {op!r}"})


def _reap(ended: dict, wait_for: int | None = None) -> None:
    deadline = time.monotonic() + 5
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            ended[pid] = describe_status(status)
            continue
        if wait_for is None or wait_for in ended or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        why = {signal.SIGKILL: " (killed: a time, memory or process limit)", signal.SIGXCPU: " (CPU time limit)",
               signal.SIGSEGV: " (crashed)", signal.SIGXFSZ: " (file size limit)"}.get(sig, "")
        return f"killed by {name}{why}"
    return f"exited with code {os.WEXITSTATUS(status)}"


# ---- a child ------------------------------------------------------------------------------------

def child(msg: dict, fd: int) -> None:
    """In the forked child: own process group, (as root) its own namespaces and the notebook's uid,
    a private work folder, then the role."""
    os.setpgid(0, 0)
    become_subreaper()  # what its code starts stays below it, `setsid` or not: ended after each call
    uid, gid = msg.get("uid"), msg.get("gid")
    gid = gid if isinstance(gid, int) else uid
    hide = msg.get("hide") if isinstance(msg.get("hide"), list) else []
    fatal = ""
    own_pids = fd if msg.get("own_pids") is True else None  # a PID namespace of its own (as root too: red team 49)
    if isinstance(uid, int) and os.geteuid() == 0:
        try:
            isolate(int(msg.get("tmp_mb", 512)), hide, own_pids)
        except OSError as e:  # no isolation, no student code: every request answers with the reason
            fatal = f"the notebook's process could not be isolated: {e}"
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    elif msg.get("isolate") is True:  # a normal user's sandbox: the same separation in a user namespace
        try:
            isolate_unprivileged(int(msg.get("tmp_mb", 512)), hide, own_pids)
        except OSError as e:
            fatal = f"the notebook's process could not be isolated: {e}"
    if msg.get("isolate") is True and not fatal and (filt := seccomp.student_filter()) is not None:
        try:  # namespaces made: no user namespace, CLONE_PARENT or clone3 for the student's code (stacked filter)
            seccomp.install(filt)
        except OSError as e:
            fatal = f"the notebook's process could not be isolated: {e}"
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    sys.stdout = sys.__stdout__ = open(os.devnull, "w", encoding="utf-8")
    sys.stderr = sys.__stderr__ = open(os.devnull, "w", encoding="utf-8")
    sock = socket.socket(fileno=fd)
    setup = msg.get("setup", {})
    if not fatal:
        try:
            prepare(setup)
        except Exception as e:  # noqa: BLE001 - every request then answers with the reason
            fatal = f"the notebook's process could not be set up: {_describe(e)}"
    if msg.get("role") == "tests":
        Host(sock, fatal, sweep=True).endpoint.serve_forever()
    elif msg.get("role") == "feedback":
        run_feedback(sock, setup, fatal)


def prepare(setup: dict) -> None:
    """A private home, cache and work folder (a copy of the student's files), the package on the path."""
    tempfile.tempdir = None
    if os.path.isdir(PRIVATE_TMP) and os.access(PRIVATE_TMP, os.W_OK):
        os.environ["TMPDIR"] = PRIVATE_TMP
    home = tempfile.mkdtemp(prefix="home-")
    os.environ.update({"HOME": home, "MPLCONFIGDIR": home, "TMPDIR": tempfile.gettempdir()})
    cache_seed = setup.get("cache")
    if cache_seed and os.path.isdir(cache_seed):
        cache = tempfile.mkdtemp(prefix="cache-")
        shutil.copytree(cache_seed, cache, dirs_exist_ok=True)
        os.environ["TINYTORCH_CACHE"] = cache
    work = tempfile.mkdtemp(prefix="work-")
    files = setup.get("files")
    if files and os.path.isdir(files):
        shutil.copytree(files, work, dirs_exist_ok=True, symlinks=False)
    os.chdir(work)
    if setup.get("pkg"):
        sys.path.insert(0, setup["pkg"])


# ---- role "tests" -------------------------------------------------------------------------------

class JudgeFunction:
    """A function of the judge's test (a spy clock, a callback): calling it asks the judge."""

    def __init__(self, host: "Host", cid: int):
        self._host, self._cid = host, cid
        self.__name__ = self.__qualname__ = f"test_callback_{cid}"

    def __call__(self, *args, **kwargs):
        h = self._host
        if threading.get_ident() != h.owner:
            raise RuntimeError("the test's function can only be called from the thread the test called into")
        reply = h.endpoint.call({"op": "callback", "cb": self._cid, "args": h.encode(list(args)),
                                 "kwargs": h.encode(kwargs)})
        if "err" in reply:
            err = h.decode(reply["err"])
            raise err if isinstance(err, BaseException) else RuntimeError("the test's function failed")
        return h.decode(reply.get("ok"))

    def __repr__(self):
        return f"<the test's function #{self._cid}>"


class Host:
    """The student's side of the judge's calls (see module doc)."""

    def __init__(self, sock: socket.socket, fatal: str = "", sweep: bool = False):
        self.fatal, self.sweep = fatal, sweep  # sweep: kill what a call leaves running (a forked child only)
        self.endpoint = Endpoint(sock, self.serve)
        self.objects = Interned()  # handle -> the student's object sent as a reference
        self.callbacks: dict[int, JudgeFunction] = {}
        # a real module, so code run in it works as in a notebook (a dataclass looks its module up)
        module = types.ModuleType(NAMESPACE)
        sys.modules[module.__name__] = module
        self.ns: dict[str, Any] = module.__dict__
        self.pgid = os.getpgid(0)
        self.owner = threading.get_ident()

    def serve(self, m: dict) -> dict:
        self.owner = threading.get_ident()
        op = m.get("op")
        fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            return {"err": self.encode(ProtocolError(f"unknown request {op!r}"))}
        if self.fatal:
            return {"err": self.encode(RuntimeError(self.fatal))}
        try:
            value = fn(m)
            reply = {"ok": self.encode(value)}
        except BaseException as e:  # noqa: BLE001 - the student's exception, whatever it is, is the answer
            try:
                reply = {"err": self.encode(e)}
            except BaseException as e2:  # noqa: BLE001
                reply = {"err": self.encode(RuntimeError(f"an exception that could not be described: {type(e2).__name__}"))}
        if self.sweep and self.endpoint.depth <= 1:  # what the call left running, in its group or not
            kill_group(self.pgid, spare=os.getpid())
            kill_descendants(os.getpid())
        return reply

    # values
    def encode(self, value: Any) -> Any:
        return encode(value, self.ref)

    def decode(self, value: Any) -> Any:
        return decode(value, self.tag)

    def handle(self, obj: Any) -> int:
        return self.objects.number(obj)

    def ref(self, obj: Any) -> dict:
        kind = ("class" if isinstance(obj, type) else "module" if type(obj).__name__ == "module"
                else "function" if callable(obj) else "object")
        mro = obj.__mro__ if kind == "class" else type(obj).__mro__
        rows = []
        for c in mro:
            exc = None
            if issubclass(c, BaseException):
                exc = next((b.__name__ for b in c.__mro__ if getattr(builtins, b.__name__, None) is b), "Exception")
            rows.append([self.handle(c), _text(getattr(c, "__module__", "")), _text(getattr(c, "__qualname__", "")),
                         _text(getattr(c, "__name__", "")), exc])
        return {"$r": {"id": self.handle(obj), "kind": kind, "mro": rows}}

    def tag(self, tag: str, payload: Any) -> Any:
        if tag == "$h":
            if type(payload) is not int or payload not in self.objects:
                raise ProtocolError("$h: unknown handle")
            return self.objects[payload]
        if tag == "$cb":
            if type(payload) is not int:
                raise ProtocolError("$cb: bad id")
            return self.callbacks.setdefault(payload, JudgeFunction(self, payload))
        if tag == "$pk":
            host = self

            class Unpickler(pickle.Unpickler):
                def persistent_load(self, pid):
                    kind, n = pid
                    return host.tag("$h" if kind == "h" else "$cb", n)

            import base64
            import io
            return Unpickler(io.BytesIO(base64.b64decode(payload))).load()
        if tag == "$e":
            cls = payload.get("cls")
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                base = getattr(builtins, payload["base"], Exception)
                cls = base if isinstance(base, type) and issubclass(base, BaseException) else Exception
            try:
                return cls(*payload["args"])
            except Exception:  # noqa: BLE001
                return cls(payload["msg"])
        raise ProtocolError(f"{tag}: the judge may not send this")

    def obj(self, m: dict) -> Any:
        h = m.get("h")
        if type(h) is not int or h not in self.objects:
            raise ProtocolError("unknown handle")
        return self.objects[h]

    # requests
    def op_setup(self, m):
        """Build the namespace: the notebook's exported modules, its setup cells where its solution
        cells need them, the student's non-exported solution cells. Returns the errors, by cell."""
        errors = []
        for i, cell in enumerate(m.get("cells", [])):
            try:
                if cell["kind"] == "import":
                    mod = importlib.import_module(cell["module"])
                    self.ns.update({k: v for k, v in vars(mod).items() if not (k.startswith("__") and k.endswith("__"))})
                else:
                    exec(compile(cell["source"], f"<cell {cell.get('index', i)}>", "exec"), self.ns)  # noqa: S102
            except BaseException as e:  # noqa: BLE001 - reported to the judge; the names it needs will be missing
                what = cell.get("module") or f"cell {cell.get('index', i)}"
                errors.append({"where": what, "kind": cell["kind"], "error": _describe(e)})
        return errors

    def op_name(self, m):
        name = m.get("name")
        if name not in self.ns:
            raise NameError(f"name {name!r} is not defined by your code")
        return self.ns[name]

    def op_getattr(self, m):
        return getattr(self.obj(m), m["attr"])

    def op_setattr(self, m):
        setattr(self.obj(m), m["attr"], self.decode(m.get("value")))

    def op_delattr(self, m):
        delattr(self.obj(m), m["attr"])

    def op_call(self, m):
        args, kwargs = self.decode(m.get("args", [])), self.decode(m.get("kwargs", {"$d": []}))
        return self.obj(m)(*args, **kwargs)

    def op_run(self, m):
        fn, args, kwargs = self.decode(m["fn"]), self.decode(m.get("args", [])), self.decode(m.get("kwargs", {"$d": []}))
        return fn(*args, **kwargs)

    def op_getitem(self, m):
        return self.obj(m)[self.decode(m.get("key"))]

    def op_setitem(self, m):
        self.obj(m)[self.decode(m.get("key"))] = self.decode(m.get("value"))

    def op_delitem(self, m):
        del self.obj(m)[self.decode(m.get("key"))]

    def op_len(self, m):
        return len(self.obj(m))

    def op_iter(self, m):
        items = list(itertools.islice(iter(self.obj(m)), MAX_ITER + 1))
        if len(items) > MAX_ITER:
            raise ValueError(f"iterating gave more than {MAX_ITER} items")
        return items

    def op_next(self, m):
        return next(self.obj(m))

    def op_contains(self, m):
        return self.decode(m.get("item")) in self.obj(m)

    def op_repr(self, m):
        return repr(self.obj(m))[:MAX_TEXT]

    def op_str(self, m):
        return str(self.obj(m))[:MAX_TEXT]

    def op_format(self, m):
        return format(self.obj(m), str(m.get("spec", "")))[:MAX_TEXT]

    def op_float(self, m):
        return float(self.obj(m))

    def op_int(self, m):
        return int(self.obj(m))

    def op_index(self, m):
        import operator
        return operator.index(self.obj(m))

    def op_snapshot(self, m):
        obj = self.obj(m)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        d = getattr(obj, "__dict__", None)
        if isinstance(d, dict):
            return {k: v for k, v in d.items() if isinstance(k, str) and not k.startswith("_") and not callable(v)}
        return None

    def op_fields(self, m):
        obj = self.obj(m)
        if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
            return None
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}

    def op_enter(self, m):
        return self.obj(m).__enter__()

    def op_exit(self, m):
        cm, exc = self.obj(m), self.decode(m.get("exc"))
        if exc is None:
            return bool(cm.__exit__(None, None, None))
        try:
            return bool(cm.__exit__(type(exc), exc, None))
        except BaseException as e:  # noqa: BLE001
            if e is exc:
                return False
            raise


def _text(v: Any) -> str:
    return v[:500] if type(v) is str else str(type(v).__name__)


def _describe(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0][:500] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


# ---- role "feedback" ------------------------------------------------------------------------------

class CellTimeout(BaseException):
    pass


class Bounded(io.StringIO):
    """A text sink that keeps its first `limit` characters and counts the rest (1 GB of prints
    costs the time to print it, not the memory)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.dropped = limit, 0

    def write(self, s: str) -> int:
        room = self.limit - self.tell()
        if room > 0:
            super().write(s[:room])
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self) -> str:
        return self.getvalue() + (f"\n[output truncated: {self.dropped} more characters]\n" if self.dropped else "")


def run_feedback(sock: socket.socket, setup: dict, fatal: str = "") -> None:
    """The student's notebook cell by cell (their outputs, for their feedback); one message a cell."""
    if fatal:
        send(sock, {"done": True, "stopped": fatal})
        return
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.user_ns["__name__"] = "__main__"
    shell.displayhook.write_output_prompt = lambda: None
    shell.displayhook.write_format_data = lambda *a, **k: None
    caught: list = []
    shell.showtraceback = lambda *a, **k: caught.append(sys.exc_info())
    shell.showsyntaxerror = lambda *a, **k: caught.append(sys.exc_info())
    timeout = float(setup.get("timeout", 300))

    def alarm(signum, frame):
        raise CellTimeout(f"cell ran longer than {timeout:.0f} s")

    signal.signal(signal.SIGALRM, alarm)
    pgid = os.getpgid(0)
    for cell in setup.get("cells", []):
        caught.clear()
        outputs: list[dict] = []
        out, err = Bounded(CELL_OUTPUT_CHARS), Bounded(CELL_OUTPUT_CHARS)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                capture_output(stdout=False, stderr=False, display=True) as cap:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                result = shell.run_cell(cell["source"], store_history=True)
            except BaseException as e:  # noqa: BLE001 - a timeout between IPython's own handlers
                result = None
                caught.append((type(e), e, e.__traceback__))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        for name, sink in (("stdout", out), ("stderr", err)):
            if sink.getvalue():
                outputs.append({"output_type": "stream", "name": name, "text": sink.text()})
        for out in cap.outputs:
            outputs.append({"output_type": "display_data", "data": _json_data(out.data), "metadata": {}})
        if result is not None and result.result is not None:
            try:
                data, _ = shell.display_formatter.format(result.result)
                outputs.append({"output_type": "execute_result", "data": _json_data(data), "metadata": {},
                                "execution_count": result.execution_count})
            except Exception:  # noqa: BLE001 - a repr that fails shows as nothing
                pass
        if caught:
            et, ev, tb = caught[-1]
            if et is not None:
                try:
                    frames = shell.InteractiveTB.structured_traceback(et, ev, tb)
                except Exception:  # noqa: BLE001
                    frames = traceback.format_exception(et, ev, tb)
                outputs.append({"output_type": "error", "ename": "CellTimeoutError" if et is CellTimeout else et.__name__,
                                "evalue": str(ev)[:2000], "traceback": [str(f)[:5000] for f in frames[-30:]]})
        kill_group(pgid, spare=os.getpid())
        kill_descendants(os.getpid())  # what the cell left running, `setsid` or not
        send(sock, {"cell": cell["index"], "outputs": outputs,
                    "execution_count": getattr(result, "execution_count", None)})
    send(sock, {"done": True})


def _json_data(data: dict) -> dict:
    out = {}
    for k, v in (data or {}).items():
        if isinstance(v, (bytes, bytearray)):
            import base64
            v = base64.b64encode(v).decode("ascii")
        if isinstance(v, str):
            out[k] = v[:CELL_OUTPUT_CHARS]
        elif isinstance(v, (dict, list)):
            try:
                out[k] = json.loads(json.dumps(v))
            except (TypeError, ValueError):
                continue
    return out


if __name__ == "__main__":
    sys.exit(zygote(int(sys.argv[1])))
