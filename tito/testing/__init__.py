"""Running the course's tests, for `tito test` and `tito module complete`:

    runners.py        pytest, inline tests and notebooks as stages with counts, seconds and failures
    inline_runner.py  a module source's inline tests in one process (or a job server), as JSON
    needs.py          which exported modules each integration test file uses
"""
