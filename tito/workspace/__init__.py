"""The student workspace: `tito module start N` (start.py), `tito module complete N` (complete.py) and
`tito module submit N` (submit.py: WORKSPACE/NN_name-<student>.zip, the hand-in).

Workspace layout (WORKSPACE defaults to settings.ini workspace_dir, or --workspace DIR):

    WORKSPACE/NN_name/*.ipynb             the student's notebooks (a copy of the release)
    WORKSPACE/NN_name/data/...            data files of the release
    WORKSPACE/NN_name/.tito-workspace.json  marker written by `module start`
    WORKSPACE/NN_name/progress.json       written by `module complete`: counts, first failure, history
    WORKSPACE/tinytorch/                  the student's package, rebuilt by `module complete`:
                                          a copy of the course's tinytorch/ with the modules of
                                          every notebook in the workspace's started modules
                                          re-exported (nbdev) from the student's notebooks
    WORKSPACE/.tito/                      scratch (converted scripts, integration test copies)

`module complete` (tito.workspace.complete) runs: [1] the export into WORKSPACE/tinytorch, [2] the inline
tests of each notebook changed since it last passed (tito.testing.inline_runner; `import tinytorch` is the
student's package), [3] the integration tests (tests/test_NN_*.py copied from the course, run with
WORKSPACE first on sys.path and cwd = WORKSPACE; a conftest checks that) of every notebook that
passed, then a report per notebook and task. WORKSPACE/.tito/complete-cache.json holds the cache.
"""
