"""Optimisation helpers (int8, pruning, half precision): behaviour checked against independent
references (torch.save sizes, sum(p.numel()), torch.nn.utils.prune, accuracy on real digits)."""
import copy

import pytest
import torch
from torch import nn

from tinytorch.benchmarking.digits import DigitsCNN, accuracy_on, default_digits_model, load_digits_split
from tinytorch.benchmarking.optimize import (
    PRECISIONS, cast_precision, prune_magnitude, quantize_int8, sparsity, state_dict_bytes,
)
from tinytorch.profiling.timing import time_model


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits_split("test")
    Xtr, _ = load_digits_split("train")
    return default_digits_model(), X, y, Xtr


def _snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _unchanged(model, snap):
    return all(torch.equal(v, snap[k]) for k, v in model.state_dict().items())


def test_static_int8_digits_accuracy_and_size(digits):
    base, X, y, Xtr = digits
    snap = _snapshot(base)
    q = quantize_int8(base, "static", calibration_data=Xtr[:320].split(64))
    assert _unchanged(base, snap), "the baseline must be untouched"
    acc_b, acc_q = accuracy_on(base, X, y), accuracy_on(q, X, y)
    # stated tolerance: static int8 loses at most 2 accuracy points on the 450 real test images
    assert acc_q >= acc_b - 0.02, (acc_b, acc_q)
    assert q.tinytorch_quantization["mode"] == "static"
    assert q.tinytorch_quantization["path"].startswith("torch.ao.quantization")
    assert q.tinytorch_quantization["backend"] in torch.backends.quantized.supported_engines
    # 6090 float32 weights = 24,360 B of data; int8 data is 6,090 B plus scales and framing
    assert state_dict_bytes(q) < 0.6 * state_dict_bytes(base)
    # the int8 model runs through the shared timing core like any other model
    s = time_model(q, (1, 1, 8, 8), samples=3)
    assert s.median_ms > 0


def test_dynamic_int8_is_about_4x_smaller_on_a_linear_model():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    n_params = sum(p.numel() for p in mlp.parameters())
    fp32 = state_dict_bytes(mlp)
    assert fp32 >= 4 * n_params  # independent reference: 4 bytes per float32 parameter
    q = quantize_int8(mlp, "dynamic")
    ratio = fp32 / state_dict_bytes(q)
    assert 3.5 <= ratio <= 4.2, ratio
    assert q.tinytorch_quantization == {"path": "torch.ao.quantization.quantize_dynamic", "mode": "dynamic",
                                        "backend": q.tinytorch_quantization["backend"]}
    x = torch.randn(16, 512)
    with torch.inference_mode():
        ref, out = mlp(x), q(x)
    assert (ref.argmax(1) == out.argmax(1)).float().mean() >= 0.9


def test_static_int8_falls_back_to_eager_for_untraceable_models(digits):
    _, X, _, Xtr = digits

    class DataDependent(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.relu = nn.ReLU()
            self.flat = nn.Flatten()
            self.fc = nn.Linear(4 * 64, 10)

        def forward(self, x):
            h = self.relu(self.conv(x))
            if h.shape[0] > 0:  # control flow on a traced value: FX cannot trace it
                h = self.flat(h)
            return self.fc(h)

    torch.manual_seed(0)
    m = DataDependent().eval()
    q = quantize_int8(m, "static", calibration_data=[Xtr[:64]])
    assert "eager" in q.tinytorch_quantization["path"]
    with torch.inference_mode():
        diff = (q(X[:32]) - m(X[:32])).abs().max() / m(X[:32]).abs().max()
    assert diff < 0.1


def test_quantize_bad_input():
    m = nn.Linear(4, 2)
    with pytest.raises(ValueError, match="mode"):
        quantize_int8(m, "int4")
    with pytest.raises(ValueError, match="calibration_data"):
        quantize_int8(m, "static")
    with pytest.raises(ValueError, match="backend"):
        quantize_int8(m, "dynamic", backend="tpu")
    with pytest.raises(TypeError, match="model"):
        quantize_int8(lambda x: x)


@pytest.mark.parametrize("scope", ["global", "layer"])
@pytest.mark.parametrize("amount", [0.3, 0.7])
def test_prune_sparsity_matches_amount(scope, amount):
    torch.manual_seed(3)
    m = DigitsCNN()
    snap = _snapshot(m)
    p = prune_magnitude(m, amount, scope=scope)
    assert _unchanged(m, snap)
    # independent count of zeros over the Linear/Conv weights
    ws = [p.conv1.weight, p.conv2.weight, p.classifier.weight]
    measured = sum(int((w == 0).sum()) for w in ws) / sum(w.numel() for w in ws)
    assert measured == pytest.approx(sparsity(p))
    assert sparsity(p) == pytest.approx(amount, abs=0.01)
    assert not any(n.endswith("_mask") for n, _ in p.named_buffers()), "pruning must be permanent"
    assert set(p.state_dict()) == set(m.state_dict())


def test_prune_digits_keeps_accuracy(digits):
    base, X, y, _ = digits
    p = prune_magnitude(base, 0.5)
    assert accuracy_on(p, X, y) >= accuracy_on(base, X, y) - 0.03


def test_prune_bad_input():
    with pytest.raises(ValueError, match="amount"):
        prune_magnitude(nn.Linear(4, 4), 1.5)
    with pytest.raises(ValueError, match="scope"):
        prune_magnitude(nn.Linear(4, 4), 0.5, scope="channel")
    with pytest.raises(ValueError, match="model"):
        prune_magnitude(nn.ReLU(), 0.5)


def test_cast_precision_halves_parameter_bytes(digits):
    base, X, y, _ = digits
    p32 = sum(p.numel() * p.element_size() for p in base.parameters())
    for prec in ("fp16", "bf16"):
        h = cast_precision(base, prec)
        assert sum(p.numel() * p.element_size() for p in h.parameters()) * 2 == p32
        assert next(base.parameters()).dtype == torch.float32
    h = cast_precision(base, "fp16")
    acc = accuracy_on(h, X.half(), y)
    assert acc >= accuracy_on(base, X, y) - 0.01
    assert cast_precision(base, "fp32") is not base
    assert PRECISIONS == ("fp32", "fp16", "bf16", "int8")
    with pytest.raises(ValueError, match="fp32.*fp16.*bf16"):
        cast_precision(base, "fp64")
    with pytest.raises(ValueError, match="quantize_int8"):
        cast_precision(base, "int8")
