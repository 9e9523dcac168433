"""Target devices (Module 19): datasheet table with sources, fit checks by precision, roofline
labels, host watch metrics against independent references, the Markdown table, the default artifacts."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from torch import nn

from tinytorch.benchmarking.devices import (
    FIT_COLUMNS, TARGET_DEVICES, benchmark_table_markdown, device_fit, devices_table, estimate_peak_activation_bytes,
    get_device, measure_watch_metrics, write_default_hardware_artifacts,
)
from tinytorch.benchmarking.digits import DigitsCNN
from tinytorch.benchmarking.hardware import roofline_estimate


def test_every_figure_has_a_source():
    assert {"stm32f446", "stm32h743", "rpi4", "jetson_nano"} <= set(TARGET_DEVICES)
    table = devices_table()
    for _, r in table.iterrows():
        sources = json.loads(r.sources)
        assert {"clock_mhz", "ram_kb", "flash_kb", "peak_macs_per_s", "memory_bandwidth_gbps"} <= set(sources)
    assert get_device("stm32f446").clock_mhz == 180 and get_device("stm32f446").ram_kb == 128


def test_fit_by_precision_on_an_mcu():
    # a 99k-parameter MLP: ~387 KB in fp32 (fits 512 KB of Flash), ~97 KB in int8
    mlp = nn.Sequential(nn.Linear(250, 380), nn.ReLU(), nn.Linear(380, 10))
    n = sum(p.numel() for p in mlp.parameters())
    df = device_fit(mlp, (1, 250), "stm32f446", ["fp32", "fp16", "int8"]).set_index("precision")
    assert set(df.reset_index().columns) == set(FIT_COLUMNS)
    assert df.loc["fp32", "weights_kb"] == pytest.approx(n * 4 / 1024)
    assert df.loc["int8", "weights_kb"] == pytest.approx(n / 1024)
    assert bool(df.loc["fp32", "fits_flash"]) == (n * 4 / 1024 <= 512)
    # activations: (250 + 380) floats at linear 1, (380 + 380) at relu -> 760 * 4 bytes peak
    assert df.loc["fp32", "peak_activation_kb"] == pytest.approx(760 * 4 / 1024)
    macs = 250 * 380 + 380 * 10
    r = roofline_estimate(macs, df.loc["int8", "bytes_moved"], 360e6, 0.72e9)
    assert df.loc["int8", "roofline_bound_ms"] == pytest.approx(r["roofline_bound_ms"])
    assert pd.isna(df.loc["fp16", "roofline_bound_ms"]) and df.loc["fp16", "bound"].startswith("n/a")
    too_big = nn.Linear(1024, 1024)  # 4 MB in fp32
    assert not device_fit(too_big, (1, 1024), "stm32h743", ["fp32"]).iloc[0].fits_flash


def test_peak_activation_residual_is_labelled_lower_bound():
    df = pd.DataFrame({"activation_bytes": [400, 400, 40]})
    assert estimate_peak_activation_bytes(df, 100) == 800


def test_watch_metrics_against_references():
    model = DigitsCNN()
    w = measure_watch_metrics(model, (2, 1, 8, 8), samples=3, startup_runs=2, cpu_window_s=0.2)
    ref = torch.utils.flop_counter.FlopCounterMode(display=False)
    with ref:
        model(torch.zeros(2, 1, 8, 8))
    assert w["flops"] == ref.get_total_flops()
    assert w["state_dict_tensor_bytes"] == sum(p.numel() for p in model.parameters()) * 4
    assert w["accuracy"] is None and "loader" in w["reasons"]["accuracy"]
    assert w["inference_median_ms"] is None and w["reasons"]["inference_median_ms"]
    assert w["throughput_sps"] == pytest.approx(2 / (w["latency_median_ms"] / 1e3))
    if w["temperature_c"] is None:
        assert w["reasons"]["temperature_c"]


def test_markdown_table_format():
    md = benchmark_table_markdown([{"model": "A", "task": "KWS", "accuracy": 0.5, "latency_median_ms": 2,
                                    "model_size_mb": 1, "platform": "p", "references": "[x](http://x)"}])
    assert md.splitlines()[1] == "|---|---|---|---|---|---|---|"
    assert md.splitlines()[2] == "| A | KWS | 50.0% | 2 | 1 | p | [x](http://x) |"
    with pytest.raises(ValueError, match="accuracy"):
        benchmark_table_markdown([{"model": "A", "task": "t", "accuracy": 98.0, "latency_median_ms": 1,
                                   "model_size_mb": 1, "platform": "p", "references": "-"}])


def test_unknown_device():
    with pytest.raises(ValueError, match="device"):
        device_fit(DigitsCNN(), (1, 1, 8, 8), "arduino")


def test_default_hardware_artifacts(tmp_path):
    paths = write_default_hardware_artifacts(tmp_path / "hw", repeats=3)
    for key in ("layerwise_breakdown", "precision_tradeoffs", "hardware_summary", "layerwise_activation_memory",
                "layerwise_macs", "sweep", "operator_profile", "hardware_totals", "device_fit", "benchmark_table"):
        assert paths[key].exists(), key
    sweep = pd.read_csv(paths["sweep"])
    assert {"fp32", "int8"} <= set(sweep.precision)
    assert (sweep.accuracy > 0.9).all(), "the trained digits CNN stays accurate in every precision that ran"
    summary = pd.read_csv(paths["hardware_summary"]).iloc[0]
    assert summary.estimated_total_macs == 9216 + 73728 + 1280
    assert not math.isnan(summary.achieved_bandwidth_gbps)


def test_device_as_a_hardware_profile_and_digits_fit():
    assert get_device("jetson_nano").peak_macs_per_s["fp16"] * 2 == 472e9, "472 GFLOPS fp16 = 236 G MAC/s"
    p = get_device("stm32f746").hardware_profile("int8")
    assert p.peak_macs_per_s == 432e6 and p.memory_limit_mb == pytest.approx(320 / 1024) and "st.com" in p.source
    df = device_fit(DigitsCNN(), (1, 1, 8, 8), "stm32f446", ["fp32"]).iloc[0]
    # conv1 reads 256 B and writes 4096 B; relu reads 4096 B and writes 4096 B -> 8 KB, weights stay in Flash
    assert df.peak_activation_kb == 8.0 == df.ram_needed_kb
    big = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 10))
    pi = device_fit(big, (1, 1024), "rpi4", ["fp32"]).iloc[0]
    assert pi.fits_flash is None and bool(pi.fits_ram), "a Pi keeps weights in RAM and has no on-board Flash"
    with pytest.raises(ValueError, match="precision"):
        device_fit(big, (1, 1024), "rpi4", ["fp64"])


def test_watch_metrics_with_a_pipeline_and_labels():
    from tinytorch.benchmarking.digits import digits_loader

    w = measure_watch_metrics(DigitsCNN(), (1, 1, 8, 8), loader=digits_loader("test"), preprocess=lambda v: v / 16.0,
                              raw_input=torch.full((1, 1, 8, 8), 8.0), samples=3, startup_runs=2, cpu_window_s=0.2)
    assert w["inference_median_ms"] > 0 and w["accuracy"] + w["error_rate"] == pytest.approx(1.0)
    assert w["serialized_bytes"] > w["state_dict_tensor_bytes"], "the file adds pickle framing and names to the raw tensors"
    assert all((w[k] is None) == (k in w["reasons"]) for k in ("temperature_c", "clock_mhz", "energy_mwh"))
    assert all(k in w["methods"] or k in w["reasons"] for k in w if k not in ("methods", "reasons"))
    with pytest.raises(ValueError, match="raw_input"):
        measure_watch_metrics(DigitsCNN(), (1, 1, 8, 8), preprocess=lambda v: v)


def test_markdown_table_escapes_and_missing_fields():
    md = benchmark_table_markdown([{"model": "m", "task": "t", "accuracy": None, "latency_median_ms": None,
                                    "model_size_mb": 0.5, "platform": "x86 | 2 threads", "references": "-"}])
    row = md.splitlines()[2]
    assert row.count("n/a") == 2 and "x86 \\| 2 threads" in row
    with pytest.raises(ValueError, match="task"):
        benchmark_table_markdown([{"model": "m"}])


def test_report_without_labelled_data(tmp_path):
    "A model no labelled data fits: the sweep is unavailable with the reason, the latency timed without it."
    from tinytorch.benchmarking.devices import write_hardware_report

    net = nn.Sequential(nn.Conv1d(3, 8, 5), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 28, 4))  # not an image model
    paths = write_hardware_report(net, None, (2, 3, 32), tmp_path, devices=["stm32f446"], repeats=3,
                                  sweep_unavailable_reason="no labelled data fits input shape (2, 3, 32)")
    summary = pd.read_csv(paths["hardware_summary"]).iloc[0]
    assert "unavailable: no labelled data fits" in summary.skipped_precisions, summary.skipped_precisions
    assert summary.latency_source.startswith("time_model")
    assert int(summary.estimated_total_macs) == 2 * (8 * 3 * 5 * 28 + 8 * 28 * 4), "MACs for this input shape"
    assert "unavailable" in paths["benchmark_table"].read_text(encoding="utf-8")
