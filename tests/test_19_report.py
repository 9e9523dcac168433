"""Reports, result files and plots of a BenchmarkSuite, and the default benchmark (the main job)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from tinytorch.benchmarking.benchmark import BenchmarkSuite
from tinytorch.benchmarking.report import (JSON_FILE, SCHEMA, TABLE_COLUMNS, ensure_output_dir, load_payload,
                                           plot_distribution, plot_metric, plot_pareto, render_markdown, save_json,
                                           tidy_csv)
from tinytorch.benchmarking.suite import load_model_file
from tinytorch.benchmarking.defaults import DEFAULT_MODEL_NAMES
from tito.default_benchmark import console_table, run_default_benchmark

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def finished_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    torch.manual_seed(0)
    X, y = torch.randn(60, 8), torch.randint(0, 4, (60,))
    models = {"linear": torch.nn.Linear(8, 4),
              "mlp": torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)),
              "raises": torch.nn.Sequential(torch.nn.Linear(8, 5), torch.nn.Linear(4, 4))}  # shape error at run time
    suite = BenchmarkSuite(models, (X, y), output_dir=out, power_watts=12.0, measurement_runs=4, warmup_runs=1,
                           batch_sizes=(1, 8), powercap_root=out / "no_counter", progress=False)
    suite.run_full_benchmark()
    suite.plot_results()
    suite.plot_pareto_frontier("latency", "accuracy")
    suite.plot_latency_distribution()
    suite.generate_report()
    return suite


def test_report_json_csv_contain_every_model_and_metric(finished_suite):
    suite, out = finished_suite, finished_suite.output_dir
    metrics = set(suite.table()["metric"])
    assert {"latency", "accuracy", "memory", "model_size", "parameter_memory", "throughput_bs1", "throughput_bs8",
            "energy"} <= metrics
    report = (out / "benchmark_report.md").read_text()
    for name in suite.names:
        assert name in report
    for metric in metrics:
        assert f"### {metric} (" in report, f"the report needs a table for {metric}"
    assert "| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MiB)** | **Platform** | **References** |" in report
    assert "## Failures" in report and "raises" in report and "mat1 and mat2" in report
    payload = json.loads((out / "results.json").read_text())
    assert payload["models"] == ["linear", "mlp", "raises"] and payload["system_info"]["torch"] == torch.__version__
    for metric in metrics:
        for name in ("linear", "mlp"):
            if metric != "energy":
                assert name in payload["results"][metric], f"{metric}/{name} missing from results.json"
    assert payload["failures"]["latency"]["raises"]["error_type"] == "RuntimeError"
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    keyed = {(r["model"], r["metric"]): r for r in rows}
    assert len(rows) == len(keyed) == 3 * len(metrics), "one row per model x metric"
    assert keyed[("raises", "latency")]["status"] == "failed"
    assert keyed[("linear", "energy")]["status"] == "estimated"
    lat = suite.results["latency"]["mlp"]
    assert float(keyed[("mlp", "latency")]["median"]) == lat.median


def test_json_loads_back_equal(finished_suite):
    loaded = BenchmarkSuite.load_results(finished_suite.output_dir / "results.json")
    assert set(loaded) == set(finished_suite.results)
    for metric, by_model in finished_suite.results.items():
        assert set(loaded[metric]) == set(by_model)
        for name, r in by_model.items():
            assert loaded[metric][name].to_dict() == r.to_dict()
    payload = load_payload(finished_suite.output_dir / "results.json")
    assert render_markdown(payload) == (finished_suite.output_dir / "benchmark_report.md").read_text(), \
        "the report re-renders identically from the saved JSON"


def test_plots_are_written(finished_suite):
    out = finished_suite.output_dir
    expected = {"latency.png", "accuracy.png", "memory.png", "model_size.png", "energy.png", "throughput_bs1.png",
                "pareto_latency_vs_accuracy.png", "latency_distribution.png"}
    assert expected <= {p.name for p in finished_suite.plot_paths}
    for name in expected:
        assert (out / name).read_bytes()[:8] == PNG, f"{name} must be a PNG"
    assert not list(out.glob(".*.tmp*")), "atomic writes leave no temporary files"


def test_unwritable_output_dir_keeps_results(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    X, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    suite = BenchmarkSuite({"m": torch.nn.Linear(3, 2)}, (X, y), output_dir=blocker / "out", measurement_runs=2,
                           warmup_runs=0, batch_sizes=(1,), progress=False)
    suite.run_full_benchmark()
    with pytest.raises(OSError, match="output_dir"):
        suite.generate_report()
    assert suite.results["latency"]["m"].count == 2, "measured results stay in memory"
    suite.output_dir = tmp_path / "elsewhere"
    assert "m" in suite.generate_report()
    with pytest.raises(OSError, match="output_dir"):
        run_default_benchmark(blocker / "out", quiet=True)


def test_load_model_file_kinds(tmp_path):
    lin = torch.nn.Linear(3, 2)
    torch.jit.save(torch.jit.script(lin), str(tmp_path / "s.pt"))
    torch.save(lin, tmp_path / "p.pt")
    torch.save(lin.state_dict(), tmp_path / "w.pt")
    x = torch.randn(2, 3)
    assert torch.allclose(load_model_file(tmp_path / "s.pt")(x), lin(x))
    assert torch.allclose(load_model_file(tmp_path / "p.pt")(x), lin(x))
    with pytest.raises(TypeError, match="state_dict"):
        load_model_file(tmp_path / "w.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="model_path"):
        load_model_file(tmp_path / "junk.pt")


def test_default_benchmark_end_to_end(tmp_path, capsys):
    out = run_default_benchmark(tmp_path / "bench", measurement_runs=4, warmup_runs=1, batch_sizes=(1,))
    printed = capsys.readouterr().out
    assert out["models"] == list(DEFAULT_MODEL_NAMES)
    for name in DEFAULT_MODEL_NAMES:
        assert name in printed
        assert out["results"]["accuracy"][name].count == 450
        assert out["results"]["accuracy"][name].median > 0.9, "trained digits models are > 90% accurate"
        looks = out["suite"].benchmark.sequential["latency"]
        assert out["results"]["latency"][name].count == 4 * looks["looks"], looks  # sampled until decided, looks of 4
        assert 1 <= looks["looks"] <= 5 and looks["stop_reason"] in ("decided", "looks", "budget_s"), looks
        assert out["results"]["latency"][name].metadata["interrupt_check"], "every timing says what its check did"
    assert "interrupted" in printed and ("inconclusive" in printed or "equivalent" in printed or "faster" in printed)
    sizes = {n: out["results"]["model_size"][n].metadata["bytes"] for n in DEFAULT_MODEL_NAMES}
    assert sizes["digits_cnn_int8"] < 0.7 * sizes["digits_cnn"], "int8 weights take less space on disk"
    for key in ("report", "json", "csv"):
        assert Path(out[key]).exists()
    assert {p.name for p in out["plots"]} >= {"latency.png", "pareto_latency_vs_accuracy.png"}
    report = out["report"].read_text()
    assert "static int8" in report and "## Recommendations" in report


# a user's model no labelled data fits (timed on its input shape, accuracy unavailable with the reason, in the JSON
# as loaded back): tests/test_19_defaults.py::test_user_model_run_is_silent_without_log runs that model once for both


def test_user_digits_shaped_model_gets_accuracy(tmp_path):
    from tinytorch.benchmarking.digits import default_digits_model
    path = tmp_path / "mine.pt"
    torch.jit.save(torch.jit.trace(default_digits_model(), torch.zeros(1, 1, 8, 8)), str(path))
    out = run_default_benchmark(tmp_path / "o", measurement_runs=2, warmup_runs=0, quiet=True, model_path=path,
                                input_shape=(1, 1, 8, 8), batch_sizes=(1,), plots=False)  # figures only
    assert out["results"]["accuracy"]["mine"].count == 450
    assert out["results"]["model_size"]["mine"].metadata["method"] == "measured: bytes of torch.jit.save(model)"


def _toy_payload() -> dict:
    "A hand-made payload: two measured models and one that failed (no suite, no timing)."
    rows = [{"model": "broken", "metric": "latency", "unit": "ms", "status": "failed", "note": "RuntimeError: boom"}]
    for model, lat, acc in (("big", 2.0, 0.99), ("small", 1.0, 0.97)):
        rows += [{"model": model, "metric": "latency", "unit": "ms", "status": "measured", "method": "measured",
                  "median": lat, "mean": lat, "std": 0.1, "ci_lower": lat - 0.1, "ci_upper": lat + 0.1, "count": 3,
                  "median_ci_lower": lat - 0.1, "median_ci_upper": lat + 0.1, "note": None},
                 {"model": model, "metric": "accuracy", "unit": "fraction", "status": "measured", "method": "top-1",
                  "median": acc, "mean": acc, "std": 0.0, "ci_lower": acc - 0.01, "ci_upper": min(acc + 0.01, 1.0),
                  "count": 100, "median_ci_lower": None, "median_ci_upper": None, "note": None}]
    return {"schema": SCHEMA, "models": ["big", "small", "broken"], "system_info": {"cpu_model": "test CPU"},
            "metrics": {"latency": {"unit": "ms", "direction": "min", "better": "faster"},
                        "accuracy": {"unit": "fraction", "direction": "max", "better": "more accurate"}},
            "results": {"latency": {"big": {"values": [1.9, 2.0, 2.1], "p90": 2.08},
                                    "small": {"values": [0.9, 1.0, 1.1], "p90": 1.08}}},
            "failures": {"latency": {"broken": {"error_type": "RuntimeError", "message": "boom"}}},
            "table": rows, "comparisons": [], "pareto": {"metrics": ["latency", "accuracy"], "excluded": {},
                                                         "directions": {"latency": "min", "accuracy": "max"},
                                                         "front": ["big", "small"]}}


def test_report_files_from_a_hand_made_payload(tmp_path):
    payload = _toy_payload()
    md = render_markdown(payload)
    for text in ("| **Model** | **Task** | **Accuracy** | **Latency (ms)** | **Model Size (MiB)** | **Platform** | **References** |",
                 "| broken | — | n/a (not run) | n/a (failed) |", "| latency | broken | RuntimeError: boom |",
                 "## Pareto set", "lowest latency**: big (2 ms), small (1 ms) (tied: inconclusive, not yet told apart), the baseline",
                 "highest accuracy**: big (99.00%), the baseline",
                 "- **failed measurements** for broken", "test CPU"):
        assert text in md, f"the report should contain {text!r}"
    lines = console_table(payload).splitlines()
    assert lines[0].split() == ["model", "accuracy", "(fraction)", "latency", "(ms)"] and lines[1].startswith("---")
    assert lines[2].split() == ["big", "99.00%", "2"] and lines[4].split() == ["broken", "—", "failed"]
    assert load_payload(save_json(payload, tmp_path / JSON_FILE)) == payload, "the JSON loads back equal"
    csv_lines = tidy_csv(payload["table"]).strip().splitlines()
    assert csv_lines[0].split(",") == list(TABLE_COLUMNS) and len(csv_lines) == 1 + len(payload["table"])
    assert csv_lines[1].startswith("broken,latency,ms,failed,,,"), "missing values are empty cells"
    for path in (plot_metric(payload, "latency", tmp_path), plot_metric(payload, "accuracy", tmp_path),
                 plot_pareto(payload, "latency", "accuracy", ["big", "small"], tmp_path),
                 plot_distribution(payload, "latency", tmp_path)):
        assert path.read_bytes()[:8] == PNG, f"{path} should be a PNG"
    assert not list(tmp_path.glob(".*tmp*")), "no temporary files may be left behind"
    with pytest.raises(ValueError):
        save_json({"x": float("nan")}, tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="path"):
        load_payload(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"schema": "something else"}')
    with pytest.raises(ValueError, match="not a benchmark results file"):
        load_payload(tmp_path / "other.json")
    with pytest.raises(OSError, match="output_dir"):
        ensure_output_dir(tmp_path / JSON_FILE / "sub")
    with pytest.raises(ValueError, match="metric"):
        plot_metric(payload, "energy", tmp_path)


def test_a_mean_interval_below_zero_is_marked_never_shown_bare():
    payload = _toy_payload()
    skewed = next(r for r in payload["table"] if r["model"] == "small" and r["metric"] == "latency")
    skewed.update(mean=1.0, ci_lower=-0.4, ci_upper=2.4)  # a t-interval of a skewed mean reaching below 0 ms
    md = render_markdown(payload)
    row = next(line for line in md.splitlines() if line.startswith("| small | measured |"))
    assert "[-0.4, 2.4] †" in row, row
    assert "† marks" not in md and "the t-interval of the mean reaches below 0" in md and "read the median's" in md
    big = next(line for line in md.splitlines() if line.startswith("| big | measured |"))
    assert "†" not in big, "an interval above 0 carries no mark"


def test_best_is_the_pareto_set_with_ties_not_the_raw_median():
    payload = _toy_payload()
    md = render_markdown(payload)  # small's median is lower, but 3 samples each do not tell the two apart
    assert "lowest latency**: big (2 ms), small (1 ms) (tied: inconclusive, not yet told apart)" in md and "significant difference" not in md
    payload["results"]["latency"] = {"big": {"values": [2.0 + i / 1e3 for i in range(40)]},
                                     "small": {"values": [1.0 + i / 1e3 for i in range(40)]}}
    md = render_markdown(payload)
    assert "lowest latency**: small (1 ms)" in md and "tied" not in md.split("lowest latency")[1].splitlines()[0], \
        "separated samples: small alone"


def test_a_distribution_with_one_interruption_is_drawn_on_a_log_axis(tmp_path):
    """One sample 2,000x the medians (84 ms beside 0.04 ms, seen on a busy machine) flattened a linear
    axis to a line at 0: the plot switches to a log axis and says how many samples stretch it."""
    from matplotlib.image import imread

    from tinytorch.benchmarking.report import distribution_scale, plot_distribution

    quiet = [0.040, 0.041, 0.039, 0.042, 0.040]
    assert distribution_scale([quiet, [0.02, 0.021, 0.019]]) == ("linear", "")
    assert distribution_scale([quiet + [84.0], [0.02, 0.021]]) == (
        "log", f"log scale: 1 sample > 10x its median, the largest {84.0 / 0.0405:.0f}x")
    assert distribution_scale([[0.0, 5.0, 100.0]])[0] == "linear"  # a log axis cannot show 0
    payload = {"models": ["a", "b"], "metrics": {"latency": {"unit": "ms"}},
               "results": {"latency": {"a": {"values": quiet + [84.0]}, "b": {"values": [0.02, 0.021, 0.019]}}}}
    png = plot_distribution(payload, "latency", tmp_path)
    assert png.name == "latency_distribution.png" and imread(png).shape[0] > 100


def test_one_table_renderer_for_markdown_and_the_console():
    "`results.results_table` renders every results table: Markdown (pipes escaped, None as —) and console widths."
    from tinytorch.benchmarking.results import results_table
    assert results_table(["model", "note"], [["a", None], ["b", "x | y\nz"]]) == [
        "| model | note |", "|---|---|", "| a | — |", "| b | x \\| y z |"]
    assert results_table(["m", "latency (ms)"], [["long_name", 1.5]], console=True) == [
        "m          latency (ms)", "---------  ------------", "long_name  1.5         "]
    from tito.default_benchmark import console_table
    payload = {"models": ["a"], "metrics": {"model_size": {"unit": "bytes"}},
               "table": [{"model": "a", "metric": "model_size", "status": "measured", "median": 2 * 2**20}]}
    assert console_table(payload).splitlines() == ["model  model_size (MiB)", "-----  ----------------", "a      2               "]
