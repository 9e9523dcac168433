"""The graded task of tinymlperf_dev (the compliance decision), checked as a student meets it
(issue 14): the release's code cells with the stub filled by an independently written solution
must pass the graded test, and the typical wrong solutions must fail with a message that names the
mistake. Also: the graded tasks of olympics_dev pass on independent solutions."""
from __future__ import annotations

import re
import sys

import pytest

from tests.test_lesson import run_student_cells

NS = "lesson_tinymlperf_ns"


def _run_cells(notebook: str, fills: dict[str, dict[str, str]]) -> dict:
    return run_student_cells(notebook, fills, NS)


@pytest.fixture(autouse=True)
def _drop_namespace():
    yield
    sys.modules.pop(NS, None)


# ---- tinymlperf_dev: pass / fail / inconclusive / not evaluated -------------------------------

TASK = "tinymlperf-compliance-decision"

# a lookup on where the two ends of the interval lie, the budget as "not within" rather than "over"
MY_DECISION = '''
within_budget = latency_budget_ms is None or latency_median_ms <= latency_budget_ms
if not within_budget:
    return "fail"
if quality is None:
    return "not evaluated"
ends = (float(quality.ci_lower) >= target, float(quality.ci_upper) >= target)
return {(True, True): "pass", (False, False): "fail"}.get(ends, "inconclusive")
'''

WRONG = {
    # the point estimate against the target: two outcomes, never "inconclusive"
    "point estimate": ('''
if latency_budget_ms is not None and latency_median_ms > latency_budget_ms:
    return "fail"
if quality is None:
    return "not evaluated"
return "pass" if quality.mean >= target else "fail"
''', "comparing the point estimate alone with the target ignores the interval"),
    # no labelled data counted as a failure
    "no measurement as fail": ('''
if latency_budget_ms is not None and latency_median_ms > latency_budget_ms:
    return "fail"
if quality is None:
    return "fail"
if quality.ci_lower >= target:
    return "pass"
return "fail" if quality.ci_upper < target else "inconclusive"
''', "treating no measurement as a fail invents a result"),
    # quality decided first: a model over its budget without labels comes out "not evaluated"
    "latency after quality": ('''
if quality is None:
    return "not evaluated"
if latency_budget_ms is not None and latency_median_ms > latency_budget_ms:
    return "fail"
if quality.ci_lower >= target:
    return "pass"
return "fail" if quality.ci_upper < target else "inconclusive"
''', "a median over the budget fails, whatever the quality"),
    # a strict comparison: an interval starting exactly at the target does not pass
    "strict lower bound": ('''
if latency_budget_ms is not None and latency_median_ms > latency_budget_ms:
    return "fail"
if quality is None:
    return "not evaluated"
if quality.ci_lower > target:
    return "pass"
return "fail" if quality.ci_upper < target else "inconclusive"
''', "reaching the target meets it"),
}


def test_independent_decision_passes_the_graded_test():
    ns = _run_cells("tinymlperf_dev.ipynb", {TASK: {"compliance_decision": MY_DECISION}})
    assert "ends" in ns["compliance_decision"].__code__.co_varnames, "not our solution's code path"
    ns["test_unit_compliance_decision"]()


def test_stub_fails_the_graded_test_with_its_name():
    ns = _run_cells("tinymlperf_dev.ipynb", {})
    with pytest.raises(NotImplementedError, match=re.escape("not yet implemented: compliance_decision")):
        ns["test_unit_compliance_decision"]()


@pytest.mark.parametrize("mistake", sorted(WRONG))
def test_typical_wrong_decisions_are_named(mistake):
    body, expect = WRONG[mistake]
    ns = _run_cells("tinymlperf_dev.ipynb", {TASK: {"compliance_decision": body}})
    with pytest.raises(AssertionError) as e:
        ns["test_unit_compliance_decision"]()
    assert expect in str(e.value), f"{mistake}: the failure should say {expect!r}, got: {e.value}"
    assert "expected" in str(e.value) and "got" in str(e.value), f"{mistake}: show expected and got: {e.value}"


def test_the_library_runs_on_the_independent_decision():
    "The exported flow (TinyMLPerf -> _compliance -> compliance_decision) works with the student's function."
    from tests.test_lesson_more import MY_LATENCY  # the latency task, solved
    from tinytorch.benchmarking.digits import default_digits_model, load_digits_split

    ns = _run_cells("tinymlperf_dev.ipynb", {TASK: {"compliance_decision": MY_DECISION},
                                             "tinymlperf-latency": {"_latency": MY_LATENCY}})

    X, y = load_digits_split("test")
    bench = ns["TinyMLPerf"](random_seed=0)
    full = bench.run_standard_benchmark(default_digits_model(), "digits", num_runs=5)
    few = bench.run_standard_benchmark(default_digits_model(), "digits", num_runs=5, dataset=(X[:20], y[:20]))
    assert full["compliance"]["overall"] == "pass" and full["compliant"] is True
    assert few["compliance"]["overall"] == "inconclusive" and few["compliant"] is None


# ---- olympics_dev: the two graded tasks on independent solutions ------------------------------

MY_CONSTRAINTS = '''
ops = {">=": lambda v, t: v >= t, "<": lambda v, t: v < t}
for quantity, op, threshold in rules.constraints:
    value = measured.get(quantity)
    ends = (intervals or {}).get(quantity, (value, value))
    entry = dict(quantity=quantity, op=op, threshold=threshold, measured=value)
    if value is None:
        entry.update(decision="inconclusive", reason="no measurement of " + quantity)
    else:
        met = [bool(ops[op](v, threshold)) for v in ends]
        entry["decision"] = "pass" if all(met) else "fail" if not any(met) else "inconclusive"
    entry["passed"] = entry["decision"] == "pass"
    checks.append(entry)
'''

MY_RANKS = '''
ranks = []
for i, (_, upper_i) in enumerate(intervals):
    better = [j for j, (lower_j, _) in enumerate(intervals) if j != i and lower_j > upper_i]
    ranks.append(len(better) + 1)
return ranks
'''


def test_independent_olympics_solutions_pass_the_graded_tests():
    ns = _run_cells("olympics_dev.ipynb", {"olympics-check-constraints": {"check_constraints": MY_CONSTRAINTS},
                                           "olympics-rank-with-ties": {"rank_with_ties": MY_RANKS}})
    ns["test_unit_check_constraints"]()
    ns["test_unit_rank_with_ties"]()


def test_rank_without_ties_is_named():
    "Ranking by the point scores (no ties) fails on the first case, with the intervals in the message."
    wrong = "order = sorted(range(len(intervals)), key=lambda i: -sum(intervals[i]))\nreturn [order.index(i) + 1 for i in range(len(intervals))]"
    ns = _run_cells("olympics_dev.ipynb", {"olympics-rank-with-ties": {"rank_with_ties": wrong}})
    with pytest.raises(AssertionError) as e:
        ns["test_unit_rank_with_ties"]()
    assert "overlaps both" in str(e.value) and "expected [1, 2, 1]" in str(e.value), str(e.value)
