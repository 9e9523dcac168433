"""`tito olympics submit | validate | verify | judge | leaderboard`: the capstone competition.

All the measuring and checking lives in `tinytorch.benchmarking.olympics`; this file only maps
the command line onto it. `submit` and `verify` use the bundled digits models (baseline: the
digits CNN; optimized: pruned then int8-quantized) so the flow works from a fresh clone, or the
participant's model files (`--model FILE [--baseline FILE]`, loaded by `load_model_file`).
From Python the same is `generate_submission(baseline, mine, event, ...)` and `verify_submission`.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from tito.config import TitoError
from tito.isolation.sanitize import console_line


# The events' names and the default event, for argparse without importing torch (`tito --help` stays quick): the
# rules live in one registry, `tinytorch.benchmarking.olympics.EVENT_RULES` (and `DEFAULT_EVENT`); the tests check
# that these two lines name the same events and default (tests/test_olympics_cli.py).
EVENTS = ("latency_sprint", "memory_challenge", "accuracy_contest", "all_around", "extreme_push")
DEFAULT_EVENT = "memory_challenge"


def _olympics():
    try:
        from tinytorch.benchmarking import olympics
    except ImportError as e:
        raise TitoError(f"tito olympics needs tinytorch.benchmarking.olympics ({e}); run `python3 -m tito export`") from e
    return olympics


def _load(path, arg: str):
    """A model file for `submit`/`verify`: TorchScript, a pickled module, or a state dict of the course's
    DigitsCNN (as the judge loads them); anything that does not load here is refused with the save recipe.
    An .onnx file stays its path (checked with onnx.checker): the library runs it in ONNX Runtime."""
    if Path(path).suffix.lower() == ".onnx":
        from tinytorch.benchmarking.suite import load_model_file

        try:
            return str(load_model_file(path))
        except FileNotFoundError:
            raise FileNotFoundError(f"{arg}: no such file {str(path)!r}") from None
        except ValueError as e:
            raise ValueError(f"{arg}: {str(e).removeprefix('model_path: ')}") from e
    import torch
    from torch import nn

    from tinytorch.benchmarking.digits import DigitsCNN
    from tinytorch.benchmarking.suite import load_model_file

    recipe = _olympics().SAVE_RECIPE
    import warnings

    try:
        with warnings.catch_warnings():  # a TorchScript file makes torch.load warn before it dispatches
            warnings.simplefilter("ignore")
            state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - not a plain state dict: TorchScript or a pickled module, tried next
        state = None
    if isinstance(state, dict):
        model = DigitsCNN()
        try:
            model.load_state_dict(state)
        except RuntimeError as e:
            raise ValueError(f"{arg}: {str(path)!r} holds a state dict that is not the course's DigitsCNN "
                             f"({' '.join(str(e).split())[:160]}...); a state dict needs its class: {recipe}") from e
        return model.eval()
    try:
        model = load_model_file(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{arg}: no such file {str(path)!r}") from None
    except (ValueError, TypeError) as e:  # a class this process cannot find, a truncated file, not a model
        raise ValueError(f"{arg}: {str(path)!r} cannot be loaded here ({str(e).removeprefix('model_path: ')}); "
                         f"{recipe}") from e
    if not isinstance(model, nn.Module):
        raise TypeError(f"{arg}: the Olympics hash and verify a torch model's weights; {str(path)!r} is not a "
                        f"TorchScript or torch.save'd nn.Module; {recipe}")
    return model


def _submission_models(model_path=None, baseline_path=None) -> tuple:
    "(baseline, optimized, techniques): the bundled pair, or the participant's files (baseline: the digits CNN)."
    o = _olympics()
    if model_path is None:
        if baseline_path is not None:
            raise ValueError("baseline_path: give model_path (your optimized model) as well; "
                             "a baseline alone has nothing to be compared with")
        return (*o.default_olympics_models(), o.DEFAULT_TECHNIQUES)
    from tinytorch.benchmarking.digits import default_digits_model

    mine = _load(model_path, "--model")
    base = default_digits_model() if baseline_path is None else _load(baseline_path, "--baseline")
    techniques = (f"participant model from {Path(model_path).name}",) + (
        (f"participant baseline from {Path(baseline_path).name}",) if baseline_path is not None else ())
    return base, mine, techniques


def olympics_submit(event: str = DEFAULT_EVENT, participant: str = "anonymous", output_path="submission.json",
                    measurement_runs: int = 30, *, model_path=None, baseline_path=None) -> dict:
    """Benchmark a baseline against an optimized model for `event` and write the submission: the
    bundled pair (`default_olympics_models`), or the model in `model_path` against `baseline_path`
    (default: the bundled digits CNN), on the digits test split."""
    base, opt, techniques = _submission_models(model_path, baseline_path)
    return _olympics().generate_submission(base, opt, event, None, participant=participant, techniques=techniques,
                                           output_path=output_path, measurement_runs=measurement_runs,
                                           model_files={"optimized": model_path, "baseline": baseline_path})


def _made_from(path) -> dict:
    "The model files a submission names (`models.<role>.file`), {} where it names none or cannot be read."
    import json

    try:
        models = json.loads(Path(path).read_text(encoding="utf-8")).get("models", {})
        return {role: models[role]["file"] for role in ("optimized", "baseline")
                if isinstance(models.get(role), dict) and isinstance(models[role].get("file"), str)}
    except (OSError, ValueError, AttributeError):
        return {}


def olympics_verify(path, measurement_runs: int | None = None, *, model_path=None, baseline_path=None,
                    no_sandbox: bool = False) -> dict:
    """Verify a submission here. The bundled pair is rebuilt in this process; a participant's files are
    loaded only in a sandbox and measured as `olympics judge` measures (interleaved rounds, the one rule).
    A submission made from a participant's file, verified without `model_path`, is refused with what to pass."""
    if model_path is not None and not sys.platform.startswith("linux"):
        # the judge's sandboxes and core pinning are Linux's; elsewhere (macOS) a participant's own files
        # are loaded here and measured by the library (the same interleaved rounds, in this process)
        print("tito: not Linux: verify loads your model files in this process (the instructor's judge, on "
              "Linux, loads them in a sandbox)", file=sys.stderr)
        model_path = str(model_path)
    elif model_path is not None:
        from tito.isolation import sandbox
        from tito.olympics.judge import verify_files

        if not no_sandbox and sandbox.find() is None:
            # a participant verifies their own files: a sandbox protects a judge from others' files, and a
            # student's laptop (WSL, no root) need not have the sandbox installed
            print(f"tito: {sandbox.registered().name} is not installed, so verify loads your model files in a plain "
                  "process (the instructor's judge loads them in a sandbox)", file=sys.stderr)
            no_sandbox = True
        return verify_files(path, model_path, baseline_path, rounds=max(measurement_runs or 20, 6),
                            no_sandbox=no_sandbox)
    if not Path(path).is_file():
        raise FileNotFoundError(f"path: no submission file at {path}")
    files = _made_from(path)
    if "optimized" in files and model_path is None:
        raise ValueError(f"--model: {path} was made from the model file {files['optimized']!r}; pass it: "
                         f"python3 -m tito olympics verify {path} --model {files['optimized']}"
                         + (f" --baseline {files['baseline']}" if "baseline" in files else ""))
    base, opt, _ = _submission_models(model_path, baseline_path)
    report = _olympics().verify_submission(path, opt, None, baseline_model=base, measurement_runs=measurement_runs)
    if model_path is None and any(c["claim"].endswith("sha256") and not c["holds"] for c in report["checks"]):
        report["reasons"].append("the weights are not the bundled pair's: if the submission was made from your own "
                                 "model, pass --model FILE (and --baseline FILE if you gave submit one)")
    return report


