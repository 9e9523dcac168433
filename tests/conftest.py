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
    # tests/test_lesson.py: executes every Module 19 notebook (release and solutions), minutes
    config.addinivalue_line("markers", "lesson: executes whole notebooks with nbclient (slow; -m 'not lesson' skips)")


@pytest.fixture()
def agg_backend(monkeypatch):
    "Notebooks executed by tests draw with matplotlib's Agg backend, and not in nbdev's test mode."
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("IN_TEST", raising=False)
