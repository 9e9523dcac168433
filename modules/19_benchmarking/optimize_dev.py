# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19, the optimisations under test: int8, pruning, half precision
#
# Benchmarks exist to judge optimisations. Modules 16–18 built them by hand; here we wrap the
# production versions that PyTorch ships, so that the benchmarks, TinyMLPerf and the Olympics
# compare real models with real kernels:
#
# | technique | library path | what shrinks | what it costs |
# |---|---|---|---|
# | int8 dynamic quantization | `torch.ao.quantization.quantize_dynamic` | Linear weights 4× | activations quantized on the fly at each call |
# | int8 static quantization | `torch.ao.quantization.quantize_fx` (`prepare_fx` → calibrate → `convert_fx`) | weights and activations 4× | needs calibration data |
# | magnitude pruning | `torch.nn.utils.prune` | nothing, stored dense (zeros compress well) | accuracy, if too aggressive |
# | fp16 / bf16 casting | `nn.Module.to(dtype)` | every float tensor 2× | precision; CPU kernels may be slower |
# | ONNX export | `torch.onnx.export`, checked by `onnx.checker` | nothing: the same float graph, for another runtime | operators the exporter does not know |
# | int8 for ONNX Runtime | `onnxruntime.quantization.quantize_static` (QDQ) | weights and activations 4× | needs calibration data |
#
# Every helper returns a **new** model and leaves its argument untouched, so a benchmark can
# hold the baseline and its optimised versions side by side.
#
# ```
# baseline ──deepcopy──> quantize_int8 ──> int8 model   (baseline unchanged)
#          ──deepcopy──> prune_magnitude ─> sparse model
#          ──deepcopy──> cast_precision ──> fp16 model
# ```
#
# A note on the quantization path: in torch 2.13 `torch.ao.quantization` still runs real x86
# int8 kernels (fbgemm/x86/onednn) but warns that it is deprecated in favour of torchao's PT2E
# flow. All quantization in TinyTorch goes through the single function `quantize_int8`, which
# silences exactly that deprecation notice and records in `model.tinytorch_quantization` which
# path produced the model, so the implementation can move without touching any caller.

# %%
#| default_exp benchmarking.optimize

# %%
#| export
from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

import torch
from torch import nn
from torch.nn.utils import prune

from tinytorch.benchmarking.results import serialized_bytes, write_atomic
from tinytorch.profiling.timing import RUNTIMES, ModelAdapter, adapt, onnx_session

# %% [markdown]
# ## How big is a model, really?
#
# After quantization a model's weights are no longer `nn.Parameter`s (they live in packed int8
# buffers), so `sum(p.numel() for p in model.parameters())` says *zero*. The size that matters
# for deployment is what you ship: the bytes of the serialized `state_dict`. We measure exactly
# that, with `torch.save` into memory. It includes a small fixed overhead per tensor (names,
# pickle framing, and for int8 the scales and zero points), so on a tiny model the ratio to
# float32 is below the ideal 4×; on a model with larger layers it approaches it.

