"""`tito module complete N` in a student workspace: incremental, in parallel, per task.

1. **Export first.** Every notebook of the workspace's started modules is exported (nbdev) into
   WORKSPACE/tinytorch before any test runs, whatever the tests will say: the notebooks import
   each other's code from it (benchmarking_dev imports your `results`), so each notebook is
   tested against your code, and a student kit has no reference of the module to fall back on.
   A notebook whose tests fail is exported too: the package is your code as it stands.
2. **Inline tests, only where something changed.** A notebook whose cache key (below) matches
   the last run's is not executed again; its result comes from the cache. The others are
   converted to scripts (`code_text`: each exported cell becomes an import of what it defines from
   your export, so the tests call the exported code, as grading does, and an import that only an
   unexported cell makes fails the notebook that wrote it) and run by `tito.testing.inline_runner` in a job server that imports torch and
   the other heavy libraries once and forks a fresh process per notebook, two at a time (the
   longest first, by the last run's times). tito's own reading of each file (its imports, script, tasks, a test
   file's needs) is kept by the file's hash (`ParseMemo`): an unchanged file is not parsed again.
3. **Integration tests of every notebook that passed.** A tests/test_NN_*.py file *exercises*
   the notebooks that export the tinytorch modules it names (imports, or a string naming a
   module); each of its tests, those that export what the test itself uses (tito.testing.needs:
   its names, helpers and fixtures, a facade's names followed to the module defining them). Once
   those notebooks have run, the file runs, in the same server (one pytest per file), with the
   tests whose notebooks passed (the others listed as not run yet, naming the notebooks they
   wait for: the file is then not complete, and not cached); with none, it is skipped, naming
   them. Code it reaches beyond them is in its cache key, and a stub there fails it with
   `not yet implemented: NAME`.
4. **A report in reading order**: per notebook, per task (an nbgrader graded cell: grade_id,
   points, the test functions it defines): points earned / possible and the status —
   passed; failed (the first message); not attempted (the notebook's own stub still raises
   NotImplementedError); blocked (a stub of an earlier notebook raised it) — then the stage table
   and the closing `N passed, N failed` line. A partial run (a failure, a skipped notebook or test
   file, a `--tests` subset) never records `"complete": true`.

**The cache** (WORKSPACE/.tito/complete-cache.json; delete it, or pass `--no-cache`, to run
everything). A notebook's key is the SHA-256 of: its code cells (the markdown, where your
written answers are, is not part of it); every tinytorch module it can reach (the modules its
code names, closed over the imports of the exported package, lazy ones named in strings
included), each by the SHA-256 of its file in WORKSPACE/tinytorch (your export or the course's
reference) with the packages' `__init__` files on the way; the files under its folder's data/;
and the environment: this scheme's version, the course's version, the sources of tito's inline
runner and of this file, Python's version and those of torch, numpy, pandas, scipy,
scikit-learn and onnxruntime. A test file's key: the file, the conftest tito writes, the modules
it can reach (with those tito's own sources name when it imports tito), tito's sources and the
environment, and the data. A test file that passed also keeps a second key, by what its run
*executed* (tito.testing.inline_runner.record_executed): each module of the package its tests imported,
with the bodies of the functions they never called cut out (executed_hash), and the package's
module names; a later run uses the cached result when either key matches, so an edit to code the
file's tests never ran does not run it again. A notebook whose inline tests passed (or stopped at a stub)
keeps the same second key, by what its run executed ("inline-executed": its script, the package's modules it
executed, the environment and data): an edit to a function of a module it imports but never called leaves it
cached, as for a test file. A run that started another process (whose calls
are not seen) keeps only the first key. Only results a re-run cannot change are kept: passed, not attempted and blocked
(for a notebook), passed (for a test file); a failure runs again next time, since it may come
from the machine's load.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from tito.config import Course, TitoError
from tito.isolation import process
from tito.notebooks import nbgrader_glue
from tito.notebooks.cells import cell_source, nbgrader_meta, plain_python, syntax_errors, where
from tito.notebooks.exports import default_exp, exported_module, notebook_modules, split_exported
from tito.notebooks.imports import top_imports, module_files, named_modules, package_graph, reach
from tito.notebooks.kit import test_helpers
from tito.notebooks.nbfile import atomic_write, read_notebook
from tito.testing import kept_server
from tito.testing.job_server import JobServer
from tito.testing.needs import test_modules
from tito.testing.runners import StageResult, parse_junit, print_table
from tito.workspace import layout

KEY_VERSION = 2  # 2: executed_hash from per-function digests
CACHE = "complete-cache.json"
TEST_FILE_GUESS_S = 4.0  # a test file's seconds before it has run once here (most of module 19's take 2-8 s)
MEMO_KEEP = 3000  # ParseMemo's entries kept between runs at most (Module 19 uses about 250 a run)
MARKED_KEEP = 400  # marked modules kept between runs at most (Module 19's package has about 90 modules)
TEST_FILE_TIMEOUT_S = 1800  # one integration test file's pytest run at most
LIB = "tinytorch"
TITO_PKG = Path(__file__).resolve().parent.parent  # the tito package (this file is tito/workspace/complete.py)
_MODULE_RE = re.compile(r"\b" + LIB + r"(?:\.\w+)+")
_TEST_DEF = re.compile(r"^def (test_\w+)\(", re.M)


# ---- what a notebook is made of ---------------------------------------------------------------


@dataclass
class Task:
    """A graded cell: its grade_id, points, and the test functions it defines."""
    grade_id: str
    points: float
    tests: list[str]


def notebook_tasks(nb: dict) -> list[Task]:
    """The graded code cells of a notebook, in order.

    >>> notebook_tasks({"cells": [{"cell_type": "code", "source": "def test_unit_a():\\n    pass",
    ...     "metadata": {"nbgrader": {"grade": True, "grade_id": "t-a", "points": 3}}}]})
    [Task(grade_id='t-a', points=3.0, tests=['test_unit_a'])]
    """
    return [Task(nbgrader_meta(c)["grade_id"], float(nbgrader_meta(c).get("points") or 0),
                 _TEST_DEF.findall(cell_source(c)))
            for c in nb.get("cells", []) if c.get("cell_type") == "code" and nbgrader_meta(c).get("grade")
            and nbgrader_meta(c).get("grade_id")]


def code_text(nb: dict, lib: str | None = None) -> str:
    """The notebook's code cells as one percent-format script (IPython magics read as the judge and the export
    read them: tito.notebooks.cells.plain_python).

    With `lib`, each exported cell becomes its imports of libraries and other modules and an import of
    what it defines from its module in `lib` (the student's export), as grading does: the tests then
    call the exported code, so an import that only an unexported cell makes (`statistics`, say) fails
    this notebook's tests, not those of a later notebook importing the module.

    >>> nb = {"cells": [{"cell_type": "code", "source": "#| default_exp stats"},
    ...                 {"cell_type": "code", "source": "#| export\\nimport math\\ndef mean(xs): return sum(xs) / len(xs)"}]}
    >>> print(code_text(nb, "tinytorch").split("# %%")[-1].strip())
    import math
    from tinytorch.stats import mean
    """
    exp, own = default_exp(nb), set(notebook_modules(nb, lib)) if lib else set()
    parts = []
    for c in nb.get("cells", []):
        if c.get("cell_type") != "code":
            continue
        src = plain_python(cell_source(c))
        mod = exported_module(src, exp) if lib else None
        if mod:
            try:
                imports, names = split_exported(src, own)
            except SyntaxError:  # run as written: the syntax error is reported where it is
                imports, names = None, []
            if imports is not None:
                src = "\n".join(filter(None, [imports, f"from {lib}.{mod} import {', '.join(names)}" if names else ""]))
        parts.append("# %%\n" + src)
    return "\n\n".join(parts) + "\n"


# ---- what a piece of code can reach: tito.notebooks.imports -------------------------------------

def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def environment() -> dict:
    """What every key depends on besides the code: versions of the scheme, course, tito's runner, libraries."""
    env = {"key_version": KEY_VERSION, "python": sys.version,
           "runner": _sha((TITO_PKG / "testing" / "inline_runner.py").read_bytes() + Path(__file__).read_bytes())}
    for dist in ("torch", "numpy", "pandas", "scipy", "scikit-learn", "onnxruntime"):
        try:
            env[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            env[dist] = None
    return env


def tito_sources() -> tuple[str, set[str]]:
    """(SHA-256 of tito's sources, the tinytorch modules they name)."""
    h, names = hashlib.sha256(), set()
    for f in sorted(TITO_PKG.rglob("*.py")):
        text = f.read_bytes()
        h.update(str(f.name).encode() + text)
        names.update(_MODULE_RE.findall(text.decode("utf-8", "replace")))
    return h.hexdigest(), names


class _Cut(ast.NodeTransformer):
    """Cuts every function's body down to its docstring, innermost first, recording each body as it was
    (with its own inner functions already cut) by qualified name: `bodies`."""

    def __init__(self):
        self.stack: list[str] = []
        self.bodies: dict[str, str] = {}

    def _def(self, node):
        name = ".".join([*self.stack, node.name])
        self.stack += [node.name, "<locals>"]
        self.generic_visit(node)
        del self.stack[-2:]
        body = ast.dump(ast.Module(body=node.body, type_ignores=[]))  # decorators, defaults, annotations: not cut
        self.bodies[name] = _sha(self.bodies.get(name, "") + body)  # a name defined twice: both bodies
        first = node.body[0] if node.body else None
        doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
        node.body = ([first] if doc else []) + [ast.Pass()]
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, node):
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()
        return node


@functools.lru_cache(maxsize=512)
def _module_digest(text: bytes) -> tuple[str, dict[str, str]] | None:
    """(hash of the module with every function body cut, {qualified name: hash of that function's body}); None
    when it does not parse. Parsed once a run, however many test files executed it."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    cut = _Cut()
    return _sha(ast.dump(cut.visit(tree))), cut.bodies


def executed_hash(path: Path, executed: set[str]) -> str:
    """SHA-256 of what running `path` can depend on when only the functions named in `executed`
    (code objects' qualified names) were called: its syntax tree with every other function's body
    cut to its docstring (comments and line numbers are not part of it).

    >>> a = Path("/tmp/_eh.py"); _ = a.write_text("def f():\\n    return 1\\ndef g():\\n    return 2\\n")
    >>> h = executed_hash(a, {"<module>", "f"}); _ = a.write_text("def f():\\n    return 1\\ndef g():\\n    return 3\\n")
    >>> executed_hash(a, {"<module>", "f"}) == h, executed_hash(a, {"<module>", "g"}) == h
    (True, False)
    """
    text = Path(path).read_bytes()
    digest = _MEMO.get("digest", [_sha(text)], lambda: _module_digest(text))
    if digest is None:
        return _sha(text)
    skeleton, bodies = digest
    return _sha(json.dumps([skeleton, sorted((q, bodies[q]) for q in executed if q in bodies)]))


def key_of(kind: str, own: str, modules: set[str], hashes: dict[str, str], extra: dict) -> str:
    """The cache key: SHA-256 over the kind, the code's own text, the reached modules' file hashes
    and `extra` (environment, data, ...)."""
    body = {"kind": kind, "own": _sha(own), "modules": {m: hashes[m] for m in sorted(modules)}, **extra}
    return _sha(json.dumps(body, sort_keys=True, default=str))


class ParseMemo:
    """What tito read from a file's text (a package module's imports and function digests, a notebook's script and
    tasks, a test file's needs), kept between runs by the SHA-256 of everything the reading depends on: the text,
    the package's module names where they matter, the sources of tito that read it (`PARSERS`) and Python's
    version. An unchanged
    file is not parsed again; an edited one is (its hash is new). Kept in WORKSPACE/.tito/complete/parsed.json
    (MEMO_KEEP entries at most, the ones a run used first: old versions of an edited file do not pile up).

    >>> m = ParseMemo(None); calls = []
    >>> m.get("n", ["text"], lambda: calls.append(1) or [1]), m.get("n", ["text"], lambda: calls.append(1) or [2])
    ([1], [1])
    >>> m.get("n", ["other text"], lambda: calls.append(1) or [3]), len(calls)
    ([3], 2)
    """

    def __init__(self, path: Path | None):
        self.path, self.data, self.used = path, {}, {}
        # Python's version too: ast.dump and what compiles differ between versions
        self.version = _sha(sys.version.encode() + b"".join((TITO_PKG / f).read_bytes() for f in PARSERS
                                                             if (TITO_PKG / f).is_file()))
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path else {}
            if data.get("version") == self.version:
                self.data = data["entries"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass

    def get(self, kind: str, parts: list, compute):
        """compute()'s value (JSON: lists, not sets) for `parts` (what it depends on), from the memo when known."""
        k = f"{kind}:{_sha(json.dumps(parts, sort_keys=True, default=str))}"
        if k not in self.used:
            self.used[k] = self.data[k] if k in self.data else compute()
        return self.used[k]

    def save(self) -> None:
        """Write this run's entries, then the earlier ones it did not need (a module a later run digests again)
        up to MEMO_KEEP entries in all, the oldest dropped first (an edited file's old versions pile up)."""
        if self.path:
            entries = dict(self.used)
            for k, v in self.data.items():
                if len(entries) >= MEMO_KEEP:
                    break
                entries.setdefault(k, v)
            # compact: json's C encoder (an indented dump of its ~0.5 MB takes the pure-Python one, 0.3 s)
            atomic_write(self.path, json.dumps({"version": self.version, "entries": entries},
                                                      separators=(",", ":")))


# the sources whose reading the memo keeps: an edit to one of them empties it
PARSERS = ["workspace/complete.py", "notebooks/cells.py", "notebooks/exports.py", "notebooks/imports.py",
           "notebooks/nbfile.py", "notebooks/kit.py", "testing/needs.py"]
_MEMO = ParseMemo(None)  # the run's (complete_workspace sets it); in memory elsewhere


def _executed_modules(executed: dict | None, files: dict[str, Path]) -> dict[str, list[str]] | None:
    """tito.testing.inline_runner.record_executed's {file: qualnames} as {module: qualnames}; None where it
    is None or names a file that is not a module of the package (nothing then to key it by)."""
    if executed is None:
        return None
    by_file = {os.path.realpath(f): m for m, f in files.items()}
    out = {}
    for path, names in executed.items():
        mod = by_file.get(os.path.realpath(path))
        if mod is None:
            return None
        out[mod] = sorted(set(out.get(mod, [])) | set(names))
    return out


def executed_key(own: str, executed: dict[str, list[str]], files: dict[str, Path], extra: dict,
                 kind: str = "integration-executed") -> str:
    """A test file's (or, with kind "inline-executed", a notebook's) key by what its last run executed: its own
    text, the package's module names, each executed module by executed_hash (a module since removed: None), and
    `extra`. An edit to a function its tests never called, or to a module they never imported, leaves it."""
    mods = {m: executed_hash(files[m], set(q)) if m in files else None for m, q in sorted(executed.items())}
    body = {"kind": kind, "own": _sha(own), "package": sorted(files), "modules": mods, **extra}
    return _sha(json.dumps(body, sort_keys=True, default=str))


# ---- results ----------------------------------------------------------------------------------

@dataclass
class TaskReport:
    grade_id: str
    points: float
    earned: float
    status: str            # passed | failed | not attempted | blocked | not run
    message: str | None = None


@dataclass
class NotebookRun:
    name: str
    path: Path
    key: str
    exports: list[str]
    tasks: list[Task]
    code: str = ""                 # the script its inline tests run from
    cached: bool = False
    result: dict | None = None     # tito.testing.inline_runner's summary
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    report: list[TaskReport] = field(default_factory=list)
    reaches: set[str] = field(default_factory=set)   # the package modules its code can reach
    syntax: list[dict] = field(default_factory=list)  # its cells that do not compile (tito.notebooks.cells.syntax_errors)

    @property
    def ok(self) -> bool:
        return bool(self.result and self.result.get("ok"))


@dataclass
class TestFileRun:
    name: str
    key: str
    needs: list[str]               # the notebooks it exercises (of this module)
    cached: bool = False
    submitted: bool = False
    skipped: str | None = None
    cases: list[dict] = field(default_factory=list)   # {"id", "ok", "message"}
    error: str | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    own: str = ""                  # the test file's text and the conftest: part of both keys
    tests: dict[str, list[str]] | None = None  # test id -> the notebooks it needs (None: not known, the whole file)
    selected: list[str] | None = None  # the tests that ran, when only some could (the others need a notebook that failed)
    left_out: str | None = None    # why the others did not run
    extra: dict = field(default_factory=dict)  # what its keys hold besides the code (environment, tito, data)
    early: bool = False            # started beside a notebook it needs (_Dispatch.send): kept only if that passes
    thrown_away: bool = False      # started early, and a notebook it needs failed: that run was not counted

    @property
    def ok(self) -> bool:
        return self.skipped is None and self.error is None and bool(self.cases) and all(c["ok"] for c in self.cases)

    @property
    def whole(self) -> bool:
        "Every test of the file ran and passed (what the cache keeps and `complete` needs)."
        return self.ok and self.left_out is None


def _test_status(t: dict, own: set[str], owner_of_file) -> tuple[str, str | None]:
    if t["status"] == "passed":
        return "passed", None
    if t["status"] == "not_implemented":
        origin = t.get("origin")
        owner = owner_of_file(origin) if origin else None
        if owner is None or owner in own:
            return "not attempted", t["error"]
        return "blocked", f"{t['error']} (in {owner}: do that task first)"
    return "failed", t["error"]


def _cannot_run(r: NotebookRun, broken: dict[str, tuple[str, dict]]) -> bool:
    """Whether `r` is not run because a cell does not compile: one of its own (named: notebook, cell, line in the
    cell), or one of another notebook's export it imports (`broken`: then it is blocked, naming that cell). Its
    result says so; True when it is set."""
    if r.syntax:
        more = f" (and {len(r.syntax) - 1} more cell(s))" if len(r.syntax) > 1 else ""
        r.result = {"file": r.name, "ok": False, "tests": [], "passed": 0, "failed": 0,
                    "error": f"does not compile: {where(r.name, r.syntax[0])}{more}"}
        return True
    hit = next(((m, *broken[m]) for m in sorted(r.reaches) if m in broken and broken[m][0] != r.name), None)
    if hit is None:
        return False
    mod, nb, err = hit
    r.result = {"file": r.name, "ok": False, "tests": [], "passed": 0, "failed": 0, "blocked_by": nb,
                "error": f"not run: it imports {mod}, which {where(nb, err).split(':', 1)[0]} breaks: fix that "
                         "cell first"}
    return True


def task_reports(run: NotebookRun, owner_of_file) -> list[TaskReport]:
    """Each task's status from the inline runner's test entries (see the module doc)."""
    res = run.result or {}
    by_name = {t["name"]: t for t in res.get("tests", [])}
    own = {run.name, run.path.name}
    out = []
    for task in run.tasks:
        statuses = []
        for name in task.tests:
            t = by_name.get(name)
            statuses.append(_test_status(t, own, owner_of_file) if t else
                            ("blocked" if res.get("blocked_by") else "not run",
                             res.get("error") or f"{name} did not run"))
        if not statuses:
            statuses = [("not run", "the graded cell defines no test function")]
        for wanted in ("failed", "not run", "blocked", "not attempted", "passed"):
            hit = next((s for s in statuses if s[0] == wanted), None)
            if hit:
                break
        out.append(TaskReport(task.grade_id, task.points, task.points if hit[0] == "passed" else 0.0, hit[0], hit[1]))
    return out


# ---- the run ----------------------------------------------------------------------------------

def _load_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key_version") == KEY_VERSION:
            return data
    except (OSError, ValueError):
        pass
    return {"key_version": KEY_VERSION, "inline": {}, "integration": {}, "executions": {}, "seconds": {}}


def _cached_words(cached: list[NotebookRun]) -> str:
    """What the cached notebooks' last run said, in words: a cached run passed, or stopped only at a stub
    (not attempted, or blocked by an earlier notebook's stub); never 'passed' for one that did not.

    >>> r = NotebookRun("a", Path("a"), "k", [], [], result={"ok": True})
    >>> _cached_words([r, NotebookRun("b", Path("b"), "k", [], [], result={"ok": False})])
    '2 unchanged since their last run, from the cache: 1 passed, 1 still waiting for a stub to be filled in'
    """
    ok = sum(r.ok for r in cached)
    words = [f"{ok} passed"] if ok else []
    if len(cached) - ok:
        words.append(f"{len(cached) - ok} still waiting for a stub to be filled in")
    return f"{len(cached)} unchanged since their last run, from the cache: {', '.join(words)}"


def _cacheable(run: NotebookRun) -> bool:
    return bool(run.result) and not run.result.get("error") and all(r.status in ("passed", "not attempted", "blocked")
                                                                   for r in run.report) and \
        all(t["status"] in ("passed", "not_implemented") for t in run.result.get("tests", []))


def complete_workspace(course: Course, module: str, mod_dir: Path, tests: list[str] | None = None,
                       use_cache: bool = True, jobs: int = 2, preload: list[str] | None = None) -> int:
    """Export, inline tests (changed notebooks only), integration tests, report; 0 when complete (module doc).
    `jobs` processes at a time; `preload`: the libraries the job server imports once (None:
    tito.testing.inline_runner.PRELOAD). The stages: `_export`, `_Package` (what the export holds), `_notebook_runs`
    and `_test_file_runs` (each with its cache key), `_Dispatch` (the job server's queue), `_stage_results`, `_finish`.

    >>> complete_workspace(Course.load(), "19_benchmarking", Path("ws/19_benchmarking"))  # doctest: +SKIP
    """
    if jobs < 1:
        raise TitoError(f"jobs must be a positive number of parallel processes, got {jobs!r}")
    t_start = time.perf_counter()
    mod_dir = Path(mod_dir).resolve()
    ws_root = mod_dir.parent
    scratch = ws_root / layout.SCRATCH
    work = scratch / "complete"
    shutil.rmtree(work / "logs", ignore_errors=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    notebooks = course.in_reading_order(module, sorted(mod_dir.glob("*.ipynb")), mod_dir)
    if not notebooks:
        raise TitoError(f"no notebooks in {mod_dir}")
    cache_path = scratch / CACHE
    cache = _load_cache(cache_path)
    global _MEMO
    _MEMO = ParseMemo((work / "parsed.json") if use_cache else None)
    env = process.child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ws_root), str(TITO_PKG.parent)]
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        keep = kept_server.keep_seconds(env)
    except ValueError as e:
        raise TitoError(str(e)) from None
    # started before the export, so its imports of torch & co overlap it; kept for the next run (kept_server)
    server = JobServer(ws_root, env, jobs, work / "server.log", preload, keep)
    if server.note:
        print(f"({server.note})", flush=True)
    elif server.conn is not None and server.ready is None:  # started now, to be kept: said once, so it is no surprise
        print(f"(the process that imports torch & co for the tests stays {keep / 60:g} min after this run, for "
              "your next one; TITO_KEEP_SERVER=0 keeps none)", flush=True)
    dispatch = _Dispatch(server, jobs, cache, work)
    try:
        print(f"[1/3] export your code into {ws_root / LIB} ...", flush=True)
        ex, written = _export(course, ws_root, notebooks)
        if not ex.ok:
            skipped = [StageResult(name, skipped_reason="the export failed") for name in ("inline tests", "integration tests")]
            return _finish(course, module, mod_dir, [ex, *skipped], [], [], tests, written, t_start, cache)
        pkg = _Package.of(course, ws_root, mod_dir)
        runs, broken = _notebook_runs(notebooks, pkg)
        todo = []
        for r in runs:
            hit = cache["inline"].get(r.name)
            if use_cache and hit and (hit.get("key") == r.key or (
                    hit.get("executed") is not None and not r.syntax
                    and hit.get("executed_key") == executed_key(r.code, hit["executed"], pkg.files, pkg.nb_extra,
                                                                "inline-executed"))):
                r.cached, r.result = True, hit["result"]
            elif not _cannot_run(r, broken):
                todo.append(r)
            else:
                r.report = task_reports(r, pkg.owner_of_file)
        print(f"[2/3] inline tests: {len(todo)} of {len(runs)} notebook(s) to run"
              + (f" ({_cached_words([r for r in runs if r.cached])})" if len(todo) < len(runs) else "")
              + " ...", flush=True)
        tfiles, tdir = _test_file_runs(course, module, scratch, tests, runs, pkg, cache, use_cache)
        timeout = course.cell_timeout * 3
        dispatch.inline(todo, tfiles, mod_dir, ws_root, timeout, pkg)
        print(f"[3/3] integration tests of the notebooks that pass, as they do ({len(tfiles)} file(s)) ...", flush=True)
        for r in runs:  # the cached ones are known now
            if r.cached:
                r.report = task_reports(r, pkg.owner_of_file)
        dispatch.ready_test_files(tfiles, runs, tdir, ws_root, pkg)
        dispatch.send()
        if not server.pending:
            server.discard()
        while server.pending:
            dispatch.done(server.next(), runs, tfiles, tdir, ws_root, pkg, timeout)
        dispatch.ready_test_files(tfiles, runs, tdir, ws_root, pkg)  # what is left is skipped
        inline, it = _stage_results(runs, tfiles, tests, module)
        return _finish(course, module, mod_dir, [inline, ex, it], runs, tfiles, tests, written, t_start, cache)
    finally:
        server.close()
        for script in dispatch.scripts:
            script.unlink(missing_ok=True)
        scratch.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_path, json.dumps(cache, separators=(",", ":")))  # compact: the C encoder (see save)
        _MEMO.save()


