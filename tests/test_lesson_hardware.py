"""The graded tasks of hardware_dev (the roofline bound and verdict, fitting a batch, the activation
arena, the Flash/RAM fit decision), checked as a student meets them (issue 14): the release's code cells with the stubs filled
by independently written solutions must pass the graded tests, and the typical wrong solutions
must fail with a message that names the mistake."""
from __future__ import annotations

import sys

import pytest

from tests.test_lesson import run_student_cells

NOTEBOOK = "hardware_dev.ipynb"
NS = "lesson_hardware_ns"

# ---- independent solutions (the scaffold's locals: macs, bytes_moved, peak, bandwidth; b, limit; --
# ---- p, dev, layers, n_params, input_bytes, act_fp32, macs) ------------------------------------------

# a dict() call, a try/except for the intensity, the verdict by >=, the larger time by a conditional
MY_ROOFLINE = '''
if not (macs or bytes_moved):
    raise ValueError(f"macs, bytes_moved: no work, macs={macs!r} and bytes_moved={bytes_moved!r} are both zero")
t_compute, t_memory = 1000.0 * macs / peak, 1000.0 * bytes_moved / bandwidth
try:
    ai = macs / bytes_moved
except ZeroDivisionError:
    ai = float("inf")
ridge = peak / bandwidth
return dict(compute_ms=t_compute, memory_ms=t_memory, roofline_bound_ms=t_compute if t_compute >= t_memory else t_memory,
            arithmetic_intensity=ai, ridge_point=ridge, bound="compute-bound" if ai >= ridge else "memory-bound",
            method=ROOFLINE_METHOD)
'''

# returns from inside the loop, raises after it
MY_BATCH = '''
while b >= 1:
    if estimate_batch_memory_mb(b, n_features, bytes_per_feature) <= limit:
        return b
    b //= 2
raise ValueError(f"memory_limit_mb: one sample ({n_features * bytes_per_feature} bytes) is over {limit} MB")
'''

# all tensors in order, then adjacent pairs
MY_PEAK = '''
sizes = [int(input_bytes)] + [int(v) for v in layer_df["activation_bytes"]]
return max(a + b for a, b in zip(sizes, sizes[1:]))
'''

# a lookup of its own, sizes in bytes until the end, the verdict from a truthy peak
MY_FIT = '''
bpe = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}[p]
w_bytes, act = n_params * bpe, act_fp32 * bpe / 4
in_ram = act + (w_bytes if dev.weights_in_ram else 0)
flash_applies = dev.flash_kb is not None and not dev.weights_in_ram
traffic = w_bytes + (sum(int(v) for v in layers["activation_bytes"]) + input_bytes) * bpe / 4
peak = dev.peak_macs_per_s.get(p)
if peak:
    est = roofline_estimate(macs, traffic, peak, dev.memory_bandwidth_gbps * 1e9)
    lat, verdict = est["roofline_bound_ms"], est["bound"]
else:
    lat, verdict = None, "n/a: no native " + p
row = dict(weights_kb=w_bytes / 1024, fits_flash=(w_bytes / 1024 <= dev.flash_kb) if flash_applies else None,
           peak_activation_kb=act / 1024, ram_needed_kb=in_ram / 1024, fits_ram=in_ram / 1024 <= dev.ram_kb,
           bytes_moved=int(traffic), roofline_bound_ms=lat, bound=verdict)
'''

STUBS = {"hardware-roofline": "roofline_estimate", "hardware-profile-auto-batch": "auto_adjust_batch_size",
         "devices-peak-activation": "estimate_peak_activation_bytes", "devices-fit": "device_fit"}
MINE = {"hardware-roofline": MY_ROOFLINE, "hardware-profile-auto-batch": MY_BATCH, "devices-peak-activation": MY_PEAK,
        "devices-fit": MY_FIT}
TESTS = {"hardware-roofline": "test_unit_roofline_estimate",
         "hardware-profile-auto-batch": "test_unit_auto_adjust_batch_size",
         "devices-peak-activation": "test_unit_estimate_peak_activation_bytes", "devices-fit": "test_unit_device_fit"}


def _namespace(fills: dict[str, str]) -> dict:
    "The release's cells with the stubs of the grade ids in `fills` replaced by the given bodies."
    return run_student_cells(NOTEBOOK, {gid: {STUBS[gid]: body} for gid, body in fills.items()}, NS)


@pytest.fixture(autouse=True)
def _drop_namespace():
    yield
    sys.modules.pop(NS, None)


