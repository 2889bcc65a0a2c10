"""Why an early stop deserves a look: the deciding call and the flags on a pair.

Pure functions over what the trace recorded (a step record, critic outputs, criteria
rows), so each flag can be checked by hand on a few dicts:

- `critic_objected`: a critic said retry or stop on the step where the run was cut.
- `deciding_call_failed`: the call that decided the stop failed (a non-zero exit code,
  or an error status or result).
- `premature_pass`: the early-stopped run passed, and a criterion that did not fail in
  it failed in the full run: one that was advisory (not armed, so it did not gate), or
  an armed one other than the deciding criterion, still undecided at the stop (a
  must-not-run check passes at a stop only because the run ended before it could fail).
"""

from __future__ import annotations

from typing import Any, Optional

from .criteria import failed, weigh
from .step_failures import exit_code, invocation_failed, result_failed


def _short(value: Any, limit: int = 80) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, dict):
        for key in ("command", "cmd", "path", "name", "query", "url"):
            if isinstance(value.get(key), str):
                value = value[key]
                break
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    if not text or text in ("{}", "[]"):
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def step_calls(record: Any) -> list[dict[str, Any]]:
    """The tool calls of a step record, each with its result: name, a one-line summary of
    its arguments, call index, status, exit code, and whether it failed."""
    rec = record if isinstance(record, dict) else {}
    decision = rec.get("decision") if isinstance(rec.get("decision"), dict) else {}
    actions = rec.get("actions") or decision.get("actions") or []
    results = rec.get("action_results") if isinstance(rec.get("action_results"), list) else []
    invocations = rec.get("tool_invocations") if isinstance(rec.get("tool_invocations"), list) else []
    calls = []
    for i, action in enumerate(actions if isinstance(actions, list) else []):
        if not isinstance(action, dict):
            continue
        result = results[i] if i < len(results) else None
        inv = invocations[i] if i < len(invocations) and isinstance(invocations[i], dict) else {}
        res = result if isinstance(result, dict) else {}
        status = inv.get("status") if inv.get("status") is not None else res.get("status")
        code = exit_code(res, inv)
        error = res.get("error") if res.get("error") not in (None, "") else inv.get("error")
        # One rule with the run page's error filter (app.step_failures); the invocation's exit
        # code counts when the result carries none.
        failed = result_failed(res) or invocation_failed(inv) or (code is not None and code != 0)
        index = inv.get("call_index")
        calls.append({"name": str(action.get("name")) if action.get("name") is not None else "tool",
                      "summary": _short(action.get("args")), "call_index": index if isinstance(index, int) else None,
                      "status": status if isinstance(status, str) else None, "exit_code": code,
                      "error": _short(error, 200), "failed": bool(failed), "position": i,
                      # why the call has no result, when the reader knows (a call cut by the stop)
                      "note": _short(res.get("note"), 200)})
    return calls


def deciding_call(record: Any, tool_call_index: Optional[int]) -> Optional[dict[str, Any]]:
    """The call that decided an early stop: the step's call with `tool_call_index`; without
    an index (or when no call carries it), the step's last call."""
    calls = step_calls(record)
    if not calls:
        return None
    if tool_call_index is not None:
        for c in calls:
            if c["call_index"] == tool_call_index:
                return c
    return calls[-1]


def early_stop_flags(*, evidence: Optional[dict[str, Any]], criteria_a: list[dict[str, Any]],
                     criteria_b: list[dict[str, Any]], early_stop_enabled: bool, armed_ids: list[str],
                     verdict_a: Optional[str], label_b: str, label_a: str,
                     deciding: Optional[str] = None) -> list[dict[str, Any]]:
    """The flags on a pair whose a-run stopped early (see the module docstring).

    `evidence`: {critics: [{critic, action, reason}], call: deciding_call(...) or None}.
    A premature pass needs a pass to be premature: it is flagged only when a passed.
    """
    flags: list[dict[str, Any]] = []
    evidence = evidence or {}
    objections = [c for c in evidence.get("critics") or [] if c.get("action") in ("retry", "stop")]
    if objections:
        first = objections[0]
        who = first.get("critic") or "a critic"
        text = f"{who} said {first['action']} on the deciding step"
        if first.get("reason"):
            text += f": {_short(first['reason'], 120)}"
        flags.append({"kind": "critic_objected", "text": text,
                      "critics": [{"critic": c.get("critic"), "action": c.get("action"), "reason": c.get("reason")}
                                  for c in objections]})
    call = evidence.get("call")
    if call and call.get("failed"):
        what = f"{call['name']}" + (f" `{call['summary']}`" if call.get("summary") else "")
        how = f"exit code {call['exit_code']}" if call.get("exit_code") not in (None, 0) else (call.get("status") or "error")
        flags.append({"kind": "deciding_call_failed", "text": f"the deciding call failed: {what} ({how})",
                      "call": call})
    if verdict_a != "pass":
        return flags
    # Advisory: did not gate a's early-stopped verdict (app.criteria).
    weights = weigh(criteria_a, early_stop_enabled=early_stop_enabled, early_stopped=True, armed_ids=armed_ids)
    advisory = {c["criterion_id"] for c, w in zip(criteria_a, weights) if w.advisory}
    failed_a = {c["criterion_id"] for c in criteria_a if failed(c)}
    failed_b = {c["criterion_id"] for c in criteria_b if failed(c)}
    declared = {c["criterion_id"] for c in criteria_a}
    for cid in sorted(failed_b):
        if cid in advisory:
            # Whether or not it failed in a too: it did not gate a's pass.
            text = f"premature pass: {cid} failed in {label_b}, advisory in {label_a}"
        elif cid not in failed_a and cid in declared and cid != deciding and _gates(cid, criteria_a):
            # Armed but not the criterion that decided: a must-not-run check passes at the
            # stop only because the run ended before it could fail.
            text = f"premature pass: {cid} failed in {label_b}, armed in {label_a} but undecided when it stopped"
        else:
            continue
        flags.append({"kind": "premature_pass", "criterion": cid, "text": text})
    return flags


def _gates(cid: str, criteria: list[dict[str, Any]]) -> bool:
    return any(c["criterion_id"] == cid and c.get("gating") for c in criteria)


FLAG_LABELS = {"critic_objected": "critic objected", "deciding_call_failed": "deciding call failed",
               "premature_pass": "premature pass"}


def rows_from_view(criteria: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The criteria as the run view shapes them (app.queries.run_detail.get_criteria), in the shape
    the flags read (criteria rows)."""
    return [{"criterion_id": c["id"], "type": c.get("type"), "gating": c.get("gating"), "stop_when": c.get("stop_when"),
             "has_spec": c.get("declared"), "has_result": c.get("graded"), "passed": c.get("passed"),
             "score": c.get("score"), "pass_threshold": c.get("pass_threshold")} for c in criteria]
