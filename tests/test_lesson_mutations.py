"""Each mistake a task's text warns about fails that task's VISIBLE test, with a message naming it (issue 33).

A mutation is one text substitution inside a solution region of the instructor's percent source
(modules/19_benchmarking/*_dev.py): the mistake a student would make. The mutated source, with its
hidden tests cut out (what a student's notebook holds), runs in this process, and the task's visible
test must raise an AssertionError whose message names the mistake. The unmutated source passes the
same tests (the control). A few representative mutations go end to end, through `module complete`
in a student kit (test_module_complete_names_the_mistake): the task is reported failed, with the
message, not passed.
"""
from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from tito.workspace.complete import notebook_tasks
from tito.grading import feedback

ROOT = Path(__file__).resolve().parents[1]
M19 = ROOT / "modules" / "19_benchmarking"
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS\n.*?^[ \t]*### END HIDDEN TESTS\n", re.S | re.M)
SOLUTION = re.compile(r"### BEGIN SOLUTION\n.*?### END SOLUTION", re.S)

# (notebook, visible test, mistake: the solution's text -> the wrong text, what the failure must say)
MUTATIONS = [
    # BenchmarkResult: the lesson's opening mistake, and the table's
    ("results_dev", "test_unit_benchmark_result", "median as the mean",
     "self.median = float(np.median(arr))", "self.median = float(arr.mean())", "that is the mean"),
    ("results_dev", "test_unit_benchmark_result", "population std (n, not n-1)",
     "self.std = float(arr.std(ddof=1)) if self.count > 1 else 0.0\n        self.median",
     "self.std = float(arr.std()) if self.count > 1 else 0.0\n        self.median", "population std"),
    ("results_dev", "test_unit_benchmark_result", "z = 1.96 instead of Student's t",
     "float(_stats.t.ppf((1 + self.confidence) / 2, self.count - 1))", "1.959963984540054", "z = 1.96"),
    ("results_dev", "test_unit_benchmark_result", "percentiles read off one rank",
     "np.percentile(arr, [50, 90, 95, 99])", "np.percentile(arr, [50, 90, 95, 99], method='lower')",
     "not interpolated"),
    ("results_dev", "test_unit_benchmark_result", "outliers as the values, not a count",
     "int(np.sum((arr < q1 - 1.5 * self.iqr) | (arr > q3 + 1.5 * self.iqr)))",
     "arr[(arr < q1 - 1.5 * self.iqr) | (arr > q3 + 1.5 * self.iqr)].tolist()", "an int"),
    ("results_dev", "test_unit_benchmark_result", "an error that does not start with the argument",
     'raise ValueError(f"values: expected at least one measurement',
     'raise ValueError(f"invalid input: expected at least one measurement',
     "should start with the argument it is about, 'values'"),
    # Wilson
    ("results_dev", "test_unit_wilson_interval", "the Wald interval",
     "half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))",
     "half, center = z * math.sqrt(p * (1 - p) / n), p", "that is the Wald interval"),
    ("results_dev", "test_unit_wilson_interval", "z fixed at 1.96 whatever the confidence",
     "z = float(_stats.norm.ppf((1 + confidence) / 2))", "z = 1.959963984540054", "z does not follow the confidence"),
    ("results_dev", "test_unit_wilson_interval", "an error about 'n' that does not start with n",
     'raise ValueError(f"n: expected a positive', 'raise ValueError(f"invalid sample count: expected a positive',
     "should start with the argument it is about, 'n'"),
    # bootstrap
    ("results_dev", "test_unit_resampler_and_rule", "b's indices drawn before a's",
     "resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays]",
     "resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays[::-1]][::-1]",
     "a's indices drawn first"),
    ("results_dev", "test_unit_resampler_and_rule", "paired resampled independently",
     "        idx = rng.integers(0, arrays[0].size, size=(n_boot, arrays[0].size))\n"
     "        resampled = [a[idx] for a in arrays]",
     "        resampled = [a[rng.integers(0, a.size, size=(n_boot, a.size))] for a in arrays]",
     "same indices for both samples"),
    # compare_samples
    ("results_dev", "test_unit_compare_samples", "ratio of means",
     "ratio = median_b / median_a", "ratio = float(b_arr.mean() / a_arr.mean())", "that is the ratio of means"),
    ("results_dev", "test_unit_compare_samples", "ratio a / b",
     "ratio = median_b / median_a", "ratio = median_a / median_b", "expected median(b) / median(a)"),
    ("results_dev", "test_unit_compare_samples", "bootstrap of the ratio of means",
     "lambda x, y: np.median(y, axis=1) / np.median(x, axis=1)", "lambda x, y: y.mean(axis=1) / x.mean(axis=1)",
     "that is the interval of the ratio of means"),
    ("results_dev", "test_unit_compare_samples", "a 95% interval whatever alpha",
     "[a_arr, b_arr], n_boot=n_boot, seed=seed, confidence=1 - alpha)", "[a_arr, b_arr], n_boot=n_boot, seed=seed)",
     "the level is 1 - alpha"),
    ("results_dev", "test_unit_compare_samples", "a t-test instead of Mann-Whitney U",
     'float(_stats.mannwhitneyu(a_arr, b_arr, alternative="two-sided").pvalue)',
     "float(_stats.ttest_ind(a_arr, b_arr, equal_var=False).pvalue)", "that is a t-test"),
    ("results_dev", "test_unit_compare_samples", "significance without the effect floor",
     "significant = is_significant(p_value, ratio - 1, alpha, min_effect)", "significant = bool(p_value < alpha)",
     "below min_effect"),
    ("results_dev", "test_unit_compare_samples", "an error about 'a' that does not start with a",
     'raise ValueError(f"{arg}: expected at least 2', 'raise ValueError(f"invalid sample {arg}: expected at least 2',
     "should start with the argument it is about, 'a'"),
    # McNemar
    ("results_dev", "test_unit_mcnemar_exact", "the chi-square approximation",
     'float(_stats.binomtest(b_only, n, 0.5, alternative="two-sided").pvalue)',
     "float(_stats.chi2.sf((abs(a_only - b_only) - 1) ** 2 / n, 1))", "that is the chi-square approximation"),
    # top-1
    ("results_dev", "test_unit_eval_data_and_top1", "argmax over the batch",
     "scores.argmax(dim=1) == y.cpu()", "scores.argmax(dim=0)[:len(y)] == y.cpu()[:scores.shape[1]]", "dim=0"),
    # systems thinking: the interval's half-width, the error's subject
    ("systems_thinking_dev", "test_unit_ci_half_width", "z = 1.96 for a 5-sample interval",
     "    t = stats.t.ppf((1 + confidence) / 2, n - 1)\n    return float(", "    t = stats.norm.ppf((1 + confidence) / 2)\n    return float(",
     "that is z = 1.96 instead of Student's t"),
    ("systems_thinking_dev", "test_unit_ci_half_width", "population std in the half-width",
     "return float(t * statistics.stdev(values) / math.sqrt(n))", "return float(t * statistics.pstdev(values) / math.sqrt(n))",
     "that is the population std"),
    ("systems_thinking_dev", "test_unit_samples_to_shrink", "an error about 'n' that does not start with n",
     'raise ValueError(f"n: expected at least 2 samples', 'raise ValueError(f"too few samples: expected at least 2 (n',
     "should start with the argument it is about, 'n'"),
    ("results_dev", "test_unit_eval_data_and_top1", "a labels error without the words a later notebook reads",
     "labels do not match the model's output", "the labels are out of range", "labels do not match"),
]


