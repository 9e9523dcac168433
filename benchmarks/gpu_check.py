"""GPU check: the library's CUDA timings against CUDA events, on the bundled digits CNN.

Run on a machine with a GPU, from the repository root (no tito bootstrap needed where torch,
numpy, pandas, scipy, scikit-learn and matplotlib are installed):

    PYTHONPATH=. python3 benchmarks/gpu_check.py [--out DIR]

Prints, side by side in one run:
1. `Benchmark(..., device="cuda")` latency median with its interval, and the median of the same
   model timed independently with `torch.cuda.Event` pairs around each call (synchronised), and
   with `torch.utils.benchmark.Timer` (blocked_autorange); their ratios;
2. the energy figure and its source (NVML where readable, else the reason);
3. the machine state the run recorded (busy or quiet, with the figures);
4. `tito benchmark --device cuda --runtimes eager,compile` end to end (exit code, the report's rows).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch


def cuda_event_median_ms(model: torch.nn.Module, x: torch.Tensor, calls: int = 300, warmup: int = 50) -> float:
    "Median of per-call times from CUDA events recorded around each call, after `warmup` untimed calls."
    with torch.inference_mode():
        for _ in range(warmup):
            model(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(calls):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def torch_timer_median_ms(model: torch.nn.Module, x: torch.Tensor) -> float:
    "torch.utils.benchmark's blocked_autorange median (it synchronises CUDA around each block)."
    from torch.utils import benchmark as tb

    with torch.inference_mode():
        m = tb.Timer("model(x)", globals={"model": model, "x": x}).blocked_autorange(min_run_time=1.0)
    return m.median * 1e3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu_check", help="folder for the tito benchmark output")
    p.add_argument("--device", default="cuda", help="cuda[:n]; 'cpu' only to try the script without a GPU")
    args = p.parse_args()
    if args.device != "cpu" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 2
    from tinytorch.benchmarking.benchmark import Benchmark
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split
    from tinytorch.benchmarking.energy import measure_energy
    from tinytorch.profiling.timing import adapt

    cuda = args.device != "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    print(f"device: {torch.cuda.get_device_name() if cuda else 'cpu'}  torch {torch.__version__}")
    model = default_digits_model().eval()
    x_test, y_test = load_digits_split("test")
    bench = Benchmark([adapt(model, "digits_cnn", device=args.device)], [(x_test, y_test)], measurement_runs=50,
                      warmup_runs=10)
    lat = bench.run_latency_benchmark()
    (name, res), = lat.items()
    gpu_model, x1 = default_digits_model().eval().to(args.device), x_test[:1].to(args.device)
    ev = cuda_event_median_ms(gpu_model, x1) if cuda else float("nan")
    tm = torch_timer_median_ms(gpu_model, x1)
    lo, hi = res.median_ci()
    print(f"latency  Benchmark median {res.median:.4f} ms [{lo:.4f}, {hi:.4f}] (median's 95% interval) "
          f"({len(res.values)} samples)")
    print(f"         CUDA events median {ev:.4f} ms   ratio Benchmark/events {res.median / ev:.3f}")
    print(f"         torch.utils.benchmark median {tm:.4f} ms   ratio Benchmark/Timer {res.median / tm:.3f}")
    acc = bench.run_accuracy_benchmark()
    print(f"accuracy {next(iter(acc.values()))}")
    def call() -> None:
        with torch.inference_mode():
            gpu_model(x1)
        sync()

    print(f"energy   {measure_energy(call, device=args.device, sync=sync)}")
    print("machine  " + json.dumps({k: {"busy": v.get("busy"), "reasons": v.get("reasons")}
                                    for k, v in bench.machine_states.items()}, default=str)[:600])
    out = Path(args.out)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-c", "import sys; from tito.cli import main; sys.exit(main(sys.argv[1:]))",
           "benchmark", "--device", args.device, "--runtimes", "eager,compile", "--runs", "30", "--output-dir", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"tito benchmark --device cuda --runtimes eager,compile: exit {r.returncode} in "
          f"{time.perf_counter() - t0:.0f} s")
    print(r.stdout[-4000:])
    print(r.stderr[-2000:])
    return 0 if r.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
