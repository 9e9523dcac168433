"""Module 15 as a lesson (issue 14): the timing core's graded tasks.

- An independently written solution of each task in timing_dev (pure Python where ours uses a
  library, class-based context managers where ours uses generators, calibration by estimate and
  doubling where ours grows by the shortfall) is put into the student release's code in place of
  the stubs, and every graded test passes on it.
- Each typical wrong solution named in the issue fails its graded test with a message that names
  the mistake: no sync, no warmup, block length not calibrated, an off-by-one rank and mean ± t·s
  for the median's interval; and a few more (the mean clock cost, the full width as the precision,
  a context manager that does not restore on an exception); for interrupted samples (issue 41) a slow
  sample taken for an interrupted one, an absolute tolerance, a tolerance on the CPU time, unbounded
  or unrecorded re-takes; for the rounds, the same order every round.
- The scaffolds' `**Your task (DIFFICULTY, N points).**` lines agree with the graded cells.
- The Module 15 student release runs top to bottom with only "not yet implemented" errors
  (marker `lesson`: it executes both notebooks with nbclient).
"""
from __future__ import annotations

import json
import re
import sys
import types

import pytest

from tests.test_lesson import (ROOT, _expected, _fill_stub, _has_solution_regions, _replace_function,
                               _student_cells, make_release, run_release_notebook)

MODULE = "15_profiling"
TIMING_NB = ROOT / "nbs" / MODULE / "timing_dev.ipynb"

# ---- independent solutions ------------------------------------------------------------------

MY_OVERHEAD = '''
# pure Python: the left read happens first, so the difference is negative; the median by hand
pairs = sorted(-(clock() - clock()) for _ in range(reads))
mid = len(pairs) // 2
return float(pairs[mid]) if len(pairs) % 2 else (pairs[mid - 1] + pairs[mid]) / 2.0
'''

MY_MEDIAN_CI = '''
# the binomial tail summed by hand (no scipy), ranks found by argsort
n = len(values)
order = sorted(range(n), key=lambda i: values[i])
tail = (1 - confidence) / 2
k, cdf = 0, 0.0
while True:
    cdf += math.comb(n, k) / 2 ** n  # P(B <= k)
    if cdf >= tail:
        break
    k += 1
if k < 1:
    return min(values), max(values)
return values[order[k - 1]], values[order[n - k]]
'''

MY_CONDITIONS = '''
class fixed_threads:
    """Class-based: the count is set on entry and put back on exit, exception or not."""

    def __init__(self, threads):
        self._want = threads

    def __enter__(self):
        self._had = torch.get_num_threads()
        if self._want is not None:
            if isinstance(self._want, bool) or not isinstance(self._want, int) or self._want < 1:
                raise ValueError(f"threads: expected a positive int, got {self._want!r}")
            torch.set_num_threads(self._want)
        return torch.get_num_threads()

    def __exit__(self, *exc):
        torch.set_num_threads(self._had)
        return False


class _gc_paused:
    def __init__(self, pause):
        self._pause = pause

    def __enter__(self):
        self._turn_on = bool(self._pause) and gc.isenabled()
        if self._pause:
            gc.disable()

    def __exit__(self, *exc):
        if self._turn_on:
            gc.enable()
        return False
'''

MY_STOP = '''
n = len(per_call_ns)
out_of_time = spent_s >= max_seconds
if n >= samples and spent_s >= min_seconds:
    if target_rel_ci is None:
        return "samples"
    if n > 5:
        lo, hi = median_ci(per_call_ns)
        ordered = sorted(per_call_ns)
        med = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
        if hi - lo <= 2 * target_rel_ci * med:
            return "precision"
    return "max_seconds" if out_of_time else None
return "max_seconds" if out_of_time and n > 1 else None
'''

MY_TIME_BLOCK = '''
start = clock()
done = 0
while done < calls:
    fn()
    done += 1
sync()
return clock() - start
'''

