"""The supported Pythons (issue 29): the launcher's range check, a lock that resolves on every
supported version, and code that runs on the floor (Debian 12's 3.11.2).

The lock test asks pip to resolve the real dependency set for each version without that
interpreter (`pip install --dry-run --python-version X.Y.Z --only-binary=:all: --report`), so it
needs the package index; it skips, saying so, where the index cannot be reached.
"""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tito import __main__ as launcher
from tito.grading.classrun import extract_plain

ROOT = Path(__file__).resolve().parent.parent

# one version per supported minor, the floor and the patch release where the lock's pins change
# (soupsieve 4 needs >= 3.11.5)
TARGETS = ["3.11.2", "3.11.5", "3.12.0", "3.13.0", "3.14.0"]
NETWORK_FAILURES = ("NewConnectionError", "Temporary failure in name resolution", "Max retries exceeded",
                    "Network is unreachable", "Could not fetch URL")


def test_the_range_is_stated_once_in_each_place():
    low, high = launcher.SUPPORTED_PYTHON
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={'.'.join(map(str, low))},<{high[0]}.{high[1]}"
    readme = (ROOT / "README.md").read_text()
    assert f"{'.'.join(map(str, low))} to {high[0]}.{high[1] - 1}" in readme, "the README states the range"


@pytest.mark.parametrize("version", [(3, 11, 2), (3, 11, 7), (3, 12, 3), (3, 13, 1), (3, 14, 0)])
def test_supported_versions_pass_the_check(version):
    assert launcher.python_problem(version, "/x/python3") is None


@pytest.mark.parametrize("version,why", [((3, 10, 12), "older"), ((3, 11, 1), "older"), ((3, 15, 0), "newer")])
def test_unsupported_versions_are_told_what_found_needed_and_how(version, why):
    msg = launcher.python_problem(version, "/x/python3")
    found = ".".join(map(str, version))
    assert msg.startswith(f"tito: Python {found} (/x/python3) is not supported: tito needs CPython 3.11.2 up to 3.14.")
    assert why in msg and "apt install" in msg and "python.org" in msg and "Nothing was created" in msg


