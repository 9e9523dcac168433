"""A pytest plugin `tito test` loads (`-p tito.testing.pytest_progress`): while the suite runs, one line
now and then on the file descriptor named by $TITO_PROGRESS_FD (tito prints it): tests done of the total,
failures, time so far, and the slowest test so far. With pytest-xdist it runs in the controller, which
sees every worker's reports; the workers print nothing.

    tito test: pytest 312/876 done, 0 failed, 5m10s; slowest so far 95.3 s tests/test_grading.py::test_x
"""
from __future__ import annotations

import os
import threading
import time

EVERY_S = 20.0  # one line this often while it runs (and one on every failure)


class Progress:
    def __init__(self, fd: int):
        self.out = os.fdopen(fd, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        self.total: int | None = None
        self.done = 0
        self.failed: set[str] = set()
        self.seconds: dict[str, float] = {}
        self.t0 = time.monotonic()
        self.last = 0.0
        self.lock = threading.Lock()
        # a line also while no test ends (a long fixture, a slow test): from a thread that only says
        threading.Thread(target=self._heartbeat, daemon=True).start()

    def _heartbeat(self) -> None:
        while True:
            time.sleep(EVERY_S)
            self.say()

    def line(self) -> str:
        spent = int(time.monotonic() - self.t0)
        slow = max(self.seconds.items(), key=lambda kv: kv[1], default=None)
        return (f"pytest {self.done}/{self.total if self.total is not None else '?'} done, {len(self.failed)} failed, "
                f"{spent // 60}m{spent % 60:02d}s" + (f"; slowest so far {slow[1]:.1f} s {slow[0]}" if slow else ""))

    def say(self, force: bool = False) -> None:
        with self.lock:
            now = time.monotonic()
            if not (force or now - self.last >= EVERY_S):
                return
            self.last = now
            try:
                self.out.write(self.line() + "\n")
            except (OSError, ValueError):  # tito stopped reading: the run goes on
                pass

    # -- hooks --
    def pytest_collection_finish(self, session) -> None:
        if self.total is None:
            self.total = len(session.items)

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.total = len(ids)  # each worker collects every test

    def pytest_runtest_logreport(self, report) -> None:
        with self.lock:  # the heartbeat thread reads these
            self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
            bad = report.failed and report.nodeid not in self.failed
            if report.failed:
                self.failed.add(report.nodeid)
            if report.when == "teardown":
                self.done += 1
        self.say(force=bad)

    def pytest_sessionfinish(self) -> None:
        self.say(force=True)


def pytest_configure(config) -> None:
    fd = os.environ.get("TITO_PROGRESS_FD", "")
    if fd.isdigit() and not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(Progress(int(fd)), "tito-progress")
