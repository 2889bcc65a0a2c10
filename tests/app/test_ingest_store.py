"""Applying a batch (app/ingest/store.py): run starts, ends, criterion results, early stops
and last-seen times are written for the whole batch at once, and what they leave is what
applying the same records one transaction each leaves, down to the warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.app.test_ingest_reader import _ingest, _settings
from tests.conftest import write_jsonl


def tricky() -> list[dict[str, Any]]:
    """Records of several runs whose order inside one batch matters."""
    out: list[dict[str, Any]] = []
    # a provisional start, then the full one (which takes its place without a warning), then
    # a different one (ignored, with a warning); a criterion id declared twice
    out.append({"type": "run_start", "run_id": "a", "provisional": True, "task_id": "t-prov",
                "criteria": [{"id": "tests"}]})
    out.append({"type": "run_start", "run_id": "a", "task_id": "t1", "tags": ["x", "y", "x"],
                "criteria": [{"id": "tests", "pass_threshold": 0.5}, {"id": "style", "gating": False},
                             {"id": "tests", "description": "declared again"}]})
    out.append({"type": "run_start", "run_id": "a", "task_id": "other"})
    # results: a declared criterion, two undeclared ones (placed after, in the order read), one read twice
    out.append({"type": "criterion", "run_id": "a", "id": "tests", "passed": False})
    out.append({"type": "criterion", "run_id": "a", "id": "extra-1", "score": 0.2})
    out.append({"type": "criterion", "run_id": "a", "id": "extra-2", "score": 0.7})
    out.append({"type": "criterion", "run_id": "a", "id": "tests", "passed": True})
    out.append({"type": "step", "run_id": "a", "step": 0, "ts": "2026-01-05T09:00:00Z"})
    # two different ends: the later one is used, with a warning; the same end again says nothing
    out.append({"type": "run_end", "run_id": "a", "stop_reason": "final", "status": "completed"})
    out.append({"type": "run_end", "run_id": "a", "stop_reason": "final_result", "status": "failed",
                "ts": "yesterday"})
    out.append({"type": "run_end", "run_id": "a", "stop_reason": "final_result", "status": "failed",
                "ts": "yesterday"})
    # a run with a result before its start, early stops read twice, an end with a negative time
    out.append({"type": "criterion", "run_id": "b", "id": "tests", "score": 1.5})
    out.append({"type": "run_start", "run_id": "b", "criteria": [{"id": "tests"}, {"id": "lint"}],
                "early_stop": {"enabled": True}})
    out.append({"type": "early_stop", "run_id": "b", "reason": "first", "armed_criteria": ["tests"], "step": 1})
    out.append({"type": "early_stop", "run_id": "b", "reason": "decided", "armed_criteria": ["tests"], "step": 2})
    out.append({"type": "run_end", "run_id": "b", "stop_reason": "early_stop", "elapsed_s": -3})
    # a run with events only (no time anywhere: last seen is the arrival time)
    out.append({"type": "event", "run_id": "c", "phase": "ACT"})
    return out


def _sorted_warnings(rows: list[str]) -> list[dict[str, Any]]:
    """Rows with a run's warnings as a sorted list: a batch says those about times and
    numbers before those about order, one record per transaction says them as read."""
    out = []
    for row in map(orjson.loads, rows):
        if row.get("warnings"):
            row["warnings"] = sorted(orjson.loads(row["warnings"]))
        out.append(row)
    return out


def _warnings(report: Any) -> list[str]:
    return sorted(w["message"] for w in report.to_json()["warnings"])


def test_a_batch_applied_at_once_leaves_what_one_record_per_transaction_leaves(tmp_path: Path, migrated_sqlite):
    path = write_jsonl(tmp_path / "t.jsonl", tricky())
    one_by_one, rows_one = _ingest(_settings(migrated_sqlite, tmp_path / "a", reader_process_bytes=0, batch_lines=1),
                                   path)
    at_once, rows_all = _ingest(_settings(migrated_sqlite, tmp_path / "b", reader_process_bytes=0,
                                          batch_lines=1000), path)
    for table in ("runs", "criteria", "run_tags", "early_stops", "steps", "events"):
        assert _sorted_warnings(rows_all[table]) == _sorted_warnings(rows_one[table]), table
    assert _warnings(at_once) == _warnings(one_by_one)
    # and what they leave is what the records say (worked out by hand from tricky())
    assert _warnings(at_once) == sorted([
        "second run_start for this run with different content: ignored, the first one received is kept",
        "second run_end for this run with different content: the later one is used",
        "run_end: ts 'yesterday' is not an RFC 3339 time; the run's times are shown without it",
        "run_end: ts 'yesterday' is not an RFC 3339 time; the run's times are shown without it",
        "criterion 'tests': score 1.5 is outside [0, 1]; kept as written",
        "run_end: negative elapsed_s (-3); shown as written",
    ])
    crit = {(c["run_pk"], c["criterion_id"]): c for c in map(orjson.loads, rows_all["criteria"])}
    assert crit[("a", "tests")]["passed"] == 1 and crit[("a", "tests")]["description"] == "declared again"
    assert crit[("a", "tests")]["position"] == 2 and crit[("a", "style")]["position"] == 1
    assert (crit[("a", "extra-1")]["position"], crit[("a", "extra-2")]["position"]) == (1002, 2002)
    assert crit[("b", "tests")]["score"] == 1.5 and crit[("b", "tests")]["has_spec"] == 1
    runs = {r["run_id"]: r for r in map(orjson.loads, rows_all["runs"])}
    assert runs["a"]["task_id"] == "t1" and runs["a"]["stop_reason"] == "final" and runs["a"]["status"] == "failed"
    assert sorted(orjson.loads(t)["tag"] for t in rows_all["run_tags"]) == ["x", "y"]
    assert [orjson.loads(e)["reason"] for e in rows_all["early_stops"]] == ["decided"]
