# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 15, part 1: Timing and the model adapter
#
# Every number this course reports about speed comes out of the code in this notebook.
# Profiling (the rest of Module 15) and benchmarking (Module 19) never read a clock
# themselves: they hand a model and an input to **one adapter** and **one timing core**,
# so there is one place to get timing right and one place to fix it.
#
# ```
# model (nn.Module | object with forward() | plain callable | torch.compile'd module | ONNX Runtime session)
#    └─> adapt(): eval mode, inference_mode, device, input construction, runtime (eager / compile / onnxruntime)
#          └─> time_callable(): warmup, calibrated blocks, device sync, raw samples in ns
#                └─> TimingSamples  ──> Profiler / BenchmarkResult / reports
# ```
#
# ## Why a single timing is meaningless
#
# A forward pass of a small model takes microseconds. In that time the operating system
# may deschedule the process, the CPU may change its clock, the garbage collector may run,
# and the first call pays for lazy initialisation and cold caches. One reading mixes all of
# that into one number. So the timing core:
#
# 1. **warms up** (first calls are slow: allocation, caches, lazy init);
# 2. **calibrates** how many calls go into one timed block, so the clock's own cost is at most
#    0.1% of what is measured (below, we measure that cost on this machine);
# 3. **synchronizes** an accelerator before reading the clock (GPU work is asynchronous);
# 4. **fixes and records** the thread count, and switches the garbage collector off while timing;
# 5. keeps **every raw sample**, so statistics (median, percentiles, confidence intervals) are
#    computed from data, not from a single figure;
# 6. reads the **thread's CPU time** beside the wall clock for every sample: a sample during which the
#    operating system ran another program is *interrupted*, recorded as such and taken again, so a
#    busy machine shows up as a count, not as a slower model.

# %%
#| default_exp profiling.timing

# %%
#| export
from __future__ import annotations

import contextlib
import gc
import itertools
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import psutil
import torch

# %%
import os

import numpy as np


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."


def in_student_process(fn, *args, **kwargs):
    """Test helper: call `fn(*args, **kwargs)` in the process that runs your code. In this notebook
    that is this kernel. When your work is graded, the tests run in a process of their own and call
    your code in yours, so a test that asks about *your* process (its thread count, its garbage
    collector) asks through this function."""
    return fn(*args, **kwargs)

# %% [markdown]
# ## The model adapter
#
# Students bring three kinds of models: a `torch.nn.Module`, a TinyTorch-style object with
# `forward()` and `parameters()` (parameters are numpy arrays or objects with `.data`), and a
# plain function. Everything downstream wants the same four things from a model: call it on an
# input in inference mode, build an input of a given shape, list its parameters, and know which
# device to synchronize. `adapt()` gives exactly that and rejects anything else with a clear
# message.
#
# A deployed model often does not run in eager PyTorch at all. Two more kinds cover the
# runtimes an engineer ships with:
#
# | kind | what it is | runtime | what differs |
# |---|---|---|---|
# | `compiled` | `torch.compile(module)` | `compile` | the first call with a new input shape *compiles* (seconds); `prepare(x)` does that call outside any timing and records its time in `compile_seconds`, so compile time is reported apart from steady-state latency |
# | `onnxruntime` | an `onnxruntime.InferenceSession`, or the path of an `.onnx` file | `onnxruntime` | inputs are numpy arrays; the session runs synchronously; its memory lives in ORT's own arena, which no Python-side tool sees (`unavailable` says so) |
#
# `adapt(model, device="cuda:0")` moves a torch model (or picks ONNX Runtime's CUDA provider)
# and every input the adapter builds or converts follows it; `sync()` then waits for the GPU
# before each clock read.

# %%
#| export
MODEL_KINDS = ("torch", "numpy", "forward", "callable", "compiled", "onnxruntime")
RUNTIMES = ("eager", "compile", "onnxruntime")
_KIND_RUNTIME = {"compiled": "compile", "onnxruntime": "onnxruntime"}
_ORT_DTYPES = {"tensor(float)": (np.float32, torch.float32), "tensor(float16)": (np.float16, torch.float16),
               "tensor(double)": (np.float64, torch.float64), "tensor(int64)": (np.int64, torch.int64),
               "tensor(int32)": (np.int32, torch.int32), "tensor(uint8)": (np.uint8, torch.uint8),
               "tensor(int8)": (np.int8, torch.int8), "tensor(bool)": (np.bool_, torch.bool)}
ORT_MEMORY_REASON = ("ONNX Runtime allocates its tensors in its own C++ arena, which torch.profiler and "
                     "tracemalloc cannot see: peak inference memory is not measured for this runtime")
COMPILED_MEMORY_REASON = ("peak inference memory of a torch.compile'd model is not measured: the Profiler's memory "
                          "walk profiles eager modules, and the compiled graph allocates differently")


def to_device(obj: Any, device: torch.device) -> Any:
    "Move a module or tensor to `device` (`.to(device)`). The one place the adapter moves anything."
    return obj.to(device)


def _is_compiled_module(model: Any) -> bool:
    "True for the module `torch.compile(module)` returns (an `OptimizedModule` around `_orig_mod`)."
    if "torch._dynamo" not in sys.modules:  # nothing was compiled in this process
        return False
    from torch._dynamo.eval_frame import OptimizedModule
    return isinstance(model, OptimizedModule)


def _is_ort_session(model: Any) -> bool:
    if "onnxruntime" not in sys.modules:  # no session can exist without the package imported
        return False
    import onnxruntime
    return isinstance(model, onnxruntime.InferenceSession)


def _is_onnx_path(model: Any) -> bool:
    return isinstance(model, (str, os.PathLike)) and str(model).lower().endswith(".onnx")


def _compile_counter() -> int:
    "Graphs torch.compile has built in this process (dynamo's `unique_graphs` counter)."
    if "torch._dynamo" not in sys.modules:
        return 0
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def _is_tinytorch_style(model: Any) -> bool:
    return callable(getattr(model, "forward", None)) and callable(getattr(model, "parameters", None))


def _tensor_class(model: Any) -> type | None:
    "The TinyTorch-style tensor class of a model's parameters (objects with `.data`), if it has one."
    try:
        first = next(iter(model.parameters()), None)
    except Exception:  # parameters() of a user object may raise anything: then no class is known
        return None
    if first is None or isinstance(first, (np.ndarray, torch.Tensor)) or not hasattr(first, "data"):
        return None
    return type(first)


@dataclass
class ModelAdapter:
    """One uniform view of a model for profiling and benchmarking.

    Build it with `adapt(model)`. `kind` is "torch" (an `nn.Module`), "numpy" (an object with
    `forward()` and `parameters()`, TinyTorch style), "forward" (an object with only `forward()`),
    "callable" (a plain function), "compiled" (`torch.compile(module)`) or "onnxruntime" (an
    `onnxruntime.InferenceSession`). "forward" and "callable" can be timed, but their parameters
    cannot be counted. Inputs for a TinyTorch-style model whose parameters are tensors of its own
    class (objects with `.data`) are built in that class.

    `runtime` is "eager", "compile" or "onnxruntime"; `info` describes the runtime (providers,
    the ONNX file's size, ...); `unavailable` maps a metric this runtime cannot measure to the
    reason; `compile_seconds` maps each input signature a compiled model was first called with
    to the time that first call took (compilation included).

    >>> a = adapt(torch.nn.Linear(4, 2), name="fc")
    >>> a.kind, a.name, a.runtime, tuple(a.forward(a.make_input((1, 4))).shape)
    ('torch', 'fc', 'eager', (1, 2))
    """

    model: Any
    kind: str
    name: str
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    info: dict[str, Any] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def runtime(self) -> str:
        "Where the model runs: 'eager' (PyTorch, numpy or plain Python), 'compile' or 'onnxruntime'."
        return _KIND_RUNTIME.get(self.kind, "eager")

    @property
    def torch_module(self) -> torch.nn.Module | None:
        "The `nn.Module` for torch models (for a compiled one, the module it compiled), else None."
        if self.kind == "torch":
            return self.model
        if self.kind == "compiled":
            return self.model._orig_mod
        return None

    def input_dtype(self) -> torch.dtype:
        "The floating dtype the model's parameters use (inputs are built in it); float32 if none."
        module = self.torch_module
        if module is not None:
            for p in itertools.chain(module.parameters(), module.buffers()):
                if p.is_floating_point():
                    return p.dtype
        if self.kind == "onnxruntime":
            return _ORT_DTYPES.get(self.info["input_type"], (None, torch.float32))[1]
        return torch.float32

    def make_input(self, input_shape: Sequence[int], seed: int = 0) -> Any:
        """A deterministic standard-normal input of `input_shape`: a tensor on the model's
        device for torch models and plain callables, a float32 numpy array for numpy-style models."""
        shape = _check_shape(input_shape, "input_shape")
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(*shape, generator=g)
        return self.to_input(x)

    def to_input(self, x: Any) -> Any:
        "Convert a tensor or array to what this model consumes (kind, dtype, device)."
        if self.kind in ("torch", "compiled"):
            t = torch.as_tensor(x)
            if t.is_floating_point():
                t = t.to(self.input_dtype())
            return to_device(t, self.device) if t.device != self.device else t
        if self.kind == "onnxruntime":  # a host numpy array of the session's input type
            if isinstance(x, torch.Tensor):
                x = x.detach().cpu().numpy()
            np_dtype = _ORT_DTYPES.get(self.info["input_type"], (np.float32,))[0]
            return np.ascontiguousarray(np.asarray(x), dtype=np_dtype)
        if self.kind == "callable":
            return x  # a plain function gets exactly what it is given (tensor or array)
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        elif hasattr(x, "data") and not isinstance(x, np.ndarray):
            return x  # already a TinyTorch-style tensor
        x = np.asarray(x)
        cls = _tensor_class(self.model) if self.kind == "numpy" else None
        return cls(x) if cls is not None else x

    def forward(self, x: Any) -> Any:
        "Run the model once on `x` (callers wrap loops in `inference()`)."
        if self.kind in ("torch", "compiled"):
            return self.model(x)
        if self.kind == "onnxruntime":
            return self.model.run(self.info["output_names"], {self.info["input_name"]: x})[0]
        if self.kind in ("numpy", "forward"):
            return self.model.forward(x)
        return self.model(x)

    def prepare(self, x: Any) -> Any:
        """Run the model once on `x`, outside any timing, and return the output.

        Every timing calls this first: a model that fails raises here, with its own error. For a
        compiled model the first call with a new input signature compiles; its wall time (the
        device synchronised) is recorded in `compile_seconds` under `input_signature(x)`.
        """
        if self.kind != "compiled":
            return self.forward(x)
        key = input_signature(x)
        if key in self.compile_seconds:
            return self.forward(x)
        self.sync()
        t0 = time.perf_counter()
        out = self.forward(x)
        self.sync()
        self.compile_seconds[key] = time.perf_counter() - t0
        return out

    def timing_info(self, x: Any) -> dict[str, Any]:
        "The runtime's conditions for a result's metadata (compile time of `x`'s signature included)."
        out: dict[str, Any] = {"runtime": self.runtime, "model_kind": self.kind}
        out.update({k: v for k, v in self.info.items() if k not in ("input_name", "output_names", "input_type")})
        if self.kind == "compiled":
            out["compile_seconds"] = self.compile_seconds.get(input_signature(x))
            out["compile_seconds_total"] = sum(self.compile_seconds.values())
            out["compile_method"] = ("measured: wall time of the first call per input signature (torch.compile "
                                     "compiles then), taken before timing and never part of the latency samples; "
                                     "a graph compiled earlier in this process or found in inductor's on-disk cache "
                                     "makes it short")
        return out

    @contextlib.contextmanager
    def inference(self) -> Iterator["ModelAdapter"]:
        "eval() mode and `torch.inference_mode()` for torch models; restores training mode after."
        module = self.torch_module
        was_training = module.training if module is not None else False
        if module is not None:
            module.eval()
        try:
            with torch.inference_mode():
                yield self
        finally:
            if module is not None and was_training:
                module.train()

    def sync(self) -> None:
        "Wait for queued accelerator work, so a clock read after it sees the work done."
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def named_parameter_arrays(self) -> list[tuple[str, Any]]:
        """(name, tensor or array) for every distinct parameter; tied (shared) parameters once.

        Raises TypeError for plain callables, whose parameters cannot be seen."""
        if self.kind in ("torch", "compiled"):
            return list(self.torch_module.named_parameters())  # torch already drops duplicates
        if self.kind == "onnxruntime":
            proto = self.info.get("onnx_path")
            if proto is None:
                raise TypeError(f"model '{self.name}' is an ONNX Runtime session built from bytes: its parameters "
                                "cannot be read back; build it from an .onnx file (adapt('model.onnx'))")
            import onnx
            from onnx import numpy_helper
            graph = onnx.load(proto).graph
            return [(t.name, numpy_helper.to_array(t)) for t in graph.initializer]
        if self.kind == "numpy":
            seen, out = set(), []
            for i, p in enumerate(self.model.parameters()):
                arr = p.data if hasattr(p, "data") and not isinstance(p, np.ndarray) else p
                arr = np.asarray(arr)
                key = id(p)
                if key in seen:
                    continue
                seen.add(key)
                out.append((f"param_{i}", arr))
            return out
        what = "a plain callable" if self.kind == "callable" else "an object with forward() but no parameters()"
        raise TypeError(
            f"model '{self.name}' is {what}: its parameters cannot be counted. "
            "Pass a torch.nn.Module or an object with forward() and parameters()."
        )


