"""Outputs from the sandbox, made safe to store and render: only known output types and mime types,
strings only, size-capped, so a student's notebook run cannot break or inflate the report.
"""
from __future__ import annotations

import json
import re


MIME_KEEP = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml")
CELL_OUTPUT_BYTES = 200_000


def _text(v, limit: int = CELL_OUTPUT_BYTES) -> str:
    v = "".join(v) if isinstance(v, list) else v
    return v[:limit] if isinstance(v, str) else ""


def sanitize_outputs(outputs) -> list:
    """Outputs from the sandbox, rebuilt field by field (only known output types and mime types,
    strings only, size-capped), so they cannot break or inflate the graded notebook.

    >>> sanitize_outputs([{"output_type": "stream", "name": "stdout", "text": "hi"}, {"output_type": "x"}])[0]["text"]
    'hi'
    """
    from nbformat.v4 import new_output  # here: nbformat takes seconds to import, the judge needs none of it

    out: list = []
    budget = CELL_OUTPUT_BYTES
    for o in outputs if isinstance(outputs, list) else []:
        if not isinstance(o, dict) or budget <= 0:
            continue
        kind = o.get("output_type")
        if kind == "stream":
            node = new_output("stream", name="stderr" if o.get("name") == "stderr" else "stdout",
                              text=_text(o.get("text", ""), budget))
        elif kind == "error":
            tb = [_text(t, 5000) for t in o.get("traceback", [])[:60]] if isinstance(o.get("traceback"), list) else []
            node = new_output("error", ename=_text(o.get("ename", "Error"), 200) or "Error",
                              evalue=_text(o.get("evalue", ""), 2000), traceback=tb)
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") if isinstance(o.get("data"), dict) else {}
            data = {k: _text(v, budget) for k, v in data.items() if k in MIME_KEEP and isinstance(v, (str, list))}
            if kind == "execute_result":
                count = o.get("execution_count")
                node = new_output(kind, data=data, execution_count=count if isinstance(count, int) else None)
            else:
                node = new_output(kind, data=data)
        else:
            continue
        budget -= len(json.dumps(node))
        out.append(node)
    return out


_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: str, limit: int = 4000) -> str:
    """`text` without terminal escape sequences and control characters (newlines and tabs kept),
    cut to `limit`: what the student's code puts in a message cannot move the instructor's cursor,
    rewrite earlier lines of a report or hide in grades.csv.

    >>> clean_text("ok\x1b[1A\x1b[2K fake\x07 line")
    'ok fake line'
    """
    return _CONTROL.sub("", _ANSI.sub("", str(text)))[:limit]


# One escaping helper per output format, called where the output is written (STYLE: escape at the edge).
# Every byte a student controls that reaches a file an instructor opens passes through one of these.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"[\r\n\t\x0b\x0c\u0085\u2028\u2029]+")
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def plain_text(text: object, limit: int = 4000) -> str:
    """`text` as inert text: lone surrogates (which no UTF-8 file can hold) as U+FFFD, terminal escapes and
    control characters removed (newlines and tabs kept), cut to `limit` characters with a note.

    >>> plain_text("a\\ud800b\\x1b[2Kc")
    'a\\ufffdbc'
    >>> plain_text("x" * 10, limit=4)
    'xxxx… (10 characters, cut)'
    """
    s = clean_text(_SURROGATE.sub("\ufffd", str(text)), limit=max(len(str(text)), 1))
    return s if len(s) <= limit else f"{s[:limit]}… ({len(s):,} characters, cut)"


def console_line(text: object, limit: int = 300) -> str:
    """`text` as one console line: `plain_text` with every line break and tab as one space.

    >>> console_line("full\\nfake row")
    'full fake row'
    """
    return _LINE_BREAKS.sub(" ", plain_text(text, limit)).strip()


def csv_cell(value: object, limit: int = 4000) -> object:
    """A value for a CSV cell a spreadsheet will open: numbers and None as they are; text as `plain_text`,
    prefixed with `'` when it begins with a character a spreadsheet reads as a formula (OWASP's rule:
    `=`, `+`, `-`, `@`, tab, CR), so a student's text is never a formula.

    >>> csv_cell('=HYPERLINK("http://x")'), csv_cell(-1.5), csv_cell("ok")
    ('\\'=HYPERLINK("http://x")', -1.5, 'ok')
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    s = plain_text(value, limit)
    return "'" + s if s.startswith(CSV_FORMULA_START) else s


def md_cell(text: object, limit: int = 300) -> str:
    """A student's text as one Markdown table cell or list item: one line, `|` escaped, no HTML, no link or
    image syntax that a renderer would fetch: a name cannot add a row, a column or a beacon to a board.

    >>> md_cell("a|b\\n<img src=x>![t](http://x)")
    'a\\\\|b &lt;img src=x&gt;\\\\!\\\\[t\\\\](http://x)'
    """
    s = console_line(text, limit).replace("\\", "\\\\").replace("|", "\\|")
    return s.replace("<", "&lt;").replace(">", "&gt;").replace("!", "\\!").replace("[", "\\[").replace("]", "\\]")


def html_text(text: object, limit: int = 4000) -> str:
    """A student's text inside HTML, as text: `plain_text`, then every markup character escaped.

    >>> html_text('x"><img src=x onerror=alert(1)>')
    'x&quot;&gt;&lt;img src=x onerror=alert(1)&gt;'
    """
    import html

    return html.escape(plain_text(text, limit), quote=True)