# %%
#| export
def state_dict_bytes(model: nn.Module) -> int:
    """Bytes of `model.state_dict()` serialized with `torch.save`: the size of the model on disk.

    Works for float, half and quantized models alike (packed int8 weights included).

    >>> state_dict_bytes(nn.Linear(256, 256)) > 256 * 256 * 4
    True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, torch.jit.ScriptModule):  # its state_dict, not the whole TorchScript archive
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        return len(buf.getvalue())
    return serialized_bytes(model)[0]  # the one definition of "bytes on disk" (results.serialized_bytes)

# %% [markdown]
# ## int8 quantization
#
# Quantization maps each float to an 8-bit integer with a scale and zero point:
# `q = round(x / scale) + zero_point`. Weights are known in advance, so their scales are
# computed once. Activations are not: **dynamic** quantization measures each activation's
# range at run time (cheap to set up, used for Linear/LSTM-heavy models), while **static**
# quantization measures the ranges once on a few *calibration* batches and bakes them into
# the model, so a conv net runs end to end in int8.
#
# Static quantization here uses the FX graph mode of `torch.ao.quantization`: the model is
# traced, conv + ReLU pairs are fused into one int8 kernel (wherever the graph has them, even
# when one `nn.ReLU` module is reused), observers are inserted (`prepare_fx`), calibration
# batches run through it, and `convert_fx` swaps in the int8 modules with quantize/dequantize
# at the model's boundary (the role `QuantStub`/`DeQuantStub` play in eager mode). A model the
# tracer cannot follow falls back to eager mode: the model is wrapped between a `QuantStub` and
# a `DeQuantStub`, prepared, calibrated and converted, and the path is recorded as such.

# %%
#| export
INT8_MODES = ("dynamic", "static")
INT8_BACKENDS_ONNX = ("onnxruntime",)


@contextlib.contextmanager
def _quiet_ao_deprecation() -> Iterator[None]:
    # Only the deprecation notices of torch.ao.quantization (and its quantized-tensor factories)
    # are silenced; every other warning still reaches the user.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor, torch\.quantize_per_channel")
        warnings.filterwarnings("ignore", message=r"Please use quant_min and quant_max to specify the range for observers")
        yield


def _default_backend() -> str:
    engines = torch.backends.quantized.supported_engines
    for name in ("x86", "fbgemm", "qnnpack"):
        if name in engines:
            return name
    raise RuntimeError(f"no int8 backend available in this torch build (supported engines: {engines})")


def _calibration_batches(calibration_data: Any) -> list[torch.Tensor]:
    if calibration_data is None:
        raise ValueError("calibration_data: static quantization needs calibration inputs "
                         "(a tensor of samples, a list of batches, or a DataLoader), got None")
    if isinstance(calibration_data, torch.Tensor):
        return [calibration_data]
    batches = []
    for item in calibration_data:
        x = item[0] if isinstance(item, (tuple, list)) else item
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"calibration_data: expected tensors (or (input, label) pairs), got {type(x).__name__}")
        batches.append(x)
    if not batches:
        raise ValueError("calibration_data: expected at least one batch, got an empty iterable")
    return batches


class _QuantWrapped(nn.Module):
    "Eager-mode static quantization: quantize at the input, dequantize at the output."

    def __init__(self, model: nn.Module):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.model = model
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dequant(self.model(self.quant(x)))


def _static_fx(model: nn.Module, batches: list[torch.Tensor], backend: str) -> nn.Module:
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    prepared = prepare_fx(model, get_default_qconfig_mapping(backend), (batches[0][:1],))
    with torch.inference_mode():
        for x in batches:
            prepared(x)
    return convert_fx(prepared)


def _static_eager(model: nn.Module, batches: list[torch.Tensor], backend: str) -> nn.Module:
    from torch.ao.quantization import convert, get_default_qconfig, prepare

    wrapped = _QuantWrapped(model).eval()
    wrapped.qconfig = get_default_qconfig(backend)
    prepared = prepare(wrapped)
    with torch.inference_mode():
        for x in batches:
            prepared(x)
    return convert(prepared)


def _describe_calibration(batches: list[torch.Tensor], calibration_name: str | None) -> str:
    n = sum(len(b) for b in batches)
    what = calibration_name or "caller-supplied calibration_data"
    return f"{what}: {n} samples in {len(batches)} batches"


def quantize_int8(model: nn.Module, mode: str = "dynamic", calibration_data: Any = None,
                  backend: str | None = None, *, calibration_name: str | None = None) -> Any:
    """A new int8-quantized copy of `model` (the original is untouched), for CPU inference.

    - `mode="dynamic"`: `torch.ao.quantization.quantize_dynamic` on every `nn.Linear`
      (weights int8, activations quantized per call).
    - `mode="static"`: post-training static quantization with calibration: FX graph mode
      (`prepare_fx`, calibration on `calibration_data`, `convert_fx`; conv+ReLU fused), or
      eager mode with QuantStub/DeQuantStub when the model cannot be traced.
    - `backend`: the int8 kernel library ("x86", "fbgemm", "qnnpack"); defaults to the best
      one this torch build supports. It is also made the active engine.
    - `backend="onnxruntime"` (static only): the model goes to ONNX (`to_onnx`) and
      `onnxruntime.quantization.quantize_static` makes a QDQ int8 graph from it, calibrated on
      `calibration_data`; the result is an `onnxruntime.InferenceSession` (`adapt` takes it).
    - `calibration_name` says which data calibrated (e.g. "digits train split"); use a split
      other than the one you evaluate on, or the test set leaks into the model.

    The result carries `tinytorch_quantization = {"path", "mode", "backend"}` naming the library
    function that produced it, plus "calibration" (which data, how many samples) when static.

    >>> q = quantize_int8(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
    >>> q.tinytorch_quantization["path"]
    'torch.ao.quantization.quantize_dynamic'
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if mode not in INT8_MODES:
        raise ValueError(f"mode: expected one of {INT8_MODES}, got {mode!r}")
    if backend in INT8_BACKENDS_ONNX:
        if mode != "static":
            raise ValueError(f"mode: backend {backend!r} quantizes statically here; expected mode='static', got {mode!r}")
        return _quantize_onnxruntime(model, _calibration_batches(calibration_data), calibration_name)
    engines = list(torch.backends.quantized.supported_engines)
    backend = backend or _default_backend()
    if backend not in engines or backend == "none":
        raise ValueError(f"backend: expected one of {[e for e in engines if e != 'none']}, got {backend!r}")
    torch.backends.quantized.engine = backend
    work = copy.deepcopy(model).cpu().float().eval()
    calibration = None
    with _quiet_ao_deprecation():
        if mode == "dynamic":
            from torch.ao.quantization import quantize_dynamic
            result = quantize_dynamic(work, {nn.Linear}, dtype=torch.qint8)
            path = "torch.ao.quantization.quantize_dynamic"
        else:
            batches = _calibration_batches(calibration_data)
            calibration = _describe_calibration(batches, calibration_name)
            try:
                result = _static_fx(work, batches, backend)
                path = "torch.ao.quantization.quantize_fx.prepare_fx+convert_fx"
            except torch.fx.proxy.TraceError:
                result = _static_eager(copy.deepcopy(model).cpu().float(), batches, backend)
                path = "torch.ao.quantization.prepare+convert (eager, QuantStub/DeQuantStub)"
    result.eval()
    result.tinytorch_quantization = {"path": path, "mode": mode, "backend": backend}
    if calibration is not None:  # static: which data set the activation ranges
        result.tinytorch_quantization["calibration"] = calibration
    return result

# %%
if __name__ == "__main__":
    from tinytorch.benchmarking.digits import accuracy_on, default_digits_model, load_digits_split

    _base = default_digits_model()
    _X, _y = load_digits_split("test")
    _Xtr, _ = load_digits_split("train")
    _q = quantize_int8(_base, "static", calibration_data=_Xtr[:256].split(64))
    print(f"digits CNN: {state_dict_bytes(_base)} B float32 -> {state_dict_bytes(_q)} B int8 "
          f"({state_dict_bytes(_base) / state_dict_bytes(_q):.2f}x smaller); accuracy "
          f"{accuracy_on(_base, _X, _y):.2%} -> {accuracy_on(_q, _X, _y):.2%} on 450 real test images")

# %%
def test_unit_quantize_int8():
    torch.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).eval()
    before = {k: v.clone() for k, v in mlp.state_dict().items()}
    q = quantize_int8(mlp, "dynamic")
    assert q is not mlp
    for k, v in mlp.state_dict().items():
        assert torch.equal(v, before[k]), "quantize_int8 must not modify the original model"
    ratio = state_dict_bytes(mlp) / state_dict_bytes(q)
    assert 3.3 < ratio <= 4.2, f"int8 weights should make a 256x256 MLP ~4x smaller on disk, got {ratio:.2f}x"
    x = torch.randn(32, 256)
    with torch.inference_mode():
        err = (q(x) - mlp(x)).abs().max() / mlp(x).abs().max()
    assert err < 0.05, f"int8 outputs should stay within a few % of float, got relative error {err:.3f}"
    assert q.tinytorch_quantization["mode"] == "dynamic"
    for bad in ({"mode": "int4"}, {"mode": "static"}):
        try:
            quantize_int8(mlp, **bad)
            raise AssertionError(f"{bad} must raise")
        except ValueError as e:
            assert ("mode" in str(e)) or ("calibration_data" in str(e))