def _fmt(v) -> str:
    "A figure for the console: a float to 4 digits, anything else (a claim a submission wrote) as one inert line."
    return f"{v:.4g}" if isinstance(v, float) else console_line(v, 80)


def _print_reasons(reasons) -> None:
    for r in reasons:  # reasons quote what a submission holds: one inert line each
        print(f"  - {console_line(r, 500)}")


# what a spreadsheet would run as a formula, or a Markdown renderer as markup, at the start of or inside a field
_ACTIVE = re.compile(r"^[=+\-@\t\r]|[<>\[\]|`\x00-\x1f\x7f]|!\[|\]\(")


def _active_fields(path) -> list[str]:
    "The submission's text fields (participant, techniques) that hold formula or markup characters, by name."
    import json

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return []
    if not isinstance(doc, dict):
        return []
    fields = [("participant", doc.get("participant"))]
    fields += [(f"techniques[{i}]", t) for i, t in enumerate(doc.get("techniques") or [] if isinstance(doc.get("techniques"), list) else [])]
    return [name for name, v in fields if isinstance(v, str) and _ACTIVE.search(v)]


def submit(args) -> int:
    if args.runs < 2:
        raise TitoError(f"--runs: expected at least 2, got {args.runs}", code=2)
    try:
        sub = olympics_submit(args.event, participant=args.participant, output_path=args.output,
                              measurement_runs=args.runs, model_path=args.model, baseline_path=args.baseline)
    except (ValueError, TypeError, FileNotFoundError) as e:  # bad input: the library names the argument
        raise TitoError(str(e), code=2) from e
    score, imp = sub.get("score", {}), sub.get("improvements", {})
    print(f"event       {sub.get('event')}")
    if score.get("value") is not None:
        print(f"score       {score['value']:.4g} [{score['ci_lower']:.4g}, {score['ci_upper']:.4g}] "
              f"({score.get('description', score.get('rule'))})")
    proto = sub.get("protocol", {})
    for key, label, how in (("speedup", "speedup", f"baseline / optimized median latency, {proto.get('format', '')}, "
                                                     f"{proto.get('threads')} thread, {proto.get('rounds')} interleaved rounds"),
                            ("compression_ratio", "size ratio", "baseline / optimized, "
                             + sub["measurements"]["optimized"]["model_size"]["method"].split(":")[0] + " (exact)"),
                            ("accuracy_delta", "accuracy", "optimized - baseline, points on the same test images")):
        i = imp.get(key) or {}
        if i.get("value") is None:
            print(f"{label:<11} not measured ({i.get('reason', 'no figure')})")
            continue
        f = (lambda v: f"{100 * v:+.2f}") if key == "accuracy_delta" else (lambda v: f"{v:.3g}x")  # noqa: E731
        print(f"{label:<11} {f(i['value'])} [{f(i['ci_lower'])}, {f(i['ci_upper'])}] ({how}; "
              f"{i.get('outcome') or ('different' if i.get('significant') else 'not decided')})")
    for c in sub.get("constraints", []):
        status = "met" if c.get("passed") else "NOT met" + (f" ({c['reason']})" if c.get("reason") else "")
        print(f"constraint  {c['quantity']} {c['op']} {c['threshold']}: measured {c['measured']}, {status}")
    print(f"wrote {args.output}")
    return 0