def _check_shape(shape: Any, arg: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{arg}: expected a sequence of positive ints such as (1, 3, 32, 32), got {shape!r}") from None
    if not dims or any(d < 1 for d in dims) or any(int(d) != d for d in shape):
        raise ValueError(f"{arg}: expected a non-empty sequence of positive ints, got {shape!r}")
    return dims


def model_name(model: Any, default: str = "model") -> str:
    "The model's `.name` if it has one, else its class (or function) name, else `default`."
    name = getattr(model, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(model, "__name__", None) or type(model).__name__ or default


def input_signature(x: Any) -> str:
    "The key a compiled model specialises on: shape, dtype and device of a tensor (or array)."
    if isinstance(x, torch.Tensor):
        return f"{tuple(x.shape)}:{str(x.dtype).replace('torch.', '')}:{x.device}"
    if isinstance(x, np.ndarray):
        return f"{tuple(x.shape)}:{x.dtype}:cpu"
    return type(x).__name__


class CudaUnavailableError(ValueError):
    "`device` asks for CUDA on a machine where torch cannot use it."


def check_device(device: str | torch.device) -> torch.device:
    """The one device check: a `torch.device` for "cpu" or an available "cuda[:n]".

    A malformed or unsupported device is a `ValueError` naming `device`; CUDA that torch cannot
    use is a `CudaUnavailableError` (a `ValueError`) that names CUDA.

    >>> check_device("cpu")
    device(type='cpu')
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device: expected 'cpu' or 'cuda[:n]', got {device!r}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or 'cuda[:n]', got {device!r}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CudaUnavailableError(
                f"device: {str(device)!r} needs CUDA, but CUDA is not available on this machine "
                f"(torch {torch.__version__}, torch.cuda.is_available() is False); use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise CudaUnavailableError(f"device: {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


def onnx_session(path: str | os.PathLike, device: Any = "cpu", threads: int | None = None) -> Any:
    """An `onnxruntime.InferenceSession` for the `.onnx` file at `path` on `device`.

    On "cuda[:n]" the session uses ONNX Runtime's CUDA execution provider; if the installed
    onnxruntime has none, a RuntimeError says so and lists the providers it has. `threads` sets
    the session's intra-op threads (None: ONNX Runtime's default).

    >>> # sess = onnx_session("model.onnx"); sess.get_providers()  ->  ['CPUExecutionProvider']
    """
    import onnxruntime

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model: no such ONNX file {str(path)!r}")
    dev = torch.device(device)
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = positive_int(threads, "threads")
    if dev.type == "cuda":
        have = onnxruntime.get_available_providers()
        if "CUDAExecutionProvider" not in have:
            raise RuntimeError(f"unavailable: the installed onnxruntime {onnxruntime.__version__} has no "
                               f"CUDAExecutionProvider (it has {have}); install onnxruntime-gpu for CUDA")
        providers = [("CUDAExecutionProvider", {"device_id": dev.index or 0}), "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    return onnxruntime.InferenceSession(str(path), options, providers=providers)


def _ort_adapter(session: Any, name: str | None) -> ModelAdapter:
    import onnxruntime

    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        raise TypeError(f"model: the ONNX model has {len(inputs)} inputs {[i.name for i in inputs]}; "
                        "the adapter feeds one input tensor")
    providers = session.get_providers()
    device = torch.device("cuda", 0) if providers and providers[0] == "CUDAExecutionProvider" else torch.device("cpu")
    if device.type == "cuda":
        device_id = session.get_provider_options().get("CUDAExecutionProvider", {}).get("device_id", "0")
        device = torch.device("cuda", int(device_id))
    path = getattr(session, "_model_path", None)
    info = {"input_name": inputs[0].name, "input_type": inputs[0].type, "output_names": [outputs[0].name],
            "onnxruntime": onnxruntime.__version__, "providers": providers,
            "onnx_path": str(path) if path else None,
            "onnx_bytes": Path(path).stat().st_size if path and Path(path).is_file() else None,
            "intra_op_threads": session.get_session_options().intra_op_num_threads or None}
    stem = Path(path).stem if path else "onnx_model"
    return ModelAdapter(session, "onnxruntime", name or getattr(session, "name", None) or stem, device,
                        info=info, unavailable={"memory": ORT_MEMORY_REASON})


def adapt(model: Any, name: str | None = None, *, device: Any = None) -> ModelAdapter:
    """Wrap `model` in a `ModelAdapter`, rejecting what cannot be run.

    `device` ("cpu", "cuda", "cuda:1"): a torch model is moved there (a compiled one through
    its original module), an `.onnx` path gets a session with that device's execution provider,
    and inputs follow. None keeps where the model already is.

    >>> adapt(lambda x: x * 2, name="double").kind
    'callable'
    """
    dev = check_device(device) if device is not None else None
    if isinstance(model, ModelAdapter):
        if dev is not None and dev != model.device:
            raise ValueError(f"device: the adapter '{model.name}' is on {model.device}; adapt the model itself "
                             f"to move it to {dev}")
        return model
    if _is_onnx_path(model):
        return _ort_adapter(onnx_session(model, dev or "cpu"), name)
    if _is_ort_session(model):
        a = _ort_adapter(model, name)
        if dev is not None and dev.type != a.device.type:
            raise ValueError(f"device: the session runs on {a.device} (providers {a.info['providers']}); "
                             f"build it for {dev} with onnx_session(path, device)")
        return a
    if _is_compiled_module(model):
        inner = model._orig_mod
        if dev is not None:
            to_device(inner, dev)  # the compiled wrapper shares the original module's parameters
        params = list(itertools.chain(inner.parameters(), inner.buffers()))
        where = dev or (params[0].device if params else torch.device("cpu"))
        return ModelAdapter(model, "compiled", name or model_name(inner), where,
                            info={"torch_compile": "torch.compile (TorchDynamo + the backend it was given)"},
                            unavailable={"memory": COMPILED_MEMORY_REASON})
    if isinstance(model, torch.nn.Module):
        if dev is not None:
            model = to_device(model, dev)
        params = list(itertools.chain(model.parameters(), model.buffers()))
        device = dev or (params[0].device if params else torch.device("cpu"))
        return ModelAdapter(model, "torch", name or model_name(model), device)
    if dev is not None and dev.type != "cpu":
        raise ValueError(f"device: only torch modules and ONNX models can be moved to {dev}; "
                         f"'{name or model_name(model)}' is a {type(model).__name__}")
    if _is_tinytorch_style(model):
        return ModelAdapter(model, "numpy", name or model_name(model))
    if callable(model):
        return ModelAdapter(model, "callable", name or model_name(model))
    if callable(getattr(model, "forward", None)):
        return ModelAdapter(model, "forward", name or model_name(model))
    raise TypeError(
        "model: expected a torch.nn.Module, an object with forward() (and parameters()), a callable, "
        f"a torch.compile'd module, an onnxruntime.InferenceSession or an .onnx path; got {type(model).__name__}"
    )

# %% [markdown]
# A quick look: the same adapter API over three kinds of model.

# %%
if __name__ == "__main__":
    for m in (torch.nn.Linear(8, 4), lambda x: x + 1):
        a = adapt(m)
        print(a.kind, a.name, type(a.forward(a.make_input((2, 8)))).__name__)

# %%
def test_unit_adapter():
    lin = torch.nn.Linear(3, 2)
    a = adapt(lin)
    assert a.kind == "torch" and a.torch_module is lin
    x = a.make_input((4, 3), seed=1)
    assert torch.equal(x, a.make_input((4, 3), seed=1)), "make_input must be deterministic for a seed"
    assert a.forward(x).shape == (4, 2)
    # tied parameters are counted once
    tied = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    assert len(adapt(tied).named_parameter_arrays()) == 3

    class NumpyModel:
        def __init__(self):
            self.w = np.ones((3, 2), dtype=np.float32)
        def forward(self, x):
            return x @ self.w
        def parameters(self):
            return [self.w, self.w]  # the same array twice: counted once

    n = adapt(NumpyModel())
    assert n.kind == "numpy" and len(n.named_parameter_arrays()) == 1
    assert n.forward(n.make_input((1, 3))).shape == (1, 2)
    c = adapt(lambda x: x, name="ident")
    assert c.kind == "callable" and c.name == "ident"
    assert isinstance(c.make_input((2, 2)), torch.Tensor), "a plain callable gets its input unchanged"
    try:
        c.named_parameter_arrays()
        raise AssertionError("a plain callable has no countable parameters")
    except TypeError as e:
        assert "cannot be counted" in str(e)
    for bad in (42, None):
        try:
            adapt(bad)
            raise AssertionError(f"adapt({bad!r}) should fail")
        except TypeError as e:
            assert "model:" in str(e)
    for bad_shape in ((), (0, 3), (1.5, 2)):
        try:
            a.make_input(bad_shape)
            raise AssertionError(f"make_input({bad_shape}) should fail")
        except ValueError as e:
            assert "input_shape" in str(e)
    # eval mode inside inference(), training mode restored after
    lin.train()
    with a.inference():
        assert not lin.training and torch.is_inference_mode_enabled()
    assert lin.training


if __name__ == "__main__":
    test_unit_adapter()

# %% [markdown]
# ## How much does reading the clock cost?
#
# `time.perf_counter_ns()` is monotonic and has nanosecond resolution, but calling it is not
# free. Your function below measures the cost of two back-to-back reads, and the cell after its
# test prints it for this machine. If one timed block lasts only a few times longer than that,
# the clock itself is a large part of what we report. Hence the rule: make every timed block at
# least 1000× the clock's cost, so the overhead stays below 0.1%. Fast models are therefore
# timed in **blocks** of several calls, and the per-call time is the block time divided by the
# number of calls.
#
# **Your task (easy, 3 points).** Implement `measure_timer_overhead_ns(reads, clock)`: the typical
# cost, in ns, of reading the clock twice in a row.
#
# - *TODO:* take `reads` pairs of back-to-back clock readings and return their typical difference
#   as a float (the check on `reads` is written for you).
# - *Approach:* one pair's difference is exactly what the start and stop reads of a timed block
#   add to it. Most pairs cost the same few tens of nanoseconds; now and then the operating system
#   interrupts the process between the two reads, and that one pair costs microseconds. Summarise
#   the pairs so that such rare interruptions do not move the answer.
# - *Example:* with a clock whose reads cost 40 ns, except that one pair in fifty is interrupted
#   for 100 µs, the answer is 40.0.
# - *Hints:* read the clock by calling `clock()`, the argument: it is `time.perf_counter_ns`
#   unless a caller passes another (the graded test passes a fake clock whose cost it knows);
#   which summary statistic ignores a few huge values? The `statistics` module has it.

# %% nbgrader={"grade": false, "grade_id": "timing-overhead", "solution": true, "schema_version": 3}
#| export
def measure_timer_overhead_ns(reads: int = 2000, clock: Callable[[], int] | None = None) -> float:
    """Median cost in ns of one read pair of `clock` (default `time.perf_counter_ns`), measured now.

    >>> 0 < measure_timer_overhead_ns() < 10_000
    True
    """
    if isinstance(reads, bool) or not isinstance(reads, (int, np.integer)) or reads < 1:
        raise ValueError(f"reads: expected a positive int, got {reads!r}")
    clock = clock or time.perf_counter_ns
    ### BEGIN SOLUTION
    diffs = []
    for _ in range(reads):
        t0 = clock()
        t1 = clock()
        diffs.append(t1 - t0)
    return float(statistics.median(diffs))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-timing-overhead", "locked": true, "points": 3, "schema_version": 3}
def test_unit_measure_timer_overhead():
    class FakeClock:  # each read costs 40 ns, every 50th pair is interrupted for 100 µs
        def __init__(self):
            self.now, self.reads = 10**9, 0

        def perf_counter_ns(self):
            self.reads += 1
            t = self.now
            self.now += 40 + (100_000 if self.reads % 100 == 1 else 0)
            return t

    fake = FakeClock()
    got = measure_timer_overhead_ns(500, clock=fake.perf_counter_ns)
    assert fake.reads == 1000, (f"reads=500 read pairs: expected 1000 reads of the clock, got {fake.reads}"
                                + (" -- read the clock by calling clock(), the argument" if fake.reads == 0 else ""))
    mean = (500 * 40 + 10 * 100_000) / 500
    assert got == 40.0, (f"expected 40.0 ns (the typical read pair), got {got!r}"
                         + (" -- that is the mean: ten interrupted pairs of 100 µs pull it up; the median is the "
                            "typical cost" if abs(got - mean) < 1 else ""))
    assert isinstance(got, float), f"expected a float, got {type(got).__name__}"
    real = measure_timer_overhead_ns()
    assert 0 < real < 10_000, f"the real clock: expected a read pair to cost between 0 and 10 µs, got {real} ns"
    for bad in (0, -5):
        try:
            measure_timer_overhead_ns(bad)
        except ValueError as e:
            assert "reads" in str(e), f"the error for reads={bad} should name 'reads', got: {e}"
        else:
            raise AssertionError(f"measure_timer_overhead_ns({bad}) should raise ValueError")
    ### BEGIN HIDDEN TESTS
    hidden_property("the timer overhead from a clock whose read pairs cost different amounts, a few interrupted")
    rng = grading_rng()
    n_pairs = int(rng.integers(60, 400))
    costs = [int(c) for c in rng.integers(15, 400, size=n_pairs)]  # each read pair's own cost, ns
    for i in rng.choice(n_pairs, size=max(1, n_pairs // 20), replace=False):
        costs[int(i)] += int(rng.integers(20_000, 2_000_000))  # a few pairs interrupted
    gaps = [int(g) for g in rng.integers(0, 5_000, size=n_pairs)]  # time between one pair and the next

    class PairClock:  # read 2i starts pair i, read 2i+1 ends it costs[i] ns later
        def __init__(self, now):
            self.now, self.reads = now, 0

        def read(self):
            r, t = self.reads, self.now
            self.reads += 1
            self.now += costs[(r // 2) % n_pairs] if r % 2 == 0 else gaps[(r // 2) % n_pairs]
            return t

    pair_clock = PairClock(int(rng.integers(10**6, 10**12)))
    got = measure_timer_overhead_ns(n_pairs, clock=pair_clock.read)
    assert pair_clock.reads == 2 * n_pairs, (
        f"reads={n_pairs} read pairs: expected {2 * n_pairs} reads of the clock, got {pair_clock.reads}")
    expected = float(np.median(costs))
    assert isinstance(got, float) and abs(got - expected) < 1e-9, (
        f"{n_pairs} read pairs of a clock whose pairs cost between {min(costs)} and {max(costs)} ns: expected the "
        f"typical pair, {expected} ns, got {got!r}"
        + (" -- that is the mean: a few interrupted pairs pull it up" if abs(got - float(np.mean(costs))) < 1e-6
           else " -- that is the fastest pair, not the typical one" if got == min(costs) else ""))
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_measure_timer_overhead()

# %%
if __name__ == "__main__":
    overhead = measure_timer_overhead_ns()
    print(f"one clock read pair costs {overhead:.0f} ns here; a 0.1% budget needs blocks of >= {overhead:.0f} µs, "
          f"and the core calibrates to twice that ({2 * overhead:.0f} µs) as a margin")

# %% [markdown]
# ## A confidence interval for the median
#
# Latency distributions are skewed (a long tail of slow runs), so we summarise them by the
# median. How sure are we of a median from `n` samples? Without assuming any distribution:
# each sample falls below the true median with probability ½, so the number of samples below
# it is Binomial(n, ½), and the interval between two order statistics chosen from that
# binomial covers the true median with the stated probability. The timing core uses it to
# stop as soon as the median is known to ±1%.
#
# ```
#  sorted samples   x(1) ≤ x(2) ≤ ... ≤ x(k) ≤ ... ≤ x(n-k+1) ≤ ... ≤ x(n)
#                                      └── interval ──┘
#  it misses the true median m only if fewer than k samples lie below m, or fewer than k above
# ```
#
# **Your task (medium, 6 points).** Implement the interval of `median_ci(values, confidence)`
# (the checks on the arguments are written for you).
#
# - *TODO:* return two of the sample's own values, a lower and an upper one, that hold the true
#   median with probability at least `confidence`; when no pair of values reaches that (very
#   few values), return the smallest and the largest value.
# - *Approach:* with `B` ~ Binomial(n, ½) the number of samples below the true median, the
#   interval from the k-th smallest to the k-th largest value misses it when `B < k` or
#   `B > n − k`, two tails of equal probability. Take the largest `k` whose lower tail,
#   P(B ≤ k − 1), stays below (1 − confidence) / 2.
# - *Example:* for the values 1, 2, …, 100 at 95% that `k` is 40 and the interval is `(40, 61)`;
#   `median_ci([3.0, 1.0, 2.0])` is `(1.0, 3.0)`.
# - *Hints:* `scipy.stats.binom` has the binomial's cdf and its inverse, `ppf` (read what `ppf`
#   returns: the smallest count whose cdf reaches the level). The maths counts ranks from 1,
#   Python indexes from 0, and the k-th largest is counted from the other end: check your
#   indices on the 1..100 example, where every value equals its rank. An interval for the
#   median is not the mean's `mean ± t·s/√n`.

# %% nbgrader={"grade": false, "grade_id": "timing-median-ci", "solution": true, "schema_version": 3}
#| export
def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (binomial order statistics).

    With fewer than 6 values no such interval reaches 95%; the sample range is returned then.

    >>> median_ci(list(range(1, 101)))
    (40, 61)
    """
    from scipy.stats import binom

    values = list(values)
    if not values:
        raise ValueError("values: expected at least one value, got none")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence}")
    ### BEGIN SOLUTION
    xs = sorted(values)
    n = len(xs)
    k = int(binom.ppf((1 - confidence) / 2, n, 0.5))  # samples allowed below the lower bound
    if k < 1:
        return xs[0], xs[-1]
    return xs[k - 1], xs[n - k]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-timing-median-ci", "locked": true, "points": 6, "schema_version": 3}
