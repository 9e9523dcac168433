"""Running the course's tests, for `tito test` and `tito module complete`:

    runners.py        pytest, inline tests and notebooks as stages with counts, seconds and failures
    inline_runner.py  a module source's inline tests, run in children forked from a job server, as JSON
    needs.py          which exported modules each integration test file uses
    job_server.py     the job server's owner side: files' inline tests and pytest runs in forked children
    kept_server.py    that server kept between `module complete` runs, a session per run
    wire.py           the one request both forking servers read: length, JSON, file descriptors
    kernels.py        notebook kernels forked from a server that imported torch & co once
"""
