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
# worker is left with one of them at the end while the other idles (sum of each file's test seconds,
# 2 workers, busy machine, 2026-11-29; the order is what matters; the grading files scaled by their
# measured before/after ratio when their classes came to share one release and template per run)
LONGEST_FIRST = {"test_grading.py": 420, "test_grading_hostile.py": 200,
                 "test_grading_module19.py": 230,  # the two Module 19 runs, out of test_grading.py (s43g: 162 + 36 s quiet)
                 # s43o (issue 43): each file's 2026-11-29 sum less the seconds of the runs it no longer makes
                 # (judge: the --resume of its whole class, now proved in test_olympics_groups; python_support: the
                 # five pip resolutions at once; lesson_mutations: one `module complete`; cli: one submit)
                 "test_olympics_judge.py": 331,
                 "test_olympics_attacks.py": 210,  # issue 42's attack class (2 judge runs), 2026-11-29
                 "test_lesson.py": 289, "test_student_kit.py": 250, "test_python_support.py": 150,
                 "test_student_workflow.py": 171, "test_olympics_cli.py": 150,
                 "test_grading_limits.py": 75, "test_class_gradebook.py": 119, "test_olympics_groups.py": 105,
                 "test_lesson_mutations.py": 102, "test_lesson_timing.py": 99, "test_toolchain.py": 65, "test_cli.py": 58}


@pytest.fixture(scope="session")
def release_19(course, tmp_path_factory):
    """Module 19's student release (tito release: nbgrader, the leak check), built once per test run for every
    worker (tests/shared_fixtures.py); read it, never write into it."""
    from shared_fixtures import release_once

    return release_once(course, "19_benchmarking", tmp_path_factory)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -LONGEST_FIRST.get(item.path.name, 0))  # stable: a file's tests keep their order
