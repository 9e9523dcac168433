"""What the student gets back for a notebook, and what formgrader shows the instructor: the notebook rebuilt
from the instructor's release, with the student's answers and outputs in their cells and each graded cell as
released with the judge's verdict (`autograded_notebook`); the same as one HTML page.

Rendered in the student's judge process as each notebook finishes (its time is the student's budget; many
students' pages are rendered at once, one per judge, not in tito's own process).
"""
from __future__ import annotations

import copy
import json
import re
from html import escape
from pathlib import Path

from tito.isolation.sanitize import (CELL_OUTPUT_BYTES, bounded_text, clean_html, console_line, mathjax_text,
                                     plain_text, sanitize_outputs)
from tito.notebooks.cells import cell_source, nbgrader_meta
from tito.notebooks.nbfile import atomic_write, write_notebook


def num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def first_line(text: str, limit: int = 200) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def test_points(source: dict) -> dict[str, float]:
    """grade_id -> points of each graded test cell of the source notebook."""
    return {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c).get("points", 0) or 0) for c in source.get("cells", [])
            if c.get("cell_type") == "code" and nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")
            and nbgrader_meta(c).get("grade_id")}


def verdicts(source: dict, tests: dict) -> dict[str, dict]:
    """grade_id -> {"ok", "points", "max", "message"}: tito's rule, a graded cell earns its points when the
    judge says its test passed, nothing else. No test's time is kept: a hidden case's time would tell its size."""
    out = {}
    for gid, pts in test_points(source).items():
        t = tests.get(gid) if isinstance(tests.get(gid), dict) else {"ok": False, "message": "the judge did not run this test"}
        ok = t.get("ok") is True
        out[gid] = {"ok": ok, "points": pts if ok else 0.0, "max": pts,
                    "message": plain_text(t.get("message", "") if isinstance(t.get("message"), str) else "")}
    return out


def render(folder: Path, name: str, release: dict, student: dict, feedback: dict, verdicts: dict,
           title: str) -> dict:
    """FOLDER/autograded/NAME.ipynb and FOLDER/feedback/NAME.html, each written whole or not at all; returns
    {"cell_errors": [...], "timed_out": bool} about the student's own cells."""
    nb, other, timed_out = autograded_notebook(release, student, feedback, verdicts)
    for sub in ("autograded", "feedback"):
        (Path(folder) / sub).mkdir(parents=True, exist_ok=True)
    write_notebook(Path(folder) / "autograded" / f"{name}.ipynb", nb)
    try:
        html = feedback_html(nb, title)
    except Exception as e:  # noqa: BLE001 - the grade stands without its page
        html = f"<p>feedback could not be rendered: {type(e).__name__}</p>"
    atomic_write(Path(folder) / "feedback" / f"{name}.html", html)
    return {"cell_errors": other, "timed_out": timed_out}


# what one autograded notebook shows of a student's files (each beyond: its first lines and a note)
CODE_CHARS, CODE_LINES = 60_000, 1_500           # one code cell (Module 19's longest solution: 21,011 characters)
TEXT_CHARS, TEXT_LINES = 20_000, 400             # one written answer or other text cell
NOTEBOOK_TEXT_CHARS = 2_000_000                  # all the student's text of one notebook
NOTEBOOK_OUTPUT_BYTES = 4_000_000                # all outputs of one notebook (each cell: CELL_OUTPUT_BYTES)
PAGE_BYTES = 5_000_000                           # what all of it may make of a page (`page_bytes`): sources
                                                 # and outputs; the release's own cells come on top
ADDED_SHOWN = 100                                # cells the student added, shown as text (the rest counted)
ADDED = "tito-added"                             # the id of the block of added cells (and the prefix of its cells')


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def page_bytes(text: str) -> int:
    """An upper estimate of the bytes `text` makes on a rendered page: each character escaped for HTML, plus
    30 bytes for each piece a code highlighter or Markdown may wrap in its own tag (a word, a run of spaces, a
    punctuation character: Pygments makes `<span class="p">(</span>` of a `(`, so 60,000 characters of
    `a(a(` are 1.4 MB of page).

    >>> page_bytes("a(b"), page_bytes("<<")
    (93, 68)
    """
    return len(escape(text)) + 30 * sum(1 for _ in _TOKEN.finditer(text))


def fitted_text(text: str, limit: int, lines: int, room: int) -> str:
    """`bounded_text(text, limit, lines)`, cut further (its first characters and a note) so that its
    `page_bytes` stay within `room`.

    >>> shown = fitted_text("a(" * 1000, 10_000, 400, 3_000)
    >>> shown[:6], shown.splitlines()[-1], page_bytes(shown) <= 3_000
    ('a(a(a(', '… (0 more lines, 1,927 more characters not shown)', True)
    """
    shown = bounded_text(text, limit, lines)
    if page_bytes(shown) <= room:
        return shown
    lo, hi = 0, min(limit, len(text))  # the longest cut whose page fits: page_bytes grows with the cut
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if page_bytes(bounded_text(text, mid, lines)) <= room:
            lo = mid
        else:
            hi = mid - 1
    return bounded_text(text, lo, lines)


