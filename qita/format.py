"""Trace format v1: the pydantic models of every record a writer may emit.

These models are the single definition of the format. The board validates incoming
lines with them, the run side writes with them, and `docs/trace-format.schema.json`
is generated from them (`python -m qita.format > docs/trace-format.schema.json`).

Every model allows unknown fields (they are kept and shown raw), so a newer writer
never breaks an older reader.
"""

from __future__ import annotations

import re
import sys
from typing import Annotated, Any, Literal, Optional, Union

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, model_validator

SCHEMA_ID = "qita.trace/1"

#: The integers a reader's database holds: step indexes, counts and replicates in a 32-bit
#: column (PostgreSQL's integer); token counts up to 2**53 - 1, the largest integer a
#: browser reads exactly from JSON (a run's sum of them past 64 bits reads as unknown:
#: app.derive).
#: A value past them is invalid here, like a wrong type (a key field rejects its line, any
#: other field is dropped with a warning), instead of failing the database write: that
#: lost the file's good lines with it.
INT32_MAX = 2**31 - 1
TOKENS_MAX = 2**53 - 1

_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """`value` with each half of a UTF-16 surrogate pair standing alone, in any string or
    key, replaced by U+FFFD. Such a half is no character: UTF-8 cannot hold it (orjson
    refuses it), yet Python makes one of every byte it decodes with `surrogateescape` (a
    tool's raw output) and its json module writes it as an escape (`"\\udcff"`)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_lone_surrogates(v) for v in value]
    return value


def _integral(value: Any) -> Any:
    # JSON has one kind of number: 2.0 is the integer 2, as JSON Schema's "integer" reads
    # it. Anything else goes on to the strict check: a boolean is not an integer.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


#: How a quoted number is read ("120", " 0.5"): as pydantic's lax mode reads it, without
#: NaN or infinity (no total or cost can be one).
_QUOTED_INT = TypeAdapter(int)
_QUOTED_FLOAT = TypeAdapter(Annotated[float, Field(allow_inf_nan=False)])


def quoted_number(value: str, *, integer: bool) -> Optional[Union[int, float]]:
    """The number a quoted value ("120", " 0.5") stands for, as pydantic's lax mode reads
    it (coder_eval's result models are lax pydantic too); None when it is no number."""
    try:
        return (_QUOTED_INT if integer else _QUOTED_FLOAT).validate_python(value)
    except ValueError:
        return None


def _integer(value: Any) -> Any:
    # A producer that quotes its counts ("tokens": {"input": "100"}) still has them counted.
    if type(value) is str:
        number = quoted_number(value, integer=True)
        return value if number is None else number
    return _integral(value)


def _number(value: Any) -> Any:
    if type(value) is str:
        number = quoted_number(value, integer=False)
        return value if number is None else number
    return value


Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX), BeforeValidator(_integer)]
TokenCount = Annotated[int, Field(ge=-TOKENS_MAX, le=TOKENS_MAX), BeforeValidator(_integer)]
#: A step index is a key: written as a number, never quoted (a quoted one rejects its line).
StepIndex = Annotated[int, Field(ge=0, le=INT32_MAX), BeforeValidator(_integral)]
Number = Annotated[float, BeforeValidator(_number)]

#: Stop reasons named by the contract. Any other string is kept and shown as unknown.
STOP_REASONS = (
    "success",
    "final",
    "budget_steps",
    "budget_time",
    "budget_tokens",
    "critic_stop",
    "stagnation",
    "agent_condition",
    "env_terminal",
    "task_validation_failed",
    "env_capability_mismatch",
    "unrecoverable_error",
    "early_stop",
    "budget_cost",
)

#: The stop reasons of a run cut by one of its budgets (steps, time, tokens, cost).
BUDGET_STOP_REASONS = ("budget_steps", "budget_time", "budget_tokens", "budget_cost")

#: The live verdicts of a criterion while the run goes (`criterion.live_verdict`, `step.live_verdicts`).
LIVE_VERDICTS = ("pass", "fail", "undecided")
LiveVerdict = Literal["pass", "fail", "undecided"]

#: Critic actions with a meaning; any other value is shown as given and counts as continue.
CRITIC_ACTIONS = ("continue", "stop", "retry")

EARLY_STOP_REASONS = ("criterion_passed", "criterion_failed", "decision_budget_exceeded")

RECORD_TYPES = ("run_start", "step", "event", "criterion", "early_stop", "run_end")

RunId = Annotated[str, Field(min_length=1, max_length=200, description="Any Unicode; data, never a path or HTML")]