def test_independent_solutions_pass_the_graded_tests():
    ns = _namespace(MINE)
    for test in TESTS.values():
        ns[test]()


@pytest.mark.parametrize("gid", list(TESTS))
def test_stub_fails_its_graded_test_with_its_name(gid):
    "Every other task solved (device_fit builds on estimate_peak_activation_bytes): the stub is named."
    ns = _namespace({g: body for g, body in MINE.items() if g != gid})
    with pytest.raises(NotImplementedError, match=f"not yet implemented: {STUBS[gid]}"):
        ns[TESTS[gid]]()


WRONG = [
    # the roofline: the two times added, or the smaller one taken
    ("hardware-roofline", MY_ROOFLINE.replace("t_compute if t_compute >= t_memory else t_memory",
                                              "t_compute + t_memory"), "that is the sum"),
    ("hardware-roofline", MY_ROOFLINE.replace("t_compute if t_compute >= t_memory else t_memory",
                                              "min(t_compute, t_memory)"), "that is the smaller time"),
    # seconds where the keys say milliseconds
    ("hardware-roofline", MY_ROOFLINE.replace("1000.0 * macs / peak, 1000.0 * bytes_moved / bandwidth",
                                              "macs / peak, bytes_moved / bandwidth"), "that is seconds"),
    # the ratios upside down
    ("hardware-roofline", MY_ROOFLINE.replace("ai = macs / bytes_moved", "ai = bytes_moved / macs"),
     "that is bytes per MAC"),
    ("hardware-roofline", MY_ROOFLINE.replace("ridge = peak / bandwidth", "ridge = bandwidth / peak"),
     "that is bandwidth / peak"),
    # the ridge itself counted as memory-bound
    ("hardware-roofline", MY_ROOFLINE.replace("ai >= ridge", "ai > ridge"), "strictly below the ridge"),
    # no guard for work that moves no bytes
    ("hardware-roofline", MY_ROOFLINE.replace("try:\n    ai = macs / bytes_moved\nexcept ZeroDivisionError:\n"
                                              "    ai = float(\"inf\")", "ai = macs / bytes_moved"),
     "got ZeroDivisionError"),
    # no-work accepted
    ("hardware-roofline", MY_ROOFLINE.replace("if not (macs or bytes_moved):", "if False:"),
     "expected a ValueError naming 'macs', got none"),
    # a batch exactly at the limit rejected
    ("hardware-profile-auto-batch", MY_BATCH.replace("<= limit", "< limit"), "a batch at the limit fits"),
    # one sample too big: returns 1 instead of raising
    ("hardware-profile-auto-batch", MY_BATCH.split("raise ValueError")[0] + "return 1\n",
     "expected a ValueError"),
    # the model input forgotten: the first layer reads nothing
    ("devices-peak-activation", MY_PEAK.replace("[int(input_bytes)]", "[0]"), "the model input counts"),
    # the fit: weights counted in an MCU's RAM, activations left at fp32 size
    ("devices-fit", MY_FIT.replace("(w_bytes if dev.weights_in_ram else 0)", "w_bytes"), "that counts the weights"),
    ("devices-fit", MY_FIT.replace("act_fp32 * bpe / 4\n", "act_fp32\n"), "activations shrink with the element size"),
    # the fp32 peak for every precision, or as a fallback where the device has no native arithmetic
    ("devices-fit", MY_FIT.replace("dev.peak_macs_per_s.get(p)", "dev.peak_macs_per_s.get(\"fp32\")"),
     "that uses the fp32 peak"),
    ("devices-fit", MY_FIT.replace("dev.peak_macs_per_s.get(p)", "dev.peak_macs_per_s.get(p) or dev.peak_macs_per_s[\"fp32\"]"),
     "Cortex-M4 has no fp16 arithmetic"),
    # "fits Flash" on a device without on-board Flash read as False instead of not applicable
    ("devices-fit", MY_FIT.replace("(w_bytes / 1024 <= dev.flash_kb) if flash_applies else None",
                                   "dev.flash_kb is not None and w_bytes / 1024 <= dev.flash_kb"),
     "expected fits_flash None"),
]


@pytest.mark.parametrize("gid, body, expect", WRONG, ids=[f"{g}-{i}" for i, (g, _, _) in enumerate(WRONG)])
def test_typical_wrong_solutions_are_named(gid, body, expect):
    ns = _namespace({**MINE, gid: body})
    with pytest.raises(AssertionError) as e:
        ns[TESTS[gid]]()
    assert expect in str(e.value), f"{gid}: the failure should say {expect!r}, got: {e.value}"
