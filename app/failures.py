"""Why a failing run failed: its criteria as the verdict weighed them, and the reasons
the runs list and the experiments overview count.

- A run is failing when its verdict is `fail` or `error`; only failing runs have reasons.
- A criterion gates the verdict as app.derive says: for a run gated on its armed criteria
  (it stopped early) only the armed ones; otherwise every gating criterion the run
  declared. A failing run's reasons are its gating criteria that failed
  ("criterion X failed"); a failing run with none (its verdict was recorded by the run,
  or it errored) is counted under how it ended: its stop detail, else its stop reason.
- A stop detail such as "final_result is set" says how a run ended, not why it failed:
  it is only a reason when no criterion explains the failure.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import select
from sqlmodel import Session

from .derive import criterion_passed, is_armed
from .models import CRITERIA, EARLY, RUNS

#: Verdicts of runs that count as failing (an errored run fails, as coder_eval counts it).
FAILING = ("fail", "error")


def _raw_score(stored: Any, result: Any) -> Any:
    """The score as the criterion record wrote it, when none was stored (e.g. out of range
    or not a number): the page shows it as written rather than as absent."""
    if stored is not None or not isinstance(result, dict):
        return None
    return result.get("score")


def classify_criteria(rows: list[dict[str, Any]], *, early_stop_enabled: bool, early_stopped: bool,
                      armed_ids: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """A run's criterion rows with armed / advisory / informational flags and effective pass."""
    ids = set(armed_ids or [])
    any_spec_armed = any(is_armed(early_stop_enabled, r["stop_when"]) for r in rows)
    declared = any(r["has_spec"] for r in rows)
    any_armed = any(is_armed(early_stop_enabled, r["stop_when"])
                    or (early_stop_enabled and not any_spec_armed and r["criterion_id"] in ids) for r in rows)
    out = []
    for r in rows:
        armed = is_armed(early_stop_enabled, r["stop_when"]) or (
            early_stop_enabled and not any_spec_armed and r["criterion_id"] in ids)
        # A result for an id the run never declared is shown but does not gate (app.derive).
        gating = bool(r["gating"]) and (r["has_spec"] or not declared)
        out.append({
            "id": r["criterion_id"],
            "type": r.get("type"),
            "description": r.get("description"),
            "stop_when": r["stop_when"],
            "gating": r["gating"],
            "pass_threshold": r["pass_threshold"],
            "armed": armed,
            # Advisory only when the verdict really is gated on armed criteria (app.derive).
            "advisory": early_stopped and any_armed and not armed and gating,
            "informational": not gating,
            "graded": r["has_result"],
            "score": r["score"],
            "passed": criterion_passed(r["score"], r["passed"], r["pass_threshold"], by_score=early_stopped and armed)
            if r["has_result"] else None,
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
    return [c for c in criteria if c["passed"] is False and not c["informational"] and not c["advisory"]]


def run_reasons(criteria: list[dict[str, Any]], *, stop_reason: Optional[str],
                stop_detail: Optional[str]) -> list[dict[str, Any]]:
    """A failing run's reasons: each failing criterion, else how the run ended."""
    failed = failing_criteria(criteria)
    if failed:
        return [{"reason": f"criterion {c['id']} failed", "criterion": c["id"], "stop_reason": None} for c in failed]
    if stop_detail:
        return [{"reason": stop_detail, "criterion": None, "stop_reason": stop_reason}]
    from .present import stop_reason_info

    # No criterion, detail or stop reason: counted under no reason (listed last).
    text = stop_reason_info(stop_reason)["label"] if stop_reason else None
    return [{"reason": text, "criterion": None, "stop_reason": stop_reason}]


_CRITERION_COLUMNS = [CRITERIA.c.run_pk, CRITERIA.c.criterion_id, CRITERIA.c.stop_when, CRITERIA.c.gating,
                      CRITERIA.c.pass_threshold, CRITERIA.c.has_result, CRITERIA.c.score, CRITERIA.c.passed,
                      CRITERIA.c.has_spec]


def failing_run_reasons(session: Session, *, conds: list[Any]) -> list[dict[str, Any]]:
    """Every failing run among those matching `conds`, with its experiment, variant and reasons.

    Three queries whatever the number of runs (runs, their criteria, their early-stop records).
    """
    where = [*conds, RUNS.c.verdict.in_(FAILING)]
    runs = [dict(r) for r in session.execute(
        select(RUNS.c.id, RUNS.c.experiment, RUNS.c.variant, RUNS.c.early_stop_enabled, RUNS.c.early_stopped,
               RUNS.c.stop_reason, RUNS.c.stop_detail).where(*where)).mappings()]
    if not runs:
        return []
    ids = select(RUNS.c.id).where(*where)
    criteria: dict[int, list[dict[str, Any]]] = {}
    for r in session.execute(select(*_CRITERION_COLUMNS).where(CRITERIA.c.run_pk.in_(ids))
                             .order_by(CRITERIA.c.run_pk, CRITERIA.c.position, CRITERIA.c.id)).mappings():
        criteria.setdefault(r["run_pk"], []).append(dict(r))
    armed = {pk: a for pk, a in session.execute(select(EARLY.c.run_pk, EARLY.c.armed_criteria)
                                                .where(EARLY.c.run_pk.in_(ids)))}
    out = []
    for run in runs:
        classified = classify_criteria(criteria.get(run["id"], []), early_stop_enabled=bool(run["early_stop_enabled"]),
                                       early_stopped=bool(run["early_stopped"]),
                                       armed_ids=armed.get(run["id"]) if isinstance(armed.get(run["id"]), list) else None)
        out.append({"experiment": run["experiment"], "variant": run["variant"],
                    "reasons": run_reasons(classified, stop_reason=run["stop_reason"], stop_detail=run["stop_detail"])})
    return out


def top_reasons(failing: list[dict[str, Any]], *, limit: int = 5) -> list[dict[str, Any]]:
    """The most frequent reasons among failing runs: how many runs each, most first, ties by text."""
    counts: dict[Optional[str], dict[str, Any]] = {}
    for run in failing:
        for r in {r["reason"]: r for r in run["reasons"]}.values():  # a run counts once per reason
            entry = counts.setdefault(r["reason"], {**r, "count": 0})
            entry["count"] += 1
    return sorted(counts.values(), key=lambda e: (-e["count"], e["reason"] is None, e["reason"] or ""))[:limit]
