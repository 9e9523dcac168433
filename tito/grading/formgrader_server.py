"""nbgrader's formgrader on a class course directory (tito.grading.course_dir): a Jupyter server on
127.0.0.1 with only nbgrader's formgrader extension, a fresh token, and Jupyter's config, data and
runtime folders private to the course directory (COURSE/.tito/jupyter), so nothing of the user's
Jupyter set-up changes what it shows.

    >>> with Formgrader(course) as fg:            # doctest: +SKIP
    ...     print(fg.url)                         # http://127.0.0.1:PORT/formgrader?token=...
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tito.isolation import process
from tito.config import TitoError

# the only server extension started: nbgrader's others (assignment list, course list, validation) are for
# students, and JupyterLab / Notebook are not needed to grade
EXTENSIONS = {"nbgrader.server_extensions.formgrader": True,
              "nbgrader.server_extensions.validate_assignment": False,
              "nbgrader.server_extensions.assignment_list": False,
              "nbgrader.server_extensions.course_list": False,
              "jupyterlab": False, "notebook": False, "jupyter_lsp": False, "jupyter_server_terminals": False,
              "notebook_shim": False, "jupyterlab_jupytext": False}


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class Formgrader:
    """A running formgrader (a context manager: stopped on exit). `url` opens it, with the token."""

    def __init__(self, course: Path, port: int | None = None, log: Path | None = None):
        self.course = Path(course).resolve()
        if not (self.course / "gradebook.db").is_file():
            raise TitoError(f"no class gradebook at {self.course / 'gradebook.db'}: run `tito grade` first")
        if port is not None and not (0 < port < 65536):
            raise TitoError(f"--port must be a TCP port number (1-65535), got {port}")
        if port is not None and port_in_use(port):
            raise TitoError(f"--port {port}: something already listens on 127.0.0.1:{port}; pick another port")
        self.port = port or free_port()
        self.token = secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/formgrader?token={self.token}"
        self.log = Path(log) if log else self.course / ".tito" / "formgrader.log"
        self.proc = None

    def start(self, timeout: float = 120) -> "Formgrader":
        home = self.course / ".tito" / "jupyter"
        for sub in ("config", "data", "runtime"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        (home / "runtime").chmod(0o700)
        (home / "config" / "jupyter_server_config.json").write_text(
            json.dumps({"ServerApp": {"jpserver_extensions": EXTENSIONS}}, indent=1) + "\n", encoding="utf-8")
        from tito.notebooks.nbgrader_glue import nbgrader_env

        env = {**nbgrader_env(), "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
               "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTER_PLATFORM_DIRS": "1"}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "wb")
        cmd = [sys.executable, "-m", "jupyter_server", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
               "--ServerApp.port_retries=0", "--ServerApp.open_browser=False", f"--ServerApp.root_dir={self.course}",
               f"--IdentityProvider.token={self.token}", "--ServerApp.allow_remote_access=False"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--ServerApp.allow_root=True")  # Jupyter refuses root otherwise; the server listens on 127.0.0.1 only
        self.proc = process.start(cmd, cwd=self.course, env=env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise TitoError(f"the formgrader's Jupyter server stopped (exit {self.proc.returncode}):\n"
                                + process.tail(self.log.read_text(encoding="utf-8", errors="replace"), 15))
            try:
                self.get("/formgrader/api/status")
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        self.stop()
        raise TitoError(f"the formgrader did not answer within {timeout:.0f} s (log: {self.log})")

    def get(self, path: str, timeout: float = 60) -> bytes:
        """GET BASE+PATH with the token; returns the body (raises urllib's errors)."""
        req = urllib.request.Request(self.base + path, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()

    def stop(self) -> None:
        """End the server (SIGTERM: Jupyter's clean shutdown; its process group killed after 20 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            process.wait(self.proc, 20)
        self.proc = None

    def __enter__(self) -> "Formgrader":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
