"""Reader for coder_eval results, read as coder_eval itself means them.

Layouts: a results folder (`run.json`, `experiment.json`, `<variant>/<task>/<NN>/task.json`),
the older one without replicate folders (`<variant>/<task>/task.json`), a variant, task or
replicate folder on its own, a single `task.json`, and a zip of any of them. Each
task.json (coder_eval's `EvaluationResult`) becomes one v1 run:

- verdict from `final_status` by coder_eval's own categories (SUCCESS pass; FAILURE,
  TIMEOUT, MAX_TURNS_EXHAUSTED, TOKEN/COST_BUDGET_EXCEEDED fail; ERROR, BUILD_FAILED
  error; NOT_GRADED not graded); the status itself is kept as `source_status`;
- one step per assistant message (what `early_stop.sdk_turn_index` counts, unless a
  reply's parts come as messages of their own; the `assistant_turn_count` of an
  iteration whose agent surfaces no messages), its tool
  calls (`iterations[].commands[]`) as actions with their results; the run's step count
  is `total_assistant_turns`;
- tokens as coder_eval counts them: `input` holds the uncached input and both cache
  buckets once (coder_eval's computed `input_tokens`), never the buckets twice;
- cost: the whole bill (`run.json` row `total_cost_usd`, else agent + judge spend) and
  the agent's slice; unpriced stays null, never $0;
- time: end to end (`duration_seconds`) and the agent's own (`agent_wall_ms`, else the
  sum of the positive iteration durations);
- budgets from `task_config.resolved.run_limits`;
- a field of another type than coder_eval documents is read as not given and named in a
  warning on its run (app.ingest.coder_eval_fields), never a crash.

The field-by-field mapping is in docs/upload.md.
"""

from __future__ import annotations

import functools
import hashlib
import os
import unicodedata
from collections import Counter
from datetime import datetime
from typing import Any, Callable, Iterator, Optional

from .coder_eval_fields import conform_row, conform_task
from .sources import Source, join_label, key_for, parse_json_document, read_document_bytes, read_json_document

#: The version of this reading of coder_eval's files (Source.reading). Raise it with every
#: change to the records a file makes: a database ingested before reads each one again, and
#: what an earlier reading made of a run (its steps, its id) is replaced, never left beside.
# 7: run_limits.turn_timeout in the budget, the warning on a transcript's turn count;
# 6: quoted numbers, a bad token bucket as 0, a null total_token_usage unknown, the early
# stop at the step of its deciding call; 5: a turn that surfaced no usage has no tokens;
# 4: dialog stop reasons, the per-call step cap
READING = "coder_eval-7"
MAX_TASK_JSON = 512 * 1024 * 1024
TASK_FILE = "task.json"
#: Files only a coder_eval results tree holds (besides task.json).
SUMMARY_FILES = ("run.json", "experiment.json", "variant.json")
#: Folders never searched for task.json: the sandbox's copy (`artifacts/`, which may hold
#: virtualenvs with thousands of files), and tool folders.
SKIP_DIRS = {"artifacts", "node_modules", "__pycache__", "site-packages", ".venv", "venv", ".git"}
#: How deep below a detected folder task.json files are looked for (root/variant/task/NN/task.json).
MAX_DEPTH = 4
#: How many folders above a given task folder are searched for run.json / experiment.json.
MAX_ANCESTORS = 4

#: coder_eval's FinalStatus categories (its REPORT_SCHEMA.md).
STATUS_VERDICT = {
    "SUCCESS": "pass",
    "FAILURE": "fail",
    "TIMEOUT": "fail",
    "MAX_TURNS_EXHAUSTED": "fail",
    "TOKEN_BUDGET_EXCEEDED": "fail",
    "COST_BUDGET_EXCEEDED": "fail",
    "ERROR": "error",
    "BUILD_FAILED": "error",
    "NOT_GRADED": "not_graded",
}
#: Why each status ended the run, in the stop-reason vocabulary of the trace format.
STATUS_STOP_REASON = {
    "TIMEOUT": "budget_time",
    "MAX_TURNS_EXHAUSTED": "budget_steps",
    "TOKEN_BUDGET_EXCEEDED": "budget_tokens",
    "COST_BUDGET_EXCEEDED": "budget_cost",
    "ERROR": "unrecoverable_error",
    "BUILD_FAILED": "unrecoverable_error",
}
STATUS_WORDS = {
    "SUCCESS": "passed",
    "FAILURE": "failed",
    "TIMEOUT": "failed: timed out",
    "MAX_TURNS_EXHAUSTED": "failed: turn budget exhausted",
    "TOKEN_BUDGET_EXCEEDED": "failed: token budget exceeded",
    "COST_BUDGET_EXCEEDED": "failed: cost budget exceeded",
    "ERROR": "error: no gradeable attempt",
    "BUILD_FAILED": "error: the sandbox image failed to build",
    "NOT_GRADED": "not graded (run without grading)",
}
#: Why a dialog ended (`simulation.stop_reason`, results.py's SimulationTelemetry), where
#: its status does not already say: (stop reason, what the run page says). A dialog
#: reason with no counterpart in the trace format ("budget", "run_limit_exceeded") is
#: kept as coder_eval wrote it and shown as given.
DIALOG_STOP_REASON = {
    # a success only when the grading agrees (SUCCESS): else the dialog's harness ended it
    "criteria_passed": ("env_terminal", "the dialog ended when the success criteria passed"),
    "stop_token": ("env_terminal", "the simulated user ended the dialog (stop token)"),
    # its exchanges (total_turns), not the agent's max_turns that the step budget shows
    "max_turns": ("env_terminal", "the dialog reached its max_turns of user↔agent exchanges"),
    "agent_max_turns": ("budget_steps", "the agent reached its max_turns within a dialog turn"),
    "error": ("unrecoverable_error", "the dialog ended on an error"),
}
LIFECYCLE = {"ERROR": "error", "BUILD_FAILED": "error", "TIMEOUT": "failed", "MAX_TURNS_EXHAUSTED": "failed",
             "TOKEN_BUDGET_EXCEEDED": "failed", "COST_BUDGET_EXCEEDED": "failed"}


# -- values --------------------------------------------------------------------------------

