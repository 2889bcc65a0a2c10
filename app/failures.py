"""Why a failing run failed: its criteria as the verdict weighed them, and the reasons
the runs list and the experiments overview count.

- A run is failing when its verdict is `fail` or `error`; only failing runs have reasons.
- A criterion gates the verdict as app.criteria says: for a run gated on its armed criteria
  (it stopped early) only the armed ones; otherwise every gating criterion the run
  declared. A failing run's reasons are its gating criteria that failed
  ("criterion X failed"); a failing run with none (its verdict was recorded by the run,
  or it errored) is counted under the reason the run gave for its verdict
  (`run_end.verdict_reason`, e.g. coder_eval's "failed: token budget exceeded"), else
  how it ended: its stop detail, else its stop reason.
- A stop detail such as "final_result is set" says how a run ended, not why it failed:
  it is only a reason when neither a criterion nor the run's own verdict reason explains
  the failure. (A coder_eval run over its token budget that stopped early on a passing
  criterion has that criterion's details as its stop detail: not why it failed.)
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from sqlalchemy import select
from sqlmodel import Session

from .criteria import Weight, weigh, weighs_against
from .models import CRITERIA, EARLY, RUNS

#: Verdicts of runs that count as failing (an errored run fails, as coder_eval counts it).
FAILING = ("fail", "error")


def _raw_score(stored: Any, result: Any) -> Any:
    """The score as the criterion record wrote it, when none was stored (e.g. out of range
    or not a number): the page shows it as written rather than as absent."""
    if stored is not None or not isinstance(result, dict):
        return None
    return result.get("score")


#: The criterion fields the weighing reads (app.criteria).
WEIGH_FIELDS = ("criterion_id", "stop_when", "gating", "pass_threshold", "has_result", "score", "passed", "has_spec")


def classify_criteria(rows: list[dict[str, Any]], *, early_stop_enabled: bool, early_stopped: bool,
                      armed_ids: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """A run's criterion rows with armed / advisory / informational flags and effective pass."""
    weights = weigh(rows, early_stop_enabled=early_stop_enabled, early_stopped=early_stopped, armed_ids=armed_ids)
    out = []
    for r, (armed, advisory, informational, passed) in zip(rows, weights):
        out.append({
            "id": r["criterion_id"],
            "type": r.get("type"),
            "description": r.get("description"),
            "stop_when": r["stop_when"],
            "gating": r["gating"],
            "pass_threshold": r["pass_threshold"],
            "armed": armed,
            "advisory": advisory,
            "informational": informational,
            "graded": r["has_result"],
            "score": r["score"],
            "passed": passed,
            "passed_recorded": r["passed"],
            "live_verdict": r.get("live_verdict"),
            "decided_at_step": r.get("decided_at_step"),
            "details": r.get("details"),
            "score_raw": _raw_score(r["score"], r.get("result")),
            "declared": r["has_spec"],
        })
    return out


