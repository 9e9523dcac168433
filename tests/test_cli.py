"""tito's command line: help for every command, clear errors, exit codes."""
import subprocess
import sys
from pathlib import Path

import pytest

from test_19_machine_state import _named, hog  # noqa: F401 - hog is a fixture
from tito.cli import build_parser, main

COMMANDS = ["export", "test", "module", "module complete", "module start", "release", "benchmark",
            "grade", "grades", "formgrader", "status", "olympics", "bench-quality"]


def test_top_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for c in ["export", "test", "module", "release", "benchmark", "grade", "status", "olympics", "bench-quality"]:
        assert c in out


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main(cmd.split() + ["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tito " + cmd)
    assert len(out.splitlines()) >= 3


def test_every_subparser_listed():
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command")
    assert set(sub.choices) == {"export", "test", "module", "release", "benchmark", "grade", "grades", "formgrader",
                                "status", "olympics", "bench-quality"}


def test_unknown_module_lists_valid(capsys, monkeypatch, root):
    monkeypatch.chdir(root)
    for argv in (["export", "42"], ["test", "42"], ["release", "42"], ["module", "complete", "42"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "unknown module '42'" in err and "15_profiling" in err and "19_benchmarking" in err


def test_module_names_resolve(course):
    assert course.resolve(["19"]) == ["19_benchmarking"]
    assert course.resolve(["19_benchmarking", "15"]) == ["19_benchmarking", "15_profiling"]
    assert course.resolve([]) == course.modules


def test_unknown_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and "export" in err


def test_olympics_needs_an_action(capsys):
    with pytest.raises(SystemExit) as e:
        main(["olympics"])
    assert e.value.code == 2
    assert "ACTION" in capsys.readouterr().err


def test_olympics_bad_input_exit_2(tmp_path, capsys):
    assert main(["olympics", "leaderboard", str(tmp_path / "missing")]) == 2
    assert "submissions_dir" in capsys.readouterr().err
    assert main(["olympics", "validate", str(tmp_path / "missing.json")]) == 2


def test_benchmark_bad_options_exit_2(capsys):
    assert main(["benchmark", "--runs", "1"]) == 2
    assert "--runs" in capsys.readouterr().err
    assert main(["benchmark", "--model", "x.pt"]) == 2
    assert "--input-shape" in capsys.readouterr().err


def test_export_check_exit_code(root):
    p = subprocess.run([sys.executable, "-m", "tito", "export", "--check"], cwd=root, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "in sync" in p.stdout


def test_benchmark_bad_shape(capsys, monkeypatch, root):
    monkeypatch.chdir(root)
    assert main(["benchmark", "--model", "nope.pt", "--input-shape", "1,x"]) == 2
    assert "--input-shape" in capsys.readouterr().err


def test_benchmark_cuda_without_cuda_exit_2(capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this machine, and on any without a GPU
    assert main(["benchmark", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--device" in err and "CUDA is not available" in err
    assert main(["benchmark", "--runtimes", "eager,tflite"]) == 2
    assert "--runtimes" in capsys.readouterr().err


def test_benchmark_runtimes_and_onnx_model(tmp_path, capsys):
    import json

    from tinytorch.benchmarking.digits import default_digits_model
    from tinytorch.benchmarking.optimize import to_onnx
    out = tmp_path / "rt"
    assert main(["benchmark", "--runtimes", "eager,onnxruntime", "--runs", "2", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "digits_cnn[onnxruntime]" in printed and "cross-runtime" in printed
    payload = json.loads((out / "results.json").read_text())
    assert set(payload["results"]["latency"]) == {f"{m}[{r}]" for m in ("digits_cnn", "digits_cnn_int8", "digits_cnn_pruned50")
                                                  for r in ("eager", "onnxruntime")}
    path = to_onnx(default_digits_model(), __import__("torch").zeros(1, 1, 8, 8), tmp_path / "cnn.onnx")
    assert main(["benchmark", "--model", str(path), "--input-shape", "1,1,8,8", "--runs", "2", "--quiet",
                 "--output-dir", str(tmp_path / "onnx")]) == 0
    payload = json.loads((tmp_path / "onnx" / "results.json").read_text())
    assert payload["results"]["latency"]["cnn[onnxruntime]"]["metadata"]["runtime"] == "onnxruntime"
    assert payload["results"]["accuracy"]["cnn[onnxruntime]"]["mean"] > 0.9
    assert main(["benchmark", "--model", str(path), "--input-shape", "1,1,8,8", "--hardware"]) == 2
    assert "--hardware needs a PyTorch model" in capsys.readouterr().err


def test_benchmark_user_model_hardware(tmp_path, monkeypatch, capsys):
    import pandas as pd
    import torch
    from tinytorch.benchmarking import defaults, suite
    path = tmp_path / "seq.pt"
    torch.save(torch.nn.Sequential(torch.nn.Conv1d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                   torch.nn.Linear(4 * 14, 3)), path)
    loads, load = [], suite.load_model_file

    def counted(p):
        loads.append(str(p))
        return load(p)
    for module in (suite, defaults):  # tito takes it from suite, the library's walk from defaults
        monkeypatch.setattr(module, "load_model_file", counted)
    out = tmp_path / "o"
    assert main(["benchmark", "--model", str(path), "--input-shape", "1,2,16", "--hardware", "--runs", "2",
                 "--quiet", "--output-dir", str(out)]) == 0
    assert loads == [str(path)], f"the --model file is loaded once for the benchmark and the hardware report, got {loads}"
    ts = tmp_path / "ts.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 2)), str(ts))
    assert main(["benchmark", "--model", str(ts), "--input-shape", "1,4", "--hardware", "--output-dir",
                 str(tmp_path / "ts")]) == 2
    err = capsys.readouterr().err
    assert "--hardware needs a PyTorch model" in err and "is TorchScript" in err, err
    assert not (tmp_path / "ts").exists(), "a model the hardware report refuses is refused before the benchmark runs"
    layers = pd.read_csv(out / "hardware" / "layerwise_breakdown.csv")
    assert int(layers["macs"].sum()) == 4 * 2 * 3 * 14 + 4 * 14 * 3, "MACs counted for the user's input shape"
    summary = pd.read_csv(out / "hardware" / "hardware_summary.csv").iloc[0]
    assert "unavailable: no labelled data fits input shape (1, 2, 16)" in summary["skipped_precisions"]
    assert (out / "hardware" / "device_fit.csv").exists() and (out / "hardware" / "watch_metrics.json").exists()


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux /proc")
def test_the_hardware_report_records_the_machine_and_warns_beside_a_cpu_hog(tmp_path, hog, capsys):  # noqa: F811 - the fixture
    """`tito benchmark --hardware`: the hardware artifacts keep the machine's load over their run (its measured
    roofs came out 30x low beside a hog), their table opens with the warning, and the CLI prints it."""
    import json

    import torch

    path = tmp_path / "wide.pt"
    torch.save(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()), path)  # hardware needs hooks: not TorchScript
    rc = main(["benchmark", "--model", str(path), "--input-shape", "8,64", "--runs", "5", "--quiet", "--hardware",
               "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 0, err[-2000:]
    state = json.loads((tmp_path / "out" / "hardware" / "machine_state.json").read_text())
    assert state["busy"] is True and _named(state, hog.pid), state
    table = (tmp_path / "out" / "hardware" / "benchmark_table.md").read_text()
    assert table.startswith("> **WARNING: the hardware report of wide was measured on a busy machine"), table[:300]
    assert "the hardware artifacts was measured on a busy machine" in err and f"pid {hog.pid}" in err, err[-2000:]


def test_output_reaches_a_pipe_line_by_line(root):
    """Redirected (nohup, CI, `> log`), tito's stdout is line-buffered as on a terminal: a line printed is readable at
    once, not when a block fills or the run ends (issue 44). The child prints a line, then waits for this test to
    have read it before it exits."""
    code = ("import sys, time; from tito.cli import line_buffered; line_buffered(); print('first line'); "
            "sys.stdin.readline(); print('second')")
    import os
    import select

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # CI may set it: test tito's own setting
    p = subprocess.Popen([sys.executable, "-c", code], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=env)
    try:
        got = b""
        while not got.endswith(b"\n"):  # one line may arrive in more than one write
            ready, _, _ = select.select([p.stdout], [], [], 120)  # block-buffered, nothing would arrive before exit
            chunk = os.read(p.stdout.fileno(), 100) if ready else b""
            assert chunk, f"the first line did not arrive before the child's exit (read so far: {got!r})"
            got += chunk
        assert got == b"first line\n"
        p.stdin.write(b"go\n")
        p.stdin.flush()
        assert p.stdout.read() == b"second\n"
    finally:
        p.kill()
        p.wait()


def test_counts_read_in_the_plural_they_take():
    from tito.grading.classrun import closing_line, plural
    from tito.grading.per_student import StudentGrade

    assert [plural(n, "student") for n in (0, 1, 2)] == ["0 students", "1 student", "2 students"]
    assert plural(1.5, "point") == "1.5 points" and plural(1.0, "point") == "1 point"
    one = StudentGrade("ann", 3, 3, "passed", "")
    assert closing_line([one]) == "1 student: 1 graded (1 passed every test, 0 with failed tests)"


def test_olympics_judge_exits_1_only_for_judging_that_failed(tmp_path, monkeypatch, capsys):
    """A model the judge rejects is the student's line (exit 0); a sandbox that never came up is the judge's failure
    (exit 1, named in the closing line); both counted apart (issue 43 item 3). judge_class is replaced by its
    result: what is tested is the command's reading of it."""
    import tito.olympics.judge as judge_mod
    from tito.commands import olympics as cmd

    (tmp_path / "subs" / "ann").mkdir(parents=True)
    result = {"board": {"markdown": "| board |"}, "students": {"ann": {}, "bob": {}},
              "rejected": {"bob": "its model returned NaN"}}
    monkeypatch.setattr(judge_mod, "judge_class", lambda *a, **k: result)
    args = ["olympics", "judge", str(tmp_path / "subs"), "--output-dir", str(tmp_path / "out")]
    assert main(args) == 0
    assert "2 students: 1 judged, 1 rejected (their files)" in capsys.readouterr().out
    result["rejected"]["cy"] = f"starting the sandbox timed out ({cmd.JUDGE_SIDE}: the machine may be overloaded)"
    assert main(args) == 1
    assert "judging FAILED for 1 student (cy)" in capsys.readouterr().out