def test_the_launcher_refuses_before_creating_anything(tmp_path):
    """A copy of the launcher whose range excludes this interpreter exits 1 with the message, no .venv."""
    (tmp_path / "tito").mkdir()
    shutil.copy(ROOT / "tito" / "__init__.py", tmp_path / "tito")
    text = (ROOT / "tito" / "__main__.py").read_text()
    text, n = re.subn(r"SUPPORTED_PYTHON = \(.*\)\n", "SUPPORTED_PYTHON = ((9, 0, 0), (9, 1))\n", text)
    assert n == 1
    (tmp_path / "tito" / "__main__.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("TITO_NO_BOOTSTRAP", "VIRTUAL_ENV")}
    r = subprocess.run([sys.executable, "-m", "tito", "--help"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "is not supported: tito needs CPython 9.0.0 up to 9.0" in r.stderr
    assert not (tmp_path / ".venv").exists()


def test_a_kit_launcher_does_not_ask_for_bubblewrap(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher, "REPO", tmp_path)
    (tmp_path / "settings.ini").write_text("[course]\nkit = 19_benchmarking\n")
    assert launcher.is_student_kit()
    (tmp_path / "settings.ini").write_text("[course]\nmodules = 15_profiling 19_benchmarking\n")
    assert not launcher.is_student_kit()


def _lock_pins(version: str) -> dict[str, str]:
    """name -> pinned version of every lock line whose marker holds for CPython `version` here."""
    env = {"python_full_version": version, "python_version": ".".join(version.split(".")[:2])}
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(env):
            (spec,) = req.specifier
            assert spec.operator == "==", f"requirements.lock: {line!r} is not an exact pin"
            assert canonicalize_name(req.name) not in pins, f"requirements.lock: two pins of {req.name} for {version}"
            pins[canonicalize_name(req.name)] = spec.version
    return pins


@pytest.fixture(scope="module")
def lock_resolutions(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path, dict[str, str]]]:
    """pip's resolution of the dependency set for each of TARGETS: version -> (its run, its --report file, the lock's
    pins for it). Each run waits on the package index as well as computing (~23 CPU-s each, 2026-11-29): started
    together, as five processes, their waits overlap (one after another they took ~290 s of a loaded test run)."""
    import pip

    if tuple(int(x) for x in pip.__version__.split(".")[:2]) < (23, 2):
        # Debian 12's venv pip (23.0.1) checks a package's Requires-Python against the Python it runs on, not
        # --python-version ("soupsieve requires a different Python: 3.11.2 not in '>=3.11.5'" for 3.12)
        pytest.skip(f"pip {pip.__version__} cannot resolve for another Python version (needs pip >= 23.2)")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    runs = {}
    for version in TARGETS:
        folder = tmp_path_factory.mktemp(f"lock-{version}")
        # pip evaluates a constraint's marker for the Python it runs on, not for --python-version: hand it
        # the lock's lines as they read on `version`
        pins = _lock_pins(version)
        constraints = folder / "constraints.txt"
        constraints.write_text("".join(f"{name}=={v}\n" for name, v in pins.items()))
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--disable-pip-version-check", "--only-binary=:all:", "--python-version", version,
               "--target", str(folder / "t"), "--report", str(folder / "report.json"), "-c", str(constraints), *deps]
        with open(folder / "out.txt", "w") as out, open(folder / "err.txt", "w") as err:  # files: no pipe to fill
            runs[version] = (subprocess.Popen(cmd, stdout=out, stderr=err), folder, pins)
    done, deadline = {}, time.monotonic() + 1500  # each had 600 s one after another; at once they share the CPU
    try:
        for version, (proc, folder, pins) in runs.items():
            proc.wait(timeout=max(deadline - time.monotonic(), 1))
            said = [(folder / f).read_text() for f in ("out.txt", "err.txt")]
            run = subprocess.CompletedProcess(proc.args, proc.returncode, *said)
            done[version] = (run, folder / "report.json", pins)
    finally:
        for proc, _, _ in runs.values():  # one that timed out: the others are not left running
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


@pytest.mark.timeout(1800)  # the first one sets up the fixture: five resolutions at once, 1500 s at most
@pytest.mark.parametrize("version", TARGETS)
def test_the_lock_installs_on_every_supported_python(version, lock_resolutions):
    r, report, pins = lock_resolutions[version]
    if r.returncode != 0 and any(s in r.stdout + r.stderr for s in NETWORK_FAILURES):
        pytest.skip(f"the package index cannot be reached: {(r.stderr or r.stdout).strip().splitlines()[-1]}")
    assert r.returncode == 0, f"pip cannot install the lock on Python {version}:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    chosen = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"].split("+")[0]
              for i in json.loads(report.read_text())["install"]}
    unpinned = sorted(set(chosen) - set(pins))
    assert not unpinned, f"Python {version} installs packages requirements.lock does not pin: {unpinned}"
    assert chosen == {k: pins[k] for k in chosen}, "the versions pip chose are the lock's pins"
    assert chosen["torch"] == "2.13.0" and chosen["soupsieve"] == ("2.10" if version < "3.11.5" else "4.1.3")


def _tar(*members) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r:gz")


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


