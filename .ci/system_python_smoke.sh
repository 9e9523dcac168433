#!/usr/bin/env bash
# Where students and instructors are (issue 29): as an unprivileged user, with the system's own
# python3 (Debian 12: 3.11.2, the supported floor), from a clone of this repository:
#   the README's set-up + `tito benchmark` on the bundled default,  `tito release 19` and a student kit,
#   in the kit (without bubblewrap on PATH): `module start`, `module complete` with one notebook done,
#   then with all done, `olympics submit` and `olympics verify`,  and `tito grade 19` of a two-student class.
# Run as root (it creates the user); prints one line per step and exits non-zero on the first failure.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY=/usr/bin/python3
U=${TITO_SMOKE_USER:-tito-smoke}
"$PY" -c 'import sys; print("system python:", sys.version.split()[0])'
id "$U" >/dev/null 2>&1 || useradd -m -s /bin/bash "$U"
H=$(getent passwd "$U" | cut -d: -f6)
command -v bwrap >/dev/null || { apt-get install -y bubblewrap >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y bubblewrap >/dev/null; }; }
# everything a run writes under the home goes first: a gradebook left by an earlier run (older graded cells)
# refuses the grade step, as it should for an instructor
rm -rf "$H/course" "$H/kit" "$H/subs" "$H/nobwrap" "$H/grades" "$H/bench" "$H/expected.txt" "$H/one.log" "$H/step.log"
git clone -q "$REPO" "$H/course"
chown -R "$U:" "$H"

# the user's environment: theirs, not ours (pip's settings, e.g. a local wheel folder, pass through)
as_user() {
  local envs=(HOME="$H" USER="$U" LOGNAME="$U" LANG=C.UTF-8 PATH="${UPATH:-/usr/local/bin:/usr/bin:/bin}")
  while IFS='=' read -r k v; do [[ $k == PIP_* ]] && envs+=("$k=$v"); done < <(env)
  runuser -u "$U" -- env -i "${envs[@]}" bash -c "$1"
}
step() { local t0=$SECONDS; echo "smoke: $1 ..."; as_user "$2" > "$H/step.log" 2>&1 || { echo "smoke: FAILED: $1"; tail -n 60 "$H/step.log"; exit 1; }; echo "smoke: ok: $1 ($((SECONDS - t0)) s)"; }

step "set-up and benchmark the bundled default (README)" \
  "cd ~/course && $PY -m tito benchmark --runs 5 --quiet --output-dir ~/bench && test -s ~/bench/results.json && test -s ~/bench/benchmark_report.md"
step "release 19 and its student kit" \
  "cd ~/course && $PY -m tito release 19 && $PY -m tito release 19 --student-kit ~/kit"

# the student side, without bubblewrap: a PATH of everything in /usr/bin but bwrap
mkdir -p "$H/nobwrap"
for f in /usr/bin/*; do [ "$(basename "$f")" = bwrap ] || ln -sf "$f" "$H/nobwrap/"; done
chown -R "$U:" "$H/nobwrap"
UPATH="$H/nobwrap" step "kit: module start 19 (kit set-up)" \
  "cd ~/kit && ! command -v bwrap && $PY -m tito module start 19"
SOL="$H/course/nbs/19_benchmarking"
FIRST=$(as_user "cd ~/course && .venv/bin/python -c 'from tito.config import Course; print(Course.load().reading_order(\"19_benchmarking\")[0])'")
UPATH="$H/nobwrap" step "kit: module complete 19 with one notebook ($FIRST) done" \
  "cd ~/kit/19_benchmarking && cp $SOL/$FIRST.ipynb . && { $PY -m tito module complete 19 > ~/one.log 2>&1; test \$? = 1; } && grep -E '^ *[0-9]+[.] $FIRST[.]ipynb: passed' ~/one.log"
UPATH="$H/nobwrap" step "kit: module complete 19 with every notebook done, olympics submit and verify" \
  "cd ~/kit/19_benchmarking && cp $SOL/*.ipynb . && $PY -m tito module complete 19 && $PY -m tito olympics submit --runs 3 && $PY -m tito olympics verify submission.json --runs 6"
# both runs of module complete in the kit were sessions of one kept job server (tito.testing.kept_server); it is
# stopped here, not left to wait out its 15 minutes beside the test suite
step "kit: one job server kept for both module complete runs" \
  "cd ~/kit && test \"\$(.venv/bin/python -c 'from tito.testing import kept_server; print(len(kept_server.running(\".\")))')\" = 1"
pkill -u "$U" -f tito.testing.kept_server || true
UPATH="$H/nobwrap" step "kit: module submit 19 (the hand-in archive)" \
  "cd ~/kit/19_benchmarking && $PY -m tito module submit 19 --student smoke && test -s ~/kit/19_benchmarking-smoke.zip"
step "grade 19: a three-student class (full, partial, and the kit's hand-in archive)" \
  "cd ~/course && .venv/bin/python tests/fixtures/submissions.py 19 ~/subs > ~/expected.txt && rm -rf ~/subs/broken && cp ~/kit/19_benchmarking-smoke.zip ~/subs/ && $PY -m tito grade 19 ~/subs --jobs 2 --output-dir ~/grades && .venv/bin/python .ci/check_grades.py ~/expected.txt ~/grades/grades.csv full partial && .venv/bin/python -c \"import csv, sys; t = {r['student']: r['score'] for r in csv.DictReader(open(sys.argv[1])) if r['notebook'] == '(total)'}; sys.exit(0 if t['smoke'] == t['full'] else 'the kit hand-in scored %s, the solutions %s' % (t['smoke'], t['full']))\" ~/grades/grades.csv"
echo "smoke: all steps passed as $U with $($PY --version)"
