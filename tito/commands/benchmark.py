"""`tito benchmark`: the main job. Benchmark the bundled default models (or a saved model).

Default: the digits CNN (trained at first use and cached), its static-int8 and 50%-pruned
variants, on scikit-learn's real `digits` test split: latency, accuracy, memory, throughput and
energy (where measurable), with comparisons and significance, a Markdown report, results.json,
results.csv and plots. `--model FILE --input-shape 1,1,8,8` benchmarks a saved model
(TorchScript, torch.save(nn.Module) or an .onnx file). `--runtimes eager,compile,onnxruntime`
benchmarks each model under each runtime (rows `<model>[<runtime>]`) with the cross-runtime
comparison; `--device cuda[:n]` runs on a GPU (exit 2 with a message naming CUDA where there
is none). `--hardware` also writes the edge/hardware artifacts (layer-wise stats, roofline
summary, precision sweep, device fit) for the default model or the `--model` file.
All the work is done by the exported package (`tinytorch.benchmarking.defaults`); this file parses
the command line and sets the exit code, and `tito.default_benchmark` prints what the run returns.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from tito.config import Course, TitoError


def parse_budget(text: str) -> float:
    "--budget: a positive, finite number of seconds (argparse names the option when this raises)."
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def parse_shape(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in re.split(r"[,x]", text.strip().strip("()[]"))]
    dims = tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()
    if not dims or any(d < 1 for d in dims):
        raise TitoError(f"--input-shape: expected positive integers like 1,1,8,8; got {text!r}", code=2)
    return dims


def _library():
    try:
        from tinytorch.benchmarking.defaults import write_hardware_artifacts
        from tito.default_benchmark import run_default_benchmark
    except ImportError as e:
        raise TitoError(f"tito benchmark needs the exported package ({e}); run `python3 -m tito export`") from e
    return run_default_benchmark, write_hardware_artifacts


def _loaded_model(args) -> tuple[object, object]:
    """The `--model` file loaded once (None without one), and with `--hardware` the module its analysis runs on,
    refused (exit 2) before any benchmark runs when it is ONNX or TorchScript (the library's one check)."""
    if not args.model:
        return None, None
    from tinytorch.benchmarking.defaults import hardware_model
    from tinytorch.benchmarking.suite import load_model_file
    try:
        model = load_model_file(args.model)
    except (ValueError, TypeError, FileNotFoundError, OSError) as e:  # bad file, named by the library
        raise TitoError(str(e), code=2) from e
    try:
        return model, hardware_model(args.model, model) if args.hardware else None
    except ValueError as e:
        raise TitoError(f"--hardware needs a PyTorch model: {e}", code=2) from e


def _checked_device_and_runtimes(args) -> tuple[str, tuple[str, ...]]:
    "Check --device and --runtimes before anything is built; exit 2 naming what is wrong."
    from tinytorch.benchmarking.defaults import parse_runtimes
    from tinytorch.profiling.timing import check_device
    try:
        runtimes = parse_runtimes(args.runtimes)
    except ValueError as e:
        raise TitoError(f"--runtimes: {e}", code=2) from e
    try:
        check_device(args.device)
    except ValueError as e:  # CudaUnavailableError too: the message names CUDA
        raise TitoError(f"--device: {e}", code=2) from e
    return args.device, runtimes


def run(args) -> int:
    course = Course.load()
    run_default_benchmark, write_hardware = _library()
    if args.runs < 2:
        raise TitoError(f"--runs: expected at least 2 samples, got {args.runs}", code=2)
    if args.threads is not None and args.threads < 1:
        raise TitoError(f"--threads: expected a positive int, got {args.threads}", code=2)
    if args.power_watts is not None and args.power_watts <= 0:
        raise TitoError(f"--power-watts: expected a positive number, got {args.power_watts}", code=2)
    if args.model and not args.input_shape:
        raise TitoError("--model needs --input-shape (e.g. --input-shape 1,1,8,8)", code=2)
    shape = parse_shape(args.input_shape) if args.input_shape else None
    device, runtimes = _checked_device_and_runtimes(args)
    model, hw_model = _loaded_model(args)
    out_dir = Path(args.output_dir) if args.output_dir else course.root / "benchmark_results"
    from tinytorch.benchmarking.optimize import RuntimeUnavailableError
    try:
        out = run_default_benchmark(out_dir, measurement_runs=args.runs, quiet=args.quiet,
                                    model_path=args.model, input_shape=shape, threads=args.threads,
                                    power_watts=args.power_watts, runtimes=runtimes, device=device, model=model,
                                    budget_s=args.budget)
    except (ValueError, TypeError, FileNotFoundError, OSError, RuntimeUnavailableError) as e:  # bad input, named by the library
        raise TitoError(str(e), code=2) from e
    written = [out["report"], out["json"], out["csv"], *out["plots"]]
    if args.hardware:
        hw_dir = out_dir / "hardware"
        if not args.quiet:
            print(f"writing hardware artifacts for {'the default model' if not args.model else args.model} "
                  f"to {hw_dir} (on the CPU) ...", flush=True)
        try:
            hw = write_hardware(hw_dir, args.model, shape, power_watts=args.power_watts, model=hw_model)
        except (ValueError, TypeError) as e:  # e.g. an input shape the model cannot take
            raise TitoError(str(e), code=2) from e
        written += list(hw.values())
        from tinytorch.profiling.timing import machine_warning

        if warning := machine_warning(json.loads(hw["machine_state"].read_text()), "the hardware artifacts"):
            print(warning, file=sys.stderr, flush=True)
    if args.quiet:
        print(out["report"])
    else:
        print(f"\nwrote {len(written)} files to {out_dir}; report: {out['report']}")
    return 0


def add_parser(sub, lazy) -> None:
    s = sub.add_parser("benchmark", help="the main job: benchmark the bundled default models (or your model)",
                       description="Benchmark the digits CNN, its int8 and pruned variants on scikit-learn's "
                                   "digits (latency distribution, accuracy, memory, throughput, energy where "
                                   "measurable, significance tests) and write a report, results.json, "
                                   "results.csv and plots.")
    s.add_argument("--output-dir", default=None, help="where result files go (default: benchmark_results/)")
    s.add_argument("--runs", type=int, default=30, help="timed samples per model in each look (default: 30)")
    s.add_argument("--budget", type=parse_budget, default=None, metavar="SECONDS",
                   help="sample latency until every comparison with the baseline is decided (faster, "
                        "slower or equivalent), in looks of --runs samples, within SECONDS (default: 3 per model)")
    s.add_argument("--threads", type=int, default=1,
                   help="torch threads while timing (default 1: these models are tiny and a shared "
                        "machine's second core adds waits; the count is recorded)")
    s.add_argument("--power-watts", type=float, default=None,
                   help="device power for an energy estimate when no energy counter is readable")
    s.add_argument("--quiet", action="store_true", help="print only the report path")
    s.add_argument("--model", default=None, metavar="FILE",
                   help="saved model: TorchScript, torch.save(nn.Module) or an .onnx file (run by ONNX Runtime)")
    s.add_argument("--input-shape", default=None, metavar="SHAPE", help="input shape for --model, e.g. 1,1,8,8")
    s.add_argument("--runtimes", default="eager", metavar="LIST",
                   help="comma-separated runtimes to benchmark each model under: eager, compile (torch.compile), "
                        "onnxruntime (default: eager); rows are named <model>[<runtime>] and compared with eager")
    s.add_argument("--device", default="cpu", metavar="DEVICE",
                   help="cpu (default) or cuda[:n]; torch.ao int8 models are CPU only (listed as unavailable)")
    s.add_argument("--hardware", action="store_true",
                   help="also write hardware artifacts (layer-wise stats, roofline, precision sweep, device fit) "
                        "for the default model or the --model file")
    s.set_defaults(func=lazy("benchmark"))
