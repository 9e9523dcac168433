"""The job server kept between `module complete` runs (tito.testing.kept_server): reused only by a run that would have
started the same one, each run in its own environment, gone when idle, replaced when dead, never shared with a folder
others can enter, and a run that stops early takes its jobs with it."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from busy import ended
from tito.isolation import process
from tito.testing import kept_server
from tito.testing.job_server import JobServer

# what each job writes: the run's environment as the job sees it, its folder, and whether the server's preload reached it
JOB = """
import json, os, sys, tempfile, time
def test_unit_report():
    out = os.environ["KEPT_OUT"]
    with open(out, "w") as f:
        json.dump({"mark": os.environ.get("KEPT_MARK"), "term": os.environ.get("TERM"), "cwd": os.getcwd(),
                   "pid": os.getpid(),
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


def _run(ws: Path, keep: float = 60, file: str = "job_dev.py", preload: tuple = ("wave",), base: dict | None = None,
         **env_extra) -> tuple[JobServer, object]:
    """One run of one file's inline tests through a kept server (or the run's own, keep=0); (the server object after
    close, what the job wrote to KEPT_OUT)."""
    out = ws / "out.json"  # one path for every run: every variable but a few (VOLATILE_VARS) is part of the key
    out.unlink(missing_ok=True)
    env = {**(base or process.child_env()), "KEPT_OUT": str(out), **env_extra}
    srv = JobServer(ws, env, 1, ws / "server.log", preload=list(preload), keep=keep)
    try:
        srv.submit({"id": 0, "kind": "inline", "file": str(ws / file), "log": str(ws / "job.log"),
                    "result": str(ws / "job.json"), "timeout": 120})
        msg = srv.next()
    finally:
        srv.close()
    assert msg["result"]["ok"], (msg, (ws / "job.log").read_text())
    return srv, json.loads(out.read_text())


def _written(path: Path, within: float = 60) -> dict:
    """What a job wrote to `path`, once it is all there (the job may be between opening the file and writing it)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_second_run_is_a_session_of_the_same_server_in_its_own_environment(ws):
    first, seen1 = _run(ws, TERM="one")
    second, seen2 = _run(ws, TERM="two")  # a variable two terminals differ in (VOLATILE_VARS): the same server
    assert first.conn is not None and first.note == ""
    server = first.ready["kept"]
    assert second.ready["kept"] == server and kept_server.running(ws) == [server], "one server, reused"
    assert (seen1["term"], seen2["term"]) == ("one", "two"), "each job sees its own run's environment"
    assert seen1["cwd"] == seen2["cwd"] == str(ws.resolve()) and seen2["preloaded"]
    assert seen1["pid"] != seen2["pid"]
    for seen in (seen1, seen2):  # what a job leaves in its temporary folder goes with the job
        assert Path(seen["scratch"]).parent.name.startswith("tito-job-") and not Path(seen["scratch"]).exists()
    # any other variable may be one a preloaded library reads as it is imported: another server
    third, seen3 = _run(ws, KEPT_MARK="three")
    assert third.ready["kept"] != server and sorted(kept_server.running(ws)) == sorted([server, third.ready["kept"]])
    assert seen3["mark"] == "three"


def test_an_idle_server_ends_and_a_dead_one_is_replaced(ws):
    srv, _ = _run(ws, keep=0.5)
    pid = srv.ready["kept"]
    assert ended(pid, 15), "a server idle for its keep time ends"
    assert not [p for p in Path(os.environ["XDG_RUNTIME_DIR"], "tito").iterdir() if p.is_socket()], "its socket too"
    srv, _ = _run(ws)
    os.kill(srv.ready["kept"], signal.SIGKILL)  # its socket file stays: nobody listens there now
    assert ended(srv.ready["kept"], 5)
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
    job = _written(out)["pid"]
    srv.wait_ready()  # every line the server sent is read: the close below is a clean one, not a reset
    srv.close()  # a job still running: the run stopped early (an error, Ctrl-C)
    assert ended(job, 10), "the job of a run that stopped is ended, not left running in the kept server"
    assert len(kept_server.running(ws)) == 1, "the server itself stays for the next run"


def test_keep_seconds_is_checked():
    assert kept_server.keep_seconds({"TITO_KEEP_SERVER": "2.5"}) == 2.5
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match="TITO_KEEP_SERVER"):
            kept_server.keep_seconds({"TITO_KEEP_SERVER": bad})


# ---- what a red team found (stop 51): each a test -----------------------------------------------------------------

def test_a_killed_run_takes_its_jobs_with_it(ws, tmp_path):
    """A run killed (SIGKILL, a closed terminal) left its jobs running in the kept server, to write a result a later
    run's job of the same name could be reported with."""
    out = ws / "out.json"
    client = tmp_path / "client.py"
    client.write_text(
        "import sys\nfrom pathlib import Path\nfrom tito.isolation import process\n"
        "from tito.testing.job_server import JobServer\n"
        f"ws = Path({str(ws)!r})\n"
        "srv = JobServer(ws, process.child_env(), 1, ws / 'server.log', preload=['wave'], keep=60)\n"
        "srv.submit({'id': 0, 'kind': 'inline', 'file': str(ws / 'job_dev.py'), 'log': str(ws / 'job.log'),\n"
        "            'result': str(ws / 'job.json'), 'timeout': 600})\n"
        "srv.next()\n")
    env = {**os.environ, "KEPT_OUT": str(out), "KEPT_SLEEP": "120", "PYTHONPATH": str(Path(__file__).parents[1])}
    p = subprocess.Popen([sys.executable, str(client)], env=env)
    try:
        job = _written(out)["pid"]
    finally:
        p.kill()
        p.wait()
    assert ended(job, 10), "the killed run's job was left running"
    assert not (ws / "job.json").exists()


def test_a_workspace_made_again_at_its_path_gets_a_server_of_its_own(ws):
    first, _ = _run(ws)
    shutil.rmtree(ws)
    ws.mkdir()
    (ws / "job_dev.py").write_text(JOB)
    second, seen = _run(ws)  # the old server's folder is gone: every job of it would fail in os.getcwd()
    assert second.ready["kept"] != first.ready["kept"] and seen["cwd"] == str(ws.resolve())
    assert first.ready["kept"] in kept_server.running(ws), "a server whose folder was removed is still found"


def test_a_library_changed_in_place_is_loaded_again(ws, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "kept_probe.py").write_text("VERSION = 1\n")
    (ws / "ver_dev.py").write_text("import json, os, kept_probe\ndef test_unit_version():\n"
                                   "    json.dump(kept_probe.VERSION, open(os.environ['KEPT_OUT'], 'w'))\n")
    env = {**process.child_env(), "PYTHONPATH": str(lib)}

    def version() -> tuple[int, int]:
        srv, seen = _run(ws, file="ver_dev.py", preload=("kept_probe",), base=env)
        return seen, srv.ready["kept"]

    v1, server = version()
    (lib / "kept_probe.py").write_text("VERSION = 22\n")  # edited in place: no install, no folder's time changes
    v2, server2 = version()
    assert (v1, v2) == (1, 22) and server2 != server and ended(server, 5), "the stale server is replaced"


def test_the_limits_a_run_is_given_are_part_of_the_key(ws):
    first, _ = _run(ws)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512) - 1, hard))
    try:
        second, _ = _run(ws)  # a session has its server's limits: a run under other ones needs another server
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert second.ready["kept"] != first.ready["kept"]