def _export(course: Course, ws_root: Path, notebooks: list[Path]) -> tuple[StageResult, list[Path]]:
    """Stage 1: every notebook of the workspace's started modules exported into WORKSPACE/tinytorch (module doc)."""
    ex = StageResult("export")
    started = layout.started_modules(course, ws_root)
    all_nbs = [nb for d in started for nb in sorted(d.glob("*.ipynb"))]
    all_nbs += [nb for nb in notebooks if nb not in all_nbs]
    t0 = time.perf_counter()
    written: list[Path] = []
    try:
        _, written = layout.build_student_package(course, ws_root, all_nbs)
        ex.add(True)
    except TitoError as e:
        ex.add(False, str(e).splitlines()[0])
    ex.seconds = time.perf_counter() - t0
    return ex, written


@dataclass
class _Package:
    """What the workspace's export holds: its modules' files and import graph (tito.notebooks.imports), each file's
    hash, what every key holds besides the code (`envkey`, the data files' hashes), and which notebook exports each
    module (filled by `_notebook_runs`)."""
    ws_root: Path
    lib: Path
    files: dict[str, Path]
    graph: dict[str, set[str]]
    hashes: dict[str, str]
    envkey: dict
    data: dict[str, str]
    exporter: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, course: Course, ws_root: Path, mod_dir: Path) -> "_Package":
        lib = ws_root / LIB
        files = module_files(lib)
        known = _sha(json.dumps(sorted(files)))

        def named(text: str, known_mods, package: str) -> set[str]:  # each file read once, then by its hash
            return set(_MEMO.get("imports", [_sha(text), package, known],
                                 lambda: sorted(named_modules(text, known_mods, package))))

        return cls(ws_root, lib, files, package_graph(files, named), {m: _sha(f.read_bytes()) for m, f in files.items()},
                   environment() | {"course": course.version},
                   {str(p.relative_to(mod_dir)): _sha(p.read_bytes())
                    for p in sorted((mod_dir / "data").rglob("*")) if p.is_file()})

    @property
    def nb_extra(self) -> dict:
        "What a notebook's keys hold besides its code and the package's: the environment and the data files."
        return {"env": self.envkey, "data": self.data}

    def owner_of_file(self, path: str) -> str | None:
        """The notebook (or the package file) a traceback's file belongs to."""
        p = Path(path).resolve()
        if p.name.startswith(".tito_inline_"):
            return p.name.removeprefix(".tito_inline_").removesuffix(".py") + ".ipynb"
        mod = next((m for m, f in self.files.items() if f.resolve() == p), None)
        if mod is None:
            return None
        return self.exporter.get(mod, str(p.relative_to(self.ws_root)) if p.is_relative_to(self.ws_root) else str(p))