def _source(notebook: str, old: str | None = None, new: str | None = None) -> str:
    "The notebook's percent source, `old` replaced by `new` (once, inside a solution region), hidden tests cut."
    src = (M19 / f"{notebook}.py").read_text(encoding="utf-8")
    if old is not None:
        assert src.count(old) == 1, f"{notebook}: the mutation's text occurs {src.count(old)} times: {old!r}"
        i = src.index(old)
        assert any(m.start() <= i < m.end() for m in SOLUTION.finditer(src)), \
            f"{notebook}: {old!r} is not inside a solution region: a student would not write it"
        src = src.replace(old, new)
    return HIDDEN.sub("", src)


def _run_visible(notebook: str, test: str, src: str) -> None:
    "Run `src` as a module of its own (dataclasses look their module up), then its visible test `test`."
    mod = types.ModuleType(f"mutant_{notebook}")
    sys.modules[mod.__name__] = mod
    try:
        exec(compile(src, str(M19 / f"{notebook}.py"), "exec"), mod.__dict__)
        getattr(mod, test)()
    finally:
        del sys.modules[mod.__name__]


@pytest.mark.parametrize("notebook, test", sorted({(m[0], m[1]) for m in MUTATIONS}))
def test_the_instructors_solution_passes_the_visible_test(notebook, test):
    "The control: without a mutation, each visible test of the table passes."
    _run_visible(notebook, test, _source(notebook))


