"""The lesson's demos and end-to-end checks that compare timings hold on a busy machine (issues 20.5, 41):
each runs here beside four CPU hogs per core (`python3 -c 'while True: pass'`), as a student's laptop may be."""
import json
import sys
import types

import pytest
import torch

from busy import busy_processes
from test_lesson import MODULE, ROOT


@pytest.fixture(scope="module")
def hog():
    with busy_processes(per_core=4) as pids:
        yield pids


def _module_ns(notebook: str) -> dict:
    "The solution notebook's code cells executed as a module: definitions only, no `__main__` demo."
    mod = types.ModuleType(f"lesson_busy_{notebook.split('.')[0]}")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    for src in _cells(notebook):
        exec(compile(src, f"<{notebook}>", "exec"), mod.__dict__)
    return mod.__dict__


def _cells(notebook: str) -> list[str]:
    nb = json.loads((ROOT / "nbs" / MODULE / notebook).read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _run_demo(ns: dict, notebook: str, marker: str) -> None:
    "Run the one demo cell of `notebook` holding `marker` as the notebook would (`__name__ == '__main__'`)."
    cell = [src for src in _cells(notebook) if marker in src]
    assert len(cell) == 1, f"{notebook}: expected one cell with {marker!r}, found {len(cell)}"
    ns["__name__"] = "__main__"
    exec(compile(cell[0], f"<{notebook} demo>", "exec"), ns)


def test_warmup_demo_shows_the_cold_first_call(hog):
    threads = torch.get_num_threads()
    ns = _module_ns("benchmarking_dev.ipynb")
    _run_demo(ns, "benchmarking_dev.ipynb", "_fresh = torch.jit.trace")
    assert torch.get_num_threads() == threads, "the demo must restore the thread count"
    cold, warm = ns["_cold"], ns["_warm"].median_ms
    assert cold[0] > warm, f"the text says first calls are slower: expected the first call > {warm:.4f} ms, got {cold}"


def test_systems_thinking_cost_model_has_a_positive_slope(hog):
    ns = _module_ns("systems_thinking_dev.ipynb")
    ns["model"] = ns["default_digits_model"]()
    _run_demo(ns, "systems_thinking_dev.ipynb", "config_seconds = dict(")
    fixed, per_sample = ns["fixed_s"], ns["per_sample_s"]
    assert per_sample > 0, f"(c): expected a positive cost per sample, got {fixed:.3f} s + {per_sample * 1e3:.3f} ms"


@pytest.mark.parametrize("notebook", ["results_dev.ipynb", "tinymlperf_dev.ipynb"])
def test_end_to_end_checks_hold(hog, notebook):
    threads = torch.get_num_threads()
    _module_ns(notebook)["test_module"]()
    assert torch.get_num_threads() == threads, f"{notebook}: test_module must restore the thread count"
