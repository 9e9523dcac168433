"""Course notebooks as a course hands them out: the nbgrader release of a module with its data
files and reading order (student_release.py), nbgrader's course directory and commands with named solution
stubs (nbgrader_glue.py, named_stubs.py, clear_solutions.py), the standalone student kit with its
leak check (kit.py), and a notebook's cells and export targets read as plain JSON (cells.py, exports.py)."""
