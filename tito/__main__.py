"""`python3 -m tito ARGS` from the repository root.

Standard library only: this runs under whatever python3 the user has. It first checks that the
interpreter is a supported one (SUPPORTED_PYTHON: the versions the pinned torch, onnxruntime and the
lock publish wheels for, floor Debian 12's 3.11.2) and says what it found and how to get one when not;
it parses on Python 3.6+ so that check can speak. If we are not already running inside
`<repo>/.venv`, create it (first run), install the pinned dependencies, then re-execute
`<repo>/.venv/bin/python -m tito ARGS`.

The grading sandbox (the backend tito.isolation.sandbox registers: bubblewrap, a system package) is
installed when it is missing and we run as root with apt-get (`ensure_installed`); otherwise a notice
says how to install it (`tito grade` refuses without it). A student kit needs neither root nor the
sandbox, so there the check is skipped.

Every transitive dependency is pinned too: requirements.lock is passed to pip as constraints.
A stamp file in .venv holds a hash of pyproject.toml's dependency list, the lock file, the Python
version and the torch build; when it matches, set-up is skipped, so later runs start at once.

Which torch build (`torch_build`): on Linux x86_64 PyPI's torch is the CUDA build (with the nvidia
wheels, about 5.9 GB of .venv); a machine without an NVIDIA GPU gets the CPU build by default, from
PyTorch's CPU-only wheel index (TORCH_CPU_INDEX, or $TITO_TORCH_INDEX: a mirror of it), about 1.8 GB
in all. TITO_TORCH=cuda (or cpu) chooses. When that index cannot be reached, set-up says so and
installs PyPI's build instead. Elsewhere (macOS, Linux on ARM) PyPI's torch is already CPU-only.

In a student kit, nbgrader's instructor extensions (formgrader, create assignment, the course and
assignment lists and its menu) are switched off in the venv's JupyterLab; Validate stays
(`kit_jupyter_config`).
"""
import configparser
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"
STAMP = VENV / "tito-setup.stamp"
LOG = VENV / "tito-setup.log"
LOCK = REPO / "requirements.lock"
TORCH_VERSION = "2.13.0"
TORCH_PIN = f"torch=={TORCH_VERSION}"
EDITABLE_MODE = "editable_mode=compat"
# [floor, ceiling): torch 2.13.0 and onnxruntime 1.32.0 publish CPython wheels for 3.11 to 3.14;
# soupsieve's pin is split at 3.11.5 in the lock; Debian 12's system Python (3.11.2) is the floor
# checked end to end (.ci/run); pyproject.toml's requires-python says the same.
SUPPORTED_PYTHON = ((3, 11, 2), (3, 15))
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TORCH_ENV, TORCH_INDEX_ENV = "TITO_TORCH", "TITO_TORCH_INDEX"
# the set-up's size and time as measured (docs/performance.md, "Set-up": a normal user, no pip configuration, empty
# pip cache, downloading from PyPI on a busy 2-core machine; ~60 s from a local package cache on a quiet one)
SETUP_CPU = "~1.8 GB, 2-8 min"
SETUP_CUDA = "~5.9 GB, 8 min or more"


def python_problem(version=None, executable=None):
    """Why this interpreter cannot run tito (what was found, what is needed, how to get it), or None.

        >>> python_problem((3, 10, 12), "/usr/bin/python3").splitlines()[0]
        'tito: Python 3.10.12 (/usr/bin/python3) is not supported: tito needs CPython 3.11.2 up to 3.14.'
    """
    version = tuple(version or sys.version_info[:3])
    executable = executable or sys.executable
    (low, high) = SUPPORTED_PYTHON
    if low <= version[:3] < high:
        return None
    found = ".".join(map(str, version[:3]))
    need = "CPython {} up to {}.{}".format(".".join(map(str, low)), high[0], high[1] - 1)
    why = ("older than Debian 12's 3.11.2, the oldest Python the course is tested on" if version < low else
           "newer than the pinned torch 2.13.0 publishes wheels for")
    return ("tito: Python {} ({}) is not supported: tito needs {}.\n"
            "  {} is {}.\n"
            "  Get a supported one and run tito with it, e.g. `python3.12 -m tito ...`:\n"
            "    Debian/Ubuntu: sudo apt install python3 python3-venv  (Debian 12: 3.11.2, Ubuntu 24.04: 3.12)\n"
            "    macOS / Windows: the python.org installer of 3.12 or 3.13; or pyenv / uv on any system.\n"
            "  Nothing was created.").format(found, executable, need, found, why)


