"""`python -m tito.nbgrader_run ASSIGNMENT STUDENT`: nbgrader autograde, then generate_feedback,
in one process (run by `tito grade` in a student's temporary course folder; saves importing
nbgrader twice per student).

Prints one line per step, `TITO-NBGRADER <step> exit <code>`, after nbgrader's own log; the
feedback step runs only when autograde succeeded.

    python -m tito.nbgrader_run 01_stats ann      # in the course folder holding nbgrader_config.py
"""
from __future__ import annotations

import sys

MARK = "TITO-NBGRADER"


def _run(app_cls, args: list[str]) -> int:
    app = app_cls()
    try:
        app.initialize(args)
        app.start()
    except SystemExit as e:  # nbgrader apps exit through traitlets' Application.exit
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tito.nbgrader_run ASSIGNMENT STUDENT", file=sys.stderr)
        return 2
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.apps.generatefeedbackapp import GenerateFeedbackApp

    assignment, student = argv
    args = [assignment, "--student", student, "--force"]
    rc = _run(AutogradeApp, args)
    print(f"{MARK} autograde exit {rc}", flush=True)
    if rc == 0:
        frc = _run(GenerateFeedbackApp, args)
        print(f"{MARK} generate_feedback exit {frc}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
