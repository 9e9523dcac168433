"""What a student wrote, made inert for the file an instructor opens: outputs from the sandbox (only known
output types and mime types, strings only, size-capped, so a notebook run cannot break or inflate a report),
one HTML sanitizer (`clean_html`) and one escaping helper per output format (`plain_text`, `console_line`,
`csv_cell`, `md_cell`, `html_text`).
"""
from __future__ import annotations

import json
import re


MIME_KEEP = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg", "image/svg+xml")
MIME_TEXT_ONLY = ("text/plain", "image/png", "image/jpeg")  # a cell the student added: no markup at all
MIME_MATHJAX = ("text/html", "text/markdown", "text/latex")  # shown where MathJax runs (stream text is in <pre>)
CELL_OUTPUT_BYTES = 200_000
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # half of a UTF-16 pair: no UTF-8 file can hold one alone


def _text(v, limit: int = CELL_OUTPUT_BYTES, note: bool = True) -> str:
    """A string field of an output: no terminal escape (nbconvert's ansi2html would turn a colour code into an
    inline-styled span after clean_html, and a code per character into a span per character), no control
    character, no lone surrogate, at most `limit` characters (and, with `note`, a line saying it was cut)."""
    v = "".join(x for x in v if isinstance(x, str)) if isinstance(v, list) else v
    if not isinstance(v, str):
        return ""
    s = clean_text(_SURROGATE.sub("\ufffd", v[:8 * limit]), 8 * limit)
    if len(s) <= limit:
        return s
    return s[:limit] + (f"\n… (output cut at {limit:,} characters)" if note else "")


def sanitize_outputs(outputs, budget: int = CELL_OUTPUT_BYTES, text_only: bool = False) -> list:
    """Outputs from the sandbox, rebuilt field by field (only known output types and mime types, strings
    only, lone surrogates replaced, images only as base64, at most `budget` bytes of JSON), so they cannot
    break or inflate the graded notebook. Terminal escapes are removed from every string (a colour is never a
    style on the page, `_text`), and MathJax's styling commands in HTML, Markdown and LaTeX are shown as text
    (`mathjax_text`). `text_only`: text and images, no HTML, Markdown, LaTeX or SVG.

    >>> sanitize_outputs([{"output_type": "stream", "name": "stdout", "text": "hi"}, {"output_type": "x"}])[0]["text"]
    'hi'
    >>> sanitize_outputs([{"output_type": "display_data", "data": {"text/html": "<b>x</b>", "text/plain": "x"}}],
    ...                  text_only=True)[0]["data"]
    {'text/plain': 'x'}
    >>> sanitize_outputs([{"output_type": "stream", "name": "stdout", "text": "\x1b[48;2;252;248;227mkey\x1b[0m"}])[0]["text"]
    'key'
    """
    from nbformat.v4 import new_output  # here: nbformat takes seconds to import, the judge needs none of it

    out: list = []
    keep = MIME_TEXT_ONLY if text_only else MIME_KEEP
    left_out = 0
    for o in outputs if isinstance(outputs, list) else []:
        if not isinstance(o, dict) or budget <= 0:
            left_out += budget <= 0
            continue
        kind = o.get("output_type")
        if kind == "stream":
            node = new_output("stream", name="stderr" if o.get("name") == "stderr" else "stdout",
                              text=_text(o.get("text", ""), budget))
        elif kind == "error":
            tb = [_text(t, 5000) for t in o.get("traceback", [])[:60]] if isinstance(o.get("traceback"), list) else []
            node = new_output("error", ename=_text(o.get("ename", "Error"), 200, note=False) or "Error",
                              evalue=_text(o.get("evalue", ""), 2000), traceback=tb)
        elif kind in ("display_data", "execute_result"):
            data = o.get("data") if isinstance(o.get("data"), dict) else {}
            data = {k: _text(v, budget, note=not k.startswith("image/")) for k, v in data.items()
                    if k in keep and isinstance(v, (str, list))}
            data = {k: mathjax_text(v) if k in MIME_MATHJAX else v for k, v in data.items()}
            data = {k: v for k, v in data.items() if not k.startswith("image/png") and not k.startswith("image/jpeg")
                    or _BASE64.fullmatch(v)}  # an image is base64 or nothing: no markup inside an attribute
            if kind == "execute_result":
                count = o.get("execution_count")
                node = new_output(kind, data=data, execution_count=count if type(count) is int else None)
            else:
                node = new_output(kind, data=data)
        else:
            continue
        budget -= len(json.dumps(node))
        out.append(node)
    if left_out:
        out.append(new_output("stream", name="stdout", text=f"… ({left_out:,} more output{'s' if left_out > 1 else ''} "
                                                           "not shown: this notebook's outputs are bounded)\n"))
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