def _num(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def _str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _seconds_between(start: Any, end: Any) -> Optional[float]:
    try:
        a = datetime.fromisoformat(start) if isinstance(start, str) else None
        b = datetime.fromisoformat(end) if isinstance(end, str) else None
    except ValueError:
        return None
    if a is None or b is None or (a.tzinfo is None) != (b.tzinfo is None):
        return None
    delta = (b - a).total_seconds()
    return delta if delta >= 0 else None


def criterion_id(ctype: Any, description: Any) -> str:
    """coder_eval names a criterion `"type: description"` (as in early_stop.armed_criteria)."""
    t, d = _str(ctype), _str(description)
    if t and d:
        return f"{t}: {d}"
    return t or d or "criterion"


def tokens(usage: Any) -> Optional[dict[str, Optional[int]]]:
    """A TokenUsage as v1 tokens, each token counted once.

    coder_eval serializes `uncached_input_tokens` and both cache buckets, plus a computed
    `input_tokens` that already sums the three; a file written before the split has only
    `input_tokens`, which coder_eval adopts as uncached on read (REPORT_SCHEMA.md).
    """
    usage = _dict(usage)
    if not usage:
        return None
    uncached = _int(usage.get("uncached_input_tokens"))
    if uncached is None:
        uncached = _int(usage.get("input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    if read is None:
        read = _int(usage.get("cache_read_tokens"))
    write = _int(usage.get("cache_creation_input_tokens"))
    if write is None:
        write = _int(usage.get("cache_creation_tokens"))
    out = _int(usage.get("output_tokens"))
    if uncached is None and read is None and write is None and out is None:
        return None  # no bucket at all: the usage is unknown, not zero
    # A bucket TokenUsage does not carry is 0 there (each defaults to 0): a file of an
    # older version without the cache buckets read them as none.
    uncached, read, write, out = uncached or 0, read or 0, write or 0, out or 0
    return {"input": uncached + read + write, "output": out, "total": uncached + read + write + out,
            "cache_read": read, "cache_write": write}


def _add_tokens(a: Optional[dict[str, Any]], b: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    if a is None or b is None:
        return a or b
    return {k: (None if a.get(k) is None and b.get(k) is None else (a.get(k) or 0) + (b.get(k) or 0))
            for k in ("input", "output", "total", "cache_read", "cache_write")}


def budget_counted(limits: dict[str, Any]) -> list[str]:
    """The token buckets coder_eval's token caps count: uncached input and output, plus
    the cache buckets only when `count_cached_input` / `count_cache_creation` say so."""
    counted = ["uncached_input"]
    if limits.get("count_cached_input") is True:
        counted.append("cache_read")
    if limits.get("count_cache_creation") is True:
        counted.append("cache_write")
    counted.append("output")
    return counted


# -- steps: one per assistant turn -----------------------------------------------------------

def _exit_code(command: dict[str, Any]) -> Optional[int]:
    for holder in (command, _dict(command.get("result_data"))):
        for key in ("exit_code", "returncode", "return_code", "exitCode"):
            code = _int(holder.get(key))
            if code is not None:
                return code
    return None


def _text_of(message: dict[str, Any], kind: str) -> Optional[str]:
    parts = [b.get(kind) for b in _list(message.get("content_blocks"))
             if isinstance(b, dict) and b.get("block_type") == kind and _str(b.get(kind))]
    return "\n\n".join(parts) if parts else None


def _turns(iteration: dict[str, Any]) -> list[tuple[Optional[dict[str, Any]], list[dict[str, Any]]]]:
    """The assistant turns of one iteration, each with its tool calls, in order.

    Commands belong to the assistant message that issued them (`tool_use_ids`), else to
    the turn their `assistant_turn_index` names. An iteration whose agent reports no
    messages (coder_eval: "may be empty for agents/modes that don't surface message
    detail") still has the `assistant_turn_count` turns coder_eval counted, each with the
    calls whose `assistant_turn_index` names it (a call without one stays with the call
    before it); without that count, one turn per distinct index, or one turn in all.
    """
    commands = [c for c in _list(iteration.get("commands")) if isinstance(c, dict)]
    messages = [m for m in _list(iteration.get("messages"))
                if isinstance(m, dict) and m.get("role") == "assistant"]
    if not messages:
        counted = _int(iteration.get("assistant_turn_count"))
        indexes = [_int(c.get("assistant_turn_index")) for c in commands]
        if counted is not None and counted > 0 and all(i is None or i >= 0 for i in indexes):
            slots: list[list[dict[str, Any]]] = [[] for _ in range(max([counted] + [i + 1 for i in indexes if i is not None]))]
            current = 0
            for c, i in zip(commands, indexes):
                current = i if i is not None else current
                slots[current].append(c)
            return [(None, calls) for calls in slots]
        by_index: dict[Any, list[dict[str, Any]]] = {}
        for c in commands:
            by_index.setdefault(_int(c.get("assistant_turn_index")), []).append(c)
        if not by_index:
            return [(None, [])]
        return [(None, by_index[k]) for k in sorted(by_index, key=lambda k: (k is None, k or 0))]
    owner: dict[str, int] = {}
    for i, m in enumerate(messages):
        for tid in _list(m.get("tool_use_ids")):
            if isinstance(tid, str):
                owner.setdefault(tid, i)
    calls: list[list[dict[str, Any]]] = [[] for _ in messages]
    for c in commands:
        i = owner.get(c.get("tool_id")) if isinstance(c.get("tool_id"), str) else None
        if i is None:
            idx = _int(c.get("assistant_turn_index"))
            i = idx if idx is not None and 0 <= idx < len(messages) else len(messages) - 1
        calls[i].append(c)
    return list(zip(messages, calls))


def _not_run(command: dict[str, Any]) -> bool:
    """A call coder_eval saw issued but never saw run: `result_status` "unknown", no
    execution times. Its `error_message` ("no result observed") is the harness's telemetry
    note, not the call's error: an early stop latches on a call's start, so the deciding
    call of every early-stopped run is one of these."""
    return (command.get("result_status") in (None, "unknown") and not command.get("execution_started_at")
            and not command.get("execution_completed_at") and _exit_code(command) is None)


def _action_result(command: dict[str, Any], note: Optional[str]) -> dict[str, Any]:
    not_run = _not_run(command)
    result: dict[str, Any] = {"status": command.get("result_status"), "exit_code": _exit_code(command),
                              "output": command.get("result_summary"),
                              "error": None if not_run else command.get("error_message"),
                              "duration_ms": _num(command.get("duration_ms"))}
    if command.get("result_data") is not None:
        result["data"] = command.get("result_data")
    if not_run:
        said = _str(command.get("error_message"))
        note = "; ".join(p for p in (said, note) if p) or "no result observed"
    if note:
        result["note"] = note
    return result


def _turnless(iteration: dict[str, Any], turns: list) -> bool:
    """An iteration in which the agent took no turn: no assistant message, no tool call, no
    reply, and coder_eval counted no assistant turn in it (a dialog's last simulated user
    message, a run with `agent: none`, an attempt that crashed after it was billed but
    before any assistant message). It is no step: `total_assistant_turns` counts none.
    Without a count, billed tokens say a turn was taken whose messages were not surfaced."""
    if not (len(turns) == 1 and turns[0][0] is None and not turns[0][1] and not _str(iteration.get("agent_output"))):
        return False
    counted = _int(iteration.get("assistant_turn_count"))
    return counted == 0 or (counted is None and iteration.get("token_usage") is None)


def _turnless_event(run_id: str, it_no: int, iteration: dict[str, Any], after_step: int) -> dict[str, Any]:
    """What a turn-less iteration still says (its user message, a crash before any turn), as
    an event after the step it followed (run-level when it came first)."""
    payload: dict[str, Any] = {"iteration": it_no}
    if _str(iteration.get("user_input")):
        payload["user_input"] = iteration["user_input"]
    crashed = bool(iteration.get("crashed"))
    if crashed:
        payload["crash_reason"] = _str(iteration.get("crash_reason"))
    if isinstance(iteration.get("token_usage"), dict):
        # billed all the same (the run's totals count them); no step holds them
        payload["token_usage"] = iteration["token_usage"]
    event: dict[str, Any] = {"type": "event", "run_id": run_id, "phase": "ITERATION_WITHOUT_TURNS", "ok": not crashed,
                             "ts": _str(iteration.get("timestamp")), "payload": payload,
                             "error": ("crashed before any assistant turn: " + (_str(iteration.get("crash_reason"))
                                                                                 or "the agent failed")) if crashed else None}
    if after_step:
        event["step"] = after_step
    return event


def task_steps(run_id: str, task: dict[str, Any], events: Optional[list[dict[str, Any]]] = None) -> list[dict[str, Any]]:
    """The v1 step records of one task.json: one per assistant turn, numbered from 1 across
    iterations (a retry after a crash continues the count), tool calls numbered from 1
    across the run as `early_stop.tool_call_index` counts them. An iteration without any
    assistant turn adds no step; what it says goes to `events` (when given)."""
    early = _dict(task.get("early_stop"))
    stop_call = _int(early.get("tool_call_index")) if early else None
    iterations = _iterations(task)
    steps: list[dict[str, Any]] = []
    call_no = 0
    previous_crashed = False
    for it_no, it in enumerate(iterations, start=1):
        turns = _turns(it)
        if _turnless(it, turns):
            if events is not None:
                events.append(_turnless_event(run_id, it_no, it, len(steps)))
            previous_crashed = previous_crashed or bool(it.get("crashed"))
            continue
        reported = isinstance(it.get("token_usage"), dict)
        reconciliation = None
        for m in _list(it.get("messages")):
            if isinstance(m, dict) and m.get("role") == "reconciliation":
                reconciliation = _add_tokens(reconciliation, message_tokens(m, reported))
        for t_no, (message, commands) in enumerate(turns):
            last_of_iteration = t_no == len(turns) - 1
            actions, results, invocations = [], [], []
            for c in commands:
                call_no += 1
                note = None
                if c.get("result_status") not in ("success", "error") and not c.get("execution_completed_at"):
                    if early and stop_call == call_no:
                        note = "not completed: the run was stopped early during this call (it decided the stop)"
                    elif it.get("crashed") and last_of_iteration:
                        note = "not completed: the agent crashed during this call"
                actions.append({"name": _str(c.get("tool_name")) or "tool", "args": c.get("parameters")})
                results.append(_action_result(c, note))
                invocations.append({"tool_name": _str(c.get("tool_name")) or "tool", "status": c.get("result_status"),
                                    "error": None if _not_run(c) else c.get("error_message"),
                                    "latency_ms": _num(c.get("duration_ms")),
                                    "exit_code": _exit_code(c), "call_index": call_no,
                                    "tool_id": c.get("tool_id")})
            msg = message or {}
            text = _text_of(msg, "text") if message else (_str(it.get("agent_output")) if last_of_iteration else None)
            thinking = _text_of(msg, "thinking") if message else None
            step: dict[str, Any] = {
                "type": "step", "run_id": run_id, "step": len(steps) + 1,
                "ts": _str(msg.get("started_at")) or (_str(it.get("timestamp")) if not message else None),
                "actions": actions, "action_results": results, "tool_invocations": invocations,
                "decision": {"mode": "tool" if actions else "text", "rationale": text, "actions": actions},
                "iteration": it_no,
            }
            if thinking:
                step["thinking"] = thinking
            if t_no == 0 and _str(it.get("user_input")):
                step["observation"] = {"user_input": it.get("user_input")}
            step_tokens = message_tokens(msg, reported) if message else (tokens(it.get("token_usage")) if len(turns) == 1 else None)
            if last_of_iteration and reconciliation and message:
                # The iteration's residual tokens (billed, never surfaced as a message):
                # kept on its last turn so the steps still add up to the iteration.
                step_tokens = _add_tokens(step_tokens, reconciliation)
                step["reconciliation_tokens"] = reconciliation
            if step_tokens is not None:
                step["tokens"] = step_tokens
            if len(turns) == 1:
                cost = _num(_dict(it.get("token_usage")).get("total_cost_usd"))
                if cost is not None:
                    step["cost_usd"] = cost
            duration = _turn_duration(it, turns, t_no)
            if duration is not None:
                step["duration_s"] = duration
            if t_no == 0 and previous_crashed:
                step["retry"] = True  # coder_eval ran the iteration again after a crash
            if last_of_iteration and it.get("crashed"):
                step["error"] = "crashed: " + (_str(it.get("crash_reason")) or "the agent failed mid-turn")
                step["crashed"] = True
            summary = _dict(it.get("result_summary"))
            if last_of_iteration and summary.get("is_error") and "error" not in step:
                step["error"] = _str(summary.get("result")) or _str(summary.get("subtype")) or "the turn ended in error"
            if last_of_iteration and it.get("max_turns_exhausted"):
                step["max_turns_exhausted"] = True
            steps.append(step)
        previous_crashed = bool(it.get("crashed"))
    if steps and not steps[-1]["actions"] and steps[-1]["decision"]["rationale"] and not steps[-1].get("error"):
        # The last turn called no tool: it is the agent's final reply.
        steps[-1]["decision"]["final_answer"] = steps[-1]["decision"]["rationale"]
        steps[-1]["decision"]["mode"] = "final"
    return steps


def _iterations(task: dict[str, Any]) -> list[dict[str, Any]]:
    """A task.json's turn records: `iterations`, or `turns`, the legacy name coder_eval still reads."""
    holder = task.get("iterations") if "iterations" in task else task.get("turns")
    return [it for it in _list(holder) if isinstance(it, dict)]


def message_tokens(message: dict[str, Any], reported: bool) -> Optional[dict[str, Optional[int]]]:
    """A transcript message's tokens. Its buckets sum to its turn's `token_usage` (the
    token invariant of REPORT_SCHEMA.md); when the turn's usage is null the SDK surfaced
    none, and the message's zeros are the buckets' defaults, not a count: unknown. A
    message of such a turn that does carry tokens keeps them."""
    counted = tokens(_msg_usage(message))
    if counted is not None and not reported and not counted["total"]:
        return None
    return counted


def _msg_usage(message: dict[str, Any]) -> dict[str, Any]:
    """A transcript message's buckets in TokenUsage names (messages spell them their own way)."""
    return {"uncached_input_tokens": message.get("input_tokens"), "output_tokens": message.get("output_tokens"),
            "cache_creation_input_tokens": message.get("cache_creation_tokens", message.get("cache_creation_input_tokens")),
            "cache_read_input_tokens": message.get("cache_read_tokens", message.get("cache_read_input_tokens"))}


def _turn_duration(iteration: dict[str, Any], turns: list, t_no: int) -> Optional[float]:
    """A turn lasts from its message's start to the next one's (its generation and its tool
    calls); the last turn ends with the iteration. Without message times: the generation
    plus the tool calls' own durations."""
    message = turns[t_no][0]
    if message is None:
        if len(turns) == 1:
            d = _num(iteration.get("duration_seconds"))
            return d if d is not None and d >= 0 else None
        ms = [_num(c.get("duration_ms")) for c in turns[t_no][1]]
        ms = [m for m in ms if m is not None]
        return sum(ms) / 1000 if ms else None
    end = turns[t_no + 1][0].get("started_at") if t_no + 1 < len(turns) and turns[t_no + 1][0] else None
    if end is None and t_no == len(turns) - 1:
        end = iteration.get("timestamp")
    span = _seconds_between(message.get("started_at"), end)
    if span is not None:
        return span
    parts = [_num(message.get("generation_duration_ms"))] + [_num(c.get("duration_ms")) for c in turns[t_no][1]]
    parts = [p for p in parts if p is not None]
    return sum(parts) / 1000 if parts else None


# -- the run ---------------------------------------------------------------------------------

#: coder_eval's names of the parameters a live verdict needs -> qita's (`qita.criteria` specs).
#: The real results seen so far configure only `command_executed`; the other spellings
#: are qita's own, so a spec that already uses them is carried as it is.
LIVE_KEYS = {
    "command_executed": (("command_pattern", "pattern"), ("pattern", "pattern"), ("tool_name", "tool"),
                         ("min_count", "min_count"), ("max_count", "max_count"),
                         ("exclude_pattern", "exclude_pattern"), ("require_success", "require_success")),
    "skill_triggered": (("skill_name", "skill"), ("skill", "skill"), ("policy", "policy")),
    "tool_invoked": (("tool_name", "tool"), ("tool", "tool"), ("min_count", "min_count"),
                     ("max_count", "max_count"), ("require_success", "require_success")),
}


def live_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a configured criterion that `qita.live` needs to replay its live
    verdict, in qita's spelling (`command_pattern` -> `pattern`, `tool_name` -> `tool`, ...),
    and coder_eval's decision budget (`stop_early.decide_within`: the turns an armed
    criterion has to be decided in). Nulls are left out (they mean the default)."""
    out: dict[str, Any] = {}
    for theirs, ours in LIVE_KEYS.get(config.get("type"), ()):
        value = config.get(theirs)
        if value is not None and ours not in out:
            out[ours] = value
    stop = config.get("stop_early")
    within = _int(stop.get("decide_within")) if isinstance(stop, dict) else None
    if within is not None and within > 0:
        out["decide_within"] = within
    return out


def _criteria(task: dict[str, Any], armed: list[str], enabled: bool
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """(specs, result records, id by (type, description)) from the criteria results and the
    resolved task config (which says which criteria can stop the run)."""
    configured: dict[tuple[Any, Any], dict[str, Any]] = {}
    resolved = _dict(_dict(task.get("task_config")).get("resolved"))
    for spec in _list(resolved.get("success_criteria")):
        if isinstance(spec, dict):
            configured.setdefault((spec.get("type"), spec.get("description")), spec)
    specs: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    ids: dict[str, Any] = {}
    seen: dict[str, int] = {}
    used: set[tuple[Any, Any]] = set()
    for res in _list(task.get("success_criteria_results")):
        if not isinstance(res, dict):
            continue
        base = criterion_id(res.get("criterion_type"), res.get("description"))
        seen[base] = seen.get(base, 0) + 1
        cid = base if seen[base] == 1 else f"{base} ({seen[base]})"
        ids.setdefault(base, cid)
        key = (res.get("criterion_type"), res.get("description"))
        config = configured.get(key, {})
        used.add(key)
        # `gating` as the result says; a result written before the field existed reads
        # back as gating in coder_eval, though its own gate then excluded a weight-0
        # criterion: the configured weight says which it was.
        gating = res["gating"] if isinstance(res.get("gating"), bool) else _config_gating(config)
        specs.append(_spec(cid, base, res.get("criterion_type"), res.get("description"), gating,
                           res.get("pass_threshold"), config, armed, enabled))
        evaluated = res.get("evaluation_status", "evaluated") != "not_evaluated"
        details = res.get("details")
        if res.get("error"):
            details = f"{details}\n\nerror: {res['error']}" if details else f"error: {res['error']}"
        record: dict[str, Any] = {"type": "criterion", "id": cid,
                                  # Kept as written: the store flags a score outside [0, 1].
                                  "score": _num(res.get("score")) if evaluated else None,
                                  "details": details if evaluated else (details or "not evaluated: the check did not run")}
        for key in ("result_kind", "evaluation_status", "observed_label", "expected_label", "findings", "transcript_path"):
            if res.get(key) is not None:
                record[key] = res[key]
        results.append(record)
    # Criteria the task declares that produced no result (an errored run is not graded:
    # coder_eval keeps only its post-failure evidence): declared all the same.
    for key, config in configured.items():
        if key in used:
            continue
        base = criterion_id(*key)
        seen[base] = seen.get(base, 0) + 1
        cid = base if seen[base] == 1 else f"{base} ({seen[base]})"
        ids.setdefault(base, cid)
        specs.append(_spec(cid, base, key[0], key[1], _config_gating(config), config.get("pass_threshold"),
                           config, armed, enabled))
    return specs, results, ids


def _config_gating(config: dict[str, Any]) -> bool:
    """Whether a configured criterion gates: coder_eval's `is_gating` is `weight > 0` (weight
    0 is informational; an unset weight is the default 1). A `gating` key (qita's own
    spelling) is read as written."""
    if isinstance(config.get("gating"), bool):
        return config["gating"]
    weight = _num(config.get("weight"))
    return weight is None or weight > 0


def _spec(cid: str, base: str, ctype: Any, description: Any, gating: Any, threshold: Any, config: dict[str, Any],
          armed: list[str], enabled: bool) -> dict[str, Any]:
    """A v1 criterion spec from what coder_eval says of one criterion (its result, else its
    configuration) and its configuration (which says whether and how it can stop the run)."""
    stop = config.get("stop_early")
    # `stop_early` arms a criterion: it always stops on a live fail, and also on a
    # live pass when `on_pass: stop` (coder_eval's task definition). The first release of
    # early stop (its design, seeds/coder-eval-early-stop-pr.md) armed it with
    # `stop_when: pass|fail|decided`, read as it says.
    stop_when = None
    if isinstance(stop, dict):
        stop_when = "decided" if stop.get("on_pass") == "stop" else "fail"
    elif config.get("stop_when") in ("pass", "fail", "decided"):
        stop_when = config["stop_when"]
    elif base in armed:
        stop_when = "decided"
    # The result's `pass_threshold` mirrors its criterion's (results.py); a result written
    # before the field existed has the configured one only, which is what the gate used.
    threshold = _num(threshold)
    if threshold is None:
        threshold = _num(config.get("pass_threshold"))
    spec = {"id": cid, "type": _str(ctype), "description": _str(description), "gating": gating is not False,
            "pass_threshold": threshold if threshold is not None else 0.9,
            "stop_when": stop_when if (enabled or base in armed) else None}
    weight = _num(config.get("weight"))
    if weight is not None:
        spec["weight"] = weight
    spec.update(live_parameters(config))
    if stop_when is not None and not enabled:
        spec["armable_as"] = stop_when  # armed only in a variant with early stop on
    return spec


def _early_stop_config(enabled: bool, limits: dict[str, Any]) -> dict[str, Any]:
    """run_start.early_stop: the switch, and coder_eval's gate threshold when the task sets
    one (`run_limits.stop_early_gate_threshold`, also in a variant with early stop off: the
    policy lab replays the smoke variant's gate over the e2e runs)."""
    config: dict[str, Any] = {"enabled": enabled}
    threshold = _num(limits.get("stop_early_gate_threshold"))
    if threshold is not None and 0 <= threshold <= 1:
        config["gate_threshold"] = threshold
    return config


def _early_stop_enabled(limits: dict[str, Any], configured_armed: bool, early: dict[str, Any]) -> bool:
    # `run_limits.stop_early: false` is the documented kill switch; unset leaves criteria
    # that carry a `stop_early` block armed.
    if early:
        return True
    switch = limits.get("stop_early")
    if switch is False:
        return False
    return switch is True or configured_armed


#: The live verdict each early-stop reason means for its deciding criterion (results.py's
#: EarlyStopReason: a budget that expired undecided is an effective fail).
LIVE_VERDICT = {"criterion_passed": "pass", "criterion_failed": "fail", "decision_budget_exceeded": "fail"}


def task_records(task: dict[str, Any], *, run_id: str, experiment: str, variant: str, task_name: str,
                 replicate: int, context: Optional[dict[str, Any]] = None,
                 notes: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """The v1 records of one task.json. `context`: what the results folder says about the
    run (`experiment_id`, `description`, `results_run_id`, the run.json row). `notes`, when
    given, gets what the reading found worth a warning (the figures disagree)."""
    context = context or {}
    row = _dict(context.get("row"))
    task_id = _str(task.get("task_id")) or task_name
    variant = _str(task.get("variant_id")) or variant
    status = _str(task.get("final_status"))
    status_key = status.upper() if status else None
    early = _dict(task.get("early_stop"))
    armed = [a for a in _list(early.get("armed_criteria")) if isinstance(a, str)]
    resolved = _dict(_dict(task.get("task_config")).get("resolved"))
    limits = _dict(resolved.get("run_limits"))
    configured_armed = any(isinstance(s, dict) and isinstance(s.get("stop_early"), dict)
                           for s in _list(resolved.get("success_criteria")))
    enabled = _early_stop_enabled(limits, configured_armed, early)
    specs, results, ids = _criteria(task, armed, enabled)
    for r in results:
        r["run_id"] = run_id
    events: list[dict[str, Any]] = []
    steps = task_steps(run_id, task, events)

    metadata = {k: v for k, v in {
        "source": "coder_eval",
        "final_status": status,
        "experiment_id": context.get("experiment_id"),
        "experiment_description": context.get("description"),
        "results_run_id": context.get("results_run_id"),
        "framework_version": context.get("framework_version") or _dict(task.get("environment_info")).get("coder_eval"),
        "agent_wall_ms": row.get("agent_wall_ms"),
        "setup_ms": task.get("setup_ms"),
        "grading_ms": task.get("grading_ms"),
        "total_assistant_turns": task.get("total_assistant_turns"),
        "iteration_count": task.get("iteration_count"),
        "weighted_score": task.get("weighted_score"),
        # The row's flag, absent meaning complete (results.py `row_cost_incomplete`: never
        # inferred where a row exists); without a row, coder_eval's rule on the task.json.
        "cost_complete": row.get("cost_complete") is not False if row else cost_complete(task),
        # REPORT_SCHEMA.md: with the row's flag false "every cost figure" is a floor, the
        # agent's slice too; without a row, only what the agent itself spent counts
        "agent_cost_complete": row.get("cost_complete") is not False if row else cost_complete(task, simulator=False),
        "initial_prompt": resolved.get("initial_prompt"),
        "source_file": _dict(task.get("task_config")).get("source_file"),
    }.items() if v is not None}
    tags = ["coder_eval", *[t for t in _list(resolved.get("tags")) if isinstance(t, str) and t]]
    budget = {
        "max_steps": _int(limits.get("max_turns")),
        "max_runtime_seconds": _num(limits.get("task_timeout")),
        "max_tokens": _int(limits.get("max_total_tokens")),
        "max_input_tokens": _int(limits.get("max_input_tokens")),
        "max_output_tokens": _int(limits.get("max_output_tokens")),
        "max_cost_usd": _num(limits.get("max_usd")),
    }
    # run_limits.turn_timeout (not in REPORT_SCHEMA.md; the real task.json files carry it)
    # limits each agent call, not the run: a TIMEOUT under task_timeout came from it, and
    # the time gauge says so instead of "ok" beside a time-limit stop.
    if (call_limit := _num(limits.get("turn_timeout"))) is not None and call_limit > 0:
        budget["max_call_seconds"] = call_limit
    if any(v is not None for k, v in budget.items() if k.startswith("max_") and "token" in k):
        budget["tokens_counted"] = budget_counted(limits)
    # max_turns caps each agent call (results.py: `num_turns`, "the unit max_turns caps";
    # max_turns + 1 when the cap ended the call), not the run: a dialog of 5 exchanges of 4
    # turns each is 20 turns under a cap of 12. The gauge measures the longest call against
    # it, by its num_turns, else by its assistant turns.
    per_iteration = Counter(s.get("iteration") for s in steps)
    calls = [n if (n := _int(it.get("num_turns"))) is not None and n >= 0 else per_iteration.get(it_no, 0)
             for it_no, it in enumerate(_iterations(task), start=1)]
    if budget["max_steps"] is not None and sum(1 for n in calls if n) > 1:
        budget["max_steps_scope"] = "iteration"
        budget["steps_longest_iteration"] = max(calls)
    start = {"type": "run_start", "run_id": run_id, "schema": "qita.trace/1",
             "ts": _str(task.get("started_at")), "task_id": task_id, "experiment": experiment, "variant": variant,
             "replicate": replicate, "objective": _str(task.get("task_description")) or _str(resolved.get("description")),
             "agent": _str(task.get("agent_type")) or _str(_dict(task.get("agent_config")).get("type")) or "coder_eval",
             "model": _str(task.get("model_used")) or _str(row.get("model_used")),
             "budget": budget, "criteria": specs, "early_stop": _early_stop_config(enabled, limits),
             "tags": list(dict.fromkeys(tags)),
             "metadata": metadata}

    records: list[dict[str, Any]] = [start, *steps, *events, *results]
    deciding = None
    if early:
        has_deciding = early.get("deciding_criterion_type") or early.get("deciding_criterion_description")
        deciding_base = criterion_id(early.get("deciding_criterion_type"), early.get("deciding_criterion_description"))
        deciding = ids.get(deciding_base, deciding_base) if has_deciding else None
        live = LIVE_VERDICT.get(_str(early.get("reason")) or "")
        if deciding is not None and live is not None:
            deciding = _decided_twin(deciding_base, deciding, live, specs, results)
        tci = _int(early.get("tool_call_index"))
        # The step that holds the deciding call: coder_eval's sdk_turn_index counts turns
        # by message id, and an SDK that sends one reply's parts as messages of their own
        # (text, then each tool use) makes more steps than turns; the call says where.
        turn = next((s["step"] for s in steps for inv in s["tool_invocations"] if inv["call_index"] == tci),
                    None) if tci is not None else None
        if turn is None:
            turn = _int(early.get("sdk_turn_index"))
        records.append({"type": "early_stop", "run_id": run_id, "reason": _str(early.get("reason")),
                        "deciding_criterion": deciding, "armed_criteria": [ids.get(a, a) for a in armed],
                        "step": turn, "tool_call_index": tci if tci is not None and tci >= 1 else None,
                        "elapsed_s": _num(early.get("elapsed_seconds")),
                        "turns_remaining": _int(early.get("turns_remaining_at_stop")),
                        "gate_threshold": _num(early.get("gate_threshold"))})
        if deciding and turn is not None and live is not None:
            for r in results:
                if r["id"] == deciding:
                    r["live_verdict"] = live
                    r["decided_at_step"] = turn
    end = _run_end(task, run_id=run_id, status_key=status_key, status=status, early=early,
                   deciding_details=next((r.get("details") for r in results if r["id"] == deciding), None),
                   steps=steps, row=row)
    records.append(end)
    if notes is not None and end["steps"] != len(steps):
        notes.append(f"task.json: total_assistant_turns is {end['steps']} but its transcript holds {len(steps)} "
                     f"assistant turn(s); the run's step count is coder_eval's, {end['steps']}")
    return records


def _decided_twin(base: str, first: str, live: str, specs: list[dict[str, Any]],
                  results: list[dict[str, Any]]) -> str:
    """Which of a task's criteria of one type and description (ids `base`, `base (2)`, …)
    an early stop's decision names. coder_eval's record names only the type and the
    description, so the first was always taken, even when it passed and the run stopped on
    a failure: the twin whose result agrees with the decision is the one that decided."""
    by_id = {sp.get("id"): sp for sp in specs}
    twins = [by_id[first]] if first in by_id else []
    while f"{base} ({len(twins) + 1})" in by_id:   # the ids _criteria gives a type and description seen again
        twins.append(by_id[f"{base} ({len(twins) + 1})"])
    if len(twins) < 2:
        return first
    scores = {r["id"]: r.get("score") for r in results}
    for spec in twins:
        score = scores.get(spec["id"])
        if isinstance(score, (int, float)) and (score >= spec["pass_threshold"]) == (live == "pass"):
            return str(spec["id"])
    return first


def agent_wall_s(iterations: list[Any]) -> Optional[float]:
    """The agent's own time without run.json's `agent_wall_ms`, by coder_eval's rule: the sum
    of the positive `iterations[].duration_seconds` (a task.json's turn records or a run.json
    row's digest of them); None when no turn was timed."""
    timed = [d for d in (_num(it.get("duration_seconds")) for it in iterations if isinstance(it, dict))
             if d is not None and d > 0]
    return sum(timed) if timed else None


def _run_end(task: dict[str, Any], *, run_id: str, status_key: Optional[str], status: Optional[str],
             early: dict[str, Any], deciding_details: Any, steps: list[dict[str, Any]],
             row: dict[str, Any]) -> dict[str, Any]:
    verdict = STATUS_VERDICT.get(status_key) if status_key else None
    error = _str(task.get("error_message"))
    dialog = _str(_dict(task.get("simulation")).get("stop_reason"))
    dialog_detail = None
    if early:
        stop_reason = "early_stop"
    elif status_key in STATUS_STOP_REASON:
        stop_reason = STATUS_STOP_REASON[status_key]
    elif dialog and status_key:
        # a dialog's own reason: "final" would say the agent ended its turn, which a dialog
        # cut off at its max_turns did not
        stop_reason, dialog_detail = DIALOG_STOP_REASON.get(
            dialog, (dialog, f"the dialog ended: {dialog} (coder_eval's simulation.stop_reason)"))
        if dialog == "criteria_passed" and status_key == "SUCCESS":
            stop_reason = "success"
    elif task.get("max_turns_exhausted") is True:
        stop_reason = "budget_steps"
    elif status_key:
        stop_reason = "final"  # the agent ended its turn
    else:
        stop_reason = None  # a task.json without final_status does not say how the run ended
    reason = None
    if status_key and status_key != "SUCCESS" and status_key != "FAILURE":
        reason = STATUS_WORDS.get(status_key, f"{status}: a status this board does not know")
        if error:
            reason += f" ({error})"
    elif status_key == "FAILURE" and error:
        reason = f"failed ({error})"

    usage = tokens(task.get("total_token_usage"))
    agent_cost = _num(row.get("agent_cost_usd")) if "agent_cost_usd" in row else \
        _num(_dict(task.get("total_token_usage")).get("total_cost_usd"))
    cost = _num(row.get("total_cost_usd")) if "total_cost_usd" in row else _bill(task, agent_cost)
    agent_ms = _num(row.get("agent_wall_ms"))
    agent_s = agent_ms / 1000 if agent_ms is not None else agent_wall_s(_iterations(task))
    turns = _int(task.get("total_assistant_turns"))
    commands = _int(task.get("actual_commands"))
    if commands is None:
        commands = sum(len(s["actions"]) for s in steps)
    report = {k: v for k, v in {
        "error_message": error,
        "error_details": task.get("error_details"),
        "error_log_tail": _str(task.get("error_log_tail")),
        "post_failure_criteria_results": task.get("post_failure_criteria_results") or None,
    }.items() if v is not None}
    stop_detail = None
    if early:
        stop_detail = deciding_details if isinstance(deciding_details, str) else None
    elif error:
        stop_detail = error
    else:
        stop_detail = dialog_detail
    final = steps[-1]["decision"].get("final_answer") if steps else None
    return {"type": "run_end", "run_id": run_id, "ts": _str(task.get("completed_at")),
            "status": (LIFECYCLE.get(status_key, "completed") if status_key else None),
            "stop_reason": stop_reason, "stop_detail": stop_detail, "final_result": final,
            "verdict": verdict, "verdict_reason": reason, "source_status": status,
            "score": _num(task.get("weighted_score")),
            # coder_eval's own count of assistant turns, which the steps are
            "steps": turns if turns is not None and turns >= 0 else len(steps), "tool_calls": commands,
            # a null total_token_usage is coder_eval's "no count" (its row's total_tokens is
            # null then), whatever tokens some messages carried: unknown, not their sum
            "tokens": usage if usage is not None else {"input": None, "output": None, "total": None},
            "cost_usd": cost, "agent_cost_usd": agent_cost,
            "elapsed_s": _num(task.get("duration_seconds")), "agent_elapsed_s": agent_s,
            "failure_report": report or None}


def row_records(row: dict[str, Any], *, run_id: str, experiment: str, context: dict[str, Any],
                read_from: str = "run.json (the row has no task.json)") -> list[dict[str, Any]]:
    """The v1 records of a run.json row that has no task.json (coder_eval counts it in
    `tasks_run`: a task that failed before it could be recorded, e.g. "docker daemon is not
    responding"). The row is a flat summary: its status, tokens (`input_tokens` there is
    the *uncached* input), cost, times and turn count; no steps. The turns and the agent's
    time are read as for a task.json, from the row's digest of its turn records
    (`iterations[]`: each one's `assistant_turn_count` and `duration_seconds`) when it has
    one; a row written before `agent_wall_ms` existed has only the digest."""
    status = _str(row.get("status"))
    key = status.upper() if status else None
    error = _str(row.get("error_message"))
    usage = tokens({"uncached_input_tokens": row.get("input_tokens"), "output_tokens": row.get("output_tokens"),
                    "cache_creation_input_tokens": row.get("cache_creation_input_tokens"),
                    "cache_read_input_tokens": row.get("cache_read_input_tokens")})
    replicate = _int(row.get("replicate_index")) or 0
    metadata = {k: v for k, v in {
        "source": "coder_eval", "final_status": status, "read_from": read_from,
        "experiment_id": context.get("experiment_id"), "experiment_description": context.get("description"),
        "results_run_id": context.get("results_run_id"), "framework_version": context.get("framework_version"),
        "agent_wall_ms": row.get("agent_wall_ms"), "setup_ms": row.get("setup_ms"), "grading_ms": row.get("grading_ms"),
        "total_assistant_turns": row.get("total_turns"), "iteration_count": row.get("iteration_count"),
        "weighted_score": row.get("weighted_score"), "cost_complete": row.get("cost_complete"),
        # where a row exists, its flag is the agent's slice's too, as for a task.json with a row
        "agent_cost_complete": row.get("cost_complete") is not False,
        "error_category": row.get("error_category"), "source_file": row.get("task_path"),
    }.items() if v is not None}
    tags = ["coder_eval", *[t for t in _list(row.get("tags")) if isinstance(t, str) and t]]
    start = {"type": "run_start", "run_id": run_id, "schema": "qita.trace/1", "task_id": _str(row.get("task_id")),
             "experiment": experiment, "variant": _str(row.get("variant_id")) or "default", "replicate": replicate,
             "agent": _str(_dict(row.get("agent_config")).get("type")) or _str(row.get("agent_type")) or "coder_eval",
             "model": _str(row.get("model_used")), "tags": list(dict.fromkeys(tags)),
             "early_stop": {"enabled": bool(row.get("stopped_early"))}, "metadata": metadata,
             # the task.json, if coder_eval writes it later (a resumed run), is the whole record
             "provisional": True}
    reason = STATUS_WORDS.get(key, f"{status}: a status this board does not know") if key and key != "SUCCESS" else None
    if reason and error:
        reason += f" ({error})"
    agent_ms = _num(row.get("agent_wall_ms"))
    digest = [it for it in _list(row.get("iterations")) if isinstance(it, dict)]
    counted = [_int(it.get("assistant_turn_count")) for it in digest]
    # The steps are assistant turns (as for a task.json's total_assistant_turns); the row's
    # `total_turns` counts SDK calls (num_turns), the same on most agents, and stands in
    # when the row has no digest.
    steps = sum(c for c in counted if c) if digest and all(c is not None for c in counted) \
        else (_int(row.get("total_turns")) or 0)
    stopped = row.get("stopped_early") is True
    end = {"type": "run_end", "run_id": run_id, "status": LIFECYCLE.get(key, "completed") if key else None,
           "stop_reason": ("early_stop" if stopped else STATUS_STOP_REASON.get(key, "final")) if key else None,
           "stop_detail": error,
           "verdict": STATUS_VERDICT.get(key) if key else None, "verdict_reason": reason, "source_status": status,
           "score": _num(row.get("weighted_score")), "steps": steps,
           "tool_calls": _int(row.get("actual_commands")), "tokens": usage,
           "cost_usd": _num(row.get("total_cost_usd")), "agent_cost_usd": _num(row.get("agent_cost_usd")),
           "elapsed_s": _num(row.get("duration")),
           "agent_elapsed_s": agent_ms / 1000 if agent_ms is not None else agent_wall_s(digest),
           "failure_report": {"error_message": error} if error else None, "provisional": True}
    if not stopped:
        return [start, end]
    # The row says the run stopped early, and why; which criterion decided it is in the task.json alone.
    gate = _num(row.get("gate_threshold"))
    early = {"type": "early_stop", "run_id": run_id, "reason": _str(row.get("early_stop_reason")),
             "turns_remaining": _int(row.get("turns_remaining_at_stop")),
             "gate_threshold": gate if gate is not None and 0 <= gate <= 1 else None}
    return [start, early, end]


#: Criterion types whose results are judge results when a result does not say its
#: `result_kind` (coder_eval's JUDGE_CRITERION_TYPES, results.py).
JUDGE_TYPES = frozenset({"llm_judge", "agent_judge", "system_one_judge"})


def _is_judge(result: dict[str, Any]) -> bool:
    """A judge result as coder_eval dispatches it: `result_kind` when given, else the type."""
    kind = result.get("result_kind")
    return kind == "judge" if kind else result.get("criterion_type") in JUDGE_TYPES


def _bill(task: dict[str, Any], agent_cost: Optional[float]) -> Optional[float]:
    """The whole bill without run.json, as coder_eval's row adds it: the agent's spend plus
    each judge's (a judge's token_usage is kept apart from the agent's), the post-failure
    diagnostic judges included (their calls were paid for too). None when nothing was
    priced. Simulator spend needs coder_eval's rate card: without run.json it is left out."""
    judges = [_num(_dict(r.get("token_usage")).get("total_cost_usd"))
              for key in ("success_criteria_results", "post_failure_criteria_results")
              for r in _list(task.get(key)) if isinstance(r, dict) and _is_judge(r)]
    parts = [p for p in (agent_cost, *judges) if p is not None]
    return sum(parts) if parts else None


def cost_complete(task: dict[str, Any], *, simulator: bool = True) -> bool:
    """Whether a task.json's recorded spend is the whole of the bill `_bill` adds from it,
    by coder_eval's row rule (REPORT_SCHEMA.md: "unpriced model, or a hard kill that lost an
    in-flight turn"): a TIMEOUT lost its in-flight turn; a turn that used tokens but has no
    cost was not priced; a dialog's simulator used tokens that only run.json's row prices
    (`simulator=False`: the agent's own spend, which the simulator is no part of)."""
    status = task.get("final_status")
    if isinstance(status, str) and status.upper() == "TIMEOUT":
        return False
    sim = _dict(task.get("simulation"))
    if simulator and (_int(sim.get("simulator_input_tokens")) or _int(sim.get("simulator_output_tokens"))):
        return False
    for it in _iterations(task):
        usage = tokens(it.get("token_usage"))
        if usage is not None and usage["total"] and _num(_dict(it.get("token_usage")).get("total_cost_usd")) is None:
            return False
    return True


# -- finding task.json files -------------------------------------------------------------------

def _subdirs(folder: str) -> list[os.DirEntry]:
    try:
        return sorted((e for e in os.scandir(folder)
                       if e.is_dir(follow_symlinks=False) and e.name not in SKIP_DIRS and not e.name.startswith(".")),
                      key=lambda e: e.name)
    except OSError:
        return []


def _has(folder: str, name: str) -> bool:
    return os.path.isfile(os.path.join(folder, name))


def is_coder_eval_folder(folder: str) -> bool:
    """A results folder, or any part of one: it holds task.json or a coder_eval summary,
    or its subfolders (task folders) or their numbered subfolders (replicates) do."""
    if _has(folder, TASK_FILE):
        return True
    if any(_has(folder, n) for n in SUMMARY_FILES):
        return any(True for _ in _task_files(folder, limit=1)) or _run_json_rows(folder)
    for child in _subdirs(folder):
        if _has(child.path, TASK_FILE):
            return True
        for grand in _subdirs(child.path):
            if grand.name.isdigit() and _has(grand.path, TASK_FILE):
                return True
    return False


def _run_json_rows(folder: str) -> bool:
    """A run.json with task_results rows (every task of a run may have failed before it
    wrote a task.json: coder_eval still counts them)."""
    if not _has(folder, "run.json"):
        return False
    doc, _ = read_json_document(os.path.join(folder, "run.json"), 64 * 1024 * 1024)
    return isinstance(doc, dict) and isinstance(doc.get("task_results"), list) and bool(doc["task_results"])


def _task_files(root: str, limit: Optional[int] = None) -> Iterator[str]:
    """Every task.json under `root` (itself included), not looking into artifacts."""
    found = 0
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        if _has(folder, TASK_FILE):
            yield os.path.join(folder, TASK_FILE)
            found += 1
            if limit and found >= limit:
                return
        if depth < MAX_DEPTH:
            stack.extend((e.path, depth + 1) for e in reversed(_subdirs(folder)))


def _results_root(folder: str, bound: Optional[str]) -> Optional[str]:
    """The nearest folder at or above `folder` holding run.json or experiment.json; never
    above `bound` (an upload's own folder) and never more than MAX_ANCESTORS up."""
    current = os.path.abspath(folder)
    stop = os.path.abspath(bound) if bound else None
    for _ in range(MAX_ANCESTORS + 1):
        if _has(current, "run.json") or _has(current, "experiment.json"):
            return current
        if stop is not None and current == stop:
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None


class _Context:
    """What a results folder says about its runs: ids, description, run.json rows."""

    def __init__(self) -> None:
        self._cache: dict[Optional[str], dict[str, Any]] = {}

    def stamp(self, root: Optional[str]) -> bytes:
        """The digest of what results folder `root` says of its runs (its run.json and
        experiment.json): a task.json read before they were written (a run watched live) is
        read again once they are, or when they change. It is the digest of the very bytes
        the context was read from, so a file written between the two reads cannot have its
        change taken as already read."""
        return self.of(root)["stamp"]

    def of(self, root: Optional[str], *, named: Optional[str] = None) -> dict[str, Any]:
        """The context of results folder `root` (None: no summary found; then `named`, the
        name of the folder that holds the variant folders, stands for the results id)."""
        if root is None and named is not None:
            key: Optional[str] = "named:" + named
            if key not in self._cache:
                self._cache[key] = {"rows": {}, "results_run_id": named, "stamp": b""}
            return self._cache[key]
        if root in self._cache:
            return self._cache[root]
        ctx: dict[str, Any] = {"rows": {}, "stamp": b"", "unread": {}}
        if root is not None:
            h = hashlib.sha256()
            docs: dict[str, Any] = {}
            for name in ("run.json", "experiment.json"):
                data, err = read_document_bytes(os.path.join(root, name), 64 * 1024 * 1024) \
                    if _has(root, name) else (None, None)
                h.update(name.encode() + b"\0" + (data if data is not None else (err or "").encode()) + b"\0")
                doc, bad = parse_json_document(data) if data is not None else (None, err)
                if bad is None and data is not None and not isinstance(doc, dict):
                    bad = f"not a JSON object ({_kind(doc)})"
                if bad is not None:
                    ctx["unread"][name] = bad
                docs[name] = _dict(doc)
            ctx["stamp"] = h.digest()
            run, exp = docs["run.json"], docs["experiment.json"]
            ctx["results_run_id"] = _str(run.get("run_id")) or os.path.basename(root)
            ctx["root"] = root
            ctx["experiment_id"] = _str(exp.get("experiment_id"))
            ctx["description"] = _str(exp.get("description"))
            ctx["framework_version"] = _str(run.get("framework_version"))
            ctx["row_notes"] = {}
            for r in _list(run.get("task_results")):
                if isinstance(r, dict):
                    r, notes = conform_row(r)
                    key = (_str(r.get("variant_id")), _str(r.get("task_id")), _int(r.get("replicate_index")) or 0)
                    ctx["rows"][key] = r
                    if notes:
                        ctx["row_notes"][key] = notes
        self._cache[root] = ctx
        return ctx


#: What is lost when a results folder's summary cannot be read, said with the error.
_UNREAD_COST = {
    "run.json": "its tasks are read from their task.json files without it: runs it lists with no task.json, "
                "each row's bill and cost_complete, and the results id it names are missing until it can be read",
    "experiment.json": "its runs are filed under the results id instead of the experiment it names "
                       "until it can be read",
}


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(type(value), "null")


def _unread_sources(root: str, ctx: dict[str, Any], folder: str, label: str, key_prefix: Optional[str]
                    ) -> list[Source]:
    """An error per summary of results folder `root` that is there but cannot be read (cut
    short, not JSON): said once, by its own name, while its task.json files are still read."""
    out = []
    for name, err in sorted(ctx.get("unread", {}).items()):
        path = os.path.join(root, name)
        doc_label = join_label(label, os.path.relpath(path, folder).replace(os.sep, "/"))
        errors: list[tuple[Optional[int], str]] = [(None, f"could not read this {name} ({err}); {_UNREAD_COST[name]}")]
        out.append(Source(key=key_for(path, doc_label, key_prefix), label=doc_label, path=path, kind="document",
                          source_format="coder_eval", reading=READING,
                          produce=functools.partial(_nothing_but, errors)))
    return out


def _nothing_but(errors: list[tuple[Optional[int], str]]) -> tuple[list[dict[str, Any]], list[tuple[Optional[int], str]]]:
    return [], errors


def row_key(rows: dict[tuple[Any, Any, int], Any], variant: str, task_id: str, replicate: int
            ) -> Optional[tuple[Any, Any, int]]:
    """The key of the run.json row of (variant, task id, replicate). coder_eval writes a
    row's `variant_id` as null when its caller named no variant (its task.json then says
    "default", EvaluationResult's default): such a row stands for the task's run in
    whatever variant holds it, when only one does."""
    if (variant, task_id, replicate) in rows:
        return (variant, task_id, replicate)
    if (None, task_id, replicate) in rows:
        return (None, task_id, replicate)
    return None


def _identity(path: str, task: dict[str, Any], ctx: dict[str, Any]) -> tuple[str, str, str, str, int]:
    """(run_id, experiment, variant, task folder name, replicate) of one task.json."""
    folder = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(folder)
    if name.isdigit():
        replicate = int(name)
        task_dir = os.path.dirname(folder)
    else:
        replicate = 0  # the older layout: no replicate folders
        task_dir = folder
    task_name = os.path.basename(task_dir)
    variant_dir = task_dir
    for _ in range(_task_depth(task_dir.split(os.sep), _str(task.get("task_id")))):
        variant_dir = os.path.dirname(variant_dir)
    variant = _str(task.get("variant_id")) or os.path.basename(variant_dir) or "default"
    task_id = _str(task.get("task_id")) or task_name
    results = ctx.get("results_run_id") or _str(task.get("started_at")) or "coder_eval"
    experiment = ctx.get("experiment_id") or ctx.get("results_run_id") or "coder_eval"
    return make_run_id(results, variant, task_id, replicate), experiment[:400], variant, task_name, replicate


def make_run_id(results: str, variant: str, task_id: str, replicate: int) -> str:
    """`RESULTS/VARIANT/TASK/NN`, the one spelling of a coder_eval run's id (a task.json's and
    a run.json row's alike). A run id is at most 200 characters (a longer one ends in a hash
    of the whole) and holds no NUL (a key PostgreSQL refuses: U+FFFD stands in), so no
    task id, however odd, costs its run."""
    run_id = f"{results}/{variant}/{task_id}/{replicate:02d}".replace("\x00", "\ufffd")
    if len(run_id) > 200:
        run_id = run_id[:183] + "~" + hashlib.sha1(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return run_id


def _source(path: str, label: str, key_prefix: Optional[str], contexts: _Context, bound: Optional[str]) -> Source:
    """One task.json as a whole-document source (the folder holding its variant folder, read
    from `label`, names its results if no run.json or experiment.json does)."""
    def produce() -> tuple[list[dict[str, Any]], list[tuple[Optional[int], str]]]:
        doc, err = read_json_document(path, MAX_TASK_JSON)
        if err:
            return _row_instead(err)
        if not isinstance(doc, dict) or not (doc.get("final_status") is not None or "success_criteria_results" in doc
                                             or "iterations" in doc or "turns" in doc):
            return _row_instead("not a coder_eval task.json: no final_status, success_criteria_results or iterations")
        # Fields of the wrong type are read as not given, each named in a warning on the run.
        doc, notes = conform_task(doc)
        try:
            holder = _holder_name(label, _str(doc.get("task_id")))
            ctx = contexts.of(_results_root(os.path.dirname(path), bound), named=holder)
            run_id, experiment, variant, task_name, replicate = _identity(path, doc, ctx)
            key = row_key(ctx["rows"], variant, _str(doc.get("task_id")) or task_name, replicate)
            notes += ctx.get("row_notes", {}).get(key, []) if key else []
            records = task_records(doc, run_id=run_id, experiment=experiment, variant=variant, task_name=task_name,
                                   replicate=replicate, context={**ctx, "row": ctx["rows"].get(key) if key else None},
                                   notes=notes)
        except Exception as exc:  # noqa: BLE001 -- a shape no check foresaw: this file is refused, never the ingest
            return _row_instead(f"could not read this task.json ({type(exc).__name__}: {str(exc)[:200]}); "
                                "the other files are read")
        src.notes.extend((run_id, n) for n in notes)
        return records, []

    def _row_instead(err: str) -> tuple[list[dict[str, Any]], list[tuple[Optional[int], str]]]:
        """The file's error, and the run from its run.json row when its results folder has one:
        coder_eval counts that task in the experiment all the same, so a task.json cut short
        or mangled must not take its run out of the comparison."""
        root = _results_root(os.path.dirname(path), bound)
        if root is None:
            return [], [(None, err)]
        ctx = contexts.of(root)
        for variant, task_id, replicate in sorted(_task_keys(path, root)):
            key = row_key(ctx["rows"], variant, task_id, replicate)
            if key is None:
                continue
            run_id, experiment = _row_identity(ctx, variant, task_id, replicate)
            said = "its task.json could not be read: the run is its run.json row (status, score, tokens and cost; no steps)"
            src.notes.extend((run_id, n) for n in [said, *ctx.get("row_notes", {}).get(key, [])])
            return (row_records(ctx["rows"][key], run_id=run_id, experiment=experiment, context=ctx,
                                read_from="run.json (its task.json could not be read)"),
                    [(None, f"{err}; its run.json row is read instead")])
        return [], [(None, err)]

    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    src = Source(key=key_for(path, label, key_prefix), label=label, path=path, kind="document",
                 source_format="coder_eval", produce=produce, size=size, reading=READING,
                 context=lambda: contexts.stamp(_results_root(os.path.dirname(path), bound)))
    return src


def _task_depth(folders: list[str], task_id: Optional[str]) -> int:
    """How many of `folders` (ending with the task's own) its id takes: coder_eval lays a run
    out as `<variant>/<task id>/<NN>/`, and a dataset suite's row id holds a `/`
    (`s01-report-writer/pos-summary`); one folder when the path does not spell the id."""
    ids = task_id.split("/") if task_id and "/" in task_id else []
    return len(ids) if ids and folders[-len(ids):] == ids else 1


def _holder_name(label: str, task_id: Optional[str] = None) -> Optional[str]:
    """The name of the folder holding the variant folders, read from the label (the path as
    the user gave it, or the upload's names): `old/smoke/t01/00/task.json` -> `old`,
    `old/smoke/suite/row/00/task.json` -> `old` for task id `suite/row`. Without run.json or
    experiment.json it stands for the results id."""
    parts = [p for p in label.replace("\\", "/").split("/") if p not in ("", ".")][:-1]  # the folders
    if parts and parts[-1].isdigit():
        parts = parts[:-1]  # the replicate's folder
    above = _task_depth(parts, task_id) + 1  # the task's folders and the variant's
    if len(parts) <= above:
        return None
    name = parts[-above - 1]
    if name.lower().endswith(".zip"):
        name = name[:-4]
    return name or None


def _row_identity(ctx: dict[str, Any], variant: str, task_id: str, replicate: int) -> tuple[str, str]:
    """(run id, experiment) of the run a run.json row stands for in results folder `ctx`."""
    results = ctx.get("results_run_id") or "coder_eval"
    return make_run_id(results, variant, task_id, replicate), (ctx.get("experiment_id") or results)[:400]


def _row_sources(root: str, ctx: dict[str, Any], seen: set[tuple[Any, Any, int]], folder: str, label: str,
                 key_prefix: Optional[str], stamp: Callable[[], bytes]) -> list[Source]:
    """A source per run.json row of results folder `root` whose task.json was not found.

    Its origin is the task.json the row would have had, so a task.json written later (a
    resumed run) updates the same run instead of being refused as another source's."""
    out = []
    run_json = os.path.join(root, "run.json")
    for (variant, task_id, replicate), row in sorted(ctx["rows"].items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if (_nfc(variant), _nfc(task_id), replicate) in seen or not task_id:
            continue
        if variant is None and any((t, r) == (_nfc(task_id), replicate) for _v, t, r in seen):
            continue  # a row without variant_id whose task.json is here (row_key)
        expected = os.path.join(root, variant or "default", *str(task_id).split("/"), f"{replicate:02d}", TASK_FILE)
        rel = os.path.relpath(expected, folder).replace(os.sep, "/")
        src_label = join_label(label, rel)
        run_id, experiment = _row_identity(ctx, variant or "default", task_id, replicate)

        src = Source(key=key_for(run_json, join_label(label, os.path.relpath(run_json, folder)), key_prefix)
                     + f"#{variant}/{task_id}/{replicate:02d}",
                     label=join_label(label, os.path.relpath(run_json, folder).replace(os.sep, "/"))
                     + f" (row {task_id} #{replicate}, no task.json)",
                     path=run_json, kind="document", source_format="coder_eval",
                     origin=key_for(expected, src_label, key_prefix), origin_label=src_label,
                     context=stamp, reading=READING)  # experiment.json too: the run's experiment is named there

        def produce(row=row, run_id=run_id, experiment=experiment, src=src,
                    notes=ctx.get("row_notes", {}).get((variant, task_id, replicate), [])
                    ) -> tuple[list[dict[str, Any]], list[tuple[Optional[int], str]]]:
            src.notes.extend((run_id, n) for n in notes)
            return row_records(row, run_id=run_id, experiment=experiment, context=ctx), []

        src.produce = produce
        out.append(src)
    return out


def coder_eval_sources(folder: str, label: str, key_prefix: Optional[str]) -> list[Source]:
    """One whole-document source per task.json under `folder`, and one per run.json row that
    has no task.json (a task coder_eval counted that never got as far as writing one)."""
    contexts = _Context()
    # An upload's folder is all there is: never look above it.
    bound = folder if key_prefix else None
    out = []
    seen: dict[Optional[str], set[tuple[Any, Any, int]]] = {}
    for path in _task_files(folder):
        rel = os.path.relpath(path, folder).replace(os.sep, "/")
        src_label = join_label(label, rel)
        out.append(_source(path, src_label, key_prefix, contexts, bound))
        root = _results_root(os.path.dirname(path), bound)
        if root is not None:
            seen.setdefault(root, set()).update(_task_keys(path, root))
    roots = set(seen)
    if _has(folder, "run.json"):
        roots.add(os.path.abspath(folder))
    for root in sorted(r for r in roots if r is not None):
        ctx = contexts.of(root)
        out.extend(_unread_sources(root, ctx, folder, label, key_prefix))
        out.extend(_row_sources(root, ctx, seen.get(root, set()), folder, label, key_prefix,
                                functools.partial(contexts.stamp, root)))
    return out


def _task_keys(path: str, root: str) -> set[tuple[Any, Any, int]]:
    """The run.json row keys (variant, task_id, replicate) a task.json may stand for, read
    from its place in the results folder (so the file need not be parsed here): coder_eval
    lays a run out as `<variant>/<task id>/<NN>/`, and a task id may hold a `/` (a dataset
    suite's rows: `s01-report-writer/pos-summary`)."""
    parts = os.path.relpath(os.path.dirname(path), root).split(os.sep)
    if parts and parts[-1].isdigit():
        replicate, parts = int(parts[-1]), parts[:-1]
    else:
        replicate = 0
    if len(parts) < 2:
        return set()
    return {(_nfc(parts[0]), _nfc("/".join(parts[1:])), replicate)}


def _nfc(name: Any) -> Any:
    """A folder or id name in one Unicode form: macOS writes file names decomposed (NFD),
    JSON keeps the id as coder_eval wrote it, so `ü` in a folder and in run.json may differ
    by their bytes alone (the row would look like a task with no task.json)."""
    return unicodedata.normalize("NFC", name) if isinstance(name, str) else name


def task_json_source(path: str, label: str, key_prefix: Optional[str]) -> Source:
    """A task.json given on its own (its results folder, when it is inside one, still names it)."""
    return _source(path, label, key_prefix, _Context(), os.path.dirname(path) if key_prefix else None)


