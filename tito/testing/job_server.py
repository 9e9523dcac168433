"""A job server, as tito drives it: `python -m tito.testing.inline_runner --serve JOBS` imports the heavy
third-party libraries once, then runs each job (a file's inline tests, a pytest run) in a child forked from it,
`JOBS` at a time. `tito module complete` and `tito test`'s inline stage feed it.

    >>> server = JobServer(Path.cwd(), process.child_env(), 2, Path("server.log"))   # doctest: +SKIP
    >>> server.submit({"id": 0, "kind": "inline", "file": "x_dev.py", "log": "0.log", "result": "0.json"})  # doctest: +SKIP
    >>> server.next()["result"]["ok"]   # doctest: +SKIP
    True
"""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

from tito.config import TitoError
from tito.isolation import process
from tito.testing.inline_runner import JOB_MARKER


class JobServer:
    """`python -m tito.testing.inline_runner --serve JOBS` (see serve there), fed over stdin."""

    def __init__(self, cwd: Path, env: dict, jobs: int, log: Path, preload: list[str] | None = None,
                 keep: float = 0.0):
        """`keep` > 0: a session of the server tito.testing.kept_server keeps for `keep` seconds after its last run
        (started when there is none); where none can be kept (`note` says why), a server of this run's own."""
        self.log = log
        self._err = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.pending = 0
        self.ready: dict | None = None
        self.p: subprocess.Popen | None = None
        self.conn = None
        self.note = ""
        if keep > 0:
            from tito.testing import kept_server

            try:
                self.conn, self.ready = kept_server.connect(cwd, env, jobs, preload, self._err.fileno(), keep)
            except OSError as e:  # a folder others can enter, no Unix sockets: this run's own server, as before
                self.note = f"no job server kept between runs: {e}"
        if self.conn is not None:
            self._in, self._out = self.conn.makefile("wb"), self.conn.makefile("rb")
            return
        cmd = [sys.executable, "-m", "tito.testing.inline_runner", "--serve", str(jobs)]
        if preload is not None:
            cmd.append(",".join(preload) or "-")
        self.p = process.start(cmd, cwd=cwd, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err)
        self._in, self._out = self.p.stdin, self.p.stdout

    def submit(self, job: dict) -> None:
        self._in.write((json.dumps(job) + "\n").encode())
        self._in.flush()
        self.pending += 1

    def wait_ready(self) -> dict:
        """The server's first line (what it preloaded, in how long; `kept`: a kept server's pid), once it is there."""
        while self.ready is None:
            self._read()
        return self.ready

    def next(self) -> dict:
        """The next job that ended (blocks)."""
        while True:
            msg = self._read()
            if msg is not None:
                return msg

    def _read(self) -> dict | None:
        """One line of the server's: a job's end (returned), its ready line (kept in `ready`) or other output (None)."""
        line = self._out.readline()
        if not line:
            self._err.flush()
            raise TitoError(f"the test job server stopped with {self.pending} job(s) unfinished:\n"
                            + process.tail(self.log.read_text(encoding="utf-8", errors="replace"), 8))
        text = line.decode("utf-8", "replace")
        if not text.startswith(JOB_MARKER):
            return None
        msg = json.loads(text[len(JOB_MARKER):])
        if msg.get("ready"):
            self.ready = msg
            return None
        self.pending -= 1
        return msg

    def discard(self) -> None:
        """Stop a server that got no job (every notebook and test file from the cache): the rest of its preload,
        torch's compiler stack and the like, would be CPU spent for nothing (it is started before the keys are known,
        so that its imports overlap the export). A kept server is left to the next run."""
        if self.pending == 0 and self.p is not None:
            process.kill_group(self.p)

    def close(self) -> None:
        """End the run: jobs still pending (a run that stopped early) are ended, not left running."""
        try:
            if not self._in.closed:
                if self.pending:
                    self._in.write(b'{"stop": true}\n')
                self._in.close()
        except (BrokenPipeError, ConnectionError):
            pass
        if self.conn is not None:  # the session ends once its jobs have
            import socket

            with contextlib.suppress(OSError):
                self.conn.shutdown(socket.SHUT_WR)
            self._out.close()
            self.conn.close()
        else:
            process.wait(self.p, 30)
        self._err.close()
