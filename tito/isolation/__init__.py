"""Running child processes, and untrusted code, shared by tests, grading and the Olympics judge:

    process.py   the one way to start a child: its own process group, capped output, killed as a group
    sandbox.py   a bubblewrap sandbox with per-process limits (the one command builder)
    limits.py    limits on one student's whole sandbox (cgroups, rlimits, the core split) and what is missing
    protocol.py  the one message format over a socket (frames of JSON, never pickle)
    pool.py      per-student tasks N at once here, or on a Dask cluster
    sanitize.py  outputs from a sandbox made safe to store and render
"""
