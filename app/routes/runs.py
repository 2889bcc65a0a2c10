"""Runs: the list (`/`, JSON `/api/runs`), one run (`/runs/{id}`, JSON `/api/runs/{id}`), its steps."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from fastapi import APIRouter, Depends, Query, Request

from .. import queries
from ..deps import SessionDep, SettingsDep
from ..errors import QitaError
from ..models import RunPublic
from ..present import gauge
from ..render import respond

router = APIRouter(tags=["runs"])

PUBLIC_FIELDS = set(RunPublic.model_fields)


def _bool(value: Optional[str]) -> Optional[bool]:
    if value in (None, "", "any"):
        return None
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off"):
        return False
    raise QitaError(f"early_stopped must be true or false, not {value[:40]!r}")


def run_filters(
    q: Annotated[Optional[str], Query(max_length=500, description="Search run id, task id, objective, final result, stop detail")] = None,
    experiment: Optional[str] = None,
    variant: Optional[str] = None,
    state: Optional[Literal["running", "abandoned", "finished"]] = None,
    stop_reason: Optional[str] = None,
    verdict: Optional[Literal["pass", "fail", "not_graded", "none"]] = None,
    early_stopped: Annotated[Optional[str], Query(description="true or false")] = None,
    model: Optional[str] = None,
    tag: Optional[str] = None,
    task_id: Optional[str] = None,
    sort: Literal["started", "steps", "tokens", "duration", "run_id"] = "started",
    order: Literal["asc", "desc"] = "desc",
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> queries.RunFilters:
    """The list's query parameters as one object."""
    return queries.RunFilters(q=q or None, experiment=experiment or None, variant=variant or None, state=state,
                              stop_reason=stop_reason or None, verdict=verdict, early_stopped=_bool(early_stopped),
                              model=model or None, tag=tag or None, task_id=task_id or None, sort=sort, order=order,
                              offset=offset, limit=limit)


FiltersDep = Annotated[queries.RunFilters, Depends(run_filters)]


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k in PUBLIC_FIELDS or k in ("tags",)}


@router.get("/", include_in_schema=False)
@router.get("/api/runs", summary="List runs")
def list_runs(request: Request, session: SessionDep, filters: FiltersDep) -> Any:
    """Runs matching the search and filters, one page, with figures for the whole filtered set."""
    rows, count = queries.list_runs(session, filters=filters)
    data = {
        "data": [_public(r) for r in rows],
        "count": count,
        "offset": filters.offset,
        "limit": filters.limit,
        "filters": filters.as_params(),
        "stats": queries.run_stats(session, filters=filters),
        "version": request.app.state.writer.version,
    }
    context = {"filters": filters, "facets": queries.facet_values(session) if not request.url.path.startswith("/api/") else {}}
    return respond(request, "runs.html", data, fragment="_runs_results.html", context=context)


def load_run(session, run_id: str) -> dict[str, Any]:
    """Everything the run view shows above its steps."""
    row = queries.get_run_row(session, run_id=run_id)
    if row is None:
        raise QitaError("no run with this id", status=404)
    early = queries.get_early_stop(session, run_pk=row["id"])
    criteria = queries.get_criteria(session, run_pk=row["id"], early_stop_enabled=row["early_stop_enabled"],
                                    early_stopped=early is not None,
                                    armed_ids=early.get("armed_criteria") if early else None)
    run = _public(row)
    run["start_record"] = row["start_record"]
    run["end_record"] = row["end_record"]
    return {
        "run": run,
        "criteria": criteria,
        "early_stop": early,
        "budget": {
            "steps": gauge(row["steps"], row["budget_max_steps"]),
            "tokens": gauge(row["tokens_total"], row["budget_max_tokens"]),
            "time": gauge(row["elapsed_s"], row["budget_max_runtime_s"]),
        },
        "lane": queries.get_lane(session, run_pk=row["id"]),
        "run_events": queries.get_run_events(session, run_pk=row["id"]),
        "_pk": row["id"],
    }


@router.get("/runs/{run_id:runid}", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}", summary="One run with its criteria and early-stop record")
def get_run(request: Request, session: SessionDep, settings: SettingsDep, run_id: str) -> Any:
    """One run: header, criteria, early-stop record, verdict lane (steps come from /steps)."""
    data = load_run(session, run_id)
    pk = data.pop("_pk")
    steps, total = queries.get_steps(session, run_pk=pk, offset=0, limit=settings.page_steps)
    context = {"steps": steps, "steps_total": total, "offset": 0, "limit": settings.page_steps}
    return respond(request, "run.html", data, fragment="_run_header.html", context=context)


@router.get("/runs/{run_id:runid}/steps", include_in_schema=False)
@router.get("/api/runs/{run_id:runid}/steps", summary="A block of a run's steps with their critic outputs")
def get_steps(request: Request, session: SessionDep, settings: SettingsDep, run_id: str,
              offset: Annotated[int, Query(ge=0, le=100_000_000)] = 0,
              limit: Annotated[Optional[int], Query(ge=1, le=200)] = None) -> Any:
    """Steps `offset` to `offset + limit` of the run, each with every critic output and its events."""
    row = queries.get_run_row(session, run_id=run_id)
    if row is None:
        raise QitaError("no run with this id", status=404)
    limit = limit or settings.page_steps
    steps, total = queries.get_steps(session, run_pk=row["id"], offset=offset, limit=limit)
    data = {"data": steps, "count": total, "offset": offset, "limit": limit}
    context = {"run": _public(row), "steps": steps, "steps_total": total, "offset": offset, "limit": limit}
    return respond(request, "steps.html", data, fragment="_steps.html", context=context)
