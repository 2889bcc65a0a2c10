"""coder_eval criteria carry what a live verdict needs, in qita's spelling, so the same
live-verdict code replays them: on the real results in ../shared it decides each deciding
criterion at the very turn and tool call coder_eval recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from qita.live import replay_live_verdicts
from qita_board.ingest.coder_eval import live_parameters
from qita_board.lab.state import step_tool_calls
from qita_board.models import CRITERIA, RUNS, STEPS

SHARED = Path(__file__).resolve().parents[4] / "shared" / "traces" / "coder_eval-runs"
RESULTS = next(iter(sorted(SHARED.glob("*/run.json"))), None)
needs_shared = pytest.mark.skipif(RESULTS is None, reason="../shared/traces/coder_eval-runs is not on this machine")


def test_live_parameters_in_qitas_spelling():
    config = {"type": "command_executed", "command_pattern": "git push", "tool_name": None, "min_count": 0,
              "max_count": 0, "require_success": False, "exclude_pattern": "--dry-run",
              "stop_early": {"on_pass": "continue", "decide_within": 3}, "weight": 1.0}
    assert live_parameters(config) == {"pattern": "git push", "min_count": 0, "max_count": 0, "require_success": False,
                                       "exclude_pattern": "--dry-run", "decide_within": 3}
    assert live_parameters({"type": "skill_triggered", "skill_name": "pdf"}) == {"skill": "pdf"}
    assert live_parameters({"type": "file_exists", "path": "REPORT.md"}) == {}


@needs_shared
def test_replaying_the_recorded_commands_decides_where_coder_eval_did(ingest, engine):
    assert ingest(RESULTS.parent).errors == []
    checked = 0
    for path in sorted(RESULTS.parent.glob("smoke/*/*/task.json")):
        task = json.loads(path.read_text())
        es = task["early_stop"]
        if not es or es["reason"] == "decision_budget_exceeded":
            continue  # nothing decided: the stop came from the decision budget (or there was none)
        run_id = f"{RESULTS.parent.name}/smoke/{path.parts[-3]}/{path.parts[-2]}"
        with engine.connect() as conn:
            pk = conn.execute(select(RUNS.c.id).where(RUNS.c.run_id == run_id)).scalar_one()
            specs = [s for (s,) in conn.execute(select(CRITERIA.c.spec).where(CRITERIA.c.run_pk == pk)
                                                 .order_by(CRITERIA.c.position))]
            steps = [(n, json.loads(r)) for n, r in conn.execute(select(STEPS.c.step, STEPS.c.record)
                                                                   .where(STEPS.c.run_pk == pk).order_by(STEPS.c.step))]
        replay = replay_live_verdicts([step_tool_calls(r) for _n, r in steps], specs)
        deciding = f"{es['deciding_criterion_type']}: {es['deciding_criterion_description']}"
        decided = replay.decided[deciding]
        assert (steps[decided.step][0], decided.tool_call_index) == (es["sdk_turn_index"], es["tool_call_index"])
        assert decided.verdict == {"criterion_passed": "pass", "criterion_failed": "fail"}[es["reason"]]
        checked += 1
    assert checked == 8    # t01 (two replicates), t02, t03, t05, t06, t08, t09
