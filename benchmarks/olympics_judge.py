"""The Olympics judge on the fixture class: wall time, and its timing against an in-process loop.

Run: `python benchmarks/olympics_judge.py [--rounds 30] [--jobs 2]`. Every figure is measured in this
run, on this machine:

1. the fixture class (tests/fixtures/olympics_class.py: 11 folders, 4 judged models, 7 rejected
   including one that sleeps until the `--timeout` of 20 s) built and judged end to end;
2. harness agreement: each judged model's median latency (timed by the judge from outside its
   sandbox, k single-image calls per request) over a plain `perf_counter_ns` loop over the same
   model in this process (as the judge runs it: TorchScript, a pickled module traced), same
   single-image inputs, one thread, median of 15 blocks. Target: 1 +- 10%
   (the request's IPC round trip is the one cost the judge adds; its share is printed too).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def plain_ms(model, X, calls: int = 400, blocks: int = 15) -> float:
    torch.set_num_threads(1)
    with torch.inference_mode():
        for i in range(200):
            model(X[i % len(X):i % len(X) + 1])
        per = []
        for b in range(blocks):
            t0 = time.perf_counter_ns()
            for i in range(calls):
                j = (b * calls + i) % len(X)
                model(X[j:j + 1])
            per.append((time.perf_counter_ns() - t0) / calls / 1e6)
    return statistics.median(per)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    from fixtures.olympics_class import EVENT, make_class

    from tinytorch.benchmarking.digits import load_digits_split
    from tito.olympics.judge import judge_class

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        make_class(Path(tmp) / "subs", port=9)
        made = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = judge_class(Path(tmp) / "subs", EVENT, Path(tmp) / "out", jobs=args.jobs, rounds=args.rounds,
                          timeouts={"load": 20, "predict": 20, "time": 20})
        judged = time.perf_counter() - t0
        print(f"fixture class: built in {made:.1f} s, judged in {judged:.1f} s (--jobs {args.jobs}, --rounds {args.rounds}, "
              f"{len(res['students'])} judged, {len(res['rejected'])} rejected; the sleeper costs the 20 s --timeout)")
        X = load_digits_split("test")[0]
        for name, file in (("alice", "pruned.pt"), ("bob", "int8.pt")):
            path = Path(tmp) / "subs" / name / file
            model = torch.jit.load(str(path)) if name == "bob" else torch.load(path, weights_only=False)
            if name != "bob":  # the judge measures a pickled module as its TorchScript trace
                model = torch.jit.trace(model.eval(), X[:1], check_trace=False)
            rec = res["students"][name]
            judge_ms = rec["figures"]["latency_median_ms"]["optimized"]
            here = plain_ms(model.eval(), X)
            overhead = rec["timing"]["ipc_overhead_ms"]
            print(f"{name:6s} judged {judge_ms:.4f} ms, plain loop {here:.4f} ms: ratio {judge_ms / here:.3f}; "
                  f"an empty request {overhead * 1000:.0f} us (k = calls per request)")


if __name__ == "__main__":
    main()
