"""Is the simulator right? Smoke's own policy simulated over the e2e runs against the smoke
runs that were recorded: on the demo experiment (deterministic scripted agents), on the
real coder_eval experiment in ../shared, and on crafted pairs where they must differ."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from qita.demo import EXPERIMENT, run_demo
from tests.conftest import write_jsonl

SHARED = Path(__file__).resolve().parents[4] / "shared" / "traces" / "coder_eval-runs"
RESULTS = next(iter(sorted(SHARED.glob("*/run.json"))), None)
needs_shared = pytest.mark.skipif(RESULTS is None, reason="../shared/traces/coder_eval-runs is not on this machine")
VERDICT = {"SUCCESS": "pass", "FAILURE": "fail", "TOKEN_BUDGET_EXCEEDED": "fail", "ERROR": "error"}


def wait_indexed(client, query: str) -> dict[str, Any]:
    """The lab's answer once its runs are indexed (the board's indexer does it in the background)."""
    deadline = time.monotonic() + 60
    while True:
        data = client.get(f"/api/lab?{query}").json()
        if data.get("indexing", {}).get("ready") or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


def demo_expected(files: list[Path]) -> dict[tuple[str, int], dict[str, Any]]:
    """Per (task, replicate), the recorded smoke run's stop step and verdict, read from its trace."""
    out = {}
    for path in files:
        records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        start = next(r for r in records if r["type"] == "run_start")
        if start["variant"] != "smoke":
            continue
        early = next((r for r in records if r["type"] == "early_stop"), None)
        steps = [r["step"] for r in records if r["type"] == "step"]
        end = next(r for r in records if r["type"] == "run_end")
        out[(start["task_id"], start.get("replicate", 0))] = {
            "stop": early["step"] if early else max(steps), "verdict": end["verdict"]}
    return out


def test_on_the_demo_simulated_smoke_equals_recorded_smoke_pair_by_pair(tmp_path, ingest, client):
    files = run_demo(tmp_path / "demo", tasks=24)
    assert ingest(*files).ok
    data = wait_indexed(client, f"experiment={EXPERIMENT}&variant=e2e")
    v = data["validation"]
    want = demo_expected(files)
    got = {(r["task_id"], r["replicate"]): {"stop": r["simulated"]["stop_step"], "verdict": r["simulated"]["verdict"]}
           for r in v["pairs"]}
    assert got == want and len(got) == 29
    assert (v["paired"], v["matched"], v["stop_matches"], v["verdict_matches"]) == (29, 29, 29, 29)
    assert v["variant"] == "smoke" and all(r["why"] is None for r in v["pairs"])
    # the pairs that stopped early in smoke stop early in the simulation too, on the same criterion
    stopped = [r for r in v["pairs"] if r["recorded"]["early_stop_reason"]]
    assert stopped and all(r["simulated"]["deciding_criterion"] == r["recorded"]["deciding_criterion"] for r in stopped)


def coder_eval_expected(results: Path) -> dict[str, dict[str, Any]]:
    """Per task id (replicate 0 and 1 of t01 alike), what coder_eval recorded for smoke."""
    out = {}
    for path in sorted(results.glob("smoke/*/*/task.json")):
        task = json.loads(path.read_text())
        es = task["early_stop"]
        out[f"{task['task_id']}#{int(path.parts[-2])}"] = {
            # steps are numbered from 1, one per assistant turn: the stop is the SDK turn
            "stop": es["sdk_turn_index"] if es else task["total_assistant_turns"],
            "verdict": VERDICT[task["final_status"]],
            "deciding": f"{es['deciding_criterion_type']}: {es['deciding_criterion_description']}" if es else None}
    return out


