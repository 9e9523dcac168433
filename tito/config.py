"""Course settings (settings.ini) and module name resolution."""
from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path


class TitoError(Exception):
    """An error tito reports as one clear line (no traceback); exit code `code`."""

    def __init__(self, msg: str, code: int = 1):
        super().__init__(msg)
        self.code = code


def find_root(start: Path | None = None) -> Path:
    """The course root: nearest folder upward holding settings.ini and pyproject.toml."""
    p = Path(start or Path.cwd()).resolve()
    for d in [p, *p.parents]:
        if (d / "settings.ini").is_file() and (d / "pyproject.toml").is_file():
            return d
    # fall back to the checkout tito itself lives in
    here = Path(__file__).resolve().parent.parent
    if (here / "settings.ini").is_file():
        return here
    raise TitoError("cannot find the course root (a folder with settings.ini and pyproject.toml)")


@dataclass
class Course:
    root: Path
    course_id: str = "tinytorch"
    modules: list[str] = field(default_factory=list)
    modules_dir: Path = Path("modules")
    nbs_dir: Path = Path("nbs")
    lib_dir: Path = Path("tinytorch")
    release_dir: Path = Path("release")
    nbgrader_dir: Path = Path("build/nbgrader")
    workspace_dir: Path = Path("workspace")
    cell_timeout: int = 300
    notebook_time_limit: int = 180
    # libraries the grading sandbox imports once per student before any notebook runs (None: tito's list)
    grading_preimport: list[str] | None = None
    # the most tito reads of one submitted notebook, and of one student's submission folder (MB)
    submission_notebook_mb: int = 20
    submission_folder_mb: int = 200
    # `olympics judge`: the memory (MiB) its own process and the students' sandboxes alive at once may take
    olympics_memory_mb: int = 16384
    # `olympics judge`: the CPU seconds one student's sandboxes may use in all (a model slow only when timed stops there)
    olympics_student_seconds: int = 300
    # the most wall-clock seconds one student's grading may take (`tito grade`): the notebooks not
    # finished by then score 0, with the reason; bounds what a student whose code sleeps costs the class
    student_seconds: int = 900
    # set in a student kit (`tito release N --student-kit DIR`): the module it was made for; None in the course
    kit: str | None = None

    @classmethod
    def load(cls, root: Path | None = None) -> "Course":
        """The course at `root` (default: found from the current folder): settings.ini's [course] section, each
        setting it does not name at the default written once, in the fields above."""
        root = Path(root).resolve() if root else find_root()
        cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
        ini = root / "settings.ini"
        if not cp.read(ini, encoding="utf-8"):
            raise TitoError(f"cannot read {ini}")
        s = cp["course"] if cp.has_section("course") else cp[cp.default_section]
        default = {f.name: f.default for f in fields(cls)}
        get = lambda k: s.get(k, "" if default[k] in (None, MISSING) else str(default[k])).strip()  # noqa: E731
        count = lambda k: _positive_int(get, k, ini)  # noqa: E731
        return cls(
            root=root, course_id=get("course_id"), modules=get("modules").split(),
            **{k: root / get(k) for k in ("modules_dir", "nbs_dir", "lib_dir", "release_dir", "nbgrader_dir",
                                          "workspace_dir")},
            cell_timeout=int(get("cell_timeout")), notebook_time_limit=int(get("notebook_time_limit")),
            grading_preimport=get("grading_preimport").split() or None,
            **{k: count(k) for k in ("submission_notebook_mb", "submission_folder_mb", "olympics_memory_mb",
                                     "olympics_student_seconds", "student_seconds")},
            kit=get("kit") or None,
        )

    @property
    def version(self) -> str:
        data = tomllib.loads((self.root / "pyproject.toml").read_text(encoding="utf-8"))
        return data.get("project", {}).get("version", "0.0.1")

    def resolve(self, names: list[str] | None) -> list[str]:
        """Module names ("19" or "19_benchmarking") -> full names; None/[] -> all modules."""
        if not names:
            return list(self.modules)
        out = []
        for n in names:
            hit = [m for m in self.modules if n == m or n == m.split("_", 1)[0]
                   or n.lstrip("0") and n.lstrip("0") == m.split("_", 1)[0].lstrip("0")]
            if len(hit) != 1:
                raise TitoError(f"unknown module {n!r}; valid modules: "
                                + ", ".join(f"{m} ({m.split('_', 1)[0]})" for m in self.modules), code=2)
            if hit[0] not in out:
                out.append(hit[0])
        return out

    def shown(self, path: Path) -> Path:
        """`path` as a command prints it: relative to the course root where it lies inside, else as given."""
        try:
            return Path(path).resolve().relative_to(self.root)
        except ValueError:
            return Path(path)

    def sources(self, module: str) -> list[Path]:
        """The percent-format sources of a module, sorted by name."""
        return sorted((self.modules_dir / module).glob("*_dev.py"))

    def notebooks(self, module: str) -> list[Path]:
        return sorted((self.nbs_dir / module).glob("*.ipynb"))

    def readme_path(self, module: str, folder: Path | None = None) -> Path | None:
        """The first README.md with a reading-order table: in modules/NN_name/, `folder` (a workspace's module
        folder) or release/NN_name/; None without one."""
        for d in (self.modules_dir / module, folder, self.release_dir / module):
            if d is not None and (Path(d) / "README.md").is_file() and readme_order(Path(d) / "README.md"):
                return Path(d) / "README.md"
        return None

    def reading_order(self, module: str, folder: Path | None = None) -> list[str]:
        """The module's notebook stems in reading order: the numbered table of its README (`_readme`), then its
        library notebooks (`library_notebooks`), then any notebook neither names, sorted. No README with a table:
        sorted by name.

            >>> Course.load().reading_order("19_benchmarking")[:2]
            ['results_dev', 'digits_dev']
        """
        have = {p.stem for d in (self.nbs_dir / module, folder, self.release_dir / module) if d is not None
                for p in Path(d).glob("*.ipynb")}
        readme = self.readme_path(module, folder)
        table = [*readme_order(readme), *(s for s, _ in readme_library(readme))] if readme else []
        ordered = [s for s in dict.fromkeys(table) if s in have or not have]
        return ordered + sorted(have - set(ordered))

    def library_notebooks(self, module: str, folder: Path | None = None) -> list[str]:
        """The stems of the module's library notebooks: outside the reading order, no tasks, shipped and exported
        like the others (README rows `| beside N | `name` | ... |`, `readme_library`).

            >>> Course.load().library_notebooks("19_benchmarking")[0]
            'report_dev'
        """
        readme = self.readme_path(module, folder)
        return [s for s, _ in readme_library(readme)] if readme else []

    def in_reading_order(self, module: str, paths: list[Path], folder: Path | None = None) -> list[Path]:
        """`paths` (notebooks or scripts of `module`) sorted by the reading order of their stems
        (a `.tito_inline_` prefix is ignored); names the order does not know go last, by name."""
        order = {s: i for i, s in enumerate(self.reading_order(module, folder))}
        key = lambda p: Path(p).stem.removeprefix(".tito_inline_")
        return sorted(paths, key=lambda p: (order.get(key(p), len(order)), key(p)))


