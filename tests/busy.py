"""Busy processes beside a test (issue 41): `python3 -c 'while True: pass'`, `per_core` of them per core, each
killed by its PID afterwards. A student's laptop, a shared JupyterHub or a CI runner is the normal case."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import Iterator


@contextlib.contextmanager
def busy_processes(per_core: int = 4) -> Iterator[list[int]]:
    "Start `per_core` x cores CPU hogs; yields their PIDs; kills and reaps each one on the way out."
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(per_core * (os.cpu_count() or 1))]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def ended(pid: int, within: float = 10.0) -> bool:
    "Whether process `pid` is gone (not even a zombie of ours) within `within` seconds."
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