def validate(args) -> int:
    o = _olympics()
    try:
        report = o.validate_submission(args.path)
    except (FileNotFoundError, ValueError) as e:
        raise TitoError(str(e), code=2) from e
    shown = console_line(args.path, 200)
    active = _active_fields(args.path)
    if active:  # not invalid (a name may hold a bracket), but every board shows these fields escaped, as text
        print(f"{shown}: note: {', '.join(active[:5])} hold characters a spreadsheet or Markdown would read as a "
              "formula or markup; the leaderboards show them escaped, as plain text")
    if report["valid"]:
        print(f"{shown}: valid")
        return 0
    print(f"{shown}: INVALID")
    _print_reasons(report["reasons"])
    return 1


def verify(args) -> int:
    try:
        report = olympics_verify(args.path, measurement_runs=args.runs, model_path=args.model,
                                 baseline_path=args.baseline, no_sandbox=args.no_sandbox)
    except (FileNotFoundError, ValueError, TypeError) as e:
        raise TitoError(str(e), code=2) from e
    for c in report.get("checks", []):
        status = "holds" if c.get("holds") else "DOES NOT HOLD"
        scope = "" if c.get("counts", True) else " (for information)"
        band = f" [{c['interval'][0]:.3g}, {c['interval'][1]:.3g}]" if c.get("interval") else ""
        print(f"  {c['claim']}: claimed {_fmt(c['claimed'])}, measured {_fmt(c['measured'])}{band}: {status}{scope}")
    for c in report.get("claims", []):
        band = f" [{c['interval'][0]:.3g}, {c['interval'][1]:.3g}]" if c.get("interval") else ""
        print(f"  {c['claim']}: claimed {_fmt(c['claimed'])}, measured {_fmt(c['judged'])}{band}: "
              f"{'CONTRADICTED' if c['contradicted'] else 'holds'} ({console_line(c['how'], 300)})")
    if report.get("verified"):
        print(f"{console_line(args.path, 200)}: verified on this machine")
        return 0
    print(f"{console_line(args.path, 200)}: NOT verified")
    _print_reasons(report.get("reasons", []))
    return 1


