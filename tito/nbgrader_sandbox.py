"""nbgrader's Execute step, sandboxed: `SandboxedExecute` replaces nbgrader's `Execute` in
`nbgrader autograde` when `tito grade` runs it (see nbgrader_glue.GRADE_CONFIG).

nbgrader itself (cell restoring, the gradebook, feedback) runs in tito's own process; only the
student's code runs in sandboxes. For each notebook:

1. build the package it imports (tito.grading_package): the course's reference package with
   this notebook's modules exported from the student's own solution cells;
2. in two separate sandboxes (tito.sandbox), at the same time: run the notebook in a fresh
   kernel (tito.sandbox_driver exec), and run its graded tests with hidden tests in a separate
   process against that package (tito.sandbox_driver tests);
3. copy the kernel's outputs (sanitized, capped) into the notebook nbgrader grades, and add an
   error to every graded cell that failed in the test process, or that either run did not reach.

A graded cell therefore earns its points only when it passes in the student's notebook AND in
the separate test process: code that patches the kernel (`math.isclose = lambda *a: True`) or
imports the reference solution gains nothing.

The run's settings come from the JSON file named by $TITO_GRADE_PLAN (written by tito grade):
source_dir, reference_lib, nbdev_root, cache_dir, bwrap, limits, timeout, scratch, driver.
"""
from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nbformat import NotebookNode
from nbformat.v4 import new_output

from tito import grading_package, sandbox
from tito.sandbox_driver import RESULT_PREFIX

PLAN_ENV = "TITO_GRADE_PLAN"
MIME_KEEP = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml")
CELL_OUTPUT_BYTES = 200_000


def _text(v, limit: int = CELL_OUTPUT_BYTES) -> str:
    v = "".join(v) if isinstance(v, list) else v
    return v[:limit] if isinstance(v, str) else ""


def sanitize_outputs(outputs) -> list[NotebookNode]:
    """Outputs from the sandbox, rebuilt field by field (only known output types and mime types,
    strings only, size-capped), so they cannot break or inflate the graded notebook.

    >>> sanitize_outputs([{"output_type": "stream", "name": "stdout", "text": "hi"}, {"output_type": "x"}])[0]["text"]
    'hi'
    """
    out: list[NotebookNode] = []
    budget = CELL_OUTPUT_BYTES
    for o in outputs if isinstance(outputs, list) else []:
        if not isinstance(o, dict) or budget <= 0:
            continue
        kind = o.get("output_type")
        if kind == "stream":
            node = new_output("stream", name="stderr" if o.get("name") == "stderr" else "stdout",
                              text=_text(o.get("text", ""), budget))
        elif kind == "error":
            tb = [_text(t, 5000) for t in o.get("traceback", [])[:60]] if isinstance(o.get("traceback"), list) else []
            node = new_output("error", ename=_text(o.get("ename", "Error"), 200) or "Error",
                              evalue=_text(o.get("evalue", ""), 2000), traceback=tb)
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") if isinstance(o.get("data"), dict) else {}
            data = {k: _text(v, budget) for k, v in data.items() if k in MIME_KEEP and isinstance(v, (str, list))}
            if kind == "execute_result":
                count = o.get("execution_count")
                node = new_output(kind, data=data, execution_count=count if isinstance(count, int) else None)
            else:
                node = new_output(kind, data=data)
        else:
            continue
        budget -= len(json.dumps(node))
        out.append(node)
    return out


def parse_results(stdout: str) -> list[dict]:
    """The driver's RESULT_PREFIX lines, decoded (others ignored)."""
    out = []
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            try:
                obj = json.loads(line[len(RESULT_PREFIX):])
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _why(res: sandbox.SandboxResult, limit: float) -> str:
    if res.timed_out:
        return f"stopped at its time limit of {limit:.0f} s"
    tail = [l for l in res.stderr.strip().splitlines() if l.strip()]
    return f"stopped (exit {res.returncode})" + (f": {tail[-1][:200]}" if tail else "")


