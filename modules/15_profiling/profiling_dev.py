# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 15, part 2: The Profiler
#
# Before you can make a model smaller or faster for a device, you need to know where its
# parameters, its arithmetic, its memory and its time go. This notebook builds the `Profiler`
# that answers those four questions for any model, layer by layer, and that Module 19's
# benchmarks build on.
#
# | question | figure | why it matters on an edge device |
# |---|---|---|
# | will the weights fit? | parameters, parameter bytes | a Cortex-M7 part has 1-2 MB of flash and 320 KB-1 MB of SRAM (STM32F746, STM32H743) |
# | how much arithmetic? | MACs / FLOPs | sets the floor on latency and energy (≈ pJ per MAC) |
# | will a forward pass fit in RAM? | activation bytes, peak memory | activations live in SRAM while the layer runs |
# | how long does it take? | latency, per layer | the real budget (e.g. a 30 fps camera leaves 33 ms per frame) |
#
# Every figure here is **counted exactly** (parameters, MACs, output sizes) or **measured on
# this machine** (latency, peak memory), and each result says which, and how. A figure that
# cannot be had for a model (the parameters of a plain function) is an error that says so,
# never a made-up number.
#
# The profiler never reads a clock itself: latency goes through the timing core of part 1
# (`time_model`, `time_callable`), and every model goes through the same adapter (`adapt`).

# %%
#| default_exp profiling.profiler

# %%
#| export
from __future__ import annotations

import contextlib
import math
import os
import sys
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from tinytorch.profiling.timing import ModelAdapter, adapt, positive_int, time_callable, time_model

# %%
import os

import numpy as np


def grading_rng() -> np.random.Generator:
    "Hidden tests draw their inputs from this: the grading run's seed ($TITO_GRADING_SEED), 0 elsewhere."
    return np.random.default_rng(int(os.environ.get("TITO_GRADING_SEED", "0")))


def hidden_property(what: str, like: str | None = None) -> None:
    "Hidden tests: what the cases that follow check (and `like`, a visible case): all a student sees of a failed one."

# %% [markdown]
# ## Counting parameters
#
# A parameter is one learned number. Its cost in memory is its count times the bytes of its
# dtype: 4 for float32, 2 for float16/bfloat16, 1 for int8. Two subtleties make "sum the sizes
# of `model.parameters()`" the right answer only when done carefully:
#
# - **tied weights**: a language model often uses the same matrix for its input embedding and
#   its output layer. It is stored once, so it must be counted once. The adapter's
#   `named_parameter_arrays()` already lists each distinct parameter once.
# - **kinds of arrays**: torch tensors have `.numel()`, numpy arrays have `.size`; both have a
#   `.shape`, and the count is the product of the shape.
#
# ### Task 1: `parameter_count`
#
# **Your task (easy, 2 points).** Implement `parameter_count(arrays)`: the total number of
# scalars in a sequence of torch tensors or numpy arrays.
#
# - *TODO:* one number for the whole sequence, a Python `int`.
# - *Approach:* how many scalars an array holds follows from its shape alone, whatever kind of
#   array it is; the total is then a sum over the arrays.
# - *Example:* a `Linear(3, 2)` has a (2, 3) weight and a (2,) bias:
#   `parameter_count([torch.zeros(2, 3), torch.zeros(2)]) == 8`.
# - *Hints:* both kinds of array have `.shape`, but only one has `.numel()`. A 0-d array has
#   shape `()` and still holds one scalar: check what your product of an empty shape gives (the
#   `math` module has a product function). Do not deduplicate here: the adapter already did.

# %% nbgrader={"grade": false, "grade_id": "profiling-parameter-count", "solution": true, "schema_version": 3}
#| export
def parameter_count(arrays: Sequence[Any]) -> int:
    """Total number of scalars in a sequence of tensors or arrays (anything with `.shape`).

    >>> parameter_count([torch.zeros(2, 3), np.zeros(2)])
    8
    """
    ### BEGIN SOLUTION
    return int(sum(math.prod(tuple(a.shape)) for a in arrays))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-profiling-parameter-count", "locked": true, "points": 2, "schema_version": 3}
def test_unit_parameter_count():
    mlp = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    expected = sum(p.numel() for p in mlp.parameters())  # (7*5+5) + (5*3+3) = 58
    got = parameter_count(list(mlp.parameters()))
    assert got == expected == 58, f"expected 58 parameters for Linear(7,5)+Linear(5,3), got {got}"
    got_np = parameter_count([np.zeros((4, 4)), np.zeros(3)])
    assert got_np == 19, f"numpy arrays (4, 4) and (3,): expected 16 + 3 = 19 scalars, got {got_np}"
    got_0d = parameter_count([np.float32(1.0) * np.ones(())])
    assert got_0d == 1, (f"a 0-d array (shape ()) holds one scalar: expected 1, got {got_0d}"
                         + (" -- the product of an empty shape is 1, not 0" if got_0d == 0 else ""))
    assert parameter_count([]) == 0, f"no arrays: expected 0 scalars, got {parameter_count([])}"
    assert isinstance(got, int), f"expected a Python int, got {type(got).__name__}"
    ### BEGIN HIDDEN TESTS
    hidden_property("the parameter count and bytes of models mixing torch tensors and numpy arrays of other dtypes "
                    "and shapes (a 0-d array included)")
    rng = grading_rng()
    torch_dtypes, numpy_dtypes = (torch.float32, torch.float16, torch.float64, torch.int8), (np.float32, np.float64, np.int16, np.uint8)
    arrays, sizes = [], []
    for i in range(int(rng.integers(3, 8))):
        shape = tuple(int(d) for d in rng.integers(1, 7, size=0 if i == 0 else int(rng.integers(1, 5))))  # one 0-d array
        if rng.random() < 0.5:
            arrays.append(torch.zeros(shape, dtype=torch_dtypes[int(rng.integers(len(torch_dtypes)))]))
        else:
            arrays.append(np.zeros(shape, dtype=numpy_dtypes[int(rng.integers(len(numpy_dtypes)))]))
        sizes.append(int(np.prod(shape, dtype=np.int64)))
    sizes_in = int(rng.integers(2, 40))
    sizes_out = int(rng.integers(1, 20))
    layer = torch.nn.Linear(sizes_in, sizes_out, bias=bool(rng.random() < 0.5))
    for p in layer.parameters():
        arrays.append(p.detach())
        sizes.append(p.numel())
    again = int(rng.integers(1, len(arrays)))
    arrays.append(arrays[again])  # the same array twice in the list: the caller decides, it counts twice
    sizes.append(sizes[again])
    order = [int(i) for i in rng.permutation(len(arrays))]
    arrays, sizes = [arrays[i] for i in order], [sizes[i] for i in order]
    shapes = [tuple(a.shape) for a in arrays]
    got = parameter_count(arrays)
    expected = sum(sizes)
    assert isinstance(got, int) and got == expected, (
        f"arrays of shapes {shapes}: expected {expected} scalars (a Python int), got {got!r}"
        + (" -- the product of an empty shape is 1, not 0" if got == expected - 1 else "")
        + (" -- do not deduplicate: the list is counted as given" if got == expected - sizes[order.index(again)]
           and got != expected - 1 else ""))
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_parameter_count()

# %% [markdown]
# ## Counting arithmetic: MACs and FLOPs
#
# Almost all the arithmetic in a vision or language model is in **multiply-accumulates**
# (MACs): `acc += w * x`. Each output element of a linear or convolution layer is one dot
# product, so
#
# ```
# MACs(layer) = (number of output elements) × (length of the dot product behind each one)
# ```
#
# - **Linear** `y = x Wᵀ + b`: every output element is a dot product of length `in_features`.
# - **Convolution** with a weight of shape `(C_out, C_in / groups, kH, kW)`: every output element
#   is a dot product over `C_in / groups` channels of a `kH × kW` window, i.e. the product of
#   the weight's shape after its first dimension. Stride and padding change only the *number*
#   of output elements, which we read from the real output shape. A depthwise convolution
#   (`groups = C_in`) has a dot product of only `kH × kW`: that is why MobileNets are cheap.
#
# One MAC is two floating-point operations (a multiply and an add), so **FLOPs = 2 × MACs**.
# Elementwise operations (ReLU, bias add, residual add), pooling and normalisation also cost
# something, but far less, and conventions for them differ between tools, so the counts here
# leave them out, as `torch.utils.flop_counter` does.
#
# ```
#  Conv2d(16 → 32, 3×3) on an 8×8 map, padding 1        output 32 × 8 × 8 = 2048 elements
#     each output element: 16 channels × 3 × 3 = 144 MACs  ──>  2048 × 144 = 294,912 MACs
# ```
#
# ### Task 2: `linear_macs`
#
# **Your task (easy, 2 points).** Implement `linear_macs(in_features, output_shape)`: the MACs
# of a linear layer that produced an output of `output_shape` from inputs with `in_features`
# features.
#
# - *TODO:* return the count as a Python `int`.
# - *Approach:* use the formula above: how many output elements are there, and how long is the
#   dot product behind each one?
# - *Example:* `Linear(128, 10)` on a batch of 4 gives an output of (4, 10): 5,120 MACs.
# - *Hints:* the batch (and any sequence dimension) is already in `output_shape`; the weight's
#   shape is not needed.

# %% nbgrader={"grade": false, "grade_id": "profiling-linear-macs", "solution": true, "schema_version": 3}
#| export
def linear_macs(in_features: int, output_shape: Sequence[int]) -> int:
    """Multiply-accumulates of a linear layer: output elements × `in_features`.

    >>> linear_macs(128, (4, 10))
    5120
    """
    ### BEGIN SOLUTION
    return int(math.prod(tuple(output_shape)) * int(in_features))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-profiling-linear-macs", "locked": true, "points": 2, "schema_version": 3}