if __name__ == "__main__":
    test_unit_quantize_int8()

# %% [markdown]
# ## Other runtimes: ONNX and ONNX Runtime, torch.compile
#
# A model is rarely shipped as an eager PyTorch module. The usual routes:
#
# - **ONNX Runtime.** `torch.onnx.export` writes the graph to an `.onnx` file (checked here by
#   `onnx.checker`), and ONNX Runtime runs it with its own kernels and graph optimisations.
#   We use the exporter's TorchScript-based path (`dynamo=False`): the `torch.export` path that
#   torch 2.9+ prefers needs the extra `onnxscript` package. Like `torch.ao`, that path warns it is
#   deprecated; it lives in `to_onnx` only, which records what produced the file.
# - **int8 for ONNX Runtime.** `onnxruntime.quantization.quantize_static` inserts
#   QuantizeLinear/DequantizeLinear pairs (QDQ) around each convolution and matmul, with int8
#   weights (per channel) and uint8 activations whose ranges come from calibration batches fed
#   through a `CalibrationDataReader`. `quantize_int8(model, "static", data, backend="onnxruntime")`
#   does it, so all int8 still goes through one function.
# - **torch.compile.** TorchDynamo captures the graph and a backend (default: inductor) generates
#   fused kernels for it, at the first call with each new input shape. That compile is paid once,
#   not per inference: the adapter measures it apart (`compile_seconds`).
#
# `to_runtime(model, runtime, example_input)` gives the adapter for a module under "eager",
# "compile" or "onnxruntime", on a device. Calibration must come from data other than the
# evaluation set: here the digits *train* split, never the test split we report accuracy on.
#
# ```
# nn.Module ──torch.onnx.export──> model.onnx ──onnx.checker──> InferenceSession ──adapt──> "onnxruntime"
#          └─quantize_static(calibration reader over the train split)──> model_int8.onnx ──> "onnxruntime"
#          └─torch.compile──> OptimizedModule ──adapt──> "compiled" (compile time apart)
# ```