def _error(ename: str, evalue: str) -> NotebookNode:
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def merge_results(nb: NotebookNode, exec_res: sandbox.SandboxResult, test_res: sandbox.SandboxResult,
                  limits: tuple[float, float]) -> None:
    """Kernel outputs into `nb`; a failing or missing test-process result adds an error to its cell."""
    lines = parse_results(exec_res.stdout)
    cells = {str(r["cell"]): r for r in lines if isinstance(r.get("cell"), int)}
    end = next((r for r in lines if r.get("done")), None)
    stopped = (end or {}).get("stopped") or ("" if end else "the notebook's sandbox " + _why(exec_res, limits[0]))
    tests: dict[str, tuple[bool, str]] = {}
    done = False
    for r in parse_results(test_res.stdout):
        if r.get("done"):
            done = True
        elif isinstance(r.get("grade_id"), str):
            ok = r.get("ok") is True and tests.get(r["grade_id"], (True, ""))[0]
            tests[r["grade_id"]] = (ok, tests.get(r["grade_id"], (True, ""))[1] or _text(r.get("error", ""), 1000))
    test_why = "" if done else "the separate test process " + _why(test_res, limits[1])
    first_missing = True
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        got = cells.get(str(i))
        if got is not None:
            cell.outputs = sanitize_outputs(got.get("outputs"))
            count = got.get("execution_count")
            cell.execution_count = count if isinstance(count, int) else None
        else:
            cell.outputs = []
            cell.execution_count = None
            if meta.get("grade") or first_missing:
                cell.outputs.append(_error("NotRun", f"not run: {stopped or 'the notebook stopped before this cell'}"))
                first_missing = False
        if not meta.get("grade"):
            continue
        if any(o.get("output_type") == "error" for o in cell.outputs):
            continue  # failed in the notebook already: that error is the reason
        gid = meta.get("grade_id", "")
        if gid not in tests:
            cell.outputs.append(_error("HiddenTestNotRun", f"the separate test process did not report this test: "
                                                           f"{test_why or 'it was not run'}"))
        elif not tests[gid][0]:
            ename, _, evalue = tests[gid][1].partition(": ")
            cell.outputs.append(_error(ename or "TestFailed", (evalue or tests[gid][1]) +
                                       " (in the separate test process, against your exported package)"))


def _mkdir(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o755)
    return d


def run_notebook(nb: NotebookNode, name: str, files_dir: Path, plan: dict) -> None:
    """Steps 1-3 of the module doc for notebook `name` (without .ipynb); updates `nb` in place."""
    scratch = Path(plan["scratch"]) / name
    if scratch.exists():
        shutil.rmtree(scratch)
    source = json.loads((Path(plan["source_dir"]) / f"{name}.ipynb").read_text(encoding="utf-8"))
    student = json.loads(json.dumps(nb))
    merged = grading_package.merged_notebook(source, student)
    pkg = _mkdir(scratch / "pkg")
    grading_package.build_package(Path(plan["reference_lib"]), source, merged, f"{name}.ipynb", pkg,
                                  Path(plan["nbdev_root"]))
    for p in pkg.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    config = {"timeout": plan["timeout"], "cell_output_bytes": CELL_OUTPUT_BYTES, "sandboxed": bool(plan.get("bwrap"))}
    ins = {}
    for kind, payload in (("exec", ("notebook.ipynb", json.dumps(nb))),
                          ("tests", ("plan.json", json.dumps(grading_package.test_plan(merged, Path(plan["reference_lib"]).name))))):
        d = _mkdir(scratch / kind)
        (d / payload[0]).write_text(payload[1], encoding="utf-8")
        (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
        shutil.copy2(plan["driver"], d / "driver.py")
        ins[kind] = d
    limits = sandbox.Limits(**plan["limits"])
    mounts = {"pkg": pkg, "files": Path(files_dir)}
    env = {"PYTHONPATH": "{pkg}", "NBGRADER_EXECUTION": "autograde"}
    if plan.get("cache_dir"):
        mounts["cache"] = Path(plan["cache_dir"])
        env["TITO_CACHE_SEED"] = "{cache}"  # the driver copies it to a writable $TINYTORCH_CACHE
    t = float(plan["timeout"])
    n_code = sum(1 for c in nb.cells if c.cell_type == "code")
    budget = (max(60.0, min(3 * t + 60, t * n_code)), max(60.0, min(3 * t + 60, t * n_code)))
    specs = [sandbox.SandboxSpec(["{python}", "-s", "{in}/driver.py", kind, "{in}", "{files}"],
                                 {**mounts, "in": ins[kind]}, env, limits=limits) for kind in ("exec", "tests")]
    bwrap = plan.get("bwrap")
    with ThreadPoolExecutor(2) as pool:
        exec_res, test_res = pool.map(lambda s_b: sandbox.run(s_b[0], s_b[1], bwrap), zip(specs, budget))
    merge_results(nb, exec_res, test_res, budget)
    shutil.rmtree(scratch, ignore_errors=True)


try:
    from nbgrader.preprocessors import Execute
except ImportError:  # pragma: no cover - tito without nbgrader still imports this module
    Execute = None

if Execute is not None:
    class SandboxedExecute(Execute):
        """nbgrader's Execute, run in tito's sandboxes (see module doc)."""

        def preprocess(self, nb, resources):  # noqa: ANN001 - nbgrader's signature
            plan = json.loads(Path(os.environ[PLAN_ENV]).read_text(encoding="utf-8"))
            name = resources["unique_key"]
            files = resources.get("metadata", {}).get("path") or os.getcwd()
            run_notebook(nb, name, Path(files), plan)
            return nb, resources