def test_unit_linear_macs():
    got = linear_macs(128, (4, 10))
    assert got == 5120, f"Linear(128, 10), batch 4: expected 4*10 outputs x 128 = 5120 MACs, got {got}"
    got = linear_macs(64, (2, 7, 32))
    assert got == 2 * 7 * 32 * 64, f"output (2, 7, 32), 64 features: expected {2 * 7 * 32 * 64} MACs (every output dimension counts), got {got}"
    # independent reference: torch's FLOP counter (FLOPs = 2 x MACs)
    layer, x = torch.nn.Linear(33, 17), torch.randn(5, 33)
    with FlopCounterMode(display=False) as fc:
        out = layer(x)
    got = linear_macs(33, tuple(out.shape))
    assert 2 * got == fc.get_total_flops(), f"expected {fc.get_total_flops() // 2} MACs, got {got}"
    ### BEGIN HIDDEN TESTS
    hidden_property("linear_macs for other feature counts and input shapes (a list or a tuple), as a plain int")
    rng = grading_rng()
    for _ in range(4):
        in_features = int(rng.integers(1, 2049))
        shape = tuple(int(d) for d in rng.integers(1, 40, size=int(rng.integers(1, 5))))
        arg = list(shape) if rng.random() < 0.3 else shape
        got = linear_macs(in_features, arg)
        expected = in_features * int(np.prod(shape, dtype=np.int64))
        assert isinstance(got, int) and got == expected, (
            f"in_features={in_features}, output_shape={arg}: expected {expected} MACs (a Python int), got {got!r}")
    i, o = int(rng.integers(1, 64)), int(rng.integers(1, 64))
    lead = tuple(int(d) for d in rng.integers(1, 6, size=int(rng.integers(1, 3))))
    layer, x = torch.nn.Linear(i, o, bias=bool(rng.random() < 0.5)), torch.randn(*lead, i)
    with FlopCounterMode(display=False) as fc:
        out = layer(x)
    got = linear_macs(i, tuple(out.shape))
    assert 2 * got == fc.get_total_flops(), (
        f"Linear({i}, {o}) on an input of shape {tuple(x.shape)}: expected {fc.get_total_flops() // 2} MACs "
        f"(torch's FLOP counter / 2), got {got}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_linear_macs()

# %% [markdown]
# ### Task 3: `conv_macs`
#
# **Your task (easy, 3 points).** Implement `conv_macs(weight_shape, output_shape)`: the MACs of
# a convolution (1-D, 2-D or 3-D) whose weight has `weight_shape` `(C_out, C_in / groups,
# *kernel)` and which produced an output of `output_shape` `(N, C_out, *spatial)`.
#
# - *TODO:* return the count as a Python `int`, for any number of spatial dimensions.
# - *Approach:* as for a linear layer, output elements times the length of one dot product;
#   here that length is what one output channel reads: which of the weight's dimensions
#   describe it, and which one does not?
# - *Example:* `Conv2d(16, 32, 3, padding=1)` on (1, 16, 8, 8): weight (32, 16, 3, 3), output
#   (1, 32, 8, 8), 294,912 MACs. Depthwise `Conv2d(16, 16, 3, groups=16)` has the weight
#   (16, 1, 3, 3), so each of its output elements costs only 9 MACs.
# - *Hints:* you do not need stride, padding or groups: they are already reflected in the
#   output shape and in the weight's second dimension. The test checks you against
#   `torch.utils.flop_counter` (FLOPs = 2 × MACs) on strided, grouped, depthwise and 1-D cases.

# %% nbgrader={"grade": false, "grade_id": "profiling-conv-macs", "solution": true, "schema_version": 3}
#| export
def conv_macs(weight_shape: Sequence[int], output_shape: Sequence[int]) -> int:
    """Multiply-accumulates of a convolution: output elements × prod(weight_shape[1:]).

    `weight_shape` is `(C_out, C_in // groups, *kernel)` (torch's layout), so grouped and
    depthwise convolutions are counted correctly.

    >>> conv_macs((32, 16, 3, 3), (1, 32, 8, 8))
    294912
    """
    ### BEGIN SOLUTION
    return int(math.prod(tuple(output_shape)) * math.prod(tuple(weight_shape)[1:]))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-profiling-conv-macs", "locked": true, "points": 3, "schema_version": 3}
def test_unit_conv_macs():
    got = conv_macs((32, 16, 3, 3), (1, 32, 8, 8))
    assert got == 294912, f"Conv2d(16, 32, 3, padding=1) on 8x8: expected 2048 outputs x 144 = 294912 MACs, got {got}"
    cases = {
        "strided+padded": torch.nn.Conv2d(3, 6, 5, stride=2, padding=2),
        "depthwise": torch.nn.Conv2d(12, 12, 3, groups=12, padding=1),
        "grouped": torch.nn.Conv2d(8, 16, 3, groups=4),
        "conv1d": torch.nn.Conv1d(4, 8, 7, stride=3),
    }
    for name, conv in cases.items():
        x = torch.randn(2, conv.in_channels, *([17] * (conv.weight.dim() - 2)))
        with FlopCounterMode(display=False) as fc:
            out = conv(x)
        got = conv_macs(tuple(conv.weight.shape), tuple(out.shape))
        assert 2 * got == fc.get_total_flops(), f"{name}: expected {fc.get_total_flops() // 2} MACs, got {got}"
    ### BEGIN HIDDEN TESTS
    hidden_property("conv_macs of 1-d, 2-d and 3-d convolutions with groups, stride, padding and dilation")
    rng = grading_rng()
    for dims in [int(d) for d in rng.permutation([1, 2, 3])]:
        groups = int(rng.choice([1, 1, 2, 3, 4]))
        c_in, c_out = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
        kernel = tuple(int(k) for k in rng.integers(1, 4, size=dims))
        stride, padding, dilation = int(rng.integers(1, 3)), int(rng.integers(0, 2)), int(rng.integers(1, 3))
        conv = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)[dims - 1](
            c_in, c_out, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups,
            bias=bool(rng.random() < 0.5))
        spatial = [int(dilation * (k - 1) + 1 + rng.integers(0, 8 if dims < 3 else 4)) for k in kernel]
        x = torch.randn(int(rng.integers(1, 3)), c_in, *spatial)
        with FlopCounterMode(display=False) as fc:
            out = conv(x)
        expected = fc.get_total_flops() // 2
        weight_shape, output_shape = tuple(conv.weight.shape), tuple(out.shape)
        got = conv_macs(weight_shape, output_shape)
        elements = int(np.prod(output_shape, dtype=np.int64))
        hint = ""
        if got == elements * int(np.prod(weight_shape, dtype=np.int64)):
            hint = " -- the weight's first dimension, C_out, is already counted in the output elements"
        elif groups > 1 and got == expected * groups:
            hint = " -- a grouped convolution reads C_in / groups channels: the weight's second dimension says how many"
        assert isinstance(got, int) and got == expected, (
            f"Conv{dims}d({c_in}, {c_out}, {kernel}, stride={stride}, padding={padding}, dilation={dilation}, "
            f"groups={groups}): weight {weight_shape}, output {output_shape}: expected {expected} MACs (torch's FLOP "
            f"counter / 2, a Python int), got {got!r}{hint}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_conv_macs()

# %% [markdown]
# ## Counting activation memory
#
# While a layer runs, its input and output both exist. On a microcontroller the largest such
# pair decides how much SRAM the model needs, often more than the weights. An output's size in
# bytes is its number of elements times the bytes per element of its dtype.
#
# ### Task 4: `activation_bytes`
#
# **Your task (easy, 2 points).** Implement `activation_bytes(shape, dtype)`: the bytes of a
# tensor of `shape` and `dtype`, where `dtype` is a torch dtype (`torch.float16`) or anything
# numpy accepts (`np.float32`, `"int8"`).
#
# - *TODO:* return the size as a Python `int`, for both kinds of dtype.
# - *Approach:* elements times bytes per element; the dtype alone tells the bytes per element,
#   but torch and numpy describe dtypes with different objects.
# - *Example:* a float32 output of shape (1, 16, 8, 8) is 4,096 bytes; ten `"int8"` values are 10.
# - *Hints:* a string or a numpy scalar type becomes a numpy dtype object with `np.dtype(...)`;
#   look for an attribute that both a numpy dtype and a `torch.dtype` have (bfloat16 has no
#   numpy counterpart, so do not convert torch dtypes to numpy).

# %% nbgrader={"grade": false, "grade_id": "profiling-activation-bytes", "solution": true, "schema_version": 3}
#| export
def activation_bytes(shape: Sequence[int], dtype: Any) -> int:
    """Bytes of a tensor with `shape` and `dtype` (a torch dtype or a numpy-compatible one).

    >>> activation_bytes((1, 16, 8, 8), torch.float32), activation_bytes((10,), "int8")
    (4096, 10)
    """
    ### BEGIN SOLUTION
    itemsize = dtype.itemsize if isinstance(dtype, torch.dtype) else np.dtype(dtype).itemsize
    return int(math.prod(tuple(shape)) * itemsize)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-profiling-activation-bytes", "locked": true, "points": 2, "schema_version": 3}
def test_unit_activation_bytes():
    for shape, dtype, expected, what in (((1, 16, 8, 8), torch.float32, 4096, "1024 float32 values"),
                                         ((3, 5), torch.float16, 30, "15 float16 values"),
                                         ((3, 5), torch.bfloat16, 30, "15 bfloat16 values"),
                                         ((7,), np.float64, 56, "7 float64 values"),
                                         ((10,), "int8", 10, "10 int8 values")):
        got = activation_bytes(shape, dtype)
        assert got == expected, f"{what}: expected {expected} bytes, got {got}"
    t = torch.zeros(4, 9, dtype=torch.float64)
    got = activation_bytes(tuple(t.shape), t.dtype)
    assert got == t.numel() * t.element_size(), f"a (4, 9) float64 tensor: expected torch's own size {t.numel() * t.element_size()}, got {got}"
    ### BEGIN HIDDEN TESTS
    hidden_property("activation bytes of torch tensors and numpy arrays of other dtypes and shapes (a 0-d one "
                    "included)")
    rng = grading_rng()
    torch_dtypes = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
                    torch.int32, torch.int64, torch.bool, torch.complex64)
    numpy_dtypes = (np.float32, np.float16, np.float64, np.int64, np.uint8, np.bool_, "int16", "uint8", "float64",
                    "complex128", "int32", np.dtype("int32"), np.dtype("float16"))
    for i in range(8):
        shape = tuple(int(d) for d in rng.integers(1, 12, size=int(rng.integers(0 if i == 0 else 1, 5))))
        if i % 2 == 0:
            dtype = torch_dtypes[int(rng.integers(len(torch_dtypes)))]
            per_element = torch.empty(0, dtype=dtype).element_size()
        else:
            dtype = numpy_dtypes[int(rng.integers(len(numpy_dtypes)))]
            per_element = np.zeros(1, dtype=dtype).nbytes
        expected = int(np.prod(shape, dtype=np.int64)) * per_element
        got = activation_bytes(shape, dtype)
        assert isinstance(got, int) and got == expected, (
            f"shape {shape}, dtype {dtype!r}: expected {expected} bytes ({per_element} per element, a Python int), "
            f"got {got!r}")
    ### END HIDDEN TESTS