def test_unit_median_ci():
    ranks = list(range(1, 101))  # each value is its own rank, so the answer reads as ranks
    lo, hi = median_ci(ranks[::-1])
    assert lo in ranks and hi in ranks, (
        f"values 1..100: expected two of the sample's values, (40, 61), got ({lo}, {hi}) -- an interval of the "
        "median is made of order statistics; " + ("that looks like mean ± t·s (an interval for the mean, which "
                                                   "assumes a symmetric distribution)" if abs((lo + hi) / 2 - 50.5) < 1e-6
                                                   else "both ends must be values of the sample"))
    if (lo, hi) != (40, 61) and abs(lo - 40) <= 1 and abs(hi - 61) <= 1:
        raise AssertionError(f"values 1..100: expected (40, 61), the 40th smallest and the 40th largest value, got "
                             f"{(lo, hi)}, ranks {lo} and {hi}: an off-by-one rank -- the k-th smallest of the sorted "
                             "values is xs[k-1] and the k-th largest is xs[n-k]")
    assert (lo, hi) == (40, 61), (f"values 1..100 (given in descending order): expected (40, 61), got {(lo, hi)}"
                                  + (" -- sort the values first" if lo > hi else ""))
    assert median_ci(list(range(1, 101)), confidence=0.99) == (37, 64), \
        f"values 1..100 at 99%: expected (37, 64), got {median_ci(list(range(1, 101)), confidence=0.99)}"
    assert median_ci([5.0, 1.0, 9.0, 2.0, 7.0, 3.0]) == (1.0, 9.0), \
        f"6 values at 95%: k is 1, the interval is the range (1.0, 9.0), got {median_ci([5.0, 1.0, 9.0, 2.0, 7.0, 3.0])}"
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0), \
        f"3 values: no pair reaches 95%, expected the range (1.0, 3.0), got {median_ci([3.0, 1.0, 2.0])}"
    # a skewed sample: the interval sits around the median, not around the mean
    skewed = [1.0] * 30 + [2.0] * 30 + [100.0] * 10
    assert median_ci(skewed) == (1.0, 2.0), f"30 x 1.0, 30 x 2.0, 10 x 100.0: expected (1.0, 2.0), got {median_ci(skewed)}"
    # coverage against a known distribution: the interval holds the true median (0) ~95% of the time
    rng = np.random.default_rng(0)
    hits = sum(lo <= 0.0 <= hi for lo, hi in (median_ci(rng.standard_normal(41)) for _ in range(400)))
    assert 0.92 <= hits / 400 <= 0.995, f"coverage of the true median: expected about 95%, got {hits / 400:.1%}"
    for bad, arg in ((([],), "values"), (([1.0, 2.0], 1.5), "confidence")):
        try:
            median_ci(*bad)
        except ValueError as e:
            assert arg in str(e), f"the error for median_ci{bad} should name '{arg}', got: {e}"
        else:
            raise AssertionError(f"median_ci{bad} should raise ValueError")
    ### BEGIN HIDDEN TESTS
    hidden_property("the median's distribution-free interval (order statistics from the binomial tail) for other "
                    "sample sizes and confidences")
    rng = grading_rng()

    def rank_k(n, confidence):  # the largest k with P(B <= k - 1) < (1 - confidence) / 2, B ~ Binomial(n, 1/2)
        tail, below, k = (1 - confidence) / 2, 0, 0
        while (below + math.comb(n, k)) / 2 ** n < tail:
            below += math.comb(n, k)
            k += 1
        return k

    def clear_of_ties(n, confidence):  # no cumulative binomial probability sits on the tail (rounding)
        tail = (1 - confidence) / 2
        cdf = np.cumsum([math.comb(n, j) for j in range(n + 1)]) / 2 ** n
        return bool(np.min(np.abs(cdf - tail)) > 1e-7)

    for case in range(3):
        n = int(rng.integers(40, 300))
        confidence = float(rng.uniform(0.8, 0.995))
        while not clear_of_ties(n, confidence):
            confidence = float(rng.uniform(0.8, 0.995))
        if case < 2:  # distinct, skewed values (latencies), in random order
            values = [float(v) for v in 1000.0 * np.exp(rng.normal(0.0, float(rng.uniform(0.05, 1.0)), size=n))]
        else:  # few distinct values: ties
            values = [float(v) for v in rng.integers(1, 6, size=n)]
        xs = sorted(values)
        k = rank_k(n, confidence)
        expected = (xs[k - 1], xs[n - k]) if k >= 1 else (xs[0], xs[-1])
        got = tuple(median_ci(values, confidence=confidence))
        what = f"{n} values (from {xs[0]:.6g} to {xs[-1]:.6g}, in random order) at confidence {confidence:.4f}"
        hint = ""
        if not all(v in values for v in got):
            hint = (" -- both ends must be values of the sample"
                    + ("; that looks like mean ± t·s" if abs(sum(got) / 2 - statistics.mean(values)) < 1e-6 * xs[-1] else ""))
        elif case < 2 and got[0] <= got[1]:
            ranks = (xs.index(got[0]) + 1, n - xs.index(got[1]))  # rank from below, rank from above
            if ranks != (k, k) and max(abs(ranks[0] - k), abs(ranks[1] - k)) <= 1:
                hint = (f" -- the ends are the {ranks[0]}-th smallest and the {ranks[1]}-th largest value, k is {k}: an "
                        "off-by-one rank")
        elif got[0] > got[1]:
            hint = " -- sort the values first"
        assert got == expected, (f"{what}: expected {expected}, the {k}-th smallest and the {k}-th largest value, "
                                 f"got {got}{hint}")
    n_small = int(rng.integers(2, 6))
    small = [float(v) for v in rng.permutation(rng.uniform(0.5, 50.0, size=n_small))]
    got = tuple(median_ci(small))
    assert got == (min(small), max(small)), (
        f"{n_small} values {small}: no pair of them reaches 95%, expected the range {(min(small), max(small))}, got {got}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_median_ci()

# %% [markdown]
# ## The timing core
#
# `time_callable(fn)` is the only function in the project that reads a clock around model
# code. Its protocol:
#
# ```
#  warmup calls ──> calibrate calls/block ──> repeat: [clock, n × fn(), sync, clock] ──> samples
#                   (block ≥ 1000 × clock cost)        stop at `samples`, or when the median's
#                                                       95% CI is within ±target, or at max_seconds
# ```
#
# The garbage collector is off while timing (a collection in the middle of a block is noise,
# not model cost) and the torch thread count is fixed for the run and recorded with the result.
# `TimingSamples` holds what comes out: every per-call sample in ns and the conditions.

# %%
#| export
INTERRUPT_TOLERANCE = 0.05  # a sample is interrupted when the process was off the CPU for > 5% of its wall time


@dataclass
class TimingSamples:
    """Raw output of the timing core: one per-call time (ns) per timed block, plus the conditions.

    `per_call_ns[i]` is block i's elapsed (wall) time divided by `calls_per_sample`: what a user
    waits. `cpu_per_call_ns[i]` is the timing thread's CPU time over the same block, per call: what the
    model costs, unaffected by time the process spent waiting for the CPU (None when not read:
    see `interrupt_check`; `cpu_comparable` is False when it does not stand for the latency: a model
    that waits by design, whose typical sample is off the CPU). `retaken` holds the per-call
    `(wall, cpu)` of each interrupted sample that was taken again; `interrupted_kept` the indices of
    interrupted samples kept because no re-take was left.
    """

    per_call_ns: list[float]
    calls_per_sample: int
    warmup_calls: int
    timer_overhead_ns: float
    threads: int
    device: str
    gc_disabled: bool
    stop_reason: str
    total_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)
    cpu_per_call_ns: list[float] | None = None
    retaken: list[tuple[float, float]] = field(default_factory=list)
    interrupted_kept: list[int] = field(default_factory=list)
    interrupt_check: str = "off: no CPU clock was read"
    cpu_comparable: bool = False  # the CPU series stands for the latency (not a model that waits)

    @property
    def blocked(self) -> bool:
        "True when several calls were timed per block (a fast model)."
        return self.calls_per_sample > 1

    @property
    def per_call_ms(self) -> list[float]:
        return [v / 1e6 for v in self.per_call_ns]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_call_ns) / 1e6

    def metadata(self) -> dict[str, Any]:
        "The measurement conditions, for a result's metadata."
        return {
            "timer": "time.perf_counter_ns",
            "samples": len(self.per_call_ns),
            "calls_per_sample": self.calls_per_sample,
            "timed_in_blocks": self.blocked,
            "warmup_calls": self.warmup_calls,
            "timer_overhead_ns": self.timer_overhead_ns,
            "timer_overhead_fraction": self.timer_overhead_ns / max(self.calls_per_sample * statistics.median(self.per_call_ns), 1.0),
            "torch_threads": self.threads,
            "device": self.device,
            "gc_disabled": self.gc_disabled,
            "stop_reason": self.stop_reason,
            "total_seconds": self.total_seconds,
            **self.interruptions(),
            **self.extra,
        }

    def interruptions(self) -> dict[str, Any]:
        """The preemption record: samples taken, interrupted (re-taken or kept), the share of wall time the
        process spent off the CPU, and both series per call in ms (`wall_ms` is `per_call_ms`)."""
        walls = [*self.per_call_ns, *(w for w, _ in self.retaken)]
        cpus = [*(self.cpu_per_call_ns or []), *(c for _, c in self.retaken)]
        k = self.calls_per_sample / 1e6  # per-call ns -> the block's ms
        lost = sum(max(w - c, 0.0) for w, c in zip(walls, cpus)) * k if self.cpu_per_call_ns is not None else None
        return {"interrupt_check": self.interrupt_check, "samples_taken": len(walls),
                "interrupted_samples": len(self.retaken) + len(self.interrupted_kept),
                "retaken_samples": len(self.retaken), "interrupted_kept": list(self.interrupted_kept),
                "timed_ms": sum(walls) * k, "wall_lost_ms": lost,
                "wall_lost_share": None if lost is None else lost / max(sum(walls) * k, 1e-12),
                "cpu_per_call_ms": None if self.cpu_per_call_ns is None else [v / 1e6 for v in self.cpu_per_call_ns],
                "cpu_comparable": self.cpu_comparable,
                "retaken_per_call_ms": [[w / 1e6, c / 1e6] for w, c in self.retaken]}


