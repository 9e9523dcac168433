"""`tito test`'s pytest stage (tito.testing.runners.run_pytest): a time limit per test, not per stage, so one
slow test fails alone and every other result counts; progress while it runs; the slowest tests and the JUnit
XML kept afterwards. On a suite of five small tests (two files, two xdist workers)."""

from tito.testing import runners


def test_one_slow_test_fails_alone_with_progress_and_the_slowest_listed(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 4\n")
    (tmp_path / "test_a.py").write_text("import time\ndef test_quick():\n    pass\n"
                                        "def test_sleeps_a_second():\n    time.sleep(1)\n"
                                        "def test_hangs():\n    time.sleep(60)\n")
    (tmp_path / "test_b.py").write_text("def test_fails():\n    assert 1 == 2, 'one is not two'\n"
                                        "def test_passes():\n    pass\n")
    lines: list[str] = []
    report = tmp_path / "reports" / "pytest.xml"
    st = runners.run_pytest([tmp_path], tmp_path, jobs=2, report=report, progress=lines.append)
    assert (st.run, st.passed, st.failed) == (5, 3, 2), st.failures
    failures = " | ".join(st.failures)
    assert "test_hangs" in failures and "Timeout" in failures and "one is not two" in failures
    assert st.seconds < 40  # the 60 s sleep was cut at its own 4 s limit, not the stage's
    assert report.is_file() and "test_sleeps_a_second" in report.read_text()
    assert [t.split("::")[-1] for t, _ in st.slowest[:2]] == ["test_hangs", "test_sleeps_a_second"]
    assert st.slowest[0][1] >= 3.5 and len(st.slowest) == 5  # cut at its limit (JUnit rounds it: 3.998 s once)
    assert lines and lines[-1].startswith("pytest 5/5 done, 2 failed"), lines
    assert any("test_hangs" in line and line.startswith("pytest") and "failed" in line for line in lines)