@needs_shared
@pytest.mark.both_backends
def test_on_real_coder_eval_results_smokes_policy_over_e2e_matches_the_recorded_smoke(ingest, client):
    assert ingest(RESULTS.parent).errors == []
    experiment = json.loads((RESULTS.parent / "experiment.json").read_text())["experiment_id"]
    data = wait_indexed(client, f"experiment={experiment}&variant=e2e")
    v, want = data["validation"], coder_eval_expected(RESULTS.parent)
    got = {f"{r['task_id']}#{r['replicate']}": r for r in v["pairs"]}
    # every e2e task has its smoke twin but t09, which only smoke ran
    assert set(want) - set(got) == {"t09-smoke-only#0"} and v["only_smoke"] == ["t09-smoke-only#0"]
    for key, row in got.items():
        assert (row["simulated"]["stop_step"], row["simulated"]["verdict"]) == \
            (want[key]["stop"], want[key]["verdict"]), key
        if row["recorded"]["early_stop_reason"] != "decision_budget_exceeded":
            assert row["simulated"]["deciding_criterion"] == want[key]["deciding"], key
    assert (v["matched"], v["paired"], v["unexplained"]) == (9, 9, 0)
    # the two stops that are not "an armed criterion settled": coder_eval's decision budget
    # (the tests were not run within 3 turns) and its token budget, checked when the run ends
    assert got["t04-slow-explorer#0"]["simulated"]["stop_reason"] == "decision_budget_exceeded"
    assert "token budget" in got["t08-token-hungry#0"]["simulated"]["verdict_reason"]
    # the crashing agent never decides an armed criterion: it errors in full, as smoke did
    assert got["t07-crashing-agent#0"]["simulated"]["stop_reason"] == "unrecoverable_error"


# -- pairs that differ, and say why -----------------------------------------------------------------

CRITERIA = [{"id": "tests", "type": "command_executed", "pattern": "pytest", "stop_when": "pass"}]


def records(run_id, variant, commands, *, early=None, verdict="pass", stop_reason="final", task="t"):
    out: list[dict[str, Any]] = [{"type": "run_start", "run_id": run_id, "task_id": task, "experiment": "v",
                                  "variant": variant, "criteria": CRITERIA,
                                  "early_stop": {"enabled": variant == "smoke"}}]
    for i, c in enumerate(commands):
        out.append({"type": "step", "run_id": run_id, "step": i, "actions": [{"name": "bash", "args": {"command": c}}],
                    "action_results": [{"returncode": 0}]})
    out.append({"type": "criterion", "run_id": run_id, "id": "tests", "score": 1.0, "passed": True})
    if early is not None:
        out.append({"type": "early_stop", "run_id": run_id, "reason": "criterion_passed", "deciding_criterion": "tests",
                    "armed_criteria": ["tests"], "step": early})
    out.append({"type": "run_end", "run_id": run_id, "status": "completed", "stop_reason": stop_reason,
                "verdict": verdict})
    return out


def test_a_difference_is_explained_by_what_the_agent_did(tmp_path, ingest, client):
    path = write_jsonl(tmp_path / "v.jsonl", [
        # the agent looked around one step longer in smoke: the runs part at step 1
        *records("e2e-a", "e2e", ["ls", "pytest", "git status", "echo done"], task="a"),
        *records("smoke-a", "smoke", ["ls", "cat a.py", "pytest"], early=2, stop_reason="early_stop", task="a"),
        # smoke crashed at step 1, before the tests the policy waits for
        *records("e2e-b", "e2e", ["ls", "cat", "pytest", "echo"], task="b"),
        *records("smoke-b", "smoke", ["ls", "cat"], verdict="error", stop_reason="unrecoverable_error", task="b"),
        # identical: they match
        *records("e2e-c", "e2e", ["pytest", "ls"], task="c"),
        *records("smoke-c", "smoke", ["pytest"], early=0, stop_reason="early_stop", task="c"),
    ])
    assert ingest(path).ok
    v = wait_indexed(client, "experiment=v&variant=e2e")["validation"]
    rows = {r["task_id"]: r for r in v["pairs"]}
    assert (v["paired"], v["matched"], v["explained"], v["unexplained"]) == (3, 1, 2, 0)
    a = rows["a"]
    assert (a["recorded"]["stop_step"], a["simulated"]["stop_step"]) == (2, 1)
    assert a["why"]["kind"] == "actions_differ" and a["why"]["step"] == 1
    assert (a["why"]["smoke"], a["why"]["e2e"]) == ("bash: cat a.py", "bash: pytest")
    assert rows["b"]["why"]["kind"] == "smoke_ended_first" and rows["b"]["why"]["step"] == 1
    assert rows["c"]["match"] and rows["c"]["why"] is None
    page = client.get("/lab?experiment=v&variant=e2e").text
    assert "the agent did something different at step 1: smoke ran bash: cat a.py; e2e ran bash: pytest" in page