def positive_int(value: Any, arg: str, minimum: int = 1) -> int:
    """`value` as an int >= `minimum` (a bool is refused), else a ValueError naming `arg`: the one check of a count
    argument in every module (`positive_int(3, "samples")` is 3; `positive_int(0, "samples")` raises)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{arg}: expected an int >= {minimum}, got {value!r}")
    return int(value)

# %% [markdown]
# ### Fixing the conditions
#
# Two settings must not change while a model is timed: the number of threads torch uses (it
# can change a latency severalfold) and the garbage collector (a collection in the middle of a
# block is noise, not model cost). Each is a *context manager*: it changes the setting for the
# body of a `with` and puts it back afterwards, also when the body raises, so a failing model
# never leaves the process with one thread or with the collector off.
#
# **Your task (easy, 4 points).** Complete the context managers `fixed_threads(threads)` and
# `_gc_paused(pause)`.
#
# - *TODO:* `fixed_threads`: while the body runs torch uses `threads` threads (None leaves the
#   count alone); it yields the count in force; afterwards the count from before is back.
#   `_gc_paused`: with `pause`, the collector is off while the body runs, and afterwards it is
#   on again if, and only if, it was on before.
# - *Approach:* remember the setting, change it, `yield`, restore it, written so that the
#   restoring also happens when the body raises.
# - *Example:* `with fixed_threads(1) as n:` gives `n == 1` and one torch thread inside, the old
#   count after; `with fixed_threads(None) as n:` gives the current count and changes nothing.
# - *Hints:* `torch.get_num_threads` / `torch.set_num_threads`; `gc.isenabled`, `gc.disable`,
#   `gc.enable`. Check `threads` with `positive_int(threads, "threads")`, so a bad count is an
#   error that names the argument. An exception raised in the body of a `with` reappears at your
#   `yield`: which statement runs its cleanup whatever happens in its body? Do not call
#   `gc.collect()` first: once torch is loaded a full collection takes about a tenth of a second,
#   paid on every timing run.

# %% nbgrader={"grade": false, "grade_id": "timing-conditions", "solution": true, "schema_version": 3}
#| export
@contextlib.contextmanager
def fixed_threads(threads: int | None) -> Iterator[int]:
    "Run the body with `torch.set_num_threads(threads)` (None keeps the current count); yields the count."
    ### BEGIN SOLUTION
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(positive_int(threads, "threads"))
    try:
        yield torch.get_num_threads()
    finally:
        if threads is not None:
            torch.set_num_threads(before)
    ### END SOLUTION


@contextlib.contextmanager
def _gc_paused(pause: bool) -> Iterator[None]:
    "Switch the garbage collector off for the body (like `timeit`); on again after, if it was on."
    ### BEGIN SOLUTION
    was_enabled = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause and was_enabled:
            gc.enable()
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-timing-conditions", "locked": true, "points": 4, "schema_version": 3}
def test_unit_timing_conditions():
    threads, gc_on = lambda: in_student_process(torch.get_num_threads), lambda: in_student_process(gc.isenabled)
    before, gc_was_on = threads(), gc_on()
    other = 2 if before == 1 else 1
    try:
        with fixed_threads(other) as n:
            inside = threads()
        assert n == other and inside == other, f"fixed_threads({other}): expected {other} threads inside, got {inside} (yielded {n})"
        assert threads() == before, f"after fixed_threads: expected the {before} threads from before, got {threads()}"
        try:
            with fixed_threads(other):
                raise KeyError("the model failed")
        except KeyError:
            pass
        assert threads() == before, (
            f"fixed_threads must restore the thread count when the body raises: expected {before}, got "
            f"{threads()} -- restore it in a `finally` around the yield")
        with fixed_threads(None) as n:
            assert n == before == threads(), f"fixed_threads(None): expected the current {before} threads, got {n}"
        for bad in (0, -2, 1.5):
            try:
                with fixed_threads(bad):
                    pass
            except ValueError as e:
                assert "threads" in str(e), f"the error for threads={bad!r} should name 'threads', got: {e}"
            else:
                raise AssertionError(f"fixed_threads({bad!r}) should raise ValueError")
        in_student_process(gc.enable)
        with _gc_paused(True):
            assert not gc_on(), "_gc_paused(True): the collector must be off inside"
        assert gc_on(), "_gc_paused(True): the collector must be on again after the body"
        with _gc_paused(False):
            assert gc_on(), "_gc_paused(False) must leave the collector alone"
        try:
            with _gc_paused(True):
                raise KeyError("the model failed")
        except KeyError:
            pass
        assert gc_on(), ("_gc_paused must switch the collector on again when the body raises -- "
                         "restore it in a `finally` around the yield")
        in_student_process(gc.disable)
        with _gc_paused(True):
            pass
        assert not gc_on(), "the collector was off before _gc_paused: it must stay off after"
    finally:
        in_student_process(torch.set_num_threads, before)
        in_student_process(gc.enable if gc_was_on else gc.disable)
    ### BEGIN HIDDEN TESTS
    hidden_property("thread count and garbage collector set for the measurement and restored afterwards, also when "
                    "the timed code raises")
    rng = grading_rng()
    threads, gc_on = lambda: in_student_process(torch.get_num_threads), lambda: in_student_process(gc.isenabled)
    before, gc_was_on = threads(), gc_on()
    errors = (KeyError, RuntimeError, ZeroDivisionError, IndexError)
    try:
        base = int(rng.integers(1, 7))
        in_student_process(torch.set_num_threads, base)
        levels = [None if rng.random() < 0.25 else int(rng.integers(1, 9)) for _ in range(3)]
        want = []  # the count each level should give: its own, or the one around it for None
        for t in levels:
            want.append(t if t is not None else (want[-1] if want else base))
        error = errors[int(rng.integers(len(errors)))]
        with fixed_threads(levels[0]) as n0:
            assert n0 == want[0] == threads(), (
                f"fixed_threads({levels[0]}) with {base} threads before: expected {want[0]} inside, got {threads()} "
                f"(yielded {n0})")
            with fixed_threads(levels[1]) as n1:
                assert n1 == want[1] == threads(), (
                    f"fixed_threads({levels[1]}) inside fixed_threads({levels[0]}): expected {want[1]} inside, got "
                    f"{threads()} (yielded {n1})")
                try:
                    with fixed_threads(levels[2]) as n2:
                        assert n2 == want[2] == threads(), (
                            f"fixed_threads({levels[2]}) at the third level: expected {want[2]}, got {threads()} "
                            f"(yielded {n2})")
                        raise error("the model failed")
                except error:
                    pass
                assert threads() == want[1], (
                    f"fixed_threads({levels[2]}), left by an exception inside fixed_threads({levels[1]}): expected the "
                    f"{want[1]} threads from before it, got {threads()}")
            assert threads() == want[0], (
                f"after the inner fixed_threads({levels[1]}): expected the {want[0]} threads from before it, got {threads()}")
        assert threads() == base, f"after the outer fixed_threads({levels[0]}): expected the {base} threads from before, got {threads()}"
        bad = [0, -int(rng.integers(1, 50)), float(rng.integers(1, 8)) + 0.5][int(rng.integers(3))]
        try:
            with fixed_threads(bad):
                pass
        except ValueError as e:
            assert "threads" in str(e), f"the error for threads={bad!r} should name 'threads', got: {e}"
        else:
            raise AssertionError(f"fixed_threads({bad!r}) should raise ValueError")
        assert threads() == base, f"a rejected fixed_threads({bad!r}) must leave the {base} threads alone, got {threads()}"
        # the collector: nested pauses, each level puts back what it found
        start_on = bool(rng.random() < 0.5)
        pauses = [bool(p) for p in rng.random(3) < 0.6]
        in_student_process(gc.enable if start_on else gc.disable)
        state = [start_on]
        for p in pauses:
            state.append(False if p else state[-1])
        error = errors[int(rng.integers(len(errors)))]
        label = f"collector {'on' if start_on else 'off'}, then _gc_paused({pauses[0]}), ({pauses[1]}), ({pauses[2]})"
        with _gc_paused(pauses[0]):
            assert gc_on() == state[1], f"{label}: inside the first: expected the collector {'on' if state[1] else 'off'}"
            with _gc_paused(pauses[1]):
                assert gc_on() == state[2], f"{label}: inside the second: expected the collector {'on' if state[2] else 'off'}"
                try:
                    with _gc_paused(pauses[2]):
                        assert gc_on() == state[3], (
                            f"{label}: inside the third: expected the collector {'on' if state[3] else 'off'}")
                        raise error("the model failed")
                except error:
                    pass
                assert gc_on() == state[2], (
                    f"{label}: the third left by an exception: expected the collector {'on' if state[2] else 'off'} as "
                    f"before it, got {'on' if gc_on() else 'off'} -- put back what you found, in a `finally`")
            assert gc_on() == state[1], (
                f"{label}: after the second: expected the collector {'on' if state[1] else 'off'} as before it, got "
                f"{'on' if gc_on() else 'off'} -- switch it on again only if it was on before")
        assert gc_on() == start_on, (
            f"{label}: after the first: expected the collector {'on' if start_on else 'off'} as before, got "
            f"{'on' if gc_on() else 'off'}")
    finally:
        in_student_process(torch.set_num_threads, before)
        in_student_process(gc.enable if gc_was_on else gc.disable)
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_timing_conditions()

# %% [markdown]
# ### When to stop
#
# The timing core takes samples one at a time and, after each, asks whether it has enough.
# Three budgets decide: a number of samples, a minimum time spent, and, optionally, a
# precision: stop as soon as the median is known to ±`target_rel_ci` of itself, that is, when
# the half-width of its 95% interval (`median_ci`) is at most `target_rel_ci` × the median. A
# time limit, `max_seconds`, stops a model that never gets there.
#
# **Your task (medium, 5 points).** Implement `_stop_reason(per_call_ns, samples, spent_s, ...)`:
# why the timing stops after these samples, or `None` to take another one.
#
# - *TODO:* return the first reason that holds, in this order of rules:
#   1. fewer than `samples` values, or less than `min_seconds` spent: go on, unless `max_seconds`
#      is spent and there are at least 2 values (`"max_seconds"`);
#   2. no precision target: `"samples"`;
#   3. the median known within the target, from at least 6 values: `"precision"`;
#   4. `max_seconds` spent: `"max_seconds"`; else go on.
# - *Approach:* the rules read top to bottom; each one either returns or lets the next one decide.
# - *Example:* `samples=10` and 10 values, no target: `"samples"`; the same values with
#   `target_rel_ci=0.01` and all equal: `"precision"`; with 5 values and `samples=3` and a target,
#   go on (`None`).
# - *Hints:* the target is on the *half*-width, (hi − lo) / 2, relative to the median (not the
#   mean). Why 6 values? With fewer, `median_ci` returns the range, which is no 95% interval:
#   five equal values do not make a median known to ±0%. Why 2 values at the time limit? One
#   sample has no spread at all.
# - *Needs first:* `median_ci` (the test calls it, and so does your rule).

# %% nbgrader={"grade": false, "grade_id": "timing-stop", "solution": true, "schema_version": 3}
#| export
def _stop_reason(per_call_ns: Sequence[float], samples: int, spent_s: float, *, min_seconds: float = 0.0,
                 max_seconds: float = 60.0, target_rel_ci: float | None = None) -> str | None:
    """Why timing stops after `per_call_ns` (taken in `spent_s` seconds): "samples", "precision" or
    "max_seconds"; None to take another sample."""
    ### BEGIN SOLUTION
    n = len(per_call_ns)
    if n < samples or spent_s < min_seconds:
        return "max_seconds" if spent_s >= max_seconds and n >= 2 else None
    if target_rel_ci is None:
        return "samples"
    lo, hi = median_ci(per_call_ns)
    if n >= 6 and (hi - lo) / 2 <= target_rel_ci * statistics.median(per_call_ns):
        return "precision"
    return "max_seconds" if spent_s >= max_seconds else None
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-timing-stop", "locked": true, "points": 5, "schema_version": 3}
def test_unit_stop_reason():
    tight = [1000.0 + (i % 7) for i in range(60)]  # 60 values within 0.6% of each other
    lo, hi = median_ci(tight)
    med = statistics.median(tight)
    between = ((hi - lo) / 2 / med + (hi - lo) / med) / 2  # a target the half-width meets, the full width does not
    got = _stop_reason(tight, 10, 1.0, target_rel_ci=between)
    assert got == "precision", (f"60 values, 95% interval {(lo, hi)} around the median {med}, target ±{between:.4%}: "
                                f"expected 'precision' (half-width {(hi - lo) / 2 / med:.4%} <= target), got {got!r}"
                                + (" -- that compares the full width hi - lo; the target is on the half-width"
                                   if got is None else ""))
    cases = [  # (values, samples, spent_s, options, expected, what it shows)
        (tight[:10], 10, 0.5, {}, "samples", "10 values of samples=10, no target"),
        (tight[:9], 10, 0.5, {}, None, "9 values of samples=10: go on"),
        (tight[:10], 10, 0.5, {"min_seconds": 2.0}, None, "min_seconds=2 not yet spent: go on"),
        (tight[:10], 10, 3.0, {"min_seconds": 2.0}, "samples", "samples and min_seconds both reached"),
        (tight[:1], 10, 99.0, {"max_seconds": 60.0}, None, "one value at the time limit: one sample has no spread, go on"),
        (tight[:2], 10, 99.0, {"max_seconds": 60.0}, "max_seconds", "2 values of 10 when max_seconds is spent"),
        ([5.0] * 5, 3, 0.5, {"target_rel_ci": 0.01}, None,
         "5 equal values with a target: below 6 values median_ci gives the range, no 95% interval: go on"),
        ([5.0] * 6, 3, 0.5, {"target_rel_ci": 0.01}, "precision", "6 equal values with a target"),
        ([1.0, 9.0] * 10, 3, 0.5, {"target_rel_ci": 0.01}, None, "a wide spread with a target, time left: go on"),
        ([1.0, 9.0] * 10, 3, 61.0, {"target_rel_ci": 0.01}, "max_seconds", "a wide spread with a target, time spent"),
    ]
    for values, samples, spent, options, expected, what in cases:
        got = _stop_reason(values, samples, spent, **options)
        assert got == expected, f"{what}: expected {expected!r}, got {got!r}"
    ### BEGIN HIDDEN TESTS
    hidden_property("the stopping rule (the median interval's relative half-width against the target) for other "
                    "samples")
    rng = grading_rng()

    def interval95(vals):  # the order statistics of the 95% interval of the median, found by the binomial tail
        xs, n = sorted(vals), len(vals)
        below, k = 0, 0
        while (below + math.comb(n, k)) / 2 ** n < 0.025:
            below += math.comb(n, k)
            k += 1
        return (xs[0], xs[-1]) if k < 1 else (xs[k - 1], xs[n - k])

    def rule(vals, samples, spent, min_s, max_s, target):
        n = len(vals)
        if n < samples or spent < min_s:
            return "max_seconds" if spent >= max_s and n >= 2 else None
        if target is None:
            return "samples"
        lo, hi = interval95(vals)
        if n >= 6 and (hi - lo) / 2 <= target * statistics.median(vals):
            return "precision"
        return "max_seconds" if spent >= max_s else None

    cases = []
    for _ in range(30):
        n = int(rng.integers(1, 40))
        vals = [float(v) for v in 1000.0 * np.exp(rng.normal(0.0, float(rng.choice([0.002, 0.02, 0.1, 0.4])), size=n))]
        samples = int(rng.integers(1, 40))
        min_s = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.1, 5.0))
        max_s = float(rng.uniform(1.0, 10.0))
        spent = float(rng.uniform(0.0, 12.0))
        target = None if rng.random() < 0.3 else float(np.exp(rng.uniform(np.log(1e-3), np.log(0.3))))
        if target is not None and n >= 6:  # keep the half-width clear of the target (no rounding ties)
            lo, hi = interval95(vals)
            if abs((hi - lo) / 2 - target * statistics.median(vals)) < 1e-6 * statistics.median(vals):
                target *= 1.5
        cases.append((vals, samples, spent, min_s, max_s, target))
    # the half-width, not the full width, meets the target
    n = int(rng.integers(20, 60))
    vals = [float(v) for v in 1000.0 * (1 + rng.uniform(0.0, 0.02, size=n))]
    lo, hi = interval95(vals)
    med = statistics.median(vals)
    cases.append((vals, int(rng.integers(1, n)), 1.0, 0.0, 60.0, float(rng.uniform(0.6, 0.9)) * (hi - lo) / med))
    # a long tail pulls the mean up, not the median: the target is relative to the median
    n = int(rng.integers(30, 60))
    vals = [float(v) for v in 1000.0 * (1 + rng.uniform(0.0, 0.05, size=n))]
    for i in rng.choice(n, size=n // 5, replace=False):
        vals[int(i)] = float(1000.0 * rng.uniform(5.0, 20.0))
    lo, hi = interval95(vals)
    half = (hi - lo) / 2
    cases.append((vals, int(rng.integers(1, n)), 1.0, 0.0, 60.0,
                  math.sqrt(half / statistics.median(vals) * half / statistics.mean(vals))))
    # five equal values are no 95% interval, six are
    v, spent = float(rng.uniform(1.0, 1e6)), float(rng.uniform(0.0, 5.0))
    cases += [([v] * 5, int(rng.integers(1, 6)), spent, 0.0, 60.0, 0.01), ([v] * 6, int(rng.integers(1, 7)), spent, 0.0, 60.0, 0.01)]
    for vals, samples, spent, min_s, max_s, target in cases:
        expected = rule(vals, samples, spent, min_s, max_s, target)
        got = _stop_reason(vals, samples, spent, min_seconds=min_s, max_seconds=max_s, target_rel_ci=target)
        if got == expected:
            continue
        lo, hi = interval95(vals)
        med = statistics.median(vals)
        hint = ""
        if expected == "precision" and got is None and (hi - lo) <= 2 * target * med and (hi - lo) > target * med:
            hint = " -- that compares the full width hi - lo; the target is on the half-width"
        elif got == "precision" and len(vals) >= 6 and (hi - lo) / 2 <= target * statistics.mean(vals):
            hint = " -- the target is relative to the median, not the mean"
        elif got == "precision" and len(vals) < 6:
            hint = " -- below 6 values median_ci gives the range, no 95% interval"
        elif got == "max_seconds" and len(vals) < 2:
            hint = " -- one sample has no spread: go on"
        raise AssertionError(
            f"{len(vals)} values (median {med:.6g}, 95% interval {(lo, hi)}), samples={samples}, spent_s={spent:.3f}, "
            f"min_seconds={min_s:.3f}, max_seconds={max_s:.3f}, target_rel_ci={target}: expected {expected!r}, "
            f"got {got!r}{hint}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_stop_reason()

# %% [markdown]
# ### Interrupted samples
#
# On a busy machine (a laptop with a browser open, a shared JupyterHub, a CI runner) the operating
# system takes the CPU away from the process now and then and runs another program. A sample that
# spans such a pause measures the other program, not the model. The wall clock cannot tell: it only
# sees a slower sample. The thread's **CPU time** can: `time.thread_time_ns()` advances only while
# the thread that runs the model is on a CPU, so at one thread, over one block
#
# ```
# wall time  = time the model ran + time the thread waited for the CPU
# CPU time   = time the model ran                  (the difference is the wait)
# ```
#
# Why the thread's and not the whole process's (`time.process_time_ns()`)? The process has other
# threads: after a region that used two threads, torch's OpenMP pool may keep its idle thread
# spinning for a while, and that thread's CPU time lands in every block, so an interruption could
# hide behind it. The cell after the test below measures both on this machine.
#
# A sample whose wall time exceeds its CPU time by more than `tolerance` (5%, `INTERRUPT_TOLERANCE`)
# of its wall time was **interrupted**. It is not a measurement of the model, so it is taken again,
# but not forever: on a machine that is busy all the time every sample may be interrupted, so at
# most `max_retakes` re-takes (the timing core allows as many as the samples it needs); after that an
# interrupted sample is kept and *flagged*. Nothing is thrown away: a re-taken sample stays in the
# raw data, and a result reports how many of its samples were interrupted.
#
# **Your task (medium, 8 points).** Implement `take_samples(block, calls, stop, tolerance, max_retakes)`.
#
# - *TODO:* call `block()` once per sample; it returns `(wall_ns, cpu_ns)` of one block of `calls`
#   calls (`cpu_ns` is None when no CPU clock is read: then no sample counts as interrupted). An
#   interrupted sample, while re-takes are left, goes to `retaken` as its per-call `(wall, cpu)`, and
#   another sample is taken. Every other sample is kept: its per-call wall time to `per_call`, its
#   per-call CPU time (or None) to `cpu_per_call`, and, when it was interrupted (no re-take left),
#   its index in `per_call` to `interrupted_kept`. After each kept sample ask `stop(per_call)`; the
#   first reason it gives ends the loop. Return
#   `SampleSet(per_call, cpu_per_call, retaken, interrupted_kept, reason)` (the argument checks are
#   written for you).
# - *Approach:* one `while` loop; a re-take is a `continue` before anything is kept; count the
#   re-takes so that the loop ends even when every block is interrupted.
# - *Example:* with the default tolerance and blocks of one call, `(100_000, 99_000)` is kept;
#   `(100_000, 40_000)` (60 µs of 100 off the CPU) is re-taken; `(300_000, 300_000)`, three times
#   slower, is kept: the process ran the whole time, so the model itself was slow.
# - *Hints:* "slow" is not "interrupted". An outlier rule (a sample far above the median) would
#   throw away the model's own slow calls (a cold cache, a larger input) and keep an interrupted
#   sample that happens to look ordinary. The tolerance is a share of the block's *wall* time, not a
#   number of nanoseconds: blocks last from 100 µs to seconds. "More than" the tolerance: a block
#   that lost exactly 5% is kept.
# - *Needs first:* nothing; the timing loop below calls it.

# %% nbgrader={"grade": false, "grade_id": "timing-interrupted", "solution": true, "schema_version": 3}
#| export
@dataclass
class SampleSet:
    """What `take_samples` returns: per kept sample its per-call wall time (ns) and CPU time (ns, or
    None), every re-taken sample's per-call `(wall, cpu)`, the indices of interrupted samples kept
    (no re-take left), and the stop reason."""

    per_call_ns: list[float]
    cpu_per_call_ns: list[float | None]
    retaken: list[tuple[float, float]]
    interrupted_kept: list[int]
    stop_reason: str


def take_samples(block: Callable[[], tuple[int, int | None]], calls: int, stop: Callable[[list[float]], str | None], *,
                 tolerance: float = INTERRUPT_TOLERANCE, max_retakes: int = 0) -> SampleSet:
    """Take samples with `block()` until `stop(per_call_ns)` gives a reason, re-taking interrupted ones.

    `block()` times one block of `calls` calls and returns `(wall_ns, cpu_ns)`; a sample is
    interrupted when `wall_ns - cpu_ns > tolerance * wall_ns`. It is taken again, at most
    `max_retakes` times in all; after that interrupted samples are kept and flagged.

    >>> blocks = iter([(100, 99), (100, 40), (300, 300)])
    >>> s = take_samples(lambda: next(blocks), 1, lambda v: "samples" if len(v) == 2 else None, max_retakes=5)
    >>> s.per_call_ns, s.retaken, s.stop_reason
    ([100.0, 300.0], [(100.0, 40.0)], 'samples')
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise ValueError(f"tolerance: expected a fraction of the wall time in (0, 1) such as 0.05, got {tolerance!r}")
    calls, max_retakes = positive_int(calls, "calls"), positive_int(max_retakes, "max_retakes", minimum=0)
    ### BEGIN SOLUTION
    per_call: list[float] = []
    cpu_per_call: list[float | None] = []
    retaken: list[tuple[float, float]] = []
    interrupted_kept: list[int] = []
    while True:
        wall, cpu = block()
        interrupted = cpu is not None and wall - cpu > tolerance * wall
        if interrupted and len(retaken) < max_retakes:
            retaken.append((wall / calls, cpu / calls))
            continue
        if interrupted:
            interrupted_kept.append(len(per_call))
        per_call.append(wall / calls)
        cpu_per_call.append(None if cpu is None else cpu / calls)
        reason = stop(per_call)
        if reason is not None:
            return SampleSet(per_call, cpu_per_call, retaken, interrupted_kept, reason)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-timing-interrupted", "locked": true, "points": 8, "schema_version": 3}