def test_a_large_environment_and_a_stuck_server(ws, monkeypatch):
    big, seen = _run(ws, KEPT_MARK="x" * 100_000)  # a header over many socket buffers, jobs queued behind it
    assert seen["mark"] == "x" * 100_000
    os.kill(big.ready["kept"], signal.SIGSTOP)  # alive, never answering
    monkeypatch.setattr(kept_server, "READY_WAIT_S", 2.0)
    t0 = time.monotonic()
    again, seen = _run(ws, KEPT_MARK="x" * 100_000)
    assert again.ready["kept"] != big.ready["kept"] and time.monotonic() - t0 < 60 and ended(big.ready["kept"], 5)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a listener of another uid")
def test_a_server_of_another_user_is_never_used(tmp_path):
    """The socket folder is this user's alone; if another user's process listens at the path all the same (a folder
    swapped under a root run), the run refuses it rather than hand it its environment and log."""
    path = tmp_path / "s"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        os.setuid(65534)
        s.listen(1)  # the credentials a connecting run sees are those of listen()
        os.write(w, b"x")
        time.sleep(30)
        os._exit(0)
    try:
        os.read(r, 1)
        with pytest.raises(OSError, match="uid 65534"):
            kept_server._connected(path)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_torchs_compile_cache_lasts_beyond_a_job(ws):
    """A job's temporary folder is removed when it ends; torch's compile cache (by default under the temporary folder)
    is not in it, in a kept server or a server of the run's own: in a job's folder every run compiled again (+8 CPU-s
    for test_19_runtimes)."""
    (ws / "cache_dev.py").write_text("import json, os\ndef test_unit_cache():\n"
                                     "    from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
                                     "    json.dump(cache_dir(), open(os.environ['KEPT_OUT'], 'w'))\n")
    import tempfile

    for keep in (0, 60):
        _, seen = _run(ws, keep, file="cache_dev.py", preload=("torch._inductor.runtime.cache_dir_utils",))
        used = Path(seen)
        assert used.parent == Path(tempfile.gettempdir()) and used.name.startswith("torchinductor_"), (keep, used)
        assert used.is_dir(), "still there after the job"


def test_a_request_is_read_to_its_length_and_a_bad_one_refused():
    """tito.testing.wire, what both forking servers read first: the bytes after a request stay for what follows (a
    run's first jobs); a request too large, not JSON, without its descriptors, or late, is refused, its fds closed."""
    from tito.testing import wire

    a, b = socket.socketpair()
    wire.send(a, {"env": {"X": "y" * 100_000}}, [1])
    a.sendall(b"next line\n")
    obj, fds = wire.receive(b, 1)
    assert obj == {"env": {"X": "y" * 100_000}} and len(fds) == 1 and b.recv(64) == b"next line\n"
    os.close(fds[0])
    for raw, nfds in (((wire.MAX_REQUEST + 1).to_bytes(8, "big"), 1), ((4).to_bytes(8, "big") + b"nope", 1),
                      ((2).to_bytes(8, "big") + b"{}", 0)):
        a, b = socket.socketpair()
        r, w = os.pipe()
        socket.send_fds(a, [raw], [r] if nfds else [])
        os.close(r)
        assert wire.receive(b, 1, timeout=2) is None, raw[:12]
        if nfds:  # the descriptor it was handed is closed: the pipe has no reader left
            with pytest.raises(BrokenPipeError):
                os.write(w, b"x")
        os.close(w)
    a, b = socket.socketpair()
    t0 = time.monotonic()
    assert wire.receive(b, 1, timeout=0.5) is None and time.monotonic() - t0 < 5, "nothing sent: refused in time"