def failing_criteria(criteria: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The criteria (as classify_criteria gives them) that failed and weighed on the verdict."""
    return [c for c in criteria
            if weighs_against(Weight(c["armed"], c["advisory"], c["informational"], c["passed"]))]


def run_reasons(criteria: list[dict[str, Any]], *, stop_reason: Optional[str],
                stop_detail: Optional[str], verdict_reason: Optional[str] = None) -> list[dict[str, Any]]:
    """A failing run's reasons: the run's own reason for its verdict and each failing
    criterion, else how the run ended."""
    return _reasons_of([c["id"] for c in failing_criteria(criteria)], stop_reason, stop_detail, verdict_reason)


def _reasons_of(failed_ids: list[str], stop_reason: Optional[str], stop_detail: Optional[str],
                verdict_reason: Optional[str], unresolved: Sequence[str] = ()) -> list[dict[str, Any]]:
    # The producer's reason comes first and does not hide the criteria: coder_eval fails a
    # run that ran out of turns or budget, or crashed, whatever its criteria said (its
    # status, beside the failed criteria its failed_samples list); such a run was counted
    # under a failed criterion only, never under "turn budget exhausted".
    out = [{"reason": verdict_reason, "criterion": None, "stop_reason": stop_reason}] if verdict_reason else []
    out += [{"reason": f"criterion {c} failed", "criterion": c, "stop_reason": None} for c in failed_ids]
    if out:
        return out
    if unresolved:
        # A failed run whose gating criteria passed or have no result: the missing results
        # are what kept its gate shut (coder_eval's gate reads a criterion it did not
        # evaluate as a score of 0), not its stop detail ("final_result is set").
        return [{"reason": f"criterion {c} has no result", "criterion": c, "stop_reason": None} for c in unresolved]
    if stop_detail:
        return [{"reason": stop_detail, "criterion": None, "stop_reason": stop_reason}]
    from .present import stop_reason_info

    # No criterion, detail or stop reason: counted under no reason (listed last).
    text = stop_reason_info(stop_reason)["label"] if stop_reason else None
    return [{"reason": text, "criterion": None, "stop_reason": stop_reason}]


def failing_run_reasons(session: Session, *, conds: list[Any]) -> list[dict[str, Any]]:
    """Every failing run among those matching `conds`, with its experiment, variant and reasons.

    Two queries whatever the number of runs (runs with their criteria, early-stop records).
    """
    where = [*conds, RUNS.c.verdict.in_(FAILING)]
    runs: dict[int, list[Any]] = {}
    stmt = (select(RUNS.c.id, RUNS.c.experiment, RUNS.c.variant, RUNS.c.early_stop_enabled, RUNS.c.early_stopped,
                   RUNS.c.stop_reason, RUNS.c.stop_detail, RUNS.c.verdict_reason, RUNS.c.verdict,
                   *[CRITERIA.c[f] for f in WEIGH_FIELDS])
            .select_from(RUNS.outerjoin(CRITERIA, CRITERIA.c.run_pk == RUNS.c.id)).where(*where)
            .order_by(RUNS.c.id, CRITERIA.c.position, CRITERIA.c.id))
    for row in session.execute(stmt):
        entry = runs.get(row[0])
        if entry is None:
            entry = runs[row[0]] = [row[1:9], []]
        if row[9] is not None:
            entry[1].append(dict(zip(WEIGH_FIELDS, row[9:])))
    if not runs:
        return []
    armed: dict[int, Any] = {}
    if any(head[3] for head, _c in runs.values()):
        armed = {pk: a for pk, a in session.execute(
            select(EARLY.c.run_pk, EARLY.c.armed_criteria).where(EARLY.c.run_pk.in_(select(RUNS.c.id).where(*where))))}
    out = []
    for pk, ((experiment, variant, enabled, stopped, stop_reason, stop_detail, verdict_reason, verdict),
             rows) in runs.items():
        ids = armed.get(pk)
        weights = weigh(rows, early_stop_enabled=bool(enabled), early_stopped=bool(stopped),
                        armed_ids=ids if isinstance(ids, list) else None)
        failed = [r["criterion_id"] for r, weight in zip(rows, weights) if weighs_against(weight)]
        # (an error's missing results are the error's doing: its stop detail says more)
        unresolved = [r["criterion_id"] for r, w in zip(rows, weights)
                      if verdict == "fail" and w.passed is None and not w.informational and not w.advisory]
        out.append({"experiment": experiment, "variant": variant,
                    "reasons": _reasons_of(failed, stop_reason, stop_detail, verdict_reason, unresolved)})
    return out


def top_reasons(failing: list[dict[str, Any]], *, limit: int = 5) -> list[dict[str, Any]]:
    """The most frequent reasons among failing runs: how many runs each, most first, ties by text."""
    counts: dict[Optional[str], dict[str, Any]] = {}
    for run in failing:
        for r in {r["reason"]: r for r in run["reasons"]}.values():  # a run counts once per reason
            entry = counts.setdefault(r["reason"], {**r, "count": 0})
            entry["count"] += 1
    return sorted(counts.values(), key=lambda e: (-e["count"], e["reason"] is None, e["reason"] or ""))[:limit]
