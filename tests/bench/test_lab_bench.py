"""The policy lab benchmark at a small size: it builds its runs, indexes them and prints every
figure it promises (no timing asserted: speed is in docs/performance.md)."""

from __future__ import annotations

import orjson

from bench import lab


def test_the_generated_runs_have_the_promised_shape(tmp_path):
    n = lab.write_runs(tmp_path / "t.jsonl", experiments={"a": 3, "b": 2}, steps=4)
    recs = [orjson.loads(line) for line in (tmp_path / "t.jsonl").read_bytes().splitlines()]
    assert n == len(recs) == 5 * (1 + 4 + 1)
    starts = [r for r in recs if r["type"] == "run_start"]
    assert [len(r["criteria"]) for r in starts] == [5] * 5
    assert all(len(r["actions"]) == 2 and r["tokens"]["total"] > 0 for r in recs if r["type"] == "step")


def test_the_benchmark_prints_its_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lab, "WORK", tmp_path)
    out = lab.main(["--runs", "40", "--frontier-runs", "20", "--steps", "10", "--rounds", "1",
                    "--json", str(tmp_path / "lab.json")])
    printed = capsys.readouterr().out
    for line in ("ingest 60 runs x 10 steps", "indexing 60 runs, once", "one policy, 40 runs, cold, in-process",
                 "frontier, 20 policies, 20 runs, cold", "GET /api/lab, one policy over 40 runs: first response",
                 "GET /api/lab/frontier, 20 policies over 20 runs"):
        assert line in printed, line
    assert out["build"]["indexed"] == 60 and out["policies"] == 20
    assert orjson.loads((tmp_path / "lab.json").read_bytes())["build"]["runs"] == 40
