"""Is the simulator right? Smoke's own policy simulated over the e2e runs, against the
smoke runs that were recorded, pair by pair.

For each (task, replicate) with a run in both variants, the e2e run is simulated under
the arming its smoke twin actually ran with (the smoke run's armed criteria, their
`stop_when` and decision budgets; the rule of its producer). Its stop step and verdict
are set beside the recorded smoke run's: its early-stop step (else its last step) and
its verdict. Where they differ the pair says why, from what the traces show:

- `actions_differ`: the two runs' tool calls part before the stop (the agent did
  something different: a non-deterministic agent, or a different environment); the
  step and both calls are named;
- `smoke_ended_first`: smoke ended on its own (a crash, a budget) before the stop the
  policy would make, or the other way round;
- `verdict_differs`: same stop, different verdict (the recorded verdict's reason is
  given, e.g. a budget its producer checked at the end);
- `unexplained`: the same actions up to both stops, and still a different stop: the
  producer stopped by a rule the simulation does not model.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .. import compare
from ..compare_flags import step_calls
from .sim import Crit, Outcome, Policy, SimRun, outcome

DECLARED = Policy(declared=True)


def with_arming(run: SimRun, armed: dict[str, Crit], gate_threshold: Optional[float] = None) -> SimRun:
    """The run with another run's arming: its criteria declared as `armed` declares them, and
    that run's gate threshold (when it has one; else the run's own)."""
    crits = {cid: Crit(**{**c.__dict__, "declared": armed[cid].declared if cid in armed else None,
                          "decide_within": armed[cid].decide_within if cid in armed else None})
             for cid, c in run.crits.items()}
    return SimRun(row=run.row, step_count=run.step_count, first_step=run.first_step, series=run.series, crits=crits,
                  gate_threshold=gate_threshold if gate_threshold is not None else run.gate_threshold)


def recorded_stop(smoke: dict[str, Any]) -> Optional[int]:
    """Where the recorded smoke run stopped: its early-stop step, else its last step."""
    if smoke.get("early_stop_step") is not None:
        return smoke["early_stop_step"]
    count, first = smoke.get("step_count") or 0, smoke.get("first_step")
    return first + count - 1 if count and first is not None else None


def _ordinal(step: Optional[int], first: Optional[int]) -> Optional[int]:
    return None if step is None or first is None else step - first + 1


def part_at(a: list[str], b: list[str], upto: int) -> Optional[int]:
    """The first ordinal (1-based, at most `upto`) where two runs' step digests differ,
    counting a step one run has and the other has not."""
    for i in range(upto):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return i + 1
    return None


def calls_text(record: Any) -> str:
    """A step's calls in one line: `Bash: git push origin main; Read: a.py`."""
    calls = step_calls(record)
    if not calls:
        return "no tool call"
    return "; ".join(f"{c['name']}: {c['summary']}" if c.get("summary") else c["name"] for c in calls)