# a rejection that is the judge's, not the student's: their sandbox did not come up (tito.olympics.sandboxes.wait_ready)
JUDGE_SIDE = "before reading any of the student's files"


def judge(args) -> int:
    """Exit codes: 0 every student judged (a rejected model is the student's line on the board); 1 judging itself
    failed for some (their sandbox did not start: no figure; run again with --resume); 2 refused before starting."""
    from tito.config import Course
    from tito.grading import handin
    from tito.grading.classrun import plural
    from tito.olympics.judge import judge_class

    course = Course.load()
    out = Path(args.output_dir)
    got = handin.collect(Path(args.submissions_dir), out, None, capstone=True, folder_mb=course.submission_folder_mb)
    if got.layout != "folders":
        print(f"hand-ins ({got.layout}): {plural(len(got.sources), 'student')} unpacked into {got.folder}")
    for line in got.problems:
        print(f"  not judged: {console_line(line, 500)}")
    result = judge_class(got.folder, args.event, args.output_dir, jobs=args.jobs, rounds=args.rounds,
                         resume=args.resume, no_sandbox=args.no_sandbox,
                         timeouts={"load": args.timeout, "predict": args.timeout, "time": args.timeout},
                         data_file=args.data, memory_mb=course.olympics_memory_mb,
                         student_seconds=args.student_seconds or course.olympics_student_seconds)
    print(result["board"]["markdown"])
    print(f"wrote {out / 'leaderboard.md'}, {out / 'leaderboard.csv'}, {out / 'class.png'} and {out / 'students'}/")
    ours = sorted(n for n, why in result["rejected"].items() if JUDGE_SIDE in str(why))
    theirs = len(result["rejected"]) - len(ours)
    judged = sum(1 for n in result["students"] if n not in result["rejected"])
    line = (f"{plural(judged + theirs + len(ours), 'student')}: {judged} judged, {theirs} rejected (their files)"
            + (f"; judging FAILED for {plural(len(ours), 'student')} ({', '.join(ours[:10])}): run again with "
               "--resume (exit 1)" if ours else "")
            + (f"; {plural(len(got.problems), 'hand-in')} not judged" if got.problems else ""))
    print(line)
    return 1 if ours else 0


def leaderboard(args) -> int:
    _olympics()
    from tito.olympics.leaderboard import leaderboard as claims_leaderboard

    try:
        board = claims_leaderboard(args.submissions_dir, args.event, output_path=args.output)
    except (FileNotFoundError, ValueError) as e:
        raise TitoError(str(e), code=2) from e
    print(board["markdown"])
    if args.output:
        print(f"wrote {Path(args.output).with_suffix('.md')} and {Path(args.output).with_suffix('.csv')}")
    return 0