def _notebook_runs(notebooks: list[Path], pkg: _Package) -> tuple[list[NotebookRun], dict[str, tuple[str, dict]]]:
    """Stage 2's notebooks, each with its script, cache key and tasks; and `broken`: module -> (notebook,
    syntax_errors entry) of a cell of the export that does not compile (it breaks its module for every importer)."""
    runs, broken = [], {}
    known = sorted(pkg.files)
    for nb_path in notebooks:
        raw = nb_path.read_bytes()
        parsed = _MEMO.get("notebook", [_sha(raw), known], lambda: _read_notebook(nb_path, pkg.files))
        code, exports = parsed["code"], parsed["exports"]
        for m in exports:
            pkg.exporter.setdefault(m, nb_path.name)
        mods = reach(parsed["named"], pkg.graph)
        key = key_of("inline", code, mods, pkg.hashes, pkg.nb_extra)
        runs.append(NotebookRun(nb_path.name, nb_path, key, exports, [Task(*t) for t in parsed["tasks"]], code,
                                reaches=mods, syntax=parsed["syntax"]))
        for err, mod in zip(parsed["syntax"], parsed["broken"]):
            if mod:
                broken.setdefault(f"{LIB}.{mod}", (nb_path.name, err))
    return runs, broken


def _read_notebook(nb_path: Path, files: dict[str, Path]) -> dict:
    """What `_notebook_runs` reads from a notebook (JSON, for ParseMemo): its script (code_text), the modules it
    exports, the package modules its script names, its tasks, its cells that do not compile and the module each
    of those exports to (None: not exported)."""
    nb = read_notebook(nb_path)
    code = code_text(nb, LIB)
    syntax = syntax_errors(nb)
    return {"code": code, "exports": notebook_modules(nb, LIB), "named": sorted(named_modules(code, files)),
            "tasks": [[t.grade_id, t.points, t.tests] for t in notebook_tasks(nb)], "syntax": syntax,
            "broken": [exported_module(plain_python(cell_source(nb["cells"][err["cell"] - 1])), default_exp(nb))
                       for err in syntax]}


