"""What a grading run hands on, typed: the class run's settings every student shares (`RunSettings`), one
student's task (`GradeJob`, picklable: a Dask task's argument) and the judge's plan (`JudgePlan`, written to
plan.json by the student's grading and read by the judge process, tito.grading.autograder).

    >>> plan = JudgePlan(reference="/r", cache=None, lib="tinytorch", isolated=True, preimport=[], tmp_mb=512,
    ...                  imports={}, seed=1, notebooks=["a"], inputs="/i", work="/w", timeout=10, results="/w/r")
    >>> JudgePlan.from_json(plan.to_json()) == plan
    True
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tito.isolation.sandbox import Backend, Limits


@dataclass(frozen=True)
class RunSettings:
    """Everything one class run's students share: the course's files for the judge (the nbgrader `template`,
    the byte-compiled `reference`, the read-only `cache`, tito's code for the host and the judge), the sandbox
    and its limits, the run's seed, the graded notebooks and the caps on what is read of a submission."""
    template: Path
    reference: Path
    hostlib: Path
    judgelib: Path
    lib: str                             # the course package's name
    pyproject: Path
    sandbox: Backend
    limits: Limits
    seed: int
    notebooks: list[Path]                # the instructor's graded notebooks
    preimport: list[str]
    imports: dict[str, list[str]]        # course module -> the course modules it names (notebooks.imports)
    data_files: dict[str, Path]          # relative path in the student's folder -> the assignment's file
    work_root: Path                      # where students' work folders go (classrun.work_root)
    cache: Path | None = None
    per_notebook: bool = False           # a sandbox per notebook (slower: each imports torch again)
    notebook_mb: int = 20
    folder_mb: int = 200
    student_seconds: int | None = None   # settings.ini student_seconds: the most one student may take
    cpu_split: list[list[int]] | None = None  # each student's own cores where no cgroup gives a CPU share
    sandbox_note: str = ""               # the limits clamped to what this process was given (limits.Fit.note)

    def source(self, name: str) -> Path:
        "The instructor's notebook `name` (a file stem)."
        return next(p for p in self.notebooks if Path(p).stem == name)


@dataclass
class GradeJob:
    """One student's grading: the assignment, the student and their folder, the per-cell timeout, the run's shared
    settings, the hash of everything their grade depends on, and their own hidden-test seed."""
    assignment: str
    student: str
    folder: str
    course_id: str
    timeout: int
    run: RunSettings
    inputs: str = ""
    seed: int | None = None   # this student's hidden-test seed (classrun.student_seed)


@dataclass
class Channel:
    """A control channel to a student's zygote: the judge's end (`fd`) and where the host sees its mounts."""
    fd: int
    inside: dict[str, str]


@dataclass
class JudgePlan:
    """plan.json: what the judge process is told (paths as the judge sees them, the seed, the channels to the host
    sandbox(es): one `shared` zygote or one per notebook, each notebook's uids as root)."""
    reference: str
    cache: str | None
    lib: str
    isolated: bool                       # in a sandbox: each notebook's process in namespaces of its own
    preimport: list[str]
    tmp_mb: int
    imports: dict[str, list[str]]
    seed: int
    notebooks: list[str]
    inputs: str
    work: str
    timeout: int
    results: str
    shared: bool = True                  # one zygote for every notebook (`channels[""]`), else one per notebook
    channels: dict[str, Channel] = field(default_factory=dict)
    uids: dict[str, int] = field(default_factory=dict)
    feedback_uids: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "JudgePlan":
        data = json.loads(text)
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"plan.json: unknown keys {sorted(unknown)}")
        data["channels"] = {k: Channel(**v) for k, v in data.get("channels", {}).items()}
        return cls(**data)
