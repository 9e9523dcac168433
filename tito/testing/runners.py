"""Building blocks shared by `tito test`, `tito module complete` and (later) `tito grade`.

Every runner returns a StageResult: counts, seconds, and one line per failure.
"""
from __future__ import annotations

import functools
import importlib.util
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tito.isolation import process
from tito.testing import kernels as kernels_mod
from tito.notebooks.nbfile import notebook_node


@dataclass
class StageResult:
    name: str
    run: int = 0
    passed: int = 0
    failed: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # "where: what", first is the first failure
    skipped_reason: str | None = None
    details: list[dict] = field(default_factory=list)
    slowest: list[tuple[str, float]] = field(default_factory=list)  # (test, seconds), slowest first

    @property
    def ok(self) -> bool:
        return self.failed == 0 and not (self.run == 0 and self.skipped_reason is None)

    def add(self, ok: bool, failure: str | None = None) -> None:
        self.run += 1
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            if failure:
                self.failures.append(failure)



def default_jobs() -> int:
    """How many test processes `tito test` runs at once: $TITO_JOBS, else the machine's cores, at most 4
    (the suite holds beside a CPU hog, so its own parallel processes are load it is built to survive). Not
    more than the cores: the suite keeps them busy (a cpuacct cgroup: ~1.8 of 2 cores at 3 workers), and on 2
    cores 3 workers made pytest slower, 705 -> 776 s quiet, its tests' summed time 1,386 -> 2,266 s
    (docs/performance.md, "Issue 43, round 3")."""
    env = os.environ.get("TITO_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"TITO_JOBS: expected a whole number >= 1, got {env!r}")
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


def _ordered_map(fn: Callable[[Any], Any], items: list, jobs: int, pool: type = ThreadPoolExecutor,
                 **pool_kwargs: Any) -> list:
    "fn over items, `jobs` at a time, results in the items' order (serial when jobs is 1)."
    if jobs <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with pool(min(jobs, len(items)), **pool_kwargs) as ex:
        return list(ex.map(fn, items))


def run_inline(files: list[Path], timeout: float = 900, verbose: bool = False,
               stage: StageResult | None = None, root: Path | None = None, jobs: int = 1,
               preload: list[str] | None = None) -> StageResult:
    """Run each source file's inline tests in a fresh process, `jobs` files at a time: a child forked from a job
    server (tito.testing.job_server) that imported the third-party libraries once (`preload`, default
    tito.testing.inline_runner.PRELOAD), never the code under test, as `tito module complete` runs them. Each
    process used to import torch & co itself: the course's 16 files took 67.6 CPU-s that way, 17.8 CPU-s forked
    (docs/performance.md, "The test command"). `seconds` is the stage's wall time.

    One test function = one counted test. A file that fails to load, holds no tests, or
    crashes the runner counts as one failed test of its own.
    """
    from tito.config import TitoError
    from tito.testing.job_server import JobServer

    st = stage or StageResult("inline tests")
    t0 = time.perf_counter()
    ended: dict[int, dict] = {}
    lost = ""
    with tempfile.TemporaryDirectory(prefix="tito-inline-") as tmp:
        if files:
            server = JobServer(Path(root or Path.cwd()), process.child_env(), max(1, jobs), Path(tmp) / "server.log",
                               preload)
            try:
                for i, f in enumerate(files):
                    server.submit({"id": i, "kind": "inline", "file": str(f), "log": f"{tmp}/{i}.log",
                                   "result": f"{tmp}/{i}.json", "timeout": timeout})
                while server.pending:
                    try:
                        msg = server.next()
                    except TitoError as e:  # the server itself died: the files it had not reported fail, saying so
                        lost = str(e)
                        break
                    log = Path(tmp) / f"{msg['id']}.log"
                    ended[msg["id"]] = {**msg, "log": log.read_text(encoding="utf-8", errors="replace") if log.exists()
                                        else ""}
            finally:
                server.close()
    st.seconds += time.perf_counter() - t0
    for i, f in enumerate(files):
        rel = _rel(f, root)
        if i not in ended:
            st.add(False, f"{rel}: not run: {lost}")
            st.details.append({"file": str(f), "ok": False, "error": lost, "tests": []})
            continue
        msg = ended[i]
        err, res = msg["log"], msg["result"]
        if msg["timed_out"]:
            err, res = f"timed out after {timeout:.0f} s", None
        if res is None:
            st.add(False, f"{rel}: runner crashed (exit {msg['exit']}): {_tail(err)}")
            st.details.append({"file": str(f), "ok": False, "error": _tail(err), "tests": []})
            continue
        st.details.append(res)
        if verbose and err.strip():
            print(err, file=sys.stderr)
        for t in res["tests"]:
            st.add(t["status"] == "passed", f"{rel}::{t['name']}: {t['error']}")
        if res["error"]:
            st.add(False, f"{rel}: {res['error']}" + (f"\n{_tail(err)}" if "load" in res["error"] else ""))
    return st


def run_notebook(path: Path, timeout: int = 300, kernels: str | None = None) -> tuple[bool, str | None, float]:
    """Execute notebook `path` with nbclient (kernel python3 = this venv's python; cwd = its folder); with `kernels`
    (a tito.testing.kernels.KernelServer's spec_dir) its kernel is forked by that server.

    Returns (ok, error, seconds); error names the failing cell and its exception.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    t0 = time.perf_counter()
    nb = notebook_node(path)
    old = dict(os.environ)
    os.environ.update(process.child_env())
    kernel_err = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    try:
        # the kernel's own stderr (ipykernel's transport warning, crashes) goes to a file,
        # shown only when the kernel dies
        for attempt in (1, 2):
            how = kernels_mod.client_args(kernels) if kernels else {"kernel_name": "python3"}
            client = NotebookClient(nb, timeout=timeout, resources={"metadata": {"path": str(path.parent)}}, **how)
            try:
                client.execute(stderr=kernel_err)
                break
            except RuntimeError as e:
                # A kernel that dies before its first reply ran no cell: on a busy machine two kernels started
                # at once can race for the same free port (jupyter_client picks ports before binding them).
                # Start once more; a kernel that cannot start at all fails the second time too.
                if attempt == 2 or not str(e).startswith("Kernel died before replying to kernel_info"):
                    raise
        return True, None, time.perf_counter() - t0
    except CellExecutionError as e:
        idx = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        where = f"cell {idx}" if idx is not None else "a cell"
        first = (nb.cells[idx].source.strip().splitlines() or [""])[0][:70] if idx is not None else ""
        return False, f"{where} ({first!r}): {e.ename}: {e.evalue}", time.perf_counter() - t0
    except (CellTimeoutError, DeadKernelError, RuntimeError) as e:
        kernel_err.seek(0)
        tail = _tail(kernel_err.read(), 4) if isinstance(e, (DeadKernelError, RuntimeError)) else ""
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return False, f"{type(e).__name__}: {first}" + (f"\n{tail}" if tail else ""), time.perf_counter() - t0
    finally:
        kernel_err.close()
        os.environ.clear()
        os.environ.update(old)


def run_notebooks(paths: list[Path], timeout: int, root: Path | None = None,
                  time_limit: float | None = None, jobs: int = 1) -> StageResult:
    """Execute each notebook, `jobs` at a time (each in a process of its own: run_notebook sets the
    environment); one that errors, or takes longer than `time_limit` s, fails. `seconds`: wall time."""
    st = StageResult("notebooks")
    t0 = time.perf_counter()
    # each kernel forked from one server that imported torch & co once (tito.testing.kernels)
    runs = []
    if paths:
        with kernels_mod.KernelServer(env=process.child_env()) as server:
            runs = _ordered_map(functools.partial(run_notebook, timeout=timeout, kernels=str(server.spec_dir)), paths,
                                jobs, ProcessPoolExecutor, mp_context=multiprocessing.get_context("spawn"))
    st.seconds = time.perf_counter() - t0
    for p, (ok, err, secs) in zip(paths, runs):
        if ok and time_limit is not None and secs > time_limit:
            ok, err = False, f"took {secs:.0f} s, over the {time_limit:.0f} s limit (settings.ini notebook_time_limit)"
        st.add(ok, f"{_rel(p, root)}: {err}")
        st.details.append({"notebook": str(p), "ok": ok, "error": err, "seconds": round(secs, 3)})
    return st


def run_pytest(targets: list[Path], root: Path, extra: list[str] | None = None,
               name: str = "pytest", timeout: float | None = None, jobs: int = 1, report: Path | None = None,
               progress: Callable[[str], None] | None = None) -> StageResult:
    """`python -m pytest -q TARGETS` in `root`; counts read from a JUnit XML report, kept at `report` (default: a
    temporary file). With `jobs` > 1, pytest-xdist runs the files in `jobs` workers, each file's tests in one
    worker (`--dist loadfile`: a module's fixture is built once). Each test has its own time limit
    (pytest-timeout, `timeout` in pyproject.toml's pytest options), so one slow test fails alone; `timeout`
    here bounds the whole stage only when given. `progress` gets a line now and then while it runs
    (tests done of the total, the slowest so far: tito.testing.pytest_progress). `StageResult.slowest`: the ten
    slowest tests (id, seconds: setup + call + teardown).

    Collection errors and 'no tests collected' (exit 5) are failures.
    """
    st = StageResult(name)
    parallel = (["-n", str(jobs), "--dist", "loadfile", "--no-loadscope-reorder"]  # tests/conftest.py orders the files
                if jobs > 1 and importlib.util.find_spec("xdist") else [])
    with tempfile.TemporaryDirectory(prefix="tito-pytest-") as tmp:
        xml = Path(report) if report else Path(tmp) / "report.xml"
        xml.parent.mkdir(parents=True, exist_ok=True)
        xml.unlink(missing_ok=True)
        read_fd, write_fd = os.pipe()
        reader = threading.Thread(target=_relay, args=(read_fd, progress), daemon=True)
        reader.start()
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tito.testing.pytest_progress",
               f"--junitxml={xml}", *parallel, *(extra or []), *[str(t) for t in targets]]
        env = {**process.child_env(), "TITO_PROGRESS_FD": str(write_fd)}
        if not (Path(root) / "tito").is_dir():  # the progress plugin is tito's: importable from any folder
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                              env.get("PYTHONPATH", "")]))
        try:
            p = process.run(cmd, cwd=root, env=env, timeout=timeout, pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
            reader.join(timeout=10)
        out, rc = p.output, p.returncode
        if p.timed_out:
            out, rc = f"pytest timed out after {timeout:.0f} s", -1
        st.seconds = p.seconds
        cases = parse_junit(xml)
        for c in cases:
            st.add(c["ok"], None if c["ok"] else f"{c['id']}: {c['message']}")
        st.slowest = sorted(((c["id"], c["seconds"]) for c in cases), key=lambda x: -x[1])[:10]
    st.details.append({"cmd": cmd, "exit": rc, "output": out, **({"report": str(report)} if report else {})})
    if rc == 5:
        st.add(False, "pytest: no tests collected (exit 5)")
    elif rc not in (0, 1) or (rc == 1 and st.failed == 0):
        st.add(False, f"pytest exited {rc}: {_tail(out)}")
    return st


def _relay(fd: int, progress: Callable[[str], None] | None) -> None:
    """Hand each line written to `fd` to `progress` (or drop it), until every writer has closed it."""
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        for line in f:
            if progress is not None and line.strip():
                progress(line.rstrip("\n"))


def parse_junit(xml: Path) -> list[dict]:
    """One {"id", "ok", "message", "seconds"} per test case of a JUnit XML report (skips left out)."""
    if not xml.exists():
        return []
    try:
        cases = list(ET.parse(xml).getroot().iter("testcase"))
    except ET.ParseError:
        return []
    out = []
    for c in cases:
        bad = c.find("failure") if c.find("failure") is not None else c.find("error")
        if c.find("skipped") is not None and bad is None:
            continue
        msg = ((bad.get("message") or "").strip().splitlines() or [""])[0] if bad is not None else None
        try:
            seconds = float(c.get("time") or 0.0)
        except ValueError:
            seconds = 0.0
        out.append({"id": f"{c.get('classname', '')}::{c.get('name', '')}".strip(":"), "ok": bad is None,
                    "message": msg, "seconds": seconds})
    return out


def _tail(text: str, n: int = 6) -> str:
    return process.tail(text, n)


def _rel(p: Path, root: Path | None) -> str:
    try:
        return str(Path(p).resolve().relative_to(Path(root or Path.cwd()).resolve()))
    except ValueError:
        return str(p)


def print_table(stages: list[StageResult], title: str = "summary", show_failures: bool = True) -> tuple[int, int]:
    """Print the per-stage table, every failure (unless not `show_failures`: the caller listed
    them already), and the closing `N passed, N failed` line."""
    rows = [(s.name, str(s.run), str(s.passed), str(s.failed), f"{s.seconds:.1f}",
             "skipped: " + s.skipped_reason if s.skipped_reason else ("ok" if s.ok else "FAILED"))
            for s in stages]
    hdr = ("stage", "run", "passed", "failed", "seconds", "result")
    w = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    fmt = lambda r: "  ".join(c.ljust(w[i]) if i in (0, 5) else c.rjust(w[i]) for i, c in enumerate(r))
    print()
    print(f"== {title} ==")
    print(fmt(hdr))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print(fmt(r))
    tp = sum(s.passed for s in stages)
    tf = sum(s.failed for s in stages)
    print(fmt(("total", str(sum(s.run for s in stages)), str(tp), str(tf),
               f"{sum(s.seconds for s in stages):.1f}", "ok" if tf == 0 else "FAILED")))
    fails = [(s.name, f) for s in stages for f in s.failures]
    if fails and show_failures:
        print()
        print("failures:")
        for name, f in fails:
            print(f"  [{name}] {f}")
    print()
    print(f"{tp} passed, {tf} failed")
    return tp, tf