@pytest.mark.parametrize("has_filter", [True, False], ids=["python>=3.11.4", "python<3.11.4"])
def test_published_archives_extract_plain_files_on_every_python(tmp_path, monkeypatch, has_filter):
    if not has_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    ok = tmp_path / "ok"
    ok.mkdir()
    extract_plain(_tar(_file("feedback/a.html", b"<p>hi</p>", 0o4755)), ok)
    assert (ok / "feedback" / "a.html").read_bytes() == b"<p>hi</p>"
    assert not (ok / "feedback" / "a.html").stat().st_mode & 0o4000, "no set-uid bit survives"
    link = tarfile.TarInfo("evil")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    for bad in ([_file("../escape")], [(link, None)]):
        dest = tmp_path / f"bad{len(list(tmp_path.iterdir()))}"
        dest.mkdir()
        with pytest.raises(tarfile.TarError):
            extract_plain(_tar(*bad), dest)
        assert not (tmp_path / "escape").exists() and not (dest / "evil").exists()
    # an absolute name is refused, or (tarfile's own filter) made relative: never written outside
    dest = tmp_path / "absolute"
    dest.mkdir()
    try:
        extract_plain(_tar(_file(str(tmp_path / "outside"))), dest)
    except tarfile.TarError:
        pass
    assert not (tmp_path / "outside").exists()


def test_the_student_side_runs_where_linux_calls_are_missing(tmp_path, monkeypatch):
    """macOS has no prctl, sched_setaffinity or bubblewrap: a child process starts without the
    parent-death signal, and `olympics verify` of a participant's own file measures it in-process."""
    import torch

    from tito.isolation import process
    from tito.commands.olympics import olympics_submit, olympics_verify
    from tinytorch.benchmarking.digits import default_digits_model

    import ctypes

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: (_ for _ in ()).throw(AttributeError("no prctl here")))
    monkeypatch.delattr(os, "sched_setaffinity")
    monkeypatch.delattr(os, "sched_getaffinity")
    p = process.start([sys.executable, "-c", "print('child ran')"])
    assert p.communicate(timeout=60)[0].decode().strip() == "child ran"

    mine = tmp_path / "mine.pt"
    torch.jit.script(default_digits_model().eval()).save(str(mine))
    sub = tmp_path / "submission.json"
    olympics_submit("latency_sprint", output_path=sub, measurement_runs=6, model_path=str(mine))
    report = olympics_verify(sub, 6, model_path=str(mine))
    assert report["verified"], report["reasons"]
    other = tmp_path / "other.pt"
    torch.jit.script(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval()).save(str(other))
    report = olympics_verify(sub, 6, model_path=str(other))
    assert not report["verified"] and any("sha256" in r for r in report["reasons"]), report["reasons"]


# ---- which torch the set-up installs (issue 44) -------------------------------------------------------------