def _test_file_runs(course: Course, module: str, scratch: Path, tests: list[str] | None, runs: list[NotebookRun],
                    pkg: _Package, cache: dict, use_cache: bool) -> tuple[list[TestFileRun], Path]:
    """Stage 3's test files (tests/test_NN_*.py, or those `tests` names), copied beside the conftest tito writes,
    each with the notebooks its tests need, its cache key and, where its key matches, its cached result."""
    num = module.split("_", 1)[0]
    tests_dir = course.root / "tests"
    targets = sorted(set(tests_dir.glob(f"test_{num}_*.py")) | set(tests_dir.glob(f"integration/test_{num}_*.py")))
    if tests:
        targets = [t for t in targets if any(t.match(p) or t.name == p or t.stem == p for p in tests)]
    tdir = scratch / "tests"
    shutil.rmtree(tdir, ignore_errors=True)
    tdir.mkdir(parents=True)
    conftest = layout.CONFTEST.format(workspace=str(pkg.ws_root), root=str(course.root))
    (tdir / "conftest.py").write_text(conftest, encoding="utf-8")
    tito_hash, tito_names = tito_sources()
    order = [r.name for r in runs].index
    # a test importing tito reaches what tito's sources name
    tito_modules = {".".join(("tito", *f.relative_to(TITO_PKG).with_suffix("").parts)).removesuffix(".__init__"):
                    {m for m in tito_names if m in pkg.files} for f in TITO_PKG.rglob("*.py")}
    exporter, files = pkg.exporter, pkg.files
    tfiles: list[TestFileRun] = []
    # tests/busy.py and the like, which test files import: what they are depends on the test files and the others
    found = [(str(f.relative_to(tests_dir)), _sha(f.read_bytes())) for f in sorted({*targets, *(
        f for f in tests_dir.glob("*.py") if not f.name.startswith("test_") and f.name != "conftest.py")})]
    helpers = [tests_dir / h for h in _MEMO.get("helpers", [found], lambda: [
        str(h.relative_to(tests_dir)) for h in test_helpers(targets, tests_dir)])]
    for h in helpers:
        shutil.copy2(h, tdir / h.name)
    helper_text = "".join(h.read_text(encoding="utf-8") for h in helpers)
    # what every test file's key holds
    extra = {"env": pkg.envkey, "tito": tito_hash, "data": pkg.data,
             "helpers": hashlib.sha256(helper_text.encode()).hexdigest()}
    # what following a test's names through the package's re-exports reads: the module files and their imports
    skeleton = _sha(json.dumps([tito_modules, {m: [f.name, _MEMO.get("top", [pkg.hashes[m]], lambda f=f: _from_imports(f))]
                                               for m, f in sorted(files.items())}], sort_keys=True, default=sorted))
    for t in targets:
        text = t.read_text(encoding="utf-8")
        parsed = _MEMO.get("test-file", [_sha(text), skeleton], lambda: {
            "named": sorted(named_modules(text, files)),
            "per_test": None if (pt := test_modules(text, files, tito_modules)) is None else
            {tid: sorted(mods) for tid, mods in pt.items()}})
        named, per_test = set(parsed["named"]), parsed["per_test"]
        tests_need = None if per_test is None else {
            tid: sorted({exporter[m] for m in mods if m in exporter}, key=order) for tid, mods in per_test.items()}
        needs = sorted({exporter[m] for m in named if m in exporter}
                       | {n for nbs in (tests_need or {}).values() for n in nbs}, key=order)
        uses_tito = bool(re.search(r"^\s*(from|import)\s+tito\b", text, re.M))
        mods = reach(named | ({m for m in tito_names if m in files} if uses_tito else set()), pkg.graph)
        key = key_of("integration", text + conftest, mods, pkg.hashes, extra)
        tf = TestFileRun(t.name, key, needs, own=text + conftest, tests=tests_need, extra=extra)
        hit = cache["integration"].get(t.name)
        if use_cache and hit and (hit.get("key") == key or (
                hit.get("executed") is not None
                and hit.get("executed_key") == executed_key(tf.own, hit["executed"], files, extra))):
            tf.cached, tf.cases = True, hit["cases"]
        tfiles.append(tf)
        shutil.copy2(t, tdir / t.name)
    return tfiles, tdir