# %%
#| export
ONNX_OPSET = 17
_ONNX_EXPORTER = f"torch.onnx.export (TorchScript-based exporter, dynamo=False, opset {ONNX_OPSET})"


def _onnx_dir() -> Path:
    return Path(os.environ.get("TINYTORCH_CACHE", Path.home() / ".cache" / "tinytorch")) / "onnx"


def _first_tensor(example_input: Any) -> torch.Tensor:
    if isinstance(example_input, torch.Tensor):
        return example_input
    if isinstance(example_input, (tuple, list)) and example_input and isinstance(example_input[0], torch.Tensor):
        return example_input[0]
    raise TypeError(f"example_input: expected a tensor (one batch of model input), got {type(example_input).__name__}")


def _is_quantized(model: nn.Module) -> bool:
    return getattr(model, "tinytorch_quantization", None) is not None or any(
        ".quantized" in type(m).__module__ for m in model.modules())


def _store_onnx(proto: Any, stem: str, path: str | Path | None) -> Path:
    "Write an ONNX model atomically: to `path`, or to the cache under a name keyed by its bytes."
    data = proto.SerializeToString()
    if path is None:
        target = _onnx_dir() / f"{stem}_{hashlib.sha256(data).hexdigest()[:12]}.onnx"
        if target.is_file() and target.stat().st_size == len(data):
            return target
    else:
        target = Path(path)
    return write_atomic(target, data)


