"""Hardware analysis and hardware profile (Module 19): layer-wise MACs and bytes against hand
computation on three architectures, the summary's arithmetic, sweeps, artifacts, batch sizing."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from tinytorch.benchmarking.digits import DigitsCNN, digits_loader
from tinytorch.benchmarking.hardware import (
    HARDWARE_ARTIFACTS, LAYERWISE_COLUMNS, PLOT_DPI, SUMMARY_KEYS, SWEEP_COLUMNS, TRADEOFF_COLUMNS,
    estimate_layerwise_stats, precision_tradeoff_table, roofline_estimate, save_hardware_artifacts,
    summarize_hardware, sweep,
)
from tinytorch.benchmarking.hardware_profile import (
    OPERATOR_COLUMNS, TOTALS_KEYS, HardwareProfile, auto_adjust_batch_size, build_hardware_profile_table,
    compute_utilization, estimate_batch_memory_mb, write_hardware_profile_artifacts,
)


def conv_macs(c_in, c_out, k, h_out, w_out, groups=1):
    return c_out * h_out * w_out * (c_in // groups) * k * k


def row(df, layer, nth=0):
    return df[df.layer == layer].iloc[nth]


def test_digits_cnn_matches_hand_computation():
    B = 3
    df = estimate_layerwise_stats(DigitsCNN(), B, (1, 8, 8))
    assert list(df.columns) == list(LAYERWISE_COLUMNS)
    assert row(df, "conv1").macs == B * conv_macs(1, 16, 3, 8, 8)
    assert row(df, "conv2").macs == B * conv_macs(16, 32, 3, 4, 4)
    assert row(df, "classifier").macs == B * 128 * 10
    assert row(df, "conv1").parameter_bytes == (16 * 9 + 16) * 4
    assert row(df, "conv2").activation_bytes == B * 32 * 4 * 4 * 4
    assert row(df, "pool", 1).output_elements == B * 32 * 2 * 2, "the second call of the shared pool"
    assert df.parameter_bytes.sum() == 4 * sum(p.numel() for p in DigitsCNN().parameters())


class DepthwiseSeparable(nn.Module):
    "MobileNet-style block: depthwise 3x3 (groups = channels), pointwise 1x1, classifier."

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.pw = nn.Conv2d(8, 24, 1)
        self.head = nn.Linear(24, 5)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = torch.relu(self.pw(self.dw(x)))
        return self.head(x.mean(dim=(2, 3)))


def test_depthwise_separable_matches_hand_computation():
    B = 2
    df = estimate_layerwise_stats(DepthwiseSeparable(), B, (3, 16, 16))
    assert row(df, "stem").macs == B * conv_macs(3, 8, 3, 8, 8)
    assert row(df, "dw").macs == B * conv_macs(8, 8, 3, 8, 8, groups=8) == B * 8 * 8 * 8 * 9
    assert row(df, "dw").parameter_bytes == 8 * 9 * 4, "depthwise: one 3x3 filter per channel, no bias"
    assert row(df, "pw").macs == B * conv_macs(8, 24, 1, 8, 8)
    assert row(df, "head").macs == B * 24 * 5
    assert row(df, "pw").activation_bytes == B * 24 * 8 * 8 * 4
    # independent reference: torch's own FLOP counter on the whole model (FLOPs = 2 x MACs)
    model = DepthwiseSeparable()
    ref = torch.utils.flop_counter.FlopCounterMode(display=False)
    with ref:
        model(torch.zeros(B, 3, 16, 16))
    assert 2 * df.macs.sum() == ref.get_total_flops()


class ResidualBlock(nn.Module):
    def __init__(self, c=6):
        super().__init__()
        self.conv_a = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.conv_b = nn.Conv2d(c, c, 3, padding=1)
        self.fc = nn.Linear(c * 5 * 5, 4)

    def forward(self, x):
        y = self.conv_b(torch.relu(self.bn(self.conv_a(x))))
        return self.fc(torch.flatten(torch.relu(x + y), 1))


def test_residual_block_matches_hand_computation():
    B, c = 4, 6
    df = estimate_layerwise_stats(ResidualBlock(c).eval(), B, (c, 5, 5))
    for name in ("conv_a", "conv_b"):
        assert row(df, name).macs == B * conv_macs(c, c, 3, 5, 5)
        assert row(df, name).parameter_bytes == (c * c * 9 + c) * 4
    assert row(df, "bn").parameter_bytes == 2 * c * 4, "BatchNorm weight and bias (running stats are buffers)"
    assert row(df, "fc").macs == B * c * 25 * 4
    assert set(df.layer) == {"conv_a", "bn", "conv_b", "fc"}, "only leaf modules that ran have rows"


def test_bad_models_and_arguments():
    with pytest.raises(ValueError, match="input_shape"):
        estimate_layerwise_stats(DigitsCNN(), 1, ())
    with pytest.raises(TypeError):
        estimate_layerwise_stats(lambda x: x, 1, (1, 8, 8))
    with pytest.raises(Exception, match="conv1|shape|size"):
        estimate_layerwise_stats(DigitsCNN(), 1, (3, 8, 8))  # wrong channel count: the model's error, named


def test_summary_arithmetic_and_verdicts():
    df = estimate_layerwise_stats(DigitsCNN(), 1, (1, 8, 8))
    total_bytes = int(df.parameter_bytes.sum() + df.activation_bytes.sum())
    total_macs = 9216 + 73728 + 1280
    s = summarize_hardware(df, latency_ms=0.05, memory_bandwidth_gbps=20.0, peak_gmacs=50.0)
    assert set(SUMMARY_KEYS) <= set(s)
    assert s["estimated_total_bytes"] == total_bytes and s["estimated_total_macs"] == total_macs
    assert math.isclose(s["achieved_bandwidth_gbps"], total_bytes / 0.05e-3 / 1e9)
    assert math.isclose(s["bandwidth_utilization"], s["achieved_bandwidth_gbps"] / 20.0)
    assert math.isclose(s["achieved_gmacs"], total_macs / 0.05e-3 / 1e9)
    roof = roofline_estimate(total_macs, total_bytes, 50e9, 20e9)
    assert math.isclose(s["roofline_bound_ms"], roof["roofline_bound_ms"])
    assert s["verdict"].startswith("overhead-bound"), "0.05 ms is far above a ~2 µs roofline bound"
    fast = summarize_hardware(df, latency_ms=roof["roofline_bound_ms"], memory_bandwidth_gbps=20.0, peak_gmacs=50.0)
    assert fast["verdict"] == roof["bound"]


def test_roofline_regimes():
    mem = roofline_estimate(1e6, 1e9, 1e12, 1e10)
    assert mem["bound"] == "memory-bound" and math.isclose(mem["roofline_bound_ms"], 100.0)
    comp = roofline_estimate(1e12, 1e6, 1e12, 1e10)
    assert comp["bound"] == "compute-bound" and math.isclose(comp["roofline_bound_ms"], 1000.0)


def test_sweep_with_real_runs():
    torch.manual_seed(0)
    from tinytorch.benchmarking.digits import default_digits_model

    model = default_digits_model()
    df = sweep(model, digits_loader("test", 150), ["fp32", "fp16", "int8"], [1, 8],
               {"min_accuracy": 0.9, "max_memory_mb": 0.015, "max_latency_mean_ms": 1e6}, repeats=4, calibration_data=digits_loader("train", 64))
    assert list(df.columns) == list(SWEEP_COLUMNS) and len(df) == 6
    by = df.groupby("precision").first()
    assert not by.loc["fp32", "accepted"] and by.loc["fp32", "violations"] == "max_memory_mb"
    assert by.loc["fp16", "accepted"] and by.loc["int8", "accepted"]
    assert math.isclose(by.loc["fp16", "memory_mb"] * 2, by.loc["fp32", "memory_mb"])
    from tinytorch.benchmarking.results import serialized_bytes
    assert by.loc["fp32", "model_size_bytes"] == serialized_bytes(model)[0], "the model size: the saved file's bytes"
    assert by.loc["int8", "model_size_bytes"] < 0.6 * by.loc["fp32", "model_size_bytes"]
    assert abs(by.loc["int8", "accuracy"] - by.loc["fp32", "accuracy"]) <= 0.03
    t = precision_tradeoff_table(df)
    assert df.latency_ms.tolist() == df.latency_mean_ms.tolist(), "the original course code's latency_ms is the alias of the mean"
    assert list(t.columns) == list(TRADEOFF_COLUMNS) and list(t.latency_mean_ms_mean) == sorted(t.latency_mean_ms_mean)
    assert t.latency_ms_mean.tolist() == t.latency_mean_ms_mean.tolist()
    with pytest.raises(ValueError, match="max_latency_ms"):  # the old, ambiguous key is refused, naming it
        sweep(model, digits_loader("test", 150), ["fp32"], [1], {"max_latency_ms": 1.0})
    with pytest.raises(ValueError, match="accepted"):
        precision_tradeoff_table(df.drop(columns=["accepted"]))
    with pytest.raises(ValueError, match="precision"):
        sweep(model, digits_loader("test"), ["fp64"], [1])
    with pytest.raises(ValueError, match="min_accuracy"):
        sweep(model, digits_loader("test"), ["fp32"], [1], {"min_accuracy": -1})


def test_artifacts_columns_and_dpi(tmp_path):
    from PIL import Image

    layers = estimate_layerwise_stats(DigitsCNN(), 1, (1, 8, 8))
    summary = summarize_hardware(layers, 0.1, 10.0)
    table = pd.DataFrame([{c: 1.0 for c in TRADEOFF_COLUMNS} | {"precision": "fp32"}])
    paths = save_hardware_artifacts(tmp_path, layers, table, summary)
    assert {p.name for p in paths.values()} == set(HARDWARE_ARTIFACTS.values())
    for key in ("layerwise_breakdown", "precision_tradeoffs", "hardware_summary"):
        paths[key].read_text(encoding="utf-8")  # valid UTF-8
    assert list(pd.read_csv(paths["layerwise_breakdown"]).columns) == list(LAYERWISE_COLUMNS)
    for key in ("layerwise_activation_memory", "layerwise_macs"):
        img = Image.open(paths[key])
        assert img.format == "PNG" and round(img.info["dpi"][0]) == PLOT_DPI == 180


def test_batch_memory_and_auto_adjust():
    assert estimate_batch_memory_mb(2**10, 2**10) == 8.0, "float64 default: 8 bytes per feature"
    assert auto_adjust_batch_size(128, 2**10, 1.0) == 128, "8 KB per sample: 128 x 8 KB = 1 MB fits exactly"
    assert auto_adjust_batch_size(129, 2**10, 1.0) == 64
    assert auto_adjust_batch_size(1, 2**10, 1.0) == 1
    with pytest.raises(ValueError, match="batch of 1"):
        auto_adjust_batch_size(4, 2**20, 0.5)
    with pytest.raises(ValueError, match="memory_limit_mb"):
        auto_adjust_batch_size(4, 10, 0)
    with pytest.raises(ValueError, match="batch_size"):
        auto_adjust_batch_size(0, 10, 1.0)


def test_utilization_edges():
    assert compute_utilization(0.0, 1.0) == 0.0 and compute_utilization(1.0, 1.0) == 1.0
    assert compute_utilization(3.0, 2.0) == 1.0
    for cap in (0, -1, float("inf")):
        with pytest.raises(ValueError, match="capacity"):
            compute_utilization(1.0, cap)


def test_profile_table_estimated_and_written(tmp_path):
    dev = HardwareProfile("m7", memory_limit_mb=0.3, peak_macs_per_s=4.8e8, memory_bandwidth_gbps=3.84, cache_kb=64)
    p = build_hardware_profile_table(DigitsCNN(), (1, 1, 8, 8), device_profile=dev, stream_interval_ms=1.0)
    ops = p["operator_profile"]
    layers = estimate_layerwise_stats(DigitsCNN(), 1, (1, 8, 8))
    expect = [roofline_estimate(r.macs, r.parameter_bytes + r.activation_bytes, 4.8e8, 3.84e9)["roofline_bound_ms"]
              for r in layers.itertuples()]
    assert ops.roofline_bound_ms.tolist() == pytest.approx(expect) and ops.latency_ms.tolist() == pytest.approx(expect)
    assert ops.latency_median_ms.isna().all(), "nothing was measured on the device: no median"
    assert p["totals"]["operators_sum_ms"] == pytest.approx(sum(expect)) == p["totals"]["latency_ms"]
    assert math.isclose(p["totals"]["stream_utilization"], sum(expect) / 1.0)
    assert p["edge_constraints"]["cache_sensitivity"].startswith("low")
    paths = write_hardware_profile_artifacts(p, tmp_path)
    assert list(pd.read_csv(paths["operator_profile"]).columns) == list(OPERATOR_COLUMNS)
    assert set(TOTALS_KEYS) <= set(
        pd.read_csv(paths["hardware_totals"]).columns)


def test_roofline_arguments_and_numpy_numbers():
    import numpy as np

    assert roofline_estimate(np.int64(1000), np.float64(10.0), 1e6, 1e6)["bound"] == "compute-bound"
    for args, arg in (((1e6, 1e6, 0, 1e9), "peak_macs_per_s"), ((1e6, 1e6, 1e9, -1), "bandwidth_bytes_per_s"),
                      ((-1, 1e6, 1e9, 1e9), "macs"), ((1e6, float("nan"), 1e9, 1e9), "bytes_moved")):
        with pytest.raises(ValueError, match=arg):
            roofline_estimate(*args)


def test_summary_without_a_peak_and_far_above_the_ridge():
    df = pd.DataFrame({"layer": ["a", "b"], "output_elements": [100, 10], "parameter_bytes": [4000, 400],
                       "activation_bytes": [400, 40], "macs": [2_000_000, 4_000]})
    s = summarize_hardware(df, latency_ms=0.5, memory_bandwidth_gbps=4.0)
    assert s["verdict"] == "not memory-bound" and "peak_gmacs" in s["verdict_method"]
    # intensity 2,004,000 / 4,840 = 414 MAC/B, far above the ridge 1e9 / 4e9 = 0.25 MAC/B
    r = summarize_hardware(df, latency_ms=0.5, memory_bandwidth_gbps=4.0, peak_gmacs=1.0)
    assert r["ridge_point"] == 0.25 and r["verdict"] == "compute-bound"
    with pytest.raises(ValueError, match="macs"):
        summarize_hardware(df.drop(columns=["macs"]), 1.0, 4.0)
    with pytest.raises(ValueError, match="latency_ms"):
        summarize_hardware(df, 0.0, 4.0)


def test_sweep_refuses_unknown_constraints_and_names_missing_columns():
    with pytest.raises(ValueError, match="max_fun"):
        sweep(DigitsCNN(), digits_loader("test"), ["fp32"], [1], {"max_fun": 1.0})
    with pytest.raises(ValueError, match="calibration_data"):
        sweep(DigitsCNN(), digits_loader("test"), ["int8"], [1])
    df = pd.DataFrame([{"precision": "fp32", "accuracy": 0.9, "latency_ms": 1.0, "memory_mb": 1.0, "accepted": True}])
    with pytest.raises(ValueError, match="energy_proxy_j"):
        precision_tradeoff_table(df)


def test_artifacts_leave_no_temporary_files(tmp_path):
    layers = estimate_layerwise_stats(DigitsCNN(), 1, (1, 8, 8))
    table = pd.DataFrame([{c: 1.0 for c in TRADEOFF_COLUMNS} | {"precision": "fp32"}])
    save_hardware_artifacts(tmp_path / "hw", layers, table, summarize_hardware(layers, 0.1, 10.0))
    assert not list((tmp_path / "hw").glob(".*tmp*")), "written atomically: no temporary file left behind"
    assert int(layers[layers.layer == "pool"].macs.sum()) == 0, "pooling does no multiply-accumulates"


def test_profile_table_measured_here():
    p = build_hardware_profile_table(DigitsCNN(), (1, 1, 8, 8), stream_interval_ms=20.0, samples=3)
    ops = p["operator_profile"]
    assert len(ops) == 7 and (ops.latency_median_ms > 0).all() and ops.method.iloc[0].startswith("measured")
    assert ops.roofline_bound_ms.isna().all() and ops.latency_ms.tolist() == ops.latency_median_ms.tolist()
    assert ops.set_index("operator").loc["conv2", "memory_kb"] == pytest.approx((18560 + 2048) / 1024)
    t = p["totals"]
    assert t["operators_sum_ms"] == t["latency_ms"] == pytest.approx(ops.latency_median_ms.sum())
    assert t["model_latency_median_ms"] > 0
    assert t["stream_utilization"] == pytest.approx(t["latency_ms"] / 20.0)
    assert p["precision_tradeoffs"]["int8_memory_kb"] * 4 == p["precision_tradeoffs"]["fp32_memory_kb"] == 6090 * 4 / 1024


def test_profile_table_on_a_small_cache_and_bad_profiles(tmp_path):
    import json

    mcu = HardwareProfile("mcu", memory_limit_mb=0.25, peak_macs_per_s=1e8, memory_bandwidth_gbps=0.5, cache_kb=16)
    p = build_hardware_profile_table(DigitsCNN(), (1, 1, 8, 8), device_profile=mcu)
    conv2 = p["operator_profile"].set_index("operator").loc["conv2"]
    assert conv2.roofline_bound_ms == pytest.approx(max(73728 / 1e8, (18560 + 2048) / 0.5e9) * 1e3)
    assert p["edge_constraints"]["cache_sensitivity"].startswith("high"), "conv2's 20 KB exceed a 16 KB cache"
    assert p["edge_constraints"]["bottleneck"].startswith("conv2")
    assert p["totals"]["stream_utilization"] is None and "stream_interval_ms" in p["totals"]["stream_utilization_reason"]
    paths = write_hardware_profile_artifacts(p, tmp_path)
    assert json.loads(paths["hardware_profile"].read_text())["edge_constraints"] == p["edge_constraints"]
    with pytest.raises(ValueError, match="peak_macs_per_s"):
        build_hardware_profile_table(DigitsCNN(), (1, 1, 8, 8), device_profile=HardwareProfile("x", 1.0))
    with pytest.raises(ValueError, match="operator_profile"):
        write_hardware_profile_artifacts({"totals": {}}, tmp_path)
    with pytest.raises(ValueError, match="memory_limit_mb"):
        HardwareProfile("x", 0)
    with pytest.raises(ValueError, match="input_shape"):
        build_hardware_profile_table(DigitsCNN(), (8,))