def _from_imports(f: Path) -> list | None:
    """A package file's module-level `from ... import ...` statements (tito.notebooks.imports' reading of them,
    which `defining_module` follows): what a test file's needs depend on in that file."""
    try:
        return top_imports(f.read_text(encoding="utf-8"))
    except OSError:
        return None


class _Dispatch:
    """The job server's queue: jobs wait here until a worker is free, the longest expected first (the last run's
    seconds, else a guess), so that no long job starts last and leaves the other workers idle at the end; a notebook
    that integration tests wait for goes before one that is only long. A test file is queued once the notebooks it
    needs have run (`ready_test_files`); each job's end is recorded as it comes (`done`).

    A worker that would wait idle while notebooks run starts a test file that needs only them (and notebooks that
    passed) early: the export it tests is made before any job starts, so its result is the one it would give after
    them. It counts only when they pass; when one fails it is thrown away, as if never run, and the file is handled
    as any other (run in part, or skipped). After one edit a run is then one notebook long shorter (issue 44)."""

    def __init__(self, server: JobServer, jobs: int, cache: dict, work: Path):
        self.server, self.jobs, self.cache, self.work = server, jobs, cache, work
        self.logs = work / "logs"
        self.marked = work / "marked"  # the package's modules compiled with the recording's marks (_marked_code)
        if self.marked.is_dir() and sum(1 for _ in self.marked.iterdir()) > MARKED_KEEP:
            shutil.rmtree(self.marked, ignore_errors=True)  # one file per version of a module: old edits pile up
        self.waiting: list[tuple[float, dict]] = []
        self.scripts: list[Path] = []
        self.running: set[str] = set()      # the notebooks whose inline tests are with the server
        self.held: dict[str, dict] = {}     # test file -> its end, started early, while a notebook it needs runs
        self.standby: dict[str, tuple] = {}  # test file -> (it, the notebooks it needs, its job): may start early

    def send(self) -> None:
        self.waiting.sort(key=lambda e: -e[0])
        while self.waiting and self.server.pending < self.jobs:
            job = self.waiting.pop(0)[1]
            kind, _, name = job["id"].partition(":")
            if kind == "inline":
                self.running.add(name)
            self.server.submit(job)
        # idle workers: the longest test files whose notebooks have passed or are running now (ready_test_files)
        early = [(tf, needs, job) for tf, needs, job in self.standby.values() if not tf.submitted
                 and any(r.name in self.running for r in needs)
                 and all(r.name in self.running or (r.result is not None and r.ok) for r in needs)]
        for tf, _, job in sorted(early, key=lambda e: -self.expected(e[0].name, TEST_FILE_GUESS_S)):
            if self.server.pending >= self.jobs:
                break
            tf.submitted = tf.early = True
            self.server.submit(job)

    def expected(self, name: str, guess: float) -> float:
        return float(self.cache["seconds"].get(name, guess))

    def inline(self, todo: list[NotebookRun], tfiles: list[TestFileRun], mod_dir: Path, ws_root: Path,
               timeout: float, pkg: _Package) -> None:
        for r in todo:
            script = mod_dir / f".tito_inline_{r.path.stem}.py"  # beside the notebook: relative data paths work
            script.write_text(r.code, encoding="utf-8")
            self.scripts.append(script)
            unlocks = sum(self.expected(tf.name, TEST_FILE_GUESS_S) for tf in tfiles if not tf.cached and r.name in tf.needs)
            self.waiting.append((self.expected(r.name, len(r.code) / 1e4) + unlocks,
                                 {"id": f"inline:{r.name}", "kind": "inline", "file": str(script),
                                  "package_root": str(ws_root / LIB), "record": str(pkg.lib), "marked": str(self.marked),
                                  "log": str(self.logs / f"{r.path.stem}.log"),
                                  "result": str(self.work / f"{r.path.stem}.json"), "timeout": timeout}))

    def ready_test_files(self, tfiles: list[TestFileRun], runs: list[NotebookRun], tdir: Path, ws_root: Path,
                         pkg: _Package) -> None:
        by_name = {r.name: r for r in runs}
        order = [r.name for r in runs].index
        for tf in tfiles:
            if tf.cached or tf.skipped or tf.submitted:
                continue
            states = [by_name[n] for n in tf.needs]
            if any(r.result is None for r in states):  # still running: it may start early on an idle worker (send)
                self.standby[tf.name] = (tf, states, self._test_file_job(tf, [str(tdir / tf.name)], tdir, ws_root, pkg))
                continue
            bad = [r.name for r in states if not r.ok]
            targets = [str(tdir / tf.name)]
            if bad:
                ready = [tid for tid, nbs in (tf.tests or {}).items() if not set(nbs) & set(bad)]
                if not ready:
                    tf.skipped = f"the inline tests of {', '.join(bad)} did not pass"
                    continue
                if len(ready) < len(tf.tests):  # run the tests whose notebooks passed, say which wait
                    waiting_on = sorted({n for tid in tf.tests if tid not in ready for n in tf.tests[tid]
                                         if n in bad}, key=order)
                    tf.selected = ready
                    tf.left_out = (f"{len(tf.tests) - len(ready)} of {len(tf.tests)} test(s) not run yet: "
                                   f"they need {', '.join(waiting_on)}, whose inline tests did not pass")
                    targets = [f"{tdir / tf.name}::{tid}" for tid in ready]
            tf.submitted = True
            self.waiting.append((self.expected(tf.name, TEST_FILE_GUESS_S),
                                 self._test_file_job(tf, targets, tdir, ws_root, pkg)))

    def _test_file_job(self, tf: TestFileRun, targets: list[str], tdir: Path, ws_root: Path, pkg: _Package) -> dict:
        stem = Path(tf.name).stem
        xml = self.work / f"{stem}.xml"
        xml.unlink(missing_ok=True)
        return {"id": f"pytest:{tf.name}", "kind": "pytest", "cwd": str(ws_root),
                "args": ["-q", "-p", "no:cacheprovider", f"--junitxml={xml}", "--rootdir", str(tdir),
                         "--confcutdir", str(tdir), "-c", os.devnull, *targets],
                "record": str(pkg.lib), "marked": str(self.marked), "log": str(self.logs / f"{stem}.log"),
                "result": str(self.work / f"{stem}.json"), "timeout": TEST_FILE_TIMEOUT_S}

    def _waits(self, name: str, runs: list[NotebookRun], tfiles: list[TestFileRun]) -> bool:
        tf = next(t for t in tfiles if t.name == name)
        return any(r.name in tf.needs and r.result is None for r in runs)

    def _early_verdict(self, msg: dict, name: str, runs: list[NotebookRun], tfiles: list[TestFileRun]) -> str:
        """A test file's end: "keep" it (not started early, or every notebook it needs passed), "held" while one of
        them still runs, "thrown away" when one failed (its run stands for nothing)."""
        tf = next(t for t in tfiles if t.name == name)
        if not tf.early:
            return "keep"
        if self._waits(name, runs, tfiles):
            self.held[name] = msg
            return "held"
        by_name = {r.name: r for r in runs}
        if all(by_name[n].ok for n in tf.needs):
            return "keep"
        tf.early = tf.submitted = False
        tf.thrown_away = True
        return "thrown away"

    def done(self, msg: dict, runs: list[NotebookRun], tfiles: list[TestFileRun], tdir: Path, ws_root: Path,
             pkg: _Package, timeout: float) -> None:
        """Record the job that ended (its result, the cache) and queue what it makes ready."""
        kind, _, name = msg["id"].partition(":")
        cache = self.cache
        if kind == "pytest" and (early := self._early_verdict(msg, name, runs, tfiles)) != "keep":
            if early == "thrown away":  # as if it had waited: run in part, or skipped
                self.ready_test_files(tfiles, runs, tdir, ws_root, pkg)
            self.send()
            return
        if kind == "inline":
            self.running.discard(name)
            r = next(r for r in runs if r.name == name)
            r.seconds, r.cpu_seconds = msg["seconds"], msg.get("cpu_seconds", 0.0)
            log = self.logs / f"{r.path.stem}.log"
            if msg["result"] is None:
                why = f"timed out after {timeout:.0f} s" if msg["timed_out"] else f"runner crashed (exit {msg['exit']})"
                tail = process.tail(log.read_text(encoding="utf-8", errors="replace") if log.exists() else "", 6)
                r.result = {"file": r.name, "ok": False, "error": f"{why}: {tail}", "tests": [], "passed": 0,
                            "failed": 0}
            else:
                r.result = msg["result"]
            executed = _executed_modules(r.result.pop("executed", None), pkg.files)
            unknown = r.result.pop("executed_unknown", None)
            r.report = task_reports(r, pkg.owner_of_file)
            cache["executions"][r.name] = cache["executions"].get(r.name, 0) + 1
            cache["seconds"][r.name] = r.seconds
            if _cacheable(r):
                cache["inline"][r.name] = {"key": r.key, "result": r.result, "executed": executed,
                                           "executed_unknown": unknown, "executed_key": None if executed is None else
                                           executed_key(r.code, executed, pkg.files, pkg.nb_extra, "inline-executed")}
            else:
                cache["inline"].pop(r.name, None)
            print(f"  {r.name}: {'passed' if r.ok else 'FAILED'} ({r.seconds:.1f} s, CPU {r.cpu_seconds:.1f} s)",
                  flush=True)
            for held in [self.held.pop(t) for t in list(self.held) if not self._waits(t, runs, tfiles)]:
                self.done(held, runs, tfiles, tdir, ws_root, pkg, timeout)  # its notebooks are done now
            self.ready_test_files(tfiles, runs, tdir, ws_root, pkg)
        else:
            tf = next(t for t in tfiles if t.name == name)
            tf.seconds, tf.cpu_seconds = msg["seconds"], msg.get("cpu_seconds", 0.0)
            tf.cases = parse_junit(self.work / f"{Path(name).stem}.xml")
            rc = (msg["result"] or {}).get("exit", msg["exit"])
            if msg["timed_out"]:
                tf.error = f"timed out after {TEST_FILE_TIMEOUT_S} s"
            elif rc == 5:
                tf.error = "pytest: no tests collected (exit 5)"
            elif rc not in (0, 1) or (rc == 1 and all(c["ok"] for c in tf.cases)):
                log = self.logs / f"{Path(name).stem}.log"
                tf.error = f"pytest exited {rc}: " + process.tail(
                    log.read_text(encoding="utf-8", errors="replace") if log.exists() else "", 4)
            cache["seconds"][name] = tf.seconds
            if tf.whole:
                executed = _executed_modules((msg["result"] or {}).get("executed"), pkg.files)
                cache["integration"][name] = {"key": tf.key, "cases": tf.cases, "executed": executed,
                                              "executed_unknown": (msg["result"] or {}).get("executed_unknown"),
                                              "executed_key": None if executed is None else
                                              executed_key(tf.own, executed, pkg.files, tf.extra)}
            else:
                cache["integration"].pop(name, None)
            print(f"  {name}: {'passed' if tf.ok else 'FAILED'} ({tf.seconds:.1f} s, CPU {tf.cpu_seconds:.1f} s)",
                  flush=True)
        self.send()


