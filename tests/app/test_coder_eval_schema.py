"""coder_eval results the shared experiment does not hold, read as coder_eval documents them.

Each results folder here is written from coder_eval's documented schema (its
REPORT_SCHEMA.md and results.py in ../shared/reference/coder_eval): field names, types,
defaults and enum values as documented, and the expected figures are worked out by hand
in the comments from those definitions, never with the importer's code. Each case goes
through the one ingest path and is read back through the JSON API (`/api/runs`,
`/api/runs/{id}`, `/api/compare`) and, where a figure is shown, the run page.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

import orjson
import pytest

from tests.app.parsed_html import one, page, text

pytestmark = pytest.mark.both_backends

PRICED = {"uncached_input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
          "cache_read_input_tokens": 0, "total_cost_usd": 0.01}


def command(tool_id: str, turn: Optional[int], cmd: str = "ls", **extra: Any) -> dict[str, Any]:
    """A CommandTelemetry, run to its end."""
    return {"tool_name": "Bash", "tool_id": tool_id, "assistant_turn_index": turn, "timestamp": "2026-01-02T03:04:05",
            "parameters": {"command": cmd}, "result_status": "success", "result_summary": "ok", "duration_ms": 2.0,
            "execution_started_at": "2026-01-02T03:04:05", "execution_completed_at": "2026-01-02T03:04:05.002", **extra}


def message(text_: str, tool_ids: list[str], **tokens: int) -> dict[str, Any]:
    """An assistant TranscriptMessage with its token buckets."""
    return {"role": "assistant", "content_blocks": [{"block_type": "text", "sequence": 0, "text": text_}],
            "tool_use_ids": tool_ids, "input_tokens": tokens.get("input_tokens", 10),
            "output_tokens": tokens.get("output_tokens", 5), "cache_creation_tokens": 0, "cache_read_tokens": 0}


def turns_of(n: int) -> dict[str, Any]:
    """One iteration (TurnRecord) of `n` assistant turns, each issuing one command."""
    return {"iteration": 1, "user_input": "go", "agent_output": "done", "timestamp": "2026-01-02T03:04:06",
            "duration_seconds": 1.5, "assistant_turn_count": n, "crashed": False,
            "messages": [message(f"turn {i}", [f"t{i}"]) for i in range(n)],
            "commands": [command(f"t{i}", i) for i in range(n)], "token_usage": PRICED}


def task(task_id: str, variant: str = "v", *, status: str = "SUCCESS", score: Optional[float] = 1.0,
         iterations: Optional[list[dict[str, Any]]] = None, **fields: Any) -> dict[str, Any]:
    """An EvaluationResult (task.json) in coder_eval's field names; one criterion that passed
    unless `success_criteria_results` is given."""
    its = [turns_of(1)] if iterations is None else iterations
    doc = {"task_id": task_id, "task_description": f"do {task_id}", "variant_id": variant, "agent_type": "claude-code",
           "model_used": "m", "started_at": "2026-01-02T03:04:05", "completed_at": "2026-01-02T03:04:09",
           "duration_seconds": 4.0, "final_status": status, "max_turns_exhausted": False, "weighted_score": score,
           "iteration_count": len(its),
           "success_criteria_results": [{"result_kind": "basic", "criterion_type": "file_exists", "description": "wrote it",
                                         "score": 1.0, "evaluation_status": "evaluated", "pass_threshold": 0.9,
                                         "gating": True}],
           "post_failure_criteria_results": [], "iterations": its, "error_message": None,
           "total_token_usage": PRICED, "total_assistant_turns": sum(it.get("assistant_turn_count", 0) for it in its),
           "actual_commands": sum(len(it.get("commands", [])) for it in its), "early_stop": None}
    doc.update(fields)
    return doc


def write(root: Path, doc: Any, *, variant: Optional[str] = None, folder: Optional[str] = None, replicate: int = 0) -> Path:
    """root/<variant>/<task id>/<NN>/task.json, as coder_eval lays a run out."""
    target = root / (variant or doc["variant_id"]) / (folder or doc["task_id"]) / f"{replicate:02d}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "task.json").write_bytes(doc if isinstance(doc, bytes) else orjson.dumps(doc))
    return target / "task.json"


def api_run(client, run_id: str) -> dict[str, Any]:
    response = client.get("/api/runs/" + quote(run_id, safe=""))
    assert response.status_code == 200, response.text
    return response.json()


def steps_of(client, run_id: str) -> list[dict[str, Any]]:
    return client.get("/api/runs/" + quote(run_id, safe="") + "/steps", params={"limit": 200}).json()["data"]


def run_page(client, run_id: str) -> str:
    response = client.get("/runs/" + quote(run_id, safe=""))
    assert response.status_code == 200
    return " ".join(response.text.split())


# -- a task.json with fields of the wrong type ------------------------------------------------

def test_fields_of_the_wrong_type_are_named_and_the_rest_of_the_run_is_read(ingest, client, tmp_path):
    # coder_eval's models make these impossible (criterion_type: str, weighted_score:
    # float | None, total_token_usage.uncached_input_tokens: int, early_stop.sdk_turn_index:
    # int). A criterion type that is a list used to stop the whole ingest (a crash); now
    # each such field is read as not given, named in a warning, and the rest is kept.
    root = tmp_path / "odd"
    bad = task("bad", weighted_score=[0.5], total_token_usage={**PRICED, "uncached_input_tokens": {"n": 100}},
               success_criteria_results=[
                   {"criterion_type": ["file_exists"], "description": "wrote it", "score": 1.0},
                   {"criterion_type": "run_command", "description": "tests pass", "score": "high", "pass_threshold": 0.9}],
               task_config={"resolved": {"success_criteria": [{"type": {"x": 1}, "description": "wrote it"}],
                                         "run_limits": {"max_turns": "twelve", "task_timeout": 600}}})
    write(root, bad)
    write(root, task("good"))
    report = ingest(root)
    assert report.errors == []
    assert sorted(report.created) == ["odd/v/bad/00", "odd/v/good/00"]
    said = sorted(w.message for w in report.warnings)
    fields = ["success_criteria_results[0].criterion_type", "success_criteria_results[1].score",
              "task_config.resolved.run_limits.max_turns", "task_config.resolved.success_criteria[0].type",
              "total_token_usage.uncached_input_tokens", "weighted_score"]
    assert [m.split("'")[1] for m in said] == fields
    # a token bucket of the wrong type is TokenUsage's default, 0; any other field is not given
    assert [m.endswith("read as 0, the rest kept") for m in said] == [False] * 4 + [True, False]
    assert all(m.startswith("task.json: field '") and m.endswith(", the rest kept") for m in said)
    assert sum(m.endswith("read as not given, the rest kept") for m in said) == 5
    data = api_run(client, "odd/v/bad/00")
    run = data["run"]
    assert sorted(run["warnings"]) == said  # on the run's page too
    # the rest of the record: status, steps, output tokens, cost, time, task timeout
    assert (run["verdict"], run["source_status"], run["steps"], run["tool_calls"]) == ("pass", "SUCCESS", 1, 1)
    # uncached input read as 0 (never the computed input_tokens standing in for it): 0 + 20 output
    assert (run["tokens_output"], run["tokens_total"], run["cost_usd"]) == (20, 20, 0.01)
    assert run["score"] is None and run["budget_max_steps"] is None and run["budget_max_runtime_s"] == 600
    # the criterion without a type keeps its description; the one with a word for a score has no result
    assert [(c["description"], c["graded"]) for c in data["criteria"]] == [("wrote it", True), ("tests pass", False)]
    assert "read as not given" in run_page(client, "odd/v/bad/00")
    assert api_run(client, "odd/v/good/00")["run"]["warnings"] in (None, [])


def test_a_quoted_number_is_that_number_as_coder_eval_reads_it(ingest, client, tmp_path):
    # coder_eval's result models are lax pydantic: "0.5" for a float field is 0.5 to them, "100"
    # for an int field 100. A quoted uncached bucket is not a missing one: the computed
    # input_tokens (which holds both cache buckets) never stands in for it.
    root = tmp_path / "quoted"
    usage = {"uncached_input_tokens": "100", "input_tokens": 1150, "output_tokens": "20",
             "cache_creation_input_tokens": 50, "cache_read_input_tokens": 1000, "total_cost_usd": "0.01"}
    write(root, task("q", weighted_score="0.5", total_token_usage=usage,
                     success_criteria_results=[{"result_kind": "basic", "criterion_type": "run_command",
                                                "description": "tests pass", "score": "1", "pass_threshold": "0.9",
                                                "evaluation_status": "evaluated", "gating": True}],
                     task_config={"resolved": {"run_limits": {"max_turns": " 12 ", "task_timeout": "600"}}}))
    report = ingest(root)
    assert (report.errors, report.warnings) == ([], [])
    data = api_run(client, "quoted/v/q/00")
    run = data["run"]
    # 100 uncached + 50 written + 1000 read = 1150 in, 20 out: 1170, coder_eval's row total_tokens
    assert (run["tokens_input"], run["tokens_output"], run["tokens_total"]) == (1150, 20, 1170)
    assert (run["tokens_cache_read"], run["tokens_cache_write"], run["score"]) == (1000, 50, 0.5)
    assert (run["budget_max_steps"], run["budget_max_runtime_s"]) == (12, 600)
    assert [(c["graded"], c["score"]) for c in data["criteria"]] == [(True, 1.0)]
    # a quoted word stays what it is: no number
    write(root, task("w", weighted_score="half", total_token_usage={**PRICED, "uncached_input_tokens": "lots"}))
    report = ingest(root)
    assert sorted(w.message.split("'")[1] for w in report.warnings) == ["total_token_usage.uncached_input_tokens",
                                                                        "weighted_score"]
    assert api_run(client, "quoted/v/w/00")["run"]["tokens_total"] == 20


def test_the_check_never_changes_the_document_and_copies_only_what_it_reads_otherwise():
    from qita_board.ingest.coder_eval_fields import conform_task

    good = task("good", iterations=[turns_of(2), turns_of(1)])
    same, said = conform_task(good)
    assert same is good and said == []  # a well-formed task.json is read as it is, no copy
    bad = task("bad", iterations=[turns_of(2), turns_of(1)], early_stop={"reason": "criterion_passed", "gate_threshold": 2})
    bad["iterations"][0]["commands"][1]["tool_name"] = 7
    before = orjson.dumps(bad)
    read, said = conform_task(bad)
    assert orjson.dumps(bad) == before  # the input is untouched
    assert "tool_name" not in read["iterations"][0]["commands"][1] and "gate_threshold" not in read["early_stop"]
    # what held no odd field is the very same object
    assert read["iterations"][1] is bad["iterations"][1] and read["iterations"][0]["commands"][0] is bad["iterations"][0]["commands"][0]
    assert [m.split(": ", 1)[1] for m in said] == [
        "field 'iterations[0].commands[1].tool_name' should be a string, not a number (7); read as not given, the rest kept",
        "early_stop.gate_threshold 2 is outside [0, 1]; read as not given (1, every armed criterion)"]


def test_a_task_json_that_is_no_object_or_no_json_is_one_error_and_the_others_are_read(ingest, tmp_path):
    root = tmp_path / "broken"
    write(root, b"[1, 2]", variant="v", folder="list")
    write(root, b'{"task_id": "cut", "final_status": "SUCC', variant="v", folder="cut")
    write(root, task("fine"))
    report = ingest(root)
    assert report.created == {"broken/v/fine/00"}
    assert sorted(e.file.rsplit("/", 3)[-3] for e in report.errors) == ["cut", "list"]


def test_a_task_json_that_cannot_be_read_keeps_its_run_from_the_run_json_row(ingest, client, tmp_path):
    # coder_eval counts the task in the experiment from its run.json row; a task.json cut
    # short (or not a task.json) used to take the run out of the board and its comparison.
    root = tmp_path / "2026-09-09_09-09-09"
    whole = orjson.dumps(task("t1", status="FAILURE", score=0.25, iterations=[turns_of(4)]))
    cut = write(root, whole[:60], variant="v", folder="t1")
    write(root, b"[1, 2]", variant="v", folder="t2")
    rows = [{"task_id": "t1", "replicate_index": 0, "variant_id": "v", "status": "FAILURE", "weighted_score": 0.25,
             "input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 7,
             "total_cost_usd": 0.75, "total_turns": 4, "duration": 12.0},
            {"task_id": "t2", "replicate_index": 0, "variant_id": "v", "status": "SUCCESS", "weighted_score": 1.0}]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows}))
    report = ingest(root)
    said = {e.file.rsplit("/", 3)[-3]: e.message for e in report.errors}
    assert sorted(said) == ["t1", "t2"]
    assert said["t1"].startswith("invalid JSON") and said["t1"].endswith("; its run.json row is read instead")
    assert said["t2"] == ("not a coder_eval task.json: no final_status, success_criteria_results or iterations; "
                          "its run.json row is read instead")
    assert report.created == {f"{root.name}/v/t1/00", f"{root.name}/v/t2/00"}
    run = api_run(client, f"{root.name}/v/t1/00")["run"]
    # 100 uncached + 3 written + 7 read in, 20 out; the row's turns are its steps
    assert (run["verdict"], run["score"], run["cost_usd"], run["tokens_input"], run["tokens_total"], run["steps"],
            run["elapsed_s"]) == ("fail", 0.25, 0.75, 110, 130, 4, 12.0)
    assert run["warnings"] == ["its task.json could not be read: the run is its run.json row "
                               "(status, score, tokens and cost; no steps)"]
    assert api_run(client, f"{root.name}/v/t2/00")["run"]["verdict"] == "pass"
    # written in full, the task.json is the whole record of the same run: its steps, no warning
    cut.write_bytes(whole)
    report = ingest(root)
    assert report.errors == []  # t2, unchanged, is not read again
    assert report.created == set()
    run = api_run(client, f"{root.name}/v/t1/00")["run"]
    assert (run["verdict"], run["steps"], run["cost_usd"]) == ("fail", 4, 0.75)
    assert [w.split(":")[0] for w in run["warnings"]] == [f"run '{root.name}/v/t1/00' was loaded again from the new "
                                                          f"version of {cut}"]
    assert [s["step"] for s in steps_of(client, f"{root.name}/v/t1/00")] == [1, 2, 3, 4]
    assert client.get("/api/runs").json()["stats"]["runs"] == 2


def test_a_run_json_or_experiment_json_that_cannot_be_read_is_one_error_each_and_the_tasks_are_read(
        ingest, client, tmp_path):
    root = tmp_path / "2026-08-08_08-08-08"
    write(root, task("t1"))
    rows = [{"task_id": "t1", "replicate_index": 0, "variant_id": "v", "status": "SUCCESS", "total_cost_usd": 0.5},
            {"task_id": "gone", "replicate_index": 0, "variant_id": "v", "status": "ERROR"}]
    whole = orjson.dumps({"run_id": root.name, "task_results": rows})
    (root / "run.json").write_bytes(whole[:40])                               # cut short while being written
    (root / "experiment.json").write_bytes(b'["exp-1"]')                       # JSON, but not an object
    report = ingest(root)
    said = {e.file.rsplit("/", 1)[-1]: e.message for e in report.errors}
    assert sorted(said) == ["experiment.json", "run.json"]
    assert said["run.json"].startswith("could not read this run.json (invalid JSON: ")
    assert "runs it lists with no task.json, each row's bill and cost_complete" in said["run.json"]
    assert said["experiment.json"] == ("could not read this experiment.json (not a JSON object (a list)); its runs are "
                                       "filed under the results id instead of the experiment it names until it can "
                                       "be read")
    # the task.json is read all the same, its bill from the task itself (0.01)
    assert report.created == {f"{root.name}/v/t1/00"}
    run = api_run(client, f"{root.name}/v/t1/00")["run"]
    assert (run["experiment"], run["cost_usd"]) == (root.name, 0.01)
    # written in full, both are read: the row's bill, its row-only run, the experiment's name
    (root / "run.json").write_bytes(whole)
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "exp-1"}))
    report = ingest(root)
    assert report.errors == []
    assert report.created == {f"{root.name}/v/gone/00"}
    run = api_run(client, f"{root.name}/v/t1/00")["run"]
    assert (run["experiment"], run["cost_usd"]) == ("exp-1", 0.5)


# -- every FinalStatus, and one coder_eval does not have ----------------------------------------

# REPORT_SCHEMA.md "FinalStatus": category -> the board's verdict; the lifecycle status
# and stop reason follow the status (a budget or time limit ended it; ERROR and
# BUILD_FAILED never produced a gradeable attempt).
STATUSES = [
    ("SUCCESS", "pass", "completed", "final"), ("FAILURE", "fail", "completed", "final"),
    ("TIMEOUT", "fail", "failed", "budget_time"), ("MAX_TURNS_EXHAUSTED", "fail", "failed", "budget_steps"),
    ("TOKEN_BUDGET_EXCEEDED", "fail", "failed", "budget_tokens"),
    ("COST_BUDGET_EXCEEDED", "fail", "failed", "budget_cost"),
    ("ERROR", "error", "error", "unrecoverable_error"), ("BUILD_FAILED", "error", "error", "unrecoverable_error"),
    ("NOT_GRADED", "not_graded", "completed", "final"),
]


def test_every_final_status_by_its_documented_category(ingest, client, tmp_path):
    root = tmp_path / "statuses"
    for status, *_ in STATUSES:
        write(root, task(status.lower(), status=status, score=None if status == "NOT_GRADED" else 0.0,
                         success_criteria_results=[]))
    write(root, task("brand-new", status="PAUSED", success_criteria_results=[]))
    report = ingest(root)
    assert report.errors == []
    for status, verdict, lifecycle, stop in STATUSES:
        run = api_run(client, f"statuses/v/{status.lower()}/00")["run"]
        assert (run["verdict"], run["source_status"], run["status"], run["stop_reason"]) == (verdict, status, lifecycle,
                                                                                             stop), status
    # a status coder_eval does not have is kept, said, and gives no verdict of its own
    assert [w.message for w in report.warnings] == [
        "task.json: final_status 'PAUSED' is not one of coder_eval's statuses (SUCCESS, FAILURE, TIMEOUT, "
        "MAX_TURNS_EXHAUSTED, TOKEN_BUDGET_EXCEEDED, COST_BUDGET_EXCEEDED, ERROR, BUILD_FAILED, NOT_GRADED): "
        "the verdict is read from the criteria"]
    new = api_run(client, "statuses/v/brand-new/00")["run"]
    assert (new["source_status"], new["verdict"]) == ("PAUSED", "not_graded")
    # run.json's own arithmetic: 1 succeeded of 8 graded (pass + fail + error); NOT_GRADED
    # and the unknown status are in neither side
    stats = client.get("/api/runs").json()["stats"]
    assert (stats["passed"], stats["failed"], stats["errored"], stats["graded"]) == (1, 5, 2, 8)
    assert stats["pass_rate"] == pytest.approx(1 / 8)
    # with no criteria, the page says where a verdict comes from (a TIMEOUT read "it is not graded" beside "fail")
    timeout = page(client.get("/runs/" + quote("statuses/v/timeout/00", safe="")).text)
    assert text(one(timeout, "p.no-criteria")) == (
        "This run declares no success criteria: its verdict, fail, says how it ended (TIMEOUT), not what a criterion found.")
    ungraded = page(client.get("/runs/" + quote("statuses/v/not_graded/00", safe="")).text)
    assert text(one(ungraded, "p.no-criteria")) == "This run declares no success criteria: it is not graded."


# -- steps are coder_eval's assistant turns -----------------------------------------------------

def test_an_agent_that_reports_no_messages_has_the_turns_coder_eval_counted(ingest, client, tmp_path):
    # TurnRecord.messages "may be empty for agents/modes that don't surface message detail";
    # assistant_turn_count (3) still counts the turns, and each command's
    # assistant_turn_index (0 and 2) says which turn issued it. The early stop latched on
    # the second call (tool_call_index 2) in the third turn (sdk_turn_index 3).
    it = {"iteration": 1, "user_input": "go", "agent_output": "all done", "duration_seconds": 2.0,
          "assistant_turn_count": 3, "messages": [], "token_usage": PRICED, "crashed": False,
          "commands": [command("a", 0, "ls"), command("b", 2, "pytest", result_status="unknown",
                                                      execution_started_at=None, execution_completed_at=None,
                                                      duration_ms=None, error_message="no result observed")]}
    doc = task("quiet", iterations=[it], early_stop={
        "reason": "criterion_passed", "deciding_criterion_type": "file_exists", "deciding_criterion_description": "wrote it",
        "armed_criteria": ["file_exists: wrote it"], "sdk_turn_index": 3, "tool_call_index": 2,
        "elapsed_seconds": 1.0, "turns_remaining_at_stop": 7, "gate_threshold": 1.0})
    assert doc["total_assistant_turns"] == 3
    write(tmp_path / "q", doc)
    assert ingest(tmp_path / "q").errors == []
    run = api_run(client, "q/v/quiet/00")
    assert (run["run"]["steps"], run["run"]["tool_calls"]) == (3, 2)
    steps = steps_of(client, "q/v/quiet/00")
    assert [[a["args"]["command"] for a in s["record"]["actions"]] for s in steps] == [["ls"], [], ["pytest"]]
    assert run["early_stop"]["step"] == 3 and steps[2]["record"]["tool_invocations"][0]["call_index"] == 2
    assert steps[2]["record"]["decision"]["rationale"] == "all done"  # the iteration's reply ends its last turn


def test_the_step_count_is_total_assistant_turns_and_a_transcript_that_disagrees_is_said(ingest, client, tmp_path):
    # Neither messages nor command indexes: coder_eval's total_assistant_turns (4) is the count.
    it = {"iteration": 1, "user_input": "go", "agent_output": "x", "duration_seconds": 1.0, "messages": [],
          "commands": [], "token_usage": PRICED}
    write(tmp_path / "c", task("counted", iterations=[it], total_assistant_turns=4))
    report = ingest(tmp_path / "c")
    assert api_run(client, "c/v/counted/00")["run"]["steps"] == 4
    assert [w.message for w in report.warnings] == [
        "task.json: total_assistant_turns is 4 but its transcript holds 1 assistant turn(s); the run's step count "
        "is coder_eval's, 4"]


def test_a_transcript_with_more_turns_than_total_assistant_turns_keeps_coder_evals_count(ingest, client, tmp_path):
    # Three assistant messages (an SDK that sent one reply's parts apart, say) against
    # coder_eval's own total of 2: the run says 2 steps, as coder_eval's report does; the
    # three messages stay readable as steps. It said 3 (the larger of the two).
    msgs = [{"role": "assistant", "message_id": f"m{i}", "content_blocks": [{"type": "text", "text": f"part {i}"}]}
            for i in range(3)]
    it = {"iteration": 1, "user_input": "go", "agent_output": "x", "duration_seconds": 1.0, "messages": msgs,
          "commands": [], "token_usage": PRICED}
    write(tmp_path / "m", task("more", iterations=[it], total_assistant_turns=2))
    report = ingest(tmp_path / "m")
    assert api_run(client, "m/v/more/00")["run"]["steps"] == 2
    assert len(steps_of(client, "m/v/more/00")) == 3
    assert [w.message for w in report.warnings] == [
        "task.json: total_assistant_turns is 2 but its transcript holds 3 assistant turn(s); the run's step count "
        "is coder_eval's, 2"]


def test_the_legacy_turns_key_is_read_as_iterations_for_the_agents_time(ingest, client, tmp_path):
    # `iterations` "accepts legacy alias `turns`"; without run.json the agent's time is the
    # sum of the positive duration_seconds (REPORT_SCHEMA "Agent wall vs end to end"):
    # 1.5 + 2.5 (the -1 and 0 are not timed turns) = 4.0 s.
    its = [dict(turns_of(1), duration_seconds=d) for d in (1.5, -1.0, 0.0, 2.5)]
    doc = task("old", iterations=its)
    doc["turns"] = doc.pop("iterations")
    write(tmp_path / "legacy", doc)
    assert ingest(tmp_path / "legacy").errors == []
    run = api_run(client, "legacy/v/old/00")["run"]
    assert run["agent_elapsed_s"] == pytest.approx(4.0) and run["elapsed_s"] == 4.0
    assert run["steps"] == 4


def test_a_run_with_zero_iterations(ingest, client, tmp_path):
    # An ERROR before the agent's first turn: no turn record, no tokens, no agent time.
    write(tmp_path / "z", task("none", status="ERROR", score=0.0, iterations=[], total_token_usage=None,
                               error_message="sandbox failed to start", success_criteria_results=[]))
    assert ingest(tmp_path / "z").errors == []
    run = api_run(client, "z/v/none/00")["run"]
    assert (run["steps"], run["tool_calls"], run["tokens_total"], run["agent_elapsed_s"], run["cost_usd"]) == (
        0, 0, None, None, None)
    assert run["verdict_reason"] == "error: no gradeable attempt (sandbox failed to start)"


# -- tokens: TokenUsage's buckets ---------------------------------------------------------------

def test_token_usage_with_some_buckets_reads_the_others_as_zero_and_null_as_unknown(ingest, client, tmp_path):
    root = tmp_path / "tok"
    # TokenUsage's buckets default to 0: an older file without the cache buckets read none
    write(root, task("some", total_token_usage={"uncached_input_tokens": 30, "output_tokens": 12}))
    # a file from before the split: input_tokens alone is the uncached input
    write(root, task("legacy", total_token_usage={"input_tokens": 30, "output_tokens": 12,
                                                  "cache_read_input_tokens": 100}))
    # no usage anywhere (total_token_usage and the turn's token_usage null): unknown, not 0
    write(root, task("null", total_token_usage=None, iterations=[dict(turns_of(1), token_usage=None, messages=[])]))
    # the SDK surfaced no usage, but the transcript has its messages: their buckets are
    # TranscriptMessage's defaults (0), which the token invariant ties to a null usage
    zeros = [dict(message(f"turn {i}", [f"t{i}"]), input_tokens=0, output_tokens=0) for i in range(2)]
    write(root, task("zeros", total_token_usage=None,
                     iterations=[dict(turns_of(2), token_usage=None, messages=zeros)]))
    # ... and a message that does carry tokens keeps them (10 + 5, message()'s defaults) on
    # its step, but the run's total is what coder_eval reports: none (its row's
    # total_tokens is null when total_token_usage is), not the sum of what some messages carried
    write(root, task("counted", total_token_usage=None,
                     iterations=[dict(turns_of(2), token_usage=None, messages=[zeros[0], message("turn 1", ["t1"])])]))
    assert ingest(root).errors == []
    some = api_run(client, "tok/v/some/00")["run"]
    assert (some["tokens_input"], some["tokens_output"], some["tokens_total"], some["tokens_cache_read"],
            some["tokens_cache_write"]) == (30, 12, 42, 0, 0)
    legacy = api_run(client, "tok/v/legacy/00")["run"]
    assert (legacy["tokens_input"], legacy["tokens_total"], legacy["tokens_cache_read"]) == (130, 142, 100)
    null = api_run(client, "tok/v/null/00")["run"]
    assert (null["tokens_total"], null["tokens_cache_read"], null["cost_usd"]) == (None, None, None)
    zeros = api_run(client, "tok/v/zeros/00")["run"]
    assert (zeros["steps"], zeros["tokens_input"], zeros["tokens_output"], zeros["tokens_total"]) == (2, None, None, None)
    assert [s["tokens"] for s in steps_of(client, "tok/v/zeros/00")] == [{"input": None, "output": None, "total": None}] * 2
    counted = api_run(client, "tok/v/counted/00")["run"]
    assert (counted["tokens_input"], counted["tokens_output"], counted["tokens_total"]) == (None, None, None)
    assert [s["tokens"]["total"] for s in steps_of(client, "tok/v/counted/00")] == [None, 15]


# -- cost: the whole bill, and when it is a floor ------------------------------------------------

def test_the_bill_without_run_json_counts_every_judge_and_only_judges(ingest, client, tmp_path):
    # coder_eval's row: total = agent + judge + simulator, where judge spend is every
    # JudgeCriterionResult's token_usage.total_cost_usd, post-failure diagnostic judges
    # included; a result is a judge result by result_kind, else by criterion_type. So:
    # 0.01 agent + 0.02 (llm_judge, no result_kind) + 0.03 (post-failure agent_judge) = 0.06;
    # the basic result's token_usage is not a judge's and is not counted.
    judge = {"criterion_type": "llm_judge", "description": "reads well", "score": 1.0,
             "token_usage": {**PRICED, "total_cost_usd": 0.02}}
    basic = {"result_kind": "basic", "criterion_type": "file_exists", "description": "wrote it", "score": 1.0,
             "token_usage": {**PRICED, "total_cost_usd": 5.0}}
    diagnostic = {"result_kind": "judge", "criterion_type": "agent_judge", "description": "looked", "score": 0.0,
                  "token_usage": {**PRICED, "total_cost_usd": 0.03}}
    write(tmp_path / "bill", task("judged", status="ERROR", score=0.0, success_criteria_results=[judge, basic],
                                  post_failure_criteria_results=[diagnostic]))
    assert ingest(tmp_path / "bill").errors == []
    run = api_run(client, "bill/v/judged/00")["run"]
    assert run["cost_usd"] == pytest.approx(0.06) and run["agent_cost_usd"] == pytest.approx(0.01)


def test_a_cost_that_is_a_floor_says_so_and_none_is_unpriced(ingest, client, tmp_path):
    # REPORT_SCHEMA "Missing cost is never fatal": a hard kill (TIMEOUT) lost its in-flight
    # turn, and a turn that used tokens with no cost was not priced; either makes every
    # cost figure a lower bound. A run that priced nothing has no cost (never $0).
    root = tmp_path / "floor"
    write(root, task("killed", status="TIMEOUT", score=0.0))
    unpriced_turn = dict(turns_of(1), token_usage={**PRICED, "total_cost_usd": None})
    write(root, task("part", iterations=[turns_of(1), unpriced_turn]))
    write(root, task("free", iterations=[dict(turns_of(1), token_usage={**PRICED, "total_cost_usd": None})],
                     total_token_usage={**PRICED, "total_cost_usd": None}))
    write(root, task("whole"))
    assert ingest(root).errors == []
    for name, complete in (("killed", False), ("part", False), ("free", False), ("whole", True)):
        assert api_run(client, f"floor/v/{name}/00")["run"]["meta"]["cost_complete"] is complete, name
    head = page(client.get("/runs/" + quote("floor/v/killed/00", safe="")).text)
    assert text(head.select_one(".run-cost")) == "$0.0100 (lower bound)"
    assert text(page(client.get("/runs/" + quote("floor/v/whole/00", safe="")).text).select_one(".run-cost")) == "$0.0100"
    assert text(page(client.get("/runs/" + quote("floor/v/free/00", safe="")).text).select_one(".run-cost")) == "unpriced"


def test_a_run_json_row_decides_whether_the_cost_is_complete(ingest, client, tmp_path):
    # run.json's row carries coder_eval's own cost_complete: it wins over the task.json.
    root = tmp_path / "2026-02-02_02-02-02"
    write(root, task("t", variant="default"))
    rows = [{"task_id": "t", "replicate_index": 0, "variant_id": "default", "status": "SUCCESS", "weighted_score": 1.0,
             "total_cost_usd": 0.25, "agent_cost_usd": 0.01, "cost_complete": False, "agent_wall_ms": 1500.0}]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows}))
    assert ingest(root).errors == []
    run = api_run(client, f"{root.name}/default/t/00")["run"]
    assert (run["cost_usd"], run["agent_cost_usd"], run["meta"]["cost_complete"], run["agent_elapsed_s"]) == (
        0.25, 0.01, False, 1.5)


def test_a_row_without_the_flag_is_complete_and_a_dialog_without_a_row_is_a_floor(ingest, client, tmp_path):
    # results.py `row_cost_incomplete`: a row that does not say is read as priced, never
    # inferred from the task.json (here a TIMEOUT, which alone would make it a floor).
    root = tmp_path / "2026-02-03_02-02-02"
    write(root, task("old", variant="default", status="TIMEOUT", score=0.0))
    rows = [{"task_id": "old", "replicate_index": 0, "variant_id": "default", "status": "TIMEOUT",
             "weighted_score": 0.0, "total_cost_usd": 0.02, "agent_cost_usd": 0.01}]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows}))
    # Without run.json, a dialog's simulator tokens are spend only coder_eval's rate card
    # prices: the bill read from the task.json leaves them out, so it is a floor.
    sim = {"n_trials": 1, "replicate_index": 0, "stop_reason": "criteria_passed", "simulator_input_tokens": 2000,
           "simulator_output_tokens": 300, "total_turns": 2, "simulator_model": "m"}
    write(tmp_path / "alone", task("dialog", simulation=sim))
    write(tmp_path / "alone", task("single", simulation=None))
    assert ingest(root).errors == [] and ingest(tmp_path / "alone").errors == []
    assert api_run(client, f"{root.name}/default/old/00")["run"]["meta"]["cost_complete"] is True
    assert api_run(client, "alone/v/dialog/00")["run"]["meta"]["cost_complete"] is False
    assert api_run(client, "alone/v/single/00")["run"]["meta"]["cost_complete"] is True
    assert text(page(client.get("/runs/" + quote("alone/v/dialog/00", safe="")).text).select_one(".run-cost")) == \
        "$0.0100 (lower bound)"


def _dialog(stop_reason: str, status: str = "FAILURE", **fields: Any) -> dict[str, Any]:
    """A dialog of three exchanges (iterations of 4, 5 and 3 turns) under max_turns 6."""
    sim = {"n_trials": 1, "replicate_index": 0, "stop_reason": stop_reason, "simulator_input_tokens": 10,
           "simulator_output_tokens": 5, "total_turns": 3, "simulator_model": "m"}
    its = [{**turns_of(n), "iteration": i + 1} for i, n in enumerate((4, 5, 3))]
    return task(f"d-{stop_reason}", status=status, score=0.0 if status != "SUCCESS" else 1.0, iterations=its,
                simulation=sim, task_config={"resolved": {"run_limits": {"max_turns": 6}}}, **fields)


def test_a_dialog_says_why_it_ended_and_its_turn_cap_is_per_agent_call(ingest, client, tmp_path):
    # SimulationTelemetry.stop_reason says why a dialog ended; "final" (the agent ended its
    # turn) would be wrong for one cut off at its max_turns. max_turns caps num_turns, "the
    # unit max_turns caps" per communicate() call: 12 turns in all under a cap of 6 is no
    # breach; the longest call, 5 turns, is 83% of it.
    root = tmp_path / "dialogs"
    for reason in ("max_turns", "criteria_passed", "stop_token", "agent_max_turns", "error", "budget"):
        write(root, _dialog(reason, status="SUCCESS" if reason == "criteria_passed" else "FAILURE"))
    write(root, _dialog("max_turns", status="TIMEOUT") | {"task_id": "d-timeout"})
    assert ingest(root).errors == []
    # the dialog's max_turns counts its exchanges (total_turns), not the agent's turns that
    # run_limits.max_turns caps and the step budget shows: the dialog's harness ended it
    want = {"max_turns": ("env_terminal", "the dialog reached its max_turns of user↔agent exchanges"),
            "criteria_passed": ("success", "the dialog ended when the success criteria passed"),
            "stop_token": ("env_terminal", "the simulated user ended the dialog (stop token)"),
            "agent_max_turns": ("budget_steps", "the agent reached its max_turns within a dialog turn"),
            "error": ("unrecoverable_error", "the dialog ended on an error"),
            # no counterpart in the trace format: kept as coder_eval wrote it
            "budget": ("budget", "the dialog ended: budget (coder_eval's simulation.stop_reason)")}
    for reason, (stop, detail) in want.items():
        run = api_run(client, f"dialogs/v/d-{reason}/00")["run"]
        assert (run["stop_reason"], run["stop_detail"], run["steps"]) == (stop, detail, 12), reason
    # the status says more than the dialog: a time-out is a time budget stop
    assert api_run(client, "dialogs/v/d-timeout/00")["run"]["stop_reason"] == "budget_time"
    # the criteria passed live, the grading failed it: no success badge beside a fail
    write(root, _dialog("criteria_passed", status="FAILURE") | {"task_id": "d-regraded"})
    # a call the cap ended reports num_turns = max_turns + 1, with fewer messages shown
    capped = _dialog("agent_max_turns") | {"task_id": "d-capped"}
    capped["iterations"][0]["num_turns"] = 7
    write(root, capped)
    assert ingest(root).errors == []
    run = api_run(client, "dialogs/v/d-regraded/00")["run"]
    assert (run["stop_reason"], run["verdict"]) == ("env_terminal", "fail")
    def steps_gauge(run_id: str) -> str:
        return text(page(client.get("/runs/" + quote(run_id, safe="")).text).select_one(".gauge"))

    assert steps_gauge("dialogs/v/d-max_turns/00") == (
        "steps (longest call) 5 of 6 (83%) the limit caps each agent call; 12 steps in all")
    assert steps_gauge("dialogs/v/d-capped/00") == (
        "steps (longest call) 7 of 6 (117%) the limit caps each agent call; 12 steps in all")
    # one call: the run's steps are what the cap measures
    write(root, task("single", task_config={"resolved": {"run_limits": {"max_turns": 6}}}, iterations=[turns_of(3)]))
    assert ingest(root).errors == []
    assert steps_gauge("dialogs/v/single/00") == "steps 3 of 6 (50%)"


def test_a_time_out_measures_the_time_limit_end_to_end(ingest, client, tmp_path):
    # The agent's own time without run.json is the sum of the iterations' positive
    # durations: the iteration the 600 s limit cut off recorded none, so it reads 40 s.
    # The time gauge of a run stopped for time measures the 605 s it took end to end.
    root = tmp_path / "timeouts"
    cut = {**turns_of(1), "iteration": 2, "duration_seconds": 0.0}
    write(root, task("slow", status="TIMEOUT", score=0.0, duration_seconds=605.0,
                     iterations=[{**turns_of(2), "duration_seconds": 40.0}, cut],
                     task_config={"resolved": {"run_limits": {"task_timeout": 600}}}))
    write(root, task("quick", status="FAILURE", score=0.0, duration_seconds=605.0,
                     iterations=[{**turns_of(2), "duration_seconds": 40.0}],
                     task_config={"resolved": {"run_limits": {"task_timeout": 600}}}))
    assert ingest(root).errors == []

    def time_gauge(run_id: str) -> str:
        gauges = page(client.get("/runs/" + quote(run_id, safe="")).text).select(".gauge")
        return next(text(g) for g in gauges if text(g).startswith("time"))

    assert api_run(client, "timeouts/v/slow/00")["run"]["agent_elapsed_s"] == 40.0
    assert time_gauge("timeouts/v/slow/00") == (
        "time (end to end) 10 min 5 s of 10 min 0 s (101%) the run timed out; the agent's own time, 40.0 s, "
        "leaves out the call cut off")
    # a run that was not stopped for time keeps the agent's own time
    assert time_gauge("timeouts/v/quick/00") == "time 40.0 s of 10 min 0 s (7%)"
    # a TIMEOUT well under task_timeout: run_limits.turn_timeout (each agent call) ended it,
    # and the gauge said "ok" beside the time-limit stop (found by a coder_eval audit)
    write(root, task("call", status="TIMEOUT", score=0.0, duration_seconds=318.0,
                     iterations=[{**turns_of(2), "duration_seconds": 10.0}, cut],
                     task_config={"resolved": {"run_limits": {"task_timeout": 600, "turn_timeout": 300}}}))
    write(root, task("nolimit", status="TIMEOUT", score=0.0, duration_seconds=318.0,
                     iterations=[{**turns_of(2), "duration_seconds": 10.0}, cut]))
    assert ingest(root).errors == []
    assert time_gauge("timeouts/v/call/00") == (
        "time (end to end) 5 min 18 s of 10 min 0 s (53%) the run timed out; the agent's own time, 10.0 s, leaves "
        "out the call cut off; the time limit that stopped it is each agent call's limit, 5 min 0 s")
    assert time_gauge("timeouts/v/nolimit/00") == (
        "time (end to end) 5 min 18 s (no limit; the run timed out; the agent's own time, 10.0 s, leaves out the call "
        "cut off; the time limit that stopped it is a limit this gauge does not measure)")
    # near the run's own limit, the run's limit is taken to be the one: no word about another
    assert "stopped it" not in time_gauge("timeouts/v/slow/00")


def test_a_dialog_without_a_row_marks_the_bill_a_floor_but_not_the_agents_cost(ingest, client, tmp_path):
    # Only the simulator's spend is unpriced there: the agent's own cost is whole, so a
    # comparison by agent cost (coder_eval's harness figure) has no lower bound in it.
    root = tmp_path / "2026-02-03_02-02-03"
    sim = {"n_trials": 1, "replicate_index": 0, "stop_reason": "criteria_passed", "simulator_input_tokens": 2000,
           "simulator_output_tokens": 300, "total_turns": 2, "simulator_model": "m"}
    write(root, task("dialog", "a", simulation=sim))
    write(root, task("dialog", "b", simulation=None))
    assert ingest(root).errors == []
    meta = api_run(client, f"{root.name}/a/dialog/00")["run"]["meta"]
    assert (meta["cost_complete"], meta["agent_cost_complete"]) == (False, True)
    s = client.get("/api/compare", params={"experiment": root.name, "a": "a", "b": "b"}).json()["summary"]
    assert (s["cost_usd"]["lower_bound"], s["agent_cost_usd"]["lower_bound"]) == (1, 0)
    pair = page(client.get("/pair", params={"a": f"{root.name}/a/dialog/00", "b": f"{root.name}/b/dialog/00"}).text)
    assert [text(c) for c in pair.select(".pair-cost")] == ["cost $0.0100 (lower bound)", "cost $0.0100"]
    # with a run.json row saying the cost is incomplete, every cost figure is a floor
    rows = [{"task_id": "dialog", "replicate_index": 0, "variant_id": v, "status": "SUCCESS", "weighted_score": 1.0,
             "total_cost_usd": 0.02, "agent_cost_usd": 0.01, "cost_complete": v == "b"} for v in ("a", "b")]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows}))
    assert ingest(root).errors == []
    s = client.get("/api/compare", params={"experiment": root.name, "a": "a", "b": "b"}).json()["summary"]
    assert (s["cost_usd"]["lower_bound"], s["agent_cost_usd"]["lower_bound"]) == (1, 1)
    head = page(client.get("/runs/" + quote(f"{root.name}/a/dialog/00", safe="")).text).select_one(".run-cost")
    assert text(head) == "$0.0200 (lower bound) (agent $0.0100, a lower bound)"


def test_the_cost_budget_gauge_shows_the_agents_spend_never_the_judges(ingest, client, tmp_path):
    # REPORT_SCHEMA: run_limits.max_usd gates on the agent's spend alone (judge and
    # simulator spend is not known mid-run). An unpriced agent is "unpriced", even when a
    # priced judge makes the bill larger than the cap.
    judge = {"criterion_type": "llm_judge", "description": "reads well", "score": 1.0,
             "token_usage": {**PRICED, "total_cost_usd": 0.0225}}
    limits = {"task_config": {"resolved": {"run_limits": {"max_usd": 0.02}}}}
    unpriced = {**PRICED, "total_cost_usd": None}
    write(tmp_path / "cap", task("unpriced", success_criteria_results=[judge], total_token_usage=unpriced,
                                 iterations=[dict(turns_of(1), token_usage=unpriced)], **limits))
    write(tmp_path / "cap", task("priced", success_criteria_results=[judge], **limits))
    assert ingest(tmp_path / "cap").errors == []
    for name, used in (("unpriced", "unpriced"), ("priced", "$0.0100")):
        data = api_run(client, f"cap/v/{name}/00")
        assert data["run"]["cost_usd"] == pytest.approx(0.0225 if name == "unpriced" else 0.0325), name
        [cost] = [g for g in data["budget_gauges"] if g["name"] == "cost"]
        assert (cost["label"], cost["used"], cost["limit"]) == ("cost (agent)", used, "$0.0200"), name
        assert (cost["gauge"] or {}).get("level") != "over", name  # no gauge at all for unpriced


def test_compare_shows_the_agents_cost_beside_the_bill(ingest, client, tmp_path):
    # REPORT_SCHEMA: agent_cost_usd is "the harness-vs-harness comparison figure"; the
    # bill adds judge spend both sides pay alike, which makes them look closer. Agent
    # 0.05 against 0.10 with a 0.05 judge each: the bill saves 1/3, the agent's spend 1/2.
    root = tmp_path / "2026-03-03_03-03-03"
    for variant, agent in (("a", 0.05), ("b", 0.10)):
        judge = {"criterion_type": "llm_judge", "description": "reads well", "score": 1.0,
                 "token_usage": {**PRICED, "total_cost_usd": 0.05}}
        usage = {**PRICED, "total_cost_usd": agent}
        write(root, task("t", variant, success_criteria_results=[judge], total_token_usage=usage,
                         iterations=[dict(turns_of(1), token_usage=usage)]))
    assert ingest(root).errors == []
    s = client.get("/api/compare", params={"experiment": root.name, "a": "a", "b": "b"}).json()["summary"]
    assert (s["cost_usd"]["a"], s["cost_usd"]["b"]) == (pytest.approx(0.10), pytest.approx(0.15))
    assert s["cost_usd"]["saved_pct"] == pytest.approx(100 / 3)
    assert (s["agent_cost_usd"]["a"], s["agent_cost_usd"]["b"]) == (pytest.approx(0.05), pytest.approx(0.10))
    assert s["agent_cost_usd"]["saved_pct"] == pytest.approx(50.0)
    html = page(client.get("/compare", params={"experiment": root.name, "a": "a", "b": "b"}).text)
    bars = {text(t) for t in html.select(".bar-value")}
    assert {"a $0.0500", "b $0.1000", "a $0.1000", "b $0.1500"} <= bars


def test_compare_says_how_many_pairs_hold_a_cost_that_is_a_lower_bound(ingest, client, tmp_path):
    # REPORT_SCHEMA: consumers should treat any cost as a lower bound when cost_complete is
    # false; a total over such a pair is one too. Task t1's smoke run priced one turn of two.
    root = tmp_path / "2026-03-04_03-03-03"
    unpriced = dict(turns_of(1), token_usage={**PRICED, "total_cost_usd": None})
    write(root, task("t1", "smoke", iterations=[turns_of(1), unpriced]))
    for variant, name in (("e2e", "t1"), ("smoke", "t2"), ("e2e", "t2")):
        write(root, task(name, variant))
    assert ingest(root).errors == []
    params = {"experiment": root.name, "a": "smoke", "b": "e2e"}
    s = client.get("/api/compare", params=params).json()["summary"]
    assert (s["cost_usd"]["pairs"], s["cost_usd"]["lower_bound"], s["agent_cost_usd"]["lower_bound"]) == (2, 1, 1)
    assert s["tokens"]["lower_bound"] == 0
    notes = [text(p) for p in page(client.get("/compare", params=params).text).select(".cost-floor-note")]
    assert notes == ["cost: 1 pair(s) with a cost that is a lower bound (some spend could not be priced): the totals "
                     "are lower bounds too.",
                     "agent cost: 1 pair(s) with a cost that is a lower bound (some spend could not be priced): the "
                     "totals are lower bounds too."]
    md = client.get("/api/compare", params={**params, "format": "md"}).text
    assert "| cost (1 pair with a cost that is a lower bound) |" in md
    # the overview's median cost of the smoke variant is over one lower bound too
    [exp] = client.get("/api/experiments").json()["experiments"]
    assert {v["variant"]: v["cost_lower_bounds"] for v in exp["variants"]} == {"smoke": 1, "e2e": 0}
    home = page(client.get("/").text)
    assert [text(n) for n in home.select("tr.variant-row[data-variant='smoke'] .cost-floor-note")] == ["1 lower bound"]
    assert home.select("tr.variant-row[data-variant='e2e'] .cost-floor-note") == []


# -- criteria: gating, weights, results and the configuration -----------------------------------

def test_a_result_written_before_gating_existed_is_informational_when_its_weight_is_zero(ingest, client, tmp_path):
    # CriterionResult.gating "defaults True so results persisted before this field existed
    # read back as gating" -- but coder_eval's own gate (all_criteria_passed) skipped a
    # weight-0 criterion then as now. The configured weight says which it was: the
    # criteria alone pass, as coder_eval did.
    doc = task("old-info", success_criteria_results=[
        {"criterion_type": "file_exists", "description": "wrote it", "score": 1.0},
        {"criterion_type": "command_executed", "description": "listed (informational)", "score": 0.0}],
        task_config={"resolved": {"success_criteria": [
            {"type": "file_exists", "description": "wrote it", "weight": 1.0},
            {"type": "command_executed", "description": "listed (informational)", "weight": 0.0}]}})
    write(tmp_path / "g", doc)
    assert ingest(tmp_path / "g").errors == []
    data = api_run(client, "g/v/old-info/00")
    assert (data["run"]["verdict"], data["run"]["criteria_verdict"]) == ("pass", "pass")
    assert [(c["id"], c["gating"], c["informational"]) for c in data["criteria"]] == [
        ("file_exists: wrote it", True, False), ("command_executed: listed (informational)", False, True)]
    assert "criteria alone say" not in run_page(client, "g/v/old-info/00")


def test_criteria_with_and_without_results_non_gating_and_not_evaluated(ingest, client, tmp_path):
    # Four declared criteria: one passed, one failed but not gating (gating: false), one
    # not_evaluated (the check did not run: no score, distinct from an evaluated 0.0), one
    # declared with no result. coder_eval's SUCCESS stands; the criteria alone cannot say
    # pass: a gating criterion has no result.
    results = [
        {"criterion_type": "file_exists", "description": "wrote it", "score": 1.0, "gating": True},
        {"criterion_type": "command_executed", "description": "was brief", "score": 0.0, "gating": False},
        {"criterion_type": "llm_judge", "description": "reads well", "score": 0.0, "evaluation_status": "not_evaluated",
         "gating": True, "details": None}]
    config = [{"type": "file_exists", "description": "wrote it", "weight": 2.0},
              {"type": "command_executed", "description": "was brief", "weight": 0.0},
              {"type": "llm_judge", "description": "reads well", "weight": 1.0},
              {"type": "run_command", "description": "tests pass", "weight": 1.0, "pass_threshold": 0.5}]
    write(tmp_path / "c", task("mix", success_criteria_results=results, task_config={"resolved": {"success_criteria": config}}))
    assert ingest(tmp_path / "c").errors == []
    data = api_run(client, "c/v/mix/00")
    got = [(c["id"], c["graded"], c["score"], c["gating"], c["pass_threshold"]) for c in data["criteria"]]
    assert got == [("file_exists: wrote it", True, 1.0, True, 0.9), ("command_executed: was brief", True, 0.0, False, 0.9),
                   ("llm_judge: reads well", False, None, True, 0.9), ("run_command: tests pass", False, None, True, 0.5)]
    assert data["run"]["verdict"] == "pass" and data["run"]["criteria_verdict"] == "fail"


def test_a_weighted_armed_gate_with_unequal_weights(ingest, client, tmp_path):
    # armed_criteria_passed: binarise each armed criterion, weight it, compare with the
    # gate: A (weight 3) passed, B (weight 1) failed: 3 / (3 + 1) = 0.75 >= 0.75: a pass.
    # The non-armed gating criterion that failed is advisory.
    results = [{"criterion_type": "command_executed", "description": "A", "score": 1.0},
               {"criterion_type": "command_executed", "description": "B", "score": 0.0},
               {"criterion_type": "file_exists", "description": "C", "score": 0.0}]
    config = [{"type": "command_executed", "description": "A", "weight": 3.0, "stop_early": {"on_pass": "stop"}},
              {"type": "command_executed", "description": "B", "weight": 1.0, "stop_early": {"on_pass": "continue"}},
              {"type": "file_exists", "description": "C", "weight": 1.0}]
    early = {"reason": "criterion_passed", "deciding_criterion_type": "command_executed", "deciding_criterion_description": "A",
             "armed_criteria": ["command_executed: A", "command_executed: B"], "sdk_turn_index": 1, "tool_call_index": 1,
             "elapsed_seconds": 0.2, "turns_remaining_at_stop": None, "gate_threshold": 0.75}
    write(tmp_path / "w", task("weighted", score=0.6, success_criteria_results=results, early_stop=early,
                               task_config={"resolved": {"success_criteria": config,
                                                         "run_limits": {"stop_early_gate_threshold": 0.75}}}))
    assert ingest(tmp_path / "w").errors == []
    data = api_run(client, "w/v/weighted/00")
    assert (data["run"]["verdict"], data["run"]["criteria_verdict"], data["run"]["gated_on"]) == ("pass", "pass", "armed")
    assert [(c["id"], c["armed"], c["advisory"]) for c in data["criteria"]] == [
        ("command_executed: A", True, False), ("command_executed: B", True, False), ("file_exists: C", False, True)]
    assert data["early_stop"]["turns_remaining"] is None  # max_turns unset: no upper bound


def test_the_first_releases_stop_when_arms_a_criterion_with_the_switch_on(ingest, client, tmp_path):
    # The early-stop design (seeds/coder-eval-early-stop-pr.md): `stop_when: pass|fail|decided`
    # on a criterion, armed when `run_limits.stop_early` is true (off by default).
    results = [{"criterion_type": "skill_triggered", "description": "used the skill", "score": 1.0}]
    for name, switch in (("on", True), ("off", None)):
        write(tmp_path / "pr", task(name, success_criteria_results=results, task_config={"resolved": {
            "success_criteria": [{"type": "skill_triggered", "description": "used the skill", "stop_when": "pass"}],
            "run_limits": {"stop_early": switch}}}))
    assert ingest(tmp_path / "pr").errors == []
    on = api_run(client, "pr/v/on/00")
    assert [(c["stop_when"], c["armed"]) for c in on["criteria"]] == [("pass", True)]
    # with the switch off it is not armed, but armable as it says (the policy lab replays it)
    off = api_run(client, "pr/v/off/00")
    assert [(c["stop_when"], c["armed"]) for c in off["criteria"]] == [(None, False)]
    assert off["run"]["start_record"]["criteria"][0]["armable_as"] == "pass"


# -- early stop: each reason -----------------------------------------------------------------------

@pytest.mark.parametrize("reason,live", [("criterion_passed", "pass"), ("criterion_failed", "fail"),
                                         ("decision_budget_exceeded", "fail"), ("criterion_vetoed", None)])
def test_each_early_stop_reason_and_the_deciding_criterions_live_verdict(ingest, client, tmp_path, reason, live):
    # EarlyStopReason: a pass-stop, a native fail, and a decision budget that expired
    # undecided (an effective fail); a reason coder_eval does not have implies nothing.
    early = {"reason": reason, "deciding_criterion_type": "file_exists", "deciding_criterion_description": "wrote it",
             "armed_criteria": ["file_exists: wrote it"], "sdk_turn_index": 2, "tool_call_index": 2,
             "elapsed_seconds": 0.5, "turns_remaining_at_stop": 8}  # gate_threshold left to its default (1.0)
    status = "SUCCESS" if reason == "criterion_passed" else "FAILURE"
    score = 1.0 if status == "SUCCESS" else 0.0
    write(tmp_path / "es", task("e", status=status, score=score, iterations=[turns_of(2)], early_stop=early,
                                success_criteria_results=[{"criterion_type": "file_exists", "description": "wrote it",
                                                           "score": score}]))
    report = ingest(tmp_path / "es")
    data = api_run(client, "es/v/e/00")
    assert (data["early_stop"]["reason"], data["early_stop"]["step"], data["run"]["stop_reason"]) == (reason, 2, "early_stop")
    assert data["criteria"][0]["live_verdict"] == live
    assert data["run"]["verdict"] == ("pass" if status == "SUCCESS" else "fail")
    assert bool(report.warnings) is (live is None)


def test_an_early_stop_shows_at_the_step_of_its_deciding_call_when_replies_come_in_parts(ingest, client, tmp_path):
    # An SDK that sends one reply's text and its tool use as two messages: coder_eval counts
    # one turn per reply (its watcher: one TurnStart per message id), the board one step per
    # message. Three replies, six messages; the stop latched on call 2, in the second reply:
    # sdk_turn_index 2, but the call is in message 4, the step the board shows.
    messages, commands = [], []
    for i in range(3):
        messages.append(message(f"thinking about {i}", []))
        messages.append(dict(message("", [f"t{i}"]), content_blocks=[]))
        commands.append(command(f"t{i}", None, f"step {i}"))
    commands[1] = dict(commands[1], result_status="unknown", execution_completed_at=None)
    it = dict(turns_of(1), assistant_turn_count=6, messages=messages, commands=commands)
    early = {"reason": "criterion_passed", "deciding_criterion_type": "file_exists",
             "deciding_criterion_description": "wrote it", "armed_criteria": ["file_exists: wrote it"],
             "sdk_turn_index": 2, "tool_call_index": 2, "elapsed_seconds": 0.5}
    write(tmp_path / "parts", task("p", iterations=[it], early_stop=early, total_assistant_turns=6))
    assert ingest(tmp_path / "parts").errors == []
    data = api_run(client, "parts/v/p/00")
    assert (data["run"]["steps"], data["early_stop"]["step"], data["early_stop"]["tool_call_index"]) == (6, 4, 2)
    assert data["criteria"][0]["decided_at_step"] == 4
    steps = steps_of(client, "parts/v/p/00")
    assert [s["step"] for s in steps if s["record"]["actions"]] == [2, 4, 6]
    assert "stopped early during this call" in steps[3]["record"]["action_results"][0]["note"]


# -- run.json rows -------------------------------------------------------------------------------

def test_a_run_json_row_without_variant_id_is_its_task_jsons_row(ingest, client, tmp_path):
    # coder_eval writes a row's variant_id as null when its caller named none; the task.json
    # says "default". The row is that task's (its agent time and bill), not a second run.
    root = tmp_path / "2026-03-03_03-03-03"
    write(root, task("solo", variant="default"))
    rows = [{"task_id": "solo", "replicate_index": None, "variant_id": None, "status": "SUCCESS", "weighted_score": 1.0,
             "agent_wall_ms": 1250.0, "total_cost_usd": 0.04, "agent_cost_usd": 0.01, "cost_complete": True}]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "tasks_run": 1, "task_results": rows}))
    report = ingest(root)
    assert report.errors == [] and report.warnings == []
    assert report.created == {f"{root.name}/default/solo/00"}
    run = api_run(client, f"{root.name}/default/solo/00")["run"]
    assert (run["agent_elapsed_s"], run["cost_usd"], run["agent_cost_usd"], run["steps"]) == (1.25, 0.04, 0.01, 1)
    assert client.get("/api/runs").json()["stats"]["runs"] == 1


def test_a_row_only_run_from_an_older_run_json_reads_its_turn_digest(ingest, client, tmp_path):
    # A run.json written before agent_wall_ms: "Readers derive agent wall from the row's
    # iterations[].duration_seconds with the same rule" (1.0 + 3.0; the -1 is not a timed
    # turn). Its steps are its assistant turns, 2 + 3 = 5, as a task.json counts them (the
    # row's total_turns, 7, counts SDK calls). It stopped early: the row says so and why.
    root = tmp_path / "2026-04-04_04-04-04"
    (root / "default").mkdir(parents=True)
    digest = [{"iteration": 1, "duration_seconds": 1.0, "command_count": 2, "assistant_turn_count": 2, "crashed": True,
               "crash_reason": "killed"},
              {"iteration": 1, "duration_seconds": -1.0, "command_count": 0, "assistant_turn_count": 0, "crashed": False},
              {"iteration": 2, "duration_seconds": 3.0, "command_count": 3, "assistant_turn_count": 3, "crashed": False}]
    row = {"task_id": "gone", "replicate_index": 0, "variant_id": "default", "status": "FAILURE", "weighted_score": 0.0,
           "duration": 9.0, "iteration_count": 2, "iterations": digest, "input_tokens": 50, "output_tokens": 10,
           "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100, "total_tokens": 165, "total_cost_usd": None,
           "agent_cost_usd": None, "total_turns": 7, "actual_commands": 5, "stopped_early": True,
           "early_stop_reason": "criterion_failed", "turns_remaining_at_stop": 3, "gate_threshold": 1.0}
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": [row]}))
    assert ingest(root).errors == []
    data = api_run(client, f"{root.name}/default/gone/00")
    run = data["run"]
    assert (run["steps"], run["tool_calls"], run["agent_elapsed_s"], run["elapsed_s"]) == (5, 5, 4.0, 9.0)
    # the row's input_tokens is the uncached input: 50 + 5 + 100 in, 10 out = 165 = its total_tokens
    assert (run["tokens_input"], run["tokens_total"], run["cost_usd"]) == (155, 165, None)
    assert (run["stop_reason"], run["early_stopped"], data["early_stop"]["reason"], data["early_stop"]["turns_remaining"]) == (
        "early_stop", True, "criterion_failed", 3)


def test_a_row_of_the_wrong_type_is_named_and_its_run_kept(ingest, client, tmp_path):
    root = tmp_path / "2026-05-05_05-05-05"
    (root / "default").mkdir(parents=True)
    rows = [{"task_id": "r1", "replicate_index": 0, "variant_id": "default", "status": "ERROR", "weighted_score": "none",
             "duration": 2.0, "error_message": "docker daemon is not responding"}]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows}))
    report = ingest(root)
    assert report.errors == []
    assert [w.message for w in report.warnings] == [
        "run.json row: field 'weighted_score' should be a number or null, not a string ('none'); read as not given, "
        "the rest kept"]
    run = api_run(client, f"{root.name}/default/r1/00")["run"]
    assert (run["verdict"], run["score"], run["elapsed_s"]) == ("error", None, 2.0)


# -- task ids, messages and fields coder_eval may add ------------------------------------------

def test_hostile_and_unicode_task_ids_and_messages_each_keep_their_run(ingest, client, tmp_path):
    root = tmp_path / "2026-06-06_06-06-06"
    ids = {"nul": "a\x00b", "unicode": "tâche-测试-😀", "markup": "<script>alert(1)</script>", "rtl": "\u202eevil"}
    for folder, task_id in ids.items():
        write(root, task(task_id, error_message="<img src=x onerror=alert(1)> \x00 done", status="FAILURE", score=0.0),
              folder=folder)
    # a row with no task.json and a task id longer than a run id may be: its own run all the same
    long_id = "L" * 300
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": [
        {"task_id": long_id, "replicate_index": 0, "variant_id": "v", "status": "ERROR", "weighted_score": 0.0}]}))
    report = ingest(root)
    assert report.errors == []
    assert len(report.created) == 5
    by_task = {api_run(client, rid)["run"]["task_id"]: rid for rid in report.created}
    assert by_task[ids["unicode"]] == f"{root.name}/v/{ids['unicode']}/00"
    assert by_task["a\ufffdb"] == f"{root.name}/v/a\ufffdb/00"  # NUL: U+FFFD stands in, in the id and the task
    long_run = by_task[long_id]
    assert len(long_run) == 200 and long_run.startswith(f"{root.name}/v/LLL")
    page_text = client.get("/runs/" + quote(by_task[ids["markup"]], safe="")).text
    assert "<script>alert(1)</script>" not in page_text and "<img src=x" not in page_text
    assert client.get("/api/runs").json()["stats"]["runs"] == 5


def test_fields_coder_eval_may_add_are_ignored_without_a_warning(ingest, client, tmp_path):
    # Forward compatibility: unknown keys on the task, its criteria (CriterionResult allows
    # extra fields), its turns and commands, a result_kind of a later version, and the
    # row keys of later versions (integrity_*).
    doc = task("future", score=0.8, integrity={"verdict": "clean"}, provider_errors=[],
               success_criteria_results=[{"result_kind": "rubric", "criterion_type": "rubric_judge",
                                          "description": "graded", "score": 0.8, "pass_threshold": 0.7,
                                          "rubric": {"x": 1}}],
               iterations=[dict(turns_of(2), provider_call_costs=[{"cost_usd": 0.001}], harness_startup_ms=1.0)])
    root = tmp_path / "2026-07-07_07-07-07"
    write(root, doc)
    rows = [{"task_id": "future", "replicate_index": 0, "variant_id": "v", "status": "SUCCESS", "weighted_score": 0.8,
             "integrity_verdict": "clean", "integrity_voided": False, "agent_wall_ms": 10.0}]
    (root / "run.json").write_bytes(orjson.dumps({"run_id": root.name, "task_results": rows, "new_roll_up": {"a": 1}}))
    report = ingest(root)
    assert report.errors == [] and report.warnings == []
    data = api_run(client, f"{root.name}/v/future/00")
    assert (data["run"]["verdict"], data["run"]["steps"], data["run"]["score"]) == ("pass", 2, 0.8)
    assert [(c["id"], c["score"], c["passed"]) for c in data["criteria"]] == [("rubric_judge: graded", 0.8, True)]


# -- the figures across runs: pass rates, replicates, tasks on one side only ---------------------

def test_a_run_that_measured_nothing_but_graded_everything_has_coder_evals_pass_rate(ingest, client, tmp_path):
    # RunSummary.pass_rate is None only when nothing_was_measured(not_graded, measured):
    # ungraded rows AND no row with a weighted_score. A night whose every task errored with
    # no score (no NOT_GRADED row) is a measured 0% with an error share of 100%.
    root = tmp_path / "infra"
    for name in ("a", "b", "c"):
        write(root, task(name, status="ERROR", score=None, success_criteria_results=[]))
    assert ingest(root).errors == []
    stats = client.get("/api/runs").json()["stats"]
    assert (stats["graded"], stats["errored"], stats["measured"], stats["not_graded"], stats["pass_rate"]) == (3, 3, 0, 0, 0.0)
    variant = client.get("/api/experiments").json()["experiments"][0]["variants"][0]
    assert (variant["pass_rate"], variant["decided"]) == (0.0, 3)
    # one NOT_GRADED row makes it an execute night: nothing measured, no rate
    write(root, task("d", status="NOT_GRADED", score=None, success_criteria_results=[]))
    assert ingest(root).errors == []
    stats = client.get("/api/runs").json()["stats"]
    assert (stats["graded"], stats["not_graded"], stats["pass_rate"]) == (3, 1, None)


def test_replicates_that_disagree_and_tasks_on_one_side_only_through_compare(ingest, client, tmp_path):
    # smoke: t1 replicates 00 pass / 01 fail (they disagree), t2 only in smoke, t4 with no
    # cost; e2e: t1 00 and 01 pass, t3 only in e2e, t4 priced. Pairs by (task, replicate):
    # (t1,0) pass/pass, (t1,1) fail/pass, (t4,0) fail/fail -> 3 pairs, agreement 2 of 3.
    # Steps: smoke 1 + 1 + 1 = 3, e2e 3 + 3 + 4 = 10, saved 70%. Cost: the t4 pair has no
    # smoke cost, so only the two t1 pairs count: 0.01 + 0.01 against 0.01 + 0.01.
    root = tmp_path / "2026-08-08_08-08-08"
    unpriced = {**PRICED, "total_cost_usd": None}
    for variant, task_id, rep, status, n, usage in (
            ("smoke", "t1", 0, "SUCCESS", 1, PRICED), ("smoke", "t1", 1, "FAILURE", 1, PRICED),
            ("smoke", "t2", 0, "SUCCESS", 1, PRICED), ("smoke", "t4", 0, "FAILURE", 1, unpriced),
            ("e2e", "t1", 0, "SUCCESS", 3, PRICED), ("e2e", "t1", 1, "SUCCESS", 3, PRICED),
            ("e2e", "t3", 0, "SUCCESS", 2, PRICED), ("e2e", "t4", 0, "FAILURE", 4, PRICED)):
        write(root, task(task_id, variant, status=status, score=1.0 if status == "SUCCESS" else 0.0,
                         iterations=[dict(turns_of(n), token_usage=usage)], total_token_usage=usage), replicate=rep)
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "ab-test", "description": "",
                                                         "variant_ids": ["smoke", "e2e"]}))
    assert ingest(root).errors == []
    data = client.get("/api/compare", params={"experiment": "ab-test", "a": "smoke", "b": "e2e"}).json()
    s = data["summary"]
    assert (s["paired"], s["only_a"], s["only_b"]) == (3, ["t2"], ["t3"])
    assert s["confusion"] == {"pass_pass": 1, "pass_fail": 0, "fail_pass": 1, "fail_fail": 1}
    assert s["verdict_agreement"] == {"agree": 2, "total": 3}
    assert (s["steps"]["a"], s["steps"]["b"], s["steps"]["saved_pct"]) == (3, 10, pytest.approx(70.0))
    assert (s["cost_usd"]["a"], s["cost_usd"]["b"], s["cost_usd"]["pairs"], s["cost_usd"]["missing"]) == (
        pytest.approx(0.02), pytest.approx(0.02), 2, 1)
    assert data["replicates"]["flaky_a"] == ["t1"] and data["replicates"]["flaky_b"] == []
    shown = {v["variant"]: v for v in client.get("/api/experiments").json()["experiments"][0]["variants"]}
    # by run: smoke 2 of 4, e2e 3 of 4; by task: smoke t1 pass + fail folds to a failure
    # (coder_eval folds replicates to the worst verdict), t2 pass, t4 fail -> 1 of 3
    assert (shown["smoke"]["pass_rate"], shown["smoke"]["tasks_mixed"], shown["smoke"]["tasks_failed"],
            shown["smoke"]["task_pass_rate"]) == (0.5, 1, 2, pytest.approx(1 / 3))
    assert (shown["e2e"]["pass_rate"], shown["e2e"]["task_pass_rate"]) == (0.75, pytest.approx(2 / 3))


#: Replicates per task, and the folded final_status coder_eval reports for each task.
FOLD_REPLICATES = {"t1": ["SUCCESS", "SUCCESS"], "t2": ["SUCCESS", "FAILURE"], "t3": ["SUCCESS", "FAILURE", "ERROR"],
                   "t4": ["FAILURE", "ERROR"]}
FOLDED = {"t1": "SUCCESS", "t2": "FAILURE", "t3": "ERROR", "t4": "ERROR"}


def fold_experiment(root: Path) -> Path:
    """A smoke variant whose tasks' replicates disagree (FOLD_REPLICATES), with the
    experiment.json task_summaries coder_eval writes for them (FOLDED)."""
    for task_id, statuses in FOLD_REPLICATES.items():
        for rep, status in enumerate(statuses):
            write(root, task(task_id, "smoke", status=status, score=1.0 if status == "SUCCESS" else 0.0), replicate=rep)
    (root / "experiment.json").write_bytes(orjson.dumps({
        "experiment_id": "fold", "description": "", "variant_ids": ["smoke"],
        "task_summaries": [{"task_id": t, "variant_results": [{"variant_id": "smoke", "task_id": t, "final_status": st,
                                                               "replicate_count": len(FOLD_REPLICATES[t])}]}
                           for t, st in FOLDED.items()]}))
    return root


def test_replicates_fold_to_the_worst_verdict_as_experiment_json_reports_each_task(ingest, client, tmp_path):
    # coder_eval folds a task's replicates to one VariantResult with one final_status, the
    # worst of error, failure and success; experiment.json's task_summaries say so per task
    # (written here as coder_eval would, beside the replicates). variant.json's categories
    # count those folded statuses: smoke 1 succeeded (t1), 1 failed (t2), 2 error (t3, t4).
    root = fold_experiment(tmp_path / "2026-09-09_09-09-09")
    folded = FOLDED
    assert ingest(root).errors == []
    v = client.get("/api/experiments").json()["experiments"][0]["variants"][0]
    statuses = list(folded.values())
    assert (v["tasks"], v["tasks_passed"], v["tasks_failed"], v["tasks_error"]) == (
        4, statuses.count("SUCCESS"), statuses.count("FAILURE"), statuses.count("ERROR"))
    assert (v["tasks_mixed"], v["task_pass_rate"]) == (3, pytest.approx(1 / 4))
    # by run: 4 of 9 replicates passed, errors in the denominator
    assert v["pass_rate"] == pytest.approx(4 / 9)
    by_task = text(one(page(client.get("/").text), 'tr.variant-row[data-variant="smoke"] .by-task'))
    assert by_task == "by task: 25% (1 of 4); 3 tasks with replicates that disagree, each counted by its worst verdict"


def budget_cut_experiment(root: Path) -> Path:
    """smoke: t1 TIMEOUT, t2 MAX_TURNS_EXHAUSTED, t3 ERROR, t4 FAILURE (the agent ended its
    turn), none stopped early; e2e: all four SUCCESS."""
    for task_id, status in (("t1", "TIMEOUT"), ("t2", "MAX_TURNS_EXHAUSTED"), ("t3", "ERROR"), ("t4", "FAILURE")):
        write(root, task(task_id, "smoke", status=status, score=0.0))
        write(root, task(task_id, "e2e"))
    (root / "experiment.json").write_bytes(orjson.dumps({"experiment_id": "cut", "description": "",
                                                         "variant_ids": ["smoke", "e2e"]}))
    return root


def test_runs_cut_by_a_budget_are_not_counted_as_run_to_the_end(ingest, client, tmp_path):
    # REPORT_SCHEMA: a TIMEOUT is a hard kill, MAX_TURNS_EXHAUSTED ran out of turns; neither
    # ran to its end. Of 4 smoke runs: 2 cut by a budget, 1 errored, 1 ran to the end.
    assert ingest(budget_cut_experiment(tmp_path / "2026-10-10_10-10-10")).errors == []
    s = client.get("/api/compare", params={"experiment": "cut", "a": "smoke", "b": "e2e"}).json()["summary"]
    assert (s["paired"], s["early_stopped_a"], s["errored_a"], s["cut_by_budget_a"], s["ran_to_end_a"]) == (4, 0, 1, 2, 1)


# -- zips of every layout ---------------------------------------------------------------------

def test_a_zip_of_a_results_folder_without_run_json_or_of_one_variant_is_read(client, tmp_path):
    # run.json is written when the run ends: a run stopped before that, or one variant's
    # folder zipped on its own, holds task.json files only. Each is read as the same
    # folder would be (docs/upload.md: "a .zip of any of them").
    import io
    import zipfile

    def zipped(files: dict[str, Any]) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for name, doc in files.items():
                zf.writestr(name, orjson.dumps(doc))
        return buf.getvalue()

    def upload(name: str, data: bytes) -> dict[str, Any]:
        return client.post("/api/traces", params={"wait": "true"},
                           files=[("files", (name, data, "application/zip"))]).json()

    body = upload("night.zip", zipped({"night/smoke/t1/00/task.json": task("t1", "smoke"),
                                       "night/smoke/t1/01/task.json": task("t1", "smoke", status="FAILURE", score=0.0),
                                       "night/e2e/t1/00/task.json": task("t1", "e2e")}))
    assert body["errors"] == [] and body["rejected"] == []
    assert sorted(body["runs_created"]) == ["night/e2e/t1/00", "night/smoke/t1/00", "night/smoke/t1/01"]
    body = upload("smoke-only.zip", zipped({"smoke/t2/00/task.json": task("t2", "smoke")}))
    assert body["errors"] == [] and len(body["runs_created"]) == 1
    run = api_run(client, body["runs_created"][0])["run"]
    assert (run["variant"], run["task_id"], run["verdict"]) == ("smoke", "t2", "pass")
    body = upload("one.zip", zipped({"task.json": task("t3")}))
    assert body["errors"] == [] and len(body["runs_created"]) == 1


def test_the_lower_bound_column_reads_a_meta_that_is_not_json_as_unknown(engine):
    # The board writes meta as JSON; another tool editing the SQLite file may not, and
    # SQLite's json_type raises on such text: the column says "not known" instead.
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL's json column refuses text that is not JSON")
    from sqlalchemy import column, select, table

    from qita_board.queries.comparison import _CostIncomplete

    metas = ['{"cost_complete": false}', '{"cost_complete": true}', '{not json', "", "[1]", '"false"', None]
    rows = table("m", column("meta"))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TEMP TABLE m (meta TEXT)")
        conn.exec_driver_sql("INSERT INTO m VALUES " + ",".join("(?)" for _ in metas), tuple(metas))
        got = [r[0] for r in conn.execute(select(_CostIncomplete(rows.c.meta, ("cost_complete",))).select_from(rows))]
    assert [bool(g) for g in got] == [True, False, False, False, False, False, False]


def test_a_runs_times_are_shown_as_coder_eval_wrote_them_with_no_zone(ingest, client, tmp_path):
    # coder_eval stamps times with datetime.now (its machine's local clock; results.py) and
    # its own report prints them bare: the board wrote them with "UTC" after them.
    root = tmp_path / "clock"
    write(root, task("t1"))  # started 2026-01-02T03:04:05, completed 03:04:09
    assert ingest(root).errors == []
    doc = page(client.get("/runs/" + quote("clock/v/t1/00", safe="")).text)
    started, ended = doc.select(".run-head .meta time")
    assert (text(started), started["datetime"]) == ("2026-01-02 03:04:05", "2026-01-02T03:04:05")
    assert (text(ended), ended["datetime"]) == ("2026-01-02 03:04:09", "2026-01-02T03:04:09")
    assert started["title"] == "2026-01-02T03:04:05 (coder_eval writes its machine's local time, with no zone)"
    listed = one(page(client.get("/runs").text), "table.runs tbody time")
    assert (text(listed), listed["datetime"]) == ("2026-01-02 03:04:05", "2026-01-02T03:04:05")
    # the overview's latest activity is the run's end, as written, for the experiment and its variant
    overview = page(client.get("/").text)
    assert [text(t) for t in overview.select("main time")] == ["2026-01-02 03:04:09"] * 2
    assert client.get("/api/experiments").json()["experiments"][0]["latest_source"] == "coder_eval"
    # a trace that names its zone is shown in UTC, as before
    (tmp_path / "v1.jsonl").write_bytes(orjson.dumps({"type": "run_start", "run_id": "zoned",
                                                      "ts": "2026-01-02T04:04:05+01:00"}) + b"\n")
    assert ingest(tmp_path / "v1.jsonl").ok
    zoned = page(client.get("/runs/zoned").text).select(".run-head .meta time")[0]
    assert (text(zoned), zoned["datetime"]) == ("2026-01-02 03:04:05 UTC", "2026-01-02T03:04:05+00:00")
    loose = next(e for e in client.get("/api/experiments").json()["experiments"] if e["experiment"] is None)
    assert loose["latest_source"] != "coder_eval"


def _unflagged_zip(path: Path, files: dict[str, bytes]) -> Path:
    """A zip as Info-ZIP's `zip -r` (Linux's) writes it: names as UTF-8 bytes with the UTF-8
    flag unset. zipfile flags every non-ASCII name it writes, so each name goes in as an
    ASCII stand-in of the same byte length and its bytes are put back after."""
    stand_ins: dict[bytes, bytes] = {}
    with zipfile.ZipFile(path, "w") as zf:
        for n, (name, data) in enumerate(files.items()):
            raw = name.encode("utf-8")
            stand_in = f"{n:03d}".encode().ljust(len(raw), b"_")
            stand_ins[stand_in] = raw
            zf.writestr(stand_in.decode(), data)
    blob = path.read_bytes()
    for stand_in, raw in stand_ins.items():
        assert blob.count(stand_in) == 2     # the local header and the central directory
        blob = blob.replace(stand_in, raw)
    path.write_bytes(blob)
    with zipfile.ZipFile(path) as zf:
        assert all(not info.flag_bits & 0x800 for info in zf.infolist())
    return path


def test_a_zip_whose_names_are_unflagged_utf_8_keeps_each_tasks_id(ingest, client, tmp_path):
    # `zip -r night.zip night/` of a task named t-ünï-修复: zipfile read its folder as
    # "t-├╝n├»-Σ┐«σñì", the run.json row then looked like a task with no task.json, and the
    # ingest warned twice that the run had two sources
    tid = "t-ünï-修复"
    row = {"task_id": tid, "replicate_index": 0, "variant_id": "v", "status": "SUCCESS", "weighted_score": 1.0}
    archive = _unflagged_zip(tmp_path / "night.zip", {
        f"night/v/{tid}/00/task.json": orjson.dumps(task(tid)),
        "night/run.json": orjson.dumps({"run_id": "night", "task_results": [row]}),
    })
    report = ingest(archive)
    assert (report.errors, report.warnings) == ([], [])
    assert report.created == {f"night/v/{tid}/00"}
    run = api_run(client, f"night/v/{tid}/00")["run"]
    assert (run["task_id"], run["verdict"]) == (tid, "pass")
    assert not run["warnings"]


def test_a_task_folder_named_in_decomposed_unicode_still_holds_its_row(ingest, client, tmp_path):
    # macOS names files decomposed (NFD): the folder of task "t-ü" is "t-u" + U+0308 while
    # task.json and run.json say "t-ü" (NFC); the row looked like a task with no task.json
    import unicodedata

    tid = unicodedata.normalize("NFC", "t-ü")
    root = tmp_path / "night"
    write(root, task(tid), folder=unicodedata.normalize("NFD", tid))
    row = {"task_id": tid, "replicate_index": 0, "variant_id": "v", "status": "SUCCESS", "weighted_score": 1.0}
    (root / "run.json").write_bytes(orjson.dumps({"run_id": "night", "task_results": [row]}))
    report = ingest(root)
    assert (report.errors, report.warnings, report.created) == ([], [], {f"night/v/{tid}/00"})


def test_an_early_stop_names_the_twin_criterion_whose_result_agrees_with_it(ingest, client, tmp_path):
    # Two criteria of one type and description: coder_eval's early-stop record names only
    # those, so the first twin (which passed) was given the failure that stopped the run.
    twin = {"result_kind": "basic", "criterion_type": "command_executed", "description": "safety check",
            "evaluation_status": "evaluated", "pass_threshold": 0.9, "gating": True}
    doc = task("twins", status="FAILURE", score=0.5, iterations=[turns_of(2)],
               success_criteria_results=[{**twin, "score": 1.0}, {**twin, "score": 0.0}],
               early_stop={"reason": "criterion_failed", "deciding_criterion_type": "command_executed",
                           "deciding_criterion_description": "safety check",
                           "armed_criteria": ["command_executed: safety check"], "sdk_turn_index": 2,
                           "tool_call_index": None, "elapsed_seconds": 1.0, "turns_remaining_at_stop": 3,
                           "gate_threshold": 1.0})
    write(tmp_path / "tw", doc)
    assert ingest(tmp_path / "tw").errors == []
    data = api_run(client, "tw/v/twins/00")
    assert data["early_stop"]["deciding_criterion"] == "command_executed: safety check (2)"
    decided = {c["id"]: (c["score"], c["live_verdict"], c["decided_at_step"]) for c in data["criteria"]}
    assert decided == {"command_executed: safety check": (1.0, None, None),
                       "command_executed: safety check (2)": (0.0, "fail", 2)}
