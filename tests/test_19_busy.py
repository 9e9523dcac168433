"""The library's timing verdicts on a busy machine (issue 41): four busy processes per core beside each test.

- Upstream TinyTorch's Module 19 test `test_multiple_runs_are_consistent` (tinytorch/tests/19_benchmarking/
  test_benchmark_core.py): its call, `Benchmark([model], datasets, measurement_runs=10)` then
  `run_latency_benchmark(input_shape=(1, 10))`, and its check, std / mean < 1, ten times in a row. It failed at load
  ~9 when one preempted sample dominated the mean; the timing core now re-takes interrupted samples.
- A model against itself and against four times its work, at the library's defaults: the verdicts do not flip.
"""
from __future__ import annotations

import numpy as np
import pytest

from busy import busy_processes
from tinytorch.benchmarking.benchmark import Benchmark


@pytest.fixture(scope="module")
def busy():
    with busy_processes(per_core=4) as pids:
        yield pids


class Tensor:  # the smallest TinyTorch-style tensor: data in `.data`
    def __init__(self, data):
        self.data = np.asarray(data, dtype=np.float32)

    @property
    def shape(self):
        return self.data.shape


class Linear:  # upstream's `Linear(10, 10)`, written here: TinyTorch's core layers are not part of this package
    def __init__(self, n_in, n_out):
        rng = np.random.default_rng(0)
        self.weight, self.bias = Tensor(rng.standard_normal((n_in, n_out)) * 0.1), Tensor(np.zeros(n_out))

    def forward(self, x):
        return Tensor(x.data @ self.weight.data + self.bias.data)

    def parameters(self):
        return [self.weight, self.bias]


def test_multiple_runs_are_consistent(busy):
    "Upstream's call and check, copied (a seeded input instead of np.random), ten runs, all beside 8 hogs on 2 cores."

    class SimpleModel:
        def __init__(self):
            self.layer = Linear(10, 10)

        def forward(self, x):
            return self.layer.forward(x)

        def parameters(self):
            return self.layer.parameters()

    cvs = []
    for _ in range(10):
        model = SimpleModel()
        x = Tensor(np.random.default_rng(1).standard_normal((1, 10)))
        datasets = [[(x, None)]]
        bench = Benchmark([model], datasets, measurement_runs=10)
        results = bench.run_latency_benchmark(input_shape=(1, 10))
        for name, result in results.items():
            if result.mean > 0:
                cvs.append(result.std / result.mean)
    assert len(cvs) == 10 and max(cvs) < 1.0, f"std / mean of ten runs beside 4 busy processes per core: {cvs}"


def test_verdicts_hold_beside_four_busy_processes_per_core(busy):
    """Four times the work is always called slower (3 runs); the same work twice is called different no more often
    than the significance level allows. At alpha = 5% one A/A run of three may be a false positive (up to a 14%
    chance that one is; it happened in a `module complete` run beside 16 busy processes: 1.09x, p = 0.041); two of
    three would be a chance below 1% (3 * 0.05^2), and are what a bias that load brings would give. Measured
    beside 8 and 16 busy processes on 2 cores: 0 of 120 A/A runs called different, p < 0.05 in 3% to 13% of them."""
    w = np.random.default_rng(2).standard_normal((96, 96)).astype(np.float32)

    def one(x):
        return w @ w

    def four(x):
        for _ in range(4):
            w @ w

    false_positives = []
    for _ in range(3):
        b = Benchmark([one, four, one], names=["one", "four", "one_again"], warmup_runs=3, measurement_runs=20)
        b.run_latency_benchmark(input_shape=(1, 1))
        same, slower = b.compare("one", "one_again"), b.compare("one", "four")
        if same.outcome == "different":
            false_positives.append(same.verdict)
        assert len(false_positives) <= 1, f"the same work called different in 2 of 3 runs: {false_positives}"
        assert slower.outcome == "different" and slower.winner == "one" and slower.ratio > 2, slower.verdict
        # On CPU time whenever the timing core found it stands for the latency. Where the machine let the typical
        # sample run for less than 95% of its wall time (module complete's own busy processes beside this test's:
        # 16 on 2 cores, load ~30), CPU time cannot be told from a model that waits: wall time, and the verdict is
        # still right.
        cpu_ok = all(b.results["latency"][n].metadata.get("cpu_comparable") for n in ("one", "four"))
        assert ("[CPU time]" in slower.verdict) == cpu_ok, (slower.verdict, cpu_ok)