def test_unit_take_samples():
    def scripted(blocks, spare=None):  # block() answers from the list (then `spare` 4 times); past that the re-takes never end
        blocks = list(blocks) + [spare] * (4 if spare else 0)
        taken = []

        def block():
            if len(taken) == len(blocks):
                raise AssertionError(f"block() was called more than the {len(blocks)} times this case needs -- the "
                                     "re-takes must be bounded by max_retakes, or the loop must stop when stop() "
                                     "gives a reason")
            taken.append(blocks[len(taken)])
            return blocks[len(taken) - 1]
        return block, taken

    def after(n):
        return lambda per_call: "samples" if len(per_call) >= n else None

    # 1. slow is not interrupted: a sample three times slower that ran the whole time is the model's own
    block, _ = scripted([(100_000, 99_000), (300_000, 300_000), (100_000, 40_000), (100_000, 100_500), (100_000, 99_500)],
                        spare=(100_000, 100_000))
    s = take_samples(block, 1, after(4), tolerance=0.05, max_retakes=4)
    assert 300_000 in s.per_call_ns, (
        f"a sample of 300000 ns wall and 300000 ns CPU time was dropped (kept: {s.per_call_ns}): a slow sample is not "
        "an interrupted one -- the process ran the whole time, so the model itself was slow; only wall time well "
        "above CPU time shows an interruption")
    assert s.per_call_ns == [100_000, 300_000, 100_000, 100_000], (
        f"blocks (wall, cpu) = (100000, 99000), (300000, 300000), (100000, 40000), (100000, 100500), (100000, 99500): "
        f"expected the interrupted third re-taken and per_call_ns [100000, 300000, 100000, 100000], got {s.per_call_ns}")
    assert s.retaken == [(100_000, 40_000)], (
        f"expected the interrupted sample in retaken as its per-call (wall, cpu), [(100000, 40000)], got {s.retaken}"
        + (" -- a re-taken sample stays in the raw data" if not s.retaken else ""))
    assert s.cpu_per_call_ns == [99_000, 300_000, 100_500, 99_500], (
        f"cpu_per_call_ns: expected each kept sample's CPU time per call, [99000, 300000, 100500, 99500], got "
        f"{s.cpu_per_call_ns}")
    assert s.interrupted_kept == [] and s.stop_reason == "samples", (
        f"expected no interrupted sample kept and stop_reason 'samples', got {s.interrupted_kept}, {s.stop_reason!r}")
    # 2. the tolerance is a share of the block's wall time, not a number of ns
    block, _ = scripted([(10_000_000, 9_800_000), (20_000, 12_000), (20_000, 19_900), (10_000_000, 9_800_000)],
                        spare=(10_000_000, 9_800_000))
    s = take_samples(block, 1, after(3), tolerance=0.05, max_retakes=3)
    assert s.per_call_ns == [10_000_000, 20_000, 10_000_000] and s.retaken == [(20_000, 12_000)], (
        f"a 10 ms block that lost 0.2 ms (2%) is kept, a 20 µs block that lost 8 µs (40%) is re-taken: expected "
        f"per_call_ns [10000000, 20000, 10000000] and retaken [(20000, 12000)], got {s.per_call_ns} and {s.retaken} "
        "-- the tolerance is a share of the block's wall time, not a fixed number of ns")
    # 3. per call: blocks of 8 calls
    block, _ = scripted([(8_000, 7_960), (8_000, 3_000), (8_800, 8_800)], spare=(8_000, 8_000))
    s = take_samples(block, 8, after(2), max_retakes=1)
    assert (s.per_call_ns, s.cpu_per_call_ns, s.retaken) == ([1000, 1100], [995, 1100], [(1000, 375)]), (
        f"blocks of 8 calls (8000, 7960), (8000, 3000), (8800, 8800): expected per-call times [1000, 1100], CPU "
        f"[995, 1100] and retaken [(1000, 375)], got {s.per_call_ns}, {s.cpu_per_call_ns}, {s.retaken} -- divide "
        "each block's times by its calls")
    # 4. bounded: every block interrupted, 3 re-takes allowed, 4 samples needed
    block, taken = scripted([(1_000, 100)] * 7)
    s = take_samples(block, 1, after(4), max_retakes=3)
    assert len(s.retaken) == 3 and s.per_call_ns == [1000] * 4, (
        f"every block interrupted, max_retakes=3, 4 samples needed: expected 3 re-takes, then 4 samples kept, got "
        f"{len(s.retaken)} re-takes and {len(s.per_call_ns)} samples")
    assert s.interrupted_kept == [0, 1, 2, 3], (
        f"the 4 samples kept after the re-takes ran out were interrupted: expected interrupted_kept [0, 1, 2, 3] (their "
        f"indices in per_call_ns), got {s.interrupted_kept} -- kept interrupted samples are flagged")
    # 5. no CPU clock: nothing counts as interrupted
    block, _ = scripted([(1_000, None), (5_000, None)])
    s = take_samples(block, 1, after(2), max_retakes=5)
    assert (s.per_call_ns, s.cpu_per_call_ns, s.retaken, s.interrupted_kept) == ([1000, 5000], [None, None], [], []), (
        f"cpu_ns None (no CPU clock): expected both samples kept, CPU [None, None], nothing re-taken, got "
        f"{s.per_call_ns}, {s.cpu_per_call_ns}, {s.retaken}, {s.interrupted_kept}")
    # 6. the share of the wall time, and more than it: exactly 5% is kept, 4.8% of the wall (5.04% of the CPU) too
    block, _ = scripted([(100_000, 95_000), (100_000, 95_200), (100_000, 94_000), (100_000, 96_000)],
                        spare=(100_000, 100_000))
    s = take_samples(block, 1, after(3), tolerance=0.05, max_retakes=2)
    assert s.per_call_ns == [100_000] * 3 and s.retaken == [(100_000, 94_000)], (
        f"tolerance 0.05, blocks losing 5000, 4800, 6000 and 4000 ns of 100000: expected only the one losing 6% re-taken, "
        f"got retaken {s.retaken}"
        + (" -- a block losing exactly 5% is not more than the tolerance" if (100_000, 95_000) in s.retaken else "")
        + (" -- the tolerance is a share of the wall time: 4800 ns is 4.8% of it (5.04% of the CPU time)"
           if (100_000, 95_200) in s.retaken else ""))
    for bad, arg in (({"tolerance": 0.0}, "tolerance"), ({"tolerance": 1.5}, "tolerance"), ({"max_retakes": -1}, "max_retakes")):
        try:
            take_samples(lambda: (1, 1), 1, after(1), **bad)
        except ValueError as e:
            assert arg in str(e), f"{bad}: the error should name {arg!r}, got: {e}"
        else:
            raise AssertionError(f"take_samples(..., {bad}) should raise ValueError naming {arg!r}")
    ### BEGIN HIDDEN TESTS
    hidden_property("samples re-taken when interrupted (wall time above CPU time by more than the tolerance of the wall "
                    "time), bounded, flagged, for other blocks, tolerances and budgets")
    rng = grading_rng()
    for case in range(4):
        tol = float(rng.uniform(0.02, 0.3))
        calls = int(rng.integers(1, 50))
        needed = int(rng.integers(2, 12))
        max_retakes = int(rng.integers(0, needed + 1))
        no_cpu = case == 3
        blocks = []
        for _ in range(needed + max_retakes + 5):
            wall = int(calls * rng.integers(1_000, 5_000_000))
            kind = rng.choice(["clean", "slow", "interrupted", "near"])
            if no_cpu:
                cpu = None
            elif kind == "clean":
                cpu = int(wall * rng.uniform(1 - tol * 0.5, 1.01))
            elif kind == "slow":  # a slow block that ran the whole time
                wall *= int(rng.integers(3, 10))
                cpu = int(wall * rng.uniform(1 - tol * 0.5, 1.0))
            elif kind == "interrupted":
                cpu = int(wall * rng.uniform(0.05, 1 - tol * 1.5))
            else:  # within the tolerance of the wall time, beyond it of the CPU time
                cpu = int(math.ceil(wall * (1 - tol * 0.995)))
            blocks.append((wall, cpu))
        # the reference: keep, re-take or flag, in order
        exp_keep, exp_cpu, exp_retaken, exp_flag, used = [], [], [], [], 0
        for wall, cpu in blocks:
            used += 1
            hit = cpu is not None and wall - cpu > tol * wall
            if hit and len(exp_retaken) < max_retakes:
                exp_retaken.append((wall / calls, cpu / calls))
                continue
            if hit:
                exp_flag.append(len(exp_keep))
            exp_keep.append(wall / calls)
            exp_cpu.append(None if cpu is None else cpu / calls)
            if len(exp_keep) >= needed:
                break
        block, taken = scripted(blocks[:used])
        s = take_samples(block, calls, after(needed), tolerance=tol, max_retakes=max_retakes)
        what = (f"{used} blocks of {calls} calls (wall, cpu) = {blocks[:used][:4]}..., tolerance {tol:.4f}, "
                f"max_retakes {max_retakes}, {needed} samples needed")
        assert s.per_call_ns == exp_keep and s.cpu_per_call_ns == exp_cpu, (
            f"{what}: expected per_call_ns {exp_keep[:5]}... and cpu_per_call_ns {exp_cpu[:5]}..., got "
            f"{s.per_call_ns[:5]}... and {s.cpu_per_call_ns[:5]}...")
        assert s.retaken == exp_retaken and s.interrupted_kept == exp_flag, (
            f"{what}: expected retaken {exp_retaken} and interrupted_kept {exp_flag}, got {s.retaken} and "
            f"{s.interrupted_kept}")
        assert s.stop_reason == "samples", f"{what}: expected stop_reason 'samples', got {s.stop_reason!r}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_take_samples()

# %%
if __name__ == "__main__":  # the process's CPU time counts every thread; the thread's only the one that timed
    _w = torch.randn(256, 256)
    with fixed_threads(2), torch.inference_mode():
        _w @ _w  # a region that used two threads: the pool's second thread may keep spinning for a while
    with fixed_threads(1), torch.inference_mode():
        _c, _p, _t = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
        for _ in range(20):
            _w @ _w
        _t, _c, _p = time.perf_counter_ns() - _t, time.thread_time_ns() - _c, time.process_time_ns() - _p
    print(f"20 matmuls right after a two-thread one: wall {_t / 1e6:.2f} ms, this thread's CPU time {_c / 1e6:.2f} ms, "
          f"the process's {_p / 1e6:.2f} ms")

# %% [markdown]
# ### The timing loop
#
# Now the loop itself. Two things make it more than "read the clock, call, read the clock".
# A call shorter than the clock's budget is timed in a **block** of many calls, and the block's
# length is found by **calibration**: time a block, and if it was too short, time a longer one.
# And on an accelerator, `fn()` only *queues* work and returns at once, so the clock must not be
# read before that work is done.
#
# **Your task (hard, 12 points).** Write the timing loop: `_time_block`, and the part of
# `time_callable` between the argument checks and the sampling.
#
# - *TODO:*
#   - `_time_block(fn, calls, sync, clock)`: the elapsed ns of `calls` calls of `fn`, the work they
#     queued on an accelerator included.
#   - `time_callable`: run the `warmup` calls; measure the clock's cost (`overhead`); calibrate
#     `calls`, the calls per block, so that one block lasts at least twice the larger of
#     `overhead / max_overhead_fraction` and `min_block_ns`. The `with` that fixes the threads and
#     pauses the collector is written, and so is what follows your part: the samples, taken by your
#     `take_samples` with blocks of `calls` calls until `_stop_reason` gives a reason (it measures
#     `spent_s` through `clock()` from the first sample on), and the `return` that reads `overhead`
#     and `calls`.
# - *Approach:* calibrate from one call upwards: time a block; if it was too short, grow `calls`
#   and time again. Doubling always gets there, but a 50 ns function would then need a dozen
#   rounds; when a block falls far short, grow by about the factor it fell short by, with a
#   little margin. Stop when two blocks in a row reach the length: one block slowed by an
#   interruption would otherwise leave the typical block too short. The calibration blocks are
#   not samples (they warm the code up a little more).
# - *Example:* with a clock whose reads cost 40 ns and `max_overhead_fraction=1e-3`, a block must
#   last at least 80 µs: a function of 1 µs gets about 80 to 100 calls per block, one of 5 ms one
#   call.
# - *Hints:* what must happen between the last `fn()` of a block and the clock read that ends
#   it, so that the block includes the work queued on a GPU? The same holds after the warmup:
#   the first block must not start while warmup work is still queued. Read every time through
#   `clock()` (nanoseconds; `clock() / 1e9` for `spent_s`) and pass it on to `_time_block` and
#   `measure_timer_overhead_ns`: the graded test passes a fake clock and records the order of the
#   `fn` calls, the `sync` calls and the clock reads.
# - *Needs first:* `measure_timer_overhead_ns`, `median_ci`, `fixed_threads`/`_gc_paused`, `_stop_reason` and
#   `take_samples`.

# %% nbgrader={"grade": false, "grade_id": "timing-loop", "solution": true, "schema_version": 3}
#| export
def _time_block(fn: Callable[[], Any], calls: int, sync: Callable[[], None],
                clock: Callable[[], int] = time.perf_counter_ns) -> int:
    "Elapsed ns (read from `clock`) of `calls` calls of `fn`, synchronised before the clock read that ends the block."
    ### BEGIN SOLUTION
    repeat = itertools.repeat(None, calls)
    t0 = clock()
    for _ in repeat:
        fn()
    sync()
    return clock() - t0
    ### END SOLUTION


def _cpu_clock_for(cpu_clock: Callable[[], int] | None, clock: Callable[[], int] | None, threads: int, device: str,
                   tolerance: float | None) -> tuple[Callable[[], int] | None, str]:
    "The CPU clock the interrupted-sample check reads (None: no check), and what the check does and why."
    if tolerance is None:
        return None, "off: interrupt_tolerance=None; every sample is kept as timed"
    on = f"on: a sample whose wall time exceeds its thread's CPU time by more than {tolerance:.0%} of it is re-taken"
    if cpu_clock is not None:
        return cpu_clock, on + " (the cpu_clock given)"
    if clock is not None:
        return None, "off: a wall clock was given without a cpu_clock; every sample is kept as timed"
    if device != "cpu":
        return None, (f"off on {device}: a block's wall time includes accelerator work the CPU only waits for, so CPU "
                      "time cannot tell a pause from a kernel; every sample is kept as timed (wall time)")
    if threads != 1:
        return None, (f"off at {threads} threads: the pool's threads do part of the work, so the timing thread's CPU "
                      "time is only its share and cannot show a pause; "
                      "every sample is kept as timed (wall time); time with threads=1 for preemption-aware samples")
    return time.thread_time_ns, on + " (time.thread_time_ns)"


def _block_sample(fn: Callable[[], Any], calls: int, sync: Callable[[], None], clock: Callable[[], int],
                  cpu_clock: Callable[[], int] | None) -> tuple[int, int | None]:
    "(wall ns, CPU ns or None) of one block: the CPU clock is read outside the wall clock's reads."
    if cpu_clock is None:
        return _time_block(fn, calls, sync, clock), None
    c0 = cpu_clock()
    wall = _time_block(fn, calls, sync, clock)
    return wall, cpu_clock() - c0


def time_callable(
    fn: Callable[[], Any],
    *,
    warmup: int = 5,
    samples: int = 10,
    max_overhead_fraction: float = 1e-3,
    min_block_ns: float = 0.0,
    target_rel_ci: float | None = None,
    min_seconds: float = 0.0,
    max_seconds: float = 60.0,
    sync: Callable[[], None] | None = None,
    threads: int | None = None,
    device: str = "cpu",
    disable_gc: bool = True,
    clock: Callable[[], int] | None = None,
    cpu_clock: Callable[[], int] | None = None,
    interrupt_tolerance: float | None = INTERRUPT_TOLERANCE,
) -> TimingSamples:
    """Time the zero-argument callable `fn` and return every raw sample.

    - `warmup` calls run first, untimed.
    - Calls per block are calibrated so one block lasts at least twice
      `max(timer_overhead / max_overhead_fraction, min_block_ns)`.
    - At least `samples` blocks are timed, and at least `min_seconds` of timing is spent;
      with `target_rel_ci` (e.g. 0.01) timing continues until the median's 95% CI half-width is
      within that fraction of the median, or `max_seconds` pass.
    - `sync` runs before each clock read that ends a block (accelerator synchronisation).
    - `clock` (default `time.perf_counter_ns`) gives every time, in ns.
    - Interrupted samples (`take_samples`): with the real clocks, at one thread on the CPU, the
      timing thread's CPU time (`time.thread_time_ns`) is read around every block; a block that lost
      more than `interrupt_tolerance` of its wall time is re-taken, at most `samples` times in all.
      At more threads, on an accelerator, or with a `clock` but no `cpu_clock`, CPU time cannot
      show a pause: no check, and `interrupt_check` says why.
    - Exceptions from `fn` propagate: a failing model is never timed as if it worked.

    >>> s = time_callable(lambda: sum(range(100)), samples=5)
    >>> len(s.per_call_ns), s.calls_per_sample > 1
    (5, True)
    """
    if not callable(fn):
        raise TypeError(f"fn: expected a zero-argument callable, got {type(fn).__name__}")
    warmup = positive_int(warmup, "warmup", minimum=0)
    samples = positive_int(samples, "samples")
    if not 0 < max_overhead_fraction < 1:
        raise ValueError(f"max_overhead_fraction: expected a number in (0, 1), got {max_overhead_fraction}")
    if target_rel_ci is not None and not 0 < target_rel_ci < 1:
        raise ValueError(f"target_rel_ci: expected a fraction in (0, 1) such as 0.01, got {target_rel_ci}")
    if max_seconds <= 0:
        raise ValueError(f"max_seconds: expected a positive number, got {max_seconds}")
    if interrupt_tolerance is not None and (isinstance(interrupt_tolerance, bool) or
                                            not isinstance(interrupt_tolerance, (int, float)) or not 0 < interrupt_tolerance < 1):
        raise ValueError(f"interrupt_tolerance: expected a fraction in (0, 1) such as 0.05, or None, got {interrupt_tolerance!r}")
    sync = sync or (lambda: None)
    custom_clock, clock = clock, clock or time.perf_counter_ns

    start = time.perf_counter()  # wall time of the whole run, warmup and calibration included
    with fixed_threads(threads) as n_threads, _gc_paused(disable_gc):
        ### BEGIN SOLUTION
        for _ in range(warmup):
            fn()
        sync()
        overhead = measure_timer_overhead_ns(clock=clock)
        # a 2x margin, and two blocks in a row must reach it: one calibration block can be slowed
        # by an interruption, and the overhead bound must hold for the median block, not a lucky one
        target_block = 2 * max(overhead / max_overhead_fraction, min_block_ns)
        calls = 1
        while True:
            elapsed = _time_block(fn, calls, sync, clock)
            if elapsed >= target_block and _time_block(fn, calls, sync, clock) >= target_block:
                break
            grow = target_block / max(elapsed, 1)
            calls = max(calls * 2, int(math.ceil(calls * grow * 1.2))) if grow > 2 else calls * 2
        ### END SOLUTION
        cpu, check = _cpu_clock_for(cpu_clock, custom_clock, n_threads, device, interrupt_tolerance)
        tol, retakes = interrupt_tolerance or INTERRUPT_TOLERANCE, samples if cpu else 0
        probes = (_block_sample(fn, calls, sync, clock, cpu) for _ in range(2))  # lazy: not run without a CPU clock
        if cpu is not None and all(w - c > tol * w for w, c in probes):  # take_samples' rule, twice in a row:
            retakes = 0  # the model waits by design, re-takes would not help
        timing_start = clock()
        taken = take_samples(lambda: _block_sample(fn, calls, sync, clock, cpu), calls,
                             lambda per_call: _stop_reason(per_call, samples, (clock() - timing_start) / 1e9,
                                                           min_seconds=min_seconds, max_seconds=max_seconds,
                                                           target_rel_ci=target_rel_ci),
                             tolerance=tol, max_retakes=retakes)
        off = None if cpu is None else statistics.median(1 - c / w for w, c in zip(taken.per_call_ns, taken.cpu_per_call_ns))
        if off is not None and off > tol:  # the typical sample, not a few, was off the CPU
            check += (f"; but the typical sample was off the CPU for {off:.0%} of its wall time: the model waits (sleep, "
                      "I/O, other threads) or the machine never let it run, so its CPU time is not its latency and "
                      "comparisons use wall time")
    return TimingSamples(
        per_call_ns=taken.per_call_ns,
        calls_per_sample=calls,
        warmup_calls=warmup,
        timer_overhead_ns=overhead,
        threads=n_threads,
        device=device,
        gc_disabled=disable_gc,
        stop_reason=taken.stop_reason,
        total_seconds=time.perf_counter() - start,
        cpu_per_call_ns=None if cpu is None else list(taken.cpu_per_call_ns),
        retaken=taken.retaken,
        interrupted_kept=taken.interrupted_kept,
        interrupt_check=check,
        cpu_comparable=cpu is not None and not off > tol,
    )