@pytest.mark.parametrize("notebook, test, mistake, old, new, says", MUTATIONS, ids=[m[2] for m in MUTATIONS])
def test_each_warned_mistake_fails_the_visible_test_by_name(notebook, test, mistake, old, new, says):
    src = _source(notebook, old, new)
    with pytest.raises(AssertionError) as e:
        _run_visible(notebook, test, src)
    assert says in str(e.value), f"{mistake}: the visible test should say {says!r}, got: {e.value}"


def test_module_complete_counts_the_points_grading_counts(course):
    """The points `module complete` shows (its tasks) are those the judge grades (tito.grading.feedback's
    test_points), notebook by notebook; 222 autograded points in all for Module 19."""
    total = 0.0
    for nb_path in course.notebooks("19_benchmarking"):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        shown = {t.grade_id: t.points for t in notebook_tasks(nb)}
        assert shown == {k: float(v) for k, v in feedback.test_points(nb).items()}, nb_path.name
        total += sum(shown.values())
    assert total == 222, total


# ---- end to end: a kit, one mistake at a time, `module complete` --------------------------------------

E2E = [m for m in MUTATIONS if m[2] in ("median as the mean", "ratio of means", "the Wald interval")] + [
    # passes in the notebook (its unexported test-helper cell imports statistics), but the export lacks the
    # import: the notebook that wrote it is charged, not the later ones that import its module
    ("results_dev", "test_unit_benchmark_result", "statistics imported only in an unexported cell",
     "self.std = float(arr.std(ddof=1)) if self.count > 1 else 0.0\n        self.median",
     "self.std = statistics.stdev(self.values) if self.count > 1 else 0.0\n        self.median",
     "name 'statistics' is not defined")]


@pytest.fixture(scope="module")
def started_kit(course, tmp_path_factory):
    "A student kit, started (`module start 19`): a student working on notebook 1, the others still stubs."
    from tito.notebooks import kit as rel
    from test_student_kit import _tito

    kit = rel.build_student_kit(course, "19_benchmarking", tmp_path_factory.mktemp("kit") / "kit").dest
    p = _tito(kit, kit, "module", "start", "19", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return kit, kit / "19_benchmarking"


def _mutated_notebook(course, old: str, new: str) -> dict:
    (path,) = [p for p in course.notebooks("19_benchmarking") if p.stem == "results_dev"]
    nb = json.loads(path.read_text(encoding="utf-8"))
    hits = 0
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if old in src and "### BEGIN SOLUTION" in src:
            c["source"], hits = src.replace(old, new), hits + 1
    assert hits == 1, f"{old!r} found in {hits} solution cells"
    return nb


@pytest.mark.parametrize("mutation", E2E, ids=[m[2] for m in E2E])
def test_module_complete_names_the_mistake(course, started_kit, mutation):
    """In a kit holding the instructor's results notebook with one mistake, `module complete` reports that
    task FAILED with the message naming it, and the other tasks of the notebook passed."""
    from test_student_kit import _tito

    kit, mod_dir = started_kit
    notebook, test, mistake, old, new, says = mutation
    (mod_dir / "results_dev.ipynb").write_text(json.dumps(_mutated_notebook(course, old, new)), encoding="utf-8")
    # no integration test file matches: the inline tests are what this checks
    out = _tito(kit, mod_dir, "module", "complete", "19", "--tests", "test_19_none.py", timeout=900).stdout
    grade_id = {"test_unit_benchmark_result": "test-benchmark-result", "test_unit_compare_samples":
                "test-benchmarking-compare", "test_unit_wilson_interval": "test-benchmarking-wilson"}[test]
    (line,) = [ln for ln in out.splitlines() if f"] {grade_id}:" in ln]
    assert "[FAIL]" in line and "failed" in line and says in line, f"{mistake}: {line}\n{out[-3000:]}"
    tasks = [ln for ln in out.splitlines() if re.match(r"\s+\[(ok|FAIL|todo|wait)", ln)][:12]  # results_dev's
    assert sum("[ok  ]" in ln for ln in tasks) >= 9, "\n".join(tasks)  # the rest of the notebook still passes