class _Model(BaseModel):
    # Strict: a value is read as the JSON type the schema names, never coerced from another.
    # Lax validation read `"step": true` as step 1 and `"retry": "false"` as false (where
    # the store read it as true), silently, where docs/trace-format.md promises that a
    # value of the wrong type is left out with a warning. The exceptions are JSON's own:
    # integers take integral floats, numbers take integers, and a quoted number counts
    # (`Int32`, `TokenCount`, `Number`).
    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=(), strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        # A writer that spells an absent list, object or flag as null means "not given":
        # read it as the field's default rather than rejecting the record.
        if isinstance(data, dict):
            keys = _DEFAULTED_KEYS.get(cls)
            if keys is None:
                # which keys have a non-null default depends only on the class, and this runs
                # for every record and nested object a writer or the board validates
                keys = _DEFAULTED_KEYS[cls] = tuple(f.alias or name for name, f in cls.model_fields.items()
                                                    if not f.is_required() and f.default is not None)
            drop = {k for k in keys if k in data and data[k] is None}
            if drop:
                data = {k: v for k, v in data.items() if k not in drop}
        return data


#: model class -> the keys `_null_means_absent` may drop (fields with a non-null default)
_DEFAULTED_KEYS: dict[type, tuple[str, ...]] = {}


#: Token buckets a budget may count (`Budget.tokens_counted`).
TOKEN_BUCKETS = ("uncached_input", "cache_read", "cache_write", "output")


class Budget(_Model):
    """A run's TaskBudget; null means unlimited.

    The caps after `max_tokens` are optional additions for harnesses that cap more than
    the three TaskBudget limits (coder_eval's `run_limits`). `tokens_counted` names the
    token buckets the token caps count; absent means every bucket.
    """

    max_steps: Optional[Int32] = None
    max_runtime_seconds: Optional[Number] = None
    max_tokens: Optional[TokenCount] = None
    max_input_tokens: Optional[TokenCount] = None
    max_output_tokens: Optional[TokenCount] = None
    max_cost_usd: Optional[Number] = None
    tokens_counted: Optional[list[Literal["uncached_input", "cache_read", "cache_write", "output"]]] = None
    #: "iteration": `max_steps` caps each agent call of the run, not the run (coder_eval's
    #: max_turns); absent means the run.
    max_steps_scope: Optional[Literal["run", "iteration"]] = None
    #: With the scope "iteration": the steps of the longest agent call, what the cap measures.
    steps_longest_iteration: Optional[Int32] = None


class CriterionSpec(_Model):
    """A success criterion the run is graded on, as declared in `run_start`."""

    id: str
    type: Optional[str] = None
    description: Optional[str] = None
    stop_when: Optional[Literal["pass", "fail", "decided"]] = None
    gating: bool = True
    pass_threshold: Number = 0.9
    weight: Optional[Annotated[float, Field(ge=0), BeforeValidator(_number)]] = Field(
        None, description="its weight in a weighted armed gate (coder_eval's criterion weight; default 1)")


class StopCriterionSpec(_Model):
    """A stop criterion in force for the run."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class EarlyStopConfig(_Model):
    """The opt-in master switch for early stop."""

    enabled: bool = False
    gate_threshold: Optional[Annotated[float, Field(ge=0, le=1), BeforeValidator(_number)]] = Field(
        None, description="an early-stopped run passes when the weighted share of its armed criteria "
                                      "that passed reaches this (coder_eval's stop_early_gate_threshold; default 1: all)")


class Tokens(_Model):
    """Token counts. `input` counts every input token, cached or not; `cache_read` and
    `cache_write` (optional) say how many of those were read from or written to a prompt
    cache, so uncached input is `input - cache_read - cache_write` and `total` is
    `input + output`: each token counted once."""

    input: Optional[TokenCount] = None
    output: Optional[TokenCount] = None
    total: Optional[TokenCount] = None
    cache_read: Optional[TokenCount] = None
    cache_write: Optional[TokenCount] = None


class Action(_Model):
    """One tool call."""

    name: str
    args: Any = None


class DecisionRecord(_Model):
    """The model's structured output for a step."""

    mode: Optional[str] = None
    rationale: Optional[str] = None
    actions: list[Action] = Field(default_factory=list)
    final_answer: Optional[str] = None


class CriticOutput(_Model):
    """One critic's verdict on a step. `action` other than stop/retry counts as continue."""

    critic: Optional[str] = None
    action: Any = Field("continue", description="continue, stop or retry; any other value is shown as given and counts as continue")
    reason: Optional[str] = None
    score: Optional[Number] = None
    details: Any = None
    patches: Any = Field(None, description="optional: changes the critic proposes (to the instructions, the state, "
                                           "the code), any JSON, shown as written")


class _Record(_Model):
    type: str
    run_id: RunId


class RunStart(_Record):
    """First record of a run: who, what, budgets, critics, criteria, early-stop switch."""

    type: Literal["run_start"] = "run_start"
    schema_: str = Field(SCHEMA_ID, alias="schema")
    ts: Optional[str] = None
    task_id: Optional[str] = None
    experiment: Optional[str] = None
    variant: Optional[str] = None
    replicate: Int32 = 0
    objective: Optional[str] = None
    agent: Optional[str] = None
    model: Optional[str] = None
    budget: Budget = Field(default_factory=Budget)
    critics: list[str] = Field(default_factory=list)
    stop_criteria: list[StopCriterionSpec] = Field(default_factory=list)
    criteria: list[CriterionSpec] = Field(default_factory=list)
    early_stop: EarlyStopConfig = Field(default_factory=EarlyStopConfig)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    provisional: Optional[bool] = Field(
        None, description="true: written from a summary (a coder_eval run.json row without its task.json); a later "
                          "run_start that is not provisional replaces it without a warning")


