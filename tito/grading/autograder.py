"""The judge: the trusted process that runs a student's tests and decides, one process per student.

    python -m tito.grading.autograder PLAN.json      # frames of results on stdout (tito.isolation.protocol)

It never imports the student's code. For each graded notebook it

1. builds the package the student's code runs against (tito.grading.package: the course's
   reference as byte code, the notebook's own modules exported from the student's cells);
2. asks the sandboxed host (tito.grading.host) for a "tests" process and a "feedback" process of
   that notebook, each under the notebook's own uid when tito runs as root;
3. runs the instructor's cells here (tito.grading.plan): setup cells, the library imports, and for
   every name the student's cells define a proxy (tito.grading.remote); then each graded cell, its
   hidden tests included, under a time limit. A graded cell passes when it runs to its end here:
   the test's own assertions, evaluated in this process on data, are the verdict;
4. collects the feedback process's outputs (the student's notebook as it ran) for the report.

A test that runs out of time, or whose host process dies, fails with the reason, and the next test
gets a fresh host process. Hidden tests draw their inputs from $TITO_GRADING_SEED (set here from
the plan's seed: the student's, tito.grading.classrun.student_seed), and a failed hidden case is
reported as the property its region declares (`hidden_property`), never its inputs or expected value.
Test code that needs the student's process itself (its thread count, its collector) calls
`in_student_process(fn, *args)`, which runs `fn` there and returns its result as data; `fn` holds
no data of the test and makes no object of the test's classes there (tito.grading.remote.refuse_data).
"""
from __future__ import annotations

import builtins
import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import types
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tito.grading import feedback, package, plan as plans
from tito.grading.job import JudgePlan
from tito.isolation.protocol import (MAX_HOST_FRAME, NAMESPACE, ChannelBroken, ProtocolError, TooLarge, control_recv,
                                     control_send, recv, write_frame)
from tito.grading.remote import NotSendable, Session
from tito.isolation.sanitize import plain_text
from tito.notebooks.cells import cell_source, plain_python
from tito.notebooks.exports import notebook_modules
from tito.notebooks.imports import named_modules, reach
from tito.notebooks.nbfile import read_notebook

PREIMPORT = ["numpy", "scipy", "scipy.stats", "pandas", "torch", "matplotlib", "matplotlib.pyplot", "sklearn",
             "sklearn.datasets", "IPython.core.interactiveshell", "IPython.utils.capture", "cloudpickle"]
FEEDBACK_BYTES = 8 << 20      # outputs kept from one notebook's feedback run
RENDER_MB = 2048              # address space of the process rendering the student's pages (theirs: bounded)
SETUP_SECONDS = 120           # the zygote's imports, a test process's imports
HOOK = "in_student_process"
STUB = re.compile(r"not yet implemented: [\w.<>-]{1,200}")  # the release's stubs (tito.notebooks.named_stubs)
PROPERTY = "hidden_property"  # a test cell's hidden cases say what they check (NotebookTests.describe)


class TestTimeout(BaseException):
    """The running test is over its time limit (a BaseException: test code's `except Exception`
    must not swallow it)."""


# ---- the sandboxed host ------------------------------------------------------------------------

