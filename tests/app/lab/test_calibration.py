"""Criterion calibration: counts to figures and labels, worked out by hand."""

from __future__ import annotations

import pytest

from qita_board.lab.calibration import SAFE_UPPER, calibrate, label


def rows(type_, cid, **counts):
    """counts: pass_pass (live pass, run passed), pass_fail, fail_fail, fail_pass, pass_error."""
    out = []
    for key, n in counts.items():
        decision, verdict = key.split("_")
        out.append({"type": type_, "criterion_id": cid, "decision": decision, "run_verdict": verdict, "n": n})
    return out


def test_labels_and_their_numbers():
    # no flip in 29 decisions: 1 - 0.05^(1/29) = 9.8% <= 10%; in 28 it is 10.1%
    assert 1 - 0.05 ** (1 / 29) <= SAFE_UPPER < 1 - 0.05 ** (1 / 28)
    assert label(0, 29)[0] == "safe to arm" and label(0, 28)[0] == "not enough data"
    assert label(1, 500)[0] == "risky" and "1 flipped of 500" in label(1, 500)[1]
    assert label(0, 0) == ("not enough data", "never decided live")


def test_calibration_by_type_and_by_criterion():
    data = calibrate([
        *rows("command_executed", "tests", pass_pass=20, pass_fail=3, pass_error=1),   # 4 false passes
        *rows("command_executed", "no_push", fail_fail=30),                            # 30 matched fails
        *rows("skill_triggered", "skill", pass_pass=5, fail_fail=4),
    ], {("command_executed", "tests"): 2, ("command_executed", "no_push"): 1, ("skill_triggered", "skill"): 1})
    crit = {c["criterion_id"]: c for c in data["by_criterion"]}
    tests = crit["tests"]
    assert (tests["decisions"], tests["matched"], tests["false_passes"], tests["false_fails"]) == (24, 20, 4, 0)
    assert tests["overall"]["label"] == "risky" and tests["on_pass"]["rate"] == pytest.approx(4 / 24)
    assert tests["experiments"] == 2 and tests["on_fail"]["label"] == "not enough data"
    assert crit["no_push"]["overall"]["label"] == "safe to arm"
    assert crit["no_push"]["on_fail"]["upper"] == pytest.approx(1 - 0.05 ** (1 / 30))
    assert crit["skill"]["overall"]["label"] == "not enough data"
    types = {t["type"]: t for t in data["by_type"]}
    assert (types["command_executed"]["decisions"], types["command_executed"]["flips"]) == (54, 4)
    assert types["command_executed"]["overall"]["label"] == "risky"
    assert data["thresholds"]["min_decisions_without_flip"] == 29
    # risky first
    assert data["by_criterion"][0]["criterion_id"] == "tests"


def test_a_run_that_errored_is_no_evidence_for_or_against_a_criterion(tmp_path, ingest, client):
    from tests.app.lab.test_validate import wait_indexed
    from tests.conftest import write_jsonl

    # The skill is engaged live in all three runs: one passed, one failed, one crashed.
    # The crash says nothing of whether the engagement was right: 2 decisions, 1 false pass.
    records = []
    for i, (verdict, status) in enumerate((("pass", "completed"), ("fail", "completed"), ("error", "error"))):
        rid = f"run-{i}"
        records += [{"type": "run_start", "run_id": rid, "task_id": f"t{i}", "experiment": "cal", "variant": "e2e",
                     "criteria": [{"id": "skill", "type": "skill_triggered", "skill": "pdf"}]},
                    {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "Skill", "args": {"skill": "pdf"}}]},
                    {"type": "run_end", "run_id": rid, "status": status, "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "c.jsonl", records)).ok
    cal = wait_indexed(client, "experiment=cal&variant=e2e")["calibration"]
    skill = next(c for c in cal["by_criterion"] if c["criterion_id"] == "skill")
    assert (skill["decisions"], skill["matched"], skill["false_passes"]) == (2, 1, 1)
