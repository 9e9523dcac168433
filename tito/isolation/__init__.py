"""Running child processes, and untrusted code and files, shared by tests, grading and the Olympics judge:

    process.py     the one way to start a child: its own process group, capped output, killed as a group
    sandbox.py     what a sandbox runs and its limits, the backend that isolates it, the one registration
    bubblewrap.py  the registered backend: bubblewrap's command line, what it needs, how it is installed
    namespaces.py  one process kept apart inside a sandbox (Linux namespaces, mounts, capabilities)
    procs.py       processes seen from /proc: found, counted, watched, ended (the one /proc walker)
    limits.py      limits on one student's whole sandbox (cgroups, rlimits, the core split) and what is missing
    protocol.py    the one message format over a socket (frames of JSON, never pickle)
    pool.py        per-student tasks N at once here, or on a Dask cluster
    sanitize.py    outputs from a sandbox made safe to store and render
    untrusted.py   files a student handed in, read safely; the one student-id rule
"""