# %% nbgrader={"grade": true, "grade_id": "test-timing-loop", "locked": true, "points": 12, "schema_version": 3}
def test_unit_timing_loop():
    class FakeClock:  # a clock whose reads cost read_ns; fn and sync are the timed function's
        def __init__(self, read_ns, call_ns):
            self.now, self.read_ns, self.call_ns, self.log = 10**9, read_ns, call_ns, []

        def perf_counter_ns(self):
            self.log.append("clock")
            t = self.now
            self.now += self.read_ns
            return t

        def fn(self):
            self.log.append("call")
            self.now += self.call_ns

        def sync(self):
            self.log.append("sync")

    def run(read_ns, call_ns, **options):
        fake = FakeClock(read_ns, call_ns)
        s = time_callable(fake.fn, sync=fake.sync, clock=fake.perf_counter_ns, **options)
        return s, fake.log

    s, log = run(40, 1000, warmup=7, samples=5)
    # 1. device sync: after fn() ran, sync() must come before the clock is read again
    assert "sync" in log, "no sync: sync() was never called -- call it before each clock read that ends a block"
    pending = False
    for i, event in enumerate(log):
        if event == "call":
            pending = True
        elif event == "sync":
            pending = False
        elif pending:
            raise AssertionError(
                f"no sync before a clock read: event {i} reads the clock right after fn() ran, without sync() in "
                f"between (the events around it: {log[max(0, i - 3):i + 2]}) -- on a GPU fn() only queues work, so "
                "sync() must come after the last call and before the clock read that ends the block (and after the warmup)")
    # 2. warmup: untimed calls before the first timed block
    first_block = next((i for i in range(len(log) - 1) if log[i] == "clock" and log[i + 1] == "call"), None)
    assert first_block is not None, f"no timed block: the clock was never read just before a call ({log[:10]} ...)"
    warm = log[:first_block].count("call")
    assert warm >= 7, (f"no warmup: expected the warmup=7 untimed calls before the first timed block, got {warm} "
                       "-- first calls are slow (allocation, caches, lazy initialisation)")
    assert s.warmup_calls == 7, f"warmup_calls: expected 7, got {s.warmup_calls}"
    # 3. the clock's cost, measured with the clock in use
    assert s.timer_overhead_ns == 40, (f"timer_overhead_ns: expected the measured cost of a read pair of this "
                                       f"test's clock, 40 ns, got {s.timer_overhead_ns} -- use measure_timer_overhead_ns(clock=clock)")
    # 4. calibration: a 1 µs call needs blocks of >= 40 ns / 1e-3 = 40 µs
    block = s.calls_per_sample * statistics.median(s.per_call_ns)
    assert s.calls_per_sample > 1, (
        "block length not calibrated: one call per sample, although one call (1000 ns) is far shorter than the "
        "block the overhead budget needs (40 ns / max_overhead_fraction 0.001 = 40000 ns): time blocks of many calls")
    assert 40_000 <= block <= 20 * 80_000, (
        f"block length not calibrated: blocks of {s.calls_per_sample} calls last {block:.0f} ns; expected at least "
        f"the overhead budget 40 ns / 0.001 = 40000 ns (twice that with the margin), and not many times more")
    # 5. the samples: block time / calls, as many as asked
    assert len(s.per_call_ns) == 5 and s.stop_reason == "samples", \
        f"samples=5: expected 5 samples and stop_reason 'samples', got {len(s.per_call_ns)} and {s.stop_reason!r}"
    assert all(1000 <= v <= 1001 for v in s.per_call_ns), (
        f"per_call_ns: each sample is its block's elapsed time divided by its calls, about 1000 ns here, got "
        f"{s.per_call_ns[:3]} ...")
    # 6. the budget follows the measured overhead, max_overhead_fraction and min_block_ns
    for read_ns, call_ns, options, budget in ((500, 1000, {"max_overhead_fraction": 1e-2}, 50_000),
                                              (40, 1000, {"min_block_ns": 1e6}, 1e6),
                                              (40, 5e6, {}, 40_000)):
        s, _ = run(read_ns, call_ns, warmup=1, samples=3, **options)
        block = s.calls_per_sample * statistics.median(s.per_call_ns)
        assert budget <= block <= max(20 * 2 * budget, 2 * call_ns), (
            f"block length not calibrated from the measured overhead: with {read_ns} ns clock reads, calls of "
            f"{call_ns:.0f} ns and {options or 'the defaults'}, a block must last at least {budget:.0f} ns, got "
            f"{s.calls_per_sample} calls = {block:.0f} ns")
    # 7. the stop rule decides how many samples
    s, _ = run(40, 1000, warmup=1, samples=3, target_rel_ci=0.05)
    assert s.stop_reason == "precision" and len(s.per_call_ns) == 6, (
        f"equal samples and target_rel_ci=0.05: expected 'precision' after 6 samples (_stop_reason decides), got "
        f"{s.stop_reason!r} after {len(s.per_call_ns)}")
    s, _ = run(40, 5e8, warmup=1, samples=100, max_seconds=3.0)
    assert s.stop_reason == "max_seconds" and len(s.per_call_ns) < 10, (
        f"calls of 0.5 s, samples=100, max_seconds=3: expected to stop at 'max_seconds' after a few samples, got "
        f"{s.stop_reason!r} after {len(s.per_call_ns)}")
    ### BEGIN HIDDEN TESTS
    hidden_property("time_callable's samples, calls per sample and timer overhead with other read, call and sync costs")
    rng = grading_rng()

    class DrawnClock(FakeClock):  # the same fake, with a sync that takes time of its own
        def __init__(self, read_ns, call_ns, sync_ns):
            super().__init__(read_ns, call_ns)
            self.sync_ns = sync_ns

        def sync(self):
            self.log.append("sync")
            self.now += self.sync_ns

    read_ns = int(rng.integers(20, 120))
    fraction = float(rng.uniform(1e-3, 4e-3))
    budget = read_ns / fraction  # the block the clock's cost needs
    per_block = int(rng.integers(2, 8))
    call_ns = int(2 * budget / per_block) + 1  # per_block calls fill twice the budget
    sync_ns = int(rng.integers(0, 500))
    warmup, samples = int(rng.integers(2, 10)), int(rng.integers(3, 8))
    # min_seconds of the clock in use: several samples more than `samples` for a block of up to 1.4 x per_block calls
    min_seconds = (samples + int(rng.integers(4, 8))) * math.ceil(1.4 * per_block) * call_ns / 1e9
    fake = DrawnClock(read_ns, call_ns, sync_ns)
    s = time_callable(fake.fn, warmup=warmup, samples=samples, max_overhead_fraction=fraction, min_seconds=min_seconds,
                      sync=fake.sync, clock=fake.perf_counter_ns)
    log = fake.log
    what = (f"clock reads of {read_ns} ns, calls of {call_ns} ns, sync of {sync_ns} ns, max_overhead_fraction "
            f"{fraction:.5f}, warmup={warmup}, samples={samples}, min_seconds={min_seconds:.6f}")
    pending = False
    for i, event in enumerate(log):
        if event == "call":
            pending = True
        elif event == "sync":
            pending = False
        elif pending:
            raise AssertionError(f"{what}: no sync before a clock read: event {i} reads the clock right after fn() ran "
                                 f"(the events around it: {log[max(0, i - 3):i + 2]})")
    first_block = next((i for i in range(len(log) - 1) if log[i] == "clock" and log[i + 1] == "call"), None)
    assert first_block is not None, f"{what}: no timed block: the clock was never read just before a call"
    warm = log[:first_block].count("call")
    assert warm >= warmup and s.warmup_calls == warmup, (
        f"{what}: expected the {warmup} warmup calls before the first timed block (warmup_calls {warmup}), got {warm} "
        f"calls before it and warmup_calls {s.warmup_calls}" + (" -- no warmup" if warm == 0 else ""))
    assert s.timer_overhead_ns == read_ns, (
        f"{what}: timer_overhead_ns: expected the measured cost of a read pair of the clock in use, {read_ns} ns, got "
        f"{s.timer_overhead_ns}")
    calls = s.calls_per_sample
    block = calls * statistics.median(s.per_call_ns)
    assert calls > 1 and budget <= block <= 20 * 2 * budget, (
        f"{what}: block length not calibrated from the measured overhead: a block must last at least "
        f"{read_ns} / {fraction:.5f} = {budget:.0f} ns (twice that with the margin), got {calls} calls = {block:.0f} ns")
    per_sample = calls * call_ns + 3 * read_ns + sync_ns  # one block and the read that measures the time spent
    need = max(samples, math.ceil(min_seconds * 1e9 / per_sample))
    assert s.stop_reason == "samples" and len(s.per_call_ns) >= samples and abs(len(s.per_call_ns) - need) <= 2, (
        f"{what}: blocks of {calls} calls: expected to stop at 'samples' once {samples} samples are taken and "
        f"min_seconds of the clock in use is spent, after about {need} samples, got {s.stop_reason!r} after "
        f"{len(s.per_call_ns)}" + (" -- pass min_seconds on to _stop_reason" if len(s.per_call_ns) == samples else ""))
    expected_per_call = (calls * call_ns + read_ns + sync_ns) / calls  # the calls, the sync, the read that ends the block
    assert all(call_ns <= v <= call_ns + 2 * (read_ns + sync_ns) / calls for v in s.per_call_ns), (
        f"{what}: per_call_ns: each sample is its block's elapsed time (calls and sync) divided by its {calls} calls, "
        f"{expected_per_call:.2f} ns here, got {s.per_call_ns[:5]} ...")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_timing_loop()

# %% [markdown]
# `time_model` is what the profiler and the benchmarks call: it adapts the model, builds (or
# converts) the input, and times `forward` in inference mode through `time_callable`.

# %%
#| export
def interruption_text(meta: dict[str, Any]) -> str:
    """One line from a timing's metadata: how many of its samples were interrupted and re-taken, and the
    share of wall time lost to other programs, or why no sample was checked.

    >>> interruption_text({"interrupted_samples": 3, "retaken_samples": 3, "samples_taken": 33, "interrupted_kept": [],
    ...                    "wall_lost_share": 0.12, "interrupt_check": "on: ..."})
    '3 of 33 samples were interrupted and re-taken (12.0% of the wall time lost to other programs)'
    """
    checks = meta.get("interrupt_check")
    checks = checks if isinstance(checks, list) else [checks]
    if not any(str(c).startswith("on") for c in checks):
        return "interrupted samples not checked: " + "; ".join(str(c).removeprefix("off").lstrip(": ") for c in checks)
    n, retaken, kept = meta["interrupted_samples"], meta["retaken_samples"], len(meta["interrupted_kept"])
    share = meta.get("wall_lost_share")
    if meta.get("cpu_comparable") is False:
        return (f"{n} of {meta['samples_taken']} samples were off the CPU for more than the tolerance ({share:.0%} of "
                "the wall time in all): the model waits by design (sleep, I/O, other threads) or the machine never let "
                "it run; compared on wall time")
    return (f"{n} of {meta['samples_taken']} samples were interrupted and re-taken" if not kept else
            f"{n} of {meta['samples_taken']} samples were interrupted: {retaken} re-taken, {kept} kept and flagged "
            "(no re-take left)") + ("" if share is None else f" ({share:.1%} of the wall time lost to other programs)")


