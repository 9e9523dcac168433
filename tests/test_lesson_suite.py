"""Module 19 as a lesson (issue 14): the graded tasks of the harness and the suite notebooks.

- `Benchmark.run_accuracy_benchmark` (benchmarking_dev) and `compare_with_baseline` (suite_dev):
  an independently written solution of each is put into the student release's code in place of
  the stub, and the graded test passes on it.
- Each typical wrong solution fails its graded test with a message that names the mistake: for
  the accuracy loop, no `try` (one broken model stops everything), a `try` around the whole loop,
  only the first dataset counted, the accuracy stored instead of the outcomes, no per-dataset
  metadata; for the baseline comparisons, the pair in the wrong order, the baseline compared
  with itself, an uncaught `ValueError`, a failed model reported as an error, one metric only.
- The scaffolds' `**Your task (DIFFICULTY, N points).**` lines agree with the graded cells.
"""
from __future__ import annotations

import json
import re
import sys

import pytest

from tests.test_lesson import ROOT, run_student_cells

NBS = ROOT / "nbs" / "19_benchmarking"

# ---- Benchmark.run_accuracy_benchmark -------------------------------------------------------

MY_ACCURACY = '''
# a helper per model, a dict comprehension for the datasets, the outcomes concatenated at the end
def _one(adapter):
    parts = [(d.name, list(top1_correct(adapter, d))) for d in labelled]
    return [x for _, flags in parts for x in flags], [
        {"name": nm, "correct": sum(flags), "count": len(flags), "accuracy": sum(flags) / len(flags),
         "wilson_95": list(wilson_interval(sum(flags), len(flags)))} for nm, flags in parts]

done = {}
for model_name in self.names:
    try:
        outcomes, per_dataset = _one(self.adapters[model_name])
    except Exception as err:
        self._fail("accuracy", model_name, err)
    else:
        self._store("accuracy", model_name, ProportionResult("accuracy", outcomes, unit="fraction",
                                                             metadata={**meta, "datasets": per_dataset}))
        done[model_name] = self.results["accuracy"][model_name]
return done
'''

ACCURACY_NO_TRY = MY_ACCURACY.replace('''    try:
        outcomes, per_dataset = _one(self.adapters[model_name])
    except Exception as err:
        self._fail("accuracy", model_name, err)
    else:
        self._store''', '''    outcomes, per_dataset = _one(self.adapters[model_name])
    if True:
        self._store''')

ACCURACY_TRY_OUTSIDE = '''
try:
    for name, a in self.adapters.items():
        flags = [x for d in labelled for x in top1_correct(a, d)]
        per = [{"name": d.name, "count": len(top1_correct(a, d)), "correct": sum(top1_correct(a, d))} for d in labelled]
        self._store("accuracy", name, ProportionResult("accuracy", flags, unit="fraction", metadata={"datasets": per}))
        out[name] = self.results["accuracy"][name]
except Exception as e:  # recorded, but for the first failing model only: the loop is over
    self._fail("accuracy", name, e)
return out
'''

ACCURACY_FIRST_DATASET = MY_ACCURACY.replace("for d in labelled]", "for d in labelled[:1]]")

ACCURACY_AS_A_FRACTION = MY_ACCURACY.replace(
    'ProportionResult("accuracy", outcomes, unit="fraction",',
    'BenchmarkResult("accuracy", [sum(outcomes) / len(outcomes)], unit="fraction",')

ACCURACY_NO_METADATA = MY_ACCURACY.replace('metadata={**meta, "datasets": per_dataset}', "metadata=dict(meta)")


def _benchmark_ns(body: str) -> dict:
    "benchmarking_dev's code cells, student version, with `body` in place of the accuracy stub."
    return run_student_cells("benchmarking_dev.ipynb",
                             {"benchmark-accuracy": {"Benchmark.run_accuracy_benchmark": body}},
                             "lesson_benchmark_ns")


@pytest.fixture(autouse=True)
def _drop_namespaces():
    yield
    for name in ("lesson_benchmark_ns", "lesson_suite_ns"):
        sys.modules.pop(name, None)


def test_independent_accuracy_loop_passes():
    ns = _benchmark_ns(MY_ACCURACY)
    ns["test_unit_benchmark_accuracy"]()


def test_accuracy_stub_fails_with_its_name():
    ns = _benchmark_ns('raise NotImplementedError("not yet implemented: Benchmark.run_accuracy_benchmark")')
    with pytest.raises(NotImplementedError, match="not yet implemented: Benchmark.run_accuracy_benchmark"):
        ns["test_unit_benchmark_accuracy"]()


@pytest.mark.parametrize("body, expect", [
    (ACCURACY_NO_TRY, "is recorded in failures['accuracy']"),
    (ACCURACY_TRY_OUTSIDE, "the try belongs inside the loop over models"),
    (ACCURACY_FIRST_DATASET, "only the first dataset was counted"),
    (ACCURACY_AS_A_FRACTION, "expected a ProportionResult of per-sample outcomes"),
    (ACCURACY_NO_METADATA, "metadata['datasets'] lists each dataset's name, count and correct"),
])
def test_wrong_accuracy_loops_are_named(body, expect):
    ns = _benchmark_ns(body)
    with pytest.raises(AssertionError) as e:
        ns["test_unit_benchmark_accuracy"]()
    assert expect in str(e.value), f"the failure should say {expect!r}, got: {e.value}"

