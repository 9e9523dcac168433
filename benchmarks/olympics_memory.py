"""The Olympics judge's memory and time on a generated class (issue 35): N students, a third each TorchScript
(pruned digits CNN, each its own amount), ONNX (the same, exported with `to_onnx`) and a copied int8 TorchScript
file; judged by `judge_class` with a memory budget, while this script samples the proportional set size (PSS,
/proc/<pid>/smaps_rollup: a page shared by n processes counts 1/n to each) of the judge and every process below
it every 0.2 s. Prints one JSON line: peak PSS (MiB), the groups' sizes, the measured footprints, minutes.

    .venv/bin/python benchmarks/olympics_memory.py --students 60 --memory-mb 4096 [--rounds 6] [--jobs 2] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_class(root: Path, n: int) -> None:
    import torch

    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.benchmarking.olympics import generate_submission
    from tinytorch.benchmarking.optimize import prune_magnitude, quantize_int8, to_onnx

    base = default_digits_model()
    x0 = torch.zeros(1, 1, 8, 8)
    int8 = torch.jit.trace(quantize_int8(base, "static", calibration_data=load_digits_split("train")[0][:256].split(64)), x0)
    doc = None
    for i in range(n):
        d = root / f"s{i:03d}"
        d.mkdir(parents=True)
        model = prune_magnitude(base, 0.1 + 0.8 * i / max(n, 1))
        if i % 3 == 0:
            name = "model.pt"
            torch.jit.save(torch.jit.trace(model, x0), str(d / name))
        elif i % 3 == 1:
            name = "model.onnx"
            to_onnx(model, x0, d / name)
        else:
            name = "model.pt"
            torch.jit.save(int8, str(d / name))
        if doc is None:
            doc = generate_submission(base, torch.jit.load(str(d / name)), "memory_challenge", participant="s000",
                                      measurement_runs=6, warmup_runs=2, model_files={"optimized": name})
        models = {**doc["models"], "optimized": {**doc["models"]["optimized"], "file": name}}
        (d / "submission.json").write_text(json.dumps({**doc, "participant": d.name, "models": models}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--memory-mb", type=float, default=16384)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", default=None, help="folder for the class and the output (default: a temporary one)")
    args = ap.parse_args()
    from tito.isolation.procs import tree_pss_mb

    work = Path(args.work or tempfile.mkdtemp(prefix="olympics-memory-"))
    subs, out = work / "submissions", work / "out"
    if not subs.is_dir():
        t = time.perf_counter()
        make_class(subs, args.students)
        print(f"made {args.students} students in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    code = (f"from tito.olympics.judge import judge_class; r = judge_class({str(subs)!r}, 'memory_challenge', {str(out)!r}, "
            f"jobs={args.jobs}, rounds={args.rounds}, memory_mb={args.memory_mb}, timeouts={{'load': 300, 'predict': 300, "
            f"'time': 60}}); print(len(r['board']['ranks']), 'ranked,', len(r['rejected']), 'rejected')")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    peak, samples = 0.0, 0
    while proc.poll() is None:
        peak = max(peak, tree_pss_mb(proc.pid))
        samples += 1
        time.sleep(0.2)
    minutes = (time.perf_counter() - t0) / 60
    state = json.loads((out / ".judge-state.json").read_text())
    print(json.dumps({"students": args.students, "memory_mb_budget": args.memory_mb, "rounds": args.rounds,
                      "jobs": args.jobs, "peak_pss_mib": round(peak, 1),
                      "groups": [len(g) for g in state.get("groups", [])], "footprint": state.get("memory"),
                      "minutes": round(minutes, 2), "samples": samples, "exit": proc.returncode}))


if __name__ == "__main__":
    main()