# calibration by an estimate from one call, then doubling (ours grows by the shortfall)
MY_TIMING_LOOP = '''
for _ in range(warmup):
    fn()
sync()
overhead = measure_timer_overhead_ns(clock=clock)
need = 2.0 * max(overhead / max_overhead_fraction, min_block_ns)
calls = 1
took = _time_block(fn, 1, sync, clock)
if took < need:
    calls = max(2, int(need / max(took, 1)) + 1)
    while _time_block(fn, calls, sync, clock) < need:
        calls *= 2
'''

# a for loop over re-take budget and samples, a dict of lists, the check written as a ratio
MY_TAKE_SAMPLES = '''
got = {"keep": [], "cpu": [], "again": [], "flag": []}
while True:
    w, c = block()
    bad = c is not None and c < (1.0 - tolerance) * w
    if bad and len(got["again"]) != max_retakes:
        got["again"].append((w / calls, c / calls))
    else:
        if bad:
            got["flag"].append(len(got["keep"]))
        got["keep"].append(w / calls)
        got["cpu"].append(c / calls if c is not None else None)
        why = stop(got["keep"])
        if why:
            return SampleSet(got["keep"], got["cpu"], got["again"], got["flag"], why)
'''

MY_INTERLEAVED = '''
g = np.random.default_rng(seed)
plan = [(k, list(g.permutation(len(names)))) for k in _split_runs(samples, rounds)]
for k, perm in plan:
    for idx in perm:
        name = names[idx]
        if name in failed:
            continue
        try:
            t = time_model(models[name], input_or_shape, warmup=warmup, samples=k, seed=seed, threads=threads)
        except Exception as err:
            failed[name] = err
        else:
            values[name] += t.per_call_ms
            metas[name].append(t.metadata())
'''

SOLUTIONS = {  # grade_id -> [(stub name, body to fill in) or (function name, replacement source)]
    "timing-overhead": [("fill", "measure_timer_overhead_ns", MY_OVERHEAD)],
    "timing-median-ci": [("fill", "median_ci", MY_MEDIAN_CI)],
    "timing-conditions": [("replace", "fixed_threads", MY_CONDITIONS.split("\n\nclass _gc_paused")[0]),
                          ("replace", "_gc_paused", "class _gc_paused" + MY_CONDITIONS.split("\n\nclass _gc_paused")[1])],
    "timing-stop": [("fill", "_stop_reason", MY_STOP)],
    "timing-interrupted": [("fill", "take_samples", MY_TAKE_SAMPLES)],
    "timing-loop": [("fill", "_time_block", MY_TIME_BLOCK), ("fill", "time_callable", MY_TIMING_LOOP)],
    "timing-interleaved": [("fill", "time_interleaved", MY_INTERLEAVED)],
}

GRADED_TESTS = {"timing-overhead": "test_unit_measure_timer_overhead", "timing-median-ci": "test_unit_median_ci",
                "timing-conditions": "test_unit_timing_conditions", "timing-stop": "test_unit_stop_reason",
                "timing-interrupted": "test_unit_take_samples",
                "timing-loop": "test_unit_timing_loop", "timing-interleaved": "test_unit_time_interleaved"}

# ---- typical wrong solutions ----------------------------------------------------------------

