"""Runs INSIDE the grading sandbox (tito.sandbox): execute one notebook, or run its graded tests.

Standalone on purpose (standard library + nbclient/nbformat only): tito copies this file into
the sandbox's read-only inputs, so the sandbox needs neither tito nor the course repository.

    python sandbox_driver.py exec  IN_DIR FILES   # IN_DIR/notebook.ipynb, IN_DIR/config.json
    python sandbox_driver.py tests IN_DIR FILES   # IN_DIR/plan.json,      IN_DIR/config.json

Both copy FILES (the student's folder: notebooks and data files) into a fresh working folder under
$TMPDIR and work there. Results go to the original standard output as lines starting with
RESULT_PREFIX; the command's own stdout/stderr (and the kernel's) go to /dev/null, and the
student's `print`s are kept only up to a limit, so output floods cannot reach the host.

`exec`: nbclient runs the notebook cell by cell in a fresh kernel (per-cell timeout, interrupt
on timeout, errors recorded and execution continued, each cell's output capped); one result per
cell as it finishes, {"cell": index, "outputs", "execution_count"}, then {"stopped": reason or "",
"done": true}. In a sandbox, processes a cell leaves behind are killed after it.

`tests`: the hidden tests in this separate process (not the student's kernel): cells of the
plan run in order in one namespace: "setup" (the instructor's cells, as `__tito_grading__`, so
`if __name__ == "__main__":` demos are skipped), "import" (the namespace gets the student's
exported module), "student" (a student's solution cell that is not exported), "test" (a graded
cell, source with hidden tests, as `__main__`, under a per-cell alarm). Standard-library
functions changed by student code are put back before each test, and a test during which they
change fails. One result per test: {"grade_id", "ok", "error"}.
"""
from __future__ import annotations

import builtins
import importlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import traceback

RESULT_PREFIX = "TITO-RESULT "
VOLATILE = {("sys", "displayhook"), ("sys", "excepthook"), ("sys", "breakpointhook"), ("sys", "unraisablehook"),
            ("warnings", "showwarning"), ("warnings", "formatwarning")}


class _Bounded(io.StringIO):
    """A text sink that keeps only its first `limit` characters."""

    def __init__(self, limit: int = 65536):
        super().__init__()
        self.limit = limit

    def write(self, s: str) -> int:
        room = self.limit - self.tell()
        if room > 0:
            super().write(s[:room])
        return len(s)


