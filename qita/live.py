"""Live verdicts step by step, from a running engine or from the actions of a recorded trace.

One implementation serves both. The engine feeds a `LiveTracker` each tool call as it
completes and writes the verdicts at the end of every step (`step.live_verdicts`);
`replay_live_verdicts` rebuilds the same tool calls from plain data — the recorded
actions of any trace, qita, QitOS or coder_eval — and feeds the same tracker, so a
verdict computed after the fact is the one the engine would have recorded.

Only criteria decided by events that cannot un-happen have a live verdict (a tool was
called, a command ran, the first skill engaged). The others are end-state checks: not
observable step by step, so they can be neither evaluated live nor armed for early
stop; `live_capabilities` says which and why, and `LiveCapability.arming_refusal` is
the guardrail the engine itself applies before a run.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

from .core.trajectory import ToolCall, Trajectory
from .criteria import FAIL, PASS, SPEC_TYPES, STOP_WHEN_VALUES, UNDECIDED, Criterion, criterion_from_spec
from .format import LIVE_VERDICTS

#: `status` values of a recorded tool call that mean it failed (anything else is not an error by itself).
ERROR_STATUSES = frozenset({"error", "failed", "failure", "timeout", "cancelled"})
#: Statuses of a recorded call whose result nobody saw (coder_eval's "unknown": issued, never
#: run): neither failed nor succeeded, so a `require_success` criterion does not count it.
NO_RESULT_STATUSES = frozenset({"unknown", "not_run", "pending"})


@dataclass(frozen=True)
class LiveCapability:
    """What one criterion can decide while the run is going, or why it cannot be evaluated live."""

    id: str
    type: Optional[str]
    #: the verdicts it can reach mid-run, sorted: ("fail",), ("pass",), ("fail", "pass"), or ()
    polarities: tuple[str, ...]
    #: why it has no live verdict (None when it has one)
    reason: Optional[str] = None

    @property
    def live(self) -> bool:
        return bool(self.polarities)

    def arming_refusal(self, stop_when: Optional[str]) -> Optional[str]:
        """Why arming this criterion with `stop_when` must be refused; None when the arming can fire.

        Every way an arming could silently never fire is a refusal: a criterion with no
        live verdict, or a polarity it cannot decide mid-run. `decided` needs both, since
        a criterion that decides only one would silently ignore the other half.
        """
        if stop_when not in STOP_WHEN_VALUES:
            return f"criterion {self.id!r}: stop_when must be one of {STOP_WHEN_VALUES}, not {stop_when!r}"
        if not self.live:
            return (f"criterion {self.id!r} ({self.type}) cannot be decided mid-run, so it cannot be armed "
                    f"(stop_when={stop_when!r}): {self.reason}")
        needed = {PASS, FAIL} if stop_when == "decided" else {stop_when}
        missing = needed - set(self.polarities)
        if missing:
            return (f"criterion {self.id!r} ({self.type}) can decide only {list(self.polarities)} mid-run, not "
                    f"{sorted(missing)}; stop_when={stop_when!r} would never fire for that polarity")
        return None


def capability(criterion: Criterion) -> LiveCapability:
    """The live capability of a built criterion."""
    polarities = tuple(sorted(criterion.live_stop_polarities))
    return LiveCapability(criterion.id, criterion.type, polarities, None if polarities else criterion.not_live_reason)


def spec_id(spec: Mapping[str, Any], position: int) -> str:
    """A spec's id, or `criterion-<position>` for a spec without one."""
    value = spec.get("id")
    return str(value) if value is not None else f"criterion-{position}"


def build_live_criteria(criteria: Sequence[Union[Mapping[str, Any], Criterion]]
                        ) -> tuple[list[Criterion], dict[str, LiveCapability]]:
    """The criteria that have a live verdict, built from specs (or given built), and every
    criterion's capability by id, with the reason when it has none; in the order given."""
    built: list[Criterion] = []
    capabilities: dict[str, LiveCapability] = {}
    for position, item in enumerate(criteria):
        cap, criterion = _capability_of(item, position)
        if cap.id in capabilities:
            raise ValueError(f"criterion ids must be unique; repeated: {cap.id!r}")
        capabilities[cap.id] = cap
        if criterion is not None and cap.live:
            built.append(criterion)
    return built, capabilities