def venv_problem():
    """Why this interpreter cannot create .venv (Debian and Ubuntu ship venv's pip apart), or None."""
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError as e:
        minor = "{}.{}".format(*sys.version_info[:2])
        return ("tito: this Python ({}) cannot create a virtual environment ({}): install its venv "
                "module, e.g. `sudo apt install python{}-venv` on Debian/Ubuntu, then run tito again."
                .format(sys.executable, e, minor))
    return None


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _in_venv() -> bool:
    try:
        return Path(sys.prefix).resolve() == VENV.resolve()
    except OSError:
        return False


def deps_hash() -> str:
    import tomllib  # after the version check: Python 3.11+

    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    proj = data.get("project", {})
    key = "\n".join([
        f"python={sys.version_info.major}.{sys.version_info.minor}",
        *proj.get("dependencies", []),
        *sorted(f"{k}={v}" for k, v in proj.get("scripts", {}).items()),
        repr(data.get("build-system", {})),
        EDITABLE_MODE,
        f"torch-build={torch_build()}",
        f"kit-jupyter={KIT_DISABLED_LAB + KIT_DISABLED_SERVER if is_student_kit() else ''}",
        LOCK.read_text(encoding="utf-8") if LOCK.exists() else "",
    ])
    return hashlib.sha256(key.encode()).hexdigest()


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU with its driver loaded (the kernel module's /proc entry, a
    /dev/nvidiaN device, or nvidia-smi): what a CUDA build of torch could use."""
    return (os.path.exists("/proc/driver/nvidia/version") or any(Path("/dev").glob("nvidia[0-9]*"))
            or shutil.which("nvidia-smi") is not None)


def torch_build(env=None, system=None, machine=None, gpu=None) -> str:
    """"cpu" (PyTorch's CPU-only index), "cuda" (PyPI's build, CUDA on Linux x86_64) or "pypi" (PyPI's, which is
    CPU-only there anyway: macOS, Windows, Linux on ARM). $TITO_TORCH=cpu|cuda chooses; by default a Linux x86_64
    machine without an NVIDIA GPU gets "cpu".

        >>> torch_build({}, "Linux", "x86_64", gpu=False), torch_build({}, "Linux", "x86_64", gpu=True)
        ('cpu', 'cuda')
        >>> torch_build({"TITO_TORCH": "cuda"}, "Linux", "x86_64", gpu=False), torch_build({}, "Darwin", "arm64")
        ('cuda', 'pypi')
    """
    import platform

    env = os.environ if env is None else env
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    wanted = env.get(TORCH_ENV, "").strip().lower()
    if wanted not in ("", "cpu", "cuda"):
        print(f"tito: {TORCH_ENV}={env.get(TORCH_ENV)!r} is not a torch build: expected cpu or cuda; using the default",
              file=sys.stderr)
        wanted = ""
    if system != "Linux" or machine not in ("x86_64", "amd64"):
        return "pypi"
    if wanted:
        return wanted
    return "cuda" if (has_nvidia_gpu() if gpu is None else gpu) else "cpu"


def index_reachable(url: str, timeout: float = 15.0) -> str | None:
    """None when `url` (a pip index) answers, else why not in a few words."""
    import urllib.error
    import urllib.request

    if url.startswith("file:"):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        return None if Path(url2pathname(urlparse(url).path)).is_dir() else "no such folder"
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout) as r:  # noqa: S310 - an https index
            r.read(1)
        return None
    except (urllib.error.URLError, OSError, ValueError) as e:
        return str(getattr(e, "reason", e))[:200]


def lock_args() -> list[str]:
    "pip's arguments that make requirements.lock its constraints (none in a folder without one)."
    return ["-c", str(LOCK)] if LOCK.exists() else []


def torch_install(py, build: str, log) -> list[list[str]]:
    """The pip commands that install the pinned torch of `build`, saying on stderr (and in the log) what it chose;
    the CPU index falls back to PyPI, loudly, when it cannot be reached."""
    base = [py, "-m", "pip", "install", "--disable-pip-version-check", *lock_args()]
    if build == "cpu":
        index = os.environ.get(TORCH_INDEX_ENV, "").strip() or TORCH_CPU_INDEX
        why = index_reachable(index)
        if why is None:
            # +cpu: only that index has it, so pip cannot pick PyPI's CUDA build of the same version
            say(f"tito: torch {TORCH_VERSION}, CPU build, from {index} (no NVIDIA GPU here; {TORCH_ENV}=cuda "
                f"chooses the CUDA build)", log)
            return [[*base, "--extra-index-url", index, f"torch=={TORCH_VERSION}+cpu"]]
        say(f"tito: PyTorch's CPU-only index {index} cannot be reached ({why}): installing torch {TORCH_VERSION} "
            f"from PyPI instead (or the index or wheel folder your pip is set to use), which on Linux x86_64 is the "
            f"CUDA build ({SETUP_CUDA} instead of {SETUP_CPU}). Set {TORCH_INDEX_ENV} to a mirror of that index, or "
            "run again when it can be reached (delete .venv first)", log)
    elif build == "cuda":
        say(f"tito: torch {TORCH_VERSION} from PyPI, the CUDA build ({SETUP_CUDA}; {TORCH_ENV}=cpu chooses the "
            "CPU build)", log)
    # a CPU build installed before satisfies the pin too: it goes first when another build is chosen (and stays
    # when it is the one wanted and only its index is out of reach)
    drop = [[py, "-m", "pip", "uninstall", "-y", "torch"]] if build != "cpu" and _installed_torch(py).endswith("+cpu") \
        else []
    return [*drop, [*base, TORCH_PIN]]


def _installed_torch(py) -> str:
    "The torch version installed in the venv (`2.13.0+cpu`), \"\" when none."
    r = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def say(text: str, log=None) -> None:
    print(text, file=sys.stderr, flush=True)
    if log is not None:
        log.write(text + "\n")
        log.flush()


# nbgrader's JupyterLab plugins and server extensions a student has no use for (they are the instructor's:
# making assignments, the formgrader, the exchange's course and assignment lists); Validate stays
KIT_DISABLED_LAB = ["@jupyter/nbgrader:menu", "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader",
                    "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list"]
KIT_DISABLED_SERVER = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list",
                       "nbgrader.server_extensions.assignment_list"]


def kit_jupyter_config(prefix: Path) -> list[Path]:
    """In PREFIX/etc/jupyter (the venv's), switch nbgrader's instructor extensions off for JupyterLab (a
    labconfig/page_config.json and a server config read after nbgrader's own); returns the files written."""
    import json

    etc = Path(prefix) / "etc" / "jupyter"
    page = etc / "labconfig" / "page_config.json"
    server = etc / "jupyter_server_config.d" / "zz-tito-student-kit.json"  # read after nbgrader.json
    try:
        have = json.loads(page.read_text(encoding="utf-8")) if page.exists() else {}
    except ValueError:
        have = {}
    have.setdefault("disabledExtensions", {}).update({k: True for k in KIT_DISABLED_LAB})
    for path, data in ((page, have), (server, {"ServerApp": {"jpserver_extensions": {k: False for k in KIT_DISABLED_SERVER}}})):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return [page, server]


def _run_logged(cmd, log) -> None:
    log.write(f"\n$ {' '.join(map(str, cmd))}\n")
    log.flush()
    r = subprocess.run([str(c) for c in cmd], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise RuntimeError(f"command failed (exit {r.returncode}): {' '.join(map(str, cmd))}")


def setup_venv() -> None:
    want = deps_hash()
    if STAMP.exists() and STAMP.read_text().strip() == want and _venv_python().exists():
        return
    first = not _venv_python().exists()
    build = torch_build()
    size = SETUP_CUDA if build == "cuda" else SETUP_CPU
    print(f"tito: setting up .venv (first run: {size}, the time mostly downloads)..." if first
          else "tito: dependencies changed, updating .venv...", file=sys.stderr, flush=True)
    if first:
        problem = venv_problem()
        if problem:
            print(problem, file=sys.stderr)
            sys.exit(1)
        import venv
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    STAMP.unlink(missing_ok=True)
    py = _venv_python()
    try:
        with open(LOG, "w", encoding="utf-8") as log:
            # the lock's pip before anything else: a venv's own pip (23.x from Python 3.11's ensurepip and Debian's)
            # takes ~2.5x the CPU of pip 26 to resolve the lock (28 vs 11 CPU-s, docs/performance.md, "Set-up")
            _run_logged([py, "-m", "pip", "install", "--disable-pip-version-check", *lock_args(), "pip"], log)
            # torch first and pinned, of the chosen build: an unpinned resolve pulls a multi-GB CUDA build
            for cmd in torch_install(py, build, log):
                _run_logged(cmd, log)
            got = _installed_torch(py)
            say(f"tito: torch {got} installed ({'the CPU build' if got.endswith('+cpu') else 'not the CPU build'})", log)
            # compat mode: a .pth puts the repo root on sys.path, so packages exported after
            # set-up (tinytorch/ on a fresh course) are importable from notebooks' kernels too
            _run_logged([py, "-m", "pip", "install", "--disable-pip-version-check", *lock_args(), "-e", ".",
                         "--config-settings", EDITABLE_MODE], log)
            if is_student_kit():
                kit_jupyter_config(VENV)
    except (RuntimeError, OSError) as e:
        print(f"tito: set-up failed: {e}", file=sys.stderr)
        try:
            tail = LOG.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            print("---- last lines of " + str(LOG) + " ----", file=sys.stderr)
            print("\n".join(tail), file=sys.stderr)
        except OSError:
            pass
        sys.exit(1)
    STAMP.write_text(want + "\n")
    print(f"tito: .venv ready (log: {LOG.relative_to(REPO)})", file=sys.stderr, flush=True)


def is_student_kit() -> bool:
    """True in a student kit (`tito release N --student-kit`): settings.ini names its module as `kit`."""
    cfg = configparser.ConfigParser()
    try:
        cfg.read(REPO / "settings.ini", encoding="utf-8")
    except (OSError, configparser.Error):
        return False
    return bool(cfg.get("course", "kit", fallback="").strip())


def main() -> None:
    problem = python_problem()
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
    if _in_venv() or os.environ.get("TITO_NO_BOOTSTRAP"):
        from tito.cli import main as cli_main
        sys.exit(cli_main())
    setup_venv()
    if not is_student_kit():  # students never grade: no sandbox, no root needed
        from tito.isolation.sandbox import registered  # standard library only, as this launcher
        registered().ensure_installed(VENV)
    py = _venv_python()
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(VENV)
    env["PATH"] = str(py.parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONHOME", None)
    # the current folder is kept: workspaces are found from it and relative paths (--model mine.pt)
    # are the user's; the venv's editable install makes `tito` importable from anywhere
    os.execve(str(py), [str(py), "-m", "tito", *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
