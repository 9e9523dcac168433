"""A job server, as tito drives it: `python -m tito.testing.inline_runner --serve JOBS` imports the heavy
third-party libraries once, then runs each job (a file's inline tests, a pytest run) in a child forked from it,
`JOBS` at a time. `tito module complete` and `tito test`'s inline stage feed it.

    >>> server = JobServer(Path.cwd(), process.child_env(), 2, Path("server.log"))   # doctest: +SKIP
    >>> server.submit({"id": 0, "kind": "inline", "file": "x_dev.py", "log": "0.log", "result": "0.json"})  # doctest: +SKIP
    >>> server.next()["result"]["ok"]   # doctest: +SKIP
    True
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tito.config import TitoError
from tito.isolation import process
from tito.testing.inline_runner import JOB_MARKER


class JobServer:
    """`python -m tito.testing.inline_runner --serve JOBS` (see serve there), fed over stdin."""

    def __init__(self, cwd: Path, env: dict, jobs: int, log: Path, preload: list[str] | None = None):
        self.log = log
        self._err = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        cmd = [sys.executable, "-m", "tito.testing.inline_runner", "--serve", str(jobs)]
        if preload is not None:
            cmd.append(",".join(preload) or "-")
        self.p = process.start(cmd, cwd=cwd, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err)
        self.pending = 0
        self.ready: dict | None = None

    def submit(self, job: dict) -> None:
        self.p.stdin.write((json.dumps(job) + "\n").encode())
        self.p.stdin.flush()
        self.pending += 1

    def next(self) -> dict:
        """The next job that ended (blocks)."""
        while True:
            line = self.p.stdout.readline()
            if not line:
                self._err.flush()
                raise TitoError(f"the test job server stopped with {self.pending} job(s) unfinished:\n"
                                + process.tail(self.log.read_text(encoding="utf-8", errors="replace"), 8))
            text = line.decode("utf-8", "replace")
            if not text.startswith(JOB_MARKER):
                continue
            msg = json.loads(text[len(JOB_MARKER):])
            if msg.get("ready"):
                self.ready = msg
                continue
            self.pending -= 1
            return msg

    def discard(self) -> None:
        """Stop a server that got no job (every notebook and test file from the cache): the rest of its preload,
        torch's compiler stack and the like, would be CPU spent for nothing (it is started before the keys are known,
        so that its imports overlap the export)."""
        if self.pending == 0:
            process.kill_group(self.p)

    def close(self) -> None:
        try:
            if self.p.stdin and not self.p.stdin.closed:
                self.p.stdin.close()
        except BrokenPipeError:
            pass
        process.wait(self.p, 30)
        self._err.close()
