"""coder_eval's result files checked against the types its REPORT_SCHEMA.md documents.

A task.json (or a run.json row) is written by coder_eval's pydantic models, so a field of
another type than documented (a score written as `"high"`, a criterion type that is a
list) is not coder_eval's meaning of anything. `conform_task` (and `conform_row`, for a
run.json row) reads such a field as not given and says so in one warning naming the
field, and keeps everything else: one odd value never costs the run. It also names
values of the right type that coder_eval never writes: a `final_status`,
`evaluation_status` or early-stop `reason` outside its enums, a `weighted_score` or
`gate_threshold` outside [0, 1].

The document is never changed: it comes back as it is when every field fits, else
a copy in which only the containers holding a field read as not given are new.

Types are written as strings: `num` (int or float, never a bool), `int` (a float with no
fraction counts, as pydantic reads it; for both, a quoted number is that number, as
coder_eval's lax pydantic models read it), `str`, `bool`, `dict`, `list`, `any`; a
trailing `?` allows null; `bucket` is a token bucket, an `int` that reads as 0 when it is
of another type (TokenUsage's default: read as not given, a missing uncached bucket would
make the computed `input_tokens`, which holds the cache buckets too, stand in for it). A
nested mapping is the spec of a dict field (its key `"?"` allows null); a one-item list
is the spec of each item of a list field. Keys a spec does not name are kept as they
are: coder_eval adds fields (its criterion results allow extra ones), and a later
version's field is no error.
"""

from __future__ import annotations

from typing import Any, Union

from qita.format import quoted_number

#: coder_eval's FinalStatus values (REPORT_SCHEMA.md, "FinalStatus").
FINAL_STATUSES = ("SUCCESS", "FAILURE", "TIMEOUT", "MAX_TURNS_EXHAUSTED", "TOKEN_BUDGET_EXCEEDED",
                  "COST_BUDGET_EXCEEDED", "ERROR", "BUILD_FAILED", "NOT_GRADED")
#: EarlyStopReason values (results.py).
EARLY_STOP_REASONS = ("criterion_passed", "criterion_failed", "decision_budget_exceeded")
#: CriterionResult.evaluation_status values.
EVALUATION_STATUSES = ("evaluated", "not_evaluated")

#: How many field warnings one document gets before the rest are counted in one line.
MAX_WARNINGS = 20

Spec = Union[str, dict[str, Any], list[Any]]

