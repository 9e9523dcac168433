"""Four more graded tasks of Module 19 (issue 14), checked as a student meets them: the release's
code cells with a stub filled by an independently written solution pass the graded test, the stub
itself is reported by name, and each typical wrong solution fails with a message that names the
mistake.

- hardware_dev `summarize_hardware`: bytes and MACs of a measured run, the achieved rates, the verdict
- metrics_dev `collect_metrics`: latency, throughput, memory and energy of the converted model
- tinymlperf_dev `_latency`: MLPerf Tiny's latency from the median window throughput, and the single stream
- energy_dev `RaplReader._discover`: the RAPL powercap zones to count
"""
from __future__ import annotations

import re
import sys

import pytest

from tests.test_lesson import run_student_cells
from tests.test_lesson_hardware import MY_ROOFLINE
from tests.test_lesson_tinymlperf import MY_DECISION

NS = "lesson_more_ns"

# ---- independent solutions (the scaffolds' locals) ---------------------------------------------

# hardware: sums in Python, rates divided in another order, a dict() built up and updated
MY_SUMMARY = '''
moved = sum(int(v) for v in layer_df["parameter_bytes"]) + sum(int(v) for v in layer_df["activation_bytes"])
work = sum(int(v) for v in layer_df["macs"])
gbps = moved / 1e9 / seconds
out = dict(estimated_total_bytes=moved, estimated_total_macs=work, achieved_bandwidth_gbps=gbps,
           configured_memory_bandwidth_gbps=bandwidth, bandwidth_utilization=gbps / bandwidth,
           achieved_gmacs=work / 1e9 / seconds)
if peak_gmacs is None:
    out["verdict"] = "not memory-bound" if out["bandwidth_utilization"] < 0.5 else "memory-bound"
    out["verdict_method"] = "utilization of the configured bandwidth (no peak_gmacs, so no roofline)"
    return out
est = roofline_estimate(work, moved, peak_gmacs * 1e9, bandwidth * 1e9)
frac = est["roofline_bound_ms"] / (seconds * 1000.0)
out.update(peak_gmacs=float(peak_gmacs), arithmetic_intensity=est["arithmetic_intensity"],
           ridge_point=est["ridge_point"], roofline_bound_ms=est["roofline_bound_ms"], roofline_attainment=frac,
           verdict=est["bound"] if frac >= 0.1 else "overhead-bound (roofline says " + est["bound"] + ")",
           verdict_method=ROOFLINE_METHOD + f": the run reaches {frac:.1%} of the bound")
return out
'''

# metrics: the scaled branch first, the seconds kept apart, PerfMetrics built positionally
MY_COLLECT = '''
timed = latency_result(converted, x, repeats)
factor = float(latency_multiplier)
tag = "" if factor == 1 else f" x {factor:g} (latency_scaled_by={factor:g})"
for name in ("latency_ms", "latency_std_ms", "latency_p95_ms", "latency_median_ms"):
    methods[name] = "measured: timing core" + tag
methods["throughput_sps"] = "derived: samples per second of the mean latency"
methods["memory_mb"] = "measured: state tensors by dtype"
size_mb = model_memory_mb(converted)
memory_result = CountResult("memory", [state_dict_tensor_bytes(converted)], unit="bytes")
mean_s = timed.mean * factor / 1000.0
joules = None
if factor != 1:
    if power_watts is None:
        reasons["energy_j"] = "a scaled latency: the host counter does not apply; give power_watts for an estimate"
    else:
        joules = mean_s * power_watts
        methods["energy_j"] = "estimated: latency x power (scaled latency)"
else:
    runner = adapt(converted)
    inp = runner.to_input(x)
    with runner.inference():
        e = measure_energy(lambda: runner.forward(inp), power_watts=power_watts, latency_s=timed.mean / 1000.0,
                           sync=runner.sync)
    joules = e.joules_per_call
    if joules is None:
        reasons["energy_j"] = e.reason
    else:
        methods["energy_j"] = e.method
return PerfMetrics(acc_result.mean, timed.mean * factor, timed.std * factor, timed.p95 * factor, batch_size / mean_s,
                   size_mb, joules, latency_median_ms=timed.median * factor, precision=precision, device=str(dev),
                   batch_size=batch_size, latency_scaled_by=factor, methods=methods, reasons=reasons,
                   conditions={**timed.metadata, "measured_latency_mean_ms": timed.mean, "measured_latency_p95_ms": timed.p95},
                   results={"accuracy": acc_result, "latency": timed, "memory": memory_result})
'''

