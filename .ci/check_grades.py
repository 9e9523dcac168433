"""`python .ci/check_grades.py EXPECTED_TXT GRADES_CSV STUDENT...`: each student's (total) row in grades.csv
holds the points tests/fixtures/submissions.py printed for them (autograded score plus the written answers
left for the instructor: `manual_pending`). Exit 1, naming the student, on any difference."""
import csv
import re
import sys

expected_txt, grades_csv, *students = sys.argv[1:]
with open(expected_txt, encoding="utf-8") as f:
    expected = {m.group(1): float(m.group(2)) for m in re.finditer(r"/([^/\s]+): expected score ([\d.]+)", f.read())}
with open(grades_csv, newline="", encoding="utf-8") as f:
    rows = {r["student"]: r for r in csv.DictReader(f) if r["notebook"] == "(total)"}
bad = []
for s in students:
    r = rows.get(s)
    got = None if r is None else float(r["score"]) + float(r["manual_pending"] or 0)
    print(f"{s}: expected {expected.get(s)}, graded {got} ({r and r['score']} autograded, sandbox {r and r['sandbox']})")
    if got is None or got != expected.get(s):
        bad.append(s)
sys.exit(f"grades differ for {bad}" if bad else 0)
