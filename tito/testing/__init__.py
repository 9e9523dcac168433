"""Running the course's tests, for `tito test` and `tito module complete`:

    runners.py        pytest, inline tests and notebooks as stages with counts, seconds and failures
    inline_runner.py  a module source's inline tests in one process (or a job server), as JSON
    needs.py          which exported modules each integration test file uses
    job_server.py     the job server's owner side: files' inline tests and pytest runs in forked children
    kernels.py        notebook kernels forked from a server that imported torch & co once
"""