# ---- compare_with_baseline ------------------------------------------------------------------

MY_COMPARE = '''
# metric by metric, the models that have a result, through compare_results directly
from tinytorch.benchmarking.results import compare_results

found, problems = [], {}
for metric in benchmark.results:
    have = benchmark.results[metric]
    if baseline in have:
        for other in [n for n in benchmark.names if n in have and n != baseline]:
            try:
                found.append(compare_results(have[baseline], have[other], names=(baseline, other),
                                             info=benchmark.metric_info.get(metric)))
            except ValueError as exc:
                problems["compare %s: %s vs %s" % (metric, baseline, other)] = {
                    "error_type": type(exc).__name__, "message": str(exc)}
return found, problems
'''

COMPARE_REVERSED = MY_COMPARE.replace("compare_results(have[baseline], have[other], names=(baseline, other),",
                                      "compare_results(have[other], have[baseline], names=(other, baseline),")
COMPARE_WITH_ITSELF = MY_COMPARE.replace("if n in have and n != baseline]", "if n in have]")
COMPARE_UNCAUGHT = MY_COMPARE.replace("except ValueError as exc:", "except KeyError as exc:")
COMPARE_FAILED_AS_ERROR = '''
found, problems = [], {}
for metric in benchmark.results:
    if baseline not in benchmark.results[metric]:
        continue
    for other in benchmark.names:
        if other != baseline:
            try:
                found.append(benchmark.compare(baseline, other, metric))
            except ValueError as exc:
                problems[f"compare {metric}: {baseline} vs {other}"] = {"error_type": "ValueError", "message": str(exc)}
return found, problems
'''
COMPARE_LATENCY_ONLY = MY_COMPARE.replace("for metric in benchmark.results:", 'for metric in ["latency"]:')


def _suite_ns(body: str) -> dict:
    "suite_dev's code cells, student version, with `body` in place of the compare_with_baseline stub."
    return run_student_cells("suite_dev.ipynb", {"suite-compare-with-baseline": {"compare_with_baseline": body}},
                             "lesson_suite_ns")


def test_independent_compare_with_baseline_passes():
    ns = _suite_ns(MY_COMPARE)
    assert "compare_results" in ns["compare_with_baseline"].__code__.co_names, "not our solution's code path"
    ns["test_unit_compare_with_baseline"]()


@pytest.mark.parametrize("body, expect", [
    (COMPARE_REVERSED, "the ratio must read model / baseline"),
    (COMPARE_WITH_ITSELF, "the baseline is not compared with itself"),
    (COMPARE_UNCAUGHT, "goes into errors and the loop goes on"),
    (COMPARE_FAILED_AS_ERROR, "a model without a result (it failed) is skipped"),
    (COMPARE_LATENCY_ONLY, "one comparison per metric and other model"),
])
def test_wrong_baseline_comparisons_are_named(body, expect):
    ns = _suite_ns(body)
    with pytest.raises(AssertionError) as e:
        ns["test_unit_compare_with_baseline"]()
    assert expect in str(e.value), f"the failure should say {expect!r}, got: {e.value}"

# ---- the task lines ---------------------------------------------------------------------------


@pytest.mark.parametrize("stem, grade_ids, levels", [
    ("benchmarking_dev", {"test-benchmark-accuracy": 6}, ["medium"]),
    ("suite_dev", {"test-benchmarking-pareto": 10, "test-results-pareto-ties": 10, "test-suite-compare-with-baseline": 6},
     ["medium", "hard", "medium"])])
def test_task_lines_match_the_graded_cells(stem, grade_ids, levels):
    src = (ROOT / "modules" / "19_benchmarking" / f"{stem}.py").read_text(encoding="utf-8")
    graded = {}
    for m in re.finditer(r"^# %% nbgrader=(\{.*\})\s*$", src, re.M):
        meta = json.loads(m.group(1))
        if meta.get("grade"):
            graded[meta["grade_id"]] = meta["points"]
    assert graded == grade_ids
    lines = re.findall(r"\*\*Your task \((easy|medium|hard), (\d+) points?\)\.\*\*", src)
    assert [int(p) for _, p in lines] == list(grade_ids.values()) and [d for d, _ in lines] == levels, lines

# ---- a module made only of `#| export NAME` cells: suite_dev's `pareto` ------------------------


def test_suite_notebook_exports_the_pareto_module_into_an_empty_package(tmp_path):
    "nbdev only appends `#| export NAME` cells to an existing module: tito gives it the file first."
    from tito.notebooks.exports import nbdev_export

    lib = tmp_path / "tinytorch"
    for _ in range(2):  # a second export rewrites the module, it does not append to it again
        nbdev_export([NBS / "suite_dev.ipynb"], lib, ROOT)
    pareto = (lib / "benchmarking" / "pareto.py").read_text(encoding="utf-8")
    assert pareto.startswith("# AUTOGENERATED! DO NOT EDIT! File to edit: ") and "suite_dev.ipynb." in pareto.split("\n")[0]
    assert pareto.count("def pareto_front(") == 1 and "'pareto_front'" in pareto
    assert (lib / "benchmarking" / "suite.py").read_text(encoding="utf-8").count("class BenchmarkSuite") == 1
    # the report is its library notebook's module (report_dev, outside the reading order, issue 45), not suite_dev's
    assert not (lib / "benchmarking" / "report.py").exists()