class HostProcess:
    """The control channel to a student's zygote (tito.grading.host), started by tito in its sandbox.

    `inside`: where the host sees its mounts (files, stage, cache), for the spawn messages.
    """

    def __init__(self, ctl_fd: int, inside: dict[str, str], preimport: list[str], tmp_mb: int = 512,
                 isolate: bool = False):
        self.ctl = socket.socket(fileno=ctl_fd)
        self.inside, self.tmp_mb = inside, tmp_mb
        self.isolate = isolate  # in a sandbox: each process in namespaces of its own (tito.grading.host)
        self.lock = threading.Lock()
        self.ctl.settimeout(SETUP_SECONDS)
        self._send({"op": "config", "preimport": preimport})
        self.ready: dict | None = None

    def wait_ready(self) -> dict:
        """The zygote's answer once its imports are done (asked for in __init__, awaited here, so
        the judge can work meanwhile)."""
        with self.lock:
            if self.ready is None:
                self.ready = self._recv()
                self.ctl.settimeout(30)
        return self.ready

    def _send(self, obj: dict, fds: list[int] = ()) -> None:
        control_send(self.ctl, obj, fds)

    def _recv(self) -> dict:
        return control_recv(self.ctl, "the student's sandbox ended")[0]

    def spawn(self, role: str, uid: int | None, setup: dict, gid: int | None = None,
              hide: list[str] = ()) -> tuple[int, socket.socket]:
        """Start a `role` process as `uid` (group `gid`, default the uid) that cannot see the folders
        `hide` (an empty read-only folder is mounted over each: tito.grading.host.isolate)."""
        mine, theirs = socket.socketpair()
        with self.lock:
            self._send({"op": "spawn", "role": role, "uid": uid, "gid": gid, "hide": list(hide), "setup": setup,
                        "isolate": self.isolate, "own_pids": self.isolate,
                        "tmp_mb": self.tmp_mb}, [theirs.fileno()])
            theirs.close()
            reply = self._recv()
        if type(reply.get("pid")) is not int:
            raise ProtocolError(f"the sandbox did not start a {role} process: {reply}")
        return reply["pid"], mine

    def kill(self, pid: int) -> str:
        with self.lock:
            self._send({"op": "kill", "pid": pid})
            reply = self._recv()
        return str(reply.get("ended", ""))

    def sweep(self, uid: int) -> int:
        """Kill every process of `uid` (a notebook's, once it is done)."""
        with self.lock:
            self._send({"op": "sweep", "uid": uid})
            return int(self._recv().get("swept", 0))

    def status(self, pid: int, wait: bool = False) -> str:
        with self.lock:
            self._send({"op": "status", "pid": pid, "wait": wait})
            return str(self._recv().get("ended", ""))

    def close(self) -> None:
        self.ctl.close()


# ---- one notebook -------------------------------------------------------------------------------

@dataclass
class Notebook:
    name: str                 # file stem, e.g. "results_dev"
    judge: dict               # plan.judge_plan
    host: list                # plan.host_plan
    feedback: list            # plan.feedback_cells
    pkg: Path                 # host path of the package folder
    scratch: Path             # host path of the folder judge and host share
    uid: int | None
    gid: int | None
    n_code: int
    source: dict              # the instructor's notebook (the tests' points)
    student: dict             # the student's notebook (tito.notebooks.nbfile.essentials: their feedback)
    release: dict             # the notebook as released: what the autograded notebook is rebuilt from
    feedback_uid: int | None = None  # the feedback run's own uid (group gid: it reads the package, not the scratch)


