"""coder_eval results folders (<run_id>/<variant_id>/<task_id>/<NN>/task.json, run.json at the root).

The fixtures are built here from the documented field names only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import orjson
from sqlmodel import Session

from app import queries

import pytest

pytestmark = pytest.mark.both_backends


def criterion(ctype: str, description: str, score: float, *, threshold: float = 0.5, gating: bool = True) -> dict[str, Any]:
    return {"criterion_type": ctype, "description": description, "score": score, "pass_threshold": threshold,
            "gating": gating, "details": {"note": f"{ctype} checked"}}


def task_json(task_id: str, variant: str, *, final_status: str, criteria: list[dict[str, Any]],
              early_stop: Optional[dict[str, Any]] = None, iterations: int = 2, duration: float = 10.0,
              tokens: Optional[dict[str, int]] = None, cost: Optional[float] = 0.5) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "variant_id": variant,
        "final_status": final_status,
        "success_criteria_results": criteria,
        "early_stop": early_stop,
        "duration_seconds": duration,
        "token_usage": tokens if tokens is not None else {"input_tokens": 100, "output_tokens": 20},
        "cost": cost,
        "iterations": [{"text": f"turn {i}", "tool_calls": [{"name": "Bash", "input": {"command": f"ls {i}"},
                                                             "output": "file.txt"}]}
                       for i in range(iterations)],
    }


def write_results(root: Path, run_id: str, tasks: list[tuple[str, str, int, dict[str, Any]]]) -> Path:
    """root/run_id/run.json and root/run_id/<variant>/<task>/<NN>/task.json; returns the results folder."""
    folder = root / run_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_bytes(orjson.dumps({"run_id": run_id, "tasks": len(tasks)}))
    for variant, task, rep, doc in tasks:
        target = folder / variant / task / f"{rep:02d}"
        target.mkdir(parents=True, exist_ok=True)
        (target / "task.json").write_bytes(orjson.dumps(doc))
    return folder


def smoke_e2e_results(root: Path, run_id: str = "ce-run-1") -> Path:
    """A small smoke/e2e experiment: the smoke run of `activate` stops early on a pass."""
    armed = "skill_triggered: loads the csv skill"
    smoke = task_json("activate", "smoke", final_status="passed", iterations=1, duration=4.0, cost=0.1,
                      tokens={"input_tokens": 300, "output_tokens": 50},
                      criteria=[criterion("skill_triggered", "loads the csv skill", 1.0),
                                criterion("file_exists", "writes out.csv", 0.0)],
                      early_stop={"reason": "criterion_passed", "deciding_criterion_type": "skill_triggered",
                                  "deciding_criterion_description": "loads the csv skill", "armed_criteria": [armed],
                                  "sdk_turn_index": 0, "tool_call_index": 1, "elapsed_seconds": 3.5,
                                  "turns_remaining_at_stop": 4})
    e2e = task_json("activate", "e2e", final_status="failed", iterations=3, duration=12.0, cost=0.4,
                    tokens={"input_tokens": 900, "output_tokens": 100},
                    criteria=[criterion("skill_triggered", "loads the csv skill", 1.0),
                              criterion("file_exists", "writes out.csv", 0.0)])
    return write_results(root, run_id, [("smoke", "activate", 0, smoke), ("e2e", "activate", 0, e2e)])


def test_task_json_maps_onto_a_run(ingest, engine, tmp_path):
    folder = smoke_e2e_results(tmp_path)
    report = ingest(folder)
    assert report.errors == [] and report.files == 2
    assert sorted(report.created) == ["ce-run-1/e2e/activate/00", "ce-run-1/smoke/activate/00"]
    with Session(engine) as session:
        smoke = queries.get_run_row(session, run_id="ce-run-1/smoke/activate/00")
        e2e = queries.get_run_row(session, run_id="ce-run-1/e2e/activate/00")
        assert (smoke["experiment"], smoke["variant"], smoke["task_id"], smoke["replicate"]) == ("ce-run-1", "smoke", "activate", 0)
        assert smoke["source_format"] == "coder_eval"
        # final_status is the recorded verdict; smoke stopped early and gates on its armed criterion only.
        assert smoke["verdict"] == "pass" and e2e["verdict"] == "fail"
        assert smoke["early_stopped"] is True and e2e["early_stopped"] is False
        assert smoke["stop_reason"] == "early_stop" and e2e["stop_reason"] == "final"
        assert (smoke["steps"], smoke["tokens_total"], smoke["elapsed_s"], smoke["cost_usd"]) == (1, 350, 4.0, 0.1)
        assert (e2e["steps"], e2e["tokens_total"], e2e["elapsed_s"], e2e["cost_usd"]) == (3, 1000, 12.0, 0.4)
        early = queries.get_early_stop(session, run_pk=smoke["id"])
        assert early["reason"] == "criterion_passed"
        assert early["deciding_criterion"] == "skill_triggered: loads the csv skill"
        assert early["armed_criteria"] == ["skill_triggered: loads the csv skill"]
        assert (early["step"], early["tool_call_index"], early["elapsed_s"], early["turns_remaining"]) == (0, 1, 3.5, 4)
        crits = queries.get_criteria(session, run_pk=smoke["id"], early_stop_enabled=smoke["early_stop_enabled"],
                                     early_stopped=True, armed_ids=early["armed_criteria"])
        by_id = {c["id"]: c for c in crits}
        armed = by_id["skill_triggered: loads the csv skill"]
        advisory = by_id["file_exists: writes out.csv"]
        assert armed["armed"] and armed["passed"] is True and armed["pass_threshold"] == 0.5
        assert advisory["advisory"] and advisory["passed"] is False
        assert advisory["details"] == {"note": "file_exists checked"}
        steps, total = queries.get_steps(session, run_pk=e2e["id"], limit=10)
        assert total == 3
        assert steps[2]["record"]["actions"] == [{"name": "Bash", "args": {"command": "ls 2"}}]
        assert steps[2]["record"]["action_results"] == ["file.txt"]


def test_verdict_is_derived_when_final_status_is_not_a_verdict(ingest, engine, tmp_path):
    doc = task_json("t", "e2e", final_status="completed",
                    criteria=[criterion("command_executed", "runs tests", 0.9, threshold=0.8),
                              criterion("judge", "explains", 0.1, gating=False)])
    folder = write_results(tmp_path, "r2", [("e2e", "t", 3, doc)])
    assert ingest(folder).ok
    with Session(engine) as session:
        row = queries.get_run_row(session, run_id="r2/e2e/t/03")
    # 0.9 >= 0.8 on the only gating criterion; the informational one does not gate.
    assert row["verdict"] == "pass" and row["replicate"] == 3 and row["early_stopped"] is False


def test_reingest_changes_nothing_and_null_early_stop_is_not_a_stop(ingest, engine, tmp_path):
    folder = smoke_e2e_results(tmp_path)
    assert len(ingest(folder).created) == 2
    again = ingest(folder)
    assert again.records == 0 and not again.created and not again.run_ids


def test_a_folder_above_the_results_is_searched(ingest, tmp_path):
    smoke_e2e_results(tmp_path / "all", "first")
    smoke_e2e_results(tmp_path / "all", "second")
    report = ingest(tmp_path / "all")
    assert len(report.created) == 4 and report.errors == []


def test_broken_task_json_is_reported_by_name(ingest, tmp_path):
    folder = smoke_e2e_results(tmp_path)
    (folder / "e2e" / "activate" / "00" / "task.json").write_text("{not json")
    report = ingest(folder)
    assert [str(e).split(":")[0] for e in report.errors] == [f"{folder}/e2e/activate/00/task.json"]
    assert report.created == {"ce-run-1/smoke/activate/00"}


def test_an_errored_task_fails_whatever_its_criteria_scored(ingest, engine, tmp_path):
    doc = task_json("t", "e2e", final_status="error", criteria=[criterion("command_executed", "runs tests", 1.0)])
    folder = write_results(tmp_path, "r3", [("e2e", "t", 0, doc)])
    assert ingest(folder).ok
    with Session(engine) as session:
        row = queries.get_run_row(session, run_id="r3/e2e/t/00")
    assert (row["verdict"], row["status"], row["stop_reason"]) == ("fail", "error", "unrecoverable_error")


def test_an_out_of_range_score_is_kept_and_flagged(ingest, engine, tmp_path):
    doc = task_json("t", "e2e", final_status="completed", criteria=[criterion("judge", "rates the fix", 7.5, threshold=0.9)])
    folder = write_results(tmp_path, "r4", [("e2e", "t", 0, doc)])
    report = ingest(folder)
    assert report.ok
    assert [w.message for w in report.warnings] == ["criterion 'judge: rates the fix': score 7.5 is outside [0, 1]; kept as written"]
    with Session(engine) as session:
        row = queries.get_run_row(session, run_id="r4/e2e/t/00")
    assert row["verdict"] == "pass"