def _private_stdout():
    """A private copy of stdout for results; fds 1 and 2 then point to /dev/null."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.stdout = sys.stderr = _Bounded()
    return out


def _emit(out, obj: dict) -> None:
    out.write(RESULT_PREFIX + json.dumps(obj) + "\n")
    out.flush()


def _workdir(files: str) -> str:
    """A fresh working folder with a copy of `files`; $TINYTORCH_CACHE becomes a writable copy of the
    run's read-only cache ($TITO_CACHE_SEED), so notebooks may add to it without touching others'."""
    seed = os.environ.get("TITO_CACHE_SEED")
    if seed and os.path.isdir(seed):
        cache = tempfile.mkdtemp(prefix="cache-")
        shutil.copytree(seed, cache, dirs_exist_ok=True)
        os.environ["TINYTORCH_CACHE"] = cache
    work = tempfile.mkdtemp(prefix="work-")
    if files and os.path.isdir(files):
        shutil.copytree(files, work, dirs_exist_ok=True)
    return work


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0][:500] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


# ---- exec ------------------------------------------------------------------------------------

def run_exec(indir: str, files: str) -> int:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    out = _private_stdout()
    cfg = json.load(open(os.path.join(indir, "config.json"), encoding="utf-8"))
    work = _workdir(files)
    nb = nbformat.read(os.path.join(indir, "notebook.ipynb"), as_version=4)
    limit = int(cfg.get("cell_output_bytes", 200_000))

    class Bounded(NotebookClient):
        used: dict = {}

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {}), default=str))
            used = self.used.get(cell_index, 0)
            if used + size > limit:
                if used <= limit:
                    self.used[cell_index] = limit + 1
                    outs.append(nbformat.v4.new_output(
                        "stream", name="stderr", text=f"\n[tito grade: output truncated after {limit} bytes]\n"))
                return None
            self.used[cell_index] = used + size
            return super().output(outs, msg, display_id, cell_index)

    def on_executed(cell, cell_index, execute_reply):  # as nbgrader's Execute: record the reply's error
        content = execute_reply.get("content", {})
        if content.get("status") == "error" and not any(
                o.get("output_type") == "error" and o.get("ename") == content.get("ename") for o in cell.outputs):
            cell.outputs.append(nbformat.v4.new_output("error", ename=content.get("ename", "Error"),
                                                       evalue=content.get("evalue", ""),
                                                       traceback=content.get("traceback") or []))

    timeout = int(cfg["timeout"])
    client = Bounded(nb, timeout=timeout, kernel_name=cfg.get("kernel_name", "python3"), allow_errors=True,
                     interrupt_on_timeout=True, record_timing=False, on_cell_executed=on_executed,
                     error_on_timeout={"ename": "CellTimeoutError", "evalue": "",
                                       "traceback": [f"CellTimeoutError: cell ran longer than {timeout} s"]},
                     extra_arguments=["--HistoryManager.hist_file=:memory:"],
                     resources={"metadata": {"path": work}})
    stopped = ""
    sandboxed = bool(cfg.get("sandboxed"))
    try:
        with client.setup_kernel(cwd=work):
            kernel_pid = _kernel_pid(client)
            for i, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                try:
                    client.execute_cell(cell, i)
                except DeadKernelError:
                    stopped = f"the kernel died in cell {i} (a memory, process or CPU limit, or a crash)"
                except Exception as e:  # noqa: BLE001 - recorded as that cell's error
                    cell.outputs.append(nbformat.v4.new_output("error", ename=type(e).__name__, evalue=str(e)[:500],
                                                               traceback=[_err(e)]))
                # streamed cell by cell: a sandbox stopped later keeps what ran
                _emit(out, {"cell": i, "outputs": cell.outputs, "execution_count": cell.get("execution_count")})
                if sandboxed:
                    _kill_strays(keep={os.getpid(), kernel_pid})
                if stopped:
                    break
    except Exception as e:  # noqa: BLE001 - kernel start or shutdown failed
        stopped = stopped or f"the notebook could not run: {_err(e)}"
    _emit(out, {"stopped": stopped, "done": True})
    return 0


def _kernel_pid(client) -> int:
    try:
        return int(client.km.provisioner.process.pid)
    except AttributeError:
        return -1


def _kill_strays(keep: set) -> None:
    """In the sandbox (its own pid namespace, one uid): stop, then kill, every process that is not
    this driver, the kernel or the namespace's init, so what a cell left running (a fork bomb's
    copies, a background loop) cannot outlive it."""
    def others() -> list[int]:
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep and int(name) != 1:
                pids.append(int(name))
        return pids
    for sig in (signal.SIGSTOP, signal.SIGKILL, signal.SIGKILL):
        for pid in others():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


# ---- tests -----------------------------------------------------------------------------------

def _stdlib_modules(plan: dict) -> list[str]:
    import ast

    names = set()
    for cell in plan["cells"]:
        try:
            tree = ast.parse(cell.get("source", ""))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(n for n in names if n.split(".")[0] in sys.stdlib_module_names)


def _snapshot() -> dict:
    snap = {}
    mods = [("builtins", builtins)] + [(n, m) for n, m in list(sys.modules.items())
                                       if m is not None and n.split(".")[0] in sys.stdlib_module_names]
    for name, mod in mods:
        for attr, value in list(vars(mod).items()):
            if not attr.startswith("_") and callable(value) and (name, attr) not in VOLATILE:
                snap[(name, attr)] = (mod, value)
    return snap


def _restore(snap: dict) -> list[str]:
    """Put back every snapshotted function that was replaced or deleted; their names."""
    changed = []
    for (name, attr), (mod, value) in snap.items():
        if vars(mod).get(attr, None) is not value:
            changed.append(f"{name}.{attr}")
            try:
                setattr(mod, attr, value)
            except (AttributeError, TypeError):
                pass
    return changed


class _CellTimeout(Exception):
    pass


def run_tests(indir: str, files: str) -> int:
    out = _private_stdout()
    cfg = json.load(open(os.path.join(indir, "config.json"), encoding="utf-8"))
    plan = json.load(open(os.path.join(indir, "plan.json"), encoding="utf-8"))
    work = _workdir(files)
    os.chdir(work)
    timeout = int(cfg["timeout"])
    sandboxed = bool(cfg.get("sandboxed"))
    _exec, _compile, _import = exec, compile, importlib.import_module
    for m in _stdlib_modules(plan):
        try:
            _import(m)
        except ImportError:
            pass
    snap = _snapshot()

    def alarm(signum, frame):
        raise _CellTimeout(f"timed out (cell ran longer than {timeout} s)")

    signal.signal(signal.SIGALRM, alarm)
    ns: dict = {"__name__": "__tito_grading__", "__builtins__": builtins}
    import_errors: list[str] = []
    for i, cell in enumerate(plan["cells"]):
        kind, src = cell["kind"], cell.get("source", "")
        if kind == "import":
            try:
                signal.setitimer(signal.ITIMER_REAL, timeout)
                mod = _import(cell["module"])
                ns.update({k: v for k, v in vars(mod).items() if not (k.startswith("__") and k.endswith("__"))})
            except BaseException as e:  # noqa: BLE001 - the student's module does not import
                import_errors.append(f"importing your module {cell['module']} failed: {_err(e)}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            continue
        if kind != "test":
            try:
                signal.setitimer(signal.ITIMER_REAL, timeout)
                _exec(_compile(src, f"<cell {i}>", "exec"), ns)
            except BaseException:  # noqa: BLE001 - a failing setup cell shows up in the tests that need it
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            continue
        _restore(snap)
        ok, error = True, ""
        ns["__name__"] = "__main__"
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            _exec(_compile(src, f"<test {cell['grade_id']}>", "exec"), ns)
        except BaseException as e:  # noqa: BLE001 - any exception fails the test
            ok, error = False, _err(e)
            if isinstance(e, NameError) and import_errors:
                error = f"{import_errors[0]} ({error})"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            ns["__name__"] = "__tito_grading__"
        if sandboxed:
            _kill_strays(keep={os.getpid()})
        during = _restore(snap)
        if ok and during:
            ok, error = False, ("the code under test replaced standard-library functions ("
                                + ", ".join(sorted(during)[:5]) + "); the test does not count")
        _emit(out, {"grade_id": cell["grade_id"], "ok": ok, "error": error})
    _emit(out, {"done": True})
    out.close()
    os._exit(0)  # no atexit or finalizer of student code runs after the results


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in ("exec", "tests"):
        sys.stderr.write("usage: sandbox_driver.py exec|tests IN_DIR FILES_DIR\n")
        return 2
    try:
        return run_exec(argv[2], argv[3]) if argv[1] == "exec" else run_tests(argv[2], argv[3])
    except Exception:  # noqa: BLE001 - the host reads the missing result as a failure
        traceback.print_exc(file=sys.__stderr__)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