# tinymlperf: an explicit loop, calls over total seconds per window, the statistics by getattr
MY_LATENCY = '''
per_window = max(3, num_runs // windows)
window_runs, rates = [], []
for _ in range(windows):
    t = timer(fn, warmup=2, samples=per_window, sync=a.sync, device=str(a.device))
    window_runs.append(t)
    rates.append(len(t.per_call_ns) / (sum(t.per_call_ns) / 1e9))
mid = statistics.median(rates)
one = timer(fn, warmup=2, samples=num_runs, max_overhead_fraction=0.02, sync=a.sync, device=str(a.device))
res = BenchmarkResult("single_stream_latency", one.per_call_ms, unit="ms", metadata=one.metadata())
stats = {f"latency_{k}_ms": getattr(res, k) for k in ("mean", "std", "max", "p50", "p90", "p99")}
return {"latency_from_throughput_ms": 1e3 / mid, "throughput_sps": mid, "window_throughput_sps": rates,
        "window_timing": [t.metadata() for t in window_runs], "single_stream": res.to_dict(),
        "method": "latency_from_throughput_ms: 1 / the median window throughput", "latency_median_ms": res.median,
        **stats, "p90_over": "per-inference samples" if one.calls_per_sample == 1 else f"blocks of {one.calls_per_sample}"}
'''

# energy: fullmatch, the counter path kept, the choice written as one expression
MY_ZONES = '''
if not self.root.exists():
    self.unavailable_reason = f"RAPL unavailable: no powercap folder {self.root}"
    return
found = []
for entry in sorted(self.root.iterdir(), key=lambda p: p.name):
    counter = entry / "energy_uj"
    if _TOP_ZONE.fullmatch(entry.name) is None or not counter.exists():
        continue
    try:
        label = (entry / "name").read_text().strip() if (entry / "name").exists() else entry.name
        top = int((entry / "max_energy_range_uj").read_text())
        int(counter.read_text())
    except PermissionError as err:
        self.unavailable_reason = f"{counter}: {err}; RAPL counters are root-only since Linux 5.10"
        return
    except (OSError, ValueError) as err:
        self.unavailable_reason = f"{counter} unreadable: {err}"
        return
    found.append(RaplZone(entry, label, top))
keep = [z for z in found if z.name.startswith("package")] or [z for z in found if z.name != "psys"]
if keep:
    self.zones = keep
else:
    self.unavailable_reason = f"no usable intel-rapl zone in {self.root}"
'''

# the tasks these build on, solved as other lesson tests solve them
MY_MEMORY = """
nbytes = 0
for t in _state_tensors(model):
    nbytes += t.element_size() * t.numel()
return nbytes / 2**20
"""
PREREQUISITES = {"hardware_dev.ipynb": {"hardware-roofline": {"roofline_estimate": MY_ROOFLINE}},
                 "metrics_dev.ipynb": {"metrics-model-memory": {"model_memory_mb": MY_MEMORY}},
                 "tinymlperf_dev.ipynb": {"tinymlperf-compliance-decision": {"compliance_decision": MY_DECISION}}}

TASKS = {  # grade id: (notebook, stub, graded test, independent solution)
    "hardware-summary": ("hardware_dev.ipynb", "summarize_hardware", "test_unit_summarize_hardware", MY_SUMMARY),
    "metrics-collect": ("metrics_dev.ipynb", "collect_metrics", "test_unit_collect_metrics", MY_COLLECT),
    "tinymlperf-latency": ("tinymlperf_dev.ipynb", "_latency", "test_unit_latency", MY_LATENCY),
    "energy-rapl-zones": ("energy_dev.ipynb", "RaplReader._discover", "test_unit_rapl_zones", MY_ZONES),
}


def run_cells(notebook: str, fills: dict[str, dict[str, str]]) -> dict:
    """The release's cells of `notebook` with the stubs in `fills` ({grade_id: {qualname: body}})
    filled, and the tasks the notebook's others build on (`PREREQUISITES`) solved."""
    return run_student_cells(notebook, {**PREREQUISITES.get(notebook, {}), **fills}, NS)


@pytest.fixture(autouse=True)
def _drop_namespace():
    yield
    sys.modules.pop(NS, None)


@pytest.mark.parametrize("gid", list(TASKS))
def test_independent_solution_passes_the_graded_test(gid):
    notebook, stub, test, mine = TASKS[gid]
    ns = run_cells(notebook, {gid: {stub: mine}})
    ns[test]()


@pytest.mark.parametrize("gid", list(TASKS))
def test_stub_is_reported_by_name(gid):
    notebook, stub, test, _ = TASKS[gid]
    ns = run_cells(notebook, {})
    with pytest.raises(NotImplementedError, match=re.escape(f"not yet implemented: {stub}")):
        ns[test]()


def test_the_library_runs_on_the_independent_solutions():
    "The exported flows that call the task code work with the students' functions."
    from tinytorch.benchmarking.digits import default_digits_model

    ns = run_cells("tinymlperf_dev.ipynb", {"tinymlperf-latency": {"_latency": MY_LATENCY}})
    r = ns["TinyMLPerf"](random_seed=0).run_standard_benchmark(default_digits_model(), "digits", num_runs=6)
    assert r["compliant"] is True and 0 < r["latency_from_throughput_ms"] and r["p50_latency_ms"] <= r["p90_latency_ms"]
    ns = run_cells("energy_dev.ipynb", {"energy-rapl-zones": {"RaplReader._discover": MY_ZONES}})
    assert ns["measure_energy"](lambda: None, powercap_root="/nonexistent").joules_per_call is None