def to_onnx(model: nn.Module, example_input: Any, path: str | Path | None = None, *,
            dynamic_batch: bool = True) -> Path:
    """Export `model` to an ONNX file with `torch.onnx.export`, check it with `onnx.checker`; return its path.

    `example_input` is one input batch (its shape and dtype define the graph's input; the batch
    dimension stays dynamic unless `dynamic_batch=False`). Without `path` the file goes to
    `$TINYTORCH_CACHE/onnx/` under a name keyed by its content. The file's metadata records
    the exporter (`tinytorch_export`). A torch.ao int8 model is refused: quantize the float model
    for ONNX Runtime with `quantize_int8(model, "static", data, backend="onnxruntime")`.

    >>> p = to_onnx(nn.Linear(4, 2), torch.zeros(1, 4))
    >>> p.suffix
    '.onnx'
    """
    import onnx

    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if _is_quantized(model):
        raise ValueError("model: a torch.ao int8 model does not export to ONNX here; export the float model and "
                         "quantize it with quantize_int8(model, 'static', calibration_data, backend='onnxruntime')")
    x = _first_tensor(example_input)
    work = copy.deepcopy(model).cpu().eval()
    buf = io.BytesIO()
    axes = {"input": {0: "batch"}, "output": {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings():
        # the exporter announces its own deprecation in favour of the torch.export path (see above)
        warnings.filterwarnings("ignore", message=r"You are using the legacy TorchScript-based ONNX export")
        warnings.filterwarnings("ignore", message=r"The feature will be removed", category=DeprecationWarning)
        with torch.no_grad():
            torch.onnx.export(work, (x.detach().cpu(),), buf, dynamo=False, input_names=["input"],
                              output_names=["output"], dynamic_axes=axes, opset_version=ONNX_OPSET)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    onnx.helper.set_model_props(proto, {"tinytorch_export": f"{_ONNX_EXPORTER}; onnx.checker.check_model(full_check=True) passed"})
    stem = getattr(model, "name", None) if isinstance(getattr(model, "name", None), str) else type(model).__name__
    return _store_onnx(proto, stem, path)


def _quantize_onnxruntime(model: Any, batches: list[torch.Tensor], calibration_name: str | None) -> Any:
    "ONNX Runtime static int8 (QDQ) of a float module or .onnx file; returns an InferenceSession."
    import tempfile

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    src = Path(model) if isinstance(model, (str, os.PathLike)) else to_onnx(model, batches[0][:1])
    input_name = onnx.load(str(src)).graph.input[0].name

    class _Reader(CalibrationDataReader):
        "Feeds the calibration batches to ONNX Runtime's calibrator, one per `get_next()`."

        def __init__(self) -> None:
            self._it = iter([{input_name: b.detach().cpu().float().numpy()} for b in batches])

        def get_next(self) -> dict[str, Any] | None:
            return next(self._it, None)

    calibration = _describe_calibration(batches, calibration_name)
    path = ("onnxruntime.quantization.quant_pre_process + quantize_static "
            "(QDQ, per-channel int8 weights, uint8 activations, MinMax calibration)")
    with tempfile.TemporaryDirectory() as tmp:
        pre, out = Path(tmp) / "pre.onnx", Path(tmp) / "int8.onnx"
        quant_pre_process(str(src), str(pre))  # shape inference + graph clean-up, as ORT recommends
        quantize_static(str(pre), str(out), _Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        proto = onnx.load(str(out))
    onnx.checker.check_model(proto)
    onnx.helper.set_model_props(proto, {"tinytorch_export": f"{path}; calibrated on {calibration}"})
    target = _store_onnx(proto, f"{src.stem}_int8", None)
    session = onnx_session(target)
    session.tinytorch_quantization = {"path": f"onnxruntime.quantization.quantize_static ({path})",
                                      "mode": "static", "backend": "onnxruntime", "calibration": calibration}
    return session


class RuntimeUnavailableError(RuntimeError):
    "A model cannot run under the requested runtime or device; the message is the reason."


def to_runtime(model: Any, runtime: str, example_input: Any = None, *, device: str | torch.device = "cpu",
               threads: int | None = None, compile_options: dict[str, Any] | None = None,
               name: str | None = None) -> ModelAdapter:
    """The adapter for `model` under `runtime`: "eager", "compile" (`torch.compile`) or "onnxruntime".

    - eager: the module itself, moved to `device`.
    - compile: `torch.compile(module, **compile_options)` on `device` (compiles at its first call).
    - onnxruntime: `to_onnx(model, example_input)` then an `InferenceSession` (CUDA execution
      provider on a GPU, where the installed onnxruntime has it) with `threads` intra-op threads.
      An `InferenceSession` or `.onnx` path is used as it is.

    Raises `RuntimeUnavailableError` with the reason where the combination cannot run (a torch.ao
    int8 model on CUDA or under ONNX Runtime; ONNX Runtime without a CUDA provider on a GPU).

    >>> to_runtime(nn.Linear(4, 2), "onnxruntime", torch.zeros(1, 4)).kind
    'onnxruntime'
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime: expected one of {RUNTIMES}, got {runtime!r}")
    dev = torch.device(device)
    if isinstance(model, nn.Module) and _is_quantized(model):
        if dev.type != "cpu":
            raise RuntimeUnavailableError("unavailable: CPU only (torch.ao int8 kernels run on the CPU)")
        if runtime == "onnxruntime":
            raise RuntimeUnavailableError("unavailable: a torch.ao int8 model does not export to ONNX; ONNX Runtime "
                                          "int8 comes from quantize_int8(float_model, 'static', data, backend='onnxruntime')")
    if runtime == "eager":
        return adapt(model, name, device=dev)
    if runtime == "compile":
        if not isinstance(model, nn.Module):
            raise TypeError(f"model: torch.compile needs a torch.nn.Module, got {type(model).__name__}")
        compiled = torch.compile(model.eval(), **(compile_options or {}))  # compiles lazily, at the first call
        return adapt(compiled, name or _model_name(model), device=dev)  # moves the module it wraps
    if isinstance(model, nn.Module):
        if example_input is None:
            raise ValueError("example_input: exporting to ONNX needs one input batch, e.g. torch.zeros(1, 1, 8, 8)")
        model = to_onnx(model, example_input)
    if isinstance(model, (str, os.PathLike)):
        try:
            model = onnx_session(model, dev, threads)
        except RuntimeError as e:
            if str(e).startswith("unavailable"):
                raise RuntimeUnavailableError(str(e)) from e
            raise
    a = adapt(model, name)
    if a.device.type != dev.type:
        raise RuntimeUnavailableError(f"unavailable: the ONNX Runtime session runs on {a.device}, not {dev}")
    return a


def _model_name(model: Any) -> str:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__

# %%
def test_unit_onnx_runtime():
    import numpy as np
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 10)).eval()
    x = torch.randn(16, 1, 8, 8)
    path = to_onnx(net, x[:1])
    assert path.suffix == ".onnx" and to_onnx(net, x[:1]) == path, "the same model exports to the same cached file"
    o = to_runtime(path, "onnxruntime")
    with torch.inference_mode():
        assert np.allclose(o.forward(o.to_input(x)), net(x).numpy(), rtol=1e-5, atol=1e-5), \
            "ONNX Runtime must compute what eager PyTorch computes (any batch size: the batch axis is dynamic)"
    assert "tinytorch_export" in o.model.get_modelmeta().custom_metadata_map
    q = quantize_int8(net, "static", calibration_data=[torch.randn(8, 1, 8, 8) for _ in range(4)],
                      backend="onnxruntime", calibration_name="random calibration batches")
    assert q.tinytorch_quantization["backend"] == "onnxruntime" and "32 samples" in q.tinytorch_quantization["calibration"]
    qa = adapt(q)
    err = np.abs(qa.forward(qa.to_input(x)) - net(x).detach().numpy()).max() / np.abs(net(x).detach().numpy()).max()
    assert err < 0.1, f"int8 outputs should stay near float, relative error {err:.3f}"
    assert any(n.op_type == "QuantizeLinear" for n in __import__("onnx").load(q._model_path).graph.node)
    for bad, arg in ((lambda: to_runtime(net, "tflite"), "runtime"), (lambda: to_runtime(net, "onnxruntime"), "example_input"),
                     (lambda: to_onnx(quantize_int8(nn.Sequential(nn.Linear(4, 4))), torch.zeros(1, 4)), "model")):
        try:
            bad()
            raise AssertionError(f"{arg} should be rejected")
        except ValueError as e:
            assert arg in str(e), e
    try:
        to_runtime(quantize_int8(nn.Sequential(nn.Linear(4, 4))), "onnxruntime", torch.zeros(1, 4))
        raise AssertionError("a torch.ao int8 model has no ONNX Runtime version")
    except RuntimeUnavailableError as e:
        assert str(e).startswith("unavailable")


if __name__ == "__main__":
    test_unit_onnx_runtime()

# %% [markdown]
# ## Magnitude pruning
#
# Pruning sets the smallest-magnitude weights to zero. **Global** pruning ranks all weights of
# all layers together (layers with many small weights lose more of them); **per-layer**
# pruning removes the same fraction from each layer. `torch.nn.utils.prune` applies a mask
# through a forward hook; `prune.remove` makes it permanent (the zeros are written into the
# weight and the hook is gone), so the result is an ordinary model.
#
# The zeros do not shrink a dense `state_dict` and do not speed up dense kernels; they pay off
# with sparse storage, compression, or sparse kernels. That is why we *measure* sparsity rather
# than trust the requested amount.
#
# **Your task.** Complete `sparsity(model)`: the fraction of weights that are exactly zero,
# over the `weight` tensors of every `nn.Linear` and `nn.Conv*` layer (biases are not pruned,
# so they are not counted).
#
# - *Approach:* walk `model.modules()`, keep the Linear/Conv layers, count `weight == 0` and
#   `weight.numel()`, and divide the totals (not the average of per-layer fractions).
# - *Example:* a Linear(4, 2) whose weight has 2 zeros out of 8 has sparsity 0.25.
# - *Hints:* `isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d))`,
#   `int((w == 0).sum())`; a model with no such layer should raise a `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "optimize-sparsity", "solution": true, "schema_version": 3}
#| export
_PRUNABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def sparsity(model: nn.Module) -> float:
    """Fraction of exactly-zero entries over the weights of all Linear and Conv layers.

    >>> lin = nn.Linear(4, 2)
    >>> with torch.no_grad(): _ = lin.weight.zero_()
    >>> sparsity(lin)
    1.0
    """
    ### BEGIN SOLUTION
    zeros = total = 0
    for m in model.modules():
        if isinstance(m, _PRUNABLE):
            w = m.weight.detach()
            zeros += int((w == 0).sum())
            total += w.numel()
    if total == 0:
        raise ValueError("model: expected at least one nn.Linear or nn.Conv layer to measure sparsity over")
    return zeros / total
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-optimize-sparsity", "locked": true, "points": 2, "schema_version": 3}
def test_unit_sparsity():
    lin = nn.Linear(4, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.0, 5.0, 6.0, 7.0]]))
        lin.bias.zero_()
    assert abs(sparsity(lin) - 0.25) < 1e-12, f"2 zero weights out of 8 is sparsity 0.25, got {sparsity(lin)}"
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2, 2))  # 18 + 4 weights
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.zero_()
        net[2].weight.zero_()
    expected = 4 / 22
    assert abs(sparsity(net) - expected) < 1e-12, (
        f"sparsity is zeros / total over all weights together: expected {expected:.4f}, got {sparsity(net):.4f} "
        "(biases are not counted)")
    try:
        sparsity(nn.ReLU())
        raise AssertionError("a model without Linear/Conv layers should raise ValueError")
    except ValueError as e:
        assert "model" in str(e), f"the error should name the argument 'model', got: {e}"


if __name__ == "__main__":
    test_unit_sparsity()

# %%
#| export
PRUNE_SCOPES = ("global", "layer")


def prune_magnitude(model: nn.Module, amount: float, scope: str = "global") -> nn.Module:
    """A new copy of `model` with the smallest-|w| fraction `amount` of Linear/Conv weights set to 0.

    `scope="global"` ranks all those weights together (`prune.global_unstructured`);
    `scope="layer"` prunes each layer by `amount` (`prune.l1_unstructured`). Masks are made
    permanent with `prune.remove`. The original model is untouched.

    >>> p = prune_magnitude(nn.Linear(100, 10), 0.5)
    >>> round(sparsity(p), 2)
    0.5
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0.0 <= float(amount) < 1.0:
        raise ValueError(f"amount: expected a fraction in [0, 1), got {amount!r}")
    if scope not in PRUNE_SCOPES:
        raise ValueError(f"scope: expected one of {PRUNE_SCOPES}, got {scope!r}")
    pruned = copy.deepcopy(model)
    targets = [(m, "weight") for m in pruned.modules() if isinstance(m, _PRUNABLE)]
    if not targets:
        raise ValueError("model: expected at least one nn.Linear or nn.Conv layer to prune")
    if scope == "global":
        prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=float(amount))
    else:
        for m, name in targets:
            prune.l1_unstructured(m, name=name, amount=float(amount))
    for m, name in targets:
        prune.remove(m, name)
    return pruned

# %%
def test_unit_prune_magnitude():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    before = sparsity(net)
    for scope in PRUNE_SCOPES:
        p = prune_magnitude(net, 0.6, scope=scope)
        assert abs(sparsity(p) - 0.6) < 0.01, f"{scope} pruning by 0.6 should give sparsity ~0.6, got {sparsity(p):.3f}"
        assert not list(p.named_buffers()), "prune.remove must leave no masks behind"
        assert not hasattr(p[0], "weight_orig")
    assert sparsity(net) == before, "prune_magnitude must not modify the original model"
    layer = prune_magnitude(net, 0.5, scope="layer")
    for m in (layer[0], layer[2]):
        frac = float((m.weight == 0).float().mean())
        assert abs(frac - 0.5) < 0.01, f"per-layer pruning removes 50% in each layer, got {frac:.3f}"
    # global pruning keeps the largest weights wherever they are
    kept = prune_magnitude(net, 0.5)
    all_w = torch.cat([net[0].weight.flatten(), net[2].weight.flatten()]).abs()
    threshold = all_w.kthvalue(int(0.5 * all_w.numel())).values
    with torch.no_grad():
        assert float(kept[0].weight[net[0].weight.abs() > threshold].abs().min()) > 0, "large weights must survive"


if __name__ == "__main__":
    test_unit_prune_magnitude()

# %% [markdown]
# ## Half precision
#
# fp16 and bf16 store each float in 2 bytes instead of 4: parameters and activations take half
# the memory. fp16 keeps more mantissa bits (precision), bf16 keeps float32's exponent
# (range). Whether they are *faster* depends on the hardware: GPUs and recent CPUs with
# AVX512-FP16/AMX have native kernels, older CPUs convert back and forth. The benchmark, not
# the datasheet, decides. Inputs must be cast to the same dtype; the benchmarking adapter does
# that from the model's parameter dtype.

# %%
#| export
PRECISIONS = ("fp32", "fp16", "bf16", "int8")
_FLOAT_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def cast_precision(model: nn.Module, precision: str) -> nn.Module:
    """A new copy of `model` with its floating parameters and buffers in `precision`.

    `precision` is "fp32", "fp16" or "bf16"; for "int8" use `quantize_int8`, which needs a mode.

    >>> cast_precision(nn.Linear(8, 2), "fp16").weight.dtype
    torch.float16
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if precision == "int8":
        raise ValueError("precision: 'int8' needs a quantization mode; call quantize_int8(model, mode=...) instead")
    if precision not in _FLOAT_DTYPES:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    return copy.deepcopy(model).to(_FLOAT_DTYPES[precision])

# %%
def test_unit_cast_precision():
    net = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    half = cast_precision(net, "fp16")
    p32 = sum(p.numel() * p.element_size() for p in net.parameters())
    p16 = sum(p.numel() * p.element_size() for p in half.parameters())
    assert p16 * 2 == p32, f"fp16 halves parameter bytes: {p32} -> {p16}"
    assert next(net.parameters()).dtype == torch.float32, "the original must stay float32"
    assert next(cast_precision(net, "bf16").parameters()).dtype == torch.bfloat16
    try:
        cast_precision(net, "fp8")
        raise AssertionError("an unknown precision must raise")
    except ValueError as e:
        assert "fp16" in str(e) and "bf16" in str(e), "the error should list the valid precisions"


if __name__ == "__main__":
    test_unit_cast_precision()

# %% [markdown]
# ## All together on the digits CNN
#
# The static int8 version of the trained digits CNN, then pruned: the on-disk size and the
# accuracy on the 450 real test images, measured.

# %%
def test_unit_static_int8_digits():
    from tinytorch.benchmarking.digits import accuracy_on, default_digits_model, load_digits_split

    base = default_digits_model()
    X, y = load_digits_split("test")
    Xtr, _ = load_digits_split("train")
    q = quantize_int8(base, "static", calibration_data=Xtr[:256].split(64))
    assert q.tinytorch_quantization["mode"] == "static"
    acc_b, acc_q = accuracy_on(base, X, y), accuracy_on(q, X, y)
    assert acc_q >= acc_b - 0.02, f"static int8 should lose at most 2 points on digits: {acc_b:.2%} -> {acc_q:.2%}"
    # the tiny CNN carries serialization overhead and per-channel scales: ~2x on disk, not 4x
    assert state_dict_bytes(q) < 0.6 * state_dict_bytes(base)
    assert any(".quantized" in type(m).__module__ for m in q.modules()), "static mode must swap in int8 modules"


if __name__ == "__main__":
    test_unit_static_int8_digits()