def _wheel(folder: Path, version: str) -> Path:
    """A minimal wheel of a package named torch (no code, no dependencies), in FOLDER/torch/ with a PEP 503 page."""
    import zipfile

    name = f"torch-{version}-py3-none-any.whl"
    (folder / "torch").mkdir(parents=True)
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(folder / "torch" / name, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    (folder / "torch" / "index.html").write_text(f'<html><body><a href="{name}">{name}</a></body></html>')
    return folder


def _pip_choice(cmd: list[str], pypi: Path, tmp_path: Path) -> str:
    "The torch version `cmd` (a set-up's pip install) would install, PyPI standing in as `pypi`, no pip config."
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    report = tmp_path / "report.json"
    r = subprocess.run([*map(str, cmd), "--dry-run", "--ignore-installed", "--no-deps", "--index-url", pypi.as_uri(),
                        "--report", str(report), "--quiet"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (torch,) = [i["metadata"]["version"] for i in json.loads(report.read_text())["install"]]
    return torch


def test_the_setup_installs_the_cpu_build_without_a_gpu_and_says_when_it_falls_back(tmp_path, monkeypatch, capsys):
    """No NVIDIA GPU on Linux x86_64: the set-up's pip command takes torch from the CPU index (a stub of it here, as
    https://download.pytorch.org/whl/cpu cannot be reached from this machine) though PyPI (a stub too) has the same
    version; with the CPU index unreachable it says so and installs PyPI's; TITO_TORCH=cuda takes PyPI's, removing a
    CPU build first (this venv has one)."""
    pypi, cpu = _wheel(tmp_path / "pypi", "2.13.0"), _wheel(tmp_path / "cpu", "2.13.0+cpu")
    assert launcher.torch_build({}, "Linux", "x86_64", gpu=False) == "cpu"
    monkeypatch.setenv(launcher.TORCH_INDEX_ENV, cpu.as_uri())
    (cmd,) = launcher.torch_install(sys.executable, "cpu", io.StringIO())
    assert _pip_choice(cmd, pypi, tmp_path) == "2.13.0+cpu"
    assert "CPU build, from " + cpu.as_uri() in capsys.readouterr().err
    monkeypatch.setenv(launcher.TORCH_INDEX_ENV, (tmp_path / "unreachable").as_uri())
    log = io.StringIO()
    (cmd,) = launcher.torch_install(sys.executable, "cpu", log)
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "installing torch 2.13.0 from PyPI instead" in err and err in log.getvalue()
    assert _pip_choice(cmd, pypi, tmp_path) == "2.13.0"
    monkeypatch.delenv(launcher.TORCH_INDEX_ENV)
    assert launcher.index_reachable("http://127.0.0.1:9/", timeout=5) is not None  # a closed port: why, not None
    drop, cmd = launcher.torch_install(sys.executable, "cuda", io.StringIO())  # this venv's torch is the CPU build
    assert drop[-3:] == ["uninstall", "-y", "torch"] and cmd[-1] == "torch==2.13.0"
    assert _pip_choice(cmd, pypi, tmp_path) == "2.13.0"
    assert launcher.torch_build({"TITO_TORCH": "cuda"}, "Linux", "x86_64", gpu=False) == "cuda"
    assert launcher.torch_build({"TITO_TORCH": "cpu"}, "Linux", "x86_64", gpu=True) == "cpu"


def test_a_kits_jupyterlab_has_no_instructor_extensions_but_validate(tmp_path):
    """What the kit's set-up writes into its venv's etc/jupyter (here a venv of its own, with nbgrader's own server
    config copied in), as JupyterLab's and Jupyter Server's own listings read it: nbgrader's formgrader, course and
    assignment lists off, Validate on; the lab plugins for the menu, Create Assignment and the lists disabled."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    conf = venv / "etc" / "jupyter" / "jupyter_server_config.d"
    conf.mkdir(parents=True)
    shutil.copy(Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "nbgrader.json", conf)
    launcher.kit_jupyter_config(venv)
    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_relative_to(sys.prefix))
    env = {**os.environ, "PYTHONPATH": site, "JUPYTER_CONFIG_DIR": str(tmp_path / "user"),
           "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter")}
    env.pop("JUPYTER_CONFIG_PATH", None)
    py = str(venv / "bin" / "python")

    def listed(module: str) -> str:
        r = subprocess.run([py, "-m", module, "list"], env=env, capture_output=True, text=True, timeout=300)
        return re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)

    server = listed("jupyter_server.extension.serverextension")
    state = dict(re.findall(r"(nbgrader\.server_extensions\.\w+) (enabled|disabled)", server))
    assert state == {"nbgrader.server_extensions.formgrader": "disabled", "nbgrader.server_extensions.course_list":
                     "disabled", "nbgrader.server_extensions.assignment_list": "disabled",
                     "nbgrader.server_extensions.validate_assignment": "enabled"}, server
    lab = listed("jupyterlab.labextensions")
    disabled = set(re.findall(r"^\s+(@jupyter/nbgrader:[\w-]+)$", lab.split("Disabled extensions:")[-1], re.M))
    assert disabled == set(launcher.KIT_DISABLED_LAB) and "validate-assignment" not in lab.split("Disabled")[-1], lab


def test_the_kit_states_the_set_up_the_launcher_states():
    from tito.notebooks import kit

    assert (kit.SETUP_CPU, kit.SETUP_CUDA) == (launcher.SETUP_CPU, launcher.SETUP_CUDA)
    readme = (ROOT / "README.md").read_text()
    assert "`.venv` **1.8 GB**" in readme and "`.venv` **5.9 GB**" in readme
    assert launcher.SETUP_CPU.startswith("~1.8 GB") and launcher.SETUP_CUDA.startswith("~5.9 GB")