class Judge:
    """One student's notebooks, judged (module doc). `plan` is what tito wrote (tito.grading.job.JudgePlan):
    paths, the seed and the control channels to the host."""

    def __init__(self, plan: JudgePlan, out):
        self.plan, self.out = plan, out
        self.timeout = float(plan.timeout)
        self.lib = plan.lib
        self.root = Path(plan.work)
        self.timing: dict[str, float] = {}
        self.shared = plan.shared
        self.hosts: dict[str, HostProcess] = {}
        self.lock = threading.Lock()  # the results stream and the timing, written from two threads
        self.pending = dict(plan.channels)
        if self.shared:  # asked to import now: it works while the packages are exported here
            self.host_for("")
        self.notebooks: list[Notebook] = []

    def host_for(self, name: str) -> HostProcess:
        key = "" if self.shared else name
        if key not in self.hosts:
            ch = self.pending.pop(key)
            self.hosts[key] = HostProcess(ch.fd, ch.inside, self.plan.preimport, self.plan.tmp_mb, self.plan.isolated)
        return self.hosts[key]

    def ready(self, host: HostProcess) -> HostProcess:
        t0 = time.perf_counter()
        host.wait_ready()
        self.timing["host_ready_wait"] = self.timing.get("host_ready_wait", 0.0) + time.perf_counter() - t0
        return host

    def read_inputs(self) -> list[dict]:
        """The notebooks (sources with hidden tests, the student's) from the judge's folder, which is
        then emptied: nothing of the tests stays readable once a test runs."""
        inputs = Path(self.plan.inputs)
        out = [{"name": name, **{key: read_notebook(inputs / folder / f"{name}.ipynb") for key, folder in
                                 (("source", "sources"), ("student", "submitted"), ("release", "release"))}}
               for name in self.plan.notebooks]
        self.nbdev_config = (inputs / "pyproject.toml").read_text(encoding="utf-8")
        shutil.rmtree(inputs / "sources", ignore_errors=True)
        return out

    def prepare(self, inputs: list[dict]) -> list[Notebook]:
        """Each notebook's plans and package (nbdev's export of the student's cells over the
        byte-compiled reference); as root, its folders owned by the notebook's own uid."""
        t0 = time.perf_counter()
        nbdev_root = self.root / "nbdev"
        nbdev_root.mkdir(exist_ok=True)
        (nbdev_root / "pyproject.toml").write_text(self.nbdev_config, encoding="utf-8")
        root_mode = os.geteuid() == 0 and self.plan.isolated  # tito chose each notebook's uid (plan.uids)
        out = []
        for entry in inputs:
            name, source, student = entry["name"], entry["source"], entry["student"]
            merged = package.merged_notebook(source, student)
            stage = self.root / "stage" / name
            stage.mkdir(parents=True, exist_ok=True)
            package.build_package(Path(self.plan.reference) / self.lib, source, merged, f"{name}.ipynb", stage,
                                  nbdev_root)
            own = notebook_modules(source, self.lib)
            wanted = set(own) | {m for c in source.get("cells", []) if c.get("cell_type") == "code"
                                 for m in named_modules(plain_python(cell_source(c)), self.plan.imports)}
            # the reference of what this notebook imports, nothing more: no other module's byte code
            package.prune_package(stage / self.lib, reach(wanted, self.plan.imports), own)
            scratch = self.root / "scratch" / name
            scratch.mkdir(parents=True, exist_ok=True)
            uid = gid = self.plan.uids.get(name)
            fb_uid = self.plan.feedback_uids.get(name, uid)
            if root_mode and uid is not None:
                stage.chmod(0o750)  # the tests' and the feedback's uids (one group): no other notebook's
                scratch.chmod(0o700)  # the tests' uid only: the feedback run never sees what a test hands over
                for p in [stage, scratch, *stage.rglob("*")]:
                    os.lchown(p, uid, gid)
            out.append(Notebook(name, plans.judge_plan(source, self.lib), plans.host_plan(source, merged, self.lib),
                                plans.feedback_cells(student), stage, scratch, uid, gid,
                                sum(1 for c in student.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code"),
                                source, student, entry["release"], fb_uid))
        self.timing["prepare"] = time.perf_counter() - t0
        return out

    def others(self, host: HostProcess, nb: Notebook, scratch: bool = False) -> list[str]:
        """The other notebooks' packages (and `scratch` folders) in one zygote's sandbox: what each
        process of `nb` gets covered (a notebook's package holds the reference of modules graded in
        other notebooks)."""
        if not self.shared:
            return []
        rest = [o for o in self.notebooks if o.name != nb.name]
        return [f"{host.inside['stage']}/{o.name}" for o in rest] + ([str(o.scratch) for o in rest] if scratch else [])

    def scratch_mount(self, nb: Notebook) -> str:
        """The scratch folder as the notebook's host sandbox has it bound (all notebooks' in one zygote)."""
        return str(nb.scratch.parent if self.shared else nb.scratch)

    def setup_for(self, host: HostProcess, nb: Notebook, extra: dict) -> dict:
        stage = host.inside["stage"]
        pkg = f"{stage}/{nb.name}" if self.shared else stage
        return {"pkg": pkg, "files": host.inside["files"], "cache": host.inside.get("cache"), **extra}

    def run(self) -> None:
        t_all = time.perf_counter()
        # the tests import what the host imports: meanwhile, while the packages are exported here
        warm = threading.Thread(target=_import_all, args=(self.plan.preimport,), daemon=True)
        warm.start()
        notebooks = self.notebooks = self.prepare(self.read_inputs())
        # the pages are rendered in a process of their own (nbconvert is seconds of CPU a notebook, which
        # must not hold the tests' interpreter), driven by one thread that sends each result in turn
        reporter, renders = ThreadPoolExecutor(1, thread_name_prefix="report"), []
        self.renderer = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_bound_memory, initargs=(RENDER_MB,))
        if self.shared:
            fb = FeedbackRunner(self, notebooks)
            fb.start()
        for nb in notebooks:
            try:
                host = self.ready(self.host_for(nb.name))
            except Exception as e:  # noqa: BLE001 - that notebook's failure, reported
                with self.lock:
                    write_frame(self.out, self.failed(nb, f"the sandbox did not start: {type(e).__name__}: {e}"))
                continue
            if not self.shared:
                fb = FeedbackRunner(self, [nb])
                fb.start()
                later = notebooks[notebooks.index(nb) + 1:]
                if later:
                    self.host_for(later[0].name)  # the next notebook's sandbox imports meanwhile
            result = self.run_tests(host, nb)
            fb.wait_for(nb.name)
            if nb.uid is not None and self.shared:
                try:  # what the notebook's code left running (a process that left its group too)
                    result["swept"] = host.sweep(nb.uid) + (
                        host.sweep(nb.feedback_uid) if nb.feedback_uid not in (None, nb.uid) else 0)
                except (OSError, EOFError, ProtocolError, ValueError):
                    pass
            renders.append(reporter.submit(self.report, nb, result,
                                           fb.results.get(nb.name, {"cells": {}, "stopped": "feedback did not run"})))
            if not self.shared:
                host.close()
        for host in self.hosts.values():
            host.close()
        for r in renders:
            r.result()
        reporter.shutdown()
        self.renderer.shutdown()
        self.timing["total"] = time.perf_counter() - t_all
        with self.lock:
            write_frame(self.out, {"done": True, "timing": {k: round(v, 3) for k, v in self.timing.items()}})

    def report(self, nb: Notebook, result: dict, fb_result: dict) -> None:
        """Render the notebook's feedback (tito.grading.feedback), then send its result frame."""
        t0 = time.perf_counter()
        v = feedback.verdicts(nb.source, result.get("tests", {}))
        score, most = sum(x["points"] for x in v.values()), sum(x["max"] for x in v.values())
        args = (self.root / "out", nb.name, nb.release, nb.student, fb_result, v,
                f"{nb.name}: {feedback.num(score)} of {feedback.num(most)} autograded points")
        try:
            info = self.renderer.submit(feedback.render, *args).result()
        except Exception as e:  # noqa: BLE001 - the renderer process died (a loaded machine once): render here
            with self.lock:
                self.timing["render_fallbacks"] = self.timing.get("render_fallbacks", 0) + 1
            try:
                info = feedback.render(*args)
            except Exception as e2:  # noqa: BLE001 - the verdicts stand without their page
                info = {"cell_errors": [f"the feedback could not be written: {type(e).__name__}: {e}; "
                                        f"{type(e2).__name__}: {e2}"], "timed_out": False}
        result.update(cell_errors=info["cell_errors"], feedback_timed_out=info["timed_out"],
                      feedback_stopped=fb_result.get("stopped", ""))
        with self.lock:
            self.timing["render"] = self.timing.get("render", 0.0) + time.perf_counter() - t0
            write_frame(self.out, result)

    def failed(self, nb: Notebook, why: str) -> dict:
        tests = {c["grade_id"]: {"ok": False, "message": why} for c in nb.judge["cells"] if c["kind"] == "test"}
        return {"notebook": nb.name, "tests": tests, "setup_errors": [why], "feedback": {"cells": {}, "stopped": why},
                "grading_failed": True}  # tito's failure, not the student's (per_student: GRADING_FAILED)

    # tests
    def run_tests(self, host: HostProcess, nb: Notebook) -> dict:
        t0 = time.perf_counter()
        env_before = dict(os.environ)
        os.environ["TITO_GRADING_SEED"] = str(self.plan.seed)
        os.environ["TMPDIR"] = str(nb.scratch)
        tempfile.tempdir = str(nb.scratch)
        cwd = os.getcwd()
        as_uid = nb.uid is not None
        if as_uid:  # what the tests write is the notebook's uid's, what they read is what that uid may
            os.setegid(nb.gid)
            os.seteuid(nb.uid)
        os.chdir(nb.scratch)
        run = NotebookTests(self, host, nb)
        try:
            tests = run.run()
        finally:
            os.chdir(cwd)
            if as_uid:
                os.seteuid(0)
                os.setegid(0)
            tempfile.tempdir = None
            os.environ.clear()
            os.environ.update(env_before)
            run.close()
        self.timing["tests"] = self.timing.get("tests", 0.0) + time.perf_counter() - t0
        return {"notebook": nb.name, "tests": tests, "setup_errors": list(dict.fromkeys(run.setup_errors)),
                "seconds": round(time.perf_counter() - t0, 3)}


