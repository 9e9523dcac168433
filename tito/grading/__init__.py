"""Grading: student code runs in a sandboxed host, the tests run in a judge that never runs it
(the sandbox, its limits, the message protocol and the pool of jobs are tito.isolation's).

    classrun    the class: submissions, template, parallel/Dask pool, publishing, grades.csv, statuses
    handin      the students' hand-ins (module submit's archives, Canvas and Moodle downloads) unpacked as hostile
    per_student  one student: files, the judge, the score, autograded notebooks and feedback
    autograder  the judge, a trusted process: runs the tests (hidden ones too) against proxies and decides
    remote      the judge's proxies of the student's objects
    host        runs in the sandbox: the zygote, a test server and a feedback run per notebook
    plan        what the judge, the host and the feedback run execute, read from the notebooks
    package     the student's export of a notebook's module over the byte-compiled reference
    gradebook   nbgrader glue: the run's assignment template
    course_dir  the class's nbgrader course directory (one gradebook, formgrader)
    formgrader_server  nbgrader's formgrader on that directory: a private Jupyter server
    final_grades  final grades: autograded + hand-graded points, feedback with comments
"""
