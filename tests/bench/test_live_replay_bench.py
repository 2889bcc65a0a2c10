"""The live-verdict benchmark at a small size: it keeps working and prints its figures (no timing asserted)."""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import qita
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


def test_ab_times_each_checkout_and_gives_the_callers_qita_back(tmp_path, capsys):
    here = Path(live_replay.__file__).resolve().parents[1]
    shutil.copytree(here / "qita", tmp_path / "qita")
    live_replay.main(["--runs", "0", "--steps", "5", "--engine-runs", "1", "--samples", "2",
                      "--ab", f"{tmp_path},."])
    out = capsys.readouterr().out
    assert f"engine 5 criteria, {tmp_path}" in out and f"engine 5 criteria, {here}" in out
    assert sys.modules["qita"] is qita  # the rest of the session keeps the same qita objects