def _bound_memory(mb: int) -> None:
    """This process's address space at most `mb` MiB (the page renderer: what a student's notebook makes it
    build is bounded already; this bounds it again)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mb << 20 if hard == resource.RLIM_INFINITY else min(mb << 20, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _empty(folder: Path) -> None:
    """Remove everything in `folder`, never following a link out of it (folders the student's code made
    unwritable made writable first); raises OSError when something is left."""
    if not os.path.isdir(folder):
        return
    for top, _, _ in os.walk(folder):
        try:
            os.chmod(top, 0o700)
        except OSError:
            pass
    for entry in list(os.scandir(folder)):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                pass
    left = os.listdir(folder)
    if left:
        raise OSError(f"the folder the tests share could not be emptied ({len(left)} entries left)")


def _import_all(names: list[str]) -> None:
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a test that needs it reports the failure
            pass


class NotebookTests:
    """The judge's side of one notebook's tests (module doc, step 3)."""

    def __init__(self, judge: Judge, host: HostProcess, nb: Notebook):
        self.judge, self.host, self.nb = judge, host, nb
        self.timeout = judge.timeout
        self.session: Session | None = None
        self.pid: int | None = None
        self.ns: dict[str, Any] = {}
        self.setup_errors: list[str] = []
        self.host_errors: list[dict] = []
        self.property: tuple[str, str | None] | None = None  # the running test's last hidden_property

    def close(self) -> None:
        self._drop_session()

    def _drop_session(self) -> None:
        if self.session is not None:
            try:
                self.session.endpoint.sock.close()
            except OSError:
                pass
        if self.pid is not None:
            try:
                self.host.kill(self.pid)
            except (OSError, EOFError, ProtocolError, ValueError):
                pass
        self.session = self.pid = None

    def fresh(self, upto: int, limit: float | None = None) -> None:
        """A new test process and namespace, with every cell before `upto` (no tests) applied, and an empty
        scratch folder (the one folder a test process shares with the next); `limit`: seconds for importing the
        student's code and for each of those cells (default: the per-test timeout)."""
        limit = limit or self.timeout
        self._drop_session()
        _empty(self.nb.scratch)
        self.pid, sock = self.host.spawn("tests", self.nb.uid, self.judge.setup_for(self.host, self.nb, {}),
                                         hide=self.judge.others(self.host, self.nb, scratch=True))
        self.session = Session(sock, set(self.nb.judge["modules"]), self.judge.lib)
        module = types.ModuleType(NAMESPACE)  # a real module: a dataclass in a setup cell looks it up
        sys.modules[module.__name__] = module
        self.ns = module.__dict__
        self.ns["__builtins__"] = builtins
        self._hook()
        self.host_errors = self._timed(lambda: self.session.request("setup", cells=self.nb.host), limit) or []
        if not isinstance(self.host_errors, list):
            self.host_errors = []
        for cell in self.nb.judge["cells"]:
            if cell["index"] >= upto:
                break
            if cell["kind"] != "test":
                self.apply(cell, limit)

    def _hook(self) -> None:
        session = self.session

        def in_student_process(fn, *args, **kwargs):
            if not callable(fn) or not isinstance(fn, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
                raise NotSendable(f"in_student_process runs a function, got a {type(fn).__name__}")
            session.running = True  # no object of the test's classes crosses with it (remote.refuse_data)
            try:
                sent = {"fn": {"$pk": session.pickle(fn, run=True)}, "args": session.encode(list(args)),
                        "kwargs": session.encode(kwargs)}
            finally:
                session.running = False
            return session.request("run", **sent)

        self.ns[HOOK] = in_student_process
        self.ns[PROPERTY] = self._hidden_property

    def _hidden_property(self, what: str, like: str | None = None) -> None:
        """What the hidden cases that follow check, in words (and the visible test that shows the same
        mistake): all a student learns when one of them fails (`describe`)."""
        if type(what) is not str or not what.strip() or not (like is None or type(like) is str):
            raise TypeError("hidden_property(what, like=None): expected a sentence (str) and an optional str")
        self.property = (what.strip(), like.strip() if like else None)

    def _timed(self, fn, seconds: float):
        def alarm(signum, frame):
            raise TestTimeout()

        old = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    def apply(self, cell: dict, limit: float | None = None) -> None:
        kind = cell["kind"]
        limit = limit or self.timeout
        try:
            if kind in ("setup", "imports"):
                self._timed(lambda: exec(compile(cell["source"], f"<cell {cell['index']}>", "exec"), self.ns),  # noqa: S102
                            limit)
                if kind == "setup":
                    self._hook()
            elif kind == "names":
                for name in cell["names"]:
                    self.ns[name] = self._lookup(name, limit)
        except TestTimeout:
            self.setup_errors.append(f"cell {cell['index']}: timed out after {limit:.0f} s")
        except Exception as e:  # noqa: BLE001 - a failing setup cell shows up in the tests that use it
            self.setup_errors.append(f"cell {cell['index']}: {type(e).__name__}: {str(e)[:300]}")

    def _lookup(self, name: str, limit: float | None = None) -> Any:
        try:
            return self._timed(lambda: self.session.request("name", name=name), limit or self.timeout)
        except NameError as e:
            why = "; ".join(f"{err['where']}: {err['error']}" for err in self.host_errors if err.get("kind") == "import")
            return Missing(name, why or str(e))

    def run(self) -> dict[str, dict]:
        tests: dict[str, dict] = {}
        try:
            self.fresh(0)
        except (Exception, TestTimeout) as e:  # noqa: BLE001 - no test process: every test fails with the reason
            why = "your code's test process did not start: " + (
                f"importing your code took longer than {self.timeout:.0f} s" if isinstance(e, TestTimeout)
                else f"{type(e).__name__}: {e}")
            return {c["grade_id"]: {"ok": False, "message": why}
                    for c in self.nb.judge["cells"] if c["kind"] == "test"}
        used = False  # whether the test process has run a test: each test gets one that has not
        for cell in self.nb.judge["cells"]:
            if cell["kind"] != "test":
                self.apply(cell)
                continue
            if used or self.session is None or self.session.endpoint.broken:
                # a fresh process and namespace: nothing a test handed the student's code (a hidden case's
                # inputs, kept in a global or a file) reaches a later test, or its message. Its set-up has the
                # time a set-up may take (the first import of their code had the test's): on a loaded machine
                # a restart must not cost an honest student a test (it costs any student their budget only)
                limit = max(self.timeout, SETUP_SECONDS)
                try:
                    self.fresh(cell["index"], limit)
                except (Exception, TestTimeout) as e:  # noqa: BLE001
                    why = "your code's test process could not be restarted: " + (
                        f"importing your code took longer than {limit:.0f} s" if isinstance(e, TestTimeout)
                        else f"{type(e).__name__}: {e}")
                    for c in self.nb.judge["cells"]:
                        if c["kind"] == "test" and c["grade_id"] not in tests:
                            tests[c["grade_id"]] = {"ok": False, "message": why}
                    return tests
            tests[cell["grade_id"]] = self.run_test(cell)
            used = True
        return tests

    def run_test(self, cell: dict) -> dict:
        self.ns["__name__"] = "__main__"
        self.property = None
        ok, message = False, ""
        session = self.session
        mark = session.callback_mark() if session is not None else 0
        try:
            self._timed(lambda: exec(compile(cell["source"], f"<test {cell['grade_id']}>", "exec"), self.ns),  # noqa: S102
                        self.timeout)
            ok = True
        except TestTimeout:
            message = f"timed out: the test ran longer than {self.timeout:.0f} s"
            if self.session is not None and self.session.endpoint.broken:
                message += " (your code had not returned)"
        except BaseException as e:  # noqa: BLE001 - every failure is the test's verdict, with its reason
            message = self.describe(e, cell)
        finally:
            self.ns["__name__"] = NAMESPACE
            if session is not None:  # what this test handed the student's code can no longer be called
                session.revoke(mark)
        return {"ok": ok, "message": plain_text(message)}  # no time: a hidden case's time tells its size

    def describe(self, e: BaseException, cell: dict) -> str:
        """What went wrong, for the student: never a line of a hidden test."""
        if isinstance(e, (ChannelBroken, EOFError, ConnectionError)) or (
                isinstance(e, OSError) and self.session is not None and self.session.endpoint.broken):
            ended = ""
            if self.pid is not None:
                try:
                    ended = self.host.status(self.pid, wait=True)
                except (OSError, EOFError, ProtocolError, ValueError):
                    ended = ""
            return f"your code's process stopped during this test ({ended or 'it closed the channel'})"
        if isinstance(e, TooLarge):  # a value the judge does not take (its memory is not the student's)
            return f"your code's process sent {e} (a value your code returned or passed to the test): not read"
        if isinstance(e, ProtocolError):
            return f"your code's process sent something that is not data: {e}"
        if isinstance(e, NotSendable):  # the test's fault: names, no values
            return f"the test could not be run: {e}"
        line, hidden = _failing_line(e, cell)
        if hidden:
            return self.hidden_failure(e)
        host = getattr(e, "__tito_host__", None)
        if isinstance(e, AssertionError):
            msg = str(e).strip()
            if not msg:
                return "assertion failed" + (f": {line}" if line else "")
            return msg
        name = type(e).__name__
        msg = str(e).strip()
        if isinstance(e, NotImplementedError) and msg.startswith("not yet implemented"):
            return msg
        text = f"{name}: {msg}" if msg else name
        if host:
            text += " (raised in your code)"
            if isinstance(e, NameError):
                text += (" -- your module holds only your exported cells: a name from a cell that is not "
                         "exported (an import, a helper you added) is not in it; import or define it in your solution")
            tb = _student_traceback(host.get("traceback", ""))
            if tb:
                text += "\n" + tb
        else:
            text += f" at: {line}" if line else ""
        return text

    def hidden_failure(self, e: BaseException) -> str:
        """A failed hidden case, for the student: the property it checks (the test's `hidden_property`)
        and the kind of failure, never its inputs, its expected value or what came back. Of an exception
        the student's code raised only its built-in kind: its message, class name and traceback are the
        student's own text, which could carry the case's inputs out."""
        if isinstance(e, NotImplementedError) and STUB.fullmatch(str(e).strip()):
            return str(e).strip()  # the release's stub, naming the function (any other text could carry inputs)
        what, like = self.property or (None, None)
        text = "a hidden case failed" + (f": {what}" if what else " (hidden cases check the same work on other inputs)")
        if like:
            text += f"; the visible test shows the same mistake: {like}"
        if getattr(e, "__tito_host__", None):
            base = next((c.__name__ for c in type(e).__mro__ if getattr(builtins, c.__name__, None) is c), "Exception")
            text += f" -- your code raised {base}"
            if isinstance(e, NameError):
                text += " (a name your exported cells use but do not define or import)"
        elif not isinstance(e, AssertionError):
            text += f" -- {type(e).__name__}"
        return text + " (its inputs and expected values are not shown; each submission gets fresh ones)"


class Missing:
    """A name the test needs that the student's code does not define (or could not be imported)."""

    def __init__(self, name: str, why: str):
        self._name, self._why = name, why

    def _fail(self, *a, **k):
        raise NameError(f"{self._name!r} is not available from your code: {self._why}")

    __call__ = __getattr__ = __getitem__ = __iter__ = __len__ = _fail

    def __repr__(self):
        return f"<missing {self._name}>"


def _failing_line(e: BaseException, cell: dict) -> tuple[str, bool]:
    """(source line of the test where `e` arose, whether that line is in or after a hidden region)."""
    lineno = None
    for frame, n in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == f"<test {cell['grade_id']}>":
            lineno = n
    if lineno is None:
        return "", False
    # from the first hidden region on, a line is hidden: what a hidden case handed the student's code may
    # come back in a later visible assertion of the same cell
    hidden = any(a <= lineno for a, _ in cell.get("hidden", []))
    lines = cell["source"].split("\n")
    return (lines[lineno - 1].strip()[:200] if 0 < lineno <= len(lines) else ""), hidden


def _student_traceback(tb: str, keep: int = 6) -> str:
    """The last frames of the student's traceback, without the host's own machinery."""
    lines = [l for l in tb.splitlines() if l.strip()]
    out, skip = [], False
    for line in lines:
        if line.startswith("  File ") and ("tito/grading/" in line or "tito/isolation/" in line):
            skip = True
            continue
        if line.startswith("  File "):
            skip = False
        if not skip:
            out.append(line)
    body = [l for l in out if not l.startswith("Traceback")]
    return "\n".join(body[-keep:]) if len(body) > 1 else ""


# ---- feedback ----------------------------------------------------------------------------------

class FeedbackRunner(threading.Thread):
    """Runs the notebooks' feedback processes one after another, beside the tests."""

    def __init__(self, judge: Judge, notebooks: list[Notebook]):
        super().__init__(daemon=True)
        self.judge, self.notebooks = judge, notebooks
        self.results: dict[str, dict] = {}
        self.done: dict[str, threading.Event] = {nb.name: threading.Event() for nb in notebooks}

    def wait_for(self, name: str) -> None:
        nb = next(n for n in self.notebooks if n.name == name)
        self.done[name].wait(self.budget(nb) + SETUP_SECONDS + 30)

    def budget(self, nb: Notebook) -> float:
        t = self.judge.timeout
        return max(60.0, min(3 * t + 60, t * max(1, nb.n_code)))

    def run(self) -> None:
        for nb in self.notebooks:
            t0 = time.perf_counter()
            try:
                self.results[nb.name] = self.one(nb)
            except Exception as e:  # noqa: BLE001 - feedback is best effort; the grade does not depend on it
                self.results[nb.name] = {"cells": {}, "stopped": f"the notebook could not run: {type(e).__name__}: {e}"}
            finally:
                with self.judge.lock:
                    spent = time.perf_counter() - t0
                    self.judge.timing["feedback"] = self.judge.timing.get("feedback", 0.0) + spent
                    self.judge.timing[f"feedback:{nb.name}"] = spent
                self.done[nb.name].set()

    def one(self, nb: Notebook) -> dict:
        host = self.judge.ready(self.judge.host_for(nb.name))
        setup = self.judge.setup_for(host, nb, {"cells": nb.feedback, "timeout": self.judge.timeout})
        # its own uid (as root) and no scratch folder: nothing the tests' run writes or hands over reaches
        # the student's feedback, which a resubmitting student reads
        pid, sock = host.spawn("feedback", nb.feedback_uid, setup, gid=nb.gid,
                               hide=[self.judge.scratch_mount(nb), *self.judge.others(host, nb)])
        deadline = time.monotonic() + self.budget(nb)
        cells: dict[str, Any] = {}
        used, stopped = 0, ""
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    stopped = f"stopped at its time limit of {self.budget(nb):.0f} s"
                    break
                sock.settimeout(left)
                try:
                    m = recv(sock, MAX_HOST_FRAME)
                except socket.timeout:
                    stopped = f"stopped at its time limit of {self.budget(nb):.0f} s"
                    break
                except EOFError:
                    ended = host.status(pid, wait=True)
                    stopped = f"the notebook's process ended ({ended or 'closed'})"
                    break
                if m.get("done") is True:
                    stopped = str(m.get("stopped") or "")[:500]
                    break
                if type(m.get("cell")) is int and used < FEEDBACK_BYTES:
                    used += len(json.dumps(m))
                    cells[str(m["cell"])] = {"outputs": m.get("outputs"), "execution_count": m.get("execution_count")}
        except ProtocolError as e:
            stopped = f"the notebook's process sent something malformed: {e}"
        finally:
            sock.close()
            host.kill(pid)
        return {"cells": cells, "stopped": stopped}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tito.grading.autograder PLAN.json", file=sys.stderr)
        return 2
    plan = JudgePlan.from_json(Path(argv[1]).read_text(encoding="utf-8"))
    out = open(plan.results, "ab")  # frames, one per notebook as it is done
    Path(argv[1]).unlink()  # the plan is read: nothing of it stays readable to a test
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # what the tests print goes nowhere
    sys.stdout = open(os.devnull, "w", encoding="utf-8")
    if plan.cache:
        os.environ["TINYTORCH_CACHE"] = plan.cache
    os.environ.setdefault("MPLBACKEND", "Agg")
    Judge(plan, out).run()
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
