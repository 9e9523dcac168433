"""`tito olympics judge`: every student's model measured by the instructor, on one machine, in one run.

- `server`: runs INSIDE a sandbox, one per student: loads that student's model files (unpickling runs
  their code, so nowhere else) and answers the judge's requests with data only.
- `judge`: the instructor's side: stages the files, starts the sandboxes, measures (outputs, weights,
  latency timed from outside the sandbox in interleaved rounds) and writes the outputs;
- `scoring`: the arithmetic on those measurements (scores, ranks by the library's significance rule,
  claims, same-model pairs, the leaderboard).
"""
