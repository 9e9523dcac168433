"""Knowing when the machine is noisy (issue 21, point 7).

`machine_state` reads /proc and /sys under a root (a fake one here, so the parsing is checked
exactly), `machine_load` judges the window between two snapshots by `BUSY_RULE`, and a run beside a
real CPU hog is called busy, names the hog, and the report and the `tito benchmark` CLI warn.
"""
from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from tinytorch.benchmarking.benchmark import BenchmarkSuite
from tinytorch.benchmarking.report import load_payload, render_markdown
from tinytorch.profiling.timing import BUSY_PROCESS_SHARE, BUSY_RULE, machine_load, machine_state, machine_warning

HZ = os.sysconf("SC_CLK_TCK")
CORES = 4
OWN = 300


def _write_proc(root: Path, cpu: list[int], load: str, procs: dict[int, tuple[str, int, int, str]]) -> None:
    "A fake /proc: the `cpu` line (and CORES cpuN lines), loadavg, and PID/stat + cmdline per process."
    proc = root / "proc"
    for d in proc.glob("[0-9]*"):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    proc.mkdir(parents=True, exist_ok=True)
    per_cpu = [f"cpu{i} " + " ".join(str(v // CORES) for v in cpu) for i in range(CORES)]
    (proc / "stat").write_text("cpu  " + " ".join(map(str, cpu)) + " 0 0\n" + "\n".join(per_cpu)
                               + "\nintr 12345 0\nctxt 999\nbtime 1700000000\n")
    (proc / "loadavg").write_text(load + "\n")
    for pid, (comm, utime, stime, cmdline) in procs.items():
        (proc / str(pid)).mkdir()
        # fields after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) R 1 1 1 0 -1 4194304 10 0 0 0 {utime} {stime} 0 0 20 0 1 0\n")
        (proc / str(pid) / "cmdline").write_bytes(cmdline.encode())


def _cpufreq(root: Path, governor: str, cur_khz: list[int], max_khz: int) -> None:
    for i, khz in enumerate(cur_khz):
        d = root / f"sys/devices/system/cpu/cpu{i}/cpufreq"
        d.mkdir(parents=True, exist_ok=True)
        (d / "scaling_governor").write_text(governor + "\n")
        (d / "scaling_cur_freq").write_text(f"{khz}\n")
        (d / "scaling_max_freq").write_text(f"{max_khz}\n")


def test_fake_proc_is_parsed_exactly(tmp_path):
    _cpufreq(tmp_path, "powersave", [1200000, 2400000, 1800000, 3000000], 3500000)
    # user nice system idle iowait irq softirq steal
    _write_proc(tmp_path, [1000, 0, 500, 8000, 100, 0, 0, 400], "2.50 1.00 0.50 3/200 999", {
        100: ("my (odd) prog", 500, 20, "python3\0-c\0while True: pass\0"),
        200: ("kworker/0:1", 10, 0, ""),  # a kernel thread: no command line
        OWN: ("python", 50, 0, "python\0-m\0pytest\0"),
        500: ("gone", 5, 5, "gone\0"),  # ends during the window
    })
    before = machine_state(tmp_path, own_pid=OWN)
    assert before["cores"] == CORES and before["load_avg"] == [2.5, 1.0, 0.5] and before["runnable"] == 3
    assert before["cpu_ticks"] == [1000, 0, 500, 8000, 100, 0, 0, 400] and before["ticks_per_s"] == HZ
    assert before["processes"][100] == (520, "python3 -c while True: pass")
    assert before["processes"][200] == (10, "[kworker/0:1]") and 500 in before["processes"]
    assert before["cpu_governors"] == ["powersave"] and before["cpu_freq_mhz"] == [1200.0, 3000.0]
    assert before["cpu_max_freq_mhz"] == 3500.0 and before["unavailable"] == {}
    # the window: 400 ticks over all 4 CPUs (100 per core) of which 40 stolen
    _write_proc(tmp_path, [1150, 0, 530, 8180, 100, 0, 0, 440], "4.20 1.60 0.60 5/201 1000", {
        100: ("my (odd) prog", 580, 30, "python3\0-c\0while True: pass\0"),  # +90 ticks: 0.90 of a core
        200: ("kworker/0:1", 15, 0, ""),  # +5: 0.05
        OWN: ("python", 110, 0, "python\0-m\0pytest\0"),  # +60: 0.60, ours
        400: ("new", 20, 5, "new\0--job\0"),  # started in the window: all 25 ticks, 0.25
    })
    load = machine_load(before, machine_state(tmp_path, own_pid=OWN), top=1)
    assert load["window_s"] == pytest.approx(100 / HZ, rel=1e-12)
    assert load["steal_share"] == 0.10 and load["own_core_share"] == 0.6
    # top=1, and every other process with at least 5% of a core: the hog, the new process, the kernel thread
    assert [(p["pid"], p["command"], p["core_share"]) for p in load["busiest"]] == [
        (100, "python3 -c while True: pass", 0.9), (400, "new --job", 0.25), (200, "[kworker/0:1]", 0.05)]
    assert load["busy"] is True and load["reasons"] == [
        "pid 100 (python3 -c while True: pass) used 90% of a core", "pid 400 (new --job) used 25% of a core",
        "steal time 10.0% of CPU time", "1-minute load average 4.20 (3.60 without this process) on 4 cores"]
    assert load["load_avg_1min"] == [2.5, 4.2] and load["rule"] == BUSY_RULE and load["cores"] == CORES
    warning = machine_warning(load, "'latency'")
    assert warning.startswith("WARNING: 'latency' was measured on a busy machine") and "pid 100" in warning


def test_a_quiet_fake_machine_is_not_busy_and_the_thresholds_are_strict(tmp_path):
    procs = {100: ("idle", 0, 0, "sleeper\0"), OWN: ("python", 0, 0, "python\0")}
    _write_proc(tmp_path, [0, 0, 0, 0, 0, 0, 0, 0], "0.00 0.00 0.00 1/50 7", procs)
    before = machine_state(tmp_path, own_pid=OWN)
    # exactly at each threshold: 20% of a core, 5% steal, load - own = cores - 0.5; none is "more than"
    procs = {100: ("idle", 20, 0, "sleeper\0"), OWN: ("python", 100, 0, "python\0")}
    _write_proc(tmp_path, [100, 0, 0, 280, 0, 0, 0, 20], "4.50 0.10 0.00 1/50 8", procs)
    load = machine_load(before, machine_state(tmp_path, own_pid=OWN))
    assert load["steal_share"] == 0.05 and load["own_core_share"] == 1.0
    assert load["busiest"] == [{"pid": 100, "command": "sleeper", "core_share": 0.2}]
    assert load["busy"] is False and load["reasons"] == [] and machine_warning(load) is None, load
    assert "cpu_governors" in load["unavailable"], "no cpufreq under this root: said so, with the reason"


def test_unreadable_figures_are_none_with_a_reason(tmp_path):
    s = machine_state(tmp_path)  # an empty root: no /proc, no /sys
    assert s["cpu_ticks"] is None and s["ticks_per_s"] is None and s["load_avg"] is None and s["processes"] == {}
    assert s["cpu_governors"] is None and s["cpu_freq_mhz"] is None
    assert set(s["unavailable"]) == {"cpu_ticks", "load_avg", "cpu_governors"}
    assert all(str(tmp_path) in reason for reason in s["unavailable"].values()), s["unavailable"]
    load = machine_load(s, machine_state(tmp_path))
    assert load["busy"] is None and load["steal_share"] is None and load["own_core_share"] is None
    assert load["busiest"] == [] and machine_warning(load) is None


def test_a_window_shorter_than_a_tick_has_no_shares(tmp_path):
    _write_proc(tmp_path, [10, 0, 0, 10, 0, 0, 0, 0], "0.10 0.10 0.10 1/10 2", {OWN: ("python", 1, 0, "py\0")})
    s = machine_state(tmp_path, own_pid=OWN)
    load = machine_load(s, s)
    assert load["steal_share"] is None and "shorter than one clock tick" in load["unavailable"]["shares"]
    assert load["busy"] is False, "the load average is still read: 0.10 on 4 cores is quiet"


HOG = [sys.executable, "-c", "while True: pass"]
HOG_TOKEN = "TINYTORCH_TEST_HOG"  # in the hog's environment: which hog is this test's


def _environ(pid: str) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # it ended, or is another user's
        return []


def _cmdline(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:  # it ended
        return []


@pytest.fixture
def hog():
    """A CPU hog beside the test, killed afterwards: another program's, started by `setsid -f` (which forks it
    and exits), so it is not a child of the measuring process (whose children count as its own work), and
    `module complete` still keys this file by what it executed (a Python running only `while True: pass`).
    Found by a token in its environment: another test worker may start its own hog at the same moment."""
    import signal
    import time as _time
    import uuid

    value = uuid.uuid4().hex
    token = f"{HOG_TOKEN}={value}".encode()
    subprocess.run(["setsid", "-f", *HOG], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, HOG_TOKEN: value})
    for _ in range(500):
        new = [int(p) for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == HOG and token in _environ(p)]
        if new:
            break
        _time.sleep(0.01)
    assert len(new) == 1, f"the hog started by setsid, found by its token: {new}"
    _time.sleep(0.2)  # spinning before the measurement starts
    yield types.SimpleNamespace(pid=new[0])
    os.kill(new[0], signal.SIGKILL)


def _named(load: dict, pid: int) -> bool:
    """The hog is among the busiest processes (all over 5% of a core), with its command. On a quiet
    machine it takes a whole core and is a reason for the verdict by itself; on an overloaded one it
    gets its fair share, and the machine is busy by the others and the load average as well."""
    hog = [p for p in load["busiest"] if p["pid"] == pid and "while True: pass" in p["command"]]
    if hog and hog[0]["core_share"] > BUSY_PROCESS_SHARE:
        assert any(r.startswith(f"pid {pid} ") for r in load["reasons"]), load["reasons"]
    return bool(hog)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux /proc")
def test_a_benchmark_beside_a_cpu_hog_is_busy_names_it_and_the_report_warns(tmp_path, hog):
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    suite = BenchmarkSuite({"mlp": model}, None, output_dir=tmp_path, measurement_runs=40, warmup_runs=2,
                           progress=False)
    suite.benchmark.run_latency_benchmark((16, 256))
    state = suite.benchmark.machine_states["latency"]
    assert state["busy"] is True and _named(state, hog.pid), f"the hog (pid {hog.pid}) must be named: {state}"
    assert state["window_s"] > 0 and state["load_avg_1min"][0] is not None
    suite.generate_report()
    payload = load_payload(tmp_path / "results.json")
    assert payload["machine_state"]["latency"]["busy"] is True
    report = render_markdown(payload)
    assert "'latency' was measured on a busy machine" in report and f"pid {hog.pid}" in report, report[:1500]
    assert BUSY_RULE in report


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux /proc")
def test_tito_benchmark_warns_beside_a_cpu_hog(tmp_path, hog, capsys):
    from tito.cli import main  # in this process: `module complete` keys this file by what it executed

    path = tmp_path / "wide.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())), str(path))
    rc = main(["benchmark", "--model", str(path), "--input-shape", "8,64", "--runs", "20", "--quiet",
               "--output-dir", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    assert "was measured on a busy machine" in err and f"pid {hog.pid}" in err, err[-2000:]
    assert "benchmark_report.md" in out, "--quiet still prints the report path (and the warning on stderr)"


def test_our_own_child_processes_count_as_ours_not_as_another_program(tmp_path):
    """torch.compile's workers are children of the measuring process: on a 16-core GPU machine one of them at 106%
    of a core made every metric 'busy' before this. A child (or grandchild) of ours adds to our share; a process of
    another parent at the same share still makes the window busy."""
    def procs(child_ticks, other_ticks):
        return {OWN: ("python", 100, 0, "python\0"), 700: ("worker", child_ticks, 0, "python\0compile_worker\0"),
                701: ("grandchild", child_ticks, 0, "python\0grand\0"), 800: ("other", other_ticks, 0, "other\0")}
    _write_proc(tmp_path, [0, 0, 0, 0, 0, 0, 0, 0], "0.00 0.00 0.00 1/50 7", procs(0, 0))
    for pid, ppid in ((700, OWN), (701, 700)):
        stat = tmp_path / "proc" / str(pid) / "stat"
        stat.write_text(stat.read_text().replace(") R 1 ", f") R {ppid} "))
    before = machine_state(tmp_path, own_pid=OWN)
    _write_proc(tmp_path, [200, 0, 0, 200, 0, 0, 0, 0], "0.10 0.00 0.00 1/50 8", procs(60, 10))
    for pid, ppid in ((700, OWN), (701, 700)):
        stat = tmp_path / "proc" / str(pid) / "stat"
        stat.write_text(stat.read_text().replace(") R 1 ", f") R {ppid} "))
    load = machine_load(before, machine_state(tmp_path, own_pid=OWN))
    # 400 ticks over 4 cores = 100 per core: ours 0 (OWN did not run) + 60 + 60 ticks = 1.2 cores; the other 0.1
    assert load["own_core_share"] == pytest.approx(1.2) and load["busy"] is False, load
    assert [p["pid"] for p in load["busiest"]] == [800], load["busiest"]
    _write_proc(tmp_path, [200, 0, 0, 200, 0, 0, 0, 0], "0.10 0.00 0.00 1/50 8", procs(60, 60))  # parents now 1
    load = machine_load(before, machine_state(tmp_path, own_pid=OWN))
    assert load["busy"] is True and any("pid 700" in r for r in load["reasons"]), load