_BACKSLASH = r"(?:\\|&#0*92;?|&#[xX]0*5[cC];?|&bsol;)"  # `\` as typed, or as an HTML character reference
# MathJax (TeX input, as formgrader and the feedback page load it) commands that put CSS, a class, an id, a link,
# a colour or an extension on the page: with them a written answer draws a box like the page's own
MATHJAX_STYLING = ("style", "bbox", "class", "cssId", "href", "data", "color", "colorbox", "fcolorbox", "textcolor",
                   "pagecolor", "definecolor", "require", "enclose", "mmlToken", "unicode", "csname")


def _letters(name: str) -> str:
    return "".join(f"(?:{c}|&#0*{ord(c)};?|&#[xX]0*{ord(c):x};?)" for c in name)


_MATHJAX_STYLING = re.compile(f"((?:{_BACKSLASH})+)(?:{'|'.join(_letters(n) for n in MATHJAX_STYLING)})(?![A-Za-z])")


def mathjax_text(text: str) -> str:
    r"""A student's Markdown or HTML for a page where MathJax runs, with MathJax's styling commands (`\style`,
    `\bbox`, `\class`, `\cssId`, `\href`, `\color`, `\colorbox`, `\require`, ...: `MATHJAX_STYLING`) made text:
    their run of backslashes (typed, or as `&#92;`) four times as long. Inside math TeX reads `\\` as a line
    break, outside it Markdown reads `\\` as `\`: either way no backslash is left to start the command, so it
    shows as text and a written answer cannot draw a box like the page's own.

    >>> print(mathjax_text(r"$\style{background:yellow}{x}$, \frac{a}{b}, &#92;bbox[yellow]{x}"))
    $\\\\style{background:yellow}{x}$, \frac{a}{b}, \\\\bbox[yellow]{x}
    """
    return _MATHJAX_STYLING.sub(lambda m: "\\" * (4 * len(re.findall(_BACKSLASH, m.group(1))))
                                + m.group(0)[len(m.group(1)):], text)


# One escaping helper per output format, called where the output is written (STYLE: escape at the edge).
# Every byte a student controls that reaches a file an instructor opens passes through one of these.
_LINE_BREAKS = re.compile(r"[\r\n\t\x0b\x0c\u0085\u2028\u2029]+")
CSV_FORMULA_START = ("=", "+", "-", "@")  # tab and CR: no cell holds one (csv_cell)
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


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


_CSV_SEPARATORS = re.compile(r"([,;|\t])")  # where a spreadsheet may split a cell: `,`, `;` (Excel in most
# European locales), tab, `|`: a piece after any of them is read as a cell of its own