WRONG = {
    "mean clock cost": ("timing-overhead", "fill", "measure_timer_overhead_ns", '''
diffs = []
for _ in range(reads):
    t0 = clock()
    diffs.append(clock() - t0)
return sum(diffs) / len(diffs)
''', "that is the mean"),
    "off-by-one rank": ("timing-median-ci", "fill", "median_ci", '''
xs = sorted(values)
n = len(xs)
k = int(binom.ppf((1 - confidence) / 2, n, 0.5))
if k < 1:
    return xs[0], xs[-1]
return xs[k], xs[n - k - 1]
''', "off-by-one rank"),
    "mean ± t·s": ("timing-median-ci", "fill", "median_ci", '''
from scipy.stats import t as student_t
n = len(values)
m = statistics.mean(values)
half = student_t.ppf((1 + confidence) / 2, n - 1) * statistics.stdev(values) / n ** 0.5
return m - half, m + half
''', "mean ± t·s"),
    "no restore on an exception": ("timing-conditions", "fill", "fixed_threads", '''
before = torch.get_num_threads()
if threads is not None:
    torch.set_num_threads(positive_int(threads, "threads"))
yield torch.get_num_threads()
torch.set_num_threads(before)
''', "when the body raises"),
    "full width as the precision": ("timing-stop", "fill", "_stop_reason", '''
n = len(per_call_ns)
if n < samples or spent_s < min_seconds:
    return "max_seconds" if spent_s >= max_seconds and n >= 2 else None
if target_rel_ci is None:
    return "samples"
lo, hi = median_ci(per_call_ns)
if n >= 6 and hi - lo <= target_rel_ci * statistics.median(per_call_ns):
    return "precision"
return "max_seconds" if spent_s >= max_seconds else None
''', "full width"),
    "no sync (clock read before sync)": ("timing-loop", "fill", "_time_block", '''
t0 = clock()
for _ in range(calls):
    fn()
elapsed = clock() - t0
sync()
return elapsed
''', "no sync"),
    "no sync at all": ("timing-loop", "fill", "time_callable",
                       MY_TIMING_LOOP.replace("sync()\n", "").replace(", sync, clock)", ", lambda: None, clock)"), "no sync"),
    "no warmup": ("timing-loop", "fill", "time_callable",
                  MY_TIMING_LOOP.replace("for _ in range(warmup):\n    fn()\n", ""), "no warmup"),
    "one call per sample": ("timing-loop", "fill", "time_callable",
                            MY_TIMING_LOOP.replace("if took < need:", "if False:"), "block length not calibrated"),
    "a fixed block of 100 calls": ("timing-loop", "fill", "time_callable",
                                   MY_TIMING_LOOP.replace("if took < need:", "calls = 100\nif False:"),
                                   "not calibrated from the measured overhead"),
    # interrupted samples: the textbook shortcuts
    "a slow sample taken for an interrupted one": ("timing-interrupted", "fill", "take_samples", '''
per_call, cpu_per_call, retaken, kept = [], [], [], []
while True:
    wall, cpu = block()
    typical = statistics.median(per_call) if per_call else wall
    if wall > 2 * typical and len(retaken) < max_retakes:  # an outlier rule: far above the median
        retaken.append((wall / calls, (cpu or wall) / calls))
        continue
    per_call.append(wall / calls)
    cpu_per_call.append(None if cpu is None else cpu / calls)
    if (reason := stop(per_call)) is not None:
        return SampleSet(per_call, cpu_per_call, retaken, kept, reason)
''', "a slow sample is not an interrupted one"),
    "an absolute tolerance": ("timing-interrupted", "fill", "take_samples",
                              MY_TAKE_SAMPLES.replace("c < (1.0 - tolerance) * w", "w - c > 1_000"),
                              "not a fixed number of ns"),
    "the tolerance on the CPU time": ("timing-interrupted", "fill", "take_samples",
                                      MY_TAKE_SAMPLES.replace("c < (1.0 - tolerance) * w", "w - c > tolerance * c"),
                                      "4.8% of it (5.04% of the CPU time)"),
    "unbounded re-takes": ("timing-interrupted", "fill", "take_samples",
                           MY_TAKE_SAMPLES.replace('len(got["again"]) != max_retakes', "True"),
                           "re-takes must be bounded"),
    "interrupted samples dropped unrecorded": ("timing-interrupted", "fill", "take_samples",
                                               MY_TAKE_SAMPLES.replace('got["again"].append((w / calls, c / calls))',
                                                                       'max_retakes -= 1'),
                                               "a re-taken sample stays in the raw data"),
    "kept interrupted samples not flagged": ("timing-interrupted", "fill", "take_samples",
                                             MY_TAKE_SAMPLES.replace('got["flag"].append(len(got["keep"]))', "pass"),
                                             "kept interrupted samples are flagged"),
    # the rounds: a random order per round, from one generator
    "the same order every round": ("timing-interleaved", "fill", "time_interleaved",
                                   MY_INTERLEAVED.replace("list(g.permutation(len(names)))", "list(range(len(names)))"),
                                   "the models ran in the order given"),
    "a generator made again each round": ("timing-interleaved", "fill", "time_interleaved",
                                          MY_INTERLEAVED.replace("list(g.permutation(len(names)))",
                                                                 "list(np.random.default_rng(seed).permutation(len(names)))"),
                                          "make the generator once"),
}


