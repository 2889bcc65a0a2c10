"""A finished run as the policy lab needs it, computed once from its criteria and steps.

Verdicts latch, so a criterion's whole step-by-step state is its first live decision
(verdict, step, tool call). That decision comes from the run's own `step.live_verdicts`
when the trace recorded them (the engine's word, which also covers criteria that only
code can evaluate), else from `qita.live.replay_live_verdicts` over the recorded tool
calls: the one live-verdict implementation, imported, never re-written here.

Beside the decisions: what each criterion can decide live, or why it cannot be evaluated
live (`qita.live` capabilities); how its check would come out on a run cut before it
decided (`pass_from_step`); the arming its spec declares; and, per step, the cumulative
tokens, time, cost and tool calls, and a digest of the step's calls. Everything is plain
data, so it can be checked by hand.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

import orjson

from qita.criteria import FAIL, PASS, CountCriterion, criterion_from_spec
from qita.live import replay_live_verdicts

from ..criteria import weight_of
from ..present import budget_tokens_used

#: the cumulative figures kept per step, in lab_runs.series (in this order)
SERIES = ("tokens", "counted", "seconds", "cost", "calls")
_NAN = float("nan")
_MIN_SUFFIX = "\u0000reached-min"


@dataclass
class CriterionState:
    """One criterion of one run: what it can decide live and when it first did."""

    id: str
    type: Optional[str]
    #: the verdicts it can reach mid-run, sorted ("fail", "pass"); () when it cannot be evaluated live
    polarities: tuple[str, ...] = ()
    #: why it cannot be evaluated live
    reason: Optional[str] = None
    verdict: Optional[str] = None
    step: Optional[int] = None
    tool_call_index: Optional[int] = None
    #: undecided at a stop at step s, its check on the cut run passes when s >= this; None: it fails
    pass_from_step: Optional[int] = None
    declared: Optional[str] = None
    decide_within: Optional[int] = None
    gating: bool = True
    #: its weight in a weighted armed gate (coder_eval's criterion weight; None: 1)
    weight: Optional[float] = None
    #: recorded (step.live_verdicts), replayed (from the recorded calls), or None (not live)
    source: Optional[str] = None


@dataclass
class RunState:
    """Everything the lab keeps about one finished run."""

    first_step: Optional[int]
    step_count: int
    series: dict[str, Optional[list[float]]]
    signatures: list[str]
    source: str
    criteria: list[CriterionState] = field(default_factory=list)
    error: Optional[str] = None
    #: the weighted share of the armed criteria an early stop needs to pass (None: 1, all of them)
    gate_threshold: Optional[float] = None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def step_tool_calls(record: Any) -> list[dict[str, Any]]:
    """A step record's tool calls in the plain form `qita.live.tool_call_from_data` reads:
    each action with its invocation's status and error and its result's exit code.

    Actions come from `actions` (else `decision.actions`); a step that recorded only
    `tool_invocations` (QitOS) gives those. Both spellings of each field are read by
    `tool_call_from_data` itself."""
    rec = _dict(record)
    actions = _list(rec.get("actions")) or _list(_dict(rec.get("decision")).get("actions"))
    results = _list(rec.get("action_results"))
    invocations = _list(rec.get("tool_invocations"))
    if not actions:
        return [dict(inv) for inv in invocations if isinstance(inv, dict)]
    calls = []
    for i, action in enumerate(actions):
        if not isinstance(action, dict):
            continue
        call: dict[str, Any] = {"name": action.get("name", action.get("tool_name")),
                                "args": action.get("args", action.get("parameters"))}
        inv = invocations[i] if i < len(invocations) and isinstance(invocations[i], dict) else {}
        res = results[i] if i < len(results) and isinstance(results[i], dict) else {}
        for key, spellings in (("status", ("status", "result_status")), ("error", ("error", "error_message")),
                               ("exit_code", ("exit_code", "returncode"))):
            for holder in (inv, res) if key != "exit_code" else (res, inv):
                value = next((holder[s] for s in spellings if holder.get(s) is not None), None)
                if value is not None:
                    call[key] = value
                    break
        if res.get("ok") is False:
            call["ok"] = False
        calls.append(call)
    return calls


def signature(calls: Sequence[Mapping[str, Any]]) -> str:
    """A short digest of a step's tool calls (names and arguments), to find where two runs part."""
    data = orjson.dumps([[c.get("name"), c.get("args")] for c in calls],
                        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.blake2b(data, digest_size=5).hexdigest()


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value else None


def _cumulative(values: Iterable[Optional[float]], digits: int) -> Optional[list[float]]:
    """Running sums (a missing value adds nothing, nor does a negative one: the totals never
    go down, so a cap is crossed once); None when no step had a value."""
    out, total, seen = [], 0.0, False
    for v in values:
        if v is not None:
            total += max(0.0, v)
            seen = True
        out.append(round(total, digits))
    return out if seen else None


def _counted_tokens(record: dict[str, Any], total: Optional[float], counted: Optional[list[str]]) -> Optional[float]:
    """The step's tokens as the run's token budget counts them (app.present.budget_tokens_used)."""
    if not counted:
        return total
    tokens = _dict(record.get("tokens"))
    used = budget_tokens_used({"tokens_total": total, "tokens_input": _number(tokens.get("input")),
                               "tokens_output": _number(tokens.get("output")),
                               "tokens_cache_read": _number(tokens.get("cache_read")),
                               "tokens_cache_write": _number(tokens.get("cache_write"))}, counted)
    return None if used is None else float(used)


def _first_recorded(records: Sequence[dict[str, Any]], steps: Sequence[int], cid: str
                    ) -> tuple[bool, Optional[tuple[str, int]]]:
    """(whether any step recorded a live verdict for `cid`, its first pass/fail and step)."""
    present = False
    for rec, step in zip(records, steps):
        verdicts = rec.get("live_verdicts")
        if isinstance(verdicts, dict) and cid in verdicts:
            present = True
            if verdicts[cid] in (PASS, FAIL):
                return True, (verdicts[cid], step)
    return present, None


def _pass_from(spec: dict[str, Any], cid: str, first_step: Optional[int], replayed: Mapping[str, Any],
               steps: Sequence[int]) -> Optional[int]:
    """From which step a count check with an upper bound, still undecided (under the bound),
    passes on a cut run: at once when nothing is required (must-not-run), else from the
    step its minimum was reached (replayed as the same criterion without the bound)."""
    try:
        built = criterion_from_spec({**spec, "id": cid}, strict=False)
    except Exception:  # the capability already says why the spec is unusable
        return None
    if not isinstance(built, CountCriterion) or built.max_count is None:
        return None
    if built.min_count == 0:
        return first_step
    reached = replayed.get(cid + _MIN_SUFFIX)
    return steps[reached.step] if reached is not None and reached.verdict == PASS else None


def _reached_min_spec(spec: dict[str, Any], cid: str) -> Optional[dict[str, Any]]:
    try:
        built = criterion_from_spec({**spec, "id": cid}, strict=False)
    except Exception:
        return None
    if isinstance(built, CountCriterion) and built.max_count is not None and built.min_count > 0:
        return {**spec, "id": cid + _MIN_SUFFIX, "max_count": None, "min_count": built.min_count, "stop_when": None}
    return None


def run_state(*, specs: Sequence[Mapping[str, Any]], steps: Sequence[Mapping[str, Any]],
              tokens_counted: Optional[list[str]] = None, gate_threshold: Optional[float] = None) -> RunState:
    """The lab's state of one run.

    `specs` are `run_start.criteria` as stored (each with `id`); `steps` are the run's
    step rows in order, each `{step, tokens_total, duration_s, cost_usd, record}` with the
    record parsed; `tokens_counted` the buckets its token budget counts (None: all).
    """
    records = [_dict(s.get("record")) for s in steps]
    numbers = [int(s["step"]) for s in steps]
    first = numbers[0] if numbers else None
    calls = [step_tool_calls(r) for r in records]
    specs = [dict(s) for s in specs if isinstance(s, Mapping) and s.get("id") is not None]
    derived = [d for d in (_reached_min_spec(s, str(s["id"])) for s in specs) if d is not None]
    replay = replay_live_verdicts(calls, [*specs, *derived])
    has_recorded = any(isinstance(r.get("live_verdicts"), dict) for r in records)

    criteria = []
    sources = set()
    for spec in specs:
        cid = str(spec["id"])
        cap = replay.capabilities.get(cid)
        present, recorded = _first_recorded(records, numbers, cid) if has_recorded else (False, None)
        replayed = replay.decided.get(cid)
        state = CriterionState(id=cid, type=spec.get("type") if isinstance(spec.get("type"), str) else None,
                               declared=_declared(spec), decide_within=_positive_int(spec.get("decide_within")),
                               gating=spec.get("gating", True) is not False, weight=weight_of(spec.get("weight")))
        if present:
            # The engine's own verdicts win; the replay only adds which call decided.
            state.source = "recorded"
            state.polarities = cap.polarities if cap is not None and cap.live else (FAIL, PASS)
            if recorded is not None:
                state.verdict, state.step = recorded
                if replayed is not None and replayed.verdict == recorded[0] and numbers[replayed.step] == recorded[1]:
                    state.tool_call_index = replayed.tool_call_index
        elif cap is not None and cap.live and cid not in replay.errors:
            state.source = "replayed"
            state.polarities = cap.polarities
            if replayed is not None:
                state.verdict, state.step, state.tool_call_index = \
                    replayed.verdict, numbers[replayed.step], replayed.tool_call_index
        elif cid in replay.errors:
            state.reason = f"its live verdict raised on the recorded calls: {replay.errors[cid]}"
        else:
            state.reason = cap.reason if cap is not None else "no live verdict"
        if state.source:
            sources.add(state.source)
            state.pass_from_step = _pass_from(spec, cid, first, replay.decided, numbers)
        criteria.append(state)

    series = {
        "tokens": _cumulative((_number(s.get("tokens_total")) for s in steps), 0),
        # only when the budget counts some buckets: otherwise it counts `tokens`
        "counted": _cumulative((_counted_tokens(r, _number(s.get("tokens_total")), tokens_counted)
                                for r, s in zip(records, steps)), 0) if tokens_counted else None,
        "seconds": _cumulative((_number(s.get("duration_s")) for s in steps), 3),
        "cost": _cumulative((_number(s.get("cost_usd")) for s in steps), 6),
        "calls": _cumulative((float(len(c)) for c in calls), 0),
    }
    source = "none" if not sources else sources.pop() if len(sources) == 1 else "mixed"
    return RunState(first_step=first, step_count=len(steps), series=series,
                    signatures=[signature(c) for c in calls], source=source, criteria=criteria,
                    gate_threshold=gate_threshold if gate_threshold is not None and 0 <= gate_threshold <= 1 else None)


def _declared(spec: Mapping[str, Any]) -> Optional[str]:
    """The arming a spec declares: its `stop_when` (armed when the run's switch is on), or the
    one a coder_eval e2e spec would have in its smoke variant (`armable_as`)."""
    for key in ("stop_when", "armable_as"):
        value = spec.get(key)
        if value in ("pass", "fail", "decided"):
            return value
    return None


def _positive_int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def pack_series(series: dict[str, Optional[list[float]]], steps: int) -> bytes:
    """The cumulative series as one block of little-endian doubles, `SERIES` one after the
    other, `steps` values each; a series no step recorded is all NaN.

    Binary rather than JSON because a simulation reads every run's series: 10,000 runs of
    100 steps are 40 MB, which JSON took half a second to parse and this takes none."""
    values = array("d")
    for name in SERIES:
        part = series.get(name)
        values.extend(part if part is not None else [_NAN] * steps)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tobytes()


def unpack_series(blob: Optional[bytes], steps: int) -> dict[str, Optional[Sequence[float]]]:
    """`pack_series` read back, without copying: each series a read-only sequence of floats, or None."""
    if not blob or steps <= 0 or len(blob) != 8 * steps * len(SERIES):
        return {name: None for name in SERIES}
    if sys.byteorder == "little":
        view = memoryview(bytes(blob)).cast("d")
    else:
        swapped = array("d")
        swapped.frombytes(bytes(blob))
        swapped.byteswap()
        view = memoryview(swapped)
    out: dict[str, Optional[Sequence[float]]] = {}
    for k, name in enumerate(SERIES):
        part = view[k * steps:(k + 1) * steps]
        out[name] = None if part[0] != part[0] else part
    return out