def csv_cell(value: object, limit: int = 4000) -> object:
    """A value for a CSV cell a spreadsheet will open: numbers and None as they are; text as `plain_text`
    on one line (tabs, CR, LF and other line breaks as one space), and every piece of it that a
    spreadsheet could read as a cell of its own (the text split at `,`, `;`, `|`; Excel in most European
    locales splits a CSV on `;`) prefixed with `'` when, after spaces, it begins with a character a
    spreadsheet reads as a formula (OWASP's rule: `=`, `+`, `-`, `@`): a student's text is never a formula.

    A number written as text (`-1.5`, tito's scores) stays a number: no formula starts that way.

    >>> csv_cell('=HYPERLINK("http://x")'), csv_cell(-1.5), csv_cell("-1.5"), csv_cell("ok"), csv_cell("-1+A1")
    ('\\'=HYPERLINK("http://x")', -1.5, '-1.5', 'ok', "'-1+A1")
    >>> csv_cell("see;=HYPERLINK(A2);  @x|+1\\tok")
    "see;'=HYPERLINK(A2);  '@x|'+1 ok"
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    s = _LINE_BREAKS.sub(" ", plain_text(value, limit))
    pieces = _CSV_SEPARATORS.split(s)  # text, separator, text, ...
    for k in range(0, len(pieces), 2):
        body = pieces[k].lstrip()
        if body.startswith(CSV_FORMULA_START) and not _NUMBER.fullmatch(body.rstrip()):
            pieces[k] = pieces[k][:len(pieces[k]) - len(body)] + "'" + body
    return "".join(pieces)


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


# ---- the one HTML sanitizer: every student HTML a person opens (feedback pages, formgrader) ----------------

HTML_CHARS = 1_000_000   # markup cleaned per call (a cell's text is bounded before it is rendered: bounded_text)
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
             "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"}
# no id, name, class, style or event attribute on any tag: an id can bind formgrader's score boxes, a class
# can dress text as the page's own boxes (bootstrap's alert, panel), a style can hide or overlay anything
SAFE_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "img": {"src", "alt", "width", "height"},
                   "td": {"align", "colspan", "rowspan"}, "th": {"align", "colspan", "rowspan"}}
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*")


def _highlight_classes() -> dict[str, set[str]]:
    """The classes of code highlighted by nbconvert (pygments' token classes on `span`, its wrapper on `div`):
    colours only, the one class a page needs from its cells."""
    from pygments.token import STANDARD_TYPES

    return {"span": {c for c in STANDARD_TYPES.values() if c},
            "div": {"highlight", "hl-ipython3", "hl-ipython", "hl-python3", "hl-python"}}


def _attribute(element: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter: an image only from the page itself (a base64 PNG, JPEG or GIF): no tracking
    pixel, no request to formgrader's API with the instructor's cookie."""
    if element == "img" and attribute == "src":
        return value if _IMAGE_DATA.fullmatch(value) else None
    return value


def clean_html(element, limit: int = HTML_CHARS) -> str:
    """The one HTML sanitizer (nh3, an allow-list) for what a student's notebook puts on a page an instructor
    or student opens: formatting tags only; no script, style, form, frame or event handler; no `id`, `name`,
    `class` (but code highlighting's) or `style`; links to http(s) and mailto only, opened without a referrer;
    images only as base64 data (no external resource of any kind); at most `limit` characters of markup
    are cleaned (the rest is replaced by a note).

    >>> clean_html('<p onclick="x()" id="grade-1" class="alert">hi<script>alert(1)</script></p>')
    '<p>hi</p>'
    >>> clean_html('<img src="http://tracker/pixel.gif" alt="x">')
    '<img alt="x">'
    """
    import nh3

    text = element.decode("utf-8", "replace") if isinstance(element, bytes) else str(element)
    note = ""
    if len(text) > limit:
        note = f"<p>… ({len(text) - limit:,} more characters of this cell not shown)</p>"
        text = text[:limit]
    text = _SURROGATE.sub("\ufffd", text)
    return nh3.clean(text, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, attribute_filter=_attribute,
                     allowed_classes=_highlight_classes(), url_schemes={"http", "https", "mailto", "data"},
                     url_relative="deny", link_rel="noopener noreferrer nofollow") + note


def bounded_text(text: object, limit: int, lines: int = 400) -> str:
    """A student's cell text as a page shows it: lone surrogates replaced, and beyond `limit` characters or
    `lines` lines its first lines and a note (a 3 MB code block would be a page of tens of MB).

    >>> bounded_text("a\\nb\\nc", limit=100, lines=2)
    'a\\nb\\n… (1 more line, 1 more character not shown)'
    """
    s = _SURROGATE.sub("\ufffd", str(text))
    if len(s) <= limit and s.count("\n") < lines:
        return s
    head = s[:limit]
    cut = head.split("\n")[:lines]
    if len(head) == limit and len(cut) > 1 and len(cut) <= lines:
        cut = cut[:-1]  # the last line is whole, or left out
    shown = "\n".join(cut)
    rest_lines = s.count("\n") - shown.count("\n")
    more = len(s) - len(shown) - 1
    return (f"{shown}\n… ({rest_lines:,} more line{'s' if rest_lines != 1 else ''}, {more:,} more "
            f"character{'s' if more != 1 else ''} not shown)")