def _namespace(overrides: dict[str, list[tuple[str, str, str]]] | None = None) -> dict:
    """Execute timing_dev's code cells as the release has them, every stub replaced by our
    independent solution (or by `overrides[grade_id]`); `__name__` is not "__main__", so the
    demos and test calls do not run."""
    plan = dict(SOLUTIONS, **(overrides or {}))
    cells = _student_cells(TIMING_NB)
    mod = types.ModuleType("lesson_timing_ns")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    ns = mod.__dict__
    try:
        for c in cells:
            src = c["source"]
            for how, name, body in plan.get(c["grade_id"], []):
                src = _fill_stub(src, name, body) if how == "fill" else _replace_function(src, name, body)
            exec(compile(src, f"<timing_dev:{c['grade_id'] or 'cell'}>", "exec"), ns)
    except BaseException:
        sys.modules.pop(mod.__name__, None)
        raise
    return ns


@pytest.fixture()
def fresh():
    made = []

    def make(overrides=None):
        ns = _namespace(overrides)
        made.append(ns)
        return ns

    yield make
    sys.modules.pop("lesson_timing_ns", None)


def test_every_stub_has_an_independent_solution():
    stubs = set()
    for c in _student_cells(TIMING_NB):
        stubs.update((c["grade_id"], n) for n in re.findall(r'not yet implemented: ([\w.<>]+)"', c["source"]))
    planned = {(gid, name) for gid, items in SOLUTIONS.items() for _, name, _ in items}
    assert stubs == planned, f"stubs in the release {sorted(stubs)} vs independent solutions {sorted(planned)}"


def test_independent_solutions_pass_the_graded_tests(fresh):
    ns = fresh()
    assert "ppf" not in ns["median_ci"].__code__.co_names, "not our solution's code path"
    assert isinstance(ns["fixed_threads"], type), "the injected context managers are classes, unlike ours"
    for gid, test in GRADED_TESTS.items():
        ns[test]()


@pytest.mark.parametrize("gid", list(SOLUTIONS))
def test_a_stub_fails_its_graded_test_with_its_name(gid, fresh):
    "Everything else solved, this task's stub left in: its graded test says which function is missing."
    ns = fresh({gid: []})
    names = "|".join(re.escape(name) for _, name, _ in SOLUTIONS[gid])
    with pytest.raises(NotImplementedError, match=f"not yet implemented: (?:{names})"):
        ns[GRADED_TESTS[gid]]()


@pytest.mark.parametrize("mistake", list(WRONG))
def test_typical_wrong_solutions_are_named(mistake, fresh):
    gid, how, name, body, expect = WRONG[mistake]
    others = [item for item in SOLUTIONS[gid] if item[1] != name]
    ns = fresh({gid: others + [(how, name, body)]})
    with pytest.raises(AssertionError) as e:
        ns[GRADED_TESTS[gid]]()
    assert expect in str(e.value), f"{mistake}: the failure should say {expect!r}, got: {e.value}"