def interruption_lines(results: dict[str, dict[str, Any]], looks: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Report lines: per metric and model of `results[metric][model]` (a result's `to_dict()`, or anything
    with its timing `metadata`) its `interruption_text`; per metric of `looks` (a `time_until_decided` record
    with `alpha_per_look`) how a run until decided went.

    >>> interruption_lines({"latency": {"m": {"metadata": {"interrupt_check": "off: a test"}}}})
    ['- latency, m: interrupted samples not checked: a test.']
    """
    lines = [f"- {metric}, {m}: {interruption_text(r['metadata'])}." for metric, by_model in results.items()
             for m, r in by_model.items() if "interrupt_check" in r.get("metadata", {})]
    return lines + [f"- {metric}: sampled until decided, {rec['looks']} look(s) of {rec['samples_per_look']} samples per "
                    f"model in {rec['spent_s']:.1f} of {rec['budget_s']:g} s, stopped: {rec['stop_reason']} (alpha "
                    f"{rec['alpha_per_look']:g} per look)." for metric, rec in (looks or {}).items()]


def time_model(
    model: Any,
    input_or_shape: Any,
    *,
    warmup: int = 5,
    samples: int = 10,
    seed: int = 0,
    **timing_options: Any,
) -> TimingSamples:
    """Time one forward pass of `model` (any kind `adapt` accepts) on an input.

    `input_or_shape` is an input (tensor or array) or a shape tuple, from which a deterministic
    input is built with `seed`. Extra keyword arguments go to `time_callable`.

    The model first runs once through `ModelAdapter.prepare` (a failing model raises there; a
    compiled model compiles there), and the runtime's conditions (`runtime`, and for a compiled
    model `compile_seconds`) land in the metadata. A compiled model that compiles again while
    being timed would put compile time into the samples: it is timed again (its new graph is
    then cached), and if it still recompiles a RuntimeError says so. An ONNX Runtime session
    with other than one intra-op thread gets no interrupted-sample check (its pool's threads do
    part of the work, as torch's do at more than one thread).

    >>> s = time_model(torch.nn.Linear(16, 4), (1, 16), samples=5)
    >>> s.median_ms > 0
    True
    """
    a = adapt(model)
    if isinstance(input_or_shape, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in input_or_shape):
        x = a.make_input(input_or_shape, seed=seed)
    else:
        x = a.to_input(input_or_shape)
    ort_threads = a.info.get("intra_op_threads") if a.kind == "onnxruntime" else 1
    if ort_threads != 1:
        timing_options["interrupt_tolerance"] = None
    with a.inference():
        a.prepare(x)  # fail fast, with the model's own error, and compile, before any timing
        for attempt in range(2):
            graphs_before = _compile_counter()
            s = time_callable(
                lambda: a.forward(x), warmup=warmup, samples=samples, sync=a.sync,
                device=str(a.device), **timing_options,
            )
            recompiled = _compile_counter() - graphs_before
            if a.kind != "compiled" or recompiled == 0:
                break
        if a.kind == "compiled" and recompiled:
            raise RuntimeError(f"model '{a.name}': torch.compile built {recompiled} new graph(s) while being timed "
                               "twice; its latency would include compile time (check for guards that fail on every call)")
        s.extra = a.timing_info(x)
        if ort_threads != 1:
            s.interrupt_check = (f"off: the ONNX Runtime session runs {ort_threads or 'its default number of'} intra-op "
                                 "threads, which do part of the work; every sample is kept as timed (wall time)")
        if a.kind == "compiled":
            s.extra["recompiles_during_timing"] = 0
            s.extra["timing_attempts"] = attempt + 1
        return s

# %%
if __name__ == "__main__":
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    s = time_model(mlp, (1, 64), samples=20, threads=1)
    print(f"MLP: median {s.median_ms * 1000:.1f} µs per call (CPU time {statistics.median(s.cpu_per_call_ns) / 1e3:.1f} µs), "
          f"{s.calls_per_sample} calls per block, {s.threads} thread, clock overhead "
          f"{s.metadata()['timer_overhead_fraction']:.2%} of a block; {interruption_text(s.metadata())}")

# %% [markdown]
# ### Several models, one protocol: interleaved rounds
#
# Timing all of model A and then all of model B puts any drift of the machine (another job
# starts, the CPU clocks down) into the comparison. `time_interleaved` splits each model's
# samples into `rounds` and runs the rounds in turn, so a slow minute hits every model alike.
# Within a round the order is **drawn at random**, from the seed: in a fixed order A B C, B would
# always run right after A, in the caches A left warm (or cold), and that would be part of B's
# figure every time. A model that raises is reported with its error, and the others go on.
#
# ```
# round 1: B(4 samples) A(4) C(4)    round 2: A(4) C(4) B(4)   ...   -> 20 samples each
# ```
#
# **Your task (medium, 10 points).** Complete `time_interleaved`: the rounds loop (the argument
# checks, the split of the samples over the rounds, `_split_runs`, the merge of each model's
# metadata, `_merge_metadata`, and the `return` are written for you).
#
# - *TODO:* time every model, round after round, each time for that round's share of the
#   samples, with `time_model` and the caller's `warmup`, `seed` and `threads`; collect each
#   model's per-call times (ms) in `values[name]` and the metadata of each of its timings in
#   `metas[name]`; a model that raises goes to `failed[name]` with its exception. Each round runs
#   the models in the order `order.permutation(len(names))` gives (indices into `names`), `order`
#   being one generator, `np.random.default_rng(seed)`, made before the first round.
# - *Approach:* the outer loop runs over the rounds and the inner one over the models in that
#   round's order; that nesting is what makes the rounds interleaved. A model that raises is
#   left out of the later rounds (its place in their order is skipped); the others go on.
# - *Example:* two models, `samples=4, rounds=2`, `seed=3`: the calls go B A, A B (the
#   permutations `[1, 0]` and `[0, 1]`), two samples a round, and each model ends with 4 values and
#   `metadata["rounds"] == 2`.
# - *Hints:* `_split_runs(10, 3)` is `[4, 3, 3]`. A `TimingSamples` gives its samples in ms and
#   its conditions as a dict. One generator for all the rounds: a generator made again in every
#   round draws the same order every round. Catch `Exception`, not `BaseException`: a Ctrl-C must
#   still stop the run.
# - *Needs first:* every earlier task of this notebook; each round is a `time_callable`.

# %% nbgrader={"grade": false, "grade_id": "timing-interleaved", "solution": true, "schema_version": 3}
#| export
def _split_runs(total: int, rounds: int) -> list[int]:
    return [total // rounds + (1 if i < total % rounds else 0) for i in range(rounds)]


def _merge_metadata(metas: list[dict[str, Any]], n_values: int, order_seed: Any = None) -> dict[str, Any]:
    "One model's metadata of several timings (rounds, or earlier merges) in order; `n_values` its samples in all."
    many = lambda key: [v for m in metas for v in (m[key] if isinstance(m[key], list) else [m[key]])]  # noqa: E731
    offsets = list(itertools.accumulate([0] + [m["samples"] for m in metas]))
    cpu = many("cpu_per_call_ms") if all(m.get("cpu_per_call_ms") is not None for m in metas) else None
    lost = [m["wall_lost_ms"] for m in metas]
    merged = dict(metas[0])
    merged.update(
        samples=n_values,
        rounds=sum(m.get("rounds", 1) for m in metas),
        calls_per_sample=many("calls_per_sample"),
        timed_in_blocks=any(m["timed_in_blocks"] for m in metas),
        warmup_calls=sum(m["warmup_calls"] for m in metas),
        timer_overhead_fraction=max(m["timer_overhead_fraction"] for m in metas),
        total_seconds=sum(m["total_seconds"] for m in metas),
        stop_reason=sorted(set(many("stop_reason"))),
        interleaved=sum(m.get("rounds", 1) for m in metas) > 1,
        interrupt_check=sorted(set(many("interrupt_check"))),
        samples_taken=sum(m["samples_taken"] for m in metas),
        interrupted_samples=sum(m["interrupted_samples"] for m in metas),
        retaken_samples=sum(m["retaken_samples"] for m in metas),
        interrupted_kept=[i + off for m, off in zip(metas, offsets) for i in m["interrupted_kept"]],
        timed_ms=sum(m["timed_ms"] for m in metas), wall_lost_ms=None if None in lost else sum(lost),
        wall_lost_share=None if None in lost else sum(lost) / max(sum(m["timed_ms"] for m in metas), 1e-12),
        cpu_per_call_ms=cpu, retaken_per_call_ms=many("retaken_per_call_ms"),
        cpu_comparable=all(m.get("cpu_comparable", False) for m in metas),
    )
    if order_seed is not None:
        merged.update(order_seed=order_seed, round_order="random: each round numpy.random.default_rng(order_seed)"
                      ".permutation(models), one generator for all the rounds")
    return merged


def time_interleaved(
    models: dict[str, Any],
    input_or_shape: Any,
    *,
    samples: int = 10,
    rounds: int = 5,
    warmup: int = 5,
    seed: int = 0,
    threads: int | None = None,
) -> dict[str, tuple[list[float], dict[str, Any]] | BaseException]:
    """Time every model on the same input in interleaved rounds, each round in a random order drawn
    from `seed` (`numpy.random.default_rng(seed)`, one permutation per round; the seed is recorded as
    `metadata["order_seed"]`).

    Returns `{name: (per-call ms, metadata)}`, or `{name: exception}` for a model that raised
    (it is not timed again). `samples` per model are split over `rounds` (at most `samples`).

    >>> out = time_interleaved({"a": torch.nn.Linear(8, 8), "b": torch.nn.Linear(8, 2)}, (1, 8), samples=4, rounds=2)
    >>> [len(out[n][0]) for n in out], out["a"][1]["rounds"]
    ([4, 4], 2)
    """
    samples = positive_int(samples, "samples")
    rounds = positive_int(rounds, "rounds")
    if rounds > samples:
        raise ValueError(f"rounds: expected at most samples={samples}, got {rounds}")
    values: dict[str, list[float]] = {n: [] for n in models}
    metas: dict[str, list[dict[str, Any]]] = {n: [] for n in models}
    failed: dict[str, BaseException] = {}
    names = list(models)
    ### BEGIN SOLUTION
    order = np.random.default_rng(seed)  # one generator for all the rounds: each round draws a new order
    for k in _split_runs(samples, rounds):
        for i in order.permutation(len(names)):
            name = names[int(i)]
            if name in failed:
                continue
            try:
                s = time_model(models[name], input_or_shape, warmup=warmup, samples=k, seed=seed, threads=threads)
            except Exception as e:  # the model raised: reported with its error, the others go on
                failed[name] = e
                continue
            values[name].extend(s.per_call_ms)
            metas[name].append(s.metadata())
    ### END SOLUTION
    return {n: failed[n] if n in failed else (values[n], _merge_metadata(metas[n], len(values[n]), seed))
            for n in models}


# %% nbgrader={"grade": true, "grade_id": "test-timing-interleaved", "locked": true, "points": 10, "schema_version": 3}
def test_unit_time_interleaved():
    calls: list[str] = []

    def logged(name):
        def f(x):
            calls.append(name)
            return x * 2
        return f

    def broken(x):
        calls.append("broken")
        raise RuntimeError("kaput")

    names, seed = ["a", "broken", "b"], 3
    out = time_interleaved({"a": logged("a"), "broken": broken, "b": logged("b")}, (1, 4),
                           samples=6, rounds=3, warmup=1, seed=seed)
    collapse = lambda seq: [n for i, n in enumerate(seq) if i == 0 or seq[i - 1] != n]  # noqa: E731
    draw = np.random.default_rng(seed)
    orders = [[names[int(i)] for i in draw.permutation(3)] for _ in range(3)]
    expected = [n for r, order in enumerate(orders) for n in order if n != "broken" or r == 0]
    runs = collapse(calls)
    if runs != collapse(expected):
        hint = ""
        if runs == collapse([n for r in range(3) for n in names if n != "broken" or r == 0]):
            hint = " -- the models ran in the order given, every round: each round draws its order from the seed"
        elif runs == collapse([n for r in range(3) for n in orders[0] if n != "broken" or r == 0]):
            hint = (" -- every round ran in the same order: make the generator once, before the rounds (made again "
                    "in each round, it draws the same order every time)")
        raise AssertionError(
            f"seed={seed}: expected the rounds in the orders np.random.default_rng({seed}).permutation(3) draws, one "
            f"generator for all the rounds: {orders} (the broken model not tried again after round 1), so the calls "
            f"go {collapse(expected)}; they went {runs}{hint}")
    assert isinstance(out["broken"], RuntimeError) and "kaput" in str(out["broken"]), \
        f"a model that raises is reported with its exception, got {out['broken']!r}"
    for name in ("a", "b"):
        ms, meta = out[name]
        assert len(ms) == 6 and meta["samples"] == 6 and meta["rounds"] == 3 and meta["interleaved"], \
            f"{name}: expected 6 samples in 3 rounds, got {len(ms)} samples, metadata {meta}"
        assert all(v > 0 for v in ms), f"{name}: expected every per-call time > 0 ms, got {ms}"
    for kwargs, arg in (({"samples": 2, "rounds": 3}, "rounds"), ({"samples": 0}, "samples")):
        try:
            time_interleaved({"a": logged("a")}, (1, 4), **kwargs)
        except ValueError as e:
            assert arg in str(e), f"{kwargs}: expected a ValueError naming {arg!r}, got: {e}"
        else:
            raise AssertionError(f"{kwargs} should raise ValueError naming {arg!r}")
    ### BEGIN HIDDEN TESTS
    hidden_property("interleaved rounds for other models, rounds, samples and warm-up, a failing model recorded with "
                    "its error")
    rng = grading_rng()
    n_models = int(rng.integers(2, 5))
    names = [f"model{i}_{int(rng.integers(100, 1000))}" for i in range(n_models)]
    rounds = int(rng.integers(1, 4))
    samples = int(rng.integers(rounds, rounds + 6))
    warmup, seed, width = int(rng.integers(0, 3)), int(rng.integers(1, 10_000)), int(rng.integers(2, 7))
    threads = [None, 1, 2][int(rng.integers(3))]
    broken = names[int(rng.integers(0, n_models))]
    break_run = int(rng.integers(1, rounds + 1))  # it raises in its break_run-th run (a run: calls in a row)
    token = f"failure {int(rng.integers(10**6))}"
    log: list[str] = []
    first_inputs = {}

    def drawn(name):
        def f(x):
            log.append(name)
            first_inputs.setdefault(name, x)
            runs_of_broken = sum(1 for i, n in enumerate(log) if n == broken and (i == 0 or log[i - 1] != n))
            if name == broken and runs_of_broken >= break_run:
                raise RuntimeError(token)
            return x * 2
        return f

    out = time_interleaved({n: drawn(n) for n in names}, (1, width), samples=samples, rounds=rounds, warmup=warmup,
                           seed=seed, threads=threads)
    what = (f"{n_models} models {names}, samples={samples}, rounds={rounds}, warmup={warmup}, seed={seed}, "
            f"threads={threads}, {broken} raising from its run {break_run} on")
    draw, expected_runs, gone = np.random.default_rng(seed), [], False
    for _ in range(rounds):  # the reference: one generator, one permutation per round, the broken model dropped
        for i in draw.permutation(n_models):
            n = names[int(i)]
            if n == broken and gone:
                continue
            expected_runs.append(n)
            if n == broken and sum(1 for j, m in enumerate(expected_runs) if m == broken and
                                   (j == 0 or expected_runs[j - 1] != m)) >= break_run:
                gone = True
    collapse = lambda seq: [n for i, n in enumerate(seq) if i == 0 or seq[i - 1] != n]
    runs = collapse(log)
    assert runs == collapse(expected_runs), (
        f"{what}: expected the models timed in this order {collapse(expected_runs)} (interleaved rounds, each in the "
        f"order np.random.default_rng(seed) draws, one permutation per round from one generator; the broken model "
        f"not tried after it raised), the calls went {runs}")
    assert list(out) == names, f"{what}: expected one entry per model, {names}, got {list(out)}"
    if gone:  # its runs may merge across a round's end (last, then first): then it never reaches its break
        assert isinstance(out[broken], RuntimeError) and token in str(out[broken]), (
            f"{what}: {broken} is reported with its exception RuntimeError({token!r}), got {out[broken]!r}")
    x_expected = torch.randn(1, width, generator=torch.Generator().manual_seed(seed))
    for name in names:
        assert torch.equal(torch.as_tensor(first_inputs[name]), x_expected), (
            f"{what}: {name} must get the input built from seed={seed} (time_model's seed), got {first_inputs[name]}")
        if name == broken and gone:
            continue
        assert isinstance(out[name], tuple) and len(out[name]) == 2, f"{what}: {name}: expected (values, metadata), got {out[name]!r}"
        ms, meta = out[name]
        assert len(ms) == samples and meta["samples"] == samples and meta["rounds"] == rounds, (
            f"{what}: {name}: expected {samples} values in {rounds} rounds, got {len(ms)} values, metadata samples "
            f"{meta['samples']} and rounds {meta['rounds']}")
        assert meta["interleaved"] == (rounds > 1) and len(meta["calls_per_sample"]) == rounds, (
            f"{what}: {name}: expected the metadata of {rounds} timings merged, got interleaved {meta['interleaved']} "
            f"and calls_per_sample {meta['calls_per_sample']}")
        assert meta["warmup_calls"] == rounds * warmup, (
            f"{what}: {name}: expected warmup={warmup} in each of the {rounds} rounds ({rounds * warmup} warmup calls), "
            f"got {meta['warmup_calls']}")
        if threads is not None:
            assert meta["torch_threads"] == threads, f"{what}: {name}: expected threads={threads}, got {meta['torch_threads']}"
        assert all(v > 0 for v in ms), f"{what}: {name}: every per-call time is positive, got {ms}"
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_time_interleaved()

# %% [markdown]
# ### Sampling until the question is answered
#
# How many samples are enough depends on the question. "Is B at least 2% faster than A?" is
# answered by a few samples when B takes half the time, and needs many when the two are close or
# the machine is noisy. `time_until_decided` times the models in **looks**: each look is a
# `time_interleaved` run (its own order seed), its samples added to the earlier ones; after each,
# the caller's `decided(out, look)` says whether every question it asks is answered. It stops
# then, or after `looks` looks, or when another look would not fit in `budget_s` seconds.
#
# Looking again and again is not free: every look is one more chance for noise to pass for a
# difference. So the caller must decide each look at a stricter level than a single test would
# use (Module 19's `Benchmark` splits its significance level over the looks). The number of
# looks is fixed in advance for that reason: it is part of the method, not a knob turned after
# seeing the data.

# %%
#| export
def time_until_decided(models: dict[str, Any], input_or_shape: Any,
                       decided: Callable[[dict[str, Any], int], bool], *, budget_s: float, looks: int = 5,
                       samples: int = 10, rounds: int = 5, warmup: int = 5, seed: int = 0,
                       threads: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Interleaved rounds in looks until `decided(out, look)` is True, `looks` looks are taken, or
    the next look would end after `budget_s` seconds (the first look always runs).

    Look k is `time_interleaved(..., samples, rounds, seed=seed + k - 1)` on the same input (a shape
    becomes the input `time_model` would build from `seed`); `out` merges every look's samples per
    model, as `time_interleaved` returns them (a model that raises in any look: its exception).
    Returns `(out, record)`, `record` holding the looks taken, their order seeds, the seconds spent
    and `stop_reason` ("decided", "looks" or "budget_s").

    >>> out, rec = time_until_decided({"a": torch.nn.Linear(4, 4)}, (1, 4), lambda out, k: k == 2, budget_s=60,
    ...                               samples=2, rounds=2)
    >>> len(out["a"][0]), rec["looks"], rec["stop_reason"]
    (4, 2, 'decided')
    """
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not math.isfinite(budget_s) or budget_s <= 0:
        raise ValueError(f"budget_s: expected a positive number of seconds, got {budget_s!r}")
    looks = positive_int(looks, "looks")
    if isinstance(input_or_shape, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in input_or_shape):
        input_or_shape = torch.randn(*_check_shape(input_or_shape, "input_or_shape"),
                                     generator=torch.Generator().manual_seed(seed))  # make_input's tensor
    start, merged, seeds = time.perf_counter(), {}, []
    for look in range(1, looks + 1):
        began = time.perf_counter()
        seeds.append(seed + look - 1)
        live = {n: m for n, m in models.items() if not isinstance(merged.get(n), BaseException)}
        for name, got in time_interleaved(live, input_or_shape, samples=samples, rounds=rounds, warmup=warmup,
                                          seed=seeds[-1], threads=threads).items():
            if isinstance(got, BaseException) or name not in merged:
                merged[name] = got
            else:
                values = merged[name][0] + got[0]
                merged[name] = (values, _merge_metadata([merged[name][1], got[1]], len(values), list(seeds)))
        now = time.perf_counter()
        reason = ("decided" if decided(merged, look) else "looks" if look == looks
                  else "budget_s" if (now - start) + (now - began) > budget_s else None)
        if reason:
            break
    record = {"looks": look, "max_looks": looks, "samples_per_look": samples, "order_seeds": seeds,
              "budget_s": budget_s, "spent_s": time.perf_counter() - start, "stop_reason": reason}
    return {n: merged[n] for n in models}, record


# %%
def test_unit_time_until_decided():
    seen: list[Any] = []

    def spy(x):
        seen.append(x)
        return x + 1

    asked = []
    out, rec = time_until_decided({"a": spy, "b": lambda x: x * 2}, (1, 3), lambda o, k: asked.append(k) or k == 3,
                                  budget_s=60, samples=2, rounds=1, warmup=0, seed=7)
    assert asked == [1, 2, 3] and rec["stop_reason"] == "decided" and rec["looks"] == 3, (asked, rec)
    assert rec["order_seeds"] == [7, 8, 9] and out["a"][1]["order_seed"] == [7, 8, 9], (rec, out["a"][1]["order_seed"])
    text = interruption_text(out["a"][1])
    assert text.startswith("interrupted samples not checked") or " samples were interrupted" in text, text
    meta = time_callable(lambda: sum(range(300)), samples=8, threads=1).metadata()
    assert meta["interrupt_check"].startswith("on") and (
        f" of {meta['samples_taken']} samples were interrupted" in interruption_text(meta)), meta
    assert meta["samples_taken"] == 8 + meta["retaken_samples"] and len(meta["cpu_per_call_ms"]) == 8, meta
    assert len(out["a"][0]) == 6 and out["a"][1]["samples"] == 6 and out["a"][1]["rounds"] == 3, out["a"][1]
    assert all(torch.equal(torch.as_tensor(x), torch.as_tensor(seen[0])) for x in seen), "every look times the same input"
    _, rec = time_until_decided({"a": spy}, (1, 3), lambda o, k: False, budget_s=60, looks=2, samples=2, rounds=1)
    assert rec["stop_reason"] == "looks" and rec["looks"] == 2, rec
    _, rec = time_until_decided({"a": spy}, (1, 3), lambda o, k: False, budget_s=1e-9, samples=2, rounds=1)
    assert rec["stop_reason"] == "budget_s" and rec["looks"] == 1, rec
    for bad in (0, -1.0, float("nan"), "3"):
        try:
            time_until_decided({"a": spy}, (1, 3), lambda o, k: True, budget_s=bad)
        except ValueError as e:
            assert "budget_s" in str(e), e
        else:
            raise AssertionError(f"budget_s={bad!r} should raise ValueError")


if __name__ == "__main__":
    test_unit_time_until_decided()

# %%
def test_unit_time_callable():
    # a callable of known relative cost: 4x the work takes clearly longer than 1x
    a = torch.randn(96, 96)
    one = time_callable(lambda: a @ a, samples=15, threads=1)
    four = time_callable(lambda: [a @ a for _ in range(4)], samples=15, threads=1)
    ratio = four.median_ms / one.median_ms
    assert 2.5 < ratio < 6.0, f"4x the work should take ~4x the time, measured {ratio:.2f}x"
    assert one.threads == 1 and len(one.per_call_ns) == 15
    # calibration sizes blocks for <= 0.1% clock cost with a 2x margin; a block timed in a quieter
    # moment than its calibration can come out shorter (seen: 0.11% on a loaded machine), so a real
    # clock is held to 0.4% here; the exact rule is graded with a fake clock above
    meta = one.metadata()
    assert meta["timer_overhead_fraction"] <= 4e-3, meta
    # a no-op is timed in blocks and reports a tiny per-call time
    noop = time_callable(lambda: None, samples=5)
    assert noop.blocked and noop.median_ms * 1e6 < 1000, noop.median_ms
    # adaptive stopping reaches the requested precision (or says it ran out of time)
    adaptive = time_callable(lambda: a @ a, samples=6, target_rel_ci=0.05, max_seconds=5)
    assert adaptive.stop_reason in ("precision", "max_seconds")
    if adaptive.stop_reason == "precision":
        lo, hi = median_ci(adaptive.per_call_ns)
        assert (hi - lo) / 2 <= 0.05 * statistics.median(adaptive.per_call_ns)
    # exceptions propagate; bad arguments are named
    def boom():
        raise RuntimeError("model exploded")
    try:
        time_callable(boom)
        raise AssertionError("the model's exception must propagate")
    except RuntimeError as e:
        assert "exploded" in str(e)
    for kwargs, arg in (({"samples": 0}, "samples"), ({"warmup": -1}, "warmup"), ({"threads": 0}, "threads")):
        try:
            time_callable(lambda: None, **kwargs)
            raise AssertionError(f"{kwargs} should fail")
        except ValueError as e:
            assert arg in str(e), e
    assert gc.isenabled(), "the garbage collector must be re-enabled after timing"


if __name__ == "__main__":
    test_unit_time_callable()

# %%
def test_unit_time_model():
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())
    model.train()
    s = time_model(model, (2, 32), samples=5)
    assert s.median_ms > 0 and len(s.per_call_ms) == 5
    assert model.training, "time_model must restore training mode"
    x = torch.randn(2, 32)
    assert time_model(model, x, samples=3).median_ms > 0
    try:
        time_model(model, (2, 31))
        raise AssertionError("a wrong input shape must raise the model's error")
    except RuntimeError:
        pass