def autograded_notebook(release: dict, student: dict, feedback: dict, verdicts: dict):
    """The autograded notebook, rebuilt from the instructor's release (`release`: the notebook as handed out,
    made from the source): every cell, id, metadata and graded cell is the release's, and the notebook's
    metadata too. From the submission (`student`, tito.notebooks.nbfile.essentials) only the text of its
    answer cells (solution cells, found by their grade_id) and the outputs of its feedback run
    (`feedback`: student cell index -> outputs) pass, bounded, into the matching cells; an instructor's cell
    gets the outputs of the student's copy when that copy is unchanged. Every other cell of the submission
    (added, duplicated or changed) is shown as text in one labelled block at the end, outputs as text only.
    Each graded test cell shows the test as released and the judge's verdict (`verdicts`, by grade_id).

    Returns (notebook, one line per student cell that raised, whether a cell timed out).
    """
    mine = [c for c in student.get("cells", []) if isinstance(c, dict)]
    ran = feedback.get("cells", {}) if isinstance(feedback.get("cells"), dict) else {}
    stopped = str(feedback.get("stopped", "") or "")
    by_gid: dict[str, int] = {}
    by_id: dict[str, int] = {}
    for i, c in enumerate(mine):
        gid = nbgrader_meta(c).get("grade_id")
        if isinstance(gid, str):
            by_gid[gid] = i  # the last copy, as the judge exports it (tito.grading.package.merged_notebook)
        if isinstance(c.get("id"), str):
            by_id.setdefault(c["id"], i)
    runnable = [i for i, c in enumerate(mine) if c.get("cell_type") == "code"
                and not (nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution"))]
    not_run = next((i for i in runnable if str(i) not in ran), None) if (stopped or ran) else None
    state = {"text": NOTEBOOK_TEXT_CHARS, "outputs": NOTEBOOK_OUTPUT_BYTES, "page": PAGE_BYTES,
             "timed_out": "time limit" in stopped}
    other: list[str] = []

    def text(i: int, code: bool, markdown: bool = False) -> str:
        # a written answer is Markdown where MathJax runs: its styling commands are shown as text
        src = mathjax_text(cell_source(mine[i])) if markdown else cell_source(mine[i])
        limit, lines = (CODE_CHARS, CODE_LINES) if code else (TEXT_CHARS, TEXT_LINES)
        if state["text"] > 0 and state["page"] > 1_000:
            shown = fitted_text(src, min(limit, state["text"]), lines, state["page"])
        else:
            shown = (f"… ({len(src):,} characters not shown: this notebook's text is above "
                     f"{NOTEBOOK_TEXT_CHARS:,} characters or {PAGE_BYTES:,} bytes of page)")
        state["text"] -= len(shown)
        state["page"] -= page_bytes(shown)
        return shown

    def attach(cell: dict, i: int, label: str, text_only: bool = False) -> None:
        got = ran.get(str(i))
        cell["outputs"], cell["execution_count"] = [], None
        if isinstance(got, dict):
            # an output's JSON byte is at most 5 bytes of page (`&` as `&amp;`)
            room = min(CELL_OUTPUT_BYTES, max(state["outputs"], 0), max(state["page"], 0) // 5)
            cell["outputs"] = sanitize_outputs(got.get("outputs"), room, text_only)
            state["outputs"] -= len(json.dumps(cell["outputs"]))
            state["page"] -= len(escape(json.dumps(cell["outputs"], ensure_ascii=False)))  # text, escaped
            count = got.get("execution_count")
            cell["execution_count"] = count if type(count) is int else None
            errs = [o for o in cell["outputs"] if o.get("output_type") == "error"]
            if errs:
                state["timed_out"] = state["timed_out"] or errs[-1].get("ename") == "CellTimeoutError"
                other.append(console_line(f"{label}: {first_line(str(errs[-1].get('ename')), 80)}: "
                                          f"{first_line(errs[-1].get('evalue', ''))}", 300))
        elif i == not_run:
            why = f"not run: {stopped or 'the notebook stopped before this cell'}"
            cell["outputs"] = [{"output_type": "error", "ename": "NotRun", "evalue": plain_text(why, 500),
                                "traceback": [plain_text(why, 500)]}]

    used: set[int] = set()
    cells = []
    for k, rc in enumerate(c for c in release.get("cells", []) if isinstance(c, dict)):
        kind = rc.get("cell_type") if rc.get("cell_type") in ("code", "markdown", "raw") else "raw"
        cell = {"cell_type": kind, "id": rc["id"] if isinstance(rc.get("id"), str) else f"cell-{k}",
                "metadata": copy.deepcopy(rc.get("metadata") if isinstance(rc.get("metadata"), dict) else {}),
                "source": cell_source(rc)}
        if kind == "code":
            cell["outputs"], cell["execution_count"] = [], None
        meta = nbgrader_meta(rc)
        gid = meta.get("grade_id")
        if gid in verdicts and kind == "code":  # a graded test: as released, with the judge's verdict
            cell["outputs"] = [verdict_output(gid, verdicts[gid])]
            used.add(by_gid.get(gid, -1))
        elif gid and meta.get("solution"):  # an answer cell: the student's text and outputs
            i = by_gid.get(gid)
            if i is not None:
                used.add(i)
                cell["source"] = text(i, kind == "code", markdown=kind == "markdown")
                if kind == "code":
                    attach(cell, i, gid)
        else:  # the instructor's cell: the student's outputs when their copy of it is unchanged
            i = by_gid.get(gid) if gid else by_id.get(cell["id"])
            if i is not None and i not in used and mine[i].get("cell_type") == kind and \
                    cell_source(mine[i]).strip() == cell["source"].strip():
                used.add(i)
                if kind == "code":
                    attach(cell, i, gid or f"cell {k + 1}")
        cells.append(cell)
    added = [i for i in range(len(mine)) if i not in used]
    if added:
        cells.append({"cell_type": "markdown", "id": ADDED, "metadata": {},
                      "source": f"## Cells added or changed by the student ({len(added)})\n\nShown as text, with "
                                "their outputs as text, as they ran in the student's notebook."})
    for n, i in enumerate(added, 1):
        first = next((l.strip() for l in cell_source(mine[i]).splitlines() if l.strip()), "")
        label = f"added cell {n}" + (f" ({first[:40]!r})" if first else "")
        if n > ADDED_SHOWN:  # not shown; its errors still count
            attach({}, i, label, text_only=True)
            continue
        if mine[i].get("cell_type") == "code":
            cell = {"cell_type": "code", "id": f"{ADDED}-{n}", "metadata": {}, "source": text(i, True)}
            attach(cell, i, label, text_only=True)
        else:
            cell = {"cell_type": "markdown", "id": f"{ADDED}-{n}", "metadata": {}, "source": as_code_block(text(i, False))}
        cells.append(cell)
    if len(added) > ADDED_SHOWN:
        cells.append({"cell_type": "markdown", "id": f"{ADDED}-more", "metadata": {},
                      "source": f"… {len(added) - ADDED_SHOWN} more added cells not shown"})
    meta = release.get("metadata") if isinstance(release.get("metadata"), dict) else {}
    nb = {"nbformat": 4, "nbformat_minor": max(int(release.get("nbformat_minor", 5) or 5), 5),
          "metadata": copy.deepcopy(meta), "cells": cells}
    return nb, other, state["timed_out"]


def as_code_block(text: str) -> str:
    """`text` as a Markdown code block (a fence longer than any run of backticks in it): shown as typed, never
    read as Markdown or HTML.

    >>> as_code_block("a ``` <b>")
    '````text\\na ``` <b>\\n````'
    """
    fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence}text\n{text}\n{fence}"


def verdict_output(gid: str, v: dict) -> dict:
    if v["ok"]:
        return {"output_type": "stream", "name": "stdout",
                "text": f"{gid}: passed ({num(v['points'])} of {num(v['max'])} points)\n"}
    msg = v["message"] or "failed"
    return {"output_type": "error", "ename": f"{gid} failed (0 of {num(v['max'])} points)", "evalue": msg,
            "traceback": [f"{gid} failed (0 of {num(v['max'])} points)", *msg.splitlines()]}


def feedback_html(nb: dict, title: str) -> str:
    """The autograded notebook as one HTML page (nbconvert's lab template, no code execution)."""
    import nbformat

    node = nbformat.from_dict(nb)
    node.metadata["title"] = title
    # sanitize_html: the student's markdown and HTML outputs lose scripts, event handlers and styles (the
    # page is opened by the instructor too); the usual formatting tags stay
    body, _ = _exporter().from_notebook_node(node)
    return body


_EXPORTERS: list = []


def _exporter():
    """One HTML exporter for the process. nbconvert's own re-parses every page it wrote (BeautifulSoup, to
    add alt texts and tab stops): half the time of a large page. This one skips that pass (nbconvert 7)."""
    if _EXPORTERS:
        return _EXPORTERS[0]
    from nbconvert import HTMLExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class Exporter(HTMLExporter):
        def from_notebook_node(self, nb, resources=None, **kw):
            info = nb.metadata.get("language_info", {})
            info = info if isinstance(info, dict) else {}
            lexer = info.get("pygments_lexer", info.get("name", None))
            highlight = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
            resources = self._init_resources(resources)
            self.register_filter("highlight_code", highlight)
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
            return TemplateExporter.from_notebook_node(self, nb, resources, **kw)

    # sanitize_html with tito's one sanitizer (tito.isolation.sanitize.clean_html): every student HTML of the page
    _EXPORTERS.append(Exporter(template_name="lab", sanitize_html=True, filters={"clean_html": clean_html}))
    return _EXPORTERS[0]
