"""Course notebooks as a course hands them out: the nbgrader release of a module with its data
files and reading order (release.py), and the standalone student kit with its leak check (kit.py)."""