TOKEN_USAGE: dict[str, Spec] = {
    "uncached_input_tokens": "bucket", "input_tokens": "bucket", "output_tokens": "bucket",
    "cache_creation_input_tokens": "bucket", "cache_read_input_tokens": "bucket", "total_cost_usd": "num?",
}
CRITERION_RESULT: dict[str, Spec] = {
    "result_kind": "str", "criterion_type": "str", "description": "str", "score": "num", "details": "str?",
    "error": "str?", "evaluation_status": "str", "pass_threshold": "num", "gating": "bool",
    "token_usage": {"?": "nullable", **TOKEN_USAGE}, "transcript_path": "str?", "findings": ["str"],
    "observed_label": "str", "expected_label": "str",
}
COMMAND: dict[str, Spec] = {
    "tool_name": "str", "tool_id": "str", "assistant_turn_index": "int?", "timestamp": "str",
    "duration_ms": "num?", "generation_completed_at": "str?", "execution_started_at": "str?",
    "execution_completed_at": "str?", "parameters": "dict", "result_status": "str?", "result_summary": "str?",
    "error_message": "str?", "result_data": "any", "sequence_number": "int",
}
MESSAGE: dict[str, Spec] = {
    "role": "str", "started_at": "str?", "completed_at": "str?", "generation_duration_ms": "num?",
    "content_blocks": [{"block_type": "str", "text": "str?", "thinking": "str?"}], "tool_use_ids": ["str"],
    "input_tokens": "bucket", "output_tokens": "bucket", "cache_creation_tokens": "bucket", "cache_read_tokens": "bucket",
}
TURN: dict[str, Spec] = {
    "iteration": "int", "user_input": "str", "agent_output": "str", "commands": [COMMAND], "timestamp": "str",
    "duration_seconds": "num", "token_usage": {"?": "nullable", **TOKEN_USAGE}, "model_used": "str?",
    "assistant_turn_count": "int", "messages": [MESSAGE], "num_turns": "int?", "max_turns_exhausted": "bool",
    "result_summary": {"?": "nullable", "is_error": "bool", "subtype": "str", "stop_reason": "str?", "result": "str?"},
    "crashed": "bool", "crash_reason": "str?",
}
EARLY_STOP: dict[str, Spec] = {
    "?": "nullable", "reason": "str", "deciding_criterion_type": "str", "deciding_criterion_description": "str",
    "armed_criteria": ["str"], "sdk_turn_index": "int", "tool_call_index": "int", "elapsed_seconds": "num",
    "turns_remaining_at_stop": "int?", "gate_threshold": "num",
}
RUN_LIMITS: dict[str, Spec] = {
    "?": "nullable", "max_turns": "int?", "task_timeout": "num?", "max_input_tokens": "int?", "max_output_tokens": "int?",
    "max_total_tokens": "int?", "max_usd": "num?", "count_cached_input": "bool?", "count_cache_creation": "bool?",
    "stop_early": "bool?", "stop_early_gate_threshold": "num?",
}
CRITERION_CONFIG: dict[str, Spec] = {
    "type": "str", "description": "str", "weight": "num", "pass_threshold": "num", "stop_early": "dict?",
    "stop_when": "str?",
}
TASK: dict[str, Spec] = {
    "task_id": "str", "task_description": "str", "variant_id": "str", "agent_type": "str", "model_used": "str?",
    "started_at": "str", "completed_at": "str?", "duration_seconds": "num", "setup_ms": "num?", "grading_ms": "num?",
    "final_status": "str", "max_turns_exhausted": "bool", "weighted_score": "num?", "iteration_count": "int",
    "success_criteria_results": [CRITERION_RESULT], "post_failure_criteria_results": [CRITERION_RESULT],
    "iterations": [TURN], "turns": [TURN], "error_message": "str?", "error_details": "dict?", "error_log_tail": "str?",
    "environment_info": "dict", "agent_config": "dict?", "sandbox_path": "str?",
    "task_config": {"?": "nullable", "resolved": {"success_criteria": [CRITERION_CONFIG], "run_limits": RUN_LIMITS,
                                            "tags": ["str"], "description": "str?", "initial_prompt": "str?"},
                    "source_file": "str?"},
    "total_token_usage": {"?": "nullable", **TOKEN_USAGE}, "total_assistant_turns": "int?", "expected_commands": "int?",
    "actual_commands": "int?", "commands_efficiency": "num?", "simulation": "dict?", "early_stop": EARLY_STOP,
}
#: A run.json `task_results` row (an untyped dict in coder_eval: these are the keys the board reads).
ROW: dict[str, Spec] = {
    "task_id": "str", "replicate_index": "int?", "variant_id": "str?", "status": "str", "weighted_score": "num?",
    "duration": "num?", "iteration_count": "int?", "tags": ["str"], "task_path": "str?", "model_used": "str?",
    "iterations": [{"duration_seconds": "num", "command_count": "int", "assistant_turn_count": "int",
                    "crashed": "bool", "crash_reason": "str?"}],
    "agent_wall_ms": "num?", "setup_ms": "num?", "grading_ms": "num?",
    "input_tokens": "int?", "output_tokens": "int?", "cache_creation_input_tokens": "int?",
    "cache_read_input_tokens": "int?", "total_tokens": "int?", "total_cost_usd": "num?", "agent_cost_usd": "num?",
    "judge_cost_usd": "num?", "simulator_cost_usd": "num?", "cost_complete": "bool?", "error_message": "str?",
    "error_category": "str?", "actual_commands": "int?", "total_turns": "int?", "stopped_early": "bool?",
    "early_stop_reason": "str?", "turns_remaining_at_stop": "int?", "gate_threshold": "num?",
}