def _positive_int(get, key: str, ini: Path) -> int:
    """Setting `key` as a positive integer; a TitoError naming it and the file otherwise."""
    value = get(key)
    if not value.isdigit() or int(value) <= 0:
        raise TitoError(f"{ini}: {key} must be a positive whole number, got {value!r}")
    return int(value)


_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`?([\w.-]+?)`?\s*\|")


def readme_order(readme: Path) -> list[str]:
    """Notebook stems from a README's table rows `| N | `name` | ... |`, by N (`name`, `name.ipynb`
    and `name.py` all give `name`); [] when there is no such table."""
    rows = []
    for line in Path(readme).read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line.strip())
        if m:
            rows.append((int(m.group(1)), m.group(2).removesuffix(".ipynb").removesuffix(".py")))
    seen: list[str] = []
    for _, stem in sorted(rows, key=lambda r: r[0]):
        if stem not in seen:
            seen.append(stem)
    return seen


_LIBRARY_ROW = re.compile(r"^\|\s*beside\s+(\d+)\s*\|\s*`?([\w.-]+?)`?\s*\|")


def readme_library(readme: Path) -> list[tuple[str, int]]:
    """Library notebooks from a README's rows `| beside N | `name` | ... |`: (stem, N) in the table's order, N the
    step of the reading order each goes with; [] when there are none. They are outside the reading order."""
    rows: dict[str, int] = {}
    for line in Path(readme).read_text(encoding="utf-8").splitlines():
        if m := _LIBRARY_ROW.match(line.strip()):
            rows.setdefault(m.group(2).removesuffix(".ipynb").removesuffix(".py"), int(m.group(1)))
    return list(rows.items())
