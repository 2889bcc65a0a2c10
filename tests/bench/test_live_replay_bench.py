"""The live-verdict benchmark at a small size: it keeps working and prints its figures (no timing asserted)."""

from __future__ import annotations

import random

from bench import live_replay


def test_synthetic_runs_have_the_promised_shape():
    steps = live_replay.synthetic_steps(random.Random(1), 50)
    assert len(steps) == 50 and all(len(calls) == 2 for calls in steps)
    assert {c["name"] for calls in steps for c in calls} <= {"bash", "edit", "skill"}


def test_benchmark_prints_its_figures(capsys):
    live_replay.main(["--runs", "20", "--steps", "10", "--engine-runs", "2"])
    out = capsys.readouterr().out
    for line in ("replay 20 runs x 10 steps, 5 criteria", "replay throughput", "engine 2 runs x 10 steps, 5 criteria",
                 "engine throughput"):
        assert line in out
