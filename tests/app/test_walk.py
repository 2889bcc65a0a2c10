"""Walking a long run: the steps worth a look, the filtered blocks, the folded one-line
steps, and the tool call a criterion's evidence points at."""

from __future__ import annotations

import pytest

from qita_board.walk import step_errors, summary
from tests.app.parsed_html import attrs, one, page, text
from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends

RID = "walk/1"


def _step(n, *, critics=(), actions=1, invocations=None, results=None, **extra):
    rec = {"type": "step", "run_id": RID, "step": n, "observation": f"obs {n}",
           "actions": [{"name": f"tool{n}", "args": {}} for _ in range(actions)],
           "critic_outputs": [dict(c) for c in critics], "tokens": {"total": 10 * (n + 1)}, "duration_s": 1.5, **extra}
    if invocations is not None:
        rec["tool_invocations"] = invocations
    if results is not None:
        rec["action_results"] = results
    return rec


def walk_records():
    ok = {"critic": "judge", "action": "continue", "reason": "fine", "score": 0.9}
    return [
        {"type": "run_start", "run_id": RID, "task_id": "t", "experiment": "e", "variant": "v",
         "criteria": [{"id": "ran", "type": "tool_invoked", "stop_when": "pass"}], "early_stop": {"enabled": True}},
        # step 0: calls 1; nothing wrong
        _step(0, critics=[ok], invocations=[{"tool_name": "a", "call_index": 1, "status": "ok", "error": None}]),
        # step 1: calls 2 and 3; a critic says retry; a command failed
        _step(1, critics=[ok, {"critic": "rc", "action": "retry", "reason": "returncode 1", "score": 0.2}], actions=2,
              invocations=[{"tool_name": "b", "call_index": 2, "status": "ok"}, {"tool_name": "c", "call_index": 3}],
              results=[{"command": "pytest", "returncode": 1}, {"ok": True}]),
        # step 2: no invocations: its two actions are calls 4 and 5; a tool error
        {**_step(2, critics=[ok], actions=2), "tool_invocations": [{"tool_name": "d", "status": "error", "error": "timed out"}]},
        # step 3: a critic says stop; the criterion was decided here; call 6
        _step(3, critics=[{"critic": "rc", "action": "retry", "reason": "again", "score": 0.1},
                          {"critic": "guard", "action": "stop", "reason": "forbidden", "score": 0.5}]),
        # step 4: an event of the step failed; call 7
        _step(4, critics=[ok]),
        {"type": "event", "run_id": RID, "step": 4, "phase": "ACT", "ok": False, "error": "tool crashed"},
        # step 5: nothing at all, no action
        _step(5, critics=[ok], actions=0),
        {"type": "criterion", "run_id": RID, "id": "ran", "score": 1.0, "passed": True, "decided_at_step": 3,
         "details": {"tool_call_indexes": [6], "count": 1}},
        {"type": "run_end", "run_id": RID, "status": "completed", "stop_reason": "critic_stop", "steps": 6},
    ]


@pytest.fixture
def walked(tmp_path, ingest):
    assert ingest(write_jsonl(tmp_path / "w.jsonl", walk_records())).ok


def _steps(client, query=""):
    body = client.get(f"/api/runs/walk%2F1/steps{query}").json()
    return [s["step"] for s in body["data"]], body["count"]


def test_the_steps_worth_a_look_by_kind(walked, client):
    walk = client.get("/api/runs/walk%2F1").json()["walk"]
    assert walk == {"only": [], "critic": [1, 3], "decided": [3], "errors": [1, 2, 4]}


def test_blocks_of_chosen_kinds(walked, client):
    assert _steps(client) == ([0, 1, 2, 3, 4, 5], 6)
    assert _steps(client, "?only=critic") == ([1, 3], 2)
    assert _steps(client, "?only=errors&only=decided") == ([1, 2, 3, 4], 4)
    assert _steps(client, "?only=critic,errors&offset=2&limit=1") == ([3], 4)
    r = client.get("/api/runs/walk%2F1/steps?only=critic&offset=2")
    assert r.status_code == 404 and "the run has 2 steps of the chosen kinds" in r.json()["error"]