def _capability_of(item: Union[Mapping[str, Any], Criterion], position: int
                   ) -> tuple[LiveCapability, Optional[Criterion]]:
    if isinstance(item, Criterion):
        return capability(item), item
    cid = spec_id(item, position)
    kind = item.get("type")
    if kind not in SPEC_TYPES:
        reason = (f"type {kind!r} has no live verdict in qita (it knows {sorted(SPEC_TYPES)}): "
                  f"{Criterion.not_live_reason}")
        return LiveCapability(cid, kind, (), reason), None
    try:
        criterion = criterion_from_spec({**item, "id": cid}, strict=False)
    except Exception as exc:  # a bad pattern or bounds: say so instead of failing the whole replay
        return LiveCapability(cid, kind, (), _invalid(exc)), None
    return capability(criterion), criterion


def _invalid(exc: Exception) -> str:
    """Why a spec cannot be built, in words a reader of the lab can act on (an exception's
    class name, "error: missing )", told them nothing)."""
    if isinstance(exc, re.error):
        return f"invalid spec: its pattern is not a regular expression ({exc})"
    if isinstance(exc, ValueError):
        return f"invalid spec: {exc}"
    return f"invalid spec: a field of the wrong type ({exc})"


def live_capabilities(specs: Sequence[Mapping[str, Any]]) -> dict[str, LiveCapability]:
    """For each criterion spec (by id): what it can decide live, or why it cannot be evaluated live."""
    return build_live_criteria(specs)[1]


@dataclass(frozen=True)
class Decided:
    """When a criterion's live verdict was first decided (verdicts latch: the first one is kept)."""

    verdict: str
    step: int
    #: 1-based across the run; None when decided after the step's reduce rather than at a tool call
    tool_call_index: Optional[int]


class LiveTracker:
    """Latched live verdicts of every criterion that has one, over a growing trajectory.

    `observe` is called after each tool call (and once more at the end of each step);
    `verdicts()` is then the per-step state the trace records. A live verdict that
    raises (or answers something other than pass/fail/undecided) drops that criterion
    from the state from then on and is kept in `errors`; it never breaks the run.
    """

    def __init__(self, criteria: Sequence[Criterion]):
        self.criteria = [c for c in criteria if c.live_stop_polarities]
        self.decided: dict[str, Decided] = {}
        self.errors: dict[str, dict[str, Any]] = {}

    def observe(self, trajectory: Trajectory, step: int, tool_call_index: Optional[int]) -> list[str]:
        """Evaluate every undecided criterion; return the ids decided now, in criteria order."""
        now = []
        for c in self.criteria:
            if c.id in self.decided or c.id in self.errors:
                continue
            try:
                verdict = c.live_verdict(trajectory)
                if verdict not in LIVE_VERDICTS:
                    raise ValueError(f"live verdict must be pass, fail or undecided, not {verdict!r}")
            except Exception as exc:  # a criterion bug must never be what ends or breaks a run
                self.errors[c.id] = {"criterion": c.id, "error": f"{type(exc).__name__}: {exc}",
                                     "traceback": traceback.format_exc(limit=5), "step": step,
                                     "tool_call_index": tool_call_index}
                continue
            if verdict != UNDECIDED:
                self.decided[c.id] = Decided(verdict, step, tool_call_index)
                now.append(c.id)
        return now

    def verdicts(self) -> dict[str, str]:
        """`{criterion id: pass | fail | undecided}` for every criterion still evaluated live."""
        return {c.id: self.decided[c.id].verdict if c.id in self.decided else UNDECIDED
                for c in self.criteria if c.id not in self.errors}


def in_polarity(verdict: Optional[str], stop_when: str) -> bool:
    """Whether `verdict` is a decision that an arming with `stop_when` stops on."""
    if verdict in (None, UNDECIDED):
        return False
    return stop_when == "decided" or verdict == stop_when


def armed_decided(verdicts: Mapping[str, str], stop_when: Mapping[str, str]) -> bool:
    """The early-stop rule: every armed criterion (id -> stop_when) is decided in its armed polarity."""
    return bool(stop_when) and all(in_polarity(verdicts.get(cid), when) for cid, when in stop_when.items())


