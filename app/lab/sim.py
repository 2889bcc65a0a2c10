"""Simulating an early-stop policy over recorded full runs: pure functions, checkable by hand.

A policy arms criteria (`stop_when` pass, fail or decided each), optionally with a
minimum number of steps before an early stop and step / token / time caps. For each
run, from its first live decisions (`app.lab.state`; verdicts latch, so they are the
whole step-by-step state) and its cumulative figures:

- **Where it stops.** The earliest of: the early stop — the first step at whose end the
  armed criteria are settled (rule below), not before the minimum steps; a cap — the
  step count reaching `max_steps`, or the tokens / time after a step going over their
  cap; a decision budget — an armed criterion still undecided after the `decide_within`
  steps its producer gave it (only when replaying the runs' own declared arming). At the
  same step a cap comes first, then a decision budget, then the early stop (the
  engine checks budgets before early stop). A stop at or after the run's last step is
  no stop at all: the run ends as recorded (a run's own end beats an early stop).
- **The rule.** `all` (qita's engine, `qita.live.armed_decided`): every armed criterion
  decided in its armed polarity. `gate` (coder_eval, as its recorded runs show): any
  armed criterion decided fail in a polarity it is armed for, or every pass-armed
  criterion decided pass (a must-not-run check armed on fail never blocks a pass-stop;
  coder_eval arms fail on every armed criterion, so an arming it accepted that can never
  fire still gates). `auto` picks `gate` for coder_eval runs and `all` for the others.
- **The simulated verdict.** A run not stopped keeps its recorded verdict. An early stop
  gates on the armed criteria only: each gives its verdict if decided by the stop, and
  otherwise what its check gives on the cut run (a must-not-run check passes; a count
  still under its minimum, or a skill not yet engaged, fails; a count with both bounds
  passes once its minimum was reached). The run passes when every armed criterion
  passes — and its tokens up to the stop, counted as its own token budget counts them,
  are within that budget (coder_eval checks its budget when the run ends). A cap or a
  decision budget stop is a failed run, like coder_eval's budget exhaustion.
- **What it would have cost.** The recorded totals minus what the steps after the stop
  recorded (steps, tool calls, tokens, cost, agent and end-to-end time); a run not
  stopped costs what it cost. A measure whose steps recorded nothing is unknown for a
  cut run, and such pairs are left out of that measure (as compare does).

The summary is compare's (`app.compare.summarize`) over pairs {a: simulated, b: recorded},
with the false passes (simulated pass, recorded fail) and false fails as rates with
their intervals (`app.stats`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from qita.criteria import FAIL, PASS
from qita.live import armed_decided, in_polarity

from .. import compare, stats
from ..criteria import armed_gate_passed

STOP_WHEN = ("pass", "fail", "decided")
RULES = ("auto", "all", "gate")
#: stop reasons a simulation gives, in the trace format's vocabulary (plus coder_eval's decision budget)
CAP_REASONS = {"max_steps": "budget_steps", "max_tokens": "budget_tokens", "max_seconds": "budget_time"}
DECISION_BUDGET = "decision_budget_exceeded"
LABEL_A, LABEL_B = "simulated", "recorded"


@dataclass(frozen=True)
class Policy:
    """An early-stop policy. `declared`: each run armed as its own criteria declare."""

    arm: tuple[tuple[str, str], ...] = ()
    declared: bool = False
    #: with `declared`: criteria left unarmed whatever the runs declare
    without: tuple[str, ...] = ()
    rule: str = "auto"
    min_steps: Optional[int] = None
    max_steps: Optional[int] = None
    max_tokens: Optional[float] = None
    max_seconds: Optional[float] = None

    @property
    def armed(self) -> dict[str, str]:
        return dict(self.arm)

    @property
    def label(self) -> str:
        """The policy in a few words: "skill:decided + no_push:fail, at least 3 steps"."""
        parts = [("as each run declares" + (" without " + ", ".join(self.without) if self.without else ""))
                 if self.declared else " + ".join(f"{cid}:{when}" for cid, when in self.arm) or "nothing armed"]
        if self.min_steps:
            parts.append(f"at least {self.min_steps} steps")
        for name, text in (("max_steps", "steps"), ("max_tokens", "tokens"), ("max_seconds", "s")):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"cap {value:g} {text}")
        if self.rule != "auto":
            parts.append(f"rule {self.rule}")
        return ", ".join(parts)

    def params(self) -> dict[str, Any]:
        """The policy as URL parameters (`arm` repeated), the way the lab page reads it."""
        out: dict[str, Any] = {"arm": [f"{cid}:{when}" for cid, when in self.arm]}
        if self.declared:
            out["declared"] = "true"
            if self.without:
                out["without"] = list(self.without)
        if self.rule != "auto":
            out["rule"] = self.rule
        for name in ("min_steps", "max_steps", "max_tokens", "max_seconds"):
            value = getattr(self, name)
            if value is not None:
                out[name] = f"{value:g}"
        return {k: v for k, v in out.items() if v not in ([], None)}

    def to_json(self) -> dict[str, Any]:
        return {"arm": [{"criterion": cid, "stop_when": when} for cid, when in self.arm], "declared": self.declared,
                "without": list(self.without), "rule": self.rule, "min_steps": self.min_steps, "max_steps": self.max_steps,
                "max_tokens": self.max_tokens, "max_seconds": self.max_seconds, "label": self.label}


@dataclass
class Crit:
    """One criterion of a run, steps counted as ordinals (1 = the run's first step)."""

    id: str
    type: Optional[str] = None
    polarities: tuple[str, ...] = ()
    verdict: Optional[str] = None
    #: the ordinal of the step that decided it
    at: Optional[int] = None
    tool_call_index: Optional[int] = None
    #: undecided at a stop after `o` steps, its check on the cut run passes when o >= this
    pass_from: Optional[int] = None
    declared: Optional[str] = None
    decide_within: Optional[int] = None
    #: its weight in the weighted armed gate (`gate` rule)
    weight: float = 1.0

    @property
    def live(self) -> bool:
        return bool(self.polarities)


@dataclass
class SimRun:
    """One recorded run: its figures as compare reads them (`row`), its steps, its criteria."""

    row: dict[str, Any]
    step_count: int
    first_step: int = 0
    series: dict[str, Optional[Sequence[float]]] = field(default_factory=dict)
    crits: dict[str, Crit] = field(default_factory=dict)
    #: the weighted share of the armed criteria an early stop needs to pass (`gate` rule; None: 1)
    gate_threshold: Optional[float] = None

    def step_of(self, ordinal: int) -> Optional[int]:
        """The step index of the `ordinal`-th step."""
        return self.first_step + ordinal - 1 if ordinal >= 1 else None


@dataclass
class Outcome:
    """Where and why one run stops under a policy, and its simulated verdict."""

    cut: bool
    ordinal: int
    step: Optional[int]
    reason: Optional[str]
    verdict: Optional[str]
    deciding: Optional[str] = None
    early_stop_reason: Optional[str] = None
    verdict_reason: Optional[str] = None
    armed: list[str] = field(default_factory=list)
    rule: str = "all"

    def to_json(self) -> dict[str, Any]:
        return {"cut": self.cut, "steps_taken": self.ordinal, "stop_step": self.step, "stop_reason": self.reason,
                "verdict": self.verdict, "deciding_criterion": self.deciding,
                "early_stop_reason": self.early_stop_reason, "verdict_reason": self.verdict_reason,
                "armed": self.armed, "rule": self.rule}


# -- the stop rule -----------------------------------------------------------------------------

#: A point in a run's timeline: (step ordinal, tool call index within the run). A decision
#: recorded without its call comes at the end of its step.
_END_OF_STEP = 1 << 60


def _calls_by(run: SimRun, ordinal: int) -> Optional[int]:
    calls = run.series.get("calls")
    return int(calls[ordinal - 1]) if calls is not None and 1 <= ordinal <= len(calls) else None


def _budget_point(run: SimRun, c: Crit) -> Optional[tuple[int, int]]:
    """When an armed criterion's decision budget (`decide_within` tool calls, coder_eval's
    unit) runs out: at the start of that call, so at the step holding it. Without the
    run's call counts, its steps stand in for its calls."""
    budget = c.decide_within
    if not budget:
        return None
    calls = run.series.get("calls")
    if calls is None:
        return (budget, _END_OF_STEP) if budget <= run.step_count else None
    at = bisect_left(calls, budget)
    return (at + 1, budget) if at < len(calls) else None


def _decision_point(run: SimRun, c: Crit) -> Optional[tuple[int, int]]:
    if c.verdict not in (PASS, FAIL) or c.at is None:
        return None
    return (c.at, c.tool_call_index if c.tool_call_index is not None else _END_OF_STEP)


def gate_stop(armed: dict[str, str], run: SimRun, *, budgets: bool) -> Optional[tuple[int, str, str]]:
    """coder_eval's stop rule (its early-stop watcher, as its documented fields describe it):
    (step ordinal, early-stop reason, deciding criterion) of the first point where it holds.

    With `w` each armed criterion's weight and `T` the run's gate threshold (default 1):

    - **fail-stop** — an armed criterion armed on fail has failed live (or one armed on pass
      ran out of its `decide_within` budget undecided: an effective fail), no armed
      criterion that can still pass is undecided (a fail-stop waits for them: recall is not
      traded), and the *ceiling* — the weight of the armed criteria not failed, over all
      armed weight — is below `T`: the gate can no longer be met;
    - **pass-stop** — the criteria armed on pass have a *floor* (the weight of those passed,
      over theirs) of at least `T`, and no other armed criterion that can still pass is
      undecided.

    With weights 1 and `T` = 1 this is "any armed fail (once nothing that can pass is
    pending), or every pass-armed criterion passed". Verdicts latch, so the rule is checked
    only where a decision or a budget's end moves something."""
    crits = [run.crits[cid] for cid in armed]
    total = sum(c.weight for c in crits)
    if not crits or total <= 0:
        return None
    threshold = run.gate_threshold if run.gate_threshold is not None else 1.0
    decided = {c.id: _decision_point(run, c) for c in crits}
    expires = {c.id: (_budget_point(run, c) if budgets and PASS in c.polarities else None) for c in crits}
    for cid, d in decided.items():
        e = expires[cid]
        if d is not None and e is not None and d[1] == _END_OF_STEP and d[0] == e[0]:
            # decided in the step its budget ran out in, at a call not recorded: in time
            decided[cid] = e
        if d is not None and e is not None and decided[cid] <= e:
            expires[cid] = None  # decided within its budget: the budget never runs out
    points = sorted({p for p in (*decided.values(), *expires.values()) if p is not None})
    pass_set = [c for c in crits if in_polarity(PASS, armed[c.id])]
    pass_weight = sum(c.weight for c in pass_set)
    for point in points:
        verdict: dict[str, Optional[str]] = {}
        by_budget: set[str] = set()
        for c in crits:
            d, e = decided[c.id], expires[c.id]
            if d is not None and d <= point and e is None:
                verdict[c.id] = c.verdict
            elif e is not None and e <= point:
                verdict[c.id] = FAIL
                by_budget.add(c.id)
            else:
                verdict[c.id] = None

        def pending(c: Crit) -> bool:
            return verdict[c.id] is None and PASS in c.polarities

        if not any(pending(c) for c in crits):
            native = [c for c in crits if verdict[c.id] == FAIL and c.id not in by_budget and in_polarity(FAIL, armed[c.id])]
            timed_out = [c for c in crits if c.id in by_budget]
            candidate = native[0] if native else (timed_out[0] if timed_out else None)
            ceiling = sum(c.weight for c in crits if verdict[c.id] != FAIL) / total
            if candidate is not None and ceiling < threshold:
                return point[0], ("criterion_failed" if native else DECISION_BUDGET), candidate.id
        if pass_set and pass_weight > 0 and not any(pending(c) for c in crits if c not in pass_set):
            floor = sum(c.weight for c in pass_set if verdict[c.id] == PASS) / pass_weight
            if floor >= threshold:
                # the deciding one: the last pass-armed criterion decided at this point, else the last of them
                moved = [c for c in pass_set if decided[c.id] == point]
                return point[0], "criterion_passed", (moved or pass_set)[-1].id
    return None


def gate_passes(verdicts: dict[str, str], armed: dict[str, str], run: SimRun) -> bool:
    """coder_eval's weighted armed gate (app.criteria.armed_gate_passed) over the simulated verdicts."""
    crits = [run.crits[cid] for cid in armed]
    return armed_gate_passed([verdicts.get(c.id) == PASS for c in crits], [c.weight for c in crits],
                             run.gate_threshold)


def rule_of(policy: Policy, run: SimRun) -> str:
    if policy.rule != "auto":
        return policy.rule
    return "gate" if run.row.get("source_format") == "coder_eval" else "all"


def armed_in(policy: Policy, run: SimRun) -> dict[str, str]:
    """The criteria the policy arms in this run (those it has and can evaluate live), in order."""
    if policy.declared:
        return {c.id: c.declared for c in run.crits.values()
                if c.declared and c.live and c.id not in policy.without}
    return {cid: when for cid, when in policy.arm if cid in run.crits and run.crits[cid].live}


def settle(armed: dict[str, str], crits: dict[str, Crit]) -> Optional[tuple[int, str]]:
    """qita's rule (`all`): (the first step ordinal at whose end every armed criterion is
    decided in its armed polarity, the deciding criterion: the last one decided), or None.

    Verdicts latch, so the rule can only start to hold at the last armed decision, and is
    checked once there (`qita.live.armed_decided`, the engine's own rule)."""
    if not armed:
        return None
    order = {cid: i for i, cid in enumerate(armed)}

    def when(c: Crit) -> tuple:
        return (c.at, c.tool_call_index if c.tool_call_index is not None else _END_OF_STEP, order[c.id])

    decided = [c for cid in armed if (c := crits[cid]).verdict in (PASS, FAIL) and c.at is not None]
    if not decided:
        return None
    deciding = max(decided, key=when)
    at = deciding.at
    assert at is not None  # `decided` holds only criteria decided at a step
    verdicts = {c.id: c.verdict for c in decided if c.at is not None and c.at <= at}
    return (at, deciding.id) if armed_decided(verdicts, armed) else None


def first_over(series: Optional[Sequence[float]], cap: float) -> Optional[int]:
    """The ordinal of the first step after which the running total (never decreasing) is over `cap`."""
    if series is None:
        return None
    i = bisect_right(series, cap)
    return i + 1 if i < len(series) else None


def check_on_cut(c: Crit, ordinal: int) -> str:
    """A criterion's verdict on a run cut after `ordinal` steps (its latched verdict if
    decided by then, else what its check gives on the cut run)."""
    if c.verdict in (PASS, FAIL) and c.at is not None and c.at <= ordinal:
        return c.verdict
    return PASS if c.pass_from is not None and c.pass_from <= ordinal else FAIL


def outcome(policy: Policy, run: SimRun) -> Outcome:
    """Where the run stops under `policy`, why, and the verdict it would then have."""
    n = run.step_count
    rule = rule_of(policy, run)
    armed = armed_in(policy, run)
    # (ordinal, precedence at the same step, reason, deciding criterion)
    stops: list[tuple[int, int, str, Optional[str]]] = []
    if policy.max_steps is not None:
        stops.append((max(1, int(policy.max_steps)), 0, "budget_steps", None))
    for name, key in (("max_tokens", "tokens"), ("max_seconds", "seconds")):
        cap = getattr(policy, name)
        at = first_over(run.series.get(key), cap) if cap is not None else None
        if at is not None:
            stops.append((at, 0, CAP_REASONS[name], None))
    gate_reason: Optional[str] = None
    if rule == "gate":
        # coder_eval's watcher decides fail-stops, pass-stops and decision budgets together
        found = gate_stop(armed, run, budgets=policy.declared)
        if found is not None:
            at, gate_reason, cid = found
            if gate_reason == DECISION_BUDGET:
                stops.append((at, 1, DECISION_BUDGET, cid))
            else:
                stops.append((max(at, policy.min_steps or 0), 2, "early_stop", cid))
    else:
        if policy.declared:
            for cid in armed:
                c = run.crits[cid]
                if c.decide_within and (c.at is None or c.at > c.decide_within):
                    stops.append((c.decide_within, 1, DECISION_BUDGET, cid))
        settled = settle(armed, run.crits)
        if settled is not None:
            stops.append((max(settled[0], policy.min_steps or 0), 2, "early_stop", settled[1]))
    first = min(stops, default=None)
    if first is None or first[0] >= n:
        return Outcome(cut=False, ordinal=n, step=run.step_of(n), reason=run.row.get("stop_reason"),
                       verdict=run.row.get("verdict"), armed=list(armed), rule=rule)
    ordinal, _rank, reason, deciding = first
    out = Outcome(cut=True, ordinal=ordinal, step=run.step_of(ordinal), reason=reason, verdict=FAIL,
                  deciding=deciding, armed=list(armed), rule=rule)
    if reason not in ("early_stop", DECISION_BUDGET):
        out.verdict_reason = "a cap was reached before the armed criteria were decided"
        return out
    if reason == DECISION_BUDGET:
        out.early_stop_reason = DECISION_BUDGET
        within = run.crits[deciding].decide_within if deciding else None
        out.verdict_reason = (f"{deciding} was not decided within {within} tool calls" if rule == "gate"
                              else f"{deciding} was not decided within {ordinal} steps")
        if rule != "gate":
            return out
    else:
        out.early_stop_reason = gate_reason if rule == "gate" and gate_reason else (
            "criterion_passed" if run.crits[deciding].verdict == PASS else "criterion_failed")
    verdicts = {cid: check_on_cut(run.crits[cid], ordinal) for cid in armed}
    failed = [cid for cid, v in verdicts.items() if v != PASS]
    # A budget-driven stop gates as a native fail-stop does (coder_eval): through the gate
    if (gate_passes(verdicts, armed, run) if rule == "gate" else not failed) is False:
        if reason != DECISION_BUDGET:
            out.verdict_reason = "armed criteria that fail on the cut run: " + ", ".join(failed)
        return out
    budget = run.row.get("budget_max_tokens")
    counted = run.series.get("counted") or run.series.get("tokens")
    if budget is not None and counted is not None and counted[ordinal - 1] > budget:
        out.verdict_reason = (f"over its own token budget at the stop ({counted[ordinal - 1]:,.0f} > {budget:,.0f} "
                              "counted tokens; its producer checks the budget when the run ends)")
        return out
    out.verdict = PASS
    return out


# -- figures -----------------------------------------------------------------------------------

def _cut(total: Optional[float], series: Optional[Sequence[float]], n: int, ordinal: int) -> Optional[float]:
    """The recorded total minus what the steps after the stop recorded."""
    if total is None:
        return None
    if ordinal >= n:
        return total
    if series is None:
        return None
    value = max(0.0, total - (series[n - 1] - series[ordinal - 1]))
    return round(value) if isinstance(total, int) else value


def simulated_row(run: SimRun, out: Outcome) -> dict[str, Any]:
    """The simulated run in compare's column names."""
    row, n, o = run.row, run.step_count, out.ordinal
    steps = row.get("steps")
    seconds = run.series.get("seconds")
    return {**row,
            "verdict": out.verdict,
            "stop_reason": out.reason,
            "early_stopped": out.cut and out.reason in ("early_stop", DECISION_BUDGET),
            "early_stop_reason": out.early_stop_reason,
            "steps": (o if steps is None else max(0, steps - (n - o))) if out.cut else steps,
            "tool_calls": _cut(row.get("tool_calls"), run.series.get("calls"), n, o),
            "tokens_total": _cut(row.get("tokens_total"), run.series.get("tokens"), n, o),
            "cost_usd": _cut(row.get("cost_usd"), run.series.get("cost"), n, o),
            "agent_cost_usd": _cut(row.get("agent_cost_usd"), run.series.get("cost"), n, o),
            "agent_elapsed_s": _cut(row.get("agent_elapsed_s"), seconds, n, o),
            "elapsed_s": _cut(row.get("elapsed_s"), seconds, n, o),
            "status": "completed" if out.cut else row.get("status")}


def rate(k: int, n: int) -> dict[str, Any]:
    """{count, of, rate, low, high, upper}: a rate with its Wilson interval and its one-sided
    95% upper bound (app.stats)."""
    ci = stats.wilson(k, n)
    return {"count": k, "of": n, "rate": ci["rate"] if ci else None, "low": ci["low"] if ci else None,
            "high": ci["high"] if ci else None, "upper": stats.upper_bound(k, n)}


def simulate(policy: Policy, runs: Iterable[SimRun]) -> dict[str, Any]:
    """Every run under `policy`: {policy, pairs, summary, headline}. A pair is
    {a: simulated, b: recorded} in compare's shape, plus `sim` (where and why it stopped)."""
    pairs = []
    for run in runs:
        out = outcome(policy, run)
        key = (run.row.get("task_id") or run.row.get("run_id") or "", int(run.row.get("replicate") or 0))
        pair = compare.make_pair(key, simulated_row(run, out), run.row)
        pair["run_id"] = run.row.get("run_id")
        pair["sim"] = out.to_json()
        pairs.append(pair)
    return {"policy": policy.to_json(), "pairs": pairs, **summarize(pairs)}


def summarize(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """compare's summary of simulated against recorded, with the lab's own figures."""
    summary = compare.summarize(pairs, [], [])
    summary["mcnemar"]["reading"] = stats.mcnemar_reading(summary["mcnemar"], LABEL_A, LABEL_B)
    graded = summary["verdict_agreement"]["total"]
    summary["false_passes"] = rate(summary["confusion"]["pass_fail"], graded)
    summary["false_fails"] = rate(summary["confusion"]["fail_pass"], graded)
    reasons: dict[str, int] = {}
    for p in pairs:
        if p["sim"]["cut"]:
            reasons[p["sim"]["stop_reason"]] = reasons.get(p["sim"]["stop_reason"], 0) + 1
    summary["cut"] = sum(reasons.values())
    summary["cut_by"] = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    summary["nothing_armed"] = sum(1 for p in pairs if not p["sim"]["armed"])
    return {"summary": summary, "headline": headline(summary)}


def headline(summary: dict[str, Any]) -> str:
    """compare's sentence for simulated against recorded, with the false passes."""
    text = compare.headline(summary, LABEL_A, LABEL_B)
    fp = summary["false_passes"]
    if fp["of"]:
        upper = f", 95% upper bound {100 * fp['upper']:.0f}%" if fp["upper"] is not None else ""
        text += f" False passes (simulated pass, recorded fail): {fp['count']} of {fp['of']}{upper}."
    return text


def ordinals(first_step: Optional[int], step: Optional[int]) -> Optional[int]:
    """A step index as an ordinal of the run whose first step is `first_step`."""
    if step is None or first_step is None:
        return None
    return step - first_step + 1


def sim_crit(*, id: str, type: Optional[str], polarities: Sequence[str], verdict: Optional[str],
             step: Optional[int], tool_call_index: Optional[int], pass_from_step: Optional[int],
             declared: Optional[str], decide_within: Optional[int], first_step: Optional[int],
             weight: Optional[float] = None) -> Crit:
    """A criterion as the simulation reads it, from a `lab_decisions` row."""
    return Crit(id=id, type=type, polarities=tuple(polarities), verdict=verdict, at=ordinals(first_step, step),
                tool_call_index=tool_call_index, pass_from=ordinals(first_step, pass_from_step),
                declared=declared, decide_within=decide_within, weight=1.0 if weight is None else weight)
