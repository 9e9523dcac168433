"""The job server kept between `module complete` runs (tito.testing.kept_server): reused only by a run that would have
started the same one, each run in its own environment, gone when idle, replaced when dead, never shared with a folder
others can enter, and a run that stops early takes its jobs with it."""
from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest

from tito.isolation import process
from tito.testing import kept_server
from tito.testing.job_server import JobServer

# what each job writes: the run's environment as the job sees it, its folder, and whether the server's preload reached it
JOB = """
import json, os, sys, tempfile, time
def test_unit_report():
    out = os.environ["KEPT_OUT"]
    with open(out, "w") as f:
        json.dump({"mark": os.environ.get("KEPT_MARK"), "cwd": os.getcwd(), "pid": os.getpid(),
                   "preloaded": "wave" in sys.modules, "scratch": tempfile.mkdtemp()}, f)
    time.sleep(float(os.environ.get("KEPT_SLEEP", "0")))
"""


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A folder to run jobs in, a private socket folder of its own, and every server started for it stopped after."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "job_dev.py").write_text(JOB)
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    yield tmp_path / "ws"
    for pid in kept_server.running(tmp_path / "ws"):
        os.kill(pid, signal.SIGKILL)


def _run(ws: Path, keep: float = 60, **env_extra) -> tuple[JobServer, dict]:
    """One run of one job through a kept server; (the server object after close, what the job wrote)."""
    out = ws / f"out-{time.monotonic_ns()}.json"
    env = {**process.child_env(), "KEPT_OUT": str(out), **env_extra}
    srv = JobServer(ws, env, 1, ws / "server.log", preload=["wave"], keep=keep)
    try:
        srv.submit({"id": 0, "kind": "inline", "file": str(ws / "job_dev.py"), "log": str(ws / "job.log"),
                    "result": str(ws / "job.json"), "timeout": 60})
        msg = srv.next()
    finally:
        srv.close()
    assert msg["result"]["ok"], (msg, (ws / "job.log").read_text())
    return srv, json.loads(out.read_text())


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_second_run_is_a_session_of_the_same_server_in_its_own_environment(ws):
    first, seen1 = _run(ws, KEPT_MARK="one")
    second, seen2 = _run(ws, KEPT_MARK="two")
    assert first.conn is not None and first.note == ""
    server = first.ready["kept"]
    assert second.ready["kept"] == server and kept_server.running(ws) == [server], "one server, reused"
    assert (seen1["mark"], seen2["mark"]) == ("one", "two"), "each job sees its own run's environment"
    assert seen1["cwd"] == seen2["cwd"] == str(ws.resolve()) and seen2["preloaded"]
    assert seen1["pid"] != seen2["pid"]
    for seen in (seen1, seen2):  # what a job leaves in its temporary folder goes with the job
        assert Path(seen["scratch"]).parent.name.startswith("tito-job-") and not Path(seen["scratch"]).exists()
    # a variable the preloaded libraries read as they are imported is another server's
    third, _ = _run(ws, MPLBACKEND="pdf")
    assert third.ready["kept"] != server and sorted(kept_server.running(ws)) == sorted([server, third.ready["kept"]])


def test_an_idle_server_ends_and_a_dead_one_is_replaced(ws):
    srv, _ = _run(ws, keep=0.5)
    pid = srv.ready["kept"]
    assert _gone(pid, 15), "a server idle for its keep time ends"
    assert not [p for p in Path(os.environ["XDG_RUNTIME_DIR"], "tito").iterdir() if p.is_socket()], "its socket too"
    srv, _ = _run(ws)
    os.kill(srv.ready["kept"], signal.SIGKILL)  # its socket file stays: nobody listens there now
    assert _gone(srv.ready["kept"], 5)
    again, seen = _run(ws, KEPT_MARK="after")
    assert again.ready["kept"] not in (pid, srv.ready["kept"]) and seen["mark"] == "after"


def test_a_folder_others_can_enter_keeps_no_server(ws, capsys):
    folder = Path(os.environ["XDG_RUNTIME_DIR"]) / "tito"
    folder.mkdir()
    folder.chmod(0o755)  # another user's server could listen here and be handed this user's jobs
    srv, seen = _run(ws, KEPT_MARK="own")
    assert srv.conn is None and "only this user can enter" in srv.note, srv.note
    assert seen["mark"] == "own" and not kept_server.running(ws), "the run's own server did the job"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755


def test_a_run_that_stops_early_ends_its_jobs(ws):
    out = ws / "slow.json"
    env = {**process.child_env(), "KEPT_OUT": str(out), "KEPT_SLEEP": "120"}
    srv = JobServer(ws, env, 1, ws / "server.log", preload=["wave"], keep=60)
    srv.submit({"id": 0, "kind": "inline", "file": str(ws / "job_dev.py"), "log": str(ws / "job.log"),
                "result": str(ws / "job.json"), "timeout": 600})
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    job = json.loads(out.read_text())["pid"]
    srv.wait_ready()  # every line the server sent is read: the close below is a clean one, not a reset
    srv.close()  # a job still running: the run stopped early (an error, Ctrl-C)
    assert _gone(job, 10), "the job of a run that stopped is ended, not left running in the kept server"
    assert len(kept_server.running(ws)) == 1, "the server itself stays for the next run"


def test_keep_seconds_is_checked():
    assert kept_server.keep_seconds({"TITO_KEEP_SERVER": "2.5"}) == 2.5
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match="TITO_KEEP_SERVER"):
            kept_server.keep_seconds({"TITO_KEEP_SERVER": bad})