WRONG = [
    # hardware: the weights alone, the latency left in ms, GiB for GB, the attainment upside down
    ("hardware-summary", MY_SUMMARY.replace(' + sum(int(v) for v in layer_df["activation_bytes"])', ""),
     "that is the weights only"),
    ("hardware-summary", MY_SUMMARY.replace("gbps = moved / 1e9 / seconds", "gbps = moved / 1e9 / latency_ms"),
     "the latency is in ms"),
    ("hardware-summary", MY_SUMMARY.replace("gbps = moved / 1e9 / seconds", "gbps = moved / 2**30 / seconds"),
     "a GB is 1e9 bytes"),
    ("hardware-summary", MY_SUMMARY.replace('frac = est["roofline_bound_ms"] / (seconds * 1000.0)',
                                            'frac = (seconds * 1000.0) / est["roofline_bound_ms"]'), "that is measured / bound"),
    # metrics: throughput per ms or per call, the float32 model's memory, the host counter or the unscaled
    # latency used for a scaled target
    ("metrics-collect", MY_COLLECT.replace("batch_size / mean_s,", "batch_size / (timed.mean * factor),"),
     "that is per millisecond"),
    ("metrics-collect", MY_COLLECT.replace("batch_size / mean_s,", "1 / mean_s,"), "a call processes 8 samples"),
    ("metrics-collect", MY_COLLECT.replace("size_mb = model_memory_mb(converted)", "size_mb = model_memory_mb(model)"),
     "the device holds the converted one"),
    ("metrics-collect", MY_COLLECT.replace("if factor != 1:", "if False:"), "the estimate uses the scaled latency"),
    ("metrics-collect", MY_COLLECT.replace("joules = mean_s * power_watts", "joules = timed.mean / 1e3 * power_watts"),
     "the estimate uses the scaled latency"),
    # tinymlperf: the median window latency, the mean throughput, a window's median call, seconds, the windows'
    # samples as the single-stream distribution
    ("tinymlperf-latency", MY_LATENCY.replace("mid = statistics.median(rates)", "mid = 1 / statistics.median([1 / r for r in rates])"),
     "that is the median window latency"),
    ("tinymlperf-latency", MY_LATENCY.replace("statistics.median(rates)", "statistics.mean(rates)"),
     "that is 1 / the mean throughput"),
    ("tinymlperf-latency", MY_LATENCY.replace("rates.append(len(t.per_call_ns) / (sum(t.per_call_ns) / 1e9))",
                                              "rates.append(1e9 / statistics.median(t.per_call_ns))"),
     "not 1 / its median call"),
    ("tinymlperf-latency", MY_LATENCY.replace('"latency_from_throughput_ms": 1e3 / mid', '"latency_from_throughput_ms": 1 / mid'),
     "that is seconds"),
    ("tinymlperf-latency", MY_LATENCY.replace("one.per_call_ms, unit=", "[v for t in window_runs for v in t.per_call_ms], unit="),
     "the distribution comes from the single-stream run"),
    # energy: every zone (sub-zones and psys), psys kept, an unreadable counter or a missing root raised
    ("energy-rapl-zones", MY_ZONES.replace("_TOP_ZONE.fullmatch(entry.name) is None", "not entry.name.startswith('intel-rapl:')")
     .replace('[z for z in found if z.name.startswith("package")] or ', ""), "counting sub-zones counts their energy twice"),
    ("energy-rapl-zones", MY_ZONES.replace('[z for z in found if z.name.startswith("package")] or [z for z in found if z.name != "psys"]',
                                           "found"), "psys (the whole platform) overlaps the packages"),
    ("energy-rapl-zones", MY_ZONES.replace("    except (OSError, ValueError) as err:\n        self.unavailable_reason = "
                                           "f\"{counter} unreadable: {err}\"\n        return\n", ""), "not an error"),
    ("energy-rapl-zones", MY_ZONES.split("found = []")[0].replace("if not self.root.exists():", "if False:") + "found = []"
     + MY_ZONES.split("found = []")[1], "not an error"),
]


@pytest.mark.parametrize("gid, body, expect", WRONG, ids=[f"{g}-{i}" for i, (g, _, _) in enumerate(WRONG)])
def test_typical_wrong_solutions_are_named(gid, body, expect):
    notebook, stub, test, _ = TASKS[gid]
    assert body != TASKS[gid][3], f"{gid}: the wrong solution must differ from the independent one"
    ns = run_cells(notebook, {gid: {stub: body}})
    with pytest.raises(AssertionError) as e:
        ns[test]()
    msg = str(e.value)
    assert expect in msg, f"{gid}: the failure should say {expect!r}, got: {msg}"
    assert "expected" in msg and "got" in msg, f"{gid}: show expected and got: {msg}"
