"""tito: the TinyTorch course command line. `tito --help` lists the commands."""
from __future__ import annotations

import argparse
import sys

from tito.config import TitoError
from tito.isolation.sandbox import Limits


def _module_help() -> str:
    try:
        from tito.config import Course
        mods = Course.load().modules
        return "module number or name (" + ", ".join(mods) + ")"
    except Exception:  # noqa: BLE001 - help must work even outside a course
        return "module number or name, e.g. 19 or 19_benchmarking"


def _positive_jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    mh = _module_help()
    p = argparse.ArgumentParser(
        prog="tito", description="TinyTorch course tool: export, test, release and benchmark the course modules.",
        epilog="Run `python3 -m tito COMMAND --help` for a command's options.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def lazy(modname: str, fn: str = "run"):
        def run(args):
            import importlib
            return getattr(importlib.import_module(f"tito.commands.{modname}"), fn)(args)
        return run

    s = sub.add_parser("export", help="modules/*_dev.py -> nbs/*.ipynb -> tinytorch/ (deterministic)",
                       description="Convert module sources to notebooks (jupytext, cell ids kept) and export "
                                   "the package with nbdev. Writes only files whose bytes change.")
    s.add_argument("modules", nargs="*", metavar="MODULE", help=mh + "; default: all")
    s.add_argument("--check", action="store_true",
                   help="export into a temporary copy and report every differing, missing or extra file; "
                        "never touches the tree; non-zero exit if anything differs")
    s.set_defaults(func=lazy("export"))

    s = sub.add_parser("test", help="export check, inline tests, notebooks, pytest; one summary",
                       description="Run every test: export check, each module's inline tests, each notebook "
                                   "(nbclient), and the pytest suite. With MODULEs: only those modules and "
                                   "their pytest files (tests/**/test_NN_*.py).")
    s.add_argument("modules", nargs="*", metavar="MODULE", help=mh + "; default: all")
    s.add_argument("-v", "--verbose", action="store_true", help="show test output and pytest's report")
    s.add_argument("-j", "--jobs", type=_positive_jobs, default=None, metavar="N",
                   help="test processes at once in each stage (default: $TITO_JOBS, else the cores, at most 4; "
                        "1: one after another)")
    s.set_defaults(func=lazy("test"))

    s = sub.add_parser("module", help="student workflow: `module start N`, `module complete N`, `module submit N`",
                       description="Student workflow commands for one module.")
    msub = s.add_subparsers(dest="module_command", metavar="ACTION", required=True)
    c = msub.add_parser("complete", help="inline tests -> export -> integration tests, with a summary",
                        description="Run the module's inline tests, export it, run its integration tests "
                                    "against the exported package, and summarise. In a student workspace "
                                    "(made by `module start`; found from the current folder or --workspace): "
                                    "the student's notebooks, exported into WORKSPACE/tinytorch, with "
                                    "progress recorded in WORKSPACE/NN_name/progress.json.")
    c.add_argument("module", metavar="MODULE", help=mh)
    c.add_argument("--workspace", default=None, metavar="DIR",
                   help="student workspace (the folder `module start` used, or its NN_name folder)")
    c.add_argument("--tests", nargs="+", default=None, metavar="FILE",
                   help="in a workspace: only these integration test files (e.g. test_19_benchmark.py)")
    c.add_argument("--no-cache", action="store_true",
                   help="in a workspace: run every notebook and test file again, changed or not")
    c.set_defaults(func=lazy("workspace", "run_complete"))
    c = msub.add_parser("start", help="copy a module's student release into your workspace",
                        description="Copy the student release of a module (running `tito release` first if "
                                    "it is missing) into WORKSPACE/NN_name/. Never overwrites existing work "
                                    "without --force (which moves the old folder to WORKSPACE/.tito/backup/).")
    c.add_argument("module", metavar="MODULE", help=mh)
    c.add_argument("--workspace", default=None, metavar="DIR",
                   help="workspace folder (default: settings.ini workspace_dir)")
    c.add_argument("--force", action="store_true", help="replace existing work (the old folder is backed up)")
    c.set_defaults(func=lazy("workspace", "run_start"))
    c = msub.add_parser("submit", help="check your work and write the one archive to hand in",
                        description="Check the module's notebooks quickly (each reads and compiles; stubs left; "
                                    "written answers; what the last `module complete` said and what changed since), "
                                    "then write WORKSPACE/NN_name-<student>.zip: the notebooks and, when present, "
                                    "the capstone's submission.json and the model files it names. Upload that "
                                    "file to your course's assignment.")
    c.add_argument("module", metavar="MODULE", help=mh)
    c.add_argument("--student", default=None, metavar="ID",
                   help="your student id, as your instructor asked (remembered for the next hand-in)")
    c.add_argument("--complete", action="store_true", help="run `module complete` first (every test), then hand in")
    c.add_argument("--workspace", default=None, metavar="DIR", help="student workspace (as for `module complete`)")
    c.add_argument("--output", default=None, metavar="DIR", help="where to write the archive (default: the workspace)")
    c.set_defaults(func=lazy("workspace", "run_submit"))

    s = sub.add_parser("release", help="nbgrader student release into release/NN_name/, with a leak check",
                       description="Generate the student version (nbgrader generate_assignment; solutions "
                                   "become `raise NotImplementedError`), copy it to release/NN_name/, and "
                                   "fail if any solution or hidden-test line is still in it.")
    s.add_argument("modules", nargs="+", metavar="MODULE", help=mh)
    s.add_argument("--release-dir", default=None, help="where to put the release (default: settings.ini release_dir)")
    s.add_argument("--nbgrader-dir", default=None, help="nbgrader course dir (default: settings.ini nbgrader_dir)")
    s.add_argument("--student-kit", default=None, metavar="DIR",
                   help="write a standalone student repository to DIR instead: the release notebooks in reading "
                        "order, tito, the integration tests, the reference package of the earlier modules, "
                        "pyproject, requirements.lock and a README; refused if any file holds a solution or "
                        "hidden-test line")
    s.set_defaults(func=lazy("release"))


    s = sub.add_parser("grade", help="autograde a class's submissions (sandboxed, judged outside the sandbox, parallel)",
                       description="Autograde every student's notebooks. Student code runs only in a bubblewrap "
                                   "sandbox (read-only system, private /tmp, no network, no course repository, each "
                                   "notebook under its own uid; memory, process, CPU and file-size limits) against "
                                   "the student's own export of each notebook's module and the course's reference "
                                   "as byte code. The tests, hidden tests included (inputs drawn per student from "
                                   "the run's secret seed, the student id and their files), run in a separate judge process that never runs student code: it calls "
                                   "into the sandbox and receives data only, and its verdict alone is the score. "
                                   "The student's notebook also runs in the sandbox, for the feedback. SUBMISSIONS "
                                   "holds one folder per student (the folder name is the student id) with the "
                                   "notebooks, or nbgrader's submitted/<student>/<module>/ layout; submitted files "
                                   "are never modified. Written answers are graded by hand: their points are in "
                                   "max_score and, until graded, in manual_pending. Writes OUTPUT/grades.csv "
                                   "(student, notebook, score, max_score, manual_pending, status, reason, sandbox), "
                                   "OUTPUT/students/<student>/ (feedback HTML, autograded notebooks, "
                                   "result.json), OUTPUT/nbgrader/ (the class gradebook for nbgrader's formgrader: "
                                   "`tito formgrader`, `tito grades`), OUTPUT/run.json and OUTPUT/problems.txt.")
    s.add_argument("module", metavar="MODULE", help=mh)
    s.add_argument("submissions", metavar="SUBMISSIONS", help="folder of student submissions")
    s.add_argument("--student", default=None, metavar="ID", help="(re-)grade only this student")
    s.add_argument("--output-dir", default=None, metavar="DIR",
                   help="where grades go (default: build/grades/NN_name/)")
    s.add_argument("--timeout", type=int, default=None, metavar="SECONDS",
                   help="per-cell timeout (default: settings.ini cell_timeout)")
    s.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="grade N students at once (default: the number of CPU cores)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="hand each student to this Dask distributed scheduler (e.g. tcp://host:8786); its "
                        "workers need this course folder, the submissions and OUTPUT at the same paths")
    s.add_argument("--resume", action="store_true",
                   help="grade only students without a published result in OUTPUT for the same submission, tests "
                        "and seed (after an interruption or a resubmission; reuses OUTPUT/run.json's seed: a changed "
                        "submission is graded on fresh hidden inputs)")
    s.add_argument("--no-sandbox", action="store_true",
                   help="run student code WITHOUT the sandbox (only where it cannot be installed); "
                        "the output and grades.csv say the run was not sandboxed")
    s.add_argument("--memory-limit", type=int, default=Limits.memory_mb, metavar="MB",
                   help=f"address space per sandboxed process (default {Limits.memory_mb})")
    s.add_argument("--process-limit", type=int, default=Limits.processes, metavar="N",
                   help=f"processes and threads per notebook's process (default {Limits.processes})")
    s.add_argument("--seed", type=int, default=None, metavar="N",
                   help="the run's secret seed of the hidden tests' inputs (default: drawn per run and written to "
                        "OUTPUT/run.json only; each student's inputs come from it, their id and their files; give a "
                        "run's seed to repeat it exactly)")
    s.set_defaults(func=lazy("grade"))

    s = sub.add_parser("formgrader", help="nbgrader's formgrader on a module's class gradebook: grade written answers",
                       description="Start a Jupyter server on 127.0.0.1 with nbgrader's formgrader for the class "
                                   "gradebook of the module's latest `tito grade` run (OUTPUT/nbgrader), print its URL "
                                   "(with a fresh token) and run until Ctrl-C. Each written answer is shown with its "
                                   "answer key and rubric; scores and comments go into the gradebook, and "
                                   "`tito grades` reads them back.")
    s.add_argument("module", metavar="MODULE", help=mh)
    s.add_argument("--port", type=int, default=None, metavar="N", help="TCP port on 127.0.0.1 (default: a free one)")
    s.add_argument("--output-dir", default=None, metavar="DIR",
                   help="the grading run's output folder (default: the module's latest `tito grade` run)")
    s.set_defaults(func=lazy("formgrader"))

    s = sub.add_parser("grades", help="final grades: autograded + hand-graded points, per student and per question",
                       description="Read the class gradebook of the module's latest `tito grade` run (with the "
                                   "scores and comments entered in formgrader) and write OUTPUT/final_grades.csv (per "
                                   "student and notebook: autograded, hand_graded, extra_credit, pending, regrade, "
                                   "total, max_score, status; a (total) row per student), OUTPUT/questions.csv (one "
                                   "column per graded cell) and OUTPUT/nbgrader_export.csv (nbgrader's export columns).")
    s.add_argument("module", metavar="MODULE", help=mh)
    s.add_argument("--output-dir", default=None, metavar="DIR",
                   help="the grading run's output folder (default: the module's latest `tito grade` run)")
    s.add_argument("--feedback", action="store_true",
                   help="also write each student's feedback pages with the hand-graded points and the graders' "
                        "comments to OUTPUT/nbgrader/feedback/<student>/<module>/")
    s.set_defaults(func=lazy("grades"))

    s = sub.add_parser("status", help="per module: exported, released, graded, with counts",
                       description="For each module: exported files and public names, the student release "
                                   "(notebooks, data files), and grading (students, mean score).")
    s.add_argument("modules", nargs="*", metavar="MODULE", help=mh + "; default: all")
    s.add_argument("--grades-dir", default=None, metavar="DIR",
                   help="folder holding NN_name/grades.csv (default: the module's latest `tito grade` run, "
                        "wherever its --output-dir was)")
    s.add_argument("--json", action="store_true", help="print the status as JSON")
    s.set_defaults(func=lazy("status"))

    from tito.commands import bench_quality, benchmark, olympics
    benchmark.add_parser(sub, lazy)
    olympics.add_parser(sub, lazy)
    bench_quality.add_parser(sub, lazy)
    return p


def _kit_refusal(args) -> str | None:
    """In a student kit, the message refusing an instructor command; None when the command runs."""
    try:
        from tito.config import Course
        kit = Course.load().kit
    except TitoError:
        return None
    if not kit:
        return None
    from tito.notebooks.kit import KIT_REFUSED

    name = args.command + (f" {args.olympics_command}" if args.command == "olympics" else "")
    if name not in KIT_REFUSED:
        return None
    num = kit.split("_", 1)[0]
    hint = (f"; `python3 -m tito module complete {num}` exports your notebooks and runs your tests"
            if args.command in ("export", "test", "status") else "")
    return (f"`tito {name}` is an instructor command and this is the student kit of {kit}; here: "
            f"module start, module complete, module submit, olympics submit/verify/validate, benchmark{hint}")


def _kit_module() -> str | None:
    try:
        from tito.config import Course
        return Course.load().kit
    except TitoError:
        return None


def hide_kit_refused(parser: argparse.ArgumentParser) -> None:
    """In a student kit, `--help` lists only the commands that work there (the others still answer with the
    kit's refusal, not argparse's "invalid choice")."""
    from tito.notebooks.kit import KIT_HELP, KIT_REFUSED

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                action._choices_actions = [a for a in action._choices_actions
                                           if f"{prefix}{a.dest}".strip() not in KIT_REFUSED]
                for a in action._choices_actions:
                    a.help = KIT_HELP.get(f"{prefix}{a.dest}".strip(), a.help)
                for name, sp in action.choices.items():
                    walk(sp, f"{prefix}{name} ")

    walk(parser, "")


def line_buffered() -> None:
    """Each line of tito's output reaches a log or a pipe when it is printed (nohup, CI, `> log`), not in one block
    when a buffer fills or the run ends: stdout is line-buffered, as it is on a terminal."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):  # replaced by a test's capture, or detached
            pass


def main(argv: list[str] | None = None) -> int:
    line_buffered()
    parser = build_parser()
    if _kit_module():
        hide_kit_refused(parser)
    args = parser.parse_args(argv)
    try:
        refused = _kit_refusal(args)
        if refused:
            raise TitoError(refused, code=2)
        return int(args.func(args) or 0)
    except TitoError as e:
        print(f"tito: error: {e}", file=sys.stderr)
        return e.code
    except NotImplementedError as e:  # a stub of the student's: say which, not a traceback
        print(f"tito: error: your code is not finished: {e}; fill it in and run `python3 -m tito module complete`",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tito: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