if __name__ == "__main__":
    test_unit_activation_bytes()

# %% [markdown]
# ## Walking a model layer by layer
#
# Per-layer figures need to see each layer's input and output as the model really runs, in
# the order it runs them (a `forward` is code, not a list, so reading the module tree is not
# enough). For a `torch.nn.Module` we attach a **forward pre-hook** and a **forward hook** to
# every *layer*: each leaf module (a module without children), and each module that holds
# parameters of its own (`nn.MultiheadAttention` keeps its input projection itself). A layer
# inside another layer is counted once: the outer row gets only the FLOPs of its own code.
# For a numpy-style model we use a small
# protocol: the model exposes `layers`, and we wrap each layer's `forward` for the duration of
# one pass.
#
# ```
#  forward(x) ──> pre-hook(conv1): push "conv1", note input ──> conv1 runs ──> hook: pop,
#                 record output shape, dtype, FLOPs counted during the call ──> pre-hook(relu) ...
# ```
#
# The same walk gives good error messages for free: if a layer raises (a wrong input shape,
# say), the name on top of the stack is the failing layer, and we re-raise the error with
# that name attached, chaining the original.
#
# **FLOPs** for torch models come from `torch.utils.flop_counter.FlopCounterMode`, which counts
# matrix multiplications and convolutions (`mm`, `addmm`, `bmm`, `baddbmm`, convolution,
# attention) at the dispatcher level, whatever Python code issued them; a layer's count is the
# counter's total after its call minus before (minus the layers inside it). In torch 2.13 the
# counter leaves out the CPU attention kernel, so we register the counter's own attention
# formula for it. The counting pass runs in eval mode with autograd on, so inference-only fused
# kernels (the transformer "fast path") cannot hide their matmuls. Quantized `torch.ao` layers run kernels the
# counter does not know, so their MACs are computed from their weights with `linear_macs` /
# `conv_macs`, and the method says so.
#
# **The numpy-style protocol.** A model with `forward()` and `parameters()` that also has a
# `layers` sequence can be profiled layer by layer. Each layer must be called through its
# `forward` method (directly, or by a `__call__` that calls `self.forward`). A layer with a 2-D
# `weight` is counted as a linear layer (either `(in, out)` or torch's `(out, in)` layout,
# whichever matches its input), a 3- to 5-D `weight` as a convolution in torch's layout, and a
# layer without a `weight` (an activation, a reshape) as zero MACs.

# %%
#| export
LAYER_COLUMNS = ("layer", "type", "parameters", "parameter_bytes", "output_shape", "output_elements",
                 "activation_bytes", "macs", "flops")


class LayerError(RuntimeError):
    """A model failed while profiling; `layer` names where (the innermost running layer, or the
    last layer that finished when the model's own code between layers raised). The original
    exception is chained as `__cause__`."""

    def __init__(self, message: str, layer: str | None = None):
        super().__init__(message)
        self.layer = layer


@dataclass
class _LayerCall:
    name: str
    obj: Any
    type: str
    params: list[tuple[int, Any]]  # (identity, tensor or array) of the layer's own parameters
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    output: Any = None
    flops: int = 0
    flop_method: str = "FlopCounterMode"
    finished: bool = False


@dataclass
class _Walk:
    calls: list[_LayerCall]
    output: Any
    total_flops: int | None  # FlopCounterMode's total for the whole pass (torch), else None
    flop_methods: dict[str, str]


def _array_of(x: Any) -> Any:
    "The tensor/array behind x (TinyTorch-style tensors keep theirs in `.data`)."
    if isinstance(x, (torch.Tensor, np.ndarray)):
        return x
    if hasattr(x, "data") and isinstance(getattr(x, "data"), (torch.Tensor, np.ndarray)):
        return x.data
    if isinstance(x, (np.generic, float, int)):
        return np.asarray(x)
    return None


def _leaves(x: Any) -> list[Any]:
    "Every tensor or array in a (possibly nested) output."
    arr = _array_of(x)
    if arr is not None:
        return [arr]
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        return [a for item in x for a in _leaves(item)]
    return []


def _shape_of(x: Any) -> Any:
    arrays = _leaves(x)
    shapes = [tuple(int(d) for d in a.shape) for a in arrays]
    return shapes[0] if len(shapes) == 1 else shapes


def _array_bytes(a: Any) -> int:
    if isinstance(a, torch.Tensor):
        return int(a.numel() * a.element_size())
    return int(np.asarray(a).nbytes)


def _describe_inputs(args: Any) -> str:
    shapes = _shape_of(args)
    return f"input shape {shapes}" if shapes != [] else "its input"


def _quantized_weights(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    "Weights of torch.ao quantized modules, which keep them in packed form, not as parameters."
    out = []
    if type(module).__module__.startswith("torch.ao.nn.quantized"):
        for attr in ("weight", "bias"):
            get = getattr(module, attr, None)
            if callable(get):
                t = get()
                if isinstance(t, torch.Tensor):
                    out.append((attr, t))
    return out


def _torch_layer_modules(root: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    "Leaf modules, plus modules that hold parameters of their own (e.g. MultiheadAttention)."
    return [(n, m) for n, m in root.named_modules()
            if next(m.children(), None) is None or next(m.parameters(recurse=False), None) is not None
            or _quantized_weights(m)]


def _check_not_empty(a: ModelAdapter) -> None:
    if a.kind == "torch":
        m = a.model
        empty_container = isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)) or type(m) is torch.nn.Module
        if empty_container and next(m.children(), None) is None and next(m.parameters(), None) is None \
                and next(m.buffers(), None) is None:
            raise ValueError(f"model: '{a.name}' is empty (no layers, no parameters): there is nothing to profile")
    elif a.kind == "numpy":
        layers = getattr(a.model, "layers", None)
        if layers is not None and len(list(layers)) == 0 and not a.named_parameter_arrays():
            raise ValueError(f"model: '{a.name}' is empty (no layers, no parameters): there is nothing to profile")


def _require_countable(a: ModelAdapter, what: str) -> None:
    if a.kind in ("callable", "forward"):
        kind = "a plain callable" if a.kind == "callable" else "an object with forward() but no parameters()"
        raise TypeError(
            f"model '{a.name}' is {kind}: only latency and forward-pass memory can be measured for it "
            f"(use latency_median_ms); {what} needs a torch.nn.Module or an object with forward() and parameters()."
        )
    _check_not_empty(a)


def _cpu_attention_flops(query: Any, key: Any, value: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query, key, value)


def _flop_counter() -> FlopCounterMode:
    """FlopCounterMode, taught the CPU attention kernel it leaves out in torch 2.13, so attention
    (QKᵀ and AV) counts the same on CPU as on GPU."""
    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return FlopCounterMode(display=False, custom_mapping={op: _cpu_attention_flops} if op is not None else None)


