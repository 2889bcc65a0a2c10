"""The early-stop policy lab: replay stop policies over recorded full runs.

- `state`: a finished run as the lab needs it (first live decisions, cumulative figures),
  computed once from its records with `qita.live`;
- `index`: that state kept in the store (`lab_runs`, `lab_decisions`), off the ingest
  path, by a background indexer and by the CLI;
- `sim`: a policy over a set of runs (pure functions), summarised as compare does;
- `frontier`, `calibration`, `validate`: candidate policies, criteria across the store,
  simulated smoke against recorded smoke;
- `queries`: bulk reads; `view`: what the page, the JSON twin and `qita whatif` show;
  `export`: Markdown.

docs/lab.md says what every figure means.
"""
