"""The written answers of the systems-thinking notebook count (issue 14, "Written answers count").

Each of the four answers is a manually graded nbgrader cell (markdown, `grade` and `solution`
true, with `points`); the question right above it carries the task line
`**Your task (DIFFICULTY, N points).**` with the same N; the instructor source holds an answer key
and a rubric whose points add up to N; the student release holds neither. Grading reports the
answers' points as pending manual grading (`manual_pending`), never as failures, while the
autograded tests still give a full solution all their points.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tito.notebooks import nbgrader_glue
from tito.grading import classrun

ROOT = Path(__file__).resolve().parent.parent
MODULE = "19_benchmarking"
NOTEBOOK = ROOT / "nbs" / MODULE / "systems_thinking_dev.ipynb"
ANSWERS = {f"systems-thinking-answer-{q}" for q in "abcd"}
TASK_LINE = re.compile(r"^\*\*Your task \((easy|medium|hard), (\d+(?:\.\d+)?) points?\)\.\*\*", re.M)
RUBRIC = re.compile(r"\*Rubric \((\d+(?:\.\d+)?) points?\)\.\*")
RUBRIC_ITEM = re.compile(r"^- (\d+(?:\.\d+)?) points?:", re.M)


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _answer_cells(nb: dict) -> dict[str, tuple[int, dict]]:
    return {_meta(c)["grade_id"]: (i, c) for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "markdown" and _meta(c).get("grade") and _meta(c).get("solution")}


@pytest.fixture(scope="module")
def source() -> dict:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """The student release of the systems-thinking notebook (nbgrader generate_assignment + leak check)."""
    tmp = tmp_path_factory.mktemp("written-release")
    res = nbgrader_glue.release_module([NOTEBOOK], MODULE, tmp / "release", tmp / "nbg", "tinytorch", 300)
    assert not res.leaks, "\n".join(map(str, res.leaks))
    (nb,) = res.notebooks
    return nb


# ---- the instructor source ----------------------------------------------------------------------

def test_source_answers_have_key_rubric_and_task_line(source):
    cells = _answer_cells(source)
    assert set(cells) == ANSWERS, sorted(cells)
    for gid, (i, cell) in cells.items():
        points = float(_meta(cell)["points"])
        text = _src(cell)
        assert points > 0, f"{gid}: a written answer that counts has points"
        assert "*Answer key.*" in text, f"{gid}: the instructor source holds the answer key"
        rubric = RUBRIC.search(text)
        assert rubric and float(rubric.group(1)) == points, \
            f"{gid}: expected a '*Rubric ({points:g} points).*' heading, got {rubric and rubric.group(0)}"
        items = [float(x) for x in RUBRIC_ITEM.findall(text[rubric.end():])]
        assert items and sum(items) == points, f"{gid}: rubric items give {items}, expected {points:g} points in all"
        above = source["cells"][i - 1]
        task = TASK_LINE.search(_src(above)) if above["cell_type"] == "markdown" else None
        assert task, f"{gid}: the markdown cell above the answer must hold the **Your task (...)** line"
        assert task.group(1) in ("medium", "hard"), f"{gid}: a written answer is medium or hard, got {task.group(1)}"
        assert float(task.group(2)) == points, f"{gid}: the task line says {task.group(2)} points, the cell {points:g}"


def test_every_graded_code_task_has_its_task_line(source):
    """Each solution code cell has the task line right above it, with the points of its graded test."""
    cells = source["cells"]
    tests = {_meta(c)["grade_id"]: float(_meta(c)["points"]) for c in cells
             if c["cell_type"] == "code" and _meta(c).get("grade")}
    solutions = [(i, _meta(c)["grade_id"]) for i, c in enumerate(cells)
                 if c["cell_type"] == "code" and _meta(c).get("solution")]
    assert len(solutions) == 4
    for i, gid in solutions:
        task = TASK_LINE.search(_src(cells[i - 1]))
        assert task, f"{gid}: no **Your task (...)** line in the markdown cell above it"
        assert float(task.group(2)) == tests[f"test-{gid}"], (gid, task.group(0), tests[f"test-{gid}"])


# ---- the student release -------------------------------------------------------------------------

def test_release_answers_are_manual_graded_cells_without_key_or_rubric(source, released):
    rel = json.loads(released.read_text(encoding="utf-8"))
    cells = _answer_cells(rel)
    assert set(cells) == ANSWERS, sorted(cells)
    src_cells = _answer_cells(source)
    for gid, (_, cell) in cells.items():
        meta = _meta(cell)
        assert meta["grade"] and meta["solution"] and not meta["locked"], meta
        assert float(meta["points"]) == float(_meta(src_cells[gid][1])["points"]) > 0, meta
        assert meta.get("checksum"), f"{gid}: nbgrader records the released answer's checksum (unanswered = unchanged)"
        assert _src(cell).strip() == "YOUR ANSWER HERE", f"{gid}: {_src(cell)[:200]!r}"
    text = "\n".join(_src(c) for c in rel["cells"])
    for secret in ("Answer key", "Rubric", "1 point:", "BEGIN SOLUTION", "END SOLUTION"):
        assert secret not in text, f"the release leaks {secret!r}"
    # every line of every key and rubric, not only the headings
    for gid, (_, cell) in src_cells.items():
        for line in _src(cell).splitlines():
            if len(line.strip()) > 20:
                assert line.strip() not in text, f"{gid}: the release holds {line.strip()[:80]!r}"


def test_written_answers_tells_written_from_unanswered(released, tmp_path):
    """`tito module complete` reports the written answers from these (nbgrader's checksum test)."""
    nb = json.loads(released.read_text(encoding="utf-8"))
    assert [a.answered for a in nbgrader_glue.written_answers([released])] == [False] * 4
    i, _ = _answer_cells(nb)["systems-thinking-answer-b"]
    nb["cells"][i]["source"] = "The clock costs about 0.1% of one reading here."
    mine = tmp_path / released.name
    mine.write_text(json.dumps(nb), encoding="utf-8")
    got = {a.grade_id: (a.answered, a.points) for a in nbgrader_glue.written_answers([mine])}
    assert got == {"systems-thinking-answer-a": (False, 3.0), "systems-thinking-answer-b": (True, 3.0),
                   "systems-thinking-answer-c": (False, 4.0), "systems-thinking-answer-d": (False, 3.0)}, got


def test_the_checksum_is_nbgraders(released):
    """`written_answers` computes nbgrader's cell checksum from plain JSON: equal to nbgrader's own on every cell
    nbgrader checksummed in the release (code and markdown, graded or locked), and on each one edited."""
    import nbformat
    from nbgrader.utils import compute_checksum

    nb = nbformat.read(str(released), as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("checksum")]
    assert len(cells) > 10 and {c.cell_type for c in cells} == {"code", "markdown"}, len(cells)
    for cell in cells:
        for source in (cell.source, cell.source + " edited", ""):
            c = nbformat.from_dict({**cell, "source": source})
            assert nbgrader_glue.cell_checksum(json.loads(json.dumps(c))) == compute_checksum(c), cell.metadata
    assert sum(compute_checksum(c) == c.metadata.nbgrader.checksum for c in cells) == len(cells)


# ---- grading ---------------------------------------------------------------------------------------

def test_old_csv_reads_with_every_column(tmp_path):
    old = tmp_path / "grades.csv"  # written by a tito without the manual_pending column
    old.write_text("student,notebook,score,max_score,status,reason,sandbox\nann,(total),5,5,graded,,bubblewrap\n")
    (row,) = classrun.read_csv(old)
    assert row["manual_pending"] == "" and list(row)[:len(classrun.CSV_FIELDS)] == classrun.CSV_FIELDS
    classrun.write_csv(old, [row])
    assert classrun.read_csv(old) == [row], "a rewritten file reads back the same (no false 'changed')"


# Grading them (pending, never a failure; "no written answer" when unanswered) is checked where the whole
# module is graded once: tests/test_grading_module19.py::test_the_instructors_solutions_get_every_point_of_module_19


# ---- the notebook's graded code tasks: another solution passes, typical mistakes are named -----------

MINE = '''
def ci_half_width(values, confidence=0.95):
    xs = [float(v) for v in values]
    if len(xs) < 2:
        raise ValueError("values: need two or more")
    if not 0 < confidence < 1:
        raise ValueError("confidence: must lie in (0, 1)")
    return float(stats.t.interval(confidence, len(xs) - 1, loc=0.0, scale=stats.sem(xs))[1])


def samples_to_shrink(n, factor=2.0, confidence=0.95):
    if n < 2:
        raise ValueError("n: must be >= 2")
    if factor <= 1:
        raise ValueError("factor: must be > 1")
    q = stats.t.ppf((1 + confidence) / 2, n - 1) / n ** 0.5 / factor
    lo, hi = n, 4 * n * factor  # bisection: t/sqrt(m) falls monotonically in m
    while stats.t.ppf((1 + confidence) / 2, hi - 1) / hi ** 0.5 > q:
        hi *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if stats.t.ppf((1 + confidence) / 2, mid - 1) / mid ** 0.5 <= q else (mid, hi)
    return int(hi)


def calls_per_block(overhead_ns, per_call_ns, max_overhead_fraction=1e-3):
    if per_call_ns <= 0:
        raise ValueError("per_call_ns: must be positive")
    if not 0 < max_overhead_fraction < 1:
        raise ValueError("max_overhead_fraction: outside (0, 1)")
    k = 1
    while overhead_ns > max_overhead_fraction * per_call_ns * k:
        k = max(k + 1, int(overhead_ns / (max_overhead_fraction * per_call_ns)) - 1)
    return k


def linear_cost(n_a, seconds_a, n_b, seconds_b):
    if n_a == n_b:
        raise ValueError("n_b: equals n_a")
    slope = (seconds_a - seconds_b) / (n_a - n_b)
    return seconds_b - slope * n_b, slope


def images_to_decide(accuracy, target, confidence=0.95, max_n=100_000):
    if not (0 <= accuracy <= 1):
        raise ValueError("accuracy: must be a proportion")
    if not (0 <= target <= 1):
        raise ValueError("target: must be a proportion")
    z = stats.norm.ppf(0.5 + confidence / 2)
    for n in range(1, max_n + 1):
        p = round(accuracy * n) / n
        mid = (p + z * z / (2 * n)) / (1 + z * z / n)
        w = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        if mid - w >= target or mid + w < target:
            return n
    return None
'''


def _graded_namespace(code: str) -> dict:
    """The imports cell and the graded test cells of the student version, with `code` in place of
    the stubbed tasks (`__name__` is not "__main__": no measurement runs)."""
    from tests.test_lesson import _student_cells

    cells = _student_cells(NOTEBOOK)
    ns = {"__name__": "lesson_written_ns"}
    exec(compile(cells[0]["source"], "<imports>", "exec"), ns)
    exec(compile(code, "<solution>", "exec"), ns)
    for c in cells:
        if (c["grade_id"] or "").startswith("test-"):
            exec(compile(c["source"], f"<{c['grade_id']}>", "exec"), ns)
    return ns


TESTS = ["test_unit_ci_half_width", "test_unit_samples_to_shrink", "test_unit_calls_per_block",
         "test_unit_linear_cost", "test_unit_images_to_decide"]


def test_independent_solutions_pass_the_graded_tests():
    ns = _graded_namespace(MINE)
    for name in TESTS:
        ns[name]()


@pytest.mark.parametrize("test, old, new, expect", [
    ("test_unit_ci_half_width", "stats.t.interval(confidence, len(xs) - 1, loc=0.0, scale=stats.sem(xs))[1]",
     "1.959964 * stats.sem(xs)", "that is z = 1.96 instead of Student's t"),
    ("test_unit_ci_half_width", "scale=stats.sem(xs)", "scale=float(np.std(xs)) / len(xs) ** 0.5",
     "that is the population std"),
    ("test_unit_samples_to_shrink", "    return int(hi)", "    return int(round(n * factor ** 2))",
     "20 = 4n is the normal approximation"),
    ("test_unit_calls_per_block", "    k = 1\n", "    return max(1, math.ceil(overhead_ns / (max_overhead_fraction * per_call_ns)))\n",
     "10.000000000000002 in floating point"),
    ("test_unit_linear_cost", "return seconds_b - slope * n_b, slope", "return slope, seconds_b - slope * n_b",
     "(intercept, slope)"),
    ("test_unit_images_to_decide", "    z = stats.norm.ppf(0.5 + confidence / 2)\n",
     "    return math.ceil(1.959963984540054 ** 2 * accuracy * (1 - accuracy) / (accuracy - target) ** 2)\n",
     "the normal-approximation formula"),
])
def test_typical_mistakes_are_named(test, old, new, expect):
    assert MINE.count(old) == 1, old
    ns = _graded_namespace(MINE.replace(old, new))
    with pytest.raises(AssertionError) as e:
        ns[test]()
    assert expect in str(e.value), f"{test}: the failure should say {expect!r}, got: {e.value}"