def _walk_torch(a: ModelAdapter, x: Any, count_flops: bool = True, keep_inputs: bool = False) -> _Walk:
    root = a.torch_module
    calls: list[_LayerCall] = []
    stack: list[dict[str, Any]] = []  # the layers running now, innermost last
    counter = _flop_counter() if count_flops else None
    total = (lambda: counter.get_total_flops()) if counter is not None else (lambda: 0)
    handles = []

    def pre_hook(name: str):
        def hook(module, args, kwargs):
            params = [(id(p), p) for p in module.parameters(recurse=False)]
            params += [(id(t), t) for _, t in _quantized_weights(module)]
            calls.append(_LayerCall(name=name or a.name, obj=module, type=type(module).__name__, params=params,
                                    args=args if keep_inputs else (), kwargs=kwargs if keep_inputs else {}))
            stack.append({"name": name or a.name, "args": args, "before": total(), "inner": 0, "index": len(calls) - 1})
        return hook

    def post_hook(name: str):
        def hook(module, args, kwargs, output):
            entry = stack.pop()
            spent = int(total() - entry["before"])
            call = calls[entry["index"]]
            call.output, call.finished = output, True
            call.flops = spent - entry["inner"]  # FLOPs of this layer itself, not of layers inside it
            qweights = dict(_quantized_weights(module))
            if call.flops == 0 and qweights.get("weight") is not None and qweights["weight"].dim() >= 2:
                w = qweights["weight"]
                macs = linear_macs(w.shape[1], _shape_of(output)) if w.dim() == 2 else conv_macs(w.shape, _shape_of(output))
                call.flops, call.flop_method = 2 * macs, "analytic from quantized weights"
                spent += call.flops
            if stack:
                stack[-1]["inner"] += spent
        return hook

    was_training = root.training
    try:
        for name, module in _torch_layer_modules(root):
            handles.append(module.register_forward_pre_hook(pre_hook(name), with_kwargs=True))
            handles.append(module.register_forward_hook(post_hook(name), with_kwargs=True))
        root.eval()
        try:
            # eval mode with autograd on: inference-only fused kernels (e.g. the transformer fast
            # path) would hide their matmuls from the counter and their sub-layers from the hooks
            with torch.enable_grad():
                if counter is not None:
                    with counter:
                        out = a.forward(x)
                else:
                    out = a.forward(x)
        except Exception as err:  # re-raised with the failing layer's name; never turned into a figure
            raise _layer_error(a, err, [(e["name"], e["args"]) for e in stack], calls) from err
    finally:
        for h in handles:
            h.remove()
        root.train(was_training)
    methods = {c.name: c.flop_method for c in calls}
    extra = sum(c.flops for c in calls if c.flop_method != "FlopCounterMode")
    return _Walk(calls, out, (counter.get_total_flops() + extra) if counter is not None else None, methods)


def _layer_error(a: ModelAdapter, err: Exception, stack: list, calls: list[_LayerCall]) -> LayerError:
    if stack:
        name, args = stack[-1]
        return LayerError(f"model '{a.name}': layer '{name}' raised on {_describe_inputs(args)}: "
                          f"{type(err).__name__}: {err}", layer=name)
    done = [c for c in calls if c.finished]
    if done:
        last = done[-1]
        return LayerError(f"model '{a.name}' raised in its own forward code after layer '{last.name}' "
                          f"(output shape {_shape_of(last.output)}): {type(err).__name__}: {err}", layer=last.name)
    return LayerError(f"model '{a.name}' raised before its first layer ran: {type(err).__name__}: {err}", layer=None)


def _numpy_layer_params(layer: Any) -> list[tuple[int, Any]]:
    get = getattr(layer, "parameters", None)
    items = list(get()) if callable(get) else [getattr(layer, n, None) for n in ("weight", "bias")]
    out = []
    for p in items:
        if p is None:
            continue
        arr = _array_of(p)
        if arr is None:
            arr = np.asarray(p)
        out.append((id(p), arr))
    return out


def _numpy_layer_flops(layer: Any, args: tuple, output: Any, name: str) -> tuple[int, str]:
    weight = getattr(layer, "weight", None)
    if weight is None:
        return 0, "no weight: not counted"
    w = _array_of(weight)
    w = np.asarray(w) if w is not None else np.asarray(weight)
    out_shape = _shape_of(output)
    if w.ndim == 2:
        x = _leaves(args)
        in_features = x[0].shape[-1] if x else None
        if in_features not in (w.shape[0], w.shape[1]):
            raise ValueError(f"layer '{name}': a 2-D weight {w.shape} matches neither side of its input "
                             f"with {in_features} features; cannot count it as a linear layer")
        return 2 * linear_macs(in_features, out_shape), "analytic: linear"
    if 3 <= w.ndim <= 5:
        return 2 * conv_macs(w.shape, out_shape), "analytic: convolution"
    raise ValueError(f"layer '{name}': a {w.ndim}-D weight is neither linear (2-D) nor convolution (3-5-D)")


def _walk_numpy(a: ModelAdapter, x: Any, count_flops: bool = True, keep_inputs: bool = False) -> _Walk:
    layers = getattr(a.model, "layers", None)
    if layers is None:
        raise TypeError(
            f"model '{a.name}' is numpy-style without a `layers` attribute: per-layer figures (FLOPs, "
            "activations) need the model to expose its layers (each with a forward() and, for linear or "
            "convolution layers, a `weight` array)."
        )
    layers = list(layers)
    calls: list[_LayerCall] = []
    stack: list[tuple[str, Any]] = []
    patched = []

    def wrap(i: int, layer: Any, original: Callable):
        name = getattr(layer, "name", None) if isinstance(getattr(layer, "name", None), str) else f"layers.{i}"

        def forward(*args, **kwargs):
            stack.append((name, args))
            out = original(*args, **kwargs)
            stack.pop()
            flops, method = _numpy_layer_flops(layer, args, out, name) if count_flops else (0, "not counted")
            calls.append(_LayerCall(name=name, obj=layer, type=type(layer).__name__, params=_numpy_layer_params(layer),
                                    args=args if keep_inputs else (), kwargs=kwargs if keep_inputs else {},
                                    output=out, flops=flops, flop_method=method, finished=True))
            return out
        return forward

    try:
        for i, layer in enumerate(layers):
            original = getattr(layer, "forward", None)
            if not callable(original):
                raise TypeError(f"model '{a.name}': layers[{i}] ({type(layer).__name__}) has no forward() method")
            had_own = "forward" in getattr(layer, "__dict__", {})
            layer.forward = wrap(i, layer, original)
            patched.append((layer, had_own, original))
        try:
            out = a.forward(x)
        except Exception as err:  # re-raised with the failing layer's name; never turned into a figure
            raise _layer_error(a, err, stack, calls) from err
    finally:
        for layer, had_own, original in patched:
            if had_own:
                layer.forward = original
            else:
                del layer.forward
    if layers and not calls:
        raise TypeError(f"model '{a.name}': none of its layers' forward() ran during model.forward(); "
                        "layer profiling needs layers called through their forward() method")
    methods = {c.name: c.flop_method for c in calls}
    return _Walk(calls, out, None, methods)


def _as_input(a: ModelAdapter, input_or_shape: Any, arg: str) -> Any:
    "A shape tuple becomes a deterministic input (seed 0); a tensor or array is converted."
    if isinstance(input_or_shape, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in input_or_shape):
        try:
            return a.make_input(input_or_shape)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{arg}: expected a non-empty shape of positive ints or an input tensor, "
                             f"got {input_or_shape!r}") from err
    if isinstance(input_or_shape, (torch.Tensor, np.ndarray)) or _array_of(input_or_shape) is not None:
        return a.to_input(input_or_shape)
    raise TypeError(f"{arg}: expected an input tensor/array or a shape tuple such as (1, 3, 32, 32), "
                    f"got {type(input_or_shape).__name__}")


def _walk(a: ModelAdapter, x: Any, count_flops: bool = True, keep_inputs: bool = False) -> _Walk:
    if a.kind == "torch":
        return _walk_torch(a, x, count_flops, keep_inputs)
    with a.inference():
        return _walk_numpy(a, x, count_flops, keep_inputs)


def _layer_rows(calls: list[_LayerCall]) -> pd.DataFrame:
    seen: set[int] = set()
    rows = []
    for c in calls:
        own = [(k, p) for k, p in c.params if k not in seen]  # each parameter counted at its first use
        seen.update(k for k, _ in own)
        outs = _leaves(c.output)
        rows.append({
            "layer": c.name,
            "type": c.type,
            "parameters": parameter_count([p for _, p in own]),
            "parameter_bytes": sum(_array_bytes(p) for _, p in own),
            "output_shape": _shape_of(c.output),
            "output_elements": sum(int(math.prod(o.shape)) for o in outs),
            "activation_bytes": sum(activation_bytes(tuple(o.shape), o.dtype) for o in outs),
            "macs": c.flops // 2,
            "flops": c.flops,
        })
    return pd.DataFrame(rows, columns=list(LAYER_COLUMNS))

# %% [markdown]
# A look at the walk on a small CNN: one row per layer call, in execution order.

# %%
if __name__ == "__main__":
    _cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 8 * 8, 10))
    _a = adapt(_cnn)
    print(_layer_rows(_walk(_a, _a.make_input((1, 1, 8, 8))).calls).to_string())

# %% [markdown]
# ## Measuring peak memory
#
# Counting tells us how big each output is; it does not tell us how much memory a forward pass
# really holds at its worst moment. Frameworks free an intermediate as soon as nothing needs it,
# reuse buffers, and allocate workspace for some kernels (e.g. the im2col buffer of a
# convolution). So peak memory is **measured**:
#
# ```
#  memory during one forward pass
#  ▲
#  │            ┌──┐ workspace (im2col, ...)
#  │         ┌──┤  ├──┐  activations alive (the input and output of the running layer, ...)
#  │      ┌──┘  └──┘  └──┐
#  │──────┴──────────────┴───── parameters + buffers (resident for the model's lifetime)
#  └───────────────────────────────────────────────> time
#      peak_memory = parameters + buffers + (highest point of what the pass allocates above the start)
# ```
#
# - torch on CPU: `torch.profiler.profile(profile_memory=True)` records every allocation and
#   free of the CPU allocator with its size and time. Summing them in time order gives the bytes
#   alive above the start at each moment; the maximum is the forward pass's peak.
# - torch on CUDA: the allocator's own high-water mark, `torch.cuda.max_memory_allocated`.
# - numpy-style models: `tracemalloc`, which sees numpy's allocations.