def test_run_page_lists_the_marks_for_n_and_p_and_opens_one_step(walked, client):
    opened = "#steps > article:has(> details.step-fold[open])"
    doc = page(client.get("/runs/walk%2F1").text)
    assert one(doc, "section#steps-section")["data-flagged"] == "1 2 3 4"   # every kind when the list is not filtered
    kinds = {box["value"]: box.parent for box in doc.select('form.step-filter input[name="only"]')}
    assert (text(kinds["critic"]), text(one(kinds["critic"], ".count"))) == ("a critic said retry or stop (2)", "(2)")
    assert (text(kinds["errors"]), text(one(kinds["errors"], ".count"))) == ("with errors (3)", "(3)")
    assert len(doc.select("#steps > article")) == 6
    assert attrs(doc, opened, "id") == ["step-0"]              # the first step in full, the rest one line each
    assert attrs(page(client.get("/runs/walk%2F1?from=3").text), opened, "id") == ["step-3"]
    doc = page(client.get("/runs/walk%2F1?only=decided").text)
    assert one(doc, "section#steps-section")["data-flagged"] == "3"
    assert attrs(doc, "#steps > article.step", "id") == ["step-3"]
    assert text(one(doc, "#steps-count")) == "(1 of 6)"


def test_the_one_line_summary_of_a_step(walked, client):
    steps = {s["step"]: s for s in client.get("/api/runs/walk%2F1/steps").json()["data"]}
    first = summary(steps[1])
    assert first["actions"] == [{"action": "retry", "count": 1}, {"action": "continue", "count": 1}]
    assert first["worst_reason"] == "returncode 1" and first["worst_critic"] == "rc"
    assert first["errors"] == ["pytest: returncode 1"]
    three = summary(steps[3])
    assert three["worst_reason"] == "forbidden"                 # stop outranks retry, whatever the scores
    assert summary(steps[4])["errors"] == ["ACT: tool crashed"]
    assert summary(steps[5]) == {"actions": [{"action": "continue", "count": 1}], "worst_reason": "fine",
                                 "worst_critic": "judge", "worst_score": 0.9, "errors": []}
    head = one(client.get("/runs/walk%2F1").text, "article#step-1 summary.step-head")
    assert text(one(head, ".step-why")) == "returncode 1" and one(head, ".step-why")["title"] == "rc: returncode 1"
    # the score beside the worst reason is that critic's (0.20), not the step's mean (0.55)
    assert steps[1]["critic_score"] == pytest.approx(0.55) and text(one(head, ".step-score")) == "rc 0.20"
    assert text(one(head, ".badge.step-error")) == "⚠ 1 error"
    assert text(one(head, ".step-cost")) == "1.50 s · 20 tokens"


def test_step_errors_reads_tool_invocations_and_action_results():
    assert step_errors({"tool_invocations": [{"tool_name": "x", "status": "FAILED"}]}) == ["x: status FAILED"]
    assert step_errors({"tool_invocations": [{"status": "ok", "error": {"code": 2}}]}) == ['tool: {"code":2}']
    assert step_errors({"action_results": [{"error": "boom"}, {"ok": False}, {"returncode": 0}, "text"]}) == [
        "boom", "action result not ok"]
    assert step_errors({"tool_invocations": [{"status": "success", "error": None}]}) == []
    assert step_errors("not a record") == []


def test_a_tool_call_opens_the_step_that_made_it(walked, client):
    expected = {1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 4}       # invocations name 1-3; then one per action
    for call, step in expected.items():
        assert client.get(f"/api/runs/walk%2F1/calls/{call}").json() == {"run_id": RID, "call": call, "step": step}
    r = client.get("/runs/walk%2F1/calls/6", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/runs/walk%2F1?from=3#step-3"
    r = client.get("/api/runs/walk%2F1/calls/8")
    assert r.status_code == 404 and r.json()["error"].endswith("its steps record 7 tool calls")
