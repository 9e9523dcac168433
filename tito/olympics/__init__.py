"""`tito olympics judge`: every student's model measured by the instructor, on one machine, in one run.

The rules (each event's score with its interval, ranks by the one significance rule, the one-sided claim check,
the one model size `model_file_bytes`) are the library's: `tinytorch.benchmarking.olympics`. Here:
- `server`: runs INSIDE a sandbox, one per student: loads that student's model files (unpickling runs
  their code, so nowhere else) and answers the judge's requests with data only.
- `judge`: the instructor's side: stages the files, starts the sandboxes, measures (outputs, weights,
  latency timed from outside the sandbox in interleaved rounds) and writes the outputs;
- `claims`: a submission's claims and the timed calls' answers, read against the judge's measurements;
- `copies`: students with the same model (forensic distances and their thresholds);
- `leaderboard`: the judged leaderboard and the claims' leaderboard, written.
"""
