"""Trace format v1: the committed JSON Schema is current, the contract's fields exist, the example validates."""

from __future__ import annotations

from pathlib import Path

import orjson

from qita import format as fmt

ROOT = Path(__file__).resolve().parents[2]

# Field lists copied by hand from the contract (shared/spec/trace-format-v1.md).
CONTRACT = {
    "run_start": ["schema", "ts", "task_id", "experiment", "variant", "replicate", "objective", "agent", "model", "budget",
                  "critics", "stop_criteria", "criteria", "early_stop", "tags", "metadata"],
    "step": ["step", "ts", "duration_s", "observation", "decision", "actions", "action_results", "tool_invocations",
             "critic_outputs", "state_diff", "tokens", "cost_usd", "retry"],
    "event": ["step", "phase", "ok", "payload", "error", "ts"],
    "criterion": ["id", "score", "passed", "details", "live_verdict", "decided_at_step"],
    "early_stop": ["reason", "deciding_criterion", "armed_criteria", "step", "tool_call_index", "elapsed_s", "turns_remaining"],
    "run_end": ["ts", "status", "stop_reason", "stop_detail", "final_result", "verdict", "steps", "tokens", "cost_usd",
                "elapsed_s", "failure_report"],
}


def test_committed_schema_is_current():
    committed = (ROOT / "docs" / "trace-format.schema.json").read_text()
    assert committed == fmt.json_schema_text(), "regenerate: python -m qita.format > docs/trace-format.schema.json"


def test_every_contract_field_is_in_the_schema():
    schema = fmt.json_schema()
    defs = schema["$defs"]
    by_type = {d["properties"]["type"].get("const", d["properties"]["type"].get("default")): d
               for d in defs.values() if "type" in d.get("properties", {}) and "run_id" in d.get("properties", {})}
    for rtype, fields in CONTRACT.items():
        props = by_type[rtype]["properties"]
        assert {"type", "run_id", *fields} <= set(props), rtype
    assert set(defs["CriterionSpec"]["properties"]) >= {"id", "type", "description", "stop_when", "gating", "pass_threshold"}
    assert set(defs["Budget"]["properties"]) >= {"max_steps", "max_runtime_seconds", "max_tokens"}
    # The additions for harnesses that cap more (coder_eval's run_limits) are optional.
    assert set(defs["Budget"]["properties"]) - {"max_steps", "max_runtime_seconds", "max_tokens"} == {
        "max_input_tokens", "max_output_tokens", "max_cost_usd", "tokens_counted", "max_steps_scope",
        "steps_longest_iteration"}
    assert not defs["Budget"].get("required")


def test_stop_reasons_match_the_contract():
    assert fmt.STOP_REASONS == ("success", "final", "budget_steps", "budget_time", "budget_tokens", "critic_stop", "stagnation",
                                "agent_condition", "env_terminal", "task_validation_failed", "env_capability_mismatch",
                                "unrecoverable_error", "early_stop", "budget_cost")


def test_worked_example_in_the_docs_validates_and_matches_the_example_file():
    doc = (ROOT / "docs" / "trace-format.md").read_text()
    block = doc.split("```jsonl\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip()]
    assert lines == (ROOT / "docs" / "examples" / "trace-example.jsonl").read_text().splitlines()
    types = []
    for line in lines:
        rec = orjson.loads(line)
        fmt.RECORD_MODELS[rec["type"]].model_validate(rec)
        types.append(rec["type"])
    assert types[0] == "run_start" and types[-1] == "run_end"
    assert set(types) == set(fmt.RECORD_TYPES)


def test_null_means_the_default_for_fields_that_have_one():
    # a writer spelling an absent list, object or flag as null gets the default, not a rejection;
    # fields whose default is null keep their null, and unknown null fields are kept as given
    step = fmt.RECORD_MODELS["step"].model_validate(
        {"type": "step", "run_id": "r", "step": 0, "ts": "2026-01-01T00:00:00Z", "critic_outputs": None,
         "tool_invocations": None, "retry": None, "decision": None, "custom": None,
         "tokens": {"input": 1, "output": None}})
    assert step.critic_outputs == [] and step.tool_invocations == [] and step.retry is False
    assert step.decision is None and step.model_extra == {"custom": None}
    again = fmt.RECORD_MODELS["step"].model_validate({"type": "step", "run_id": "r", "step": 1,
                                                      "ts": "2026-01-01T00:00:00Z", "retry": True})
    assert again.retry is True and again.critic_outputs == []
