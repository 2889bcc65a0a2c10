"""What a run's page shows above its steps, read and shaped in one place: the run page,
its live refresh, the pair view and the standalone HTML export all start from `run_header`."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from . import failures, removal
from .criteria import run_gate_threshold
from .models import RunPublic
from .present import budget_gauges, token_parts
from .queries import run_detail
from .queries.cache import run_cached

#: The run fields pages and the JSON API show (the rest are the board's own bookkeeping).
PUBLIC_FIELDS = frozenset(RunPublic.model_fields) | {"tags"}
#: Run-level events (and events of steps with no step record) a run page lists at most.
RUN_EVENTS_SHOWN = 500


def public(row: dict[str, Any]) -> dict[str, Any]:
    """The fields of a run row that pages and the API show."""
    return {k: v for k, v in row.items() if k in PUBLIC_FIELDS}


def run_header(session: Session, *, row: dict[str, Any]) -> dict[str, Any]:
    """Everything the run view shows above its steps, from the run's whole row
    (`app.deps.RunRowDep`); `_pk` and `_updated_at` are for the caller, not the page."""
    pk = row["id"]
    early = run_detail.get_early_stop(session, run_pk=pk)
    criteria = run_detail.get_criteria(session, run_pk=pk, early_stop_enabled=row["early_stop_enabled"],
                                       early_stopped=early is not None,
                                       armed_ids=early.get("armed_criteria") if early else None)
    run = public(row)
    failing = failures.failing_criteria(criteria) if row["verdict"] in failures.FAILING else []
    run["start_record"] = row["start_record"]
    run["end_record"] = row["end_record"]
    gauges = budget_gauges(run)
    return {
        "run": run,
        "criteria": criteria,
        "failing_criteria": failing,
        "upload": removal.upload_of(session.connection(), run_pk=pk),
        "early_stop": early,
        #: the weighted armed gate's threshold when below 1 (the header says the verdict needed only that share)
        "gate_threshold": run_gate_threshold(early.get("record"), row["start_record"]) if early else None,
        "tokens": token_parts(run),
        "budget": {g["name"]: g["gauge"] for g in gauges},
        "budget_gauges": gauges,
        "lane": run_cached(session, run_pk=pk, updated_at=row["updated_at"], name="lane",
                           compute=lambda: run_detail.get_lane(session, run_pk=pk)),
        "run_events": run_detail.get_run_events(session, run_pk=pk, limit=RUN_EVENTS_SHOWN),
        "run_events_count": run_detail.count_run_events(session, run_pk=pk),
        "stepless_events": run_cached(
            session, run_pk=pk, updated_at=row["updated_at"], name="stepless",
            compute=lambda: run_detail.get_stepless_events(session, run_pk=pk, limit=RUN_EVENTS_SHOWN)),
        "_pk": pk,
        "_updated_at": row["updated_at"],
    }
