"""What the student gets back for a notebook: their cells with their own outputs, and each graded
cell as released with the judge's verdict; the same as one HTML page.

Rendered in the judge's process as each notebook finishes (many students' pages are rendered at
once, one per judge, not in tito's own process).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

from tito.isolation.sanitize import clean_text, sanitize_outputs
from tito.notebooks.cells import cell_source, nbgrader_meta


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
    """grade_id -> {"ok", "points", "max", "message", "seconds"}: tito's rule, a graded cell earns its
    points when the judge says its test passed, nothing else."""
    out = {}
    for gid, pts in test_points(source).items():
        t = tests.get(gid) if isinstance(tests.get(gid), dict) else {"ok": False, "message": "the judge did not run this test"}
        ok = t.get("ok") is True
        out[gid] = {"ok": ok, "points": pts if ok else 0.0, "max": pts, "message": clean_text(t.get("message", "")),
                    "seconds": t.get("seconds", 0.0) if type(t.get("seconds")) in (int, float) else 0.0}
    return out


def render(folder: Path, name: str, student: dict, feedback: dict, verdicts: dict, released: dict[str, dict],
           title: str) -> dict:
    """FOLDER/autograded/NAME.ipynb and FOLDER/feedback/NAME.html; returns {"cell_errors": [...],
    "timed_out": bool} about the student's own cells."""
    nb, other, timed_out = autograded_notebook(student, feedback, verdicts, released)
    for sub in ("autograded", "feedback"):
        (Path(folder) / sub).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "autograded" / f"{name}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                                                encoding="utf-8")
    try:
        html = feedback_html(nb, title)
    except Exception as e:  # noqa: BLE001 - the grade stands without its page
        html = f"<p>feedback could not be rendered: {type(e).__name__}</p>"
    (Path(folder) / "feedback" / f"{name}.html").write_text(html, encoding="utf-8")
    return {"cell_errors": other, "timed_out": timed_out}


def autograded_notebook(student: dict, feedback: dict, verdicts: dict, released: dict[str, dict]):
    """The student's notebook with their feedback outputs; each graded cell as released, with the
    judge's verdict as its output. Returns (notebook, errors of other cells, whether a cell timed out)."""
    nb = copy.deepcopy(student)
    nb.setdefault("metadata", {})
    nb["nbformat"], nb["nbformat_minor"] = 4, max(int(nb.get("nbformat_minor", 5) or 5), 5)
    cells = feedback.get("cells", {}) if isinstance(feedback.get("cells"), dict) else {}
    stopped = str(feedback.get("stopped", "") or "")
    other, timed_out, first_missing = [], "time limit" in stopped, True
    nb["cells"] = [c if isinstance(c, dict) else {"cell_type": "markdown", "metadata": {}, "source": ""}
                   for c in nb.get("cells", [])]  # same indices as the feedback run's
    for i, cell in enumerate(nb["cells"]):
        cell["source"] = cell_source(cell)
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = {}
        if cell.get("cell_type") != "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
            continue
        gid = nbgrader_meta(cell).get("grade_id")
        if gid in verdicts:
            if gid in released:
                cell["source"] = cell_source(released[gid])
            v = verdicts[gid]
            cell["outputs"] = [verdict_output(gid, v)]
            cell["execution_count"] = None
            continue
        got = cells.get(str(i))
        if isinstance(got, dict):
            cell["outputs"] = sanitize_outputs(got.get("outputs"))
            count = got.get("execution_count")
            cell["execution_count"] = count if type(count) is int else None
            errs = [o for o in cell["outputs"] if o.get("output_type") == "error"]
            if errs:
                timed_out = timed_out or errs[-1].get("ename") == "CellTimeoutError"
                other.append(clean_text(f"{cell_label(cell, i)}: {first_line(str(errs[-1].get('ename')), 80)}: "
                                        f"{first_line(errs[-1].get('evalue', ''))}", 300))
        else:
            cell["outputs"] = []
            cell["execution_count"] = None
            if first_missing and (stopped or cells):
                cell["outputs"] = [{"output_type": "error", "ename": "NotRun",
                                    "evalue": f"not run: {stopped or 'the notebook stopped before this cell'}",
                                    "traceback": [f"not run: {stopped or 'the notebook stopped before this cell'}"]}]
                first_missing = False
    return nb, other, timed_out


def verdict_output(gid: str, v: dict) -> dict:
    if v["ok"]:
        return {"output_type": "stream", "name": "stdout",
                "text": f"{gid}: passed ({num(v['points'])} of {num(v['max'])} points)\n"}
    msg = v["message"] or "failed"
    return {"output_type": "error", "ename": f"{gid} failed (0 of {num(v['max'])} points)", "evalue": msg,
            "traceback": [f"{gid} failed (0 of {num(v['max'])} points)", *msg.splitlines()]}


def cell_label(cell: dict, index: int) -> str:
    meta = nbgrader_meta(cell)
    if meta.get("grade_id"):
        return first_line(str(meta["grade_id"]), 80)
    first = next((l.strip() for l in cell_source(cell).splitlines() if l.strip() and not l.strip().startswith("#|")), "")
    return f"cell {index}" + (f" ({first[:40]!r})" if first else "")


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
            lexer = info.get("pygments_lexer", info.get("name", None))
            highlight = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
            resources = self._init_resources(resources)
            self.register_filter("highlight_code", highlight)
            self.register_filter("filter_data_type", WidgetsDataTypeFilter(
                notebook_metadata=self._nb_metadata, parent=self, resources=resources))
            return TemplateExporter.from_notebook_node(self, nb, resources, **kw)

    _EXPORTERS.append(Exporter(template_name="lab", sanitize_html=True, filters={"clean_html": clean_html}))
    return _EXPORTERS[0]


SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
             "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"}
SAFE_ATTRIBUTES = {"*": {"class", "id", "title"}, "a": {"href"}, "img": {"src", "alt", "width", "height"},
                   "td": {"align", "colspan", "rowspan"}, "th": {"align", "colspan", "rowspan"}}


def clean_html(element) -> str:
    """HTML from a student's notebook with only formatting tags and harmless attributes (nh3): no
    script, no event handler, no style, links to http(s) and mailto only.

    >>> clean_html('<p onclick="x()">hi<script>alert(1)</script></p>')
    '<p>hi</p>'
    """
    import nh3

    text = element.decode() if isinstance(element, bytes) else str(element)
    return nh3.clean(text, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
                     link_rel=None)