def test_the_graded_timing_tests_patch_no_globals(fresh):
    """The graded tests reach the student's code only through its arguments (a fake clock, fake fn and
    sync as callbacks) and `in_student_process`: grading runs them in a process of their own, where
    patching the notebook's globals would not reach the student's code. Pass or fail, every global of
    the namespace is the object it was before."""
    ns = fresh()
    before = dict(ns)
    for test in GRADED_TESTS.values():
        ns[test]()
    changed = sorted(k for k in before if ns.get(k) is not before[k])
    assert not changed, f"the graded tests replaced these globals: {changed}"
    ns = fresh({"timing-loop": [SOLUTIONS["timing-loop"][0], ("fill", "time_callable", WRONG["no warmup"][3])]})
    before = dict(ns)
    with pytest.raises(AssertionError):
        ns["test_unit_timing_loop"]()
    changed = sorted(k for k in before if ns.get(k) is not before[k])
    assert not changed, f"the failing graded test replaced these globals: {changed}"


# ---- the scaffolds agree with the graded cells ------------------------------------------------

TASK_LINE = re.compile(r"^\*\*Your task \((easy|medium|hard), (\d+) points?\)\.\*\* \S", re.M)


@pytest.mark.parametrize("stem", ["timing_dev", "profiling_dev"])
def test_task_lines_match_graded_points(stem):
    nb = json.loads((ROOT / "nbs" / MODULE / f"{stem}.ipynb").read_text(encoding="utf-8"))
    cells = nb["cells"]
    found, by_level = [], {"easy": 0, "medium": 0, "hard": 0}
    for i, c in enumerate(cells):
        meta = c["metadata"].get("nbgrader", {})
        if c["cell_type"] != "code" or not meta.get("solution"):
            continue
        above = "".join(cells[i - 1]["source"]) if cells[i - 1]["cell_type"] == "markdown" else ""
        m = TASK_LINE.search(above)
        assert m, f"{stem}: the markdown above solution cell {meta['grade_id']!r} has no '**Your task (D, N points).**' line"
        graded = next(d for d in cells[i + 1:] if d["metadata"].get("nbgrader", {}).get("grade"))
        points = graded["metadata"]["nbgrader"]["points"]
        assert int(m.group(2)) == points, (f"{stem}: {meta['grade_id']} says {m.group(2)} points, its graded cell "
                                           f"{graded['metadata']['nbgrader']['grade_id']} gives {points}")
        assert "Approach:" in above and "Hints:" in above and "Example:" in above and "TODO:" in above, \
            f"{stem}: {meta['grade_id']}: the scaffold needs TODO, Approach, Example and Hints bullets"
        by_level[m.group(1)] += points
        found.append(meta["grade_id"])
    assert found, f"{stem}: no graded task"
    if stem == "timing_dev":
        assert by_level["medium"] + by_level["hard"] >= sum(by_level.values()) / 2, by_level


# ---- the Module 15 release runs with only the stubs' errors ----------------------------------

@pytest.fixture(scope="module")
def release_15(course, tmp_path_factory):
    return make_release(course, MODULE, tmp_path_factory)


@pytest.mark.lesson
@pytest.mark.parametrize("name", ["timing_dev.ipynb", "profiling_dev.ipynb"])
def test_release_15_runs_with_only_expected_errors(name, release_15, agg_backend, lesson_kernels):
    path = release_15 / name
    assert path.exists(), f"{name} is missing from the Module 15 release"
    src = path.read_text(encoding="utf-8")
    assert "### BEGIN SOLUTION" not in src and "not yet implemented" in src, f"{name}: solutions left in the release"
    nb, errors = run_release_notebook(path, lesson_kernels)
    if _has_solution_regions(nb):
        graded = {meta.get("grade_id") for i, meta, o in errors if meta.get("grade") and _expected(o)}
        solution_ids = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells
                        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}
        missing = {f"test-{gid}" for gid in solution_ids} - graded
        assert not missing, f"release {name}: graded cells that did not report their missing implementation: {missing}"