_KIND_WORDS = {"num": "a number", "int": "a whole number", "bucket": "a whole number", "str": "a string", "bool": "true or false",
               "dict": "an object", "list": "a list", "any": "any value"}


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _fits(kind: str, value: Any) -> bool:
    if kind == "any":
        return True
    if kind == "num":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
            and value not in (float("inf"), float("-inf"))
    if kind in ("int", "bucket"):
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "dict":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    raise ValueError(kind)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Walk:
    """One document's walk: the warnings it found (capped at MAX_WARNINGS, the rest counted)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.warnings: list[str] = []
        self.more = 0

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(f"{self.what}: {message}")
        else:
            self.more += 1

    def wrong(self, path: str, expected: str, value: Any, instead: str = "read as not given") -> None:
        self.warn(f"field '{path}' should be {expected}, not {_kind_of(value)} ({_shown(value)}); {instead}, "
                  "the rest kept")

    def dict_(self, spec: dict[str, Any], value: dict[str, Any], path: str) -> dict[str, Any]:
        # Copied only when something in it changes: a well-formed document comes back as it
        # was, without a copy of its thousands of messages and commands.
        out = value
        for key, sub in spec.items():
            if key == "?" or key not in value:
                continue
            checked = self.value(sub, value[key], f"{path}.{key}" if path else key)
            if checked is value[key]:
                continue
            if out is value:
                out = dict(value)
            if checked is _DROP:
                del out[key]
            else:
                out[key] = checked
        return out

    def value(self, spec: Spec, value: Any, path: str) -> Any:
        if isinstance(spec, dict):
            if value is None and spec.get("?"):
                return None
            if not isinstance(value, dict):
                self.wrong(path, "an object" + (" or null" if spec.get("?") else ""), value)
                return _DROP
            return self.dict_(spec, value, path)
        if isinstance(spec, list):
            if not isinstance(value, list):
                self.wrong(path, "a list", value)
                return _DROP
            item = spec[0]
            out: list[Any] = []
            changed = False
            for i, v in enumerate(value):
                checked = self.value(item, v, f"{path}[{i}]")
                changed = changed or checked is not v
                if checked is not _DROP:
                    out.append(checked)
            return out if changed else value
        nullable = spec.endswith("?")
        kind = spec.rstrip("?")
        if value is None and nullable:
            return None
        if kind in ("int", "num", "bucket") and type(value) is str:
            # coder_eval's models are lax pydantic: a quoted number is that number to them
            number = quoted_number(value, integer=kind != "num")
            if number is not None and _fits(kind, number):
                return number
        if not _fits(kind, value):
            if kind == "bucket":
                self.wrong(path, _KIND_WORDS[kind], value, instead="read as 0")
                return 0
            self.wrong(path, _KIND_WORDS[kind] + (" or null" if nullable else ""), value)
            return _DROP
        return value

    def finish(self) -> list[str]:
        if self.more:
            self.warnings.append(f"{self.what}: {self.more} more field(s) of the wrong type, read as not given")
        return self.warnings


_DROP = object()


def conform_task(task: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(task.json with every field of the wrong type read as not given, warnings naming each
    such field and each value outside coder_eval's enums or ranges)."""
    walk = _Walk("task.json")
    out = walk.dict_(TASK, task, "")
    status = out.get("final_status")
    if status is None and "final_status" not in task:
        walk.warn("no final_status (coder_eval writes one on every task.json): the verdict is read from the criteria")
    elif isinstance(status, str) and status.upper() not in FINAL_STATUSES:
        walk.warn(f"final_status {_shown(status)} is not one of coder_eval's statuses ({', '.join(FINAL_STATUSES)}): "
                  "the verdict is read from the criteria")
    score = out.get("weighted_score")
    if isinstance(score, (int, float)) and not 0 <= score <= 1:
        walk.warn(f"weighted_score {score:g} is outside [0, 1]; shown as written")
    early = out.get("early_stop")
    if isinstance(early, dict):
        reason = early.get("reason")
        if isinstance(reason, str) and reason not in EARLY_STOP_REASONS:
            walk.warn(f"early_stop.reason {_shown(reason)} is not one of coder_eval's ({', '.join(EARLY_STOP_REASONS)}): "
                      "the deciding criterion's live verdict is not inferred from it")
        gate = early.get("gate_threshold")
        if isinstance(gate, (int, float)) and not 0 <= gate <= 1:
            walk.warn(f"early_stop.gate_threshold {gate:g} is outside [0, 1]; read as not given (1, every armed criterion)")
            out = {**out, "early_stop": {k: v for k, v in early.items() if k != "gate_threshold"}}
    for key in ("success_criteria_results", "post_failure_criteria_results"):
        for i, res in enumerate(out.get(key) or ()):
            status_ = res.get("evaluation_status")
            if isinstance(status_, str) and status_ not in EVALUATION_STATUSES:
                walk.warn(f"{key}[{i}].evaluation_status {_shown(status_)} is not one of coder_eval's "
                          f"({', '.join(EVALUATION_STATUSES)}): read as evaluated")
    return out, walk.finish()


def conform_row(row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A run.json `task_results` row checked like `conform_task`."""
    walk = _Walk("run.json row")
    out = walk.dict_(ROW, row, "")
    status = out.get("status")
    if isinstance(status, str) and status.upper() not in FINAL_STATUSES:
        walk.warn(f"status {_shown(status)} is not one of coder_eval's statuses ({', '.join(FINAL_STATUSES)})")
    return out, walk.finish()
