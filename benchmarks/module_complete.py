"""How long `tito module complete N` takes in a student workspace: first run, re-runs, forced full run.

    python benchmarks/module_complete.py [--module 19] [--edit hardware_dev,systems_thinking_dev]

Makes the student release in a temporary folder, starts a workspace from it and copies the
instructor's solution notebooks over it (the honest "full" case: every task done, every test
runs), then times `python3 -m tito module complete N`, run from the workspace's module folder as
a student runs it:

1. the first run (no cache);
2. a re-run with nothing changed;
3. a re-run after editing one notebook, for each notebook named by --edit: `pass` is added to the
   solution of its first exported task (edit_exported_cell), so that function changes and the
   notebook, every notebook that can reach its module and every test file that called it (or
   whose calls could not be recorded) run again;
4. a forced full re-run (`--no-cache`), and the speedup of each re-run against it.

Each line gives the wall time, the CPU time of the whole process tree (user + system; on a quiet
machine with C usable cores the wall time cannot be below CPU / C), what ran (notebooks and test files executed, of all), the exit code
and the 1-minute load average before and after (os.getloadavg): on a shared machine the load
says as much about a figure as the figure itself.

The sequence runs twice, side by side in one run, each in a fresh workspace: with a job server of each run's own
(TITO_KEEP_SERVER=0) and with the server kept between runs (tito.testing.kept_server, the default). A kept server
is not the run's child, so its CPU (its own and its sessions', tito.isolation.procs.tree_cpu_s) is added to the run's; it is
stopped at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tito.isolation import procs  # noqa: E402
from tito.testing import kept_server  # noqa: E402
from tito.workspace import layout  # noqa: E402
from tito.workspace.start import start  # noqa: E402
from tito.notebooks.student_release import release  # noqa: E402
from tito.config import Course  # noqa: E402


def kept_cpu(ws_root: Path) -> float:
    """CPU seconds of the workspace's kept servers: each with its sessions and their jobs, running or collected."""
    return sum(procs.tree_cpu_s(pid) for pid in kept_server.running(ws_root))


def timed_complete(mod_dir: Path, num: str, *extra: str, env: dict | None = None) -> dict:
    """Run `python3 -m tito module complete NUM` in `mod_dir`; wall time, load, what ran."""
    load0 = os.getloadavg()[0]
    server0 = kept_cpu(mod_dir.parent)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "tito", "module", "complete", num, *extra], cwd=mod_dir,
                       capture_output=True, text=True, env=env)
    secs = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime) + kept_cpu(mod_dir.parent) - server0
    last = json.loads((mod_dir / layout.PROGRESS).read_text(encoding="utf-8"))["last"]
    nbs, tfs = last.get("notebooks", {}), last.get("integration", {})
    return {"seconds": secs, "cpu": cpu, "rc": p.returncode, "complete": last["complete"], "load": (load0, os.getloadavg()[0]),
            "notebooks": (sum(not v["cached"] for v in nbs.values()), len(nbs)),
            "test_files": (sum(not v["cached"] and not v["skipped"] for v in tfs.values()), len(tfs)),
            "failures": last.get("first_failure"), "tail": p.stdout[-1500:] + p.stderr[-1500:]}


def edit_exported_cell(nb_path: Path) -> None:
    """A student's edit of their first task: a `pass` added after the first `### BEGIN SOLUTION`
    of an exported cell (that function's code changes, so the notebook and every test file whose
    tests call it, or that cannot be followed, run again); else a comment on the first code cell."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        m = re.search(r"^([ \t]*)### BEGIN SOLUTION\n", src, re.M)
        if c["cell_type"] == "code" and src.lstrip().startswith("#| export") and m:
            c["source"] = src[:m.end()] + f"{m.group(1)}pass  # edited by benchmarks/module_complete.py\n" + src[m.end():]
            break
    else:
        c = next(c for c in nb["cells"] if c["cell_type"] == "code")
        c["source"] = ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]) + "\n# edited\n"
    nb_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def show(label: str, r: dict, full: float | None = None) -> None:
    sp = f"  {full / r['seconds']:.1f}x faster than the forced full run" if full else ""
    print(f"{label:<42s} {r['seconds']:6.1f} s (CPU {r['cpu']:6.1f} s)  ran {r['notebooks'][0]:2d}/{r['notebooks'][1]} notebooks, "
          f"{r['test_files'][0]:2d}/{r['test_files'][1]} test files  exit {r['rc']}  "
          f"load {r['load'][0]:.1f} -> {r['load'][1]:.1f}{sp}", flush=True)
    if r["rc"] != 0:
        print(f"    not complete: {r['failures']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", default="19")
    ap.add_argument("--edit", default="hardware_dev,systems_thinking_dev",
                    help="notebook stems to edit, one re-run each (comma-separated)")
    ap.add_argument("--keep", default=None, help="make the workspace here and keep it (default: a temporary folder)")
    args = ap.parse_args(argv)
    course = Course.load(ROOT)
    (module,) = course.resolve([args.module])
    num = module.split("_", 1)[0]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tito-complete-bench-"))
    try:
        print(f"machine: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable; python {sys.version.split()[0]}")
        res = release(course, module, release_dir=base / "release", course_dir=base / "nbgrader")
        if res.leaks:
            raise SystemExit(f"the release leaks {len(res.leaks)} solution lines")
        rows = {}
        for mode, keep in (("a server of each run's own", "0"), ("the server kept between runs", "")):
            env = {**os.environ, "TITO_KEEP_SERVER": keep} if keep else {k: v for k, v in os.environ.items()
                                                                          if k != "TITO_KEEP_SERVER"}
            ws = base / f"ws-{len(rows)}"
            mod_dir = start(course, module, ws, force=True, release_dir=base / "release")
            for nb in course.notebooks(module):  # the instructor's solutions as the student's work
                shutil.copy2(nb, mod_dir / nb.name)
            try:
                first = timed_complete(mod_dir, num, env=env)
                again = timed_complete(mod_dir, num, env=env)
                edits = []
                for stem in [s for s in args.edit.split(",") if s]:
                    edit_exported_cell(mod_dir / f"{stem}.ipynb")
                    edits.append((stem, timed_complete(mod_dir, num, env=env)))
                full = timed_complete(mod_dir, num, "--no-cache", env=env)
            finally:
                for pid in kept_server.running(ws):
                    os.kill(pid, signal.SIGTERM)
            rows[mode] = (first, again, edits, full)
        for mode, (first, again, edits, full) in rows.items():
            print(f"\n{mode}:")
            show("first run (no cache)", first)
            show("re-run, nothing changed", again, full["seconds"])
            for stem, r in edits:
                show(f"re-run after editing {stem}", r, full["seconds"])
            show("forced full re-run (--no-cache)", full)
            if first["rc"] != 0:
                print("\nfirst run's output (tail):\n" + first["tail"])
        (own, kept) = rows.values()
        print("\nkept / own server, wall time: first run {:.2f}x, after each edit {}".format(
            kept[0]["seconds"] / own[0]["seconds"],
            ", ".join(f"{k[1]['seconds'] / o[1]['seconds']:.2f}x" for o, k in zip(own[2], kept[2]))))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
