"""The list's index-friendly paging and its cached figures give the same answers as the plain run_list."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlmodel import Session

from qita_board.queries import run_list
from tests.conftest import write_jsonl

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _runs(tmp_path: Path) -> Path:
    """7 runs: r0..r4 start at T0+k minutes with 10*k steps; r5, r6 have no run_start (no started_at)."""
    recs = []
    for k in range(5):
        rid = f"r{k}"
        recs.append({"type": "run_start", "run_id": rid, "ts": (T0 + timedelta(minutes=k)).isoformat(),
                     "experiment": "e", "variant": "smoke" if k % 2 else "e2e"})
        recs.append({"type": "step", "run_id": rid, "step": 0})
        recs.append({"type": "run_end", "run_id": rid, "status": "completed", "stop_reason": "final",
                     "verdict": "pass" if k < 3 else "fail", "steps": 10 * k})
    recs.append({"type": "step", "run_id": "r5", "step": 0})
    write_jsonl(tmp_path / "runs.jsonl", recs)
    # r6 in a later file, so it is created after r5 (ids break ties between runs without a start)
    write_jsonl(tmp_path / "runs2.jsonl", [{"type": "step", "run_id": "r6", "step": 0}])
    return tmp_path


def _ids(engine, **kw) -> list[str]:
    with Session(engine) as s:
        rows, _ = run_list.list_runs(s, filters=run_list.RunFilters(**kw))
    return [r["run_id"] for r in rows]


def test_paging_orders_nulls_last_in_both_orders(tmp_path, ingest, engine) -> None:
    folder = _runs(tmp_path)
    assert ingest(folder / "runs.jsonl").ok and ingest(folder / "runs2.jsonl").ok
    # started: r4 newest ... r0 oldest, then the two without a start (ties by id: r5 was created before r6)
    assert _ids(engine, limit=10) == ["r4", "r3", "r2", "r1", "r0", "r6", "r5"]
    assert _ids(engine, order="asc", limit=10) == ["r0", "r1", "r2", "r3", "r4", "r5", "r6"]
    # pages that straddle the boundary between runs with and without a start time
    assert _ids(engine, offset=3, limit=3) == ["r1", "r0", "r6"]
    assert _ids(engine, offset=5, limit=3) == ["r6", "r5"]
    assert _ids(engine, offset=9, limit=3) == []
    assert _ids(engine, sort="run_id", order="asc", offset=2, limit=2) == ["r2", "r3"]
    assert _ids(engine, sort="steps", limit=3) == ["r4", "r3", "r2"]
    assert _ids(engine, variant="smoke", limit=5) == ["r3", "r1"]


def test_cached_figures_follow_new_data(tmp_path, ingest, engine) -> None:
    assert ingest(_runs(tmp_path) / "runs.jsonl").ok
    f = run_list.RunFilters(experiment="e")
    with Session(engine) as s:
        first = run_list.run_stats(s, filters=f)
        first["runs"] = -1  # a caller changing its copy must not change the cache
        again = run_list.run_stats(s, filters=f)
        assert (again["runs"], again["passed"], again["failed"]) == (5, 3, 2)
        assert run_list.list_runs(s, filters=f)[1] == 5
        assert "f" not in run_list.facet_values(s)["experiment"]
    write_jsonl(tmp_path / "more.jsonl", [
        {"type": "run_start", "run_id": "r9", "experiment": "f"},
        {"type": "run_start", "run_id": "r8", "experiment": "e"},
        {"type": "run_end", "run_id": "r8", "verdict": "fail"}])
    assert ingest(tmp_path / "more.jsonl").ok
    with Session(engine) as s:
        later = run_list.run_stats(s, filters=f)
        assert (later["runs"], later["passed"], later["failed"]) == (6, 3, 3)
        assert run_list.list_runs(s, filters=f)[1] == 6
        assert run_list.facet_values(s)["experiment"] == ["e", "f"]


def test_sweep_refreshes_cached_states(tmp_path, ingest, engine, settings) -> None:
    write_jsonl(tmp_path / "live.jsonl", [{"type": "run_start", "run_id": "live", "ts": datetime.now(timezone.utc).isoformat()}])
    assert ingest(tmp_path / "live.jsonl").ok
    with Session(engine) as s:
        assert run_list.run_stats(s, filters=run_list.RunFilters())["running"] == 1
    from qita_board import derive

    with engine.begin() as conn:
        assert derive.sweep_abandoned(conn, now=datetime.now(timezone.utc) + timedelta(days=1), abandon_after_s=60) == 1
    with Session(engine) as s:
        assert run_list.run_stats(s, filters=run_list.RunFilters())["running"] == 0