def early_stop_step(steps: Sequence[Mapping[str, str]], stop_when: Mapping[str, str]) -> Optional[int]:
    """The first step at whose end the armed criteria are all decided (where early stop cuts), or None."""
    for index, verdicts in enumerate(steps):
        if armed_decided(verdicts, stop_when):
            return index
    return None


# -- recorded traces ---------------------------------------------------------------------------
ToolCallData = Mapping[str, Any]


def tool_call_from_data(call: ToolCallData, index: int, step: int) -> ToolCall:
    """A `ToolCall` from one recorded call: `{name, args, ok?, status?, error?, exit_code?}`.

    `name` may also be spelled `tool_name`, `args` `parameters`, `status` `result_status`,
    `error` `error_message`, `exit_code` `returncode` (the spellings of QitOS's
    `tool_invocations` and coder_eval's `commands`). The call failed when `ok` is false,
    `error` is set, or `status` is one of `ERROR_STATUSES`; it has no result (neither failed
    nor succeeded) when `status` is one of `NO_RESULT_STATUSES`; whether it succeeded
    matters only to criteria with `require_success`.
    """
    name = call.get("name", call.get("tool_name"))
    args = call.get("args", call.get("parameters"))
    error = call.get("error", call.get("error_message"))
    status = call.get("status", call.get("result_status"))
    code = call.get("exit_code", call.get("returncode"))
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    # A call recorded without a result (issued, never seen to run) did not fail, nor
    # succeed; the text beside it (coder_eval's "no result observed") says only that.
    unseen = isinstance(status, str) and status.lower() in NO_RESULT_STATUSES and code is None \
        and call.get("ok") is not False
    failed = not unseen and (call.get("ok") is False or bool(error)
                             or (isinstance(status, str) and status.lower() in ERROR_STATUSES))
    return ToolCall(index=index, step=step, name="" if name is None else str(name), args=args,
                    status="error" if failed else ("unknown" if unseen else "ok"), error=None if error is None else str(error),
                    exit_code=code)


@dataclass
class LiveReplay:
    """Per-step live verdicts computed from a trace's recorded actions."""

    #: one `{criterion id: verdict}` per step, the same shape as `step.live_verdicts` in a trace
    steps: list[dict[str, str]] = field(default_factory=list)
    decided: dict[str, Decided] = field(default_factory=dict)
    #: every criterion spec by id: what it can decide live, or why it cannot be evaluated live
    capabilities: dict[str, LiveCapability] = field(default_factory=dict)
    #: criteria whose live verdict raised (dropped from the steps from then on): id -> error
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def not_live(self) -> dict[str, str]:
        """id -> why the criterion cannot be evaluated live, for the criteria left out of `steps`."""
        return {cid: cap.reason or "" for cid, cap in self.capabilities.items() if not cap.live}


def replay_live_verdicts(steps: Sequence[Sequence[ToolCallData]],
                         criteria: Sequence[Union[Mapping[str, Any], Criterion]]) -> LiveReplay:
    """The live verdict of every live-evaluable criterion at the end of every step, from plain data.

    `steps[i]` is the list of tool calls of step `i` in the order they ran (see
    `tool_call_from_data`); `criteria` are specs such as `{"id", "type": "command_executed",
    "pattern", "min_count", "max_count", "tool"}`, `{"type": "tool_invoked", "tool"}` or
    `{"type": "skill_triggered", "skill"}` (built `Criterion` objects work too). The engine
    records exactly these values in `step.live_verdicts` while it runs.
    """
    built, capabilities = build_live_criteria(criteria)
    tracker = LiveTracker(built)
    trajectory = Trajectory()
    out = LiveReplay(capabilities=capabilities)
    for step, calls in enumerate(steps):
        for call in calls:
            index = len(trajectory.tool_calls) + 1
            trajectory.tool_calls.append(tool_call_from_data(call, index, step))
            tracker.observe(trajectory, step, index)
        trajectory.steps = step + 1
        tracker.observe(trajectory, step, None)  # as the engine does after reduce
        out.steps.append(tracker.verdicts())
    out.decided = dict(tracker.decided)
    out.errors = {cid: e["error"] for cid, e in tracker.errors.items()}
    return out