def add_parser(sub, lazy) -> None:
    s = sub.add_parser("olympics", help="the capstone: submit, validate, verify, leaderboard",
                       description="TorchPerf Olympics: benchmark a baseline against an optimized model "
                                   "for an event and write a checkable submission; validate or verify one; "
                                   "rank a folder of submissions.")
    from tito.olympics.sandboxes import TIMEOUTS

    osub = s.add_subparsers(dest="olympics_command", metavar="ACTION", required=True)
    event = dict(choices=EVENTS, default=DEFAULT_EVENT, type=str.lower, metavar="EVENT",  # argparse names them if refused
                 help=f"one of {', '.join(EVENTS)} (default {DEFAULT_EVENT}; the rules: EVENT_RULES)")
    c = osub.add_parser("submit", help="benchmark your model (or the default pair) and write a submission",
                        description="Benchmark a baseline against an optimized model with one protocol and write "
                                    "a versioned submission JSON. Default: the bundled digits CNN against its "
                                    "pruned+int8 version; --model FILE benchmarks your model instead.")
    c.add_argument("--model", default=None, help="your optimized model file: TorchScript (torch.jit.trace(model, "
                   "example).save(FILE): works for a class defined in a notebook), torch.save(module), a "
                   "DigitsCNN state dict, or an .onnx file (run by ONNX Runtime)")
    c.add_argument("--baseline", default=None, help="its baseline (default: the bundled digits CNN)")
    c.add_argument("--event", **event)
    c.add_argument("--participant", default="anonymous", help="name recorded in the submission")
    c.add_argument("--output", default="submission.json", help="submission file (default submission.json)")
    c.add_argument("--runs", type=int, default=30, help="timed samples per model (default 30)")
    c.set_defaults(func=lazy("olympics", "submit"))
    c = osub.add_parser("validate", help="check a submission's schema, statistics and constraints",
                        description="Recompute every statistic from the raw values and check the event's "
                                    "constraints; exit 1 with the reasons if the submission is invalid.")
    c.add_argument("path", help="submission JSON")
    c.set_defaults(func=lazy("olympics", "validate"))
    c = osub.add_parser("verify", help="re-measure a submission's models here and check its claims",
                        description="Re-measure the default digits models, or the files given with --model "
                                    "(loaded only in a sandbox, timed in interleaved rounds), check the weight "
                                    "hashes and report which claims the measurements contradict.")
    c.add_argument("path", help="submission JSON")
    c.add_argument("--runs", type=int, default=None, help="timed samples per model (default: as submitted)")
    c.add_argument("--model", default=None, help="the optimized model file the submission was made from")
    c.add_argument("--baseline", default=None, help="its baseline file (default: the bundled digits CNN)")
    c.add_argument("--no-sandbox", action="store_true",
                   help="load --model/--baseline WITHOUT a sandbox (their code runs with your permissions)")
    c.set_defaults(func=lazy("olympics", "verify"))
    c = osub.add_parser("judge", help="measure every student's model here, in one run, and rank the class",
                        description="Load each student's model files in a sandbox of their own, measure every "
                                    "model on this machine (accuracy on the test split, latency in interleaved "
                                    "rounds, sizes), check each submission's claims, flag students with the "
                                    "same model, and write the leaderboard.")
    c.add_argument("submissions_dir", help="folder with one folder per student: submission.json and the model file")
    c.add_argument("--event", **event)
    c.add_argument("--output-dir", required=True, help="where the leaderboard, per-student JSON and plot go")
    c.add_argument("--jobs", type=int, default=1, help="sandboxes started at once (the timing runs one at a time)")
    c.add_argument("--rounds", type=int, default=30, help="interleaved timing rounds (default 30, at least 6)")
    c.add_argument("--resume", action="store_true", help="continue an interrupted run in the same --output-dir")
    c.add_argument("--data", default=None, metavar="FILE",
                   help="judge accuracy on your held-out images: an .npz with `images` (N, 1, 8, 8) floats in [0, 1] "
                        "(pixel / 16) and `labels` (N,) integers 0-9 (default: the public digits test split, "
                        "which the leaderboard then names)")
    c.add_argument("--timeout", type=float, default=TIMEOUTS["predict"],
                   help="seconds a student's sandbox may take to answer one request: load the files, run "
                        f"the test split, a timed request (default {TIMEOUTS['predict']:g})")
    c.add_argument("--student-seconds", type=float, default=None, metavar="S",
                   help="CPU seconds one student's sandboxes may use in all (default: settings.ini's "
                        "olympics_student_seconds): a model slower once timed is stopped there and rejected")
    c.add_argument("--no-sandbox", action="store_true",
                   help="load the model files WITHOUT a sandbox (their code runs with your permissions)")
    c.set_defaults(func=lazy("olympics", "judge"))
    c = osub.add_parser("leaderboard", help="rank the submissions in a folder by their own claims",
                        description="Rank valid submissions by what they claim (measured on each author's "
                                    "machine; `olympics judge` measures them here); overlapping score intervals "
                                    "are ties; invalid files are listed with their reasons.")
    c.add_argument("submissions_dir", help="folder of submission JSON files")
    c.add_argument("--event", **event)
    c.add_argument("--output", default=None, help="also write OUTPUT.md and OUTPUT.csv")
    c.set_defaults(func=lazy("olympics", "leaderboard"))
