import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def course():
    from tito.config import Course
    return Course.load(ROOT)


def pytest_configure(config):
    # a test that executes whole notebooks takes minutes: this marker lets a run leave it out
    config.addinivalue_line("markers", "lesson: executes whole notebooks with nbclient (slow; -m 'not lesson' skips)")


@pytest.fixture()
def agg_backend(monkeypatch):
    "Notebooks executed by tests draw with matplotlib's Agg backend, and not in nbdev's test mode."
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("IN_TEST", raising=False)


# ---- the course repository only: a student kit's conftest ends here (tito.notebooks.kit.kit_conftest) ----

# `module complete` keeps its job server for the next run (tito.testing.kept_server): a test's workspace is gone when
# the test ends, so its server would only wait out its keep time. The tests that keep one say so, and stop it.
os.environ["TITO_KEEP_SERVER"] = "0"

@pytest.fixture(scope="session")
def lesson_kernels():
    """NotebookClient's kernel arguments for the notebooks the lesson's tests execute: each kernel forked by one
    server per test process (tito.testing.kernels), torch & co imported there once, not in every kernel."""
    from tito.testing.kernels import KernelServer

    with KernelServer() as server:
        yield server.client_args()


@pytest.fixture(scope="session")
def bwrap():
    """The sandbox backend (bubblewrap, which loads the seccomp filter): the sandbox tests FAIL (never skip)
    without it, saying how to get it."""
    from tito.isolation import sandbox

    box = sandbox.find()
    if box is None:
        pytest.fail(sandbox.registered().install_hint)
    return box


# `tito test` runs pytest through pytest-xdist with each file in one worker (`--dist loadfile
# --no-loadscope-reorder`), handing files out in collection order: the longest go first, so that no
# worker is left with one of them at the end while the other idles. Seconds: the sum of each file's test
# times (setup + call + teardown) in the quiet fresh-clone run of 98bc489 (2 workers, 2026-11-29, JUnit XML;
# docs/performance.md "Issue 43, round 3"); a file not named here goes after these, in collection order.
LONGEST_FIRST = {"test_grading.py": 168, "test_grading_module19.py": 147, "test_student_kit.py": 138,
                 "test_grading_hostile.py": 126, "test_olympics_judge.py": 120, "test_python_support.py": 97,
                 "test_lesson.py": 90, "test_olympics_attacks.py": 90, "test_olympics_cli.py": 77,
                 "test_student_workflow.py": 50, "test_class_gradebook.py": 50, "test_toolchain.py": 25,
                 "test_olympics_groups.py": 19, "test_lesson_timing.py": 18, "test_lesson_mutations.py": 18,
                 "test_grading_limits.py": 16, "test_cli.py": 15, "test_seed_contract_tinymlperf.py": 14,
                 "test_olympics_onnx.py": 13, "test_lesson_written.py": 12, "test_19_runtimes.py": 11}


@pytest.fixture(scope="session")
def release_19(course, tmp_path_factory):
    """Module 19's student release (tito release: nbgrader, the leak check), built once per test run for every
    worker (tests/shared_fixtures.py); read it, never write into it."""
    from shared_fixtures import release_once

    return release_once(course, "19_benchmarking", tmp_path_factory)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -LONGEST_FIRST.get(item.path.name, 0))  # stable: a file's tests keep their order