# %%
#| export
@contextlib.contextmanager
def _kineto_lines_hidden() -> Iterator[None]:
    """Hide the profiler's native start/stop log lines ("USDT:... profiler_start") on fd 2, and with a CUDA
    build of torch on a machine without a GPU driver its "ERROR: ... gpuGetDeviceCount failed with code 35"
    (it lists the GPUs even for the CPU-only profile taken here, and finds none).

    The C++ profiler writes them straight to file descriptor 2, past Python's sys.stderr. Everything
    else written there meanwhile is passed on to stderr."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                if not line.startswith(("USDT:", "INFO:")) and "gpuGetDeviceCount failed" not in line:
                    sys.stderr.write(line)


def _torch_peak_bytes(fn: Callable[[], Any], device: torch.device) -> tuple[int, Any, str]:
    "Run fn once; return (peak bytes allocated above the start, fn's result, method)."
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        return int(max(peak, 0)), result, "measured: torch.cuda.max_memory_allocated above the start"
    from torch.profiler import ProfilerActivity, profile

    with _kineto_lines_hidden(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    events = [(e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
              if e.name() == "[memory]" and str(e.device_type()).endswith("CPU")]
    live = peak = 0
    for _, nbytes in sorted(events, key=lambda ev: ev[0]):
        live += nbytes
        peak = max(peak, live)
    return int(peak), result, "measured: torch.profiler CPU allocation events (peak of live bytes above the start)"


def _tracemalloc_peak_bytes(fn: Callable[[], Any]) -> tuple[int, Any, str]:
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return int(max(peak, 0)), result, "measured: tracemalloc peak above the start (numpy allocations)"


def _forward_peak_bytes(a: ModelAdapter, x: Any) -> tuple[int, str]:
    with a.inference():
        a.forward(x)  # warm: first calls may allocate caches that are not part of a steady forward pass
        if a.kind == "torch":
            peak, _, method = _torch_peak_bytes(lambda: a.forward(x), a.device)
        else:
            peak, _, method = _tracemalloc_peak_bytes(lambda: a.forward(x))
    return peak, method


def forward_peak_bytes(model: Any, input_or_shape: Any) -> tuple[int, str]:
    """`(bytes, method)`: peak memory allocated during one forward pass, beyond what the model holds.

    Works for every kind of model, including objects with only `forward()` and plain callables
    (whose parameters cannot be seen): torch allocations through the profiler's memory events,
    Python/numpy allocations through `tracemalloc`.

    >>> forward_peak_bytes(torch.nn.Linear(256, 256), (64, 256))[0] >= 64 * 256 * 4
    True
    """
    a = adapt(model)
    return _forward_peak_bytes(a, _as_input(a, input_or_shape, "input_or_shape"))

# %% [markdown]
# ## The Profiler
#
# The class puts the pieces together. Each method adapts the model, runs the walk or the
# timing core, and returns plain numbers, dicts or a pandas table. Notes on what each figure
# means:
#
# - `count_parameters`: distinct parameters (tied ones once), plus the packed weights of
#   `torch.ao` quantized layers, which torch does not list as parameters.
# - `count_flops` / `count_macs`: for the whole input (batch included). FLOPs = 2 × MACs of
#   matmul/convolution ops; elementwise ops, pooling, normalisation and activations are not
#   counted. For torch models the total includes matmuls issued outside any layer (e.g. a
#   `torch.matmul` in a container's `forward`), which `layer_stats` cannot attribute to a row.
# - `layer_stats`: one row per layer **call** in the order the calls start (a layer called twice
#   has two rows with the same name). A parameter is counted in the row of its first use, so the
#   `parameters` column never double counts; it misses only parameters whose module never runs
#   as a module (`nn.MultiheadAttention` uses its `out_proj` weights functionally).
# - `measure_memory`: `peak_memory_mb` is the resident parameters and buffers plus the measured
#   peak the forward pass allocates above them (`forward_peak_memory_mb`).
#   `memory_efficiency` is the share of that peak taken by the model's stored state (parameters
#   and buffers): near 1 the weights dominate (quantize or prune them), near 0 activations and
#   workspace dominate (smaller inputs or batches, narrower layers).
# - latencies: medians in milliseconds from the shared timing core; per-layer latencies time
#   each layer alone on the input it received in the full pass, so their sum differs somewhat
#   from the whole model's latency (the table says both).

# %%
#| export
_MB = 1024 * 1024


class Profiler:
    """Count and measure a model's parameters, arithmetic, memory and latency, layer by layer.

    Accepts a `torch.nn.Module`, an object with `forward()` and `parameters()` (numpy-style;
    per-layer figures need it to expose `layers`, see the module notes), or a plain callable
    (latency only). After each latency measurement `last_timing` holds the raw `TimingSamples`.

    >>> p = Profiler()
    >>> m = torch.nn.Linear(128, 10)
    >>> p.count_parameters(m), p.count_macs(m, (4, 128))
    (1290, 5120)
    """

    def __init__(self) -> None:
        self.last_timing = None

    # -- counting --------------------------------------------------------------------------
    def count_parameters(self, model: Any) -> int:
        """Exact number of distinct parameters (tied parameters once; quantized packed weights included).

        >>> Profiler().count_parameters(torch.nn.Linear(3, 2))
        8
        """
        a = adapt(model)
        _require_countable(a, "counting parameters")
        return parameter_count([arr for _, arr in self._parameter_arrays(a)])

    def count_flops(self, model: Any, input_shape: Any) -> int:
        """FLOPs of one forward pass on an input of `input_shape` (or on a given input): 2 × MACs.

        >>> Profiler().count_flops(torch.nn.Linear(128, 10), (4, 128))
        10240
        """
        a = adapt(model)
        _require_countable(a, "counting FLOPs")
        walk = _walk(a, _as_input(a, input_shape, "input_shape"))
        return int(walk.total_flops if walk.total_flops is not None else sum(c.flops for c in walk.calls))

    def count_macs(self, model: Any, input_shape: Any) -> int:
        """Multiply-accumulates of one forward pass (FLOPs / 2, matmul and convolution only).

        >>> Profiler().count_macs(torch.nn.Conv2d(16, 32, 3, padding=1), (1, 16, 8, 8))
        294912
        """
        return self.count_flops(model, input_shape) // 2

    def layer_stats(self, model: Any, input_shape: Any) -> pd.DataFrame:
        """One row per layer call (leaf modules and modules with parameters of their own), in the
        order the calls start, with the columns of `LAYER_COLUMNS`; see the module notes.

        >>> df = Profiler().layer_stats(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), (2, 4))
        >>> df[["layer", "parameters", "macs", "activation_bytes"]].values.tolist()
        [['0', 15, 24, 24], ['1', 0, 0, 24]]
        """
        a = adapt(model)
        _require_countable(a, "layer statistics")
        walk = _walk(a, _as_input(a, input_shape, "input_shape"))
        df = _layer_rows(walk.calls)
        df.attrs["flop_methods"] = walk.flop_methods
        df.attrs["total_flops"] = walk.total_flops
        return df

    # -- memory ----------------------------------------------------------------------------
    def measure_memory(self, model: Any, input_shape: Any) -> dict[str, Any]:
        """Parameter, buffer, activation and peak memory of one forward pass: `*_bytes` integers, `*_mb` their MiB view.

        >>> r = Profiler().measure_memory(torch.nn.Linear(256, 256), (1, 256))
        >>> round(r["parameter_memory_mb"], 3), r["methods"]["parameter_memory_mb"]
        (0.251, 'counted: numel x element size of each distinct parameter')
        """
        a = adapt(model)
        _require_countable(a, "measuring memory")
        x = _as_input(a, input_shape, "input_shape")
        param_bytes = sum(_array_bytes(arr) for _, arr in self._parameter_arrays(a))
        if a.kind == "torch":
            buffer_bytes = sum(_array_bytes(b) for b in a.torch_module.buffers())
            buffer_method = "counted: numel x element size of each buffer"
        else:
            buffer_bytes, buffer_method = 0, "numpy-style models have no buffers"
        methods = {"parameter_memory_mb": "counted: numel x element size of each distinct parameter",
                   "buffer_memory_mb": buffer_method}
        activation_mb = None
        if a.kind == "torch" or getattr(a.model, "layers", None) is not None:
            rows = _layer_rows(_walk(a, x, count_flops=False).calls)
            activation_mb = float(rows["activation_bytes"].sum()) / _MB
            methods["activation_memory_mb"] = "counted: sum of every layer output's bytes for this input"
        else:
            methods["activation_memory_mb"] = "not available: the numpy-style model exposes no `layers`"
        forward_peak, method = _forward_peak_bytes(a, x)
        state = param_bytes + buffer_bytes
        peak = state + forward_peak
        methods["forward_peak_memory_mb"] = method
        methods["peak_memory_mb"] = "parameters + buffers + forward_peak_memory_mb"
        methods["memory_efficiency"] = "(parameters + buffers) / peak: share of peak memory that is stored state"
        return {
            "parameter_memory_bytes": param_bytes, "buffer_memory_bytes": buffer_bytes,
            "forward_peak_memory_bytes": forward_peak, "peak_memory_bytes": peak,
            "parameter_memory_mb": param_bytes / _MB,
            "buffer_memory_mb": buffer_bytes / _MB,
            "activation_memory_mb": activation_mb,
            "forward_peak_memory_mb": forward_peak / _MB,
            "peak_memory_mb": peak / _MB,
            "memory_efficiency": (state / peak) if peak > 0 else None,
            "methods": methods,
        }

    # -- time ------------------------------------------------------------------------------
    def latency_median_ms(self, model: Any, input_tensor: Any, warmup: int = 10, iterations: int = 100,
                          threads: int | None = None) -> float:
        """Median latency in ms of one forward pass, through the shared timing core. `measure_latency`, the
        original course code's name, is this method (its median); `metrics.measure_latency` is a mean.

        `iterations` timed samples (each a calibrated block of calls) follow `warmup` calls.
        `threads` fixes torch's thread count while timing (None: the current setting).
        The raw samples are kept in `self.last_timing`.

        >>> Profiler().latency_median_ms(torch.nn.Linear(64, 64), (1, 64), warmup=2, iterations=5) > 0
        True
        """
        positive_int(iterations, "iterations")
        positive_int(warmup, "warmup", minimum=0)
        a = adapt(model)
        x = _as_input(a, input_tensor, "input_tensor")
        if a.kind not in ("callable", "forward"):
            _check_not_empty(a)
            _walk(a, x, count_flops=False)  # fail with the failing layer's name before timing
        self.last_timing = time_model(a, x, warmup=int(warmup), samples=int(iterations), threads=threads)
        return self.last_timing.median_ms

    measure_latency = latency_median_ms  # the original course code's name: the median (results.SEED_ALIASES)

    def profile_forward_pass(self, model: Any, input_tensor: Any, warmup: int = 3, samples: int = 10,
                             threads: int | None = None) -> pd.DataFrame:
        """`layer_stats` plus each layer's measured latency (ms) and its share of the model's latency.

        Each layer is timed alone on the input it received in a full pass. `attrs` of the table
        hold `model_latency_median_ms` (the whole model, timed as one), `operators_sum_ms` and methods.

        >>> df = Profiler().profile_forward_pass(torch.nn.Sequential(torch.nn.Linear(8, 8)), (1, 8), samples=3)
        >>> list(df.columns[-2:])
        ['latency_median_ms', 'latency_share']
        """
        a = adapt(model)
        _require_countable(a, "per-layer profiling")
        x = _as_input(a, input_tensor, "input_tensor")
        walk = _walk(a, x, keep_inputs=True)
        df = _layer_rows(walk.calls)
        latencies = [self._time_layer(a, c, warmup, samples, threads) for c in walk.calls]
        timing = time_model(a, x, warmup=warmup, samples=samples, threads=threads)
        total = timing.median_ms
        df["latency_median_ms"] = latencies
        df["latency_share"] = [v / total for v in latencies]
        df.attrs.update({
            "model": a.name,
            "model_latency_median_ms": total,
            "threads": timing.threads,
            "operators_sum_ms": float(sum(latencies)),
            "latency_method": "median of the shared timing core; each layer timed alone on its recorded input",
            "flop_methods": walk.flop_methods,
            "total_flops": walk.total_flops,
        })
        return df

    def profile_layer(self, model: Any, layer: Any, input_tensor: Any, warmup: int = 3, samples: int = 10,
                      threads: int | None = None) -> dict[str, Any]:
        """Figures for one layer (by name as in `layer_stats`, or the layer object), on its first call.

        >>> m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
        >>> Profiler().profile_layer(m, "0", (2, 8), samples=3)["macs"]
        64
        """
        a = adapt(model)
        _require_countable(a, "per-layer profiling")
        walk = _walk(a, _as_input(a, input_tensor, "input_tensor"), keep_inputs=True)
        rows = _layer_rows(walk.calls)
        for i, c in enumerate(walk.calls):
            if (isinstance(layer, str) and c.name == layer) or c.obj is layer:
                out = rows.iloc[i].to_dict()
                out["latency_median_ms"] = self._time_layer(a, c, warmup, samples, threads)
                out["calls"] = sum(1 for d in walk.calls if d.obj is c.obj)
                return out
        names = sorted({c.name for c in walk.calls})
        raise ValueError(f"layer: {layer!r} did not run in model '{a.name}'; layers that ran: {names}")

    def profile_backward_pass(self, model: Any, input_tensor: Any, loss_fn: Callable[[Any], torch.Tensor] | None = None,
                              warmup: int = 3, iterations: int = 10, threads: int | None = None) -> dict[str, Any]:
        """Measure a training step's backward pass: latency (ms) and peak memory (MiB).

        Times (a) the forward pass with autograd recording and (b) zero-grad + forward + loss +
        backward, both through the timing core; `backward_ms` is (b) − (a). Peak memory is
        measured over one whole step. `loss_fn(output)` must return a scalar (default:
        `output.sum()`). The model runs in eval mode (no running-statistics updates); its
        training flag and existing `.grad` values are restored afterwards. Torch models only.
        For a model that runs in microseconds, `backward_ms` (a difference of two medians) is
        dominated by noise on a busy machine, and can even come out negative: time a larger
        input, or more `iterations`.

        >>> r = Profiler().profile_backward_pass(torch.nn.Linear(64, 64), (8, 64), iterations=3)
        >>> r["forward_backward_ms"] > 0, r["gradient_memory_mb"] == (64 * 64 + 64) * 4 / 2**20
        (True, True)
        """
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
            raise ValueError(f"iterations: expected an int >= 1 (timed samples), got {iterations!r}")
        a = adapt(model)
        if a.kind != "torch":
            raise TypeError(f"model '{a.name}' is {a.kind}: backward profiling needs autograd, i.e. a torch.nn.Module")
        _check_not_empty(a)
        module = a.torch_module
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"model: '{a.name}' has no trainable parameters, so there is no backward pass to profile")
        loss_fn = loss_fn or (lambda out: out.sum())
        x = _as_input(a, input_tensor, "input_tensor")
        _walk(a, x, count_flops=False)  # a failing layer is named before anything is timed

        def forward_with_graph() -> torch.Tensor:
            with torch.enable_grad():
                return loss_fn(module(x))

        def step() -> torch.Tensor:
            for p in params:
                p.grad = None
            with torch.enable_grad():
                loss = loss_fn(module(x))
                loss.backward()
            return loss

        saved = [p.grad for p in params]
        was_training = module.training
        module.eval()
        try:
            loss = forward_with_graph()
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise ValueError(f"loss_fn: expected a scalar tensor from loss_fn(output), got "
                                 f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__}")
            step()  # warm the backward kernels
            opts = dict(warmup=warmup, samples=iterations, sync=a.sync, device=str(a.device), threads=threads)
            fwd = time_callable(forward_with_graph, **opts)
            total = time_callable(step, **opts)
            for p in params:
                p.grad = None
            fwd_peak, _, method = _torch_peak_bytes(forward_with_graph, a.device)
            for p in params:
                p.grad = None
            step_peak, _, _ = _torch_peak_bytes(step, a.device)
        finally:
            for p, g in zip(params, saved):
                p.grad = g
            module.train(was_training)
        self.last_timing = total
        grad_bytes = sum(_array_bytes(p) for p in params)
        return {
            "forward_ms": fwd.median_ms,
            "forward_backward_ms": total.median_ms,
            "backward_ms": total.median_ms - fwd.median_ms,
            "backward_to_forward_ratio": (total.median_ms - fwd.median_ms) / fwd.median_ms,
            "forward_peak_memory_mb": fwd_peak / _MB,
            "peak_memory_mb": step_peak / _MB,
            "gradient_memory_mb": grad_bytes / _MB,
            "methods": {
                "forward_ms": "median of the timing core: forward with autograd recording",
                "forward_backward_ms": "median of the timing core: zero_grad + forward + loss + backward",
                "backward_ms": "forward_backward_ms - forward_ms (difference of medians)",
                "forward_peak_memory_mb": method + "; forward with autograd graph",
                "peak_memory_mb": method + "; one whole step (forward, loss, backward, gradients)",
                "gradient_memory_mb": "counted: bytes of every trainable parameter's gradient",
            },
        }

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _parameter_arrays(a: ModelAdapter) -> list[tuple[str, Any]]:
        arrays = list(a.named_parameter_arrays())
        if a.kind == "torch":
            for mname, module in a.torch_module.named_modules():
                arrays += [(f"{mname}.{n}" if mname else n, t) for n, t in _quantized_weights(module)]
        return arrays

    @staticmethod
    def _time_layer(a: ModelAdapter, call: _LayerCall, warmup: int, samples: int, threads: int | None) -> float:
        if a.kind == "torch":
            fn = lambda: call.obj(*call.args, **call.kwargs)  # noqa: E731
        else:
            fn = lambda: call.obj.forward(*call.args, **call.kwargs)  # noqa: E731
        with a.inference():
            return time_callable(fn, warmup=warmup, samples=samples, sync=a.sync, device=str(a.device),
                                 threads=threads).median_ms

# %% [markdown]
# ### The numbers for a real edge model
#
# Module 19 benchmarks a small CNN that classifies 8×8 handwritten digits: two 3×3
# convolutions (16 and 32 channels), each followed by ReLU and 2×2 max pooling, then a linear
# classifier. Its layers are written out below. Does it fit a microcontroller with 256 KB of
# SRAM and 1 MB of flash? The cell computes it.

# %%
if __name__ == "__main__":
    DIGITS_INPUT_SHAPE = (1, 1, 8, 8)
    _p = Profiler()
    _digits = torch.nn.Sequential(  # the layers of Module 19's DigitsCNN
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 10))
    _n = _p.count_parameters(_digits)
    _mem = _p.measure_memory(_digits, DIGITS_INPUT_SHAPE)
    _stats = _p.layer_stats(_digits, DIGITS_INPUT_SHAPE)
    _sram = 256 * 1024
    print(f"parameters: {_n:,} -> {_n * 4:,} bytes in float32 ({_n * 4 / _sram:.1%} of 256 KB), "
          f"{_n:,} bytes in int8 ({_n / _sram:.1%})")
    print(f"MACs per image: {_p.count_macs(_digits, DIGITS_INPUT_SHAPE):,}")
    print(f"largest single activation: {_stats['activation_bytes'].max():,} bytes; "
          f"all outputs together: {_stats['activation_bytes'].sum():,} bytes")
    print(f"peak memory: {_mem['peak_memory_mb'] * 1024:.1f} KiB = {_mem['parameter_memory_mb'] * 1024:.1f} KiB of "
          f"parameters + {_mem['forward_peak_memory_mb'] * 1024:.1f} KiB allocated at the forward pass's peak "
          f"({_mem['methods']['forward_peak_memory_mb']})")
    print(_stats.to_string())

# %%
def test_unit_profiler_counts():
    p = Profiler()

    class TwoTowers(torch.nn.Module):  # a model with a shared layer, a functional op and tied weights
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(6, 12, bias=False)
            self.mix = torch.nn.Linear(12, 12)
            self.out = torch.nn.Linear(12, 6, bias=False)
            self.out.weight = torch.nn.Parameter(self.embed.weight.t().contiguous())
            self.shared = self.mix

        def forward(self, x):
            h = torch.relu(self.mix(self.embed(x)))
            h = self.shared(h)  # the same layer a second time
            return self.out(h)

    m = TwoTowers()
    assert p.count_parameters(m) == sum(q.numel() for q in m.parameters()) == 72 + 156 + 72
    tied = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.Linear(5, 5))
    tied[1].weight = tied[0].weight
    assert p.count_parameters(tied) == 25 + 5 + 5, "tied weights are counted once"
    x = torch.randn(3, 6)
    with FlopCounterMode(display=False) as fc:
        m(x)
    assert p.count_flops(m, (3, 6)) == fc.get_total_flops()
    assert p.count_macs(m, (3, 6)) == fc.get_total_flops() // 2
    df = p.layer_stats(m, (3, 6))
    assert list(df.columns) == list(LAYER_COLUMNS)
    assert df["layer"].tolist() == ["embed", "mix", "mix", "out"], df["layer"].tolist()
    assert df["parameters"].sum() == p.count_parameters(m), "each parameter counted at its first use"
    assert df["macs"].tolist() == [3 * 12 * 6, 3 * 12 * 12, 3 * 12 * 12, 3 * 6 * 12]
    assert df["activation_bytes"].tolist() == [3 * 12 * 4, 3 * 12 * 4, 3 * 12 * 4, 3 * 6 * 4]


if __name__ == "__main__":
    test_unit_profiler_counts()

# %%
def test_unit_profiler_errors():
    p = Profiler()
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))
    try:
        p.count_flops(cnn, (1, 1, 10, 10))  # the Linear layer expects an 8x8 input
        raise AssertionError("a wrong input shape must raise")
    except LayerError as e:
        assert e.layer == "2" and "'2'" in str(e) and isinstance(e.__cause__, RuntimeError), e
    try:
        p.latency_median_ms(cnn, (1, 1, 8, 8), iterations=0)
        raise AssertionError("iterations=0 must raise")
    except ValueError as e:
        assert "iterations" in str(e)
    try:
        p.count_parameters(lambda x: x)
        raise AssertionError("a plain callable has no countable parameters")
    except TypeError as e:
        assert "only latency" in str(e)
    try:
        p.count_parameters(torch.nn.Sequential())
        raise AssertionError("an empty model must raise")
    except ValueError as e:
        assert "model" in str(e) and "empty" in str(e)
    try:
        p.count_flops(cnn, (1, 0, 8, 8))
        raise AssertionError("a shape with a zero must raise")
    except ValueError as e:
        assert "input_shape" in str(e)


if __name__ == "__main__":
    test_unit_profiler_errors()

# %%
def test_unit_profiler_memory_and_time():
    p = Profiler()
    big = torch.nn.Linear(16, 65536)  # output (256, 65536) float32 = 64 MiB
    r = p.measure_memory(big, (256, 16))
    assert abs(r["forward_peak_memory_mb"] - 64) <= 6.4, r
    assert abs(r["peak_memory_mb"] - (64 + r["parameter_memory_mb"])) <= 6.4, r
    assert r["activation_memory_mb"] == 64.0
    assert r["parameter_memory_mb"] == (16 * 65536 + 65536) * 4 / 2**20
    assert set(r["methods"]) >= {"parameter_memory_mb", "buffer_memory_mb", "activation_memory_mb", "peak_memory_mb"}
    # latency: 4x the matmul work takes clearly longer than 1x
    one = torch.nn.Sequential(torch.nn.Linear(192, 192, bias=False))
    four = torch.nn.Sequential(*[torch.nn.Linear(192, 192, bias=False) for _ in range(4)])
    t1 = p.latency_median_ms(one, (64, 192), warmup=3, iterations=10, threads=1)
    t4 = p.latency_median_ms(four, (64, 192), warmup=3, iterations=10, threads=1)
    assert 2.0 < t4 / t1 < 8.0, f"4 matmuls should take about 4x one, measured {t4 / t1:.2f}x"
    assert p.last_timing is not None and len(p.last_timing.per_call_ns) == 10


if __name__ == "__main__":
    test_unit_profiler_memory_and_time()

# %% [markdown]
# ### Where the time goes, layer by layer
#
# `profile_forward_pass` adds a measured latency to every row. In a CNN the convolutions
# usually dominate both MACs and time; layers with no MACs (activations, pooling) can still take
# a visible share of the time, because they are bound by memory traffic, not arithmetic.
#
# The demos time with one thread (`threads=1`): on a small shared machine, a second worker
# thread that the operating system deschedules makes the other wait for a whole scheduler tick,
# and a layer of tens of microseconds then reads as a whole tick. The thread count is part of
# every latency's conditions.

# %%
if __name__ == "__main__":
    _cnn2 = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(32 * 16 * 16, 10))
    _fp = Profiler().profile_forward_pass(_cnn2, (8, 3, 32, 32), threads=1)
    print(_fp[["layer", "type", "macs", "activation_bytes", "latency_median_ms", "latency_share"]].to_string())
    print(f"whole model: {_fp.attrs['model_latency_median_ms']:.3f} ms; sum of layers: {_fp.attrs['operators_sum_ms']:.3f} ms")

# %% [markdown]
# ### Training costs more than inference
#
# A training step runs the forward pass, keeps every activation the backward pass needs, then
# computes two products per weight layer (the gradient for the input and for the weight). So
# backward typically costs about twice the forward pass, and the saved activations plus the
# gradients make training need far more memory than inference. `profile_backward_pass`
# measures both rather than assuming the factor.

# %%
if __name__ == "__main__":
    _bw = Profiler().profile_backward_pass(_cnn2, (8, 3, 32, 32), threads=1)
    print({k: round(v, 3) for k, v in _bw.items() if k != "methods"})

# %%
def test_unit_profile_passes():
    p = Profiler()
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    df = p.profile_forward_pass(m, (32, 256), samples=5, threads=1)
    assert list(df.columns) == list(LAYER_COLUMNS) + ["latency_median_ms", "latency_share"]
    assert (df["latency_median_ms"] > 0).all() and df.attrs["model_latency_median_ms"] > 0
    assert df.loc[0, "latency_median_ms"] > df.loc[1, "latency_median_ms"], "a 256x256 matmul should outlast a ReLU"
    row = p.profile_layer(m, "2", (32, 256), samples=3, threads=1)
    assert row["macs"] == 32 * 256 * 256 and row["latency_median_ms"] > 0
    m.train()
    bw = p.profile_backward_pass(m, (32, 256), iterations=5, threads=1)
    assert bw["backward_ms"] > 0 and bw["forward_backward_ms"] > bw["forward_ms"]
    assert bw["gradient_memory_mb"] == 2 * (256 * 256 + 256) * 4 / 2**20
    assert bw["peak_memory_mb"] >= bw["gradient_memory_mb"], "gradients are allocated during the step"
    assert m.training and all(q.grad is None for q in m.parameters()), "model state must be restored"


if __name__ == "__main__":
    test_unit_profile_passes()

# %% [markdown]
# ## Summaries: `quick_profile` and the weight distribution
#
# `quick_profile` gives the headline figures in one call, each with its method; for a plain
# function only latency can be had, and the other figures are `None` with the reason.
# `analyze_weight_distribution` describes each parameter tensor: percentiles, the fraction of
# exact zeros (what pruning creates and sparse kernels exploit) and norms. A weight tensor with
# a long tail (its 99th percentile far above its 75th) is harder to quantize to int8 with one
# scale.

# %%
#| export
def quick_profile(model: Any, input_tensor: Any, *, warmup: int = 5, iterations: int = 20,
                  threads: int | None = None, show: bool = True) -> dict[str, Any]:
    """Headline figures of a model on one input: parameters, MACs, FLOPs, memory, latency.

    Figures that cannot be had (anything but latency for a plain callable) are None, with the
    reason in `reasons`. With `show`, a readable summary is printed as well.

    >>> s = quick_profile(torch.nn.Linear(32, 8), (1, 32), iterations=3, show=False)
    >>> s["parameters"], s["macs"]
    (264, 256)
    """
    p = Profiler()
    a = adapt(model)
    out: dict[str, Any] = {"model": a.name, "kind": a.kind, "reasons": {}}
    if a.kind in ("callable", "forward"):
        reason = ("a plain callable" if a.kind == "callable" else "an object without parameters()") + \
            ": only latency can be measured"
        for key in ("parameters", "parameter_memory_mb", "macs", "flops", "activation_memory_mb", "peak_memory_mb"):
            out[key] = None
            out["reasons"][key] = reason
    else:
        x = _as_input(a, input_tensor, "input_tensor")
        out["parameters"] = p.count_parameters(a)
        walk_total = p.count_flops(a, x) if (a.kind == "torch" or hasattr(a.model, "layers")) else None
        out["flops"] = walk_total
        out["macs"] = walk_total // 2 if walk_total is not None else None
        if walk_total is None:
            out["reasons"]["flops"] = out["reasons"]["macs"] = "the numpy-style model exposes no `layers`"
        mem = p.measure_memory(a, x)
        for key in ("parameter_memory_mb", "activation_memory_mb", "peak_memory_mb"):
            out[key] = mem[key]
        out["methods"] = mem["methods"]
    out["latency_median_ms"] = p.latency_median_ms(a, input_tensor, warmup=warmup, iterations=iterations, threads=threads)
    if show:
        print(_format_summary(out))
    return out


def _format_summary(s: dict[str, Any]) -> str:
    def fmt(key: str, unit: str = "", spec: str = ",") -> str:
        v = s.get(key)
        return f"n/a ({s['reasons'][key]})" if v is None else f"{v:{spec}}{unit}"
    lines = [f"profile of {s['model']} ({s['kind']})",
             f"  parameters      {fmt('parameters')}",
             f"  parameter mem   {fmt('parameter_memory_mb', ' MiB', '.4f')}",
             f"  MACs            {fmt('macs')}",
             f"  FLOPs           {fmt('flops')}",
             f"  activations     {fmt('activation_memory_mb', ' MiB', '.4f')}",
             f"  peak memory     {fmt('peak_memory_mb', ' MiB', '.4f')}",
             f"  latency         {s['latency_median_ms']:.4f} ms (median)"]
    return "\n".join(lines)


def analyze_weight_distribution(model: Any, percentiles: Sequence[float] = (1, 5, 25, 50, 75, 95, 99)) -> pd.DataFrame:
    """Per-parameter statistics: count, mean, std, min, max, percentiles, sparsity, L1/L2 norms.

    `sparsity` is the fraction of exact zeros. Quantized (packed) weights are described by
    their dequantized values.

    >>> df = analyze_weight_distribution(torch.nn.Linear(4, 2), percentiles=(50,))
    >>> df.columns.tolist()[:3], len(df)
    (['parameter', 'shape', 'dtype'], 2)
    """
    try:
        pcts = [float(q) for q in percentiles]
    except (TypeError, ValueError):
        raise ValueError(f"percentiles: expected a sequence of numbers in [0, 100], got {percentiles!r}") from None
    if not pcts or any(not 0 <= q <= 100 for q in pcts):
        raise ValueError(f"percentiles: expected a non-empty sequence of numbers in [0, 100], got {percentiles!r}")
    a = adapt(model)
    _require_countable(a, "a weight distribution")
    rows = []
    for name, arr in Profiler._parameter_arrays(a):
        if isinstance(arr, torch.Tensor):
            t = arr.detach()
            t = t.dequantize() if t.is_quantized else t
            values = t.float().cpu().numpy().ravel()
            dtype = str(arr.dtype).replace("torch.", "")
        else:
            values = np.asarray(arr, dtype=np.float64).ravel()
            dtype = str(np.asarray(arr).dtype)
        row = {"parameter": name, "shape": tuple(arr.shape), "dtype": dtype, "count": values.size}
        if values.size:
            row.update({"mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
                        "max": float(values.max())})
            row.update({f"p{q:g}": float(v) for q, v in zip(pcts, np.percentile(values, pcts))})
            row.update({"sparsity": float(np.count_nonzero(values == 0) / values.size),
                        "l1_norm": float(np.abs(values).sum()), "l2_norm": float(np.sqrt((values.astype(np.float64) ** 2).sum()))})
        rows.append(row)
    if not rows:
        raise ValueError(f"model: '{a.name}' has no parameters to analyze")
    return pd.DataFrame(rows)

# %%
if __name__ == "__main__":
    quick_profile(_cnn2, (1, 3, 32, 32))
    quick_profile(lambda x: x @ x.T, torch.randn(64, 64))
    print(analyze_weight_distribution(_cnn2).round(4).to_string())

# %%
def test_unit_summaries():
    m = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5))
    with torch.no_grad():
        m[0].weight[:, :5] = 0.0  # half of the first weight matrix is exactly zero
    s = quick_profile(m, (2, 10), iterations=3, show=False)
    assert s["parameters"] == 10 * 20 + 20 + 20 * 5 + 5 and s["macs"] == 2 * (10 * 20 + 20 * 5)
    assert s["latency_median_ms"] > 0 and s["peak_memory_mb"] > 0
    c = quick_profile(lambda x: x * 2, torch.ones(4), iterations=3, show=False)
    assert c["parameters"] is None and "only latency" in c["reasons"]["parameters"] and c["latency_median_ms"] > 0
    df = analyze_weight_distribution(m, percentiles=(10, 90))
    assert df["parameter"].tolist() == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert df.loc[0, "sparsity"] == 0.5
    w = m[2].weight.detach().numpy().ravel()
    assert np.isclose(df.loc[2, "p90"], np.percentile(w, 90)) and np.isclose(df.loc[2, "l2_norm"], np.linalg.norm(w), rtol=1e-5)
    try:
        analyze_weight_distribution(m, percentiles=(50, 101))
        raise AssertionError("a percentile above 100 must raise")
    except ValueError as e:
        assert "percentiles" in str(e)


if __name__ == "__main__":
    test_unit_summaries()

# %% [markdown]
# ## Putting it together
#
# `test_module()` profiles models this notebook has not used: a small ResNet-style block with a
# residual add and batch norm, and a numpy-style MLP with a convolution in TinyTorch's style,
# and checks every figure against an independent reference.

# %%
def test_module():
    p = Profiler()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.pw = torch.nn.Conv2d(8, 12, 1)
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.head = torch.nn.Linear(12, 4)

        def forward(self, x):
            h = torch.relu(self.bn(self.stem(x)))
            h = h + self.dw(h)
            return self.head(self.pool(self.pw(h)).flatten(1))

    block, shape = Block(), (2, 3, 16, 16)
    assert p.count_parameters(block) == sum(q.numel() for q in block.parameters())
    with FlopCounterMode(display=False) as fc:
        block.eval()(torch.randn(*shape))
    assert p.count_flops(block, shape) == fc.get_total_flops()
    by_hand = 2 * 8 * 8 * 8 * (3 * 9) + 2 * 8 * 8 * 8 * 9 + 2 * 12 * 8 * 8 * 8 + 2 * 4 * 12
    assert p.count_macs(block, shape) == by_hand, (p.count_macs(block, shape), by_hand)
    df = p.layer_stats(block, shape)
    assert df["layer"].tolist() == ["stem", "bn", "dw", "pw", "pool", "head"]
    assert df["output_shape"].tolist() == [(2, 8, 8, 8), (2, 8, 8, 8), (2, 8, 8, 8), (2, 12, 8, 8), (2, 12, 1, 1), (2, 4)]
    assert df["activation_bytes"].tolist() == [4 * 2 * 8 * 64] * 3 + [4 * 2 * 12 * 64, 4 * 2 * 12, 4 * 2 * 4]
    mem = p.measure_memory(block, shape)
    assert mem["buffer_memory_mb"] * 2**20 == sum(b.numel() * b.element_size() for b in block.buffers())
    assert 0 < mem["memory_efficiency"] <= 1 and mem["peak_memory_mb"] > mem["parameter_memory_mb"]
    assert p.latency_median_ms(block, shape, warmup=2, iterations=5) > 0

    class Dense:  # TinyTorch style: weight (in, out), y = x @ W + b
        def __init__(self, n_in, n_out, seed):
            rng = np.random.default_rng(seed)
            self.weight = rng.standard_normal((n_in, n_out)).astype(np.float32)
            self.bias = np.zeros(n_out, dtype=np.float32)
        def forward(self, x):
            return x @ self.weight + self.bias

    class Relu:
        def forward(self, x):
            return np.maximum(x, 0)

    class NumpyMLP:
        def __init__(self):
            self.layers = [Dense(20, 30, 0), Relu(), Dense(30, 7, 1)]
        def forward(self, x):
            for layer in self.layers:
                x = layer.forward(x)
            return x
        def parameters(self):
            return [a for layer in self.layers for a in (getattr(layer, "weight", None), getattr(layer, "bias", None)) if a is not None]

    mlp = NumpyMLP()
    assert p.count_parameters(mlp) == 20 * 30 + 30 + 30 * 7 + 7
    assert p.count_macs(mlp, (5, 20)) == 5 * 30 * 20 + 5 * 7 * 30
    ndf = p.layer_stats(mlp, (5, 20))
    assert ndf["output_shape"].tolist() == [(5, 30), (5, 30), (5, 7)] and ndf["parameters"].sum() == 847
    nmem = p.measure_memory(mlp, (5, 20))
    assert nmem["parameter_memory_mb"] * 2**20 == 847 * 4 and nmem["activation_memory_mb"] * 2**20 == (150 + 150 + 35) * 4
    assert "tracemalloc" in nmem["methods"]["forward_peak_memory_mb"]
    assert p.latency_median_ms(mlp, (5, 20), warmup=2, iterations=5) > 0


if __name__ == "__main__":
    test_module()
    print("Module 15 profiler: all tests passed")
