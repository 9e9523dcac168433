"""nbgrader's regions in a notebook's cells: the markers (defined here once), the one scanner (`scan`), and the
one rule for a secret line (`distinctive`), which the release's leak check, the student kit's and grading's tests
all use.

A solution region (`### BEGIN SOLUTION` ... `### END SOLUTION`) is what a student writes; a hidden-test region
(`### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS`) is what only the judge runs. A line inside one is *secret*
when it appears nowhere public (outside every region, compared without whitespace: `squash`) and passes a rule
for what could be part of an answer. Where a copy of the notebook itself is checked (the release, grading's
feedback) that is any non-trivial line (`answer_line`: 8 characters or more, not a comment, not a bare `pass` or
bracket); where arbitrary files are searched (the student kit) only a line that says enough to be an answer
(`distinctive`: at least 12 characters, not a bare control-flow header, at least 5 names or numbers;
`os.replace(tmp, path)` is anybody's code, `return float(np.median(samples))` is an answer).

    >>> [(k, l) for _, k, l, marker in scan("a = 1\\n### BEGIN SOLUTION\\nb = 2\\n### END SOLUTION") if not marker]
    [(None, 'a = 1'), ('solution', 'b = 2')]
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable, Iterator

from tito.notebooks.cells import cell_source
from tito.notebooks.nbfile import read_notebook

SOLUTION = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
KINDS = {SOLUTION[0]: ("solution", SOLUTION[1]), HIDDEN[0]: ("hidden", HIDDEN[1])}
MARKERS = (*SOLUTION, *HIDDEN)
_HEADER = re.compile(r"^(for|if|elif|else|while|with|try|except|finally)\b.*:$")
_WORD = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def scan(text: str) -> Iterator[tuple[int, str | None, str, bool]]:
    """(line number from 1, region kind ("solution", "hidden") or None outside, the stripped line, whether it is
    a marker) for each line of one cell's `text`; a region runs to its end marker or the end of the cell."""
    end = kind = None
    for i, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if end is None and (hit := next((KINDS[b] for b in KINDS if s.startswith(b)), None)):
            kind, end = hit
            yield i, kind, s, True
        elif end is not None and s.startswith(end):
            yield i, kind, s, True
            end = kind = None
        else:
            yield i, kind, s, False


def region_lines(nb: Path | dict) -> list[tuple[str | None, str]]:
    """(region kind or None, stripped line) for each line of a notebook's cells (a path or the notebook), markers
    left out."""
    cells = (read_notebook(nb) if isinstance(nb, (str, Path)) else nb).get("cells", [])
    return [(kind, s) for c in cells for _, kind, s, marker in scan(cell_source(c)) if not marker]


def hidden_ranges(source: str) -> list[tuple[int, int]]:
    """1-based (first, last) line numbers of each hidden-test region of a cell, markers included (an unterminated
    one runs to the last line)."""
    out: list[list[int]] = []
    for i, kind, s, marker in scan(source):
        if kind == "hidden":
            if marker and s.startswith(HIDDEN[0]):
                out.append([i, i])
            out[-1][1] = i
    return [(a, b) for a, b in out]


def squash(line: str) -> str:
    """`line` with all whitespace removed: the form lines are compared in, so that re-spacing an
    answer (`a=b+c` for `a = b + c`) does not hide it. Example: squash(" x = y + 1") == "x=y+1"."""
    return _SPACE.sub("", line)


TRIVIAL = {"pass", "return", ")", "]", "}", "),", "],", "},", "else:", "try:", "finally:", '"""', "'''"}


def answer_line(line: str) -> bool:
    """Whether a stripped line of a region could be part of an answer where it reappears in a copy of its own
    notebook (module doc). Example: answer_line("total = sum(xs)") and not answer_line("# a hint")."""
    return len(line) >= 8 and line not in TRIVIAL and not line.startswith("#")


def distinctive(line: str) -> bool:
    """Whether a stripped line says enough to be an answer (module doc): the one rule for a secret line."""
    return len(line) >= 12 and not _HEADER.match(line) and len(_WORD.findall(line)) >= 5


def secret_lines(notebooks: Iterable[Path], public: Callable[[Path, str], bool] = lambda nb, kind: False,
                 label: Callable[[Path], str] = lambda nb: Path(nb).name,
                 rule: Callable[[str], bool] = answer_line) -> dict[str, str]:
    """stripped line -> `label(notebook)`, for every line inside a region of `notebooks` that passes `rule`
    (`answer_line`, or `distinctive` where arbitrary files are searched: module doc) and appears nowhere public:
    outside every region, or inside one that `public(notebook, kind)` makes public (a student kit's
    prerequisites: their solutions are the reference it carries)."""
    shown, secret = set(), {}
    for nb in notebooks:
        for kind, line in region_lines(nb):
            if kind is None or public(nb, kind):
                shown.add(squash(line))
            else:
                secret.setdefault(line, label(nb))
    return {k: v for k, v in secret.items() if squash(k) not in shown and rule(k)}