class StepRecord(_Record):
    """One executed step, with every critic output."""

    type: Literal["step"] = "step"
    step: StepIndex
    ts: Optional[str] = None
    duration_s: Optional[Number] = None
    observation: Any = None
    decision: Optional[DecisionRecord] = None
    actions: list[Action] = Field(default_factory=list)
    action_results: list[Any] = Field(default_factory=list)
    tool_invocations: list[dict[str, Any]] = Field(default_factory=list)
    critic_outputs: list[CriticOutput] = Field(default_factory=list)
    state_diff: dict[str, Any] = Field(default_factory=dict)
    tokens: Optional[Tokens] = None
    cost_usd: Optional[Number] = None
    retry: bool = False
    live_verdicts: Optional[dict[str, LiveVerdict]] = Field(
        None, description="optional: criterion id -> its live verdict at the end of this step, for every criterion "
                          "that can be evaluated live (armed or not); criteria that cannot are absent")


class EventRecord(_Record):
    """An engine phase event (INIT, DECIDE, ACT, REDUCE, CRITIC, CHECK_STOP, END, ...)."""

    type: Literal["event"] = "event"
    step: Optional[Int32] = None
    phase: str
    ok: Optional[bool] = None
    payload: Any = None
    error: Any = None
    ts: Optional[str] = None


class CriterionRecord(_Record):
    """The graded result of one criterion declared in `run_start.criteria`."""

    type: Literal["criterion"] = "criterion"
    id: str
    score: Optional[Number] = Field(None, description="in [0, 1]; readers show other values as given, flagged")
    passed: Optional[bool] = None
    details: Any = None
    live_verdict: Optional[LiveVerdict] = None
    decided_at_step: Optional[Int32] = None


class EarlyStopRecord(_Record):
    """How and when a run was cut once its armed criteria were decided."""

    type: Literal["early_stop"] = "early_stop"
    reason: Optional[str] = None
    deciding_criterion: Optional[str] = None
    armed_criteria: list[str] = Field(default_factory=list)
    step: Optional[Int32] = None
    tool_call_index: Optional[Int32] = Field(None, description="1-based")
    elapsed_s: Optional[Number] = None
    turns_remaining: Optional[Int32] = None
    gate_threshold: Optional[Number] = Field(None, description="score the armed criteria had to reach together")


class RunEnd(_Record):
    """Last record of a finished run: outcome, stop reason, totals."""

    type: Literal["run_end"] = "run_end"
    ts: Optional[str] = None
    status: Optional[Literal["completed", "failed", "error"]] = None
    stop_reason: Optional[str] = None
    stop_detail: Optional[str] = None
    final_result: Optional[str] = None
    verdict: Optional[Literal["pass", "fail", "error", "not_graded"]] = Field(
        None, description="error: the run never produced a gradeable attempt (counted as a miss)")
    verdict_reason: Optional[str] = Field(None, description="why the recorded verdict is what it is")
    source_status: Optional[str] = Field(None, description="the producer's own terminal status, as written")
    score: Optional[Number] = Field(None, description="the producer's overall score, e.g. a weighted criteria score")
    steps: Optional[Int32] = None
    tool_calls: Optional[Int32] = None
    tokens: Optional[Tokens] = None
    cost_usd: Optional[Number] = Field(None, description="the whole bill")
    agent_cost_usd: Optional[Number] = Field(None, description="the agent's slice of cost_usd")
    elapsed_s: Optional[Number] = Field(None, description="end to end")
    agent_elapsed_s: Optional[Number] = Field(None, description="the agent's own time (no setup, no grading)")
    failure_report: Optional[dict[str, Any]] = None
    provisional: Optional[bool] = Field(
        None, description="true: written from a summary; a later run_end that is not provisional replaces it "
                          "without a warning")


RECORD_MODELS: dict[str, type[_Record]] = {
    "run_start": RunStart,
    "step": StepRecord,
    "event": EventRecord,
    "criterion": CriterionRecord,
    "early_stop": EarlyStopRecord,
    "run_end": RunEnd,
}

TraceRecord = Annotated[
    Union[RunStart, StepRecord, EventRecord, CriterionRecord, EarlyStopRecord, RunEnd],
    Field(discriminator="type"),
]


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one trace line, generated from the models."""
    schema = TypeAdapter(TraceRecord).json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://qita.dev/schemas/trace-format-v1.json"
    schema["title"] = "qita trace format v1: one JSON Lines record"
    schema["description"] = (
        "One line of a qita trace (JSON Lines). Unknown record types and unknown fields are "
        "allowed and kept by readers."
    )
    return schema


def json_schema_text() -> str:
    """The committed form of the schema: stable key order, two-space indent, final newline."""
    return orjson.dumps(json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


if __name__ == "__main__":  # pragma: no cover - used to regenerate the committed schema
    sys.stdout.write(json_schema_text())