def _stage_results(runs: list[NotebookRun], tfiles: list[TestFileRun], tests: list[str] | None,
                   module: str) -> tuple[StageResult, StageResult]:
    """The inline and integration stages' counts and failures, for the stage table."""
    inline = StageResult("inline tests")
    for r in runs:
        inline.seconds += 0 if r.cached else r.seconds
        for t in (r.result or {}).get("tests", []):
            inline.add(t["status"] == "passed", f"{r.name}::{t['name']}: {t['error']}")
        if (r.result or {}).get("error"):
            inline.add(False, f"{r.name}: {r.result['error']}")
    it = StageResult("integration tests")
    for tf in tfiles:
        it.seconds += 0 if tf.cached else tf.seconds
        for c in tf.cases:
            it.add(c["ok"], f"{c['id']}: {c['message']}")
        if tf.error:
            it.add(False, f"{tf.name}: {tf.error}")
    if not tfiles:
        num = module.split("_", 1)[0]
        it.skipped_reason = f"no tests/test_{num}_*.py" + (f" matching {tests}" if tests else "")
    elif all(tf.skipped for tf in tfiles):
        it.skipped_reason = "no notebook they exercise passed its inline tests"
    return inline, it


def _finish(course: Course, module: str, mod_dir: Path, stages: list[StageResult], runs: list[NotebookRun],
            tfiles: list[TestFileRun], tests: list[str] | None, written: list[Path], t_start: float,
            cache: dict) -> int:
    """Print the report, record progress.json, return the exit code."""
    ws_root = mod_dir.parent
    print(f"\n== your notebooks, in reading order ({mod_dir}) ==")
    placed: dict[str, list[TestFileRun]] = {}
    for tf in tfiles:  # listed under the last notebook it needs
        placed.setdefault(tf.needs[-1] if tf.needs else "", []).append(tf)
    for i, r in enumerate(runs, 1):
        possible = sum(t.points for t in r.tasks)
        earned = sum(t.earned for t in r.report)
        res = r.result or {}
        how = "from the cache" if r.cached else ("not run" if r.syntax or res.get("blocked_by") else
                                                 f"ran in {r.seconds:.1f} s")
        said = "passed" if r.ok else ("NOT RUN" if res.get("blocked_by") else "FAILED")
        print(f"{i:2d}. {r.name}: {said}, {layout.points(earned)}/{layout.points(possible)} points "
              f"({res.get('passed', 0)} of {len(res.get('tests', []))} inline tests passed; {how})")
        if res.get("error"):
            print(f"      ! {res['error'].splitlines()[0]}")
        for t in r.report:
            mark = {"passed": "ok", "failed": "FAIL", "not attempted": "todo", "blocked": "wait"}.get(t.status, "??")
            line = f"      [{mark:4s}] {t.grade_id}: {layout.points(t.earned)}/{layout.points(t.points)} {t.status}"
            print(line + (f": {t.message.splitlines()[0]}" if t.message and t.status != "passed" else ""))
        graded = {n for t in r.tasks for n in t.tests}
        other = [t for t in res.get("tests", []) if t["name"] not in graded]
        if other:
            bad = [t for t in other if t["status"] != "passed"]
            print(f"      ungraded checks: {len(other) - len(bad)} of {len(other)} passed"
                  + (f"; {bad[0]['name']}: {((bad[0]['error'] or '').splitlines() or [''])[0]}" if bad else ""))
        for tf in placed.get(r.name, []):
            _print_tf(tf)
    for tf in placed.get("", []):
        _print_tf(tf)

    # every failure is in the report above, by notebook and task; the export's, if any, is not
    _, failed = print_table(stages, f"tito module complete {module} (workspace {mod_dir})",
                            show_failures=not runs)
    total = sum(t.points for r in runs for t in r.tasks)
    earned = sum(t.earned for r in runs for t in r.report)
    if runs:
        print(f"points from your inline tests: {layout.points(earned)} of {layout.points(total)} (a task's points "
              "are all or nothing: every check of its test must pass; your instructor's grading runs hidden tests too)")
    answers = nbgrader_glue.written_answers([r.path for r in runs] or sorted(mod_dir.glob("*.ipynb")))
    if answers:
        print(f"written answers: {sum(a.answered for a in answers)} of {len(answers)} written "
              f"({layout.points(sum(a.points for a in answers))} points, graded by your instructor)")
    if written:
        print(f"your exported files: {', '.join(str(f.relative_to(ws_root)) for f in written)}")
    partial = []
    if tests:
        partial.append(f"only the test files matching {' '.join(tests)} ran")
    skipped = [tf.name for tf in tfiles if tf.skipped]
    if skipped:
        partial.append(f"{len(skipped)} test file(s) skipped")
    in_part = [tf.name for tf in tfiles if tf.left_out]
    if in_part:
        partial.append(f"{len(in_part)} test file(s) ran only the tests whose notebooks passed")
    first = next((f for s in stages for f in s.failures), None)
    done = failed == 0 and all(s.ok for s in stages) and not partial
    record = {"module": module, "time": layout.now(), "complete": done, "partial": partial or None,
              "tests": tests, "seconds": round(time.perf_counter() - t_start, 1),
              "points": {"earned": earned, "possible": total},
              "notebooks": {r.name: {"cached": r.cached, "ok": r.ok, "seconds": r.seconds, "cpu_seconds": r.cpu_seconds,
                                     "executions": cache["executions"].get(r.name, 0),
                                     "tasks": {t.grade_id: {"points": t.points, "earned": t.earned, "status": t.status,
                                                            "message": t.message} for t in r.report}}
                            for r in runs},
              "integration": {tf.name: {"needs": tf.needs, "cached": tf.cached, "skipped": tf.skipped,
                                        "seconds": tf.seconds, "cpu_seconds": tf.cpu_seconds,
                                        "passed": sum(c["ok"] for c in tf.cases),
                                        "failed": sum(not c["ok"] for c in tf.cases), "error": tf.error,
                                        "not_run": tf.left_out, "early": tf.early, "thrown_away": tf.thrown_away}
                              for tf in tfiles},
              "written_answers": {f"{a.notebook}:{a.grade_id}": a.answered for a in answers},
              "stages": {s.name: {"run": s.run, "passed": s.passed, "failed": s.failed,
                                  "skipped": s.skipped_reason} for s in stages},
              "first_failure": first}
    prog_path = mod_dir / layout.PROGRESS
    prog = json.loads(prog_path.read_text(encoding="utf-8")) if prog_path.exists() else {"module": module, "history": []}
    prog["last"] = record
    prog["completed"] = bool(prog.get("completed")) or done
    prog["history"] = (prog.get("history") or [])[-49:] + [record]
    layout.write_json(prog_path, prog)
    ran = sum(not r.cached and not r.syntax and not (r.result or {}).get("blocked_by") for r in runs)
    ran_tf = sum(not tf.cached and not tf.skipped for tf in tfiles)
    cached_tf = sum(tf.cached for tf in tfiles)
    print(f"done in {time.perf_counter() - t_start:.1f} s: {ran} of {len(runs)} notebook(s) and "
          f"{ran_tf} of {len(tfiles)} test file(s) ran"
          + (f"; {sum(r.cached for r in runs)} notebook(s) and {cached_tf} test file(s) unchanged since their last "
             "run (from the cache)" if any(r.cached for r in runs) or cached_tf else ""))
    if done:
        print(f"\nmodule {module} complete (progress recorded in {prog_path})")
        return 0
    why = "; ".join(partial + ([f"first failure: {first}"] if first else []))
    print(f"\nmodule {module} NOT complete: {why or 'see above'}")
    return 1


def _print_tf(tf: TestFileRun) -> None:
    if tf.skipped:
        print(f"      integration {tf.name}: skipped: {tf.skipped}")
        return
    bad = [c for c in tf.cases if not c["ok"]]
    how = "from the cache" if tf.cached else f"{tf.seconds:.1f} s"
    print(f"      integration {tf.name}: {len(tf.cases) - len(bad)} of {len(tf.cases)} passed ({how})"
          + (f"; {bad[0]['id']}: {bad[0]['message']}" if bad else "") + (f"; {tf.error}" if tf.error else "")
          + (f"; {tf.left_out}" if tf.left_out else ""))