if __name__ == "__main__":
    test_unit_time_model()

# %% [markdown]
# The two runtime kinds, on a tiny network: an ONNX file exported with `torch.onnx.export`
# and read back through ONNX Runtime, and `torch.compile` (here with its `eager` backend, which
# traces with TorchDynamo but generates no code, so the check stays fast; Module 19 measures the
# default `inductor` backend).

# %%
def test_unit_runtime_kinds():
    import tempfile
    import warnings
    net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3)).eval()
    x = torch.randn(5, 6)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "net.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's own deprecation notices
            torch.onnx.export(net, (x[:1],), str(path), dynamo=False, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        o = adapt(path)
        assert o.kind == "onnxruntime" and o.runtime == "onnxruntime" and o.name == "net"
        assert isinstance(o.to_input(x), np.ndarray) and o.to_input(x).dtype == np.float32
        with torch.inference_mode():
            assert np.allclose(o.forward(o.to_input(x)), net(x).numpy(), atol=1e-6)
        assert "memory" in o.unavailable and o.info["onnx_bytes"] > 0
        assert sum(arr.size for _, arr in o.named_parameter_arrays()) == sum(p.numel() for p in net.parameters())
        assert time_model(o, (1, 6), samples=3).metadata()["runtime"] == "onnxruntime"
        assert adapt(o.model).kind == "onnxruntime", "a bare InferenceSession is adapted too"
    c = adapt(torch.compile(net, backend="eager"), name="net_c")
    assert c.kind == "compiled" and c.runtime == "compile" and c.torch_module is net
    s = time_model(c, (1, 6), samples=3, warmup=1)
    meta = s.metadata()
    assert meta["compile_seconds"] is not None and meta["compile_seconds"] > 0 and meta["recompiles_during_timing"] == 0
    assert list(c.compile_seconds) == [input_signature(c.make_input((1, 6)))]
    for bad, arg in ((lambda: adapt(net, device="tpu"), "device"), (lambda: adapt(lambda v: v, device="cuda"), "device")):
        try:
            bad()
            raise AssertionError(f"{arg} should be rejected")
        except ValueError as e:
            assert arg in str(e), e


if __name__ == "__main__":
    test_unit_runtime_kinds()

# %% [markdown]
# ## Recording the conditions
#
# A latency means little without the machine it was measured on. `system_info()` is saved
# with every result file: CPU model, cores, the torch thread count, memory, clock frequency and
# the frequency governor (where Linux exposes them), and library versions. What cannot be read
# on this machine is `None`, not a guess.

# %%
#| export
def _read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    info = _read_text("/proc/cpuinfo")
    if info:
        for line in info.splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def system_info() -> dict[str, Any]:
    """The machine and software a measurement ran on. Unreadable fields are None.

    >>> info = system_info()
    >>> info["logical_cores"] >= 1 and info["torch_threads"] >= 1
    True
    """
    freq = None
    try:
        f = psutil.cpu_freq()
        freq = round(f.current, 1) if f else None
    except (OSError, NotImplementedError, AttributeError):
        freq = None
    governor = _read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    return {
        "platform": platform.platform(),  # the course API's names: platform, processor, python_version, cpu_count
        "processor": platform.processor() or platform.machine(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "cpu_count": psutil.cpu_count(logical=True),
        "torch_threads": torch.get_num_threads(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 2),
        "cpu_freq_mhz": freq,
        "cpu_governor": governor,
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python_version": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
    }

# %%
def test_unit_system_info():
    info = system_info()
    for key in ("platform", "processor", "cpu_model", "physical_cores", "logical_cores", "cpu_count", "torch_threads",
                "memory_gb", "cpu_freq_mhz", "cpu_governor", "python_version", "torch", "numpy"):
        assert key in info, key
    assert info["logical_cores"] == os.cpu_count()
    assert info["torch"] == torch.__version__ and info["python_version"] == platform.python_version()
    assert info["memory_gb"] > 0


if __name__ == "__main__":
    test_unit_system_info()
    print(system_info())

# %% [markdown]
# ## Was the machine quiet?
#
# A timing taken while another program keeps a core busy is slower and noisier, and nothing in
# the samples says so. pyperf records the load average and the CPU configuration once, before a
# run; here `machine_state()` takes a snapshot before *and* after the measurement, and
# `machine_load(before, after)` judges the window between them from the kernel's own counters:
# the CPU time every other process used (`/proc/PID/stat`), the time a hypervisor stole
# (`/proc/stat`), the 1-minute load average at both ends, and the CPU governor and clock
# (`/sys/devices/system/cpu/cpu*/cpufreq`). The rule is `BUSY_RULE`; a figure that cannot be read
# is `None`, with the reason in `unavailable`. Counters tick 1/100 s (`USER_HZ`): a window shorter
# than a tick per core has no shares.

# %%
#| export
BUSY_PROCESS_SHARE, BUSY_STEAL_SHARE, BUSY_LOAD_MARGIN = 0.20, 0.05, 0.5
NOTABLE_SHARE = 0.05  # other processes named in `busiest`: at least 5% of a core over the window
BUSY_RULE = (f"busy when, over the measured window, another process (not this one or its children) used more than "
             f"{BUSY_PROCESS_SHARE:.0%} of a core, or steal time exceeded {BUSY_STEAL_SHARE:.0%} of CPU time, or the larger 1-minute load average "
             f"(before/after) less the cores this process used exceeded cores - {BUSY_LOAD_MARGIN}")


def _proc_processes(proc: Path, parents: dict[int, int] | None = None) -> dict[int, tuple[int, str]]:
    """{pid: (CPU clock ticks user+system, command)} from PROC/PID/stat and cmdline; vanished processes are
    skipped. `parents`, when given, is filled with {pid: parent pid}."""
    out = {}
    for d in proc.glob("[0-9]*"):
        stat = _read_text(d / "stat")
        if not stat or ")" not in stat:
            continue  # the process ended between listing and reading
        comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        cmd = " ".join((_read_text(d / "cmdline") or "").replace("\0", " ").split()) or f"[{comm}]"
        out[int(d.name)] = (int(fields[11]) + int(fields[12]), cmd)  # utime, stime: fields 14, 15
        if parents is not None:
            parents[int(d.name)] = int(fields[1])  # ppid: field 4
    return out


def _cpufreq(root: Path) -> dict[str, Any]:
    "Governors and current/max clock (MHz) over the CPUs that expose cpufreq."
    dirs = sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq"))
    mhz = lambda name: [int(v) / 1000 for d in dirs if (v := _read_text(d / name)) and v.isdigit()]  # noqa: E731
    cur, top = mhz("scaling_cur_freq"), mhz("scaling_max_freq")
    return {"cpu_governors": sorted({g for d in dirs if (g := _read_text(d / "scaling_governor"))}) or None,
            "cpu_freq_mhz": [min(cur), max(cur)] if cur else None, "cpu_max_freq_mhz": max(top) if top else None}


def machine_state(root: str | Path = "/", own_pid: int | None = None) -> dict[str, Any]:
    """One snapshot of how busy the machine is (Linux /proc and /sys under `root`; a test passes a fake
    root). Pass two snapshots, taken before and after a measurement, to `machine_load`. `cpu_ticks`
    are /proc/stat's totals over all CPUs: user, nice, system, idle, iowait, irq, softirq, steal.

    >>> s = machine_state()
    >>> s["cores"] >= 1 and ("load_avg" in s)
    True
    """
    root, proc, unavailable = Path(root), Path(root) / "proc", {}
    stat = (_read_text(proc / "stat") or "").splitlines()
    cpu = [int(v) for v in stat[0].split()[1:9]] if stat and stat[0].startswith("cpu ") else None
    cores = sum(1 for line in stat if line[:3] == "cpu" and line[3:4].isdigit()) or None
    load = (_read_text(proc / "loadavg") or "").split()
    if cpu is None:
        unavailable["cpu_ticks"] = f"{proc / 'stat'} unreadable (not Linux?): no steal time, no CPU shares"
    if not load and root == Path("/") and hasattr(os, "getloadavg"):
        load = [f"{v}" for v in os.getloadavg()]
    if not load:
        unavailable["load_avg"] = f"{proc / 'loadavg'} unreadable and no os.getloadavg()"
    parents: dict[int, int] = {}
    processes = _proc_processes(proc, parents) if cpu is not None else {}
    freq = _cpufreq(root)
    if freq["cpu_governors"] is None:
        unavailable["cpu_governors"] = f"no {root / 'sys/devices/system/cpu/cpu*/cpufreq'} (a VM or no cpufreq driver)"
    return {"cores": cores or os.cpu_count(), "load_avg": [float(v) for v in load[:3]] if load else None,
            "runnable": int(load[3].split("/")[0]) if len(load) > 3 else None,
            "cpu_ticks": cpu, "ticks_per_s": os.sysconf("SC_CLK_TCK") if cpu else None, "processes": processes, "parents": parents,
            "own_pid": os.getpid() if own_pid is None else own_pid,
            **freq, "unavailable": unavailable}


def _descendants(pid: int, parents: dict[int, int]) -> set[int]:
    "Every process whose parent chain reaches `pid`."
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def machine_load(before: dict[str, Any], after: dict[str, Any], top: int = 3) -> dict[str, Any]:
    """Was the machine busy between two `machine_state` snapshots? `busy` is True/False by `BUSY_RULE`
    (None when no figure could be read), `reasons` give the figures that made it busy, `busiest`
    every other process that used at least `NOTABLE_SHARE` of a core over the window (at least the `top`).

    >>> s = machine_state(); r = machine_load(s, machine_state())
    >>> r["busy"] in (True, False, None) and r["rule"] == BUSY_RULE
    True
    """
    cores, unavailable = after["cores"], {**before["unavailable"], **after["unavailable"]}
    shares, steal, own, window_s = {}, None, 0.0, None
    if before["cpu_ticks"] and after["cpu_ticks"]:
        total = sum(after["cpu_ticks"]) - sum(before["cpu_ticks"])  # all CPUs' ticks over the window
        window_s = total / cores / after["ticks_per_s"]
        if total > 0:  # shares as ratios of integer ticks: exact up to one division
            steal = (after["cpu_ticks"][7] - before["cpu_ticks"][7]) / total
            old = before["processes"]
            shares = {pid: ((t - old[pid][0] if pid in old else t) * cores / total, cmd)
                      for pid, (t, cmd) in after["processes"].items()}
            # our own child processes (torch.compile's workers, a DataLoader's) are our work, not another program's
            ours = _descendants(after["own_pid"], after.get("parents", {})) | {after["own_pid"]}
            own = sum(shares.pop(pid, (0.0, ""))[0] for pid in ours)
        else:
            unavailable["shares"] = "the window was shorter than one clock tick per core"
    loads = [s["load_avg"][0] for s in (before, after) if s["load_avg"]]
    load = max(loads) - own if loads else None
    ranked = sorted(shares.items(), key=lambda kv: -kv[1][0])
    busiest = [{"pid": pid, "command": cmd[:120], "core_share": round(share, 3)}
               for i, (pid, (share, cmd)) in enumerate(ranked) if share > 0 and (i < top or share >= NOTABLE_SHARE)]
    reasons = [f"pid {pid} ({cmd[:60]}) used {share:.0%} of a core" for pid, (share, cmd) in ranked
               if share > BUSY_PROCESS_SHARE]
    if steal is not None and steal > BUSY_STEAL_SHARE:
        reasons.append(f"steal time {steal:.1%} of CPU time")
    if load is not None and load > cores - BUSY_LOAD_MARGIN:
        reasons.append(f"1-minute load average {max(loads):.2f} ({load:.2f} without this process) on {cores} cores")
    known = steal is not None or load is not None
    return {"busy": bool(reasons) if known else None, "reasons": reasons, "rule": BUSY_RULE, "cores": cores,
            "window_s": window_s, "load_avg_1min": [s["load_avg"][0] if s["load_avg"] else None for s in (before, after)],
            "own_core_share": round(own, 3) if steal is not None else None, "steal_share": steal, "busiest": busiest,
            "cpu_governors": after["cpu_governors"], "cpu_freq_mhz": [before["cpu_freq_mhz"], after["cpu_freq_mhz"]],
            "unavailable": unavailable}


def machine_warning(load: dict[str, Any] | None, what: str = "this run") -> str | None:
    "One line, with the figures, when `load` (from `machine_load`) says busy; None when it does not."
    if not load or not load.get("busy"):
        return None
    others = ", ".join(f"pid {p['pid']} ({p['command'][:40]}) {p['core_share']:.0%}" for p in load["busiest"])
    return (f"WARNING: {what} was measured on a busy machine: " + "; ".join(load["reasons"])
            + (f". Busiest other processes (share of a core): {others}" if others else "")
            + f". Timings are slower and noisier than on a quiet machine; re-run when it is idle. Rule: {BUSY_RULE}.")


def machine_warnings(states: dict[str, dict[str, Any]] | None) -> list[str]:
    """The `machine_warning` of each busy state in `{label: machine_load(...)}` (e.g. a Benchmark's
    `machine_states`, by metric); [] when none was busy.

    >>> machine_warnings({"latency": {"busy": False}})
    []
    """
    return [w for label, s in (states or {}).items() if (w := machine_warning(s, f"'{label}'"))]

# %%
def test_unit_machine_state():
    import signal
    import subprocess
    # another program's hog: started through a shell that exits at once, so it is not our child (children count as ours)
    hog = int(subprocess.run(["/bin/sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    try:
        before, deadline = machine_state(), time.monotonic() + 30
        while True:  # the window the hog runs in; a measurement would run here
            time.sleep(0.5)
            # top=1000: every process that ran is listed. On a machine already busy the hog may get under
            # NOTABLE_SHARE of a core, or wait for one at first: widen the window until it has run, not fail.
            load = machine_load(before, machine_state(), top=1000)
            if any(p["pid"] == hog for p in load["busiest"]) or time.monotonic() > deadline:
                break
    finally:
        os.kill(hog, signal.SIGKILL)
    if before["cpu_ticks"] is None:
        assert load["steal_share"] is None and "cpu_ticks" in load["unavailable"], load
        return
    assert load["busy"] and any(p["pid"] == hog for p in load["busiest"]), load
    assert str(hog) in machine_warning(load), machine_warning(load)


if __name__ == "__main__":
    test_unit_machine_state()

# %% [markdown]
# ## Putting it together
#
# `test_module()` runs this notebook's job end to end on this machine: three models, one of
# them broken, go through the adapter and the timing core in interleaved rounds with one
# thread; the two that work are summarised by their medians and the medians' intervals, and
# every condition the result needs is recorded with it.

# %%
def test_module():
    threads_before, gc_before = torch.get_num_threads(), gc.isenabled()
    one = torch.nn.Sequential(torch.nn.Linear(160, 160, bias=False)).train()
    four = torch.nn.Sequential(*[torch.nn.Linear(160, 160, bias=False) for _ in range(4)])
    broken = torch.nn.Linear(100, 10)  # expects 100 features, gets 160
    out = time_interleaved({"one": one, "broken": broken, "four": four}, (32, 160),
                           samples=12, rounds=3, warmup=2, threads=1)
    assert isinstance(out["broken"], RuntimeError), f"the broken model is reported with its error, got {out['broken']!r}"
    medians = {}
    for name in ("one", "four"):
        ms, meta = out[name]
        assert len(ms) == 12 and meta["rounds"] == 3 and meta["interleaved"], (name, len(ms), meta)
        assert meta["torch_threads"] == 1 and meta["warmup_calls"] == 3 * 2 and meta["gc_disabled"], meta
        # calibrated to 2x the 0.1% budget; a block calibrated while the machine was busy can run faster
        # later (its share then exceeds 0.1%): bounded here, measured in benchmarks/measurement_quality.py
        assert meta["timer_overhead_fraction"] < 0.02, f"{name}: the clock's share of a block {meta}"
        assert meta["runtime"] == "eager" and meta["device"] == "cpu", meta
        medians[name] = statistics.median(ms)
        lo, hi = median_ci(ms)
        assert lo <= medians[name] <= hi, f"{name}: the median {medians[name]} must lie in its interval {(lo, hi)}"
    ratio = medians["four"] / medians["one"]
    assert 2.0 < ratio < 8.0, f"four layers should take about 4x one layer, measured {ratio:.2f}x"
    assert one.training, "timing must leave a model in the mode it was in"
    assert torch.get_num_threads() == threads_before and gc.isenabled() == gc_before, "timing must restore the conditions"
    info = system_info()
    assert info["torch_threads"] == threads_before and info["logical_cores"] >= 1, info


if __name__ == "__main__":
    test_module()
    print("Module 15 timing: all tests passed")
