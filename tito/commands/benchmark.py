"""`tito benchmark`: measure a model on this machine and save the result.

Default: the bundled digits CNN (tinytorch.benchmarking.digits, trained at first use and
cached), its latency distribution on a (1, 1, 8, 8) input, and its accuracy on the held-out
digits split. `--model FILE` benchmarks a saved PyTorch model (TorchScript or a pickled
nn.Module) on `--input-shape`; its accuracy is absent (no labelled data for it).
All the measuring is done by the exported package; this file only wires it to the CLI.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path

from tito.config import Course, TitoError


def _imports():
    try:
        from tinytorch.benchmarking.benchmark import BenchmarkResult
        from tinytorch.benchmarking import digits
        from tinytorch.profiling import timing
    except ImportError as e:
        raise TitoError(
            "tito benchmark needs the exported package (tinytorch.benchmarking.benchmark, "
            "tinytorch.benchmarking.digits, tinytorch.profiling.timing) from modules 15 and 19; "
            f"import failed: {e}. Run `python3 -m tito export` (and check `tito test 19`).") from e
    return BenchmarkResult, digits, timing


def parse_shape(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in re.split(r"[,x]", text.strip().strip("()[]"))]
    dims = tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()
    if not dims or any(d < 1 for d in dims):
        raise TitoError(f"--input-shape: expected positive integers like 1,1,8,8; got {text!r}", code=2)
    return dims


def load_model(path: Path):
    import torch

    if not path.exists():
        raise TitoError(f"--model: no such file {path}", code=2)
    try:
        return torch.jit.load(str(path), map_location="cpu")
    except Exception:  # noqa: BLE001 - not TorchScript: try a pickled module
        pass
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001
        raise TitoError(f"--model: cannot load {path}: {type(e).__name__}: {e}", code=2) from e
    if not isinstance(obj, torch.nn.Module):
        raise TitoError(f"--model: {path} holds a {type(obj).__name__}, expected a saved torch.nn.Module "
                        "(torch.save(model) or TorchScript); a state_dict alone has no architecture", code=2)
    return obj


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def benchmark(model_file: Path | None, input_shape: tuple[int, ...] | None, runs: int,
              output_dir: Path, quiet: bool = False) -> dict:
    BenchmarkResult, digits, timing = _imports()
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    if model_file is None:
        say("loading the bundled digits CNN (trained and cached on first use)...")
        model, name = digits.default_digits_model(), "digits_cnn"
        shape = input_shape or (1, 1, 8, 8)
    else:
        if input_shape is None:
            raise TitoError("--model needs --input-shape (e.g. --input-shape 1,1,8,8)", code=2)
        model, name, shape = load_model(model_file), Path(model_file).stem, input_shape
    say(f"timing {name} on input {tuple(shape)} ({runs} samples)...")
    try:
        samples = timing.time_model(model, tuple(shape), samples=runs)
    except Exception as e:  # a model that raises is a failed measurement, reported as such
        raise TitoError(f"measurement failed: {name} raised {type(e).__name__}: {e}") from e
    latency = BenchmarkResult("latency", samples.per_call_ms, unit="ms", metadata=samples.metadata())
    accuracy = {"value": None, "reason": "no labelled data for a user-supplied model"}
    if model_file is None:
        X, y = digits.load_digits_split("test")
        accuracy = {"value": digits.accuracy_on(model, X, y), "split": "test", "n": int(len(y)),
                    "method": "measured: top-1 on the held-out digits split"}
    sysinfo = timing.system_info() if hasattr(timing, "system_info") else None
    record = {
        "model": name,
        "input_shape": list(shape),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "latency": latency.to_dict(),
        "accuracy": accuracy,
        "system": sysinfo,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = output_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{stamp}.json"
    _write_atomic(out, json.dumps(record, indent=2, default=str) + "\n")
    record["path"] = str(out)
    if not quiet:
        print()
        print(f"model      {name}")
        print(f"input      {tuple(shape)}")
        print(f"latency    median {latency.median:.4g} ms  p90 {latency.p90:.4g}  p99 {latency.p99:.4g}  "
              f"mean {latency.mean:.4g} ± {latency.std:.4g} ms  (n={latency.count}, "
              f"{samples.calls_per_sample} calls/sample, {samples.threads} threads)")
        acc = accuracy["value"]
        print(f"accuracy   {acc:.4f} ({accuracy['method']}, n={accuracy['n']})" if acc is not None
              else f"accuracy   n/a ({accuracy['reason']})")
    print(f"saved {out}")
    return record


def run(args) -> int:
    course = Course.load()
    if args.runs < 2:
        raise TitoError(f"--runs: expected at least 2 samples, got {args.runs}", code=2)
    shape = parse_shape(args.input_shape) if args.input_shape else None
    out_dir = Path(args.output_dir) if args.output_dir else course.root / "benchmark_results"
    benchmark(Path(args.model) if args.model else None, shape, args.runs, out_dir, args.quiet)
    return 0
