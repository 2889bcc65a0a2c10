"""Small-size runs of every benchmark: they must keep working and print the figures they promise.

No timing is asserted here (speed belongs in bench/ and docs/performance.md).
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import orjson

from bench import gen, qitos_side, server
from bench import ingest as ingest_bench
from qita_board.ingest.lines import check_record


def _records(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_generator_writes_paired_valid_runs(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    size, n = gen.generate(path, runs=4, steps=3, experiments=1, obs_bytes=1000)
    recs = _records(path)
    assert size == path.stat().st_size and n == len(recs)
    assert all(check_record(r) is None for r in recs)
    kinds = Counter(r["type"] for r in recs)
    # per run: 1 run_start, 3 steps, 3 x 5 phase events, 2 criteria, 1 run_end (+ an optional early_stop)
    assert kinds["run_start"] == kinds["run_end"] == 4
    assert kinds["step"] == 12 and kinds["event"] == 60 and kinds["criterion"] == 8
    assert kinds["early_stop"] <= 2  # only smoke runs may stop early
    starts = [r for r in recs if r["type"] == "run_start"]
    assert sorted((r["task_id"], r["variant"]) for r in starts) == [
        ("task-000000", "e2e"), ("task-000000", "smoke"), ("task-000001", "e2e"), ("task-000001", "smoke")]
    step = next(r for r in recs if r["type"] == "step")
    assert len(step["observation"]["screen"]) == 1000 and len(step["critic_outputs"]) == 3


def test_generator_stops_at_target_size(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    size, _ = gen.generate(path, steps=5, target_mb=0.2)
    assert 0.2 * 1024 * 1024 <= size < 0.2 * 1024 * 1024 + 200_000  # stops after the run that crossed it


def test_ingest_benchmark_small(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(ingest_bench, "WORK", tmp_path)
    monkeypatch.setenv("QITA_READER_PROCESS_BYTES", "1")  # the reader process, as for a large file
    res = ingest_bench.main(["--mb", "0.3", "--steps", "5", "--rounds", "2", "--rss-mb", "0.3"])
    t = res["throughput"]
    lines = len((tmp_path / "ingest-0.3mb-5s.jsonl").read_bytes().splitlines())
    assert t["bare"]["records"] == t["floor"]["records"] == t["ours"]["records"] == lines
    assert all(len(t[k]["all_seconds"]) == 2 for k in ("bare", "floor", "ours"))
    assert t["ratio_bare"] > 0 and t["ratio"] > 0
    # the reader process's CPU is counted for ours; the floors have none
    assert all(x > 0 for x in t["ours"]["all_reader_cpu_seconds"])
    assert t["bare"]["all_reader_cpu_seconds"] == t["floor"]["all_reader_cpu_seconds"] == [0.0, 0.0]
    assert res["rss"]["records"] == lines and res["rss"]["hwm"] > 0
    out = capsys.readouterr().out
    for name in ("ingest bare floor: MB/s", "ingest schema floor: MB/s", "ingest ours: records/s",
                 "ingest ratio ours/bare floor", "(target >= 80%)", "ingest ratio ours/schema floor",
                 "peak RSS ingesting", "(target < 250 MiB)", "reader process CPU per round"):
        assert name in out


def test_commands_time_qita_ingest_and_the_floor_script(tmp_path: Path, monkeypatch) -> None:
    """`--commands`: `qita ingest` as a program (it reads every record) against the floor as a script."""
    monkeypatch.setattr(ingest_bench, "WORK", tmp_path)
    trace = tmp_path / "t.jsonl"
    gen.generate(trace, runs=2, steps=4, experiments=1)
    res = ingest_bench.commands(trace, rounds=2)
    assert res["records"] == len(trace.read_bytes().splitlines())
    assert len(res["bare"]) == len(res["ours"]) == 2 and all(x > 0 for x in res["bare"] + res["ours"])
    assert res["ratio_bare"] == statistics.median(b / o for b, o in zip(res["bare"], res["ours"]))


def test_floor_writes_every_row(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    gen.generate(trace, runs=2, steps=4, experiments=1)
    db = ingest_bench.fresh_db(tmp_path, "floor.db")
    ingest_bench.floor_ingest(trace, db)
    import sqlite3

    con = sqlite3.connect(db)
    counts = {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in ("runs", "steps", "critic_outputs", "events")}
    con.close()
    assert counts == {"runs": 2, "steps": 8, "critic_outputs": 24, "events": 40}


def test_bare_floor_has_no_index(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    gen.generate(trace, runs=2, steps=4, experiments=1)
    db = ingest_bench.bare_db(tmp_path, "bare.db")
    assert ingest_bench.floor_ingest(trace, db) == len(trace.read_bytes().splitlines())
    import sqlite3

    con = sqlite3.connect(db)
    kinds = {r[0] for r in con.execute("select type from sqlite_master")}
    n = con.execute("select count(*) from critic_outputs").fetchone()[0]
    con.close()
    assert kinds == {"table"} and n == 24


def test_server_benchmark_small(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(server, "WORK", tmp_path)
    res = server.main(["--runs", "200", "--big-steps", "60", "--pairs", "10", "--n", "2", "--upload-mb", "0.2",
                       "--memory-rounds", "2", "--db", str(tmp_path / "s.db")])
    assert res["build"]["runs"] == 200
    r = res["results"]
    for key in ("overview", "list_first", "list_filtered", "list_search", "list_search_common", "list_deep", "list_api_search",
                "run_first", "run_block", "compare"):
        assert r[key]["n"] >= 2 and r[key]["bytes"] > 0 and r[key]["p95_ms"] >= r[key]["p50_ms"] > 0
    assert r["memory"]["n"] == 20 and not r["memory"]["errors"] and r["memory"]["before"] > 0
    assert len(r["memory_rounds"]) == 2 and all(v > 0 for v in r["memory_rounds"])
    # the 0.2 MB upload is accepted and its job finishes
    assert r["upload"]["status"] in (200, 201, 202) and r["upload"].get("job_state", "done") == "done"
    out = capsys.readouterr().out
    assert "experiments overview, 200 runs p50" in out and "list page, 200 runs, first page p50" in out and "run page, one lazily loaded block p50" in out
    assert "compare page, 10 pairs p50" in out and "upload: ingested" in out and "RSS after each round" in out


def test_qitos_side_by_side(qitos_runs: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(qitos_side, "WORK", tmp_path)
    folder = qitos_runs / "qitos_coding_20260222_045054_877344"
    page = qitos_side.whole_run_page(folder).decode()
    blob = page.split("type='application/json'>", 1)[1].rsplit("</script>", 1)[0]
    data = orjson.loads(blob.replace("<\\/", "</"))
    def lines(name: str) -> int:
        return sum(1 for line in (folder / f"{name}.jsonl").read_bytes().splitlines() if line.strip())

    assert len(data["steps"]) == lines("steps") and len(data["events"]) == lines("events")
    res = qitos_side.main([str(folder), "--n", "2"])
    assert res["theirs"]["bytes"] == len(page.encode()) and res["ours"]["bytes"] > 0
    out = capsys.readouterr().out
    assert "whole run in one page: bytes sent" in out and "qita board /runs/{id}: first response, cold" in out


def test_memory_bench_runs_at_a_small_size() -> None:
    from bench import memory

    res = memory.measure(steps=2, mb=1, concurrency=2)
    assert set(res["results"]) == {"steps block (/api/runs/big/steps?limit=200)", "run page (/runs/big)",
                                   "HTML export", "field view, streamed (/api/…/field)"}
    for r in res["results"].values():
        assert r["idle_mb"] > 0 and r["peak_over_idle_mb"] >= 0


def test_hostile_set_has_a_near_miss_of_every_detector() -> None:
    from bench.hostile import SIZE, near_misses
    from qita_board.secrets import DETECTORS

    cases = list(near_misses())
    assert all(abs(len(text) - SIZE) <= SIZE // 50 + 64 for _name, text in cases)
    blob = "\n".join(text[:200] for _name, text in cases).lower()
    for det in DETECTORS:
        assert any(n in blob for n in det.needles), det.kind
