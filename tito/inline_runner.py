"""Run a module source's inline tests in this process and report them as JSON.

    python -m tito.inline_runner FILE [--json-only]

Executes FILE's code with `__name__ = "__tito_inline__"` (so `if __name__ == "__main__":`
blocks do not fire), then calls, in definition order, every top-level function named
`test_unit_*`, then `test_module` if defined. Each test's own output goes to stderr.

The last line on stdout is the summary, prefixed by MARKER:

    TITO_INLINE_RESULT {"file": str, "ok": bool, "error": str|null,
        "tests": [{"name": str, "status": "passed"|"failed"|"not_implemented",
                   "seconds": float, "error": str|null}],
        "passed": int, "failed": int, "seconds": float}

`error` on the file is set when the file fails to load ("SyntaxError: ...") or holds no
tests ("no tests found"). A test whose failure is a NotImplementedError reports
"not yet implemented: <qualname>" (co_qualname of the innermost frame that raised it);
others report "<ExceptionType>: <message>". Exit code: 0 when ok, 1 otherwise.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
import types
from pathlib import Path

MARKER = "TITO_INLINE_RESULT "


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
            entry = {"name": name, "status": "passed", "seconds": 0.0, "error": None}
            try:
                ns[name]()
            except BaseException as e:  # noqa: BLE001
                if isinstance(e, KeyboardInterrupt):
                    raise
                traceback.print_exc(file=sys.stderr)
                entry["status"], entry["error"] = _describe(e)
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


def parse_output(stdout: str) -> dict | None:
    """The summary dict from a runner's stdout, or None if there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m tito.inline_runner FILE", file=sys.stderr)
        return 2
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # the tests' prints must not mix with the summary line
    try:
        res = run_file(argv[0])
    finally:
        sys.stdout = real_stdout
    real_stdout.write(MARKER + json.dumps(res) + "\n")
    real_stdout.flush()
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
