"""`tito olympics judge`: every student's model measured by the instructor, on one machine, in one run.

The rules (each event's score with its interval, ranks by the one significance rule, the one-sided claim check,
the one model size `model_file_bytes`) are the library's: `tinytorch.benchmarking.olympics`. Here:
- `server`: runs INSIDE a sandbox, one process per model: loads that model's bytes (TorchScript or ONNX; a
  converting sandbox traces a pickled module first) and answers the judge's requests with data only;
- `records`: the records a model file's size counts (the only bytes a measuring process is sent) and bounded
  signatures of every tensor they hold (taken in the sandbox, for the copy checks);
- `sandboxes`: one student's sandboxes seen from the judge: started, spoken to, watched from /proc, their cost counted;
- `inputs`: every image the judge sends, drawn from one secret seed per run (the audit pool, the rounds' streams);
- `judge`: the instructor's run, by job: `staging` (each student's files found and copied, the work folder),
  `measure` (models loaded, the accuracy pass, hashes, sizes, every answer checked as data), `rounds` (latency timed
  from outside the sandbox in interleaved rounds, the audits' requests), `groups` (the class in groups that fit the
  memory budget, the state for --resume), `report` (figures, flags, copies, the boards written);
- `audits`: the MLPerf-style audits (no caching, TEST01), decided by the library's rule;
- `claims`: a submission's claims and the timed calls' answers, read against the judge's measurements;
- `copies`: students with the same model (forensic distances and their thresholds);
- `leaderboard`: the judged leaderboard and the claims' leaderboard, written (every student's text escaped).
"""
