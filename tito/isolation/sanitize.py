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