def validate(e2e: list[SimRun], smoke_rows: list[dict[str, Any]], armings: dict[int, dict[str, Crit]],
             digests: dict[int, list[str]], records: Callable[[list[tuple[int, int]]], dict[tuple[int, int], Any]],
             *, label_a: str = "smoke", label_b: str = "e2e") -> dict[str, Any]:
    """Every pair's simulated and recorded stop and verdict, whether they match, and why not.

    `armings`: each smoke run's armed criteria by run pk; `digests`: every run's step
    digests by pk; `records(pairs)`: the step records of a few (run pk, step) pairs."""
    smoke_by_key, _dupes = compare.index_runs(smoke_rows)
    e2e_by_key, _ = compare.index_runs([r.row for r in e2e])
    runs = {r.row["id"]: r for r in e2e}
    rows: list[dict[str, Any]] = []
    wanted: list[tuple[int, int]] = []
    for key in sorted(smoke_by_key.keys() & e2e_by_key.keys()):
        smoke, run = smoke_by_key[key], runs[e2e_by_key[key]["id"]]
        armed = armings.get(smoke["id"], {})
        out = outcome(DECLARED, with_arming(run, armed, smoke.get("gate_threshold")))
        rec_step = recorded_stop(smoke)
        stop_match = rec_step == out.step
        verdict_match = compare.outcome(smoke.get("verdict")) == compare.outcome(out.verdict)
        row: dict[str, Any] = {
            "task_id": key[0], "replicate": key[1], "smoke_run_id": smoke["run_id"], "e2e_run_id": run.row["run_id"],
            "armed": [{"criterion": cid, "stop_when": c.declared, "decide_within": c.decide_within}
                      for cid, c in armed.items()],
            "recorded": {"stop_step": rec_step, "verdict": smoke.get("verdict"), "stop_reason": smoke.get("stop_reason"),
                         "early_stop_reason": smoke.get("early_stop_reason"),
                         "deciding_criterion": smoke.get("deciding_criterion"),
                         "source_status": smoke.get("source_status")},
            "simulated": {"stop_step": out.step, "verdict": out.verdict, "stop_reason": out.reason,
                          "early_stop_reason": out.early_stop_reason, "deciding_criterion": out.deciding,
                          "verdict_reason": out.verdict_reason, "rule": out.rule},
            "stop_matches": stop_match, "verdict_matches": verdict_match, "match": stop_match and verdict_match,
            "why": None, "_pks": (smoke["id"], run.row["id"]),
        }
        if not row["match"]:
            row["why"] = _why(row, smoke, run, out, digests, rec_step, label_a)
            if row["why"]["kind"] == "actions_differ":
                step = row["why"]["step"]
                wanted += [(smoke["id"], step), (run.row["id"], step)]
        rows.append(row)
    found = records(wanted) if wanted else {}
    for row in rows:
        s_pk, e_pk = row.pop("_pks")
        why = row["why"]
        if why and why["kind"] == "actions_differ":
            why[label_a] = calls_text(found.get((s_pk, why["step"])))
            why[label_b] = calls_text(found.get((e_pk, why["step"])))
            why["text"] = (f"the agent did something different at step {why['step']}: {label_a} ran "
                           f"{why[label_a]}; {label_b} ran {why[label_b]}")
    matched = sum(1 for r in rows if r["match"])
    return {
        "label_a": label_a, "label_b": label_b,
        "pairs": rows, "paired": len(rows), "matched": matched,
        "stop_matches": sum(1 for r in rows if r["stop_matches"]),
        "verdict_matches": sum(1 for r in rows if r["verdict_matches"]),
        "explained": sum(1 for r in rows if r["why"] and r["why"]["kind"] != "unexplained"),
        "unexplained": sum(1 for r in rows if r["why"] and r["why"]["kind"] == "unexplained"),
        "only_smoke": sorted(f"{k[0]}#{k[1]}" for k in smoke_by_key.keys() - e2e_by_key.keys()),
    }


def _why(row: dict[str, Any], smoke: dict[str, Any], run: SimRun, out: Outcome, digests: dict[int, list[str]],
         rec_step: Optional[int], label: str) -> dict[str, Any]:
    first = run.first_step
    rec_o = _ordinal(rec_step, smoke.get("first_step"))
    # Up to the earlier stop: both runs ran those steps, and the later stop is decided by them.
    upto = min(rec_o, out.ordinal) if rec_o is not None else out.ordinal
    parted = part_at(digests.get(smoke["id"], []), digests.get(run.row["id"], []), upto)
    if parted is not None:
        return {"kind": "actions_differ", "step": first + parted - 1,
                "text": f"the agent did something different at step {first + parted - 1}"}
    if not smoke.get("early_stop_step") and rec_step is not None and out.step is not None and rec_step < out.step:
        return {"kind": "smoke_ended_first", "step": rec_step,
                "text": f"{label} ended on its own at step {rec_step} ({smoke.get('stop_reason') or 'no stop reason'}), "
                        f"before the policy would stop it (step {out.step})"}
    if row["stop_matches"]:
        reason = smoke.get("source_status") or smoke.get("stop_reason")
        return {"kind": "verdict_differs", "step": rec_step,
                "text": f"same stop, different verdict: {label} recorded {smoke.get('verdict')}"
                        + (f" ({reason})" if reason else "")
                        + f", the simulation gives {out.verdict}"
                        + (f" ({out.verdict_reason})" if out.verdict_reason else "")}
    if not out.cut and smoke.get("early_stop_step") is not None:
        return {"kind": "unexplained", "step": rec_step,
                "text": f"the same actions up to step {rec_step}, where {label} stopped "
                        f"({smoke.get('early_stop_reason') or 'early stop'}), but its arming does not settle there "
                        "on the full run: a stop rule the simulation does not model"}
    return {"kind": "unexplained", "step": rec_step,
            "text": f"the same actions, but {label} stopped at step {rec_step} ({smoke.get('stop_reason')}) and the "
                    f"simulation at step {out.step} ({out.reason}): a stop rule the simulation does not model"}
